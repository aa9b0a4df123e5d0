"""CPU thread oversubscription (catalogue A7): threads per rank x local ranks against usable cores."""
from __future__ import annotations

from ddpdoctor.model import warning
from ddpdoctor.model.registry import check
from ddpdoctor.facts.ranks import local_ranks, threads_per_rank
from ddpdoctor.facts.env import env_int, env_of


def slurm_task_binding(snap, host: dict) -> str:
    """Why this srun task has cores of its own, or "". With --cpus-per-task and task binding (the
    usual cgroup/affinity set-up) each task's affinity is its own share, so tasks do not compete."""
    if snap["launcher"].get("kind") != "slurm":
        return ""
    per_task = env_int(env_of(snap), "SLURM_CPUS_PER_TASK")
    mine, total = host.get("affinity_count"), host.get("cpu_count")
    if not (per_task and isinstance(mine, int) and isinstance(total, int)) or not mine <= per_task < total:
        return ""
    return f"SLURM binds this task to its own {mine} cores (SLURM_CPUS_PER_TASK={per_task})"


@check("ENV006", "cpu-oversubscription", family="launcher", needs=("env", "launcher", "host"), reads=("launch",), catalogue=("A7",))
def cpu_oversubscription(snap):
    """More compute threads than usable cores: threads per rank x local ranks > cores.

    What it checks
        The intra-op threads each rank will run with (OMP_NUM_THREADS, or torch's default of one
        per core when it is unset and no torchrun set it) times the ranks on this host, against
        the cores this process may use: the scheduler affinity, capped by the cgroup CPU quota
        of a container. An srun task bound to its own cores (affinity no wider than
        SLURM_CPUS_PER_TASK) is judged alone, since the other tasks run elsewhere. Under a cgroup
        CPU quota torch's default is the host's physical cores, not the quota (ATen's
        init_num_threads: mkl_get_max_threads() or cpuinfo_get_cores_count() via
        c10 TaskThreadPoolBase::defaultNumThreads), when the snapshot recorded them. In an srun
        step whose tasks each start torchrun (the launch section's command), the ranks here are
        the tasks on this node x --nproc-per-node, and torchrun's OMP_NUM_THREADS=1 applies.

    Why it matters
        Every rank spins one OpenMP thread per core, so N ranks fight over the same cores, and
        data-loading and NCCL progress threads starve. torchrun prints "Setting
        OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your
        system being overloaded" for this reason (pytorch/pytorch#85604). On our 2-core machine a
        2-rank Trainer run took 53-57 ms per step under mp.spawn against 16 ms under torchrun.

        Also the DataLoader workers the training program's command line asks for (--num_workers,
        --workers, --dataloader_num_workers: data/loader_workers.json) times the local ranks against
        the usable cores: each rank starts its own worker processes, so a per-process count from a
        one-GPU recipe multiplies (facebookresearch/deit#81: 8 ranks x 32 workers on 32 CPUs).

    Example
        4 ranks started by hand on a 16-core container with `--cpus 8` and OMP_NUM_THREADS unset.

    Fix
        export OMP_NUM_THREADS=$(( $(nproc) / LOCAL_RANKS )), or launch with torchrun, which sets 1.
    """
    host = snap["host"]
    usable = host.get("usable_cpus") or host.get("affinity_count") or host.get("cpu_count")
    if not usable:
        return
    nlocal, nlocal_src = local_ranks(snap)
    bound = slurm_task_binding(snap, host)
    if bound:
        nlocal, nlocal_src = 1, bound  # the other local tasks run on other cores
    per_rank, per_rank_src = threads_per_rank(snap, usable, nlocal)
    yield from _loader_workers_oversubscribe(snap, nlocal, nlocal_src, usable)
    total = per_rank * nlocal
    if total <= usable:
        return
    suggested = max(1, usable // nlocal)
    env_fix = {}
    if suggested >= per_rank:  # already at one thread per rank: fewer threads cannot help
        fix = (f"# {nlocal} ranks x {per_rank} thread(s) already exceed {usable} cores: start fewer ranks per host\n"
               f"torchrun --nproc-per-node {usable} train.py   # or ask the scheduler for more cores")
    else:
        fix = f"export OMP_NUM_THREADS={suggested}   # = usable cores / local ranks; torchrun sets 1 by default"
        env_fix = {"OMP_NUM_THREADS": str(suggested)}
    quota = (host.get("cgroup") or {}).get("quota_cpus")
    where = f"{usable} usable cores" + (f" (cgroup quota {quota:g} CPUs of {host.get('cpu_count')})" if quota else "")
    subjects = ["OMP_NUM_THREADS"]
    # mpirun/mpiexec start any program: torch's default thread count binds a torch (OpenMP) program only, and a
    # program without an OpenMP pool (nccl-tests) runs one compute thread per rank whatever it says
    agnostic = snap["launcher"].get("kind") == "mpi" and env_of(snap).get("OMP_NUM_THREADS") is None
    yield warning(
        f"{nlocal} rank{'s' if nlocal != 1 else ''} x {per_rank} thread{'s' if per_rank != 1 else ''} = {total} "
        f"compute threads on {where}" + (" if each rank is a torch (OpenMP) program" if agnostic else ""),
        detail=(f"Threads per rank: {per_rank_src}. Ranks on this host: {nlocal} ({nlocal_src}). The ranks will "
                "oversubscribe the cores and slow each other down; DataLoader workers and communication threads "
                "starve too."
                + (" mpirun starts whatever program it is given: a program without an OpenMP thread pool "
                   "(nccl-tests, for one) is not affected, and check cannot see which program runs." if agnostic else "")),
        fix=fix,
        env_fix=env_fix,
        subjects=subjects,
        evidence={"threads_per_rank": per_rank, "threads_source": per_rank_src, "local_ranks": nlocal,
                  "local_ranks_source": nlocal_src, "usable_cpus": usable, "cgroup_quota_cpus": quota,
                  "cpu_count": host.get("cpu_count")},
    )


def _loader_workers_oversubscribe(snap, nlocal: int, nlocal_src: str, usable: int):
    """ENV006 for the command line's DataLoader workers per rank x the local ranks above the usable cores
    (facts.launch loader_workers_asked; data/loader_workers.json)."""
    from ddpdoctor.facts.launch import loader_workers_asked

    asked = loader_workers_asked(snap)
    if not asked:
        return
    workers, written = asked
    total = workers * nlocal
    if total <= usable:
        return
    per = max(1, usable // max(1, nlocal))
    option = written.split(" ")[1] if " " in written else "--num_workers"
    yield warning(
        f"{nlocal} rank{'s' if nlocal != 1 else ''} x {workers} DataLoader workers ({written}) = {total} worker "
        f"processes on {usable} usable cores",
        detail=(f"Each rank starts its own {workers} DataLoader worker processes (the count is per process, not per "
                f"job); with {nlocal} ranks on this host ({nlocal_src}) the {total} workers and the trainers fight for "
                f"{usable} cores, so batches arrive late and the GPUs idle between steps. torch's DataLoader warns "
                "of this for one process only ('This DataLoader will create N worker processes in total. Our "
                "suggested max number of worker in current system is M'). A script may divide the count by the "
                "ranks itself (pytorch/examples imagenet): a guess from the command line."),
        fix=f"{option} {per}   # usable cores / local ranks, or fewer",
        subjects=[f"arg:{option.lstrip('-')}"],
        evidence={"loader_workers": workers, "option": written, "local_ranks": nlocal, "usable_cpus": usable,
                  "worker_processes": total},
    )
