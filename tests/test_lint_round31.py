"""Round 31 (issue 25, round 24 of the project, lint31): classes of fr160-fr162's wrong and debatable findings and of
round 23's held-out review, each with a trigger and a quiet fixture (fixtures/lint/r31/). Pure lint runs: no process
is launched."""
from __future__ import annotations

from lint_fixture_walk import Fixtures

FIX = Fixtures("r31")
found = FIX.found


def test_lint022_local_rank_in_a_group_of_local_world_size_is_a_note():
    # rank=LOCAL_RANK, world_size=LOCAL_WORLD_SIZE: the group is the node's processes (fr162 sophgo/torch-tpu, wrong)
    assert found("init_local_world_ok.py", "LINT022") == [(10, "info")]


def test_lint022_local_rank_in_a_world_of_every_node_keeps_the_warning():
    assert found("init_local_rank_global_world_bad.py", "LINT022") == [(9, "warning")]


def test_lint022_a_field_named_local_rank_that_stores_rank_is_quiet():
    # `args.local_rank = int(os.environ["RANK"])`, `self.local_rank = int(os.environ["RANK"])` (round 23 set C, wrong)
    assert found("init_local_named_global_ok.py", "LINT022") == []


def test_lint022_the_same_fields_storing_local_rank_keep_the_warning():
    assert found("init_local_named_local_bad.py", "LINT022") == [(15, "warning"), (19, "warning")]


def test_lint022_rank_and_size_switched_together_in_a_branch_stay_one_node():
    # LOCAL_RANK + LOCAL_WORLD_SIZE, then `if ...: rank = OMPI_COMM_WORLD_RANK; world_size = OMPI_COMM_WORLD_SIZE`
    assert found("init_local_world_branch_ok.py", "LINT022") == [(13, "info")]


def test_lint022_a_branch_that_switches_only_the_size_keeps_the_warning():
    assert found("init_local_world_branch_bad.py", "LINT022") == [(11, "warning")]


def test_lint026_a_loss_scaled_by_the_global_batch_the_file_splits_over_ranks_is_quiet():
    # ((1 / global_batch_size) * loss).backward() then all_reduce SUM, `global_batch_size // world_size` the loader's
    # batch (fr162 birdswimming/trm-multi, judged wrong)
    assert found("grad_sum_global_batch_ok.py", "LINT026") == []


def test_lint026_the_same_scale_by_a_count_never_split_over_ranks_keeps_the_warning():
    # the name says global; nothing in the file relates it to the world size
    assert found("grad_sum_local_batch_bad.py", "LINT026") == [(23, "warning")]


def test_lint012_dataparallel_beside_fastmoe_ddp_is_the_fallback_note():
    # `from fmoe.distributed import DistributedGroupedDataParallel as DDP` in one arm (fr162 ChenfhCS/MoE, debatable)
    assert found("dp_beside_fmoe_ddp_ok.py", "LINT012") == [(21, "info")]


def test_lint012_a_project_class_of_the_same_name_is_no_ddp_and_keeps_the_warning():
    assert found("dp_beside_unknown_wrapper_bad.py", "LINT012") == [(21, "warning")]


def test_lint018_device_strings_built_from_the_global_rank():
    # "cuda:" + str(rank), "cuda:%d" % rank, f"cuda:{rank}" if cuda else "cpu" (round 23 held-out set C's misses)
    assert found("device_string_global_rank_bad.py", "LINT018") == [(14, "warning"), (20, "warning"), (26, "warning")]


def test_lint018_the_same_strings_from_the_local_rank_are_quiet():
    assert found("device_string_local_rank_ok.py", "LINT018") == []


def test_lint022_local_rank_stored_in_a_field_from_the_constructor():
    # Trainer(int(os.environ["LOCAL_RANK"]), ...) -> self.rank = rank -> init_process_group(rank=self.rank)
    assert found("init_field_from_local_param_bad.py", "LINT022") == [(15, "warning")]


def test_lint022_the_field_handed_the_global_rank_is_quiet():
    assert found("init_field_from_global_param_ok.py", "LINT022") == []


def test_lint044_an_async_collective_whose_handle_is_dropped():
    assert found("async_handle_dropped_bad.py", "LINT044") == [(16, "warning")]


def test_lint044_handles_kept_and_waited_or_a_device_synchronize_are_quiet():
    assert found("async_handle_waited_ok.py", "LINT044") == []


def test_lint044_is_a_note_by_default_until_measured():
    from ddpdoctor.lint import engine
    f = FIX.findings("async_handle_dropped_bad.py", "LINT044")[0]
    assert engine.earned_severity(f, False).severity == "info"
    assert engine.earned_severity(f, engine.PREVIEW).severity == "warning"


def test_lint045_a_scheduler_built_on_every_rank_stepped_on_rank_0_only():
    assert found("scheduler_rank0_bad.py", "LINT045") == [(25, "warning")]


def test_lint045_stepped_on_every_rank_or_built_under_the_same_gate_is_quiet():
    assert found("scheduler_every_rank_ok.py", "LINT045") == []


def test_lint046_cuda_before_set_device_lands_on_gpu_0():
    assert found("cuda_before_set_device_bad.py", "LINT046") == [(14, "warning")]


def test_lint046_set_device_first_or_the_other_arm_is_quiet():
    assert found("cuda_after_set_device_ok.py", "LINT046") == []


def test_lint044_reads_each_function_s_synchronize_calls_once(monkeypatch):
    """robust24's cell: 10,000 dropped handles in one function took 41 s (the function's calls rescanned per handle).
    The scan is made once per function: counted, not timed."""
    from ddpdoctor.lint import lint_source
    from ddpdoctor.lint.rules import async_handle

    scans = []
    real = async_handle._last_sync
    monkeypatch.setattr(async_handle, "_last_sync", lambda scope, memo: (scans.append(id(scope) in memo), real(scope, memo))[1])
    src = "import torch.distributed as dist\n\ndef f(t):\n" + "    dist.all_reduce(t, async_op=True)\n" * 50
    found = [f for f in lint_source(src, "t.py", preview=True) if f.id == "LINT044"]
    assert len(found) == 50 and scans.count(False) == 1 and len(scans) == 50
