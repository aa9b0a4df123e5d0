"""Issue 13's GPU, SLURM and replay cases: each fault has a written snapshot that triggers it and a
twin that stays quiet (fixtures/build_gpu_snapshots.py writes them; fixtures/README.md says what each
machine is). Verdicts are the warnings and errors of every family, judged as `check --snapshot` does."""
import json
import os
import subprocess
import sys

import pytest

from ddpdoctor.pipeline.judge import judge
from ddpdoctor.pipeline.snapshot import Snapshot

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SNAPS = os.path.join(ROOT, "fixtures", "snapshots")

# fixture -> {(check ID, severity)} of its warnings and errors (notes are left to test_gpu_fixtures)
VERDICTS = {
    # healthy: a torchrun worker on a DGX, as recorded, without its launcher section, and with a wrong one
    "dgx-a100-torchrun-worker": set(),
    "dgx-a100-torchrun-worker-no-launcher": set(),
    "dgx-a100-torchrun-worker-kind-none": set(),  # no false ENV002: the agent's store holds MASTER_PORT
    # NCCL levels against the topology
    "dgx-a100-p2p-level-loc": {("GPU020", "warning")},
    "dgx-a100-p2p-level-nvl": set(),
    "rtx4090-4x-p2p-level-loc": set(),  # no P2P to lose
    "hgx-h100-2-nodes-gdr-level-loc": {("GPU020", "warning")},
    "hgx-h100-2-nodes-gdr-level-sys": set(),
    # device order with mixed models, visible ones of one model
    "mixed-2x3090-2x4090-cvd01": {("GPU015", "warning")},
    "mixed-2x3090-2x4090-cvd01-pci-order": set(),
    # MIG with two local ranks
    "a100-mig-2-ranks-index-cvd": {("GPU008", "error")},
    "a100-mig-2-ranks-index-cvd-no-launcher": {("GPU008", "error")},
    "a100-mig-2-ranks-mig-uuid": {("GPU008", "warning")},  # one slice per rank: works, but no NCCL P2P
    # SLURM against torch variables
    "slurm-step-4-tasks-4-gpus": set(),
    "slurm-step-procid-beyond-ntasks": {("ENV011", "error")},
    "slurm-step-local-rank-not-localid": {("ENV011", "error")},
    "slurm-batch-world-size-below-ntasks": {("ENV011", "warning")},
    # the srun step before torchrun, the launch command recorded (round 16)
    "slurm-step-2-tasks-each-torchrun": {("ENV007", "error")},
    "slurm-step-1-task-torchrun": set(),
}


def verdict(name: str) -> set:
    report = judge(Snapshot.load(os.path.join(SNAPS, f"{name}.json")))
    return {(f.id, f.severity) for f in report.findings if f.severity != "info"}


@pytest.mark.parametrize("name", sorted(VERDICTS))
def test_fixture_verdict(name):
    assert verdict(name) == VERDICTS[name]


def test_existing_healthy_fixtures_stay_quiet():
    for name in ("dgx-a100-8x-nvswitch", "hgx-h100-8x", "cpu-only", "recorded-cpu-sandbox"):
        assert verdict(name) == set(), name


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", ["a100-mig-2-ranks-index-cvd-no-launcher", "dgx-a100-torchrun-worker-kind-none",
                                  "dgx-a100-p2p-level-loc"])
def test_replay_through_the_cli(name):
    res = subprocess.run([sys.executable, "-m", "ddpdoctor", "check", "--snapshot", os.path.join(SNAPS, f"{name}.json"),
                          "--json"], capture_output=True, text=True, timeout=100)
    found = {(f["id"], f["severity"]) for f in json.loads(res.stdout)["findings"] if f["severity"] != "info"}
    assert found == VERDICTS[name], res.stderr[-2000:]
    assert res.returncode == (1 if any(sev == "error" for _, sev in found) else 0)
