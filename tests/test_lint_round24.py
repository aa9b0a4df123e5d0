"""Round 24 (issue 25, round 21): false-positive classes left by fr136-fr143, each with a trigger and a quiet
fixture (fixtures/lint/r24/)."""
from __future__ import annotations

import ast
from pathlib import Path

from ddpdoctor.lint import conditions as cond
from ddpdoctor.lint.api import lint_paths

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures" / "lint" / "r24"


def found(name: str, rid: str, severity: str = ""):
    return [f for f in lint_paths([str(FIX / name)]).findings
            if f.id == rid and (not severity or f.severity == severity)]


def test_lint013_a_rank_flag_in_a_conditional_expression_or_a_settings_field_rewritten_from_it_is_quiet():
    # `wandb.log(...) if not disable_tqdm and use_wandb else None` in a function defined above
    # `disable_tqdm = rank != 0`; `cfg["enable_tb"] = False if disable_tqdm else cfg["enable_tb"]` then
    # `SummaryWriter(...) if cfg["enable_tb"] else None`; `args.save = args.save and rank == 0`
    assert found("rank_flag_conditional_ok.py", "LINT013") == []


def test_lint013_the_same_shapes_without_a_rank_flag_still_warn():
    # a conditional expression on a module constant, a settings field rewritten from `args.quiet`, an ungated save;
    # `if not quiet and use_wandb` (parameters nobody shows to be the same on every rank) stays a note, as the
    # same test in an if-block does
    assert [f.evidence["line"] for f in found("rank_flag_conditional_bad.py", "LINT013", "warning")] == [21, 32, 35]
    assert [f.evidence["line"] for f in found("rank_flag_conditional_bad.py", "LINT013", "info")] == [20]


def test_a_conditional_value_false_on_the_other_ranks_is_a_rank_0_flag():
    flags = {"disable_tqdm": ast.parse("rank != 0", mode="eval").body}
    for text in ("False if disable_tqdm else cfg['x']", "cfg['x'] if rank == 0 else None"):
        assert cond.is_rank_test(ast.parse(text, mode="eval").body, flags), text
    for text in ("True if disable_tqdm else cfg['x']", "cfg['x'] if quiet else None"):
        assert not cond.is_rank_test(ast.parse(text, mode="eval").body, flags), text
