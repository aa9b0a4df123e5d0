"""What a CUDA driver error code means on a training node (ddpdoctor/data/cuda_errors.json, mined by
tools/mine_cuda_errors.py from NVIDIA's cuda.h), for the `cuda` facts: the result of cuInit(0) in the
environment the job will have."""
from __future__ import annotations

import re
from typing import List, Optional

from ddpdoctor.facts import catalogue

CLASSES = ("fabric-manager", "no-device", "stub-library", "driver", "busy", "driver-state", "other")


def entry(code: int) -> Optional[dict]:
    for e in catalogue.entries("cuda_errors"):
        if e.get("code") == code:
            return e
    return None


def parse(line: str) -> Optional[int]:
    """The code of a "cuInit(0) = 802 (CUDA_ERROR_SYSTEM_NOT_READY)" line (the catalogue's examples)."""
    m = re.search(r"cuInit\(0\) = (\d+)", line)
    return int(m.group(1)) if m else None


def entry_problems(e: dict) -> List[str]:
    out = []
    if not isinstance(e.get("code"), int):
        out.append("code is not an integer")
    if e.get("class") not in CLASSES:
        out.append(f"unknown class {e.get('class')!r}")
    for ex in e.get("examples") or []:
        code = parse(ex)
        if code is None or entry(code) is None or entry(code)["id"] != e["id"]:
            out.append(f"example not recognised: {ex!r}")
    return out
