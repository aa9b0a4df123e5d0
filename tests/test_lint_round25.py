"""Round 25 (issue 25, round 21, lint25): classes left by fr145-fr147, each with a trigger and a quiet fixture
(fixtures/lint/r25/)."""
from __future__ import annotations

from pathlib import Path

from ddpdoctor.lint.api import lint_paths

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures" / "lint" / "r25"


def found(name: str, rid: str, severity: str = ""):
    return [f for f in lint_paths([str(FIX / name)]).findings
            if f.id == rid and (not severity or f.severity == severity)]


def test_lint025_wait_for_everyone_inside_a_main_process_block_warns_beside_an_ungated_one():
    # the loop's own wait_for_everyone() on every process does not pair the one under is_main_process (fr147
    # lrzjason/T2ITrainer); a save helper ending in a barrier, called under is_main_process (fr147 HashWang-null/Concept)
    lines = sorted(f.evidence["line"] for f in found("wait_inside_main_bad.py", "LINT025"))
    assert lines == [28, 31]


def test_lint025_the_pairing_idiom_and_a_helper_called_on_every_process_are_quiet():
    assert found("wait_inside_main_ok.py", "LINT025") == []
