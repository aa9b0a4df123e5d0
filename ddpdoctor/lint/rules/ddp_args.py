"""F3 and A1: DDP/Trainer arguments that cost time or are silently ignored."""
from __future__ import annotations

import ast

from . import rule
from ._common import is_training_args_qual, spawned_scopes, spawn_sites, torchrun_line


@rule("LINT010", "find-unused-parameters-true", catalogue=("F3",))
def find_unused_parameters_true(t):
    """A literal `find_unused_parameters=True` / `ddp_find_unused_parameters=True`.

    What it checks
        Any call with the keyword `find_unused_parameters=True` (DDP, accelerate's
        `DistributedDataParallelKwargs`, Lightning's `DDPStrategy`) or
        `ddp_find_unused_parameters=True` (TrainingArguments).

    Why it matters
        DDP then traverses the autograd graph after every forward to find parameters that got no
        gradient. When every parameter is used, that is pure overhead, and DDP warns "find_unused_
        parameters=True was specified in DDP constructor, but did not find any unused parameters"
        on every rank (cszn/KAIR#103, m2lines/Samudra#630). It also breaks reentrant gradient
        checkpointing ("marked as ready twice", huggingface/peft#313). It is right only when some
        parameters really are unused in a step. A note, because it may be deliberate.

    Example
        model = DDP(model, device_ids=[local_rank], find_unused_parameters=True)

    Fix
        Drop it (or set False) unless DDP raises "Expected to have finished reduction in the prior
        iteration"; with the Trainer: `TrainingArguments(..., ddp_find_unused_parameters=False)`.
        Keep it deliberately with `# ddpdoctor: ignore[F3]` on the line.
    """
    for call in t.index.calls:
        for kw in call.node.keywords:
            if kw.arg in ("find_unused_parameters", "ddp_find_unused_parameters") and \
                    isinstance(kw.value, ast.Constant) and kw.value.value is True:
                yield t.finding(
                    "info", kw,
                    f"{kw.arg}=True makes DDP traverse the autograd graph after every forward",
                    detail=("Unless some parameters really get no gradient in a step, this is an extra graph "
                            "traversal per iteration for nothing, and it conflicts with reentrant gradient "
                            "checkpointing."),
                    fix=f"{kw.arg}=False   # or remove it; keep True only if DDP reports unused parameters",
                    evidence={"argument": kw.arg, "call": call.text},
                    subjects=[f"arg:{kw.arg}"],
                )


@rule("LINT015", "training-args-local-rank", catalogue=("A1",))
def training_args_local_rank(t):
    """`TrainingArguments(local_rank=...)`, which current transformers ignores.

    What it checks
        A `local_rank=` keyword (other than the default -1) passed to `TrainingArguments` or a
        subclass (Seq2SeqTrainingArguments, trl configs).

    Why it matters
        transformers (PR#41382) took device set-up out of TrainingArguments: the field survives
        only for argument parsers, and the rank and GPU come from the LOCAL_RANK environment
        variable through accelerate's PartialState. A script that passes `local_rank=rank` from an
        mp.spawn worker (ddpdoctor's original question did) now puts every rank on cuda:0. Under
        torchrun the value is redundant. An error-prone warning when the script spawns its own
        processes, a note otherwise.

    Example
        TrainingArguments(output_dir="out", local_rank=rank)

    Fix
        Remove the argument and launch with torchrun, which sets LOCAL_RANK:
        `torchrun --standalone --nproc-per-node 4 train.py`.
    """
    index = t.index
    spawned = {id(s) for s in spawned_scopes(index)}
    for call in index.calls:
        if not is_training_args_qual(call.qual):
            continue
        kw = next((k for k in call.node.keywords if k.arg == "local_rank"), None)
        if kw is None:
            continue
        v = kw.value
        if isinstance(v, ast.UnaryOp) and isinstance(v.op, ast.USub) and isinstance(v.operand, ast.Constant):
            continue  # local_rank=-1, the default
        in_spawn = id(call.scope) in spawned or bool(spawn_sites(index))
        yield t.finding(
            "warning" if in_spawn else "info", kw,
            "TrainingArguments(local_rank=...) is ignored; the Trainer takes the rank from LOCAL_RANK"
            + (", which this spawned process does not have" if in_spawn else ""),
            detail=("transformers sets up devices from the environment (LOCAL_RANK via accelerate), not from this "
                    "argument" + ("; every spawned rank will use cuda:0 and think it is local process 0."
                                  if in_spawn else "; under torchrun it is redundant.")),
            fix=f"{torchrun_line(index, spawn_sites(index)[0][0] if spawn_sites(index) else None)}   # and drop local_rank=... from TrainingArguments",
            evidence={"spawned": in_spawn},
            subjects=["arg:local_rank"],
        )
