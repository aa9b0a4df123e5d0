"""Worker side: what runs inside each launched rank to report its progress and its result."""
from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
import time
from typing import Any, Dict, List, Mapping, Optional

from ddpdoctor.launch.files import ENV_DIR, STOP_FILE, atomic_write_json


class Reporter:
    """Per-rank helper for workers: phase progress and the final result, atomically on disk.

    Works without a launch dir too (under a user's torchrun/srun across nodes): then the file
    writes are skipped and only the optional store mirror is used, so rank 0 can still name a peer
    stuck in a phase (`peer_phases`).
    """

    def __init__(self, directory: Optional[str], rank: int, local_rank: int = 0, world_size: int = 1):
        self.dir = directory
        self.rank, self.local_rank, self.world_size = rank, local_rank, world_size
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.phases: List[dict] = []
        self.store = None
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls, environ: Optional[Mapping[str, str]] = None) -> "Reporter":
        env = os.environ if environ is None else environ

        def num(name: str, default: int) -> int:
            try:
                return int(env.get(name, default))
            except ValueError:
                return default

        return cls(env.get(ENV_DIR) or None, num("RANK", 0), num("LOCAL_RANK", 0), num("WORLD_SIZE", 1))

    def _path(self, kind: str) -> Optional[str]:
        return os.path.join(self.dir, f"{kind}-{self.rank}.json") if self.dir else None

    def attach_store(self, store: Any) -> None:
        """Mirror progress into a c10d Store (key `ddpdoctor/phase/R`) for cross-node watchdogs."""
        self.store = store
        self._publish()

    def phase(self, name: str, **info: Any) -> None:
        """Enter phase `name` (closing the previous one). Cheap: one small atomic file write."""
        now = time.time()
        with self._lock:
            if self.phases and self.phases[-1].get("end") is None:
                self.phases[-1]["end"] = now
            self.phases.append({"name": name, "start": now, "end": None, **info})
        self._publish()

    def note(self, **info: Any) -> None:
        """Add facts to the current phase (e.g. `ops=3`, how many collectives it has started), so a
        watchdog can tell the rank that is behind from the ones waiting for it."""
        with self._lock:
            if self.phases:
                self.phases[-1].update(info)
        self._publish()

    def done(self) -> None:
        """Close the current phase without opening another."""
        with self._lock:
            if self.phases and self.phases[-1].get("end") is None:
                self.phases[-1]["end"] = time.time()
        self._publish()

    def progress(self) -> dict:
        cur = self.phases[-1] if self.phases else None
        return {"rank": self.rank, "local_rank": self.local_rank, "host": self.host, "pid": self.pid,
                "phase": cur["name"] if cur else None, "since": cur["start"] if cur else None,
                "phases": list(self.phases), "time": time.time()}

    def _publish(self) -> None:
        prog = self.progress()
        path = self._path("progress")
        if path:
            with contextlib.suppress(OSError):
                atomic_write_json(path, prog)
        if self.store is not None:
            with contextlib.suppress(Exception):
                self.store.set(f"ddpdoctor/phase/{self.rank}", json.dumps(prog, default=str))

    def result(self, data: Mapping[str, Any]) -> None:
        """Write this rank's final answer. After this the parent counts the rank as reported."""
        self.done()
        doc = {"rank": self.rank, "host": self.host, "pid": self.pid, "phases": list(self.phases), **dict(data)}
        path = self._path("result")
        if path:
            atomic_write_json(path, doc)

    def stop_run(self, reason: str) -> None:
        """Tell the parent the verdict is known (e.g. rank 0 named a stuck peer): stop waiting
        for the other ranks after the teardown grace instead of running into the deadline."""
        if self.dir:
            with contextlib.suppress(OSError):
                atomic_write_json(os.path.join(self.dir, STOP_FILE), {"rank": self.rank, "reason": reason,
                                                                        "time": time.time()})

    @staticmethod
    def exit(code: int = 0) -> None:
        """Leave now, skipping interpreter teardown (Gloo may abort/hang there: pytorch#190489)."""
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def peer_phases(store: Any, world_size: int) -> Dict[int, Optional[dict]]:
    """Each rank's last published progress from the store (None: never published). Never blocks."""
    out: Dict[int, Optional[dict]] = {}
    for r in range(world_size):
        key = f"ddpdoctor/phase/{r}"
        try:
            out[r] = json.loads(store.get(key)) if store.check([key]) else None
        except Exception:  # noqa: BLE001 - a dead store means we know nothing more
            out[r] = None
    return out
