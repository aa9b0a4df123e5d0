"""What an `if` test says about who runs its body: the `__main__` guard, and rank-0 gates.

Pure functions over `ast` expressions. Two questions matter to the rules:
- does the body run only on rank 0 (`if rank == 0`, `if accelerator.is_main_process`)? A DDP forward
  there hangs the other ranks (F8);
- does the test mention the rank at all (`if rank % 8 == 0`, `if not dist.is_initialized() or ...`)?
  Then a write under it is deliberately gated (F12), even if we cannot prove it is rank 0.
"""
from __future__ import annotations

import ast
from typing import Dict, Iterable, Optional, Set

from .names import dotted, expr_nodes, flag_name, last_name

_MAIN_WORDS = {
    "is_main_process", "is_local_main_process", "is_world_process_zero", "is_local_process_zero", "is_master",
    "is_main", "is_rank_zero", "is_rank0", "master_process", "is_master_process", "main_process",
    "is_global_zero", "should_save", "should_log", "rank_zero", "is_chief", "local_main", "is_main_rank",
    "is_master_rank", "is_first_rank", "is_primary", "main_proc", "master_proc", "is_root", "is_root_worker",
    "is_root_process", "is_leader", "is_main_worker", "is_master_worker", "is_coordinator", "primary", "master",
}
_RANK_CALLS = {"get_rank", "get_local_rank", "get_global_rank", "get_ordinal", "get_node_rank", "get_process_index"}
# Identifiers that contain "rank" but are not a process rank (LoRA rank, matrix rank, ranking losses).
_NOT_RANKS = ("lora", "ranking", "low_rank", "matrix_rank", "tensor_rank", "rank_dim", "max_rank", "ranker")
_RANK_ATTRS = {"process_index", "local_process_index", "ordinal", "global_ordinal", "local_ordinal"}
# Names that hold the rank in scripts that call it the GPU: PyTorch's DDP tutorial (`self.gpu_id == 0`),
# the ImageNet example (`args.gpu == 0`), DGL-style spawn workers (`proc_id == 0`). Only compared with 0
# do they count as a rank test: `if args.gpu is not None` or `if gpu:` say nothing about the rank.
# fr69 HPNN: `GpuLogger(dist_id=dist_rank, local_id=local_rank)`, then `if log.dist_id == 0:` in another module.
_GPU_RANKS = {"gpu", "gpu_id", "gpu_idx", "gpu_index", "device_id", "device_idx", "local_gpu", "gpu_rank", "proc_id",
              "local_device_id", "cuda_id", "dev_id", "dist_id", "dist_idx", "proc_idx", "process_idx"}
# A flag that holds a rank test (`master_process = ddp_rank == 0`, `self.is_master = args.rank == 0`),
# keyed by its dotted name; ModuleIndex fills it while walking the file, in order.
Flags = Optional[Dict[str, ast.AST]]


# Words that are the main-process test as the Trainer's argument (`args.should_save`, `self.args.should_log`: True on
# the process that saves or logs, transformers/training_args.py), but as a bare local name are usually a schedule
# (`should_save = step % save_interval == 0`, fr66 nested_learning): a bare name counts only when the file assigns it
# a rank test (a flag).
_ATTRIBUTE_ONLY_WORDS = {"should_save", "should_log"}


def _main_word_node(node: ast.AST) -> bool:
    name = last_name(node)
    if name is None or not is_main_word(name):
        return False
    return not (isinstance(node, ast.Name) and name.lower() in _ATTRIBUTE_ONLY_WORDS)


def is_main_word(name: str) -> bool:
    low = name.lower().lstrip("_")  # `self._primary`, `self._is_master`
    if low in _MAIN_WORDS:
        return True
    return low.startswith("is_") and any(w in low for w in ("main", "master", "zero", "rank0", "chief", "root_worker",
                                                            "root_rank", "root_proc"))


def _rank_env(name: str) -> bool:
    """An environment variable holding a process's rank: RANK, LOCAL_RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, and
    SLURM's SLURM_PROCID / SLURM_LOCALID."""
    up = name.upper()
    return "RANK" in up or up.endswith(("_PROCID", "_LOCALID"))


def is_rankish(expr: ast.AST) -> bool:
    """`rank`, `args.local_rank`, `dist.get_rank()`, `int(os.environ["RANK"])`, `accelerator.process_index`."""
    if isinstance(expr, ast.Call):
        name = last_name(expr)
        if name in ("int", "str") and expr.args:
            return is_rankish(expr.args[0])
        if name in _RANK_CALLS:
            return True
        low = (name or "").lower()
        if low.startswith("get_") and low.endswith("rank") and not any(w in low for w in _NOT_RANKS):
            return True  # get_data_parallel_rank(), get_tensor_model_parallel_rank(), get_global_rank()
        if name in ("get", "getenv") and expr.args and isinstance(expr.args[0], ast.Constant):
            return isinstance(expr.args[0].value, str) and _rank_env(expr.args[0].value)
        return False
    if isinstance(expr, ast.Subscript):
        key = expr.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str) and _rank_env(key.value):
            return True
        return False
    name = last_name(expr)
    if name is None:
        return False
    low = name.lower()
    if "rank" not in low and low not in _RANK_ATTRS:
        return False   # the test below is then false whatever the exclusions say (most names: no scan of them)
    return not any(w in low for w in _NOT_RANKS)


def _rank_operand(expr: ast.AST) -> bool:
    """A rank, or a GPU index that stands for it, on one side of a comparison."""
    if is_rankish(expr):
        return True
    if isinstance(expr, (ast.Name, ast.Attribute)):
        name = last_name(expr)
        return name is not None and name.lower() in _GPU_RANKS
    return False


def _flag(test: ast.AST, flags: Flags) -> Optional[ast.AST]:
    """The rank test a name holds (`master_process`), or a call of a function that returns one
    (`self.is_root_worker()`, keyed `name()`)."""
    if not flags:
        return None
    if isinstance(test, ast.Call) and dotted(test.func) == "getattr" and len(test.args) >= 2 and \
            isinstance(test.args[1], ast.Constant) and isinstance(test.args[1].value, str) and dotted(test.args[0]):
        # `getattr(wandb, "run", None)` reads the attribute `wandb.run` (fr68 Megatron-DeepSpeed training_log)
        return flags.get(f"{dotted(test.args[0])}.{test.args[1].value}")
    if isinstance(test, ast.Call):  # `is_log_process(plugin_type, cfg)`: arguments do not change what it tests
        name = dotted(test.func)
        return flags.get(name + "()") if name else None
    if not isinstance(test, (ast.Name, ast.Attribute, ast.Subscript)):
        return None
    name = flag_name(test)
    return flags.get(name) if name else None


def _is_none(expr: ast.AST) -> bool:
    return isinstance(expr, ast.Constant) and expr.value is None


def _is_zero(expr: ast.AST) -> bool:
    """0, or the last rank (`dist.get_world_size() - 1`, Open-Sora's logging rank under pipeline
    parallelism): either way a test that one rank passes."""
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Sub) and isinstance(expr.right, ast.Constant) \
            and expr.right.value == 1 and "world_size" in (last_name(expr.left) or "").lower():
        return True
    return isinstance(expr, ast.Constant) and expr.value == 0 and not isinstance(expr.value, bool)


def _is_minus_one(expr: ast.AST) -> bool:
    """`-1` parses as a unary minus applied to 1 (a Constant -1 only comes from constant folding)."""
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
        expr = expr.operand
        return isinstance(expr, ast.Constant) and expr.value == 1 and not isinstance(expr.value, bool)
    return isinstance(expr, ast.Constant) and expr.value == -1 and not isinstance(expr.value, bool)


ZERO_KEY = "\x00zero:"  # flags key of a name whose last assignment is the constant 0 (`gpu_id2save = 0`)


def _zero_name(expr: ast.AST, flags: Flags) -> bool:
    """A name bound to the constant 0 where the test reads it (ssl-wearables: `gpu_id2save = 0` then
    `rank == gpu_id2save`, fr111 OxWearables/ssl-wearables mtl.py): the test holds on rank 0 as `rank == 0` does."""
    return bool(flags) and isinstance(expr, ast.Name) and flags.get(ZERO_KEY + expr.id) is not None


def body_others(test: ast.AST, flags: Flags = None) -> bool:
    """The body of `if test:` runs on non-zero ranks only (`if local_rank not in [-1, 0] and not evaluate:`)."""
    if isinstance(test, ast.BoolOp):
        if isinstance(test.op, ast.And):
            return any(body_others(v, flags) for v in test.values)
        return all(body_others(v, flags) for v in test.values)
    return atom_kind(test, flags) == "others"


def atom_kind(test: ast.AST, flags: Flags = None, depth: int = 0) -> Optional[str]:
    """'rank0' if the test holds exactly on rank 0, 'others' if exactly on the other ranks, else None."""
    held = _flag(test, flags)
    if held is not None and depth < 4:
        kind = _kind_of(held, flags, depth + 1)
        if kind is not None:
            return kind
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = atom_kind(test.operand, flags, depth)
        if inner is None and is_rankish(test.operand):
            return "rank0"  # `not rank`
        return {"rank0": "others", "others": "rank0"}.get(inner or "")
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, op, right = test.left, test.ops[0], test.comparators[0]
        if _is_none(right) and isinstance(op, (ast.IsNot, ast.NotEq, ast.Is, ast.Eq)) and _flag(left, flags) is not None:
            # `if writer is not None:` where the writer exists on rank 0 only
            inner = atom_kind(left, flags, depth)
            if isinstance(op, (ast.IsNot, ast.NotEq)):
                return inner
            return {"rank0": "others", "others": "rank0"}.get(inner or "")
        if (_is_zero(left) or _zero_name(left, flags)) and _rank_operand(right):
            left, right = right, left
            op = {ast.Gt: ast.Lt(), ast.Lt: ast.Gt(), ast.GtE: ast.LtE(), ast.LtE: ast.GtE()}.get(type(op), op)
        if _rank_operand(left) and (_is_zero(right) or _zero_name(right, flags)):
            if isinstance(op, (ast.Eq, ast.LtE, ast.Is)):
                return "rank0"
            if isinstance(op, (ast.NotEq, ast.Gt, ast.IsNot)):
                return "others"
            return None
        if is_rankish(left) and isinstance(right, (ast.List, ast.Tuple, ast.Set)) and right.elts and all(
                _is_zero(e) or _is_minus_one(e) for e in right.elts) and any(_is_zero(e) for e in right.elts):
            if isinstance(op, ast.In):
                return "rank0"
            if isinstance(op, ast.NotIn):
                return "others"
        if is_rankish(left) and isinstance(right, ast.Constant) and right.value == 1 and isinstance(op, ast.Lt):
            return "rank0"
        if is_rankish(left) and isinstance(right, ast.Constant) and right.value == 1 and isinstance(op, ast.GtE):
            return "others"
        return None
    name = last_name(test)
    if name is not None and _main_word_node(test):
        return "rank0"
    if name is not None and isinstance(test, (ast.Name, ast.Attribute)) and is_rankish(test):
        return "others"  # `if rank:` / `if args.local_rank:`
    return None


def _falsy(expr: ast.AST) -> bool:
    return isinstance(expr, ast.Constant) and not expr.value


def _kind_of(expr: ast.AST, flags: Flags, depth: int) -> Optional[str]:
    if isinstance(expr, ast.IfExp):  # `is_local_main if local_fs else is_main`: both arms rank 0
        # a value that is false wherever the test puts the other ranks (fr142 GFMDiff run_fsdp.py:
        # `model_config['enable_tb'] = False if disable_tqdm else model_config['enable_tb']` with `disable_tqdm =
        # rank != 0`; also `x if is_main else None`): true on rank 0 only, as `x and rank == 0` is
        if _falsy(expr.body) and covers_others(expr.test, flags, depth):
            return "rank0"
        if _falsy(expr.orelse) and body_rank0(expr.test, flags, depth):
            return "rank0"
        a, b = _kind_of(expr.body, flags, depth + 1), _kind_of(expr.orelse, flags, depth + 1)
        return a if a == b else None
    if body_rank0(expr, flags, depth):
        return "rank0"
    if covers_others(expr, flags, depth):
        return "others"
    return None


def not_distributed(test: ast.AST) -> bool:
    """`local_rank == -1`, also `local_rank is None` (the default of an argparse `--local_rank` that no launcher
    filled, DeepFashion_Try_On's `MAIN_DEVICE = rank is None or rank == 0`): the run is not distributed, so there
    is one process, and it is rank 0."""
    def unset(e) -> bool:
        return _is_minus_one(e) or (isinstance(e, ast.Constant) and e.value is None)
    return isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.Is)) and (
        (is_rankish(test.left) and unset(test.comparators[0])) or
        (unset(test.left) and is_rankish(test.comparators[0])))


def unset_rank_test(test: ast.AST) -> bool:
    """`local_rank == -1`, `rank is None`, `-1 in [local_rank, world_size]`: the test asks whether a launcher set the
    rank at all, not which rank this is. In a launched run every rank has a value in [0, world_size) (torch's
    launchers export RANK/LOCAL_RANK that way: torch/distributed/run.py, data/lint_env_types.json), so the test has
    the same value on every rank: `if local_rank == -1: raise/return` leaves the rest of the block to every rank
    (round 25, fr166 Lainshower/CoT-Internalize: `if -1 in [local_rank, world_size]: raise ValueError(...)` had
    made its whole main() a rank-gated block, a LINT013 miss)."""
    if not_distributed(test):
        return True
    return isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.In) and \
        _is_minus_one(test.left) and isinstance(test.comparators[0], (ast.List, ast.Tuple, ast.Set)) and \
        any(is_rankish(e) for e in test.comparators[0].elts)


def body_rank0(test: ast.AST, flags: Flags = None, depth: int = 0) -> bool:
    """The body of `if test:` runs on rank 0 only (also `local_rank == -1 or get_rank() == 0`: one
    process, or rank 0 of many)."""
    if isinstance(test, ast.BoolOp):
        if isinstance(test.op, ast.And):
            return any(body_rank0(v, flags, depth) for v in test.values)
        hits = [body_rank0(v, flags, depth) for v in test.values]
        # `local_rank == -1 or rank == 0`, `not args.distributed or rank == 0`: one process, or rank 0 of many
        return any(hits) and all(h or not_distributed(v) or single_process(v, 0) for h, v in zip(hits, test.values))
    return atom_kind(test, flags, depth) == "rank0"


def covers_others(test: ast.AST, flags: Flags = None, depth: int = 0) -> bool:
    """`test` is true on every non-zero rank, so code after `if test: return` runs on rank 0 only."""
    if isinstance(test, ast.BoolOp):
        if isinstance(test.op, ast.Or):
            return any(covers_others(v, flags, depth) for v in test.values)
        return all(covers_others(v, flags, depth) for v in test.values)
    return atom_kind(test, flags, depth) == "others"


def is_rank_test(expr: ast.AST, flags: Flags = None) -> bool:
    """`expr` (the value of an assignment) is a test of the rank: worth remembering as a flag."""
    if isinstance(expr, ast.IfExp):
        return (is_rank_test(expr.body, flags) and is_rank_test(expr.orelse, flags)) or \
            _kind_of(expr, flags, 0) is not None
    if not isinstance(expr, (ast.Compare, ast.BoolOp, ast.UnaryOp, ast.Name, ast.Attribute, ast.Call)):
        return False
    if isinstance(expr, (ast.Name, ast.Attribute)):  # `is_main = accelerator.is_main_process`, not `r = rank`
        name = last_name(expr)
        return name is not None and (is_main_word(name) or _flag(expr, flags) is not None)
    if isinstance(expr, ast.Call) and last_name(expr) not in ("bool",):
        name = last_name(expr)
        return name is not None and is_main_word(name)  # `is_main = accelerator.is_main_process()`-style
    if isinstance(expr, ast.Call):
        expr = expr.args[0] if expr.args else expr
    return body_rank0(expr, flags) or covers_others(expr, flags)


def mentions_rank(test: ast.AST, flags: Flags = None) -> bool:
    """The test looks at the rank or main-process status anywhere (a deliberate gate of some kind)."""
    for node in expr_nodes(test):
        if isinstance(node, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)):
            if is_rankish(node):
                return True
            if _main_word_node(node):
                return True
            if _flag(node, flags) is not None:
                return True
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and (
                (_rank_operand(node.left) and _is_zero(node.comparators[0])) or
                (_is_zero(node.left) and _rank_operand(node.comparators[0]))):
            return True
    return False


def is_main_guard(test: ast.AST) -> bool:
    """`__name__ == "__main__"` in either order (and as one operand of `and`)."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(is_main_guard(v) for v in test.values)
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = (test.left, test.comparators[0])
    has_name = any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides)
    has_main = any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides)
    return has_name and has_main


def terminates(body: list) -> bool:
    """The block always leaves: return/continue/break/raise, or sys.exit()/exit()/quit()."""
    if not body:
        return False
    last = body[-1]
    if isinstance(last, (ast.Return, ast.Continue, ast.Break, ast.Raise)):
        return True
    if isinstance(last, ast.Expr) and isinstance(last.value, ast.Call):
        name = last_name(last.value)
        return name in ("exit", "quit", "_exit")
    return False


# Names of a test that says "this run is distributed" (`if ddp:`, `if args.distributed:`): its other
# branch runs in a single process, where writing without a rank gate is right.
_DIST_NAMES = {"ddp", "distributed", "is_distributed", "use_ddp", "use_distributed", "is_ddp", "ddp_enabled",
               "multiprocessing_distributed", "distributed_training", "dist_training", "is_dist", "use_dist",
               "is_dist_avail_and_initialized", "is_initialized", "dist_enabled", "using_ddp", "enable_ddp",
               # TransReID's config flag `cfg.MODEL.DIST_TRAIN` ("If train with multi-gpu ddp mode", config/defaults.py),
               # copied by ReID repositories (fr86 HammadMusaddiq/MMTTA-ReID)
               "dist_train"}
# Names of a test that says "this run is NOT distributed": the GaLore/ReLoRA family's `--single_gpu` ("# disable ddp,
# single_gpu", jiaweizzhao/GaLore torchrun_main.py 691de15f36d3b70a682e222a41fc49c37ea05528: the model is wrapped in
# DDP only under `if not args.single_gpu:`, copied by fr155 Sphere-AI-Lab/poet, BIGKnight/VLoRP, DelyanHristov/ReLoRa),
# and the like spelled out: the body of `if args.single_gpu:` runs in one process.
_SINGLE_NAMES = {"single_gpu", "single_process", "single_device", "no_ddp", "disable_ddp", "no_distributed",
                 "non_distributed", "not_distributed", "disable_distributed"}


def _dist_atom(test: ast.AST) -> Optional[bool]:
    """True if `test` holds exactly when the run is distributed, False if exactly when it is not."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _dist_atom(test.operand)
        return None if inner is None else not inner
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, op, right = test.left, test.ops[0], test.comparators[0]
        name = (last_name(left) or "").lower()
        if name in ("world_size", "num_processes", "n_procs", "nprocs") and isinstance(right, ast.Constant) and \
                right.value == 1 and not isinstance(right.value, bool):
            if isinstance(op, (ast.Gt, ast.NotEq)):
                return True
            if isinstance(op, (ast.Eq, ast.LtE)):
                return False
        if is_rankish(left) and _is_minus_one(right):
            if isinstance(op, (ast.NotEq, ast.IsNot)):
                return True
            if isinstance(op, (ast.Eq, ast.Is)):
                return False
        if name in _SINGLE_NAMES and isinstance(right, ast.Constant) and isinstance(right.value, bool):
            if isinstance(op, (ast.Eq, ast.Is)):
                return not right.value
            if isinstance(op, (ast.NotEq, ast.IsNot)):
                return right.value
        if name in _DIST_NAMES and isinstance(right, ast.Constant) and isinstance(right.value, bool):
            # `cfg.runtime.distributed is False` / `== True` (fr111 OxWearables/ssl-wearables)
            if isinstance(op, (ast.Eq, ast.Is)):
                return right.value
            if isinstance(op, (ast.NotEq, ast.IsNot)):
                return not right.value
        return None
    if isinstance(test, (ast.Name, ast.Attribute, ast.Call)):
        name = (last_name(test) or "").lower()
        if name in _DIST_NAMES:
            return True
        if name in _SINGLE_NAMES and not isinstance(test, ast.Call):
            return False
    if isinstance(test, ast.Subscript) and isinstance(test.slice, ast.Constant) and isinstance(test.slice.value, str) \
            and test.slice.value.lower() in _DIST_NAMES:
        return True  # a config dict's flag, `train_cfg['DDP']` (fr100 mlvccn/MDDG_RGBTSeg)
    return None


def dist_test(test: ast.AST) -> bool:
    """`test` asks whether the run is distributed (`args.local_rank != -1`, `world_size > 1`, `if ddp:`): the
    same answer on every rank of one run, unlike a test of which rank this is."""
    return _dist_atom(test) is not None


def single_process(test: ast.AST, side: int) -> bool:
    """The branch `side` (0 body, 1 else) of `if test:` runs only when the job is not distributed
    (`else:` of `if ddp:`, body of `if not args.distributed:` or `if world_size == 1:`): one process."""
    if isinstance(test, ast.BoolOp):
        # body of `not ddp and x`: single; else of `ddp and x`: not provable
        if side == 0 and isinstance(test.op, ast.And):
            return any(single_process(v, 0) for v in test.values)
        if side == 1 and isinstance(test.op, ast.Or):
            return any(single_process(v, 1) for v in test.values)
        return False
    kind = _dist_atom(test)
    if kind is None:
        return False
    return (kind is True and side == 1) or (kind is False and side == 0)


_FALSY = (False, 0, None)


def _top_statements(node: ast.AST) -> list:
    """The statements of a module or function body, and of a module's `if __name__ == "__main__":` blocks (the
    script's top level: fr127 ywj55555/material binds `ckpt_path = None` there)."""
    out = []
    for stmt in getattr(node, "body", ()):
        out.append(stmt)
        if isinstance(node, ast.Module) and isinstance(stmt, ast.If) and is_main_guard(stmt.test):
            out.extend(stmt.body)
    return out


def false_flags(tree: ast.Module) -> Set[str]:
    """Module names that hold a falsy constant for the whole run: `ddp = False` at the top level of the module
    (not under an `if`/`try`/loop), and no other binding of the name anywhere in the file (no second assignment,
    parameter, loop target, `global`, import, def). `if ddp:` bodies are then dead code as the file stands
    (fr47 img2mml main_ddp.py: `ddp = False` hard-coded, argparse flag commented out); a file that reads
    `globals()` or `setattr` may rebind it, so it has none. Another module may still assign `mod.ddp`; a
    script's flag is not set that way in the corpora read."""
    top: Dict[str, int] = {}
    for stmt in _top_statements(tree):
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                and isinstance(stmt.value, ast.Constant) and stmt.value.value in _FALSY \
                and not isinstance(stmt.value.value, float):
            top[stmt.targets[0].id] = top.get(stmt.targets[0].id, 0) + 1
    if not top:
        return set()
    bindings: Dict[str, int] = {}
    for n in ast.walk(tree):
        names: Iterable[str] = ()
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            names = (n.id,)
        elif isinstance(n, ast.arg):
            names = (n.arg,)
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            names = n.names
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = (n.name,)
        elif isinstance(n, ast.alias):
            names = ((n.asname or n.name).split(".")[0],)
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("globals", "setattr", "vars"):
            return set()
        for name in names:
            if name in top:
                bindings[name] = bindings.get(name, 0) + 1
    return {name for name, k in top.items() if k == 1 and bindings.get(name) == 1}


def none_flags(node: ast.AST) -> Set[str]:
    """The names of false_flags(node) whose one binding is `= None`. `node` is a module or a function: a
    function's `ckpt_path = None` at the top level of its body, bound nowhere else in it (fr127 ywj55555/material:
    `ckpt_path = None` two lines above `if dist.get_rank() == 0 and ckpt_path is not None: dist.barrier()`)."""
    names = false_flags(node)  # type: ignore[arg-type]
    out: Set[str] = set()
    for stmt in _top_statements(node):
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                and stmt.targets[0].id in names and isinstance(stmt.value, ast.Constant) and stmt.value.value is None:
            out.add(stmt.targets[0].id)
    return out


def static_truth(test: ast.AST, flags: Set[str], nones: Set[str] = frozenset()) -> Optional[bool]:
    """True/False when `test` has that value whatever the run, from the falsy module `flags` alone; else None.
    `if ddp:`, `if ddp and x:` are never true, `if not ddp:` always is. A literal test is what it says: `if 0:` /
    `if False:` is code switched off (CPython's compiler drops the block: fr63 balewski/srgan_cosmo2d's `if 0:` load
    "OFF for now"), and so is the `else` of `if 1:` / `if True:`. `x is not None` / `x is None` of a name in
    `nones` (bound once, to None) are False / True."""
    if isinstance(test, ast.Constant) and isinstance(test.value, (bool, int, float, str, bytes, type(None))):
        return bool(test.value)
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Name) and \
            test.left.id in nones and isinstance(test.comparators[0], ast.Constant) and \
            test.comparators[0].value is None and isinstance(test.ops[0], (ast.Is, ast.IsNot)):
        return isinstance(test.ops[0], ast.Is)
    if isinstance(test, ast.Name):
        return False if flags and test.id in flags else None
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        v = static_truth(test.operand, flags, nones)
        return None if v is None else not v
    if isinstance(test, ast.BoolOp):
        vals = [static_truth(v, flags, nones) for v in test.values]
        if isinstance(test.op, ast.And):
            return False if False in vals else (True if all(v is True for v in vals) else None)
        return True if True in vals else (False if all(v is False for v in vals) else None)
    return None
