"""Round 19, wave 5 (issue 25): LINT038, a run folder named from the wall clock on every rank. A class the
held-out review found, fixed after it (the held-out figures stay the first-read ones)."""
from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

from ddpdoctor.lint.api import lint_paths
from ddpdoctor.lint.engine import lint_source

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures" / "lint" / "r19d"


def found(path: Path, preview: bool = True):
    return [f for f in lint_paths([str(path)], preview=preview).findings if f.id == "LINT038"]


def snippet(src: str):
    return [f for f in lint_source(textwrap.dedent(src), "train.py") if f.id == "LINT038"]


def test_every_rank_naming_its_folder_from_the_clock_warns_with_preview_and_names_the_clock_line():
    got = found(FIX / "wallclock_dir_bad.py")
    assert [(f.evidence["line"], f.evidence["name"], f.evidence["clock_line"]) for f in got] == [
        (17, "out_dir", 15), (30, "args.log_dir", 29)]
    assert all(f.severity == "warning" and "broadcast_object_list" in f.fix for f in got)
    assert "distributed_c10d.py" in got[0].evidence["source"]


def test_a_preview_rule_is_a_note_without_preview():
    assert {f.severity for f in found(FIX / "wallclock_dir_bad.py", preview=False)} == {"info"}


def test_shared_from_rank_0_used_on_rank_0_or_a_launcher_run_id_is_quiet():
    assert found(FIX / "wallclock_dir_ok.py") == []


def test_a_single_process_script_is_quiet():
    assert found(FIX / "wallclock_single_ok.py") == []


def test_a_broadcast_in_another_function_does_not_silence_this_one():
    src = """
        import os, time
        import torch.distributed as dist
        def shared():
            stamp = time.strftime("%H%M%S")
            obj = [stamp]
            dist.broadcast_object_list(obj, src=0)
        def train():
            dist.init_process_group("gloo")
            stamp = time.strftime("%H%M%S")
            os.makedirs(stamp, exist_ok=True)
        if __name__ == "__main__":
            shared()
            train()
        """
    assert [f.evidence["line"] for f in snippet(src)] == [11]
    assert snippet(src.replace("            os.makedirs(stamp", "            dist.broadcast_object_list([stamp])\n"
                                                               "            os.makedirs(stamp")) == []


def test_a_clock_read_for_timing_or_a_read_only_open_is_quiet():
    src = """
        import os, time
        import torch.distributed as dist
        dist.init_process_group("gloo")
        start = time.time()
        with open(os.path.join("data", str(start)), "r") as f:
            f.read()
        print(time.time() - start)
        """
    assert snippet(src) == []
    assert len(snippet(src.replace('"r"', '"w"'))) == 1


# ---------------------------------------------------------------- LINT039: --local_rank under torchrun
PROJECT = FIX / "torchrun_project"


def lint039(path: Path, preview: bool = True):
    return [f for f in lint_paths([str(path)], preview=preview).findings if f.id == "LINT039"]


def test_local_rank_from_argparse_under_torchrun_names_the_launch_line_and_the_default():
    [f] = lint039(PROJECT / "train_local_rank_bad.py")
    assert f.severity == "warning" and f.evidence["line"] == 14
    assert f.evidence["launch"] == "README.md:3" and f.evidence["default"] == "0" and f.evidence["option_line"] == 11
    assert "LOCAL_RANK" in f.fix and "run.py" in f.evidence["source"]
    assert [g.severity for g in lint039(PROJECT / "train_local_rank_bad.py", preview=False)] == ["info"]


def test_a_default_read_from_local_rank_is_quiet():
    assert lint039(PROJECT / "train_local_rank_ok.py") == []


def _project(tmp_path: Path, readme: str) -> Path:
    tmp_path.mkdir(parents=True)
    (tmp_path / "README.md").write_text(readme)
    shutil.copy(PROJECT / "train_local_rank_bad.py", tmp_path / "train_local_rank_bad.py")
    return tmp_path / "train_local_rank_bad.py"


def test_launchers_that_pass_local_rank_or_no_launch_line_are_quiet(tmp_path):
    for i, readme in enumerate(["deepspeed train_local_rank_bad.py\n",
                                "python -m torch.distributed.launch --nproc_per_node 2 train_local_rank_bad.py\n",
                                "torchrun --nproc_per_node 2 train_local_rank_bad.py\n"
                                "deepspeed train_local_rank_bad.py\n",
                                "python train_local_rank_bad.py\n"]):
        assert lint039(_project(tmp_path / str(i), readme)) == [], readme
    assert len(lint039(_project(tmp_path / "use_env", "python -m torch.distributed.launch --use-env "
                                                      "--nproc_per_node 2 train_local_rank_bad.py\n"))) == 1


def test_a_clock_value_saved_as_data_is_not_a_folder_name():
    src = """
        import os, time
        import torch
        import torch.distributed as dist
        dist.init_process_group("gloo")
        elapsed = time.time()
        ckpt = {"saved_at": time.time(), "step": 3}
        torch.save(ckpt, os.path.join("ckpt", "last.pt"))
        with open("timing.txt", "w") as f:
            f.write(str(elapsed))
        """
    assert snippet(src) == []
    assert [f.evidence["name"] for f in snippet(src.replace('os.path.join("ckpt", "last.pt")',
                                                            'f"ckpt/{int(elapsed)}.pt"'))] == ["elapsed"]
