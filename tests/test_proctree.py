"""ddpdoctor.proctree, the one process-lifetime mechanism: it never loses a descendant (marker and
subreaper, each on its own), never signals a pid that is no longer the process it saw, escalates to
SIGKILL, and proves nothing is left. Also the rule every signal test here follows (tests/procs.py):
wait for the state, fail when it does not come, never act anyway."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest
from _pytest.outcomes import Failed

from ddpdoctor import proctree
from machine import with_room
from procs import marked, reached

# A child that starts a grandchild in a session of its own (as torch's agent does with its ranks),
# waits until the grandchild is up, says so, then either lives on or exits at once (orphaning it).
PARENT = textwrap.dedent("""
    import os, subprocess, sys, time
    ready = sys.argv[1]
    env = dict(os.environ) if sys.argv[3] == "keep-env" else {"PATH": os.environ.get("PATH", "")}
    code = ("import os, pathlib, sys, time; p = pathlib.Path(sys.argv[1]); p.with_suffix('.tmp').write_text(str(os.getpid())); "
            "p.with_suffix('.tmp').rename(p); time.sleep(600)")
    subprocess.Popen([sys.executable, "-c", code, ready], start_new_session=True, env=env)
    while not os.path.exists(ready):
        time.sleep(0.02)
    print("grandchild up", flush=True)
    if sys.argv[2] == "live":
        time.sleep(600)
""")


def _grandchild_pid(ready: str) -> int:
    with open(ready) as fh:
        return int(fh.read())


def _start(tree: proctree.Tree, tmp_path, mode: str, env_mode: str = "keep-env"):
    ready = str(tmp_path / f"ready-{uuid.uuid4().hex[:6]}")
    proc = tree.popen([sys.executable, "-c", PARENT, ready, mode, env_mode], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "grandchild up"  # the state the test needs, before it acts
    return proc, _grandchild_pid(ready)


# ------------------------------------------------------------------------------- pure readings
def test_descendants_walks_a_parent_map_from_the_roots():
    ppids = {10: 1, 11: 10, 12: 11, 13: 10, 20: 1, 21: 20}
    assert sorted(proctree.descendants([10], ppids)) == [11, 12, 13]
    assert proctree.descendants([99], ppids) == []


def test_this_process_reads_as_running_and_a_wrong_start_time_does_not():
    state, start = proctree.stat_fields(os.getpid())
    assert state in ("R", "S") and start > 0
    assert proctree.running(os.getpid(), start)
    assert not proctree.running(os.getpid(), start + 1)  # the same pid, another process: not ours
    assert proctree.stat_fields(2 ** 22 + 7) == (None, None)


def test_a_marker_is_found_only_as_a_whole_entry_of_the_environment():
    block = b"PATH=/bin\0DDPDOCTOR_PROC_AB=1\0XDDPDOCTOR_PROC_CD=1\0LAST=v\0"
    assert proctree.environ_has(block, "DDPDOCTOR_PROC_AB", "1")
    assert proctree.environ_has(block, "PATH", "/bin") and proctree.environ_has(block, "LAST", "v")
    assert not proctree.environ_has(block, "DDPDOCTOR_PROC_CD", "1")   # only as the tail of another name
    assert not proctree.environ_has(block, "DDPDOCTOR_PROC_AB", "")
    assert not proctree.environ_has(block, "LAST", "vv")
    assert proctree.environ_has(b"ONLY=1", "ONLY", "1")                 # no trailing NUL
    assert not proctree.has_mark(2 ** 22 + 7, "PATH", "/bin")           # no such process


def test_each_tree_has_a_marker_of_its_own_so_nested_doctors_keep_both():
    a, b = proctree.Tree(), proctree.Tree()
    assert a.var != b.var and a.var.startswith("DDPDOCTOR_PROC_")
    env = b.environ(a.environ({"PATH": "/bin"}))
    assert env[a.var] == "1" and env[b.var] == "1"


# ------------------------------------------------------------------------------- for real
@pytest.mark.slow
@pytest.mark.timeout(60)
def test_an_orphaned_grandchild_in_its_own_session_is_found_by_its_marker_and_stopped(tmp_path):
    tree = proctree.Tree(adopt=False)  # the marker alone
    proc, grandchild = _start(tree, tmp_path, "exit")
    proc.wait(timeout=30)
    assert proctree.running(grandchild)
    assert grandchild in tree.live()
    report = tree.stop(grace_s=2.0)
    assert report.left == [] and not proctree.running(grandchild)
    assert tree.leftovers() == []


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_a_grandchild_that_dropped_the_marker_comes_back_to_the_subreaper_and_is_reaped(tmp_path):
    tree = proctree.Tree(adopt=True)  # as in a command's own process (this test runner adopts from now on)
    proc, grandchild = _start(tree, tmp_path, "exit", env_mode="clear-env")
    proc.wait(timeout=30)
    assert not proctree.has_mark(grandchild, tree.var, tree.value)  # only the subreaper can find it
    assert proctree.ppid_map().get(grandchild) == os.getpid()     # re-parented here, not to init
    assert grandchild in tree.live()
    report = tree.stop(grace_s=2.0)
    assert report.left == [] and report.signalled >= 1
    assert grandchild in tree.statuses, "the orphan's exit status was not collected (a zombie left)"
    assert tree.statuses[grandchild] == -signal.SIGTERM


# A parent whose child asked for SIGINT when the parent dies (torch.multiprocessing.spawn's
# PR_SET_PDEATHSIG) and records it if it ever handles one (a rank's KeyboardInterrupt trace).
PDEATH_PARENT = textwrap.dedent("""
    import os, subprocess, sys, time
    ready, seen = sys.argv[1], sys.argv[2]
    child = ('import ctypes, os, pathlib, signal, sys, time\\n'
             'assert ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGINT, 0, 0, 0) == 0\\n'
             'signal.signal(signal.SIGINT, lambda *a: pathlib.Path(sys.argv[2]).write_text("SIGINT"))\\n'
             'pathlib.Path(sys.argv[1]).write_text(str(os.getpid()))\\n'
             'while True: time.sleep(0.01)\\n')
    subprocess.Popen([sys.executable, "-c", child, ready, seen])
    time.sleep(600)
""")


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_stop_signals_the_whole_tree_at_once_so_no_child_sees_its_parent_die_first(tmp_path, monkeypatch):
    ready, seen = tmp_path / "ready", tmp_path / "seen"
    tree = proctree.Tree()
    tree.popen([sys.executable, "-c", PDEATH_PARENT, str(ready), str(seen)])
    reached(lambda: ready.exists() and ready.read_text(), 30, "the child set its parent-death signal")
    child = int(ready.read_text())
    assert child in tree.live()
    sent = []
    real_kill = os.kill
    monkeypatch.setattr(proctree.os, "kill", lambda pid, sig: (sent.append(sig), real_kill(pid, sig))[1])
    report = tree.stop(grace_s=5.0)
    assert report.left == [] and report.killed == 0 and not proctree.running(child)
    first = [s for s in sent if s != signal.SIGKILL]
    stops, terms, conts = (
        [i for i, s in enumerate(first) if s == sig] for sig in (signal.SIGSTOP, signal.SIGTERM, signal.SIGCONT))
    assert len(stops) == len(terms) == len(conts) == 2, first
    assert max(stops) < min(terms) and max(terms) < min(conts), first  # all frozen, all signalled, then woken
    assert not seen.exists(), "the child handled its parent-death SIGINT before its own SIGTERM"


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_a_process_that_ignores_sigterm_is_killed_after_the_grace(tmp_path):
    tree = proctree.Tree()
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(600)"
    proc = tree.popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    t0 = time.monotonic()
    report = tree.stop(grace_s=1.0)
    assert report.killed == 1 and report.left == []
    assert time.monotonic() - t0 >= 1.0
    assert proc.returncode == -signal.SIGKILL


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_a_pid_that_is_no_longer_the_process_seen_is_never_signalled():
    outsider = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        tree = proctree.Tree()
        real_start = proctree.stat_fields(outsider.pid)[1]
        tree.members[outsider.pid] = real_start - 1  # as if the pid had been reused since we saw it
        assert outsider.pid not in tree.live()
        tree.stop(grace_s=0.0, first=signal.SIGKILL)
        assert outsider.poll() is None and proctree.running(outsider.pid, real_start)
    finally:
        outsider.kill()
        outsider.wait()


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_run_stops_the_whole_tree_on_its_timeout_and_reports_what_was_written(tmp_path):
    mark = uuid.uuid4().hex

    def attempt(timeout):
        with pytest.raises(subprocess.TimeoutExpired) as info:
            proctree.run([sys.executable, "-c", PARENT, str(tmp_path / "ready"), "live", "keep-env"],
                         capture_output=True, text=True, timeout=timeout, env=dict(os.environ, DDPDOCTOR_TEST_MARK=mark))
        assert marked(mark) == []  # every try leaves nothing behind
        return info.value.output or ""

    # 3 s idle, scaled (round 16): the state is two bare interpreters' start-up (no torch), ~0.1 s idle; a run stopped
    # before it is run again with more room (machine.with_room) instead of passing vacuously or failing on the load
    out, _ = with_room(attempt, lambda out: "grandchild up" in out, 3.0, "the command's grandchild up at the timeout")
    assert "grandchild up" in out


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_run_kills_what_a_finished_command_left_behind(tmp_path):
    mark = uuid.uuid4().hex
    done = proctree.run([sys.executable, "-c", PARENT, str(tmp_path / "ready"), "exit", "keep-env"],
                        capture_output=True, text=True, timeout=50, env=dict(os.environ, DDPDOCTOR_TEST_MARK=mark))
    assert done.returncode == 0 and "grandchild up" in done.stdout
    assert marked(mark) == []


# ------------------------------------------------------------------------------- the test rule
SLOW_CLI = textwrap.dedent("""
    import subprocess, sys, time
    time.sleep(float(sys.argv[1]))  # a slow start-up: importing torch under load, say
    kids = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"]) for _ in range(3)]
    time.sleep(600)
""")


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_a_signal_test_waits_for_the_state_and_never_acts_before_it():
    """The old Ctrl-C test waited a bounded time for 4 marked processes, then signalled whether or not
    they were there. Under a start-up slower than its bound it acted on a tool that had not started its
    ranks. `reached()` fails the test instead, and waits when the state comes within the bound."""
    mark = uuid.uuid4().hex
    env = dict(os.environ, DDPDOCTOR_TEST_MARK=mark)
    tree = proctree.Tree()
    proc = tree.popen([sys.executable, "-c", SLOW_CLI, "4"], env=env)
    try:
        # the old pattern, with a bound shorter than the start-up: it falls through and would act now
        until = time.monotonic() + 1.0
        while time.monotonic() < until and len(marked(mark)) < 4:
            time.sleep(0.2)
        assert len(marked(mark)) < 4, "the fake start-up was not slower than the bound"
        # the rule: the same bound fails the test instead of acting
        with pytest.raises(Failed, match="not reached"):
            reached(lambda: len(marked(mark)) >= 4, 0.5, "cli + 3 children")
        # and a bound that covers the start-up waits for the state, then returns it
        assert reached(lambda: len(marked(mark)) >= 4, 45.0, "cli + 3 children")
    finally:
        tree.stop(grace_s=0.0, first=signal.SIGKILL)
    assert marked(mark) == []


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_a_process_that_ends_before_its_state_fails_the_wait_at_once():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(timeout=30)
    t0 = time.monotonic()
    with pytest.raises(Failed, match="ended before"):
        reached(lambda: False, 30.0, "never", alive=lambda: proc.poll() is None)
    assert time.monotonic() - t0 < 5
