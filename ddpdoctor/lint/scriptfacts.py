"""Facts the machine checks want from the training scripts of `check --script`, read from lint's own index
(analysis.ModuleIndex: its env_sets and calls), never by running the script.

- `env_sets`: environment variables the script sets to a literal (`os.environ["CUDA_VISIBLE_DEVICES"] = "3,2,1,0"`,
  `os.environ.setdefault(...)`, `os.environ.update(...)`, `os.putenv(...)`), with file and line. CUDA reads
  CUDA_VISIBLE_DEVICES from the process environment when it initialises, so a value the script sets before its
  first CUDA call is the one the job runs with, whatever the shell said (yqyao/SSD_Pytorch#4).
- `loader_workers`: the largest literal `num_workers=` of a DataLoader call, with file and line: each worker is a
  process of its own (torch/utils/data/dataloader.py _MultiProcessingDataLoaderIter), counted against ulimit -u and
  the cgroup's pids.max.
- `compiles`: torch.compile calls (Triton kernels will be compiled into Triton's cache: SYS007).
- `gpu_indices`: GPU ordinals the script names as literals - a 'cuda:N' string, `.cuda(N)`, `set_device(N)`,
  `device_ids=[...]`, the default of an argparse option whose flag names a gpu or device (`--gpu_ids`, default '1,3'),
  or a list of ints bound to a name that says GPU or DEVICE (`_C.DEVICE.TRAIN_DEVICES = [0, 1]`). CUDA numbers the
  visible devices from 0, so an ordinal at or past their count fails ('invalid device ordinal',
  'AssertionError: Invalid device id'; the reports of batches 62-63: DFDNet#7, SSD-Pytorch#10, mmskeleton#80).
- `late_env_sets`: CUDA_VISIBLE_DEVICES set (to any value, a literal or not) after a call that initialised CUDA in the
  same function, or at module level above it (`torch.cuda.is_available()`, `device_count()`, `set_device()`, a
  `.cuda()`...). The CUDA driver reads the variable once, when cuInit runs, and `is_available` runs the CUDA Runtime's
  cudaGetDeviceCount, "which in turn initializes the CUDA Driver API via cuInit" (pytorch/pytorch
  torch/cuda/__init__.py @cf30153c, is_available), so a later set changes nothing: the process keeps the GPUs it
  saw (KaiyangZhou/deep-person-reid#267: `gpu_devices=0` still ran on all four GPUs). Such a set is left out of
  `env_sets`.
- `world_args`: argparse options that size the job - `--world_size`, `--world-size`, `--nprocs`, `--nproc_per_node`,
  `--num_processes` - with a literal int default above 1, and `reads_world_env`: whether the script names the
  WORLD_SIZE variable anywhere (a script that reads it takes the launcher's count). A program that starts its own
  processes from such a value (mp.spawn(nprocs=args.world_size), init_process_group(world_size=...)) waits at the
  rendezvous for ranks that never start when the value exceeds what runs (OpenNMT/OpenNMT-py#1647: world_size 2
  with one GPU rank deadlocked at 0% GPU).
  Also Lightning's `Trainer(devices=N)` / `Trainer(gpus=N)` literals: a count N asks for ordinals 0..N-1, a list or
  "0,2" string for those (Lightning's device_parser; "You requested gpu: [0, ..., 6] But your machine only has:
  [0, 1]"), unless a literal non-GPU accelerator is given.
- `spawn_worlds` (check19): the processes the script starts itself and the world size it tells the process group -
  `torch.multiprocessing.spawn(fn, args, nprocs)` / `start_processes` with nprocs a literal int, a name bound once to
  one, or `torch.cuda.device_count()` (directly or through such a name), and `init_process_group(world_size=...)` with
  a literal int (or a name bound once to one). A group of N spawned processes told world_size=M != N never forms:
  with M < N the ranks from M on are outside it and block in init_process_group (pytorch/pytorch#62381: mp.spawn
  nprocs=2, world_size=1, rank 1 never returns); with M > N the store waits for ranks that never start until the
  timeout (torch/distributed/distributed_c10d.py init_process_group; torch/multiprocessing/spawn.py spawn). An init
  entry also keeps a literal `rank=` (every process running the line claims that rank) and a literal init_method URL
  (`tcp://127.0.0.1:33271`: rank 0 binds the store on its port, torch/distributed/rendezvous.py
  _tcp_rendezvous_handler); such an entry is kept even when world_size is not a literal. An init_method built from a
  'tcp://' string and the MASTER_PORT variable (os.environ / os.getenv, through the names it is assigned from) is kept
  as `url_env` {port, port_default, host, host_default} (NVIDIA/Megatron-LM#125).
- `env_rendezvous` (check19): init_process_group calls that rendezvous through the environment - no init_method and no
  store, or init_method "env://" - with the keywords they pass (`rank`, `world_size`) and the rendezvous variables the
  script sets itself. torch's env:// handler reads RANK and WORLD_SIZE unless given, and always MASTER_ADDR and
  MASTER_PORT ("environment variable MASTER_ADDR expected, but not set": torch/distributed/rendezvous.py
  _env_rendezvous_handler @cf30153c), which only a launcher sets (NVIDIA/apex#99).
- `strict_parse_args`: `parser.parse_args()` calls that read sys.argv (ENV019: a script that takes no local-rank argument
  still receives the one the old torch.distributed.launch passes, and argparse exits on it).
- `node_args`: Lightning's `Trainer(num_nodes=N)` with a literal int, as lint.configfacts reads it from a config file
  (ENV007 judges both against the SLURM allocation's nodes: Lightning-AI/pytorch-lightning#10098).
- `precision`, `attention`, `backends` (what the script asks of the machine; checks judge them against the GPU and
  package facts: SET002, GPU032, PKG005): `precision` - a literal `bf16=True` / `fp16=True` / `tf32=True` keyword
  (transformers TrainingArguments and its subclasses), `mixed_precision="bf16"|"fp8"` (accelerate's Accelerator),
  `precision="bf16-mixed"|"transformer-engine"...` (Lightning's Trainer/Fabric), `dtype=torch.bfloat16` in an autocast
  call, a torch.float8_* dtype or transformer-engine's fp8_autocast; `attention` - attn_implementation=
  "flash_attention_2"/"flash_attention_3"/"sdpa", use_flash_attention_2=True, an import of flash_attn; `backends` - the
  literal backend of init_process_group (first argument or backend=). A precision keyword is read only off the calls
  that take it (ddpdoctor/data/precision_calls.json, with sources: TrainingArguments and trl's configs for
  bf16/fp16/tf32, accelerate's Accelerator for mixed_precision, Lightning's Trainer/Fabric for precision; the call's
  last name, unresolved). `precision` also holds the model loaded or cast in bfloat16 (`load`: from_pretrained's
  torch_dtype/dtype, `.to(torch.bfloat16)`, `.bfloat16()`), and values reached through a name the file binds once
  (`bf16 = True`), an argparse option's literal default (`args.bf16`) or a conditional dtype whose test does not ask
  the GPU (`torch.bfloat16 if args.x else torch.float16`, said 'when args.x'; one testing is_bf16_supported() asks
  for nothing): the `what` says through which name. `extension_builds`: torch.utils.cpp_extension load()/load_inline()
  calls (a CUDA extension compiled when the script runs, with the local toolkit: PKG014). `triton_libraries`: imports
  of packages whose own kernels are Triton's (data/triton_libraries.json: Unsloth, Liger Kernel, flash-attn's Triton
  ops), judged by GPU032 as torch.compile is. `cuda_uses`: the first places the script puts work on a CUDA device
  (a "cuda"/"cuda:N" string, a `.cuda()` call): torch raises "Torch not compiled with CUDA enabled" there under a CPU
  build, and finds no device on a machine without a usable NVIDIA driver (GPU001, GPU023). `mmcv_ops`: imports of
  OpenMMLab's mmcv.ops, which load the compiled mmcv._ext at import (PKG020 judges them against the installed mmcv).
- `global_rank_devices`: the places the script picks its GPU by the GLOBAL rank - `set_device(r)`, `.cuda(r)`,
  `.to(r)`, `torch.device("cuda", r)`, `device_ids=[r]` where r is `dist.get_rank()` / `int(os.environ["RANK"])` or a
  name (or self attribute) bound only to one of those in the file. On one node the global rank is the local one; on
  the second node rank N asks for cuda:N on a machine with fewer GPUs: 'invalid device ordinal'
  (meta-llama/llama-cookbook#90: llama_finetuning.py's set_device(rank), fixed by local_rank).
Only literals count (but for `late_env_sets`): a value computed at run time is not guessed.
"""
from __future__ import annotations

import ast
import functools
import json
import os
import re
from typing import Iterable, List, Optional, Tuple

from ddpdoctor.lint.analysis import ModuleIndex
from ddpdoctor.lint.source import InputProblem, Script, collect, read

ENV_NAMES = ("CUDA_VISIBLE_DEVICES",)  # the variables a machine check judges from the script
_CUDA_N = re.compile(r"^cuda:(\d+)$")
_GPU_WORD = re.compile(r"gpu|device", re.I)
_GPU_COUNT = re.compile(r"num_?(gpu|device)s?|n_?gpus?|ngpus?|gpu_?count", re.I)  # a count N: ordinals 0..N-1


def _ints(node) -> List[int]:
    """The non-negative ints a literal holds: 1, [0, 1], (1, 3), '1,3'; [] for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return [node.value] if node.value >= 0 else []
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.fullmatch(r"\s*\d+(\s*,\s*\d+)*\s*", node.value):
        return [int(x) for x in node.value.split(",")]
    if isinstance(node, (ast.List, ast.Tuple)):
        out = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, int)
               and not isinstance(e.value, bool) and e.value >= 0]
        return out if len(out) == len(node.elts) else []
    return []


def _name_of(target) -> str:
    if isinstance(target, ast.Name):
        return target.id
    if isinstance(target, ast.Attribute):
        return target.attr
    return ""


LOCAL_RANK_FLAGS = ("--local_rank", "--local-rank")


def strict_parses(tree: ast.AST, path: str) -> list:
    """[{"path", "line"}] of `<parser>.parse_args()` calls with no argument list: argparse then reads sys.argv and exits
    with 'error: unrecognized arguments: ...' on an option it does not know (Python's argparse, parse_args)."""
    return [{"path": path, "line": node.lineno} for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "parse_args"
            and not node.args and not node.keywords]


def local_rank_args(tree: ast.AST, path: str) -> Tuple[list, bool, bool]:
    """([{"flags", "path", "line"}] of the argparse options spelled --local_rank / --local-rank, whether the file
    calls parse_known_args, whether it names the LOCAL_RANK variable). torch.distributed.launch passes the local rank as an argument unless --use-env:
    `--local_rank=N` before torch 2.0, `--local-rank=N` since (pytorch/pytorch torch/distributed/launch.py
    @00fb0a9c `cmd.append("--local_rank={}")`; @271cacccab21 docstring: "If only "--local_rank" is provided, the
    launcher will trigger an error: error: unrecognized arguments: --local-rank=<rank>")."""
    found: list = []
    known = reads_env = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value == "LOCAL_RANK":
            reads_env = True
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else (func.id if isinstance(func, ast.Name) else "")
        known = known or name == "parse_known_args"
        if name == "add_argument":
            flags = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            if any(f in LOCAL_RANK_FLAGS for f in flags):
                found.append({"flags": flags, "path": path, "line": node.lineno})
    return found, known, reads_env


def _tree_facts(tree: ast.AST, path: str) -> Tuple[list, list, bool]:
    """(gpu_indices, world_args, reads_world_env) of one parsed file, in one walk of its tree (see the module doc)."""
    out: list = []
    worlds: list = []
    reads_world = False

    def add(indices, node, what):
        out.extend({"index": i, "path": path, "line": getattr(node, "lineno", 0), "what": what} for i in indices)

    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            reads_world = reads_world or node.value == "WORLD_SIZE"
            m = _CUDA_N.match(node.value)
            if m:
                add([int(m.group(1))], node, repr(node.value))
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else (func.id if isinstance(func, ast.Name) else "")
            if name in ("cuda", "set_device") and node.args and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, int):
                add(_ints(node.args[0]), node, f"{name}({node.args[0].value})")
            for k in node.keywords:
                if k.arg == "device_ids":
                    add(_ints(k.value), node, "device_ids=" + ast.unparse(k.value))
            if name == "add_argument" and any(isinstance(a, ast.Constant) and isinstance(a.value, str)
                                              and _GPU_WORD.search(a.value) for a in node.args):
                default = next((k.value for k in node.keywords if k.arg == "default"), None)
                if default is not None:
                    flag = next(a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str))
                    values = _ints(default)
                    if _GPU_COUNT.search(flag):
                        values = [max(values) - 1] if values and max(values) > 0 else []
                    add(values, node, f"{flag} default {ast.unparse(default)}")
            if name == "add_argument" and isinstance(func, ast.Attribute):
                world = _world_arg(node, path)
                if world is not None:
                    worlds.append(world)
        elif isinstance(node, ast.Assign) and isinstance(node.value, (ast.List, ast.Tuple)):
            for t in node.targets:
                if _GPU_WORD.search(_name_of(t)) and not _GPU_COUNT.search(_name_of(t)):
                    add(_ints(node.value), node, f"{ast.unparse(t)} = {ast.unparse(node.value)}")
    return out, worlds, reads_world


# calls that initialise CUDA in the process (cuInit): torch/cuda/__init__.py @cf30153c (is_available ->
# _cuda_getDeviceCount; device_count, set_device, current_device, get_device_* and synchronize call _lazy_init or
# the runtime). Attribute calls `.cuda()` move a tensor or module to a GPU, which initialises CUDA too.
# `import torch` is not one of them, in any release: torch.cuda "is lazily initialized, so you can always import it"
# (its module docstring from torch 1.3.0 through 2.x, pytorch.org/docs/<v>/_modules/torch/cuda.html; _lazy_init runs
# on the first CUDA call). A library that initialises CUDA at its own import (pytorch/pytorch#39918's tensorboard
# import) is that library's doing, not torch's: not modelled.
CUDA_INIT_QUALS = frozenset("torch.cuda." + n for n in (
    "is_available", "device_count", "set_device", "current_device", "get_device_name", "get_device_properties",
    "get_device_capability", "synchronize", "mem_get_info", "init", "empty_cache"))


def _cuda_init_before(index: ModuleIndex, env_set) -> Optional[dict]:
    """The first call that initialised CUDA before `env_set` runs: earlier in its own scope, or at module level
    above it when the set is inside a function (module code runs when the file is imported); None if none."""
    line = env_set.node.lineno
    best = None
    for call in index.calls:
        if call.line >= line:
            continue
        if not (call.scope is env_set.scope or (call.scope is index.module and env_set.scope is not index.module
                                                and call.ctx.module_level)):
            continue
        if call.qual in CUDA_INIT_QUALS or (call.name == "cuda" and isinstance(call.node.func, ast.Attribute)
                                            and call.recv != "torch"):
            if best is None or call.line < best.line:
                best = call
    if best is None:
        return None
    return {"line": best.line, "call": (best.qual or best.text or "cuda") + "()"}


SPAWN_QUALS = ("torch.multiprocessing.spawn", "torch.multiprocessing.start_processes",
               "torch.multiprocessing.spawn.spawn", "torch.multiprocessing.spawn.start_processes")
INIT_PG_QUALS = ("torch.distributed.init_process_group", "torch.distributed.distributed_c10d.init_process_group")
DEVICE_COUNT_QUALS = ("torch.cuda.device_count",)


def _bound_once(tree: ast.AST) -> dict:
    """{name: value node} for the plain names the file assigns exactly once (any scope)."""
    seen: dict = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    seen.setdefault(t.id, []).append(node.value)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and isinstance(node.target, ast.Name):
            seen.setdefault(node.target.id, []).append(node.value if isinstance(node, ast.AnnAssign) else None)
    return {k: v[0] for k, v in seen.items() if len(v) == 1 and v[0] is not None}


def _size_of(index: ModuleIndex, node: Optional[ast.AST], scope, once: dict, depth: int = 0):
    """(int or None, how): a literal int; "device_count" for torch.cuda.device_count(); through a name bound once."""
    if node is None or depth > 2:
        return None, None
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value, "literal"
    if isinstance(node, ast.Call) and index.qual(node.func, scope) in DEVICE_COUNT_QUALS:
        return None, "device_count"
    if isinstance(node, ast.Name) and node.id in once:
        value, how = _size_of(index, once[node.id], scope, once, depth + 1)
        return value, (f"{how} via {node.id}" if how else None)
    return None, None


def _assigned_values(tree: ast.AST) -> dict:
    """{name: [value nodes]} for every plain-name assignment in the file (=, +=, annotated), any scope."""
    out: dict = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out.setdefault(t.id, []).append(node.value)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and isinstance(node.target, ast.Name) and node.value:
            out.setdefault(node.target.id, []).append(node.value)
    return out


def _env_read(node: ast.AST) -> Optional[tuple]:
    """(variable, default or None) for os.environ['X'], os.environ.get('X', d), os.getenv('X', d); else None."""
    def text(n):
        return n.value if isinstance(n, ast.Constant) and isinstance(n.value, (str, int)) else None
    if isinstance(node, ast.Subscript) and ast.unparse(node.value).endswith("environ"):
        key = text(node.slice)
        return (key, None) if isinstance(key, str) else None
    if isinstance(node, ast.Call) and node.args and ast.unparse(node.func).endswith(("getenv", "environ.get")):
        key = text(node.args[0])
        default = text(node.args[1]) if len(node.args) > 1 else None
        return (key, None if default is None else str(default)) if isinstance(key, str) else None
    return None


def _env_url(node: Optional[ast.AST], bindings: dict) -> Optional[dict]:
    """{"port": "MASTER_PORT", "port_default", "host": "MASTER_ADDR"|None, "host_default"} when an init_method that is
    not a literal is built from a 'tcp://' string and the MASTER_PORT variable (through the names it is assigned
    from, += included: Megatron-LM's `init_method = 'tcp://'; init_method += master_ip + ':' + master_port`)."""
    if node is None:
        return None
    todo, seen_names, has_tcp, env = [node], set(), False, {}
    while todo and len(seen_names) < 24:
        for n in ast.walk(todo.pop()):
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.startswith("tcp://"):
                has_tcp = True
            read = _env_read(n)
            if read:
                env.setdefault(read[0], read[1])
            if isinstance(n, ast.Name) and n.id not in seen_names:
                seen_names.add(n.id)
                todo += bindings.get(n.id, [])[:4]
    if not has_tcp or "MASTER_PORT" not in env:
        return None
    return {"port": "MASTER_PORT", "port_default": env["MASTER_PORT"],
            "host": "MASTER_ADDR" if "MASTER_ADDR" in env else None, "host_default": env.get("MASTER_ADDR")}


def spawn_worlds(index: ModuleIndex, tree: ast.AST, path: str) -> list:
    """`spawn_worlds` entries (see the module doc): {"kind": "spawn"|"init", "size": int|None, "how", "path", "line"}."""
    once = _bound_once(tree)
    bindings = _assigned_values(tree)
    out = []
    for call in index.calls_named(*SPAWN_QUALS):
        size, how = _size_of(index, call.arg(2, "nprocs"), call.scope, once)
        if how:
            out.append({"kind": "spawn", "size": size, "how": how, "path": path, "line": call.line,
                        "what": ast.unparse(call.node)[:120]})
    for call in index.calls_named(*INIT_PG_QUALS):
        size, how = _size_of(index, call.kw("world_size"), call.scope, once)
        rank, rank_how = _size_of(index, call.kw("rank"), call.scope, once)
        method = call.arg(1, "init_method")
        url = method.value if isinstance(method, ast.Constant) and isinstance(method.value, str) else None
        url_env = None if url or method is None else _env_url(method, bindings)
        if (how and size is not None) or url or url_env:
            row = {"kind": "init", "size": size, "how": how, "path": path, "line": call.line,
                   "what": ast.unparse(call.node)[:120]}
            if rank is not None:
                row["rank"] = rank  # a literal rank: every process that runs this line claims it
            if url:
                row["url"] = url  # init_method='tcp://127.0.0.1:33271': the store's address, its port bound by rank 0
            if url_env:
                row["url_env"] = url_env  # 'tcp://' + MASTER_ADDR + ':' + MASTER_PORT from the environment
            out.append(row)
    return out


RENDEZVOUS_ENV = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE")


def env_rendezvous(index: ModuleIndex, path: str) -> list:
    """`env_rendezvous` entries (see the module doc): {"path", "line", "passes": [...], "script_sets": [...]}."""
    sets = sorted({e.name for e in index.env_sets} & set(RENDEZVOUS_ENV))
    out = []
    for call in index.calls_named(*INIT_PG_QUALS):
        if call.kw("store") is not None or any(isinstance(a, ast.Starred) for a in call.node.args) \
                or any(k.arg is None for k in call.node.keywords):
            continue
        method = call.arg(1, "init_method")
        if method is not None and not (isinstance(method, ast.Constant) and method.value in ("env://", None)):
            continue
        passes = sorted(k for k in ("rank", "world_size") if call.kw(k) is not None)
        out.append({"path": path, "line": call.line, "passes": passes, "script_sets": sets})
    return out


_WORLD_FLAG = re.compile(r"^-+(world[_-]?size|n_?procs?|nproc[_-]per[_-]node|num[_-]?process(es)?)$", re.I)


def _world_arg(node: ast.Call, path: str) -> Optional[dict]:
    """An argparse option sizing the job, with a literal int default above 1 (see the module doc), or None."""
    flags = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    flag = next((f for f in flags if _WORLD_FLAG.match(f)), None)
    default = next((k.value for k in node.keywords if k.arg == "default"), None)
    if flag and isinstance(default, ast.Constant) and isinstance(default.value, int) \
            and not isinstance(default.value, bool) and default.value > 1:
        return {"flag": flag, "default": default.value, "path": path, "line": node.lineno}
    return None


# Lightning's device arguments (Trainer(devices=...), the older Trainer(gpus=...)): an int N asks for GPUs 0..N-1, a
# list or a "0,2" string for those ordinals, "N" (no comma) for N GPUs; -1, "auto", 0 and None ask for none in
# particular (Lightning-AI/pytorch-lightning src/lightning/fabric/utilities/device_parser.py @eddba2fc,
# _normalize_parse_gpu_string_input / _normalize_parse_gpu_input_to_list: `return list(range(gpus))`; then
# _sanitize_gpu_ids: "You requested gpu: [...] But your machine only has: [...]")
_NOT_GPU_ACCELERATORS = {"cpu", "tpu", "mps", "hpu", "ipu", "xla"}


def _trainer_calls(tree: ast.AST):
    """Every call of a name or attribute `Trainer` (pytorch_lightning / lightning Trainer(...), however imported)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else (func.id if isinstance(func, ast.Name) else "")
            if name == "Trainer":
                yield node


def trainer_gpu_indices(tree: ast.AST, path: str) -> list:
    """gpu_indices entries for literal `Trainer(devices=...)` / `Trainer(gpus=...)` (pytorch_lightning / lightning), unless
    a literal accelerator other than a GPU one is given; a count N gives the highest ordinal it asks for, N-1."""
    out = []
    for node in _trainer_calls(tree):
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        acc = kw.get("accelerator")
        if isinstance(acc, ast.Constant) and isinstance(acc.value, str) and acc.value.lower() in _NOT_GPU_ACCELERATORS:
            continue
        for arg in ("devices", "gpus"):
            value = kw.get(arg)
            if value is None:
                continue
            count = value.value if isinstance(value, ast.Constant) and isinstance(value.value, int) \
                and not isinstance(value.value, bool) else None
            if isinstance(value, ast.Constant) and isinstance(value.value, str) and value.value.strip().isdigit():
                count = int(value.value)
            indices = ([count - 1] if count > 0 else []) if count is not None else _ints(value)
            out.extend({"index": i, "path": path, "line": node.lineno,
                        "what": f"Trainer({arg}={ast.unparse(value)})"} for i in indices)
    return out


def trainer_node_args(tree: ast.AST, path: str) -> list:
    """`Trainer(num_nodes=<int literal>)` calls (pytorch_lightning / lightning Trainer), as node_args entries."""
    out = []
    for node in _trainer_calls(tree):
        for k in node.keywords:
            if k.arg == "num_nodes" and isinstance(k.value, ast.Constant) and isinstance(k.value.value, int) \
                    and not isinstance(k.value.value, bool) and k.value.value > 0:
                out.append({"flag": "Trainer(num_nodes=...)", "value": k.value.value, "path": path,
                            "line": node.lineno, "source": "script"})
    return out


_PRECISION_WORDS = (("bf16", "bf16"), ("bfloat16", "bf16"), ("fp8", "fp8"), ("transformer-engine", "fp8"),
                    ("transformer_engine", "fp8"), ("16", "fp16"), ("fp16", "fp16"), ("float16", "fp16"))


def _precision_word(value: str):
    """'bf16' / 'fp8' / 'fp16' for a precision string (accelerate's PrecisionType, Lightning's _PRECISION_INPUT:
    "bf16-mixed", "bf16-true", "16-mixed", "transformer-engine"), else None."""
    word = value.strip().lower()
    for prefix, precision in _PRECISION_WORDS:
        if word == prefix or word.startswith(prefix + "-") or word.startswith(prefix + "_"):
            return precision
    return None


_CALLS_FILE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "precision_calls.json")


@functools.lru_cache(maxsize=1)
def precision_calls() -> dict:
    """ddpdoctor/data/precision_calls.json: which calls' keywords ask for a precision, with their sources."""
    with open(_CALLS_FILE, encoding="utf-8") as fh:
        return json.load(fh)


@functools.lru_cache(maxsize=1)
def triton_libraries() -> tuple:
    """ddpdoctor/data/triton_libraries.json: packages whose kernels are Triton's, with sources."""
    path = os.path.join(os.path.dirname(_CALLS_FILE), "triton_libraries.json")
    with open(path, encoding="utf-8") as fh:
        return tuple(json.load(fh)["libraries"])


def _reads_keyword(key: str, name: str) -> bool:
    """Whether a call named `name` takes the precision keyword `key` (precision_calls.json)."""
    table = precision_calls()["keywords"]
    entry = table.get(key) or {}
    entry = table.get(entry.get("same_as"), entry) if entry.get("same_as") else entry
    return name in entry.get("calls", ()) or any(name.endswith(s) for s in entry.get("suffixes", ()))


def _constants(tree: ast.AST) -> dict:
    """{name: value node} for the names the file binds exactly once (`bf16 = True`, `dtype = torch.bfloat16 if c
    else torch.float16`), and {attr: default} for argparse options with a literal default (`args.bf16` of
    `add_argument("--bf16", default=True)`); a name bound more than once is left out (which binding runs is not
    guessed)."""
    seen: dict = {}
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AnnAssign, ast.AugAssign, ast.For)) else []
        for t in targets:
            if isinstance(t, ast.Name):
                value = getattr(node, "value", None) if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
                seen.setdefault(t.id, []).append(value)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            flag = next((a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
                         and a.value.startswith("--")), None)
            kw = {k.arg: k.value for k in node.keywords if k.arg}
            dest = kw.get("dest")
            name = dest.value if isinstance(dest, ast.Constant) else flag.lstrip("-").replace("-", "_") if flag else None
            if name and "default" in kw:
                seen.setdefault("args." + name, []).append(kw["default"])
    return {k: v[0] for k, v in seen.items() if len(v) == 1 and v[0] is not None}


def _resolve(node, consts: dict, depth: int = 0):
    """(the value node behind `node`, the name it came through or None): a Name bound once, `args.X` of an argparse
    option with a literal default."""
    key = node.id if isinstance(node, ast.Name) else (
        "args." + node.attr if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) else None)
    if key is None or key not in consts or depth > 3:
        return node, None
    value, _ = _resolve(consts[key], consts, depth + 1)
    return value, ast.unparse(node)


def _guarded(test) -> bool:
    """Whether a condition asks the GPU itself (precision_calls.json guards)."""
    names = set(precision_calls()["guards"]["names"])
    return any((isinstance(n, ast.Attribute) and n.attr in names) or (isinstance(n, ast.Name) and n.id in names)
               for n in ast.walk(test))


def _bf16_dtype(node, consts: dict):
    """(True, how) when `node` is torch.bfloat16 / "bfloat16" (through a name bound once), or a conditional one whose
    test does not ask the GPU (`torch.bfloat16 if args.x else torch.float16`: 'when <test>'); (False, None) else."""
    value, via = _resolve(node, consts)
    how = f" (through {via})" if via else ""
    if isinstance(value, ast.IfExp):
        branches = [b for b in (value.body, value.orelse) if _bf16_dtype(b, consts)[0]]
        if branches and not _guarded(value.test):
            return True, how + f" (when {ast.unparse(value.test)})" if branches[0] is value.body else \
                how + f" (unless {ast.unparse(value.test)})"
        return False, None
    if (isinstance(value, ast.Attribute) and value.attr == "bfloat16") or (
            isinstance(value, ast.Constant) and value.value == "bfloat16"):
        return True, how
    return False, None


_CUDA_DEVICE = re.compile(r"^cuda(:\d+)?$")
MAX_CUDA_USES = 5  # the first few places the script puts work on a CUDA device (GPU001/GPU023 name one)


def requests_of(tree: ast.AST, path: str) -> dict:
    """{"precision", "attention", "backends"} of one parsed file (see the module doc): what it asks of the machine."""
    precision: list = []
    attention: list = []
    backends: list = []
    builds: list = []
    tritons: list = []
    cuda_uses: list = []
    mmcv_ops: list = []
    consts = _constants(tree)
    loaders = set()  # names bound by `from torch.utils.cpp_extension import load, load_inline`

    def at(node, what, **kw):
        return dict(kw, path=path, line=getattr(node, "lineno", 0), what=what)

    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if isinstance(node, ast.ImportFrom) and node.module == "torch.utils.cpp_extension":
                loaders |= {a.asname or a.name for a in node.names if a.name in ("load", "load_inline")}
            for lib in triton_libraries():
                mod = lib["module"]
                hit = next((m for m in mods if m == mod or m.startswith(mod + ".")), None)
                if hit is None and isinstance(node, ast.ImportFrom) and node.module and mod.startswith(node.module + "."):
                    hit = next((f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" == mod), None)
                if hit:
                    tritons.append(at(node, f"import {hit}", library=lib["name"]))
            ops = _mmcv_ops_import(node, mods)
            if ops:
                mmcv_ops.append(at(node, ops, package="mmcv"))
            if any(m == "flash_attn" or m.startswith("flash_attn.") for m in mods):
                attention.append(at(node, "import " + next(m for m in mods if m.startswith("flash_attn")),
                                    kernel="flash_attention_2"))
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch" \
                and node.attr.startswith("float8_"):
            precision.append(at(node, f"torch.{node.attr}", precision="fp8"))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _CUDA_DEVICE.match(node.value):
            if len(cuda_uses) < MAX_CUDA_USES:
                cuda_uses.append(at(node, repr(node.value)))
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else (func.id if isinstance(func, ast.Name) else "")
            if name == "cuda" and isinstance(func, ast.Attribute) and ast.unparse(func.value) != "torch" \
                    and len(cuda_uses) < MAX_CUDA_USES:
                cuda_uses.append(at(node, f"{ast.unparse(func.value)[:40]}.cuda()"))
            kw = {k.arg: k.value for k in node.keywords if k.arg}
            resolved = {k: _resolve(v, consts) for k, v in kw.items()}
            lit = {k: v.value for k, (v, _) in resolved.items() if isinstance(v, ast.Constant)}
            via = {k: f" (through {w})" for k, (_, w) in resolved.items() if w}
            for key in ("bf16", "fp16", "tf32"):
                if lit.get(key) is True and _reads_keyword(key, name):
                    precision.append(at(node, f"{name}({key}=True)" + via.get(key, ""), precision=key))
            for key in ("mixed_precision", "precision"):
                if isinstance(lit.get(key), (str, int)) and not isinstance(lit.get(key), bool) \
                        and _reads_keyword(key, name):
                    p = _precision_word(str(lit[key]))
                    if p in ("bf16", "fp8"):
                        precision.append(at(node, f"{name}({key}={lit[key]!r})" + via.get(key, ""), precision=p))
            if name == "fp8_autocast" and lit.get("enabled", True) is not False:
                precision.append(at(node, f"{name}(...)", precision="fp8"))
            if "autocast" in name and "dtype" in kw:
                bf16, how = _bf16_dtype(kw["dtype"], consts)
                if bf16:
                    precision.append(at(node, f"{name}(dtype=torch.bfloat16){how}", precision="bf16"))
            elif "autocast" not in name:
                # the model itself loaded or cast in bfloat16 (precision_calls.json load_dtype)
                loads = [(k, kw[k]) for k in precision_calls()["load_dtype"]["keywords"] if k in kw]
                if name == "to" and node.args:
                    loads.append(("", node.args[0]))
                for key, value in loads:
                    bf16, how = _bf16_dtype(value, consts)
                    if bf16:
                        shown = f"{key}=torch.bfloat16" if key else "torch.bfloat16"
                        precision.append(at(node, f"{name}({shown}){how}", precision="bf16", load=True))
                        break
                if name == "bfloat16" and isinstance(func, ast.Attribute) and not node.args:
                    precision.append(at(node, f"{ast.unparse(func.value)[:40]}.bfloat16()", precision="bf16", load=True))
            impl, impl_via = resolved.get("attn_implementation", (None, None))
            impl = impl.value if isinstance(impl, ast.Constant) else None
            if isinstance(impl, str) and impl in ("flash_attention_2", "flash_attention_3", "sdpa"):
                attention.append(at(node, f"{name}(attn_implementation={impl!r})" + via.get("attn_implementation", ""),
                                    kernel=impl))
            if lit.get("use_flash_attention_2") is True:
                attention.append(at(node, f"{name}(use_flash_attention_2=True)", kernel="flash_attention_2"))
            if (isinstance(func, ast.Attribute) and name in ("load", "load_inline")
                    and ast.unparse(func.value).endswith("cpp_extension")) or (
                    isinstance(func, ast.Name) and name in loaders):
                builds.append(at(node, f"torch.utils.cpp_extension.{name}(...)"))
            if name == "init_process_group":
                b = _resolve(node.args[0], consts)[0] if node.args else resolved.get("backend", (None,))[0]
                if isinstance(b, ast.Constant) and isinstance(b.value, str):
                    backends.append(at(node, f"init_process_group({b.value!r})", backend=b.value.lower()))
    return {"precision": precision, "attention": attention, "backends": backends, "extension_builds": builds,
            "triton_libraries": tritons, "cuda_uses": sorted(cuda_uses, key=lambda r: r["line"]), "mmcv_ops": mmcv_ops}


def _mmcv_ops_import(node, mods) -> str:
    """The import text when `node` imports OpenMMLab's mmcv.ops (`import mmcv.ops`, `from mmcv.ops import
    DeformConv2d`, `from mmcv.ops.x import y`, `from mmcv import ops`), else "". open-mmlab/mmcv mmcv/ops/__init__.py
    imports every op module, and each loads the compiled `mmcv._ext` through mmcv/utils/ext_loader.py
    (`importlib.import_module('mmcv._ext')`) at import: under an mmcv without it, the import itself fails with
    "No module named 'mmcv._ext'" (PKG020)."""
    if isinstance(node, ast.Import):
        hit = next((m for m in mods if m == "mmcv.ops" or m.startswith("mmcv.ops.")), None)
        return f"import {hit}" if hit else ""
    module = node.module or ""
    if getattr(node, "level", 0):
        return ""  # a relative import is the project's own package, not mmcv
    if module == "mmcv.ops" or module.startswith("mmcv.ops."):
        return f"from {module} import " + ", ".join(a.name for a in node.names[:3])
    if module == "mmcv" and any(a.name == "ops" for a in node.names):
        return "from mmcv import ops"
    return ""


def _how(node) -> str:
    if isinstance(node, ast.Call):
        func = node.func
        return func.attr if isinstance(func, ast.Attribute) else "call"
    return "assign"


def _setting_sets(index: ModuleIndex, path: str) -> list:
    """The catalogued settings (facts.settings) the script assigns a literal to in os.environ, other than the variables
    judged from env_sets (CUDA_VISIBLE_DEVICES): `os.environ["CUDA_LAUNCH_BLOCKING"] = "1"` left in a train.py is the
    same debugging setting as one exported in the job script (SET004 judges both)."""
    from ddpdoctor.facts import settings as catalog

    out = []
    for e in index.env_sets:
        if e.name in ENV_NAMES or catalog.lookup(e.name) is None:
            continue
        if isinstance(e.value, ast.Constant) and isinstance(e.value.value, (str, int)) and not isinstance(e.value.value, bool):
            out.append({"name": e.name, "value": str(e.value.value), "path": path, "line": e.node.lineno,
                        "how": _how(e.node)})
    return out


def _debug_calls(index: ModuleIndex, path: str) -> list:
    """Calls that switch a catalogued debugging mode on (facts.settings.call_entries: torch.autograd.set_detect_anomaly
    with a literal argument, the detect_anomaly() context with none): {call, value, path, line}."""
    from ddpdoctor.facts import settings as catalog

    out = []
    for name in catalog.call_entries():
        for call in index.by_qual.get(name, ()):
            arg = call.arg(0) if call.node.args else call.kw("mode")
            if arg is None:
                value = "True" if not call.node.args and not call.node.keywords else None
            elif isinstance(arg, ast.Constant) and isinstance(arg.value, (bool, int, str)):
                value = str(arg.value)
            else:
                value = None  # a variable: whether it is on is not known here
            if value is not None:
                out.append({"call": name, "value": value, "path": path, "line": call.line})
    return out


# The variables torch's elastic agent sets in every worker's environment (torch/distributed/elastic/agent/server/
# local_elastic_agent.py @cf30153c, LocalElasticAgent._start_workers: worker_env, and LOCAL_RANK beside it); the
# launchers built on it (torchrun, python -m torch.distributed.launch --use-env, accelerate, deepspeed's launch.py)
# set them too. Outside a launcher none of them exists.
LAUNCHER_ENV = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT")


def _environ(node) -> bool:
    """`os.environ` or a bare `environ` (from os import environ)."""
    return (isinstance(node, ast.Attribute) and node.attr == "environ" and isinstance(node.value, ast.Name)
            and node.value.id == "os") or (isinstance(node, ast.Name) and node.id == "environ")


def _env_read_guarded(chain: list, name: str) -> bool:
    """Whether a read sits under a test that names the variable or os.environ (`if "RANK" in os.environ:`,
    `x if "RANK" in os.environ else 0`) or in a try whose handlers catch a KeyError (KeyError, LookupError,
    Exception, BaseException or a bare except)."""
    for node in chain:
        if isinstance(node, (ast.If, ast.IfExp, ast.While)):
            text = ast.unparse(node.test)
            if name in text or "environ" in text:
                return True
        if isinstance(node, ast.Try):
            for h in node.handlers:
                caught = [] if h.type is None else (h.type.elts if isinstance(h.type, ast.Tuple) else [h.type])
                if h.type is None or any(isinstance(c, ast.Name) and c.id in ("KeyError", "LookupError", "Exception",
                                                                               "BaseException") for c in caught):
                    return True
    return False


def launcher_env_reads(tree: ast.AST, path: str) -> list:
    """{name, path, line} of each unguarded `os.environ["LOCAL_RANK"]` read (a subscript, which raises KeyError when
    the variable is missing; `.get(name, default)` does not) of a variable only a launcher sets (LAUNCHER_ENV)."""
    out = []

    def walk(node, chain):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _environ(node.value):
            key = node.slice
            if isinstance(key, ast.Constant) and key.value in LAUNCHER_ENV and not _env_read_guarded(chain, key.value):
                out.append({"name": key.value, "path": path, "line": node.lineno})
        for child in ast.iter_child_nodes(node):
            walk(child, chain + [node] if isinstance(node, (ast.If, ast.IfExp, ast.While, ast.Try)) else chain)

    walk(tree, [])
    return out


def _env_rank_read(node) -> bool:
    """`os.environ["RANK"]`, `os.environ.get("RANK", ...)`, `os.getenv("RANK", ...)`."""
    if isinstance(node, ast.Subscript) and _environ(node.value):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "RANK"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args \
            and isinstance(node.args[0], ast.Constant) and node.args[0].value == "RANK":
        f = node.func
        return (f.attr == "get" and _environ(f.value)) or (f.attr == "getenv" and isinstance(f.value, ast.Name)
                                                            and f.value.id == "os")
    return False


def _global_rank_expr(node) -> Optional[str]:
    """The words for an expression that is the process's global rank, or None: `dist.get_rank()` (no group),
    `int(os.environ["RANK"])` and its .get/getenv forms."""
    if isinstance(node, ast.Call) and not node.args and not node.keywords:
        f = node.func
        if (isinstance(f, ast.Attribute) and f.attr == "get_rank") or (isinstance(f, ast.Name) and f.id == "get_rank"):
            return ast.unparse(node)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "int" and len(node.args) == 1 \
            and _env_rank_read(node.args[0]):
        return ast.unparse(node)
    return None


def _scope_nodes(scope) -> Iterable[ast.AST]:
    """The nodes of one scope (a module or a function body), not descending into nested functions or classes'
    methods (they are scopes of their own)."""
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))


def _bindings(nodes) -> Tuple[dict, set]:
    """({target text: rank words} of assignments to a global-rank expression, {targets assigned anything else})."""
    bound: dict = {}
    other: set = set()
    for node in nodes:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        elif isinstance(node, (ast.AugAssign, ast.For, ast.With, ast.NamedExpr)):
            targets = [getattr(node, "target", None)] + [i.optional_vars for i in getattr(node, "items", [])]
            other.update(ast.unparse(t) for t in targets if isinstance(t, (ast.Name, ast.Attribute)))
            continue
        else:
            continue
        rank = _global_rank_expr(value)
        for t in targets:
            if isinstance(t, (ast.Name, ast.Attribute)):
                if rank:
                    bound.setdefault(ast.unparse(t), rank)
                else:
                    other.add(ast.unparse(t))
    return bound, other


def global_rank_devices(tree: ast.AST, path: str) -> list:
    """{path, line, what, rank} of the calls that choose a GPU by the global rank (see the module doc): the rank
    expression itself, or a name the same scope (or the module, unless a parameter shadows it) binds to nothing but
    such an expression, or a `self.x` attribute the file binds only so."""
    scopes = [tree] + [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    per = {id(s): _bindings(list(_scope_nodes(s))) for s in scopes}
    module_bound, module_other = per[id(tree)]
    attrs: dict = {}
    attr_other: set = set()
    for bound, other in per.values():
        attrs.update({k: v for k, v in bound.items() if "." in k})
        attr_other |= {k for k in other if "." in k}
    out = []
    for scope in scopes:
        bound, other = per[id(scope)]
        params = ({a.arg for a in ast.walk(scope.args) if isinstance(a, ast.arg)}
                  if not isinstance(scope, ast.Module) else set())

        def rank_of(arg) -> Optional[str]:
            direct = _global_rank_expr(arg)
            if direct:
                return direct
            if isinstance(arg, ast.Attribute):
                key = ast.unparse(arg)
                return attrs.get(key) if key not in attr_other else None
            if isinstance(arg, ast.Name):
                key = arg.id
                if key in other or key in params:
                    return None
                if key in bound:
                    return bound[key]
                if key not in module_other:
                    return module_bound.get(key)
            return None

        for node in _scope_nodes(scope):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else (f.id if isinstance(f, ast.Name) else "")
            picks = []
            if name in ("set_device", "cuda", "to") and len(node.args) == 1 and isinstance(f, ast.Attribute):
                picks.append(node.args[0])
            if name == "device" and len(node.args) == 2 and isinstance(node.args[0], ast.Constant) \
                    and node.args[0].value == "cuda":
                picks.append(node.args[1])
            for k in node.keywords:
                if k.arg == "device_ids" and isinstance(k.value, (ast.List, ast.Tuple)) and len(k.value.elts) == 1:
                    picks.append(k.value.elts[0])
            for arg in picks:
                rank = rank_of(arg)
                if rank:
                    out.append({"path": path, "line": node.lineno, "what": ast.unparse(node), "rank": rank})
                    break
    return sorted(out, key=lambda r: r["line"])

def script_facts(paths: List[str]) -> dict:
    """The facts of the scripts at `paths`, read here (`check --script` takes them from the scripts and indexes
    its lint pass already made: facts_of)."""
    files, _problems, _missing = collect(list(paths))
    return facts_of((script, None) for script in map(read, files) if not isinstance(script, InputProblem))


def facts_of(units: Iterable[Tuple[Script, Optional[ModuleIndex]]]) -> dict:
    """The facts of parsed scripts, each with lint's index of it (None: indexed here)."""
    env_sets: list = []
    late: list = []
    settings_set: list = []
    debug_calls: list = []
    launcher_reads: list = []
    rank_devices: list = []
    worlds: list = []
    spawns: list = []
    env_rdzv: list = []
    reads_world = False
    indices: list = []
    compiles: list = []
    local_ranks: list = []
    parse_known = reads_local_rank = False
    workers = None
    nodes: list = []
    strict: list = []
    asks: dict = {"precision": [], "attention": [], "backends": [], "extension_builds": [], "triton_libraries": [],
                  "cuda_uses": [], "mmcv_ops": []}
    for script, index in units:
        for key, rows in requests_of(script.tree, script.path).items():
            asks[key].extend(rows)
        nodes.extend(trainer_node_args(script.tree, script.path))
        indices.extend(trainer_gpu_indices(script.tree, script.path))
        found_lr, known, reads_lr = local_rank_args(script.tree, script.path)
        strict.extend(strict_parses(script.tree, script.path))
        local_ranks.extend(found_lr)
        parse_known = parse_known or known
        reads_local_rank = reads_local_rank or reads_lr
        index = index if index is not None else ModuleIndex(script.tree, script.path, script.text)
        spawns.extend(spawn_worlds(index, script.tree, script.path))
        env_rdzv.extend(env_rendezvous(index, script.path))
        found, world, reads = _tree_facts(script.tree, script.path)
        indices.extend(found)
        worlds.extend(world)
        reads_world = reads_world or reads
        for e in index.env_sets:
            init = _cuda_init_before(index, e) if e.name in ENV_NAMES else None
            if init is not None:
                literal = isinstance(e.value, ast.Constant) and isinstance(e.value.value, (str, int))
                late.append({"name": e.name, "value": str(e.value.value) if literal else None,
                             "text": ast.unparse(e.value) if e.value is not None else None, "path": script.path,
                             "line": e.node.lineno, "how": _how(e.node), "cuda_init": init})
            elif e.name in ENV_NAMES and isinstance(e.value, ast.Constant) and isinstance(e.value.value, (str, int)):
                env_sets.append({"name": e.name, "value": str(e.value.value), "path": script.path,
                                 "line": e.node.lineno, "how": _how(e.node)})
        settings_set.extend(_setting_sets(index, script.path))
        own = {e.name for e in index.env_sets}  # a variable the script sets itself is read after it is set
        launcher_reads.extend(r for r in launcher_env_reads(script.tree, script.path) if r["name"] not in own)
        rank_devices.extend(global_rank_devices(script.tree, script.path))
        debug_calls.extend(_debug_calls(index, script.path))
        compiles.extend({"path": script.path, "line": c.line} for c in index.by_qual.get("torch.compile", ()))
        for call in index.by_name.get("DataLoader", ()):
            n = call.kw("num_workers")
            if isinstance(n, ast.Constant) and isinstance(n.value, int) and not isinstance(n.value, bool):
                if workers is None or n.value > workers["count"]:
                    workers = {"count": n.value, "path": script.path, "line": call.line}
    return {"env_sets": env_sets, "late_env_sets": late, "loader_workers": workers, "gpu_indices": indices, "compiles": compiles,
            "world_args": worlds, "reads_world_env": reads_world, "local_rank_args": local_ranks,
            "parse_known_args": parse_known, "reads_local_rank_env": reads_local_rank, "node_args": nodes,
            "strict_parse_args": strict, "setting_sets": settings_set, "debug_calls": debug_calls,
            "launcher_env_reads": launcher_reads, "global_rank_devices": rank_devices, "spawn_worlds": spawns,
            "env_rendezvous": env_rdzv, **asks}
