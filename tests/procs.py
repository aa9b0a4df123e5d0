"""Finding the processes a test started, to prove none outlives it (the no-orphans guarantee), and
waiting for a process to reach the state a test needs before the test acts on it.

Tests put a unique DDPDOCTOR_TEST_MARK in the environment of what they launch; every child and
grandchild inherits it, whatever launcher sits in between. (The conftest also gives every slow test
its own DDPDOCTOR_TEST_ID, and fails the test that leaves a process carrying it.)

The rule for a test that signals, kills or times a process: it first waits for the state it needs,
and fails, saying which state was missing, when the state does not come within the bound. It never
acts anyway once the bound has passed (that was the bug of the old Ctrl-C test: under load it
signalled a `ddpdoctor comm` whose ranks had not started, and then judged the tool for it).
tests/test_proctree.py tests this rule with a start-up slower than the bound."""
from __future__ import annotations

import signal
import time
from typing import Callable, Optional

import psutil
import pytest


def marked(mark: str, var: str = "DDPDOCTOR_TEST_MARK") -> list:
    """Processes whose environment carries var=mark (zombies included: none may be left either)."""
    out = []
    for p in psutil.process_iter():
        try:
            if p.environ().get(var) == mark:
                out.append(p)
        except (psutil.Error, OSError):
            continue
    return out


def reached(state: Callable[[], object], bound_s: float, what: str, poll_s: float = 0.2,
            alive: Optional[Callable[[], bool]] = None) -> object:
    """Wait until `state()` is truthy and return it; fail the test (never act anyway) when it is not
    within `bound_s`, or when `alive()` says the process under test already ended."""
    until = time.monotonic() + bound_s
    while True:
        got = state()
        if got:
            return got
        if alive is not None and not alive():
            pytest.fail(f"the process under test ended before it reached the state the test needs: {what}")
        if time.monotonic() >= until:
            pytest.fail(f"not reached within {bound_s:.0f} s, so the test did not act: {what}")
        time.sleep(poll_s)


def read_as_it_comes(proc) -> tuple:
    """Collect `proc`'s stdout and stderr pipes line by line as they come, in threads: a test can wait for a line
    (`reached`) while the process runs, and neither pipe fills up. Returns ({"out": [...], "err": [...]}, join);
    call join() after the process ended."""
    import threading

    lines: dict = {"out": [], "err": []}
    threads = [threading.Thread(target=lambda f=f, k=k: lines[k].extend(f), daemon=True)
               for k, f in (("out", proc.stdout), ("err", proc.stderr)) if f is not None]
    for t in threads:
        t.start()

    def join(timeout_s: float = 30.0) -> None:
        for t in threads:
            t.join(timeout=timeout_s)

    return lines, join


def as_from_a_terminal() -> None:
    """preexec_fn for a child that must start as a terminal starts a command: SIGINT at its default
    (a background job of a non-interactive shell inherits it ignored, and so would every process the
    test starts: then Ctrl-C means nothing to the tool, as POSIX wants, and a Ctrl-C test tests nothing)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def as_a_background_job() -> None:
    """preexec_fn for a child started as `cmd &` from a script: SIGINT ignored."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)

