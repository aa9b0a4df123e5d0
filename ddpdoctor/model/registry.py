"""The check registry: what each check declares. A dict and a decorator; no running, no loading.

A check is a pure function `snapshot -> iterable of Finding`. The decorator records its stable ID,
slug, family and the snapshot sections it needs; its docstring is its documentation
(`ddpdoctor explain ID`). Loading the built-in checks and plugins, and running them, is the
pipeline's job (`ddpdoctor.pipeline.runner`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Iterable, List, Optional, Sequence


DOC_HEADINGS = ("What it checks", "Why it matters", "Example", "Fix")
PLUGIN_GROUP = "ddpdoctor.checks"

# Families in display order, with the label shown in text output.
FAMILIES: dict = {
    "launcher": "Launcher and rank environment",
    "system": "Host: CPU, memory, /dev/shm, limits",
    "network": "Network interfaces and rendezvous address",
    "nccl": "NCCL / Gloo settings",
    "settings": "torch, CUDA and Hugging Face settings",
    "gpu": "GPUs and topology",
    "tokenizers": "Tokenizers",
    "dataloader": "DataLoader and datasets",
    "trainer": "Trainer and DDP",
    "comm": "Connectivity test",
    "probe": "Instrumented training run",
    "run": "The job under `ddpdoctor run`",
    "lint": "Training script (static)",
    "logs": "Job logs (root cause first)",
    "packages": "Installed packages",
    "internal": "ddpdoctor itself",
}


@dataclass
class Spec:
    id: str
    slug: str
    family: str
    func: Optional[Callable] = None
    needs: Sequence[str] = ()
    catalogue: Sequence[str] = ()  # fault catalogue IDs, e.g. ("A4",)
    kind: str = "check"  # "check" (snapshot), "rule" (lint), "internal"
    when: frozenset = frozenset({"static"})  # the moments the runner runs it: WHEN
    reads: Sequence[str] = ()  # optional sections it reads when present (needs: required ones)
    doc: str = ""
    origin: str = "ddpdoctor"
    extra: dict = field(default_factory=dict)

    @property
    def summary(self) -> str:
        """First line of the docstring: what the check is about, in one sentence."""
        return self.doc.strip().splitlines()[0].strip() if self.doc.strip() else self.slug

    def sections(self) -> dict:
        """The docstring split under its fixed headings."""
        return parse_doc(self.doc)


# When a check runs. "static": `ddpdoctor check` and preflight() judge a whole snapshot;
# "fork": the fork guard, at each os.fork of the training process; "step": DoctorCallback, after
# the first optimizer steps; "lint": over a parsed training script (lint rules).
WHEN = ("static", "fork", "step", "lint", "triage", "run")

REGISTRY: dict = {}
_SLUGS: dict = {}


def parse_doc(doc: str) -> dict:
    import inspect

    text = inspect.cleandoc(doc or "")
    parts: dict = {"summary": []}
    current = "summary"
    for line in text.splitlines():
        stripped = line.strip().rstrip(":")
        if stripped in DOC_HEADINGS:
            current = stripped
            parts[current] = []
            continue
        parts.setdefault(current, []).append(line)
    import textwrap

    return {k: textwrap.dedent("\n".join(v)).strip() for k, v in parts.items()}


def register(spec: Spec) -> Spec:
    if not re.fullmatch(r"[A-Z][A-Z0-9]*[0-9]{3}", spec.id):
        raise ValueError(f"check id {spec.id!r} must look like ENV003")
    if not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", spec.slug):
        raise ValueError(f"check slug {spec.slug!r} must be kebab-case")
    if spec.family not in FAMILIES:
        raise ValueError(f"unknown family {spec.family!r} for {spec.id}")
    old = REGISTRY.get(spec.id)
    if old is not None and old.func is not spec.func and old.origin == spec.origin:
        # Re-import of the same module (e.g. importlib.reload in tests) is fine; a clash is not.
        if getattr(old.func, "__qualname__", None) != getattr(spec.func, "__qualname__", None):
            raise ValueError(f"duplicate check id {spec.id}: {old.slug} and {spec.slug}")
    REGISTRY[spec.id] = spec
    _SLUGS[spec.slug] = spec.id
    return spec


def check(id: str, slug: str, *, family: str, when: Iterable[str] = ("static",), needs: Sequence[str] = (),
          reads: Sequence[str] = (), catalogue: Sequence[str] = (), kind: str = "check", **extra) -> Callable:
    """Register a check. The function takes a snapshot and yields `Finding`s (or returns a list).

    when:  the moments it runs (WHEN): "static" (default), "fork", "step"; lint rules use "lint",
           triage rules (ddpdoctor.triage.rules) "triage"; "run": the verdicts of `ddpdoctor run`
           over its `run` section.
    needs: snapshot sections it cannot run without (skipped, with the reason, when one is missing).
    reads: sections it reads when present (enrichment only).
    """
    moments = frozenset(when)
    unknown = moments - set(WHEN)
    if unknown:
        raise ValueError(f"check {id}: unknown when={sorted(unknown)}; use some of {WHEN}")

    def decorate(func: Callable) -> Callable:
        register(Spec(id=id, slug=slug, family=family, func=func, needs=tuple(needs),
                      catalogue=tuple(catalogue), kind=kind, when=moments, reads=tuple(reads),
                      doc=func.__doc__ or "", origin=getattr(func, "__module__", "ddpdoctor").split(".")[0],
                      extra=extra))
        return func

    return decorate


def internal(id: str, slug: str, doc: str, family: str = "internal") -> Spec:
    """Register a finding the runner itself raises (a crashed check, a failed gatherer)."""
    return register(Spec(id=id, slug=slug, family=family, kind="internal", doc=doc))


def selected(kind: str, only: Optional[set] = None, ignore: Optional[set] = None) -> List[Spec]:
    """The registered specs of one kind ("rule", "log", ...) that --only/--ignore leave, sorted by ID:
    the one place a command's selection is applied, so lint and triage read the flags the same way."""
    return sorted((s for s in REGISTRY.values() if s.kind == kind and s.func is not None
                   and (only is None or s.id in only) and not (ignore and s.id in ignore)), key=lambda s: s.id)


def resolve(name: str) -> Optional[Spec]:
    """Find a spec by ID (any case), slug, or catalogue ID when that names exactly one check."""
    if name.upper() in REGISTRY:
        return REGISTRY[name.upper()]
    if name.lower() in _SLUGS:
        return REGISTRY[_SLUGS[name.lower()]]
    return None


def resolve_many(names: Iterable[str]) -> set:
    """IDs for --only/--ignore. Catalogue IDs (A4) select every check that cites them.

    Raises KeyError naming the first unknown entry, with a did-you-mean.
    """
    out: set = set()
    for raw in names:
        name = raw.strip()
        if not name:
            continue
        spec = resolve(name)
        if spec:
            out.add(spec.id)
            continue
        cited = {s.id for s in REGISTRY.values() if name.upper() in (c.upper() for c in s.catalogue)}
        if cited:
            out |= cited
            continue
        if name.lower() in FAMILIES:
            out |= {s.id for s in REGISTRY.values() if s.family == name.lower()}
            continue
        raise KeyError(unknown_message(name))
    return out


def unknown_message(name: str) -> str:
    import difflib

    pool = list(REGISTRY) + list(_SLUGS)
    close = difflib.get_close_matches(name, pool, n=1) or difflib.get_close_matches(name.upper(), pool, n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return f"unknown check {name!r}{hint}; `ddpdoctor checks` lists them"
