"""An async collective whose work handle is thrown away (round 24: a class round 23's held-out review named)."""
from __future__ import annotations

import ast

from . import rule
from ._common import C10D_COLLECTIVES

# pytorch/pytorch torch/distributed/distributed_c10d.py (all_reduce, broadcast, ... docstrings): "async_op (bool,
# optional): Whether this op should be an async op. Returns: Async work handle, if async_op is set to True."; and
# docs/source/distributed.md "Synchronous and asynchronous collective operations": with async_op=True the call
# returns a work object; "wait() - in the case of CPU collectives, will block the process until the operation is
# completed. In the case of CUDA collectives, will block the currently active CUDA stream until the operation is
# completed (but will not block the process)". Without wait() nothing orders a later read after the collective.
_SOURCE = ("pytorch/pytorch torch/distributed/distributed_c10d.py (async_op: 'Async work handle, if async_op is set "
           "to True') and docs/source/distributed.md 'Synchronous and asynchronous collective operations' (wait())")


def _last_sync(scope, memo: dict) -> int:
    """The line of the scope's last `torch.cuda.synchronize()` call (0: none), read once per scope: one scan per
    function, not one per dropped handle (robust24: 10,000 dropped handles took 41 s, quadratic)."""
    key = id(scope)
    if key not in memo:
        memo[key] = max((c.line for c in scope.calls if (c.qual or "").endswith("cuda.synchronize")), default=0)
    return memo[key]


def _device_synchronized_after(scope, line: int, memo: dict) -> bool:
    """`torch.cuda.synchronize()` later in the same function: the device waits for every stream, NCCL's included."""
    return _last_sync(scope, memo) > line


@rule("LINT044", "async-collective-handle-dropped")
def async_collective_handle_dropped(t):
    """An async collective (`async_op=True`) called as a statement, its work handle thrown away.

    What it checks
        `dist.all_reduce(t, async_op=True)` (or any torch.distributed collective) as an expression statement: the
        work object the call returns is never kept, so nothing can `wait()` on it. Quiet when the same function
        calls `torch.cuda.synchronize()` after it (the device waits for every stream). A preview rule (round 24):
        a note by default, a warning with `--preview`.

    Why it matters
        With `async_op=True` the collective returns at once with a work handle (torch/distributed/distributed_c10d.py);
        only `wait()` orders what follows after it: on CPU (Gloo) the reduction runs on a background thread, on CUDA
        (NCCL) on the communication stream. Code that reads the tensor afterwards (a logged loss, a metric, a
        gradient the optimizer steps with) reads it before, during or after the reduction, differently on each rank
        and each run; with Gloo the tensor may still be written while the next collective is issued.

    Example
        dist.all_reduce(loss_sum, op=dist.ReduceOp.SUM, async_op=True)
        if rank == 0:
            print(loss_sum[0] / loss_sum[1])

    Fix
        Keep the handle and wait on it before the tensor is read (`work = dist.all_reduce(t, async_op=True)`, ...,
        `work.wait()`), or call the collective synchronously (`dist.all_reduce(t)`).
    """
    index = t.index
    cands = [c for c in index.calls if c.name in C10D_COLLECTIVES and (c.qual or "").startswith("torch.distributed.")
             and isinstance(c.kw("async_op"), ast.Constant) and c.kw("async_op").value is True]
    if not cands:
        return
    by_node = {id(c.node): c for c in cands}
    memo: dict = {}
    for node in ast.walk(index.tree):
        if not (isinstance(node, ast.Expr) and id(node.value) in by_node):
            continue
        call = by_node[id(node.value)]
        if call.scope is not None and _device_synchronized_after(call.scope, call.line, memo):
            continue
        yield t.finding(
            "warning", call.node,
            f"{call.text}(..., async_op=True) throws its work handle away: nothing waits for the collective before "
            "its tensor is read",
            detail=("With async_op=True the collective returns a work handle at once; only its wait() orders the code "
                    "after it behind the collective (Gloo reduces on a background thread, NCCL on its own stream). "
                    "Reads of the tensor can see it before or during the reduction."),
            fix=(f"work = {call.text}(..., async_op=True)\n...\nwork.wait()   # before the tensor is read\n"
                 f"# or, when nothing overlaps it: {call.text}(...)"),
            evidence={"source": _SOURCE},
        )
