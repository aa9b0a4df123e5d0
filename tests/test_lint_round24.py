"""Round 24 (issue 25, round 21): false-positive classes left by fr136-fr143, each with a trigger and a quiet
fixture (fixtures/lint/r24/)."""
from __future__ import annotations

import ast
from pathlib import Path

from ddpdoctor.lint import conditions as cond
from ddpdoctor.lint.api import lint_paths

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures" / "lint" / "r24"


def found(name: str, rid: str, severity: str = ""):
    return [f for f in lint_paths([str(FIX / name)]).findings
            if f.id == rid and (not severity or f.severity == severity)]


def test_lint013_a_rank_flag_in_a_conditional_expression_or_a_settings_field_rewritten_from_it_is_quiet():
    # `wandb.log(...) if not disable_tqdm and use_wandb else None` in a function defined above
    # `disable_tqdm = rank != 0`; `cfg["enable_tb"] = False if disable_tqdm else cfg["enable_tb"]` then
    # `SummaryWriter(...) if cfg["enable_tb"] else None`; `args.save = args.save and rank == 0`
    assert found("rank_flag_conditional_ok.py", "LINT013") == []


def test_lint013_the_same_shapes_without_a_rank_flag_still_warn():
    # a conditional expression on a module constant, a settings field rewritten from `args.quiet`, an ungated save;
    # `if not quiet and use_wandb` (parameters nobody shows to be the same on every rank) stays a note, as the
    # same test in an if-block does
    assert [f.evidence["line"] for f in found("rank_flag_conditional_bad.py", "LINT013", "warning")] == [21, 32, 35]
    assert [f.evidence["line"] for f in found("rank_flag_conditional_bad.py", "LINT013", "info")] == [20]


def test_a_conditional_value_false_on_the_other_ranks_is_a_rank_0_flag():
    flags = {"disable_tqdm": ast.parse("rank != 0", mode="eval").body}
    for text in ("False if disable_tqdm else cfg['x']", "cfg['x'] if rank == 0 else None"):
        assert cond.is_rank_test(ast.parse(text, mode="eval").body, flags), text
    for text in ("True if disable_tqdm else cfg['x']", "cfg['x'] if quiet else None"):
        assert not cond.is_rank_test(ast.parse(text, mode="eval").body, flags), text


def test_lint018_cuda_of_the_rank_from_the_environment_with_a_cpu_arm_warns():
    # `device = torch.device(f"cuda:{rank}")` (else `torch.device("cpu")`), `rank` handed in from
    # `int(os.environ.get("RANK", "0"))` (fr142 astroendhra/SiDisTrO, the reader's likely)
    assert [f.evidence["line"] for f in found("device_from_env_rank_bad.py", "LINT018")] == [16]


def test_lint018_the_same_device_from_local_rank_is_quiet():
    assert found("device_from_env_local_rank_ok.py", "LINT018") == []


def test_lint029_a_ddp_wrapper_thrown_away_on_the_next_line_warns():
    # `model.lm = DDP(model.lm, ...)`; `model.lm = model.lm.module` (fr139 junhaopjlab/Musicgen_finetune, both readers)
    [f] = found("ddp_wrapper_discarded_bad.py", "LINT029")
    assert f.evidence["line"] == 23 and f.evidence["wrap_line"] == 22 and f.severity == "warning"


def test_lint029_a_wrapper_kept_beside_its_module_is_quiet():
    assert found("ddp_wrapper_kept_ok.py", "LINT029") == []


def test_lint036_a_method_of_the_model_accelerate_prepared_read_on_the_wrapper_warns():
    # `model, optimizer, loader = accelerator.prepare(...)`, then `model.extract_feature(batch)` (fr137 dobe0715/
    # LUNA25_MClab, yChenN1/speech_llm, both readers); `optimizer.param_groups` beside it is no model's
    assert [f.evidence["line"] for f in found("accelerate_prepared_attr_bad.py", "LINT036")] == [27]


def test_lint036_unwrapped_frozen_or_deepspeed_prepared_models_are_quiet():
    assert found("accelerate_prepared_attr_ok.py", "LINT036") == []
    assert found("accelerate_prepared_deepspeed_ok.py", "LINT036") == []


def test_lint036_accelerate_facts_name_their_sources():
    import json
    facts = json.loads((ROOT / "ddpdoctor" / "data" / "wrapper_attributes.json").read_text())["accelerate_prepare"]
    assert "accelerate/accelerator.py@" in facts["source"] and "deepspeed" in facts["not_ddp_words"]
    assert all("@" in s for s in facts["forwarding_wrappers"].values())
