"""Has the `tokenizers` Rust library already used its thread pool in this process?

This is what decides D1/D2: its pthread_atfork handler disables parallelism in a forked child only
when the parent has used it, and with TOKENIZERS_PARALLELISM=true a child deadlocks instead. No
Python API exposes the flag, and the warning text changed twice before going silent in 0.22.2, so
we read real process state, most precise first:

1. the library's own statics `utils::parallelism::USED_PARALLELISM` and `PARALLELISM` (1 byte each),
   located through the .so's ELF symbol table and /proc/self/maps, read only when the address
   lies in a readable mapping of that file (Linux x86-64/aarch64, little-endian ELF64);
2. otherwise the rayon pool's threads (unnamed, 2 MiB stacks; see `threads.py`);
3. otherwise unknown (None). Never log text.
"""
from __future__ import annotations

import ctypes
import os
import struct
import sys
from typing import Optional

_USED = b"11parallelism16USED_PARALLELISM"
_PAR = b"11parallelism11PARALLELISM"
_cache: dict = {}  # path -> {"used": offset, "par": offset} or {} when not found


def _symbols(path: str) -> dict:
    """Offsets of the two statics from the ELF .symtab. Cached per file; ~3 ms the first time."""
    if path in _cache:
        return _cache[path]
    found: dict = {}
    try:
        with open(path, "rb") as fh:
            hdr = fh.read(64)
            if hdr[:4] != b"\x7fELF" or hdr[4] != 2 or hdr[5] != 1:
                _cache[path] = found
                return found
            (shoff,) = struct.unpack_from("<Q", hdr, 0x28)
            shentsize, shnum = struct.unpack_from("<HH", hdr, 0x3A)
            fh.seek(shoff)
            raw = fh.read(shentsize * shnum)
            secs = [struct.unpack_from("<IIQQQQIIQQ", raw, i * shentsize) for i in range(shnum)]
            for (_n, typ, _f, _a, off, size, link, _i, _al, _es) in secs:
                if typ != 2 or link >= len(secs):  # SHT_SYMTAB
                    continue
                fh.seek(off)
                symtab = fh.read(size)
                fh.seek(secs[link][4])
                strtab = fh.read(secs[link][5])
                for key, needle in (("used", _USED), ("par", _PAR)):
                    i = strtab.find(needle)
                    if i < 0:
                        continue
                    start = strtab.rfind(b"\x00", 0, i) + 1
                    packed = struct.pack("<I", start)
                    j = symtab.find(packed)
                    while j >= 0 and j % 24:
                        j = symtab.find(packed, j + 1)
                    if j < 0:
                        continue
                    _name, _info, _other, shndx, value, sym_size = struct.unpack_from("<IBBHQQ", symtab, j)
                    if shndx and value and sym_size == 1:
                        found[key] = value
    except (OSError, struct.error, IndexError):
        found = {}
    _cache[path] = found
    return found


def _load_base(path: str) -> tuple:
    """(base address, readable regions) of the mapped .so from /proc/self/maps."""
    real = os.path.realpath(path)
    base = None
    readable = []
    with open("/proc/self/maps") as fh:
        for line in fh:
            parts = line.split()
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            if len(parts) >= 6 and parts[5] == real:
                if base is None and int(parts[2], 16) == 0:
                    base = lo
                if "r" in parts[1]:
                    readable.append((lo, hi))
    return base, readable


def read_flags() -> Optional[dict]:
    """{"used": bool, "parallelism": int} from the library's statics, or None when unreadable.

    `parallelism` is 0 while the library follows TOKENIZERS_PARALLELISM, 1 once the fork handler
    (or set_parallelism(false)) disabled it in this process.
    """
    mod = sys.modules.get("tokenizers.tokenizers")
    path = getattr(mod, "__file__", None)
    if not path or not sys.platform.startswith("linux") or sys.byteorder != "little":
        return None
    syms = _symbols(path)
    if "used" not in syms:
        return None
    try:
        base, readable = _load_base(path)
    except OSError:
        return None
    if base is None:
        return None
    out = {}
    for key, off in syms.items():
        addr = base + off
        if not any(lo <= addr < hi for lo, hi in readable):
            return None
        out[key] = ctypes.c_uint8.from_address(addr).value
    used = out.get("used")
    if used not in (0, 1):
        return None  # not a bool: wrong symbol layout for this build; do not trust it
    return {"used": bool(used), "parallelism": out.get("par")}


def tokenizers_state(environ, rust_threads: Optional[int], usable_cpus: Optional[int]) -> dict:
    """The `runtime.tokenizers` facts."""
    if "tokenizers" not in sys.modules:
        return {"imported": False}
    mod = sys.modules["tokenizers"]
    state = {
        "imported": True,
        "version": getattr(mod, "__version__", None),
        "env": environ.get("TOKENIZERS_PARALLELISM"),
        "rayon_num_threads_env": environ.get("RAYON_NUM_THREADS") or environ.get("RAYON_RS_NUM_CPUS"),
        "rust_pool_threads": rust_threads,
        "used_parallelism": None,
        "disabled_by_fork": None,
        "evidence": "unknown",
    }
    flags = None
    try:
        flags = read_flags()
    except Exception:  # noqa: BLE001 - never let a fragile read break the doctor
        flags = None
    if flags is not None:
        state["used_parallelism"] = flags["used"]
        state["disabled_by_fork"] = flags.get("parallelism") == 1
        state["evidence"] = "library flag USED_PARALLELISM"
    elif rust_threads is not None:
        expected = _pool_size(state["rayon_num_threads_env"], usable_cpus)
        state["used_parallelism"] = rust_threads >= max(1, min(expected, 2))
        state["evidence"] = f"{rust_threads} rayon-like threads in /proc/self/task"
    return state


def _pool_size(env_value: Optional[str], usable_cpus: Optional[int]) -> int:
    try:
        return max(1, int(env_value)) if env_value else max(1, usable_cpus or 1)
    except ValueError:
        return max(1, usable_cpus or 1)
