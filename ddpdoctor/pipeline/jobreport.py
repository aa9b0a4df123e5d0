"""One report for a whole job (issue 15): which rank prints, and how the findings of many ranks
become one list. Pure functions: no I/O, no torch.

Under a launcher (torchrun, srun, mpirun: every rank runs the same command), global rank 0
prints the job's report: identical findings of several ranks merged into one, with the ranks
compressed (`ranks 0-7, 9`) and grouped by host. The other ranks print only what concerns them
alone, prefixed `[rank N]`, or nothing; `--all-ranks` makes every rank print its own report.
JSON keeps the per-rank detail (`ranks`: rank -> its findings).
"""
from __future__ import annotations

from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ddpdoctor.model import Finding, severity_rank
from ddpdoctor.facts.units import runs_text


def launcher_rank(environ: Mapping[str, str]) -> Optional[Tuple[int, int]]:
    """(global rank, world size) when this process is one rank of a multi-rank launch, else None.

    Only a launcher counts (torchrun/accelerate: TORCHELASTIC_RUN_ID; srun: SLURM_STEP_ID; mpirun:
    OMPI_*/PMI_*): RANK and WORLD_SIZE exported by hand in a shell are a set-up to judge, and that
    shell must still get the whole report."""
    launched = any(environ.get(k) not in (None, "") for k in (
        "TORCHELASTIC_RUN_ID", "SLURM_STEP_ID", "SLURM_STEPID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"))
    if not launched:
        return None

    def num(*names: str) -> Optional[int]:
        for n in names:
            v = environ.get(n)
            if v not in (None, ""):
                try:
                    return int(v)
                except ValueError:
                    return None
        return None

    world = num("WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE")
    rank = num("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK")
    if world is None or rank is None or world <= 1:
        return None
    return rank, world


def compress_ranks(ranks: Iterable[int]) -> str:
    """[0, 1, 2, 3, 5, 7, 8] -> '0-3, 5, 7-8'."""
    return runs_text(ranks, sep=", ")


def ranks_phrase(ranks: Sequence[int], world: Optional[int] = None) -> str:
    rs = sorted(set(ranks))
    if world and len(rs) == world and rs == list(range(world)):
        return f"all {world} ranks"
    return f"rank {rs[0]}" if len(rs) == 1 else f"ranks {compress_ranks(rs)}"


def _key(f: Mapping) -> tuple:
    return (f.get("id"), f.get("severity"), f.get("title"), f.get("detail"), f.get("fix"),
            tuple(f.get("subjects") or ()))


def merge(per_rank: Mapping[int, Sequence[Mapping]]) -> List[dict]:
    """Identical findings (same id, severity, title, detail, fix, subjects) of several ranks ->
    one entry {"finding": <the finding dict>, "ranks": [...]}; worst first, then by id."""
    groups: Dict[tuple, dict] = {}
    for rank in sorted(per_rank, key=int):
        for f in per_rank[rank] or ():
            g = groups.setdefault(_key(f), {"finding": dict(f), "ranks": []})
            g["ranks"].append(int(rank))
    return sorted(groups.values(), key=lambda g: (-severity_rank(g["finding"].get("severity", "info")),
                                                  g["finding"].get("id") or "", g["ranks"][0]))


def by_host(ranks: Sequence[int], hosts: Mapping[int, str]) -> Dict[str, List[int]]:
    out: Dict[str, List[int]] = {}
    for r in sorted(ranks):
        out.setdefault(hosts.get(r) or "?", []).append(r)
    return out


def where(ranks: Sequence[int], hosts: Mapping[int, str], world: Optional[int] = None) -> str:
    """'all 8 ranks' or 'ranks 0-3 on a; rank 5 on b'."""
    phrase = ranks_phrase(ranks, world)
    if phrase.startswith("all ") or not hosts:
        return phrase
    return "; ".join(f"{ranks_phrase(rs)} on {h}" for h, rs in by_host(ranks, hosts).items())


def merged_findings(groups: Sequence[dict], hosts: Mapping[int, str], world: int) -> List[Finding]:
    """The merged groups as findings for the job's report: the title says where, the evidence
    lists the ranks, the subjects gain host:H for each host involved (unless all ranks are)."""
    out = []
    for g in groups:
        f, ranks = g["finding"], g["ranks"]
        ev = dict(f.get("evidence") or {})
        ev["ranks"] = ranks
        subjects = list(f.get("subjects") or ())
        if len(ranks) < world:
            subjects += [f"host:{h}" for h in by_host(ranks, hosts) if h != "?" and f"host:{h}" not in subjects]
        out.append(Finding(f.get("severity", "info"), f"{f.get('title', '')} [{where(ranks, hosts, world)}]",
                           detail=f.get("detail", ""), fix=f.get("fix", ""), subjects=subjects, evidence=ev,
                           id=f.get("id", ""), name=f.get("name", ""), family=f.get("family") or _family(f.get("id"))))
    return out


def _family(check_id) -> str:
    from ddpdoctor.model.registry import REGISTRY

    spec = REGISTRY.get(check_id or "")
    return getattr(spec, "family", "") or ""


def host_lines(groups: Sequence[dict], hosts: Mapping[int, str], world: int) -> List[str]:
    """The text section: each host, its ranks, and the findings seen there."""
    all_hosts = by_host(range(world), hosts) if hosts else {}
    lines = [f"job: {world} ranks on {len(all_hosts) or '?'} host(s)"]
    for h, rs in all_hosts.items():
        seen = []
        for g in groups:
            mine = [r for r in g["ranks"] if hosts.get(r) == h]
            if mine and g["finding"].get("severity") != "info":
                seen.append(f"{g['finding'].get('id')} ({ranks_phrase(mine)})")
        lines.append(f"  {h}: {ranks_phrase(rs)}: " + (", ".join(seen) if seen else "no errors or warnings"))
    return lines


def own_lines(rank: int, findings: Sequence[Mapping], reported_to_rank0: bool, why: Optional[str] = None) -> List[str]:
    """What a rank other than 0 prints: nothing when rank 0 confirmed its report holds this rank's
    findings; otherwise every one of them (notes too: a finding is printed somewhere, always),
    prefixed, with the first line of the fix of each error and warning, after one line saying why."""
    if reported_to_rank0 or not findings:
        return []
    p = f"[rank {rank}]"
    n = len(findings)
    # This rank cannot know what rank 0 printed (nothing was exchanged): say what it knows, no more.
    lines = [f"{p} {n} finding{'s' if n != 1 else ''} of this rank; rank 0 could not gather the ranks' findings"
             + (f" ({why})" if why else "") + ", so its report may repeat some of them:"]
    for f in findings:
        lines.append(f"{p} {f.get('severity')} {f.get('id')}: {f.get('title')}")
        fix = (f.get("fix") or "").strip().splitlines()
        if fix and f.get("severity") in ("error", "warning"):
            lines.append(f"{p}     fix: {fix[0]}")
    return lines


def concerns_rank(rank: int, findings: Sequence[Mapping]) -> List[str]:
    """Findings that name this rank itself (subject rank:N), prefixed: what a rank other than 0
    prints of a job-wide report that rank 0 also prints."""
    return [f"[rank {rank}] {f.get('severity')} {f.get('id')}: {f.get('title')}" for f in findings
            if f"rank:{rank}" in (f.get("subjects") or ()) and f.get("severity") in ("error", "warning")]
