"""libstdc++ symbol versions (ddpdoctor/data/gcc_libstdcxx.json): the newest GLIBCXX_/CXXABI_ version the
libstdc++.so.6 of each GCC release defines (gcc-mirror/gcc libstdc++-v3/doc/xml/manual/abi.xml), and version
comparisons of "3.4.30"-style strings. Loaded once; pure lookups."""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Optional, Tuple

DATA = Path(__file__).resolve().parent.parent / "data" / "gcc_libstdcxx.json"


def rel(version) -> Tuple[int, ...]:
    """(3, 4, 30) from "3.4.30"; () when it is not a dotted number."""
    parts = []
    for x in str(version or "").strip().split("."):
        if not x.isdigit():
            return tuple(parts)
        parts.append(int(x))
    return tuple(parts)


@functools.lru_cache(maxsize=1)
def entries() -> tuple:
    with open(DATA, encoding="utf-8") as fh:
        return tuple(json.load(fh)["entries"])


def of_gcc(version) -> Optional[dict]:
    """The row of the newest GCC release listed at or below `version` ("13.3.0" -> 13.2.0's row: a release not listed
    has the labels of the preceding one, abi.xml), or None when it is older than every row or not a version."""
    want = rel(version)
    if not want:
        return None
    want = (want + (0, 0))[:3]
    best = None
    for e in entries():
        if rel(e["gcc"]) <= want and (best is None or rel(e["gcc"]) > rel(best["gcc"])):
            best = e
    return best


def short_of(needs: dict, have: dict) -> list:
    """[(tag, needed, provided)] for the GLIBCXX / CXXABI versions `needs` ({"glibcxx": "3.4.32", "cxxabi": ...})
    names above what `have` (the same keys) provides; [] when both are known and enough, or either is unknown."""
    out = []
    for tag, key in (("GLIBCXX", "glibcxx"), ("CXXABI", "cxxabi")):
        need, got = rel(needs.get(key)), rel(have.get(key))
        if need and got and need > got:
            out.append((tag, needs[key], have[key]))
    return out
