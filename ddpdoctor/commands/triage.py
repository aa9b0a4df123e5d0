"""`ddpdoctor triage [PATH...|-]`: read, triage, render, choose the exit status. No judging here."""
from __future__ import annotations

import os
import sys

import click

from ddpdoctor.commands.common import UsageError, emit, resolve_selection


@click.command("triage")
# readable=False: click.Path's default refuses the whole command when one of several logs cannot be read (exit 2,
# the others' root cause lost); the reader notes that input ("skipped: cannot read: Permission denied") and triages
# the rest, and says "nothing to triage" (exit 2, one line) only when no input could be read (robust21's audit).
@click.argument("paths", nargs=-1, type=click.Path(readable=False))
@click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown"]), default="text", show_default=True,
              help="markdown: fit to paste into a GitHub issue.")
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@click.option("--only", default="", metavar="ID,...", help="Run only these rules (IDs, slugs, catalogue IDs).")
@click.option("--ignore", default="", metavar="ID,...", help="Rule IDs, slugs or catalogue IDs to skip.")
@click.option("--fail-on", type=click.Choice(["error", "warning", "info"]), default="error", show_default=True,
              help="Lowest severity that makes the exit status 1.")
@click.option("-v", "--verbose", is_flag=True, help="Show evidence (the cross-tab, first lines) and subjects.")
def command(paths, fmt, as_json, only, ignore, fail_on, verbose):
    """Root cause of a failed distributed job, from the logs it left.

    PATH is a log (one per rank or node, or combined; .gz too), a folder (read recursively), a torch
    elastic error file, a Flight Recorder dump, or a `ddpdoctor run --report` file. `-` (or no PATH
    with a pipe) reads standard input. Nothing in the inputs is executed.
    """
    # A big log's newlines are counted with numpy; this process never multiplies matrices, so OpenBLAS
    # starting a thread per core at import is only start-up time (0.04 s of CPU measured). Here only: as a
    # library, triage_paths leaves the caller's environment alone.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    # A big log's keyword search starts now, on a second core, while the rules are imported (~0.1 s).
    from ddpdoctor.triage.reader import prefetch

    prefetch(list(paths))
    from ddpdoctor.model.registry import REGISTRY
    from ddpdoctor.triage.api import InputError, triage_paths
    from ddpdoctor.triage.reader import MissingPath

    if not paths:
        if sys.stdin is None or sys.stdin.isatty():
            raise UsageError("triage needs a log: ddpdoctor triage job.log (a folder, or - for standard input)")
        paths = ("-",)
    only_ids, ignore_ids = _selection(only, ignore)
    if only_ids is not None and not any(REGISTRY[i].kind == "log" for i in only_ids if i in REGISTRY):
        raise UsageError(f"--only {only} selects no triage rule; `ddpdoctor checks` lists the LOG rules")
    try:
        report = triage_paths(list(paths), only=only_ids, ignore=ignore_ids)
    except (MissingPath, InputError) as exc:
        raise UsageError(str(exc)) from None
    if as_json or fmt == "json":
        report.extra.pop("text_sections", None)
    emit(report, fmt, as_json, verbose, fail_on)


def _selection(only: str, ignore: str):
    """--only/--ignore over the LOG rules. Unlike `check`, triage never imports the machine checks."""
    from ddpdoctor.pipeline.runner import load_all, load_lint_rules, load_triage_rules

    load_triage_rules()
    if only.strip() or ignore.strip():  # so that naming a machine check says "not a triage rule", not "unknown"
        load_all(plugins=False)
        load_lint_rules()
    return resolve_selection(only, ignore, "selects no rule; `ddpdoctor checks` lists the LOG rules")
