import os
import platform
import signal
import sys
import time
import uuid

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

# pytest rewrites every test module's asserts at collection and caches the result beside it, unless
# sys.dont_write_bytecode (PYTHONDONTWRITEBYTECODE, set on this workplace): then every collecting process (each xdist
# worker, the exclusive run) rewrote all of them again: `pytest --collect-only` 10.5-13.6 s CPU without the cache,
# 6.3-6.5 s with it (load ~8, round 15). This process writes it; the processes tests start keep the variable.
sys.dont_write_bytecode = False

# platform.uname() runs `uname -p` once per process and caches it; the host gatherer asks for it.
# Pay for that here, so that no test is charged with starting a process it did not start itself.
platform.platform()

# ddpdoctor's user cache folder (ddpdoctor.recache: compiled regex code, triage's Hyperscan database) is one of this
# test process's own, never the user's ~/.cache; process tests inherit it. Removed at exit.
if not os.environ.get("DDPDOCTOR_CACHE_DIR"):
    import atexit
    import shutil
    import tempfile

    os.environ["DDPDOCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="ddpdoctor-test-cache-")
    atexit.register(shutil.rmtree, os.environ["DDPDOCTOR_CACHE_DIR"], True)


# ------------------------------------------------------------- processes only in slow tests
# `make test-fast` (pytest -m "not slow") must stay fast and start nothing: every test that
# launches a process carries @pytest.mark.slow (and a timeout). This guard makes the rule hold:
# in a test without the mark, starting a process fails at once, naming what was started.
_LAUNCHERS = [("subprocess", "Popen._execute_child"), ("os", "fork"), ("os", "forkpty"), ("os", "posix_spawn"),
              ("os", "posix_spawnp"), ("multiprocessing.util", "spawnv_passfds")]


class ProcessInFastTest(RuntimeError):
    pass


@pytest.fixture(autouse=True)
def _lint_rules_at_their_own_shapes(request, monkeypatch):
    """The lint tests judge each rule's classes at the rule's own severity (lint_paths' default), as before round 23
    split shapes measured below the bar off as notes (ddpdoctor/data/lint_severity.json `shapes`, engine.shape_of):
    that measured layer is tested on its own (tests/test_lint_round29.py, marked `measured_shapes`), so a shape's
    figures moving with a new batch changes no rule test."""
    if request.node.get_closest_marker("measured_shapes"):
        yield
        return
    from ddpdoctor.lint import engine

    monkeypatch.setattr(engine, "measured_shapes", lambda: {})
    yield


@pytest.fixture(autouse=True)
def _processes_only_in_slow_tests(request, monkeypatch):
    if request.node.get_closest_marker("slow"):
        yield
        return
    import importlib

    started = []

    def refuse(what):
        def launch(*args, **kwargs):
            started.append(what)
            raise ProcessInFastTest(f"{request.node.nodeid} starts a process ({what}) but is not marked "
                                    "@pytest.mark.slow; mark it, with a timeout")
        return launch

    for module, attr in _LAUNCHERS:
        owner = importlib.import_module(module)
        *path, name = attr.split(".")
        for part in path:
            owner = getattr(owner, part)
        if hasattr(owner, name):
            monkeypatch.setattr(owner, name, refuse(f"{module}.{attr}"))
    yield
    if started:  # also when the code under test swallowed the exception
        pytest.fail(f"{request.node.nodeid} started a process ({', '.join(sorted(set(started)))}) but is not "
                    "marked @pytest.mark.slow", pytrace=False)


# ------------------------------------------------------------- nothing a slow test starts outlives it
# Every slow test runs with its own DDPDOCTOR_TEST_ID in the environment, so every process it starts,
# and every process those start (the doctor's agents, torchrun, ranks, DataLoader workers), carries it,
# wherever it is re-parented. After the test, anything still alive with it is a leak: the test fails,
# naming the processes, and they are killed so that the next test starts clean.
TEST_ID_VAR = "DDPDOCTOR_TEST_ID"
LEAK_GRACE_S = 3.0  # a process SIGKILLed as the command returned needs a moment to leave /proc


def _leaked(value: str) -> list:
    from ddpdoctor import proctree

    return proctree.marked(TEST_ID_VAR, value)


@pytest.fixture(autouse=True)
def _nothing_outlives_a_slow_test(request, monkeypatch):
    if not request.node.get_closest_marker("slow"):
        yield
        return
    value = uuid.uuid4().hex
    monkeypatch.setenv(TEST_ID_VAR, value)
    yield
    left = _leaked(value)
    until = time.monotonic() + LEAK_GRACE_S
    while left and time.monotonic() < until:
        time.sleep(0.1)
        left = _leaked(value)
    if not left:
        return
    import psutil

    names = []
    for pid in left:
        try:
            names.append(f"{pid} {' '.join(psutil.Process(pid).cmdline())[:160]}")
        except psutil.Error:
            names.append(str(pid))
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    pytest.fail(f"{request.node.nodeid} left {len(left)} process(es) running after it ended: "
                + "; ".join(names), pytrace=False)


# ------------------------------------------------------------- one slowness measurement per session
# tests/machine.py's `import torch` timing, shared by the xdist workers through a file in the session's base temp
# folder (a worker's is <session's>/popen-gwN): one measurement per 300 s per session, not one per worker.
@pytest.fixture(scope="session", autouse=True)
def _slowness_file(tmp_path_factory):
    import machine

    if not os.environ.get(machine.FILE_VAR):
        base = tmp_path_factory.getbasetemp()
        root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
        os.environ[machine.FILE_VAR] = str(root / "slowness.json")
    yield


# ------------------------------------------------------------- the order the suite runs in
# Longest first, dealt evenly over the xdist workers (tests/schedule.py says why). DDPDOCTOR_TEST_ORDER=file
# keeps the collection order. `make test-durations` refreshes the recorded times
# (DDPDOCTOR_TEST_DURATIONS_OUT=path records this run's).
import schedule as _schedule  # noqa: E402  (tests/ is on sys.path above)

_DURATIONS_OUT = os.environ.get("DDPDOCTOR_TEST_DURATIONS_OUT")
_durations_seen: list = []


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    if os.environ.get("DDPDOCTOR_TEST_ORDER") == "file":
        return
    items[:] = _schedule.reorder(items, lambda i: i.nodeid, lambda i: i.get_closest_marker("slow") is not None,
                                 os.environ, _schedule.load_durations())


def pytest_runtest_logreport(report):
    if _DURATIONS_OUT:
        _durations_seen.append((report.nodeid, report.duration))


def pytest_sessionfinish(session, exitstatus):
    if _DURATIONS_OUT and not hasattr(session.config, "workerinput") and _durations_seen:
        import json

        # merged into what the file holds: `make test-durations` records its two runs (the exclusive tests apart)
        seconds = dict(_schedule.load_durations(_DURATIONS_OUT), **_schedule.recorded(_durations_seen))
        with open(_DURATIONS_OUT, "w") as fh:
            json.dump({"how": "pytest setup+call+teardown seconds per test, recorded by `make test-durations`",
                       "seconds": dict(sorted(seconds.items()))}, fh, indent=0, sort_keys=True)
            fh.write("\n")
