"""Round 26 (issue 25): precision classes left by fr148-fr150, each with a trigger and a quiet fixture
(fixtures/lint/r26/)."""
from __future__ import annotations

from lint_fixture_walk import Fixtures

FIX = Fixtures("r26")
found = FIX.found


def test_lint002_a_node_count_assigned_only_the_literal_1_is_one_node_a_note():
    assert found("spawn_nodes_literal_one_ok.py", "LINT002") == [(31, "info")]


def test_lint002_a_node_count_from_an_option_with_a_loopback_rendezvous_still_warns():
    assert found("spawn_nodes_option_bad.py", "LINT002") == [(32, "warning")]


def test_lint013_the_same_bytes_on_every_rank_are_notes():
    # `shutil.copy(a.config, out)`, `json.dump(a.__dict__, f)`, `results_file.write_text(ckpt["training_results"])`
    # with ckpt from torch.load just above (a later `ckpt = {...}` for the save does not count)
    assert found("same_bytes_writes_ok.py", "LINT013") == [(16, "info"), (20, "info"), (26, "info")]


def test_lint013_a_copied_checkpoint_and_results_the_run_computed_still_warn():
    assert found("same_bytes_writes_bad.py", "LINT013") == [(19, "warning"), (25, "warning")]


def test_lint032_a_multiplication_only_in_the_multi_process_branch_is_a_note():
    # YOLOv5: `if RANK != -1: loss *= WORLD_SIZE` on a loss summed over the batch
    assert found("loss_times_world_ddp_branch_ok.py", "LINT032") == [(17, "info")]


def test_lint032_the_same_multiplication_on_every_launch_still_warns():
    assert found("loss_times_world_always_bad.py", "LINT032") == [(15, "warning")]


def test_lint019_a_return_on_a_hook_stop_flag_nothing_sets_is_a_note():
    # YOLOv5's `if callbacks.stop_training: return` under `if RANK in {-1, 0}:` (data/lint_hook_flags.json);
    # the return leaves both loops, one finding each
    assert found("hook_flag_return_ok.py", "LINT019") == [(31, "info"), (31, "info")]


def test_lint019_the_same_return_warns_when_a_callback_of_the_files_linted_sets_the_flag():
    assert found("hook_flag_return_set_bad.py", "LINT019") == [(36, "warning"), (36, "warning")]


def test_lint042_a_str_int_rank_test_beside_a_rank_test_of_its_own_is_a_note():
    assert found("env_rank_or_main_ok.py", "LINT042") == [(12, "info")]


def test_lint042_the_same_comparison_beside_a_flag_that_tests_no_rank_still_warns():
    assert found("env_rank_or_other_bad.py", "LINT042") == [(9, "warning")]


def test_lint036_torch_compile_after_the_wrap_still_reads_through_the_wrapper():
    assert found("wrapper_attr_after_compile_bad.py", "LINT036") == [(29, "warning")]


def test_lint036_a_rebind_to_the_plain_model_before_the_compile_is_quiet():
    assert found("wrapper_attr_after_compile_ok.py", "LINT036") == []


def test_lint034_a_datasets_split_seeded_with_the_rank_warns():
    assert found("hf_split_rank_seed_bad.py", "LINT034") == [(17, "warning")]


def test_lint034_the_same_split_with_a_seed_every_rank_shares_is_quiet():
    assert found("hf_split_same_seed_ok.py", "LINT034") == []
