"""The `siblings` section: the other ranks of this job on this host, and the CPUs and GPUs each has.

Under a launcher every local rank is a process with the same job identifier in its environment
(TORCHELASTIC_RUN_ID under torchrun or accelerate, SLURM_JOB_ID and SLURM_STEP_ID under srun). For each
such process of this user this gatherer keeps only what placement needs: its RANK and LOCAL_RANK, its
CUDA_VISIBLE_DEVICES and the CPUs the kernel lets it run on (Cpus_allowed_list in /proc/PID/status:
what numactl, taskset, `srun --cpu-bind` or a cgroup gave it). Nothing else of another process's
environment is read into the snapshot. Bounded: at most MAX_PIDS processes and one second.

This process itself is the `host` section's `affinity`.
"""
from __future__ import annotations

import os
import time
from typing import List, Optional

from ddpdoctor.gather import INT, LIST, OBJ, STR, Sources, gatherer

JOB_KEYS = ("TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "SLURM_STEP_ID")
KEEP = ("RANK", "LOCAL_RANK", "SLURM_PROCID", "SLURM_LOCALID", "CUDA_VISIBLE_DEVICES")
MAX_PIDS = 8192
BUDGET_S = 1.0

FIELDS = {"job": OBJ, "job.*": STR, "ranks": LIST, "ranks[]": OBJ, "ranks[].pid": INT, "ranks[].rank": INT,
          "ranks[].local_rank": INT, "ranks[].cuda_visible_devices": STR, "ranks[].cpus": STR, "scanned": INT}


def cpulist_of(src: Sources, pid) -> Optional[str]:
    try:
        with open(src.path(f"/proc/{pid}/status"), encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Cpus_allowed_list:"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def _int(v) -> Optional[int]:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


@gatherer("siblings", fields=FIELDS)
def gather_siblings(src: Sources) -> dict:
    job = {k: src.environ[k] for k in JOB_KEYS if src.environ.get(k)}
    if not job.get("TORCHELASTIC_RUN_ID") and not job.get("SLURM_JOB_ID"):
        return {"unavailable": "not one rank of a launched job (no TORCHELASTIC_RUN_ID or SLURM_JOB_ID)"}
    try:
        pids = sorted((p for p in os.listdir(src.path("/proc")) if p.isdigit()), key=int)[:MAX_PIDS]
    except OSError as exc:
        return {"unavailable": f"cannot list /proc: {exc.strerror or exc}"}
    me = str(os.getpid())
    until = time.monotonic() + BUDGET_S
    uid = os.getuid() if src.root == "/" else None
    ranks: List[dict] = []
    scanned = 0
    for pid in pids:
        if time.monotonic() > until:
            break
        if pid == me:
            continue
        if uid is not None:
            try:
                if os.stat(src.path(f"/proc/{pid}")).st_uid != uid:
                    continue
            except OSError:
                continue
        scanned += 1
        env = src.environ_of(pid, set(JOB_KEYS) | set(KEEP))
        if not env or any(env.get(k) != v for k, v in job.items()):
            continue
        rank = _int(env.get("RANK", env.get("SLURM_PROCID")))
        local = _int(env.get("LOCAL_RANK", env.get("SLURM_LOCALID")))
        if rank is None and local is None:
            continue  # the launcher itself (torchrun's agent, srun), not a rank
        ranks.append({"pid": int(pid), "rank": rank, "local_rank": local,
                      "cuda_visible_devices": env.get("CUDA_VISIBLE_DEVICES"), "cpus": cpulist_of(src, pid)})
    return {"job": job, "ranks": ranks, "scanned": scanned}
