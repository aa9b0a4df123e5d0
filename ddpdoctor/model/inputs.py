"""Reading what the user names as input (a log, a snapshot, a config, standard input) without ever waiting forever.

A regular file is read as it is. Anything else that can be read (a FIFO, `<(zcat job.log.gz)`, a pipe on standard
input, a terminal, a character device) is read through `Bounded`: the path is opened without blocking (opening a
FIFO that has no writer yet waits forever otherwise), and every read first waits at most `idle_seconds()` for a byte.
A stream that stays silent that long raises `InputStalled`, an OSError (a TimeoutError), so every reader's existing
`except OSError` turns it into its one-line "cannot read" input error (exit 2) instead of a hang.

The bound is `DDPDOCTOR_INPUT_IDLE_S` seconds of silence (default 15): a producer that writes anything at all within
that time (zcat, ssh host cat, kubectl logs) is read to its end however long it takes in total.
This module sits in the bottom layer (model) so that every reader, from the triage reader to the snapshot loader,
uses the same definition.
"""
from __future__ import annotations

import io
import os
import stat
import sys
from typing import BinaryIO

IDLE_ENV = "DDPDOCTOR_INPUT_IDLE_S"
DEFAULT_IDLE_S = 15.0


class InputError(ValueError):
    """An input the user named cannot be used (unreadable, not parseable): the CLI prints it as one line, exit 2."""


class InputStalled(TimeoutError):
    """A pipe, FIFO or terminal gave no byte for the idle bound."""


def idle_seconds() -> float:
    """The idle bound: DDPDOCTOR_INPUT_IDLE_S when it is a positive number, else DEFAULT_IDLE_S."""
    try:
        value = float(os.environ.get(IDLE_ENV, ""))
    except ValueError:
        return DEFAULT_IDLE_S
    return value if 0 < value < 1e7 else DEFAULT_IDLE_S


def is_stream(mode: int) -> bool:
    """A file type that is read as a stream: neither a regular file nor a folder (FIFO, device, socket)."""
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


class Bounded(io.RawIOBase):
    """A raw stream over `fd` whose every read waits at most `idle` seconds for data (InputStalled after)."""

    def __init__(self, fd: int, name: str, idle: float, owns_fd: bool = True):
        super().__init__()
        self._fd, self.name, self._idle, self._owns = fd, name, idle, owns_fd

    def readable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def readinto(self, b) -> int:
        import select

        poller = select.poll()
        poller.register(self._fd, select.POLLIN | select.POLLPRI | select.POLLHUP | select.POLLERR)
        while True:
            try:
                ready = poller.poll(self._idle * 1000)
                break
            except InterruptedError:  # pragma: no cover - PEP 475 retries; kept for old interpreters
                continue
        if not ready:
            import errno

            raise InputStalled(errno.ETIMEDOUT,
                               f"no data from {self.name} for {self._idle:g} s (a pipe, FIFO or terminal whose writer "
                               f"never wrote or never closed it; {IDLE_ENV}=SECONDS waits longer)")
        return os.readv(self._fd, [b])

    def close(self) -> None:
        if not self.closed and self._owns:
            try:
                os.close(self._fd)
            except OSError:
                pass
        super().close()


def open_input(path: str) -> BinaryIO:
    """`path` opened for binary reading: a regular file as open(path, "rb", buffering=0) does, anything else as a
    buffered Bounded stream (opened without blocking, then blocking reads each guarded by the idle bound; read(n)
    returns n bytes unless the stream ends). Raises OSError."""
    st = os.stat(path)
    if not is_stream(st.st_mode):
        return open(path, "rb", buffering=0)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        os.set_blocking(fd, True)
    except OSError:
        os.close(fd)
        raise
    return io.BufferedReader(Bounded(fd, path, idle_seconds()))


def open_regular(path: str, mode: str = "rb", **kwargs):
    """`path` opened for reading as open(path, mode, **kwargs) does, when it is a regular file; anything else is an
    OSError, without ever blocking. For the files the doctor finds by itself (a library in torch/lib or on
    LD_LIBRARY_PATH, a project's configs, site-packages' .pth files), never named by the user: a FIFO there has no
    writer and open() would wait for one forever (fifo(7)); /dev/zero or a folder has no end or no text. Opened with
    O_NONBLOCK (a FIFO's open returns at once), its type read from the open descriptor (fstat: no race with a rename),
    then blocking again. Raises OSError: EINVAL "not a regular file", IsADirectoryError for a folder."""
    import errno

    if "r" not in mode or "+" in mode:
        raise ValueError("open_regular reads only")
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st_mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", path)
        if not stat.S_ISREG(st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        os.set_blocking(fd, True)
        return os.fdopen(fd, mode, **kwargs)
    except BaseException:
        os.close(fd)
        raise


def stdin_input() -> BinaryIO:
    """Standard input for binary reading: as is when it is a regular file, else Bounded. Raises OSError when it is
    closed."""
    import errno

    stream = sys.stdin
    if stream is None:
        raise OSError(errno.EBADF, "standard input is closed")
    try:
        fd = stream.fileno()
    except (OSError, ValueError, AttributeError):   # in memory (a test's, an embedding program's): it cannot block
        return getattr(stream, "buffer", stream)
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        raise OSError(errno.EBADF, "standard input is closed") from None
    if not is_stream(mode):
        return stream.buffer
    return io.BufferedReader(Bounded(fd, "standard input", idle_seconds(), owns_fd=False))


def read_limited(stream: BinaryIO, limit: int) -> bytes:
    """Up to `limit` bytes of `stream`, reading until its end (a raw stream returns what one read gave)."""
    parts, total = [], 0
    while total < limit:
        data = stream.read(limit - total)
        if not data:
            break
        parts.append(data)
        total += len(data)
    return b"".join(parts)


def open_output(path: str):
    """`path` opened for writing text (UTF-8). A FIFO (`-o >(gzip > s.json.gz)`) is opened without blocking, retried
    until a reader opens it, for at most the idle bound: a FIFO nobody reads is an OSError (InputStalled), never a
    wait for ever in open(). Anything else as open(path, "w") does."""
    import errno
    import time

    try:
        fifo = stat.S_ISFIFO(os.stat(path).st_mode)
    except OSError:
        fifo = False
    if not fifo:
        return open(path, "w", encoding="utf-8")
    idle = idle_seconds()
    give_up = time.monotonic() + idle
    while True:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
            break
        except OSError as exc:
            if exc.errno != errno.ENXIO:   # ENXIO: no reader has the FIFO open yet
                raise
            if time.monotonic() >= give_up:
                raise InputStalled(errno.ETIMEDOUT, f"no reader opened {path} for {idle:g} s (a FIFO nobody reads; "
                                   f"{IDLE_ENV}=SECONDS waits longer)") from None
            time.sleep(0.05)
    os.set_blocking(fd, True)
    return os.fdopen(fd, "w", encoding="utf-8")
