"""One job-wide report (issue 15): rank lists, merging, who prints; and, for real, exactly one full
report under `torchrun --nproc-per-node 4 -m ddpdoctor check`."""
from __future__ import annotations

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
    assert jr.own_lines(3, mine, reported_to_rank0=False) == ["[rank 3] warning ENV006: x",
                                                             "[rank 3] error COMM002: rank 3 stuck"]
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
