"""Round 34 (issue 25, round 25 of the project, lint34): classes of the held-out review of round 24, each with a
trigger and a quiet fixture (fixtures/lint/r34/). Pure lint runs: no process is launched."""
from __future__ import annotations

from lint_fixture_walk import Fixtures

FIX = Fixtures("r34")


def found(name: str, rid: str, preview: bool = True):
    return FIX.found(name, rid, preview=preview)


def test_lint022_a_local_rank_field_that_holds_the_global_rank_is_quiet():
    # `args.local_rank = int(os.environ["RANK"]) if "RANK" in os.environ else 0`: the value is the global rank
    assert found("local_rank_name_holds_global_ok.py", "LINT022") == []


def test_lint022_the_same_shape_with_local_rank_keeps_the_warning():
    assert found("local_rank_name_holds_local_bad.py", "LINT022") == [(9, "warning")]


def test_lint036_a_read_in_the_arm_that_never_wraps_or_after_a_for_rebind_is_quiet():
    assert found("wrapper_other_arm_ok.py", "LINT036") == []


def test_lint036_a_read_after_the_if_whose_arm_wraps_keeps_the_warning():
    assert found("wrapper_after_the_if_bad.py", "LINT036") == [(12, "warning")]


def test_lint036_the_wrapper_handed_to_a_helper_that_reads_through_it_is_a_warning():
    # the mirror miss of round 24's held-out set C: the wrapped model reaches the read through a helper's parameter
    assert found("wrapper_handed_to_helper_bad.py", "LINT036") == [(9, "warning")]


def test_lint036_helpers_that_unwrap_or_get_the_wrapped_model_are_quiet():
    assert found("wrapper_handed_to_helper_ok.py", "LINT036") == []


def test_lint022_datasets_shard_and_split_by_node_given_the_local_rank_are_notes():
    assert found("shard_local_rank_bad.py", "LINT022") == [(13, "info"), (14, "info")]


def test_lint022_datasets_shard_given_the_global_rank_or_another_librarys_shard_is_quiet():
    assert found("shard_global_rank_ok.py", "LINT022") == []


def test_lint036_a_module_read_in_the_same_arm_does_not_hide_the_read_through_the_wrapper():
    # fr166 Coriolis0120/latent_cot_rl (a miss): `model.module if hasattr(model, "module")` late in the block
    assert found("wrapper_module_in_same_arm_bad.py", "LINT036") == [(14, "warning")]


def test_lint036_a_module_read_in_the_other_arm_keeps_the_plain_arm_quiet():
    assert found("wrapper_module_in_other_arm_ok.py", "LINT036") == []
