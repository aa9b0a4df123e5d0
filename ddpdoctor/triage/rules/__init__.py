"""Triage rules: one module per fault family. `registry.load_triage_rules()` imports them all.

Each rule is registered in the same registry as the checks, with `kind="log"` and family "logs",
so `ddpdoctor explain LOG001` and `ddpdoctor checks` document it like any check. A rule takes the
reconstructed `Job` and yields findings built with `hit(...)`, which adds the `rank:N`, `host:NAME`,
`path:FILE` and `line:N` subjects and the first occurrence, and records where the finding sorts:

- stage 0: a rank died (signal, exception, CUDA OOM): the root cause, earliest first;
- stage 1: the job could not start (port, store, duplicate GPU, pickling, bootstrapping);
- stage 2: a hang nobody's death explains (collective or barrier timeouts);
- stage 3: warnings that may explain a hang or a slow job (forks, versions).

A rule that explains another rule's lines claims them (`claim`), so the generic rules
(LOG004 rank-exception) never report the same fault twice.
"""
from __future__ import annotations

from typing import Callable, Dict, Iterable, List, Optional, Sequence

from ...model import Finding
from ...registry import check
from ..job import Job, _fmt_ts
from ..lines import Line

INF = float("inf")


def rule(id: str, slug: str, *, catalogue: Sequence[str] = (), order: int = 50, **extra) -> Callable:
    """Register a triage rule: `@rule("LOG002", "rank-oom-killed", catalogue=("B7",))`.

    `order`: rules run in this order; specific rules (which claim lines) before generic ones."""
    return check(id, slug, family="logs", kind="log", catalogue=catalogue, order=order, **extra)


def first_seen(job: Job, line: Optional[Line]) -> dict:
    if line is None:
        return {}
    out = {"path": job.paths[line.src] if line.src < len(job.paths) else "?", "line": line.lineno}
    if line.ts is not None:
        out["time"] = _fmt_ts(line.ts)
    out["text"] = line.text[:300]
    return out


def hit(job: Job, severity: str, title: str, *, at: Optional[Line] = None, stage: int = 2, ranks: Iterable = (),
        hosts: Iterable = (), detail: str = "", fix: str = "", evidence: Optional[dict] = None,
        count: Optional[int] = None, ts: Optional[float] = None) -> Finding:
    """A finding with the triage subjects and evidence (first occurrence, count)."""
    subjects: List[str] = []
    for r in sorted({r for r in ranks if r is not None and r >= 0}):
        subjects.append(f"rank:{r}")
    for h in sorted({h for h in hosts if h}):
        subjects.append(f"host:{h}")
    ev: Dict[str, object] = {}
    if at is not None:
        fs = first_seen(job, at)
        subjects += [f"path:{fs['path']}", f"line:{fs['line']}"]
        ev["first_seen"] = fs
    if count is not None:
        ev["count"] = count
    ev.update(evidence or {})
    f = Finding(severity, title, detail=detail, fix=fix, subjects=subjects, evidence=ev)
    when = ts if ts is not None else (at.ts if at is not None and at.ts is not None else INF)
    pos = (at.src, at.lineno) if at is not None else (INF, INF)
    job.sort_keys[title] = (stage, when, pos)
    return f


def claim(job: Job, *ranks: Optional[int]) -> None:
    """These ranks' exceptions and exits are explained; the generic rules leave them alone."""
    job.claimed.update(ranks)


def ranks_text(ranks: Iterable[int]) -> str:
    """[0, 1, 2, 3, 5] -> '0-3, 5'."""
    rs = sorted(set(ranks))
    if not rs:
        return "none"
    out, start, prev = [], rs[0], rs[0]
    for r in rs[1:] + [None]:
        if r is not None and r == prev + 1:
            prev = r
            continue
        out.append(f"{start}" if start == prev else (f"{start}, {prev}" if prev == start + 1 else f"{start}-{prev}"))
        if r is not None:
            start = prev = r
    return ", ".join(out)


def who(ranks: Iterable[int]) -> str:
    """'rank 3' or 'ranks 0-2, 5'."""
    rs = sorted(set(ranks))
    return f"rank{'s' if len(rs) != 1 else ''} {ranks_text(rs)}"


def consequences(job: Job, dead: Iterable[int]) -> dict:
    """What the other ranks printed because these ranks died: their watchdog timeouts, folded here."""
    dead = set(dead)
    table = [row for row in job.timeout_table() if row["rank"] not in dead]
    out: dict = {}
    if table:
        out["timed_out_ranks"] = [row["rank"] for row in table]
        ops = {(row.get("op"), row.get("seq")) for row in table if row.get("op") or row.get("seq")}
        if ops:
            out["timed_out_in"] = [{"op": op, "seq": seq} for op, seq in sorted(ops, key=lambda x: (str(x[0]), x[1] or 0))][:4]
        n = sum(job.occ[k].count for k in ("watchdog", "watchdog_seq") if k in job.occ)
        out["timeout_lines"] = n
    aborted = job.get("nccl_aborted")
    if aborted and aborted.count:
        out["peer_errors"] = aborted.count
    term = [e for e in job.exits if e.signal == "SIGTERM" and e.rank not in dead]
    if term:
        out["stopped_by_launcher"] = sorted({e.rank for e in term if e.rank is not None})
    job.folded = True if out.get("timed_out_ranks") else job.folded
    return out


def consequence_sentence(cons: dict) -> str:
    if not cons:
        return ""
    parts = []
    if cons.get("timed_out_ranks"):
        what = ""
        if cons.get("timed_out_in"):
            first = cons["timed_out_in"][0]
            what = f" in {first['op'] or 'a collective'}" + (f" #{first['seq']}" if first.get("seq") else "")
        n, lines = len(cons["timed_out_ranks"]), cons.get("timeout_lines", 0)
        parts.append(f"{'Ranks' if n > 1 else 'Rank'} {ranks_text(cons['timed_out_ranks'])} then timed out{what} "
                     f"waiting for it ({lines} watchdog line{'s' if lines != 1 else ''}): a consequence, not a second "
                     "fault.")
    if cons.get("stopped_by_launcher"):
        n = len(cons["stopped_by_launcher"])
        parts.append(f"torchrun then stopped {'ranks' if n > 1 else 'rank'} {ranks_text(cons['stopped_by_launcher'])} "
                     "(SIGTERM).")
    return " ".join(parts)
