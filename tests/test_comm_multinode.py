"""Several "nodes": two torchrun agents with --nnodes 2 running `python -m ddpdoctor.comm`, first on
127.0.0.1, then in two network namespaces joined by a veth pair (two hosts with their own
interfaces and hostnames). The namespaces are created and removed by the test; skipped with the
reason where that is not possible."""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
import uuid

import pytest
from machine import scaled
from procs import marked

from ddpdoctor.comm.api import report_for_section
from ddpdoctor.comm.section import section_from_rank0
from ddpdoctor.launch import free_port, port_is_free

pytestmark = pytest.mark.slow  # every test here launches processes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def agent_cmd(endpoint: str, deadline: float, out_pattern: str) -> list:
    return [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "1",
            "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint, "--rdzv-id", uuid.uuid4().hex[:8],
            "--rdzv-conf", "join_timeout=20", "--max-restarts", "0",
            "-m", "ddpdoctor.comm", "--deadline", str(deadline), "--phase-timeout", str(scaled(4.0)),
            "--sizes", "1K,64K", "--pair-size", "64K", "--out", out_pattern]


def run_two_agents(cmds: list, envs: list, timeout: float) -> tuple:
    mark = uuid.uuid4().hex
    procs = []
    t0 = time.monotonic()
    for cmd, env in zip(cmds, envs):
        procs.append(subprocess.Popen(cmd, env={**env, "DDPDOCTOR_TEST_MARK": mark}, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True, start_new_session=True))
    outs = []
    for p in procs:
        try:
            outs.append(p.communicate(timeout=timeout)[0])
        except subprocess.TimeoutExpired:
            for q in procs:
                os.killpg(q.pid, 9)
            raise
    elapsed = time.monotonic() - t0
    deadline = time.monotonic() + 30
    while marked(mark) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marked(mark) == [], "a process outlived the agents"
    return outs, elapsed


def findings_from(out_dir) -> tuple:
    r0 = json.loads((out_dir / "r0.json").read_text())
    sec = section_from_rank0(r0, deadline_s=20)
    report = report_for_section(sec)
    by_id = {}
    for f in report.findings:
        by_id.setdefault(f.id, []).append(f)
    return sec, by_id


@pytest.mark.timeout(270)
def test_two_nodes_differing_in_one_package_version(tmp_path):
    fake = tmp_path / "fake"
    (fake / "transformers-5.20.0.dist-info").mkdir(parents=True)
    (fake / "transformers-5.20.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: transformers\nVersion: 5.20.0\n")
    port = free_port()
    base = dict(os.environ, PYTHONPATH=ROOT, TORCH_CPP_LOG_LEVEL="ERROR")
    base.pop("DDPDOCTOR_LAUNCH_DIR", None)
    envs = [base, dict(base, PYTHONPATH=os.pathsep.join([str(fake), ROOT]))]
    cmd = agent_cmd(f"127.0.0.1:{port}", scaled(20.0), str(tmp_path / "r{rank}.json"))  # it covers import torch
    outs, _ = run_two_agents([cmd, cmd], envs, timeout=180)
    assert "COMM004" in outs[0]  # rank 0 printed the report
    sec, f = findings_from(tmp_path)
    (hit,) = f["COMM004"]
    assert "pkg:transformers" in hit.subjects and "rank:1" in hit.subjects
    assert "5.20.0" in hit.title and "5.24.0" in hit.title or "5.20.0" in hit.title
    assert sec["ok"] and "COMM090" in f
    assert port_is_free(port)


# ------------------------------------------------------------------ two hosts in network namespaces

def _sh(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=30)


@pytest.fixture
def two_hosts():
    """Namespaces A and B with a veth pair 10.233.N.1 <-> 10.233.N.2; removed afterwards."""
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("unshare"):
        pytest.skip("network namespaces need root, iproute2 and unshare")
    tag = uuid.uuid4().hex[:6]
    a, b = f"ddpd-a-{tag}", f"ddpd-b-{tag}"
    va, vb = f"vda{tag}", f"vdb{tag}"
    net = 100 + int(tag, 16) % 100
    ip_a, ip_b = f"10.233.{net}.1", f"10.233.{net}.2"
    steps = [("ip", "netns", "add", a), ("ip", "netns", "add", b),
             ("ip", "link", "add", va, "type", "veth", "peer", "name", vb),
             ("ip", "link", "set", va, "netns", a), ("ip", "link", "set", vb, "netns", b),
             ("ip", "-n", a, "addr", "add", f"{ip_a}/24", "dev", va), ("ip", "-n", b, "addr", "add", f"{ip_b}/24", "dev", vb),
             ("ip", "-n", a, "link", "set", va, "up"), ("ip", "-n", b, "link", "set", vb, "up"),
             ("ip", "-n", a, "link", "set", "lo", "up"), ("ip", "-n", b, "link", "set", "lo", "up")]
    hosts_a, hosts_b = f"hosta{tag}", f"hostb{tag}"
    created_etc_netns = not os.path.isdir("/etc/netns")
    try:
        # `ip netns exec NS` bind-mounts /etc/netns/NS/hosts over /etc/hosts: each "host" resolves
        # both names, as on a real cluster (torch's c10d rendezvous resolves its own hostname).
        for ns in (a, b):
            os.makedirs(f"/etc/netns/{ns}", exist_ok=True)
            with open(f"/etc/netns/{ns}/hosts", "w") as fh:
                fh.write(f"127.0.0.1 localhost\n{ip_a} {hosts_a}\n{ip_b} {hosts_b}\n")
        for step in steps:
            r = _sh(*step)
            if r.returncode != 0:
                pytest.skip(f"cannot build network namespaces here: {' '.join(step)}: {r.stderr.strip()}")
        yield {"a": (a, va, ip_a, hosts_a), "b": (b, vb, ip_b, hosts_b)}
    finally:
        _sh("ip", "netns", "del", a)
        _sh("ip", "netns", "del", b)
        _sh("ip", "link", "del", va)
        for ns in (a, b):
            shutil.rmtree(f"/etc/netns/{ns}", ignore_errors=True)
        if created_etc_netns:
            with contextlib.suppress(OSError):
                os.rmdir("/etc/netns")


def in_host(ns: str, hostname: str, cmd: list) -> list:
    """Run cmd in namespace ns with its own UTS namespace, so the node has its own hostname."""
    script = f"hostname {hostname} && exec " + " ".join(f"'{c}'" for c in cmd)
    return ["ip", "netns", "exec", ns, "unshare", "--uts", "sh", "-c", script]


def run_hosts(two_hosts, tmp_path, ifname_b=None, deadline=None):
    """Each worker's deadline covers its own `import torch`: 12 s on an idle machine, stretched with the measured
    slowness (tests/machine.py); a run that finds its fault ends before it."""
    deadline = scaled(12.0) if deadline is None else deadline
    a, va, ip_a, host_a = two_hosts["a"]
    b, vb, ip_b, host_b = two_hosts["b"]
    port = 29400 + int(uuid.uuid4().hex[:3], 16) % 500
    base = dict(os.environ, PYTHONPATH=ROOT, TORCH_CPP_LOG_LEVEL="ERROR")
    base.pop("DDPDOCTOR_LAUNCH_DIR", None)
    cmd = agent_cmd(f"{ip_a}:{port}", deadline, str(tmp_path / "r{rank}.json"))
    env_a = dict(base, GLOO_SOCKET_IFNAME=va)
    env_b = dict(base, GLOO_SOCKET_IFNAME=ifname_b or vb)
    outs, elapsed = run_two_agents([in_host(a, host_a, cmd), in_host(b, host_b, cmd)], [env_a, env_b], timeout=180)
    return outs, elapsed, host_a, host_b


@pytest.mark.timeout(270)
def test_two_hosts_healthy(two_hosts, tmp_path):
    outs, _, host_a, host_b = run_hosts(two_hosts, tmp_path)
    sec, f = findings_from(tmp_path)
    assert sec["ok"], outs
    (ok,) = f["COMM090"]
    assert set(ok.subjects) == {f"host:{host_a}", f"host:{host_b}"}
    assert "COMM005" in f  # GLOO_SOCKET_IFNAME differs (vdaX vs vdbX): reported, as a warning only


@pytest.mark.timeout(270)
def test_two_hosts_wrong_interface_on_one(two_hosts, tmp_path):
    deadline = scaled(12.0)
    outs, elapsed, host_a, host_b = run_hosts(two_hosts, tmp_path, ifname_b="eth0", deadline=deadline)
    sec, f = findings_from(tmp_path)
    (hit,) = f["COMM006"]
    assert "iface:eth0" in hit.subjects and f"host:{host_b}" in hit.subjects and "rank:1" in hit.subjects
    # the worker's own bound, plus torchrun's start-up (two agents importing torch: 8 s allowed on an idle machine,
    # stretched with the measured slowness; two imports took 15.8 s at load 5.8, round 17)
    assert elapsed < deadline + 2 + scaled(8.0)


def srun_rank(two_hosts, host_key: str, rank: int, tmp_path, extra_env=None, deadline=None) -> list:
    deadline = scaled(12.0) if deadline is None else deadline  # it covers the worker's `import torch`
    ns, iface, _ip, hostname = two_hosts[host_key]
    env = dict(os.environ, PYTHONPATH=ROOT, TORCH_CPP_LOG_LEVEL="ERROR", GLOO_SOCKET_IFNAME=iface,
               SLURM_PROCID=str(rank), SLURM_NTASKS="2", SLURM_LOCALID="0", SLURM_NODEID=str(rank),
               SLURM_NTASKS_PER_NODE="1", SLURM_JOB_NODELIST=two_hosts["a"][3], SLURM_JOB_ID="4242")
    for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK", "DDPDOCTOR_LAUNCH_DIR",
              "TORCHELASTIC_RUN_ID"):
        env.pop(k, None)
    env.update(extra_env or {})
    cmd = [sys.executable, "-m", "ddpdoctor.comm", "--deadline", str(deadline), "--phase-timeout", str(scaled(4.0)),
           "--sizes", "1K", "--pair-size", "64K", "--quiet", "--out", str(tmp_path / "r{rank}.json")]
    return [in_host(ns, hostname, cmd), env]


@pytest.mark.timeout(270)
def test_srun_two_hosts_maps_slurm_variables(two_hosts, tmp_path):
    """Like `srun -N2 python -m ddpdoctor.comm`: no torchrun; SLURM_* give rank, world and master."""
    a = srun_rank(two_hosts, "a", 0, tmp_path)
    b = srun_rank(two_hosts, "b", 1, tmp_path)
    run_two_agents([a[0], b[0]], [a[1], b[1]], timeout=180)
    sec, f = findings_from(tmp_path)
    assert sec["ok"] and sec["master_addr"] == two_hosts["a"][3] and sec["master_port"] == 29500 + 4242 % 1000
    assert set(f["COMM090"][0].subjects) == {f"host:{two_hosts['a'][3]}", f"host:{two_hosts['b'][3]}"}


@pytest.mark.timeout(180)
def test_master_addr_unreachable_from_the_other_host(two_hosts, tmp_path):
    """MASTER_ADDR is an address on the link where no host answers: the rank names it in time."""
    ns, _iface, ip_b, hostname = two_hosts["b"]
    nobody = ip_b.rsplit(".", 1)[0] + ".77"
    deadline = scaled(20.0)  # the reachability probe and `import torch` both fit, stretched with the slowness
    cmd, env = srun_rank(two_hosts, "b", 1, tmp_path, {"MASTER_ADDR": nobody, "MASTER_PORT": "29511"},
                         deadline=deadline)
    t0 = time.monotonic()
    subprocess.run(cmd, env=env, timeout=120, capture_output=True)
    assert time.monotonic() - t0 < deadline + 2 + scaled(3.0)  # + interpreter start-up, stretched as the deadline
    res = json.loads((tmp_path / "r1.json").read_text())
    assert res["failure"]["kind"] == "master-unreachable", res["failure"]
    sec = section_from_rank0(res, deadline_s=deadline)
    report = report_for_section(sec)
    (hit,) = [x for x in report.findings if x.id == "COMM007"]
    assert "MASTER_ADDR" in hit.subjects and f"host:{hostname}" in hit.subjects and nobody in hit.title
