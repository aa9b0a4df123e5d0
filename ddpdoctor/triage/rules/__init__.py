"""Triage rules: one module per fault family. `pipeline.runner.load_triage_rules()` imports them all.

Each rule is registered in the same registry as the checks, with `kind="log"` and family "logs",
so `ddpdoctor explain LOG001` and `ddpdoctor checks` document it like any check. A rule takes the
reconstructed `Job` and yields findings built with `hit(...)`, which adds the `rank:N`, `host:NAME`,
`path:FILE` and `line:N` subjects and the first occurrence, and records where the finding sorts:

- stage 0: a rank died (signal, exception, CUDA OOM): the root cause, earliest first;
- stage 1: the job could not start (port, store, duplicate GPU, pickling, bootstrapping);
- stage 2: a hang nobody's death explains (collective or barrier timeouts);
- stage 3: warnings that may explain a hang or a slow job (forks, versions).

What several rules must agree on (the root cause, which rule carries the timeouts, which ranks a
specific rule reports) is derived once in `ddpdoctor.triage.verdict`, so every rule is a pure
function of the job and the rules run in any order.
"""
from __future__ import annotations

from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from ...model import Finding
from ...model.registry import check
from ..job import Job, _fmt_ts
from ..lines import Line
from ..verdict import ranks_text, who  # noqa: F401 - the rules' shared wording

INF = float("inf")


def rule(id: str, slug: str, *, catalogue: Sequence[str] = (), **extra) -> Callable:
    """Register a triage rule: `@rule("LOG002", "rank-oom-killed", catalogue=("B7",))`."""
    return check(id, slug, family="logs", kind="log", when=("triage",), catalogue=catalogue, **extra)


def who_exited(e, rank, cap: bool = False) -> str:
    """"rank 3", or, when the launcher named only the local rank and one node is in sight, "local rank 3 (rank 3 if
    this is the job's only node)": the guess said as one."""
    if getattr(e, "guessed_local", None) is not None and rank is None and e.local_rank is None:
        out = (f"a process (local rank {e.guessed_local} is a guess: the launcher's command names it, and "
               f"torch.distributed.launch's can be the last process it started)")
    elif getattr(e, "rank_guessed", False):
        out = f"local rank {e.local_rank} (rank {rank} if this node is the whole job)"
    elif rank is None:
        out = f"local rank {e.local_rank}" if getattr(e, "local_rank", None) is not None else "a process"
    else:
        out = f"rank {rank}"
    return out[0].upper() + out[1:] if cap else out


def launcher_only_failure(job: Job) -> Optional[int]:
    """The (local) rank of the one process a launcher reports failing (torchrun's "failed (exitcode: 1) local_rank: 0",
    its elastic table, deepspeed's "['python', ..., '--local_rank=0', ...] exits with return code = 1", mp.spawn's
    "process 1 terminated"), or None when none or several do. A message that names no rank is that process's: an
    inference from the exit, which the caller says as one."""
    bad = {(e.rank if e.rank is not None else e.local_rank) for e in job.exits
           if ((e.code not in (None, 0)) or e.signal) and (e.rank is not None or e.local_rank is not None)}
    return next(iter(bad)) if len(bad) == 1 else None


def launcher_failure(job: Job) -> Optional[Tuple[int, Optional[int], str]]:
    """The one process a launcher reports failing, as (its local rank, its global rank or None, how the global rank is
    known). The global rank is said only where the log shows it: the launcher's own table or a pid that joins the two
    (torchrun's "rank: 3 (local_rank: 3)"), or a one-node launch (its command line: `--nproc-per-node 4` with no
    `--nnodes` above 1, job.one_node), where a local rank is the global one. Otherwise only the local rank is named
    (a node's local rank 0 is rank 0 only on the first node)."""
    exits = [e for e in job.exits if ((e.code not in (None, 0)) or e.signal) and (e.rank is not None or e.local_rank is not None)]
    if len({(e.rank if e.rank is not None else e.local_rank) for e in exits}) != 1:
        return None
    e = exits[0]
    local = e.local_rank if e.local_rank is not None else e.rank
    if e.rank is not None and not getattr(e, "rank_guessed", False):
        return local, e.rank, ""
    if job.one_node is not None and job.nnodes is None:
        return local, local, f"a one-node launch (line {job.one_node.lineno}), where the local rank is the global one"
    return local, None, ""


def first_seen(job: Job, line: Optional[Line]) -> dict:
    if line is None:
        return {}
    out = {"path": job.paths[line.src] if line.src < len(job.paths) else "?", "line": line.lineno}
    if line.ts is not None and not line.ts_near:
        out["time"] = _fmt_ts(line.ts)
    elif line.ts is not None:
        # the line has no stamp of its own: its stream's nearest one orders it, and is said as such
        out["near_time"] = _fmt_ts(line.ts)
    out["text"] = line.text[:300]
    return out


_TITLE_MAX = 300      # characters of a finding's title
_DETAIL_MAX = 4000    # and of its detail


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
    went_on = job.went_on_after(at) if severity == "error" and at is not None else None
    if went_on is not None:
        # the process that printed the line kept training after it and nothing later says the job failed: what the
        # line reports did not stop it (a library's error log it recovers from, a check that only warns): a warning
        severity = "warning"
        ev["went_on_at"] = went_on.lineno
    if at is not None:
        fs = first_seen(job, at)
        subjects += [f"path:{fs['path']}", f"line:{fs['line']}"]
        ev["first_seen"] = fs
    if count is not None:
        ev["count"] = count
    if at is not None and detail and "line " not in detail:
        # every explanation names the line it rests on
        detail = detail.rstrip() + f" (the evidence: line {at.lineno}" + (
            f" of {job.paths[at.src]}" if len(job.paths) > 1 and at.src < len(job.paths) else "") + ".)"
    if went_on is not None:
        detail = (detail.rstrip() + f" The same process went on training after it (line {went_on.lineno}) and nothing "
                  "later in the log says the job failed: a warning, not the failure.").lstrip()
    ev.update(evidence or {})
    # a title is one line a person reads: a 64 KiB exception name or message quoted from a log is cut (robust21)
    if len(title) > _TITLE_MAX:
        title = title[:_TITLE_MAX - 1] + "…"
    if len(detail) > _DETAIL_MAX:
        detail = detail[:_DETAIL_MAX - 1] + "…"
    f = Finding(severity, title, detail=detail, fix=fix, subjects=subjects, evidence=ev)
    when = ts if ts is not None else (at.ts if at is not None and at.ts is not None else INF)
    pos = (at.src, at.lineno) if at is not None else (INF, INF)
    job.sort_keys[title] = (stage, when, pos)
    return f
