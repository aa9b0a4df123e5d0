"""A rendezvous port each process picks for itself (round 17, a preview rule)."""
from __future__ import annotations

import ast
from typing import Optional

from ..names import last_name
from . import rule
from ._common import INIT_PG

# pytorch/pytorch torch/distributed/rendezvous.py (the venv's torch 2.13.0): `_env_rendezvous_handler` reads
# MASTER_ADDR and MASTER_PORT from this process's environment and `_create_c10d_store` makes rank 0 the TCPStore
# server on that port while every other rank connects to it as a client; the tcp:// handler does the same with the
# URL's port. Processes that disagree on the port never meet: the clients time out.
_SOURCE = "pytorch/pytorch torch/distributed/rendezvous.py (_env_rendezvous_handler, _create_c10d_store; torch 2.13.0)"

_RANDOM = frozenset(("randint", "randrange", "random", "choice", "uniform", "getrandbits"))
_PORT_WORDS = ("free_port", "freeport", "find_port", "get_port", "open_port", "unused_port", "available_port",
               "random_port", "pick_port")


def _binds_port_zero(fn: ast.AST) -> bool:
    """The function asks the OS for a free port: `s.bind(("", 0))` (then getsockname()[1])."""
    for n in ast.walk(fn):
        if isinstance(n, ast.Call) and last_name(n.func) == "bind" and n.args:
            a = n.args[0]
            if isinstance(a, ast.Tuple) and len(a.elts) == 2 and isinstance(a.elts[1], ast.Constant) and \
                    a.elts[1].value == 0:
                return True
    return False


def _varies(expr: Optional[ast.AST], scope, index, depth: int = 0) -> str:
    """The call that makes the value differ from process to process (a random number, a free port the OS picks),
    followed through names assigned in this function and through this file's functions; "" when none."""
    if expr is None or depth > 2:
        return ""
    # `comm.bcast(_find_free_port(), root=0)` (guided-diffusion's dist_util, MPI launchers): rank 0's port handed to
    # every process, the agreement the rule looks for (fr87 ammunk, fr93 SketchKnitter)
    if any(isinstance(n, ast.Call) and (last_name(n.func) or "").lower().startswith(("bcast", "broadcast"))
           for n in ast.walk(expr)):
        return ""
    for n in ast.walk(expr):
        if isinstance(n, ast.Call):
            name = last_name(n.func) or ""
            if name in _RANDOM or any(w in name.lower() for w in _PORT_WORDS):
                return ast.unparse(n)
            fn = index.function_of(n.func, scope)
            if fn is not None and fn.kind == "function" and (_binds_port_zero(fn.node) or any(
                    isinstance(m, ast.Call) and (last_name(m.func) or "") in _RANDOM for m in ast.walk(fn.node))):
                return ast.unparse(n)
        elif isinstance(n, ast.Name) and n.id in scope.values and depth < 2:
            got = _varies(scope.values[n.id], scope, index, depth + 1)
            if got:
                return got
    return ""


def _varies_from_callers(expr: Optional[ast.AST], scope, index) -> str:
    """The value is a parameter of its function (`def setup(rank, world_size, port): os.environ["MASTER_PORT"] =
    f"{port}"`) and a call of this file hands it a value that differs per process (`port = torch.randint(12300,
    12500, (1,)).item(); setup(rank, world_size, port)` in the spawned main: round 22, fr152 ircam-ismm/
    learning-from-paired-tracks, the reader's miss). Every call site of the function is looked at; one that hands
    in a varying value is enough, since that path runs in every process."""
    if expr is None or scope is None or scope.kind != "function":
        return ""
    names = {n.id for n in ast.walk(expr) if isinstance(n, ast.Name) and n.id in scope.params and
             n.id not in scope.values}
    if not names:
        return ""
    fn = scope.node
    positional = [a.arg for a in fn.args.posonlyargs + fn.args.args] if isinstance(fn, (ast.FunctionDef,
                                                                                       ast.AsyncFunctionDef)) else []
    for other in index.scopes:
        for call in other.calls:
            if index.function_of(call.node.func, other) is not scope:
                continue
            for name in names:
                given = [k.value for k in call.node.keywords if k.arg == name]
                if not given and name in positional:
                    i = positional.index(name)
                    if i < len(call.node.args) and not any(isinstance(a, ast.Starred) for a in call.node.args[:i + 1]):
                        given = [call.node.args[i]]
                got = _varies(given[0], other, index) if given else ""
                if got:
                    return f"{got} (handed to {scope.name}() as `{name}` at line {call.line})"
    return ""


def _world_of_one(call) -> bool:
    size = call.kw("world_size")
    return isinstance(size, ast.Constant) and size.value == 1 and type(size.value) is int


@rule("LINT033", "master-port-per-process")
def master_port_per_process(t):
    """MASTER_PORT set to a random or OS-picked free port in the code every process runs before it joins the group.

    What it checks
        `os.environ["MASTER_PORT"] = str(find_free_port())` (or `random.randint(...)`, or a function of this file that
        binds a socket to port 0 or draws a random number) in the same function (or module body) that then calls
        `init_process_group`: every process runs that code, so each one draws its own port. Quiet where the port is
        drawn once in the launching parent and handed to the workers (an argument, the inherited environment), or
        drawn on one rank and broadcast (`comm.bcast(find_free_port(), root=0)`), for `os.environ.setdefault(...)`, for
        a constant or a value read from the arguments or the environment, and (round 18) before an init of a group of
        one (`world_size=1`).
        A preview rule (round 17): a note by default, a warning with `--preview`.
        Since round 22 also a value that is a parameter of its function, followed to the
        file's calls of that function: a port each process draws and hands to `setup(rank, world_size, port)`.

    Why it matters
        env:// reads MASTER_ADDR and MASTER_PORT in each process (`_env_rendezvous_handler`,
        torch/distributed/rendezvous.py): rank 0 listens on its own port and the other ranks connect to theirs, where
        nobody listens, so they wait until the rendezvous timeout and the job never starts.

    Example
        def worker(rank, world_size):
            os.environ["MASTER_ADDR"] = "localhost"
            os.environ["MASTER_PORT"] = str(find_free_port())
            dist.init_process_group("nccl", rank=rank, world_size=world_size)

    Fix
        Pick the port once in the parent before `mp.spawn` (the children inherit os.environ) and pass it on, or use
        torchrun (`torchrun --standalone --nproc-per-node N train.py`), which chooses one port for all processes.
    """
    index = t.index
    inits = index.by_qual.get(INIT_PG, ())
    if not inits:
        return
    seen = set()
    for e in index.env_sets:
        if e.name != "MASTER_PORT" or e.value is None or id(e.scope) in seen:
            continue
        if isinstance(e.node, ast.Expr) and isinstance(e.node.value, ast.Call) and \
                last_name(e.node.value.func) == "setdefault":
            continue
        if isinstance(e.node, ast.Call) and last_name(e.node.func) == "setdefault":
            continue
        line = getattr(e.node, "lineno", 0)
        later = [c for c in inits if c.scope is e.scope and c.node.lineno > line]
        # a group of one (`init_process_group("gloo", rank=0, world_size=1)`, a dummy group to load a DDP checkpoint:
        # fr115 LingFengGold/PPG-Distill init_dummy_ddp) has no other rank to meet: its own free port is right
        later = [c for c in later if not _world_of_one(c)]
        if not later:
            continue
        what = _varies(e.value, e.scope, index) or _varies_from_callers(e.value, e.scope, index)
        if not what:
            continue
        seen.add(id(e.scope))
        where = "at module level" if e.scope.kind == "module" else f"in {e.scope.qualname}()"
        yield t.finding(
            "warning", e.node,
            f"MASTER_PORT = {what} {where}, which every process runs before init_process_group (line "
            f"{later[0].node.lineno}): each process draws its own port, so the ranks never meet",
            detail=("env:// (and tcp://) rendezvous: rank 0 serves the TCPStore on its MASTER_PORT and the other ranks "
                    "connect to theirs (torch/distributed/rendezvous.py); ports drawn per process differ, the clients "
                    "wait for the rendezvous timeout."),
            fix="choose the port once in the parent before mp.spawn (children inherit os.environ), or launch with "
                "torchrun --standalone",
            evidence={"value": what, "init_line": later[0].node.lineno, "source": _SOURCE},
        )
