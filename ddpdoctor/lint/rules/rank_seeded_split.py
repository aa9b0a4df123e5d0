"""A dataset split drawn with a per-rank seed (round 17 wave 2, a preview rule)."""
from __future__ import annotations

import ast
from typing import Optional

from ..conditions import is_rankish
from ..names import last_name
from . import rule
from ._common import is_distributed

# pytorch/pytorch torch/utils/data/dataset.py random_split: `indices = randperm(sum(lengths), generator=generator)`,
# the default generator being the global one (torch.default_generator, seeded by torch.manual_seed). A generator or
# global seed that differs by rank gives every rank another permutation, hence another subset.
_SOURCE = "pytorch/pytorch torch/utils/data/dataset.py (random_split: randperm(sum(lengths), generator=generator))"


def _rank_value(expr: Optional[ast.AST], scope, depth: int = 0) -> bool:
    """The value depends on the rank: `seed + rank`, `args.seed + misc.get_rank()`, a name of this function assigned
    from one."""
    if expr is None or depth > 3:
        return False
    for n in ast.walk(expr):
        if isinstance(n, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)) and is_rankish(n):
            return True
        if isinstance(n, ast.Name) and n.id in scope.values and scope.values[n.id] is not expr:
            if _rank_value(scope.values[n.id], scope, depth + 1):
                return True
    return False


def _seed_of(gen: ast.AST, scope) -> Optional[ast.AST]:
    """X of `torch.Generator().manual_seed(X)` (directly or through a name of this function)."""
    if isinstance(gen, ast.Name) and gen.id in scope.values:
        gen = scope.values[gen.id]
    if isinstance(gen, ast.Call) and last_name(gen.func) == "manual_seed" and gen.args:
        return gen.args[0]
    return None


@rule("LINT034", "rank-seeded-split")
def rank_seeded_split(t):
    """`random_split` drawn with a seed that differs by rank, in a distributed script.

    What it checks
        A `random_split(dataset, lengths, generator=g)` whose generator is seeded with a rank-dependent value
        (`torch.Generator().manual_seed(seed + rank)`, the seed a name assigned from `args.seed + get_rank()`), or a
        `random_split` with no generator in a function that has just called `torch.manual_seed(<rank-dependent>)`, in a
        file that joins a process group. A constant seed, a seed from the arguments only and a split with its own fixed
        generator after a per-rank global seed are quiet. A preview rule (round 17): a note by default, a warning
        with `--preview`.

    Why it matters
        random_split permutes the indices with its generator (torch/utils/data/dataset.py); a per-rank seed gives each
        rank another permutation, so the "train" part of one rank holds another rank's validation samples and the
        DistributedSampler over it shards a different subset on every rank: samples are seen twice or never, and the
        validation figures leak training data.

    Example
        seed = args.seed + dist.get_rank()
        torch.manual_seed(seed)
        train_set, val_set = random_split(dataset, [0.9, 0.1])

    Fix
        Split with a generator seeded the same on every rank before seeding per rank:
        train_set, val_set = random_split(dataset, [0.9, 0.1], generator=torch.Generator().manual_seed(args.seed))
    """
    index = t.index
    if not (is_distributed(index) or (len(t.facts.indexes) > 1 and t.facts.distributed_anywhere(is_distributed))):
        return
    for call in index.calls:
        if call.name != "random_split":
            continue
        scope = call.scope
        gen = call.kw("generator")
        if gen is None and len(call.node.args) > 2:
            gen = call.node.args[2]
        how = ""
        if gen is not None:
            seed = _seed_of(gen, scope)
            if seed is not None and _rank_value(seed, scope):
                how = f"its generator is seeded with `{ast.unparse(seed)}`"
        else:
            seeds = [c for c in scope.calls if c.name == "manual_seed" and c.recv in ("torch", "torch.random")
                     and c.line < call.line and c.node.args]
            if seeds and _rank_value(seeds[-1].node.args[0], scope):
                how = (f"it draws from the global generator, seeded per rank at line {seeds[-1].line} "
                       f"(`torch.manual_seed({ast.unparse(seeds[-1].node.args[0])})`)")
        if not how:
            continue
        if t.facts.dead(scope, index):
            continue
        yield t.finding(
            "warning", call.node,
            f"`{call.text}()` splits the dataset differently on every rank: {how}",
            detail=("random_split permutes the indices with its generator (torch/utils/data/dataset.py); a seed that "
                    "differs by rank gives each rank other train/validation subsets, so samples are seen twice or "
                    "never and validation samples of one rank are another rank's training data."),
            fix="random_split(dataset, lengths, generator=torch.Generator().manual_seed(args.seed))  # same on all ranks",
            evidence={"source": _SOURCE},
        )
