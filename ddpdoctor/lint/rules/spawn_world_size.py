"""A spawn whose process count and the world size its ranks join disagree (round 18, a preview rule)."""
from __future__ import annotations

import ast
from typing import Optional, Tuple

from . import rule
from ._common import INIT_PG, spawn_sites

# pytorch/pytorch torch/distributed/distributed_c10d.py init_process_group: "world_size (int, optional): Number of
# processes participating in the job", and the store rendezvous waits for world_size ranks (rendezvous.py
# _create_c10d_store / TCPStore(world_size=...)); torch/multiprocessing/spawn.py starts exactly nprocs processes.
_SOURCE = ("pytorch/pytorch torch/distributed/distributed_c10d.py (init_process_group: world_size is the number of "
           "processes in the job; a rank must be < world_size) and torch/multiprocessing/spawn.py (start_processes "
           "starts nprocs processes)")


def _int(expr: Optional[ast.AST]) -> Optional[int]:
    if isinstance(expr, ast.Constant) and type(expr.value) is int:
        return expr.value
    return None


def _world_literal(index, fn, depth: int = 0) -> Optional[Tuple[int, ast.AST]]:
    """(N, the node that fixes it) when the world size the spawned function joins is the literal N: `world_size=4`
    at its init_process_group, or a parameter of the function holding the init that the target's call passes as
    a literal (`setup(rank, 4)` with `def setup(rank, world_size): init_process_group(..., world_size=world_size)`,
    fr111 OxWearables/ssl-wearables)."""
    if depth > 2:
        return None
    for scope in index.reachable(fn):
        for call in scope.calls:
            if call.qual != INIT_PG:
                continue
            size = call.kw("world_size")
            got = _int(size)
            if got is not None:
                return got, size
            if not isinstance(size, ast.Name) or size.id not in scope.params or scope is fn:
                continue
            pos = scope.params.index(size.id)
            for site in fn.calls:
                if index.function_of(site.node.func, site.scope) is not scope:
                    continue
                arg = site.node.args[pos] if pos < len(site.node.args) else next(
                    (k.value for k in site.node.keywords if k.arg == size.id), None)
                got = _int(arg)
                if got is not None:
                    return got, arg
    return None


@rule("LINT035", "spawn-world-size-mismatch")
def spawn_world_size_mismatch(t):
    """`mp.spawn(fn, nprocs=<a count decided at run time>)` whose ranks join a world of a fixed size.

    What it checks
        A `torch.multiprocessing.spawn` whose `nprocs` is not a literal (`torch.cuda.device_count()`, a name set from
        it) while the function it starts joins `init_process_group(..., world_size=N)` with a literal N, written at
        the init or passed as a literal to the set-up helper that holds it (`setup(rank, 4)`). Quiet when `nprocs` is
        the same literal. A preview rule (round 18): a note by default, a warning with `--preview`.

    Why it matters
        spawn starts exactly `nprocs` processes (torch/multiprocessing/spawn.py), and the rendezvous waits for
        `world_size` of them (torch/distributed/distributed_c10d.py; a rank must be below the world size). On a machine
        whose GPU count is not N, either the extra ranks fail with an invalid rank or the group waits forever for
        ranks that never start: the script works only where the count happens to be N.

    Example
        def setup(rank, world_size):
            dist.init_process_group("nccl", rank=rank, world_size=world_size)
        def worker(rank, cfg):
            setup(rank, 4)
        mp.spawn(worker, nprocs=torch.cuda.device_count(), args=(cfg,))

    Fix
        Hand the process count to the workers and use it: `mp.spawn(worker, nprocs=n, args=(n, cfg))` and
        `setup(rank, world_size)`, or launch with torchrun and call `init_process_group()` without a world size.
    """
    from .spawn import resolve_target  # the spawn rule's target resolution (same package, no layer crossed)

    for call, target, kind in spawn_sites(t.index):
        if kind != "spawn":
            continue
        nprocs = call.kw("nprocs")
        if nprocs is None or _int(nprocs) is not None:
            continue
        if isinstance(nprocs, ast.Name):  # `world_size = 2; mp.spawn(fn, nprocs=world_size)`: a literal after all
            bound = call.scope.values.get(nprocs.id)
            if bound is None and call.scope.kind != "module":
                bound = t.index.module.values.get(nprocs.id)
            if _int(bound) is not None:
                continue
        resolved = resolve_target(t, call, target)
        if resolved is None:
            continue
        index, fn, _elsewhere = resolved
        got = _world_literal(index, fn)
        if got is None or got[0] == 1:
            continue  # a world of one: the parent's own single-process path, not the spawned ranks'
        n, node = got
        if t.facts.dead(call.scope, t.index):
            continue
        yield t.finding(
            "warning", call.node,
            f"torch.multiprocessing.spawn starts `{ast.unparse(nprocs)}` processes, but the ranks join a world of "
            f"{n} (line {getattr(node, 'lineno', call.line)}): on a machine with another count some ranks are invalid "
            "or the rendezvous waits forever",
            detail=(f"spawn starts exactly nprocs processes; init_process_group waits for world_size={n} ranks and "
                    "rejects a rank >= world_size. Where the count is not n the job fails or hangs at start-up."),
            fix=(f"n = {ast.unparse(nprocs)}\n"
                 "mp.spawn(worker, nprocs=n, args=(n, ...))   # and init_process_group(..., world_size=n)"),
            evidence={"nprocs": ast.unparse(nprocs), "world_size": n,
                      "world_size_line": getattr(node, "lineno", call.line), "source": _SOURCE},
        )
    return True
