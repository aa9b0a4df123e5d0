"""Hangs: collective timeouts nobody's death explains, the start-up store barrier, P2P at the first collective."""
from __future__ import annotations

import re

from typing import List

from ..job import Job
from ..signatures import entry_of, survivable
from ..verdict import INF, p2p_early, peer_lost_first, root_cause, timeouts_owner
from . import hit, ranks_text, rule

_FR_FIX = ("export TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1 "
           "TORCH_NCCL_DEBUG_INFO_TEMP_FILE=/tmp/nccl_trace_rank_\n"
           "ddpdoctor run -- torchrun ...   # names the stuck rank and its line within seconds, not 30 minutes\n"
           "ddpdoctor triage logs/ /tmp/nccl_trace_rank_*   # the Flight Recorder dumps name the first divergent collective")


def _cross_tab(rows: List[dict]) -> List[dict]:
    out = []
    for r in rows:
        out.append({k: r[k] for k in ("rank", "seq", "op", "numel", "enqueued", "completed", "timeout_ms") if k in r})
    return out


@rule("LOG001", "collective-timeout", catalogue=("C3", "F8", "F9"))
def collective_timeout(job: Job):
    """Ranks timed out in a collective and no rank's death explains it: the cross-tab names the laggard.

    What it checks
        ProcessGroupNCCL's watchdog lines on every rank, old and new wording:
        `Watchdog caught collective operation timeout: WorkNCCL(SeqNum=…, OpType=…, NumelIn=…)`
        and `[PG 0 Rank 3] Timeout at NCCL work: 1580, last enqueued NCCL work: 1582, last completed
        NCCL work: 1579` (and Gloo's `Timed out waiting …ms`). It cross-tabulates every rank's
        sequence numbers, then names the ranks that are missing, behind or ahead.

    Why it matters
        Every rank prints the same timeout, 10 or 30 minutes after the real event, and the rank that
        caused it often prints nothing (pytorch/pytorch#118369). A rank behind the others is stuck or
        busy outside collectives (rank-0-only evaluation or saving, a data read); a rank ahead issued
        a collective the others never call (a `dist.barrier()` or DDP forward under `if rank == 0:`,
        pytorch/pytorch#53979), or the ranks have uneven numbers of batches (pytorch/pytorch#33148).

    Example
        [rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective
        operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, …,
        Timeout(ms)=600000) ran for 600060 milliseconds before timing out.

    Fix
        Make every rank issue the same collectives in the same order: evaluate on all ranks (or use
        `model.module` under `torch.no_grad()` on rank 0), use `DistributedSampler(drop_last=True)` or
        `torch.distributed.algorithms.Join` for uneven data. `ddpdoctor run -- torchrun …` names the
        stuck rank and its line while it hangs.
    """
    mb = _monitored_first(job)
    if mb is not None:
        yield mb   # monitored_barrier names the ranks that never arrived: its own finding
        return
    rows = job.timeout_table()
    gloo = job.get("gloo_timeout")
    stall = horovod_stall(job)
    if stall and not (gloo and gloo.count) and not any(
            "ProcessGroupNCCL" in e.line.text or "atchdog" in e.line.text for e in stall):
        yield _horovod_stall(job, stall)   # Horovod's own stall report: it names the ranks that never submitted
        return
    if not rows and not (gloo and gloo.count) and job.rankless_timeouts:
        yield _rankless(job)
        return
    cat = _catalogued_timeouts(job) if not rows and not (gloo and gloo.count) else []
    if cat:
        yield _catalogued(job, cat)   # a library's own timeout report (Gloo's pair closure, XLA's rendezvous) names no table
        return
    if not rows and not (gloo and gloo.count):
        return
    if rows and timeouts_owner(job) != "LOG001":
        return  # the root cause's finding carries these lines (folded under it)
    count = sum(job.occ[k].count for k in ("watchdog", "watchdog_seq", "gloo_timeout") if k in job.occ)
    first = min((r["line"] for r in rows if r.get("line") is not None),
                key=lambda l: (l.ts if l.ts is not None else INF, l.src, l.lineno), default=None)
    if first is None and gloo:
        first = gloo.first[0].line
    timed = {r["rank"] for r in rows}
    # Only a world size a line states (NCCL's nranks, the store barrier, a run report) says who is missing; the
    # highest rank seen is a guess, and a rank missing from a guess is an invention.
    world = 0 if job.world_guessed else (job.world or 0)
    missing = sorted(set(range(world)) - timed) if world else []
    # Ranks are compared by what each says it enqueued, and only when every waiting rank says it in one process
    # group: a timed-out SeqNum alone (old format, no process group) is where that rank waits, not how far it got.
    pgs = {pg for (pg, r) in job.watchdog if pg not in ("timeout", "abort", "gloo")}
    enq = ({r["rank"]: r["enqueued"] for r in rows if r.get("enqueued") is not None}
           if len(pgs) <= 1 and all(r.get("enqueued") is not None for r in rows) else {})
    done = {r["rank"]: r["completed"] for r in rows if "completed" in r}
    ops = {r["rank"]: r.get("op") for r in rows if r.get("op")}
    seqs = {r["rank"]: r.get("seq") for r in rows if r.get("seq") is not None}
    behind, ahead = [], []
    if enq:
        lo, hi = min(enq.values()), max(enq.values())
        if lo != hi:
            ahead = sorted(r for r, v in enq.items() if v == hi)
            behind = sorted(r for r, v in enq.items() if v == lo)
            if len(ahead) > len(behind):
                ahead = []  # the many are the norm; the few behind are the odd ones out
            elif len(behind) > len(ahead):
                behind = []
            # "behind" means it never enqueued the collective the others wait in: a rank whose own line shows it
            # enqueued that far (it timed out in an earlier one) did join it, and is not named as never joining
            waits = [seqs[r] for r in enq if r not in behind and seqs.get(r) is not None]
            if behind and waits and min(enq[r] for r in behind) >= min(waits):
                behind = []
            waits = [seqs[r] for r in ahead if seqs.get(r) is not None]
            rest = [enq[r] for r in enq if r not in ahead]
            if ahead and waits and rest and min(rest) >= min(waits):
                ahead = []   # the others enqueued the collective the ranks ahead wait in: nobody is missing from it
    op_set = set(ops.values())
    # Ranks the logs show (a prefix, torchrun's table, an exit) that printed no timeout while the others waited: a
    # fact, whatever the world size; with no stated world size they are the laggards in sight, not all of them.
    silent = sorted(r for r in job.ranks if r is not None and r >= 0 and r not in timed
                    and r not in job.watchdog_ranks) if not world else []   # a rank with watchdog lines of its own waited too
    cause, laggards = "", []
    seq_txt = ""
    split = _size_mismatch(rows) if len(pgs) <= 1 else None
    if seqs:
        common = max(set(seqs.values()), key=list(seqs.values()).count)
        # the operation of a rank waiting at that sequence number (ranks in other groups wait in other operations)
        op = next((ops[r] for r, q in seqs.items() if q == common and ops.get(r)), None) or \
            (max(op_set, key=list(ops.values()).count) if op_set else "a collective")
        seq_txt = f" in {op} #{common}"
        if len(set(seqs.values())) > 1 and len(pgs) <= 1 and \
                list(seqs.values()).count(common) * 2 <= len(seqs):
            # no majority waits at one sequence number: each rank waits at its own (round 15, b99_15: rank 1 at
            # _ALLGATHER_BASE #313, rank 0 at ALLREDUCE #315 with 314 completed); naming one number misstates the others
            seq_txt = " at different collectives (" + "; ".join(
                f"rank {r} in {ops.get(r) or 'a collective'} #{q}" for r, q in sorted(seqs.items())[:6]) + ")"
    # A rank missing from the timeouts is a fact about this log only where the log shows that rank (a line, a host, an
    # exit): a rank with no line at all may simply not have been collected (one rank's excerpt of an 8-rank job), so
    # it is said as "not in this log" and any laggard among them as an inference (issue 24: evidence before inference)
    seen = set(job.ranks) | set(job.rank_host) | set(job.watchdog_ranks)
    unseen = [r for r in missing if r not in seen]
    if split:
        seq, op_name, by = split
        sizes = "; ".join(f"rank{'s' if len(rs) > 1 else ''} {ranks_text(rs)}: {o} of {n} element{'s' if n != 1 else ''}"
                          for (o, n), rs in by)
        seq_txt = f" at #{seq}" if len({o for (o, _n), _rs in by}) > 1 else f" in {op_name} #{seq}"
        cause = (f"The ranks timed out at the same sequence number ({seq}) of one process group in different "
                 f"collectives ({sizes}): collective #{seq} is not the same call on every rank, so each waits for a "
                 "partner that is running another one. The ranks' collectives differ in order or shape (a rank that "
                 "left the loop early or skipped a step, an all_reduce of a metric on some ranks only, a model whose "
                 "parameters differ between ranks), not a rank that is merely late.")
    elif missing and unseen:
        laggards = missing
        shown = [r for r in missing if r in seen]
        cause = (f"Rank{'s' if len(timed) > 1 else ''} {ranks_text(sorted(timed))} printed a timeout; rank"
                 f"{'s' if len(unseen) > 1 else ''} {ranks_text(unseen)} of {world} "
                 f"{'have' if len(unseen) > 1 else 'has'} no line in these logs (not collected or not pasted), so "
                 "whether they reached the collective is not shown. Inferred, not seen: the rank the others waited for "
                 "is among the ranks missing here, stuck or busy elsewhere (rank-0-only work, a data read) or dead."
                 + (f" Rank{'s' if len(shown) > 1 else ''} {ranks_text(shown)} appear{'' if len(shown) > 1 else 's'} "
                    "in these logs but printed no timeout." if shown else "")
                 + " Collect every rank's log to see which.")
    elif missing:
        laggards = missing
        cause = (f"Rank{'s' if len(missing) > 1 else ''} {ranks_text(missing)} of {world} printed no timeout: "
                 f"the others were waiting for {'them' if len(missing) > 1 else 'it'}. A rank that never reaches the collective is stuck or busy "
                 "elsewhere (rank-0-only work such as evaluation or saving, a data read, a deadlocked DataLoader "
                 "worker), or dead without a word in these logs.")
    elif behind:
        laggards = behind
        cause = (f"Rank{'s' if len(behind) > 1 else ''} {ranks_text(behind)} enqueued fewer collectives "
                 f"(last {min(enq.values())}) than the others ({max(enq.values())}): "
                 f"{'they' if len(behind) > 1 else 'it'} stopped issuing collectives, stuck or busy outside them "
                 "(rank-0-only evaluation, saving or preprocessing; a data read).")
        if behind == [0]:
            cause += " Rank 0 alone is behind: work only rank 0 does is the usual reason."
    elif ahead:
        laggards = sorted(set(enq) - set(ahead))
        cause = (f"Rank{'s' if len(ahead) > 1 else ''} {ranks_text(ahead)} enqueued more collectives "
                 f"(last {max(enq.values())}) than the others ({min(enq.values())}): a collective that only some "
                 "ranks call (a dist.barrier() or a DDP forward under `if rank == 0:`), or uneven numbers of "
                 "batches per rank.")
    elif silent and not behind and not ahead:
        laggards = silent
        cause = (f"Rank{'s' if len(silent) > 1 else ''} {ranks_text(silent)} appear{'' if len(silent) > 1 else 's'} in "
                 f"these logs but printed no timeout while rank{'s' if len(timed) > 1 else ''} {ranks_text(timed)} "
                 f"waited: {'they were' if len(silent) > 1 else 'it was'} not in the collective (stuck or busy elsewhere: "
                 "rank-0-only work, a data read, a deadlocked DataLoader worker). No line states the world size, so "
                 "ranks whose lines are not here may be missing too.")
    elif len(pgs) > 1:
        groups = {}
        for (pg, r), rec in job.watchdog.items():
            if pg not in ("timeout", "abort", "gloo"):
                groups.setdefault(pg, set()).add(r)
        cause = ("The timeouts are in different process groups (" + "; ".join(
            f"group {pg}: rank{'s' if len(rs) > 1 else ''} {ranks_text(sorted(rs))}" for pg, rs in sorted(groups.items())[:6])
            + "): each group waits in its own collective, so sequence numbers and operations are not comparable "
              "across them. A rank that stalls in one group holds up the others (tensor/pipeline/data parallel groups "
              "of the same job); its lines are not among these, or it printed no timeout.")
    elif len(set(seqs.values())) > 1 and len(pgs) <= 1:
        at = "; ".join(f"rank {r} at #{q}" + (f" ({ops[r]})" if ops.get(r) else "") + (
            f", {done[r]} completed" if done.get(r) is not None else "") for r, q in sorted(seqs.items())[:8])
        cause = (f"The ranks time out at different sequence numbers of one process group ({at}): each waits at a "
                 "different point of its collective sequence, so the ranks did not issue the same collectives in the "
                 "same order (a collective or a save that only some ranks run, uneven numbers of batches), or the one "
                 "at the lower number stopped issuing them.")
    elif len(op_set) > 1 and len(set(seqs.values())) <= 1:
        cause = (f"The ranks wait in different operations ({', '.join(sorted(op_set))}) at the same sequence "
                 "number: their collectives disagree, typically uneven data (one rank leaves the training loop "
                 "and reaches the next phase's collective while the others still all-reduce gradients).")
    elif not world:
        cause = (f"Rank{'s' if len(timed) > 1 else ''} {ranks_text(timed)} printed a timeout. No line in these logs "
                 "counts the ranks (NCCL's 'nranks', a store barrier), so which rank never joined is not known: it is "
                 "one whose lines are not here, or one that did not print its own timeout. Collect every rank's log, "
                 "or NCCL_DEBUG=INFO (its 'Init COMPLETE' lines count the ranks).")
    else:
        cause = ("Every rank that printed a timeout waits in the same collective, and no rank is missing from "
                 "these logs: all of them entered it, so the transport itself stalled (P2P/ACS, network, a "
                 "failing GPU) or a rank whose log is not here is the laggard.")
    stopped_title = ""
    stopped = sorted({pid for pid, _ln in job.spawn_stopped})
    if stopped and timed and not world and not laggards and not split and len(pgs) <= 1:
        # mp.spawn terminates the processes still alive after one failed (spawn.py ProcessContext.join): alive, with no
        # error of their own, while a peer timed out in a collective, they were not in it. Their ranks are not printed;
        # the spawn index is the rank in most scripts (mp.spawn passes it first), so the indices not seen failing are
        # named as a guess, and only when they account for every stopped process
        failed = set(job.spawn_failed) | {e.rank for e in job.exits if e.source == "mp.spawn" and e.rank is not None}
        rest = sorted(set(range(len(failed) + len(stopped))) - failed) if failed else []
        guess = rest if len(rest) == len(stopped) and failed <= set(range(len(failed) + len(stopped))) else []
        many = len(stopped) > 1
        cause = (f"Rank{'s' if len(timed) > 1 else ''} {ranks_text(sorted(timed))} timed out in a collective; then "
                 f"mp.spawn terminated {len(stopped)} process{'es' if many else ''} still running (pid "
                 f"{', '.join(str(p) for p in stopped[:6])}): alive and with no error of {'their' if many else 'its'} "
                 f"own while {'its' if not many else 'their'} peer waited, {'they were' if many else 'it was'} not in "
                 "the collective, stuck or busy elsewhere (work only some ranks do, a data read, a sleep or a lock, a "
                 "deadlocked DataLoader worker)."
                 + (f" The log does not print {'their ranks' if many else 'its rank'}; with the spawn index as the rank "
                    f"(mp.spawn passes it as the first argument, and most scripts use it so): rank{'s' if many else ''} "
                    f"{ranks_text(guess)}, a guess." if guess else
                    f" The log does not print {'their ranks' if many else 'its rank'}."))
        laggards = guess
        stopped_title = (f"rank{'s' if len(timed) > 1 else ''} {ranks_text(sorted(timed))} waiting; the process"
                         f"{'es' if many else ''} mp.spawn stopped while still running never joined"
                         + (f" (rank{'s' if many else ''} {ranks_text(guess)} if the spawn index is the rank: a guess)"
                            if guess else f" (pid {', '.join(str(p) for p in stopped[:3])})"))
    if len(pgs) > 1:
        seq_txt = f" in {len(pgs)} process groups"
    title = f"collective timeout{seq_txt}: " + (
        "a collective mismatch, " + ", ".join(
            f"rank{'s' if len(rs) > 1 else ''} {ranks_text(rs)} in {o} of {n} element{'s' if n != 1 else ''}"
            for (o, n), rs in split[2][:4]) if split else
        f"rank{'s' if len(timed) > 1 else ''} {ranks_text(sorted(timed))} waiting; rank{'s' if len(unseen) > 1 else ''} "
        f"{ranks_text(unseen)} of {world} not in this log (the laggard is inferred, not seen)" if missing and unseen else
        f"rank{'s' if len(laggards) > 1 else ''} {ranks_text(laggards)} printed no timeout while "
        f"rank{'s' if len(timed) > 1 else ''} {ranks_text(timed)} waited" if laggards and laggards in (silent, missing) else
        f"rank{'s' if len(laggards) > 1 else ''} {ranks_text(laggards)} never joined" if laggards else
        (f"rank{'s' if len(timed) > 1 else ''} {ranks_text(timed)} waiting" if timed else
         "the waiting rank is not named") + ("" if world else ", the laggard is not in these logs"))
    if stopped_title:
        title = f"collective timeout{seq_txt}: {stopped_title}"
    timeout = next((r.get("timeout_ms") for r in rows if r.get("timeout_ms")), None)
    # ProcessGroupNCCL's heartbeat monitor: "ProcessGroupNCCL's watchdog got stuck for N seconds without making progress
    # in monitoring enqueued collectives. This typically indicates a NCCL/CUDA API (e.g., CudaEventDestroy) hang
    # blocking the watchdog" (ProcessGroupNCCL.cpp, HeartbeatMonitor): the watchdog thread itself hung in a CUDA or NCCL
    # call; when these are the only lines, no collective is said to have timed out and no rank to have lagged
    # (the monitor's first words on a rank are often "[PG 0 Rank 0] Heartbeat monitor timed out! Process will be terminated
    # after dumping debug info." before its "watchdog got stuck for N seconds": round 15, b100_14/15)
    stuck = [r for r in rows if r.get("line") is not None and ("watchdog got stuck" in r["line"].text
                                                                or "Heartbeat monitor timed out" in r["line"].text)]
    stuck_only = bool(stuck) and len(stuck) == len(rows) and not seqs
    if stuck_only:
        secs = next((m for m in (re.search(r"got stuck for (\d+) seconds", r["line"].text) for r in stuck) if m), None)
        title = (f"ProcessGroupNCCL's watchdog got stuck on rank{'s' if len(timed) > 1 else ''} {ranks_text(timed)}"
                 + (f" ({secs.group(1)} s without progress)" if secs else "")
                 + ": a CUDA or NCCL call hung in its thread, not a collective timeout")
        cause = ("The heartbeat monitor saw the watchdog thread make no progress: it was blocked inside a CUDA or NCCL "
                 "call (cudaEventDestroy, a communicator abort), or behind another thread holding the GIL in a CUDA "
                 "call. No line here says a collective timed out. At the end of a job it is usually the teardown "
                 "(process groups not destroyed before exit, a GPU in a bad state); during training, a hung GPU "
                 "(dmesg Xid) or a deadlock in a CUDA call.")
        laggards = []
    detail = cause
    waits = {r: f for r, f in job.waiting_frames.items() if r in timed}
    if waits:
        detail += " Where the waiting ranks were: " + "; ".join(
            f"rank {r} at {f['file']}:{f['line']} in {f['func']}" for r, f in sorted(waits.items())[:8]) + "."
    if timeout:
        detail += f" The timeout was {timeout // 1000} s, so the real event happened about that long before."
    yield hit(job, "error", title, at=first, stage=2, ranks=laggards or sorted(timed),
              hosts=[job.rank_host[r] for r in laggards if r in job.rank_host], count=count, detail=detail,
              fix=(("py-spy dump --native --pid <PID>   # on a stuck rank: which CUDA/NCCL call the watchdog is in\n"
                    "dmesg -T | grep -i xid              # a GPU fault on that node\n"
                    "dist.destroy_process_group()        # at the end of training, before the process exits\n"
                    "export TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC=1200   # only if the call is slow, not hung") if stuck_only else
                   ("TORCH_DISTRIBUTED_DEBUG=DETAIL torchrun ...   # each collective's fingerprint is compared across ranks:\n"
                    "#   'Detected mismatch between collectives on ranks' names both calls (op, shape, dtype)\n"
                    "# every rank must issue the same collectives in the same order and shape\n"
                    + _FR_FIX) if split else
                   ("# every rank must issue the same collectives in the same order:\n"
                    "#  - evaluate/save on all ranks, or on rank 0 via model.module under torch.no_grad()\n"
                    "#  - uneven data: DistributedSampler(drop_last=True) or torch.distributed.algorithms.Join\n"
                    + _FR_FIX)),
              evidence={"cross_tab": _cross_tab(rows), "missing_ranks": missing, "ranks_not_in_log": unseen, "silent_ranks": silent, "behind": behind,
                        "ahead": ahead,
                        "world_size": world or None, "waiting_at": {str(r): f for r, f in sorted(waits.items())}})


# Collectives whose input size every rank must match at one sequence number (ProcessGroupNCCL's WorkNCCL(SeqNum=..,
# OpType=.., NumelIn=..)); all-to-all, gather/scatter, coalesced and P2P ops may differ in size between ranks.
_SAME_SIZE_OPS = {"ALLREDUCE", "BROADCAST", "REDUCE", "ALLGATHER", "_ALLGATHER_BASE", "REDUCE_SCATTER",
                  "_REDUCE_SCATTER_BASE"}


def _size_mismatch(rows: List[dict]):
    """(seq, op, [((op, numel), ranks), ...]) when two or more ranks timed out at the same sequence number with
    different operations or different input sizes: the ranks run different collectives at that position, a mismatch
    (pytorch/pytorch torch/csrc/distributed/c10d/ProcessGroupWrapper.cpp @2be2149, CollectiveFingerPrint::verify:
    under TORCH_DISTRIBUTED_DEBUG=DETAIL the same comparison of SequenceNumber, OpType and TensorShape raises
    'Detected mismatch between collectives on ranks'). None otherwise."""
    at = {}
    for r in rows:
        if r.get("seq") is not None and r.get("op") and r.get("numel") is not None:
            at.setdefault(r["seq"], []).append(r)
    for seq, rs in sorted(at.items()):
        if len(rs) < 2:
            continue
        ops = {r["op"] for r in rs}
        if len(ops) == 1 and (next(iter(ops)) not in _SAME_SIZE_OPS or len({r["numel"] for r in rs}) == 1):
            continue
        by = {}
        for r in rs:
            by.setdefault((r["op"], r["numel"]), []).append(r["rank"])
        groups = sorted(((k, sorted(v)) for k, v in by.items()), key=lambda kv: kv[1])
        return seq, rs[0]["op"], groups
    return None


def horovod_stall(job: Job) -> list:
    """Horovod's stall reports (catalogue class collective_timeout, horovod.* entries): its collectives waited for
    ranks that never submitted them. Empty when there are none."""
    occ = job.get("collective_timeout")
    return [e for e in (occ.first if occ else []) if str(e.data.get("entry", "")).startswith("horovod.")]


def _ready_lists(evs: list) -> list:
    """Older Horovod stall reports list, per stalled op, the ranks that DID submit it: CheckForStalledTensors writes
    "Stalled ops: NAME [ready ranks: 5, 1, 4], NAME2 [ready ranks: ...]" from the coordinator's message table
    (horovod/horovod horovod/tensorflow/mpi_ops.cc @6431753 v0.9.0, horovod/common/operations.cc @172e9fd v0.13.0);
    v0.15.0 (@af69c0f) prints the complement, "[missing ranks: ...]", which the catalogue entry reads. One set per op."""
    lists = [{int(r) for r in m.group(1).replace(" ", "").split(",") if r.isdigit()}
             for e in evs for m in re.finditer(r"\[ready\s+ranks:\s*([\d,\s]+)\]", e.line.text)]
    return [x for x in lists if x]


def _missing_from_ready(lists: list) -> list:
    """The ranks 0..max(seen) absent from every op's ready list are the ones that never submitted: an inference (the
    report does not print the world size, so a rank above the highest one seen cannot be known). Empty when the ops
    disagree (every rank seen submitted some stalled op: the ranks wait in different collectives)."""
    if not lists:
        return []
    world = max(max(x) for x in lists) + 1
    common = set(range(world))
    for x in lists:
        common -= x
    return sorted(common)


def _horovod_stall(job: Job, evs: list):
    missing = sorted({int(r) for e in evs for r in str(e.data.get("ranks", "")).replace(" ", "").split(",") if r.isdigit()})
    secs = next((e.data.get("secs") for e in evs if e.data.get("secs")), None)
    ev = evs[0]
    inferred = disagree = False
    if not missing and job.hvd_rows:
        # the per-rank list (v0.19+): each row is a rank that has not submitted the tensors it names. When every rank
        # 0..max is listed with different tensors, each waits in a collective another has not joined: a mismatch
        listed = sorted({r for r, _, _, _ in job.hvd_rows})
        ops = {o for _, o, _, _ in job.hvd_rows}
        if listed == list(range(max(listed) + 1)) and len(ops) > 1:
            disagree = True
        else:
            missing = listed
    if not missing and not disagree:
        lists = _ready_lists(evs)
        missing = _missing_from_ready(lists)
        inferred = bool(missing)
        # every rank seen is ready on some stalled op and missing from another: the ranks wait in different collectives
        # (a collective mismatch); which rank went astray the report cannot say, and a majority would be a guess
        disagree = len(lists) > 1 and not missing
    who = (f"rank{'s' if len(missing) > 1 else ''} {ranks_text(missing)} never submitted it"
           + (" (inferred from the ready-rank lists)" if inferred else "") if missing
           else "the ranks wait in different collectives (the report's rank lists disagree); which rank went astray is "
                "unexplained" if disagree
           else "the lines shown do not name the missing ranks")
    return hit(job, "warning", f"Horovod reports a stalled collective: {who}", at=ev.line, stage=2,
               ranks=missing, count=sum(1 for _ in evs),
               detail=("Horovod's stall inspector: some ranks submitted a collective (allreduce, allgather, broadcast) "
                       + (f"and waited more than {secs} s " if secs else "and waited ")
                       + "for the others, which never submitted it. If the warning repeats and nothing follows, the job is "
                       "stuck there: the missing ranks are busy elsewhere (rank-0-only work, a slow data read), dead, or "
                       "run a different sequence of collectives (a collective under a rank-dependent branch, uneven data). "
                       "If training goes on after it, the stall resolved and cost time."),
               fix=("py-spy dump --pid <pid of a missing rank>   # where it is instead of the collective\n"
                    "HOROVOD_STALL_CHECK_TIME_SECONDS=60 HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=600 horovodrun ...   "
                    "# fail instead of hanging"),
               evidence={"missing_ranks": missing, "stall_seconds": secs})


_LIBRARY = (("gloo.", "Gloo"), ("torch.c10d.gloo.", "Gloo"), ("xla.rendezvous.", "an XLA rendezvous"),
            ("xla.", "XLA"), ("jax.", "JAX"))


def _catalogued_timeouts(job: Job) -> list:
    """Catalogue messages of the class collective_timeout (not Horovod's stall report, which has its own finding) that
    stand as failures, when no rank's death or lost peer explains them: a "survivable" one (XLA's "may be stuck") only
    when no progress follows it in its stream. Empty when there are none."""
    if root_cause(job) is not None or peer_lost_first(job):
        return []
    occ = job.get("collective_timeout")
    out = []
    for e in (occ.first if occ else []):
        if str(e.data.get("entry", "")).startswith("horovod."):
            continue
        lp = job.stream_progress.get(job._stream(e.line)) if survivable(e) else None
        if lp is not None and (lp.src, lp.lineno) > (e.line.src, e.line.lineno):
            continue   # the rendezvous came unstuck: the job went on
        out.append(e)
    return out


def _catalogued(job: Job, evs: list):
    ev = evs[0]
    entry = entry_of(ev) or {}
    eid = str(entry.get("id", ""))
    lib = next((name for pre, name in _LIBRARY if eid.startswith(pre)), "the library")
    ranks = sorted({r for r in (job.who(e.line) for e in evs) if r is not None and r >= 0})
    mb = next((m for m in (_MONITORED.search(e.line.text) for e in evs) if m), None)
    if mb is not None:
        return _monitored_barrier(job, ev, mb, ranks, entry, len(evs))
    who = (f"rank{'s' if len(ranks) > 1 else ''} {ranks_text(ranks)} waiting" if ranks else "the waiting rank is not named")
    title = f"collective timeout ({lib}): {who}, the rank that never joined is not in these logs"
    return hit(job, "error", title, at=ev.line, stage=2, ranks=ranks, count=len(evs),
               detail=(str(entry.get("meaning", "")) + " Which rank never joined the collective is not in these lines: "
                       "a rank stuck or busy elsewhere (rank-0-only work, a data read), running a different collective, "
                       "or dead without a word here."),
               fix=(str(entry.get("fix", "")) + "\n" + _FR_FIX) if entry.get("fix") else _FR_FIX,
               evidence={"entry": eid or None, "waiting_ranks": ranks})


# ProcessGroupGloo::monitoredBarrier's own message (torch/csrc/distributed/c10d/ProcessGroupGloo.cpp; libtorch_cpu.so
# strings of torch 2.13.0: "Rank " / "Ranks " + the ranks + " failed to pass monitoredBarrier in " + ms + " ms")
_MONITORED = re.compile(r"\bRanks? (\d+(?:,\s*\d+)*) failed to pass monitoredBarrier in (\d+) ms")


def _monitored_first(job: Job):
    """The finding for monitored_barrier's report of the ranks that never reached it, when no rank's own failure or
    lost peer came first; None otherwise."""
    occ = job.get("collective_timeout")
    if not occ or root_cause(job) is not None or peer_lost_first(job):
        return None
    evs = [e for e in occ.first if _MONITORED.search(e.line.text)]
    if not evs:
        return None
    ranks = sorted({r for r in (job.who(e.line) for e in evs) if r is not None and r >= 0})
    return _monitored_barrier(job, evs[0], _MONITORED.search(evs[0].line.text), ranks, entry_of(evs[0]) or {}, len(evs))


def _monitored_barrier(job: Job, ev, m, waiting: list, entry: dict, count: int):
    """dist.monitored_barrier on rank 0 names the ranks that never reached it: those ranks are the finding (stuck
    elsewhere or dead), not rank 0, which only waited."""
    missing = sorted({int(x) for x in re.findall(r"\d+", m.group(1))})
    secs = int(m.group(2)) / 1000
    waited = f" (rank {ranks_text(waiting)} waited {secs:g} s)" if waiting else f" (rank 0 waited {secs:g} s)"
    title = (f"rank{'s' if len(missing) > 1 else ''} {ranks_text(missing)} never reached monitored_barrier{waited}: "
             f"{'they were' if len(missing) > 1 else 'it was'} stuck elsewhere or dead")
    return hit(job, "error", title, at=ev.line, stage=2, ranks=missing, count=count,
               detail=("dist.monitored_barrier (Gloo) on rank 0 waits for every other rank and names the ones that did "
                       "not arrive in time. The named ranks are where to look: their last lines show where they were "
                       "(a collective the others had left, rank-0-only work on another rank, a slow data read), or they "
                       "had died. Rank 0's exception is only the report."),
               fix=((str(entry.get("fix", "")) + "\n") if entry.get("fix") else "")
               + "py-spy dump --pid <pid of a named rank>   # where it is instead of the barrier",
               evidence={"entry": entry.get("id"), "missing_ranks": missing, "timeout_ms": int(m.group(2)),
                         "waiting_ranks": waiting})


def _rankless(job: Job):
    line, fields = job.rankless_timeouts[0]
    op, seq = fields.get("OpType"), fields.get("SeqNum")
    what = f" in {op}" + (f" #{seq}" if seq else "") if op else ""
    timeout = fields.get("Timeout(ms)")
    which = ("the watchdog's stack (WorkNCCL::checkTimeout) names no rank" if fields.get("frames")
             else "the line names no rank")
    # the one rank the log shows at all (a [rankN]: prefix, a ProcessGroupNCCL line): the stack is that process's
    ranks = sorted(r for r in job.ranks if r >= 0)
    rank = ranks[0] if len(ranks) == 1 and job.watchdog_ranks | job.ranks == {ranks[0]} else None
    if fields.get("loop"):
        # the watchdog thread itself threw (ProcessGroupNCCL::Watchdog::run / ncclCommWatchdog): a timeout or an error
        title = ("the NCCL watchdog thread" + (f" of rank {rank}" if rank is not None else "")
                 + " ended with an exception (its message is cut): a collective timed out or failed"
                 + ("" if rank is not None else "; the stack names no rank"))
    else:
        title = f"collective timeout{what}: {which}"
    return hit(job, "error", title, at=line, stage=2, ranks=[rank] if rank is not None else [],
               count=len(job.rankless_timeouts),
               detail=("ProcessGroupNCCL's watchdog gave up on a collective" + (f" after {int(timeout) // 1000} s"
                                                                                   if timeout and timeout.isdigit() else "")
                       + ". The line carries no rank prefix, so which rank was waiting and which never joined is not in "
                       "these logs: a rank stuck outside collectives (rank-0-only work, a data read), or dead without a "
                       "word."),
               fix=("torchrun --tee 3 --log-dir logs/ ...   # every rank's output, with its [rankN]: prefix\n" + _FR_FIX),
               evidence={"op": op, "seq": seq, "timeout_ms": timeout})


def _store_barrier_waiting(job: Job):
    """init_process_group's barrier still waiting (no timeout in the log yet): more processes than the world size
    is already an error; fewer, repeated for the same rank, is a stall worth a warning."""
    occ = job.get("store_barrier_wait")
    if not occ or not occ.count:
        return
    ev = occ.first[0]
    world, count = int(ev.data.get("world", 0)), int(ev.data.get("count", 0))
    evidence = {"world_size": world, "worker_count": count, "key": ev.data.get("key"), "waiting_lines": occ.count}
    fix = ("# every node: RANK = NODE_RANK * NPROC_PER_NODE + LOCAL_RANK, same WORLD_SIZE and MASTER_ADDR, a MASTER_PORT of\n"
           "# its own per job\n"
           "torchrun --nnodes N --nproc-per-node G --rdzv-backend c10d --rdzv-endpoint HOST:PORT train.py\n"
           "ddpdoctor check   # on each node: rank variables and rendezvous address")
    if count > world:
        yield hit(job, "error", f"{count} processes joined init_process_group's barrier for a world of {world}",
                  at=ev.line, stage=1, ranks=occ.ranks, count=occ.count,
                  detail=(f"The barrier counts {count} arrivals where WORLD_SIZE is {world} (line {ev.line.lineno}): "
                          "more processes joined than the job has ranks, so it never completes. Two jobs share one "
                          "MASTER_ADDR:MASTER_PORT, the script was started twice over (a launcher around a script that "
                          "also spawns), or WORLD_SIZE is too small."),
                  fix=fix, evidence=evidence)
    elif count < world and occ.count >= 2:
        missing = _barrier_missing(occ.first, world, count)
        who = f": rank{'s' if len(missing) > 1 else ''} {ranks_text(missing)} never joined" if missing else ""
        if missing:
            evidence["missing_ranks"] = missing
        yield hit(job, "warning", f"init_process_group's barrier is waiting: {count} of {world} ranks joined{who}",
                  at=ev.line, stage=1, ranks=missing or occ.ranks, count=occ.count,
                  detail=(f"The barrier logged {occ.count} times that {count} of {world} ranks had arrived: "
                          f"{world - count} rank{'s' if world - count != 1 else ''} never reached init_process_group "
                          "(crashed before it, a node that never started, two processes with the same RANK, or one "
                          "still preprocessing). It times out after "
                          f"{ev.data.get('timeout', 'the timeout')}."),
                  fix=fix, evidence=evidence)


def _barrier_missing(evs: list, world: int, count: int) -> list:
    """The ranks that never joined the store barrier, when the lines shown account for every one that did. Each rank
    adds itself to the key before it waits and logs its own rank with the count (torch/distributed/distributed_c10d.py
    _store_based_barrier: store.add(store_key, 1), then worker_count = store.add(store_key, 0); pytorch/pytorch
    @6170845): when the distinct ranks logging one key with one count number that count, they are all the joined
    ranks, and the rest of 0..world_size-1 never arrived. Empty otherwise (lines of other counts or keys, or fewer
    ranks logging than joined)."""
    if not world or count >= world:
        return []
    if len({(e.data.get("key"), e.data.get("count"), e.data.get("world")) for e in evs}) != 1:
        return []
    joined = {int(e.data["rank"]) for e in evs if str(e.data.get("rank", "")).isdigit()}
    if len(joined) != count or any(r >= world for r in joined):
        return []
    return sorted(set(range(world)) - joined)


@rule("LOG018", "store-barrier-timeout", catalogue=("A4", "F11"))
def store_barrier_timeout(job: Job):
    """The start-up barrier of `init_process_group` timed out: not every rank arrived.

    What it checks
        `Timed out initializing process group in store based barrier on rank: 4, for key:
        store_based_barrier_key:1 (world_size=8, worker_count=7, timeout=0:30:00)`.

    Why it matters
        worker_count < world_size means some ranks never called `init_process_group`: a rank that
        crashed before it, a node that never started, rank arithmetic that gives two processes the
        same RANK (NVIDIA/Megatron-LM#782), or rank 0 still preprocessing data while the others wait
        (huggingface/transformers#18054). worker_count > world_size means more processes joined than
        expected: the script was launched twice over (a launcher plus mp.spawn) or WORLD_SIZE is
        too small (ultralytics/yolov5#4574).

    Example
        RuntimeError: Timed out initializing process group in store based barrier on rank: 4, for
        key: store_based_barrier_key:1 (world_size=8, worker_count=7, timeout=0:30:00)

    Fix
        Check every node launched and computed RANK = node_rank * nproc_per_node + local_rank; use
        torchrun. Move slow preprocessing before `init_process_group` or cache it. `ddpdoctor check`
        on each node validates the rank variables.
    """
    occ = job.get("store_barrier")
    if not occ or not occ.count:
        yield from _store_barrier_waiting(job)
        return
    ev = occ.first[0]
    if ev.data.get("barrier") is not None and ev.data.get("world") is None:
        # JAX's coordination service (xla.coordination.barrier_timed_out): PjRT_Client_Connect is jax.distributed.initialize
        bid = str(ev.data["barrier"])
        connect = bid.startswith("PjRT_Client_Connect")
        yield hit(job, "error", ("jax.distributed.initialize timed out: not every process connected to the coordinator"
                                 if connect else f"JAX's coordination barrier {bid} timed out: not every process reached it"),
                  at=ev.line, stage=1, ranks=occ.ranks, hosts=occ.hosts, count=occ.count,
                  detail=("The coordination service's barrier (" + bid + ") passed its deadline before every task arrived: "
                          "a process that never started or crashed first, one given another coordinator_address, "
                          "num_processes or a duplicate process_id, or one slower than the timeout. The error lists "
                          "the tasks that did not arrive; their own logs say why."),
                  fix=("# every process: the same coordinator_address and num_processes, its own process_id\n"
                       "jax.distributed.initialize(coordinator_address='HOST:PORT', num_processes=N, process_id=I)"),
                  evidence={"barrier": bid})
        return
    world, count = int(ev.data.get("world", 0)), int(ev.data.get("count", 0))
    if count > world:
        title = f"init_process_group's store barrier timed out: {count} processes joined a world of {world}"
        detail = ("More processes than WORLD_SIZE reached init_process_group: the ranks were started twice over "
                  "(a launcher around a script that also calls mp.spawn) or WORLD_SIZE is wrong.")
    else:
        title = f"init_process_group's store barrier timed out: {count} of {world} ranks arrived"
        detail = (f"{world - count} rank{'s' if world - count != 1 else ''} never reached init_process_group "
                  f"within {ev.data.get('timeout', 'the timeout')}: a rank that crashed first, a node that never "
                  "started, two processes with the same RANK, or one still preprocessing.")
    # the message names the rank whose barrier timed out ("... in store based barrier on rank: 7, for key ..."; torch
    # distributed_c10d.py _store_based_barrier): that rank, also when no prefix says whose line it is
    named = {int(e.data["rank"]) for e in occ.first if str(e.data.get("rank", "")).isdigit()}
    ranks = set(occ.ranks) | named
    if named:
        title += f" (rank{'s' if len(named) > 1 else ''} {ranks_text(sorted(named))} timed out waiting)"
    yield hit(job, "error", title,
              at=ev.line, stage=1, ranks=ranks, hosts=occ.hosts, count=occ.count,
              detail=detail,
              fix=("# every node: RANK = NODE_RANK * NPROC_PER_NODE + LOCAL_RANK, same WORLD_SIZE and MASTER_ADDR\n"
                   "torchrun --nnodes N --nproc-per-node G --rdzv-backend c10d --rdzv-endpoint HOST:PORT train.py\n"
                   "ddpdoctor check   # on each node: rank variables and rendezvous address"),
              evidence={"world_size": world, "worker_count": count, "key": ev.data.get("key")})


@rule("LOG016", "p2p-hang-first-collective", catalogue=("B1", "B2"))
def p2p_hang_first_collective(job: Job):
    """Ranks hang in the very first collective after NCCL set up P2P between GPUs (ACS/IOMMU, consumer GPUs).

    What it checks
        A watchdog timeout at sequence number 1 or 2 (the first collectives) on ranks whose NCCL INFO
        lines show a P2P transport (`via P2P/IPC`, `P2P/CUMEM`), or accelerate's "doesn't support faster
        communication broadband via P2P or IB", or NCCL's "P2P is disabled between NVLINK connected GPUs".

    Why it matters
        NCCL initialises fine, then the first all-reduce never completes: PCIe ACS or an IOMMU reroutes
        peer-to-peer traffic through the root complex (NVIDIA/nccl#2079), or GeForce cards advertise P2P
        that does not work (NVIDIA/nccl#1127). Nothing is printed until the timeout.

    Example
        node-a:811:902 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/IPC
        [rank1]:[E1206 ...] [Rank 1] Watchdog caught collective operation timeout:
        WorkNCCL(SeqNum=1, OpType=ALLREDUCE, ...)

    Fix
        `NCCL_P2P_DISABLE=1` confirms it (the job then runs, slower); the lasting fix is ACS off in the
        BIOS or `iommu=pt`. `ddpdoctor check` on the node tests P2P between every GPU pair.
    """
    consumer = job.get("p2p_consumer")
    p2p = job.get("nccl_p2p")
    early = p2p_early(job)
    if consumer and consumer.count:
        ev = consumer.first[0]
        yield hit(job, "error", "these GPUs do not support P2P; NCCL must be told (NCCL_P2P_DISABLE=1)", at=ev.line,
                  stage=1, ranks=consumer.ranks, hosts=consumer.hosts, count=consumer.count,
                  detail="accelerate refuses to start on GeForce RTX 40xx with a driver that advertises broken P2P.",
                  fix="export NCCL_P2P_DISABLE=1 NCCL_IB_DISABLE=1   # or a driver >= 550.40.07\nddpdoctor check",
                  evidence={})
        return
    if not early or timeouts_owner(job) != "LOG016":
        return
    first = min((r["line"] for r in early if r.get("line") is not None),
                key=lambda l: (l.ts if l.ts is not None else INF, l.src, l.lineno), default=None)
    hosts = p2p.hosts
    yield hit(job, "error", f"ranks {ranks_text(r['rank'] for r in early)} hang in the first collective over P2P",
              at=first, stage=2, ranks=[r["rank"] for r in early], hosts=hosts,
              count=sum(job.occ[k].count for k in ("watchdog", "watchdog_seq") if k in job.occ),
              detail=("NCCL set up P2P between the GPUs and then the first collective never completed. That is "
                      "the signature of PCIe ACS or an IOMMU rerouting peer traffic, or GPUs whose P2P does not "
                      "work. Confirm on the node: the job runs with NCCL_P2P_DISABLE=1."),
              fix=("NCCL_P2P_DISABLE=1 torchrun ...        # confirms it (slower, but runs)\n"
                   "sudo lspci -vvv | grep -i acsctl       # SrcValid+ means ACS is on: disable it in the BIOS\n"
                   "# or boot with iommu=pt\n"
                   f"ddpdoctor check   # on {', '.join(sorted(hosts)) or 'the node'}: P2P between every GPU pair"),
              evidence={"p2p_lines": p2p.count, "p2p_example": p2p.first[0].line.text[:200],
                        "cross_tab": _cross_tab(early)})
