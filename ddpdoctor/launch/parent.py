"""Parent side (the doctor's own process, no torch import): `launch()` starts the agent, watches the
run against its deadline, tears the process tree down, and names the root cause."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence

from ddpdoctor import proctree
from ddpdoctor.launch.files import (ENV_DIR, ENV_RANK_ENV, ENV_TOKEN, STOP_FILE, atomic_write_json, read_json,
                                    tail_text)


class Interrupted(BaseException):
    """SIGTERM arrived while `launch()` was running; raised after the ranks were torn down."""


@dataclass
class LaunchSpec:
    """What to launch and the bounds to launch it under.

    `rank_env` maps a global rank to extra env for that rank only (applied by the shim before the
    module runs, so it may even override RANK or WORLD_SIZE). The shim also understands
    `DDPDOCTOR_LAUNCH_HOLD_S` (sleep before starting: a rank that never joins) and
    `DDPDOCTOR_LAUNCH_EXIT` (exit at once with that code: a rank that dies before it starts).
    """

    module: str
    args: Sequence[str] = ()
    nproc: int = 2
    deadline_s: float = 60.0          # whole run, launch to last result
    teardown_s: float = 3.0           # grace after all results (or after the deadline) before SIGKILL
    env: Mapping[str, str] = field(default_factory=dict)
    rank_env: Mapping[int, Mapping[str, str]] = field(default_factory=dict)
    master_addr: str = "127.0.0.1"
    master_port: Optional[int] = None  # None: a free port we pick
    nnodes: int = 1                    # >1: this is one agent of a multi-node job (static rendezvous)
    node_rank: int = 0
    python: str = sys.executable
    rdzv_timeout_s: Optional[float] = None  # agent rendezvous timeout; default: the deadline
    keep_dir: bool = False            # keep the temp dir (logs, results) for debugging
    workdir: Optional[str] = None     # use this dir instead of a fresh temp dir
    run_id: Optional[str] = None
    cwd: Optional[str] = None          # working directory of the ranks (default: the caller's)


@dataclass
class RankOutcome:
    """Everything the parent learnt about one rank."""

    rank: int
    local_rank: int
    host: Optional[str] = None
    pid: Optional[int] = None
    reported: bool = False                  # wrote result-R.json
    result: Optional[dict] = None
    phase: Optional[str] = None             # last phase it entered
    phase_since: Optional[float] = None     # epoch seconds it entered that phase
    phases: List[dict] = field(default_factory=list)  # [{"name", "start", "end"}]
    exitcode: Optional[int] = None          # None: unknown (killed at the deadline, or still running)
    signal: Optional[str] = None            # e.g. "SIGABRT" when exitcode < 0
    error: Optional[dict] = None            # {"message", "traceback", "timestamp"} from the error file
    failure_time: Optional[float] = None    # when the failure happened/was observed (epoch s)
    stderr_tail: str = ""
    stdout_tail: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class LaunchResult:
    """The outcome of one `launch()`. `ok` means every rank reported its result."""

    ok: bool
    nproc: int
    world_size: int
    master_addr: str
    master_port: int
    elapsed_s: float
    timed_out: bool = False
    interrupted: bool = False
    stopped_early: bool = False              # a rank called Reporter.stop_run before all reported
    ranks: List[RankOutcome] = field(default_factory=list)
    agent_error: Optional[str] = None       # the launcher itself failed (port in use, bad address...)
    agent_log_tail: str = ""
    root_cause: Optional[dict] = None        # {"kind", "rank", "host", "phase", "exitcode", "signal", "message", ...}
    teardown: str = "clean"                  # clean | aborted-after-report | hung-after-report | killed
    survivors_killed: int = 0
    workdir: Optional[str] = None            # only when kept

    @property
    def results(self) -> Dict[int, dict]:
        return {r.rank: r.result for r in self.ranks if r.reported}

    def rank(self, n: int) -> Optional[RankOutcome]:
        return next((r for r in self.ranks if r.rank == n), None)

    def to_dict(self) -> dict:
        d = asdict(self)
        return d


def free_port(addr: str = "127.0.0.1") -> int:
    """A TCP port that is free on `addr` right now (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


def port_is_free(port: int, addr: str = "127.0.0.1") -> bool:
    """True when nothing listens on addr:port. SO_REUSEADDR, as TCPStore sets it, so connections
    of a finished run lingering in TIME_WAIT do not count as "in use"; a listener still does."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((addr, port))
        except OSError:
            return False
        return True


def _signal_name(exitcode: Optional[int]) -> Optional[str]:
    if exitcode is None or exitcode >= 0:
        return None
    try:
        return signal.Signals(-exitcode).name
    except ValueError:
        return f"signal {-exitcode}"


def launch(spec: LaunchSpec) -> LaunchResult:
    """Run `spec.module` on `spec.nproc` local ranks under torch's elastic agent, within bounds.

    Never raises for a failed run (the result says what failed); re-raises KeyboardInterrupt, or
    `Interrupted` for SIGTERM, only after every child is gone.
    """
    import subprocess

    t0 = time.monotonic()
    workdir = spec.workdir or tempfile.mkdtemp(prefix="ddpdoctor-launch-")
    os.makedirs(workdir, exist_ok=True)
    port = spec.master_port or free_port(spec.master_addr if is_ip_address(spec.master_addr) else "127.0.0.1")
    token = uuid.uuid4().hex
    run_id = spec.run_id or f"ddpdoctor-{token[:12]}"
    world = spec.nproc * spec.nnodes
    doc = {"module": spec.module, "args": [str(a) for a in spec.args], "nproc": spec.nproc, "nnodes": spec.nnodes,
           "node_rank": spec.node_rank, "master_addr": spec.master_addr, "master_port": port,
           "python": spec.python, "run_id": run_id, "teardown_s": spec.teardown_s,
           "rdzv_timeout_s": spec.rdzv_timeout_s or spec.deadline_s}
    spec_path = os.path.join(workdir, "spec.json")
    atomic_write_json(spec_path, doc)

    env = dict(os.environ)
    env.update({str(k): str(v) for k, v in spec.env.items()})
    env[ENV_DIR] = workdir
    env[ENV_TOKEN] = token
    env[ENV_RANK_ENV] = json.dumps({str(k): {str(a): str(b) for a, b in v.items()} for k, v in spec.rank_env.items()})
    env.setdefault("PYTHONUNBUFFERED", "1")
    if spec.nproc > 1:
        env.setdefault("OMP_NUM_THREADS", "1")  # what torchrun does for nproc > 1
    # The shim and the worker must import this copy of ddpdoctor.
    pkg_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if pkg_root not in parts:
        env["PYTHONPATH"] = os.pathsep.join([pkg_root, *parts])

    agent_log = open(os.path.join(workdir, "agent.log"), "wb")  # noqa: SIM115 - closed in finally
    old_term = _install_sigterm()
    proc = None
    tree = None
    timed_out = interrupted = False
    all_reported_at: Optional[float] = None
    stop_seen_at: Optional[float] = None
    stopped_early = False
    teardown = "clean"
    killed = 0
    signalled = False
    pending: Optional[BaseException] = None
    try:
        # Its own session: a terminal's Ctrl-C reaches only this process, which ends the whole tree in
        # order (the agent first, so it records its workers' failures). The token marks every process
        # of the run; this process becomes their subreaper (proctree says why both).
        tree = proctree.Tree(var=ENV_TOKEN, value=token)
        proc = tree.popen([spec.python, "-m", "ddpdoctor.launch", "agent", spec_path], env=env,
                          stdin=subprocess.DEVNULL, stdout=agent_log, stderr=subprocess.STDOUT,
                          new_session=True, die_with_parent=signal.SIGTERM, cwd=spec.cwd)
        deadline = t0 + spec.deadline_s
        ticks = 0
        while True:
            rc = proc.poll()
            ticks += 1
            if ticks % 10 == 1:  # a /proc walk: rarely, so the ranks keep the CPU (teardown also scans by token)
                tree.refresh()
            n_reported = sum(os.path.exists(os.path.join(workdir, f"result-{r}.json")) for r in _my_ranks(spec))
            now = time.monotonic()
            if n_reported == spec.nproc and all_reported_at is None:
                all_reported_at = now
            if stop_seen_at is None and os.path.exists(os.path.join(workdir, STOP_FILE)):
                stop_seen_at = now  # a rank found the culprit: no need to wait for the stuck ones
            if stop_seen_at is not None and now - stop_seen_at > spec.teardown_s and all_reported_at is None:
                stopped_early = True
                break
            if rc is not None:
                break
            if all_reported_at is not None and now - all_reported_at > spec.teardown_s:
                teardown = "hung-after-report"
                break
            if now >= deadline:
                timed_out = all_reported_at is None
                break
            time.sleep(0.1)
    except (KeyboardInterrupt, Interrupted) as exc:
        interrupted = True
        pending = exc
    finally:
        held = _hold_signals()  # a second Ctrl-C must not cut the teardown short and leave orphans
        if proc is not None:
            if proc.poll() is None:
                signalled = True
                # Graceful first: the agent forwards SIGTERM to its workers and records failures.
                with contextlib.suppress(OSError):
                    proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=min(spec.teardown_s, 2.0) if not (interrupted or timed_out) else 1.0)
                except subprocess.TimeoutExpired:
                    pass
            if tree is not None:  # whatever the agent left, wherever it was re-parented: SIGKILL, until none
                stopped = tree.stop(grace_s=0.0, first=signal.SIGKILL)
                killed = stopped.signalled + stopped.killed
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=2.0)
        agent_log.close()
        _release_signals(held)
        _restore_sigterm(old_term)

    result = _collect(spec, workdir, port, world, time.monotonic() - t0, timed_out, interrupted, teardown, killed,
                      signalled or stopped_early)
    result.stopped_early = stopped_early
    if not spec.keep_dir and not spec.workdir:
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)
        result.workdir = None
    else:
        result.workdir = workdir
    if pending is not None:
        raise pending
    return result


def is_ip_address(addr: str) -> bool:
    """True for a dotted IPv4 literal (a host name is not)."""
    try:
        socket.inet_aton(addr)
        return True
    except OSError:
        return False


def _my_ranks(spec: LaunchSpec) -> range:
    return range(spec.node_rank * spec.nproc, (spec.node_rank + 1) * spec.nproc)


def _install_sigterm():
    if threading.current_thread() is not threading.main_thread():
        return None

    def handler(signum, frame):
        raise Interrupted(f"signal {signum}")

    try:
        return signal.signal(signal.SIGTERM, handler)
    except ValueError:
        return None


def _hold_signals() -> Optional[dict]:
    """Ignore SIGINT/SIGTERM for the few seconds of teardown (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    held = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(ValueError, OSError):
            held[sig] = signal.signal(sig, signal.SIG_IGN)
    return held


def _release_signals(held: Optional[dict]) -> None:
    for sig, old in (held or {}).items():
        with contextlib.suppress(ValueError, OSError, TypeError):
            signal.signal(sig, old)


def _restore_sigterm(old) -> None:
    if old is not None and threading.current_thread() is threading.main_thread():
        with contextlib.suppress(ValueError, TypeError):
            signal.signal(signal.SIGTERM, old)


def _collect(spec: LaunchSpec, workdir: str, port: int, world: int, elapsed: float, timed_out: bool,
             interrupted: bool, teardown: str, killed: int, signalled: bool = False) -> LaunchResult:
    agent = read_json(os.path.join(workdir, "agent.json")) or {}
    failures = agent.get("failures") or {}
    log_root = os.path.join(workdir, "logs")
    ranks: List[RankOutcome] = []
    for local, grank in enumerate(_my_ranks(spec)):
        out = RankOutcome(rank=grank, local_rank=local)
        res = read_json(os.path.join(workdir, f"result-{grank}.json"))
        prog = read_json(os.path.join(workdir, f"progress-{grank}.json")) or {}
        if res is not None:
            out.reported, out.result = True, res
        src = res or prog
        out.host, out.pid = src.get("host"), src.get("pid")
        out.phases = list(src.get("phases") or [])
        if out.phases:
            out.phase, out.phase_since = out.phases[-1].get("name"), out.phases[-1].get("start")
        f = failures.get(str(grank))
        if f:
            out.exitcode, out.pid = f.get("exitcode"), f.get("pid") or out.pid
            out.signal = _signal_name(out.exitcode)
            out.failure_time = f.get("time") or f.get("timestamp")
            if f.get("error_file") or f.get("traceback"):
                out.error = {"message": f.get("message"), "traceback": f.get("traceback"),
                             "timestamp": f.get("timestamp")}
        elif agent.get("status") in ("ok", "failed"):
            out.exitcode = 0  # torch lists every rank that failed, including those it tore down
        rank_logs = _find_rank_logs(log_root, local)
        out.stderr_tail = tail_text(rank_logs.get("stderr.log", ""))
        out.stdout_tail = tail_text(rank_logs.get("stdout.log", ""))
        ranks.append(out)

    reported = all(r.reported for r in ranks)
    if reported and agent.get("status") == "failed" and teardown == "clean":
        teardown = "aborted-after-report"
    if reported and teardown == "clean" and killed:
        teardown = "killed"
    res = LaunchResult(ok=reported and not interrupted, nproc=spec.nproc, world_size=world,
                       master_addr=spec.master_addr, master_port=port, elapsed_s=round(elapsed, 3),
                       timed_out=timed_out, interrupted=interrupted, ranks=ranks,
                       # When we stopped the agent ourselves, its "got signal 15" is not the cause.
                       agent_error=agent.get("error") if agent.get("status") == "error"
                       and not (timed_out or interrupted or signalled) else None,
                       agent_log_tail=tail_text(os.path.join(workdir, "agent.log")),
                       teardown=teardown if reported else "killed" if killed else "clean",
                       survivors_killed=killed)
    if not res.ok:
        res.root_cause = root_cause(res)
    return res


def _find_rank_logs(log_root: str, local_rank: int) -> dict:
    """torch writes logs/<run_id>/attempt_0/<local_rank>/{stdout,stderr}.log."""
    found: dict = {}
    for dirpath, _dirs, files in os.walk(log_root):
        if os.path.basename(dirpath) == str(local_rank):
            for name in files:
                found[name] = os.path.join(dirpath, name)
    return found


def root_cause(res: LaunchResult) -> Optional[dict]:
    """The first observed failure, as torchrun names it; otherwise the rank(s) that lagged.

    Order: the launcher's own failure; then ranks that exited non-zero before reporting, earliest
    first (ranks the agent killed afterwards carry SIGTERM/SIGKILL and later timestamps); then, on
    a deadline or interrupt, the ranks that never reported, least progressed first.
    """
    if res.agent_error:
        return {"kind": "launcher", "rank": None, "message": res.agent_error,
                "detail": _last_lines(res.agent_log_tail, 6)}
    crashed = [r for r in res.ranks if not r.reported and r.exitcode not in (None, 0)]
    if crashed:
        # Ranks the agent tore down after the first failure exit by SIGTERM/SIGKILL; prefer the others. A rank's
        # real end decides, not its exit status: one that had recorded its own error (the error file the
        # launch shim writes on an uncaught exception) before the signal ended by that error -- it only took
        # longer to exit (Gloo's teardown, a loaded machine) than the peer whose transport error it caused.
        primary = [r for r in crashed if r.signal not in ("SIGTERM", "SIGKILL") or _own_error(r)] or crashed
        # Timestamps without an error file are whole seconds; within one second, a rank whose
        # error is the *consequence* of losing a peer (connection closed, size mismatch) is not first.
        first = min(primary, key=lambda r: (int(r.failure_time or 2 ** 62), _secondary(r),
                                            r.failure_time or float("inf"), r.rank))
        return {"kind": "crashed", "rank": first.rank, "host": first.host, "phase": first.phase,
                "exitcode": first.exitcode, "signal": first.signal, "pid": first.pid,
                "message": (first.error or {}).get("message") or _last_lines(first.stderr_tail, 1)
                or f"exit code {first.exitcode}",
                "traceback": (first.error or {}).get("traceback") or _last_lines(first.stderr_tail, 15),
                "others": [r.rank for r in crashed if r is not first]}
    exited_early = [r for r in res.ranks if not r.reported and r.exitcode == 0]
    if exited_early:
        r = exited_early[0]
        return {"kind": "exited-without-result", "rank": r.rank, "host": r.host, "phase": r.phase,
                "exitcode": 0, "message": "exited with code 0 without reporting a result",
                "others": [x.rank for x in exited_early[1:]]}
    missing = [r for r in res.ranks if not r.reported]
    if missing:
        def progress(r: RankOutcome) -> int:
            return len(r.phases)

        least = min(progress(r) for r in missing)
        laggards = [r for r in missing if progress(r) == least]
        first = laggards[0]
        kind = "never-started" if least == 0 else "stuck"
        return {"kind": kind, "rank": first.rank, "host": first.host, "phase": first.phase,
                "ranks": [r.rank for r in laggards], "phases": {r.rank: r.phase for r in missing},
                "message": ("never reported any phase" if least == 0 else f"stuck in phase {first.phase!r}")
                + (" (deadline reached)" if res.timed_out else " (interrupted)" if res.interrupted else "")}
    return None


_PEER_LOSS = ("connection closed by peer", "connection reset", "broken pipe", "doesn't match expected size",
              "timed out waiting", "socket timeout", "connection refused", "ncclremoteerror", "remote process exited")


def _own_error(r: RankOutcome) -> bool:
    """The rank recorded an exception of its own before it ended (not the launcher's stop signal reaching Python:
    torch elastic's SignalException, a KeyboardInterrupt)."""
    msg = str((r.error or {}).get("message") or "")
    return bool(msg) and not msg.startswith(("SignalException", "KeyboardInterrupt", "SystemExit"))


def _secondary(r: RankOutcome) -> int:
    """1 when this rank's failure reads like the consequence of another rank's (lost peer)."""
    text = f"{(r.error or {}).get('message') or ''}\n{r.stderr_tail[-3000:]}".lower()
    return int(any(p in text for p in _PEER_LOSS))


def _last_lines(text: str, n: int) -> str:
    lines = [ln for ln in (text or "").splitlines() if ln.strip()]
    return "\n".join(lines[-n:])
