"""Functional tests in the style of pylint's: every script under fixtures/lint marks the findings it
must get with `# expect: LINTxxx[, LINTyyy]` on the reported line. The test lints each file and
compares the exact set of (line, rule) pairs: a missing finding and an extra one both fail.
Files under fixtures/lint/corpus/ are correct real-world-style scripts and carry no markers."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from ddpdoctor.lint.api import lint_paths

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "lint"
EXPECT = re.compile(r"#\s*expect:\s*([A-Z0-9_, ]+)")
FILES = sorted(p for p in FIXTURES.rglob("*.py"))


def expected(path: Path) -> set:
    out = set()
    for no, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        m = EXPECT.search(line)
        if m:
            out |= {(no, rid.strip()) for rid in m.group(1).split(",") if rid.strip()}
    return out


def actual(path: Path) -> set:
    report = lint_paths([str(path)])
    return {(f.evidence.get("line", 0), f.id) for f in report.findings}


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(FIXTURES)) for p in FILES])
def test_fixture_gets_exactly_the_expected_findings(path):
    want, got = expected(path), actual(path)
    missing = sorted(want - got)
    extra = sorted(got - want)
    assert not missing and not extra, f"missing {missing}, unexpected {extra}"


def test_there_is_a_corpus_of_clean_scripts():
    corpus = [p for p in FILES if "corpus" in p.parts]
    assert len(corpus) >= 6
    assert all(not expected(p) for p in corpus), "corpus scripts must be correct: no expect markers"


def test_the_original_question_gets_a1_a5_at_the_spawn_line():
    path = FIXTURES / "seed_question_spawn.py"
    lines = path.read_text(encoding="utf-8").splitlines()
    spawn_line = next(i for i, l in enumerate(lines, 1) if "torch.multiprocessing.spawn(" in l)
    report = lint_paths([str(path)])
    at_spawn = [f for f in report.findings if f.evidence["line"] == spawn_line]
    cited = {c for f in at_spawn for c in __import__("ddpdoctor.model.registry", fromlist=["REGISTRY"]).REGISTRY[f.id].catalogue}
    assert {"A1", "A5"} <= cited
    assert any(f.severity == "error" for f in at_spawn)
    for f in report.findings:
        assert f"line:{f.evidence['line']}" in f.subjects and f"path:{path}" in f.subjects
