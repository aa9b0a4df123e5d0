"""D1: a fast tokenizer's thread pool started in the parent, then the process forks workers."""
from __future__ import annotations

import ast
from typing import List, Optional, Set

from ..analysis import Call, ModuleIndex, Scope, exclusive
from ..names import const_str
from . import rule
from ._common import DATALOADER, PROCESS, is_training_args_qual, spawned_scopes, workers

BATCH_METHODS = {"batch_encode_plus", "encode_batch", "decode_batch", "batch_decode", "pad", "train_from_iterator",
                 "__call__", "encode_batch_fast"}
_FALSE = {"", "off", "false", "f", "no", "n", "0"}


def _is_fast_tokenizer(call: Call) -> bool:
    q = call.qual or ""
    if q in ("tokenizers.Tokenizer", "tokenizers.Tokenizer.from_file", "tokenizers.Tokenizer.from_pretrained",
             "tokenizers.Tokenizer.from_str", "tokenizers.Tokenizer.from_buffer"):
        return True
    if not q.startswith("transformers."):
        return False
    parts = q.split(".")
    cls = parts[-2] if parts[-1] == "from_pretrained" and len(parts) > 2 else parts[-1]
    if cls == "AutoTokenizer":
        use_fast = call.kw("use_fast")
        return not (isinstance(use_fast, ast.Constant) and use_fast.value is False)
    return cls.endswith("TokenizerFast")


def tokenizer_names(index: ModuleIndex) -> Set[str]:
    out: Set[str] = set()
    for a in index.assigns:
        if a.call is not None and _is_fast_tokenizer(a.call):
            out.update(n for n in a.targets if n)
    return out


def _is_batch_use(call: Call, names: Set[str]) -> bool:
    if call.text in names:
        return True
    return call.recv in names and call.name in BATCH_METHODS


def parent_flow(index: ModuleIndex, exclude: Set[int], entries: Optional[dict] = None) -> List[Scope]:
    """Functions the main process itself runs: module code, what it calls, and `.map(fn)` callbacks.

    DataLoader callbacks (collate_fn, worker_init_fn) and Dataset methods run in the workers, so they
    are not followed."""
    seen = {id(index.module): index.module}
    frontier = [index.module]
    for _ in range(8):
        nxt = []
        for scope in frontier:
            for call in scope.calls:
                if scope is index.module and not call.ctx.module_level:
                    continue
                targets = [index.function_of(call.node.func, scope)]
                if call.name in ("map", "filter", "apply", "with_transform") and call.qual != DATALOADER \
                        and not _forks(index, call):  # map(num_proc=4) runs its callback in the children
                    targets.append(index.function_of(call.arg(0, "function"), scope))
                for fn in targets:
                    if fn is not None and id(fn) not in seen and id(fn) not in exclude:
                        seen[id(fn)] = fn
                        nxt.append(fn)
                        if entries is not None:
                            entries[id(fn)] = call  # the call through which the main process runs fn
        if not nxt:
            break
        frontier = nxt
    return list(seen.values())


def _forks(index: ModuleIndex, call: Call) -> Optional[str]:
    """What child processes this call forks, if any."""
    spawny = bool(index.start_methods & {"spawn", "forkserver"})
    if call.qual == DATALOADER and workers(call, index=index):
        ctx = const_str(call.kw("multiprocessing_context")) if call.kw("multiprocessing_context") is not None else None
        if ctx in ("spawn", "forkserver") or spawny:
            return None
        return "DataLoader workers"
    if call.name == "map" and workers(call, "num_proc"):
        value = call.kw("num_proc")
        if isinstance(value, ast.Constant) and value.value == 1:
            return None
        return "datasets .map(num_proc=...) workers"
    if is_training_args_qual(call.qual) and workers(call, "dataloader_num_workers") and not spawny:
        return "Trainer DataLoader workers"
    if call.qual == "os.fork":
        return "os.fork()"
    if call.qual in PROCESS and not spawny:
        return "multiprocessing.Process"
    return None


@rule("LINT006", "tokenizer-used-before-fork", catalogue=("D1", "D2"))
def tokenizer_used_before_fork(t):
    """A fast tokenizer used on text in the main process before it forks DataLoader or datasets workers.

    What it checks
        A fast tokenizer (`AutoTokenizer.from_pretrained`, `*TokenizerFast`, `tokenizers.Tokenizer`)
        called on text (`tok(...)`, `batch_encode_plus`, `encode_batch`, `pad`, ...) by code the
        main process runs (module level, functions it calls, `dataset.map(fn)` callbacks), in a
        script that later forks: `DataLoader(num_workers>0)`, `dataset.map(num_proc>1)`,
        `TrainingArguments(dataloader_num_workers>0)`, `os.fork`, `multiprocessing.Process`.
        Quiet when the script sets TOKENIZERS_PARALLELISM to a false value or uses the spawn or
        forkserver start method.

    Why it matters
        The Rust tokenizer starts a thread pool on its first batch call (and on a call with a str).
        A forked child cannot safely use it, so tokenizers disables parallelism in the child and,
        before 0.22.2, printed "The current process just got forked, after parallelism has already
        been used. Disabling parallelism to avoid deadlocks..." (the warning in ddpdoctor's
        original question; huggingface/transformers#5486, huggingface/tokenizers#187). Since
        0.22.2 it does so silently. With TOKENIZERS_PARALLELISM=true set explicitly, a child that
        tokenizes deadlocks: we measured it, so that case is an error.

    Example
        tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased")
        ds = ds.map(lambda b: tokenizer(b["text"]), batched=True)
        loader = DataLoader(ds, num_workers=4)

    Fix
        Decide before the tokenizer is imported:
        `os.environ["TOKENIZERS_PARALLELISM"] = "false"` at the top of the script (or export it),
        or pre-tokenize offline, or use `multiprocessing_context="spawn"` for the DataLoader.
    """
    index = t.index
    value = index.env_value("TOKENIZERS_PARALLELISM")
    setting = const_str(value) if value is not None else None
    if setting is not None and setting.strip().lower() in _FALSE:
        return
    forced = setting is not None
    names = tokenizer_names(index)
    if not names:
        return
    exclude = {id(s) for s in spawned_scopes(index)}
    entries: dict = {}
    flow = parent_flow(index, exclude, entries)
    uses, forks = [], []
    for scope in flow:
        for call in scope.calls:
            if scope is index.module and not call.ctx.module_level:
                continue
            if _is_batch_use(call, names):
                uses.append(call)
            what = _forks(index, call)
            if what:
                forks.append((call, what))
    if not uses or not forks:
        return
    def can_precede(use: Call, fork: Call) -> bool:
        """The use can run before the fork in one execution: follow the use up to the call in the fork's
        function that leads to it; it must come first and not sit in the other branch of an `if`
        (`if streaming: ds.map(tok_fn) else: ds.map(tok_fn, num_proc=8)` runs one of them)."""
        anchor, seen = use, set()
        while anchor is not None and anchor.scope is not fork.scope and id(anchor.scope) not in seen:
            seen.add(id(anchor.scope))
            anchor = entries.get(id(anchor.scope))
        if anchor is None or anchor.scope is not fork.scope:
            return True  # in different functions: no order to compare
        if exclusive(anchor.ctx, fork.ctx):
            return False
        return fork.line > anchor.line or (anchor is not use and fork.line >= anchor.line and fork is not anchor)

    for use in sorted(uses, key=lambda c: c.line):
        later = [(f, w) for f, w in forks if can_precede(use, f)]
        if not later:
            continue
        fork, what = min(later, key=lambda fw: fw[0].line)
        if forced:
            sev = "error"
            title = (f"tokenizer used before {what} fork (line {fork.line}) with TOKENIZERS_PARALLELISM set to "
                     f"{setting!r}: a child that tokenizes can deadlock")
        else:
            sev = "info"
            title = (f"fast tokenizer used in the main process before {what} fork (line {fork.line}); "
                     "parallelism is silently disabled in the children")
        yield t.finding(
            sev, use.node, title,
            detail=(f"`{use.text or use.name}` at line {use.line} starts the tokenizers thread pool in the main "
                    f"process; {what} (line {fork.line}) then fork it. tokenizers disables parallelism in each child "
                    "(printing \"The current process just got forked...\" before 0.22.2)"
                    + ("; with TOKENIZERS_PARALLELISM forced on, a child that tokenizes deadlocks." if forced
                       else ".")),
            fix=("import os\nos.environ[\"TOKENIZERS_PARALLELISM\"] = \"false\"  # first lines of the script, "
                 "before transformers is imported"),
            evidence={"tokenizer_call_line": use.line, "fork_line": fork.line, "fork": what,
                      "TOKENIZERS_PARALLELISM": setting, "uses": len(uses)},
        )
        return
