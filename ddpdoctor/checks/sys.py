"""Host checks: /dev/shm (catalogue C5/E2), the open-file limit (E8) and the locked-memory limit RDMA needs."""
from __future__ import annotations

from ddpdoctor.model import error, info, warning
from ddpdoctor.model.registry import check
from ddpdoctor.facts.env import env_of, lint_facts
from ddpdoctor.facts.net import nccl_ib_wanted
from ddpdoctor.facts.ranks import local_ranks, threads_per_rank

MiB = 1024 ** 2
GiB = 1024 ** 3
SHM_MIN = 1 * GiB
SHM_PER_RANK = 512 * MiB


def _fmt(n: int) -> str:
    return f"{n / GiB:.1f} GiB" if n >= GiB else f"{n / MiB:.0f} MiB"


@check("SYS001", "shm-too-small", family="system", needs=("host", "launcher"), catalogue=("C5", "E2"))
def shm_too_small(snap):
    """/dev/shm is under 1 GiB, too small for the ranks on this host, or not writable.

    What it checks
        The size and free space of /dev/shm against 1 GiB and against 512 MiB per local rank, and
        whether this user may create files in it (its mode, os.access W_OK|X_OK).
        Docker gives containers 64 MB unless started with `--shm-size` or `--ipc=host`.
        Where GPU014 already reports /dev/shm as too small for NCCL, this check stays silent; so
        does it off Linux (a macOS laptop has no /dev/shm, and needs none).

    Why it matters
        DataLoader workers hand batches to the main process through shared memory: when it runs
        out, workers die with "ERROR: Unexpected bus error encountered in worker. This might be
        caused by insufficient shared memory (shm)" (nianticlabs/simplerecon#3). NCCL's SHM
        transport also allocates its buffers there: "NCCL WARN Call to posix_fallocate failed : No
        space left on device" (NVIDIA/nccl#342, #290).

    Example
        docker run --gpus all image python train.py   # 64 MB /dev/shm

    Fix
        docker run --shm-size=16g ... (or --ipc=host); on Kubernetes mount an emptyDir with
        medium: Memory at /dev/shm.
    """
    host = snap["host"]
    if host.get("os") not in (None, "Linux"):
        return  # /dev/shm is Linux's; macOS and Windows share memory differently (and have no NCCL)
    shm = host.get("shm") or {}
    if not shm.get("exists"):
        if shm:
            yield warning("/dev/shm is missing", detail="DataLoader workers and NCCL's SHM transport need it.",
                          fix="mount -t tmpfs -o size=16g tmpfs /dev/shm   # or docker run --shm-size=16g",
                          subjects=["path:/dev/shm"], evidence=shm)
        return
    if shm.get("writable") is False:
        mode = shm.get("mode")
        yield error("/dev/shm is not writable by this user" + (f" (mode {mode})" if mode else ""),
                    detail=("NCCL's SHM transport creates /dev/shm/nccl-XXXXXX (mkstemp in ncclOsShmOpen, NVIDIA/nccl "
                            "src/os/linux.cc@5067397c; shm_open in NCCL 2.7) and fails: 'Call to shm_open failed : "
                            "Permission denied', 'Error while creating shared memory segment', then 'unhandled system "
                            "error' in every rank on this host (NVIDIA/nccl#328). DataLoader workers cannot share "
                            "batches either."),
                    fix="sudo chmod 1777 /dev/shm   # the usual mode of the tmpfs: everyone may create, only owners delete",
                    subjects=["path:/dev/shm"], evidence=shm)
        return
    size, free = shm.get("size_bytes") or 0, shm.get("free_bytes") or 0
    nlocal, _src = local_ranks(snap)
    need = max(SHM_MIN, nlocal * SHM_PER_RANK)
    if size >= need and free >= min(need, SHM_MIN) // 2:
        return
    from ddpdoctor.facts.gpu import nccl_shm_short

    if nccl_shm_short(snap):
        return  # GPU014 reports this /dev/shm, with the GPUs that need it
    container = host.get("container")
    why = f" (the {container} default)" if container and size <= 64 * MiB else ""
    yield warning(
        f"/dev/shm is {_fmt(size)}{why} with {_fmt(free)} free; {nlocal} local rank(s) want at least {_fmt(need)}",
        detail=("DataLoader workers pass batches through /dev/shm and die with \"Unexpected bus error ... insufficient "
                "shared memory\" when it fills; NCCL's SHM transport needs it too."),
        fix="docker run --shm-size=16g ...   # or --ipc=host; on Kubernetes an emptyDir with medium: Memory at /dev/shm",
        subjects=["path:/dev/shm"],
        evidence={"size_bytes": size, "free_bytes": free, "local_ranks": nlocal, "wanted_bytes": need,
                  "container": container},
    )


@check("SYS002", "open-file-limit-low", family="system", needs=("host",), catalogue=("E8",))
def open_file_limit_low(snap):
    """The open-file limit is low for DataLoader workers sharing tensors by file descriptor.

    What it checks
        RLIMIT_NOFILE (the soft `ulimit -n`) against 4096, when torch.multiprocessing uses the
        file_descriptor sharing strategy (the Linux default).

    Why it matters
        Each tensor a worker sends holds a file descriptor until it is received; with many workers
        and batches in flight the process hits the limit: "RuntimeError: received 0 items of
        ancdata" or "Too many open files" (pytorch/pytorch#973, Project-MONAI/MONAI#701).

    Example
        ulimit -n 1024 (a common default) with num_workers=8.

    Fix
        ulimit -n 65536 (up to the hard limit), or in the script:
        torch.multiprocessing.set_sharing_strategy("file_system").
    """
    host = snap["host"]
    lim = (host.get("rlimits") or {}).get("RLIMIT_NOFILE") or {}
    soft, hard = lim.get("soft"), lim.get("hard")
    if soft is None or soft >= 4096 or host.get("default_sharing_strategy") != "file_descriptor":
        return
    target = 65536 if hard is None else min(hard, 65536)
    fix = (f"ulimit -n {target}" if target > soft else
           "sudo sh -c 'echo \"* soft nofile 65536\\n* hard nofile 65536\" >> /etc/security/limits.conf'   # hard limit is low too")
    fix += '\n# or in Python: torch.multiprocessing.set_sharing_strategy("file_system")'
    yield warning(f"open-file limit (ulimit -n) is {soft} (hard {hard if hard is not None else 'unlimited'}); "
                  "DataLoader workers can exhaust it: \"Too many open files\"",
                  detail=("torch shares worker tensors through file descriptors by default; with several workers the "
                          "limit is reached and loading fails with \"received 0 items of ancdata\" or \"OSError: "
                          "[Errno 24] Too many open files\" (EMFILE, glibc's text: data/errno_texts.json)."),
                  fix=fix, subjects=[], evidence={"soft": soft, "hard": hard,
                                                  "sharing_strategy": host.get("default_sharing_strategy")})


MEMLOCK_MIN = 1 * GiB


@check("SYS003", "rdma-memlock-limit-low", family="system", needs=("host", "pci"), reads=("env",))
def rdma_memlock_limit_low(snap):
    """The locked-memory limit is too low for NCCL's InfiniBand / RoCE transport.

    What it checks
        RLIMIT_MEMLOCK (the soft `ulimit -l`) when this host has RDMA devices (/sys/class/infiniband)
        that NCCL will use (NCCL_IB_DISABLE not set, NCCL_NET not Socket): a finite limit below
        1 GiB is reported, unless the process holds CAP_IPC_LOCK, which lifts the limit.

    Why it matters
        NCCL's IB transport registers its buffers with the HCA (ibv_reg_mr, src/misc/ibvwrap.cc),
        and the kernel pins registered memory against RLIMIT_MEMLOCK (drivers/infiniband/core/umem.c,
        ib_umem_get: -ENOMEM past the limit without CAP_IPC_LOCK). With Docker's or systemd's
        default (64 KiB to 8 MiB) NCCL fails at init with "NCCL WARN Call to ibv_reg_mr failed
        with error Cannot allocate memory" (NVIDIA/nccl-tests#206); NCCL's troubleshooting guide
        asks for `ulimit -l unlimited`.

    Example
        docker run --gpus all --device /dev/infiniband ... (memlock left at the default)

    Fix
        docker run --ulimit memlock=-1 ...; on bare metal `* soft memlock unlimited` and `* hard memlock
        unlimited` in /etc/security/limits.conf (and LimitMEMLOCK=infinity for slurmd/systemd units).
    """
    host = snap["host"]
    lim = (host.get("rlimits") or {}).get("RLIMIT_MEMLOCK") or {}
    soft, hard = lim.get("soft"), lim.get("hard")
    pci = snap.get("pci") or {}
    if not isinstance(soft, int) or soft >= MEMLOCK_MIN or host.get("cap_ipc_lock") is True:
        return
    if not nccl_ib_wanted(env_of(snap), pci):
        return
    rdma = pci.get("rdma_devices") or []
    yield warning(f"locked-memory limit is {_fmt(soft) if soft >= MiB else f'{soft // 1024} KiB'} (ulimit -l) with "
                  f"RDMA devices ({', '.join(rdma[:4])}{', ...' if len(rdma) > 4 else ''}) that NCCL will use",
                  detail=("NCCL's IB/RoCE transport registers its buffers with the HCA, and the kernel pins registered "
                          "memory against RLIMIT_MEMLOCK (drivers/infiniband/core/umem.c, ib_umem_get): past the limit "
                          "NCCL fails at init with \"Call to ibv_reg_mr failed with error Cannot allocate memory\" "
                          "(src/misc/ibvwrap.cc). NCCL's troubleshooting guide asks for an unlimited limit"
                          + (" (the hard limit is unlimited, so `ulimit -l unlimited` in the job script is enough)."
                             if hard is None else f"; the hard limit is {_fmt(hard) if hard >= MiB else hard}, so root "
                             "must raise it.")),
                  fix=("ulimit -l unlimited   # in the job script, before the launcher" if hard is None else
                       "docker run --ulimit memlock=-1 ...   # or '* soft memlock unlimited' and '* hard memlock unlimited' "
                       "in /etc/security/limits.conf (LimitMEMLOCK=infinity for slurmd)"),
                  subjects=[f"rdma:{d}" for d in rdma[:8]],
                  evidence={"soft": soft, "hard": hard, "rdma_devices": rdma, "cap_ipc_lock": host.get("cap_ipc_lock"),
                            "NCCL_IB_DISABLE": env_of(snap).get("NCCL_IB_DISABLE"), "NCCL_NET": env_of(snap).get("NCCL_NET")})


MEM_PER_RANK = 4 * GiB  # a guess at what one training rank and its DataLoader workers hold in host memory


@check("SYS004", "container-memory-limit-low", family="system", needs=("host", "launcher"), reads=("env", "launch"))
def container_memory_limit_low(snap):
    """The cgroup (container) memory limit is small for the ranks on this host.

    What it checks
        The memory limit of this process's cgroup (v2 memory.max, v1 memory.limit_in_bytes;
        `docker run -m`, a Kubernetes memory limit, a Slurm job's cgroup), read as a fact: the
        smallest limit along the process's cgroup and its ancestors (limits are hierarchical), with
        the file it came from, when it is below the host's memory and below 4 GiB per local rank (a
        rough figure for one rank with its DataLoader workers, which the finding says is a guess). It
        also says when /dev/shm is larger than the limit. In a container whose cgroup files cannot be
        read, the limit is reported as unknown (a note), never assumed absent. Where no limit binds,
        the host's own RAM (MemTotal) against the same 4 GiB guess for each of two or more local ranks
        that the launch declares (LOCAL_WORLD_SIZE, the launch command's process count).
        When the checkpoint the launch loads is known (the model option's directory, or its Hub cache
        snapshot: the size of its weight files beside config.json), the local ranks x that size
        against the memory that binds (the cgroup's limit, else MemAvailable) instead of the guess:
        every process loads the whole checkpoint into CPU memory unless loading is left to one
        (accelerate FSDP's cpu_ram_efficient_loading, off by default; DeepSpeed ZeRO-3's zero.Init).

    Why it matters
        Inside the container, free and psutil show the host's memory, but the kernel's OOM killer
        acts on the cgroup's limit, and tmpfs pages in /dev/shm (DataLoader batches, NCCL buffers)
        are charged to it too. When the ranks and their workers pass the limit, one is killed at
        random: "DataLoader worker (pid(s) ...) exited unexpectedly" or a rank gone with signal 9,
        at random steps (researchmm/Stark#7).

    Example
        docker run -m 16g --gpus all ... torchrun --nproc-per-node 8 train.py   # 2 GiB a rank

    Fix
        docker run -m <more>g (or raise the pod's memory limit); else fewer DataLoader workers.
    """
    host = snap["host"]
    cg = host.get("cgroup") or {}
    limit = cg.get("memory_max_bytes")
    if cg.get("memory_max_state") == "unknown" and host.get("container"):
        yield info(f"the {host.get('container')} container's memory limit is unknown: no cgroup memory file could be read",
                   detail=("Neither cgroup v2 memory.max nor v1 memory.limit_in_bytes was readable along this process's "
                           "cgroup path, so whether a limit below the host's memory binds the ranks is not known (not "
                           "the same as no limit)."),
                   fix="cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null; "
                       "docker inspect -f '{{.HostConfig.Memory}}' <container>   # on the host",
                   subjects=["cgroup:memory.max"], evidence={"memory_max_state": "unknown", "container": host.get("container")})
        return
    total = (host.get("memory") or {}).get("total_bytes")
    if not isinstance(limit, int) or isinstance(limit, bool) or limit <= 0 or (isinstance(total, int) and limit >= total):
        copies = list(_checkpoint_copies_past_memory(snap, host, None))
        yield from copies or _host_memory_low(snap, host, total)  # no limit binds: the host's own RAM does
        return
    copies = list(_checkpoint_copies_past_memory(snap, host, limit))
    if copies:
        yield from copies
        return
    nlocal, source = local_ranks(snap)
    need = nlocal * MEM_PER_RANK
    if limit >= need:
        return
    shm = (host.get("shm") or {}).get("size_bytes")
    over = isinstance(shm, int) and shm > limit
    where = f"the {host.get('container')} container's" if host.get("container") else "this cgroup's"
    yield warning(
        f"{where} memory limit is {_fmt(limit)} for {nlocal} local rank(s) ({_fmt(limit // max(1, nlocal))} each)",
        detail=("free and psutil show the host's memory" + (f" ({_fmt(total)})" if isinstance(total, int) else "")
                + ", but the OOM killer acts on the cgroup's limit: a rank or DataLoader worker past it is killed "
                "(\"DataLoader worker ... exited unexpectedly\", signal 9). The 4 GiB a rank wanted here is a guess, "
                "not a measurement of this job." + (f" /dev/shm ({_fmt(shm)}) is larger than the limit, and what is "
                                                   "written there is charged to it." if over else "")
                + f" Local ranks: {source}."),
        fix="docker run -m <at least " + _fmt(need) + "> ...   # or the pod's resources.limits.memory; "
            "else fewer DataLoader workers (num_workers)",
        subjects=["cgroup:memory.max"],
        evidence={"memory_max_bytes": limit, "memory_max_from": cg.get("memory_max_from"), "host_total_bytes": total,
                  "local_ranks": nlocal,
                  "wanted_bytes_guess": need, "shm_size_bytes": shm, "container": host.get("container")},
    )


def _checkpoint_copies_past_memory(snap, host, limit):
    """SYS004 when the checkpoint the launch loads is known (its weight files beside its config.json): every local
    rank loads the whole of it into CPU memory before moving it to the GPU (data/precision_calls.json
    model_config.weights: accelerate's cpu_ram_efficient_loading, off by default, is what leaves it to one process),
    so ranks x its size against the memory that binds: the cgroup's limit, else MemAvailable (else MemTotal)."""
    from ddpdoctor.facts.launch import model_config_table, model_weights  # noqa: PLC0415
    from ddpdoctor.facts.env import truthy  # noqa: PLC0415

    weights = model_weights(snap)
    if not weights:
        return
    rule = model_config_table()["weights"]
    env = env_of(snap)
    if any(truthy(env.get(k)) for k in rule["sharded_loading_env"]):
        return
    size, files, option, path = max(weights, key=lambda w: w[0])
    reading = local_ranks(snap)
    nlocal = max(1, reading.value or 1)
    mem = host.get("memory") or {}
    if limit is not None:
        budget, what = limit, "the cgroup's memory limit"
    elif isinstance(mem.get("available_bytes"), int) and mem["available_bytes"] > 0:
        budget, what = mem["available_bytes"], "this host's available memory (MemAvailable)"
    elif isinstance(mem.get("total_bytes"), int) and mem["total_bytes"] > 0:
        budget, what = mem["total_bytes"], "this host's memory (MemTotal)"
    else:
        return
    need = nlocal * size
    if need <= budget:
        return
    yield warning(
        f"{nlocal} local rank(s) each loading the {_fmt(size)} checkpoint ({path}) need {_fmt(need)} of host memory; "
        f"{what} is {_fmt(budget)}",
        detail=(f"The model option {option} names a checkpoint of {files} weight file(s), {_fmt(size)} on disk. Unless "
                "loading is sharded or left to one process (accelerate FSDP's cpu_ram_efficient_loading, "
                "FSDP_CPU_RAM_EFFICIENT_LOADING=true: 'only the first process loads the pretrained model checkpoint'; "
                "DeepSpeed ZeRO-3's zero.Init), every rank holds the whole checkpoint in CPU memory before it moves to "
                "the GPU, and past that memory the kernel's OOM killer ends one ('Killed', signal 9, exit code -9). "
                "The figure is the weights alone, at their size on disk: a lower bound. "
                f"Local ranks: {reading.source}."),
        fix=("FSDP_CPU_RAM_EFFICIENT_LOADING=true (accelerate FSDP, with sync_module_states) or DeepSpeed ZeRO-3 "
             "(zero.Init) so that one process loads the checkpoint; else fewer ranks per host or a host with more RAM"),
        subjects=["path:/proc/meminfo", f"arg:{str(option).lstrip('-')}"],
        evidence={"weights_bytes": size, "weights_files": files, "model": path, "local_ranks": nlocal,
                  "needed_bytes": need, "budget_bytes": budget, "budget": what})


def _host_memory_low(snap, host, total):
    """SYS004 on a host whose own RAM binds (no cgroup limit below it): MemTotal under MEM_PER_RANK (a guess, said
    so) for each of two or more local ranks whose count the launch declares."""
    if not isinstance(total, int) or isinstance(total, bool) or total <= 0:
        return
    reading = local_ranks(snap)
    declared, source = reading.declared(), reading.source
    if not declared or declared < 2 or total >= declared * MEM_PER_RANK:
        return
    avail = (host.get("memory") or {}).get("available_bytes")
    yield warning(
        f"this host's memory is {_fmt(total)} for {declared} local ranks ({_fmt(total // declared)} each)",
        detail=("No cgroup limit binds, so the host's RAM does: each rank holds its own copy of torch, the CUDA context's "
                "host side, the model and its optimizer state until they move to the GPU, and its DataLoader workers "
                "theirs; past the RAM the kernel's OOM killer ends one ('Killed', signal 9, or 'DataLoader worker "
                "... exited unexpectedly'). The 4 GiB a rank wanted here is a guess, not a measurement of this job"
                + (f"; {_fmt(avail)} is free now" if isinstance(avail, int) else "") + f". Local ranks: {source}."),
        fix="fewer ranks per host or fewer DataLoader workers (num_workers); or a host with more RAM; measure one rank's "
            "RSS first: ps -o rss= -p <pid>",
        subjects=["path:/proc/meminfo"],
        evidence={"host_total_bytes": total, "available_bytes": avail, "local_ranks": declared,
                  "wanted_bytes_guess": declared * MEM_PER_RANK},
    )


LOCK_FRESH_S = 600  # younger than this, a build may be running now


@check("SYS006", "torch-extension-build-locked", family="system", needs=("host",))
def torch_extension_build_locked(snap):
    """A lock file is left in torch's JIT extension build directory: loading that extension waits forever.

    What it checks
        `lock` files under the directory torch.utils.cpp_extension builds into, found as torch finds
        it: TORCH_EXTENSIONS_DIR/<name>; else the user's cache directory (torch 1.6 and later:
        ~/.cache/torch_extensions/py<XY>_<cu|rocm|cpu>/<name> on Linux, ~/Library/Caches/torch_extensions
        on macOS, %LOCALAPPDATA%\\torch_extensions\\torch_extensions\\Cache on Windows); before 1.6
        <tempdir>/torch_extensions/<name>. With their age. A lock younger than 10 minutes may belong
        to a build running now and is only noted.

    Why it matters
        torch guards each extension build with a FileBaton on that file (cpp_extension.py,
        `FileBaton(os.path.join(build_directory, 'lock'))`), and every other process loops while the
        file exists (torch/utils/file_baton.py, `while os.path.exists(self.lock_file_path)`). A build
        killed midway (Ctrl-C, OOM, a job time limit) never removes it, so the next run of any
        script that JIT-loads the extension (DeepSpeed ops, fused kernels) hangs at import on every
        rank, without an error (sunset1995/torch_efficient_distloss#3).

    Example
        ~/.cache/torch_extensions/py310_cu121/fused_adam/lock, two days old.

    Fix
        rm ~/.cache/torch_extensions/py310_cu121/fused_adam/lock   # when no build is running
    """
    ext = snap["host"].get("torch_extensions") or {}
    locks = [l for l in (ext.get("locks") or []) if isinstance(l, dict) and l.get("path")]
    if not locks:
        return
    root = ext.get("path") or "~/.cache/torch_extensions"
    stale = [l for l in locks if not isinstance(l.get("age_s"), int) or l["age_s"] >= LOCK_FRESH_S]
    fresh = [l for l in locks if l not in stale]
    names = ", ".join(l["path"] for l in (stale or fresh)[:5])
    paths = " ".join(f"{root}/{l['path']}" for l in (stale or fresh)[:5])
    ages = [l.get("age_s") for l in stale]
    age_text = ("" if not stale else
                " (age not recorded: if a build is running right now, it is its own lock)" if None in ages else
                f" (the newest {min(ages) // 60} min old)")
    make = warning if stale else info
    yield make(f"torch extension build lock(s) left in {root}: {names}",
               detail=f"torch waits, without a timeout, while an extension's build lock exists "
                      f"(torch/utils/file_baton.py, FileBaton.wait); a build that was killed leaves it, and every later "
                      f"load of that extension hangs at import on every rank{age_text}."
                      + (" A lock younger than 10 minutes may be a build in progress." if fresh else ""),
               fix=f"rm {paths}   # when no build of these extensions is running",
               subjects=[f"path:{root}/{l['path']}" for l in (stale or fresh)[:8]],
               evidence={"root": root, "locks": locks})


OTHER_THREADS_PER_RANK = 16  # a floor: torch's inter-op pool, NCCL's proxy and socket threads, c10d's watchdog and
# heartbeat monitor, the CUDA runtime's threads, the DataLoader's pin-memory thread, Python's own


# A DataLoader worker process runs at least its main thread (torch.set_num_threads(1): pytorch/pytorch
# torch/utils/data/_utils/worker.py @00a7ccaa _base_worker_loop) and multiprocessing.Queue's feeder thread.
THREADS_PER_LOADER_WORKER = 2


def _loader_workers(snap):
    """The largest literal DataLoader num_workers of the `check --script` scripts (lint.scriptfacts), else the count the
    training program's command line asks for (--num_workers 8: facts.launch loader_workers_asked), or None."""
    facts = lint_facts(snap)
    w = facts.get("loader_workers")
    count = w.get("count") if isinstance(w, dict) else None
    if isinstance(count, int) and not isinstance(count, bool) and count > 0:
        return count, w
    from ddpdoctor.facts.launch import loader_workers_asked

    asked = loader_workers_asked(snap)
    return (asked[0], {"written": asked[1]}) if asked else (None, None)


@check("SYS005", "thread-limit-low", family="system", needs=("host", "launcher"), reads=("env", "lint"))
def thread_limit_low(snap):
    """The per-user process limit (ulimit -u) or the cgroup's task limit leaves too few threads for the ranks.

    What it checks
        RLIMIT_NPROC (the soft `ulimit -u`; root is exempt) and the cgroup's pids.max less the tasks it
        already holds (pids.current), against a floor of the threads the ranks on this host will start:
        local ranks x (their OpenMP threads: OMP_NUM_THREADS, else one per usable core, + 16 others:
        torch's inter-op pool, NCCL's proxy and socket threads, c10d's watchdog, CUDA's, the
        pin-memory thread). DataLoader workers come on top: counted when `check --script` reads a
        literal num_workers in the script, or the training program's command line gives one (--num_workers,
        --workers: data/loader_workers.json) (each worker a process of at least 2 threads, per loader per rank).

    Why it matters
        On Linux both limits count threads, not processes (setrlimit(2): "the number of extant process
        (or, more precisely on Linux, threads) for the real user ID"; cgroup pids: every task). At the
        limit pthread_create and fork fail with EAGAIN: "libgomp: Thread creation failed: Resource
        temporarily unavailable" at import (pytorch/pytorch#193859), "RuntimeError: can't start new
        thread", or DataLoader workers that cannot start.

    Example
        ulimit -u 400 on a 192-core host, 4 ranks with OMP_NUM_THREADS unset.

    Fix
        ulimit -u unlimited (or a `nproc` line in /etc/security/limits.conf); raise the pod's pids limit
        (the kubelet's podPidsLimit) or docker run --pids-limit; or export OMP_NUM_THREADS to a few threads.
    """
    host = snap["host"]
    usable = host.get("usable_cpus") or host.get("affinity_count") or host.get("cpu_count") or 1
    nlocal, nlocal_src = local_ranks(snap)
    per_rank, per_rank_src = threads_per_rank(snap, usable, nlocal)
    workers, wfact = _loader_workers(snap)
    need = nlocal * (per_rank + OTHER_THREADS_PER_RANK + (workers or 0) * THREADS_PER_LOADER_WORKER)
    limits = []
    lim = (host.get("rlimits") or {}).get("RLIMIT_NPROC") or {}
    soft = lim.get("soft")
    if isinstance(soft, int) and host.get("uid") != 0 and soft < need:
        limits.append((f"ulimit -u is {soft}", soft, "ulimit -u unlimited   # or `<user> soft nproc unlimited` in "
                                                    "/etc/security/limits.conf"))
    cg = host.get("cgroup") or {}
    pmax, pcur = cg.get("pids_max"), cg.get("pids_current")
    if isinstance(pmax, int):
        room = pmax - (pcur if isinstance(pcur, int) else 0)
        if room < need:
            limits.append((f"the cgroup's task limit pids.max is {pmax}"
                           + (f" with {pcur} tasks already in it" if isinstance(pcur, int) else ""), room,
                           "docker run --pids-limit=-1 ...   # Kubernetes: raise the kubelet's podPidsLimit"))
    if not limits:
        return
    what, room, fix = min(limits, key=lambda x: x[1])
    omp_fix = ""
    if per_rank > 4:
        fewer = max(1, min(per_rank // 2, usable // max(1, nlocal)))
        omp_fix = f"\nexport OMP_NUM_THREADS={fewer}   # fewer OpenMP threads per rank"
    yield warning(
        f"{what}: room for {room} threads, and {nlocal} local rank(s) start at least {need}",
        detail=(f"Linux counts threads against both limits; at the limit thread creation fails with EAGAIN "
                f"(\"libgomp: Thread creation failed: Resource temporarily unavailable\", \"can't start new thread\"). "
                f"Estimate (a floor, a guess): {nlocal} rank(s) ({nlocal_src}) x ({per_rank} OpenMP threads "
                f"({per_rank_src}) + {OTHER_THREADS_PER_RANK} others"
                + (f" + {workers} DataLoader workers x {THREADS_PER_LOADER_WORKER} ("
                   + (wfact["written"] if wfact.get("written") else
                      f"{wfact.get('path')}:{wfact.get('line')} num_workers={workers}")
                   + ")); the user's other processes come on top."
                   if workers else "); DataLoader workers and the user's other processes come on top.")),
        fix=fix + omp_fix, subjects=[],
        evidence={"limits": [w for w, _, _ in limits], "room": room, "needed_at_least": need, "guess": True,
                  "local_ranks": nlocal, "threads_per_rank": per_rank, "rlimit_nproc": lim or None,
                  "loader_workers": workers,
                  "pids_max": pmax, "pids_current": pcur, "uid": host.get("uid")})


# Filesystems whose files several hosts share: Triton's cache put (a temp dir, os.replace, os.removedirs) races
# across hosts on them (triton-lang/triton#11512: EBUSY, FileNotFoundError; 'Stale file handle' on NFS).
NETWORK_FS = frozenset({"nfs", "nfs4", "lustre", "gpfs", "cifs", "smb3", "smbfs", "beegfs", "fuse.beegfs", "ceph",
                        "fuse.ceph", "glusterfs", "fuse.glusterfs", "wekafs", "fuse.sshfs", "panfs", "orangefs",
                        "fuse.juicefs", "fuse.s3fs", "fuse.gcsfuse"})


def _cache_key_without_arch(snap, tc, fstype):
    """SYS007's arm: a Triton that keys its cache without the GPU architecture, the cache serving several."""
    from ddpdoctor.facts.env import triton_cache_key_without_arch

    triton = triton_cache_key_without_arch(((snap.get("packages") or {}).get("versions")) or {})
    if not triton or not tc.get("path"):
        return
    devices = ((snap.get("gpus") or {}).get("devices")) or []
    ccs = sorted({tuple(d["cuda_capability"][:2]) for d in devices
                  if isinstance(d, dict) and isinstance(d.get("cuda_capability"), (list, tuple))
                  and len(d["cuda_capability"]) >= 2})
    mixed = len(ccs) > 1
    shared = fstype in NETWORK_FS
    if not (mixed or shared):
        return
    archs = ", ".join(f"sm_{a}{b}" for a, b in ccs)
    where = (f"this host's GPUs are of {len(ccs)} architectures ({archs})" if mixed else
             f"it is on {fstype} at {tc.get('mount_point')}, which other hosts share: their GPUs may be of another "
             f"architecture than this host's" + (f" ({archs})" if archs else ""))
    yield (warning if mixed else info)(
        f"Triton's kernel cache {tc.get('path')} is keyed without the GPU architecture ({triton}) and {where}",
        detail=("Before triton-lang/triton#1593 (first released in 2.1.0) the cache key of a compiled kernel holds its "
                "source, signature and options but not the compute capability: a kernel compiled on one architecture "
                "is loaded from the cache on another and fails with 'RuntimeError: Triton Error [CUDA]: device kernel "
                "image is invalid' (triton-lang/triton#1323: compiled on a V100, loaded on an A100)."
                + ("" if mixed else " Whether hosts with other GPUs use this directory is not known here.")),
        fix=("pip install -U 'triton>=2.1'   # keys its cache by architecture (or the torch release that pins it); "
             "until then: export TRITON_CACHE_DIR=/tmp/triton-cache-$USER-$(hostname)"
             + ("   # and one process per GPU architecture, or clear the cache when it changes" if mixed else "")),
        subjects=["triton", "TRITON_CACHE_DIR"],
        evidence={"triton": triton, "triton_cache": tc, "capabilities": [list(c) for c in ccs], "shared_fs": shared})


@check("SYS007", "triton-cache-on-network-fs", family="system", needs=("host", "launcher"), reads=("env", "lint"))
def triton_cache_on_network_fs(snap):
    """Triton's kernel cache is on a filesystem the job's hosts share.

    What it checks
        On a job across hosts, the filesystem under Triton's compiled-kernel cache: TRITON_CACHE_DIR,
        else $TRITON_HOME or the home directory + /.triton/cache (triton-lang/triton
        python/triton/runtime/cache.py @10852d2e), found in /proc/self/mountinfo. A network filesystem
        (NFS, Lustre, GPFS, CIFS, BeeGFS, Ceph, ...) is a warning when the user set TRITON_CACHE_DIR there
        or the script calls torch.compile (check --script), else a note. A custom TRITON_CACHE_MANAGER is
        left alone.

    Why it matters
        Triton writes each compiled kernel to a temporary directory and renames it into the cache
        (FileCacheManager.put: os.replace, os.removedirs). Ranks on several hosts compiling the same
        kernels into one shared directory race: 'OSError: [Errno 16] Device or resource busy',
        'FileNotFoundError' on files just published, 'Stale file handle' on NFS; one rank dies and the
        others wait for the watchdog (triton-lang/triton#11512; PrimeIntellect-ai/prime-rl#2305).

        Also a warning when the job's own variables put run-time compile caches on that mount
        (TRITON_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR, TORCH_EXTENSIONS_DIR, VLLM_CACHE_ROOT:
        data/jit_caches.json): a cache tree shared "to download once" puts every JIT cache of every
        host in one directory (a two-node vLLM with VLLM_CACHE_ROOT under an NFS-shared HF cache).

        Also, on any job: a Triton release that keys its cache without the GPU architecture (2.0.x and
        2.1.0 nightlies before triton-lang/triton#1593; data/jit_caches.json cache_key_without_arch)
        whose cache serves GPUs of several compute capabilities - this host's own (a warning) or, on a
        network filesystem, other hosts' (a note): a kernel compiled for one architecture is loaded on
        another, 'Triton Error [CUDA]: device kernel image is invalid' (triton-lang/triton#1323).

    Example
        2 nodes with the home directory on NFS, torch.compile(model), TRITON_CACHE_DIR unset.

    Fix
        export TRITON_CACHE_DIR=/tmp/triton-cache-$USER   # node-local, in the job script before the launcher
    """
    host = snap["host"]
    tc = host.get("triton_cache") or {}
    fstype = str(tc.get("fstype") or "").lower()
    if tc.get("manager"):
        return
    yield from _cache_key_without_arch(snap, tc, fstype)
    if fstype not in NETWORK_FS:
        return
    from ddpdoctor.facts.net import multi_node

    why = multi_node(snap)
    if not why:
        return
    facts = lint_facts(snap)
    compiles = facts.get("compiles") or []
    from ddpdoctor.facts.env import jit_caches_under

    # the compile caches the user's own variables put on that shared mount (data/jit_caches.json): TRITON_CACHE_DIR,
    # TORCHINDUCTOR_CACHE_DIR, TORCH_EXTENSIONS_DIR, VLLM_CACHE_ROOT under it say the job compiles into shared storage
    placed = jit_caches_under(env_of(snap), tc.get("mount_point"))
    set_there = tc.get("from") == "TRITON_CACHE_DIR" or any(v == "TRITON_CACHE_DIR" for v, _p, _w in placed)
    level = warning if (set_there or compiles or placed) else info
    where = "TRITON_CACHE_DIR" if set_there else ("$TRITON_HOME/.triton/cache" if tc.get("from") == "TRITON_HOME"
                                                  else "~/.triton/cache (the default)")
    others = [(v, p, w) for v, p, w in placed if v != "TRITON_CACHE_DIR"]
    yield level(
        f"Triton's kernel cache {tc.get('path')} ({where}) is on {fstype} at {tc.get('mount_point')}, shared by the "
        f"job's hosts ({why})" + (f"; so are {', '.join(v for v, _p, _w in others)}" if others else ""),
        detail=("Ranks on several hosts compiling the same kernels into one shared cache race on its rename-into-place: "
                "'Device or resource busy', 'FileNotFoundError', 'Stale file handle' (triton-lang/triton#11512)."
                + (" The job's own variables put compile caches on that mount: "
                   + "; ".join(f"{v}={p} ({w})" for v, p, w in placed) + "." if placed else "")
                + (f" The script calls torch.compile ({compiles[0].get('path')}:{compiles[0].get('line')})."
                   if compiles else "" if (set_there or placed) else
                   " Whether this job compiles Triton kernels (torch.compile, Triton-based libraries) is not known:"
                   " give the script with --script to know.")),
        fix=("export " + " ".join(f"{v}=/tmp/{v.lower()}-$USER" for v in
                                  dict.fromkeys(["TRITON_CACHE_DIR"] + [v for v, _p, _w in others]))
             + "   # node-local, before the launcher, on every host; share only the model weights"),
        subjects=["TRITON_CACHE_DIR"] + [v for v, _p, _w in others],
        evidence={"triton_cache": tc, "multi_node": why, "compiles": compiles[:3],
                  "caches_on_mount": [[v, p] for v, p, _w in placed]})


# check18 (batch 90): libraries whose kernels Triton compiles at run time into its cache
TRITON_KERNEL_LIBRARIES = ("auto-gptq", "liger-kernel", "unsloth", "mamba-ssm")


@check("SYS010", "triton-cache-not-writable", family="system", needs=("host", "packages"), reads=("env", "lint"))
def triton_cache_not_writable(snap):
    """This user cannot create Triton's kernel cache where Triton will put it.

    What it checks
        With Triton installed (triton, pytorch-triton, pytorch-triton-rocm), whether the nearest existing
        directory of Triton's cache path (TRITON_CACHE_DIR, else $TRITON_HOME or the home directory +
        /.triton/cache; triton-lang/triton python/triton/runtime/cache.py) lets this user create
        directories in it (write and search permission). A warning when the script calls torch.compile
        (check --script), TRITON_CACHE_DIR is set, or a library of Triton kernels is installed
        (auto-gptq, liger-kernel, unsloth, mamba-ssm), else a note. A custom TRITON_CACHE_MANAGER is
        left alone.

    Why it matters
        Triton makes the cache directory on the first kernel it compiles (FileCacheManager:
        os.makedirs(..., exist_ok=True)); where the home directory is not writable - OpenShift and
        other Kubernetes pods run a random UID with HOME=/, so the cache is /.triton/cache - the first
        compiled kernel raises PermissionError and the rank dies mid-step
        (foundation-model-stack/fms-hf-tuning#367: auto_gptq's triton_v2 kernels under FSDP).

    Example
        An OpenShift pod, uid 1000680000, HOME=/, torch.compile(model).

    Fix
        export TRITON_CACHE_DIR=/tmp/triton-cache TRITON_HOME=/tmp   # a writable, node-local directory
    """
    host = snap["host"]
    tc = host.get("triton_cache") or {}
    if tc.get("writable") is not False or tc.get("manager"):
        return
    versions = (snap.get("packages") or {}).get("versions") or {}
    triton = next((f"{n} {versions[n]}" for n in ("triton", "pytorch-triton", "pytorch-triton-rocm") if versions.get(n)), None)
    if not triton:
        return
    compiles = lint_facts(snap).get("compiles") or []
    libs = [f"{n} {versions[n]}" for n in TRITON_KERNEL_LIBRARIES if versions.get(n)]
    set_there = tc.get("from") == "TRITON_CACHE_DIR"
    level = warning if (compiles or libs or set_there) else info
    why = ([f"the script calls torch.compile ({compiles[0].get('path')}:{compiles[0].get('line')})"] if compiles else []) \
        + ([f"{', '.join(libs)} compile{'s' if len(libs) == 1 else ''} Triton kernels"] if libs else []) \
        + (["TRITON_CACHE_DIR names it"] if set_there else [])
    yield level(
        f"Triton's kernel cache {tc.get('path')} cannot be created: {tc.get('writable_at')} is not writable by this user",
        detail=(f"Triton ({triton}) makes its cache with os.makedirs on the first kernel it compiles; without write "
                f"permission on {tc.get('writable_at')} that kernel raises PermissionError and the rank dies "
                "(fms-hf-tuning#367: a random-UID OpenShift pod with HOME=/ puts the cache at /.triton/cache). "
                + ("; ".join(why) + "." if why else
                   "Whether this job compiles Triton kernels (torch.compile, Triton-based libraries) is not known: "
                   "give the script with --script to know.")),
        fix="export TRITON_CACHE_DIR=/tmp/triton-cache-$USER TRITON_HOME=/tmp   # writable and node-local, before the launcher",
        subjects=["TRITON_CACHE_DIR"],
        evidence={"triton_cache": tc, "triton": triton, "libraries": libs, "compiles": compiles[:3]})


# torch/_inductor/config.py decide_compile_threads (pytorch/pytorch @a112bb81): compile_threads =
# min(32, len(os.sched_getaffinity(0))) unless TORCHINDUCTOR_COMPILE_THREADS is set.
INDUCTOR_MAX_COMPILE_THREADS = 32


@check("SYS008", "cpu-affinity-narrow", family="system", needs=("host", "launcher"), reads=("env", "lint"))
def cpu_affinity_narrow(snap):
    """The process may run on only a few of the host's CPUs: too few for the ranks' helpers.

    What it checks
        The CPUs this process may run on (its scheduler affinity, os.sched_getaffinity, which the
        kernel already narrows to the cgroup's cpuset.cpus.effective), where they are fewer than
        the host's CPUs, that is, where something pinned the job (taskset, numactl, a container's
        --cpuset-cpus, a pinned parent). It fires when the pinned CPUs are fewer than what the
        ranks on this host start: local ranks x (1 main thread + the DataLoader workers of a literal
        num_workers that `check --script` reads); when the script calls torch.compile and the
        affinity caps inductor's compile pool below what the host would give it; or when the
        process is pinned to a single CPU of several. An srun task bound to its
        SLURM_CPUS_PER_TASK share, or a rank whose affinity times the local ranks still fits the
        host (a per-rank binding such as torchrun --numa-binding), is judged alone.

    Why it matters
        Every process the job starts inherits the mask. torch's DataLoader measures the same mask
        (torch/utils/data/dataloader.py check_worker_number_rationality: "Our suggested max number
        of worker in current system is N ... Please be aware that excessive worker creation might
        get DataLoader running slow or even freeze"), and inductor sizes its Triton compile pool by
        it (torch/_inductor/config.py decide_compile_threads: min(32, len(os.sched_getaffinity(0)))),
        so a pinned job loads data and compiles kernels on a few CPUs while the rest of the host
        idles (cresset-template/cresset#96: torch.compile crawled in a container whose process was
        pinned to few CPUs; `taskset -p 0xff <pid>` at start fixed it).

    Example
        A container whose entry process runs with an affinity of 1 CPU of 32; the training script
        calls torch.compile and DataLoader(num_workers=8).

    Fix
        Widen the mask: start the job with `taskset -c 0-$(( $(nproc --all) - 1 )) torchrun ...`,
        drop the container's --cpuset-cpus (or give it more CPUs), or under SLURM ask for
        --cpus-per-task=N; else lower num_workers to the CPUs given.
    """
    host = snap["host"]
    mine, total = host.get("affinity_count"), host.get("cpu_count")
    if not (isinstance(mine, int) and isinstance(total, int) and 0 < mine < total):
        return
    env = env_of(snap)
    nlocal, nlocal_src = local_ranks(snap)
    per_task = None
    try:
        per_task = int(env.get("SLURM_CPUS_PER_TASK") or 0) or None
    except ValueError:
        pass
    if snap["launcher"].get("kind") == "slurm" and per_task and mine <= per_task:
        nlocal, nlocal_src = 1, f"SLURM binds this task to its own {mine} CPUs (SLURM_CPUS_PER_TASK={per_task})"
    elif nlocal > 1 and mine * nlocal <= total:
        # each local rank may hold its own slice (torchrun --numa-binding, a per-rank taskset): judged alone,
        # ranks squeezed onto the same CPUs are ENV012's
        nlocal, nlocal_src = 1, f"{nlocal_src}; {mine} CPUs each fit the host's {total}, taken as this rank's own"
    workers, wfact = _loader_workers(snap)
    facts = lint_facts(snap)
    compiles = facts.get("compiles") or []
    reasons = []
    need = nlocal * (1 + (workers or 0))
    if workers and need > mine:
        reasons.append(f"{nlocal} rank(s) ({nlocal_src}) x (1 main thread + {workers} DataLoader workers, "
                       f"{wfact.get('path')}:{wfact.get('line')}) = {need} busy processes")
    if compiles and "TORCHINDUCTOR_COMPILE_THREADS" not in env and \
            min(INDUCTOR_MAX_COMPILE_THREADS, mine) < min(INDUCTOR_MAX_COMPILE_THREADS, total):
        reasons.append(f"torch.compile ({compiles[0].get('path')}:{compiles[0].get('line')}) compiles with "
                       f"{min(INDUCTOR_MAX_COMPILE_THREADS, mine)} worker(s) instead of "
                       f"{min(INDUCTOR_MAX_COMPILE_THREADS, total)}")
    if mine == 1 and not reasons:
        reasons.append("every thread and process of the job (DataLoader workers, NCCL's proxy thread, inductor's "
                       "compile pool, the pin-memory thread) shares that one CPU")
    if not reasons:
        return
    cpus = host.get("affinity")
    shown = cpus if isinstance(cpus, list) and len(cpus) <= 16 else None
    yield warning(
        f"this process may run on {mine} of the host's {total} CPUs: {reasons[0]}",
        detail=("The scheduler affinity (taskset, numactl, a container's cpuset or a pinned parent) allows "
                f"{mine} CPU(s){f' {shown}' if shown else ''} of {total}, and every process the job starts "
                "inherits it. " + "; ".join(reasons) + ". torch's DataLoader and inductor size their pools by "
                "this mask: data loading and kernel compilation run on these CPUs while the rest idle."),
        fix=(f"taskset -c 0-{total - 1} torchrun ...   # or taskset -p -c 0-{total - 1} <pid>; in a container drop "
             "--cpuset-cpus, under SLURM ask for --cpus-per-task"
             + (f"; or DataLoader(num_workers={max(0, mine // max(1, nlocal) - 1)})" if workers else "")),
        subjects=[],
        evidence={"affinity_count": mine, "cpu_count": total, "affinity": shown, "local_ranks": nlocal,
                  "loader_workers": workers, "compiles": compiles[:3], "needed": need})


# login.defs(5) SYS_UID_MAX default: uids up to 999 are system users, whose IPC objects logind leaves alone
SYSTEM_UID_MAX = 999


@check("SYS009", "logind-removes-ipc", family="system", needs=("host",), reads=("launcher",))
def logind_removes_ipc(snap):
    """systemd-logind is set to delete this user's shared memory when the user's last session ends.

    What it checks
        RemoveIPC= in /etc/systemd/logind.conf and its drop-in directories (logind.conf.d under /etc,
        /run, /usr/local/lib and /usr/lib), for a user that is not root or a system user (uid above
        999). Only a value set in a file is judged: the upstream default is yes, but distributions may
        change it, so an unset value is left alone.

    Why it matters
        With RemoveIPC=yes logind removes "System V and POSIX IPC objects belonging to the user ... when
        the user fully logs out" (systemd, man/logind.conf.xml): every /dev/shm file of the user goes,
        including the ones torch's DataLoader workers and NCCL's shared-memory transport are using. A job
        that outlives the last session (started with nohup or & and the user logged out, a dropped ssh,
        a launcher's ssh session that ends) then crashes mid-epoch with "could not unlink the shared
        memory file /torch_..." or a bus error (mlcommons/storage#528: Ubuntu 24.04, OpenMPI over ssh).

    Example
        /etc/systemd/logind.conf has RemoveIPC=yes; a user starts 8 ranks with nohup and logs out.

    Fix
        Set RemoveIPC=no in a drop-in (/etc/systemd/logind.conf.d/10-keep-ipc.conf: [Login] then
        RemoveIPC=no) and `sudo systemctl restart systemd-logind`; or keep a session open for the
        job's lifetime (tmux, `loginctl enable-linger <user>`), or run it under a service manager.
    """
    host = snap["host"]
    logind = host.get("logind") or {}
    uid = host.get("uid")
    if logind.get("remove_ipc") is not True or not isinstance(uid, int) or uid <= SYSTEM_UID_MAX:
        return
    yield warning(
        f"systemd-logind removes this user's shared memory at logout (RemoveIPC=yes in {logind.get('from')})",
        detail=(f"uid {uid} is not a system user, so when its last login session ends logind deletes all of its "
                "POSIX and System V shared memory, /dev/shm included: a training job still running then loses the "
                "files its DataLoader workers and NCCL share, and fails with \"could not unlink the shared memory "
                "file\" or a bus error. It matters for jobs that outlive the session that started them."),
        fix=("printf '[Login]\\nRemoveIPC=no\\n' | sudo tee /etc/systemd/logind.conf.d/10-keep-ipc.conf && "
             "sudo systemctl restart systemd-logind   # or: loginctl enable-linger $USER, or run inside tmux"),
        subjects=["path:/dev/shm"],
        evidence={"remove_ipc": True, "from": logind.get("from"), "uid": uid})


@check("SYS011", "checkpoint-disk-full", family="system", needs=("launch",))
def checkpoint_disk_full(snap):
    """The directory the training program saves checkpoints to has no room for the next one.

    What it checks
        The save directories of the training command (transformers' --output_dir, Lightning's
        --default_root_dir, a script's --save_dir / --checkpoint_dir / --ckpt_dir; read from check's
        own launch command or from `ddpdoctor check -- <command>`): the free space of their file
        system (statvfs f_bavail, what the job's user may write) against the largest checkpoint
        already there (a transformers "checkpoint-<step>" directory, a .pt/.bin/.safetensors/.ckpt
        file). Less room than that checkpoint is an error; a file system with under 1 GiB and under
        1% free, with no checkpoint to size against, is a warning.

    Why it matters
        The job trains until its first save, then fails with "OSError: [Errno 28] No space left on
        device" (or a truncated file: "PytorchStreamWriter failed writing file data/...: file write
        failed"), losing the steps since the last good checkpoint; under DDP, rank 0 dies in
        torch.save while the others wait in the next collective until the timeout. The Trainer's
        save_total_limit deletes old checkpoints only after the new one is written.

    Example
        --output_dir out on a disk with 3 GiB free, out/checkpoint-500 holding 13 GiB.

    Fix
        Free space (delete old checkpoint-* directories, `df -h <dir>`), save elsewhere (--output_dir
        on a larger file system), or keep fewer checkpoints (--save_total_limit 1).
    """
    from ddpdoctor.facts.launch import save_dirs

    for cmd, d in save_dirs(snap):
        free, need = d.get("free_bytes"), d.get("largest_checkpoint_bytes")
        total = d.get("total_bytes")
        if not isinstance(free, int):
            continue
        where = f"{cmd.get('program') or 'the training program'} {d.get('option')} {d.get('path')}"
        if isinstance(need, int) and need > free:
            yield error(f"{where}: {_fmt(free)} free, but its largest checkpoint ({d.get('largest_checkpoint')}) "
                        f"takes {_fmt(need)}",
                        detail=("The next save needs about as much as the last one: it fails with \"OSError: [Errno 28] "
                                "No space left on device\" or leaves a truncated file (\"PytorchStreamWriter failed "
                                "writing file\"), and the steps since the last good checkpoint are lost; under DDP the "
                                "other ranks then wait in their next collective until the timeout."),
                        fix=f"df -h {d.get('checked')}; remove old checkpoints (rm -r {d.get('path')}/checkpoint-<old>) or "
                            "save to a larger file system; --save_total_limit 1 keeps one",
                        subjects=[f"path:{d.get('path')}", f"arg:{str(d.get('option')).lstrip('-')}"],
                        evidence={"save_dir": d})
            return
        if need is None and free < 2 ** 30 and isinstance(total, int) and total > 0 and free < total // 100:
            yield warning(f"{where}: its file system is full ({_fmt(free)} free of {_fmt(total)})",
                          detail=("A checkpoint is at least the model's weights (and, with the optimizer state, about "
                                  "three times that): with this little room the first save fails with \"OSError: "
                                  "[Errno 28] No space left on device\"."),
                          fix=f"df -h {d.get('checked')}; free space there or save to a larger file system",
                          subjects=[f"path:{d.get('path')}", f"arg:{str(d.get('option')).lstrip('-')}"],
                          evidence={"save_dir": d})
            return


@check("SYS012", "stack-limit-unlimited-under-nccl", family="system", needs=("host",), reads=("env", "packages", "gpus"))
def stack_limit_unlimited_under_nccl(snap):
    """The stack limit is unlimited under an NCCL that leaves its threads glibc's 2 MB fallback.

    What it checks
        RLIMIT_STACK (the soft `ulimit -s`) is unlimited and the NCCL torch loads is older than
        2.28.3, or NCCL_SET_CPU_STACK_SIZE=0 switches off the fix that release brought
        (ddpdoctor/data/nccl_stack_limit.json). With the NCCL release unknown on a GPU host: a note.

    Why it matters
        glibc takes RLIMIT_STACK as the default stack of new threads except when it is unlimited:
        then new threads get 2 MB (pthread_create(3)). NCCL's topology search is recursive and may
        need more than that while a communicator is created; NCCL's troubleshooting guide reports
        crashes with `ulimit -s unlimited` (a segmentation fault in ncclCommInitRank, MNNVL systems
        especially). NCCL 2.28.3 raises its threads' default to 8 MB itself.

    Example
        ulimit -s unlimited in a job script or /etc/security/limits.conf, with torch's NCCL 2.21.5.

    Fix
        ulimit -s 8192 (on every node, before the launcher), or an NCCL >= 2.28.3.
    """
    from ddpdoctor.facts.net import nccl_loaded, nccl_stack_limit  # noqa: PLC0415
    from ddpdoctor.facts.torch_floors import release  # noqa: PLC0415

    lim = ((snap["host"].get("rlimits") or {}).get("RLIMIT_STACK"))
    if not isinstance(lim, dict) or "soft" not in lim or lim.get("soft") is not None:
        return  # not recorded, or a finite limit (None is how the gather writes "unlimited")
    data = nccl_stack_limit()
    fixed = release(data["fixed_in"])
    version, where = nccl_loaded(snap)
    env = env_of(snap)
    switched_off = str(env.get(data["param"], "")).strip() == "0"
    shown = ".".join(str(p) for p in version) if version else None
    src = "NVIDIA/nccl docs/userguide/source/troubleshooting/runtime_and_mpi_issues.rst, 'Stack size'"
    detail = ("glibc gives new threads RLIMIT_STACK as their stack, except when it is unlimited: then 2 MB. NCCL's graph "
              "search may need more while a communicator is created, and NCCL reports crashes with `ulimit -s "
              f"unlimited` ({src}). From {data['fixed_in']} NCCL raises its threads' default stack to "
              f"{data['safe_kb']} KB itself (src/init.cc setCpuStackSize, INFO \"{data['nccl_info']}\"), unless "
              f"{data['param']}=0.")
    fix = "ulimit -s 8192   # in the job script, before the launcher, on every node"
    if version and (release(shown) or (0,)) >= fixed:
        if switched_off:
            yield warning(f"the stack limit is unlimited and {data['param']}=0 turns off NCCL {shown}'s own fix: its "
                          "threads get glibc's 2 MB fallback stack", detail=detail,
                          fix=f"unset {data['param']}; or {fix}", subjects=[data["param"]],
                          evidence={"RLIMIT_STACK": "unlimited", "nccl": shown, "nccl_from": where})
        return
    if version:
        yield warning(f"the stack limit is unlimited (ulimit -s) under NCCL {shown}, older than {data['fixed_in']}: "
                      "NCCL's threads get glibc's 2 MB fallback stack and communicator creation can crash",
                      detail=detail, fix=fix + f"; or an NCCL >= {data['fixed_in']}", subjects=[],
                      evidence={"RLIMIT_STACK": "unlimited", "nccl": shown, "nccl_from": where})
        return
    gpus = snap.get("gpus") if "gpus" in snap else None
    if isinstance(gpus, dict) and gpus.get("devices"):
        yield info("the stack limit is unlimited (ulimit -s): an NCCL older than "
                   f"{data['fixed_in']} gives its threads glibc's 2 MB fallback stack (which NCCL runs here is not "
                   "recorded)", detail=detail, fix=fix, subjects=[],
                   evidence={"RLIMIT_STACK": "unlimited", "nccl": None})
