"""The `check` pipeline: gather this machine (or load a recorded snapshot), add the comm test and
the lint section when asked, judge, return a Report. The CLI only renders it."""
from __future__ import annotations

from typing import Optional

from ddpdoctor.model import Report
from ddpdoctor.pipeline.judge import judge
from ddpdoctor.pipeline.snapshot import Snapshot


def wants_comm(snapshot: Snapshot) -> bool:
    """`check` runs the live comm test where GPUs are visible or a launcher says WORLD_SIZE>1."""
    launcher = snapshot.get("launcher") or {}
    if (launcher.get("world_size") or 0) > 1:
        return True
    gpus = snapshot.get("gpus") or {}
    return bool(gpus.get("devices")) and not gpus.get("unavailable") and not gpus.get("error")


def run_check(snapshot_path: Optional[str] = None, only: Optional[set] = None, ignore: Optional[set] = None,
              comm: bool = True, scripts: Optional[list] = None, sources=None) -> Report:
    if snapshot_path:
        snapshot = Snapshot.load(snapshot_path)
    else:
        from ddpdoctor.pipeline.snapshot import live_snapshot

        snapshot = live_snapshot(sources)
        if comm and wants_comm(snapshot):
            try:
                from ddpdoctor.comm.api import comm_section_for_check
            except ModuleNotFoundError:
                comm_section_for_check = None
            if comm_section_for_check is not None:
                snapshot.sections["comm"] = comm_section_for_check(snapshot)
        else:  # say why the comm checks were skipped, rather than "no 'comm' facts"
            snapshot.sections["comm"] = {"unavailable": "the connectivity test was not run: --no-comm" if not comm else
                                         "the connectivity test runs where GPUs are visible or a launcher says "
                                         "WORLD_SIZE>1; run `ddpdoctor comm` to test anyway"}
        if not scripts:
            snapshot.sections["lint"] = {"unavailable": "no training script given (check --script train.py)"}
        snapshot.sections.setdefault("probe", {"unavailable": "measured by a training run: `ddpdoctor probe`, or "
                                                              "DoctorCallback inside your Trainer"})
    if scripts:
        try:
            from ddpdoctor.lint.api import lint_section
        except ModuleNotFoundError:
            lint_section = None
        if lint_section is not None:
            snapshot.sections["lint"] = lint_section(scripts, only=only, ignore=ignore)
            from ddpdoctor.model.registry import REGISTRY

            if only is not None and any(getattr(REGISTRY.get(i), "kind", "") == "rule" for i in only):
                only = only | {"LINT000"}  # the relay check that turns the lint section into findings
    return judge(snapshot, "check", only, ignore)
