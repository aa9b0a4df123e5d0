"""`--trace FILE`: Chrome / Perfetto trace-event JSON of the probe run.

One process per mode, one track (thread) per rank; start-up phases and every optimizer step as
complete ("X") slices, each step with its phases nested inside. Timestamps are microseconds from
the earliest launch, so ranks and modes line up on one axis. Open in https://ui.perfetto.dev or
chrome://tracing. Format: the Trace Event Format document (JSON Object Format).
"""
from __future__ import annotations

import json
import os
from typing import Dict, List

from ddpdoctor.probe.analyze import STARTUP_PHASES


def trace_events(runs: Dict[str, dict]) -> List[dict]:
    origins = []
    for run in runs.values():
        if run.get("launched"):
            origins.append(run["launched"])
        for rec in run.get("ranks") or []:
            ms = rec.get("milestones") or {}
            if ms.get("process_start"):
                origins.append(ms["process_start"])
    t0 = min(origins) if origins else 0.0

    def us(epoch: float) -> float:
        return round((epoch - t0) * 1e6, 1)

    events: List[dict] = []
    for pid, (mode, run) in enumerate(runs.items(), start=1):
        events.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                       "args": {"name": f"{mode} ({run.get('nproc', '?')} rank(s))"}})
        events.append({"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0, "args": {"sort_index": pid}})
        for rec in run.get("ranks") or []:
            tid = int(rec.get("rank") or 0)
            events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                           "args": {"name": f"rank {tid} ({rec.get('host', '?')})"}})
            ms = dict(rec.get("milestones") or {})
            if run.get("launched"):
                ms.setdefault("launched", run["launched"])
            for name, a, b in STARTUP_PHASES:
                if ms.get(a) is not None and ms.get(b) is not None and ms[b] >= ms[a]:
                    events.append({"name": name, "cat": "startup", "ph": "X", "pid": pid, "tid": tid,
                                   "ts": us(ms[a]), "dur": round((ms[b] - ms[a]) * 1e6, 1)})
            last_end = 0.0
            for step in rec.get("steps") or []:
                start = step.get("start")
                if start is None:
                    continue
                # Slices on one track must nest or follow each other: never start before the last ended.
                ts = max(us(start), last_end)
                dur = round(step.get("total_ms", 0) * 1000, 1)
                end = round(ts + dur, 1)
                events.append({"name": f"step {step.get('step')}", "cat": "step", "ph": "X", "pid": pid, "tid": tid,
                               "ts": ts, "dur": dur, "args": {"phases_ms": step.get("phases"), "comm": step.get("comm")}})
                cursor = ts
                for phase, dur_ms in step.get("seq") or []:
                    d = min(round(dur_ms * 1000, 1), round(end - cursor, 1))
                    if d > 0:
                        events.append({"name": phase, "cat": "phase", "ph": "X", "pid": pid, "tid": tid,
                                       "ts": round(cursor, 1), "dur": d})
                        cursor = round(cursor + d, 1)
                last_end = end
            if rec.get("error"):
                when = ms.get("train_end") or ms.get("first_step_end") or ms.get("process_start") or t0
                events.append({"name": f"error: {rec['error'].get('type')}", "ph": "i", "s": "t", "pid": pid,
                               "tid": tid, "ts": us(when), "args": {"message": rec["error"].get("message")}})
        for f in run.get("failures") or []:
            if f.get("rank") is not None and not any(r.get("rank") == f["rank"] for r in run.get("ranks") or []):
                events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": int(f["rank"]),
                               "args": {"name": f"rank {f['rank']} (failed)"}})
                events.append({"name": f"failed: {(f.get('error') or {}).get('message', 'no report')}"[:120],
                               "ph": "i", "s": "t", "pid": pid, "tid": int(f["rank"]),
                               "ts": us(run.get("launched") or t0) + (run.get("wall_s") or 0) * 1e6})
    return events


def write_trace(path: str, runs: Dict[str, dict]) -> str:
    from ddpdoctor.model.redact import redact_tree

    doc = {"traceEvents": trace_events(runs), "displayTimeUnit": "ms",
           "otherData": {"tool": "ddpdoctor probe"}}
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(redact_tree(doc), fh)
    os.replace(tmp, path)
    return path
