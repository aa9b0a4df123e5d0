"""F5: `no_sync()` around backward only, which skips nothing."""
from __future__ import annotations

import ast

from . import rule

# Calls that may sit next to backward() without being a forward pass.
_BACKWARD_ONLY = {"backward", "scale", "item", "detach", "float", "mean", "sum", "div", "mul", "div_", "clone",
                  "unscale_", "print", "log", "len"}


@rule("LINT008", "no-sync-without-forward", catalogue=("F5",))
def no_sync_without_forward(t):
    """`with model.no_sync():` wrapping only `loss.backward()`, not the forward pass.

    What it checks
        `with X.no_sync():` (or `accelerator.no_sync(X)`) blocks whose body calls `.backward()`
        and nothing that could be a forward pass: only backward, scaling and arithmetic. Not for
        an FSDP model, which reads no_sync at backward time.

    Why it matters
        DDP decides at forward time whether the next backward will all-reduce gradients:
        `no_sync` sets `require_backward_grad_sync=False`, and the forward records it. A forward
        outside the block has already armed the reduction, so the backward inside still
        all-reduces on every micro-step: gradient accumulation pays the full communication cost
        with no error (pytorch/pytorch#43201; transformers PR#7742 fixed the same in Trainer).

    Example
        loss = model(batch).loss
        with model.no_sync():
            loss.backward()

    Fix
        Put the forward inside the block:
        `with model.no_sync(): loss = model(batch).loss; loss.backward()`,
        or use `with accelerator.accumulate(model):`.
    """
    index = t.index
    fsdp = _fsdp_names(index)
    for block in index.withs:
        for item in block.node.items:
            ce = item.context_expr
            if not (isinstance(ce, ast.Call) and isinstance(ce.func, ast.Attribute) and ce.func.attr == "no_sync"):
                continue
            names = []
            for n in ast.walk(ast.Module(body=block.node.body, type_ignores=[])):
                if isinstance(n, ast.Call):
                    f = n.func
                    names.append(f.attr if isinstance(f, ast.Attribute) else (f.id if isinstance(f, ast.Name) else "?"))
            if "backward" in names and all(n in _BACKWARD_ONLY for n in names):
                target = ast.unparse(ce.args[0]) if ce.args else ast.unparse(ce.func.value)
                if target in fsdp or (fsdp is ALL):
                    continue  # FSDP reads no_sync at backward time: around backward only is right
                ddp = _ddp_shown(t, index, target)
                yield t.finding(
                    "warning" if ddp else "info", block.node,
                    f"no_sync() of {target} wraps only backward(); the forward outside already armed the all-reduce",
                    detail=("DDP reads the no_sync flag during forward. With the forward pass outside the block, "
                            "the backward inside still all-reduces gradients on every micro-step, so gradient "
                            "accumulation saves no communication."),
                    fix=(f"with {ast.unparse(ce)}:\n    loss = model(batch).loss / accum_steps   # forward inside\n"
                         "    loss.backward()"),
                    evidence={"model": target, "why": ddp or "the model is not shown to be DDP-wrapped (FSDP and "
                              "DeepSpeed read no_sync at backward time)"},
                )


ALL = frozenset(["*"])
_SHARDING = ("FullyShardedDataParallel", "fully_shard", "deepspeed", "FSDP")


def _ddp_shown(t, index, target: str) -> str:
    """The model is DDP's: wrapped by DistributedDataParallel in this file, or the run wraps models in DDP and
    shards none with FSDP or DeepSpeed (whose no_sync works at backward time)."""
    from ._common import DDP
    if any(target in a.targets for a in index.assigns if a.call is not None and a.call.qual == DDP):
        return f"{target} is wrapped by DistributedDataParallel"
    texts = [ix.source or "" for ix in t.facts.indexes.values()]
    if any("DistributedDataParallel" in x for x in texts) and not any(w in x for x in texts for w in _SHARDING):
        return "the run wraps its models in DistributedDataParallel and shards none"
    return ""


def _fsdp_names(index):
    """Names bound to an FSDP-wrapped model (`model = FSDP(model)`, `fully_shard(model)`); ALL when the
    file shards with FSDP and wraps nothing in DDP, so any no_sync there is FSDP's."""
    names = set()
    uses_fsdp = uses_ddp = False
    for c in index.calls:
        q = c.qual or c.text or ""
        last = q.rsplit(".", 1)[-1]
        if last in ("FullyShardedDataParallel", "FSDP", "fully_shard"):
            uses_fsdp = True
            for a in c.scope.assigns:
                if a.call is c:
                    names.update(n for n in a.targets if n)
            if last == "fully_shard" and c.node.args:
                from ..names import dotted
                names.add(dotted(c.node.args[0]) or "")
        elif last in ("DistributedDataParallel", "DDP"):
            uses_ddp = True
    if uses_fsdp and not uses_ddp:
        return ALL
    return names
