"""QA: hand-edited snapshots and odd flags are bad input (exit 2, one line), never a crash or a
silent pass."""
import copy
import glob
import json
import os

import pytest

from ddpdoctor.cli import main
from ddpdoctor.pipeline.runner import load_all, run_checks
from ddpdoctor.pipeline.snapshot import Snapshot, SnapshotError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = sorted(glob.glob(os.path.join(ROOT, "fixtures", "snapshots", "*.json")))
BASE = os.path.join(ROOT, "fixtures", "snapshots", "recorded-cpu-sandbox.json")


def run(capsys, *argv):
    with pytest.raises(SystemExit) as exc:
        main(list(argv))
    out, err = capsys.readouterr()
    return exc.value.code, out, err


def edited(tmp_path, edit, base=BASE):
    doc = json.load(open(base))
    edit(doc["sections"])
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(doc))
    return str(path)


HAND_EDITS = {
    "rank-as-number": lambda s: s["env"]["vars"].update(RANK=5, WORLD_SIZE=4),
    "env-null": lambda s: s["env"]["vars"].update(RANK=None),
    "vars-list": lambda s: s["env"].update(vars=["RANK=5"]),
    "shm-string": lambda s: s["host"].update(shm="64m"),
    "shm-size-string": lambda s: s["host"]["shm"].update(size_bytes="64M"),
    "quota-string": lambda s: s["host"]["cgroup"].update(quota_cpus="2"),
    "nofile-string": lambda s: s["host"]["rlimits"]["RLIMIT_NOFILE"].update(soft="1024"),
    "interfaces-string": lambda s: s["network"].update(interfaces="eth0"),
    "interface-without-name": lambda s: s["network"]["interfaces"].append({"up": True}),
    "ports-int": lambda s: s["network"].update(listening_tcp_ports=29500),
    "versions-string": lambda s: s["packages"].update(versions="torch 2.13"),
    "world-size-string": lambda s: s["launcher"].update(world_size="4"),
    "gpu-hints-int": lambda s: s["gpus"].update(hints=5),
}


@pytest.mark.parametrize("name", sorted(HAND_EDITS))
def test_hand_edited_snapshot_is_bad_input_not_a_crashed_check(tmp_path, capsys, name):
    code, out, err = run(capsys, "check", "--snapshot", edited(tmp_path, HAND_EDITS[name]))
    assert code == 2, out
    assert err.startswith("ddpdoctor: error: snapshot ") and err.count("\n") == 1
    assert "field " in err and "Traceback" not in err


def test_number_in_env_says_how_to_write_it(tmp_path, capsys):
    _code, _out, err = run(capsys, "check", "--snapshot", edited(tmp_path, HAND_EDITS["rank-as-number"]))
    assert 'env.vars.RANK is int, expected a string (write "5")' in err


@pytest.mark.parametrize("path", FIXTURES, ids=os.path.basename)
def test_every_fixture_still_loads(path):
    Snapshot.load(path)


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node[:1]):
            yield from _paths(v, prefix + (i,))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("path", [p for p in FIXTURES if "dgx" in p or "acs" in p or "cpu-only" in p],
                         ids=os.path.basename)
def test_any_wrong_type_anywhere_is_rejected_or_judged_without_a_crash(path):
    load_all(plugins=False)
    base = json.load(open(path))
    for sec in base["sections"]:
        for p in list(_paths(base["sections"][sec], (sec,)))[1:]:
            for junk in (None, 5, "x", [], {}):
                doc = copy.deepcopy(base)
                node = doc["sections"]
                for k in p[:-1]:
                    node = node[k]
                node[p[-1]] = junk
                try:
                    snap = Snapshot.from_dict(doc)
                except SnapshotError:
                    continue
                found, _skipped, _ran = run_checks(snap)
                crashed = [f.title for f in found if f.id == "DOC001"]
                assert not crashed, (p, junk, crashed)


def test_check_script_that_does_not_exist_is_bad_input(capsys):
    code, out, err = run(capsys, "check", "--snapshot", BASE, "--script", "/nonexistent/trian.py")
    assert code == 2 and out == ""
    assert "/nonexistent/trian.py" in err and err.count("\n") == 1


@pytest.mark.parametrize("value", [",", " , ,"])
def test_an_only_list_of_nothing_is_bad_input(capsys, value):
    # `--only "$A,$B"` with empty variables must not report "No issues found!" and exit 0.
    # (--only X --ignore X is a deliberate choice: ignore wins, exit 0; see test_core.)
    code, out, err = run(capsys, "check", "--snapshot", BASE, "--only", value)
    assert code == 2 and out == ""
    assert "selects no check" in err and err.count("\n") == 1


def test_verbose_skips_say_why_and_are_grouped(capsys):
    code, out, _err = run(capsys, "check", "--no-comm", "-v", "--only", "comm,lint,GPU002,GPU003")
    skipped = out.split("Skipped:")[1].strip().split("\n\n")[0].splitlines()
    assert any(line.strip().startswith("COMM001, COMM002") and "--no-comm" in line for line in skipped)
    assert any("LINT000" in line and "--script" in line for line in skipped)
    assert "facts in this snapshot" not in out
    assert len(skipped) == len({line.split(":", 1)[1] for line in skipped})  # one line per reason


def test_summary_says_1_check_not_1_checks(capsys):
    _code, out, _err = run(capsys, "check", "--snapshot", BASE, "--only", "ENV003")
    assert "1 check ran, 0 skipped." in out


@pytest.mark.timeout(60)
def test_snapshot_piped_into_check_from_stdin():
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": ROOT, "RANK": "5", "WORLD_SIZE": "4"}
    snap = subprocess.run([sys.executable, "-m", "ddpdoctor", "snapshot"], capture_output=True, env=env, timeout=60)
    res = subprocess.run([sys.executable, "-m", "ddpdoctor", "check", "--snapshot", "-", "--only", "ENV003"],
                         input=snap.stdout, capture_output=True, env={**os.environ, "PYTHONPATH": ROOT}, timeout=60)
    assert res.returncode == 1, res.stderr
    assert b"RANK=5 is not below WORLD_SIZE=4" in res.stdout
    res = subprocess.run([sys.executable, "-m", "ddpdoctor", "check", "--snapshot", "-"], input=b"{",
                         capture_output=True, env={**os.environ, "PYTHONPATH": ROOT}, timeout=60)
    assert res.returncode == 2 and res.stderr.startswith(b"ddpdoctor: error: snapshot <stdin> is not valid JSON")


def test_explain_accepts_a_family_name_like_only_does(capsys):
    code, out, _err = run(capsys, "explain", "tokenizers")
    assert code == 0 and "\nTOK001 tokenizers-parallelism-with-fork (tokenizers)\n" in "\n" + out


def test_only_lint_rules_without_a_script_is_bad_input(capsys):
    code, out, err = run(capsys, "check", "--only", "LINT001,LINT004")
    assert code == 2 and out == "" and "--script" in err
