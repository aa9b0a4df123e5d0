"""A rank-conditional exit from a training loop that runs collectives (round 8, a preview rule)."""
from __future__ import annotations

import ast
from typing import Iterator, List, Optional, Tuple

from . import rule
from ..analysis import Scope
from ..conditions import body_others, body_rank0, not_distributed
from ._common import C10D_COLLECTIVES, DATA_PARALLEL_WRAPPERS

_COLLECTIVES = C10D_COLLECTIVES
_SOURCE = ("pytorch/pytorch torch/distributed/distributed_c10d.py (all_reduce/barrier/broadcast: 'This function "
           "requires that all processes in the main group enter this function') and "
           "torch/nn/parallel/distributed.py (the reducer all-reduces gradient buckets during every backward), "
           "torch 2.13.0 cf30153c4c131c8164ee7798e5022d810682e2cb")


def _exits(stmts: List[ast.stmt], under: bool, loop_level: bool) -> Iterator[Tuple[ast.stmt, bool]]:
    """(break/return statement, whether a rank test encloses it) for the exits of one loop body: a `break` of this
    loop (not of an inner one), or a `return` anywhere in it (not in a nested function)."""
    for st in stmts:
        if isinstance(st, ast.Break) and loop_level:
            yield st, under
        elif isinstance(st, ast.Return):
            yield st, under
        elif isinstance(st, ast.If):
            test = st.test
            rank_only = not not_distributed(test) and (body_rank0(test) or body_others(test))
            yield from _exits(st.body, under or rank_only, loop_level)
            yield from _exits(st.orelse, under, loop_level)
        elif isinstance(st, (ast.For, ast.AsyncFor, ast.While)):
            yield from _exits(st.body, under, False)
            yield from _exits(st.orelse, under, False)
        elif isinstance(st, (ast.With, ast.AsyncWith)):
            yield from _exits(st.body, under, loop_level)
        elif isinstance(st, ast.Try):
            for block in (st.body, st.orelse, st.finalbody, *[h.body for h in st.handlers]):
                yield from _exits(block, under, loop_level)


def _collective_in(index, scope: Scope, node: ast.AST, wrapped: bool, depth: int = 0) -> Optional[int]:
    """The line of a collective the loop runs on every iteration: a torch.distributed collective, a backward of a
    DDP/FSDP model (its reducer all-reduces), or one of those inside a function of this file the loop calls."""
    first, last = node.lineno, getattr(node, "end_lineno", node.lineno)
    for call in scope.calls:
        if not first <= call.line <= last:
            continue
        q = call.qual or ""
        if q.startswith("torch.distributed.") and call.name in _COLLECTIVES:
            return call.line
        if wrapped and call.name == "backward":
            return call.line
        if depth == 0 and call.name and isinstance(call.node.func, (ast.Name, ast.Attribute)):
            for s in index.scopes:
                if s.kind == "function" and s.name == call.name and s is not scope and \
                        _collective_in(index, s, s.node, wrapped, 1) is not None:
                    return call.line
    return None


@rule("LINT019", "rank-conditional-loop-exit")
def rank_conditional_loop_exit(t):
    """A `break` or `return` under a rank test inside a loop whose iterations run collectives.

    What it checks
        A `for`/`while` loop that runs a collective on every iteration (a `torch.distributed` collective such as
        `all_reduce`/`barrier`/`broadcast`, the backward of a DistributedDataParallel/FSDP model, or a function
        of this file that does) and contains a `break` of that loop, or a `return`, under a test that holds on
        rank 0 only or on the other ranks only (`if rank == 0: ... if bad_epochs > patience: break`). Quiet when
        the test says the run is not distributed (`local_rank == -1`) and when the exit is not under a rank test
        (the usual fix: rank 0 decides, broadcasts the decision, every rank breaks). A preview rule (round 8):
        a note by default, a warning with `--preview`.

    Why it matters
        Collectives must be entered by every process of the group (torch/distributed/distributed_c10d.py), and
        DDP's reducer all-reduces the gradients in every backward (torch/nn/parallel/distributed.py). When rank 0
        leaves the loop, the others start the next iteration and block in its first collective until the NCCL
        timeout: the job hangs at the end of training (early stopping) or at the step rank 0 stopped.

    Example
        for epoch in range(epochs):
            train_one_epoch(ddp_model, loader)
            if rank == 0 and val_loss(ddp_model.module) > best:
                break

    Fix
        Decide on one rank, share the decision, exit everywhere:
        `stop = torch.tensor([int(should_stop)], device=device); dist.broadcast(stop, src=0)`;
        `if stop.item(): break`.
    """
    index = t.index
    if not index.scopes or not any(s.loops for s in index.scopes):
        return
    wrapped = t.facts.cache.get("rank_break.wrapped")
    if wrapped is None:  # some file of the run wraps a model in DDP/FSDP: a backward there is a collective
        wrapped = any(q in ix.by_qual for ix in t.facts.indexes.values() for q in DATA_PARALLEL_WRAPPERS)
        t.facts.cache["rank_break.wrapped"] = wrapped
    for scope in index.scopes:
        if not scope.loops:
            continue
        for loop in scope.loops:
            if loop.ctx.rank0 or loop.ctx.gated:
                continue  # the loop itself runs on one rank
            hits = [st for st, under in _exits(loop.node.body, False, True) if under]
            if not hits:
                continue
            collective = _collective_in(index, scope, loop.node, wrapped)
            if collective is None or t.facts.dead(scope, index):
                continue  # (dead: nothing calls the function; checked last, it reads the run's sources)
            exit_node = hits[0]
            kind = "break" if isinstance(exit_node, ast.Break) else "return"
            yield t.finding(
                "warning", exit_node,
                f"`{kind}` under a rank test leaves a loop whose iterations run collectives: the other ranks "
                "block in the next one",
                detail=(f"The loop at line {loop.node.lineno} runs a collective on every iteration (line {collective}). "
                        f"This `{kind}` runs on some ranks only, so those ranks leave while the rest enter the next "
                        "iteration's collective and wait for them until the process-group timeout."),
                fix=("stop = torch.tensor([int(should_stop)], device=device)   # decided on rank 0\n"
                     "torch.distributed.broadcast(stop, src=0)\n"
                     "if stop.item():\n"
                     "    break   # every rank leaves together"),
                evidence={"loop_line": loop.node.lineno, "collective_line": collective, "source": _SOURCE},
            )
