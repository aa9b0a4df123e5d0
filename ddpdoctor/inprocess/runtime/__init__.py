"""Runtime facts: what only the live training process knows.

`gather_sections(...)` returns the snapshot sections that preflight and DoctorCallback add to the
static ones: `runtime` (this process: launcher context, start method, threads, CUDA, tokenizers,
h5py, forks seen), `runtime_data` (DataLoader/dataset), `runtime_trainer` (TrainingArguments,
model, DDP wrapper, callbacks) and `runtime_peers` (a few facts from every rank, on rank 0).
Each is JSON, so a preflight snapshot can be saved and judged elsewhere like any other.
A section that could not be gathered says why (`unavailable`), and its checks are skipped.
"""
from __future__ import annotations

import os
import socket
from typing import Any, Mapping, Optional

from ddpdoctor.inprocess.runtime.data import data_facts, qualname
from ddpdoctor.inprocess.runtime import forks as _forks
from ddpdoctor.inprocess.runtime import h5py_state as _h5py_state
from ddpdoctor.inprocess.runtime.peers import exchange
from ddpdoctor.inprocess.runtime.process import process_facts, torch_section
from ddpdoctor.inprocess.runtime import tokenizers_state as _tokenizers_state
from ddpdoctor.inprocess.runtime.trainer import trainer_facts

__all__ = ["gather_sections", "torch_section", "runtime_section"]


def runtime_section(environ: Mapping[str, str], tokenizer: Any = None, when: str = "preflight") -> dict:
    proc = process_facts(environ)
    proc["when"] = when
    proc["host"] = socket.gethostname()
    proc["tokenizers"] = _tokenizers_state.tokenizers_state(environ, proc["threads"].get("rust_pool_threads"), proc["usable_cpus"])
    if tokenizer is not None:
        proc["tokenizers"]["object"] = {"type": qualname(tokenizer), "is_fast": bool(getattr(tokenizer, "is_fast", False))}
    proc["h5py"] = _h5py_state.h5py_state()
    proc["forks"] = _forks.summary()
    return proc


def _data_section(trainer, args, dataloader, dataset, start_method: str) -> dict:
    if dataloader is not None:
        return data_facts(dataloader=dataloader, process_start_method=start_method, source="dataloader")
    if trainer is not None and getattr(trainer, "train_dataset", None) is not None:
        a = args if args is not None else trainer.args
        ctx = getattr(a, "dataloader_multiprocessing_context", None)
        return data_facts(dataset=trainer.train_dataset, num_workers=getattr(a, "dataloader_num_workers", 0),
                          persistent_workers=getattr(a, "dataloader_persistent_workers", False),
                          collate_fn=getattr(trainer, "data_collator", None),
                          process_start_method=ctx or start_method, source="trainer")
    if dataset is not None:
        workers = getattr(args, "dataloader_num_workers", 0) if args is not None else 0
        return data_facts(dataset=dataset, num_workers=workers, process_start_method=start_method,
                          persistent_workers=getattr(args, "dataloader_persistent_workers", False), source="dataset")
    return {"unavailable": "preflight() was given no dataloader, dataset or trainer"}


def peer_facts(sections: dict) -> dict:
    """The small per-rank record that rank 0 compares."""
    rt = sections.get("runtime") or {}
    data = sections.get("runtime_data") or {}
    args = (sections.get("runtime_trainer") or {}).get("args") or {}
    sampler = data.get("sampler") or {}
    dist = rt.get("distributed") or {}
    up, entered, now = dist.get("up_wall"), dist.get("entered_wall"), rt.get("wall_time")
    return {
        # times on this rank's own clock from its group's start (RT036 across hosts, whose clocks may differ)
        "since_up_s": round(now - up, 3) if now and up else None,
        "init_s": round(up - entered, 3) if up and entered else None, "backend": dist.get("backend"),
        # torch's TORCH_GLOO_LAZY_INIT (libtorch_cpu, torch 2.13): Gloo then connects at the first collective, and the
        # group's start is no common moment of the ranks
        "gloo_lazy": os.environ.get("TORCH_GLOO_LAZY_INIT", "") not in ("", "0"),
        "host": rt.get("host"), "pid": rt.get("pid"),
        "seconds_since_start": rt.get("seconds_since_start"),
        "seconds_since_group": rt.get("seconds_since_group"), "wall_time": rt.get("wall_time"),
        # the longest wait in one collective call so far (`ddpdoctor run`'s recorder): RT036's gap between ranks
        "coll_wait_max_s": (rt.get("distributed") or {}).get("coll_wait_max_s"),
        "coll_wait_max_op": (rt.get("distributed") or {}).get("coll_wait_max_op"),
        "torch_num_threads": (rt.get("threads") or {}).get("torch_num_threads"),
        "started_by": rt.get("started_by"),
        "dataloader_length": data.get("length"),
        "sampler_seed": sampler.get("seed"), "sampler_epoch": sampler.get("epoch"),
        "local_process_index": args.get("local_process_index"), "process_index": args.get("process_index"),
    }


def gather_sections(trainer=None, args=None, model=None, dataloader=None, dataset=None, tokenizer=None,
                    environ: Optional[Mapping[str, str]] = None, when: str = "preflight", peers: bool = True,
                    peer_timeout_s: float = 5.0) -> dict:
    env = dict(os.environ if environ is None else environ)
    sections: dict = {}
    sections["runtime"] = _safe(lambda: runtime_section(env, tokenizer=tokenizer, when=when))
    if "start_method" not in sections["runtime"]:
        sections["runtime"]["start_method"] = "fork"  # only used below, when the section failed
    sections["runtime_data"] = _safe(lambda: _data_section(trainer, args, dataloader, dataset,
                                                           sections["runtime"]["start_method"]))
    if trainer is not None or args is not None or model is not None:
        sections["runtime_trainer"] = _safe(lambda: trainer_facts(trainer=trainer, args=args, model=model))
    else:
        sections["runtime_trainer"] = {"unavailable": "preflight() was given no trainer, args or model"}
    if peers:
        sections["runtime_peers"] = _safe(lambda: exchange(peer_facts(sections), label=when, timeout_s=peer_timeout_s))
    else:
        sections["runtime_peers"] = {"unavailable": "cross-rank comparison was turned off (peers=False)"}
    return sections


def _safe(fn) -> dict:
    try:
        out = fn()
        return out if isinstance(out, dict) else {"error": f"gatherer returned {type(out).__name__}"}
    except Exception as exc:  # noqa: BLE001 - a gatherer never raises
        return {"error": f"{type(exc).__name__}: {exc}"}
