"""Inside torchrun's agent (loaded by the attach like every Python process of the job): what the
launcher knows and `ddpdoctor run` cannot see from outside.

torch elastic's agent ends its workers through `PContext.close(death_sig)`: after a worker failed
(`SubprocessContext._poll` calls it itself), when the agent gets SIGTERM/SIGINT, or at the end.
Wrapped here, that call first
- writes `agent.PID.N.json` into the run directory: which workers had failed (local rank, global
  rank, pid, exit code, when torchrun saw it) and which it is about to end, with which signal;
- takes every live worker's Python stacks (faulthandler on the attach's stack signal, written from
  the signal handler: no GIL needed, even while the worker is blocked in a C++ collective), waiting
  at most STACK_WAIT_S for the dumps;
and afterwards records how each ended worker really exited (-15 SIGTERM, or -9 once torchrun's
SIGKILL followed after its timeout). The workers are not `ddpdoctor run`'s children, so this is the
only place where their exit codes are known. Nothing here raises into the agent.
"""
from __future__ import annotations

import json
import os
import signal
import time

STACK_WAIT_S = 2.0


def patch(mod, state) -> None:
    cls = getattr(mod, "PContext", None)
    if cls is None or getattr(cls.close, "__ddpdoctor_wrapped__", False):
        return
    orig = cls.close

    def close(self, death_sig=None, timeout=30):
        rec = None
        try:
            rec = _before(self, death_sig, state)
        except Exception:  # noqa: BLE001 - the agent's teardown goes on whatever happens here
            rec = None
        try:
            return orig(self, death_sig, timeout)
        finally:
            if rec is not None:
                try:
                    _after(self, rec, state)
                except Exception:  # noqa: BLE001
                    pass

    close.__ddpdoctor_wrapped__ = True
    close.__wrapped__ = orig
    cls.close = close


def _rank_of(ctx, local_rank) -> int:
    try:
        return int((ctx.envs.get(local_rank) or {}).get("RANK"))
    except (AttributeError, TypeError, ValueError):
        return None


def _sig_name(sig) -> str:
    try:
        return signal.Signals(int(sig)).name
    except (TypeError, ValueError):
        return str(sig)


def _before(ctx, death_sig, state):
    try:
        pids = ctx.pids()
    except Exception:  # noqa: BLE001
        return None
    handlers = getattr(ctx, "subprocess_handlers", None) or {}
    alive = {}
    for lr, pid in pids.items():
        h = handlers.get(lr)
        proc = getattr(h, "proc", None)
        if proc is not None and proc.poll() is not None:
            continue
        alive[lr] = pid
    failed = []
    for lr, f in (getattr(ctx, "_failures", None) or {}).items():
        failed.append({"local_rank": lr, "rank": _rank_of(ctx, lr), "pid": getattr(f, "pid", None),
                       "exitcode": getattr(f, "exitcode", None), "t": getattr(f, "timestamp", None)})
    if not alive and not failed:
        return None  # every worker ended on its own: nothing to tell
    sig = death_sig if death_sig is not None else getattr(signal, "SIGTERM")
    rec = {"agent_pid": os.getpid(), "t": time.time(), "event": "teardown", "signal": _sig_name(sig),
           "failed": failed, "targets": [{"local_rank": lr, "rank": _rank_of(ctx, lr), "pid": pid}
                                         for lr, pid in sorted(alive.items())],
           "reason": "a worker failed" if failed else "the agent was told to stop"}
    _write(rec, state)
    if alive:
        rec["stacks"] = _take_stacks(list(alive.values()), state)
        _write(rec, state)
    return rec


def _take_stacks(pids, state) -> dict:
    """Signal each worker to dump its stacks into stack.PID.txt; wait until each dump stops growing."""
    sig = getattr(state, "sig", None)
    if not sig:
        return {}
    sizes = {}
    for pid in pids:
        path = os.path.join(state.dir, f"stack.{pid}.txt")
        try:
            sizes[pid] = os.path.getsize(path)
        except OSError:
            continue  # this worker never loaded the recorder: no handler for the signal, do not send it
        try:
            os.kill(pid, sig)
        except OSError:
            sizes.pop(pid, None)
    t0 = time.time()
    pending, last = dict(sizes), {}
    while pending and time.time() - t0 < STACK_WAIT_S:
        time.sleep(0.05)
        for pid, size0 in list(pending.items()):
            try:
                size = os.path.getsize(os.path.join(state.dir, f"stack.{pid}.txt"))
            except OSError:
                continue
            if size > size0 and last.get(pid) == size:
                pending.pop(pid)
            last[pid] = size
    return {str(pid): {"offset": size0, "took_s": round(time.time() - t0, 3), "complete": pid not in pending}
            for pid, size0 in sizes.items()}


def _after(ctx, rec, state) -> None:
    handlers = getattr(ctx, "subprocess_handlers", None) or {}
    for t in rec.get("targets") or []:
        proc = getattr(handlers.get(t["local_rank"]), "proc", None)
        code = proc.poll() if proc is not None else None
        t["exitcode"] = code
    rec["closed_t"] = time.time()
    _write(rec, state)


_SERIAL = {}


def _write(rec: dict, state) -> None:
    """agent.PID.N.json: one file per teardown (an elastic agent may restart its workers)."""
    n = _SERIAL.setdefault(id(rec), len(_SERIAL))
    path = os.path.join(state.dir, f"agent.{os.getpid()}.{n}.json")
    with open(path + ".tmp", "w") as fh:
        json.dump(rec, fh)
    os.replace(path + ".tmp", path)
