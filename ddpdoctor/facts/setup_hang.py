"""Every rank in the same set-up wait before the first step (ddpdoctor/data/setup_hang.json, from torch's documentation
and DDP's source): the waits, their causes and what to read, for RUN028. Loaded once; pure lookups."""
from __future__ import annotations

import functools
import json
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "data" / "setup_hang.json"


@functools.lru_cache(maxsize=1)
def data() -> dict:
    with open(DATA, encoding="utf-8") as fh:
        return json.load(fh)
