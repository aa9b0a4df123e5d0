"""One field of a parsed JSON document replaced, the rest shared: the fuzz tests' copy.

Why: the fuzz tests (test_core, test_snapshot_types) change one field at a time, thousands of times;
a deep copy of the whole snapshot per change was a third of their time. Only the containers on the
path to the field are copied here, so the document they started from is never changed (they assert
that it is not, in case a loader writes into what it is given).
"""
from __future__ import annotations

from typing import Any, Sequence


def replaced(doc: Any, path: Sequence, value: Any) -> Any:
    """A copy of `doc` with the field at `path` (dict keys and list indices) set to `value`; the
    containers along `path` are new, everything else is shared with `doc`."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(doc, list):
        out = list(doc)
    elif isinstance(doc, dict):
        out = dict(doc)
    else:
        raise TypeError(f"cannot step into {type(doc).__name__} at {head!r}")
    out[head] = replaced(doc[head], rest, value)
    return out
