"""DataLoader workers: killed by a bus error (/dev/shm), and too many open files."""
from __future__ import annotations

import re

from ..job import Job
from ..verdict import fold, own_events
from . import hit, rule, who_exited


@rule("LOG010", "dataloader-bus-error", catalogue=("E2",))
def dataloader_bus_error(job: Job):
    """A DataLoader worker was killed: by a bus error (/dev/shm too small), by SIGKILL (the host's OOM killer), or crashed.

    What it checks
        `ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient
        shared memory (shm).`, `RuntimeError: DataLoader worker (pid 1234) is killed by signal:
        Bus error.`, and the same line for the other signals (`Killed`: SIGKILL from the OOM killer;
        `Segmentation fault`) or "exited unexpectedly", each with its own fix. A bare bus error (the shell's
        "Bus error (core dumped)", faulthandler's "Fatal Python error: Bus error") with no line naming a DataLoader
        worker is said as the signal, /dev/shm only as the usual cause (a guess).

    Why it matters
        Workers hand batches to the main process through /dev/shm; Docker gives containers 64 MB.
        The worker dies with SIGBUS when it fills up, the rank raises, and its peers time out
        (nianticlabs/simplerecon#3).

    Example
        [rank2]: RuntimeError: DataLoader worker (pid 8121) is killed by signal: Bus error. It is
        possible that dataloader's workers are out of shared memory.

    Fix
        `docker run --shm-size=8g` (or `--ipc=host`), or fewer workers / smaller `prefetch_factor`.
        `ddpdoctor check` in the container shows /dev/shm against what the workers need.
    """
    occ = job.get("bus_error")
    sigbus = job.get("nccl_sigbus")
    if occ and occ.count and sigbus and sigbus.count and not any(
            "DataLoader" in ev.line.text or "encountered in worker" in ev.line.text for ev in occ.first):
        return  # a bus error with NCCL's frames on the stack, not the DataLoader's message: LOG009 reports it
    if not occ or not occ.count:
        yield from _worker_killed(job)
        return
    ev = occ.first[0]
    extra, sentence = fold(job, "LOG010", occ.ranks)
    if ev.data.get("signal") == "SIGBUS" and "exit" in ev.data:
        # no bus-error line, only a launcher's exit on SIGBUS (exit code -7): the same class, said from the exit
        e = ev.data["by"]
        who = who_exited(e, e.rank) if e.rank is not None else (
            f"local rank {e.local_rank}" if e.local_rank is not None else "a process")
        yield hit(job, "error", f"{who} died of a bus error (SIGBUS, exit {ev.data['exit']}): most likely shared memory "
                  "(/dev/shm) ran out", at=ev.line, stage=0, ranks=sorted(occ.ranks), hosts=occ.hosts, count=occ.count,
                  detail=("The launcher reports the process ended on signal 7, SIGBUS (a negative exit code is minus "
                          "the signal's number), with no Python exception of its own. A bus error is a mapped page "
                          "with no memory behind it: in a training job almost always shared memory (/dev/shm, a "
                          "container's default 64 MB) filled by DataLoader workers' batches or NCCL's segments; "
                          "else a memory-mapped file truncated while it was read. " + sentence).strip(),
                  fix=("docker run --shm-size=8g ...   # or --ipc=host; on SLURM/k8s: a larger /dev/shm (emptyDir medium: Memory)\n"
                       "df -h /dev/shm   # on that node, while the job runs\n"
                       "DataLoader(..., num_workers=2, prefetch_factor=2)   # or need less shared memory\n"
                       "ddpdoctor check   # in the container: /dev/shm size against workers x batch"),
                  evidence={"path": "/dev/shm", "exit": ev.data["exit"], "signal": "SIGBUS", **extra})
        return
    if not any(_DATALOADER_SAID.search(e.line.text) for e in occ.first):
        # a bare bus error ("Bus error (core dumped)", the shell's strsignal(SIGBUS) for the command it ran; "Fatal
        # Python error: Bus error"): no line says a DataLoader worker died. The process that died is the one the
        # shell ran (a rank, or the launcher's child), and /dev/shm is the usual cause, said as a guess, not a finding
        who = f"rank {ev.line.rank}" if ev.line.rank is not None else "a process"
        yield hit(job, "error", f"{who} died of a bus error (SIGBUS) and no line names a DataLoader worker or NCCL: in "
                  "training usually shared memory (/dev/shm) running out (a guess)", at=ev.line, stage=0, ranks=occ.ranks,
                  hosts=occ.hosts, count=occ.count,
                  detail=("The shell (or Python's fault handler) reports a death on signal 7, SIGBUS: a mapped page "
                          "with no memory behind it. No line names a DataLoader worker or NCCL, so which process and "
                          "which mapping are not in these logs. The usual causes in a training job, in order (a guess "
                          "from the signal alone): shared memory (/dev/shm, a container's default 64 MB) filled by "
                          "DataLoader workers' batches or NCCL's segments; a memory-mapped file (a dataset, a "
                          "checkpoint) truncated or on failing storage while it was read; a hardware memory error "
                          "(dmesg). " + sentence).strip(),
                  fix=("df -h /dev/shm   # on that node, while the job runs; docker run --shm-size=8g (or --ipc=host)\n"
                       "dmesg -T | tail -50   # a machine check or an I/O error on the file it mapped\n"
                       "DataLoader(..., num_workers=0)   # if it stops, the workers' shared memory was it\n"
                       "python -X faulthandler train.py   # the Python stack of the crash next time"),
                  evidence={"signal": "SIGBUS", "dataloader_named": False, **extra})
        return
    yield hit(job, "error", f"{'rank ' + str(ev.line.rank) + ': ' if ev.line.rank is not None else ''}a DataLoader "
              "worker was killed by a bus error (/dev/shm too small)", at=ev.line, stage=0, ranks=occ.ranks,
              hosts=occ.hosts, count=occ.count,
              detail=("DataLoader workers pass batches through /dev/shm; a container's default 64 MB runs out and the "
                      "worker dies with SIGBUS. " + sentence).strip(),
              fix=("docker run --shm-size=8g ...   # or --ipc=host\n"
                   "DataLoader(..., num_workers=2, prefetch_factor=2)   # or need less shared memory\n"
                   "ddpdoctor check   # in the container: /dev/shm size against workers x batch"),
              evidence={"path": "/dev/shm", **extra})


# the DataLoader's own words for its worker's bus error (torch/utils/data/_utils/signal_handling.py, DataLoader.cpp's
# SIGBUS handler: "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared
# memory (shm)."; _utils/__init__ / dataloader.py: "DataLoader worker (pid N) is killed by signal: Bus error.")
_DATALOADER_SAID = re.compile(r"DataLoader|encountered in worker|dataloader's workers|[Ww]orker \(pid", re.I)


_WORKER_SIGNAL = {
    "Killed": ("killed by SIGKILL: most likely the host's OOM killer",
               "SIGKILL is what the kernel's OOM killer sends: host RAM ran out, and a worker process (each holds its "
               "own copy of what the dataset object references, plus prefetched batches) was chosen.",
               "dmesg -T | grep -iE 'killed process|out of memory'   # on that node: confirm\n"
               "DataLoader(..., num_workers=2, prefetch_factor=2, persistent_workers=False)   # fewer, lighter workers\n"
               "# keep big data out of the Dataset object (memory-map it, or load per item)"),
    "Segmentation fault": ("crashed with SIGSEGV",
                           "A native library called in the worker (image decoding, a C extension) crashed.",
                           "DataLoader(..., num_workers=0)   # the crash then shows its Python stack in the main process"),
    "Aborted": ("aborted (SIGABRT)", "A native library in the worker aborted.",
                "DataLoader(..., num_workers=0)   # the error then shows in the main process"),
}


def _worker_killed(job: Job):
    """A DataLoader worker that died by another signal (Killed, Segmentation fault) or exited unexpectedly."""
    evs = own_events(job, "worker_killed")
    if not evs:
        return
    ev = evs[0]
    sig = str(ev.data.get("signal", "")).strip().rstrip(".")
    what, why, fix = _WORKER_SIGNAL.get(sig, (
        "exited unexpectedly" if not sig else f"killed by signal {sig}",
        "A worker process died without its own error reaching this log (its exception is printed in the worker).",
        "DataLoader(..., num_workers=0)   # the worker's own exception then shows in the main process"))
    rank = job.who(ev.line)
    extra, sentence = fold(job, "LOG010", [rank])
    pids = str(ev.data.get("pid") or "").strip(" ,")
    many = "," in pids
    who = (f"DataLoader workers (pids {pids})" if many else f"a DataLoader worker (pid {pids})" if pids
           else "a DataLoader worker")
    verb = "" if what.startswith("exited") else ("were " if many else "was ")
    yield hit(job, "error", f"{'rank ' + str(rank) + ': ' if rank is not None else ''}{who} {verb}{what}",
              at=ev.line, stage=0, ranks=[rank] if rank is not None else [], hosts=[ev.line.host] if ev.line.host else [],
              count=len(evs), detail=(why + " The rank then raised and stopped. " + sentence).strip(), fix=fix,
              evidence={"signal": sig or None, "pid": ev.data.get("pid"), **extra})


@rule("LOG011", "too-many-open-files", catalogue=("E8",))
def too_many_open_files(job: Job):
    """The process ran out of file descriptors ("Too many open files").

    What it checks
        `OSError: [Errno 24] Too many open files` and `RuntimeError: received 0 items of ancdata`
        (the same limit, hit while DataLoader workers pass tensors to the main process).

    Why it matters
        With the `file_descriptor` sharing strategy (Linux default), every tensor a worker sends is
        an open descriptor; many workers, large prefetch and many ranks per node exhaust `ulimit -n`
        (pytorch/pytorch#973).

    Example
        [rank1]: RuntimeError: received 0 items of ancdata

    Fix
        Raise the limit (`ulimit -n 65536`) or switch strategy:
        `torch.multiprocessing.set_sharing_strategy("file_system")`. `ddpdoctor check` on the node
        shows `ulimit -n`.
    """
    occ = job.get("too_many_files")
    if not occ or not occ.count:
        return
    ev = occ.first[0]
    extra, sentence = fold(job, "LOG011", occ.ranks)
    errno = str(ev.data.get("errno") or "")
    if errno and errno != "24" and "shared memory object" in ev.line.text:
        # torch's MapAllocator could not shm_open a shared tensor's file for a reason other than the fd limit:
        # errno 2, the file removed from /dev/shm (a job prolog cleaning it), 28 /dev/shm full (aten/src/ATen/
        # MapAllocator.cpp @9de0caf appends strerror and errno; round 18)
        err = str(ev.data.get("err") or "").strip()
        yield hit(job, "error", f"could not open a shared tensor's file in /dev/shm: {err} (errno {errno})", at=ev.line,
                  stage=0, ranks=occ.ranks, hosts=occ.hosts, count=occ.count,
                  detail=("torch's shared-memory allocator could not shm_open the /dev/shm/torch_* file that carries a "
                          "tensor another process (a DataLoader worker) shared: not the open-file limit but the file "
                          "itself (errno 2: removed by someone else, 28: /dev/shm full). " + sentence).strip(),
                  fix=("df -h /dev/shm; ls /dev/shm | head   # on that node: full, or cleaned under the job?\n"
                       "docker run --shm-size=16g ... / --ipc=host   # a container's 64 MB /dev/shm"),
                  evidence={**extra, "errno": int(errno)})
        return
    yield hit(job, "error", "ran out of file descriptors (Too many open files)", at=ev.line, stage=0, ranks=occ.ranks,
              hosts=occ.hosts, count=occ.count,
              detail=("Each tensor a DataLoader worker sends uses a file descriptor under the file_descriptor sharing "
                      "strategy; workers x prefetch x ranks per node exceeded `ulimit -n`. " + sentence).strip(),
              fix=("ulimit -n 65536   # in the job script, before torchrun\n"
                   "torch.multiprocessing.set_sharing_strategy('file_system')   # or this, at the top of train.py\n"
                   "ddpdoctor check   # on the node: ulimit -n"),
              evidence=extra)
