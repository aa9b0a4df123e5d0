"""The comm coordination simulated up to 8,192 ranks against one real TCPStore (issue 15).

Fake ranks (no torch collectives) run the real coordination code of `ddpdoctor comm`
(`ddpdoctor.comm.coord.Coord`: rendezvous keys, barriers, liveness pings, diagnosis, verdict
collection) against one real c10d TCPStore served by a separate process, as rank 0's store is in a
real job. A fake rank is two tasks, as a real rank is two threads: its main line and its watchdog,
blocked on the next coordination event (it answers liveness pings; a frozen rank has none).

How they run: every `Coord` step is a generator of store requests (`Coord.join_ops`, ...), and the
comm worker's blocking `Coord.join()` is those very generators run one request at a time
(`coord.run_ops`). Here the 2n generators are driven by one event loop in this process
(`_ministore.StoreLoop`), not by 2n threads: 16,384 threads on 2 cores cost far more than the store
(measured here: 8,192 threads merely handing 20 requests each to one I/O thread took 20 s, with no
store at all; with threads, 4,096 ranks took 33 s for 2.6 s of store CPU). Every request of every
fake rank is counted as it is yielded, per rank, before any wire-level sharing: the request
figures are what each rank asks of the store. Underneath, the ranks share a few real pipelined
connections (this VM accepts ~11 new TCP connections a second, so 8,192 of them cannot be opened
in a benchmark): requests from many ranks are written back to back and c10d answers each
connection in order; a rank's `wait` is one CHECK on the wire, and ranks still blocked on the same
key share one WAIT on a spare connection (each rank keeps its own deadline). The wire request
count is printed too. Because many requests arrive per read, the server spends less CPU per
request here than it would on 8,192 separate clients.

What one core cannot do for 8,192 ranks at once, and how it is handled: rank 0 (the diagnoser)
has a connection of its own and is resumed first whenever it can go on, as a real rank 0 has its
own client and CPU; and each rank's pair list (`rounds.partner`, an O(n) scan a real rank does
once) is taken for all ranks in one pass before "go". Everything else each rank does, including
formatting its progress records and parsing what it reads, runs inside the timed window.

Reported per n: store requests per rank (mean, max) and in total, the peak request rate (per
100 ms window), the wall time of the coordination (from "go" to rank 0's verdict and every rank's
end; all clients already connected: the connect time is shown apart), and the CPU seconds of this
process and of the store server during it. Then the same with one rank that never starts and one
rank that freezes after joining (no task of it runs any more): both must be named by rank 0's
diagnosis.

    python benchmarks/bench_scale_sim.py                 # n = 64, 256, 1024, 4096, 8192
    python benchmarks/bench_scale_sim.py --n 64,1024 --json out.json

Goals: requests per rank flat in n; the healthy coordination at 8,192 ranks in <= 10 s here.
The machine's load average is printed beside the figures. Exit status 1 if a culprit is not named.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import random
import signal
import subprocess
import sys
import time
from typing import Dict, List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from ddpdoctor import proctree  # noqa: E402 - the one way the doctor starts and ends processes

from ddpdoctor.comm.coord import PHASE_KEY, Coord, CoordError, Shared  # noqa: E402
from ddpdoctor.comm.rounds import pair_rounds  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _ministore import StoreLoop  # noqa: E402

SERVER = """
import sys
from datetime import timedelta
import torch.distributed as dist
s = dist.TCPStore("127.0.0.1", 0, None, True, timeout=timedelta(seconds=120), wait_for_workers=False)
print(s.port, flush=True)
sys.stdin.read()
"""
PHASES = ("rendezvous", "init_process_group", "barrier", "all_reduce", "all_gather", "pairs")


PROGRESS = ('{"rank": %d, "host": "%s", "phase": "%s", "since": %r, "time": %r, '
            '"phases": [{"name": "%s", "start": %r, "end": null, "ops": %d}]}')


def progress(rank: int, phase: str, host: str, ops: int = 0) -> str:
    """Rank R's progress record, as ddpdoctor.launch.Reporter mirrors it (the same JSON text that
    json.dumps gives, formatted directly: 49,152 dumps would cost this one core a second)."""
    now = time.time()
    return PROGRESS % (rank, host, phase, now, now, phase, now, ops)


def run_once(n: int, port: int, timeout: float, fault: Optional[str], per_node: int = 8, pool: int = 16,
             spare: int = 16, server_pid: Optional[int] = None) -> dict:
    run = f"sim/{n}/{fault or 'ok'}/{random.getrandbits(32):x}"
    victim = n // 2 + 1 if fault else None
    t0 = time.monotonic()
    loop = StoreLoop("127.0.0.1", port, run, size=pool, spare=spare, tags=n)  # counts each rank's requests
    connect_s = time.monotonic() - t0
    results: Dict[int, dict] = {}
    hosts = {x: f"node{x // per_node:04d}" for x in range(n)}
    rounds = pair_rounds(n, hosts)
    # Each rank's own pairs (`rounds.partner`, an O(n) scan that a real rank does once on its own
    # CPU), for all ranks in one O(n) pass before "go": on one core, n scans would be O(n^2) of
    # simulator time that no real rank pays. The same pairs as partner(rounds, r) gives.
    mine_of: Dict[int, List[dict]] = collections.defaultdict(list)
    for rnd in rounds:
        for p in rnd:
            mine_of[p[0]].append({"src": p[0], "dst": p[1], "gbps": 1.0})

    def conn_of(r: int) -> int:
        """Rank 0 (the diagnoser and collector; in a real job it has its own client and CPU, like
        every rank) gets a connection of its own and is resumed first whenever it can go on, so its
        critical path is not queued behind thousands of other fake ranks' requests and Python work;
        the others share the remaining connections."""
        return 0 if r == 0 else 1 + (r - 1) % (pool - 1)

    def rank_main(r: int):
        """What one rank of `ddpdoctor comm` asks of the store, in order (the collectives between
        the steps are left out). Coord's store is not used: the loop answers the yielded requests."""
        host = hosts[r]
        shared = Shared()
        coord = Coord(None, r, n, shared)
        if not (fault == "frozen" and r == victim):  # a frozen process's watchdog is frozen too
            loop.spawn(Coord(None, r, n, shared).watch_ops(time.time() + 300, lambda ev: ev == "end"), conn_of(r), r,
                       "watch", urgent=r == 0)
        try:
            yield ("set", PHASE_KEY.format(r), progress(r, "rendezvous", host))
            yield from coord.join_ops(json.dumps({"rank": r, "host": host, "world_size": n}), timeout)
            if fault == "frozen" and r == victim:
                return  # frozen: it answers nothing from now on (no ping answer, no arrival)
            for phase in PHASES[1:]:
                yield ("set", PHASE_KEY.format(r), progress(r, phase, host, ops=1))
                if phase == "barrier":
                    yield from coord.barrier_ops("barrier", timeout)
            mine = mine_of.get(r)
            if mine:
                yield from coord.publish_pairs_ops(mine)
            yield from coord.finished_ops()
            if r == 0:
                yield from coord.wait_finished_ops(timeout)
                g = yield from coord.collect_ops()
                results[r] = {"ok": True, "summaries": len(g["summaries"]), "pairs": len(g["pairs"])}
        except CoordError as exc:
            # what a failing rank of `ddpdoctor comm` does: publish, then the job's diagnosis
            yield from coord.publish_failure_ops({"kind": exc.kind, "message": exc.message, "phase": "sim"})
            d = yield from coord.diagnosis_ops(1.2, until=time.time() + 8.0)
            if r == 0:
                results[r] = {"ok": False, "kind": exc.kind, "culprits": d.get("culprits"),
                              "states": {k: v["state"] for k, v in (d.get("peers") or {}).items()
                                         if v["state"] != "ok"}}

    gens = [(r, rank_main(r)) for r in range(n) if not (fault == "missing" and r == victim)]
    cpu0, own0 = _cpu(server_pid), _own_cpu()
    t_go = time.monotonic()
    for r, g in gens:  # "go"
        loop.spawn(g, conn_of(r), r, "main", urgent=r == 0)
    finished = loop.run(lambda: loop.live["main"] == 0, 120.0)
    wall = time.monotonic() - t_go
    server_cpu, own_cpu = _cpu(server_pid) - cpu0, _own_cpu() - own0
    wire, idle = loop.wire, loop.idle
    loop.spawn(Coord(None, -1, n).event_ops("end"), 0, None, "end")  # the watchdogs leave (not counted)
    loop.run(lambda: loop.live["watch"] == 0 and loop.live["end"] == 0, 30.0)
    errors = [f"rank {t.tag} ({t.group}): {type(t.error).__name__}: {t.error}" for t in loop.tasks if t.error]
    if not finished:
        errors.insert(0, "not finished in 120 s")
    buckets: Dict[int, int] = collections.Counter()  # requests per 100 ms of the timed window
    samples = [(t, k) for t, k in loop.samples if t - t_go <= wall]
    for (t, k), (_, k2) in zip(samples, samples[1:]):
        buckets[int((t - t_go) * 10)] += k2 - k
    per = [loop.requests[r] for r in range(n) if not (fault == "missing" and r == victim)]
    total = sum(per)
    counted_in_wall = samples[-1][1] if samples else 0
    r0 = results.get(0) or {}
    named = r0.get("culprits") == [victim] if fault else None
    loop.close()
    return {"n": n, "fault": fault or "none", "victim": victim, "connect_s": round(connect_s, 2),
            "wall_s": round(wall, 2), "requests_total": total, "requests_per_rank_mean": round(total / len(per), 2),
            "requests_per_rank_max": max(per), "rank0_requests": loop.requests[0],
            "wire_requests": wire, "peak_rate_per_s": max(buckets.values()) * 10 if buckets else 0,
            "verdict": r0, "named": named, "errors": errors[:5], "loadavg": _load(),
            "client_cpu_s": round(own_cpu, 2), "client_idle_s": round(idle, 2), "server_cpu_s": round(server_cpu, 3),
            "server_cpu_us_per_wire_request": round(server_cpu / max(1, wire) * 1e6, 1),
            "requests_in_wall": counted_in_wall}


def _own_cpu() -> float:
    t = os.times()
    return t.user + t.system


def _cpu(pid: Optional[int]) -> float:
    """CPU seconds (user + system) the store server process has used so far."""
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, TypeError):
        return 0.0


def _load() -> str:
    try:
        return open("/proc/loadavg").read().split()[0]
    except OSError:
        return "?"


def chart(rows: List[dict], key: str, width: int = 40) -> List[str]:
    top = max(r[key] for r in rows) or 1
    return [f"  n={r['n']:>5} {'#' * max(1, int(width * r[key] / top)):<{width}} {r[key]}" for r in rows]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", default="64,256,1024,4096,8192")
    ap.add_argument("--faults-at", default="", help="n values for the fault runs (default: every n)")
    ap.add_argument("--timeout", type=float, default=None,
                    help="each coordination step's bound (s); default max(5, n/200): the fault runs wait it out")
    ap.add_argument("--json", default=None, help="write the rows here")
    ap.add_argument("--pool", type=int, default=16, help="real pipelined connections the fake ranks share")
    ap.add_argument("--spare", type=int, default=16, help="real connections for the shared blocking waits")
    args = ap.parse_args()
    if args.pool < 2 or args.spare < 1:
        ap.error("--pool needs at least 2 connections (rank 0 has one of its own), --spare at least 1")
    ns = [int(x) for x in args.n.split(",")]
    fault_ns = [int(x) for x in args.faults_at.split(",")] if args.faults_at else ns
    env = dict(os.environ, TORCH_CPP_LOG_LEVEL="ERROR")
    rows = []
    status = 0
    for n in ns:
        for fault in (None, "missing", "frozen"):
            if fault and n not in fault_ns:
                continue
            tree = proctree.Tree()
            srv = tree.popen([sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             env=env, text=True, new_session=True)
            try:
                port = int(srv.stdout.readline())
                row = run_once(n, port, args.timeout or max(5.0, n / 200), fault, pool=args.pool,
                               spare=args.spare, server_pid=srv.pid)
            finally:
                srv.stdin.close()
                tree.stop(grace_s=0.0, first=signal.SIGKILL)
                srv.wait()
            rows.append(row)
            ok = "named" if row["named"] else ("NOT NAMED" if fault else "ok" if row["verdict"].get("ok") else "FAILED")
            if row["named"] is False or (not fault and not row["verdict"].get("ok")):
                status = 1
            print(f"n={n:>5} fault={row['fault']:<7} wall {row['wall_s']:6.2f} s  connect {row['connect_s']:6.2f} s  "
                  f"req/rank {row['requests_per_rank_mean']:6.2f} (max {row['requests_per_rank_max']:>3}, "
                  f"rank0 {row['rank0_requests']:>3})  total {row['requests_total']:>7} (wire {row['wire_requests']:>7})  "
                  f"peak {row['peak_rate_per_s']:>7}/s  cpu: sim {row['client_cpu_s']:.2f} s (idle {row['client_idle_s']:.2f} s), "
                  f"store server "
                  f"{row['server_cpu_s']:.2f} s ({row['server_cpu_us_per_wire_request']} us/wire req)  {ok}  "
                  f"load {row['loadavg']}"
                  + (f"  verdict {row['verdict']}" if row["named"] is False else "")
                  + (f"  errors: {row['errors']}" if row["errors"] else ""), flush=True)
    healthy = [r for r in rows if r["fault"] == "none"]
    if healthy:
        print("store requests per rank (healthy run):")
        print("\n".join(chart(healthy, "requests_per_rank_mean")))
        print("coordination wall time, s (healthy run):")
        print("\n".join(chart(healthy, "wall_s")))
        big = max(healthy, key=lambda r: r["n"])
        print(f"goal: requests per rank flat in n ({min(r['requests_per_rank_mean'] for r in healthy)}-"
              f"{max(r['requests_per_rank_mean'] for r in healthy)}); n={big['n']} in {big['wall_s']} s (goal <= 10 s)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(rows, fh, indent=1)
    return status


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # thousands of store clients: skip their teardown
