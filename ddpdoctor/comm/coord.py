"""Job coordination over one c10d-style key-value store, at O(1) store requests per rank per step.

Used by the comm worker (`worker.py`) and by `benchmarks/bench_scale_sim.py`, which runs this very
code for up to 8,192 fake ranks against one real TCPStore. No torch import here: `store` is any
object with `set/get/add/append/check/multi_get/wait(keys, timedelta)` (a torch `TCPStore`, a
`PrefixStore`, or a counting wrapper).

The rules that keep one store server alive at thousands of ranks:

* **No polling.** A barrier is one `add` (the arrival count) and one blocking `wait` on a key that
  the last arriver sets; the server answers every waiter when that key appears.
* **No periodic heartbeats.** Liveness is asked only when a diagnosis needs it: the diagnoser
  posts a ping *event*; every rank's watchdog, already blocked in one `wait` on the next event
  key, wakes and answers with one `add` (and one `append`). A frozen process (SIGSTOP, a dead
  host) cannot answer, and is named as not responding.
* **One diagnoser.** Rank 0 diagnoses (bulk reads: one `get` per list key, one `multi_get` for
  progress and failures) and publishes the verdict under `diag`; the other ranks wait for it.
  Only if rank 0 publishes nothing in time does one backup rank (the first to claim
  `diag/claim`) diagnose instead.
* **Lists, not key scans.** Who joined, who arrived at a barrier, who failed, who finished and
  who answered a ping are `append`-ed to one key each, so the diagnoser reads each in one request.

How it runs: every step is written once, as a generator of store requests (`join_ops`,
`barrier_ops`, ...: it yields `("add", key, 1)`, is sent the answer, or has the store's exception
thrown in where the request was). `Coord.join(...)` and the other plain methods run those requests
one by one on `self.store`, blocking, which is what the comm worker does; the same generators let
the scale benchmark drive thousands of ranks from one event loop without a thread per rank. Same
code, same requests, in the same order; `run_ops` is the whole blocking driver. It also makes a
step's store cost checkable without a store (tests/test_coord.py counts the requests a step yields).

Keys (relative to the run's prefix store)::

    dup/R                  add 1 per process claiming RANK R (2: a duplicate RANK)
    joined                 append "R:W," (rank, its WORLD_SIZE claim); the join barrier's arrivals
    joinsum                add: joined count (low 20 bits) + sum of WORLD_SIZE claims (high bits)
    arrive/N, arrived/N    barrier N's arrival list and count; done/N set by the last arriver
    ddpdoctor/phase/R      rank R's progress (written by ddpdoctor.launch.Reporter)
    summary/R, failure/R   set once
    failed, failures       append "R," / count of failed ranks
    ev/n, ev/K             event counter and events: "fail:R", "ping:ID:EXPECTED", "diag", "end"
    pong/ID, pongn/ID, pongall/ID   answers to ping ID
    diag, diag/claim       the published diagnosis; the backup diagnoser's claim
    finished, finishedn, finished/all   clean ends
"""
from __future__ import annotations

import functools
import json
import threading
import time
import uuid
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence

from ddpdoctor.gather.storekeys import Ops, Request, is_timeout, run_ops  # noqa: F401 - comm's names for them
from ddpdoctor.gather.storekeys import wait_keys as wait_key, wait_keys_ops as wait_key_ops  # noqa: F401

PHASE_KEY = "ddpdoctor/phase/{}"   # the key ddpdoctor.launch.Reporter mirrors progress into
JOIN_BITS = 20                     # joinsum: low bits count ranks, high bits sum their WORLD_SIZE
PHASE_ORDER = ("startup", "rendezvous", "init_process_group", "barrier", "all_reduce", "all_gather", "pairs",
               "bandwidth")


class CoordError(Exception):
    """A coordination step failed. `kind` is the word the comm checks key on."""

    def __init__(self, kind: str, message: str, **evidence: Any):
        super().__init__(message)
        self.kind, self.message, self.evidence = kind, message, evidence


def _blocking(step: Callable[..., Ops]) -> Callable[..., Any]:
    """The plain method of a `*_ops` step: run its requests on self.store."""

    @functools.wraps(step)
    def run(self: "Coord", *args: Any, **kwargs: Any) -> Any:
        return run_ops(step(self, *args, **kwargs), self.store)

    run.__name__ = run.__qualname__ = step.__name__[: -len("_ops")]
    return run


def parse_list(raw: Any) -> List[str]:
    text = raw.decode() if isinstance(raw, (bytes, bytearray)) else str(raw or "")
    return [x for x in text.split(",") if x]


def parse_ranks(raw: Any) -> List[int]:
    out = []
    for x in parse_list(raw):
        try:
            out.append(int(x.split(":", 1)[0]))
        except ValueError:
            continue
    return out


def _text(raw: Any) -> str:
    return raw.decode() if isinstance(raw, (bytes, bytearray)) else str(raw)


class Shared:
    """State shared by the Coord objects of one rank (main thread, watchdog): which pings this
    rank has answered already, so two threads never answer one ping twice."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.answered: set = set()


class Coord:
    """One rank's view of the coordination keys through one store client.

    A TCPStore client serializes its requests: a thread blocked in `wait` holds it. So each
    thread that may block (the main thread in a barrier, the watchdog waiting for events) uses its
    own client, hence its own `Coord`; `shared` ties the ones of one rank together.

    Each step is a generator of store requests (`x_ops`, see the module docstring) and a plain
    method `x` that runs it on `self.store`.
    """

    def __init__(self, store: Any, rank: int, world: int, shared: Optional[Shared] = None):
        self.store, self.rank, self.world = store, rank, world
        self.shared = shared or Shared()
        self._cursor = 1  # next event number this client reads

    # ------------------------------------------------------------------ rendezvous and barriers
    def join_ops(self, summary: str, timeout: float) -> Ops:
        """Announce this rank (its summary and WORLD_SIZE claim) and wait for every rank.

        Raises CoordError duplicate-rank, world-size-mismatch, or missing-ranks (with `missing`,
        on rank 0, from the joined list). 6 requests per rank, 7 for the last arriver.
        """
        dup = int((yield ("add", f"dup/{self.rank}", 1)))
        yield ("set", f"summary/{self.rank}", summary)
        yield ("append", "joined", f"{self.rank}:{self.world},")
        v = int((yield ("add", "joinsum", (self.world << JOIN_BITS) + 1)))
        if dup > 1:
            raise CoordError("duplicate-rank", f"two processes claim RANK={self.rank}", ranks=[self.rank])
        joined, wsum = v & ((1 << JOIN_BITS) - 1), v >> JOIN_BITS
        if wsum != joined * self.world:
            yield ("set", "done/joined", "mismatch")  # wake the others now: they fail the same way
            raise (yield from self._mismatch_ops())
        if joined >= self.world:
            yield ("set", "done/joined", str(v))
        if not (yield from wait_key_ops(["done/joined"], timeout)):
            raise (yield from self._missing_ops("joined", timeout, list_key="joined"))
        if _text((yield ("get", "done/joined"))) == "mismatch":
            raise (yield from self._mismatch_ops())

    def barrier_ops(self, name: str, timeout: float) -> Ops:
        """Every rank arrives (one add, one append); the last one sets done/NAME; all wait on it.
        On timeout raise missing-ranks (rank 0 names the ranks that never arrived)."""
        yield ("append", f"arrive/{name}", f"{self.rank},")
        if int((yield ("add", f"arrived/{name}", 1))) >= self.world:
            yield ("set", f"done/{name}", "1")
        if not (yield from wait_key_ops([f"done/{name}"], timeout)):
            raise (yield from self._missing_ops(name, timeout, list_key=f"arrive/{name}"))

    def _missing_ops(self, name: str, timeout: float, list_key: str) -> Ops:
        missing = None
        if self.rank == 0:  # one reader of the arrival list, not n
            try:
                seen = set(parse_ranks((yield ("get", list_key))))
                missing = [r for r in range(self.world) if r not in seen]
            except Exception:  # noqa: BLE001
                missing = None
        who = f"rank(s) {', '.join(map(str, missing))}" if missing else "not every rank"
        return CoordError("missing-ranks", f"{who} did not reach '{name}' within {timeout:.0f} s", missing=missing)

    def _mismatch_ops(self) -> Ops:
        claims = yield from self.world_claims_ops()
        return CoordError("world-size-mismatch", "ranks disagree on WORLD_SIZE: " + ", ".join(
            f"rank {r} says {w}" for r, w in sorted(claims.items())), claims={str(r): w for r, w in claims.items()})

    def world_claims_ops(self) -> Ops:
        claims = {}
        try:
            for item in parse_list((yield ("get", "joined"))):
                r, _, w = item.partition(":")
                claims[int(r)] = int(w)
        except Exception:  # noqa: BLE001
            pass
        return claims

    def joined_ops(self) -> Ops:
        try:
            if not (yield ("check", ["joined"])):
                return []
            return sorted(set(parse_ranks((yield ("get", "joined")))))
        except Exception:  # noqa: BLE001
            return []

    # ------------------------------------------------------------------ failures and events
    def publish_failure_ops(self, failure: dict) -> Ops:
        """failure/R, the failed list, and (for the first failure of the job only) a `fail` event
        that wakes every watchdog at once."""
        yield ("set", f"failure/{self.rank}", json.dumps(failure, default=str))
        yield ("append", "failed", f"{self.rank},")
        if int((yield ("add", "failures", 1))) == 1:
            yield from self.event_ops(f"fail:{self.rank}")

    def event_ops(self, payload: str) -> Ops:
        k = int((yield ("add", "ev/n", 1)))
        yield ("set", f"ev/{k}", payload)
        return k

    def next_event_ops(self, until: float) -> Ops:
        """Block (one `wait`) until the next event or `until` (epoch s); None at `until`. A ping
        is answered here, whoever reads it first; the caller sees every event, pings included."""
        key = f"ev/{self._cursor}"
        if not (yield from wait_key_ops([key], until - time.time())):
            return None
        payload = _text((yield ("get", key)))
        self._cursor += 1
        if payload.startswith("ping:"):
            yield from self.answer_ops(payload)
        return payload

    def answer_ops(self, payload: str) -> Ops:
        _, pid, expected = payload.split(":", 2)
        if pid.split(".", 1)[0] == str(self.rank):
            return  # our own ping: the diagnoser counts itself alive
        with self.shared.lock:
            if pid in self.shared.answered:
                return
            self.shared.answered.add(pid)
        yield ("append", f"pong/{pid}", f"{self.rank},")
        if int((yield ("add", f"pongn/{pid}", 1))) >= int(expected):
            yield ("set", f"pongall/{pid}", "1")

    def watch_ops(self, until: float, on_event: Callable[[str], bool]) -> Ops:
        """The watchdog's loop: one blocked `wait` at a time, no polling. `on_event` returns True
        to stop. Returns at `until` (the caller then handles the deadline)."""
        while time.time() < until:
            ev = yield from self.next_event_ops(until)
            if ev is None or on_event(ev):
                return

    # ------------------------------------------------------------------ diagnosis
    def ping_ops(self, wait_s: float, joined: Sequence[int], until: Optional[float] = None) -> Ops:
        """Ask every joined rank's watchdog to answer; wait until all did, or `wait_s` passed and
        no answer arrived for 0.5 s (a busy store at thousands of ranks still gets them all in;
        a frozen rank never answers), bounded by `until`."""
        others = [r for r in joined if r != self.rank]
        alive = {self.rank}
        if not others:
            return alive
        pid = f"{self.rank}.{uuid.uuid4().hex[:8]}"
        yield from self.event_ops(f"ping:{pid}:{len(others)}")
        hard = until if until is not None else time.time() + 4 * wait_s
        t_end, last = time.time() + wait_s, -1
        while not (yield from wait_key_ops([f"pongall/{pid}"], min(t_end, hard) - time.time())):
            try:
                count = int((yield ("add", f"pongn/{pid}", 0)))
            except Exception:  # noqa: BLE001
                break
            if count == last or time.time() >= hard:
                break
            last, t_end = count, time.time() + 0.5
        try:
            if (yield ("check", [f"pong/{pid}"])):
                alive |= set(parse_ranks((yield ("get", f"pong/{pid}"))))
        except Exception:  # noqa: BLE001
            pass
        return alive

    def diagnose_full_ops(self, wait_s: float, until: Optional[float] = None) -> Ops:
        """Who is to blame: never joined, not responding (frozen or dead), or behind the others.
        About 10 requests whatever n is; the bytes read grow with n (the lists and the progress)."""
        joined = yield from self.joined_ops()
        alive = (yield from self.ping_ops(wait_s, joined, until)) if wait_s > 0 else None
        failed = set((yield from self._list_ops("failed")))
        done = set((yield from self._list_ops("finished")))
        progress = yield from self._bulk_ops([PHASE_KEY.format(r) for r in joined])
        fkeys = sorted(failed)
        failures = yield from self._bulk_ops([f"failure/{r}" for r in fkeys])
        peers: Dict[str, dict] = {}
        jset = set(joined)
        for r in range(self.world):
            p = progress.get(PHASE_KEY.format(r))
            f = failures.get(f"failure/{r}") or {}
            state = "ok"
            if r not in jset:
                state = "never-joined"
            elif alive is not None and r not in alive and r not in done and r not in failed:
                state = "not-responding"
            peers[str(r)] = {"state": state, "phase": (p or {}).get("phase"), "host": (p or {}).get("host"),
                             "ops": _ops(p), "heartbeat": None if alive is None else r in alive,
                             "failure": f.get("kind")}
        ok = {r: v for r, v in peers.items() if v["state"] == "ok" and v["phase"]}
        if ok:
            pos = {r: (PHASE_ORDER.index(v["phase"]) if v["phase"] in PHASE_ORDER else -1, v["ops"])
                   for r, v in ok.items()}
            lo, hi = min(pos.values()), max(pos.values())
            if lo != hi:
                for r, p in pos.items():
                    if p == lo:
                        peers[r]["state"] = "behind"
        culprits = sorted(int(r) for r, v in peers.items() if v["state"] != "ok")
        return {"peers": peers, "culprits": culprits, "by_rank": self.rank}

    def diagnosis_ops(self, wait_s: float, until: float, rank0_gone: bool = False) -> Ops:
        """The job's diagnosis for this rank: rank 0 makes and publishes it; the others wait for
        it (answering pings meanwhile) and copy it; one backup rank steps in if rank 0 is silent.
        `rank0_gone`: this rank already knows rank 0's process has ended (worker.rank0_exited): a
        verdict already published is still taken, but none is waited for (2 * wait_s + 3 s)."""
        if self.rank == 0:
            return (yield from self._publish_ops((yield from self.diagnose_full_ops(wait_s, until))))
        got = yield from self._await_diag_ops(time.time() if rank0_gone else min(until, time.time() + 2 * wait_s + 3.0))
        if got is not None:
            return got
        try:
            if int((yield ("add", "diag/claim", 1))) == 1:
                return (yield from self._publish_ops((yield from self.diagnose_full_ops(wait_s, until))))
        except Exception:  # noqa: BLE001
            return {}
        return (yield from self._await_diag_ops(until)) or {}

    def progress_ops(self, rank: int) -> Ops:
        """Rank `rank`'s last published progress (ddpdoctor.launch.Reporter: host, pid, phase), or None."""
        key = PHASE_KEY.format(rank)
        try:
            if not (yield ("check", [key])):
                return None
            return json.loads(_text((yield ("get", key))))
        except Exception:  # noqa: BLE001 - unreadable: nothing known
            return None

    def _publish_ops(self, diag: dict) -> Ops:
        """Publish the verdict for the other ranks: only the culprits' entries, so n ranks reading it
        move O(culprits) bytes each, not O(n). The diagnoser keeps the full view."""
        compact = {"peers": {r: v for r, v in (diag.get("peers") or {}).items() if v.get("state") != "ok"},
                   "culprits": diag.get("culprits"), "by_rank": diag.get("by_rank"), "world": self.world}
        try:
            yield ("set", "diag", json.dumps(compact, default=str))
            yield from self.event_ops("diag")
        except Exception:  # noqa: BLE001
            pass
        return diag

    def _await_diag_ops(self, until: float) -> Ops:
        try:
            while True:
                if (yield ("check", ["diag"])):
                    return json.loads(_text((yield ("get", "diag"))))
                ev = yield from self.next_event_ops(until)
                if ev is None:
                    return None
        except Exception:  # noqa: BLE001
            return None

    # ------------------------------------------------------------------ the end
    def finished_ops(self) -> Ops:
        """This rank ended cleanly (one append, one add; the last one sets finished/all)."""
        yield ("append", "finished", f"{self.rank},")
        if int((yield ("add", "finishedn", 1))) >= self.world:
            yield ("set", "finished/all", "1")

    def wait_finished_ops(self, seconds: float) -> Ops:
        return (yield from wait_key_ops(["finished/all"], seconds))

    def ack_attachments_ops(self, ranks: Iterable[int]) -> Ops:
        """Rank 0 read these ranks' attachments (`check` under a launcher): they need not print them."""
        yield ("set", "attach/ack", ",".join(str(r) for r in sorted(ranks)) + ",")

    def attachments_acked_ops(self, seconds: float) -> Ops:
        """Whether rank 0 confirmed, within `seconds`, that it read this rank's attachment. No answer
        (rank 0 dead, broken or gone with its store) is False: the rank then prints its own findings."""
        try:
            if not (yield from wait_key_ops(["attach/ack"], seconds)):
                return False
            return self.rank in parse_ranks((yield ("get", "attach/ack")))
        except Exception:  # noqa: BLE001 - the store went away with rank 0
            return False

    def collect_ops(self, joined: Optional[Iterable[int]] = None, attachments: bool = False) -> Ops:
        """Rank 0's verdict collection: summaries, failures, progress and pair results of the
        whole job in five bulk requests (six with the ranks' attachments, `attach/R`)."""
        ranks = sorted(joined) if joined is not None else (yield from self.joined_ops())
        failed = sorted(set((yield from self._list_ops("failed"))))
        summaries = yield from self._bulk_ops([f"summary/{r}" for r in ranks])
        failures = yield from self._bulk_ops([f"failure/{r}" for r in failed])
        progress = yield from self._bulk_ops([PHASE_KEY.format(r) for r in ranks])
        pairs: List[dict] = []
        try:
            if (yield ("check", ["pairs"])):
                for line in _text((yield ("get", "pairs"))).splitlines():
                    if line.strip():
                        pairs.extend(json.loads(line))
        except Exception:  # noqa: BLE001
            pass
        attach = (yield from self._bulk_ops([f"attach/{r}" for r in ranks])) if attachments else {}
        return {"attachments": {k.split("/")[-1]: v for k, v in attach.items() if v is not None},
                "summaries": {k.split("/")[-1]: v for k, v in summaries.items() if v is not None},
                "failures": {k.split("/")[-1]: v for k, v in failures.items() if v is not None},
                "progress": {k.split("/")[-1]: v for k, v in progress.items() if v is not None},
                "pairs": pairs}

    def publish_pairs_ops(self, mine: List[dict]) -> Ops:
        yield ("append", "pairs", json.dumps(mine) + "\n")

    # ------------------------------------------------------------------ bulk helpers
    def _list_ops(self, key: str) -> Ops:
        try:
            if not (yield ("check", [key])):
                return []
            return parse_ranks((yield ("get", key)))
        except Exception:  # noqa: BLE001
            return []

    def _bulk_ops(self, keys: List[str]) -> Ops:
        """multi_get in one request (keys that every listed rank wrote before listing itself);
        JSON-decoded. Falls back to nothing rather than blocking past the store's timeout."""
        if not keys:
            return {}
        try:
            vals = yield ("multi_get", keys)
        except Exception:  # noqa: BLE001
            return {}
        out: Dict[str, Optional[dict]] = {}
        for k, v in zip(keys, vals):
            try:
                out[k] = json.loads(_text(v))
            except ValueError:
                out[k] = None
        return out

    # ------------------------------------------------------------------ the blocking steps
    join = _blocking(join_ops)
    barrier = _blocking(barrier_ops)
    world_claims = _blocking(world_claims_ops)
    joined = _blocking(joined_ops)
    publish_failure = _blocking(publish_failure_ops)
    event = _blocking(event_ops)
    next_event = _blocking(next_event_ops)
    answer = _blocking(answer_ops)
    watch = _blocking(watch_ops)
    ping = _blocking(ping_ops)
    diagnose_full = _blocking(diagnose_full_ops)
    diagnosis = _blocking(diagnosis_ops)
    progress = _blocking(progress_ops)
    finished = _blocking(finished_ops)
    wait_finished = _blocking(wait_finished_ops)
    collect = _blocking(collect_ops)
    ack_attachments = _blocking(ack_attachments_ops)
    attachments_acked = _blocking(attachments_acked_ops)
    publish_pairs = _blocking(publish_pairs_ops)


def _ops(p: Optional[dict]) -> int:
    if not p or not p.get("phases"):
        return 0
    return int(p["phases"][-1].get("ops") or 0)
