"""Cross-rank facts through the process group's own key-value store, with a deadline.

Every rank writes a few small facts (its DataLoader length, sampler seed, thread count, host...);
rank 0 collects them. We use the c10d store rather than a collective on purpose: a collective
issued by preflight on some ranks only (say, under `if rank == 0:`) would hang the job, while a
store read simply times out, and works the same for Gloo and NCCL (no device tensor needed).
"""
from __future__ import annotations

import json
import sys
from typing import Optional

from ddpdoctor.gather.storekeys import read_keys, read_present

_calls: dict = {}


def _store_and_group():
    torch = sys.modules.get("torch")
    if torch is None:
        return None, None, None
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return None, None, None
    from torch.distributed import distributed_c10d as c10d

    store = c10d._get_default_store()
    return store, dist.get_rank(), dist.get_world_size()


def exchange(facts: dict, label: str = "preflight", timeout_s: float = 5.0) -> dict:
    """Publish this rank's facts; on rank 0 collect every rank's within `timeout_s`."""
    try:
        store, rank, world = _store_and_group()
    except Exception as exc:  # noqa: BLE001
        return {"unavailable": f"cannot reach the process group's store: {type(exc).__name__}: {exc}"}
    if store is None:
        return {"unavailable": "torch.distributed is not initialised yet, so ranks cannot be compared; "
                               "call preflight() after init_process_group (or use DoctorCallback)"}
    if world <= 1:
        return {"unavailable": "a single process: nothing to compare across ranks"}
    n = _calls[label] = _calls.get(label, 0) + 1
    prefix = f"ddpdoctor/{label}/{n}/"
    try:
        store.set(prefix + str(rank), json.dumps(facts, default=str))
    except Exception as exc:  # noqa: BLE001
        return {"unavailable": f"cannot write to the process group's store: {type(exc).__name__}: {exc}"}
    if rank != 0:
        # rank 0's record where it is already in the store (kept there by rank 0; other ranks never wait): RT036
        # compares this rank's times with rank 0's. A rank later than rank 0's gather sees rank 0 this way; a rank
        # earlier than rank 0 is in rank 0's gather (its record is published), and rank 0 judges the gap.
        out = {"unavailable": "cross-rank facts are judged on rank 0", "published": True}
        try:
            got = read_present(store, [prefix + "0"])
            if prefix + "0" in got:
                raw = got[prefix + "0"]
                out["rank0"] = json.loads(raw.decode() if isinstance(raw, (bytes, bytearray)) else raw)
        except Exception:  # noqa: BLE001 - rank 0's record is a help, never a need
            pass
        return out
    got, missing = gather_ranks(store, prefix, world, timeout_s)
    got = {str(r): v for r, v in got.items()}
    for r in got:
        if r == "0":
            continue  # the other ranks read it (a rank later than this gather's timeout included)
        try:
            store.delete_key(prefix + r)
        except Exception:  # noqa: BLE001
            pass
    return {"world_size": world, "ranks": got, "missing": missing, "timeout_s": timeout_s, "label": label}


def gather_ranks(store, prefix: str, world: int, timeout_s: float) -> tuple:
    """({rank: its JSON record}, [ranks missing]) of the keys PREFIX0..PREFIX{world-1}: one blocking
    `wait` on all of them until `timeout_s`, one `multi_get` (no polling: see storekeys)."""
    keys = [prefix + str(r) for r in range(world)]
    raw, _ = read_keys(store, keys, max(0.0, timeout_s))
    got: dict = {}
    for r, k in enumerate(keys):
        if k in raw:
            try:
                got[r] = json.loads(raw[k].decode() if isinstance(raw[k], (bytes, bytearray)) else raw[k])
            except ValueError:
                continue
    return got, [r for r in range(world) if r not in got]


def local_ranks(peers: dict, host: Optional[str]) -> Optional[int]:
    """How many reported ranks run on `host`: the real local world size even when
    LOCAL_WORLD_SIZE was never set (hand-set env under mp.spawn)."""
    ranks = (peers or {}).get("ranks") or {}
    if not ranks or not host:
        return None
    return sum(1 for f in ranks.values() if f.get("host") == host)
