"""`--local_rank` from argparse in a script its project launches with torchrun (round 19, wave 5: a class the
held-out review found; a preview rule)."""
from __future__ import annotations

import ast
import os
from typing import Optional

from . import rule
from ..names import dotted
from ._common import uses_local_rank_readers

_SOURCE = ("pytorch/pytorch v2.13.0 cf30153: torch/distributed/run.py (torchrun's documented worker environment; it "
           "adds no argument to the script's command line) and torch/distributed/elastic/agent/server/"
           "local_elastic_agent.py _start_workers (worker_env = {\"LOCAL_RANK\": str(local_rank), ...}); "
           "torch/distributed/launch.py (passes --local-rank only without --use-env); ddpdoctor/data/launchers.json")
# Calls whose argument picks the device or the rank: with the argparse default every rank picks the same.
_PICKS = frozenset(("torch.cuda.set_device", "torch.device", "torch.nn.parallel.DistributedDataParallel",
                    "torch.distributed.init_process_group"))
_PICK_NAMES = frozenset(("to", "cuda", "set_device", "DistributedDataParallel", "DDP"))


def _option(call) -> Optional[ast.AST]:
    """`parser.add_argument("--local_rank", type=int, default=-1)`: the default (a Constant None when absent)."""
    if call.name != "add_argument":
        return None
    if not any(isinstance(a, ast.Constant) and a.value in ("--local_rank", "--local-rank") for a in call.node.args):
        return None
    return call.kw("default") or ast.Constant(value=None)


def _reads_env_local_rank(index) -> bool:
    """The file reads LOCAL_RANK itself somewhere (`int(os.environ["LOCAL_RANK"])`, a default from
    `os.environ.get("LOCAL_RANK", -1)`): the argparse value is then not what picks the device."""
    return any(isinstance(n, ast.Constant) and n.value == "LOCAL_RANK" for n in ast.walk(index.tree))


@rule("LINT039", "local-rank-argument-under-torchrun")
def local_rank_argument_under_torchrun(t):
    """`--local_rank` parsed with argparse in a script launched with torchrun, which passes no such argument.

    What it checks
        A script whose project launches it with `torchrun` (or `python -m torch.distributed.launch --use-env`),
        read from the README and shell scripts next to it, and by no launcher that passes `--local_rank`
        (deepspeed, torch.distributed.launch without --use-env): it declares `--local_rank`/`--local-rank` with
        argparse, never reads LOCAL_RANK from the environment, and uses `<args>.local_rank` to pick the device
        or the rank (`torch.cuda.set_device`, `torch.device`, `.to`/`.cuda`, `DistributedDataParallel`,
        `init_process_group`). Quiet when a library that reads LOCAL_RANK itself runs it (Trainer, accelerate,
        deepspeed, Lightning). Since round 25, with no launch line of the project naming the script, a torchrun
        launch in the script's own comments or module docstring (a note; quiet when they also name a launcher that
        passes --local_rank). A preview rule (round 19): a note by default, a warning with `--preview`.

    Why it matters
        torchrun gives each worker LOCAL_RANK in its environment only (torch/distributed/run.py); the argument
        keeps its default (-1 or 0) on every rank, so all ranks use the same GPU (or skip the distributed set-up
        when the default is -1). torch >= 2.0's torch.distributed.launch passes `--local-rank` only without
        `--use-env`.

    Example
        parser.add_argument("--local_rank", type=int, default=0)   # README: torchrun --nproc_per_node 4 train.py
        torch.cuda.set_device(args.local_rank)

    Fix
        `parser.add_argument("--local_rank", "--local-rank", type=int, default=int(os.environ.get("LOCAL_RANK", 0)))`
        or read `int(os.environ["LOCAL_RANK"])` where the device is picked.
    """
    ctx = t.context
    index = t.index
    launches = [l for l in ctx.launches_of(t.real_path)
                if l.launcher == "torchrun" or (l.launcher == "torch.distributed.launch" and l.use_env)] \
        if ctx is not None else []
    if ctx is not None and ctx.passes_local_rank(t.real_path) is not None:
        return
    shown = bool(launches)
    if not launches and (ctx is None or not ctx.launches_of(t.real_path)):
        # round 25: no launch line of the project names this script; the script's own comments or module docstring
        # may (`# torchrun --nproc_per_node=4 train.py`): a note, and only when none of them names a launcher that
        # passes --local_rank (torch.distributed.launch without --use-env, deepspeed)
        own = _own_launches(t)
        if any(l.launcher == "deepspeed" or (l.launcher == "torch.distributed.launch" and not l.use_env)
               for l in own):
            return
        launches = [l for l in own if l.launcher == "torchrun" or
                    (l.launcher == "torch.distributed.launch" and l.use_env)]
    if not launches:
        return
    options = [(c, _option(c)) for c in index.by_name.get("add_argument", ())]
    options = [(c, d) for c, d in options if d is not None]
    if not options or _reads_env_local_rank(index) or uses_local_rank_readers(index):
        return
    option, default = options[0]
    for call in index.calls:
        if not (call.qual in _PICKS or call.name in _PICK_NAMES):
            continue
        used = [n for x in [*call.node.args, *(k.value for k in call.node.keywords)] for n in ast.walk(x)
                if isinstance(n, ast.Attribute) and n.attr == "local_rank" and dotted(n)]
        if not used:
            continue
        launch = launches[0]
        value = repr(default.value) if isinstance(default, ast.Constant) else (dotted(default) or "its default")
        yield t.finding(
            "warning" if shown else "info", call.node,
            f"{dotted(used[0])} picks the device here, but {launch.source}:{launch.line} launches this script with "
            f"{launch.launcher}, which passes no --local_rank: every rank keeps the default {value}"
            + ("" if shown else " (the launch is read from the script's own comments)"),
            detail=("torchrun sets LOCAL_RANK in each worker's environment and adds nothing to its command line, so "
                    f"the argparse option (line {option.line}) holds its default on every rank: all ranks pick the "
                    "same GPU, or none sets up distributed training when the default is -1."),
            fix=('parser.add_argument("--local_rank", "--local-rank", type=int, '
                 'default=int(os.environ.get("LOCAL_RANK", 0)))'),
            evidence={"option_line": option.line, "default": value, "launch": f"{launch.source}:{launch.line}",
                      "launcher": launch.launcher, "source": _SOURCE},
            subjects=["arg:local_rank"])
        return


def _own_launches(t) -> list:
    """Launch lines in the script's own comments and module docstring (`# torchrun --nproc_per_node 2 train.py`,
    `\"\"\"Usage: python -m torch.distributed.launch ...\"\"\"`), whatever file name the copied line names."""
    from ..launchinfo import parse_launches  # noqa: PLC0415
    body = getattr(t.index.tree, "body", None) or []
    first = body[0] if body else None
    lo, hi = (first.lineno, first.end_lineno) if isinstance(first, ast.Expr) and isinstance(
        first.value, ast.Constant) and isinstance(first.value.value, str) else (0, -1)
    lines = [(l if lo <= no <= hi else l.split("#", 1)[1] if "#" in l else "") for no, l in enumerate(t.lines, 1)]
    text = "\n".join(lines)
    if "torchrun" not in text and "launch" not in text and "deepspeed" not in text:
        return []
    return parse_launches(text, os.path.basename(t.real_path))
