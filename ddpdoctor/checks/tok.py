"""Tokenizers settings, judged statically (catalogue D1/D2). The runtime state (whether the rayon
pool was already used before a fork) is judged by the pre-flight checks inside the training process."""
from __future__ import annotations

from ddpdoctor.model import error
from ddpdoctor.model.registry import check
from ddpdoctor.facts.env import env_of, truthy


@check("TOK001", "tokenizers-parallelism-with-fork", family="tokenizers", needs=("env", "host"), catalogue=("D1", "D2"))
def tokenizers_parallelism_with_fork(snap):
    """TOKENIZERS_PARALLELISM is forced on while processes start by fork.

    What it checks
        TOKENIZERS_PARALLELISM set to a true value (anything but "", off, false, f, no, n, 0) while
        multiprocessing's start method is fork (the Linux default before Python 3.14, and how
        DataLoader workers and `datasets.map(num_proc>1)` start).

    Why it matters
        The tokenizers library normally protects itself: at a fork after its thread pool was used
        it disables parallelism in the child (printing "The current process just got forked,
        after parallelism has already been used. Disabling parallelism to avoid deadlocks..."
        before 0.22.2, silently since). Forcing it on removes that protection: a forked worker
        that calls encode_batch after the parent used the pool deadlocks. We reproduced the hang
        with tokenizers 0.23.3 (huggingface/tokenizers#187, transformers#5486).

    Example
        export TOKENIZERS_PARALLELISM=true; a Trainer with dataloader_num_workers=4 on Linux.

    Fix
        export TOKENIZERS_PARALLELISM=false   # or tokenize before training, or use spawn workers
    """
    env = env_of(snap)
    raw = env.get("TOKENIZERS_PARALLELISM")
    method = snap["host"].get("default_start_method")
    if raw is None or not truthy(raw) or method != "fork":
        return
    yield error(f"TOKENIZERS_PARALLELISM={raw!r} with the fork start method can deadlock DataLoader workers",
                detail=("With parallelism forced on, a forked worker that tokenizes after the parent used the "
                        "tokenizers thread pool hangs forever (the pool's threads do not exist in the child). "
                        "The library's own fork protection is off when the variable says true."),
                fix="export TOKENIZERS_PARALLELISM=false", env_fix={"TOKENIZERS_PARALLELISM": "false"},
                subjects=["TOKENIZERS_PARALLELISM"],
                evidence={"TOKENIZERS_PARALLELISM": raw, "start_method": method})
