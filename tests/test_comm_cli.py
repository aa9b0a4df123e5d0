"""`ddpdoctor comm` as a user runs it: bad flags, Ctrl-C and SIGTERM (nothing left behind), and the
hook `ddpdoctor check` calls."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid

import psutil
import pytest
from machine import scaled
from procs import as_a_background_job, as_from_a_terminal, marked, reached

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cli(*args, env=None, **kw):
    return subprocess.run([sys.executable, "-m", "ddpdoctor", "comm", *args], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": ROOT, **(env or {})}, timeout=180, **kw)


@pytest.mark.parametrize("args", [["--sizes", "12Q"], ["--cpu", "--gpus", "2"], ["--nproc", "0"],
                                  ["--cpu", "--master-addr", "203.0.113.7"]])  # TEST-NET-3: not on this host
@pytest.mark.slow
def test_bad_input_is_one_line_exit_2(args):
    out = cli(*args)
    assert out.returncode == 2
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr


def _start_stalled_comm(mark: str, preexec):
    """`ddpdoctor comm` whose ranks stall at the barrier, in its own process group as a shell's job is."""
    env = {**os.environ, "PYTHONPATH": ROOT, "DDPDOCTOR_TEST_MARK": mark, "DDPDOCTOR_COMM_FAULT": "stall@barrier"}
    return subprocess.Popen([sys.executable, "-m", "ddpdoctor", "comm", "--cpu", "--nproc", "2", "--deadline", "120",
                             "--sizes", "1K"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=preexec, start_new_session=True)


def _ranks_up(mark: str):
    """The state a signal test needs: cli + agent + 2 ranks alive, and the rendezvous port listening."""
    procs = marked(mark)
    ports = {c.laddr.port for p in procs for c in _conns(p) if c.status == psutil.CONN_LISTEN}
    return ports if len(procs) >= 4 and ports else None


@pytest.mark.slow
@pytest.mark.timeout(420)
@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupt_leaves_no_process_or_port(sig, code):
    """Ctrl-C (SIGINT to the job's process group, as a terminal sends it) and SIGTERM end the whole job.
    The child starts with SIGINT at its default, as from a terminal, whatever this suite inherited."""
    mark = uuid.uuid4().hex
    proc = _start_stalled_comm(mark, as_from_a_terminal)
    ports = reached(lambda: _ranks_up(mark), scaled(60), "cli + agent + 2 ranks up, rendezvous listening",
                    alive=lambda: proc.poll() is None)
    os.killpg(proc.pid, sig) if sig == signal.SIGINT else proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert "Traceback" not in err
    assert marked(mark) == []
    listening = {c.laddr.port for c in psutil.net_connections("tcp") if c.status == psutil.CONN_LISTEN}
    assert not (ports & listening), "a rendezvous port is still listening"


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_an_inherited_ignored_sigint_is_respected_and_sigterm_still_ends_the_job():
    """Started as `ddpdoctor comm &` from a script (SIGINT ignored, as POSIX has background jobs), the
    doctor keeps ignoring SIGINT: the job runs on. SIGTERM (kill, scancel, a CI timeout) still ends it all."""
    mark = uuid.uuid4().hex
    proc = _start_stalled_comm(mark, as_a_background_job)
    reached(lambda: _ranks_up(mark), scaled(60), "cli + agent + 2 ranks up, rendezvous listening",
            alive=lambda: proc.poll() is None)
    before = {p.pid for p in marked(mark)}
    # The doctor's SIGINT disposition is "ignore" in the kernel (/proc/PID/status SigIgn) when the signal is sent: the
    # kernel then drops it, and nothing can come of it later. Before: a 3 s wait, which a SIGINT handled slower than
    # that on a loaded machine passed.
    assert _ignores(proc.pid, signal.SIGINT), "the doctor does not ignore the SIGINT it inherited as ignored"
    proc.send_signal(signal.SIGINT)
    assert _ignores(proc.pid, signal.SIGINT)
    assert proc.poll() is None, "SIGINT ended a doctor that inherited it as ignored"
    assert before <= {p.pid for p in marked(mark)}, "SIGINT ended a process of the job"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "Traceback" not in err
    assert marked(mark) == []


def _ignores(pid: int, sig: int) -> bool:
    """The kernel's disposition of `sig` for `pid` is SIG_IGN (its bit in /proc/PID/status SigIgn)."""
    with open(f"/proc/{pid}/status") as fh:
        mask = next(int(ln.split()[1], 16) for ln in fh if ln.startswith("SigIgn:"))
    return bool(mask >> (int(sig) - 1) & 1)


def _conns(p):
    try:
        return p.net_connections("tcp")
    except (psutil.Error, AttributeError):
        return []


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_check_hook_runs_a_local_gloo_test_when_world_size_says_so(monkeypatch):
    from ddpdoctor.pipeline.check import wants_comm
    from ddpdoctor.comm.api import comm_section_for_check
    from factory import findings_of, make_snapshot

    monkeypatch.delenv("RANK", raising=False)
    snap = make_snapshot(env={"WORLD_SIZE": "2"})
    assert wants_comm(snap)
    sec = comm_section_for_check(snap)
    assert sec["ok"] and sec["backend"] == "gloo" and sec["bandwidth"]
    snap.sections["comm"] = sec
    assert [f.id for f in findings_of(snap) if f.family == "comm"] == ["COMM090"]


@pytest.mark.slow
@pytest.mark.timeout(270)
def test_check_inside_a_torchrun_job_joins_it(tmp_path):
    """`torchrun ... -m ddpdoctor check`: each rank's check joins the job's own rendezvous."""
    env = {**os.environ, "PYTHONPATH": ROOT, "TORCH_CPP_LOG_LEVEL": "ERROR"}
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                          "--log-dir", str(tmp_path), "--redirects", "1", "-m", "ddpdoctor", "check",
                          "--only", "comm", "--json", "--all-ranks"], env=env, capture_output=True, text=True,
                         timeout=240)  # --all-ranks: every rank prints its own report (default: rank 0 only)
    assert out.returncode == 0, out.stderr[-2000:]
    import glob
    import json

    docs = [json.load(open(p)) for p in glob.glob(str(tmp_path / "**" / "stdout.log"), recursive=True)]
    assert len(docs) == 2
    for doc in docs:
        assert [f["id"] for f in doc["findings"]] == ["COMM090"]
        assert doc["summary"]["checks_skipped"] == 0


# ------------------------------------------------------------------------------------------------
# `ddpdoctor check` run by every task of an srun step joins that job, as under torchrun.

@pytest.mark.parametrize("env,joined", [
    ({"SLURM_JOB_ID": "77", "SLURM_STEP_ID": "0", "SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_LOCALID": "1",
      "SLURM_NTASKS_PER_NODE": "2", "SLURM_JOB_NODELIST": "node01"}, True),   # srun ddpdoctor check
    ({"WORLD_SIZE": "2"}, False),                                              # a shell: local test
])
def test_check_under_srun_joins_the_job(monkeypatch, env, joined):
    import ddpdoctor.comm.api as api
    from factory import make_snapshot

    for k in ("RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    calls = []
    monkeypatch.setattr(api, "run_joined", lambda environ, **kw: calls.append("joined") or {"unavailable": "x"})
    monkeypatch.setattr(api, "run_local", lambda **kw: calls.append("local") or {"unavailable": "x"})
    api.comm_section_for_check(make_snapshot(env=env))
    assert calls == (["joined"] if joined else ["local"])
