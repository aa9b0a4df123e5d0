"""The `cuda` section: does the CUDA driver initialise in the environment this job will have?

`cuInit(0)` is the first call every CUDA program makes (torch's lazy init does it at the first
`.cuda()`); its result names the problems NVML cannot see: the fabric manager not running on an
NVSwitch system (802), a stub libcuda from the toolkit first on LD_LIBRARY_PATH (34), no device visible
under this CUDA_VISIBLE_DEVICES (100), a forward-compatibility library that does not fit (803/804), a
wedged driver (999). It creates no context (no GPU memory, no compute-mode conflict), and runs in a
thread under a deadline: a broken driver can block. The library is found as CUDA programs find it
(`libcuda.so.1` through the dynamic loader), and its path is recorded.

Tests give `Sources.cuda` a fake libcuda with the same C functions (tests/fake_cuda.py).
"""
from __future__ import annotations

import ctypes
import threading
from typing import Any, Optional

import os

from ddpdoctor.gather import BOOL, INT, STR, Sources, gatherer

FIELDS = {"init_result": INT, "init_error": STR, "device_count": INT, "driver_version": INT, "library": STR,
          "unversioned_link": BOOL, "ld_cache_libcuda": BOOL}


def _loaded_path(src: Sources) -> Optional[str]:
    try:
        with open(src.path("/proc/self/maps"), encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if "libcuda.so" in line:
                    return line.split()[-1]
    except OSError:
        pass
    return None


def unversioned_link(src: Sources, library: str) -> bool:
    """Whether `libcuda.so` (the name `-lcuda` links against) exists beside the loaded driver library."""
    return os.path.exists(src.path(os.path.join(os.path.dirname(library), "libcuda.so")))


def ld_cache_lists(src: Sources, name: str = "libcuda.so") -> Optional[bool]:
    """Whether the dynamic loader's cache (/etc/ld.so.cache, what `ldconfig -p` prints) names a library whose name
    starts with `name`: its string table holds every cached soname and path. None when the cache cannot be read."""
    try:
        with open(src.path("/etc/ld.so.cache"), "rb") as fh:
            data = fh.read(64 << 20)
    except OSError:
        return None
    return name.encode() in data


def probe(lib: Any) -> dict:
    """cuInit(0), then the device count and driver version when it succeeded. Raises nothing."""
    out: dict = {}
    code = int(lib.cuInit(0))
    out["init_result"] = code
    if code != 0:
        name = ctypes.c_char_p()
        try:
            if int(lib.cuGetErrorName(code, ctypes.byref(name))) == 0 and name.value:
                out["init_error"] = name.value.decode(errors="replace")
        except Exception:  # noqa: BLE001 - the name is a nicety
            pass
        return out
    count, version = ctypes.c_int(), ctypes.c_int()
    if int(lib.cuDeviceGetCount(ctypes.byref(count))) == 0:
        out["device_count"] = count.value
    if int(lib.cuDriverGetVersion(ctypes.byref(version))) == 0:
        out["driver_version"] = version.value
    return out


@gatherer("cuda", fields=FIELDS)
def gather_cuda(src: Sources) -> dict:
    lib = getattr(src, "cuda", None)
    if lib is None:
        try:
            lib = ctypes.CDLL("libcuda.so.1")
        except OSError as exc:
            return {"unavailable": f"no CUDA driver library (libcuda.so.1): {exc}"}
    box: dict = {}

    def run() -> None:
        try:
            box["section"] = probe(lib)
        except Exception as exc:  # noqa: BLE001 - a broken library is a fact, not a crash
            box["section"] = {"error": f"{type(exc).__name__}: {exc}"}

    worker = threading.Thread(target=run, name="ddpdoctor-cuinit", daemon=True)
    worker.start()
    worker.join(src.timeout_s)
    if worker.is_alive():
        return {"error": f"cuInit did not return within {src.timeout_s:g} s; the driver may be wedged "
                         "(look for 'NVRM: Xid' in `dmesg`)"}
    section = box["section"]
    path = None if getattr(src, "cuda", None) is not None else _loaded_path(src)
    if path:
        section["library"] = path
        # whether the link name `libcuda.so` sits beside the loaded libcuda.so.1: what a compiler's `-lcuda` needs
        # (Triton links its kernel launcher with gcc ... -lcuda, torch.compile's default backend; "/usr/bin/ld:
        # cannot find -lcuda", pytorch/pytorch#103417, state-spaces/mamba#123)
        section["unversioned_link"] = unversioned_link(src, path)
        # whether ldconfig's cache lists libcuda: Triton before 2.2 finds the driver only through `ldconfig -p` (GPU040)
        cached = ld_cache_lists(src)
        if cached is not None:
            section["ld_cache_libcuda"] = cached
    return section
