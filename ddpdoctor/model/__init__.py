"""The data every part of ddpdoctor exchanges: severities, findings, skipped checks, reports.

Plain frozen dataclasses with `to_dict` so that JSON output is exactly the contract in
docs/report-format.md and nothing else leaks into it.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, Union

ERROR = "error"
WARNING = "warning"
INFO = "info"
SEVERITIES = (ERROR, WARNING, INFO)
_RANK = {ERROR: 2, WARNING: 1, INFO: 0}

REPORT_SCHEMA = "ddpdoctor/report/1"


def severity_rank(severity: str) -> int:
    """Orders severities so that `--fail-on warning` includes errors."""
    return _RANK[severity]


@dataclass(frozen=True)
class Finding:
    """One actionable problem. `id` and `name` are stamped by the registry from the check's spec."""

    severity: str
    title: str
    detail: str = ""
    fix: str = ""
    subjects: Sequence[str] = ()
    evidence: Mapping[str, Any] = field(default_factory=dict)
    id: str = ""
    name: str = ""
    family: str = ""
    # The environment change that fixes this finding with no human judgement: NAME -> value to export,
    # or None to unset. Set only when it is certain (never a guess between alternatives, a secret, or
    # anything needing root); `ddpdoctor check --fix-env` prints it as shell. Not in the JSON report.
    env_fix: Mapping[str, Optional[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"unknown severity {self.severity!r}")
        object.__setattr__(self, "subjects", tuple(str(s) for s in self.subjects))
        object.__setattr__(self, "evidence", dict(self.evidence))
        object.__setattr__(self, "env_fix", dict(self.env_fix))

    def stamped(self, id: str, name: str, family: str) -> "Finding":
        return dataclasses.replace(self, id=id, name=name, family=family)

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "name": self.name,
            "severity": self.severity,
            "title": self.title,
            "detail": self.detail,
            "fix": self.fix,
            "subjects": list(self.subjects),
            "evidence": dict(self.evidence),
        }


def error(title: str, **kw: Any) -> Finding:
    return Finding(ERROR, title, **kw)


def warning(title: str, **kw: Any) -> Finding:
    return Finding(WARNING, title, **kw)


def info(title: str, **kw: Any) -> Finding:
    return Finding(INFO, title, **kw)


# "Say what you do not know": a report claims health only for what it judged. A check skipped for want of a fact
# this command gathers (no NVIDIA driver, --no-comm, a gatherer that failed, not one rank of a launched job) is
# material: the summary names its family and why. A check skipped because its facts belong to another command
# is not: the probe section is measured by `ddpdoctor probe`, the runtime sections by preflight() inside the
# training process, the run section by `ddpdoctor run`; `check` reads a script only when given --script.
SECTION_OWNER = {"probe": "probe", "run": "run", "runtime": "preflight"}  # runtime_* sections too
NO_SCRIPT = "no training script given (check --script train.py)"


@dataclass(frozen=True)
class Skipped:
    id: str
    reason: str
    family: str = ""
    section: str = ""  # the snapshot section whose absence stopped the check ("" when not known)

    def to_dict(self) -> dict:
        return {"id": self.id, "reason": self.reason}

    def material(self, command: str) -> bool:
        """Whether this skip leaves unjudged something `command` itself is meant to judge (see SECTION_OWNER).
        A skip whose section is not known counts as material: claim less, not more."""
        sec = self.section
        owner = SECTION_OWNER.get("runtime" if sec.startswith("runtime") else sec)
        if owner is not None:
            return owner == command
        if sec == "lint":  # no script given (live: NO_SCRIPT; recorded: no lint section) is not a gap
            return not (self.reason == NO_SCRIPT or self.reason == "no 'lint' facts in this snapshot")
        return True


@dataclass
class Report:
    """What one command concluded. Renderers and exit codes read only this."""

    command: str
    findings: list = field(default_factory=list)
    skipped: list = field(default_factory=list)
    checks_run: int = 0
    families: list = field(default_factory=list)  # families that ran, in display order
    # kept for markdown / -v output; not part of the JSON contract. A callable is called when it is read
    # (snapshot_dict): the redacted copy costs a pass over every string of every section (robust25: 5 s for 10,000
    # ranks' run section), paid by each judge() call, and only the markdown renderer reads it.
    snapshot: Optional[Union[dict, Callable[[], dict]]] = None
    extra: dict = field(default_factory=dict)  # command-specific sections, e.g. "comm", "probe"

    def snapshot_dict(self) -> Optional[dict]:
        """The snapshot as the report shows it (redacted), made on first read when it was given as a callable."""
        if callable(self.snapshot):
            self.snapshot = self.snapshot()
        return self.snapshot

    def add(self, findings: Iterable[Finding]) -> None:
        self.findings.extend(findings)

    def count(self, severity: str) -> int:
        return sum(1 for f in self.findings if f.severity == severity)

    def sorted_findings(self) -> list:
        return sorted(self.findings, key=lambda f: (-severity_rank(f.severity), f.id, f.subjects))

    def worst(self) -> Optional[str]:
        if not self.findings:
            return None
        return max((f.severity for f in self.findings), key=severity_rank)

    def not_judged(self) -> list:
        """[{family, reason, checks, in_part}] for the material skips (Skipped.material), one entry per family and
        reason, in the order first met: what this report could not judge, and why. `checks` counts the checks skipped
        for that reason; `in_part` is true when other checks of the family ran (the family was judged in part)."""
        out: dict = {}
        for s in self.skipped:
            if s.material(self.command):
                entry = out.setdefault((s.family, s.reason), {"family": s.family, "reason": s.reason, "checks": 0,
                                                              "in_part": s.family in self.families})
                entry["checks"] += 1
        return list(out.values())

    def exit_code(self, fail_on: str = ERROR) -> int:
        threshold = severity_rank(fail_on)
        return 1 if any(severity_rank(f.severity) >= threshold for f in self.findings) else 0

    def to_dict(self) -> dict:
        from ddpdoctor import __version__

        out = {
            "schema": REPORT_SCHEMA,
            "tool_version": __version__,
            "command": self.command,
            "summary": {
                "errors": self.count(ERROR),
                "warnings": self.count(WARNING),
                "infos": self.count(INFO),
                "checks_run": self.checks_run,
                "checks_skipped": len(self.skipped),
            },
            "findings": [f.to_dict() for f in self.sorted_findings()],
            "skipped": [s.to_dict() for s in self.skipped],
            "not_judged": self.not_judged(),
        }
        out.update({k: v for k, v in self.extra.items() if k != "text_sections"})  # text-only extras
        return out
