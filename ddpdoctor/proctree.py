"""One mechanism for every process ddpdoctor starts: start, mark, follow, reap, stop with grace, and
prove that nothing is left.

Why one, and why this way. Each launcher used to have its own (a process group killed with killpg, a
psutil walk of children, a child subreaper in `run`), and each but the last could lose a descendant:
torch's elastic agent puts every rank in a session of its own, so killpg of the agent's group misses
them, and once the process between them dies the rank is re-parented to init, where a walk of the tree
from the dead parent no longer finds it (issue 23: `gpu-selftest` left such a grandchild alive). A
`Tree` never loses one, by two independent means:

- **a marker**: every process started through a Tree carries `<var>=<value>` in its environment (by
  default DDPDOCTOR_PROC_<a fresh id>=1: a name of its own, so that a doctor started inside another
  doctor's job adds its marker without overwriting the outer one). Every descendant inherits it, whatever launcher sits in
  between (torchrun, mp.spawn, srun and accelerate pass the environment on), and /proc/PID/environ
  still shows it after the process was re-parented anywhere;
- **a child subreaper** (PR_SET_CHILD_SUBREAPER, Linux >= 3.4), for a process that exists to run one
  job (a command: `ddpdoctor run`, `comm`, `probe`, the self-test): the job's orphans are re-parented
  to it instead of init, so the walk from it still reaches them (also one that cleared its
  environment), and their exit status comes here, so `reap()` collects them instead of leaving
  zombies. Then every child of the process counts as the job's, so a library call inside another
  program (a test runner, a training script) never adopts: it relies on the marker alone.

What "stopped" means: `stop()` sends the first signal (SIGTERM: torch's agent forwards it to its
workers and records their failures) to every live member, waits the grace period while reaping and
re-walking (a launcher may start processes while it tears down), then SIGKILLs what is left, and
repeats the walk until a pass finds nothing or its deadline passes. `StopReport.left` names whatever
survived (a process in uninterruptible sleep can), so a caller can say so instead of claiming a clean
end. Every wait has a deadline.

Process identity: a pid is recorded with its start time (clock ticks since boot, from /proc/PID/stat),
so a pid reused by an unrelated process is never signalled.

Linux only (it reads /proc). Elsewhere the walk finds nothing, and stopping falls back to the Popen
objects this Tree started.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

MARK_PREFIX = "DDPDOCTOR_PROC_"
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


# ------------------------------------------------------------------------------- /proc readings
def stat_fields(pid: int) -> Tuple[Optional[str], Optional[int]]:
    """(state letter, start time in clock ticks) from /proc/PID/stat, or (None, None) when gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
        rest = data[data.rindex(b")") + 2:].split()
        return rest[0].decode(), int(rest[19])
    except (OSError, ValueError, IndexError):
        return None, None


def running(pid: int, start: Optional[int] = None) -> bool:
    """Alive and not a zombie; with `start`, also the same process (a reused pid starts later)."""
    state, began = stat_fields(pid)
    return state is not None and state not in ("Z", "X", "x") and (start is None or began == start)


def ppid_map() -> Dict[int, int]:
    """pid -> parent pid of every process on the machine, from one pass over /proc."""
    out: Dict[int, int] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                data = fh.read()
            out[int(name)] = int(data[data.rindex(b")") + 2:].split(None, 2)[1])
        except (OSError, ValueError, IndexError):
            continue
    return out


def environ_has(block: bytes, var: str, value: str) -> bool:
    """True when a NUL-separated environment block (as /proc/PID/environ holds it) has var=value as one
    whole entry (not var=value2, not XVAR=value)."""
    needle = f"{var}={value}".encode()
    return (b"\0" + needle + b"\0") in b"\0" + block + (b"" if block.endswith(b"\0") else b"\0")


def has_mark(pid: int, var: str, value: str) -> bool:
    """True when /proc/PID/environ holds var=value (False when it cannot be read: another user's, a zombie)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return environ_has(fh.read(), var, value)
    except OSError:
        return False


def marked(var: str, value: str, exclude: Iterable[int] = ()) -> List[int]:
    """Live (non-zombie) processes whose environment holds var=value, from one pass over /proc."""
    skip = set(exclude) | {os.getpid()}
    out = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if not name.isdigit() or int(name) in skip:
            continue
        pid = int(name)
        if has_mark(pid, var, value) and running(pid):
            out.append(pid)
    return out


def descendants(roots: Iterable[int], ppids: Optional[Mapping[int, int]] = None) -> List[int]:
    """Every live descendant of `roots` (not the roots themselves), from one /proc pass."""
    kids: Dict[int, List[int]] = {}
    for pid, ppid in (ppids if ppids is not None else ppid_map()).items():
        kids.setdefault(ppid, []).append(pid)
    out, todo, done = [], list(roots), set()
    while todo:
        pid = todo.pop()
        if pid in done:
            continue
        done.add(pid)
        for c in kids.get(pid, ()):
            if c not in done:
                out.append(c)
                todo.append(c)
    return out


# ------------------------------------------------------------------------------- process set-up
def become_subreaper() -> bool:
    """Make this process the child subreaper of everything it starts (orphans come back here).
    Idempotent; False where the kernel or platform does not support it."""
    prctl = _prctl()
    try:
        return prctl is not None and prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except Exception:  # noqa: BLE001 - not Linux: the marker still finds the job
        return False


def _prctl() -> Optional[Callable[..., int]]:
    """libc's prctl, resolved in this process (never between fork and exec), or None off Linux."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except Exception:  # noqa: BLE001
        return None


def _die_with_parent(sig: int) -> Optional[Callable[[], None]]:
    prctl = _prctl()
    if prctl is None:
        return None

    def preexec() -> None:  # in the child between fork and exec: one C call, nothing imported
        prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    return preexec


def die_with_parent(sig: int) -> bool:
    """Ask the kernel to send `sig` to this process when its parent dies (PR_SET_PDEATHSIG), for a
    process that the doctor started by other means (mp.spawn's children)."""
    prctl = _prctl()
    try:
        return prctl is not None and prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except Exception:  # noqa: BLE001
        return False


_OWN_PROCESS = False


def own_this_process() -> None:
    """Called by the doctor's entry points (never by library code): this process exists to run the
    doctor's command, so its launches adopt orphans and count every child of it as theirs."""
    global _OWN_PROCESS
    _OWN_PROCESS = True


def owns_this_process() -> bool:
    return _OWN_PROCESS


def sigint_ignored_at_start() -> bool:
    """True when this process inherited SIGINT as ignored: a background job of a non-interactive shell
    (POSIX: `cmd &` ignores SIGINT and SIGQUIT), nohup-style wrappers, some CI runners. Python then
    installs no KeyboardInterrupt handler, and the doctor keeps it that way (Ctrl-C is not for it)."""
    try:
        return signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    except (ValueError, OSError):
        return False


# ------------------------------------------------------------------------------- the tree
@dataclass
class StopReport:
    """What `Tree.stop()` did: how many it signalled, how many needed SIGKILL, which pids survived."""

    signalled: int = 0
    killed: int = 0
    left: List[int] = field(default_factory=list)
    seconds: float = 0.0


class Tree:
    """The processes of one job: what this Tree started, every descendant ever seen, and whatever
    carries its marker.

    `var`/`value` name the marker (default DDPDOCTOR_PROC_<fresh id>=1); a launcher that already
    puts its own id in the job's environment (run's DDPDOCTOR_RUN_DIR, launch's token) passes that.
    `adopt=True` is for a process that exists to run this one job: it becomes a child subreaper when the
    first process starts, and every child of it counts as the job's. The default is True only in a
    process that the doctor's own entry points claimed (`own_this_process()`: the `ddpdoctor` command,
    `python -m ddpdoctor`, the self-test script), never in library code running inside another program
    (a test runner, a training script), whose other children are not the job's.
    """

    def __init__(self, var: Optional[str] = None, value: str = "1", adopt: Optional[bool] = None):
        self.var = var or MARK_PREFIX + uuid.uuid4().hex[:16].upper()
        self.value = value
        self.adopt = _OWN_PROCESS if adopt is None else adopt
        self.members: Dict[int, Optional[int]] = {}  # pid -> start ticks (identity), ever seen
        self.popens: Dict[int, subprocess.Popen] = {}
        self.statuses: Dict[int, int] = {}  # pid -> exit code (negative: signal) of what was reaped here
        self.ignored: set = set()  # this process's own helpers (run's stderr relay): never the job's
        self._subreaper_on = False

    # ---- starting
    def environ(self, base: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
        """`base` (default os.environ) with this Tree's marker added."""
        env = dict(os.environ if base is None else base)
        env[self.var] = self.value
        return env

    def popen(self, argv: Sequence[str], env: Optional[Mapping[str, str]] = None, new_session: bool = True,
              die_with_parent: Optional[int] = signal.SIGKILL, **kwargs) -> subprocess.Popen:
        """Start `argv` as a member of this Tree (marker in its environment).

        new_session: its own session and process group, so a terminal's Ctrl-C reaches only the doctor,
        which then ends the whole tree in order (the default for the doctor's own launches; `run` passes
        False so the user's command keeps the terminal). die_with_parent: the signal the child gets if
        this process dies without stopping it (PR_SET_PDEATHSIG), or None.
        """
        if self.adopt:
            self.adopt_orphans()
        if die_with_parent is not None and "preexec_fn" not in kwargs:
            kwargs["preexec_fn"] = _die_with_parent(die_with_parent)
        proc = subprocess.Popen(list(argv), env=self.environ(env), start_new_session=new_session, **kwargs)
        self.popens[proc.pid] = proc
        self.add(proc.pid)
        return proc

    def adopt_orphans(self) -> bool:
        """Become the child subreaper now, and from now on count every child of this process as the job's
        (a process that exists to run this job, starting it by other means than popen())."""
        if not self._subreaper_on:
            self._subreaper_on = become_subreaper()
        return self._subreaper_on

    def add(self, pid: int) -> None:
        """Follow `pid` (and, from the next walk on, its descendants)."""
        if pid not in self.members:
            self.members[pid] = stat_fields(pid)[1]

    # ---- following
    def refresh(self, ppids: Optional[Mapping[int, int]] = None) -> None:
        """Add every live descendant of the members (and, as a subreaper, of this process) to
        `members`, from one /proc pass."""
        roots = [pid for pid, start in self.members.items() if running(pid, start)]
        if self._subreaper_on:
            roots.append(os.getpid())
        me = os.getpid()
        for pid in descendants(roots, ppids):
            if pid != me and pid not in self.ignored:
                self.add(pid)

    def live(self, by_marker: bool = True) -> List[int]:
        """Members still running (identity checked), plus live processes carrying the marker."""
        self.refresh()
        out = [pid for pid, start in self.members.items() if running(pid, start)]
        if by_marker:
            for pid in marked(self.var, self.value, exclude=out):
                self.add(pid)
                out.append(pid)
        return out

    def leftovers(self) -> List[int]:
        """What is still alive of the job: the proof that nothing is left is `leftovers() == []`."""
        self.reap()
        return self.live()

    # ---- reaping
    def reap(self) -> Dict[int, int]:
        """Collect the exit status of members that are this process's children (started here, or
        re-parented here as a subreaper). Popen objects keep their own returncode. Never blocks."""
        found: Dict[int, int] = {}
        for pid, proc in list(self.popens.items()):
            if pid not in self.statuses and proc.poll() is not None:
                found[pid] = self.statuses[pid] = proc.returncode
        for pid in list(self.members):
            if pid in self.popens or pid in self.statuses:
                continue
            try:
                got, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                continue  # not our child (its own parent reaps it), or already collected
            if got == pid:
                found[pid] = self.statuses[pid] = os.waitstatus_to_exitcode(status)
        return found

    # ---- stopping
    def send(self, sig: int, pids: Optional[Iterable[int]] = None) -> int:
        """Send `sig` to `pids` (default: every live member), checking each one's identity first."""
        return sum(1 for pid in (self.live() if pids is None else pids) if self._signal_one(pid, sig))

    def send_together(self, sig: int, pids: Sequence[int]) -> int:
        """`sig` to every pid as one event: freeze them all (SIGSTOP), send `sig`, wake them (SIGCONT),
        so that every one has `sig` pending before any of them can act on it.

        Why: sent one after another, a parent may die of its signal before its children receive
        theirs, and children that asked for a parent-death signal take that one first from wherever
        they are. torch.multiprocessing.spawn sets PR_SET_PDEATHSIG to SIGINT, so a rank blocked in the
        TCPStore connect then got a Python-handled SIGINT, its connect returned EINTR and torch printed
        a "TCP client failed to connect ... Interrupted system call" trace into the job's output before
        its own SIGTERM came (seen in CI on a loaded machine). With the signal already pending, a
        pending fatal signal ends the process on its way back from any handler, before its code runs
        again. Children are woken before their parents (reverse order of discovery)."""
        pids = list(pids)
        frozen = [pid for pid in pids if self._signal_one(pid, signal.SIGSTOP)]
        count = sum(1 for pid in pids if self._signal_one(pid, sig))
        for pid in reversed(frozen):
            self._signal_one(pid, signal.SIGCONT)
        return count

    def _signal_one(self, pid: int, sig: int) -> bool:
        """`sig` to one member, only if it is still the process this Tree saw; True when it was sent."""
        if not running(pid, self.members.get(pid)):
            return False
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
            return True
        return False

    def stop(self, grace_s: float = 5.0, first: int = signal.SIGTERM, kill_wait_s: float = 5.0,
             reap: Optional[Callable[[], object]] = None, first_to: Optional[Iterable[int]] = None) -> StopReport:
        """End the whole job: `first` to every live member (or only to `first_to`, e.g. a launcher that
        tears its own workers down in order), up to `grace_s` for them to go, then SIGKILL to whatever
        is left, re-walking until nothing is found or `kill_wait_s` passes. `reap` is called while
        waiting (default: this Tree's own reap()); a caller that reaps with waitpid(-1) passes its own."""
        t0 = time.monotonic()
        reap = reap or self.reap
        report = StopReport()
        live = self.live()
        if first_to is not None:
            report.signalled = self.send(first, [p for p in first_to if p in live])
        else:
            report.signalled = self.send_together(first, live)
        end = time.monotonic() + max(0.0, grace_s)
        while live and time.monotonic() < end:
            time.sleep(0.05)
            reap()
            live = self.live()
        end = time.monotonic() + max(0.5, kill_wait_s)
        while live:
            report.killed += self.send(signal.SIGKILL, live)
            time.sleep(0.05)
            reap()
            live = self.live()
            if time.monotonic() >= end:
                break
        reap()
        report.left = self.live()
        report.seconds = round(time.monotonic() - t0, 3)
        return report


def run(argv: Sequence[str], *, timeout: Optional[float] = None, input=None, capture_output: bool = False,
        grace_s: float = 0.0, new_session: bool = True, **kwargs) -> subprocess.CompletedProcess:
    """subprocess.run through a Tree: the same arguments and result, but nothing the command started
    outlives it. On the timeout (or any exception, Ctrl-C included) the whole tree is stopped (SIGTERM,
    `grace_s`, then SIGKILL) before TimeoutExpired is raised with what the command wrote; after a normal
    end, whatever it left running (a daemonised grandchild) is killed."""
    if capture_output:
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
    if input is not None:
        kwargs["stdin"] = subprocess.PIPE
    tree = Tree()
    proc = tree.popen(argv, new_session=new_session, **kwargs)
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        while True:
            step = 0.5 if deadline is None else max(0.0, min(0.5, deadline - time.monotonic()))
            try:
                out, err = proc.communicate(input, timeout=step)
                break
            except subprocess.TimeoutExpired:
                input = None  # sent once; communicate() keeps what it read so far
                if proc.poll() is not None:
                    # the command ended, and what still holds its pipes is what it left behind
                    tree.stop(grace_s=0.0, first=signal.SIGKILL)
                elif deadline is not None and time.monotonic() >= deadline:
                    tree.stop(grace_s=grace_s)
                    out, err = proc.communicate()
                    raise subprocess.TimeoutExpired(proc.args, timeout or 0.0, output=out, stderr=err) from None
    finally:
        tree.stop(grace_s=0.0, first=signal.SIGKILL)
        if proc.returncode is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
