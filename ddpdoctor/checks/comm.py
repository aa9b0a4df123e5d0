"""Verdicts of the live connectivity test (`ddpdoctor comm`): who is to blame, and how fast.

Pure functions over the `comm` snapshot section built by ddpdoctor.comm.section. The section holds
facts only (per-rank progress and results, the launcher's root cause, rank 0's store diagnosis,
summaries, pair timings, the bandwidth sweep); these checks decide what they mean.
"""
from __future__ import annotations

import statistics
from typing import Dict, List, Optional

from ddpdoctor.model import error, info, warning
from ddpdoctor.model.registry import check
from ddpdoctor.facts.comm import comm_section, crashed_ranks, failure_of, host_of, peers_in, rank_subjects, rank_where
from ddpdoctor.facts.units import human

# Failure kinds that a specific check below explains; anything else falls to COMM013.
# "deadline" is not among them: a deadline with a rank to blame is explained by the peers' states
# (COMM001/COMM002); one with nobody to blame (every rank still starting) is COMM013's.
EXPLAINED_KINDS = {"missing-ranks", "never-started", "stuck", "crashed", "exited-without-result",
                   "interface-missing", "master-unresolvable", "master-unreachable", "master-refused",
                   "port-in-use", "world-size-mismatch", "rank-out-of-range", "duplicate-rank"}

# Conservative floors of all_reduce busbw (GB/s) per transport between GPUs of one host, well under
# what nccl-tests shows on healthy hardware (NVIDIA/nccl-tests doc/PERFORMANCE.md): below half of
# the floor something is wrong (NVIDIA/nccl#2079, NVIDIA/nccl-tests#117).
BUSBW_FLOOR_GBPS = {"nvlink": 40.0, "pcie-p2p": 6.0, "shm": 3.0}


def _rerun(sec: dict) -> str:
    n = sec.get("world_size") or 2
    return (f"ddpdoctor comm --cpu --nproc {n}" if sec.get("backend") == "gloo" else f"ddpdoctor comm --gpus {n}")


@check("COMM001", "comm-rank-never-joined", family="comm", needs=("comm",), catalogue=("A4", "C3"))
def rank_never_joined(snap):
    """A rank never joined the rendezvous.

    What it checks
        Whether every rank of the test reached the rendezvous store within the phase deadline: the
        store keys each rank sets on arrival, and the launcher's view of ranks that never reported
        any progress.

    Why it matters
        init_process_group waits for all WORLD_SIZE ranks; one that never starts (a node that was
        not launched, a crash at import, a wrong RANK) makes the others hang for torch's default
        timeout, 30 minutes, with no name attached (pytorch/pytorch#52848, OFA-Sys/OFA#271).

    Example
        Two nodes with `torchrun --nnodes 2`, and the second node's job never started.

    Fix
        Start the missing rank (check that node's launcher log), and make RANK/WORLD_SIZE agree
        with the number of processes started: `torchrun --nnodes N --nproc-per-node M ...`.
    """
    sec = comm_section(snap)
    missing = set(peers_in(sec, "never-joined"))
    f = failure_of(sec)
    if f.get("kind") == "missing-ranks" and f.get("phase") in ("rendezvous", "startup"):
        missing |= set(f.get("missing") or [])
    rc = sec.get("root_cause") or {}
    if rc.get("kind") == "never-started":
        missing |= set(rc.get("ranks") or [rc.get("rank")])
    missing -= crashed_ranks(sec)
    missing.discard(None)
    if not missing:
        return
    ranks = sorted(missing)
    yield error(
        (f"{rank_where(sec, ranks[0])} never joined the rendezvous" if len(ranks) == 1 else
         f"ranks {', '.join(map(str, ranks))} never joined the rendezvous"),
        detail=(f"Within the {sec.get('deadline_s', '?')} s deadline, {len(ranks)} of {sec.get('world_size')} ranks "
                f"never reached the rendezvous store at {sec.get('master_addr', 'MASTER_ADDR')}:"
                f"{sec.get('master_port', 'MASTER_PORT')}. The other ranks were waiting for them; a real job "
                "would have hung in init_process_group for 30 minutes."),
        fix=(f"{_rerun(sec)}   # after starting every node's launcher (see its log) with the same --nnodes, "
             "--rdzv-endpoint and --master-port"),
        subjects=rank_subjects(sec, ranks),
        evidence={"missing_ranks": ranks, "phase": f.get("phase") or rc.get("phase") or "rendezvous",
                  "reported_by": f.get("rank")},
    )


@check("COMM002", "comm-rank-stuck", family="comm", needs=("comm",), catalogue=("C3",))
def rank_stuck(snap):
    """A rank is alive but stuck in a phase while the others wait for it.

    What it checks
        Each rank's progress in the store (its phase and how many collectives it started) when a
        phase timed out: the rank behind the others, or one whose heartbeat stopped, is named with
        its host and phase.

    Why it matters
        A stalled rank shows up as a collective timeout on every *other* rank ("Watchdog caught
        collective operation timeout"), after 30 minutes by default, which blames the wrong
        process (pytorch/pytorch#118369, OFA-Sys/OFA#271).

    Example
        Rank 1 blocks in a slow filesystem read before its all_reduce; rank 0 waits in it.

    Fix
        Dump the stuck rank's stack (`py-spy dump --pid <pid>`) and fix what it waits for; set
        `TORCH_DISTRIBUTED_DEBUG=DETAIL` to compare the collectives each rank issued.
    """
    sec = comm_section(snap)
    stuck = peers_in(sec, "behind", "not-responding")
    rc = sec.get("root_cause") or {}
    if rc.get("kind") == "stuck":
        for r in rc.get("ranks") or [rc.get("rank")]:
            if r is not None:
                stuck.setdefault(int(r), {"state": "behind", "phase": (rc.get("phases") or {}).get(str(r))
                                          or (rc.get("phases") or {}).get(r) or rc.get("phase")})
    for r in crashed_ranks(sec):
        stuck.pop(r, None)
    for r in list(stuck):
        if r in peers_in(sec, "never-joined"):
            stuck.pop(r)
    for r, p in sorted(stuck.items()):
        state = "stopped answering (heartbeat frozen)" if p.get("state") == "not-responding" else \
            "fell behind the others"
        yield error(
            f"{rank_where(sec, r)} is stuck in phase '{p.get('phase') or '?'}'",
            detail=(f"{rank_where(sec, r).capitalize()} {state} in phase '{p.get('phase')}' "
                    f"({p.get('ops', 0)} collective(s) started there) while the other ranks waited in it; "
                    f"the test stopped it after its phase deadline instead of torch's 30-minute timeout."),
            fix=("py-spy dump --pid <pid of that rank>   # see where it waits; then rerun with "
                 "TORCH_DISTRIBUTED_DEBUG=DETAIL"),
            subjects=rank_subjects(sec, [r]),
            evidence={"rank": r, "phase": p.get("phase"), "state": p.get("state"), "ops": p.get("ops"),
                      "failure": failure_of(sec).get("message")},
        )


@check("COMM003", "comm-rank-crashed", family="comm", needs=("comm",), catalogue=("C3",))
def rank_crashed(snap):
    """A rank crashed during the test; its root-cause error is shown as torchrun would.

    What it checks
        The launcher's per-rank exit codes and torch elastic `@record` error files
        (TORCHELASTIC_ERROR_FILE): the first observed failure, not the ranks killed after it.

    Why it matters
        When one rank dies the others see "Connection closed by peer" or a timeout, and logs fill
        with their secondary errors. The first failure is the one to fix
        (torch.distributed.elastic "Root Cause (first observed failure)").

    Example
        Rank 1 exits in the middle of an all_reduce (OOM-killed, a segfault, `sys.exit`).

    Fix
        Read the root cause's traceback below; for a signal (SIGKILL), check `dmesg` for the
        OOM killer.
    """
    sec = comm_section(snap)
    rc = sec.get("root_cause") or {}
    if rc.get("kind") not in ("crashed", "exited-without-result"):
        return
    r = rc.get("rank")
    how = f"was killed by {rc['signal']}" if rc.get("signal") else f"exited with code {rc.get('exitcode')}"
    fix = ("dmesg -T | grep -i -E 'killed process|oom'   # a SIGKILL is often the OOM killer"
           if rc.get("signal") == "SIGKILL" else
           "Fix the error in the traceback (evidence.traceback), then rerun " + _rerun(sec))
    yield error(
        f"{rank_where(sec, r)} {how} in phase '{rc.get('phase') or 'startup'}'",
        detail=(f"Root cause (first observed failure): {rc.get('message')}. "
                + (f"Ranks {', '.join(map(str, rc['others']))} failed after it, as a consequence."
                   if rc.get("others") else "")),
        fix=fix,
        subjects=rank_subjects(sec, [r]),
        evidence={"rank": r, "exitcode": rc.get("exitcode"), "signal": rc.get("signal"), "pid": rc.get("pid"),
                  "phase": rc.get("phase"), "message": rc.get("message"), "traceback": rc.get("traceback")},
    )


# Packages whose difference across nodes breaks or hangs collectives (C4) versus those that only
# make results differ.
_CRITICAL_PKGS = {"torch", "torch_runtime", "nccl", "cuda_driver", "nvidia-nccl-cu12", "nvidia-nccl-cu13"}


def _rank_versions(summary: dict) -> dict:
    """A rank's versions as COMM004 compares them: the packages, torch's NCCL and NVML's driver, and the CUDA
    toolkit torch was built with (torch.version.cuda, `torch_cuda`: conda and source builds do not carry it in
    the version string, and a cu118 and a cu121 build bundle different NCCLs)."""
    out = dict(summary.get("versions") or {})
    if summary.get("torch_cuda"):
        out["torch_cuda"] = str(summary["torch_cuda"])
    return out


@check("COMM004", "comm-version-mismatch", family="comm", needs=("comm",), catalogue=("C4",))
def version_mismatch(snap):
    """Ranks run different versions of torch, NCCL, the CUDA driver or the HF libraries.

    What it checks
        The versions each rank reported in the all_gather phase (from package metadata, torch's
        NCCL, the CUDA toolkit torch was built with and NVML's driver version), compared across
        ranks; each difference is named with its ranks and hosts.

    Why it matters
        NCCL "needs to match" across nodes (NVIDIA/nccl#286); a different torch or NCCL on one
        node hangs or fails with "internal error" (pytorch/pytorch#122571, NVIDIA/nccl#354).
        Different transformers/accelerate versions make ranks take different code paths.

    Example
        Node 0 runs transformers 5.24.0, node 1 an image built last month with 5.20.0.

    Fix
        Run every node from the same image or lock file: `pip install torch==X transformers==Y` on
        the odd node(s), or rebuild the image once and redeploy it everywhere.
    """
    sec = comm_section(snap)
    summaries = sec.get("summaries") or {}
    if len(summaries) < 2:
        return
    versions = {r: _rank_versions(s) for r, s in summaries.items()}
    names = sorted({k for vs in versions.values() for k in vs})
    for name in names:
        by_value: Dict[str, List[int]] = {}
        for r, vs in versions.items():
            if name == "torch_cuda" and name not in vs:
                continue  # a summary from before the field: unknown, not a difference
            by_value.setdefault(str(vs.get(name, "not installed")), []).append(int(r))
        if len(by_value) < 2:
            continue
        majority = max(by_value.items(), key=lambda kv: (len(kv[1]), -min(kv[1])))[0]
        odd = sorted(r for v, rs in by_value.items() if v != majority for r in rs)
        groups = "; ".join(f"{v} on rank{'s' if len(rs) > 1 else ''} {', '.join(map(str, sorted(rs)))}"
                           f" ({', '.join(sorted({host_of(sec, r) or '?' for r in rs}))})"
                           for v, rs in sorted(by_value.items()))
        make = error if name in _CRITICAL_PKGS else warning
        pkg = "torch" if name == "torch_runtime" else name
        sizes = sorted((len(rs) for rs in by_value.values()), reverse=True)
        if name == "torch_cuda":
            tie = sizes[0] == sizes[1]
            odd_ranks = sorted(r for rs in by_value.values() for r in rs) if tie else odd
            want = "<one CUDA build>" if tie else majority
            yield warning(
                f"torch's CUDA build differs across ranks: {groups}",
                detail=("torch.version.cuda, the CUDA toolkit torch was built with, differs between ranks: the "
                        "builds bundle different CUDA libraries and NCCLs, and collectives between them can fail "
                        "or hang even where torch's version number matches."),
                fix=(f"pip install torch --index-url https://download.pytorch.org/whl/cu{want.replace('.', '')}"
                     f"   # on {', '.join(sorted({host_of(sec, r) or f'rank {r}' for r in odd_ranks}))}"
                     if not tie else "install one torch build (the same CUDA) on every node, or one image for all"),
                subjects=["pkg:torch", *rank_subjects(sec, odd_ranks)],
                evidence={"package": "torch", "field": "torch.version.cuda",
                          "versions": {v: sorted(rs) for v, rs in by_value.items()}},
            )
            continue
        if sizes[0] == sizes[1]:  # no majority: do not guess which side is right
            odd = sorted(r for rs in by_value.values() for r in rs)
            yield make(
                f"{pkg} differs across ranks: {groups}",
                detail=f"The ranks of one job must run the same {pkg}; no version is held by a majority of ranks.",
                fix=f"pip install '{pkg}==<one version>'   # the same on every node, or rebuild one image for all",
                subjects=[f"pkg:{pkg}", *rank_subjects(sec, odd)],
                evidence={"package": pkg, "versions": {v: sorted(rs) for v, rs in by_value.items()}},
            )
            continue
        yield make(
            f"{pkg} differs across ranks: {groups}",
            detail=(f"The ranks of one job must run the same {pkg}. "
                    + ("A different torch/NCCL/driver on one node hangs or breaks collectives."
                       if make is error else "Different library versions make ranks behave differently.")),
            fix=f"pip install '{pkg}=={majority}'   # on {', '.join(sorted({host_of(sec, r) or f'rank {r}' for r in odd}))}"
            if majority != "not installed" else f"pip uninstall {pkg}   # on the odd node(s), or install it everywhere",
            subjects=[f"pkg:{pkg}", *rank_subjects(sec, odd)],
            evidence={"package": pkg, "versions": {v: sorted(rs) for v, rs in by_value.items()}},
        )


_PER_RANK_OK = ("CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS")


@check("COMM005", "comm-env-mismatch", family="comm", needs=("comm",), catalogue=("C4", "C1"))
def env_mismatch(snap):
    """NCCL_* / GLOO_* / TORCH_NCCL_* settings differ across ranks.

    What it checks
        The communication variables each rank reported, compared across ranks (CUDA_VISIBLE_DEVICES
        and OMP_NUM_THREADS may legitimately differ and are ignored).

    Why it matters
        NCCL negotiates transports per communicator: NCCL_P2P_DISABLE, NCCL_IB_DISABLE or a socket
        interface set on some nodes only gives mismatched or failed connections and hangs that
        look random (NVIDIA/nccl#286, horovod/horovod#310).

    Example
        `export NCCL_IB_DISABLE=1` in one node's ~/.bashrc only.

    Fix
        Set these variables in the job script (the same for every node), not in per-node shell
        profiles; `env | grep -E '^(NCCL|GLOO)_'` on each node shows the odd one.
    """
    sec = comm_section(snap)
    summaries = sec.get("summaries") or {}
    if len(summaries) < 2:
        return
    keys = sorted({k for s in summaries.values() for k in (s.get("env") or {}) if not k.startswith(_PER_RANK_OK)})
    for key in keys:
        by_value: Dict[str, List[int]] = {}
        for r, s in summaries.items():
            by_value.setdefault(str((s.get("env") or {}).get(key, "<unset>")), []).append(int(r))
        if len(by_value) < 2:
            continue
        majority = max(by_value.items(), key=lambda kv: (len(kv[1]), -min(kv[1])))[0]
        odd = sorted(r for v, rs in by_value.items() if v != majority for r in rs)
        groups = "; ".join(f"{key}={v} on ranks {', '.join(map(str, sorted(rs)))}" for v, rs in sorted(by_value.items()))
        yield warning(
            f"{key} differs across ranks: {groups}",
            detail="Communication settings must be the same on every rank, or NCCL/Gloo may pick mismatched "
                   "transports and hang.",
            fix=(f"export {key}={majority}   # in the job script, for every node" if majority != "<unset>"
                 else f"unset {key}   # on {', '.join(f'rank {r}' for r in odd)}"),
            subjects=[key, *rank_subjects(sec, odd)],
            evidence={"variable": key, "values": {v: sorted(rs) for v, rs in by_value.items()}},
        )


@check("COMM006", "comm-interface-missing", family="comm", needs=("comm",), catalogue=("C1",))
def interface_missing(snap):
    """The socket interface Gloo/NCCL was told to use is missing on a rank, or cannot reach the others.

    What it checks
        Whether init_process_group failed because GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME names an
        interface the rank's host lacks: the live error ("Unable to find address for: eth9"); and,
        in a failed run across several hosts, a rank whose variable selects only loopback (`lo`).

    Why it matters
        Every rank fails at init, or, with NCCL, hangs in bootstrap; the variable is usually copied
        from another cluster (NVIDIA/nccl#286, horovod/horovod#310, NVIDIA/nccl-tests#9).

    Example
        GLOO_SOCKET_IFNAME=eth0 on a host whose NIC is ens5.

    Fix
        `ip -brief addr` lists the interfaces; export the one that routes to the other nodes,
        e.g. `export GLOO_SOCKET_IFNAME=ens5 NCCL_SOCKET_IFNAME=ens5`, or unset both.
    """
    sec = comm_section(snap)
    f = failure_of(sec)
    for r, var, iface in loopback_iface_ranks(sec):
        yield error(
            f"{var}={iface} on {rank_where(sec, r)} selects loopback, which the other hosts cannot reach",
            detail=(f"The ranks run on {len(_hosts(sec))} hosts, and {rank_where(sec, r)} told Gloo/NCCL to use "
                    f"'{iface}': it advertises a 127.x address, so peers on other hosts connect to themselves "
                    f"and the job hangs (here: {f.get('kind')} in phase '{f.get('phase')}')."),
            fix=f"ip -brief addr   # on that host; export {var}=<the interface that routes to the other hosts>",
            subjects=[f"iface:{iface}", var, *rank_subjects(sec, [r])],
            evidence={"iface": iface, "variable": var, "phase": f.get("phase"), "error": f.get("message")},
        )
    if f.get("kind") != "interface-missing":
        return
    iface = f.get("iface") or "?"
    r = f.get("rank")
    env = ((sec.get("summaries") or {}).get(str(r)) or {}).get("env") or {}
    var = next((k for k in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME") if iface in str(env.get(k, ""))),
               "GLOO_SOCKET_IFNAME" if sec.get("backend") == "gloo" else "NCCL_SOCKET_IFNAME")
    yield error(
        f"{var} names interface '{iface}', which does not exist on {rank_where(sec, r) if r is not None else 'a rank'}",
        detail=f"init_process_group failed on {rank_where(sec, r) if r is not None else 'a rank'}: {f.get('message')}",
        fix=f"ip -brief addr   # pick the interface that reaches the other nodes, then: export {var}=<that name>",
        subjects=[f"iface:{iface}", var, *(rank_subjects(sec, [r]) if r is not None else [])],
        evidence={"iface": iface, "variable": var, "phase": f.get("phase"), "error": f.get("message")},
    )


def _hosts(sec: dict) -> set:
    return {s.get("host") for s in (sec.get("summaries") or {}).values() if s.get("host")}


def loopback_iface_ranks(sec: dict) -> list:
    """(rank, variable, iface) for ranks of a multi-host run that failed, whose socket interface
    variable selects only loopback. Judged only when the run failed: then it explains the hang."""
    if sec.get("ok") is not False or len(_hosts(sec)) < 2:
        return []
    out = []
    for r, s in sorted((sec.get("summaries") or {}).items(), key=lambda kv: int(kv[0])):
        env = s.get("env") or {}
        for var in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"):
            names = [n.strip().lstrip("=") for n in str(env.get(var) or "").split(",") if n.strip()]
            if names and not str(env.get(var)).startswith("^") and all(n == "lo" or n.startswith("lo")
                                                                      for n in names):
                out.append((int(r), var, ",".join(names)))
    return out


@check("COMM007", "comm-master-unreachable", family="comm", needs=("comm",), catalogue=("C6", "A2"))
def master_unreachable(snap):
    """MASTER_ADDR does not resolve, or MASTER_ADDR:MASTER_PORT cannot be reached from a rank.

    What it checks
        Before torch's TCPStore (which retries silently for its whole timeout), each non-master
        rank resolves MASTER_ADDR and opens a TCP connection to the rendezvous port, and says which
        of the two failed: no such name, refused (nothing listening), or no answer (a firewall).

    Why it matters
        A wrong MASTER_ADDR or a blocked port makes every rank hang in init_process_group until the
        timeout (NVIDIA/nccl#388, NVIDIA/nccl#352); the error, when it comes, only says "timed out".

    Example
        MASTER_ADDR=node-01 when the node is called node01; or the port is firewalled between nodes.

    Fix
        Use an address every node resolves to the master's routable IP (`getent hosts $MASTER_ADDR`
        on each node), and open the port between nodes (or pick one that is open).
    """
    sec = comm_section(snap)
    f = failure_of(sec)
    kind = f.get("kind")
    if kind not in ("master-unresolvable", "master-unreachable", "master-refused"):
        return
    addr, port = f.get("addr") or sec.get("master_addr"), f.get("port") or sec.get("master_port")
    r = f.get("rank")
    what = {"master-unresolvable": f"MASTER_ADDR {addr!r} does not resolve",
            "master-refused": f"nothing accepts connections on {addr}:{port}",
            "master-unreachable": f"{addr}:{port} does not answer"}[kind]
    who = f" from {rank_where(sec, r)}" if r is not None else ""
    yield error(
        f"{what}{who}",
        detail=f"The rendezvous could not start: {f.get('message')}",
        fix=(f"getent hosts {addr}   # on every node; use the master's routable IP instead of a name that fails"
             if kind == "master-unresolvable" else
             f"nc -vz {addr} {port}   # from each node; open the port or choose another --master-port"),
        subjects=["MASTER_ADDR", "MASTER_PORT", *(rank_subjects(sec, [r]) if r is not None else [])],
        evidence={"kind": kind, "addr": addr, "port": port, "error": f.get("error") or f.get("message")},
    )


@check("COMM008", "comm-port-in-use", family="comm", needs=("comm",), catalogue=("A3",))
def port_in_use(snap):
    """The rendezvous port is already taken on the master host.

    What it checks
        Whether the rendezvous store could bind MASTER_PORT, before launching (a bind test) or from
        the launcher's error ("EADDRINUSE"), with the process that holds the port when visible.

    Why it matters
        A second job on the default 29500 or an orphan from the last run makes the new job fail with
        "Address already in use", or worse, join the old job's store (pytorch/pytorch#85604,
        pytorch/pytorch#126510, huggingface/accelerate#74).

    Example
        A crashed run left a rank alive, still listening on 29500.

    Fix
        Kill the orphan (its PID is in the evidence) or choose another port:
        `torchrun --master-port 29501 ...` / `torchrun --standalone ...`.
    """
    sec = comm_section(snap)
    f = failure_of(sec)
    launcher_err = str(sec.get("launcher_error") or "")
    if f.get("kind") != "port-in-use" and "ADDRINUSE" not in launcher_err.upper().replace(" ", ""):
        return
    port = f.get("port") or sec.get("master_port")
    holders = f.get("listeners") or []
    held = "; held by " + ", ".join(f"pid {h.get('pid')} ({(h.get('cmdline') or '?')[:80]})" for h in holders) \
        if holders else ""
    yield error(
        f"MASTER_PORT {port} is already in use on {f.get('addr') or sec.get('master_addr')}{held}",
        detail=f"The rendezvous store could not listen: {f.get('message') or launcher_err}",
        fix=(f"kill {holders[0]['pid']}   # if it is an orphan of an old run; or use --master-port {int(port) + 1}"
             if holders and holders[0].get("pid") else f"torchrun --master-port {int(port or 29500) + 1} ...   "
             "# or --standalone to let torchrun pick a free port"),
        subjects=["MASTER_PORT"],
        evidence={"port": port, "listeners": holders, "error": f.get("message") or launcher_err},
    )


@check("COMM009", "comm-world-size-mismatch", family="comm", needs=("comm",), catalogue=("A4",))
def world_size_mismatch(snap):
    """Ranks disagree on WORLD_SIZE, a RANK is out of range, or two processes claim one RANK.

    What it checks
        The WORLD_SIZE each rank announced at the rendezvous, its RANK against it, and duplicate
        RANK claims (counted in the store).

    Why it matters
        The rendezvous waits for ranks that will never come, or two processes fight over one slot:
        init hangs until the 30-minute timeout (pytorch/pytorch#52848,
        dptech-corp/deepmd-pytorch#45).

    Example
        One node launched with `--nproc-per-node 4`, the other with 8, and WORLD_SIZE set by hand.

    Fix
        Let the launcher compute them: `torchrun --nnodes N --nproc-per-node M` everywhere; if set by
        hand, RANK = NODE_RANK * LOCAL_WORLD_SIZE + LOCAL_RANK and WORLD_SIZE = N * M on every node.
    """
    sec = comm_section(snap)
    f = failure_of(sec)
    kind = f.get("kind")
    if kind == "world-size-mismatch":
        claims = {int(r): int(w) for r, w in (f.get("claims") or {}).items()}
        counts: Dict[int, int] = {}
        for w in claims.values():
            counts[w] = counts.get(w, 0) + 1
        majority = max(counts, key=lambda w: (counts[w], w == claims.get(0)))
        odd = sorted(r for r, w in claims.items() if w != majority)
        yield error(
            "ranks disagree on WORLD_SIZE: " + ", ".join(f"rank {r} says {w}" for r, w in sorted(claims.items())),
            detail=(f"Most ranks expect WORLD_SIZE={majority}; "
                    + ", ".join(f"{rank_where(sec, r)} expects {claims[r]}" for r in odd)
                    + ". The rendezvous would wait forever for ranks that do not exist."),
            fix=(f"torchrun --nnodes N --nproc-per-node M train.py   # the same on every node, N*M = {majority}\n"
                 f"# or, ranks set by hand: export WORLD_SIZE={majority}   # on every rank"),
            subjects=["WORLD_SIZE", *rank_subjects(sec, odd)],
            evidence={"claims": claims, "majority": majority},
        )
    elif kind in ("rank-out-of-range", "duplicate-rank"):
        ranks = f.get("ranks") or ([f.get("rank")] if f.get("rank") is not None else [])
        yield error(
            f.get("message") or kind,
            detail="The rendezvous cannot fill WORLD_SIZE distinct slots 0..WORLD_SIZE-1, so it would hang.",
            fix="torchrun --nnodes N --nproc-per-node M ...   # lets torchrun assign RANK and WORLD_SIZE",
            subjects=["RANK", "WORLD_SIZE", *rank_subjects(sec, [r for r in ranks if r is not None])],
            evidence={"kind": kind, "message": f.get("message")},
        )


@check("COMM010", "comm-allreduce-wrong", family="comm", needs=("comm",))
def allreduce_wrong(snap):
    """An all_reduce returned wrong values on some rank.

    What it checks
        Every rank sums `(arange(65536) % 1024) + rank` with all_reduce and compares the result with the
        closed form; a rank with any element off is named, with the first bad element.

    Why it matters
        Silent corruption (a faulty GPU or NIC, a broken NCCL/driver combination, P2P through a
        misconfigured PCIe switch) trains garbage without an error (NVIDIA/nccl#2079,
        NVIDIA/nccl-tests#117).

    Example
        NCCL P2P over a PCIe switch with ACS enabled returns stale data on one GPU.

    Fix
        Rerun with `NCCL_P2P_DISABLE=1`; if the error goes away, fix P2P (ACS/IOMMU); if it stays,
        drain the node and run the vendor's diagnostics (`dcgmi diag -r 3`).
    """
    sec = comm_section(snap)
    ar = sec.get("all_reduce") or {}
    bad = ar.get("bad_ranks") or []
    if not bad:
        return
    per = ar.get("per_rank") or {}
    first = per.get(str(bad[0])) or {}
    yield error(
        f"all_reduce returned wrong values on rank{'s' if len(bad) > 1 else ''} {', '.join(map(str, bad))}",
        detail=(f"{first.get('bad_elements')} of {first.get('elements')} elements wrong on {rank_where(sec, bad[0])}; "
                f"element {first.get('first_bad_index')} is {first.get('got')}, expected {first.get('expected')}."),
        fix="NCCL_P2P_DISABLE=1 ddpdoctor comm   # if that fixes it, fix P2P (ACS/IOMMU); else drain the node",
        subjects=rank_subjects(sec, bad),
        evidence={"bad_ranks": bad, "per_rank": {r: per.get(str(r)) for r in bad}},
    )


@check("COMM011", "comm-slow-pair", family="comm", needs=("comm",), catalogue=("B2", "C1"))
def slow_pair(snap):
    """One pair of ranks is far slower than the others in the send/recv matrix.

    What it checks
        The ping-pong bandwidth of every pair of ranks; a pair below a quarter of the median of
        the pairs is named (needs at least three pairs).

    Why it matters
        A ring or tree all_reduce runs at the speed of its slowest link: one bad cable, a NIC at
        a lower speed or a pair routed through the CPU slows the whole job (NVIDIA/nccl#2079,
        Azure/azhpc-diagnostics#73).

    Example
        Ranks 2 and 3 talk through the host bridge while the others use NVLink.

    Fix
        Check that pair's path (`nvidia-smi topo -m`, `ethtool <iface>` for its link speed) and
        reseat or replace the slow link; exclude the node until then.
    """
    sec = comm_section(snap)
    pairs = [p for p in sec.get("pairs") or [] if p.get("gbps")]
    if len(pairs) < 3:
        return
    med = statistics.median(p["gbps"] for p in pairs)
    for p in pairs:
        if p["gbps"] < 0.25 * med:
            yield warning(
                f"ranks {p['src']} and {p['dst']} exchange data at {p['gbps']:.2f} GB/s, "
                f"{med / p['gbps']:.0f}x slower than the median pair ({med:.2f} GB/s)",
                detail=f"Ping-pong of {p.get('bytes')} bytes between {rank_where(sec, p['src'])} and "
                       f"{rank_where(sec, p['dst'])}.",
                fix="nvidia-smi topo -m; ethtool <iface>   # on those hosts: find the slow link and reseat/replace it",
                subjects=rank_subjects(sec, [p["src"], p["dst"]]),
                evidence={"pair": [p["src"], p["dst"]], "gbps": p["gbps"], "median_gbps": med},
            )


def _transport(snap) -> Optional[str]:
    gpus = snap.get("gpus") or {}
    pairs = [p for p in gpus.get("pairs") or [] if isinstance(p, dict)]
    if not pairs:
        return None
    if all((p.get("p2p") or {}).get("nvlink") == "OK" for p in pairs):
        return "nvlink"
    if all((p.get("p2p") or {}).get("read") == "OK" for p in pairs):
        return "pcie-p2p"
    return "shm"


@check("COMM012", "comm-busbw-low", family="comm", needs=("comm",), catalogue=("B1", "B2", "B3", "C7"))
def busbw_low(snap):
    """All-reduce bus bandwidth between the GPUs is far below what their topology promises.

    What it checks
        The peak busbw of the sweep (nccl-tests' definition) against a conservative floor for the
        transport the GPU facts show between these GPUs: NVLink, PCIe P2P, or shared memory.
        GPU runs on one host only.

    Why it matters
        A disabled P2P path (NCCL_P2P_DISABLE left set, ACS on a PCIe switch, a down NVLink) halves
        training throughput without any error (NVIDIA/nccl#2079, NVIDIA/nccl#2329,
        Azure/azhpc-diagnostics#73).

    Example
        Eight NVLink GPUs reach 9 GB/s busbw because NCCL_P2P_DISABLE=1 sits in the image.

    Fix
        `unset NCCL_P2P_DISABLE NCCL_SHM_DISABLE`, check `nvidia-smi nvlink -s` and
        `nvidia-smi topo -p2p r`, then rerun `ddpdoctor comm`; `NCCL_DEBUG=INFO` shows the
        transport NCCL picked.
    """
    sec = comm_section(snap)
    if sec.get("backend") != "nccl" or sec.get("mode") != "local":
        return
    transport = sec.get("expected_transport") or _transport(snap)
    bw = [row.get("busbw_gbps") or 0 for row in sec.get("bandwidth") or []]
    if not transport or not bw:
        return
    floor = BUSBW_FLOOR_GBPS.get(transport)
    peak = max(bw)
    if floor and peak < 0.5 * floor:
        yield warning(
            f"peak all_reduce busbw {peak:.1f} GB/s is far below {floor:.0f} GB/s expected over {transport}",
            detail=(f"The GPU facts show {transport} between these GPUs; healthy hardware gives at least "
                    f"{floor:.0f} GB/s busbw on large messages. Something forces a slower path."),
            fix="unset NCCL_P2P_DISABLE NCCL_SHM_DISABLE; NCCL_DEBUG=INFO ddpdoctor comm   # see the transport used",
            subjects=[f"gpu:{i}" for i in range(sec.get("world_size") or 0)],
            evidence={"peak_busbw_gbps": peak, "transport": transport, "floor_gbps": floor},
        )


@check("COMM013", "comm-test-failed", family="comm", needs=("comm",))
def test_failed(snap):
    """The connectivity test failed for a reason no more specific check names.

    What it checks
        That a failed run is never reported as silence: any failure not explained by COMM001-COMM012
        is shown with its phase and raw error.

    Why it matters
        A failed rendezvous or collective always means the real job will fail or hang the same way.

    Example
        Gloo raises an error this version of ddpdoctor does not recognise.

    Fix
        Read the error; rerun with `NCCL_DEBUG=INFO TORCH_DISTRIBUTED_DEBUG=DETAIL` for more detail,
        and report it to ddpdoctor if the cause is not clear.
    """
    sec = comm_section(snap)
    if sec.get("ok") or sec.get("ok") is None:
        return
    f = failure_of(sec)
    rc = sec.get("root_cause") or {}
    kinds = {f.get("kind"), rc.get("kind")} - {None}
    if kinds & EXPLAINED_KINDS or (sec.get("all_reduce") or {}).get("bad_ranks") \
            or "ADDRINUSE" in str(sec.get("launcher_error") or "").upper().replace(" ", ""):
        return
    if peers_in(sec, "never-joined", "behind", "not-responding") or loopback_iface_ranks(sec):
        return
    if f.get("kind") == "deadline" and _all_still_starting(sec):
        yield _startup_too_slow(sec, f)
        return
    msg = f.get("message") or rc.get("message") or sec.get("launcher_error") or \
        ("interrupted" if sec.get("interrupted") else "no rank reported a result")
    yield error(
        f"the connectivity test failed in phase '{f.get('phase') or rc.get('phase') or '?'}': {str(msg)[:200]}",
        detail=f"Failure kind {f.get('kind') or rc.get('kind') or 'unknown'}. "
               + (f"Launcher log: {sec.get('launcher_log_tail')}" if sec.get("launcher_log_tail") else ""),
        fix=f"NCCL_DEBUG=INFO TORCH_DISTRIBUTED_DEBUG=DETAIL {_rerun(sec)} -v",
        subjects=rank_subjects(sec, [f["rank"]]) if f.get("rank") is not None else [],
        evidence={"failure": f, "root_cause": rc, "launcher_error": sec.get("launcher_error")},
    )


def _all_still_starting(sec: dict) -> bool:
    """Every rank the launcher knows of was still in start-up (importing torch) when time ran out."""
    ranks = sec.get("ranks") or []
    return bool(ranks) and all((r.get("phase") or "startup") == "startup" for r in ranks)


def _startup_too_slow(sec: dict, f: dict):
    deadline = sec.get("deadline_s")
    wider = max(60, int(2 * float(deadline or 30)))
    return error(
        f"no rank got past start-up within the {deadline} s deadline: nothing was tested",
        detail=("Every rank was still starting (importing torch, before the rendezvous) when the deadline ran "
                "out, so the test says nothing about the network. On an overloaded machine, or with torch on a "
                "slow shared filesystem, start-up alone can take longer than the deadline. "
                f"Rank 0's last word: {str(f.get('message') or '')[:200]}"),
        fix=f"{_rerun(sec)} --deadline {wider}   # and check the load: uptime; time python -c 'import torch'",
        subjects=[f"rank:{r.get('rank')}" for r in sec.get("ranks") or [] if r.get("rank") is not None],
        evidence={"failure": f, "deadline_s": deadline,
                  "phases": {str(r.get("rank")): r.get("phase") for r in sec.get("ranks") or []}},
    )


@check("COMM014", "comm-teardown-abort", family="comm", needs=("comm",))
def teardown_abort(snap):
    """A rank aborted or hung while exiting, after it had reported its result.

    What it checks
        The launcher's teardown: every rank reported, then one died by a signal (SIGABRT
        "terminate called without an active exception") or did not exit in time.

    Why it matters
        It is not a communication failure, and the test's verdict stands; but the same exit-time
        abort in a training job turns a finished run into a failed one in the scheduler. This is
        Gloo's known teardown race (pytorch/pytorch#190489).

    Example
        Rank 0 of a Gloo job exits with SIGABRT after the last collective, in ~3 of 10 runs.

    Fix
        End training scripts with `dist.barrier(); dist.destroy_process_group()` guarded by a
        timeout, or exit with `os._exit(0)` after the final checkpoint is flushed.
    """
    sec = comm_section(snap)
    if sec.get("teardown") not in ("aborted-after-report", "hung-after-report"):
        return
    yield info(
        "a rank " + ("aborted" if sec["teardown"] == "aborted-after-report" else "hung") +
        " at exit after reporting (Gloo teardown, pytorch/pytorch#190489); the verdict stands",
        detail="Every rank wrote its result before the exit-time problem, so the test itself passed.",
        fix="dist.barrier(); dist.destroy_process_group()   # at the end of training, under a timeout",
        subjects=rank_subjects(sec, [r["rank"] for r in sec.get("ranks") or [] if r.get("signal")]),
        evidence={"teardown": sec["teardown"],
                  "signals": {r["rank"]: r.get("signal") for r in sec.get("ranks") or [] if r.get("signal")}},
    )


@check("COMM090", "comm-healthy", family="comm", needs=("comm",))
def healthy(snap):
    """The ranks can talk: the summary of a passing connectivity test.

    What it checks
        That every phase passed on every rank, and reports the peak bandwidth measured.

    Why it matters
        A passing test rules out the launcher, the network path and the backend as the cause of a
        hang or a slowdown, so the search can move to the training code.

    Example
        `ddpdoctor comm --cpu --nproc 2` on a healthy machine.

    Fix
        Nothing to fix.
    """
    sec = comm_section(snap)
    if not sec.get("ok"):
        return
    bw = sec.get("bandwidth") or []
    best = max(bw, key=lambda r: r.get("busbw_gbps") or 0) if bw else None
    hosts = sorted({s.get("host") for s in (sec.get("summaries") or {}).values() if s.get("host")})
    peak = (f"; peak busbw {best['busbw_gbps']:.2f} GB/s (algbw {best['algbw_gbps']:.2f}) at "
            f"{human(best['bytes'])}") if best and best.get("busbw_gbps") else ""
    yield info(
        f"{sec.get('world_size')} rank{'' if sec.get('world_size') == 1 else 's'} on {len(hosts) or 1} host(s) talk over {sec.get('backend')}: "
        f"all phases passed, all_reduce correct{peak}",
        detail=f"Finished in {sec.get('elapsed_s') or 0:.1f} s of a {sec.get('deadline_s')} s deadline.",
        fix="Nothing to fix.",
        subjects=[f"host:{h}" for h in hosts],
        evidence={"peak": best, "elapsed_s": sec.get("elapsed_s")},
    )
