"""A failed rank that can see rank 0's process has ended (same host and node, its published pid no longer running)
diagnoses at once as the backup instead of waiting 2 * 1.2 + 3 s for a verdict rank 0 will never publish
(comm.worker.rank0_exited, Coord.diagnosis_ops(rank0_gone=True)). Pure: recorded progress dicts and an in-memory
store; test_jobreport's broken-rank-0 job runs the whole path for real."""
from __future__ import annotations

import time

import pytest
from test_coord import MemStore, progress

from ddpdoctor.comm.coord import PHASE_KEY, Coord, Shared
from ddpdoctor.comm.worker import rank0_exited

P0 = {"rank": 0, "host": "n1", "pid": 4242, "phase": "all_reduce"}
TORCHRUN = {"GROUP_RANK": "0"}


def dead(pid):
    return False


def alive(pid):
    return True


def test_rank0_gone_from_this_host_is_seen():
    assert rank0_exited(P0, "n1", TORCHRUN, running=dead) is True
    assert rank0_exited(P0, "n1", {"SLURM_NODEID": "0"}, running=dead) is True


@pytest.mark.parametrize("p0, host, env, running", [
    (P0, "n1", TORCHRUN, alive),                   # still running (or stuck): it may still publish
    (P0, "n2", TORCHRUN, dead),                    # another host: its pid means nothing here
    (P0, "n1", {"GROUP_RANK": "1"}, dead),         # the launcher puts this rank on another node (a namesake host)
    (P0, "n1", {}, dead),                          # no launcher says which node: unknown
    (None, "n1", TORCHRUN, dead),                  # rank 0 published no progress
    (dict(P0, pid=None), "n1", TORCHRUN, dead),
    (dict(P0, pid="4242"), "n1", TORCHRUN, dead),
    (P0, "", TORCHRUN, dead),
])
def test_otherwise_unknown(p0, host, env, running):
    assert rank0_exited(p0, host, env, running=running) is False


def _first_failed_rank_1(store):
    """Rank 0 joined and died (no verdict, no pong); rank 1 failed and published it."""
    store.set(PHASE_KEY.format(0), progress(0, "all_reduce"))
    store.set(PHASE_KEY.format(1), progress(1, "all_reduce"))
    store.append("joined", "0:2,1:2,")
    c = Coord(store, 1, 2, Shared())
    c.publish_failure({"kind": "peer-disconnected"})
    return c


class Recording(MemStore):
    def __init__(self):
        super().__init__()
        self.log = []

    def wait(self, keys, timeout):
        self.log.append(("wait", tuple(keys), timeout.total_seconds()))
        return super().wait(keys, timeout)

    def add(self, k, n):
        self.log.append(("add", k))
        return super().add(k, n)


@pytest.mark.parametrize("gone", [True, False])
def test_rank0_gone_means_no_wait_before_the_backup_claim(gone):
    store = Recording()
    c = _first_failed_rank_1(store)
    store.log.clear()
    d = c.diagnosis(0.2, until=time.time() + 1.0, rank0_gone=gone)  # `until` caps the wait at 1 s here, not 3.4
    claim = store.log.index(("add", "diag/claim"))
    waits = [t for kind, *rest in store.log[:claim] if kind == "wait" for t in rest[1:]]
    if gone:
        assert waits and max(waits) <= 0.05  # only zero-length reads of the events already there
    else:
        assert max(waits) > 0.5  # as before: waits for rank 0's verdict (2 * 0.2 + 3 s, capped by `until`)
    # the same verdict either way: rank 1 diagnoses as the backup, rank 0 not responding
    assert d["by_rank"] == 1 and d["culprits"] == [0] and d["peers"]["0"]["state"] == "not-responding"


def test_a_verdict_already_published_is_still_taken():
    store = MemStore()
    c = _first_failed_rank_1(store)
    store.set("diag", '{"peers": {"1": {"state": "behind"}}, "culprits": [1], "by_rank": 0, "world": 2}')
    d = c.diagnosis(0.2, until=time.time() + 10, rank0_gone=True)
    assert d["by_rank"] == 0 and d["culprits"] == [1]
    assert store.calls["multi_get"] == 0  # no diagnosis of its own


def test_progress_reads_rank_0s_published_facts():
    store = MemStore()
    c = Coord(store, 1, 2, Shared())
    assert c.progress(0) is None
    store.set(PHASE_KEY.format(0), '{"rank": 0, "host": "n1", "pid": 7}')
    assert c.progress(0) == {"rank": 0, "host": "n1", "pid": 7}
