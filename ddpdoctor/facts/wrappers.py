"""Exceptions that only carry another exception (ddpdoctor/data/wrapper_exceptions.json, from Ray's
python/ray/exceptions.py, ray/train/v2/api/exceptions.py and ray/tune/error.py): a Ray task's, actor's, Train worker's
or Tune trial's failure re-raised in its caller. Pure lookups."""
from __future__ import annotations

import functools
import json
import re
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "data" / "wrapper_exceptions.json"


@functools.lru_cache(maxsize=1)
def doc() -> dict:
    with open(DATA, encoding="utf-8") as fh:
        return json.load(fh)


@functools.lru_cache(maxsize=1)
def _rx() -> "re.Pattern":
    return re.compile(r"(?:^|\.)(?:" + "|".join(w["pattern"] for w in doc()["wrappers"]) + r")$")


def is_wrapper(etype: str) -> bool:
    """The exception's class name (dotted or not: 'ray.exceptions.RayTaskError(OutOfMemoryError)') is a wrapper's."""
    return bool(etype) and _rx().search(etype.strip()) is not None


def wrapped(etype: str) -> str:
    """The cause's class a wrapper names in its own class name ('RayTaskError(ModuleNotFoundError)' ->
    'ModuleNotFoundError'), else ''."""
    m = re.search(r"\((\w+)\)$", etype.strip())
    return m.group(1) if m else ""



# an exception's "Type: message" quoted inside a wrapper's own text: Ray's RayActorError puts str(RayTaskError) after
# "The actor died because of an error raised in its creation task, ", and a one-line paste keeps the cause's
# "XError: message" at the end of that line ("... (pid=4411, ip=10.0.1.7): ModuleNotFoundError: No module named 'x'")
_INNER = re.compile(r"(?:^|[\s:(])(?P<type>(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)): (?P<msg>\S.*)$")


def inner(msg: str):
    """(type, message) of the first exception a wrapper's message quotes in its own text, else None."""
    m = _INNER.search(msg)
    return (m.group("type"), m.group("msg").strip()) if m else None
