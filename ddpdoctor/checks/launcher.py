"""Launcher and rank-environment checks (catalogue A1-A8): is this process set up to join a job?"""
from __future__ import annotations

from ..model import error
from ..registry import check
from ._util import env_int, env_of


@check("ENV003", "rank-out-of-range", family="launcher", needs=("env",), catalogue=("A4",))
def rank_out_of_range(snap):
    """RANK must be a whole number in [0, WORLD_SIZE).

    What it checks
        RANK and WORLD_SIZE, when both are set, satisfy 0 <= RANK < WORLD_SIZE.

    Why it matters
        The rendezvous waits for WORLD_SIZE distinct ranks 0..WORLD_SIZE-1. A rank outside that
        range never matches a slot: init_process_group hangs until its timeout (30 minutes by
        default) instead of failing. See pytorch/pytorch#52848.

    Example
        RANK=5 WORLD_SIZE=4 python train.py

    Fix
        Let torchrun assign ranks: `torchrun --nproc-per-node 4 train.py`. If you must set them
        by hand, RANK = NODE_RANK * LOCAL_WORLD_SIZE + LOCAL_RANK and stays below WORLD_SIZE.
    """
    env = env_of(snap)
    rank, world = env_int(env, "RANK"), env_int(env, "WORLD_SIZE")
    if rank is None or world is None or world <= 0:
        return
    if not 0 <= rank < world:
        yield error(
            f"RANK={rank} is not below WORLD_SIZE={world}",
            detail=(f"Ranks run from 0 to WORLD_SIZE-1 = {world - 1}. Rank {rank} will never match a slot in the "
                    "rendezvous, so init_process_group blocks until its timeout (30 min by default)."),
            fix=f"torchrun --nproc-per-node {world} train.py   # lets torchrun assign RANK, LOCAL_RANK and WORLD_SIZE",
            subjects=["RANK", "WORLD_SIZE"],
            evidence={"RANK": env.get("RANK"), "WORLD_SIZE": env.get("WORLD_SIZE")},
        )
