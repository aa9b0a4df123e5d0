"""A1/A5: processes started by hand (mp.spawn, multiprocessing.Process) instead of by torchrun."""
from __future__ import annotations

import ast
import contextvars
import re

from ..analysis import exclusive
from ..names import dotted
from . import rule
from ._reach import _literal_head, callers_of, reach
from ._common import (DDP, HAND_ENV, INIT_PG, SPAWN, builds_trainer, hard_coded_init_method, picks_port, spawn_sites,
                      torchrun_line, uses_local_rank_readers)

TORCHRUN_FIX = """\
# Let torchrun start one process per GPU and set RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
# MASTER_ADDR/PORT and OMP_NUM_THREADS for each of them; build the Trainer in the script body:
{torchrun}
# and delete the spawn call, the os.environ[...] assignments and TrainingArguments(local_rank=...)."""


def resolve_target(t, call, target):
    """(index, function, file) for a spawn target defined in this file, or in a module of the user's
    project that this file imports (`from train_lib import worker`), parsed but never imported."""
    index = t.index
    if target is None:
        return None
    if isinstance(target, ast.IfExp):
        # `mp.spawn(train if config.get('mode') == 'train' else evaluate, ...)` (fr89 lucaslingle/pytorch_ddp_resnet):
        # either arm is what the launcher starts; the first that resolves stands for both
        for arm in (target.body, target.orelse):
            got = resolve_target(t, call, arm)
            if got is not None:
                return got
        return None
    fn = index.function_of(target, call.scope)
    if fn is not None:
        return index, fn, None
    passed = _passed_in(index, call, target)
    if passed is not None:  # `def run(demo_fn, n): mp.spawn(demo_fn, ...)` called as `run(demo_basic, 4)`
        return resolve_target(t, passed[0], passed[1])
    other = _passed_from_another_module(t, call, target)
    if other is not None:  # utils.start_dist_train(train_fn, ...) called as start_dist_train(train, ...) elsewhere
        return other
    expr = target
    if isinstance(expr, ast.Call) and expr.args and (dotted(expr.func) or "").endswith("partial"):
        expr = expr.args[0]
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Call):
        # `Process(target=PointCloudSeg(args).train, args=(rank,))` (fr71 Nireil/PCSegmentaion): a method of an object
        # the launcher builds from a class of this file
        klass = index.local_class(expr.value.func, call.scope)
        fn = klass.functions.get(expr.attr) if klass is not None else None
        if fn is not None:
            return index, fn, None
    qual = index.qual(expr, call.scope)
    if (not qual or "." not in qual.lstrip(".")) and isinstance(expr, ast.Name) and index.star_modules and \
            expr.id not in index.bound:  # `from model import *` then `mp.spawn(fn=main_ddp, ...)` (fr69 bk1n/bertsheep)
        for module in index.star_modules:
            found = t.sibling(module)
            if found is not None and found[1].module.functions.get(expr.id) is not None:
                return found[1], found[1].module.functions[expr.id], found[0]
        return None
    if not qual or "." not in qual.lstrip("."):
        return None
    module, name = qual.rsplit(".", 1)
    found = t.sibling(module)
    if found is None:
        return None
    path, other = found
    fn = other.module.functions.get(name)
    return (other, fn, path) if fn is not None else None


def _passed_in(index, call, target):
    """(call site, argument) when the spawn target is a parameter of the function that spawns, and a
    caller in this file passes a function for it."""
    fn = call.scope
    if not isinstance(target, ast.Name) or fn.kind != "function" or target.id not in fn.params:
        return None
    for site in index.calls:
        if index.function_of(site.node.func, site.scope) is not fn:
            continue
        arg = _argument_for(fn, target.id, site)
        if arg is not None and not (isinstance(arg, ast.Name) and arg.id == target.id):
            return site, arg
    return None


def _argument_for(fn, name, site):
    """What the call `site` of `fn` passes for its parameter `name` (by keyword or position; `self`/`cls` skipped for
    a method call), or None. One mapping for _passed_in (callers in this file) and _passed_from_another_module."""
    params = list(fn.params)
    offset = 1 if params and params[0] in ("self", "cls") and isinstance(site.node.func, ast.Attribute) else 0
    pos = params.index(name) - offset
    arg = site.kw(name)
    if arg is None and 0 <= pos < len(site.node.args):
        arg = site.node.args[pos]
    return arg


def _passed_from_another_module(t, call, target):
    """(index, function, path) when the spawn target is a parameter of the function that spawns and a module
    linted in the same run hands it a function of its own (fr64 ZhikangNiu/encodec-pytorch: utils.start_dist_train(
    train_fn, ...) spawns train_fn; train_multi_gpu.py calls start_dist_train(train, ...))."""
    fn = call.scope
    if not isinstance(target, ast.Name) or fn.kind != "function" or target.id not in fn.params:
        return None
    for cix, site in callers_of(reach(t), fn):
        if cix is t.index:
            continue  # this file's callers are _passed_in's
        arg = _argument_for(fn, target.id, site)
        got = cix.function_of(arg, site.scope) if arg is not None else None
        if got is not None:
            return cix, got, cix.path
    return None


def _setup_kit(t, call, target):
    """(env names, init_process_group calls) of the PyTorch DDP tutorial's kit when the spawn target cannot be
    followed: `run_demo(demo_fn, world_size)` spawns its own parameter and nothing in this file passes it
    (the caller is another module: word2vec's run.py calls `utils.run(run_model_parallel, 3)`; QUEST-ML's
    `ddp.run(fn, config)`), while a set-up function of the same module writes MASTER_ADDR/MASTER_PORT into
    os.environ unconditionally and calls init_process_group (pytorch/tutorials intermediate_source/
    ddp_tutorial.rst: `setup(rank, world_size)`, `run_demo(demo_fn, world_size)`). The function spawned is
    meant to call that set-up: the module is a hand-rolled torchrun whoever calls it. None otherwise."""
    fn = call.scope
    if not isinstance(target, ast.Name) or fn.kind != "function" or target.id not in fn.params:
        return None
    for s in t.index.scopes:
        if s is fn or s.kind != "function":
            continue
        env = [e for e in t.index.env_sets if e.scope is s and e.name in HAND_ENV and not e.ctx.env_test]
        inits = [c for c in s.calls if c.qual == INIT_PG]
        if inits and any(e.name in ("MASTER_ADDR", "MASTER_PORT") for e in env) and \
                not any(_backend(c) == "mpi" for c in inits):
            return sorted({e.name for e in env}), inits
    return None


def pickled_args(t, call) -> list:
    """(name, class) for the spawn arguments built from a class (a dataset, a model): each is pickled
    into every child."""
    args = call.kw("args")
    if not isinstance(args, (ast.Tuple, ast.List)):
        return []
    out = []
    for elt in args.elts:
        if not isinstance(elt, ast.Name):
            continue
        s = call.scope
        while s is not None and elt.id not in s.values:
            s = s.parent
        value = s.values.get(elt.id) if s is not None else None
        if isinstance(value, ast.Call):
            cls = dotted(value.func) or ""
            out.append((elt.id, cls.rsplit(".", 1)[-1]))
    return out


def _pickled_note(pickled) -> str:
    if not pickled:
        return "."
    listed = ", ".join(f"`{n}` ({c})" for n, c in pickled)
    note = f": here {listed}, built once in the parent and copied into every rank."
    if any("dataset" in (n + c).lower() for n, c in pickled):
        note += (" A dataset holding an open h5py file cannot be pickled (\"h5py objects cannot be pickled\", "
                 "h5py/h5py#1512); build the dataset inside each rank instead.")
    return note


def _target_name(target) -> str:
    if isinstance(target, ast.Lambda):
        return "a lambda"
    if isinstance(target, ast.Call) and target.args:
        return _target_name(target.args[0])
    try:
        return ast.unparse(target)
    except Exception:  # noqa: BLE001
        return "the target"


def _what_it_starts(target) -> str:
    return f"`{_target_name(target)}`" if target is not None else "its target"


def trainer_builders(index, fn) -> list:
    """The Trainer/TrainingArguments/Accelerator calls the spawn target reaches, less an accelerate state the
    target does not train with: when the only builders are accelerate's and the target joins its own process
    group (init_process_group) and wraps its own DistributedDataParallel, the training is the hand-made DDP
    and the Accelerator is a bystander (fr87: a spawned SD3 LoRA trainer that builds `Accelerator(...)` for
    fp16 and never prepares anything with it). That spawn is LINT002's, not LINT001's."""
    calls = [c for s in index.reachable(fn) for c in s.calls]
    builders = [c for c in calls if builds_trainer(index, c)]
    if builders and all((c.qual or "").startswith("accelerate.") for c in builders) \
            and any(c.qual == INIT_PG for c in calls) and any(c.qual == DDP for c in calls):
        return []
    return builders


@rule("LINT001", "trainer-under-spawn", catalogue=("A1", "A5"))
def trainer_under_spawn(t):
    """A Trainer, TrainingArguments or Accelerator built inside a process started by mp.spawn or multiprocessing.

    What it checks
        `torch.multiprocessing.spawn`, `mp.spawn`, `start_processes` and `multiprocessing.Process`
        calls whose target (defined anywhere in the file, followed through the functions it calls)
        builds a transformers `Trainer`/`TrainingArguments` (or a subclass), a trl trainer or config,
        or an accelerate `Accelerator`/`PartialState`.

    Why it matters
        The Trainer and accelerate decide whether to run distributed, and on which GPU, from the
        environment a launcher sets: LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE (transformers
        `training_args.py` `_setup_devices`, accelerate `state.py`). mp.spawn sets none of them.
        Depending on what the script sets by hand, every rank trains alone on all the data, or
        wraps all GPUs in DataParallel, or believes it is local process 0 (duplicate logs, work
        meant for one process runs on all, every rank on cuda:0). Nothing sets OMP_NUM_THREADS, so
        ranks oversubscribe the CPU: measured 53-57 ms per step against 16 ms under torchrun. The
        spawn also pickles the target's arguments (a model, a dataset holding an h5py handle) into
        each child. This is the original question of ddpdoctor: DDP "slower than DataParallel"
        (4m16s against 2m47s); see also huggingface/transformers#41382 and pytorch/pytorch#47587.

    Example
        def run(rank, world_size):
            os.environ["RANK"] = str(rank)
            trainer = Trainer(model=model, args=TrainingArguments(output_dir="out"))
            trainer.train()

        torch.multiprocessing.spawn(run, args=(4,), nprocs=4)

    Fix
        Run the Trainer in the script body and let torchrun start the processes:
        `torchrun --standalone --nproc-per-node 4 train.py` (the spawn's `nprocs`; `gpu` for one
        process per visible GPU), or `accelerate launch`.
    """
    for call, target, kind in spawn_sites(t.index):
        resolved = resolve_target(t, call, target)
        if resolved is None:
            continue
        index, fn, elsewhere = resolved
        builders = trainer_builders(index, fn)
        if not builders:
            continue
        # Name the Trainer itself when there is one: it is what the user recognises.
        first = min(builders, key=lambda c: (not (c.qual or c.text or "").endswith("Trainer"), c.line))
        what = first.qual.rsplit(".", 1)[-1] if first.qual else (first.text or "Trainer")
        how = "torch.multiprocessing.spawn" if kind == "spawn" else "multiprocessing.Process"
        if fn.kind == "function" and _target_name(target) != fn.name:
            target = ast.Name(id=fn.name)  # name the function behind a partial or an alias
        where = f"line {first.line}" if elsewhere is None else f"{elsewhere}:{first.line}"
        reach_ids = {id(s) for s in index.reachable(fn)}
        env = {e.name for ix in {id(index): index, id(t.index): t.index}.values() for e in ix.env_sets
               if (id(e.scope) in reach_ids or e.scope.kind == "module") and not e.ctx.env_test}
        if {"RANK", "WORLD_SIZE"} <= env and "LOCAL_RANK" not in env:
            outcome = ("RANK and WORLD_SIZE are set by hand but LOCAL_RANK is not, so every rank acts as local "
                       "process 0: all on cuda:0, local-main-process work repeated on every rank")
        elif "LOCAL_RANK" in env:
            outcome = "the rank variables are set by hand, without torchrun's OMP_NUM_THREADS or error handling"
        else:
            outcome = ("no WORLD_SIZE or LOCAL_RANK reaches the Trainer, so each process trains alone on all the "
                       "data (or wraps every GPU in DataParallel)")
        pickled = pickled_args(t, call)
        yield t.finding(
            "error", call.node,
            f"{how} starts {_what_it_starts(target)}, which builds a {what} ({where}); {outcome}",
            detail=(f"{_what_it_starts(target).capitalize()} builds {what} at {where}. Under {how} no "
                    "launcher sets LOCAL_RANK, LOCAL_WORLD_SIZE or OMP_NUM_THREADS, and transformers/accelerate read "
                    "the rank layout from exactly those variables. Nothing limits the threads either, so the ranks "
                    "oversubscribe the CPU (measured: 53-57 ms per step against 16 ms under torchrun). The spawn "
                    "also pickles every argument into each child" + _pickled_note(pickled)),
            fix=TORCHRUN_FIX.format(torchrun=torchrun_line(t.index, call)),
            evidence={"launcher": how, "target": _target_name(target) if target is not None else None,
                      "builds": what, "builds_line": first.line, "builds_in": elsewhere or t.path,
                      "env_set_by_hand": sorted(env), "pickled_args": [n for n, _c in pickled]},
        )


@rule("LINT002", "spawn-instead-of-torchrun", catalogue=("A5",))
def spawn_instead_of_torchrun(t):
    """A hand-rolled launcher: mp.spawn whose target calls init_process_group with the rendezvous env set by hand.

    What it checks
        A `torch.multiprocessing.spawn` / `multiprocessing.Process` target that reaches
        `torch.distributed.init_process_group`, in a script that assigns RANK, WORLD_SIZE,
        MASTER_ADDR or MASTER_PORT through `os.environ` itself, or passes a hard-coded
        `init_method="tcp://127.0.0.1:23456"` in a target that trains (wraps a model in DDP or
        calls backward; a harness that only tests collectives is left alone). (A target that
        builds a Trainer is LINT001 instead.) The target is followed through a wrapper's parameter
        (`run(demo_fn)`; when the caller is another module, a `run(fn)` that spawns its parameter beside
        a `setup()` of the same module writing MASTER_ADDR/MASTER_PORT and joining the group, the PyTorch
        DDP tutorial's kit, is reported as it stands), through a conditional target (`train if mode == "train" else
        evaluate`, round 15: the first arm that resolves), into the project's own modules and classes, two hops
        (`from src.utils.distributed import init_distributed`, `Trainer(cfg).fit()`), a classmethod's
        `cls(...)` into its own constructor (`mp.spawn(cls._exec_wrapper, ...)`), and through
        names the project re-exports (`from utils import dist`); MASTER_* fallbacks in the target's
        own set-up count, since under a spawn nothing else sets them. The rendezvous address is
        followed to argparse defaults, f-strings and constants, JSON/YAML configs, and addresses
        built at run time (`'tcp://{}:{}'.format(node, port)`). A spawn whose env:// rendezvous has
        MASTER_ADDR/MASTER_PORT set nowhere (code or the project's shell scripts) is reported as the
        failure it is. When the script picks a free port at run time, the finding says so. A worker
        that builds DistributedDataParallel but joins no process group in the files linted (a helper
        of a module not linted does, or nothing does and DDP raises) is a note; so is one whose
        rendezvous address is not shown. Helpers re-exported by a package (`from core import
        init_process_group`, core/__init__.py re-exporting core/distributed.py) are followed.

    Severity (round 15, the lead's decision on issue 25)
        A one-node spawn of a plain DDP loop that sets MASTER_ADDR=localhost and a port and passes the
        spawn index as the rank is the PyTorch DDP tutorial's own pattern, and it works: a note that
        says so and what torchrun adds. It warns only where a fact in the code shows harm: (a) the
        script takes a node count or node rank (`--nodes`, `--node-rank`, `-nr`, a world of
        `gpus * nodes`; round 26: not a node count assigned only the literal 1) but rendezvous at a loopback address, or passes the spawn index alone as the
        rank: a second node can never join; (b) the worker, or what it calls, reads LOCAL_RANK /
        LOCAL_WORLD_SIZE (a literal default, or none: `os.environ.get("LOCAL_RANK", rank)` falls back
        to the spawn index and is fine), or the run uses a library that reads them (transformers,
        accelerate, DeepSpeed, Lightning), and the launcher does not set them: every process takes
        local rank 0 (cuda:0), torch/distributed/run.py being what sets them; (c) MASTER_ADDR/PORT
        read by env:// and set nowhere: init_process_group raises "environment variable MASTER_ADDR
        expected, but not set" (torch/distributed/rendezvous.py). A launcher nothing calls stays a note.

    Why it matters
        It works on one node, but it re-implements torchrun: no LOCAL_RANK or LOCAL_WORLD_SIZE for the
        libraries that read them, no OMP_NUM_THREADS (every rank uses every core), no elastic
        error files naming the first failing rank, a fixed MASTER_PORT that collides with the
        next job (pytorch/pytorch#85604), and every argument pickled into the children ("Can't
        pickle local object", pytorch/pytorch#47587, Lightning-AI/pytorch-lightning PR#2115).
        PyTorch's own DDP tutorials now start with torchrun.

    Example
        def worker(rank, world):
            os.environ["MASTER_ADDR"] = "localhost"
            os.environ["MASTER_PORT"] = "12355"
            dist.init_process_group("nccl", rank=rank, world_size=world)

        mp.spawn(worker, args=(4,), nprocs=4)

    Fix
        Read the rank from the environment and launch with torchrun:
        `dist.init_process_group("nccl")`, `local_rank = int(os.environ["LOCAL_RANK"])`, then
        `torchrun --standalone --nproc-per-node N train.py` (N: the spawn's `nprocs`, or `gpu`).
    """
    launched: dict = {}  # (scope, target) -> line of the first launch: a second launch of it is the same fault
    weak: list = []  # launchers whose rendezvous address this file does not show: notes
    for site in torchrun_reimplementations(t, weak):
        call, kind, env, inits, target, index, elsewhere, hard, helpers, unset_env, harm = site
        how = "torch.multiprocessing.spawn" if kind == "spawn" else "multiprocessing.Process"
        key = (id(call.scope), ast.dump(target) if target is not None else "", hard, bool(unset_env))
        if key in launched:
            yield t.finding(
                "info", call.node,
                f"{how} launches {_what_it_starts(target)} again, the same hand-rolled launcher as line "
                f"{launched[key]}",
                fix=torchrun_line(t.index, call), evidence={"launcher": how, "same_as": launched[key]})
            continue
        launched[key] = call.line
        if unset_env:
            yield t.finding(
                "warning", call.node,
                f"{how} starts {_what_it_starts(target)}, whose init_process_group reads MASTER_ADDR/MASTER_PORT "
                "from the environment, and nothing sets them",
                detail=(f"init_process_group (line {inits[0].line}) uses the env:// rendezvous, but neither this "
                        "project's code nor its shell scripts set MASTER_ADDR or MASTER_PORT, and no launcher does "
                        "under a spawn: it fails with \"environment variable MASTER_ADDR expected, but not set\" "
                        "unless they are exported by hand."),
                fix=("# let torchrun set them (and RANK, LOCAL_RANK, WORLD_SIZE) for each process:\n"
                     + torchrun_line(t.index, call)),
                evidence={"launcher": how, "init_process_group_line": inits[0].line, "master_env_set": False},
            )
            continue
        unset = [n for n in ("LOCAL_RANK", "LOCAL_WORLD_SIZE", "OMP_NUM_THREADS")
                 if not (t.index.sets_env(n) or (elsewhere and index.sets_env(n)))]
        lacks = ", ".join(n for n in unset if n != "LOCAL_WORLD_SIZE")
        lacks = f"{lacks} or error reporting" if lacks else "error reporting"
        fixed_port = bool(hard and _TCP_FIXED.match(hard)) or (not hard and not (
            picks_port(t.index) or (elsewhere and picks_port(index)) or any(picks_port(h) for h in helpers)))
        helper = next((h for h in helpers if any(s2 is inits[0].scope for s2 in h.scopes)), None)
        init_at = f"line {inits[0].line}" + (f" of {helper.path}" if helper is not None else "")
        fixed_text = bool(hard and _TCP_FIXED.match(hard))
        what = ", ".join(env) + " set by hand" if env else (
            f"init_method={hard!r} hard-coded" if fixed_text else f"a tcp:// init_method built at run time ({hard})")
        if env and hard:
            what += f" and init_method={hard!r}"
        port = ("the port is fixed (the next job on this machine collides with it)" if fixed_port else
                "the port is picked at run time, but nothing else torchrun does is")
        dead = t.facts.dead(call.scope, t.index)  # `def train_distributed(...)`: a spawn helper nothing calls
        if harm is None:
            adds = [n for n in unset if n != "LOCAL_WORLD_SIZE"] + (["a free port"] if fixed_port else []) + [
                "error files naming the failing rank", "a multi-node launch"]
            title = (f"{how} with {what} starts the ranks by hand: it works on one node; torchrun would add "
                     + ", ".join(adds[:-1]) + " and " + adds[-1])
            harm_text = ("This is the PyTorch DDP tutorial's one-node pattern and it works as written: nothing in the "
                         "files linted takes a node count or reads a LOCAL_* variable the launcher leaves unset. ")
        elif harm["why"] == "nodes":
            title = (f"{how} with {what} takes {harm['option']} (line {harm['option_line']}) but "
                     + (f"rendezvous at {harm['address']!r}" if "address" in harm else
                        f"gives each process the spawn index {harm['rank_is_spawn_index']!r} as its rank")
                     + ": a second node can never join")
            harm_text = (f"The script takes a node count or rank ({harm['option']}, line {harm['option_line']}), but "
                         + (f"every node rendezvous at the loopback address {harm['address']!r}, so the processes of "
                            "another machine wait for a master on their own host. " if "address" in harm else
                            "init_process_group's rank is the spawn index alone, so the ranks of a second node collide "
                            "with the first's. ")
                         + "torchrun --nnodes N --node-rank R --master-addr HOST sets both. ")
        else:
            title = (f"{how} with {what} leaves {harm['reads']} unset, and "
                     + (f"the worker reads it (line {harm['read_line']})" if harm.get("read_line") else
                        "the run uses a library that reads it (transformers, accelerate, DeepSpeed, Lightning)")
                     + ": every process takes local rank "
                     + ("0 (cuda:0)" if harm.get("default") in (0, "0") or harm.get("library") else
                        f"{harm['default']!r}" if harm.get("default") is not None else
                        "from a KeyError (the read fails)"))
            harm_text = (f"The launcher sets {', '.join(env) or 'no LOCAL_* variable'} but not {harm['reads']}, "
                         "which only a launcher (torchrun) sets. ")
        yield t.finding(
            "info" if dead or harm is None else "warning", call.node,
            title + (f" (in {call.scope.name}(), which nothing in the files linted calls)" if dead else ""),
            detail=harm_text + (f"{_what_it_starts(target).capitalize()} calls init_process_group ({init_at}) "
                    + (f"after the script sets {', '.join(env)} itself" if env else
                       f"with the rendezvous address written into the code ({hard})" if fixed_text else
                       f"with a rendezvous address the launcher builds itself ({hard})")
                    + ". " + (f"Nothing sets {'/'.join(unset)}; " if unset else "")
                    + f"{port}; a crashed rank is not reported by rank, and the arguments are pickled into "
                    "every child."),
            fix=("# in the worker: dist.init_process_group(backend); local_rank = int(os.environ['LOCAL_RANK'])\n"
                 + torchrun_line(t.index, call)),
            evidence={"launcher": how, "init_process_group_line": inits[0].line, "env_set_by_hand": env,
                      "init_method": hard, "port_fixed": fixed_port, "dead": dead, "harm": harm},
        )


    for call, kind, inits, target in weak:
        how = "torch.multiprocessing.spawn" if kind == "spawn" else "multiprocessing.Process"
        if not inits:
            yield t.finding(
                "info", call.node,
                f"{how} starts {_what_it_starts(target)}, which builds DistributedDataParallel but joins no process "
                "group in the files linted: a hand-rolled torchrun (or DDP fails with \"Default process group has not "
                "been initialized\")",
                detail=("DDP needs the default process group: either code not in the files linted joins it, and where "
                        "it rendezvous is not shown here, or nothing does and the DDP constructor raises. torchrun "
                        "would set RANK, LOCAL_RANK, WORLD_SIZE and MASTER_* for each process and report which rank "
                        "failed first."),
                fix=("# in the worker: dist.init_process_group(backend); local_rank = int(os.environ['LOCAL_RANK'])\n"
                     + torchrun_line(t.index, call)),
                evidence={"launcher": how, "init_process_group_line": None, "why": "process group joined out of sight"},
            )
            continue
        yield t.finding(
            "info", call.node,
            f"{how} starts {_what_it_starts(target)}, which joins the process group with a rank the script assigns: "
            "a hand-rolled torchrun",
            detail=(f"init_process_group (line {inits[0].line}) is given each process's rank by this launcher. Where "
                    "it rendezvous is not shown here; torchrun would also set LOCAL_RANK, LOCAL_WORLD_SIZE and "
                    "OMP_NUM_THREADS and report which rank failed first."),
            fix=("# in the worker: dist.init_process_group(backend); local_rank = int(os.environ['LOCAL_RANK'])\n"
                 + torchrun_line(t.index, call)),
            evidence={"launcher": how, "init_process_group_line": inits[0].line, "why": "rendezvous not shown"},
        )


def _project_helper(t, call):
    """(index, function) for a call into a module of the user's project (`from src.utils.distributed
    import init_distributed`), parsed but never imported; None for library calls. A package's re-export is
    followed (`from core import init_process_group` where core/__init__.py says `from .distributed import
    init_process_group`: Python binds the package attribute to the submodule's function, SentiFormer)."""
    q = call.qual
    if not q or "." not in q.lstrip(".") or q.split(".")[0] in ("torch", "os", "sys", "transformers", "accelerate"):
        return None
    found = t.project_function(q)
    if found is not None:
        return found[0], [found[1]]
    klass = t.project_class(q)
    if klass is not None:  # a class of the project: what its methods do runs in the worker too
        return klass[0], list(klass[1].functions.values())
    return None


def torchrun_reimplementations(t, weak=None) -> list:
    """Spawn sites that LINT002 reports: (call, kind, env names set by hand, init_process_group calls,
    target, index of the target's file, other file or None, hard-coded init_method or None)."""
    out = []
    kits = []  # the tutorial kit's run(fn): reported only when no launcher of this file is (hard_tutorial_spawn)
    for call, target, kind in spawn_sites(t.index):
        resolved = resolve_target(t, call, target)
        if resolved is None:
            kit = _setup_kit(t, call, target)
            if kit is not None:
                kits.append((call, kind, kit[0], kit[1], target, t.index, None, None, [], None, None))
            continue
        index, fn, elsewhere = resolved
        reach = index.reachable(fn)
        calls = [c for s in reach for c in s.calls]
        if trainer_builders(index, fn):
            continue  # LINT001 says it louder
        inits = [c for c in calls if c.qual == INIT_PG]
        helper_env = []
        helpers = []
        helper_scopes = []
        # Helpers and classes of the project's other modules (`init_distributed(...)` from utils, I-JEPA;
        # `Trainer(cfg).train()` from trainer.py): followed two hops.
        frontier = list(calls)
        for _hop in range(2):
            nxt = []
            for c in frontier:
                found = _project_helper(t, c)
                if found is None:
                    continue
                other, found_scopes = found
                reach2 = [x for h in found_scopes for x in other.reachable(h)]
                helper_scopes += reach2
                ids = {id(x) for x in reach2}
                new = [x for s2 in reach2 for x in s2.calls]
                inits += [x for x in new if x.qual == INIT_PG]
                calls = calls + new
                nxt += new
                helper_env += [e for e in other.env_sets if id(e.scope) in ids]
                helpers.append(other)
            frontier = nxt
        # an init in a branch the spawn's own branch excludes (`if args.dist == 'ddp': mp.spawn(...)` and, in the
        # worker, `if args.dist == 'dp': init_process_group("tcp://localhost:2345")`): never the spawned ranks' init
        # (fr112 prakashchhipa/MPD train_simclr.py, a LINT002 warning judged wrong at first read)
        inits = [c for c in inits if not exclusive(call.ctx, c.ctx)]
        if not inits and weak is not None and any(c.qual == DDP for c in calls) and not any(
                (c.qual or "").startswith("torch.distributed.rpc.") for c in calls):
            # The workers build DistributedDataParallel, which needs the default process group (its constructor
            # raises "Default process group has not been initialized" otherwise, torch/distributed/
            # distributed_c10d.py), yet no init_process_group is in the files: a helper this run cannot read joins
            # it (RocketFlash's utils.utils_dist.init_process, fr53). A launcher all the same: a note.
            weak.append((call, kind, [], target))
            continue
        if not inits or any((c.qual or "").startswith("torch.distributed.rpc.") for c in calls):
            continue  # RPC jobs give each rank a role and rendezvous through MASTER_*: not a data-parallel launcher
        if any(_backend(c) == "mpi" for c in inits):
            continue  # the MPI backend: mpirun places the ranks and MASTER_* is not read; torchrun is no alternative
        # Under a spawn nothing else sets MASTER_*: a fallback in the target's own set-up
        # (`if "MASTER_PORT" not in os.environ: os.environ["MASTER_PORT"] = "12354"`, icefall) is the setting.
        reach_ids = {id(x) for x in reach}
        # ... and so is a fallback in the function that spawns, before the spawn (`if "MASTER_ADDR" not in
        # os.environ: os.environ["MASTER_ADDR"] = "localhost"`, then mp.spawn, VGen): on one machine it is the setting.
        env_sets = [e for e in t.index.env_sets + (index.env_sets if elsewhere else []) + helper_env
                    if e.name in HAND_ENV and (not e.ctx.env_test or id(e.scope) in reach_ids or e in helper_env or (
                        e.scope is call.scope and e.node.lineno < call.line))]
        # the options modules the files import (`from opts import parse_opts`, 3D-ResNets): argparse defaults there
        where = [t.index, index, *helpers, *t.facts.indexes.values(), *_option_modules(t, [t.index, index])]
        # `distributed_context(..., init_method=f"tcp://{host}:{port}")` (ParlAI): what the caller passes
        # counts, not the helper parameter's default.
        passed = _passed_to_helper(where, inits, calls)
        focus = _SPAWN_FOCUS.set(call)
        try:
            hard = None if passed else next(
                (h for h in (rendezvous_address(where, c, t.context) for c in inits) if h), None)
            built = passed or (None if hard else next((h for h in (runtime_tcp(where, c) for c in inits) if h), None))
        finally:
            _SPAWN_FOCUS.reset(focus)
        # The target trains, or hands over to training code this file cannot follow (`trainer.train()` on
        # `core.__dict__[v].Trainer(cfg)`, ProPainter; `loop.train()`, ParlAI), or runs it (`train_loop.run()`, allennlp)
        # in a run whose other files train.
        trains = any(c.qual == DDP or c.name == "backward" for c in calls) or (
            (hard or built) is not None and t.role != "test" and (
                any(c.name and "train" in c.name.lower() for c in calls) or _hands_a_trainer(t, call) or
                (t.facts.trains() and any(c.name in ("run", "fit") for c in calls)) or
                # `main_func(global_rank, ...)`: the worker runs a function the spawn hands it, in a run that trains
                (t.facts.trains() and any(isinstance(c.node.func, ast.Name) and c.name in fn.params
                                          for c in fn.calls))))
        if hard and not env_sets and not trains:
            hard = None  # a harness that only rendezvous (collective tests, demos): not a training launcher
        if built and not env_sets and not hard and trains:
            hard = built  # `tcp://{node}:{random port}` built at run time by a training launcher
        unset_env = None
        if not env_sets and not hard and _env_rendezvous(inits) and not _master_set_anywhere(t, index, helpers) and \
                not requires_launcher(t.index, call):
            unset_env = True
        if not env_sets and not hard and not unset_env:
            # a training launcher whose address comes from somewhere this file does not show (`init_method=
            # args.master_ip`): a note; env:// with MASTER_* exported by the project's scripts stays quiet
            if weak is not None and trains and _explicit_rank(inits) and not _env_rendezvous(inits):
                weak.append((call, kind, inits, target))
            continue
        harm = None if unset_env else _harm(t, call, kind, fn, reach, helper_scopes, inits, env_sets, hard,
                                            [t.index, index, *helpers, *_option_modules(t, [t.index, index])])
        out.append((call, kind, sorted({e.name for e in env_sets}), inits, target, index, elsewhere, hard, helpers,
                    unset_env, harm))
    return out or kits[:1]


# Round 15 (lead's decision on LINT002): a one-node spawn of a plain DDP loop that sets MASTER_ADDR=localhost and a
# port and passes the spawn index as the rank is the PyTorch DDP tutorial's own pattern and works; "use torchrun" there
# is advice (a note). The launcher warns only where a fact in the code shows harm.
_NODE_OPTION = re.compile(r"^--?(n?nodes|num[-_]?nodes|n[-_]?nodes|node[-_]?rank|nr|node[-_]?num|num[-_]?machines|"
                          r"machine[-_]?rank|node[-_]?id|world[-_]?nodes)$", re.I)
_NODE_NAME = re.compile(r"^(n?nodes|num_?nodes|n_nodes|node_num|num_machines|world_nodes)$", re.I)
_LOOPBACK = re.compile(r"^(localhost|127\.\d+\.\d+\.\d+|0\.0\.0\.0|::1|\[::1\])$", re.I)
_LOCAL_ENV = ("LOCAL_RANK", "LOCAL_WORLD_SIZE")


def _node_option(indexes):
    """(option, line) of the first command-line option naming a node count or rank (`--nodes`, `--node-rank`,
    `-nr`), or of a world size built from a node count (`args.world_size = args.gpus * args.nodes`)."""
    for ix in indexes:
        for c in ix.calls:
            if c.name == "add_argument":
                for a in c.node.args:
                    if isinstance(a, ast.Constant) and isinstance(a.value, str) and _NODE_OPTION.match(a.value):
                        return a.value, c.line
        for n in ast.walk(ix.module.node):
            if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult):
                for side in (n.left, n.right):
                    name = (dotted(side) or "").split(".")[-1]
                    if _NODE_NAME.match(name) and not _one_node_literal(ix, name):
                        return name, n.lineno
    return None


def _one_node_literal(ix, name) -> bool:
    """Every assignment of the node count is the literal 1 (`args.nodes = 1`, fr148 FastSAM3D device_config): the
    world of `nodes * gpus` is one node by construction, so a loopback rendezvous strands no other node."""
    values = [n.value for n in ast.walk(ix.module.node) if isinstance(n, (ast.Assign, ast.AnnAssign))
              for tg in (n.targets if isinstance(n, ast.Assign) else [n.target])
              if (dotted(tg) or "").split(".")[-1] == name]
    return bool(values) and all(isinstance(v, ast.Constant) and v.value == 1 for v in values)


def _loopback(index, expr):
    """The literal loopback host an expression holds (a constant, or a module constant it names), else None."""
    if isinstance(expr, ast.Name):
        for stmt in index.module.node.body:
            if isinstance(stmt, ast.Assign) and any(isinstance(x, ast.Name) and x.id == expr.id for x in stmt.targets):
                expr = stmt.value
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str) and _LOOPBACK.match(expr.value.strip()):
        return expr.value
    return None


def _local_env_reads(scopes):
    """(name, line, default) of reads of LOCAL_RANK / LOCAL_WORLD_SIZE in the given scopes: `os.environ["LOCAL_RANK"]`
    (default None: KeyError), `os.environ.get("LOCAL_RANK", 0)`, `os.getenv(...)`. A `.get` whose default is not a
    literal (`os.environ.get("LOCAL_RANK", rank)`: the spawn index) is a working fallback, not counted."""
    out = []
    seen = set()
    for s in scopes:
        if id(s) in seen or getattr(s, "node", None) is None:
            continue
        seen.add(id(s))
        tested = set()  # reads under `if "LOCAL_RANK" in os.environ:` (a torchrun branch) are not the launcher's
        for n in ast.walk(s.node):
            if isinstance(n, (ast.If, ast.IfExp)) and any(
                    (isinstance(x, ast.Constant) and x.value in _LOCAL_ENV) or _environ(x) for x in ast.walk(n.test)):
                tested |= {id(x) for x in ast.walk(n)}
        for n in ast.walk(s.node):
            if id(n) in tested:
                continue
            if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load) and _environ(n.value) and \
                    isinstance(n.slice, ast.Constant) and n.slice.value in _LOCAL_ENV:
                out.append((n.slice.value, n.lineno, None))
            elif isinstance(n, ast.Call) and n.args and isinstance(n.args[0], ast.Constant) and \
                    n.args[0].value in _LOCAL_ENV and (
                        (isinstance(n.func, ast.Attribute) and n.func.attr == "get" and _environ(n.func.value)) or
                        (dotted(n.func) or "") in ("os.getenv", "getenv")):
                default = n.args[1] if len(n.args) > 1 else next((k.value for k in n.keywords if k.arg == "default"),
                                                                 None)
                # no default (None: tested later), a computed one (the spawn index) or a negative sentinel
                # (`-1`: "not launched", tested later): not a read that breaks under the spawn
                if not isinstance(default, ast.Constant) or default.value is None or \
                        str(default.value).strip().startswith("-"):
                    continue
                out.append((n.args[0].value, n.lineno, default.value))
    return out


def _harm(t, call, kind, fn, reach, helper_scopes, inits, env_sets, hard, option_indexes):
    """What in the code shows that this hand-rolled launcher does harm, as a dict for the finding's evidence, or None
    (a one-node launcher that works: a note).
    (a) the script takes a node count / node rank, but the rendezvous address is a loopback literal or each process's
        rank is the spawn index alone: a second node can never join (fr96 zfhxi, fr97 aurotripathy, fr98 matejgrcic);
    (b) the worker (or what it calls) reads LOCAL_RANK / LOCAL_WORLD_SIZE, or the run uses a library that reads them
        (transformers, accelerate, DeepSpeed, Lightning), and the launcher does not set them (fr98 alessialin)."""
    node = _node_option(option_indexes)
    if node is not None:
        addr = None
        for e in env_sets:
            if e.name == "MASTER_ADDR":
                addr = _loopback(t.index, e.value) or addr
        if addr is None:
            # an init_method written into the code (`"tcp://127.0.0.1:9876"`, f"tcp://localhost:{port}"); a loopback
            # that is only an option's default (`--dist-url`, fr97 zhfeing) can be given another address: no harm
            for c in inits:
                head = _literal_head(c.kw("init_method") or c.arg(1))
                m = re.match(r"^tcp://\[?([^/:\]{}]+)", head or "")
                if m and _LOOPBACK.match(m.group(1)):
                    addr = m.group(1)
                    break
        if addr is not None:
            return {"why": "nodes", "option": node[0], "option_line": node[1], "address": addr}
        rank = inits[0].kw("rank") if inits else None
        params = getattr(fn, "params", None) or []
        if kind == "spawn" and isinstance(rank, ast.Name) and params and rank.id == params[0]:
            return {"why": "nodes", "option": node[0], "option_line": node[1], "rank_is_spawn_index": rank.id}
    set_by_hand = {e.name for e in env_sets} | {n for n in _LOCAL_ENV if any(ix.sets_env(n) for ix in option_indexes)}
    reads = [r for r in _local_env_reads(list(reach) + list(helper_scopes)) if r[0] not in set_by_hand]
    if reads:
        name, line, default = reads[0]
        return {"why": "local_env", "reads": name, "read_line": line, "default": default}
    if "LOCAL_RANK" not in set_by_hand:
        for ix in option_indexes:
            if uses_local_rank_readers(ix):
                return {"why": "local_env", "reads": "LOCAL_RANK", "read_line": None, "library": True}
    return None


_LAUNCHER_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE")


def _launcher_var(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value in _LAUNCHER_VARS


def _environ(node: ast.AST) -> bool:
    return (dotted(node) or "") in ("os.environ", "environ")


def _absent_test(test: ast.AST) -> bool:
    """`"RANK" not in os.environ` (alone or in a boolean), `not "LOCAL_RANK" in os.environ`."""
    for n in ast.walk(test):
        if isinstance(n, ast.Compare) and len(n.ops) == 1 and _launcher_var(n.left) and _environ(n.comparators[0]):
            if isinstance(n.ops[0], ast.NotIn):
                return True
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not) and isinstance(n.operand, ast.Compare) and \
                _launcher_var(n.operand.left) and isinstance(n.operand.ops[0], ast.In):
            return True
    return False


def _stops(body: list) -> bool:
    for stmt in body:
        if isinstance(stmt, ast.Raise):
            return True
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and \
                (dotted(stmt.value.func) or "") in ("sys.exit", "exit", "quit", "os._exit"):
            return True
    return False


def requires_launcher(index, call) -> bool:
    """The script refuses to run without a launcher's RANK/LOCAL_RANK/WORLD_SIZE before it gets to the spawn: a
    test that they are absent which raises or exits, an `assert "RANK" in os.environ`, or a plain
    `os.environ["LOCAL_RANK"]` read (KeyError without one), at module level or in the function that spawns, above
    the spawn. Then the launcher (torchrun) has set MASTER_ADDR/MASTER_PORT too: "nothing sets them" is wrong."""
    bodies = [index.module.node.body]
    if call.scope.kind == "function":
        bodies.append(call.scope.node.body)
    for body in bodies:
        for stmt in body:
            if getattr(stmt, "lineno", 0) >= call.line:
                break
            if isinstance(stmt, ast.Try):
                continue
            if isinstance(stmt, ast.If) and _absent_test(stmt.test) and _stops(stmt.body):
                return True
            if isinstance(stmt, ast.Assert) and any(
                    isinstance(n, ast.Compare) and _launcher_var(n.left) and isinstance(n.ops[0], ast.In) and
                    _environ(n.comparators[0]) for n in ast.walk(stmt.test)):
                return True
            if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.Expr)) and any(
                    isinstance(n, ast.Subscript) and _environ(n.value) and _launcher_var(n.slice) and
                    isinstance(n.ctx, ast.Load) for n in ast.walk(stmt)):
                return True
    return False


def _backend(call) -> str:
    """The backend an init_process_group call names: a literal, or the default of the parameter it is passed
    (`def init_processes(rank, size, fn, backend='mpi')`)."""
    value = call.arg(0, "backend")
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return value.value.lower()
    if isinstance(value, ast.Name):
        s = call.scope
        while s is not None and s.kind != "function":
            s = s.parent
        if s is not None and value.id in s.params:
            return (_param_default(s, value.id) or "").lower()
    return ""


def _explicit_rank(inits) -> bool:
    """init_process_group is given the rank (`rank=gpu`): the script assigns ranks to the processes it starts."""
    return any(c.kw("rank") is not None or len(c.node.args) >= 4 for c in inits)


def _hands_a_trainer(t, call) -> bool:
    """The spawn hands its target a training function (`Process(target=spawned_train, args=(train_process, opt,
    ...))` with `train_process = partial(single_main)`, OpenNMT) in a run whose files train."""
    if not t.facts.trains():
        return False
    args = call.kw("args")
    items = list(args.elts) if isinstance(args, (ast.Tuple, ast.List)) else []
    for item in items:
        value = item
        if isinstance(item, ast.Name):
            s = call.scope
            while s is not None and item.id not in s.values:
                s = s.parent
            value = s.values[item.id] if s is not None else item
        if isinstance(value, ast.Call) and (dotted(value.func) or "").endswith("partial") and value.args:
            value = value.args[0]
        name = (dotted(value) or "") if isinstance(value, (ast.Name, ast.Attribute)) else ""
        if "train" in name.lower() or (isinstance(item, ast.Name) and "train" in item.id.lower() and value is not item):
            return True
    return False


def _option_modules(t, indexes) -> list:
    """Project modules the given files import that declare command-line options (`add_argument`), parsed but
    never imported: where `args.dist_url` gets its default."""
    out = []
    for ix in indexes:
        for target in list(ix.module.imports.values())[:40]:
            for module in (target, target.rsplit(".", 1)[0] if "." in target.lstrip(".") else ""):
                found = t.sibling(module) if module else None
                if found is not None and found[1] not in out and (
                        "add_argument" in found[1].by_name or "add" in found[1].by_name):
                    out.append(found[1])
                    break
    return out


def _passed_to_helper(indexes, inits, calls):
    """A helper's init_process_group(init_method=<its parameter>): the tcp:// text the caller passes."""
    for c in inits:
        value = c.kw("init_method")
        scope = c.scope
        while scope is not None and scope.kind != "function":
            scope = scope.parent
        if not isinstance(value, ast.Name) or scope is None or value.id not in scope.params:
            continue
        for site in calls:
            if site.name != scope.name:
                continue
            arg = site.kw(value.id)
            if arg is None:
                names = [a.arg for a in scope.node.args.posonlyargs + scope.node.args.args]
                if value.id in names:
                    arg = site.arg(names.index(value.id))
            found = _runtime_tcp_value(indexes, arg, site.scope) if arg is not None else None
            if found:
                return found
    return None


def _env_rendezvous(inits) -> bool:
    """init_process_group reads MASTER_ADDR/MASTER_PORT from the environment: no init_method and no store,
    or init_method="env://"."""
    for c in inits:
        im = c.kw("init_method")
        if c.kw("store") is not None or any(k.arg is None for k in c.node.keywords):
            return False
        if im is None and len(c.node.args) < 2:
            continue
        if im is not None and isinstance(im, ast.Constant) and im.value == "env://":
            continue
        return False
    return bool(inits)


def _master_set_anywhere(t, index, helpers) -> bool:
    """MASTER_ADDR or MASTER_PORT is set somewhere: in the files of the run, the target's module, a helper,
    or exported by the project's shell scripts."""
    indexes = [t.index, index, *helpers, *t.facts.indexes.values()]
    if any(e.name in ("MASTER_ADDR", "MASTER_PORT") for ix in indexes for e in ix.env_sets):
        return True
    if t.context is not None and t.context.exports_for(t.real_path) & {"MASTER_ADDR", "MASTER_PORT"}:
        return True
    return False


def runtime_tcp(indexes, call):
    """A `tcp://...` init_method built at run time (`'tcp://{}:{}'.format(node, port)`, followed through
    `config.dist_url = ...` or `config["init_method"] = ...` anywhere in the run): returned as written,
    e.g. "tcp://{}:{}"."""
    return _runtime_tcp_value(indexes, call.kw("init_method"), call.scope)


def _runtime_tcp_value(indexes, value, scope, depth=0):
    """Every assignment of the attribute or key is a candidate, not only the last by line: `if args.dist_url == '':
    cfg.DIST_URL = 'tcp://127.0.0.1:123' + str(random.randint(0, 9)) ... else: cfg.DIST_URL = args.dist_url`
    (aot-benchmark) rendezvous at the built address unless the user passes one."""
    if value is None or depth > 3:
        return None
    if isinstance(value, ast.Attribute):
        found = [a for ix in indexes for a in ix.assigns
                 if any(n and n.rsplit(".", 1)[-1] == value.attr and "." in n for n in a.targets)]
        return next((h for h in (_runtime_tcp_value(indexes, a.value, a.scope, depth + 1) for a in found) if h), None)
    if isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Constant) and \
            isinstance(value.slice.value, str):  # config["init_method"] = f"tcp://{ip}:{args.port}"
        key = value.slice.value
        found = [a for ix in indexes for a in ix.assigns
                 if any(isinstance(tg, ast.Subscript) and isinstance(tg.slice, ast.Constant) and tg.slice.value == key
                        for tg in getattr(a.node, "targets", ()))]
        return next((h for h in (_runtime_tcp_value(indexes, a.value, a.scope, depth + 1) for a in found) if h), None)
    if isinstance(value, ast.Name):
        s = scope
        while s is not None and value.id not in s.values:
            s = s.parent
        return _runtime_tcp_value(indexes, s.values[value.id], s, depth + 1) if s is not None else None
    first = None
    if isinstance(value, ast.JoinedStr) and value.values:
        first = value.values[0]
    elif isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "format":
        first = value.func.value
    elif isinstance(value, ast.BinOp):
        first = value.left
        while isinstance(first, ast.BinOp):
            first = first.left
    if isinstance(first, ast.Constant) and isinstance(first.value, str) and first.value.startswith("tcp://"):
        return ast.unparse(value)
    return None


def rendezvous_address(indexes, call, context=None):
    """The fixed `tcp://host:port` an init_process_group call rendezvous at: a literal, an f-string or
    concatenation whose parts are constants or names bound to constants, or an argparse default
    (`add_argument("--dist-url", default="tcp://127.0.0.1:23456")` read as `args.dist_url`)."""
    hard = hard_coded_init_method(call)
    if hard:
        return hard
    value = call.kw("init_method")
    if value is None:
        return None
    text = _const_text(indexes, call.scope, value, 0)
    if text is None and context is not None and isinstance(value, ast.Subscript):
        key = value.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str):  # h.dist_config["dist_url"] from a JSON config
            text = context.config_values.get(key.value.replace("-", "_"))
    if text and _TCP_FIXED.match(text):
        return text
    return None


_TCP_FIXED = re.compile(r"^tcp://[^/{}]+:\d+$")


def _const_text(index, scope, expr, depth):
    if depth > 4 or expr is None:
        return None
    if isinstance(expr, ast.Constant):
        return str(expr.value) if isinstance(expr.value, (str, int)) and not isinstance(expr.value, bool) else None
    if isinstance(expr, ast.JoinedStr):
        parts = []
        for v in expr.values:
            piece = _const_text(index, scope, v.value if isinstance(v, ast.FormattedValue) else v, depth + 1)
            if piece is None:
                return None
            parts.append(piece)
        return "".join(parts)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
        a, b = _const_text(index, scope, expr.left, depth + 1), _const_text(index, scope, expr.right, depth + 1)
        return a + b if a is not None and b is not None else None
    if isinstance(expr, ast.Call) and (dotted(expr.func) or "") == "str" and expr.args:
        return _const_text(index, scope, expr.args[0], depth + 1)
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "format" and \
            isinstance(expr.func.value, ast.Constant) and isinstance(expr.func.value.value, str):
        # "tcp://{master_ip}:{master_port}".format(master_ip=opt.master_ip, ...) with option defaults (OpenNMT)
        pos = [_const_text(index, scope, a, depth + 1) for a in expr.args]
        kws = {k.arg: _const_text(index, scope, k.value, depth + 1) for k in expr.keywords if k.arg}
        if any(v is None for v in pos) or any(v is None for v in kws.values()):
            return None
        try:
            return expr.func.value.value.format(*pos, **kws)
        except (IndexError, KeyError, ValueError):
            return None
    if isinstance(expr, ast.Name):
        s = scope
        while s is not None:
            if expr.id in s.values and s.values[expr.id] is not expr:
                return _const_text(index, s, s.values[expr.id], depth + 1)
            if expr.id in s.params:
                return _param_default(s, expr.id) or _spawn_argument(index, s, expr.id, depth)
            s = s.parent
        return None
    if isinstance(expr, ast.Attribute):
        return _argparse_default(index, expr.attr)
    return None


def _spawn_argument(indexes, scope, name, depth):
    """What a spawn hands a target's parameter: `mp.spawn(worker, args=(fn, backend, dist_url))` calls
    `worker(i, fn, backend, dist_url)` (torch/multiprocessing/spawn.py: `fn(i, *args)`), so `worker`'s fourth parameter
    is `dist_url` as the spawning function built it (sirluk/pytorch_transformer, fr59: a detectron2-style launcher
    whose `tcp://{master_addr}:{master_port}` comes from argparse defaults)."""
    if scope.kind != "function" or name not in scope.params:
        return None
    pos = scope.params.index(name) - 1  # the spawn index comes first
    if pos < 0:
        return None
    spawns = [c for ix in (indexes if isinstance(indexes, (list, tuple)) else [indexes]) for c in ix.calls_named(*SPAWN)]
    focus = _SPAWN_FOCUS.get()
    if focus is not None and any(c is focus for c in spawns):
        # the spawn being judged: its own arguments, not another spawn's of the same target (round 9 left: the
        # address of MultiPath's second spawn, tcp://localhost:{port}, reported at its first spawn's line)
        spawns = [focus]
    for call in spawns:
        target = call.arg(0, "fn")
        spawn_args = call.kw("args") if call.kw("args") is not None else call.arg(1)
        if not (isinstance(target, ast.Name) and target.id == scope.name and isinstance(spawn_args, ast.Tuple)):
            continue
        if pos < len(spawn_args.elts):
            text = _const_text(indexes, call.scope, spawn_args.elts[pos], depth + 1)
            if text is not None:
                return text
    return None


# the spawn torchrun_reimplementations is judging, while it resolves that spawn's rendezvous (a context variable, not a
# module-global stack: set and reset around the one lookup, safe if lint runs in threads)
_SPAWN_FOCUS: "contextvars.ContextVar" = contextvars.ContextVar("ddpdoctor_spawn_focus", default=None)


def _param_default(scope, name):
    node = scope.node
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    args = node.args
    positional = list(args.posonlyargs) + list(args.args)
    defaults = dict(zip([a.arg for a in positional[len(positional) - len(args.defaults):]], args.defaults))
    defaults.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None})
    d = defaults.get(name)
    return str(d.value) if isinstance(d, ast.Constant) and isinstance(d.value, (str, int)) else None


def _argparse_default(indexes, attr):
    """The default of the command-line option stored in `attr` (`--dist-url` -> dist_url)."""
    # argparse's add_argument, and configargparse's `group.add("--master_port", default=10000)` (OpenNMT)
    for c in (c for ix in indexes for name in ("add_argument", "add") for c in ix.by_name.get(name, ())):
        flags = [a.value for a in c.node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if c.name == "add" and not (flags and flags[0].startswith("--")):
            continue
        dest = c.kw("dest")
        names = {f.lstrip("-").replace("-", "_") for f in flags if f.startswith("--")}
        if isinstance(dest, ast.Constant):
            names = {dest.value}
        if attr in names:
            d = c.kw("default")
            if isinstance(d, ast.Constant) and isinstance(d.value, (str, int)) and not isinstance(d.value, bool):
                return str(d.value)
    return None
