import os
import platform
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

# platform.uname() runs `uname -p` once per process and caches it; the host gatherer asks for it.
# Pay for that here, so that no test is charged with starting a process it did not start itself.
platform.platform()


# ------------------------------------------------------------- processes only in slow tests
# `make test-fast` (pytest -m "not slow") must stay fast and start nothing: every test that
# launches a process carries @pytest.mark.slow (and a timeout). This guard makes the rule hold:
# in a test without the mark, starting a process fails at once, naming what was started.
_LAUNCHERS = [("subprocess", "Popen._execute_child"), ("os", "fork"), ("os", "forkpty"), ("os", "posix_spawn"),
              ("os", "posix_spawnp"), ("multiprocessing.util", "spawnv_passfds")]


class ProcessInFastTest(RuntimeError):
    pass


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
