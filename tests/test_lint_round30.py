"""Round 30 (issue 25, round 23 of the project, lint30): classes of fr158-fr161's wrong, debatable and missed findings,
each with a trigger and a quiet fixture (fixtures/lint/r30/). Pure lint runs: no process is launched."""
from __future__ import annotations

from lint_fixture_walk import Fixtures, lines

FIX = Fixtures("r30")
found = FIX.found


def test_lint013_a_log_file_whose_every_record_is_rank_gated_is_a_note():
    # logging.getLogger().addHandler(FileHandler(...)) on every rank, `if local_rank == 0: logging.info(...)` at every
    # record (fr160 DZ1245/rDL-SIM-pytorch, judged wrong as a warning)
    assert found("log_handler_records_gated_ok.py", "LINT013") == [(18, "info")]


def test_lint013_a_log_file_with_records_on_every_rank_keeps_the_warning():
    assert found("log_handler_records_every_rank_bad.py", "LINT013") == [(17, "warning")]


def test_lint012_dataparallel_beside_ddp_on_another_module_is_a_note():
    # encoder in DDP, the decoder in DataParallel on the same path (fr160 facebookresearch/music-translation, debatable)
    assert found("dp_beside_ddp_ok.py", "LINT012") == [(10, "info")]


def test_lint012_dataparallel_with_no_ddp_in_the_script_keeps_the_warning():
    assert found("dp_no_ddp_bad.py", "LINT012") == [(7, "warning")]


def _launch_layout(tmp_path, *folders):
    src = FIX / "launch_in_scripts"
    (tmp_path / "main.py").write_text((src / "main.py.txt").read_text())
    sh = tmp_path.joinpath(*folders)
    sh.mkdir(parents=True)
    (sh / "train.sh").write_text((src / "train.sh").read_text())
    line = next(i for i, l in enumerate((src / "main.py.txt").read_text().splitlines(), 1) if "json.dump" in l)
    return lines(tmp_path / "main.py", "LINT013"), line


def test_a_launch_line_in_scripts_of_a_folder_without_readme_is_read(tmp_path):
    # `python -m torch.distributed.launch --nproc_per_node=8 main.py` in scripts/stage1/train.sh, main.py at the root,
    # no README (fr161 zhengsipeng/VRDFormer_VRD): the every-rank json.dump is found (a note: the run's own arguments)
    got, line = _launch_layout(tmp_path, "scripts", "stage1")
    assert got == [(line, "info")]


def test_a_launch_line_three_folders_down_is_not_read_without_a_project_marker(tmp_path):
    got, _line = _launch_layout(tmp_path, "scripts", "a", "b", "c")
    assert got == []


def test_lint013_a_write_in_a_helper_names_the_helpers_ungated_call_sites():
    # the reader sees the fault at `save_checkpoint(args, 'last', ...)` after the loop (fr160 Zsongyuan), the linter at
    # the torch.save inside: the finding carries both
    got = [f.evidence for f in FIX.findings("helper_save_called_every_rank_bad.py", "LINT013")]
    assert [(e["line"], e.get("lines")) for e in got] == [(11, [23])]


def test_lint013_a_helper_called_only_under_rank_tests_is_quiet():
    assert found("helper_save_called_every_rank_ok.py", "LINT013") == []


def test_lint013_an_unread_save_helper_handed_a_state_dict_on_every_rank_is_a_note():
    # `from utils.checkpoint import save_checkpoint` (not linted, not found), `save_checkpoint({... 'state_dict':
    # model.module.state_dict()}, ...)` after every epoch on every rank (fr160 DZ1245/rDL-SIM-pytorch, a reader's miss)
    assert found("unread_save_helper_bad.py", "LINT013") == [(18, "info")]


def test_lint013_an_unread_save_helper_under_a_rank_test_or_without_a_state_dict_is_quiet():
    assert found("unread_save_helper_ok.py", "LINT013") == []


def test_lint013_a_model_objects_optimize_parameters_makes_the_script_a_training_script():
    # `model.optimize_parameters(step)` (CycleGAN/mmsr, data/lint_train_steps.json): the every-rank SummaryWriter is a
    # warning, the trained model object's own save a note (fr160 mengdongwei/ai4khdr_mmsr, reader's misses)
    assert found("model_object_step_bad.py", "LINT013") == [(11, "warning"), (16, "info")]


def test_lint013_a_model_object_that_only_tests_is_no_training_script():
    assert found("model_object_step_ok.py", "LINT013") == []


def test_lint037_save_on_master_then_a_load_of_the_same_file_on_every_rank_without_a_barrier():
    # DETR's save_on_master (rank 0 writes) into `checkpoint_path`, then torch.load(os.path.join(...same file...)) on
    # every rank at the last epoch (fr160 weijianan1/EconClimNet, a reader's miss)
    assert [line for line, _sev in found("save_on_master_then_load_bad.py", "LINT037")] == [27]


def test_lint037_a_barrier_between_save_on_master_and_the_load_is_quiet():
    assert found("save_on_master_then_load_ok.py", "LINT037") == []


def test_an_unmarked_folder_with_more_subfolders_than_a_project_has_is_not_descended(tmp_path):
    # a script dropped into /tmp or a home folder (thousands of subfolders, no project marker): the launch lines two
    # levels down are not read (lintperf23: a script in /tmp paid 220 ms listing 40 of its 5,202 folders)
    for i in range(41):
        (tmp_path / f"other{i:02d}").mkdir()
    got, _line = _launch_layout(tmp_path, "scripts", "stage1")
    assert got == []


def test_an_unmarked_folder_with_a_project_s_few_subfolders_is_still_descended(tmp_path):
    for i in range(10):
        (tmp_path / f"other{i:02d}").mkdir()
    got, line = _launch_layout(tmp_path, "scripts", "stage1")
    assert got == [(line, "info")]
