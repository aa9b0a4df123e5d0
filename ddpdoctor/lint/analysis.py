"""One pass over a script's AST that records everything the rules ask about.

Rules never walk the tree themselves: a 5,000-line script is walked once here, and each rule reads
the indexes (calls by resolved name and by attribute, env assignments, `with` blocks, loops, the
scopes with their calls). Every call site carries the context it runs in:
- at module level or not, and under the `__main__` guard or not (A6);
- on rank 0 only, or under some rank test (F8, F12);
- under `torch.no_grad()` (F8 severity), and how deep in loops.

Scopes (module, functions, lambdas, classes) form a small call graph: a call `worker(...)` or a
spawn target `worker` resolves to the function defined in an enclosing scope or at module level
(also `self.method`, `functools.partial(fn, ...)` and lambdas), so rules can ask what a spawn
target reaches, wherever it is defined in the file.
"""
from __future__ import annotations

import ast
import re
import sys
from typing import Callable, Dict, Iterable, List, NamedTuple, Optional, Set, Tuple

from . import conditions as cond
from .names import CHILD_FIELDS as _CHILD_FIELDS, STAR_MODULES, WELL_KNOWN, canonical, child_fields, const_str, \
    dotted, expr_nodes, flag_name, import_bindings

# Python's standard library modules (3.10+: sys.stdlib_module_names), for names a project star import brings in
_STDLIB = frozenset(m for m in getattr(sys, "stdlib_module_names", ()) if not m.startswith("_"))

ENV_NAMES_OF_INTEREST = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                         "TOKENIZERS_PARALLELISM", "OMP_NUM_THREADS")


class Ctx(NamedTuple):
    """Where a statement runs. Immutable; replaced when entering a block."""
    module_level: bool = True   # runs when the file is run (module body or a class body in it)
    guarded: bool = False       # under `if __name__ == "__main__":`
    rank0: bool = False         # runs on rank 0 only (provably)
    gated: bool = False         # under some test of the rank / main-process status
    no_grad: bool = False       # under torch.no_grad() / inference_mode()
    loops: int = 0              # enclosing for/while loops in this scope
    env_test: bool = False      # under an `if` that inspects os.environ (a fallback for missing env)
    gate: Optional[ast.AST] = None  # the `if` that made this code rank-0 only
    branch: tuple = ()          # (test of an enclosing `if`, 0 in its body / 1 in its else), outermost first
    exits: tuple = ()           # tests of earlier `if test: return/continue/raise` in this block: here they are false


def exclusive(a: Ctx, b: Ctx) -> bool:
    """Two call sites in opposite branches of the same test (`if streaming: ... else: ...`, also two
    separate `if not data_args.streaming:` blocks, as in transformers' run_clm): at most one runs."""
    if not a.branch or not b.branch:
        return False
    mine = {ast.dump(test): side for test, side in a.branch}
    if any(mine.get(ast.dump(test), side) != side for test, side in b.branch):
        return True
    # `if args.dist == "OFF": ...` and a later `if args.dist == "ON": ...` (TNN-MO): one value cannot equal two
    # different constants, so the bodies of two equality tests of the same expression exclude each other
    ours = [_eq_const(test) for test, side in a.branch if side == 0]
    ours = [e for e in ours if e is not None]
    if not ours:
        return False
    for test, side in b.branch:
        other = _eq_const(test) if side == 0 else None
        if other is not None and any(lhs == other[0] and val != other[1] for lhs, val in ours):
            return True
    return False


def eq_sides(test: ast.AST):
    """(tested expression, the other side) of a single `==` with any constant on the right (`0 == rank` read as
    `rank == 0`), else None."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return None
    left, right = test.left, test.comparators[0]
    if isinstance(left, ast.Constant) and not isinstance(right, ast.Constant):
        left, right = right, left
    return left, right


def _eq_const(test: ast.AST):
    """(dump of the tested expression, constant) for `expr == CONST` (either side), else None."""
    sides = eq_sides(test)
    if sides is None:
        return None
    left, right = sides
    if not isinstance(right, ast.Constant) or isinstance(left, ast.Constant) or \
            isinstance(right.value, bool) or right.value is None:
        return None
    return ast.dump(left), (type(right.value).__name__, right.value)


class Scope:
    """The module, a function, a lambda or a class body."""

    __slots__ = ("kind", "name", "node", "parent", "imports", "locals", "functions", "classes", "calls",
                 "params", "cls", "decorators", "assigns", "lambdas", "loops", "ctx", "qualname", "values")

    def __init__(self, kind: str, name: str, node: ast.AST, parent: Optional["Scope"], ctx: Ctx):
        self.kind = kind
        self.name = name
        self.node = node
        self.parent = parent
        self.imports: Dict[str, str] = {}
        self.locals: set = set()
        self.functions: Dict[str, "Scope"] = {}
        self.classes: Dict[str, "Scope"] = {}
        self.calls: List["Call"] = []
        self.params: List[str] = []
        self.cls: Optional["Scope"] = None  # the class a method belongs to
        self.decorators: List[str] = []
        self.assigns: List["Assign"] = []
        self.values: Dict[str, ast.AST] = {}  # name -> the value of its last plain assignment here
        self.lambdas: List["Scope"] = []
        self.loops: List["Loop"] = []
        self.ctx = ctx  # context of the definition site
        self.qualname = name if parent is None or parent.kind == "module" else f"{parent.qualname}.{name}"

    def __repr__(self) -> str:
        return f"<Scope {self.kind} {self.qualname}>"


class Call:
    """One call site: `torch.multiprocessing.spawn(worker, nprocs=4)`."""

    __slots__ = ("node", "qual", "name", "recv", "text", "scope", "ctx", "with_item", "line")

    def __init__(self, node: ast.Call, qual: Optional[str], scope: Scope, ctx: Ctx):
        self.node = node
        self.line: int = node.lineno   # an attribute, not a property: the rules read it ~28,000 times a 5,000-line run
        self.qual = qual
        func = node.func
        t = type(func)
        if t is ast.Attribute:   # dotted(func) is dotted(func.value) + the attribute: one walk of the chain, not two
            self.name = func.attr
            self.recv = dotted(func.value)
            self.text = None if self.recv is None else f"{self.recv}.{func.attr}"
        elif t is ast.Name:
            self.name = self.text = func.id
            self.recv = None
        else:
            self.name = self.recv = None
            self.text = dotted(func)
        self.scope = scope
        self.ctx = ctx
        self.with_item = False  # used as `with <call>:` (a context manager that closes itself)

    def kw(self, name: str) -> Optional[ast.AST]:
        for k in self.node.keywords:
            if k.arg == name:
                return k.value
        return None

    def arg(self, index: int, name: Optional[str] = None) -> Optional[ast.AST]:
        if name is not None:
            value = self.kw(name)
            if value is not None:
                return value
        args = [a for a in self.node.args if not isinstance(a, ast.Starred)]
        return args[index] if index < len(args) else None

    def __repr__(self) -> str:
        return f"<Call {self.qual or self.text} line {self.line}>"


class Assign:
    """`target = <value>` where the targets are dotted names (`model`, `self.file`) or a tuple of them."""

    __slots__ = ("node", "targets", "value", "call", "scope", "ctx")

    def __init__(self, node, targets, value, call, scope, ctx):
        self.node, self.targets, self.value, self.call, self.scope, self.ctx = node, targets, value, call, scope, ctx


class EnvSet:
    """`os.environ["RANK"] = ...`, `os.environ.update(...)`, `os.environ.setdefault(...)`, `os.putenv(...)`."""

    __slots__ = ("name", "value", "node", "scope", "ctx")

    def __init__(self, name, value, node, scope, ctx):
        self.name, self.value, self.node, self.scope, self.ctx = name, value, node, scope, ctx


class Loop:
    __slots__ = ("node", "scope", "ctx", "nested")

    def __init__(self, node, scope, ctx):
        self.node, self.scope, self.ctx, self.nested = node, scope, ctx, False


class WithBlock:
    __slots__ = ("node", "scope", "ctx")

    def __init__(self, node, scope, ctx):
        self.node, self.scope, self.ctx = node, scope, ctx


# Nodes with nothing callable below them: names, constants, operators, load/store markers.
_LEAVES = frozenset([ast.Name, ast.Constant, ast.Load, ast.Store, ast.Del, *ast.operator.__subclasses__(),
                     *ast.cmpop.__subclasses__(), *ast.unaryop.__subclasses__(), *ast.boolop.__subclasses__()])

_NO_GRAD = {"torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad", "torch.autograd.grad_mode.no_grad"}
class _Listed(tuple):
    """A list a module_fact keeps (as a tuple: no caller can change it); each caller gets a fresh list."""


_UNSET = object()


def module_fact(fn: Callable) -> Callable:
    """A fact derived from one file's index alone, which several rules ask for (rank0_forward._ddp_bindings: LINT007,
    LINT029, LINT031, LINT032; facts.index_buffer_marker: LINT007 once per hit): worked out once per index and kept
    in its `memo` (emptied by release()). A list or set comes back as a fresh one each time, so no rule can change
    what the next one reads."""
    key = f"{fn.__module__}.{fn.__qualname__}"

    def once(index: "ModuleIndex"):
        got = index.memo.get(key, _UNSET)
        if got is _UNSET:
            got = fn(index)
            index.memo[key] = got = _Listed(got) if isinstance(got, list) else \
                frozenset(got) if isinstance(got, set) else got
        return list(got) if isinstance(got, _Listed) else set(got) if isinstance(got, frozenset) else got
    once.__doc__, once.__name__, once.__wrapped__ = fn.__doc__, fn.__name__, fn  # type: ignore[attr-defined]
    return once


_GATING_DECORATORS = ("rank_zero", "main_process", "master_only", "rank0", "on_main", "only_on_main", "is_main")


class ModuleIndex:
    """Everything the rules need to know about one file."""

    def __init__(self, tree: ast.Module, path: str = "<string>", source: str = "",
                 reexports: Optional[Dict[str, str]] = None):
        self.tree = tree
        # `from utils.dist import dist` where utils/dist.py says `import torch.distributed as dist`: the
        # project's re-exports of library names (lint.project finds them), applied to this file's imports
        self.reexports = reexports or {}
        self.path = path
        self.source = source
        self.module = Scope("module", "<module>", tree, None, Ctx())
        self.scopes: List[Scope] = [self.module]
        self.calls: List[Call] = []
        self.by_qual: Dict[str, List[Call]] = {}
        self.by_name: Dict[str, List[Call]] = {}
        self.assigns: List[Assign] = []
        self.env_sets: List[EnvSet] = []
        self.withs: List[WithBlock] = []
        self.loops: List[Loop] = []
        # every comparison the walk meets, with its scope (LINT042 reads them here instead of walking the tree again)
        self.compares: List[Tuple[ast.Compare, Scope]] = []
        self.start_methods: set = set()   # 'spawn', 'forkserver', 'fork' seen in get_context/set_start_method
        self.bound: set = set()           # names bound at module level (for the WELL_KNOWN fallback)
        self.star_imports = False
        self.star_modules: List[str] = []  # `from ddp_utils import *`: where a name not bound here may come from
        self.flags: Dict[str, ast.AST] = {}  # dotted name -> the rank test it holds (`master_process = rank == 0`)
        # functions and methods whose value is a rank test (`def is_root_worker(self): return self.rank == 0`),
        # keyed "name()"; facts.ProjectFlags finds them wherever they are called
        self.rank_funcs: Dict[str, ast.AST] = {}
        self._reach_cache: dict = {}
        # facts several rules derive from this file alone, derived once (module_fact): key -> value
        self.memo: dict = {}
        self._callees_of: Dict[int, List[Scope]] = {}  # id(scope) -> callees(scope), for reachable
        self._call_by_node: dict = {}
        self._lambdas: dict = {}
        self._walking = True   # the walk below is running: the scopes' tables are not complete yet
        self._defined: Optional[frozenset] = None  # function_of's keys, once the walk is done (_defined_names)
        self._function_objects: Optional[Set[str]] = None
        # `ddp = False` bound once for good: `if ddp:` bodies are not indexed, as dead code (fr47)
        self.false_flags: Set[str] = cond.false_flags(tree)
        self.none_flags: Set[str] = cond.none_flags(tree)
        self._local_flags: dict = {}  # id(function node) -> (its false_flags, its none_flags)
        self._prepass(tree.body)
        if self.star_imports:
            # `from model_block.net import *` and then `torch.distributed.init_process_group(...)` with no import of
            # torch in the file (fr127 ywj55555/material distributed_train.py): the star import brought the module
            # in under its own name; nothing else is called `torch` (or `nn`) in practice
            # ... and so do the standard library's modules (`os.environ["MASTER_ADDR"] = ...` in a setup() helper
            # with `os` from `from utils.datasets import *`, fr130 PerryXDeng/multi_gpu_gan_inversion dist_train.py:
            # LINT002 said nothing set MASTER_*): a name the file never binds, used as `name.attr`, that is a module
            # of Python's standard library (sys.stdlib_module_names) is that module
            bound, used = set(), set()
            for n in ast.walk(tree):
                if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
                    bound.add(n.id)
                elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    bound.add(n.name)
                elif isinstance(n, ast.arg):
                    bound.add(n.arg)
                elif isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and isinstance(n.value.ctx, ast.Load):
                    used.add(n.value.id)
            pairs = [("torch", "torch"), ("nn", "torch.nn")] + [(m, m) for m in sorted(used & _STDLIB)]
            for local, target in pairs:
                if local not in self.module.imports and local in used and local not in bound:
                    self.module.imports[local] = target
        self._block(tree.body, self.module, Ctx())
        self._walking = False

    def release(self) -> None:
        """Break the index's reference cycles (a scope and its parent, a scope and its calls) once no rule
        will read it again, so its objects and the tree they hold are freed by reference counting at once.
        Left as cycles, ~80,000 objects of a 5,000-line file wait for the cyclic collector, whose pass over them
        cost 30-180 ms after each file (measured with gc.callbacks on benchmarks/bench_lint.py's file)."""
        for scope in self.scopes:
            scope.parent = scope.cls = None
            for name in ("functions", "classes", "values", "imports"):
                getattr(scope, name).clear()
            for name in ("calls", "lambdas", "loops", "assigns"):
                getattr(scope, name).clear()
        for table in (self.scopes, self.calls, self.by_qual, self.by_name, self.assigns, self.env_sets, self.withs,
                      self.loops, self.flags, self.rank_funcs, self._reach_cache, self._callees_of, self._call_by_node,
                      self._lambdas, self.memo):
            table.clear()

    # ------------------------------------------------------------------ name resolution
    def _prepass(self, body: list) -> None:
        """Module-level imports and aliases first: functions may use names imported below them.
        Iterative (a stack of blocks), so long elif chains cannot exhaust the recursion limit."""
        mod = self.module
        blocks = [body]
        while blocks:
            for stmt in blocks.pop():
                if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                    if isinstance(stmt, ast.ImportFrom) and any(a.name == "*" for a in stmt.names):
                        self.star_imports = True
                        if stmt.module:
                            self.star_modules.append("." * (stmt.level or 0) + stmt.module)
                    for local, target in import_bindings(stmt):
                        mod.imports[local] = canonical(self.reexports.get(target.lstrip("."), target))
                        self.bound.add(local)
                elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    self.bound.add(stmt.name)
                elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                    for t in targets:
                        for n in ast.walk(t):
                            if isinstance(n, ast.Name):
                                self.bound.add(n.id)
                elif isinstance(stmt, ast.If):
                    blocks += [stmt.body, stmt.orelse]
                elif isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
                    blocks += [stmt.body, stmt.orelse, stmt.finalbody] + [h.body for h in stmt.handlers]
                elif isinstance(stmt, (ast.With, ast.For, ast.While)):
                    blocks.append(stmt.body)

    def qual(self, expr: ast.AST, scope: Scope) -> Optional[str]:
        """Canonical dotted name of what `expr` refers to, if it is a library object we can name."""
        if isinstance(expr, ast.Name):
            name = expr.id
            s: Optional[Scope] = scope
            while s is not None:
                if name in s.imports:
                    return s.imports[name]
                if name in s.locals or name in s.functions or name in s.classes:
                    return None
                s = s.parent
            if name not in self.bound:
                if self.star_imports and name in STAR_MODULES:
                    return STAR_MODULES[name]
                if name.endswith(("Trainer", "TrainingArguments")) and any(
                        not m.lstrip(".").startswith(("transformers", "trl")) for m in self.star_modules):
                    # `from utils import *` and a `Trainer(...)` bound nowhere here: the project's own class from that
                    # module (fr98 ashawkey/pytorch_ddp_example, a false LINT001 error), not a pasted transformers one
                    return None
                return WELL_KNOWN.get(name)
            return None
        if isinstance(expr, ast.Attribute):
            base = self.qual(expr.value, scope)
            return canonical(f"{base}.{expr.attr}") if base else None
        if isinstance(expr, ast.Call):
            func = self.qual(expr.func, scope)
            if func == "multiprocessing.get_context":
                return "multiprocessing"
        return None

    def function_of(self, expr: ast.AST, scope: Scope, depth: int = 0) -> Optional[Scope]:
        """The function (or lambda) in this file that `expr` names, e.g. a spawn target."""
        if depth > 4 or expr is None:
            return None
        t = type(expr)
        if t is ast.Name or (t is ast.Attribute and type(expr.value) is ast.Name):
            # a name no scope of the file binds as a function, a class or a value names none of them: answered
            # without the walk up the scopes (rules ask this of every call of the file, ~7,000 times a 5,000-line
            # lint, and most calls are the libraries' `len`, `x.to`, `torch.zeros`)
            names = self._defined
            if names is None and not self._walking:
                names = self._defined = self._defined_names()
            if names is not None and (expr.id if t is ast.Name else expr.attr) not in names:
                return None
        if isinstance(expr, ast.Lambda):
            return self._lambdas.get(id(expr))
        if isinstance(expr, ast.Call):  # functools.partial(fn, ...)
            q = self.qual(expr.func, scope)
            if (q == "functools.partial" or (expr.func and dotted(expr.func) in ("partial", "functools.partial"))) \
                    and expr.args:
                return self.function_of(expr.args[0], scope, depth + 1)
            return None
        if isinstance(expr, ast.Name):
            s: Optional[Scope] = scope
            while s is not None:
                if expr.id in s.functions:
                    return s.functions[expr.id]
                klass = s.classes.get(expr.id)  # `spawn(Trainer, args=(ws,))`: the class runs its __init__ (fr78 BooHwang)
                if klass is not None:
                    return klass.functions.get("__init__")
                value = s.values.get(expr.id)  # worker = partial(run, cfg) / worker = lambda r: ...
                if value is not None and value is not expr:
                    return self.function_of(value, s, depth + 1)
                s = s.parent
            return None
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id in ("self", "cls"):
            s = scope
            while s is not None and s.cls is None and s.kind != "class":
                s = s.parent
            klass = s if s is not None and s.kind == "class" else (s.cls if s is not None else None)
            if klass is not None:
                return klass.functions.get(expr.attr)
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
            # `MultiGPUTrainer.ddp_setup(rank, world)`: a static or class method called through its class of this
            # file (fr80 Sathware/SketchDNN: the spawned function joins the group there)
            klass = self.local_class(expr.value, scope)
            if klass is not None:
                method = klass.functions.get(expr.attr)
                if method is not None and any(d in ("staticmethod", "classmethod") for d in method.decorators):
                    return method
        return None

    def _defined_names(self) -> frozenset:
        """Every name a scope of the file binds as a function, a class or a plain value (function_of's only keys: a
        Name is looked up in these tables, `self.f` / `Klass.f` by its attribute in a class's functions). Made once
        the walk is done (before it, the tables are still growing and nothing is kept)."""
        out: set = set()
        for sc in self.scopes:
            out.update(sc.functions)
            out.update(sc.classes)
            out.update(sc.values)
        return frozenset(out)

    def callee(self, call: Call) -> Optional[Scope]:
        """The function of this file that `call` runs: the function it names, or the constructor of the
        class it names (`Trainer(...)` runs Trainer.__init__, `cls(...)` in a classmethod its class's);
        None for anything defined elsewhere."""
        fn = self.function_of(call.node.func, call.scope)
        if fn is None:
            klass = self.local_class(call.node.func, call.scope) or self._own_class(call.node.func, call.scope)
            fn = klass.functions.get("__init__") if klass is not None else None
        return fn

    @staticmethod
    def _own_class(func: ast.AST, scope: Scope) -> Optional[Scope]:
        """The class `cls(...)` (in a classmethod) or `type(self)(...)` builds: the method's own class (ffcv's
        `trainer = cls(gpu=gpu)`)."""
        if scope.cls is None:
            return None
        if isinstance(func, ast.Name) and func.id == "cls":
            return scope.cls
        if isinstance(func, ast.Call) and dotted(func.func) == "type" and len(func.args) == 1 and \
                dotted(func.args[0]) == "self":
            return scope.cls
        return None

    def local_class(self, expr: ast.AST, scope: Scope) -> Optional[Scope]:
        if isinstance(expr, ast.Name):
            s: Optional[Scope] = scope
            while s is not None:
                if expr.id in s.classes:
                    return s.classes[expr.id]
                s = s.parent
        return None

    def class_bases(self, klass: Scope, depth: int = 0) -> List[str]:
        """Resolved names of a class's bases, following bases defined in this file."""
        out: List[str] = []
        if depth > 5:
            return out
        for base in klass.node.bases:
            q = self.qual(base, klass.parent or self.module)
            if q:
                out.append(q)
                continue
            local = self.local_class(base, klass.parent or self.module)
            if local is not None and local is not klass:
                out.extend(self.class_bases(local, depth + 1))
            else:
                text = dotted(base)
                if text:
                    out.append("?" + text)  # unresolved: keep the spelling for heuristics
        return out

    def class_of_call(self, call: Call) -> Optional[Scope]:
        return self.local_class(call.node.func, call.scope)

    def is_kind(self, call: Call, quals: Iterable[str]) -> bool:
        """The call constructs one of `quals`, directly or through a subclass defined in this file."""
        quals = set(quals)
        if call.qual in quals:
            return True
        klass = self.class_of_call(call)
        if klass is not None:
            return any(b in quals for b in self.class_bases(klass))
        return False

    # ------------------------------------------------------------------ call graph
    def callees(self, scope: Scope) -> List[Scope]:
        """Functions in this file that `scope` calls, passes as a callback, or defines as a lambda."""
        out: List[Scope] = []
        for call in scope.calls:
            target = self.function_of(call.node.func, scope)
            if target is not None:
                out.append(target)
            elif isinstance(call.node.func, ast.Name) and self.local_class(call.node.func, scope) is not None:
                init = self.local_class(call.node.func, scope).functions.get("__init__")
                if init is not None:
                    out.append(init)
            elif self._own_class(call.node.func, scope) is not None:
                init = self._own_class(call.node.func, scope).functions.get("__init__")
                if init is not None:
                    out.append(init)
            for a in list(call.node.args) + [k.value for k in call.node.keywords]:
                if isinstance(a, (ast.Name, ast.Attribute, ast.Lambda)) or (
                        isinstance(a, ast.Call) and dotted(a.func) in ("partial", "functools.partial")):
                    cb = self.function_of(a, scope)
                    if cb is not None:
                        out.append(cb)
        out.extend(scope.lambdas)
        return out

    def reachable(self, scope: Scope, depth: int = 8) -> List[Scope]:
        """`scope` and every function of this file it can reach, breadth first."""
        key = (id(scope), depth)
        if key in self._reach_cache:
            return self._reach_cache[key]
        seen = {id(scope): scope}
        frontier = [scope]
        for _ in range(depth):
            nxt = []
            for s in frontier:
                callees = self._callees_of.get(id(s))
                if callees is None:  # reachable() starts from many scopes whose searches share callees
                    callees = self._callees_of[id(s)] = self.callees(s)
                for c in callees:
                    if id(c) not in seen:
                        seen[id(c)] = c
                        nxt.append(c)
            if not nxt:
                break
            frontier = nxt
        out = list(seen.values())
        self._reach_cache[key] = out
        return out

    def calls_in(self, scopes: Iterable[Scope]) -> Iterable[Call]:
        for s in scopes:
            yield from s.calls

    def function_object_test(self, test: ast.AST) -> bool:
        """`if is_main_process:` / `if not is_main_process:` where the name holds a function, not its result:
        a `def` of this module, or an `is_*` rank-test word imported by name (`from utils import
        is_main_process`, the torchvision-references/DETR helper), never assigned in the file. The test is
        always true (always false with `not`), so it gates nothing (fr72 The-AI-Summer/pytorch-ddp)."""
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test = test.operand
        if not isinstance(test, ast.Name) or not cond.is_main_word(test.id):
            return False
        names = self._function_objects
        if names is None:
            names = self._function_objects = _function_objects(self.tree)
        return test.id in names

    def run_at_start(self) -> List[Call]:
        """Calls that run when the file is executed as a script: module level, guarded or not."""
        return [c for c in self.module.calls if c.ctx.module_level]

    # ------------------------------------------------------------------ the walk
    def _block(self, body: list, scope: Scope, ctx: Ctx) -> None:
        for stmt in body:
            self._stmt(stmt, scope, ctx)
            if isinstance(stmt, (ast.Raise, ast.Return)):
                # the rest of the block never runs: `def save_model_fsdp(...): raise RuntimeError("not
                # implemented")` followed by the old save code (fr155 DelyanHristov/ReLoRa, DibyoKgpIIT/CAGE_capping,
                # wrong LINT013 at first read); it is not indexed, like the bodies of a `ddp = False` flag (fr47)
                break
            # `if rank != 0: return` makes the rest of the block rank-0 only.
            if isinstance(stmt, ast.If) and not stmt.orelse and cond.terminates(stmt.body):
                ctx = ctx._replace(exits=ctx.exits + (stmt.test,))
                if self.function_object_test(stmt.test):
                    pass
                elif cond.covers_others(stmt.test, self.flags):
                    ctx = ctx._replace(rank0=True, gated=True, gate=stmt)
                elif cond.mentions_rank(stmt.test, self.flags) and not cond.unset_rank_test(stmt.test):
                    ctx = ctx._replace(gated=True)

    def _stmt(self, stmt: ast.AST, scope: Scope, ctx: Ctx) -> None:
        t = type(stmt)
        if t is ast.Expr:
            self._expr(stmt.value, scope, ctx)
        elif t is ast.Assign or t is ast.AnnAssign or t is ast.AugAssign:
            self._assign(stmt, scope, ctx)
        elif t is ast.If:
            self._if(stmt, scope, ctx)
        elif t is ast.For or t is ast.AsyncFor or t is ast.While:
            if t is ast.While:
                self._expr(stmt.test, scope, ctx)
            else:
                self._expr(stmt.iter, scope, ctx)
                self._bind_targets(stmt.target, scope)
            loop = Loop(stmt, scope, ctx)
            self.loops.append(loop)
            scope.loops.append(loop)
            inner = ctx._replace(loops=ctx.loops + 1)
            self._block(stmt.body, scope, inner)
            self._block(stmt.orelse, scope, ctx)
        elif t is ast.With or t is ast.AsyncWith:
            inner = ctx
            for item in stmt.items:
                self._expr(item.context_expr, scope, ctx)
                if isinstance(item.context_expr, ast.Call):
                    c = self._call_for(item.context_expr)
                    if c is not None:
                        c.with_item = True
                        if c.qual in _NO_GRAD or (c.qual == "torch.set_grad_enabled" and c.node.args and
                                                  isinstance(c.node.args[0], ast.Constant) and
                                                  c.node.args[0].value is False):
                            inner = inner._replace(no_grad=True)
                if item.optional_vars is not None:
                    self._bind_targets(item.optional_vars, scope)
                    if isinstance(item.context_expr, ast.Call):
                        names = dotted(item.optional_vars)
                        if names:
                            a = Assign(stmt, [names], item.context_expr,
                                       self._call_for(item.context_expr), scope, ctx)
                            scope.assigns.append(a)
                            self.assigns.append(a)
            self.withs.append(WithBlock(stmt, scope, inner))
            self._block(stmt.body, scope, inner)
        elif t is ast.FunctionDef or t is ast.AsyncFunctionDef:
            self._function(stmt, scope, ctx)
        elif t is ast.ClassDef:
            self._class(stmt, scope, ctx)
        elif t is ast.Import or t is ast.ImportFrom:
            for local, target in import_bindings(stmt):
                scope.imports[local] = canonical(self.reexports.get(target.lstrip("."), target))
                scope.locals.discard(local)
        elif t is ast.Try or t.__name__ == "TryStar":
            self._block(stmt.body, scope, ctx)
            for h in stmt.handlers:
                if h.type is not None:
                    self._expr(h.type, scope, ctx)
                self._block(h.body, scope, ctx)
            self._block(stmt.orelse, scope, ctx)
            self._block(stmt.finalbody, scope, ctx)
        elif t is ast.Return:
            if stmt.value is not None:
                self._expr(stmt.value, scope, ctx)
        elif t.__name__ == "Match":
            self._expr(stmt.subject, scope, ctx)
            for case in stmt.cases:
                self._block(case.body, scope, ctx)
        elif t in (ast.Pass, ast.Break, ast.Continue, ast.Global, ast.Nonlocal):
            pass
        else:  # Raise, Assert, Delete, ...: just index the expressions in it
            for child in ast.iter_child_nodes(stmt):
                if isinstance(child, ast.expr):
                    self._expr(child, scope, ctx)

    def _if(self, stmt: ast.If, scope: Scope, ctx: Ctx) -> None:
        """An if/elif/else chain, walked as a loop: a 1,000-branch elif chain must not recurse 1,000 deep."""
        while True:
            self._expr(stmt.test, scope, ctx)
            test = stmt.test
            if cond.is_main_guard(test):
                body_ctx, else_ctx = ctx._replace(guarded=True), ctx
            else:
                body_ctx, else_ctx = ctx, ctx
                flags = self.flags
                if self.function_object_test(test):
                    pass  # `if is_main_process:` tests the function object: true on every rank
                elif cond.body_rank0(test, flags):
                    body_ctx = ctx._replace(rank0=True, gated=True, gate=stmt)
                    else_ctx = ctx._replace(gated=True)
                elif cond.covers_others(test, flags):
                    body_ctx = ctx._replace(gated=True)
                    else_ctx = ctx._replace(rank0=True, gated=True, gate=stmt)
                elif cond.mentions_rank(test, flags):
                    body_ctx = else_ctx = ctx._replace(gated=True)
                if self._mentions_environ(test):
                    body_ctx = body_ctx._replace(env_test=True)
                    else_ctx = else_ctx._replace(env_test=True)
            body_ctx = body_ctx._replace(branch=body_ctx.branch + ((test, 0),))
            else_ctx = else_ctx._replace(branch=else_ctx.branch + ((test, 1),))
            truth = cond.static_truth(test, *self._flags_at(scope))
            if truth is not False:
                self._block(stmt.body, scope, body_ctx)
            if truth is True:  # the else arm (and any elif chain below) never runs
                return
            if len(stmt.orelse) == 1 and type(stmt.orelse[0]) is ast.If:
                stmt, ctx = stmt.orelse[0], else_ctx
                continue
            self._block(stmt.orelse, scope, else_ctx)
            return

    def _flags_at(self, scope: Scope):
        """The names bound once to a falsy constant (and to None) that an `if` in `scope` sees: the module's, and
        those of the enclosing function's own body (`ckpt_path = None` ... `if ckpt_path is not None:`)."""
        if scope.kind != "function" or not isinstance(scope.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return self.false_flags, self.none_flags
        got = self._local_flags.get(id(scope.node))
        if got is None:
            local = cond.false_flags(scope.node)  # type: ignore[arg-type]
            nones = cond.none_flags(scope.node) if local else set()
            got = (self.false_flags | local, self.none_flags | nones) if local else (self.false_flags, self.none_flags)
            self._local_flags[id(scope.node)] = got
        return got

    @staticmethod
    def _mentions_environ(test: ast.AST) -> bool:
        for n in expr_nodes(test):
            if isinstance(n, ast.Attribute) and n.attr in ("environ", "getenv"):
                return True
            if isinstance(n, ast.Constant) and n.value in ENV_NAMES_OF_INTEREST:
                return True
        return False

    def _bind_targets(self, target: ast.AST, scope: Scope) -> None:
        """Names an assignment binds: `x`, `a, (b, *c)`; not the base of `torch.backends.x = ...` or `d[k] = ...`."""
        if scope.kind == "module":
            return
        stack = [target]
        while stack:
            n = stack.pop()
            if isinstance(n, ast.Name):
                scope.locals.add(n.id)
                scope.imports.pop(n.id, None)
            elif isinstance(n, (ast.Tuple, ast.List)):
                stack.extend(n.elts)
            elif isinstance(n, ast.Starred):
                stack.append(n.value)

    def _call_for(self, node: ast.AST) -> Optional[Call]:
        return self._call_by_node.get(id(node))

    def _assign(self, stmt, scope: Scope, ctx: Ctx) -> None:
        value = stmt.value
        if value is not None:
            self._expr(value, scope, ctx)
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        call = self._call_for(value) if isinstance(value, ast.Call) else None
        for target in targets:
            self._expr_targets(target, scope, ctx)
            # os.environ["RANK"] = ...
            if isinstance(target, ast.Subscript) and self.qual(target.value, scope) == "os.environ":
                key = const_str(target.slice)
                if key is not None and not isinstance(stmt, ast.AugAssign):
                    self.env_sets.append(EnvSet(key, value, stmt, scope, ctx))
                continue
            if isinstance(stmt, ast.AugAssign):
                if isinstance(target, ast.Name):
                    self.flags.pop(cond.ZERO_KEY + target.id, None)  # `k = 0` ... `k += 1`: no longer rank 0's
                continue
            names = dotted(target)
            if names is None and isinstance(target, (ast.Tuple, ast.List)):
                names = [dotted(e) for e in target.elts]
                record = Assign(stmt, names, value, call, scope, ctx)
            else:
                record = Assign(stmt, [names] if names else [], value, call, scope, ctx)
            scope.assigns.append(record)
            self.assigns.append(record)
            if isinstance(target, ast.Name) and value is not None:
                scope.values[target.id] = value
            if isinstance(target, ast.Name):  # the constant 0 a rank is compared with (`gpu_id2save = 0`)
                if isinstance(value, ast.Constant) and value.value == 0 and type(value.value) is int:
                    self.flags[cond.ZERO_KEY + target.id] = value
                else:
                    self.flags.pop(cond.ZERO_KEY + target.id, None)
            if names and isinstance(names, str) and value is not None and not isinstance(stmt, ast.AugAssign):
                if cond.is_rank_test(value, self.flags):
                    self.flags[names] = value  # kept when another branch assigns a constant (`else: master = True`)
            elif isinstance(target, ast.Subscript) and value is not None:
                # a settings field rewritten from a rank flag: `model_config['enable_tb'] = False if disable_tqdm
                # else model_config['enable_tb']` (fr142 GFMDiff run_fsdp.py)
                key = flag_name(target)
                if key is not None and cond.is_rank_test(value, self.flags):
                    self.flags[key] = value
            # Aliases: `spawn = mp.spawn`, `DDP = torch.nn.parallel.DistributedDataParallel`.
            if isinstance(target, ast.Name):
                if isinstance(value, (ast.Name, ast.Attribute)) and self.qual(value, scope):
                    scope.imports[target.id] = self.qual(value, scope)
                    scope.locals.discard(target.id)
                elif call is not None and call.qual == "multiprocessing.get_context":
                    scope.imports[target.id] = "multiprocessing"
                elif scope.kind != "module":
                    scope.locals.add(target.id)
                    scope.imports.pop(target.id, None)
            elif scope.kind != "module":
                self._bind_targets(target, scope)

    def _expr_targets(self, target: ast.AST, scope: Scope, ctx: Ctx) -> None:
        """Index calls hidden in assignment targets (`x[f()] = ...`)."""
        if isinstance(target, (ast.Name, ast.Attribute)) and not isinstance(getattr(target, "value", None), ast.Call):
            return
        self._expr(target, scope, ctx)

    def _function(self, node, scope: Scope, ctx: Ctx) -> None:
        for d in node.decorator_list:
            self._expr(d, scope, ctx)
        args = node.args
        for d in list(args.defaults) + [d for d in args.kw_defaults if d is not None]:
            self._expr(d, scope, ctx)
        fn = Scope("function", node.name, node, scope, ctx)
        fn.params = [a.arg for a in list(args.posonlyargs) + list(args.args) + list(args.kwonlyargs)]
        if args.vararg:
            fn.params.append(args.vararg.arg)
        if args.kwarg:
            fn.params.append(args.kwarg.arg)
        fn.locals.update(fn.params)
        fn.decorators = [dotted(d.func if isinstance(d, ast.Call) else d) or "" for d in node.decorator_list]
        if scope.kind == "class":
            fn.cls = scope
        elif scope.cls is not None:
            fn.cls = scope.cls
        scope.functions[node.name] = fn
        if scope.kind != "module":
            scope.locals.discard(node.name)
        self.scopes.append(fn)
        inner = Ctx(module_level=False)
        if scope.kind == "function":
            # a nested function (a hook, a callback) exists only where its `def` ran: defined after
            # `if rank != 0: return`, it runs on rank 0 only
            inner = inner._replace(rank0=ctx.rank0, gated=ctx.gated, gate=ctx.gate, branch=ctx.branch, exits=ctx.exits)
        decos = " ".join(fn.decorators).lower()
        if any(w in decos for w in _GATING_DECORATORS):
            inner = inner._replace(gated=True, rank0=True)
        if any(self.qual(d.func if isinstance(d, ast.Call) else d, scope) in _NO_GRAD for d in node.decorator_list):
            inner = inner._replace(no_grad=True)
        self._block(node.body, fn, inner)
        body = [b for b in node.body if not (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant))]
        if len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None and \
                cond.is_rank_test(body[0].value, self.flags):
            self.rank_funcs[node.name + "()"] = body[0].value

    def _class(self, node: ast.ClassDef, scope: Scope, ctx: Ctx) -> None:
        for b in list(node.bases) + [k.value for k in node.keywords] + list(node.decorator_list):
            self._expr(b, scope, ctx)
        klass = Scope("class", node.name, node, scope, ctx)
        scope.classes[node.name] = klass
        self.scopes.append(klass)
        self._block(node.body, klass, ctx._replace(loops=0))

    def _expr(self, expr: ast.AST, scope: Scope, ctx: Ctx) -> None:
        """Index every call in an expression; lambdas get their own scope."""
        stack = [expr]
        pop, push = stack.pop, stack.extend
        while stack:
            node = pop()
            if node is None:  # holes in lists: Dict keys of `**x`, missing kw_defaults
                continue
            t = type(node)
            if t is ast.Call:
                call = Call(node, self.qual(node.func, scope), scope, ctx)
                self.calls.append(call)
                self._call_by_node[id(node)] = call
                scope.calls.append(call)
                if call.qual:
                    self.by_qual.setdefault(call.qual, []).append(call)
                if call.name:
                    self.by_name.setdefault(call.name, []).append(call)
                self._special_call(call, scope, ctx)
            elif t is ast.Compare:
                self.compares.append((node, scope))
            elif t is ast.Lambda:
                lam = Scope("lambda", "<lambda>", node, scope, ctx)
                lam.params = [a.arg for a in node.args.args]
                lam.locals.update(lam.params)
                lam.cls = scope.cls if scope.kind != "class" else scope
                scope.lambdas.append(lam)
                self.scopes.append(lam)
                self._lambdas[id(node)] = lam
                self._expr(node.body, lam, Ctx(module_level=False, no_grad=ctx.no_grad))
                continue
            elif t in _LEAVES:
                continue
            elif t is ast.IfExp:
                # `SummaryWriter(...) if rank == 0 else None`: the branches are gated like an if-block. Each arm
                # also records the test in its branch, as an if-block does, so that a flag this walk has not met
                # yet is read later with the project's flags (facts.gate): `wandb.log(...) if not disable_tqdm
                # else None` in a function defined above `disable_tqdm = rank != 0` (fr142 GFMDiff run_fsdp.py)
                test = node.test
                self._expr(test, scope, ctx)
                body_ctx = ctx._replace(branch=ctx.branch + ((test, 0),))
                else_ctx = ctx._replace(branch=ctx.branch + ((test, 1),))
                if cond.mentions_rank(test, self.flags):
                    body_ctx = body_ctx._replace(gated=True, rank0=ctx.rank0 or cond.body_rank0(test, self.flags))
                    else_ctx = else_ctx._replace(gated=True, rank0=ctx.rank0 or cond.covers_others(test, self.flags))
                self._expr(node.body, scope, body_ctx)
                self._expr(node.orelse, scope, else_ctx)
                continue
            fields = _CHILD_FIELDS.get(t)
            if fields is None:
                fields = child_fields(t)
            for field in fields:  # ast.iter_child_nodes, inlined: this loop is the hot path
                value = getattr(node, field, None)
                if value is None:
                    continue
                if type(value) is list:
                    push(value)
                elif isinstance(value, ast.AST):
                    stack.append(value)

    def _special_call(self, call: Call, scope: Scope, ctx: Ctx) -> None:
        q = call.qual
        if q is None:
            return
        if q in ("multiprocessing.get_context", "multiprocessing.set_start_method"):
            method = const_str(call.arg(0, "method"))
            if method:
                self.start_methods.add(method)
        elif q == "os.environ.update":
            for a in call.node.args:
                if isinstance(a, ast.Dict):
                    for k, v in zip(a.keys, a.values):
                        key = const_str(k) if k is not None else None
                        if key:
                            self.env_sets.append(EnvSet(key, v, call.node, scope, ctx))
            for k in call.node.keywords:
                if k.arg:
                    self.env_sets.append(EnvSet(k.arg, k.value, call.node, scope, ctx))
        elif q in ("os.environ.setdefault", "os.putenv"):
            key = const_str(call.arg(0))
            if key:
                self.env_sets.append(EnvSet(key, call.arg(1), call.node, scope, ctx))

    # ------------------------------------------------------------------ helpers for rules
    def calls_named(self, *quals: str) -> List[Call]:
        out: List[Call] = []
        for q in quals:
            out.extend(self.by_qual.get(q, ()))
        return out

    def env_value(self, name: str) -> Optional[ast.AST]:
        """The value a script assigns to an env var (the last one, by line), if any."""
        found = [e for e in self.env_sets if e.name == name]
        return max(found, key=lambda e: e.node.lineno).value if found else None

    def sets_env(self, name: str) -> bool:
        return any(e.name == name for e in self.env_sets)


def gated_scopes(index: ModuleIndex, external: Optional[Dict[str, bool]] = None) -> Set[int]:
    """Functions (ids of their scopes) whose every call site is under a rank test, directly, through
    callers that are themselves gated, or (for module-level functions and classes) through callers in
    other modules of the same run (`external`: name -> all those sites gated)."""
    sites: Dict[int, list] = {}
    for call in index.calls:
        fn = index.callee(call)
        if fn is not None:
            sites.setdefault(id(fn), []).append(call)
    return propagate_gates(index, sites, lambda c: c.ctx.gated, external)


def propagate_gates(index: ModuleIndex, sites: Dict[int, list], is_gated: Callable[[Call], bool],
                    external: Optional[Dict[str, bool]] = None) -> Set[int]:
    """From each function's call sites (`sites`: id of its scope -> the calls that reach it), the functions
    every one of whose sites is gated (`is_gated`) or sits in a gated function, to a fixed point; then
    every method of a class whose constructor is gated (the object exists on one rank only). `external`
    (name -> all of its sites in other modules gated) adds what the other modules of the run say."""
    gated: Set[int] = set()
    if external:
        for name, all_gated in external.items():
            fn = index.module.functions.get(name)
            if fn is None and name in index.module.classes:
                fn = index.module.classes[name].functions.get("__init__")
            if fn is None:
                continue
            if all_gated and all(is_gated(c) for c in sites.get(id(fn), [])):
                gated.add(id(fn))
            elif not all_gated:
                sites.setdefault(id(fn), []).append(None)  # an ungated caller elsewhere
    for _ in range(6):
        changed = False
        for key, calls in sites.items():
            if key in gated:
                continue
            if all(c is not None and (is_gated(c) or id(c.scope) in gated) for c in calls):
                gated.add(key)
                changed = True
        if not changed:
            break
    # Methods of a class whose constructor is only called under a gate: the object exists on rank 0 only.
    for s in index.scopes:
        if s.kind == "class":
            init = s.functions.get("__init__")
            if init is not None and id(init) in gated:
                for m in s.functions.values():
                    gated.add(id(m))
    return gated


def _function_objects(tree: ast.Module) -> Set[str]:
    """Module-level names that hold a function object: `def`s of the module, and `is_*` words imported by
    name from another module (`from utils import is_main_process`), minus any name assigned in the file."""
    names: Set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                bound = alias.asname or alias.name
                if bound.startswith("is_") and alias.name.startswith("is_"):
                    names.add(bound)
    if not names:
        return names
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)):
            targets = [node.target]
        else:
            continue
        for target in targets:
            for t in ast.walk(target):
                if isinstance(t, ast.Name):
                    names.discard(t.id)
    return names
