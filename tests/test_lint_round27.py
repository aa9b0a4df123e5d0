"""Round 27 (issue 25, round 22 of the project): precision classes and misses left by fr136-fr153, each with a trigger
and a quiet fixture (fixtures/lint/r27/)."""
from __future__ import annotations

from lint_fixture_walk import Fixtures

FIX = Fixtures("r27")
found = FIX.found


def test_lint022_process_launches_handing_in_a_loopback_init_method_are_one_node_a_note():
    # Process(target=main, kwargs={"local_rank": 0, ..., "init_method": "tcp://localhost:9999"}) read back as
    # kwargs["init_method"]: every launch dials this machine (fr152 CodeMonk123/torch_dist_demo class)
    assert found("process_kwargs_loopback_ok.py", "LINT022") == [(13, "info")]


def test_lint022_a_launch_handing_in_another_address_keeps_the_warning():
    assert found("process_kwargs_cluster_bad.py", "LINT022") == [(12, "warning")]


def test_lint013_save_function_accelerator_save_with_safetensors_still_races_the_weights():
    # transformers' save_pretrained uses save_function only with safe_serialization=False (True by default from
    # 4.35): every rank writes the safetensors weights; the title says what is raced
    [(line, sev)] = found("save_function_accelerator_bad.py", "LINT013")
    assert (line, sev) == (22, "warning")
    [f] = FIX.findings("save_function_accelerator_bad.py", "LINT013")
    assert f.evidence["save_function"] == "weights" and "safetensors" in f.title


def test_lint013_save_function_accelerator_save_without_safetensors_races_only_the_config_a_note():
    assert found("save_function_accelerator_ok.py", "LINT013") == [(21, "info")]


def test_lint013_a_helper_gated_after_training_and_called_in_a_mode_that_returns_before_the_group_is_quiet():
    assert found("helper_pre_group_mode_ok.py", "LINT013") == []


def test_lint013_the_same_mode_that_goes_on_to_train_keeps_the_warning():
    assert found("helper_pre_group_mode_bad.py", "LINT013") == [(15, "warning")]


def test_lint038_save_pretrained_with_is_main_process_still_writes_the_weights_into_each_ranks_folder():
    # transformers' save_pretrained gates only the config on is_main_process; the shard loop writes on every caller
    assert found("clock_dir_save_pretrained_bad.py", "LINT038") == [(24, "warning")]


def test_lint038_save_pretrained_that_writes_only_on_the_main_process_leaves_empty_folders_a_note():
    assert found("clock_dir_save_pretrained_ok.py", "LINT038") == [(23, "info")]


def test_lint019_a_return_under_a_rank_test_before_a_barrier_every_rank_enters():
    assert found("rank0_return_before_barrier_bad.py", "LINT019") == [(16, "warning")]


def test_lint019_a_return_decided_outside_the_rank_test_or_before_no_collective_is_quiet():
    assert found("rank0_return_before_barrier_ok.py", "LINT019") == []


def test_lint029_a_ddp_model_handed_on_through_a_trainer_objects_methods_to_module_get_loss():
    assert found("module_method_through_trainer_bad.py", "LINT029") == [(24, "warning")]


def test_lint029_the_same_hand_over_calling_the_ddp_model_itself_is_quiet():
    assert found("module_method_through_trainer_ok.py", "LINT029") == []


def test_lint033_a_port_each_spawned_worker_draws_and_hands_to_its_setup_helper():
    assert found("port_handed_to_setup_bad.py", "LINT033") == [(12, "warning")]


def test_lint033_a_port_drawn_once_in_the_parent_and_handed_through_spawn_is_quiet():
    assert found("port_handed_to_setup_ok.py", "LINT033") == []


def test_lint013_json_derived_from_imagefolder_class_to_idx_is_the_same_bytes_a_note():
    assert found("class_index_json_ok.py", "LINT013") == [(16, "info")]


def test_lint013_the_same_json_with_a_rank_dependent_entry_keeps_the_warning():
    assert found("class_index_json_bad.py", "LINT013") == [(16, "warning")]
