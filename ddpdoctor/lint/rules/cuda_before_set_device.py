"""`.cuda()` before `torch.cuda.set_device()` (round 24: a class round 23's held-out review named)."""
from __future__ import annotations

import ast

from ..analysis import exclusive
from . import rule

# pytorch/pytorch torch/_tensor_docs.py and torch/nn/modules/module.py: Tensor.cuda / Module.cuda "device (int,
# optional): if specified, all parameters will be copied to that device" and "Defaults to the current CUDA device";
# torch/cuda/__init__.py: the current device is 0 until set_device() (or `with torch.cuda.device(i)`) changes it.
_SOURCE = ("pytorch/pytorch torch/_tensor_docs.py (Tensor.cuda: 'Defaults to the current CUDA device'), "
           "torch/nn/modules/module.py (Module.cuda) and torch/cuda/__init__.py (set_device, current_device)")


def _to_current_device(call) -> bool:
    """`x.cuda()` with no device, `x.to("cuda")`: a copy to the CURRENT device."""
    node = call.node
    if not isinstance(node.func, ast.Attribute) or any(k.arg == "device" for k in node.keywords):
        return False
    if call.name == "cuda":
        return not node.args
    if call.name == "to" and len(node.args) == 1 and isinstance(node.args[0], ast.Constant):
        return node.args[0].value == "cuda"
    return False


@rule("LINT046", "cuda-before-set-device")
def cuda_before_set_device(t):
    """A model or tensor moved with `.cuda()` before the same function calls `torch.cuda.set_device(rank)`.

    What it checks
        In one function (or the module body), `x.cuda()` with no device (or `x.to("cuda")`) on a line before
        `torch.cuda.set_device(i)` with a non-literal `i`, neither in the other arm of an `if` from the other and no
        set_device before it; quiet where the module sets CUDA_VISIBLE_DEVICES itself. One finding per function. A
        preview rule (round 24): a note by default, a warning with `--preview`.

    Why it matters
        `.cuda()` without a device copies to the CURRENT device (torch/_tensor_docs.py, Module.cuda), which is 0
        until set_device changes it (torch/cuda/__init__.py). Every rank then puts that model or tensor on GPU 0:
        GPU 0 holds N copies and N CUDA contexts (out of memory on GPU 0), DDP given `device_ids=[local_rank]`
        refuses a module on another device, and NCCL may report duplicate GPUs.

    Example
        model = Net().cuda()
        torch.cuda.set_device(local_rank)
        model = DDP(model, device_ids=[local_rank])

    Fix
        Call `torch.cuda.set_device(local_rank)` first (right after reading LOCAL_RANK), or move with an explicit
        device: `model.cuda(local_rank)` / `model.to(f"cuda:{local_rank}")`.
    """
    index = t.index
    sets = [c for c in index.calls if c.qual == "torch.cuda.set_device" and c.node.args and
            not isinstance(c.node.args[0], ast.Constant)]
    if not sets or any(e.name == "CUDA_VISIBLE_DEVICES" for e in index.env_sets):
        return
    done = set()
    for sd in sets:
        if id(sd.scope) in done:
            continue
        earlier_sets = [c for c in sd.scope.calls if c.qual == "torch.cuda.set_device" and c.line < sd.line]
        first = min((c.line for c in earlier_sets), default=sd.line)
        moves = [c for c in sd.scope.calls if c.line < first and _to_current_device(c) and not exclusive(c.ctx, sd.ctx)]
        if not moves:
            continue
        done.add(id(sd.scope))
        mv = moves[0]
        text = mv.text or f"{ast.unparse(mv.node.func.value)[:40]}.{mv.node.func.attr}"
        yield t.finding(
            "warning", mv.node,
            f"{text}() moves to the current CUDA device before torch.cuda.set_device() (line {sd.line}): on every "
            "rank that is GPU 0",
            detail=(f"{text}() without a device copies to the current device, 0 until set_device() runs at line "
                    f"{sd.line}; every rank puts this on GPU 0 (N copies and N CUDA contexts there)."),
            fix=("torch.cuda.set_device(local_rank)   # first, right after reading LOCAL_RANK\n"
                 f"{text}()"),
            evidence={"set_device_line": sd.line, "lines": [c.line for c in moves], "source": _SOURCE},
        )
