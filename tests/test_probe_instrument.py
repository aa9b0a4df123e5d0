"""ddpdoctor.instrument: the phase timer's arithmetic, deferred (CUDA-like) resolution, and the timing
comm hook's counts against a real Gloo DDP model (in a subprocess, so no process group leaks here)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ddpdoctor.instrument import PhaseTimer, StepRecorder

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class FakeClock:
    kind = "host"

    def __init__(self):
        self.t = 0.0
        self.done = True

    def now(self):
        return self.t

    @staticmethod
    def elapsed_ms(a, b):
        return (b - a) * 1000.0

    def ready(self, _mark):
        return self.done


def test_phases_are_contiguous_and_sum_to_total():
    clk = FakeClock()
    timer = PhaseTimer(clk)
    timer.begin_step("data")
    clk.t = 0.003
    timer.enter("forward")
    clk.t = 0.009
    timer.enter("backward")
    clk.t = 0.012
    timer.enter("allreduce", latest=True)  # first bucket
    clk.t = 0.014
    timer.enter("allreduce", latest=True)  # last bucket: the 2 ms in between were backward
    clk.t = 0.016
    timer.enter("optimizer")
    clk.t = 0.020
    timer.end_step(step=1)
    (rec,) = timer.flush()
    assert rec["total_ms"] == pytest.approx(20.0)
    assert rec["phases"] == pytest.approx({"data": 3.0, "forward": 6.0, "backward": 5.0, "allreduce": 2.0,
                                           "optimizer": 4.0})
    assert sum(rec["phases"].values()) == pytest.approx(rec["total_ms"])
    assert rec["step"] == 1 and [p for p, _ in rec["seq"]] == ["data", "forward", "backward", "allreduce", "optimizer"]


def test_entering_the_running_phase_keeps_its_start():
    clk = FakeClock()
    timer = PhaseTimer(clk)
    timer.begin_step("forward")
    clk.t = 0.005
    timer.enter("forward")
    clk.t = 0.010
    timer.end_step()
    assert timer.flush()[0]["phases"] == {"forward": pytest.approx(10.0)}


def test_marks_outside_a_step_are_ignored():
    timer = PhaseTimer(FakeClock())
    timer.enter("forward")
    timer.end_step()
    assert timer.flush() == []


def test_device_events_resolve_one_step_late():
    clk = FakeClock()
    clk.done = False  # like CUDA events still queued on the stream
    timer = PhaseTimer(clk)
    for i in range(3):
        timer.begin_step("forward")
        clk.t += 0.01
        timer.end_step(step=i + 1)
        assert len(timer.records) == i  # the newest step waits; older ones are resolved
    assert [r["step"] for r in timer.flush()] == [1, 2, 3]


def test_recorder_callback_sequence_without_trainer():
    rec = StepRecorder()
    rec.on_train_begin()
    for step in range(1, 4):
        rec.on_step_begin()
        rec.on_substep_end()
        rec.on_pre_optimizer_step()
        rec.on_step_end(step)
    rec.on_train_end()
    out = rec.to_dict()
    assert [s["step"] for s in out["steps"]] == [1, 2, 3]
    assert {"train_begin", "first_step_end", "train_end"} <= set(out["milestones"])
    for s in out["steps"]:
        assert sum(s["phases"].values()) == pytest.approx(s["total_ms"], rel=1e-6, abs=1e-3)


DDP_SCRIPT = r"""
import contextlib, json, os, sys
import torch, torch.distributed as dist
from ddpdoctor.instrument import StepRecorder
from ddpdoctor.launch import free_port
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
torch.manual_seed(0)
out = {}
for label, use_no_sync in (("no_sync", True), ("every", False)):
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 1))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    rec = StepRecorder()
    rec.attach_model(model)
    rec.attach_ddp(ddp)
    rec.on_train_begin()
    for step in range(1, 4):
        rec.on_step_begin()
        for micro in range(2):
            ctx = ddp.no_sync() if (use_no_sync and micro == 0) else contextlib.nullcontext()
            with ctx:
                ddp(torch.randn(4, 8)).sum().backward()
            rec.on_substep_end()
        rec.on_pre_optimizer_step()
        rec.on_step_end(step)
    rec.on_train_end()
    d = rec.to_dict()
    out[label] = {"comm": [s["comm"] for s in d["steps"]], "ddp": d["ddp"], "unused": d["unused_parameters"],
                  "phases": [s["phases"] for s in d["steps"]], "totals": [s["total_ms"] for s in d["steps"]]}
# pause/resume (the overhead benchmark's --toggle): paused steps leave no record, the hook still reduces.
model = torch.nn.Linear(8, 1)
ddp = torch.nn.parallel.DistributedDataParallel(model)
rec = StepRecorder()
rec.attach_model(model)
rec.attach_ddp(ddp)
rec.on_train_begin()
for step in range(1, 5):
    rec.on_step_begin()
    ddp(torch.randn(4, 8)).sum().backward()
    rec.on_pre_optimizer_step()
    rec.on_step_end(step)
    if step == 1:
        rec.pause()
    if step == 2:
        rec.resume()
out["paused"] = [s["step"] for s in rec.to_dict()["steps"]]
out["grad_ok"] = bool(model.weight.grad is not None and torch.isfinite(model.weight.grad).all())
print(json.dumps(out))
os._exit(0)
"""


@pytest.mark.slow
@pytest.mark.timeout(270)
def test_comm_hook_counts_rounds_per_optimizer_step():
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", DDP_SCRIPT], env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert all(c["rounds"] == 1 and c["calls"] == 1 for c in out["no_sync"]["comm"])
    assert all(c["rounds"] == 2 and c["calls"] == 2 for c in out["every"]["comm"])
    assert all(c["bytes"] == (8 * 8 + 8 + 8 + 1) * 4 for c in out["no_sync"]["comm"])
    assert out["no_sync"]["ddp"]["is_ddp"] and out["no_sync"]["ddp"]["find_unused_parameters"] is False
    assert out["no_sync"]["unused"] == []
    assert out["paused"] == [1, 3, 4] and out["grad_ok"]
    for ph, total in zip(out["every"]["phases"], out["every"]["totals"]):
        assert "allreduce" in ph and sum(ph.values()) == pytest.approx(total, rel=0.01)
