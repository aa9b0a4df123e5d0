"""A folder created with os.makedirs/os.mkdir by every rank without exist_ok (round 14, a preview rule)."""
from __future__ import annotations

import ast

from . import rule
from ..analysis import Call
from ..names import dotted, stmt_nodes
from ._common import names_the_rank
from ._every_rank import every_rank_calls, unproven

_SOURCE = ("Python documentation, os.makedirs: 'If exist_ok is False (the default), a FileExistsError is raised if "
           "the target directory already exists'; os.mkdir: 'If the directory already exists, FileExistsError is "
           "raised' (docs.python.org/3/library/os.html); pathlib.Path.mkdir: 'If exist_ok is false (the default), "
           "FileExistsError is raised if the target directory already exists' (docs.python.org/3/library/pathlib.html; "
           "python/cpython Lib/pathlib)")


def _pathlib_check_then_make(call: Call) -> bool:
    """`if not out_dir.exists(): out_dir.mkdir(parents=True)`: pathlib's Path.mkdir without exist_ok=True, in the
    body of a test that the same object does not exist (the check of check-then-make names it a path; a `.mkdir` of
    an FTP/fsspec client is not read). Path.mkdir: 'If exist_ok is false (the default), FileExistsError is raised if
    the target directory already exists' (fr146 k--chow/IODINE.pytorch, itsliupeng/nougat, both missed)."""
    func = call.node.func
    if call.name != "mkdir" or not isinstance(func, ast.Attribute) or call.qual == "os.mkdir":
        return False
    ok = call.kw("exist_ok")
    if ok is None and len(call.node.args) > 2:
        ok = call.node.args[2]   # Path.mkdir(mode, parents, exist_ok)
    if ok is not None and not (isinstance(ok, ast.Constant) and not ok.value):
        return False
    if not call.ctx.branch or call.ctx.branch[-1][1] != 0:
        return False
    test = call.ctx.branch[-1][0]
    if not (isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and isinstance(test.operand, ast.Call)
            and isinstance(test.operand.func, ast.Attribute) and test.operand.func.attr in ("exists", "is_dir")
            and not test.operand.args):   # Path.exists() names no path: `client.exists(d)` is another API
        return False
    return ast.dump(test.operand.func.value) == ast.dump(func.value)


def _path_args(call: Call):
    """The path a creation names: os.makedirs(p) -> [p]; p.mkdir() -> [p]."""
    if call.qual in ("os.makedirs", "os.mkdir"):
        return call.node.args[:1]
    return [call.node.func.value] if isinstance(call.node.func, ast.Attribute) else []


def _races(call: Call) -> bool:
    """`os.makedirs(p)` / `os.makedirs(p, 0o777, False)` / `os.mkdir(p)`: no `exist_ok=True`; pathlib's
    check-then-make."""
    if call.qual == "os.mkdir":
        return bool(call.node.args)
    if _pathlib_check_then_make(call):
        return True
    if call.qual != "os.makedirs" or not call.node.args:
        return False
    ok = call.kw("exist_ok")
    if ok is None and len(call.node.args) > 2:
        ok = call.node.args[2]
    return ok is None or (isinstance(ok, ast.Constant) and not ok.value)


def _caught(call: Call) -> bool:
    """Inside a `try:` whose handlers catch the error (FileExistsError, OSError, Exception or a bare except)."""
    line = call.line
    for node in stmt_nodes(call.scope.node):   # a try is a statement: no walk of the expressions to find one
        # the call can be in the try's body only between the `try:` line and the body's last line: no walk of the
        # bodies elsewhere
        if isinstance(node, ast.Try) and node.body and node.lineno <= line <= \
                (getattr(node.body[-1], "end_lineno", None) or line) and \
                any(call.node is n for stmt in node.body for n in ast.walk(stmt)):
            for h in node.handlers:
                names = [dotted(e) for e in (h.type.elts if isinstance(h.type, ast.Tuple) else [h.type])] \
                    if h.type is not None else [None]
                if any(n is None or n.rsplit(".", 1)[-1] in ("FileExistsError", "OSError", "Exception",
                                                             "BaseException", "IOError") for n in names):
                    return True
    return False


_WRAPS = ("expanduser", "abspath", "realpath", "normpath")


def _folder(node, scope, depth: int = 0):
    """The attribute a path names, `args.save_dir`, through a local name and os.path.expanduser/abspath
    (`directory = os.path.expanduser(args.save_dir)`); None for anything else."""
    if isinstance(node, ast.Call) and node.args and (dotted(node.func) or "").rsplit(".", 1)[-1] in _WRAPS:
        return _folder(node.args[0], scope, depth)
    if isinstance(node, ast.Attribute):
        return dotted(node)
    if isinstance(node, ast.Name) and depth < 2:
        values = [a for a in scope.assigns if a.targets == [node.id] and a.value is not None and
                  a.node.lineno < node.lineno]
        if len(values) == 1:
            return _folder(values[0].value, scope, depth + 1)
    return None


def _made_elsewhere(call: Call, index, reported: set) -> bool:
    """The folder is created by another makedirs/mkdir of the same attribute that does not run on every rank
    (fr91 winycg/CIRKD: `if args.local_rank == 0: os.makedirs(args.save_dir)` at start-up; the every-rank
    `if not os.path.exists(directory): os.makedirs(directory)` of save_checkpoint then finds it made)."""
    name = _folder(call.node.args[0], call.scope) if call.node.args else None
    if name is None:
        return False
    others = [c for q in ("os.makedirs", "os.mkdir") for c in index.by_qual.get(q, ())
              if c is not call and id(c.node) not in reported and c.node.args]
    return any(_folder(c.node.args[0], c.scope) == name for c in others)


def _exists_test(test) -> bool:
    """`not os.path.exists(p)` / `not os.path.isdir(p)` / `not Path(p).exists()`: the check of check-then-make."""
    if not (isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and isinstance(test.operand, ast.Call)):
        return False
    return (dotted(test.operand.func) or "").rsplit(".", 1)[-1] in ("exists", "isdir")


def _key(node, scope):
    return _folder(node, scope) or (node.id if isinstance(node, ast.Name) else None)


def _made_before(call: Call, index) -> bool:
    """The same function already made this folder in a statement of its own body that always makes it, earlier
    (fr139 YifaSuoha962/Retro-CHELSY: `if not os.path.exists(ckpt_dir): os.makedirs(ckpt_dir)` at start-up and
    again before saving): after that statement the folder exists on every rank that goes on (or the rank died
    there, the finding of the first), so the second creation races with nobody. A statement that always makes it:
    the bare call, or `if not os.path.exists(p):` with the call in its body; a name rebound in between is not the
    same folder."""
    fn = call.scope.node
    if not call.node.args or not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
        return False
    key = _key(call.node.args[0], call.scope)
    if key is None:
        return False
    line = call.node.lineno
    for stmt in fn.body:
        if getattr(stmt, "end_lineno", line) >= line:
            break
        makers = []
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            makers = [stmt.value]
        elif isinstance(stmt, ast.If) and _exists_test(stmt.test):
            makers = [s.value for s in stmt.body if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)]
        for m in makers:
            if (dotted(m.func) or "").rsplit(".", 1)[-1] not in ("makedirs", "mkdir") or not m.args:
                continue
            if _key(m.args[0], call.scope) != key:
                continue
            if "." not in key and any(key in a.targets and m.lineno < a.node.lineno < line for a in call.scope.assigns):
                continue  # the name was bound again in between: another folder
            return True
    return False


@rule("LINT028", "makedirs-race-every-rank")
def makedirs_race_every_rank(t):
    """A folder created by every rank with os.makedirs/os.mkdir and no exist_ok.

    What it checks
        In a distributed script (it joins a process group, spawns the ranks, is launched by torchrun or, since
        round 21, builds a Lightning Trainer whose strategy re-runs the script per rank):
        `os.makedirs(path)` without `exist_ok=True`, or `os.mkdir(path)`, that every rank runs on the same path
        (usually behind `if not os.path.exists(path):`): not under a rank test, not in a function every caller
        gates, not in the parent before `mp.spawn`, not to a per-rank path, not inside a `try:` that catches
        FileExistsError/OSError, not of a folder (`args.save_dir`, also through `os.path.expanduser`) that another
        creation of the file makes on one rank first (round 15), not of a folder an earlier statement of the same
        function always made (round 22: a second check-then-makedirs races with nobody). Also pathlib's check-then-make,
        `if not out.exists(): out.mkdir(parents=True)` without exist_ok (round 25), and a script that reads
        `os.environ["RANK"]` / `["LOCAL_RANK"]` / `["WORLD_SIZE"]` without a default counts as launched per rank
        (round 25: it cannot run under plain python). Consecutive creations of one block are one finding. A warning when the call is shown to run on every rank of a training run, else
        a note. A preview rule (round 14): a note by default, a warning with `--preview`.

    Why it matters
        The existence test and the creation are two steps: all ranks see no folder, one creates it, and the
        others' `makedirs` raises FileExistsError (the os documentation: exist_ok=False raises if the directory
        exists). The rank that dies leaves the rest waiting in the next collective until the timeout. It
        depends on timing, so it shows on some runs only.

    Example
        dist.init_process_group("nccl")
        if not os.path.exists(out_dir):
            os.makedirs(out_dir)

    Fix
        `os.makedirs(out_dir, exist_ok=True)` (safe on every rank), or create it on rank 0 and
        `dist.barrier()` before the others use it.
    """
    index = t.index
    found = list(every_rank_calls(
        t, _races, 4,   # the folders of one block (run, log, checkpoint): one finding
        quiet=lambda c: _caught(c) or names_the_rank(_path_args(c), c, index)))  # each rank its own folder
    reported = {id(c.node) for c, _ in found}
    for call, proof in found:
        if _made_elsewhere(call, index, reported) or _made_before(call, index):
            continue
        name = dotted(call.node.func) or "os.makedirs"
        yield t.finding(
            "warning" if proof is not None else "info", call.node,
            f"{name}() without exist_ok runs on every rank: the ranks race to create the same folder and all but "
            "one can raise FileExistsError" + unproven(t, call, proof),
            detail=("Every rank tests for the folder, finds none and creates it; the ranks that lose the race get "
                    "FileExistsError and die, and the others wait in their next collective."),
            fix="os.makedirs(path, exist_ok=True)   # or create it on rank 0, then dist.barrier()",
            evidence={"call": name, "every_rank": proof.as_dict() if proof is not None else None,
                      "source": _SOURCE})
