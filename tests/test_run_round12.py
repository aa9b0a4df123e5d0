"""Issue 27, round 12: the classes the held-out review of `ddpdoctor run` showed (real public scripts,
injected faults). (A) a rank's record lost on a loaded host; (B) a failure no rank record explains,
read from the job's own output with triage's rules. Pure functions on recorded facts, and one short
process test where only a real process writes the record."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ddpdoctor.commands.run import from_job_output
from ddpdoctor.run import beacon, section
from ddpdoctor.run.supervisor import Supervisor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

KEYERROR = """Traceback (most recent call last):
  File "/home/u/train.py", line 12, in <module>
    local_rank = int(os.environ["LOCAL_RANK"])
                     ~~~~~~~~~~^^^^^^^^^^^^^^
  File "<frozen os>", line 679, in __getitem__
KeyError: 'LOCAL_RANK'
"""
PORT_IN_USE = """Traceback (most recent call last):
  File "/usr/lib/python3/site-packages/torch/distributed/elastic/rendezvous/static_tcp_rendezvous.py", line 67, in next_rendezvous
    self._store = TCPStore(  # type: ignore[call-arg]
torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. port: 29500, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use
"""


# ---------------------------------------------------------------- (A) a rank's record is never lost

def _writer(tmp_path):
    w = beacon.Writer(str(tmp_path / "beacon.1"))
    w.cold({"pid": 1, "rank": 1, "world": 2, "kind": "proc"})
    w.hot("run", False, False, 1.0, 1.0, 0.0, 0.0, 3, 5, 0, 0)
    return w


def test_a_counter_left_odd_by_an_interrupted_write_is_mended_by_the_next_write(tmp_path):
    """A signal's exception (torchrun's SIGTERM raised as SignalException) or another thread between a
    write's two stores left the writer's counter odd; every later write then stored an even counter
    as its "writing" mark and an odd one as its end, and no read ever succeeded again: the rank's
    record was lost. Now each write's end is even whatever the counter was."""
    w = _writer(tmp_path)
    w.seq += 1  # as if a write had stored its odd mark and been interrupted before its end
    w.hot("run", False, False, 2.0, 2.0, 0.0, 0.0, 4, 6, 0, 0)
    b = beacon.read(str(tmp_path / "beacon.1"))
    assert b is not None and b["rank"] == 1 and b["step"] == 4
    w.cold({"pid": 1, "rank": 1, "world": 2, "kind": "proc", "pl": "x.py:3"})
    assert beacon.read(str(tmp_path / "beacon.1"))["pl"] == "x.py:3"


def test_an_ended_process_torn_beacon_is_read_settled_and_a_live_one_is_retried(tmp_path):
    """A process killed between the two stores of a write leaves an odd counter for good. Its last
    state is still what it wrote: read settled (nothing writes any more), it keeps the rank. A live
    writer's odd counter is a write in progress: retried, None (the poller keeps its last read)."""
    w = _writer(tmp_path)
    beacon._SEQ.pack_into(w.mm, 0, w.seq + 1)  # killed mid-write
    path = str(tmp_path / "beacon.1")
    assert beacon.read(path) is None
    b = beacon.read(path, settled=True)
    assert b is not None and b["rank"] == 1 and b["step"] == 3


def test_a_settled_read_of_a_whole_beacon_is_the_same_read(tmp_path):
    _writer(tmp_path)
    path = str(tmp_path / "beacon.1")
    live, settled = beacon.read(path), beacon.read(path, settled=True)
    live.pop("ring", None), settled.pop("ring", None)
    assert live == settled


def test_rank_from_the_launcher_record_or_the_exception_when_the_beacon_is_lost():
    """A rank started by elastic_launch's spawn (or mp.spawn) has no RANK in its environment at start:
    its beacon was its only rank. Lost, the rank was no rank ("none joined a process group"). torchrun's
    agent's record of the worker and the rank its exception record carries outlive it."""
    by_agent = {"pid": 11, "info": {"env": {}, "ppid": 10}, "beacon": None, "alive": False,
                "launcher": {"role": "failed", "rank": 1, "exitcode": -9}}
    by_exc = {"pid": 12, "info": {"env": {}, "ppid": 10}, "beacon": None, "alive": False,
              "exc": {"rank": 0, "type": "RuntimeError"}}
    ranks, _, _ = section.roles([by_agent, by_exc])
    assert [section._rank_of(r) for r in ranks] == [0, 1]


def test_a_process_with_no_rank_anywhere_stays_no_rank():
    launcher = {"pid": 10, "info": {"env": {}, "ppid": 1}, "beacon": {"phase": "exception"}, "alive": False,
                "exc": {"rank": None, "type": "ChildFailedError"}}
    ranks, _, others = section.roles([launcher])
    assert ranks == [] and [p["pid"] for p in others] == [10]


def test_discovery_forced_before_a_verdict_whatever_the_directory_mtime_says(tmp_path):
    """A poll delayed past DISCOVER_FRESH_S on a loaded host, with a file made in the same mtime tick as
    the last listing: the mtime test skips the listing for good. The verdict lists it anyway."""
    sup = Supervisor(["true"])
    sup.run_dir = str(tmp_path)
    sup.tree = type("T", (), {"add": lambda self, pid: None})()
    os.utime(tmp_path, (1000.0, 1000.0))
    sup._dir_mtime = os.stat(tmp_path).st_mtime
    pid = os.getpid()
    with open(tmp_path / f"info.{pid}.json", "w") as fh:
        json.dump({"pid": pid, "env": {"RANK": "0"}, "t0": 0}, fh)
    os.utime(tmp_path, (1000.0, 1000.0))  # the same tick as the last listing
    sup._discover()
    assert sup.procs == {}
    sup._discover(force=True)
    assert list(sup.procs) == [pid]


def test_a_process_that_attached_long_after_its_start_is_followed_not_taken_for_dead():
    """The slow path, forced: the attach wrote its info (t0) long after the process started (on a loaded
    host, another sitecustomize importing torch first). The old guard ("started within 30 s of t0") took
    it for a reused pid: dead at its first poll, its beacon read once before it had a rank, never again."""
    import time

    import psutil

    from ddpdoctor.run.supervisor import Proc

    me = os.getpid()
    late = Proc(me, {"t0": psutil.Process(me).create_time() + 120.0}, "/nonexistent")
    assert late.ps is not None
    late.poll(time.time(), False)
    assert late.alive


def test_a_reused_pid_is_still_told_apart():
    """Quiet twin: the info was written before this process started: another process had the pid."""
    import psutil

    from ddpdoctor.run.supervisor import Proc

    me = os.getpid()
    assert Proc(me, {"t0": psutil.Process(me).create_time() - 60.0}, "/nonexistent").ps is None


# ---------------------------------------------------------------- (B) the job's own output, read by triage

@pytest.mark.parametrize("text, check_id", [(KEYERROR, "LOG023"), (PORT_IN_USE, "LOG007")])
def test_a_failure_no_rank_record_explains_is_read_from_the_jobs_output(text, check_id):
    found = from_job_output(text)
    assert found and found[0].id == check_id and found[0].severity == "error"
    assert "own output" in found[0].evidence["read_from"]
    assert not any(s.startswith(("path:", "line:")) for s in found[0].subjects)  # not our temporary file's


@pytest.mark.parametrize("text", ["", "step 1 loss 0.5\nstep 2 loss 0.4\n", "Traceback (most recent call last):\n"
                                  "  File \"t.py\", line 1, in <module>\nSystemExit: 3\n"])
def test_output_that_names_no_failure_gives_no_finding(text):
    assert [f.id for f in from_job_output(text) if f.severity == "error"] == []


def test_job_output_holds_every_exception_oldest_first_and_the_elastic_error_files(tmp_path):
    sup = Supervisor(["true"])
    sup.run_dir = str(tmp_path)
    (tmp_path / "exc.2.json").write_text(json.dumps({"t": 2.0, "traceback": "late\n"}))
    (tmp_path / "exc.1.json").write_text(json.dumps({"t": 1.0, "traceback": "early\n"}))
    (tmp_path / "error.3.json").write_text(json.dumps({"message": {"message": "ChildFailedError: rank 1 -9",
                                                                   "extraInfo": {"timestamp": "0"}}}))
    assert sup.job_output().splitlines() == ["ChildFailedError: rank 1 -9", "early", "late"]
    assert Supervisor(["true"]).job_output() == ""


def _doctor(tmp_path, script: str):
    path = tmp_path / "job.py"
    path.write_text(script)
    report = tmp_path / "r.json"
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "DDPDOCTOR_RUN_DIR")}
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-m", "ddpdoctor", "run", "--no-preflight", "--report", str(report), "--",
                          sys.executable, str(path)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    return out.returncode, out.stderr, json.loads(report.read_text())


@pytest.mark.slow
@pytest.mark.timeout(320)
def test_plain_python_launch_is_named_from_the_jobs_own_exception(tmp_path):
    """Needs a process: the exception record is written by the attach inside the job. No torch import
    (a second or two): the script fails on LOCAL_RANK before anything distributed starts."""
    rc, err, rep = _doctor(tmp_path, "import os\nlocal_rank = int(os.environ['LOCAL_RANK'])\n")
    ids = [f["id"] for f in rep["findings"]]
    assert rc == 1 and ids[:1] == ["LOG023"] and "RUN022" not in ids, err[-3000:]
    assert "its own output does" in err


# ---------------------------------------------------------------- (C) the rank that never arrived

TIMED_OUT = {"how": "exception", "t": 10.0, "t_src": "exception", "secondary": True,
             "exception": {"type": "RuntimeError", "message": "[/gloo/transport/tcp/unbound_buffer.cc:78] Timed out "
                                                              "waiting 2000ms for recv operation to complete"}}
TORN_DOWN = {"how": "signal", "signal": "SIGTERM", "t": 11.0, "t_src": "launcher", "secondary": True,
             "terminated_by": {"who": "torchrun", "signal": "SIGTERM", "after_ranks": [0], "reason": "a worker failed"}}


def _death_section(r0: dict, r1: dict) -> dict:
    from run_factory import section as make_section

    recs = [r0, r1]
    order = section.order_deaths(recs)
    late = section.never_arrived(recs, order)
    if late:
        order["never_arrived"] = late
    return make_section(recs, stall=False, death=order)


def _ranks_pair(before_end: str = "outside", r0_end: dict = TIMED_OUT, r1_colls: int = 3):
    from run_factory import frame, rank

    r0 = rank(0, "died", end=dict(r0_end), collectives=3, pg_timeout_s=2.0)
    r1 = rank(1, "died", end=dict(TORN_DOWN), collectives=r1_colls, before_end=before_end,
              user_frame=frame(11, "time.sleep(120)"))
    return r0, r1


def test_a_gloo_timeout_folds_under_the_rank_that_never_arrived():
    """Rank 1 sleeps in its own code; rank 0 waits in the gradient all-reduce until Gloo's timeout
    kills it, then torchrun ends rank 1. Root cause: rank 1 (where it was), not rank 0's timeout."""
    from run_factory import findings

    found = [f for f in findings(_death_section(*_ranks_pair())) if f.id == "RUN010"]
    assert len(found) == 1
    f = found[0]
    assert f.title.startswith("rank 1 never reached the collective rank 0 waited in"), f.title
    assert "train.py:11 `time.sleep(120)`" in f.title and "timeout (2 s)" in f.title
    assert f.detail.startswith("Root cause: rank 1") and "rank:1" in f.subjects


def test_a_rank_behind_in_the_collective_sequence_is_named_too():
    late = _death_section(*_ranks_pair(before_end="", r1_colls=2))["death"]["never_arrived"]
    assert late["ranks"] == [1] and late["late"][0]["behind"] is True


@pytest.mark.parametrize("case", ["peer-in-a-collective", "not-a-timeout"])
def test_no_reconciliation_when_the_peer_was_in_a_collective_or_the_death_was_no_timeout(case):
    """Quiet: the peer waited in a collective too (a mismatch, both timed out), or rank 0 died of its own
    exception: rank 0 stays the root cause."""
    from run_factory import findings

    if case == "peer-in-a-collective":
        pair = _ranks_pair(before_end="collective")
    else:
        pair = _ranks_pair(r0_end=dict(TIMED_OUT, secondary=False, exception={"type": "ValueError",
                                                                              "message": "bad batch at step 3"}))
    sec = _death_section(*pair)
    assert "never_arrived" not in sec["death"]
    f = next(f for f in findings(sec) if f.id == "RUN010")
    assert f.title.startswith("rank 0 died first"), f.title


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_rank_stuck_outside_collectives_is_the_root_cause_of_the_gloo_timeout(tmp_path):
    """Needs real Gloo: the timeout's exception, torchrun's teardown and the stack taken before it are the
    facts the verdict reads. Short: the process group's timeout is 2 s."""
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "DDPDOCTOR_RUN_DIR",
                                                           "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID")}
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    report = tmp_path / "r.json"
    cmd = [sys.executable, "-m", "ddpdoctor", "run", "--no-preflight", "--grace", "3", "--report", str(report), "--",
           sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           os.path.join(ROOT, "fixtures", "run", "loop.py"), "--fault", "stuck"]
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=380)
    rep = json.loads(report.read_text())
    f = next(f for f in rep["findings"] if f["id"] == "RUN010")
    assert f["title"].startswith("rank 1 never reached the collective rank 0 waited in"), out.stderr[-3000:]
    assert "time.sleep(120)" in f["title"]


# ---------------------------------------------------------------- (D) stopped while the launcher waited in rendezvous

RDZV = {"nnodes": 2, "host": "head", "port": 29400, "ranks_started": 0, "ranks_in_init": 0, "waited_s": 600.0,
        "launcher_frame": {"pid": 9, "file": "/site/torch/distributed/elastic/rendezvous/dynamic_rendezvous.py",
                           "line": 1171, "func": "next_rendezvous"}}


def test_a_stop_during_the_rendezvous_says_what_the_launcher_waited_for():
    from run_factory import findings, section as make_section

    sec = make_section([], stall=False, kill={"reason": "ddpdoctor run received SIGTERM", "t": 1.0}, rendezvous=RDZV)
    f = [f for f in findings(sec) if f.id == "RUN024"]
    assert len(f) == 1 and f[0].severity == "warning"
    assert "for 2 nodes at head:29400" in f[0].title and "next_rendezvous (dynamic_rendezvous.py:1171)" in f[0].title


def test_a_stop_of_a_job_whose_ranks_joined_is_no_rendezvous_wait():
    from run_factory import findings, rank, section as make_section

    sec = make_section([rank(0), rank(1)], stall=False, kill={"reason": "ddpdoctor run received SIGTERM", "t": 1.0})
    assert "RUN024" not in [f.id for f in findings(sec)]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_sigterm_while_torchrun_waits_for_a_second_node(tmp_path):
    """Needs a process: torchrun's agent in its rendezvous is the state. SIGTERM goes to `ddpdoctor run`
    only once the rendezvous store listens (the agent is waiting), never on a timer."""
    import signal
    import socket
    import time

    from procs import reached

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "DDPDOCTOR_RUN_DIR",
                                                           "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID")}
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    report = tmp_path / "r.json"
    proc = subprocess.Popen([sys.executable, "-m", "ddpdoctor", "run", "--no-preflight", "--grace", "3", "--report",
                             str(report), "--", sys.executable, "-m", "torch.distributed.run", "--nnodes", "2",
                             "--nproc-per-node", "1", "--rdzv-backend", "c10d", "--rdzv-endpoint",
                             f"127.0.0.1:{port}", "--rdzv-id", "r12", os.path.join(ROOT, "fixtures", "run", "loop.py")],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def listening():
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            return False

    try:
        # the state: the agent's rendezvous store listens (a bound that fails, never signals anyway; before, the
        # wait fell through at its 200 s and signalled an agent that might not be in its rendezvous at all)
        reached(listening, 200, "torchrun's rendezvous store listening", poll_s=0.3, alive=lambda: proc.poll() is None)
        time.sleep(1.0)  # not a timed assert: the agent is in the rendezvous already; this lets it reach its wait loop
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143
    rep = json.loads(report.read_text())
    f = next((f for f in rep["findings"] if f["id"] == "RUN024"), None)
    assert f is not None, out[-3000:]
    assert f"for 2 nodes at 127.0.0.1:{port}" in f["title"] and "no rank had started" in f["title"]


# ---- the supervisor's own CPU (wave 2): what a steady poll no longer does

def test_as_the_jobs_subreaper_a_moved_process_count_walks_no_tree():
    """Trigger: after TREE_EARLY_S, the node's process count moved; as the child subreaper no walk (every process
    of the job stays this one's descendant; Tree.live walks before any ending), only every TREE_MAX_S."""
    from ddpdoctor.run.supervisor import TREE_EARLY_S, TREE_MAX_S, tree_walk_due

    assert not tree_walk_due(TREE_EARLY_S + 5, 101, 100, 5.0, subreaper=True)
    assert tree_walk_due(TREE_EARLY_S + 5, 101, 100, TREE_MAX_S, subreaper=True)
    assert tree_walk_due(1.0, 100, 100, 1.0, subreaper=True)  # the job's start: always


def test_without_a_subreaper_a_moved_process_count_still_walks_the_tree():
    """Quiet twin: not the subreaper (a library call, prctl refused): the count decides, as before."""
    from ddpdoctor.run.supervisor import TREE_EARLY_S, tree_walk_due

    assert tree_walk_due(TREE_EARLY_S + 5, 101, 100, 5.0, subreaper=False)
    assert tree_walk_due(TREE_EARLY_S + 5, None, 100, 5.0, subreaper=False)
    assert not tree_walk_due(TREE_EARLY_S + 5, 100, 100, 5.0, subreaper=False)
    assert tree_walk_due(TREE_EARLY_S + 5, 100, None, None, subreaper=False)  # never walked


def test_a_directory_is_listed_again_only_when_it_changed(tmp_path):
    """listing_due (the run directory's info files, the Flight Recorder dumps): unchanged and old -> not listed;
    a new file moves the mtime -> listed; a fresh mtime (coarse tick) or an unreadable one -> listed."""
    from ddpdoctor.run.supervisor import DISCOVER_FRESH_S, listing_due

    m = os.stat(tmp_path).st_mtime
    assert not listing_due(m, m, m + DISCOVER_FRESH_S + 1)
    assert listing_due(m, m, m + DISCOVER_FRESH_S / 2)
    assert listing_due(None, m, m + 100)
    os.utime(tmp_path, (m - 10, m - 10))
    (tmp_path / "nccl_trace_rank_1").write_bytes(b"{}")
    m2 = os.stat(tmp_path).st_mtime
    assert m2 != m - 10 and listing_due(m2, m - 10, m2 + 100)


def test_a_flight_recorder_dump_in_an_unchanged_directory_is_not_globbed_again(tmp_path, monkeypatch):
    """The supervisor's Flight Recorder check globs its prefix only when the directory changed: a dump written
    there is found (the mtime moved), and a poll later with nothing new does not glob."""
    import glob as globmod

    from ddpdoctor.run import supervisor as sv

    sup = Supervisor(["true"], stall_after=5.0)
    sup.fr_prefix, sup.fr_seen = str(tmp_path / "nccl_trace_rank_"), set()
    globs = []
    real = globmod.glob
    monkeypatch.setattr(sv.glob, "glob", lambda pat: (globs.append(pat), real(pat))[1])
    old = os.stat(tmp_path).st_mtime - 60
    os.utime(tmp_path, (old, old))
    sup._check_flight_recorder()  # first look: listed, nothing there
    sup._check_flight_recorder()  # unchanged and old: not listed
    assert len(globs) == 1
    seen = []
    monkeypatch.setattr(sup, "take_stacks", lambda ps: seen.append("stacks"))
    monkeypatch.setattr(sup, "take_native", lambda ps, timeout_s=0: seen.append("native"))
    monkeypatch.setattr(sv.time, "sleep", lambda s: None)
    monkeypatch.setattr(sup, "_rank_procs", lambda: [])
    (tmp_path / "nccl_trace_rank_0").write_bytes(b"not a dump")
    try:
        sup._check_flight_recorder()
    except Exception:  # noqa: BLE001 - reading a bad dump may complain: what matters is that it was found
        pass
    assert seen[:1] == ["stacks"] and len(globs) > 1


# ---------------------------------------------------------------- the peer a reset error lost (held-out review, round 13)

RESET = {"how": "exception", "t": 10.0, "t_src": "exception", "secondary": True,
         "exception": {"type": "RuntimeError", "message": "[/gloo/transport/tcp/pair.cc:537] Read error "
                                                          "[127.0.0.1]:21223: Connection reset by peer"}}
SIGTERMED = {"how": "signal", "signal": "SIGTERM", "t": 10.4, "t_src": "poll", "secondary": True}


def test_a_rank_sigtermed_alone_is_the_peer_its_neighbours_reset_error_lost():
    """SIGTERM to one worker (a node agent, `kill PID`): it dies with no record, seen gone by a poll 0.4 s after its
    peer's "Connection reset by peer" (whose exception carries its own, earlier, time). The reset names a lost peer:
    the silent rank is the root cause, not the rank that reported losing it."""
    from run_factory import rank

    r0 = rank(0, "died", end=dict(SIGTERMED), collectives=3)
    r1 = rank(1, "died", end=dict(RESET), collectives=3)
    assert section.order_deaths([r0, r1])["first_rank"] == 0


def test_torchruns_teardown_sigterm_after_a_reset_is_not_taken_for_the_lost_peer():
    """The same reset, but the other rank's SIGTERM is torchrun's teardown (on record): the order stays by time; and a
    first error that names no lost peer is never reordered."""
    from run_factory import rank

    r0 = rank(0, "died", end=dict(TORN_DOWN, t=10.4), collectives=3)
    r1 = rank(1, "died", end=dict(RESET), collectives=3)
    assert section.order_deaths([r0, r1])["first_rank"] == 1
    plain = dict(RESET, exception={"type": "ValueError", "message": "bad batch"}, secondary=False)
    r0 = rank(0, "died", end=dict(SIGTERMED), collectives=3)
    r1 = rank(1, "died", end=plain, collectives=3)
    assert section.order_deaths([r0, r1])["first_rank"] == 1
