"""Command line: parse, call the library, render, choose the exit status. No judging happens here.

Exit status (docs/report-format.md): 0 nothing at or above --fail-on; 1 findings at or above it;
2 usage or input error, one line on stderr; 3 ddpdoctor itself failed.
"""
from __future__ import annotations

import importlib
import os
import sys
from typing import Optional

import click

from ddpdoctor import __version__
from ddpdoctor.commands.common import (EXIT_FINDINGS, EXIT_INTERNAL, EXIT_OK, EXIT_USAGE,  # noqa: F401
                                       UsageError, emit, output_options, selection)


# Subcommands that live in their own packages, imported only when used, so `ddpdoctor check`
# never pays for the comm test, the probe (torch, transformers) or the linter.
LAZY_COMMANDS = {
    "comm": ("ddpdoctor.commands.comm", "command", "Bounded connectivity and bandwidth test between ranks."),
    "probe": ("ddpdoctor.commands.probe", "command", "Instrumented DDP Trainer run: where the time goes, and why."),
    "lint": ("ddpdoctor.commands.lint", "command", "Static analysis of training scripts for DDP mistakes."),
    "triage": ("ddpdoctor.commands.triage", "command", "Root cause of a failed distributed job, from its logs."),
    "run": ("ddpdoctor.commands.run", "command", "Run your own launch command with the doctor attached to every rank."),
}


class DoctorGroup(click.Group):
    def list_commands(self, ctx):
        return sorted(set(super().list_commands(ctx)) | set(LAZY_COMMANDS))

    def get_command(self, ctx, name):
        cmd = super().get_command(ctx, name)
        if cmd is not None or name not in LAZY_COMMANDS:
            return cmd
        module, attr, _ = LAZY_COMMANDS[name]
        try:
            return getattr(importlib.import_module(module), attr)
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.startswith("ddpdoctor"):
                return _unavailable(name, LAZY_COMMANDS[name][2])
            raise

    def format_commands(self, ctx, formatter):
        rows = []
        for name in self.list_commands(ctx):
            if name in LAZY_COMMANDS:
                rows.append((name, LAZY_COMMANDS[name][2]))
            else:
                cmd = super().get_command(ctx, name)
                rows.append((name, cmd.get_short_help_str(60) if cmd else ""))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _unavailable(name: str, help_text: str) -> click.Command:
    @click.command(name=name, help=help_text, context_settings={"ignore_unknown_options": True})
    @click.argument("args", nargs=-1, type=click.UNPROCESSED)
    def cmd(args):
        raise UsageError(f"'{name}' is not available in this build of ddpdoctor")

    return cmd


class CommandAfterDashes(click.Command):
    """A command whose trailing arguments are a training command given after `--`. click drops the `--` before the
    command sees its arguments; without it a mistyped subcommand or option value (`ddpdoctor check snapshot.json`)
    would be taken for a training command and judged as one, so whether `--` was given is kept for the command."""

    def parse_args(self, ctx, args):
        ctx.meta["ddpdoctor.dashes"] = "--" in args
        return super().parse_args(ctx, args)


def _require_dashes(command: tuple, example: str) -> None:
    """Exit 2 when a training command came without `--` before it (CommandAfterDashes)."""
    if command and not click.get_current_context().meta.get("ddpdoctor.dashes"):
        raise UsageError(f"unexpected argument {command[0]!r}: a training command goes after --, as in "
                         f"`{example} -- {command[0]} ...`")
    if command and not command[0].strip():
        # execvp("") fails with ENOENT and a shell says "command not found" for an empty word: there is no program to
        # judge, so this is a usage error, not a finding about a program that is missing from PATH
        raise UsageError(f"the training command after -- starts with an empty word {command[0]!r}: give the program, "
                         f"as in `{example} -- torchrun --nproc-per-node 4 train.py`")


@click.group(cls=DoctorGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ddpdoctor")
def cli():
    """ddpdoctor: why is my distributed PyTorch / Hugging Face training broken or slow?"""


@cli.command(cls=CommandAfterDashes, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--snapshot", "snapshot_path", type=click.Path(dir_okay=False), default=None,
              help="Judge a recorded snapshot instead of this machine (- reads standard input).")
@click.option("--no-comm", is_flag=True, help="Skip the live connectivity test.")
@click.option("--script", "scripts", multiple=True, type=click.Path(exists=True),
              help="Also lint this training script.")
@click.option("--config", "configs", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="Also read the job's YAML/JSON config (accelerate config, Lightning/Hydra YAML) for GPU ids, "
                   "GPU counts and process counts.")
@click.option("--fix-env", is_flag=True,
              help='Print only the export/unset lines that fix the env-level findings: eval "$(ddpdoctor check --fix-env)".')
@output_options
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def check(snapshot_path, no_comm, scripts, configs, fix_env, fmt, as_json, only, ignore, fail_on, verbose, command):
    """Fast checks of this machine and environment (or of a recorded snapshot).

    After `--`, the command that will start the training (`ddpdoctor check -- torchrun --nproc-per-node 4 train.py
    --gpu_ids 0,1` or `-- python train.py -gpuid 1`): its launcher options and the program's GPU and precision
    options are judged against this machine, as when check runs under that launcher."""
    from ddpdoctor.pipeline.check import run_check

    _require_dashes(command, "ddpdoctor check")
    if fix_env and (as_json or fmt != "text" or verbose):
        raise UsageError("--fix-env prints shell lines only; drop --format/--json/-v")
    only_ids, ignore_ids = selection(only, ignore)
    if only_ids and not scripts and not snapshot_path:
        from ddpdoctor.model.registry import REGISTRY

        if all(getattr(REGISTRY.get(i), "kind", "") == "rule" for i in only_ids):
            raise UsageError(f"--only {only.strip()} selects lint rules only; name the script with --script train.py")
    if command and snapshot_path:
        raise UsageError("a training command after -- describes this machine's launch; it cannot be given with --snapshot")
    report = run_check(snapshot_path=snapshot_path, only=only_ids, ignore=ignore_ids, comm=not no_comm,
                       scripts=list(scripts), configs=list(configs), command=list(command))
    if fix_env:
        from .pipeline.fixenv import emit_fix_env

        sys.exit(emit_fix_env(report))
    emit(report, fmt, as_json, verbose, fail_on)


@cli.command()
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), default="-", show_default=True,
              help="File to write; - for standard output.")
def snapshot(output):
    """Record this machine's facts (secrets redacted) for `check --snapshot` or a bug report."""
    from ddpdoctor.pipeline.snapshot import live_snapshot

    text = live_snapshot().gather_all().dumps()
    if output == "-":
        click.echo(text)
        return
    from ddpdoctor.model.inputs import open_output

    try:
        with open_output(output) as fh:   # a FIFO without a reader: an error after the idle bound, not a hang
            fh.write(text + "\n")
    except OSError as exc:
        raise UsageError(f"cannot write {output}: {exc.strerror or exc}") from None
    click.echo(f"wrote {output}", err=True)


@cli.command()
@click.argument("name")
def explain(name):
    """Print why a check exists and how to fix what it finds (by ID, slug, catalogue ID or family)."""
    from ddpdoctor.model.registry import REGISTRY, resolve, unknown_message
    from ddpdoctor.pipeline.runner import load_all, load_lint_rules, load_triage_rules
    from ddpdoctor.pipeline.render import render_explain

    load_all()
    load_lint_rules()
    load_triage_rules()
    spec = resolve(name)
    if spec is None:
        cited = [s for s in REGISTRY.values() if name.upper() in (c.upper() for c in s.catalogue)]
        if not cited:  # a family name, as --only accepts: its checks
            cited = [s for s in REGISTRY.values() if s.family == name.lower()]
        if not cited:
            raise UsageError(unknown_message(name))
        click.echo("\n\n".join(render_explain(s) for s in sorted(cited, key=lambda s: s.id)))
        return
    click.echo(render_explain(spec))


@cli.command("checks")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown"]), default="text", show_default=True)
def list_checks(fmt):
    """List every check (and lint rule); `--format markdown` writes docs/checks.md."""
    import json

    from ddpdoctor.model.registry import REGISTRY
    from ddpdoctor.pipeline.runner import load_all, load_lint_rules, load_triage_rules
    from ddpdoctor.pipeline.render import render_checks_markdown

    load_all(plugins=False)
    load_lint_rules()
    load_triage_rules()
    specs = sorted(REGISTRY.values(), key=lambda s: s.id)
    if fmt == "markdown":
        click.echo(render_checks_markdown(specs), nl=False)
    elif fmt == "json":
        click.echo(json.dumps([{"id": s.id, "name": s.slug, "family": s.family, "kind": s.kind,
                                "catalogue": list(s.catalogue), "needs": list(s.needs), "summary": s.summary}
                               for s in specs], indent=2))
    else:
        for s in specs:
            cat = f" [{', '.join(s.catalogue)}]" if s.catalogue else ""
            click.echo(f"{s.id:8} {s.slug:34} {s.family:11} {s.summary}{cat}")


def entry() -> None:
    """The `ddpdoctor` console script: this process exists to run one command, so the processes it
    starts are followed as its own (ddpdoctor.proctree.own_this_process), then main()."""
    from ddpdoctor import proctree

    proctree.own_this_process()
    main()


def main(argv: Optional[list] = None) -> None:
    """Entry point. Turns every error into one line and the contract's exit status."""
    from ddpdoctor.model.redact import redacted_stderr

    args = list(sys.argv[1:] if argv is None else argv)
    _escape_what_the_output_cannot_encode()
    with redacted_stderr():  # every line the doctor writes on stderr, wherever it is written, is redacted here
        _main(args, argv)


def _main(args: list, argv: Optional[list]) -> None:
    from ddpdoctor.model.inputs import InputError
    from ddpdoctor.pipeline.snapshot import SnapshotError

    try:
        cli.main(args=argv, prog_name="ddpdoctor", standalone_mode=False)
    except SystemExit:
        raise
    except click.exceptions.Abort:
        click.echo("ddpdoctor: interrupted", err=True)
        sys.exit(130)
    except click.UsageError as exc:
        if type(exc).__name__ == "NoArgsIsHelpError" and exc.ctx is not None:
            click.echo(exc.ctx.get_help())
            sys.exit(EXIT_OK)
        _fail(args, EXIT_USAGE, exc.format_message())
    except click.ClickException as exc:
        _fail(args, EXIT_USAGE, exc.format_message())
    except (UsageError, SnapshotError, InputError) as exc:
        _fail(args, EXIT_USAGE, str(exc))
    except KeyboardInterrupt:
        click.echo("ddpdoctor: interrupted", err=True)
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(EXIT_OK)
    except Exception as exc:  # noqa: BLE001 - the doctor never shows a traceback
        if os.environ.get("DDPDOCTOR_DEBUG"):
            raise
        _fail(args, EXIT_INTERNAL, f"{type(exc).__name__}: {exc} (set DDPDOCTOR_DEBUG=1 for the traceback, "
              "and please report it)", prefix="ddpdoctor: internal error: ")
    sys.exit(EXIT_OK)


def _escape_what_the_output_cannot_encode() -> None:
    """Every report goes through stdout/stderr; where their encoding is not UTF-8 (PYTHONIOENCODING=latin-1, a C
    locale without coercion, a Windows code page), a character it cannot hold (the report's ✓/✗, a non-ASCII path or
    log line) is written as \\uXXXX instead of raising UnicodeEncodeError half-way through the report (exit 3). The
    escape is valid inside a JSON string, where the JSON report's only non-ASCII text is, so --json still parses."""
    import codecs

    try:
        codecs.lookup_error("ddpdoctor-escape")
    except LookupError:
        codecs.register_error("ddpdoctor-escape", _json_escape)
    for stream in (sys.stdout, sys.stderr):
        try:
            if codecs.lookup(stream.encoding).name != "utf-8" and stream.errors in ("strict", "surrogateescape"):
                stream.reconfigure(errors="ddpdoctor-escape")
        except (AttributeError, LookupError, TypeError, ValueError, OSError):
            continue  # not a text stream of io's (a test's capture, None): left as it is


def _json_escape(exc: UnicodeError):
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    out = []
    for ch in exc.object[exc.start:exc.end]:
        code = ord(ch)
        if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8 on input (surrogateescape): shown as that byte
            code -= 0xDC00
        if code > 0xFFFF:  # a UTF-16 surrogate pair, as JSON writes one
            code -= 0x10000
            out.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
        else:
            out.append(f"\\u{code:04x}")
    return "".join(out), exc.end


def _fail(args: list, status: int, message: str, prefix: str = "ddpdoctor: error: ") -> None:
    """One line on stderr and the contract's exit status; when the command line asked for JSON, also a
    valid report on stdout that carries the error, so `ddpdoctor triage --json x.log | jq` never reads
    an empty document (`--json` always prints a valid report)."""
    from ddpdoctor.model.redact import redact_text

    line = redact_text(_one_line(message))   # it echoes what the user typed: a path or name may be a token
    click.echo(f"{prefix}{line}", err=True)
    command = _json_requested(args)
    if command is not None:
        click.echo(_error_report(command, status, line))
    sys.exit(status)


def _json_requested(args: list) -> Optional[str]:
    """The subcommand when its own options (before any `--`) ask for JSON, else None. `run` passes
    everything after its options to the job, and prints the job's output, so it never qualifies; nor
    does `check --fix-env`, whose stdout is shell meant for `eval`."""
    words = args[: args.index("--")] if "--" in args else args
    command = next((w for w in words if not w.startswith("-")), "")
    if command == "run" or "--fix-env" in words:  # --fix-env's stdout is shell for `eval`
        return None
    for i, word in enumerate(words):
        if word == "--json" or word == "--format=json" or (word == "--format" and words[i + 1:i + 2] == ["json"]):
            return command or None
    return None


def _error_report(command: str, status: int, message: str) -> str:
    """An empty report of `command` carrying the error, rendered as every JSON report is (redacted)."""
    from ddpdoctor.model import Report
    from ddpdoctor.pipeline.render import render_json

    kind = "usage" if status == EXIT_USAGE else "internal"
    return render_json(Report(command=command, extra={"error": {"exit_status": status, "kind": kind,
                                                                "message": message}}))


def _one_line(text: str) -> str:
    return " ".join(text.split())


if __name__ == "__main__":
    main()
