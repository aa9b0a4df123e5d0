"""The `launcher` section: which launcher set this process up, and the rank figures it implies.

Pure over the environment (plus this process's own command line), so that `launcher_from_env` is
reused by preflight and the comm/probe workers.
"""
from __future__ import annotations

from ddpdoctor.facts.slurm import slurm_tasks_on_this_node  # noqa: F401 - used below and re-exported

from typing import Mapping, Optional

from ddpdoctor.gather import BOOL, INT, STR, Sources, gatherer


def _int(env: Mapping[str, str], *names: str) -> Optional[int]:
    for name in names:
        raw = env.get(name)
        if raw is None:
            continue
        try:
            return int(str(raw).strip())
        except ValueError:
            return None
    return None


def detect_kind(env: Mapping[str, str]) -> str:
    """One of: torchrun, slurm, mpi, accelerate, deepspeed, manual, none."""
    if env.get("TORCHELASTIC_RUN_ID") or env.get("TORCHELASTIC_RESTART_COUNT") is not None:
        if any(k.startswith("ACCELERATE_") for k in env) and env.get("ACCELERATE_DYNAMO_BACKEND") is not None:
            return "accelerate"
        return "torchrun"
    if env.get("SLURM_PROCID") is not None and (env.get("SLURM_STEP_ID") or env.get("SLURM_STEPID")) not in (None, "batch", "extern"):
        return "slurm"
    if env.get("OMPI_COMM_WORLD_RANK") is not None or env.get("PMI_RANK") is not None or env.get("PMIX_RANK") is not None \
            or env.get("MV2_COMM_WORLD_RANK") is not None:
        return "mpi"
    if env.get("CROSS_RANK") is not None and env.get("LOCAL_SIZE") is not None:
        return "deepspeed"  # deepspeed's launcher/launch.py exports CROSS_RANK/LOCAL_SIZE
    if env.get("ACCELERATE_USE_CPU") is not None or env.get("ACCELERATE_MIXED_PRECISION") is not None and env.get("RANK"):
        return "accelerate"
    if env.get("RANK") is not None or env.get("WORLD_SIZE") is not None:
        return "manual"
    return "none"


def launcher_from_env(env: Mapping[str, str], cmdline: Optional[list] = None) -> dict:
    kind = detect_kind(env)
    rank = _int(env, "RANK")
    world = _int(env, "WORLD_SIZE")
    local_rank = _int(env, "LOCAL_RANK")
    local_world = _int(env, "LOCAL_WORLD_SIZE")
    node_rank = _int(env, "GROUP_RANK", "NODE_RANK")
    nnodes = _int(env, "GROUP_WORLD_SIZE")
    if kind == "slurm":
        rank = rank if rank is not None else _int(env, "SLURM_PROCID")
        world = world if world is not None else _int(env, "SLURM_NTASKS")
        local_rank = local_rank if local_rank is not None else _int(env, "SLURM_LOCALID")
        node_rank = node_rank if node_rank is not None else _int(env, "SLURM_NODEID")
        nnodes = nnodes if nnodes is not None else _int(env, "SLURM_JOB_NUM_NODES", "SLURM_NNODES")
        if local_world is None:
            local_world = slurm_tasks_on_this_node(env)
    elif kind == "mpi":
        rank = rank if rank is not None else _int(env, "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "MV2_COMM_WORLD_RANK")
        world = world if world is not None else _int(env, "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE")
        local_rank = local_rank if local_rank is not None else _int(env, "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                                                       "MV2_COMM_WORLD_LOCAL_RANK")
        local_world = local_world if local_world is not None else _int(env, "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS",
                                                                        "MV2_COMM_WORLD_LOCAL_SIZE")
    elif kind == "deepspeed":
        local_world = local_world if local_world is not None else _int(env, "LOCAL_SIZE")
        node_rank = node_rank if node_rank is not None else _int(env, "CROSS_RANK")
        nnodes = nnodes if nnodes is not None else _int(env, "CROSS_SIZE")
    spawned_by_mp = bool(cmdline) and any("multiprocessing.spawn" in part or "spawn_main" in part for part in cmdline)
    return {
        "kind": kind,
        "rank": rank,
        "world_size": world,
        "local_rank": local_rank,
        "local_world_size": local_world,
        "node_rank": node_rank,
        "nnodes": nnodes,
        "master_addr": env.get("MASTER_ADDR"),
        "master_port": env.get("MASTER_PORT"),
        "elastic_run_id": env.get("TORCHELASTIC_RUN_ID"),
        "spawned_by_multiprocessing": spawned_by_mp,
    }


def _own_cmdline(src: Sources) -> list:
    try:
        with open(src.path("/proc/self/cmdline"), "rb") as fh:
            return [p.decode(errors="replace") for p in fh.read().split(b"\0") if p]
    except OSError:
        return []


# The fields checks read, with their JSON types (the recorded-snapshot schema).
FIELDS = {
    "kind": STR, "rank": INT, "world_size": INT, "local_rank": INT, "local_world_size": INT, "node_rank": INT,
    "nnodes": INT, "elastic_run_id": STR, "spawned_by_multiprocessing": BOOL,
    # issue 13: every recorded field has a declared type, so a hand-edited snapshot is rejected uniformly
    "master_addr": STR, "master_port": STR
}


@gatherer("launcher", when=("check", "preflight"), fields=FIELDS)
def gather_launcher(src: Sources) -> dict:
    return launcher_from_env(src.environ, _own_cmdline(src))
