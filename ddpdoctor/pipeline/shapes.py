"""The JSON types of the snapshot fields that checks read, enforced when a recorded snapshot loads.

A snapshot attached to a bug report may have been hand-edited ("RANK": 5 instead of "5") or
written by another version. Checked here, once, such a file is rejected with the field named
(exit 2, as the contract asks for a bad snapshot) instead of crashing checks whose DOC001 finding
would blame ddpdoctor. Live snapshots never go through this: gatherers write these types.

Paths: `a.b` is key b of object a; `*` is every value of an object; `[]` is every element of a
list. A field may be null (checks read it as "unknown"); list elements and object values may not.
"""
from __future__ import annotations

from typing import Any, Iterator, Mapping, Tuple

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


_TYPES = {STR: (str,), BOOL: (bool,), OBJ: (dict,), LIST: (list,), INT: (int,), NUM: (int, float)}
_EXACT = {kind: frozenset(types) for kind, types in _TYPES.items()}  # JSON's own classes: no isinstance needed


def _fits(value: Any, kind: str) -> bool:
    """_is without building a mapping per call (the fuzz tests validate thousands of documents)."""
    return isinstance(value, _TYPES[kind]) and not (value.__class__ is bool and kind in (INT, NUM))


def _wrong(value: Any, trie: dict, found: list) -> None:
    """Walk `value` along every pattern of `trie` at once (patterns sharing a prefix walk it once: a list of
    devices is read once for all its fields), appending the index of each pattern with a rejected value:
    what _values and shape_error reject, without the path strings."""
    for (step, key), (ends, children) in trie.items():
        if step == "key":
            if not isinstance(value, dict):
                continue
            v = value.get(key)
            if v is None:
                found += [i for i, _kind, _exact, required, null_ok in ends if required and not null_ok]
                continue
            for i, kind, exact, _required, _null_ok in ends:  # reached through a key: None was allowed
                if v.__class__ not in exact and not _fits(v, kind):
                    found.append(i)
            if children:
                _wrong(v, children, found)
            continue
        if step == "*":
            if not isinstance(value, dict):
                continue
            values = value.values()
        elif isinstance(value, list):
            values = value
        else:
            continue
        for v in values:
            cls = v.__class__
            for i, kind, exact, _required, null_ok in ends:
                if (not null_ok) if v is None else (cls not in exact and not _fits(v, kind)):
                    found.append(i)
            if children and v is not None:
                _wrong(v, children, found)


def _with_common(declared: dict) -> dict:
    """The declared patterns with the COMMON keys added to every section they name (a declared key wins)."""
    declared = dict(declared)
    for section in {p.partition(".")[0] for p in declared}:
        for name, kind in COMMON.items():
            declared.setdefault(f"{section}.{name}", kind)
    return declared


def _message(path: str, value: Any, kind: str) -> str:
    """The one line that names a field of the wrong type."""
    got = "missing or null" if value is None else type(value).__name__
    hint = f" (write \"{value}\")" if kind == STR and isinstance(value, (int, float)) else ""
    return f"field {path} is {got}, expected {kind}{hint}"


_compiled: list = []  # [((declared, required, nullable_values), compiled)]: the last schema's, by identity


def _patterns(declared: Mapping, required: frozenset, nullable_values: frozenset) -> tuple:
    """([(pattern, section, steps, kind, required, nullable)] in declaration order, COMMON keys added per
    section; {section: trie of their steps}), worked out once per schema: gather.schema() hands out the same
    read-only objects while the gatherers are the same, so they are recognised by identity (held here, so an
    id is never reused). A trie maps (step, key) to (patterns ending there, children)."""
    if _compiled:
        (d, r, n), got = _compiled[0]
        if d is declared and r is required and n is nullable_values:
            return got
    order, tries = [], {}
    for i, (pattern, kind) in enumerate(_with_common(declared).items()):
        section, _, rest = pattern.partition(".")
        steps = _steps(rest)
        order.append((pattern, section, steps, kind, pattern in required, pattern in nullable_values))
        trie = tries.setdefault(section, {})
        for n, step in enumerate(steps):
            ends, children = trie.setdefault(step, ([], {}))
            if n + 1 == len(steps):
                ends.append((i, kind, _EXACT[kind], pattern in required, pattern in nullable_values))
            trie = children
    got = (order, tries)
    _compiled[:] = [((declared, required, nullable_values), got)]
    return got


def shape_error(sections: dict) -> str:
    """The first field of a known section with the wrong JSON type, as one line; "" when all fit."""
    declared, required, nullable_values = schema()
    order, tries = _patterns(declared, required, nullable_values)
    found: list = []
    for section, trie in tries.items():
        sec = sections.get(section)
        if isinstance(sec, dict):
            _wrong(sec, trie, found)
    if not found:
        return ""
    _pattern, section, steps, kind, req, null_ok = order[min(found)]
    for path, value, nullable in _values(sections[section], steps, section, req):  # the first, with its path
        if value is None and (nullable or null_ok):
            continue
        if not _is(value, kind):
            return _message(path, value, kind)
    raise AssertionError(f"shapes: {_pattern} was rejected by the walk and not by _values")  # cannot happen
