"""GPU-aware verdicts on the launch environment (catalogue A9, A10, C5, C7).

The env-only parts (syntax of CUDA_VISIBLE_DEVICES, a generic small /dev/shm, the NCCL_*_DISABLE
flags without GPU facts) live in the launcher/nccl/system checks; these checks add what only the
GPU facts can tell: which devices the ranks get, and whether NCCL's transports are healthy.
"""
from __future__ import annotations

from ddpdoctor.model import error, info, warning
from ddpdoctor.model.registry import check
from typing import Optional

from ddpdoctor.facts.cuda_map import devices_of, resolve
from ddpdoctor.facts.env import lint_facts
from ddpdoctor.facts.launch import commands
from ddpdoctor.facts.ranks import ranks_inherit_this_environment

from ddpdoctor.facts.gpu import (SHM_FATAL, SHM_OK, any_p2p, flag_on, gib, local_ranks, nccl_shm_short, nvlink_ok, p2p,
                                 pcie_p2p_ok, subjects, view)



@check("GPU013", "nccl-disable-flag-vs-hardware", reads=("host", "launcher", "pci"), family="gpu", needs=("gpus",), catalogue=("C7",))
def nccl_disable_flag_vs_hardware(snap):
    """An NCCL transport setting that does not fit this machine's hardware.

    What it checks
        NCCL_P2P_DISABLE while NVML reports NVLink or PCIe P2P working between visible GPUs;
        NCCL_SHM_DISABLE while two visible GPUs lack P2P (so NCCL needs SHM) and /dev/shm is
        large; NCCL_IB_DISABLE on a multi-node job while RDMA devices are present; and the
        reverse, NCCL_NET=IB on a host with no RDMA device: NCCL's IB plugin finds none ("NET/IB :
        No device found.", src/transport/net_ib/init.cc) and, NCCL_NET naming it, no other network
        is tried ("Failed to initialize any NET plugin", src/plugin/net.cc), so init fails.

    Why it matters
        These flags are copied from forum answers and from accelerate's advice for RTX 40xx
        cards (huggingface/accelerate `state.py`, tinygrad/open-gpu-kernel-modules#17), then
        outlive the problem. With P2P off, NVLink GPUs all-reduce through host memory at a
        fraction of the bandwidth; with SHM off, through sockets; with IB off, over TCP.

    Example
        `export NCCL_P2P_DISABLE=1` in ~/.bashrc on an 8x H100 NVLink node.

    Fix
        `unset NCCL_P2P_DISABLE` (and the others), then compare all-reduce bandwidth, e.g. with
        `ddpdoctor comm`.
    """
    v = view(snap)
    env = v.env
    if len(v.devices) >= 2 and flag_on(env, "NCCL_P2P_DISABLE"):
        healthy = [p for p in v.pairs if nvlink_ok(p) or pcie_p2p_ok(p)]
        acs = _acs_or_iommu_blocks(snap, v)
        rtx40 = any("RTX 40" in str(d.get("name")) for d in v.devices)
        if healthy and not acs and not rtx40:
            nvl = sum(1 for p in healthy if nvlink_ok(p))
            gpus = sorted({p["a"] for p in healthy} | {p["b"] for p in healthy})
            yield warning(f"NCCL_P2P_DISABLE={env.get('NCCL_P2P_DISABLE')} although P2P works between "
                          f"{len(healthy)} pair(s) of visible GPUs" + (f", {nvl} over NVLink" if nvl else ""),
                          detail=("NVML reports healthy peer-to-peer for " + "; ".join(v.pair_text(p) for p in healthy[:6])
                                  + ". With the flag set NCCL copies through host memory instead, at a fraction of the "
                                  "bandwidth."),
                          fix="unset NCCL_P2P_DISABLE   # and remove it from ~/.bashrc, the job script or the container env",
                          env_fix={"NCCL_P2P_DISABLE": None},
                          subjects=["NCCL_P2P_DISABLE"] + subjects(gpus),
                          evidence={"NCCL_P2P_DISABLE": env.get("NCCL_P2P_DISABLE"),
                                    "healthy_pairs": [[p["a"], p["b"], "NVLink" if nvlink_ok(p) else "PCIe"] for p in healthy]})
    if len(v.devices) >= 2 and flag_on(env, "NCCL_SHM_DISABLE"):
        needs_shm = [p for p in v.pairs if not any_p2p(p) or p.get("topology") == "NVML_TOPOLOGY_SYSTEM"
                     and not nvlink_ok(p)]
        shm = ((snap.get("host") or {}).get("shm") or {}).get("size_bytes")
        if needs_shm and isinstance(shm, int) and shm >= SHM_OK:
            gpus = sorted({p["a"] for p in needs_shm} | {p["b"] for p in needs_shm})
            yield warning(f"NCCL_SHM_DISABLE={env.get('NCCL_SHM_DISABLE')} although {len(needs_shm)} GPU pair(s) need "
                          f"the SHM transport and /dev/shm ({gib(shm)}) is fine",
                          detail=("Without P2P (" + "; ".join(v.pair_text(p) for p in needs_shm[:6]) + ") NCCL's next "
                                  "choice is shared memory; with it disabled, these GPUs talk over sockets."),
                          fix="unset NCCL_SHM_DISABLE", env_fix={"NCCL_SHM_DISABLE": None},
                          subjects=["NCCL_SHM_DISABLE"] + subjects(gpus),
                          evidence={"NCCL_SHM_DISABLE": env.get("NCCL_SHM_DISABLE"), "shm_bytes": shm})
    if flag_on(env, "NCCL_IB_DISABLE"):
        rdma = ((snap.get("pci") or {}).get("rdma_devices") or []) if "pci" in snap else []
        launcher = snap.get("launcher") or {}
        nnodes, world, local = launcher.get("nnodes"), launcher.get("world_size"), launcher.get("local_world_size")
        multi = (isinstance(nnodes, int) and nnodes > 1) or (isinstance(world, int) and isinstance(local, int)
                                                             and world > local)
        rtx40 = any("RTX 40" in str(d.get("name")) for d in v.devices)
        if rdma and multi and not rtx40:
            yield warning(f"NCCL_IB_DISABLE={env.get('NCCL_IB_DISABLE')} on a multi-node job although RDMA devices "
                          f"are present ({', '.join(rdma[:4])})",
                          detail="Inter-node traffic will go over TCP sockets instead of InfiniBand/RoCE.",
                          fix="unset NCCL_IB_DISABLE   # if IB really fails, fix NCCL_IB_HCA / NCCL_IB_GID_INDEX instead",
                          env_fix={"NCCL_IB_DISABLE": None},
                          subjects=["NCCL_IB_DISABLE"], evidence={"rdma_devices": rdma, "nnodes": nnodes})
    pci = snap.get("pci") if "pci" in snap else None
    if (env.get("NCCL_NET") or "").strip().lower() == "ib" and isinstance(pci, dict) and not pci.get("unavailable") \
            and pci.get("rdma_devices") == []:
        yield error("NCCL_NET=IB but this host has no RDMA device (/sys/class/infiniband is empty)",
                    detail=("NCCL's IB plugin finds no device ('NET/IB : No device found.', src/transport/net_ib/init.cc) "
                            "and, with NCCL_NET naming it, NCCL tries no other network: 'Failed to initialize any NET "
                            "plugin' (src/plugin/net.cc) at the first collective. RoCE NICs also appear under "
                            "/sys/class/infiniband once the RDMA stack (rdma-core, the mlx5 driver) is loaded "
                            "(NVIDIA/nccl#958)."),
                    fix="unset NCCL_NET   # NCCL uses IB/RoCE by itself when a device is there, else sockets; "
                        "for RoCE install the RDMA stack (ibv_devinfo must list the NIC)",
                    subjects=["NCCL_NET"], evidence={"NCCL_NET": env.get("NCCL_NET"), "rdma_devices": []})


def _acs_or_iommu_blocks(snap, v) -> bool:
    """Where ACS/IOMMU break PCIe P2P, NCCL_P2P_DISABLE is the right workaround, not a stale flag."""
    from ddpdoctor.checks.gpu.topology import acs_redirect_hits, iommu_translated

    return bool(acs_redirect_hits(snap, v)[0] or iommu_translated(snap, v)[0])


@check("GPU014", "nccl-shm-too-small", family="gpu", needs=("gpus", "host"), catalogue=("C5",))
def nccl_shm_too_small(snap):
    """/dev/shm is too small for NCCL with more than one local GPU.

    What it checks
        The size of /dev/shm when two or more GPUs are visible to local ranks (and
        NCCL_SHM_DISABLE is not set). Below 256 MiB is an error, below 1 GiB a warning.

    Why it matters
        NCCL keeps intra-node buffers in /dev/shm: its SHM transport between GPUs without P2P,
        and proxy buffers even with it. Docker's default is 64 MB: NCCL fails at init with "NCCL
        WARN Call to posix_fallocate failed : No space left on device" or "Error while creating
        shared memory segment /dev/shm/nccl-...", or even segfaults in ncclShmOpen
        (NVIDIA/nccl#290, NVIDIA/nccl#342, NVIDIA/nccl#1683, pytorch/tutorials#2475).

    Example
        `docker run --gpus all image torchrun --nproc-per-node 4 train.py` (no --shm-size).

    Fix
        `docker run --ipc=host ...` or `--shm-size=16g` (Kubernetes: an `emptyDir` with
        `medium: Memory` mounted at /dev/shm). `NCCL_SHM_DISABLE=1` avoids the crash at a large
        bandwidth cost.
    """
    if not nccl_shm_short(snap):
        return
    v = view(snap)
    size = snap["host"]["shm"]["size_bytes"]
    container = (snap.get("host") or {}).get("container")
    no_p2p = [p for p in v.pairs if not any_p2p(p)]
    where = f" inside {container}" if container else ""
    make = error if size < SHM_FATAL else warning
    yield make(f"/dev/shm is {gib(size)}{where}: too small for NCCL across {len(v.devices)} local GPUs",
               detail=("NCCL allocates its intra-node buffers in /dev/shm"
                       + (f" (and {len(no_p2p)} pair(s) without P2P must use its SHM transport)" if no_p2p else "")
                       + ". Expect 'NCCL WARN Call to posix_fallocate failed : No space left on device' or a crash in "
                         "ncclShmOpen at the first collective."),
               fix="docker run --ipc=host ...   # or --shm-size=16g; Kubernetes: emptyDir {medium: Memory} at /dev/shm",
               subjects=["path:/dev/shm"] + subjects(d["index"] for d in v.devices),
               evidence={"shm_bytes": size, "container": container, "gpus": len(v.devices)})


@check("GPU015", "mixed-gpus-device-order", family="gpu", needs=("gpus",), catalogue=("A9",))
def mixed_gpus_device_order(snap):
    """The machine has different GPU models and CUDA_DEVICE_ORDER is not PCI_BUS_ID.

    What it checks
        The models of all the machine's GPUs (not only the visible ones), CUDA_DEVICE_ORDER, and
        which NVML GPUs the indices in CUDA_VISIBLE_DEVICES select under CUDA's order. Reported when
        the visible GPUs are of different models, or when an index selects another GPU than the
        one nvidia-smi numbers so, even if the GPUs it lands on are all of one model; and, marked
        as a guess, when CUDA_VISIBLE_DEVICES uses indices on mixed models under FASTEST_FIRST,
        whose order beyond device 0 CUDA leaves unspecified.

    Why it matters
        CUDA numbers devices fastest first by default, while nvidia-smi, NVML and most tools use
        PCI bus order, and CUDA_VISIBLE_DEVICES indices are CUDA's. With mixed models,
        `CUDA_VISIBLE_DEVICES=0,1` chosen from nvidia-smi's list selects other cards: the job
        silently lands on GPUs another job uses, and `cuda:0` is not GPU 0 of `nvidia-smi`
        (NVIDIA/DIGITS#1358, nanoporetech/bonito#120, gpuopenanalytics/pynvml#28).

    Example
        Two RTX 3090 (nvidia-smi 0, 1) and two RTX 4090 (2, 3): CUDA_VISIBLE_DEVICES=0,1 gives the job
        the two 4090s.

    Fix
        `export CUDA_DEVICE_ORDER=PCI_BUS_ID` before anything initialises CUDA (in the shell or
        job script, not inside Python after `import torch`), or name GPUs by UUID.
    """
    v = view(snap)
    # A GPU NVML cannot read (lost, Xid 79; or any failure of its name) has no model: it is GPU021's
    # finding, never a second model here.
    machine = [d for d in devices_of(v.gpus) if d.get("name") and not d.get("lost")]
    models = sorted({str(d.get("name")) for d in machine})
    if len(models) < 2 or v.cmap.order == "PCI_BUS_ID":
        return
    by_index = {d["index"]: d for d in machine}
    visible_models = sorted({str(d.get("name")) for d in v.devices if d.get("name") and not d.get("lost")})
    moved = []  # (index written, NVML GPU it selects)
    if v.cmap.cvd is not None:
        entries = [e.strip() for e in v.cmap.cvd.split(",")]
        for entry, vis in zip(entries, v.cmap.visible):
            if entry.isdigit() and int(entry) != vis.nvml:
                moved.append((int(entry), vis.nvml))
    # Indices under FASTEST_FIRST on mixed models: CUDA "guess[es] which device is fastest using a simple
    # heuristic, and make[s] that device 0, leaving the order of the rest of the devices unspecified" (CUDA
    # programming guide, CUDA_DEVICE_ORDER). The map above is then a guess: where it guesses no move, the
    # indices may still name other cards, and that is said as such.
    numeric = v.cmap.cvd is not None and any(e.strip().isdigit() for e in v.cmap.cvd.split(","))
    unsure = numeric and not moved and not v.cmap.order_certain
    if len(visible_models) < 2 and not moved and not unsure:
        return
    order = v.env.get("CUDA_DEVICE_ORDER") or "unset"
    if unsure:
        idx = [e.strip() for e in v.cmap.cvd.split(",") if e.strip().isdigit()]
        title = (f"CUDA_VISIBLE_DEVICES={v.cmap.cvd} on mixed GPU models ({', '.join(models)}) with CUDA_DEVICE_ORDER="
                 f"{order}: CUDA's index {', '.join(idx)} may not be nvidia-smi's GPU {', '.join(idx)} (a guess)")
        detail = ("CUDA_VISIBLE_DEVICES indices are CUDA's, and CUDA's default order (FASTEST_FIRST) puts the device "
                  "its heuristic deems fastest at 0 and leaves the rest unspecified (CUDA programming guide, "
                  "CUDA_DEVICE_ORDER); nvidia-smi numbers by PCI bus: " + "; ".join(
                      f"nvidia-smi GPU {d['index']} = {d.get('name')} ({d.get('pci_bus_id')})"
                      for d in sorted(machine, key=lambda d: d['index'])) + ". Which card an index picks cannot be "
                  "known without initialising CUDA; with CUDA_DEVICE_ORDER=PCI_BUS_ID the numbers agree.")
        gpus = {d["index"] for d in v.devices}
        yield warning(title, detail=detail, fix="export CUDA_DEVICE_ORDER=PCI_BUS_ID   # before python starts",
                      env_fix={"CUDA_DEVICE_ORDER": "PCI_BUS_ID"},
                      subjects=["CUDA_DEVICE_ORDER", "CUDA_VISIBLE_DEVICES"] + subjects(gpus),
                      evidence={"machine_models": models, "CUDA_DEVICE_ORDER": v.env.get("CUDA_DEVICE_ORDER"),
                                "CUDA_VISIBLE_DEVICES": v.cmap.cvd, "order_certain": False, "guess": True})
        return
    if moved:
        title = (f"CUDA_VISIBLE_DEVICES={v.cmap.cvd} selects " + ", ".join(f"gpu:{n}" for _, n in moved)
                 + f", not nvidia-smi's GPU {', '.join(str(i) for i, _ in moved)}: mixed models and "
                   f"CUDA_DEVICE_ORDER={order}")
        detail = ("CUDA orders devices fastest first, nvidia-smi and NVML by PCI bus, and CUDA_VISIBLE_DEVICES "
                  "indices are CUDA's: " + "; ".join(
                      f"index {i} = {by_index.get(n, {}).get('name')} ({by_index.get(n, {}).get('pci_bus_id')}), where nvidia-smi's "
                      f"GPU {i} is {by_index.get(i, {}).get('name', '?')} ({by_index.get(i, {}).get('pci_bus_id', '?')})"
                      for i, n in moved) + ". The job runs on other cards than the ones you picked.")
    else:
        title = (f"mixed GPU models ({', '.join(visible_models)}) and CUDA_DEVICE_ORDER={order}: "
                 "CUDA indices differ from nvidia-smi's")
        detail = ("CUDA orders devices fastest first, nvidia-smi and NVML by PCI bus: " + "; ".join(
            f"nvidia-smi GPU {d['index']} = {d.get('name')} ({d.get('pci_bus_id')})" for d in
            sorted(v.devices, key=lambda d: d['index']))
            + ". CUDA_VISIBLE_DEVICES indices and cuda:N then name different cards than you expect.")
    gpus = {d["index"] for d in v.devices} | {i for i, _ in moved if i in by_index}
    yield warning(title, detail=detail,
                  fix="export CUDA_DEVICE_ORDER=PCI_BUS_ID   # before python starts",
                  env_fix={"CUDA_DEVICE_ORDER": "PCI_BUS_ID"},
                  subjects=["CUDA_DEVICE_ORDER"] + (["CUDA_VISIBLE_DEVICES"] if moved else []) + subjects(gpus),
                  evidence={"names": visible_models, "machine_models": models, "CUDA_DEVICE_ORDER": v.env.get(
                      "CUDA_DEVICE_ORDER"), "CUDA_VISIBLE_DEVICES": v.cmap.cvd,
                      "index_selects": {str(i): n for i, n in moved}})


@check("GPU016", "local-ranks-vs-gpus", family="gpu", needs=("gpus", "launcher"), reads=("lint", "launch"), catalogue=("A10",))
def local_ranks_vs_gpus(snap):
    """The launcher starts more local ranks than there are visible GPUs, or fewer.

    What it checks
        LOCAL_WORLD_SIZE (or, for the old `torch.distributed.launch`, WORLD_SIZE with a loopback
        MASTER_ADDR) against the GPUs CUDA_VISIBLE_DEVICES leaves visible. One visible GPU with
        several ranks is taken as per-rank binding (Slurm --gpu-bind, a wrapper that sets
        CUDA_VISIBLE_DEVICES per rank) and not reported, unless the machine has only that one GPU (a Slurm
        step that binds GPUs per task is binding even when its device cgroup leaves NVML one GPU:
        facts.slurm.slurm_gpu_task_binding) or the ranks are counted from the launch command this shell is about to run (its ranks inherit
        this CUDA_VISIBLE_DEVICES: facts.ranks.ranks_inherit_this_environment).
        Under per-task binding, an srun task whose SLURM_LOCALID is past the one GPU it sees (no
        LOCAL_RANK remapped to 0) is reported: code that picks cuda:SLURM_LOCALID fails. A Slurm task
        that sees no GPU at all while its job asked for GPUs (SLURM_GPUS_PER_TASK, SLURM_STEP_GPUS, ...)
        and the driver answers is an error: its device cgroup gave it none.
        Also several launch agents on one host: agent (GROUP_RANK) k > 0 whose MASTER_ADDR is this
        host, with no CUDA_VISIBLE_DEVICES of its own, numbers its local ranks from 0 over the same
        GPUs as agent 0 (torchrun sets LOCAL_RANK per agent and passes CUDA_VISIBLE_DEVICES through,
        torch/distributed/elastic/agent/server/local_elastic_agent.py, _set_local_rank_env).
        The local rank count also comes from the recorded launch command before its launcher ran
        (facts.ranks.launch_command_ranks): torchrun --nproc-per-node; accelerate launch --num_processes
        over --num_machines in its multi-process mode; deepspeed --num_gpus N, which starts N ranks on
        cuda 0..N-1 of every host whatever it has (deepspeed/launcher/runner.py main()); a fewer-ranks
        finding names that option and fixes it in the same launcher.
        With no launcher at all: a plain `python script.py` whose arguments are Hugging Face
        TrainingArguments options (--do_train, --per_device_train_batch_size: data/trainer_args.json)
        where several GPUs are visible - the Trainer then wraps the model in DataParallel over all of
        them in one process (transformers trainer.py _wrap_model).

    Why it matters
        More ranks than GPUs: two ranks share a GPU (NCCL refuses duplicate GPUs: "Duplicate GPU
        detected") or `set_device(local_rank)` fails with "invalid device ordinal"; without
        `set_device`, every rank piles onto cuda:0 (pytorch/examples#969, NVIDIA/apex#222).
        Fewer ranks than GPUs leaves GPUs idle, which is fine only if intended. Two agents on
        one host put two ranks on each of the first GPUs (meta-pytorch/torchx#377).

    Example
        `torchrun --nproc-per-node 8` with CUDA_VISIBLE_DEVICES=0,1,2,3.
        With `check --script`: a program that sizes its own job by an argparse default
        (`--world_size` default 8, lint.scriptfacts world_args) on a machine with fewer visible GPUs
        and no launcher; under a launcher, a default other than its WORLD_SIZE when the script never
        reads WORLD_SIZE (its rendezvous waits for ranks that never start: OpenNMT/OpenNMT-py#1647).
        A script that picks its GPU by the GLOBAL rank (set_device(rank) with rank = int(os.environ["RANK"])
        or dist.get_rank(); lint.scriptfacts global_rank_devices) under a launch that spans nodes: ranks past
        this node's GPU count ask for ordinals that do not exist (meta-llama/llama-cookbook#90).

    Fix
        `torchrun --nproc-per-node $(nvidia-smi -L | wc -l)`, or match CUDA_VISIBLE_DEVICES to
        the ranks; call `torch.cuda.set_device(local_rank)` first thing in each rank.
    """
    v = view(snap)
    ranks = local_ranks(snap)
    n = len(v.cmap.visible)
    if n == 0:
        yield from _slurm_task_given_no_gpu(snap, v)
        return
    yield from _script_world_args(snap, n)
    yield from _script_global_rank_devices(snap, n)
    if not ranks:
        yield from _trainer_data_parallel(snap, v, n)
        return
    shared = _agents_share_host(snap, v, ranks)
    if shared:
        yield shared
        return
    if n == 1 and ranks > 1:
        # one visible GPU and several ranks: per-rank binding when the machine has other GPUs; MIG
        # slices of the one GPU are GPU008's to judge
        only = v.devices[0] if v.devices else {}
        if (len(devices_of(v.gpus)) > 1 and not ranks_inherit_this_environment(snap)) \
                or (only.get("mig") or {}).get("current") or only.get("mig_devices") or _slurm_binds_gpus(snap):
            yield from _slurm_local_id_beyond_bound_gpu(snap, v)
            return
    visible = [e.nvml for e in v.cmap.visible]
    if ranks > n:
        yield error(f"{ranks} local ranks but only {n} visible GPU(s): ranks {n}..{ranks - 1} have no GPU of their own",
                    detail=("Visible: " + ", ".join(v.short(i) for i in visible) + ". torch.cuda.set_device(local_rank) "
                            "fails with 'invalid device ordinal' for those ranks, or they share a GPU and NCCL reports "
                            "'Duplicate GPU detected'."),
                    fix=f"torchrun --nproc-per-node {n} ...   # or widen CUDA_VISIBLE_DEVICES",
                    subjects=subjects(visible, "LOCAL_WORLD_SIZE", "CUDA_VISIBLE_DEVICES" if v.cmap.cvd is not None else ""),
                    evidence={"local_ranks": ranks, "visible": visible})
    elif ranks < n:
        idle = visible[ranks:]
        said, fix = _count_option(snap, n)
        yield info(f"{ranks} local ranks{said} for {n} visible GPUs: {', '.join(v.short(i) for i in idle)} stay idle",
                   detail="Local rank r uses cuda:r, so the GPUs after the last rank are not used by this job.",
                   fix=f"{fix} ...   # or restrict CUDA_VISIBLE_DEVICES to the GPUs you mean",
                   subjects=subjects(idle, "LOCAL_WORLD_SIZE"), evidence={"local_ranks": ranks, "visible": visible})


def _trainer_data_parallel(snap, v, n: int):
    """GPU016 for a Hugging Face Trainer program started as one plain `python script.py` process (the recorded launch
    passes TrainingArguments options: facts.launch script_trainer_args, data/trainer_args.json) where several GPUs are
    visible and no launcher set ranks: the Trainer counts them all as n_gpu and wraps the model in
    torch.nn.DataParallel (transformers trainer.py _wrap_model), one process driving every GPU."""
    launcher = snap.get("launcher") or {}
    if n < 2 or launcher.get("kind") not in (None, "none") or launcher.get("world_size"):
        return
    cmd = next(iter(commands(snap)), None)
    if not cmd or cmd.get("launcher") != "python" or not cmd.get("script_trainer_args"):
        return
    program, given = cmd.get("program") or "train.py", cmd["script_trainer_args"]
    visible = [e.nvml for e in v.cmap.visible]
    yield warning(f"{program} runs as one process over {n} visible GPUs with Trainer options ({' '.join(given[:3])}): "
                  f"the Trainer will use DataParallel, not DDP - start it with torchrun",
                  detail=("No launcher started this program, so Hugging Face's Trainer sees no distributed run, "
                          f"counts the {n} visible GPUs as n_gpu and wraps the model in torch.nn.DataParallel "
                          "(transformers trainer.py _wrap_model: `if self.args.n_gpu > 1 ...: model = "
                          "nn.DataParallel(model)`): one Python process replicates the model and scatters each batch "
                          "over the GPUs every step, usually slower than one GPU per process and often slower than "
                          "one GPU alone (huggingface/transformers#28916). A script that wraps DataParallel itself "
                          "does the same."),
                  fix=f"torchrun --nproc-per-node {n} {program} ...   # one process per GPU (DDP); or "
                      "CUDA_VISIBLE_DEVICES=0 python ... for one GPU",
                  subjects=subjects(visible, f"path:{program}"),
                  evidence={"program": program, "trainer_options": given, "visible": visible})


def _count_option(snap, n: int) -> tuple:
    """(" (<how the launch command says so>)", the same launcher's command for n ranks) when the local rank count was
    read from a recorded launch command (facts.ranks.launch_command_ranks: torchrun --nproc-per-node, accelerate
    launch --num_processes, deepspeed --num_gpus), else ("", torchrun's). The fix names the option the user set, in
    the launcher the user runs (a deepspeed launch is not fixed by a torchrun option)."""
    from ddpdoctor.facts.ranks import FROM_COMMAND, launch_command_ranks  # noqa: PLC0415

    reading = launch_command_ranks(snap)
    how = reading.source[len(FROM_COMMAND):].strip() if reading and reading.source.startswith(FROM_COMMAND) else ""
    if how.startswith("deepspeed --num_gpus"):
        return f" ({how})", f"deepspeed --num_gpus {n}"
    if how.startswith("accelerate"):  # --num_processes counts every machine's ranks
        machines = int(how.rsplit(" ", 1)[1]) if " --num_machines " in how else 1
        return f" ({how})", f"accelerate launch --num_processes {n * machines}" + (
            f" --num_machines {machines}" if machines > 1 else "")
    return (f" ({how})" if how else ""), f"torchrun --nproc-per-node {n}"


def _where(fact: dict) -> str:
    """path:line of a script fact; a config file's facts carry no line (0)."""
    return f"{fact.get('path')}:{fact.get('line')}" if fact.get("line") else str(fact.get("path"))


def _script_world_args(snap, visible: int):
    """GPU016 for the job size a script's argparse default names (lint.scriptfacts world_args)."""
    facts = lint_facts(snap)
    args = [a for a in facts.get("world_args") or () if isinstance(a, dict) and isinstance(a.get("default"), int)]
    if not args:
        return
    launcher = snap.get("launcher") or {}
    world = launcher.get("world_size")
    top = max(args, key=lambda a: a["default"])
    where, n = _where(top), top["default"]
    if not isinstance(world, int) or isinstance(world, bool) or world < 1:
        if n > visible and (launcher.get("nnodes") in (None, 1)):
            said = "is" if top.get("source") == "config" else "defaults to"
            yield warning(f"{where}: {top.get('flag')} {said} {n}, but this machine shows {visible} GPU(s)",
                          detail=(f"A program that starts its own ranks from this value (mp.spawn(nprocs=...), "
                                  f"init_process_group(world_size=...)) either gives ranks {visible}..{n - 1} a GPU "
                                  "ordinal that does not exist ('invalid device ordinal') or waits at the rendezvous "
                                  "for ranks that never start (a hang at 0% GPU). The default may be overridden on the "
                                  "command line."),
                          fix=f"pass {top.get('flag')} {visible} (or change the default at {where})",
                          subjects=[f"path:{top.get('path')}"], evidence={"script": args[:4], "visible_gpus": visible})
        return
    args = [a for a in args if a.get("source") != "config"]  # a launcher's own config sized this launch
    if facts.get("reads_world_env") or not args:
        return
    top = max(args, key=lambda a: a["default"])
    where, n = _where(top), top["default"]
    if n == world:
        return
    yield warning(f"{where}: {top.get('flag')} defaults to {n}, but the launcher started WORLD_SIZE={world}",
                  detail=("The script never reads WORLD_SIZE, so a rendezvous sized by its own default waits for "
                          f"{n} ranks while {world} run (a hang), or gives ranks numbers past the launch's. The default "
                          "may be overridden on the command line."),
                  fix=f"pass {top.get('flag')} {world}, or read it from the launcher: int(os.environ['WORLD_SIZE'])",
                  subjects=[f"path:{top.get('path')}", "WORLD_SIZE"],
                  evidence={"script": args[:4], "world_size": world})


def _int_fact(value) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _script_global_rank_devices(snap, visible: int):
    """GPU016 for a script that selects its GPU by the global rank (lint.scriptfacts global_rank_devices) under a
    launch whose ranks span several nodes: on one node the global rank is the local one, on the others it is not."""
    facts = lint_facts(snap)
    picks = [p for p in facts.get("global_rank_devices") or () if isinstance(p, dict)]
    if not picks:
        return
    launcher = snap.get("launcher") or {}
    world, local = _int_fact(launcher.get("world_size")), _int_fact(launcher.get("local_world_size"))
    rank, nnodes = _int_fact(launcher.get("rank")), _int_fact(launcher.get("nnodes"))
    node = _int_fact(launcher.get("node_rank"))
    spans = ((world is not None and local is not None and world > local) or (nnodes is not None and nnodes > 1)
             or (node is not None and node > 0))
    if not spans:
        return
    first = picks[0]
    where = _where(first)
    mine = rank is not None and rank >= visible
    span = (f"WORLD_SIZE={world} over LOCAL_WORLD_SIZE={local}" if world is not None and local is not None and world > local
            else f"{nnodes} nodes" if nnodes and nnodes > 1 else f"node rank {node}")
    make = error if mine else warning
    yield make(f"{where}: {first.get('what')} picks the GPU by the global rank ({first.get('rank')}), and this launch "
               f"spans nodes ({span})" + (f": rank {rank} asks for cuda:{rank} with {visible} GPU(s) visible" if mine else ""),
               detail=("The global rank counts over every node; only on the first node does it equal the local rank. "
                       f"On this node each rank past {visible - 1} asks for an ordinal that does not exist: "
                       "'RuntimeError: CUDA error: invalid device ordinal' (meta-llama/llama-cookbook#90: "
                       "llama_finetuning.py's torch.cuda.set_device(rank) failed on every node after the first, and "
                       "local_rank fixed it). torchrun's documentation sets the device from LOCAL_RANK."),
               fix=("local_rank = int(os.environ['LOCAL_RANK']); torch.cuda.set_device(local_rank)   # at " + where),
               subjects=[f"path:{first.get('path')}", "RANK", "LOCAL_RANK"],
               evidence={"script": picks[:4], "rank": rank, "world_size": world, "local_world_size": local,
                         "nnodes": nnodes, "visible_gpus": visible})


# Slurm's output environment for a GPU request (sbatch(1)/srun(1) "OUTPUT ENVIRONMENT VARIABLES",
# https://slurm.schedmd.com/srun.html#SECTION_OUTPUT-ENVIRONMENT-VARIABLES): set when the job or step was given GPUs
SLURM_GPU_REQUEST = ("SLURM_GPUS_PER_TASK", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "SLURM_GPUS_ON_NODE", "SLURM_GPUS",
                     "SLURM_GPUS_PER_NODE")


def _slurm_task_given_no_gpu(snap, v):
    """A Slurm task whose job asked for GPUs but which sees none, on a host whose NVIDIA driver answers: the task's
    device cgroup (ConstrainDevices) or CUDA_VISIBLE_DEVICES left it without a GPU ('No devices found' from
    nvidia-smi in all but one task of --ntasks=4 --gpus-per-task=1, NVIDIA/deepops#1102). Every CUDA call of the
    rank then fails ('no CUDA-capable device is detected')."""
    env = (snap.get("env") or {}).get("vars") or {}
    if (snap.get("launcher") or {}).get("kind") != "slurm" or not (v.gpus or {}).get("driver_version"):
        return
    asked = {k: env[k] for k in SLURM_GPU_REQUEST if str(env.get(k, "")).strip() not in ("", "0")}
    if not asked:
        return
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    yield error(f"this Slurm task (SLURM_PROCID={env.get('SLURM_PROCID', '?')}) sees no GPU although the job asked for "
                f"GPUs ({', '.join(f'{k}={val}' for k, val in asked.items())})",
                detail=("The NVIDIA driver answers but lists no GPU inside this task"
                        + (f" (CUDA_VISIBLE_DEVICES={cvd!r})" if cvd is not None else "")
                        + ": Slurm's device cgroup gave this task none, so its first CUDA call fails ('no CUDA-capable "
                          "device is detected'). Seen with --gpus-per-task, where only one task of a step got a GPU "
                          "(NVIDIA/deepops#1102)."),
                fix="request GPUs per node and bind them per task instead: #SBATCH --gpus-per-node=N --ntasks-per-node=N "
                    "and srun --gpu-bind=single:1 (or check `scontrol show job -d` for the GPUs each task got)",
                subjects=["CUDA_VISIBLE_DEVICES"] + sorted(asked),
                evidence={"slurm_gpu_request": asked, "visible_gpus": 0, "CUDA_VISIBLE_DEVICES": cvd})


def _slurm_binds_gpus(snap) -> bool:
    """A Slurm launch whose step binds GPUs to its tasks (facts.slurm.slurm_gpu_task_binding)."""
    from ddpdoctor.facts.slurm import slurm_gpu_task_binding  # noqa: PLC0415

    if (snap.get("launcher") or {}).get("kind") != "slurm":
        return False
    return slurm_gpu_task_binding((snap.get("env") or {}).get("vars") or {}) is not None


@check("GPU039", "slurm-per-task-gpu-binding", family="gpu", needs=("gpus", "launcher", "env"))
def slurm_per_task_gpu_binding(snap):
    """Slurm binds each task of this node to its own GPU(s), so the job's ranks here cannot reach each other's GPUs.

    What it checks
        A Slurm step (launcher slurm) that binds GPUs per task: SLURM_GPUS_PER_TASK (or a gpu entry in
        SLURM_TRES_PER_TASK), which implies --tres-bind=gres/gpu:per_task, or SLURM_GPU_BIND /
        SLURM_TRES_BIND naming a binding other than none (data/slurm_env.json gpu_task_binding, from
        SchedMD/slurm doc/man/man1/srun.1); several tasks on this node (SLURM_NTASKS_PER_NODE, the step's
        per-node list, else the local ranks) and this process seeing fewer GPUs than that; and
        SLURM_GRES_FLAGS without allow-task-sharing.

    Why it matters
        Each task sees only its own GPU (as cuda:0), and with the task/cgroup plugin's ConstrainDevices
        cannot open the others. Slurm's own --gres-flags=allow-task-sharing exists for this: "useful when
        using --gpu-bind or --tres-bind=gres/gpu to bind GPUs to specific tasks, but GPU communication
        between tasks is also desired". CUDA IPC between the node's ranks fails: CUDA-aware MPI's
        shared-memory CUDA transport errors out (open-mpi/ompi#11949), and NCCL, which still picks P2P
        toward GPUs it cannot see (src/transport/p2p.cc: "CUDA 10.1 and later can use P2P with invisible
        devices"), may fail to map the peer's memory or lose NVLink (which of the two is not known here).

    Example
        srun --ntasks-per-node=8 --gpus-per-task=1 --gpu-bind=closest python train.py on an 8-GPU node.

    Fix
        srun --gres-flags=allow-task-sharing ... (keeps the binding, lets tasks reach the node's GPUs), or
        bind per node instead (--gpus-per-node=8 --gpu-bind=none) and pick cuda:$SLURM_LOCALID.
    """
    from ddpdoctor.facts.slurm import slurm_gpu_task_binding, slurm_tasks_on_this_node  # noqa: PLC0415

    if (snap.get("launcher") or {}).get("kind") != "slurm":
        return
    env = (snap.get("env") or {}).get("vars") or {}
    binding = slurm_gpu_task_binding(env)
    if binding is None or binding["sharing"]:
        return
    v = view(snap)
    seen = len(v.cmap.visible)
    tasks = slurm_tasks_on_this_node(env) or local_ranks(snap)
    if not seen or not tasks or tasks < 2 or seen >= tasks:
        return
    yield warning(
        f"Slurm binds each of the {tasks} tasks on this node to its own GPU ({binding['by']}={binding['value']}): "
        f"this task sees {seen}, and the ranks cannot reach each other's GPUs (CUDA IPC, peer-to-peer)",
        detail=("Slurm's srun(1): --gres-flags=allow-task-sharing 'Allow tasks access to each GPU within the job's "
                "allocation that is on the same node as the task. This is useful when using --gpu-bind or "
                "--tres-bind=gres/gpu to bind GPUs to specific tasks, but GPU communication between tasks is also "
                "desired' (SchedMD/slurm doc/man/man1/srun.1@284c3b95); --gpus-per-task implies "
                "--tres-bind=gres/gpu:per_task. CUDA-aware MPI's CUDA IPC between the node's ranks fails "
                "(open-mpi/ompi#11949); NCCL still tries P2P toward GPUs it cannot see (src/transport/p2p.cc), so it "
                "may fail to map them or run without NVLink: which one is not known from here."),
        fix=("srun --gres-flags=allow-task-sharing ...   # keep the binding, let tasks reach the node's GPUs\n"
             "# or: srun --gpus-per-node=<n> --gpu-bind=none ... and pick cuda:$SLURM_LOCALID in each task"),
        subjects=subjects([e.nvml for e in v.cmap.visible], binding["by"], "SLURM_GRES_FLAGS"),
        evidence={"binding": binding, "tasks_on_node": tasks, "visible": seen})


def _slurm_local_id_beyond_bound_gpu(snap, v):
    """An srun task bound to one GPU (--gpus-per-task=1, --gpu-bind=single/closest, a cgroup per task) sees it as
    cuda:0, but frameworks that run under srun without torchrun take the local rank from SLURM_LOCALID and open
    cuda:<local rank>: Lightning's SLURMEnvironment.local_rank() returns int(os.environ["SLURM_LOCALID"])
    (Lightning-AI/pytorch-lightning src/lightning/fabric/plugins/environments/slurm.py@ffd8176e89bf), so task 5
    asks for cuda:5 of one visible GPU ("You requested gpu: [0..7] But your machine only has: [0]",
    Lightning-AI/pytorch-lightning#16828; "invalid device ordinal", ACEsuit/mace#435). A LOCAL_RANK set to
    something else (a wrapper that maps every task to 0) says the job already knows, and keeps this quiet."""
    env = (snap.get("env") or {}).get("vars") or {}
    if (snap.get("launcher") or {}).get("kind") != "slurm":
        return
    try:
        local_id = int(str(env.get("SLURM_LOCALID")).strip())
    except ValueError:
        return
    local_rank = env.get("LOCAL_RANK")
    if local_id < 1 or (local_rank is not None and str(local_rank).strip() != str(local_id)):
        return
    seen = v.short(v.cmap.visible[0].nvml)
    yield warning(
        f"srun task with SLURM_LOCALID={local_id} sees one GPU ({seen}): cuda:{local_id} does not exist",
        detail=("Slurm bound this task to one GPU (per-task GPU binding), which the process sees as cuda:0. Code "
                "that takes the local rank from SLURM_LOCALID and opens cuda:<local rank> (Lightning's "
                "SLURMEnvironment, torch.cuda.set_device(local_rank) in srun-launched scripts) fails with "
                "'invalid device ordinal' or Lightning's 'You requested gpu: [...] But your machine only has: [0]'."),
        fix=("#SBATCH --gpus-per-node=<n> --ntasks-per-node=<n>   # every task sees the node's GPUs; or keep the "
             "binding and use cuda:0 in each task"),
        subjects=subjects([v.cmap.visible[0].nvml], "SLURM_LOCALID", "CUDA_VISIBLE_DEVICES"),
        evidence={"SLURM_LOCALID": local_id, "LOCAL_RANK": local_rank, "visible": [v.cmap.visible[0].nvml]})


def _agents_share_host(snap, v, ranks):
    """Several launch agents on this host, each numbering its local ranks from 0 over the same GPUs.

    torchrun gives each agent's workers LOCAL_RANK 0..nproc-1 and passes the parent's CUDA_VISIBLE_DEVICES
    through (torch/distributed/elastic/agent/server/local_elastic_agent.py, _set_local_rank_env, torch 2.13,
    without --virtual-local-rank); agent (group) k > 0
    whose rendezvous host is this host (MASTER_ADDR is loopback or one of its addresses) therefore runs
    beside agent 0, and without a CUDA_VISIBLE_DEVICES of its own its ranks open the GPUs agent 0's do
    (meta-pytorch/torchx#377: `-j 2x2` on one 4-GPU host)."""
    from ddpdoctor.facts import net as netfacts

    launcher = snap.get("launcher") or {}
    group, world = launcher.get("node_rank"), launcher.get("world_size")
    if not (isinstance(group, int) and group >= 1 and isinstance(world, int) and world > ranks):
        return None
    if v.cmap.cvd is not None or netfacts.hosts_counted(snap):
        return None
    here = netfacts.master_here(snap)
    if not here:
        return None
    used = [e.nvml for e in v.cmap.visible[:ranks]]
    agents = world // ranks if world % ranks == 0 else None
    return warning(
        f"launch agent {group} runs on the host of rank 0's store ({here}): its local ranks 0..{ranks - 1} use the "
        f"same GPUs as agent 0's",
        detail=(f"torchrun numbers the local ranks of every agent from 0 and sets no CUDA_VISIBLE_DEVICES, so with "
                f"{agents or 'several'} agents on one host (WORLD_SIZE={world}, LOCAL_WORLD_SIZE={ranks}) "
                f"cuda:LOCAL_RANK names " + ", ".join(v.short(i) for i in used) + " in each of them: two ranks per "
                "GPU (NCCL: 'Duplicate GPU detected'), the other GPUs idle. If the agents are on different hosts, "
                "MASTER_ADDR is the error instead (NET002)."),
        fix=("one agent per host: torchrun --nnodes 1 --nproc-per-node <all GPUs>; or give each agent its own GPUs: "
             "CUDA_VISIBLE_DEVICES=<agent k's GPUs> torchrun ..."),
        subjects=subjects(used, "LOCAL_RANK", "MASTER_ADDR"),
        evidence={"group_rank": group, "world_size": world, "local_world_size": ranks, "master_here": here,
                  "gpus_in_use_by_each_agent": used})


@check("GPU019", "visible-devices-not-found", family="gpu", needs=("env",), reads=("gpus", "lint", "packages", "pci"))
def visible_devices_not_found(snap):
    """CUDA_VISIBLE_DEVICES names a GPU this machine does not have.

    What it checks
        Each CUDA_VISIBLE_DEVICES entry against the NVML devices: an index beyond the count, a
        GPU UUID (or UUID prefix) or MIG UUID that is not here, an ambiguous prefix. The syntax
        itself (empty entries, duplicates) is judged by the environment checks.

    Why it matters
        CUDA stops at the first entry it cannot resolve and silently drops it and everything
        after it, so a job sees fewer GPUs than it asked for, or none ("No CUDA GPUs are
        available"). UUIDs copied from another node are the classic cause.

        With `check --script train.py`, GPU ordinals the script names as literals ('cuda:1', `.cuda(1)`,
        `set_device(2)`, `device_ids=[0, 1, 2, 3]`, an argparse `--gpu_ids` default '1,3', a `num_gpus` default 4,
        `TRAIN_DEVICES = [0, 1]`, Lightning's `Trainer(devices=4)` or `Trainer(gpus=[0, 3])`, which ask for ordinals 0..3 or 0 and 3:
        Lightning-AI/pytorch-lightning device_parser.py @eddba2fc) are compared with the GPUs this process will see: one at or past their count
        is a warning (a default may be overridden on the command line); 8 of the 20 reports of batches 62-63
        (DFDNet#7 default (1,3) on one 2080 Ti, SSD-Pytorch#10 TRAIN_DEVICES [0,1], EfficientDet#216 num_gpus on Colab).
        A literal the script itself sets (`os.environ["CUDA_VISIBLE_DEVICES"] =
        "3,2,1,0"`; setdefault only when the shell sets none) is judged the same way: CUDA reads the variable from
        the process environment at its first call, so the script's value replaces the shell's (yqyao/SSD_Pytorch#4:
        a train.py written for 4 GPUs on a 2-GPU machine). A set that comes after a call which initialised CUDA
        (`torch.cuda.is_available()` earlier in the same function, or a module-level `.cuda()` above it) is a
        warning of its own: cuInit read the variable already, so the set changes nothing
        (KaiyangZhou/deep-person-reid#267: gpu_devices=0 still ran on all four GPUs).
        With `check --config FILE` (YAML/JSON: accelerate's `gpu_ids`, Lightning's `devices`/`gpus`, `num_gpus`,
        `device_ids`, 'cuda:N' values), the config's GPU ids and counts are judged as the script's literals.
        The training program's own GPU options on its command line (`-gpuid 1`, `--gpu_ids 0,1`, `--device cuda:1`,
        `--num_gpus 4`; read from check's launch command, or given as `ddpdoctor check -- python train.py ...`) are
        judged the same way, before the script's defaults, which they override (OpenNMT/OpenNMT-py#609: -gpuid 1
        on a node whose scheduler made one GPU visible).

        On a ROCm node (torch built for HIP, or AMD GPUs on the bus), ROCR_VISIBLE_DEVICES set together
        with HIP_VISIBLE_DEVICES or CUDA_VISIBLE_DEVICES: ROCr applies its mask first and renumbers the GPUs
        it keeps from 0, and HIP indexes that shorter list (torch/cuda/__init__.py _parse_visible_devices;
        data/visible_devices.json), so a launcher writing the node's index into both leaves a worker none
        ('No HIP GPUs are available', Parsl/parsl#3858): an error when none is left, a warning when fewer.

    Example
        CUDA_VISIBLE_DEVICES=0,1,8 on a 4-GPU node: CUDA shows cuda:0 and cuda:1 only.

    Fix
        `nvidia-smi -L` lists this node's indices and UUIDs; set CUDA_VISIBLE_DEVICES from it.
    """
    hip = list(_hip_masks_stacked(snap))
    yield from hip
    if hip or snap.missing_reason(("gpus",)):
        return  # the NVIDIA judgements below need the NVML devices (an AMD node has none)
    v = view(snap)
    if v.cmap.problem_kind != "missing":
        found = list(_script_visible_devices(snap, v))
        yield from found
        yield from _script_late_visible_devices(snap, v)
        if not found:
            command = list(_command_gpu_ordinals(snap, v))
            yield from command
            if not command:
                yield from _script_gpu_ordinals(snap, v)
        return
    kept = len(v.cmap.visible)
    ignored = f" and ignores {', '.join(v.cmap.ignored)} after it" if v.cmap.ignored else ""
    # check29: the value copied from SLURM_JOB_GPUS (the node's own GPU indices) into a job whose cgroup shows CUDA and
    # NVML only its GPUs, numbered from 0: the copy is the cause, and SLURM's own CUDA_VISIBLE_DEVICES is the fix
    job_gpus = str(v.env.get("SLURM_JOB_GPUS") or v.env.get("SLURM_STEP_GPUS") or "").strip()
    copied = bool(job_gpus) and job_gpus.replace(" ", "") == str(v.cmap.cvd or "").replace(" ", "")
    yield error(f"CUDA_VISIBLE_DEVICES={v.cmap.cvd}: {v.cmap.problems[0]}"
                + (" (copied from SLURM_JOB_GPUS: the node's indices, not this job's)" if copied else ""),
                detail=(f"CUDA stops at that entry{ignored}: this process will see {kept} GPU(s)"
                        + (" (" + ", ".join(v.short(e.nvml) for e in v.cmap.visible) + ")" if kept else
                           ", so torch.cuda.is_available() is False") + "."
                        + (f" SLURM_JOB_GPUS={job_gpus} numbers the job's GPUs as the node does; inside the job's "
                           f"device cgroup CUDA and NVML see only them, numbered 0..{len(v.devices) - 1}, and SLURM "
                           "sets CUDA_VISIBLE_DEVICES to those itself (gres/gpu)." if copied else "")),
                fix=("unset the line that copies SLURM_JOB_GPUS into CUDA_VISIBLE_DEVICES: SLURM sets the job's own "
                     "value   # nvidia-smi -L lists what the job sees" if copied else
                     "nvidia-smi -L   # then: export CUDA_VISIBLE_DEVICES=<indices or UUIDs from that list>"),
                subjects=["CUDA_VISIBLE_DEVICES"] + subjects(e.nvml for e in v.cmap.visible),
                evidence={"CUDA_VISIBLE_DEVICES": v.cmap.cvd, "visible": [e.nvml for e in v.cmap.visible],
                          "problems": v.cmap.problems, "from_slurm_job_gpus": copied})


def _hip_masks_stacked(snap):
    """GPU019 for a ROCm process given both ROCR_VISIBLE_DEVICES and HIP_/CUDA_VISIBLE_DEVICES (facts.cuda_map
    hip_mask_stack, data/visible_devices.json): the second indexes what the first left, renumbered from 0."""
    from ddpdoctor.facts.cuda_map import hip_mask_stack
    from ddpdoctor.facts.env import env_of

    build = (snap.get("packages") or {}).get("torch_build") or {}
    amd = (snap.get("pci") or {}).get("amd_gpus") or []
    if not (build.get("hip") or amd):
        return
    stack = hip_mask_stack(env_of(snap))
    if not stack or not stack["beyond"]:
        return
    kept, var, rocr = stack["kept"], stack["var"], stack["rocr"]
    make = error if kept == 0 else warning
    yield make(f"ROCR_VISIBLE_DEVICES={rocr} with {var}={stack['value']}: the second mask indexes the "
               f"{stack['rocr_count']} GPU(s) the first left, so index {stack['beyond'][0]} names none and this "
               f"process sees {kept} GPU(s)",
               detail=("ROCm applies ROCR_VISIBLE_DEVICES first (the ROCr runtime) and renumbers the GPUs it keeps from "
                       f"0; HIP then reads {var} as indices into that list, not the node's. A launcher that writes the "
                       "node's index into both (one GPU per worker) leaves each worker none"
                       + (f": torch.cuda.device_count() is 0 and the first .to('cuda') raises '{stack['message']}'."
                          if kept == 0 else f": HIP stops at that entry and keeps the {kept} before it.")),
               fix=(f"set one mask only: export ROCR_VISIBLE_DEVICES={rocr}; unset {var}   # or keep both with {var} "
                    f"counting from 0 ({','.join(str(i) for i in range(stack['rocr_count']))})"),
               subjects=["ROCR_VISIBLE_DEVICES", var],
               evidence={"ROCR_VISIBLE_DEVICES": rocr, var: stack["value"], "rocr_count": stack["rocr_count"],
                         "kept": kept, "beyond": stack["beyond"]})


def _command_gpu_ordinals(snap, v):
    """GPU019 for GPU ordinals the training program's command line asks for (facts.launch.gpu_ordinals_asked:
    '-gpuid 1', '--gpu_ids 0,1', '--device cuda:1', '--num_gpus 4') beyond the GPUs this process will see."""
    from ddpdoctor.facts.launch import gpu_ordinals_asked

    asked = gpu_ordinals_asked(snap)
    if not asked or not v.devices:
        return
    count = len(v.cmap.visible)
    beyond = [a for a in asked if a[0] >= count]
    if not beyond or count == 0:
        return
    top, written, program = max(beyond, key=lambda a: a[0])
    cvd = v.cmap.cvd
    yield warning(f"{written} asks for GPU {top}, but this process will see {count} GPU(s)"
                  + (f" (CUDA_VISIBLE_DEVICES={cvd})" if cvd is not None else ""),
                  detail=("CUDA numbers the visible GPUs from 0" + (f", so under CUDA_VISIBLE_DEVICES={cvd} the "
                          f"program's GPU 0 is NVML GPU {v.cmap.visible[0].nvml}" if cvd is not None and count else "")
                          + f": ordinal {top} does not exist here, and the program fails with 'CUDA error: invalid "
                          "device ordinal' (set_device, .cuda(N), .to) or 'AssertionError: Invalid device id' "
                          "(DataParallel) (OpenNMT/OpenNMT-py#609: -gpuid 1 with one GPU made visible)."),
                  fix=(f"ask for ordinals below {count}: the program numbers the GPUs CUDA_VISIBLE_DEVICES leaves it from 0"
                       + (f" (e.g. {written.rsplit(' ', 1)[0]} 0)" if count == 1 else "") + "; nvidia-smi -L lists "
                       "this machine's GPUs"),
                  subjects=["arg:" + written.split(" ")[1].lstrip("-")] + (["CUDA_VISIBLE_DEVICES"] if cvd is not None else []),
                  evidence={"asked": [{"ordinal": a[0], "option": a[1]} for a in beyond[:8]], "visible_gpus": count,
                            "CUDA_VISIBLE_DEVICES": cvd})


def _script_gpu_ordinals(snap, v):
    """GPU019 for GPU ordinals the training script names as literals (lint.scriptfacts gpu_indices)."""
    facts = lint_facts(snap)
    named = [e for e in facts.get("gpu_indices") or () if isinstance(e, dict) and isinstance(e.get("index"), int)]
    if not named or not v.devices:
        return
    count = len(v.devices)
    for e in facts.get("env_sets") or ():  # the script's own CUDA_VISIBLE_DEVICES decides what it sees
        if isinstance(e, dict) and e.get("name") == "CUDA_VISIBLE_DEVICES" and e.get("how") != "setdefault":
            count = len(resolve(dict(v.env, CUDA_VISIBLE_DEVICES=str(e.get("value"))), snap.get("gpus")).visible)
    beyond = [e for e in named if e["index"] >= count]
    if not beyond or count == 0:
        return
    top = max(beyond, key=lambda e: e["index"])
    where = _where(top)
    yield warning(f"{where} names GPU {top['index']} ({top.get('what')}), but this process will see {count} GPU(s)",
                  detail=("CUDA numbers the visible GPUs from 0, so ordinal " + str(top["index"]) + " does not exist here: "
                          "'CUDA error: invalid device ordinal' (set_device, .to/.cuda) or 'AssertionError: Invalid "
                          "device id' (DataParallel). The literal may be a default the command line overrides."
                          + (f" Also: {', '.join(others)}." if (others := sorted(
                              {str(e.get('what')) for e in beyond} - {str(top.get('what'))})) else "")),
                  fix=f"change {where} to ordinals below {count} (or pass them on the command line); nvidia-smi -L lists this "
                      "machine's GPUs",
                  subjects=[f"path:{top.get('path')}"],
                  evidence={"script": beyond[:8], "visible_gpus": count})


def _script_late_visible_devices(snap, v):
    """GPU019 for CUDA_VISIBLE_DEVICES set by the script after it initialised CUDA (lint.scriptfacts late_env_sets):
    the driver read the variable at cuInit, so the set changes nothing."""
    facts = lint_facts(snap)
    late = [e for e in facts.get("late_env_sets") or () if isinstance(e, dict)
            and e.get("name") == "CUDA_VISIBLE_DEVICES" and isinstance(e.get("cuda_init"), dict)]
    if not late:
        return
    e = late[0]
    where, init = _where(e), e["cuda_init"]
    seen = len(v.cmap.visible)
    shell = v.env.get("CUDA_VISIBLE_DEVICES")
    value = e.get("value") if e.get("value") is not None else e.get("text")
    yield warning(f"{where} sets CUDA_VISIBLE_DEVICES after {init.get('call')} at line {init.get('line')} initialised "
                  "CUDA: the set has no effect",
                  detail=("The CUDA driver reads CUDA_VISIBLE_DEVICES once, when CUDA initialises (cuInit; "
                          "torch.cuda.is_available() and device_count() initialise it), so setting it to "
                          f"{value} afterwards does not change the GPUs this process sees: {seen} GPU(s)"
                          + (f" (the shell's CUDA_VISIBLE_DEVICES={shell})" if shell is not None else
                             ", every GPU of the machine") + ". Work meant for the chosen GPUs runs on GPU 0 of "
                          "those, and ordinals past the intended count still resolve."),
                  fix=(f"move {where} above the first CUDA call (to the top of the script, before `import torch` to "
                       "be safe), or set it in the shell: CUDA_VISIBLE_DEVICES=<ids> python ..."),
                  subjects=["CUDA_VISIBLE_DEVICES", f"path:{e.get('path')}"],
                  evidence={"script": e, "visible_gpus": seen, "later_sets": late[1:4]})


def _script_visible_devices(snap, v):
    """GPU019 for a CUDA_VISIBLE_DEVICES literal set by the training script (lint.scriptfacts, `check --script`)."""
    facts = lint_facts(snap)
    sets = [e for e in facts.get("env_sets") or () if isinstance(e, dict) and e.get("name") == "CUDA_VISIBLE_DEVICES"]
    if v.env.get("CUDA_VISIBLE_DEVICES") is not None:
        sets = [e for e in sets if e.get("how") != "setdefault"]  # setdefault keeps the shell's value
    for e in sets:
        env = dict(v.env)
        env["CUDA_VISIBLE_DEVICES"] = str(e.get("value"))
        cmap = resolve(env, snap.get("gpus"))
        if cmap.problem_kind != "missing":
            continue
        where = _where(e)
        kept = len(cmap.visible)
        yield error(f"{where} sets CUDA_VISIBLE_DEVICES={cmap.cvd}: {cmap.problems[0]}",
                    detail=("The script sets the variable before CUDA starts, so its value replaces the shell's. CUDA "
                            "stops at that entry" + (f" and ignores {', '.join(cmap.ignored)} after it" if cmap.ignored
                                                     else "") + f": the script will see {kept} GPU(s)"
                            + ("." if kept else ", so torch.cuda.is_available() is False ('No CUDA GPUs are "
                               "available').")),
                    fix=f"nvidia-smi -L   # then change {where} to this machine's indices (or delete the line and "
                        "set CUDA_VISIBLE_DEVICES in the shell)",
                    subjects=["CUDA_VISIBLE_DEVICES", f"path:{e.get('path')}"],
                    evidence={"script": e, "CUDA_VISIBLE_DEVICES": cmap.cvd,
                              "visible": [x.nvml for x in cmap.visible], "problems": cmap.problems})
        return


# NCCL's path types (src/graph/topo.h), nearest first, and the legacy integer levels of NCCL_P2P_LEVEL /
# NCCL_NET_GDR_LEVEL (src/graph/paths.cc levelsOldToNew: 0 LOC, 1 PIX, 2 PXB, 3 PHB, 4-5 SYS).
PATHS = ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "PXN", "P2C", "PHB", "SYS")
LEGACY_LEVELS = ("LOC", "PIX", "PXB", "PHB", "SYS", "SYS")
# NVML's topology of a GPU pair, as the NCCL path NCCL computes for it over PCIe.
NVML_PATH = {"NVML_TOPOLOGY_INTERNAL": "PIX", "NVML_TOPOLOGY_SINGLE": "PIX", "NVML_TOPOLOGY_MULTIPLE": "PXB",
             "NVML_TOPOLOGY_HOSTBRIDGE": "PHB", "NVML_TOPOLOGY_NODE": "PHB", "NVML_TOPOLOGY_SYSTEM": "SYS"}
NCCL_DEFAULT_P2P_LEVEL = "PXB"


def nccl_level(raw) -> Optional[str]:
    """The path type an NCCL_*_LEVEL value names, or None when NCCL would not accept it (NCCL003)."""
    text = str(raw or "").strip().upper()
    if text in PATHS:
        return text
    if text.isdigit():
        return LEGACY_LEVELS[min(int(text), len(LEGACY_LEVELS) - 1)]
    return None


def _pair_path(pair: dict) -> Optional[str]:
    if nvlink_ok(pair):
        return "NVL"
    return NVML_PATH.get(str(pair.get("topology"))) if p2p(pair, "read") == "OK" else None


def _rank(path: str) -> int:
    return PATHS.index(path)


@check("GPU020", "nccl-level-below-topology", reads=("launcher", "pci"), family="gpu", needs=("gpus",),
       catalogue=("C7",))
def nccl_level_below_topology(snap):
    """An NCCL P2P, NET or NVLS tuning variable turns off a path this machine really has.

    What it checks
        NCCL_P2P_LEVEL (the farthest GPU-to-GPU path over which NCCL may use P2P) against every
        pair of visible GPUs whose P2P works, at the path NCCL sees between them (NVL for NVLink,
        else NVML's PCIe distance: PIX, PXB, PHB, SYS); only pairs NCCL would use by default count:
        NVLink or up to PXB, and up to SYS on an AMD host with at most two GPUs (NCCL 2.23.4 and
        later; before, on any AMD host), where NCCL's own default reaches across the host bridge
        (src/graph/paths.cc ncclTopoCheckP2p at 5067397c) - so NCCL_P2P_LEVEL=NVL, NVLink only,
        turns off a 2-GPU PCIe box's P2P (noonghunna/club-3090#291). NCCL_NET_GDR_LEVEL=LOC (GPUDirect RDMA off) on a multi-node job with
        RDMA NICs. NCCL_NVLS_ENABLE=0 on Hopper or newer GPUs behind NVSwitch. Levels are the names
        LOC < NVL < PIX < PXB < PHB < SYS or NCCL's legacy integers (0 LOC, 1 PIX, 2 PXB, 3 PHB,
        4 and 5 SYS; src/graph/paths.cc).

    Why it matters
        NCCL uses a transport only where the path is no farther than the level: NCCL_P2P_LEVEL=LOC
        disables P2P even over NVLink, and NCCL_P2P_LEVEL=PIX disables it between GPUs behind two
        PCIe switches; all-reduce then copies through host memory at a fraction of the bandwidth.
        NCCL_NET_GDR_LEVEL=LOC stages every inter-node transfer through host memory. These values
        come from forum answers for other machines (NVIDIA/nccl#1127, #2079) and stay in job
        scripts; NCCL003 only checks that they are valid words.

    Example
        export NCCL_P2P_LEVEL=LOC on a DGX A100 (every GPU pair is an NVLink path through NVSwitch).

    Fix
        unset NCCL_P2P_LEVEL   # NCCL picks the level from the topology; or raise it to the pairs' path
        (NVL for NVLink pairs, PXB for GPUs behind PCIe switches).
    """
    v = view(snap)
    env = v.env
    raw = env.get("NCCL_P2P_LEVEL")
    level = nccl_level(raw) if raw is not None else None
    if level is not None and len(v.devices) >= 2:
        from ddpdoctor.facts.net import nccl_p2p_level_sys

        # NCCL's own default (src/graph/paths.cc ncclTopoCheckP2p): PXB, but SYS on an AMD x86 host that joins at
        # most two GPUs (from 2.23.4-1, 68b54236) or any number of them (before; Intel, Zhaoxin and ARM: PXB)
        default = _rank("SYS" if nccl_p2p_level_sys(snap, len(v.devices)) else NCCL_DEFAULT_P2P_LEVEL)
        lost = [(p, path) for p in v.pairs for path in [_pair_path(p)]
                if path is not None and _rank(path) <= default and _rank(path) > _rank(level)]
        if lost:
            gpus = sorted({p["a"] for p, _ in lost} | {p["b"] for p, _ in lost})
            paths = sorted({path for _, path in lost}, key=_rank)
            need = paths[-1]
            named = raw if str(raw).strip().upper() == level else f"{raw} ({level})"
            yield warning(f"NCCL_P2P_LEVEL={named} turns off P2P between {len(lost)} GPU pair(s) whose "
                          f"{'/'.join(paths)} path works",
                          detail=("NCCL uses P2P only up to the level's path; " + "; ".join(
                              v.pair_text(p) for p, _ in lost[:6]) + (" ..." if len(lost) > 6 else "")
                              + f" would use P2P without it. With {level}, NCCL copies through host memory instead."),
                          fix=f"unset NCCL_P2P_LEVEL   # NCCL chooses from the topology; or at least: "
                              f"export NCCL_P2P_LEVEL={need}",
                          env_fix={"NCCL_P2P_LEVEL": None},
                          subjects=["NCCL_P2P_LEVEL"] + subjects(gpus),
                          evidence={"NCCL_P2P_LEVEL": raw, "level": level, "lost_pairs": [[p["a"], p["b"], path]
                                                                                           for p, path in lost]})
    gdr = env.get("NCCL_NET_GDR_LEVEL")
    launcher = snap.get("launcher") or {}
    nnodes, world, local = launcher.get("nnodes"), launcher.get("world_size"), launcher.get("local_world_size")
    multi = (isinstance(nnodes, int) and nnodes > 1) or (isinstance(world, int) and isinstance(local, int)
                                                         and world > local)
    rdma = ((snap.get("pci") or {}).get("rdma_devices") or []) if "pci" in snap else []
    if gdr is not None and nccl_level(gdr) == "LOC" and multi and rdma and v.devices:
        yield warning(f"NCCL_NET_GDR_LEVEL={gdr} turns GPUDirect RDMA off on a {nnodes or 'multi'}-node job with "
                      f"{len(rdma)} RDMA NIC(s)",
                      detail=("Every inter-node transfer is staged through host memory instead of going NIC <-> GPU "
                              f"directly (RDMA devices: {', '.join(rdma[:4])})."),
                      fix="unset NCCL_NET_GDR_LEVEL   # NCCL chooses GPUDirect RDMA by the GPU-NIC distance",
                      env_fix={"NCCL_NET_GDR_LEVEL": None},
                      subjects=["NCCL_NET_GDR_LEVEL"] + subjects(d["index"] for d in v.devices),
                      evidence={"NCCL_NET_GDR_LEVEL": gdr, "rdma_devices": rdma, "nnodes": nnodes})
    nvls = env.get("NCCL_NVLS_ENABLE")
    if nvls is not None and str(nvls).strip() == "0" and len(v.devices) >= 2:
        hopper = [d for d in v.devices if isinstance(d.get("cuda_capability"), list)
                  and d["cuda_capability"][:1] and d["cuda_capability"][0] >= 9]
        buses = {str(d.get("pci_bus_id")).lower() for d in v.gpus.get("devices") or []}
        switched = [d for d in hopper if any(l.get("active") and l.get("remote_pci_bus_id")
                                             and str(l["remote_pci_bus_id"]).lower() not in buses
                                             for l in d.get("nvlinks") or [])]
        if len(switched) >= 2:
            yield warning(f"NCCL_NVLS_ENABLE=0 turns off NVLink SHARP on {len(switched)} GPUs behind NVSwitch",
                          detail=("Hopper and newer GPUs behind NVSwitch reduce in the switch (NVLS), NCCL's fastest "
                                  "all-reduce on these systems; with it off NCCL falls back to rings and trees."),
                          fix="unset NCCL_NVLS_ENABLE",
                          env_fix={"NCCL_NVLS_ENABLE": None},
                          subjects=["NCCL_NVLS_ENABLE"] + subjects(d["index"] for d in switched),
                          evidence={"NCCL_NVLS_ENABLE": nvls, "gpus": [d["index"] for d in switched]})


DMABUF_KERNEL = (5, 12)  # ibv_reg_dmabuf_mr: RDMA dma-buf support came in Linux 5.12
# NVIDIA/nccl v2.22.3-1 (178b6b7590) src/transport/net_ib.cc:614: ncclIbGdrSupport looks only for
# /sys/kernel/mm/memory_peers/nv_mem[_nc]/version (nv_peer_mem); v2.23.4-1 (68b542363f) net_ib.cc:694 also takes
# /sys/module/nvidia_peermem/version. An nvidia-peermem that registers no nv_mem entry is invisible to older NCCL.
NCCL_SEES_NVIDIA_PEERMEM_SINCE = (2, 23, 4)


def _kernel(text) -> tuple:
    import re  # noqa: PLC0415

    m = re.match(r"(\d+)\.(\d+)", str(text or ""))
    return (int(m.group(1)), int(m.group(2))) if m else ()


def _peermem_unseen_by_old_nccl(snap, gdr: dict, pci: dict):
    """nvidia-peermem is loaded but registers no nv_mem entry, and the NCCL here predates 2.23.4, whose GDR probe
    is the first to look at /sys/module/nvidia_peermem: GDR is switched off although the module is there."""
    from ddpdoctor.facts.net import nccl_version_of  # noqa: PLC0415

    nccl = nccl_version_of(snap)
    if nccl is None or tuple(nccl) >= NCCL_SEES_NVIDIA_PEERMEM_SINCE:
        return
    rdma = pci.get("rdma_devices") or []
    shown = ".".join(map(str, nccl))
    yield warning(f"NCCL {shown} will not see the loaded nvidia-peermem module: it disables GPU Direct RDMA for "
                  f"{', '.join(rdma[:4])} and stages inter-node traffic through host memory",
                  detail=("NCCL before 2.23.4 decides GDR support from /sys/kernel/mm/memory_peers/nv_mem[_nc]/version "
                          "only (the old nv_peer_mem module's entries; NVIDIA/nccl v2.22.3-1 src/transport/net_ib.cc:614); "
                          "2.23.4 added /sys/module/nvidia_peermem/version (net_ib.cc:694). Here nvidia_peermem is loaded "
                          "and no nv_mem entry exists, so NCCL logs 'GPU Direct RDMA Disabled for HCA' and bandwidth "
                          "between nodes drops several-fold (NVIDIA/nccl#1676: DGX OS 25.01 replaced nv_peer_mem with "
                          "nvidia-peermem; 2-node all_reduce fell from ~180 to ~10 GB/s)."),
                  fix=("pip install -U 'nvidia-nccl-cu12>=2.23.4'   # or a torch whose NCCL is 2.23.4+; or load the "
                       "nv_peer_mem module that creates /sys/kernel/mm/memory_peers/nv_mem"),
                  subjects=[f"rdma:{d}" for d in rdma[:8]] + ["pkg:nccl"],
                  evidence={"gdr": gdr, "nccl": shown, "rdma_devices": rdma})


@check("GPU030", "gpu-direct-rdma-unavailable", family="gpu", needs=("gpus", "pci", "launcher"), reads=("host", "env"))
def gpu_direct_rdma_unavailable(snap):
    """NCCL cannot use GPU Direct RDMA on this node: no peer-memory module, and no sign DMA-BUF can stand in.

    What it checks
        On a job that spans several nodes, with RDMA devices NCCL will use: the peer-memory modules
        NCCL looks for before it registers GPU memory with the NIC (ncclIbGdrSupport,
        src/transport/net_ib/gdr.cc: /sys/kernel/mm/memory_peers/nv_mem[_nc]/version or
        /sys/module/nvidia_peermem/version; NCCL before 2.23.4 reads only the nv_mem entries, so an
        nvidia-peermem without them is reported with such an NCCL). NCCL's other route, DMA-BUF (ibv_reg_dmabuf_mr, tested
        at run time), needs Linux 5.12 or later and the NVIDIA open kernel module; where both are
        known to hold, nothing is reported.

    Why it matters
        Without GPU Direct RDMA every inter-node transfer is staged through host memory: NCCL logs
        "GPU Direct RDMA Disabled for HCA", shows the NIC-GPU path as PHB and runs well below the
        network's bandwidth (NVIDIA/nccl#897, #489, #1343: fixed by `modprobe nvidia-peermem`).

    Example
        Two 8-GPU InfiniBand nodes, `lsmod | grep peermem` empty on one of them.

    Fix
        sudo modprobe nvidia-peermem; echo nvidia-peermem | sudo tee /etc/modules-load.d/nvidia-peermem.conf
    """
    from ddpdoctor.facts.net import multi_node, nccl_ib_wanted  # noqa: PLC0415

    pci = snap.get("pci") or {}
    gdr = pci.get("gdr")
    env = view(snap).env
    if not isinstance(gdr, dict) or not multi_node(snap) or not nccl_ib_wanted(env, pci):
        return
    if gdr.get("nvidia_peermem") and not gdr.get("nv_mem") and not gdr.get("nv_mem_nc"):
        yield from _peermem_unseen_by_old_nccl(snap, gdr, pci)
        return
    if gdr.get("nv_mem") or gdr.get("nv_mem_nc") or gdr.get("nvidia_peermem"):
        return
    kernel = _kernel((snap.get("host") or {}).get("kernel"))
    open_module = gdr.get("open_kernel_module")
    if open_module is True and kernel and kernel >= DMABUF_KERNEL:
        return  # NCCL can use DMA-BUF instead
    why = ("the kernel is older than 5.12, so DMA-BUF is not available either" if kernel and kernel < DMABUF_KERNEL else
           "the NVIDIA kernel module is the proprietary one, which gives NCCL no DMA-BUF for RDMA" if open_module is False
           else "whether DMA-BUF can stand in (Linux 5.12+ and the NVIDIA open kernel module) is not known here")
    rdma = pci.get("rdma_devices") or []
    yield warning(f"no GPU Direct RDMA peer-memory module is loaded for {', '.join(rdma[:4])}: NCCL stages inter-node "
                  "traffic through host memory",
                  detail=("NCCL checks /sys/kernel/mm/memory_peers/nv_mem[_nc]/version and /sys/module/nvidia_peermem/version "
                          "before it registers GPU memory with the NIC (src/transport/net_ib/gdr.cc); none exists, and "
                          f"{why}. NCCL then logs 'GPU Direct RDMA Disabled for HCA' and copies through the CPU."),
                  fix="sudo modprobe nvidia-peermem && echo nvidia-peermem | sudo tee /etc/modules-load.d/nvidia-peermem.conf",
                  subjects=[f"rdma:{d}" for d in rdma[:8]],
                  evidence={"gdr": gdr, "kernel": (snap.get("host") or {}).get("kernel"), "rdma_devices": rdma})
