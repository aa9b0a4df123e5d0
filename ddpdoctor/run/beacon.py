"""The beacon: one small shared-memory file per process of the job, rewritten in place.

The attach side keeps its state in a 4 KiB mmap. The hot part (phase, times, step, collective
count, batches) is a fixed binary record written with one `struct.pack_into` at every event (a
memcpy, no system call, no thread, ~1 µs), except on unsampled steps that are not due (recorder:
their batches store the phase byte alone, their optimizer step its batches, end and count; the due
steps, at most ~SPLIT_MAX_PERIOD_S (0.15 s) apart while steps go on, publish the rest); the cold part (the current collective's op, shape, dtype
and line, the DataLoader's length, the rank) is a small JSON object rewritten only when it changes.
The parent reads the files of its own node only (O(local processes)); nothing goes through a shared
store per step. A sequence counter (odd while writing) lets the reader retry a torn read instead of
locking.

A third part, from offset 4096, is a ring of the last RING step records (see `Writer.step`): the
step number, when it ended, and how long the rank spent in each part of the split (data wait,
compute outside collectives, collective wait, optimizer, other) and on the CPU. A record may stand
for a run of `count` unsampled steps (recorder._on_optimizer_step writes none of them one by one):
their mean wall time, in "other", ending at `step`; `expand` turns it back into one record per step.
The parent reads every entry it has not seen at each poll: one record per step when every step is
sampled (steps of 50 ms or more), about three per k steps otherwise, so a ring of 64 outlasts a
poll (POLL_S) at any step time. After it, a
ring of the last CRING collectives (group, sequence number in the group, op, call site, bytes, and
whether it completed): at a stall, where the ranks' sequences part.

Files in the run directory, per process id:
  info.PID.json       static facts, written once (role, argv[0], library paths)
  beacon.PID          the live state (this module)
  stack.PID.txt       faulthandler's dump when the parent asks for one (signal)
  fatal.PID.txt       faulthandler's dump on a fatal signal (SIGSEGV, SIGABRT, ...)
  exc.PID.json        the uncaught exception that ended the process
  preflight.PID.json  the preflight findings of that rank
"""
from __future__ import annotations

import json
import mmap
import os
import struct
from typing import Optional

SIZE = 8192
COLD_END = 4096  # the cold JSON ends here; the step ring follows
PARTS = ("data", "compute", "collective", "optimizer", "other")
# "between": the phase byte alone, stored by the optimizer step's hook (recorder._on_optimizer_step) and overwritten by
# the next batch's "data" or any full write: the rank's last optimizer step has ended and it has fetched no batch and
# written nothing since (the callbacks, the scheduler, zero_grad, logging, a checkpoint between steps). `read` gives
# it as phase "run" with between=True: every reader of "run" reads it as before.
PHASES = ("start", "init", "run", "coll", "data", "exit", "exception", "worker", "between")
CODE = {p: i for i, p in enumerate(PHASES)}
# seq | phase, in_coll, dl_end | t, pt, dl_n | st, step | sdm, colls, ev | cold length. The first group
# is what a change of phase writes (a batch fetched, a collective left): `Writer.phase`, 6 fields. dl_n,
# st and step are adjacent: an unsampled step's end stores those three alone (END, below).
_SEQ = struct.Struct("<Q")
_PHASE = struct.Struct("<BBBxxxxxddQ")
_HOT = struct.Struct("<BBBxxxxxddQdQdQQI")
_HOT_AT = _SEQ.size
# The sequence counter and the hot fields are adjacent: the odd counter and the fields go in with one
# pack_into (each call parses its arguments and takes the mmap's buffer: ~0.3 us), the even one after.
_SEQ_PHASE = struct.Struct("<Q" + _PHASE.format[1:])
_SEQ_HOT = struct.Struct("<Q" + _HOT.format[1:])
COLD_AT = _HOT_AT + _HOT.size
# ring: count of records written | RING entries of (step, batches, end time, five parts in ms, thread CPU ms,
# steps the record stands for: 1, or a run of unsampled steps ending at `step`)
_RING_N = struct.Struct("<Q")
_ENTRY = struct.Struct("<IIdffffffI")
RING_AT = COLD_END + _RING_N.size
RING = 64
# the last collectives: count | CRING entries of (sequence number in its group, issue time, group index,
# op index, state (1 in it, 2 completed, 3 issued async), call-site index, bytes)
COLL_N_AT = RING_AT + RING * _ENTRY.size
_CENTRY = struct.Struct("<QdHBBIQ")
CRING_AT = COLL_N_AT + _RING_N.size
CRING = (SIZE - CRING_AT) // _CENTRY.size
# The phase byte, alone: an unsampled step's DataLoader marks "data" and "run" with one byte store
# each (recorder's fast path), no clock and no sequence bracket: a reader may see the new phase with
# the times of the last full write (at most ~SPLIT_MAX_PERIOD_S, 0.15 s, old while steps go on).
PHASE_AT = _HOT_AT
# The step count, alone (an aligned 8-byte field), with no bracket either.
STEP_AT = _SEQ.size + struct.calcsize("<BBBxxxxxddQd")
STEP = struct.Struct("<Q")
# The DataLoader's hot fields, alone: an unsampled step's new epoch and epoch end store them (the end
# flag a byte, the batch count an aligned 8-byte field), so that a stall report sees who ran out.
DL_END_AT = PHASE_AT + 2
DL_N_AT = _SEQ.size + struct.calcsize("<BBBxxxxxdd")
# An unsampled step's end, alone: the adjacent fields dl_n, st, step with one pack_into (recorder's fast
# path), no bracket: the step's end (st), the batch count as of it and the step count are exact to that
# step, not up to ~SPLIT_MAX_PERIOD_S old. The last progress time (t) is not stored there: a step's end is
# progress, so a reader takes the later of t and st (`read`), and a rank's "since" counts from the later of
# its phase start and its last step's end (section.py). Round 8 (953323a) stored t, pt, dl_n, st, sdm, step
# (pt and sdm written back as they stood): six values to convert per step, ~980 instructions more than the
# step count alone (benchmarks/bench_run_instr.py); these three cost about half that.
END_AT = DL_N_AT
END = struct.Struct("<QdQ")
assert END_AT + END.size == STEP_AT + STEP.size


class Writer:
    def __init__(self, path: str):
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.ftruncate(fd, SIZE)
            self.mm = mmap.mmap(fd, SIZE)
        finally:
            os.close(fd)
        self.seq = 0
        self.cold_len = 0
        self.steps = 0
        self.colls = 0
        self.path = path

    def hot(self, phase: str, in_coll: bool, dl_end: bool, t: float, pt: float, st: float, sdm: float,
            step: int, colls: int, dl_n: int, ev: int, rec: Optional[tuple] = None, _seq=_SEQ.pack_into,
            _hot=_SEQ_HOT.pack_into, _entry=_ENTRY.pack_into, _n=_RING_N.pack_into, _code=CODE.get) -> None:
        """Every hot field: two pack_into on the mmap (the odd counter with the fields, then the even
        counter), nothing allocated but the call's own numbers; the packers are bound once, as default
        arguments. `rec`, a step's record (as `step` takes it, in seconds), goes into the ring under
        the same counter: the optimizer step writes both with one bracket."""
        mm, seq = self.mm, self.seq | 1
        _hot(mm, 0, seq, _code(phase, 2), in_coll, dl_end, t, pt, dl_n, st, step, sdm, colls, ev, self.cold_len)
        if rec is not None:
            i = self.steps
            _entry(mm, RING_AT + (i % RING) * _ENTRY.size, rec[0] & 0xFFFFFFFF, rec[1] & 0xFFFFFFFF, rec[2],
                   rec[3] * 1e3, rec[4] * 1e3, rec[5] * 1e3, rec[6] * 1e3, rec[7] * 1e3, rec[8] * 1e3,
                   rec[9] if len(rec) > 9 else 1)
            self.steps = i + 1
            _n(mm, COLD_END, i + 1)
        self.seq = seq + 1
        _seq(mm, 0, seq + 1)

    def phase(self, phase: str, in_coll: bool, dl_end: bool, t: float, pt: float, dl_n: int,
              _seq=_SEQ.pack_into, _ph=_SEQ_PHASE.pack_into, _code=CODE.get) -> None:
        """A change of phase (a batch asked for or fetched, a collective left): the first group of
        hot fields only, half the arguments of `hot` to convert (the DataLoader makes two per batch)."""
        mm, seq = self.mm, self.seq | 1
        _ph(mm, 0, seq, _code(phase, 2), in_coll, dl_end, t, pt, dl_n)
        self.seq = seq + 1
        _seq(mm, 0, seq + 1)

    def cold(self, state: dict) -> None:
        data = json.dumps(state, separators=(",", ":"), default=str).encode()
        for drop in (("sites",), ("sites", "groups", "fw"), None):
            if len(data) <= COLD_END - COLD_AT:
                break
            smaller = {k: v for k, v in state.items() if k not in drop} if drop else \
                {k: state.get(k) for k in ("pid", "rank", "world", "kind")}
            data = json.dumps(smaller, separators=(",", ":"), default=str).encode()
        seq = self.seq | 1
        _SEQ.pack_into(self.mm, 0, seq)
        self.mm[COLD_AT:COLD_AT + len(data)] = data
        self.cold_len = len(data)
        struct.pack_into("<I", self.mm, _HOT_AT + _HOT.size - 4, self.cold_len)
        self.seq = seq + 1
        _SEQ.pack_into(self.mm, 0, seq + 1)

    def step(self, step: int, batches: int, t_end: float, data: float, compute: float, coll: float, optim: float, other: float,
             cpu: float, count: int = 1, _entry=_ENTRY.pack_into, _n=_RING_N.pack_into, _seq=_SEQ.pack_into) -> None:
        """One step's split (seconds in, milliseconds stored) into the ring, under the same sequence
        counter as the hot part; the caller publishes the hot part right after. `count` > 1: a run
        of that many unsampled steps ending at `step`, `other` their mean wall time."""
        mm, seq, i = self.mm, self.seq | 1, self.steps
        _seq(mm, 0, seq)
        _entry(mm, RING_AT + (i % RING) * _ENTRY.size, step & 0xFFFFFFFF, batches & 0xFFFFFFFF, t_end, data * 1e3, compute * 1e3, coll * 1e3,
               optim * 1e3, other * 1e3, cpu * 1e3, count)
        self.steps = i + 1
        _n(mm, COLD_END, i + 1)
        self.seq = seq + 1
        _seq(mm, 0, seq + 1)

    def coll_issue(self, gseq: int, t: float, gid: int, op: int, site: int, nbytes: int,
                   _entry=_CENTRY.pack_into, _n=_RING_N.pack_into, _seq=_SEQ.pack_into) -> int:
        """A collective issued: its entry in the collective ring (state 1). Returns its slot."""
        mm, seq, i = self.mm, self.seq | 1, self.colls
        _seq(mm, 0, seq)
        slot = CRING_AT + (i % CRING) * _CENTRY.size
        _entry(mm, slot, gseq, t, gid & 0xFFFF, op & 0xFF, 1, site & 0xFFFFFFFF, nbytes)
        self.colls = i + 1
        _n(mm, COLL_N_AT, i + 1)
        self.seq = seq + 1
        _seq(mm, 0, seq + 1)
        return slot

    def coll_done(self, slot: int, state: int = 2) -> None:
        """The collective of `slot` returned: completed (2), or issued asynchronously (3)."""
        self.mm[slot + 19] = state

    def close(self) -> None:
        try:
            self.mm.close()
        except Exception:  # noqa: BLE001
            pass


def read(src, tries: int = 20, ring_from: int = 0, settled: bool = False) -> Optional[dict]:
    """The last complete state written to `src` (a path, or an fd the reader keeps open: one
    pread per read, no open), hot fields and cold JSON merged; None if there is none yet.
    `ring_from`: the ring's entries before that step count were read already (a poller's), only
    the newer ones are unpacked. `settled`: the process has ended, nothing writes any more: a counter
    left odd (the process killed, or a signal's exception raised, between a write's two stores) is
    its last state, read as it is, not retried into None (which lost the rank of every such process)."""
    if isinstance(src, int):
        return _read_fd(src, tries, ring_from, settled)
    try:
        fd = os.open(src, os.O_RDONLY)
    except OSError:
        return None
    try:
        return _read_fd(fd, tries, ring_from, settled)
    finally:
        os.close(fd)


def _ring(raw: bytes, since: int = 0) -> dict:
    """{'n': records written, 'steps': [(step, batches, t_end, data, compute, coll, optim, other, cpu ms,
    count)...]}, oldest first (at most RING, and none of the first `since`); `expand` makes them steps."""
    (n,) = _RING_N.unpack_from(raw, COLD_END)
    unpack, size = _ENTRY.unpack_from, _ENTRY.size
    return {"n": n, "steps": [unpack(raw, RING_AT + (i % RING) * size) for i in range(max(0, n - RING, since), n)]}


def expand(records) -> list:
    """One 9-field record per step (facts.steps' form) from the ring's records: a record of a run of
    `count` unsampled steps becomes `count` records, each with the run's mean wall time (so a step's
    own time within such a run is not known: the step time's p95 is of these means there), end times
    spaced by it, and the run's batches spread evenly. Sampled steps and a due step are their own."""
    nan = float("nan")
    out = []
    for e in records:
        c = e[9] if len(e) > 9 else 1
        if c <= 1:
            out.append(tuple(e[:9]))
            continue
        step, nb, t_end, per = e[0], e[1], e[2], e[7]
        base, extra = divmod(nb, c)
        for i in range(c):
            back = c - 1 - i
            out.append((step - back, base + (1 if i >= c - extra else 0), t_end - back * per / 1e3,
                        nan, nan, nan, nan, per, nan))
    return out


def _cring(raw: bytes) -> list:
    """The last collectives, oldest first: (gseq, t, gid, op, state, site, bytes)."""
    (n,) = _RING_N.unpack_from(raw, COLL_N_AT)
    return [_CENTRY.unpack_from(raw, CRING_AT + (i % CRING) * _CENTRY.size) for i in range(max(0, n - CRING), n)]


def _read_fd(fd: int, tries: int, ring_from: int = 0, settled: bool = False) -> Optional[dict]:
    try:
        for i in range(tries):
            raw = os.pread(fd, SIZE, 0)
            if len(raw) < COLD_AT:
                return None
            (seq,) = _SEQ.unpack_from(raw, 0)
            if seq == 0:
                return None
            last = settled and i == tries - 1
            if seq % 2 and not last:
                continue
            (phase, in_coll, dl_end, t, pt, dl_n, st, step, sdm, colls, ev, n) = _HOT.unpack_from(raw, _HOT_AT)
            if n > COLD_END - COLD_AT or (_SEQ.unpack(os.pread(fd, 8, 0))[0] != seq and not last):
                if last and n > COLD_END - COLD_AT:
                    n = 0
                else:
                    continue
            try:
                out = json.loads(raw[COLD_AT:COLD_AT + n]) if n else {}
            except ValueError:
                if not last:
                    continue
                out = {}
            if not isinstance(out, dict):
                out = {}   # a torn or garbled cold part (only our recorder writes it): no fields rather than a crash
            for key in ("coll", "dl", "dlt"):
                if key in out and not isinstance(out[key], dict):
                    del out[key]   # each of these is an object in every beacon the recorder writes (recorder._cold)
            coll = out.get("coll")
            if isinstance(coll, dict):
                coll.update(seq=colls, **{"in": bool(in_coll)})
                if in_coll:
                    coll["t"] = pt
            dl = out.get("dl")
            if isinstance(dl, dict):
                dl["n"], dl["end"] = dl_n, bool(dl_end)
            # t: the last progress; an unsampled step's end (END) stores st alone, which is progress too
            ph = PHASES[phase] if phase < len(PHASES) else "run"
            if ph == "between":
                ph, out["between"] = "run", True
            out.update(phase=ph, t=max(t, st), pt=pt, st=st or None,
                       sd=[sdm] if sdm else [], step=step, seq=colls, ev=ev)
            if len(raw) >= SIZE:
                out["ring"] = _ring(raw, ring_from)
                out["cring"] = _cring(raw)
            return out
    except (OSError, struct.error):
        return None
    return None
