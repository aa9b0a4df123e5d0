"""Literal per-rank probe records (what a worker writes), for pure tests of analysis and checks."""
from __future__ import annotations

import copy
from typing import Optional

from ddpdoctor.probe.analyze import probe_section
from ddpdoctor.pipeline.snapshot import Snapshot

T0 = 1_800_000_000.0
BASE_PHASES = {"data": 3.0, "sync": 1.0, "forward": 6.0, "backward": 5.0, "allreduce": 2.0, "optimizer": 2.0,
               "other": 1.0}


def record(rank: int = 0, world: int = 2, steps: int = 10, phases: Optional[dict] = None, comm: Optional[dict] = None,
           threads: int = 1, cpus: int = 2, host: str = "node0", loss: float = 3.2, grad_norm: float = 1.7,
           find_unused: bool = False, unused: int = 0, grad_accum: int = 1, local_index: Optional[int] = None,
           mode: str = "torchrun", launch_gap: float = 0.0, complete: bool = True, error: Optional[dict] = None,
           workers: int = 0, stamps: Optional[list] = None) -> dict:
    """One rank's record with `steps` identical steps (each phase as given, in ms)."""
    ph = dict(BASE_PHASES if phases is None else phases)
    if world == 1:
        ph.pop("allreduce", None)
        ph.pop("sync", None)
    total = sum(ph.values())
    recs = []
    for i in range(steps):
        start = T0 + 5.0 + i * 0.1  # ranks of one DDP job start their steps together
        s = {"step": i + 1, "start": start, "total_ms": total, "phases": dict(ph),
             "seq": [[k, v] for k, v in ph.items()]}
        if world > 1:
            c = {"calls": 1 * (comm or {}).get("rounds", 1), "rounds": (comm or {}).get("rounds", 1),
                 "bytes": 555_620 * (comm or {}).get("rounds", 1), "busy_ms": (comm or {}).get("busy_ms", 1.0)}
            if stamps is not None:
                c["last_launch"], c["last_done"] = start + stamps[0] / 1000, start + stamps[1] / 1000
            s["comm"] = c
        recs.append(s)
    rec = {
        "schema": "ddpdoctor/probe-rank/1", "mode": mode, "rank": rank, "host": host, "pid": 100 + rank,
        "complete": complete, "world_size": world, "local_rank": rank, "device": "cpu",
        "env": {"LOCAL_RANK": None if local_index is not None else str(rank)},
        "model": {"size": "tiny", "parameters": 138905, "seq_len": 64},
        "config": {"steps": steps, "batch_size": 8, "grad_accum": grad_accum, "workers": workers, "seed": 0},
        "trainer": {"parallel_mode": "distributed" if world > 1 else "not_parallel", "world_size": world,
                    "process_index": rank, "local_process_index": rank if local_index is None else local_index,
                    "n_gpu": 0, "train_batch_size": 8, "average_tokens_across_devices": True,
                    "ddp_find_unused_parameters": None},
        "threads": {"torch": threads, "interop": 2, "omp_env_at_start": str(threads), "usable_cpus": cpus},
        "logs": [{"step": 1, "loss": loss, "grad_norm": grad_norm}],
        "milestones": {"process_start": T0 + launch_gap, "imports_done": T0 + 3.0, "process_group_ready": T0 + 3.1,
                       "model_built": T0 + 3.2, "model_moved": T0 + 3.25, "ddp_wrapped": T0 + 3.5,
                       "first_step_end": T0 + 5.0, "train_end": T0 + 5.0 + steps * 0.1},
        "ddp": {"wrapper": "DistributedDataParallel" if world > 1 else "BertForMaskedLM", "is_ddp": world > 1,
                "find_unused_parameters": find_unused},
        "unused_parameters": [f"p{i}" for i in range(unused)], "steps": recs, "bucket_bytes": [555_620],
    }
    if error:
        rec["error"] = error
    return rec


def run(records: list, nproc: Optional[int] = None, **extra) -> dict:
    out = {"nproc": nproc or len(records), "launched": T0 - 0.5, "wall_s": 8.0, "status": "ok", "ranks": records,
           "failures": []}
    out.update(extra)
    return out


def healthy_runs(**kw) -> dict:
    return {"torchrun": run([record(0, **kw), record(1, **kw)]),
            "1-rank": run([record(0, world=1, steps=kw.get("steps", 10))], nproc=1)}


def snapshot(runs: dict, steps: int = 10, **config) -> Snapshot:
    cfg = {"steps": steps, "nproc": 2, "command": "ddpdoctor probe --cpu --nproc 2"}
    cfg.update(config)
    return Snapshot(sections={"probe": probe_section(copy.deepcopy(runs), cfg)})
