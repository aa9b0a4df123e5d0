"""Runtime launcher checks (RT001-RT005): what the live process says about how it was launched.

The static launcher checks judge the environment variables; these judge what Trainer, accelerate
and torch actually did with them inside the training process.
"""
from __future__ import annotations

from ddpdoctor.model import error, info, warning
from ddpdoctor.model.registry import check
from ddpdoctor.facts.runtime import local_ranks, rank_subject, rt, trainer_args, usable_cpus, workers, world_size
from ddpdoctor.facts.env import env_int, env_of

_TORCHRUN_FIX = "torchrun --nproc-per-node {n} train.py   # sets RANK, LOCAL_RANK, WORLD_SIZE and OMP_NUM_THREADS per rank"


@check("RT001", "trainer-not-distributed", family="launcher", needs=("runtime_trainer",), catalogue=("A1",))
def trainer_not_distributed(snap):
    """The Trainer runs alone (or with DataParallel) although WORLD_SIZE says this is one rank of many.

    What it checks
        Inside the training process, after TrainingArguments set up devices: WORLD_SIZE > 1 (or an
        initialised process group of several ranks) while `args.parallel_mode` is not
        `distributed` or `args.world_size` is 1.

    Why it matters
        Trainer decides on DDP through accelerate's PartialState, which keys off LOCAL_RANK (on GPU)
        and WORLD_SIZE. When the launcher did not set them, every process trains the whole job on
        its own, or wraps the model in DataParallel over every GPU: N times the work, and slower
        than plain DataParallel. transformers PR#41382 removed `TrainingArguments.local_rank`, so
        passing `local_rank=rank` no longer helps. See transformers `training_args.py`
        `_setup_devices` and accelerate `state.py` `_prepare_backend`.

    Example
        torch.multiprocessing.spawn(run, nprocs=4) with RANK/WORLD_SIZE/MASTER_* set by hand on a
        GPU node: LOCAL_RANK is unset, so each process gets parallel_mode=not_distributed.

        On a host without GPUs, under torchrun with LOCAL_RANK set, the cause is different:
        accelerate sets up multi-process CPU training only with `use_cpu=True`; transformers'
        example scripts (run_mlm.py, run_clm.py) do not pass it unless asked.

    Fix
        Launch with torchrun (`torchrun --nproc-per-node 4 train.py`) or `accelerate launch`, which
        set LOCAL_RANK and LOCAL_WORLD_SIZE for every rank. On a CPU host already under torchrun:
        `TrainingArguments(use_cpu=True)`, or `--use_cpu` for the HF example scripts.
    """
    args = trainer_args(snap)
    if not args.get("devices_set_up"):
        return
    env_world = env_int(env_of(snap), "WORLD_SIZE") or 0
    d = rt(snap).get("distributed") or {}
    world = max(env_world, int(d.get("world_size") or 0) if d.get("initialized") else 0)
    if world <= 1:
        return
    mode, t_world = args.get("parallel_mode"), args.get("world_size")
    if mode == "distributed" and (t_world or 0) > 1:
        return
    n_gpu = args.get("n_gpu") or 0
    how = (f"wraps the model in DataParallel over {n_gpu} GPUs in each of the {world} processes"
           if mode == "not_distributed" else "trains the whole job alone in each of the processes")
    env = env_of(snap)
    # On a host without GPUs the launcher is not the cause: accelerate's _prepare_backend sets up
    # multi-process CPU training (Gloo) only when use_cpu=True; without it, torchrun's ranks (LOCAL_RANK
    # set and all) each train alone. Telling them to use torchrun would send them round in a loop.
    cpu_host = (n_gpu == 0 and str(args.get("device") or "").startswith("cpu") and not args.get("use_cpu")
                and env.get("LOCAL_RANK") is not None)
    if cpu_host:
        why = ("This host trains on the CPU, and accelerate sets up multi-process CPU training only with "
               "use_cpu=True (accelerate `state.py` `_prepare_backend`); the launcher did its part (LOCAL_RANK="
               f"{env.get('LOCAL_RANK')}).")
        fix = ("TrainingArguments(..., use_cpu=True)   # or --use_cpu for HF example scripts "
               "(run_mlm.py, run_clm.py, trl sft.py)")
    else:
        why = "accelerate only enables DDP on GPU when LOCAL_RANK is set, which hand-set environments (mp.spawn) do not do."
        fix = _TORCHRUN_FIX.format(n=world)
    yield error(
        f"Trainer is not distributed (parallel_mode={mode}, world_size={t_world}) in a job of {world} ranks",
        detail=(f"This process is one of {world} ranks, but TrainingArguments set itself up as "
                f"parallel_mode={mode} with world_size={t_world}, so the Trainer {how}: "
                f"{world}x the work and no gradient averaging. " + why),
        fix=fix,
        subjects=["arg:parallel_mode", "arg:world_size", "WORLD_SIZE", "LOCAL_RANK"] + (["arg:use_cpu"] if cpu_host else [])
        + rank_subject(snap),
        evidence={"parallel_mode": mode, "trainer_world_size": t_world, "WORLD_SIZE": world, "n_gpu": n_gpu,
                  "LOCAL_RANK": env_of(snap).get("LOCAL_RANK")},
    )


@check("RT002", "every-rank-local-zero", family="launcher", needs=("runtime_trainer",), catalogue=("A1",))
def every_rank_local_zero(snap):
    """This rank believes it is local process 0: "main process only" work runs on every rank.

    What it checks
        LOCAL_RANK is unset, the Trainer is distributed, and this process has `process_index > 0`
        but `local_process_index == 0`.

    Why it matters
        The static check (launcher family) sees LOCAL_RANK missing; this is the consequence,
        measured inside the run. accelerate falls back to local process 0 for every rank, so
        `main_process_first(local=True)`, dataset caching, logging and `should_save` with
        save_on_each_node all run on every rank at once: duplicated logs, racing cache writes and,
        on GPU, every rank on cuda:0. See transformers `training_args.py` `local_process_index`.

    Example
        mp.spawn with RANK=1, WORLD_SIZE=2 set by hand: args.process_index=1, local_process_index=0.

    Fix
        Launch with torchrun, or set LOCAL_RANK (and LOCAL_WORLD_SIZE) in each spawned process
        before creating TrainingArguments.
    """
    args = trainer_args(snap)
    if not args.get("devices_set_up") or env_of(snap).get("LOCAL_RANK") is not None:
        return
    pi, lpi = args.get("process_index"), args.get("local_process_index")
    if args.get("parallel_mode") != "distributed" or not isinstance(pi, int) or pi <= 0 or lpi != 0:
        return
    yield warning(
        f"rank {pi} thinks it is local process 0 (LOCAL_RANK is unset)",
        detail=(f"TrainingArguments reports process_index={pi} but local_process_index=0, because LOCAL_RANK "
                "was never set. Work meant for one process per node (logging, dataset preprocessing under "
                "main_process_first(local=True), saving with save_on_each_node) runs on every rank."),
        fix=_TORCHRUN_FIX.format(n=args.get("world_size") or world_size(snap)),
        subjects=[f"rank:{pi}", "LOCAL_RANK", "arg:local_process_index"],
        evidence={"process_index": pi, "local_process_index": lpi, "LOCAL_RANK": None},
    )


@check("RT003", "rank-started-by-mp-spawn", family="launcher", needs=("runtime",), reads=("runtime_data",),
       catalogue=("A5",), sharpens=("A5",))
def rank_started_by_mp_spawn(snap):
    """This rank was started by torch.multiprocessing.spawn, not by a launcher: a note, a warning only
    when its DataLoader spawns workers because of it.

    What it checks
        The process's own command line (`spawn_main`) or multiprocessing parent says it was created
        by multiprocessing's spawn, and it is one rank of several (WORLD_SIZE > 1).

    Why it matters
        mp.spawn with its own init_method (`tcp://`, `--dist-url`) or MASTER_* is a supported way to
        start ranks: alone it is a note (what a launcher would add: OMP_NUM_THREADS, LOCAL_RANK, an
        elastic error file, restarts). The static check (catalogue A5) infers a hand-set environment
        from the variables; this one sees the process itself. Inside preflight its note is folded into
        the static finding when that one fires; its warning is kept beside it (the spawned workers are
        a fact the static finding lacks). The start method is inherited: when this rank's DataLoader
        has workers and no multiprocessing_context of its own, they are spawned too (the dataset is pickled into
        each worker and `__main__` is re-imported at each epoch's start unless persistent_workers):
        a DataLoader whose workers are spawned makes it a warning. Thread oversubscription (RT004), every rank believing it is local
        process 0 (RT002) and a Trainer that trains alone (RT001) have their own checks. See
        pytorch/pytorch#47587, facebookresearch/dinov2#345, Lightning-AI/pytorch-lightning PR#2115.

    Example
        torch.multiprocessing.spawn(train, args=(world_size, dataset, model), nprocs=world_size) with
        DataLoader(dataset, num_workers=4) in `train` (warning); without workers (note).

    Fix
        Move the body of `train` under `if __name__ == "__main__":`, read RANK/LOCAL_RANK from the
        environment, and run `torchrun --nproc-per-node N train.py`; or keep mp.spawn and give the
        DataLoader `multiprocessing_context="fork"` (no CUDA in the parent before it) or
        `persistent_workers=True`.
    """
    r = rt(snap)
    if r.get("started_by") != "multiprocessing.spawn" or world_size(snap) <= 1:
        return
    n = world_size(snap)
    n_workers, method = workers(snap)
    harm = n_workers > 0 and method == "spawn"
    evidence = {"started_by": r.get("started_by"), "process_name": r.get("mp_process_name"),
                "start_method": r.get("start_method"), "world_size": n, "dataloader_workers": n_workers,
                "worker_start_method": method}
    title = f"this rank was started by torch.multiprocessing.spawn ({r.get('mp_process_name')}), not by a launcher"
    if harm:
        # a fact the static A5 finding (ENV005: the variables set by hand) does not hold: preflight keeps this
        # warning beside it instead of folding it (fold_sharpened reads `beyond_static`)
        evidence["beyond_static"] = f"its DataLoader's {n_workers} workers are spawned"
        yield warning(
            title + f": its DataLoader spawns {n_workers} workers",
            detail=(f"One of {n} ranks, created by multiprocessing's spawn. Its start method is "
                    f"'{r.get('start_method')}', so its DataLoader's {n_workers} workers are spawned as well: the "
                    "dataset and collate function are pickled into each worker, and the main module is re-imported "
                    "in each. Under a launcher they would be forked."),
            fix=_TORCHRUN_FIX.format(n=n) + "   # or DataLoader(..., multiprocessing_context=\"fork\")",
            subjects=["WORLD_SIZE"], evidence=evidence,
        )
        return
    yield info(
        title,
        detail=(f"One of {n} ranks, created by multiprocessing's spawn: a supported start. No launcher set "
                "OMP_NUM_THREADS or LOCAL_RANK, and nothing restarts a rank that dies; its DataLoader would spawn "
                "its workers (none now)."),
        fix=_TORCHRUN_FIX.format(n=n) + "   # only if you want what a launcher adds",
        subjects=["WORLD_SIZE"], evidence=evidence,
    )


@check("RT004", "torch-threads-oversubscribed", family="launcher", needs=("runtime",), catalogue=("A7",),
       sharpens=("A7",))
def torch_threads_oversubscribed(snap):
    """Intra-op threads per rank times ranks on this host exceed the usable CPUs.

    What it checks
        `torch.get_num_threads()` as the training process really runs it (after accelerate or the
        user changed it), times the number of ranks on this host, against the CPUs this process may
        use (affinity and cgroup quota).

    Why it matters
        The static check (catalogue A7) predicts threads from OMP_NUM_THREADS; this one reads the
        thread count in force, so it also catches torch.set_num_threads() calls and libraries that
        changed it. Inside preflight it is folded into the static finding when that one fires. With
        OMP_NUM_THREADS unset accelerate calls torch.set_num_threads(cores / local ranks) but, under
        a hand-set environment, believes there is one local rank. We measured 2 ranks x 2 threads on
        2 cores: 53-57 ms steps against 16 ms with one thread per rank. See pytorch/pytorch#85604.

    Example
        mp.spawn of 2 ranks on 2 cores with OMP_NUM_THREADS unset: each rank runs 2 threads.

    Fix
        export OMP_NUM_THREADS=<usable cores / ranks per host> (torchrun sets 1 when nproc > 1).
    """
    threads = (rt(snap).get("threads") or {}).get("torch_num_threads")
    cpus = usable_cpus(snap)
    n_local, how = local_ranks(snap)
    if not threads or not cpus or n_local <= 1 or threads * n_local <= cpus:
        return
    per = max(1, cpus // n_local)
    yield warning(
        f"{n_local} ranks x {threads} torch threads = {threads * n_local} threads on {cpus} usable CPUs",
        detail=(f"Each rank on this host runs torch ops on {threads} threads ({how}); together they ask for "
                f"{threads * n_local} threads on {cpus} CPUs, so they preempt each other inside every matmul. "
                f"OMP_NUM_THREADS is {rt(snap).get('threads', {}).get('omp_num_threads_env')!r}."),
        fix=f"export OMP_NUM_THREADS={per}   # before starting the ranks; or torch.set_num_threads({per}) in each",
        subjects=["OMP_NUM_THREADS"],
        evidence={"torch_num_threads": threads, "local_ranks": n_local, "local_ranks_from": how,
                  "usable_cpus": cpus},
    )


@check("RT005", "cuda-device-not-local-rank", family="launcher", needs=("runtime",), catalogue=("A10",))
def cuda_device_not_local_rank(snap):
    """CUDA's current device is not this rank's local GPU.

    What it checks
        CUDA is initialised, several GPUs are visible, and `torch.cuda.current_device()` differs
        from LOCAL_RANK (or the Trainer's local_process_index).

    Why it matters
        Without `torch.cuda.set_device(local_rank)` every rank creates a context (0.5-1 GB) and
        allocates on GPU 0, which runs out of memory or makes NCCL hang. See pytorch/examples#969
        and NVIDIA/apex#222.

    Example
        A custom loop that calls init_process_group("nccl") and `.cuda()` without set_device.

    Fix
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))   # first thing, before any CUDA call
    """
    cuda = rt(snap).get("cuda") or {}
    if not cuda.get("initialized") or (cuda.get("device_count") or 0) <= 1:
        return
    local = env_int(env_of(snap), "LOCAL_RANK")
    if local is None:
        local = trainer_args(snap).get("local_process_index")
    current = cuda.get("current_device")
    if local is None or current is None or current == local:
        return
    yield warning(
        f"this rank (local rank {local}) uses cuda:{current}",
        detail=(f"CUDA is initialised with current device {current}, but this is local rank {local}. Unless you "
                "chose devices on purpose, every rank is allocating on the same GPU."),
        fix="torch.cuda.set_device(int(os.environ['LOCAL_RANK']))   # before any CUDA call",
        subjects=[f"gpu:{current}", "LOCAL_RANK"] + rank_subject(snap),
        evidence={"current_device": current, "local_rank": local, "device_count": cuda.get("device_count")},
    )
