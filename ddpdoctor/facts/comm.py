"""The recorded `comm` section (built by ddpdoctor.comm.section), read once into the shape the COMM
checks rely on, plus the small readings they share (where a rank runs, which ranks crashed...)."""
from __future__ import annotations

from typing import Dict, Iterable, List, Optional


_memo: tuple = (None, None)  # (the raw section object, its cleaned reading)


def comm_section(snap) -> dict:
    """The comm section, coerced to the shape the checks read. A recorded snapshot may come from
    another version or be hand-edited: wrong types are dropped here, once per snapshot (the first
    check to ask cleans it; the other 14 get the same reading), not in every check."""
    global _memo
    raw = snap.get("comm") or {}
    if _memo[0] is not raw:
        _memo = (raw, clean_section(raw))
    return _memo[1]


def as_num(v) -> Optional[float]:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v else None


def as_rank(v) -> Optional[int]:
    try:
        return int(v) if not isinstance(v, bool) and v is not None else None
    except (TypeError, ValueError):
        return None


def as_dict(v) -> dict:
    return v if isinstance(v, dict) else {}


def dicts_in(v) -> list:
    return [x for x in v if isinstance(x, dict)] if isinstance(v, list) else []


def ranks_in(v) -> list:
    return [r for r in (as_rank(x) for x in v) if r is not None] if isinstance(v, list) else []


def clean_section(raw: dict) -> dict:
    sec = dict(as_dict(raw))
    for key in ("root_cause", "failure", "diagnosis", "all_reduce"):
        sec[key] = as_dict(sec.get(key)) or None
    sec["world_size"] = as_rank(sec.get("world_size"))
    for key in ("elapsed_s", "deadline_s"):
        sec[key] = as_num(sec.get(key))
    sec["ok"] = sec.get("ok") if isinstance(sec.get("ok"), bool) else None
    sec["ranks"] = [dict(r, rank=as_rank(r.get("rank")), host=str(r["host"]) if r.get("host") is not None else None)
                    for r in dicts_in(sec.get("ranks")) if as_rank(r.get("rank")) is not None]
    sec["summaries"] = {str(k): dict(v, versions=as_dict(v.get("versions")), env=as_dict(v.get("env")),
                                     host=str(v["host"]) if v.get("host") is not None else None)
                        for k, v in as_dict(sec.get("summaries")).items() if isinstance(v, dict) and as_rank(k) is not None}
    sec["pairs"] = [p for p in dicts_in(sec.get("pairs"))
                    if as_rank(p.get("src")) is not None and as_rank(p.get("dst")) is not None and as_num(p.get("gbps"))]
    sec["bandwidth"] = [dict(b, bytes=int(as_num(b.get("bytes")) or 0), algbw_gbps=as_num(b.get("algbw_gbps")),
                             busbw_gbps=as_num(b.get("busbw_gbps"))) for b in dicts_in(sec.get("bandwidth"))]
    if sec["root_cause"]:
        rc = sec["root_cause"]
        rc["rank"] = as_rank(rc.get("rank"))
        rc["ranks"] = ranks_in(rc.get("ranks"))
        rc["others"] = ranks_in(rc.get("others"))
        rc["phases"] = as_dict(rc.get("phases"))
    if sec["failure"]:
        f = sec["failure"]
        f["rank"] = as_rank(f.get("rank"))
        f["missing"] = ranks_in(f.get("missing"))
        f["claims"] = {str(k): as_rank(v) for k, v in as_dict(f.get("claims")).items()
                       if as_rank(k) is not None and as_rank(v) is not None}
        f["listeners"] = dicts_in(f.get("listeners"))
        f["ranks"] = ranks_in(f.get("ranks"))
        for key in ("kind", "phase", "iface"):
            if f.get(key) is not None and not isinstance(f.get(key), str):
                f[key] = str(f[key])
    if sec["diagnosis"]:
        sec["diagnosis"]["peers"] = {str(k): v for k, v in as_dict(sec["diagnosis"].get("peers")).items()
                                     if isinstance(v, dict) and as_rank(k) is not None}
    if sec["all_reduce"]:
        sec["all_reduce"]["bad_ranks"] = ranks_in(sec["all_reduce"].get("bad_ranks"))
        sec["all_reduce"]["per_rank"] = {str(k): v for k, v in as_dict(sec["all_reduce"].get("per_rank")).items()
                                         if isinstance(v, dict)}
    for key in ("launcher_error", "teardown", "backend", "mode"):
        if sec.get(key) is not None and not isinstance(sec.get(key), str):
            sec[key] = str(sec[key])
    return sec


def host_of(sec: dict, rank: int) -> Optional[str]:
    s = (sec.get("summaries") or {}).get(str(rank)) or {}
    if s.get("host"):
        return s["host"]
    for r in sec.get("ranks") or []:
        if r.get("rank") == rank and r.get("host"):
            return r["host"]
    peers = ((sec.get("diagnosis") or {}).get("peers") or {})
    return (peers.get(str(rank)) or {}).get("host")


def rank_subjects(sec: dict, ranks: Iterable[int]) -> List[str]:
    subjects: List[str] = []
    for r in ranks:
        subjects.append(f"rank:{r}")
        host = host_of(sec, r)
        if host and f"host:{host}" not in subjects:
            subjects.append(f"host:{host}")
    return subjects


def rank_where(sec: dict, rank: int) -> str:
    host = host_of(sec, rank)
    return f"rank {rank}" + (f" on {host}" if host else "")


def failure_of(sec: dict) -> dict:
    return sec.get("failure") or {}


def peers_in(sec: dict, *states: str) -> Dict[int, dict]:
    peers = (sec.get("diagnosis") or {}).get("peers") or {}
    return {int(r): p for r, p in peers.items() if p.get("state") in states}


def crashed_ranks(sec: dict) -> set:
    rc = sec.get("root_cause") or {}
    out = set()
    if rc.get("kind") in ("crashed", "exited-without-result") and rc.get("rank") is not None:
        out.add(rc["rank"])
    return out
