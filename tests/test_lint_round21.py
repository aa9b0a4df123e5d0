"""Round 21 (issue 25, second wave): classes left by fr136-fr138, each with a trigger and a quiet fixture
(fixtures/lint/r21/)."""
from __future__ import annotations

from pathlib import Path

from ddpdoctor.lint.api import lint_paths

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures" / "lint" / "r21"


def found(path: Path, rid: str, preview: bool = True):
    return [f for f in lint_paths([str(path)], preview=preview).findings if f.id == rid]


def test_lint019_step_counter_breaks_are_never_a_per_rank_metric():
    # the counter under `if accelerator.sync_gradients:` and the one kept in self.global_step beside self.log(...)
    assert found(FIX / "step_counter_break_ok.py", "LINT019") == []


def test_lint019_an_early_stopping_object_fed_this_ranks_loss_is_still_found():
    got = found(FIX / "early_stop_object_bad.py", "LINT019")
    assert [f.evidence["line"] for f in got] == [33]
