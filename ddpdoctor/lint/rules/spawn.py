"""A1/A5: processes started by hand (mp.spawn, multiprocessing.Process) instead of by torchrun."""
from __future__ import annotations

import ast
from ..names import dotted
from . import rule
from ._common import (DDP, HAND_ENV, INIT_PG, builds_trainer, hard_coded_init_method, picks_port, spawn_sites,
                      torchrun_line)

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
    fn = index.function_of(target, call.scope)
    if fn is not None:
        return index, fn, None
    expr = target
    if isinstance(expr, ast.Call) and expr.args and (dotted(expr.func) or "").endswith("partial"):
        expr = expr.args[0]
    qual = index.qual(expr, call.scope)
    if not qual or "." not in qual.lstrip("."):
        return None
    module, name = qual.rsplit(".", 1)
    found = t.sibling(module)
    if found is None:
        return None
    path, other = found
    fn = other.module.functions.get(name)
    return (other, fn, path) if fn is not None else None


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
        builders = [c for s in index.reachable(fn) for c in s.calls if builds_trainer(index, c)]
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
        builds a Trainer is LINT001 instead.) The target is followed one hop into the project's own
        modules (`from src.utils.distributed import init_distributed`). When the script picks a free
        port at run time, the finding says so.

    Why it matters
        It works, but it re-implements torchrun badly: no LOCAL_RANK or LOCAL_WORLD_SIZE for the
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
    for site in torchrun_reimplementations(t):
        call, kind, env, inits, target, index, elsewhere, hard, helpers = site
        how = "torch.multiprocessing.spawn" if kind == "spawn" else "multiprocessing.Process"
        unset = [n for n in ("LOCAL_RANK", "LOCAL_WORLD_SIZE", "OMP_NUM_THREADS")
                 if not (t.index.sets_env(n) or (elsewhere and index.sets_env(n)))]
        lacks = ", ".join(n for n in unset if n != "LOCAL_WORLD_SIZE")
        lacks = f"{lacks} or error reporting" if lacks else "error reporting"
        fixed_port = bool(hard) or not (picks_port(t.index) or (elsewhere and picks_port(index)) or any(
            picks_port(h) for h in helpers))
        helper = next((h for h in helpers if any(s2 is inits[0].scope for s2 in h.scopes)), None)
        init_at = f"line {inits[0].line}" + (f" of {helper.path}" if helper is not None else "")
        what = ", ".join(env) + " set by hand" if env else f"init_method={hard!r} hard-coded"
        if env and hard:
            what += f" and init_method={hard!r}"
        port = ("the port is fixed (the next job on this machine collides with it)" if fixed_port else
                "the port is picked at run time, but nothing else torchrun does is")
        yield t.finding(
            "warning", call.node,
            f"{how} with {what} re-implements torchrun without {lacks}",
            detail=(f"{_what_it_starts(target).capitalize()} calls init_process_group ({init_at}) "
                    + (f"after the script sets {', '.join(env)} itself" if env else
                       f"with the rendezvous address written into the code ({hard})")
                    + ". " + (f"Nothing sets {'/'.join(unset)}; " if unset else "")
                    + f"{port}; a crashed rank is not reported by rank, and the arguments are pickled into "
                    "every child."),
            fix=("# in the worker: dist.init_process_group(backend); local_rank = int(os.environ['LOCAL_RANK'])\n"
                 + torchrun_line(t.index, call)),
            evidence={"launcher": how, "init_process_group_line": inits[0].line, "env_set_by_hand": env,
                      "init_method": hard, "port_fixed": fixed_port},
        )


def _project_helper(t, call):
    """(index, function) for a call into a module of the user's project (`from src.utils.distributed
    import init_distributed`), parsed but never imported; None for library calls."""
    q = call.qual
    if not q or "." not in q.lstrip(".") or q.split(".")[0] in ("torch", "os", "sys", "transformers", "accelerate"):
        return None
    module, name = q.rsplit(".", 1)
    found = t.sibling(module)
    if found is None:
        return None
    other = found[1]
    fn = other.module.functions.get(name)
    return (other, fn) if fn is not None else None


def torchrun_reimplementations(t) -> list:
    """Spawn sites that LINT002 reports: (call, kind, env names set by hand, init_process_group calls,
    target, index of the target's file, other file or None, hard-coded init_method or None)."""
    out = []
    for call, target, kind in spawn_sites(t.index):
        resolved = resolve_target(t, call, target)
        if resolved is None:
            continue
        index, fn, elsewhere = resolved
        reach = index.reachable(fn)
        calls = [c for s in reach for c in s.calls]
        if any(builds_trainer(index, c) for c in calls):
            continue  # LINT001 says it louder
        inits = [c for c in calls if c.qual == INIT_PG]
        helper_env = []
        helpers = []
        if not inits:  # `init_distributed(...)` from the project's own utils module (I-JEPA): one hop
            for c in calls:
                found = _project_helper(t, c)
                if found is not None:
                    other, helper = found
                    reach2 = other.reachable(helper)
                    ids = {id(x) for x in reach2}
                    inits += [x for s2 in reach2 for x in s2.calls if x.qual == INIT_PG]
                    calls = calls + [x for s2 in reach2 for x in s2.calls]
                    helper_env += [e for e in other.env_sets if id(e.scope) in ids]
                    helpers.append(other)
        if not inits or any((c.qual or "").startswith("torch.distributed.rpc.") for c in calls):
            continue  # RPC jobs give each rank a role and rendezvous through MASTER_*: not a data-parallel launcher
        env_sets = [e for e in t.index.env_sets + (index.env_sets if elsewhere else []) + helper_env
                    if e.name in HAND_ENV and not e.ctx.env_test]
        hard = next((h for h in (hard_coded_init_method(c) for c in inits) if h), None)
        if hard and not env_sets and not any(c.qual == DDP or c.name == "backward" for c in calls):
            hard = None  # a harness that only rendezvous (collective tests, demos): not a training launcher
        if not env_sets and not hard:
            continue
        out.append((call, kind, sorted({e.name for e in env_sets}), inits, target, index, elsewhere, hard, helpers))
    return out
