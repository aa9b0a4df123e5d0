"""Which NVML GPUs will the user's processes really use, and under which CUDA index?

CUDA numbers devices its own way: CUDA_DEVICE_ORDER=FASTEST_FIRST (the default) puts the fastest
model first, PCI_BUS_ID follows the bus like NVML and nvidia-smi; CUDA_VISIBLE_DEVICES then picks
and renumbers them, by index, by GPU UUID (a unique prefix is enough) or by MIG UUID, and CUDA
stops reading the list at the first entry it cannot resolve. Every GPU finding names devices the
way the training processes will: "cuda:1 = gpu:3".

Pure functions over the env dict and the `gpus` section; nothing here touches the machine.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import List, Mapping, Optional


@dataclass
class Visible:
    cuda: int  # the index torch.cuda / CUDA will use
    nvml: int  # NVML index (the `gpu:N` subject)
    mig_uuid: Optional[str] = None


@dataclass
class CudaMap:
    order: str = "FASTEST_FIRST"
    order_set: bool = False
    order_certain: bool = True  # False when FASTEST_FIRST must rank different models
    cvd: Optional[str] = None  # raw CUDA_VISIBLE_DEVICES, None when unset
    visible: List[Visible] = field(default_factory=list)
    problems: List[str] = field(default_factory=list)  # entries CUDA cannot resolve, in words
    problem_kind: Optional[str] = None  # "missing" (no such GPU here) or "syntax" (malformed, duplicate)
    ignored: List[str] = field(default_factory=list)  # entries after the first bad one

    @property
    def nvml_indices(self) -> list:
        out: list = []
        for v in self.visible:
            if v.nvml not in out:
                out.append(v.nvml)
        return out

    def cuda_of(self, nvml: int) -> Optional[int]:
        for v in self.visible:
            if v.nvml == nvml:
                return v.cuda
        return None


def devices_of(gpus: Optional[dict]) -> list:
    devs = (gpus or {}).get("devices") if isinstance(gpus, dict) else None
    return [d for d in devs or [] if isinstance(d, dict) and isinstance(d.get("index"), int)]


def _pci_key(dev: dict) -> tuple:
    bdf = str(dev.get("pci_bus_id") or "")
    try:
        dom, bus, rest = bdf.split(":")
        slot, fn = rest.split(".")
        return (int(dom, 16), int(bus, 16), int(slot, 16), int(fn, 16))
    except ValueError:
        return (1 << 32, dev.get("index", 0), 0, 0)


def base_order(devs: list, order: str) -> tuple:
    """CUDA's enumeration of all devices before CUDA_VISIBLE_DEVICES: (list of NVML indices, certain?)."""
    by_pci = [d["index"] for d in sorted(devs, key=_pci_key)]
    names = {d.get("name") for d in devs}
    if order == "PCI_BUS_ID" or len(names) <= 1:
        return by_pci, True
    # FASTEST_FIRST with mixed models: CUDA ranks by an undocumented speed heuristic. Compute
    # capability, then bus order, is the best public approximation; the map says it is a guess.
    def speed(d: dict) -> tuple:
        cap = d.get("cuda_capability") or [0, 0]
        return (-(cap[0] * 10 + cap[1]) if isinstance(cap, list) and len(cap) == 2 else 0, _pci_key(d))

    return [d["index"] for d in sorted(devs, key=speed)], False


def resolve(env: Mapping[str, str], gpus: Optional[dict]) -> CudaMap:
    devs = devices_of(gpus)
    raw_order = (env.get("CUDA_DEVICE_ORDER") or "").strip()
    order = raw_order.upper() if raw_order.upper() in ("PCI_BUS_ID", "FASTEST_FIRST") else "FASTEST_FIRST"
    enum, certain = base_order(devs, order)
    cmap = CudaMap(order=order, order_set=bool(raw_order), order_certain=certain, cvd=env.get("CUDA_VISIBLE_DEVICES"))
    mig_parent = {}
    for d in devs:
        for m in d.get("mig_devices") or []:
            if m.get("uuid"):
                mig_parent[str(m["uuid"])] = d["index"]
    if cmap.cvd is None:
        for cuda, nvml in enumerate(enum):
            dev = devs[[d["index"] for d in devs].index(nvml)]
            migs = [m for m in dev.get("mig_devices") or [] if m.get("uuid")] if (dev.get("mig") or {}).get("current") else []
            cmap.visible.append(Visible(len(cmap.visible), nvml, migs[0]["uuid"] if migs else None))
        return cmap
    entries = [e.strip() for e in cmap.cvd.split(",")]
    if cmap.cvd.strip() in ("", "-1", "NoDevFiles", "none", "void"):
        return cmap
    seen: set = set()
    for pos, entry in enumerate(entries):
        target = _resolve_entry(entry, devs, enum, mig_parent)
        if isinstance(target, str):
            cmap.problems.append(target)
            cmap.problem_kind = "missing" if (" not on this machine" in target or "does not exist" in target
                                              or "prefix of" in target) else "syntax"
            cmap.ignored = entries[pos + 1:]
            break
        nvml, mig = target
        key = mig or f"gpu{nvml}"
        if key in seen:
            cmap.problems.append(f"'{entry}' names a device already listed")
            cmap.problem_kind = "syntax"
            cmap.ignored = entries[pos + 1:]
            break
        seen.add(key)
        cmap.visible.append(Visible(len(cmap.visible), nvml, mig))
    return cmap


def _resolve_entry(entry: str, devs: list, enum: list, mig_parent: dict):
    """(nvml index, mig uuid or None), or a problem text."""
    if not entry:
        return "an empty entry"
    if re.fullmatch(r"-?[0-9]+", entry):
        i = int(entry)
        if 0 <= i < len(enum):
            return enum[i], None
        return f"index {entry} does not exist: this machine has {len(enum)} GPU(s), cuda:0..cuda:{len(enum) - 1}"
    if entry.startswith("MIG-"):
        rest = entry[4:]
        if rest in mig_parent or entry in mig_parent:
            return mig_parent.get(entry, mig_parent.get(rest)), (entry if entry in mig_parent else rest)
        if rest.startswith("GPU-") and "/" in rest:  # pre-R470 form MIG-GPU-<uuid>/<gi>/<ci>
            gpu_uuid = rest.split("/", 1)[0]
            for d in devs:
                if str(d.get("uuid")) == gpu_uuid:
                    return d["index"], entry
        return f"MIG device '{entry}' is not on this machine (`nvidia-smi -L` lists the MIG UUIDs)"
    if entry.startswith("GPU-"):
        hits = [d for d in devs if str(d.get("uuid") or "").lower().startswith(entry.lower())]
        if len(hits) == 1:
            return hits[0]["index"], None
        if len(hits) > 1:
            return f"'{entry}' is a prefix of {len(hits)} GPU UUIDs; CUDA needs a unique one"
        return f"GPU '{entry}' is not on this machine (`nvidia-smi -L` lists the UUIDs)"
    return f"'{entry}' is neither an index, a GPU UUID nor a MIG UUID"


def label(cmap: CudaMap, gpus: Optional[dict], nvml: int) -> str:
    """"cuda:1 = gpu:3 (NVIDIA A100-SXM4-80GB, 00000000:47:00.0)" - how findings name a GPU."""
    dev = next((d for d in devices_of(gpus) if d.get("index") == nvml), {})
    cuda = cmap.cuda_of(nvml)
    where = f"cuda:{cuda} = gpu:{nvml}" if cuda is not None else f"gpu:{nvml} (not visible to CUDA here)"
    return f"{where} ({dev.get('name') or 'unknown GPU'}, {dev.get('pci_bus_id') or '?'})"


def hip_mask_stack(env: Mapping[str, str]) -> Optional[dict]:
    """How a ROCm process's two GPU masks compose (data/visible_devices.json hip): ROCR_VISIBLE_DEVICES first, then
    HIP_VISIBLE_DEVICES (else CUDA_VISIBLE_DEVICES) indexes the GPUs it left, renumbered from 0. None unless both are
    set; else {rocr, rocr_count, var, value, entries, kept (how many the second mask keeps: it stops at the first
    index that names no GPU), beyond (the indices at or past rocr_count)}."""
    import json
    import os

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "visible_devices.json")
    with open(path, encoding="utf-8") as fh:
        rule = json.load(fh)["hip"]
    rocr = env.get(rule["first"])
    if rocr is None or not str(rocr).strip():
        return None
    var = next((v for v in rule["then"] if env.get(v) is not None and str(env.get(v)).strip()), None)
    if var is None:
        return None
    rocr_count = len(str(rocr).split(","))
    entries = [e.strip() for e in str(env[var]).split(",")]
    kept, beyond = 0, []
    for e in entries:
        if e.isdigit() and int(e) >= rocr_count:
            beyond.append(int(e))
            break
        if not e.isdigit():
            break  # a UUID: resolved by the runtime, not judged here
        kept += 1
    return {"rocr": str(rocr), "rocr_count": rocr_count, "var": var, "value": str(env[var]), "entries": entries,
            "kept": kept, "beyond": beyond, "message": rule["no_device_message"]}


def hip_visible_positions(env: Mapping[str, str], count: int) -> Optional[list]:
    """Which of a host's `count` AMD GPUs (in KFD node order, the order the runtime lists its GPU agents: ddpdoctor's
    reading, as rocminfo shows them) a ROCm process sees, by its masks (data/visible_devices.json hip):
    ROCR_VISIBLE_DEVICES first, then HIP_VISIBLE_DEVICES (else CUDA_VISIBLE_DEVICES) indexing what it left; each
    list stops at its first index that names no GPU. None when no mask is set or an entry is not an index (a UUID:
    resolved by the runtime, not judged here)."""
    import json
    import os

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "visible_devices.json")
    with open(path, encoding="utf-8") as fh:
        rule = json.load(fh)["hip"]
    kept = list(range(count))
    masked = False
    for var in [rule["first"], next((v for v in rule["then"] if str(env.get(v) or "").strip()), None)]:
        value = str(env.get(var) or "").strip() if var else ""
        if not value:
            continue
        masked = True
        nxt = []
        for e in (x.strip() for x in value.split(",")):
            if not e.isdigit():
                return None
            if int(e) >= len(kept):
                break
            nxt.append(kept[int(e)])
        kept = nxt
    return kept if masked else None


def rotated_visible_devices(value, rank) -> Optional[dict]:
    """{'order': [...], 'own': first entry, 'picked': the entry cuda:<rank> selects, 'rotation': k} when
    CUDA_VISIBLE_DEVICES is the per-worker rotation visible[k:] + visible[:k] of its sorted integer indices with
    k == rank > 0 (this worker's GPU first: dask-cuda's cuda_visible_devices, data/visible_devices.json
    rotated_per_worker), else None. Pure."""
    import json
    import os

    if rank is None or not isinstance(rank, int) or rank < 1:
        return None
    parts = [p.strip() for p in str(value or "").split(",") if p.strip()]
    if len(parts) < 2 or not all(p.isdigit() for p in parts):
        return None
    order = [int(p) for p in parts]
    base = sorted(order)
    if len(set(order)) != len(order) or rank >= len(order) or order != base[rank:] + base[:rank]:
        return None
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "visible_devices.json")
    with open(path, encoding="utf-8") as fh:
        row = json.load(fh)["rotated_per_worker"]
    return {"order": order, "own": order[0], "picked": order[rank], "rotation": rank, "row": row}
