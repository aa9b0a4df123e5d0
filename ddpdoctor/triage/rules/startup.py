"""The job could not start: port in use, the store unreachable, two ranks on one GPU."""
from __future__ import annotations

import re

from ..job import Job
from ..signatures import entry_of
from ..verdict import address_problem, own_events, survived_by_end
from . import hit, rule, who


@rule("LOG007", "master-port-in-use", catalogue=("A3",))
def master_port_in_use(job: Job):
    """The rendezvous port (MASTER_PORT) was already taken when rank 0 tried to listen on it.

    What it checks
        `[c10d] The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in
        use)`, `RuntimeError: Address already in use`, `DistNetworkError: ... EADDRINUSE`.

    Why it matters
        A second job on the same node uses the default 29500, or an orphaned rank of the last run
        still holds it (pytorch/pytorch#85604). Rank 0 fails at once; the others wait for it until
        their rendezvous times out.

    Example
        [W socket.cpp:436] [c10d] The server socket has failed to bind to [::]:29500 (errno: 98 -
        Address already in use).

    Fix
        `torchrun --master-port 29517 ...` (or `--standalone` for one node), or kill the orphans:
        `fuser -k 29500/tcp`. `ddpdoctor check` on rank 0's node tests the port before launch.
    """
    occ = job.get("port_in_use")
    if not occ or not occ.count:
        return
    ev = occ.first[0]
    if re.search(r"gloo/transport/\w+/(?:socket|listener)\.cc:\d+\] .*\b(?:bind|listen): ", ev.line.text):
        # Gloo's own listening socket (facebookincubator/gloo gloo/transport/tcp/socket.cc Socket::bind / listen
        # @cc44198: GLOO_ENFORCE_NE(rv, -1, "bind: ", strerror(errno))): each rank listens on its interface's address
        # and a port the kernel picks, for its peers' direct connections; not the rendezvous store's MASTER_PORT
        yield hit(job, "error", "Gloo could not bind its own listening socket (Address already in use): not "
                  "MASTER_PORT, the port Gloo's peers connect to", at=ev.line, stage=1, ranks=occ.ranks, hosts=occ.hosts,
                  count=occ.count,
                  detail=("Each rank's Gloo device listens on the address of its interface (GLOO_SOCKET_IFNAME, else "
                          "the host name's address) and a port the kernel picks, and its peers connect to it directly. "
                          "That bind failed: the interface's ephemeral ports were exhausted (many connections in "
                          "TIME_WAIT after many process groups or restarts), or the address given is not this host's."),
                  fix=("ss -tan state time-wait | wc -l            # ports held in TIME_WAIT\n"
                       "sysctl net.ipv4.ip_local_port_range       # the ephemeral range the kernel picks from\n"
                       "GLOO_SOCKET_IFNAME=<this node's interface> torchrun ...   # an address of this host"),
                  evidence={"gloo": True})
        return
    port = next((e.data.get("port") or e.data.get("uvport") for e in occ.first
                 if e.data.get("port") or e.data.get("uvport")), None)
    where = port or "$MASTER_PORT"   # the log's own port, never a default it did not print
    end = survived_by_end(job, ev.line)
    if end is not None:
        # a failed attempt (the port held by another job or an earlier run) and, later in the same log, a run that
        # trained and ended: the job survived it (a retry on another port, the holder's own run); a note
        yield hit(job, "info", f"the rendezvous port {port or '(MASTER_PORT)'} was in use at line {ev.line.lineno}, but "
                  f"a later run in this log trained and ended (line {end.lineno}): a note, not the job's failure",
                  at=ev.line, stage=1, ranks=occ.ranks, hosts=occ.hosts, count=occ.count,
                  detail=(f"Line {ev.line.lineno}: a process could not listen on the rendezvous port (another job or an "
                          f"earlier run held it). After it the log shows training progress and an end line (line "
                          f"{end.lineno}: {end.text.strip()[:100]}), and no process ending badly after that end: the "
                          "attempt that hit the busy port was retried or was not the job's run. Nothing to fix for "
                          "this run; a fixed, free --master-port avoids the failed attempt."),
                  fix=(f"fuser -v {where}/tcp        # who holds it, if the failed attempt recurs\n"
                       "torchrun --master-port 29517 ...   # or --standalone on one node"),
                  evidence={"port": port, "survived_to": end.lineno})
        return
    if str(ev.data.get("entry", "")) == "torch.c10d.tcpstore.frame.server_backend":
        # only the store server's set-up frames, its message cut: the server could not open its port, the cause not said
        yield hit(job, "error", f"the rendezvous store's server could not be created on {port or 'MASTER_PORT'} (a C++ "
                  "backtrace through its set-up, the message cut): most often the port is already in use", at=ev.line,
                  stage=1, ranks=occ.ranks, hosts=occ.hosts, count=occ.count,
                  detail=(entry_of(ev) or {}).get("meaning", ""),
                  fix=(f"fuser -v {where}/tcp        # who holds it; fuser -k {where}/tcp to free it\n"
                       "torchrun --master-port 29517 ...   # or --standalone on one node\n"
                       "# the error's own text: the lines above the first 'frame #' line"),
                  evidence={"port": port, "catalogue_entry": ev.data.get("entry")})
        return
    yield hit(job, "error", f"the rendezvous port {port or '(MASTER_PORT)'} was already in use", at=ev.line, stage=1,
              ranks=occ.ranks, hosts=occ.hosts, count=occ.count,
              detail="Rank 0 could not listen on the rendezvous port: another job, or an orphaned rank of an earlier "
                     "run, holds it. The other ranks then wait for a rank 0 that never comes up.",
              fix=(f"fuser -v {where}/tcp        # who holds it; fuser -k {where}/tcp to free it\n"
                   "torchrun --master-port 29517 ...   # or --standalone on one node\n"
                   "ddpdoctor check   # on rank 0's node, before launching"),
              evidence={"port": port})


# How many lines below a store server's set-up frame the constructor's frame of the same backtrace can stand (c10::Error's
# backtraces run to ~60 frames, the constructor a few frames above the Python binding)
_BACKTRACE_SPAN = 64


@rule("LOG008", "store-connect-failed", catalogue=("A2", "C6"))
def store_connect_failed(job: Job):
    """Ranks could not reach the TCPStore on MASTER_ADDR:MASTER_PORT (refused or timed out), or torchrun's own
    rendezvous failed (RendezvousTimeoutError, RendezvousConnectionError, RendezvousClosedError).

    What it checks
        `[c10d] The client socket has failed to connect to [node0]:29500 (errno: 111 - Connection
        refused)`, `The client socket has timed out after 900s while trying to connect to (node0,
        29500)`, `DistStoreError: Timed out after ... seconds waiting for clients`.

    Why it matters
        Refused means nothing listens there yet (rank 0 not started, crashed, or a different
        MASTER_PORT); timed out means the address is unreachable (wrong MASTER_ADDR, a firewall
        between nodes, NVIDIA/nccl#388). Each non-zero rank retries until the timeout, so the log
        fills with the same warning. A rank that timed out getting rank 0's ncclUniqueId from the store
        ("[N] is setting up NCCL communicator and retrieving ncclUniqueId from [0] ...") had reached the store:
        rank 0 crashed, was killed or is slow before its first collective, and its own output says which.

    Example
        [W1015 10:02:11.305000 817 torch/distributed/elastic/rendezvous/...] [c10d] The client socket
        has failed to connect to [node-0]:29500 (errno: 111 - Connection refused).

    Fix
        Check MASTER_ADDR/MASTER_PORT match on every node and that rank 0 started; open the port
        between nodes. `ddpdoctor check` on a worker node tests the route and the port to MASTER_ADDR.
    """
    refused = job.get("store_refused")
    timeout = job.get("store_timeout")
    rdzv = job.get("rendezvous_failed")
    mine = own_events(job, "store_refused", "store_timeout", "rendezvous_failed")
    servers = [e for e in own_events(job, "port_in_use")
               if e.data.get("entry") == "torch.c10d.tcpstore.frame.server_backend"]
    if mine and servers and all(e.data.get("entry") == "torch.c10d.tcpstore.frame.client_constructor" and any(
            s.line.src == e.line.src and 0 < e.line.lineno - s.line.lineno <= _BACKTRACE_SPAN for s in servers)
            for e in mine):
        return   # the constructor's frame under its server's set-up frames: one backtrace, LOG007's (the server's)
    occs = [o for o in (refused, timeout, rdzv) if o and o.count]
    if occs and not own_events(job, "store_refused", "store_timeout", "rendezvous_failed"):
        stalled = _connect_retries_then_stop(job, [e for o in occs for e in o.first])
        if stalled is not None:
            yield stalled
        return
    if not occs:
        # c10d's own attempt warnings only ("[W socket.cpp] ... has failed to connect to [H]:P"), catalogued as a retry
        tries = job.get("store_address_retry")
        fails = [e for e in (tries.first if tries else []) if "failed to connect to" in e.line.text]
        stalled = _connect_retries_then_stop(job, fails) if fails else None
        if stalled is not None:
            yield stalled
        return   # none, or only what an earlier failure caused on its peers (folded under it)
    if address_problem(job) or own_events(job, "address_unresolved"):
        return   # the address itself is the fault (LOG025)
    from .catalogued import _loopback_fallback_failed
    if _loopback_fallback_failed(job) is not None:
        return   # Gloo fell back to loopback for this host's own name and then could not connect (LOG025 says so)
    ev = min((o.first[0] for o in occs), key=lambda e: (e.line.src, e.line.lineno))
    # NCCL's own connect warnings are the interface finding's business (LOG009).
    if ev.line.nccl and not any(not e.line.nccl for o in occs for e in o.first):
        return
    ranks = set().union(*(o.ranks for o in occs))
    hosts = set().union(*(o.hosts for o in occs))
    if not any(o and o.count for o in (refused, timeout)):
        yield from _rendezvous_failed(job, rdzv, ranks, hosts)
        return
    # the address c10d's attempt warnings name (the one tried: "[::ffff:192.168.1.219]:23456") before the failure's
    tries = job.get("store_address_retry")
    seen = [e for e in (tries.first if tries else []) if e.data.get("attempt")] + [e for o in occs for e in o.first]
    addr = next((e.data.get("addr") or e.data.get("addr2") or e.data.get("addr3") or e.data.get("addr4") for e in seen
                 if e.data.get("addr") or e.data.get("addr2") or e.data.get("addr3") or e.data.get("addr4")), None)
    port = next((e.data.get("port") or e.data.get("port2") or e.data.get("port3") or e.data.get("port4") for e in seen
                 if e.data.get("port") or e.data.get("port2") or e.data.get("port3") or e.data.get("port4")), None)
    # say "refused" only when a line does (errno 111); "The client socket has failed to connect" alone says less
    said_refused = any(re.search(r"refused|errno: 111", e.line.text) for e in (refused.first if refused else []))
    reset = any(e.data.get("reset") for e in (refused.first if refused else []))
    # the store client's read got 0 bytes: the server closed the socket (Utils.hpp recvBytes' "Failed to recv, got 0
    # bytes", pytorch/pytorch torch/csrc/distributed/c10d/Utils.hpp @cf30153): its host went away, as a reset says
    closed = any(e.data.get("closed") for e in (refused.first if refused else []))
    kind = (("reset" if reset else "closed" if closed else "refused" if said_refused else "failed")
            if refused and refused.count else "timed out")
    # the address the lines give, else the settings' names: never a value the log does not show
    # an IPv6 address (also IPv4-mapped, "::ffff:192.168.1.219") is written in brackets, as the log wrote it
    host = f"[{addr}]" if addr and ":" in addr else addr
    target = f"{host}:{port}" if addr and port else "MASTER_ADDR:MASTER_PORT (the lines do not give the address)"
    # the ranks whose own lines ("[rank6]:[W...] ... recvValue failed ...: Connection reset by peer") lost it; a line
    # with no rank prefix names no one, so "a process" stays
    lost = sorted(r for r in ranks if isinstance(r, int))
    title = (f"{who(lost) if lost else 'a process'} lost {'its' if len(lost) < 2 else 'their'} connection to the "
             f"rendezvous store at {target} ("
             + ("connection reset by peer" if kind == "reset" else "the store closed it: 'got 0 bytes'") + "): the "
             "store's host (rank 0's process or the first node's torchrun agent) died, restarted or its network dropped"
             if kind in ("reset", "closed") else f"ranks could not reach the rendezvous store at {target} (connection {kind})")
    uid = sorted((e for e in (timeout.first if timeout else []) + (refused.first if refused else []) if _is_uid(e)),
                 key=lambda e: (e.line.src, e.line.lineno))
    if uid and not (refused and any(not _is_uid(e) for e in refused.first)):
        yield _unique_id_not_published(job, uid, ranks, hosts, sum(o.count for o in occs))
        return
    if str((entry_of(ev) or {}).get("id", "")).startswith("xla.coordination"):
        # JAX's coordination service (process 0, jax.distributed.initialize's coordinator_address) is its store
        title = (f"{who(lost) if lost else 'a JAX process'} lost or never reached the JAX coordination service "
                 f"(process 0, at jax.distributed.initialize's coordinator_address): "
                 f"{ev.data.get('code') or 'connection ' + kind}")
    gloo = "gloo/transport" in ev.line.text
    if gloo:
        # Gloo's own transport (pair.cc) connects to a peer's announced address, not to the store: the address is the
        # one Gloo prints ("remote=[10.0.0.2]:41234", "Connect timeout [10.0.0.2]:41234"; facebookincubator/gloo
        # gloo/transport/tcp/error.cc SystemError::what, pair.h @cc44198), never MASTER_ADDR
        g = _GLOO_REMOTE.search(ev.line.text)
        if g:
            addr, port = g.group(1), g.group(2)
        known = bool(addr and port)   # Gloo's own words, or an older 'connect [ADDR]:PORT: <strerror>' the signature read
        peer = (f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}") if known else "a peer (the line does not give its address)"
        title = (f"a Gloo connection to {'the peer at ' if known else ''}{peer} failed (connection {kind}): "
                 + ("that peer did not answer (down, unreachable, or a firewall)" if kind == "timed out"
                    else "that peer was not listening"))
    # only c10d's warning lines ("[W1207 ... TCPStore.cpp:125] [c10d] recvValue failed ...: Failed to recv, got 0
    # bytes"), no exception: a rank's background store call (ProcessGroupNCCL's heartbeat 'should dump' check) that
    # the store's host closed, which at the end of a run is its normal exit racing the check: a warning, said so
    warn_only = kind == "closed" and not timeout and all(_GLOG_WARNING.match(e.line.text) for e in refused.first)
    yield hit(job, "warning" if warn_only else "error", title,
              at=ev.line, stage=1, ranks=ranks, hosts=hosts, count=sum(o.count for o in occs),
              detail=("Connection reset: the store's host (rank 0's process, or torchrun's agent on the first node) "
                      "closed the connection: it died or was stopped while the others were still joining." if kind ==
                      "reset" else
                      "The store's server closed the connection (a read returned 0 bytes): the process that hosts the "
                      "TCPStore (rank 0's, or torchrun's agent on the first node) exited, crashed or was restarted, or "
                      "the network between the nodes dropped. Its own log holds the cause."
                      + (" Only as a warning, no exception: if the job had finished, this is the rank's last background "
                         "store check racing the store host's normal exit, and harmless." if warn_only else "")
                      if kind == "closed" else
                      "Gloo connects each pair of ranks directly, to the address and port the peer announced through "
                      "the store: the peer's process was gone (died or not yet listening), or its announced interface is "
                      "not reachable from here (GLOO_SOCKET_IFNAME names the interface to use)." if gloo else
                      "Connection refused: nothing listened there (rank 0 not started or crashed, or a different "
                      "MASTER_PORT)." if kind == "refused" else
                      "The connection failed (the line does not say why): the name may not resolve to a reachable "
                      "address, nothing may listen there yet, or a firewall blocks it." if kind == "failed" else
                      "Timed out: the address did not answer (wrong MASTER_ADDR, or a firewall between the nodes)."),
              fix=(f"# the peer's own log first: did it die before this?\nnc -zv {addr or '<peer address>'} "
                   f"{port or '<port>'}   # from this node, while the job runs\n"
                   "GLOO_SOCKET_IFNAME=<interface every node reaches> torchrun ...   # the interface Gloo announces"
                   if gloo else
                   f"# the log of the process that hosts the store ({target}) first: why did it end?\n"
                   "dmesg -T | grep -iE 'killed process|out of memory'   # on the store's node\n"
                   if kind == "closed" else
                   f"nc -zv {addr or '$MASTER_ADDR'} {port or '$MASTER_PORT'}   # from a worker node\n"
                   "# same MASTER_ADDR/MASTER_PORT on every node; rank 0 must start first or together\n"
                   "ddpdoctor check   # on a worker node: route and port to MASTER_ADDR"),
              evidence={"address": addr, "port": port, "kind": kind})


# glog's warning prefix as c10d writes it ("[W1207 07:40:19.968570826 TCPStore.cpp:125]", older "W1207 07:40:19.96 ...")
_GLOG_WARNING = re.compile(r"^\s*\[?W\d{4} \d")
_GLOO_REMOTE = re.compile(r"(?:remote=|Connect timeout )\[?([\w.%\-]+|[0-9a-fA-F:.]+)\]?:(\d+)")


def _connect_retries_then_stop(job: Job, evs: list):
    """c10d's warning-level connect failures ("[W socket.cpp] [c10d] The client socket has failed to connect to [H]:P
    (errno: 111 ...)", "... (system error: 10049 - unknown error)" on Windows) are retries it survives when a later
    attempt connects (torch/csrc/distributed/c10d/socket.cpp SocketConnectOp::tryConnect logs each one and retries
    until the timeout); when they are the last thing before the log stops in its set-up, nothing ever connected: a
    warning that the store at H:P was not reachable, said as likely (an excerpt cut there looks the same)."""
    from .unexplained import stopped_in_setup

    if any(e.line.nccl for e in evs) or stopped_in_setup(job) is None or job.has("nccl_init_complete"):
        return None
    if job.timeout_table():
        # a collective timed out (ProcessGroupNCCL's watchdog numbers its work): the process group was made, so the
        # store was reached; the retry warning is another process's set-up, not where the job stopped (round 17,
        # issue 24: b114_02, TGI's shard stderr after the watchdog timeout)
        return None
    ev = evs[0]
    # c10d writes an IPv6 (also IPv4-mapped) address in brackets: "[::ffff:198.18.0.1]:3254"; take the bracketed form
    # whole (a lazy match stopped at its first colon and read "::ffff" port 198), else a plain host:port
    m = re.search(r"connect to (?:\[([^\]\s]+)\]|([^\s\[\]:]+)):(\d+)(?:\s*\((?:errno|system error): (-?\d+) - ([^)]*)\))?",
                  ev.line.text)
    addr, port, code, why = ((m.group(1) or m.group(2)), m.group(3), m.group(4), m.group(5)) if m else (None, None, None, None)
    target = (f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}") if addr and port else "MASTER_ADDR:MASTER_PORT"
    # Windows Sockets codes (winerror.h): 10049 WSAEADDRNOTAVAIL, 10061 WSAECONNREFUSED, 10060 WSAETIMEDOUT
    winsock = {"10049": "WSAEADDRNOTAVAIL: the address is not valid here", "10061": "WSAECONNREFUSED: refused",
               "10060": "WSAETIMEDOUT: timed out"}.get(str(code))
    said = winsock or (f"errno {code}: {why.strip()}" if code else "the line does not say why")
    return hit(job, "warning", f"the job stops in its set-up while c10d retries connecting to the store at {target} "
               f"({said}): likely never reachable", at=ev.line, stage=1,
               ranks=sorted({r for r in (job.who(e.line) for e in evs) if r is not None}),
               hosts=sorted({e.line.host for e in evs if e.line.host}), count=len(evs),
               detail=(f"c10d could not connect to the rendezvous store (line {ev.line.lineno}) and logged it as a warning, "
                       "as it does for each retry; no line after it shows a connection, training progress or an end. A "
                       "guess that the ranks never reached the store, not a fact: an excerpt cut there looks the same."),
               fix=(f"nc -zv {addr or '$MASTER_ADDR'} {port or '$MASTER_PORT'}   # from this node: must connect\n"
                    "# MASTER_ADDR must be an address every node can reach (on Windows 127.0.0.1 or the NIC's IP, not a "
                    "name that resolves elsewhere); rank 0 must be running"),
               evidence={"address": addr, "port": port, "error": code, "guess": True})


_UID_KEY = re.compile(r"by key '([^']*)'")
_UID_RANK = re.compile(r"\[(\d+)\] is setting up NCCL communicator")


def _is_uid(ev) -> bool:
    """The line is ProcessGroupNCCL's failed get of rank 0's ncclUniqueId (catalogue entries torch.c10d.unique_id.*)."""
    return (str(ev.data.get("entry", "")).startswith("torch.c10d.unique_id")
            or re.search(r"ncclUniqueId from \[0\]|possible application crash on rank 0", ev.line.text) is not None)


def _unique_id_not_published(job: Job, evs, ranks, hosts, count):
    """A rank asked the store for rank 0's ncclUniqueId and gave up (ProcessGroupNCCL.cpp broadcastUniqueNCCLID: "[N] is
    setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key 'K', but
    store->get('K') got error: ... This may indicate a possible application crash on rank 0 or a network set up
    issue."). The rank had reached the store (the get is a request on its open connection), so the address and the
    port worked; what was missing is rank 0's put, which rank 0 makes when it creates its first NCCL communicator
    (its first collective). Rank 0 crashed, was killed, or is slower than the timeout (still loading, or on a code
    path without that collective): rank 0's own output says which."""
    ev = evs[0]
    key = next((m.group(1) for e in evs for m in [_UID_KEY.search(e.line.text)] if m), None)
    waiting = sorted({int(m.group(1)) for e in evs for m in [_UID_RANK.search(e.line.text)] if m} | {
        r for r in ranks if r is not None and r > 0})
    reset = re.search(r"reset by peer|Broken pipe|closed by peer", " ".join(e.line.text for e in evs))
    who = (f"rank{'s' if len(waiting) > 1 else ''} {', '.join(map(str, waiting[:8]))}" if waiting else "a rank")
    title = (f"{who} waited for rank 0's NCCL unique id in the store" + (f" (key '{key}')" if key is not None else "")
             + (" and lost the store: rank 0's process went away" if reset else
                " and gave up: rank 0 never published it (crashed, killed or slow; not likely the network)"))
    # the waiting ranks are the ones the message names as printing it ("[2] is setting up ..."): the evidence's ranks,
    # even on a line without torchrun's [rankN]: prefix; rank 0 is inferred (it never published), not seen
    seen = sorted({r for r in ranks if r is not None} | set(waiting))
    return hit(job, "error", title, at=ev.line, stage=1, ranks=seen, hosts=hosts, count=count,
               detail=(f"{who.capitalize()} asked the store for the ncclUniqueId that rank 0 puts there when it creates "
                       "its first NCCL communicator (its first collective), and "
                       + ("the connection to the store was reset: the store lives in rank 0's process (or torchrun's "
                          "agent on rank 0's node), so rank 0 died while the others waited. " if reset else
                          "the wait timed out. The request went over an open connection to the store, so the address "
                          "and the port worked: what was missing is rank 0's put. ")
                       + "Likelier than a network fault: rank 0 crashed or was killed before its first collective, "
                       "or it is still busy (loading the model or the data, preprocessing on rank 0 only, a "
                       "checkpoint) past the timeout, or it takes a code path without that collective. Rank 0's own "
                       "output (its traceback, its exit in the launcher's summary, the OOM killer in `dmesg` on its "
                       "node) says which; it is not in these lines."
                       + f" (the evidence: line {ev.line.lineno}.)"),
               fix=("# read rank 0's own output first: its traceback, or its exit code and signal\n"
                    "torchrun --tee 3 --log-dir logs/ ...   # every rank's output, rank 0's included\n"
                    "dmesg -T | grep -iE 'killed process|out of memory'   # on rank 0's node\n"
                    "# if rank 0 is only slow (work on rank 0 alone before the first collective):\n"
                    "dist.init_process_group('nccl', timeout=datetime.timedelta(minutes=60))   # or do that work on every rank"),
               evidence={"store_key": key, "waiting_ranks": waiting, "reset": bool(reset), "rank0_output_shown":
                         0 in job.ranks})


_RDZV_KIND = {"Timeout": "not every node's agent joined in time", "Connection": "this agent could not reach the "
              "rendezvous endpoint", "Closed": "the rendezvous was closed (another agent failed, finished or gave up)",
              "State": "the rendezvous state in the store was inconsistent"}


def _rendezvous_failed(job: Job, occ, ranks, hosts):
    """torchrun's own rendezvous (the agents agreeing on the node set) failed: say which way, from the exception's name."""
    from ..signatures import entry_of

    ev = occ.first[0]
    m = re.search(r"Rendezvous(Timeout|Connection|Closed|State)Error", ev.line.text)
    kind = m.group(1) if m else ("Connection" if "connection to the C10d store" in ev.line.text else None)
    entry = entry_of(ev) or {}
    if kind == "Closed" and job.has("job_terminated"):
        return   # an agent was stopped from outside and closed the rendezvous: LOG026 reports the stop
    title = "torchrun's rendezvous failed" + (f" (Rendezvous{kind}Error): {_RDZV_KIND[kind]}" if kind else "")
    proto = {"torch.c10d.tcpstore.stop_waiting_response_is_expected": "Stop_waiting response is expected",
             "torch.c10d.tcpstore.wait_canceled_response_is_expected": "wait_canceled response is expected",
             "torch.c10d.tcpstore.ready_or_not_ready_response_expected": "ready or not_ready response expected",
             "torch.c10d.tcpstore.ping_failed_invalid_value_returned": "Ping failed, invalid value returned"}
    said = proto.get(str(entry.get("id", "")))
    if said:
        # TCPStore's client got a reply its server never sends to that query (TCPStore.cpp @cf30153: doWait, check,
        # ping): the store connection reached something else
        title = (f"a store client got a reply that is not the TCPStore protocol's ({said}): "
                 "something other than this job's store answers on MASTER_ADDR:MASTER_PORT")
    yield hit(job, "error", title, at=ev.line, stage=1, ranks=ranks, hosts=hosts, count=occ.count,
              detail=(entry.get("meaning") or "torchrun's agents could not agree on the set of nodes.")
              + f" (the evidence: line {ev.line.lineno}.)",
              fix=(entry.get("fix") or "") + "\nddpdoctor check   # on each node: the route and port to the rendezvous endpoint",
              evidence={"rendezvous_error": kind, "line": ev.line.text[:200]})


@rule("LOG006", "two-ranks-one-gpu", catalogue=("A10", "A1"))
def two_ranks_one_gpu(job: Job):
    """Two ranks use the same GPU ("Duplicate GPU detected", ncclInvalidUsage).

    What it checks
        NCCL's `Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1a000`, and
        `ncclInvalidUsage` / `invalid usage` errors, with NCCL INFO lines that put two ranks on one
        busId when they are in the log. When NCCL's own last error is a network one ("Bootstrap : no
        socket interface found": no interface matched NCCL_SOCKET_IFNAME, for which NCCL also returns
        ncclInvalidUsage), the finding says that instead of two ranks on one GPU. NCCL's socket
        "message truncated : receiving N bytes instead of M" WARN (which returns ncclInvalidUsage
        itself, src/transport/net_socket.cc), with or without torch's error after it, is a
        collective size mismatch between ranks and is said as such.

    Why it matters
        Every rank defaults to GPU 0 unless it calls `torch.cuda.set_device(local_rank)`; a script
        that reads LOCAL_RANK gets nothing under `mp.spawn` or a hand-written launcher, which never
        set it (the seed's case; transformers keys device placement off LOCAL_RANK). NCCL refuses two
        ranks per GPU (NVIDIA/Megatron-LM#661; under SLURM, huggingface/accelerate#2246).

    Example
        node-a:2245:2245 [0] init.cc:943 NCCL WARN Duplicate GPU detected : rank 1 and rank 0 both on
        CUDA device 1000

    Fix
        Launch with torchrun (it sets LOCAL_RANK), or set it yourself in each child, then
        `torch.cuda.set_device(local_rank)` before init_process_group.
    """
    dup = job.get("duplicate_gpu")
    inval = job.get("nccl_invalid_usage")
    if not (dup and dup.count) and not (inval and inval.count):
        return
    net = job.get("nccl_network")
    from .nccl import TRUNCATED_FIX, TRUNCATED_WHY, truncated
    # NCCL's socket transport's 'message truncated' WARN returns ncclInvalidUsage itself (NVIDIA/nccl
    # src/transport/net_socket.cc @5067397c, after the WARN: `return ncclInvalidUsage`; catalogue class
    # nccl_invalid_usage): a collective size mismatch between ranks, with or without torch's own error after it
    trunc = next((e for o in (inval, net, job.get("nccl_warn")) if o and o.count for e in o.first
                  if truncated(e.line.text)), None)
    syserr = job.get("nccl_system_error")
    if not (dup and dup.count) and trunc is not None:
        if syserr and syserr.count:
            return   # under NCCL's unhandled system error LOG009 reports it, with the same reading
        sizes = truncated(trunc.line.text)
        occs = [o for o in (inval, net) if o and o.count]
        # round 17, issue 24, b110_01: then 'Attempt to use communicator before the previous operation returned
        # ncclSuccess'; round 24 (triage32): the WARN alone
        yield hit(job, "error", f"NCCL got a message of another size than it expected ('message truncated': "
                  f"received {sizes[0]} bytes where {sizes[1]} were expected): the ranks' collectives differ",
                  at=trunc.line, stage=1, ranks={r for o in occs for r in o.ranks},
                  hosts={h for o in occs for h in o.hosts} or ({trunc.line.host} - {None}),
                  count=sum(o.count for o in occs) or 1,
                  detail=(TRUNCATED_WHY + " NCCL returns ncclInvalidUsage for it, and refuses the communicator's "
                          f"next call as invalid usage. (the evidence: line {trunc.line.lineno}.)"),
                  fix=TRUNCATED_FIX,
                  evidence={"last_error": trunc.line.text[:200], "received": sizes[0], "expected": sizes[1],
                            "nccl_result": "ncclInvalidUsage"})
        return
    if not (dup and dup.count) and net and net.count:
        # ncclInvalidUsage is NCCL's return code, not its cause: NCCL's own WARN, which torch repeats after "Last
        # error:", names it. "Bootstrap : no socket interface found" (NVIDIA/nccl src/bootstrap.cc, bootstrapNetInit:
        # no interface matched NCCL_SOCKET_IFNAME, `return ncclInvalidUsage`) is the network set-up, not two ranks on
        # one GPU (round 16 wave 2, b105_25: NeMo on several nodes): said as such
        said = net.first[0]
        why = said.line.text.split("NCCL WARN", 1)[-1].strip()[:120]
        yield hit(job, "error", f"NCCL refused the set-up as invalid usage (ncclInvalidUsage): its last error is "
                  f"'{why}': NCCL's network set-up failed, not two ranks on one GPU", at=said.line, stage=1,
                  ranks=set(inval.ranks) | set(net.ranks), hosts=net.hosts, count=inval.count + net.count,
                  detail=("NCCL returns ncclInvalidUsage when no network interface matches NCCL_SOCKET_IFNAME (or none "
                          "is up besides loopback): its bootstrap cannot open the socket the ranks exchange addresses "
                          "on. torch prints NCCL's own warning after 'Last error:'. (the evidence: line "
                          f"{said.line.lineno}.)"),
                  fix=("ip -br addr                      # the interfaces on each node and their addresses\n"
                       "export NCCL_SOCKET_IFNAME=<the NIC that routes between the nodes>   # or unset it\n"
                       "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET torchrun ...   # 'Bootstrap : Using <if>:<addr>'"),
                  evidence={"last_error": said.line.text[:200], "nccl_result": "ncclInvalidUsage"})
        return
    if dup and dup.count:
        ev = dup.first[0]
        a, b = int(ev.data.get("a", -1)), int(ev.data.get("b", -1))
        if a < 0 or b < 0:
            # a message that names no ranks (NCCL init.cc's "Multiple Ranks are using the same GPU/Partition")
            ranks = set(dup.ranks)
            title = "several ranks are on the same GPU (NCCL: multiple ranks using one GPU/partition)"
        else:
            ranks = {a, b} | dup.ranks
            title = f"ranks {min(a, b)} and {max(a, b)} are on the same GPU (device {ev.data.get('dev', '?')})"
    else:
        ev = inval.first[0]
        ranks = set(inval.ranks)
        title = "NCCL refused the set-up as invalid usage (ncclInvalidUsage), usually two ranks on one GPU"
    yield hit(job, "error", title, at=ev.line, stage=1, ranks=ranks, hosts=(dup.hosts if dup else set()),
              count=(dup.count if dup else 0) + (inval.count if inval else 0),
              detail=("Each rank must have its own GPU. Without torch.cuda.set_device(local_rank) every rank "
                      "uses GPU 0; under mp.spawn or a hand-written launcher LOCAL_RANK is never set, so code "
                      "that reads it (including the Trainer) puts every rank on the same device."),
              fix=("torchrun --nproc-per-node <gpus> train.py      # sets LOCAL_RANK for every rank\n"
                   "local_rank = int(os.environ['LOCAL_RANK'])\n"
                   "torch.cuda.set_device(local_rank)              # before init_process_group\n"
                   "ddpdoctor lint train.py                        # finds spawn without LOCAL_RANK"),
              evidence={"example": ev.line.text[:200]})
