"""DDP's reducer: parameters that received no gradient."""
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

    Fix
        `DistributedDataParallel(model, find_unused_parameters=True)` (Trainer:
        `--ddp_find_unused_parameters true`), or remove the unused parameters; with
        `TORCH_DISTRIBUTED_DEBUG=DETAIL` the error names them.
    """
    occ = job.get("unused_params")
    if not occ or not occ.count:
        return
    ev = occ.first[0]
    idx = job.get("unused_indices")
    indices = {}
    if idx:
        for e in idx.first:
            indices[e.data.get("rank")] = str(e.data.get("idx", "")).strip()
    extra, sentence = fold(job, "LOG012", occ.ranks)
    who = f" (rank{'s' if len(occ.ranks) > 1 else ''} {ranks_text(occ.ranks)})" if occ.ranks else ""
    yield hit(job, "error", f"DDP: parameters received no gradient{who}" if occ.ranks else
              "DDP: parameters received no gradient", at=ev.line, stage=0, ranks=occ.ranks, hosts=occ.hosts,
              count=occ.count,
              detail=("Some parameters were not used to compute the loss, so DDP's reducer never finished the "
                      "previous iteration's all-reduce. " + sentence).strip(),
              fix=("DistributedDataParallel(model, find_unused_parameters=True)   # Trainer: --ddp_find_unused_parameters true\n"
                   "TORCH_DISTRIBUTED_DEBUG=DETAIL torchrun ...   # names the parameters"),
              evidence={"parameter_indices": indices, **extra})
