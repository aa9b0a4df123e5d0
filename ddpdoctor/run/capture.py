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

A run directory whose doctor was killed (kill -9, the OOM killer) is not left in the temporary directory: the doctor
writes its pid (and the relay's) to OWNER_FILE there; the relay, at its end, removes the directory when that doctor
is gone, and the next `ddpdoctor run` removes those whose doctor and relay are both gone (sweep_stale).

A terminal resized while the job runs (SIGWINCH to the doctor) is copied to the pty (resize), where the job's
progress bars read their width from.
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
        self.keep_dir = keep_dir  # the kept bytes' files go here (the run directory); None: a directory of its own
        self.relay_wanted = keep_dir is not None  # a library caller's tee (no run directory) copies in a thread
        self.relay: Optional[subprocess.Popen] = None
        self.mode = "none"
        self._read_fd: Optional[int] = None
        self._child_fd: Optional[int] = None
        if keep_dir is None:  # a library caller's tee: the kept bytes in a directory of its own, removed with it
            import shutil
            import tempfile
            import weakref

            self.keep_dir = tempfile.mkdtemp(prefix="ddpdoctor-stderr-")
            weakref.finalize(self, shutil.rmtree, self.keep_dir, True)
        self.keeper: Optional[Keeper] = None  # the thread fallback's (the relay has its own, in its process)
        self._thread: Optional[threading.Thread] = None
        self.pty_name: Optional[str] = None  # the pty's slave, reopened to set its window size (resize)

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
                self.pty_name = os.ttyname(slave)
            else:
                r, w = os.pipe()
                self._read_fd, self._child_fd, self.mode = r, w, "pipe"
        except OSError:
            self.mode = "none"
            return None
        if self.relay_wanted:
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

    def resize(self) -> bool:
        """The doctor's terminal size copied to the job's pty (on SIGWINCH): its slave reopened by name, since the
        doctor keeps neither end (the relay has the master; the job's end is closed here so that EIO comes when
        the job's last writer closes). True when set. Safe in a signal handler: ioctls, no shared state."""
        if self.mode != "pty" or not self.pty_name:
            return False
        try:
            import fcntl
            import termios

            size = fcntl.ioctl(self.out_fd, termios.TIOCGWINSZ, b"\0" * 8)
            fd = os.open(self.pty_name, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
            try:
                fcntl.ioctl(fd, termios.TIOCSWINSZ, size)
            finally:
                os.close(fd)
            return True
        except OSError:
            return False

    def started(self) -> None:
        """After the job's Popen: the parent's copy of the child's end is closed and the copying thread starts."""
        if self._child_fd is not None:
            os.close(self._child_fd)
            self._child_fd = None
        if self._read_fd is not None:
            self._thread = threading.Thread(target=self._copy, name="ddpdoctor-stderr", daemon=True)
            self._thread.start()

    def keep(self, data: bytes) -> None:
        """The thread fallback's keeping: the relay's Keeper, in this process (one representation: files)."""
        if self.keeper is None:
            self.keeper = Keeper(self.keep_dir, head=HEAD_BYTES, seg=TAIL_BYTES)
        self.keeper.feed(data)

    def _copy(self) -> None:
        fd = self._read_fd
        _pump(fd, self.out_fd, self.keep)
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
        head, tail, dropped = read_kept(self.keep_dir, seg=TAIL_BYTES)
        mid = f"\n[... {dropped} bytes of the job's stderr left out ...]\n".encode() if dropped else b""
        return (head + mid + tail).decode("utf-8", "replace").replace("\r\n", "\n")


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


OWNER_FILE = "doctor.pid"  # "PID START [RELAY_PID RELAY_START]": the doctor (and its relay) this run directory is for


def _started_at(pid: int) -> Optional[int]:
    """Start time (clock ticks) of a live, non-zombie pid, else None. proctree.stat_fields's reading, restated
    here because the relay runs this file with -I -S (the package is not importable there)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            rest = fh.read().rsplit(b")", 1)[1].split()
        return None if rest[0] in (b"Z", b"X", b"x") else int(rest[19])
    except (OSError, ValueError, IndexError):
        return None


def _pid_ns() -> str:
    """This process's pid namespace ("pid:[4026531836]"): pids mean something only inside it."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return "?"


def write_owner(run_dir: str, relay_pid: Optional[int] = None) -> None:
    """The doctor's pid and start (and its relay's) into the run directory, with their pid namespace: who may
    still need it."""
    pids = [os.getpid()] + ([relay_pid] if relay_pid else [])
    try:
        with open(os.path.join(run_dir, OWNER_FILE), "w") as fh:
            fh.write(_pid_ns() + "\n" + " ".join(f"{p} {_started_at(p) or 0}" for p in pids))
    except OSError:
        pass


def owners_alive(run_dir: str, skip: int = 0) -> Optional[bool]:
    """Whether the doctor or relay named in run_dir's OWNER_FILE still runs (the same process: start time
    checked; `skip`: a pid not to count, the relay asking about its doctor); None without the file (a run
    directory of an older doctor, or one kept on purpose) or when it was written in another pid namespace (a
    container sharing /tmp: its pids are not ours to look up): never removed then."""
    try:
        with open(os.path.join(run_dir, OWNER_FILE)) as fh:
            ns, _, rest = fh.read().partition("\n")
        nums = [int(x) for x in rest.split()]
    except (OSError, ValueError):
        return None
    if ns != _pid_ns() or ns == "?":
        return None
    pairs = list(zip(nums[0::2], nums[1::2]))
    return any(pid != skip and _started_at(pid) == start for pid, start in pairs)


def sweep_stale(parent: str, prefix: str = "ddpdoctor-run-") -> list:
    """Removes this user's run directories under `parent` whose doctor and relay are both gone (a doctor that
    was SIGKILLed after its relay ended). Returns the paths removed."""
    import shutil

    gone = []
    try:
        names = [n for n in os.listdir(parent) if n.startswith(prefix)]
    except OSError:
        return gone
    for name in names:
        path = os.path.join(parent, name)
        try:
            if os.lstat(path).st_uid != os.getuid() or os.path.islink(path):
                continue
        except OSError:
            continue
        if owners_alive(path) is False:
            shutil.rmtree(path, ignore_errors=True)
            gone.append(path)
    return gone


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
    copy_and_keep(fd, keep_dir, out_fd)


def copy_and_keep(fd: int, keep_dir: str, out_fd: int = 2) -> None:
    """The relay's work: copies and keeps until every writer closed; then, when the doctor that started it is
    gone (killed: it would have read the files and removed the directory), removes the run directory."""
    keeper = Keeper(keep_dir)
    _pump(fd, out_fd, keeper.feed)
    for name in list(keeper._fds):
        keeper._drop_fd(name)
    if owners_alive(keep_dir, skip=os.getpid()) is False:
        import shutil

        shutil.rmtree(keep_dir, ignore_errors=True)


if __name__ == "__main__":  # the relay: python -I -S capture.py FD KEEP_DIR
    relay(int(sys.argv[1]), sys.argv[2])
