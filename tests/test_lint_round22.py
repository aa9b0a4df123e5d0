"""Round 22 (issue 25, third wave): false-positive classes left by fr139-fr141, each with a trigger and a quiet
fixture (fixtures/lint/r22/)."""
from __future__ import annotations

from pathlib import Path

from ddpdoctor.lint.api import lint_paths

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures" / "lint" / "r22"


def found(name: str, rid: str):
    return [f for f in lint_paths([str(FIX / name)]).findings if f.id == rid]


def test_lint018_a_node_term_that_is_the_literal_0_leaves_the_local_index():
    assert found("node_term_literal_zero_ok.py", "LINT018") == []


def test_lint018_a_node_index_times_the_gpus_per_node_still_warns():
    assert [f.evidence["line"] for f in found("node_term_index_bad.py", "LINT018")] == [13]


def test_lint028_a_second_check_then_makedirs_of_a_folder_the_function_made_is_quiet():
    assert [f.evidence["line"] for f in found("makedirs_second_time_ok.py", "LINT028")] == [15]


def test_lint028_a_second_creation_after_one_that_may_not_run_still_warns():
    assert [f.evidence["line"] for f in found("makedirs_second_time_bad.py", "LINT028")] == [15, 22]


def test_lint011_a_saved_config_object_is_no_checkpoint_but_the_model_load_beside_it_warns():
    # quiet: `config = torch.load(".../run.config")`, `train_cfg = torch.load(...)`; trigger: the model's own load
    assert [f.evidence["line"] for f in found("load_saved_config_ok.py", "LINT011")] == [18]


def test_ray_train_driver_code_runs_once_but_the_per_worker_function_runs_on_every_worker():
    # quiet: plots, json.dump and np.save in the driver after TorchTrainer.fit() and the 1.x Trainer.run(train_func=);
    # trigger: the ungated torch.save inside train_loop_per_worker
    assert [f.evidence["line"] for f in found("ray_driver_writes_ok.py", "LINT013")] == [26]


def test_ray_train_workers_facts_name_their_sources():
    import json
    facts = json.loads((ROOT / "ddpdoctor" / "data" / "launchers.json").read_text())["ray_train_workers"]
    assert "TorchTrainer" in facts["classes"] and facts["keyword"] == "train_loop_per_worker"
    assert all(len(s["commit"]) == 40 and s["repo"] == "ray-project/ray" for s in facts["sources"])


def test_a_ddp_setting_of_training_arguments_is_no_multi_process_launch():
    assert found("trainer_ddp_setting_one_process_ok.py", "LINT013") == []


def test_an_fsdp_setting_of_training_arguments_still_shows_one():
    assert [f.evidence["line"] for f in found("trainer_fsdp_setting_bad.py", "LINT013")] == [14]


def test_lint034_a_split_the_spawning_parent_draws_once_and_hands_to_the_ranks_is_quiet():
    assert found("split_in_spawning_parent_ok.py", "LINT034") == []


def test_lint034_the_same_split_drawn_in_the_spawned_function_still_warns():
    assert [f.evidence["line"] for f in found("split_in_spawned_rank_bad.py", "LINT034")] == [13]
