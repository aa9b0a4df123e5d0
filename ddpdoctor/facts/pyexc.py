"""A traceback's last line as CPython prints it (ddpdoctor/data/python_exceptions.json, from Lib/traceback.py): the
exception classes whose names carry no Error/Exception suffix. Pure lookups."""
from __future__ import annotations

import functools
import json
import re
from pathlib import Path

_PY = Path(__file__).resolve().parent.parent / "data" / "python_exceptions.json"


@functools.lru_cache(maxsize=1)
def _bare_rx() -> "re.Pattern":
    with open(_PY, encoding="utf-8") as fh:
        names = json.load(fh)["bare_builtins"]
    # a built-in one by its name alone; any other by its module-qualified name (a dotted name, its class capitalised)
    return re.compile(r"(?P<type>(?:" + "|".join(names) + r")|(?:[A-Za-z_]\w*\.)+[A-Z]\w*)(?:: (?P<msg>.*))?$")


def bare_exception(text: str):
    """(type, message) of a traceback's last line whose class has no Error/Exception suffix, as CPython's
    traceback.format_exception_only prints it ('StopIteration', 'SystemExit: 2', 'queue.Empty'; data/
    python_exceptions.json), else None. Only meaningful on the line under a traceback's last frame."""
    m = _bare_rx().match(text)
    if m is None or m.group("type") in _exits():
        return None
    return m.group("type"), m.group("msg") or ""


@functools.lru_cache(maxsize=1)
def _exits() -> frozenset:
    with open(_PY, encoding="utf-8") as fh:
        return frozenset(json.load(fh)["not_failures"])
