"""Names and questions several rules share: what is a spawn, a Trainer, a distributed script."""
from __future__ import annotations

import ast
import re
from typing import Iterable, List, Optional, Tuple

from ...facts.launchers import (launcher_env_required, lightning_script_relaunch, ray_train_workers,
                                trainer_launch_settings)
from ..analysis import Call, ModuleIndex, Scope
from ..conditions import is_rankish
from ..names import dotted

SPAWN = {"torch.multiprocessing.spawn", "torch.multiprocessing.start_processes"}
PROCESS = {"multiprocessing.Process"}
INIT_PG = "torch.distributed.init_process_group"
DDP = "torch.nn.parallel.DistributedDataParallel"
# The wrappers that make a backward pass a collective (DDP's all-reduce, FSDP's reduce-scatter): one list for the rules
DATA_PARALLEL_WRAPPERS = (DDP, "torch.distributed.fsdp.FullyShardedDataParallel", "torch.distributed.fsdp.fully_shard")
DATALOADER = "torch.utils.data.DataLoader"
# torch.distributed's collectives: every rank of the group calls them, in the same order (pytorch/pytorch
# torch/distributed/distributed_c10d.py; all_reduce_multigpu is the pre-2.x spelling old scripts still call).
# Point-to-point send/recv are one-sided on purpose and are not listed. One list for LINT019, LINT025 and Reach.
C10D_COLLECTIVES = frozenset({
    "all_reduce", "broadcast", "barrier", "monitored_barrier", "all_gather", "all_gather_object",
    "all_gather_into_tensor", "reduce", "reduce_scatter", "reduce_scatter_tensor", "all_to_all", "gather",
    "gather_object", "scatter", "scatter_object_list", "broadcast_object_list", "all_reduce_multigpu"})
SAMPLER = "torch.utils.data.DistributedSampler"
# Subclasses that keep its shuffle-by-seed+epoch contract: MONAI's (monai/data/samplers.py, Project-MONAI/MONAI:
# `class DistributedSampler(_TorchDistributedSampler)`, shuffle=True by default, set_epoch inherited).
SAMPLERS = (SAMPLER, "monai.data.DistributedSampler", "monai.data.samplers.DistributedSampler")
DATASETS = {"torch.utils.data.Dataset", "torch.utils.data.IterableDataset", "torch.utils.data.TensorDataset"}
HAND_ENV = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
TRL_CONFIGS = {"SFTConfig", "DPOConfig", "GRPOConfig", "PPOConfig", "RewardConfig", "ORPOConfig", "KTOConfig",
               "CPOConfig", "GKDConfig"}
_DIST_MARKERS = {INIT_PG, DDP, SAMPLER, "torch.multiprocessing.spawn", "torch.multiprocessing.start_processes",
                 "accelerate.Accelerator", "deepspeed.initialize",
                 "torch.distributed.fsdp.FullyShardedDataParallel", "torch.distributed.fsdp.fully_shard",
                 # Horovod: `hvd.init()` joins the job that horovodrun/mpirun started, one process per slot, each with
                 # its hvd.rank() (horovod/horovod horovod/torch/__init__.py re-exports mpi_ops.init, rank, size)
                 "horovod.torch.init"}


def nodes_through_assigns(expr: ast.AST, scope: Scope, limit: int) -> Iterable[ast.AST]:
    """Every node of `expr`, then of the values the scope assigns to each name read there, and so on (a value
    followed back through `x = ...` in the same function): at most `limit` expressions walked, so a long chain of
    assignments stays bounded. A rule that looks for where a value comes from stops the walk by returning."""
    todo, walked = [expr], 0
    while todo and walked < limit:
        node = todo.pop()
        walked += 1
        for n in ast.walk(node):
            yield n
            if isinstance(n, ast.Name):
                todo.extend(a.value for a in scope.assigns if n.id in a.targets and a.value is not None)


def is_setdefault(env_set) -> bool:
    """`os.environ.setdefault("MASTER_ADDR", ...)` only fills in what no launcher set: a fallback."""
    node = env_set.node
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "setdefault"


def is_trainer_qual(qual: Optional[str]) -> bool:
    """transformers/trl Trainers and their arguments, and accelerate's process state."""
    if not qual:
        return False
    if qual in ("accelerate.Accelerator", "accelerate.PartialState", "accelerate.state.AcceleratorState"):
        return True
    if not qual.startswith(("transformers.", "trl.")):
        return False
    last = qual.rsplit(".", 1)[1]
    return last.endswith(("Trainer", "TrainingArguments")) or last in TRL_CONFIGS


def is_training_args_qual(qual: Optional[str]) -> bool:
    if not qual or not qual.startswith(("transformers.", "trl.")):
        return False
    last = qual.rsplit(".", 1)[1]
    return last.endswith("TrainingArguments") or last in TRL_CONFIGS


def builds_trainer(index: ModuleIndex, call: Call) -> bool:
    if is_trainer_qual(call.qual):
        return True
    klass = index.class_of_call(call)
    return klass is not None and any(is_trainer_qual(b) for b in index.class_bases(klass))


def spawn_sites(index: ModuleIndex) -> List[Tuple[Call, Optional[ast.AST], str]]:
    """(call, target expression, 'spawn'|'process') for every way the script starts processes."""
    out = []
    for call in index.calls_named(*SPAWN):
        out.append((call, call.arg(0, "fn"), "spawn"))
    for call in index.calls_named(*PROCESS):
        out.append((call, call.kw("target") or call.arg(1), "process"))
    return sorted(out, key=lambda t: (t[0].line, t[0].node.col_offset))


def spawn_method(index: ModuleIndex, call: Call, kind: str) -> str:
    """'spawn' for torch's spawn and spawn/forkserver contexts; 'default' for a plain Process."""
    if kind == "spawn":
        return "spawn"
    func = call.node.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call):
        from ..names import const_str

        method = const_str(func.value.args[0]) if func.value.args else None
        if method in ("spawn", "forkserver"):
            return method
    if index.start_methods & {"spawn", "forkserver"}:
        return sorted(index.start_methods & {"spawn", "forkserver"})[0]
    return "default"


def spawned_scopes(index: ModuleIndex) -> List[Scope]:
    """Every function that runs inside a child process started by the script."""
    out: dict = {}
    for call, target, _kind in spawn_sites(index):
        fn = index.function_of(target, call.scope) if target is not None else None
        if fn is not None:
            for s in index.reachable(fn):
                out[id(s)] = s
    return list(out.values())


def is_distributed(index: ModuleIndex) -> bool:
    """The script sets up or joins a process group (directly, through accelerate, or by spawning)."""
    if any(q in index.by_qual for q in _DIST_MARKERS):
        return True
    if any(q.startswith("torch.distributed.") for q in index.by_qual):
        return True
    return index.sets_env("LOCAL_RANK") or any(e.name in ("RANK", "WORLD_SIZE") for e in index.env_sets)


_LAUNCH_WORDS = re.compile(r"torchrun|torch\.distributed\.(?:launch|run)\b|accelerate launch|--nproc[-_]per[-_]node|"
                           r"[\"'](?:LOCAL_RANK|WORLD_SIZE|LOCAL_WORLD_SIZE)[\"']")
# TrainingArguments settings that need a multi-process launch (FSDP, DeepSpeed); the ddp_* flags only configure one
# when there is one and are no evidence of it (round 22; data/launchers.json trainer_launch_settings)
DIST_ARGS = frozenset(trainer_launch_settings().get("evidence", ()))
_DIST_ARGS = DIST_ARGS


def is_trainer_script(index: ModuleIndex) -> bool:
    """The script builds a transformers/trl Trainer or TrainingArguments (or an accelerate Accelerator)."""
    return any(is_trainer_qual(q) for q in index.by_qual) or any(
        builds_trainer(index, c) for c in index.calls if c.name and c.name.endswith(("Trainer", "Arguments")))


_ENV_READ = re.compile(r"\benviron\[\s*[\"'](?:" + "|".join(map(re.escape, launcher_env_required())) +
                       r")[\"']\s*\](?!\s*=[^=])")


def reads_launcher_env(index: ModuleIndex) -> bool:
    """The script reads RANK / LOCAL_RANK / WORLD_SIZE from os.environ WITHOUT a default (`os.environ["RANK"]`):
    a plain `python script.py` stops with KeyError there, so it only runs as one process per rank of a launch
    (torchrun's agent exports them into every worker: data/launchers.json launcher_env_required), process group or
    not (fr146 itsliupeng/nougat shards its PDFs by RANK and never joins a group). The text is only the first
    sieve: the read must be code, a value assigned or an argument passed (torch's own launch.py copied into a
    project names `os.environ['LOCAL_RANK']` in its docstring: fr121 PipeTransformer)."""
    if not _ENV_READ.search(index.source or ""):
        return False
    got = index.cache.get("reads_launcher_env") if hasattr(index, "cache") else None
    if got is not None:
        return got
    names = set(launcher_env_required())

    def read(node) -> bool:
        for n in ast.walk(node):
            if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load) and \
                    (dotted(n.value) or "") in ("os.environ", "environ") and \
                    isinstance(n.slice, ast.Constant) and n.slice.value in names:
                return True
        return False

    got = any(a.value is not None and read(a.value) for a in index.assigns) or any(
        read(arg) for c in index.calls for arg in list(c.node.args) + [k.value for k in c.node.keywords])
    if hasattr(index, "cache"):
        index.cache["reads_launcher_env"] = got
    return got


def launched_distributed(index: ModuleIndex) -> bool:
    """A Trainer/accelerate script meant to run as several processes (torchrun, accelerate launch,
    deepspeed): it reads LOCAL_RANK/WORLD_SIZE, passes ddp_*/fsdp/deepspeed settings, or says how it
    is launched. torchrun starts one copy of the script per GPU; everything outside the Trainer's own
    gates runs on every rank."""
    if is_distributed(index):
        return True
    if not is_trainer_script(index):
        return False
    if _LAUNCH_WORDS.search(index.source or ""):
        return True
    return any(k.arg in _DIST_ARGS for c in index.calls if is_training_args_qual(c.qual) for k in c.node.keywords)


def sharded(index: ModuleIndex) -> Optional[str]:
    """How the model is sharded across ranks (FSDP, ZeRO-3, tensor parallel, DTensor), if the script says."""
    text = index.source or ""
    quals = index.by_qual
    if any(q.startswith("torch.distributed.fsdp") or q.endswith(("fully_shard", "FullyShardedDataParallel"))
           for q in quals) or re.search(r"\bFSDP\b|fsdp_plugin|FullyShardedDataParallelPlugin", text):
        return "FSDP"
    if re.search(r"zero[_ ]?(?:stage)?[_ ]?3|zero3|\"stage\":\s*3|ds_zero3", text, re.IGNORECASE):
        return "DeepSpeed ZeRO-3"
    if any(q.startswith("torch.distributed.tensor") for q in quals) or re.search(
            r"parallelize_module|\btp_plan\b|\btp_size\b|ParallelismConfig|DTensor|DeviceMesh|init_device_mesh", text):
        return "tensor parallel"
    return None


def workers(call: Call, name: str = "num_workers", index: Optional[ModuleIndex] = None) -> Optional[str]:
    """'literal' for num_workers=N>0, 'dynamic' for a non-constant value, None for 0 or absent. With `index`, a
    name the module binds once, for good, to 0 (`num_workers = 0` at the top, fr50 NET s4c_pretrain.py) is 0: the
    DataLoader starts no worker process (torch/utils/data/dataloader.py: num_workers == 0 -> single-process
    iterator)."""
    value = call.kw(name)
    if value is None and name == "num_workers":
        value = call.arg(5)  # DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers)
    if value is None:
        return None
    if index is not None and isinstance(value, ast.Name) and value.id in index.false_flags:
        return None
    if isinstance(value, ast.Constant):
        return "literal" if isinstance(value.value, int) and not isinstance(value.value, bool) and value.value > 0 \
            else None
    return "dynamic"


def import_time_roots(index: ModuleIndex) -> List[Call]:
    """Calls that run whenever the module is imported, i.e. also when a spawned child re-imports it."""
    return [c for c in index.calls if c.ctx.module_level and not c.ctx.guarded]


def reached_from(index: ModuleIndex, roots: Iterable[Call]) -> List[Tuple[Call, Scope]]:
    """(root call, function reached) for local functions that the root calls run, transitively."""
    out = []
    for root in roots:
        fn = index.callee(root)
        if fn is None:
            continue
        for s in index.reachable(fn):
            out.append((root, s))
    return out


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


_NPROC_SHOWN = re.compile(r"--nproc[-_]per[-_]node[= ]+(\d+|gpu|auto)\b")


def nproc_shown(index: ModuleIndex, spawn: Optional[Call] = None) -> str:
    """The process count to put in a torchrun line: the spawn's literal `nprocs`, `gpu` when it is
    `torch.cuda.device_count()`, what the script's own comments show (`--nproc_per_node=2`), else
    `gpu` (torchrun's spelling for one process per visible GPU). Never a made-up number."""
    if spawn is not None:
        value = spawn.arg(2, "nprocs")  # spawn(fn, args, nprocs) / start_processes(fn, args, nprocs)
        for _ in range(3):
            if isinstance(value, ast.Name):
                s = spawn.scope
                while s is not None and value.id not in s.values:
                    s = s.parent
                value = s.values.get(value.id) if s is not None else None
            else:
                break
        if isinstance(value, ast.Constant) and isinstance(value.value, int) and not isinstance(value.value, bool):
            return str(value.value)
        if isinstance(value, ast.Call) and (dotted(value.func) or "").endswith("device_count"):
            return "gpu"
    m = _NPROC_SHOWN.search(index.source or "")
    if m:
        return m.group(1)
    return "gpu"


def torchrun_line(index: ModuleIndex, spawn: Optional[Call] = None) -> str:
    return f"torchrun --standalone --nproc-per-node {nproc_shown(index, spawn)} train.py"


_FREE_PORT_CALL = re.compile(r"free_port|open_port|unused_port|find_port|available_port|get_port|pick_port",
                             re.IGNORECASE)


def picks_port(index: ModuleIndex) -> bool:
    """The script chooses the rendezvous port at run time: a free-port helper, a socket bound to port 0,
    a random port, or MASTER_PORT from a computed value."""
    for call in index.calls:
        if call.name and _FREE_PORT_CALL.search(call.name):
            return True
        if call.name == "bind" and call.node.args and isinstance(call.node.args[0], ast.Tuple) and \
                len(call.node.args[0].elts) == 2 and isinstance(call.node.args[0].elts[1], ast.Constant) and \
                call.node.args[0].elts[1].value == 0:
            return True
    for e in index.env_sets:
        if e.name == "MASTER_PORT" and e.value is not None and not isinstance(e.value, ast.Constant):
            inner = e.value.args[0] if isinstance(e.value, ast.Call) and e.value.args else e.value
            if not isinstance(inner, ast.Constant) and not _constant_default(e.scope, inner):
                return True
    return False


def _constant_default(scope, expr) -> bool:
    """`def init_distributed(port=40112): os.environ["MASTER_PORT"] = str(port)`: still a fixed port."""
    node = getattr(scope, "node", None)
    if not isinstance(expr, ast.Name) or not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    args = node.args
    positional = list(args.posonlyargs) + list(args.args)
    defaults = dict(zip([a.arg for a in positional[len(positional) - len(args.defaults):]], args.defaults))
    defaults.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None})
    return isinstance(defaults.get(expr.id), ast.Constant)


_TCP = re.compile(r"^tcp://[^/]*:\d+$")  # a literal host (often 127.0.0.1 or localhost) and port


def hard_coded_init_method(call: Call) -> Optional[str]:
    """`init_process_group(init_method="tcp://127.0.0.1:23456")`: the rendezvous address written into the code."""
    value = call.kw("init_method")
    if value is None:
        return None
    if isinstance(value, ast.Constant) and isinstance(value.value, str) and _TCP.match(value.value):
        return value.value
    if isinstance(value, ast.JoinedStr) and value.values and isinstance(value.values[0], ast.Constant) and \
            str(value.values[0].value).startswith("tcp://") and all(
                isinstance(v, ast.Constant) for v in value.values):
        return "".join(str(v.value) for v in value.values)
    return None


_WORKER_IDS = ("worker_id", "worker_rank", "worker_index")


def worker_id_name(n: ast.AST) -> bool:
    """`self.train_config.worker_id` in a file name (tango's worker{id}_model.pt): the rank, in a training
    engine's words. Only in paths: a DataLoader's `worker_init_fn(worker_id)` is no rank."""
    name = n.attr if isinstance(n, ast.Attribute) else n.id if isinstance(n, ast.Name) else ""
    return name in _WORKER_IDS


_PER_PROCESS = ("uuid4", "uuid1", "getpid")


def names_the_rank(exprs: Iterable[ast.AST], call: Call, index: Optional[ModuleIndex] = None,
                   limit: int = 24) -> bool:
    """Whether a path (or any of `exprs`) puts the rank in: the rank itself, a worker id, or, given `index`, a
    path function of this file that reads the rank (`get_checkpoint_name(save, it, zero=True)`). Names are
    followed back through their assignments in the call's scopes (`shard = f"optim_{rank}.pt"; path =
    os.path.join(d, shard)`), at most `limit` expressions."""
    stack, seen = list(exprs), 0
    while stack and seen < limit:
        expr = stack.pop()
        seen += 1
        for n in ast.walk(expr):
            if isinstance(n, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)) and (is_rankish(n) or worker_id_name(n)):
                return True
            if isinstance(n, ast.Call) and (dotted(n.func) or "").rsplit(".", 1)[-1] in _PER_PROCESS:
                return True  # `f"batch-{uuid4()}.pt"`: a name no other process makes, like the rank
            if isinstance(n, ast.Call) and index is not None:
                fn = index.function_of(n.func, call.scope)
                if fn is not None and fn.kind == "function" and (any(is_rankish(c.node) for c in fn.calls) or
                                                                  _returns_rank(fn.node)):
                    return True
            if isinstance(n, ast.Name):
                s = call.scope
                while s is not None and n.id not in s.values:
                    s = s.parent
                if s is not None and s.values[n.id] is not expr:
                    stack.append(s.values[n.id])
                elif s is None:
                    stack.extend(v for v in _other_binders(call.scope, n.id) if v is not expr)
    return False


def _returns_rank(fn: ast.AST) -> bool:
    """The function's result is computed from the rank: `return num * self.rank, num * (self.rank + 1)`, or a name
    assigned from the rank and returned (fr67 cambridge-mlg/combiner's assign_image: each rank its own range)."""
    returns = [n.value for n in ast.walk(fn) if isinstance(n, ast.Return) and n.value is not None]
    returned = {x.id for r in returns for x in ast.walk(r) if isinstance(x, ast.Name)}
    exprs = returns + [n.value for n in ast.walk(fn) if isinstance(n, ast.Assign) and any(
        isinstance(x, ast.Name) and x.id in returned for tg in n.targets for x in ast.walk(tg))]
    return any(isinstance(x, (ast.Name, ast.Attribute)) and is_rankish(x) for e in exprs for x in ast.walk(e))


def _other_binders(scope: Optional[Scope], name: str) -> List[ast.AST]:
    """What binds `name` in `scope` besides a plain assignment: the iterable of a `for` loop whose target holds it
    (`for idx in range(process_index, n, num_processes):`, each rank its own items) and the value of a tuple
    assignment (`name, ext = os.path.splitext(path)`; the matching element when the value is a tuple too)."""
    out: List[ast.AST] = []
    if scope is None:
        return out
    for node in ast.walk(scope.node):
        if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            it, target = node.iter, node.target
            if isinstance(it, ast.Call) and (dotted(it.func) or "") == "enumerate" and it.args and \
                    isinstance(target, (ast.Tuple, ast.List)) and len(target.elts) == 2:
                # `for i, item in enumerate(items)`: the counter restarts at 0 on every rank; only the item is theirs
                if isinstance(target.elts[1], ast.Name) and target.elts[1].id == name:
                    out.append(it.args[0])
                continue
            if any(isinstance(t, ast.Name) and t.id == name for t in ast.walk(target)):
                out.append(it)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if not isinstance(target, (ast.Tuple, ast.List)):
                    continue
                for i, elt in enumerate(target.elts):
                    if isinstance(elt, ast.Name) and elt.id == name:
                        value = node.value
                        if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
                            value = value.elts[i]
                        out.append(value)
        if len(out) >= 4:
            break
    return out


def uses_local_rank_readers(index) -> bool:
    """The script uses a library that reads LOCAL_RANK: it builds a transformers/trl Trainer or
    TrainingArguments, an accelerate Accelerator, calls deepspeed or uses Lightning (importing a
    transformers model does not read it)."""
    readers = ("accelerate", "deepspeed", "lightning", "pytorch_lightning", "trl")
    return is_trainer_script(index) or any(q.startswith(readers) for q in index.by_qual) or any(
        is_trainer_qual(v) or v.split(".")[0] in readers for v in index.module.imports.values())


LIGHTNING_TRAINERS = ("pytorch_lightning.Trainer", "lightning.Trainer", "lightning.pytorch.Trainer",
                      "lightning.pytorch.trainer.Trainer", "pytorch_lightning.trainer.Trainer")


def _several_devices(value: ast.AST) -> bool:
    """A Lightning `devices=` value that asks for more than one device: an int > 1, -1, "auto", "-1", "0,1", a
    list of two or more; a value the file does not show (`args.devices`) is not counted."""
    if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub) and isinstance(value.operand, ast.Constant):
        return value.operand.value == 1   # devices=-1: every visible device
    if isinstance(value, ast.Constant):
        v = value.value
        if isinstance(v, bool):
            return False
        if isinstance(v, int):
            return v > 1 or v == -1
        if isinstance(v, str):
            v = v.strip()
            return v in ("auto", "-1") or (v.isdigit() and int(v) > 1) or len([p for p in v.split(",") if p.strip()]) > 1
        return False
    return isinstance(value, (ast.List, ast.Tuple)) and len(value.elts) > 1


def lightning_relaunch(index: ModuleIndex) -> Optional[Call]:
    """Round 21: a Lightning Trainer of this file whose strategy starts the other ranks by RE-RUNNING THE SCRIPT
    (Lightning's subprocess script launcher: `LOCAL_RANK=1 python train.py ...` per device), so its module-level code
    and its `__main__` run on every rank: `strategy="ddp"` (not ddp_spawn/ddp_fork/ddp_notebook), "deepspeed...",
    "fsdp", or a DDPStrategy/DeepSpeedStrategy/FSDPStrategy(...) without another start_method - with devices or
    num_nodes that are not a literal 1; or no strategy with several devices (Lightning >= 2.0 picks "ddp"). Facts in
    ddpdoctor/data/launchers.json `lightning_script_relaunch` (subprocess_script.py, accelerator_connector.py)."""
    return next((call for call in index.calls if relaunches_script(call)), None)


def relaunches_script(call: Call) -> bool:
    """This call is a Lightning Trainer whose strategy re-runs the script per rank (see lightning_relaunch)."""
    facts = lightning_script_relaunch()
    if not facts or call.qual not in LIGHTNING_TRAINERS:
        return False
    kw = {k.arg: k.value for k in call.node.keywords if k.arg}
    devices = kw.get("devices")
    nodes = kw.get("num_nodes")
    single = isinstance(devices, ast.Constant) and devices.value in (1, "1") and not (
        nodes is not None and not (isinstance(nodes, ast.Constant) and nodes.value == 1))
    strategy = kw.get("strategy")
    if isinstance(strategy, ast.Constant) and isinstance(strategy.value, str) and strategy.value != "auto":
        name = strategy.value.lower()
        return name.startswith(tuple(facts["strategies"])) and not any(w in name for w in facts["not"]) and not single
    if isinstance(strategy, ast.Call):
        cls = (dotted(strategy.func) or "").rsplit(".", 1)[-1]
        start = next((k.value for k in strategy.keywords if k.arg == "start_method"), None)
        return cls in facts["classes"] and not single and (start is None or (
            isinstance(start, ast.Constant) and start.value == "popen"))
    if strategy is None or (isinstance(strategy, ast.Constant) and strategy.value == "auto"):
        return facts.get("default_multi_device") == "ddp" and devices is not None and _several_devices(devices)
    return False


def ray_worker_function(index: ModuleIndex, call: Call) -> Optional[ast.AST]:
    """Round 22: the argument of `call` that Ray Train runs on every worker, when `call` hands one over:
    `TorchTrainer(train_loop_per_worker, ...)` (or `train_loop_per_worker=`), or the Ray 1.x
    `trainer.run(train_func, ...)` / `run_iterator(...)` of a `trainer = Trainer(backend="torch", ...)` imported from
    ray. Everything else of the script runs in the driver, one process (data/launchers.json `ray_train_workers`,
    ray-project/ray torch_trainer.py and trainer.py)."""
    facts = ray_train_workers()
    if not facts:
        return None

    def first(keyword: str) -> Optional[ast.AST]:
        given = next((k.value for k in call.node.keywords if k.arg == keyword), None)
        return given if given is not None else (call.node.args[0] if call.node.args else None)

    qual = call.qual or ""
    if qual.startswith("ray.") and qual.rsplit(".", 1)[-1] in facts.get("classes", ()):
        return first(facts.get("keyword", "train_loop_per_worker"))
    if call.name in facts.get("runner_methods", ()) and call.recv and "." not in call.recv:
        made = [a for a in index.assigns if a.targets == [call.recv] and a.call is not None]
        if made and all((a.call.qual or "").startswith("ray.") and (a.call.qual or "").rsplit(".", 1)[-1] in
                        facts.get("runner_classes", ()) for a in made):
            return first(facts.get("runner_keyword", "train_func"))
    return None
