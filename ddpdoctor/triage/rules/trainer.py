"""DDP's reducer: parameters that received no gradient, or were marked ready twice."""
from __future__ import annotations

from ..job import Job
from ..verdict import fold
from . import hit, ranks_text, rule


@rule("LOG012", "unused-parameters", catalogue=("F2", "F4"))
def unused_parameters(job: Job):
    """DDP found parameters that got no gradient: "Expected to have finished reduction in the prior iteration".

    What it checks
        `RuntimeError: Expected to have finished reduction in the prior iteration before starting a
        new one. This error indicates that your module has parameters that were not used in
        producing loss.`, with the `Parameter indices which did not receive grad for rank N` line
        when TORCH_DISTRIBUTED_DEBUG is set.

    Why it matters
        Some parameters (a frozen branch, a head used only for some batches, an unused layer) never
        get a gradient, so DDP's reducer waits for them forever and fails at the next iteration
        (pytorch/pytorch#43259 style reports; transformers sets find_unused_parameters for you only
        in some cases).

    Example
        [rank0]: RuntimeError: Expected to have finished reduction in the prior iteration before
        starting a new one.

        The reducer's other refusal, `Expected to mark a variable ready only once` (`marked as ready
        twice`: reentrant activation checkpointing, a parameter used twice in one backward, backward run
        twice on one forward), is the same class of fault in the same place: its own finding here.

    Fix
        `DistributedDataParallel(model, find_unused_parameters=True)` (Trainer:
        `--ddp_find_unused_parameters true`), or remove the unused parameters; with
        `TORCH_DISTRIBUTED_DEBUG=DETAIL` the error names them. Marked ready twice:
        `gradient_checkpointing_kwargs={'use_reentrant': False}`, or `DDP(..., static_graph=True)`.
    """
    twice = job.get("ready_twice")
    if twice and twice.count:
        ev = twice.first[0]
        extra, sentence = fold(job, "LOG012", twice.ranks)
        who = f" (rank{'s' if len(twice.ranks) > 1 else ''} {ranks_text(twice.ranks)})" if twice.ranks else ""
        yield hit(job, "error", f"DDP: a parameter was marked ready twice in one backward{who}", at=ev.line, stage=0,
                  ranks=twice.ranks, hosts=twice.hosts, count=twice.count,
                  detail=("DDP's reducer saw one parameter's gradient hook fire twice in one iteration: reentrant "
                          "activation checkpointing, a module (or shared weight) used twice in the forward, or "
                          "backward run more than once on one forward (retain_graph=True, several losses). "
                          + sentence).strip(),
                  fix=("model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={'use_reentrant': False})\n"
                       "DistributedDataParallel(model, static_graph=True)   # a graph that is the same every iteration\n"
                       "# several losses: sum them and call backward() once"),
                  evidence=extra)
    occ = job.get("unused_params")
    if not occ or not occ.count:
        return
    ev = occ.first[0]
    idx = job.get("unused_indices")
    indices = {}
    if idx:
        for e in idx.first:
            indices[e.data.get("rank")] = str(e.data.get("idx", "")).strip()
    # the ranks whose lines say so: a rank prefix, or the reducer's own "... did not receive grad for rank N" line
    # (printed without a prefix when the paste dropped it)
    ranks = sorted(set(occ.ranks) | {int(r) for r in indices if r is not None and str(r).isdigit()})
    extra, sentence = fold(job, "LOG012", ranks)
    who = f" (rank{'s' if len(ranks) > 1 else ''} {ranks_text(ranks)})" if ranks else ""
    yield hit(job, "error", f"DDP: parameters received no gradient{who}" if ranks else
              "DDP: parameters received no gradient", at=ev.line, stage=0, ranks=ranks, hosts=occ.hosts,
              count=occ.count,
              detail=("Some parameters were not used to compute the loss, so DDP's reducer never finished the "
                      "previous iteration's all-reduce. " + sentence).strip(),
              fix=("DistributedDataParallel(model, find_unused_parameters=True)   # Trainer: --ddp_find_unused_parameters true\n"
                   "TORCH_DISTRIBUTED_DEBUG=DETAIL torchrun ...   # names the parameters"),
              evidence={"parameter_indices": indices, **extra})
