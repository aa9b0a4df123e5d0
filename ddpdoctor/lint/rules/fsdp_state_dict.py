"""An FSDP model's state dict taken on rank 0 only (round 9, a preview rule)."""
from __future__ import annotations

import ast
import re
from typing import Set

from ..analysis import Call, ModuleIndex
from ..names import dotted, last_name
from . import rule

_FSDP_WRAPS = ("torch.distributed.fsdp.FullyShardedDataParallel",
               "torch.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel")
_FSDP_NAMES = ("FSDP", "FullyShardedDataParallel")
# Functions that gather an FSDP model's (or its optimizer's) state: collectives every rank must enter
# (torch/distributed/fsdp/fully_sharded_data_parallel.py; torch/distributed/checkpoint/state_dict.py).
_GATHERING_FUNCS = ("optim_state_dict", "full_optim_state_dict", "sharded_optim_state_dict", "get_model_state_dict",
                    "get_optimizer_state_dict", "get_state_dict")
# pytorch/pytorch torch/distributed/fsdp/_state_dict_utils.py at 00c0db4e2b4a2c63eef4a9ce4ea34c86661d2c39:
# `_full_pre_state_dict_hook` and `_sharded_pre_state_dict_hook` run `_common_unshard_pre_state_dict_hook`, which
# unshards (all-gathers) the flat parameters over the process group before `state_dict()` returns.
_SOURCE = ("pytorch/pytorch torch/distributed/fsdp/_state_dict_utils.py 00c0db4e2b4a2c63eef4a9ce4ea34c86661d2c39 "
           "(_full_pre_state_dict_hook / _sharded_pre_state_dict_hook -> _common_unshard_pre_state_dict_hook)")


def _wrapped_names(index: ModuleIndex) -> Set[str]:
    """Names bound to an FSDP wrapper (`model = FSDP(model, ...)`, `self.model = FullyShardedDataParallel(...)`),
    and parameters annotated with it (`def save(model: FSDP, ...)`)."""
    out: Set[str] = set()

    def wraps(c) -> bool:
        return c is not None and (c.qual in _FSDP_WRAPS or (c.name in _FSDP_NAMES and c.qual is None))

    def arm(v) -> bool:  # `model = FSDP(model) if is_distributed else model.to(rank)` (fr67 U-EGformer)
        return isinstance(v, ast.IfExp) and any(
            (isinstance(x, ast.Call) and wraps(index._call_for(x))) or arm(x) for x in (v.body, v.orelse))

    fsdp_in = {}  # function node -> names it binds to an FSDP wrapper
    for a in index.assigns:
        if wraps(a.call) or arm(a.value):
            out.update(n for n in a.targets if n)
            if a.scope is not None and a.scope.kind == "function":
                fsdp_in.setdefault(id(a.scope.node), set()).update(n for n in a.targets if n)
    # a builder of this module that returns the wrapper it made (`def _setup_model(self, model): ... elif
    # self.strategy == "fsdp": model = FSDP(model, ...) ... return model`, fr87 JayDS22): what its callers bind the
    # result to (`self.model = self._setup_model(model)`) holds it too. Only a name the same function binds to FSDP
    # counts, so a plain `return model` elsewhere stays out.
    builders = set()
    for node in ast.walk(index.tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and id(node) in fsdp_in:
            if any(isinstance(r, ast.Return) and r.value is not None and dotted(r.value) in fsdp_in[id(node)]
                   for r in ast.walk(node)):
                builders.add(node.name)
    if builders:
        for a in index.assigns:
            c = a.call
            if c is not None and c.name in builders and (
                    isinstance(c.node.func, ast.Name) or dotted(getattr(c.node.func, "value", None)) in ("self", "cls")):
                out.update(n for n in a.targets if n)
    functions = {}
    for node in ast.walk(index.tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions.setdefault(node.name, node)
            for arg in node.args.args + node.args.kwonlyargs:
                if arg.annotation is not None and last_name(arg.annotation) in _FSDP_NAMES:
                    out.add(arg.arg)
    # a helper of this module handed the wrapper (`save_model(model, args, rank, ...)`, fr67 U-EGformer): its parameter
    # at that position holds it too, whatever the helper calls it
    for call in index.calls:
        fn = functions.get(call.name or "") if isinstance(call.node.func, ast.Name) else None
        if fn is None:
            continue
        params = [a.arg for a in fn.args.args]
        for i, x in enumerate(call.node.args):
            if i < len(params) and dotted(x) in out:
                out.add(params[i])
        for k in call.node.keywords:
            if k.arg in params and dotted(k.value) in out:
                out.add(k.arg)
    return out


def _in_state_dict_type_block(call: Call) -> bool:
    """`with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, cfg): model.state_dict()`."""
    for node in ast.walk(call.scope.node):
        if isinstance(node, (ast.With, ast.AsyncWith)) and any(
                isinstance(i.context_expr, ast.Call) and last_name(i.context_expr.func) == "state_dict_type"
                for i in node.items):
            if any(n is call.node for st in node.body for n in ast.walk(st)):
                return True
    return False


# Objects whose state_dict() is plain, whole on every rank, whatever block it is taken in: an LR scheduler
# (torch/optim/lr_scheduler.py: LRScheduler.state_dict returns its own __dict__), a GradScaler (torch/amp/grad_scaler.py:
# a few scalars), ShardedGradScaler (the same, torch/distributed/fsdp/sharded_grad_scaler.py), an EMA or meter.
_PLAIN_STATE = re.compile(r"sched|scaler|lr_?sch|ema\b|meter|sampler|loader|rng|generator", re.I)


def _plain_state(index: ModuleIndex, recv: str) -> bool:
    """`sch.state_dict()` / `scaler.state_dict()` inside `with FSDP.state_dict_type(...)` (fr64 Foundational_EMG): the
    receiver is a scheduler or a grad scaler, by its name or by what it was built from."""
    name = recv.rsplit(".", 1)[-1]
    if _PLAIN_STATE.search(name):
        return True
    for a in index.assigns:
        c = a.call
        if c is not None and recv in a.targets and (
                (c.qual or "").startswith("torch.optim.lr_scheduler.") or (c.name or "").endswith(
                    ("GradScaler", "Scheduler", "LR")) or "lr_scheduler" in (c.text or "")):
            return True
    return False


_NOT_FSDP_WRAPPERS = ("DistributedDataParallel", "DDP", "DataParallel")


def _under_non_fsdp_isinstance(call: Call) -> bool:
    """`model.module.state_dict() if isinstance(model, DistributedDataParallel) else model.state_dict()` (fr79
    hyunp2/Memb-TDA save_state, wrong at first read): the arm taken only when the object is a DDP/DataParallel
    wrapper holds no FSDP model, whatever name it is bound to."""
    def is_check(test) -> bool:
        return (isinstance(test, ast.Call) and last_name(test.func) == "isinstance" and len(test.args) == 2 and
                any(last_name(n) in _NOT_FSDP_WRAPPERS for n in ([test.args[1]] if not isinstance(test.args[1], ast.Tuple)
                                                                else test.args[1].elts)))
    for node in ast.walk(call.scope.node):
        if isinstance(node, ast.IfExp) and is_check(node.test) and any(n is call.node for n in ast.walk(node.body)):
            return True
        if isinstance(node, ast.If) and is_check(node.test) and any(
                n is call.node for st in node.body for n in ast.walk(st)):
            return True
    return False


def _flag_words(node) -> Set[str]:
    """The lower-case words of a flag test's name (`args.use_fsdp` -> {"args", "use", "fsdp"})."""
    text = dotted(node) or ""
    return set(re.split(r"[._]", text.lower())) if text else set()


def _says_fsdp(test) -> bool:
    """A test that holds when the run shards with FSDP: `args.fsdp`, `is_fsdp`, `cfg.use_fsdp`, `strategy == "fsdp"`,
    `"fsdp" in args.mode`."""
    if isinstance(test, (ast.Name, ast.Attribute)):
        return "fsdp" in _flag_words(test)
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        consts = [x.value for x in (test.left, test.comparators[0])
                  if isinstance(x, ast.Constant) and isinstance(x.value, str)]
        if isinstance(test.ops[0], (ast.Eq, ast.In)):
            return any("fsdp" in c.lower() for c in consts)
    return False


def _excludes_fsdp(test) -> bool:
    """A test that holds only when the model is NOT an FSDP wrapper: `not args.fsdp`, `is_ddp` / `args.ddp` (a DDP
    flag), `not is_distributed` (one process: no process group for FSDP to shard over), `strategy == "ddp"`, and
    `or` of such tests / `and` with one of them."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        w = _flag_words(test.operand)
        return _says_fsdp(test.operand) or bool(w & {"distributed", "ddp", "dist", "multi", "multigpu"})
    if isinstance(test, ast.BoolOp):
        parts = [_excludes_fsdp(v) for v in test.values]
        return all(parts) if isinstance(test.op, ast.Or) else any(parts)
    if isinstance(test, (ast.Name, ast.Attribute)):
        return "ddp" in _flag_words(test)
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
        consts = [x.value for x in (test.left, test.comparators[0])
                  if isinstance(x, ast.Constant) and isinstance(x.value, str)]
        return bool(consts) and all("ddp" in c.lower() and "fsdp" not in c.lower() for c in consts)
    return False


def _in_non_fsdp_arm(call: Call) -> bool:
    """The call sits in an arm of a run-mode test that leaves FSDP out: the body of `if (not is_distributed) or
    is_ddp:` (fr157 karlstratos/minGPU), the `elif`/`else` arm of `if args.fsdp:` (fr155 evseevgrv/SignSGD), the
    `else` of `... if is_fsdp else ...`. The model there is the DDP or the plain one, whatever name it is bound to:
    the file wraps in FSDP only under the other arm."""
    for node in ast.walk(call.scope.node):
        if not isinstance(node, (ast.If, ast.IfExp)):
            continue
        body = node.body if isinstance(node, ast.If) else [node.body]
        orelse = node.orelse if isinstance(node, ast.If) else [node.orelse]
        if _excludes_fsdp(node.test) and any(n is call.node for st in body for n in ast.walk(st)):
            return True
        if _says_fsdp(node.test) and any(n is call.node for st in orelse for n in ast.walk(st)):
            return True
    return False


def _gathers(call: Call, wrapped: Set[str], index: ModuleIndex = None) -> str:
    """What about `call` gathers an FSDP model's state, or ""."""
    if call.name == "state_dict" and not call.node.args:
        recv = call.recv or ""
        base = recv[:-len(".module")] if recv.endswith(".module") else recv
        if base in wrapped:
            return f"{recv}.state_dict() of the FSDP model"
        if _in_state_dict_type_block(call) and not (index is not None and _plain_state(index, recv)):
            return f"{recv}.state_dict() inside FSDP.state_dict_type(...)"
        return ""
    if call.name in _GATHERING_FUNCS and (call.recv in _FSDP_NAMES or "torch.distributed" in (call.qual or "")):
        return f"{call.text}()"
    return ""


# Saves that gather the sharded state inside the library when the run uses FSDP: accelerate's save_state /
# get_state_dict (accelerate/accelerator.py: FSDP goes through save_fsdp_model, a collective) and the HF Trainer's
# save_model / save_state (transformers/trainer.py: under FSDP, `self.accelerator.get_state_dict(self.model)`).
_LIBRARY_SAVES = {"save_state": ("accelerator",), "get_state_dict": ("accelerator",),
                  "save_model": ("trainer",)}


def _fsdp_configured(t, index: ModuleIndex) -> str:
    """The run shards with FSDP through a library: `TrainingArguments(fsdp="full_shard ...")` or a kwargs dict with an
    "fsdp" key (trl's SFTConfig(**kwargs)), an accelerate FSDP plugin, or a launch line of this file passing
    `--use_fsdp` (accelerate launch)."""
    for call in index.calls:
        kw = call.kw("fsdp")
        if isinstance(kw, ast.Constant) and isinstance(kw.value, str) and kw.value.strip():
            return f"{call.text}(fsdp={kw.value!r})"
        if (call.name or "").startswith("FullyShardedDataParallelPlugin"):
            return f"{call.text}()"
    for node in ast.walk(index.tree):
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and k.value == "fsdp" and isinstance(v, ast.Constant) and \
                        isinstance(v.value, str) and v.value.strip():
                    return f'"fsdp": {v.value!r}'
    ctx = t.facts.context
    if ctx is not None:
        for launch in ctx.launches_of(index.path):
            if launch.fsdp:
                return f"{launch.launcher} --use_fsdp ({launch.source}:{launch.line})"
    return ""


@rule("LINT021", "fsdp-state-dict-on-one-rank")
def fsdp_state_dict_on_one_rank(t):
    """An FSDP model's state dict (or optimizer state) taken under a rank-0 test.

    What it checks
        In a file that wraps a model in `FullyShardedDataParallel`: `model.state_dict()` /
        `model.module.state_dict()` of a name bound to the wrapper (or a parameter annotated with it), any
        `.state_dict()` inside `with FSDP.state_dict_type(...)`, and `FSDP.optim_state_dict` /
        `full_optim_state_dict` / `get_model_state_dict` / `get_state_dict`, under a test that holds on rank 0
        only (`if rank == 0:`, after `if rank != 0: return`, in a helper only called under one). A call in an arm
        of a run-mode test that leaves FSDP out (`if not args.fsdp:`, the `else` of `if args.fsdp:`, `if is_ddp:`,
        `if not is_distributed:`) is the DDP or plain model's and stays quiet. A preview rule (round 9): a note by
        default, a warning with `--preview`.

    Why it matters
        FSDP keeps each rank's shard of the flat parameters. Its state-dict hooks unshard them first
        (`_full_pre_state_dict_hook` / `_sharded_pre_state_dict_hook` call `_common_unshard_pre_state_dict_hook`,
        torch/distributed/fsdp/_state_dict_utils.py): an all-gather that every rank of the group must join. Taken
        on rank 0 alone it waits for the others forever (they are in the next barrier or the next step), and
        `model.module.state_dict()` on rank 0 returns its own shard at best.

    Example
        if rank == 0:
            with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, cfg):
                torch.save(model.state_dict(), "ckpt.pt")

    Fix
        Gather on every rank, write on one:
        `with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, FullStateDictConfig(offload_to_cpu=True,
        rank0_only=True)): state = model.state_dict()` outside the rank test, then `if rank == 0:
        torch.save(state, path)`; or `torch.distributed.checkpoint.save(...)` on every rank.
    """
    index = t.index
    yield from _library_saves(t, index)
    if not any(q in index.by_qual for q in _FSDP_WRAPS) and not any(n in index.by_name for n in _FSDP_NAMES):
        return
    wrapped = _wrapped_names(index)
    for call in index.calls:
        what = _gathers(call, wrapped, index)
        if not what or not t.facts.rank0(index, call, single=False) or _under_non_fsdp_isinstance(call) or \
                _in_non_fsdp_arm(call):
            continue
        yield t.finding(
            "warning", call.node,
            f"{what} runs on rank 0 only; FSDP gathers the shards of every rank to build it (the others never join: "
            "a hang, or rank 0's own shard)",
            detail=("FSDP's state-dict hooks unshard the flat parameters (an all-gather over the process group) before "
                    "state_dict() returns; every rank must call it, and rank0_only=True then leaves the full dict on "
                    "rank 0 only."),
            fix=("cfg = FullStateDictConfig(offload_to_cpu=True, rank0_only=True)\n"
                 "with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, cfg):\n"
                 "    state = model.state_dict()        # every rank: a collective\n"
                 "if dist.get_rank() == 0:\n"
                 "    torch.save(state, path)           # one writer"),
            evidence={"gathers": what, "source": _SOURCE},
        )


def _library_saves(t, index: ModuleIndex):
    """`accelerator.save_state(...)` / `trainer.save_model(...)` under a rank-0 test in a run configured for FSDP."""
    sites = [c for name, recvs in _LIBRARY_SAVES.items() for c in index.by_name.get(name, ())
             if any(r in (c.recv or "").lower() for r in recvs)]
    if not sites:
        return
    how = None
    for call in sites:
        if not t.facts.rank0(index, call, single=False):
            continue
        if how is None:
            how = _fsdp_configured(t, index)
        if not how:
            return
        yield t.finding(
            "warning", call.node,
            f"{call.text}() runs on rank 0 only in an FSDP run ({how}); it gathers the shards of every rank (the "
            "others never join: a hang, or rank 0's own shard)",
            detail=("Under FSDP, accelerate's save_state/get_state_dict and the Trainer's save_model collect the "
                    "sharded state with collectives every rank must enter; they write on the main process themselves."),
            fix=f"{call.text}(...)   # on every rank, outside the rank test: it writes on the main process only",
            evidence={"gathers": f"{call.text}()", "fsdp": how, "source": _SOURCE},
        )
