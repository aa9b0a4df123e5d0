"""Runtime checks over written runtime sections: one test that triggers each check and one that
does not, plus the hardware-only faults (A10, E5, F1, bf16) that CPU machines cannot reproduce,
and the healthy set-ups that must stay quiet."""
from __future__ import annotations

import copy

import pytest

from factory import findings_of, make_snapshot

TORCHRUN_ENV = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "abc", "OMP_NUM_THREADS": "1", "GROUP_RANK": "0"}
SPAWN_ENV = {"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "localhost", "MASTER_PORT": "12355"}


def runtime(**over):
    rt = {
        "pid": 10, "python": "3.11.7", "seconds_since_start": 12.0, "start_method": "fork", "start_method_set": False,
        "mp_process_name": "MainProcess", "started_by": None, "usable_cpus": 16, "host": "node0",
        "distributed": {"initialized": False}, "cuda": {"initialized": False},
        "threads": {"os_threads": 3, "python_threads": [], "torch_num_threads": 1, "rust_pool_threads": 0,
                    "omp_num_threads_env": "1"},
        "tokenizers": {"imported": False}, "h5py": {"imported": False}, "forks": {},
    }
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(rt.get(k), dict):
            rt[k] = dict(rt[k], **v)
        else:
            rt[k] = v
    return rt


def data(**over):
    d = {"source": "dataloader", "num_workers": 0, "start_method": None, "persistent_workers": False, "length": 10,
         "sampler": None, "dataset": {"type": "m.DS", "iterable": False, "length": 40, "h5py": [],
                                      "cuda_tensors": False, "iter_shards": None}}
    d.update(over)
    return d


def trainer(args=None, model=None, **over):
    a = {"devices_set_up": True, "parallel_mode": "distributed", "world_size": 2, "process_index": 1,
         "local_process_index": 1, "n_gpu": 1, "device": "cuda:1", "ddp_find_unused_parameters": None,
         "ddp_timeout": 1800, "bf16": False, "fp16": False}
    a.update(args or {})
    t = {"transformers": "5.24.0", "has_trainer": True, "args": a,
         "model": dict({"type": "m.Model", "gradient_checkpointing": False, "ddp": None}, **(model or {})),
         "callbacks": []}
    t.update(over)
    return t


def snap(env=None, rt=None, dl=None, tr=None, peers=None, steps=None, host=None):
    sections = {"runtime": rt or runtime()}
    if dl is not None:
        sections["runtime_data"] = dl
    if tr is not None:
        sections["runtime_trainer"] = tr
    if peers is not None:
        sections["runtime_peers"] = peers
    if steps is not None:
        sections["runtime_steps"] = steps
    return make_snapshot(env=env or {}, host=host, **sections)


def ids(s, check):
    return [f.id for f in findings_of(s, check)]


# ---------------------------------------------------------------- launcher
def test_rt001_trainer_not_distributed_gpu_dataparallel():
    tr = trainer(args={"parallel_mode": "not_distributed", "world_size": 1, "n_gpu": 4})
    found = findings_of(snap(env=SPAWN_ENV, tr=tr), "RT001")
    assert [f.severity for f in found] == ["error"]
    assert "DataParallel over 4 GPUs" in found[0].detail and "arg:parallel_mode" in found[0].subjects


def test_rt001_quiet_when_distributed_or_single():
    assert not ids(snap(env=TORCHRUN_ENV, tr=trainer()), "RT001")
    assert not ids(snap(env={}, tr=trainer(args={"parallel_mode": "not_parallel", "world_size": 1})), "RT001")


def test_rt002_every_rank_local_zero():
    tr = trainer(args={"process_index": 1, "local_process_index": 0, "device": "cpu"})
    found = findings_of(snap(env=SPAWN_ENV, tr=tr), "RT002")
    assert found and found[0].subjects[0] == "rank:1"
    assert not ids(snap(env=TORCHRUN_ENV, tr=trainer()), "RT002")


def test_rt003_spawned_rank():
    rt = runtime(started_by="multiprocessing.spawn", mp_process_name="SpawnProcess-2", start_method="spawn")
    assert ids(snap(env=SPAWN_ENV, rt=rt), "RT003") == ["RT003"]
    # round 14: a healthy mp.spawn rank (its own init_method, no DataLoader workers) gets a note, not a warning;
    # a DataLoader whose workers are spawned because of it makes it a warning
    quiet = findings_of(snap(env=SPAWN_ENV, rt=rt, dl=data()), "RT003")
    assert [f.severity for f in quiet] == ["info"]
    loud = findings_of(snap(env=SPAWN_ENV, rt=rt, dl=data(num_workers=2, start_method="spawn")), "RT003")
    assert [f.severity for f in loud] == ["warning"] and "spawns 2 workers" in loud[0].title
    forked = findings_of(snap(env=SPAWN_ENV, rt=rt, dl=data(num_workers=2, start_method="fork")), "RT003")
    assert [f.severity for f in forked] == ["info"]
    assert not ids(snap(env=TORCHRUN_ENV), "RT003")
    assert not ids(snap(env={}, rt=rt), "RT003")  # a spawned helper process, not a rank


def test_rt004_threads_counts_local_ranks_from_master_addr():
    rt = runtime(usable_cpus=2, threads={"torch_num_threads": 2})
    found = findings_of(snap(env=SPAWN_ENV, rt=rt, host={"usable_cpus": 2}), "RT004")
    assert found and "2 ranks x 2 torch threads" in found[0].title
    quiet = runtime(usable_cpus=2, threads={"torch_num_threads": 1})
    assert not ids(snap(env=SPAWN_ENV, rt=quiet, host={"usable_cpus": 2}), "RT004")


def test_rt005_cuda_device_not_local_rank_gpu_only():
    rt = runtime(cuda={"initialized": True, "device_count": 4, "current_device": 0})
    found = findings_of(snap(env=TORCHRUN_ENV, rt=rt), "RT005")
    assert found and "gpu:0" in found[0].subjects
    ok = runtime(cuda={"initialized": True, "device_count": 4, "current_device": 1})
    assert not ids(snap(env=TORCHRUN_ENV, rt=ok), "RT005")


# ---------------------------------------------------------------- tokenizers
def tok(**over):
    t = {"imported": True, "version": "0.23.3", "env": None, "rayon_num_threads_env": None, "rust_pool_threads": 16,
         "used_parallelism": True, "disabled_by_fork": False, "evidence": "library flag USED_PARALLELISM"}
    t.update(over)
    return t


def test_rt010_tokenizers_before_forked_workers():
    found = findings_of(snap(rt=runtime(tokenizers=tok()), dl=data(num_workers=2, start_method="fork")), "RT010")
    assert found and found[0].severity == "warning" and "silently" in found[0].detail
    old = findings_of(snap(rt=runtime(tokenizers=tok(version="0.13.3")), dl=data(num_workers=2, start_method="fork")),
                      "RT010")
    assert "Disabling parallelism to avoid deadlocks" in old[0].detail


def test_rt010_quiet_under_spawn_env_set_or_unused():
    assert not ids(snap(rt=runtime(tokenizers=tok()), dl=data(num_workers=2, start_method="spawn")), "RT010")
    assert not ids(snap(rt=runtime(tokenizers=tok(env="false")), dl=data(num_workers=2, start_method="fork")), "RT010")
    assert not ids(snap(rt=runtime(tokenizers=tok(used_parallelism=False)), dl=data(num_workers=2, start_method="fork")),
                   "RT010")
    assert not ids(snap(rt=runtime(tokenizers=tok()), dl=data(num_workers=0)), "RT010")


def test_rt011_forced_parallelism_with_fork_is_error():
    found = findings_of(snap(rt=runtime(tokenizers=tok(env="true")), dl=data(num_workers=2, start_method="fork")), "RT011")
    assert [f.severity for f in found] == ["error"]
    assert not ids(snap(rt=runtime(tokenizers=tok(env="true")), dl=data(num_workers=2, start_method="spawn")), "RT011")


def test_rt012_rayon_pools_per_rank():
    found = findings_of(snap(env=TORCHRUN_ENV, rt=runtime(tokenizers=tok())), "RT012")
    assert found and "RAYON_NUM_THREADS" in found[0].subjects
    assert not ids(snap(env=TORCHRUN_ENV, rt=runtime(tokenizers=tok(rayon_num_threads_env="4"))), "RT012")
    assert not ids(snap(env={}, rt=runtime(tokenizers=tok())), "RT012")


# ---------------------------------------------------------------- dataloader
def test_rt020_workers_times_local_ranks():
    found = findings_of(snap(env=TORCHRUN_ENV, dl=data(num_workers=10, start_method="fork")), "RT020")
    assert found and "2 ranks x 10" in found[0].title
    assert not ids(snap(env=TORCHRUN_ENV, dl=data(num_workers=4, start_method="fork")), "RT020")


def h5(**over):
    return data(num_workers=2, start_method="fork",
                dataset=dict(data()["dataset"], h5py=[{"attr": "dataset.file", "kind": "File", "file": "/d.h5"}]), **over)


def test_rt021_h5py_before_fork_and_rt022_under_spawn():
    assert [f.severity for f in findings_of(snap(dl=h5()), "RT021")] == ["warning"]
    spawn = h5()
    spawn["start_method"] = "spawn"
    spawn["dataset"]["pickle"] = {"ok": False, "what": "dataset", "error": "TypeError: h5py objects cannot be pickled"}
    found = findings_of(snap(dl=spawn), "RT022")
    assert [f.severity for f in found] == ["error"] and "path:/d.h5" in found[0].subjects
    assert not ids(snap(dl=spawn), "RT021")
    assert not ids(snap(dl=data(num_workers=2, start_method="fork")), "RT021")
    assert not ids(snap(dl=data(num_workers=2, start_method="spawn")), "RT022")


def test_rt023_cuda_before_fork_gpu_only():
    rt = runtime(cuda={"initialized": True, "device_count": 1, "current_device": 0})
    fork_now = {"source": "fork", "num_workers": 1, "start_method": "fork", "fork_caller": "datasets.map"}
    assert [f.severity for f in findings_of(snap(rt=rt, dl=fork_now), "RT023")] == ["error"]
    # the ordinary GPU set-up: CPU dataset, forked workers, CUDA in the parent: quiet
    assert not ids(snap(rt=rt, dl=data(num_workers=4, start_method="fork")), "RT023")
    cuda_ds = data(num_workers=4, start_method="fork", dataset=dict(data()["dataset"], cuda_tensors=True))
    assert ids(snap(rt=rt, dl=cuda_ds), "RT023") == ["RT023"]


def test_rt024_threads_at_fork():
    rt = runtime(threads={"python_threads": ["uploader"]})
    assert ids(snap(rt=rt, dl=data(num_workers=2, start_method="fork")), "RT024") == ["RT024"]
    assert not ids(snap(rt=rt, dl=data(num_workers=2, start_method="forkserver")), "RT024")


def test_rt025_and_rt026():
    assert ids(snap(dl=data(num_workers=2, start_method="spawn")), "RT025") == ["RT025"]
    assert not ids(snap(dl=data(num_workers=2, start_method="spawn", persistent_workers=True)), "RT025")
    it = data(num_workers=2, start_method="fork", dataset=dict(data()["dataset"], iterable=True, iter_shards=False))
    assert ids(snap(dl=it), "RT026") == ["RT026"]
    it["dataset"]["iter_shards"] = True
    assert not ids(snap(dl=it), "RT026")


# ---------------------------------------------------------------- trainer
def test_rt030_dataparallel_gpu_only():
    tr = trainer(args={"parallel_mode": "not_distributed", "world_size": 1, "n_gpu": 4, "train_batch_size": 32})
    found = findings_of(snap(env={}, tr=tr), "RT030")
    assert found and "gpu:3" in found[0].subjects
    assert not ids(snap(env={}, tr=trainer(args={"parallel_mode": "not_parallel", "n_gpu": 1})), "RT030")


def test_rt031_unused_parameters():
    steps = {"unused_parameters": ["head.weight"], "ddp": True, "find_unused_parameters": False}
    assert [f.severity for f in findings_of(snap(steps=steps, tr=trainer()), "RT031")] == ["error"]
    steps["find_unused_parameters"] = True
    assert [f.severity for f in findings_of(snap(steps=steps, tr=trainer()), "RT031")] == ["info"]
    steps["unused_parameters"] = []
    assert not ids(snap(steps=steps, tr=trainer()), "RT031")


def test_rt032_reentrant_checkpointing():
    tr = trainer(args={"ddp_find_unused_parameters": True, "gradient_checkpointing": True,
                       "gradient_checkpointing_kwargs": {"use_reentrant": True}})
    assert [f.severity for f in findings_of(snap(env=TORCHRUN_ENV, tr=tr), "RT032")] == ["error"]
    tr["args"]["gradient_checkpointing_kwargs"] = {"use_reentrant": False}
    assert not ids(snap(env=TORCHRUN_ENV, tr=tr), "RT032")


def test_rt033_precision():
    assert ids(snap(tr=trainer(args={"fp16": True, "device": "cpu"})), "RT033") == ["RT033"]
    rt = runtime(cuda={"initialized": True, "device_count": 1, "current_device": 0, "capability": [7, 0]})
    assert ids(snap(rt=rt, tr=trainer(args={"bf16": True, "device": "cuda:0"})), "RT033") == ["RT033"]
    rt["cuda"]["capability"] = [8, 0]
    assert not ids(snap(rt=rt, tr=trainer(args={"bf16": True, "device": "cuda:0"})), "RT033")


def peers(**per_rank):
    return {"world_size": len(per_rank), "ranks": {str(r): f for r, f in per_rank.items()}, "missing": []}


def test_rt034_rt035_rt036_cross_rank():
    p = peers(**{"0": {"dataloader_length": 12, "sampler_seed": 1, "seconds_since_start": 5},
                 "1": {"dataloader_length": 8, "sampler_seed": 2, "seconds_since_group": 1000}})
    s = snap(env=TORCHRUN_ENV, dl=data(), peers=p, tr=trainer())
    assert ids(s, "RT034") == ["RT034"] and ids(s, "RT035") == ["RT035"] and ids(s, "RT036") == ["RT036"]
    ok = peers(**{"0": {"dataloader_length": 12, "sampler_seed": 1, "seconds_since_start": 5},
                  "1": {"dataloader_length": 12, "sampler_seed": 1, "seconds_since_start": 6}})
    s = snap(env=TORCHRUN_ENV, dl=data(), peers=ok, tr=trainer())
    assert not ids(s, "RT034") and not ids(s, "RT035") and not ids(s, "RT036")


def test_rt035_sampler_for_another_job():
    rt = runtime(distributed={"initialized": True, "rank": 0, "world_size": 2})
    dl = data(sampler={"type": "DistributedSampler", "distributed": True, "num_replicas": 4, "rank": 0})
    assert ids(snap(env=TORCHRUN_ENV, rt=rt, dl=dl), "RT035") == ["RT035"]
    dl["sampler"]["num_replicas"] = 2
    assert not ids(snap(env=TORCHRUN_ENV, rt=rt, dl=dl), "RT035")


def test_rt037_callbacks_writing_everywhere():
    cb = [{"type": "my.Logger", "builtin": False, "ungated_writes": [{"event": "on_log", "calls": ["open"]}]}]
    assert ids(snap(env=TORCHRUN_ENV, tr=trainer(callbacks=cb)), "RT037") == ["RT037"]
    assert not ids(snap(env={}, tr=trainer(callbacks=cb)), "RT037")


# ---------------------------------------------------------------- healthy days stay quiet
HEALTHY = {
    "clean shell": ({}, runtime(), data(), trainer(args={"parallel_mode": "not_parallel", "world_size": 1,
                                                         "process_index": 0, "local_process_index": 0, "n_gpu": 0,
                                                         "device": "cpu"})),
    "torchrun worker": (TORCHRUN_ENV, runtime(distributed={"initialized": True, "rank": 1, "world_size": 2}),
                        data(num_workers=2, start_method="fork", persistent_workers=True), trainer()),
    "slurm step": ({"SLURM_PROCID": "0", "SLURM_STEP_ID": "0", "SLURM_NTASKS": "1", "MASTER_ADDR": "node0"},
                   runtime(), data(num_workers=4, start_method="fork"), None),
    "cpu laptop": ({}, runtime(usable_cpus=4, threads={"torch_num_threads": 4}), data(num_workers=2, start_method="fork"),
                   None),
}


@pytest.mark.parametrize("name", sorted(HEALTHY))
def test_healthy_setups_get_no_runtime_error_or_warning(name):
    env, rt, dl, tr = copy.deepcopy(HEALTHY[name])
    found = [f for f in findings_of(snap(env=env, rt=rt, dl=dl, tr=tr)) if f.id.startswith("RT")]
    assert [(f.id, f.title) for f in found if f.severity != "info"] == []


def test_rt036_quiet_in_a_single_process_however_old():
    rt = runtime(seconds_since_start=86400.0)  # a notebook kernel started yesterday
    assert not ids(snap(env={}, rt=rt, tr=trainer(args={"world_size": 1, "parallel_mode": "not_parallel"})), "RT036")
    assert ids(snap(env=TORCHRUN_ENV, rt=rt, tr=trainer()), "RT036") == ["RT036"]


def test_rt036_reads_the_timeout_the_process_group_really_got():
    """Issue 27, item 7: with use_cpu, transformers 5.25 does not pass ddp_timeout to the process group
    (it got torch's 1800 s): 40 s of set-up against ddp_timeout=60 is no threat. Before, RT036 warned
    that the 60 s would kill the job."""
    rt = runtime(seconds_since_start=40.0,
                 distributed={"initialized": True, "rank": 0, "world_size": 2, "timeout_s": 1800.0})
    tr = trainer(args={"ddp_timeout": 60, "use_cpu": True, "device": "cpu"})
    assert not ids(snap(env=TORCHRUN_ENV, rt=rt, tr=tr), "RT036")
    rt["distributed"]["timeout_s"] = 60.0  # the group did get 60 s: the warning stands, naming that timeout
    rt["seconds_since_group"] = 40.0  # timed from init_process_group (round 16: an age alone is a bound)
    [f] = findings_of(snap(env=TORCHRUN_ENV, rt=rt, tr=tr), "RT036")
    assert "the process group's timeout is 60 s" in f.title
