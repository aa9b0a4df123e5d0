"""A `datasets` map with cache writes run by every rank (round 20, a preview rule)."""
from __future__ import annotations

import ast
import functools
import json
import os
from typing import Optional, Tuple

from . import rule
from ._reach import reach
from ..names import dotted
from ._common import is_distributed, nodes_through_assigns

_DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "data",
                     "lint_datasets.json")
_MULTI = ("torchrun", "torch.distributed.launch", "deepspeed", "accelerate", "srun", "mpirun")


@functools.lru_cache(maxsize=1)
def _catalogue() -> Tuple[frozenset, frozenset, str]:
    """(loaders whose datasets have cache files, context managers that let the main process go first, source)."""
    with open(_DATA, encoding="utf-8") as fh:
        doc = json.load(fh)
    return frozenset(doc["loaders"]), frozenset(f["name"] for f in doc["first"]), doc["fact"]["source"]


def _cached_methods() -> Tuple[str, ...]:
    """Dataset methods that write a cache file: map, and filter (which runs map) (lint_datasets.json cached_methods)."""
    with open(_DATA, encoding="utf-8") as fh:
        return tuple(k for k in json.load(fh)["cached_methods"] if k != "source")


_LAZY = ("to_iterable_dataset",)   # datasets arrow_dataset.py Dataset.to_iterable_dataset (lint_datasets.json "cache")


def _true(node) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _loaded(expr: ast.AST, scope, index, loaders) -> Optional[ast.Call]:
    """The load_dataset/load_from_disk call the receiver of `.map` comes from (through subscripts, method chains and
    names assigned in the same function); None when it is not seen or is streamed."""
    found = None
    for n in nodes_through_assigns(expr, scope, 30):
        if isinstance(n, ast.Call) and getattr(n.func, "attr", None) in _LAZY:
            return None   # `ds.to_iterable_dataset()`: an IterableDataset maps lazily, no cache file
        if isinstance(n, ast.Call) and index.qual(n.func, scope) in loaders:
            if any(k.arg == "streaming" and not (isinstance(k.value, ast.Constant) and not k.value.value)
                   for k in n.keywords):
                return None   # streaming=True (or a value the file does not show): lazy, no cache file
            found = found or n
    return found


@rule("LINT041", "datasets-map-every-rank")
def datasets_map_every_rank(t):
    """A `datasets` `.map(...)` that writes a cache file, run by every rank of a multi-process launch.

    What it checks
        In a script that joins a process group (or that its README/shell scripts launch with torchrun, deepspeed,
        accelerate, srun or mpirun): `ds.map(...)` on a dataset `load_dataset`/`load_from_disk` returned (followed
        through subscripts, method chains and names of the same function), not `streaming=True`, without
        `keep_in_memory=True`, not under a rank-0 test, not inside a main-process-first context
        (`training_args.main_process_first()`, `accelerator.main_process_first()`, `torch_distributed_zero_first`;
        ddpdoctor/data/lint_datasets.json) and in a function with no barrier. One finding per file, at the first
        such map. Since round 25 also `ds.filter(...)`, which runs `map` and writes its kept indices to a cache file
        the same way (lint_datasets.json cached_methods). A preview rule (round 20): a note by default, a warning
        with `--preview`.

    Why it matters
        Every rank runs the same transform (N times the CPU, each with its own `num_proc` workers) and writes the
        same cache file at the same time. transformers' `main_process_first` exists for this: the main process
        maps and saves the cache, then the replicas load it (training_args.py).

    Example
        raw = load_dataset("wikitext", "wikitext-2-raw-v1")
        tokenized = raw.map(tokenize, batched=True, num_proc=8)   # on every rank

    Fix
        `with training_args.main_process_first(desc="tokenize"):` (or `accelerator.main_process_first()`) around
        the map: rank 0 computes it, the others load the cache.
    """
    index = t.index
    # `.map` and the methods that write their result through it (`.filter`: round 25, fr167 RohitPawar2406/SSMT-Project,
    # a miss; data/lint_datasets.json cached_methods)
    maps = [c for m in _cached_methods() for c in index.by_name.get(m, ())]
    if not maps:
        return
    maps.sort(key=lambda c: (c.line, c.node.col_offset))
    loaders, firsts, source = _catalogue()
    if not any(q in index.by_qual for q in loaders):
        return
    launched = is_distributed(index) or (t.context is not None and any(
        launch.launcher in _MULTI for launch in t.context.launches_of(t.real_path)))
    if not launched:
        return
    guarded = []
    for w in index.withs:
        for item in w.node.items:
            call = item.context_expr
            name = (dotted(call.func) if isinstance(call, ast.Call) else dotted(call)) or ""
            if name.rsplit(".", 1)[-1] in firsts:
                guarded.append((w.node.lineno, getattr(w.node, "end_lineno", w.node.lineno)))
    for call in maps:
        if call.ctx.gated or call.ctx.rank0 or not isinstance(call.node.func, ast.Attribute):
            continue
        if any(a <= call.line <= b for a, b in guarded):
            continue
        if any(k.arg == "keep_in_memory" and _true(k.value) for k in call.node.keywords):
            continue
        if any(c.name in ("barrier", "wait_for_everyone") for c in call.scope.calls):
            continue   # the barrier-around pattern (`if rank != 0: barrier()` ... map ... `if rank == 0: barrier()`)
        origin = _loaded(call.node.func.value, call.scope, index, loaders)
        if origin is None:
            continue
        if reach(t).in_launcher(index, call):
            continue   # the parent of a spawn-launched run maps once, before mp.spawn hands the result to the ranks
        yield t.finding(
            "warning", call.node,
            f"`{call.text or call.name}()` of a dataset loaded at line {origin.lineno} runs on every rank and writes the "
            "same cache file on each: run it on the main process first",
            detail=("Each rank computes the same transform and writes the same Arrow cache file at once (N times "
                    "the work, racing writers). transformers' TrainingArguments.main_process_first (and accelerate's "
                    "Accelerator.main_process_first) let the main process map and save the cache, then the other "
                    "ranks load it."),
            fix=("with training_args.main_process_first(desc=\"dataset map\"):   # or accelerator.main_process_first()\n"
                 "    tokenized = raw.map(tokenize, batched=True)"),
            evidence={"load_line": origin.lineno, "source": source})
        return
