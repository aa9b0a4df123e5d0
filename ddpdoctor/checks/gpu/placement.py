"""Where each local rank runs against where its GPU is: NUMA locality of the CPUs a rank is bound to,
and several ranks on one GPU whose compute mode allows one process."""
from __future__ import annotations

from ddpdoctor.facts.cuda_map import devices_of
from ddpdoctor.facts.gpu import subjects, view
from ddpdoctor.facts.placement import compress, cpuset, places
from ddpdoctor.model import error, warning
from ddpdoctor.model.registry import check


@check("GPU024", "rank-cpus-far-from-gpu", family="gpu", needs=("gpus", "host"), reads=("siblings", "launcher"))
def rank_cpus_far_from_gpu(snap):
    """A rank is bound to CPUs of another NUMA node than its GPU.

    What it checks
        For this rank and, under a launcher, every sibling rank on this host: the CPUs the kernel lets
        it run on (its affinity: numactl, taskset, `srun --cpu-bind`, a cgroup) against the CPUs NVML
        names as close to the rank's GPU (nvmlDeviceGetCpuAffinity, the GPU's NUMA node). Reported when
        a rank that is bound to a subset of the machine has none of its GPU's CPUs.

    Why it matters
        Every host-to-device copy, pinned-memory buffer and DataLoader batch of that rank crosses the
        socket interconnect; NCCL's proxy thread runs far from the GPU and NIC. The job runs, slower on
        that rank, and every other rank waits for it. A binding written for another machine (numactl
        --cpunodebind=0 for all ranks, srun --cpu-bind=map_cpu with the wrong list) does exactly this.

    Example
        8 ranks under `numactl --cpunodebind=0`: ranks 4-7 use GPUs on NUMA node 1.

    Fix
        Bind each rank to its GPU's NUMA node: `numactl --cpunodebind=<node of its GPU>`, torchrun
        --numa-binding=node (torch 2.8+), or `srun --cpu-bind=ldoms` / `--gpu-bind=closest`.
    """
    v = view(snap)
    ncpu = (snap.get("host") or {}).get("cpu_count")
    by_index = {d["index"]: d for d in v.devices}
    bad = []
    for p in places(snap):
        dev = by_index.get(p.gpu)
        if dev is None or not p.cpus:
            continue
        near = cpuset(dev.get("cpu_affinity"))
        if not near or (isinstance(ncpu, int) and len(p.cpus) >= ncpu):
            continue  # NVML did not say, or the rank is not bound (the whole machine)
        if not p.cpus & near:
            bad.append((p, dev, near))
    if not bad:
        return
    lines = "; ".join(f"{p.label} on CPUs {compress(p.cpus)}, its GPU {v.short(dev['index'])} is near CPUs "
                      f"{compress(near)} (NUMA node {dev.get('numa_node')})" for p, dev, near in bad[:8])
    yield warning(f"{len(bad)} rank(s) bound to CPUs on another NUMA node than their GPU",
                  detail=lines + ". Host-device copies and data loading of these ranks cross the socket "
                                 "interconnect; the whole job waits for them.",
                  fix="numactl --cpunodebind=<NUMA node of the rank's GPU> ...   # or torchrun --numa-binding=node, "
                      "or srun --cpu-bind=ldoms --gpu-bind=closest",
                  subjects=subjects([dev["index"] for _, dev, _ in bad]) + [f"rank:{p.rank}" for p, _, _ in bad
                                                                             if p.rank is not None],
                  evidence={"ranks": [{"rank": p.rank, "cpus": compress(p.cpus), "gpu": dev["index"],
                                       "gpu_cpus": compress(near), "numa_node": dev.get("numa_node")}
                                      for p, dev, near in bad]})


def ranks_per_gpu(snap) -> dict:
    """NVML index -> labels of the local ranks that will use it (this one and its siblings)."""
    out: dict = {}
    for p in places(snap):
        if p.gpu is not None:
            out.setdefault(p.gpu, []).append(p.label)
    return out


@check("GPU029", "exclusive-gpu-shared-by-ranks", family="gpu", needs=("gpus",), reads=("siblings", "launcher"))
def exclusive_gpu_shared_by_ranks(snap):
    """Several ranks of this job will use one GPU whose compute mode allows a single process.

    What it checks
        Which GPU each local rank uses (its only visible GPU, or cuda:LOCAL_RANK of its
        CUDA_VISIBLE_DEVICES), from this process and its sibling ranks' environments, against the
        GPU's compute mode (EXCLUSIVE_PROCESS or EXCLUSIVE_THREAD). GPU012 covers the case without
        sibling facts (more local ranks than GPUs).

    Why it matters
        The second rank's CUDA context fails with "all CUDA-capable devices are busy or unavailable"
        (cudaErrorDevicesUnavailable): a job that works on a workstation fails on a cluster whose
        GPUs are exclusive, e.g. two ranks started with the same CUDA_VISIBLE_DEVICES.

    Example
        srun --ntasks-per-node 2 --gpus-per-task 1 with a wrapper that sets CUDA_VISIBLE_DEVICES=0 for
        both tasks, on GPUs in EXCLUSIVE_PROCESS mode.

    Fix
        One rank per GPU: torch.cuda.set_device(local_rank) with distinct GPUs per rank (srun
        --gpu-bind=single:1); or, as admin, `sudo nvidia-smi -i N -c DEFAULT`.
    """
    v = view(snap)
    by_index = {d["index"]: d for d in devices_of(v.gpus)}
    for gpu, labels in sorted(ranks_per_gpu(snap).items()):
        mode = (by_index.get(gpu) or {}).get("compute_mode")
        if len(labels) < 2 or mode not in ("EXCLUSIVE_PROCESS", "EXCLUSIVE_THREAD"):
            continue
        yield error(f"{', '.join(labels)} all use gpu:{gpu}, which is in compute mode {mode}",
                    detail="Only one process may hold a CUDA context on it: the second rank fails with 'all "
                           "CUDA-capable devices are busy or unavailable'.",
                    fix="give each rank its own GPU (torch.cuda.set_device(local_rank), srun --gpu-bind=single:1); "
                        f"or sudo nvidia-smi -i {gpu} -c DEFAULT",
                    subjects=subjects([gpu]), evidence={"gpu": gpu, "ranks": labels, "compute_mode": mode})
