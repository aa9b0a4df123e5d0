"""Round 21 (issue 27). 1. A rank asleep in a module's full backward hook in the FIRST backward of an HF Trainer job
with an optimizer was never named a stall: before the first optimizer step the beacons of both ranks said the same
(phase run, step 0, the same collective count: DDP's gradient all-reduce is C++ and counts no collective), and
supervisor._apart lets a stall count at step 0 only for ranks visibly apart (a job's start: loading, compiling). At
step 5 the same job was named (step > 0). Now, before the first step, the ranks' stacks are taken once per stall
period and a stall counts when they show the ranks apart (section.parted: one waits in DDP's all-reduce, a collective
or DDP's forward sync, another does not); ranks alike stay no stall."""
from __future__ import annotations

import os
import re

import pytest

SP = "/venv/lib/python3.11/site-packages"
ENGINE = [(f"{SP}/torch/autograd/graph.py", 829, "_engine_run_backward"),
          (f"{SP}/torch/autograd/__init__.py", 353, "backward"),
          (f"{SP}/torch/_tensor.py", 648, "backward"),
          ("/job/train.py", 40, "<module>")]
HOOK = [("/usr/lib/python3.11/time.py", 1, "sleep"), ("/job/train.py", 12, "hook"),
        (f"{SP}/torch/utils/hooks.py", 137, "hook")]
LOADING = [(f"{SP}/transformers/modeling_utils.py", 4000, "from_pretrained"), ("/job/train.py", 20, "<module>")]


def _dump(*frames):
    return "Thread 0x0000000000000001 (most recent call first):\n" + "".join(
        f'  File "{f}", line {ln} in {fn}\n' for f, ln, fn in frames)


def _proc(rank, frames, cpu=0.0):
    return {"pid": 10 + rank, "alive": True, "dump": _dump(*frames) if frames else None, "cpu_frac": cpu,
            "running_frac": 0.0, "beacon": {"phase": "run", "rank": rank, "step": 0, "seq": 1},
            "info": {"rank": rank, "main_thread": 1, "lib": ["/usr/lib/python3.11/"]}}


def _parted(*procs):
    from ddpdoctor.run.section import parted

    return parted(list(procs), 100.0)


def test_trigger_one_rank_in_its_backward_hook_the_other_in_ddps_all_reduce_are_apart():
    """Trigger: rank 1 asleep in its hook inside the engine, rank 0 in the engine alone (DDP's wait) -> apart."""
    assert _parted(_proc(0, ENGINE), _proc(1, HOOK + ENGINE))


def test_quiet_ranks_alike_are_not_apart():
    """Quiet: both in their hooks (a slow first backward everywhere), both loading, or both in DDP's wait -> not
    apart (a job's start, or every rank in the same place: no rank to name)."""
    assert not _parted(_proc(0, HOOK + ENGINE), _proc(1, HOOK + ENGINE))
    assert not _parted(_proc(0, LOADING, cpu=0.9), _proc(1, LOADING, cpu=0.9))
    assert not _parted(_proc(0, ENGINE), _proc(1, ENGINE))


def test_quiet_without_every_ranks_stack_no_verdict():
    """Quiet: a rank whose stack could not be read -> no verdict (not apart)."""
    assert not _parted(_proc(0, ENGINE), _proc(1, None))


class _P:
    def __init__(self, pid, phase, frames):
        self.pid, self.beacon, self.dump, self.frames, self.info = pid, {"phase": phase, "step": 0}, None, frames, {}

    def facts(self, split=False):
        return {"pid": self.pid, "alive": True, "dump": self.dump, "cpu_frac": 0.0, "running_frac": None,
                "beacon": dict(self.beacon, rank=self.pid - 10), "info": {"rank": self.pid - 10, "main_thread": 1}}


def _sup(frames_by_pid):
    from ddpdoctor.run.supervisor import Supervisor

    sup = Supervisor.__new__(Supervisor)
    sup._start_probe_t, sup.taken, sup._parted_seen = 0.0, 0, None

    def take(procs):
        sup.taken += 1
        for p in procs:
            p.dump = _dump(*frames_by_pid[p.pid])

    sup.take_stacks = take
    return sup


def test_trigger_the_supervisor_probes_the_stacks_at_step_0_and_counts_ranks_apart():
    sup = _sup({10: ENGINE, 11: HOOK + ENGINE})
    ranks = [_P(10, "run", None), _P(11, "run", None)]
    # the first look that finds them parted starts the window (the start itself may have outlasted it on a loaded
    # host: flake22); still parted a period later with no progress between -> counted
    assert not sup._parted_at_start(ranks, 100.0, 20.0) and sup.taken == 1
    assert not sup._parted_at_start(ranks, 110.0, 20.0) and sup.taken == 1  # within the period: no signal
    assert sup._parted_at_start(ranks, 120.0, 20.0) and sup.taken == 2
    assert all(p.dump for p in ranks)  # kept: the stall's report reads them


def test_quiet_progress_between_two_parted_looks_restarts_the_window():
    """Quiet: parted at one look, then a beacon moves (progress), parted again at the next look: the window starts
    again there (a slow but healthy first backward on a loaded host is not a stall)."""
    sup = _sup({10: ENGINE, 11: HOOK + ENGINE})
    ranks = [_P(10, "run", None), _P(11, "run", None)]
    assert not sup._parted_at_start(ranks, 100.0, 20.0)
    ranks[1].beacon["t"] = 115.0
    assert not sup._parted_at_start(ranks, 120.0, 20.0) and sup.taken == 2
    assert all(p.dump is None for p in ranks)


def test_quiet_the_probe_of_ranks_alike_leaves_no_stack_and_waits_a_stall_period():
    """Quiet: ranks alike -> not apart, their dumps put back (a later death's report takes its own), and no second
    probe before another `limit` seconds; a rank in init_process_group is never signalled."""
    sup = _sup({10: HOOK + ENGINE, 11: HOOK + ENGINE})
    ranks = [_P(10, "run", None), _P(11, "run", None)]
    assert not sup._parted_at_start(ranks, 100.0, 20.0) and sup.taken == 1
    assert all(p.dump is None for p in ranks)
    assert not sup._parted_at_start(ranks, 110.0, 20.0) and sup.taken == 1  # within the period: no signal
    assert not sup._parted_at_start([_P(10, "init", None), _P(11, "run", None)], 200.0, 20.0) and sup.taken == 1


# ---- for real: the HF Trainer fixture (fixtures/run/trainer_job.py --bw-hook-sleep), Gloo on CPU under torchrun

def _trainer(tmp_path, *args, stall="5"):
    from test_run_faults import doctor, torchrun

    return doctor(tmp_path, torchrun("trainer_job.py", *args), "--stall-after", stall, "--on-stall", "stop",
                  "--grace", "1", timeout=420)


@pytest.mark.slow
@pytest.mark.timeout(480)
def test_real_trainer_rank_asleep_in_a_full_backward_hook_of_its_first_backward_is_named(tmp_path):
    """For real: rank 1's full backward hook sleeps in the Trainer's first backward (step 0, an AdamW optimizer),
    rank 0 waits in DDP's all-reduce -> RUN002 names rank 1 at the hook's line (at 28000323: no stall finding; the
    job ran until it was stopped from outside)."""
    from test_run_faults import line_of, run_findings

    rc, out, rep = _trainer(tmp_path, "--steps", "4", "--bw-hook-sleep", "1=3600", "--bw-hook-at", "0")
    assert "rank 1 hook-sleep-begin" in out, out[-3000:]  # the state the test needs: rank 1 asleep in its hook
    ranks = {r["rank"]: r for r in rep["run"]["ranks"]}
    assert ranks[0]["step"] == 0 and ranks[0]["state"] == "backward", ranks[0]
    stalls = [f for f in run_findings(rep) if f["id"] in ("RUN002", "RUN007", "RUN014")]
    assert [f["id"] for f in stalls] == ["RUN002"], out[-4000:]
    line = line_of("trainer_job.py", "time.sleep(self.seconds)  # the fault: this rank sleeps in its backward hook")
    assert "rank:1" in stalls[0]["subjects"] and f"line:{line}" in stalls[0]["subjects"], stalls[0]
    assert rep["run"]["stopped"]


@pytest.mark.slow
@pytest.mark.timeout(480)
def test_real_quiet_every_rank_slow_alike_in_its_first_backward_is_no_stall(tmp_path):
    """Its healthy twin: every rank's hook sleeps 9 s in the first backward only (past --stall-after 5: a slow start
    alike on every rank, as a first backward that compiles; one step: the only backward), then the job ends -> exit 0, no stall finding."""
    from test_run_faults import run_findings

    rc, out, rep = _trainer(tmp_path, "--steps", "1", "--bw-hook-sleep", "*=9", "--bw-hook-at", "0")
    spans = {int(r): float(t) for r, t in re.findall(r"rank (\d) hook-sleep-begin ([\d.]+)", out)}
    ends = {int(r): float(t) for r, t in re.findall(r"rank (\d) hook-sleep-end ([\d.]+)", out)}
    assert set(spans) == {0, 1} and set(ends) == {0, 1}, out[-3000:]  # the state the test needs: both ranks slept
    assert min(ends.values()) - max(spans.values()) > 5, (spans, ends)  # ...together past --stall-after
    assert run_findings(rep) == [], out[-4000:]
    assert rc == 0 and not rep["run"]["stopped"]


# ---- 2. a rank whose code returned and that hangs in its shutdown (RUN026), not RUN007 "at main()"

MAIN_RET = [("/job/train.py", 26, "<module>")]
MAIN_RUNS = [("/usr/lib/python3.11/time.py", 1, "sleep"), ("/job/train.py", 20, "main"), ("/job/train.py", 26, "<module>")]
THREAD_JOIN = [("/usr/lib/python3.11/threading.py", 1590, "_shutdown")]


def _rec_of(frames, ml=("/job/train.py", 26, "main"), phase="run"):
    from ddpdoctor.run.section import rank_record

    p = _proc(1, frames)
    p["beacon"] = dict(p["beacon"], phase=phase, step=5, ml=list(ml) if ml else None)
    return rank_record(p, ("/usr/lib/python3.11/",), 100.0, [])


def test_trigger_teardown_main_returned_and_the_script_finished():
    """Trigger: the module frame at main()'s call line with no main() frame inside -> 'returned'; no module frame left
    (threading._shutdown joining a thread) -> 'finished'."""
    r = _rec_of(MAIN_RET)
    assert r["state"] == "teardown" and r["teardown"]["how"] == "returned" and r["teardown"]["func"] == "main", r
    r = _rec_of(THREAD_JOIN)
    assert r["state"] == "teardown" and r["teardown"]["how"] == "finished", r


def test_quiet_teardown_main_still_running_or_unknown_call_line_or_exit_phase():
    """Quiet: main() still on the stack; no recorded call line (module-level code); the exit handlers ran (phase exit);
    a stack of 100 frames (faulthandler's limit: its module frame may be cut off) -> not teardown."""
    assert _rec_of(MAIN_RUNS)["state"] == "outside"
    assert _rec_of(MAIN_RET, ml=None)["state"] == "outside"
    assert _rec_of(THREAD_JOIN, phase="exit")["state"] != "teardown"
    assert _rec_of(THREAD_JOIN * 100)["state"] == "outside"


TEARDOWN_JOB = """
import os, threading, time
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = DDP(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for i in range(4):
        model(torch.randn(4, 8)).sum().backward()
        opt.step(); opt.zero_grad()
    if rank == 1 and FAULT:
        threading.Thread(target=time.sleep, args=(3600,)).start()  # non-daemon: the interpreter joins it at exit
    print(f"rank {rank} returns", flush=True)
    dist.barrier()
if __name__ == "__main__":
    main()
"""


def _teardown_job(tmp_path, fault):
    from test_run_faults import doctor

    script = tmp_path / "teardown_job.py"
    script.write_text(TEARDOWN_JOB.replace("FAULT", str(bool(fault))))
    cmd = [__import__("sys").executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           str(script)]
    return doctor(tmp_path, cmd, "--stall-after", "5", "--on-stall", "stop", "--grace", "1", timeout=300)


@pytest.mark.slow
@pytest.mark.timeout(360)
def test_real_rank_hung_at_exit_joining_a_non_daemon_thread_is_run026(tmp_path):
    """For real: rank 1's main() returns with a non-daemon thread asleep -> RUN026 names rank 1, the script's end and
    threading._shutdown (at 28000323: RUN007 'outside any collective at (no line of your code on the stack)')."""
    from test_run_faults import run_findings

    rc, out, rep = _teardown_job(tmp_path, True)
    assert "rank 1 returns" in out, out[-3000:]  # the state the test needs: rank 1's main() ran to its end
    found = run_findings(rep)
    assert [f["id"] for f in found if f["id"] in ("RUN026", "RUN007", "RUN002")] == ["RUN026"], out[-4000:]
    f = next(f for f in found if f["id"] == "RUN026")
    assert "rank:1" in f["subjects"] and "non-daemon" in f["detail"] and f["severity"] == "error", f


@pytest.mark.slow
@pytest.mark.timeout(360)
def test_real_quiet_the_same_job_ending_cleanly_has_no_finding(tmp_path):
    from test_run_faults import run_findings

    rc, out, rep = _teardown_job(tmp_path, False)
    if [f["id"] for f in run_findings(rep)] == ["RUN013"]:  # Gloo's teardown race at exit (the group is never
        rc, out, rep = _teardown_job(tmp_path, False)        # destroyed here; pytorch/pytorch#190489): once more
    assert "rank 1 returns" in out and "rank 0 returns" in out, out[-3000:]
    assert rc == 0 and run_findings(rep) == [], out[-4000:]


def _stall_snap(*ranks):
    return {"run": {"stall": {"idle_s": 20.0, "stall_after_s": 5.0}, "ranks": list(ranks)}}


def _r(rank, state, **kw):
    rec = {"rank": rank, "pid": 100 + rank, "alive": True, "state": state, "doing": state, "step": 4,
           "user_frame": {"file": "/job/train.py", "line": 26, "func": "<module>", "code": "main()"}}
    rec.update(kw)
    return rec


def _ids(snap):
    from ddpdoctor.checks import run as runchecks

    out = []
    for fn in (runchecks.stall_in_teardown, runchecks.collective_not_called_by_all, runchecks.stall_unexplained):
        out += [f.title for f in fn(snap) or ()] and [fn.__name__]
    return out


def test_trigger_run026_a_rank_in_teardown_and_the_other_exited():
    snap = _stall_snap(_r(1, "teardown", teardown={"how": "finished", "inner": {
        "file": "/usr/lib/python3.11/threading.py", "line": 1590, "func": "_shutdown"}}),
        _r(0, "exited", alive=False))
    assert _ids(snap) == ["stall_in_teardown"]


def test_quiet_run026_when_another_rank_waits_in_a_collective_the_returned_rank_never_called():
    """Quiet (RUN026) and trigger (RUN001): rank 0 waits in a barrier that rank 1 returned without calling -> the
    barrier is the fault (RUN001 names it), not rank 1's shutdown."""
    snap = _stall_snap(_r(0, "collective", last_collective={"op": "barrier", "seq": 9}),
                       _r(1, "teardown", teardown={"how": "returned", "func": "main", "file": "/job/train.py",
                                                   "line": 26, "inner": None}))
    assert _ids(snap) == ["collective_not_called_by_all"]
