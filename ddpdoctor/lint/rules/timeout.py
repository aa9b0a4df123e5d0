"""F11: one rank preprocesses while the others wait at a barrier with the default 30-minute timeout."""
from __future__ import annotations

import re

from .. import conditions as cond
from . import rule
from ._common import INIT_PG, is_trainer_script, is_training_args_qual, launched_distributed

# Work that can take long enough to outlast a barrier: downloads, dataset preparation, tokenization.
_PREP_NAMES = {"map", "filter", "load_dataset", "from_pretrained", "save_to_disk", "load_from_disk", "urlretrieve",
               "snapshot_download", "hf_hub_download", "train_from_iterator", "unpack_archive", "extractall"}
_PREP_WORDS = ("download", "preprocess", "tokeniz", "prepare_data", "extract", "convert", "build_vocab",
               "build_cache", "make_cache")


def _is_prep(name: str) -> bool:
    low = name.lower()
    return name in _PREP_NAMES or any(w in low for w in _PREP_WORDS)


_FIRST_WORDS = _PREP_WORDS + ("cache", "load", "feature", "dataset", "example")


def _others_wait(index, call) -> bool:
    """`if local_rank not in [-1, 0]: barrier()`: this barrier is entered by the other ranks only."""
    for test, side in call.ctx.branch:
        if (side == 0 and cond.body_others(test, index.flags)) or (
                side == 1 and cond.atom_kind(test, index.flags) == "rank0"):
            return True
    return False


def barrier_idiom(index):
    """The classic "rank 0 first" idiom, copied from transformers' old examples into many repos:
    `if local_rank not in [-1, 0]: barrier()`, slow work (download, tokenize, cache features), then
    `if local_rank == 0: barrier()`. Returns (first barrier, the work) or None."""
    barriers = [c for c in index.calls if c.name in ("barrier", "wait_for_everyone", "monitored_barrier")]
    for b in barriers:
        if not _others_wait(index, b):
            continue
        later = [c.line for c in barriers if c.scope is b.scope and c.line > b.line]
        end = min(later) if later else 10 ** 9
        work = [c for c in b.scope.calls if b.line < c.line < end and c.name and any(
            w in c.name.lower() for w in _FIRST_WORDS) | (c.name in _PREP_NAMES)]
        if work:
            return b, work[0]
    return None


@rule("LINT014", "init-without-timeout", catalogue=("F11",))
def init_without_timeout(t):
    """`init_process_group()` with the default timeout while rank 0 does long work the others wait for.

    What it checks
        `torch.distributed.init_process_group(...)` without `timeout=`, in a script where one rank
        works while the others wait: `main_process_first()`, or a `barrier()` /
        `wait_for_everyone()` together with preparation done under a rank-0 test (downloads,
        `load_dataset`, dataset `.map`/`.filter`, `from_pretrained`, tokenization, caching).

    Why it matters
        The waiting ranks sit in a collective (the barrier) that times out after the process
        group's timeout, 30 minutes by default (Trainer: `ddp_timeout=1800`): "Socket Timeout" or
        "Watchdog caught collective operation timeout ... Timeout(ms)=1800000"
        while rank 0 is still preprocessing (huggingface/transformers#18054, NVIDIA/nccl#845,
        axolotl-ai-cloud/axolotl#921). A note, since short preprocessing is fine.

    Example
        dist.init_process_group("nccl")
        if rank == 0:
            ds = load_dataset("big").map(tokenize, batched=True)
        dist.barrier()

    Fix
        Preprocess offline and cache it, or raise the timeout for this phase:
        `dist.init_process_group("nccl", timeout=datetime.timedelta(hours=2))`
        (Trainer: `TrainingArguments(ddp_timeout=7200)`).
    """
    index = t.index
    if not index.calls_named(INIT_PG):
        yield from _trainer_waits(t)
        return
    inits = [c for c in index.calls_named(INIT_PG)
             if c.kw("timeout") is None and not any(k.arg is None for k in c.node.keywords)]
    if not inits:
        return
    # accelerate/transformers' main_process_first(), and home-made ones (`global_main_process_first()`)
    first_process = any(n.endswith("process_first") for n in index.by_name)
    barrier = any(n in index.by_name for n in ("barrier", "wait_for_everyone", "monitored_barrier"))
    solo_work = [c for c in index.calls if c.ctx.rank0 and _is_prep(c.name or "")]
    idiom = barrier_idiom(index) if barrier and not (first_process or solo_work) else None
    if not (first_process or (barrier and solo_work) or idiom):
        return
    if first_process:
        why = "main_process_first() makes the other ranks wait while the main process works"
    elif solo_work:
        why = f"rank 0 works alone (line {min(c.line for c in solo_work)}) while the others wait at a barrier"
    else:
        why = (f"the other ranks wait at the barrier on line {idiom[0].line} while rank 0 runs "
               f"{idiom[1].text or idiom[1].name}() (line {idiom[1].line})")
    for call in inits:
        yield t.finding(
            "info", call.node,
            f"init_process_group keeps the default timeout, but {why}",
            detail=("If that work takes longer than the process group timeout (30 minutes by default), the waiting "
                    "ranks fail with a socket or watchdog timeout although nothing is wrong."),
            fix=("import datetime\n"
                 "dist.init_process_group(\"nccl\", timeout=datetime.timedelta(hours=2))   # or preprocess offline"),
            evidence={"main_process_first": first_process, "barrier": barrier},
            subjects=["arg:timeout"],
        )


_ARGS_CLASSES = re.compile(r"\b(?:Seq2Seq)?TrainingArguments\b|\b(?:SFT|DPO|GRPO|KTO|ORPO|PPO|CPO|Reward)Config\b")


def _trainer_waits(t):
    """The same wait in a Trainer script under torchrun: the Trainer's process group has
    `ddp_timeout=1800` unless the script (or its command line) raises it."""
    index = t.index
    if not is_trainer_script(index) or not launched_distributed(index):
        return
    if not (any(is_training_args_qual(q) for q in index.by_qual) or _ARGS_CLASSES.search(index.source or "")):
        return  # accelerate alone: its timeout is InitProcessGroupKwargs, and short examples abound
    for c in index.calls:
        if is_training_args_qual(c.qual) and (c.kw("ddp_timeout") is not None or any(
                k.arg is None for k in c.node.keywords)):
            return
    # main_process_first() in a Trainer script is the library's own idiom, and --ddp_timeout on the
    # command line raises the limit without touching the script: only the hand-written barrier idiom
    # (a script that calls torch.distributed.barrier itself) is reported here.
    idiom = barrier_idiom(index)
    if idiom is None:
        return
    where = idiom[0].node
    why = (f"the other ranks wait at the barrier on line {idiom[0].line} while rank 0 runs "
           f"{idiom[1].text or idiom[1].name}() (line {idiom[1].line})")
    yield t.finding(
        "info", where,
        f"the Trainer's process group keeps the default 30-minute timeout (ddp_timeout=1800), but {why}",
        detail=("Under torchrun the Trainer sets up the process group with ddp_timeout seconds. If the "
                "preparation takes longer, the waiting ranks fail with a socket or watchdog timeout although "
                "nothing is wrong (huggingface/transformers#18054)."),
        fix=("TrainingArguments(..., ddp_timeout=7200)   # or on the command line: --ddp_timeout 7200\n"
             "# or preprocess once, offline, and load the cached dataset"),
        evidence={"trainer": True},
        subjects=["arg:ddp_timeout"],
    )
