"""One reading each of this host's rank count, the world size and this process's rank.

Every reading is a `Reading(value, source)`: the figure and the words saying where it came from,
which checks print as evidence. They prefer what the live process saw (the initialized process
group, the ranks that reported their host to rank 0) over what the launcher's environment implies,
so a `check` snapshot and a preflight snapshot are read the same way and one report never
disagrees with itself about how many ranks share a host.
"""
from __future__ import annotations

import ipaddress
from typing import Any, NamedTuple, Optional

from ddpdoctor.facts.env import env_int, env_of
from ddpdoctor.facts.launch import command_of, per_node_processes, torchrun_nproc
from ddpdoctor.facts.slurm import slurm_tasks_on_this_node

LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1", "0.0.0.0"}
FROM_LAUNCHER = "LOCAL_WORLD_SIZE"
FROM_LOOPBACK = "MASTER_ADDR is a loopback address"
FROM_COMMAND = "the launch command:"
# a rendezvous on a loopback address reaches no other host: every rank runs on this one
LOOPBACK = {"localhost", "127.0.0.1", "::1"}


class Reading(NamedTuple):
    """A figure and where it came from. Unpacks as `(value, source)`."""

    value: Any
    source: str

    def declared(self) -> Optional[int]:
        """The value only when it is known, not inferred: the launcher declared it (LOCAL_WORLD_SIZE),
        or the job rendezvouses on a loopback MASTER_ADDR, which no other host can reach (the old
        `python -m torch.distributed.launch` sets no LOCAL_WORLD_SIZE). None when inferred.
        GPU checks that must not guess how many ranks share the GPUs use this view."""
        return self.value if self.source in (FROM_LAUNCHER, FROM_LOOPBACK) or self.source.startswith(FROM_COMMAND) \
            else None


def _section(snap, name: str) -> dict:
    s = snap.get(name) or {}
    return {} if not isinstance(s, dict) or s.get("unavailable") or s.get("error") else s


def _runtime(snap) -> dict:
    return snap.get("runtime") or {}


def world_size(snap) -> Reading:
    """The number of ranks in the job: the live process group, else the launcher, else WORLD_SIZE,
    else 1."""
    d = _runtime(snap).get("distributed") or {}
    if d.get("initialized") and d.get("world_size"):
        return Reading(int(d["world_size"]), "process group")
    launcher = snap.get("launcher") or {}
    if launcher.get("world_size"):
        return Reading(int(launcher["world_size"]), "launcher")
    env = env_int(env_of(snap), "WORLD_SIZE")
    if env:
        return Reading(env, "WORLD_SIZE")
    return Reading(1, "single process")


def this_rank(snap) -> Reading:
    """This process's global rank: the live process group, else the launcher, else RANK; None when
    nothing says."""
    d = _runtime(snap).get("distributed") or {}
    if d.get("initialized") and d.get("rank") is not None:
        return Reading(int(d["rank"]), "process group")
    launcher = snap.get("launcher") or {}
    if launcher.get("rank") is not None:
        return Reading(int(launcher["rank"]), "launcher")
    env = env_int(env_of(snap), "RANK")
    return Reading(env, "RANK") if env is not None else Reading(None, "unknown")


def local_ranks(snap) -> Reading:
    """How many ranks share this host, and how we know, strongest evidence first:
    in an srun step whose tasks each start torchrun, tasks on this node x the command's --nproc-per-node
    (launch_command_ranks); LOCAL_WORLD_SIZE from the launcher; the ranks that reported this host to rank 0 (preflight);
    WORLD_SIZE / nodes; every rank, when MASTER_ADDR is this host or the ranks were set by hand
    (and MASTER_ADDR is not known to be another host); else 1."""
    launcher = snap.get("launcher") or {}
    launched = launch_command_ranks(snap)
    if launched and launcher.get("kind") == "slurm":  # SLURM's tasks per node count agents, not the ranks they start
        return launched
    lw = launcher.get("local_world_size")
    if isinstance(lw, int) and not isinstance(lw, bool) and lw > 0:
        return Reading(lw, FROM_LAUNCHER)
    rt = _runtime(snap)
    host = rt.get("host")
    peers = _section(snap, "runtime_peers")
    if peers.get("ranks") and host:
        n = sum(1 for f in peers["ranks"].values() if f.get("host") == host)
        if n:
            return Reading(n, f"{n} ranks reported host {host}")
    if launched:
        return launched
    world = launcher.get("world_size")
    nnodes = launcher.get("nnodes")
    addr = str(launcher.get("master_addr") or env_of(snap).get("MASTER_ADDR") or "").strip().lower()
    if addr in LOOPBACK and not (isinstance(nnodes, int) and nnodes > 1):
        w = world_size(snap).value
        if w > 1:
            return Reading(w, FROM_LOOPBACK)
    if world and nnodes:
        return Reading(max(1, world // max(1, nnodes)), "WORLD_SIZE / nodes")
    if rt:
        # In the live process: trust MASTER_ADDR, which says whether rank 0 is here.
        w = world_size(snap).value
        addr = (env_of(snap).get("MASTER_ADDR") or "").strip().lower()
        if w > 1 and (addr in LOCAL_HOSTS or (host and addr == host.lower())):
            return Reading(w, f"MASTER_ADDR={addr} is this host, so all {w} ranks run here")
        return Reading(1, "assumed (no launcher figure)")
    if world and launcher.get("kind") == "manual":
        remote = master_elsewhere(snap)
        if remote:
            # ranks set by something check does not know (an operator such as Kubeflow's PyTorchJob, a custom
            # script, Ray) with rank 0's store on another host: the job spans hosts, and how many of its ranks
            # run here is not said anywhere; count this one rather than guess all of them
            return Reading(1, f"unknown: hand-set ranks and MASTER_ADDR on another host ({remote}); at least this one")
        return Reading(world, "WORLD_SIZE (hand-set ranks, assumed on one host)")
    return Reading(1, "single process")


def launch_command_ranks(snap) -> Optional[Reading]:
    """The ranks on this host as the recorded launch command declares them, before its launcher set LOCAL_WORLD_SIZE:
    torchrun's --nproc-per-node N, times the SLURM tasks on this node when each srun task starts its own torchrun
    (srun runs the command once per task). None when no torchrun command with a number was recorded."""
    nproc = torchrun_nproc(snap)
    if not nproc:
        other = per_node_processes(snap)  # accelerate launch / deepspeed: their own per-node process count
        return Reading(other[0], f"{FROM_COMMAND} {other[1]}") if other else None
    tasks = slurm_tasks_on_this_node(env_of(snap)) if (snap.get("launcher") or {}).get("kind") == "slurm" else None
    if tasks and tasks > 1:
        return Reading(nproc * tasks, f"{FROM_COMMAND} torchrun --nproc-per-node {nproc}, started by each of {tasks} "
                                      "SLURM tasks on this node")
    return Reading(nproc, f"{FROM_COMMAND} torchrun --nproc-per-node {nproc}")


def threads_per_rank(snap, usable: int, nlocal: int) -> tuple:
    """The intra-op thread count each rank will really run with, and why."""
    env = env_of(snap)
    omp = env_int(env, "OMP_NUM_THREADS")
    if omp is not None and omp > 0:
        return omp, "OMP_NUM_THREADS"
    kind = snap["launcher"].get("kind")
    mkl = env_int(env, "MKL_NUM_THREADS")
    if mkl is not None and mkl > 0 and not (kind == "torchrun" and nlocal > 1):
        # torch's default reads MKL_NUM_THREADS when OMP_NUM_THREADS is unset (aten/src/ATen/ParallelCommon.cpp
        # intraop_default_num_threads @ ab331383f8f9); torchrun's OMP_NUM_THREADS=1 comes first
        return mkl, "MKL_NUM_THREADS (OMP_NUM_THREADS unset)"
    if kind == "torchrun" and nlocal > 1:
        return 1, "torchrun sets OMP_NUM_THREADS=1"
    nproc = torchrun_nproc(snap)
    if kind != "torchrun" and nproc and nproc > 1:  # torch/distributed/run.py: unset and nproc_per_node > 1 -> 1
        return 1, f"torchrun sets OMP_NUM_THREADS=1 (the launch command's --nproc-per-node {nproc})"
    acc = command_of(snap, "accelerate")
    if acc is not None and kind in ("none", "manual", None) and not (acc.get("options") or {}).get("cpu"):
        # accelerate launch exports OMP_NUM_THREADS=--num_cpu_threads_per_process, default OMP_NUM_THREADS or 1 on
        # GPUs (huggingface/accelerate src/accelerate/commands/launch.py _validate_launch_command @ 79a84264;
        # utils/launch.py prepare_multi_gpu_env / prepare_simple_launcher_cmd_env set it)
        n = _pos_int((acc.get("options") or {}).get("num_cpu_threads_per_process"))
        return (n, "accelerate launch --num_cpu_threads_per_process") if n else \
            (1, "accelerate launch sets OMP_NUM_THREADS=1 (its --num_cpu_threads_per_process default)")
    ds = command_of(snap, "deepspeed")
    if ds is not None and kind in ("none", "manual", None) and (ds.get("options") or {}).get("bind_cores_to_rank"):
        # deepspeed --bind_cores_to_rank: launch.py sets OMP_NUM_THREADS to each rank's share of the cores
        # (deepspeedai/DeepSpeed deepspeed/launcher/launch.py main(), get_numactl_cmd @ 32c66452); without it the
        # launcher leaves OMP_NUM_THREADS as it is, unlike torchrun, and torch's default below applies
        return max(1, usable // max(1, nlocal)), "deepspeed --bind_cores_to_rank sets OMP_NUM_THREADS = cores per rank"
    # Unset: torch uses one thread per core; accelerate, seeing no LOCAL_WORLD_SIZE under
    # hand-set ranks, also sets it to the core count (measured: "we set it at 2" on 2 cores, 2 ranks).
    quota_capped = _torch_default_past_quota(snap, usable)
    if quota_capped:
        return quota_capped
    if ds is not None and kind in ("none", "manual", None):
        return usable, ("OMP_NUM_THREADS unset: the deepspeed launcher does not set it (deepspeed/launcher/launch.py "
                        "@ 32c66452, only under --bind_cores_to_rank), so torch defaults to one thread per core")
    return usable, "OMP_NUM_THREADS unset: torch defaults to one thread per core"


def _torch_default_past_quota(snap, usable: int) -> Optional[tuple]:
    """torch's default intra-op thread count when a cgroup CPU quota caps the usable cores: ATen's init_num_threads
    (pytorch/pytorch aten/src/ATen/ParallelOpenMP.cpp @ a8425c80b0eb) sets OpenMP to mkl_get_max_threads() in MKL
    builds, else to intraop_default_num_threads() (ParallelCommon.cpp @ ab331383f8f9) -> c10
    TaskThreadPoolBase::defaultNumThreads() -> cpuinfo_get_cores_count(), the host's physical cores
    (c10/core/thread_pool.cpp @ 4f6f90c7c6d4). Neither reads the cgroup's cpu.max / cfs_quota, so a container
    given 4 CPUs of a 64-core host runs 64 threads. The affinity mask is kept as a bound (whether MKL narrows to it was
    not read), so only a quota below both is corrected; None when the physical cores were not gathered."""
    host = snap.get("host") or {}
    quota = (host.get("cgroup") or {}).get("quota_cpus")
    cores = host.get("physical_cores")
    if not isinstance(cores, int) or isinstance(cores, bool) or cores <= 0 or not quota:
        return None
    affinity = host.get("affinity_count") or host.get("cpu_count") or cores
    default = min(cores, affinity)
    if default <= usable:
        return None
    return default, (f"OMP_NUM_THREADS unset: torch defaults to this host's {cores} physical cores"
                     f"{' (bounded by the affinity mask)' if default < cores else ''}, not to the cgroup quota of "
                     f"{quota:g} CPUs")


# The launcher variables ENV010 validates (torch.distributed reads them with int()), with their minimum; MASTER_PORT
# is validated as a TCP port. SET002 and NCCL003 leave these names to ENV010: one finding per malformed value.
RANK_ENV_MINIMUMS = (("RANK", 0), ("LOCAL_RANK", 0), ("GROUP_RANK", 0), ("NODE_RANK", 0), ("WORLD_SIZE", 1),
                     ("LOCAL_WORLD_SIZE", 1), ("GROUP_WORLD_SIZE", 1))
RANK_ENV_NAMES = frozenset([n for n, _ in RANK_ENV_MINIMUMS] + ["MASTER_PORT"])


def master_elsewhere(snap) -> Optional[str]:
    """MASTER_ADDR's address when it resolved to addresses none of which is loopback or this host's own
    (network.master_addr against network.interfaces), else None: unknown counts as not elsewhere."""
    net = snap.get("network") or {}
    resolved = [a for a in ((net.get("master_addr") or {}).get("addresses") or []) if isinstance(a, str)]
    ifaces = [i for i in (net.get("interfaces") or []) if isinstance(i, dict)]
    if not resolved or not ifaces:
        return None
    own = {str(a.get("address")).split("%")[0] for i in ifaces for a in (i.get("addresses") or []) if a.get("address")}
    for a in resolved:
        try:
            ip = ipaddress.ip_address(a.split("%")[0])
        except ValueError:
            return None
        if ip.is_loopback or ip.is_unspecified or a.split("%")[0] in own:
            return None
    return resolved[0]


_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"}


def master_named_elsewhere_on_loopback(snap) -> Optional[str]:
    """Words for a rank other than 0, of ranks set by hand (no local world size, no node count), whose MASTER_ADDR is
    a host name other than this host's own (first labels compared, so an FQDN of this host is this host) that
    resolves here to loopback addresses only; else None. Rank 0 is elsewhere by its name while the name leads back
    to this host: either the name is an alias of this host (all ranks here) or the name resolution of this machine
    maps another node to loopback (a copied /etc/hosts, Debian's `127.0.1.1 <hostname>` line on every node:
    pytorch/pytorch#42879). A guess either way, to be worded as one."""
    launcher = snap.get("launcher") or {}
    env = env_of(snap)
    if launcher.get("local_world_size") or launcher.get("nnodes"):
        return None
    world = launcher.get("world_size") or env_int(env, "WORLD_SIZE") or 0
    rank = this_rank(snap).value
    addr = str(launcher.get("master_addr") or env.get("MASTER_ADDR") or "").strip()
    if world < 2 or not rank or not addr or addr.lower() in _LOOPBACK_NAMES:
        return None
    try:
        ipaddress.ip_address(addr.strip("[]").split("%")[0])
        return None  # an address, not a name
    except ValueError:
        pass
    net = snap.get("network") or {}
    mine = {str(n).split(".")[0].lower() for n in (net.get("hostname"), (net.get("own_hostname") or {}).get("host"))
            if n}
    if not mine or addr.split(".")[0].lower() in mine:
        return None
    resolved = [a for a in ((net.get("master_addr") or {}).get("addresses") or []) if isinstance(a, str)]
    try:
        if not resolved or not all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in resolved):
            return None
    except ValueError:
        return None
    return (f"rank {rank}'s MASTER_ADDR={addr} names another host than this one ({sorted(mine)[0]}) but resolves "
            f"here to loopback only ({', '.join(resolved)})")


def _pos_int(raw) -> Optional[int]:
    try:
        n = int(str(raw).strip())
    except (TypeError, ValueError):
        return None
    return n if n > 0 else None


def ranks_inherit_this_environment(snap) -> bool:
    """True when the local rank count was read from a launch command recorded before its launcher ran (FROM_COMMAND):
    the ranks it starts inherit this process's CUDA_VISIBLE_DEVICES (torchrun passes the agent's environment to
    every worker and only adds LOCAL_RANK & co.: torch/distributed/elastic/agent/server/local_elastic_agent.py
    _start_workers; `accelerate launch` runs torchrun's launcher), so one visible GPU is every rank's GPU, not a
    per-rank binding (a wrapper or srun's --gpu-bind sets the variable per rank, after the launcher, never before)."""
    return local_ranks(snap).source.startswith(FROM_COMMAND) or elastic_worker_shares_devices(snap)


def elastic_worker_shares_devices(snap) -> bool:
    """True when this process is a worker of torchrun's elastic agent in its traditional mode (TORCHELASTIC_RUN_ID set,
    LOCAL_RANK > 0; the agent, when the parent chain was read, is this process's parent: no wrapper between them)
    and the local rank count is the launcher's LOCAL_WORLD_SIZE: the agent passed its own
    CUDA_VISIBLE_DEVICES unchanged to every worker, so all local ranks see this same list (data/launchers.json
    elastic_worker_visible_devices; only --virtual-local-rank gives each worker its own entry, with LOCAL_RANK=0)."""
    from ddpdoctor.facts.launchers import elastic_worker_visible_devices  # noqa: PLC0415

    env = env_of(snap)
    table = elastic_worker_visible_devices()
    if not env.get(table.get("worker_marker") or "TORCHELASTIC_RUN_ID"):
        return False
    if not _pos_int(env.get("LOCAL_RANK")):  # LOCAL_RANK 0 may be --virtual-local-rank's, which binds one GPU each
        return False
    agent = command_of(snap, "torchrun")
    if agent is not None and _pos_int(agent.get("depth")) not in (None, 1):
        return False  # a process between the agent and this one (a wrapper script) may set the variable per rank
    return local_ranks(snap).source == FROM_LAUNCHER
