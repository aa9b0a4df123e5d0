"""A small Python client of the c10d TCPStore wire protocol, for the scale simulation only.

Why: on this VM (gVisor network stack) the c10d client's connect stalls for 5 or 15 s at random
(measured: 5 of 100 serial connects), so 16,384 of them would take most of an hour, while the
server answers fine. This client sends exactly what torch 2.13's client sends for each call,
observed on the wire through a relay (`get` and `multi_get` are a WAIT then the read, as in c10d),
so the real server sees the same load. Key prefixes follow `PrefixStore` ("<prefix>/<key>") under
TCPStore's own "/".
"""
from __future__ import annotations

import os
import socket
import struct
from datetime import timedelta
from typing import List, Sequence, Union

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
            self.sock.sendall(bytes([CANCEL_WAIT]))
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


class PooledStore:
    """Store-like views for many fake ranks over a few real connections to one TCPStore server.

    This VM's network stack accepts about 11 new TCP connections a second (measured with the
    c10d client and with this one alike), so 8,192 ranks cannot each hold their own. Rank r's
    requests go over connection r % size (one rank's requests stay in order, as on its own
    connection); blocking waits are coalesced per key set: the first waiter sends the WAIT on a
    spare connection, the others wait for the same answer. Counting happens above this layer
    (per fake rank, as each real rank would send), so the figures are what the coordination code
    asks of the store; only the wire carries fewer waits.
    """

    def __init__(self, host: str, port: int, prefix: str, size: int = 16):
        import queue
        import threading

        self.conns = [MiniStore(host, port, prefix) for _ in range(size)]
        self.locks = [threading.Lock() for _ in range(size)]
        self.spare: "queue.Queue[MiniStore]" = queue.Queue()
        for _ in range(size):
            self.spare.put(MiniStore(host, port, prefix))
        self.lock = threading.Lock()
        self.waits: dict = {}
        self.threading = threading

    def view(self, rank: int) -> "_View":
        return _View(self, rank % len(self.conns))

    def _wait(self, view: "_View", keys, timeout=None) -> None:
        secs = timeout.total_seconds() if isinstance(timeout, timedelta) else (timeout or 30.0)
        if view.check(list(keys)):
            return
        k = tuple(sorted(keys))
        with self.lock:
            entry = self.waits.get(k)
            if entry is None:
                entry = {"event": self.threading.Event(), "error": None}
                self.waits[k] = entry
                self.threading.Thread(target=self._waiter, args=(k, entry), daemon=True).start()
        if not entry["event"].wait(secs):
            raise StoreTimeout(f"wait timeout after {secs * 1000:.0f}ms, keys: {list(keys)}")
        if entry["error"]:
            raise entry["error"]

    def _waiter(self, k, entry) -> None:
        c = self.spare.get()
        try:
            c.wait(list(k), 120.0)
        except Exception as exc:  # noqa: BLE001
            entry["error"] = exc
        finally:
            self.spare.put(c)
            with self.lock:
                self.waits.pop(k, None)
            entry["event"].set()

    def close(self) -> None:
        for c in self.conns:
            c.close()
        while not self.spare.empty():
            self.spare.get().close()


class _View:
    def __init__(self, pool: PooledStore, idx: int):
        self.pool, self.conn, self.lock = pool, pool.conns[idx], pool.locks[idx]

    def _call(self, name: str, *a):
        with self.lock:
            return getattr(self.conn, name)(*a)

    def set(self, key, value):
        return self._call("set", key, value)

    def append(self, key, value):
        return self._call("append", key, value)

    def add(self, key, delta):
        return self._call("add", key, delta)

    def check(self, keys):
        return self._call("check", keys)

    def get(self, key):
        return self._call("get", key)  # the coordination code reads only keys that exist

    def multi_get(self, keys):
        return self._call("multi_get", keys)

    def wait(self, keys, timeout=None):
        return self.pool._wait(self, keys, timeout)
