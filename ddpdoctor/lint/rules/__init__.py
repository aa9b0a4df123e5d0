"""Lint rules, one module per rule or small group. `registry.load_lint_rules()` imports them all.

Each rule is registered in the same registry as the checks, with `kind="rule"` and family "lint",
so `ddpdoctor explain LINT001` and `ddpdoctor checks` document them like any check. A rule takes a
`ddpdoctor.lint.engine.Target` and yields findings built with `target.finding(...)`, which adds the
`line:N` and `path:<file>` subjects.
"""
from __future__ import annotations

from typing import Callable, Sequence

from ...model.registry import check


def rule(id: str, slug: str, *, catalogue: Sequence[str] = (), **extra) -> Callable:
    """Register a lint rule: `@rule("LINT001", "trainer-under-spawn", catalogue=("A1", "A5"))`."""
    return check(id, slug, family="lint", kind="rule", when=("lint",), catalogue=catalogue, **extra)
