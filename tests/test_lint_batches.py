"""Classes found by the fresh first-read batches of the evidence method (fr20 on), each with a fixture of its own
under fixtures/lint/frNN/ (tests/test_lint_functional.py checks their lines); here what a line marker cannot say:
the severity, and why."""
from __future__ import annotations

from pathlib import Path

from ddpdoctor.lint.api import lint_paths

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "lint"


def found(rel: str, rule: str) -> list:
    return [f for f in lint_paths([str(FIX / rel)]).findings if f.id == rule]


# ---------------------------------------------------------------- fr20
def test_a_master_fallback_before_the_spawn_is_the_setting():
    [f] = found("fr20/spawn_fallback_bad.py", "LINT002")
    assert f.severity == "warning" and f.evidence["env_set_by_hand"] == ["MASTER_ADDR", "MASTER_PORT"]


def test_an_argparse_tcp_default_in_an_imported_options_module():
    [f] = found("fr20/options_module/main.py", "LINT002")
    assert f.evidence["init_method"] == "tcp://127.0.0.1:23456" and f.severity == "warning"


def test_torch_from_a_star_import_of_a_project_module():
    [f] = found("fr20/star_import/train.py", "LINT012")
    assert f.severity == "warning" and "backward" in f.evidence["why"]


def test_a_loader_restarted_by_iter_in_a_step_loop_repeats_its_order():
    [f] = found("fr20/endless_iter_bad.py", "LINT009")
    assert f.severity == "warning" and "iter()" in f.evidence["why"]


# ---------------------------------------------------------------- fr21
def test_a_rendezvous_from_configargparse_option_defaults():
    [f] = found("fr21/option_group_launcher/train.py", "LINT002")
    assert f.evidence["init_method"] == "tcp://localhost:10000" and f.severity == "warning"


def test_any_model_handed_to_accelerate_prepare_is_wrapped_whatever_its_name():
    [f] = found("fr21/prepared_generator_bad.py", "LINT007")
    assert f.evidence["model"] == "self.generator" and f.severity == "warning" and "buffers" in f.evidence["why"]


def test_data_parallel_in_a_class_nothing_constructs_is_a_note():
    [f] = found("fr21/vendored_trainer_dp.py", "LINT012")
    assert f.severity == "info" and "constructs Trainer" in f.evidence["why"]


def test_a_training_launcher_whose_address_is_not_shown_is_a_note():
    [f] = found("fr21/launcher_address_unknown.py", "LINT002")
    assert f.severity == "info" and "hand-rolled torchrun" in f.title
