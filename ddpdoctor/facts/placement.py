"""Where each local rank runs: its CPUs (its affinity, as the kernel enforces it) and its GPU (the NVML
device its cuda:LOCAL_RANK is, under its own CUDA_VISIBLE_DEVICES), for this process and, under a
launcher, its sibling ranks (the `siblings` facts). Pure."""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Mapping, Optional, Set

from ddpdoctor.facts.cuda_map import devices_of, resolve
from ddpdoctor.facts.env import env_int, env_of
from ddpdoctor.facts.units import runs_text


def cpuset(text) -> Set[int]:
    """"0-3,8,10-11" -> {0, 1, 2, 3, 8, 10, 11}; a list of ints as is; empty for nothing known."""
    if isinstance(text, (list, tuple, set)):
        return {int(c) for c in text}
    out: Set[int] = set()
    for part in str(text or "").split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        try:
            out.update(range(int(lo), int(hi or lo) + 1))
        except ValueError:
            return set()
    return out


def compress(cpus) -> str:
    return runs_text(cpus)


@dataclass
class RankPlace:
    label: str  # "this rank (local 0)" or "rank 5 (pid 4242)"
    rank: Optional[int]
    local_rank: Optional[int]
    cpus: Set[int]
    gpu: Optional[int]  # NVML index, None when unknown
    cvd: Optional[str]


def gpu_of(local_rank: Optional[int], cvd: Optional[str], env: Mapping[str, str], gpus: dict) -> Optional[int]:
    """The NVML GPU a rank uses: its only visible GPU, or visible[local_rank] (torch.cuda.set_device(local_rank))."""
    e = dict(env)
    if cvd is None:
        e.pop("CUDA_VISIBLE_DEVICES", None)
    else:
        e["CUDA_VISIBLE_DEVICES"] = cvd
    cmap = resolve(e, gpus)
    if len(cmap.visible) == 1:
        return cmap.visible[0].nvml
    if local_rank is not None and 0 <= local_rank < len(cmap.visible):
        return cmap.visible[local_rank].nvml
    return None


def places(snap) -> List[RankPlace]:
    """This process and its sibling ranks, with their CPUs and GPUs (GPUs only where NVML answered)."""
    env = env_of(snap)
    gpus = snap.get("gpus") or {}
    has_gpus = bool(devices_of(gpus)) and not gpus.get("unavailable")
    host = snap.get("host") or {}
    launcher = snap.get("launcher") or {}
    local = launcher.get("local_rank") if isinstance(launcher.get("local_rank"), int) else env_int(env, "LOCAL_RANK")
    rank = launcher.get("rank") if isinstance(launcher.get("rank"), int) else env_int(env, "RANK")
    out = [RankPlace(f"rank {rank}" if rank is not None else "this process", rank, local, cpuset(host.get("affinity")),
                     gpu_of(local, env.get("CUDA_VISIBLE_DEVICES"), env, gpus) if has_gpus else None,
                     env.get("CUDA_VISIBLE_DEVICES"))]
    sib = snap.get("siblings") or {}
    for r in sib.get("ranks") or []:
        if not isinstance(r, dict):
            continue
        lr = r.get("local_rank")
        out.append(RankPlace(f"rank {r.get('rank')}" if r.get("rank") is not None else f"pid {r.get('pid')}",
                             r.get("rank"), lr, cpuset(r.get("cpus")),
                             gpu_of(lr, r.get("cuda_visible_devices"), env, gpus) if has_gpus else None,
                             r.get("cuda_visible_devices")))
    return out
