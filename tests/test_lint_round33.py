"""Round 33 (issue 25, round 24 of the project, lint33): classes of fr165's wrong and debatable findings, each with a
trigger and a quiet fixture (fixtures/lint/r33/). Pure lint runs: no process is launched."""
from __future__ import annotations

from lint_fixture_walk import Fixtures

FIX = Fixtures("r33")
found = FIX.found


def test_lint042_a_read_compared_with_its_own_int_default_is_quiet():
    # `os.environ.get("LOCAL_RANK", -1) != -1` asks whether the variable is set (fr165 Trackron, wrong)
    assert found("env_presence_test_ok.py", "LINT042") == []


def test_lint042_a_read_compared_with_another_int_than_its_default_keeps_the_warning():
    assert found("env_default_other_int_bad.py", "LINT042") == [(9, "warning"), (11, "warning")]


def test_lint026_a_caller_that_averages_through_a_project_helper_is_quiet():
    # the caller waits on the SUM handles, then `average_grads(model, world_size)` divides every gradient
    # (fr165 autokernel-halo-strix, wrong x2)
    assert found("grad_sum_helper_averages_ok.py", "LINT026") == []


def test_lint026_a_helper_that_does_not_divide_the_gradients_keeps_the_warning():
    assert found("grad_sum_helper_clips_bad.py", "LINT026") == [(13, "warning")]


def test_lint024_a_save_load_round_trip_of_the_ranks_own_model_is_quiet():
    # rank 0 saves the DDP model to a path and loads that same path back (fr165 accentedness-scalar-routing, wrong)
    assert found("rank0_save_load_round_trip_ok.py", "LINT024") == []


def test_lint024_a_load_of_another_file_after_a_save_keeps_the_warning():
    assert found("rank0_load_other_file_bad.py", "LINT024") == [(22, "warning")]
