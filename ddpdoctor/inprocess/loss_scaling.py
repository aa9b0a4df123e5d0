"""Whether the loss Trainer logs and back-propagates is the model's loss times the world size.

With `average_tokens_across_devices=True` (the default) and a model that accepts loss kwargs,
Trainer passes `num_items_in_batch` (tokens summed over every rank) to the model and multiplies the
returned loss by the number of processes, expecting the model to have divided by that global count.
A model whose loss ignores `num_items_in_batch` (BertForMaskedLM: a plain per-batch mean) then
yields a loss, a grad_norm and gradients N times too large: run_mlm under DDP logs 15.2 where one
process logs 7.6 (transformers `trainer.py` `compute_loss`; issue 13).

Measured once, in the user's real run, at the first `compute_loss` of the first step: two extra
forward passes without gradients on this rank's micro-batch, with the same dropout masks, one with
`num_items_in_batch` and one with twice that. A loss that does not change ignores it. Nothing here
runs a collective (the unwrapped model, not the DDP wrapper) or changes the training step.
"""
from __future__ import annotations

from typing import Any, Optional


def trainer_scale(trainer: Any) -> int:
    """The factor Trainer.compute_loss multiplies the loss by (its own formula, transformers 5)."""
    acc = getattr(trainer, "accelerator", None)
    n = int(getattr(acc, "num_processes", 1) or 1)
    try:
        tp = int(trainer.get_tp_size()) if hasattr(trainer, "get_tp_size") else 1
    except Exception:  # noqa: BLE001
        tp = 1
    n_gpu = int(getattr(getattr(trainer, "args", None), "n_gpu", 0) or 0)
    return (n // max(1, tp)) if n_gpu <= 1 else n_gpu


def applies(trainer: Any, num_items_in_batch: Any) -> Optional[str]:
    """None when Trainer will scale the loss by the world size; else why it will not."""
    args = getattr(trainer, "args", None)
    if num_items_in_batch is None:
        return "Trainer passed no num_items_in_batch"
    if not getattr(args, "average_tokens_across_devices", False):
        return "average_tokens_across_devices is off"
    if getattr(trainer, "compute_loss_func", None) is not None or getattr(trainer, "label_smoother", None) is not None:
        return "a custom loss function or label smoothing computes the loss"
    if not getattr(trainer, "model_accepts_loss_kwargs", False):
        return "the model does not accept loss kwargs"
    if trainer_scale(trainer) <= 1:
        return "one process"
    return None


def _loss_of(out: Any) -> Optional[float]:
    loss = out.get("loss") if isinstance(out, dict) else (out[0] if isinstance(out, (tuple, list)) and out else None)
    try:
        return float(loss.detach().float().item()) if loss is not None else None
    except Exception:  # noqa: BLE001
        return None


def measure(trainer: Any, model: Any, inputs: dict, num_items_in_batch: Any, returned: Any) -> dict:
    """The fact the PRB010 check reads in a callback run (keys below). Never raises."""
    scale = trainer_scale(trainer)
    out: dict = {"checked": False, "trainer_scale": scale,
                 "average_tokens_across_devices": getattr(getattr(trainer, "args", None),
                                                          "average_tokens_across_devices", None),
                 "accepts_loss_kwargs": getattr(trainer, "model_accepts_loss_kwargs", None)}
    why = applies(trainer, num_items_in_batch)
    if why:
        out["skipped"] = why
        return out
    try:
        import torch

        inner = trainer.accelerator.unwrap_model(model) if getattr(trainer, "accelerator", None) else model
        n = num_items_in_batch
        params = next(iter(inner.parameters()), None)
        devices = [params.device.index] if params is not None and params.device.type == "cuda" else []
        batch = {k: v for k, v in inputs.items() if k != "num_items_in_batch"}
        losses = []
        with torch.no_grad(), torch.random.fork_rng(devices=devices):
            for items in (n, n * 2):
                torch.manual_seed(20261202)  # the same dropout masks in both passes
                losses.append(_loss_of(inner(**batch, num_items_in_batch=items)))
        used = _loss_of(returned if isinstance(returned, (tuple, list)) else {"loss": returned})
        l1, l2 = losses
        if l1 is None or l2 is None or not l1:
            out["skipped"] = "the model returned no loss"
            return out
        out.update({"checked": True, "num_items_in_batch": int(n.item() if hasattr(n, "item") else n),
                    "model_loss": round(l1, 6), "model_loss_twice_the_items": round(l2, 6),
                    "ignores_num_items": abs(l2 - l1) <= 1e-4 * abs(l1), "trainer_loss": used})
    except Exception as exc:  # noqa: BLE001 - the doctor never breaks the run
        out["skipped"] = f"{type(exc).__name__}: {exc}"[:200]
    return out
