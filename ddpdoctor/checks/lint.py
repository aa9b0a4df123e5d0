"""The bridge from `check --script train.py` to the linter: lint findings inside the check report.

`api.run_check` stores `ddpdoctor.lint.api.lint_section(scripts)` as the snapshot's `lint` section.
This check replays those findings. They keep the ID of the lint rule that produced them (LINT001,
not this check's LINT000), so `explain` and the docs point at the right rule.
"""
from __future__ import annotations

from ddpdoctor.model import SEVERITIES, Finding
from ddpdoctor.model.registry import check


class RuleFinding(Finding):
    """A finding that already carries its rule's identity; the check runner must not re-stamp it."""

    def stamped(self, id: str, name: str, family: str) -> "Finding":
        if self.id:
            return self
        return super().stamped(id, name, family)


@check("LINT000", "script-lint", family="lint", needs=("lint",))
def script_lint(snap):
    """Static analysis of the training scripts given with `check --script`.

    What it checks
        Runs every `ddpdoctor lint` rule (LINT001-LINT034) over the scripts named by
        `ddpdoctor check --script train.py` and reports their findings with the machine checks.
        Skipped when no script was given.

    Why it matters
        Some faults are visible in the source before anything runs, and a few only matter on
        this machine (spawned workers, GPUs): seeing both in one report ties them together.

    Example
        ddpdoctor check --script train.py

    Fix
        Each finding names its own rule; `ddpdoctor explain LINT001` explains it.
    """
    section = snap["lint"]
    for item in section.get("findings") or ():
        if not isinstance(item, dict) or item.get("severity") not in SEVERITIES:
            continue
        yield RuleFinding(
            item["severity"], str(item.get("title", "")), detail=str(item.get("detail", "")),
            fix=str(item.get("fix", "")), subjects=list(item.get("subjects") or ()),
            evidence=dict(item.get("evidence") or {}), id=str(item.get("id") or ""),
            name=str(item.get("name") or ""), family=str(item.get("family") or "lint"),
        )
