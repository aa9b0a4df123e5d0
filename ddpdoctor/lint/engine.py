"""Run the lint rules over files: read, index once, call each rule, honour `# ddpdoctor: ignore[...]`.

A rule is a registry spec with `kind="rule"`; its function takes a `Target` (the indexed file plus
helpers to build findings) and yields `Finding`s. A rule that raises becomes one internal finding
for that file, like a crashing check, and the other rules still run.
"""
from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import gc
import json
import os
import re
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from ddpdoctor.model import ERROR, INFO, WARNING, Finding
from ddpdoctor.model.registry import REGISTRY, Spec, selected
from ddpdoctor.pipeline.runner import crashed_finding, load_lint_rules, run_checks
from ddpdoctor.lint.analysis import ModuleIndex
from ddpdoctor.lint.names import absolute_module  # noqa: F401  (re-exported: spelled here before)
from ddpdoctor.lint.facts import ProjectFacts, role
from ddpdoctor.lint.source import InputProblem, Script, read

# Top-level names that are libraries, never the user's own modules: not looked up on disk.
_NOT_PROJECT = {"torch", "transformers", "accelerate", "datasets", "tokenizers", "h5py", "numpy", "os", "sys",
                "multiprocessing", "functools", "trl", "deepspeed", "lightning", "pytorch_lightning", "peft"}

_IGNORE = re.compile(r"#\s*ddpdoctor\s*:\s*(?:ignore|disable|noqa)\b(?:\[([^\]]*)\])?", re.IGNORECASE)
_NEWLINES = re.compile(r"\r\n|\r|\n")
MAX_SPAN = 20  # an ignore comment counts on any line of a statement spanning up to this many lines


class Target:
    """One parsed file as the rules see it."""

    def __init__(self, script: Script, real_path: Optional[str] = None, project: Any = None):
        self.path = script.path
        self.real_path = real_path or script.path
        self.text = script.text
        self.lines = _NEWLINES.split(script.text)
        known = project.indexes.get(self.real_path) if project is not None else None
        self.index = known if known is not None else ModuleIndex(script.tree, script.path, script.text)
        self.project = project  # lint.project.Project: the files of this run, indexed together
        self.facts = project.facts if project is not None else ProjectFacts({self.real_path: self.index})
        self.context = self.facts.context  # launch lines, pins (lint.launchinfo.ProjectContext) or None
        self.role = role(self.real_path, self.index)  # 'test' for test modules
        self._siblings: Dict[str, Optional[ModuleIndex]] = {}

    def release(self) -> None:
        """Free the indexes this target made itself (its own, when no project lent one, and its siblings'): see
        ModuleIndex.release. A project's indexes belong to the project and outlive the target."""
        project_owned = {id(ix) for ix in self.project.indexes.values()} if self.project is not None else set()
        for ix in [self.index, *self._siblings.values()]:
            if ix is not None and id(ix) not in project_owned:
                ix.release()
        self._siblings.clear()

    def sibling(self, module: str) -> Optional[Tuple[str, ModuleIndex]]:
        """The index of a module of the user's own project that this file imports (`from train_lib
        import worker`), found next to this file or in a parent folder, parsed but never imported.
        One hop only: the sibling's own imports are not followed."""
        if module in self._siblings:
            found = self._siblings[module]
            return (found.path, found) if found is not None else None
        self._siblings[module] = None
        if not module or module.split(".")[0].lstrip(".") in _NOT_PROJECT:
            return None
        rel = module.lstrip(".").replace(".", os.sep)
        if self.project is not None and rel:  # a module linted in the same run: already indexed
            for path, index in self.project.indexes.items():
                norm = os.path.splitext(os.path.normpath(os.path.abspath(path)))[0]
                if norm.endswith(os.sep + rel) or norm.endswith(os.sep + rel + os.sep + "__init__"):
                    self._siblings[module] = index
                    return index.path, index
        here = os.path.dirname(os.path.abspath(self.real_path)) if os.path.exists(self.real_path) else None
        if here is None or not rel:
            return None
        bases = [here] if module.startswith(".") else [here, os.path.dirname(here), os.path.dirname(os.path.dirname(here))]
        for base in bases:
            for cand in (os.path.join(base, rel + ".py"), os.path.join(base, rel, "__init__.py")):
                if os.path.isfile(cand):
                    script = read(cand)
                    # Show it the way the user named this file: relative paths stay relative.
                    script.path = os.path.normpath(os.path.join(os.path.dirname(self.path),
                                                                os.path.relpath(cand, here)))
                    if isinstance(script, Script):
                        try:
                            self._siblings[module] = ModuleIndex(script.tree, script.path, script.text)
                        except (RecursionError, MemoryError):
                            return None
                        return script.path, self._siblings[module]
                    return None
        return None

    def project_class(self, qual: str) -> Optional[Tuple[ModuleIndex, Any]]:
        """(index, class scope) of a class of the user's project, named as this file imports it
        (`nets.TinyMLP`), following a package's re-exports (`from .mlp import TinyMLP` in
        nets/__init__.py) a few hops. None when the module or the class is not found."""
        return self._project_def(qual, "classes", 0)

    def project_function(self, qual: str) -> Optional[Tuple[ModuleIndex, Any]]:
        """(index, function scope) of a module-level function of the user's project (`datasets.builder.
        build_loader`), found like `project_class`."""
        return self._project_def(qual, "functions", 0)

    def _project_def(self, qual: str, kind: str, depth: int) -> Optional[Tuple[ModuleIndex, Any]]:
        if not qual or "." not in qual.lstrip(".") or depth > 3:
            return None
        module, name = qual.rsplit(".", 1)
        near = self.sibling(module)
        if near is None:
            return None
        index = near[1]
        found = getattr(index.module, kind).get(name)
        if found is not None:
            return index, found
        target = index.module.imports.get(name)
        if not target:
            return None
        return self._project_def(absolute_module(module, near[0], target), kind, depth + 1)

    def col(self, node: ast.AST) -> int:
        """1-based character column (ast gives a 0-based UTF-8 byte offset)."""
        line = getattr(node, "lineno", 1)
        offset = getattr(node, "col_offset", 0) or 0
        if 0 < line <= len(self.lines):
            text = self.lines[line - 1]
            if not text.isascii():
                return len(text.encode("utf-8")[:offset].decode("utf-8", "replace")) + 1
        return offset + 1

    def finding(self, severity: str, node: Any, title: str, *, detail: str = "", fix: str = "",
                evidence: Optional[Dict[str, Any]] = None, subjects: Sequence[str] = ()) -> Finding:
        """A finding at `node` (an ast node or a line number) with the line and path subjects."""
        if isinstance(node, int):
            line, col, end = node, 1, node
        else:
            line = getattr(node, "lineno", 1)
            col = self.col(node)
            end = getattr(node, "end_lineno", None) or line
        ev = {"path": self.path, "line": line, "col": col}
        if end != line:
            ev["end_line"] = end
        ev.update(evidence or {})
        return Finding(severity, f"{self.path}:{line}: {title}", detail=detail, fix=fix,
                       subjects=[f"line:{line}", f"path:{self.path}", *subjects], evidence=ev)


def suppressions(text: str) -> Dict[int, Optional[set]]:
    """Line -> set of lower-cased tokens ignored there (None: everything)."""
    out: Dict[int, Optional[set]] = {}
    if "ddpdoctor" not in text:
        return out
    for no, line in enumerate(_NEWLINES.split(text), 1):
        if "ddpdoctor" not in line:
            continue
        m = _IGNORE.search(line)
        if not m:
            continue
        if m.group(1) is None or not m.group(1).strip():
            out[no] = None
        else:
            out[no] = {t.strip().lower() for t in m.group(1).split(",") if t.strip()}
    return out


def is_suppressed(finding: Finding, spec: Spec, table: Dict[int, Optional[set]]) -> bool:
    if not table:
        return False
    line = finding.evidence.get("line") or 0
    end = finding.evidence.get("end_line") or line
    if end - line > MAX_SPAN:
        end = line
    names = {spec.id.lower(), spec.slug.lower(), *(c.lower() for c in spec.catalogue)}
    for no in range(line, end + 1):
        if no in table:
            tokens = table[no]
            if tokens is None or tokens & names:
                return True
    return False


def rule_specs(only: Optional[set] = None, ignore: Optional[set] = None) -> List[Spec]:
    load_lint_rules()
    return selected("rule", only, ignore)


@contextlib.contextmanager
def gc_paused():
    """Parsing and indexing allocate hundreds of thousands of small acyclic objects; the cyclic
    collector would rescan them again and again (measured: it nearly doubles the time of a
    5,000-line file). Pause it for one file and restore the caller's setting."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def lint_script(script: Script, specs: Iterable[Spec], real_path: Optional[str] = None,
                project: Any = None, preview=True) -> List[Finding]:
    """All findings of the selected rules for one parsed file, suppressions applied."""
    try:
        target = Target(script, real_path, project)
    except (RecursionError, MemoryError):
        return [problem_finding(InputProblem(script.path, "too-complex", "too deeply nested to analyse; not linted"))]
    except Exception as exc:  # noqa: BLE001 - a bug in the index must cost one file, not the run
        return [crashed_finding(
            f"{script.path}: ddpdoctor could not analyse this file: {type(exc).__name__}: {exc}", family="lint",
            detail="This is a bug in ddpdoctor, not in your script. The other files were still linted.",
            fix="Report it with the script (or a reduced copy) attached.",
            subjects=[f"path:{script.path}"], evidence={"path": script.path})]
    table = suppressions(script.text)

    def rule_crashed(spec: Spec, exc: Exception) -> Finding:  # one broken rule must not hide the others
        return crashed_finding(
            f"{script.path}: lint rule {spec.id} ({spec.slug}) crashed: {type(exc).__name__}: {exc}", family="lint",
            detail="This is a bug in ddpdoctor, not in your script. The other rules still ran.",
            fix="Report it with the script (or a reduced copy) attached.",
            subjects=[f"path:{script.path}"], evidence={"path": script.path, "rule": spec.id})

    rules = [s for s in specs if not s.extra.get("input_rule")]
    try:
        out, _skipped, _ran = run_checks(target, specs=rules, when="lint", crashed=rule_crashed,
                                         keep=lambda spec, f: not is_suppressed(f, spec, table))
        tests = _test_function_spans(target) if target.role != "test" and out else []
        return [earned_severity(f, preview, _role_at(f, target.role, tests)) for f in out]
    finally:
        target.release()


_TEST_FUNCTION = re.compile(r"^test_|_test$")


def _test_function_spans(target) -> List[tuple]:
    """(first, last line) of the functions named as tests (`test_*`, pytest's default collection pattern, and the
    `*_test` spelling of self-test helpers such as uutils' `hello_world_test`) in a module that is not itself a test
    module: a harness there spawns its ranks, saves and loads on purpose, as one in tests/ does. A bare `test` is
    not one: pytest collects `test*` functions only from test modules (python_files test_*.py / *_test.py, which
    are demoted whole), and outside them `test()` is often the module's entry point (mini-AlphaStar's run.py
    calls `sl_multi_gpu_by_tensor.test(on_server=...)`, fr42)."""
    out = []
    stack = [target.index.module]
    while stack:
        sc = stack.pop()
        for fn in list(sc.functions.values()) + list(sc.classes.values()):
            stack.append(fn)
            if fn.kind == "function" and _TEST_FUNCTION.search(fn.name) and fn.node is not None:
                out.append((fn.node.lineno, getattr(fn.node, "end_lineno", None) or fn.node.lineno))
    return out


def _role_at(f: Finding, role: str, tests: List[tuple]) -> str:
    line = (f.evidence or {}).get("line") if isinstance(f.evidence, dict) else None
    if role != "test" and isinstance(line, int) and any(a <= line <= b for a, b in tests):
        return "test"
    return role


SEVERITY_FILE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "lint_severity.json")


@functools.lru_cache(maxsize=1)
def measured() -> Dict[str, dict]:
    """Each rule's first-read precision on fresh batches of real scripts (ddpdoctor/data/lint_severity.json,
    written by `python benchmarks/lint_precision.py DIR --write-severity` from benchmarks/lint_corpus.json)."""
    try:
        with open(SEVERITY_FILE, encoding="utf-8") as fh:
            return json.load(fh).get("rules", {})
    except (OSError, ValueError):
        return {}


PREVIEW = "preview"  # `preview=PREVIEW` is `ddpdoctor lint --preview`; `preview=True` (the library's default) is
# every rule at its own severity, what a first read counts


def earned(rule_id: str) -> bool:
    """A rule warns by default only when its first-read precision over >= 20 judged findings is >= 90%."""
    m = measured().get(rule_id) or {}
    return bool(m.get("earned"))


def earns(rule_id: str) -> str:
    """What the rule's first-read figures earn (ddpdoctor/data/lint_severity.json, benchmarks/lint_precision.earns):
    "warning" (its own severity), "preview" (too few judged: a note by default, its own severity under --preview)
    or "note" (measured below the bar: a note by default, its own severity under --preview). A rule never judged is
    "preview"."""
    m = measured().get(rule_id) or {}
    return m.get("earns") or ("warning" if m.get("earned") else "preview")


_SHAPE_STEPS = (
    (re.compile(r"^\S+?\.py:\d+: "), ""),  # the place the title starts with
    (re.compile(r"`[^`]*`"), "`X`"),  # names and code quoted from the script
    (re.compile(r"'[^']*'"), "'X'"),
    (re.compile(r'"[^"]*"'), '"X"'),
    (re.compile(r"(?<![\w.])[A-Za-z_][\w.]*\.(?=\w+\(\))"), ""),  # the receiver of a method call: `m.save_pretrained()`
    (re.compile(r"\d+"), "N"),
)


def shape_of(f) -> str:
    """The shape of a finding: what its rule fired on, the condition its title names with the script's own names,
    numbers and receivers taken out (`torch.save runs on every rank`, `open(..., 'X') runs on every rank`,
    `DataLoader(num_workers>N) runs at import time without an `X` guard`): the title up to its first `:` or `;`.
    The first-read precision of a rule is also measured per shape (benchmarks/lint_precision.py `shape_table`,
    tools/lint_shapes.py), so that a shape measured below the bar can be a note while the rule's other shapes warn.
    Takes a Finding or its title."""
    t = f if isinstance(f, str) else f.title
    for rx, repl in _SHAPE_STEPS:
        t = rx.sub(repl, t)
    return re.split(r"[:;]", t, 1)[0].strip()[:90]


@functools.lru_cache(maxsize=1)
def measured_shapes() -> Dict[str, Dict[str, dict]]:
    """{rule: {shape: figures}} of ddpdoctor/data/lint_severity.json: the shapes measured below the bar."""
    try:
        with open(SEVERITY_FILE, encoding="utf-8") as fh:
            return json.load(fh).get("shapes", {})
    except (OSError, ValueError):
        return {}


def earned_severity(f: Finding, preview, role: str = "code") -> Finding:
    """The severity a finding is shown with. `preview` is False (what `ddpdoctor lint` shows), PREVIEW (`--preview`)
    or True (every rule at its own severity: the library's default and what a first read counts).
    A warning of a rule that has not earned it (see `earns`) is a note by default; --preview shows it as a warning.
    A warning whose shape (`shape_of`) was measured below the bar at first read (lint_severity.json "shapes") is a
    note at every level but --preview, the library's own severity included. Errors stay errors
    while no first-read batch has judged one of the rule's errors other than right; after that they follow the
    warnings' rule. In a test module everything is a note: a test harness spawns, saves and loads on purpose."""
    if f.severity not in (WARNING, ERROR):
        return f
    if role == "test":
        return dataclasses.replace(f, severity="info", evidence=dict(f.evidence, demoted="test module or test function"))
    m = measured().get(f.id) or {}
    if not f.id.startswith("LINT") or f.id in ("LINT090", "LINT091"):
        return f
    shape = (measured_shapes().get(f.id) or {}).get(shape_of(f)) if f.severity == WARNING else None
    if shape and preview != PREVIEW:
        # a shape of the rule measured below the bar at first read: its own severity is a note (also for the
        # library, whose findings a first read counts); --preview shows it as a warning
        return dataclasses.replace(f, severity="info", evidence=dict(
            f.evidence, preview=(f"{f.id} reports this shape ({shape_of(f)}) as a note: measured at first read below "
                                 f"the bar (>= 90%; {shape.get('tp', 0)} right of {shape.get('judged', 0)} judged); "
                                 "--preview shows it as a warning"), preview_severity=f.severity))
    if preview is True:
        return f
    level = earns(f.id)
    if f.severity == ERROR and not m.get("false_errors"):
        return f  # a crash or hang certain by construction, and no first-read batch found a false one
    if level == "warning" or preview == PREVIEW:
        return f
    figures = (f"so far {m.get('tp', 0)} right of {m.get('judged', 0)} judged"
               + (f", {m['false_errors']} false error(s)" if m.get("false_errors") else ""))
    if level == "note":
        why = (f"{f.id} reports notes: measured at first read below the bar (>= 90% over >= 20 findings; {figures}); "
               f"--preview shows it as {'an error' if f.severity == ERROR else 'a warning'}")
    else:
        why = (f"{f.id} reports notes until its warnings are measured right at first read (>= 90% over >= 20 "
               f"findings; {figures}); --preview shows it as {'an error' if f.severity == ERROR else 'a warning'}")
    return dataclasses.replace(f, severity="info", evidence=dict(f.evidence, preview=why, preview_severity=f.severity))


def problem_finding(problem: InputProblem) -> Finding:
    """The one finding for a file that could not be linted (LINT090 syntax, LINT091 the rest)."""
    load_lint_rules()
    if problem.kind == "syntax-error":
        spec = REGISTRY["LINT090"]
        line = max(problem.line, 1)
        f = Finding(INFO if problem.newer_python else ERROR, f"{problem.path}:{line}: {problem.message}",
                    detail=("This Python cannot parse the file as a whole; Python 3.12 and later can, so it may well "
                            "run there. The lines that parse were linted and their findings are reported beside this "
                            "one." if problem.newer_python and problem.recovered else
                            "This Python cannot parse the file, so it was not linted; Python 3.12 and later can, so it "
                            "may well run there." if problem.newer_python else
                            "Python cannot parse this file as a whole, so it will not run; the lines that parse were "
                            "linted and their findings are reported beside this one." if problem.recovered else
                            "Python cannot parse this file, so it was not linted and it will not run either."),
                    fix=f"python -m py_compile {problem.path}   # shows the exact error; fix it and lint again",
                    subjects=[f"line:{line}", f"path:{problem.path}"],
                    evidence={"path": problem.path, "line": line, "col": problem.col + 1})
    else:
        spec = REGISTRY["LINT091"]
        line = max(problem.line, 1)  # a whole-file problem is anchored on line 1, where annotations show it
        f = Finding(WARNING, f"{problem.path}: {problem.message}",
                    detail="ddpdoctor lint reads Python source only; this input was skipped and nothing was checked "
                           "in it.",
                    fix="ddpdoctor lint path/to/train.py   # point it at the training script itself",
                    subjects=[f"line:{line}", f"path:{problem.path}"],
                    evidence={"path": problem.path, "line": line, "problem": problem.kind,
                              "whole_file": not problem.line})
    return f.stamped(spec.id, spec.slug, spec.family)


def lint_source(text: str, path: str = "<string>", only: Optional[set] = None,
                ignore: Optional[set] = None, preview=True) -> List[Finding]:
    """Lint source text (tests, the benchmark). Never executes it."""
    specs = rule_specs(only, ignore)
    with gc_paused():
        try:
            tree = ast.parse(text, filename=path)
        except SyntaxError as exc:
            return [problem_finding(InputProblem(path, "syntax-error", f"syntax error: {exc.msg}", exc.lineno or 0,
                                                 (exc.offset or 1) - 1))]
        except (RecursionError, MemoryError, ValueError) as exc:
            return [problem_finding(InputProblem(path, "too-complex", f"cannot parse: {type(exc).__name__}"))]
        return lint_script(Script(path, text, tree), specs, preview=preview)


def selected_input_rules(only: Optional[set], ignore: Optional[set]) -> Tuple[bool, bool]:
    """Whether LINT090 / LINT091 findings are wanted under --only/--ignore."""
    def wanted(rid: str) -> bool:
        return (only is None or rid in only) and not (ignore and rid in ignore)
    return wanted("LINT090"), wanted("LINT091")
