"""An environment variable's value (a str) compared with an int (round 20, wave 6: a class the held-out review found;
a preview rule)."""
from __future__ import annotations

import ast
import functools
import json
import os
from typing import Dict, List, Optional, Tuple

from . import rule

_DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "data",
                     "lint_env_types.json")


@functools.lru_cache(maxsize=1)
def _facts() -> Tuple[frozenset, frozenset, frozenset, str]:
    """(subscripted readers, called readers, rank variable names, the source line), from lint_env_types.json."""
    with open(_DATA, encoding="utf-8") as fh:
        doc = json.load(fh)
    src = doc["source"]
    return (frozenset(doc["readers"]["subscript"]), frozenset(doc["readers"]["calls"]),
            frozenset(doc["rank_variables"]["names"]), f"{src['repo']} {src['commit'][:7]}: {src['path']}")


def _env_read(index, node: ast.AST) -> Optional[str]:
    """`os.environ["RANK"]`, `os.getenv("RANK")`, `os.environ.get("RANK", ...)` (not wrapped in int()): the
    variable's name (or "?" when it is not a literal); else None."""
    subs, calls, _, _ = _facts()
    if isinstance(node, ast.Subscript) and index.qual(node.value, index.module) in subs:
        key = node.slice
    elif isinstance(node, ast.Call) and node.args and index.qual(node.func, index.module) in calls:
        key = node.args[0]
    else:
        return None
    return key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else "?"


def _int(node: ast.AST) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) is int


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _scope_nodes(tree: ast.Module) -> List[List[ast.AST]]:
    """Each scope's own nodes in one walk of the tree: the module's, then every function's and lambda's body (not
    those of the functions and classes defined in it). A class body, a function's decorators and defaults belong to
    no scope here but are walked for the functions inside them. One pass (round 20's review: two walks per scope made
    this rule 66 ms of a 5,000-line file)."""
    out: List[List[ast.AST]] = []
    pending: List[ast.AST] = [tree]
    while pending:
        scope = pending.pop(0)
        own: List[ast.AST] = []
        out.append(own)
        body = scope.body if isinstance(scope.body, list) else [scope.body]
        todo = [(n, own) for n in body]
        if scope is not tree:  # the scope's header (decorators, defaults, annotations): functions only
            todo += [(c, None) for c in ast.iter_child_nodes(scope) if not any(c is b for b in body)]
        while todo:
            node, bucket = todo.pop()
            if isinstance(node, _SCOPES):
                pending.append(node)
                continue
            if isinstance(node, ast.ClassDef):
                bucket = None
            elif bucket is not None:
                bucket.append(node)
            todo.extend((c, bucket) for c in ast.iter_child_nodes(node))
    return out


def _env_names(index, nodes) -> Dict[str, str]:
    """Names bound exactly once in the scope, to an environment read: `rank = os.environ["RANK"]` -> {rank: RANK}.
    A name bound again (`rank = int(rank)`, a loop target, an augmented assignment) is left out."""
    binds: Dict[str, list] = {}
    for node in nodes:
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            binds.setdefault(node.id, [])
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            binds.setdefault(node.targets[0].id, []).append(node.value)
        elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and isinstance(node.target, ast.Name) and node.value:
            binds.setdefault(node.target.id, []).append(node.value)
    out = {}
    for name, values in binds.items():
        stores = 0
        for node in nodes:
            if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, (ast.Store, ast.Del)):
                stores += 1
        if len(values) == 1 and stores == 1:
            var = _env_read(index, values[0])
            if var is not None:
                out[name] = var
    return out


@rule("LINT042", "environment-value-compared-with-int")
def environment_value_compared_with_int(t):
    """An environment variable's value, a str, compared with an int: `os.environ["RANK"] == 0`.

    What it checks
        `==` / `!=` between an int literal and a read of the environment (`os.environ[...]`, `os.getenv(...)`,
        `os.environ.get(...)`), directly or through a name bound once to such a read in the same function
        (`rank = os.getenv("LOCAL_RANK")` ... `if rank == 0:`). Quiet when the read is wrapped in `int(...)`, the name
        is bound again (`rank = int(rank)`), or the comparison is with a str (`== "0"`). A preview rule
        (round 20): a note by default, a warning with `--preview`.

    Why it matters
        os.environ holds str values only (CPython Lib/os.py: _Environ decodes every value to str; os.getenv:
        "key, default and the result are str"), and a str never equals an int: `os.environ["RANK"] == 0` is False
        on every rank, so rank-0-only work (saving, logging, downloading) never runs; `!= 0` is True on every rank,
        so work meant for the other ranks runs on rank 0 too.

    Example
        if os.environ["RANK"] == 0:
            torch.save(model.state_dict(), "ckpt.pt")     # never runs

    Fix
        `if int(os.environ["RANK"]) == 0:` (or compare with the str: `os.environ["RANK"] == "0"`).
    """
    index = t.index
    text = index.source
    if text is not None and "environ" not in text and "getenv" not in text:
        return  # no environment read in the file: nothing to compare (spares the per-scope walks on most files)
    _, _, ranks, source = _facts()
    for nodes in _scope_nodes(index.tree):
        names = None
        for node in nodes:
            if not (isinstance(node, ast.Compare) and len(node.ops) == 1
                    and isinstance(node.ops[0], (ast.Eq, ast.NotEq))):
                continue
            left, right = node.left, node.comparators[0]
            for side, other in ((left, right), (right, left)):
                if not _int(other):
                    continue
                var = _env_read(index, side)
                via = None
                if var is None and isinstance(side, ast.Name):
                    if names is None:
                        names = _env_names(index, nodes)
                    var, via = names.get(side.id), side.id
                if var is None:
                    continue
                shown = ast.unparse(node)
                always = "False" if isinstance(node.ops[0], ast.Eq) else "True"
                what = "rank" if var in ranks else "value"
                fixed = ast.unparse(ast.Compare(left=ast.Call(func=ast.Name("int"), args=[side], keywords=[]),
                                                ops=node.ops, comparators=[other]) if side is left else
                                    ast.Compare(left=left, ops=node.ops,
                                                comparators=[ast.Call(func=ast.Name("int"), args=[side], keywords=[])]))
                yield t.finding(
                    "warning", node,
                    f"`{shown}` compares the {what} in ${var} (a str) with an int: it is {always} on every rank"
                    + (f" ({via} holds the str read from the environment)" if via else ""),
                    detail=("os.environ values are always str (CPython Lib/os.py), and a str never equals an int, so "
                            f"this test is {always} whatever the launcher exported: "
                            + ("the rank-0-only work never runs." if always == "False" else
                               "the work it guards runs on every rank.")),
                    fix=fixed,
                    evidence={"variable": var, "always": always, "via": via or "", "source": source},
                    subjects=[f"env:{var}"])
                break
