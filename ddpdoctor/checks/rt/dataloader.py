"""Runtime DataLoader checks (RT020-RT026): workers, start methods, handles and what gets pickled."""
from __future__ import annotations

from ddpdoctor.model import error, warning
from ddpdoctor.model.registry import check
from ddpdoctor.facts.runtime import (at_fork, fork_phrase, forked_workers, local_ranks, rank_subject, rt, section, trainer_args,
                       spawned_workers, usable_cpus, workers, world_size)


def _ds(snap) -> dict:
    return section(snap, "runtime_data").get("dataset") or {}


@check("RT020", "too-many-workers", family="dataloader", needs=("runtime_data",), catalogue=("E1",))
def too_many_workers(snap):
    """DataLoader workers of all ranks on this host exceed the usable CPUs.

    What it checks
        num_workers x ranks on this host against the CPUs this process may use.

    Why it matters
        PyTorch's own warning ("This DataLoader will create N worker processes in total...") looks at
        one DataLoader in one process; with R ranks there are R times as many workers, all competing
        with the training threads. See torch `dataloader.py` `check_worker_number_rationality`.

    Example
        4 ranks x 8 workers on a 16-core node.

    Fix
        Lower num_workers (Trainer: dataloader_num_workers) to about usable cores / ranks - 1.
    """
    n, _method = workers(snap)
    cpus = usable_cpus(snap)
    n_local, how = local_ranks(snap)
    if not n or not cpus or n * n_local <= cpus:
        return
    per = max(0, cpus // n_local - 1)
    what = (f"{n_local} ranks x {n} DataLoader workers = {n * n_local} worker processes" if n_local > 1
            else f"{n} DataLoader workers")
    yield warning(
        f"{what} on {cpus} usable CPUs",
        detail=(f"Each of the {n_local} ranks on this host ({how}) starts {n} workers; together they oversubscribe "
                f"the {cpus} CPUs that the training threads also need."),
        fix=f"dataloader_num_workers={per}   # TrainingArguments; or DataLoader(num_workers={per})",
        subjects=["arg:dataloader_num_workers"],
        evidence={"num_workers": n, "local_ranks": n_local, "usable_cpus": cpus},
    )


@check("RT021", "h5py-open-before-fork", when=("static", "fork"), family="dataloader", needs=("runtime",), catalogue=("E3",))
def h5py_open_before_fork(snap):
    """An open h5py file will be inherited by forked DataLoader workers.

    What it checks
        The dataset holds an open h5py File/Dataset/Group (found by walking its attributes), or
        (at a fork) the process has HDF5 files open, and workers are forked.

    Why it matters
        Forked children share the parent's HDF5 file state. Older HDF5 gave garbage data or
        "KeyError: 'Unable to open object (bad object header version number)'"; with h5py 3.16 /
        HDF5 2.0 reads in forked workers were correct in every layout we tried, so this is advisory.
        Opening lazily per worker is also what makes the dataset work under spawn. See
        pytorch/pytorch#11887 and #11929, torchmd/torchmd-net PR#84.

    Example
        class DS(Dataset):
            def __init__(self, path): self.f = h5py.File(path, "r")

    Fix
        Open the file lazily in __getitem__ (once per worker) and drop it in __getstate__:
            def __getitem__(self, i):
                if self.f is None: self.f = h5py.File(self.path, "r")
    """
    if not (forked_workers(snap) or at_fork(snap)):
        return
    held = _ds(snap).get("h5py") or []
    files = (rt(snap).get("h5py") or {}).get("open_files") or []
    if held:
        attrs = ", ".join(f"{h['attr']} ({h['kind']} of {h['file']})" for h in held[:5])
        yield warning(
            f"the dataset holds an open h5py handle and {fork_phrase(snap)}",
            detail=(f"Open HDF5 objects in the dataset: {attrs}. Each forked worker inherits the parent's handle; "
                    "concurrent reads through inherited HDF5 state are not supported by HDF5."),
            fix="open the h5py.File lazily in __getitem__ (per worker) instead of in __init__",
            subjects=sorted({f"path:{h['file']}" for h in held[:5] if h.get("file")}),
            evidence={"handles": held[:10]},
        )
    elif files and at_fork(snap):
        yield warning(
            f"{len(files)} HDF5 file(s) are open while {fork_phrase(snap)}",
            detail=f"Open files: {', '.join(files[:5])}. The child inherits them; HDF5 does not support that.",
            fix="close the files before forking, or open them in the child",
            subjects=[f"path:{p}" for p in files[:5]],
            evidence={"open_files": files[:10]},
        )


@check("RT022", "dataset-unpicklable", family="dataloader", needs=("runtime_data",), catalogue=("E4",))
def dataset_unpicklable(snap):
    """Spawned DataLoader workers will fail: the dataset cannot be pickled.

    What it checks
        Workers are started with spawn or forkserver (the default inside mp.spawn ranks, on macOS,
        and on Linux from Python 3.14), and a dry-run `pickle` of the dataset, collate_fn and
        worker_init_fn fails, or the dataset holds an open h5py object.

    Why it matters
        Starting a spawned worker pickles the dataset; h5py objects refuse with "TypeError: h5py
        objects cannot be pickled", and the run dies with "Got pickle error when attempting to start
        a worker Process". We measured it with Trainer inside mp.spawn. See h5py/h5py#1512,
        ACEsuit/mace PR#117.

    Example
        A dataset with `self.f = h5py.File(path)` in __init__, trained inside torch.multiprocessing.spawn.

    Fix
        Open resources lazily per worker and drop them when pickled:
            def __getstate__(self): d = self.__dict__.copy(); d["f"] = None; return d
    """
    if not spawned_workers(snap):
        return
    ds = _ds(snap)
    result = ds.get("pickle") or {}
    held = ds.get("h5py") or []
    if result.get("ok") is False or held:
        n, method = workers(snap)
        why = result.get("error") or "TypeError: h5py objects cannot be pickled"
        yield error(
            f"the dataset cannot be pickled into {method} workers: {why}",
            detail=(f"{n} DataLoader workers will be started with '{method}', which pickles "
                    f"{result.get('what', 'the dataset')} ({ds.get('type')}) into each. The dry run failed: {why}."
                    + (f" Open h5py objects: {', '.join(h['attr'] for h in held[:5])}." if held else "")),
            fix="open files lazily in __getitem__ and return them as None from __getstate__; or num_workers=0",
            subjects=["arg:dataloader_num_workers"] + sorted({f"path:{h['file']}" for h in held[:3] if h.get("file")}),
            evidence={"start_method": method, "num_workers": n, "pickle": result, "dataset": ds.get("type")},
        )


@check("RT023", "cuda-before-fork", when=("static", "fork"), reads=("runtime_data",), family="dataloader", needs=("runtime",), catalogue=("E5",))
def cuda_before_fork(snap):
    """CUDA is initialised and the process forks children that may touch CUDA.

    What it checks
        CUDA is initialised in this process, and either a fork that is not a DataLoader's is
        happening now, or forked DataLoader workers are configured for a dataset that holds CUDA
        tensors. (Forked workers of a CPU-only dataset after CUDA init are the normal GPU set-up
        and stay quiet.)

    Why it matters
        A forked child cannot use CUDA: "RuntimeError: Cannot re-initialize CUDA in forked
        subprocess. To use CUDA with multiprocessing, you must use the 'spawn' start method". See
        pytorch/pytorch#40403, traveller59/spconv#408.

    Example
        model.cuda(); then datasets.map(fn, num_proc=4) where fn runs the model.

    Fix
        Keep datasets and workers on the CPU (move batches in the training loop), or use
        multiprocessing_context="spawn" for the DataLoader / children.
    """
    cuda = rt(snap).get("cuda") or {}
    if not cuda.get("initialized"):
        return
    data = section(snap, "runtime_data")
    if at_fork(snap) and data.get("fork_caller") != "dataloader":
        yield error(
            f"CUDA is initialised and {fork_phrase(snap)}",
            detail="The child inherits an unusable CUDA state; any CUDA call in it raises "
                   "\"Cannot re-initialize CUDA in forked subprocess\".",
            fix="create the child processes before CUDA is used, or use the 'spawn' start method",
            subjects=rank_subject(snap), evidence={"cuda": cuda, "caller": data.get("fork_caller")},
        )
    elif forked_workers(snap) and _ds(snap).get("cuda_tensors"):
        yield error(
            "the dataset holds CUDA tensors and its DataLoader workers are forked",
            detail="Workers will index CUDA tensors in a forked child: \"Cannot re-initialize CUDA in forked subprocess\".",
            fix="keep dataset tensors on the CPU and move each batch to the GPU in the training step",
            subjects=rank_subject(snap), evidence={"cuda": cuda},
        )


# Threads that hold no lock a forked child could need: they sleep on their own Event or queue, and the
# child never touches what they guard. Judged by class / target, not by a name anyone can give a thread.
HARMLESS_THREADS = {
    "tqdm._monitor.TMonitor": "tqdm's monitor (sleeps; wakes every 10 s to check bars)",
    "torch.utils.data._utils.pin_memory._pin_memory_loop": "the DataLoader's pin-memory thread",
    "multiprocessing.queues.Queue._feed": "a multiprocessing queue feeder",
}
HARMLESS_NAMES = ("pin_memory", "QueueFeederThread", "tqdm_monitor")


def harmless_thread(t) -> str:
    """Why a thread (a python_thread_kinds entry, or a bare name from older facts) is fork-safe, or ""."""
    if isinstance(t, dict):
        for key in ("class", "target"):
            if t.get(key) in HARMLESS_THREADS:
                return HARMLESS_THREADS[t[key]]
        if t.get("class") in (None, "threading.Thread") and str(t.get("name", "")).startswith(HARMLESS_NAMES[:2]):
            return "a DataLoader helper thread"
        return ""
    return "a known helper thread" if str(t).startswith(HARMLESS_NAMES) else ""


@check("RT024", "fork-while-multithreaded", when=("static", "fork"), family="dataloader", needs=("runtime",), catalogue=("E6",))
def fork_while_multithreaded(snap):
    """Python threads that may hold locks are running while the process forks its workers.

    What it checks
        Forked workers are configured (or a fork is happening now) while Python threads other
        than the main thread are alive, judged by what they are (their class and target, not
        their name): tqdm's `tqdm_monitor`, the DataLoader's pin-memory thread and multiprocessing
        queue feeders sleep on their own primitives and are left out.

    Why it matters
        fork() copies only the calling thread; a lock held by another thread at that instant stays
        locked forever in the child. Python 3.12+ warns "This process (pid=...) is multi-threaded,
        use of fork() may lead to deadlocks in the child." See pytorch/pytorch#138957. Every
        healthy Hugging Face run has tqdm's monitor thread (two under trl): that is no reason to warn.

    Example
        A metrics-upload thread started before DataLoader(num_workers=4) under fork.

    Fix
        Start the workers with forkserver: in a Trainer, `TrainingArguments(dataloader_multiprocessing_context=
        "forkserver", dataloader_persistent_workers=True)` (transformers >= 5; `--dataloader_multiprocessing_context
        forkserver` for the example scripts); with an older Trainer, `torch.multiprocessing.set_start_method(
        "forkserver", force=True)` under `if __name__ == "__main__":` before the Trainer is built; in plain
        PyTorch, `DataLoader(..., multiprocessing_context="forkserver", persistent_workers=True)`. Or start
        the threads after the workers.
    """
    if not (forked_workers(snap) or at_fork(snap)):
        return
    threads = rt(snap).get("threads") or {}
    kinds = threads.get("python_thread_kinds")
    entries = kinds if isinstance(kinds, list) else list(threads.get("python_threads") or [])
    risky = [t for t in entries if not harmless_thread(t)]
    names = [t.get("name") if isinstance(t, dict) else t for t in risky]
    if not names:
        return
    args = trainer_args(snap)
    if args and "dataloader_multiprocessing_context" in args:
        fix = ('TrainingArguments(..., dataloader_multiprocessing_context="forkserver", '
               'dataloader_persistent_workers=True)   # --dataloader_multiprocessing_context forkserver in HF scripts')
    elif args:
        fix = ('import torch.multiprocessing as mp; mp.set_start_method("forkserver", force=True)   '
               '# under if __name__ == "__main__":, before the Trainer is built (this Trainer has no '
               'dataloader_multiprocessing_context)')
    else:
        fix = 'DataLoader(..., multiprocessing_context="forkserver", persistent_workers=True)'
    what = [f"{t.get('name')} ({t.get('target') or t.get('class')})" if isinstance(t, dict) else t for t in risky]
    yield warning(
        f"{len(names)} Python thread(s) running while {fork_phrase(snap)}",
        detail=(f"Live threads: {', '.join(what[:8])}. A lock one of them holds at the fork stays locked in every "
                "child."),
        fix=fix,
        subjects=rank_subject(snap), evidence={"python_threads": names[:20], "python": rt(snap).get("python"),
                                               "harmless_left_out": [t.get("name") if isinstance(t, dict) else t
                                                                     for t in entries if harmless_thread(t)][:20]},
    )


@check("RT025", "spawned-workers-not-persistent", family="dataloader", needs=("runtime_data",), catalogue=("E7",))
def spawned_workers_not_persistent(snap):
    """Spawned workers are started again at every epoch and evaluation.

    What it checks
        Workers use spawn or forkserver and persistent_workers is off.

    Why it matters
        Each spawned worker starts an interpreter, re-imports the main module (torch,
        transformers: seconds) and unpickles the dataset, and without persistent_workers this is
        repeated for every epoch and every evaluation pass. See pytorch/pytorch#131931 and #55455.

    Example
        Trainer inside mp.spawn with dataloader_num_workers=4 and many short epochs.

    Fix
        dataloader_persistent_workers=True   # TrainingArguments; DataLoader(persistent_workers=True)
    """
    n, method = workers(snap)
    data = section(snap, "runtime_data")
    if not spawned_workers(snap) or data.get("persistent_workers"):
        return
    yield warning(
        f"{n} {method} workers are re-created at every epoch (persistent_workers is off)",
        detail=(f"Every epoch and evaluation starts {n} new '{method}' interpreters that re-import your script's "
                "imports and unpickle the dataset."),
        fix="dataloader_persistent_workers=True   # TrainingArguments; or DataLoader(persistent_workers=True)",
        subjects=["arg:dataloader_persistent_workers"],
        evidence={"num_workers": n, "start_method": method},
    )


@check("RT026", "iterable-dataset-not-sharded", family="dataloader", needs=("runtime_data",), catalogue=("E9",))
def iterable_dataset_not_sharded(snap):
    """An IterableDataset whose __iter__ never looks at the worker or rank: every copy yields everything.

    What it checks
        The dataset is an IterableDataset, there are several workers or ranks, and its `__iter__`
        (and the methods it calls) never reads get_worker_info(), a rank or a shard.

    Why it matters
        Each worker and each rank iterates its own copy: "naive settings will return duplicated
        data". Samples repeat and ranks may see different counts (then hang). See the note
        [Custom Samplers and IterableDataset] in torch `dataloader.py`.

    Example
        class Stream(IterableDataset):
            def __iter__(self): yield from open(self.path)

    Fix
        Shard inside __iter__: info = torch.utils.data.get_worker_info(); skip lines so that worker
        w of rank r reads every (n_workers * world_size)-th item starting at r * n_workers + w.
    """
    ds = _ds(snap)
    if not ds.get("iterable") or ds.get("iter_shards") is not False:
        return
    n, _ = workers(snap)
    world = world_size(snap)
    if n <= 1 and world <= 1:
        return
    yield warning(
        f"{ds.get('type')} is an IterableDataset that does not shard: {max(n, 1)} workers x {world} ranks repeat its data",
        detail=("Its __iter__ never reads get_worker_info() or the rank, so every worker of every rank yields the "
                "whole stream."),
        fix="shard in __iter__ with torch.utils.data.get_worker_info() and the rank (see `ddpdoctor explain RT026`)",
        subjects=rank_subject(snap), evidence={"dataset": ds.get("type"), "num_workers": n, "world_size": world},
    )
