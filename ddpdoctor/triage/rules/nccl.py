"""NCCL "unhandled system error", explained by the NCCL INFO/WARN lines around it."""
from __future__ import annotations

import re

from ...facts import messages as catalogue
from ..job import Job
from ..verdict import fold
from . import launcher_only_failure, hit, rule


def _ifaces(job: Job) -> list:
    occ = job.get("nccl_iface")
    out = []
    if occ:
        for ev in occ.first:
            text = ev.data.get("list") or ev.data.get("env") or ""
            for m in re.finditer(r"\[\d+\]([\w.\-]+):([\w.:%\-]+)", str(text)):
                out.append((m.group(1), m.group(2), ev.line.host))
    return out


def _benign(line) -> bool:
    """A line the catalogue knows as benign only (NCCL's non-fatal IB async events)."""
    found = catalogue.match_all(line.text)
    return bool(found) and all(m.role in ("benign", "end") for m in found)


_FAILING_TAIL = re.compile(r"rror|xception|Traceback|^\s*File \"|\bline \d+, in |Killed|Abort|terminate|FAIL")


def _went_on_after(job: Job, line):
    """How the log shows the job went on after the WARN `line`, judged from training progress, not from where the file
    happens to end: the last progress line (steps, epochs, loss lines) of the same file when it comes after `line` and
    no failure line follows it; None when no process failed is not so (an exit, an exception, an NCCL error traced
    back), when the file's progress stopped before the WARN (training stopped there), or when a failure line follows
    the progress. With no progress in the file at all: "setup" when the file goes on for more than one line after the
    WARN and its last line is not part of a failure (a start that builds its model after the WARN), else None."""
    if job.failures() or job.has("nccl_result_trace"):   # NCCL tracing an error code back ("init.cc:1079 -> 3")
        return None
    lp = max((ln for ln in job.stream_progress.values() if ln.src == line.src), key=lambda ln: ln.lineno,
             default=None)
    if lp is not None:
        if lp.lineno <= line.lineno:
            return None   # training printed progress before the WARN and none after it: it stopped at the warning
        if any(ff.src == lp.src and ff.lineno > lp.lineno for ff in job.first_fail.values()):
            return None
        return lp
    last = max((ln for ln in job.last_line.values() if ln.src == line.src), key=lambda ln: ln.lineno, default=None)
    # the file's last line is not itself part of a failure (a traceback frame, an ERROR line a wrapper prefixed)
    if last is not None and last.lineno > line.lineno + 1 and not _FAILING_TAIL.search(last.text):
        return "setup"
    return None


def _is_warn(line, bare: bool = True) -> bool:
    """NCCL's WARN line: with its "host:pid:tid [dev] NCCL WARN" prefix, or a catalogued NCCL WARN text alone, as a
    paste, a wrapped line or a web page leaves it when the prefix is lost ("Error while creating shared memory segment
    /dev/shm/nccl-pZafXL (size 7340384)": src/os/linux.cc's WARN, NVIDIA/nccl @5067397). A line NCCL itself marks INFO
    is never one. bare=False: the prefix only (torch quotes NCCL's last WARN text after its own "Last error:" line, which
    belongs to the error torch reports)."""
    if line.nccl == "WARN" or "NCCL WARN" in line.text:
        return True
    if line.nccl is not None or not bare:
        return False
    return any(m.entry.get("source", {}).get("repo") == "NVIDIA/nccl"
               and any("NCCL WARN" in x for x in m.entry.get("examples", ()))
               for m in catalogue.match_all(line.text))


def _warn_context(job: Job):
    """The first NCCL WARN line of a connection or transport failure (catalogue class nccl_network), else the first
    NCCL WARN line at all: NCCL's own words about what failed."""
    for kind in ("nccl_network", "nccl_warn"):
        occ = job.get(kind)
        for ev in (occ.first if occ else []):
            if _is_warn(ev.line) and not _benign(ev.line):
                return ev
    return None


# catalogue classes of NCCL WARN lines that say what failed without it being a connection; nccl_system_error too when
# the entry's source is not one of NCCL's network files (the intra-node Unix-socket exchange, os/linux_ipcsocket.cc)
_NOT_NETWORK = ("nccl_internal_error", "api_misuse", "config_mismatch", "nccl_system_error")
_NET_SOURCE = re.compile(r"src/misc/socket\.cc|src/transport/net|src/transport/coll_net|src/bootstrap\.cc|src/misc/ibv|"
                         r"src/plugin/net|src/misc/shmutils\.cc|src/transport/shm\.cc")


def _plugin_entry(text: str):
    """(catalogue entry, the line's own words after the plugin's prefix) when the line is a network plugin's failure
    the catalogue knows (an nccl_system_error entry from a repository other than NCCL's and torch's), else None."""
    for m in catalogue.match_all(text):
        if (m.entry.get("class") == "nccl_system_error"
                and m.entry["source"].get("repo") not in ("NVIDIA/nccl", "pytorch/pytorch")):
            said = (text.split("NET/OFI ", 1) if "NET/OFI " in text else text.split("NCCL WARN", 1))[-1].strip()
            return m.entry, said
    return None


def _plugin_failure(job: Job, anchor):
    """(the event, its entry, its words) for the first line a network plugin's catalogue entry reads as its failure:
    the anchor, else the first nccl_system_error event of such an entry; None when there is none."""
    err = job.get("nccl_system_error")
    for ev in [anchor] + (list(err.first) if err and err.count else []):
        own = _plugin_entry(ev.line.text)
        if own is not None:
            return (ev,) + own
    return None


def _known_warn(text: str):
    """(catalogue entry, the WARN's own words) when a catalogue entry of a non-network class recognises this NCCL WARN
    line (src/mem_manager.cc's 'MemManager: ...', the SHM transport's checks), else None."""
    for m in catalogue.match_all(text):
        if (m.entry.get("class") in _NOT_NETWORK and m.entry["source"].get("repo") == "NVIDIA/nccl"
                and not _NET_SOURCE.search(str(m.entry["source"].get("path", "")))):
            said = text.split("NCCL WARN", 1)[-1].strip()
            return m.entry, said
    return None


# NCCL's socket transport's "NET/Socket : peer X message truncated : receiving N bytes instead of M" (catalogue entry
# nccl.net_socket.net_socket_peer_message_truncated_receiving; the WARN's own text adds "there may be a mismatch in
# collective sizes or environment settings (e.g. NCCL_PROTO, NCCL_ALGO) between ranks"): the connection worked and
# delivered a message of another size than the receive this rank posted, so the ranks' collectives differ (round 17,
# issue 24: b110_01 read it as a network interface problem)
_TRUNCATED = re.compile(r"message\s+truncated\s*:\s*receiving\s+(\d+)\s+bytes\s+instead\s+of\s+(\d+)")


def truncated(text: str):
    """(received, expected) byte counts when the line is NCCL's 'message truncated' WARN, else None."""
    m = _TRUNCATED.search(text)
    return (int(m.group(1)), int(m.group(2))) if m else None


TRUNCATED_WHY = ("NCCL's connection to the peer worked, but the peer sent a message of another size than the receive "
                 "this rank posted: the ranks called different collectives, or the same collective with different "
                 "sizes or dtypes (a collective under `if rank == 0:`, an uneven last batch, different models), or "
                 "run with different NCCL_PROTO/NCCL_ALGO settings; NCCL's own warning says so. The network "
                 "interface is not the cause.")
TRUNCATED_FIX = ("TORCH_DISTRIBUTED_DEBUG=DETAIL torchrun ...   # names each rank's collective (op, shape, dtype) "
                 "where they differ\n# every rank: the same collectives in the same order with the same shapes; the "
                 "same NCCL_* environment on every node (env | grep NCCL_)")


def _vtuple(v: str) -> tuple:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


def _sparse_shm_span() -> tuple:
    """The NCCL releases that create their /dev/shm files sparse (catalogue entry nccl.shm.failed_to_extend_to_bytes,
    read from NVIDIA/nccl src/misc/shmutils.cc by tag)."""
    for e in catalogue.entries():
        span = e.get("sparse_shm_span")
        if span:
            return _vtuple(span["first"]), _vtuple(span["last"])
    return (2, 12, 7), (2, 18, 6)  # pragma: no cover - the catalogue holds it


def _nccl_sigbus(job: Job, occ):
    """A process died on SIGBUS with NCCL's frames on its stack (Job._nccl_sigbus). NCCL 2.12.7-2.18.6 create each
    /dev/shm segment sparse (ftruncate) and zero it, so a /dev/shm that cannot back it ends the process on SIGBUS;
    other releases allocate it first and fail with a WARN. The log's NCCL version decides what is said; without one
    the /dev/shm reading is said as the likely one, with its condition."""
    ev = occ.first[0]
    first, last = _sparse_shm_span()
    versions = sorted({v["nccl"] for v in job.versions.values() if v.get("nccl")})
    inside = [v for v in versions if first <= _vtuple(v) <= last]
    ranks = sorted(r for r in occ.ranks if r is not None)
    who = f"rank {ranks[0]}" if len(ranks) == 1 else (f"ranks {', '.join(map(str, ranks))}" if ranks else
                                                       "a process" if occ.count == 1 else f"{occ.count} processes")
    frame = ev.data.get("frame")
    where = (f"inside NCCL ({frame})" if frame else
             "in a process running NCCL (the pid of NCCL's INFO lines), during NCCL's set-up lines")
    span = f"{'.'.join(map(str, first))}-{'.'.join(map(str, last))}"
    extra, sentence = fold(job, "LOG009", set(ranks))
    if versions and not inside:
        title = (f"{who} died on SIGBUS {where}; NCCL {', '.join(versions)} allocates its /dev/shm "
                 "files before use, so a full /dev/shm is not the cause: what is, these logs do not show")
        detail = (f"NCCL releases outside {span} size their /dev/shm segments with posix_fallocate/fallocate and fail with "
                  "an NCCL WARN ('failed to extend ... No space left on device') when it is full; a SIGBUS there is a "
                  "different fault (a driver or hardware error, a file truncated under the mapping).")
        fix = ("NCCL_DEBUG=INFO torchrun ...   # what NCCL was setting up when it died\n"
               "dmesg -T | tail -50   # on that node: driver (Xid) or memory errors at that time")
    else:
        cond = "" if versions else f" (if this NCCL is {span}: the log does not show its version)"
        title = (f"{who} died on SIGBUS {where}: most likely /dev/shm is too small for NCCL's shared "
                 f"memory{cond}")
        detail = (f"NCCL {span} creates each shared-memory segment in /dev/shm as a sparse file (ftruncate) and then "
                  "zeroes it; when /dev/shm cannot back the pages (a container's 64 MB default) the process dies on "
                  "SIGBUS in NCCL's set-up instead of printing an error (NVIDIA/nccl src/misc/shmutils.cc, v2.12.7-1 to "
                  "v2.18.6-1; 2.19.1 allocates first and prints a WARN).")
        fix = ("docker run --shm-size=1g ...   # or --ipc=host (Kubernetes: an emptyDir with medium: Memory on /dev/shm)\n"
               "df -h /dev/shm   # in the container: its size\n"
               "NCCL_SHM_DISABLE=1 torchrun ...   # slower workaround: no shared-memory transport")
    return hit(job, "error", title, at=ev.line, stage=1, ranks=set(ranks), hosts=occ.hosts, count=occ.count,
               detail=(f"{detail} (the evidence: line {ev.line.lineno}.) " + sentence).strip(), fix=fix,
               evidence={"signal": "SIGBUS", "frame": frame, "nccl": versions or None, "path": "/dev/shm", **extra})


def _internal_error(job: Job):
    """NCCL's internal or unhandled-CUDA error (catalogue class nccl_internal_error) that no CUDA error of its own
    explains: the quoted CUDA error ("Cuda failure 'out of memory'", "'an illegal memory access'") is LOG005's,
    LOG020's or LOG021's when the catalogue knows it."""
    occ = job.get("nccl_internal_error")
    if not (occ and occ.count) or any(job.get(k) and job.get(k).count for k in ("cuda_fault", "cuda_oom", "cuda_setup")):
        return
    from .catalogued import _meaning_fix, _rank_words, _source

    ev = occ.first[0]
    remote = job.get("nccl_remote_error")
    if any(e.line.src == ev.line.src and 0 < e.line.lineno - ev.line.lineno <= 4 for e in (remote.first if remote else [])):
        # torch appends NCCL's last WARN to the error it raises (NCCLUtils getNcclErrorDetailStr: "\nLast error:\n" +
        # ncclGetLastError): "internal error ... Last error: Net : Connection closed by remote peer" is a lost peer that
        # this NCCL version returned as ncclInternalError (NVIDIA/nccl#795): LOG022 reports it, naming the peer
        return
    meaning, fix = _meaning_fix(ev)
    what = str(ev.data.get("error") or "")
    # a traced return code says which: ncclResult_t 1 is ncclUnhandledCudaError, 3 ncclInternalError (NVIDIA/nccl
    # src/nccl.h.in); "init.cc:1501 -> 1" says no more than its code
    kind = ("unhandled CUDA error" if (str(ev.data.get("code")) == "1" or re.search(
        r"unhandled cuda error|ncclUnhandledCudaError|Cuda failure", ev.line.text, re.I)) else "internal error")
    title = f"{_rank_words(job, ev)}: NCCL {kind}" + (f" (a CUDA call failed: '{what}')" if what else "")
    ranks = set(occ.ranks)
    extra, sentence = fold(job, "LOG009", ranks)
    yield hit(job, "error", title, at=ev.line, stage=1, ranks=ranks, hosts=occ.hosts, count=occ.count,
              detail=(f"{meaning} (the evidence: line {ev.line.lineno}.) " + sentence).strip(),
              fix=fix + "\nNCCL_DEBUG=INFO torchrun ...   # NCCL's trace back to the failing call",
              evidence={**_source(ev), "error": what or None, **extra})


@rule("LOG009", "nccl-system-error", catalogue=("C1", "C2", "C5"))
def nccl_system_error(job: Job):
    """NCCL failed with "unhandled system error" (its INFO/WARN lines say which system call and why), or with an
    internal / unhandled CUDA error that no CUDA error of its own explains.

    What it checks
        `NCCL error ... unhandled system error` (ncclSystemError), and in the same logs NCCL's WARN
        lines and INFO context: the socket interface it picked (`NET/Socket : Using [0]docker0:...`),
        connect failures, `/dev/shm` allocation failures (`posix_fallocate failed : No space left on
        device`), and InfiniBand/RoCE errors (`NET/IB : Got completion ... with error 12`).

    Why it matters
        "unhandled system error" alone says nothing; the cause is in NCCL_DEBUG=INFO output. The
        three usual ones: the wrong network interface (docker0, lo, an unrouted NIC; NVIDIA/nccl#286),
        a container's 64 MB /dev/shm (NVIDIA/nccl#342), and a wrong IB GID index or HCA
        (NVIDIA/nccl#426).

    Example
        node-b:901:1002 [2] NCCL WARN Error while creating shared memory segment /dev/shm/nccl-Xa1b
        (size 9637888)

    Fix
        Interface: `NCCL_SOCKET_IFNAME=<the NIC that routes to the other nodes>`. /dev/shm:
        `docker run --shm-size=1g` or `--ipc=host`. IB/RoCE: `NCCL_IB_GID_INDEX=3` or
        `NCCL_IB_HCA=<hca>`. `ddpdoctor check` on the failing node shows interfaces, /dev/shm and HCAs.
    """
    sigbus = job.get("nccl_sigbus")
    if sigbus and sigbus.count:
        yield _nccl_sigbus(job, sigbus)
    err = job.get("nccl_system_error")
    shm = job.get("nccl_shm")
    ib = job.get("nccl_ib")
    noif = job.get("nccl_no_iface")
    conn = job.get("nccl_connect")
    warn = job.get("nccl_warn")
    context = [o for o in (shm, ib, noif, conn) if o and o.count]
    if not (err and err.count) and not context:
        yield from _internal_error(job)
        return
    remote = job.get("nccl_remote_error")
    if not context and remote and any(e.line.nccl == "WARN" or "NCCL WARN" in e.line.text for e in remote.first):
        # NCCL's own WARN says the peer went away ("Net : Connection closed by remote peer": NCCL before 2.12 returns
        # ncclSystemError for it): the system error is what the lost peer did to this rank; LOG022 reports it
        return
    bare = not (remote and remote.count)   # a remote error's "Last error:" quote is LOG022's, not a WARN of this rank
    if not (err and err.count) and not any(_is_warn(e.line, bare) and not _benign(e.line)
                                           for o in context for e in o.first):
        # INFO context alone, or warnings NCCL itself calls non-fatal, are not a failure; but NCCL retrying a connection
        # again and again with nothing after it saying it connected is worth a warning
        if conn and conn.count >= 3 and not job.has("nccl_init_complete") and not job.progress_lines:
            first = conn.first[0]
            why = re.search(r"returned ([\w ]+?), retrying|failed : ([\w ]+)", first.line.text)
            reason = (why.group(1) or why.group(2)) if why else "failed"
            yield hit(job, "warning", f"NCCL retried a connection {conn.count} times ({reason}) and nothing after says it "
                      "connected", at=first.line, stage=1, ranks=conn.ranks, hosts=conn.hosts, count=conn.count,
                      detail=(f"NCCL's socket connect to a peer was refused or failed and NCCL kept retrying (line "
                              f"{first.line.lineno}); no 'Init COMPLETE' and no training progress follow in these logs. "
                              "If the job then failed or hung, the peer was not listening: it had not started, had "
                              "died, or NCCL picked an interface the peer is not reachable on."),
                      fix=("NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET torchrun ...   # which address NCCL connects to\n"
                           "export NCCL_SOCKET_IFNAME=<the NIC that routes between the nodes>"),
                      evidence={"retries": conn.count, "reason": reason})
        return
    anchor = err.first[0] if err and err.count else min((o.first[0] for o in context),
                                                         key=lambda e: (e.line.src, e.line.lineno))
    hosts = set()
    for o in [err] + context:
        if o:
            hosts |= o.hosts
    ifaces = _ifaces(job)
    # NET/IB INFO lines ("Using [0]mlx5_0:1/RoCE") are healthy; only its warnings and failures count
    ib_bad = [e for e in (ib.first if ib else []) if (e.line.nccl == "WARN" or "error" in e.line.text
                                                      or "failed" in e.line.text) and not _benign(e.line)]
    bad_if = [f"{n}:{a}" for n, a, _h in ifaces if n.startswith(("docker", "lo", "virbr", "veth", "br-"))]
    if shm and shm.count and any("No space" in e.line.text or "fallocate" in e.line.text or "shared memory" in e.line.text
                                 for e in shm.first):
        cause, why = "/dev/shm is too small", (
            "NCCL could not create its shared-memory segment in /dev/shm: containers get 64 MB by default, and NCCL "
            "needs more for each pair of local ranks.")
        fix = ("docker run --shm-size=1g ...   # or --ipc=host; in Kubernetes mount an emptyDir medium: Memory at /dev/shm\n"
               "export NCCL_SHM_DISABLE=1      # workaround, slower")
        ex = next(e for e in shm.first if "No space" in e.line.text or "fallocate" in e.line.text
                  or "shared memory" in e.line.text)
    elif ib_bad and not (err and err.count) and all(re.search(r"async event\s*:\s*(?:port error|path migration error)",
                                                                e.line.text) for e in ib_bad):
        # NCCL calls a port error non-fatal and goes on: a link went down; it is the cause only if transfers then fail
        ev = ib_bad[0]
        yield hit(job, "warning", f"an InfiniBand port reported an error event ({len(ib_bad)} line"
                  f"{'s' if len(ib_bad) > 1 else ''}): its link went down", at=ev.line, stage=1,
                  ranks={e.line.rank for e in ib_bad if e.line.rank is not None}, hosts=ib.hosts, count=len(ib_bad),
                  detail=("NCCL's InfiniBand transport got a port error event (the link went down; a flapping cable or "
                          "switch port) and went on, as it does for these events. If the job then hung or failed with "
                          "completion errors (status 12 or 5), this link is the cause. (the evidence: line "
                          f"{ev.line.lineno}.)"),
                  fix=("ibstat; ibv_devinfo -v | grep -E 'state|phys_state'   # on that node: is the port ACTIVE, LinkUp?\n"
                       "perfquery -x   # link downed / symbol error counters; reseat or replace the cable\n"
                       "export NCCL_IB_HCA=<the healthy HCAs>   # to leave the bad port out meanwhile"),
                  evidence={"port_errors": len(ib_bad), "example": ev.line.text[:200]})
        return
    elif ib_bad:
        cause, why = "InfiniBand/RoCE transport error", (
            "NCCL's IB transport failed (work completion error, or a verbs call): on RoCE the GID index is often wrong "
            "(RoCEv2 needs index 3 on many setups), or NCCL picked an HCA or port that is down.")
        fix = ("ibv_devinfo; show_gids        # on each node: port state and the RoCEv2 GID index\n"
               "export NCCL_IB_GID_INDEX=3    # RoCEv2\nexport NCCL_IB_HCA=mlx5_0,mlx5_1   # only ports that are up\n"
               "export NCCL_IB_DISABLE=1      # to confirm: falls back to sockets")
        ex = ib_bad[0]
    elif (not bad_if and not (noif and noif.count) and conn and conn.count
          and all("refused" in e.line.text for e in conn.first)):
        # ECONNREFUSED is the peer HOST answering that nothing listens on that port (connect(2): "found no one
        # listening on the remote address"): the route and the interface worked; the peer's NCCL had not opened its
        # socket yet, or had already exited (NCCL misc/socket.cc retries on it, then gives up)
        cause, why = "a peer was not listening (connection refused)", (
            "The peer's host answered and refused the connection: the network path works, but no NCCL socket listened "
            "on that address and port -- that rank had not reached its NCCL set-up yet (started late, stuck before "
            "init_process_group), or had already exited. Its own log holds the reason.")
        fix = ("# the refused address is the peer's: find the rank on that host and read its own log first\n"
               "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET torchrun ...   # both sides' view of the connection")
        ex = conn.first[0]
    elif bad_if or (noif and noif.count) or (conn and conn.count):
        which = ", ".join(sorted(set(bad_if))) or "an interface that cannot reach the other nodes"
        cause, why = "wrong network interface", (
            f"NCCL bootstrapped over {which}: its peers cannot connect back through it (docker0 and lo are local "
            "to each host).")
        fix = ("ip -o -4 addr; ip route get $MASTER_ADDR   # on each node: the NIC that routes to the others\n"
               "export NCCL_SOCKET_IFNAME=eth0             # that NIC (prefix match; =eth0 for exact)\n"
               "export GLOO_SOCKET_IFNAME=eth0")
        ex = (noif.first[0] if noif and noif.count else conn.first[0] if conn and conn.count else anchor)
    elif (own := _plugin_failure(job, anchor)) is not None:
        # a network plugin's own failure line (aws-ofi-nccl's 'NCCL WARN NET/OFI ...'): the plugin names the call that
        # failed, and its catalogue entry says what it means (round 18, issue 24: b128_03, b128_05)
        ex, entry, said = own
        cause, why = f"{entry['source']['repo']} failed: \"{said[:120]}\"", (
            f"{entry['meaning']} ({entry['source']['repo']} {entry['source']['path']}.)")
        fix = entry["fix"]
    elif (wctx := _warn_context(job)) and (known := _known_warn(wctx.line.text)):
        # a WARN the catalogue knows for something other than a connection (NCCL's memory manager, an SHM import):
        # say what the catalogue says it means, not a network guess
        ex = wctx
        entry, said = known
        cause, why = f"NCCL warned \"{said[:90]}\"", (
            f"{entry['meaning']} ({entry['source']['repo']} {entry['source']['path']}.)")
        fix = entry.get("fix") or "NCCL_DEBUG=INFO torchrun ...   # the WARN lines before the error"
    elif wctx and (sizes := truncated(wctx.line.text)):
        ex = wctx
        cause, why = (f"the ranks' collectives differ (NCCL 'message truncated': received {sizes[0]} bytes where "
                      f"{sizes[1]} were expected)"), TRUNCATED_WHY
        fix = TRUNCATED_FIX
    elif wctx:
        ex = wctx
        text = ex.line.text.strip()
        closed = "closed by remote peer" in text or "Connection closed" in text
        cause, why = ("a peer closed the connection" if closed else "a connection failed"), (
            f"NCCL's own warning says what failed: \"{text[:200]}\". "
            + ("The other side went away first: a rank or its node died, or the network between them dropped; its "
               "own log holds the cause." if closed else
               "The interface NCCL chose cannot reach the peer, or a firewall or route blocks it."))
        fix = ("NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET torchrun ...   # both sides' view of the connection\n"
               "export NCCL_SOCKET_IFNAME=<the NIC that routes between the nodes>")
    else:
        cause, why = "cause not in these logs", (
            "The logs do not include NCCL's INFO lines, which name the failing system call.")
        fix = "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET torchrun ...   # rerun and triage that log"
        ex = anchor
    if not (err and err.count) and (went := _went_on_after(job, ex.line)):
        # a WARN alone, no NCCL error, no process failing and more of the job's lines after it: NCCL warned and went on
        # (round 15 b98_21: 'misc/ibvwrap.cc:185 (wrap_ibv_alloc_pd) NCCL WARN lib wrapper not initialized.' on a host
        # without InfiniBand verbs, then torchtitan built its device mesh and model): a warning, not the failure
        said = ex.line.text.split("NCCL WARN", 1)[-1].strip()[:160]
        yield hit(job, "warning", f"NCCL warned \"{said}\" and the job went on"
                  + ("" if went == "setup" else f" training (line {went.lineno})"), at=ex.line, stage=1,
                  ranks={e.line.rank for o in context for e in o.first if e.line.rank is not None}, hosts=hosts,
                  count=sum(o.count for o in context),
                  detail=("NCCL printed a warning about its transport, but no NCCL error follows, no process failed, "
                          + (f"and training went on after it (the WARN at line {ex.line.lineno}, progress up to line "
                             f"{went.lineno}): " if went != "setup" else
                             f"and the log goes on in the job's set-up after it (line {ex.line.lineno}; no training "
                             "progress is shown either side of it): ")
                          + "a warning NCCL recovered from or worked around. If the job later failed or hung, this is "
                            "the first thing to check."),
                  fix=("NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET torchrun ...   # which transport NCCL then used\n"
                       "ddpdoctor check   # interfaces, /dev/shm, HCAs"),
                  evidence={"cause": cause, "context": ex.line.text[:300], "went_on": True,
                            "went_on_at": None if went == "setup" else went.lineno})
        return
    ranks = set(err.ranks if err else ()) | {e.line.rank for o in context for e in o.first if e.line.rank is not None}
    inferred = launcher_only_failure(job) if not ranks else None
    if inferred is not None:
        ranks = {inferred}
        why += (f" No line names the rank; the launcher reports one process failing, local rank {inferred}: the error "
                "is taken to be its (an inference from the exit).")
    extra, sentence = fold(job, "LOG009", ranks)
    head = "NCCL unhandled system error" if err and err.count else "NCCL failed in its transport"   # say only what a line says
    if inferred is not None:
        head += f" on local rank {inferred} (the one process the launcher reports failing)"
    yield hit(job, "error", f"{head}: {cause}", at=ex.line, stage=1, ranks=ranks, hosts=hosts,
              count=(err.count if err else 0) + sum(o.count for o in context),
              detail=(why + " " + sentence).strip(),
              fix=fix + f"\nddpdoctor check   # on {', '.join(sorted(hosts)) or 'the failing node'}: interfaces, /dev/shm, HCAs",
              evidence={"cause": cause, "context": ex.line.text[:300], "interfaces": [f"{n}:{a}" for n, a, _ in ifaces][:8],
                        "nccl_warnings": warn.count if warn else 0, **extra})
