"""A ZeRO-3 model saved with torch.save(model.state_dict()) (round 20, a preview rule)."""
from __future__ import annotations

import ast
import functools
import json
import os
from typing import Optional, Set, Tuple

from ddpdoctor.model.inputs import open_regular

from . import rule
from ..names import dotted
from ._common import nodes_through_assigns
from .deepspeed_save import INITIALIZE, _engines

_DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "data",
                     "lint_zero3.json")


@functools.lru_cache(maxsize=1)
def _catalogue() -> Tuple[frozenset, str]:
    """(the calls that give a full state dict under ZeRO-3, the source of the partitioning fact), from
    ddpdoctor/data/lint_zero3.json."""
    with open(_DATA, encoding="utf-8") as fh:
        doc = json.load(fh)
    return frozenset(g["name"] for g in doc["gathers"]), doc["partitioned"]["source"]


def _literal_stage(index) -> Optional[int]:
    """The ZeRO stage of a DeepSpeed config written in the script: `{"zero_optimization": {"stage": 3}}`."""
    for node in ast.walk(index.tree):
        if not isinstance(node, ast.Dict):
            continue
        for key, value in zip(node.keys, node.values):
            if isinstance(key, ast.Constant) and key.value == "zero_optimization" and isinstance(value, ast.Dict):
                for k, v in zip(value.keys, value.values):
                    if isinstance(k, ast.Constant) and k.value == "stage" and isinstance(v, ast.Constant) and \
                            isinstance(v.value, int) and not isinstance(v.value, bool):
                        return v.value
    return None


@functools.lru_cache(maxsize=64)
def _file_stage(path: str) -> Optional[int]:
    try:
        if os.path.getsize(path) > 64 * 1024:
            return None
        with open_regular(path, "r", encoding="utf-8") as fh:  # a FIFO: getsize 0, and open() would block for ever
            doc = json.load(fh)
    except (OSError, ValueError, RecursionError):  # RecursionError: nested deeper than the parser's stack
        return None
    zero = doc.get("zero_optimization") if isinstance(doc, dict) else None
    stage = zero.get("stage") if isinstance(zero, dict) else None
    return stage if isinstance(stage, int) and not isinstance(stage, bool) else None


def _named_stage(index, path: str) -> Optional[Tuple[int, str]]:
    """The ZeRO stage of a JSON config the script names by a string (`"configs/ds_zero3.json"`, an argparse
    default), looked up next to the script and up to two folders above it."""
    here = os.path.dirname(os.path.abspath(path))
    for node in ast.walk(index.tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.endswith(".json") and \
                len(node.value) < 300:
            folder = here
            for _ in range(3):
                stage = _file_stage(os.path.join(folder, node.value))
                if stage is not None:
                    return stage, node.value
                folder = os.path.dirname(folder)
    return None


def _zero3(t) -> Optional[str]:
    """Where the script's ZeRO-3 comes from, or None when stage 3 is not shown."""
    stage = _literal_stage(t.index)
    if stage is not None:
        return "the config dict in the script" if stage == 3 else None
    named = _named_stage(t.index, t.real_path)
    if named is not None:
        return f"{named[1]} (zero_optimization.stage 3)" if named[0] == 3 else None
    ctx = t.context
    stages = set(ctx.ds_configs.values()) if ctx is not None and getattr(ctx, "ds_configs", None) else set()
    if stages == {3}:
        return "the project's DeepSpeed configs (" + ", ".join(sorted(ctx.ds_configs)[:3]) + "), all stage 3"
    return None


def _models(index) -> Set[str]:
    """The engine names and the model handed to deepspeed.initialize (`model=net`)."""
    out = set(_engines(index))
    for call in index.by_qual.get(INITIALIZE, ()):
        model = call.kw("model")
        if model is not None and dotted(model):
            out.add(dotted(model))
    return out


def _root_of_state_dict(expr: ast.AST, scope, models: Set[str]) -> Optional[str]:
    """The model a `<m>.state_dict()` / `<m>.module.state_dict()` in `expr` (or in the value of a name `expr`
    reads, assigned in the same function) is taken from, when it is one of `models`."""
    for n in nodes_through_assigns(expr, scope, 20):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "state_dict":
            recv = dotted(n.func.value) or ""
            base = recv[: -len(".module")] if recv.endswith(".module") else recv
            if base in models:
                return recv
    return None


@rule("LINT040", "zero3-state-dict-partitioned")
def zero3_state_dict_partitioned(t):
    """A model trained under DeepSpeed ZeRO stage 3 saved with `torch.save(model.state_dict())`.

    What it checks
        A script that calls `deepspeed.initialize` with a ZeRO stage-3 config - a config dict in the script
        (`"zero_optimization": {"stage": 3}`), a JSON file it names by a string (an argparse default), or, when
        it names none, a project whose DeepSpeed JSON configs are all stage 3 - and saves
        `torch.save(<m>.state_dict(), ...)` or `<m>.module.state_dict()` of the engine or of the model handed to
        initialize (directly or through a name assigned in the same function), while it calls nothing that
        gathers the weights (the list in ddpdoctor/data/lint_zero3.json: `deepspeed.zero.GatheredParameters`,
        `engine.save_16bit_model`, `engine.save_checkpoint` with zero_to_fp32, accelerate's `get_state_dict`).
        A preview rule (round 20): a note by default, a warning with `--preview`.

    Why it matters
        Under ZeRO-3 every rank holds only its shard of each parameter; outside the forward DeepSpeed frees the
        full tensor and leaves an empty placeholder (partition_parameters.py free_param: `param.data =
        torch.empty(0, ...)`). The state dict then holds empty tensors: the file saves without error and cannot
        be loaded into the model ("size mismatch ... torch.Size([0])").

    Example
        engine, *_ = deepspeed.initialize(model=model, config={"zero_optimization": {"stage": 3}, ...})
        ...
        if engine.global_rank == 0:
            torch.save(engine.module.state_dict(), "model.pt")

    Fix
        On every rank: `engine.save_16bit_model(out_dir)` (with `stage3_gather_16bit_weights_on_model_save: true`),
        or `engine.save_checkpoint(out_dir)` and `zero_to_fp32.py` afterwards, or gather first:
        `with deepspeed.zero.GatheredParameters(list(model.parameters()), modifier_rank=None): sd = model.state_dict()`.
    """
    index = t.index
    if INITIALIZE not in index.by_qual or "torch.save" not in index.by_qual:
        return
    gathers, source = _catalogue()
    if any(g in index.by_name for g in gathers) or any(q.rsplit(".", 1)[-1] in gathers for q in index.by_qual):
        return
    models = _models(index)
    if not models:
        return
    hits = []
    for call in index.by_qual["torch.save"]:
        obj = call.arg(0, "obj")
        recv = _root_of_state_dict(obj, call.scope, models) if obj is not None else None
        if recv is not None:
            hits.append((call, recv))
    if not hits:
        return
    where = _zero3(t)
    if where is None:
        return
    for call, recv in hits:
        yield t.finding(
            "warning", call.node,
            f"torch.save of {recv}.state_dict() under ZeRO stage 3 ({where}): each parameter is partitioned across "
            "the ranks, so the saved tensors are empty placeholders",
            detail=("DeepSpeed ZeRO-3 keeps only this rank's shard of every parameter and frees the full tensor "
                    "outside the forward (param.data becomes torch.empty(0)). state_dict() returns those "
                    "placeholders; the checkpoint saves without error and fails to load (size mismatch)."),
            fix=("engine.save_16bit_model(output_dir)   # on every rank; config: "
                 "\"stage3_gather_16bit_weights_on_model_save\": true\n"
                 "# or: engine.save_checkpoint(output_dir) on every rank, then zero_to_fp32.py"),
            evidence={"zero3": where, "model": recv, "source": source})
