"""Facts about a Hugging Face Trainer, its TrainingArguments and the model (and its DDP wrapper).

transformers 5.x removed `TrainingArguments.local_rank` (PR#41382) and moved device set-up into
accelerate's PartialState, so we read `parallel_mode`, `world_size`, `process_index`,
`local_process_index` and `distributed_state`. These properties set up devices (and may call
init_process_group) on first access; TrainingArguments.__post_init__ already does that, but we
still only read them when `_setup_devices` has been computed, so preflight never triggers it.
"""
from __future__ import annotations

import sys
from typing import Any

from ddpdoctor.inprocess.runtime.data import qualname

_ARG_NAMES = (
    "ddp_find_unused_parameters", "ddp_backend", "ddp_timeout", "ddp_bucket_cap_mb", "ddp_static_graph",
    "gradient_accumulation_steps", "gradient_checkpointing", "activation_checkpointing",
    "gradient_checkpointing_kwargs", "activation_checkpointing_kwargs", "bf16", "fp16", "use_cpu", "no_cuda",
    "dataloader_num_workers", "dataloader_persistent_workers", "dataloader_multiprocessing_context",
    "per_device_train_batch_size", "max_steps", "average_tokens_across_devices", "log_on_each_node",
    "save_on_each_node", "logging_steps",
)
_WRITES = {"open", "write", "save", "dump", "save_pretrained", "to_csv", "to_json", "savefig", "log_artifact",
           "push_to_hub", "upload_file", "upload_folder", "save_model", "makedirs", "mkdir", "write_text", "init"}
_GATES = {"is_world_process_zero", "is_local_process_zero", "should_log", "should_save", "process_index",
          "local_process_index", "get_rank", "is_main_process", "is_local_main_process", "rank"}
_EVENTS = ("on_log", "on_save", "on_evaluate", "on_step_end", "on_epoch_end", "on_train_end", "on_train_begin")


def _plain(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in list(v.items())[:20]}
    value = getattr(v, "value", None)  # enums such as ParallelMode
    return value if isinstance(value, (str, int)) else str(v)


def args_facts(args) -> dict:
    out: dict = {"type": qualname(args)}
    for name in _ARG_NAMES:
        if hasattr(type(args), name) or name in getattr(args, "__dict__", {}):
            try:
                out[name] = _plain(getattr(args, name))
            except Exception:  # noqa: BLE001
                pass
    set_up = "_setup_devices" in getattr(args, "__dict__", {})
    out["devices_set_up"] = set_up
    if set_up:
        for name in ("parallel_mode", "world_size", "process_index", "local_process_index", "n_gpu", "device",
                     "train_batch_size"):
            try:
                out[name] = _plain(getattr(args, name))
            except Exception as exc:  # noqa: BLE001
                out[name] = None
                out.setdefault("errors", {})[name] = f"{type(exc).__name__}: {exc}"
        state = getattr(args, "distributed_state", None)
        if state is not None:
            out["distributed_type"] = _plain(getattr(state, "distributed_type", None))
            out["num_processes"] = getattr(state, "num_processes", None)
    return out


def unwrap_ddp(model) -> tuple:
    """(DDP wrapper or None, the inner module)."""
    torch = sys.modules.get("torch")
    if torch is None or model is None:
        return None, model
    try:
        from torch.nn.parallel import DistributedDataParallel as DDP
    except Exception:  # noqa: BLE001
        return None, model
    if isinstance(model, DDP):
        return model, model.module
    return None, model


def model_facts(model, wrapped=None) -> dict:
    ddp, inner = unwrap_ddp(wrapped if wrapped is not None else model)
    if ddp is None and wrapped is not None:
        ddp, _ = unwrap_ddp(model)
    inner = inner if inner is not None else model
    out: dict = {"type": qualname(inner)}
    try:
        params = list(inner.parameters())
        out["parameters"] = sum(p.numel() for p in params)
        out["trainable"] = sum(p.numel() for p in params if p.requires_grad)
        if params:
            out["dtype"] = str(params[0].dtype).replace("torch.", "")
            out["device"] = str(params[0].device)
    except Exception:  # noqa: BLE001
        pass
    ckpt = None
    for attr in ("is_activation_checkpointing", "is_gradient_checkpointing"):
        if attr in dir(type(inner)):
            try:
                import warnings

                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    ckpt = bool(getattr(inner, attr))
                break
            except Exception:  # noqa: BLE001
                continue
    out["gradient_checkpointing"] = ckpt
    if ddp is not None:
        out["ddp"] = {
            "find_unused_parameters": bool(getattr(ddp, "find_unused_parameters", False)),
            "static_graph": bool(getattr(ddp, "static_graph", False)),
            "bucket_cap_mb": round(getattr(ddp, "bucket_bytes_cap", 0) / 2**20, 1),
            "gradient_as_bucket_view": bool(getattr(ddp, "gradient_as_bucket_view", False)),
            "device_ids": _plain(getattr(ddp, "device_ids", None)),
        }
    else:
        out["ddp"] = None
    return out


def _code_names(fn) -> set:
    code = getattr(fn, "__code__", None)
    if code is None:
        return set()
    names = set(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            names |= set(const.co_names)
    return names


def callback_facts(callbacks) -> list:
    """User callbacks that write files or start runs in an event without a rank-0 gate (F12)."""
    out = []
    for cb in callbacks or ():
        cls = type(cb)
        mod = cls.__module__.split(".")[0]
        entry = {"type": qualname(cb), "builtin": mod in ("transformers", "ddpdoctor", "accelerate")}
        if not entry["builtin"]:
            ungated = []
            for event in _EVENTS:
                fn = cls.__dict__.get(event)
                names = _code_names(fn)
                if names & _WRITES and not names & _GATES:
                    ungated.append({"event": event, "calls": sorted(names & _WRITES)})
            entry["ungated_writes"] = ungated
        out.append(entry)
    return out


def trainer_facts(trainer=None, args=None, model=None) -> dict:
    """The `runtime_trainer` section."""
    args = args if args is not None else getattr(trainer, "args", None)
    model = model if model is not None else getattr(trainer, "model", None)
    wrapped = getattr(trainer, "model_wrapped", None) if trainer is not None else None
    tf = sys.modules.get("transformers")
    out: dict = {"transformers": getattr(tf, "__version__", None), "has_trainer": trainer is not None}
    if args is not None:
        out["args"] = args_facts(args)
    if model is not None:
        out["model"] = model_facts(model, wrapped)
    if trainer is not None:
        handler = getattr(trainer, "callback_handler", None)
        out["callbacks"] = callback_facts(getattr(handler, "callbacks", None))
    return out
