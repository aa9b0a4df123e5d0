"""Round 21 (issue 25, second wave): classes left by fr136-fr138, each with a trigger and a quiet fixture
(fixtures/lint/r21/)."""
from __future__ import annotations

from pathlib import Path

import pytest

from ddpdoctor.lint.api import lint_paths
from ddpdoctor.lint.engine import lint_source

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures" / "lint" / "r21"


def found(path: Path, rid: str, preview: bool = True):
    return [f for f in lint_paths([str(path)], preview=preview).findings if f.id == rid]


def test_lint019_step_counter_breaks_are_never_a_per_rank_metric():
    # the counter under `if accelerator.sync_gradients:` and the one kept in self.global_step beside self.log(...)
    assert found(FIX / "step_counter_break_ok.py", "LINT019") == []


def test_lint019_an_early_stopping_object_fed_this_ranks_loss_is_still_found():
    got = found(FIX / "early_stop_object_bad.py", "LINT019")
    assert [f.evidence["line"] for f in got] == [33]


def test_lint038_a_date_only_folder_name_is_quiet():
    assert found(FIX / "wallclock_date_only_ok.py", "LINT038") == []


def test_lint038_a_format_with_the_time_of_day_still_warns():
    assert [f.evidence["line"] for f in found(FIX / "wallclock_time_of_day_bad.py", "LINT038")] == [14, 20, 25]


@pytest.mark.parametrize("expr, loud", [
    ('datetime.datetime.now().strftime("%Y%m%d")', False),
    ('time.strftime("%m%d", time.localtime())', False),
    ('str(datetime.date.today())', False),
    ('f"{datetime.datetime.now():%Y-%m-%d}"', False),
    ('datetime.datetime.now().strftime("%Y%m%d_%H%M")', True),
    ('time.strftime("%m%d_%T", time.localtime())', True),
    ('f"{datetime.datetime.now():%d-%-H}"', True),
    ('datetime.datetime.now().strftime(FMT)', True),        # a format that is not a literal is not judged a date
    ('str(int(time.time()))', True),
])
def test_lint038_reads_the_resolution_of_the_clock_text(expr, loud):
    src = ("import datetime, os, time\nimport torch.distributed as dist\nFMT = os.environ['FMT']\n"
           f"def main():\n    dist.init_process_group('gloo')\n    out = os.path.join('runs', {expr})\n"
           "    os.makedirs(out, exist_ok=True)\n\nif __name__ == '__main__':\n    main()\n")
    got = [f for f in lint_source(src, "train.py", preview=True) if f.id == "LINT038"]
    assert bool(got) is loud


def test_lint015_a_script_named_for_the_deepspeed_launcher_with_no_launch_line_is_quiet():
    assert found(FIX / "ds_named" / "deepspeed_train.py", "LINT015") == []


def test_lint015_the_same_script_under_another_name_or_run_by_torchrun_still_warns(tmp_path):
    (tmp_path / "train.py").write_text((FIX / "ds_named" / "deepspeed_train.py").read_text())
    assert [f.evidence["line"] for f in found(tmp_path / "train.py", "LINT015")] == [12]
    got = found(FIX / "ds_named_torchrun" / "deepspeed_train.py", "LINT015")
    assert [(f.evidence["line"], f.severity) for f in got] == [(12, "warning")]


def test_lint013_identical_bytes_from_every_rank_are_a_note():
    got = found(FIX / "same_bytes_every_rank_note.py", "LINT013")
    assert [(f.evidence["line"], f.severity) for f in got] == [(16, "info"), (19, "info"), (22, "info"), (25, "info")]
    assert all("small metadata file" in f.title for f in got)


def test_lint013_a_file_of_what_this_rank_computed_still_warns():
    got = found(FIX / "rank_bytes_every_rank_bad.py", "LINT013")
    assert [(f.evidence["line"], f.severity) for f in got] == [(19, "warning")]


LIGHTNING = FIX / "lightning"


def test_lightning_ddp_runs_the_scripts_main_on_every_rank():
    got = lint_paths([str(LIGHTNING / "train_lightning_ddp_bad.py")], preview=True).findings
    loud = sorted((f.id, f.evidence["line"]) for f in got if f.severity == "warning")
    assert loud == [("LINT013", 37), ("LINT027", 32), ("LINT028", 31), ("LINT038", 28)]


def test_lightning_spawn_strategy_or_one_device_is_quiet():
    for name in ("train_lightning_spawn_ok.py", "train_lightning_one_device_ok.py"):
        got = lint_paths([str(LIGHTNING / name)], preview=True).findings
        assert [f for f in got if f.id in ("LINT013", "LINT027", "LINT028", "LINT038")] == [], name


@pytest.mark.parametrize("trainer_args, every_rank", [
    ('devices=-1', True),                                          # Lightning >= 2.0: several devices -> "ddp"
    ('devices="auto", strategy="ddp_find_unused_parameters_true"', True),
    ('devices=2, strategy=DDPStrategy(find_unused_parameters=True)', True),
    ('devices=2, strategy="deepspeed_stage_2"', True),
    ('devices=2, strategy=DDPStrategy(start_method="spawn")', False),
    ('devices=2, strategy="ddp_notebook"', False),
    ('gpus=2', False),                                             # the 1.x API, whose default was ddp_spawn
    ('devices=args.devices', False),                               # a count the file does not show
])
def test_lightning_strategies_that_rerun_the_script(tmp_path, trainer_args, every_rank):
    src = (LIGHTNING / "train_lightning_ddp_bad.py").read_text().replace(
        'accelerator="gpu", devices=4, strategy="ddp"', f'accelerator="gpu", {trainer_args}').replace(
        "import torch\n", "import torch\nfrom pytorch_lightning.strategies import DDPStrategy\n", 1)
    assert trainer_args in src
    (tmp_path / "train.py").write_text(src)
    got = [f for f in lint_paths([str(tmp_path / "train.py")], preview=True).findings
           if f.id == "LINT013" and f.severity == "warning"]
    assert bool(got) is every_rank


def test_lint019_a_resumed_counter_and_a_shared_stop_flag_are_quiet():
    # iter_num resumed from checkpoint["iter_num"] while `checkpoint` is later the save dict of a local metric; a
    # stop flag in mp.Manager().Value handed to the spawned workers
    assert found(FIX / "counter_resume_shared_flag_ok.py", "LINT019") == []
