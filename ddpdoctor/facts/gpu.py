"""What the GPU checks share: the devices this job will really use, named the way it will see them.

`view(snap)` resolves CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER once (ddpdoctor.facts.cuda_map)
and keeps only the visible devices and the pairs between them, so a finding never blames a GPU the
job cannot touch, and always says "cuda:1 = gpu:3" rather than an index the user must translate.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, List, Mapping, Optional

from ddpdoctor.facts.cuda_map import CudaMap, devices_of, label, resolve
from ddpdoctor.facts.topology import TOPOLOGY_SHORT
from ddpdoctor.facts import ranks as _ranks
from ddpdoctor.facts.env import env_of, truthy
from ddpdoctor.facts.units import whole_number

GiB = 1024 ** 3
MiB = 1024 ** 2

# NVLinks a healthy part of each model has (NVIDIA product briefs / HGX and DGX user guides).
# Only SXM/HGX parts are listed: a PCIe card's links depend on which bridges were fitted.
NVLINKS_BY_MODEL = (
    (r"A100-SXM4", 12), (r"A800-SXM4", 8), (r"H100 80GB HBM3", 18), (r"H100 SXM", 18), (r"(?<!G)H200(?! NVL)", 18),
    (r"H800(?! PCIe)", 8), (r"(?<!G)B200", 18), (r"V100-SXM[23]", 6), (r"P100-SXM2", 4),
)
CONSUMER = re.compile(r"GeForce|TITAN|\bRTX [2-5]0[0-9]0\b", re.I)


@dataclass
class GpuView:
    gpus: dict
    env: Mapping[str, str]
    cmap: CudaMap
    devices: List[dict] = field(default_factory=list)  # visible devices, in CUDA order
    pairs: List[dict] = field(default_factory=list)  # pairs of visible devices

    def label(self, nvml: int) -> str:
        return label(self.cmap, self.gpus, nvml)

    def short(self, nvml: int) -> str:
        cuda = self.cmap.cuda_of(nvml)
        return f"cuda:{cuda}=gpu:{nvml}" if cuda is not None else f"gpu:{nvml}"

    def pair_text(self, pair: dict) -> str:
        return f"{self.short(pair['a'])} <-> {self.short(pair['b'])} ({topo_short(pair)})"

    def device(self, nvml: int) -> dict:
        return next((d for d in self.devices if d.get("index") == nvml), {})


def view(snap) -> GpuView:
    """The view of `snap`, worked out once per snapshot: kept on the Snapshot while its gpus and env sections are
    the same objects (a plain dict has no attribute to keep it on: worked out at each call). The GPU checks called
    this ~26 times per run_checks, each resolving CUDA_VISIBLE_DEVICES again (a fifth of the snapshot fuzz's CPU).
    No check changes a view (tests/test_gpu_view_memo.py runs every check on a frozen view)."""
    gpus, env = snap.get("gpus"), snap.get("env")
    kept = getattr(snap, "_gpu_view", None)
    if kept is not None and kept[0] is gpus and kept[1] is env:
        return kept[2]
    v = _view(snap)
    try:
        snap._gpu_view = (gpus, env, v)
    except AttributeError:
        pass
    return v


def _view(snap) -> GpuView:
    gpus = snap.get("gpus") or {}
    env = env_of(snap)
    cmap = resolve(env, gpus)
    by_index = {d.get("index"): d for d in devices_of(gpus)}
    order = cmap.nvml_indices
    devices = [by_index[i] for i in order if i in by_index]
    keep = set(order)
    pairs = [p for p in gpus.get("pairs") or [] if isinstance(p, dict) and p.get("a") in keep and p.get("b") in keep]
    return GpuView(gpus=gpus, env=env, cmap=cmap, devices=devices, pairs=pairs)


def subjects(nvml: Iterable[int], *extra: str) -> list:
    out = [f"gpu:{i}" for i in sorted(set(nvml))]
    return out + [e for e in extra if e]


def topo_short(pair: dict) -> str:
    if p2p(pair, "nvlink") == "OK":
        return "NVLink"
    return TOPOLOGY_SHORT.get(str(pair.get("topology")), str(pair.get("topology") or "unknown path"))


def p2p(pair: dict, kind: str) -> Optional[str]:
    return (pair.get("p2p") or {}).get(kind)


def nvlink_ok(pair: dict) -> bool:
    return p2p(pair, "nvlink") == "OK"


def pcie_p2p_ok(pair: dict) -> bool:
    """NVML says PCIe peer-to-peer works and NCCL's default P2P level (PXB) would use it."""
    return (not nvlink_ok(pair) and p2p(pair, "read") == "OK"
            and pair.get("topology") in ("NVML_TOPOLOGY_INTERNAL", "NVML_TOPOLOGY_SINGLE", "NVML_TOPOLOGY_MULTIPLE"))


def pcie_p2p_used(pair: dict, level_sys: bool) -> bool:
    """pcie_p2p_ok, or, where NCCL's default level is PATH_SYS, any pair NVML lets read peer-to-peer."""
    if pcie_p2p_ok(pair):
        return True
    return level_sys and not nvlink_ok(pair) and p2p(pair, "read") == "OK"


def any_p2p(pair: dict) -> bool:
    return nvlink_ok(pair) or p2p(pair, "read") == "OK"


def expected_nvlinks(name: Optional[str]) -> Optional[int]:
    for pattern, count in NVLINKS_BY_MODEL:
        if re.search(pattern, str(name or "")) and "PCIe" not in str(name or ""):
            return count
    return None


def flag_on(env: Mapping[str, str], name: str) -> bool:
    """NCCL reads its *_DISABLE variables as integers: any non-zero number disables."""
    raw = env.get(name)
    if raw is None:
        return False
    try:
        return int(str(raw).strip()) != 0
    except ValueError:
        return truthy(raw)


def local_ranks(snap) -> Optional[int]:
    """The local rank count only when the launcher declared it (LOCAL_WORLD_SIZE), else None:
    GPU checks do not guess. The same reading as every other check (facts.ranks.local_ranks)."""
    return _ranks.local_ranks(snap).declared()


def version_tuple(text: Optional[str]) -> tuple:
    out = []
    for part in str(text or "").split("."):
        m = re.match(r"\d+", part)
        n = whole_number(m.group()) if m else None  # int() refuses 4,300+ digits (CPython >= 3.11)
        if n is None:
            break
        out.append(n)
    return tuple(out)


def gib(n: Optional[int]) -> str:
    if n is None:
        return "?"
    return f"{n / GiB:.1f} GiB" if n >= GiB else f"{n / MiB:.0f} MiB"


SHM_OK = GiB
SHM_FATAL = 256 * 1024 ** 2


def nccl_shm_short(snap) -> bool:
    """Whether GPU014 reports /dev/shm for NCCL; SYS001 then stays silent (one finding per fault)."""
    if snap.missing_reason(("gpus", "host")):
        return False
    v = view(snap)
    ranks = local_ranks(snap)
    if len(v.devices) < 2 or (ranks is not None and ranks < 2) or flag_on(v.env, "NCCL_SHM_DISABLE"):
        return False
    size = ((snap.get("host") or {}).get("shm") or {}).get("size_bytes")
    return isinstance(size, int) and size < SHM_OK
