"""Round 12 (issue 26): classes from batches 60-61. Each class: a trigger that fails on the code before and quiet
cases (pure functions on recorded facts)."""
from __future__ import annotations

from factory import findings_of, make_snapshot

# ------------------------------------------------ ENV007: the GPUs of a one-node batch job from SLURM_JOB_GPUS
# Slurm sbatch(1) OUTPUT ENVIRONMENT VARIABLES: SLURM_JOB_GPUS "The global GPU IDs of the GPUs allocated to this job
# ... Only set in batch and interactive jobs". Lightning's SLURMEnvironment takes SLURM_NTASKS (1) as the world size,
# so a Trainer with 4 devices runs one process on one GPU (mk-minchul/AdaFace#124).
ONE_TASK_4_GPUS = {"SLURM_JOB_ID": "5151", "SLURM_JOB_NAME": "train", "SLURM_NTASKS": "1", "SLURM_NNODES": "1",
                   "SLURM_JOB_NUM_NODES": "1", "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_NODEID": "0",
                   "SLURM_JOB_GPUS": "0,1,2,3", "CUDA_VISIBLE_DEVICES": "0,1,2,3"}


def _takes(env, packages=None):
    packages = {"pytorch-lightning": "1.8.6"} if packages is None else packages
    return [f for f in findings_of(make_snapshot(env=env, packages=packages), "ENV007") if "will take SLURM" in f.title]


def test_lightning_one_task_with_the_job_gpus_of_one_node():
    found = _takes(ONE_TASK_4_GPUS)
    assert [f.severity for f in found] == ["warning"] and "4 GPUs (SLURM_JOB_GPUS)" in found[0].title
    assert [f.severity for f in _takes(dict(ONE_TASK_4_GPUS, SLURM_JOB_GPUS="0-3"))] == ["warning"]


def test_lightning_job_gpus_quiet_cases():
    assert not _takes(dict(ONE_TASK_4_GPUS, SLURM_JOB_GPUS="2"))                              # one GPU, one task
    assert not _takes(dict(ONE_TASK_4_GPUS, SLURM_NNODES="2", SLURM_JOB_NUM_NODES="2"))        # job-wide list
    assert not _takes(dict(ONE_TASK_4_GPUS, SLURM_JOB_GPUS="gpu:a100"))                        # not a list of indices
    assert not _takes(ONE_TASK_4_GPUS, packages={})                                           # no Lightning
    assert not _takes(dict(ONE_TASK_4_GPUS, SLURM_JOB_NAME="interactive"))
