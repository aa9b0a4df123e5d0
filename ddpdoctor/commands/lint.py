"""`ddpdoctor lint PATH...`: parse, lint, render, choose the exit status. No judging happens here."""
from __future__ import annotations

import json
import sys

import click

from ddpdoctor.commands.common import UsageError, emit, selection


@click.command("lint")
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown", "sarif"]), default="text",
              show_default=True, help="sarif: for GitHub code scanning.")
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@click.option("--only", default="", metavar="ID,...", help="Run only these rules (IDs, slugs, catalogue IDs).")
@click.option("--ignore", default="", metavar="ID,...", help="Rule IDs, slugs or catalogue IDs to skip.")
@click.option("--fail-on", type=click.Choice(["error", "warning", "info"]), default="error", show_default=True,
              help="Lowest severity that makes the exit status 1.")
@click.option("--preview", is_flag=True,
              help="Also show at their own severity the rules with too few findings judged at first read to have "
                   "earned it (notes by default); rules measured below the bar stay notes (docs/lint.md lists "
                   "the figures).")
@click.option("-v", "--verbose", is_flag=True, help="Show evidence, subjects and the files linted.")
def command(paths, fmt, as_json, only, ignore, fail_on, preview, verbose):
    """Static analysis of training scripts for DDP mistakes. Never imports or runs them.

    PATH is a script or a folder (its *.py files). `# ddpdoctor: ignore[LINT001]` on a line
    silences a finding there (a rule ID, slug or catalogue ID such as A6).
    """
    from ddpdoctor.model.registry import REGISTRY
    from ddpdoctor.lint.api import MissingPath, lint_paths

    if only.strip() or ignore.strip():
        only_ids, ignore_ids = selection(only, ignore)
    else:  # nothing to resolve against every check's name: the machine checks, never run here, stay unimported
        from ddpdoctor.pipeline.runner import load_lint_rules, load_plugins

        load_plugins()
        load_lint_rules()
        only_ids = ignore_ids = None
    if only_ids is not None and not any(REGISTRY[i].kind == "rule" for i in only_ids if i in REGISTRY):
        raise UsageError(f"--only {only} selects no lint rule; `ddpdoctor checks` lists the LINT rules")
    try:
        report = lint_paths(list(paths), only=only_ids, ignore=ignore_ids, preview="preview" if preview else False)
    except MissingPath as exc:
        raise UsageError(str(exc)) from None
    if fmt == "sarif" and not as_json:
        from ddpdoctor.lint.sarif import to_sarif

        specs = [REGISTRY[i] for i in report.extra["lint"]["rules_run"]]
        click.echo(json.dumps(to_sarif(report, specs), indent=2))
        sys.exit(report.exit_code(fail_on))
    if fmt in ("text", "markdown") and not as_json:
        files = report.extra["lint"]["files"]
        clean = sum(1 for f in files if f["status"] == "linted" and not f["findings"])
        lines = [f"Linted {len(files)} file{'s' if len(files) != 1 else ''} ({clean} clean) with "
                 f"{report.checks_run} rules in {report.extra['lint']['elapsed_ms']:.0f} ms."]
        if verbose:
            lines += [f"    {f['path']}: {f['status']}, {f['findings']} finding{'s' if f['findings'] != 1 else ''}"
                      for f in files]
        report.extra["text_sections"] = lines
    emit(report, fmt, as_json, verbose, fail_on)
