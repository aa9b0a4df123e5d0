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


_EVERY_RANK_RULES = ("LINT011", "LINT013", "LINT028", "LINT038")


def test_a_test_method_only_the_spawning_parent_calls_is_quiet():
    # the held-out review's class: `Runner(cfg).test()` on the `__main__` path beside `Runner(cfg).train()`, whose
    # mp.spawn starts the ranks; test() asks dist.is_initialized() (a question, no join) and writes: one process
    got = [(f.id, f.evidence["line"]) for f in lint_paths([str(FIX / "spawning_class_test_in_parent_ok.py")],
                                                          preview=True).findings if f.id in _EVERY_RANK_RULES]
    assert got == []


def test_the_same_test_method_run_by_every_spawned_rank_keeps_its_warnings():
    got = [(f.id, f.evidence["line"], f.severity)
           for f in lint_paths([str(FIX / "spawning_class_test_in_worker_bad.py")], preview=True).findings
           if f.id in _EVERY_RANK_RULES]
    assert ("LINT011", 44, "warning") in got
    assert ("LINT013", 43, "warning") in got
    assert ("LINT028", 42, "warning") in got


def test_lint036_a_child_replaced_by_its_ddp_wrapper_and_read_by_the_outer_forward_is_a_warning():
    # `model.backbone = DDP(model.backbone)`, then Outer.forward calls self.backbone.encode(x): reported at the wrap
    assert found("child_replaced_by_wrapper_bad.py", "LINT036") == [(32, "warning")]


def test_lint036_a_replaced_child_only_called_read_through_module_or_asked_about_is_quiet():
    assert found("child_replaced_by_wrapper_ok.py", "LINT036") == []


def test_lint043_a_parser_imported_from_a_project_module_without_local_rank_is_a_warning():
    # train.py does `from opts import args`; opts.py parses the command line at import; run.sh launches train.py
    # with torch.distributed.launch (which appends --local-rank=N)
    assert found("imported_parser_bad/train.py", "LINT043") == [(6, "warning")]


def test_lint043_an_imported_parser_that_defines_both_spellings_is_quiet():
    assert found("imported_parser_ok/train.py", "LINT043") == []


def test_lint036_a_same_module_rebind_in_the_branch_that_does_not_wrap_ends_nothing():
    # `if distributed: model = DDP(model) else: model = model.to("cpu")`, then evaluate(model) reads net.predict
    assert found("wrapper_rebound_in_other_branch_bad.py", "LINT036") == [(21, "warning")]


def test_lint036_another_wrapper_in_the_other_branch_or_a_module_fallback_in_except_is_quiet():
    # `else: model = FSDP(model)` ends the walk; `try: net.predict(x) except AttributeError: net.module.predict(x)`
    assert found("wrapper_rebound_in_other_branch_ok.py", "LINT036") == []


def test_lint039_a_torchrun_launch_in_the_scripts_own_docstring_is_read_as_a_note():
    assert found("local_rank_own_comment_torchrun_bad.py", "LINT039") == [(18, "info")]


def test_lint039_a_launch_that_passes_local_rank_in_the_own_docstring_is_quiet():
    assert found("local_rank_own_comment_launch_ok.py", "LINT039") == []


def test_lint007_a_nested_function_forwarding_the_ddp_model_it_closes_over_on_rank_0_is_reported():
    assert found("nested_eval_closure_rank0_bad.py", "LINT007") == [(25, "warning")]


def test_lint007_nested_functions_on_the_plain_module_or_run_by_every_rank_are_quiet():
    assert found("nested_eval_closure_rank0_ok.py", "LINT007") == []


def test_lint041_a_datasets_filter_on_every_rank_is_reported_like_map():
    # Dataset.filter runs self.map(...) and writes the kept indices to a cache file (datasets arrow_dataset.py)
    assert [line for line, _sev in found("datasets_filter_every_rank_bad.py", "LINT041")] == [9]


def test_lint041_an_in_memory_filter_or_another_librarys_filter_is_quiet():
    assert found("datasets_filter_every_rank_ok.py", "LINT041") == []


def test_lint013_after_a_launch_check_on_the_ranks_presence_every_rank_writes():
    # `if -1 in [local_rank, world_size]: raise ...` asks whether a launcher set the rank, not which rank this is
    assert [line for line, _sev in found("unset_rank_exit_every_rank_bad.py", "LINT013")] == [22]


def test_lint013_the_no_launcher_path_and_a_rank_0_return_stay_quiet():
    assert found("unset_rank_exit_every_rank_ok.py", "LINT013") == []
