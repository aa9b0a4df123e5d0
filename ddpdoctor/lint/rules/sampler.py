"""F10: a DistributedSampler whose epoch never changes."""
from __future__ import annotations

import ast
import re

from ..names import dotted
from . import rule
from ._common import SAMPLER

# Evaluation data: its order does not matter, and it is usually not shuffled at all.
_EVAL = re.compile(r"eval|valid|test|(?:^|_)dev(?:_|$)|(?:^|_)val(?:_|$)|predict|infer|(?:^|_)query|gallery",
                   re.IGNORECASE)


def _for_evaluation(index, call) -> bool:
    """The sampler serves evaluation data: named so, fed an eval dataset, or built in an eval function."""
    names = [n for a in call.scope.assigns if a.value is call.node for n in a.targets if n]
    data = call.arg(0, "dataset")
    names += [dotted(data) or ""] if data is not None else []
    s = call.scope
    while s is not None and s.kind != "module":
        names.append(s.name)
        s = s.parent
    return any(_EVAL.search(n.rsplit(".", 1)[-1]) for n in names if n)


def _epoch_loop(index) -> bool:
    """A loop over epochs that contains another loop (over batches)."""
    for loop in index.loops:
        node = loop.node
        if not isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            continue
        inner = any(isinstance(n, (ast.For, ast.AsyncFor)) and n is not node for n in ast.walk(node))
        if inner:
            return True
    return False


_PLAIN = {"DataLoader", "tqdm", "enumerate", "iter", "cycle", "zip", "len", "list", "next", "print", "isinstance",
          "hasattr", "getattr", "range", "islice", "chain", "trange", "Accelerator", "prepare"}


def _handed_to_a_wrapper(index, call) -> bool:
    """The loader built on the sampler goes into an object of the user's own code (`IterLoader(loader)`,
    LAVIS): that wrapper may call set_epoch where this file cannot see it. (A sampler handed to a batch
    sampler, distillation's GroupedBatchSampler, is not excused: nothing there calls set_epoch.)"""
    sampler_names = {n for a in call.scope.assigns if a.value is call.node for n in a.targets if n}
    names = set()  # the loaders built on it: a sampler wrapped in a batch sampler still needs set_epoch
    for a in call.scope.assigns:  # loader = DataLoader(ds, sampler=sampler)
        if a.call is not None and a.call.name == "DataLoader" and any(
                dotted(v) in sampler_names or v is call.node for v in [a.call.kw("sampler")] if v is not None):
            names.update(n for n in a.targets if n)
    if not names:
        return False
    for c in call.scope.calls:
        if c.name in _PLAIN or (c.qual or "").startswith(("torch.", "itertools.", "tqdm", "accelerate.")):
            continue
        if any(dotted(a) in names for a in list(c.node.args) + [k.value for k in c.node.keywords]):
            return True
    return False


@rule("LINT009", "sampler-without-set-epoch", catalogue=("F10",))
def sampler_without_set_epoch(t):
    """A DistributedSampler in a manual epoch loop, and no `set_epoch()` anywhere.

    What it checks
        `DistributedSampler(...)` (shuffling, the default) over training data in a script that
        loops over epochs with an inner loop over batches and never calls `.set_epoch(...)`.
        Samplers of evaluation data (named eval/valid/test/dev, or built in an evaluation
        function) are left alone: their order does not change what is learned. So is a sampler
        whose loader is handed to a wrapper of the user's own code (`IterLoader(loader)`), which
        may call set_epoch where this file cannot see it.

    Why it matters
        The sampler seeds its shuffle with `seed + epoch`. Without `set_epoch(epoch)` the epoch
        stays 0, so every epoch sees the same order on every rank: the "shuffle" is a fixed
        permutation and training quality suffers silently (pytorch/pytorch#31771, #11324). The
        Trainer calls it for you; a hand-written loop must.

    Example
        sampler = DistributedSampler(ds)
        loader = DataLoader(ds, sampler=sampler, batch_size=32)
        for epoch in range(epochs):
            for batch in loader:
                ...

    Fix
        Call it at the start of each epoch, with the same value on every rank:
        `for epoch in range(epochs): sampler.set_epoch(epoch)`.
    """
    index = t.index
    samplers = index.calls_named(SAMPLER)
    if not samplers or "set_epoch" in index.by_name:
        return
    if not _epoch_loop(index):
        return
    for call in samplers:
        shuffle = call.kw("shuffle")
        if isinstance(shuffle, ast.Constant) and shuffle.value is False:
            continue
        if _for_evaluation(index, call) or _handed_to_a_wrapper(index, call):
            continue
        yield t.finding(
            "warning", call.node,
            "DistributedSampler is never given set_epoch(), so every epoch repeats the same order",
            detail=("The sampler shuffles with seed + epoch, and nothing in this script calls set_epoch(), so the "
                    "epoch stays 0: each epoch visits the data in the same order on every rank."),
            fix="for epoch in range(num_epochs):\n    sampler.set_epoch(epoch)   # first line of the epoch loop",
            evidence={"sampler_line": call.line},
        )
