"""Issue 12: lint precision on real scripts. The functional fixtures in fixtures/lint/issue12/ pin which
lines get which rule; these tests pin what a line/rule pair cannot say: severities, fix texts,
evidence, gates across modules linted together, and the precision benchmark's own arithmetic."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ddpdoctor.lint.api import lint_paths

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures" / "lint" / "issue12"


def findings(*paths):
    return lint_paths([str(p) for p in paths]).findings


def by_rule(fs, rule):
    return [f for f in fs if f.id == rule]


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text), encoding="utf-8")
    return p


UTILS = """
    import torch
    from torch.utils.tensorboard import SummaryWriter


    class BoardLogger:
        def __init__(self, log_dir):
            self.writer = SummaryWriter(log_dir=log_dir)

        def add(self, **kw):
            for k, v in kw.items():
                self.writer.add_scalar(k, v)


    def scaled_backward(loss):
        loss.backward()
        torch.distributed.barrier()
    """

MAIN_GATED = """
    import torch.distributed as dist
    import utils


    def main(args):
        dist.init_process_group("nccl")
        board = None
        if dist.get_rank() == 0 and args.log_dir:
            board = utils.BoardLogger(args.log_dir)
        return board
    """

MAIN_UNGATED = """
    import torch.distributed as dist
    from utils import BoardLogger


    def main(args):
        dist.init_process_group("nccl")
        return BoardLogger(args.log_dir)
    """


def test_a_helper_gated_by_its_caller_in_another_module_is_quiet_when_linted_together(tmp_path):
    utils = write(tmp_path, "utils.py", UTILS)
    write(tmp_path, "main.py", MAIN_GATED)
    assert by_rule(findings(utils), "LINT013"), "alone, nothing shows the gate: the write is reported"
    assert not by_rule(findings(tmp_path), "LINT013"), "linted with its caller, the gate is seen"


def test_an_ungated_caller_elsewhere_keeps_the_finding(tmp_path):
    write(tmp_path, "utils.py", UTILS)
    write(tmp_path, "main.py", MAIN_UNGATED)
    hits = by_rule(findings(tmp_path), "LINT013")
    assert [Path(f.evidence["path"]).name for f in hits] == ["utils.py"]


def test_sharded_save_fix_never_wraps_the_call_in_a_rank_test():
    (f,) = by_rule(findings(FIX / "sharded_save_bad.py"), "LINT013")
    assert f.evidence["sharded"] == "FSDP"
    assert "is_main_process=accelerator.is_main_process" in f.fix
    assert "get_state_dict" in f.fix
    assert "get_rank() == 0" not in f.fix and "if accelerator.is_main_process" not in f.fix


def test_fsdp_torch_save_fix_gathers_on_every_rank_and_writes_on_one(tmp_path):
    p = write(tmp_path, "fsdp_save.py", """
        import torch
        import torch.distributed as dist
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP


        def train(model, batch):
            dist.init_process_group("nccl")
            model = FSDP(model)
            model(batch).sum().backward()
            torch.save(model.state_dict(), "ckpt.pt")
        """)
    (f,) = by_rule(findings(p), "LINT013")
    assert f.evidence["sharded"] == "FSDP" and "state_dict_type" in f.fix
    assert f.fix.index("model.state_dict()") < f.fix.index("get_rank() == 0")  # gather first, then one writer


def test_unsharded_save_fix_is_the_rank_zero_gate():
    (f,) = by_rule(findings(FIX / "gpu_id_gate_bad.py"), "LINT013")
    assert f.evidence["sharded"] is None and "get_rank() == 0" in f.fix


def test_consecutive_loads_are_one_finding_that_lists_the_block():
    hits = by_rule(findings(FIX / "load_checkpoints_bad.py"), "LINT011")
    block = [f for f in hits if len(f.evidence["lines"]) > 1]
    assert len(block) == 1 and len(block[0].evidence["lines"]) == 3
    assert "2 more loads" in block[0].title


def test_spawn_launcher_that_picks_a_free_port_is_not_told_the_port_is_fixed():
    (f,) = by_rule(findings(FIX / "spawn_free_port_bad.py"), "LINT002")
    assert f.evidence["port_fixed"] is False and "port is fixed" not in f.detail


def test_hard_coded_tcp_init_method_is_named_and_the_port_is_fixed():
    (f,) = by_rule(findings(FIX / "spawn_tcp_bad.py"), "LINT002")
    assert f.evidence["init_method"] == "tcp://127.0.0.1:23456" and f.evidence["port_fixed"] is True


def test_torchrun_fixes_use_the_scripts_process_count_never_a_made_up_4():
    tcp = by_rule(findings(FIX / "spawn_tcp_bad.py"), "LINT002")[0]
    assert "--nproc-per-node gpu" in tcp.fix  # nprocs = torch.cuda.device_count()
    env = by_rule(findings(FIX / "spawn_env_bad.py"), "LINT002")[0]
    assert "--nproc-per-node 2" in env.fix  # nprocs=2
    for path in FIX.glob("*.py"):
        for f in findings(path):
            assert "--nproc-per-node 4" not in f.fix, (path.name, f.id)


def test_rank_env_by_hand_is_folded_into_the_spawn_finding():
    ids = sorted(f.id for f in findings(FIX / "spawn_env_bad.py"))
    assert ids == ["LINT002"]
    (f,) = findings(FIX / "spawn_env_bad.py")
    assert "LOCAL_RANK" in f.title


def test_an_mpi_job_mapping_its_ranks_without_trainer_or_accelerate_gets_a_note(tmp_path):
    p = write(tmp_path, "mpi_setup.py", """
        import os
        import torch.distributed as dist
        from mpi4py import MPI


        def setup():
            comm = MPI.COMM_WORLD
            os.environ["RANK"] = str(comm.rank)
            os.environ["WORLD_SIZE"] = str(comm.size)
            dist.init_process_group("nccl", init_method="env://")
        """)
    (f,) = by_rule(findings(p), "LINT003")
    assert f.severity == "info"
    with_trainer = write(tmp_path, "mpi_trainer.py", (tmp_path / "mpi_setup.py").read_text()
                         + "\nfrom transformers import Trainer\n")
    assert [f.severity for f in by_rule(findings(with_trainer), "LINT003")] == ["warning"]


def test_dataparallel_fallback_of_a_ddp_script_is_a_note():
    hits = by_rule(findings(FIX / "dp_fallback.py"), "LINT012")
    assert len(hits) == 2 and all(f.severity == "info" and f.evidence["ddp_fallback"] is True for f in hits)


def test_training_args_local_rank_in_a_condition_warns_in_a_log_line_notes_once_per_function():
    hits = by_rule(findings(FIX / "training_args_local_rank_bad.py"), "LINT015")
    assert {f.evidence["in_condition"]: f.severity for f in hits} == {True: "warning", False: "info"}
    (gate,) = [f for f in hits if f.evidence["in_condition"]]
    assert len(gate.evidence["lines"]) == 2  # the barrier idiom's two tests: one finding


def test_consecutive_writes_of_one_block_are_one_finding(tmp_path):
    p = write(tmp_path, "cache.py", """
        import torch
        import torch.distributed as dist


        def build(data, spans, data_file, spans_file, model):
            dist.init_process_group("nccl")
            torch.save(data, data_file)
            torch.save(spans, spans_file)
            model(data).sum().backward()
        """)
    assert len(by_rule(findings(p), "LINT013")) == 1


def test_saving_the_scripts_own_arguments_on_every_rank_is_a_note(tmp_path):
    p = write(tmp_path, "meta.py", """
        import torch
        import torch.distributed as dist


        def run(args, model, batch):
            dist.init_process_group("nccl")
            model(batch).sum().backward()
            torch.save(args, "training_args.bin")
        """)
    (f,) = by_rule(findings(p), "LINT013")
    assert f.severity == "info"


def test_global_ddp_model_through_a_gated_helper_names_the_helper():
    (f,) = by_rule(findings(FIX / "global_model_bad.py"), "LINT007")
    assert "validation_loss()" in f.title and f.severity == "error"


def test_trainer_script_under_torchrun_counts_as_distributed_and_plain_one_does_not():
    assert {f.id for f in findings(FIX / "trainer_torchrun_bad.py")} == {"LINT011", "LINT013"}
    assert findings(FIX / "trainer_single_ok.py") == []


# ------------------------------------------------------------------ the precision benchmark itself
BENCH = ROOT / "benchmarks" / "lint_precision.py"


def run_bench(*args):
    return subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=120, cwd=ROOT)


def tiny_corpus(tmp_path, verdict):
    src = tmp_path / "src" / "someone__repo"
    src.mkdir(parents=True)
    (src / "train.py").write_text((FIX / "gpu_id_gate_bad.py").read_text(encoding="utf-8"), encoding="utf-8")
    line = next(i for i, l in enumerate((src / "train.py").read_text().splitlines(), 1) if "expect: LINT013" in l)
    corpus = {"files": [{"repo": "someone/repo", "path": "train.py", "commit": "0" * 40}],
              "verdicts": [{"repo": "someone/repo", "path": "train.py", "rule": "LINT013", "line": line + 1,
                            "verdict": verdict, "reason": "test"}],
              "misses": [{"repo": "someone/repo", "path": "train.py", "rule": "LINT009", "line": 3,
                          "class": "a class", "reason": "test"}]}
    (tmp_path / "corpus.json").write_text(json.dumps(corpus), encoding="utf-8")
    return tmp_path / "src", tmp_path / "corpus.json"


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_benchmark_matches_verdicts_within_the_line_tolerance_and_sets_the_exit_status(tmp_path):
    src, corpus = tiny_corpus(tmp_path, "TP")
    res = run_bench(str(src), "--corpus", str(corpus), "--json")
    data = json.loads(res.stdout)
    assert data["tp"] == 1 and data["unjudged"] == 0 and data["precision_strict"] == 1.0
    assert data["misses_caught"] == 0 and res.returncode == 1  # the recorded miss class is not caught
    res = run_bench(str(src), "--corpus", str(corpus), "--tolerance", "0", "--json")
    data = json.loads(res.stdout)
    assert data["unjudged"] == 1 and data["precision_strict"] == 0.0  # one line off, no tolerance: unjudged


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_benchmark_bad_input_is_one_line_and_exit_2(tmp_path):
    res = run_bench(str(tmp_path / "nope"))
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1


def test_the_committed_corpus_lists_files_and_verdicts_consistently():
    corpus = json.loads((ROOT / "benchmarks" / "lint_corpus.json").read_text(encoding="utf-8"))
    files = {(f["repo"], f["path"]) for f in corpus["files"]}
    assert len(files) >= 150 and len({r for r, _p in files}) >= 20
    assert all(re.fullmatch(r"[0-9a-f]{40}", f["commit"]) for f in corpus["files"])
    for v in corpus["verdicts"]:
        assert (v["repo"], v["path"]) in files and v["verdict"] in ("TP", "FP", "debatable") and v["reason"]
    for m in corpus["misses"]:
        assert (m["repo"], m["path"]) in files and m["rule"].startswith("LINT") and m["reason"]
