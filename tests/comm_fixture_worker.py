"""A tiny worker for launcher tests: init Gloo, one all_reduce, report. LW_MODE injects a fault."""
import os
import time
from datetime import timedelta

from ddpdoctor.launch import Reporter

rep = Reporter.from_env()
mode = os.environ.get("LW_MODE", "")
rep.phase("import")
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

rep.phase("init")
# rank 0 waits this long for a peer in init: longer than any launch deadline a test hands the tool
# (LW_INIT_TIMEOUT_S, set by the test from its scaled deadline), so the tool's deadline comes first
dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("LW_INIT_TIMEOUT_S", "10"))))
rep.phase("allreduce")
if mode == "crash":
    raise RuntimeError("injected crash")
if mode == "stall":
    time.sleep(300)
t = torch.ones(4)
dist.all_reduce(t)
rep.result({"sum": t.tolist()})
if mode == "abort":
    os.abort()  # what Gloo sometimes does at exit (pytorch#190489), after the result is written
if mode == "hang":
    time.sleep(300)  # a hang in destroy_process_group, after the result is written
rep.exit(0)
