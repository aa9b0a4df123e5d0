"""SLURM task counts, parsed from the environment SLURM sets."""
from __future__ import annotations

import functools
import json
import os
import re
from typing import Mapping, Optional


DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "slurm_env.json")
MAX_NODES = 65536


@functools.lru_cache(maxsize=1)
def _tasks_per_node_table() -> dict:
    with open(DATA, encoding="utf-8") as fh:
        return json.load(fh)["tasks_per_node"]


def expand_per_node(raw, limit: int = MAX_NODES) -> Optional[list]:
    """A SLURM per-node count list expanded, node by node (data/slurm_env.json tasks_per_node: SLURM's
    uint16_array_to_str / uint32_compressed_to_str write '2(x3),1' for [2, 2, 2, 1]); None when it is not that
    grammar or would name more than `limit` nodes."""
    out: list = []
    for part in str(raw or "").strip().split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?:\(x(\d+)\))?\s*", part)
        if not m:
            return None
        reps = int(m.group(2) or 1)
        if reps < 1 or len(out) + reps > limit:
            return None
        out.extend([int(m.group(1))] * reps)
    return out or None


def tasks_per_node(env: Mapping[str, str]) -> Optional[tuple]:
    """(variable, counts per node) from the step's per-node task list (SLURM_STEP_TASKS_PER_NODE, else
    SLURM_TASKS_PER_NODE), or None when neither is set or readable."""
    for name in _tasks_per_node_table()["variables"]:
        counts = expand_per_node(env.get(name))
        if counts:
            return name, counts
    return None


def slurm_tasks_on_this_node(env: Mapping[str, str]) -> Optional[int]:
    """The tasks SLURM runs on this node: SLURM_NTASKS_PER_NODE when set (the requested count, one number), else this
    node's entry of the per-node list (tasks_per_node, indexed by SLURM_NODEID), else the list's count when every node
    has the same one; None when unknown (the list differs across nodes and this node's index is not known)."""
    counts = expand_per_node(env.get(_tasks_per_node_table()["requested"]))  # one number; read leniently as a list
    if not counts:
        got = tasks_per_node(env)
        if not got:
            return None
        counts = got[1]
    node = str(env.get(_tasks_per_node_table()["node_index"]) or "").strip()
    if node.isdigit() and int(node) < len(counts):
        return counts[int(node)]
    return counts[0] if len(set(counts)) == 1 else None


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


@functools.lru_cache(maxsize=1)
def _gpu_task_binding_table() -> dict:
    with open(DATA, encoding="utf-8") as fh:
        return json.load(fh)["gpu_task_binding"]


def slurm_gpu_task_binding(env: Mapping[str, str]) -> Optional[dict]:
    """How a Slurm step binds GPUs to its tasks (data/slurm_env.json gpu_task_binding: srun.1's --gpus-per-task,
    --gpu-bind, --tres-bind, --gres-flags): {"by": the variable that binds, "value", "sharing": allow-task-sharing
    given} when the step binds GPUs per task; None when nothing binds (no per-task GPU count and no binding, or a
    binding of none, which also turns off --gpus-per-task's implicit one)."""
    t = _gpu_task_binding_table()
    binds = [(v, str(env.get(v) or "").strip()) for v in t["bind_variables"] if str(env.get(v) or "").strip()]
    for var, value in binds:  # "verbose,none", "gres/gpu:none", "gres/gpu:verbose,per_task:1"
        kinds = [k.split(":")[-1] if not k.startswith("gres/") else (k.split(":", 1)[1] if ":" in k else "")
                 for k in value.split(",")]
        if t["unbound"] in [k.split(":")[0] for k in kinds]:
            return None
    by = binds[0] if binds else None
    if by is None:
        per_task = [(v, str(env.get(v) or "").strip()) for v in t["per_task_variables"]]
        by = next(((v, x) for v, x in per_task if x and (v != "SLURM_TRES_PER_TASK" or "gpu" in x)), None)
    if by is None:
        return None
    flags = str(env.get(t["flags_variable"]) or "")
    return {"by": by[0], "value": by[1], "sharing": t["sharing_flag"] in flags}
