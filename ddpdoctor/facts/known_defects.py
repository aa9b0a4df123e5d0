"""Releases with a known defect a distributed job meets without a mistake of its own (ddpdoctor/data/known_defects.json,
each entry read from the fix in the project's source). Pure lookups: which entries the recorded versions fall in."""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import List, Optional, Tuple

from ddpdoctor.facts.torch_floors import release

DATA = Path(__file__).resolve().parent.parent / "data" / "known_defects.json"


@functools.lru_cache(maxsize=1)
def entries() -> tuple:
    with open(DATA, encoding="utf-8") as fh:
        return tuple(json.load(fh)["entries"])


def _within(version: Optional[Tuple[int, ...]], span: Optional[dict]) -> Optional[bool]:
    """Whether `version` lies in span's [first, last]; None when the version is unknown, True when no span is given."""
    if not span:
        return True
    if version is None:
        return None
    return release(span["first"]) <= tuple(version)[:3] <= release(span["last"])


def matching(torch: Optional[str], nccl: Optional[Tuple[int, ...]]) -> List[Tuple[dict, bool]]:
    """(entry, nccl_known) for every entry whose torch span holds `torch` and whose NCCL span does not exclude `nccl`
    (an unrecorded NCCL does not exclude: the entry is returned with nccl_known=False)."""
    t = release(torch)
    out = []
    for e in entries():
        if t is None or not _within(t, e.get("torch")):
            continue
        n = _within(nccl, e.get("nccl"))
        if n is False:
            continue
        out.append((e, n is True))
    return out
