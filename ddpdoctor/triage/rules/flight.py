"""Flight Recorder dumps: the first collective where the ranks diverge, from any subset of dumps."""
from __future__ import annotations

from ..job import Job
from ..verdict import fr_results
from . import hit, rule, who


@rule("LOG019", "flight-recorder-divergence", catalogue=("C3", "F8"))
def flight_recorder_divergence(job: Job):
    """Flight Recorder dumps show ranks that diverged: a mismatched collective, or one some ranks never issued.

    What it checks
        Every rank's dump (pickle or JSON, read without executing anything): per process group and
        collective sequence number, the operation and input sizes on each rank. It reports the first
        sequence number where ranks disagree (op or shape), the ranks that never issued it, and the
        ranks whose dumps are missing. An incomplete set of dumps is enough. Without dumps, NCCL's
        collective trace (NCCL_DEBUG_SUBSYS=COLL: "AllReduce: opCount 5 ... comm 0x.. [nranks=N]", NVIDIA/nccl
        src/enqueue.cc) read the same way: different operations at one opCount of one communicator.

    Why it matters
        PyTorch's `fr_trace` needs every rank's dump and stops pairing at the first mismatch
        (pytorch/pytorch#118369 is about finding the stuck rank). A mismatch (all_reduce of
        different sizes, or a broadcast on one rank against an all_reduce on the others) hangs or
        aborts the job; the first divergent collective is where the code paths split.

    Example
        rank 0 at seq 12: nccl:all_reduce [[1024]]; ranks 1-3 at seq 12: nccl:all_reduce [[1032]]

    Fix
        Open the user frame recorded with the divergent collective on each side and make the ranks
        take the same path with the same shapes there.
    """
    mm = _nccl_trace_mismatch(job)
    if mm is not None:
        yield mm
    if not job.flight:
        return
    for res in fr_results(job):
        seq = res.get("first_divergent_seq")
        missing = res.get("missing_dumps") or []
        note = f" No dumps from {who(missing)}." if missing else ""
        frames = "; ".join(f"rank {r} at {w['frame']}" for r, w in sorted((res.get("waiting") or {}).items())
                           if w.get("frame"))
        if res.get("mismatches"):
            mm = res["mismatches"][0]
            sides = "; ".join(f"{who(g['ranks'])}: {g['op']} {g['input_sizes']}" for g in mm["groups"])
            odd = min(mm["groups"], key=lambda g: len(g["ranks"]))["ranks"]
            yield hit(job, "error", f"Flight Recorder: collective #{mm['seq']} differs across ranks ({sides})",
                      stage=2, ranks=odd,
                      detail=(f"In process group {res['pg']}, collective #{mm['seq']} is not the same operation and "
                              f"shape on every rank: {sides}. That is where the ranks' code paths split."
                              + (f" Issued from: {frames}." if frames else "") + note),
                      fix="# open the frame of collective #%d on each side (evidence: waiting) and make every rank\n"
                          "# call the same collective with the same shape there" % mm["seq"],
                      evidence=res)
        elif res.get("never_issued"):
            lag = res["never_issued"]
            yield hit(job, "error", f"Flight Recorder: {who(lag)} never issued collective #{seq} that the others "
                      "wait in", stage=2, ranks=lag,
                      detail=(f"In process group {res['pg']}, {who(res['waiting'])} started collective #{seq}"
                              + (f" ({frames})" if frames else "") + f"; {who(lag)} stopped before it (stuck, busy "
                              "outside collectives, or taking another branch)." + note),
                      fix="py-spy dump --pid <pid of the lagging rank>   # or: ddpdoctor run -- torchrun ...",
                      evidence=res)
        elif missing:
            yield hit(job, "warning", f"Flight Recorder: no dumps from {who(missing)}", stage=3,
                      ranks=missing,
                      detail=("The dumps that exist agree with each other. The ranks without a dump are the first "
                              "suspects: a rank that died or hung hard cannot write one."),
                      fix="ls $(dirname $TORCH_NCCL_DEBUG_INFO_TEMP_FILE)   # on each node: were the dumps written?",
                      evidence=res)


def _nccl_trace_mismatch(job: Job):
    """NCCL's INFO trace of each collective (NCCL_DEBUG_SUBSYS=COLL: "AllReduce: opCount 5 sendbuff ... comm 0x..
    [nranks=2] stream ..."; NVIDIA/nccl src/enqueue.cc ncclEnqueueCheck) names, per communicator, its own count of
    collectives: two ranks of one communicator with DIFFERENT operations at the SAME opCount called mismatched
    collectives (the job hangs or reads garbage there). A communicator is matched across processes by its size; a
    process with two communicators of one size is ambiguous and left out (no guess). The first such opCount, its
    ranks and both operations."""
    if not job.coll_trace:
        return None
    # per size: process -> (its rank or a name, {opCount: (op, line)}); processes with two comms of that size dropped
    by_size: dict = {}
    twice: set = set()
    for (host, pid, comm), ops in job.coll_trace.items():
        first = next(iter(ops.values()))
        n = first[1]
        proc = (host, pid)
        if proc in by_size.get(n, {}):
            twice.add((n, proc))
            continue
        rank = job.comm_rank.get((host, pid, comm))
        if rank is None:
            rank = job.who(first[2])
        by_size.setdefault(n, {})[proc] = (rank, {k: (v[0], v[2]) for k, v in ops.items()})
    for n, procs in sorted(by_size.items()):
        procs = {p: v for p, v in procs.items() if (n, p) not in twice}
        if len(procs) < 2:
            continue
        counts = sorted(set().union(*(set(v[1]) for v in procs.values())))
        for opc in counts:
            seen: dict = {}
            for proc, (rank, ops) in procs.items():
                if opc in ops:
                    seen.setdefault(ops[opc][0], []).append((rank, proc, ops[opc][1]))
            if len(seen) < 2:
                continue
            sides = sorted(seen.items(), key=lambda kv: -len(kv[1]))
            def name(rank, proc):
                return f"rank {rank}" if isinstance(rank, int) else f"{proc[0] or 'a process'}:{proc[1]}"
            text = "; ".join(f"{op} on {', '.join(name(r, p) for r, p, _l in who_)}" for op, who_ in sides)
            odd = sides[-1][1]
            ranks = [r for _op, w in sides for r, _p, _l in w if isinstance(r, int)]
            at = min((ln for _op, w in sides for _r, _p, ln in w), key=lambda ln: (ln.src, ln.lineno))
            return hit(job, "error", f"NCCL trace: mismatched collectives at opCount {opc:x} of the {n}-rank "
                       f"communicator ({text})", at=at, stage=2, ranks=ranks,
                       detail=(f"NCCL's collective trace numbers each communicator's collectives (opCount); at "
                               f"{opc:x} the ranks of one {n}-rank communicator called different operations: {text}. "
                               "Every rank must call the same collectives in the same order; from here the job hangs "
                               "or exchanges the wrong data. That is where the ranks' code paths split."
                               + (f" The odd one out: {', '.join(name(r, p) for r, p, _l in odd)}."
                                  if len(odd) < len(sides[0][1]) else "")),
                       fix=("# find the call of each side (the lines above the trace line on each rank) and make every\n"
                            "# rank take the same branch: a collective under `if rank == 0`, or a different number of\n"
                            "# steps/batches per rank, are the usual causes\n"
                            "TORCH_DISTRIBUTED_DEBUG=DETAIL torchrun ...   # torch checks each collective's op and shapes"),
                       evidence={"opCount": opc, "nranks": n, "ops": {op: [name(r, p) for r, p, _l in w]
                                                                       for op, w in sides}})
    return None
