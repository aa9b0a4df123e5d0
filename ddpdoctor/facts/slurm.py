"""SLURM task counts, parsed from the environment SLURM sets."""
from __future__ import annotations

from typing import Mapping, Optional


def slurm_tasks_on_this_node(env: Mapping[str, str]) -> Optional[int]:
    """SLURM_NTASKS_PER_NODE / SLURM_TASKS_PER_NODE look like '4' or '4(x2),3'."""
    raw = env.get("SLURM_NTASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE") or env.get("SLURM_STEP_TASKS_PER_NODE")
    if not raw:
        return None
    first = raw.split(",")[0].split("(")[0]
    try:
        return int(first)
    except ValueError:
        return None


def slurm_procid_beyond(env: Mapping[str, str]) -> tuple:
    """(SLURM_PROCID, SLURM_NTASKS) when the task id is not below the task count (variables from two
    different steps), else (None, None). ENV011 reports it; ENV003 leaves a rank taken from it alone."""
    def num(name):
        try:
            return int(str(env.get(name)).strip())
        except (TypeError, ValueError):
            return None

    procid, ntasks = num("SLURM_PROCID"), num("SLURM_NTASKS")
    if procid is not None and ntasks is not None and procid >= ntasks and (env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID")):
        return procid, ntasks
    return None, None


def slurm_batch_world_below(env: Mapping[str, str]) -> bool:
    """The batch script of a multi-task allocation exports a WORLD_SIZE below SLURM_NTASKS: ENV011's fault,
    which the other launcher checks leave to it (their findings would be consequences)."""
    try:
        world = int(str(env.get("WORLD_SIZE")).strip())
        ntasks = int(str(env.get("SLURM_NTASKS")).strip())
    except (TypeError, ValueError):
        return False
    return slurm_batch_step(env) and world < ntasks


def slurm_batch_step(env: Mapping[str, str]) -> bool:
    """This process is the batch script of a multi-task SLURM allocation (not one of its srun tasks):
    the rank variables there are a template for the tasks, not this process's own."""
    step = env.get("SLURM_STEP_ID") or env.get("SLURM_STEPID")
    try:
        ntasks = int(str(env.get("SLURM_NTASKS")).strip())
    except (TypeError, ValueError):
        return False
    return bool(env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID")) and step in (None, "batch") and ntasks > 1


def expand_hostlist(nodelist: str, limit: int = 65536) -> Optional[list]:
    """Slurm's hostlist syntax expanded, as `scontrol show hostnames` prints it: 'gpu[01-03,07],login1' ->
    ['gpu01', 'gpu02', 'gpu03', 'gpu07', 'login1'] (zero padding kept). None when it cannot be read or would
    name more than `limit` hosts."""
    import re

    out: list = []
    for m in re.finditer(r"([^,\[\]]+)(?:\[([^\]]*)\])?([^,\[\]]*)", (nodelist or "").strip()):
        prefix, ranges, suffix = m.group(1), m.group(2), m.group(3)
        if ranges is None:
            out.append(prefix + suffix)
            continue
        for part in ranges.split(","):
            lo, _, hi = part.partition("-")
            if not lo.isdigit() or (hi and not hi.isdigit()):
                return None
            width = len(lo)
            for n in range(int(lo), int(hi or lo) + 1):
                out.append(f"{prefix}{n:0{width}d}{suffix}")
                if len(out) > limit:
                    return None
    return [h for h in out if h] or None
