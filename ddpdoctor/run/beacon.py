"""The beacon: one small shared-memory file per process of the job, rewritten in place.

The attach side writes its whole state (a small JSON object) into a 4 KiB mmap at every event
(a collective entered or left, an optimizer step, a batch requested): a memcpy, no system call,
no thread. The parent reads the files of its own node only (O(local processes)); nothing goes
through a shared store per step. A sequence counter (odd while writing) lets the reader retry a
torn read instead of locking.

Files in the run directory, per process id:
  info.PID.json     static facts, written once (role, argv[0], library paths)
  beacon.PID        the live state (this module)
  stack.PID.txt     faulthandler's dump when the parent asks for one (signal)
  fatal.PID.txt     faulthandler's dump on a fatal signal (SIGSEGV, SIGABRT, ...)
  exc.PID.json      the uncaught exception that ended the process
  preflight.PID.json  the preflight findings of that rank
"""
from __future__ import annotations

import json
import mmap
import os
import struct
from typing import Optional

SIZE = 4096
_HEAD = struct.Struct("<QI")


class Writer:
    def __init__(self, path: str):
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.ftruncate(fd, SIZE)
            self.mm = mmap.mmap(fd, SIZE)
        finally:
            os.close(fd)
        self.seq = 0
        self.path = path

    def write(self, state: dict) -> None:
        data = json.dumps(state, separators=(",", ":"), default=str).encode()
        if len(data) > SIZE - _HEAD.size:
            data = json.dumps({k: state.get(k) for k in ("pid", "rank", "phase", "t", "step")}).encode()
        mm = self.mm
        self.seq += 1
        _HEAD.pack_into(mm, 0, self.seq, len(data))
        mm[_HEAD.size:_HEAD.size + len(data)] = data
        self.seq += 1
        struct.pack_into("<Q", mm, 0, self.seq)

    def close(self) -> None:
        try:
            self.mm.close()
        except Exception:  # noqa: BLE001
            pass


def read(path: str, tries: int = 20) -> Optional[dict]:
    """The last complete state written to `path`, or None."""
    try:
        with open(path, "rb") as fh:
            for _ in range(tries):
                raw = fh.read(SIZE)
                fh.seek(0)
                if len(raw) < _HEAD.size:
                    return None
                seq, n = _HEAD.unpack_from(raw, 0)
                if seq == 0:
                    return None
                if seq % 2 or n > SIZE - _HEAD.size:
                    continue
                data = raw[_HEAD.size:_HEAD.size + n]
                again = fh.read(8)
                fh.seek(0)
                if struct.unpack("<Q", again)[0] != seq:
                    continue
                try:
                    return json.loads(data)
                except ValueError:
                    continue
    except OSError:
        return None
    return None
