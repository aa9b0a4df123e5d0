"""The check registry: a dict and a decorator, plus one entry-point group for plugins.

A check is a pure function `snapshot -> iterable of Finding`. The decorator records its stable ID,
slug, family and the snapshot sections it needs; its docstring is its documentation
(`ddpdoctor explain ID`). The runner stamps IDs onto findings, skips checks whose sections are
missing or unavailable (with the reason), and turns a crashing check into an internal finding so
that one bad check never hides the others.
"""
from __future__ import annotations

import importlib
import pkgutil
import re
import traceback
from dataclasses import dataclass, field
from typing import Callable, Iterable, Optional, Sequence

from .model import Finding, Skipped, WARNING

DOC_HEADINGS = ("What it checks", "Why it matters", "Example", "Fix")
PLUGIN_GROUP = "ddpdoctor.checks"

# Families in display order, with the label shown in text output.
FAMILIES: dict = {
    "launcher": "Launcher and rank environment",
    "system": "Host: CPU, memory, /dev/shm, limits",
    "network": "Network interfaces and rendezvous address",
    "nccl": "NCCL / Gloo settings",
    "gpu": "GPUs and topology",
    "tokenizers": "Tokenizers",
    "dataloader": "DataLoader and datasets",
    "trainer": "Trainer and DDP",
    "comm": "Connectivity test",
    "probe": "Instrumented training run",
    "run": "The job under `ddpdoctor run`",
    "lint": "Training script (static)",
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
    catalogue: Sequence[str] = ()  # IDs in shared/faults.md, e.g. ("A4",)
    kind: str = "check"  # "check" (snapshot), "rule" (lint), "internal"
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


def check(id: str, slug: str, *, family: str, needs: Sequence[str] = (), catalogue: Sequence[str] = (),
          kind: str = "check", **extra) -> Callable:
    """Register a check. The function takes a snapshot and yields `Finding`s (or returns a list)."""

    def decorate(func: Callable) -> Callable:
        register(Spec(id=id, slug=slug, family=family, func=func, needs=tuple(needs),
                      catalogue=tuple(catalogue), kind=kind, doc=func.__doc__ or "",
                      origin=getattr(func, "__module__", "ddpdoctor").split(".")[0], extra=extra))
        return func

    return decorate


def internal(id: str, slug: str, doc: str, family: str = "internal") -> Spec:
    """Register a finding the runner itself raises (a crashed check, a failed gatherer)."""
    return register(Spec(id=id, slug=slug, family=family, kind="internal", doc=doc))


# ---------------------------------------------------------------- loading

_loaded = False
PLUGIN_ERRORS: list = []  # (entry point name, error text)


def _import_package_modules(package: str) -> None:
    pkg = importlib.import_module(package)
    for mod in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if not mod.name.startswith("_"):
            importlib.import_module(f"{package}.{mod.name}")


def load_all(plugins: bool = True) -> dict:
    """Import the built-in checks (every module of ddpdoctor.checks) and, once, the plugins."""
    global _loaded
    _import_package_modules("ddpdoctor.checks")
    if plugins and not _loaded:
        _load_plugins()
    _loaded = True
    return REGISTRY


def load_lint_rules() -> None:
    """Lint rules live in their own package; explain/checks list them too."""
    try:
        _import_package_modules("ddpdoctor.lint.rules")
    except ModuleNotFoundError:
        pass


def _load_plugins() -> None:
    try:
        from importlib.metadata import entry_points

        eps = entry_points()
        group = eps.select(group=PLUGIN_GROUP) if hasattr(eps, "select") else eps.get(PLUGIN_GROUP, [])
    except Exception as exc:  # a broken metadata directory must not stop the doctor
        PLUGIN_ERRORS.append(("<entry points>", f"{type(exc).__name__}: {exc}"))
        return
    for ep in group:
        try:
            ep.load()  # importing the module registers its checks through @check
        except BaseException as exc:  # noqa: BLE001 - a plugin may even call sys.exit
            if isinstance(exc, KeyboardInterrupt):
                raise
            PLUGIN_ERRORS.append((ep.name, f"{type(exc).__name__}: {exc}"))


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


# ---------------------------------------------------------------- running

CHECK_CRASHED = internal("DOC001", "check-crashed", """A ddpdoctor check raised an exception instead of returning findings.

What it checks
    Nothing on your machine: this is ddpdoctor reporting a bug in one of its own checks (or a plugin's).

Why it matters
    The other checks still ran, but this one gave no verdict, so a problem it covers may be hidden.

Example
    A plugin check indexes a snapshot section that a recorded snapshot lacks.

Fix
    Report it with the output of `ddpdoctor check --format markdown`, which includes the traceback.
""")

GATHER_FAILED = internal("DOC002", "gatherer-failed", """A fact gatherer failed, so the checks that need its facts were skipped.

What it checks
    Whether every snapshot section ddpdoctor tried to read could be read.

Why it matters
    Checks that depend on the missing facts are skipped, and say so; they did not pass.

Example
    /proc is not mounted in a sandbox, so the host section cannot read the cgroup CPU quota.

Fix
    Read the error in the evidence; if it is a ddpdoctor bug, report it with `ddpdoctor snapshot -o snap.json`.
""")

PLUGIN_FAILED = internal("DOC003", "plugin-failed", """A third-party check plugin could not be loaded.

What it checks
    Every entry point in the `ddpdoctor.checks` group imports cleanly.

Why it matters
    The plugin's checks did not run. Built-in checks are unaffected.

Example
    A plugin was written for an older ddpdoctor and imports a name that no longer exists.

Fix
    Upgrade or uninstall the plugin: `pip install -U <plugin>` or `pip uninstall <plugin>`.
""")


def _selected(specs: Iterable[Spec], only: Optional[set], ignore: Optional[set]) -> list:
    out = []
    for spec in specs:
        if only is not None and spec.id not in only:
            continue
        if ignore and spec.id in ignore:
            continue
        out.append(spec)
    return out


def run_checks(snapshot, only: Optional[set] = None, ignore: Optional[set] = None,
               specs: Optional[Iterable[Spec]] = None) -> tuple:
    """Run the selected snapshot checks. Returns (findings, skipped, number_run).

    `snapshot` is a `ddpdoctor.snapshot.Snapshot`; sections are gathered lazily on first use, so a
    check that is filtered out or skipped never pays for its facts.
    """
    specs = [s for s in (specs if specs is not None else REGISTRY.values()) if s.kind == "check"]
    findings: list = []
    skipped: list = []
    ran = 0
    for spec in sorted(_selected(specs, only, ignore), key=lambda s: s.id):
        reason = snapshot.missing_reason(spec.needs)
        if reason:
            skipped.append(Skipped(spec.id, reason, spec.family))
            continue
        ran += 1
        try:
            produced = spec.func(snapshot) or ()
            for f in produced:
                if not isinstance(f, Finding):
                    raise TypeError(f"check yielded {type(f).__name__}, not Finding")
                findings.append(f.stamped(spec.id, spec.slug, spec.family))
        except Exception as exc:  # noqa: BLE001 - a crashing check becomes a finding
            tb = traceback.format_exc(limit=-3)
            findings.append(Finding(
                WARNING, f"check {spec.id} ({spec.slug}) crashed: {type(exc).__name__}: {exc}",
                detail="This is a bug in the check, not a problem with your set-up. The other checks still ran.",
                fix="Report it at the ddpdoctor issue tracker with `ddpdoctor check --format markdown` attached.",
                subjects=(), evidence={"check": spec.id, "traceback": tb},
            ).stamped(CHECK_CRASHED.id, CHECK_CRASHED.slug, spec.family))
    findings.extend(internal_findings(snapshot, only, ignore))
    return findings, skipped, ran


def internal_findings(snapshot, only: Optional[set] = None, ignore: Optional[set] = None) -> list:
    """Failed gatherers and failed plugins, reported once each."""
    out = []
    if not (ignore and GATHER_FAILED.id in ignore) and (only is None or GATHER_FAILED.id in only):
        for name, err in snapshot.errors().items():
            out.append(Finding(
                WARNING, f"could not gather the '{name}' facts: {err}",
                detail="Checks that need these facts were skipped; they did not pass.",
                fix="ddpdoctor snapshot -o snapshot.json  # attach it to a bug report if this looks wrong",
                subjects=(), evidence={"section": name, "error": err},
            ).stamped(GATHER_FAILED.id, GATHER_FAILED.slug, "internal"))
    if not (ignore and PLUGIN_FAILED.id in ignore) and (only is None or PLUGIN_FAILED.id in only):
        for name, err in PLUGIN_ERRORS:
            out.append(Finding(
                WARNING, f"check plugin '{name}' failed to load: {err}",
                detail="Its checks did not run. The built-in checks are unaffected.",
                fix=f"pip install -U {name}  # or uninstall it",
                subjects=(f"pkg:{name}",), evidence={"entry_point": name, "error": err},
            ).stamped(PLUGIN_FAILED.id, PLUGIN_FAILED.slug, "internal"))
    return out
