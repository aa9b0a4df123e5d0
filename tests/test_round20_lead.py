"""Round 20 (lead): bad command lines given to `check`, and the training command's program and script facts."""
from __future__ import annotations

import os

import pytest

from click.testing import CliRunner

from factory import findings_of, make_snapshot


def _check(args, cwd):
    from ddpdoctor.cli import cli

    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(cli, ["check", "--no-comm", "--only", "launcher"] + args)
    finally:
        os.chdir(old)


def test_check_refuses_a_training_command_without_dashes(tmp_path, capsys):
    """`ddpdoctor check snapshot.json` (meant --snapshot) used to be judged as a training command, exit 0."""
    import pytest

    from ddpdoctor.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["check", "--no-comm", "snapshot.json"])
    out, err = capsys.readouterr()
    assert exc.value.code == 2 and out == ""
    assert err.count("\n") == 1 and "after --" in err and "snapshot.json" in err


def test_check_takes_the_training_command_after_dashes(tmp_path):
    (tmp_path / "train.py").write_text("print('hi')\n")
    res = _check(["--", "python", "train.py"], tmp_path)
    assert res.exit_code == 0, res.output
    assert "ENV022" not in res.output


def test_unknown_program_is_recorded_and_env020_says_it_is_not_on_path(tmp_path):
    """`check -- <a program that is neither a launcher nor python>` used to record nothing and say nothing."""
    from ddpdoctor.pipeline.check import add_given_command
    from ddpdoctor.pipeline.snapshot import Snapshot

    snap = Snapshot(sections={})
    add_given_command(snap, ["no-such-launcher-xyz", "--nodes", "2"])
    [cmd] = snap.sections["launch"]["commands"]
    assert cmd["found"] is False and cmd["program_word"] == "no-such-launcher-xyz" and cmd["depth"] == 0
    [f] = findings_of(make_snapshot(launch=snap.sections["launch"]), "ENV020")
    assert f.severity == "error" and "no-such-launcher-xyz" in f.title


def test_missing_script_is_recorded_and_env022_warns(tmp_path):
    from ddpdoctor.pipeline.check import add_given_command
    from ddpdoctor.pipeline.snapshot import Snapshot

    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        snap = Snapshot(sections={})
        add_given_command(snap, ["torchrun", "--nproc-per-node", "2", "scripts/trian.py"])
    finally:
        os.chdir(old)
    [cmd] = snap.sections["launch"]["commands"]
    assert cmd["program_exists"] is False and cmd["cwd"] == str(tmp_path)
    [f] = findings_of(make_snapshot(launch=snap.sections["launch"]), "ENV022")
    assert f.severity == "warning" and "scripts/trian.py" in f.title and str(tmp_path) in f.title


def test_env022_quiet_for_a_present_script_a_module_and_a_shell_script_line(tmp_path):
    present = {"launcher": "python", "options": {}, "program": "train.py", "depth": 0, "program_exists": True,
               "cwd": "/job"}
    module = {"launcher": "torchrun", "options": {}, "program": "pkg.train", "depth": 0}
    from_script = {"launcher": "torchrun", "options": {}, "program": "main.py", "depth": 0, "from_script": "t.sh:3"}
    parent = {"launcher": "torchrun", "options": {}, "program": "main.py", "depth": 1}
    snap = make_snapshot(launch={"commands": [present, module, from_script, parent], "depth_read": 1})
    assert findings_of(snap, "ENV022") == []


def test_a_shell_script_run_directly_gives_its_launch_lines(tmp_path):
    """`check -- ./train.sh` is read as `check -- sh train.sh` is: by its launch lines, not as an unknown program."""
    from ddpdoctor.pipeline.check import _shell_script_of, add_given_command
    from ddpdoctor.pipeline.snapshot import Snapshot

    script = tmp_path / "run_job"
    script.write_text("#!/usr/bin/env bash\ntorchrun --nproc_per_node 2 main.py\n")
    script.chmod(0o755)  # run directly, it must be executable: without the x bit ENV020 says "Permission denied"
    other = tmp_path / "tool"
    other.write_text("#!/usr/bin/python3\nprint(1)\n")
    assert _shell_script_of([str(script)]) == str(script)
    assert _shell_script_of([str(other)]) is None and _shell_script_of(["run_job"]) is None
    snap = Snapshot(sections={})
    add_given_command(snap, [str(script)])
    [cmd] = snap.sections["launch"]["commands"]
    assert cmd["launcher"] == "torchrun" and cmd["from_script"].endswith(":2")


def test_a_short_secret_value_is_hidden_where_it_stands_alone():
    from ddpdoctor.model.redact import REDACTED, redact_line

    env = {"DB_PASSWORD": "s3cr3t", "HF_TOKEN_ENABLED": "true", "WANDB_API_KEY": "abc"}
    line = "connect --pass s3cr3t failed; s3cr3tive and xs3cr3t stay; HF_TOKEN_ENABLED is true; abc"
    out = redact_line(line, env)
    assert "--pass " + REDACTED in out and "s3cr3tive" in out and "xs3cr3t" in out
    assert out.endswith("is true; abc")  # a setting and a 3-character value are not hidden


def test_a_short_secret_in_this_process_environment_is_hidden_by_redact_text(monkeypatch):
    from ddpdoctor.model.redact import REDACTED, redact_text

    monkeypatch.setenv("MY_DB_PASSWD", "pa55w0")
    assert redact_text("login as admin with pa55w0 now") == f"login as admin with {REDACTED} now"
    monkeypatch.delenv("MY_DB_PASSWD")
    assert redact_text("login as admin with pa55w0 now") == "login as admin with pa55w0 now"


def test_the_positional_key_of_a_login_subcommand_is_hidden():
    from ddpdoctor.model.redact import REDACTED, redact_text

    key = "0123456789abcdef0123456789abcdef01234567"
    assert redact_text(f"+ wandb login {key}") == f"+ wandb login {REDACTED}"
    assert redact_text("wandb login --relogin") == "wandb login --relogin"
    assert redact_text("the login page of the cluster") == "the login page of the cluster"
    # a commit hash elsewhere is not a credential
    assert redact_text(f"torch built from commit {key}") == f"torch built from commit {key}"


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_a_job_that_prints_its_secrets_leaves_none_in_the_report_or_the_doctors_lines(tmp_path):
    """The job's own output is the job's (passed through unchanged); what ddpdoctor writes (its report and its own
    stderr lines) quotes the job's exception with the long token and the short password hidden."""
    import json
    import subprocess
    import sys
    import uuid

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    token, short = "hf_" + "Zq9" * 10, "pa55w0"
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""),
               DDPDOCTOR_TEST_MARK=uuid.uuid4().hex, DB_PASSWORD=short)
    env.pop("DDPDOCTOR_RUN_DIR", None)
    job = f"print('connecting with {short}', flush=True)\nraise RuntimeError('auth failed: {token} user {short}')"
    res = subprocess.run([sys.executable, "-m", "ddpdoctor", "run", "--report", str(tmp_path / "r.json"), "--",
                          sys.executable, "-c", job], cwd=root, env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 1 and f"connecting with {short}" in res.stdout  # the job ran and printed its secret
    report = (tmp_path / "r.json").read_text()
    assert "RuntimeError" in report and "auth failed" in report  # the failure was read from the job's output
    assert token not in report and short not in report, report
    doctor_lines = [ln for ln in res.stderr.splitlines() if "ddpdoctor" in ln or "LOG0" in ln or "RUN0" in ln]
    assert doctor_lines and not [ln for ln in doctor_lines if token in ln or short in ln], res.stderr
    assert json.loads(report)["findings"]
