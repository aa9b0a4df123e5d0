"""The job's stderr, copied through to `ddpdoctor run`'s own stderr and kept (its first and last bytes) for
the verdict: what C++ (Gloo, the TCPStore, NCCL) and the launcher printed, which no Python exception record holds.

The job sees what it would see without the doctor: when the doctor's stderr is a terminal, the job's stderr is
a pseudo-terminal (isatty() stays true: progress bars and colours unchanged; output post-processing off, so the
bytes pass as written; the window size copied); otherwise a pipe (isatty() false, as a file or pipe would be).
Whatever the mode, every byte is written on to the doctor's stderr (fd 2) as it arrives.

The copying is done by a relay process (this file run as a script), not by the doctor: it holds the read end
(pipe) or the master (pty), is started before the job in its own session (a kill of the doctor, of its process
group, a terminal's Ctrl-C or hang-up do not reach it) and without the doctor's marker (the doctor's tree does not
count or stop it). So the doctor's death (the OOM killer, kill -9) does not break the job: without the relay the
job's next stderr write would fail (BrokenPipeError in Python, which ignores SIGPIPE; EIO on a pty). The relay
writes the kept bytes to files in the run directory (stderr.head: the first HEAD_BYTES; stderr.tail.N: segments of
TAIL_BYTES, the last two kept), which the doctor reads for the verdict; at most HEAD_BYTES + 2 x TAIL_BYTES on disk.
It exits at EOF (pipe) or EIO (pty) when the last writer closed: it lives as long as the job's stderr does. Where
the relay cannot start, a thread of the doctor copies (wave 1's way: never worse than no capture).
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from typing import Optional, Tuple

HEAD_BYTES = 64 * 1024  # the first bytes kept (a launcher's set-up errors come first)
TAIL_BYTES = 512 * 1024  # the last bytes kept (the failure comes last)


class StderrTee:
    def __init__(self, out_fd: int = 2, keep_dir: Optional[str] = None):
        self.out_fd = out_fd
        self.keep_dir = keep_dir  # the relay's files go here (the run directory); None: no relay, a thread copies
        self.relay: Optional[subprocess.Popen] = None
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
        if self.keep_dir:
            self._start_relay()
        return self._child_fd

    def _start_relay(self) -> None:
        """The relay takes the read end before the job starts; on any failure the thread copies instead."""
        try:
            self.relay = subprocess.Popen(
                [sys.executable, "-I", "-S", os.path.abspath(__file__), str(self._read_fd), self.keep_dir],
                pass_fds=(self._read_fd,), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.out_fd,
                start_new_session=True, env={}, cwd="/")
        except (OSError, ValueError, subprocess.SubprocessError):
            self.relay = None
            return
        os.close(self._read_fd)  # the relay's now: this process's death cannot close the job's stderr
        self._read_fd = None

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
        _pump(fd, self.out_fd, lambda data: keep(self, data))
        try:
            os.close(fd)
        except OSError:
            pass

    def wait(self, wait_s: float) -> None:
        """Up to wait_s for the copy to reach the end of what the job wrote (every writer closed)."""
        if self._thread is not None:
            self._thread.join(wait_s)
        if self.relay is not None:
            end = time.monotonic() + wait_s
            while self.relay.poll() is None and time.monotonic() < end:
                time.sleep(0.01)

    def text(self, wait_s: float = 1.0) -> str:
        """What the job wrote to stderr, head and tail (the middle said to be left out when it was); waits up to
        wait_s for the copy of what is already written (a process that outlived the job keeps the pipe open)."""
        self.wait(wait_s)
        if self.relay is not None:
            head, tail, dropped = read_kept(self.keep_dir)
        else:
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


def _pump(fd: int, out_fd: int, sink) -> None:
    """Copies fd on to out_fd until EOF (a pipe) or EIO (a pty whose every writer closed), handing each chunk to
    sink (what is kept for the verdict) first: the relay's loop and the thread fallback's."""
    while True:
        try:
            data = os.read(fd, 65536)
        except InterruptedError:
            continue
        except OSError:  # EIO: a pty whose every writer closed
            break
        if not data:
            break
        sink(data)
        _write_all(out_fd, data)


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


# ---------------------------------------------------------------- the relay's side (its own process)

HEAD_FILE = "stderr.head"
TAIL_FILE = "stderr.tail."


class Keeper:
    """Writes the kept bytes to files in `keep_dir`: the first `head` bytes to stderr.head, the rest to segments
    stderr.tail.N of `seg` bytes each, N from 0; starting segment N+1 removes N-1 (the last `seg` bytes are always
    in the last two). A file error is swallowed: keeping is never allowed to stop the copy."""

    def __init__(self, keep_dir: str, head: int = HEAD_BYTES, seg: int = TAIL_BYTES):
        self.dir, self.head_left, self.seg = keep_dir, head, seg
        self.n, self.seg_len = 0, 0
        self._fds: dict = {}

    def _append(self, name: str, data: bytes) -> None:
        fd = self._fds.get(name)
        try:
            if fd is None:
                flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC  # one relay per run directory: each file opened once
                fd = self._fds[name] = os.open(os.path.join(self.dir, name), flags, 0o600)
            _write_all(fd, data)
        except OSError:
            pass

    def _drop(self, name: str) -> None:
        self._drop_fd(name)
        try:
            os.unlink(os.path.join(self.dir, name))
        except OSError:
            pass

    def feed(self, data: bytes) -> None:
        if self.head_left > 0:
            part = data[:self.head_left]
            self._append(HEAD_FILE, part)
            self.head_left -= len(part)
            data = data[len(part):]
            if self.head_left == 0:
                self._drop_fd(HEAD_FILE)
        while data:
            if self.seg_len >= self.seg:
                self._drop_fd(TAIL_FILE + str(self.n))
                self.n, self.seg_len = self.n + 1, 0
                self._drop(TAIL_FILE + str(self.n - 2))
            part = data[:self.seg - self.seg_len]
            self._append(TAIL_FILE + str(self.n), part)
            self.seg_len += len(part)
            data = data[len(part):]

    def _drop_fd(self, name: str) -> None:
        fd = self._fds.pop(name, None)
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass


def read_kept(keep_dir: str, seg: int = TAIL_BYTES) -> Tuple[bytes, bytes, int]:
    """The relay's files read back: (head, the last `seg` bytes after it, the bytes left out between). Read
    while the relay still writes (a process that outlived the job holds the stderr), a segment may be one
    rotation newer: the count is then approximate, the text still the job's."""

    def read(name: str) -> bytes:
        try:
            with open(os.path.join(keep_dir, name), "rb") as fh:
                return fh.read()
        except OSError:
            return b""

    head = read(HEAD_FILE)
    try:
        ns = [int(n[len(TAIL_FILE):]) for n in os.listdir(keep_dir)
              if n.startswith(TAIL_FILE) and n[len(TAIL_FILE):].isdigit()]
    except OSError:
        ns = []
    if not ns:
        return head, b"", 0
    last = max(ns)
    cur = read(TAIL_FILE + str(last))
    both = (read(TAIL_FILE + str(last - 1)) if last else b"") + cur
    tail = both[-seg:] if seg else b""
    return head, tail, max(0, last * seg + len(cur) - len(tail))


def relay(fd: int, keep_dir: str, out_fd: int = 2) -> None:
    """The relay's loop: every byte from fd to out_fd (the doctor's original stderr) and to the Keeper, until EOF
    or EIO (every writer closed). A write error on out_fd (that stderr gone) drops the bytes and goes on reading:
    the job must not block on a full pipe."""
    import signal

    for sig in (signal.SIGINT, signal.SIGHUP):  # not ours to act on: the job's end ends the relay
        try:
            signal.signal(sig, signal.SIG_IGN)
        except (OSError, ValueError):
            pass
    keeper = Keeper(keep_dir)
    _pump(fd, out_fd, keeper.feed)


if __name__ == "__main__":  # the relay: python -I -S capture.py FD KEEP_DIR
    relay(int(sys.argv[1]), sys.argv[2])
