"""What a death on a signal the CPU raises means (ddpdoctor/data/fatal_signals.json, from the kernel's trap handlers:
arch/x86/kernel/traps.c): SIGILL is an instruction the CPU does not implement, SIGFPE an integer division by zero.
Pure lookups."""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Optional

DATA = Path(__file__).resolve().parent.parent / "data" / "fatal_signals.json"


@functools.lru_cache(maxsize=1)
def doc() -> dict:
    with open(DATA, encoding="utf-8") as fh:
        return json.load(fh)


def of(signal: Optional[str]) -> Optional[dict]:
    """{"trap", "meaning", "fix"} of a signal the CPU raises ("SIGILL", "SIGFPE"); None for any other."""
    return doc()["signals"].get(str(signal)) if signal else None
