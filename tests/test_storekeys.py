"""Reading many ranks' (or nodes') keys without polling (ddpdoctor.gather.storekeys), and its users:
the cross-rank gathers of preflight, DoctorCallback and the in-process stall localizer
(peers.gather_ranks) and `ddpdoctor run`'s job-wide verdict across nodes (run.multinode.Link).
On the in-memory store of test_coord (TCPStore's blocking wait with a timeout), counting requests;
one test against a real TCPStore."""
from __future__ import annotations

import json
import threading

from test_coord import MemStore

from ddpdoctor.gather import storekeys
from ddpdoctor.inprocess.runtime.peers import gather_ranks
from ddpdoctor.run import multinode


def test_all_present_is_one_wait_and_one_multi_get():
    store = MemStore()
    for r in range(64):
        store.set(f"p/{r}", json.dumps({"rank": r}))
    store.calls.clear()
    got, missing = gather_ranks(store, "p/", 64, 5.0)
    assert missing == [] and sorted(got) == list(range(64)) and got[7] == {"rank": 7}
    assert dict(store.calls) == {"wait": 1, "multi_get": 1}


def test_late_keys_are_waited_for_not_polled():
    store = MemStore()
    store.set("p/0", "{}")
    threading.Timer(0.2, lambda: store.set("p/1", "{}")).start()
    store.calls.clear()
    got, missing = gather_ranks(store, "p/", 2, 10.0)
    assert missing == [] and sorted(got) == [0, 1]
    assert store.calls["wait"] == 1 and store.calls["check"] == 0 and store.calls["get"] == 0


def test_a_missing_rank_is_named_after_one_check_per_key():
    store = MemStore()
    for r in (0, 1, 3):
        store.set(f"p/{r}", json.dumps({"rank": r}))
    store.calls.clear()
    got, missing = gather_ranks(store, "p/", 4, 0.2)
    assert missing == [2] and sorted(got) == [0, 1, 3]
    assert dict(store.calls) == {"wait": 1, "check": 4, "multi_get": 1}


def test_a_broken_store_reads_as_missing_never_raises():
    class Broken:
        def __getattr__(self, name):
            def fail(*a, **k):
                raise ConnectionError("connection reset")
            return fail

    assert gather_ranks(Broken(), "p/", 3, 0.1) == ({}, [0, 1, 2])
    assert storekeys.read_present(Broken(), ["a"]) == {}
    assert storekeys.own_client(Broken()) is not None


def _link(store, nnodes):
    link = multinode.Link.__new__(multinode.Link)
    link.host, link.port, link.nnodes, link.store, link.error = "h", 1, nnodes, store, None
    link._ready = threading.Event()
    link._ready.set()
    return link


def _join(link, slot, host, pid):
    link.store.add(multinode.PREFIX + "nodes", 1)
    link.store.set(multinode.PREFIX + f"node/{slot}", json.dumps({"host": host, "pid": pid}))
    link.slot = slot


def test_job_wide_gather_names_the_node_that_did_not_report():
    store = MemStore()
    a, b, c = _link(store, 3), _link(store, 3), _link(store, 3)
    _join(a, 1, "node-a", 11)
    _join(b, 2, "node-b", 22)  # connected, then never published (its run was stuck or killed)
    assert a.publish("stall", [{"rank": 0, "host": "node-a"}, {"rank": 1, "host": "node-a"}]) == 1
    store.calls.clear()
    records, missing = a.gather("stall", wait_s=0.2)
    assert [r["rank"] for r in records] == [0, 1]
    assert missing == [{"node": 2, "host": "node-b", "pid": 22}, {"node": 3, "host": None}]
    assert store.calls["wait"] == 1 and store.calls["add"] <= 1  # the slot count, read once, only at the deadline
    text = multinode.missing_text(missing, 8)
    assert text == ("node 2 (node-b, ddpdoctor run pid 22), node 3 (never connected to the store) "
                    "did not report within 8 s")
    del c


def test_job_wide_gather_and_verdict_when_every_node_reports():
    store = MemStore()
    a, b = _link(store, 2), _link(store, 2)
    _join(a, 1, "node-a", 11)
    _join(b, 2, "node-b", 22)
    b.publish("death", [{"rank": 2}, {"rank": 3}])
    threading.Timer(0.1, lambda: a.publish("death", [{"rank": 0}, {"rank": 1}])).start()
    store.calls.clear()
    records, missing = a.gather("death", wait_s=10.0)
    assert sorted(r["rank"] for r in records) == [0, 1, 2, 3] and missing == []
    assert dict(store.calls) in ({"wait": 1, "multi_get": 1}, {"wait": 1, "multi_get": 1, "set": 1})
    threading.Timer(0.1, lambda: a.put_verdict("death", "the verdict")).start()
    assert b.get_verdict("death", wait_s=10.0) == "the verdict"
    assert b.get_verdict("stall", wait_s=0.1) is None


def test_real_tcpstore_prefix_store_and_own_client():
    from datetime import timedelta

    import torch.distributed as dist

    master = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=10))
    store = dist.PrefixStore("default_pg", master)
    store.set("s/0", json.dumps({"rank": 0}))
    threading.Timer(0.2, lambda: store.set("s/1", json.dumps({"rank": 1}))).start()
    with storekeys.own_client(store) as client:
        assert client is not store
        got, missing = gather_ranks(client, "s/", 2, 10.0)
        assert got == {0: {"rank": 0}, 1: {"rank": 1}} and missing == []
        got, missing = gather_ranks(client, "s/", 3, 0.2)
        assert sorted(got) == [0, 1] and missing == [2]


def test_own_client_closes_its_connection_when_the_gather_is_done():
    """The in-process stall watch gathers through a clone on every stall; each used to stay open until
    the garbage collector ran. Counted as this process's TCP connections to the store's port."""
    from datetime import timedelta

    import psutil
    import torch.distributed as dist

    master = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=10))
    store = dist.PrefixStore("default_pg", master)
    store.set("c/0", "{}")
    me = psutil.Process()

    def clients() -> int:  # connections from this process to the store (the server's side not counted)
        return sum(1 for c in me.net_connections("tcp") if c.raddr and c.raddr.port == master.port)

    before = clients()
    for _ in range(5):
        with storekeys.own_client(store) as client:
            gather_ranks(client, "c/", 1, 5.0)
            during = clients()
    assert during == before + 1  # the clone has its own connection while in use
    assert clients() == before   # and none is left open after the blocks


def test_a_node_that_reconnected_past_nnodes_is_read_on_the_timeout_path():
    store = MemStore()
    a, b, b2 = _link(store, 2), _link(store, 2), _link(store, 2)
    _join(a, 1, "node-a", 11)
    _join(b, 2, "node-b", 22)   # its run died before the event...
    _join(b2, 3, "node-b", 33)  # ...and a new one connected: slot 3
    a.publish("death", [{"rank": 0}, {"rank": 1}])
    b2.publish("death", [{"rank": 2}, {"rank": 3}])
    records, missing = a.gather("death", wait_s=0.2)
    assert sorted(r["rank"] for r in records) == [0, 1, 2, 3]
    assert missing == [{"node": 2, "host": "node-b", "pid": 22}]
