"""Facts about the training DataLoader and its dataset: workers, start method, sampler, open h5py
handles held by the dataset, and (only where workers will be spawned) a bounded pickle dry-run,
which is exactly what starting a spawned worker does to the dataset."""
from __future__ import annotations

import io
import pickle
import sys
from typing import Any, Optional

from ddpdoctor.inprocess.runtime.h5py_state import h5py_file_of, h5py_kind

PICKLE_CAP_BYTES = 16 * 1024 * 1024
_WALK_LIMIT = 300
_SHARD_WORDS = {"get_worker_info", "worker_info", "get_rank", "split_dataset_by_node", "num_shards", "shard",
                "world_size", "rank", "num_replicas", "worker_id"}


def qualname(obj: Any) -> str:
    cls = obj if isinstance(obj, type) else type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def _length(obj) -> Optional[int]:
    try:
        return int(len(obj))
    except Exception:  # noqa: BLE001 - IterableDataset, or a __len__ that raises
        return None


def walk_dataset(root: Any, limit: int = _WALK_LIMIT) -> tuple:
    """(attribute paths under `root` that hold an open h5py File/Dataset/Group, whether a CUDA
    tensor was seen). Breadth-first and bounded, following __dict__, lists/tuples/dicts, so
    Subset/ConcatDataset wrappers are covered."""
    found = []
    cuda = False
    seen = set()
    queue = [("dataset", root, 0)]
    while queue and len(seen) < limit:
        path, obj, depth = queue.pop(0)
        if id(obj) in seen or obj is None or isinstance(obj, (str, bytes, int, float, bool)):
            continue
        seen.add(id(obj))
        kind = h5py_kind(obj)
        if kind:
            try:
                open_ = bool(obj.id.valid)
            except Exception:  # noqa: BLE001
                open_ = False
            if open_:
                found.append({"attr": path, "kind": kind, "file": h5py_file_of(obj)})
            continue
        if depth >= 5:
            continue
        if isinstance(obj, dict):
            items = [(f"{path}[{k!r}]", v) for k, v in list(obj.items())[:50]]
        elif isinstance(obj, (list, tuple)):
            items = [(f"{path}[{i}]", v) for i, v in enumerate(obj[:50])]
        else:
            try:
                items = [(f"{path}.{k}", v) for k, v in list(vars(obj).items())[:50]]
            except TypeError:
                items = []
        for p, v in items:
            if _is_array(v):
                cuda = cuda or bool(getattr(v, "is_cuda", False))
                continue  # arrays and tensors hold no handles; do not walk them
            queue.append((p, v, depth + 1))
    return found, cuda


def _is_array(v) -> bool:
    torch = sys.modules.get("torch")
    np = sys.modules.get("numpy")
    return bool((torch is not None and isinstance(v, torch.Tensor)) or (np is not None and isinstance(v, np.ndarray)))


class _TooBig(Exception):
    pass


class _Sink(io.RawIOBase):
    def __init__(self, cap: int):
        self.n = 0
        self.cap = cap

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        self.n += len(b)
        if self.n > self.cap:
            raise _TooBig()
        return len(b)


def pickle_dry_run(objs: dict, cap: int = PICKLE_CAP_BYTES) -> dict:
    """Pickle what a spawned worker receives, into a counting sink (nothing is kept)."""
    sink = _Sink(cap)
    for name, obj in objs.items():
        if obj is None:
            continue
        try:
            pickle.Pickler(sink, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
        except _TooBig:
            return {"ok": None, "what": name, "error": f"larger than {cap // 2**20} MiB; dry run stopped",
                    "bytes": sink.n}
        except Exception as exc:  # noqa: BLE001 - exactly what the worker start would raise
            return {"ok": False, "what": name, "error": f"{type(exc).__name__}: {exc}"[:500], "bytes": sink.n}
    return {"ok": True, "bytes": sink.n}


def _iter_shards(ds) -> Optional[bool]:
    """For an IterableDataset: does its __iter__ (or a method it names) read the worker/rank?"""
    cls = type(ds)
    if cls.__module__.split(".")[0] in ("datasets", "webdataset", "torchdata"):
        return True  # these libraries shard per worker and per node themselves
    names: set = set()
    fn = getattr(cls, "__iter__", None)
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    names |= set(code.co_names) | set(code.co_varnames)
    for n in list(code.co_names):
        meth = getattr(cls, n, None)
        sub = getattr(meth, "__code__", None)
        if sub is not None:
            names |= set(sub.co_names) | set(sub.co_varnames)
    return bool(names & _SHARD_WORDS)


def sampler_facts(dl) -> Optional[dict]:
    """The sampler that decides which samples this rank sees: a distributed one if any layer
    (DataLoader, its batch sampler, accelerate's shard wrapper) holds one, else the first found."""
    bs = getattr(dl, "batch_sampler", None)
    candidates = [getattr(dl, "sampler", None), getattr(bs, "sampler", None),
                  getattr(getattr(bs, "batch_sampler", None), "sampler", None)]
    facts = []
    for s in candidates:
        if s is None:
            continue
        out = {"type": qualname(s)}
        for attr in ("num_replicas", "rank", "epoch", "seed", "shuffle", "drop_last"):
            if hasattr(s, attr):
                v = getattr(s, attr)
                out[attr] = v if isinstance(v, (int, float, bool, str)) or v is None else str(v)
        out["distributed"] = "num_replicas" in out
        if out["distributed"]:
            return out
        facts.append(out)
    return facts[0] if facts else None


# Collators that only pad what is already tokenized (tokenizer.pad runs in Python, not in the pool).
PADDING_COLLATORS = ("DataCollatorWithPadding", "DataCollatorForLanguageModeling", "DataCollatorForSeq2Seq",
                     "DataCollatorForWholeWordMask", "DataCollatorForTokenClassification",
                     "DataCollatorForPermutationLanguageModeling", "default_data_collator", "DefaultDataCollator",
                     "DataCollatorWithFlattening", "default_collate")


def _is_tokenizer(obj) -> bool:
    cls = type(obj)
    return "Tokenizer" in cls.__name__ and cls.__module__.split(".")[0] in ("transformers", "tokenizers")


def holds_tokenizer(obj, depth: int = 2) -> bool:
    """Whether obj (a dataset or collate_fn), or an attribute of it two levels down, is a tokenizer."""
    if obj is None:
        return False
    if _is_tokenizer(obj):
        return True
    if depth <= 0:
        return False
    attrs = getattr(obj, "__dict__", None)
    if not isinstance(attrs, dict):
        return False
    for v in list(attrs.values())[:64]:
        if _is_tokenizer(v) or (depth > 1 and hasattr(v, "__dict__") and not isinstance(v, type)
                                and holds_tokenizer(v, depth - 1)):
            return True
    return False


def tokenizes_in_workers(ds, collate_fn) -> Optional[bool]:
    """Whether the workers (or the loop, without workers) run the tokenizer: the dataset holds one (it
    tokenizes in __getitem__), or a collate_fn that is not a padding collator does. False for
    pre-tokenized rows collated by a padding collator, as in run_mlm/run_clm; None when unknown."""
    try:
        if holds_tokenizer(ds):
            return True
        for _ in range(3):  # Trainer's RemoveColumnsCollator, functools.partial: judge what they wrap
            inner = getattr(collate_fn, "data_collator", None) or getattr(collate_fn, "func", None)
            if inner is None:
                break
            collate_fn = inner
        name = getattr(collate_fn, "__name__", None) or type(collate_fn).__name__
        if collate_fn is not None and holds_tokenizer(collate_fn) and name not in PADDING_COLLATORS:
            return True
        return False
    except Exception:  # noqa: BLE001
        return None


# What the last training DataLoader preflight saw, for the fork guard (which sees only the fork).
LAST: dict = {"tokenizes": None}


def data_facts(dataloader=None, dataset=None, num_workers: Optional[int] = None,
               persistent_workers: Optional[bool] = None, collate_fn=None, process_start_method: str = "fork",
               source: str = "dataloader") -> dict:
    """The `runtime_data` section."""
    ds = getattr(dataloader, "dataset", None) if dataloader is not None else dataset
    if dataloader is not None:
        num_workers = int(getattr(dataloader, "num_workers", 0) or 0)
        persistent_workers = bool(getattr(dataloader, "persistent_workers", False))
        collate_fn = getattr(dataloader, "collate_fn", None)
        ctx = getattr(dataloader, "multiprocessing_context", None)
        method = ctx.get_start_method() if hasattr(ctx, "get_start_method") else (ctx or process_start_method)
    else:
        method = process_start_method
    workers = int(num_workers or 0)
    out: dict = {
        "source": source,
        "num_workers": workers,
        "start_method": method if workers > 0 else None,
        "persistent_workers": bool(persistent_workers),
        "length": _length(dataloader) if dataloader is not None else None,
        "batch_size": getattr(dataloader, "batch_size", None) if dataloader is not None else None,
        "pin_memory": getattr(dataloader, "pin_memory", None) if dataloader is not None else None,
        "sampler": sampler_facts(dataloader) if dataloader is not None else None,
    }
    if ds is not None:
        iterable = False
        try:
            from torch.utils.data import IterableDataset

            iterable = isinstance(ds, IterableDataset)
        except Exception:  # noqa: BLE001
            pass
        held, cuda = walk_dataset(ds)
        out["dataset"] = {
            "type": qualname(ds),
            "iterable": iterable,
            "length": _length(ds),
            "h5py": held,
            "cuda_tensors": cuda,
            "iter_shards": _iter_shards(ds) if iterable else None,
            "tokenizes": tokenizes_in_workers(ds, collate_fn),
        }
        LAST["tokenizes"] = out["dataset"]["tokenizes"]
        if workers > 0 and method in ("spawn", "forkserver"):
            out["dataset"]["pickle"] = pickle_dry_run({"dataset": ds, "collate_fn": collate_fn,
                                                       "worker_init_fn": getattr(dataloader, "worker_init_fn", None)})
    return out
