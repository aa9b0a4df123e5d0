"""The foundation: registry, snapshot loading, CLI exit codes and one-line errors."""
import json
import subprocess
import sys

import pytest

from ddpdoctor.model import Report, error, warning
from ddpdoctor.model.registry import REGISTRY, Spec
from ddpdoctor.pipeline.runner import load_all, run_checks
from ddpdoctor.pipeline.snapshot import Snapshot
from factory import findings_of, make_snapshot

PY = sys.executable


def cli(*args, env=None, input=None):
    import os

    e = dict(os.environ)
    for k in list(e):
        if k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT") or k.startswith(("NCCL_", "GLOO_")):
            del e[k]
    e.update(env or {})
    return subprocess.run([PY, "-m", "ddpdoctor", *args], capture_output=True, text=True, env=e, input=input,
                          timeout=60)


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
def test_bad_usage_exit_2_with_one_line(args):
    res = cli(*args)
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr


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


def test_json_report_contract_shape():
    res = cli("check", "--no-comm", "--json", env={"RANK": "5", "WORLD_SIZE": "4"})
    report = json.loads(res.stdout)
    assert set(report) >= {"schema", "tool_version", "command", "summary", "findings", "skipped"}
    assert set(report["summary"]) == {"errors", "warnings", "infos", "checks_run", "checks_skipped"}
    for f in report["findings"]:
        assert set(f) == {"id", "name", "severity", "title", "detail", "fix", "subjects", "evidence"}
        assert f["severity"] in ("error", "warning", "info") and f["fix"]
    assert res.returncode == 1


def test_check_does_not_import_torch_or_transformers():
    code = ("import sys; from ddpdoctor.cli import main\n"
            "try:\n    main(['check', '--no-comm', '--format', 'json'])\nexcept SystemExit: pass\n"
            "bad = [m for m in ('torch', 'transformers', 'tokenizers', 'h5py', 'numpy') if m in sys.modules]\n"
            "print('IMPORTED', bad, file=sys.stderr)")
    res = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=60)
    assert "IMPORTED []" in res.stderr, res.stderr


def test_report_exit_code_thresholds():
    r = Report("check", findings=[warning("w", fix="x").stamped("A001", "a", "launcher")])
    assert r.exit_code("error") == 0 and r.exit_code("warning") == 1 and r.exit_code("info") == 1
    r.findings.append(error("e", fix="y").stamped("A002", "b", "launcher"))
    assert r.exit_code("error") == 1
