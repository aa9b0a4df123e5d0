"""torch's own teardown failures of a finished rank (ddpdoctor/data/teardown.json): how a Gloo worker thread that
releases a collective's tensors aborts the process while it shuts down, or hangs it when the process group is freed
with the GIL held; the texts RUN013 says it with. Loaded once; pure lookups."""
from __future__ import annotations

import functools
import json
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "data" / "teardown.json"


@functools.lru_cache(maxsize=1)
def entries() -> tuple:
    with open(DATA, encoding="utf-8") as fh:
        return tuple(json.load(fh)["entries"])


def entry(backend: str = "gloo") -> dict:
    """The teardown entry of a backend ({} when none is known)."""
    return next((e for e in entries() if e.get("backend") == backend), {})
