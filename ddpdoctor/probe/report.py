"""The probe's verdict: collected per-rank records -> analysis, checks and table, as a Report.

Shared by the parent (`run_probe`) and by rank 0 in worker mode, so it imports neither of them.
"""
from __future__ import annotations

import os
import socket
from typing import Dict, List, Optional

from ddpdoctor.model import Report

MAIN, BASELINE = "torchrun", "1-rank"


def report_from_runs(runs: Dict[str, dict], config: dict, trace_path: Optional[str] = None,
                     main: str = MAIN, only: Optional[set] = None, ignore: Optional[set] = None,
                     reference: Optional[dict] = None) -> Report:
    """Analysis + checks + table for collected runs. Pure except for writing the trace file."""
    from ddpdoctor.model.redact import redact_tree
    from ddpdoctor.pipeline.runner import load_all, run_checks
    from ddpdoctor.pipeline.snapshot import Snapshot
    from ddpdoctor.probe.analyze import probe_section
    from ddpdoctor.probe.table import summary_lines

    section = probe_section(runs, config, main=main, baseline=BASELINE,
                            host={"hostname": socket.gethostname(), "cpu_count": os.cpu_count()})
    if reference:
        section["comm_reference"] = reference
        if reference.get("busbw_gbps"):
            section["expected_busbw_gbps"] = reference["busbw_gbps"]
    if trace_path:
        from ddpdoctor.probe.trace import write_trace

        write_trace(trace_path, runs)
        section["trace"] = trace_path
    snap = Snapshot(sections={"probe": section})
    load_all()
    from ddpdoctor.model.registry import REGISTRY

    specs = [s for s in REGISTRY.values() if s.family == "probe"]
    findings, skipped, ran = run_checks(snap, only=only, ignore=ignore, specs=specs)
    report = Report(command="probe", findings=findings, skipped=skipped, checks_run=ran, families=["probe"],
                    snapshot=None)
    report.extra["probe"] = redact_tree(section)
    report.extra["text_sections"] = summary_lines(section)
    return report


def report_from_records(records_by_mode: Dict[str, List[dict]], trace_path: Optional[str] = None) -> Report:
    """Worker mode (a user's torchrun/srun): records gathered by rank 0, no baseline."""
    runs = {}
    for mode, recs in records_by_mode.items():
        runs[mode] = {"nproc": max((r.get("world_size") or 1) for r in recs) if recs else 0, "ranks": recs,
                      "status": "ok" if all(r.get("complete") for r in recs) else "failed",
                      "launcher": "external (torchrun / srun)", "failures": []}
    mode = next(iter(runs), MAIN)
    cfg = dict((records_by_mode.get(mode) or [{}])[0].get("config") or {})
    cfg["command"] = "python -m ddpdoctor.probe"
    return report_from_runs(runs, cfg, trace_path=trace_path, main=mode)
