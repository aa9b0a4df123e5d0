"""The runtime gatherers and the preflight API: real process state, read in-process."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY_ENV = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))

TOKENIZERS_PROBE = r"""
import json, os
from ddpdoctor.inprocess.runtime import tokenizers_state as ts, threads as th
out = {}
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
out["import"] = ts.read_flags()
tok = Tokenizer(models.WordLevel(unk_token="[UNK]")); tok.pre_tokenizer = pre_tokenizers.Whitespace()
out["construct"] = ts.read_flags()
tok.add_tokens(["a", "b"]); tok.encode("a b")
out["encode"] = ts.read_flags()
tok.encode_batch(["a b"])
out["encode_batch"] = ts.read_flags()
import time
for _ in range(100):  # until the pool is idle (running threads are not inspected): a state, not a fixed 0.3 s
    out["rust_threads"] = th.rust_pool_threads()
    if out["rust_threads"]:
        break
    time.sleep(0.1)
pid = os.fork()
if pid == 0:
    with open(os.environ["OUT"], "w") as fh:
        json.dump(ts.read_flags(), fh)
    os._exit(0)
os.waitpid(pid, 0)
out["child"] = json.load(open(os.environ["OUT"]))
print(json.dumps(out))
"""


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_tokenizers_flag_follows_real_parallel_use(tmp_path):
    env = dict(PY_ENV, OUT=str(tmp_path / "child.json"))
    env.pop("TOKENIZERS_PARALLELISM", None)
    proc = subprocess.run([sys.executable, "-c", TOKENIZERS_PROBE], env=env, capture_output=True, text=True, timeout=150)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    # docs/faults.md, "What we measured": not used after import, construction or a single encode(); used after encode_batch
    assert out["import"] == {"used": False, "parallelism": 0}
    assert out["construct"]["used"] is False and out["encode"]["used"] is False
    assert out["encode_batch"]["used"] is True
    assert out["rust_threads"] >= 1  # the rayon pool's unnamed 2 MiB-stack threads
    assert out["child"] == {"used": True, "parallelism": 1}  # the at-fork handler disabled it in the child


@pytest.mark.slow
def test_h5py_registry_and_dataset_walk(tmp_path):
    import h5py
    import numpy as np
    from torch.utils.data import Subset

    from ddpdoctor.inprocess.runtime.data import walk_dataset
    from ddpdoctor.inprocess.runtime.h5py_state import h5py_state

    path = str(tmp_path / "a.h5")
    with h5py.File(path, "w") as f:
        f["x"] = np.arange(4)

    class DS:
        def __init__(self):
            self.inner = {"files": [h5py.File(path, "r")]}

        def __len__(self):
            return 4

    ds = DS()
    assert path in h5py_state()["open_files"]
    held, cuda = walk_dataset(Subset(ds, [0, 1]))
    assert [(h["attr"], h["kind"]) for h in held] == [("dataset.dataset.inner['files'][0]", "File")] and not cuda
    ds.inner["files"][0].close()
    assert path not in h5py_state()["open_files"]
    assert walk_dataset(ds) == ([], False)


def test_pickle_dry_run_is_bounded_and_exact():
    from ddpdoctor.inprocess.runtime.data import pickle_dry_run

    assert pickle_dry_run({"dataset": list(range(10))})["ok"] is True
    bad = pickle_dry_run({"dataset": [1], "collate_fn": lambda b: b})
    assert bad["ok"] is False and bad["what"] == "collate_fn" and "lambda" in bad["error"]
    big = pickle_dry_run({"dataset": bytes(4096)}, cap=1024)
    assert big["ok"] is None and "dry run stopped" in big["error"]


def test_user_environ_drops_what_accelerate_wrote(monkeypatch):
    import ddpdoctor
    from ddpdoctor.inprocess.runtime import process

    before = {"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "localhost", "MASTER_PORT": "1234"}
    now = dict(before, LOCAL_RANK="0", LOCAL_WORLD_SIZE="1")
    monkeypatch.setattr(ddpdoctor, "_ENV_AT_IMPORT", (before, False))
    monkeypatch.setattr(process, "accelerate_multi_cpu", lambda: True)
    env, written = process.user_environ(now)
    assert "LOCAL_RANK" not in env and written == {"LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1"}
    monkeypatch.setattr(process, "accelerate_multi_cpu", lambda: False)
    assert process.user_environ(now)[1] == {}


def test_thread_and_process_facts_are_cheap_and_safe():
    from ddpdoctor.inprocess.runtime.process import process_facts, start_method

    facts = process_facts(os.environ)
    assert facts["threads"]["os_threads"] >= 1 and facts["cuda"]["initialized"] is False
    assert start_method()[0] in ("fork", "spawn", "forkserver")
    assert facts["seconds_since_start"] > 0


# ---------------------------------------------------------------- the API
def test_preflight_is_callable_both_ways_and_returns_a_report():
    import ddpdoctor

    start = time.perf_counter()
    report = ddpdoctor.preflight(log=False, peers=False)
    wall_ms = (time.perf_counter() - start) * 1000
    assert report.command == "preflight" and report.checks_run > 0
    # It times its own gathering and judging: some real time, within the call that contains it.
    assert 0 < report.extra["preflight"]["elapsed_ms"] <= wall_ms + 0.1
    import ddpdoctor.preflight as module  # the package attribute is now the module: still callable

    assert ddpdoctor.preflight is module and module(log=False).command == "preflight"
    assert ddpdoctor.PreflightError is module.PreflightError


def test_fail_on_raises_with_the_findings(monkeypatch):
    import torch

    import ddpdoctor

    cpus = len(os.sched_getaffinity(0))
    loader = torch.utils.data.DataLoader(list(range(8)), num_workers=cpus + 1)
    with pytest.raises(ddpdoctor.PreflightError) as exc:
        ddpdoctor.preflight(dataloader=loader, fail_on="warning", log=False, only=["RT020"])
    assert "RT020 too-many-workers" in str(exc.value) and exc.value.report.findings
    assert ddpdoctor.preflight(dataloader=loader, fail_on="error", log=False, only=["RT020"]).findings
    with pytest.raises(ValueError):
        ddpdoctor.preflight(fail_on="sometimes")


def test_preflight_spawns_no_subprocess(monkeypatch):
    import ddpdoctor

    def boom(*a, **k):
        raise AssertionError("preflight must not start a subprocess")

    monkeypatch.setattr(subprocess, "Popen", boom)
    monkeypatch.setattr(subprocess, "run", boom)
    ddpdoctor.preflight(log=False)


def test_logging_once_rank_prefix_and_global_on_rank_zero():
    from ddpdoctor.model import warning
    from ddpdoctor.preflight import emit_findings

    f_global = warning("global thing", subjects=["WORLD_SIZE"]).stamped("RT900", "x-global", "launcher")
    f_rank1 = warning("rank one thing", subjects=["rank:1"]).stamped("RT901", "x-rank", "launcher")
    lines: list = []
    emit_findings([f_global, f_rank1], rank=1, header="h", log=lines.append)
    assert len(lines) == 1 and "[rank 1]" in lines[0] and "RT901" in lines[0] and "RT900" not in lines[0]
    lines.clear()
    emit_findings([f_global, f_rank1], rank=1, header="h", log=lines.append)
    assert lines == []  # logged once per process
    emit_findings([f_global], rank=0, header="h", log=lines.append)
    assert "RT900" in lines[0] and "[rank" not in lines[0]


def test_snapshot_file_is_judged_again_offline(tmp_path):
    import torch

    import ddpdoctor
    from ddpdoctor.pipeline.judge import judge
    from ddpdoctor.pipeline.snapshot import Snapshot

    cpus = len(os.sched_getaffinity(0))
    loader = torch.utils.data.DataLoader(list(range(8)), num_workers=cpus + 1)
    path = tmp_path / "snap.json"
    live = ddpdoctor.preflight(dataloader=loader, log=False, snapshot_path=str(path))
    offline = judge(Snapshot.load(str(path)))
    assert "RT020" in {f.id for f in live.findings} and "RT020" in {f.id for f in offline.findings}


@pytest.mark.slow
def test_fork_guard_judges_at_the_fork():
    from ddpdoctor.inprocess import forkguard

    import ddpdoctor

    ddpdoctor.preflight(log=False, peers=False)
    forkguard.reset()
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, name="uploader", daemon=True)
    t.start()
    try:
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
    finally:
        stop.set()
    summary = forkguard.summary()
    assert summary["guard_installed"] and summary["count"] >= 1 and summary["by_caller"].get("os.fork")
    assert "RT024" in {f.id for f in forkguard.findings()}


def test_an_internal_bug_never_breaks_training(monkeypatch):
    import ddpdoctor
    from ddpdoctor.inprocess import runtime

    def broken(**kw):
        raise RuntimeError("boom")

    monkeypatch.setattr(runtime, "gather_sections", broken)
    lines: list = []
    report = ddpdoctor.preflight(log=lines.append, fail_on="error")  # warning-level internal finding: no raise
    assert [f.id for f in report.findings] == ["DOC002"] and "boom" in lines[0]


def test_runtime_finding_is_folded_into_the_static_one_of_the_same_fault():
    from ddpdoctor.model import Report, warning
    from ddpdoctor.preflight import fold_sharpened
    from ddpdoctor.model.registry import REGISTRY, Spec, register
    from ddpdoctor.pipeline.runner import load_all

    load_all(plugins=False)
    register(Spec(id="TST901", slug="static-a7-for-test", family="launcher", func=lambda s: (), catalogue=("A7",)))
    try:
        static = warning("2 ranks x 2 threads", subjects=["OMP_NUM_THREADS"]).stamped("TST901", "x", "launcher")
        runtime = warning("2 ranks x 2 torch threads", subjects=["OMP_NUM_THREADS"]).stamped("RT004", "y", "launcher")
        other = warning("pool used", subjects=[]).stamped("RT010", "z", "tokenizers")
        report = Report(command="preflight", findings=[static, runtime, other])
        assert fold_sharpened(report) == {"RT004": ["TST901"]}
        assert [f.id for f in report.findings] == ["TST901", "RT010"]
        alone = Report(command="preflight", findings=[runtime])
        assert fold_sharpened(alone) == {} and [f.id for f in alone.findings] == ["RT004"]
    finally:
        REGISTRY.pop("TST901", None)


def test_unknown_check_name_is_a_usage_error():
    import ddpdoctor

    with pytest.raises(ValueError, match="unknown check"):
        ddpdoctor.preflight(only=["RT999x"], log=False)
