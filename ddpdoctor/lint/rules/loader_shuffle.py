"""A shuffling DataLoader with no DistributedSampler in a DDP run (round 8, a preview rule)."""
from __future__ import annotations

import ast
from typing import Iterable, Optional

from . import rule
from ..analysis import Call, ModuleIndex, exclusive
from ..conditions import is_rankish
from ..names import dotted
from ._common import DATA_PARALLEL_WRAPPERS, DATALOADER, DDP, INIT_PG
from ._reach import _world_of_one, reach

# Names that split the data per rank some other way: a sampler of the project's own (its name says Sampler),
# datasets.distributed.split_dataset_by_node, `dataset.shard(num_shards=world, index=rank)`, webdataset's
# split_by_node, torchdata's sharding filter. Any of them in the run makes the rule quiet.
_SPLIT_WORDS = ("Sampler", "sampler", "split_dataset_by_node", "shard", "split_by_node", "sharding_filter")
_SOURCE = ("pytorch/pytorch torch/utils/data/distributed.py (DistributedSampler: 'restricts data loading to a subset "
           "of the dataset... each process can pass a DistributedSampler instance as a DataLoader sampler, and load "
           "a subset of the original dataset that is exclusive to it') and torch/utils/data/dataloader.py "
           "(shuffle=True builds a RandomSampler over the whole dataset), torch 2.13.0 "
           "cf30153c4c131c8164ee7798e5022d810682e2cb")


def _names(tree: ast.AST) -> Iterable[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            yield node.id
        elif isinstance(node, ast.Attribute):
            yield node.attr
        elif isinstance(node, ast.keyword) and node.arg:
            yield node.arg
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            yield node.name


def _splits_the_data(t) -> bool:
    """Something in the run gives each rank its own part of the data: a call in the files linted whose name says
    so (a sampler, `split_dataset_by_node`, `shard`...) or a loader handed a `sampler=`, or such a name used in a
    project module they import. An import alone is not a use (fr57 agsiddhant: the DistributedSampler imported,
    its line in the DataLoader commented out). Cached per run."""
    key = ("loader_shuffle.splits", id(t.index))
    got = t.facts.cache.get(key)
    if got is None:
        got = any(_split_call(c) and not _unused_sampler(ix, c) and not _evaluation_split(ix, c)
                  for ix in _run_of(t) for c in ix.calls) or any(
            w in n for tree in t.facts.imported.values() for n in _used_names(tree) for w in _SPLIT_WORDS)
        t.facts.cache[key] = got
    return got


def _run_of(t) -> list:
    """The linted modules of this file's run: the file, the linted modules it imports (and theirs), and the linted
    modules that import it (a helper module's callers). Another entry script of the same repository linted beside
    it is not its run: fr75 IslinaS/TKGQA fsdp.py shuffles the whole set while ddp.py and ddp_finetune.py, which
    it never imports, use DistributedSamplers (both readers)."""
    r = reach(t)
    by_id = {id(ix): ix for ix in t.facts.indexes.values()}
    todo, seen = [t.index], {id(t.index)}
    while todo:
        ix = todo.pop()
        for other in r._imports(ix):
            if other not in seen:
                seen.add(other)
                todo.append(by_id[other])
    seen |= {id(ix) for ix in t.facts.indexes.values() if id(t.index) in r._imports(ix)}
    return [by_id[i] for i in seen if i in by_id]


def _split_call(call: Call) -> bool:
    names = [call.qual or "", call.name or ""]
    if any(w in n for n in names for w in _SPLIT_WORDS):
        return True
    given = call.kw("sampler")
    if given is None:
        given = call.kw("batch_sampler")
    return given is not None and not (isinstance(given, ast.Constant) and given.value is None)


def _unused_sampler(index: ModuleIndex, call: Call) -> bool:
    """`train_sampler = DistributedSampler(ds)` whose name is then only told `set_epoch(...)`: the sampler never
    reaches a loader (`DataLoader(ds, shuffle=True)` draws the whole set on every rank; fr89 overfitover/
    pytorch-distributed 3.py, both readers). Any other read of the name (`sampler=train_sampler`,
    `shuffle=(train_sampler is None)`, a return, an argument) counts as a use."""
    if "Sampler" not in (call.name or "") or call.kw("sampler") is not None:
        return False
    names = [a.targets[0] for a in index.assigns if a.call is call and len(a.targets) == 1]
    if len(names) != 1 or not names[0] or "." in names[0]:
        return False
    name = names[0]
    epoch_reads = set()
    for node in ast.walk(index.tree):
        if isinstance(node, ast.Attribute) and node.attr == "set_epoch" and isinstance(node.value, ast.Name):
            epoch_reads.add(id(node.value))
    return not any(isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load)
                   and id(node) not in epoch_reads for node in ast.walk(index.tree))


def _evaluation_split(index: ModuleIndex, call: Call) -> bool:
    """A split of the evaluation data only: an evaluation loader handed a `sampler=` (`DataLoader(dataset_val,
    sampler=sampler_val)`), or a sampler whose name reaches nothing but such loaders (`sampler_val =
    SubsetRandomSampler(np.arange(rank, len(dataset_val), world))`). The training loader still draws the whole set
    on every rank (fr92 TiankaiHang/style-transfer dist_train.py, both readers)."""
    if call.qual == DATALOADER:
        return call.kw("sampler") is not None and _evaluation_loader(call)
    if "Sampler" not in (call.name or ""):
        return False
    names = [a.targets[0] for a in index.assigns if a.call is call and len(a.targets) == 1]
    if len(names) != 1 or not names[0] or "." in names[0]:
        return False
    loaders = [c for c in index.by_qual.get(DATALOADER, ())]
    uses = [n for n in ast.walk(index.tree) if isinstance(n, ast.Name) and n.id == names[0] and
            isinstance(n.ctx, ast.Load)]
    if not uses:
        return False
    for use in uses:
        owner = next((c for c in loaders if any(use is x for x in ast.walk(c.node))), None)
        if owner is None or not _evaluation_loader(owner):
            return False
    return True


def _used_names(tree: ast.AST) -> Iterable[str]:
    """Names a module uses (not its imports): calls, attributes, keyword arguments, definitions."""
    for n in _names(tree):
        yield n


def _shuffles(call: Call) -> bool:
    """`DataLoader(ds, shuffle=True)` with no sampler of its own (shuffle is the 3rd positional parameter)."""
    value = call.kw("shuffle")
    if value is None and len(call.node.args) > 2:
        value = call.node.args[2]
    if not (isinstance(value, ast.Constant) and value.value is True):
        return False
    return call.kw("sampler") is None and call.kw("batch_sampler") is None and len(call.node.args) <= 3


def _per_rank_dataset(call: Call) -> bool:
    """The dataset handed to the loader is built from the rank (`Subset(ds, idx[rank::world])`,
    `x, y = load_partition(rank, world)` then `TensorDataset(torch.tensor(x), ...)`): its names are followed back
    through their assignments in the same function, a few steps deep."""
    ds = call.arg(0, "dataset")
    if ds is None:
        return False
    assigns = {}
    for a in call.scope.assigns:
        for name in a.targets:
            if name and a.value is not None:
                assigns.setdefault(name, []).append(a.value)
    todo, seen = [ds], set()
    for _ in range(40):
        if not todo:
            break
        expr = todo.pop()
        for n in ast.walk(expr):
            if isinstance(n, (ast.Name, ast.Attribute, ast.Call)) and is_rankish(n):
                return True
            if isinstance(n, ast.Name) and n.id not in seen:
                seen.add(n.id)
                todo.extend(assigns.get(n.id, ()))
    return False


_EVAL_WORDS = ("test", "val", "eval", "plot", "vis", "infer", "predict")


def _evaluation_loader(call: Call) -> bool:
    """A loader for evaluation or plots (its name or its dataset's says test/val/eval/plot): every rank reading the
    whole evaluation set wastes time but trains nothing twice; the rule is about the training data."""
    names = [n for a in call.scope.assigns if a.call is call for n in a.targets if n]
    ds = call.arg(0, "dataset")
    names.append(dotted(ds) or "" if ds is not None else "")
    return any(w in n.rsplit(".", 1)[-1].lower() for n in names for w in _EVAL_WORDS)


# Callees whose name says they evaluate or extract features with the loader they are handed
_EVAL_CALLEES = ("eval", "test", "valid", "infer", "predict", "feature", "extract", "grab", "embed", "encode",
                 "retriev", "metric", "score")


def _handed_to_evaluation_only(call: Call) -> bool:
    """The loader's name (a plain local) is used only as an argument of calls whose name says evaluation or feature
    extraction (`grab_corpus_feature(model, corpus_loader, device)`, `evaluate(model, loader)`): it is never
    iterated here, never handed to a training function. fr76 SQuiDNet train_deepspeed.py:42 (both readers: a corpus
    loader that only feeds grab_corpus_feature, beside the training loader at :41, which stays reported)."""
    names = {n for a in call.scope.assigns if a.call is call for n in a.targets if n and "." not in n}
    if not names:
        return False
    parents = {}
    for node in ast.walk(call.scope.node):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
    uses = [n for n in ast.walk(call.scope.node)
            if isinstance(n, ast.Name) and n.id in names and isinstance(n.ctx, ast.Load)]
    if not uses:
        return False
    for use in uses:
        parent = parents.get(use)
        if isinstance(parent, ast.keyword):
            parent = parents.get(parent)
        if not (isinstance(parent, ast.Call) and parent.func is not use):
            return False
        callee = dotted(parent.func) or ""
        last = callee.rsplit(".", 1)[-1].lower()
        if not any(w in last for w in _EVAL_CALLEES):
            return False
    return True


def _in_run(t, qual: str, word: str) -> bool:
    """`qual` is called in a file of the run, or `word` names something in a project module they import."""
    key = f"loader_shuffle.{word}"
    got = t.facts.cache.get(key)
    if got is None:
        got = any(qual in ix.by_qual for ix in t.facts.indexes.values()) or any(
            word in n for tree in t.facts.imported.values() for n in _names(tree))
        t.facts.cache[key] = got
    return got


@rule("LINT017", "shuffle-without-distributed-sampler")
def shuffle_without_distributed_sampler(t):
    """A DDP run whose training DataLoader shuffles the whole dataset on every rank.

    What it checks
        A file that joins a process group, wraps a model in DistributedDataParallel (or FSDP) and trains
        (`.backward()`), with a `DataLoader(..., shuffle=True)` that has no sampler, in a run (the files
        linted and the project modules they import) where nothing splits the data per rank: no
        DistributedSampler or other sampler, no `split_dataset_by_node`/`shard`, no dataset built from the
        rank. Quiet when the loader is rank-0 only, in the other branch of the test that chooses DDP, in
        dead code, or only handed to an evaluation or feature-extraction call. A preview rule (round 8): a note by default, a warning with `--preview`.

    Why it matters
        `shuffle=True` builds a RandomSampler over the whole dataset (torch/utils/data/dataloader.py). The
        DistributedSampler is what gives each process 'a subset of the original dataset that is exclusive to
        it' (torch/utils/data/distributed.py). Without it every rank reads every sample each epoch, in its own
        order: an epoch costs N times the compute, and the effective batch is N copies drawn from one dataset.

    Example
        dist.init_process_group("nccl")
        model = DistributedDataParallel(Net().cuda(local_rank), device_ids=[local_rank])
        loader = DataLoader(train_set, batch_size=64, shuffle=True)
        for x, y in loader:
            loss_fn(model(x), y).backward()

    Fix
        `sampler = DistributedSampler(train_set)`; `DataLoader(train_set, batch_size=64, sampler=sampler)`
        (no `shuffle=`), and `sampler.set_epoch(epoch)` at the start of every epoch.
    """
    index = t.index
    wraps = [c for q in DATA_PARALLEL_WRAPPERS for c in index.by_qual.get(q, ())]
    joins = INIT_PG in index.by_qual
    # A DeepSpeed engine built without `training_data=` (deepspeed/__init__.py initialize: the engine builds its own
    # distributed loader only from training_data) trains from the script's own loader, and initialize() joins the
    # process group (init_distributed): the same split is needed (fr66 SomeshVermaGit/Infinity, both readers)
    engines = [c for c in index.by_qual.get("deepspeed.initialize", ())
               if c.kw("training_data") is None and len(c.node.args) < 5]
    kind = "a DDP run"
    if engines and not wraps:
        wraps, joins, kind = engines, True, "a DeepSpeed run (deepspeed.initialize was not handed the dataset)"
    # this file joins the group or wraps the model; the other half may be a helper module of the run (ddp_utils.setup,
    # a trainer class that wraps): yet-another-transformers, EEG-GAN (fr54)
    if not (joins or wraps) or not (joins or _in_run(t, INIT_PG, "init_process_group")) or not (
            wraps or _in_run(t, DDP, "DistributedDataParallel")):
        return
    # it trains: a backward here or in the run, or it builds a torch optimizer (the loop may live in a module not
    # collected: yet-another-transformers' procedures.train)
    if "backward" not in index.by_name and not _in_run(t, "<none>", "backward") and not any(
            q.startswith("torch.optim.") and ".lr_scheduler." not in q for q in index.by_qual):
        return
    if _world_of_one(index):
        return  # WORLD_SIZE forced to "1": a group of one (fr48 ACynj main.py)
    loaders = [c for c in index.by_qual.get(DATALOADER, ()) if _shuffles(c)]
    if not loaders or _splits_the_data(t):
        return
    for call in loaders:
        if t.facts.gated(index, call) or t.facts.dead(call.scope, index):
            continue
        if wraps and all(exclusive(call.ctx, w.ctx) for w in wraps):
            continue  # the single-process branch of `if distributed: DDP(...) else: ...`
        if _per_rank_dataset(call) or _evaluation_loader(call) or _handed_to_evaluation_only(call):
            continue
        if _prepared_by_accelerate(index, call) or _prepared_by_ray(index, call):
            continue  # accelerate's prepare shards it (fr110 SPA-VL); so does Ray Train's (fr117 wordle)
        yield t.finding(
            "warning", call.node,
            f"DataLoader(shuffle=True) with no DistributedSampler in {kind}: every rank reads the whole dataset, "
            "each in its own order",
            detail=("This file joins a process group and trains a DistributedDataParallel model, but the loader "
                    "draws from the whole dataset on every rank and nothing in the files linted or the project "
                    "modules they import splits the data per rank. Each epoch is N times the work; the ranks do "
                    "not partition the samples."),
            fix=("sampler = torch.utils.data.distributed.DistributedSampler(dataset)\n"
                 "loader = DataLoader(dataset, batch_size=..., sampler=sampler)   # no shuffle=\n"
                 "for epoch in range(epochs):\n"
                 "    sampler.set_epoch(epoch)"),
            evidence={"loader_line": call.line, "ddp_line": wraps[0].line if wraps else None, "source": _SOURCE},
        )


def _prepared_by_accelerate(index, call) -> bool:
    """The loader (or the name it is bound to) is handed to `accelerator.prepare(...)`, which replaces it with a
    per-process shard (accelerate data_loader.prepare_data_loader): fr110 EchoseChen/SPA-VL-RLHF builds
    `DataLoader(shuffle=True)` and prepares it in the same method, in a file whose deepspeed.initialize only wraps a
    reference model."""
    names = {n for a in index.assigns if a.call is call for n in a.targets if n}
    for c in index.by_name.get("prepare", ()):
        if "accelerator" not in (c.recv or "").lower():
            continue
        for arg in list(c.node.args) + [k.value for k in c.node.keywords]:
            if arg is call.node or (dotted(arg) in names and c.scope is call.scope):
                return True
    return False



# ray-project/ray python/ray/train/torch/train_loop_utils.py prepare_data_loader (commit
# 59ec1d2ebe3096b71f7ea7a0943e2b2dcc47d33d): "This method adds a `DistributedSampler` to the `DataLoader` if the number
# of training workers is greater than 1. If shuffling is enabled on the original `DataLoader`, then `shuffle=True` will
# also be passed into the `DistributedSampler` constructor." Its parameter add_dist_sampler (default True) turns it off.
_RAY_PREPARE = "ray.train.torch.prepare_data_loader"


def _prepared_by_ray(index, call) -> bool:
    """The loader (or the name it is bound to, in the same function) is handed to Ray Train's
    `prepare_data_loader`, which swaps its shuffle for a DistributedSampler(shuffle=True) when the run has more than one
    worker: fr117 Morgan-Griffiths/wordle train_dynamics_ddp.py (`train_loader = DataLoader(..., shuffle=True)` then
    `train_loader = train.torch.prepare_data_loader(train_loader)`). `add_dist_sampler=False` keeps the whole-set
    shuffle on every worker: not a shard."""
    names = {n for a in index.assigns if a.call is call for n in a.targets if n}
    for c in index.by_qual.get(_RAY_PREPARE, ()):
        off = c.kw("add_dist_sampler")
        if off is None and len(c.node.args) > 1:
            off = c.node.args[1]
        if isinstance(off, ast.Constant) and off.value is False:
            continue
        first = c.arg(0, "data_loader")
        if first is not None and (first is call.node or (dotted(first) in names and c.scope is call.scope)):
            return True
    return False
