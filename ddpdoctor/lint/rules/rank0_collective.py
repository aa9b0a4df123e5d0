"""A collective called under a rank-0 test (round 9, a preview rule)."""
from __future__ import annotations

from . import rule
from ._common import C10D_COLLECTIVES

_COLLECTIVES = sorted(C10D_COLLECTIVES)   # every rank of the group must call them, in the same order
_SOURCE = "pytorch/pytorch torch/distributed/distributed_c10d.py (collectives: every rank of the group calls them)"


@rule("LINT025", "collective-on-one-rank")
def collective_on_one_rank(t):
    """A torch.distributed collective called under a test that holds on rank 0 only.

    What it checks
        `dist.broadcast`, `all_reduce`, `barrier`, `all_gather`, `reduce`, `gather`, `scatter` and their object
        variants (not `send`/`recv`) under a rank-0 test (`if rank == 0:`, after `if rank != 0: return`, in a
        function only called under one), on the default group (no `group=` argument), when the same function
        does not call it outside the test too (the `if local_rank not in [-1, 0]: barrier()` ... `if local_rank == 0:
        barrier()` idiom pairs them). A preview rule (round 9): a note by default, a warning with `--preview`.

    Why it matters
        A collective completes only when every rank of the group has called it (torch/distributed/distributed_c10d.py);
        on rank 0 alone it waits until the NCCL/Gloo timeout while the others run on to the next collective, or
        they meet a different collective and the job fails with mismatched sizes (fr59 CJL196/small-gpt broadcasts
        its restored step inside the rank-0 resume block).

    Example
        if rank == 0:
            step = load_step(path)
            dist.broadcast(torch.tensor(step).cuda(), 0)

    Fix
        Call the collective on every rank, outside the test: `t = torch.tensor(step if rank == 0 else 0).cuda();
        dist.broadcast(t, 0)`.
    """
    index = t.index
    for name in _COLLECTIVES:
        for call in index.by_name.get(name, ()):
            q = call.qual or ""
            if not q.startswith("torch.distributed.") or call.kw("group") is not None:
                continue
            if not t.facts.rank0(index, call, single=False):
                continue
            if any(c is not call and c.name == name and not t.facts.rank0(index, c, single=False)
                   for c in call.scope.calls):
                # `if local_rank not in [-1, 0]: barrier()` ... `if local_rank == 0: barrier()` (transformers' examples):
                # the other ranks call it in another branch of the same function: the counts match
                continue
            yield t.finding(
                "warning", call.node,
                f"{call.text}() runs on rank 0 only; a collective waits for every rank of the group (a hang)",
                detail="Every rank of the group must call a collective, in the same order; the others never enter this one.",
                fix=f"# call {name}() on every rank, outside the rank-0 test (rank 0 fills the tensor, the others receive)",
                evidence={"collective": call.text, "source": _SOURCE},
            )
