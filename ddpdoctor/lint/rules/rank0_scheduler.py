"""A learning-rate scheduler stepped on one rank only (round 24: a class round 23's held-out review named)."""
from __future__ import annotations

from . import rule
from ._common import DATA_PARALLEL_WRAPPERS
from .ddp_scaling import _ddp_bindings, _plateau_names

# pytorch/pytorch torch/optim/lr_scheduler.py: LRScheduler.step() computes the new rates and writes them into its
# optimizer's param_groups ("param_group['lr'] = lr") in this process only; torch/nn/parallel/distributed.py
# (DistributedDataParallel docstring): every process has its own optimizer and takes a complete optimization step,
# and the parameters stay identical only because the all-reduced gradients AND the steps are the same on every rank.
# transformers' get_*_schedule_with_warmup (src/transformers/optimization.py) return a LambdaLR, the same class.
_SOURCE = ("pytorch/pytorch torch/optim/lr_scheduler.py (LRScheduler.step writes param_group['lr'] of this "
           "process's optimizer) and torch/nn/parallel/distributed.py (each process steps its own optimizer; "
           "parameters stay in sync only when every rank takes the same step)")
_SCHEDULER_MODULES = ("torch.optim.lr_scheduler.",)
_SCHEDULER_FACTORIES = ("get_scheduler", "get_linear_schedule_with_warmup", "get_cosine_schedule_with_warmup",
                        "get_constant_schedule_with_warmup", "get_polynomial_decay_schedule_with_warmup",
                        "get_cosine_with_hard_restarts_schedule_with_warmup", "get_constant_schedule",
                        "get_inverse_sqrt_schedule", "get_wsd_schedule")


def _scheduler_made(index, name: str):
    """The assignments that build `name` as an LR scheduler (torch.optim.lr_scheduler.X(...), transformers'
    get_*_schedule*(...)); [] when any assignment of the name builds something else."""
    made = [a for a in index.assigns if list(a.targets) == [name]]
    if not made or any(a.call is None for a in made):
        return []
    ok = all((a.call.qual or "").startswith(_SCHEDULER_MODULES) or (
        (a.call.qual or "").startswith("transformers.") and (a.call.qual or "").rsplit(".", 1)[-1] in
        _SCHEDULER_FACTORIES) for a in made)
    return made if ok else []


@rule("LINT045", "scheduler-stepped-on-one-rank")
def scheduler_stepped_on_one_rank(t):
    """A learning-rate scheduler built on every rank and stepped only on rank 0.

    What it checks
        `scheduler.step()` under a rank-0 test (`if rank == 0:`, `if is_main_process():`) where `scheduler` is built
        by `torch.optim.lr_scheduler.*` or transformers' `get_*_schedule*` outside any rank gate, in a file that
        wraps a model in DistributedDataParallel or FSDP. A preview rule (round 24): a note by default, a warning
        with `--preview`. A ReduceLROnPlateau stepped with its metric there is LINT031's finding.

    Why it matters
        A scheduler writes the new learning rate into its optimizer in its own process only
        (torch/optim/lr_scheduler.py). Under DDP every rank steps its own optimizer with the averaged gradients;
        the replicas stay identical only while every rank takes the same step (torch/nn/parallel/distributed.py).
        With the scheduler stepped on rank 0 alone, rank 0 decays its learning rate and the others keep the first
        one: the replicas drift apart silently, and the checkpoint rank 0 saves is not what the others train.

    Example
        if dist.get_rank() == 0:
            scheduler.step()
            print(f"epoch {epoch} done")

    Fix
        Step the scheduler on every rank, outside the rank-0 block; keep only the logging under it.
    """
    index = t.index
    if not any(index.by_qual.get(q) for q in DATA_PARALLEL_WRAPPERS) and not any(
            (c.qual or c.text or "").endswith("DistributedDataParallel") for c in index.calls):
        return
    plateau = _plateau_names(index) if _ddp_bindings(index) else set()
    built: dict = {}  # name -> _scheduler_made(index, name), once per name (robust24: 10,000 steps took 24-38 s)
    for call in index.calls:
        if call.name != "step" or not call.recv or not call.ctx.rank0:
            continue
        if plateau and call.recv in plateau and call.node.args:
            continue  # ReduceLROnPlateau.step(metric) on rank 0: LINT031's finding
        if call.recv not in built:
            built[call.recv] = _scheduler_made(index, call.recv)
        made = built[call.recv]
        if not made or any(a.ctx.gated or a.ctx.rank0 for a in made):
            continue  # built under a rank test too: a rank-0-only scheduler of a rank-0-only optimizer
        yield t.finding(
            "warning", call.node,
            f"{call.text}() steps the learning-rate scheduler on rank 0 only: the other ranks keep the old learning "
            "rate and their replicas drift from rank 0's",
            detail=(f"`{call.recv}` is built on every rank (line {made[0].node.lineno}) and stepped only under a "
                    "rank-0 test. Each rank's optimizer takes its own step with the averaged gradients; with "
                    "different learning rates the DDP replicas are no longer the same model."),
            fix=f"{call.text}()   # on every rank, outside the `if rank == 0:` block",
            evidence={"built": made[0].node.lineno, "source": _SOURCE},
        )
