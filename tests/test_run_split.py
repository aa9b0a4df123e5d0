"""The step split, the straggler and its cause, the job table, each rank's real end, the SIGKILL's
explanation and the hidden recorder frames: pure functions on written inputs (no process)."""
from __future__ import annotations

import os
import random

import pytest

from ddpdoctor.facts import steps as st
from ddpdoctor.model.registry import REGISTRY  # noqa: F401
from ddpdoctor.pipeline.judge import judge
from ddpdoctor.pipeline.runner import load_all
from ddpdoctor.pipeline.snapshot import Snapshot
from ddpdoctor.run import beacon, kills
from ddpdoctor.run import section as run_section

from run_factory import proc

load_all()


def _keep_state(monkeypatch, S) -> None:
    """Every field of the recorder's state comes back after the test (S has slots, no __dict__ to swap)."""
    for name in type(S).__slots__:
        if hasattr(S, name):
            monkeypatch.setattr(S, name, getattr(S, name))


def findings(sec, check):
    return judge(Snapshot(sections={"run": sec}), command="run", only={check}, when="run").findings


def rec(step, data=1.0, compute=10.0, coll=2.0, optim=1.0, other=0.5, cpu=12.0, batches=1):
    return (step, batches, 1000.0 + step, data, compute, coll, optim, other, cpu)


def job(n_ranks=4, steps=40, slow=None, extra=0.0, part="compute", noise=0.0, seed=0, onset=0, cpu_follows=False):
    """Steps of a DDP job: every rank's step ends together; the fast ranks wait for the slowest."""
    rnd = random.Random(seed)
    out = {r: [] for r in range(n_ranks)}
    for s in range(1, steps + 1):
        own = {}
        for r in range(n_ranks):
            parts = {"data": 1.0, "compute": 10.0, "optimizer": 1.0, "other": 0.5}
            parts = {k: v * (1 + rnd.uniform(-noise, noise)) for k, v in parts.items()}
            if r == slow and s >= onset:
                parts[part] += extra
            own[r] = parts
        slowest = max(sum(p.values()) for p in own.values())
        for r, p in own.items():
            coll = 1.0 + slowest - sum(p.values())
            more = extra if cpu_follows and r == slow and s >= onset else 0.0
            out[r].append(rec(s, p["data"], p["compute"], coll, p["optimizer"], p["other"], cpu=11.0 + more))
    return out


def test_beacon_ring_keeps_the_last_steps_and_counts_them(tmp_path):
    w = beacon.Writer(str(tmp_path / "b"))
    w.hot("run", False, False, 1.0, 1.0, 0.0, 0.0, 0, 0, 0, 0)
    for i in range(1, beacon.RING + 11):
        if i % 2:
            w.step(i, 2, 100.0 + i, 0.001, 0.002, 0.003, 0.004, 0.005, 0.006)
        else:  # the optimizer step's way: the record with the hot fields, under one counter
            w.hot("run", False, False, 1.0, 1.0, 0.5, 0.1, i, 0, 0, 0, (i, 2, 100.0 + i, 0.001, 0.002, 0.003, 0.004, 0.005, 0.006))
    b = beacon.read(str(tmp_path / "b"))
    ring = b["ring"]
    assert ring["n"] == beacon.RING + 10 and len(ring["steps"]) == beacon.RING
    assert [s[0] for s in ring["steps"]] == list(range(11, beacon.RING + 11))
    first, last = ring["steps"][0], ring["steps"][-1]
    assert first[0] == 11 and last[0] == beacon.RING + 10 and last[1] == 2
    assert [round(x, 3) for x in last[3:9]] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0] and last[9] == 1  # one step
    assert b["step"] == beacon.RING + 10 and b["phase"] == "run" and b["st"] == 0.5
    # a poller that read the first RING + 7 entries already gets the 3 newer ones only
    newer = beacon.read(str(tmp_path / "b"), ring_from=beacon.RING + 7)["ring"]
    assert newer["n"] == beacon.RING + 10 and [s[0] for s in newer["steps"]] == [beacon.RING + 8, beacon.RING + 9,
                                                                                 beacon.RING + 10]
    assert beacon.read(str(tmp_path / "b"), ring_from=5)["ring"]["steps"] == ring["steps"]  # those fell out already


def test_summary_median_p95_and_samples_per_s():
    steps = [rec(i, compute=10.0 + (i % 2)) for i in range(1, 21)]
    s = st.summary(steps, batch_size=8)
    assert s["steps"] == 20 and s["compute"]["median"] == 10.5 and s["compute"]["p95"] == 11.0
    assert abs(s["samples_per_s"] - 8 * 20 / (sum(st.step_ms(x) for x in steps) / 1000)) < 0.5


def test_straggler_named_with_cost_and_long_part():
    s = st.straggler(job(slow=2, extra=200.0, noise=0.05))
    assert s["ranks"] == [2] and sorted(s["others"]) == [0, 1, 3]
    assert 190 < s["cost_ms"] < 210 and s["part"] == "compute" and s["consistent"] >= 0.95


def test_straggler_by_data_and_its_cause():
    s = st.straggler(job(slow=1, extra=150.0, part="data", noise=0.05))
    assert s["ranks"] == [1] and s["part"] == "data"
    c = st.cause(s, {"1": {"workers": 0}})
    assert c["kind"] == "slow-data-loader" and "num_workers=0" in c["text"]


def test_no_straggler_in_a_healthy_noisy_job():
    for seed in range(20):
        assert st.straggler(job(noise=0.3, seed=seed, steps=400)) is None, seed


def test_a_fast_job_needs_3_s_of_steps_before_a_straggler_is_named():
    """On a busy host the scheduler can hold one rank back for a few fast steps in a row: 30 slow steps
    of a 14 ms job (0.5 s) are not a straggler; the same slowdown over 3 s of steps is."""
    short = job(slow=1, extra=10.0, steps=300, onset=270, noise=0.02)
    assert st.straggler(short) is None
    long = job(slow=1, extra=10.0, steps=300, onset=60, noise=0.02)
    assert st.straggler(long)["ranks"] == [1]


def test_no_straggler_until_the_window_holds_the_delay():
    by_rank = job(slow=3, extra=200.0, steps=30, onset=25)
    assert st.straggler(by_rank) is None
    # persistence: 16 slow steps of the 20-step window pass the 75% bar, but its first third is mostly
    # from before the delay; once every third holds it, it is named
    assert st.straggler(job(slow=3, extra=200.0, steps=40, onset=25)) is None
    assert st.straggler(job(slow=3, extra=200.0, steps=44, onset=25))["ranks"] == [3]


def test_a_burst_over_part_of_the_window_is_no_straggler():
    """A rank the host held back for 80% of the window (over the 75% bar) is not named: one of the window's
    three parts does not show it. Held for the whole window, it is."""
    assert st.straggler(job(slow=1, extra=8.0, steps=20, onset=5)) is None
    assert st.straggler(job(slow=1, extra=8.0, steps=20, onset=5), min_window_s=0.0) is None
    whole = job(slow=1, extra=8.0, steps=20, onset=0)
    assert st.straggler(whole, min_window_s=0.0)["ranks"] == [1]


def test_a_cost_inside_the_healthy_ranks_jitter_is_no_straggler():
    """Cost against the others' own spread, measured in the same window: a 6 ms lead among ranks whose
    step time outside collectives jitters by +-40% (sigma ~3 ms) names nobody; with +-5% jitter it does."""
    s = st.straggler(job(slow=2, extra=6.0, noise=0.05, steps=40, seed=1), min_window_s=0.0)
    assert s is not None and s["ranks"] == [2] and s["others_sigma_ms"] < 2.0
    for seed in range(5):
        noisy = job(slow=2, extra=6.0, noise=0.4, steps=40, seed=seed)
        al = st.aligned(noisy)
        assert st.others_sigma(al, [0, 1, 3]) * st.MARGIN_SIGMA > 6.0
        assert st.straggler(noisy, min_window_s=0.0) is None, seed


def test_causes_from_facts():
    s = st.straggler(job(slow=0, extra=100.0, part="other", noise=0.02, cpu_follows=True))
    assert st.cause(s, {"0": {}})["kind"] == "extra-work"  # the CPU time went up with it: rank-0 work
    s2 = st.straggler(job(slow=1, extra=100.0, noise=0.02))
    s2["cpu_ms"] = {"straggler": 11.0, "others": 11.0}  # the same CPU time, a longer wall time
    assert st.cause(s2, {"1": {"threads": 4, "cpus": 2, "ranks_on_host": 2}})["kind"] == "cpu-oversubscribed"
    assert st.cause(s2, {"1": {"load_per_cpu": 3.0}})["kind"] == "busy-host"
    assert st.cause(s2, {"1": {"gpu": {"throttle": ["HwSlowdown"]}}})["kind"] == "gpu-throttled"
    w = st.cause(s2, {"1": {"sleeping_frac": 0.9, "running_frac": 0.1, "samples": 25, "load_per_cpu": 3.0,
                            "line": "train.py:9 `time.sleep(0.2)`"}})
    assert w["kind"] == "waiting" and "train.py:9" in w["text"] and "asleep in 90%" in w["text"]  # not the busy host


def test_table_groups_alike_ranks_and_marks_the_straggler():
    by_rank = job(n_ranks=4, slow=3, extra=50.0, noise=0.0)
    sums = {r: st.summary(v) for r, v in by_rank.items()}
    lines = st.table_lines(sums, [3])
    rows = [ln.split()[0] for ln in lines[3:]]
    assert rows == ["0-2", "3"] and "*" in lines[-1] and "* the straggler" in lines[0]
    held = st.table_lines(sums, [3], "held back by the host")  # RUN023: the rank marked, not called a straggler
    assert "* held back by the host" in held[0] and "straggler" not in held[0]


def test_the_table_says_which_steps_it_counts_when_start_up_is_left_out():
    """run26's left class: 20 steps summarised with skip=5 showed "15" in the steps column and nothing said why."""
    by_rank = job(n_ranks=2, steps=20)
    whole = st.table_lines({r: st.summary(v) for r, v in by_rank.items()})
    assert not any("start-up" in ln for ln in whole)  # nothing left out: nothing said
    cut = st.table_lines({r: st.summary(v, skip=5) for r, v in by_rank.items()})
    assert cut[3].split()[1] == "15"
    [note] = [ln for ln in cut if "start-up" in ln]
    assert "counted from step 6" in note and "the first 5 optimizer step(s)" in note


def test_run020_straggler_finding():
    s = st.straggler(job(slow=2, extra=200.0, noise=0.05))
    s["cause"] = st.cause(s, {"2": {"running_frac": 0.0, "samples": 10, "line": "t.py:3 `time.sleep(0.2)`"}})
    s["facts"] = {"2": {"line": "t.py:3 `time.sleep(0.2)`"}}
    [f] = findings({"ranks": [], "straggler": s}, "RUN020")
    assert f.title.startswith("rank 2 is the straggler: the other ranks wait") and "t.py:3" in f.title
    assert f.severity == "warning" and "rank:2" in f.subjects and "part:compute" in f.subjects
    assert findings({"ranks": []}, "RUN020") == []


# ---------------------------------------------------------------- each rank's real end

def test_two_ranks_that_vanished_in_one_poll_are_a_tie_never_rank_0():
    """Before: both labelled SIGKILL, the tie went to the lower rank."""
    sec = run_section.build([proc(10, 0), proc(11, 1, end_t=50.1)], 60.0, death=True)
    assert sec["death"]["first_rank"] is None and sorted(sec["death"]["tied"]) == [0, 1]
    [f] = findings(sec, "RUN010")
    assert f.title.startswith("ranks 0, 1 ended within")


def test_torchrun_record_makes_the_terminated_rank_a_consequence():
    view = run_section.launcher_view([{"t": 49.9, "signal": "SIGTERM", "reason": "a worker failed",
                                       "failed": [{"local_rank": 1, "rank": 1, "pid": 11, "exitcode": -9, "t": 49.9}],
                                       "targets": [{"local_rank": 0, "rank": 0, "pid": 10, "exitcode": -15}]}])
    p0, p1 = proc(10, 0, launcher=view[10]), proc(11, 1, end_t=50.1, launcher=view[11])
    sec = run_section.build([p0, p1], 60.0, death=True)
    assert sec["death"]["first_rank"] == 1 and sec["death"]["order"] == [1, 0]
    [f] = findings(sec, "RUN010")
    assert f.title.startswith("rank 1 died first at step 3: was killed by SIGKILL")
    assert f.detail.startswith("Root cause: rank 1 (was killed by SIGKILL)")
    assert "rank 0 (was ended by SIGTERM from torchrun's teardown after rank 1 failed" in f.detail


def test_os_exit_zero_is_a_clean_end_and_a_failed_allocation_is_out_of_memory():
    clean = proc(10, 0, beacon={"phase": "exit", "xc": 0})
    assert run_section.end_of(clean, 0) is None
    msg = ("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you tried to "
           "allocate 1125899906842624 bytes. Error code 12 (Cannot allocate memory)")
    end = run_section.end_of(proc(11, 1, exc={"type": "RuntimeError", "message": msg, "t": 40.0}), 0)
    assert end["why"] == "cpu-oom"
    cuda = "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB"
    assert run_section.end_of(proc(12, 1, exc={"type": "OutOfMemoryError", "message": cuda, "t": 1}), 0)["why"] == "cuda-oom"


def test_sigkill_explained_from_cgroup_v2_and_kmsg(tmp_path):
    cg = tmp_path / "cg"
    cg.mkdir()
    (cg / "memory.events").write_text("low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n")
    (cg / "memory.max").write_text(str(8 << 30) + "\n")
    ev = kills.KillEvidence(environ={}, cgroup_dir=str(cg), kmsg_path=str(tmp_path / "no-kmsg"), xid=False)
    (cg / "memory.events").write_text("low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\n")
    got = ev.explain(4242, rss_mb=8100.0)
    assert got["cause"] == "cgroup-limit" and "oom_kill 0 -> 1" in got["evidence"] and "8.0 GiB" in got["evidence"]
    ev2 = kills.KillEvidence(environ={}, cgroup_dir=str(tmp_path / "none"), kmsg_path=str(tmp_path / "x"), xid=False)
    ev2.kmsg.lines = ["Out of memory: Killed process 4242 (python) total-vm:9000000kB, anon-rss:8000000kB"]
    ev2.kmsg.fd = None
    got = ev2.explain(4242)
    assert got["cause"] == "oom-killer" and "Killed process 4242" in got["evidence"]
    assert ev2.explain(4343)["cause"] is None  # another pid: not this rank's kill


def test_sigkill_explained_from_cgroup_v1_slurm_and_what_to_read(tmp_path):
    cg = tmp_path / "v1"
    cg.mkdir()
    (cg / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 0\n")
    ev = kills.KillEvidence(environ={"SLURM_JOB_ID": "77"}, cgroup_dir=str(cg), kmsg_path=str(tmp_path / "x"), xid=False,
                            slurm_reader=lambda job: {"JobState": "TIMEOUT", "TimeLimit": "00:10:00",
                                                      "EndTime": "2026-01-01T00:10:00"})
    nothing = ev.explain(5)
    assert nothing["cause"] is None and "dmesg" in nothing["read"] and "sacct -j 77" in nothing["read"]
    ev.sigterm_t = 100.0
    slurm = ev.explain(5)
    assert slurm["cause"] == "slurm" and "SIGKILL after KillWait" in slurm["text"] and "time limit" in slurm["text"]
    (cg / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")
    assert ev.explain(5)["cause"] == "oom-killer"


def test_recorder_frames_are_stripped_from_tracebacks():
    from ddpdoctor.run import recorder

    def user():
        raise ValueError("x")

    files = _traceback_files(recorder._wrap_span(user, recorder.OTHER))
    assert "recorder.py" not in files and files[-1] == "test_run_split.py"


def _traceback_files(call) -> list:
    """The file of each frame in the traceback of the ValueError that `call()` raises."""
    try:
        call()
    except ValueError as exc:
        files = []
        tb = exc.__traceback__
        while tb is not None:
            files.append(os.path.basename(tb.tb_frame.f_code.co_filename))
            tb = tb.tb_next
        return files
    raise AssertionError("no ValueError raised")


def coll(group, seq, state, op="all_reduce", line="/x/t.py:30", ranks=None, t=1.0):
    return {"group": 0 if group == "default" else 1, "group_name": group, "group_ranks": ranks, "seq": seq,
            "op": op, "state": state, "line": line, "bytes": 4, "t": t}


def stalled(rank, hist):
    return {"rank": rank, "pid": 100 + rank, "state": "collective", "doing": "all_reduce", "alive": True, "step": 3,
            "user_frame": {"file": "/x/t.py", "line": 30, "func": "main"}, "coll_history": hist,
            "last_collective": {"op": "all_reduce", "seq": len(hist), "in": True}}


def test_run008_ranks_behind_on_different_groups_and_where_they_parted():
    r0 = stalled(0, [coll("default", 5, "done", t=1), coll("A", 1, "in", ranks=[0, 1], t=2)])
    r1 = stalled(1, [coll("default", 5, "done", t=1), coll("B", 1, "in", ranks=[0, 1], t=2)])
    [f] = findings({"ranks": [r0, r1], "stall": {"idle_s": 5}}, "RUN008")
    assert "wait at the same line" in f.title and "rank 0 waits in all_reduce #1 of group A" in f.title
    assert "which rank 1 has not called" in f.title and "They parted after all_reduce #5 of the default group" in f.detail
    assert findings({"ranks": [r0, r1], "stall": {"idle_s": 5}}, "RUN007") == []


def test_run008_every_rank_in_the_same_collective_none_behind():
    r0 = stalled(0, [coll("default", 7, "in")])
    r1 = stalled(1, [coll("default", 7, "in")])
    [f] = findings({"ranks": [r0, r1], "stall": {"idle_s": 5}}, "RUN008")
    assert "none is behind or ahead" in f.title and "Flight Recorder" in f.fix
    r1b = stalled(1, [coll("default", 6, "done"), coll("default", 7, "done")])
    r1b["state"], r1b["last_collective"]["in"] = "outside", False
    assert findings({"ranks": [r0, r1b], "stall": {"idle_s": 5}}, "RUN008") == []  # not every rank waits: RUN002's


def test_trace_steps_nest_their_split_and_tracks_never_overlap():
    from ddpdoctor.run.trace import trace_events

    by_rank = job(n_ranks=2, steps=5, slow=1, extra=20.0)
    ranks = {r: {"host": "h", "pid": 10 + r, "steps": v,
                 "colls": [coll("default", 3, "in", t=1003.0)], "end": None} for r, v in by_rank.items()}
    evs = trace_events(1000.0, ranks, [{"t": 1004.0, "kind": "straggler", "title": "rank 1", "ranks": [1]}])
    for tid in (0, 1):
        steps = [e for e in evs if e.get("cat") == "step" and e["tid"] == tid]
        parts = [e for e in evs if e.get("cat") == "split" and e["tid"] == tid]
        assert len(steps) == 5 and {e["name"] for e in parts} >= {"data", "compute", "collective"}
        for a, b in zip(steps, steps[1:]):
            assert a["ts"] + a["dur"] <= b["ts"] + 0.1
        for p in parts:
            host = next(s for s in steps if s["ts"] <= p["ts"] + 0.05 and p["ts"] + p["dur"] <= s["ts"] + s["dur"] + 0.15)
            assert host
    assert any(e.get("cat") == "straggler" and e["tid"] == 1 for e in evs)
    assert any(e.get("cat") == "collective" and e["name"].startswith("all_reduce #3") for e in evs)


def test_sigkill_after_a_gpu_xid_is_explained_with_its_meaning(tmp_path):
    ev = kills.KillEvidence(environ={}, cgroup_dir=str(tmp_path / "none"), kmsg_path=str(tmp_path / "x"), xid=False)
    ev.xid = kills.XidWatch()
    ev.xid.events.append({"t": 100.0, "gpu": 3, "xid": 79})
    got = ev.explain(77, gpu=3)
    assert got["cause"] == "gpu-xid" and "Xid 79" in got["text"] and "GPU 3" in got["evidence"]
    assert ev.explain(77, gpu=1)["cause"] is None  # another GPU's Xid is not this rank's


def test_table_lines_of_a_supervisor_and_its_sigusr1_handler():
    """`kill -USR1` sets the flag the watch loop prints the table on; the table reads each rank's steps."""
    import signal as _signal

    from ddpdoctor.run.supervisor import Proc, Supervisor

    sup = Supervisor(["true"])
    for r, steps in job(n_ranks=2, steps=30).items():
        p = Proc.__new__(Proc)
        p.pid, p.info, p.alive, p.missed = 1000 + r, {"kind": "proc", "ppid": 1, "env": {"RANK": str(r)}}, True, 0
        p.beacon, p.steps = {"phase": "run", "rank": r, "dl": {"bs": 8}}, steps
        sup.procs[p.pid] = p
    lines = sup.table_lines("on SIGUSR1")
    assert lines[0].startswith("ddpdoctor run: step split on SIGUSR1 (2 rank(s)")
    assert any(ln.split()[:1] == ["0-1"] for ln in lines) and "counted from step 6" in lines[-1]  # 30 steps: 5 start-up
    old = _signal.signal(_signal.SIGUSR1, sup._on_usr1)  # the handler run() installs
    try:
        _signal.raise_signal(_signal.SIGUSR1)
    finally:
        _signal.signal(_signal.SIGUSR1, old)
    assert sup.table_asked and sup.woken  # the watch loop's sleep ends at once


def test_watch_loop_polls_a_steady_job_less_often_but_never_past_a_stall_or_a_full_ring():
    """A steady job is polled every POLL_IDLE_S (the parent's own CPU), but every POLL_S while the job
    starts or something happens; it wakes when a stall would be due and before a fast rank's beacon
    ring wraps."""
    from ddpdoctor.run import supervisor as sv

    sup = sv.Supervisor(["true"], stall_after=5.0)
    now = 1000.0
    sup.t_start, sup.stall_open, sup.death_seen_t = now - 60.0, False, None
    assert sup._poll_wait(now) == sv.POLL_S  # no process attached yet
    for r in range(2):
        p = sv.Proc.__new__(sv.Proc)
        p.pid, p.info, p.alive, p.missed, p.steps = 1000 + r, {"kind": "proc", "ppid": 1, "env": {"RANK": str(r)}}, True, 0, []
        p.beacon = {"phase": "run", "rank": r, "t": now - 0.1, "sd": [0.5]}
        sup.procs[p.pid] = p
    assert sup._poll_wait(now) == sv.POLL_IDLE_S
    sup.procs[1001].beacon = dict(sup.procs[1001].beacon, sd=[0.01])  # 10 ms steps: 64 of them fill the ring
    assert abs(sup._poll_wait(now) - sv.beacon.RING * 0.01 / 2) < 1e-9
    for p in sup.procs.values():
        p.beacon = dict(p.beacon, t=now - 4.6, sd=[0.5])  # no progress for 4.6 s: the 5 s stall is due in 0.4 s
    assert abs(sup._poll_wait(now) - 0.4) < 1e-9
    for p in sup.procs.values():
        p.beacon = dict(p.beacon, t=now - 4.99)
    assert sup._poll_wait(now) == sv.POLL_S
    for p in sup.procs.values():
        p.beacon = dict(p.beacon, t=now - 0.1)
    for attr, value in (("stall_open", True), ("death_seen_t", now), ("root_status", 0), ("t_start", now - 1.0)):
        old = getattr(sup, attr)
        setattr(sup, attr, value)
        assert sup._poll_wait(now) == sv.POLL_S, attr
        setattr(sup, attr, old)
    assert sup._poll_wait(now) == sv.POLL_IDLE_S


def test_watch_loop_sleep_ends_at_a_signal():
    """The 1 s sleep of a steady job ends at once on a signal (the handlers write a byte on a pipe)."""
    import time

    from ddpdoctor.run import supervisor as sv

    sup = sv.Supervisor(["true"])
    try:
        t = time.monotonic()
        sup._sleep(0.3)  # nothing happens: the whole timeout
        assert time.monotonic() - t >= 0.29
        sup._wake_up()
        t = time.monotonic()
        sup._sleep(60.0)  # a wake that did not work waits all of it: 60 s against a bound of 15, at any machine speed
        assert time.monotonic() - t < 15.0 and not sup.woken
    finally:
        sup._cleanup()
    assert sup._wake_fds is None


def test_a_rank_that_exits_with_a_code_after_its_peer_aborted_is_a_consequence():
    """trainer_job --abort-at-exit 1: rank 1 aborts at shutdown (RUN013); rank 0's last barrier fails and it
    exits 1 on its own, a moment later. Rank 0 is not the root cause."""
    r1 = proc(11, 1, beacon={"phase": "exit", "pgx": True, "rank": 1, "step": 4},
              fatal="Fatal Python error: Aborted\n", fatal_mtime=50.0)
    r0 = proc(10, 0, beacon={"phase": "exit", "xc": 1, "rank": 0, "step": 4}, end_t=50.4)
    sec = run_section.build([r0, r1], 60.0, death=True)
    assert [f.id for f in findings(sec, "RUN013")] == ["RUN013"] and findings(sec, "RUN010") == []


def test_loss_hook_marks_the_end_of_backward_and_leaves_the_users_hooks():
    """The backward's end is hooked on the loss without a RemovableHandle (recorder._hook_loss): the
    job's own hooks on the loss still run, and one registered after ours still gets its handle."""
    import torch

    from ddpdoctor.run import recorder

    S = recorder.S
    w = torch.ones(3, requires_grad=True)
    seen = []
    try:
        loss = (w * 2).sum()
        before = loss.register_hook(lambda g: seen.append("before"))
        recorder._hook_loss(loss)
        after = loss.register_hook(lambda g: seen.append("after"))
        S.bw_done = None
        loss.backward(retain_graph=True)
        assert S.bw_done is not None and seen == ["before", "after"]
        before.remove()
        after.remove()
        S.bw_done, seen[:] = None, []
        loss.backward()
        assert S.bw_done is not None and seen == []
        fresh = (w * 3).sum()  # no hook of the job's: ours makes the dict, a later handle must still work
        recorder._hook_loss(fresh)
        late = fresh.register_hook(lambda g: seen.append("late"))
        S.bw_done = None
        fresh.backward()
        assert S.bw_done is not None and seen == ["late"]
        late.remove()
    finally:
        S.bw_done = None


def test_bucket_launches_in_backward_end_compute_at_the_last_one(monkeypatch):
    """A DDP comm hook in Python launches each gradient bucket with an async all_reduce inside
    backward: compute lasts until the last launch (the probe's boundary), the rest is collective;
    outside backward a blocking collective is collective time, nothing else. The split's clock is a
    fake one that the "work" advances (the recorder reads it through _sp's bound perf_counter), so the
    parts are exact on a loaded machine (real sleeps overran their bounds at load ~9)."""
    import _thread

    from ddpdoctor.run import recorder
    from ddpdoctor.run.inprocess import _NullWriter

    S = recorder.S
    clock = [1000.0]

    def work(seconds):
        clock[0] += seconds

    monkeypatch.setattr(recorder._sp, "__defaults__", (lambda: clock[0],))

    class Work:
        def wait(self):
            return True

    def launch(tensor, async_op=False):
        work(0.02)
        return Work() if async_op else None

    def backward(tensors):
        work(0.05)  # gradients
        all_reduce([1.0], async_op=True)  # bucket 0
        work(0.05)  # more gradients
        all_reduce([1.0], async_op=True)  # bucket 1, the last
        work(0.03)  # the rest of the graph, then DDP waits for its buckets

    all_reduce = recorder._wrap_collective("all_reduce", launch)
    wrapped_backward = recorder._wrap_backward(backward)
    _keep_state(monkeypatch, S)  # the wrappers move S: all of it comes back
    for name, value in (("writer", _NullWriter()), ("main", _thread.get_ident()), ("off", False), ("kind", "proc"),
                        ("inside", False), ("ddp_seen", False), ("sp", recorder.OTHER), ("spl", True),
                        ("sp_t", clock[0]), ("sp_acc", [0.0] * recorder.NPARTS)):
        setattr(S, name, value)
    wrapped_backward(None)
    acc = S.sp_acc
    assert S.sp == recorder.AFTER_BW and S.bw_launch is None and not S.in_bw
    assert acc[recorder.COMPUTE] == pytest.approx(0.12, abs=1e-9), acc  # to the last launch: 0.05 + 0.02 + 0.05
    assert acc[recorder.COLL] == pytest.approx(0.05, abs=1e-9), acc  # the last launch and the rest: 0.02 + 0.03
    acc[recorder.COLL] = 0.0
    all_reduce([1.0])
    assert S.sp == recorder.AFTER_BW and acc[recorder.COLL] == pytest.approx(0.02, abs=1e-9), acc


def test_the_jobs_own_hook_after_ours_gets_a_handle_and_both_run(monkeypatch):
    """Our hook dict on the loss (round 11: a dict with a weakref slot, not an OrderedDict) takes the job's
    own register_hook after it: torch's handle keeps a weak reference to the dict, both hooks run, and the
    handle removes the job's alone."""
    import torch

    from ddpdoctor.run import recorder

    S = recorder.S
    monkeypatch.setattr(recorder, "_PUBLIC_HOOK", [])
    monkeypatch.setattr(S, "bw_done", None)
    w = torch.ones(3, requires_grad=True)
    seen = []
    loss = (w * 2).sum()
    recorder._hook_loss(loss)
    assert type(loss._backward_hooks) is recorder._Hooks and not recorder._PUBLIC_HOOK
    handle = loss.register_hook(lambda g: seen.append(float(g)))
    loss.backward(retain_graph=True)
    assert seen == [1.0] and S.bw_done is not None
    handle.remove()
    assert list(loss._backward_hooks) == [recorder._HOOK_KEY]
    S.bw_done = None
    loss.backward()
    assert seen == [1.0] and S.bw_done is not None

def test_loss_hook_falls_back_to_register_hook_when_torch_internals_differ(monkeypatch):
    """The handle-free loss hook copies torch 2.13's register_hook internals: a torch where they fail
    (here: grad_fn without _register_hook_dict, simulated) must not switch the attach off; the public
    register_hook takes over, the end of backward is still marked, and the tensor is left as it was."""
    import torch

    from ddpdoctor.run import recorder

    S = recorder.S
    monkeypatch.setattr(recorder, "_PUBLIC_HOOK", [])

    def changed_torch(t, grad_fn=None):
        t._backward_hooks = recorder._Hooks({recorder._HOOK_KEY: recorder._bw_hook})
        try:
            raise AttributeError("'SumBackward0' object has no attribute '_register_hook_dict'")
        except AttributeError:
            t._backward_hooks = None
            raise

    monkeypatch.setattr(recorder, "_hook_dict", changed_torch)
    w = torch.ones(3, requires_grad=True)
    off = S.off
    try:
        loss = (w * 2).sum()
        recorder._hook_loss(loss)
        assert recorder._PUBLIC_HOOK and not S.off
        assert len(loss._backward_hooks) == 1  # register_hook's one entry, not ours twice
        S.bw_done = None
        loss.backward()
        assert S.bw_done is not None
        S.bw_done = None
        again = (w * 3).sum()
        recorder._hook_loss(again)  # the public way from now on, without trying the private one
        again.backward()
        assert S.bw_done is not None
    finally:
        S.bw_done, S.off = None, off


def sampled_job(k=4, **kw):
    """job(), as `run` records it with the split sampled every k-th step: the other steps keep their
    wall time alone (in "other", the four other parts and the CPU time NaN)."""
    nan = float("nan")
    return {r: [s if s[0] % k == 0 else (s[0], s[1], s[2], nan, nan, nan, nan, st.step_ms(s), nan) for s in v]
            for r, v in job(**kw).items()}


def test_split_period_is_a_power_of_two_that_spaces_sampled_steps_50_ms_apart(monkeypatch):
    from ddpdoctor.run import recorder

    monkeypatch.setattr(recorder.S, "spl_every", 0)
    assert recorder._split_period(0.0) == 1 and recorder._split_period(0.05) == 1 and recorder._split_period(0.2) == 1
    assert recorder._split_period(0.022) == 4 and recorder._split_period(0.011) == 8
    assert recorder._split_period(0.0001) == recorder.SPLIT_MAX_K
    monkeypatch.setattr(recorder.S, "spl_every", 1)  # --trace: every step
    assert recorder._split_period(0.001) == 1


def test_unsampled_steps_keep_their_wall_time_and_batches(monkeypatch, tmp_path):
    """After a 10 ms step the split is measured every 8th step (step % 8 == 0, the same numbers on
    every rank); the optimizer hook takes its full path on the due steps only (the sampled ones, the
    step before each, a long one): an unsampled step in between costs one clock read and writes
    nothing to the beacon, and the next due step records the run of them (count, mean wall time,
    batches); expanded, every step still has its record. A span opens nothing on an unsampled step; a
    60 ms step makes the next one measured. The thread's CPU time is read at the sampled steps only
    (a system call), each carrying the mean CPU per step since the last read. The split's hooks are
    in place during the sampled steps only (recorder._arm)."""
    import time

    from ddpdoctor.run import recorder

    S = recorder.S
    _keep_state(monkeypatch, S)
    clock, clock_reads = [100.0], []
    w = beacon.Writer(str(tmp_path / "b"))
    for name, value in (("ring", True), ("spl", True), ("spl_every", 0), ("sp", recorder.OTHER), ("sp_t", 100.0),
                        ("sp_t0", 100.0), ("sp_acc", [0.0] * recorder.NPARTS), ("sp_cpu", None), ("nb", 0),
                        ("cpu_step", 0), ("off", False), ("kind", "proc"), ("is_compiling", None), ("step", 0),
                        ("st", None), ("sdm", 0.0), ("due", 0), ("due_step", 0), ("due_t", 100.0),
                        ("writer", w), ("main", recorder._ident()), ("fw", {})):
        setattr(S, name, value)
    recorder._bind_writer(w)
    monkeypatch.setattr(recorder, "_framework_facts", lambda: {})
    opened, armed, beacon_writes = [], [], []
    cpu, reads = [5.0], []

    def thread_time():
        reads.append(S.step)
        return cpu[0]

    def now():
        clock_reads.append(S.step)
        return clock[0]

    monkeypatch.setattr(recorder._sp_step_end, "__defaults__", (lambda: clock[0], thread_time, float("nan")))
    if hasattr(recorder, "_step_light"):  # round 16 wave 2: the step before a sampled one opens its parts there
        monkeypatch.setattr(recorder._step_light, "__defaults__", (lambda: clock[0],))

    # the split's hooks (here a class attribute and a global pre hook) are in place on sampled steps only
    def orig():
        pass

    def wrapper():
        pass

    owner = type("Owner", (), {"f": wrapper, "g": wrapper})
    pre_hooks = {7: thread_time}
    S.armed = True
    monkeypatch.setattr(recorder, "_ARMED", [(owner, "f", wrapper, orig, owner.__dict__),
                                             (owner, "g", wrapper, orig, owner.__dict__)])
    monkeypatch.setattr(recorder, "_ARMED_PRE", [pre_hooks, 7, thread_time])
    wall = {3: 0.02, 17: 0.06}

    for step in range(1, 21):
        S.nb += 2
        armed.append(owner.__dict__["f"] is wrapper and 7 in pre_hooks)
        assert armed[-1] or (owner.__dict__["f"] is orig and not pre_hooks)
        if step == 10:
            owner.g = print  # another tool's patch over ours: left as it is from now on
        was = list(S.sp_acc)
        recorder._wrap_span(lambda: time.sleep(0.001), recorder.COMPUTE)()
        opened.append(S.sp_acc != was)
        clock[0] += wall.get(step, 0.01)
        cpu[0] += 0.031 if step == 17 else 0.007
        seq = w.seq
        recorder._on_optimizer_step(None, (), {}, _time=now)
        beacon_writes.append(w.seq != seq)
        assert S.step == step and S.st == clock[0]  # current in the process, whatever the beacon says
    assert clock_reads == list(range(20))  # one clock read per step
    due = [i + 1 for i, x in enumerate(beacon_writes) if x]
    # the sampled steps and the long 17; the step before each sampled one (7, 15) takes the light path (round 16
    # wave 2): no bracketed write, its records written with the sampled step's (the ring below is as before)
    assert due == [1, 8, 16, 17, 18], due
    b = beacon.read(str(tmp_path / "b"))
    assert b["step"] == 20  # stored alone on the fast path: current at a stall (their records wait for step 23)
    rows = beacon.expand(b["ring"]["steps"])
    assert [r[0] for r in rows] == list(range(1, 19)) and b["ring"]["n"] == 9  # 18 steps in 9 records
    measured = [r[0] for r in rows if r[3] == r[3]]
    assert measured == [1, 8, 16, 18], measured  # step 1: before any step time; 18: after the 60 ms step 17
    assert [i + 1 for i, o in enumerate(opened) if o] == measured
    assert [i + 1 for i, a in enumerate(armed) if a] == measured
    assert owner.__dict__["g"] is print and [a[1] for a in recorder._ARMED] == ["f"]
    assert reads == measured  # one CPU read per sampled step, none on the others
    cpu_of = {r[0]: r[8] / 1e3 for r in rows if r[8] == r[8]}  # the ring holds ms
    assert sorted(cpu_of) == measured
    assert cpu_of[1] == 0.0 and abs(cpu_of[8] - 0.007) < 1e-6 and abs(cpu_of[16] - 0.007) < 1e-6  # 7 and 8 steps
    assert abs(cpu_of[18] - (0.031 + 0.007) / 2) < 1e-6  # steps 17 and 18: the mean per step
    for r in rows:
        assert r[1] == 2, r
        if r[0] in (2, 3, 4, 5, 6):
            want = (0.01 * 4 + 0.02) / 5  # a run of unsampled steps: their mean
        else:
            want = wall.get(r[0], 0.01)
        if r[3] == r[3] and r[0] > 1:
            assert abs(sum(r[3:8]) / 1e3 - want) < 1e-6  # the parts add up to the step
        elif r[0] > 1:
            assert r[4] != r[4] and r[6] != r[6] and abs(r[7] / 1e3 - want) < 1e-6, r  # the wall time alone
    assert abs(rows[6][2] - rows[5][2] - 0.01) < 1e-6 and abs(rows[5][2] - rows[4][2] - 0.012) < 1e-6  # end times
    recorder._flush_run()  # at exit: the steps since the last due one (19, 20) are in the ring too
    tail = beacon.expand(beacon.read(str(tmp_path / "b"))["ring"]["steps"])
    assert [r[0] for r in tail] == list(range(1, 21)) and tail[-1][1] == 2 and abs(tail[-1][7] - 10.0) < 1e-3


def test_a_long_run_of_batches_without_optimizer_steps_takes_the_full_path(monkeypatch):
    """Evaluation (batches and no optimizer step) must still count as progress in the beacon: the
    DataLoader's fast path lasts until the next due step's batches (twice the batches per step),
    then every batch reads the clock and writes its phase with its time again. Quiet: the batches
    of unsampled steps store the phase byte alone (no time), and the beacon's sequence stays."""
    import tempfile
    import types

    from ddpdoctor.run import recorder

    seen = []

    class Base:  # torch's _BaseDataLoaderIter, as the hook sees it
        def __init__(self, loader):
            self.items = iter(loader)

        def __next__(self):
            seen.append(w.mm[beacon.PHASE_AT])  # what a reader sees while the batch comes
            return next(self.items)

    S = recorder.S
    _keep_state(monkeypatch, S)
    w = beacon.Writer(os.path.join(tempfile.mkdtemp(), "b"))
    for name, value in (("writer", w), ("mm", w.mm), ("off", False), ("kind", "proc"),
                        ("inside", False), ("spl", False), ("phase", "run"), ("dl", None), ("dl_desc", None),
                        ("nb", 0)):
        setattr(S, name, value)
    recorder._patch_dataloader(types.SimpleNamespace(_BaseDataLoaderIter=Base))
    it = Base(list(range(100)))
    S.nb_lim = 3
    seq0 = w.seq
    for _ in range(3):
        next(it)
        assert S.phase == "run" and w.mm[beacon.PHASE_AT] == beacon.CODE["run"]
    assert w.seq == seq0 and S.nb == 3  # no time, no bracket: the phase byte alone
    assert seen == [beacon.CODE["data"]] * 3  # a stall in the batch still reads as "data"
    next(it)  # past the allowance: the full path, its time and a bracket
    assert w.seq > seq0 and beacon.read(w.path)["phase"] == "run" and S.nb >= S.nb_lim



def test_a_sampled_steps_batch_stores_the_phase_byte_and_times_its_data_span(monkeypatch):
    """Round 11: a sampled step's batch inside the fast path's allowance marks the phase with the byte alone
    (no clock read for the beacon, no bracket) and still opens the split's "data" span; past the allowance
    (batches without optimizer steps) it writes the phase with its time, as before."""
    import _thread
    import os
    import tempfile
    import types

    from ddpdoctor.run import beacon, recorder

    seen = []

    class Base:
        def __init__(self, loader):
            self.items = iter(loader)

        def __next__(self):
            seen.append((w.mm[beacon.PHASE_AT], S.sp))
            return next(self.items)

    S = recorder.S
    _keep_state(monkeypatch, S)
    w = beacon.Writer(os.path.join(tempfile.mkdtemp(), "b"))
    for name, value in (("writer", w), ("mm", w.mm), ("off", False), ("kind", "proc"), ("inside", False),
                        ("spl", True), ("phase", "run"), ("dl", None), ("dl_desc", None), ("nb", 0), ("nb_lim", 2),
                        ("main", _thread.get_ident()), ("sp", recorder.OTHER), ("sp_acc", [0.0] * recorder.NPARTS)):
        setattr(S, name, value)
    recorder._patch_dataloader(types.SimpleNamespace(_BaseDataLoaderIter=Base))
    it = Base(list(range(10)))
    seq0 = w.seq
    next(it)
    assert w.seq == seq0 and S.nb_lim - S.nb == 1 and S.nb == 1
    assert seen == [(beacon.CODE["data"], recorder.DATA)] and S.sp == recorder.OTHER
    assert w.mm[beacon.PHASE_AT] == beacon.CODE["run"] and S.phase == "run"
    S.nb_lim = S.nb
    next(it)
    assert w.seq > seq0 and seen[-1] == (beacon.CODE["data"], recorder.DATA)

def test_sampled_split_summary_marks_its_parts_and_keeps_every_steps_time():
    by_rank = sampled_job(k=4, n_ranks=2, steps=40)
    s = st.summary(by_rank[0], batch_size=8)
    assert s["steps"] == 40 and s["split_steps"] == 10 and s["sampled"]
    assert s["compute"]["median"] == 10.0 and s["step_ms"]["median"] == st.step_ms(job(n_ranks=2, steps=40)[0][0])
    assert s["cpu_ms"]["median"] == 11.0  # from the sampled steps: the others' CPU is NaN
    lines = st.table_lines({0: s, 1: st.summary(by_rank[1])})
    assert any("sampled" in ln and "10 of 40" not in ln and "20 of 80" in ln for ln in lines)
    full = st.summary(job(n_ranks=2, steps=40)[0])
    assert not full["sampled"] and full["split_steps"] == 40
    assert not any("sampled" in ln for ln in st.table_lines({0: full}))


def test_straggler_named_from_sampled_steps_and_the_3_s_window_counts_time_not_records():
    long = sampled_job(k=4, slow=1, extra=200.0, steps=160, noise=0.05)
    s = st.straggler(long)
    assert s is not None and s["ranks"] == [1] and s["part"] == "compute"
    # 24.5 ms steps once slow, every 4th sampled: the 3 s window is 31 sampled steps (124 steps), not 123
    # sampled steps (492 steps, 12 s): 116 slow steps name it (each third of the window holds the delay),
    # 60 (1.5 s) do not
    assert st.straggler(sampled_job(k=4, slow=1, extra=10.0, steps=400, onset=285, noise=0.02))["ranks"] == [1]
    assert st.straggler(sampled_job(k=4, slow=1, extra=10.0, steps=400, onset=340, noise=0.02)) is None
    assert st.straggler(sampled_job(k=4, noise=0.2, steps=400)) is None


def test_trace_of_an_unsampled_step_is_its_length_alone():
    from ddpdoctor.run.trace import trace_events

    by_rank = sampled_job(k=2, n_ranks=1, steps=4)
    evs = trace_events(1000.0, {0: {"steps": by_rank[0], "colls": [], "end": None}}, [])
    steps = [e for e in evs if e.get("cat") == "step"]
    assert len(steps) == 4 and all(e["dur"] > 0 for e in steps)
    assert [e["args"].get("split") for e in steps] == ["not sampled", None, "not sampled", None]
    assert len([e for e in evs if e.get("cat") == "split"]) >= 2 * 3
    import json

    json.dumps(evs, allow_nan=False)  # no NaN reaches the trace file


def test_recorder_frames_are_stripped_on_unsampled_steps_too(monkeypatch):
    from ddpdoctor.run import recorder

    monkeypatch.setattr(recorder.S, "spl", False)

    def user():
        raise ValueError("x")

    for wrapped in (recorder._wrap_span(user, recorder.OTHER), lambda: recorder._wrap_backward(lambda t: user())(None)):
        files = _traceback_files(wrapped)
        assert "recorder.py" not in files and files[-1] == "test_run_split.py"


def test_a_rank_held_back_by_a_busy_host_is_not_called_not_computing():
    """Seen under load 6-7 on 2 cores: rank 0, 7 ms behind in compute with the same CPU time, its main
    thread asleep in 28% of 25 samples (waiting for its own threads, which waited for a CPU). Its
    threads' run-queue delay, beyond the other ranks', says so: the busy host, not "not computing". A
    real sleep on the same busy host waits for a CPU no more than the others (all ranks wait for a CPU
    there: seen in the probe's sleep@1 job, 226 ms per 484 ms step, all threads) and stays "waiting"."""
    s = st.straggler(job(slow=0, extra=7.0, noise=0.02, steps=400))
    s["cpu_ms"] = {"straggler": 11.0, "others": 11.0}
    busy = {"sleeping_frac": 0.28, "running_frac": 0.72, "samples": 25, "load_per_cpu": 3.4,
            "line": "trainer_job.py:266 `trainer.train()`"}
    assert st.cause(s, {"0": busy})["kind"] == "waiting"  # without the run-queue fact: the false "not computing"
    assert st.cause(s, {"0": dict(busy, runq_frac=0.45)})["kind"] == "waiting"  # no other rank to compare with
    c = st.cause(s, {"0": dict(busy, runq_frac=0.6, runq_frac_others=0.15)})
    assert c["kind"] == "busy-host" and "ms per step more than the other ranks' for a CPU" in c["text"] and "load 3.4" in c["text"]
    assert c["evidence"]["runq_ms_per_step"] > 7.0 * 0.5
    s2 = st.straggler(job(slow=1, extra=100.0, noise=0.02))
    s2["cpu_ms"] = {"straggler": 11.0, "others": 11.0}
    sleep = {"sleeping_frac": 0.9, "running_frac": 0.1, "samples": 25, "load_per_cpu": 3.0, "runq_frac": 0.47,
             "runq_frac_others": 0.45, "line": "train.py:9 `time.sleep(0.2)`"}
    assert st.cause(s2, {"1": sleep})["kind"] == "waiting"


def test_runq_wait_of_a_process_is_read_from_schedstat():
    import time

    from ddpdoctor.run import hostfacts

    w = hostfacts.runq_wait_s(os.getpid())
    assert w is None or w >= 0.0
    t0 = time.monotonic()
    while time.monotonic() - t0 < 0.05:  # runnable: the wait can only grow
        pass
    w2 = hostfacts.runq_wait_s(os.getpid())
    assert w is None or w2 >= w
    assert hostfacts.runq_wait_s(2 ** 22 + 7) is None  # no such process


# ------------------------------------------------------------------ held by the host (RUN023)

def test_rates_over_reads_a_counter_from_the_window_start_and_needs_half_of_it():
    series = {0: [(100.0, 1.0), (101.0, 1.5), (102.0, 2.0), (104.0, 3.0)],
              1: [(103.0, 0.0), (104.0, 0.2)],      # covers 1 s of the 3 s window: left out
              2: [(101.5, 0.0), (104.0, 0.25)]}     # covers 2.5 of 3 s: read from its first sample
    rates = st.rates_over(series, 101.0)
    assert rates[0] == pytest.approx(0.5)  # (3.0 - 1.5) / (104 - 101)
    assert 1 not in rates and rates[2] == pytest.approx(0.1)


def _verdict_with(rates):
    s = st.straggler(job(slow=1, extra=10.0, steps=300, noise=0.02), min_window_s=0.0)
    assert s and s["ranks"] == [1]
    return s, st.host_held(s, rates)


def test_a_rank_whose_extra_wall_is_run_queue_wait_is_held_by_the_host_not_a_straggler():
    """Trigger: rank 1's 10 ms lead is its threads waiting for a CPU (0.45 s per s against 0.02 s on the
    others, at a ~23 ms step): nothing is left to the job, so RUN023 names the host and RUN020 is quiet."""
    s, h = _verdict_with({0: 0.02, 1: 0.45, 2: 0.03, 3: 0.02})
    assert h["held"] and h["runq_ms"] == pytest.approx(s["cost_ms"], abs=0.01) and h["job_ms"] < 0.01, h
    s = dict(s, host_held=h, facts={"1": {"host": "node7"}})
    assert held_findings(s, "RUN020") == []
    (f,) = held_findings(s, "RUN023")
    assert f.title.startswith("rank 1 is held back by host node7, not by the job"), f.title
    assert "waiting for a CPU" in f.title and "rank:1" in f.subjects
    assert f.evidence["host_held"]["rate"] == 0.45


def test_a_straggler_whose_wait_is_its_own_stays_a_straggler():
    """Quiet: equal run-queue delay on every rank (a busy host that holds everyone alike), or a host share
    too small to account for the cost: RUN020 as before, RUN023 quiet, the host's share in the evidence."""
    s, h = _verdict_with({0: 0.2, 1: 0.2, 2: 0.21, 3: 0.19})
    assert not h["held"] and h["runq_ms"] == pytest.approx(0.0, abs=0.3)
    s = dict(s, host_held=h)
    assert held_findings(s, "RUN023") == [] and len(held_findings(s, "RUN020")) == 1
    s2, h2 = _verdict_with({0: 0.0, 1: 0.1, 2: 0.0, 3: 0.0})  # ~2.3 ms of the 10 ms lead: the job keeps ~7.7
    assert not h2["held"] and 5.0 < h2["job_ms"] < 9.0, h2
    (f,) = held_findings(dict(s2, host_held=h2), "RUN020")
    assert f.evidence["host_held"]["runq_ms"] == h2["runq_ms"]
    # the straggler's rate unknown (another node, no /proc): no verdict on the host, RUN020 as before
    assert st.host_held(s, {0: 0.0, 2: 0.0}) is None


def held_findings(s, check):
    return judge(Snapshot(sections={"run": {"ranks": [], "straggler": s}}), command="run", only={check},
                 when="run").findings


def test_supervisor_reads_the_run_queue_rates_over_the_verdicts_window():
    """The window starts at its first step's start (its end minus its length); each rank's rate is read
    from its last sample at or before it to its latest one."""
    from ddpdoctor.run.supervisor import Supervisor

    sup = Supervisor(["true"])
    by_rank = {r: [rec(s) for s in range(1, 41)] for r in (0, 1)}  # step s ends at 1000 + s, 15 ms long
    sup.runq_series = {0: [(1000.0 + t, 0.1 * t) for t in range(0, 42)],
                       1: [(1000.0 + t, 0.9 * t) for t in range(0, 42)]}
    rates = sup.runq_rates({"window": [21, 40]}, by_rank)
    assert rates[0] == pytest.approx(0.1) and rates[1] == pytest.approx(0.9)
    # the steal series over the same window: rank 1's CPUs lose 30% from t=1020 on, 1% before
    sup.steal_series = {0: [(1000.0 + t, t, 100 * t) for t in range(0, 42)],
                        1: [(1000.0 + t, t if t <= 20 else 20 + 30 * (t - 20), 100 * t) for t in range(0, 42)]}
    fr = sup.steal_fracs({"window": [21, 40]}, by_rank)
    assert fr[0] == pytest.approx(0.01) and fr[1] == pytest.approx(0.3, abs=0.02)
    assert sup.runq_rates({"window": [99, 120]}, by_rank) == {}  # no such step: nothing read


def test_the_parent_expands_a_run_of_unsampled_steps_and_counts_the_steps_it_missed():
    """A ring record of a run of `count` unsampled steps becomes that many steps (their mean wall time,
    end times spaced by it, batches spread); a record overwritten before a poll read it is counted by
    the step numbers it leaves out, however many steps it stood for. Quiet: contiguous records miss
    nothing."""
    from ddpdoctor.run.supervisor import Proc

    nan = float("nan")
    p = Proc.__new__(Proc)
    p.steps, p.missed, p.ring_n = [], 0, 0
    one = (1, 2, 100.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 1)
    run = (5, 7, 100.04, nan, nan, nan, nan, 10.0, nan, 4)  # steps 2-5, 10 ms each, 7 batches
    p._take_ring({"ring": {"n": 2, "steps": [one, run]}})
    assert [s[0] for s in p.steps] == [1, 2, 3, 4, 5] and p.missed == 0
    assert [s[1] for s in p.steps[1:]] == [1, 2, 2, 2] and all(s[7] == 10.0 and s[3] != s[3] for s in p.steps[1:])
    assert [round(s[2], 3) for s in p.steps[1:]] == [100.01, 100.02, 100.03, 100.04]
    assert all(len(s) == 9 for s in p.steps)  # facts.steps' form
    # records 3 and 4 (steps 6-12) were overwritten before this poll: 7 steps missed, not 2
    late = (13, 1, 100.2, nan, nan, nan, nan, 10.0, nan, 1)
    p._take_ring({"ring": {"n": 5, "steps": [late]}})
    assert p.steps[-1][0] == 13 and p.missed == 7
    p._take_ring({"ring": {"n": 6, "steps": [(14, 1, 100.21, nan, nan, nan, nan, 10.0, nan, 1)]}})
    assert p.missed == 7


PROC_STAT_VM = """cpu  1000 0 300 5000 10 0 5 700 0 0
cpu0 400 0 100 2400 5 0 2 100 0 0
cpu1 600 0 200 2600 5 0 3 600 0 0
intr 12345 0 0
ctxt 999
"""


def test_steal_ticks_per_cpu_from_proc_stat_and_over_a_ranks_cpus():
    """/proc/stat's cpuN lines: the 8th value is steal (kernel Documentation/filesystems/proc.rst);
    a rank's share is summed over its affinity, every CPU when it is not pinned."""
    from ddpdoctor.run import hostfacts

    ticks = hostfacts.cpu_ticks(PROC_STAT_VM)
    assert ticks == {0: (3007, 100), 1: (4008, 600)}
    assert hostfacts.ticks_over(ticks, [1]) == (4008, 600) and hostfacts.ticks_over(ticks, None) == (7015, 700)
    assert hostfacts.ticks_over(ticks, [5]) == (7015, 700)  # a CPU not listed: every CPU
    assert hostfacts.cpu_ticks("intr 1 2\n") is None and hostfacts.ticks_over(None, [0]) is None
    series = {0: [(10.0, 100, 3000), (11.0, 101, 3100), (12.0, 102, 3200)],   # 1% stolen
              1: [(10.0, 600, 4000), (11.0, 645, 4100), (12.0, 690, 4200)]}   # 45% stolen
    fr = st.fractions_over(series, 10.5)
    assert fr[0] == pytest.approx(0.01) and fr[1] == pytest.approx(0.45)
    assert st.fractions_over(series, 12.5) == {}  # nothing after the window's start


def test_a_rank_whose_cpus_the_hypervisor_takes_is_held_by_the_host_not_a_straggler():
    """Trigger: rank 1 pinned to a vCPU the hypervisor takes 45% of the time (steal, /proc/stat), the other
    ranks' CPUs 1%: its 10 ms lead at a ~23 ms step is the host's (steal shows no run-queue delay in the
    guest: the rates are alike). RUN023 names the hypervisor, RUN020 is quiet. Ranks on other nodes
    (no figure) count as none stolen, and the evidence says they were not seen."""
    runq = {0: 0.02, 1: 0.02, 2: 0.03, 3: 0.02}
    s = st.straggler(job(slow=1, extra=10.0, steps=300, noise=0.02), min_window_s=0.0)
    h = st.host_held(s, runq, {0: 0.01, 1: 0.45, 2: 0.01, 3: 0.01})
    assert h["held"] and h["steal_ms"] > 0.7 * s["cost_ms"] and h["steal_others"] == 0.01, h
    s1 = dict(s, host_held=h, facts={"1": {"host": "vm3"}})
    assert held_findings(s1, "RUN020") == []
    (f,) = held_findings(s1, "RUN023")
    assert "taken by the hypervisor (steal)" in f.title and "rank 1 is held back by host vm3" in f.title, f.title
    assert "45.0% of its CPUs' time" in f.detail
    remote = st.host_held(s, {}, {1: 0.45})  # the other ranks on other nodes: only the straggler's figure
    assert remote["held"] and remote["steal_others"] is None and remote["rate"] is None
    assert "not seen from here" in st.held_text(dict(s, host_held=remote))


def test_steal_alike_on_every_rank_or_too_small_leaves_the_straggler_a_straggler():
    """Quiet: unpinned ranks on one VM lose the same share to steal (25% each): it slows them alike and
    explains no one rank's lead: RUN020 as before, RUN023 quiet. A small steal (5% more) leaves most
    of the cost to the job: RUN020."""
    runq = {0: 0.02, 1: 0.02, 2: 0.03, 3: 0.02}
    s = st.straggler(job(slow=1, extra=10.0, steps=300, noise=0.02), min_window_s=0.0)
    alike = st.host_held(s, runq, {0: 0.25, 1: 0.25, 2: 0.25, 3: 0.25})
    assert not alike["held"] and alike["steal_ms"] == 0.0
    assert held_findings(dict(s, host_held=alike), "RUN023") == [] and len(held_findings(dict(s, host_held=alike), "RUN020")) == 1
    small = st.host_held(s, runq, {0: 0.0, 1: 0.05, 2: 0.0, 3: 0.0})
    assert not small["held"] and small["job_ms"] > 0.7 * s["cost_ms"]


def test_a_straggler_check_reads_the_run_queue_once_per_rank_per_sample(monkeypatch):
    """One sampler (Supervisor._sample_host): the check's sample is the start of a verdict's facts,
    whose end is one more sample kept in the series; before, the facts read every rank again at their
    start (3 reads per rank per verdict, 2 now), and steal was read for the host only."""
    from ddpdoctor.run import hostfacts, supervisor
    from ddpdoctor.run.supervisor import Proc, Supervisor

    reads = []
    monkeypatch.setattr(hostfacts, "thread_schedstat", lambda pid: reads.append(pid) or {pid: (0, 10 ** 7 * len(reads))})
    parse = hostfacts.cpu_ticks
    monkeypatch.setattr(hostfacts, "cpu_ticks", lambda text=None: parse(PROC_STAT_VM))  # a recorded /proc/stat
    monkeypatch.setattr(hostfacts, "affinity", lambda pid: [1] if pid == 1001 else None)
    for name, value in (("thread_demand", lambda pids, n=10, every_s=0.03: {}), ("usable_cpus", lambda pid: 1.0),
                        ("cpu_times", lambda: None), ("host_load", lambda a, b: {}), ("shm_free_mb", lambda: None)):
        monkeypatch.setattr(hostfacts, name, value)
    sup = Supervisor(["true"])
    for r in (0, 1):
        p = Proc.__new__(Proc)
        p.pid, p.info, p.alive, p.missed, p.steps = 1000 + r, {"kind": "proc", "ppid": 1, "env": {"RANK": str(r)}}, True, 0, []
        p.beacon = {"phase": "run", "rank": r}
        sup.procs[p.pid] = p
    monkeypatch.setattr(sup, "_rank_procs", lambda: list(sup.procs.values()))
    sup._sample_host({0: [], 1: []})  # the check's sample
    assert len(reads) == 2 and sup.steal_series[1][-1][1:] == (600, 4008) and sup.steal_series[0][-1][1:] == (700, 7015)
    sup.straggler_facts({"ranks": [], "others": [0, 1]})
    assert len(reads) == 4  # the end of the facts' sampling only: 2 reads per rank for a verdict
    assert len(sup.runq_series[0]) == 2 and len(sup.steal_series[1]) == 2
    monkeypatch.setattr(supervisor.time, "time", lambda: sup.last_host_sample[0] + 10.0)  # a stale sample
    sup.straggler_facts({"ranks": [], "others": [0, 1]})
    assert len(reads) == 8  # read again at the start, then at the end


def test_an_unsampled_epoch_end_and_new_epoch_store_the_loaders_fields_without_a_clock(monkeypatch):
    """Small epochs (a few batches) pay the epoch's start and end every few steps: on an unsampled step
    they store the DataLoader's batch count and end flag alone (no clock read, no bracket), and a
    reader sees who ran out at once. A sampled step still publishes them with the hot fields."""
    import tempfile
    import types

    from ddpdoctor.run import recorder

    from run_factory import fake_dataloader

    Base, Loader = fake_dataloader()

    S = recorder.S
    _keep_state(monkeypatch, S)
    w = beacon.Writer(os.path.join(tempfile.mkdtemp(), "b"))
    for name, value in (("writer", w), ("off", False), ("kind", "proc"), ("inside", False), ("spl", True),
                        ("phase", "run"), ("dl", None), ("dl_desc", None), ("nb", 0), ("nb_lim", 100)):
        setattr(S, name, value)
    recorder._bind_writer(w)
    recorder._patch_dataloader(types.SimpleNamespace(_BaseDataLoaderIter=Base))
    loader = Loader([1, 2])
    it = Base(loader)  # the first epoch: the cold part, published
    S.spl = False
    seq0 = w.seq
    assert next(it) == 1 and next(it) == 2
    with pytest.raises(StopIteration):
        next(it)
    b = beacon.read(w.path)
    assert w.seq == seq0 and b["dl"]["end"] is True and b["dl"]["n"] == 2 and b["phase"] == "run"
    it = Base(loader)  # the second epoch: the first epoch's step count (round 23, "eps"), the cold part once
    assert w.seq > seq0 and beacon.read(w.path)["dl"]["eps"] == 0
    seq0 = w.seq
    assert next(it) == 1 and next(it) == 2
    with pytest.raises(StopIteration):
        next(it)
    it = Base(loader)  # a new epoch of the same loader, as many steps as the last: the two fields alone
    b = beacon.read(w.path)
    assert w.seq == seq0 and b["dl"]["end"] is False and b["dl"]["n"] == 0
    S.spl = True  # a sampled step: the bracketed write, as before
    Base(loader)
    assert w.seq > seq0



def test_only_the_iterator_made_last_counts_into_the_loaders_batches(monkeypatch):
    """S.dl counts the batches of the DataLoader iterator made last (round 11: marked by an attribute, not
    compared by id()): an older iterator's batches, and those of one made while the attach stood aside, count
    as the step's batches (S.nb) but not as the loader's."""
    import types

    from ddpdoctor.run import recorder

    from run_factory import fake_dataloader

    Base, Loader = fake_dataloader()

    class Other(Loader):
        batch_size = 2

    S = recorder.S
    _keep_state(monkeypatch, S)
    for name, value in (("writer", None), ("mm", None), ("off", True), ("kind", "proc"), ("inside", False),
                        ("spl", False), ("phase", "run"), ("dl", None), ("dl_desc", None), ("nb", 0),
                        ("nb_lim", 100)):
        setattr(S, name, value)
    recorder._patch_dataloader(types.SimpleNamespace(_BaseDataLoaderIter=Base))
    aside = Base(Loader([1, 2, 3]))  # made while the attach stood aside
    S.off = False
    first = Base(Loader([1, 2, 3]))
    second = Base(Other([4, 5, 6]))
    assert next(first) == 1 and next(second) == 4 and next(aside) == 1 and next(second) == 5
    assert S.dl["n"] + S.nb == 2 and S.dl["bs"] == 2 and S.nb == 4  # the loader's count: dl["n"] + S.nb (round 16)

def test_a_later_verdict_on_the_same_ranks_replaces_the_earlier_one_in_the_report():
    """One finding per fault: rank 1 first called the straggler (RUN020, before the run-queue window filled), then
    held back by the host (RUN023): the report keeps RUN023, which carries the superseded RUN020; a verdict on other
    ranks, and a finding of another kind on the same rank, stay."""
    from ddpdoctor.model import warning
    from ddpdoctor.run import supervisor as sv

    def f(cid, title, *subjects):
        out = warning(title, subjects=subjects)
        object.__setattr__(out, "id", cid)
        return out

    sup = sv.Supervisor(["true"])
    try:
        first = f("RUN020", "rank 1 is the straggler", "rank:1", "host:vm")
        other = f("RUN020", "rank 3 is the straggler", "rank:3")
        stall = f("RUN001", "rank 1 waits in barrier()", "rank:1")
        sup.findings = [first, other, stall]
        later = f("RUN023", "rank 1 is held back by host vm", "rank:1", "host:vm")
        sup.findings.append(later)
        sup._supersede_attribution([later])
        assert [x.id for x in sup.findings] == ["RUN020", "RUN001", "RUN023"], [x.title for x in sup.findings]
        assert sup.findings[0] is other and later.evidence["supersedes"] == [{"id": "RUN020", "title": first.title}]
        back = f("RUN020", "rank 1 is the straggler after all", "rank:1")  # and back again: the latest one stays
        sup.findings.append(back)
        sup._supersede_attribution([back])
        assert [x.title for x in sup.findings if "rank:1" in x.subjects] == ["rank 1 waits in barrier()", back.title]
    finally:
        sup._cleanup()



def periodic_job(every, steps=24, n_ranks=4, slow=1, extra=200.0, hiccup=None, swapped=(), seed=0):
    """A data straggler whose delay skips one step in `every`: a DataLoader that fetches one batch
    ahead (accelerate's DataLoaderShard) fetches nothing in an epoch's last step and two in the next
    epoch's first, so with `every` batches per epoch one step in `every` has no delay and no rank
    waits for another (measured: a 4-batch epoch under `run --trace`, every 4th step all four ranks'
    collective waits 5-30 ms, the slow rank least in about a quarter of them). In those steps the slow
    rank waits MOST here (the worst case). `hiccup`: a step of the delay in which another rank (3)
    waits even less than the slow one (it was late itself). `swapped`: steps whose delay is rank 3's."""
    rnd = random.Random(seed)
    out = {r: [] for r in range(n_ranks)}
    for s in range(1, steps + 1):
        quiet = s % every == 0
        late = 3 if s in swapped else slow
        for r in range(n_ranks):
            data = (extra if not quiet else 0.0) if r == late else 0.3
            if quiet:
                coll = 25.0 if r == slow else 8.0 + rnd.uniform(0, 4)
            elif r == late:
                coll = 10.0
            else:
                coll = 5.0 if (s == hiccup and r == 3) else extra + 10.0 + rnd.uniform(0, 10)
            out[r].append(rec(s, data, 2.0, coll, 1.0, 0.5, cpu=3.0))
    return out


def test_steps_where_no_rank_waits_for_another_do_not_count_against_the_straggler():
    """The consistency test (the straggler waits least in 75% of the window's steps) counts only the steps
    where the ranks' collective waits differ by the cost bar: a step where nobody waited for anybody is no
    evidence either way. Before, such steps counted against the straggler: with one quiet step in four the
    data straggler sat at the 75% bar (bench: 'consistent' 0.75-0.85 in 6 of 6 runs) and one hiccup in a
    delayed step (14 of 20) left it unnamed for the whole job (bench_run --straggler: 1 data run in 8);
    with one quiet step in three it was never named."""
    s = st.straggler(periodic_job(4, hiccup=10))
    assert s is not None and s["ranks"] == [1] and s["part"] == "data", s
    assert s["neutral_steps"] == 5 and s["consistent"] == round(14 / 15, 3)
    s3 = st.straggler(periodic_job(3, steps=30))
    assert s3 is not None and s3["ranks"] == [1] and s3["consistent"] == 1.0


def test_the_consistency_bar_still_binds_on_the_steps_that_show_a_lead():
    """Quiet: rank 1 is late in 10 of the 15 delayed steps of the window, rank 3 in the other 5 (67%, under
    the 75% bar); and a job whose steps are all neutral (no delay) names nobody."""
    swapped = {5, 6, 9, 13, 17}
    assert st.straggler(periodic_job(4, swapped=swapped)) is None
    assert st.straggler(periodic_job(4, swapped=()))["ranks"] == [1]
    assert st.straggler(periodic_job(2, steps=24, extra=0.0)) is None


def test_the_process_tree_is_walked_only_when_a_process_started_or_ended(monkeypatch):
    """The parent's periodic walk of every /proc/PID/stat (~6 ms per walk here) runs after the first
    TREE_EARLY_S only when /proc's link count (nr_processes) moved since the last walk, or TREE_MAX_S
    after it; before, every 5 s on a steady node too."""
    from ddpdoctor.run import supervisor as sv

    sup = sv.Supervisor(["true"], stall_after=5.0)
    import types

    walks = []
    sup.tree = types.SimpleNamespace(refresh=lambda *a: walks.append(1))  # the job's tree, as start() makes it
    count = [100]
    monkeypatch.setattr(sv, "proc_count", lambda: count[0])
    t0 = sup.t_start
    assert sup._tree_tick(t0 + 1.0) and sup._tree_tick(t0 + 2.0)  # the job's start: every time
    assert not sup._tree_tick(t0 + 15.0) and not sup._tree_tick(t0 + 20.0)  # steady: no walk
    count[0] = 101  # a process started (or ended) on the node
    assert sup._tree_tick(t0 + 25.0) and not sup._tree_tick(t0 + 30.0)
    assert sup._tree_tick(t0 + 25.0 + sv.TREE_MAX_S)  # at least every TREE_MAX_S
    count[0] = None  # /proc unreadable: every time, as before
    assert sup._tree_tick(t0 + 90.0) and sup._tree_tick(t0 + 95.0)
    assert len(walks) == 6


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_procs_link_count_moves_with_a_child_process():
    """supervisor.proc_count on this machine's /proc: a child process moves it."""
    import subprocess

    from ddpdoctor.run import supervisor as sv

    before = sv.proc_count()
    child = subprocess.Popen(["sleep", "5"])
    try:
        during = sv.proc_count()
    finally:
        child.kill()
        child.wait()
    assert before is not None and during is not None and during != before


def test_the_step_end_wrapper_passes_transformers_call_on_as_it_came(monkeypatch):
    """Round 11: CallbackHandler.on_step_end with transformers' signature gets a wrapper of the same signature (no
    *args/**kwargs pass-through per step); any other signature the generic one. Both mark the optimizer's end
    on a sampled step and pass every argument on."""
    import types

    from ddpdoctor.run import agent, recorder

    class Handler:
        def on_step_end(self, args, state, control, **kwargs):
            return args, state, control, kwargs

    class Other:
        def on_step_end(self, *a, **k):
            return a, k

    begun = []
    monkeypatch.setattr(recorder, "_ARMED", [])  # what _patch_step_end registers for _arm stays in this test
    monkeypatch.setattr(recorder, "step_callbacks_begin", lambda: begun.append(1))
    monkeypatch.setattr(recorder.S, "off", False)
    monkeypatch.setattr(recorder.S, "sp", recorder.TAIL)
    for cls in (Handler, Other):
        agent._patch_step_end(types.SimpleNamespace(CallbackHandler=cls))
    assert Handler.on_step_end.__code__.co_argcount == 4 and Other.on_step_end.__code__.co_argcount == 1
    assert Handler().on_step_end(1, 2, 3) == (1, 2, 3, {}) and Handler().on_step_end(1, 2, 3, x=4) == (1, 2, 3, {"x": 4})
    assert Other().on_step_end(1, 2, control=3) == ((1, 2), {"control": 3}) and len(begun) == 3
    recorder.S.sp = recorder.OTHER  # an unsampled step: nothing marked
    assert Handler().on_step_end(1, 2, 3) == (1, 2, 3, {}) and len(begun) == 3


def test_the_ddp_forward_wrapper_passes_its_arguments_on_as_they_came(monkeypatch):
    """Round 11: the forward wrapper passes (self, *inputs) on in one tuple, keyword arguments only where there
    are some, whether the step is sampled (timed as compute) or not (a reference taken while it was armed)."""
    from ddpdoctor.run import recorder

    class DDP:
        def forward(self, *inputs, **kwargs):
            return self, inputs, kwargs

    DDP.forward = recorder._wrap_ddp_forward(DDP.forward)
    S = recorder.S
    _keep_state(monkeypatch, S)
    S.spl, S.off, S.kind, S.is_compiling, S.ddp_seen = False, False, "proc", None, False
    m = DDP()
    assert m.forward(1, 2) == (m, (1, 2), {}) and m.forward(1, y=3) == (m, (1,), {"y": 3})
    assert DDP.forward(m, 5) == (m, (5,), {}) and not S.ddp_seen
    S.spl, S.sp, S.sp_acc = True, recorder.OTHER, [0.0] * recorder.NPARTS
    assert m.forward(1, y=3) == (m, (1,), {"y": 3}) and S.ddp_seen and S.sp == recorder.OTHER
