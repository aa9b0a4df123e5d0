"""Conclusions several rules share, derived once from the job, so each rule stays a pure function of
the job and the rules can run in any order (the one check runner sorts them by ID):

- `root_cause`: the rank that failed first by itself, and the rule that reports that failure;
- `timeouts_owner`: the one rule whose finding carries the watchdog timeouts (the root cause's rule,
  or a Flight Recorder divergence, a P2P hang, a tokenizers deadlock, or LOG001 itself);
- `fold`: the consequences (timeouts, ranks torchrun stopped) for the finding that owns them;
- `specific_ranks`: ranks a specific rule reports, which the generic LOG004 leaves alone.
"""
from __future__ import annotations

import re
from typing import Dict, Iterable, List, Optional, Tuple

from ..facts import launchers as _launchers
from ..facts import messages as _messages
from ..facts.units import runs_text
from .job import _CONSEQUENCE, Job
from .lines import Line

INF = float("inf")
DEATH_SIGNALS = ("SIGKILL", "SIGSEGV", "SIGBUS", "SIGABRT", "SIGILL", "SIGFPE")

# Event kinds that a specific rule reports, and that rule.
KIND_RULE = {
    "cuda_oom": "LOG005", "duplicate_gpu": "LOG006", "nccl_invalid_usage": "LOG006", "port_in_use": "LOG007",
    "store_refused": "LOG008", "store_timeout": "LOG008", "nccl_system_error": "LOG009", "bus_error": "LOG010",
    "too_many_files": "LOG011", "unused_params": "LOG012", "unpicklable": "LOG014", "bootstrapping": "LOG015",
    "store_barrier": "LOG018", "p2p_consumer": "LOG016", "nccl_sigbus": "LOG009",
}
# ...and every cause class of the messages catalogue goes to the rule its class names (facts.messages.classes()).
for _cls, _meta in _messages.classes().items():
    if _meta.get("role") == "cause" and _meta.get("rule") and _cls not in KIND_RULE:
        KIND_RULE[_cls] = _meta["rule"]
# When one exception line carries several kinds, the more specific cause wins.
_PRIORITY = ("cuda_oom", "host_oom", "cuda_fault", "cuda_setup", "bus_error", "worker_killed", "too_many_files",
             "unused_params", "ready_twice", "ddp_model_mismatch", "unpicklable", "bootstrapping", "duplicate_gpu",
             "nccl_invalid_usage", "nccl_system_error", "nccl_internal_error", "config_mismatch",
             "launch_misconfigured", "address_unresolved", "port_in_use", "store_barrier", "store_refused",
             "store_timeout", "rendezvous_failed", "p2p_consumer", "api_misuse", "nccl_version_mismatch",
             "oom_killer", "job_terminated")


def pos(line: Optional[Line]) -> tuple:
    return (line.src, line.lineno) if line is not None else (INF, INF)


def timed_out(job: Job) -> set:
    return {row["rank"] for row in job.timeout_table()}


def _early_table_failures(job: Job) -> list:
    """Rows of torchrun's table that failed by themselves (exit code > 0, or a row cut before its code) at an earlier
    second than a row that ended on a death signal."""
    kills = [e.ts for e in job.exits if e.source.startswith("elastic table") and e.signal in DEATH_SIGNALS
             and e.ts is not None]
    return [e for e in job.exits if e.source.startswith("elastic table") and e.signal is None and e.ts is not None
            and (e.code is None or e.code > 0) and any(ts > e.ts for ts in kills)]


def escalated_kills(job: Job) -> set:
    """Ranks whose SIGKILL is torchrun's own: its agent stops the surviving workers with SIGTERM, waits
    (PContext.close, torch/distributed/elastic/multiprocessing/api.py: 30 s by default), then sends SIGKILL to those
    still alive. A SIGKILL row of the elastic table at a later second than another rank's own failure row (exit code
    > 0) is that escalation, not the OOM killer."""
    if "escalated" in job.cache:
        return job.cache["escalated"]
    early = _early_table_failures(job)
    out = set()
    for e in job.exits:
        if e.source.startswith("elastic table") and e.signal == "SIGKILL" and e.ts is not None and e.rank is not None:
            if any(f.ts < e.ts and f.rank != e.rank for f in early):
                out.add(e.rank)
    job.cache["escalated"] = out
    return out


STOP_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT")


def signalled_from_outside(job: Job) -> list:
    """Workers that torchrun reports ended by a stop signal it did not send them: its agent logs "Sending process P
    closing signal S" for every worker it stops (torch/distributed/elastic/multiprocessing/api.py, _close), and
    forwards a signal it received itself ("Received 15 death signal", "got signal: 15": the class job_terminated). A
    worker whose pid is in none of the closing lines, in a log that holds them, while the agent itself got no signal,
    was stopped from outside the job: a node agent, a preemption of one process, a `kill PID`. Its peers' lost
    connections are consequences. Empty when the log cannot tell (no closing line in the excerpt, more closing lines
    than were kept, the agent signalled)."""
    if "outside_signal" in job.cache:
        return job.cache["outside_signal"]
    out = []
    term, sent = job.get("job_terminated"), job.get("launcher_teardown")
    closing = [ev for ev in (sent.first if sent else []) if str(ev.data.get("pid", "")).isdigit()]
    if not (term and term.count) and closing and sent.count == len(sent.first):
        pids = {int(ev.data["pid"]) for ev in closing}
        seen = set()
        for e in job.exits:
            if e.signal in STOP_SIGNALS and e.pid is not None and e.pid not in pids and e.pid not in seen and \
                    (e.source == "torchrun" or e.source.startswith("elastic table")):
                seen.add(e.pid)
                out.append(e)
    job.cache["outside_signal"] = out
    return out


def death_candidates(job: Job) -> List[Tuple[float, tuple, Optional[int], str, Optional[Line]]]:
    """(time, position, rank, how, line) for every sign of a rank failing by itself, earliest first."""
    late = timed_out(job)
    escalated = escalated_kills(job)
    out = []
    for e in job.exits:
        if e.signal in DEATH_SIGNALS:
            if e.signal == "SIGKILL" and e.rank in escalated:
                continue  # torchrun's own SIGKILL after its SIGTERM wait: a consequence
            if e.signal == "SIGABRT" and e.rank in late:
                continue  # the watchdog aborts the process after a timeout: a consequence
            out.append((e.ts if e.ts is not None else INF, pos(e.where), e.rank, e.signal, e.where, e.source))
    for e in signalled_from_outside(job):
        out.append((e.ts if e.ts is not None else INF, pos(e.where), e.rank if e.rank is not None else e.local_rank,
                    "outside-signal", e.where, e.source))
    for e in _early_table_failures(job):
        out.append((e.ts, pos(e.where), e.rank, f"exit code {e.code}" if e.code is not None else "failed", e.where,
                    e.source))
    for rank, lst in job.exceptions.items():
        for ev, _frame in lst[:1]:
            out.append((ev.line.ts if ev.line.ts is not None else INF, pos(ev.line), rank, "exception", ev.line))
    for kind, how in (("cuda_oom", "cuda-oom"), ("oom_killer", "oom-killer"), ("host_oom", "host-oom"),
                      ("cuda_fault", "cuda-fault")):
        occ = job.get(kind)
        if occ and occ.first:
            ev = min(occ.first, key=lambda e: (e.line.ts if e.line.ts is not None else INF, pos(e.line)))
            out.append((ev.line.ts if ev.line.ts is not None else INF, pos(ev.line), job.who(ev.line), how, ev.line))
    # at the same time (torchrun's table stamps every row with the second it collected them), the row the table
    # itself names "Root Cause (first observed failure)" comes first, wherever the paste put it
    out.sort(key=lambda c: (c[0], 0 if c[5:] == ("elastic table (root cause)",) else 1, c[1]))
    return [c[:5] for c in out]


def failure_order(job: Job, limit: int = 16) -> List[dict]:
    """Each rank's first sign of failure (its own, or a timeout, or the launcher's SIGTERM), in order
    of time, then of position in the logs."""
    # at the same second, a rank's own failure comes before what it caused
    events = [(ts, 0, p, rank, how) for ts, p, rank, how, _line in death_candidates(job)]
    for row in job.timeout_table():
        line = row.get("line")
        events.append((line.ts if line is not None and line.ts is not None else INF, 1, pos(line), row["rank"],
                       "timed out" + (" (the line has no stamp: the time is its stream's nearest)"
                                      if line is not None and line.ts is not None and line.ts_near else "")))
    escalated = escalated_kills(job)
    for e in job.exits:
        if e.signal == "SIGTERM":
            events.append((e.ts if e.ts is not None else INF, 2, pos(e.where), e.rank, "stopped (SIGTERM)"))
        elif e.signal == "SIGKILL" and e.rank in escalated:
            events.append((e.ts if e.ts is not None else INF, 2, pos(e.where), e.rank,
                           "stopped (torchrun's SIGKILL after its SIGTERM wait)"))
    events.sort(key=lambda x: (x[0], x[1], x[2]))
    out, seen = [], set()
    for ts, _c, _p, rank, how in events:
        if rank is None or rank in seen:
            continue
        seen.add(rank)
        out.append({"rank": rank, "how": how, "time": None if ts == INF else ts})
        if len(out) >= limit:
            break
    return out


def rule_of_line(job: Job, line: Optional[Line], rank: Optional[int]) -> Optional[str]:
    """The specific rule that reports this exception line (or, failing that, this rank's failure)."""
    kinds = []
    for kind in _PRIORITY:
        occ = job.get(kind)
        if occ and line is not None and any(pos(ev.line) == pos(line) for ev in occ.first):
            kinds.append(kind)
    if not kinds and rank is not None:
        kinds = [k for k in _PRIORITY if job.get(k) and rank in job.get(k).ranks]
    return KIND_RULE[kinds[0]] if kinds else None


def root_cause(job: Job) -> Optional[Tuple[int, str]]:
    """(rank, rule ID) of the earliest failure of a known rank, or None."""
    if "root_cause" in job.cache:
        return job.cache["root_cause"]
    found = None
    for _ts, _pos, rank, how, line in death_candidates(job):
        if rank is None:
            continue
        if how in ("SIGKILL", "oom-killer", "host-oom"):
            rid = "LOG002"
        elif how == "cuda-fault":
            rid = "LOG020"
        elif how == "SIGSEGV":
            rid = "LOG003"
        elif how == "cuda-oom":
            rid = "LOG005"
        elif how == "outside-signal":
            rid = "LOG026"
        elif how == "exception":
            rid = rule_of_line(job, line, rank) or "LOG004"
        else:
            rid = rule_of_line(job, None, rank) or "LOG004"
        found = (rank, rid)
        break
    job.cache["root_cause"] = found
    return found


def root_line(job: Job) -> Optional[Line]:
    """The line of the root cause (its first sign), when there is one."""
    root = root_cause(job)
    if root is None:
        return None
    for _ts, _pos, rank, _how, line in death_candidates(job):
        if rank == root[0]:
            return line
    return None


def is_consequence(job: Job, line: Optional[Line]) -> bool:
    """A failure line on another rank at or after the root cause (in time, or in the same file's order when
    the lines carry no time): what the root cause did to its peers, not a fault of its own."""
    if line is None:
        return False
    root = root_cause(job)
    rl = root_line(job)
    if root is None or rl is None or line is rl:
        return False
    rank = job.who(line)
    if rank is not None and rank == root[0]:
        return False
    if _CONSEQUENCE.search(line.text) or any(_messages.role(m.cls) == "consequence"
                                             for m in _messages.match_all(line.text)):
        return True   # the line itself says a peer was lost or a collective timed out
    if line.ts is not None and rl.ts is not None:
        return line.ts >= rl.ts
    return line.src == rl.src and line.lineno > rl.lineno


def own_events(job: Job, *kinds: str) -> list:
    """The first events of these kinds that are not consequences of the root cause, earliest first."""
    out = []
    for kind in kinds:
        occ = job.get(kind)
        if occ:
            out.extend(ev for ev in occ.first if not is_consequence(job, ev.line))
    out.sort(key=lambda ev: (ev.line.ts if ev.line.ts is not None else INF, pos(ev.line)))
    return out


# A bare number given as a host name is read by inet_aton as an IPv4 address ("1009" -> 0.0.3.241, "6841231" ->
# 0.104.99.143): the connect then goes to an address in 0.0.0.0/8, which no host has (RFC 1122 3.2.1.3: "this
# network", never a destination), written bare or IPv4-mapped ("[::ffff:0.0.3.241]:55121"). 0.0.0.0 itself is the
# wildcard people set on purpose (Linux connects it to the local host): not this.
_NUMERIC_HOST = re.compile(r"connect to \[?(?P<a>\d{1,9})\]?:\d+|\((?P<b>\d{1,9}), \d+\)|"
                           r"connect to \[?(?:::ffff:)?(?P<c>0\.(?!0\.0\.0\b)\d+\.\d+\.\d+)\]?:\d+")
# (also at the start of a line: "connect " / "[127.0.1.1]:29591: Connection refused", a message a terminal or a web page
# wrapped after its verb, the address opening the next line)
_LOOPBACK = re.compile(r"(?:connect(?: to)?|Using|resolves? to|bind to|address)\s*\[?(?:[\w.\-]+:)?(127\.\d+\.\d+\.\d+)|"
                       r"^\s*\[(127\.\d+\.\d+\.\d+)\]:\d+:")
# 127.0.1.1 is what /etc/hosts gives a host's own name (Debian, Ubuntu): a peer announced at that address announced its
# host name, which resolves to loopback; nobody sets it on purpose (127.0.0.1 is what people write)
_HOSTNAME_LOOPBACK = "127.0.1.1"


def address_problem(job: Job):
    """("numeric", line, address) when the rendezvous address is a bare number read as an IP, ("loopback", line,
    address) when a job of several hosts uses 127.x, else None. LOG025 reports it; LOG008 then stays quiet."""
    if "address" in job.cache:
        return job.cache["address"]
    found = None
    for kind in ("store_refused", "store_timeout", "store_address_retry", "nccl_iface", "nccl_connect"):
        occ = job.get(kind)
        for ev in (occ.first if occ else []):
            m = _NUMERIC_HOST.search(ev.line.text)
            if m and kind.startswith("store"):
                found = ("numeric", ev.line, m.group("a") or m.group("b") or m.group("c"))
                break
            lm = _LOOPBACK.search(ev.line.text)
            if lm and (len(job.hosts) > 1 or ((lm.group(1) or lm.group(2)) == _HOSTNAME_LOOPBACK and kind.startswith("store"))):
                found = ("loopback", ev.line, lm.group(1) or lm.group(2))
                break
        if found:
            break
    job.cache["address"] = found
    return found


def specific_ranks(job: Job) -> set:
    """Ranks whose failure a specific rule reports (LOG004 reports the rest)."""
    out = set()
    for kind in KIND_RULE:
        occ = job.get(kind)
        if occ:
            out |= occ.ranks
            if any(ev.line.rank is None for ev in occ.first):
                out.add(None)  # an unattributed specific failure explains the unattributed exceptions
    out |= set(job.dead_ranks(("SIGKILL", "SIGSEGV"))) - escalated_kills(job)
    return out


def any_specific(job: Job) -> bool:
    return any(job.get(k) and job.get(k).count for k in KIND_RULE) or bool(
        set(job.dead_ranks(("SIGKILL", "SIGSEGV"))) - escalated_kills(job))


def fr_results(job: Job) -> list:
    if "fr" not in job.cache:
        from .flight import analyze

        job.cache["fr"] = analyze(job.flight) if job.flight else []
    return job.cache["fr"]


def p2p_early(job: Job) -> List[dict]:
    """Timeout rows at the first collectives, when NCCL set up P2P: the P2P/ACS signature."""
    p2p = job.get("nccl_p2p")
    if not (p2p and p2p.count):
        return []
    return [r for r in job.timeout_table() if r.get("seq") is not None and r["seq"] <= 2
            and r.get("completed", 0) in (0, r["seq"] - 1)]


def tokenizers_deadlock(job: Job) -> bool:
    fork, forced = job.get("tokenizers_fork"), job.get("tokenizers_forced")
    return bool(fork and fork.count and forced and forced.count)


def timeouts_owner(job: Job) -> Optional[str]:
    """The rule whose finding carries the watchdog timeouts; None when there are none. A rule left
    out by --only/--ignore cannot carry them: the next one in line does (LOG001 last)."""
    if not job.timeout_table():
        return None
    root = root_cause(job)
    owners = [root[1] if root is not None else None,
              "LOG022" if root is None and peer_lost_first(job) else None,
              "LOG019" if any(r.get("mismatches") or r.get("never_issued") for r in fr_results(job)) else None,
              "LOG016" if p2p_early(job) else None,
              "LOG013" if tokenizers_deadlock(job) else None]
    for rid in owners:
        if rid is not None and selected(job, rid):
            return rid
    return "LOG001"


def selected(job: Job, rid: str) -> bool:
    return job.selected is None or rid in job.selected


def consequences(job: Job, dead: Iterable[int]) -> dict:
    """What the other ranks printed because these ranks failed: their watchdog timeouts, and the
    ranks the launcher stopped."""
    dead = set(dead)
    table = [row for row in job.timeout_table() if row["rank"] not in dead]
    out: dict = {}
    if table:
        out["timed_out_ranks"] = [row["rank"] for row in table]
        ops = {(row.get("op"), row.get("seq")) for row in table if row.get("op") or row.get("seq")}
        if ops:
            out["timed_out_in"] = [{"op": op, "seq": seq}
                                   for op, seq in sorted(ops, key=lambda x: (str(x[0]), x[1] or 0))][:4]
        out["timeout_lines"] = sum(job.occ[k].count for k in ("watchdog", "watchdog_seq", "gloo_timeout")
                                   if k in job.occ)
    # A peer's "remote process exited" / "communicator was aborted": the catalogue reads the first as
    # nccl_remote_error, the second as nccl_aborted; both are what the dead rank did to its peers.
    peer_occ = [o for o in (job.get("nccl_aborted"), job.get("nccl_remote_error")) if o and o.count]
    if peer_occ:
        out["peer_errors"] = sum(o.count for o in peer_occ)
        peers = sorted({r for o in peer_occ for r in o.ranks if r is not None and r not in dead})
        if peers:
            out["peer_error_ranks"] = peers
    late = {row["rank"] for row in table}  # their abort followed their own timeout: already said
    later = sorted({(e.rank, e.signal) for e in job.exits if e.rank is not None and e.rank not in dead
                    and e.rank not in late and e.signal in ("SIGABRT", "SIGBUS", "SIGILL", "SIGFPE")})
    if later:
        out["later_aborts"] = [{"rank": r, "signal": s} for r, s in later]
    term = [e for e in job.exits if e.signal == "SIGTERM" and e.rank not in dead]
    if term:
        out["stopped_by_launcher"] = sorted({e.rank for e in term if e.rank is not None})
    return out


# what a lost-peer line says (NCCL's and torch's words): a line of a transport class that says this is not a cause of
# its own but the other side going away
_PEER_GONE = re.compile(r"closed by (?:remote )?peer|reset by peer|remote process exited|ncclRemoteError|remote error",
                        re.I)
# the fault classes that break a process by themselves, and their rules: a lost peer in the same log is what they did
_UNRANKED_ROOTS = (("cuda_oom", "LOG005"), ("cuda_fault", "LOG020"), ("oom_killer", "LOG002"), ("host_oom", "LOG002"))


def _transport_cause(job: Job):
    """NCCL's own WARN naming a transport failure of this process (a verbs call, a connect, /dev/shm, no interface)
    that is not itself a lost peer or a non-fatal event: LOG009 reports it as an error."""
    for kind in ("nccl_ib", "nccl_connect", "nccl_shm", "nccl_no_iface"):
        occ = job.get(kind)
        for ev in (occ.first if occ else []):
            text = ev.line.text
            if not (ev.line.nccl == "WARN" or "NCCL WARN" in text) or _PEER_GONE.search(text) or "async event" in text:
                continue
            if any(m.role in ("benign", "end") for m in _messages.match_all(text)):
                continue
            return ev
    return None


def peer_loss_owner(job: Job) -> Optional[str]:
    """The rule whose finding NCCL's lost-peer lines (catalogue classes nccl_remote_error, nccl_aborted) fold under,
    or None when LOG022 reports them: the root cause's rule when a rank's own failure is known; else a fault of the same
    log that breaks a process by itself though no line names its rank (NCCL running out of GPU memory, a GPU fault, a
    host OOM kill: `include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'` on one GPU, then 'Connection closed by
    remote peer' on its neighbours), or NCCL's own WARN naming a transport failure (an IB verbs call, a connect that
    failed) before the peer closed. One fault, one finding: what followed it is its consequence."""
    if "peer_loss_owner" in job.cache:
        return job.cache["peer_loss_owner"]
    root = root_cause(job)
    owner = root[1] if root is not None else None
    if owner is None:
        owner = next((rid for kind, rid in _UNRANKED_ROOTS if job.get(kind) and job.get(kind).count), None)
    if owner is None and _transport_cause(job) is not None:
        owner = "LOG009"
    job.cache["peer_loss_owner"] = owner
    return owner


def peer_lost_first(job: Job) -> bool:
    """NCCL said a peer went away (ncclRemoteError, "remote process exited or there was a network error", a socket
    "Broken pipe" / "Connection closed by remote peer" traced back as ncclRemoteError) no later than the first watchdog
    timeout, and no rank's own failure or unranked fault owns the lost peer: the peer, or its node, died first and the
    timeouts that follow are what the surviving ranks print while they wait for it (NVIDIA/nccl src/misc/socket.cc
    socketProgress returns ncclRemoteError on a closed or reset connection; torch ProcessGroupNCCL.cpp turns it into
    "remote process exited or there was a network error"). A remote error printed only after every timeout is the
    watchdog's abort reaching the peers: then the timeouts stay the finding."""
    if peer_loss_owner(job) is not None or not job.timeout_table():
        return False
    occ = job.get("nccl_remote_error")
    evs = [e for e in (occ.first if occ else []) if (e.line.src, e.line.lineno) not in job.store_lines]
    if not evs:
        return False
    key = lambda ln: (ln.ts if ln.ts is not None else INF, pos(ln))
    lost_line = min((e.line for e in evs), key=key)
    timeout_lines = [r["line"] for r in job.timeout_table() if r.get("line") is not None]
    if not timeout_lines:
        return True
    timeout_line = min(timeout_lines, key=key)
    lost, first_timeout = key(lost_line), key(timeout_line)
    if lost[0] == INF or first_timeout[0] == INF:
        lost, first_timeout = lost[1:], first_timeout[1:]   # one side has no time: log order decides
    elif (lost_line.ts_near or timeout_line.ts_near) and lost_line.src == timeout_line.src:
        # a line without a stamp of its own carries its stream's nearest stamp, a bound and not its time (a traceback
        # printed 30 s after the last stamped line): within one file, the order the lines were written decides
        lost, first_timeout = lost[1:], first_timeout[1:]
    return lost <= first_timeout


def peer_loss_lines(job: Job) -> list:
    """The lost-peer and aborted-communicator events, earliest first."""
    evs = [ev for kind in ("nccl_remote_error", "nccl_aborted") for ev in (job.get(kind).first if job.get(kind) else [])]
    return sorted(evs, key=lambda ev: (ev.line.ts if ev.line.ts is not None else INF, pos(ev.line)))


def fold(job: Job, rule_id: str, ranks: Iterable[Optional[int]]) -> Tuple[dict, str]:
    """(evidence, sentence) of the consequences when `rule_id` reports the root cause on one of `ranks`."""
    root = root_cause(job)
    ranks = {r for r in ranks if r is not None}
    if root is None and peer_loss_owner(job) == rule_id and peer_loss_lines(job):
        # no rank's failure is known, but this rule's fault is the log's: the lost peers NCCL reported after it are
        # its consequence (LOG022 stays quiet)
        evs = peer_loss_lines(job)
        # NCCL's own words ("Connection closed by remote peer node-b<40522>") rather than its trace line ("-> 6")
        words = [ev for kind in ("nccl_warn", "nccl_network") for ev in (job.get(kind).first if job.get(kind) else [])
                 if _PEER_GONE.search(ev.line.text)]
        first = min(words, key=lambda ev: pos(ev.line)).line if words else next(
            (ev for ev in evs if ev.data.get("from") != "nccl_result_trace"), evs[0]).line
        return ({"consequences": {"peer_errors": len(evs), "first_peer_error_line": first.lineno}},
                f"NCCL then reported a lost peer or an aborted communicator ({len(evs)} line{'s' if len(evs) != 1 else ''}"
                f"; line {first.lineno}: {first.text.strip()[:120]}): a consequence of this fault, not a second one.")
    if root is None or root[1] != rule_id or root[0] not in ranks or timeouts_owner(job) not in (None, rule_id):
        return {}, ""
    cons = consequences(job, [root[0]])
    return ({"consequences": cons} if cons else {}), consequence_sentence(cons)


def ranks_text(ranks: Iterable[int]) -> str:
    """[0, 1, 2, 3, 5] -> '0-3, 5'; two neighbours stay a list ('4, 5')."""
    return runs_text(ranks, sep=", ", pairs_as_runs=False) or "none"


def who(ranks: Iterable[int]) -> str:
    """'rank 3' or 'ranks 0-2, 5'."""
    rs = sorted(set(ranks))
    return f"rank{'s' if len(rs) != 1 else ''} {ranks_text(rs)}"


def consequence_sentence(cons: dict) -> str:
    if not cons:
        return ""
    parts = []
    if cons.get("timed_out_ranks"):
        what = ""
        if cons.get("timed_out_in"):
            first = cons["timed_out_in"][0]
            what = f" in {first['op'] or 'a collective'}" + (f" #{first['seq']}" if first.get("seq") else "")
        n, lines = len(cons["timed_out_ranks"]), cons.get("timeout_lines", 0)
        parts.append(f"{'Ranks' if n > 1 else 'Rank'} {ranks_text(cons['timed_out_ranks'])} then timed out{what} "
                     f"waiting for it ({lines} watchdog line{'s' if lines != 1 else ''}): a consequence, not a second "
                     "fault.")
    if cons.get("peer_error_ranks"):
        peers = [r for r in cons["peer_error_ranks"] if r not in cons.get("timed_out_ranks", [])]
        if peers:
            parts.append(f"{'Ranks' if len(peers) > 1 else 'Rank'} {ranks_text(peers)} then failed on the lost "
                         "peer (connection reset, remote process exited): consequences.")
    if cons.get("later_aborts"):
        parts.append("Then " + ", ".join(f"rank {a['rank']} ended on {a['signal']}" for a in cons["later_aborts"])
                     + " while exiting: a consequence.")
    if cons.get("stopped_by_launcher"):
        n = len(cons["stopped_by_launcher"])
        parts.append(f"torchrun then stopped {'ranks' if n > 1 else 'rank'} {ranks_text(cons['stopped_by_launcher'])} "
                     "(SIGTERM).")
    return " ".join(parts)


def rendezvous_wait(job: Job):
    """(nodes asked for, the line that asks, a guess?) when a multi-node launch (torchrun's `--nnodes 2` on its command
    line, or `min_nodes : 2` in its launch configs) shows nothing past the agent's start: no line says the rendezvous
    completed or the workers started, no rank's line, no NCCL line, no progress. A node's agent waits in the rendezvous
    until every node has joined (join timeout 600 s by default, or the static store's 900 s), and prints nothing
    meanwhile: one node started alone, or the others unable to reach the endpoint, looks exactly so. A guess when
    no line shows the agent waiting there (its "Rendezvous'ing worker group" / "attempts to join the next round")
    and only torchrun's start banner is there. Else None."""
    if (job.nnodes is None or job.rdzv_done or job.progress_lines or job.nccl_pids
            or any(r is not None and r >= 0 for r in job.ranks)):
        return None
    n, line = job.nnodes
    return n, line, job.rdzv_line is None


_PY_MODULE = re.compile(r"\bpython[\d.]*\s+-m\s+([\w.]+)")


def launcher_in(line: Line) -> str:
    """The launcher the line that asks for the nodes names: torch's launchers and the others data/launchers.json knows
    (`torchrun`, `deepspeed`, `accelerate`), torchrun for its launch configs' `min_nodes : N`, else the program the
    line runs (`python3 -m sglang.launch_server --nnodes 2` -> 'sglang.launch_server'), else 'the launcher'. Only
    torchrun's agent waits in an elastic rendezvous; another program's ranks wait in init_process_group's store."""
    text = line.text
    m = re.search(_launchers.line_pattern(), text)
    name = _launchers.name_of_text(m.group(0)) if m else None
    if name:
        return "torchrun" if name == "torchrun" else name
    if "min_nodes" in text:
        return "torchrun"
    mod = _PY_MODULE.search(text)
    return mod.group(1) if mod else "the launcher"


def survived_by_end(job: Job, line: Optional[Line]) -> Optional[Line]:
    """An error the job survived: after `line`, in the same file, training progress and then an end line (a trainer's
    summary, torchelastic's "worker group successfully finished"), and no process ending badly (a non-zero exit, a
    signal) after that end. A failed first attempt (a port held by another job, a launch retried on another port) whose
    retry ran to its end is a note, not the job's failure: the end line, else None."""
    if line is None:
        return None
    occ = job.get("job_ended_well")
    if not (occ and occ.count):
        return None
    if any(m.cls == "work_unit_failed_caught" for m in _messages.match_all(line.text)):
        # a unit of work whose exception a framework caught and skipped (an AutoML model, an optuna trial) is not
        # retried: the end line after it closes a run that went on without it, never a retry that succeeded (round 24)
        return None
    ends = [e.line for e in occ.first if e.line.src == line.src and e.line.lineno > line.lineno]
    if not ends:
        return None
    end = max(ends, key=lambda ln: ln.lineno)
    if not any(p.src == line.src and p.lineno > line.lineno for p in job.stream_progress.values()):
        return None
    for e in job.exits:
        if ((e.code not in (None, 0)) or e.signal) and (e.where is None or pos(e.where) > pos(end)):
            return None
    for ff in job.first_fail.values():
        if pos(ff) > pos(end):
            return None
    return end
