"""Failures recognised through the messages catalogue (ddpdoctor.facts.messages): each rule asks for classes
of messages, never for texts, and reports the first one that is not a consequence of an earlier failure,
with the catalogue entry's meaning and fix, the rank, host and line it rests on, and the consequences
folded under it."""
from __future__ import annotations

import re
from typing import List, Optional

from ...facts import messages as catalogue
from ...facts import model_mismatch
from ..job import Job, _fmt_ts
from ..prose import errno_text as _errno_text
from ..lines import Line
from ..signatures import Event, entry_of, survivable
from ..verdict import (INF, address_problem, fold, own_events, peer_loss_owner, pos, root_cause,
                       launcher_in, rendezvous_wait, signalled_from_outside, timeouts_owner)
from . import first_seen, hit, launcher_failure, launcher_only_failure, ranks_text, rule
from . import who as _who_of


def _first(job: Job, *classes: str) -> Optional[Event]:
    """The earliest own event of these classes; where it is a wrapper's line that names only its cause's class (an
    entry marked "wraps": Ray's "RayTaskError(AcceleratorError)"), the cause's own line of the same class later in
    the same file says more ("CUDA error: an illegal memory access was encountered"): that one."""
    evs = own_events(job, *classes)
    if not evs:
        return None
    if (entry_of(evs[0]) or {}).get("wraps"):
        inner = next((e for e in evs[1:] if e.line.src == evs[0].line.src and not (entry_of(e) or {}).get("wraps")),
                     None)
        if inner is not None:
            return inner
    return evs[0]


def _where(job: Job, ev: Event) -> str:
    w = first_seen(job, ev.line)
    return f"line {w['line']}" + (f" of {w['path']}" if len(job.paths) > 1 else "")


def _meaning_fix(ev: Event) -> tuple:
    entry = entry_of(ev)
    meta = catalogue.classes().get(ev.kind, {})
    meaning = (entry or {}).get("meaning") or meta.get("meaning", "")
    fix = (entry or {}).get("fix") or meta.get("fix", "")
    return meaning, fix


def _source(ev: Event) -> dict:
    entry = entry_of(ev)
    if not entry:
        return {}
    src = entry["source"]
    return {"catalogue_entry": entry["id"], "message_source": f"{src['repo']}:{src['path']}@{src['commit'][:12]}"}


# ProcessGroupNCCL prefixes what it logs with its own rank (logPrefix() in torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:
# "[PG ID 0 PG GUID 0(default_pg) Rank 2] ", "[PG 0 (default_pg) Rank 2] ", "[PG 3 Rank 5] ", before 2.2 "[Rank 2] "):
# a line without torchrun's [rankN]: prefix still says whose it is ("[E ProcessGroupNCCL.cpp:916] [Rank 0] NCCL watchdog
# thread terminated with exception: CUDA error: ...")
# The same prefix starts the watchdog's exception text that std::terminate repeats ("terminate called after throwing an
# instance of 'c10::DistBackendError'\n  what():  [PG ID 0 PG GUID 0(default_pg) Rank 6] Process group watchdog thread
# terminated with exception: CUDA error: ..."; ProcessGroupNCCL.cpp builds the exception's text from logPrefix()).
_PG_SELF = re.compile(r"(?:ProcessGroupNCCL\.cpp:\d+\]|what\(\):) +\[(?:PG (?:ID )?\S+ (?:PG GUID \S+ ?)?(?:\([^)]*\) )?)?"
                      r"Rank (\d{1,6})\]")


def _who(job: Job, ev: Event) -> tuple:
    rank = job.who(ev.line)
    if rank is None:
        m = _PG_SELF.search(ev.line.text)
        rank = int(m.group(1)) if m else None
    if rank is None and str(ev.data.get("own_rank", "")).isdigit():
        # the message names the rank printing it (NCCL's "... at and around rank %d" is comm->rank, src/init.cc)
        rank = int(ev.data["own_rank"])
    host = ev.line.host or (job.rank_host.get(rank) if rank is not None else None)
    return rank, host


def _ranks_of(job: Job, evs: List[Event]) -> List[int]:
    return sorted({r for r in (job.who(e.line) for e in evs) if r is not None})


def _report(job: Job, rid: str, ev: Event, title: str, detail: str, fix: str, stage: int = 0,
            evidence: Optional[dict] = None, ranks=None):
    rank, host = _who(job, ev)
    if rank is None and not ranks:
        got = launcher_failure(job)
        if got is not None:
            # the message names no rank; the launcher reports one process failing: said as an inference, and its
            # global rank only where the log shows it (rules/__init__.launcher_failure)
            local, rank, how = got
            detail += (f" No line names the rank; the launcher reports one process failing, local rank {local}"
                       + (f" (rank {rank}: {how})" if rank is not None and how else
                          f" (rank {rank})" if rank is not None else
                          " (its global rank is not in these logs)")
                       + ": the message is taken to be its (an inference from the exit).")
            evidence = {**(evidence or {}), "rank_from_launcher_exit": local}
    ranks = [rank] if ranks is None and rank is not None else (ranks or [])
    extra, sentence = fold(job, rid, ranks)
    occ = job.get(ev.kind)
    return hit(job, "error", title, at=ev.line, stage=stage, ranks=ranks, hosts=[host] if host else [],
               count=occ.count if occ else None,
               detail=(detail + f" (the evidence: {_where(job, ev)}.) " + sentence).strip(), fix=fix,
               evidence={**_source(ev), **(evidence or {}), **extra})


def _rank_words(job: Job, ev: Event) -> str:
    rank, host = _who(job, ev)
    if rank is not None:
        return f"rank {rank}" + (f" on {host}" if host else "")
    inferred = launcher_only_failure(job)
    if inferred is not None:
        return f"local rank {inferred} (the one process the launcher reports failing)" + (f" on {host}" if host else "")
    return f"a process on {host}" if host else "a process"


@rule("LOG020", "gpu-fault")
def gpu_fault(job: Job):
    """A GPU kernel faulted or the GPU reported a hardware error on one rank (illegal memory access, device-side
    assert, uncorrectable ECC error, launch failure).

    What it checks
        Messages of the catalogue class `cuda_fault`: the CUDA runtime's error texts as torch prints them
        (`CUDA error: an illegal memory access was encountered`, `device-side assert triggered`,
        `uncorrectable ECC error encountered`), NCCL's `Cuda failure 'an illegal memory access ...'`, and
        torch's "CUDA kernel errors might be asynchronously reported" hint, surfacing directly or through NCCL
        or the watchdog. The first rank that printed one is named, and its peers' timeouts and lost
        connections are folded under it.

    Why it matters
        CUDA errors are sticky: after one, every CUDA call on that rank fails, its watchdog aborts, and the
        other ranks time out or lose it, so the log fills with NCCL and timeout errors that hide the fault
        (pytorch/pytorch#104221 reports an illegal memory access surfacing as an NCCL error).

    Example
        [rank3]: RuntimeError: CUDA error: an illegal memory access was encountered

    Fix
        Rerun with `CUDA_LAUNCH_BLOCKING=1` (and `TORCH_USE_CUDA_DSA=1` for device-side asserts, usually an
        index out of range); an ECC or Xid error is the hardware: `nvidia-smi -q -d ECC` on that node.
    """
    ev = _first(job, "cuda_fault")
    if ev is None:
        return
    m = re.search(r"(?:CUDA error|Cuda failure|CUDA failure|HIP error)(?: [\w./\-]+\.\w+:\d+)?(?: \d+)?:? ?'?([a-zA-Z][\w \-]+)",
                  ev.line.text)
    xid = ev.data.get("xid")
    assertion = re.search(r"Assertion `(.*)` failed", ev.line.text)
    if assertion:
        said = re.search(r'"([^"]+)"', assertion.group(1))
        where = re.search(r"([\w]+\.cuh?:\d+)", ev.line.text)
        what = ("a device-side assert: " + (said.group(1) if said else assertion.group(1)[:80])
                + (f" ({where.group(1)})" if where else ""))
    elif xid:
        what = f"Xid {xid}" + (" (fell off the bus)" if xid == "79" else "")
    elif "fallen off the bus" in ev.line.text:
        what = "the GPU fell off the bus"
    elif str(ev.data.get("entry", "")).startswith(("rocclr.", "rocr.")):
        # the ROCm runtime's own abort lines (round 15): the HSA status, or the VM fault's reason
        hsa = re.search(r"HSA_STATUS_ERROR_\w+", ev.line.text)
        reason = re.search(r"Reason: ([^.]{1,80})", ev.line.text)
        what = ("the ROCm runtime aborted on " + hsa.group(0) if hsa else
                "a GPU memory access fault (ROCm)" + (f": {reason.group(1).strip()}" if reason else ""))
    elif not m and (entry_of(ev) or {}).get("wraps"):
        # only a wrapper's line (Ray's "RayTaskError(AcceleratorError)"): the class, not which CUDA error
        what = "a CUDA error (torch.AcceleratorError, re-raised by Ray; which one is in the worker's own log)"
    else:
        what = m.group(1).strip() if m else "a CUDA error"
    meaning, fix = _meaning_fix(ev)
    hw = bool(re.search(r"ECC|Xid|fallen off", ev.line.text))
    if str(ev.data.get("entry", "")).startswith("nvidia.driver."):
        # the kernel log: the driver speaks of a GPU (its PCI address), not of a rank
        dev = ev.data.get("dev")
        title = f"the NVIDIA driver reports a GPU failure{' on PCI ' + dev if dev else ''}: {what}"
        named = _watchdog_rank(job, ev, faults_only=True)
        if named is not None:
            # Xid 48 (DBE ECC), 63/64 (page retirement), 94/95 (contained/uncontained ECC) reach the rank on that GPU
            # as a sticky CUDA error, which its watchdog prints with its rank
            title += f"; rank {named[0]}'s watchdog reports the CUDA error (line {named[1].lineno})"
            yield _report(job, "LOG020", ev, title, meaning, fix, ranks=[named[0]],
                          evidence={"cuda_error": what, "rank_from": f"watchdog line {named[1].lineno}"})
            return
        yield _report(job, "LOG020", ev, title, meaning, fix, evidence={"cuda_error": what})
        return
    rank, host = _who(job, ev)
    named = None
    if rank is None:
        named = _watchdog_rank(job, ev)
    if named is not None:
        rank, at = named
        title = (f"rank {rank}" + (f" on {host}" if host else "") + f" hit a GPU {'hardware error' if hw else 'fault'}: "
                 f"{what}")
        meaning += (f" The fault's own line names no rank; the watchdog line that reports it (line {at.lineno}) "
                    f"names rank {rank}.")
        yield _report(job, "LOG020", ev, title, meaning, fix, ranks=[rank],
                      evidence={"cuda_error": what, "rank_from": f"watchdog line {at.lineno}"})
        return
    title = f"{_rank_words(job, ev)} hit a GPU {'hardware error' if hw else 'fault'}: {what}"
    yield _report(job, "LOG020", ev, title, meaning, fix, evidence={"cuda_error": what})


def _watchdog_rank(job: Job, ev: Event, faults_only: bool = False) -> Optional[tuple]:
    """(rank, line) when a CUDA fault's line names no rank and the ProcessGroupNCCL watchdog, which surfaces a sticky
    CUDA error on the rank it belongs to ("[PG 0 Rank 3] Process group watchdog thread terminated with exception:
    CUDA error: uncorrectable ECC error encountered", "[Rank 1] Watchdog caught collective operation timeout"),
    names exactly one rank in the log; with several ranks named, which one faulted is not in the log (None)."""
    found = {}
    for e in own_events(job, "cuda_fault")[1:]:
        r, _h = _who(job, e)
        if r is not None:
            found.setdefault(r, e.line)
    if not found and not faults_only:
        for cls in ("watchdog_abort", "collective_timeout", "nccl_internal_error", "nccl_system_error"):
            for e in own_events(job, cls):
                r, _h = _who(job, e)
                if r is not None and r >= 0:
                    found.setdefault(r, e.line)
    if len(found) != 1:
        return None
    (r, line), = found.items()
    return r, line


# HIP's name for it: rccl-tests' "Test HIP failure common.cu:1129 'hipErrorInvalidDevice'" (older HIP runtimes'
# hipGetErrorString gave the enum's name; ROCm/rccl-tests#16, round 18)
_ORDINAL = re.compile(r"invalid device ordinal|exceeds available GPUs|\bhipErrorInvalidDevice\b")


_NO_BACKEND = re.compile(r"Distributed package doesn't have (\w+) built in")
_NO_ACCEL_BACKEND = re.compile(r"We\s+detected\s+accelerator\s+(\S+?)\s+on\s+your\s+machine\.\s+But\s+we\s+don't\s+know")

# The GPU runtime a cuda_setup message comes from, for the title's words: HIP (ROCm) when the line or its catalogue
# entry is ROCm's (torch's ROCm build prints "HIP error: ...", the HIP runtime "hipErrorNoBinaryForGpu: ...", torch's
# HIPGuardImpl "raised from deviceCount"; entries hip.*, torch.hip.*), else CUDA.
_HIP_TEXT = re.compile(r"\bhip[A-Z_]\w*|\bHIP error\b|\bROCm\b|\bamdgpu\b|HIPGuardImpl|\bgfx\d", re.I)


def _gpu_runtime(ev: Event) -> str:
    entry = entry_of(ev) or {}
    eid = entry.get("id", "")
    return "HIP (ROCm)" if (eid.startswith(("hip.", "torch.hip.")) or _HIP_TEXT.search(ev.line.text)) else "CUDA"


@rule("LOG021", "gpu-setup")
def gpu_setup(job: Job):
    """CUDA could not give a rank a usable GPU: an invalid device ordinal (more ranks per node than visible GPUs),
    no GPU or driver, a driver older than the runtime, no kernels for this GPU.

    What it checks
        Messages of the catalogue class `cuda_setup`: `CUDA error: invalid device ordinal`, torchrun's
        "local_rank N exceeds available GPUs", "no kernel image is available for execution on the device",
        "driver version is insufficient", ProcessGroupNCCL's "no GPUs found". For an invalid ordinal it says
        how many ranks per node the log shows.

    Why it matters
        `--nproc-per-node 8` on a node where CUDA_VISIBLE_DEVICES shows 4 GPUs makes ranks 4-7 call
        `torch.cuda.set_device(4)`, which fails at once; the others then wait for them
        (huggingface/accelerate#1101 is one such report).

    Example
        [rank4]: RuntimeError: CUDA error: invalid device ordinal

    Fix
        `--nproc-per-node` must not exceed the GPUs in CUDA_VISIBLE_DEVICES (`nvidia-smi -L`); use the
        LOCAL_RANK the launcher sets; match the driver to the torch build.
    """
    evs = [e for e in own_events(job, "cuda_setup") if not _trained_on_after(job, e)]
    ev = evs[0] if evs else None
    if ev is None:
        return
    meaning, fix = _meaning_fix(ev)
    ranks = _ranks_of(job, evs)
    if _ORDINAL.search(ev.line.text):
        locs = sorted({e.local_rank for e in job.exits if e.local_rank is not None} | set(ranks))
        title = (f"{_rank_words(job, ev)} asked for a GPU that is not visible (invalid device ordinal): more processes "
                 "per node than GPUs")
        detail = ("The rank's device index is not below the number of GPUs CUDA sees on its node, so "
                  "--nproc-per-node (or the rank-to-GPU arithmetic) exceeds the visible GPUs."
                  + (f" Ranks that failed this way: {ranks_text(ranks)}." if len(ranks) > 1 else "")
                  + (f" Local ranks in the log: {ranks_text(locs)}." if locs else ""))
        fix = ("nvidia-smi -L; echo $CUDA_VISIBLE_DEVICES   # on that node: how many GPUs the job sees\n"
               "torchrun --nproc-per-node <that many> ...\n"
               "torch.cuda.set_device(int(os.environ['LOCAL_RANK']))   # the local rank, not the global rank")
    elif _NO_ACCEL_BACKEND.search(ev.line.text):
        # torch/distributed/distributed_c10d.py (BackendConfig, @cf30153): a device type with no default collective
        # backend (mps, a vendor's out-of-tree device) and no `backend=` given: the call, not the GPU, is at fault
        device = _NO_ACCEL_BACKEND.search(ev.line.text).group(1)
        title = (f"{_rank_words(job, ev)} has no communication backend for accelerator {device}: init_process_group "
                 "needs backend= (torch knows none for this device)")
        detail = meaning
        fix = (f"dist.init_process_group(backend=\"gloo\")   # {device} has no collective backend of its own: gloo on "
               "CPU tensors\n# or run the distributed part on a device type torch has a backend for (cuda: nccl)")
    elif _NO_BACKEND.search(ev.line.text):
        # torch built without the backend asked for (torch/distributed/distributed_c10d.py raises "Distributed package
        # doesn't have NCCL built in" when is_nccl_available() is false: Windows and macOS wheels, CPU-only builds):
        # not a GPU fault, the install
        backend = _NO_BACKEND.search(ev.line.text).group(1)
        title = f"{_rank_words(job, ev)} cannot use the {backend} backend: this torch build does not include it"
        detail = meaning
    else:
        m = re.search(r"((?:CUDA )?driver version is insufficient for (?:CUDA )?runtime version|no kernel image is "
                      r"available for execution on the device|no (?:CUDA|ROCm)-capable device is detected|No CUDA GPUs are "
                      r"available|no GPUs found|The NVIDIA driver on your system is too old \(found version \d+\)|"
                      r"Found no NVIDIA driver on your system)|(?:CUDA|HIP) error: ([\w \-]+)|\b(hipError\w+)", ev.line.text)
        what = next(g for g in m.groups() if g).strip() if m else ("CUDA could not be set up" if _gpu_runtime(ev) == "CUDA" else "the HIP runtime failed")
        runtime = _gpu_runtime(ev)
        title = f"{_rank_words(job, ev)} could not use its GPU{' (HIP, ROCm)' if runtime != 'CUDA' else ''}: {what}"
        detail = meaning
    yield _report(job, "LOG021", ev, title, detail, fix, stage=1, ranks=ranks or None)


# NCCL's and torch's words for the other end of a broken connection: "remote peer node-b<40522>", "Call to recv
# from 172.16.0.12<33759> failed", "Got completion from peer 10.0.0.2<55013>", "remote error detected from rank: 5"
# (Gloo's pair.cc names the peer's address after its words: "Socket closed [10.0.0.2]:41234", "writev [..]:N: <strerror>",
# "Read error [..]:N: Connection reset by peer", "Connection closed by peer [..]:N"; facebookincubator/gloo @cc44198)
_PEER = re.compile(r"(?:remote peer|from peer|recv from|send to|[Cc]onnect(?:ion)? to|closed by peer|closed by|Read error|"
                   r"Socket (?:unexpectedly )?closed|\] writev|(?:Read|Write) timeout)\s+\[?"
                   r"([A-Za-z0-9][\w.:%\-]*?)\]?(?:<\d+>|:\d+\b)"
                   r"|remote error detected from rank:? ?(\d+)|(?<!Proxy Call to )rank (\d+) .{0,40}(?:exited|died|failed)"
                   # monitoredBarrier's "received errors while waiting for send/recv from rank 0" (ProcessGroupGloo.cpp)
                   r"|for send/recv from rank (\d+)")
_RAY_NODE = re.compile(r"node id:?\s*[0-9a-f]+\s+and (?:address|ip):\s*([\w.:\-]+)|Node Id:\s*([0-9a-f]{8,})")
# NCCL's proxy.cc "Proxy Call to rank %d failed (%s)" names the rank whose own proxy thread the call went to (the
# reporting rank itself), not a peer: it never names who went away (NVIDIA/nccl src/proxy.cc, ncclProxyCallBlocking)


@rule("LOG022", "peer-lost")
def peer_lost(job: Job):
    """NCCL lost a peer (ncclRemoteError, "remote process exited or there was a network error") and no rank's own
    failure is in these logs: the peer, or its node, died first.

    What it checks
        Messages of the catalogue classes `nccl_remote_error` and `nccl_aborted` (ncclRemoteError, a
        communicator aborted after a peer error, "Connection closed by remote peer", Ray's "The actor died because
        its node has died" and "... has been marked dead because the detector has missed too many heartbeats"), when no death, exception
        or OOM of another rank explains them. It names the peer host or rank when a line shows it (NCCL's
        "remote peer HOST<port>", torch's "remote error detected from rank N").

    Why it matters
        ncclRemoteError is what a rank sees when its peer dies: the cause is on the other side, usually in a
        log that was not collected (another node's), and often without a word (the OOM killer, a GPU that
        fell off the bus). Reporting the remote error as the fault sends people after the network
        (NVIDIA/nccl#1059 discusses the message).

    Example
        [rank1]: torch.distributed.DistBackendError: NCCL error in: ..., remote process exited or there was a
        network error, NCCL version 2.21.5 ... ncclRemoteError: A call failed possibly due to a network error or
        a remote process exiting prematurely.

    Fix
        Collect the log of the named peer (or of every node) and `dmesg -T` on its node: the OOM killer, Xid or
        ECC errors; rerun with NCCL_DEBUG=INFO to get NCCL's view of which connection broke.
    """
    if peer_loss_owner(job) is not None:
        return   # the lost peer is the root cause's rank, or the log's own fault broke it: that finding folds these lines
    evs = [e for e in own_events(job, "nccl_remote_error", "nccl_aborted")
           if (e.line.src, e.line.lineno) not in job.store_lines]   # the rendezvous store's reset is LOG008's
    if evs and job.timeout_table() and all(e.kind == "nccl_aborted" for e in evs):
        # "NCCL communicator was aborted on rank 0. Original reason for failure was: [Rank 0] Watchdog caught collective
        # operation timeout": the watchdog aborts the communicator after the timeout; the timeouts' finding carries it
        return
    if any(e.line.nccl == "WARN" and re.search(r"NET/IB\s*:?\s*Got completion|NET/IBP?:", e.line.text)
           for e in (job.get("nccl_ib").first if job.get("nccl_ib") else [])):
        # NCCL traces an InfiniBand completion error back as a remote error (" -> 6"): the WARN itself names the
        # failing transfer and its peer, and LOG009 reports it; only a remote error a line states stays here
        evs = [e for e in evs if e.data.get("from") != "nccl_result_trace"]
    if not evs:
        return
    ev = evs[0]
    peers, peer_ranks = [], []
    for occ_kind in ("nccl_warn", "nccl_remote_error", "nccl_aborted", "nccl_network"):
        occ = job.get(occ_kind)
        for e in (occ.first if occ else []):
            for m in _PEER.finditer(e.line.text):
                if m.group(1) and m.group(1) not in peers:
                    peers.append(m.group(1))
                for g in (m.group(2), m.group(3), m.group(4)):
                    if g and int(g) not in peer_ranks:
                        peer_ranks.append(int(g))
    seen_ranks = _ranks_of(job, evs)
    named = ""
    if peer_ranks:
        named = f"rank {ranks_text(peer_ranks)}"
    elif peers:
        named = f"the peer at {', '.join(peers[:3])}"
    aborted = "communicator was aborted" in ev.line.text
    entry_id = str(ev.data.get("entry", ""))
    via = ("dist.monitored_barrier: its exchange with rank 0 failed" if "monitoredBarrier" in ev.line.text
           else "Gloo: its connection to the peer closed" if entry_id.startswith("gloo.")
           else "Ray: the node it ran on died" if entry_id.startswith("ray.node_")
           else "Ray: the process that owned it died" if entry_id.startswith("ray.owner_")
           else "Horovod shut down after another rank's failure" if entry_id.startswith("horovod.")
           else "the JAX coordination service reported a peer's missed heartbeats" if entry_id.startswith("xla.")
           else "Ascend HCCL EI0006: building its links to the peers timed out" if entry_id.startswith("torch_npu.hccl.")
           else _hccl_code(entry_id) if entry_id.startswith("hccl.")
           else "NCCL remote error" if (entry_id.startswith("nccl") or "nccl" in ev.line.text.lower()
                                        or not _errno_text(ev.line.text))
           # not NCCL's line: the socket's own error as the line says it ("RuntimeError: Connection reset by peer",
           # torch <= 2.3's c10d for a read that got 0 bytes, Utils.hpp recvBytes' ECONNRESET @059ed765)
           else f"its connection failed: {_errno_text(ev.line.text)}")
    if entry_id.startswith("ray.node_") and not named:
        # Ray names the dead node by its id (gcs_actor_manager.cc GenNodeDiedCause) and, when the GCS marks it dead,
        # by its address (gcs_node_manager.cc RemoveNode): the host whose own log and kernel log hold the cause
        nodes = [m.group(1) or m.group(2) for e in evs if str(e.data.get("entry", "")).startswith("ray.node_")
                 for m in [_RAY_NODE.search(e.line.text)] if m]
        if nodes:
            named = f"the Ray node {nodes[0] if len(nodes[0]) < 20 else nodes[0][:12] + '...'}"
    if aborted and not named:
        # torch's "NCCL communicator was aborted": the communicator was torn down (by the watchdog after a timeout or
        # an error, or after a peer failed); the line says that much, not that a peer went away
        title = f"{_rank_words(job, ev)}'s NCCL communicator was aborted: what aborted it is not in these logs"
        lead = ("An aborted communicator is a consequence: the process group's watchdog tore it down after a timeout "
                "or an NCCL error, on this rank or after a peer failed. That first failure is earlier in this rank's "
                "output or in another rank's log.")
    elif job.timeout_table() and timeouts_owner(job) != "LOG022":
        # the remote error FOLLOWS the first watchdog timeout (verdict.peer_lost_first is false): the order says the
        # collective timed out first; the broken connection may be the timeout's own aftermath (a watchdog that aborts
        # its communicator closes its connections, and the peers see a remote error), so no "failed first" here
        title = (f"{_rank_words(job, ev)} lost a peer ({via}) after the watchdog timeout"
                 + (f": its connection to {named} broke" if named else "") + "; the timeout came first")
        lead = ("A remote error means the other side of the connection went away. Here it comes after a watchdog timeout: "
                "when a rank's watchdog aborts its communicator (or its process exits) after the timeout, its peers see "
                "their connections close, so this line may be the timeout's aftermath, not its cause.")
    else:
        title = (f"{_rank_words(job, ev)} lost a peer ({via})" +
                 (f": {named} failed first" if named else ": the peer's own failure is not in these logs"))
        lead = ("A remote error means the other side of the connection went away: a rank or its node died first, and "
                "its own log (or the node's kernel log) holds the cause.")
    if via.startswith("Ray"):
        # a host lost, not a connection: Ray's GCS declared the node dead (its raylet stopped answering)
        title = (f"a Ray node died, and the workers on it with it ({named or 'the line does not name the node'}): "
                 "the node's own failure is not in these logs")
        lead = ("Ray's GCS marked the node dead (its raylet stopped: the node's OOM killer, a preempted or rebooted "
                "machine, a lost link, or heartbeats lagging on an overloaded host), and every actor on it died with "
                "it. The errors of the other workers follow from it; the cause is in that node's raylet and kernel "
                "logs.")
    detail = (lead
              + (f" The log names {named}." if named else " No line names the peer.")
              + (f" Ranks that reported it: {ranks_text(seen_ranks)}." if seen_ranks else ""))
    late = {}
    if timeouts_owner(job) == "LOG022":
        # the peer went away no later than the first watchdog timeout (verdict.peer_lost_first): the timeouts are the
        # surviving ranks waiting for it, said here and not as a collective some rank never joined
        tab = job.timeout_table()
        waited = sorted({r["rank"] for r in tab if r.get("rank") is not None and r["rank"] >= 0})
        late = {"timed_out_ranks": waited, "timeout_lines": len(tab)}
        detail += (f" Then {len(tab)} watchdog timeout line{'s' if len(tab) > 1 else ''}"
                   + (f" (rank{'s' if len(waited) > 1 else ''} {ranks_text(waited)})" if waited else "")
                   + ": the surviving ranks waiting for the lost peer, a consequence, not a collective that a rank "
                     "skipped.")
    fix = ((f"# read {named}'s own log and, on its node:\n" if named else "# collect every node's log, and on each node:\n")
           + "dmesg -T | grep -iE 'killed process|out of memory|xid|nvrm'\n"
           "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET torchrun ...   # which connection broke, seen from both sides")
    # after the timeout (the order above), the lost peer is listed after the timeout's finding, whatever the stamps say
    after = not (aborted and not named) and bool(job.timeout_table()) and timeouts_owner(job) != "LOG022"
    yield _report(job, "LOG022", ev, title, detail, fix, stage=3 if after else 2, ranks=seen_ranks or None,
                  evidence={"peer_hosts": peers[:8], "peer_ranks": peer_ranks[:8], **late})


def _duplicate_rank_claims(job: Job):
    """Two processes of one log that say they are the same rank (Lightning's "GLOBAL_RANK: 1, MEMBER: 2/8" twice):
    the launcher started the job twice over (srun around a launcher, --ntasks-per-node against devices)."""
    dups = {r: lines for (src, r), lines in job.rank_claims.items() if len(lines) > 1}
    if not dups:
        return None
    first = min((lines[1] for lines in dups.values()), key=lambda ln: (ln.src, ln.lineno))
    claimed = sorted({r for (_src, r) in job.rank_claims})
    world = next(iter(job.world_sources.values()), None) if job.world_sources else None
    never = sorted(set(range(world)) - set(claimed)) if world else []
    title = (f"rank{'s' if len(dups) > 1 else ''} {ranks_text(sorted(dups))} started twice: two processes claim "
             f"{'each' if len(dups) > 1 else 'it'}" + (f", and rank{'s' if len(never) > 1 else ''} {ranks_text(never)} "
                                                    f"of {world} never started" if never else ""))
    return hit(job, "error", title, at=first, stage=1, ranks=sorted(dups),
               detail=(f"Line {first.lineno} is the second process to say it is rank {min(dups)} (the framework's "
                       "GLOBAL_RANK line). Processes that share a rank wait for each other's peers forever: the job "
                       "hangs in its set-up. Usually two launchers ran the job: srun started N tasks and each ran a "
                       "launcher (torchrun, Lightning's own process spawning), or SLURM's --ntasks-per-node does not "
                       "match the framework's devices."),
               fix=("# one launcher per node: either srun starts the ranks (one task per GPU, the framework reads\n"
                    "# SLURM_PROCID), or srun starts one task per node that runs torchrun\n"
                    "#SBATCH --ntasks-per-node=<GPUs per node>   # Lightning: Trainer(devices=<the same>, num_nodes=N)"),
               evidence={"ranks_claimed_twice": sorted(dups), "never_claimed": never, "world_size": world})


@rule("LOG023", "launch-misconfigured")
def launch_misconfigured(job: Job):
    """The script was not launched the way it expects: no launcher set RANK/WORLD_SIZE/MASTER_ADDR, the launcher's
    `--local-rank` was rejected, or the process group was never created.

    What it checks
        Messages of the catalogue class `launch_misconfigured`: torch's "environment variable RANK expected,
        but not set" (init_method='env://' under plain `python`), argparse's "unrecognized arguments:
        --local-rank=0" (torch >= 2.0's launcher passes the hyphenated form), "Default process group has not
        been initialized", DeepSpeed's "requires the LOCAL_RANK environment variable", accelerate's and the
        Trainer's launch checks, and Python's `KeyError: 'RANK'` (also 'LOCAL_RANK', 'WORLD_SIZE',
        'LOCAL_WORLD_SIZE', 'MASTER_ADDR', 'MASTER_PORT', 'GROUP_RANK') raised by `os.environ[...]` in a
        script that reads a launcher variable no launcher set (CPython Lib/os.py _Environ.__getitem__), and
        the same for the variables srun sets for every task (`KeyError: 'SLURM_PROCID'`, SLURM_LOCALID,
        SLURM_NTASKS...: srun.1's OUTPUT ENVIRONMENT VARIABLES) in a script started outside srun, and the TPU
        runtime's "Invalid system configuration: 2x2 host topology with 0 missing hosts, but 1 hosts in total"
        (a pod slice's program started on fewer hosts than the slice has: pytorch/xla docs/pjrt.md, 'Pods'), and a
        launcher's own failure to start: MPICH Hydra's "match_arg (...): unrecognized argument X" (mpiexec refused its
        own option: pmodels/mpich src/pm/hydra/lib/utils/args.c), bash's "torchrun: command not found" and dash's
        "/bin/sh: 1: torchrun: not found" for the launcher or python (bash execute_cmd.c, dash src/exec.c), zsh's
        "zsh: command not found: torchrun" (Src/exec.c) and fish's "fish: Unknown command: torchrun"
        (share/functions/fish_command_not_found.fish), and a Python script run by a shell (`bash train.py`, a .py
        launched as a program with no `#!` line): the shell's own words for its Python lines, "train.py: line 1:
        import: command not found" (bash), "train.py: 1: import: not found" (dash), "command not found: import"
        (zsh), "train.py: line 6: syntax error near unexpected token `('" (bash parse.y), 'train.py: 6: Syntax
        error: "(" unexpected' (dash src/parser.c) and ImageMagick's "import: unable to open X server" (its
        `import` command ran: MagickWand/import.c), and Open MPI's "There are not enough slots available in the
        system to satisfy the N slots" (mpirun -np above its slots: orte/mca/rmaps/base/help-orte-rmaps-base.txt), and
        CPython's "python: can't open file 'x.py': [Errno 2] ..." (Modules/main.c: the script's path is wrong where
        the launcher started it), and argparse's rejection of a command line (CPython Lib/argparse.py @8ea6cc14,
        ArgumentParser.error: the usage banner, then "PROG: error: MESSAGE", exit 2) by a script or by a launcher
        (torchrun, deepspeed, accelerate: data/launchers.json); where the log ends inside the usage banner, or the
        banner is followed by the launcher's record of an exit with code 2, the rejection whose error line is missing
        (-h's help goes on with its option list and is no failure).

    Why it matters
        These fail at start-up on every rank with a message that names a variable or an argument, not the
        launch: the fix is how the job is started (pytorch/pytorch#92474 is the --local-rank change).

    Example
        ValueError: Error initializing torch.distributed using env:// rendezvous: environment variable RANK
        expected, but not set

    Fix
        Start it with torchrun (or accelerate launch / deepspeed), which sets the rank variables; accept
        `--local-rank` or read `os.environ['LOCAL_RANK']`.
    """
    dup = _duplicate_rank_claims(job)
    if dup:
        yield dup
        return
    ev = _first(job, "launch_misconfigured")
    if ev is None:
        cut = _cut_in_default_group(job) or _usage_banner_cut(job)
        if cut is not None:
            yield cut
        return
    if ev.data.get("shell_script"):
        path = str(ev.data["shell_script"])
        yield _report(job, "LOG023", ev, f"python was given a shell script: {path} is not Python (SyntaxError at its "
                      "first shell line)",
                      (f"Python compiled {path} as a Python program and stopped at its first shell line (a variable "
                       "assignment such as CONFIG=$1 is no Python): the launch script was started with `python` "
                       "instead of `bash`. Nothing of the training ran."),
                      (f"bash {path} <its arguments>   # or: chmod +x {path} && {path} ...\n"
                       "# the script itself calls python -m torch.distributed.launch / torchrun"),
                      stage=1, evidence={"shell_script": path})
        return
    meaning, fix = _meaning_fix(ev)
    text = ev.line.text
    m = re.search(r"environment variable (\w+) expected, but not set", text)
    a = re.search(r"unrecognized arguments: (.*)", text)
    k = re.search(r"KeyError:\s*'(\w+)(?:'|\s*$)", text) if str(ev.data.get("entry", "")).startswith("python.os.") else None
    if m:
        title = f"started without a launcher: the environment variable {m.group(1)} is not set (init_method='env://')"
    elif a and a.group(1).split() and set(a.group(1).split()) <= _CONTINUATIONS:
        # argparse's "unrecognized arguments: \\" (Lib/argparse.py parse_args: 'unrecognized arguments: %s' % ' '.join(
        # argv)): the program got a shell's line-continuation character as an argument; bash reads '\\' at a line's end
        # as a continuation (bminor/bash doc/bash.1, QUOTING), Windows cmd.exe and PowerShell do not
        title = (f"a multi-line command's continuation character reached the program as an argument "
                 f"({a.group(1).strip()}): a command written for one shell was run by another that does not continue "
                 f"lines with it, so the lines after it did not reach the program")
        meaning = ("argparse rejected the argument '" + a.group(1).strip() + "': the line-continuation character of "
                   "the command as written. In bash, zsh and sh a '\\' at the end of a line joins the next line to the "
                   "command; Windows cmd.exe continues a line with '^' and PowerShell with a backtick, and pass a '\\' "
                   "on as an ordinary argument, ending the command there. The options on the following lines never "
                   "reached the program (and ran as commands of their own, if at all).")
        fix = ("# put the command on one line, or use the continuation of the shell that runs it:\n"
               "#   bash/zsh/sh: \\    Windows cmd.exe: ^    PowerShell: `\n"
               "torchrun --nproc_per_node 2 train.py --epochs 10")
    elif ev.data.get("continued"):
        # PowerShell's CommandNotFoundException for an option word (data/messages.json powershell.command_not_found.
        # continuation_line): a continuation line of a bash-style multi-line command ran as its own command
        title = (f"a multi-line command was cut at its line ends: PowerShell ran the option {ev.data['continued']} as "
                 "a command of its own (the line before it ended in bash's '\\' continuation, which PowerShell does not "
                 "read as one), so the launch ran without it")
    elif k and k.group(1).startswith("SLURM_"):
        # os.environ['SLURM_PROCID'] outside srun: srun sets it for every task (srun.1, OUTPUT ENVIRONMENT VARIABLES)
        title = f"started outside srun: os.environ['{k.group(1)}'] is not set (KeyError): the script reads its rank from SLURM"
    elif k:
        # os.environ['RANK'] under plain `python`: a launcher sets it for every process (Lib/os.py _Environ.__getitem__)
        title = f"started without a launcher: os.environ['{k.group(1)}'] is not set (KeyError)"
    elif str(ev.data.get("entry", "")) == "cpython.argparse.error":
        # ArgumentParser.error (CPython Lib/argparse.py @8ea6cc14): "PROG: error: MESSAGE", exit 2, before any training
        prog, msg = str(ev.data.get("prog") or "the program"), str(ev.data.get("message") or text).strip()
        launcher, prog = _usage_prog(prog)
        title = (f"{'the launcher ' + prog if launcher else prog} rejected its command line at start (argparse, exit 2): "
                 f"{msg[:140]}")
    elif a and "local" in a.group(1):
        title = f"the script rejects the launcher's argument {a.group(1).strip()}"
    elif "Default process group has not been initialized" in text:
        title = "a collective ran before init_process_group: the process group was never created"
    elif re.search(r"rank \d+ of \d+ ranks has already checked in", text):
        r = re.search(r"rank (\d+) of (\d+) ranks", text)
        title = f"two processes started as rank {r.group(1)} (of {r.group(2)}): NCCL's bootstrap saw rank {r.group(1)} twice"
    elif ev.data.get("topology") and ev.data.get("total"):
        # the TPU runtime's host count against the slice's host topology (libtpu; pytorch/xla docs/pjrt.md 'Pods')
        want = 1
        for n in ev.data["topology"].split("x"):
            want *= int(n)
        want -= int(ev.data.get("missing") or 0)
        got = int(ev.data["total"])
        title = (f"a TPU pod slice's program started on {got} of its {want} hosts ({ev.data['topology']} host "
                 "topology): run it on every worker at once (gcloud compute tpus tpu-vm ssh ... --worker=all)"
                 if got < want else
                 f"{got} hosts joined a TPU runtime whose host topology ({ev.data['topology']}) has {want}: hosts of "
                 "separate TPUs cannot form one slice (use one pod slice, its own hosts only)")
    elif (ev.data.get("py_word") or str(ev.data.get("py_script") or "").endswith(".py")
          or ev.data.get("entry") == "imagemagick.import.no_x_server"):
        # a .py read by a shell (bash execute_cmd.c / parse.y, dash src/exec.c / src/parser.c, zsh Src/exec.c,
        # ImageMagick's import: data/messages.json): its Python lines were taken as commands; no rank started
        path = str(ev.data.get("py_script") or ev.data.get("py_prefix") or "")
        path = path if path.endswith(".py") else ""
        word = ev.data.get("py_word") or ("import" if "X server" in text else None)
        said = (f"`{word}` is no command" if word != "import" or "X server" not in text else
                "`import` ran ImageMagick's screen grabber")
        title = (f"a Python script was run by a shell, not by python: {path or 'the script'}'s lines were read as "
                 f"shell commands ({said})" if word else
                 f"a Python script was run by a shell, not by python: {path} failed as a shell script (a shell's "
                 "syntax error at a Python line)")
    elif ev.data.get("launcher_cmd"):
        # bash's "command not found" (execute_cmd.c) / dash's "<line>: not found" (src/exec.c) for the launcher itself
        title = (f"the launch never started a rank: the shell found no `{ev.data['launcher_cmd']}` on its PATH "
                 "(the environment that has it was not activated where the job ran)")
    elif ev.data.get("script") and ev.data.get("errno"):
        # CPython's "can't open file" (Modules/main.c pymain_run_file_obj), exit 2 before the script ran
        title = (f"the launch never ran the script: python could not open {ev.data['script']} "
                 f"({(ev.data.get('err') or '').strip() or 'errno ' + str(ev.data['errno'])}) where it started")
    elif ev.data.get("slots"):
        # Open MPI's mapper (orte/mca/rmaps/base/help-orte-rmaps-base.txt [orte-rmaps-base:alloc-error]): -np above the
        # slots it knows of (cores of the local host, a host file's slots=, the scheduler's tasks); nothing started
        title = (f"the launch never started a rank: mpirun (Open MPI) was asked for {ev.data['slots']} processes and "
                 "has fewer slots (-np above the cores, the host file's slots= or the scheduler's tasks)")
    elif ev.data.get("hydra_arg"):
        # MPICH Hydra's match_arg (src/pm/hydra/lib/utils/args.c): mpiexec refused its own option, no process started
        title = (f"the launch never started a rank: MPICH's mpiexec/mpirun (Hydra) rejected its own option "
                 f"-{ev.data['hydra_arg']} (unrecognized argument)")
    elif ev.data.get("node") and ev.data.get("reason"):
        title = f"SLURM could not start the tasks on node {ev.data['node']}: {ev.data['reason'].strip()[:120]}"
    elif ev.data.get("path") and ev.data.get("err"):
        title = f"SLURM could not execute {ev.data['path']}: {ev.data['err'].strip()[:120]}"
    else:
        title = f"{_rank_words(job, ev)}: the job was not launched as it expects: {text.strip()[:140]}"
    yield _report(job, "LOG023", ev, title, meaning, fix, stage=1, ranks=_ranks_of(job, own_events(job, "launch_misconfigured")) or None)


# a shell's line-continuation character, alone as an argument: bash/zsh/sh's '\\' (bminor/bash doc/bash.1 QUOTING:
# "If a \\<newline> pair appears ... it is treated as a line continuation"), cmd.exe's '^', PowerShell's backtick
_CONTINUATIONS = frozenset({"\\", "^", "`"})


def _usage_prog(prog: str) -> tuple:
    """(the launcher's name or None, the prog as printed) for an argparse prog: a launcher's command (torchrun,
    deepspeed, "accelerate <command> [<args>] launch") or the basename of a launcher module's file (`python -m
    torch.distributed.run` prints run.py), from data/launchers.json."""
    from ...facts.launchers import launchers, of_command

    words = prog.replace("<command> [<args>]", "").split()
    row, _n = of_command(words)
    if row is None and len(words) == 1 and words[0].endswith(".py"):
        names = [r["name"] for r in launchers() if any(m.rsplit(".", 1)[-1] + ".py" == words[0] for m in r["modules"])]
        if names:
            return " or ".join(names), prog
    return (row["name"] if row is not None else None), prog


def _usage_then_exit_2(job: Job) -> Optional[tuple]:
    """(banner line, exit) where a usage banner's wrapped lines are followed, within 30 lines of the same file, by a
    launcher's record of a process that exited with code 2 (argparse's exit status: ArgumentParser.exit(2, ...)), and
    no argparse error line is in the log (LOG023 reads that one first)."""
    for src, closer in job.usage_after.items():
        for e in job.exits:
            w = e.where
            if e.code == 2 and w is not None and w.src == src and 0 <= w.lineno - closer.lineno <= 30:
                occ = job.get("argparse_usage")
                banner = min((x.line for x in (occ.first if occ else []) if x.line.src == src), key=pos, default=None)
                if banner is not None:
                    return banner, e
    return None


def _usage_banner_cut(job: Job):
    """argparse's usage banner with nothing after it in its file but its own wrapped lines (Job.usage_open): argparse
    prints the banner alone only in ArgumentParser.error (print_usage to stderr, then "PROG: error: MESSAGE", exit 2;
    CPython Lib/argparse.py @8ea6cc14), and -h's help goes on with its option list. A log that ends inside the banner is
    an argument rejected at start whose error line the paste cut (or never captured: stderr elsewhere)."""
    closed = _usage_then_exit_2(job) if not job.usage_open else None
    if not job.usage_open and closed is None:
        return None
    line = min(job.usage_open.values(), key=pos) if job.usage_open else closed[0]
    occ = job.get("argparse_usage")
    ev = next((e for e in (occ.first if occ else []) if e.line is line), None)
    m = re.search(r"usage: (\S.{0,160}?) \[-h\]", line.text)
    prog = str((ev.data.get("prog") if ev is not None else None) or (m.group(1) if m else "the program")).strip()
    launcher, prog = _usage_prog(prog)
    rank = job.who(line)
    who = (f"the launcher ({launcher}, printed as {prog})" if launcher and launcher != prog
           else f"the launcher {prog}" if launcher else f"{prog}")
    if closed is not None:
        ex = closed[1]
        title = (f"{who} rejected its command line at start: argparse printed its usage banner (line {line.lineno}), "
                 f"then the launcher reports exit code 2 (line {ex.where.lineno}); the 'error:' line is not in the log")
        after = (f"the next line after its own wrapped lines is the launcher's report of a process that exited with "
                 f"code 2 (line {ex.where.lineno}), argparse's exit code")
    else:
        title = (f"{who} rejected its command line at start: argparse printed its usage banner (line {line.lineno}) "
                 "and the log ends there, its 'error:' line cut")
        after = "nothing follows it in this file but its own wrapped lines"
    detail = (f"Line {line.lineno} is argparse's usage banner for {prog}, and {after}. "
              "argparse prints the banner alone only when it rejects the command line "
              "(ArgumentParser.error: the banner, then '" + prog + ": error: <which argument and why>', then exit "
              "code 2, before any training); -h's help would go on with its option list. The line that names the "
              "argument is not in these lines (cut from the paste, or stderr went elsewhere): which argument was "
              "rejected is unknown here."
              + (" The prog is a launcher's: the launcher refused one of its own options (an option misspelt, one "
                 "its version does not take, or the script's option placed before the script)." if launcher else "")
              + (" The banner declares --local_rank and no --local-rank: torch >= 2.0's torch.distributed.launch "
                 "passes --local-rank=N (hyphenated; pytorch/pytorch#92474), which such a parser rejects as "
                 "'unrecognized arguments': likely the rejected argument (a guess: the error line is not here)."
                 if not launcher and "--local_rank" in line.text and "--local-rank" not in line.text else ""))
    fix = (f"{prog.split()[0]} ... 2>&1 | tail -n 5   # the same command: the line after the banner names the argument\n"
           f"{prog.split()[0]} -h   # the options it takes"
           + ("\n# launcher options go before the script, the script's own after it" if launcher else ""))
    if not launcher and "--local_rank" in line.text and "--local-rank" not in line.text:
        fix = ("parser.add_argument('--local-rank', '--local_rank', type=int, "
               "default=int(os.environ.get('LOCAL_RANK', 0)))   # if the cut error line names --local-rank=N\n" + fix)
    # stage 0 beside the exit it explains (LOG004 reports that exit at stage 0 too): the banner comes first, in log order
    return hit(job, "error", title, at=line, stage=0 if closed is not None else 1, ranks=[rank] if rank is not None else [],
               detail=detail + f" (the evidence: line {line.lineno}: {line.text.strip()[:160]}).",
               fix=fix, evidence={"usage_banner": first_seen(job, line), "prog": prog, "launcher": launcher,
                                  "error_line": None})


def _cut_in_default_group(job: Job):
    """A traceback cut before its message whose last frame is torch's `_get_default_group`
    (torch/distributed/distributed_c10d.py): that function only raises "Default process group has not been initialized,
    please make sure to call init_process_group." (the catalogue's torch.distributed entry for that text), so the
    process group was never created: DDP or a collective ran under plain `python`, or before init_process_group."""
    for key, frames in job._tb.items():
        if frames and frames[-1][1] == "_get_default_group" and "distributed_c10d" in str(frames[-1][0]):
            line = job.first_fail.get(key)
            if line is None:
                continue
            rank = job.who(line)
            return hit(job, "error", "a collective ran before init_process_group: the traceback (cut before its message) "
                       "ends in torch's _get_default_group, which raises 'Default process group has not been initialized'",
                       at=line, stage=1, ranks=[rank] if rank is not None else [],
                       detail=("torch.distributed's _get_default_group raises only that error: DistributedDataParallel, a "
                               "collective or a sampler asked for the default process group, and none was created. The "
                               "script ran under plain `python` (no launcher, so the Trainer or the code skipped "
                               "init_process_group), or called it too late. The message itself is cut from this log; "
                               f"its frames name the function (the evidence: line {line.lineno})."),
                       fix=("torchrun --nproc-per-node <GPUs> train.py ...   # a launcher; the Trainer then creates the group\n"
                            "# or, with one GPU, do not wrap in DistributedDataParallel; else call "
                            "dist.init_process_group() first"),
                       evidence={"last_frame": "_get_default_group"})
    return None


def _trained_on_after(job: Job, ev) -> bool:
    """A catalogue entry marked "survivable" is a message its library prints both when it raises and when the caller
    goes on: torch's load_state_dict lists each 'size mismatch for <key>' and raises only under strict=True (a
    strict=False loader, mmcv/mmengine's load_checkpoint or a fine-tune with a new head, prints the same lines as a
    warning); old torch's lazy CUDA init printed 'THCudaCheck FAIL ... no CUDA-capable device is detected' and a
    script that checks torch.cuda.is_available() trains on, on the CPU. Such a line with training progress after it,
    in the same file and from the same rank, is no failure; a line that names no rank only when the log shows one
    process wrote the file (Job.many_writers), else the progress may be another rank's."""
    if not survivable(ev):
        return False
    last = job.last_progress
    if last is None or last.src != ev.line.src or last.lineno <= ev.line.lineno:
        return False
    who = job.who(ev.line)
    if who is None:
        # no rank on the line: the progress may be another process's, unless the log shows one process wrote the file
        return not job.many_writers(ev.line.src)
    return job.who(last) == who


_ZERO_DP_SIZES = re.compile(r"DP world size of (\d+) but the current world size is (\d+)")


@rule("LOG024", "config-mismatch")
def config_mismatch(job: Job):
    """Two settings of the job disagree: a DeepSpeed config against the Trainer's arguments, a batch size that is not
    micro-batch x accumulation x world size, a world size that the model-parallel sizes or a checkpoint do not fit.

    What it checks
        Messages of the catalogue class `config_mismatch`: the Trainer's "Please correct the following DeepSpeed
        config values that mismatch TrainingArguments values", DeepSpeed's "train_batch_size is not equal to
        micro_batch_per_gpu * gradient_acc_step * world_size", checkpoint loads with another parallel layout,
        accelerate's DeepSpeed-plugin checks, and Megatron-LM's parallel-size asserts (megatron/training/arguments.py
        validate_args and megatron/core/parallel_state.py initialize_model_parallel: the world size not divisible
        by tensor x pipeline [x context] parallel size, the number of layers not divisible by the pipeline stages).
        The numbers the message carries are repeated in the title.

    Why it matters
        The config was written for another GPU count or copied from another run; the message names keys, not
        the arithmetic (huggingface/transformers#24359 reports the batch-size mismatch).

    Example
        AssertionError: Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu *
        gradient_acc_step * world_size 32 != 4 * 2 * 2

    Fix
        Write "auto" for the DeepSpeed keys the Trainer also sets; recompute the batch sizes for this world size;
        load checkpoints with the layout they were saved with (or convert them).
    """
    evs = [ev for ev in own_events(job, "config_mismatch") if not _trained_on_after(job, ev)]
    ev = evs[0] if evs else None
    if ev is None:
        return
    meaning, fix = _meaning_fix(ev)
    d = ev.data
    text = ev.line.text
    if {"train", "micro", "accum", "world"} <= set(d):
        title = (f"DeepSpeed's batch sizes do not multiply out: train_batch_size {d['train']} != micro-batch "
                 f"{d['micro']} x accumulation {d['accum']} x {d['world']} ranks")
    elif "ws" in d and str(d.get("entry", ev.data.get("entry", ""))).startswith("megatron."):
        # Megatron-LM's validate_args / initialize_model_parallel: the world size against the model-parallel sizes
        sizes = " x ".join(f"{n} {d[k]}" for k, n in (("tp", "tensor"), ("pp", "pipeline")) if d.get(k))
        sizes = f"{sizes} parallel" if sizes else (f"model-parallel size {d['mp']}" if d.get("mp") else "")
        title = (f"Megatron-LM's parallel sizes do not fit the world size: {d['ws']} processes"
                 + (f", {sizes}" if sizes else "") + " (the world size must be a multiple)")
    elif str(ev.data.get("entry", "")).startswith("megatron.") and "layers" in text:
        title = f"Megatron-LM's layers do not divide over the pipeline stages: {text.split('Error: ', 1)[-1].strip()[:140]}"
    elif _ZERO_DP_SIZES.search(text):
        # DeepSpeed's engine refuses a ZeRO checkpoint saved by another data-parallel size (deepspeedai/DeepSpeed
        # deepspeed/runtime/engine.py @edaa722, the catalogue's deepspeed.checkpoint.world_size entry)
        m = _ZERO_DP_SIZES.search(text)
        title = (f"the ZeRO checkpoint was saved by {m.group(1)} data-parallel ranks and this job has {m.group(2)}: "
                 "DeepSpeed cannot repartition its optimizer state")
    elif "mismatch TrainingArguments" in text:
        title = "the DeepSpeed config disagrees with the Trainer's arguments"
        if d.get("mismatches"):
            title += f": {str(d['mismatches']).strip()[:120]}"
    else:
        title = f"configuration mismatch: {text.strip()[:160]}"
    yield _report(job, "LOG024", ev, title, meaning, fix, stage=1, ranks=_ranks_of(job, own_events(job, "config_mismatch")) or None)




@rule("LOG025", "address-unresolved")
def address_unresolved(job: Job):
    """A host name did not resolve, resolved to a loopback address, or a numeric host name was read as an IP
    address: the ranks cannot find each other.

    What it checks
        Messages of the catalogue class `address_unresolved` and the resolver's own words ("Name or service not
        known", "Temporary failure in name resolution", "No address associated with hostname"); a rendezvous
        address that is a bare number (MASTER_ADDR=1234 resolves as the IP 0.0.4.210); a connection or NCCL
        bootstrap on 127.x in a job with more than one host (the node's own hostname maps to 127.0.1.1 in
        /etc/hosts).

    Why it matters
        Each gives a generic "connection refused/timed out" on the other ranks; the address itself is the fault
        (pytorch/pytorch#76367 is a hostname mapped to 127.0.1.1).

    Example
        socket.gaierror: [Errno -2] Name or service not known

    Fix
        Use a name every node resolves the same (`getent hosts NAME` on each), or the IP of the NIC that routes
        between nodes; remove the 127.0.1.1 line for the hostname from /etc/hosts.
    """
    ev = _first(job, "address_unresolved")
    num = address_problem(job)
    loop = _loopback_fallback_failed(job) if num is None and ev is None else None
    if ev is None and num is None and loop is None:
        stuck = _resolver_stall(job)
        if stuck is not None:
            warn, setup = stuck
            rank, host = _who(job, warn)
            name = _EAI_AGAIN.search(warn.line.text).group("host")
            yield hit(job, "warning", f"the job stops in its set-up after the resolver gave no answer for {name}"
                      + (f" on rank {rank}" if rank is not None else f" on {host}" if host else "")
                      + " (gai error -3, EAI_AGAIN: 'Temporary failure in name resolution'): likely the name lookups "
                      "hang on an unreachable DNS server",
                      at=warn.line, stage=1, ranks=[rank] if rank is not None else [], hosts=[host] if host else [],
                      detail=("c10d could not look up a name while it connected to the rendezvous store (line "
                              f"{warn.line.lineno}: {warn.line.text.strip()[:140]}). Error -3 is EAI_AGAIN: the resolver "
                              "did not answer (not 'no such name', which is -2), and each such lookup waits for the "
                              "resolver's timeout. Nothing after it shows progress, an error or an end (the last set-up "
                              f"line is {setup.lineno}): a guess that the set-up is stuck on these lookups, not a fact; "
                              "an excerpt that was cut there looks the same."),
                      fix=(f"getent hosts {name}; cat /etc/resolv.conf   # on that node: the name must resolve at once\n"
                           "# put this node's name and NIC address in /etc/hosts, or use IPs for MASTER_ADDR and "
                           "GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME for the NIC"),
                      evidence={"resolver_line": warn.line.lineno, "last_setup_line": setup.lineno, "guess": True,
                                "host_name": name,
                                **_source(warn)})
        return
    if loop is not None:
        warn, fail = loop
        rank, host = _who(job, warn)
        who = f"rank {rank}" if rank is not None else "a process"
        yield hit(job, "error", f"{who}'s own host name{' (' + host + ')' if host else ''} does not resolve to a local "
                  "address: Gloo fell back to the loopback address, and the connect across hosts failed",
                  at=warn.line, stage=1, ranks=[rank] if rank is not None else [], hosts=[host] if host else [],
                  detail=("Gloo looks up this machine's own host name (gethostname) to pick the address it listens on "
                          "(ProcessGroupGloo::createDefaultDevice); the name did not resolve to a usable local address, "
                          "so it listened on 127.0.0.1, which the processes on other hosts cannot reach. "
                          f"The warning is line {warn.line.lineno}; the failed connect that follows is line "
                          f"{fail.line.lineno}."),
                  fix=("getent hosts $(hostname)   # on that node: must print the NIC's address, not nothing or 127.x\n"
                       "export GLOO_SOCKET_IFNAME=<the NIC that routes between nodes>   # Gloo then needs no lookup\n"
                       "# or add '<NIC address> <hostname>' to /etc/hosts on that node"),
                  evidence={"warning_line": warn.line.lineno, "failure_line": fail.line.lineno,
                            **_source(warn)})
        return
    if num is not None:
        kind, line, value = num
        if kind == "numeric" and "." in value:
            # the address the connect went to, in 0.0.0.0/8: what inet_aton makes of a host name of digits
            title = (f"the processes connect to {value}, an address no machine has (0.0.0.0/8): the rendezvous host "
                     "name is a number, read as an IP address")
            detail = ("A host name made only of digits is parsed as an IPv4 number (1009 is 0.0.3.241), so the ranks "
                      "connect to an address that is no machine.")
            fix = "export MASTER_ADDR=$(getent hosts <node name> | awk '{print $1}')   # the node's IP\n" \
                  "# or rename the node: host names must not be all digits"
        elif kind == "numeric":
            title = f"the rendezvous address {value} is a number: it was read as an IP address, not a host name"
            detail = ("A host name made only of digits is parsed as an IPv4 number (1234 is 0.0.4.210), so the ranks "
                      "connect to an address that is no machine.")
            fix = "export MASTER_ADDR=$(getent hosts <node name> | awk '{print $1}')   # the node's IP\n" \
                  "# or rename the node: host names must not be all digits"
        elif len(job.hosts) <= 1:
            title = (f"a process connected to {value}, the loopback address /etc/hosts gives a host's own name: across "
                     "hosts, the process behind that name cannot be reached")
            detail = ("The address came from a host name (a peer's announced name, or MASTER_ADDR) that resolves to 127.0.1.1 on its node (Debian and Ubuntu "
                      "write that line into /etc/hosts), so the others connect to themselves. Within one host the "
                      "refusal instead means nothing was listening there (the process had died or not started).")
            fix = ("getent hosts $(hostname)   # on each node: must print the NIC's address, not 127.x\n"
                   "export GLOO_SOCKET_IFNAME=<the NIC> NCCL_SOCKET_IFNAME=<the NIC>   # or fix /etc/hosts")
        else:
            title = f"the job uses the loopback address {value} across several hosts"
            detail = ("A rank announced or used a 127.x address, which every node resolves to itself: the node's own "
                      "host name maps to 127.0.1.1 in /etc/hosts, or NCCL/Gloo picked the loopback interface.")
            fix = ("getent hosts $(hostname)   # on each node: must print the NIC's address, not 127.x\n"
                   "export MASTER_ADDR=<the head node's routable IP>\n"
                   "export NCCL_SOCKET_IFNAME=<the NIC> GLOO_SOCKET_IFNAME=<the NIC>")
        rank = job.who(line)
        yield hit(job, "error", title, at=line, stage=1, ranks=[rank] if rank is not None else [],
                  hosts=[line.host] if line.host else [],
                  detail=detail + f" (the evidence: line {line.lineno}.)", fix=fix, evidence={"address": value})
        return
    meaning, fix = _meaning_fix(ev)
    tb = [str(f) for f in ev.data.get("tb") or []]
    own = [f for f in tb if f in _OWN_HOST_FUNCS]
    if ev.data.get("host") and str(ev.data.get("entry", "")).startswith("torch.c10d.gloo_hostname."):
        rank, host = _who(job, ev)
        title = (f"Gloo cannot use the host name {ev.data['host']}" + (f" on rank {rank}" if rank is not None else "")
                 + ": it does not resolve to an address of this machine")
    elif own:
        # torch/distributed/elastic/rendezvous/utils.py _matches_machine_hostname: socket.getaddrinfo(this_host, ...)
        # with this_host = socket.gethostname(), unguarded (the lookup of the rendezvous host above it is guarded)
        rank, host = _who(job, ev)
        title = (f"this node's own host name{' (' + host + ')' if host else ''} does not resolve"
                 + (f" on rank {rank}" if rank is not None else "")
                 + f" ({own[-1]} looks up socket.gethostname()): {ev.line.text.strip()[:100]}")
        meaning = ("torch looks up this machine's own host name (socket.gethostname()) while it sets up the "
                   f"rendezvous ({own[-1]}), and the resolver has no address for it: the name is missing from "
                   "/etc/hosts and DNS, or the resolver is unreachable (gai error -3, 'Temporary failure in name "
                   "resolution'). " + meaning)
        fix = ("getent hosts $(hostname)   # on that node: must print one of its own addresses\n"
               "echo \"$(hostname -I | awk '{print $1}') $(hostname)\" | sudo tee -a /etc/hosts   # or fix DNS")
    elif str(ev.data.get("entry", "")) == "gloo.tcp.bind_cannot_assign_address":
        # Gloo's listener bind (socket.cc Socket::bind, EADDRNOTAVAIL): an address, not a name, that is not this host's
        title = (f"{_rank_words(job, ev)}: Gloo could not bind its listening socket to the address it chose "
                 "(Cannot assign requested address): that address is not this machine's")
    elif str(ev.data.get("entry", "")).endswith(".interface_or_hostname_empty"):
        # GlooDeviceFactory.cpp makeTCPDevice/makeTCPTLSDevice/makeUVDevice TORCH_CHECK(!interface.empty() ||
        # !hostname.empty()); the two come from torch's c10d init.cpp: GLOO_SOCKET_IFNAME split on commas (an empty
        # item: "eth0," or ",eth0") through createDeviceForInterface, else createDefaultDevice's gethostname()
        # (pytorch/pytorch @0542569; pytorch/gloo is held out and was not read)
        fn = re.search(r"make(UV|TCPTLS|TCP)Device", ev.line.text)
        title = (f"{_rank_words(job, ev)}: Gloo got an empty network interface and an empty host name"
                 + (f" (GlooDeviceFactory::make{fn.group(1)}Device)" if fn else "")
                 + ": GLOO_SOCKET_IFNAME names an empty interface (a stray comma in its list), or this machine's "
                   "host name came back empty")
    else:
        title = f"{_rank_words(job, ev)} could not resolve a host name: {ev.line.text.strip()[:120]}"
    yield _report(job, "LOG025", ev, title, meaning, fix, stage=1)


# the torch functions that resolve this machine's own name (torch/distributed/elastic/rendezvous/utils.py
# _matches_machine_hostname: socket.getaddrinfo(socket.gethostname()); elastic/agent/server/api.py _get_fq_hostname;
# distributed/rendezvous.py and elastic/utils/distributed.py get_free_port/_get_socket_with_port bind locally)
_OWN_HOST_FUNCS = {"_matches_machine_hostname", "_get_fq_hostname", "gethostbyname_ex", "getfqdn"}
# a Gloo/c10d connect that failed: after the loopback fallback, the peers on other hosts could not be reached
_CONNECT_FAILED = re.compile(r"connectFullMesh|Connection refused|Connection reset|Connection closed|pair\.cc|"
                             r"failed to connect|Socket Timeout|timed out")


# a lookup of a named host that the resolver did not answer (EAI_AGAIN, -3); c10d's "hostname of the client socket ...
# err=-3" names no host and stays a benign retry (fixtures LOG025_quiet_c10d_lookup_warnings, LOG029_trigger_c10d_*)
_EAI_AGAIN = re.compile(r"network addresses of \((?P<host>[^,()]+), (?P<port>\d+)\) cannot be retrieved \(gai error: -3\b")


def _resolver_stall(job: Job) -> Optional[tuple]:
    """(event, last set-up line) when c10d printed a resolver failure -3 (EAI_AGAIN: the resolver did not answer; torch
    socket.cpp "The hostname of the client socket cannot be retrieved. err=-3", "... cannot be retrieved (gai error: -3
    - ...)") and the log then stops in the set-up with no progress, error or end."""
    from .unexplained import stopped_in_setup

    evs = [e for e in own_events(job, "store_address_retry") if _EAI_AGAIN.search(e.line.text)]
    if not evs:
        return None
    setup = stopped_in_setup(job)
    if setup is None:
        return None
    return evs[0], setup


def _loopback_fallback_failed(job: Job) -> Optional[tuple]:
    """(warning event, failure event) when Gloo fell back to loopback for this host's own name (torch's
    "Unable to resolve hostname to a (local) address. Using the loopback address as fallback") and a connect failed
    after it; the warning alone is no fault (one host works on loopback: vLLM prints it on every single-node start)."""
    occ = job.get("own_hostname_loopback")
    if not occ or not occ.first:
        return None
    warn = occ.first[0]
    fails = []
    for kind in ("exception", "store_refused", "store_timeout", "nccl_system_error", "rendezvous_failed"):
        o = job.get(kind)
        for e in (o.first if o else []):
            if pos(e.line) > pos(warn.line) and _CONNECT_FAILED.search(e.line.text):
                fails.append(e)
    for line in job.first_fail.values():
        # a failure line no event class took ("[E ProcessGroupGloo.cpp:144] Gloo connectFullMesh failed with ...")
        if pos(line) > pos(warn.line) and _CONNECT_FAILED.search(line.text):
            fails.append(Event("connect_failed", line, {}))
    if not fails:
        return None
    return warn, min(fails, key=lambda e: pos(e.line))


_SIG_NAMES = {"15": "SIGTERM", "2": "SIGINT", "9": "SIGKILL", "1": "SIGHUP", "3": "SIGQUIT", "10": "SIGUSR1", "12": "SIGUSR2"}


@rule("LOG026", "job-stopped")
def job_stopped(job: Job):
    """The job was stopped from outside (the scheduler's time limit, preemption, scancel, a signal to the launcher),
    and whether it had stopped making progress before: a hung job ended by its launcher.

    What it checks
        Messages of the catalogue class `job_terminated`: torchrun's `SignalException: Process N got signal:
        15`, "Received Signals.SIGTERM death signal, shutting down workers", SLURM's `*** JOB N ON host
        CANCELLED AT ... DUE TO TIME LIMIT ***` / PREEMPTION. With timestamps, it compares each rank's last
        line with the moment of the signal: a job whose ranks were silent long before it was hung. Without a silent
        rank, the last training progress line's own time stamp against the signal's (at least 60 s and 5 times the
        usual interval between progress lines: a hang is likely), or a tqdm bar's own clock against the launcher's
        stamps (said as a guess); in a log with no times at all, progress and then the stop is said as a likely hang,
        without a duration and marked "no times in the log"; when only lines before the progress (a launcher's banner)
        and the stop carry times, the time between them bounds the silence (said as a bound); it then names the rank whose output ended while the
        others still printed progress (a guess), or says that no line names the stuck rank. A multi-node launch (`--nnodes 2`) that shows nothing
        past torchrun's start names the rendezvous wait for the other nodes as the likely cause.

    Why it matters
        Nothing in the workers failed, so no traceback explains the end; the usual story is a hang (a rank
        stuck outside collectives) that someone or something ended, or a time limit (pytorch/pytorch#76287
        shows torchrun's signal handling).

    Example
        torch.distributed.elastic.multiprocessing.api.SignalException: Process 40121 got signal: 15

    Fix
        Time limit: ask for more or checkpoint and resume. A hang: rerun under `ddpdoctor run -- torchrun ...`,
        which names the stuck rank and its line while it hangs.
    """
    root = root_cause(job)
    if root is not None and root[1] != "LOG026":
        return   # a rank's own failure came first: the stop is its consequence
    ev = _first(job, "job_terminated")
    if ev is None:
        yield from _spawn_terminated(job)
        yield from _worker_signalled(job)
        return
    meaning, fix = _meaning_fix(ev)
    text = ev.line.text
    sig = ev.data.get("sig")
    if not sig:
        # the agent's own line names the number ("Received 1 death signal"), or the SIGTERM it forwards
        for e in own_events(job, "job_terminated"):
            # torchrun forwards the signal it received to its workers (agent/server/api.py run(): _shutdown(e.sigval)),
            # so "Sending process P closing signal SIGHUP" names it too; SIGTERM is also its own default and not used
            m = re.search(r"Received (\d+) death signal|got signal: (\d+)|Signals\.(SIG\w+)|"
                          r"closing signal (SIGHUP|SIGINT|SIGQUIT)\b", e.line.text)
            if m:
                sig = m.group(1) or m.group(2) or {v: k for k, v in _SIG_NAMES.items()}.get(m.group(3) or m.group(4))
                break
    signame = _SIG_NAMES.get(str(sig), f"signal {sig}") if sig else None
    m = re.search(r"DUE TO ([A-Z ]+?) \*\*\*|death signal|Signals\.(SIG\w+)", text)
    pbs = re.search(r"PBS: job killed: (walltime|p?cput) (\d+) exceeded limit (\d+)|"
                    r"Job exceeded its (walltime|cpu time) limit\. Job was aborted", text)
    if pbs:
        # PBS/Torque's MOM ("=>> PBS: job killed: %s", src/resmom/mom_main.c) and server ("Job exceeded its walltime
        # limit. Job was aborted", src/lib/Liblog/pbs_messages.c) texts, adaptivecomputing/torque @34ff845
        what = (pbs.group(1) or pbs.group(4)).replace("cput", "CPU-time").replace("pCPU-time", "per-process CPU-time")
        what = "CPU-time" if what == "cpu time" else what
        title = (f"PBS killed the job at its {what} limit ({pbs.group(2)} s used, limit {pbs.group(3)} s)" if pbs.group(2)
                 else f"PBS aborted the job at its {what} limit")
    elif "termination is imminent" in text:
        # Taskcluster worker-runner's preemption notice (taskcluster/taskcluster tools/worker-runner/provider/google/
        # google.go @00a76e4): the cloud reclaims a spot/preemptible instance
        title = ("the cloud instance was preempted: its metadata service announced the termination (spot / preemptible "
                 "VM)")
    elif "TIME LIMIT" in text:
        title = "SLURM cancelled the job at its time limit"
    elif "PREEMPTION" in text or "REQUEUE" in text:
        title = "SLURM preempted the job"
    elif m and m.group(1):
        title = f"SLURM cancelled the job ({m.group(1).strip().lower()})"
    elif re.search(r"\*\*\* (?:JOB|STEP) \S+ ON \S+ CANCELLED AT", text):
        c = re.search(r"\*\*\* (JOB|STEP) (\S+) ON (\S+) CANCELLED AT (\S+)", text)
        title = (f"SLURM cancelled {c.group(1).lower()} {c.group(2)} on {c.group(3)} at {c.group(4)} (scancel or a "
                 "signal; SLURM gives no reason)")
    else:
        title = f"the launcher was stopped from outside ({signame or (m.group(2) if m and m.group(2) else 'a signal')})"
    stalled = _silent_ranks(job, ev)
    detail = meaning
    if signame == "SIGHUP":
        title = "the launcher got SIGHUP: the terminal (SSH session) that started the job closed"
        detail = ("SIGHUP is what a shell sends its jobs when its terminal goes away: the job was started in an SSH "
                  "session (or a terminal) that closed, and torchrun stopped its workers. Nothing in the training failed.")
        fix = ("nohup torchrun ... > train.log 2>&1 &   # or run it inside tmux / screen, or with setsid\n"
               "# under SLURM: sbatch the job instead of running it in an interactive shell")
    elif signame == "SIGINT":
        title = "the job was interrupted (SIGINT: Ctrl-C)"
        detail = ("SIGINT is Ctrl-C: someone stopped the job by hand. If it was stuck before (no progress for a while), "
                  "the hang is the problem to find.")
        fix = ("ddpdoctor run -- torchrun ...   # names the stuck rank and its line while it hangs\n"
               "py-spy dump --pid <rank pid>    # or: the stack of a stuck rank")
    if stalled:
        first_rank, first_line, gap = stalled[0]
        title += f"; rank {first_rank}'s output had stopped {_ago(gap)} before it: a hang"
        detail += (f" Each rank's last line before the stop: " + "; ".join(
            f"rank {r} at line {ln.lineno} ({_ago(g)} before)" for r, ln, g in stalled[:8]) +
            ". The rank that went quiet first is the one to look at.")
    elif job.timeout_table():
        title += " after collective timeouts: a hang"
    elif rendezvous_wait(job) is not None:
        # a multi-node launch that never got past torchrun's start: the stop ended the rendezvous wait (round 14)
        n, asked, guess = rendezvous_wait(job)
        launcher = launcher_in(asked)
        whose = f"{launcher}'s" if launcher != "the launcher" else "the launcher's"
        title += (f"; the {n}-node launch shows nothing past {whose} start: it was likely waiting in the rendezvous "
                  f"for the other node{'s' if n > 2 else ''} to join{' (a guess: only the start banner shows it)' if guess else ''}")
        detail += (f" Line {asked.lineno} asks for {n} nodes, and no line says the rendezvous completed, a worker started, "
                   "NCCL set up or training progressed: "
                   + ("torchrun's agent waits in the rendezvous" if launcher in ("torchrun", "torch.distributed.launch")
                      else "the ranks wait in init_process_group's store")
                   + ", printing nothing, until every node has joined, so a launch started on one node only (or nodes "
                   "that cannot reach the rendezvous address) waits until the stop ends it.")
        fix = ("# the same torchrun line on every node, each able to reach the endpoint\n"
               "torchrun --nnodes N --nproc-per-node G --rdzv-backend c10d --rdzv-endpoint HOST:PORT --rdzv-id JOB train.py\n"
               "nc -zv HOST PORT   # from each other node: the endpoint is reachable\n"
               "LOGLEVEL=INFO torchrun ...   # the agent's rendezvous lines: which nodes joined")
    else:
        stall = _progress_stall(job, ev)
        last = job.last_progress
        hung = False   # a hang the stop ended: the fix, and which rank went quiet, are said once below
        if stall is not None:
            secs, guess, how = stall
            title += (f"; training progress had stopped {'about ' if guess else ''}{_ago(secs)} before it"
                      f"{' (a guess)' if guess else ''}: a hang is likely")
            detail += (f" The last training progress is at line {last.lineno}; {how}. A job stopped while it made no "
                       "progress was most likely hung (a rank stuck in or outside a collective), and the signal "
                       "(`timeout`, the scheduler's limit, a user) only ended it.")
            hung = True
        elif (last is not None and _untimed_before(job, ev.line) and (_before(last, ev.line) or _glued(last, ev.line))
              and signame not in ("SIGHUP", "SIGINT") and not re.search(r"TIME LIMIT|PREEMPTION|REQUEUE", text)):
            # no line of the log has a time before the stop (round 14; the launcher's own stop lines may carry the
            # only stamps): the usual story of progress, then a signal or a `timeout` from outside, is a hang the stop
            # ended; said without a duration and marked as read without times
            title += "; training progress had stopped before it (no times in the log, a guess): a hang is likely"
            detail += (f" The last training progress is at line {last.lineno}, and the next thing the log shows is "
                       "the stop. No line before the stop has a time, so how long the job was silent cannot be measured; "
                       "a job stopped from outside after its progress lines ended is most often a hung job that a "
                       "`timeout`, the scheduler or a user ended (if it was still training, the stop is all there is).")
            hung = True
        elif last is not None and (last.ts is None or last.ts_near) and _before(last, ev.line) and \
                _stamp_bound(job, last, ev.line) is not None:
            # the launcher's banner lines carry times and the progress lines do not (round 15): the silence before
            # the stop is bounded by the time from the first stamped line before the progress to the stop
            first, secs = _stamp_bound(job, last, ev.line)
            title += (f"; its progress lines have no time: at most {_ago(secs)} passed from the first stamped line "
                      f"(line {first.lineno}) to the stop (a bound on the silence, not its length)")
            detail += (f" The log gives no time for its training progress (last at line {last.lineno}), but line "
                       f"{first.lineno}, before it, is stamped, and so is the stop: at most {_ago(secs)} passed "
                       "between them, so the progress stopped at most that long before the signal (a bound: the job "
                       "may have trained until the stop). If it had stopped, the job was hung and the signal only "
                       "ended it.")
        elif last is not None and (last.ts is None or last.ts_near) and _before(last, ev.line):
            detail += (f" The log gives no time for its training progress (last at line {last.lineno}), so whether it "
                       "had stopped before the signal cannot be told: if it had, the job was hung and the signal only "
                       "ended it.")
        if hung:
            fix = _HANG_FIX
            more_title, more_detail = _who_went_quiet(job, ev.line)
            title += more_title
            detail += more_detail
    yield _report(job, "LOG026", ev, title, detail, fix, stage=2, ranks=[s[0] for s in stalled[:1]] or None,
                  evidence={"signal": signame, "silent_ranks": [{"rank": r, "line": ln.lineno} for r, ln, _ in stalled[:8]]})


_HANG_FIX = ("ddpdoctor run -- torchrun ...   # names the stuck rank and its line while it hangs\n"
             "py-spy dump --pid <rank pid>    # the stack of each rank while it hangs (py-spy dump --native for C++)\n"
             "# a collective timeout shorter than the job's limit ends a hang with the watchdog's report of the stuck\n"
             "# collective instead of a signal: init_process_group(..., timeout=timedelta(minutes=5)) (NCCL's default\n"
             "# is 10 min, Gloo's 30); TORCH_NCCL_DUMP_ON_TIMEOUT=1 keeps the Flight Recorder's last collectives")
# a tqdm bar's counter and elapsed time ("10%|█  | 20/200 [00:40<06:00,  2.00s/it]") and its rate
_BAR_CLOCK = re.compile(r"\|\s*\d+/\d+ \[(?:(\d+):)?(\d\d):(\d\d)<[^\]]*?(?:(\d+(?:\.\d+)?)(s/it|it/s))?\]")


def _stamp_bound(job: Job, last: Line, stop: Line):
    """(first stamped line, seconds) when a line before the last (unstamped) progress line carries its own time and
    the stop does too, in the same file: the time from that line to the stop bounds how long before the stop the
    progress ended. None otherwise."""
    first = job.first_stamped
    if first is None or first.ts is None or stop.ts is None or stop.ts_near:
        return None
    if first.src != last.src or first.src != stop.src or not first.lineno < last.lineno < stop.lineno:
        return None
    secs = stop.ts - first.ts
    return (first, secs) if secs >= 0 else None


def _untimed_before(job: Job, stop) -> bool:
    """No line before the stop has a time: none in the log at all, or only the stop's own (torchrun's agent stamps
    its "Received 15 death signal" and "Sending process P closing signal" lines while the job's output, an
    accelerate or tqdm run, has none): the silence before the stop cannot be measured."""
    first = job.first_stamped
    if job.first_ts is None or first is None:
        return True
    if first.src == stop.src:
        return first.lineno >= stop.lineno
    return stop.ts is not None and not stop.ts_near and job.first_ts >= stop.ts


def _glued(progress, stop) -> bool:
    """A tqdm frame the launcher's stamped line was glued to (a bar ends with "\\r", not a newline: "29/60
    [00:19<..]W1206 11:55:07 ... Received 15 death signal"): the frame is progress printed before the stop."""
    return progress.src == stop.src and progress.lineno == stop.lineno and _BAR_CLOCK.search(progress.text) is not None


def _before(a, b) -> bool:
    return a.src == b.src and a.lineno < b.lineno or a.src != b.src


def _progress_stall(job: Job, stop: Event) -> Optional[tuple]:
    """(seconds, a guess?, how it was measured) when training progress had stopped well before the stop: the last
    progress line's own time stamp against the signal's (a silence of at least 60 s and 5 times the usual interval
    between progress lines), or, for a tqdm bar without stamps, the bar's elapsed time against the launcher's first
    and last stamps (a guess: the set-up before the bar counts in it). None when progress went on up to the signal
    or the log cannot tell."""
    last = job.last_progress
    if last is None or stop.line.ts is None or stop.line.ts_near:
        return None
    # a tqdm frame the launcher's stamped line was glued to (a bar ends with "\r", not a newline: "29/60 [00:19<..]W1206
    # 11:55:07 ... Received 15 death signal"): the stamp is the signal's, the frame is progress without a time of its own
    glued = _glued(last, stop.line)
    if not glued and not _before(last, stop.line):
        return None
    if job.last_stamped_progress is last and not glued:
        gap = stop.line.ts - last.ts
        stamps = sorted(job.progress_stamps)
        steps = sorted(b - a for a, b in zip(stamps, stamps[1:]) if b > a)
        usual = steps[len(steps) // 2] if steps else 0.0
        if gap >= 60 and gap >= 5 * usual:
            return gap, False, (f"its time stamp is {_ago(gap)} before the signal's"
                                + (f", while progress lines came every {_ago(usual)} before" if usual else ""))
        return None
    m = _BAR_CLOCK.search(last.text)
    if m is None or not glued and last.ts_near is False and last.ts is not None or job.first_ts is None:
        return None
    elapsed = int(m.group(1) or 0) * 3600 + int(m.group(2)) * 60 + int(m.group(3))
    step = 0.0
    if m.group(4):
        step = float(m.group(4)) if m.group(5) == "s/it" else (1 / float(m.group(4)) if float(m.group(4)) else 0.0)
    gap = stop.line.ts - job.first_ts - elapsed
    if gap >= 60 and gap >= 10 * step:
        return gap, True, (f"its bar had run {_ago(elapsed)} (its own clock) when it stopped, and the launcher's "
                           f"stamps span {_ago(stop.line.ts - job.first_ts)} up to the signal: the set-up before the "
                           "bar started counts in the difference, so the silence is at most that")
    return None


def _worker_signalled(job: Job):
    """A worker torchrun reports ended by SIGTERM (or another stop signal) that torchrun did not send it
    (verdict.signalled_from_outside): the first end of the job came from outside, and the peers' lost connections
    ("Connection reset by peer", ncclRemoteError) are what it did to them."""
    dead = signalled_from_outside(job)
    if not dead:
        return
    e = min(dead, key=lambda x: (x.ts if x.ts is not None else INF, pos(x.where)))
    who = e.rank if e.rank is not None else e.local_rank
    label = f"rank {who}" if e.rank is not None else f"local rank {who}"
    yield hit(job, "error", f"{label} (pid {e.pid}) was ended by {e.signal} from outside the job: torchrun sent its "
              "closing signal only to the other workers, after it; no worker failed first", at=e.where, stage=2,
              ranks=[who] if who is not None else [],
              detail=(f"torchrun's agent logs every signal it sends its workers (\"Sending process P closing signal\") and "
                      f"got none itself, so the {e.signal} that ended pid {e.pid} came from elsewhere: a node agent or "
                      "an orchestrator stopping one process (preemption, eviction), a `kill` by a user or a script, a "
                      "watchdog of the cluster. The other workers' lost connections and torchrun's teardown follow "
                      "from it."),
              fix=("# find who sent it: the node's agent / scheduler logs around the time of the failure, and\n"
                   "journalctl --since '-1h' | grep -iE 'kill|evict|preempt|oom'\n"
                   "# if that process had stopped making progress first, something judged it hung: rerun under\n"
                   "ddpdoctor run -- torchrun ...   # names a stuck rank and its line while it hangs"),
              evidence={"signal": e.signal, "pid": e.pid, "launcher": "torchrun"})


def _spawn_terminated(job: Job):
    """mp.spawn raised for a process that SIGTERM ended ("ProcessExitedException: process 1 terminated with signal
    SIGTERM"): ProcessContext.join raises for the first process it finds dead and only then terminates the others
    (torch/multiprocessing/spawn.py), so nothing of the job sent that SIGTERM: a scheduler's limit, `timeout`, a
    container stop or a kill from outside did, and no worker's own failure came first (root_cause is None here)."""
    dead = [e for e in job.exits if e.source == "mp.spawn" and e.signal == "SIGTERM"]
    if not dead or any(e.source == "mp.spawn" and e.signal not in (None, "SIGTERM") for e in job.exits):
        return
    e = dead[0]
    who = e.rank if e.rank is not None else e.local_rank
    yield hit(job, "error", f"process {who} of mp.spawn was ended by SIGTERM from outside (a time limit, `timeout`, "
              "a container stop or a kill): no worker failed first", at=e.where, stage=2,
              ranks=[who] if who is not None else [],
              detail=("mp.spawn's join raises for the first process it finds dead and only then terminates the others, "
                      "so the SIGTERM that ended this one came from outside the job. If the job had stopped making "
                      "progress before (no new lines for a while), it was hung and the signal only ended it."),
              fix=("# a scheduler's time limit: ask for more time, or checkpoint and resume\n" + _HANG_FIX),
              evidence={"signal": "SIGTERM", "launcher": "mp.spawn"})


def _ago(secs: float) -> str:
    return f"{secs / 60:.0f} min" if secs >= 120 else f"{secs:.0f} s"


def _who_went_quiet(job: Job, stop: Line) -> tuple:
    """(title tail, detail tail) for a hang ended from outside that no silent rank explains (round 14, wave 4): each
    rank's last line when the log has ranked lines, the rank whose output ended while others still printed progress
    (one file's line order), or plainly that the log cannot name the stuck rank."""
    last = {}
    for (src, r), line in job.last_seen.items():
        if r is None or r < 0 or line is stop:
            continue
        if r not in last or pos(line) > pos(last[r]):
            last[r] = line
    how = ("`py-spy dump --pid <pid>` on each rank while it hangs, or a rerun under `ddpdoctor run -- torchrun ...`, "
           "names the stuck rank and its line.")
    if not last:
        return ("; no line names a rank, so the stuck rank is not shown",
                " No line of this log names a rank, so it cannot show which rank was stuck: " + how)
    if len(last) == 1:
        (r, line), = last.items()
        return (f"; only rank {r}'s output is here, so the stuck rank is not shown",
                f" Only rank {r}'s lines are in this log (its last at line {line.lineno}): any other rank's output is "
                "not here, so which rank was stuck is not shown: " + how)
    rows = sorted(last.items())
    listed = "; ".join(f"rank {r} at line {ln.lineno}" + (f" ({_fmt_ts(ln.ts)})" if ln.ts is not None and not ln.ts_near
                                                            else "") for r, ln in rows[:8])
    one_file = len({ln.src for ln in last.values()}) == 1
    if not one_file:
        return ("", f" Each rank's last line: {listed}. They are in different files, so which rank went quiet first "
                    "is not known from them: " + how)
    # in one file's order, a rank went quiet while others went on when another rank printed at least two progress
    # lines after its last line (two more steps: interleaved output ending a line apart says nothing)
    src = next(iter(last.values())).src
    tails = {r: [n for (s_, rr), t in job.stream_progress_tail.items() if s_ == src and rr == r for n in t] for r in last}
    quiet = sorted(q for q, ln in last.items()
                   if any(sum(1 for n in tails[r] if n > ln.lineno) >= 2 for r in last if r != q))
    if not quiet:
        return ("", f" Each rank's last line: {listed}; none went quiet while the others went on: " + how)
    who = f"rank{'s' if len(quiet) > 1 else ''} {', '.join(map(str, quiet))}"
    return (f"; {who}'s output ended first (in log order, a guess)",
            f" Each rank's last line: {listed}. The output of {who} ended while other ranks still printed training "
            f"progress: the likeliest stuck rank{'s' if len(quiet) > 1 else ''}, a guess (a rank that prints only during "
            "set-up is quiet in a healthy job too). To know: " + how)


def _silent_ranks(job: Job, stop: Event) -> list:
    """(rank, last line, seconds of silence) for ranks whose last stamped line is minutes before the stop, quietest
    first; empty when the lines carry no time or no rank was silent for long."""
    if stop.line.ts is None:
        return []
    out = []
    for (src, r), line in job.last_seen.items():
        if r is None or line.ts is None or line is stop.line:
            continue
        gap = stop.line.ts - line.ts
        if gap >= 300:
            out.append((r, line, gap))
    out.sort(key=lambda x: -x[2])
    return out


# a tqdm frame at a line's start: "<desc>: 12%|█▏   | 2905/25120 [2:12:37<17:37:09,  2.86s/it]" (the bracket optional)
_GLUED_BAR = re.compile(r"^[^|\n]{0,120}?\d{1,3}%\|[^|]{0,200}\|\s*[\d.]+[kMG]?/[\d.]+[kMG]?(?:\s*\[[^\]]{0,80}\])?")


def _hccl_code(entry_id: str) -> str:
    """'Ascend HCCL EI0013 (its title)' for a CANN code's entry (tools/mine_hccl_codes.py ids: hccl.<code>_<title>)."""
    code, _, title = entry_id[len("hccl."):].partition("_")
    return f"Ascend HCCL {code.upper()} ({title.replace('_', ' ')})"


@rule("LOG027", "known-error")
def known_error(job: Job):
    """A library refused how it was called or configured, and the messages catalogue knows the message: its meaning
    and fix are quoted with the source that prints it.

    What it checks
        The first message of a catalogue class that no more specific rule reports (`api_misuse`: FSDP, DDP,
        accelerate, DeepSpeed and Trainer usage errors; `ddp_model_mismatch`: ranks built different models;
        `nccl_version_mismatch`; `transport_abort`: Gloo's libuv transport aborting on a libuv error; `hccl_error`:
        Ascend HCCL's and HCCP's coded errors, EIxxxx and EJxxxx, mined from CANN's own table), when it is not a
        consequence of an earlier failure.

    Why it matters
        These messages are specific and actionable, but they come from deep inside a library; naming the
        library, the file that printed it and its fix saves reading its source (huggingface/accelerate#2246 is
        one such report).

    Example
        RuntimeError: DDP expects same model across all ranks, but Rank 1 has 198 params, while rank 0 has
        inconsistent 197 params.

    Fix
        The entry's own fix, printed with the finding.
    """
    classes = [c for c, meta in catalogue.classes().items() if meta.get("rule") == "LOG027"]
    ev = _first(job, *classes)
    if ev is None:
        return
    meaning, fix = _meaning_fix(ev)
    entry = entry_of(ev)
    src = f" ({entry['source']['repo']})" if entry else ""
    text = ev.line.text.strip()
    # a message printed while a tqdm bar was drawn is glued after the bar's last frame (the bar ends in a carriage
    # return, not a newline): "  0%|          | 0/29316 [00:00<?, ?it/s]WARNING: non-finite loss, ending training";
    # the title quotes the message, not the frame
    bar = _GLUED_BAR.match(text)
    if bar and text[bar.end():].strip():
        text = text[bar.end():].strip()
    if ev.kind == "ddp_model_mismatch":
        told = _model_mismatch(job)
        if told is not None:
            title, said, ranks, facts = told
            yield _report(job, "LOG027", ev, f"{title}{src}", f"{said} {meaning}", fix, stage=0, ranks=ranks,
                          evidence={"model_mismatch": facts})
            return
    yield _report(job, "LOG027", ev, f"{_rank_words(job, ev)}: {text[:160]}{src}", meaning, fix, stage=0)


def _model_mismatch(job: Job) -> Optional[tuple]:
    """(title, sentence, ranks, facts) from every DDP model-mismatch line kept, or None when none of them parses
    (facts.model_mismatch: each line is one side of DDP's comparison; a culprit only where more ranks agree)."""
    occ = job.get("ddp_model_mismatch")
    return model_mismatch.judge(e.line.text for e in (occ.first if occ else []))
