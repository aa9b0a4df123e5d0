"""`ddpdoctor run --trace FILE`: a Chrome / Perfetto trace of the real job, in the probe's convention
(ddpdoctor/probe/trace.py): one track (thread) per rank, every optimizer step as a complete ("X")
slice with its split nested inside it, the rank's last collectives, and the job's events (a stall,
a straggler, a death, a kill) as instant events. Timestamps are microseconds from the job's start, so
ranks line up on one axis. Open it in https://ui.perfetto.dev or chrome://tracing.

The split's parts are sums over the step, measured; their order inside the step is not recorded, so
they are laid end to end in a fixed order (data, compute, collective, optimizer, other) and marked so.
"""
from __future__ import annotations

import json
import os
from typing import Dict, List, Optional

from ..facts.steps import PARTS, sampled, step_ms

_ORDER_NOTE = "the parts' sums are measured; their order inside the step is not (laid out data, compute, collective, optimizer, other)"


def trace_events(t0: float, ranks: Dict[int, dict], events: List[dict], host: str = "") -> List[dict]:
    """ranks: rank -> {'host', 'pid', 'steps': [step records (facts.steps)], 'colls': [section.collectives()],
    'end': {...} or None}; events: [{'t', 'kind', 'title', 'ranks': [...]}]."""

    def us(epoch: float) -> float:
        return round((epoch - t0) * 1e6, 1)

    out: List[dict] = [{"name": "process_name", "ph": "M", "pid": 1, "tid": 0,
                        "args": {"name": f"ddpdoctor run{(' on ' + host) if host else ''} ({len(ranks)} rank(s))"}}]
    for rank, r in sorted(ranks.items()):
        tid = int(rank)
        out.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": tid,
                    "args": {"name": f"rank {rank} ({r.get('host') or '?'}, pid {r.get('pid')})"}})
        out.append({"name": "thread_sort_index", "ph": "M", "pid": 1, "tid": tid, "args": {"sort_index": tid}})
        last_end = 0.0
        for s in r.get("steps") or []:
            step, _batches, t_end = s[0], s[1], s[2]
            parts = s[3:8] if sampled(s) else ()  # a step whose split was not sampled: its length alone
            dur = round(step_ms(s) * 1000, 1)
            ts = max(round(us(t_end) - dur, 1), last_end)
            dur = max(0.0, round(us(t_end) - ts, 1))
            args = {p: round(v, 3) for p, v in zip(PARTS, parts)} if parts else {"split": "not sampled"}
            if s[8] == s[8]:  # NaN on a step that was not sampled (its CPU is read with the next sampled one)
                args["cpu_ms"] = round(s[8], 3)
            out.append({"name": f"step {step}", "cat": "step", "ph": "X", "pid": 1, "tid": tid, "ts": ts, "dur": dur,
                        "args": dict(args, note=_ORDER_NOTE)})
            cursor = ts
            for p, v in zip(PARTS, parts):
                d = min(round(v * 1000, 1), round(ts + dur - cursor, 1))
                if d > 0:
                    out.append({"name": p, "cat": "split", "ph": "X", "pid": 1, "tid": tid, "ts": round(cursor, 1),
                                "dur": d})
                    cursor = round(cursor + d, 1)
            last_end = round(ts + dur, 1)
        for c in r.get("colls") or []:
            grp = "default group" if not c.get("group") else f"group {c.get('group_name')}"
            out.append({"name": f"{c.get('op')} #{c.get('seq')} ({grp})", "cat": "collective", "ph": "i", "s": "t",
                        "pid": 1, "tid": tid, "ts": us(c.get("t") or t0),
                        "args": {"state": c.get("state"), "bytes": c.get("bytes"), "line": c.get("line")}})
        end = r.get("end")
        if end and end.get("t"):
            how = end.get("exception", {}).get("type") if end.get("how") == "exception" else end.get("signal") or end.get("how")
            out.append({"name": f"ended: {how}", "cat": "death", "ph": "i", "s": "t", "pid": 1, "tid": tid,
                        "ts": us(end["t"]), "args": {k: end.get(k) for k in ("how", "signal", "exit_code", "why")}})
    for e in events:
        title = (e.get("title") or e.get("kind") or "")[:200]
        scope = {"s": "g"} if not e.get("ranks") else {"s": "t"}
        targets = e.get("ranks") or [None]
        for rk in targets:
            ev = {"name": f"{e.get('kind')}: {title}", "cat": e.get("kind"), "ph": "i", "pid": 1,
                  "tid": int(rk) if rk is not None else 0, "ts": us(e.get("t") or t0),
                  "args": {"findings": e.get("findings")}}
            ev.update(scope)
            out.append(ev)
    return out


def write_trace(path: str, t0: float, ranks: Dict[int, dict], events: List[dict], host: str = "") -> str:
    from ..model.redact import redact_tree

    doc = {"traceEvents": trace_events(t0, ranks, events, host), "displayTimeUnit": "ms",
           "otherData": {"tool": "ddpdoctor run", "note": _ORDER_NOTE}}
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(redact_tree(doc), fh)
    os.replace(tmp, path)
    return path


def job_ranks(sup) -> Dict[int, dict]:
    """What the trace shows of each rank, from a finished Supervisor."""
    from . import section

    sec = sup.sections[-1] if sup.sections else None
    ends = {r.get("pid"): r.get("end") for r in (sec or {}).get("ranks") or []}
    out: Dict[int, dict] = {}
    for p in sup._rank_procs():
        rank = section._rank_of(p.facts_light())
        if rank is None:
            continue
        out[rank] = {"host": p.info.get("host"), "pid": p.pid, "steps": list(p.steps),
                     "colls": section.collectives(p.beacon or {}), "end": ends.get(p.pid)}
    return out


def event_list(sup) -> List[dict]:
    out = []
    for e in sup.events:
        ranks: Optional[list] = None
        if e.get("kind") == "straggler":
            ranks = next((s.get("ranks") for s in sup.straggler_reports if abs((s.get("t") or 0) - e["t"]) < 5), None)
        out.append({"t": e.get("t"), "kind": e.get("kind"), "title": e.get("title") or ", ".join(e.get("findings") or []),
                    "findings": e.get("findings"), "ranks": ranks})
    return out
