"""The `host` section: OS, CPUs the process may really use, memory, /dev/shm, limits, container."""
from __future__ import annotations

import os
import re
import platform
import socket
import sys
from typing import Iterator, Optional

from ddpdoctor.facts.gpu import version_tuple
from ddpdoctor.gather import BOOL, INT, LIST, NUM, OBJ, STR, Sources, gatherer


def cgroup_v2_files(src: Sources, name: str) -> Iterator[str]:
    """The non-empty contents of cgroup v2 file `name`: this process's own cgroup first, then the root.

    /proc/self/cgroup's "0::PATH" line names the process's cgroup in the unified hierarchy; inside a
    container with a private cgroup namespace PATH is "/" and the limit sits at /sys/fs/cgroup itself.
    """
    own = src.read("/proc/self/cgroup") or ""
    v2_path = ""
    for line in own.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and parts[0] == "0":
            v2_path = parts[2].strip()
    for rel in ([v2_path] if v2_path and v2_path != "/" else []) + [""]:
        text = src.read(f"/sys/fs/cgroup{rel}/{name}")
        if text:
            yield text


def cgroup_cpu_limit(src: Sources) -> dict:
    """CPU quota from cgroup v2 (cpu.max) or v1 (cfs_quota_us / cfs_period_us).

    A container started with `--cpus 2` still shows every host core in os.cpu_count() and even in
    sched_getaffinity; only the quota tells how many cores of time it really gets.
    """
    for text in cgroup_v2_files(src, "cpu.max"):
        quota, _, period = text.strip().partition(" ")
        if quota == "max":
            return {"version": 2, "quota_cpus": None}
        try:
            return {"version": 2, "quota_cpus": round(int(quota) / int(period or 100000), 2)}
        except ValueError:
            return {"version": 2, "quota_cpus": None, "raw": text.strip()}
    q = src.read("/sys/fs/cgroup/cpu/cpu.cfs_quota_us") or src.read("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us")
    p = src.read("/sys/fs/cgroup/cpu/cpu.cfs_period_us") or src.read("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us")
    if q is not None:
        try:
            quota, period = int(q), int(p or 100000)
            return {"version": 1, "quota_cpus": None if quota <= 0 else round(quota / period, 2)}
        except ValueError:
            pass
    return {"version": None, "quota_cpus": None}


V1_NO_LIMIT = 2 ** 62  # v1 writes PAGE_COUNTER_MAX * page size (about 2**63) for "no limit"


def cgroup_paths(text: str | None) -> tuple:
    """(v2 path, v1 memory-controller path) named by a /proc/PID/cgroup text ("hierarchy-ID:controllers:path"
    lines, cgroups(7)); "" where the line is absent. Shared with `run` (kills.py), which reads it for a rank."""
    v2, v1 = "", ""
    for line in (text or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            v2 = parts[2].strip()
        elif "memory" in parts[1].split(","):
            v1 = parts[2].strip()
    return v2, v1


def _own_cgroup_paths(src: Sources, proc_cgroup: str | None = None) -> tuple:
    """cgroup_paths of this process (/proc/self/cgroup), or of `proc_cgroup`, that file's text as read for
    another process."""
    return cgroup_paths(proc_cgroup if proc_cgroup is not None else src.read("/proc/self/cgroup"))


def _ancestors(path: str) -> list:
    """'/a/b/c' -> ['/a/b/c', '/a/b', '/a', '']: the cgroup and every ancestor up to the mount's root."""
    parts = [p for p in (path or "").split("/") if p and p != "(deleted)"]
    return ["/" + "/".join(parts[:i]) for i in range(len(parts), 0, -1)] + [""]


def cgroup_memory_fact(src: Sources, proc_cgroup: str | None = None) -> dict:
    """The memory limit that binds this process, read from its cgroup and every ancestor, with where it was read.
    `proc_cgroup`: the text of another process's /proc/PID/cgroup (read while it lived: `ddpdoctor run` explains a
    rank's SIGKILL after it is gone), whose cgroup is walked instead of this process's.

    Returns {"memory_max_bytes": int or None, "memory_max_state": "limit" | "none" | "unknown",
    "memory_max_from": the file that set the smallest limit}. cgroup v2: memory.max of the process's own cgroup
    (/proc/self/cgroup's "0::PATH") and of each ancestor; limits are hierarchical ("nothing can escape the resource
    restrictions imposed by the parent", torvalds/linux Documentation/admin-guide/cgroup-v2.rst, "Model of
    Delegation"; memory.max "exists on non-root cgroups. The default is 'max'"), so the smallest one binds. cgroup v1:
    memory.limit_in_bytes along the memory controller's path (Slurm's job/step cgroups sit below the mount's root,
    whose file shows no limit). "none" means files were read and none sets a limit; "unknown" that none could be read
    (no cgroup filesystem, or not readable here): the limit is then not known, not absent.
    """
    v2_path, v1_path = _own_cgroup_paths(src, proc_cgroup)
    found: list = []
    read_any = False
    for rel in _ancestors(v2_path):
        text = src.read(f"/sys/fs/cgroup{rel}/memory.max")
        if text is None:
            continue
        read_any = True
        text = text.strip()
        if text.isdigit():
            found.append((int(text), f"/sys/fs/cgroup{rel}/memory.max"))
    if not read_any:
        for rel in _ancestors(v1_path):
            name = f"/sys/fs/cgroup/memory{rel}/memory.limit_in_bytes"
            text = src.read(name)
            if text is None:
                continue
            read_any = True
            text = text.strip()
            if text.isdigit() and int(text) < V1_NO_LIMIT:
                found.append((int(text), name))
    if found:
        limit, where = min(found)
        return {"memory_max_bytes": limit, "memory_max_state": "limit", "memory_max_from": where}
    return {"memory_max_bytes": None, "memory_max_state": "none" if read_any else "unknown", "memory_max_from": None}


def cgroup_memory_limit(src: Sources) -> int | None:
    """The memory limit of this process's cgroup in bytes (see cgroup_memory_fact), None if none or unknown.

    `docker run -m 16g` (or a Kubernetes memory limit) caps the container, yet /proc/meminfo and psutil still show
    the host's memory; the kernel's OOM killer acts on the cgroup's limit, and tmpfs pages (/dev/shm) count
    against it (Documentation/admin-guide/cgroup-v2.rst, memory.stat "shmem").
    """
    return cgroup_memory_fact(src)["memory_max_bytes"]


def cgroup_pids(src: Sources) -> dict:
    """The task limit of this process's cgroup (v2 pids.max, v1 pids/pids.max) and the tasks it holds now
    (pids.current): every thread counts as a task, and fork or pthread_create fails with EAGAIN at the limit
    (Documentation/admin-guide/cgroup-v1/pids.rst; Kubernetes sets it from the kubelet's podPidsLimit)."""
    out: dict = {"pids_max": None, "pids_current": None}
    texts = list(cgroup_v2_files(src, "pids.max"))[:1]
    current = list(cgroup_v2_files(src, "pids.current"))[:1]
    if not texts:
        texts = [t for t in [src.read("/sys/fs/cgroup/pids/pids.max")] if t]
        current = [t for t in [src.read("/sys/fs/cgroup/pids/pids.current")] if t]
    if texts and texts[0].strip().isdigit():
        out["pids_max"] = int(texts[0].strip())
    if current and current[0].strip().isdigit():
        out["pids_current"] = int(current[0].strip())
    return out


def container_kind(src: Sources) -> str | None:
    if os.path.exists(src.path("/.dockerenv")):
        return "docker"
    if os.path.exists(src.path("/run/.containerenv")):
        return "podman"
    env = src.environ
    if env.get("KUBERNETES_SERVICE_HOST"):
        return "kubernetes"
    if env.get("SINGULARITY_CONTAINER") or env.get("APPTAINER_CONTAINER"):
        return "apptainer"
    if env.get("container"):
        return env.get("container")
    cg = src.read("/proc/1/cgroup") or ""
    for marker in ("docker", "kubepods", "containerd", "libpod", "lxc"):
        if marker in cg:
            return marker
    return None


def shm_facts(src: Sources) -> dict:
    path = src.path("/dev/shm")
    try:
        st = os.statvfs(path)
    except OSError as exc:
        return {"path": "/dev/shm", "exists": False, "error": exc.strerror or str(exc)}
    out = {"path": "/dev/shm", "exists": True, "size_bytes": st.f_frsize * st.f_blocks,
           "free_bytes": st.f_frsize * st.f_bavail}
    # whether this user may create files there: NCCL's SHM transport creates /dev/shm/nccl-XXXXXX with mkstemp
    # (NVIDIA/nccl src/os/linux.cc ncclOsShmOpen; shm_open(O_CREAT) in 2.7), and DataLoader's shared memory too
    try:
        out["mode"] = format(os.stat(path).st_mode & 0o7777, "04o")
        out["writable"] = os.access(path, os.W_OK | os.X_OK)
    except OSError:
        pass
    return out


def rlimits() -> dict:
    try:
        import resource
    except ImportError:  # Windows
        return {}
    out = {}
    # check33 (SYS012): RLIMIT_STACK, whose "unlimited" gives NCCL's threads glibc's 2 MB fallback stack
    for name in ("RLIMIT_NOFILE", "RLIMIT_MEMLOCK", "RLIMIT_NPROC", "RLIMIT_STACK"):
        if hasattr(resource, name):
            soft, hard = resource.getrlimit(getattr(resource, name))
            out[name] = {"soft": None if soft == resource.RLIM_INFINITY else soft,
                         "hard": None if hard == resource.RLIM_INFINITY else hard}
    return out


def _cpu_list(text: str) -> list:
    """'0-3,8,10-11' (the kernel's cpulist format) -> [0, 1, 2, 3, 8, 10, 11]."""
    out: list = []
    for part in (text or "").strip().split(","):
        lo, _, hi = part.partition("-")
        if lo.strip().isdigit():
            out.extend(range(int(lo), int(hi if hi.strip().isdigit() else lo) + 1))
    return out


def physical_cores(src: Sources) -> int | None:
    """The host's physical cores: distinct (physical_package_id, core_id) pairs over the present CPUs, as cpuinfo
    counts them (cpuinfo_get_cores_count, which torch's default intra-op thread count uses: c10/core/thread_pool.cpp
    TaskThreadPoolBase::defaultNumThreads). Host-wide: neither the affinity mask nor a cgroup CPU quota narrows it.
    None when sysfs does not say."""
    cpus = _cpu_list(src.read("/sys/devices/system/cpu/present") or "")
    pairs = set()
    for cpu in cpus[:4096]:
        pkg = (src.read(f"/sys/devices/system/cpu/cpu{cpu}/topology/physical_package_id") or "").strip()
        core = (src.read(f"/sys/devices/system/cpu/cpu{cpu}/topology/core_id") or "").strip()
        if pkg and core:
            pairs.add((pkg, core))
    return len(pairs) or None


def memory(src: Sources) -> dict:
    try:
        import psutil

        vm = psutil.virtual_memory()
        return {"total_bytes": vm.total, "available_bytes": vm.available}
    except Exception as exc:  # noqa: BLE001
        return {"error": f"{type(exc).__name__}: {exc}"}


def default_start_method() -> str:
    """multiprocessing's default without importing torch: fork on Linux before 3.14, forkserver
    on Linux from 3.14, spawn on macOS and Windows."""
    if sys.platform.startswith("linux"):
        return "forkserver" if sys.version_info >= (3, 14) else "fork"
    return "spawn"


def _unescape_mount(text: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal (\\040)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), text)


def mount_of(mountinfo: Optional[str], path: str) -> Optional[dict]:
    """{mount_point, fstype, source} of the mount that holds `path` (the longest mount point that is a prefix
    of it) from /proc/self/mountinfo (proc(5): '... mount_point options [optional...] - fstype source
    super_options'), or None."""
    best = None
    for line in (mountinfo or "").splitlines():
        head, sep, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if not sep or len(fields) < 5 or not rest:
            continue
        point = _unescape_mount(fields[4])
        inside = path == point or path.startswith(point.rstrip("/") + "/") or point == "/"
        if inside and (best is None or len(point) > len(best["mount_point"])):
            best = {"mount_point": point, "fstype": rest[0], "source": _unescape_mount(rest[1]) if len(rest) > 1 else None}
    return best


def triton_cache_fact(src: Sources) -> dict:
    """Where Triton (torch.compile's kernels, Triton kernels of libraries) keeps its compiled-kernel cache and the
    filesystem under it: TRITON_CACHE_DIR, else $TRITON_HOME (else the home directory)/.triton/cache
    (triton-lang/triton python/triton/runtime/cache.py @10852d2e default_cache_dir / FileCacheManager)."""
    env = src.environ
    raw = (env.get("TRITON_CACHE_DIR") or "").strip()
    if raw:
        path, origin = raw, "TRITON_CACHE_DIR"
    else:
        home = (env.get("TRITON_HOME") or "").strip()
        origin = "TRITON_HOME" if home else "home"
        path = os.path.join(home or env.get("HOME") or os.path.expanduser("~"), ".triton", "cache")
    path = os.path.normpath(os.path.abspath(path))
    mount = mount_of(src.read("/proc/self/mountinfo"), path) or {}
    out = {"path": path, "from": origin, "fstype": mount.get("fstype"), "mount_point": mount.get("mount_point"),
           "manager": (env.get("TRITON_CACHE_MANAGER") or "").strip() or None}
    # check18 (SYS010): whether this user can create the cache: Triton makes it with os.makedirs(exist_ok=True) on
    # first use (FileCacheManager.__init__), which needs write and search permission on the nearest existing directory
    probe = path
    while not os.path.isdir(src.path(probe)) and os.path.dirname(probe) != probe:
        probe = os.path.dirname(probe)
    if os.path.isdir(src.path(probe)):
        out["writable"] = os.access(src.path(probe), os.W_OK | os.X_OK)
        out["writable_at"] = probe
    return out


# The fields checks read, with their JSON types (the recorded-snapshot schema).
FIELDS = {
    "triton_cache": OBJ, "triton_cache.path": STR, "triton_cache.from": STR, "triton_cache.fstype": STR,
    "triton_cache.mount_point": STR, "triton_cache.manager": STR, "triton_cache.writable": BOOL,
    "triton_cache.writable_at": STR,
    "shm": OBJ, "shm.exists": BOOL, "shm.size_bytes": INT, "shm.free_bytes": INT, "shm.mode": STR, "shm.writable": BOOL, "usable_cpus": INT,
    "affinity_count": INT, "cpu_count": INT, "physical_cores": INT, "cgroup": OBJ, "cgroup.quota_cpus": NUM, "container": STR,
    "cgroup.memory_max_bytes": INT, "cgroup.memory_max_state": STR, "cgroup.memory_max_from": STR, "cgroup.pids_max": INT, "cgroup.pids_current": INT, "uid": INT, "cpu_vendor": STR,
    "ssh": OBJ, "ssh.client": STR, "ssh.keys": LIST, "ssh.keys[]": STR, "ssh.agent": BOOL, "ssh.config": BOOL,
    "rlimits": OBJ, "rlimits.*": OBJ, "rlimits.*.soft": INT, "rlimits.*.hard": INT,
    "default_start_method": STR, "default_sharing_strategy": STR,
    "torch_extensions": OBJ, "torch_extensions.path": STR, "torch_extensions.locks": LIST,
    "torch_extensions.locks[]": OBJ, "torch_extensions.locks[].path": STR, "torch_extensions.locks[].age_s": INT,
    "deepspeed_hostfile": OBJ, "deepspeed_hostfile.path": STR, "deepspeed_hostfile.hosts": OBJ,
    "deepspeed_hostfile.hosts.*": INT, "deepspeed_hostfile.errors": LIST, "deepspeed_hostfile.errors[]": STR,
    "deepspeed_env": OBJ, "deepspeed_env.paths": LIST, "deepspeed_env.paths[]": STR, "deepspeed_env.names": LIST,
    "deepspeed_env.names[]": STR,
    "launcher_tools": OBJ, "launcher_tools.found": OBJ, "launcher_tools.found.*": STR,
    "launcher_tools.missing": LIST, "launcher_tools.missing[]": STR,
    # issue 13: every recorded field has a declared type, so a hand-edited snapshot is rejected uniformly
    "hostname": STR, "os": STR, "kernel": STR, "platform": STR, "python": STR, "python_executable": STR,
    "affinity": LIST, "affinity[]": INT, "cgroup.version": INT, "memory": OBJ, "memory.total_bytes": INT,
    "memory.available_bytes": INT, "shm.path": STR, "loadavg": LIST, "loadavg[]": NUM, "cap_ipc_lock": BOOL,
    "cap_net_bind_service": BOOL, "unprivileged_port_start": INT,
    "accelerate_config": OBJ, "accelerate_config.path": STR, "accelerate_config.values": OBJ, "virtualization": STR,
    "nvidia_container_runtime": STR, "logind": OBJ, "logind.remove_ipc": BOOL, "logind.from": STR,
    # check17c (PKG017): the C library's version (confstr CS_GNU_LIBC_VERSION: "glibc 2.17" -> "2.17")
    "glibc": STR,
    # check23 (GPU036): the ROCm installed on this host ($ROCM_PATH or /opt/rocm, its .info/version)
    "rocm": OBJ, "rocm.path": STR, "rocm.version": STR,
}

def glibc_version():
    """"2.17" from os.confstr("CS_GNU_LIBC_VERSION") ("glibc 2.17"); None off glibc (musl, macOS, Windows)."""
    try:
        text = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (AttributeError, ValueError, OSError):
        return None
    name, _, version = text.partition(" ")
    return version if name == "glibc" and version else None


HYPERVISORS = (("QEMU", "kvm"), ("KVM", "kvm"), ("VMware", "vmware"), ("Microsoft Corporation", "hyperv"),
               ("Xen", "xen"), ("innotek", "virtualbox"), ("Amazon EC2", "amazon"), ("Google", "google"))


def virtualization(src: Sources):
    """The hypervisor this host runs under, or None on bare metal: the CPU's `hypervisor` flag (/proc/cpuinfo,
    set by the hypervisor's CPUID leaf), named by the DMI vendor (/sys/class/dmi/id/sys_vendor), as
    systemd-detect-virt does."""
    try:
        with open(src.path("/proc/cpuinfo"), encoding="ascii", errors="replace") as fh:
            flags = next((line for line in fh if line.startswith("flags")), "")
    except OSError:
        return None
    if " hypervisor" not in flags:
        return None
    vendor = ""
    for name in ("sys_vendor", "product_name"):
        try:
            with open(src.path(f"/sys/class/dmi/id/{name}"), encoding="utf-8", errors="replace") as fh:
                vendor += fh.read().strip() + " "
        except OSError:
            pass
    return next((kind for key, kind in HYPERVISORS if key in vendor), "unknown")


def accelerate_config(src: Sources):
    """The config file `accelerate launch` reads when no --config_file is given: $HF_HOME/accelerate/
    default_config.yaml, HF_HOME defaulting to $XDG_CACHE_HOME/huggingface or ~/.cache/huggingface
    (accelerate/commands/config/config_args.py, default_config_file). Its top-level `key: value` scalars
    only (no YAML import on the check path); None when there is no such file."""
    env = src.environ
    home = env.get("HF_HOME") or os.path.join(env.get("XDG_CACHE_HOME") or os.path.join(env.get("HOME") or "~", ".cache"),
                                              "huggingface")
    path = os.path.join(os.path.expanduser(home), "accelerate", "default_config.yaml")
    try:
        with open(src.path(path), encoding="utf-8", errors="replace") as fh:
            text = fh.read(1 << 16)
    except OSError:
        return None
    values = {}
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*):\s*(.*?)\s*$", line)
        if not m or not m.group(2) or m.group(2).startswith(("{", "[")):
            continue
        raw = m.group(2).strip("'\"")
        values[m.group(1)] = None if raw in ("null", "~") else int(raw) if re.fullmatch(r"-?\d+", raw) else raw
    return {"path": path, "values": values}


def rocm_install(src: Sources):
    """The ROCm installed on this host: $ROCM_PATH, else /opt/rocm (where AMD's packages install it and HIP looks
    for it: ROCm/clr hipamd's ROCM_PATH default), and the release in its .info/version ("6.2.4-120"), as AMD's
    installer writes it. None when there is none or it says no version."""
    root = (src.environ.get("ROCM_PATH") or "/opt/rocm").rstrip("/") or "/opt/rocm"
    text = src.read(root + "/.info/version", 256)
    version = (text or "").strip().splitlines()[0].strip() if (text or "").strip() else ""
    if not version or not re.match(r"^\d+\.\d+", version):
        return None
    return {"path": root, "version": version}


CAP_IPC_LOCK = 14  # include/uapi/linux/capability.h
CAP_NET_BIND_SERVICE = 10  # include/uapi/linux/capability.h


def _capability(src: Sources, bit: int):
    """Whether this process holds capability `bit` (CapEff in /proc/self/status, a hex mask). None if unknown."""
    try:
        with open(src.path("/proc/self/status"), encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) >> bit & 1)
    except (OSError, ValueError, IndexError):
        pass
    return None


def cap_ipc_lock(src: Sources):
    """Whether this process holds CAP_IPC_LOCK: the kernel lets it pin memory past RLIMIT_MEMLOCK
    (drivers/infiniband/core/umem.c, ib_umem_get). None if unknown."""
    return _capability(src, CAP_IPC_LOCK)


def cap_net_bind_service(src: Sources):
    """Whether this process may bind ports below net.ipv4.ip_unprivileged_port_start (the kernel's inet_bind
    checks CAP_NET_BIND_SERVICE). None if unknown."""
    return _capability(src, CAP_NET_BIND_SERVICE)


def unprivileged_port_start(src: Sources):
    """The lowest port an unprivileged process may bind (net.ipv4.ip_unprivileged_port_start, since Linux 4.11;
    1024 before it and by default). None when unreadable."""
    text = (src.read("/proc/sys/net/ipv4/ip_unprivileged_port_start") or "").strip()
    return int(text) if text.isdigit() else None


MAX_EXTENSION_LOCKS = 100


# torch's default extension root moved from <tempdir>/torch_extensions to the user's cache directory
# (torch._appdirs.user_cache_dir(appname='torch_extensions')) with pytorch/pytorch PR #34239 ("Fix cpp_ext build dir
# create permission", approved 2020-04-30, after 1.5.0's release on 2020-04-21): torch 1.6.0 is the first release
# with it. user_cache_dir (torch/_appdirs.py): Windows %LOCALAPPDATA%\\<app>\\<app>\\Cache, macOS
# ~/Library/Caches/<app>, else $XDG_CACHE_HOME or ~/.cache, then /<app>.
EXTENSIONS_CACHE_DIR_SINCE = (1, 6)


def _installed_torch_version() -> Optional[str]:
    try:
        from importlib import metadata  # noqa: PLC0415
        return metadata.version("torch")
    except Exception:  # noqa: BLE001 - not installed, or broken metadata: the version is then unknown
        return None


def torch_extension_root(env, system: str, torch_version=None) -> tuple:
    """(root, depth) of torch's JIT extension builds, as torch.utils.cpp_extension picks it, or (None, 0).

    TORCH_EXTENSIONS_DIR/<name>; else, before torch 1.6, <tempdir>/torch_extensions/<name>
    (tempfile.gettempdir(): TMPDIR, TEMP, TMP, else /tmp); from 1.6 the user's cache directory,
    get_default_build_root(): %LOCALAPPDATA%\\torch_extensions\\torch_extensions\\Cache on Windows,
    ~/Library/Caches/torch_extensions on macOS, $XDG_CACHE_HOME (~/.cache)/torch_extensions elsewhere,
    with a py<XY>_<cuda|rocm|cpu> level below it in recent releases."""
    root = env.get("TORCH_EXTENSIONS_DIR")
    if root:
        return root, 1
    release = version_tuple(torch_version)[:2]
    windows = system.startswith("win")
    if len(release) == 2 and release < EXTENSIONS_CACHE_DIR_SINCE:
        tmp = env.get("TMPDIR") or env.get("TEMP") or env.get("TMP") or (None if windows else "/tmp")
        return (os.path.join(tmp, "torch_extensions"), 1) if tmp else (None, 0)
    if windows:
        local = env.get("LOCALAPPDATA")
        return (os.path.join(local, "torch_extensions", "torch_extensions", "Cache"), 2) if local else (None, 0)
    home = env.get("HOME")
    if system == "darwin":
        return (os.path.join(home, "Library", "Caches", "torch_extensions"), 2) if home else (None, 0)
    cache = env.get("XDG_CACHE_HOME") or (os.path.join(home, ".cache") if home else None)
    return (os.path.join(cache, "torch_extensions"), 2) if cache else (None, 0)


def torch_extension_locks(src: Sources, system: Optional[str] = None, torch_version=None):
    """Lock files left in torch's JIT extension build directory, or None when it does not exist.

    torch.utils.cpp_extension builds into the root torch_extension_root names (TORCH_EXTENSIONS_DIR,
    else a per-platform cache directory, else before torch 1.6 the temporary directory), one
    directory per extension, guarded by a file `lock` there (FileBaton): every later build or load
    of that extension waits while it exists. `system` is sys.platform and `torch_version` the
    installed torch's, both taken from this interpreter unless given."""
    import time

    env = src.environ
    root, depth = torch_extension_root(env, system or sys.platform,
                                       torch_version if torch_version is not None else _installed_torch_version())
    if not root:
        return None
    real = src.path(root)
    if not os.path.isdir(real):
        return None
    locks = []
    now = time.time()
    try:
        levels = [real]
        for _ in range(depth):
            levels = [os.path.join(d, e) for d in levels for e in sorted(os.listdir(d))
                      if os.path.isdir(os.path.join(d, e))][:1000]
            for d in levels:
                lock = os.path.join(d, "lock")
                if os.path.exists(lock) and len(locks) < MAX_EXTENSION_LOCKS:
                    locks.append({"path": os.path.relpath(lock, real),
                                  "age_s": max(0, int(now - os.stat(lock).st_mtime))})
    except OSError:
        pass
    return {"path": root, "locks": locks}


DEEPSPEED_HOSTFILE = "/job/hostfile"  # deepspeed/launcher/runner.py DLTS_HOSTFILE, the --hostfile default


def deepspeed_hostfile(src: Sources):
    """DeepSpeed's default hostfile parsed as its runner parses it (runner.py _parse_hostfile: `host
    slots=N` lines, '#' comments; a bad or repeated entry stops the launch), or None when absent."""
    return read_hostfile(src, DEEPSPEED_HOSTFILE)


def read_hostfile(src: Sources, path: str):
    """The DeepSpeed hostfile at `path` parsed as runner.py's _parse_hostfile reads it: {path, hosts, errors}, or None
    when it cannot be read. Read only when it is a regular file (Sources.read_regular: robust24, a FIFO named by
    --hostfile held check until its gatherer's deadline, 16 s, and /dev/zero has no end)."""
    text = src.read_regular(path, 64 * 1024)
    if text is None:
        return None
    hosts: dict = {}
    errors: list = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.search(r"^(\S+)\s+slots=(\d+)", line)
        if not m:
            errors.append(f"bad entry: {line[:200]}")
        elif m.group(1) in hosts:
            errors.append(f"repeated host: {m.group(1)}")
        elif len(m.group(2)) > 18:  # robust24: int() refuses 4,300+ digits (CPython >= 3.11) and the whole launch's
            errors.append(f"bad entry: {line[:200]}")  # facts were lost; the runner's own int() fails on it too
        else:
            hosts[m.group(1)] = int(m.group(2))
    return {"path": path, "hosts": hosts, "errors": errors}


def deepspeed_env_file(src: Sources) -> dict:
    """The variables DeepSpeed's multi-node runner adds from its environment file: $DS_ENV_FILE (default
    .deepspeed_env) in the home directory and in the current directory, `KEY=value` lines (runner.py
    DEEPSPEED_ENVIRONMENT_NAME/PATHS). Names only, never the values (they are often tokens)."""
    name = src.environ.get("DS_ENV_FILE", ".deepspeed_env")
    dirs = [d for d in (src.environ.get("HOME"), os.getcwd()) if d]
    paths, names = [], set()
    for d in dict.fromkeys(dirs):
        path = name if os.path.isabs(name) else os.path.join(d, name)
        text = src.read(path, 64 * 1024)
        if text is None:
            continue
        paths.append(path)
        names.update(line.split("=", 1)[0].strip() for line in text.splitlines() if "=" in line and line.split("=", 1)[0].strip())
    return {"paths": paths, "names": sorted(names)}


def launcher_tools(src: Sources) -> dict:
    """The multi-node launchers DeepSpeed's runner shells out to: found on the PATH of the environment being
    judged (with where) or missing."""
    import shutil

    path = src.environ.get("PATH", os.defpath)
    where = {tool: shutil.which(tool, path=path) for tool in ("pdsh",)}
    return {"found": {t: p for t, p in where.items() if p}, "missing": sorted(t for t, p in where.items() if not p)}


SSH_KEY_NAMES = ("id_rsa", "id_ecdsa", "id_ecdsa_sk", "id_ed25519", "id_ed25519_sk", "id_dsa", "id_xmss")


def ssh_facts(src: Sources) -> dict:
    """What a launcher that reaches other hosts through ssh (DeepSpeed's pdsh runner sets PDSH_RCMD_TYPE=ssh;
    its runner first runs `ssh -o PasswordAuthentication=no <host> hostname`) has on this host: the ssh client
    on PATH, the default identity files in ~/.ssh (ssh_config(5) IdentityFile defaults; names only, never their
    contents), and whether an agent socket is offered (SSH_AUTH_SOCK)."""
    import shutil

    env = src.environ
    client = shutil.which("ssh", path=env.get("PATH", os.defpath))
    keys: list = []
    home = env.get("HOME")
    if home:
        for name in SSH_KEY_NAMES:
            if os.path.isfile(src.path(os.path.join(home, ".ssh", name))):
                keys.append(name)
    config = bool(home) and os.path.isfile(src.path(os.path.join(home, ".ssh", "config")))
    return {"client": client, "keys": keys, "agent": bool(env.get("SSH_AUTH_SOCK")), "config": config}


NVIDIA_CONTAINER_FILES = ("/etc/nvidia-container-runtime/config.toml",)


def nvidia_container_runtime(src: Sources) -> "str | None":
    """Where this host has the NVIDIA container runtime that starts GPU containers (nvidia-container-cli, from
    libnvidia-container, on PATH or in /usr/bin; else the toolkit's config file), or None. That CLI initialises
    NVML through an RPC service with a 10 s client timeout (NVIDIA/libnvidia-container src/rpc.c setup_client,
    src/driver.c driver_init_1_svc -> nvmlInit_v2), so how long the driver takes to bring the GPUs up decides
    whether a container starts."""
    import shutil

    path = src.environ.get("PATH", os.defpath) + os.pathsep + "/usr/bin"
    cli = shutil.which("nvidia-container-cli", path=path)
    if cli:
        return cli
    for f in NVIDIA_CONTAINER_FILES:
        if os.path.isfile(src.path(f)):
            return f
    return None


def cpu_vendor(src: Sources) -> "str | None":
    """The CPU's vendor_id from /proc/cpuinfo (AuthenticAMD, GenuineIntel, ...), or the architecture's name on a
    CPU without one (aarch64: "ARM"): NCCL's default peer-to-peer level depends on it (ncclTopoCheckP2p,
    src/graph/paths.cc, from ncclTopoCpuType)."""
    try:
        with open(src.path("/proc/cpuinfo")) as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() == "vendor_id":
                    return value.strip() or None
                if key.strip() == "CPU implementer":
                    return "ARM"
    except OSError:
        return None
    return None


# systemd/systemd man/logind.conf.xml @0099cd8d, RemoveIPC=: "Controls whether System V and POSIX IPC objects
# belonging to the user shall be removed when the user fully logs out ... Note that IPC objects of the root user
# and other system users are excluded ... Defaults to yes." Read from logind.conf and its drop-ins (logind.conf(5):
# drop-ins in /usr/lib, /usr/local/lib, /run and /etc/systemd/logind.conf.d, applied after the main file in file
# name order, a name in /etc hiding the same name in /run and the lib directories).
LOGIND_DROPIN_DIRS = ("/usr/lib/systemd/logind.conf.d", "/usr/local/lib/systemd/logind.conf.d",
                      "/run/systemd/logind.conf.d", "/etc/systemd/logind.conf.d")
_TRUE = ("1", "yes", "y", "true", "t", "on")
_FALSE = ("0", "no", "n", "false", "f", "off")


def _logind_remove_ipc(text: str):
    """The last RemoveIPC= value in the [Login] section of one logind.conf text: True, False or None."""
    section, value = None, None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
            continue
        key, sep, val = line.partition("=")
        if sep and section == "Login" and key.strip() == "RemoveIPC":
            v = val.strip().lower()
            value = True if v in _TRUE else False if v in _FALSE else value
    return value


def logind_facts(src: Sources) -> "dict | None":
    """systemd-logind's RemoveIPC as configured in files: {"remove_ipc": True/False/None (not set in any file),
    "from": the file that set it}; None when this host has no logind.conf and no drop-in (no systemd-logind)."""
    dropins = {}
    for d in LOGIND_DROPIN_DIRS:
        try:
            names = os.listdir(src.path(d))
        except OSError:
            continue
        for name in names:
            if name.endswith(".conf"):
                dropins[name] = os.path.join(d, name)  # later directories (/etc last) hide earlier ones
    files = ["/etc/systemd/logind.conf"] + [dropins[n] for n in sorted(dropins)]
    seen, value, origin = False, None, None
    for f in files:
        text = src.read(f, 65536)
        if text is None:
            continue
        seen = True
        v = _logind_remove_ipc(text)
        if v is not None:
            value, origin = v, f
    return {"remove_ipc": value, "from": origin} if seen else None


@gatherer("host", when=("check", "preflight"), fields=FIELDS)
def gather_host(src: Sources) -> dict:
    try:
        affinity = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    cpu_count = os.cpu_count()
    cg = cgroup_cpu_limit(src)
    cg.update(cgroup_memory_fact(src))
    cg.update(cgroup_pids(src))
    usable = len(affinity) if affinity else cpu_count
    if cg.get("quota_cpus") and usable:
        usable = max(1, min(usable, int(cg["quota_cpus"]) if cg["quota_cpus"] >= 1 else 1))
    load = None
    try:
        load = list(os.getloadavg())
    except (AttributeError, OSError):
        pass
    return {
        "hostname": socket.gethostname(),
        "os": platform.system(),
        "kernel": platform.release(),
        "platform": platform.platform(),
        "glibc": glibc_version(),
        "python": sys.version.split()[0],
        "python_executable": sys.executable,
        "cpu_count": cpu_count,
        "affinity": affinity,
        "affinity_count": len(affinity) if affinity else None,
        "cgroup": cg,
        "triton_cache": triton_cache_fact(src),
        "usable_cpus": usable,
        "memory": memory(src),
        "physical_cores": physical_cores(src),
        "shm": shm_facts(src),
        "rlimits": rlimits(),
        "cap_ipc_lock": cap_ipc_lock(src),
        "cap_net_bind_service": cap_net_bind_service(src),
        "unprivileged_port_start": unprivileged_port_start(src),
        "accelerate_config": accelerate_config(src),
        "rocm": rocm_install(src),
        "torch_extensions": torch_extension_locks(src),
        "deepspeed_hostfile": deepspeed_hostfile(src),
        "deepspeed_env": deepspeed_env_file(src),
        "launcher_tools": launcher_tools(src),
        "ssh": ssh_facts(src),
        "logind": logind_facts(src),
        "uid": os.getuid() if hasattr(os, "getuid") else None,
        "cpu_vendor": cpu_vendor(src),
        "virtualization": virtualization(src),
        "nvidia_container_runtime": nvidia_container_runtime(src),
        "container": container_kind(src),
        "loadavg": load,
        "default_start_method": default_start_method(),
        # torch.multiprocessing's default on Linux, known without importing torch.
        "default_sharing_strategy": "file_descriptor" if sys.platform.startswith("linux") else "file_system",
    }
