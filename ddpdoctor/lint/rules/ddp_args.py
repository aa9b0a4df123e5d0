"""F3 and A1: DDP/Trainer arguments that cost time or are silently ignored."""
from __future__ import annotations

import ast
import os
import re

from ...facts.launchers import launchers
from ..conditions import is_main_guard
from ..names import dotted
from . import rule
from ._common import is_training_args_qual, spawned_scopes, spawn_sites, torchrun_line


@rule("LINT010", "find-unused-parameters-true", catalogue=("F3",))
def find_unused_parameters_true(t):
    """A literal `find_unused_parameters=True` / `ddp_find_unused_parameters=True`.

    What it checks
        Any call with the keyword `find_unused_parameters=True` (DDP, accelerate's
        `DistributedDataParallelKwargs`, Lightning's `DDPStrategy`) or
        `ddp_find_unused_parameters=True` (TrainingArguments).

    Why it matters
        DDP then traverses the autograd graph after every forward to find parameters that got no
        gradient. When every parameter is used, that is pure overhead, and DDP warns "find_unused_
        parameters=True was specified in DDP constructor, but did not find any unused parameters"
        on every rank (cszn/KAIR#103, m2lines/Samudra#630). It also breaks reentrant gradient
        checkpointing ("marked as ready twice", huggingface/peft#313). It is right only when some
        parameters really are unused in a step. A note, because it may be deliberate.

    Example
        model = DDP(model, device_ids=[local_rank], find_unused_parameters=True)

    Fix
        Drop it (or set False) unless DDP raises "Expected to have finished reduction in the prior
        iteration"; with the Trainer: `TrainingArguments(..., ddp_find_unused_parameters=False)`.
        Keep it deliberately with `# ddpdoctor: ignore[F3]` on the line.
    """
    for call in t.index.calls:
        for kw in call.node.keywords:
            if kw.arg in ("find_unused_parameters", "ddp_find_unused_parameters") and \
                    isinstance(kw.value, ast.Constant) and kw.value.value is True:
                yield t.finding(
                    "info", kw,
                    f"{kw.arg}=True makes DDP traverse the autograd graph after every forward",
                    detail=("Unless some parameters really get no gradient in a step, this is an extra graph "
                            "traversal per iteration for nothing, and it conflicts with reentrant gradient "
                            "checkpointing."),
                    fix=f"{kw.arg}=False   # or remove it; keep True only if DDP reports unused parameters",
                    evidence={"argument": kw.arg, "call": call.text},
                    subjects=[f"arg:{kw.arg}"],
                )


@rule("LINT015", "training-args-local-rank", catalogue=("A1",))
def training_args_local_rank(t):
    """`TrainingArguments(local_rank=...)`, which current transformers ignores.

    What it checks
        A `local_rank=` keyword (other than the default -1) passed to `TrainingArguments` or a
        subclass (Seq2SeqTrainingArguments, trl configs). Also a script that reads
        `training_args.local_rank` (or `trainer.args.local_rank`) in a comparison to decide
        whether it is distributed or rank 0 (`training_args.local_rank != -1`,
        `training_args.local_rank in [-1, 0]`): a warning in an `if`, a note in a log line. Quiet when
        the project's requirements/setup/pyproject pin transformers below 5 (the field is still set
        there), or its README or shell scripts launch the script with `deepspeed` or
        `python -m torch.distributed.launch`, which pass `--local_rank` (for a module with no
        `__main__` block that no launch line runs: when any launch line of the project does), or (round 21)
        when no launch line runs it and its own file name names the deepspeed launcher (`deepspeed_train.py`).

    Why it matters
        transformers (PR#41382) took device set-up out of TrainingArguments: the field survives
        only for argument parsers, and the rank and GPU come from the LOCAL_RANK environment
        variable through accelerate's PartialState. A script that passes `local_rank=rank` from an
        mp.spawn worker (ddpdoctor's original question did) now puts every rank on cuda:0. Under
        torchrun the value is redundant. An error-prone warning when the script spawns its own
        processes, a note otherwise.

    Example
        TrainingArguments(output_dir="out", local_rank=rank)

    Fix
        Remove the argument and launch with torchrun, which sets LOCAL_RANK:
        `torchrun --standalone --nproc-per-node 4 train.py`. To ask whether the run is
        distributed, read `training_args.parallel_mode` (`ParallelMode.DISTRIBUTED`) or
        `training_args.world_size > 1`; for rank 0, `training_args.process_index == 0` or
        `trainer.is_world_process_zero()`.
    """
    index = t.index
    yield from _reads_training_args_local_rank(t)
    spawned = {id(s) for s in spawned_scopes(index)}
    for call in index.calls:
        if not is_training_args_qual(call.qual):
            continue
        kw = next((k for k in call.node.keywords if k.arg == "local_rank"), None)
        if kw is None:
            continue
        v = kw.value
        if isinstance(v, ast.UnaryOp) and isinstance(v.op, ast.USub) and isinstance(v.operand, ast.Constant):
            continue  # local_rank=-1, the default
        in_spawn = id(call.scope) in spawned or bool(spawn_sites(index))
        yield t.finding(
            "warning" if in_spawn else "info", kw,
            "TrainingArguments(local_rank=...) is ignored; the Trainer takes the rank from LOCAL_RANK"
            + (", which this spawned process does not have" if in_spawn else ""),
            detail=("transformers sets up devices from the environment (LOCAL_RANK via accelerate), not from this "
                    "argument" + ("; every spawned rank will use cuda:0 and think it is local process 0."
                                  if in_spawn else "; under torchrun it is redundant.")),
            fix=f"{torchrun_line(index, spawn_sites(index)[0][0] if spawn_sites(index) else None)}   # and drop local_rank=... from TrainingArguments",
            evidence={"spawned": in_spawn},
            subjects=["arg:local_rank"],
        )


_LOCAL_RANK_AT = re.compile(r"\.local_rank\b")
# the look-behind starts a match only where the run begins: a search that restarts inside a run its first quantifier
# consumed is O(n^2) on a long line (round 21: benchmarks/bench_regex.py)
_RECEIVER = re.compile(r"(?<![\w.])[A-Za-z_][\w.]*$")


def _in_class(scope) -> bool:
    while scope is not None:
        if scope.kind == "class" or scope.cls is not None:
            return True
        scope = scope.parent
    return False


def _training_args_names(index) -> set:
    """Names a script binds to TrainingArguments it builds. Inside a class (a vendored copy of the
    Trainer: `if args is None: args = TrainingArguments(...)`) the object is the library's own, tied to
    the transformers version that code was copied from."""
    names = {a_t for a in index.assigns if a.call is not None and is_training_args_qual(a.call.qual)
             and not _in_class(a.scope) for a_t in a.targets if a_t}
    return names


def _is_training_args(expr: ast.AST, names: set) -> bool:
    text = dotted(expr) or ""
    last = text.rsplit(".", 1)[-1].lower()
    return text in names or "training_args" in last or last in ("train_args", "targs") or text.endswith("trainer.args")


def local_rank_still_set(t) -> str:
    """Why `training_args.local_rank` still holds the rank for this project, or "": its requirements pin
    transformers below 5 (PR#41382 landed after 4.57), or it is launched by `deepspeed` or
    `python -m torch.distributed.launch`, which pass `--local_rank` to the script's argument parser."""
    ctx = t.context
    if ctx is not None:
        major = ctx.max_major("transformers", t.real_path)
        if major is not None and major < 5:
            return f"the project pins transformers{ctx.pin_for('transformers', t.real_path)}"
        launch = ctx.passes_local_rank(t.real_path)
        if launch is not None:
            return f"{launch.source}:{launch.line} launches it with {launch.launcher}, which passes --local_rank"
        launch = ctx.project_passes_local_rank(t.real_path)
        if launch is not None and not _is_entry(t):
            return (f"{launch.source}:{launch.line} launches {launch.script} with {launch.launcher}, which passes "
                    "--local_rank, and this module is not launched itself")
        if ctx.launches_of(t.real_path):
            return ""   # a launch line says how it runs: the file's name does not overrule it
    return _named_for_local_rank_launcher(t)


def _named_for_local_rank_launcher(t) -> str:
    """Round 21 (fr138: LLaVA-lineage `deepspeed_train.py`, no launch line in the project): a script whose own file
    name names a launcher that passes `--local_rank` (data/launchers.json `script_name_token`, `passes_local_rank`:
    deepspeed/launcher/launch.py) is taken to be started by it; HfArgumentParser then fills the field."""
    stem = os.path.splitext(os.path.basename(t.real_path or ""))[0].lower()
    tokens = set(re.split(r"[^a-z0-9]+|_", stem))
    for row in launchers():
        named = row.get("script_name_token")
        if named and row.get("passes_local_rank") and named["token"] in tokens:
            return (f"the file is named for the {row['name']} launcher and no launch line runs it otherwise; "
                    f"{row['name']} passes {row['passes_local_rank']['option']} "
                    f"({row['passes_local_rank']['source']['path']})")
    return ""


def _is_entry(t) -> bool:
    """The file is a script (it has an `if __name__ == "__main__":` block), not a module others import."""
    return any(isinstance(n, ast.If) and is_main_guard(n.test) for n in t.index.tree.body)


def _reads_training_args_local_rank(t):
    """`training_args.local_rank != -1`: always -1 in transformers 5, so the script thinks it is not distributed."""
    index = t.index
    if local_rank_still_set(t):
        return
    names = _training_args_names(index)
    src = index.source or ""
    if ".local_rank" not in src:
        return
    receivers = set()
    for m in _LOCAL_RANK_AT.finditer(src):
        head = _RECEIVER.search(src, max(0, m.start() - 80), m.start())
        if head:
            receivers.add(head.group(0))
    if not any(_is_training_args(ast.Name(id=r), names) or r in names or r.endswith("trainer.args") for r in receivers):
        return
    in_tests: set = set()
    compares = []
    for node in ast.walk(index.tree):
        if isinstance(node, (ast.If, ast.While)):  # a statement's branch; `a if x else b` is usually a log level
            in_tests.update(id(n) for n in ast.walk(node.test))
        elif isinstance(node, ast.Compare):
            for side in [node.left, *node.comparators]:
                if isinstance(side, ast.Attribute) and side.attr == "local_rank" and _is_training_args(side.value, names):
                    compares.append((node, side))
                    break
    # One finding per function: `if local_rank > 0: barrier()` ... `if local_rank == 0: barrier()` is one
    # fault; the other lines are listed in the evidence.
    owner = {}
    for fn in ast.walk(index.tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for n in ast.walk(fn):
                if isinstance(n, ast.Compare):
                    owner[id(n)] = id(fn)  # innermost wins: inner functions are walked later
    groups: dict = {}
    for node, side in compares:
        groups.setdefault(owner.get(id(node), 0), []).append((node, side))
    for group in groups.values():
        group.sort(key=lambda ns: (ns[0].lineno, ns[0].col_offset))
        decided = [ns for ns in group if id(ns[0]) in in_tests]
        node, side = (decided or group)[0]
        decides = bool(decided)
        lines = sorted({n.lineno for n, _s in group})
        who = dotted(side) or "training_args.local_rank"
        yield t.finding(
            "warning" if decides else "info", node,
            f"{who} decides {'what runs' if decides else 'what is logged'}, but it is -1 under torchrun "
            "with current transformers",
            detail=(f"Since transformers PR#41382 TrainingArguments no longer sets local_rank from the environment: "
                    f"`{who}` stays -1 on every rank, so this comparison says \"not distributed\" (and \"rank 0\" "
                    "on every rank) under torchrun"
                    + (": the branch it guards runs on every rank, or never." if decides else
                       " (run_mlm logs \"distributed training: False\" under DDP).")),
            fix=("training_args.parallel_mode == ParallelMode.DISTRIBUTED   # distributed?  "
                 "(from transformers.training_args import ParallelMode)\n"
                 "training_args.process_index == 0                        # rank 0?  (or trainer.is_world_process_zero())"),
            evidence={"reads": who, "in_condition": decides, "lines": lines},
            subjects=["arg:local_rank"],
        )
