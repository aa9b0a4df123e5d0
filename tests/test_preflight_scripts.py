"""The reproduction scripts in fixtures/scripts/, run for real on CPU: each fault once faulty and
once fixed, asserting the exact findings. Multi-rank scripts run under
`python -m torch.distributed.run --standalone --nproc-per-node 2` or torch.multiprocessing.spawn."""
from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # every test here launches processes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = os.path.join(ROOT, "fixtures", "scripts")
# Verdicts measured from step timings: on a shared 2-core machine with 2 ranks plus workers they
# depend on the neighbours, so the fixed runs tolerate them (they are asserted in fault runs only).
TIMING = {"PRB004", "PRB005", "PRB007"}


def _env() -> dict:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for name in ("TOKENIZERS_PARALLELISM", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                 "MASTER_PORT", "OMP_NUM_THREADS", "TORCHELASTIC_RUN_ID"):
        env.pop(name, None)
    return env


def run(cmd: list, timeout: float) -> subprocess.CompletedProcess:
    """Run in its own session; on timeout kill the whole group (torchrun's and spawn's children too)."""
    proc = subprocess.Popen(cmd, cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, stdin=subprocess.DEVNULL)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"{cmd} did not finish in {timeout} s:\n{out[-3000:]}")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # no orphans, whatever happened
        except ProcessLookupError:
            pass
    return subprocess.CompletedProcess(cmd, proc.returncode, out, "")


def reports(out_dir, label: str) -> dict:
    docs = {}
    for path in glob.glob(os.path.join(str(out_dir), f"{label}-rank*.json")):
        with open(path) as fh:
            doc = json.load(fh)
        docs[doc["rank"]] = doc
    return docs


def ids_of(doc: dict, part: str = "preflight") -> set:
    """The runtime (RT) and step (PRB) findings, including those preflight folded into a static
    finding of the same fault: exact whether or not the static checks are installed."""
    rep = doc.get(part) or {}
    found = {f["id"] for f in rep.get("findings", []) if f["id"].startswith(("RT", "PRB"))}
    return found | set((rep.get("preflight") or {}).get("folded") or {})


def static_of(doc: dict, part: str = "preflight") -> list:
    """Findings of the static (snapshot) checks that ran inside preflight."""
    return [f for f in (doc.get(part) or {}).get("findings", []) if not f["id"].startswith(("RT", "PRB"))]


def all_ids(docs: dict) -> set:
    return set().union(*(ids_of(d) | ids_of(d, "steps") for d in docs.values())) if docs else set()


def script(name: str) -> str:
    return os.path.join(SCRIPTS, name)


TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]


# ---------------------------------------------------------------- the original question and its fix
SEED_IDS = {"RT002", "RT003", "RT004", "RT010", "RT012", "RT021", "PRB008", "PRB010"}


@pytest.mark.timeout(720)
def test_seed_reproduction_explains_slowdown_and_fork_warning(tmp_path):
    proc = run([sys.executable, script("seed_spawn_trainer.py"), "--out", str(tmp_path)], timeout=660)
    docs = reports(tmp_path, "seed")
    assert sorted(docs) == [0, 1], proc.stdout[-4000:]
    # threads: accelerate sets torch threads to the physical core count per rank; whether 2 ranks of
    # that oversubscribe depends on the machine, so read what this run really had
    rt = docs[0]["snapshot"]["sections"]["runtime"]
    threads = {"RT004"} if rt["threads"]["torch_num_threads"] * 2 > rt["usable_cpus"] else set()
    # rank 0 judges the global picture; rank 1 sees that it believes it is local process 0
    assert ids_of(docs[0]) == {"RT003", "RT010", "RT012", "RT021"} | threads
    assert ids_of(docs[1]) == {"RT002", "RT003", "RT010", "RT012", "RT021"} | threads
    # PRB010: BertForMaskedLM ignores num_items_in_batch while Trainer scales by the world size (issue 13)
    assert ids_of(docs[0], "steps") - TIMING == {"PRB008", "PRB010"}
    # static checks agree (if installed) and raise no false alarm: rank 0's own store holds MASTER_PORT
    for d in docs.values():
        assert not [f for f in static_of(d) if f["severity"] == "error"], static_of(d)
    # what was logged: once, rank 1's own finding with its prefix
    assert proc.stdout.count("RT010 tokenizers-used-before-fork") == 1
    assert "[rank 1]   ! warning RT002 every-rank-local-zero" in proc.stdout


@pytest.mark.timeout(720)
def test_fixed_version_under_torchrun_is_clean(tmp_path):
    proc = run(TORCHRUN + [script("seed_fixed_torchrun.py"), "--out", str(tmp_path), "--steps", "8"], timeout=660)
    docs = reports(tmp_path, "fixed")
    assert sorted(docs) == [0, 1], proc.stdout[-4000:]
    found = all_ids(docs)
    assert not found & SEED_IDS and not found - TIMING, found
    for d in docs.values():
        assert d["preflight"]["summary"]["errors"] == 0
        assert not [f for f in static_of(d) if f["severity"] != "info"], static_of(d)


# ---------------------------------------------------------------- single-process faults
def run_many(tmp_path, calls: list, timeout: float = 360) -> dict:
    """Run several scripts' main(argv) in one fresh interpreter (one torch import for all)."""
    code = (
        "import importlib.util, sys, os\n"
        f"sys.path.insert(0, {SCRIPTS!r})\n"
        "from ddpdoctor.inprocess import forkguard\n"
        f"for name, argv in {calls!r}:\n"
        "    spec = importlib.util.spec_from_file_location(name[:-3], os.path.join(sys.path[0], name))\n"
        "    mod = importlib.util.module_from_spec(spec); sys.modules[name[:-3]] = mod\n"
        "    spec.loader.exec_module(mod)\n"
        "    forkguard.reset()\n"
        f"    mod.main(argv + ['--out', os.path.join({str(tmp_path)!r}, str(len(os.listdir({str(tmp_path)!r}))))])\n"
    )
    proc = run([sys.executable, "-c", code], timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-4000:]
    out = {}
    for i, (name, argv) in enumerate(calls):
        files = glob.glob(os.path.join(str(tmp_path), str(i), "*.json"))
        assert len(files) == 1, (name, argv, proc.stdout[-3000:])
        out[(name, " ".join(argv))] = json.load(open(files[0]))
    return out


DATALOADER_CASES = [
    ("fault_h5py_fork.py", [], {"RT021"}),
    ("fault_h5py_fork.py", ["--fixed"], set()),
    ("fault_h5py_spawn_workers.py", ["--really"], {"RT022"}),
    ("fault_h5py_spawn_workers.py", ["--fixed"], set()),
    ("fault_dataloader_workers.py", ["--fault", "too-many"], {"RT020"}),
    ("fault_dataloader_workers.py", ["--fault", "too-many", "--fixed"], set()),
    ("fault_dataloader_workers.py", ["--fault", "threads"], {"RT024"}),
    ("fault_dataloader_workers.py", ["--fault", "threads", "--fixed"], set()),
    ("fault_dataloader_workers.py", ["--fault", "respawn"], {"RT025"}),
    ("fault_dataloader_workers.py", ["--fault", "respawn", "--fixed"], set()),
    ("fault_dataloader_workers.py", ["--fault", "iterable"], {"RT026"}),
    ("fault_dataloader_workers.py", ["--fault", "iterable", "--fixed"], set()),
]


TRAINER_CASES = [
    ("fault_trainer_args.py", ["--fault", "reentrant"], {"RT032"}),
    ("fault_trainer_args.py", ["--fault", "reentrant", "--fixed"], set()),
    ("fault_trainer_args.py", ["--fault", "fp16-cpu"], {"RT033"}),
    ("fault_trainer_args.py", ["--fault", "fp16-cpu", "--fixed"], set()),
]


@pytest.mark.timeout(600)
def test_dataloader_h5py_and_trainer_argument_faults(tmp_path):
    """The DataLoader/h5py cases and the TrainingArguments cases in ONE interpreter (run_many): each script's main()
    runs with the fork guard reset, as in its own process; a second interpreter cost another `import torch` and
    transformers' Trainer (the two lists were two tests until round 22, with the same assertions)."""
    results = run_many(tmp_path, [(n, a) for n, a, _ in DATALOADER_CASES + TRAINER_CASES])
    for name, argv, expected in TRAINER_CASES:
        assert ids_of(results[(name, " ".join(argv))]) == expected, (name, argv)
    for name, argv, expected in DATALOADER_CASES:
        doc = results[(name, " ".join(argv))]
        assert ids_of(doc) == expected, (name, argv, doc["preflight"]["findings"])
    # the real consequences the findings predicted
    assert results[("fault_h5py_spawn_workers.py", "--really")]["extra"]["real"] == \
        "TypeError: h5py objects cannot be pickled"
    dup = results[("fault_dataloader_workers.py", "--fault iterable")]["extra"]
    assert dup["samples"] == 2 * dup["distinct"]  # every worker yielded the whole stream
    fixed = results[("fault_dataloader_workers.py", "--fault iterable --fixed")]["extra"]
    assert fixed["samples"] == fixed["distinct"]



@pytest.mark.timeout(270)
@pytest.mark.parametrize("fixed", [False, True])
def test_tokenizers_used_then_fork_is_caught_by_the_fork_guard(tmp_path, fixed):
    proc = run([sys.executable, script("fault_tokenizers_fork.py"), "--out", str(tmp_path)]
               + (["--fixed"] if fixed else []), timeout=240)
    doc = reports(tmp_path, "tokenizers_fork")[0]
    assert ids_of(doc) == set()  # preflight ran at the top of the script, before the tokenizer was used
    assert doc["extra"]["fork_guard"] == ([] if fixed else ["RT010"]), proc.stdout[-2000:]


@pytest.mark.timeout(270)
@pytest.mark.parametrize("fixed", [False, True])
def test_forced_parallelism_deadlock_is_stopped_before_it_happens(tmp_path, fixed):
    proc = run([sys.executable, script("fault_tokenizers_deadlock.py"), "--out", str(tmp_path)]
               + (["--fixed"] if fixed else []), timeout=240)
    doc = reports(tmp_path, "tokenizers_deadlock")[0]
    assert ids_of(doc) == (set() if fixed else {"RT011"}), proc.stdout[-2000:]
    assert doc["extra"]["outcome"] == ("iterated" if fixed else "stopped by PreflightError")


# ---------------------------------------------------------------- multi-rank faults
@pytest.mark.timeout(540)
def test_trainer_not_distributed_in_a_real_process_group(tmp_path):
    proc = run([sys.executable, script("fault_trainer_not_distributed.py"), "--out", str(tmp_path)], timeout=480)
    docs = reports(tmp_path, "not_distributed")
    assert sorted(docs) == [0, 1], proc.stdout[-3000:]
    for d in docs.values():
        assert ids_of(d) == {"RT001", "RT003"} and d["extra"]["world_size"] == 1


@pytest.mark.timeout(720)
def test_multi_rank_trainer_faults(tmp_path):
    faults = "threads,rayon,uneven,seeds,callback,accum,slow"
    proc = run(TORCHRUN + [script("fault_ddp_trainer.py"), "--fault", faults, "--out", str(tmp_path)], timeout=660)
    docs = reports(tmp_path, "ddp")
    assert sorted(docs) == [0, 1], proc.stdout[-4000:]
    # F9 and F11 judged at on_train_begin from every rank's facts, collected through the store
    assert ids_of(docs[0]) == {"RT004", "RT012", "RT034", "RT036", "RT037"}
    assert ids_of(docs[1]) == {"RT004", "RT012", "RT036", "RT037"}
    assert ids_of(docs[0], "steps") - TIMING == {"PRB009"}  # F5: one all-reduce round per micro-step
    seeds = {f["id"] for f in docs[0]["extra"]["seeds"]["findings"]}
    assert {"RT035", "RT034"} <= seeds


@pytest.mark.timeout(540)
def test_unused_parameters_named_before_ddp_fails(tmp_path):
    proc = run(TORCHRUN + [script("fault_ddp_trainer.py"), "--fault", "unused", "--out", str(tmp_path)], timeout=480)
    docs = reports(tmp_path, "ddp")
    assert sorted(docs) == [0, 1], proc.stdout[-4000:]
    for rank, d in docs.items():
        assert "Expected to have finished reduction" in d["extra"]["error"]
        unused = d["extra"]["unused"]
        assert [f["id"] for f in unused] == ["RT031"] and f"rank:{rank}" in unused[0]["subjects"]
        assert unused[0]["evidence"]["unused"] == ["unused_head.weight", "unused_head.bias"]
