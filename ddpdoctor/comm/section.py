"""The `comm` snapshot section: the facts of one connectivity test, ready for pure checks.

Built from our launcher's per-rank results (`section_from_launch`) or from rank 0's result under
a user's torchrun/srun (`section_from_rank0`, where rank 0 gathered the others through the store).
Only facts here; `ddpdoctor.checks.comm` decides what they mean.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

SECTION_VERSION = 1


def _phase_table(progress: Dict[str, dict]) -> Dict[str, Dict[str, float]]:
    """{phase: {rank: seconds}} from each rank's phase list (open phases count up to 'now')."""
    table: Dict[str, Dict[str, float]] = {}
    for rank, prog in progress.items():
        for ph in (prog or {}).get("phases") or []:
            start, end = ph.get("start"), ph.get("end") or (prog or {}).get("time")
            if start is None or end is None or ph.get("name") == "teardown":
                continue
            table.setdefault(ph["name"], {})[str(rank)] = round(max(0.0, end - start), 4)
    return table


# Failure kinds that only say "something went wrong elsewhere": a peer's concrete error wins.
GENERIC_KINDS = {"timeout", "deadline", "peer-disconnected", "peer-failed", "missing-ranks", "error"}


def pick_failure(failures: Dict[int, dict]) -> Optional[dict]:
    """The failure to report: the first concrete one (an interface, an address, a mismatch),
    rank 0's otherwise, else the lowest rank's."""
    items = sorted(((int(r), f) for r, f in failures.items() if f), key=lambda kv: (kv[0] != 0, kv[0]))
    for r, f in items:
        if f.get("kind") not in GENERIC_KINDS:
            return {"rank": r, **f}
    return {"rank": items[0][0], **items[0][1]} if items else None


def _first_failure(results: Dict[int, dict]) -> Optional[dict]:
    failures = {r: (res or {}).get("failure") for r, res in results.items()}
    for res in results.values():
        for r, f in (((res or {}).get("global") or {}).get("failures") or {}).items():
            failures.setdefault(int(r), f)
    return pick_failure(failures)


def _diagnosis(results: Dict[int, dict]) -> Optional[dict]:
    for r in sorted(results, key=lambda r: (r != 0, r)):
        d = (results[r] or {}).get("diagnosis")
        if d and d.get("peers"):
            return d
    return None


def section_from_launch(launch, *, backend: str, deadline_s: float, sizes: List[int], mode: str = "local") -> dict:
    """From a `ddpdoctor.launch.LaunchResult` (all ranks on this host)."""
    results = {r.rank: r.result for r in launch.ranks if r.reported}
    r0 = results.get(0) or {}
    g = r0.get("global") or {}
    summaries = dict(g.get("summaries") or {})
    progress = dict(g.get("progress") or {})
    ranks = []
    for r in launch.ranks:
        res = r.result or {}
        if res.get("summary") and str(r.rank) not in summaries:
            summaries[str(r.rank)] = res["summary"]
        progress.setdefault(str(r.rank), {"phases": r.phases, "time": (r.failure_time or None)})
        if r.result is not None:
            progress[str(r.rank)] = {"phases": res.get("phases") or r.phases, "time": None}
        # Local launch: every rank runs on this host, even one that never said so.
        ranks.append({"rank": r.rank, "host": r.host or _this_host(), "pid": r.pid, "reported": r.reported,
                      "ok": bool(res.get("ok")) if r.reported else False, "phase": r.phase,
                      "exitcode": r.exitcode, "signal": r.signal,
                      "failure": res.get("failure"), "stderr_tail": _tail_lines(r.stderr_tail, 12)})
    sec = _base(backend=backend or r0.get("backend"), world=launch.world_size, nproc=launch.nproc, mode=mode,
                deadline_s=deadline_s, sizes=sizes)
    sec.update({
        "master_addr": launch.master_addr, "master_port": launch.master_port, "elapsed_s": launch.elapsed_s,
        "ok": bool(launch.ok and all(x["ok"] for x in ranks)), "timed_out": launch.timed_out,
        "interrupted": launch.interrupted, "teardown": launch.teardown, "launcher_error": launch.agent_error,
        "launcher_log_tail": _tail_lines(launch.agent_log_tail, 8) if launch.agent_error else "",
        "root_cause": launch.root_cause, "ranks": ranks, "summaries": summaries,
        "phases": _phase_table(progress), "failure": _first_failure(results), "diagnosis": _diagnosis(results),
        "all_reduce": r0.get("all_reduce") or _local_allreduce(results), "pairs": g.get("pairs") or
        [p for res in results.values() for p in (res or {}).get("pairs_local") or []],
        "bandwidth": r0.get("bandwidth") or [],
    })
    return sec


def section_from_rank0(out: dict, *, deadline_s: float, mode: str = "torchrun") -> dict:
    """Under a user's launcher: rank 0's result, which holds what the other ranks published."""
    g = out.get("global") or {}
    summaries = {**(out.get("summaries") or {}), **(g.get("summaries") or {})}
    if out.get("summary"):
        summaries.setdefault(str(out.get("rank", 0)), out["summary"])
    world = int(out.get("world_size") or len(summaries) or 1)
    sec = _base(backend=out.get("backend"), world=world, nproc=None, mode=mode, deadline_s=deadline_s, sizes=[])
    progress = g.get("progress") or {}
    sec.update({
        "master_addr": out.get("master_addr"), "master_port": out.get("master_port"),
        "elapsed_s": out.get("elapsed_s"), "ok": bool(out.get("ok")), "timed_out": (out.get("failure") or {}).get(
            "kind") == "deadline", "interrupted": False, "teardown": "clean", "launcher_error": None,
        "root_cause": None, "summaries": summaries, "phases": _phase_table(progress),
        "ranks": [{"rank": int(r), "host": (p or {}).get("host"), "reported": None, "ok": None,
                   "phase": (p or {}).get("phase"), "exitcode": None, "signal": None, "failure": None}
                  for r, p in sorted(progress.items(), key=lambda kv: int(kv[0]))],
        "failure": pick_failure({**{int(r): f for r, f in (g.get("failures") or {}).items()},
                                 int(out.get("rank", 0)): out.get("failure")}),
        "diagnosis": out.get("diagnosis"), "all_reduce": out.get("all_reduce"),
        "pairs": g.get("pairs") or [], "bandwidth": out.get("bandwidth") or [],
    })
    return sec


def preflight_failure(kind: str, message: str, *, backend: str, nproc: int, deadline_s: float,
                      **evidence: Any) -> dict:
    """A section for a test that could not even be launched (e.g. MASTER_ADDR does not resolve)."""
    sec = _base(backend=backend, world=nproc, nproc=nproc, mode="local", deadline_s=deadline_s, sizes=[])
    sec.update({"master_addr": evidence.get("addr"), "master_port": evidence.get("port"), "ok": False, "elapsed_s": 0.0, "timed_out": False, "interrupted": False, "teardown": "clean",
                "launcher_error": None, "root_cause": None, "ranks": [], "summaries": {}, "phases": {},
                "failure": {"rank": None, "phase": "preflight", "kind": kind, "message": message, **evidence},
                "diagnosis": None, "all_reduce": None, "pairs": [], "bandwidth": []})
    return sec


def _base(*, backend, world, nproc, mode, deadline_s, sizes) -> dict:
    return {"version": SECTION_VERSION, "mode": mode, "backend": backend, "world_size": world, "nproc": nproc,
            "deadline_s": deadline_s, "sizes": list(sizes)}


def _local_allreduce(results: Dict[int, dict]) -> Optional[dict]:
    per = {str(r): res.get("all_reduce_local") for r, res in results.items() if (res or {}).get("all_reduce_local")}
    if not per:
        return None
    bad = sorted(int(r) for r, v in per.items() if not v.get("ok"))
    return {"ok": not bad, "bad_ranks": bad, "per_rank": per}


def _this_host() -> str:
    import socket

    return socket.gethostname()


def _tail_lines(text: str, n: int) -> str:
    lines = [ln for ln in (text or "").splitlines() if ln.strip()]
    return "\n".join(lines[-n:])
