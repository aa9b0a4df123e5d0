"""`DataLoader(..., shuffle=True, sampler=...)`: torch refuses the pair at construction (round 16 wave 3, a preview
rule)."""
from __future__ import annotations

import ast
from typing import Optional

from . import rule
from ..names import dotted
from ._common import DATALOADER

_SOURCE = ("torch/utils/data/dataloader.py, DataLoader.__init__: `if sampler is not None and shuffle: raise "
           "ValueError(\"sampler option is mutually exclusive with shuffle\")` (torch 2.13.0)")


def _is_sampler_call(node: ast.AST) -> bool:
    """`DistributedSampler(ds)`, `torch.utils.data.distributed.DistributedSampler(...)`: a constructor named *Sampler."""
    return isinstance(node, ast.Call) and (dotted(node.func) or "").split(".")[-1].endswith("Sampler")


def _is_none(node: Optional[ast.AST]) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _sampler_kind(value: ast.AST, call) -> Optional[str]:
    """'certain' when the sampler is always a sampler object, 'conditional' when it is one only on some runs
    (`DistributedSampler(ds) if args.distributed else None`), None when it is None or unknown (a parameter, a helper's
    result, an attribute)."""
    if _is_none(value):
        return None
    if _is_sampler_call(value):
        return "certain"
    if isinstance(value, ast.IfExp):
        branches = (value.body, value.orelse)
        if any(_is_sampler_call(b) for b in branches) and any(_is_none(b) for b in branches):
            return "conditional"
        return "certain" if all(_is_sampler_call(b) for b in branches) else None
    if isinstance(value, ast.Name):
        name = value.id
        scope = call.scope
        while scope is not None and name not in scope.locals and scope.kind != "module":
            scope = scope.parent
        if scope is None or name in scope.params:
            return None  # a parameter: the caller may pass None
        values = [a.value for a in scope.assigns if a.targets == [name] and a.value is not None]
        kinds = [_sampler_kind(v, call) if not isinstance(v, ast.Name) else None for v in values]
        if not values:
            return None
        if all(k == "certain" for k in kinds):
            return "certain"
        if any(k in ("certain", "conditional") for k in kinds) and all(
                k in ("certain", "conditional") or _is_none(v) for k, v in zip(kinds, values)):
            return "conditional"
    return None


@rule("LINT030", "dataloader-sampler-with-shuffle")
def dataloader_sampler_with_shuffle(t):
    """A DataLoader given both `shuffle=True` and a sampler, which torch refuses with a ValueError.

    What it checks
        A `torch.utils.data.DataLoader(...)` call whose `shuffle` is the literal True (keyword or the third
        positional argument) and whose `sampler` (keyword or the fourth positional argument) is a sampler object:
        a `...Sampler(...)` constructor, or a name bound in the function only to such constructors. An error when
        the sampler is always built; a warning when it is built on some runs only (`sampler = DistributedSampler(ds)
        if args.distributed else None`: every distributed run fails). Quiet for `shuffle=(sampler is None)`,
        `shuffle=args.shuffle`, a sampler that is a parameter or a helper's result (it may be None), and
        `sampler=None`. A preview rule (round 16 wave 3).

    Why it matters
        `DataLoader.__init__` raises `ValueError("sampler option is mutually exclusive with shuffle")` when a
        sampler is given with a true `shuffle` (torch/utils/data/dataloader.py): the script stops before its first
        step on every rank. The sampler decides the order; a DistributedSampler shuffles by itself (`shuffle=True`
        is its default, reseeded by `set_epoch`).

    Example
        sampler = DistributedSampler(train_set)
        loader = DataLoader(train_set, batch_size=32, shuffle=True, sampler=sampler)

    Fix
        Drop `shuffle=True` (or pass `shuffle=(sampler is None)`) and let the sampler shuffle; call
        `sampler.set_epoch(epoch)` at the start of every epoch.
    """
    index = t.index
    for call in index.by_qual.get(DATALOADER, ()):
        shuffle = call.arg(2, "shuffle")
        if not (isinstance(shuffle, ast.Constant) and shuffle.value is True):
            continue
        sampler = call.arg(3, "sampler")
        if sampler is None:
            continue
        kind = _sampler_kind(sampler, call)
        if kind is None:
            continue
        if t.facts.dead(call.scope, index):
            continue
        text = dotted(sampler) or "a sampler"
        sure = kind == "certain"
        yield t.finding(
            "error" if sure else "warning", call.node,
            ("`DataLoader(..., shuffle=True, sampler=...)` raises ValueError('sampler option is mutually exclusive "
             "with shuffle') when it is built" + ("" if sure else
                                                  f" with a sampler (`{text}` is one on distributed runs)")),
            detail=("torch's DataLoader refuses a sampler together with a true shuffle "
                    "(torch/utils/data/dataloader.py); the sampler decides the order, and a DistributedSampler "
                    "shuffles by itself."),
            fix=f"loader = DataLoader(dataset, ..., sampler={text}, shuffle=False)  # or shuffle=({text} is None)",
            evidence={"sampler": text, "certain": sure, "source": _SOURCE},
        )
    return True
