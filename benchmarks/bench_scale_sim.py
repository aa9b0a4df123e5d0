"""The comm coordination simulated up to 8,192 ranks against one real TCPStore (issue 15).

Fake ranks are threads (no torch collectives) running the real coordination code of
`ddpdoctor comm` (`ddpdoctor.comm.coord.Coord`: rendezvous keys, barriers, liveness pings,
diagnosis, verdict collection) against one real c10d TCPStore served by a separate process, as
rank 0's store is in a real job. Every store call of every fake rank goes through a counting
wrapper: the request figures are what each rank asks of the store. Underneath, the calls share a
few real connections (`_ministore.PooledStore`: this VM accepts ~11 new TCP connections a second,
so 8,192 of them cannot be opened in a benchmark). A fake rank is two threads, as a real one: its
main thread, and its watchdog blocked on the next coordination event (it answers liveness pings;
a frozen rank has none).

Reported per n: store requests per rank (mean, max) and in total, the peak request rate (per
100 ms window), and the wall time of the coordination (all clients already connected; the connect
time is shown apart). Then the same with one rank that never starts and one rank that freezes
after joining (no thread of it answers any more): both must be named by rank 0's diagnosis.

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
import subprocess
import sys
import threading
import time
from typing import Dict, List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from ddpdoctor.comm.coord import PHASE_KEY, Coord, CoordError, Shared  # noqa: E402
from ddpdoctor.comm.rounds import pair_rounds, partner  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _ministore import PooledStore  # noqa: E402

SERVER = """
import sys
from datetime import timedelta
import torch.distributed as dist
s = dist.TCPStore("127.0.0.1", 0, None, True, timeout=timedelta(seconds=120), wait_for_workers=False)
print(s.port, flush=True)
sys.stdin.read()
"""
PHASES = ("rendezvous", "init_process_group", "barrier", "all_reduce", "all_gather", "pairs")


class Counter:
    def __init__(self) -> None:
        self.stamps: List[float] = []  # list.append is atomic under the GIL
        self.per_rank: Dict[int, int] = collections.Counter()
        self.lock = threading.Lock()


class Counting:
    """A store-like wrapper that counts every request of one rank (a blocking wait counts once)."""

    def __init__(self, store, rank: int, counter: Counter):
        self._s, self._r, self._c = store, rank, counter
        self._stamps, self._per = counter.stamps, counter.per_rank

    def _n(self) -> None:
        self._stamps.append(time.monotonic())
        self._per[self._r] += 1

    def set(self, key, value):
        self._n()
        return self._s.set(key, value)

    def append(self, key, value):
        self._n()
        return self._s.append(key, value)

    def add(self, key, delta):
        self._n()
        return self._s.add(key, delta)

    def check(self, keys):
        self._n()
        return self._s.check(keys)

    def get(self, key):
        self._n()
        return self._s.get(key)

    def multi_get(self, keys):
        self._n()
        return self._s.multi_get(keys)

    def wait(self, keys, timeout=None):
        self._n()
        return self._s.wait(keys, timeout)


def progress(rank: int, phase: str, host: str, ops: int = 0) -> str:
    now = time.time()
    return json.dumps({"rank": rank, "host": host, "phase": phase, "since": now, "time": now,
                       "phases": [{"name": phase, "start": now, "end": None, "ops": ops}]})


def run_once(n: int, port: int, timeout: float, fault: Optional[str], per_node: int = 8, pool: int = 16,
             server_pid: Optional[int] = None) -> dict:
    counter = Counter()
    run = f"sim/{n}/{fault or 'ok'}/{random.getrandbits(32):x}"
    victim = n // 2 + 1 if fault else None
    t0 = time.monotonic()
    transport = PooledStore("127.0.0.1", port, run, size=pool)
    connect_s = time.monotonic() - t0
    go = threading.Event()
    results: Dict[int, dict] = {}
    errors: List[str] = []
    hosts = {x: f"node{x // per_node:04d}" for x in range(n)}
    rounds = pair_rounds(n, hosts)

    def watchdog(w: Coord):
        try:
            w.watch(time.time() + 300, lambda ev: ev == "end")
        except Exception as exc:  # noqa: BLE001
            errors.append(f"watchdog {w.rank}: {exc}")

    def rank_main(r: int):
        host = hosts[r]
        shared = Shared()
        coord = Coord(Counting(transport.view(r), r, counter), r, n, shared)
        go.wait()
        if not (fault == "frozen" and r == victim):  # a frozen process's watchdog is frozen too
            w = threading.Thread(target=watchdog, args=(Coord(Counting(transport.view(r), r, counter), r, n, shared),),
                                 daemon=True)
            watchers.append(w)
            w.start()
        try:
            coord.store.set(PHASE_KEY.format(r), progress(r, "rendezvous", host))
            coord.join(json.dumps({"rank": r, "host": host, "world_size": n}), timeout)
            if fault == "frozen" and r == victim:
                return  # frozen: it answers nothing from now on (no ping answer, no arrival)
            for phase in PHASES[1:]:
                coord.store.set(PHASE_KEY.format(r), progress(r, phase, host, ops=1))
                if phase == "barrier":
                    coord.barrier("barrier", timeout)
            mine = [{"src": p[0], "dst": p[1], "gbps": 1.0} for p in partner(rounds, r) if p is not None and p[0] == r]
            if mine:
                coord.publish_pairs(mine)
            coord.finished()
            if r == 0:
                coord.wait_finished(timeout)
                g = coord.collect()
                results[r] = {"ok": True, "summaries": len(g["summaries"]), "pairs": len(g["pairs"])}
        except CoordError as exc:
            # what a failing rank of `ddpdoctor comm` does: publish, then the job's diagnosis
            coord.publish_failure({"kind": exc.kind, "message": exc.message, "phase": "sim"})
            d = coord.diagnosis(1.2, until=time.time() + 8.0)
            if r == 0:
                results[r] = {"ok": False, "kind": exc.kind, "culprits": d.get("culprits"),
                              "states": {k: v["state"] for k, v in (d.get("peers") or {}).items()
                                         if v["state"] != "ok"}}
        except Exception as exc:  # noqa: BLE001
            errors.append(f"rank {r}: {type(exc).__name__}: {exc}")

    watchers: List[threading.Thread] = []
    threading.stack_size(256 * 1024)
    threads = [threading.Thread(target=rank_main, args=(r,), daemon=True) for r in range(n)
               if not (fault == "missing" and r == victim)]
    for t in threads:
        t.start()
    cpu0 = _cpu(server_pid)
    t_go = time.monotonic()
    go.set()
    for t in threads:
        t.join(timeout=120)
    wall = time.monotonic() - t_go
    Coord(transport.view(0), -1, n).event("end")  # the watchdogs leave
    for w in list(watchers):
        w.join(timeout=30)
    server_cpu = _cpu(server_pid) - cpu0
    stamps = list(counter.stamps)
    buckets = collections.Counter(int((x - t_go) * 10) for x in stamps)
    per = [counter.per_rank.get(r, 0) for r in range(n) if not (fault == "missing" and r == victim)]
    total = sum(per)
    r0 = results.get(0) or {}
    named = r0.get("culprits") == [victim] if fault else None
    transport.close()
    return {"n": n, "fault": fault or "none", "victim": victim, "connect_s": round(connect_s, 2),
            "wall_s": round(wall, 2), "requests_total": total, "requests_per_rank_mean": round(total / len(per), 2),
            "requests_per_rank_max": max(per), "rank0_requests": counter.per_rank.get(0, 0),
            "peak_rate_per_s": max(buckets.values()) * 10 if buckets else 0, "verdict": r0,
            "named": named, "errors": errors[:5], "loadavg": _load(), "server_cpu_s": round(server_cpu, 3),
            "server_cpu_us_per_request": round(server_cpu / max(1, total) * 1e6, 1)}


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
    ap.add_argument("--pool", type=int, default=64, help="real connections the fake ranks share")
    args = ap.parse_args()
    ns = [int(x) for x in args.n.split(",")]
    fault_ns = [int(x) for x in args.faults_at.split(",")] if args.faults_at else ns
    env = dict(os.environ, TORCH_CPP_LOG_LEVEL="ERROR")
    rows = []
    status = 0
    for n in ns:
        for fault in (None, "missing", "frozen"):
            if fault and n not in fault_ns:
                continue
            srv = subprocess.Popen([sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   env=env, text=True)
            try:
                port = int(srv.stdout.readline())
                row = run_once(n, port, args.timeout or max(5.0, n / 200), fault, pool=args.pool, server_pid=srv.pid)
            finally:
                srv.stdin.close()
                srv.kill()
                srv.wait()
            rows.append(row)
            ok = "named" if row["named"] else ("NOT NAMED" if fault else "ok" if row["verdict"].get("ok") else "FAILED")
            if row["named"] is False or (not fault and not row["verdict"].get("ok")):
                status = 1
            print(f"n={n:>5} fault={row['fault']:<7} wall {row['wall_s']:6.2f} s  connect {row['connect_s']:6.2f} s  "
                  f"req/rank {row['requests_per_rank_mean']:6.2f} (max {row['requests_per_rank_max']:>3}, "
                  f"rank0 {row['rank0_requests']:>3})  total {row['requests_total']:>7}  "
                  f"peak {row['peak_rate_per_s']:>7}/s  server cpu {row['server_cpu_s']:.2f} s "
                  f"({row['server_cpu_us_per_request']} us/req)  {ok}  load {row['loadavg']}"
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
