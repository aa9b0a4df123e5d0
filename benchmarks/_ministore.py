"""A small Python client of the c10d TCPStore wire protocol, for the scale simulation only.

`MiniStore` is one blocking connection (used here for the connect handshake); `StoreLoop` drives
thousands of fake ranks' coordination steps from one thread over a few pipelined connections.

Why: on this VM (gVisor network stack) the c10d client's connect stalls for 5 or 15 s at random
(measured: 5 of 100 serial connects), so 16,384 of them would take most of an hour, while the
server answers fine. This client sends exactly what torch 2.13's client sends for each call,
observed on the wire through a relay (`get` and `multi_get` are a WAIT then the read, as in c10d),
so the real server gets the same requests; `StoreLoop` pipelines them (many per read) and shares
blocked waits, as its docstring says. Key prefixes follow `PrefixStore` ("<prefix>/<key>") under
TCPStore's own "/".
"""
from __future__ import annotations

import collections
import heapq
import os
import selectors
import socket
import struct
import time
from datetime import timedelta
from typing import Any, Callable, Deque, Dict, Generator, List, Optional, Sequence, Tuple, Union

VALIDATE, SET, GET, ADD, CHECK, WAIT, APPEND, MULTI_GET, CANCEL_WAIT, PING = 0, 1, 3, 4, 5, 6, 9, 10, 12, 13
MAGIC = 0x3C85F7CE


class StoreTimeout(Exception):
    pass


def _str(s: Union[str, bytes]) -> bytes:
    b = s.encode() if isinstance(s, str) else bytes(s)
    return struct.pack("<Q", len(b)) + b


class MiniStore:
    def __init__(self, host: str, port: int, prefix: str = "", timeout: float = 30.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout = timeout
        self.prefix = "/" + (prefix.rstrip("/") + "/" if prefix else "")
        nonce = os.getpid() & 0xFFFFFFFF
        self.sock.sendall(bytes([VALIDATE]) + struct.pack("<I", MAGIC) + bytes([PING]) + struct.pack("<I", nonce))
        if struct.unpack("<I", self._recv(4))[0] != nonce:
            raise RuntimeError("TCPStore ping: wrong answer")

    def _recv(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("store closed the connection")
            buf += chunk
        return buf

    def _k(self, key: str) -> bytes:
        return _str(self.prefix + key)

    def _keys(self, keys: Sequence[str]) -> bytes:
        return struct.pack("<Q", len(keys)) + b"".join(self._k(k) for k in keys)

    def set(self, key: str, value) -> None:
        self.sock.sendall(bytes([SET]) + self._k(key) + _str(value))

    def append(self, key: str, value) -> None:
        self.sock.sendall(bytes([APPEND]) + self._k(key) + _str(value))

    def add(self, key: str, delta: int) -> int:
        self.sock.sendall(bytes([ADD]) + self._k(key) + struct.pack("<q", delta))
        return struct.unpack("<q", self._recv(8))[0]

    def check(self, keys: List[str]) -> bool:
        self.sock.sendall(bytes([CHECK]) + self._keys(keys))
        return self._recv(1) == b"\x00"

    def wait(self, keys: List[str], timeout=None) -> None:
        secs = timeout.total_seconds() if isinstance(timeout, timedelta) else (timeout or self.timeout)
        self.sock.sendall(bytes([WAIT]) + self._keys(keys))
        self.sock.settimeout(max(0.001, secs))
        try:
            r = self._recv(1)
        except socket.timeout:
            self.sock.settimeout(self.timeout)
            self.sock.sendall(_B[CANCEL_WAIT])
            if self._recv(1) == b"\x00":  # answered just before the cancel
                self._recv(1)
            raise StoreTimeout(f"wait timeout after {secs * 1000:.0f}ms, keys: {keys}") from None
        finally:
            self.sock.settimeout(self.timeout)
        if r != b"\x00":
            raise RuntimeError("TCPStore wait: unexpected answer")

    def get(self, key: str) -> bytes:
        self.wait([key])
        self.sock.sendall(bytes([GET]) + self._k(key))
        (n,) = struct.unpack("<Q", self._recv(8))
        return self._recv(n)

    def multi_get(self, keys: List[str]) -> List[bytes]:
        self.wait(keys)
        self.sock.sendall(bytes([MULTI_GET]) + self._keys(keys))
        out = []
        for _ in keys:
            (n,) = struct.unpack("<Q", self._recv(8))
            out.append(self._recv(n))
        return out

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class Task:
    """One fake rank's thread of control: a generator of store requests (a `Coord.*_ops` step or a
    generator that `yield from`s them). `tag` is what the request counter is told (the rank)."""

    __slots__ = ("gen", "conn", "tag", "group", "urgent", "done", "result", "error")

    def __init__(self, gen: Generator, conn: "_Conn", tag: Any, group: str, urgent: bool = False):
        self.gen, self.conn, self.tag, self.group, self.urgent = gen, conn, tag, group, urgent
        self.done, self.result, self.error = False, None, None


class _Conn:
    """One real connection, non-blocking. Requests from many tasks are written back to back;
    c10d answers a connection's requests in order, so `pending` (FIFO) says whose the next answer is."""

    def __init__(self, ms: MiniStore, encoded: Dict[str, bytes], is_wait: bool = False):
        self.is_wait = is_wait  # carries one shared WAIT at a time (and its CANCEL_WAIT)
        self.encoded = encoded  # key -> its prefixed wire form, shared by the connections of one loop
        self.sock = ms.sock
        self.sock.setblocking(False)
        self.prefix = ms.prefix
        self.out = bytearray()
        self.inb = bytearray()
        self.pos = 0
        self.pending: Deque[tuple] = collections.deque()
        self.entry: Optional["_Wait"] = None  # a wait connection: the WAIT it carries
        self.cancelling = False

    def key(self, key: str) -> bytes:
        b = self.encoded.get(key)
        if b is None:
            raw = (self.prefix + key).encode()
            b = self.encoded[key] = struct.pack("<Q", len(raw)) + raw
        return b

    def keys(self, keys: Sequence[str]) -> bytes:
        if len(keys) == 1:
            return _ONE + self.key(keys[0])
        return struct.pack("<Q", len(keys)) + b"".join([self.key(k) for k in keys])


class _Wait:
    """One WAIT on the wire for a key set, shared by every task blocked on that key set."""

    __slots__ = ("keys", "waiters", "conn", "fired", "dropped")

    def __init__(self, keys: Tuple[str, ...]):
        self.keys, self.waiters, self.conn, self.fired, self.dropped = keys, set(), None, False, False


_ADD, _CHECK, _WAITCHECK, _GET, _MGET = range(5)
_B = {op: bytes([op]) for op in (SET, GET, ADD, CHECK, WAIT, APPEND, MULTI_GET, CANCEL_WAIT)}
_ONE = struct.pack("<Q", 1)


class StoreLoop:
    """Run many coordination steps concurrently from one thread against one real TCPStore.

    Each task is a generator that yields store requests (`("add", key, 1)`, `("wait", keys,
    timedelta)`, ...) exactly as `ddpdoctor.comm.coord.run_ops` would run them on a blocking
    client, and is sent the answer (or has `StoreTimeout` thrown in). What goes on the wire:

    * `set`, `append`: the request; the task goes on at once (the protocol has no answer).
    * `add`, `check`: the request; the task resumes at the answer.
    * `get`, `multi_get`: WAIT then GET / MULTI_GET, as torch's client sends them (the
      coordination code only reads keys that exist, so that WAIT answers at once).
    * `wait`: one CHECK on the task's connection (each rank's wait costs the server a lookup);
      if the keys are missing, the task parks, and all tasks parked on the same key set share
      one WAIT on a spare connection. Each parked task has its own deadline: at it the task gets
      `StoreTimeout`, and the shared WAIT is cancelled (CANCEL_WAIT) once nobody waits on it.

    A task's requests keep their order on its connection (the one `spawn` names), as a rank's do
    on its own client. Every request a task yields is counted for its tag (`requests[tag]`, a
    blocking wait once), before any of this wire-level sharing; `samples` holds (time, requests
    so far) at each turn of the loop, for the request rate.
    """

    def __init__(self, host: str, port: int, prefix: str, size: int = 16, spare: int = 16,
                 tags: int = 0):
        enc: Dict[str, bytes] = {}
        self.conns = [_Conn(MiniStore(host, port, prefix), enc) for _ in range(size)]
        self.free: List[_Conn] = [_Conn(MiniStore(host, port, prefix), enc, True) for _ in range(spare)]
        self.all = self.conns + self.free
        self.sel = selectors.DefaultSelector()
        for c in self.all:
            self.sel.register(c.sock, selectors.EVENT_READ, c)
        self.requests = [0] * tags  # per tag (fake rank): what it asked of the store
        self.samples: List[Tuple[float, int]] = []
        self.ready: Deque[tuple] = collections.deque()
        self.timers: List[tuple] = []
        self.seq = 0
        self.waits: Dict[Tuple[str, ...], _Wait] = {}
        self.queued: Deque[_Wait] = collections.deque()  # key sets waiting for a free wait connection
        self.live: Dict[str, int] = collections.Counter()
        self.tasks: List[Task] = []
        self.wire = 0  # requests written on the wire
        self.idle = 0.0  # seconds spent waiting in select (for the store's answers, or a deadline)
        self.rbuf = bytearray(1 << 20)

    # ------------------------------------------------------------------ tasks
    def spawn(self, gen: Generator, index: int, tag: Any = None, group: str = "main", urgent: bool = False) -> Task:
        """Start a task on connection `index` (modulo the pool). An urgent task is resumed before
        the others whenever it can go on (a rank with a CPU of its own, not queued behind the rest)."""
        t = Task(gen, self.conns[index % len(self.conns)], tag, group, urgent)
        self.tasks.append(t)
        self.live[group] += 1
        self._wake(t, None, None)
        return t

    def _wake(self, task: Task, value: Any, exc: Optional[BaseException]) -> None:
        if task.urgent:
            self.ready.appendleft((task, value, exc))
        else:
            self.ready.append((task, value, exc))

    def _resume(self, task: Task, value: Any, exc: Optional[BaseException]) -> None:
        gen, c, tag, requests = task.gen, task.conn, task.tag, self.requests
        while True:
            try:
                req = gen.throw(exc) if exc is not None else gen.send(value)
            except StopIteration as stop:
                task.done, task.result = True, stop.value
                self.live[task.group] -= 1
                return
            except Exception as e:  # noqa: BLE001 - the task's own failure, reported by the caller
                task.done, task.error = True, e
                self.live[task.group] -= 1
                return
            if tag is not None:
                requests[tag] += 1
            op = req[0]
            self.wire += 1
            if op == "set" or op == "append":
                val = req[2]
                val = val.encode() if isinstance(val, str) else bytes(val)
                c.out += (_B[SET] if op == "set" else _B[APPEND]) + c.key(req[1]) + struct.pack("<Q", len(val)) + val
                value = exc = None
                continue  # no answer in the protocol: the client goes on
            if op == "add":
                c.out += _B[ADD] + c.key(req[1]) + struct.pack("<q", req[2])
                c.pending.append((_ADD, task, None))
            elif op == "check":
                c.out += _B[CHECK] + c.keys(req[1])
                c.pending.append((_CHECK, task, None))
            elif op == "get":
                k = c.key(req[1])
                c.out += _B[WAIT] + _ONE + k + _B[GET] + k
                self.wire += 1
                c.pending.append((_GET, task, None))
            elif op == "multi_get":
                ks = c.keys(req[1])
                c.out += _B[WAIT] + ks + _B[MULTI_GET] + ks
                self.wire += 1
                c.pending.append((_MGET, task, [len(req[1]), 1, []]))  # keys, parsed up to, values
            elif op == "wait":
                t = req[2] if len(req) > 2 else None
                secs = t.total_seconds() if isinstance(t, timedelta) else float(t or 30.0)
                c.out += _B[CHECK] + c.keys(req[1])
                c.pending.append((_WAITCHECK, task, (tuple(req[1]), time.monotonic() + secs, secs)))
            else:
                value, exc = None, RuntimeError(f"StoreLoop: no request {op!r}")
                continue
            return

    # ------------------------------------------------------------------ waits
    def _park(self, task: Task, keys: Tuple[str, ...], deadline: float, secs: float) -> None:
        e = self.waits.get(keys)
        if e is None:
            e = self.waits[keys] = _Wait(keys)
            self._send_wait(e)
        e.waiters.add(task)
        self.seq += 1
        heapq.heappush(self.timers, (deadline, self.seq, task, e, secs))

    def _send_wait(self, e: _Wait) -> None:
        if not self.free:
            self.queued.append(e)
            return
        c = self.free.pop()
        c.entry, e.conn = e, c
        c.out += _B[WAIT] + c.keys(e.keys)
        self.wire += 1

    def _fire(self, e: _Wait) -> None:
        e.fired = True
        if self.waits.get(e.keys) is e:
            del self.waits[e.keys]
        for t in e.waiters:
            self._wake(t, None, None)
        e.waiters = set()

    def _release(self, c: _Conn) -> None:
        c.entry, c.cancelling = None, False
        while self.queued:
            e = self.queued.popleft()
            if not e.dropped:
                c.entry, e.conn = e, c
                c.out += _B[WAIT] + c.keys(e.keys)
                self.wire += 1
                return
        self.free.append(c)

    def _expire(self, now: float) -> None:
        while self.timers and self.timers[0][0] <= now:
            _, _, task, e, secs = heapq.heappop(self.timers)
            if task not in e.waiters:
                continue  # answered in time
            e.waiters.discard(task)
            self._wake(task, None, StoreTimeout(f"wait timeout after {secs * 1000:.0f}ms, keys: {list(e.keys)}"))
            if not e.waiters and not e.fired:
                e.dropped = True
                if self.waits.get(e.keys) is e:
                    del self.waits[e.keys]
                if e.conn is not None and not e.conn.cancelling:
                    e.conn.out += _B[CANCEL_WAIT]
                    e.conn.cancelling = True
                    self.wire += 1

    # ------------------------------------------------------------------ answers
    def _answers(self, c: _Conn) -> None:
        buf, pos, end, pend, wake = c.inb, c.pos, len(c.inb), c.pending, self._wake
        if c.is_wait:
            while pos < end:  # a wait connection: 0 = STOP_WAITING, 1 = WAIT_CANCELED
                b = buf[pos]
                pos += 1
                if b == 0 and c.entry is not None:
                    self._fire(c.entry)
                    if not c.cancelling:
                        self._release(c)
                elif b == 1:
                    self._release(c)
            c.inb, c.pos = bytearray(), 0
            return
        while pend:
            kind, task, extra = pend[0]
            if kind == _ADD:
                if end - pos < 8:
                    break
                wake(task, struct.unpack_from("<q", buf, pos)[0], None)
                pos += 8
            elif kind == _CHECK or kind == _WAITCHECK:
                if end - pos < 1:
                    break
                ok = buf[pos] == 0
                pos += 1
                if kind == _CHECK or ok:
                    wake(task, ok, None)
                else:
                    self._park(task, *extra)
            elif kind == _GET:
                if end - pos < 9:
                    break
                (n,) = struct.unpack_from("<Q", buf, pos + 1)
                if end - pos < 9 + n:
                    break
                wake(task, bytes(buf[pos + 9:pos + 9 + n]), None)
                pos += 9 + n
            else:  # _MGET: a large answer may come in many reads; parse on from where it stopped
                want, p, vals = extra
                p += pos
                while len(vals) < want:
                    if end - p < 8:
                        break
                    (n,) = struct.unpack_from("<Q", buf, p)
                    if end - p < 8 + n:
                        break
                    vals.append(bytes(buf[p + 8:p + 8 + n]))
                    p += 8 + n
                extra[1] = p - pos
                if len(vals) < want or end - pos < 1:
                    break
                wake(task, vals, None)
                pos = p
            pend.popleft()
        if pos == end:
            c.inb, c.pos = bytearray(), 0
        else:
            c.pos = pos
            if pos > (1 << 20):
                del c.inb[:pos]
                c.pos = 0

    # ------------------------------------------------------------------ the loop
    def run(self, done: Callable[[], bool], limit_s: float, slice_: int = 512) -> bool:
        """Run until done() (True) or limit_s seconds pass (False). At most `slice_` tasks run
        between two looks at the sockets, so an answer is picked up (and an urgent task goes on)
        without waiting for thousands of other tasks to take their turn first."""
        t_limit = time.monotonic() + limit_s
        ready = self.ready
        writing: set = set()
        while not done():
            self.samples.append((time.monotonic(), sum(self.requests)))
            for _ in range(min(slice_, len(ready))):
                task, value, exc = ready.popleft()
                self._resume(task, value, exc)
            for c in self.all:
                if c.out:
                    try:
                        sent = c.sock.send(c.out)
                    except BlockingIOError:
                        sent = 0
                    del c.out[:sent]
                    if c.out and c not in writing:
                        writing.add(c)
                        self.sel.modify(c.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, c)
            now = time.monotonic()
            if now >= t_limit:
                return False
            timeout = 0.0 if ready else min(0.05, max(0.0, (self.timers[0][0] if self.timers else now + 1) - now))
            t_sel = time.monotonic()
            events = self.sel.select(timeout)
            self.idle += time.monotonic() - t_sel
            for key, mask in events:
                c = key.data
                if mask & selectors.EVENT_READ:
                    while True:
                        try:
                            got = c.sock.recv_into(self.rbuf)
                        except BlockingIOError:
                            break
                        if got == 0:
                            raise ConnectionError("store closed the connection")
                        c.inb += self.rbuf[:got]
                        if got < len(self.rbuf):
                            break
                    self._answers(c)
                if mask & selectors.EVENT_WRITE and c in writing and not c.out:
                    writing.discard(c)
                    self.sel.modify(c.sock, selectors.EVENT_READ, c)
            self._expire(time.monotonic())
        return True

    def close(self) -> None:
        for c in self.all:
            try:
                c.sock.close()
            except OSError:
                pass
