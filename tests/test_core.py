"""The foundation: registry, snapshot loading, CLI exit codes and one-line errors."""
import copy
import glob
import json
import os
import subprocess
import sys

import pytest

from ddpdoctor.cli import main
from ddpdoctor.model import Report, error, warning
from ddpdoctor.model.registry import REGISTRY, Spec
from ddpdoctor.pipeline.runner import load_all, run_checks
from ddpdoctor.pipeline.snapshot import Snapshot, SnapshotError
from factory import findings_of, make_snapshot
from mutate import replaced

PY = sys.executable


def cli(*args, env=None, input=None):
    import os

    e = dict(os.environ)
    for k in list(e):
        if k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT") or k.startswith(("NCCL_", "GLOO_")):
            del e[k]
    e.update(env or {})
    return subprocess.run([PY, "-m", "ddpdoctor", *args], capture_output=True, text=True, env=e, input=input,
                          timeout=180)


def test_rank_out_of_range_triggers_and_not():
    bad = findings_of(make_snapshot(env={"RANK": "5", "WORLD_SIZE": "4"}), "ENV003")
    assert [(f.severity, set(f.subjects)) for f in bad] == [("error", {"RANK", "WORLD_SIZE"})]
    assert not findings_of(make_snapshot(env={"RANK": "3", "WORLD_SIZE": "4"}), "ENV003")


def test_crashing_check_becomes_internal_finding_and_others_still_run():
    def boom(snap):
        raise RuntimeError("kaboom")

    spec = Spec(id="ZZZ999", slug="always-crashes", family="internal", func=boom, needs=("env",))
    good = REGISTRY["ENV003"]
    found, skipped, ran = run_checks(make_snapshot(env={"RANK": "9", "WORLD_SIZE": "2"}), specs=[spec, good])
    assert ran == 2
    assert {f.id for f in found} == {"DOC001", "ENV003"}
    crashed = [f for f in found if f.id == "DOC001"][0]
    assert "kaboom" in crashed.title and crashed.evidence["check"] == "ZZZ999"


def test_missing_section_is_skipped_with_reason():
    spec = Spec(id="ZZZ998", slug="needs-gpus", family="gpu", func=lambda s: [], needs=("gpus",))
    found, skipped, ran = run_checks(make_snapshot(), specs=[spec])
    assert ran == 0 and skipped[0].id == "ZZZ998" and "gpus" in skipped[0].reason
    snap = make_snapshot(gpus={"unavailable": "no NVIDIA driver found"})
    _, skipped, _ = run_checks(snap, specs=[spec])
    assert skipped[0].reason == "no NVIDIA driver found"


def test_failed_gatherer_is_a_finding_not_a_crash():
    def broken():
        raise OSError("proc not mounted")

    snap = Snapshot(gatherers={"host": broken})
    found, skipped, _ = run_checks(snap, specs=[Spec(id="ZZZ997", slug="x", family="system", func=lambda s: [],
                                                     needs=("host",))])
    assert "proc not mounted" in skipped[0].reason
    assert [f.id for f in found] == ["DOC002"]


def test_every_check_has_the_doc_headings():
    load_all(plugins=False)
    for spec in REGISTRY.values():
        parts = spec.sections()
        for heading in ("What it checks", "Why it matters", "Example", "Fix"):
            assert parts.get(heading), f"{spec.id} docstring lacks '{heading}'"


@pytest.mark.parametrize("content, needle", [
    (b"", "not valid JSON"),
    (b'{"schema": "ddpdoctor/snapshot/1", "sections": {"host"', "not valid JSON"),
    (b"\x00\x01\x02\xff\xfe", "not UTF-8"),
    (b"[1, 2, 3]", "not a JSON object"),
    (b'{"schema": "ddpdoctor/snapshot/99", "sections": {}}', "newer than"),
    (b'{"schema": "something/else", "sections": {}}', "not a ddpdoctor snapshot"),
    (b'{"schema": "ddpdoctor/snapshot/1", "sections": {"host": 3}}', "expected an object"),
    (b'{"schema": "ddpdoctor/snapshot/1"}', "no 'sections'"),
    (b"[" * 100000, "nested too deeply"),
])
@pytest.mark.slow
def test_bad_snapshots_exit_2_with_one_line(tmp_path, content, needle):
    path = tmp_path / "snap.json"
    path.write_bytes(content)
    res = cli("check", "--snapshot", str(path))
    assert res.returncode == 2, res.stderr
    assert needle in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr


@pytest.mark.parametrize("args", [["check", "--bogus"], ["check", "--only", "NOPE123"], ["explain", "nothing-like-this"],
                                  ["check", "--format", "yaml"], ["check", "--snapshot", "/no/such/file.json"],
                                  ["nosuchcommand"], ["check", "--fail-on", "sometimes"]])
@pytest.mark.slow
def test_bad_usage_exit_2_with_one_line(args):
    res = cli(*args)
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr


@pytest.mark.slow
def test_snapshot_round_trip_and_exit_codes(tmp_path):
    path = tmp_path / "snap.json"
    res = cli("snapshot", "-o", str(path), env={"RANK": "5", "WORLD_SIZE": "4"})
    assert res.returncode == 0, res.stderr
    doc = json.loads(path.read_text())
    assert doc["schema"] == "ddpdoctor/snapshot/1"
    res = cli("check", "--snapshot", str(path), "--json")
    assert res.returncode == 1
    report = json.loads(res.stdout)
    assert report["schema"] == "ddpdoctor/report/1"
    assert any(f["id"] == "ENV003" for f in report["findings"])
    assert cli("check", "--snapshot", str(path), "--ignore", "ENV003", "--only", "ENV003").returncode == 0


@pytest.mark.slow
def test_json_report_contract_shape():
    res = cli("check", "--no-comm", "--json", env={"RANK": "5", "WORLD_SIZE": "4"})
    report = json.loads(res.stdout)
    assert set(report) >= {"schema", "tool_version", "command", "summary", "findings", "skipped"}
    assert set(report["summary"]) == {"errors", "warnings", "infos", "checks_run", "checks_skipped"}
    for f in report["findings"]:
        assert set(f) == {"id", "name", "severity", "title", "detail", "fix", "subjects", "evidence"}
        assert f["severity"] in ("error", "warning", "info") and f["fix"]
    assert res.returncode == 1


@pytest.mark.slow
def test_check_does_not_import_torch_or_transformers():
    code = ("import sys; from ddpdoctor.cli import main\n"
            "try:\n    main(['check', '--no-comm', '--format', 'json'])\nexcept SystemExit: pass\n"
            "bad = [m for m in ('torch', 'transformers', 'tokenizers', 'h5py', 'numpy') if m in sys.modules]\n"
            "print('IMPORTED', bad, file=sys.stderr)")
    res = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=180)
    assert "IMPORTED []" in res.stderr, res.stderr


def test_report_exit_code_thresholds():
    r = Report("check", findings=[warning("w", fix="x").stamped("A001", "a", "launcher")])
    assert r.exit_code("error") == 0 and r.exit_code("warning") == 1 and r.exit_code("info") == 1
    r.findings.append(error("e", fix="y").stamped("A002", "b", "launcher"))
    assert r.exit_code("error") == 1


# ------------------------------------------------------------------------------------------------
# Hand-edited snapshots and odd flags are bad input (exit 2, one line), never a crash or a silent pass.

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


@pytest.mark.timeout(360)
@pytest.mark.parametrize("path", [p for p in FIXTURES if "dgx" in p or "acs" in p or "cpu-only" in p],
                         ids=os.path.basename)
@pytest.mark.slow
def test_any_wrong_type_anywhere_is_rejected_or_judged_without_a_crash(path):
    load_all(plugins=False)
    base = json.load(open(path))
    pristine = copy.deepcopy(base)
    for sec in base["sections"]:
        for p in list(_paths(base["sections"][sec], (sec,)))[1:]:
            for junk in (None, 5, "x", [], {}):
                doc = replaced(base, ("sections", *p), junk)  # the path copied, the rest shared
                try:
                    snap = Snapshot.from_dict(doc)
                except SnapshotError:
                    continue
                found, _skipped, _ran = run_checks(snap)
                crashed = [f.title for f in found if f.id == "DOC001"]
                assert not crashed, (p, junk, crashed)
    assert base == pristine, "loading or checking a snapshot changed the document it was given"


def test_the_shape_walk_of_all_patterns_at_once_rejects_what_the_walk_per_pattern_does():
    """shape_error walks every declared pattern at once and builds a path only for the field it reports
    (the fuzz above spent 17 of its 23 s in the walk per pattern, building every value's path); it must
    give the same one line as that walk (tests/shape_oracle.py) for every field of a recorded snapshot
    set to a wrong type (each field one of nine, in turn: the walk per pattern is slow; measured once over
    every fixture, every field with 11 junk values: 68,068 documents, 0 apart)."""
    from shape_oracle import shape_error_walk

    from ddpdoctor.pipeline.shapes import shape_error

    path = next(p for p in FIXTURES if p.endswith("pcie-switch-acs-2x-l40s.json"))
    base = json.load(open(path))
    junks = (None, 5, "x", True, 1.5, [], {}, [None], {"k": 5})
    paths = [p for sec in base["sections"] for p in list(_paths(base["sections"][sec], (sec,)))[1:]]
    rejected = 0
    for n, p in enumerate(paths):
        sections = replaced(base, ("sections", *p), junks[n % len(junks)])["sections"]
        if all(isinstance(v, dict) for v in sections.values()):
            want = shape_error_walk(sections)
            rejected += bool(want)
            assert shape_error(sections) == want, (p, junks[n % len(junks)])
    assert rejected > 50 and shape_error(base["sections"]) == ""


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


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_snapshot_piped_into_check_from_stdin():
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": ROOT, "RANK": "5", "WORLD_SIZE": "4"}
    snap = subprocess.run([sys.executable, "-m", "ddpdoctor", "snapshot"], capture_output=True, env=env, timeout=180)
    res = subprocess.run([sys.executable, "-m", "ddpdoctor", "check", "--snapshot", "-", "--only", "ENV003"],
                         input=snap.stdout, capture_output=True, env={**os.environ, "PYTHONPATH": ROOT}, timeout=180)
    assert res.returncode == 1, res.stderr
    assert b"RANK=5 is not below WORLD_SIZE=4" in res.stdout
    res = subprocess.run([sys.executable, "-m", "ddpdoctor", "check", "--snapshot", "-"], input=b"{",
                         capture_output=True, env={**os.environ, "PYTHONPATH": ROOT}, timeout=180)
    assert res.returncode == 2 and res.stderr.startswith(b"ddpdoctor: error: snapshot <stdin> is not valid JSON")


def test_explain_accepts_a_family_name_like_only_does(capsys):
    code, out, _err = run(capsys, "explain", "tokenizers")
    assert code == 0 and "\nTOK001 tokenizers-parallelism-with-fork (tokenizers)\n" in "\n" + out


def test_only_lint_rules_without_a_script_is_bad_input(capsys):
    code, out, err = run(capsys, "check", "--only", "LINT001,LINT004")
    assert code == 2 and out == "" and "--script" in err
