"""How slow this machine is right now, for the deadlines that tests hand to the tool.

Why: a fault test gives `ddpdoctor comm` (or `run`, `probe`) a deadline and asserts the tool keeps
it (`elapsed < deadline + 2`). Those deadlines were chosen on an idle 2-core machine, where a rank
imports torch in about 2 s. With two busy processes on the same cores, start-up alone takes 7-10 s,
and a 10 s deadline runs out before any rank reached the fault the test injects: the test then
fails for a reason that has nothing to do with what it asserts. So the deadline (not the assertion)
is scaled by how much slower than idle a torch process starts now, measured, never below 1x.

The measurement is two `python -c "import torch"` at once (what a 2-rank job's ranks do first) with the
1-minute load average at that moment. Round 16 (wave 2): one measurement per pytest session every TTL_S, not one per
xdist worker: it lives in a file under the session's base temp folder (conftest sets FILE_VAR), written by
whichever process needs it first while the others wait on its lock. Between measurements the factor
follows the load: it is rescaled by how much more (or less) CPU a runnable process gets now than at the
measurement (`adjusted`), so a factor measured in a quiet minute no longer holds for the busy one after it
(round 16's probe start-up: slowness 1.09 from a cached measurement at load ~5, while the ranks needed >15 s).
DDPDOCTOR_TEST_SLOWNESS=F forces the factor.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Callable, Optional

IDLE_TORCH_START_S = 2.0   # `python -c "import torch"` on the idle 2-core CI machine (measured 1.6-2.1 s)
MAX_FACTOR = 8.0
TTL_S = 300.0
FILE_VAR = "DDPDOCTOR_TEST_SLOWNESS_FILE"

_cache: dict = {"at": -1e9, "factor": 1.0, "load": 0.0}


def load_now() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:
        return 0.0


def cpu_share_slowdown(load: float, ncpu: int) -> float:
    """How much slower than alone a CPU-bound process runs with `load` other runnable ones on `ncpu` cores."""
    return max(1.0, (max(0.0, load) + 1.0) / max(1, ncpu))


def adjusted(measured: dict, load: float, ncpu: int) -> float:
    """The measured factor carried to the load now: scaled by the CPU share a process gets now against the
    share it got while measuring; within [1, MAX_FACTOR]."""
    f = float(measured.get("factor", 1.0))
    then = float(measured.get("load", load))
    f *= cpu_share_slowdown(load, ncpu) / cpu_share_slowdown(then, ncpu)
    return round(min(MAX_FACTOR, max(1.0, f)), 3)


def measure_torch_start(concurrent: int = 2) -> dict:
    """`concurrent` fresh interpreters importing torch at once, as a 2-rank job's ranks start (one import alone, with
    the xdist workers waiting on the lock, read 2.1x at load ~6 where a 2-rank comm run's rank 0 needed more than
    12.5 s to reach the rendezvous: 2.6 s idle): {"at": epoch s, "factor": the slowest over idle, "load": 1-min load}."""
    load = load_now()
    t0 = time.monotonic()
    procs = [subprocess.Popen([sys.executable, "-c", "import torch"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for _ in range(concurrent)]
    took = 0.0
    for p in procs:
        try:
            p.wait(timeout=max(1.0, 120 - (time.monotonic() - t0)))
            took = max(took, time.monotonic() - t0)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            took = IDLE_TORCH_START_S * MAX_FACTOR
    load = max(load, load_now())
    return {"at": time.time(), "factor": min(MAX_FACTOR, max(1.0, took / IDLE_TORCH_START_S)), "load": load,
            "took_s": round(took, 3), "concurrent": concurrent, "pid": os.getpid()}


def _read(path: str) -> Optional[dict]:
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
        return doc if isinstance(doc, dict) and "factor" in doc and "at" in doc else None
    except (OSError, ValueError):
        return None


def shared_measurement(path: str, measure: Callable[[], dict] = measure_torch_start,
                       now: Callable[[], float] = time.time) -> dict:
    """The session's measurement in `path`: read it while younger than TTL_S; otherwise take it under an
    exclusive lock on `path`.lock (another process measuring meanwhile: wait for it and read its result)."""
    doc = _read(path)
    if doc is not None and now() - doc["at"] < TTL_S:
        return doc
    import fcntl

    with open(path + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            doc = _read(path)  # measured by another process while this one waited
            if doc is not None and now() - doc["at"] < TTL_S:
                return doc
            doc = measure()
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump(doc, fh)
            os.replace(tmp, path)
            return doc
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def slowness() -> float:
    """This machine's start-up time for a torch process now, over the idle figure (>= 1)."""
    forced = os.environ.get("DDPDOCTOR_TEST_SLOWNESS")
    if forced:
        return max(1.0, float(forced))
    path = os.environ.get(FILE_VAR)
    if path:
        measured = shared_measurement(path)
    else:  # outside a pytest session: this process's own measurement
        if time.time() - _cache["at"] >= TTL_S:
            _cache.update(measure_torch_start())
        measured = _cache
    return adjusted(measured, load_now(), os.cpu_count() or 1)


def scaled(seconds: float) -> float:
    """A deadline chosen on an idle machine, stretched to this one's current speed."""
    return round(seconds * slowness(), 1)


def with_room(attempt: Callable[[float], object], reached: Callable[[object], bool], idle_s: float, what: str,
              tries: int = 3, factor: Optional[Callable[[], float]] = None) -> tuple:
    """Run `attempt(deadline)` until the run reached the state the test needs (`reached(result)`); return
    (result, deadline). For a test whose tool runs to a deadline that must cover the start-up before the state
    (ranks importing torch, then reaching an injected step): a deadline scaled once, from a load read before the run,
    ran short when the load rose during it (round 24: neither probe rank reached the injected step). So the state is
    checked, never assumed, and a run that did not reach it says only that this machine needed more than `deadline`
    now: the next try gets at least twice that, and never less than `idle_s` scaled by the load read again then.
    Fails the test (it never asserts on a run that did not reach its state) after `tries` runs."""
    import pytest

    factor = factor or slowness
    deadline = round(idle_s * factor(), 1)
    seen = []
    for _ in range(tries):
        result = attempt(deadline)
        if reached(result):
            return result, deadline
        seen.append(deadline)
        deadline = round(max(2.0 * deadline, idle_s * factor()), 1)
        print(f"with_room: {what}: not reached within {seen[-1]} s; again with {deadline} s", flush=True)
    pytest.fail(f"not reached in {len(seen)} runs with deadlines {seen} s, so the test did not test: {what}")
