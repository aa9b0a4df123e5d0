"""A file rank 0 writes that the other ranks then read, with nothing making them wait for the write (round 19, a
preview rule; issue 25's no-rule class "rank-0 write then read by all without barrier")."""
from __future__ import annotations

import ast
import builtins
from typing import Iterator, List, Optional, Tuple

from . import rule
from ..analysis import Call
from ..names import dotted
from ._common import C10D_COLLECTIVES, is_distributed

# pytorch/tutorials intermediate_source/ddp_tutorial.rst (commit 1a68b577065d93d673208e061db221c62885e75d), demo_checkpoint:
# `if rank == 0: torch.save(ddp_model.state_dict(), CHECKPOINT_PATH)` then `dist.barrier()  # Use a barrier() to make
# sure that process 1 loads the model after process 0 saves it.` and only then `torch.load(CHECKPOINT_PATH, ...)`.
_SOURCE = ("pytorch/tutorials intermediate_source/ddp_tutorial.rst 1a68b577065d93d673208e061db221c62885e75d "
           "(demo_checkpoint: 'Use a barrier() to make sure that process 1 loads the model after process 0 saves it')")

# what a call writes: the argument that names the file or folder (position, keyword)
_WRITERS = {"torch.save": (1, "f"), "numpy.save": (0, "file"), "numpy.savez": (0, "file"), "os.makedirs": (0, "name"),
            "os.mkdir": (0, "path"), "shutil.copy": (1, "dst"), "shutil.copyfile": (1, "dst")}
_WRITER_METHODS = {"save_pretrained": (0, "save_directory")}
# what a call reads
_READERS = {"torch.load": (0, "f"), "numpy.load": (0, "file"), "pandas.read_csv": (0, "filepath_or_buffer"),
            "json.load": None}
_READER_METHODS = {"from_pretrained": (0, "pretrained_model_name_or_path"), "load_state_dict": None}
# calls that make the ranks wait for each other (c10d collectives, accelerate's and Lightning's barriers), and calls
# that may hide one (a training or evaluation step: DDP's backward all-reduces)
_SYNC = set(C10D_COLLECTIVES) | {"wait_for_everyone", "synchronize_processes", "backward", "init_process_group"}
_STEP_WORDS = ("train", "eval", "valid", "test", "fit", "epoch", "step", "barrier", "sync", "wait", "run")


def _arg(call: Call, where) -> Optional[ast.AST]:
    if where is None:
        return None
    pos, kw = where
    if len(call.node.args) > pos:
        return call.node.args[pos]
    return call.kw(kw)


def _open_mode(call: Call) -> Optional[str]:
    mode = call.node.args[1] if len(call.node.args) > 1 else call.kw("mode")
    if mode is None:
        return "r"
    return mode.value if isinstance(mode, ast.Constant) and isinstance(mode.value, str) else None


def _rank0_saver(call: Call) -> bool:
    """`utils.save_on_master(state, path)`: DETR's helper (util/misc.py: `if is_main_process(): torch.save(*args,
    **kwargs)`, copied into DeiT, Deformable-DETR, TransTrack...) writes on rank 0 alone, as a call under a rank-0
    test would (data/lint_writers.json unread_save_helpers gated_name_words; round 23, lint30: fr160
    weijianan1/EconClimNet, every rank torch.loads the best checkpoint save_on_master just wrote)."""
    name = (call.name or "").lower()
    return "save" in name and any(w in name for w in _rank0_words())


def _rank0_words() -> tuple:
    from .rank_writes import _unread_facts  # noqa: PLC0415 (the facts live with LINT013's)
    return tuple(w for w in _unread_facts()["gated_name_words"] if w != "accelerat")


def _written(call: Call) -> Optional[Tuple[ast.AST, bool]]:
    """(the path a call writes, whether it creates a folder) or None."""
    q = call.qual or ""
    if _rank0_saver(call):
        p = call.node.args[1] if len(call.node.args) > 1 else call.kw("f")
        return (p, False) if p is not None else None
    if q in _WRITERS:
        p = _arg(call, _WRITERS[q])
        return (p, q in ("os.makedirs", "os.mkdir")) if p is not None else None
    if call.name in _WRITER_METHODS and isinstance(call.node.func, ast.Attribute):
        p = _arg(call, _WRITER_METHODS[call.name])
        return (p, False) if p is not None else None
    if call.name == "open" and call.recv is None and call.node.args:
        mode = _open_mode(call)
        if mode is not None and any(ch in mode for ch in "wax"):
            return call.node.args[0], False
    return None


def _read(call: Call) -> Optional[ast.AST]:
    """The path a call reads, or None."""
    q = call.qual or ""
    if q in _READERS and _READERS[q] is not None:
        return _arg(call, _READERS[q])
    if call.name in _READER_METHODS and _READER_METHODS[call.name] is not None and \
            isinstance(call.node.func, ast.Attribute):
        p = _arg(call, _READER_METHODS[call.name])
        return p if isinstance(p, (ast.Name, ast.Attribute, ast.JoinedStr, ast.Call, ast.BinOp)) else None
    if call.name == "open" and call.recv is None and call.node.args:
        mode = _open_mode(call)
        if mode is not None and "r" in mode and "+" not in mode:
            return call.node.args[0]
    return None


def _touches(call: Call) -> Optional[ast.AST]:
    """The path of a file a call writes (the folder case: a file put in the folder rank 0 creates). A read in that
    folder is left alone: a file that must already exist says the folder did too (nanoGPT's resume load)."""
    w = _written(call)
    if w is not None and not w[1]:
        return w[0]
    if call.name == "SummaryWriter" and (call.node.args or call.kw("log_dir") is not None):
        return call.node.args[0] if call.node.args else call.kw("log_dir")
    return None


def _key(node: ast.AST) -> str:
    return ast.dump(node, annotate_fields=False)


def _plain_path(node: ast.AST) -> bool:
    """A name, attribute, literal, join or f-string: a path two calls can be seen to share."""
    return isinstance(node, (ast.Name, ast.Attribute, ast.Call, ast.JoinedStr, ast.BinOp, ast.Constant))


def _contains(outer: ast.AST, inner_key: str) -> bool:
    return any(_key(n) == inner_key for n in ast.walk(outer) if n is not outer)


def _waits_between(scope_calls: List[Call], a: Call, b: Call, own: set) -> bool:
    """A call between the two lines that makes the ranks wait for each other, or may (a training or evaluation
    step, a helper of the project whose body is not looked into)."""
    for c in scope_calls:
        if not a.line < c.line < b.line or id(c.node) in own:
            continue
        name = (c.name or "").lower()
        if name in _SYNC or any(w in name for w in _STEP_WORDS):
            return True
        if c.recv is None and c.name and not hasattr(builtins, c.name) and "." not in (c.qual or ""):
            return True  # a function of the file or project: it may synchronise
    return False


def _pairs(t, index) -> Iterator[Tuple[Call, Call, bool]]:
    for scope_calls in _by_scope(index.calls):
        writes = [(c, w) for c in scope_calls if c.ctx.rank0 or (_rank0_saver(c) and not c.ctx.gated)
                  for w in [_written(c)] if w is not None]
        if not writes:
            continue
        for c, (path, folder) in writes:
            if not _plain_path(path):
                continue
            key = _key(path)
            for r in scope_calls:
                if r.line <= c.line or r.ctx.rank0 or r is c:
                    continue
                if folder:
                    p = _touches(r)
                    if p is None or r.qual in ("os.makedirs", "os.mkdir"):
                        continue
                    if isinstance(p, ast.Name) and p.id in r.scope.values and p.id != getattr(path, "id", None):
                        p = r.scope.values[p.id]  # `csv_path = workpath + "/metrics.csv"` then open(csv_path, "w")
                    if not _contains(p, key):
                        continue
                else:
                    p = _read(r)
                    if p is None or (_key(p) != key and _key(_bound(p, r)) != _key(_bound(path, c))):
                        continue
                own = {id(n) for n in ast.walk(r.node)}  # only for the pairs that share a path (it was made for every call)
                if _waits_between(scope_calls, c, r, own) or _polled(r, c):
                    break
                yield c, r, folder
                break


_EXISTS = ("exists", "isfile", "isdir", "listdir", "glob", "scandir")


def _polled(read: Call, write: Call) -> bool:
    """A read the other ranks repeat until it works: a hand-written wait for rank 0's file (round 24, lint32; fr163
    DonWick32/image-segmentation, `while True: try: run_id = pickle.load(open(path, "rb")); break / except: sleep(2)`).
    Two shapes: the read inside a `try` whose handler does not re-raise, the `try` inside a loop (retry until the file
    loads); or, between the write and the read in the same function, a `while` loop whose test asks whether a file
    exists (`while not os.path.exists(path): time.sleep(1)`). Either one makes a reading rank wait for the write, as a
    barrier would; a late or partial write is then a retry, not a wrong read."""
    root = read.scope.node
    if root is None:
        return False
    chain: List[ast.AST] = []

    def find(node: ast.AST, path: List[ast.AST]) -> bool:
        if node is read.node:
            chain.extend(path)
            return True
        return any(find(ch, path + [node]) for ch in ast.iter_child_nodes(node))

    find(root, [])
    for i, node in enumerate(chain):
        if isinstance(node, ast.Try) and any(node.body and _inside(b, read.node) for b in node.body) and \
                any(not any(isinstance(n, ast.Raise) for n in ast.walk(h)) and _retries(h, node) for h in node.handlers) \
                and any(isinstance(a, (ast.While, ast.For)) for a in chain[:i]):
            return True
    for node in ast.walk(root):
        if isinstance(node, ast.While) and write.line < node.lineno < read.line and any(
                isinstance(n, ast.Call) and (dotted(n.func) or "").rsplit(".", 1)[-1] in _EXISTS
                for n in ast.walk(node.test)):
            return True
    return False


def _retries(handler: ast.ExceptHandler, try_node: ast.Try) -> bool:
    """The handler waits (a `sleep`) or goes round again (`continue`), or the `try` leaves the loop once the read
    worked (`break`): a retry, not a failure swallowed once per epoch."""
    return any(isinstance(n, ast.Continue) or (isinstance(n, ast.Call) and (dotted(n.func) or "").endswith("sleep"))
               for n in ast.walk(handler)) or any(isinstance(n, ast.Break) for b in try_node.body for n in ast.walk(b))


def _inside(outer: ast.AST, inner: ast.AST) -> bool:
    return any(n is inner for n in ast.walk(outer))


def _bound(node: ast.AST, call: Call) -> ast.AST:
    """A path held in a name (`checkpoint_path = os.path.join(output_dir, 'best.pth')` then `save_on_master(state,
    checkpoint_path)`): the expression of the assignment that precedes the call in the same block (a sibling statement
    before the one holding the call, the name stored nowhere between), so that `torch.load(os.path.join(output_dir,
    'best.pth'))` is seen to read the same file. Anything else stays the name."""
    if not isinstance(node, ast.Name) or call.scope.node is None:
        return node
    best = None  # the innermost statement list that holds the call: (span, statements, index of the holder)
    for block in ast.walk(call.scope.node):
        for field in ("body", "orelse", "finalbody"):
            stmts = getattr(block, field, None)
            if not isinstance(stmts, list):
                continue
            for i, st in enumerate(stmts):
                if isinstance(st, ast.stmt) and st.lineno <= call.line <= (st.end_lineno or st.lineno):
                    span = (st.end_lineno or st.lineno) - st.lineno
                    if best is None or span < best[0]:
                        best = (span, stmts, i)
    if best is None:
        return node
    _span, stmts, holder = best
    for st in reversed(stmts[:holder]):
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name) and \
                st.targets[0].id == node.id:
            return st.value
        if any(isinstance(n, ast.Name) and n.id == node.id and isinstance(n.ctx, ast.Store) for n in ast.walk(st)):
            return node  # stored some other way (a loop target, a tuple, a nested block): not followed
    return node


def _by_scope(calls: List[Call]) -> List[List[Call]]:
    out: dict = {}
    for c in calls:
        out.setdefault(id(c.scope), []).append(c)
    return [sorted(v, key=lambda c: (c.line, c.node.col_offset)) for v in out.values()]


@rule("LINT037", "read-before-rank0-write")
def read_before_rank0_write(t):
    """A file or folder rank 0 writes that every rank then reads (or writes into) with nothing making the ranks wait.

    What it checks
        In a file that joins a process group, a write under a rank-0 test (`torch.save(obj, path)`, `open(path,
        "w")`, `np.save`, `save_pretrained(path)`, or a folder made with `os.makedirs(path)`) followed, in the same
        function and on the other ranks too, by a read of the same path (`torch.load(path)`, `open(path)`,
        `from_pretrained(path)`) or, for a folder, by a file opened or saved inside it, with no collective between the
        two (`dist.barrier()`, `accelerator.wait_for_everyone()`, any c10d collective, a backward) and no training step
        or helper call of the project that may hold one. A preview rule (round 19): a note by default, a warning with
        `--preview`. Since round 23 (lint30) DETR's `save_on_master(state, path)` (and helpers so named, which gate
        themselves) counts as a rank-0 write, and a path held in a name assigned once is compared by its value.
        Since round 24 (lint32) a read the other ranks retry until it works (in a `try` inside a loop whose handler
        sleeps or goes round again, or that breaks once the read worked) or that follows a `while not
        os.path.exists(path):` poll is a hand-written wait: quiet.

    Why it matters
        The other ranks do not wait for rank 0: they reach the read while rank 0 is still writing (or before it has
        started), and load a missing, truncated or previous file, or open a file in a folder that does not exist yet
        (FileNotFoundError on some ranks only, on some runs only). The DDP tutorial puts `dist.barrier()` between
        rank 0's save and everyone's load for this reason (pytorch/tutorials ddp_tutorial.rst, demo_checkpoint).

    Example
        if rank == 0:
            torch.save(model.state_dict(), "best.pt")
        model.load_state_dict(torch.load("best.pt", map_location=f"cuda:{local_rank}"))

    Fix
        if rank == 0:
            torch.save(model.state_dict(), "best.pt")
        dist.barrier()   # every rank waits until rank 0 has written the file
        model.load_state_dict(torch.load("best.pt", map_location=f"cuda:{local_rank}"))
    """
    index = t.index
    if not is_distributed(index) or not any(
            ((c.qual or "").startswith("torch.distributed.") and c.name != "destroy_process_group") or
            (c.qual or c.name or "").endswith(("DistributedDataParallel", "FullyShardedDataParallel", "Accelerator"))
            for c in index.calls):
        return  # no live set-up: a `ddp = False` file whose `if ddp:` blocks never run (fr47) joins no group
    for w, r, folder in _pairs(t, index):
        if t.facts.dead(w.scope, index):
            continue
        what = (f"the folder `{ast.unparse(_written(w)[0])}` rank 0 creates at line {w.line}" if folder else
                f"`{ast.unparse(_bound(_written(w)[0], w))}`, which rank 0 writes at line {w.line}")
        yield t.finding(
            "warning", r.node,
            f"every rank {'uses' if folder else 'reads'} {what}, with no barrier between: the other ranks may get "
            f"there before the {'folder exists' if folder else 'file is written'}",
            detail=("Nothing makes the other ranks wait for rank 0's write: they run on, reach this line while rank 0 "
                    "is still writing or has not started, and read a missing, partial or stale file (or find no "
                    "folder), on some ranks and some runs only. The DDP tutorial puts dist.barrier() between rank 0's "
                    "save and everyone's load (pytorch/tutorials ddp_tutorial.rst)."),
            fix=(f"if rank == 0:\n    {ast.unparse(w.node)}\ntorch.distributed.barrier()   # every rank waits for "
                 f"rank 0's write\n{ast.unparse(r.node)}"),
            evidence={"write_line": w.line, "source": _SOURCE},
        )
