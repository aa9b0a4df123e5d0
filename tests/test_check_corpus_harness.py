"""benchmarks/check_corpus.py never crashes on a case modelled against the snapshot schema: it says INVALID with the
field, scores the case as failed and goes on (round 24: checkcol28's b123-pytorch-9932 wrote packages.cuda_toolkit as a
string and the whole batch's read stopped with a traceback)."""
from __future__ import annotations

import json

from bench_modules import load


def test_an_invalid_case_is_one_line_and_a_failure(tmp_path, capsys, monkeypatch):
    cases = {"schema": "t", "batches": [{"batch": 1, "cases": [
        {"id": "bad", "base": "cpu-only", "set": {"packages.cuda_toolkit": "9.2"}, "expect": ["PKG005"]},
        {"id": "good", "base": "cpu-only", "set": {"packages.cuda_toolkit.version": "9.2"}}]}]}
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(cases))
    cc = load("check_corpus", "check_corpus_harness")
    monkeypatch.setattr("sys.argv", ["check_corpus.py", "--corpus", str(path), "-v"])
    assert cc.main() == 0
    out = capsys.readouterr().out
    assert "INVALID bad: field packages.cuda_toolkit is str" in out and "PASS good" in out
    assert "now 1/2" in out
