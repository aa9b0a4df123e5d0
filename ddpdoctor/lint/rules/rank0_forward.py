"""F8: a DDP-wrapped model run on rank 0 only, so its collectives wait for ranks that never come."""
from __future__ import annotations

import ast
import re
import os
from typing import Dict, NamedTuple, Optional, Set

from ..analysis import Call, ModuleIndex, Scope, eq_sides, module_fact
from ..conditions import is_rankish
from ..facts import buffer_marker, index_buffer_marker
from ..names import last_name, dotted
from . import rule
from ._common import DDP

_MODEL_HINTS = ("model", "net", "module", "encoder", "decoder", "policy", "critic", "actor", "unet", "vae")
# What accelerator.prepare is also handed besides models: optimizers, schedulers, loaders, datasets.
_NOT_MODELS = re.compile(r"optim|sched|(?:^|_)lr(?:$|_)|loader|(?:^|_)dl(?:$|_)|data|sampler|(?:^|_)opt(?:$|_)|iter",
                         re.IGNORECASE)


def _model_like(name: str) -> bool:
    """A name `accelerator.prepare` returns a wrapped model for: a model-like name, or any name that is not an
    optimizer, scheduler or loader (`self.generator`, `self.discriminator`)."""
    last = name.rsplit(".", 1)[-1].lower()
    return any(h in last for h in _MODEL_HINTS) or (bool(last) and not _NOT_MODELS.search(last))


def _visible(name: str, bound_in: Scope, used_in: Scope) -> bool:
    """A name bound to DDP in `bound_in` means the same object in `used_in`."""
    if name.startswith("self."):
        return bound_in.cls is not None and bound_in.cls is used_in.cls
    s: Optional[Scope] = used_in
    while s is not None:
        if s is bound_in:
            return True
        if name.split(".")[0] in s.locals and s is not bound_in:
            return False
        s = s.parent
    return False


def ddp_names(index: ModuleIndex) -> Dict[str, int]:
    """Dotted names bound to a DDP-wrapped model -> line of the wrap (any scope)."""
    return {n: line for n, line, _scope in _ddp_bindings(index)}


@module_fact
def _ddp_bindings(index: ModuleIndex) -> list:
    """(dotted name, line of the wrap, scope it is bound in) for every DDP-wrapped model."""
    out: list = []
    for a in index.assigns:
        call = a.call
        if call is None:
            continue
        # `DistributedDataParallel(model, device_ids=[rank]).to(device)`: the wrap at the root of a method chain
        root = a.value
        while isinstance(root, ast.Call) and isinstance(root.func, ast.Attribute) and \
                isinstance(root.func.value, ast.Call) and root.func.attr in _CHAIN:
            root = root.func.value
        if root is not a.value:
            inner = index._call_for(root)
            if inner is not None and inner.qual == DDP:
                call = inner
        if call.qual == DDP or (index.class_of_call(call) is not None and
                                DDP in index.class_bases(index.class_of_call(call))):
            for n in a.targets:
                if n:
                    out.append((n, call.line, a.scope))
        elif call.name == "prepare" and call.recv and "accelerator" in call.recv.lower():
            # model, optimizer, loader = accelerator.prepare(model, optimizer, loader); a frozen model
            # (`net_lpips.requires_grad_(False)`) is not wrapped: accelerate wraps only models with trainable
            # parameters (accelerate accelerator.py prepare_model)
            frozen = _frozen_names(index)
            for i, arg in enumerate(call.node.args):
                name = dotted(arg) or ""
                if i < len(a.targets) and a.targets[i] and _model_like(name) and \
                        name not in frozen:
                    out.append((a.targets[i], call.line, a.scope))
            if len(call.node.args) == 1 and len(a.targets) == 1 and a.targets[0] and _model_like(
                    dotted(call.node.args[0]) or "") and \
                    dotted(call.node.args[0]) not in frozen:
                out.append((a.targets[0], call.line, a.scope))
    return out


_CHAIN = {"to", "cuda", "cpu", "half", "float", "bfloat16", "train", "eval", "requires_grad_"}  # return the module


_WRAP_NAMES = ("DistributedDataParallel", "DDP")


def _returns_a_ddp_model(fn: ast.AST) -> bool:
    """A project function that wraps a model in DistributedDataParallel and returns something: its caller gets the
    wrapped model (JRestom/SkipLess utils.build_model_from_config, fr56)."""
    wraps = any(isinstance(n, ast.Call) and (last_name(n.func) or "") in _WRAP_NAMES for n in ast.walk(fn))
    return wraps and any(isinstance(n, ast.Return) and n.value is not None for n in ast.walk(fn))


def _factory_bindings(t, index: ModuleIndex) -> list:
    """`model = build_model_from_config(cfg, rank, device)` where the function (another file of the run or a project
    module the run imports; not this file, whose wraps _ddp_bindings sees) wraps in DDP and returns the model.
    The other files' module-level functions that do are found once per run (cached), so a file pays one dict
    lookup per assignment."""
    factories = t.facts.cache.get("rank0_forward.factories")
    if factories is None:
        factories = set()
        for ix in t.facts.indexes.values() if len(t.facts.indexes) > 1 else ():
            if DDP not in ix.by_qual:
                continue
            for s in ix.module.functions.values():
                if any(c.qual == DDP for c in s.calls) and any(
                        isinstance(n, ast.Return) and n.value is not None for n in ast.walk(s.node)):
                    factories.add((id(ix), s.name))
        t.facts.cache["rank0_forward.factories"] = factories
    if not factories and not t.facts.imported:
        return []
    out: list = []
    local = None
    for a in index.assigns:
        call = a.call
        if call is None or not call.name or len(a.targets) != 1 or not a.targets[0]:
            continue
        if call.name in ("DistributedDataParallel", "DDP") or (call.qual or "").startswith(("torch.", "transformers.")):
            continue
        hit = any((i, call.name) in factories for i in (id(ix) for ix in t.facts.indexes.values() if ix is not index))
        if not hit:
            fn = t.facts.imported_function(call.name)
            hit = fn is not None and _returns_a_ddp_model(fn)
        if not hit or not _model_like(a.targets[0]):
            continue
        if local is None:
            local = {s.name for s in index.scopes if s.kind == "function"}
        if call.name in local:
            continue
        out.append((a.targets[0], call.line, a.scope))
    return out


def _frozen_names(index: ModuleIndex) -> Set[str]:
    """Models frozen before accelerate sees them: `net.requires_grad_(False)`, `net.eval().requires_grad_(False)`."""
    out: Set[str] = set()
    for c in index.by_name.get("requires_grad_", ()):
        arg = c.node.args[0] if c.node.args else c.kw("requires_grad")
        if isinstance(arg, ast.Constant) and arg.value is False and c.recv:
            out.add(c.recv[:-len(".eval()")] if c.recv.endswith(".eval()") else c.recv)
    return out


def _is_forward(call: Call, name: str) -> bool:
    return call.text == name or call.text == f"{name}.forward"


def _calls_param(index: ModuleIndex, fn: Scope, param: str, depth: int, seen: Set[int]) -> Optional[Call]:
    """A call in `fn` (or what it passes `param` on to) that runs the model held in `param`."""
    if depth > 3 or id(fn) in seen:
        return None
    seen.add(id(fn))
    for c in fn.calls:
        if _is_forward(c, param) and not _unwrapped_before(fn, param, c.line):
            return c
    for c in fn.calls:
        inner = _passes_to(index, c, param, fn)
        if inner is not None:
            callee, p = inner
            hit = _calls_param(index, callee, p, depth + 1, seen)
            if hit is not None:
                return hit
    return None


def _unwrapped_before(fn: Scope, param: str, line: int) -> bool:
    """`if hasattr(model, "module"): model = model.module` before the forward: the function runs the plain
    module it was handed inside the wrapper, which issues no collective."""
    for a in fn.assigns:
        if param in a.targets and a.node.lineno < line and _unwraps(a.value, param):
            return True
    return False


def _unwraps(v, param: str) -> bool:
    """`param.module`, `accelerator.unwrap_model(param)` (also `.eval()` after it), `getattr(param, "module",
    param)`, or `param.module if hasattr(param, "module") else param`: the plain module inside the wrapper."""
    while isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr in _CHAIN:
        v = v.func.value
    if isinstance(v, ast.IfExp):
        return _unwraps(v.body, param) or _unwraps(v.orelse, param)
    if isinstance(v, ast.Attribute):
        return v.attr == "module" and dotted(v.value) == param
    if isinstance(v, ast.Call) and v.args and dotted(v.args[0]) == param:
        name = (dotted(v.func) or "").rsplit(".", 1)[-1]
        return name in ("unwrap_model", "de_parallel", "unwrap") or (
            name == "getattr" and len(v.args) >= 2 and isinstance(v.args[1], ast.Constant) and v.args[1].value == "module")
    return False


def _param_passed(call: Call, params: list, name: str) -> Optional[str]:
    """The parameter of `params` (self/cls dropped for a method call) that `call` hands `name` to."""
    if params and params[0] in ("self", "cls") and isinstance(call.node.func, ast.Attribute):
        params = params[1:]
    for i, arg in enumerate(call.node.args):
        if dotted(arg) == name and i < len(params):
            return params[i]
    for kw in call.node.keywords:
        if kw.arg and dotted(kw.value) == name and kw.arg in params:
            return kw.arg
    return None


class _Imported(NamedTuple):
    """A forward found in a function of an imported project module that is not linted (no Scope for it)."""
    line: int
    no_grad: bool
    backward: bool
    path: str


def _imported_forward(t, call: Call, name: str) -> Optional[_Imported]:
    """`evaluate(device, model, ...)` under a rank-0 test where `evaluate` is defined in another module of the
    project (`from evaluate import evaluate`, Comprehensive-Transformer-TTS) and calls the model it is given
    (`model(*batch)`, not `model.module(...)`)."""
    if not call.name or (call.qual or "").split(".")[0] in ("torch", "transformers", "accelerate", "deepspeed"):
        return None
    fn = t.facts.imported_function(call.name)
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    param = _param_passed(call, [a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs], name)
    if param is None:
        return None
    def takes_module(v) -> bool:  # `model.module`, `accelerator.unwrap_model(model)`, ... (see _unwraps)
        return _unwraps(v, param)

    unwrapped = [n.lineno for n in ast.walk(fn) if isinstance(n, ast.Assign) and takes_module(n.value)
                 and any(isinstance(x, ast.Name) and x.id == param for x in n.targets)]
    quiet = [(w.lineno, w.end_lineno or w.lineno) for w in ast.walk(fn) if isinstance(w, (ast.With, ast.AsyncWith))
             and any(isinstance(i.context_expr, ast.Call) and (dotted(i.context_expr.func) or "").endswith(
                 ("no_grad", "inference_mode")) for i in w.items)]
    backward = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "backward"
                   for n in ast.walk(fn))
    for n in ast.walk(fn):
        if isinstance(n, ast.Call) and dotted(n.func) in (param, f"{param}.forward") and \
                not any(u < n.lineno for u in unwrapped):
            no_grad = any(a <= n.lineno <= b for a, b in quiet) or any(
                (dotted(d) or "").endswith(("no_grad", "inference_mode")) or
                (isinstance(d, ast.Call) and (dotted(d.func) or "").endswith(("no_grad", "inference_mode")))
                for d in fn.decorator_list)
            return _Imported(n.lineno, no_grad, backward and not no_grad, fn.name)
    return None


_UNSEEN = "<not linted>"
# What an evaluation helper is called (`validate(model, loader)`, `knn_monitor(net=model, ...)`,
# `evaluate_model(model, ...)`): a function that runs the model it is handed.
_EVAL_NAME = re.compile(r"(?:^|_)(?:val|valid|validate|validation|eval|evaluate|evaluation|test|knn|monitor|predict|"
                        r"infer|inference|sample|sampling|generate|generation)(?:_|$)", re.I)  # sampling_fn: fr72 gabrielraya
_LIBRARY_ROOTS = ("torch", "transformers", "accelerate", "deepspeed", "numpy", "sklearn", "lightning",
                  "pytorch_lightning", "timm", "torchvision", "evaluate", "datasets", "wandb", "tqdm")


def _unseen_evaluation(t, call: Call, name: str) -> Optional[_Imported]:
    """`val_loss = validate(model, val_loader)` under a rank-0 test where `validate` is imported from a module of the
    project that is not among the files linted (`from src.validate import validate`, fr64 APT; `knn_monitor(net=model)`,
    fr65 spike_contrastive): the function is named for evaluation and handed the DDP model, so it most likely runs it.
    Its body is not seen: a note, never more."""
    qual = call.qual or ""
    if call.name and "." not in qual and qual in ("", call.name) and any(
            m.lstrip(".").split(".")[0] not in _LIBRARY_ROOTS for m in t.index.star_modules) and not any(
            t.sibling(m) is not None for m in t.index.star_modules):
        # `from engine import *` then a bare `evaluate(model, ...)` (fr100 Cecilia-xue/Tri-Former), engine.py found
        # nowhere (neither linted nor next to the file): the name comes from that project module, unseen
        qual = "*." + call.name
    if not call.name or not qual or qual.split(".")[0] in _LIBRARY_ROOTS or "." not in qual:
        return None
    if t.facts.imported_function(call.name) is not None or not _EVAL_NAME.search(call.name):
        return None
    if not any(dotted(a) == name for a in call.node.args) and not any(
            dotted(k.value) == name for k in call.node.keywords):
        return None
    if any(k.arg and _SAYS_WRAPPED.search(k.arg) and isinstance(k.value, ast.Constant) and k.value.value is True
           for k in call.node.keywords):
        return None  # `zero_shot_eval(args, clip_model, ..., trained_on_multi_gpu=True)` (fr64 ACE-LoRA): told it is wrapped
    return _Imported(call.line, bool(call.ctx.no_grad), False, _UNSEEN)


# A keyword that tells an unseen helper the model it gets is wrapped, so it can unwrap it (`trained_on_multi_gpu=True`).
_SAYS_WRAPPED = re.compile(r"multi_?gpu|ddp|distributed|parallel|wrapped", re.I)


def _passes_to(index: ModuleIndex, call: Call, name: str, scope: Scope):
    """(callee, parameter) when `call` passes the object `name` to a function of this file."""
    callee = index.function_of(call.node.func, scope)
    if callee is None or callee.kind != "function":
        return None
    params = list(callee.params)
    if params and params[0] in ("self", "cls") and isinstance(call.node.func, ast.Attribute):
        params = params[1:]
    for i, arg in enumerate(call.node.args):
        if dotted(arg) == name and i < len(params):
            return callee, params[i]
    for kw in call.node.keywords:
        if kw.arg and dotted(kw.value) == name and kw.arg in callee.params:
            return callee, kw.arg
    return None


def _other_ranks_call_it_too(call: Call, name: str) -> bool:
    """`if rank == 0: out = model(a) else: out = model(b)`: every rank runs the forward, just differently; also the
    same helper called in both arms (`if rank == 0: train(model, writer) else: train(model)`, round 19)."""
    gate = call.ctx.gate
    if not isinstance(gate, ast.If) or not gate.body:
        return False
    in_body = gate.body[0].lineno <= call.line <= (gate.body[-1].end_lineno or gate.body[-1].lineno)
    other = gate.orelse if in_body else gate.body
    # the same helper called in the other arm (`if local_rank == 0: train(model, ..., writer) else: train(model, ...)`,
    # fr126 gusalsdmlwlq x3, three false errors at first read): every rank runs what it runs
    callee = dotted(call.node.func)
    for stmt in other:
        for n in ast.walk(stmt):
            if isinstance(n, ast.Call) and (dotted(n.func) in (name, f"{name}.forward") or
                                            (callee is not None and dotted(n.func) == callee)):
                return True
    return in_body and _sibling_rank_forwards(call, gate, name)


def _rank_equals(test: ast.AST):
    """(`rank`, 0) for `rank == 0` / `0 == rank`; None for anything else."""
    sides = eq_sides(test)
    if sides is None:
        return None
    left, right = sides
    if isinstance(right, ast.Constant) and isinstance(right.value, int) and isinstance(left, (ast.Name, ast.Attribute)):
        return dotted(left), right.value
    return None


def _sibling_rank_forwards(call: Call, gate: ast.If, name: str) -> bool:
    """`if rank == 0: out = model(a)` and, in the same function, `if rank == 1: out = model(b)`: each rank runs its
    own forward of the model (fr84 pipedream ddp_test.py, world_size 2). Not a forward on one rank."""
    mine = _rank_equals(gate.test)
    if mine is None:
        return False
    for node in ast.walk(call.scope.node):
        if node is gate or not isinstance(node, ast.If):
            continue
        theirs = _rank_equals(node.test)
        if theirs is None or theirs[0] != mine[0] or theirs[1] == mine[1]:
            continue
        if any(isinstance(n, ast.Call) and dotted(n.func) in (name, f"{name}.forward")
               for stmt in node.body for n in ast.walk(stmt)):
            return True
    return False


def single_process_path(call: Call) -> bool:
    """Under `if local_rank == -1:` (the old transformers template's "not distributed" branch) there is
    no DDP wrapper to hang on, whatever the name held elsewhere."""
    for test, side in call.ctx.branch:
        if side != 0:
            continue  # only the body of the `if` is the non-distributed path (and an elif chain's else arms are long)
        tests = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
        for t in tests:
            if isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], (ast.Eq, ast.Is)) and \
                    is_rankish(t.left) and side == 0 and (_minus_one(t.comparators[0]) or (
                        isinstance(t.comparators[0], ast.Constant) and t.comparators[0].value is None)):
                return True  # `local_rank == -1`, or `local_rank is None` (no launcher filled the argument)
    return False


def _minus_one(expr: ast.AST) -> bool:
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub) and isinstance(expr.operand, ast.Constant):
        return expr.operand.value == 1
    return isinstance(expr, ast.Constant) and expr.value == -1


def _handed_back(value, name: str) -> bool:
    """`model, loss, acc = train_one_epoch(model, ...)` (Cecilia-xue/AGT's engine returns the model it trained, fr53),
    `model = model.to(device)`: a call given the wrapped object itself that hands it back is not a fresh model; one
    that unwraps it (`model.module`, `accelerator.unwrap_model(model)`) is."""
    if not isinstance(value, ast.Call) or _unwraps(value, name):
        return False
    if isinstance(value.func, ast.Attribute) and dotted(value.func.value) == name:
        return value.func.attr in ("to", "cuda", "cpu", "half", "float", "train", "eval", "requires_grad_")
    return any(dotted(a) == name for a in value.args) or any(dotted(k.value) == name for k in value.keywords)


def _rebound_before(name: str, wrap_line: int, call: Call) -> bool:
    """`model = model_class.from_pretrained(ckpt)` between the wrap and the call: a fresh, unwrapped model."""
    s: Optional[Scope] = call.scope
    while s is not None:
        for a in s.assigns:
            line = a.node.lineno
            if name in a.targets and wrap_line < line < call.line and not (a.call is not None and a.call.qual == DDP) \
                    and not _handed_back(a.value, name):
                return True
        if name.split(".")[0] in s.locals or s.kind == "module":
            break
        s = s.parent
    return False


def _global_model_in_callee(index: ModuleIndex, call: Call, bindings: list):
    """`estimate_loss()` under `if master_process:` where estimate_loss runs the module-level DDP `model`
    (nanoGPT): the function takes no argument, it reads the global. Also `self.evaluate()` where the
    method runs `self.net`, the DDP model the object holds, and a function nested in the wrapping one that reads
    the wrapped name from its enclosing scope (round 25)."""
    fn = index.function_of(call.node.func, call.scope)
    if fn is None or fn.kind != "function":
        return None
    for s in index.reachable(fn):
        for name, wrap_line, bound_in in bindings:
            held = (bound_in.kind == "module" and _visible(name, bound_in, s)) or (
                name.startswith("self.") and bound_in.cls is not None and bound_in.cls is s.cls) or (
                # a function nested in the one that wraps, called there after the wrap: its free name is the DDP
                # model (round 25, fr166 yashp5/transformer: `def estimate_loss(): ... model(x, y)` inside train(),
                # called under `if rank == 0:`, a miss)
                bound_in.kind == "function" and "." not in name and call.scope is bound_in and
                call.line > wrap_line and s is not bound_in and _visible(name, bound_in, s) and
                not _rebound_before(name, wrap_line, call))
            if not held:
                continue
            # the name itself, or a local alias of it (`net = self.net`), run here or handed to a helper
            for used in [name] + _aliases(s, name):
                for c in s.calls:
                    if _is_forward(c, used) and not _unwrapped_before(s, used, c.line):
                        return name, wrap_line, c
                    passed = _passes_to(index, c, used, s)
                    if passed is not None:
                        inner = _calls_param(index, passed[0], passed[1], 0, set())
                        if inner is not None:
                            return name, wrap_line, inner
    return None


def _aliases(scope: Scope, name: str) -> list:
    """Local names of `scope` bound to `name` itself (`model = self.model`), not to its `.module`."""
    return [a.targets[0] for a in scope.assigns if len(a.targets) == 1 and a.targets[0] and a.value is not None
            and dotted(a.value) == name and a.targets[0] != name]


def _constructor_held(index: ModuleIndex, by_name: dict) -> list:
    """`Runner(model)` with `model` wrapped in DDP and `self.net = net` in Runner.__init__: the class's methods
    run the DDP model as `self.net`. Bindings (attribute, line of the wrap, __init__ scope) of this file's classes."""
    out: list = []
    classes = index.module.classes
    if not classes:
        return out
    for c in index.calls:
        # cheap tests first: a call named like a class of this file, handed a DDP-bound name
        if c.name not in classes or not any(dotted(x) in by_name for x in list(c.node.args) + [k.value for k in c.node.keywords]):
            continue
        klass = index.local_class(c.node.func, c.scope)
        init = klass.functions.get("__init__") if klass is not None else None
        if init is None:
            continue
        params = [p for p in init.params if p not in ("self", "cls")]
        passed = {}
        for i, arg in enumerate(c.node.args):
            if i < len(params) and dotted(arg) in by_name:
                passed[params[i]] = dotted(arg)
        for kw in c.node.keywords:
            if kw.arg in params and dotted(kw.value) in by_name:
                passed[kw.arg] = dotted(kw.value)
        for p, outer in passed.items():
            got = [b for b in by_name[outer] if _visible(outer, b[2], c.scope)]
            if not got:
                continue
            for a in init.assigns:
                if a.value is not None and dotted(a.value) == p:
                    out += [(n, got[0][1], init) for n in a.targets if n and n.startswith("self.")]
    return out


def _held_by_object(t, index: ModuleIndex, call: Call, by_name: dict):
    """`ev = Evaluator(network=model)` with `model` wrapped in DDP, then `ev.run()` on rank 0, where the
    class keeps the argument (`self.network = network`) and `run` calls `self.network(x)`."""
    if not call.recv or "." in call.recv or not call.name:
        return None
    built = None
    s = call.scope
    while s is not None and built is None:
        for a in s.assigns:
            if call.recv in a.targets and a.call is not None:
                built = a.call
        s = s.parent
    if built is None:
        return None
    klass = index.local_class(built.node.func, built.scope)
    owner = index
    if klass is None:
        found = t.facts.find_class((built.text or "").rsplit(".", 1)[-1])
        if found is None:
            return None
        owner, klass = found
    init = klass.functions.get("__init__")
    method = klass.functions.get(call.name)
    if init is None or method is None:
        return None
    params = [p for p in init.params if p not in ("self", "cls")]
    passed = {}
    for i, arg in enumerate(built.node.args):
        if i < len(params) and dotted(arg) in by_name:
            passed[params[i]] = dotted(arg)
    for kw in built.node.keywords:
        if kw.arg and dotted(kw.value) in by_name:
            passed[kw.arg] = dotted(kw.value)
    if not passed:
        return None
    attrs = {}
    for a in init.assigns:
        src = dotted(a.value) if a.value is not None else None
        if src in passed:
            for n in a.targets:
                if n and n.startswith("self."):
                    attrs[n] = passed[src]
    for s2 in owner.reachable(method):
        for c in s2.calls:
            for attr, outer in attrs.items():
                if _is_forward(c, attr):
                    name, wrap_line, _bound = by_name[outer][0]
                    return name, wrap_line, c
    return None


@rule("LINT007", "ddp-forward-on-one-rank", catalogue=("F8",))
def ddp_forward_on_one_rank(t):
    """A DDP-wrapped model called inside `if rank == 0:` / `is_main_process` blocks.

    What it checks
        Calls of a model wrapped in `DistributedDataParallel` (or returned by
        `accelerator.prepare`; also bound as `DDP(model, ...).to(device)`) made under a test that only
        rank 0 passes: `rank == 0`,
        `local_rank in (-1, 0)`, `dist.get_rank() == 0`, `accelerator.is_main_process`,
        `trainer.is_world_process_zero()`, a flag holding such a test (`master_process`), or after
        `if rank != 0: return`. Also a function called there that runs the model it is given
        (`evaluate(ddp_model)`, also defined in another module of the project and not linted, unless it
        unwraps `model.module` first) or the module-level DDP model (nanoGPT's `estimate_loss()` under
        `if master_process:`; a star import, `from engine import *`, counts as importing engine's
        functions), or (round 25) a function nested in the wrapping one that runs the wrapped name it closes over. Quiet under `if local_rank == -1:` (no DDP there) and when the name
        was rebound to a fresh model (`model = Model.from_pretrained(ckpt)`) before the call; a call
        handed the wrapped model that hands it back (`model, loss = train_one_epoch(model, ...)`,
        `model = model.to(device)`) does not make it fresh.
        Models held by objects count too (`self.evaluate()` running `self.net`, an evaluator given
        `network=model` and run on rank 0, a runner built as `Runner(model)` whose methods run
        `self.net`), also through a local alias (`net = self.net`) and a helper it is handed to. A frozen model handed to `accelerator.prepare` is not
        wrapped (accelerate wraps only models with trainable parameters). Under no_grad the forward
        issues a collective only to broadcast buffers: a note when the model's class (in the file,
        the run, or a project module it is imported from, through a package's re-exports) shows no
        buffers in its module's code or the project modules that module imports (docstrings and
        comments do not count), or `broadcast_buffers=False`. With grad on,
        the same holds when no rank-0-only backward follows (the reducer is only prepared).

    Why it matters
        DDP's forward takes part in collectives: it broadcasts buffers (broadcast_buffers=True by
        default) and prepares the gradient reduction. Rank 0 waits for peers that never enter the
        same call, so the job hangs until the NCCL watchdog kills it after 30 minutes
        (pytorch/pytorch#53979, #89716, mlfoundations/open_clip#1152). Under `torch.no_grad()` a
        model without buffers gets through, so that case is a warning when the model's buffers are
        shown and a note when they are unknown. A callee that unwraps the model first
        (`model = accelerator.unwrap_model(model)`, `model.module`) runs no collective.

    Example
        model = DDP(model, device_ids=[local_rank])
        if rank == 0:
            val_loss = model(val_batch).loss

    Fix
        Evaluate on every rank (with a DistributedSampler) and reduce the metric, or use the
        unwrapped module on rank 0: `model.module(val_batch)` under `torch.no_grad()`.
    """
    index = t.index
    bindings = _ddp_bindings(index) + _factory_bindings(t, index)
    if not bindings:
        return
    by_name: Dict[str, list] = {}
    for name, wrap_line, bound_in in bindings:
        by_name.setdefault(name, []).append((name, wrap_line, bound_in))
    for name, wrap_line, bound_in in _constructor_held(index, by_name):
        if name not in by_name:
            bindings.append((name, wrap_line, bound_in))
            by_name.setdefault(name, []).append((name, wrap_line, bound_in))
    for call in index.calls:
        if not t.facts.rank0(index, call, single=False) or single_process_path(call):
            continue
        # Only bindings this call could mention: its callee, or a name passed to it.
        mentioned = {call.text, call.recv} | {dotted(a) for a in call.node.args} | \
            {dotted(k.value) for k in call.node.keywords}
        # in source order (the first wrap first), not the set's hash order: with several DDP models mentioned the
        # finding named one or the other by PYTHONHASHSEED
        candidates = sorted(((n, b) for n in mentioned if n in by_name for b in by_name[n]),
                            key=lambda c: (c[1][1], c[0]))
        # a local alias of a DDP model (`model = self.model` after `if rank != 0: return`)
        latest = {}  # the alias's last binding before the call (`model_without_ddp = model.module`, fr70 AIZOOTech)
        for a in call.scope.assigns:
            if len(a.targets) == 1 and a.targets[0] in mentioned and a.node.lineno < call.line and (
                    a.targets[0] not in latest or a.node.lineno > latest[a.targets[0]].node.lineno):
                latest[a.targets[0]] = a
        for a in latest.values():
            if a.value is None or a.targets[0] in by_name:
                continue
            # `eval_model = ema.model if cfg.eval_use_ema else model` (fr65 modern-llm): either arm may be the DDP model
            arms = [a.value.body, a.value.orelse] if isinstance(a.value, ast.IfExp) else [a.value]
            if len(arms) == 2 and any((dotted(x) or "").endswith(".module") for x in arms):
                continue  # `core_model = model.module if is_distributed else model` (fr64 KERMT): the unwrap idiom
            for arm in arms:
                if dotted(arm) in by_name:
                    # an alias bound before the wrap in the same scope holds the plain model (`model_without_ddp =
                    # model`, then `model = DDP(model)`)
                    candidates += [(a.targets[0], b) for b in by_name[dotted(arm)]
                                   if not (b[2] is a.scope and a.node.lineno < b[1])]
        hit_name = None
        for used, (name, wrap_line, bound_in) in candidates:
            if not _visible(name, bound_in, call.scope):
                continue
            if used != name:
                name = used  # the alias is what this scope runs
            elif _rebound_before(name, wrap_line, call):
                continue
            if bound_in is call.scope and call.line < wrap_line:
                continue  # llm.c: a rank-0 forward of the raw model, before the line that wraps it in DDP
            if _is_forward(call, name):
                hit_name, inner = name, call
                break
            passed = _passes_to(index, call, name, call.scope)
            if passed is not None:
                inner = _calls_param(index, passed[0], passed[1], 0, set())
                if inner is not None:
                    hit_name = name
                    break
            elif index.function_of(call.node.func, call.scope) is None:
                inner = _imported_forward(t, call, name)
                if inner is None:
                    inner = _unseen_evaluation(t, call, name)
                if inner is not None:
                    hit_name = name
                    break
        if hit_name is None:
            found = _global_model_in_callee(index, call, bindings) or _held_by_object(t, index, call, by_name)
            if found is not None:
                hit_name, wrap_line, inner = found
        if hit_name is None or _other_ranks_call_it_too(call, hit_name):
            continue
        imported = isinstance(inner, _Imported)
        no_grad = call.ctx.no_grad or (inner.no_grad if imported else (
            inner.ctx.no_grad or _callers_under_no_grad(index, inner.scope)))
        # The severity follows what is shown: a backward on rank 0 after it (the gradient all-reduce waits for the
        # other ranks), or buffers DDP broadcasts in its forward (BatchNorm statistics, a registered buffer, a
        # torchvision/timm/transformers model). A model shown to have no buffers gets through (measured with torch
        # 2.13 and Gloo: a rank-0 forward of a Linear model between training steps neither hangs nor fails, a
        # BatchNorm one hangs in the buffer broadcast): a note.
        buffers = None if _no_buffer_broadcast(index) else _model_buffers(t, index, wrap_line)
        if _no_buffer_broadcast(index):
            buffers = False
        backward = not no_grad and (inner.backward if imported else any(
            c.name == "backward" and t.facts.rank0(index, c, single=False) for c in inner.scope.calls))
        if t.facts.dead(call.scope, index):
            sev, shown = "info", "nothing in the files linted is seen to run this code"
        elif imported and inner.path == _UNSEEN:
            sev = "info"
            shown = (f"{call.text}() is imported from a module of the project that is not among the files linted: "
                     "if it runs the model it is handed, rank 0 enters DDP's forward alone")
        elif backward:
            sev, shown = "error", "a backward pass follows on rank 0 only"
        elif no_grad and _after_every_rank_no_grad_forward(t, index, call, hit_name):
            # DDP._post_forward sets require_forward_param_sync = False after a forward without grad (torch 2.13,
            # torch/nn/parallel/distributed.py), and will_sync_module_buffers() reads it: the next no_grad forward
            # broadcasts no buffers and issues no collective (explore-generative's eval.py)
            sev = "info"
            shown = ("every rank ran it under no_grad just before (line "
                     f"{_after_every_rank_no_grad_forward(t, index, call, hit_name)}), after which DDP skips the "
                     "buffer broadcast of the next no_grad forward")
        elif buffers:
            sev = "warning" if no_grad else "error"
            shown = f"the model has buffers DDP broadcasts in forward ({buffers})"
        elif buffers is None:
            # buffers unknown: many models have some (BatchNorm, position ids, rotary frequencies), and DDP
            # broadcasts them in the first forward after a training step. With grad on the reducer is prepared
            # too: an error. Under no_grad only the buffers issue a collective, and they are not shown: a note
            # (a warning needs positive evidence; fr36: the muse transformers have none)
            sev = "info" if no_grad else "error"
            shown = ("under no_grad DDP broadcasts the model's buffers, if it has any" if no_grad else
                     "DDP broadcasts the model's buffers in this forward, if it has any (most models do)")
        else:
            sev = "info"
            shown = "the model has no buffers to broadcast"
        via = "" if inner is call else (
            f" (handed to {call.text}() of a module not linted, which evaluates with it)" if imported and
            inner.path == _UNSEEN else
            f" (through {call.text}() of another module, which runs it at its line {inner.line})" if imported else
            f" (through {call.text}(), which runs it at line {inner.line})")
        yield t.finding(
            sev, call.node,
            f"DDP-wrapped `{hit_name}` runs on rank 0 only{via}; the other ranks never join its collectives",
            detail=(f"`{hit_name}` is wrapped in DistributedDataParallel (line {wrap_line}). Its forward "
                    "broadcasts buffers and prepares the gradient all-reduce, which every rank must enter; under "
                    "this rank-0 test only one does, so the job hangs until the watchdog timeout"
                    + (" (no_grad lowers the risk to models with buffers)." if no_grad else ".")),
            fix=(f"with torch.no_grad():\n    out = {hit_name}.module(batch)   # the unwrapped model: no collectives\n"
                 "# or run evaluation on every rank and all_reduce the metric"),
            evidence={"model": hit_name, "wrapped_line": wrap_line, "forward_line": inner.line,
                      "no_grad": no_grad, "why": shown},
        )


def _callers_under_no_grad(index: ModuleIndex, scope, depth: int = 0) -> bool:
    """Every call of this file to the function holding the forward runs under no_grad, directly or through its own
    callers (fr108 Easquel/WaveDM: `restore()` opens `with torch.no_grad():` and calls `self.restore_lap_dec(x)`,
    whose DDP forward then records no graph and reduces nothing)."""
    if scope is None or scope.kind != "function" or depth > 3:
        return False
    sites = [c for c in index.by_name.get(scope.name, ())
             if c.recv in (None, "self") and (c.recv is None) == (scope.cls is None)]
    if not sites:
        return False
    return all(c.ctx.no_grad or (c.scope is not scope and _callers_under_no_grad(index, c.scope, depth + 1))
               for c in sites)


def _after_every_rank_no_grad_forward(t, index: ModuleIndex, call: Call, name: str) -> int:
    """The line of a forward of `name` under no_grad that every rank runs earlier in the same function, outside any
    loop, with no backward or grad-enabled forward of it in between (also through a function given the model,
    `evaluate(model, ...)` then `if rank == 0: model(...)`); 0 when there is none."""
    scope = call.scope
    if call.ctx.loops:
        return 0
    earlier = [c for c in scope.calls if c.line < call.line and c.ctx.loops == 0 and not t.facts.gated(index, c)]
    found = 0
    for c in earlier:
        inner = None
        if _is_forward(c, name):
            inner = c
        else:
            passed = _passes_to(index, c, name, scope)
            if passed is not None:
                inner = _calls_param(index, passed[0], passed[1], 0, set())
        if inner is None:
            continue
        quiet = c.ctx.no_grad or inner.ctx.no_grad
        found = c.line if quiet else 0  # a grad-enabled forward after it arms the broadcast again
    if found and any(c.name == "backward" and found < c.line < call.line for c in scope.calls):
        return 0
    return found


def _no_buffer_broadcast(index: ModuleIndex) -> bool:
    """Every DDP wrap in the file passes broadcast_buffers=False."""
    wraps = index.calls_named(DDP)
    return bool(wraps) and all(isinstance(c.kw("broadcast_buffers"), ast.Constant) and
                               c.kw("broadcast_buffers").value is False for c in wraps)


def _model_has_no_buffers(t, index: ModuleIndex, wrap_line: int) -> bool:
    return _model_buffers(t, index, wrap_line) is False


_BUFFERED_LIBRARIES = ("torchvision", "timm", "transformers", "diffusers", "open_clip")
# Parts of those libraries that build no model: a module loading MNIST with torchvision.datasets/transforms does not
# build its CNN on torchvision (fr70 lu8e/4: a rank-0 no_grad forward of a buffer-less CNN, a note)
_NO_MODEL_PARTS = ("torchvision.datasets", "torchvision.transforms", "torchvision.io", "torchvision.utils",
               "transformers.AutoTokenizer", "transformers.HfArgumentParser", "transformers.set_seed")


def _imported_files(path: str, imports: Dict[str, str]) -> list:
    """Project files a module imports, found on disk next to it (one hop): where its building blocks live."""
    here = os.path.dirname(os.path.abspath(path))
    out: list = []
    for target in sorted(set(imports.values()))[:24]:
        level = len(target) - len(target.lstrip("."))
        parts = [p for p in target.lstrip(".").split(".") if p]
        if not parts or (not level and parts[0] in ("torch", "numpy", "os", "sys", "math", "typing", "functools",
                                                     "collections", "einops", "logging", "re", "json")):
            continue
        bases = [here] if level else [here, os.path.dirname(here), os.path.dirname(os.path.dirname(here))]
        if level > 1:
            bases = [os.path.abspath(os.path.join(here, *[".."] * (level - 1)))]
        for base in bases:
            hit = None
            for k in (len(parts), len(parts) - 1):
                if k <= 0:
                    continue
                stem = os.path.join(base, *parts[:k])
                for cand in (stem + ".py", os.path.join(stem, "__init__.py")):
                    if os.path.isfile(cand) and os.path.abspath(cand) != os.path.abspath(path):
                        hit = cand
                        break
                if hit:
                    break
            if hit:
                if hit not in out:
                    out.append(hit)
                break
    return out


def _class_buffers(owner: ModuleIndex, klass) -> object:
    """Why the class's module shows buffers (a marker in its code, a library model it builds on, or a marker in a
    project module it imports), or False when none of these shows any."""
    marker = index_buffer_marker(owner)
    if marker:
        return f"{marker} in {os.path.basename(owner.path)}"
    lib = next((q for q in owner.by_qual if q.split(".")[0] in _BUFFERED_LIBRARIES and
                not q.startswith(_NO_MODEL_PARTS)), None)
    if lib:
        return f"built on {lib.split('.')[0]}"
    for path in _imported_files(owner.path, owner.module.imports):
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                marker = buffer_marker(ast.parse(fh.read()))
        except (OSError, SyntaxError, ValueError, RecursionError):
            return None  # a building block we cannot read: unknown, not buffer-free
        if marker:
            return f"{marker} in {os.path.basename(path)}"
    return False


def _prepared(index: ModuleIndex, name: str, wrap_line: int) -> bool:
    """The model came from `accelerator.prepare`, which wraps it in DDP only when the run has several processes
    and the model trainable parameters."""
    return any(c.line == wrap_line and c.name == "prepare" for c in index.by_name.get("prepare", ()))


def _model_buffers(t, index: ModuleIndex, wrap_line: int):
    """Whether the model wrapped at `wrap_line` has buffers: True-ish (the reason) when its class's module (or a
    library known for them) shows some, False when its class is in the project and shows none, None when
    unknown. DDP broadcasts buffers in forward; without them a forward on one rank may get through."""
    for wrap in index.calls_named(DDP) or [c for c in index.by_name.get("prepare", ()) if c.line == wrap_line]:
        if wrap.line != wrap_line or not wrap.node.args:
            continue
        expr = wrap.node.args[0]
        at = wrap.line
        for _ in range(5):
            if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in ("to", "cuda"):
                expr = expr.func.value
                continue
            if isinstance(expr, ast.Name):
                s = wrap.scope
                while s is not None and expr.id not in s.values:
                    s = s.parent
                if s is None:
                    break
                # the binding before the wrap (`model = Net(...)`; `model = DDP(model)` rebinds the name), and
                # before that binding when it rebinds the name to itself (`model = resnet18(); model =
                # model.to(device); DDP(model)`, ganzobtn: the constructor two bindings up)
                before = [a for a in s.assigns if expr.id in a.targets and a.value is not None and a.node.lineno < at]
                if before:
                    expr, at = before[-1].value, before[-1].node.lineno
                else:
                    expr = s.values[expr.id]
                continue
            break
        if isinstance(expr, ast.Call):
            qual = index.qual(expr.func, wrap.scope) or ""
            func = expr.func
            if isinstance(func, ast.Subscript) and isinstance(func.value, ast.Attribute) and \
                    func.value.attr == "__dict__":
                # `models.__dict__[args.arch]()` (the ImageNet example, fr72 nikitadurasov): a model of that library
                qual = index.qual(func.value.value, wrap.scope) or ""
            if qual.split(".")[0] in _BUFFERED_LIBRARIES:
                return f"a {qual.split('.')[0]} model"
            klass = index.local_class(expr.func, wrap.scope)
            owner = index
            if klass is None:
                name = (dotted(expr.func) or "").rsplit(".", 1)[-1]
                # imported from a module of the project (a subpackage, maybe re-exported by its __init__):
                # parse it (never import it); else a class of that name among the files linted
                found = t.project_class(qual) if qual else None
                if found is None:
                    found = t.facts.find_class(name)
                if found is not None:
                    owner, klass = found
            if klass is not None:
                return _class_buffers(owner, klass)
            if qual and "." in qual.lstrip(".") and t.sibling(qual.rsplit(".", 1)[0]) is not None:
                return None  # a class of the project not found in its module: unknown, never the project's buffers
        break
    if t.facts.has_buffers():
        return "BatchNorm or registered buffers in the project's modules"
    return None
