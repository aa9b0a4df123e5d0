"""Round 11 (issue 26): classes mined from the sources before batches 56-57 and from those batches.
Each class: a trigger that fails on the code before and a quiet case (pure functions on recorded facts)."""
from __future__ import annotations

from factory import findings_of, make_snapshot

# ------------------------------------------------ ENV007: Lightning >= 1.8 refuses --ntasks without --ntasks-per-node
# Lightning-AI/pytorch-lightning src/lightning/fabric/plugins/environments/slurm.py @03f57f9c _validate_srun_variables
NTASKS_ONLY = {"SLURM_JOB_ID": "8812", "SLURM_JOB_NAME": "train", "SLURM_NTASKS": "4", "SLURM_NNODES": "1",
               "SLURM_JOB_NUM_NODES": "1", "SLURM_TASKS_PER_NODE": "4", "SLURM_STEP_ID": "0", "SLURM_PROCID": "1",
               "SLURM_LOCALID": "1", "SLURM_NODEID": "0", "SLURM_GPUS_ON_NODE": "4"}


def _refused(env, packages):
    return [f.severity for f in findings_of(make_snapshot(env=env, packages=packages), "ENV007")
            if "will refuse" in f.title]


def test_lightning_refuses_ntasks_without_ntasks_per_node():
    assert _refused(NTASKS_ONLY, {"lightning": "2.4.0"}) == ["warning"]
    assert _refused(NTASKS_ONLY, {"pytorch-lightning": "1.9.5"}) == ["warning"]


def test_lightning_ntasks_quiet_cases():
    assert not _refused(dict(NTASKS_ONLY, SLURM_NTASKS_PER_NODE="4"), {"lightning": "2.4.0"})  # --ntasks-per-node given
    assert not _refused(NTASKS_ONLY, {"pytorch-lightning": "1.7.7"})                            # before #15011
    assert not _refused(NTASKS_ONLY, {})                                                       # no Lightning
    assert not _refused(dict(NTASKS_ONLY, SLURM_JOB_NAME="interactive"), {"lightning": "2.4.0"})
    assert not _refused(dict(NTASKS_ONLY, SLURM_NTASKS="1", SLURM_TASKS_PER_NODE="1"), {"lightning": "2.4.0"})

