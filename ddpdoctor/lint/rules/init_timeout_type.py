"""A number where init_process_group wants a timedelta (round 9, a preview rule)."""
from __future__ import annotations

import ast
from typing import Optional

from ..names import last_name
from . import rule
from ._common import INIT_PG

_GROUP_CALLS = (INIT_PG, "torch.distributed.new_group")
# pytorch/pytorch torch/distributed/distributed_c10d.py at 6170845ea8a4b7bd51506e31b76f3ad9e2e140b9:
# `_check_valid_timeout`: "if not isinstance(timeout, timedelta): raise TypeError(f'Expected timeout argument to be of
# type datetime.timedelta, got {timeout}')" (older releases raise RuntimeError from the same test in
# init_process_group itself).
_SOURCE = ("pytorch/pytorch torch/distributed/distributed_c10d.py 6170845ea8a4b7bd51506e31b76f3ad9e2e140b9 "
           "(_check_valid_timeout)")


def _number(expr: Optional[ast.AST], scope, depth: int = 0) -> str:
    """`600`, `1800.0`, `int(os.environ.get("NCCL_TIMEOUT", 1800))`, or a name assigned one: the text, or ""."""
    if expr is None or depth > 3:
        return ""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, (int, float)) and not isinstance(expr.value, bool):
        return repr(expr.value)
    if isinstance(expr, ast.BinOp) and _number(expr.left, scope, depth + 1) and _number(expr.right, scope, depth + 1):
        return ast.unparse(expr)
    if isinstance(expr, ast.Call) and last_name(expr.func) in ("int", "float"):
        return ast.unparse(expr)
    if isinstance(expr, ast.Name):
        s = scope
        while s is not None and expr.id not in s.values:
            s = s.parent
        if s is not None:
            return _number(s.values[expr.id], s, depth + 1)
    return ""


@rule("LINT023", "init-timeout-not-timedelta")
def init_timeout_not_timedelta(t):
    """init_process_group (or new_group) given a number of seconds as its timeout.

    What it checks
        `init_process_group(..., timeout=600)` / `new_group(..., timeout=...)` where the timeout is a number: a
        literal, arithmetic on literals, `int(...)`/`float(...)`, or a name assigned one. A preview rule (round 9):
        a note by default, a warning with `--preview`.

    Why it matters
        torch checks the type before anything else: "Expected timeout argument to be of type datetime.timedelta"
        (`_check_valid_timeout`, torch/distributed/distributed_c10d.py), so every rank fails at start-up, before
        the group exists.

    Example
        dist.init_process_group(backend="nccl", timeout=600)

    Fix
        `from datetime import timedelta`; `dist.init_process_group(backend="nccl", timeout=timedelta(seconds=600))`.
    """
    index = t.index
    for qual in _GROUP_CALLS:
        for call in index.by_qual.get(qual, ()):
            text = _number(call.kw("timeout"), call.scope)
            if not text:
                continue
            yield t.finding(
                "warning", call.node,
                f"{qual.rsplit('.', 1)[-1]}(timeout={text}) gets a number; torch raises TypeError unless it is a "
                "datetime.timedelta",
                detail="torch/distributed/distributed_c10d.py _check_valid_timeout: the timeout must be a timedelta.",
                fix=f"timeout=datetime.timedelta(seconds={text})",
                evidence={"timeout": text, "source": _SOURCE},
            )
