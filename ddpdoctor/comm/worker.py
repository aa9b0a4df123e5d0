"""The per-rank worker of `ddpdoctor comm`: seven phases, each with its own deadline.

    rendezvous -> init_process_group -> barrier -> all_reduce (values checked) -> all_gather
    (every rank's summary) -> pairs (send/recv matrix) -> bandwidth (sweep, algbw/busbw)

Runs under `ddpdoctor comm` (our launcher), a user's torchrun (`torchrun ... -m ddpdoctor.comm`)
or srun (SLURM variables are mapped to torch's). Nothing here waits for torch's defaults: the
store, every collective and the whole run have explicit, short timeouts, and a watchdog thread
writes this rank's verdict and leaves when the run's deadline passes, whatever the main thread
is stuck in.

Every rank publishes its progress (phase, collectives started) in the c10d store; the
coordination (rendezvous, barriers, liveness, diagnosis) is `coord.Coord`, at O(1) store requests
per rank per step and no polling. When a phase fails, rank 0 reads its peers' progress in bulk and
asks every watchdog to answer: a peer that never joined, one that does not answer (dead or
frozen), or one behind the others (stuck) is named, and the verdict is published for the other
ranks. Rank 0's view is the report; it also gathers every rank's summary, pair timings and phase
timings through the store, so one result holds the whole picture even across nodes.

Test hook: DDPDOCTOR_COMM_FAULT="<kind>@<phase>" with kind stall | exit | crash | corrupt makes
this rank misbehave for real at that phase (exit: in the middle of a collective).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import sys
import threading
import time
from datetime import timedelta
from typing import Any, Callable, Dict, List, Optional

from ..pipeline.argcheck import OneLineParser, positive
from ..launch import Reporter
from . import metrics, rounds
from .coord import PHASE_ORDER, Coord, CoordError, Shared
from .envmap import torch_env

PHASES = PHASE_ORDER
FAULT_ENV = "DDPDOCTOR_COMM_FAULT"
PREFIX = "ddpdoctor/comm/"


class PhaseFailure(Exception):
    """A phase could not complete. `kind` is a short machine word the checks key on."""

    def __init__(self, phase: str, kind: str, message: str, **evidence: Any):
        super().__init__(message)
        self.phase, self.kind, self.message, self.evidence = phase, kind, message, evidence


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = OneLineParser(prog="python -m ddpdoctor.comm", description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", choices=("auto", "gloo", "nccl"), default="auto")
    p.add_argument("--sizes", default="1K:256M", help="'1K,1M' or a x4 range '1K:256M'")
    p.add_argument("--deadline", type=positive, default=60.0, help="whole-run bound for this rank, seconds")
    p.add_argument("--deadline-at", type=float, default=None,
                   help="absolute end of the run (epoch seconds), set by `ddpdoctor comm` so every rank shares it")
    p.add_argument("--phase-timeout", type=positive, default=15.0, help="bound for each phase, seconds")
    p.add_argument("--pair-size", default="1M", help="message size of the send/recv matrix")
    p.add_argument("--no-pairs", action="store_true")
    p.add_argument("--no-sweep", action="store_true")
    p.add_argument("--out", default=None, help="also write this rank's result JSON here (rank 0: the report's comm section)")
    p.add_argument("--quiet", action="store_true", help="print nothing (our launcher reads the result files)")
    p.add_argument("--attach", default=None, help="a JSON file published for rank 0 (`check` under a launcher: "
                   "this rank's own findings)")
    p.add_argument("--all-ranks", action="store_true", help="every rank prints its report (default: rank 0 only)")
    p.add_argument("--format", choices=("text", "json", "markdown"), default=None,
                   help="rank 0's report format (default text, or $DDPDOCTOR_FORMAT)")
    return p.parse_args(argv)


class Worker:
    def __init__(self, args: argparse.Namespace, environ: Optional[dict] = None):
        self.args = args
        self.t0 = time.time()
        self.t_end = args.deadline_at if args.deadline_at else self.t0 + args.deadline
        self.env = dict(os.environ if environ is None else environ)
        self.tenv = torch_env(self.env)
        os.environ.update({k: v for k, v in self.tenv.items() if k not in os.environ})
        self.rank = _int(self.tenv.get("RANK"), 0)
        self.world = _int(self.tenv.get("WORLD_SIZE"), 1)
        self.local_rank = _int(self.tenv.get("LOCAL_RANK"), 0)
        self.addr = self.tenv.get("MASTER_ADDR", "127.0.0.1")
        self.port = _int(self.tenv.get("MASTER_PORT"), 29500)
        self.rep = Reporter(self.env.get("DDPDOCTOR_LAUNCH_DIR") or None, self.rank, self.local_rank, self.world)
        self.fault = _parse_fault(self.env.get(FAULT_ENV, ""))
        self.store = None
        self.coord: Optional[Coord] = None
        self._shared = Shared()
        self.dist = None
        self.torch = None
        self.backend = args.backend
        self.device = "cpu"
        self.ops = 0
        self.out: Dict[str, Any] = {"rank": self.rank, "world_size": self.world, "ok": False}
        self._finished = threading.Event()
        self.quiet = threading.Event()  # set while timing: the watchdog does no store I/O then
        self._result_lock = threading.Lock()
        self._result_written = False

    # ------------------------------------------------------------------ time
    def remaining(self) -> float:
        return self.t_end - time.time()

    def timeout(self) -> float:
        """This phase's bound: the phase timeout, but never past the run's deadline (minus the
        margin the watchdog needs to write the verdict)."""
        return max(0.5, min(self.args.phase_timeout, self.remaining() - 1.0))

    # ------------------------------------------------------------------ progress
    def enter(self, phase: str) -> None:
        self.phase = phase
        self.ops = 0
        self.rep.phase(phase, ops=0)
        kind = self.fault.get(phase)
        if kind == "stall":
            time.sleep(10 ** 6)  # a real stall: alive (heartbeat runs), never reaches the collective
        if kind == "crash":
            raise RuntimeError(f"injected crash in phase {phase} ({FAULT_ENV})")

    def op(self) -> None:
        self.ops += 1
        self.rep.note(ops=self.ops)

    # ------------------------------------------------------------------ phases
    def run(self) -> dict:
        self._start_watchdog()
        try:
            if not 0 <= self.rank < self.world:
                raise PhaseFailure("rendezvous", "rank-out-of-range",
                                   f"RANK={self.rank} is not in [0, WORLD_SIZE={self.world})")
            self.phase_rendezvous()
            self.phase_init()
            self.phase_barrier()
            self.phase_all_reduce()
            self.phase_all_gather()
            if not self.args.no_pairs and self.world > 1:
                self.phase_pairs()
            if not self.args.no_sweep:
                self.phase_bandwidth()
            self.out["ok"] = not self.out.get("all_reduce", {}).get("bad_ranks")
        except PhaseFailure as exc:
            self.fail(exc)
        except Exception as exc:  # noqa: BLE001 - any torch error is a phase failure to explain
            self.fail(classify(getattr(self, "phase", "rendezvous"), exc, self))
        self.finish()
        return self.out

    def phase_rendezvous(self) -> None:
        self.enter("startup")
        import torch
        import torch.distributed as dist

        self.torch, self.dist = torch, dist
        self.enter("rendezvous")
        if self.backend == "auto":
            self.backend = "nccl" if torch.cuda.is_available() and dist.is_nccl_available() else "gloo"
        if self.backend == "nccl":
            torch.cuda.set_device(self.local_rank % max(1, torch.cuda.device_count()))
            self.device = f"cuda:{torch.cuda.current_device()}"
        from .summary import rank_summary

        # Before any network step, so even a rank that cannot reach the master says who it is.
        self.summary = rank_summary(self.rank, self.world, self.local_rank, self.backend, self.env)
        self.out["summary"] = self.summary
        agent_store = self.env.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
        is_master = self.rank == 0 and not agent_store
        if not is_master:
            probe_master(self.addr, self.port, self.timeout())
        try:
            base = dist.TCPStore(self.addr, self.port, self.world if is_master else None, is_master,
                                 timeout=timedelta(seconds=self.timeout()), wait_for_workers=False)
        except Exception as exc:  # noqa: BLE001
            if is_master and "ADDRINUSE" in str(exc).upper().replace(" ", ""):
                raise PhaseFailure("rendezvous", "port-in-use",
                                   f"MASTER_PORT {self.port} on {self.addr} is already in use", port=self.port,
                                   addr=self.addr) from None
            raise
        run_id = self.env.get("TORCHELASTIC_RUN_ID") or self.env.get("SLURM_JOB_ID") or "standalone"
        restart = self.env.get("TORCHELASTIC_RESTART_COUNT", "0")
        self.base_store = base
        self.store = dist.PrefixStore(f"{PREFIX}{run_id}/{restart}/", base)
        self.rep.attach_store(self.store)
        self.coord = Coord(self.store, self.rank, self.world, self._shared)
        if self.args.attach:
            with contextlib.suppress(OSError):
                with open(self.args.attach, encoding="utf-8") as fh:
                    self.store.set(f"attach/{self.rank}", fh.read())  # before joining: rank 0 reads joined ranks'
        # Duplicate RANKs, WORLD_SIZE disagreements and ranks that never come are caught here.
        self._coord(lambda: self.coord.join(json.dumps(self.summary, default=str), self.timeout()))
        # Rank 0's own findings are in its own report; another rank's count as reported only once
        # rank 0 confirms it read them (finish()), so a broken rank 0 never swallows them.
        self.out["attached"] = bool(self.args.attach) and self.rank == 0

    def phase_init(self) -> None:
        self.enter("init_process_group")
        self.op()
        kw = {}
        if self.backend == "nccl":
            kw["device_id"] = self.torch.device(self.device)
        self.dist.init_process_group(self.backend, store=self.dist.PrefixStore("pg/", self.store), rank=self.rank,
                                     world_size=self.world, timeout=timedelta(seconds=self.timeout()), **kw)

    def phase_barrier(self) -> None:
        self.enter("barrier")
        self.store_barrier("barrier")
        self.op()
        if self.backend == "gloo":
            self.dist.monitored_barrier(timeout=timedelta(seconds=self.timeout()), wait_all_ranks=True)
        else:
            self.dist.barrier()
            self.sync()

    def phase_all_reduce(self) -> None:
        self.enter("all_reduce")
        torch = self.torch
        n = 1 << 16
        # Small whole numbers, so every sum is exact in float32 even for thousands of ranks.
        base = torch.arange(n, dtype=torch.float32, device=self.device) % 1024
        x = base + self.rank
        if self.fault.get("all_reduce") == "exit":
            self.op()
            self.dist.all_reduce(x, async_op=True)  # the same collective as the peers, then gone mid-way
            os._exit(17)
        self.op()
        self.dist.all_reduce(x)
        self.sync()
        if self.fault.get("all_reduce") == "corrupt":
            x[123] += 1.0
        expected = base * self.world + self.world * (self.world - 1) / 2
        diff = (x - expected).abs()
        bad = int((diff > 1e-3).sum())
        mine = {"ok": bad == 0, "bad_elements": bad, "elements": n,
                "first_bad_index": int((diff > 1e-3).nonzero()[0]) if bad else None,
                "got": float(x[int((diff > 1e-3).nonzero()[0])]) if bad else None,
                "expected": float(expected[int((diff > 1e-3).nonzero()[0])]) if bad else None}
        self.out["all_reduce_local"] = mine

    def phase_all_gather(self) -> None:
        self.enter("all_gather")
        self.op()
        gathered: List[Any] = [None] * self.world
        # The all_reduce verdicts travel with the summaries: no store read per rank.
        self.dist.all_gather_object(gathered, {"summary": self.summary,
                                               "all_reduce": self.out.get("all_reduce_local")})
        got = [g for g in gathered if isinstance(g, dict) and isinstance(g.get("summary"), dict)]
        self.out["summaries"] = {str(g["summary"]["rank"]): g["summary"] for g in got}
        verdicts = {str(g["summary"]["rank"]): g["all_reduce"] for g in got if isinstance(g.get("all_reduce"), dict)}
        bad = sorted(int(r) for r, v in verdicts.items() if not v.get("ok"))
        self.out["all_reduce"] = {"ok": not bad, "bad_ranks": bad, "per_rank": verdicts,
                                  "check": "sum over ranks of (arange(65536) % 1024) + rank"}

    def phase_pairs(self) -> None:
        self.enter("pairs")
        torch = self.torch
        nbytes = metrics.parse_size(self.args.pair_size)
        buf = torch.empty(nbytes, dtype=torch.uint8, device=self.device)
        iters = metrics.iters_for(nbytes, 64 << 20, 2, 10)
        mine = []
        hosts = {int(r): s.get("host") for r, s in (self.out.get("summaries") or {}).items()}
        # Parallel rounds: each rank in at most one pair per round; `ops` counts rounds (idle
        # ones included), so a rank waiting for a stuck partner is never "behind" an idle one.
        for k, pair in enumerate(rounds.partner(rounds.pair_rounds(self.world, hosts), self.rank)):
            self.ops = k + 1
            if pair is None:
                continue
            i, j = pair
            peer = j if self.rank == i else i
            self.rep.note(ops=self.ops, pair=[i, j])
            self._pingpong(buf, peer, initiator=self.rank == i, iters=1)  # warm-up
            self.quiet.set()
            t = self._pingpong(buf, peer, initiator=self.rank == i, iters=iters)
            self.quiet.clear()
            if self.rank == i:
                bw = metrics.bandwidth("sendrecv", 2 * nbytes * iters, t, 2)
                mine.append({"src": i, "dst": j, "bytes": nbytes, "iters": iters,
                             "time_us": round(t / iters * 1e6, 1), "gbps": bw["algbw_gbps"]})
        if mine:
            self.coord.publish_pairs(mine)
        self.out["pairs_local"] = mine

    def _pingpong(self, buf, peer: int, initiator: bool, iters: int) -> float:
        self.sync()
        t = time.perf_counter()
        for _ in range(iters):
            if initiator:
                self.dist.send(buf, peer)
                self.dist.recv(buf, peer)
            else:
                self.dist.recv(buf, peer)
                self.dist.send(buf, peer)
        self.sync()
        return time.perf_counter() - t

    def phase_bandwidth(self) -> None:
        self.enter("bandwidth")
        torch = self.torch
        sizes = metrics.parse_sizes(self.args.sizes)
        rows = []
        exit_fault = self.fault.get("bandwidth") == "exit"
        for nbytes in sizes:
            numel = max(1, nbytes // 4)
            x = torch.ones(numel, dtype=torch.float32, device=self.device)
            iters = metrics.iters_for(nbytes)
            self.op()
            self.rep.note(size=nbytes)
            self.dist.all_reduce(x)  # warm-up
            if exit_fault and nbytes == sizes[-1]:
                self.dist.all_reduce(x, async_op=True)
                time.sleep(0.002)
                os._exit(17)
            self.dist.barrier()
            self.sync()
            self.quiet.set()
            t = time.perf_counter()
            for _ in range(iters):
                self.dist.all_reduce(x)
            self.sync()
            rows.append([nbytes, iters, (time.perf_counter() - t) / iters])
            self.quiet.clear()
            del x
        # nccl-tests style: the slowest rank's time defines the figure.
        times = torch.tensor([r[2] for r in rows], dtype=torch.float64, device=self.device)
        self.dist.all_reduce(times, op=self.dist.ReduceOp.MAX)
        out = []
        for (nbytes, iters, _), sec in zip(rows, times.tolist()):
            bw = metrics.bandwidth("all_reduce", nbytes, sec, self.world)
            out.append({"op": "all_reduce", "bytes": nbytes, "iters": iters, "time_us": round(sec * 1e6, 1), **bw})
        self.out["bandwidth"] = out

    def sync(self) -> None:
        if self.backend == "nccl":
            self.torch.cuda.synchronize()

    # ------------------------------------------------------------------ store helpers
    def store_barrier(self, name: str) -> None:
        """Every rank arrives; one blocking store wait (no polling) until all did, bounded by this
        phase's timeout. On timeout raise, naming the ranks that never arrived (rank 0 reads the
        arrival list)."""
        self._coord(lambda: self.coord.barrier(name, self.timeout()))

    def _coord(self, step) -> None:
        try:
            step()
        except CoordError as exc:
            raise PhaseFailure(getattr(self, "phase", "rendezvous"), exc.kind, exc.message, **exc.evidence) from None

    # ------------------------------------------------------------------ failure and verdict
    def fail(self, exc: PhaseFailure, coord: Optional[Coord] = None) -> None:
        """Record this rank's first failure (later ones are consequences), publish it, diagnose.
        `coord`: the calling thread's own store client (the watchdog must not queue behind a
        main thread blocked in a store wait)."""
        with self._result_lock:
            if self.out.get("failure") is not None:
                return
            self.out["failure"] = {"phase": exc.phase, "kind": exc.kind, "message": exc.message}
        self.out["ok"] = False
        self.out["failure"] = {"phase": exc.phase, "kind": exc.kind, "message": exc.message, **exc.evidence}
        coord = coord or self.coord
        if coord is not None:
            with contextlib.suppress(Exception):  # so rank 0 learns the concrete cause, not just a timeout
                coord.publish_failure(self.out["failure"])
        from .section import GENERIC_KINDS

        # A concrete local error needs no liveness probe of the peers; a timeout does.
        self.out["diagnosis"] = self.diagnose(exc, wait_s=1.2 if exc.kind in GENERIC_KINDS else 0.0, coord=coord)
        if self.rank == 0 or exc.kind in ("world-size-mismatch",):
            self.rep.stop_run(f"{exc.kind} in {exc.phase}")

    def diagnose(self, exc: Optional[PhaseFailure] = None, wait_s: float = 1.2,
                 coord: Optional[Coord] = None) -> dict:
        """Who is to blame: never joined, dead/frozen (no answer to a ping), or behind. Rank 0
        diagnoses in bulk and publishes; the others take its verdict (coord.Coord.diagnosis)."""
        coord = coord or self.coord
        if coord is None:
            return {"store": "unreachable"}
        wait_s = min(wait_s, max(0.0, self.remaining() - 0.8))
        try:
            gone = exc is not None and self.rank != 0 and rank0_exited(coord.progress(0), self.rep.host, self.env)
            return coord.diagnosis(wait_s, until=min(self.t_end - 0.8, time.time() + wait_s + 4.0), rank0_gone=gone)
        except Exception:  # noqa: BLE001 - a dead store means we know nothing more
            return {"store": "unreachable"}

    def _fresh_store(self):
        """A second store client: the main thread may be blocked inside the first one."""
        if self.dist is None:
            return None
        try:
            base = self.dist.TCPStore(self.addr, self.port, None, False, timeout=timedelta(seconds=2),
                                      wait_for_workers=False)
            run_id = self.env.get("TORCHELASTIC_RUN_ID") or self.env.get("SLURM_JOB_ID") or "standalone"
            restart = self.env.get("TORCHELASTIC_RESTART_COUNT", "0")
            return self.dist.PrefixStore(f"{PREFIX}{run_id}/{restart}/", base)
        except Exception:  # noqa: BLE001
            return None

    def _start_watchdog(self) -> None:
        """No heartbeat traffic: the watchdog blocks in one store wait on the next coordination
        event (a peer's failure, a liveness ping it answers, a published verdict). At the deadline
        it writes the verdict and leaves, whatever the main thread is blocked in (a collective, a
        store call, a stalled user step)."""

        def on_event(wcoord: Coord, ev: str) -> bool:
            if ev.startswith("fail:") and ev != f"fail:{self.rank}" and self.out.get("failure") is None:
                phase = getattr(self, "phase", "rendezvous")
                self.fail(PhaseFailure(phase, "peer-failed", "a peer rank failed: see its failure"), coord=wcoord)
                if self.out["failure"]["kind"] == "peer-failed":  # not raced by the main thread's own
                    self.finish_from_watchdog(wcoord)
            return False

        def loop():
            wcoord: Optional[Coord] = None
            while not self._finished.is_set():
                until = self.t_end - 1.2  # the latest the old 0.3 s-tick watchdog fired (remaining < 1.5)
                if time.time() >= until:
                    break
                if self.coord is None:
                    self._finished.wait(min(0.1, max(0.0, until - time.time())))  # local flag only
                    continue
                if wcoord is None:
                    fresh = self._fresh_store()
                    if fresh is None:
                        self._finished.wait(min(0.5, max(0.0, until - time.time())))
                        continue
                    wcoord = Coord(fresh, self.rank, self.world, self._shared)
                try:
                    wcoord.watch(until, lambda ev: on_event(wcoord, ev))
                except Exception:  # noqa: BLE001 - the store went away: keep the deadline only
                    self._finished.wait(min(0.5, max(0.0, until - time.time())))
            if self._finished.is_set():
                return
            phase = getattr(self, "phase", "rendezvous")
            exc = PhaseFailure(phase, "deadline", f"rank {self.rank} still in phase '{phase}' "
                               f"when its {self.args.deadline:.0f} s deadline ran out")
            self.out["ok"] = False
            if self.out.get("failure") is None:
                self.out["failure"] = {"phase": exc.phase, "kind": exc.kind, "message": exc.message}
            if wcoord is not None:
                self.rep.store = wcoord.store  # the main client may be held by a blocked wait
            if not (self.out.get("diagnosis") or {}).get("peers"):
                self.out["diagnosis"] = self.diagnose(exc, wait_s=0.5, coord=wcoord) if wcoord is not None else {}
            if self.rank == 0:
                self.rep.stop_run("deadline")
            self.write_result()
            Reporter.exit(0)

        threading.Thread(target=loop, name="ddpdoctor-watchdog", daemon=True).start()

    def finish_from_watchdog(self, wcoord: Coord) -> None:
        """The main thread is blocked in a collective that will only time out: answer now."""
        self.rep.store = wcoord.store
        if self.rank == 0:
            with contextlib.suppress(Exception):
                self.collect_global(wcoord)
            self.rep.stop_run("peer failed")
        self.write_result()
        Reporter.exit(0)

    def finish(self) -> None:
        if self.coord is not None and self.out.get("failure") is None:
            self.enter("teardown")
            with contextlib.suppress(Exception):
                self.coord.finished()
        if self.rank == 0 and self.coord is not None:
            if self.out.get("failure") is None:
                # Every rank's pairs are published, and rank 0 may host the store (srun): one
                # bounded wait for the last rank's "finished" instead of a polling loop.
                with contextlib.suppress(Exception):
                    self.coord.wait_finished(min(5.0, max(0.5, self.remaining() - 1.0)))
            self.collect_global()
        elif self.coord is not None and self.args.attach:
            # Rank 0 acknowledges once it has read every attachment (right after the last rank
            # finished); bounded, and a store gone with rank 0 answers False at once.
            if rank0_cannot_ack(self.out):
                self.out["attached"] = False
            else:
                with contextlib.suppress(Exception):
                    self.out["attached"] = bool(self.coord.attachments_acked(min(10.0, max(0.5, self.remaining() - 1.0))))
        self.write_result()

    def collect_global(self, coord: Optional[Coord] = None) -> None:
        """Rank 0 gathers what every rank published, in bulk, so one result describes the job, and
        tells the ranks whose attachments it read that their findings are in its report."""
        coord = coord or self.coord
        self.out["global"] = coord.collect(attachments=bool(self.args.attach))
        if self.args.attach:
            with contextlib.suppress(Exception):
                coord.ack_attachments(int(r) for r in (self.out["global"].get("attachments") or {}))

    def write_result(self) -> None:
        with self._result_lock:
            if self._result_written:
                return
            self._result_written = True
            self.out["elapsed_s"] = round(time.time() - self.t0, 3)
            self.out["backend"] = self.backend
            self.out["host"] = socket.gethostname()
            self.out["master_addr"], self.out["master_port"] = self.addr, self.port
            self.rep.result(self.out)
            if self.args.out and (self.rank == 0 or "{rank}" in self.args.out):
                from ..launch import atomic_write_json as _atomic_write_json

                with contextlib.suppress(OSError):
                    _atomic_write_json(self.args.out.replace("{rank}", str(self.rank)), self.out)
        self._finished.set()


def pair_schedule(world: int, hosts: Optional[Dict[int, str]] = None) -> List[tuple]:
    """Every pair the test ping-pongs (flattened `rounds.pair_rounds`): the ring and the half-way
    partner, which covers every rank twice and the links a ring or tree all_reduce uses; all
    pairs up to 4 ranks."""
    return rounds.flatten(rounds.pair_rounds(world, hosts))


def probe_master(addr: str, port: int, timeout_s: float) -> None:
    """Before torch's TCPStore (which retries silently for its whole timeout), tell apart: the
    name does not resolve, nothing listens yet (keep trying: rank 0 may be late), or no answer."""
    import ipaddress

    try:
        ipaddress.ip_address(addr)
        infos = [addr]
    except ValueError:
        infos = _resolve(addr, min(timeout_s, 5.0))
    until = time.time() + timeout_s
    last = None
    while True:
        for ip in infos:
            fam = socket.AF_INET6 if ":" in ip else socket.AF_INET
            with socket.socket(fam, socket.SOCK_STREAM) as s:
                s.settimeout(max(0.2, min(1.0, until - time.time())))
                try:
                    s.connect((ip, port))
                    return
                except OSError as exc:
                    last = exc
        if time.time() > until:
            kind = "master-refused" if isinstance(last, ConnectionRefusedError) else "master-unreachable"
            raise PhaseFailure("rendezvous", kind, f"cannot connect to MASTER_ADDR:MASTER_PORT {addr}:{port} "
                               f"within {timeout_s:.0f} s: {last}", addr=addr, port=port, error=str(last))
        time.sleep(0.1)


def _resolve(addr: str, timeout_s: float) -> List[str]:
    result: dict = {}

    def go():
        try:
            result["ips"] = sorted({i[4][0] for i in socket.getaddrinfo(addr, None, type=socket.SOCK_STREAM)})
        except OSError as exc:
            result["error"] = exc

    t = threading.Thread(target=go, daemon=True)
    t.start()
    t.join(timeout_s)
    if result.get("ips"):
        return result["ips"]
    err = result.get("error") or f"no answer from the resolver within {timeout_s:.0f} s"
    raise PhaseFailure("rendezvous", "master-unresolvable", f"MASTER_ADDR {addr!r} does not resolve: {err}",
                       addr=addr, error=str(err))


def classify(phase: str, exc: BaseException, worker: Optional[Worker] = None) -> PhaseFailure:
    """Turn a torch error into a phase failure with a kind the checks understand."""
    text = f"{type(exc).__name__}: {exc}"
    first = text.splitlines()[0][:500]
    low = text.lower()
    if "unable to find address for" in low or "unable to find interface" in low:
        import re

        m = re.search(r"unable to find address for:?\s*([\w.\-:]+)", text, re.I)
        return PhaseFailure(phase, "interface-missing", first, iface=m.group(1) if m else None)
    if "address already in use" in low or "eaddrinuse" in low:
        return PhaseFailure(phase, "port-in-use", first)
    if "timed out" in low or "timeout" in low:
        return PhaseFailure(phase, "timeout", first)
    if "connection closed by peer" in low or "connection reset" in low or "broken pipe" in low:
        return PhaseFailure(phase, "peer-disconnected", first)
    if "monitored_barrier" in low or "failed to respond" in low:
        return PhaseFailure(phase, "missing-ranks", first)
    return PhaseFailure(phase, "error", first)


def _parse_fault(spec: str) -> Dict[str, str]:
    out = {}
    for item in spec.split(","):
        if "@" in item:
            kind, phase = item.strip().split("@", 1)
            out[phase] = kind
    return out


def _int(v: Any, default: int) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return default


def rank0_cannot_ack(out: dict) -> bool:
    """Whether this rank's own failed run already found rank 0 gone: never joined, or no answer to the liveness
    ping (dead or frozen). Rank 0 acknowledges attachments only after it collected every rank, so waiting up to
    10 s for that answer (what a rank whose rank 0 died in all_reduce did) only delays the rank's own report;
    the rank prints its findings itself, as on no answer (a report may repeat them: none is lost)."""
    if out.get("failure") is None:
        return False
    peers = (out.get("diagnosis") or {}).get("peers") or {}
    state = (peers.get("0") or peers.get(0) or {}).get("state")
    return state in ("never-joined", "not-responding")


def rank0_exited(progress0: Optional[dict], host: str, env: Dict[str, str],
                 running: Optional[Callable[[int], bool]] = None) -> bool:
    """Whether rank 0's process has ended, as this rank can see for itself: rank 0 published its progress
    (ddpdoctor.launch.Reporter: host, pid) from this host, the launcher puts this rank on rank 0's node
    (GROUP_RANK or SLURM_NODEID 0: the same process namespace, not a namesake container), and that pid is no
    longer running (gone, or a zombie). Then no verdict of rank 0's will come: a failed rank diagnoses at once
    instead of waiting 2 * 1.2 + 3 s for one (Coord.diagnosis_ops, rank0_gone). Anything unknown: False."""
    if not progress0 or not host or progress0.get("host") != host:
        return False
    if "0" not in (env.get("GROUP_RANK"), env.get("SLURM_NODEID")):
        return False
    pid = progress0.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    if running is None:
        from ..proctree import running
    return not running(pid)


def main(argv: Optional[List[str]] = None) -> None:
    from ..model.redact import redacted_stderr

    with redacted_stderr():  # this rank's own lines on stderr (the one redacting writer, as `ddpdoctor` has)
        _main(argv)


def _main(argv: Optional[List[str]] = None) -> None:
    args = parse_args(argv)
    env_fmt = os.environ.get("DDPDOCTOR_FORMAT")
    if env_fmt is not None and args.format is None and env_fmt not in ("text", "json", "markdown"):
        # never render in a silently substituted format
        sys.stderr.write(f"python -m ddpdoctor.comm: error: DDPDOCTOR_FORMAT={env_fmt!r} is not text, json or markdown\n")
        sys.exit(2)
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
    w = Worker(args)
    out = w.run()
    if not args.quiet and not os.environ.get("DDPDOCTOR_LAUNCH_DIR"):
        # Under a user's torchrun/srun: rank 0 prints the job's report; the others only a failure
        # of their own that rank 0 may not have seen (a concrete cause), or nothing.
        if w.rank == 0 or args.all_ranks:
            from .section import section_from_rank0
            from .api import report_for_section
            from ..pipeline.render import render

            report = report_for_section(section_from_rank0(out, deadline_s=args.deadline))
            fmt = args.format or os.environ.get("DDPDOCTOR_FORMAT", "text")
            sys.stdout.write(render(report, fmt) + "\n")
        else:
            from .section import GENERIC_KINDS

            f = out.get("failure") or {}
            if f and f.get("kind") not in GENERIC_KINDS:
                sys.stdout.write(f"[rank {w.rank}] FAILED in phase '{f.get('phase')}': {f.get('message')}\n")
    Reporter.exit(0)
