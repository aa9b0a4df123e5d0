"""The generic launcher: bounded runs through torch's elastic agent, root causes, no orphans."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest
from machine import scaled, with_room
from procs import marked as marked_procs

from ddpdoctor.launch import LaunchSpec, Reporter, free_port, launch, port_is_free, root_cause

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def run(nproc=2, deadline_s=None, rank_env=None, **kw):
    mark = uuid.uuid4().hex
    deadline_s = scaled(30.0) if deadline_s is None else deadline_s
    spec = LaunchSpec(module="comm_fixture_worker", nproc=nproc, deadline_s=deadline_s, teardown_s=2.0,
                      env={"PYTHONPATH": os.pathsep.join([ROOT, HERE]), "DDPDOCTOR_TEST_MARK": mark,
                           "LW_INIT_TIMEOUT_S": str(max(10.0, 3 * deadline_s))},
                      rank_env=rank_env or {}, **kw)
    t0 = time.monotonic()
    res = launch(spec)
    elapsed = time.monotonic() - t0
    assert marked_procs(mark) == [], "a launched process survived the run"
    assert port_is_free(res.master_port), "the rendezvous port is still bound"
    return res, elapsed


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_healthy_run_reports_every_rank():
    res, _ = run()
    assert res.ok and not res.timed_out and res.root_cause is None
    assert [r.result["sum"] for r in res.ranks] == [[2.0] * 4, [2.0] * 4]
    assert all(r.phases and r.host for r in res.ranks)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_crash_names_the_rank_and_its_exception():
    res, _ = run(rank_env={1: {"LW_MODE": "crash"}})
    assert not res.ok
    rc = res.root_cause
    assert rc["kind"] == "crashed" and rc["rank"] == 1 and rc["phase"] == "allreduce"
    assert "RuntimeError: injected crash" in rc["message"]
    assert "comm_fixture_worker.py" in rc["traceback"]


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_abort_after_report_is_not_a_failure():
    res, _ = run(rank_env={0: {"LW_MODE": "abort"}})
    assert res.ok and res.root_cause is None
    assert res.teardown == "aborted-after-report"
    assert res.rank(0).signal == "SIGABRT"


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_never_started_rank_is_named_within_deadline():
    # the state it needs: rank 0 reported a phase by the deadline (else both never started, and the run says nothing
    # of rank 1); a run that did not get there is run again with more room (machine.with_room), never judged
    (res, elapsed), deadline = with_room(
        lambda d: run(deadline_s=d, rank_env={1: {"DDPDOCTOR_LAUNCH_HOLD_S": "300"}}),
        lambda got: bool(got[0].rank(0).phases), 6.0, "rank 0 reporting a phase by the deadline")
    assert res.timed_out and not res.ok
    assert res.root_cause["kind"] == "never-started" and res.root_cause["rank"] == 1
    assert elapsed < deadline + 2 + 4  # the tool's bound (+ teardown), generous on shared cores


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_sigterm_to_the_parent_leaves_nothing_behind(tmp_path):
    mark = uuid.uuid4().hex
    script = tmp_path / "drive.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        from ddpdoctor.launch import LaunchSpec, launch, Interrupted
        try:
            launch(LaunchSpec(module="comm_fixture_worker", nproc=2, deadline_s=60,
                              env={{"PYTHONPATH": {os.pathsep.join([ROOT, HERE])!r}, "DDPDOCTOR_TEST_MARK": {mark!r},
                                   "LW_MODE": "stall"}}))
        except Interrupted:
            print("INTERRUPTED", flush=True)
            sys.exit(143)
    """))
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE, text=True)
    t_end = time.monotonic() + 120
    while time.monotonic() < t_end and len(marked_procs(mark)) < 3:  # agent + 2 workers
        time.sleep(0.2)
    assert len(marked_procs(mark)) >= 3
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 143 and "INTERRUPTED" in out
    assert marked_procs(mark) == []


def test_reporter_writes_atomically_and_root_cause_orders(tmp_path):
    rep = Reporter(str(tmp_path), rank=3)
    rep.phase("a")
    rep.phase("b")
    rep.result({"x": 1})
    import json

    doc = json.loads((tmp_path / "result-3.json").read_text())
    assert [p["name"] for p in doc["phases"]] == ["a", "b"] and doc["x"] == 1
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]
    assert free_port() > 0


def test_root_cause_prefers_first_non_teardown_failure():
    from ddpdoctor.launch import LaunchResult, RankOutcome

    res = LaunchResult(ok=False, nproc=3, world_size=3, master_addr="127.0.0.1", master_port=1, elapsed_s=1,
                       ranks=[RankOutcome(0, 0, exitcode=-15, signal="SIGTERM", failure_time=1.0),
                              RankOutcome(1, 1, exitcode=1, failure_time=5.0, error={"message": "late"}),
                              RankOutcome(2, 2, exitcode=2, failure_time=3.0, error={"message": "first"})])
    rc = root_cause(res)
    assert rc["rank"] == 2 and rc["message"] == "first"


# The message rank 0 of `ddpdoctor probe --inject crash@1=3` records when rank 1 is gone (torch 2.13.0 cf30153c,
# third_party/gloo/gloo/transport/tcp/pair.cc).
_GLOO_PEER_GONE = ("RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection "
                   "closed by peer [127.0.0.1]:45266. This is typically caused by a remote worker crashing.")


def _two(rank1: "RankOutcome", rank0_signal=None):
    from ddpdoctor.launch import LaunchResult, RankOutcome

    rank0 = RankOutcome(0, 0, exitcode=-15 if rank0_signal else 1, signal=rank0_signal, failure_time=100.6,
                        error={"message": _GLOO_PEER_GONE})
    return LaunchResult(ok=False, nproc=2, world_size=2, master_addr="127.0.0.1", master_port=1, elapsed_s=1,
                        ranks=[rank0, rank1])


def test_trigger_a_rank_stopped_by_sigterm_after_its_own_error_is_the_root_cause():
    """Trigger (round 22 load flake of test_rank_dies_mid_run_named_with_error_no_orphans): rank 1 recorded its own
    RuntimeError at 100.2 s, then took longer to exit than rank 0, which failed on the lost peer at 100.6 s and exited
    1 first: the agent stopped rank 1 with SIGTERM. Rank 1's real end is its error, not the signal (at e35e14fa:
    rank 0, the only rank not signalled)."""
    from ddpdoctor.launch import RankOutcome

    rank1 = RankOutcome(1, 1, exitcode=-15, signal="SIGTERM", failure_time=100.2,
                        error={"message": "RuntimeError: ddpdoctor --inject crash: rank 1 stops at step 3"})
    rc = root_cause(_two(rank1))
    assert rc["rank"] == 1 and "inject crash" in rc["message"], rc


def test_quiet_a_rank_stopped_by_sigterm_with_no_error_of_its_own_stays_a_teardown_victim():
    """Quiet: rank 1 stopped by SIGTERM with no error recorded (or only the stop signal reaching Python) is the
    launcher's teardown, whatever its time: rank 0's own failure stays the root cause."""
    from ddpdoctor.launch import RankOutcome

    for err in (None, {"message": "SignalException: Process 8788 got signal: 15"}):
        rank1 = RankOutcome(1, 1, exitcode=-15, signal="SIGTERM", failure_time=100.2, error=err)
        assert root_cause(_two(rank1))["rank"] == 0, err


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_hang_after_report_is_bounded_and_not_a_failure():
    deadline = scaled(40.0)  # the passing path never waits it: the start-up of 3 torch processes is the machine's
    res, elapsed = run(deadline_s=deadline, rank_env={1: {"LW_MODE": "hang"}})
    assert res.ok and res.teardown == "hung-after-report" and res.root_cause is None
    assert elapsed < deadline  # the teardown grace ended it, not the deadline
