"""PyTorch Flight Recorder dumps (pickle or JSON), read safely, and the analysis across ranks.

A dump (TORCH_NCCL_DUMP_ON_TIMEOUT=1, one file per rank, `nccl_trace_rank_N`) is a dict:
`version`, `pg_config` ({pg: {name, desc, ranks}}), `pg_status`, and `entries`, each with
`process_group` (name, desc), `collective_seq_id`, `profiling_name` (e.g. nccl:all_reduce),
`input_sizes`, `state` (scheduled / started / completed) and `frames`.

Unlike torch's own analyzer, this works from whatever subset of ranks' dumps exists and does not
stop at the first mismatch: it reports the first divergent sequence number, the mismatched
collectives, the ranks that never issued it, and the ranks whose dumps are missing.
"""
from __future__ import annotations

import json
import os
import re
from typing import Any, Dict, List, Optional

from . import safe_pickle


class DumpError(ValueError):
    """A Flight Recorder input that could not be read (its reason is one line)."""


def _check(doc: Any, path: str) -> dict:
    if not isinstance(doc, dict) or not isinstance(doc.get("entries"), (list, tuple)):
        raise DumpError("not a Flight Recorder dump (no 'entries')")
    rank = doc.get("rank")
    if not isinstance(rank, int):
        m = re.search(r"(\d+)(?:\.\w+)?$", os.path.basename(path))
        rank = int(m.group(1)) if m else None
    entries = [e for e in doc["entries"] if isinstance(e, dict)]
    return {"path": path, "rank": rank, "version": doc.get("version"), "pg_config": doc.get("pg_config") or {},
            "pg_status": doc.get("pg_status") or {}, "entries": entries}


def load_pickle(data: bytes, path: str) -> dict:
    try:
        doc = safe_pickle.loads(data)
    except safe_pickle.UnsafePickle as exc:
        raise DumpError(f"refused: {exc} (nothing was executed)") from None
    except ValueError as exc:
        raise DumpError(str(exc)) from None
    return _check(doc, path)


def load_json(data: bytes, path: str) -> dict:
    try:
        doc = json.loads(data.decode("utf-8", "replace"))
    except (ValueError, RecursionError) as exc:
        raise DumpError(f"not valid JSON: {exc}") from None
    return _check(doc, path)


def _pg(entry: dict) -> str:
    pg = entry.get("process_group")
    if isinstance(pg, (list, tuple)) and pg:
        return str(pg[0])
    return str(entry.get("pg_id", "0"))


def _expected(dumps: List[dict], pg: str) -> Optional[List[int]]:
    for d in dumps:
        cfg = d["pg_config"].get(pg) if isinstance(d["pg_config"], dict) else None
        if isinstance(cfg, dict):
            ranks = cfg.get("ranks")
            if isinstance(ranks, str):
                try:
                    ranks = json.loads(ranks)
                except ValueError:
                    ranks = None
            if isinstance(ranks, (list, tuple)) and all(isinstance(r, int) for r in ranks):
                return sorted(ranks)
    return None


def _sig(e: dict) -> tuple:
    sizes = e.get("input_sizes")
    try:
        sizes = json.dumps(sizes, default=str)[:400]
    except (TypeError, ValueError, RecursionError):
        sizes = "?"
    return (str(e.get("profiling_name", "?")), sizes)


def analyze(dumps: List[dict]) -> List[dict]:
    """One result per process group with a problem: first divergent seq, mismatches, laggards, missing dumps."""
    out = []
    pgs = sorted({_pg(e) for d in dumps for e in d["entries"]})
    for pg in pgs:
        per_rank: Dict[int, Dict[int, dict]] = {}
        for d in dumps:
            if d["rank"] is None:
                continue
            for e in d["entries"]:
                if _pg(e) != pg or e.get("is_p2p") or not isinstance(e.get("collective_seq_id"), int):
                    continue
                if e.get("collective_seq_id", 0) <= 0:
                    continue
                per_rank.setdefault(d["rank"], {})[e["collective_seq_id"]] = e
        if not per_rank:
            continue
        expected = _expected(dumps, pg)
        have = sorted(per_rank)
        missing = sorted(set(expected) - set(have)) if expected else []
        lo = max(min(seqs) for seqs in per_rank.values())   # ring buffers: compare only the common window
        hi = max(max(seqs) for seqs in per_rank.values())
        result = {"pg": pg, "ranks_with_dumps": have, "missing_dumps": missing, "expected_ranks": expected}
        mismatches = []
        first_div = None
        laggards: List[int] = []
        for seq in range(lo, hi + 1):
            present = {r: per_rank[r].get(seq) for r in have}
            sigs = {r: _sig(e) for r, e in present.items() if e is not None}
            absent = [r for r, e in present.items() if e is None]
            if len(set(sigs.values())) > 1:
                groups: Dict[tuple, List[int]] = {}
                for r, s in sigs.items():
                    groups.setdefault(s, []).append(r)
                mismatches.append({"seq": seq, "groups": [{"op": s[0], "input_sizes": s[1], "ranks": rs}
                                                          for s, rs in sorted(groups.items(), key=lambda kv: kv[1])]})
                if first_div is None:
                    first_div = seq
            if absent and sigs and first_div is None:
                first_div = seq
                laggards = absent
            if len(mismatches) >= 8:
                break
        last_done = {r: max((s for s, e in per_rank[r].items() if e.get("state") == "completed"), default=None)
                     for r in have}
        last_seen = {r: max(per_rank[r]) for r in have}
        if first_div is None and not missing:
            continue
        waiting = {}
        if first_div is not None:
            for r in have:
                e = per_rank[r].get(first_div)
                if e is not None and e.get("state") != "completed":
                    waiting[r] = {"op": e.get("profiling_name"), "state": e.get("state"),
                                  "frame": _user_frame(e.get("frames"))}
        result.update(first_divergent_seq=first_div, mismatches=mismatches, never_issued=laggards,
                      waiting=waiting, last_completed=last_done, last_seen=last_seen)
        out.append(result)
    return out


def _user_frame(frames: Any) -> Optional[str]:
    if not isinstance(frames, (list, tuple)):
        return None
    for f in frames:
        if isinstance(f, dict):
            name = str(f.get("filename", ""))
            if "site-packages" in name or "/torch/" in name or name.startswith("<"):
                continue
            return f"{name}:{f.get('line')} in {f.get('name')}"
    return None
