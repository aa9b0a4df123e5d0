"""The library behind `ddpdoctor lint` and `ddpdoctor check --script`: paths in, a Report out."""
from __future__ import annotations

import contextlib
import os
import time
from typing import List, Optional

from ddpdoctor.model import Report
from ddpdoctor.lint.engine import gc_paused, lint_script, problem_finding, rule_specs, selected_input_rules
from ddpdoctor.lint.context import read_context
from ddpdoctor.lint.project import build_project, wants_project
from ddpdoctor.lint.source import InputProblem, collect, read


class MissingPath(ValueError):
    """A path given on the command line does not exist (exit 2, one line)."""


def lint_paths(paths: List[str], only: Optional[set] = None, ignore: Optional[set] = None,
               missing_ok: bool = False, preview=True, units: Optional[list] = None) -> Report:
    """Lint files and folders. Never imports or executes them.

    A path that does not exist raises MissingPath, unless `missing_ok` (then it is reported as
    LINT091, as `check --script` wants: one bad flag should not hide the machine checks).
    `preview=True` (the library's default): every rule at its own severity. `preview=False` is what the
    `ddpdoctor lint` and `check --script` commands show: a rule whose warnings have not yet been
    measured right often enough at first read reports notes (engine.earns); `preview="preview"` is `--preview`:
    also the rules with too few judged findings at their own severity, but not those measured below the bar. `units`: a list that receives
    (script, its project index or None) for every file read, so that a caller needing more from the scripts
    (lint_section's facts) does not read and parse them again.
    """
    start = time.perf_counter()
    files, problems, missing = collect(list(paths))
    if missing and not missing_ok:
        raise MissingPath(f"no such file or folder: {missing[0]}"
                          + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))
    problems = list(problems) + [InputProblem(m, "missing", "no such file or folder") for m in missing]
    if not files and not problems:
        # folders with no *.py file: "No issues found" would claim health for code nobody read
        where = ", ".join(os.fspath(p) for p in paths)
        if not missing_ok:
            raise MissingPath(f"no Python files found in {where}")
        problems = [InputProblem(os.fspath(p), "empty", "no Python files found here") for p in paths]
    specs = rule_specs(only, ignore)
    want_syntax, want_unreadable = selected_input_rules(only, ignore)
    # Index every file first, so a helper gated by its callers in another module is seen as gated and
    # the project's facts are there for the rules (lint/project.py, lint/facts.py); the README, shell
    # scripts and requirements next to them say how the project is launched (lint/context.py). Every
    # index stays alive until the end, and a cyclic collection would rescan all of them after each
    # file, so the collector stays paused for the whole run.
    together = wants_project(files)
    with gc_paused():
        project = build_project(files, read_context(files)) if together else None
        findings, summary = _lint_files(files, specs, project, problems, preview, units)
        if project is not None and units is None:  # a caller given units reads the indexes after
            project.release()
        del project
    for p in problems:
        if (p.kind == "syntax-error" and want_syntax) or (p.kind != "syntax-error" and want_unreadable):
            findings.append(problem_finding(p))
        summary.append({"path": p.path, "status": p.kind, "findings": 1})
    summary.sort(key=lambda s: s["path"])
    analysed = [s for s in specs if not s.extra.get("input_rule")]  # LINT090/091 are raised by the reader
    report = Report(command="lint", findings=findings, checks_run=len(analysed), families=["lint"])
    report.extra["lint"] = {"files": summary, "rules_run": [s.id for s in specs],
                            "elapsed_ms": round((time.perf_counter() - start) * 1000, 1)}
    return report


def _lint_files(files, specs, project, problems, preview=True, units=None):
    findings, summary = [], []
    for path in files:
        script = project.scripts.pop(path, None) if project is not None else None
        script = script if script is not None else read(path)
        found = lint_script(script, specs, path, project, preview) if not isinstance(script, InputProblem) else None
        if isinstance(script, InputProblem):
            problems.append(script)
            continue
        if script.problem is not None:  # it did not parse as a whole: its LINT090, and the findings of the rest
            problems.append(script.problem)
            findings.extend(found)
            continue
        if units is not None:
            units.append((script, project.indexes.get(path) if project is not None else None))
        findings.extend(found)
        summary.append({"path": path, "status": "linted", "findings": len(found)})
    return findings, summary


def lint_section(paths: List[str], only: Optional[set] = None, ignore: Optional[set] = None,
                 preview: bool = False) -> dict:
    """The `lint` snapshot section for `check --script`: the lint findings as plain JSON.

    The relay check LINT000 (ddpdoctor/checks/lint.py) turns them back into findings that keep
    their rule IDs, so `check --script train.py` reports LINT001 just as `lint train.py` does.
    """
    units: list = []
    try:
        report = lint_paths(list(paths), only=only, ignore=ignore, missing_ok=True, preview=preview, units=units)
    except Exception as exc:  # noqa: BLE001 - a section stores its failure, it never raises
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {
        "scripts": list(paths),
        "files": report.extra["lint"]["files"],
        "findings": [dict(f.to_dict(), family=f.family) for f in report.sorted_findings()],
        "rules_run": len(report.extra["lint"]["rules_run"]),
        "facts": _facts(units),
    }


def _facts(units: list) -> dict:
    """What the machine checks read from the scripts (lint.scriptfacts), from the scripts and indexes the lint pass
    made; a failure costs the facts, not the run."""
    from ddpdoctor.lint.scriptfacts import facts_of

    try:
        return facts_of(units)
    except Exception as exc:  # noqa: BLE001
        return {"error": f"{type(exc).__name__}: {exc}"}
