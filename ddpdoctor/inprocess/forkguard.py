"""The fork guard: judges the process at the moment it forks, via os.register_at_fork.

Preflight runs once, but the fork that matters (DataLoader workers, `datasets.map(num_proc=...)`,
a bare os.fork) may come later, after a tokenizer has been used or a file opened. The guard's
`before` hook reads the same cheap facts preflight reads (the tokenizers flag, open h5py files,
CUDA state, Python threads), runs the fork-time runtime checks over them, and logs each finding
once per process. It never raises (an exception in an at-fork hook cannot stop the fork anyway)
and costs about a millisecond per fork; after MAX_JUDGED forks it only counts.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from typing import Callable, Optional

from ddpdoctor.inprocess.runtime import forks as _forks

MAX_JUDGED = 64

_lock = threading.Lock()
_enabled = True
_reported: set = set()
_emit: Optional[Callable] = None


def install(emit: Optional[Callable] = None) -> bool:
    """Install once per process; later calls only update the log function. Returns True if new."""
    global _emit, _enabled
    if emit is not None:
        _emit = emit
    _enabled = True
    if _forks.STATE.installed or not hasattr(os, "register_at_fork"):
        return False
    os.register_at_fork(before=_before)
    _forks.STATE.installed = True
    return True


def disable() -> None:
    """Stop judging (the hook stays registered: Python cannot unregister it)."""
    global _enabled
    _enabled = False


summary = _forks.summary


def findings() -> list:
    return list(_forks.STATE.findings)


def reset() -> None:
    """For tests: forget what was seen (the hook stays installed)."""
    with _lock:
        _forks.STATE.events.clear()
        _reported.clear()
        _forks.STATE.findings.clear()
        _forks.STATE.count = 0

def _caller() -> str:
    """Who is forking, from the Python stack above os.fork."""
    caller = "os.fork"
    f = sys._getframe(2)
    for _ in range(40):
        if f is None:
            break
        name = f.f_code.co_filename.replace("\\", "/")
        if "/torch/utils/data/" in name:
            return "dataloader"
        if "/datasets/" in name and "arrow_dataset" in name:
            return "datasets.map"
        if "/multiprocessing/" in name and "popen_fork" in name:
            caller = "multiprocessing"
        f = f.f_back
    return caller


def _before() -> None:
    if not _enabled:
        return
    try:
        with _lock:
            _forks.STATE.count += 1
            if _forks.STATE.count > MAX_JUDGED:
                return
            caller = _caller()
            found = judge_now(caller)
            _forks.STATE.events.append({"time": time.time(), "caller": caller, "pid": os.getpid(),
                            "findings": [f.id for f in found]})
            new = []
            for f in found:
                key = (f.id, f.title)
                if key not in _reported:
                    _reported.add(key)
                    _forks.STATE.findings.append(f)
                    new.append(f)
        if new and _emit is not None:
            _emit(new, header=f"ddpdoctor fork guard: this process (pid {os.getpid()}) is forking ({caller})")
    except Exception:  # noqa: BLE001 - never disturb the fork
        pass


def judge_now(caller: str) -> list:
    """Run the fork-time checks over the facts of this instant."""
    from ddpdoctor.pipeline.runner import ids_for, load_all, run_checks
    from ddpdoctor.inprocess.runtime import runtime_section
    from ddpdoctor.pipeline.snapshot import Snapshot
    from ddpdoctor.gather.launcher import launcher_from_env

    env = dict(os.environ)
    rt = runtime_section(env, when="fork")
    rt["fork_caller"] = caller
    data = {"source": "fork", "num_workers": 1, "start_method": "fork", "persistent_workers": False,
            "fork_caller": caller}
    if "dataloader" in str(caller).lower():  # the training DataLoader preflight already looked at
        from ddpdoctor.inprocess.runtime.data import LAST

        data["dataset"] = {"tokenizes": LAST.get("tokenizes")}
    snap = Snapshot(sections={"runtime": rt, "runtime_data": data,
                              "env": {"vars": {k: v for k, v in env.items() if k.startswith(("TOKENIZERS_", "RAYON_", "OMP_"))}},
                              "launcher": launcher_from_env(env)})
    load_all(plugins=False)
    fork_checks = ids_for("fork")  # the checks that declare when={"fork", ...}
    found, _skipped, _ran = run_checks(snap, only=fork_checks, when="fork")
    return [f for f in found if f.id in fork_checks]
