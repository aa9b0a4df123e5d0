"""Round 20 (issue 25): classes left by round 19's batches, each with a trigger and a quiet fixture
(fixtures/lint/r20/)."""
from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

from ddpdoctor.lint.api import lint_paths
from ddpdoctor.lint.engine import lint_source

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures" / "lint" / "r20"


def found(path: Path, rid: str, preview: bool = True):
    return [f for f in lint_paths([str(path)], preview=preview).findings if f.id == rid]


def snippet(src: str, rid: str):
    return [f for f in lint_source(textwrap.dedent(src), "train.py") if f.id == rid]


def test_lint038_follows_a_clock_named_folder_returned_by_a_helper_and_kept_in_an_attribute():
    got = found(FIX / "wallclock_helper_bad.py", "LINT038")
    assert [(f.evidence["line"], f.evidence["name"]) for f in got] == [(21, "self.ckpt_dir"), (27, "run_dir")]


def test_lint038_a_helper_folder_shared_from_rank_0_or_a_helper_returning_a_duration_is_quiet():
    assert found(FIX / "wallclock_helper_ok.py", "LINT038") == []


def test_lint016_horovod_optimizer_never_wrapped_is_anchored_at_the_optimizer_and_cites_horovod():
    got = found(FIX / "horovod_unwrapped_bad.py", "LINT016")
    assert [f.evidence["line"] for f in got] == [9]
    assert got[0].evidence["init_line"] == 7 and "horovod/torch/optimizer.py" in got[0].evidence["source"]
    assert "DistributedOptimizer" in got[0].fix


def test_lint016_horovod_distributed_optimizer_or_a_hand_allreduce_of_gradients_is_quiet():
    assert found(FIX / "horovod_wrapped_ok.py", "LINT016") == []
    assert found(FIX / "horovod_hand_allreduce_ok.py", "LINT016") == []


def test_lint029_covers_forward_methods_and_attribute_chains_of_module():
    got = found(FIX / "ddp_module_chain_bad.py", "LINT029")
    assert [f.evidence["line"] for f in got] == [30, 41, 52]


def test_lint029_module_state_dict_and_no_grad_evaluation_beside_the_ddp_forward_are_quiet():
    assert found(FIX / "ddp_module_chain_ok.py", "LINT029") == []


def test_lint019_per_rank_early_stop_on_an_unshared_metric_is_found_at_the_break():
    got = found(FIX / "early_stop_per_rank_bad.py", "LINT019")
    assert [f.evidence["line"] for f in got] == [35, 48]
    assert all("early stopping" in f.evidence["per_rank"] and "all_reduce" in f.fix for f in got)
    assert "distributed_c10d.py" in got[0].evidence["source"]


def test_lint019_reduced_metric_broadcast_decision_or_a_step_counter_is_quiet():
    assert found(FIX / "early_stop_shared_ok.py", "LINT019") == []


def test_lint019_metric_from_a_function_defined_elsewhere_or_a_single_process_file_is_quiet():
    src = """
        import torch
        from evaluation import validate
        def train(model, opt, patience):
            bad = 0
            for epoch in range(10):
                model(torch.randn(2, 2)).sum().backward()
                opt.step()
                if validate(model) > 1.0:
                    bad += 1
                if bad >= patience:
                    break
        """
    assert snippet("import torch.distributed as dist\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"
                   + textwrap.dedent(src) + "dist.init_process_group('gloo')\ntrain(DDP(torch.nn.Linear(2, 2)), None, 3)\n",
                   "LINT019") == []
    single = """
        import torch
        def train(model, opt):
            while True:
                loss = model(torch.randn(2, 2)).sum()
                loss.backward()
                opt.step()
                if loss.item() < 1e-3:
                    break
        """
    assert snippet(single, "LINT019") == []


def test_lint040_zero3_state_dict_saved_as_is_from_a_config_dict_or_a_named_json():
    got = found(FIX / "zero3_dict_bad.py", "LINT040")
    assert [(f.evidence["line"], f.evidence["model"]) for f in got] == [(15, "engine.module")]
    assert "partition_parameters.py" in got[0].evidence["source"] and "save_16bit_model" in got[0].fix
    named = found(FIX / "zero3_project" / "train_named_config_bad.py", "LINT040")
    assert [(f.evidence["line"], f.evidence["model"]) for f in named] == [(23, "model")]
    assert "ds_zero3.json" in named[0].evidence["zero3"]


def test_lint040_gathered_weights_or_stage_2_are_quiet():
    assert found(FIX / "zero3_gathered_ok.py", "LINT040") == []
    assert found(FIX / "zero3_project" / "train_stage2_ok.py", "LINT040") == []


def test_lint040_reads_the_projects_deepspeed_configs_when_the_script_names_none(tmp_path):
    script = (FIX / "zero3_dict_bad.py").read_text().replace(
        'DS_CONFIG = {"train_batch_size": 8, "zero_optimization": {"stage": 3}, "fp16": {"enabled": True}}',
        "import sys\nDS_CONFIG = sys.argv[1]")
    (tmp_path / "train.py").write_text(script)
    (tmp_path / "README.md").write_text("deepspeed train.py configs/zero.json\n")
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "zero.json").write_text('{"zero_optimization": {"stage": 3}}')
    got = found(tmp_path / "train.py", "LINT040")
    assert [f.evidence["line"] for f in got] == [16] and "configs/zero.json" in got[0].evidence["zero3"]
    (tmp_path / "configs" / "zero2.json").write_text('{"zero_optimization": {"stage": 2}}')
    assert found(tmp_path / "train.py", "LINT040") == []   # one stage-2 config: the stage is not shown


def test_lint041_datasets_map_on_every_rank_of_a_torchrun_launch():
    got = found(FIX / "datasets_project" / "run_clm_bad.py", "LINT041")
    assert [(f.evidence["line"], f.evidence["load_line"]) for f in got] == [(11, 10)]
    assert "training_args.py" in got[0].evidence["source"] and "main_process_first" in got[0].fix


def test_lint041_main_process_first_keep_in_memory_or_streaming_is_quiet_and_each_guard_counts(tmp_path):
    ok = FIX / "datasets_project"
    assert found(ok / "run_clm_ok.py", "LINT041") == []
    shutil.copy(ok / "README.md", tmp_path / "README.md")
    src = (ok / "run_clm_ok.py").read_text()
    (tmp_path / "run_clm_ok.py").write_text(src.replace('    with training_args.main_process_first(desc="tokenize"):\n'
                                                        '        tokenized', '    if True:\n        tokenized'))
    assert [f.evidence["line"] for f in found(tmp_path / "run_clm_ok.py", "LINT041")] == [12]
    (tmp_path / "run_clm_ok.py").write_text(src.replace(", keep_in_memory=True", ""))
    assert [f.evidence["line"] for f in found(tmp_path / "run_clm_ok.py", "LINT041")] == [13]


def test_lint041_a_script_nothing_launches_multi_process_is_quiet(tmp_path):
    shutil.copy(FIX / "datasets_project" / "run_clm_bad.py", tmp_path / "run_clm_bad.py")
    assert found(tmp_path / "run_clm_bad.py", "LINT041") == []


def test_lint038_a_clock_named_attribute_written_through_a_helper_parameter():
    got = found(FIX / "wallclock_through_helper_bad.py", "LINT038")
    assert [(f.evidence["line"], f.evidence["name"], f.evidence["clock_line"]) for f in got] == [(11, "folder", 19)]


def test_lint038_a_helper_handed_a_fixed_folder_or_called_on_rank_0_is_quiet():
    assert found(FIX / "wallclock_through_helper_ok.py", "LINT038") == []
