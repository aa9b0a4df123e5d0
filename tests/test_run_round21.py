"""Round 20, wave 6 (issue 27; fixed after the held-out review). A rank asleep in a module's full backward hook on
CPU (autograd runs CPU backward on the calling thread: the main thread) while the other rank waits in DDP's gradient
all-reduce was never named as a stall when the job made no torch.optim step (a manual `p -= lr * p.grad` update, or
an optimizer of its own): the recorder counts steps with torch's global optimizer step post hook, which only
torch.optim.Optimizer.step calls (pytorch/pytorch torch/optim/optimizer.py, `_global_optimizer_post_hooks`, v2.13.0
cf30153c), so the step stayed 0, no progress was stored after the start, and supervisor._apart let a stall count before
the first step only for ranks visibly apart (both were in backward, the same collective count). Now a backward pass
that ends before any optimizer step stores its end as progress (recorder._bw_progress), and that end says the loop has
begun."""
from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
from test_run_faults import stopped_at_stall


def _apart(*beacons):
    from ddpdoctor.run.supervisor import Supervisor

    return Supervisor._apart(None, [SimpleNamespace(beacon=b) for b in beacons], 100.0, 20.0)


def test_trigger_a_backward_ended_before_any_optimizer_step_lets_the_stall_count():
    """Trigger: both ranks in the same phase at step 0, a backward pass ended on one (st stored) -> a stall counts."""
    assert _apart({"phase": "run", "seq": 0, "step": 0, "st": 50.0}, {"phase": "run", "seq": 0, "step": 0})


def test_quiet_before_the_loop_ranks_alike_at_step_0_are_no_stall():
    """Quiet: at step 0 with no backward ended (the job's start: loading, compiling), ranks alike -> no stall."""
    assert not _apart({"phase": "run", "seq": 0, "step": 0, "st": None}, {"phase": "run", "seq": 0, "step": 0})


HOOK_JOB = """
import time
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
inner = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
step = [0]
def hook(module, grad_input, grad_output):
    if rank == 0 and step[0] >= BLOCK_AT:
        time.sleep(SLEEP_S)  # HOOK-SLEEPS
inner[0].register_full_backward_hook(hook)
model = DDP(inner)
for i in range(STEPS):
    step[0] = i
    model(torch.randn(4, 8)).sum().backward()
    with torch.no_grad():  # no torch.optim optimizer: a manual update
        for p in model.parameters():
            p -= 0.01 * p.grad
            p.grad = None
    print(f"step {i} r{rank} t={time.time():.2f}", flush=True)  # one write per line: two ranks share the pipe
"""
HOOK_LINE = 12


def _run_hook_job(tmp_path, block_at, sleep_s, steps=100000):
    script = tmp_path / "bw_hook_job.py"
    script.write_text(HOOK_JOB.replace("BLOCK_AT", str(block_at)).replace("SLEEP_S", str(sleep_s))
                      .replace("STEPS", str(steps)))
    assert script.read_text().splitlines()[HOOK_LINE - 1].strip().startswith("time.sleep(")
    return stopped_at_stall(tmp_path, script)


@pytest.mark.slow
def test_real_rank_asleep_in_a_full_backward_hook_with_no_optimizer_step_is_named_at_the_hooks_line(tmp_path):
    """For real, Gloo on CPU under torchrun, no torch.optim step: rank 0's full backward hook sleeps from step 5 on
    the main thread while rank 1 waits in DDP's all-reduce -> RUN002 names rank 0 at the hook's line, at the stall
    (not the SIGTERM; at b3564eb2: no stall finding before the job was stopped from outside, RUN015 only)."""
    rc, out, data = _run_hook_job(tmp_path, 5, 3600)
    assert "step 4" in out, out[-4000:]  # the loop ran to the blocking step
    ranks = {r["rank"]: r for r in data["run"]["ranks"]}
    assert ranks[1]["state"] == "backward", ranks[1]  # the state the test needs: rank 1 waits in DDP's all-reduce
    assert ranks[0]["state"] == "outside" and ranks[0]["user_frame"]["line"] == HOOK_LINE, ranks[0]
    stalls = [f for f in data["findings"] if f["id"] in ("RUN002", "RUN007")]
    assert [f["id"] for f in stalls] == ["RUN002"] and "rank 0" in stalls[0]["title"], stalls
    assert "stopped by --on-stall stop" in out


def _gaps(out: str) -> list:
    """Rank 0's seconds between its printed step ends (the job's own clock): what a failure message shows."""
    ts = [float(t) for t in re.findall(r"step \d+ r0 t=(\d+\.\d+)", out)]
    return [round(b - a, 2) for a, b in zip(ts, ts[1:])]


@pytest.mark.slow
def test_real_quiet_slow_but_progressing_hooks_with_no_optimizer_step_are_no_stall(tmp_path):
    """Its healthy twin: rank 0's hook sleeps 1 s in every backward from step 1 on, 9 steps (8 s or more, past
    --stall-after 5 s in all), each backward ending -> exit 0, no stall finding (the backward's end is progress).
    Step 0's backward does not sleep: its end is the loop's first progress, so the start-up (DDP's constructor took
    6.6-10 s at load 14-16 on 2 cores, round 22) is not added to the first sleep's quiet; with the sleep in step 0 the
    test read the machine's speed (one stop for a stall at load ~9, round 22) instead of the tool."""
    rc, out, data = _run_hook_job(tmp_path, 1, 1, steps=9)
    assert "step 8 r0" in out and "step 8 r1" in out, out[-4000:]  # the job ran to its end
    assert min(_gaps(out)) >= 1.0, _gaps(out)  # the state it needs: every counted step slept (no wall-time bound)
    stalls = [f for f in data["findings"] if f["id"] in ("RUN002", "RUN007", "RUN015")]
    assert rc == 0 and not stalls, (data["findings"], _gaps(out))
