"""A DeepSpeed engine's save_checkpoint on rank 0 only (round 8, a preview rule)."""
from __future__ import annotations

from typing import Set

from . import rule

INITIALIZE = "deepspeed.initialize"
# Engine methods whose docstrings say every process must call them (deepspeedai/DeepSpeed deepspeed/runtime/engine.py
# at b555aa532ac3577c4ec1ae74d2244e1e31a2a27e): save_checkpoint ("Important: all processes must call this method and not
# just the process with rank 0 ... This method will hang waiting to synchronize with other processes if it's called
# just for the process with rank 0"), save_fp16_model / save_16bit_model ("the processes need to work in sync to
# gather the weights").
_COLLECTIVE_SAVES = ("save_checkpoint", "save_fp16_model", "save_16bit_model")
_SOURCE = ("deepspeedai/DeepSpeed deepspeed/runtime/engine.py b555aa532ac3577c4ec1ae74d2244e1e31a2a27e, "
           "DeepSpeedEngine.save_checkpoint docstring")


def _engines(index) -> Set[str]:
    """Names bound to the engine `deepspeed.initialize(...)` returns first (`model_engine, optimizer, _, _ = ...`)."""
    out: Set[str] = set()
    for call in index.by_qual.get(INITIALIZE, ()):
        for a in call.scope.assigns:
            if a.call is call and a.targets and a.targets[0]:
                out.add(a.targets[0])
    return out


def _rank0_sites(t, index, fname: str) -> bool:
    """Every call of `fname` in this file runs on rank 0 only (a gate of another kind, `if local_rank != 0`, is not
    enough to say rank 0 alone calls it)."""
    sites = [c for c in index.by_name.get(fname, ()) if c.recv is None]
    return bool(sites) and all(t.facts.rank0(index, c, single=False) for c in sites)


@rule("LINT020", "deepspeed-save-on-one-rank")
def deepspeed_save_on_one_rank(t):
    """A DeepSpeed engine's save_checkpoint() called under a rank-0 test.

    What it checks
        `engine.save_checkpoint(...)` (also `save_fp16_model` / `save_16bit_model`) on a name bound to the
        engine `deepspeed.initialize(...)` returns, under a test that holds on rank 0 only (`if rank == 0:`,
        `if model_engine.local_rank == 0:`). A preview rule (round 8): a note by default, a warning with
        `--preview`.

    Why it matters
        DeepSpeed's docstring: "all processes must call this method and not just the process with rank 0. It is
        because each process needs to save its master weights and scheduler+optimizer states. This method will
        hang waiting to synchronize with other processes if it's called just for the process with rank 0"
        (deepspeed/runtime/engine.py). Under ZeRO each rank holds its own optimizer partition.

    Example
        if model_engine.local_rank == 0:
            model_engine.save_checkpoint("checkpoints", tag)

    Fix
        Call it on every rank with the same tag: `model_engine.save_checkpoint("checkpoints", tag)`; DeepSpeed
        decides which rank writes which file.
    """
    index = t.index
    if INITIALIZE not in index.by_qual:
        return
    engines = _engines(index)
    if not engines:
        return
    gated = None
    for name in _COLLECTIVE_SAVES:
        for call in index.by_name.get(name, ()):
            if call.recv not in engines:
                continue
            via = ""
            if not t.facts.rank0(index, call, single=False):
                # `def save_checkpoint(engine, ...): engine.save_checkpoint(...)` whose every caller in the run
                # calls it under a rank test (`if master: save_checkpoint(engine, ...)`, fr66 Qwen3-Non-MOE)
                if gated is None:
                    gated = t.facts.gated_functions(index, t.real_path)
                if call.scope.kind != "function" or id(call.scope) not in gated or \
                        not _rank0_sites(t, index, call.scope.name):
                    continue
                via = f" (in {call.scope.name}(), which every caller calls under a rank-0 test)"
            yield t.finding(
                "warning", call.node,
                f"{call.recv}.{name}() runs on rank 0 only{via}; DeepSpeed needs every rank to call it (the others "
                "never enter it: a hang or a checkpoint without their optimizer states)",
                detail=("DeepSpeedEngine.save_checkpoint: 'all processes must call this method and not just the "
                        "process with rank 0 ... This method will hang waiting to synchronize with other processes if "
                        "it's called just for the process with rank 0.'"),
                fix=f"{call.recv}.{name}(save_dir, tag)   # on every rank, outside the rank-0 test",
                evidence={"engine": call.recv, "source": _SOURCE},
            )
