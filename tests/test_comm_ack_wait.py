"""A rank of `check` under a launcher whose own comm run already found rank 0 gone does not wait (up to 10 s)
for rank 0's acknowledgement of its findings: it prints them itself at once (comm.worker.rank0_cannot_ack).
Pure: recorded result dicts (test_jobreport's broken-rank-0 job shows the whole path for real)."""
from __future__ import annotations

import pytest

from ddpdoctor.comm.worker import rank0_cannot_ack

FAILED = {"phase": "all_reduce", "kind": "peer-disconnected", "message": "Connection reset by peer"}


def result(state0, failure=FAILED, key="0"):
    peers = {} if state0 is None else {key: {"state": state0, "phase": "all_reduce"}}
    return {"failure": failure, "diagnosis": {"peers": peers, "culprits": [0] if state0 else []}}


@pytest.mark.parametrize("state", ["not-responding", "never-joined"])
def test_rank0_gone_is_not_waited_for(state):
    assert rank0_cannot_ack(result(state)) is True
    assert rank0_cannot_ack(result(state, key=0)) is True  # a diagnosis not yet through JSON


@pytest.mark.parametrize("out", [
    result("not-responding", failure=None),  # this rank ended cleanly: rank 0 may still be collecting
    result("behind"),                         # alive, only slower: it may still answer
    result("ok"),
    result(None),                             # rank 0 not among the culprits
    {"failure": FAILED},                      # no diagnosis (store unreachable): wait as before
    {"failure": FAILED, "diagnosis": {"peers": {"1": {"state": "not-responding"}}}},  # another rank gone
])
def test_otherwise_the_rank_waits_for_rank_0(out):
    assert rank0_cannot_ack(out) is False
