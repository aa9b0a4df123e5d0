"""Gatherers read fake sources (no patching of the real machine), plugins load or fail politely,
and docs/checks.md is generated from the check docstrings."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ddpdoctor.gather import Sources
from ddpdoctor.gather.env import gather_env
from ddpdoctor.gather.host import cgroup_cpu_limit, gather_host
from ddpdoctor.gather.launcher import detect_kind, launcher_from_env
from ddpdoctor.gather.network import listening_ports, resolve

ROOT = Path(__file__).resolve().parents[1]


def test_env_gatherer_keeps_relevant_names_and_redacts():
    env = {"RANK": "0", "HOME": "/root", "HF_TOKEN": "abc", "NCCL_DEBUG": "INFO", "PATH": "/bin",
           "MASTER_ADDR": "https://u:pw1234@h", "TOKENIZERS_PARALLELISM": "false"}
    out = gather_env(Sources(environ=env))
    assert set(out["vars"]) == {"RANK", "HF_TOKEN", "NCCL_DEBUG", "MASTER_ADDR", "TOKENIZERS_PARALLELISM"}
    assert out["vars"]["HF_TOKEN"] == "<redacted>" and "pw1234" not in out["vars"]["MASTER_ADDR"]
    assert out["vars"]["TOKENIZERS_PARALLELISM"] == "false"
    assert set(out["redacted"]) == {"HF_TOKEN", "MASTER_ADDR"}


def test_cgroup_v2_and_v1_quota_from_a_fake_root(tmp_path):
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/self/cgroup").write_text("0::/job\n")
    (tmp_path / "sys/fs/cgroup/job").mkdir(parents=True)
    (tmp_path / "sys/fs/cgroup/job/cpu.max").write_text("200000 100000\n")
    assert cgroup_cpu_limit(Sources(root=str(tmp_path), environ={})) == {"version": 2, "quota_cpus": 2.0}
    (tmp_path / "sys/fs/cgroup/job/cpu.max").write_text("max 100000\n")
    assert cgroup_cpu_limit(Sources(root=str(tmp_path), environ={}))["quota_cpus"] is None
    v1 = tmp_path / "v1"
    (v1 / "sys/fs/cgroup/cpu").mkdir(parents=True)
    (v1 / "sys/fs/cgroup/cpu/cpu.cfs_quota_us").write_text("150000")
    (v1 / "sys/fs/cgroup/cpu/cpu.cfs_period_us").write_text("100000")
    assert cgroup_cpu_limit(Sources(root=str(v1), environ={})) == {"version": 1, "quota_cpus": 1.5}


@pytest.mark.slow
def test_host_gatherer_on_an_empty_fake_root_still_returns_facts(tmp_path):
    out = gather_host(Sources(root=str(tmp_path), environ={}))
    assert out["shm"]["exists"] is False and out["cpu_count"] >= 1 and out["container"] is None


def test_listening_ports_from_fake_proc(tmp_path):
    (tmp_path / "proc/net").mkdir(parents=True)
    (tmp_path / "proc/net/tcp").write_text(
        "  sl  local_address rem_address   st\n"
        "   0: 00000000:7531 00000000:0000 0A 00000000:00000000\n"
        "   1: 0100007F:0016 0100007F:A0B2 01 00000000:00000000\n")
    (tmp_path / "proc/net/tcp6").write_text("  sl  local_address\n   0: 00000000000000000000000000000000:1F90 "
                                            "00000000000000000000000000000000:0000 0A\n")
    assert listening_ports(Sources(root=str(tmp_path), environ={})) == [8080, 30001]


def test_resolve_has_a_deadline_and_reports_errors():
    assert "error" in resolve("no-such-host.invalid", timeout=3)
    assert resolve("127.0.0.1")["addresses"] == ["127.0.0.1"]


@pytest.mark.parametrize("env, kind", [
    ({}, "none"),
    ({"RANK": "0", "WORLD_SIZE": "2"}, "manual"),
    ({"TORCHELASTIC_RUN_ID": "x", "RANK": "0"}, "torchrun"),
    ({"SLURM_PROCID": "0", "SLURM_STEP_ID": "0"}, "slurm"),
    ({"SLURM_PROCID": "0", "SLURM_STEP_ID": "batch"}, "none"),
    ({"OMPI_COMM_WORLD_RANK": "1"}, "mpi"),
    ({"PMI_RANK": "1"}, "mpi"),
    ({"CROSS_RANK": "0", "LOCAL_SIZE": "8", "RANK": "0"}, "deepspeed"),
])
def test_launcher_kinds(env, kind):
    assert detect_kind(env) == kind


def test_launcher_figures_from_slurm():
    out = launcher_from_env({"SLURM_PROCID": "5", "SLURM_STEP_ID": "0", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1",
                             "SLURM_NODEID": "1", "SLURM_JOB_NUM_NODES": "2", "SLURM_NTASKS_PER_NODE": "4(x2)"})
    assert (out["rank"], out["world_size"], out["local_rank"], out["local_world_size"], out["node_rank"],
            out["nnodes"]) == (5, 8, 1, 4, 1, 2)


def _plugin_env(tmp_path, module_body: str) -> dict:
    site = tmp_path / "site"
    (site / "acme_plugin-1.0.dist-info").mkdir(parents=True)
    (site / "acme_plugin-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-plugin\nVersion: 1.0\n")
    (site / "acme_plugin-1.0.dist-info" / "entry_points.txt").write_text("[ddpdoctor.checks]\nacme = acme_checks\n")
    (site / "acme_checks.py").write_text(textwrap.dedent(module_body))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(ROOT)])
    return env


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_third_party_plugin_registers_a_check(tmp_path):
    env = _plugin_env(tmp_path, '''
        from ddpdoctor.model.registry import check
        from ddpdoctor.model import warning

        @check("ACME001", "acme-always", family="system", needs=("host",))
        def always(snap):
            """Always says hello.

            What it checks
                Nothing.
            Why it matters
                It shows plugins work.
            Example
                Any machine.
            Fix
                None needed.
            """
            yield warning("hello from a plugin", fix="nothing")
    ''')
    res = subprocess.run([sys.executable, "-m", "ddpdoctor", "check", "--no-comm", "--json"], env=env,
                         capture_output=True, text=True, timeout=180)
    ids = {f["id"] for f in json.loads(res.stdout)["findings"]}
    assert "ACME001" in ids


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_broken_plugin_is_reported_not_fatal(tmp_path):
    env = _plugin_env(tmp_path, "import does_not_exist_anywhere\n")
    res = subprocess.run([sys.executable, "-m", "ddpdoctor", "check", "--no-comm", "--json"], env=env,
                         capture_output=True, text=True, timeout=180)
    report = json.loads(res.stdout)
    bad = [f for f in report["findings"] if f["id"] == "DOC003"]
    assert bad and "does_not_exist_anywhere" in bad[0]["title"] and "pkg:acme" in bad[0]["subjects"]
    assert report["summary"]["checks_run"] > 10


def test_docs_checks_md_is_up_to_date():
    from ddpdoctor.model.registry import REGISTRY
    from ddpdoctor.pipeline.runner import load_all, load_lint_rules, load_triage_rules
    from ddpdoctor.pipeline.render import render_checks_markdown

    load_all(plugins=False)
    load_lint_rules()
    load_triage_rules()
    expected = render_checks_markdown(sorted(REGISTRY.values(), key=lambda s: s.id))
    committed = (ROOT / "docs" / "checks.md").read_text()
    assert committed == expected, "docs/checks.md is stale: run `make docs`"
