"""Start-method faults: unpicklable datasets under spawn, and the missing `__main__` guard."""
from __future__ import annotations

from ..job import Job
from ..verdict import fold
from . import hit, rule


@rule("LOG014", "unpicklable-under-spawn", catalogue=("E3", "E4", "A5"))
def unpicklable_under_spawn(job: Job):
    """A dataset or function could not be pickled to start a process under spawn ("h5py objects cannot be pickled").

    What it checks
        `TypeError: h5py objects cannot be pickled`, `cannot pickle '_io.BufferedReader' object`,
        `Can't pickle local object`, `AttributeError: Can't get local object`, and DataLoader's `Got
        pickle error when attempting to start a worker Process`.

    Why it matters
        Under `mp.spawn`, and for DataLoader workers in a spawned rank, every argument is pickled
        into the child. An open h5py file, a file handle or a lambda cannot be (pytorch/pytorch#11887
        for h5py in workers). The rank dies at start-up and the others wait for it.

    Example
        [rank0]: TypeError: h5py objects cannot be pickled

    Fix
        Open the file lazily in each process (in `__getitem__` or `worker_init_fn`, keeping only the
        path in `__init__`); define functions at module level; or launch with torchrun so workers
        fork.
    """
    occ = job.get("unpicklable")
    if not occ or not occ.count:
        return
    ev = occ.first[0]
    what = ev.data.get("what") or ev.data.get("obj") or (ev.data.get("thing") or "").strip() or "an object"
    extra, sentence = fold(job, "LOG014", occ.ranks)
    h5 = "h5py" in ev.line.text or what == "h5py"
    yield hit(job, "error", f"{'an h5py object' if h5 else what} could not be pickled to start a process (spawn)",
              at=ev.line, stage=1, ranks=occ.ranks, hosts=occ.hosts, count=occ.count,
              detail=("Under the spawn start method every argument of a new process is pickled; this one cannot be. "
                      + ("Keep the HDF5 path in __init__ and open the file in each worker. " if h5 else "") + sentence).strip(),
              fix=("class DS(Dataset):\n    def __init__(self, path): self.path, self.f = path, None\n"
                   "    def __getitem__(self, i):\n        if self.f is None: self.f = h5py.File(self.path, 'r')  # per process\n"
                   "        ...\nddpdoctor lint train.py   # finds datasets that hold open handles"),
              evidence={"object": what, **extra})


@rule("LOG015", "bootstrapping-phase", catalogue=("A6",))
def bootstrapping_phase(job: Job):
    """A child process started processes while importing the script: the `if __name__ == "__main__":` guard is missing.

    What it checks
        `RuntimeError: An attempt has been made to start a new process before the current process
        has finished its bootstrapping phase.`

    Why it matters
        Under spawn and forkserver every child re-imports the main script; unguarded top-level code
        runs again in the child and tries to start processes (mp.spawn, DataLoader workers) before
        the child is ready (pytorch/rl#1805).

    Example
        RuntimeError: An attempt has been made to start a new process before the current process has
        finished its bootstrapping phase.

    Fix
        Move the top-level work into `main()` and call it under `if __name__ == "__main__":`.
        `ddpdoctor lint train.py` points at the line.
    """
    occ = job.get("bootstrapping")
    if not occ or not occ.count:
        return
    ev = occ.first[0]
    yield hit(job, "error", "processes were started at import time: the `if __name__ == \"__main__\":` guard is missing",
              at=ev.line, stage=1, ranks=occ.ranks, hosts=occ.hosts, count=occ.count,
              detail="A spawned child re-imported the script and ran its top-level code, which starts processes again.",
              fix='def main():\n    ...\n\nif __name__ == "__main__":\n    main()\n'
                  "ddpdoctor lint train.py   # shows the unguarded line",
              evidence={})
