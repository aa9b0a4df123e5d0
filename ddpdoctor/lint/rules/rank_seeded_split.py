"""A dataset split drawn with a per-rank seed (round 17 wave 2, a preview rule)."""
from __future__ import annotations

import ast
from typing import Optional

from ..conditions import is_rankish
from ..names import last_name
from . import rule
from ._common import is_distributed
from ._reach import reach

# pytorch/pytorch torch/utils/data/dataset.py random_split: `indices = randperm(sum(lengths), generator=generator)`,
# the default generator being the global one (torch.default_generator, seeded by torch.manual_seed). A generator or
# global seed that differs by rank gives every rank another permutation, hence another subset.
_SOURCE = "pytorch/pytorch torch/utils/data/dataset.py (random_split: randperm(sum(lengths), generator=generator))"
# huggingface/datasets src/datasets/arrow_dataset.py (commit 1435bdaea942022f9468e38fc4f745ecb99c3e59) Dataset.shuffle and
# Dataset.train_test_split: with `seed` and `generator` both None the seed is drawn from numpy's global state
# (`_, seed, pos, *_ = np.random.get_state()`), and the fingerprint of such a randomized call is random too (fingerprint.py
# update_fingerprint), so no rank reuses another's cached result: a process whose numpy state was never seeded, or
# seeded per rank, gets its own permutation.
_HF_SOURCE = ("huggingface/datasets src/datasets/arrow_dataset.py 1435bdaea942022f9468e38fc4f745ecb99c3e59 "
              "(Dataset.train_test_split / Dataset.shuffle: seed drawn from np.random.get_state() when seed and "
              "generator are None)")
# calls that make a `datasets` Dataset (or DatasetDict / IterableDataset) from which a split or shuffle is taken
_HF_MAKERS = {"load_dataset", "load_from_disk", "from_dict", "from_pandas", "from_list", "from_csv", "from_json",
              "from_parquet", "from_generator", "from_text", "train_test_split", "map", "filter", "select", "shuffle",
              "concatenate_datasets", "interleave_datasets", "remove_columns", "rename_column", "cast", "flatten",
              "with_format", "sort"}
# seeding calls that reach numpy's global generator (transformers/accelerate set_seed call np.random.seed; the common
# home-made helpers seed numpy too): a constant or argument seed makes every rank draw the same split
_NUMPY_SEEDERS = {"seed", "set_seed", "seed_everything", "setup_seed", "init_seeds", "fix_seed", "seed_all",
                  "set_random_seed", "same_seeds", "set_seeds", "fix_random_seed", "setup_seeds", "random_seed"}


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


def _hf_dataset(expr: Optional[ast.AST], scope, depth: int = 0) -> bool:
    """The expression is a `datasets` dataset: made by load_dataset / Dataset.from_* / a transform of one
    (`.map`, `.train_test_split`), or a split of one (`splits["train"]`), directly or through names of the function."""
    if expr is None or depth > 4:
        return False
    if isinstance(expr, ast.Subscript):
        return _hf_dataset(expr.value, scope, depth + 1)
    if isinstance(expr, ast.Call):
        if last_name(expr.func) in _HF_MAKERS:
            if last_name(expr.func) in ("load_dataset", "load_from_disk", "concatenate_datasets", "interleave_datasets"):
                return True
            if last_name(expr.func).startswith("from_"):
                return True
            return isinstance(expr.func, ast.Attribute) and _hf_dataset(expr.func.value, scope, depth + 1)
        return False
    if isinstance(expr, ast.Name) and expr.id in scope.values and scope.values[expr.id] is not expr:
        if _hf_dataset(scope.values[expr.id], scope, depth + 1):
            return True
        # round 26: the last assignment transforms the name itself (`ds = ds.shuffle(seed=42)` under an `if`): any
        # other assignment of the name in the function that makes a dataset (`ds = load_from_disk(path)`)
        return any(expr.id in a.targets and a.value is not scope.values[expr.id] and isinstance(a.value, ast.Call)
                   and _hf_dataset(a.value, scope, depth + 2) for a in scope.assigns)
    return False


def _numpy_seeding(index) -> tuple:
    """(seeded the same on every rank, the rank-dependent seeding call or None): the file's calls that seed numpy's
    global generator (`np.random.seed(x)`, `set_seed(x)`, `seed_everything(x)`). `accelerate.utils.set_seed(x,
    device_specific=True)` adds the process index (accelerate utils/random.py), so it counts as per rank."""
    same, per_rank = False, None
    for c in index.calls:
        if c.name not in _NUMPY_SEEDERS or not (c.node.args or c.node.keywords):
            continue
        if c.name == "seed" and not (c.recv or "").endswith("random"):
            continue  # `np.random.seed(x)` / `numpy.random.seed(x)`, not `random.seed(x)` nor an unrelated .seed()
        if c.name == "seed" and (c.recv or "") == "random":
            continue
        arg = c.node.args[0] if c.node.args else c.node.keywords[0].value
        dev = c.kw("device_specific")
        if _rank_value(arg, c.scope) or (isinstance(dev, ast.Constant) and dev.value is True):
            per_rank = c
        else:
            same = True
    return same, per_rank


@rule("LINT034", "rank-seeded-split")
def rank_seeded_split(t):
    """`random_split` drawn with a seed that differs by rank, in a distributed script.

    What it checks
        A `random_split(dataset, lengths, generator=g)` whose generator is seeded with a rank-dependent value
        (`torch.Generator().manual_seed(seed + rank)`, the seed a name assigned from `args.seed + get_rank()`), or a
        `random_split` with no generator in a function that has just called `torch.manual_seed(<rank-dependent>)`
        (since round 19 also in a function whose every caller has just done so), in a file that joins a process group. A constant seed, a seed from the arguments only and a split with its own fixed
        generator after a per-rank global seed are quiet. Since round 19 also a `datasets` split or shuffle with no
        seed (`load_dataset(...).train_test_split(test_size=0.1)`, `ds.shuffle()`) taken on every rank (since round
        22 not in the parent that spawns the ranks, which draws it once and hands it over) of a file that
        never seeds numpy's global generator the same on every rank (no `np.random.seed(x)` / `set_seed(x)` /
        `seed_everything(x)` with a rank-free value): datasets draws that seed from numpy's global state
        (huggingface/datasets arrow_dataset.py); since round 26 also one whose `seed=` names the rank
        (`train_test_split(test_size=0.1, seed=123 + local_rank)`). A preview rule (round 17): a note by default, a warning with
        `--preview`.

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
    yield from _hf_unseeded(t, index)
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
            elif not seeds and scope.kind == "function":
                # the caller seeds per rank just before it calls the function that splits (fr128
                # sab148/nxtaim-distributed-models: `torch.random.manual_seed(args.seed + rank)`, then
                # `prepare_datasets(args)`, whose random_split takes no generator)
                callers = [c for c in index.calls if c.name == scope.name and c.scope is not scope]
                found = []
                for c in callers:
                    before = [s for s in c.scope.calls if s.name == "manual_seed" and
                              s.recv in ("torch", "torch.random") and s.line < c.line and s.node.args]
                    if not before or not _rank_value(before[-1].node.args[0], c.scope):
                        break
                    found.append(before[-1])
                else:
                    if found:
                        how = (f"it draws from the global generator, which the caller seeds per rank at line "
                               f"{found[0].line} (`torch.manual_seed({ast.unparse(found[0].node.args[0])})`) before "
                               f"calling {scope.name}()")
        if not how:
            continue
        if t.facts.dead(scope, index) or reach(t).in_launcher(index, call):
            continue  # round 22: a split the spawning parent draws once is the same for every rank
        yield t.finding(
            "warning", call.node,
            f"`{call.text}()` splits the dataset differently on every rank: {how}",
            detail=("random_split permutes the indices with its generator (torch/utils/data/dataset.py); a seed that "
                    "differs by rank gives each rank other train/validation subsets, so samples are seen twice or "
                    "never and validation samples of one rank are another rank's training data."),
            fix="random_split(dataset, lengths, generator=torch.Generator().manual_seed(args.seed))  # same on all ranks",
            evidence={"source": _SOURCE},
        )


def _hf_unseeded(t, index):
    """`ds.train_test_split(test_size=0.1)` / `ds.shuffle()` of a `datasets` dataset with no seed and no generator,
    on every rank of a distributed script whose numpy global generator is not seeded the same on every rank (round
    19, a class of issue 25): each process draws the split from its own numpy state (huggingface/datasets
    arrow_dataset.py), so the ranks train on different "train" parts."""
    if "datasets" not in (index.source or ""):
        return
    yield from _hf_rank_seeded(t, index)
    calls = [c for c in index.calls if c.name in ("train_test_split", "shuffle") and isinstance(c.node.func, ast.Attribute)
             and c.kw("seed") is None and c.kw("generator") is None]
    if not calls:
        return
    same, per_rank = _numpy_seeding(index)
    if same and per_rank is None:
        return
    for call in calls:
        if call.name == "shuffle" and call.node.args:
            continue  # `ds.shuffle(42)`: the seed is the first positional argument
        if call.name == "train_test_split" and len(call.node.args) >= 5:
            continue
        if call.ctx.rank0 or call.ctx.gated:
            continue  # drawn on one rank (and saved or broadcast): not a per-rank split
        if not _hf_dataset(call.node.func.value, call.scope):
            continue
        if t.facts.dead(call.scope, index):
            continue
        if reach(t).in_launcher(index, call):
            continue  # round 22: drawn once in the parent before mp.spawn and handed to the ranks (fr141)
        how = (f"numpy's global generator is seeded per rank at line {per_rank.line} (`{ast.unparse(per_rank.node)}`)"
               if per_rank is not None else "numpy's global generator is never seeded in this file")
        yield t.finding(
            "warning", call.node,
            f"`{call.text or ast.unparse(call.node.func)}()` has no `seed=`: each rank draws its own {'split' if call.name == 'train_test_split' else 'order'} "
            f"({how})",
            detail=("With seed and generator None, datasets draws the seed from np.random.get_state() "
                    "(huggingface/datasets arrow_dataset.py) and gives the call a random fingerprint, so no rank reuses "
                    "another's cached result: every process gets another permutation, the ranks' train parts differ "
                    "(samples seen twice or never, validation samples of one rank in another's training data)."),
            fix=f"{call.text or ast.unparse(call.node.func)}({'test_size=0.1, ' if call.name == 'train_test_split' else ''}seed=args.seed)  # the same seed on every rank",
            evidence={"source": _HF_SOURCE},
        )


def _hf_rank_seeded(t, index):
    """Round 26 (fr148 angkul07/mini-LLM, a reader's miss): `ds.train_test_split(test_size=0.1, seed=123 + local_rank)`
    / `ds.shuffle(seed=seed + rank)` of a `datasets` dataset: the seed names the rank, so each rank draws another
    permutation (huggingface/datasets arrow_dataset.py: the seed seeds np.random.default_rng for the permutation)."""
    for call in index.calls:
        if call.name not in ("train_test_split", "shuffle") or not isinstance(call.node.func, ast.Attribute):
            continue
        seed = call.kw("seed")
        if seed is None and call.name == "shuffle" and call.node.args:
            seed = call.node.args[0]
        if seed is None or not _rank_value(seed, call.scope):
            continue
        if call.ctx.rank0 or call.ctx.gated or not _hf_dataset(call.node.func.value, call.scope):
            continue
        if t.facts.dead(call.scope, index) or reach(t).in_launcher(index, call):
            continue
        what = "split" if call.name == "train_test_split" else "order"
        yield t.finding(
            "warning", call.node,
            f"`{call.text or ast.unparse(call.node.func)}()` is seeded with `{ast.unparse(seed)}`, which names the "
            f"rank: each rank draws its own {what}",
            detail=("datasets permutes the rows with np.random.default_rng(seed) (huggingface/datasets "
                    "arrow_dataset.py); a seed that differs by rank gives every process another permutation, so the "
                    "ranks' train parts differ (samples seen twice or never, validation rows of one rank in "
                    "another's training data)."),
            fix=f"{call.text or ast.unparse(call.node.func)}({'test_size=0.1, ' if what == 'split' else ''}seed=args.seed)  # the same seed on every rank",
            evidence={"source": _HF_SOURCE, "seed": ast.unparse(seed)},
        )
