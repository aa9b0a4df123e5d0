"""Inside a Trainer job configured like transformers' run_mlm.py / run_clm.py (issue 13): no use_cpu
on a CPU host, tqdm's monitor thread, a model whose loss ignores num_items_in_batch, tokenization in
the rank under main_process_first, a DataLoader worker that only collates. Run for real with
`torchrun --nproc-per-node 2` on CPU; fixtures/scripts/real_example_trainer.py says what it mirrors."""
from __future__ import annotations

import json
import os
import sys

import pytest

from test_preflight_scripts import TIMING, TORCHRUN, reports, run, script

pytestmark = pytest.mark.slow


def _findings(doc: dict) -> list:
    return [f for part in ("preflight", "steps") if doc.get(part) for f in doc[part]["findings"]]


def _launch(tmp_path, *argv) -> tuple:
    proc = run(TORCHRUN + [script("real_example_trainer.py"), "--out", str(tmp_path), "--steps", "6", *argv],
               timeout=280)
    label = "real-gpt2" if "--fixed" in argv or "gpt2" in argv else "real-bert"
    docs = reports(tmp_path, label)
    assert sorted(docs) == [0, 1], proc.stdout[-4000:]
    return proc, docs


@pytest.mark.timeout(300)
def test_cpu_host_without_use_cpu_gets_rt001_with_the_use_cpu_fix(tmp_path):
    proc, docs = _launch(tmp_path)
    for rank, doc in docs.items():
        rt001 = [f for f in _findings(doc) if f["id"] == "RT001"]
        assert len(rt001) == 1, _findings(doc)
        f = rt001[0]
        assert "use_cpu" in f["fix"] and "torchrun --nproc-per-node" not in f["fix"], f["fix"]
        assert f"rank:{rank}" in f["subjects"]
        # tqdm's monitor thread, pre-tokenized rows collated by the worker, tokenization one rank at a time
        assert not {"RT010", "RT012", "RT024"} & {g["id"] for g in _findings(doc)}, _findings(doc)
    # each process prints its own lines with its own rank, not "rank 0" twice
    assert "[rank 1]" in proc.stdout and "rank 1" in proc.stdout


@pytest.mark.timeout(300)
def test_doubled_loss_is_reported_by_the_callback_in_the_real_run(tmp_path):
    proc, docs = _launch(tmp_path, "--use-cpu")
    logged = docs[0]["extra"]["logged"]
    assert docs[0]["extra"]["world_size"] == 2
    prb010 = [f for f in _findings(docs[0]) if f["id"] == "PRB010"]
    assert len(prb010) == 1 and prb010[0]["severity"] == "warning", _findings(docs[0])
    ev = prb010[0]["evidence"]
    assert ev["world_size"] == 2 and abs(ev["ratio"] - 2) < 0.05, ev
    assert ev["logged_loss"] == pytest.approx(logged[0]["loss"], rel=1e-3)
    assert "average_tokens_across_devices=False" in prb010[0]["fix"]
    ids = {f["id"] for d in docs.values() for f in _findings(d)}
    assert ids - TIMING == {"PRB010", "PRB008"}, ids  # PRB008: Trainer's find_unused default, true (torch warns too)
    assert "PRB010 logged-loss-disagrees" in proc.stdout


@pytest.mark.timeout(300)
def test_healthy_real_run_gets_no_warning(tmp_path):
    proc, docs = _launch(tmp_path, "--fixed")
    for doc in docs.values():
        bad = [f for f in _findings(doc) if f["severity"] != "info" and f["id"] not in TIMING]
        assert not bad, bad
    assert "PRB010" not in proc.stdout
