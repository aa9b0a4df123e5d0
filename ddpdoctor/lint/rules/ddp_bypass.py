"""Training through `model.module.<method>()` of a DDP-wrapped model: DDP's forward is bypassed (round 16 wave 2, a
preview rule)."""
from __future__ import annotations

import ast
import re

from . import rule
from ..names import dotted
from ._common import DDP
from .rank0_forward import _ddp_bindings, _passes_to, _visible

_SOURCE = ("torch/nn/parallel/distributed.py (DistributedDataParallel.forward -> _pre_forward calls "
           "reducer.prepare_for_backward; the DDP docs: 'the forward pass of the wrapped module must be called "
           "through the DDP instance') and torch/csrc/distributed/c10d/reducer.cpp (autograd_hook returns at once "
           "when expect_autograd_hooks_ is false, which only prepare_for_backward sets)")

# Methods of the wrapped module that do not run the model: they are fine to call on `.module`.
_NOT_A_FORWARD = {
    "state_dict", "load_state_dict", "parameters", "named_parameters", "buffers", "named_buffers", "modules",
    "named_modules", "children", "named_children", "train", "eval", "to", "cuda", "cpu", "half", "float", "double",
    "bfloat16", "zero_grad", "apply", "requires_grad_", "save_pretrained", "from_pretrained", "config",
    "gradient_checkpointing_enable", "gradient_checkpointing_disable", "resize_token_embeddings", "get_parameter",
    "get_submodule", "get_input_embeddings", "get_output_embeddings", "tie_weights", "register_buffer",
    "register_forward_hook", "register_forward_pre_hook", "register_full_backward_hook", "add_module",
    "num_parameters", "print_trainable_parameters", "generate", "sample", "update_ema", "set_epoch",
    "init_weights", "reset_parameters", "freeze", "unfreeze", "merge_and_unload", "enable_input_require_grads",
}


def _passes_to_method(index, call, name: str, scope):
    """(method, parameter) when `call` is `obj.method(..., name, ...)` on an instance of a class of this file made in
    the same function (`trainer = Trainer(...); trainer.train(model=model)`, round 22 fr151 KimRass/DDPM)."""
    func = call.node.func
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)):
        return None
    made = scope.values.get(func.value.id)
    if not isinstance(made, ast.Call) or not isinstance(made.func, ast.Name):
        return None
    klass = index.module.classes.get(made.func.id)
    method = klass.functions.get(func.attr) if klass is not None else None
    if method is None:
        return None
    params = [p for p in method.params if p not in ("self", "cls")]
    for i, arg in enumerate(call.node.args):
        if dotted(arg) == name and i < len(params):
            return method, params[i]
    for kw in call.node.keywords:
        if kw.arg and dotted(kw.value) == name and kw.arg in params:
            return method, kw.arg
    return None


def _ddp_objects(index) -> list:
    """(name, scope, bound, wrap line) for the names that hold a DDP-wrapped model: the bound names (visible where they are used) and the
    parameters of this file's functions that a call hands one to (`train_epoch(model, loader)`)."""
    bindings = _ddp_bindings(index)
    out = []
    for name, line, scope in bindings:
        out.append((name, scope, True, line))
    names = {b[0] for b in bindings}
    for call in index.calls:
        for arg in list(call.node.args) + [k.value for k in call.node.keywords]:
            n = dotted(arg)
            if n not in names or not any(_visible(n, b[2], call.scope) for b in bindings if b[0] == n):
                continue
            passed = _passes_to(index, call, n, call.scope) or _passes_to_method(index, call, n, call.scope)
            if passed is not None:
                out.append((passed[1], passed[0], False, 0))
    # round 22 (fr151 KimRass/DDPM: `trainer.train(model=model)` hands the DDP model on to
    # `self.train_for_one_epoch(epoch, model, ...)`, whose `model.module.get_loss(x)` was both readers' miss): a
    # parameter that holds it is followed through the calls of its own function, up to three hops
    frontier = [(scope, param) for param, scope, bound, _line in out if not bound]
    seen = {(id(scope), param) for scope, param in frontier}
    for _hop in range(3):
        nxt = []
        for scope, param in frontier:
            for call in scope.calls:
                if not any(dotted(a) == param for a in list(call.node.args) + [k.value for k in call.node.keywords]):
                    continue
                passed = _passes_to(index, call, param, scope) or _passes_to_method(index, call, param, scope)
                if passed is not None and (id(passed[0]), passed[1]) not in seen:
                    seen.add((id(passed[0]), passed[1]))
                    out.append((passed[1], passed[0], False, 0))
                    nxt.append((passed[0], passed[1]))
        frontier = nxt
    return out


# Builtins that look at the model without running it: `isinstance(self.model, DDP)` guarding the `.module` call is
# not a helper that runs the DDP forward (fr107 GuHuangAI/DiffusionEdge, after accelerator.prepare).
# Also accelerate's context managers that take the model (`with accelerator.accumulate(vae):`, fr108
# HeCheng0625/AudioEditing; `no_sync`, `join`): they gate gradient sync, they do not run the forward.
_LOOKS_ONLY = {"isinstance", "hasattr", "getattr", "type", "id", "len", "print", "repr", "str", "accumulate", "no_sync",
               "join", "register_for_checkpointing"}


# Sampling and inference methods (`ddim_sample`, `generate_images`): their result feeds no loss (fr103 zwandering/DDPM).
_SAMPLING = re.compile(r"sample|generat|infer|predict|evaluat|visuali", re.I)


def _loops_around(node: ast.AST, line: int) -> list:
    """The for/while loops inside `node` whose lines span `line` (in ast.walk's order)."""
    return [n for n in ast.walk(node) if isinstance(n, (ast.For, ast.While, ast.AsyncFor)) and
            n.lineno <= line <= (n.end_lineno or n.lineno)]


# Training-step methods that run their own backward inside (`step_optimizer`, `update`, `train_step`): through
# `.module` they train without DDP's forward even with no backward in the calling function (fr117).
_STEPPER = re.compile(r"^(step_optimizer|optimize_parameters|train_step|training_step|update|update_parameters|"
                      r"update_policy|learn|train_on_batch|optimize)$")


_LOSS_METHODS = {"compute_loss", "get_loss", "loss", "forward_loss", "calc_loss", "calculate_loss", "compute_losses",
                 "training_step", "train_step", "forward_train"}


def _raw_modules(index) -> list:
    """(raw name, wrapped name, wrap line, scope) for `ddp_model = DDP(model, ...)` that keeps the plain module under
    another name (`ddp_diffusion = DDP(diffusion)`, fr103 zwandering/DDPM), for `mdl = DDP(mdl); mdl = mdl.module`
    (fr103 qy-feng/DASR: the wrapper thrown away), and (round 18) for `model = DDP(model); model_without_ddp =
    model.module` whose training step calls `model_without_ddp(images)` (fr116 Brain-Cog-Lab/casc train_det.py), and
    for `m = model.module if isinstance(model, DDP) else model` (fr117 Choi-In-hyuk/StateVLA): a call of the raw name
    trains without DDP."""
    out = []
    for a in index.assigns:
        call = a.call
        if call is None or call.qual != DDP or len(a.targets) != 1 or not a.targets[0] or not call.node.args:
            continue
        arg = call.node.args[0]
        while isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) and arg.func.attr in ("to", "cuda"):
            arg = arg.func.value
        raw = dotted(arg)
        if raw and raw != a.targets[0]:
            out.append((raw, a.targets[0], call.line, a.scope))
    for a in index.assigns:  # `mdl = mdl.module` after `mdl = DDP(mdl)`
        name = a.targets[0] if len(a.targets) == 1 else None
        if not name or a.value is None or dotted(a.value) != f"{name}.module":
            continue
        if any(w.call is not None and w.call.qual == DDP and w.targets == [name] and w.node.lineno < a.node.lineno
               and w.scope is a.scope for w in index.assigns):
            out.append((name, name, a.node.lineno, a.scope))
    for a in index.assigns:  # `model_without_ddp = model.module` after `model = DDP(model)`, then model_without_ddp(x)
        name = a.targets[0] if len(a.targets) == 1 else None
        value = dotted(a.value) if a.value is not None else None
        if not name or not value or not value.endswith(".module"):
            continue
        base = value[: -len(".module")]
        if base == name:
            continue  # the form above
        if any(w.call is not None and w.call.qual == DDP and w.targets == [base] and w.node.lineno < a.node.lineno
               and w.scope is a.scope for w in index.assigns):
            out.append((name, base, a.node.lineno, a.scope))
    for a in index.assigns:  # `m = model.module if isinstance(model, DDP) else model`, then m(x) and a backward
        name = a.targets[0] if len(a.targets) == 1 else None
        v = a.value
        if not name or not isinstance(v, ast.IfExp) or not isinstance(v.test, ast.Call) \
                or dotted(v.test.func) != "isinstance" or len(v.test.args) != 2:
            continue
        base = dotted(v.test.args[0])
        kind = dotted(v.test.args[1]) or ""
        if not base or base == name or dotted(v.body) != f"{base}.module" or dotted(v.orelse) != base \
                or not (kind.endswith("DistributedDataParallel") or kind in ("DDP", "nn.parallel.DDP")):
            continue
        # the code itself says `base` may be a DDP instance (StateVLA's train_epoch(trainer): fr117, the reader's)
        out.append((name, base, a.node.lineno, a.scope))
    return out


def _handed_raw_modules(index) -> list:
    """Round 23 (fr158 bio-mlhui/MyFramework, a reader's miss: `linear_classifier = DDP(...);
    linear_classifier_without_ddp = linear_classifier.module; train(model, linear_classifier_without_ddp, ...)` and
    `train()` runs `output = linear_classifier(output)` then `loss.backward()`): the raw module of a DDP wrap handed to
    a function of this file, one step: (parameter, wrapped name, line of the hand-over, the function). Not when the
    same call also hands over the wrapper (the function may run that), nor the wrap thrown away (`m = m.module`)."""
    from .init_rank import _bound_arg  # noqa: PLC0415
    out = []
    for raw, wrapped, line, bound_in in _raw_modules(index):
        if raw == wrapped:
            continue
        for call in index.calls:
            if call.scope is not bound_in or call.line <= line:
                continue
            handed = [a for a in list(call.node.args) + [k.value for k in call.node.keywords]]
            if not any(dotted(a) == raw for a in handed) or any(dotted(a) == wrapped for a in handed):
                continue
            fn = index.callee(call)
            if fn is None or fn is bound_in or fn.kind != "function":
                continue
            for param in fn.params:
                bound = _bound_arg(call, fn, param)
                if bound is not None and dotted(bound) == raw:
                    out.append((param, wrapped, call.line, fn, raw))
    return out


def _raw_forward_findings(t, index, seen: set):
    """A loss computed by calling the raw module of a DDP wrap, in a function with a backward and no call of the DDP
    model: one finding per function. Also in a function the raw module is handed to (`_handed_raw_modules`)."""
    handed = {}
    for param, wrapped, at, fn, raw in _handed_raw_modules(index):
        handed[(param, id(fn))] = (at, raw)
    todo = _raw_modules(index) + [(param, wrapped, fn.node.lineno, fn) for param, wrapped, _at, fn, _raw in
                                  _handed_raw_modules(index)]
    for raw, wrapped, line, bound_in in todo:
        for call in index.calls:
            # the raw module called, or (round 18) a loss method of it when it is kept beside its DDP wrapper
            # (`model = DDP(policy)` then `loss, log = policy.compute_loss(batch)`: fr117 Doo-mon/vla-scratch)
            lossy = raw != wrapped and call.recv == raw and call.name in _LOSS_METHODS
            if (call.text != raw and not lossy) or call.line <= line or call.ctx.no_grad or id(call.scope) in seen:
                continue
            scope = call.scope
            if not (scope is bound_in or _visible(raw, bound_in, scope)):
                continue
            backward = [c for c in scope.calls if c.name == "backward" and not c.ctx.no_grad and c.line > call.line]
            if not backward or any(c.text in (wrapped, f"{wrapped}.forward") for c in scope.calls if raw != wrapped):
                continue
            if any(isinstance(n, ast.Expr) and n.value is call.node for n in ast.walk(scope.node)):
                continue
            if any(isinstance(n, ast.Assign) and n.lineno > line and any(dotted(tg) == raw for tg in n.targets)
                   and n.lineno < call.line and dotted(n.value) != f"{raw}.module" for n in ast.walk(scope.node)):
                continue  # the raw name was rebound to something else before this call
            if t.facts.dead(scope, index):
                continue
            seen.add(id(scope))
            how = (f"`{raw}` was unwrapped (`{raw} = {raw}.module`, line {line})" if raw == wrapped else
                   f"`{raw}` is the plain module that `{wrapped}` wraps (line {line})")
            extra = {}
            if (raw, id(bound_in)) in handed and bound_in is scope:
                at, name = handed[(raw, id(bound_in))]
                how = f"`{raw}` is `{name}`, the plain module that `{wrapped}` wraps, handed over at line {at}"
                extra = {"lines": sorted({at, call.line}), "handed_at": at}
            yield t.finding(
                "warning", call.node,
                f"`{call.text}()` trains the module without its DDP wrapper and a backward follows (line "
                f"{backward[0].line}): {how}, so the gradients are not all-reduced across ranks",
                detail=("DistributedDataParallel prepares its gradient all-reduce in its own forward "
                        "(reducer.prepare_for_backward); calling the wrapped module directly reaches backward with the "
                        "reducer's hooks idle, and every rank steps on its own gradients."),
                fix=f"loss = {wrapped if raw != wrapped else 'ddp_model'}(batch)   # call the DDP instance",
                evidence={"model": wrapped, "method": raw, "backward_line": backward[0].line, "source": _SOURCE,
                          **extra},
            )


def _frozen(index, base: str, scope) -> bool:
    """Every parameter of the DDP model `base` is frozen in the file: `for p in base.parameters(): p.requires_grad =
    False` (also over `base.module.parameters()`), or `base.requires_grad_(False)` / `base.module.requires_grad_(False)`
    (fr122 jiamingzhang94/AnyAttack: a CLIP encoder wrapped in DDP and frozen on the next lines, then called through
    `.module`). A frozen module's parameters get no gradient, so its reducer has nothing to all-reduce: bypassing its
    forward loses nothing (the gradient flows through it to the trained model, which is called through its own DDP)."""
    owners = (base, f"{base}.module")
    # the function that calls it (a name of that function), or, for `self.net`, the class's methods
    where = scope.cls.node if base.startswith("self.") and scope.cls is not None else scope.node
    for c in index.calls:
        if c.name == "requires_grad_" and c.recv in owners and c.node.args and \
                isinstance(c.node.args[0], ast.Constant) and c.node.args[0].value is False and \
                any(c.node is n for n in ast.walk(where)):
            return True
    for n in ast.walk(where):
        if not isinstance(n, ast.For) or not isinstance(n.target, ast.Name):
            continue
        it = n.iter
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr == "parameters"
                and dotted(it.func.value) in owners):
            continue
        var = n.target.id
        for st in n.body:
            if isinstance(st, ast.Assign) and isinstance(st.value, ast.Constant) and st.value.value is False and any(
                    isinstance(tg, ast.Attribute) and tg.attr == "requires_grad" and isinstance(tg.value, ast.Name)
                    and tg.value.id == var for tg in st.targets):
                return True
            if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) and \
                    isinstance(st.value.func, ast.Attribute) and st.value.func.attr == "requires_grad_" and \
                    dotted(st.value.func.value) == var and st.value.args and \
                    isinstance(st.value.args[0], ast.Constant) and st.value.args[0].value is False:
                return True
    return False


_OPTIMIZERS = {"SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam", "LBFGS", "Lamb",
               "LAMB", "FusedAdam", "FusedLAMB", "AdamW8bit", "Adafactor", "Lion", "SparseAdam"}


def _untrained(index, base: str, scope) -> bool:
    """No optimizer of the file takes the DDP model's parameters: every optimizer built in the file
    (`torch.optim.Adam(model_net.parameters())`) names its parameter source, and none of them is `base` (or the name
    it wraps) (fr123 frankdarkluo/MaxReward: a DDP-wrapped editor called through `.module` whose only optimizer trains
    another network). Its gradients are never applied, so skipping its all-reduce changes nothing. False when the file
    builds no optimizer or one whose parameters come from an argument or a helper the file cannot see."""
    raw = set()
    for a in index.assigns:
        if a.targets == [base] and isinstance(a.value, ast.Call) and a.value.args and \
                (dotted(a.value.func) or "").rsplit(".", 1)[-1] in ("DistributedDataParallel", "DDP"):
            inner = a.value.args[0]
            while isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) and \
                    inner.func.attr in ("to", "cuda", "float", "half"):
                inner = inner.func.value
            if dotted(inner):
                raw.add(dotted(inner))
    names = {base, f"{base}.module"} | raw
    found = False
    for c in index.calls:
        if c.name not in _OPTIMIZERS or not ((c.qual or "").startswith("torch.optim") or c.qual is None or
                                             "optim" in (c.qual or "").lower()):
            continue
        src = c.node.args[0] if c.node.args else c.kw("params")
        if src is None:
            return False
        if isinstance(src, ast.Name):
            value = c.scope.values.get(src.id)
            if value is None:
                return False  # parameters handed in: not seen
            src = value
        mentioned = {dotted(n) for n in ast.walk(src) if isinstance(n, (ast.Name, ast.Attribute)) and dotted(n)}
        owners = {m[: -len(".parameters")] if m.endswith(".parameters") else m for m in mentioned}
        if any(o == n or o.startswith(n + ".") for o in owners for n in names):
            return False  # this optimizer trains it
        if not any(m.endswith(("parameters", "named_parameters")) for m in mentioned):
            return False  # parameters from something the file does not show (a helper's result)
        found = True
    return found


def _detached(call, scope) -> bool:
    """The result is detached on the spot (`net.module.encode(x).detach()`, `.item()`): no gradient flows back
    through it (fr123 fyy-debug/Improving-Deep-Watermarking-Robustness: `net_Necst.module.encode(messages).detach()`
    with the module in eval mode)."""
    return any(isinstance(n, ast.Attribute) and n.value is call.node and n.attr in ("detach", "item", "tolist", "numpy")
               for n in ast.walk(scope.node))


def _unwrapped_forward_findings(t, index, seen: set):
    """A loss computed through `accelerator.unwrap_model(model).<method>(...)` of a model accelerate prepared, with a
    backward after it in the same function and no call of the prepared model there (fr113 zqevans/audio-diffusion
    train_diffae_accel.py, both readers' sure: `loss = accelerator.unwrap_model(diffusion_model).loss(batch[0])` then
    `accelerator.backward(loss)`). Under a multi-process launch `accelerator.prepare` wraps the model in
    DistributedDataParallel (huggingface/accelerate accelerator.py prepare_model) and `unwrap_model` returns the
    plain module (utils/other.py extract_model_from_parallel): DDP's forward, which prepares the gradient all-reduce,
    never runs."""
    if "unwrap_model" not in (index.source or ""):
        return
    prepared = {n for a in index.assigns if a.call is not None and a.call.name == "prepare" for n in a.targets if n}
    if not prepared:
        return
    for call in index.calls:
        func = call.node.func
        # `unwrap_model(m).loss(x)`, and `unwrap_model(m)["decoder"](x)`: a member of a prepared ModuleDict/ModuleList
        # called directly (fr117, round 19) runs the same plain sub-module without DDP's forward.
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call):
            inner, what = func.value, call.name
        elif isinstance(func, ast.Subscript) and isinstance(func.value, ast.Call):
            inner, what = func.value, "[" + (ast.unparse(func.slice) if hasattr(ast, "unparse") else "key") + "]"
        else:
            continue
        if not (isinstance(inner.func, ast.Attribute) and inner.func.attr == "unwrap_model" and inner.args):
            continue
        base = dotted(inner.args[0])
        if base not in prepared or call.ctx.no_grad or what in _NOT_A_FORWARD or \
                what.startswith(("set_", "register_")) or _SAMPLING.search(what):
            continue
        scope = call.scope
        if id(scope) in seen:
            continue
        backward = [c for c in scope.calls if c.name == "backward" and not c.ctx.no_grad and c.line > call.line]
        if not backward:
            continue
        if any(c.text in (base, f"{base}.forward") for c in scope.calls):
            continue  # the prepared (DDP) model's forward runs here too
        if any(isinstance(n, ast.Expr) and n.value is call.node for n in ast.walk(scope.node)):
            continue  # a statement of its own (an EMA update): its result feeds no loss
        if t.facts.dead(scope, index):
            continue
        seen.add(id(scope))
        yield t.finding(
            "warning", call.node,
            f"`accelerator.unwrap_model({base}){'' if what.startswith('[') else '.'}{what}()` runs the module "
            "accelerate wrapped in DDP without its "
            f"wrapper and a backward follows (line {backward[0].line}): under a multi-process launch the gradients "
            "are not all-reduced across ranks",
            detail=("accelerator.prepare wraps the model in DistributedDataParallel when several processes run "
                    "(accelerate accelerator.py prepare_model); unwrap_model returns the plain module, so DDP's "
                    "forward (reducer.prepare_for_backward) never runs and every rank steps on its own gradients."),
            fix=("# route the loss through the prepared model: make the loss its forward (or dispatch to it)\n"
                 f"loss = {base}(batch)\naccelerator.backward(loss)"),
            evidence={"model": base, "method": what, "backward_line": backward[0].line, "source": _SOURCE},
        )


_DDP_QUALS = (DDP, "torch.nn.parallel.distributed.DistributedDataParallel")


def _discarded_wrapper_findings(t, index, seen: set):
    """`model.lm = DDP(model.lm, ...)` followed at once by `model.lm = model.lm.module` (fr139 junhaopjlab/
    Musicgen_finetune dist_finetune.py, both readers' sure): the name that held the only reference to the wrapper now
    holds the plain module again, so nothing can call DDP's forward and no gradient is ever all-reduced. Only the two
    statements side by side (nothing between them reads the name), in the same block of the same function, in a
    file that runs a backward and all-reduces nothing by hand."""
    if ".module" not in (index.source or "") or not index.by_name.get("backward") or index.by_name.get("all_reduce"):
        return
    lines = t.lines
    for a in index.assigns:
        call = a.call
        if call is None or (call.qual or "") not in _DDP_QUALS or len(a.targets) != 1 or \
                not isinstance(a.targets[0], str) or a.value is not call.node:
            continue
        name = a.targets[0]
        end = getattr(a.node, "end_lineno", a.node.lineno)
        undo = [x for x in a.scope.assigns if x.targets == [name] and x.node.lineno > end and
                isinstance(x.value, ast.Attribute) and x.value.attr == "module" and dotted(x.value.value) == name and
                x.node.col_offset == a.node.col_offset and x.ctx.branch == a.ctx.branch]
        if not undo:
            continue
        x = min(undo, key=lambda u: u.node.lineno)
        word = re.compile(r"(?<![\w.])" + re.escape(name) + r"(?![\w])")
        if any(word.search(text) for text in lines[end:x.node.lineno - 1]):
            continue  # the wrapper is used (or handed on) before the name is rebound
        if id(a.scope) in seen or t.facts.dead(a.scope, index):
            continue
        seen.add(id(a.scope))
        yield t.finding(
            "warning", x.node,
            f"`{name} = {name}.module` right after `{name} = DistributedDataParallel(...)` (line {a.node.lineno}) "
            "throws the wrapper away: no forward runs through DDP, so the gradients are never all-reduced across "
            "ranks",
            detail=("DistributedDataParallel synchronises gradients only for a backward prepared by its own forward "
                    "(reducer.prepare_for_backward). With the only reference to the wrapper replaced by the plain "
                    "module, every forward and backward runs on the module: each rank steps on its own gradients "
                    "and the replicas drift apart silently (only the initial broadcast of the construction ran)."),
            fix=(f"keep the wrapper and train through it: `{name} = DistributedDataParallel({name}, ...)` then "
                 f"`loss = {name}(batch)`; reach the module's own methods through `{name}.module` only for "
                 "saving, evaluation and settings"),
            evidence={"model": name, "wrap_line": a.node.lineno, "unwrap_line": x.node.lineno, "source": _SOURCE},
        )


@rule("LINT029", "ddp-forward-bypassed")
def ddp_forward_bypassed(t):
    """A DDP-wrapped model trained through `model.module.<method>()`, which bypasses DDP's forward.

    What it checks
        A function that runs a backward pass (not under no_grad) and computes it through a method of the wrapped
        module of a DistributedDataParallel model (`loss = model.module.compute_loss(batch)`; the model bound by
        `DDP(...)` in the file or handed to the function by a call of the file) while it never calls the DDP
        model itself (`model(batch)`). Methods that do not run the model (`state_dict`, `parameters`, `eval`,
        `generate`, sampling and inference methods such as `ddim_sample`) and calls whose result feeds nothing
        (`model.module.freeze_clip()`) are left alone, as is a DDP model handed to a helper inside the training loop.
        Since round 18 also a loss method of the plain module kept beside its wrapper (`model = DDP(policy)` then
        `policy.compute_loss(batch)` and a backward), a training-step method of `.module` called in a loop after the
        wrap with no backward in
        the caller (`model.module.step_optimizer(batch)`, `policy.module.update(buffer)`: the backward is inside), and
        `model.module(batch)` (the wrapped module called directly) and
        `accelerator.unwrap_model(model).<method>()` of a model accelerate prepared, followed by
        a backward (accelerate wraps it in DDP under a multi-process launch). Also (after fr103) a loss computed by
        the plain module kept beside its wrapper (`ddp_net = DDP(net)`, then
        `loss = net(batch)`) or after `model = model.module` undoes the wrap, in a function that never calls the DDP
        model; since round 23 (lint29) also in a function of the file that plain module is handed to
        (`train(backbone, classifier_without_ddp, ...)` whose `classifier(feats)` is followed by a backward), unless
        the same call also hands over the wrapper. Quiet (round 19) when the wrapped module is frozen in the same function (`for p in
        model.parameters(): p.requires_grad = False`, `model.requires_grad_(False)`), when the result is detached on the
        spot (`.detach()`, `.item()`), or when no optimizer of the file takes its parameters (every optimizer names its
        source and none is this model): no gradient of its is ever all-reduced or applied. Since round 24 also a
        wrapper thrown away at once: `model.lm = DDP(model.lm, ...)` and on the next line `model.lm = model.lm.module`
        in a file that runs a backward and all-reduces nothing by hand.
        A preview rule (round 16): a note by default, a warning with `--preview`.
        Since round 22 the DDP model is followed through up to three hand-overs between
        functions of the file, including methods of an object of the file's class (`trainer.train(model=model)`).

    Why it matters
        DDP synchronises gradients only for a backward prepared by its own forward: `DistributedDataParallel.forward`
        calls the reducer's `prepare_for_backward`, and the reducer's autograd hooks do nothing otherwise
        (torch/csrc/distributed/c10d/reducer.cpp). Training through `model.module.<method>()` runs no collective:
        each rank steps on its own gradients and the replicas drift apart silently.

    Example
        model = DDP(model, device_ids=[local_rank])
        loss = model.module.training_step(batch)
        loss.backward()

    Fix
        Route the training computation through the DDP instance: make the method the module's `forward` (or call
        it from `forward` with a mode argument) and call `model(batch)`.
    """
    index = t.index
    if not _ddp_bindings(index):
        return
    seen: set = set()
    yield from _discarded_wrapper_findings(t, index, seen)
    yield from _raw_forward_findings(t, index, seen)
    yield from _unwrapped_forward_findings(t, index, seen)
    candidates = []
    for call in index.calls:
        recv = call.recv or ""
        if call.name == "module" and recv and not recv.endswith(".module") and not call.ctx.no_grad:
            # `pred = model.module(images, labels)`: the wrapped module called directly (fr115
            # StarrySky-SHT/GUIE-13th-place-solution train_retrieval_ddp.py, the reader's miss)
            candidates.append(call)
            continue
        if not recv.endswith(".module") or call.name in _NOT_A_FORWARD or call.name.startswith(("set_", "register_")) \
                or _SAMPLING.search(call.name):
            continue  # `model.module.get_loss(x)` is a forward (fr103 DyllanElliia); `ddim_sample(...)` is not training
        if not call.ctx.no_grad:
            candidates.append(call)
    if not candidates:
        return  # no `<x>.module.<method>()` call outside no_grad: the DDP objects need not be worked out (bench_lint)
    objects = _ddp_objects(index)
    if not objects:
        return
    for call in candidates:
        recv = call.recv or ""
        base = recv[: -len(".module")] if recv.endswith(".module") else recv  # `model.module(x)`: the base is `model`
        scope = call.scope
        if id(scope) in seen:
            continue
        held = [line for name, where, bound, line in objects
                if base == name and (scope is where if not bound else _visible(name, where, scope))]
        if not held:
            continue
        wrapped_at = min(held)
        backward = [c for c in scope.calls if c.name == "backward" and not c.ctx.no_grad]
        stepper = bool(_STEPPER.match(call.name)) and recv.endswith(".module")
        if not backward and not stepper:
            continue
        if any(c.text in (base, f"{base}.forward") for c in scope.calls):
            continue  # the DDP forward runs here too
        if not backward:
            # `aux = model.module.step_optimizer(batch)`, `info = policy.module.update(buffer)`: a training step of the
            # wrapped module that runs its own backward inside (fr117 ReSET x3, INEST-IRL x2), in a loop after the wrap
            loops = [n for n in _loops_around(scope.node, call.line) if n.lineno > wrapped_at]
            if not loops or t.facts.dead(scope, index):
                continue
            seen.add(id(scope))
            yield t.finding(
                "warning", call.node,
                f"`{call.text}()` runs a training step of the wrapped module directly: DDP's forward is bypassed, "
                "so the gradients of its backward are not all-reduced across ranks",
                detail=("DistributedDataParallel prepares its gradient all-reduce in its own forward "
                        "(reducer.prepare_for_backward); a step method of `.module` that computes the loss and calls "
                        "backward inside runs with the reducer's hooks idle, and every rank steps on its own "
                        "gradients."),
                fix=("# compute the loss through the DDP model's forward (make the step's loss the module's forward)"
                     f":\nloss = {base}(batch)\nloss.backward()"),
                evidence={"model": base, "method": call.name, "backward_line": None, "source": _SOURCE},
            )
            continue
        last = max(c.line for c in backward)
        loops = [n.lineno for n in _loops_around(scope.node, last)]
        start = max(loops + [wrapped_at])  # the training loop around the backward, else the wrap
        if any(start < c.line <= last and c.name not in _LOOKS_ONLY and dotted(a) == base for c in scope.calls
               for a in list(c.node.args) + [k.value for k in c.node.keywords]):
            # the DDP model is handed, before the backward, to a helper that may run its forward
            # (`loss = self._forward_batch(ddp_model, ...)`, fr68 VittuD/simple-ijepa)
            continue
        if any(isinstance(n, ast.Expr) and n.value is call.node for n in ast.walk(scope.node)):
            continue  # a statement of its own (`model.module.freeze_clip()`, an EMA update): its result feeds no loss
        if _frozen(index, base, scope):
            continue  # a frozen wrapped module: no gradient of its own to all-reduce (fr122 AnyAttack x2)
        if _detached(call, scope) or _untrained(index, base, scope):
            continue  # no gradient flows back through it, or no optimizer applies its gradients (fr123 x2)
        if t.facts.dead(scope, index):
            continue
        seen.add(id(scope))
        yield t.finding(
            "warning", call.node,
            f"`{call.text}()` runs the wrapped module directly and a backward follows (line {backward[0].line}): "
            "DDP's forward is bypassed, so the gradients are not all-reduced across ranks",
            detail=("DistributedDataParallel prepares its gradient all-reduce in its own forward "
                    "(reducer.prepare_for_backward); a loss computed through `.module.<method>()` reaches backward "
                    "with the reducer's hooks idle, and every rank steps on its own gradients."),
            fix=("# make the method the module's forward (or dispatch to it from forward) and call the DDP model:\n"
                 f"loss = {base}(batch)"),
            evidence={"model": base, "method": call.name, "backward_line": backward[0].line, "source": _SOURCE},
        )
