"""`ddpdoctor run`: bad input (one line, exit 2), the attach, a job that ignores SIGTERM, secrets."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

from procs import marked

from ddpdoctor.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _exit(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    return exc.value.code, err


@pytest.mark.parametrize("argv, text", [
    (["run"], "no command to run"),
    (["run", "--"], "no command to run"),
    (["run", "--", "no-such-command-xyz"], "command not found: no-such-command-xyz"),
    (["run", "--stall-after", "0", "--", "true"], "--stall-after must be > 0"),
    (["run", "--stall-after", "-3", "--", "true"], "--stall-after must be > 0"),
    (["run", "--report", "/no/such/dir/r.json", "--", "true"], "cannot write the report"),
    (["run", "--trace", "/no/such/dir/t.json", "--", "true"], "cannot write the trace"),
    (["run", "--on-stall", "explode", "--", "true"], "explode"),
])
def test_bad_input_is_one_line_and_exit_2(argv, text, capsys):
    code, err = _exit(argv, capsys)
    assert code == 2 and text in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def _env(mark):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), DDPDOCTOR_TEST_MARK=mark)
    env.pop("DDPDOCTOR_RUN_DIR", None)
    return env


def _doctor(args, mark, timeout=120):
    return subprocess.run([sys.executable, "-m", "ddpdoctor", "run", *args], cwd=ROOT, env=_env(mark),
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_exit_status_is_the_jobs_and_the_attach_chains_sitecustomize(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import os\nos.environ['USER_SITE_RAN'] = '1'\n")
    probe = ("import os, sys; print('chained', os.environ.get('USER_SITE_RAN'), "
             "'attached', 'ddpdoctor.run.agent' in sys.modules); sys.exit(7)")
    mark = uuid.uuid4().hex
    env = _env(mark)
    env["PYTHONPATH"] = f"{site}{os.pathsep}{env['PYTHONPATH']}"
    res = subprocess.run([sys.executable, "-m", "ddpdoctor", "run", "--", sys.executable, "-c", probe], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=100)
    assert res.returncode == 7
    assert "chained 1 attached True" in res.stdout
    # without ddpdoctor run, the same interpreter with the site folder on the path attaches nothing
    from ddpdoctor.run.supervisor import SITE_DIR

    env2 = dict(env, PYTHONPATH=f"{SITE_DIR}{os.pathsep}{site}{os.pathsep}{ROOT}")
    res2 = subprocess.run([sys.executable, "-c", probe], env=env2, capture_output=True, text=True, timeout=60)
    assert "chained 1 attached False" in res2.stdout


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_trace_measures_the_split_of_every_step(tmp_path):
    """The split is sampled on short steps; a trace is a picture of every step: `--trace` has the
    ranks measure every one (the recorder's period is 1), without it the period follows the steps."""
    probe = ("from ddpdoctor.run import recorder as r; "
             "print('every', r.S.spl_every, 'period', r._split_period(0.001))")
    for opts, want in (([], "every 0 period 64"), (["--trace", str(tmp_path / "t.json")], "every 1 period 1")):
        res = subprocess.run([sys.executable, "-m", "ddpdoctor", "run", *opts, "--", sys.executable, "-c", probe],
                             cwd=ROOT, env=_env(uuid.uuid4().hex), capture_output=True, text=True, timeout=100)
        assert res.returncode == 0 and want in res.stdout, (res.stdout, res.stderr[-2000:])


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_the_attach_leaves_sys_path_and_its_import_hook_once_done(tmp_path):
    """Every import that misses looks in every sys.path folder and asks every meta_path finder
    (accelerate 1.16 does it twice per optimizer step): the attach's folder leaves sys.path at
    once (PYTHONPATH keeps it for the children), its import hook once every module it patches is in."""
    from ddpdoctor.run.supervisor import SITE_DIR

    probe = textwrap.dedent("""
        import os, sys
        from ddpdoctor.run import recorder
        hooked = lambda: any(isinstance(f, recorder._Finder) for f in sys.meta_path)
        site = os.environ["SITE"]
        print("path", site in sys.path, "env", site in os.environ["PYTHONPATH"].split(os.pathsep), "hook", hooked())
        import torch.optim, torch.utils.data, torch.distributed, torch.multiprocessing
        print("torch only: hook", hooked())
        import transformers.trainer, accelerate.state
        print("all patched: hook", hooked(), sorted(recorder.S.patched) == sorted(recorder.PATCHES), recorder.S.off)
        """)
    env = dict(os.environ, PYTHONPATH=f"{SITE_DIR}{os.pathsep}{ROOT}", SITE=SITE_DIR, DDPDOCTOR_RUN_DIR=str(tmp_path))
    res = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=170)
    assert "path False env True hook True" in res.stdout, res.stdout + res.stderr
    assert "torch only: hook True" in res.stdout  # transformers.trainer and accelerate.state still to come
    assert "all patched: hook False True False" in res.stdout, res.stdout + res.stderr


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_not_importable_job_runs_unchanged_and_is_said_in_one_line(tmp_path):
    mark = uuid.uuid4().hex
    res = _doctor(["--report", str(tmp_path / "r.json"), "--", sys.executable, "-I", "-c", "print('job ran')"], mark)
    assert res.returncode == 0 and "job ran" in res.stdout
    lines = [ln for ln in res.stderr.splitlines() if "no process of the job loaded ddpdoctor" in ln]
    assert len(lines) == 1
    rep = json.loads((tmp_path / "r.json").read_text())
    assert [f["id"] for f in rep["findings"]] == ["RUN012"] and rep["run"]["attached"] is False


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_failed_job_no_rule_explains_is_said_unexplained_not_healthy(tmp_path):
    """The job fails before any rank exists: run says so (RUN022), never "no stall, no death", and exits with
    the job's status."""
    mark = uuid.uuid4().hex
    res = _doctor(["--report", str(tmp_path / "r.json"), "--", sys.executable, "-c",
                   "print('job ran', flush=True); raise SystemExit(3)"], mark)
    assert "job ran" in res.stdout, res.stdout + res.stderr  # the job itself ran
    assert res.returncode == 3
    assert "RUN022" in res.stderr and "no stall, no death" not in res.stderr, res.stderr
    rep = json.loads((tmp_path / "r.json").read_text())
    assert [f["id"] for f in rep["findings"]] == ["RUN022"] and rep["run"]["exit_status"] == 3


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_job_ignoring_sigterm_is_killed_after_grace(tmp_path):
    mark = uuid.uuid4().hex
    script = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); "
              "time.sleep(600)")
    proc = subprocess.Popen([sys.executable, "-m", "ddpdoctor", "run", "--grace", "1", "--", sys.executable, "-c",
                             script], cwd=ROOT, env=_env(mark), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    deadline = time.time() + 10
    while marked(mark) and time.time() < deadline:
        time.sleep(0.2)
    assert marked(mark) == []
    assert proc.returncode == 128 + signal.SIGKILL  # the job's own status: it had to be killed


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_secrets_in_argv_and_env_never_reach_the_report(tmp_path):
    mark = uuid.uuid4().hex
    token = "hf_" + "Ab1" * 10
    env = _env(mark)
    env["HF_TOKEN"] = token
    res = subprocess.run([sys.executable, "-m", "ddpdoctor", "run", "--report", str(tmp_path / "r.json"), "--",
                          sys.executable, "-c", "import sys; sys.exit(1)", "--token", token], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=100)
    assert res.returncode == 1
    text = (tmp_path / "r.json").read_text()
    assert token not in text and token not in res.stderr and "<redacted>" in text


def _torchrun_loop_under_run(mark, preexec):
    """`ddpdoctor run -- torchrun ... loop.py` (2 ranks, slow steps), in its own process group as a shell
    starts a job, with SIGINT as `preexec` sets it."""
    loop = os.path.join(ROOT, "fixtures", "run", "loop.py")
    cmd = [sys.executable, "-m", "ddpdoctor", "run", "--grace", "5", "--", sys.executable, "-m",
           "torch.distributed.run", "--standalone", "--nproc-per-node", "2", loop, "--steps", "100000",
           "--step-sleep", "0.5"]
    return subprocess.Popen(cmd, cwd=ROOT, env=_env(mark), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=preexec)


def _ranks_training(mark):
    """The state the signal tests need: ddpdoctor run, torchrun and both ranks alive, and both ranks
    attached (each wrote its beacon in the run's directory), so they are past their start-up."""
    import glob

    procs = marked(mark)
    dirs = set()
    for p in procs:
        try:
            dirs.add(p.environ().get("DDPDOCTOR_RUN_DIR"))
        except Exception:  # noqa: BLE001 - it just ended
            continue
    dirs.discard(None)
    if len(procs) < 4 or len(dirs) != 1:
        return None
    ranks = 0
    for path in glob.glob(os.path.join(dirs.pop(), "info.*.json")):
        try:
            with open(path) as fh:
                ranks += "RANK" in (json.load(fh).get("env") or {})
        except (OSError, ValueError):
            continue
    return procs if ranks >= 2 else None


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_ctrl_c_in_a_terminal_ends_the_whole_torchrun_job():
    """The terminal sends SIGINT to the foreground process group: `ddpdoctor run` and torchrun (its ranks
    are in sessions of their own, out of reach). The doctor ends whatever is left; nothing survives."""
    from machine import scaled
    from procs import as_from_a_terminal, reached

    mark = uuid.uuid4().hex
    proc = _torchrun_loop_under_run(mark, as_from_a_terminal)
    reached(lambda: _ranks_training(mark), scaled(90), "ddpdoctor run, torchrun and 2 ranks up",
            alive=lambda: proc.poll() is None)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert "SIGINT received; stopping the job" in err, err[-3000:]
    assert proc.returncode != 0
    assert marked(mark) == []


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_run_keeps_an_inherited_ignored_sigint_and_ends_on_sigterm():
    """`ddpdoctor run ... &` from a script starts with SIGINT ignored: it stays ignored (POSIX), the job
    runs on; SIGTERM ends every process of it."""
    from machine import scaled
    from procs import as_a_background_job, reached

    from procs import read_as_it_comes

    mark = uuid.uuid4().hex
    proc = _torchrun_loop_under_run(mark, as_a_background_job)
    streams, join = read_as_it_comes(proc)
    reached(lambda: _ranks_training(mark), scaled(90), "ddpdoctor run, torchrun and 2 ranks up",
            alive=lambda: proc.poll() is None)
    before = {p.pid for p in marked(mark)}
    proc.send_signal(signal.SIGINT)  # to the doctor alone
    # Then SIGUSR1, which asks for the step table: a doctor that printed it has handled every signal sent before it
    # (Python runs pending handlers in signal-number order, SIGINT's first, and a SIGINT handled stops the job before
    # the table at the same poll). A cause, not a 3 s wait: under load a wrongly handled SIGINT could take longer.
    proc.send_signal(signal.SIGUSR1)
    reached(lambda: any("step split on SIGUSR1" in ln for ln in list(streams["err"])), scaled(30),
            "the doctor's step table on SIGUSR1, after the SIGINT", alive=lambda: proc.poll() is None)
    assert not any("SIGINT received" in ln for ln in streams["err"]), "".join(streams["err"])[-3000:]
    assert proc.poll() is None, "SIGINT ended a `ddpdoctor run` that inherited it as ignored"
    assert before <= {p.pid for p in marked(mark)}, "SIGINT ended a process of the job"
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=120)
    join()
    err = "".join(streams["err"])
    assert "SIGTERM received; stopping the job" in err, err[-3000:]
    assert marked(mark) == []
