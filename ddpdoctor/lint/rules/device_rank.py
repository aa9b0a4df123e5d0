"""torch.cuda.set_device(<global rank>) (round 8, a preview rule)."""
from __future__ import annotations

import ast
from typing import Optional

from . import rule
from ..analysis import Call, Scope
from ..names import const_str, dotted, expr_nodes
from ._common import INIT_PG
from ._reach import _world_of_one, one_node_world, project_one_node_world

SET_DEVICE = "torch.cuda.set_device"
# Global ranks: torch.distributed.get_rank() (rank in the default group, 0..WORLD_SIZE-1), the RANK variable torchrun
# and torch.distributed.launch export (torch/distributed/run.py: "RANK - The global rank", "LOCAL_RANK - The local
# rank"), the launchers' own (SLURM_PROCID, OMPI_COMM_WORLD_RANK, PMI_RANK) and Horovod's hvd.rank() (Horovod's
# docs pin the GPU with hvd.local_rank()).
_GLOBAL_CALLS = ("torch.distributed.get_rank", "horovod.torch.rank")
_GLOBAL_ENV = ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK")
_SOURCE = ("pytorch/pytorch torch/distributed/run.py (module docstring: 'LOCAL_RANK - The local rank', 'RANK - The "
           "global rank'; the launch examples call torch.cuda.set_device(local_rank)) and torch/cuda/__init__.py "
           "set_device (an ordinal of this node's visible devices), torch 2.13.0 cf30153c4c131c8164ee7798e5022d810682e2cb")


def _env_name(node: ast.AST) -> Optional[str]:
    """The variable an `os.environ["X"]`, `os.environ.get("X")`, `os.getenv("X")` read names."""
    if isinstance(node, ast.Subscript) and dotted(node.value) in ("os.environ", "environ"):
        return const_str(node.slice)
    if isinstance(node, ast.Call) and node.args:
        func = dotted(node.func) or ""
        if func in ("os.environ.get", "environ.get", "os.getenv", "getenv"):
            return const_str(node.args[0])
    return None


_TARGET: list = [None]  # the Target being linted, for `_global` to look up a project module's helper


def _global(node: ast.AST, scope: Scope, index, depth: int = 0) -> Optional[str]:
    """What makes `node` a global rank (`dist.get_rank()`, `RANK`), following a name back to its assignment;
    None when it is not one or anything in it takes a remainder (`rank % torch.cuda.device_count()`)."""
    if any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod) and const_str(n.left) is None
           for n in expr_nodes(node)):
        return None  # a remainder; `"cuda:%d" % rank` formats a string, it takes none
    if isinstance(node, ast.Call) and dotted(node.func) == "int" and len(node.args) == 1:
        node = node.args[0]
    computed = _node_times_local(node)
    if computed is not None:
        return computed
    if isinstance(node, ast.Call):
        qual = _qual(node, index)
        if qual in _GLOBAL_CALLS and not node.args and not node.keywords:
            return f"{dotted(node.func)}()"
        caller_index = index
        fn = index.function_of(node.func, scope) if depth <= 3 else None
        if fn is None and depth <= 3 and _TARGET[0] is not None and qual and "." in qual:
            # `dist_utils.get_rank()` of the project (fr85 Godofnothing/FastOBQPlus): the helper in its own module
            module, fname = qual.rsplit(".", 1)
            found = _TARGET[0].sibling(module)
            if found is not None and fname in found[1].module.functions:
                index, fn = found[1], found[1].module.functions[fname]
        if fn is not None and node.args and depth <= 2:
            # `get_device(world_size, rank)` that returns `torch.device(rank % world_size)` (fr102 gyfastas/
            # gemnet_pytorch dist_utils.py): the device index is a parameter; what this call passes for it
            got = _helper_device_arg(fn, node, scope, caller_index, depth)
            if got is not None:
                return f"{dotted(node.func)}(), which makes a device of {got}"
        if fn is not None and not node.args:
            # the project's `get_rank()`: `return 0` without a group, else `return dist.get_rank()` (fr83 shiwk20)
            values = [r.value for r in ast.walk(fn.node) if isinstance(r, ast.Return) and r.value is not None]
            ranked = [v for v in values if not isinstance(v, ast.Constant)]
            found = [_global(v, fn, index, depth + 1) for v in ranked]
            if found and all(found):
                return f"{dotted(node.func)}(), which returns {found[0]}"
        index = caller_index  # a sibling module's index served the helper only
    env = _env_name(node)
    if env is not None:
        return f"the {env} environment variable" if env in _GLOBAL_ENV else None
    if isinstance(node, ast.Attribute) and node.attr == "process_index" and _accelerate_state(node.value, index):
        # accelerate's PartialState/Accelerator.process_index: "The index of the current process" over all nodes;
        # local_process_index is "the index of the current process on the current server" (fr146
        # aslyansky-m/SSM_reasoning `device_map={"": accelerator.process_index}`, the reader's likely)
        return f"{dotted(node)}"
    if isinstance(node, (ast.List, ast.Tuple)) and len(node.elts) == 1 and depth > 0:
        # `device_ids = [dist.get_rank()]`, later `args.device_ids = device_ids` and `DDP(model,
        # device_ids=args.device_ids)` (fr89 taishan1994/pytorch-distributed-NLP): the list a name holds
        return _global(node.elts[0], scope, index, depth)
    inner = _device_index(node)
    if inner is not None and depth <= 2:  # torch.device(f"cuda:{rank}"), torch.device("cuda", rank), f"cuda:{rank}"
        # the device's index is read from the same expression: no name followed, so no step of the depth spent
        # (fr142 astroendhra/SiDisTrO: `device = torch.device(f"cuda:{rank}")`, `rank` a parameter every call
        # passes `int(os.environ.get("RANK", "0"))`: the hops device -> rank -> the caller's rank were one too many)
        return _global(inner, scope, index, depth)
    name = dotted(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
    if not name or depth > 2:
        return None
    line = getattr(node, "lineno", 0)
    s: Optional[Scope] = scope
    while s is not None:
        values = [a for a in _assigns_by_name(index, s).get(name, ()) if s is not scope or a.node.lineno < line]
        if values:
            last = max(values, key=lambda a: a.node.lineno)
            if last.targets != [name]:  # `rank, world = ...` unpacking: the matching element of a literal tuple
                element = _unpacked(last, name)
                return _global(element, s, index, depth + 1) if element is not None else None
            if _fixed_arm(last.value) and len(values) > 1:
                # `if distributed: config.rank = dist.get_rank()` / `else: config.rank = 0` (fr72 Sohaib9920): the
                # literal is the single-process arm; the distributed arm's value is the rank the device gets there
                # Every non-literal arm must be a global rank: `if "LOCAL_RANK" in os.environ: rank = LOCAL_RANK`
                # `elif "RANK" in os.environ: rank = RANK` `else: rank = 0` (fr70 IonMich/pytorch-1h) is the local
                # rank under torchrun, not a global rank
                arms = [other for other in sorted(values, key=lambda a: -a.node.lineno)[1:]
                        if len(other.targets) == 1 and other.value is not None and
                        not _fixed_arm(other.value)]
                found = [_global(other.value, s, index, depth + 1) for other in arms]
                if found and all(found):
                    return found[0]
            return _global(last.value, s, index, depth + 1)
        if name in s.params or (s.kind == "function" and name in s.locals):
            # `def setup(rank, world_size): torch.cuda.set_device(rank)`: the parameter (or a local bound by a loop
            # or a with) is this function's own name; a module-level `rank = int(os.environ["RANK"])` in the
            # __main__ block is another variable (fr65 EventLevelPDFExtraction: the spawn index is passed in).
            # Unless this file calls the function directly and every call passes a global rank for it
            # (fr77 yuli821/cs533_final_project: `rank = int(os.environ["SLURM_PROCID"])`, then `setup(rank, ws)`).
            if name in s.params and depth <= 2:
                return _passed_global(s, name, index, depth)
            return None
        s = s.parent
    if name.startswith("self.") and name.count(".") == 1 and scope.cls is not None:
        # `self.rank = torch.distributed.get_rank()` in __init__, `DDP(m, device_ids=[self.rank])` in another method
        # (fr102 lechicuong2k3/Clean-label-Physical-Backdoor-Attack): every non-literal value the class gives it
        arms = [a for m in scope.cls.functions.values() for a in m.assigns
                if a.targets == [name] and a.value is not None and not _literal(a.value)]
        found = [_global(a.value, a.scope, index, depth + 1) for a in arms]
        if found and all(found):
            return found[0]
    return None


_ACCELERATE_STATES = ("accelerate.Accelerator", "accelerate.PartialState", "accelerate.state.PartialState",
                      "accelerate.state.AcceleratorState", "accelerate.AcceleratorState")
_ACCELERATE_SOURCE = ("huggingface/accelerate src/accelerate/state.py (PartialState.process_index: 'The index of the "
                      "current process'; local_process_index: 'The index of the current process on the current "
                      "server'); transformers from_pretrained device_map={'': i} loads the whole model on device i")


def _accelerate_state(node: ast.AST, index) -> bool:
    """`accelerator` / `self.accelerator` bound to Accelerator(...), or `Accelerator()` / `PartialState()` itself."""
    if isinstance(node, ast.Call):
        return (_qual(node, index) or "") in _ACCELERATE_STATES
    name = dotted(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
    if not name:
        return False
    return any(a.call is not None and (a.call.qual or "") in _ACCELERATE_STATES and name in a.targets
               for a in index.assigns)


def _assigns_by_name(index, scope: Scope) -> dict:
    """name -> the assignments of `scope` that bind it (with a value), in order; built once per scope and index
    (`_global` looked each name up by a scan of the scope's assignments: ~10% of bench_lint's quiet file)."""
    cache = index._reach_cache.setdefault("device_rank.assigns", {})
    got = cache.get(id(scope))
    if got is None:
        got = {}
        for a in scope.assigns:
            if a.value is None:
                continue
            for n in a.targets:
                if isinstance(n, str):
                    got.setdefault(n, []).append(a)
        cache[id(scope)] = got
    return got


_LOCAL_ENV = ("LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID")


def _node_times_local(node: ast.AST) -> Optional[str]:
    """`node_rank * gpus_per_node + int(os.environ["LOCAL_RANK"])`, `args.nr * args.gpus + gpu`: the global rank
    computed from a node index and a local one (fr96 swax10/Pytorch-DDP Multi_node_traning.py, the rank handed to
    train() and used as cuda:{rank}). Only this shape: an addition of a product that names a node and a local
    index (the LOCAL_RANK variable or a name saying local/gpu), so `rank * 2 + 1` (a model-parallel device) is no
    rank. Since round 16 also one arm of a conditional whose other arm is a literal (fr101 THHan95/HOR:
    `rank = arg.n_gpus * arg.node_rank + gpu_id if arg.distributed else 0`). A product with the literal 0 as a
    factor is 0, no node term: `rank = 0 * ngpus_per_node + gpu` is the local index (fr140 KJKR73/gpt-2-rag)."""
    if isinstance(node, ast.IfExp):
        arms = [a for a in (node.body, node.orelse) if not _literal(a)]
        return _node_times_local(arms[0]) if len(arms) == 1 else None
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add)):
        return None
    for prod, local in ((node.left, node.right), (node.right, node.left)):
        if not (isinstance(prod, ast.BinOp) and isinstance(prod.op, ast.Mult)):
            continue
        if any(isinstance(f, ast.Constant) and f.value == 0 for f in (prod.left, prod.right)):
            continue  # one node written out: the product is 0 and the "rank" is the local index
        factors = [dotted(f) or "" for f in (prod.left, prod.right)]
        if not any("node" in f.lower().rsplit(".", 1)[-1] or f.rsplit(".", 1)[-1] in ("nr", "node_id") for f in factors):
            continue
        inner = local.args[0] if isinstance(local, ast.Call) and dotted(local.func) == "int" and \
            len(local.args) == 1 else local
        env = _env_name(inner)
        last = (dotted(inner) or "").rsplit(".", 1)[-1].lower() if isinstance(inner, (ast.Name, ast.Attribute)) else ""
        if env in _LOCAL_ENV or (env is None and last and ("local" in last or "gpu" in last)):
            return "a node index times the GPUs per node plus the local rank"
    return None


def _helper_device_arg(fn: Scope, call: ast.Call, scope: Scope, index, depth: int) -> Optional[str]:
    """A helper called with arguments whose only return is a CUDA device built from one of its parameters, through at
    most three local assignments and a remainder by the world size (`gpu = rank % world_size; return
    torch.device(gpu)`: the remainder by the world size leaves a global rank unchanged): the global rank the call
    passes for that parameter, or None."""
    returns = [r.value for r in ast.walk(fn.node) if isinstance(r, ast.Return) and r.value is not None]
    if len(returns) != 1:
        return None
    node = returns[0]
    for _ in range(4):
        inner = _device_index(node)
        if inner is not None:
            node = inner
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and \
                (dotted(node.right) or "").rsplit(".", 1)[-1] in ("world_size", "num_replicas"):
            node = node.left
        if not isinstance(node, ast.Name):
            return None
        if node.id in fn.params:
            params = list(fn.params)
            offset = 1 if params and params[0] in ("self", "cls") else 0
            pos = params.index(node.id) - offset
            arg = next((k.value for k in call.keywords if k.arg == node.id), None)
            if arg is None and 0 <= pos < len(call.args):
                arg = call.args[pos]
            return _global(arg, scope, index, depth + 1) if arg is not None else None
        values = [a.value for a in fn.assigns if a.targets == [node.id] and a.value is not None]
        if len(values) != 1:
            return None
        node = values[0]
    return None


def _fixed_arm(node: ast.AST) -> bool:
    """An arm that names no rank: a literal, or a device that is no GPU (`torch.device("cpu")`, `torch.device("mps")`:
    the `else:` arms of `if torch.cuda.is_available(): device = torch.device(f"cuda:{rank}")`, fr142
    astroendhra/SiDisTrO), so the GPU arm is the one a distributed run takes."""
    if _literal(node):
        return True
    return isinstance(node, ast.Call) and (dotted(node.func) or "").rsplit(".", 1)[-1] == "device" and \
        len(node.args) == 1 and not node.keywords and isinstance(node.args[0], ast.Constant) and \
        isinstance(node.args[0].value, str) and not node.args[0].value.startswith("cuda")


def _literal(node: ast.AST) -> bool:
    """A number or string written out, also negative: `rank = -1` is `UnaryOp(USub, Constant(1))` in the tree
    (fr90 MeshchaninovViacheslav/DiffusionTextGeneration-cond-ca: `else: rank = -1`, the arm without a launcher)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return isinstance(node, ast.Constant)


def _passed_global(fn: Scope, name: str, index, depth: int) -> Optional[str]:
    """What every direct call of `fn` in this file passes for its parameter `name`, when each is a global rank; None
    when there is no direct call (a spawn target gets its index from the launcher) or one passes something else."""
    params = list(fn.params)
    found = None
    for site in _direct_calls(index).get(id(fn), ()):
        # `obj.method(a)` and `Trainer(a)` (the class called by name runs __init__: fr98 jennan/ddp_example, whose
        # arguments were read one place off) both bind `self` before the first argument
        offset = 1 if params and params[0] in ("self", "cls") and (
            isinstance(site.node.func, ast.Attribute) or fn.name == "__init__") else 0
        pos = params.index(name) - offset
        arg = site.kw(name)
        if arg is None and 0 <= pos < len(site.node.args):
            arg = site.node.args[pos]
        got = _global(arg, site.scope, index, depth + 1) if arg is not None else None
        if got is None:
            return None
        found = found or f"{got}, passed to {fn.name}() on line {site.line}"
    if found is None and depth <= 2 and not _THROUGH[0]:
        _THROUGH[0] = True
        try:
            found = _passed_through_parameter(fn, params.index(name), index)
        finally:
            _THROUGH[0] = False
    return found


def _direct_calls(index) -> dict:
    """id(function scope) -> the calls of this file that call it directly, resolved once per index (a 5,000-line
    script has thousands of calls, and `_passed_global` asks for one function's callers for every parameter it
    follows: resolving every call each time cost ~0.15-0.25 s per lint of round 14's bench_lint file)."""
    got = index._reach_cache.get("device_rank.direct_calls")   # the index's own cache: release() clears it
    if got is None:
        got = {}
        for site in index.calls:
            fn = index.function_of(site.node.func, site.scope)
            if fn is not None:
                got.setdefault(id(fn), []).append(site)
        index._reach_cache["device_rank.direct_calls"] = got
    return got


def _handed(index) -> dict:
    """id(function scope) -> {call: the positions it is handed at as a bare name}, in the order of index.calls,
    resolved once per index (perf17: resolving every call's arguments for every function _passed_through_parameter
    followed was ~30% of a lint of bench_lint's findings file)."""
    got = index._reach_cache.get("device_rank.handed")   # the index's own cache: release() clears it
    if got is None:
        got = {}
        for site in index.calls:
            for i, a in enumerate(site.node.args):
                fn = index.function_of(a, site.scope) if isinstance(a, ast.Name) else None
                if fn is not None:
                    got.setdefault(id(fn), {}).setdefault(site, []).append(i)
        index._reach_cache["device_rank.handed"] = got
    return got


_THROUGH = [False]  # one level of `fn(rank, ...)` indirection at a time (no cycles through handed functions)


def _passed_through_parameter(fn: Scope, pos: int, index) -> Optional[str]:
    """`init_processes(test, args)` where `def init_processes(fn, args): rank = int(os.environ["RANK"]); ...;
    fn(rank, world_size, args)` (fr84 GaozhengPei/FreqPure, lint14b): `fn` is handed to a function of this file
    under one of its parameters, and every call of that parameter there passes a global rank at `pos`. None when
    `fn` is handed anywhere else (a spawn: the launcher gives the index) or one call passes something else."""
    if fn.params and fn.params[0] in ("self", "cls"):
        return None
    found = None
    for site, handed in _handed(index).get(id(fn), {}).items():
        outer = index.function_of(site.node.func, site.scope)
        if outer is None or len(handed) != 1 or handed[0] >= len(outer.params) or outer.params[0] in ("self", "cls"):
            return None
        param = outer.params[handed[0]]
        calls = [c for c in index.calls if c.scope is outer and isinstance(c.node.func, ast.Name) and
                 c.node.func.id == param]
        if not calls:
            return None
        for c in calls:
            arg = c.node.args[pos] if pos < len(c.node.args) else None
            got = _global(arg, c.scope, index, 2) if arg is not None else None
            if got is None:
                return None
            found = found or f"{got}, passed to {param}() = {fn.name}() on line {c.line}"
    return found


def _device_index(node: ast.AST) -> Optional[ast.AST]:
    """The index in a CUDA device expression: `torch.device(f"cuda:{rank}")`, `torch.device("cuda", rank)`,
    `f"cuda:{rank}"` (fr68 owais4321/cse651-final-2026: `device = torch.device(f"cuda:{rank}")`)."""
    if isinstance(node, ast.Call) and (dotted(node.func) or "").endswith("device") and node.args:
        if len(node.args) == 2 and const_str(node.args[0]) == "cuda":
            return node.args[1]
        node = node.args[0]
        if isinstance(node, ast.IfExp):  # `torch.device(rank if torch.cuda.is_available() else "cpu")`
            arms = [x for x in (node.body, node.orelse) if const_str(x) is None]
            if len(arms) == 1:
                node = arms[0]
        if isinstance(node, (ast.Name, ast.Attribute)):
            # `torch.device(config.rank)`: an integer is a CUDA device index (fr72 Sohaib9920/misconcept); a name
            # holding a device string is followed to its value and is no rank
            return node
    if isinstance(node, ast.IfExp):
        # `f"cuda:{rank}" if torch.cuda.is_available() else "cpu"`: the one arm that is not a literal (round 24)
        arms = [x for x in (node.body, node.orelse) if const_str(x) is None]
        return _device_index(arms[0]) if len(arms) == 1 else None
    if isinstance(node, ast.JoinedStr) and len(node.values) == 2 and const_str(node.values[0]) == "cuda:" and \
            isinstance(node.values[1], ast.FormattedValue):
        return node.values[1].value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format" and \
            const_str(node.func.value) in ("cuda:{}", "cuda:{0}") and len(node.args) == 1 and not node.keywords:
        return node.args[0]  # `torch.device('cuda:{}'.format(rank))` (fr84 GaozhengPei/FreqPure, lint14b)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and const_str(node.left) == "cuda:":
        # `"cuda:" + str(rank)` (round 24: round 23's held-out set C, a device string built from the global rank)
        index = node.right
        if isinstance(index, ast.Call) and (dotted(index.func) or "") == "str" and len(index.args) == 1:
            index = index.args[0]
        return index if isinstance(index, (ast.Name, ast.Attribute, ast.Call)) else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and const_str(node.left) in (
            "cuda:%d", "cuda:%s", "cuda:%i") and not isinstance(node.right, (ast.Tuple, ast.Dict)):
        return node.right  # `"cuda:%d" % rank`
    return None


def _unpacked(assign, name: str) -> Optional[ast.AST]:
    """`rank, ws = dist.get_rank(), dist.get_world_size()`: the element of the literal tuple that `name` takes."""
    node = assign.node
    if not isinstance(node, ast.Assign) or len(node.targets) != 1 or not isinstance(node.targets[0], ast.Tuple) or \
            not isinstance(node.value, ast.Tuple) or len(node.targets[0].elts) != len(node.value.elts):
        return None
    for target, value in zip(node.targets[0].elts, node.value.elts):
        if isinstance(target, ast.Name) and target.id == name:
            return value
    return None


def _qual(node: ast.Call, index) -> Optional[str]:
    for c in index.calls:
        if c.node is node:
            return c.qual
    return None


def _placement(call: Call) -> Optional[ast.AST]:
    """The device a call places the model or the data on: `DistributedDataParallel(m, device_ids=[x])` (or
    `output_device=x`), `FullyShardedDataParallel(m, device_id=x)` (round 18), `m.to(x)`, `m.cuda(x)`."""
    qual = call.qual or ""
    if qual.endswith("DistributedDataParallel"):
        ids = call.kw("device_ids")
        if isinstance(ids, (ast.List, ast.Tuple)) and len(ids.elts) == 1:
            return ids.elts[0]
        if isinstance(ids, (ast.Name, ast.Attribute)):
            return ids  # a name holding the list: `_global` follows it to `[rank]`
        return call.kw("output_device")
    if qual.endswith("FullyShardedDataParallel"):
        # `FSDP(model, device_id=dist.get_rank())`: FSDP moves the module to that device (torch/distributed/fsdp/
        # fully_sharded_data_parallel.py, device_id: "the CUDA device on which FSDP initialization takes place")
        return call.kw("device_id")
    if call.name in ("to", "cuda") and isinstance(call.node.func, ast.Attribute) and call.node.args and \
            not call.node.keywords:
        return call.node.args[0]
    if call.name == "from_pretrained":
        # `from_pretrained(..., device_map={"": i})`: the whole model on device i (transformers modeling_utils)
        dm = call.kw("device_map")
        if isinstance(dm, ast.Dict) and len(dm.keys) == 1 and const_str(dm.keys[0]) == "":
            return dm.values[0]
    return None


# The world this file joins cannot span two nodes (_reach.one_node_world): the finding is latent, a note that says so.
_ONE_NODE = " (only if the script is changed to run on several nodes: {}, so the world is one node and its global rank is the local one)"


def _placed_on_global_rank(t, index):
    """A script that never calls set_device but places the model on the global rank (`device = dist.get_rank()`,
    `model.to(device)`, `DDP(model, device_ids=[rank])` with `rank = int(os.environ["RANK"])`): the same
    wrong ordinal on a second node. One finding per function, at the first placement."""
    if not any((c.qual or "").startswith("torch.distributed.") or (c.qual or "").endswith("DistributedDataParallel")
               or (c.qual or "") in _ACCELERATE_STATES for c in index.calls):
        return  # a DDP wrap counts: the process group may be joined through the project's helpers (fr101 GFSS_Codebase)
    seen = set()
    for call in index.calls:
        if id(call.scope) in seen:
            continue
        arg = _placement(call)
        if arg is None or isinstance(arg, ast.Constant):
            continue
        why = _global(arg, call.scope, index)
        if why is None or t.facts.dead(call.scope, index):
            continue
        seen.add(id(call.scope))
        one = one_node_world(index) or (None if index.by_qual.get(INIT_PG, ()) else
                                         project_one_node_world(t.facts.indexes.values()))
        yield t.finding(
            "info" if one else "warning", call.node,
            f"{call.text or '.' + call.name}() places the model or the data on the GPU numbered by the global rank ({why}): on a "
            "second node that GPU does not exist" + _ONE_NODE.format(one) * bool(one),
            detail=("A CUDA device index counts this node's GPUs; the global rank counts the processes of all nodes. "
                    "On one node they agree; on the second node rank 8 of an 8-GPU machine asks for cuda:8 "
                    "('invalid device ordinal')."),
            fix=("local_rank = int(os.environ[\"LOCAL_RANK\"])   # torchrun sets it on every node\n"
                 "torch.cuda.set_device(local_rank)\nmodel.to(local_rank); DDP(model, device_ids=[local_rank])"),
            evidence={"global_rank": why, "placement": call.text,
                      "source": _ACCELERATE_SOURCE if "process_index" in why else _SOURCE},
        )


@rule("LINT018", "set-device-global-rank")
def set_device_global_rank(t):
    """torch.cuda.set_device() given the global rank instead of the local one.

    What it checks
        `torch.cuda.set_device(x)` where `x` is the global rank: `dist.get_rank()`, `int(os.environ["RANK"])`,
        `SLURM_PROCID`/`OMPI_COMM_WORLD_RANK`/`PMI_RANK`, Horovod's `hvd.rank()`, accelerate's
        `accelerator.process_index` (round 25, also as `from_pretrained(device_map={"": ...})`), a rank computed as
        `node_rank * gpus_per_node + LOCAL_RANK` (round 15 wave 3; since round 16 also as one arm of a conditional
        whose other arm is a literal, `... if args.distributed else 0`), or a name assigned one of
        those (also `local_rank = dist.get_rank()`). Quiet when the value is taken modulo something
        (`rank % torch.cuda.device_count()`), when it is the local rank (LOCAL_RANK, a spawn index), and when
        it is unpacked from a tuple, or the module forces WORLD_SIZE to 1. A parameter (`def setup(rank, ws):
        torch.cuda.set_device(rank)`) counts when every direct call in the file passes a global rank for it
        (`rank = int(os.environ["SLURM_PROCID"])`, then `setup(rank, ws)`); a spawn target's parameter, with no
        direct call, does not; a name assigned in several arms counts only when every non-literal arm is a global
        rank (`LOCAL_RANK` first, then `RANK`, is the local rank under torchrun; `-1` is a literal arm too). When no
        set_device gets a global
        rank, a placement on one is the same fault (round 14): `DistributedDataParallel(m, device_ids=[rank])` (also
        through a name holding that list, `args.device_ids = [dist.get_rank()]`, round 15) / `output_device=rank`, `m.to(rank)`, `m.cuda(rank)`, also through `torch.device(f"cuda:{rank}")` (or
        `'cuda:{}'.format(rank)`; a parameter also when the function is handed to a runner of this file that calls it
        with a global rank, `fn(rank, ...)`) and a
        project helper whose every non-literal return is a global rank (`def get_rank(): return
        dist.get_rank()`); one finding per function. A note, not a warning, when every init_process_group of the
        file joins a world that cannot span two nodes (a loopback `init_method="tcp://127.0.0.1:..."`, or
        `world_size=torch.cuda.device_count()`: round 15 wave 2; since round 19 also env:// with MASTER_ADDR set to
        the loopback by the same module, and a file with no init of its own in a run whose every init joins such a
        world, as a project set-up helper does): there the global rank is the local one. A preview rule (round 8): a
        note by default, a warning with `--preview`.

    Why it matters
        `set_device` takes an ordinal of this node's visible GPUs (torch/cuda/__init__.py). The global rank runs
        from 0 to WORLD_SIZE-1 across all nodes; torchrun exports LOCAL_RANK for the GPU of this node and RANK
        for the global rank (torch/distributed/run.py). On one node they agree, so the script works; on a
        second node rank 8 asks for GPU 8 of an 8-GPU machine: 'invalid device ordinal', or two ranks on one GPU.

    Example
        dist.init_process_group("nccl")
        torch.cuda.set_device(dist.get_rank())

    Fix
        `local_rank = int(os.environ["LOCAL_RANK"])`; `torch.cuda.set_device(local_rank)` (or
        `dist.get_rank() % torch.cuda.device_count()` when every node runs one process per GPU).
    """
    index = t.index
    if _world_of_one(index):
        return  # WORLD_SIZE forced to "1": one process, rank 0 (fr48 ACynj main.py)
    _TARGET[0] = t
    try:
        yield from _set_device_findings(t, index)
    finally:
        _TARGET[0] = None


def _set_device_findings(t, index):
    reported = False
    for call in index.by_qual.get(SET_DEVICE, ()):
        arg = call.arg(0, "device")
        if arg is None or t.facts.dead(call.scope, index):
            continue
        why = _global(arg, call.scope, index)
        if why is None:
            continue
        reported = True
        one = one_node_world(index) or (None if index.by_qual.get(INIT_PG, ()) else
                                         project_one_node_world(t.facts.indexes.values()))
        yield t.finding(
            "info" if one else "warning", call.node,
            f"torch.cuda.set_device() gets the global rank ({why}): on a second node it names a GPU that node "
            "does not have" + _ONE_NODE.format(one) * bool(one),
            detail=("set_device takes an ordinal of this node's GPUs; the global rank counts the processes of all "
                    "nodes. The script works on one node and fails (invalid device ordinal) or doubles ranks up on "
                    "one GPU as soon as the job spans two."),
            fix=("local_rank = int(os.environ[\"LOCAL_RANK\"])   # torchrun sets it on every node\n"
                 "torch.cuda.set_device(local_rank)"),
            evidence={"global_rank": why, "source": _SOURCE},
        )
    if not reported:  # set_device(<global rank>) is the finding; the placements that follow it are the same fault
        yield from _placed_on_global_rank(t, index)
