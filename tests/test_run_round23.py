"""Round 22 (issue 27), run23. 1. A rank still running alone after every other rank finished and exited cleanly was
RUN007 "stall unexplained" (run-r21c j2: rank 1 asleep in its optimizer step, rank 0 done and gone), though the exits
explain it: RUN027 names the lone rank, its line and what it waits in (a collective no rank will join: more batches,
more steps, an extra call; or its own code). 2. RUN010 gave a SIGKILLed rank's last COLLECTIVE's line as "its last
recorded line" when the rank had completed that collective and gone on (run-r21c j8: killed in its optimizer step,
named at the broadcast before): a line where it was is said only when a stack or the beacon puts it there."""
from __future__ import annotations

import sys

import pytest

from run_factory import coll, findings, frame, rank, section

from ddpdoctor.facts import left_alone


def _gone(n, step=6, dl=None, collectives=3):
    """A rank that finished its script and exited cleanly (no end record: not a failure)."""
    return rank(n, "exited", step=step, alive=False, doing="exited", user_frame=None, collectives=collectives,
                dl=dl or {"n": 6, "len": 6, "end": True, "workers": 0})


# ---- 1. RUN027: the lone rank after the others' clean exits

def test_trigger_run027_lone_rank_in_backward_with_one_batch_more_is_uneven_batches():
    lone = rank(0, "backward", 40, "loss.backward()", step=6, dl={"n": 7, "len": 7, "end": False, "workers": 0},
                collectives=3)
    found = findings(section([lone, _gone(1)]))
    assert [f.id for f in found] == ["RUN027"], [(f.id, f.title) for f in found]
    f = found[0]
    assert f.severity == "error" and "rank 0 waits alone in the DDP gradient all-reduce" in f.title
    assert "rank 1 finished and exited" in f.title and "uneven batches" in f.detail and "drop_last=True" in f.fix
    assert "rank:0" in f.subjects and "line:40" in f.subjects and f.evidence["cause"] == "more-batches"


def test_trigger_run027_cause_from_the_facts_steps_and_calls_or_a_guess_said_as_such():
    same = {"n": 6, "len": 6, "end": True, "workers": 0}
    lone = rank(0, "backward", step=8, dl=dict(same, end=False), collectives=3)
    assert findings(section([lone, _gone(1, dl=same)]), "RUN027")[0].evidence["cause"] == "more-steps"
    lone = rank(0, "collective", 55, step=6, coll=coll("all_gather", 4, line=55), dl=dict(same), collectives=4)
    f = findings(section([lone, _gone(1, dl=same)]), "RUN027")[0]
    assert f.evidence["cause"] == "extra-call" and "evaluation or a save" in f.detail
    lone = rank(0, "backward", step=6, dl=dict(same), collectives=3)
    f = findings(section([lone, _gone(1, dl=same)]), "RUN027")[0]
    assert f.evidence["cause"] is None and "a guess" in f.detail


def test_trigger_run027_lone_rank_asleep_in_its_own_code_no_collective_exchanged():
    """run-r21c j2's class: rank 1 asleep outside any collective (no CPU), rank 0 ran to its end; the ranks exchanged
    nothing (each trained alone) -> an error naming rank 1, its line and its step against rank 0's."""
    lone = rank(1, "outside", 63, "trainer.train(checkpoint)", step=2, cpu_frac=0.0, collectives=0, coll_history=[])
    found = findings(section([_gone(0, step=48, collectives=0), lone]))
    assert [f.id for f in found] == ["RUN027"], [(f.id, f.title) for f in found]
    f = found[0]
    assert f.severity == "error" and f.title.startswith("rank 1 runs alone") and "train.py:63" in f.title
    assert "rank 1 is at step 2; rank 0 ended at step 48" in f.detail and "exchanged no collective" in f.detail


def test_quiet_run027_busy_lone_rank_is_a_warning_not_an_error():
    """Quiet (no error): a lone rank computing (a rank-0 save, an evaluation) is work that may end."""
    lone = rank(0, "busy", 70, "torch.save(state, path)", cpu_frac=0.9, doing="computing outside any collective")
    f = findings(section([lone, _gone(1)]), "RUN027")
    assert [x.severity for x in f] == ["warning"] and "it computes (90% of a core)" in f[0].detail


def test_quiet_run027_when_no_rank_exited_or_one_failed_or_nothing_stalled():
    """Quiet: every rank alive (RUN001/RUN002's cases); a rank that exited by a failure (RUN010's); no stall."""
    live = [rank(0, "backward"), rank(1, "outside", 50)]
    assert findings(section(live), "RUN027") == []
    died = dict(_gone(1), end={"how": "exception", "exception": {"type": "ValueError", "message": "x"}},
                state="died")
    assert findings(section([rank(0, "backward"), died], death={"first_rank": 1}), "RUN027") == []
    assert findings(section([rank(0, "backward"), _gone(1)], stall=False), "RUN027") == []


def test_run007_stays_quiet_where_run027_speaks():
    found = findings(section([rank(0, "backward", dl={"n": 7, "len": 7, "end": False, "workers": 0}), _gone(1)]))
    assert "RUN007" not in [f.id for f in found]


def test_left_alone_data_has_its_sources():
    for c in left_alone.causes():
        assert c["what"] and c["fix"] and c["sources"], c
        for s in c["sources"]:
            assert s["repo"] == "pytorch/pytorch" and len(s["commit"]) == 40 and s["quote"], s


# ---- 2. RUN010: a SIGKILLed rank's last collective is context, not where it died

def _killed(**kw):
    r = rank(1, "died", 157, "dist.broadcast(flag, src=0)", step=2, alive=False, user_frame=frame(157, "dist.broadcast(flag, src=0)"),
             coll=dict(coll("broadcast", 4, line=157), **kw), stack=None)
    r["end"] = {"how": "signal", "signal": "SIGKILL", "secondary": False, "t": 10.0}
    return r


def _run010(r):
    sec = section([r], stall=False, death={"first_rank": 1, "first_pid": r["pid"]})
    return findings(sec, "RUN010")[0]


def test_trigger_run010_sigkill_after_its_last_collective_completed_says_where_is_unknown():
    f = _run010(_killed(**{"in": False}))
    assert "last recorded line" not in f.title and ", at train.py:157" not in f.title, f.title
    assert "not recorded" in f.title and "broadcast #4" in f.title and "completed" in f.title
    assert "line:157" in f.subjects  # the last collective stays, as context


def test_quiet_run010_sigkill_inside_its_collective_names_that_line():
    f = _run010(_killed(**{"in": True}))
    assert "train.py:157" in f.title and "not recorded" not in f.title, f.title


# ---- for real: a lone rank asleep in its own code after the other rank's clean exit (Gloo, torchrun, 2 CPU ranks)

ALONE_JOB = """
import atexit, os, sys, time
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
def save_checkpoint(rank):
    if FAULT and rank == 1:
        time.sleep(3600)  # the fault: held in its own code after the training, the other rank gone
def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = DDP(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for i in range(4):
        model(torch.randn(4, 8)).sum().backward()
        opt.step(); opt.zero_grad()
    dist.barrier()
    print(f"rank {rank} trained", flush=True)
    save_checkpoint(rank)
    atexit._run_exitfuncs(); sys.stdout.flush()
    os._exit(0)  # not Gloo's C++ teardown (fixtures/run/_ending.py says why)
if __name__ == "__main__":
    main()
"""


def _alone_job(tmp_path, fault):
    from test_run_faults import doctor

    script = tmp_path / "alone_job.py"
    script.write_text(ALONE_JOB.replace("FAULT", str(bool(fault))))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(script)]
    return doctor(tmp_path, cmd, "--stall-after", "5", "--on-stall", "stop", "--grace", "1", timeout=300)


@pytest.mark.slow
@pytest.mark.timeout(360)
def test_real_rank_left_alone_after_the_others_exit_is_run027(tmp_path):
    """For real: rank 1 asleep after the training, rank 0 ran to its end -> RUN027 rank 1 at the sleep's line (at
    277280ce: RUN007 'stall unexplained')."""
    from test_run_faults import run_findings

    rc, out, rep = _alone_job(tmp_path, True)
    assert "rank 0 trained" in out and "rank 1 trained" in out, out[-3000:]  # both reached the state the test needs
    r0 = next(r for r in rep["run"]["ranks"] if r["rank"] == 0)
    assert r0["state"] == "exited" and not r0.get("end"), r0  # rank 0 exited cleanly
    found = run_findings(rep)
    assert [f["id"] for f in found] == ["RUN027"], out[-4000:]
    f = found[0]
    assert "rank:1" in f["subjects"] and "alone_job.py:7" in f["title"] and "rank 0 finished and exited" in f["title"]


@pytest.mark.slow
@pytest.mark.timeout(360)
def test_real_quiet_the_same_job_without_the_sleep_has_no_finding(tmp_path):
    from test_run_faults import run_findings

    rc, out, rep = _alone_job(tmp_path, False)
    assert "rank 0 trained" in out and "rank 1 trained" in out, out[-3000:]
    assert rc == 0 and run_findings(rep) == [], out[-4000:]


# ---- 3. RUN028: every rank at step 0 in the same set-up wait is a set-up hang, not a straggler; the supervisor counts it

SP = "/venv/lib/python3.11/site-packages"
DDP_INIT = [(f"{SP}/torch/distributed/utils.py", 300, "_sync_module_states"),
            (f"{SP}/torch/nn/parallel/distributed.py", 1066, "__init__"), ("/job/train.py", 30, "main")]
LOADING = [(f"{SP}/transformers/modeling_utils.py", 4000, "from_pretrained"), ("/job/train.py", 20, "main")]


def _dump(frames):
    return "Thread 0x0000000000000001 (most recent call first):\n" + "".join(
        f'  File "{f}", line {ln} in {fn}\n' for f, ln, fn in frames)


def _proc(rank, frames=None, phase="run", seq=1, op="barrier", step=0):
    return {"pid": 10 + rank, "alive": True, "dump": _dump(frames) if frames else None, "cpu_frac": 0.0,
            "running_frac": 0.0, "beacon": {"phase": phase, "rank": rank, "step": step, "seq": seq,
                                            "coll": {"op": op, "group": 0, "line": "/job/train.py:25"}},
            "info": {"rank": rank, "main_thread": 1, "lib": [SP + "/"]}}


def test_trigger_same_setup_wait_every_rank_in_ddps_constructor_or_the_same_collective():
    from ddpdoctor.run.section import same_setup_wait

    assert same_setup_wait([_proc(0, DDP_INIT), _proc(1, DDP_INIT)], 100.0) == "ddp-init"
    assert same_setup_wait([_proc(0, phase="coll"), _proc(1, phase="coll")], 100.0) == "collective"


def test_quiet_same_setup_wait_a_rank_working_or_steps_begun_or_different_collectives():
    """Quiet: one rank still loading (a job's start: someone works), a step taken, collectives apart, one rank."""
    from ddpdoctor.run.section import same_setup_wait

    assert same_setup_wait([_proc(0, DDP_INIT), _proc(1, LOADING)], 100.0) is None
    assert same_setup_wait([_proc(0, DDP_INIT, step=1), _proc(1, DDP_INIT, step=1)], 100.0) is None
    assert same_setup_wait([_proc(0, phase="coll"), _proc(1, phase="coll", seq=2)], 100.0) is None
    assert same_setup_wait([_proc(0, phase="coll", op="barrier"), _proc(1, phase="coll", op="broadcast")], 100.0) is None
    assert same_setup_wait([_proc(0, DDP_INIT)], 100.0) is None


def test_supervisor_counts_every_rank_in_one_collective_at_step_0_and_not_a_job_start():
    from ddpdoctor.run.supervisor import Supervisor

    class P:
        def __init__(self, phase):
            self.beacon = {"phase": phase, "step": 0, "seq": 1}

    from ddpdoctor.run.supervisor import SETUP_HANG_S

    sup = Supervisor.__new__(Supervisor)
    assert sup._apart([P("coll"), P("coll")], 100.0, 5.0, idle=SETUP_HANG_S)
    # quiet: before SETUP_HANG_S (a loaded host's slow first collective), or alike outside any collective
    assert not sup._apart([P("coll"), P("coll")], 100.0, 5.0, idle=SETUP_HANG_S - 1)
    assert not sup._apart([P("run"), P("run")], 100.0, 5.0, idle=SETUP_HANG_S)


def _setup_rank(n, state, world=2, **kw):
    return rank(n, state, 25, "model = DDP(model)", step=0, framework={"pg_world": world, "env_world": str(world)},
                **kw)


def test_trigger_run028_every_rank_in_ddps_constructor_or_the_same_first_collective():
    found = findings(section([_setup_rank(0, "ddp-init", doing="DDP's constructor"),
                              _setup_rank(1, "ddp-init", doing="DDP's constructor")]))
    assert [f.id for f in found] == ["RUN028"], [(f.id, f.title) for f in found]
    f = found[0]
    assert f.severity == "error" and "set-up hang" in f.title and "DistributedDataParallel's constructor" in f.title
    assert "GLOO_SOCKET_IFNAME" in f.fix and "NCCL_DEBUG=INFO" in f.detail and "MASTER_ADDR" in f.detail
    c = coll("barrier", 1, line=25)
    found = findings(section([_setup_rank(0, "collective", coll=c), _setup_rank(1, "collective", coll=c)]))
    assert [f.id for f in found] == ["RUN028"] and "barrier #1" in found[0].title  # not RUN008's "none is behind"


def test_run028_a_node_that_sees_part_of_the_world_says_so_as_a_warning():
    c = coll("barrier", 1, line=25)
    f = findings(section([_setup_rank(0, "collective", coll=c, world=4), _setup_rank(1, "collective", coll=c, world=4)]),
                 "RUN028")[0]
    assert f.severity == "warning" and "sees 2 of the world's 4 ranks" in f.detail
    # the recorder's world size (beacon, at init_process_group) where the framework's is not recorded yet
    rs = [rank(n, "ddp-init", step=0, world=3) for n in (0, 1)]
    f = findings(section(rs), "RUN028")[0]
    assert f.severity == "warning" and "sees 2 of the world's 3 ranks" in f.detail


def test_quiet_run028_after_the_first_step_or_with_a_rank_elsewhere():
    """Quiet: the same wait at step 3 (RUN008's case: below Python, not set-up); one rank outside (RUN002's)."""
    c = coll("all_reduce", 9, line=44)
    assert findings(section([rank(n, "collective", 44, coll=c, step=3) for n in (0, 1)]), "RUN028") == []
    assert findings(section([_setup_rank(0, "ddp-init"), _setup_rank(1, "outside")]), "RUN028") == []


def test_setup_hang_data_has_its_sources():
    from ddpdoctor.facts import setup_hang

    d = setup_hang.data()
    assert d["waits"]["collective"] and d["waits"]["ddp-init"] and d["causes"] and d["read"]
    assert all(s["repo"] == "pytorch/pytorch" and len(s["commit"]) == 40 and s["quote"] for s in d["sources"])


# ---- 4. a rank alive past ddpdoctor's own exit handler: what is known, not a stack taken before its exit

def _exiting_proc(rank=1):
    p = _proc(rank, [("/usr/lib/python3.11/time.py", 1, "sleep"), ("/job/train.py", 40, "main"),
                     ("/job/train.py", 50, "<module>")])  # a dump from BEFORE its exit (a probe's): stale
    p["beacon"] = dict(p["beacon"], phase="exit", step=6, pl="/job/train.py:33")
    return p


def test_trigger_rank_record_past_the_exit_handler_drops_the_stale_stack_and_line():
    from ddpdoctor.run.section import rank_record

    r = rank_record(_exiting_proc(), (SP + "/",), 100.0, [])
    assert r["state"] == "exiting" and r["stack"] is None and r["user_frame"] is None, r
    assert r["teardown"]["how"] == "after-exit" and "exit handler" in r["doing"]


def test_quiet_rank_record_before_the_exit_handler_keeps_its_stack():
    from ddpdoctor.run.section import rank_record

    p = _exiting_proc()
    p["beacon"]["phase"] = "run"
    r = rank_record(p, ("/usr/lib/python3.11/", SP + "/"), 100.0, [])
    assert r["stack"] and r["user_frame"]["line"] == 40 and "teardown" not in r, r


def test_trigger_run026_past_the_exit_handler_says_what_is_known():
    from ddpdoctor.run.section import rank_record

    r1 = rank_record(_exiting_proc(), (SP + "/",), 100.0, [])
    found = findings(section([r1, _gone(0)]))
    assert [f.id for f in found] == ["RUN026"], [(f.id, f.title) for f in found]
    f = found[0]
    assert "ddpdoctor's own exit handler ran" in f.title and "train.py:40" not in f.title + f.detail
    assert "not known" in f.detail and "finalize" not in f.fix and "py-spy dump --native --pid 11" in f.fix
    assert "under Gloo" in f.detail  # its process group alive at its exit (or unknown): torch's teardown is a guess
    r1["teardown"]["pg_alive"] = False
    f = findings(section([r1, _gone(0)]), "RUN026")[0]
    assert "under Gloo" not in f.detail and "a finalizer" in f.detail


class _Ex:
    def __init__(self, t, phase="exit"):
        self.alive, self.beacon, self.pid = True, {"phase": phase, "t": t, "step": 6}, 11


def _exit_sup(procs, stall_after=5.0):
    from ddpdoctor.run.supervisor import Supervisor

    sup = Supervisor.__new__(Supervisor)
    sup.stall_after, sup.stall_open, sup.reported = stall_after, False, []
    sup._rank_procs = lambda: procs
    sup._report_stall = lambda ranks, now, idle, limit: sup.reported.append(round(idle))
    return sup


def test_supervisor_counts_a_rank_hung_past_its_exit_handler_after_the_exit_window_only():
    """Trigger: every live rank in phase exit for EXIT_HANG_S -> one stall report. Quiet: a teardown shorter than
    EXIT_HANG_S (a slow Gloo teardown) -> none; the stall window counts too when it is longer."""
    from ddpdoctor.run.supervisor import EXIT_HANG_S

    sup = _exit_sup([_Ex(100.0)])
    sup._check_stall(100.0 + EXIT_HANG_S - 1)
    assert sup.reported == []
    sup._check_stall(100.0 + EXIT_HANG_S + 1)
    sup._check_stall(100.0 + EXIT_HANG_S + 9)
    assert sup.reported == [round(EXIT_HANG_S + 1)]
    sup = _exit_sup([_Ex(100.0)], stall_after=EXIT_HANG_S + 20)
    sup._check_stall(100.0 + EXIT_HANG_S + 1)
    assert sup.reported == []


def test_supervisor_probe_counts_every_rank_in_ddps_constructor_only_after_setup_hang_s():
    """Trigger: both ranks' stacks in DDP's constructor, no progress for SETUP_HANG_S -> counted. Quiet: the same
    before SETUP_HANG_S (a loaded host's slow constructor: seen past a 5 s --stall-after), its dumps put back."""
    from test_run_round22 import _P, _sup

    from ddpdoctor.run.supervisor import SETUP_HANG_S

    sup = _sup({10: DDP_INIT, 11: DDP_INIT})
    ranks = [_P(10, "run", None), _P(11, "run", None)]
    assert not sup._parted_at_start(ranks, 100.0, 5.0, idle=SETUP_HANG_S - 1) and all(p.dump is None for p in ranks)
    assert sup._parted_at_start(ranks, 200.0, 5.0, idle=SETUP_HANG_S) and all(p.dump for p in ranks)
