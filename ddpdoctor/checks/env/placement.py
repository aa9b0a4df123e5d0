"""The CPUs the local ranks are bound to, against each other (the sibling ranks' affinity)."""
from __future__ import annotations

from ddpdoctor.facts.placement import compress, places
from ddpdoctor.model import warning
from ddpdoctor.model.registry import check


@check("ENV012", "ranks-share-cpus", family="launcher", needs=("siblings", "host"))
def ranks_share_cpus(snap):
    """Local ranks are bound to the same few CPUs, fewer than there are ranks on them.

    What it checks
        The CPUs each local rank may run on (this process's affinity and its sibling ranks'
        Cpus_allowed_list): groups of ranks bound to one identical CPU set that has fewer CPUs than
        ranks, and ranks whose CPU sets overlap although each is bound to part of the machine.

    Why it matters
        A binding meant for one process, applied to all (`numactl --physcpubind=0-3 torchrun ...`,
        `taskset -c 0`, srun --cpu-bind=map_cpu:0), makes every rank, its DataLoader workers and its
        NCCL threads compete for the same cores: GPUs idle while the input pipeline crawls.

    Example
        taskset -c 0-1 torchrun --nproc-per-node 8 train.py: 8 ranks on 2 cores.

    Fix
        Bind each rank to its own cores (torchrun --numa-binding, srun --cpu-bind=cores with
        --cpus-per-task), or drop the outer taskset/numactl.
    """
    ps = [p for p in places(snap) if p.cpus]
    if len(ps) < 2:
        return
    ncpu = (snap.get("host") or {}).get("cpu_count")
    groups: dict = {}
    for p in ps:
        groups.setdefault(frozenset(p.cpus), []).append(p)
    for cpus, members in sorted(groups.items(), key=lambda kv: min(kv[0])):
        if len(members) < 2 or len(cpus) >= len(members) * 2 or (isinstance(ncpu, int) and len(cpus) >= ncpu):
            continue
        yield warning(f"{len(members)} local ranks share CPUs {compress(cpus)} ({len(cpus)} CPU(s))",
                      detail=f"{', '.join(p.label for p in members)} may run only on these CPUs, with their data "
                             "loaders and NCCL threads: they compete for the same cores.",
                      fix="bind each rank to its own cores (torchrun --numa-binding=node, srun --cpu-bind=cores "
                          "--cpus-per-task=N), or remove the taskset/numactl around the launcher",
                      subjects=[f"rank:{p.rank}" for p in members if p.rank is not None],
                      evidence={"cpus": compress(cpus), "ranks": [p.label for p in members]})
