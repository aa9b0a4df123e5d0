"""Judge a snapshot: run every selected check through the one runner and wrap the result in a Report."""
from __future__ import annotations

from typing import Optional

from ddpdoctor.model import Report
from ddpdoctor.pipeline.snapshot import Snapshot


def judge(snapshot: Snapshot, command: str = "check", only: Optional[set] = None,
          ignore: Optional[set] = None, when: str = "static") -> Report:
    """Run every registered check that runs at `when` over `snapshot`. Pure apart from lazy gathering."""
    from ddpdoctor.pipeline.runner import load_all, run_checks

    load_all()
    findings, skipped, ran = run_checks(snapshot, only=only, ignore=ignore, when=when)
    families = []
    from ddpdoctor.model.registry import REGISTRY

    for spec in sorted(REGISTRY.values(), key=lambda s: s.id):
        if spec.kind == "check" and when in spec.when and spec.family not in families and not any(s.id == spec.id for s in skipped) \
                and (only is None or spec.id in only) and not (ignore and spec.id in ignore):
            families.append(spec.family)
    return Report(command=command, findings=findings, skipped=skipped, checks_run=ran, families=families,
                  snapshot=snapshot.to_dict)  # made when the markdown renderer reads it (Report.snapshot_dict)
