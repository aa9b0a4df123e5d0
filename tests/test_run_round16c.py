"""Issue 27, round 16 (the lead's held-out review, set 17): pure tests on recorded facts.

RT036 timed set-up from the process's start, which holds the interpreter's start, `import torch` /
transformers and model building before any process group existed: it warned on 5 of 6 healthy jobs
(ages 16-29 s against a 30 s group timeout). It now times from the rank's entry into
init_process_group, which `ddpdoctor run`'s wrapper records; an age alone is an upper bound."""
from __future__ import annotations

from factory import findings_of
from test_preflight_checks import TORCHRUN_ENV, peers, runtime, snap, trainer

PG30 = {"initialized": True, "rank": 0, "world_size": 2, "timeout_s": 30.0}


def _rt036(per_rank, **rt):
    s = snap(env=TORCHRUN_ENV, rt=runtime(distributed=PG30, **rt), peers=peers(**per_rank),
             tr=trainer(args={"ddp_timeout": 30, "use_cpu": True, "device": "cpu"}))
    return findings_of(s, "RT036")


def test_rt036_rank0_preprocessing_after_init_is_named():
    """Trigger: rank 0 preprocesses for 18 s (60% of the 30 s timeout) after init_process_group while
    rank 1 waits in a barrier; both ranks are ~25 s old at training."""
    [f] = _rt036({"0": {"seconds_since_start": 26.0, "seconds_since_group": 18.4},
                  "1": {"seconds_since_start": 25.5, "seconds_since_group": 18.6}})
    assert f.severity == "warning" and "from init_process_group to training" in f.title
    assert "rank 1 needed 19 s" in f.title and "the process group's timeout is 30 s" in f.title
    assert f.evidence["seconds_since_group"] == {0: 18.4, 1: 18.6}


def test_rt036_quiet_for_a_slow_import_under_load():
    """Quiet: ranks 27-29 s old at training (imports under load 6-9), 2-3 s after init_process_group."""
    assert not _rt036({"0": {"seconds_since_start": 29.0, "seconds_since_group": 2.9},
                       "1": {"seconds_since_start": 27.2, "seconds_since_group": 2.1}})


def test_rt036_an_age_alone_is_an_upper_bound():
    """Without the group's start (preflight or DoctorCallback without `ddpdoctor run`), an age under the
    whole timeout stays quiet (the held-out healthy jobs: 16-29 s of 30); one over it warns, as a bound."""
    assert not _rt036({"0": {"seconds_since_start": 29.0}, "1": {"seconds_since_start": 16.3}})
    [f] = _rt036({"0": {"seconds_since_start": 12.0}, "1": {"seconds_since_start": 41.0}})
    assert "rank 1 needed at most 41 s to reach training (its process's age)" in f.title and "upper bound" in f.detail
    assert f.evidence["seconds_since_start_upper_bound"] == {0: 12.0, 1: 41.0}
    # this rank's own facts when the peers' are missing
    assert not _rt036({}, seconds_since_start=29.0)
    assert [g.id for g in _rt036({}, seconds_since_start=29.0, seconds_since_group=16.0)] == ["RT036"]


def test_run_init_wrapper_notes_when_the_group_started(monkeypatch):
    """The fact's source: run's init_process_group wrapper notes the entry and the group's start, and
    the runtime facts time set-up from the entry."""
    from ddpdoctor.inprocess.runtime import process
    from ddpdoctor.run import recorder

    for name in ("_publish_cold", "_register_kill_dump", "_after_init", "_set_phase"):
        monkeypatch.setattr(recorder, name, lambda *a, **k: None)
    monkeypatch.setattr(process, "_GROUP", {})
    for name in ("off", "rank", "world", "threads", "phase", "pt", "pl", "pg_timeout"):  # restored after the test
        monkeypatch.setattr(recorder.S, name, getattr(recorder.S, name, None))
    monkeypatch.setattr(recorder.S, "off", False)

    class Mod:
        @staticmethod
        def get_rank():
            return 0

        @staticmethod
        def get_world_size():
            return 2

    times = iter([100.0, 130.0, 131.0, 140.0])
    monkeypatch.setattr(recorder.time, "time", lambda: next(times))
    wrapped = recorder._wrap_init(lambda *a, **k: "pg", Mod)
    assert wrapped("gloo") == "pg"
    assert process.group_start() == {"entered_wall": 100.0, "up_wall": 130.0}
    monkeypatch.setattr(process, "distributed_facts", lambda: {"initialized": True, **process.group_start()})
    monkeypatch.setattr(process.time, "time", lambda: 141.5)
    assert process.process_facts({})["seconds_since_group"] == 41.5


# ------------------------------------------------------------------ a SIGKILLed mp.spawn child
SPAWN_STDERR = """W1207 00:01:02.345000 4100 torch/multiprocessing/spawn.py:165] Terminating process 4102 via signal SIGTERM
Traceback (most recent call last):
  File "/job/spawn_ddp.py", line 88, in <module>
    mp.spawn(worker, args=(2,), nprocs=2, join=True)
  File "/venv/lib/python3.11/site-packages/torch/multiprocessing/spawn.py", line 192, in join
    raise ProcessExitedException(
torch.multiprocessing.spawn.ProcessExitedException: process 1 terminated with signal SIGKILL
"""


def _spawn_job(parent_alive=True):
    """The mp.spawn parent (pid 4100, no rank) and its two children, both gone within one poll: rank 1
    SIGKILLed from outside, rank 0 SIGTERMed by the parent's teardown; neither is our child (no status)."""
    return [
        {"pid": 4100, "info": {"kind": "proc", "ppid": 1, "env": {}}, "beacon": {"phase": "start"}, "alive": parent_alive},
        {"pid": 4101, "info": {"kind": "proc", "ppid": 4100, "env": {}, "mp_name": "MainProcess",
                                                           "argv": ["-c", "--multiprocessing-fork"]},
         "beacon": {"phase": "coll", "rank": 0}, "alive": False, "end_t": 20.1},
        {"pid": 4102, "info": {"kind": "proc", "ppid": 4100, "env": {}, "mp_name": "MainProcess",
                                                           "argv": ["-c", "--multiprocessing-fork"]},
         "beacon": {"phase": "run", "rank": 1}, "alive": False, "end_t": 20.0},
    ]


def test_spawn_parent_names_the_first_death_and_its_sigterms():
    """Trigger: the parent's ProcessExitedException names child 1 (SIGKILL) and its warning names the pid
    it SIGTERMed: rank 1 died first, rank 0 is the teardown's consequence. Before: a tie, rank 0 first."""
    from ddpdoctor.run import section as run_section
    from run_factory import findings

    # the parent's pids are the children's; "Terminating process 4102" here names rank 1's pid: swap to rank 0's
    text = SPAWN_STDERR.replace("Terminating process 4102", "Terminating process 4101")
    view = run_section.spawn_view(text)
    assert view == {"failed": {"index": 1, "signal": "SIGKILL", "line": "ProcessExitedException: process 1 terminated "
                               "with signal SIGKILL"}, "terminated": {4101: "SIGTERM"}}
    sec = run_section.build(_spawn_job(), 30.0, death=True, launcher="mp.spawn", spawn=view)
    assert sec["death"]["first_rank"] == 1 and not sec["death"].get("tied")
    by_rank = {r["rank"]: r["end"] for r in sec["ranks"]}
    assert by_rank[1]["signal"] == "SIGKILL" and not by_rank[1].get("signal_guessed") and not by_rank[1]["secondary"]
    assert by_rank[0]["terminated_by"]["who"] == "mp.spawn" and by_rank[0]["terminated_by"]["after_ranks"] == [1]
    [f] = findings(sec, "RUN010")
    assert f.title.startswith("rank 1 died first: was killed by SIGKILL"), f.title
    assert "rank 0 (was ended by SIGTERM from mp.spawn's teardown after rank 1 failed" in f.detail
    assert "The mp.spawn parent said: ProcessExitedException: process 1 terminated with signal SIGKILL" in f.detail


def test_spawn_view_quiet_without_the_parent_s_lines():
    """Quiet: no parent line (another launcher, or the relay kept nothing) leaves the tie as it was; a
    child that raised is named by its own exception, which the parent's index does not override."""
    from ddpdoctor.run import section as run_section
    from run_factory import findings

    assert run_section.spawn_view("") is None
    # a torchrun rank is no spawned child: a pool's "process 0 terminated" names none of them
    pool = run_section.spawn_view("ProcessExitedException: process 0 terminated with signal SIGSEGV")
    job = _spawn_job()
    for p in job[1:]:
        p["info"] = {"kind": "proc", "ppid": 4100, "env": {"RANK": str(p["beacon"]["rank"])}, "argv": ["train.py"]}
    run_section.apply_spawn_view(job, pool)
    assert not any(p.get("spawn") for p in job)
    assert run_section.spawn_view("rank 0: process 3 of 4 ready\nepoch 1 loss 0.3\n") is None
    sec = run_section.build(_spawn_job(), 30.0, death=True, launcher="mp.spawn", spawn=None)
    assert sec["death"].get("tied") == [1, 0] or sec["death"].get("tied") == [0, 1]
    [f] = findings(sec, "RUN010")
    assert "nothing recorded which came first" in f.title
    raised = _spawn_job()
    raised[1]["exc"] = {"type": "ValueError", "message": "bad batch", "t": 19.9}
    view = run_section.spawn_view("-- Process 0 terminated with the following error:\nTraceback ...\nValueError: bad")
    assert view["failed"] == {"index": 0, "raised": True, "line": "-- Process 0 terminated with the following error:"}
    sec = run_section.build(raised, 30.0, death=True, launcher="mp.spawn", spawn=view)
    assert sec["death"]["first_rank"] == 0
    assert {r["rank"]: r["end"]["how"] for r in sec["ranks"]}[0] == "exception"
