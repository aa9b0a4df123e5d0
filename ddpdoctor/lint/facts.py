"""Facts about the whole project, computed once per lint run and asked by the rules.

A rule must not re-derive what the project already says elsewhere: that `params.log_to_wandb` holds
`world_rank == 0` (set in another module), that `is_root_worker()` returns a rank test, that
`wandb.run` exists on rank 0 only because every `wandb.init` is gated, that a helper is called only
under a rank gate by every caller in every module, that a function is never called at all, that the
project writes its checkpoints from the CPU, where the project is launched with `deepspeed`. This
module answers those questions from the per-file indexes (`analysis.ModuleIndex`), the launch
context read beside them (`lint.context`) and the project modules they import that are not linted
with them (parsed by `lint.project`: a gate function, a gating decorator); it reads nothing itself.

Why not a library: libcst's scope and qualified-name providers, astroid's inference and jedi were
measured on the generated 5,012-line script (benchmarks/bench_lint.py --libraries): libcst parses in
about 460 ms and resolves scopes and qualified names in about 3 s, astroid parses in about 440 ms
and infers the called function of every call in about 30 s, jedi lists names in about 500 ms, against
about 45 ms for `ast.parse` and a 150 ms budget for the whole lint. The questions here are narrow
(a name, its attribute, the function a call names, the test around it), so the index answers them
from the one `ast` walk.
"""
from __future__ import annotations

import ast
import os
import re
from typing import Dict, Iterable, List, Optional, Set, Tuple

from . import conditions as cond
from .analysis import Call, Ctx, ModuleIndex, Scope, module_fact, propagate_gates
from .names import dotted, expr_nodes, import_bindings

# decorators that register nothing: a function they decorate still runs only if something calls it
_PLAIN_DECORATORS = {"no_grad", "inference_mode", "enable_grad", "lru_cache", "cache", "wraps", "torch.no_grad"}
_COMMENT_LINE = re.compile(r"(?m)^[ \t]*#.*$")
_RANK0_TEST = ast.parse("rank == 0", mode="eval").body  # what a rank-0-only object's existence tests
_LIBRARIES = ("torch", "transformers", "os", "accelerate", "numpy", "wandb", "deepspeed", "datasets", "sys",
              "logging", "json", "math", "random", "time", "re", "collections", "functools", "itertools", "typing")


_WORD = re.compile(r"\w+")  # an identifier-like run (references: one count of them all)

class ProjectFlags(dict):
    """Names that hold a rank test, as conditions.py asks for them: a dotted name seen in this file
    (`master_process`), an attribute of any object anywhere in the project (`params.log_to_wandb`,
    `cfg.save`), a function or method that returns a rank test (`is_root_worker()`), or an object
    that exists on rank 0 only (`writer`, `wandb.run`)."""

    def __init__(self, local: Dict[str, ast.AST], attrs: Dict[str, ast.AST], funcs: Dict[str, ast.AST]):
        super().__init__(local)
        self.attrs = attrs
        self.funcs = funcs

    def get(self, key, default=None):  # noqa: D401 - dict protocol
        found = dict.get(self, key)
        if found is not None:
            return found
        if key.endswith("()"):
            return self.funcs.get(key.rsplit(".", 1)[-1], default)
        if "." in key:
            return self.attrs.get(key.rsplit(".", 1)[-1], default)
        return default

    def __bool__(self) -> bool:
        return True


class ProjectFacts:
    """Everything the rules ask about the project as a whole. Cheap to build; each fact is computed on
    first use and kept."""

    def __init__(self, indexes: Dict[str, ModuleIndex], context=None):
        self.indexes = indexes
        self.context = context  # lint.context.ProjectContext or None
        self._flags: Dict[int, ProjectFlags] = {}
        self._shared: Optional[Tuple[Dict[str, ast.AST], Dict[str, ast.AST], Dict[str, ast.AST]]] = None
        self._gated: Dict[int, Set[int]] = {}
        self._external: Optional[Dict[Tuple[str, str], List[bool]]] = None
        self._idents: Dict[str, int] = {}
        self._sources: Optional[List[str]] = None
        self._words = None  # Counter of every \w+ run of the sources (references), made on first need
        self._trains: Optional[bool] = None
        self.cache: Dict[str, object] = {}
        self.imported: Dict[str, ast.Module] = {}  # path -> tree of imported, unlinted project modules
        self._imported_facts: Optional[Tuple[Dict[str, ast.AST], Set[str], Dict[str, ast.AST]]] = None
        self._gate_memo: Dict[int, Dict[Tuple[int, bool], Tuple[bool, bool]]] = {}  # facts a rule module derives once per run (keyed by that module)

    def release(self) -> None:
        """Drop what the rules derived and kept (Project.release, once no rule reads the facts again). The rules'
        own caches (`cache`) hold objects that point back here (rules/_reach.Reach keeps these facts, and these
        facts keep the Reach): left as a cycle, the whole run's trees and indexes (~70,000 objects of a
        5,000-line file) waited for the cyclic collector, whose pass over them cost ~40 ms after every run."""
        for table in (self.cache, self._flags, self._gated, self._idents, self.imported, self._gate_memo):
            table.clear()
        self._shared = self._external = self._sources = self._imported_facts = self._words = None

    # ------------------------------------------------------------------ rank tests
    def _collect(self) -> Tuple[Dict[str, ast.AST], Dict[str, ast.AST], Dict[str, ast.AST]]:
        if self._shared is not None:
            return self._shared
        attrs: Dict[str, ast.AST] = {}
        funcs: Dict[str, ast.AST] = {}
        objects: Dict[str, ast.AST] = {}
        for index in self.indexes.values():
            for name, value in index.flags.items():
                if "." in name:
                    attrs.setdefault(name.rsplit(".", 1)[1], value)
            for name, value in index.rank_funcs.items():
                funcs.setdefault(name, value)
        for name, value in self.imported_facts()[0].items():
            funcs.setdefault(name, value)
        # Objects that exist on rank 0 only: every non-None assignment is under a rank-0 test (or is the
        # rank-0 arm of `X if rank == 0 else None`), so `if X:` / `if X is not None:` is a rank gate.
        sites: Dict[str, List[bool]] = {}
        nulls: Set[str] = set()  # names assigned None somewhere
        wandb_inits: List[bool] = []
        # Fields of a parsed argparse namespace exist on every rank before any assignment to them
        # (`args.experiment = exp_name` under `if args.rank == 0:` changes a value every rank already holds).
        options = {o for index in self.indexes.values() for o in _argparse_options(index)}
        for index in self.indexes.values():
            flags = index.flags
            for a in index.assigns:
                value = a.value
                if value is None or (isinstance(value, ast.Constant) and value.value is None):
                    if value is not None:
                        for n in a.targets:
                            if n and isinstance(n, str):
                                nulls.add(("." if n.startswith("self.") else "") + n.rsplit(".", 1)[-1])
                    continue
                only0 = a.ctx.rank0 or (isinstance(value, ast.IfExp) and isinstance(value.orelse, ast.Constant)
                                        and value.orelse.value is None and cond.body_rank0(value.test, flags))
                for n in a.targets:
                    if n and isinstance(n, str):
                        key = n.rsplit(".", 1)[1] if n.startswith("self.") else n
                        option = "." in n and not n.startswith("self.") and n.rsplit(".", 1)[1] in options
                        sites.setdefault(("." if n.startswith("self.") else "") + key, []).append(
                            bool(only0) and not option)
            for c in index.calls_named("wandb.init"):
                wandb_inits.append(c.ctx.rank0)
        # Flags handed to a constructor: `Checkpointer(..., save_to_disk)` with `save_to_disk = get_rank() == 0`
        # and `self.save_to_disk = save_to_disk` in `__init__`: the attribute holds the rank test.
        classes: Dict[str, Scope] = {}
        for index in self.indexes.values():
            for name, klass in index.module.classes.items():
                classes.setdefault(name, klass)
        if classes:
            # a rank-0-only object handed to a constructor holds the rank test too: `DDPMTrainer(..., wandb_run)`
            # with `wandb_run = wandb.init(...)` only under `if rank == 0` (None elsewhere) and
            # `self.wandb_run = wandb_run`, then `if self.wandb_run is not None: wandb.log(...)` (fr62 BearNinja123)
            only0 = {k: _RANK0_TEST for k, v in sites.items() if v and all(v) and not k.startswith(".")}
            # a handle every rank holds as None (its only other assignment switched off: `USE_WANDB = False`,
            # `if rank == 0 and USE_WANDB: wandb_run = wandb.init()`) opens on no rank: `is not None` never holds
            only0.update({k: _RANK0_TEST for k in nulls if k not in sites and not k.startswith(".")})
            for index in self.indexes.values():
                flags = {**only0, **index.flags} if only0 else index.flags
                for call in index.calls:
                    if not call.name or call.name not in classes:
                        continue
                    klass = classes[call.name]
                    init = klass.functions.get("__init__")
                    if init is None:
                        continue
                    held = _bind_held(init, call.node, flags, None)
                    for _level in range(3):  # `super().__init__(..., save_to_disk, ...)` hands it on
                        if not held:
                            break
                        for a in init.assigns:
                            if isinstance(a.value, ast.Name) and a.value.id in held:
                                for n in a.targets:
                                    if n and n.startswith("self."):
                                        attrs.setdefault(n.split(".", 1)[1], held[a.value.id])
                        up = next((c for c in init.calls if c.name == "__init__" and c.recv is None
                                   and isinstance(c.node.func, ast.Attribute)), None)
                        base = next((classes.get(dotted(b) or "") for b in klass.node.bases
                                     if classes.get(dotted(b) or "") is not None), None)
                        if up is None or base is None or base.functions.get("__init__") is None:
                            break
                        klass, init = base, base.functions["__init__"]
                        held = _bind_held(init, up.node, {}, held)
        for key, flags_ in sites.items():
            if flags_ and all(flags_):
                if key.startswith("."):
                    attrs.setdefault(key[1:], _RANK0_TEST)
                else:
                    objects.setdefault(key, _RANK0_TEST)
        if all(wandb_inits) and (wandb_inits or self._tests_wandb_run()):
            # every wandb.init is rank 0's, or none is in the files linted and the code tests `wandb.run` before it
            # logs: the run was started elsewhere, on the processes meant to log (Megatron starts it on the last
            # rank only: fr68 Megatron-DeepSpeed training.py)
            objects["wandb.run"] = _RANK0_TEST
        self._shared = (attrs, funcs, objects)
        return self._shared


    _WANDB_RUN_TEST = re.compile(r"wandb\.run\s+is\s+(?:not\s+)?None|getattr\(\s*wandb\s*,\s*['\"]run['\"][^)]*\)\s+is\s")

    def _tests_wandb_run(self) -> bool:
        """Some `if` of the run tests `wandb.run` (or `getattr(wandb, "run", ...)`) against None. Read from the
        source text: a walk of every tree cost a third of the 5,000-line benchmark's time."""
        return any("wandb" in (index.source or "") and self._WANDB_RUN_TEST.search(index.source)
                   for index in self.indexes.values())

    def flags(self, index: ModuleIndex) -> ProjectFlags:
        got = self._flags.get(id(index))
        if got is None:
            attrs, funcs, objects = self._collect()
            local = dict(objects)
            local.update(index.flags)
            got = self._flags[id(index)] = ProjectFlags(local, attrs, funcs)
        return got

    def gate(self, index: ModuleIndex, ctx: Ctx, single: bool = True) -> Tuple[bool, bool]:
        """(rank 0 only, under some rank test) for code in `ctx`, with the project's flags, rank-test
        functions, rank-0-only objects, and (`single`) the single-process branch of `if ddp:`, where the
        one process is rank 0 for writing files (but holds no DDP wrapper to hang on)."""
        if ctx.rank0:
            return True, True
        if not ctx.branch and not ctx.exits:
            return False, ctx.gated
        # _gate reads only these: calls under the same tests share one judgement, whatever else their Ctx holds
        key = (ctx.branch, ctx.exits, ctx.gated, single)
        memo = self._gate_memo.get(id(index))
        if memo is None:
            memo = self._gate_memo[id(index)] = {}
        got = memo.get(key)
        if got is None:
            got = memo[key] = self._gate(index, ctx, single)
        return got

    def _gate(self, index: ModuleIndex, ctx: Ctx, single: bool) -> Tuple[bool, bool]:
        flags = self.flags(index)
        rank0, gated = False, ctx.gated
        tests = list(ctx.branch) + [(t, 1) for t in ctx.exits]
        for test, side in tests:
            if index.function_object_test(test):
                continue  # `if is_main_process:` without the call: always true, no gate
            if side == 0:
                if cond.body_rank0(test, flags) or (single and cond.single_process(test, 0)):
                    rank0 = True
                elif cond.mentions_rank(test, flags):
                    gated = True
            else:
                if cond.covers_others(test, flags) or (single and cond.single_process(test, 1)):
                    rank0 = True
                elif cond.unset_rank_test(test):
                    continue  # past `if local_rank == -1: raise/return` (or its else): every launched rank
                elif cond.mentions_rank(test, flags):
                    gated = True
        return rank0, gated or rank0

    def gated(self, index: ModuleIndex, call: Call) -> bool:
        return call.ctx.gated or self.gate(index, call.ctx)[1] or self.decorated_gate(call.scope)

    # ------------------------------------------------------------------ imported project modules
    def imported_facts(self) -> Tuple[Dict[str, ast.AST], Set[str], Dict[str, ast.AST]]:
        """From the project modules the linted files import: functions whose every return is a rank test
        (`is_log_process()`: `return dist.get_rank() == 0`), decorators that call the function they wrap
        only under a rank test (`@check_main_thread`), and every function by name."""
        if self._imported_facts is None:
            funcs: Dict[str, ast.AST] = {}
            decorators: Set[str] = set()
            defs: Dict[str, ast.AST] = {}
            for tree in self.imported.values():
                for node in ast.walk(tree):
                    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        continue
                    defs.setdefault(node.name, node)
                    returns = [r for r in _own_nodes(node) if isinstance(r, ast.Return)]
                    if returns and all(r.value is not None and cond.is_rank_test(r.value, {}) for r in returns):
                        funcs.setdefault(node.name + "()", returns[0].value)
                    if _gating_decorator(node):
                        decorators.add(node.name)
            self._imported_facts = (funcs, decorators, defs)
        return self._imported_facts

    def decorated_gate(self, scope: Optional[Scope]) -> bool:
        """The code runs in a function (or a function around it) decorated by a gating decorator of an
        imported project module."""
        decorators = self.imported_facts()[1]
        while decorators and scope is not None and scope.kind != "module":
            if any(d.rsplit(".", 1)[-1] in decorators for d in scope.decorators if d):
                return True
            scope = scope.parent
        return False

    def imported_function(self, name: str) -> Optional[ast.AST]:
        """The `def` of `name` in an imported, unlinted project module."""
        return self.imported_facts()[2].get(name)

    def helper_write(self, name: str) -> Optional[Tuple[str, int, str, bool]]:
        """What the function `name` of an imported, unlinted project module writes with no rank test of its own:
        (what, line, file name, small), or None. One fact per function, computed once per run and kept; it follows
        the function's calls of other functions of those modules two levels down. `create_experiment_dir(root,
        cfg)` that dumps config.json, `make_writer(path)` that opens a SummaryWriter (fr75 inkitori/taudio, MoNE,
        rxtan2: the write lives in a helper module the linted script imports)."""
        memo = self.cache.setdefault("helper_write", {})
        if name not in memo:
            memo[name] = None  # a recursion guard while it is computed
            memo[name] = self._helper_write(name, 0)
        return memo[name]

    def _helper_write(self, name: str, depth: int) -> Optional[Tuple[str, int, str, bool]]:
        fn = self.imported_function(name)
        if fn is None:
            return None
        origin = self.cache.setdefault("helper_origin", {})
        if not origin:
            for path, tree in self.imported.items():
                aliases = {}
                for stmt in tree.body:
                    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                        aliases.update(dict(import_bindings(stmt)))
                for node in ast.walk(tree):
                    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        origin.setdefault(node.name, (os.path.basename(path), aliases))
        where, aliases = origin.get(name, ("", {}))
        nodes = list(_own_nodes(fn))
        if any(isinstance(n, (ast.If, ast.IfExp, ast.While, ast.Assert)) and cond.is_rank_test(n.test, {})
               for n in nodes):
            return None  # the helper tests the rank itself: its callers need not
        for node in sorted((n for n in nodes if isinstance(n, ast.Call)), key=lambda n: n.lineno):
            text = dotted(node.func) or ""
            root, _, rest = text.partition(".")
            qual = aliases.get(root, root) + ("." + rest if rest else "")
            last = text.rsplit(".", 1)[-1]
            hit = None
            if qual in ("torch.save", "numpy.save", "numpy.savez", "np.save") or qual.endswith(".SummaryWriter") or \
                    last == "SummaryWriter" or qual in ("wandb.init", "wandb.log"):
                hit = (qual if "SummaryWriter" not in qual else "SummaryWriter", False)
            elif last == "save_pretrained" and not any(k.arg == "is_main_process" for k in node.keywords):
                hit = (text + "()", False)
            elif qual == "json.dump" or (text == "open" and len(node.args) > 1 and isinstance(node.args[1], ast.Constant)
                                         and isinstance(node.args[1].value, str) and any(m in node.args[1].value
                                                                                        for m in "wx")):
                hit = ("json.dump" if qual == "json.dump" else "open(..., 'w')", True)
            if hit is not None:
                return hit[0], node.lineno, where, hit[1]
            if depth < 2 and isinstance(node.func, ast.Name) and node.func.id != name:
                inner = self._helper_write(node.func.id, depth + 1)
                if inner is not None:
                    return inner
        return None

    def rank0(self, index: ModuleIndex, call: Call, single: bool = True) -> bool:
        return call.ctx.rank0 or self.gate(index, call.ctx, single)[0]

    # ------------------------------------------------------------------ who calls what
    def _external_sites(self) -> Dict[Tuple[str, str], List[bool]]:
        """(dotted module as spelled by the importer, name) -> [call site gated?] over every file."""
        if self._external is None:
            out: Dict[Tuple[str, str], List[bool]] = {}
            for index in self.indexes.values():
                inner = self._local_gated(index)
                for call in index.calls:
                    q = call.qual
                    if not q or "." not in q.lstrip("."):
                        continue
                    module, name = q.rsplit(".", 1)
                    if module.split(".")[0] in _LIBRARIES:
                        continue
                    out.setdefault((module, name), []).append(self.gated(index, call) or id(call.scope) in inner)
            self._external = out
        return self._external

    def external_for(self, path: str) -> Dict[str, bool]:
        """name -> whether every call into `path`'s module-level `name` from the files of this run is gated."""
        stem = os.path.splitext(os.path.normpath(path))[0].split(os.sep)
        out: Dict[str, bool] = {}
        for (module, name), flags in self._external_sites().items():
            parts = [p for p in module.lstrip(".").split(".") if p]
            if not parts or stem[-len(parts):] != parts:
                continue
            out[name] = out.get(name, True) and all(flags)
        return out

    def _local_gated(self, index: ModuleIndex) -> Set[int]:
        """Functions of one file gated by their callers in that file (no other modules)."""
        key = -id(index)
        if key not in self._gated:
            self._gated[key] = _gated_scopes(index, lambda c: self.gated(index, c), None)
        return self._gated[key]

    def gated_functions(self, index: ModuleIndex, path: Optional[str] = None, also=None) -> Set[int]:
        """Functions (scope ids) that run only under a rank gate, seen from every caller: in this file,
        in the other files of the run, and never when nothing calls them. `also(call)`: a call site a
        rule counts as safe besides a gated one (a per-rank file name passed in)."""
        key = (id(index), also)
        if key not in self._gated:
            external = self.external_for(path or index.path) if len(self.indexes) > 1 else None
            gated = _gated_scopes(
                index, (lambda c: self.gated(index, c) or also(c)) if also else (lambda c: self.gated(index, c)),
                external)
            if len(self.indexes) > 1:
                # `nn_model.save(state)` in train.py, under `if is_master:`, where `save` is a method of a class
                # of this module: every `x.save(...)` of the run is gated, so the method runs gated
                for klass in index.module.classes.values():
                    for name, method in klass.functions.items():
                        if id(method) in gated or name.startswith("__"):
                            continue
                        sites = self._method_sites().get(name, [])
                        if sites and all(sites):
                            gated.add(id(method))
            self._gated[key] = gated
        return self._gated[key]

    def _method_sites(self) -> Dict[str, List[bool]]:
        """method name -> [gated?] for every `obj.name(...)` call of the run on an object that is not a
        library module (`nn_model.save(state)`, not `torch.save(...)`)."""
        got = self.cache.get("method_sites")
        if got is None:
            got = {}
            for index in self.indexes.values():
                for call in index.calls:
                    if not call.name or not call.recv or (call.qual or "").split(".")[0] in _LIBRARIES:
                        continue
                    if call.scope.kind == "function" and call.scope.name == call.name and call.recv.startswith("self."):
                        continue  # `def save(...): self.io.save(...)` (mace) hands the call on: its callers decide
                    got.setdefault(call.name, []).append(self.gated(index, call))
            self.cache["method_sites"] = got
        return got

    def distributed_anywhere(self, is_distributed) -> bool:
        """Some file of the run sets up or joins a process group (`is_distributed` judges one index)."""
        key = "distributed_anywhere"
        if key not in self.cache:
            self.cache[key] = any(is_distributed(ix) for ix in self.indexes.values())
        return bool(self.cache[key])

    def _all_sources(self) -> List[str]:
        if self._sources is None:
            # whole-line comments do not call anything (`# generate_videos(...)` left commented out, Show-o)
            self._sources = [_COMMENT_LINE.sub("", ix.source or "") for ix in self.indexes.values()]
        return self._sources

    def references(self, name: str) -> int:
        """How many times the identifier appears in the sources of the run (its definition included)."""
        got = self._idents.get(name)
        if got is None:
            if _WORD.fullmatch(name):
                # round 25: one count of every word of the sources, made once, answers every identifier: `\bname\b`
                # matches exactly the \w+ runs equal to it (its ends are word boundaries; a longer run holds no
                # boundary inside). lint34's LINT036 asked this for each wrap's function: 94 regex passes over a
                # 5,000-line file cost bench_lint 300 ms.
                if self._words is None:
                    from collections import Counter

                    self._words = Counter(w for src in self._all_sources() for w in _WORD.findall(src))
                got = self._words.get(name, 0)
            else:
                pattern = re.compile(r"\b%s\b" % re.escape(name))
                got = sum(len(pattern.findall(src)) for src in self._all_sources())
            self._idents[name] = got
        return got

    def method_called(self, name: str) -> bool:
        """Some file of the run calls a method of this name (`x.save(`), not counting library calls such as
        `torch.save(` that merely share it."""
        key = "." + name
        got = self._idents.get(key)
        if got is None:
            pattern = re.compile(r"(?<![\w])(?!torch\.|np\.|numpy\.|os\.|json\.|pickle\.)[A-Za-z_][\w.]*\.%s\(" % re.escape(name))
            got = sum(len(pattern.findall(src)) for src in self._all_sources())
            self._idents[key] = got
        return got > 0

    def constructed(self, class_name: str) -> bool:
        """Some file of the run calls the class (`Runner(cfg, model, ...)`), its `class Runner(...)` line aside:
        its __init__ runs wherever that call runs."""
        key = "(" + class_name
        got = self._idents.get(key)
        if got is None:
            pattern = re.compile(r"(?<!class )(?<![\w.])%s\(" % re.escape(class_name))
            got = sum(len(pattern.findall(src)) for src in self._all_sources())
            self._idents[key] = got
        return got > 0

    def dead(self, scope: Scope, index: Optional[ModuleIndex] = None) -> bool:
        """A function of a script (a file with a `__main__` guard) that nothing in the run calls or names
        (its name appears only in its `def`, whole-line comments aside) and no decorator registers
        (`@torch.no_grad()` registers nothing): it never runs. Entry points
        (`main`), dunders and tests are alive (a `main_*` alternative nothing calls is not: dot-tokens'
        main_non_fsdp); so is every function of a module without a `__main__`
        guard, which code outside the run may import."""
        if index is not None and not _has_guarded_call(index):
            return False
        s: Optional[Scope] = scope
        while s is not None and s.kind != "module":
            # methods may be called by a framework (`training_step`, hooks): plain functions count, and methods of
            # a class whose every base is the project's own (no library base can call them by name)
            if s.kind == "function" and s.parent is not None and \
                    (s.parent.kind in ("module", "function") or
                     s.parent.kind == "class" and index is not None and self._plain_class(index, s.parent)) and \
                    all(d.rsplit(".", 1)[-1] in _PLAIN_DECORATORS for d in s.decorators) and \
                    not s.name.startswith(("__", "test")) and s.name != "main" and \
                    self.references(s.name) <= 1:
                return True
            s = s.parent
        return False

    def _plain_class(self, index: ModuleIndex, klass: Scope, depth: int = 0) -> bool:
        """A class none of whose bases (followed through the project's classes) comes from a library, and with no
        metaclass or decorator: nothing outside the project calls its methods by name (a Lightning module's
        `training_step`, a Trainer's `compute_loss`, an nn.Module's `forward` are called by their library)."""
        if depth > 5 or klass.node.keywords or klass.node.decorator_list:
            return False
        for base in index.class_bases(klass):
            name = base.lstrip("?").rsplit(".", 1)[-1]
            if name == "object":
                continue
            found = self.find_class(name)
            if found is None or found[1] is klass or not self._plain_class(found[0], found[1], depth + 1):
                return False
        return True

    # ------------------------------------------------------------------ what the project does
    def trains(self) -> bool:
        """Some file of the run runs a backward pass or a Trainer/accelerate training call."""
        if self._trains is None:
            self._trains = any("backward" in ix.by_name for ix in self.indexes.values())
        return self._trains

    def find_class(self, name: str) -> Optional[Tuple[ModuleIndex, Scope]]:
        """A class defined at module level in some file of the run."""
        for index in self.indexes.values():
            klass = index.module.classes.get(name)
            if klass is not None:
                return index, klass
        return None

    def has_buffers(self) -> bool:
        """The project's models have buffers that DDP broadcasts in forward (BatchNorm running stats,
        `register_buffer`), as far as the files of the run show."""
        return any(index_buffer_marker(ix) for ix in self.indexes.values())


_BUFFER_MARKERS = ("SyncBatchNorm", "BatchNorm", "register_buffer", "running_mean", "InstanceNorm")


@module_fact
def _has_guarded_call(index: ModuleIndex) -> bool:
    """A call of the file runs under its `__main__` guard (ProjectFacts.dead, asked for every finding some rules
    make: the walk over every call was ~10% of a lint of bench_lint's findings file, which has no guard)."""
    return any(c.ctx.guarded for c in index.calls)


@module_fact
def index_buffer_marker(index: ModuleIndex) -> Optional[str]:
    """buffer_marker of a file of the run, walked once per index: LINT007 asks for every rank-0 forward it reports
    (has_buffers walked every file's whole tree each time: ~55% of a lint of bench_lint's findings file)."""
    src = index.source
    if src and src.isascii() and not any(m in src for m in _BUFFER_MARKERS):
        return None  # no marker anywhere in the text, so in no identifier (ASCII: no NFKC-normalised spelling)
    return buffer_marker(index.module.node)


def buffer_marker(tree: ast.AST) -> Optional[str]:
    """A name in code (not in a docstring or comment) that shows buffers: `nn.BatchNorm2d`, `register_buffer`.
    Breadth first as ast.walk (the first marker met is the one named), over names.expr_nodes' list."""
    for n in expr_nodes(tree):
        ident = n.id if isinstance(n, ast.Name) else n.attr if isinstance(n, ast.Attribute) else \
            n.name if isinstance(n, ast.alias) else None
        if ident:
            hit = next((m for m in _BUFFER_MARKERS if m in ident), None)
            if hit:
                return hit
    return None


def _argparse_options(index: ModuleIndex) -> Set[str]:
    """Destinations of `parser.add_argument("--experiment", ...)` (or `dest=`) in a file."""
    out: Set[str] = set()
    for c in index.by_name.get("add_argument", ()):
        dest = c.kw("dest")
        if isinstance(dest, ast.Constant) and isinstance(dest.value, str):
            out.add(dest.value)
            continue
        for a in c.node.args:
            if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("--"):
                out.add(a.value[2:].replace("-", "_"))
                break
    return out


_TEST_PARTS = re.compile(r"(^|[\\/])(tests?|testing|unittests?)([\\/]|$)")


def _own_nodes(fn: ast.AST):
    """The nodes of a function's body, not those of functions or classes nested in it."""
    stack = list(fn.body)
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))


def _gating_decorator(node: ast.AST) -> bool:
    """`def deco(func): def wrapper(*a, **k): if comms.is_main_process(): return func(*a, **k)`."""
    params = node.args.posonlyargs + node.args.args
    if not params:
        return False
    wrapped = params[0].arg
    for inner in node.body:
        if not isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for stmt in ast.walk(inner):
            if isinstance(stmt, ast.If) and cond.is_rank_test(stmt.test, {}) and any(
                    isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id == wrapped
                    for b in stmt.body for c in ast.walk(b)):
                return True
    return False


def _bind_held(init: Scope, call: ast.Call, flags: Dict[str, ast.AST],
               held_names: Optional[Dict[str, ast.AST]]) -> Dict[str, ast.AST]:
    """__init__ parameter -> the rank test the call passes for it (a flag, a test, or a name of the
    caller that already holds one, `held_names`)."""
    params = [p for p in init.params if p not in ("self", "cls")]
    out: Dict[str, ast.AST] = {}

    def test_of(arg):
        if held_names is not None:
            return held_names.get(arg.id) if isinstance(arg, ast.Name) else None
        return _held_test(arg, flags)
    for i, arg in enumerate(call.args):
        test = test_of(arg)
        if test is not None and i < len(params):
            out[params[i]] = test
    for kw in call.keywords:
        test = test_of(kw.value) if kw.arg else None
        if test is not None:
            out[kw.arg] = test
    return out


def _held_test(arg: ast.AST, flags: Dict[str, ast.AST]) -> Optional[ast.AST]:
    """The rank test an argument carries: a flag name holding one, or the test itself."""
    name = dotted(arg) if isinstance(arg, (ast.Name, ast.Attribute)) else None
    if name and name in flags:
        return flags[name]
    if isinstance(arg, (ast.Compare, ast.BoolOp, ast.UnaryOp)) and cond.is_rank_test(arg, flags):
        return arg
    return None


def role(path: str, index: ModuleIndex) -> str:
    """'test' for a test module (tests/, conftest.py, or test_*.py / *_test.py holding something pytest or unittest
    collects), else 'code'. pytest collects those file names but only `test*` functions and `Test*` classes in them
    (docs.pytest.org, "Conventions for Python test discovery"); a file of that name with none, and no pytest or
    unittest import, is a script: ExpansionNet's distributed_test.py spawns its ranks from `__main__` (fr48)."""
    base = os.path.basename(path)
    if _TEST_PARTS.search(os.path.dirname(os.path.normpath(path))) or base == "conftest.py":
        return "test"
    if (base.startswith("test_") or base.endswith("_test.py")) and _collects_tests(index) and \
            not _runs_a_job(index):
        return "test"
    return "code"


_JOB_CALLS = ("torch.distributed.init_process_group", "torch.multiprocessing.spawn", "torch.multiprocessing.start_processes",
              "deepspeed.init_distributed")


def _runs_a_job(index: ModuleIndex) -> bool:
    """A `*_test.py` that imports neither pytest nor unittest and starts a distributed job when run: a
    `__main__` block, or module-level code that joins a process group or spawns ranks (fr84: ddp_test.py scripts
    with a `def test(rank, ...)` worker or evaluation loop, launched by torchrun). pytest would import it and run
    the job; it is a script, not a test module."""
    for node in ast.walk(index.tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] in ("pytest", "unittest") for a in node.names):
            return False
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("pytest", "unittest"):
            return False
    if not any(c.qual in _JOB_CALLS or (c.qual or "").startswith("torch.distributed.") for c in index.calls):
        return False
    return any(c.ctx.guarded or (c.ctx.module_level and c.qual in _JOB_CALLS) for c in index.calls)


def _collects_tests(index: ModuleIndex) -> bool:
    """The module defines what pytest/unittest would collect (`def test*`, `class Test*`), or imports either."""
    for node in ast.walk(index.tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            return True
        if isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            return True
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] in ("pytest", "unittest") for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("pytest", "unittest"):
            return True
    return False


def _gated_scopes(index: ModuleIndex, is_gated, external: Optional[Dict[str, bool]]) -> Set[int]:
    """Functions whose every call site is gated (directly, through callers that are gated, or through
    callers in other modules), as analysis.gated_scopes, with the gate test given by the caller."""
    sites: Dict[int, list] = {}
    for call in index.calls:
        fn = index.callee(call)
        if fn is None:
            fn = method_through_object(index, call)  # `trainer.save_checkpoint(...)`, trainer = Trainer(...)
        if fn is not None:
            sites.setdefault(id(fn), []).append(call)
        # a function handed over to run elsewhere (`Thread(target=self._save_worker)`, `executor.submit(fn)`,
        # `accelerator.register_save_state_pre_hook(hook)`) runs where it was handed over: that call is a site
        for arg in list(call.node.args) + [k.value for k in call.node.keywords]:
            if isinstance(arg, (ast.Name, ast.Attribute)):
                cb = index.function_of(arg, call.scope)
                if cb is not None and cb is not fn:
                    sites.setdefault(id(cb), []).append(call)
    return propagate_gates(index, sites, is_gated, external)


def method_through_object(index: ModuleIndex, call: Call) -> Optional[Scope]:
    """The method of a class of this file that `obj.method(...)` calls, where `obj = Class(...)` in the
    calling scope or an enclosing one."""
    func = call.node.func
    if not isinstance(func, ast.Attribute) or not isinstance(func.value, ast.Name):
        return None
    name = func.value.id
    s: Optional[Scope] = call.scope
    while s is not None:
        value = s.values.get(name)
        if value is not None:
            if isinstance(value, ast.Call):
                klass = index.local_class(value.func, s)
                if klass is not None:
                    return klass.functions.get(func.attr)
            return None
        s = s.parent
    return None


def iter_calls(scopes: Iterable[Scope]):
    for s in scopes:
        yield from s.calls


def names_in(expr: Optional[ast.AST]) -> List[str]:
    return [dotted(n) or "" for n in ast.walk(expr)] if expr is not None else []
