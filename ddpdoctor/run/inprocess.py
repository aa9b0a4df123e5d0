"""The stall localizer without `ddpdoctor run`: `DoctorCallback(stall_after=...)`.

Each rank runs one watcher thread. It reads the recorder's state in this process (the same hooks
`ddpdoctor run` installs: collectives, optimizer steps, the DataLoader) and, once nothing has
moved for `stall_after` seconds, takes this process's stacks (sys._current_frames: the main thread
blocked in a C++ collective has released the GIL), writes its record into the job's own c10d store
once, and on rank 0 gathers the records (bounded wait) and judges them with the same RUN checks.
No store traffic happens while the job makes progress.
"""
from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from typing import Any, Optional

from . import recorder as agent


class _NullWriter:
    """In-process the state is read from the recorder directly: no beacon file."""

    def hot(self, *args) -> None:
        pass

    def phase(self, *args) -> None:
        pass

    def cold(self, state: dict) -> None:
        pass


def attach_in_process() -> bool:
    """Install the recorder's hooks in this process without a beacon file. False when `ddpdoctor run`
    already attached (its parent then localizes stalls) or when it could not attach."""
    S = agent.S
    if S.writer is not None and not isinstance(S.writer, _NullWriter):
        return False
    if S.writer is None:
        S.pid = os.getpid()
        S.lib = agent._lib_prefixes()
        S.writer = _NullWriter()
        agent._installed = True
        for name in agent.PATCHES:
            if name in sys.modules:
                agent._apply(name, sys.modules[name])
        dist = sys.modules.get("torch.distributed")
        c10d = sys.modules.get("torch.distributed.distributed_c10d")
        if dist is not None and c10d is not None:
            for op in agent.COLLECTIVES:  # the package re-exports the functions it imported
                wrapped = getattr(c10d, op, None)
                if getattr(wrapped, "__ddpdoctor_wrapped__", False) and getattr(dist, op, None) is getattr(
                        wrapped, "__wrapped__", None):
                    setattr(dist, op, wrapped)
        try:
            if dist is not None and dist.is_initialized():
                S.rank, S.world = dist.get_rank(), dist.get_world_size()
                S.phase = "run"
        except Exception:  # noqa: BLE001
            pass
    return not S.off


def _dump_text() -> str:
    """This process's threads in faulthandler's format, so the parent's reader parses both."""
    import threading as th

    main = th.main_thread().ident
    me = th.get_ident()
    out = []
    for ident, frame in sys._current_frames().items():
        if ident == me:
            continue
        out.append(f"{'Current thread' if ident == main else 'Thread'} 0x{ident:016x} (most recent call first):")
        f = frame
        while f is not None:
            out.append(f'  File "{f.f_code.co_filename}", line {f.f_lineno} in {f.f_code.co_name}')
            f = f.f_back
        out.append("")
    return "\n".join(out)


def own_facts() -> dict:
    """This rank as `ddpdoctor run` sees a process: info, beacon state, stack dump."""
    S = agent.S
    env = {k: os.environ.get(k) for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE") if os.environ.get(k) is not None}
    return {"pid": os.getpid(), "alive": True,
            "info": {"kind": "proc", "host": socket.gethostname(), "lib": list(S.lib), "ppid": os.getppid(),
                     "main_thread": threading.main_thread().ident, "env": env},
            "beacon": {"pid": S.pid, "rank": S.rank, "world": S.world, "phase": S.phase, "pt": S.pt, "pl": S.pl,
                       "step": S.step, "st": S.st, "sd": [S.sdm] if S.sdm else [], "coll": dict(S.coll, seq=S.seq, t=S.pt, **{"in": S.in_coll}) if S.coll else None, "seq": S.seq, "dl": S.dl,
                       "pgt": S.pg_timeout, "t": max(S.t, S.st or 0.0)},  # a step's end is progress (beacon.read)
            "dump": _dump_text()}


class StallWatch:
    """One daemon thread per rank; `reports` holds rank 0's verdicts (a Report per stall)."""

    def __init__(self, stall_after: float, log: Any = True, peer_timeout_s: float = 10.0, poll_s: float = 0.5):
        if not stall_after > 0:
            raise ValueError(f"stall_after must be > 0, not {stall_after!r}")
        self.stall_after = float(stall_after)
        self.log = log
        self.peer_timeout_s = peer_timeout_s
        self.poll_s = poll_s
        self.reports: list = []
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._fired = 0
        self.missing: list = []  # ranks whose record did not arrive within peer_timeout_s (last stall)

    def start(self) -> "StallWatch":
        if not attach_in_process():
            return self
        agent.S.t = time.time()
        self._thread = threading.Thread(target=self._loop, name="ddpdoctor-stall-watch", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        last_fired_for = None
        while not self._stop.wait(self.poll_s):
            try:
                last = max(agent.S.t, agent.S.st or 0.0)  # an unsampled step's end is progress (it sets st alone)
                idle = time.time() - last
                if idle >= self.stall_after and last != last_fired_for and agent.S.phase != "exit":
                    last_fired_for = last
                    self._fire(idle)
            except Exception as exc:  # noqa: BLE001 - the watcher never disturbs the job
                self._write(f"ddpdoctor stall watch: internal error ({type(exc).__name__}: {exc}); stopping")
                return

    def _fire(self, idle: float) -> None:
        from ..inprocess.runtime.peers import _store_and_group

        self._fired += 1
        store, rank, world = _store_and_group()
        facts = own_facts()
        if store is None or world <= 1:
            records = [facts]
        else:
            prefix = f"ddpdoctor/stall/{self._fired}/"
            store.set(prefix + str(rank), json.dumps(facts, default=str))
            if rank != 0:
                return
            records = self._gather(store, prefix, world)
        self._judge(records, idle)

    def _gather(self, store, prefix: str, world: int) -> list:
        """Every rank's record (bounded by peer_timeout_s): one blocking wait on all the keys and one
        multi_get, on a client of this thread's own so that the job's own store requests (the main
        thread's) are never held up behind the wait. Ranks that did not report are left out."""
        from ..gather.storekeys import own_client
        from ..inprocess.runtime.peers import gather_ranks

        with own_client(store) as client:  # its connection closes when the gather is done
            got, self.missing = gather_ranks(client, prefix, world, self.peer_timeout_s)
        return [got[r] for r in sorted(got)]

    def _judge(self, records: list, idle: float) -> None:
        from ..model.registry import REGISTRY
        from ..pipeline.judge import judge
        from ..pipeline.runner import load_all
        from ..pipeline.snapshot import Snapshot
        from . import section
        from .text import render_findings

        load_all()
        sec = section.build(records, time.time(), stall={"idle_s": round(idle, 1), "stall_after_s": self.stall_after},
                            stall_after=self.stall_after, launcher="in-process")
        only = {s.id for s in REGISTRY.values() if s.family == "run"} - {"RUN012", "RUN010", "RUN011"}
        report = judge(Snapshot(sections={"run": sec}), command="run", only=only, when="run")
        report.extra["run"] = {"ranks_reported": [r.get("beacon", {}).get("rank") for r in records],
                               "ranks_missing": list(self.missing)}
        self.reports.append(report)
        self._write(render_findings(report.findings, f"ddpdoctor DoctorCallback: stall: no progress for {idle:.0f} s",
                                    sec))

    def _write(self, text: str) -> None:
        if self.log is False or self.log is None:
            return
        if callable(self.log):
            self.log(text)
        else:
            sys.stderr.write(text + "\n")
            sys.stderr.flush()
