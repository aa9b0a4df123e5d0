"""The comm coordination (ddpdoctor.comm.coord) and the pair rounds (ddpdoctor.comm.rounds), on
an in-memory store with the TCPStore semantics the code relies on (blocking wait with a timeout,
append, multi_get), with threads as ranks. The same code runs for real in tests/test_comm_faults.py
and, for up to 8,192 ranks against a real TCPStore, in benchmarks/bench_scale_sim.py."""
from __future__ import annotations

import collections
import json
import threading
import time

import pytest

from ddpdoctor.comm.coord import PHASE_KEY, Coord, CoordError, Shared
from ddpdoctor.comm.rounds import flatten, pair_rounds, partner


class MemStore:
    def __init__(self):
        self.d, self.cv, self.calls = {}, threading.Condition(), collections.Counter()

    def _c(self, name):
        self.calls[name] += 1

    def set(self, k, v):
        self._c("set")
        with self.cv:
            self.d[k] = v.encode() if isinstance(v, str) else v
            self.cv.notify_all()

    def get(self, k):
        self._c("get")
        with self.cv:
            return self.d[k]

    def add(self, k, n):
        self._c("add")
        with self.cv:
            v = int(self.d.get(k, b"0")) + n
            self.d[k] = str(v).encode()
            self.cv.notify_all()
            return v

    def append(self, k, v):
        self._c("append")
        with self.cv:
            self.d[k] = self.d.get(k, b"") + v.encode()
            self.cv.notify_all()

    def check(self, keys):
        self._c("check")
        with self.cv:
            return all(k in self.d for k in keys)

    def multi_get(self, keys):
        self._c("multi_get")
        with self.cv:
            return [self.d[k] for k in keys]

    def wait(self, keys, timeout):
        self._c("wait")
        with self.cv:
            if not self.cv.wait_for(lambda: all(k in self.d for k in keys), timeout.total_seconds()):
                raise RuntimeError(f"wait timeout after {timeout}, keys: {keys}")


def progress(rank, phase, ops=0):
    return json.dumps({"rank": rank, "host": f"h{rank // 4}", "phase": phase,
                       "phases": [{"name": phase, "ops": ops}]})


def run_ranks(n, body, skip=()):
    store, out, threads = MemStore(), {}, []

    def go(r):
        try:
            out[r] = body(store, r)
        except CoordError as exc:
            out[r] = exc

    for r in range(n):
        if r not in skip:
            t = threading.Thread(target=go, args=(r,), daemon=True)
            threads.append(t)
            t.start()
    for t in threads:
        t.join(20)
    return store, out


def test_join_and_barrier_cost_a_constant_number_of_requests_per_rank():
    def body(store, r):
        c = Coord(store, r, n, Shared())
        store.set(PHASE_KEY.format(r), progress(r, "rendezvous"))
        c.join("{}", 5.0)
        c.barrier("b", 5.0)
        c.finished()
        return "ok"

    per_rank = []
    for n in (4, 32):
        store, out = run_ranks(n, body)
        assert all(v == "ok" for v in out.values())
        per_rank.append(sum(store.calls.values()) / n)
    assert per_rank[1] <= per_rank[0]  # flat in n (the few last-arriver writes spread thinner)
    assert per_rank[1] <= 14


def test_missing_rank_is_named_by_rank_0_and_the_others_take_its_verdict():
    n = 6

    def body(store, r):
        c = Coord(store, r, n, Shared())
        store.set(PHASE_KEY.format(r), progress(r, "rendezvous"))
        try:
            c.join("{}", 0.5)
        except CoordError as exc:
            c.publish_failure({"kind": exc.kind})
            return exc, c.diagnosis(0.3, until=time.time() + 5)

    store, out = run_ranks(n, body, skip={4})
    exc0, d0 = out[0]
    assert exc0.kind == "missing-ranks" and exc0.evidence["missing"] == [4]
    assert d0["culprits"] == [4] and d0["peers"]["4"]["state"] == "never-joined"
    assert all(out[r][1]["culprits"] == [4] and out[r][1]["by_rank"] == 0 for r in (1, 2, 3, 5))
    assert store.calls["multi_get"] <= 3  # one diagnoser reads in bulk, nobody else


def test_world_size_disagreement_and_duplicate_rank():
    def body(store, r):
        world = 3 if r == 1 else 2
        return Coord(store, r, world, Shared()).join("{}", 2.0)

    _, out = run_ranks(2, body)
    assert all(isinstance(v, CoordError) and v.kind == "world-size-mismatch" for v in out.values())
    assert out[0].evidence["claims"] == {"0": 2, "1": 3}

    def dup(store, r):
        return Coord(store, 0 if r == 1 else r, 2, Shared()).join("{}", 0.5)

    _, out = run_ranks(2, dup)
    assert any(isinstance(v, CoordError) and v.kind == "duplicate-rank" for v in out.values())


def test_frozen_rank_is_named_not_responding_and_a_stuck_one_behind():
    n, frozen, stuck = 6, 3, 5
    stop = threading.Event()

    def body(store, r):
        shared = Shared()
        c = Coord(store, r, n, shared)
        store.set(PHASE_KEY.format(r), progress(r, "rendezvous"))
        c.join("{}", 5.0)
        if r != frozen:  # the watchdog: answers pings while the main thread is blocked
            w = Coord(store, r, n, shared)
            threading.Thread(target=w.watch, args=(time.time() + 10, lambda ev: stop.is_set()), daemon=True).start()
        if r in (frozen, stuck):
            return "silent"
        store.set(PHASE_KEY.format(r), progress(r, "all_reduce", ops=1))
        try:
            c.barrier("x", 0.5)
        except CoordError as exc:
            c.publish_failure({"kind": exc.kind})
            return c.diagnosis(1.0, until=time.time() + 5)

    _, out = run_ranks(n, body)
    stop.set()
    d = out[0]
    assert d["peers"][str(frozen)]["state"] == "not-responding"
    assert d["peers"][str(stuck)]["state"] == "behind"  # alive (answered) but in an earlier phase
    assert d["culprits"] == [frozen, stuck]


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8, 9, 16, 64, 1000, 8192])
def test_pair_rounds_are_disjoint_and_few(n):
    rounds = pair_rounds(n)
    for rnd in rounds:
        ranks = [r for p in rnd for r in p]
        assert len(ranks) == len(set(ranks))  # each rank in at most one pair per round
    assert len(rounds) <= 4  # independent of n
    assert {r for p in flatten(rounds) for r in p} == set(range(n))  # every rank tested
    assert [p for p in partner(rounds, 0) if p] and all(p is None or 0 in p for p in partner(rounds, 0))


def test_pair_rounds_follow_hosts():
    hosts = {r: "ab"[r % 2] for r in range(8)}  # ranks interleaved over two hosts
    pairs = flatten(pair_rounds(8, hosts))
    cross = [p for p in pairs if hosts[p[0]] != hosts[p[1]]]
    ring = pair_rounds(8, hosts)[:2]
    ring_cross = [p for rnd in ring for p in rnd if hosts[p[0]] != hosts[p[1]]]
    assert len(ring_cross) == 2  # one cross-node pair per neighbouring node pair of the ring (a-b, b-a)
    assert len(cross) >= 4  # the half-way round crosses the bisection
