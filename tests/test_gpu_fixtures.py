"""Every GPU fixture replays to exactly its expected GPU findings, in-process and through the CLI."""
import importlib.util
import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from ddpdoctor.cli import cli
from ddpdoctor.pipeline.judge import judge
from ddpdoctor.model.registry import REGISTRY
from ddpdoctor.pipeline.runner import load_all
from ddpdoctor.pipeline.snapshot import Snapshot

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SNAPS = os.path.join(ROOT, "fixtures", "snapshots")
GPUS8 = tuple(f"gpu:{i}" for i in range(8))

# (check ID, subjects) per fixture, restricted to the GPU checks (IDs GPU*); other families' checks
# may add their own findings (e.g. the generic /dev/shm warning on the docker fixture).
EXPECTED = {
    "dgx-a100-8x-nvswitch": set(),
    "hgx-h100-8x": set(),
    "rtx4090-4x-no-p2p": {("GPU002", GPUS8[:4]), ("GPU011", GPUS8[:4])},
    "pcie-switch-acs-2x-l40s": {("GPU003", ("gpu:0", "gpu:1")), ("GPU004", ("gpu:0", "gpu:1"))},
    "a100-mig": {("GPU008", ("gpu:0",))},
    "p4d-nvlink-down-remap-pending": {("GPU006", ("gpu:3",)), ("GPU009", ("gpu:5",))},
    "docker-shm-64mb-hgx-a100-4x": {("GPU014", ("path:/dev/shm",) + GPUS8[:4])},
    "mixed-rtx3090-rtx4090": {("GPU015", ("CUDA_DEVICE_ORDER", "gpu:0", "gpu:1")), ("GPU002", ("gpu:0", "gpu:1"))},
    "cpu-only": {("GPU001", ())},
    "recorded-cpu-sandbox": {("GPU001", ())},  # recorded with `ddpdoctor snapshot` on the 2-core CI sandbox
    # issue 13 (tests/test_fixtures_13.py holds every family's verdict on these)
    "dgx-a100-torchrun-worker": set(),
    "dgx-a100-torchrun-worker-no-launcher": set(),
    "dgx-a100-torchrun-worker-kind-none": set(),
    "dgx-a100-p2p-level-loc": {("GPU020", ("NCCL_P2P_LEVEL",) + GPUS8)},
    "dgx-a100-p2p-level-nvl": set(),
    "rtx4090-4x-p2p-level-loc": {("GPU002", GPUS8[:4]), ("GPU011", GPUS8[:4])},
    "hgx-h100-2-nodes-gdr-level-loc": {("GPU020", ("NCCL_NET_GDR_LEVEL",) + GPUS8)},
    "hgx-h100-2-nodes-gdr-level-sys": set(),
    "mixed-2x3090-2x4090-cvd01": {("GPU015", ("CUDA_DEVICE_ORDER", "CUDA_VISIBLE_DEVICES") + GPUS8[:4]),
                                  ("GPU002", ("gpu:2", "gpu:3"))},
    "mixed-2x3090-2x4090-cvd01-pci-order": {("GPU002", ("gpu:0", "gpu:1"))},
    "a100-mig-2-ranks-index-cvd": {("GPU008", ("gpu:0", "CUDA_VISIBLE_DEVICES"))},
    "a100-mig-2-ranks-index-cvd-no-launcher": {("GPU008", ("gpu:0", "CUDA_VISIBLE_DEVICES"))},
    "a100-mig-2-ranks-mig-uuid": {("GPU008", ("gpu:0",))},
    "slurm-step-4-tasks-4-gpus": set(),
    "slurm-step-procid-beyond-ntasks": set(),
    "slurm-step-local-rank-not-localid": set(),
    "slurm-batch-world-size-below-ntasks": set(),
    "slurm-step-2-tasks-each-torchrun": set(),
    "slurm-step-1-task-torchrun": set(),
}
SEVERITY = {("p4d-nvlink-down-remap-pending", "GPU009"): "error", ("docker-shm-64mb-hgx-a100-4x", "GPU014"): "error",
            ("pcie-switch-acs-2x-l40s", "GPU003"): "error", ("cpu-only", "GPU001"): "info",
            ("a100-mig", "GPU008"): "warning", ("p4d-nvlink-down-remap-pending", "GPU006"): "warning",
            ("a100-mig-2-ranks-index-cvd", "GPU008"): "error", ("a100-mig-2-ranks-index-cvd-no-launcher", "GPU008"): "error",
            ("a100-mig-2-ranks-mig-uuid", "GPU008"): "warning"}


def gpu_set(findings):
    return {(f["id"], tuple(f["subjects"])) for f in findings if f["id"].startswith("GPU")}


def test_every_fixture_is_listed():
    names = {n[:-5] for n in os.listdir(SNAPS) if n.endswith(".json")}
    assert names == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_gives_exactly_its_gpu_findings(name):
    report = judge(Snapshot.load(os.path.join(SNAPS, f"{name}.json"))).to_dict()
    assert gpu_set(report["findings"]) == EXPECTED[name]
    assert not [f for f in report["findings"] if f["id"].startswith("DOC")], "a check crashed or a gatherer failed"
    for f in report["findings"]:
        if (name, f["id"]) in SEVERITY:
            assert f["severity"] == SEVERITY[(name, f["id"])]
        assert f["fix"] and f["detail"]


def test_cpu_only_skips_every_gpu_check_with_the_driver_reason():
    report = judge(Snapshot.load(os.path.join(SNAPS, "cpu-only.json"))).to_dict()
    load_all(plugins=False)
    needing = {s.id for s in REGISTRY.values() if "gpus" in s.needs}
    skipped = {s["id"]: s["reason"] for s in report["skipped"]}
    assert needing and needing <= set(skipped)
    assert {skipped[i] for i in needing} == {"no NVIDIA driver found (NVML library not loaded)"}
    assert [f["id"] for f in report["findings"] if f["id"].startswith("GPU")] == ["GPU001"]


def _exit_matches(code: int, report: dict) -> bool:
    return code == (1 if any(f["severity"] == "error" for f in report["findings"]) else 0)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_cli_replay_of_every_fixture(name):
    """`ddpdoctor check --snapshot X --json` for each fixture, through the CLI in this process."""
    out = CliRunner().invoke(cli, ["check", "--snapshot", os.path.join(SNAPS, f"{name}.json"), "--json"])
    assert out.exit_code in (0, 1), out.output
    report = json.loads(out.output)
    assert gpu_set(report["findings"]) == EXPECTED[name]
    assert _exit_matches(out.exit_code, report)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_cli_replay_in_a_child_process():
    """`python -m ddpdoctor check --snapshot X --json` in its own process, for a healthy machine (exit 0), one with
    an error (exit 1) and one without a driver (the in-process test above covers every fixture's findings)."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    codes = set()
    for name in ("hgx-h100-8x", "p4d-nvlink-down-remap-pending", "cpu-only"):
        proc = subprocess.run([sys.executable, "-m", "ddpdoctor", "check", "--snapshot",
                               os.path.join(SNAPS, f"{name}.json"), "--json"],
                              capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
        assert proc.returncode in (0, 1), proc.stderr
        report = json.loads(proc.stdout)
        assert gpu_set(report["findings"]) == EXPECTED[name], name
        assert _exit_matches(proc.returncode, report), name
        codes.add(proc.returncode)
    assert codes == {0, 1}  # both exit codes were seen through a real process


def test_committed_fixtures_match_their_builder():
    spec = importlib.util.spec_from_file_location("build_gpu_snapshots", os.path.join(ROOT, "fixtures", "build_gpu_snapshots.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for name in mod.FIXTURES:
        with open(os.path.join(SNAPS, f"{name}.json"), encoding="utf-8") as fh:
            assert fh.read() == mod.render(name), f"{name}.json is stale: run python fixtures/build_gpu_snapshots.py"
