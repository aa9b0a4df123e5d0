"""Round 19, wave 5 (issue 27, after the held-out review): `ddpdoctor run`'s report puts, within one severity, what
the JOB did (the ranks' records: RUN025 "the launch ran one process", stalls, deaths; or the job's own output)
before what its ENVIRONMENT risks (the ranks' preflight: ENV002 "MASTER_PORT inside the ephemeral range", NET, SET...):
root cause first (design.md's report contract). Before, one severity was ordered by ID alone, so ENV002 came first."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ddpdoctor.commands.run import build_report
from ddpdoctor.model import Finding
from ddpdoctor.pipeline.render import render_json, render_text
from ddpdoctor.run.report import RunReport, origin


class FakeSup:
    """What build_report reads of a Supervisor: a job that ran one process of `accelerate launch --num_processes 2`
    on a CPU host (RUN025) and whose rank's preflight found `preflight` (dicts, as the ranks write them)."""

    def __init__(self, preflight, argv=None):
        self.argv = argv or ["accelerate", "launch", "--num_processes", "2", "train.py"]
        self.procs = {7: object()}
        self.findings = []
        self.events = []
        self._pre = preflight

    def run_section(self):
        return {"ranks": [{"rank": 0, "pid": 7}], "command": self.argv,
                "accelerate_launch": {"config": None, "config_file": None, "default_config": False, "devices": 0}}

    def exit_status(self):
        return 0

    def job_output(self):
        return ""

    def preflight_findings(self):
        return list(self._pre)


ENV002 = {"id": "ENV002", "name": "master-port-in-use", "severity": "warning",
          "title": "MASTER_PORT 45000 is inside the kernel's ephemeral port range (32768-60999)",
          "fix": "export MASTER_PORT=29500", "subjects": ["env:MASTER_PORT"]}
ERR = {"id": "ENV001", "name": "rank-env-missing", "severity": "error", "title": "RANK is not set",
       "subjects": ["env:RANK"]}


def _ids(report):
    return [f.id for f in report.sorted_findings()]


def test_trigger_the_jobs_finding_comes_before_the_environments_risk_of_the_same_severity():
    """Trigger: RUN025 (warning, the ranks' records) and ENV002 (warning, the rank's preflight): RUN025 first, in the
    JSON report, the text report and sorted_findings (ID order alone put ENV002 first)."""
    report = build_report(FakeSup([ENV002]))
    assert isinstance(report, RunReport)
    assert sorted(f.id for f in report.findings) == ["ENV002", "RUN025"]  # both reached the report
    assert _ids(report) == ["RUN025", "ENV002"]
    assert [f["id"] for f in json.loads(render_json(report))["findings"]] == ["RUN025", "ENV002"]
    text = render_text(report)
    assert text.index("RUN025") < text.index("ENV002")


def test_quiet_severity_still_orders_first_and_each_kind_keeps_its_id_order():
    """Quiet (no reordering beyond the rule): an ERROR risk of the environment stays before a WARNING of the job;
    a report of preflight findings alone, or of the job's alone, keeps the ID order it had."""
    report = build_report(FakeSup([ENV002, ERR]))
    assert _ids(report) == ["ENV001", "RUN025", "ENV002"]
    only_env = build_report(FakeSup([ERR, ENV002], argv=["torchrun", "--nproc-per-node", "2", "train.py"]))
    assert _ids(only_env) == ["ENV001", "ENV002"]
    w = lambda i, fam: Finding("warning", i, id=i, family=fam)  # noqa: E731
    job = RunReport(command="run", findings=[w("RUN020", "run"), w("RUN010", "run"), w("RUN001", "run")])
    assert _ids(job) == ["RUN001", "RUN010", "RUN020"]


def test_the_rule_is_the_findings_origin_not_their_ids():
    """The job's findings read from its own output (triage's families) count as what the job did; any preflight
    finding, whatever its prefix (NET, SET, PKG...), as the environment's risk."""
    assert origin(Finding("warning", "t", id="LOG003", family="log")) == 0
    assert origin(Finding("warning", "t", id="RUN001", family="run")) == 0
    assert origin(Finding("warning", "t", id="NET004", family="preflight")) == 1
    r = RunReport(command="run", findings=[Finding("warning", "a", id="AAA001", family="preflight"),
                                           Finding("warning", "z", id="ZZZ001", family="log")])
    assert _ids(r) == ["ZZZ001", "AAA001"]


TRAIN = """
import os
import torch, torch.distributed as dist
os.environ.setdefault("MASTER_ADDR", "127.0.0.1"); os.environ.setdefault("RANK", "0")
os.environ.setdefault("WORLD_SIZE", "1")
dist.init_process_group("gloo")
t = torch.ones(1); dist.all_reduce(t)
print("trained", dist.get_world_size(), flush=True)
dist.destroy_process_group()
"""


@pytest.mark.slow
def test_real_accelerate_launch_of_one_process_is_said_before_the_environments_warning(tmp_path):
    """For real: `ddpdoctor run -- accelerate launch --num_processes 2` on a CPU host starts ONE process (RUN025, a
    warning from the ranks' records) whose preflight at init_process_group warns of NCCL_P2P_LEVEL=bogus (NCCL003,
    a warning of the environment) and errs on NCCL_SOCKET_IFNAME matching no interface (NET001, an error): the
    report says NET001 (error first), then RUN025, then NCCL003 (ID order alone put NCCL003 before RUN025)."""
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    report = tmp_path / "run.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "ACCELERATE_", "MASTER_", "RANK",
                                                                     "WORLD_SIZE", "LOCAL_RANK", "CUDA_VISIBLE"))}
    env.update(HF_HOME=str(tmp_path / "hf"), MASTER_PORT="29517", NCCL_P2P_LEVEL="bogus",
               NCCL_SOCKET_IFNAME="nosuchif0", CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, "-m", "ddpdoctor", "run", "--report", str(report), "--",
                           sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "2", str(script)],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert "trained 1" in proc.stdout, proc.stdout + proc.stderr  # the one process ran and its preflight with it
    ids = [f["id"] for f in json.loads(report.read_text())["findings"]]
    assert {"NET001", "RUN025", "NCCL003"} <= set(ids), ids
    assert ids.index("NET001") < ids.index("RUN025") < ids.index("NCCL003"), ids


# ---- 2. a rank held in its own code that autograd's engine runs (a module's full backward hook, a custom autograd
# Function's backward) is outside any collective, placed at its own line; not "in the DDP gradient all-reduce"

SP = "/venv/lib/python3.11/site-packages"


def _dump(*frames):
    return "Thread 0x0000000000000001 (most recent call first):\n" + "".join(
        f'  File "{f}", line {ln} in {fn}\n' for f, ln, fn in frames)


ENGINE = [(f"{SP}/torch/autograd/graph.py", 829, "_engine_run_backward"),
          (f"{SP}/torch/autograd/__init__.py", 353, "backward"),
          (f"{SP}/torch/_tensor.py", 648, "backward"),
          ("/job/train.py", 40, "<module>")]


def _rec(dump, cpu=0.0):
    from ddpdoctor.run.section import rank_record

    p = {"pid": 11, "alive": True, "dump": dump, "cpu_frac": cpu, "running_frac": 0.0,
         "beacon": {"phase": "run", "rank": 1, "step": 3}, "info": {"rank": 1, "main_thread": 1}}
    return rank_record(p, ("/usr/lib/python3.11/",), 100.0, [])  # the standard library: the recorder's `lib`


def test_trigger_a_rank_blocked_in_its_backward_hook_is_outside_any_collective():
    """Trigger: the user's hook (train.py:12 time.sleep) innermost of the engine -> 'outside' at train.py:12; the
    same hook using the CPU -> 'busy'; a custom Function's backward (torch/autograd/function.py apply between)."""
    hook = [("/usr/lib/python3.11/threading.py", 300, "wait"), ("/job/train.py", 12, "hook"),
            (f"{SP}/torch/utils/hooks.py", 100, "hook")]
    r = _rec(_dump(*hook, *ENGINE))
    assert r["state"] == "outside" and r["user_frame"]["line"] == 12 and r["doing"] == "outside any collective"
    assert _rec(_dump(*hook, *ENGINE), cpu=0.9)["state"] == "busy"
    fn = [("/job/model.py", 30, "backward"), (f"{SP}/torch/autograd/function.py", 307, "apply")]
    assert _rec(_dump(*fn, *ENGINE))["state"] == "outside"


def test_quiet_a_rank_waiting_in_the_engine_with_only_torchs_frames_is_in_the_all_reduce():
    """Quiet: the engine innermost (DDP's Reducer waits in C++), or torch's own frames inside it (_DDPSink, a hook of
    torch's), with the user's frames only outside it -> 'backward', the DDP gradient all-reduce."""
    assert _rec(_dump(*ENGINE))["state"] == "backward"
    sink = [(f"{SP}/torch/nn/parallel/distributed.py", 260, "backward"), (f"{SP}/torch/utils/hooks.py", 100, "hook")]
    r = _rec(_dump(*sink, *ENGINE))
    assert r["state"] == "backward" and r["doing"] == "the DDP gradient all-reduce (backward)"


HOOK_JOB = """
import time
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
inner = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
step = [0]
def hook(module, grad_in, grad_out):
    if rank == 1 and step[0] >= 3:
        time.sleep(3600)  # HOOK-BLOCKS
inner[0].register_full_backward_hook(hook)
model = DDP(inner)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for i in range(100000):
    step[0] = i
    model(torch.randn(4, 8)).sum().backward()
    opt.step(); opt.zero_grad()
    print(f"step {i}", flush=True)  # one write per line: two ranks share the pipe
"""


@pytest.mark.slow
def test_real_ddp_rank_held_in_its_full_backward_hook_is_named_outside_not_in_the_all_reduce(tmp_path):
    """For real, Gloo on CPU under torchrun: rank 1's full backward hook sleeps from step 3; rank 0 waits in DDP's
    gradient all-reduce. The stall is RUN002 naming rank 1 at the hook's line (at d980f105: RUN007, both ranks 'in
    the DDP gradient all-reduce', rank 1's at the sleep)."""
    script = tmp_path / "hook_job.py"
    script.write_text(HOOK_JOB)
    report = tmp_path / "run.json"
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    proc = subprocess.run([sys.executable, "-m", "ddpdoctor", "run", "--stall-after", "5", "--on-stall", "stop",
                           "--report", str(report), "--", torchrun, "--nproc-per-node", "2", str(script)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    data = json.loads(report.read_text())
    ranks = {r["rank"]: r for r in data["run"]["ranks"]}
    assert "step 2" in proc.stdout and ranks[1]["step"] >= 3, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert ranks[0]["state"] == "backward"  # the state the test needs: rank 0 waits in DDP's all-reduce
    assert ranks[1]["state"] == "outside" and ranks[1]["user_frame"]["line"] == 12, ranks[1]
    stalls = [f for f in data["findings"] if f["id"] in ("RUN002", "RUN007")]
    assert [f["id"] for f in stalls] == ["RUN002"] and "rank 1" in stalls[0]["title"], stalls


def test_an_ended_rank_held_in_its_hook_was_outside_and_one_in_the_engine_alone_in_the_collective():
    """The same class for a rank ended while there (torchrun's teardown, the stack taken at its end): trigger, its
    hook innermost of the engine -> before_end 'outside'; quiet, the engine alone -> 'collective'."""
    from ddpdoctor.run.section import _before_end

    def p(dump):
        return {"pid": 11, "dump": dump, "beacon": {"phase": "run"}, "info": {"main_thread": 1}}

    assert _before_end(p(_dump(("/job/train.py", 12, "hook"), *ENGINE)), ("/usr/lib/python3.11/",)) == "outside"
    assert _before_end(p(_dump(*ENGINE)), ("/usr/lib/python3.11/",)) == "collective"
