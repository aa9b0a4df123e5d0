"""No option falls back silently on a default: a value the command cannot honour is one line on
stderr and exit 2 (probe, comm, and their worker entry points)."""
import os
import subprocess
import sys

import pytest

from ddpdoctor.cli import main


def _run(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out, err = capsys.readouterr()
    return exc.value.code, out, err


@pytest.mark.parametrize("argv", [
    ["probe", "--nproc", "0"], ["probe", "--cpu", "--nproc", "0"], ["probe", "--nproc", "-3"],
    ["probe", "--gpus", "0"], ["comm", "--nproc", "0"], ["comm", "--cpu", "--nproc", "0"],
])
def test_zero_or_negative_rank_counts_are_refused(argv, capsys):
    code, out, err = _run(argv, capsys)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and ("--nproc" in err or "--gpus" in err)


def test_probe_gpus_without_gpus_is_refused_not_run_on_the_cpu(monkeypatch, capsys):
    import ddpdoctor.commands.probe as probe_cli
    monkeypatch.setattr(probe_cli, "_gpu_count", lambda: 0)
    code, _, err = _run(["probe", "--gpus", "2"], capsys)
    assert code == 2 and "no NVIDIA GPU is visible" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("module,argv", [("ddpdoctor.commands.probe", ["probe", "--gpus", "4"]),
                                         ("ddpdoctor.commands.comm", ["comm", "--nproc", "4"])])
def test_more_ranks_than_gpus_is_refused_not_clamped(module, argv, monkeypatch, capsys):
    import importlib
    monkeypatch.setattr(importlib.import_module(module), "_gpu_count", lambda: 2)
    code, _, err = _run(argv, capsys)
    assert code == 2 and "only 2 GPU(s) visible" in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("argv,env", [
    (["-m", "ddpdoctor.probe", "--steps", "0"], {}),
    (["-m", "ddpdoctor.probe", "--workers", "-1"], {}),
    (["-m", "ddpdoctor.probe", "--timeout", "0"], {}),
    (["-m", "ddpdoctor.comm", "--deadline", "0"], {}),
    (["-m", "ddpdoctor.comm", "--phase-timeout", "nan"], {}),
    (["-m", "ddpdoctor.comm"], {"DDPDOCTOR_FORMAT": "yaml"}),
])
def test_worker_entry_points_refuse_bad_values_in_one_line(argv, env):
    res = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=90,
                         env={**os.environ, **env})
    assert res.returncode == 2, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "error" in res.stderr


def test_check_only_a_triage_rule_points_to_triage(capsys):
    """LOG ids are triage rules (they read logs): `check --only LOG001` says so and names the command
    that runs it, instead of "unknown check"."""
    code, out, err = _run(["check", "--only", "LOG001"], capsys)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "unknown" not in err
    assert "LOG001 is a triage rule" in err and "ddpdoctor triage --only LOG001" in err
    code, _, err = _run(["check", "--only", "logs"], capsys)  # the family: the same, by count
    assert code == 2 and "triage rules" in err and "ddpdoctor triage --only logs" in err


def test_check_only_a_triage_rule_beside_a_check_runs_the_check_with_a_note(capsys):
    snap = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "snapshots",
                        "cpu-only.json")
    code, out, err = _run(["check", "--snapshot", snap, "--only", "ENV003,LOG001", "--json"], capsys)
    import json

    report = json.loads(out)
    assert code in (0, 1) and report["summary"]["checks_run"] == 1
    assert all(f["id"] == "ENV003" for f in report["findings"])
    assert "LOG001 is a triage rule, skipped here" in err and "ddpdoctor triage --only LOG001" in err
    code, out, err = _run(["check", "--snapshot", snap, "--only", "ENV003", "--ignore", "LOG001"], capsys)
    assert code in (0, 1) and err == ""
