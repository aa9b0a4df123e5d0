"""A10: checkpoints loaded onto the GPU they were saved from, on every rank."""
from __future__ import annotations

from . import rule
from ._common import is_distributed


@rule("LINT011", "torch-load-without-map-location", catalogue=("A10",))
def torch_load_without_map_location(t):
    """`torch.load(...)` without `map_location` in a distributed script.

    What it checks
        `torch.load` calls with neither a `map_location=` keyword nor a second positional
        argument, in a script that uses torch.distributed, DDP, a DistributedSampler, mp.spawn or
        accelerate, outside a rank-0-only block.

    Why it matters
        torch.load restores tensors onto the device they were saved from, usually cuda:0. Every
        rank then allocates its copy on GPU 0: out-of-memory or a slow, lopsided GPU 0, and a
        context on GPU 0 for every rank (pytorch/examples#969, NVIDIA/apex#222).

    Example
        state = torch.load("checkpoint.pt")

    Fix
        Load to the CPU (or this rank's GPU):
        `torch.load("checkpoint.pt", map_location="cpu")` or
        `map_location=f"cuda:{local_rank}"`.
    """
    index = t.index
    loads = index.calls_named("torch.load")
    if not loads or not is_distributed(index):
        return
    for call in loads:
        if call.kw("map_location") is not None or len(call.node.args) >= 2 or \
                any(k.arg is None for k in call.node.keywords):
            continue
        if call.ctx.rank0:
            continue  # one process loads it; the device it lands on is that process's business
        yield t.finding(
            "warning", call.node,
            "torch.load without map_location: every rank loads the checkpoint onto the GPU it was saved from",
            detail=("Without map_location, tensors saved from cuda:0 are restored on cuda:0 by every rank, which "
                    "can run GPU 0 out of memory and puts a CUDA context of every rank on it."),
            fix='torch.load(path, map_location="cpu")   # or map_location=f"cuda:{local_rank}"',
            evidence={},
            subjects=["arg:map_location"],
        )
