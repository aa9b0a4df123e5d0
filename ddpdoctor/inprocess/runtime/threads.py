"""Threads of this process, read from /proc/self/task: how many, and which look like a Rust pool.

Why not just count: once torch has run an op its OpenMP pool adds threads too, so a bare count is
ambiguous (docs/faults.md, "What we measured"). The tokenizers rayon pool is recognisable by two facts we
can read without ptrace: its threads are unnamed (comm is the process name, e.g. `python`) and
they idle on a Rust std::thread stack, which is a 2 MiB anonymous mapping, where glibc/OpenMP and
Python threads get the 8 MiB RLIMIT_STACK default. /proc/self/task/<tid>/syscall gives the
stack pointer of a thread blocked in a syscall; /proc/self/maps gives the mapping it lies in.
"""
from __future__ import annotations

import bisect
import os
import threading
from typing import Optional

RUST_STACK_KIB = 2048  # std::thread default (RUST_MIN_STACK unset); rayon uses it


def os_thread_count() -> Optional[int]:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return None


def _maps() -> tuple:
    starts, regions = [], []
    with open("/proc/self/maps") as fh:
        for line in fh:
            parts = line.split(None, 5)
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            starts.append(lo)
            regions.append((lo, hi, parts[5].strip() if len(parts) > 5 else ""))
    return starts, regions


def rust_pool_threads(process_comm: Optional[str] = None) -> Optional[int]:
    """Number of unnamed threads idling on a 2 MiB anonymous stack (a Rust/rayon pool), or None
    when /proc cannot tell (not Linux, or /proc/self/task/*/syscall unreadable)."""
    try:
        tids = os.listdir("/proc/self/task")
        starts, regions = _maps()
        if process_comm is None:
            with open("/proc/self/comm") as fh:
                process_comm = fh.read().strip()
    except OSError:
        return None
    count = 0
    readable = 0
    for tid in tids:
        try:
            # Only sleeping threads: reading `syscall` of a running thread makes the kernel wait
            # until it leaves the CPU (wait_task_inactive), and OpenMP threads spin after each op.
            with open(f"/proc/self/task/{tid}/stat") as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
            if state not in ("S", "D"):
                readable += 1
                continue
            with open(f"/proc/self/task/{tid}/syscall") as fh:
                fields = fh.read().split()
            with open(f"/proc/self/task/{tid}/comm") as fh:
                comm = fh.read().strip()
        except OSError:
            continue
        readable += 1
        if len(fields) < 3 or not fields[0].lstrip("-").isdigit() or comm != process_comm:
            continue  # running, or named by its creator (torch, gloo, tokio name theirs)
        try:
            sp = int(fields[-2], 16)
        except ValueError:
            continue
        i = bisect.bisect_right(starts, sp) - 1
        if i < 0:
            continue
        lo, hi, name = regions[i]
        if not (lo <= sp < hi) or name:
            continue
        size_kib = (hi - lo) // 1024
        if RUST_STACK_KIB - 64 <= size_kib <= RUST_STACK_KIB + 64:
            count += 1
    return count if readable else None


def python_threads() -> list:
    """Names of live Python threads other than the main thread (these can hold locks at a fork)."""
    main = threading.main_thread()
    return sorted(t.name for t in threading.enumerate() if t is not main)


def python_thread_kinds() -> list:
    """What each live Python thread other than the main one is: its name, its class and the function
    it runs, so checks judge threads by what they are (tqdm's monitor sleeps; an upload thread holds locks)."""
    main = threading.main_thread()
    out = []
    for t in threading.enumerate():
        if t is main:
            continue
        target = getattr(t, "_target", None)
        out.append({"name": t.name, "class": f"{type(t).__module__}.{type(t).__qualname__}",
                    "target": (f"{getattr(target, '__module__', '')}.{getattr(target, '__qualname__', '')}"
                               if target is not None else None), "daemon": t.daemon})
    return sorted(out, key=lambda d: d["name"])
