"""The JSON types of the snapshot fields that checks read, enforced when a recorded snapshot loads.

A snapshot attached to a bug report may have been hand-edited ("RANK": 5 instead of "5") or
written by another version. Checked here, once, such a file is rejected with the field named
(exit 2, as the contract asks for a bad snapshot) instead of crashing checks whose DOC001 finding
would blame ddpdoctor. Live snapshots never go through this: gatherers write these types.

Paths: `a.b` is key b of object a; `*` is every value of an object; `[]` is every element of a
list. A field may be null (checks read it as "unknown"); list elements and object values may not.
"""
from __future__ import annotations

from typing import Any, Iterator, Tuple

from ddpdoctor.gather import BOOL, INT, LIST, NUM, OBJ, STR, schema


def fields() -> dict:
    """pattern -> JSON type, from every gatherer's declared `fields` (sections in gathering order)."""
    return schema()[0]


def __getattr__(name: str):
    # FIELDS / REQUIRED / NULLABLE_VALUES: derived from the gatherers' declarations on first use.
    if name in ("FIELDS", "REQUIRED", "NULLABLE_VALUES"):
        declared, required, nullable = schema()
        return {"FIELDS": declared, "REQUIRED": required, "NULLABLE_VALUES": nullable}[name]
    raise AttributeError(name)


def _is(value: Any, kind: str) -> bool:
    if kind == INT:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == NUM:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, {STR: str, BOOL: bool, OBJ: dict, LIST: list}[kind])


def _steps(pattern: str) -> list:
    out = []
    for part in pattern.split("."):
        key, lists = part.rstrip("[]"), (len(part) - len(part.rstrip("[]"))) // 2
        out.append(("*", None) if key == "*" else ("key", key))
        out += [("[]", None)] * lists
    return out


def _values(node: Any, steps: list, where: str, required: bool = False) -> Iterator[Tuple[str, Any, bool]]:
    """(path, value, nullable) for every value the pattern reaches; wrong containers on the way are
    left to their own pattern."""
    if not steps:
        yield where, node, True
        return
    (kind, key), rest = steps[0], steps[1:]
    if kind == "key":
        if isinstance(node, dict) and node.get(key) is not None:
            yield from _values(node[key], rest, f"{where}.{key}", required)
        elif isinstance(node, dict) and required and not rest:
            yield f"{where}.{key}", None, False
    elif kind == "*" and isinstance(node, dict):
        for k, v in node.items():
            if rest:
                yield from _values(v, rest, f"{where}.{k}", required)
            else:
                yield f"{where}.{k}", v, False
    elif kind == "[]" and isinstance(node, list):
        for i, v in enumerate(node):
            if rest:
                yield from _values(v, rest, f"{where}[{i}]", required)
            else:
                yield f"{where}[{i}]", v, False


# Keys every gathered section may carry (timing, and why it could not be gathered).
COMMON = {"_elapsed_ms": NUM, "error": STR, "unavailable": STR}


def shape_error(sections: dict) -> str:
    """The first field of a known section with the wrong JSON type, as one line; "" when all fit."""
    declared, required, nullable_values = schema()
    declared = dict(declared)
    for section in {p.partition(".")[0] for p in declared}:
        for key, kind in COMMON.items():
            declared.setdefault(f"{section}.{key}", kind)
    for pattern, kind in declared.items():
        section, _, rest = pattern.partition(".")
        sec = sections.get(section)
        if not isinstance(sec, dict):
            continue
        for path, value, nullable in _values(sec, _steps(rest), section, pattern in required):
            if value is None and (nullable or pattern in nullable_values):
                continue
            if not _is(value, kind):
                got = "missing or null" if value is None else type(value).__name__
                hint = f" (write \"{value}\")" if kind == STR and isinstance(value, (int, float)) else ""
                return f"field {path} is {got}, expected {kind}{hint}"
    return ""
