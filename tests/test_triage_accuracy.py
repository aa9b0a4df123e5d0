"""benchmarks/triage_accuracy.py scores a corpus given by --corpus (a held-out set kept outside the repository)
the way it scores the project's own, and refuses bad input with one line and exit 2."""
from __future__ import annotations

import json
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
import triage_accuracy  # noqa: E402

OOM = """[rank1]: Traceback (most recent call last):
[rank1]:   File "train.py", line 10, in <module>
[rank1]:     loss.backward()
[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total capacity of 79.10 GiB of which 1.02 GiB is free.
"""
HEALTHY = """{'loss': 2.31, 'grad_norm': 1.2, 'learning_rate': 5e-05, 'epoch': 0.5}
{'train_runtime': 120.5, 'train_samples_per_second': 33.2, 'train_steps_per_second': 1.04, 'train_loss': 2.1, 'epoch': 1.0}
"""
SILENT = "Epoch 3: 40%|####      | 40/100 [00:10<00:15, 4.00it/s]\n"


def _entry(name: str, verdict: str, expect, **extra) -> dict:
    return {"file": name, "url": f"https://example.invalid/{name}", "batch": 101, "verdict": verdict,
            "expect": expect, "rank": None, "why": "test", **extra}


def _held_out(tmp_path, expect_oom) -> str:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "oom.log").write_text(OOM)
    (logs / "ok.log").write_text(HEALTHY)
    (logs / "silent.log").write_text(SILENT)
    corpus = {"schema": "test", "batches": [], "logs": [
        _entry("oom.log", "failed", expect_oom),
        _entry("ok.log", "healthy", []),
        _entry("silent.log", "failed", ["LOG028", "LOG029"], no_failure_in_excerpt=True)]}
    path = tmp_path / "heldout.json"
    path.write_text(json.dumps(corpus))
    return str(path)


def test_a_held_out_corpus_is_scored_with_the_strict_reading(tmp_path, capsys):
    corpus = _held_out(tmp_path, ["LOG005"])
    assert triage_accuracy.main([str(tmp_path / "logs"), "--corpus", corpus]) == 0
    out = capsys.readouterr().out
    assert "all: 3 logs from 3 threads, 3 right (100%)" in out
    assert "strict: 2/3 (67%)" in out


def test_a_wrong_expectation_is_scored_wrong(tmp_path, capsys):
    corpus = _held_out(tmp_path, ["LOG001"])
    assert triage_accuracy.main([str(tmp_path / "logs"), "--corpus", corpus]) == 0
    assert "all: 3 logs from 3 threads, 2 right (67%)" in capsys.readouterr().out


@pytest.mark.parametrize("content", ["{not json", json.dumps({"logs": "no list"}), json.dumps([1, 2])])
def test_a_bad_corpus_file_is_one_line_and_exit_2(tmp_path, capsys, content):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    assert triage_accuracy.main([str(tmp_path), "--corpus", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a corpus file" in err


def test_a_missing_log_folder_is_one_line_and_exit_2(tmp_path, capsys):
    assert triage_accuracy.main([str(tmp_path / "absent")]) == 2
    assert "not a folder" in capsys.readouterr().err
