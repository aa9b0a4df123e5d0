"""What `ddpdoctor run`'s parent reads about a rank and its host when it needs a cause: CPU time and
state of a process, its CPU affinity, the host's load and steal, /dev/shm, the GPUs' throttle
reasons (through the `check` gatherer). Every reader returns None (or leaves a key out) when it
cannot read; none raises, none blocks for long.
"""
from __future__ import annotations

import os
import shutil
import time
from typing import Dict, List, Optional, Tuple

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def proc_cpu_s(pid: int, tid: Optional[int] = None) -> Optional[float]:
    """utime + stime of a process (or one of its threads), in seconds."""
    path = f"/proc/{pid}/task/{tid}/stat" if tid else f"/proc/{pid}/stat"
    try:
        with open(path, "rb") as fh:
            data = fh.read()
        rest = data[data.rindex(b")") + 2:].split()
        return (int(rest[11]) + int(rest[12])) / CLK_TCK
    except (OSError, ValueError, IndexError):
        return None


def thread_state(pid: int, tid: Optional[int] = None) -> Optional[str]:
    """R (running or runnable), S (sleeping), D (uninterruptible: I/O), T, Z ..."""
    path = f"/proc/{pid}/task/{tid or pid}/stat"
    try:
        with open(path, "rb") as fh:
            data = fh.read()
        return data[data.rindex(b")") + 2:].split()[0].decode()
    except (OSError, ValueError, IndexError):
        return None


def runq_wait_s(pid: int) -> Optional[float]:
    """Seconds the threads of `pid` have spent runnable but waiting for a CPU, all of them together
    (/proc/PID/task/*/schedstat, second field, ns: the scheduler's run-queue delay). None if unreadable."""
    total, seen = 0, False
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as fh:
                total += int(fh.read().split()[1])
            seen = True
        except (OSError, ValueError, IndexError):
            continue
    return total / 1e9 if seen else None


def thread_schedstat(pid: int) -> Optional[Dict[int, Tuple[int, int]]]:
    """tid -> (ns on a CPU, ns runnable but waiting for one) of every thread of `pid`, cumulative since
    the thread started (/proc/PID/task/TID/schedstat, first and second fields; kernel
    Documentation/scheduler/sched-stats.rst). None if the process cannot be read."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    out: Dict[int, Tuple[int, int]] = {}
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as fh:
                f = fh.read().split()
            out[int(tid)] = (int(f[0]), int(f[1]))
        except (OSError, ValueError, IndexError):
            continue
    return out or None


def sample_states(pid: int, n: int = 10, every_s: float = 0.02) -> dict:
    """The main thread's state `n` times: the share found running or runnable, and the CPU it used."""
    states: List[str] = []
    cpu0, t0 = proc_cpu_s(pid, pid), time.time()
    for i in range(n):
        st = thread_state(pid)
        if st is None:
            break
        states.append(st)
        if i + 1 < n:
            time.sleep(every_s)
    cpu1, t1 = proc_cpu_s(pid, pid), time.time()
    out: dict = {"samples": len(states)}
    if states:
        out["running_frac"] = round(sum(s == "R" for s in states) / len(states), 3)
        out["sleeping_frac"] = round(sum(s in ("S", "D") for s in states) / len(states), 3)
        out["states"] = "".join(states)
    if cpu0 is not None and cpu1 is not None and t1 > t0:
        out["main_cpu_frac"] = round((cpu1 - cpu0) / (t1 - t0), 3)
    return out


def sample_many(pids: List[int], n: int = 10, every_s: float = 0.02) -> Dict[int, dict]:
    """sample_states for several processes at once (one pass of n samples over all of them)."""
    states: Dict[int, List[str]] = {pid: [] for pid in pids}
    cpu0 = {pid: proc_cpu_s(pid, pid) for pid in pids}
    t0 = time.time()
    for i in range(n if pids else 0):
        for pid in pids:
            st = thread_state(pid)
            if st is not None:
                states[pid].append(st)
        if i + 1 < n:
            time.sleep(every_s)
    t1 = time.time()
    out = {}
    for pid, sts in states.items():
        d: dict = {"samples": len(sts)}
        if sts:
            d["running_frac"] = round(sum(x == "R" for x in sts) / len(sts), 3)
            d["sleeping_frac"] = round(sum(x in ("S", "D") for x in sts) / len(sts), 3)
            d["states"] = "".join(sts)
        c1 = proc_cpu_s(pid, pid)
        if cpu0.get(pid) is not None and c1 is not None and t1 > t0:
            d["main_cpu_frac"] = round((c1 - cpu0[pid]) / (t1 - t0), 3)
        out[pid] = d
    return out


def _task_stats(pid: int) -> Optional[Dict[int, tuple]]:
    """tid -> (state, utime + stime in ticks) of every thread of `pid` (/proc/PID/task/TID/stat)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    out = {}
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as fh:
                data = fh.read()
            rest = data[data.rindex(b")") + 2:].split()
            out[int(tid)] = (rest[0].decode(), int(rest[11]) + int(rest[12]))
        except (OSError, ValueError, IndexError):
            continue
    return out


def thread_demand(pids: List[int], n: int = 10, every_s: float = 0.03) -> Dict[int, dict]:
    """How many threads each process really runs on the CPUs, read from the kernel, not declared:
    `n` samples of /proc/PID/task/*/stat, one pass over all processes each.

    threads   its threads, all of them (DataLoader pin thread, Gloo/NCCL threads, OpenMP/MKL pools,
              the user's own threads: what OMP_NUM_THREADS or torch.get_num_threads() does not show)
    runnable  the mean number of its threads in state R (running or waiting for a CPU) per sample:
              what it asks of the scheduler
    busy      threads that used at least 5% of a CPU over the samples
    cpu       CPUs' worth of time it used over the samples (all threads)
    A process that cannot be read is left out."""
    first = {pid: _task_stats(pid) for pid in pids}
    t0 = time.monotonic()
    run = {pid: 0 for pid in pids}
    took = 0
    for i in range(n if pids else 0):
        if i:
            time.sleep(every_s)
        took += 1
        for pid in pids:
            st = _task_stats(pid) if i else first[pid]
            if st:
                run[pid] += sum(1 for state, _ in st.values() if state == "R")
    last = {pid: _task_stats(pid) for pid in pids}
    dt = max(time.monotonic() - t0, 1e-6)
    out = {}
    for pid in pids:
        a, b = first.get(pid), last.get(pid)
        if not a or not b:
            continue
        used = {tid: (b[tid][1] - a[tid][1]) / CLK_TCK / dt for tid in b if tid in a}
        out[pid] = {"threads": len(b), "runnable": round(run[pid] / max(1, took), 2),
                    "busy": sum(1 for v in used.values() if v >= 0.05), "cpu": round(sum(used.values()), 2)}
    return out


def affinity(pid: int) -> Optional[List[int]]:
    try:
        return sorted(os.sched_getaffinity(pid))
    except (OSError, AttributeError):
        return None


def nonvoluntary_switches(pid: int) -> Optional[int]:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for ln in fh:
                if ln.startswith("nonvoluntary_ctxt_switches:"):
                    return int(ln.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def cpu_times() -> Optional[Dict[str, int]]:
    """The host's aggregate CPU counters from /proc/stat (jiffies): total and steal."""
    try:
        with open("/proc/stat") as fh:
            first = fh.readline().split()
        vals = [int(x) for x in first[1:]]
        return {"total": sum(vals[:8]), "steal": vals[7] if len(vals) > 7 else 0}
    except (OSError, ValueError, IndexError):
        return None


def cpu_ticks(text: Optional[str] = None) -> Optional[Dict[int, Tuple[int, int]]]:
    """Per CPU: (all its time, its steal time), in USER_HZ ticks since boot, from /proc/stat's cpuN
    lines (user nice system idle iowait irq softirq steal guest guest_nice; guest time is already in
    user; kernel Documentation/filesystems/proc.rst, 1.8, "steal: involuntary wait"). `text`: a
    recorded /proc/stat instead of the live one. None if unreadable."""
    try:
        if text is None:
            with open("/proc/stat") as fh:
                text = fh.read(65536)
        out: Dict[int, Tuple[int, int]] = {}
        for line in text.splitlines():
            if not line.startswith("cpu"):
                if out:
                    break  # the cpu lines come first
                continue
            name, *vals = line.split()
            if name == "cpu" or not name[3:].isdigit():
                continue
            v = [int(x) for x in vals[:8]]
            out[int(name[3:])] = (sum(v), v[7] if len(v) > 7 else 0)
        return out or None
    except (OSError, ValueError):
        return None


def ticks_over(ticks: Optional[Dict[int, Tuple[int, int]]], cpus) -> Optional[Tuple[int, int]]:
    """(all, steal) ticks summed over `cpus` (a rank's affinity; None or empty: every CPU)."""
    if not ticks:
        return None
    use = [c for c in (cpus or ()) if c in ticks] or list(ticks)
    return sum(ticks[c][0] for c in use), sum(ticks[c][1] for c in use)


def host_load(prev: Optional[Dict[str, int]], now: Optional[Dict[str, int]]) -> dict:
    """Load per usable CPU and the share of CPU time stolen since `prev` (two cpu_times())."""
    out: dict = {}
    try:
        cpus = len(os.sched_getaffinity(0))
    except (OSError, AttributeError):
        cpus = os.cpu_count() or 1
    try:
        with open("/proc/loadavg") as fh:
            out["load1"] = float(fh.read().split()[0])
        out["load_per_cpu"] = round(out["load1"] / max(1, os.cpu_count() or cpus), 2)
    except (OSError, ValueError, IndexError):
        pass
    if prev and now and now["total"] > prev["total"]:
        out["steal_frac"] = round((now["steal"] - prev["steal"]) / (now["total"] - prev["total"]), 4)
    out["cpus"] = cpus
    return out


def usable_cpus(pid: int) -> Optional[float]:
    """CPUs a process can use: its affinity, capped by the cgroup quota."""
    aff = affinity(pid)
    n: Optional[float] = float(len(aff)) if aff else None
    try:
        from ..gather import Sources
        from ..gather.host import cgroup_cpu_limit

        quota = cgroup_cpu_limit(Sources()).get("quota_cpus")
        if quota and (n is None or quota < n):
            n = float(quota)
    except Exception:  # noqa: BLE001
        pass
    return n


def shm_free_mb() -> Optional[float]:
    try:
        return round(shutil.disk_usage("/dev/shm").free / 2 ** 20, 1)
    except OSError:
        return None


def gpu_throttle(deadline_s: float = 2.0) -> dict:
    """index -> {'throttle': [reason names]} for GPUs NVML says are throttled (the `check` gatherer,
    under a deadline); {} without NVML or GPUs."""
    try:
        from ..gather import Sources
        from ..gather.gpus import LiveNvml, gather_with

        sec = gather_with(LiveNvml(), Sources(), deadline_s)
    except Exception:  # noqa: BLE001
        return {}
    out = {}
    benign = {"GpuIdle", "ApplicationsClocksSetting", "SyncBoost", "DisplayClockSetting"}
    for d in sec.get("devices") or []:
        names = [n for n in ((d.get("throttle_reasons") or {}).get("names") or []) if n not in benign]
        if names:
            out[d.get("index")] = {"throttle": names, "name": d.get("name")}
    return out


def py_spy() -> Optional[str]:
    """The py-spy executable (the `native` extra), beside this interpreter or on PATH; None without it."""
    import sys

    here = os.path.join(os.path.dirname(sys.executable), "py-spy")
    if os.access(here, os.X_OK):
        return here
    return shutil.which("py-spy")


def native_stacks(pids: List[int], timeout_s: float = 5.0) -> Dict[int, str]:
    """`py-spy dump --native --pid PID` of each process, at once (threads), each bounded by timeout_s.
    The process is paused for the dump (ptrace), then goes on. {} without py-spy."""
    exe = py_spy()
    if not exe or not pids:
        return {}
    import subprocess
    import threading

    out: Dict[int, str] = {}

    def one(pid: int) -> None:
        try:
            res = subprocess.run([exe, "dump", "--native", "--pid", str(pid)], capture_output=True, text=True,
                                 timeout=timeout_s)
            text = (res.stdout or "") if res.returncode == 0 else f"py-spy: {(res.stderr or '').strip()[:300]}"
            out[pid] = text[-12000:]
        except (OSError, subprocess.SubprocessError) as exc:
            out[pid] = f"py-spy: {type(exc).__name__}: {exc}"

    threads = [threading.Thread(target=one, args=(pid,), daemon=True) for pid in pids]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout_s + 1)
    return out
