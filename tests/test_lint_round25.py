"""Round 25 (issue 25, round 21, lint25): classes left by fr145-fr147, each with a trigger and a quiet fixture
(fixtures/lint/r25/)."""
from __future__ import annotations

from pathlib import Path

from ddpdoctor.lint.api import lint_paths

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures" / "lint" / "r25"


def found(name: str, rid: str, severity: str = ""):
    return [f for f in lint_paths([str(FIX / name)]).findings
            if f.id == rid and (not severity or f.severity == severity)]


def test_lint025_wait_for_everyone_inside_a_main_process_block_warns_beside_an_ungated_one():
    # the loop's own wait_for_everyone() on every process does not pair the one under is_main_process (fr147
    # lrzjason/T2ITrainer); a save helper ending in a barrier, called under is_main_process (fr147 HashWang-null/Concept)
    lines = sorted(f.evidence["line"] for f in found("wait_inside_main_bad.py", "LINT025"))
    assert lines == [28, 31]


def test_lint025_the_pairing_idiom_and_a_helper_called_on_every_process_are_quiet():
    assert found("wait_inside_main_ok.py", "LINT025") == []


def test_lint028_pathlib_check_then_make_in_a_launched_script_is_reported():
    # `if not args.out.exists(): args.out.mkdir(parents=True)` in a script that reads os.environ["RANK"] without a
    # default (torchrun-only, no process group: fr146 itsliupeng/nougat; k--chow/IODINE.pytorch)
    assert [f.evidence["line"] for f in found("pathlib_mkdir_launched_bad.py", "LINT028")] == [17]


def test_lint028_exist_ok_another_api_and_a_plain_run_are_quiet():
    assert found("pathlib_mkdir_launched_ok.py", "LINT028") == []
    assert found("pathlib_mkdir_plain_ok.py", "LINT028") == []


def test_a_launcher_variable_read_without_a_default_is_launch_evidence_a_set_or_a_default_is_not():
    from ddpdoctor.lint.rules._common import _ENV_READ
    for text in ('r = int(os.environ["RANK"])', "environ['LOCAL_RANK']", 'if os.environ["WORLD_SIZE"] == "1": pass'):
        assert _ENV_READ.search(text), text
    for text in ('os.environ["RANK"] = "0"', 'os.environ.get("RANK", 0)', 'os.environ["NODE_RANK"]'):
        assert not _ENV_READ.search(text), text


def test_lint027_a_download_with_no_lock_taken_is_reported():
    assert [f.evidence["line"] for f in found("download_no_lock_bad.py", "LINT027")] == [12]


def test_lint027_a_download_under_a_file_lock_or_flock_is_quiet():
    # `with FileLock(os.path.expanduser("~/.horovod_lock")):` (Horovod's MNIST example; fr145
    # aaronchann1227/DeepLearning_PyTorch, both readers: no fault); fcntl.flock(fh, LOCK_EX) by hand
    assert found("download_file_lock_ok.py", "LINT027") == []


def test_lint018_device_map_on_the_global_process_index_warns():
    # `from_pretrained(..., device_map={"": accelerator.process_index})` (fr146 aslyansky-m/SSM_reasoning)
    assert [f.evidence["line"] for f in found("device_map_process_index_bad.py", "LINT018")] == [11]


def test_lint018_device_map_on_the_local_process_index_is_quiet():
    assert found("device_map_process_index_ok.py", "LINT018") == []


def test_lint028_a_launcher_variable_named_only_in_a_docstring_proves_no_launch():
    # torch's launch.py copied into a project (fr121 Distributed-AI/PipeTransformer examples/*/launch.py)
    assert found("launcher_named_in_docstring_ok.py", "LINT028") == []
