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
    fn = click.option("--all-ranks", is_flag=True, expose_value=False, callback=_remember_all_ranks,
                      help="Under a launcher, print the report on every rank (default: rank 0 prints the job's).")(fn)
    fn = click.option("--fail-on", type=click.Choice(["error", "warning", "info"]), default="error", show_default=True,
                      help="Lowest severity that makes the exit status 1.")(fn)
    fn = click.option("--ignore", default="", metavar="ID,...", help="Check IDs, slugs or catalogue IDs to skip.")(fn)
    fn = click.option("--only", default="", metavar="ID,...", help="Run only these checks (IDs, slugs, catalogue IDs or families).")(fn)
    fn = click.option("--json", "as_json", is_flag=True, help="Same as --format json.")(fn)
    fn = click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown"]), default="text",
                      show_default=True)(fn)
    return fn


def selection(only: str, ignore: str):
    """--only/--ignore for the commands that examine a machine, a run or a script (check, comm, probe,
    lint). `ddpdoctor checks` lists the triage rules (LOG...) too, so their names resolve here: --only
    naming nothing but triage rules is one line pointing to `ddpdoctor triage`; a triage rule named
    beside other checks is skipped with a note on stderr; --ignore of one is accepted (nothing to skip)."""
    from ddpdoctor.pipeline.runner import load_all, load_lint_rules, load_triage_rules

    load_all()
    load_lint_rules()
    if only.strip() or ignore.strip():  # only then: `check` alone never imports the triage rules
        load_triage_rules()
    only_ids, ignore_ids = resolve_selection(only, ignore, "selects no check; `ddpdoctor checks` lists them")
    return _without_triage_rules(only, only_ids), _without_triage_rules(None, ignore_ids)


def _without_triage_rules(only, ids):
    from ddpdoctor.model.registry import REGISTRY, resolve

    if not ids:
        return ids
    logs = {i for i in ids if getattr(REGISTRY.get(i), "kind", "") == "log"}
    if not logs or only is None:
        return ids - logs if ids is not None else ids
    named = sorted({s.id for s in (resolve(n.strip()) for n in only.split(",") if n.strip())
                    if s is not None and s.kind == "log"})
    if logs == ids:
        what = (f"{min(logs)} is a triage rule" if len(logs) == 1 else
                f"{', '.join(sorted(logs))} are triage rules" if len(logs) <= 4 else
                f"it selects {len(logs)} triage rules")
        reads = "it reads" if len(logs) == 1 else "they read"
        raise UsageError(f"--only {only.strip()}: {what}; {reads} the logs a failed job left, so "
                         f"run `ddpdoctor triage --only {only.strip()} LOG...`")
    if named:  # chosen by name beside other checks (a catalogue ID or family may bring some in too: silently)
        them = ", ".join(named)
        click.echo(f"ddpdoctor: note: {them} {'is a triage rule' if len(named) == 1 else 'are triage rules'}, "
                   f"skipped here; `ddpdoctor triage --only {','.join(named)} LOG...` runs "
                   f"{'it' if len(named) == 1 else 'them'} on a failed job's logs", err=True)
    return ids - logs


def resolve_selection(only: str, ignore: str, selects_none: str):
    """--only/--ignore as sets of IDs over the specs already loaded; bad names are usage errors."""
    from ddpdoctor.model.registry import resolve_many

    try:
        only_ids = resolve_many(only.split(",")) if only.strip() else None
        ignore_ids = resolve_many(ignore.split(",")) if ignore.strip() else None
    except KeyError as exc:
        raise UsageError(exc.args[0]) from None
    if only_ids is not None and not only_ids:
        # e.g. `--only "$A,$B"` with empty variables: never report "No issues found!" for nothing.
        raise UsageError(f"--only {only.strip()!r} {selects_none}")
    return only_ids, ignore_ids


def _remember_all_ranks(ctx, _param, value):
    ctx.meta["ddpdoctor.all_ranks"] = bool(value)


def emit(report, fmt: str, as_json: bool, verbose: bool, fail_on: str) -> None:
    """Print the report. Under a launcher, global rank 0 prints the job's report; another rank
    prints what rank 0's report does not hold: nothing more when rank 0 confirmed it received this
    rank's findings (only what names this rank), else every finding of its own, prefixed
    `[rank N]` (pipeline.jobreport). `--json` always prints a valid report on every rank: this
    rank's own, with the job fields. `--all-ranks` prints the full report everywhere."""
    import os

    from ddpdoctor.pipeline.jobreport import concerns_rank, launcher_rank, own_lines
    from ddpdoctor.pipeline.render import render

    ctx = click.get_current_context(silent=True)
    job = launcher_rank(os.environ)
    fmt = "json" if as_json else fmt
    if job and job[0] != 0 and not (ctx is not None and ctx.meta.get("ddpdoctor.all_ranks")):
        info = report.extra.setdefault("job", {"rank": job[0], "world_size": job[1]})
        if fmt == "json":
            click.echo(render(report, "json", verbose))
            sys.exit(report.exit_code(fail_on))
        findings = report.sorted_findings()
        if info.get("reported_to_rank0") is False:
            lines = own_lines(job[0], [f.to_dict() for f in findings if f.family != "comm"], False,
                              why=info.get("why"))
            lines += concerns_rank(job[0], [f.to_dict() for f in findings if f.family == "comm"])
        else:
            lines = concerns_rank(job[0], [f.to_dict() for f in findings])
        for line in lines:
            click.echo(line)
        sys.exit(report.exit_code(fail_on))
    click.echo(render(report, fmt, verbose))
    sys.exit(report.exit_code(fail_on))
