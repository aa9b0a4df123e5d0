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



# ------------------------------------------------ ENV007: Lightning in the batch step of a several-task allocation
# Lightning-AI/pytorch-lightning slurm.py @03f57f9c: world_size() = SLURM_NTASKS, global_rank() = SLURM_PROCID, and
# detect() holds outside srun; the batch step is one process, so it waits for ranks srun never starts (#14022).
BATCH_8 = {"SLURM_JOB_ID": "51324", "SLURM_JOB_NAME": "train", "SLURM_NTASKS": "8", "SLURM_NTASKS_PER_NODE": "4",
           "SLURM_TASKS_PER_NODE": "4(x2)", "SLURM_JOB_NUM_NODES": "2", "SLURM_NNODES": "2", "SLURM_PROCID": "0",
           "SLURM_LOCALID": "0", "SLURM_NODEID": "0", "SLURM_STEP_ID": "batch", "SLURM_GPUS_ON_NODE": "4"}


def _waits(env, packages):
    return [f.severity for f in findings_of(make_snapshot(env=env, packages=packages), "ENV007")
            if "Lightning" in f.title and "waits at the rendezvous" in f.detail]


def test_lightning_in_the_batch_step_of_several_tasks_waits_for_ranks_never_started():
    assert _waits(BATCH_8, {"lightning": "2.3.3"}) == ["warning"]


def test_lightning_batch_step_quiet_cases():
    assert not _waits(BATCH_8, {})                                                      # no Lightning
    assert not _waits(dict(BATCH_8, SLURM_JOB_NAME="interactive"), {"lightning": "2.3.3"})
    assert not _waits(dict(BATCH_8, SLURM_STEP_ID="0"), {"lightning": "2.3.3"})         # srun started the tasks
    assert not _waits(dict(BATCH_8, SLURM_NTASKS="1", SLURM_NTASKS_PER_NODE="1", SLURM_TASKS_PER_NODE="1",
                           SLURM_JOB_NUM_NODES="1", SLURM_NNODES="1", SLURM_GPUS_ON_NODE="1"), {"lightning": "2.3.3"})
