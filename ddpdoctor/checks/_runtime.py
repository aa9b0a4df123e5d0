"""Helpers shared by the runtime checks (runtime_*.py): one way to read rank, world and local
figures from the runtime sections, preferring what the live process saw over what env implies."""
from __future__ import annotations

from typing import Optional

from ddpdoctor.checks._util import FALSY, env_int, env_of

LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1", "0.0.0.0"}


def rt(snap) -> dict:
    return snap.get("runtime") or {}


def section(snap, name: str) -> dict:
    """A runtime section, or {} when absent/unavailable (for optional enrichment only)."""
    s = snap.get(name) or {}
    return {} if s.get("unavailable") or s.get("error") else s


def trainer_args(snap) -> dict:
    return section(snap, "runtime_trainer").get("args") or {}


def world_size(snap) -> int:
    d = rt(snap).get("distributed") or {}
    if d.get("initialized") and d.get("world_size"):
        return int(d["world_size"])
    launcher = snap.get("launcher") or {}
    if launcher.get("world_size"):
        return int(launcher["world_size"])
    return env_int(env_of(snap), "WORLD_SIZE") or 1


def my_rank(snap) -> Optional[int]:
    d = rt(snap).get("distributed") or {}
    if d.get("initialized") and d.get("rank") is not None:
        return int(d["rank"])
    launcher = snap.get("launcher") or {}
    if launcher.get("rank") is not None:
        return int(launcher["rank"])
    return env_int(env_of(snap), "RANK")


def rank_subject(snap) -> list:
    r = my_rank(snap)
    return [f"rank:{r}"] if r is not None else []


def local_ranks(snap) -> tuple:
    """(number of ranks on this host, how we know). LOCAL_WORLD_SIZE when a launcher set it; else
    the ranks that reported this host to rank 0; else every rank, when MASTER_ADDR is this host."""
    launcher = snap.get("launcher") or {}
    if launcher.get("local_world_size"):
        return int(launcher["local_world_size"]), "LOCAL_WORLD_SIZE"
    peers = section(snap, "runtime_peers")
    host = rt(snap).get("host")
    if peers.get("ranks") and host:
        n = sum(1 for f in peers["ranks"].values() if f.get("host") == host)
        if n:
            return n, f"{n} ranks reported host {host}"
    world = world_size(snap)
    addr = (env_of(snap).get("MASTER_ADDR") or "").strip().lower()
    if world > 1 and (addr in LOCAL_HOSTS or (host and addr == host.lower())):
        return world, f"MASTER_ADDR={addr} is this host, so all {world} ranks run here"
    return 1, "assumed (no launcher figure)"


def usable_cpus(snap) -> Optional[int]:
    host = snap.get("host") or {}
    return host.get("usable_cpus") or rt(snap).get("usable_cpus")


def workers(snap) -> tuple:
    """(num_workers, start method or None) of the training DataLoader, from runtime_data."""
    data = section(snap, "runtime_data")
    n = int(data.get("num_workers") or 0)
    return n, (data.get("start_method") if n > 0 else None)


def forked_workers(snap) -> bool:
    n, method = workers(snap)
    return n > 0 and method == "fork"


def spawned_workers(snap) -> bool:
    n, method = workers(snap)
    return n > 0 and method in ("spawn", "forkserver")


def at_fork(snap) -> bool:
    return section(snap, "runtime_data").get("source") == "fork"


def tokenizers_parallelism_off(value: Optional[str]) -> bool:
    return value is not None and value.strip().lower() in FALSY


def fork_phrase(snap) -> str:
    data = section(snap, "runtime_data")
    if data.get("source") == "fork":
        return f"this process is forking now ({data.get('fork_caller', 'os.fork')})"
    n, _ = workers(snap)
    return f"the DataLoader will fork {n} worker process{'es' if n != 1 else ''}"
