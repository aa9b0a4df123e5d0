"""Round 17 (run17d), issue 27: three classes the lead's held-out review (set 18) showed; fixed after that review
(tuning after review, disclosed). Pure tests on recorded facts; no process."""
from __future__ import annotations
import pytest

from run_factory import findings, proc

from ddpdoctor.run import section as run_section

# ---- "died first" is the first failure in time, not the first process exit (item 2)

GLOO_TIMEOUT = ("[../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 30000ms for recv "
                "operation to complete")
GLOO_CLOSED = "[../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [127.0.0.1]:29500"


def _rank(pid, rank, **kw):
    return proc(pid, rank, step=0, **kw)


def test_a_rank_whose_barrier_timed_out_first_is_first_though_its_peer_exited_sooner():
    """Trigger: a rank-0-only barrier under Gloo. Rank 0's barrier times out at 40.0 (its exception is recorded),
    rank 1 then gets "Connection closed by peer" at 40.3 and exits at 40.5; rank 0 still prints its traceback and runs
    atexit when the death is judged (alive, beacon phase "exception"). Before: rank 0 had no end, and RUN010 said
    "rank 1 died first ... Connection closed by peer"."""
    r0 = _rank(10, 0, alive=True, end_t=None, beacon={"phase": "exception", "rank": 0, "step": 0},
               exc={"type": "RuntimeError", "message": GLOO_TIMEOUT, "t": 40.0})
    r1 = _rank(11, 1, end_t=40.5, exc={"type": "RuntimeError", "message": GLOO_CLOSED, "t": 40.3})
    end0 = run_section.end_of(r0, 0)
    assert end0["how"] == "exception" and end0["t"] == 40.0 and end0["t_src"] == "exception" and end0["exiting"]
    sec = run_section.build([r0, r1], 41.0, death=True)
    assert sec["death"]["first_rank"] == 0 and sec["death"]["order"] == [0, 1]
    [f] = findings(sec, "RUN010")
    assert "rank 1 died first" not in f.title and "rank 0" in f.title.split(":")[0], f.title


def test_a_rank_that_really_failed_first_with_a_peer_error_stays_first():
    """Quiet: rank 1's peer error is the first failure in time (no peer failed earlier); rank 0, alive and not
    raising, has no end: rank 1 stays first. A live rank without an exception record is no failure."""
    r0 = _rank(10, 0, alive=True, end_t=None)
    r1 = _rank(11, 1, end_t=40.5, exc={"type": "RuntimeError", "message": GLOO_CLOSED, "t": 40.3})
    assert run_section.end_of(r0, 0) is None
    sec = run_section.build([r0, r1], 41.0, death=True)
    assert sec["death"]["first_rank"] == 1
    [f] = findings(sec, "RUN010")
    assert f.title.startswith("rank 1 died first"), f.title
    # a peer whose own exception came well after (past CLOSED_SLACK_S) does not take the first place either
    r0 = _rank(10, 0, alive=True, end_t=None, beacon={"phase": "exception", "rank": 0, "step": 0},
               exc={"type": "RuntimeError", "message": GLOO_TIMEOUT, "t": 42.0})
    sec = run_section.build([r0, r1], 42.5, death=True)
    assert sec["death"]["first_rank"] == 1 and sec["death"]["order"] == [1, 0]
    # both peers' errors closed pairs: no closer among them, the first in time stays first
    r0 = _rank(10, 0, end_t=41.0, exc={"type": "RuntimeError", "message": GLOO_CLOSED, "t": 40.4})
    assert run_section.build([r0, r1], 42.0, death=True)["death"]["first_rank"] == 1


def test_a_closed_pair_stamped_first_is_the_consequence_of_the_peer_that_timed_out():
    """Trigger (seen in a real run: torchrun, Gloo, a rank-0-only barrier with an 8 s timeout, rank 0 lingering 4 s in
    atexit): each rank's excepthook stamps its own record, and rank 1's "Connection closed by peer" was stamped a few
    milliseconds before rank 0's barrier timeout that closed the pair. Gloo's closed pair says the peer went first."""
    r0 = _rank(10, 0, end_t=44.5, exc={"type": "RuntimeError", "message": GLOO_TIMEOUT, "t": 40.302})
    r1 = _rank(11, 1, end_t=40.5, exc={"type": "RuntimeError", "message": GLOO_CLOSED, "t": 40.300})
    sec = run_section.build([r0, r1], 45.0, death=True)
    assert sec["death"]["first_rank"] == 0 and sec["death"]["order"] == [0, 1]
    [f] = findings(sec, "RUN010")
    assert f.title.startswith("rank 0 died first") and "Timed out waiting" in f.title, f.title


# ---- RT036 judges the gap between ranks, not each rank's own time to training (item 1)

def _rt036(per_rank):
    from factory import findings_of
    from test_preflight_checks import TORCHRUN_ENV, peers, runtime, snap, trainer

    pg30 = {"initialized": True, "rank": 0, "world_size": 2, "timeout_s": 30.0}
    s = snap(env=TORCHRUN_ENV, rt=runtime(distributed=pg30), peers=peers(**per_rank),
             tr=trainer(args={"ddp_timeout": 30, "use_cpu": True, "device": "cpu"}))
    return findings_of(s, "RT036")


def test_rt036_one_rank_40_s_behind_the_others_is_named():
    """Trigger: rank 1 reaches training 40 s after rank 0 (both entered init_process_group together): rank 0 waits
    40 s in its first collective against a 30 s timeout."""
    [f] = _rt036({"0": {"seconds_since_group": 3.0, "wall_time": 1003.0},
                  "1": {"seconds_since_group": 43.0, "wall_time": 1043.0}})
    assert f.severity == "warning" and f.title.startswith("rank 1 reached training 40 s after rank 0"), f.title
    assert "the process group's timeout is 30 s" in f.title and f.evidence["gap"]["train_s"] == 40.0


def test_rt036_quiet_when_both_ranks_are_slow_together():
    """Quiet (the held-out class): at load ~10 both ranks needed 37 s from init_process_group to training, within 2 s
    of each other, and no collective waited anywhere near 30 s. Before: "rank 1 needed 37 s ... timeout is 30 s"."""
    assert not _rt036({"0": {"seconds_since_group": 35.5, "wall_time": 1035.5, "coll_wait_max_s": 1.2},
                       "1": {"seconds_since_group": 37.0, "wall_time": 1037.0, "coll_wait_max_s": 0.4}})


def test_rt036_a_long_barrier_wait_before_training_is_a_gap():
    """Trigger: rank 0 tokenises 18 s under main_process_first while rank 1 waits in the barrier; both then reach
    training together. The recorded wait (rank 1: 17.9 s in barrier) is the gap; without it the two ranks' close
    arrival would hide it."""
    [f] = _rt036({"0": {"seconds_since_group": 18.4, "wall_time": 1018.4, "coll_wait_max_s": 0.2},
                  "1": {"seconds_since_group": 18.6, "wall_time": 1018.6, "coll_wait_max_s": 17.9,
                        "coll_wait_max_op": "barrier"}})
    assert f.title.startswith("rank 1 waited 18 s in barrier for the other ranks before training"), f.title


def test_rt036_one_rank_known_is_a_bound_and_says_so():
    """Only this rank's time since init_process_group: a bound, said so (kept as before: warns at half the timeout)."""
    [f] = _rt036({"0": {"seconds_since_group": 37.0, "wall_time": 1037.0}, "1": {"seconds_since_start": 20.0}})
    assert "rank 0 needed 37 s from init_process_group to training, an upper bound" in f.title
    assert "other ranks' times are not known" in f.title


def test_the_recorder_keeps_the_longest_collective_wait(monkeypatch):
    """The fact's source: the collective wrapper keeps the longest call in the group's record."""
    from ddpdoctor.run import recorder

    class W:
        def coll_issue(self, *a):
            return None

    rec = {}
    for name in ("off", "inside", "writer", "is_compiling", "spl", "gwait", "coll", "cold_dirty", "seq", "gseq",
                 "phase", "pt", "in_coll", "pl"):
        monkeypatch.setattr(recorder.S, name, getattr(recorder.S, name, None))
    for name in ("_publish_cold", "_publish", "_phase_hot"):
        monkeypatch.setattr(recorder, name, lambda *a, **k: None)
    monkeypatch.setattr(recorder, "_user_line", lambda f: "t.py:1")
    monkeypatch.setattr(recorder, "_group_index", lambda a, k: 0)
    monkeypatch.setattr(recorder, "_site_index", lambda line: 0)
    monkeypatch.setattr(recorder.S, "off", False)
    monkeypatch.setattr(recorder.S, "inside", False)
    monkeypatch.setattr(recorder.S, "writer", W())
    monkeypatch.setattr(recorder.S, "is_compiling", None)
    monkeypatch.setattr(recorder.S, "spl", False)
    monkeypatch.setattr(recorder.S, "gseq", {})
    monkeypatch.setattr(recorder.S, "seq", 0)
    monkeypatch.setattr(recorder.S, "gwait", rec)
    times = iter([100.0, 117.9, 200.0, 200.5])
    monkeypatch.setattr(recorder.time, "time", lambda: next(times))
    barrier = recorder._wrap_collective("barrier", lambda *a, **k: None)
    barrier()
    barrier()
    assert rec == {"coll_wait_max_s": 17.9, "coll_wait_max_op": "barrier"}


# ---- `accelerate launch --num_processes 2` without --multi_gpu starts ONE process (item 3)

def _run25(argv, config=None, default_config=True, devices=0):
    facts = {"config": config, "config_file": "/home/u/.cache/huggingface/accelerate/default_config.yaml" if config
             else None, "default_config": default_config, "devices": devices}
    return findings({"ranks": [{"rank": 0, "pid": 7}], "command": argv, "accelerate_launch": facts}, "RUN025")


def test_accelerate_launch_asked_for_two_starts_one_on_a_cpu_host():
    """Trigger: no config file, no --multi_gpu, no GPU: accelerate's launch_command takes simple_launcher (one
    process). Also a config file whose distributed_type is MULTI_CPU without an mpirun hostfile, and --cpu."""
    [f] = _run25(["accelerate", "launch", "--num_processes", "2", "train.py", "--lr", "1"])
    assert f.severity == "warning" and f.title.startswith("accelerate launch was asked for 2 processes but starts ONE")
    assert "no --multi_gpu and no config file" in f.title and "--multi_gpu --num_processes 2" in f.fix
    [f] = _run25(["accelerate", "launch", "train.py"], config={"distributed_type": "MULTI_CPU", "num_processes": 4})
    assert "asked for 4 processes" in f.title and "distributed_type: MULTI_CPU" in f.title
    [f] = _run25(["python", "-m", "accelerate.commands.launch", "--cpu", "--num_processes=2", "train.py"], devices=4)
    assert "--cpu" in f.title


def test_accelerate_launch_quiet_when_it_starts_several_or_one_was_asked():
    """Quiet: --multi_gpu present; num_processes 1; a MULTI_GPU config; two visible GPUs with no config (accelerate
    turns --multi_gpu on); GPUs not known (no verdict); an mpirun hostfile; another launcher."""
    assert not _run25(["accelerate", "launch", "--multi_gpu", "--num_processes", "2", "train.py"])
    assert not _run25(["accelerate", "launch", "--num_processes", "1", "train.py"])
    assert not _run25(["accelerate", "launch", "train.py"], config={"distributed_type": "MULTI_GPU", "num_processes": 2})
    assert not _run25(["accelerate", "launch", "--num_processes", "2", "train.py"], devices=2)
    assert not _run25(["accelerate", "launch", "--num_processes", "2", "train.py"], devices=None)
    assert not _run25(["accelerate", "launch", "--num_processes", "2", "--mpirun_hostfile", "hosts", "train.py"])
    assert not _run25(["torchrun", "--nproc-per-node", "2", "train.py"])
    # the default config is skipped under --cpu, an explicit one is read (accelerate's _validate_launch_command)
    from ddpdoctor.facts import launch

    cmd = launch.parse_command(["accelerate", "launch", "--cpu", "--num_processes", "2", "t.py"])
    assert launch.accelerate_launch_mode(cmd, {"distributed_type": "MULTI_GPU"}, True, 0)["config_used"] is False


def test_run_reads_accelerates_config_file_and_gpus(tmp_path):
    """The facts' source: the supervisor reads the config file accelerate reads (its default under HF_HOME)."""
    from ddpdoctor.run.supervisor import accelerate_launch_facts

    cfg = tmp_path / "accelerate" / "default_config.yaml"
    cfg.parent.mkdir()
    cfg.write_text("compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_CPU\nnum_processes: 2\n")
    facts = accelerate_launch_facts(["accelerate", "launch", "t.py"], {"HF_HOME": str(tmp_path),
                                                                          "CUDA_VISIBLE_DEVICES": ""})
    assert facts["config"] == {"compute_environment": "LOCAL_MACHINE", "distributed_type": "MULTI_CPU",
                               "num_processes": 2}
    assert facts["default_config"] is True and facts["devices"] in (0, None)
    assert accelerate_launch_facts(["torchrun", "t.py"], {}) is None


def test_rt036_on_a_rank_other_than_0_compares_with_rank_0s_record():
    """Every rank's preflight reaches `run`'s report: rank 1 judges with rank 0's record (the store's, kept by rank 0),
    not its own time alone. Quiet: both 37 s after init, 1.5 s apart. Trigger: rank 1 40 s after rank 0."""
    from factory import findings_of
    from test_preflight_checks import TORCHRUN_ENV, runtime, snap, trainer

    def judge(mine, rank0):
        rt = runtime(distributed={"initialized": True, "rank": 1, "world_size": 2, "timeout_s": 30.0}, **mine)
        s = snap(env=dict(TORCHRUN_ENV, RANK="1"), rt=rt, tr=trainer(args={"ddp_timeout": 30}),
                 peers={"unavailable": "cross-rank facts are judged on rank 0", "published": True, "rank0": rank0})
        return findings_of(s, "RT036")

    assert not judge({"seconds_since_group": 37.0, "wall_time": 1037.0},
                     {"seconds_since_group": 35.5, "wall_time": 1035.5})
    [f] = judge({"seconds_since_group": 43.0, "wall_time": 1043.0}, {"seconds_since_group": 3.0, "wall_time": 1003.0})
    assert f.title.startswith("rank 1 reached training 40 s after rank 0"), f.title
    # rank 0 not there yet: rank 0 judges the gap with this rank's published record
    assert not judge({"seconds_since_group": 37.0, "wall_time": 1037.0}, None)
    # no exchange at all (the store unreachable): this rank's own time, a bound, said so
    rt = runtime(distributed={"initialized": True, "rank": 1, "world_size": 2, "timeout_s": 30.0},
                 seconds_since_group=37.0, wall_time=1037.0)
    [f] = findings_of(snap(env=dict(TORCHRUN_ENV, RANK="1"), rt=rt, tr=trainer(args={"ddp_timeout": 30}),
                           peers={"unavailable": "cannot reach the process group's store"}), "RT036")
    assert "an upper bound" in f.title


def test_exchange_keeps_rank_0s_record_for_the_other_ranks(monkeypatch):
    """The fact's source: rank 0 gathers and deletes the others' keys but keeps its own; a rank other than 0 reads it
    where it is already there (also after rank 0's gather ended), and never waits for it."""
    from test_coord import MemStore

    from ddpdoctor.inprocess.runtime import peers

    class Store(MemStore):
        def delete_key(self, k):
            self.d.pop(k, None)

    store = Store()
    monkeypatch.setattr(peers, "_calls", {})
    monkeypatch.setattr(peers, "_store_and_group", lambda: (store, 1, 2))
    store.set("ddpdoctor/t/1/0", '{"seconds_since_group": 3.0}')  # rank 0 published and gathered earlier
    out = peers.exchange({"seconds_since_group": 43.0}, label="t", timeout_s=0.1)
    assert out["rank0"] == {"seconds_since_group": 3.0} and "unavailable" in out and out["published"]
    assert "wait" not in store.calls
    monkeypatch.setattr(peers, "_calls", {})
    monkeypatch.setattr(peers, "_store_and_group", lambda: (store, 0, 2))
    got = peers.exchange({"seconds_since_group": 3.0}, label="t", timeout_s=0.1)
    assert sorted(got["ranks"]) == ["0", "1"] and store.check(["ddpdoctor/t/1/0"])
    assert not store.check(["ddpdoctor/t/1/1"])  # the others' keys are deleted, as before


def _recorder_stubbed(monkeypatch, rec, times):
    from ddpdoctor.run import recorder

    class W:
        def coll_issue(self, *a):
            return None

    for name in ("off", "inside", "writer", "is_compiling", "spl", "gwait", "coll", "cold_dirty", "seq", "gseq",
                 "phase", "pt", "in_coll", "pl", "apend", "aop"):
        monkeypatch.setattr(recorder.S, name, getattr(recorder.S, name, None))
    for name in ("_publish_cold", "_publish", "_phase_hot"):
        monkeypatch.setattr(recorder, name, lambda *a, **k: None)
    monkeypatch.setattr(recorder, "_user_line", lambda f: "t.py:1")
    monkeypatch.setattr(recorder, "_group_index", lambda a, k: 0)
    monkeypatch.setattr(recorder, "_site_index", lambda line: 0)
    for name, v in (("off", False), ("inside", False), ("writer", W()), ("is_compiling", None), ("spl", False),
                    ("gseq", {}), ("seq", 0), ("gwait", rec), ("apend", 0), ("aop", None)):
        monkeypatch.setattr(recorder.S, name, v)
    if times is not None:
        it = iter(times)
        monkeypatch.setattr(recorder.time, "time", lambda: next(it))
    return recorder


def test_an_async_collectives_wait_in_work_wait_is_the_longest_wait(monkeypatch):
    """Trigger (round 18, issue 27): all_reduce(async_op=True) returns its Work at once (0.0 s in the call) and the rank
    waits 3 s for the others in Work.wait(): recorded as the longest wait (before: 0.0, and RT036 missed it). Quiet:
    a wait() with no recorded async collective pending (a Work of DDP's, or waited twice) is not timed and reads no
    clock; a class never returned by an async collective is not patched."""
    rec = {}
    recorder = _recorder_stubbed(monkeypatch, rec, [100.0, 100.0, 100.0, 103.0])

    class Work:  # the shape of torch.distributed's Work (a pybind11 class: its wait is patched on the class)
        def wait(self, timeout=None):
            return True

    class Other:
        def wait(self):
            return True

    monkeypatch.setattr(Work, "wait", Work.wait)  # restored after the test
    all_reduce = recorder._wrap_collective("all_reduce", lambda *a, **k: Work())
    w = all_reduce()
    assert rec == {} and recorder.S.apend == 1  # 0.0 s in the call: nothing longer than none
    assert getattr(Work.wait, "__ddpdoctor_wrapped__", False) and not hasattr(Other.wait, "__ddpdoctor_wrapped__")
    assert w.wait() is True
    assert rec == {"coll_wait_max_s": 3.0, "coll_wait_max_op": "all_reduce (async_op, Work.wait)"}, rec
    assert recorder.S.apend == 0
    assert w.wait() is True  # nothing pending: not timed (the clock's iterator is spent: a read would raise)
    recorder._hook_work_wait(Work)  # once only
    assert Work.wait.__ddpdoctor_wrapped__ and rec["coll_wait_max_s"] == 3.0


def test_a_real_gloo_work_is_hooked_and_still_waits(monkeypatch, tmp_path):
    """The hook on torch's own Work class (a one-rank Gloo group: the wait returns at once): an async all_reduce's
    Work.wait() goes through the hook, is timed, and still returns and completes the collective."""
    torch = pytest.importorskip("torch")
    import torch.distributed as dist
    from ddpdoctor.run import recorder

    if not dist.is_available():
        pytest.skip("no torch.distributed")
    work_cls = dist.distributed_c10d.Work
    monkeypatch.setattr(work_cls, "wait", work_cls.wait)  # restored after the test
    rec = {}
    _recorder_stubbed(monkeypatch, rec, None)
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    try:
        all_reduce = recorder._wrap_collective("all_reduce", dist.all_reduce)
        t = torch.ones(3)
        w = all_reduce(t, async_op=True)
        assert type(w) is work_cls and work_cls.wait.__ddpdoctor_wrapped__ and recorder.S.apend == 1
        assert w.wait() is True and recorder.S.apend == 0
        assert rec["coll_wait_max_op"] in ("all_reduce", "all_reduce (async_op, Work.wait)") and t.tolist() == [1.0] * 3
    finally:
        dist.destroy_process_group()
