"""Framework frames whose exception has no message, and what it means there (ddpdoctor/data/bare_exceptions.json, each
row read from the framework's file at a recorded commit): DistributedSampler's bare asserts in
torch/utils/data/distributed.py. Pure lookups."""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Optional

DATA = Path(__file__).resolve().parent.parent / "data" / "bare_exceptions.json"


@functools.lru_cache(maxsize=1)
def rows() -> tuple:
    with open(DATA, encoding="utf-8") as fh:
        return tuple(json.load(fh)["rows"])


def of(exception: str, file: str, func: str) -> Optional[dict]:
    """The row for an exception class (its last dotted name) raised with no message in `func` of `file` (a frame's
    path, matched by its suffix, / or \\ separated); None where no row names that frame."""
    name = str(exception).rsplit(".", 1)[-1]
    path = str(file).replace("\\", "/")
    for r in rows():
        if r["exception"] == name and r["func"] == func and (path == r["file"] or path.endswith("/" + r["file"])):
            return r
    return None
