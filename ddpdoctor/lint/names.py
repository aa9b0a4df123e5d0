"""Import and alias resolution: which library object does a name in the script stand for?

The linter never imports the script, so `mp.spawn` means `torch.multiprocessing.spawn` only because
the script said `import torch.multiprocessing as mp`. This module turns such local spellings into
canonical dotted names (`torch.nn.parallel.DistributedDataParallel`, not the private module path)
so that rules compare against one spelling.
"""
from __future__ import annotations

import ast
import os
from typing import Dict, List, Optional, Tuple

# The fields of each node class that can hold a node of interest to the walks below (ASDL: not identifiers,
# constants, load/store markers or operators): `Attribute.attr`, `Name.ctx`, `BinOp.op` never hold a name, a call,
# a comparison or a constant.
_NOT_EXPR_FIELDS = frozenset(["ctx", "op", "ops", "attr", "id", "arg", "kind", "conversion", "type_comment",
                              "is_async", "level", "module"])
CHILD_FIELDS: Dict[type, Tuple[str, ...]] = {}


def child_fields(t: type) -> Tuple[str, ...]:
    """The fields of node class `t` that may hold expressions (kept per class in CHILD_FIELDS)."""
    fields = CHILD_FIELDS.get(t)
    if fields is None:
        fields = CHILD_FIELDS[t] = tuple(f for f in getattr(t, "_fields", ()) if f not in _NOT_EXPR_FIELDS)
    return fields


def expr_nodes(node: ast.AST) -> List[ast.AST]:
    """`node` and every node below it, as ast.walk gives them but without the load/store markers and operators
    (and in another order): a list, built without ast.walk's two generators a node (a fifth of the linter's
    walks' cost on benchmarks/bench_lint.py's file)."""
    out = [node]
    i = 0
    AST, get = ast.AST, CHILD_FIELDS.get
    while i < len(out):
        n = out[i]
        i += 1
        t = type(n)
        fields = get(t)
        if fields is None:
            fields = child_fields(t)
        for field in fields:
            value = getattr(n, field, None)
            if value is None:
                continue
            if type(value) is list:
                out.extend(v for v in value if isinstance(v, AST))
            elif isinstance(value, AST):
                out.append(value)
    return out

_BLOCK_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")


def stmt_nodes(node: ast.AST) -> List[ast.stmt]:
    """Every statement below `node` (its blocks, their blocks, ...: the bodies of ifs, loops, withs, try arms and
    their handlers, match cases, functions and classes), without entering any expression: a `def`, a `class`, a loop
    or a `try` is always a statement, so looking for one needs no walk of the expressions (four fifths of a file's
    nodes; ast.walk of a 5,000-line file for its ClassDefs was ~5% of bench_lint's findings-file lint)."""
    out: List[ast.stmt] = []
    stack = [node]
    while stack:
        n = stack.pop()
        for field in _BLOCK_FIELDS:
            block = getattr(n, field, None)
            if type(block) is list:
                for child in block:
                    if isinstance(child, ast.stmt):
                        out.append(child)
                    stack.append(child)   # an ExceptHandler or match_case holds a body of its own
    return out


# Private module paths and re-exports, mapped to the one spelling the rules use.
CANONICAL = {
    "torch.multiprocessing.spawn.spawn": "torch.multiprocessing.spawn",
    "torch.multiprocessing.spawn.start_processes": "torch.multiprocessing.start_processes",
    "torch.multiprocessing.Process": "multiprocessing.Process",
    "multiprocessing.context.Process": "multiprocessing.Process",
    "torch.multiprocessing.get_context": "multiprocessing.get_context",
    "torch.multiprocessing.set_start_method": "multiprocessing.set_start_method",
    "torch.nn.parallel.distributed.DistributedDataParallel": "torch.nn.parallel.DistributedDataParallel",
    "torch.nn.parallel.data_parallel.DataParallel": "torch.nn.DataParallel",
    "torch.nn.parallel.DataParallel": "torch.nn.DataParallel",
    "torch.utils.data.dataloader.DataLoader": "torch.utils.data.DataLoader",
    "torch.utils.data.distributed.DistributedSampler": "torch.utils.data.DistributedSampler",
    "torch.utils.data.dataset.Dataset": "torch.utils.data.Dataset",
    "torch.utils.data.dataset.IterableDataset": "torch.utils.data.IterableDataset",
    "torch.distributed.distributed_c10d.init_process_group": "torch.distributed.init_process_group",
    "torch.distributed.distributed_c10d.barrier": "torch.distributed.barrier",
    "transformers.trainer.Trainer": "transformers.Trainer",
    "transformers.training_args.TrainingArguments": "transformers.TrainingArguments",
    "transformers.trainer_seq2seq.Seq2SeqTrainer": "transformers.Seq2SeqTrainer",
    "transformers.training_args_seq2seq.Seq2SeqTrainingArguments": "transformers.Seq2SeqTrainingArguments",
    "accelerate.accelerator.Accelerator": "accelerate.Accelerator",
    "accelerate.state.PartialState": "accelerate.PartialState",
    "h5py._hl.files.File": "h5py.File",
    "torch.serialization.load": "torch.load",
    "torch.serialization.save": "torch.save",
}

# Module aliases a file gets from a star import of a project module (`from modeling.deeplab import *`,
# whose module did `import torch`): used only when the file has a star import and binds the name nowhere.
STAR_MODULES = {
    "torch": "torch",
    "nn": "torch.nn",
    "dist": "torch.distributed",
    "mp": "torch.multiprocessing",
}

# Names a pasted snippet often uses without importing them (the original question's second half
# has no imports). Used only when the name is bound nowhere in the file.
WELL_KNOWN = {
    "Trainer": "transformers.Trainer",
    "TrainingArguments": "transformers.TrainingArguments",
    "Seq2SeqTrainer": "transformers.Seq2SeqTrainer",
    "Seq2SeqTrainingArguments": "transformers.Seq2SeqTrainingArguments",
    "DistributedDataParallel": "torch.nn.parallel.DistributedDataParallel",
    "DistributedSampler": "torch.utils.data.DistributedSampler",
    "DataLoader": "torch.utils.data.DataLoader",
    "Accelerator": "accelerate.Accelerator",
}


def canonical(qual: str) -> str:
    if qual in CANONICAL:
        return CANONICAL[qual]
    # A prefix may be private too: torch.multiprocessing.spawn.spawn handled above; walk prefixes
    # for attribute chains hanging off a re-exported object.
    head, _, tail = qual.rpartition(".")
    while head:
        if head in CANONICAL:
            return CANONICAL[head] + qual[len(head):]
        head, _, _ = head.rpartition(".")
    return qual


def import_bindings(node: ast.AST) -> list:
    """(local name, dotted target) pairs bound by one import statement."""
    out = []
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname:
                out.append((alias.asname, alias.name))
            else:  # `import torch.distributed` binds `torch`
                top = alias.name.split(".")[0]
                out.append((top, top))
    elif isinstance(node, ast.ImportFrom) and node.module and node.level <= 1:
        # `from .worker import run` (level 1) is kept as ".worker.run": a module next to this file.
        prefix = "." if node.level else ""
        for alias in node.names:
            if alias.name == "*":
                continue
            out.append((alias.asname or alias.name, f"{prefix}{node.module}.{alias.name}"))
    return out


def dotted(expr: ast.AST) -> Optional[str]:
    """Source-like text of a Name/Attribute chain: `self.model`, `args.local_rank`; else None."""
    t = type(expr)
    if t is ast.Name:  # the common case, without the list and the join (called ~30,000 times on a 5,000-line file)
        return expr.id
    if t is not ast.Attribute:
        return None
    parts = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if isinstance(expr, ast.Name):
        parts.append(expr.id)
        return ".".join(reversed(parts))
    return None


def flag_name(expr: ast.AST) -> Optional[str]:
    """The name a rank flag is kept under: a Name/Attribute chain (`args.save`), or one field of a settings mapping
    read with a literal key (`model_config['enable_tb']`, fr142 GFMDiff run_fsdp.py); else None."""
    if isinstance(expr, ast.Subscript):
        key = expr.slice
        base = dotted(expr.value)
        if base is None or not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            return None
        return f"{base}[{key.value!r}]"
    return dotted(expr)


def last_name(expr: ast.AST) -> Optional[str]:
    """The identifier a call or reference ends with: `dist.get_rank` -> get_rank."""
    if isinstance(expr, ast.Call):
        expr = expr.func
    if isinstance(expr, ast.Attribute):
        return expr.attr
    if isinstance(expr, ast.Name):
        return expr.id
    return None


def const_str(expr: ast.AST) -> Optional[str]:
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return expr.value
    return None


def kwarg(call: ast.Call, name: str) -> Optional[ast.keyword]:
    for kw in call.keywords:
        if kw.arg == name:
            return kw
    return None


def has_kwargs_splat(call: ast.Call) -> bool:
    return any(kw.arg is None for kw in call.keywords)


def absolute_module(module: str, path: str, target: str) -> str:
    """The module a relative import (`.mlp.TinyMLP`) in `module` (found at `path`) names, spelled like `module`
    (`nets.mlp.TinyMLP` for nets/__init__.py; `nets.blocks.X` for nets/mlp.py). Absolute targets are kept."""
    level = len(target) - len(target.lstrip("."))
    if not level:
        return target
    prefix = "." if module.startswith(".") else ""
    parts = [p for p in module.lstrip(".").split(".") if p]
    if os.path.basename(path) != "__init__.py":
        parts = parts[:-1]
    if level > 1:
        parts = parts[:max(0, len(parts) - (level - 1))]
    return prefix + ".".join(parts + [target.lstrip(".")])
