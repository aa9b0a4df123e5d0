"""F10: a DistributedSampler whose epoch never changes."""
from __future__ import annotations

import ast
import os
import re
from typing import Dict, Set

from ..analysis import module_fact
from ..names import dotted, stmt_nodes
from . import rule
from ._common import SAMPLERS
from ._reach import callers_of, follow, reach

# Evaluation data: its order does not matter, and it is usually not shuffled at all.
_EVAL = re.compile(r"eval|valid|test|(?:^|_)dev(?:_|$)|(?:^|_)val(?:_|$)|predict|infer|(?:^|_)query|gallery",
                   re.IGNORECASE)


def _for_evaluation(index, call) -> bool:
    """The sampler serves evaluation data: named so, fed an eval dataset, or built in an eval function."""
    names = [n for a in call.scope.assigns if a.value is call.node for n in a.targets if n]
    data = call.arg(0, "dataset")
    names += [dotted(data) or ""] if data is not None else []
    s = call.scope
    while s is not None and s.kind != "module":
        names.append(s.name)
        s = s.parent
    return any(_EVAL.search(n.rsplit(".", 1)[-1]) for n in names if n)


def _span(node):
    return node.lineno, getattr(node, "end_lineno", None) or node.lineno


def _inside(loop, line: int) -> bool:
    start, end = _span(loop.node)
    return start < line <= end


def _callees_of_loop(index, loop):
    """Functions of this file that the loop's body calls (the batch loop is often `train_one_epoch(...)`).
    Kept per index and loop: _loop_nests, _epoch_loops and _sets_epoch_inside each ask for every loop."""
    cache = index.__dict__.setdefault("_loop_callees", {})
    got = cache.get(id(loop))
    if got is None:
        got = cache[id(loop)] = _find_callees_of_loop(index, loop)
    return got


def _find_callees_of_loop(index, loop):
    out = []
    for c in loop.scope.calls:
        if _inside(loop, c.line):
            fn = index.function_of(c.node.func, c.scope)
            if fn is not None and fn is not loop.scope:
                out.extend(index.reachable(fn, depth=3))
    return out


def _loop_nests(index, loop) -> bool:
    """The loop contains another loop, directly or in a function its body calls."""
    if any(l is not loop and l.scope is loop.scope and isinstance(l.node, (ast.For, ast.AsyncFor)) and
           not _over_parameters(l) and _inside(loop, l.node.lineno) for l in loop.scope.loops):
        return True
    return any(not _over_parameters(l) for s in _callees_of_loop(index, loop) for l in s.loops)


_NOT_BATCHES = ("parameters", "named_parameters", "modules", "named_modules", "children", "buffers", "keys",
                "items", "values")


def _over_parameters(loop) -> bool:
    """`for p in model.parameters()` / `for k, v in d.items()`: a loop over a model or a dict, not over batches."""
    it = getattr(loop.node, "iter", None)
    return isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr in _NOT_BATCHES


def _fixed_epoch(call) -> bool:
    """`sampler.set_epoch(1)`: a literal epoch. DistributedSampler.__iter__ seeds its shuffle with
    `self.seed + self.epoch`, and only set_epoch changes `self.epoch` (torch/utils/data/distributed.py), so a
    literal gives the same permutation every epoch, as no call would (SentiFormer's build_dataloader calls
    `sampler.set_epoch(1)` once, when it builds the loader). Such a call does not count as setting the epoch."""
    args = call.node.args
    return len(args) == 1 and not call.node.keywords and isinstance(args[0], ast.Constant) and \
        isinstance(args[0].value, int) and not isinstance(args[0].value, bool)


def _dataset_epoch(call) -> bool:
    """`train_dataloader.dataset.set_epoch(epoch)` / `train_dataset.set_epoch(epoch)`: the dataset's own method (an
    augmentation schedule), which leaves the DistributedSampler's `self.epoch` where it was (fr91
    kingoomieiii/frame-transformer app-v8 and train-v1d, both readers)."""
    last = (call.recv or "").rsplit(".", 1)[-1].lower()
    return "dataset" in last


def _set_epochs(index) -> list:
    """The set_epoch calls of a module that can advance the epoch (not `set_epoch(<literal>)`), computed once per
    module (asked once per epoch loop)."""
    got = index.__dict__.get("_advancing_set_epochs")
    if got is None:
        # a set_epoch under `if rank == 0:` leaves every other rank's sampler at epoch 0 (each rank's sampler seeds
        # with seed + its own epoch, torch/utils/data/distributed.py): their orders differ from rank 0's, so the
        # shards overlap (fr56 PhamQuocHuy1101)
        got = [c for c in index.by_name.get("set_epoch", ()) if not _fixed_epoch(c) and not c.ctx.rank0 and
               not _dataset_epoch(c)]
        index.__dict__["_advancing_set_epochs"] = got
    return got


def _sets_epoch_inside(index, loop) -> bool:
    """set_epoch is called in the loop's body or in a function its body calls."""
    if any(c.scope is loop.scope and _inside(loop, c.line) for c in _set_epochs(index)):
        return True
    return any(c.name == "set_epoch" and not _fixed_epoch(c) and not _dataset_epoch(c)
               for s in _callees_of_loop(index, loop) for c in s.calls)


def _epochish(loop) -> bool:
    node = loop.node
    text = ast.unparse(node.target) + " " + ast.unparse(node.iter) if isinstance(node, (ast.For, ast.AsyncFor)) \
        else ast.unparse(node.test)
    return "epoch" in text.lower()


_COUNTERS = ("range", "trange", "count", "tqdm", "enumerate")


def _counts(loop) -> bool:
    """`for epoch in range(...)` / `trange(...)` / `while ...`: a loop over a count, not over a loader's batches."""
    node = loop.node
    if isinstance(node, ast.While):
        return True
    it = node.iter
    for _ in range(3):
        while isinstance(it, ast.Call) and (dotted(it.func) or "").rsplit(".", 1)[-1] in ("tqdm", "enumerate") and \
                it.args:
            it = it.args[0]
        if not isinstance(it, ast.Name):
            break
        # `train_iterator = trange(epochs_trained, num_train_epochs)` then `for _ in train_iterator:` (the old
        # transformers template, DensePhrases): the name the function binds it to once
        values = [a.value for a in loop.scope.assigns if it.id in a.targets and a.value is not None]
        if len(values) != 1:
            break
        it = values[0]
    # `epochs = torch.arange(n)` / `np.arange(n)`, then `for epoch in epochs:` (fr72 bedartha/spvae): a count too
    return isinstance(it, ast.Call) and (dotted(it.func) or "").rsplit(".", 1)[-1] in ("range", "trange", "count",
                                                                                       "arange") \
        and not _single_pass(it)


def _single_pass(call: ast.Call) -> bool:
    """`range(1)` / `range(0, 1)`: a count of at most one with literal bounds runs its body once, so the loader
    inside is iterated once and no later epoch can repeat the order (DistributedSampler.__iter__ seeds its
    generator with seed + epoch per pass: torch/utils/data/distributed.py). fr46 BrianZCS: `for epoch in range(1)`."""
    if (dotted(call.func) or "").rsplit(".", 1)[-1] not in ("range", "trange") or call.keywords or \
            not 1 <= len(call.args) <= 2 or not all(isinstance(a, ast.Constant) and type(a.value) is int
                                                  for a in call.args):
        return False
    lo, hi = (0, call.args[0].value) if len(call.args) == 1 else (call.args[0].value, call.args[1].value)
    return hi - lo <= 1


def _evaluating(loop) -> bool:
    s = loop.scope
    while s is not None and s.kind != "module":
        if _EVAL.search(s.name):
            return True
        s = s.parent
    return loop.ctx.no_grad


def epoch_loops(index) -> list:
    """Loops over epochs: loops over a count (`for epoch in range(...)`, `while`) that nest a batch loop
    (directly or through a called function), outside evaluation; when some of them name epochs, only those.
    Kept per index: several rules and several samplers of one file ask."""
    got = index.__dict__.get("_epoch_loops")
    if got is None:
        got = index.__dict__["_epoch_loops"] = _epoch_loops(index)
    return got


def _epoch_loops(index) -> list:
    nesting = [l for l in index.loops if isinstance(l.node, (ast.For, ast.AsyncFor, ast.While))
               and _counts(l) and not _evaluating(l) and _loop_nests(index, l)]
    if len(nesting) > 1:  # the outermost loop is the epoch loop: a loop it runs (`while batch is not None`) is not
        # l is dropped when another loop o holds it (same scope, l inside o) or calls l's function; grouped by scope
        # and by callee, not by pairs (pairs: quadratic in the loops of a file)
        callers: Dict[int, Set[int]] = {}
        by_scope: Dict[int, list] = {}
        for o in nesting:
            by_scope.setdefault(id(o.scope), []).append(o)
            for s in _callees_of_loop(index, o):
                callers.setdefault(id(s), set()).add(id(o))
        nesting = [l for l in nesting if not (
            any(o is not l and _inside(o, l.node.lineno) for o in by_scope[id(l.scope)])
            or callers.get(id(l.scope), set()) - {id(l)})]
    named = [l for l in nesting if _epochish(l)]
    return named or nesting


def _epoch_loop(index) -> bool:
    return bool(epoch_loops(index))


def _named_epoch_loops(t) -> bool:
    """Some file of the run has a loop that names epochs (`for epoch in range(...)`)."""
    got = t.facts.cache.get("sampler.named_epochs")
    if got is None:
        got = any(_epochish(l) for ix in t.facts.indexes.values() for l in ix.loops
                  if isinstance(l.node, (ast.For, ast.AsyncFor, ast.While)))
        t.facts.cache["sampler.named_epochs"] = got
    return got


def _missing_set_epoch(t, index) -> bool:
    """Some epoch loop runs without set_epoch: in this file, or (when this file builds the sampler but loops
    over no epochs) in the other files of the run. A set_epoch in another branch or function does not
    cover an epoch loop that never calls it. When the run names its epoch loops (`for epoch in ...`), a
    nested loop of a helper module that names none is not taken for one."""
    loops = epoch_loops(index)
    if loops and not any(_epochish(l) for l in loops) and _named_epoch_loops(t) and len(t.facts.indexes) > 1:
        loops = []
    if loops and "backward" not in index.by_name and any(
            _set_epochs(ix) for ix in t.facts.indexes.values() if ix is not index):
        loops = []  # a data module that trains nothing (SEA-RAFT's datasets.py): the run's training loop sets the epoch
    if loops:
        return any(not _sets_epoch_inside(index, l) for l in loops)
    if _set_epochs(index):
        return False
    others = [(ix, l) for ix in t.facts.indexes.values() if ix is not index for l in epoch_loops(ix)]
    if not others or any(_set_epochs(ix) for ix in t.facts.indexes.values()):
        return False
    return True


@module_fact
def _loop_iter_names(index) -> list:
    """(loop, the dotted names its iterable mentions) of every `for` of the file, walked once per index (perf17:
    _evaluation_only walked every loop's iterable for every sampler)."""
    return [(loop, {dotted(n) for n in ast.walk(loop.node.iter) if isinstance(n, (ast.Name, ast.Attribute))})
            for loop in index.loops if getattr(loop.node, "iter", None) is not None]


@module_fact
def _loader_assigns(index) -> list:
    """The assignments of the file whose value is a DataLoader(...) call, in the file's order: _evaluation_only asks
    for them once per sampler (it scanned every assignment of the file for each)."""
    return [a for a in index.assigns if a.call is not None and a.call.name == "DataLoader"]


def _evaluation_only(index, call) -> bool:
    """Every loop over the loaders built on this sampler runs under no_grad or in an evaluation function. The loader
    names are the sampler's function's own: a loop of another function over a local that happens to share the name
    (`loader` in evaluate_basin()) is not this loader's (fr79 nirandaperera/ealstm_regional_modeling, both readers:
    dist_train()'s loader goes to train_epoch(), and only the evaluation functions loop over a `loader` of their own).
    When the function does not loop over its loader itself, the calls it hands the loader to decide: evaluation
    only when every one of them is named for evaluation."""
    sampler_names = {n for a in call.scope.assigns if a.value is call.node for n in a.targets if n}
    loaders = {n for a in _loader_assigns(index) if any(
        v is not None and (dotted(v) in sampler_names or v is call.node) for v in [a.call.kw("sampler")])
        for n in a.targets if n and (a.scope is call.scope or "." in n)}
    if not loaders:
        return False
    uses = []
    for loop, names in _loop_iter_names(index):
        if not names.isdisjoint(loaders):
            if loop.scope is call.scope or any("." in n for n in loaders):
                uses.append(loop)
    if uses:
        return all(_evaluating(l) for l in uses)
    handed = [c for c in call.scope.calls if c.name and any(
        dotted(v) in loaders for v in list(c.node.args) + [k.value for k in c.node.keywords])]
    return bool(handed) and all(_EVAL.search(c.name) for c in handed)


_PLAIN = {"DataLoader", "tqdm", "enumerate", "iter", "cycle", "zip", "len", "list", "next", "print", "isinstance",
          "hasattr", "getattr", "range", "islice", "chain", "trange", "Accelerator", "prepare"}


def _sampler_handed_to_set_epoch(t, index, call) -> bool:
    """The sampler itself goes to a function of an imported project module that calls set_epoch on it
    (`infinite_dataloader(loader, sampler=sampler)`, trlx)."""
    sampler_names = {n for a in call.scope.assigns if a.value is call.node for n in a.targets if n}
    if not sampler_names:
        return False
    for c in call.scope.calls:
        if c.name in _PLAIN or not c.name or (c.qual or "").startswith(("torch.", "itertools.", "tqdm", "accelerate.")):
            continue
        if any(dotted(a) in sampler_names for a in list(c.node.args) + [k.value for k in c.node.keywords]):
            fn = t.facts.imported_function(c.name)
            if fn is not None and any(isinstance(n, ast.Attribute) and n.attr == "set_epoch" for n in ast.walk(fn)):
                return True
    return False


def _returned_and_set_epoch(t, index, call) -> bool:
    """The sampler is returned by the function that builds it (`return loader, sampler`), and a caller (another
    module too) calls set_epoch on what it binds from that call (`loader, sampler = get_loader(...)`;
    `sampler.set_epoch(ep)`; fr68 owais4321/cse651-final-2026)."""
    scope = call.scope
    if scope.kind != "function":
        return False
    names = {n for a in scope.assigns for n in a.targets if n and any(x is call.node for x in ast.walk(a.value))} \
        if any(True for _ in scope.assigns) else set()
    returns = [n.value for n in stmt_nodes(scope.node) if isinstance(n, ast.Return) and n.value is not None]
    if not any(x is call.node or (isinstance(x, ast.Name) and x.id in names) for r in returns for x in ast.walk(r)):
        return False
    for _cix, site in callers_of(reach(t), scope):
        bound = {n for a in site.scope.assigns if a.value is site.node for n in a.targets if n}
        if any(c.name == "set_epoch" and c.recv in bound for c in site.scope.calls):
            return True
    return False


def _lightning_dataloader(index, call) -> bool:
    """The sampler is built in a method of a LightningModule (or DataModule): the loaders it returns are
    iterated by Lightning's fit loop, which calls set_epoch on a DistributedSampler itself (longformer)."""
    s = call.scope
    while s is not None and s.kind != "module":
        if s.kind == "function" and s.cls is not None:  # `train_dataloader` or a helper it calls (`_get_loader`)
            bases = index.class_bases(s.cls)
            if any("lightning" in b.lower() or b.rsplit(".", 1)[-1] in ("LightningModule", "LightningDataModule")
                   for b in bases):
                return True
        s = s.parent
    return False


def _rebuilt_each_epoch(index, call) -> bool:
    """The sampler is built inside the epoch loop over a dataset built in the same iteration (coconut rebuilds
    and reshuffles its dataset every epoch): the samples change order even though the sampler's does not."""
    data = call.arg(0, "dataset")
    name = dotted(data) if data is not None else None
    if not name:
        return False
    for loop in epoch_loops(index):
        if loop.scope is not call.scope or not _inside(loop, call.line):
            continue
        if any(name in a.targets and _inside(loop, a.node.lineno) and a.node.lineno < call.line
               for a in call.scope.assigns):
            return True
    return False


def _handed_to_a_wrapper(index, call, t=None) -> bool:
    """The loader built on the sampler goes into an object of the user's own code (`IterLoader(loader)`,
    LAVIS): that wrapper may call set_epoch where this file cannot see it. (A sampler handed to a batch
    sampler, distillation's GroupedBatchSampler, is not excused: nothing there calls set_epoch.)"""
    sampler_names = {n for a in call.scope.assigns if a.value is call.node for n in a.targets if n}
    names = set()  # the loaders built on it: a sampler wrapped in a batch sampler still needs set_epoch
    for a in call.scope.assigns:  # loader = DataLoader(ds, sampler=sampler)
        if a.call is not None and a.call.name == "DataLoader" and any(
                dotted(v) in sampler_names or v is call.node for v in [a.call.kw("sampler")] if v is not None):
            names.update(n for n in a.targets if n)
    if not names:
        return False
    for c in call.scope.calls:
        if c.name in _PLAIN or (c.qual or "").startswith(("torch.", "itertools.", "tqdm", "accelerate.")) or \
                c.qual in _REPEATERS:
            continue  # (a library repeater is known: it never calls set_epoch)
        if any(dotted(a) in names for a in list(c.node.args) + [k.value for k in c.node.keywords]):
            fn = index.function_of(c.node.func, c.scope)
            klass = index.local_class(c.node.func, c.scope) if fn is None else None
            if fn is not None:  # a function of this file: we can see whether it calls set_epoch
                if any(x.name == "set_epoch" and not _fixed_epoch(x) for s in index.reachable(fn) for x in s.calls):
                    return True
                continue
            if klass is not None:
                if any(x.name == "set_epoch" for m in klass.functions.values() for x in m.calls) or \
                        "set_epoch" in klass.functions:
                    return True
                continue
            # a function of a project module beside the script (`from engine import train`): read it, as for one
            # of this file (fr63 0xIbra/RobustSAM's engine.train, which never calls set_epoch)
            found = t.project_function(c.qual) if t is not None and c.qual else None
            if found is None and t is not None and isinstance(c.node.func, ast.Name) and index.star_modules and \
                    c.node.func.id not in index.bound:  # `from ddp_utils import *; train(model, loader)` (fr65 Zephyr)
                found = next((f for m in index.star_modules for f in [t.project_function(f"{m}.{c.node.func.id}")]
                              if f is not None), None)
            if found is not None:
                fix, pfn = found
                if any(x.name == "set_epoch" and not _fixed_epoch(x) for s in fix.reachable(pfn) for x in s.calls):
                    return True
                if c.qual is None and not any(x.name == "backward" for s in fix.reachable(pfn) for x in s.calls):
                    return True  # a star-imported function that reads the loader and trains nothing (an analysis pass)
                continue
            return True  # code this file cannot see may call set_epoch
    return False


# Library wrappers that restart the loader with iter() on StopIteration, forever, and never call set_epoch:
# deepspeed.utils.RepeatingLoader (deepspeedai/DeepSpeed deepspeed/runtime/dataloader.py, RepeatingLoader.__next__,
# at edaa722). Each restart is a new epoch of the sampler, like a project's InfiniteIterator.
_REPEATERS = {"deepspeed.utils.RepeatingLoader", "deepspeed.runtime.dataloader.RepeatingLoader",
              "deepspeed.utils.dataloader.RepeatingLoader"}

_CARRY = {"DataLoader", "BatchSampler", "iter", "enumerate", "tqdm", "cycle", "islice", "zip", "chain", "trange",
          "DataLoaderX", "MultiEpochsDataLoader"}
def _carry_alias(c) -> bool:
    """`progress_bar = tqdm.tqdm if main else iter`, then `progress_bar(loader)` (fr76 RoderickGu): a name bound only to
    callables that carry the loader (tqdm, iter, enumerate...) carries it too, so the loop over it is the loader's."""
    func = c.node.func
    if not isinstance(func, ast.Name):
        return False
    scope, values = c.scope, []
    while scope is not None and not values:
        values = [a.value for a in scope.assigns if a.targets == [func.id] and a.value is not None]
        scope = scope.parent
    return bool(values) and all((dotted(v) or "").rsplit(".", 1)[-1] in _CARRY for v in values)


_INERT = {"len", "print", "isinstance", "hasattr", "getattr", "range", "list", "sorted", "next", "str", "repr", "format",
          "info", "debug", "warning", "log", "type", "id", "set_description", "set_postfix", "update", "append", "cast"}


def _set_epoch_anywhere(t) -> bool:
    """A file of the run linked to this one by imports, or a project module the run imports, calls set_epoch. A
    file that neither imports this one nor is imported by it (another entry script of the project, ganzobtn's
    slurm/main.py next to resnet_ddp.py) cannot reach this script's sampler."""
    key = ("sampler.set_epoch_anywhere", id(t.index))
    got = t.facts.cache.get(key)
    if got is None:
        linked = _linked_indexes(t)
        got = any(_set_epochs(ix) for ix in t.facts.indexes.values() if id(ix) in linked) or any(
            isinstance(n, ast.Attribute) and n.attr == "set_epoch"
            for tree in t.facts.imported.values() for n in ast.walk(tree))
        t.facts.cache[key] = got
    return got


def _import_names(index) -> Set[str]:
    """Every dotted piece a module's imports name (`from slurm.resnet_ddp import x` -> slurm, resnet_ddp, x), read
    from the index's scopes (each records what its imports bind), not by walking the tree again."""
    out: Set[str] = set()
    for sc in index.scopes:
        for qual in sc.imports.values():
            out.update((qual or "").lstrip(".").split("."))
    out.discard("")
    return out


def _linked_indexes(t) -> Set[int]:
    """ids of the linted files this one is linked to: the files it imports (transitively), the files that import
    it (transitively) and what those import. Linked by module name (the file's stem)."""
    got = t.facts.cache.get(("sampler.linked", id(t.index)))
    if got is not None:
        return got
    files = list(t.facts.indexes.values())
    if len(files) <= 1:
        got = {id(ix) for ix in files} | {id(t.index)}
        t.facts.cache[("sampler.linked", id(t.index))] = got
        return got
    stem = {id(ix): os.path.splitext(os.path.basename(ix.path or ""))[0] for ix in files}
    names = t.facts.cache.setdefault("sampler.import_names", {})
    for ix in files:
        if id(ix) not in names:
            names[id(ix)] = _import_names(ix)

    def imports(a, b) -> bool:  # a imports b
        return bool(stem[id(b)]) and stem[id(b)] in names[id(a)]

    def closure(start, step):
        seen = {id(s) for s in start}
        todo = list(start)
        while todo:
            a = todo.pop()
            for b in files:
                if id(b) not in seen and step(a, b):
                    seen.add(id(b))
                    todo.append(b)
        return seen
    me = t.index if id(t.index) in stem else None
    if me is None:
        got = {id(ix) for ix in files}
    else:
        up = closure([me], lambda a, b: imports(b, a))
        got = closure([ix for ix in files if id(ix) in up], imports)
    t.facts.cache[("sampler.linked", id(t.index))] = got
    return got


def _restarts(cls: ast.ClassDef) -> bool:
    """The class walks what it wraps forever: a `while True:` loop that catches StopIteration and calls
    iter() again (ALPRO's InfiniteIterator and MetaLoader). Each restart is a new epoch of the sampler."""
    for w in stmt_nodes(cls):
        if not (isinstance(w, ast.While) and isinstance(w.test, ast.Constant) and w.test.value is True):
            continue
        for h in ast.walk(w):
            if isinstance(h, ast.ExceptHandler) and h.type is not None and dotted(h.type) == "StopIteration" and any(
                    isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id == "iter"
                    for c in ast.walk(h)):
                return True
    return False


def _project_classes(t) -> dict:
    """Classes defined in the files of the run and in the project modules they import: name -> whether it
    restarts what it wraps (`_restarts`). Such a wrapper cannot set the epoch when nothing in the project
    calls set_epoch, so a loader handed to it is followed through it."""
    got = t.facts.cache.get("sampler.project_classes")
    if got is None:
        got = {}
        trees = [ix.tree for ix in t.facts.indexes.values()] + list(t.facts.imported.values())
        for tree in trees:
            for n in stmt_nodes(tree):   # a class is a statement: the expressions need no walk
                if isinstance(n, ast.ClassDef):
                    got[n.name] = got.get(n.name, False) or _restarts(n)
        t.facts.cache["sampler.project_classes"] = got
    return got


def _holders(r, index, scope, node, depth):
    """(index, scope, names) that first hold the sampler built by `node`: the names it is assigned to, the
    loader it is handed to (`DataLoader(ds, sampler=DistributedSampler(ds))`), or, when a helper returns it
    (`return DistributedSampler(ds)`), what its callers bind."""
    if depth > 3:
        return []
    def arm(v):  # `DistributedSampler(ds) if ddp else None`
        return v is node or (isinstance(v, ast.IfExp) and (arm(v.body) or arm(v.orelse)))
    names = {n for a in scope.assigns if a.value is not None and arm(a.value) for n in a.targets if n}
    for a in scope.assigns:  # `train_sampler, shuffle = DistributedSampler(trainset), False` (radtts): element-wise
        tgt = a.node.targets[0] if isinstance(a.node, ast.Assign) and len(a.node.targets) == 1 else None
        if isinstance(a.value, ast.Tuple) and isinstance(tgt, (ast.Tuple, ast.List)) and \
                len(tgt.elts) == len(a.value.elts):
            names.update(dotted(t_) for t_, v in zip(tgt.elts, a.value.elts) if arm(v) and dotted(t_))
    if not names:
        names = {n for a in scope.assigns if a.call is not None and (a.call.name or "") in _CARRY and any(
            x is node for x in list(a.call.node.args) + [k.value for k in a.call.node.keywords]) for n in a.targets
            if n}
    if names:
        return [(index, scope, names)]
    returned = any(isinstance(n, ast.Return) and n.value is not None and any(x is node for x in ast.walk(n.value))
                   for n in ast.walk(scope.node)) if scope.kind == "function" else False
    out = []
    if returned:
        for cix, site in callers_of(r, scope):
            out += _holders(r, cix, site.scope, site.node, depth + 1)
    return out


def _iterates(scope, it, held) -> bool:
    """The loop's iterable holds the loader: named in it (`enumerate(loader)`), or a name the scope binds once to
    an expression that names it (`loop = tqdm(enumerate(train_loader), total=...)`, then `for i, b in loop:`;
    fr70 Einsturing/rightnn)."""
    def names(expr):
        return any(isinstance(n, (ast.Name, ast.Attribute)) and dotted(n) in held for n in ast.walk(expr))
    if names(it):
        return True
    if isinstance(it, ast.Name):
        values = [a.value for a in scope.assigns if it.id in a.targets and a.value is not None]
        return len(values) == 1 and names(values[0])
    return False


def proof(t, index, call):
    """(evidence text, "") when the sampler's loader is provably iterated epoch after epoch and nothing can set
    its epoch; else ("", why not). Positive evidence: no set_epoch anywhere in the project; the sampler and
    the loaders built on it stay in code the run defines (never handed to a library or a helper that is not
    linted, which may set the epoch: accelerate's prepared loaders and Lightning do); a loop over the loader
    sits inside a loop over a count (or in a function called from inside one); and that code is reached."""
    if _set_epoch_anywhere(t):
        return "", "set_epoch is called elsewhere in the project, perhaps on this sampler"
    r = reach(t)
    starts = _holders(r, index, call.scope, call.node, 0)
    if not starts:
        return "", "the sampler is not kept in a name ddpdoctor can follow"
    uses = []
    escaped = ""
    classes = _project_classes(t)
    for ix, sc, names in starts:
        got, escape = follow(r, ix, sc, names,
                             derive=lambda c: (c.name or "") in _CARRY or (c.qual or "").endswith("DataLoader")
                             or (c.name or "") in classes or c.qual in _REPEATERS or _carry_alias(c),
                             inert=lambda c: (c.name or "") in _INERT, key="sampler")
        escaped = escaped or escape
        uses += got
    # `InfiniteIterator(loader)`: a project class that restarts the loader forever (ALPRO), or DeepSpeed's
    # RepeatingLoader (transpeeder): evidence whoever consumes the endless iterator afterwards, since the sampler
    # inside it is out of reach there
    for ix, sc, held in uses:
        for c in sc.calls:
            library = c.qual in _REPEATERS
            if (classes.get(c.name or "") or library) and (r.reached(sc) or sc.kind == "module") and any(
                    dotted(x) in held for x in list(c.node.args) + [k.value for k in c.node.keywords]):
                what = "DeepSpeed's RepeatingLoader, which restarts" if library else "a class of the project that restarts"
                return (f"the loader is handed to {c.name}() at line {c.line}, {what} it with iter() on StopIteration, "
                        "forever, and nothing in the project calls set_epoch"), ""
    if escaped:
        return "", f"the sampler or its loader is {escaped}, which may set its epoch"
    for ix, sc, held in uses:
        # `except StopIteration: it = iter(loader)` inside the step loop (VGen): each pass restarts the loader
        for c in sc.calls:
            if c.name == "iter" and c.node.args and dotted(c.node.args[0]) in held:
                outer = next((o for o in sc.loops if _counts(o) and _inside(o, c.line)), None)
                if outer is None or (outer.scope is call.scope and _inside(outer, call.line)):
                    continue
                if r.reached(outer.scope) or outer.scope.kind == "module":
                    return (f"the loader is restarted with iter() at line {c.line} inside the loop at line "
                            f"{outer.node.lineno}, and nothing in the project calls set_epoch"), ""
        for loop in sc.loops:
            node = loop.node
            if not isinstance(node, (ast.For, ast.AsyncFor)) or not _iterates(sc, node.iter, held):
                continue
            outer = next((o for o in sc.loops if o is not loop and _counts(o) and _inside(o, node.lineno)), None)
            site = None
            if outer is None:
                for cix, c in callers_of(r, sc):
                    o = next((o for o in c.scope.loops if _counts(o) and _inside(o, c.line)), None)
                    if o is not None:
                        outer, site = o, c
                        break
            if outer is None:
                continue
            if outer.scope is call.scope and _inside(outer, call.line):
                continue  # a sampler built anew every epoch, perhaps over data made anew: not shown to repeat
            if not (r.reached(outer.scope) or outer.scope.kind == "module"):
                continue
            where = f"line {node.lineno}" + (f", in {sc.qualname}() called at line {site.line}" if site else "")
            return (f"the loader is iterated at {where} inside the loop at line {outer.node.lineno}, and nothing in "
                    "the project calls set_epoch"), ""
    return "", "no loop over epochs is seen to iterate its loader"


@rule("LINT009", "sampler-without-set-epoch", catalogue=("F10",))
def sampler_without_set_epoch(t):
    """A DistributedSampler in a manual epoch loop, and no `set_epoch()` anywhere.

    What it checks
        `DistributedSampler(...)` (shuffling, the default) over training data in a script that
        loops over epochs with an inner loop over batches and never calls `.set_epoch(...)`.
        Samplers of evaluation data (named eval/valid/test/dev, or built in an evaluation
        function) are left alone: their order does not change what is learned. So is a sampler
        whose loader is handed to a wrapper of the user's own code (`IterLoader(loader)`), which
        may call set_epoch where this file cannot see it, unless that wrapper is a class of the project
        (found in the files linted or the modules they import) and nothing in the project calls
        set_epoch: a project class that restarts the loader with iter() on StopIteration, forever
        (`InfiniteIterator(loader)`, also given a dict the loader was stored in,
        `loaders[name] = loader`), is an epoch loop, and so is DeepSpeed's
        `deepspeed.utils.RepeatingLoader(loader)`, which does the same and never sets the epoch. A
        loop over a name bound once to a count (`train_iterator = trange(...)`; `for _ in
        train_iterator:`) is a count loop; `for epoch in range(1)` runs once and is not an epoch loop. Every epoch loop (a loop over a count that
        runs a batch loop, directly or in a called function) must call set_epoch itself or through
        what it calls: a set_epoch in another branch does not cover it. A sampler built in one module
        and iterated by epochs in another is judged across the files linted together (and a sampler
        that a function of a project module not linted builds and returns, `train_loader =
        build_loader(cfg)`, is followed from the call in the file linted); one whose
        loaders are read only under no_grad or in evaluation functions is left alone. Since round 16 also a
        `set_epoch(n)` handed the bound of its epoch loop's `range(n)` instead of the loop variable
        (`for epoch_id in range(epoch): sampler.set_epoch(epoch)`): the same value every epoch.

    Why it matters
        The sampler seeds its shuffle with `seed + epoch`. Without `set_epoch(epoch)` the epoch
        stays 0, so every epoch sees the same order on every rank: the "shuffle" is a fixed
        permutation and training quality suffers silently (pytorch/pytorch#31771, #11324). The
        Trainer calls it for you; a hand-written loop must.

    Example
        sampler = DistributedSampler(ds)
        loader = DataLoader(ds, sampler=sampler, batch_size=32)
        for epoch in range(epochs):
            for batch in loader:
                ...

    Fix
        Call it at the start of each epoch, with the same value on every rank:
        `for epoch in range(epochs): sampler.set_epoch(epoch)`.
    """
    index = t.index
    yield from _factory_samplers(t, index)
    yield from _set_epoch_given_the_count(t, index)
    samplers = index.calls_named(*SAMPLERS)
    if not samplers:
        return
    samplers = [c for c in samplers if not _for_evaluation(index, c)]
    if not samplers:
        return
    missing = None
    if _set_epoch_anywhere(t):  # no warning can be shown then (see proof): only the notes, which need a missing one
        missing = _missing_set_epoch(t, index)
        if not missing:
            return
    for call in samplers:
        shuffle = call.kw("shuffle")
        if isinstance(shuffle, ast.Constant) and shuffle.value is False:
            continue
        if _for_evaluation(index, call) or _handed_to_a_wrapper(index, call, t) or _evaluation_only(index, call) or \
                _sampler_handed_to_set_epoch(t, index, call) or _returned_and_set_epoch(t, index, call) or \
                _rebuilt_each_epoch(index, call) or \
                _lightning_dataloader(index, call) or reach(t).branch_never_taken(index, call):
            continue
        # The evidence (the loader followed to a loop that restarts it) reports on its own; without it, the
        # broader signs (an epoch loop without set_epoch in this file or the run) give a note.
        shown, why = proof(t, index, call)
        if not shown:
            if missing is None:
                missing = _missing_set_epoch(t, index)
            if not missing:
                continue
        yield t.finding(
            "warning" if shown else "info", call.node,
            "DistributedSampler is never given set_epoch(), so every epoch repeats the same order"
            + ("" if shown else f" (unless {why.split(',')[0]})" if why.startswith("set_epoch") else
               f" (if its loader is iterated by epochs: {why})"),
            detail=("The sampler shuffles with seed + epoch, and nothing in this script calls set_epoch(), so the "
                    "epoch stays 0: each epoch visits the data in the same order on every rank."),
            fix="for epoch in range(num_epochs):\n    sampler.set_epoch(epoch)   # first line of the epoch loop",
            # the lines the proof names (the epoch loop, where its loader is iterated): where a reader points too
            evidence={"sampler_line": call.line, "why": shown or why,
                      "lines": sorted({call.line} | {int(n) for n in re.findall(r"\bline (\d+)", shown)})},
        )


def _set_epoch_given_the_count(t, index):
    """`for epoch_id in range(epoch): ...; loader.sampler.set_epoch(epoch)` (fr100 SxJyJay/MORE, both readers): the
    value handed to set_epoch is the bound of the loop's range(), the same every iteration, so the sampler reshuffles
    with the same seed each epoch, as if set_epoch were never called (torch/utils/data/distributed.py seeds with
    seed + epoch)."""
    scopes = {id(c.scope): c.scope for c in index.by_name.get("set_epoch", ()) if len(c.node.args) == 1}
    for scope in scopes.values():  # only the functions that call set_epoch(x) (bench_lint: a walk per loop before)
        for loop in scope.loops:
            node = loop.node
            if not isinstance(node, ast.For) or not isinstance(node.iter, ast.Call) or \
                    dotted(node.iter.func) != "range" or not node.iter.args:
                continue
            bound = dotted(node.iter.args[-1] if len(node.iter.args) >= 2 else node.iter.args[0])
            targets = {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
            if not bound or bound in targets:
                continue
            first, last = node.lineno, getattr(node, "end_lineno", node.lineno)
            for call in scope.calls:
                if call.name != "set_epoch" or not first <= call.line <= last or len(call.node.args) != 1:
                    continue
                if dotted(call.node.args[0]) != bound:
                    continue
                if any(bound in (a.targets or ()) and first <= a.node.lineno <= last for a in scope.assigns
                       if getattr(a, "node", None) is not None):
                    continue  # the name is rebound inside the loop
                yield t.finding(
                    "warning", call.node,
                    f"set_epoch({bound}) is given the loop's epoch count, the same value every epoch: the order repeats",
                    detail=(f"The loop at line {node.lineno} counts epochs in `{', '.join(sorted(targets)) or '_'}` up to "
                            f"`{bound}`, but set_epoch receives `{bound}` itself: the sampler seeds its shuffle with "
                            "seed + that constant, so every epoch sees the same order on every rank."),
                    fix=f"sampler.set_epoch({sorted(targets)[0] if targets else 'epoch'})   # the loop variable",
                    evidence={"loop_line": node.lineno, "bound": bound},
                )


def _factory_samplers(t, index):
    """`train_loader = build_loader(cfg)` where build_loader, a function of a project module that is not linted
    with this file (`datasets/builder.py`), builds a shuffling DistributedSampler and returns its loader, and this
    file iterates the loader epoch after epoch: the same proof as for a sampler built here, reported at the call."""
    linted = {os.path.normpath(os.path.abspath(p)) for p in t.facts.indexes}
    seen = set()
    for call in index.calls:
        qual = call.qual or ""
        if "." not in qual.lstrip(".") or qual.split(".")[0] in _LIBRARY_ROOTS or qual in seen:
            continue
        found = t.project_function(qual)
        if found is None:
            continue
        fix, fn = found
        if os.path.normpath(os.path.abspath(fix.path)) in linted or _set_epochs(fix) or \
                _set_epoch_anywhere(t):
            continue
        if not any(isinstance(n, ast.Return) and n.value is not None for n in ast.walk(fn.node)):
            continue
        reached = {id(s) for s in fix.reachable(fn)}
        built = [s for s in fix.calls_named(*SAMPLERS) if id(s.scope) in reached and not _for_evaluation(fix, s)
                 and not (isinstance(s.kw("shuffle"), ast.Constant) and s.kw("shuffle").value is False)]
        if not built:
            continue
        bound = [n for a in call.scope.assigns if a.value is call.node for n in a.targets if n]
        if any(_EVAL.search(n.rsplit(".", 1)[-1]) for n in bound + [fn.name]):
            continue
        seen.add(qual)
        shown, _why = proof(t, index, call)
        if not shown:
            continue
        where = f"{os.path.basename(fix.path)} line {built[0].line}"
        yield t.finding(
            "warning", call.node,
            f"The DistributedSampler that {call.text}() builds ({where}) is never given set_epoch(), so every "
            "epoch repeats the same order",
            detail=(f"{call.text}() builds a shuffling DistributedSampler ({where}) and returns its loader; this "
                    "file iterates it epoch after epoch and nothing in the project calls set_epoch(), so the epoch "
                    "stays 0: each epoch visits the data in the same order on every rank."),
            fix="for epoch in range(num_epochs):\n    loader.sampler.set_epoch(epoch)   # first line of the epoch loop",
            evidence={"sampler_line": built[0].line, "factory": qual, "why": shown},
        )


_LIBRARY_ROOTS = {"torch", "transformers", "accelerate", "deepspeed", "datasets", "numpy", "os", "sys", "timm",
                  "torchvision", "lightning", "pytorch_lightning", "webdataset"}
