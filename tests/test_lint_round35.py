"""Round 35 (issue 25, round 25 of the project, lint35): classes of fr167's misses, each with a trigger and a quiet
fixture (fixtures/lint/r35/). Pure lint runs: no process is launched."""
from __future__ import annotations

from pathlib import Path

from ddpdoctor.lint.api import lint_paths

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures" / "lint" / "r35"


def found(name: str, rid: str, preview: bool = True):
    return [(f.evidence["line"], f.severity) for f in lint_paths([str(FIX / name)], preview=preview).findings
            if f.id == rid]


def test_lint025_trainer_evaluate_under_the_main_process_test_is_a_warning():
    # transformers' evaluation_loop gathers the losses with accelerator.gather_for_metrics (an all_gather)
    assert found("trainer_evaluate_rank0_bad.py", "LINT025") == [(15, "warning")]


def test_lint025_trainer_evaluate_on_every_rank_or_another_classs_evaluate_is_quiet():
    assert found("trainer_evaluate_every_rank_ok.py", "LINT025") == []


def test_lint038_a_config_item_named_from_the_clock_on_every_rank_is_reported():
    # `config["train"]["save_path"] = os.path.join(..., stamp)` then os.makedirs(config["train"]["save_path"])
    assert found("clock_dir_in_config_item_bad.py", "LINT038") == [(13, "info")]


def test_lint038_config_items_named_from_the_date_or_a_shared_stamp_are_quiet():
    assert found("clock_dir_in_config_item_ok.py", "LINT038") == []
