"""`--compare spawn`: the original question's launch, reproduced on purpose, bounded and orphan-free.

The user ran Trainer inside `torch.multiprocessing.spawn`, each child setting RANK, WORLD_SIZE,
MASTER_ADDR and MASTER_PORT by hand (no LOCAL_RANK, no OMP_NUM_THREADS). This module does exactly
that with the probe's workload, so the report can show what it costs on the user's own machine.
It is the one deliberate exception to "launch through torch's elastic launcher".

`run_bounded` (also used for the single-process DataParallel comparison) starts the command in
its own session, stops waiting at the deadline or shortly after every expected result file
exists, and then ends its whole tree (ddpdoctor.proctree): mp.spawn's children, their DataLoader
workers and the multiprocessing resource tracker, wherever they were re-parented.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from typing import Dict, List, Mapping, Optional

# Variables a launcher sets; stripped so the reproduction starts from a plain shell.
LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK",
                 "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT",
                 "TORCHELASTIC_ERROR_FILE", "TORCHELASTIC_MAX_RESTARTS", "DDPDOCTOR_LAUNCH_DIR",
                 "DDPDOCTOR_LAUNCH_TOKEN", "DDPDOCTOR_LAUNCH_RANK_ENV")


def plain_env(base: Optional[Mapping[str, str]] = None, extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    env = {k: v for k, v in (base if base is not None else os.environ).items() if k not in LAUNCHER_VARS}
    env.update(extra or {})
    pkg_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if pkg_root not in parts:
        env["PYTHONPATH"] = os.pathsep.join([pkg_root, *parts])
    return env


def run_bounded(cmd: List[str], env: Mapping[str, str], deadline_s: float, expect: List[str],
                teardown_s: float = 3.0, log_path: Optional[str] = None) -> dict:
    """Run `cmd` in its own session until it exits, the deadline passes, or `teardown_s` after all
    `expect`ed files exist. Then kill the session. Returns status, wall time and the log tail."""
    import threading

    from ddpdoctor import proctree
    from ddpdoctor.launch import Interrupted

    def _on_term(signum, frame):
        raise Interrupted(f"signal {signum}")

    old = None
    if threading.current_thread() is threading.main_thread():
        old = signal.signal(signal.SIGTERM, _on_term)  # so that `finally` below still ends the tree
    t0 = time.monotonic()
    log = open(log_path or os.devnull, "wb")  # noqa: SIM115 - closed below
    tree = proctree.Tree()
    proc = tree.popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                      new_session=True, die_with_parent=signal.SIGKILL)
    status, all_at = "running", None
    try:
        while True:
            rc = proc.poll()
            now = time.monotonic()
            if all(os.path.exists(p) for p in expect):
                all_at = all_at if all_at is not None else now
            if rc is not None:
                status = "ok" if rc == 0 or all_at is not None else "failed"
                break
            if all_at is not None and now - all_at > teardown_s:
                status = "ok"  # every rank reported; what hangs now is teardown (pytorch#190489)
                break
            if now - t0 > deadline_s:
                status = "timeout"
                break
            time.sleep(0.05)
    except BaseException:
        status = "interrupted"
        raise
    finally:
        # mp.spawn's children, their DataLoader workers and the resource tracker: all of them, by marker
        tree.stop(grace_s=0.0, first=signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=3)
        log.close()
        if old is not None:
            signal.signal(signal.SIGTERM, old)
    tail = ""
    if log_path:
        with contextlib.suppress(OSError):
            with open(log_path, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                fh.seek(max(0, fh.tell() - 4000))
                tail = fh.read().decode("utf-8", "replace")
    return {"status": status, "returncode": proc.returncode, "wall_s": round(time.monotonic() - t0, 3),
            "log_tail": tail}


# ------------------------------------------------------------------------ the reproduction

def _child(index: int, world: int, port: int, argv: List[str]) -> None:
    """What the original `create_transformer_trainer(rank, world_size, ...)` did, then train."""
    from ddpdoctor import proctree

    proctree.die_with_parent(signal.SIGKILL)  # our addition: die with the spawning process, never linger
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = str(port)
    os.environ["RANK"] = str(index)
    os.environ["WORLD_SIZE"] = str(world)
    from ddpdoctor.probe.worker import _leave, run_rank

    run_rank(argv)
    _leave(0)


def main(argv: Optional[List[str]] = None) -> None:
    """`python -m ddpdoctor.probe.spawn_mode NPROC PORT WORKER-ARGS...`"""
    argv = list(sys.argv[1:] if argv is None else argv)
    nproc, port, rest = int(argv[0]), int(argv[1]), argv[2:]
    import torch.multiprocessing as mp

    mp.spawn(_child, args=(nproc, port, rest), nprocs=nproc, join=True)


if __name__ == "__main__":
    main()
