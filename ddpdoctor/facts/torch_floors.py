"""The oldest torch each accelerate release accepts (ddpdoctor/data/torch_floors.json, mined from
huggingface/accelerate's setup.py and launcher by tools/mine_torch_floors.py). Pure lookups."""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import List, Optional, Tuple

from ddpdoctor.facts.gpu_versions import release as gpu_versions_release

DATA = Path(__file__).resolve().parent.parent / "data" / "torch_floors.json"


def release(text) -> Optional[Tuple[int, ...]]:
    """(major, minor, patch) of a version string ('1.8.1+cu111' -> (1, 8, 1), '1.8' -> (1, 8, 0)), None when it has
    no major.minor: facts.gpu_versions.release padded."""
    parts = gpu_versions_release(text)
    return parts + (0,) * (3 - len(parts)) if len(parts) >= 2 else None


@functools.lru_cache(maxsize=1)
def entries() -> tuple:
    with open(DATA, encoding="utf-8") as fh:
        return tuple(json.load(fh)["entries"])


def floors(package: str, version: str, torch: str, wanted: Tuple[str, ...]) -> List[dict]:
    """The entries for `package` at `version` of the kinds in `wanted` ('installed', 'multi_gpu',
    'multi_node') whose torch floor `torch` is below."""
    v, t = release(version), release(torch)
    if v is None or t is None:
        return []
    out = []
    for e in entries():
        if e["package"] != package or e["when"] not in wanted:
            continue
        if release(e["versions"]["first"]) <= v <= release(e["versions"]["last"]) and t < release(e["torch"]):
            out.append(e)
    return out
