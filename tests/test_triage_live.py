"""Faults injected for real: 2-rank Gloo jobs under torchrun on CPU, their real combined log
triaged. The formats are whatever this torch prints, not what a fixture author remembered."""
import os
import subprocess
import sys
import uuid

import pytest

from ddpdoctor.triage.api import triage_paths
from procs import marked

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "fixtures", "triage", "scripts", "gloo_fault.py")


def run_job(mode, tmp_path, fault_timeout="8"):
    mark = f"triage-{uuid.uuid4().hex[:8]}"
    env = dict(os.environ, DDPDOCTOR_TEST_MARK=mark, OMP_NUM_THREADS="1", FAULT_TIMEOUT=fault_timeout)
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    log = tmp_path / f"{mode}.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                                 SCRIPT, mode], stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=str(tmp_path),
                                start_new_session=True)
        try:
            rc = proc.wait(timeout=150)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, 9)
                proc.wait()
            for p in marked(mark):  # torchrun starts workers in their own sessions
                p.kill()
    return rc, log


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_real_exception_on_rank1(tmp_path):
    rc, log = run_job("raise", tmp_path)
    assert rc != 0
    f = triage_paths([str(log)]).sorted_findings()[0]
    assert f.id == "LOG004" and "rank:1" in f.subjects and "ValueError" in f.title, log.read_text()[-3000:]
    assert "gloo_fault.py" in f.title  # the user frame


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_real_sigkill_on_rank1(tmp_path):
    """What the OOM killer does, done by hand: torchrun reports exitcode -9 and its table."""
    rc, log = run_job("kill", tmp_path)
    assert rc != 0
    f = triage_paths([str(log)]).sorted_findings()[0]
    assert f.id == "LOG002" and "rank:1" in f.subjects, log.read_text()[-3000:]


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_real_gloo_timeout_names_the_rank_that_never_joined(tmp_path):
    # The asserted state (rank 0 in the barrier, rank 1 asleep) is reached right after step 2: the Gloo timeout need
    # not be 8 s (round 16, wave 2: 4 s). It also bounds init_process_group, where the two ranks, started together
    # by torchrun, meet after the same imports: passed at load 6-7 on 2 cores.
    rc, log = run_job("barrier", tmp_path, fault_timeout="4")
    assert rc != 0
    found = triage_paths([str(log)]).sorted_findings()
    assert found and found[0].id == "LOG001", [(f.id, f.title) for f in found] + [log.read_text()[-3000:]]
    assert "rank:1" in found[0].subjects
    assert found[0].evidence["waiting_at"]["0"]["file"].endswith("gloo_fault.py")  # where rank 0 waited
