"""How slow this machine is right now, for the deadlines that tests hand to the tool.

Why: a fault test gives `ddpdoctor comm` (or `run`, `probe`) a deadline and asserts the tool keeps
it (`elapsed < deadline + 2`). Those deadlines were chosen on an idle 2-core machine, where a rank
imports torch in about 2 s. With two busy processes on the same cores, start-up alone takes 7-10 s,
and a 10 s deadline runs out before any rank reached the fault the test injects: the test then
fails for a reason that has nothing to do with what it asserts. So the deadline (not the assertion)
is scaled by how much slower than idle a torch process starts now, measured, never below 1x.

The measurement is one `python -c "import torch"` (what every rank does first), cached for a few
minutes because load changes during a run. DDPDOCTOR_TEST_SLOWNESS=F forces the factor.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time

IDLE_TORCH_START_S = 2.0   # `python -c "import torch"` on the idle 2-core CI machine (measured 1.6-2.1 s)
MAX_FACTOR = 8.0
TTL_S = 300.0

_cache = {"at": -1e9, "factor": 1.0}


def slowness() -> float:
    """This machine's start-up time for a torch process now, over the idle figure (>= 1)."""
    forced = os.environ.get("DDPDOCTOR_TEST_SLOWNESS")
    if forced:
        return max(1.0, float(forced))
    if time.monotonic() - _cache["at"] < TTL_S:
        return _cache["factor"]
    t0 = time.monotonic()
    try:
        subprocess.run([sys.executable, "-c", "import torch"], timeout=120, capture_output=True)
        took = time.monotonic() - t0
    except subprocess.TimeoutExpired:
        took = IDLE_TORCH_START_S * MAX_FACTOR
    _cache.update(at=time.monotonic(), factor=min(MAX_FACTOR, max(1.0, took / IDLE_TORCH_START_S)))
    return _cache["factor"]


def scaled(seconds: float) -> float:
    """A deadline chosen on an idle machine, stretched to this one's current speed."""
    return round(seconds * slowness(), 1)
