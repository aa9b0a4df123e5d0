"""The job's stderr, copied through to `ddpdoctor run`'s own stderr and kept (its first and last bytes) for
the verdict: what C++ (Gloo, the TCPStore, NCCL) and the launcher printed, which no Python exception record holds.

The job sees what it would see without the doctor: when the doctor's stderr is a terminal, the job's stderr is
a pseudo-terminal (isatty() stays true: progress bars and colours unchanged; output post-processing off, so the
bytes pass as written; the window size copied); otherwise a pipe (isatty() false, as a file or pipe would be).
Whatever the mode, every byte is written on to the doctor's stderr (fd 2) as it arrives.
"""
from __future__ import annotations

import os
import threading
from typing import Optional

HEAD_BYTES = 64 * 1024  # the first bytes kept (a launcher's set-up errors come first)
TAIL_BYTES = 512 * 1024  # the last bytes kept (the failure comes last)


class StderrTee:
    def __init__(self, out_fd: int = 2):
        self.out_fd = out_fd
        self.mode = "none"
        self._read_fd: Optional[int] = None
        self._child_fd: Optional[int] = None
        self._head = bytearray()
        self._tail = bytearray()
        self._dropped = 0
        self._lock = threading.Lock()
        self._thread: Optional[threading.Thread] = None

    def child_stderr(self) -> Optional[int]:
        """Opens the pair and returns the fd the job's stderr is to be (Popen(stderr=...)); None: not captured
        (the doctor's stderr closed, or no pty where one is needed): the job then inherits fd 2 as before."""
        try:
            tty = os.isatty(self.out_fd)
        except OSError:
            return None
        try:
            if tty:
                import pty
                import termios

                master, slave = pty.openpty()
                try:
                    attrs = termios.tcgetattr(slave)
                    attrs[1] &= ~termios.OPOST  # no "\n" -> "\r\n": the bytes reach the terminal as written
                    termios.tcsetattr(slave, termios.TCSANOW, attrs)
                    import fcntl

                    size = fcntl.ioctl(self.out_fd, termios.TIOCGWINSZ, b"\0" * 8)
                    fcntl.ioctl(slave, termios.TIOCSWINSZ, size)
                except OSError:
                    pass
                self._read_fd, self._child_fd, self.mode = master, slave, "pty"
            else:
                r, w = os.pipe()
                self._read_fd, self._child_fd, self.mode = r, w, "pipe"
        except OSError:
            self.mode = "none"
            return None
        return self._child_fd

    def started(self) -> None:
        """After the job's Popen: the parent's copy of the child's end is closed and the copying thread starts."""
        if self._child_fd is not None:
            os.close(self._child_fd)
            self._child_fd = None
        if self._read_fd is not None:
            self._thread = threading.Thread(target=self._copy, name="ddpdoctor-stderr", daemon=True)
            self._thread.start()

    def _copy(self) -> None:
        fd = self._read_fd
        while True:
            try:
                data = os.read(fd, 65536)
            except InterruptedError:
                continue
            except OSError:  # EIO: a pty whose every writer closed
                break
            if not data:
                break
            keep(self, data)
            _write_all(self.out_fd, data)
        try:
            os.close(fd)
        except OSError:
            pass

    def wait(self, wait_s: float) -> None:
        """Up to wait_s for the copy to reach the end of what the job wrote (every writer closed)."""
        if self._thread is not None:
            self._thread.join(wait_s)

    def text(self, wait_s: float = 1.0) -> str:
        """What the job wrote to stderr, head and tail (the middle said to be left out when it was); waits up to
        wait_s for the copy of what is already written (a process that outlived the job keeps the pipe open)."""
        self.wait(wait_s)
        with self._lock:
            head, tail, dropped = bytes(self._head), bytes(self._tail), self._dropped
        mid = f"\n[... {dropped} bytes of the job's stderr left out ...]\n".encode() if dropped else b""
        return (head + mid + tail).decode("utf-8", "replace").replace("\r\n", "\n")


def keep(tee: StderrTee, data: bytes) -> None:
    """Appends data to the kept head (up to HEAD_BYTES) and tail (the last TAIL_BYTES); counts what falls between."""
    with tee._lock:
        room = HEAD_BYTES - len(tee._head)
        if room > 0:
            tee._head += data[:room]
            data = data[room:]
        if data:
            tee._tail += data
            over = len(tee._tail) - TAIL_BYTES
            if over > 0:
                del tee._tail[:over]
                tee._dropped += over


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except InterruptedError:
            continue
        except OSError:  # the doctor's stderr went away: keep reading (the job must not block on a full pipe)
            return
        view = view[n:]
