"""Finding the processes a test started, to prove none outlives it (the no-orphans guarantee).

Tests put a unique DDPDOCTOR_TEST_MARK in the environment of what they launch; every child and
grandchild inherits it, whatever launcher sits in between."""
from __future__ import annotations

import psutil


def marked(mark: str) -> list:
    """Live processes whose environment carries DDPDOCTOR_TEST_MARK=mark."""
    out = []
    for p in psutil.process_iter():
        try:
            if p.environ().get("DDPDOCTOR_TEST_MARK") == mark:
                out.append(p)
        except (psutil.Error, OSError):
            continue
    return out
