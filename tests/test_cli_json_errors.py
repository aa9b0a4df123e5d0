"""`--json` always prints a valid report: an input error (exit 2) still writes one line on stderr and,
when JSON was asked for, a report on stdout that carries the error (docs/report-format.md)."""
import json

import pytest

from ddpdoctor.cli import main


def _call(capsys, argv):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out, err = capsys.readouterr()
    return exc.value.code, out, err


@pytest.mark.parametrize("flags", [["--json"], ["--format", "json"], ["--format=json"]])
def test_an_input_error_under_json_prints_a_report_that_carries_it(capsys, tmp_path, flags):
    missing = tmp_path / "nofile.log"
    code, out, err = _call(capsys, ["triage", *flags, str(missing)])
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("ddpdoctor: error: no such file")
    doc = json.loads(out)
    assert doc["schema"] == "ddpdoctor/report/1" and doc["command"] == "triage"
    assert doc["findings"] == [] and doc["error"]["exit_status"] == 2
    assert "nofile.log" in doc["error"]["message"]


def test_a_truncated_snapshot_under_json_is_a_report_too(capsys, tmp_path):
    snap = tmp_path / "s.json"
    snap.write_text("{")
    code, out, err = _call(capsys, ["check", "--json", "--snapshot", str(snap)])
    assert code == 2 and "truncated" in err
    assert json.loads(out)["command"] == "check"


def test_without_json_stdout_stays_empty(capsys, tmp_path):
    code, out, err = _call(capsys, ["triage", str(tmp_path / "nofile.log")])
    assert code == 2 and out == "" and err.count("\n") == 1


def test_json_after_the_job_separator_belongs_to_the_job(capsys, tmp_path):
    # `run` prints the job's output; a --json after `--` is the job's flag, never ddpdoctor's.
    code, out, err = _call(capsys, ["run", "--", str(tmp_path / "no-such-binary"), "--json"])
    assert code == 2 and out == "" and "command not found" in err


def test_run_names_its_report_option_when_given_json(capsys):
    code, out, err = _call(capsys, ["run", "--json", "--", "ls"])
    assert code == 2 and out == ""
    assert "--json" in err and "--report FILE" in err and err.count("\n") == 1


def test_fix_env_stdout_stays_shell_even_with_json(capsys):
    # `eval "$(ddpdoctor check --fix-env --json)"` must never eval a JSON document
    code, out, err = _call(capsys, ["check", "--no-comm", "--fix-env", "--json"])
    assert code == 2 and out == "" and "--fix-env" in err
