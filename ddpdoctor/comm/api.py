"""The library behind `ddpdoctor comm` (and the comm part of `ddpdoctor check`). No torch here.

    section = run_local(nproc=2, backend="gloo", sizes="1K:1M", deadline_s=20)
    report = report_for_section(section)
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from typing import Mapping, Optional

from ddpdoctor.comm import metrics
from ddpdoctor.comm.section import preflight_failure, section_from_launch, section_from_rank0

DEFAULT_DEADLINE_S = 60.0
CHECK_DEADLINE_S = 30.0


def run_local(nproc: int = 2, backend: str = "gloo", sizes: str = "1K:256M", deadline_s: float = DEFAULT_DEADLINE_S,
              phase_timeout_s: Optional[float] = None, master_addr: str = "127.0.0.1",
              master_port: Optional[int] = None, pairs: bool = True, sweep: bool = True, pair_size: str = "1M",
              env: Optional[Mapping[str, str]] = None, rank_env: Optional[Mapping[int, Mapping[str, str]]] = None,
              teardown_s: float = 2.0) -> dict:
    """Launch `nproc` local ranks of the comm worker through torch's elastic agent; return the section."""
    from ddpdoctor.launch import LaunchSpec, launch, port_is_free

    size_list = metrics.parse_sizes(sizes) if sweep else []
    # Checks that need no launch: a rendezvous address that does not resolve, a port already taken.
    try:
        socket.getaddrinfo(master_addr, None)
    except OSError as exc:
        return preflight_failure("master-unresolvable", f"MASTER_ADDR {master_addr!r} does not resolve: {exc}",
                                 backend=backend, nproc=nproc, deadline_s=deadline_s, addr=master_addr)
    if master_port is not None and not port_is_free(master_port, _bind_addr(master_addr)):
        return preflight_failure("port-in-use", f"MASTER_PORT {master_port} on {master_addr} is already in use",
                                 backend=backend, nproc=nproc, deadline_s=deadline_s, port=master_port,
                                 addr=master_addr, listeners=_listeners(master_port))
    phase_timeout = phase_timeout_s or max(2.0, min(15.0, deadline_s / 4))
    deadline_at = time.time() + deadline_s - 0.5  # workers finish their verdict before the parent's bound
    args = ["--backend", backend, "--sizes", sizes, "--deadline", str(deadline_s), "--deadline-at", f"{deadline_at:.3f}",
            "--phase-timeout", str(phase_timeout), "--pair-size", pair_size, "--quiet"]
    if not pairs:
        args.append("--no-pairs")
    if not sweep:
        args.append("--no-sweep")
    full_env = {"TORCH_CPP_LOG_LEVEL": "ERROR", **dict(env or {})}
    res = launch(LaunchSpec(module="ddpdoctor.comm", args=args, nproc=nproc, deadline_s=deadline_s,
                            teardown_s=teardown_s, env=full_env, rank_env=dict(rank_env or {}),
                            master_addr=master_addr, master_port=master_port))
    return section_from_launch(res, backend=backend, deadline_s=deadline_s, sizes=size_list)


def run_joined(environ: Mapping[str, str], deadline_s: float = CHECK_DEADLINE_S, sizes: str = "1K:16M",
               attach: Optional[list] = None) -> dict:
    """This process is one rank of a user's job (torchrun/srun env): run the worker as a bounded
    child with this env and return its view (rank 0's is the whole job's). `attach`: this rank's
    own findings (dicts), published through the store; rank 0's section then carries every
    rank's under `_attachments` and each section says whether its rank's were `_attached`."""
    from ddpdoctor.comm.envmap import torch_env

    tmpdir = tempfile.mkdtemp(prefix="ddpdoctor-comm-")
    out = os.path.join(tmpdir, "r{rank}.json")  # every rank writes its own view; rank 0's is the job's
    cmd = [sys.executable, "-m", "ddpdoctor.comm", "--deadline", str(deadline_s), "--sizes", sizes, "--quiet",
           "--out", out]
    out = out.replace("{rank}", str(torch_env(environ).get("RANK", "0")))
    if attach is not None:
        import json

        path = os.path.join(tmpdir, "attach.json")
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(attach, fh, default=str)
        cmd += ["--attach", path]
    env = dict(environ)
    env["TORCH_CPP_LOG_LEVEL"] = "ERROR"
    from ddpdoctor import proctree

    tree = proctree.Tree()
    try:
        proc = tree.popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, new_session=True)
        try:
            _, err = proc.communicate(timeout=deadline_s + 5)
        except subprocess.TimeoutExpired:
            return {"unavailable": f"the comm worker did not finish within {deadline_s + 5:.0f} s"}
        finally:  # on every way out (a timeout, Ctrl-C, SIGTERM): the worker and anything it started
            import signal

            tree.stop(grace_s=0.0, first=signal.SIGKILL)
        import json

        try:
            with open(out, encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, ValueError):
            tail = (err or b"").decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
            return {"unavailable": f"the comm worker wrote no result (exit {proc.returncode}): {tail[0][:300]}"}
        sec = section_from_rank0(data, deadline_s=deadline_s, mode="joined")
        if attach is not None:
            sec["_attached"] = bool(data.get("attached"))
            sec["_attachments"] = (data.get("global") or {}).get("attachments") or {}
        return sec
    finally:
        import shutil

        shutil.rmtree(tmpdir, ignore_errors=True)


def comm_section_for_check(snapshot, attach: Optional[list] = None) -> dict:
    """`ddpdoctor check` calls this when GPUs are visible or a launcher says WORLD_SIZE>1."""
    try:
        env = dict(os.environ)
        launcher = snapshot.get("launcher") or {}
        world = launcher.get("world_size") or 0
        from ddpdoctor.comm.envmap import torch_env

        mapped = torch_env(env)  # under srun the rank comes from SLURM_PROCID, as for `python -m ddpdoctor.comm`
        if world > 1 and mapped.get("RANK") not in (None, "") and mapped.get("MASTER_ADDR"):
            return run_joined(env, attach=attach)
        if world > 1 and launcher.get("kind") == "mpi":
            # A private loopback test here would say "the ranks can talk" about ranks that are not these.
            return {"unavailable": "under mpirun the comm test joins the job only when MASTER_ADDR and MASTER_PORT "
                                   "are exported to every rank (mpirun -x MASTER_ADDR=<rank-0 host> -x MASTER_PORT=29500)"}
        gpus = [d for d in ((snapshot.get("gpus") or {}).get("devices") or [])]
        if len(gpus) >= 2:
            return run_local(nproc=len(gpus), backend="nccl", sizes="1K:64M", deadline_s=CHECK_DEADLINE_S)
        if len(gpus) == 1 and world <= 1:
            return {"unavailable": "one GPU and no multi-rank launcher: there is no pair of ranks to test"}
        return run_local(nproc=2, backend="gloo", sizes="1K:16M", deadline_s=CHECK_DEADLINE_S)
    except Exception as exc:  # noqa: BLE001 - a section never raises
        return {"error": f"{type(exc).__name__}: {exc}"}


def report_for_section(section: dict, snapshot=None, only: Optional[set] = None, ignore: Optional[set] = None):
    """Judge a comm section with the comm checks; the section travels in the report's `comm` key."""
    from ddpdoctor.pipeline.judge import judge
    from ddpdoctor.model.redact import redact_tree
    from ddpdoctor.model.registry import REGISTRY
    from ddpdoctor.pipeline.runner import load_all
    from ddpdoctor.pipeline.snapshot import Snapshot

    load_all()
    comm_ids = {s.id for s in REGISTRY.values() if s.family == "comm" and s.kind == "check"}
    only_ids = comm_ids & only if only is not None else comm_ids
    snap = snapshot if snapshot is not None else Snapshot(sections={})
    snap.sections["comm"] = section
    report = judge(snap, "comm", only_ids, ignore)
    report.extra["comm"] = redact_tree(section)
    report.extra["text_sections"] = text_lines(section)
    return report


def text_lines(sec: dict) -> list:
    """The human part: per-phase timings and the bandwidth table."""
    if not isinstance(sec, dict) or sec.get("unavailable") or sec.get("error"):
        return []
    lines = [f"comm: {sec.get('world_size')} rank{'' if sec.get('world_size') == 1 else 's'}, backend {sec.get('backend')}, "
             f"rendezvous {sec.get('master_addr', '?')}:{sec.get('master_port', '?')}, "
             f"{sec.get('elapsed_s') or 0:.1f} s (deadline {sec.get('deadline_s') or 0:.0f} s)"]
    phases = sec.get("phases") or {}
    if phases:
        lines.append(f"  {'phase':20} {'slowest rank':>12} {'seconds':>9}")
        for name, per in phases.items():
            if per:
                r, s = max(per.items(), key=lambda kv: kv[1])
                lines.append(f"  {name:20} {('rank ' + r):>12} {s:9.3f}")
    bw = sec.get("bandwidth") or []
    if bw:
        lines.append(f"  {'size':>10} {'iters':>5} {'time(us)':>11} {'algbw(GB/s)':>12} {'busbw(GB/s)':>12}")
        for row in bw:
            lines.append(f"  {metrics.human(row['bytes']):>10} {row['iters']:>5} {row['time_us']:>11.1f} "
                         f"{(row['algbw_gbps'] or 0):>12.3f} {(row['busbw_gbps'] or 0):>12.3f}")
    pairs = sec.get("pairs") or []
    if pairs:
        lines.append("  send/recv pairs: " + ", ".join(f"{p['src']}<->{p['dst']} {p['gbps']:.2f} GB/s"
                                                        for p in pairs if p.get("gbps") is not None))
    return lines


def _bind_addr(addr: str) -> str:
    from ddpdoctor.launch import is_ip_address

    return addr if is_ip_address(addr) else "0.0.0.0"


def _listeners(port: int) -> list:
    """Who holds the port (pid and name), when we may see it: the evidence for "kill the orphan"."""
    try:
        import psutil

        out = []
        for c in psutil.net_connections(kind="tcp"):
            if c.laddr and c.laddr.port == port and c.status == psutil.CONN_LISTEN:
                name = None
                if c.pid:
                    try:
                        name = " ".join(psutil.Process(c.pid).cmdline())[:200]
                    except psutil.Error:
                        name = None
                out.append({"pid": c.pid, "cmdline": name})
        return out
    except Exception:  # noqa: BLE001
        return []

