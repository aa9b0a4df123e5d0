"""Gatherers read the machine; each fills one snapshot section and never raises.

Every gatherer takes a `Sources` object, so tests pass a fake environment, a fake /proc root or a
fake NVML backend instead of patching the real machine. Gatherer modules register themselves with
`@gatherer("name")`; importing this package imports them all.
"""
from __future__ import annotations

import importlib
import os
import pkgutil
from types import MappingProxyType
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, Mapping, NamedTuple, Optional


# Display / gathering order. Sections not listed here come after, alphabetically.
ORDER = ("host", "env", "packages", "launcher", "network", "torch", "gpus", "pci")


@dataclass
class Sources:
    """Where gatherers read from. Defaults are the live machine."""

    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    root: str = "/"  # prefix for /proc, /sys, /dev/shm reads, so tests can point at a fake tree
    nvml: Any = None  # an NVML backend (ddpdoctor.gather.gpus); None means the live library
    cuda: Any = None  # a libcuda stand-in for the `cuda` facts (ddpdoctor.gather.cuda); None: libcuda.so.1
    python: Optional[str] = None  # interpreter for subprocess facts (torch); None: sys.executable
    timeout_s: float = 20.0

    def path(self, p: str) -> str:
        return os.path.join(self.root, p.lstrip("/")) if self.root != "/" else p

    def read(self, p: str, limit: int = -1) -> Optional[str]:
        """The text of a /proc, /sys or /etc file under `root` (at most `limit` characters), or None
        when it cannot be read: a missing or unreadable file is a fact, never an error."""
        return self._read(p, limit, open)

    def read_regular(self, p: str, limit: int = -1) -> Optional[str]:
        """As read, for a file in the user's own trees (a model folder, the Hugging Face cache): None unless it is a
        regular file. A FIFO there has no writer and open() would wait for one for ever (fifo(7)); model.inputs'
        open_regular never blocks."""
        from ddpdoctor.model.inputs import open_regular  # noqa: PLC0415

        return self._read(p, limit, open_regular)

    def _read(self, p: str, limit: int, opener) -> Optional[str]:
        try:
            with opener(self.path(p), "r", encoding="utf-8", errors="replace") as fh:
                return fh.read(limit)
        except OSError:
            return None

    def environ_of(self, pid, keys: Iterable[str]) -> Optional[Dict[str, str]]:
        """The variables named in `keys` from another process's /proc/PID/environ (the first MiB), or
        None when it cannot be read (another user's process, or gone). Only the named variables are
        kept: another process's environment may hold secrets, and the doctor keeps nothing it does
        not judge."""
        wanted = set(keys)
        try:
            with open(self.path(f"/proc/{pid}/environ"), "rb") as fh:
                raw = fh.read(1 << 20)
        except OSError:
            return None
        out: Dict[str, str] = {}
        for item in raw.split(b"\0"):
            key, _, value = item.partition(b"=")
            name = key.decode(errors="replace")
            if name in wanted:
                out[name] = value.decode(errors="replace")
        return out


def parse_int(text: Optional[str]) -> Optional[int]:
    """A sysfs/procfs integer ("3\n"), or None for a missing or non-numeric value."""
    try:
        return int(str(text).strip())
    except (TypeError, ValueError):
        return None


# The JSON types a field may have (the snapshot schema; see ddpdoctor.pipeline.shapes).
INT, NUM, STR, BOOL, OBJ, LIST = "an integer", "a number", "a string", "true or false", "an object", "a list"


class Gatherer(NamedTuple):
    """A registered gatherer. Indexes as before: [0] the function, [1] whether `check` gathers it."""

    fn: Callable
    in_snapshot: bool = True
    when: frozenset = frozenset({"check"})
    fields: Mapping[str, str] = {}
    required: frozenset = frozenset()
    nullable: frozenset = frozenset()


GATHERERS: dict = {}


def gatherer(name: str, *, in_snapshot: bool = True, when: Iterable[str] = ("check",),
             fields: Optional[Mapping[str, str]] = None, required: Iterable[str] = (),
             nullable: Iterable[str] = ()) -> Callable:
    """Register `fn(sources) -> dict` as the gatherer of section `name`.

    when: where it runs: "check" (the live snapshot of `ddpdoctor check` / `snapshot`) and/or
        "preflight" (the static sections preflight() reads inside the training process).
    fields: the JSON type of each field checks read, as paths relative to the section
        (`vars.*`: every value of object `vars`; `devices[]`: every element of list `devices`).
        A recorded snapshot is validated against the union of these (ddpdoctor.pipeline.shapes).
    required: fields that must be present in every element that has the parent.
    nullable: object values (`*` paths) that may be null.
    """
    moments = frozenset(when) if in_snapshot else frozenset(when) - {"check"}

    def decorate(fn: Callable) -> Callable:
        GATHERERS[name] = Gatherer(fn, in_snapshot, moments, dict(fields or {}),
                                   frozenset(required), frozenset(nullable))
        return fn

    return decorate


def sections_for(when: str) -> list:
    """The sections gathered at `when`, in ORDER."""
    load_gatherers()
    names = [n for n, g in GATHERERS.items() if when in g.when]
    return sorted(names, key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n))


_SCHEMA: list = []  # [(the registered Gatherer objects, the schema built from them)]


def schema() -> tuple:
    """(fields, required, nullable) of every gatherer, as `section.path` patterns: a read-only mapping and two
    frozensets, built once and shared while the registered gatherers are the same objects (a snapshot load calls
    this; rebuilding it was ~6% of the fuzz tests'). A gatherer registered or removed builds it anew."""
    load_gatherers()
    names = sorted(GATHERERS, key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n))
    current = tuple((name, GATHERERS[name]) for name in names)
    if _SCHEMA:
        known, built = _SCHEMA[0]
        if len(known) == len(current) and all(a[0] == b[0] and a[1] is b[1] for a, b in zip(known, current)):
            return built
    fields: dict = {}
    required: set = set()
    nullable: set = set()
    for name, g in current:
        fields.update({f"{name}.{k}": v for k, v in g.fields.items()})
        required |= {f"{name}.{k}" for k in g.required}
        nullable |= {f"{name}.{k}" for k in g.nullable}
    for pattern, kind in inprocess_fields().items():  # the sections the training process writes
        fields.setdefault(pattern, kind)
    built = (MappingProxyType(fields), frozenset(required), frozenset(nullable))
    _SCHEMA[:] = [(current, built)]
    return built


def inprocess_fields() -> dict:
    """pattern -> JSON type of the sections written inside the training process (gather/_inprocess.py), which no
    gatherer here gathers; schema() adds them after the gatherers' own."""
    from ddpdoctor.gather._inprocess import FIELDS

    kinds = {"INT": INT, "NUM": NUM, "STR": STR, "BOOL": BOOL, "OBJ": OBJ, "LIST": LIST}
    return {pattern: kinds[kind] for pattern, kind in FIELDS.items()}


_MODULES: list = []


def load_gatherers() -> None:
    """Import every gatherer module; each registers itself with @gatherer. The package's folder is listed
    once per process (schema() calls this for every snapshot loaded: the listing was 8% of the fuzz tests')."""
    if not _MODULES:
        _MODULES.extend(f"{__name__}.{mod.name}" for mod in pkgutil.iter_modules(__path__)
                        if not mod.name.startswith("_"))
    for name in _MODULES:
        importlib.import_module(name)
