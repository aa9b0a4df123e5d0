"""Round 28 (issue 25, round 22 of the project, lint28): precision classes left by fr155 and fr157, each with a trigger
and a quiet fixture (fixtures/lint/r28/). Pure lint runs: no process is launched."""
from __future__ import annotations

from pathlib import Path

from ddpdoctor.lint.api import lint_paths

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures" / "lint" / "r28"


def found(name: str, rid: str):
    return [(f.evidence["line"], f.severity) for f in lint_paths([str(FIX / name)]).findings if f.id == rid]


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
