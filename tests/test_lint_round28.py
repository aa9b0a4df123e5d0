"""Round 28 (issue 25, round 22 of the project, lint28): precision classes left by fr155 and fr157, each with a trigger
and a quiet fixture (fixtures/lint/r28/). Pure lint runs: no process is launched."""
from __future__ import annotations

from lint_fixture_walk import Fixtures

FIX = Fixtures("r28")
found = FIX.found


def test_lint021_rank0_state_dicts_in_arms_that_leave_fsdp_out_are_quiet():
    # `elif global_rank == 0:` of `if args.fsdp:` (fr155 evseevgrv) and `if (not is_distributed) or is_ddp:` (fr157
    # karlstratos/minGPU): the model there is DDP or plain, FSDP wraps only in the other arm
    assert found("fsdp_mode_arms_ok.py", "LINT021") == []


def test_lint021_rank0_state_dicts_in_the_fsdp_arm_keep_the_warning():
    assert found("fsdp_mode_arms_bad.py", "LINT021") == [(28, "warning"), (32, "warning")]


def test_lint013_saves_in_the_single_gpu_mode_arm_run_in_one_process():
    # `--single_gpu` ("disable ddp, single_gpu", GaLore/ReLoRA torchrun_main.py family): the body of
    # `if args.single_gpu:` and the else of `if not args.single_gpu:` are one process (fr155 poet x3, VLoRP)
    assert found("single_gpu_mode_save_ok.py", "LINT013") == []


def test_lint013_an_ungated_save_in_the_ddp_arm_of_the_single_gpu_mode_keeps_the_warning():
    assert found("single_gpu_mode_save_bad.py", "LINT013") == [(24, "warning")]


def test_lint013_a_save_after_an_unconditional_raise_never_runs():
    # `def save_model_fsdp(...): raise RuntimeError(...)` then the old save code (fr155 ReLoRa, CAGE_capping)
    assert found("save_after_raise_ok.py", "LINT013") == []


def test_lint013_a_raise_in_a_nested_helper_leaves_the_save_after_it_live():
    assert found("save_after_raise_bad.py", "LINT013") == [(13, "warning")]


def test_lint026_a_closure_hook_made_in_a_method_summed_and_divided_by_a_sibling_method_is_quiet():
    # make_hook -> hook in __init__ all-reduces SUM async; finish_gradient_synchronization() divides (fr157
    # aarjunsrinivasan/distributed_training)
    assert found("hook_closure_divided_ok.py", "LINT026") == []


def test_lint026_the_same_closure_hooks_never_divided_keep_the_warning():
    assert found("hook_closure_summed_bad.py", "LINT026") == [(15, "warning")]


def test_lint019_a_step_budget_from_a_line_count_comprehension_is_not_a_per_rank_metric():
    # `dataset_size = sum(1 for _ in f)`: the comprehension's `_` is its own, not the `_` of
    # `_, _ = evaluate(...)` (fr155 shikhar-srivastava/multilingual-eleuther x2)
    assert found("step_budget_comprehension_ok.py", "LINT019") == []


def test_lint019_the_same_stop_reading_this_ranks_eval_loss_keeps_the_warning():
    assert found("step_budget_comprehension_bad.py", "LINT019") == [(37, "warning")]


def test_lint016_gradients_reduced_to_one_rank_by_hand_are_synchronised():
    # dist.reduce(param.grad.data, MASTER, op=SUM), MASTER steps, parameters broadcast back (fr155
    # mingman514/torch_distributed_ml)
    assert found("grad_reduce_to_master_ok.py", "LINT016") == []


def test_lint016_only_the_loss_reduced_to_one_rank_keeps_the_warning():
    assert found("grad_reduce_to_master_bad.py", "LINT016") == [(16, "warning")]

