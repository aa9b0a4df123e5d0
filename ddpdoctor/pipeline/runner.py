"""The one check runner: loads the built-in checks and plugins, runs the selected ones over a
snapshot, stamps IDs onto their findings, skips checks whose sections are missing (with the
reason), and turns a crashing check into one internal finding (`crashed_finding`) so that one bad
check never hides the others.
"""
from __future__ import annotations

import importlib
import json
import os
import pkgutil
import sys
import traceback
from typing import Callable, Iterable, Optional

from ddpdoctor.checks.doc import CHECK_CRASHED, GATHER_FAILED, PLUGIN_FAILED
from ddpdoctor.model import Finding, Skipped, WARNING
from ddpdoctor.model.registry import PLUGIN_GROUP, REGISTRY, Spec

_loaded = False
_plugins_loaded = False
_builtins = False
PLUGIN_ERRORS: list = []  # (entry point name, error text)


def _import_package_modules(package: str) -> None:
    """Import every public module of `package` and of its sub-packages (family folders)."""
    pkg = importlib.import_module(package)
    for mod in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if not mod.name.startswith("_"):
            importlib.import_module(f"{package}.{mod.name}")
            if mod.ispkg:
                _import_package_modules(f"{package}.{mod.name}")


def load_all(plugins: bool = True) -> dict:
    """Import the built-in checks (every module of ddpdoctor.checks) and, once, the plugins."""
    global _loaded
    _import_package_modules("ddpdoctor.checks")
    if plugins and not _loaded:
        load_plugins()
    _loaded = True
    return REGISTRY


def load_plugins() -> None:
    """The plugins, once, without the built-in checks: `ddpdoctor lint` with no --only/--ignore runs lint rules
    only (a plugin may register some), so it does not import every machine check (~120 M instructions)."""
    global _plugins_loaded
    if not _plugins_loaded and not _loaded:
        _plugins_loaded = True
        _load_plugins()


def ids_for(when: str) -> set:
    """IDs of the built-in (and already loaded plugin) checks that declare they run at `when`:
    what the fork guard ("fork") and DoctorCallback ("step") run."""
    global _builtins
    if not _builtins:  # cheap on the fork guard's path: import the built-ins once
        _import_package_modules("ddpdoctor.checks")
        _builtins = True
    return {s.id for s in REGISTRY.values() if s.kind == "check" and when in s.when}


def load_lint_rules() -> None:
    """Lint rules live in their own package; explain/checks list them too."""
    try:
        _import_package_modules("ddpdoctor.lint.rules")
    except ModuleNotFoundError:
        pass


def load_triage_rules() -> None:
    """Log triage rules (`ddpdoctor triage`) live in their own package; explain/checks list them too."""
    try:
        _import_package_modules("ddpdoctor.triage.rules")
    except ModuleNotFoundError:
        pass


def _load_plugins() -> None:
    try:
        entries = plugin_entries()
    except Exception as exc:  # a broken metadata directory must not stop the doctor
        PLUGIN_ERRORS.append(("<entry points>", f"{type(exc).__name__}: {exc}"))
        return
    for name, value in entries:
        try:
            _load_entry(value)  # importing the module registers its checks through @check
        except BaseException as exc:  # noqa: BLE001 - a plugin may even call sys.exit
            if isinstance(exc, KeyboardInterrupt):
                raise
            PLUGIN_ERRORS.append((name, f"{type(exc).__name__}: {exc}"))


def _load_entry(value: str) -> object:
    """What importlib.metadata.EntryPoint.load does with `module:attr.attr [extras]`, without importing
    importlib.metadata (the cached path below never needs it)."""
    module, _, attr = value.partition("[")[0].partition(":")
    obj = importlib.import_module(module.strip())
    for part in filter(None, attr.strip().split(".")):
        obj = getattr(obj, part)
    return obj


_CACHE_VERSION = 1
_CACHE_KEYS = 8


def _plugin_cache_file() -> str:
    from ddpdoctor.recache import cache_dir  # $DDPDOCTOR_CACHE_DIR, else $XDG_CACHE_HOME/ddpdoctor, else ~/.cache/..

    return os.path.join(cache_dir(), f"plugins-{sys.implementation.cache_tag or 'none'}.json")


def _path_key() -> list:
    """What the installed distributions' entry points depend on: every sys.path entry and its folder's mtime (a
    distribution installed or removed adds or deletes its *.dist-info folder there, which changes the mtime)."""
    key: list = [sys.version, PLUGIN_GROUP]
    for entry in sys.path:
        try:
            key.append([entry or os.getcwd(), os.stat(entry or ".").st_mtime_ns])
        except (OSError, ValueError, TypeError):
            key.append([entry, None])
    return key


def plugin_entries() -> list:
    """[(name, 'module:attr')] of the `ddpdoctor.checks` entry points. Scanning them (importlib.metadata over every
    installed distribution) cost ~112 M instructions per `ddpdoctor lint` (perf16b), so the answer is kept in
    the user's cache folder (recache.cache_dir: $XDG_CACHE_HOME/ddpdoctor, ~/.cache/ddpdoctor), keyed on sys.path and the mtimes of its folders:
    a new sys.path, or a distribution installed or removed in one of its folders, scans again. A cache that cannot
    be read or written is only a slower start. Known gap: a plugin's entry_points.txt edited in place (not
    reinstalled) is seen once its folder's mtime changes; DDPDOCTOR_NO_PLUGIN_CACHE=1 always scans."""
    use_cache = os.environ.get("DDPDOCTOR_NO_PLUGIN_CACHE", "") in ("", "0")
    key = json.dumps(_path_key())
    path = _plugin_cache_file()
    held: dict = {}
    if use_cache:
        try:
            with open(path, encoding="utf-8") as fh:
                got = json.load(fh)
            if got.get("version") == _CACHE_VERSION and isinstance(got.get("entries"), dict):
                held = got["entries"]
            if key in held:
                return [(str(n), str(v)) for n, v in held[key]]
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            held = {}
    from importlib.metadata import entry_points

    eps = entry_points()
    group = eps.select(group=PLUGIN_GROUP) if hasattr(eps, "select") else eps.get(PLUGIN_GROUP, [])
    entries = [(ep.name, ep.value) for ep in group]
    if use_cache:
        # a few keys (one per sys.path: `python -m` from another folder has another first entry), newest last
        held = {k: v for k, v in list(held.items())[-(_CACHE_KEYS - 1):] if k != key}
        held[key] = entries
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump({"version": _CACHE_VERSION, "entries": held}, fh)
            os.replace(tmp, path)
        except OSError:
            pass
    return entries


def _selected(specs: Iterable[Spec], only: Optional[set], ignore: Optional[set]) -> list:
    out = []
    for spec in specs:
        if only is not None and spec.id not in only:
            continue
        if ignore and spec.id in ignore:
            continue
        out.append(spec)
    return out


def crashed_finding(title: str, *, family: str, detail: str, fix: str, subjects: Iterable[str] = (),
                    evidence: Optional[dict] = None, spec: Spec = CHECK_CRASHED, limit: int = -3) -> Finding:
    """The one way ddpdoctor turns its own exception into a finding: a warning carrying the
    traceback (call it inside the `except`), stamped DOC001 check-crashed unless `spec` says
    otherwise (preflight's internal failure is DOC002)."""
    ev = dict(evidence or {})
    ev["traceback"] = traceback.format_exc(limit=limit)
    return Finding(WARNING, title, detail=detail, fix=fix, subjects=tuple(subjects) if not isinstance(subjects, list)
                   else subjects, evidence=ev).stamped(spec.id, spec.slug, family)


def _check_crashed(spec: Spec, exc: Exception) -> Finding:
    return crashed_finding(
        f"check {spec.id} ({spec.slug}) crashed: {type(exc).__name__}: {exc}", family=spec.family,
        detail="This is a bug in the check, not a problem with your set-up. The other checks still ran.",
        fix="Report it at the ddpdoctor issue tracker with `ddpdoctor check --format markdown` attached.",
        evidence={"check": spec.id})


def run_checks(subject, only: Optional[set] = None, ignore: Optional[set] = None,
               specs: Optional[Iterable[Spec]] = None, *, when: str = "static",
               keep: Optional[Callable[[Spec, Finding], bool]] = None,
               crashed: Optional[Callable[[Spec, Exception], Finding]] = None) -> tuple:
    """The one runner, for every kind of check. Returns (findings, skipped, number_run).

    when: "static", "fork" or "step" run the snapshot checks that declare that moment over
        `subject`, a `ddpdoctor.pipeline.snapshot.Snapshot` (sections are gathered lazily on first
        use, so a check that is filtered out or skipped never pays for its facts); then failed
        gatherers and plugins are reported once each. "lint" runs the lint rules over `subject`,
        a parsed script (`ddpdoctor.lint.engine.Target`); "triage" the log rules over a
        reconstructed job (`ddpdoctor.triage.job.Job`).
    keep: drops a finding (lint suppression comments). crashed: the finding for a crash
        (default: DOC001 naming the check).
    """
    kind = {"lint": "rule", "triage": "log"}.get(when, "check")
    pool = specs if specs is not None else REGISTRY.values()
    specs = [s for s in pool if s.kind == kind and (kind != "check" or when in s.when)]
    findings: list = []
    skipped: list = []
    ran = 0
    for spec in sorted(_selected(specs, only, ignore), key=lambda s: s.id):
        reason = subject.missing_reason(spec.needs) if spec.needs or kind == "check" else None
        if reason:
            section = next((n for n in spec.needs if subject.missing_reason((n,))), "")
            skipped.append(Skipped(spec.id, reason, spec.family, section))
            continue
        ran += 1
        try:
            produced = spec.func(subject) or ()
            for f in produced:
                if not isinstance(f, Finding):
                    raise TypeError(f"check yielded {type(f).__name__}, not Finding")
                if keep is None or keep(spec, f):
                    findings.append(f.stamped(spec.id, spec.slug, spec.family))
        except Exception as exc:  # noqa: BLE001 - a crashing check becomes a finding
            findings.append((crashed or _check_crashed)(spec, exc))
    if kind == "check":
        findings.extend(internal_findings(subject, only, ignore))
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
