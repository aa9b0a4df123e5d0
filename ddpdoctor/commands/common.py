"""What every command shares: the exit statuses, the one-line usage error, the reporting options,
check selection and printing the report. Commands import this, never ddpdoctor.cli (which loads
them)."""
from __future__ import annotations

import sys

import click

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


class UsageError(Exception):
    """Bad input from the user: one line on stderr, exit 2."""


def output_options(fn):
    """--format/--json/--only/--ignore/--fail-on/-v, shared by every reporting command."""
    fn = click.option("-v", "--verbose", is_flag=True, help="Show evidence, subjects and skipped checks.")(fn)
    fn = click.option("--fail-on", type=click.Choice(["error", "warning", "info"]), default="error", show_default=True,
                      help="Lowest severity that makes the exit status 1.")(fn)
    fn = click.option("--ignore", default="", metavar="ID,...", help="Check IDs, slugs or catalogue IDs to skip.")(fn)
    fn = click.option("--only", default="", metavar="ID,...", help="Run only these checks (IDs, slugs, catalogue IDs or families).")(fn)
    fn = click.option("--json", "as_json", is_flag=True, help="Same as --format json.")(fn)
    fn = click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown"]), default="text",
                      show_default=True)(fn)
    return fn


def selection(only: str, ignore: str):
    from ddpdoctor.model.registry import resolve_many
    from ddpdoctor.pipeline.runner import load_all, load_lint_rules

    load_all()
    load_lint_rules()
    try:
        only_ids = resolve_many(only.split(",")) if only.strip() else None
        ignore_ids = resolve_many(ignore.split(",")) if ignore.strip() else None
    except KeyError as exc:
        raise UsageError(exc.args[0]) from None
    if only_ids is not None and not only_ids:
        # e.g. `--only "$A,$B"` with empty variables: never report "No issues found!" for nothing.
        raise UsageError(f"--only {only.strip()!r} selects no check; `ddpdoctor checks` lists them")
    return only_ids, ignore_ids


def emit(report, fmt: str, as_json: bool, verbose: bool, fail_on: str) -> None:
    from ddpdoctor.pipeline.render import render

    click.echo(render(report, "json" if as_json else fmt, verbose))
    sys.exit(report.exit_code(fail_on))
