"""Issue 25, the method: a rule warns only with positive evidence (lint/rules/_reach.py). Each fixture under
fixtures/lint/evidence/ marks every finding with `# expect:` (tests/test_lint_functional.py checks the lines);
here the severities: a warning where the evidence is shown, a note where it is not, and why."""
from __future__ import annotations

from pathlib import Path

from ddpdoctor.lint.api import lint_paths

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "lint" / "evidence"


def severities(name: str, rule: str) -> dict:
    return {f.evidence["line"]: f.severity for f in lint_paths([str(FIX / name)]).findings if f.id == rule}


def whys(name: str, rule: str) -> dict:
    return {f.evidence["line"]: f.evidence.get("why") or "" for f in lint_paths([str(FIX / name)]).findings
            if f.id == rule}


def test_a_write_warns_only_on_a_route_through_rank_independent_tests():
    # save() reached from main() through `epoch % args.save_every == 0`: every rank writes the same file
    # the crash dump before sys.exit is a note; wandb.log under an imported gate nobody here can read is a note
    assert severities("writes_evidence.py", "LINT013") == {16: "warning", 24: "info", 31: "info"}
    why = whys("writes_evidence.py", "LINT013")
    assert "main()" in why[16] and "train()" in why[16] and "init_process_group" in why[16]
    assert "is_log_process()" in why[31] and "exit" in why[24]


def test_a_function_running_a_collective_runs_on_every_rank_whoever_calls_it():
    assert severities("collective_anchor.py", "LINT013") == {20: "warning"}
    assert "backward" in whys("collective_anchor.py", "LINT013")[20]


def test_a_method_a_subclass_overrides_breaks_the_route():
    assert severities("virtual_save.py", "LINT013") == {13: "info"}


def test_a_sampler_warns_when_its_loader_is_followed_to_an_epoch_loop_and_nothing_can_set_the_epoch():
    assert severities("sampler_evidence.py", "LINT009") == {10: "warning", 25: "info"}
    assert "accelerator.prepare" in whys("sampler_evidence.py", "LINT009")[25]


def test_data_parallel_warns_when_the_wrapped_model_is_trained():
    assert severities("dp_evidence.py", "LINT012") == {23: "warning", 28: "info"}


def test_a_load_warns_when_one_rank_saved_it_from_its_gpu_and_every_rank_loads_it():
    assert severities("loads_evidence.py", "LINT011") == {11: "warning", 13: "info"}
    assert "one rank" in whys("loads_evidence.py", "LINT011")[13]


def test_gates_hidden_in_globals_slurm_ids_and_rank_chosen_arguments_are_gates():
    assert severities("hidden_rank_gates.py", "LINT013") == {}
