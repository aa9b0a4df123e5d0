"""Round 24, fourth cycle (issue 24, triage32): held-out classes, each with a trigger and a quiet case.

- NCCL's socket transport's "NET/Socket : peer X message truncated : receiving N bytes instead of M" WARN returns
  ncclInvalidUsage itself (NVIDIA/nccl src/transport/net_socket.cc @5067397c, `return ncclInvalidUsage` after the WARN;
  so since 2.12.10): catalogue class nccl_invalid_usage, not a network fault. Alone (no torch error quoting it) it is a
  collective size mismatch between ranks (LOG006's truncated reading), not an unexplained failure (LOG028); under an
  unhandled system error LOG009 keeps it (tests/test_triage_round17_1207.py).

Pure: each case is triage over a fixture file or a few lines; no process is launched."""
import os

from ddpdoctor.facts import messages
from ddpdoctor.triage.api import triage_paths

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RULES = os.path.join(ROOT, "fixtures", "triage", "rules")


def _found(path):
    return [f for f in triage_paths([path]).sorted_findings() if f.severity in ("error", "warning")]


def test_socket_message_truncated_is_catalogued_as_invalid_usage_from_its_source():
    e = messages.by_id("nccl.net_socket.net_socket_peer_message_truncated_receiving")
    assert e["class"] == "nccl_invalid_usage"
    assert e["source"]["path"] == "src/transport/net_socket.cc" and e["source"]["repo"] == "NVIDIA/nccl"


def test_socket_message_truncated_alone_is_a_collective_mismatch():
    f = _found(os.path.join(RULES, "LOG006_trigger_socket_message_truncated_alone.log"))
    assert f and f[0].id == "LOG006" and f[0].severity == "error", [(x.id, x.title) for x in f]
    assert "the ranks' collectives differ" in f[0].title and "received 262144 bytes where 131072" in f[0].title
    assert "two ranks on one GPU" not in f[0].title and "TORCH_DISTRIBUTED_DEBUG=DETAIL" in f[0].fix
    assert not any(x.id == "LOG028" for x in f), [(x.id, x.title) for x in f]


def test_message_truncated_in_a_users_prose_is_no_failure():
    f = _found(os.path.join(RULES, "LOG006_quiet_message_truncated_in_prose.log"))
    assert f == [], [(x.id, x.title) for x in f]
