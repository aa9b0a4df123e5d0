"""`ddpdoctor check --fix-env`: the shell lines that fix this run's env-level findings.

Each finding that can be fixed by the environment alone, with no human judgement, carries
`Finding.env_fix` ({NAME: value to export, or None to unset}); the check that judged the fault sets
it. This module only turns those into POSIX shell, for `eval "$(ddpdoctor check --fix-env)"`:

- every value is quoted with `shlex.quote`, every name must be a plain shell identifier;
- nothing that looks secret (by name or by value) is ever printed;
- two findings that want different values for one variable cancel out: no guessing;
- a variable another finding would unset and set again is left alone the same way.
"""
from __future__ import annotations

import re
import shlex
from typing import Iterable, List, Optional, Tuple

from ddpdoctor.model.redact import name_is_secret, redact_text

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def env_fix_lines(findings: Iterable) -> Tuple[List[str], List[str], List[str]]:
    """(shell lines, IDs of the findings they fix, one reason per change left out)."""
    wanted: dict = {}  # NAME -> (value or None, [finding IDs])
    conflicts: set = set()
    dropped: List[str] = []
    for f in findings:
        for name, value in (getattr(f, "env_fix", None) or {}).items():
            why = _unsafe(name, value)
            if why:
                dropped.append(f"{f.id}: {why}")
                continue
            if name in wanted and wanted[name][0] != value:
                conflicts.add(name)
            wanted.setdefault(name, (value, []))[1].append(f.id)
    lines, ids = [], []
    for name, (value, who) in wanted.items():
        if name in conflicts:
            dropped.append(f"{', '.join(sorted(set(who)))}: {name} is wanted with different values; left alone")
            continue
        lines.append(f"unset {name}" if value is None else f"export {name}={shlex.quote(value)}")
        ids.extend(i for i in who if i not in ids)
    return lines, ids, dropped


def _unsafe(name: str, value: Optional[str]) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        return f"{name!r} is not a shell variable name"
    if name_is_secret(name):
        return f"{name} looks like a secret; never printed"
    if value is not None:
        if not isinstance(value, str) or "\0" in value or "\n" in value:
            return f"{name}: not a single-line string"
        if redact_text(value) != value:
            return f"{name}: the value looks like a credential; never printed"
    return ""


def emit_fix_env(report) -> int:
    """Shell lines on stdout, one summary line on stderr (a shell comment, so a copy-paste is safe)."""
    import sys

    lines, ids, dropped = env_fix_lines(report.sorted_findings())
    for line in lines:
        sys.stdout.write(line + "\n")
    rest = [f.id for f in report.sorted_findings() if f.id not in ids and f.severity != "info"]
    note = f"# ddpdoctor: {len(lines)} environment fix(es)" + (f" for {', '.join(ids)}" if ids else "")
    if rest:
        note += f"; {len(rest)} finding(s) need a human: run `ddpdoctor check`"
    for reason in dropped:
        note += f"; skipped {reason}"
    sys.stderr.write(redact_text(note) + "\n")
    return 0
