"""Literal snapshots for tests, in the style of pip's test factories: a healthy machine by default,
with each test overriding only the facts it is about."""
from __future__ import annotations

import copy
import json
import os
from typing import Callable, Optional

from ddpdoctor.gather.launcher import launcher_from_env
from ddpdoctor.model.redact import redact_env_value
from ddpdoctor.pipeline.runner import load_all, run_checks
from ddpdoctor.pipeline.snapshot import Snapshot

GiB = 1024 ** 3

HEALTHY_HOST = {
    "hostname": "node0", "os": "Linux", "kernel": "6.1.0", "platform": "Linux-6.1.0-x86_64", "python": "3.11.7",
    "python_executable": "/usr/bin/python3", "cpu_count": 16, "affinity": list(range(16)), "affinity_count": 16,
    "cgroup": {"version": 2, "quota_cpus": None}, "usable_cpus": 16,
    "memory": {"total_bytes": 64 * GiB, "available_bytes": 60 * GiB},
    "shm": {"path": "/dev/shm", "exists": True, "size_bytes": 32 * GiB, "free_bytes": 32 * GiB},
    "rlimits": {"RLIMIT_NOFILE": {"soft": 65536, "hard": 65536}, "RLIMIT_MEMLOCK": {"soft": None, "hard": None}},
    "container": None, "loadavg": [0.1, 0.1, 0.1], "default_start_method": "fork",
    "default_sharing_strategy": "file_descriptor",
}

HEALTHY_NETWORK = {
    "hostname": "node0",
    "interfaces": [
        {"name": "lo", "up": True, "mtu": 65536, "speed_mbps": 0,
         "addresses": [{"family": "ipv4", "address": "127.0.0.1"}]},
        {"name": "eth0", "up": True, "mtu": 1500, "speed_mbps": 25000,
         "addresses": [{"family": "ipv4", "address": "10.0.0.5"}]},
        {"name": "ib0", "up": True, "mtu": 2044, "speed_mbps": 100000,
         "addresses": [{"family": "ipv4", "address": "192.168.10.5"}]},
    ],
    "listening_tcp_ports": [22],
}

HEALTHY_PACKAGES = {"versions": {"torch": "2.13.0", "transformers": "5.24.0", "tokenizers": "0.23.3",
                                 "accelerate": "1.15.0", "deepspeed": None, "datasets": None, "h5py": "3.16.0",
                                 "numpy": "2.4.6", "nvidia-ml-py": "13.615.71", "pynvml": None},
                    "python": "3.11.7"}


def make_snapshot(env: Optional[dict] = None, host: Optional[dict] = None, network: Optional[dict] = None,
                  packages: Optional[dict] = None, cmdline: Optional[list] = None, nccl_conf: Optional[list] = None,
                  nccl_files: Optional[list] = None, **sections) -> Snapshot:
    """A snapshot of a healthy 16-core Linux node; keyword dicts are merged over the defaults."""
    env = dict(env or {})
    h = copy.deepcopy(HEALTHY_HOST)
    h.update(host or {})
    n = copy.deepcopy(HEALTHY_NETWORK)
    n.update(network or {})
    if "MASTER_ADDR" in env and "master_addr" not in (network or {}):
        n["master_addr"] = {"host": env["MASTER_ADDR"], "addresses": ["10.0.0.1"]}
    p = copy.deepcopy(HEALTHY_PACKAGES)
    if packages:  # versions; a dict value is a packages fact of its own (torch_build, deepspeed_build)
        p["versions"].update({k: v for k, v in packages.items() if not isinstance(v, (dict, list))})
        p.update({k: v for k, v in packages.items() if isinstance(v, (dict, list))})  # list: conda_cuda (check17b)
    data = {
        "host": h,
        "env": {"vars": {k: redact_env_value(k, v) for k, v in env.items()}, "redacted": [],
                **({"nccl_conf": nccl_conf} if nccl_conf else {}), **({"nccl_files": nccl_files} if nccl_files else {})},
        "packages": p,
        "launcher": launcher_from_env(env, cmdline),
        "network": n,
    }
    data.update(sections)
    return Snapshot(sections=data)


def findings_of(snapshot: Snapshot, check_id: Optional[str] = None) -> list:
    """Findings of one check (or all) over a snapshot."""
    load_all(plugins=False)
    found, _skipped, _ran = run_checks(snapshot, only={check_id} if check_id else None)
    return [f for f in found if check_id is None or f.id == check_id]


def ids(findings) -> set:
    return {f.id for f in findings}


SNAPSHOTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "snapshots")


def fixture_snapshot(name: str, env: Optional[dict] = None, edit: Optional[Callable[[dict], None]] = None,
                     keep: Optional[int] = None, **sections) -> Snapshot:
    """A recorded machine from fixtures/snapshots, changed the way a test needs: `keep` only its first N GPUs
    (and the links between them), `env` variables added (the launcher section re-derived from them, as
    gather does), `section__key=value` set, then `edit(sections)` for anything else."""
    with open(os.path.join(SNAPSHOTS, f"{name}.json"), encoding="utf-8") as fh:
        doc = json.load(fh)
    s = doc["sections"]
    if keep:
        s["gpus"]["devices"] = s["gpus"]["devices"][:keep]
        s["gpus"]["pairs"] = [p for p in s["gpus"].get("pairs") or [] if p["a"] < keep and p["b"] < keep]
        s["gpus"]["count"] = keep
    if env:
        s["env"]["vars"].update(env)
        s["launcher"] = launcher_from_env(s["env"]["vars"])
    for path, value in sections.items():
        sec, _, key = path.partition("__")
        s[sec][key] = value
    if edit:
        edit(s)
    return Snapshot.from_dict(copy.deepcopy(doc))
