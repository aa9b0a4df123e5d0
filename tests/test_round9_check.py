"""Round 9 (issue 26): classes found by the first reads of batches 48 and 49, each with a trigger and a quiet
case built here (not the corpus cases), failing on the code before the fix."""
from __future__ import annotations

from factory import findings_of, make_snapshot

SLURM_2 = {"SLURM_JOB_ID": "42", "SLURM_JOB_NUM_NODES": "2", "SLURM_NNODES": "2", "SLURM_JOB_NODELIST": "gpu[01-02]",
           "SLURM_NTASKS": "2", "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_NODEID": "0", "SLURM_STEP_ID": "0"}


def sev(env, check, **kw):
    return [(f.severity, f.title) for f in findings_of(make_snapshot(env=env, **kw), check)]


# ------------------------------------------------------------ NET002: torchrun's c10d endpoint by environment

def test_c10d_endpoint_loopback_on_two_nodes_is_reported():
    """pith-train#91's class: the endpoint came out as localhost on every node (torch reads localhost as this
    machine, so each node hosts its own store)."""
    env = dict(SLURM_2, PET_RDZV_BACKEND="c10d", PET_RDZV_ENDPOINT="localhost:29500", PET_NNODES="2")
    got = sev(env, "NET002")
    assert got and got[0][0] == "error" and "PET_RDZV_ENDPOINT" in got[0][1], got
    # no scheduler to count hosts: torchrun's node count alone, a warning
    got = sev({"PET_RDZV_BACKEND": "c10d", "PET_RDZV_ENDPOINT": "127.0.0.1", "PET_NNODES": "1:4"}, "NET002")
    assert got and got[0][0] == "warning", got
    # an empty endpoint is localhost too (parse_rendezvous_endpoint)
    assert sev(dict(SLURM_2, PET_RDZV_BACKEND="c10d", PET_RDZV_ENDPOINT="", PET_NNODES="2"), "NET002")


def test_c10d_endpoint_quiet_cases():
    # a node of the job: right
    assert not sev(dict(SLURM_2, PET_RDZV_BACKEND="c10d", PET_RDZV_ENDPOINT="gpu01:29500", PET_NNODES="2"), "NET002")
    # one node: --standalone's localhost is right
    assert not sev({"PET_RDZV_BACKEND": "c10d", "PET_RDZV_ENDPOINT": "localhost:0", "PET_NNODES": "1"}, "NET002")
    # the static backend rendezvouses at MASTER_ADDR, which NET002 judges as before
    assert not sev(dict(SLURM_2, PET_RDZV_BACKEND="static", PET_RDZV_ENDPOINT="localhost:29500"), "NET002")
