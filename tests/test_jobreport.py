"""One job-wide report (issue 15): rank lists, merging, who prints; and, for real, exactly one full
report under `torchrun --nproc-per-node 4 -m ddpdoctor check`."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import click
import pytest
from click.testing import CliRunner
from procs import marked

from ddpdoctor.commands.common import emit, output_options
from ddpdoctor.model import Finding, Report
from ddpdoctor.pipeline import jobreport as jr

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def f(id_, title, severity="warning", subjects=()):
    return {"id": id_, "name": id_.lower(), "severity": severity, "title": title, "detail": "", "fix": "do it",
            "subjects": list(subjects), "evidence": {}}


def test_compress_ranks():
    assert jr.compress_ranks([0, 1, 2, 3, 4, 5, 6, 7, 9]) == "0-7, 9"
    assert jr.compress_ranks([5, 3, 4, 4, 11]) == "3-5, 11"
    assert jr.compress_ranks([]) == ""
    assert jr.ranks_phrase([0, 1, 2, 3], world=4) == "all 4 ranks"
    assert jr.ranks_phrase([0, 1, 2, 3], world=8) == "ranks 0-3"
    assert jr.ranks_phrase([6]) == "rank 6"


def test_identical_findings_merge_and_differing_ones_do_not():
    per_rank = {0: [f("ENV006", "oversubscribed")], 1: [f("ENV006", "oversubscribed")],
                2: [f("ENV006", "oversubscribed"), f("PKG001", "old torch", "error")],
                3: [f("ENV006", "oversubscribed on 3 cores")]}
    groups = jr.merge(per_rank)
    assert [(g["finding"]["id"], g["ranks"]) for g in groups] == [
        ("PKG001", [2]), ("ENV006", [0, 1, 2]), ("ENV006", [3])]
    hosts = {0: "a", 1: "a", 2: "b", 3: "b"}
    merged = jr.merged_findings(groups, hosts, world=4)
    assert merged[0].title == "old torch [rank 2 on b]" and "host:b" in merged[0].subjects
    assert merged[1].title == "oversubscribed [ranks 0-1 on a; rank 2 on b]"
    assert merged[1].evidence["ranks"] == [0, 1, 2]
    everywhere = jr.merged_findings(jr.merge({r: [f("ENV006", "x")] for r in range(4)}), hosts, world=4)
    assert everywhere[0].title == "x [all 4 ranks]" and not any(s.startswith("host:") for s in everywhere[0].subjects)
    lines = jr.host_lines(groups, hosts, world=4)
    assert lines[0] == "job: 4 ranks on 2 host(s)"
    assert lines[1] == "  a: ranks 0-1: ENV006 (ranks 0-1)"
    assert lines[2] == "  b: ranks 2-3: PKG001 (rank 2), ENV006 (rank 2), ENV006 (rank 3)"


def test_who_is_a_launched_rank():
    assert jr.launcher_rank({"RANK": "3", "WORLD_SIZE": "8", "TORCHELASTIC_RUN_ID": "j"}) == (3, 8)
    assert jr.launcher_rank({"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_STEP_ID": "0"}) == (1, 2)
    assert jr.launcher_rank({"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "4"}) == (2, 4)
    assert jr.launcher_rank({"RANK": "0", "WORLD_SIZE": "1", "TORCHELASTIC_RUN_ID": "j"}) is None
    # hand-set in a shell (or an sbatch script before srun): no launcher, so the whole report
    assert jr.launcher_rank({"RANK": "3", "WORLD_SIZE": "8"}) is None
    assert jr.launcher_rank({"SLURM_PROCID": "0", "SLURM_NTASKS": "2"}) is None
    assert jr.launcher_rank({}) is None


def test_other_ranks_print_only_their_own_part():
    mine = [f("ENV006", "x"), f("COMM002", "rank 3 stuck", "error", ["rank:3"]), f("GPU001", "note", "info")]
    assert jr.own_lines(3, mine, reported_to_rank0=True) == []
    # never handed to rank 0: every finding, notes too (nothing is lost), errors and warnings with their fix
    assert jr.own_lines(3, mine, reported_to_rank0=False, why="--no-comm") == [
        "[rank 3] 3 findings of this rank; rank 0 could not gather the ranks' findings (--no-comm), so its report may "
        "repeat some of them:",
        "[rank 3] warning ENV006: x", "[rank 3]     fix: do it",
        "[rank 3] error COMM002: rank 3 stuck", "[rank 3]     fix: do it",
        "[rank 3] info GPU001: note"]
    assert jr.concerns_rank(3, mine) == ["[rank 3] error COMM002: rank 3 stuck"]
    assert jr.concerns_rank(2, mine) == []


@click.command()
@output_options
def _cmd(fmt, as_json, only, ignore, fail_on, verbose):
    rep = Report(command="check", findings=[Finding("error", "rank 1 is stuck", subjects=("rank:1",), id="COMM002",
                                                    name="comm-rank-stuck", family="comm")], checks_run=1)
    emit(rep, fmt, as_json, verbose, fail_on)


@pytest.mark.parametrize("env,args,full,line", [
    ({"RANK": "0", "WORLD_SIZE": "4", "TORCHELASTIC_RUN_ID": "j"}, [], True, False),
    ({"RANK": "1", "WORLD_SIZE": "4", "TORCHELASTIC_RUN_ID": "j"}, [], False, True),
    ({"RANK": "2", "WORLD_SIZE": "4", "TORCHELASTIC_RUN_ID": "j"}, [], False, False),
    ({"RANK": "2", "WORLD_SIZE": "4", "TORCHELASTIC_RUN_ID": "j"}, ["--all-ranks"], True, False),
    ({"RANK": "2", "WORLD_SIZE": "4"}, [], True, False),  # set by hand in a shell: the whole report
    ({}, [], True, False),
])
def test_emit_prints_the_report_on_rank_0_only(env, args, full, line, monkeypatch):
    for k in ("RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
              "TORCHELASTIC_RUN_ID", "SLURM_STEP_ID", "SLURM_STEPID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    out = CliRunner().invoke(_cmd, args)
    assert out.exit_code == 1  # every rank still exits by its own findings
    assert ("1 error" in out.output) is full
    assert ("[rank 1] error COMM002: rank 1 is stuck" in out.output) is line


# ------------------------------------------------ issue 26: a rank's findings are never lost

LAUNCH_KEYS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_STEP_ID",
               "SLURM_STEPID", "SLURM_JOB_ID", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMI_SIZE", "PMI_RANK",
               "TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT", "NCCL_SOCKET_IFNAMES", "CUDA_VISIBLE_DEVICES")


def _check_cli(monkeypatch, env, *args):
    from ddpdoctor.cli import cli

    for k in LAUNCH_KEYS:
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return CliRunner().invoke(cli, ["check", "--no-comm", *args])


def test_rank_7_of_4_prints_its_json_report_with_the_job_fields(monkeypatch):
    out = _check_cli(monkeypatch, {"RANK": "7", "WORLD_SIZE": "4", "TORCHELASTIC_RUN_ID": "x"}, "--json")
    report = json.loads(out.output)  # was: nothing printed at all
    assert report["schema"] == "ddpdoctor/report/1" and out.exit_code == 1
    assert report["job"] == {"rank": 7, "world_size": 4, "reported_to_rank0": False,
                             "why": "--no-comm: the connectivity test did not run"}
    assert "ENV003" in {x["id"] for x in report["findings"]}


def test_rank_7_of_4_prints_its_error_as_text(monkeypatch):
    out = _check_cli(monkeypatch, {"RANK": "7", "WORLD_SIZE": "4", "TORCHELASTIC_RUN_ID": "x"})
    assert out.exit_code == 1
    assert "[rank 7] error ENV003: RANK=7 is not below WORLD_SIZE=4" in out.output, out.output
    assert "[rank 7]     fix: " in out.output


def test_srun_no_comm_every_rank_prints_what_rank_0_never_got(monkeypatch):
    env = {"SLURM_STEP_ID": "0", "SLURM_JOB_ID": "77", "SLURM_PROCID": "3", "SLURM_NTASKS": "4",
           "NCCL_SOCKET_IFNAMES": "eth0"}
    text = _check_cli(monkeypatch, env)
    assert "[rank 3] warning NCCL001: NCCL_SOCKET_IFNAMES is not a variable NCCL reads" in text.output, text.output
    assert "checks ran" not in text.output  # its own findings, not a second full report
    report = json.loads(_check_cli(monkeypatch, env, "--json").output)
    assert report["job"]["rank"] == 3 and report["job"]["reported_to_rank0"] is False
    assert "NCCL001" in {x["id"] for x in report["findings"]}


def test_srun_no_comm_rank_0_says_the_others_print_their_own(monkeypatch):
    env = {"SLURM_STEP_ID": "0", "SLURM_JOB_ID": "77", "SLURM_PROCID": "0", "SLURM_NTASKS": "4"}
    out = _check_cli(monkeypatch, env)
    assert "checks ran" in out.output and "every other rank prints its own" in out.output


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_broken_rank_0_leaves_the_other_ranks_printing_their_findings(tmp_path):
    """torchrun, 2 ranks: rank 0's comm test dies in the middle of all_reduce (after both joined), so
    it never reports rank 1's findings; rank 1, with no confirmation from rank 0, prints them."""
    mark = uuid.uuid4().hex
    env = dict(os.environ, PYTHONPATH=ROOT, TORCH_CPP_LOG_LEVEL="ERROR", DDPDOCTOR_TEST_MARK=mark,
               NCCL_SOCKET_IFNAMES="eth0", DDPDOCTOR_TEST_RANK0_FAULT="exit@all_reduce")
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "DDPDOCTOR_LAUNCH_DIR"):
        env.pop(k, None)
    wrapper = os.path.join(ROOT, "tests", "rank0_fault_exec.py")
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                          "--tee", "3", "--log-dir", str(tmp_path / "logs"), wrapper, "check", "--json"],
                         env=env, capture_output=True, text=True, timeout=240, cwd=str(tmp_path))
    assert marked(mark) == [], "a rank outlived torchrun"
    logs = {}
    for path in (tmp_path / "logs").rglob("stdout.log"):
        logs[path.parent.name] = path.read_text()
    rank1 = json.loads(logs["1"])  # torchrun's per-rank stdout: one JSON report
    assert rank1["job"]["rank"] == 1 and rank1["job"]["reported_to_rank0"] is False, rank1["job"]
    assert "NCCL001" in {x["id"] for x in rank1["findings"]}
    assert rank1["job"]["why"].startswith("rank 0 did not confirm")
    assert "NCCL001" in {x["id"] for x in json.loads(logs["0"])["findings"]}  # rank 0 printed its own


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_torchrun_four_ranks_check_prints_one_report(tmp_path):
    mark = uuid.uuid4().hex
    env = dict(os.environ, PYTHONPATH=ROOT, TORCH_CPP_LOG_LEVEL="ERROR", DDPDOCTOR_TEST_MARK=mark)
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "DDPDOCTOR_LAUNCH_DIR"):
        env.pop(k, None)
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "4",
                          "-m", "ddpdoctor", "check"], env=env, capture_output=True, text=True, timeout=200,
                         cwd=str(tmp_path))
    assert marked(mark) == [], "a rank outlived torchrun"
    text = out.stdout
    assert text.count("checks ran") == 1, text  # exactly one full report
    assert text.count("Connectivity test") == 1
    assert "4 ranks on 1 host(s) talk over gloo" in text
    assert "job: 4 ranks on 1 host(s)" in text
    assert "[rank " not in text  # every rank reached rank 0: nobody else prints
