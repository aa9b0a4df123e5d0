"""Round 17, issue 27: the mp.spawn parent's lines are read until the parent exits (within its grace period and a
margin), not 2 s. Pure: the supervisor's reading loop on recorded stderr, replayed on a fake clock; no process."""
from ddpdoctor.run import supervisor as sup
from bench_modules import load

# An mp.spawn parent whose child 0 ignores SIGTERM: torch 2.13's ProcessContext.join waits its 30 s grace period, then
# SIGKILLs it and raises. (time after the first death, line, parent alive after it, a rank alive after it)
LATE = [
    (0.1, "W1207 00:01:02.345000 4100 torch/multiprocessing/spawn.py:165] Terminating process 4101 via signal SIGTERM\n",
     True, True),
    (30.1, "W1207 00:01:32.400000 4100 torch/multiprocessing/spawn.py:177] Unable to shutdown process 4101 via "
           "SIGTERM , forcefully exiting via SIGKILL\n", True, False),
    (30.3, "Traceback (most recent call last):\n  File \"/job/spawn_ddp.py\", line 88, in <module>\n"
           "    mp.spawn(worker, args=(2,), nprocs=2, join=True)\n"
           "torch.multiprocessing.spawn.ProcessExitedException: process 1 terminated with signal SIGKILL\n", True, False),
    (30.4, "", False, False),
]


class Replay:
    """The relay's copy of the parent's stderr as it grew, on a fake clock that sleep() moves."""

    def __init__(self, events):
        self.events, self.now, self.reads = events, 0.0, 0

    def clock(self):
        return self.now

    def sleep(self, s):
        self.now += s

    def observe(self):
        self.reads += 1
        seen = [e for e in self.events if e[0] <= self.now]
        parent, ranks = (seen[-1][2], seen[-1][3]) if seen else (True, True)
        return "".join(e[1] for e in seen), parent, ranks

    def final(self):
        return "".join(e[1] for e in self.events)


def test_a_parent_line_30_s_after_the_death_is_read():
    """Trigger: the ProcessExitedException comes 30.3 s after the first death (a child sat out the SIGTERM). The
    reading goes on while the parent runs and gets it; the round-16 wait (2 s) had only the SIGTERM warning."""
    r = Replay(LATE)
    view = sup.wait_spawn_view(r.observe, sup.SPAWN_DEADLINE_S, final=r.final, clock=r.clock, sleep=r.sleep)
    assert view["failed"]["index"] == 1 and view["failed"]["signal"] == "SIGKILL"
    assert view["terminated"] == {4101: "SIGKILL"} and 30.3 <= r.now < 31
    old = Replay(LATE)
    view = sup.wait_spawn_view(old.observe, 2.0, final=old.final, clock=old.clock, sleep=old.sleep)
    assert view == {"failed": None, "terminated": {4101: "SIGTERM"}}


def test_the_reading_stops_at_the_parent_s_exit_its_catch_or_the_deadline():
    """Quiet: no wait past what the parent can still say. It exited (its last copy read once more); it caught the
    exception and goes on (SPAWN_SETTLE_S after the last rank); it says nothing while a rank runs (the deadline);
    another launcher (deadline 0): one read."""
    exited = Replay([(0.2, "", False, False)])
    final = "torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with exit code 3\n"
    view = sup.wait_spawn_view(exited.observe, 35.0, final=lambda: final, clock=exited.clock, sleep=exited.sleep)
    assert view["failed"] == {"index": 0, "exit_code": 3, "line": final.split("spawn.")[1].strip()}
    assert exited.now < 0.5
    caught = Replay([(0.1, LATE[0][1], True, False)])
    view = sup.wait_spawn_view(caught.observe, 35.0, final=caught.final, clock=caught.clock, sleep=caught.sleep)
    assert view == {"failed": None, "terminated": {4101: "SIGTERM"}}
    assert sup.SPAWN_SETTLE_S <= caught.now < sup.SPAWN_SETTLE_S + 0.5
    silent = Replay([(0.0, "", True, True)])
    assert sup.wait_spawn_view(silent.observe, 35.0, clock=silent.clock, sleep=silent.sleep) is None
    assert 35.0 <= silent.now < 35.5
    other = Replay(LATE)
    assert sup.wait_spawn_view(other.observe, 0.0, clock=other.clock, sleep=other.sleep) is None and other.reads == 1
    stopped = Replay([(0.0, "", True, True)])
    stop = lambda: stopped.now >= 1.0  # noqa: E731 - `run` got SIGTERM a second in
    assert sup.wait_spawn_view(stopped.observe, 35.0, clock=stopped.clock, sleep=stopped.sleep, stop=stop) is None
    assert 1.0 <= stopped.now < 1.5


# ---- RT036 before the group is up: the timeout this transformers hands the group on CPU (item 3)

def _rt036_no_group(age, version, env=None, **args):
    from factory import findings_of
    from test_preflight_checks import TORCHRUN_ENV, runtime, snap, trainer

    rt = runtime(seconds_since_start=age, distributed={"initialized": False})
    tr = trainer(args=dict({"ddp_timeout": 60, "devices_set_up": False}, **args), transformers=version)
    return findings_of(snap(env=dict(TORCHRUN_ENV, **(env or {})), rt=rt, tr=tr), "RT036")


def test_rt036_on_cpu_reads_torchs_default_where_transformers_drops_ddp_timeout():
    """Trigger of the new reading: on CPU, transformers 4.29-5.25 start the group without ddp_timeout (torch's 1800 s):
    a 70 s old rank against ddp_timeout=60 is no threat (the held-out class: a rank waited 300 s and went on); a
    2,000 s one is, and the title names the default and why. Before, both warned that the 60 s would kill the job."""
    assert not _rt036_no_group(70.0, "5.25.0", use_cpu=True)
    assert not _rt036_no_group(70.0, "4.30.2", no_cuda=True)
    assert not _rt036_no_group(70.0, "5.25.0", env={"ACCELERATE_USE_CPU": "true"})
    [f] = _rt036_no_group(2000.0, "4.46.3", use_cpu=True)
    assert "needed at most 2000 s to reach training (its process's age)" in f.title
    assert "torch's default timeout, 1800 s" in f.title and "does not pass ddp_timeout=60" in f.title
    assert f.evidence["timeout_used_s"] == 1800.0 and f.evidence["ddp_timeout_not_passed"] is True


def test_rt036_keeps_ddp_timeout_where_it_is_passed_or_not_known():
    """Quiet of the new reading: on GPU (5.25 passes it), on CPU before accelerate (4.28.1 passes it) and for a
    version nobody read (5.26), ddp_timeout stays the timeout: a 70 s old rank warns, at most, against 60 s."""
    from ddpdoctor.facts import trainer_timeout as tt

    for version, args in (("5.25.0", {"device": "cuda:1"}), ("4.28.1", {"use_cpu": True}), ("5.26.0", {"use_cpu": True})):
        [f] = _rt036_no_group(70.0, version, **args)
        assert "ddp_timeout is 60 s" in f.title and "at most 70 s" in f.title, (version, f.title)
    assert tt.passes_ddp_timeout("4.29.0.dev0", cpu=False) is False and tt.passes_ddp_timeout("4.33.0", cpu=False) is None
    assert tt.passes_ddp_timeout("4.36.2", cpu=False) is True and tt.passes_ddp_timeout("", cpu=True) is None


# ---- the ranks' run time split by thread (item 1): the main threads (the hooks) against Gloo's

def _ts():

    return load("_timeslice")


def test_the_ranks_run_time_splits_into_main_and_other_threads_per_quad():
    """Trigger: side b's ranks run 6% more in their other threads (Gloo's loops) and the same in their main threads:
    rank_threads reads +6% per quad, rank_main 0, and rank_run (their sum) the mix. Quiet: a turn saved before the
    split (no "ranks_main") gives no ratio to either part."""
    import math

    ts = _ts()
    slices = [("a", 0, 1, 0), ("b", 1, 2, 0), ("b", 2, 3, 1), ("a", 3, 4, 1)]
    run = [{"ranks": 1.0 + (0.26 * 1.06 if s[0] == "b" else 0.26), "ranks_main": 1.0, "other": 0.0} for s in slices]
    steps = {"a": [100 if s[0] == "a" else 0 for s in slices], "b": [100 if s[0] == "b" else 0 for s in slices]}
    split = ts.thread_split(run)
    assert abs(split[1]["rank_threads"] - 0.26 * 1.06) < 1e-12 and split[1]["rank_main"] == 1.0
    [threads] = ts.balanced_tree_run(slices, split, steps, "a", "b", roles=("rank_threads",))
    [main] = ts.balanced_tree_run(slices, split, steps, "a", "b", roles=("rank_main",))
    [whole] = ts.balanced_tree_run(slices, run, steps, "a", "b")
    assert abs(threads - math.log(1.06)) < 1e-12 and main == 0.0 and 0 < whole < threads
    old = [{"ranks": 1.3, "other": 0.0} for _ in slices]
    assert ts.thread_split(old) == [{}] * 4
    assert ts.balanced_tree_run(slices, ts.thread_split(old), steps, "a", "b", roles=("rank_main",)) == []


def test_tree_run_s_reads_the_main_thread_apart_from_the_others():
    """tree_run_s on this process (as a rank): "ranks_main" is the main thread's run time, part of "ranks"; a second
    thread that spins makes "ranks" exceed it by at least the spin. Quiet: a process of another role adds nothing
    to "ranks_main"."""
    import os
    import threading
    import time

    ts = _ts()
    pid = os.getpid()
    before = ts.tree_run_s([pid], {pid: "ranks"})

    spun, done = threading.Event(), threading.Event()

    def spin():
        end = time.thread_time() + 0.05
        while time.thread_time() < end:
            pass
        spun.set()
        done.wait(10)  # alive while read: a thread gone is missing from /proc/PID/task

    t = threading.Thread(target=spin)
    t.start()
    spun.wait(10)
    after = ts.tree_run_s([pid], {pid: "ranks"})
    done.set()
    t.join()
    assert 0 < after["ranks_main"] <= after["ranks"]
    assert (after["ranks"] - after["ranks_main"]) - (before["ranks"] - before["ranks_main"]) >= 0.04
    other = ts.tree_run_s([pid], {pid: "other"})
    assert other["ranks_main"] == 0.0 and other["other"] > 0


def test_split_every_reaches_the_run_side_and_keeps_its_pool_apart(monkeypatch):
    """--split-every N: the sliced jobs' environment carries DDPDOCTOR_RUN_SPLIT_EVERY (which `ddpdoctor run` passes
    to its ranks; the bare side has no recorder), and saved pairs run with it pool apart from those without.
    Quiet: without it the environment has no such variable and the pool key is the old one."""

    br = load("bench_run", "bench_run_r17")
    names = {"a": "bare-a0", "b": "run-b0"}
    assert "DDPDOCTOR_RUN_SPLIT_EVERY" not in br.sliced_env()
    assert br.pool_key({"sides": ["bare", "run"], "width": 1024, "split_every": ""}, names) == "bare,run"
    monkeypatch.setattr(br, "SPLIT_EVERY", "16")
    assert br.sliced_env()["DDPDOCTOR_RUN_SPLIT_EVERY"] == "16"
    assert br.pool_key({"sides": ["bare", "run"], "width": 1024, "split_every": "16"}, names) == "bare,run (split every 16)"
