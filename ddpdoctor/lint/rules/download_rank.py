"""A dataset downloaded by every rank into one folder (round 14, a preview rule)."""
from __future__ import annotations

import ast
from typing import Optional

from . import rule
from ..analysis import Call, ModuleIndex
from ..names import dotted
from ._common import spawn_sites
from ._every_rank import every_rank_calls, unproven
from ._reach import callers_of, reach

_SOURCE = ("pytorch/vision torchvision/datasets/utils.py (download_url: the archive is written in place at "
           "root/<file>, then checked and extracted; nothing locks it against another process), "
           "pytorch/tutorials issue 3065 ('corrupted dataset due to simultaneous downloading by all ranks', the FSDP "
           "MNIST tutorial under mp.spawn) and pytorch-ignite/code-generator pull 62 ('fix: download datasets only "
           "on rank 0': `if rank > 0: barrier()` before the dataset, `if rank == 0: barrier()` after)")

# Functions whose name says they run once per node or once per job before the ranks read the data.
_ONCE = ("prepare_data",)
# Context managers that let one process go first (`with torch_distributed_zero_first(rank):`,
# `with accelerator.main_process_first():`, `with training_args.main_process_first():`).
_FIRST_WORDS = ("first", "zero_first")


def _lightning_hook(index: ModuleIndex, scope) -> bool:
    """`prepare_data` is the Lightning hook the Trainer calls on one process per node (lightning/pytorch/core/hooks.py
    DataHooks.prepare_data: "called only within a single process"; trainer/connectors/data_connector.py calls it on
    local rank 0): only in a class whose bases name Lightning (or a class of unknown, unresolved base). A method of
    the same name on a plain nn.Module runs wherever its caller runs it (fr112 prakashchhipa/MPD: BaseSSL(nn.Module)
    .prepare_data, called by every spawned rank)."""
    klass = scope.cls
    if klass is None:
        return True  # a module-level prepare_data(): its name is all there is to go on
    bases = index.class_bases(klass)
    if any("lightning" in b.lower() or b.endswith(("LightningDataModule", "LightningModule")) for b in bases):
        return True
    return not any(b.startswith("torch.") for b in bases)  # a base the file cannot resolve: keep the old reading


def _downloads(call: Call) -> bool:
    """`SomeDataset(..., download=True)`: a literal True (torchvision's datasets and the project's look-alikes)."""
    value = call.kw("download")
    return isinstance(value, ast.Constant) and value.value is True and isinstance(call.node.func, (ast.Name,
                                                                                                   ast.Attribute))


def _is_barrier(c: Call) -> bool:
    name = (c.name or "").lower()
    return "barrier" in name or name in ("synchronize", "wait_for_everyone")


def _goes_first_before(index: ModuleIndex, scope, line: int) -> bool:
    """The rank-0-first pattern earlier in the same function: a barrier under a test of the rank
    (`if rank != 0: dist.barrier()` ... download ... `if rank == 0: dist.barrier()`), or a download on rank 0
    only followed by a barrier (`if rank == 0: MNIST(download=True)`; `dist.barrier()`; `MNIST(...)`). A barrier
    every rank passes before anything was downloaded (right after init_process_group) does not count."""
    mine = [c for c in index.calls if c.scope is scope and c.line < line]
    if any(_is_barrier(c) and c.ctx.gated for c in mine):
        return True
    first = [c.line for c in mine if c.ctx.gated and _downloads(c)]
    return bool(first) and any(_is_barrier(c) and c.line > min(first) for c in mine)


# Inter-process file locks: the processes that open the same lock file take turns in the block, so the first
# downloads and the others find the files (tox-dev/filelock src/filelock/__init__.py: FileLock = UnixFileLock
# (fcntl.flock) or WindowsFileLock, SoftFileLock; Horovod's examples wrap the MNIST download in
# `with FileLock(os.path.expanduser("~/.horovod_lock")):`, horovod/horovod examples/pytorch/pytorch_mnist.py;
# fr145 aaronchann1227/DeepLearning_PyTorch, both readers: no fault). Python's fcntl.flock(fd, LOCK_EX) is the
# same lock by hand (docs.python.org/3/library/fcntl.html).
_FILE_LOCKS = ("FileLock", "SoftFileLock", "UnixFileLock", "WindowsFileLock", "BaseFileLock")


def _context_name(item) -> str:
    e = item.context_expr
    return dotted(e.func if isinstance(e, ast.Call) else e) or ""


def _first_context(scope_node: ast.AST, target: ast.AST) -> bool:
    """The call sits in `with <...first...>():` of the same function, or in `with FileLock(...):` (a lock the
    processes take in turn), or after an `fcntl.flock(..., LOCK_EX)` of the same function."""
    flock = None
    for node in ast.walk(scope_node):
        if isinstance(node, (ast.With, ast.AsyncWith)) and any(
                any(w in _context_name(i).lower() for w in _FIRST_WORDS) or
                _context_name(i).rsplit(".", 1)[-1] in _FILE_LOCKS for i in node.items):
            if any(target is n for stmt in node.body for n in ast.walk(stmt)):
                return True
        elif isinstance(node, ast.Call) and (dotted(node.func) or "").rsplit(".", 1)[-1] in ("flock", "lockf") and any(
                "LOCK_EX" in (dotted(a) or "") for a in node.args[1:]):
            if node.lineno < getattr(target, "lineno", 0) and (flock is None or node.lineno < flock):
                flock = node.lineno
    return flock is not None


def _per_rank_root(call: Call) -> bool:
    """The dataset's folder is built from the rank: `MNIST('data-%d' % hvd.rank(), download=True)` (fr97
    zarzen/distributed-training, Horovod's example), `f"data_{rank}"`: every rank downloads into its own folder."""
    root = call.kw("root")
    if root is None and call.node.args:
        root = call.node.args[0]
    if root is None or isinstance(root, ast.Constant):
        return False
    for n in ast.walk(root):
        if isinstance(n, ast.Call) and (dotted(n.func) or "").rsplit(".", 1)[-1] in ("rank", "get_rank", "local_rank"):
            return True
        if isinstance(n, (ast.Name, ast.Attribute)) and "rank" in (dotted(n) or "").rsplit(".", 1)[-1].lower():
            return True
    return False


def _one_goes_first(t, index: ModuleIndex, call: Call) -> Optional[str]:
    """Why the download is not concurrent: a barrier or a go-first context here or at a caller, or a folder of its
    own for each rank."""
    if _per_rank_root(call):
        return "a folder per rank"
    scope = call.scope
    if scope.name in _ONCE and _lightning_hook(index, scope):
        return f"{scope.name}()"
    if _goes_first_before(index, scope, call.line) or _first_context(scope.node, call.node):
        return "a barrier or a go-first context"
    if scope.kind == "function":
        for cix, site in callers_of(reach(t), scope):
            if _goes_first_before(cix, site.scope, site.line) or _first_context(site.scope.node, site.node):
                return "a barrier or a go-first context at the caller"
    return None


_LOOPBACK = ("localhost", "127.", "0.0.0.0", "::1")


def _machine_per_rank(t) -> bool:
    """Round 24 (lint32; fr164 Suvin-Sundararajan/cs243 resnet_ddp.py, judged debatable): a job started by hand, one
    process per machine: no file of the run starts processes (no spawn, no Process) or names a local rank (no
    LOCAL_RANK, no `local_rank`: nothing a per-node launcher sets), and the rendezvous address is set to a remote host
    (`os.environ["MASTER_ADDR"] = "3.12.150.213"`; torch's env:// rendezvous: MASTER_ADDR is the address of the
    rank-0 node, torch/distributed/rendezvous.py). Each rank then downloads into its own machine's folder; the
    downloads meet only on a shared filesystem, which the files do not show: a note."""
    remote = False
    for ix in t.facts.indexes.values():
        if spawn_sites(ix) or "local_rank" in (ix.source or "").lower():
            return False
        for e in ix.env_sets:
            if e.name == "MASTER_ADDR":
                if not (isinstance(e.value, ast.Constant) and isinstance(e.value.value, str)) or \
                        not e.value.value.strip() or e.value.value.strip().lower().startswith(_LOOPBACK):
                    return False
                remote = True
    return remote


@rule("LINT027", "download-on-every-rank")
def download_on_every_rank(t):
    """A dataset downloaded by every rank at once into the same folder.

    What it checks
        In a distributed script (it joins a process group, spawns the ranks, is launched by torchrun or, since
        round 21, builds a Lightning Trainer whose strategy re-runs the script per rank): a
        dataset built with `download=True` (torchvision's `datasets.MNIST(root, download=True)` and look-alikes)
        that every rank runs into one folder (a root built from the rank, `'data-%d' % hvd.rank()`, is each
        rank's own: round 15 wave 3): not under a rank test, not in a function every caller gates, not in the parent
        before `mp.spawn`, not after a barrier in the same function or its caller (the rank-0-first pattern), not
        in `with ...main_process_first():` / `torch_distributed_zero_first(...)`, not in `with FileLock(...):` or
        after `fcntl.flock(fd, LOCK_EX)` (round 25: the processes take turns), not in a LightningDataModule's
        `prepare_data` (since round 18 only Lightning's: a `prepare_data` method of a plain `nn.Module` runs where it
        is called). A warning when the call is shown to run on every rank of a training run, else a note.
        Since round 24 (lint32) a note when each rank is started by hand, one process per machine (no spawn, no
        local rank anywhere, MASTER_ADDR a remote address): the downloads meet only on a shared filesystem.
        A preview rule (round 14): a note by default, a warning with `--preview`.

    Why it matters
        torchvision writes the archive in place (`download_url` opens root/<file> for writing, then checks the
        MD5 and extracts it); nothing locks the folder. On a first run N processes truncate and write the same
        file and extract over each other: one reads a half-written archive ("File not found or corrupted",
        a bad gzip) and dies, the others hang in the first collective (pytorch/tutorials issue 3065). Once the
        data is on disk the call only checks it, so the fault shows on fresh machines and new clusters.

    Example
        dist.init_process_group("nccl")
        train = datasets.CIFAR10("./data", train=True, download=True)

    Fix
        Let rank 0 download first: `if rank != 0: dist.barrier()`, build the dataset, `if rank == 0:
        dist.barrier()`; or download once before launching (or in the parent before `mp.spawn`) and pass
        `download=False` in the ranks.
    """
    index = t.index
    for call, proof in every_rank_calls(t, _downloads, 12, quiet=lambda c: _one_goes_first(t, index, c) is not None):
        # one finding per block: the train and test splits of one block are one download
        name = dotted(call.node.func) or "the dataset"
        apart = proof is not None and _machine_per_rank(t)
        yield t.finding(
            "warning" if proof is not None and not apart else "info", call.node,
            f"{name}(download=True) runs on every rank: the processes download and extract into the same folder "
            "at once" + unproven(t, call, proof) +
            ("; here each rank is started by hand against a remote MASTER_ADDR (one process per machine?): the "
             "downloads meet only on a shared filesystem" if apart else ""),
            detail=("Each rank checks the folder, finds no data on a first run and writes the same archive in place; "
                    "one process reads another's half-written file and fails ('File not found or corrupted'), "
                    "the rest wait in the first collective."),
            fix=("if rank != 0:\n    dist.barrier()          # the others wait while rank 0 downloads\n"
                 f"dataset = {name}(root, download=True)\n"
                 "if rank == 0:\n    dist.barrier()          # rank 0 releases them; they find the data on disk"),
            evidence={"call": name, "every_rank": proof.as_dict() if proof is not None else None,
                      "source": _SOURCE})
