"""Round 29 (issue 25, round 23 of the project, lint29): precision classes left by fr157 and fr158, each with a trigger
and a quiet fixture (fixtures/lint/r29/), and the per-shape severity of the first-read precision pass. Pure lint runs
and pure functions: no process is launched."""
from __future__ import annotations

import dataclasses

import pytest

from ddpdoctor.lint import engine
from ddpdoctor.model import Finding
from lint_fixture_walk import Fixtures, lines

FIX = Fixtures("r29")
found = FIX.found


def test_lint036_reads_under_a_hasattr_test_in_an_expression_are_quiet():
    # `self.model.stride.max() if hasattr(self.model, "stride") else 32` (fr158 ultralytics' trainer), and
    # `hasattr(m, "names") and m.names`: hasattr is False on the wrapper, the read never runs
    assert found("wrapper_read_hasattr_guarded_ok.py", "LINT036") == []


def test_lint036_a_hasattr_test_about_another_object_keeps_the_warning():
    assert found("wrapper_read_hasattr_guarded_bad.py", "LINT036") == [(11, "warning"), (18, "warning")]


def test_lint013_a_helper_called_from_the_parent_of_mp_spawn_runs_in_one_process():
    # save_checkpoint() under `if rank == 0:` in the worker and in run_fallback_training(), which only main() calls,
    # in the `except` of its mp.spawn (fr157 natashaoberoi/FFU)
    assert found("spawn_parent_fallback_save_ok.py", "LINT013") == []


def test_lint013_the_same_helper_also_run_by_every_spawned_rank_keeps_the_warning():
    assert found("spawn_parent_fallback_save_bad.py", "LINT013") == [(12, "warning")]


def _finding(title: str, severity: str = "warning") -> Finding:
    return Finding(id="LINT013", severity=severity, title=title, detail="", evidence={"line": 3})


def test_a_shape_is_the_condition_without_the_scripts_names_numbers_and_receivers():
    a = engine.shape_of("/x/train.py:12: unwrapped_model.save_pretrained() runs on every rank: ranks race")
    b = engine.shape_of("/y/run.py:7: model.save_pretrained() runs on every rank; the shards")
    assert a == b == "save_pretrained() runs on every rank"
    assert engine.shape_of("/x/t.py:3: open(..., 'w') runs on every rank: x") == "open(..., 'X') runs on every rank"
    assert engine.shape_of("/x/t.py:3: `m.x` reads through the wrapper (line 12)") == "`X` reads through the wrapper (line N)"


def test_a_shape_measured_below_the_bar_is_a_note_but_under_preview(monkeypatch):
    bad = _finding("/x/t.py:3: wandb.log runs on every rank: duplicate points")
    other = _finding("/x/t.py:3: torch.save runs on every rank: a torn file")
    monkeypatch.setattr(engine, "measured", lambda: {"LINT013": {"earned": True, "earns": "warning"}})
    monkeypatch.setattr(engine, "measured_shapes", lambda: {
        "LINT013": {"wandb.log runs on every rank": {"judged": 10, "tp": 7, "precision": 0.7}}})
    for level in (True, False):
        note = engine.earned_severity(bad, level)
        assert note.severity == "info" and "7 right of 10" in note.evidence["preview"]
        assert engine.earned_severity(other, level).severity == "warning"
    assert engine.earned_severity(bad, engine.PREVIEW).severity == "warning"
    err = dataclasses.replace(bad, severity="error")
    assert engine.earned_severity(err, True).severity == "error"  # errors are never split off by shape


@pytest.mark.measured_shapes
def test_the_measured_shapes_apply_to_the_library_and_the_cli_default():
    # the table written from the corpus: every shape listed there is a note at the library's own severity
    shapes = engine.measured_shapes()
    assert shapes, "lint_severity.json lists the shapes measured below the bar"
    rule, table = next(iter(shapes.items()))
    shape = next(iter(table))
    f = _finding(f"/x/t.py:3: {shape}: detail")
    f = dataclasses.replace(f, id=rule)
    assert engine.shape_of(f) == shape
    assert engine.earned_severity(f, True).severity == "info"
    assert engine.earned_severity(f, False).severity == "info"
    assert engine.earned_severity(f, engine.PREVIEW).severity == "warning"


def test_lint043_an_underscore_only_local_rank_under_a_launch_in_the_scripts_own_comments_is_a_note():
    # `parser.add_argument("--local_rank", ...)` and `# python -m torch.distributed.launch ... main.py` in the file
    # itself, no torch pin below 2.0 (fr156 chenwangsy/pytorch_DDP, a reader's miss): torch >= 2.0 passes
    # --local-rank=N (torch/distributed/run.py config_from_args)
    assert found("local_rank_underscore_own_comment_launch_bad.py", "LINT043") == [(13, "info")]


def test_lint043_both_spellings_defined_is_quiet():
    assert found("local_rank_both_spellings_own_comment_launch_ok.py", "LINT043") == []


def test_lint043_a_missing_option_under_a_launch_only_in_the_scripts_comments_is_a_note(tmp_path):
    script = tmp_path / "train_ddp.py"
    script.write_text('import argparse\n# python -m torch.distributed.launch --nproc_per_node=2 train_ddp.py\n'
                      'parser = argparse.ArgumentParser()\nparser.add_argument("--resume")\nargs = parser.parse_args()\n')
    assert lines(script, "LINT043") == \
        [(5, "info")]
    (tmp_path / "README.md").write_text("python -m torch.distributed.launch --nproc_per_node=2 train_ddp.py\n")
    assert lines(script, "LINT043") == \
        [(5, "warning")]


def test_lint029_the_plain_module_handed_to_the_training_function_warns_at_its_forward():
    # `classifier_without_ddp = classifier.module; train(backbone, classifier_without_ddp, ...)`, train() runs
    # `classifier(feats)` then `loss.backward()` (fr158 bio-mlhui/MyFramework, a reader's miss)
    [f] = FIX.findings("ddp_module_handed_to_train_bad.py", "LINT029")
    assert (f.evidence["line"], f.severity, f.evidence["lines"]) == (13, "warning", [13, 28])


def test_lint029_the_wrapper_handed_to_the_training_function_is_quiet():
    assert found("ddp_module_handed_to_train_ok.py", "LINT029") == []


def test_lint009_names_the_epoch_loop_and_the_iteration_it_proves_by():
    # readers point at the epoch loop that lacks set_epoch (fr155 jiashenggu/Tk-Instruct, fr157 juny116 x2): the
    # finding carries the lines its proof names, besides the sampler's
    src = ("import torch.distributed as dist\nfrom torch.utils.data import DataLoader\n"
           "from torch.utils.data.distributed import DistributedSampler\n"
           "dist.init_process_group('nccl')\nsampler = DistributedSampler(ds)\n"
           "loader = DataLoader(ds, sampler=sampler)\nfor epoch in range(10):\n    for x in loader:\n"
           "        model(x).sum().backward()\n")
    [f] = [f for f in engine.lint_source(src, "x.py") if f.id == "LINT009"]
    assert f.severity == "warning" and f.evidence["lines"] == [5, 7, 8]
