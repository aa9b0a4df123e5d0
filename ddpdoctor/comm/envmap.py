"""Who am I in the job? Torch's variables, or SLURM's or MPI's mapped onto them (srun or mpirun
without torchrun).

Pure functions over an env mapping, so tests pass dicts.
"""
from __future__ import annotations

import re
from typing import Mapping, Optional


def first_slurm_host(nodelist: str) -> Optional[str]:
    """'node[01-04,07],gpu3' -> 'node01' (what `scontrol show hostnames | head -1` prints)."""
    nodelist = (nodelist or "").strip()
    if not nodelist:
        return None
    m = re.match(r"([^,\[]+)(?:\[([^\]]+)\])?", nodelist)
    if not m:
        return None
    prefix, ranges = m.group(1), m.group(2)
    if not ranges:
        return prefix
    first = ranges.split(",")[0].split("-")[0]
    return prefix + first


MPI_NAMES = {
    "RANK": ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "MV2_COMM_WORLD_RANK"),
    "WORLD_SIZE": ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE"),
    "LOCAL_RANK": ("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "MV2_COMM_WORLD_LOCAL_RANK"),
    "LOCAL_WORLD_SIZE": ("OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "MV2_COMM_WORLD_LOCAL_SIZE"),
}


def torch_env(env: Mapping[str, str]) -> dict:
    """The torch rank variables, filling the missing ones from SLURM_* when running under srun.

    Returns only what could be derived; the caller reports what is still missing. Values that
    are already set win: a user's explicit MASTER_ADDR is never overridden.
    """
    out = {k: env[k] for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                              "MASTER_PORT", "GROUP_RANK") if env.get(k)}
    if "SLURM_PROCID" in env and "TORCHELASTIC_RUN_ID" not in env:
        mapping = {"RANK": "SLURM_PROCID", "WORLD_SIZE": "SLURM_NTASKS", "LOCAL_RANK": "SLURM_LOCALID",
                   "GROUP_RANK": "SLURM_NODEID"}
        for torch_name, slurm_name in mapping.items():
            if torch_name not in out and env.get(slurm_name):
                out[torch_name] = env[slurm_name]
        if "LOCAL_WORLD_SIZE" not in out:
            per_node = env.get("SLURM_NTASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE") or ""
            m = re.match(r"(\d+)", per_node)
            if m:
                out["LOCAL_WORLD_SIZE"] = m.group(1)
        if "MASTER_ADDR" not in out:
            host = first_slurm_host(env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST") or "")
            if host:
                out["MASTER_ADDR"] = host
        if "MASTER_PORT" not in out:
            job = env.get("SLURM_JOB_ID") or "0"
            out["MASTER_PORT"] = str(29500 + int(job) % 1000 if job.isdigit() else 29500)
    elif "TORCHELASTIC_RUN_ID" not in env:
        # mpirun (Open MPI, MPICH/Intel MPI/PMIx): ranks come from the MPI launcher. MASTER_ADDR cannot be
        # derived, so the caller reports it missing unless the user exported it (mpirun -x MASTER_ADDR).
        for torch_name, mpi_names in MPI_NAMES.items():
            if torch_name not in out:
                value = next((env[n] for n in mpi_names if env.get(n)), None)
                if value is not None:
                    out[torch_name] = value
    out.setdefault("LOCAL_RANK", out.get("RANK", "0") if out.get("WORLD_SIZE") == out.get("LOCAL_WORLD_SIZE") else "0")
    return out
