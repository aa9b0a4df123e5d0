"""Weights loaded on rank 0 only after the DDP wrap (round 9, a preview rule)."""
from __future__ import annotations

import ast
from typing import Set

from ..names import dotted
from . import rule
from ._common import DDP
from .rank0_forward import _ddp_bindings

# pytorch/pytorch torch/nn/parallel/distributed.py: DistributedDataParallel.__init__ broadcasts rank 0's parameters and
# buffers once (`_sync_module_states(...)`, "Sync params and buffers. Ensures all DDP models start off at the same
# value"); afterwards only buffers are broadcast before a forward, and gradients are averaged, so parameters that
# differ at that point stay different on every later step.
_SOURCE = ("pytorch/pytorch torch/nn/parallel/distributed.py, DistributedDataParallel.__init__ _sync_module_states: "
           "the only broadcast of the parameters")
_BROADCASTS = ("broadcast", "broadcast_object_list", "_sync_module_states", "sync_params", "broadcast_parameters")


def _aliases(index, scope, name: str) -> Set[str]:
    """The wrapped model and what is bound to its `.module` (`raw_model = model.module`)."""
    out = {name, f"{name}.module"}
    for a in scope.assigns:
        if isinstance(a.value, ast.Attribute) and dotted(a.value) == f"{name}.module":
            out.update(n for n in a.targets if n)
    return out


def _trains(c) -> bool:
    return c.name == "backward" or (c.name == "step" and "optim" in (c.recv or "").lower()) or \
        (c.name or "").lower().startswith(("train", "fit"))


def _bindings_and_sites(index) -> list:
    """(name, line after which a load counts, scope to look for loads in, whether the class trains elsewhere, the wrap's
    line): every
    DDP binding in its own scope, and `self.<attr> = DDP(...)` made in a method that another method of the same class
    calls (`self._init_model_and_optimizer()`) before it loads into `self.<attr>` (fr80 dastin359/LM-from-scratch,
    both readers: the resume load under `self.rank == 0` in __init__, training in the class's other methods)."""
    out = []
    for name, line, scope in _ddp_bindings(index):
        out.append((name, line, scope, False, line))
        klass = scope.cls
        if not name.startswith("self.") or klass is None:
            continue
        trains = any(_trains(c) for m in klass.functions.values() for c in m.calls)
        for other in klass.functions.values():
            if other is scope:
                continue
            site = next((c for c in other.calls if c.recv == "self" and c.name == scope.name), None)
            if site is not None:
                out.append((name, site.line, other, trains, line))
    return out


_PATH_WORDS = ("path", "file", "ckpt", "checkpoint", "dir", "fname", "filename")


def _path_exprs(call, names: Set[str]) -> Set[str]:
    """The call's arguments (at any depth) that name a file: a str literal or f-string, or a name / attribute /
    call whose text says path, file, ckpt, checkpoint or dir; the model's own names left out."""
    out = set()
    for a in list(call.node.args) + [k.value for k in call.node.keywords]:
        for n in ast.walk(a):
            if isinstance(n, ast.Constant) and isinstance(n.value, str) or isinstance(n, ast.JoinedStr):
                out.add(ast.dump(n))
            elif isinstance(n, (ast.Name, ast.Attribute, ast.Call)):
                text = ast.unparse(n)
                if text not in names and any(w in text.lower() for w in _PATH_WORDS):
                    out.add(ast.dump(n))
    return out


def _round_trip(scope, load, names: Set[str]) -> bool:
    """Round 33 (fr165 accentedness-scalar-routing, LINT024 judged wrong): before the load, in the same function and
    with nothing trained in between, the model was saved to the file the load reads (`save_checkpoint(path, model,
    ...)` then `load_checkpoint(path, model, ...)`): the rank loads back the weights it holds, nothing changes."""
    want = _path_exprs(load, names)
    if not want:
        return False
    for save in scope.calls:
        if save.line >= load.line or "save" not in (save.name or "").lower():
            continue
        args = list(save.node.args) + [k.value for k in save.node.keywords]
        if not any(ast.unparse(n) in names for a in args for n in ast.walk(a)):
            continue  # a save of something else
        if not (_path_exprs(save, names) & want):
            continue
        if any(save.line < c.line < load.line and _trains(c) for c in scope.calls):
            continue
        return True
    return False


@rule("LINT024", "rank0-load-after-wrap")
def rank0_load_after_wrap(t):
    """A checkpoint loaded into the model on rank 0 only, after the model was wrapped in DDP.

    What it checks
        In the function that wraps a model in `DistributedDataParallel`, after the wrap and under a rank-0 test:
        `model.load_state_dict(...)` / `model.module.load_state_dict(...)` (or on a name bound to `model.module`),
        or a load helper handed the model (`checkpoint_manager.load(path, raw_model, optimizer)`,
        `load_checkpoint(model, path)`), with no broadcast after it in that function. Quiet when the load reads the
        file the function saved from the same model just before, with no training in between (a save/load round
        trip: the rank gets its own weights back; round 33). A preview rule (round 9): a
        note by default, a warning with `--preview`.

    Why it matters
        DDP broadcasts rank 0's parameters once, in its constructor (`_sync_module_states`,
        torch/nn/parallel/distributed.py); afterwards it averages gradients and re-broadcasts buffers only. Weights
        loaded on rank 0 after the wrap stay on rank 0: the ranks train different models from then on, and any
        step counter the load restores (epoch, global step) differs too, so code that runs a collective every N
        steps can hang.

    Example
        model = DDP(model, device_ids=[local_rank])
        if rank == 0 and args.resume:
            model.module.load_state_dict(torch.load(args.resume, map_location="cpu"))

    Fix
        Load on every rank (with `map_location`), or load before wrapping in DDP (its constructor broadcasts rank 0's
        weights), or broadcast afterwards (`dist.broadcast` of each parameter, `broadcast_object_list` for counters).
    """
    index = t.index
    if DDP not in index.by_qual:
        return
    for name, line, scope, trains_in, wrap_line in _bindings_and_sites(index):
        names = _aliases(index, scope, name)
        loads = []
        for call in scope.calls:
            if call.line <= line:
                continue
            if call.name == "load_state_dict" and call.recv in names:
                loads.append(call)
            elif call.name and "load" in call.name.lower() and call.name != "load_state_dict" and any(
                    dotted(a) in names for a in list(call.node.args) + [k.value for k in call.node.keywords]):
                loads.append(call)
        for call in loads:
            if not t.facts.rank0(index, call, single=False):
                continue
            if _round_trip(scope, call, names):
                continue  # the file rank 0 just saved from this model: its own weights come back (round 33)
            if any(c.line > call.line and (c.name or "") in _BROADCASTS and not t.facts.rank0(index, c, single=False)
                   for c in scope.calls):
                continue  # every rank receives what rank 0 loaded (a broadcast inside the rank-0 test is no help)
            if not any(c.line > call.line and _trains(c) for c in scope.calls) and not trains_in:
                continue  # loaded for a last evaluation on rank 0 (nothing trains afterwards): harmless
            yield t.finding(
                "warning", call.node,
                f"{call.text}() loads weights into the DDP model on rank 0 only, after the wrap (line {wrap_line}): the "
                "other ranks keep theirs, and DDP does not broadcast parameters again",
                detail=("DistributedDataParallel broadcasts rank 0's parameters only in its constructor; a load on one "
                        "rank afterwards leaves the ranks with different weights (and any restored step counters)."),
                fix="# load on every rank (map_location=...), or before the DDP(...) line, which broadcasts rank 0's weights",
                evidence={"wrap_line": wrap_line, "model": name, "source": _SOURCE},
            )
