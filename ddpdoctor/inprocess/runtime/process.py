"""Process-level runtime facts: how this process was started, distributed state, threads, CUDA."""
from __future__ import annotations

import multiprocessing
import os
import sys
import time
from typing import Mapping, Optional

from ddpdoctor.inprocess.runtime import threads as _threads


def default_start_method() -> str:
    if sys.platform.startswith("linux"):
        return "forkserver" if sys.version_info >= (3, 14) else "fork"
    return "spawn"


def start_method() -> tuple:
    """(effective start method for new processes, whether it was set explicitly or inherited).

    allow_none=True so that asking never fixes the default context as a side effect. A process
    started by multiprocessing with spawn inherits 'spawn' (spawn.prepare sets it), which is why
    DataLoader workers inside an mp.spawn rank are spawned, not forked.
    """
    try:
        method = multiprocessing.get_start_method(allow_none=True)
    except Exception:  # noqa: BLE001
        method = None
    return (method or default_start_method()), method is not None


def seconds_since_start() -> Optional[float]:
    """Age of this process from /proc/self/stat (field 22, in clock ticks since boot)."""
    try:
        with open("/proc/self/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        start_ticks = int(fields[19])
        with open("/proc/uptime") as fh:
            uptime = float(fh.read().split()[0])
        return round(uptime - start_ticks / os.sysconf("SC_CLK_TCK"), 3)
    except (OSError, ValueError, IndexError):
        return None


def _cmdline() -> list:
    try:
        with open("/proc/self/cmdline", "rb") as fh:
            return [p.decode(errors="replace") for p in fh.read().split(b"\0") if p]
    except OSError:
        return list(sys.argv)


def started_by() -> Optional[str]:
    """'multiprocessing.spawn' / 'multiprocessing.forkserver' / 'multiprocessing.fork' or None."""
    cmd = " ".join(_cmdline())
    if "spawn_main" in cmd or "multiprocessing.spawn" in cmd:
        return "multiprocessing.spawn"
    if "forkserver" in cmd:
        return "multiprocessing.forkserver"
    try:
        parent = multiprocessing.parent_process()
    except Exception:  # noqa: BLE001
        parent = None
    if parent is not None:
        return "multiprocessing.fork"
    return None


def pg_timeout_s() -> Optional[float]:
    """The timeout the default process group really got (its backend's options), in seconds: not
    what the script asked for (transformers 5 does not pass ddp_timeout on CPU with use_cpu)."""
    try:
        import torch
        from torch.distributed import distributed_c10d as c10d

        pg = c10d._get_default_group()
        for dev in ("cpu", "cuda"):
            try:
                backend = pg._get_backend(torch.device(dev))
            except Exception:  # noqa: BLE001 - no backend for that device
                continue
            timeout = getattr(getattr(backend, "options", None), "_timeout", None)
            if timeout is not None and hasattr(timeout, "total_seconds"):
                return float(timeout.total_seconds())
    except Exception:  # noqa: BLE001
        return None
    return None


_GROUP: dict = {}  # wall times of the default group's start, noted by `ddpdoctor run`'s init_process_group wrapper


def note_group_start(entered: float, up: float) -> dict:
    """Called by `ddpdoctor run`'s init_process_group wrapper (run/recorder.py): when this rank entered
    init_process_group (the first moment it can wait under the group's timeout: the rendezvous) and
    when the group was up. torch keeps no such time: distributed_c10d's _World holds the groups, their
    names and backends, not when they began (torch 2.13 torch/distributed/distributed_c10d.py).
    Returns the record itself: the recorder's collective wrapper keeps in it the longest this rank
    waited in one collective call (`coll_wait_max_s`, `coll_wait_max_op`), the wait a timeout ends."""
    _GROUP.update(entered_wall=float(entered), up_wall=float(up))
    return _GROUP


def group_start() -> dict:
    """{"entered_wall", "up_wall"[, "coll_wait_max_s", "coll_wait_max_op"]} where ddpdoctor saw this process
    start its group, else {}."""
    return dict(_GROUP)


def distributed_facts() -> dict:
    torch = sys.modules.get("torch")
    if torch is None:
        return {"initialized": False, "torch_imported": False}
    try:
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            return {"initialized": False}
        out = {"initialized": True, "backend": str(dist.get_backend()), "rank": dist.get_rank(),
               "world_size": dist.get_world_size()}
        timeout = pg_timeout_s()
        if timeout is not None:
            out["timeout_s"] = timeout
        out.update(group_start())
        return out
    except Exception as exc:  # noqa: BLE001
        return {"initialized": False, "error": f"{type(exc).__name__}: {exc}"}


def cuda_facts() -> dict:
    """Never initialises CUDA: device details only when it already is."""
    torch = sys.modules.get("torch")
    if torch is None:
        return {"initialized": False}
    out: dict = {"initialized": False}
    try:
        out["initialized"] = bool(torch.cuda.is_initialized())
        if out["initialized"]:
            out["device_count"] = torch.cuda.device_count()
            out["current_device"] = torch.cuda.current_device()
            out["capability"] = list(torch.cuda.get_device_capability(out["current_device"]))
            out["bf16_supported"] = bool(torch.cuda.is_bf16_supported())
    except Exception as exc:  # noqa: BLE001
        out["error"] = f"{type(exc).__name__}: {exc}"
    return out


def thread_facts(environ: Mapping[str, str]) -> dict:
    torch = sys.modules.get("torch")
    out = {
        "os_threads": _threads.os_thread_count(),
        "python_threads": _threads.python_threads(),
        "python_thread_kinds": _threads.python_thread_kinds(),
        "omp_num_threads_env": environ.get("OMP_NUM_THREADS"),
        "mkl_num_threads_env": environ.get("MKL_NUM_THREADS"),
        "torch_num_threads": None,
    }
    if torch is not None:
        try:
            out["torch_num_threads"] = torch.get_num_threads()
        except Exception:  # noqa: BLE001
            pass
    try:
        out["rust_pool_threads"] = _threads.rust_pool_threads()
    except Exception:  # noqa: BLE001
        out["rust_pool_threads"] = None
    return out


def usable_cpus() -> Optional[int]:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


def torch_section() -> dict:
    """The `torch` section read in-process (torch is already imported in a training script), with
    the same keys as the subprocess gatherer, so static torch checks run inside preflight too.
    Never initialises CUDA or NCCL."""
    torch = sys.modules.get("torch")
    if torch is None:
        return {"unavailable": "torch is not imported in this process"}
    out: dict = {"version": torch.__version__, "in_process": True}
    try:
        out["cuda_build"] = torch.version.cuda
        out["hip_build"] = getattr(torch.version, "hip", None)
        if torch.cuda.is_initialized():
            out["cuda_available"] = True
            out["device_count"] = torch.cuda.device_count()
        else:
            # is_available()/device_count() call the CUDA runtime, and a process that did so can
            # no longer give CUDA to forked children (PYTORCH_NVML_BASED_CUDA_CHECK exists for this)
            out["cuda_available"] = None
            out["device_count"] = None
            out["cuda_probe"] = "not probed: CUDA is not initialised, and probing it would be a side effect"
        import torch.distributed as dist

        out["distributed_available"] = dist.is_available()
        out["gloo_available"] = dist.is_available() and dist.is_gloo_available()
        out["nccl_available"] = dist.is_available() and dist.is_nccl_available()
        out["mpi_available"] = dist.is_available() and dist.is_mpi_available()
        out["num_threads"] = torch.get_num_threads()
        import torch.multiprocessing as tmp

        out["sharing_strategy"] = tmp.get_sharing_strategy()
        devs = []
        if torch.cuda.is_initialized():
            for i in range(out["device_count"] or 0):
                p = torch.cuda.get_device_properties(i)
                dev = {"index": i, "name": p.name, "capability": [p.major, p.minor], "total_memory": p.total_memory}
                for k in ("pci_bus_id", "pci_device_id", "pci_domain_id"):  # ints, as gather.torchinfo
                    v = getattr(p, k, None)
                    dev[k] = v if isinstance(v, int) and not isinstance(v, bool) else None
                devs.append(dev)
        out["devices"] = devs
    except Exception as exc:  # noqa: BLE001
        out["error"] = f"{type(exc).__name__}: {exc}"
    return out


def process_facts(environ: Mapping[str, str]) -> dict:
    method, explicit = start_method()
    try:
        proc_name = multiprocessing.current_process().name
    except Exception:  # noqa: BLE001
        proc_name = None
    now = time.time()
    dist = distributed_facts()
    return {
        "pid": os.getpid(),
        "python": sys.version.split()[0],
        "seconds_since_start": seconds_since_start(),
        # from this rank's entry into init_process_group, where known: the set-up that a timeout governs
        "seconds_since_group": round(now - dist["entered_wall"], 3) if dist.get("entered_wall") else None,
        "wall_time": now,
        "start_method": method,
        "start_method_set": explicit,
        "mp_process_name": proc_name,
        "started_by": started_by(),
        "usable_cpus": usable_cpus(),
        "distributed": dist,
        "cuda": cuda_facts(),
        "threads": thread_facts(environ),
        "main_module": getattr(sys.modules.get("__main__"), "__file__", None),
    }


ACCELERATE_WRITES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_PORT")


def accelerate_multi_cpu() -> bool:
    """Has accelerate set up MULTI_CPU in this process? Then it wrote RANK, WORLD_SIZE, LOCAL_RANK,
    LOCAL_WORLD_SIZE (and MASTER_PORT) into os.environ, filling in defaults (LOCAL_RANK=0,
    LOCAL_WORLD_SIZE=1) that no launcher set (accelerate `state.py`)."""
    state = sys.modules.get("accelerate.state")
    shared = getattr(getattr(state, "PartialState", None), "_shared_state", None) or {}
    return "MULTI_CPU" in str(shared.get("distributed_type", ""))


def user_environ(environ: Optional[Mapping[str, str]] = None) -> tuple:
    """(the environment the launcher or user set, {name: value accelerate wrote}).

    Uses the copy taken when `ddpdoctor` was imported, when accelerate had not set up yet: a
    variable absent then and present now was written by accelerate, not by the launcher."""
    env = dict(os.environ if environ is None else environ)
    pkg = sys.modules.get("ddpdoctor")
    at_import = getattr(pkg, "_ENV_AT_IMPORT", None)
    written: dict = {}
    if at_import and not at_import[1] and accelerate_multi_cpu():
        before = at_import[0]
        for name in ACCELERATE_WRITES:
            if name not in before and name in env:
                written[name] = env.pop(name)
    return env, written


def tcp_listeners() -> tuple:
    """(every LISTEN port on this host, the ones this process holds), from one read of
    /proc/net/tcp{,6} (each listener's socket inode) and /proc/self/fd (the inodes we own)."""
    inodes: dict = {}
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(path) as fh:
                next(fh, None)
                for line in fh:
                    parts = line.split()
                    if len(parts) > 9 and parts[3] == "0A":
                        inodes[parts[9]] = int(parts[1].rsplit(":", 1)[1], 16)
        except (OSError, ValueError):
            continue
    own = set()
    try:
        for fd in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:[") and target[8:-1] in inodes:
                own.add(inodes[target[8:-1]])
    except OSError:
        pass
    return set(inodes.values()), own
