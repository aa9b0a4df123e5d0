"""Round 20 (issue 27). A stall inside the backward pass on a thread that torch started (a DDP comm hook's
`fut.then(...)` callback run by Gloo's worker thread; autograd's device threads on a GPU): the rank's main thread shows
autograd's engine alone, as DDP's all-reduce does, and the stall was RUN007 "no rank made progress" with every rank in
the all-reduce. Now the rank is placed at its own code on that thread (data/python_threads.json)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

SP = "/venv/lib/python3.11/site-packages"
LIB = ("/usr/lib/python3.11/",)
ENGINE = [(f"{SP}/torch/autograd/graph.py", 979, "_engine_run_backward"),
          (f"{SP}/torch/autograd/__init__.py", 395, "backward"),
          (f"{SP}/torch/_tensor.py", 623, "backward"),
          ("/job/train.py", 25, "<module>")]
BOOT = [("/usr/lib/python3.11/threading.py", 1038, "_bootstrap_inner"),
        ("/usr/lib/python3.11/threading.py", 995, "_bootstrap")]


def _thread(ident, frames):
    return f"Thread 0x{ident:016x} (most recent call first):\n" + "".join(
        f'  File "{f}", line {ln} in {fn}\n' for f, ln, fn in frames) + "\n"


def _rec(dump, cpu=0.0):
    from ddpdoctor.run.section import rank_record

    p = {"pid": 11, "alive": True, "dump": dump, "cpu_frac": cpu, "running_frac": 0.0,
         "beacon": {"phase": "run", "rank": 1, "step": 3}, "info": {"rank": 1, "main_thread": 1}}
    return rank_record(p, LIB, 100.0, [])


CALLBACK = [("/job/train.py", 16, "done")]  # a comm hook's then() callback, run by Gloo's worker thread (no bootstrap)


def test_trigger_a_rank_whose_comm_hook_callback_blocks_on_a_torch_thread_is_outside_at_that_line():
    """Trigger: the main thread in the engine alone, a thread with no threading bootstrap in the user's callback
    (train.py:16) -> 'outside' at train.py:16, the thread's stack in the record; busy -> 'busy'; autograd's device
    thread running a module hook (torch/utils/hooks.py between) is the same class."""
    dump = _thread(2, CALLBACK) + _thread(1, ENGINE)
    r = _rec(dump)
    assert r["state"] == "outside" and r["user_frame"]["line"] == 16, r
    assert "thread torch started" in r["doing"] and r["thread"]["stack"][-1].startswith("/job/train.py:16")
    assert _rec(dump, cpu=0.9)["state"] == "busy"
    device = [("/job/model.py", 30, "hook"), (f"{SP}/torch/utils/hooks.py", 100, "hook")]
    assert _rec(_thread(3, device) + _thread(1, ENGINE))["user_frame"]["file"] == "/job/model.py"


def test_quiet_python_threads_library_threads_and_two_candidates_leave_the_rank_in_the_all_reduce():
    """Quiet: the user's own threading.Thread sleeping (bootstrap outermost), a native thread in torch's code alone,
    a thread with no Python frame, two native threads in user code (a guess between them): 'backward'; and a main
    thread outside the engine is not moved to a side thread."""
    own = _thread(2, [("/job/train.py", 50, "heartbeat"), *BOOT])
    lib = _thread(3, [(f"{SP}/torch/distributed/algorithms/ddp_comm_hooks/default_hooks.py", 20, "decompress")])
    empty = "Thread 0x0000000000000004 (most recent call first):\n  <no Python frame>\n\n"
    for extra in (own, lib, empty, own + lib + empty):
        r = _rec(extra + _thread(1, ENGINE))
        assert r["state"] == "backward" and r["user_frame"]["line"] == 25 and "thread" not in r, r
    two = _thread(2, CALLBACK) + _thread(3, [("/job/train.py", 70, "other")])
    assert _rec(two + _thread(1, ENGINE))["state"] == "backward"
    main_elsewhere = [("/job/train.py", 60, "save"), ("/job/train.py", 80, "<module>")]
    r = _rec(_thread(2, CALLBACK) + _thread(1, main_elsewhere))
    assert r["user_frame"]["line"] == 60 and "thread" not in r


def test_an_ended_rank_held_in_a_callback_on_a_torch_thread_was_outside():
    """The same class for a rank ended there (its stack at the end): trigger -> 'outside'; quiet, the user's own
    Python thread beside the engine -> 'collective'."""
    from ddpdoctor.run.section import _before_end

    def p(dump):
        return {"pid": 11, "dump": dump, "beacon": {"phase": "run"}, "info": {"main_thread": 1}}

    assert _before_end(p(_thread(2, CALLBACK) + _thread(1, ENGINE)), LIB) == "outside"
    assert _before_end(p(_thread(2, [("/job/train.py", 50, "heartbeat"), *BOOT]) + _thread(1, ENGINE)), LIB) == "collective"


def test_the_thread_knowledge_has_its_sources_and_matches_its_excerpt():
    from ddpdoctor.run import stacks

    k = stacks._thread_knowledge()
    for entry in [k["python_thread_entry"], *k["native_threads_running_python"]]:
        src = entry["source"]
        assert src["repo"] and src["path"] and len(src["commit"]) == 40 and src["symbol"]
    dump = stacks.parse_dump(k["excerpt"])
    main = stacks.main_thread(dump, None)
    found = stacks.native_user_threads(dump, main, ())
    assert [t["user"]["func"] for t in found] == ["done"]


HOOK_JOB = """
import time
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = DDP(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1)))
step = [0]
def hook(state, bucket):
    fut = dist.all_reduce(bucket.buffer(), async_op=True).get_future()
    def done(f):
        if rank == 1 and step[0] >= BLOCK_AT:
            time.sleep(3600)  # CALLBACK-BLOCKS
        return f.value()[0] / dist.get_world_size()
    return fut.then(done)
model.register_comm_hook(None, hook)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for i in range(STEPS):
    step[0] = i
    if rank == 0 and i == 3:
        time.sleep(1.0)  # rank 0 late: rank 1's all-reduce completes, and runs `done`, on Gloo's worker thread
    model(torch.randn(4, 8)).sum().backward()
    opt.step(); opt.zero_grad()
    print("step", i, flush=True)
"""


def _run_hook_job(tmp_path, block_at, steps=100000):
    script = tmp_path / "hook_job.py"
    script.write_text(HOOK_JOB.replace("BLOCK_AT", str(block_at)).replace("STEPS", str(steps)))
    report = tmp_path / "run.json"
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    proc = subprocess.run([sys.executable, "-m", "ddpdoctor", "run", "--stall-after", "5", "--on-stall", "stop",
                           "--report", str(report), "--", torchrun, "--nproc-per-node", "2", str(script)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    return proc, json.loads(report.read_text())


@pytest.mark.slow
def test_real_ddp_comm_hook_callback_blocking_on_glooss_thread_is_named_at_its_line(tmp_path):
    """For real, Gloo on CPU under torchrun: rank 1's comm hook callback sleeps from step 3 on Gloo's worker thread
    (rank 0 came late to that all-reduce); both main threads wait in the engine. RUN002 names rank 1 at the callback's
    line (at d87cb8c2: RUN007, 'ranks 0, 1: the DDP gradient all-reduce (backward)')."""
    proc, data = _run_hook_job(tmp_path, 3)
    ranks = {r["rank"]: r for r in data["run"]["ranks"]}
    assert "step 2" in proc.stdout and ranks[1]["step"] >= 3, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert ranks[0]["state"] == "backward"  # the state the test needs: rank 0 waits in DDP's all-reduce
    assert ranks[1]["state"] == "outside" and ranks[1]["user_frame"]["line"] == 14, ranks[1]
    stalls = [f for f in data["findings"] if f["id"] in ("RUN002", "RUN007")]
    assert [f["id"] for f in stalls] == ["RUN002"] and "rank 1" in stalls[0]["title"], stalls


@pytest.mark.slow
def test_real_quiet_the_same_comm_hook_job_without_the_block_ends_well(tmp_path):
    """Its healthy twin: the same callbacks on Gloo's thread (rank 0 late at step 3), none blocking, 8 steps -> exit
    0, no stall finding."""
    proc, data = _run_hook_job(tmp_path, 10 ** 9, steps=8)
    assert "step 7" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]  # the job ran to its end
    assert proc.returncode == 0 and not [f for f in data["findings"] if f["id"] in ("RUN002", "RUN007")], data["findings"]
