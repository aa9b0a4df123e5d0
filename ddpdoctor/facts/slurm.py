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
