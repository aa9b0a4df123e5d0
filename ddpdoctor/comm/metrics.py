"""Message sizes and bandwidth as nccl-tests defines them (nccl-tests doc/PERFORMANCE.md).

algbw = bytes / time. busbw corrects algbw by the traffic the algorithm must move, so it can be
compared with the hardware's peak whatever the rank count: for all_reduce busbw = algbw * 2(n-1)/n;
for all_gather / reduce_scatter (n-1)/n; for broadcast, reduce, send/recv 1.
"""
from __future__ import annotations

from ddpdoctor.facts.units import human  # noqa: F401 - re-exported: comm reports use it

import re
from typing import List

_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10, "M": 1 << 20, "MB": 1 << 20,
          "MIB": 1 << 20, "G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30}

DEFAULT_SIZES = [1 << 10 << (2 * i) for i in range(10)]  # 1 KiB, 4 KiB, ... 256 MiB


def parse_size(text: str) -> int:
    """'1K', '4MiB', '256M', '1024' -> bytes. Raises ValueError on anything else."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).upper() not in _UNITS:
        raise ValueError(f"not a size: {text!r} (try 1K, 4M, 256MiB)")
    n = int(float(m.group(1)) * _UNITS[m.group(2).upper()])
    if n <= 0:
        raise ValueError(f"size must be positive: {text!r}")
    return n


def parse_sizes(text: str) -> List[int]:
    """'1K,1M,16M' or a range '1K:256M' (x4 steps, like nccl-tests -b/-e/-f 4)."""
    text = text.strip()
    if ":" in text:
        lo, hi = (parse_size(t) for t in text.split(":", 1))
        if lo > hi:
            raise ValueError(f"empty size range {text!r}")
        out, n = [], lo
        while n <= hi:
            out.append(n)
            n *= 4
        return out
    sizes = sorted({parse_size(t) for t in text.split(",") if t.strip()})
    if not sizes:
        raise ValueError("no sizes given")
    return sizes


def bus_factor(op: str, world: int) -> float:
    """nccl-tests' correction from algorithm to bus bandwidth (doc/PERFORMANCE.md). On one rank an
    all_reduce moves nothing over a bus, so its busbw is 0, as nccl-tests prints."""
    world = max(1, world)
    if op == "all_reduce":
        return 2.0 * (world - 1) / world
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (world - 1) / world
    return 1.0


def bandwidth(op: str, nbytes: int, seconds: float, world: int) -> dict:
    """{"algbw_gbps", "busbw_gbps"} in GB/s (1e9 bytes/s, as nccl-tests prints)."""
    if seconds <= 0:
        return {"algbw_gbps": None, "busbw_gbps": None}
    alg = nbytes / seconds / 1e9
    return {"algbw_gbps": round(alg, 4), "busbw_gbps": round(alg * bus_factor(op, world), 4)}


def iters_for(nbytes: int, budget_bytes: int = 1 << 30, lo: int = 2, hi: int = 20) -> int:
    """Fewer timed iterations for big messages so a sweep stays within seconds."""
    return max(lo, min(hi, budget_bytes // max(1, nbytes)))
