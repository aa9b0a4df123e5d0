"""Batch 16's classes (issue 26): a container memory limit (SYS004), MASTER_ADDR on another host counting as a
second host (NET003), several torchrun agents on one host (GPU016) and loopback under agent counts (NET002)."""
import os

from factory import findings_of, make_snapshot
from factory import fixture_snapshot as fixture

from ddpdoctor.gather import Sources
from ddpdoctor.gather.host import cgroup_memory_limit
from ddpdoctor.pipeline.snapshot import Snapshot

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GiB = 1024 ** 3


# ------------------------------------------------------------------ SYS004: the cgroup memory limit
def test_cgroup_memory_limit_v2_v1_and_none(tmp_path):
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/self/cgroup").write_text("0::/job\n")
    (tmp_path / "sys/fs/cgroup/job").mkdir(parents=True)
    (tmp_path / "sys/fs/cgroup/job/memory.max").write_text(f"{16 * GiB}\n")
    assert cgroup_memory_limit(Sources(root=str(tmp_path), environ={})) == 16 * GiB
    (tmp_path / "sys/fs/cgroup/job/memory.max").write_text("max\n")
    assert cgroup_memory_limit(Sources(root=str(tmp_path), environ={})) is None
    v1 = tmp_path / "v1"
    (v1 / "sys/fs/cgroup/memory").mkdir(parents=True)
    (v1 / "sys/fs/cgroup/memory/memory.limit_in_bytes").write_text("9223372036854771712\n")  # v1's "no limit"
    assert cgroup_memory_limit(Sources(root=str(v1), environ={})) is None
    (v1 / "sys/fs/cgroup/memory/memory.limit_in_bytes").write_text(f"{8 * GiB}\n")
    assert cgroup_memory_limit(Sources(root=str(v1), environ={})) == 8 * GiB


def _limit(limit, shm=64 * GiB):
    def edit(s):
        s["host"]["container"] = "docker"
        s["host"]["cgroup"]["memory_max_bytes"] = limit
        s["host"]["shm"] = {"path": "/dev/shm", "exists": True, "size_bytes": shm, "free_bytes": shm}
    return edit


EIGHT = {"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "3", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}


def test_sys004_a_container_limit_small_for_eight_ranks():
    # researchmm/Stark#7: 8 ranks in a docker container with a memory limit, workers killed at random
    [f] = findings_of(fixture("dgx-a100-8x-nvswitch", env=EIGHT, edit=_limit(16 * GiB)), "SYS004")
    assert f.severity == "warning" and "16.0 GiB for 8 local rank(s)" in f.title
    assert "guess" in f.detail and "/dev/shm (64.0 GiB) is larger" in f.detail and "docker run -m" in f.fix


def test_sys004_quiet_without_a_limit_with_room_or_above_host_memory():
    assert not findings_of(fixture("dgx-a100-8x-nvswitch", env=EIGHT, edit=_limit(None)), "SYS004")
    assert not findings_of(fixture("dgx-a100-8x-nvswitch", env=EIGHT, edit=_limit(64 * GiB)), "SYS004")
    assert not findings_of(fixture("dgx-a100-8x-nvswitch", env=EIGHT, edit=_limit(2 ** 50)), "SYS004")


# ------------------------------------------------------------------ NET003: MASTER_ADDR on another host
BRIDGE = [{"name": "lo", "up": True, "mtu": 65536, "speed_mbps": 0,
           "addresses": [{"family": "ipv4", "address": "127.0.0.1"}]},
          {"name": "eth0", "up": True, "mtu": 1500, "speed_mbps": 10000,
           "addresses": [{"family": "ipv4", "address": "172.17.0.2"}]}]
HAND_SET = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "192.168.1.10", "MASTER_PORT": "1234"}


def _net(master, ifaces=BRIDGE):
    snap = make_snapshot(env=HAND_SET, host={"container": "docker"})
    doc = snap.to_dict()
    doc["sections"]["network"]["interfaces"] = ifaces
    doc["sections"]["network"]["master_addr"] = {"host": HAND_SET["MASTER_ADDR"], "addresses": [master]}
    return Snapshot.from_dict(doc)


def test_net003_hand_set_ranks_with_master_on_another_host_on_a_docker_bridge():
    # deepinsight/insightface#1444: each machine's container on docker's bridge, rank 0's store on another host
    found = findings_of(_net("192.168.1.10"), "NET003")
    assert found and found[0].severity == "warning", [f.title for f in findings_of(_net("192.168.1.10"))]


def test_net003_quiet_when_master_is_this_host_or_reachable():
    assert not findings_of(_net("172.17.0.2"), "NET003")  # MASTER_ADDR is this container: one host
    lan = [BRIDGE[0], {**BRIDGE[1], "addresses": [{"family": "ipv4", "address": "192.168.1.11"}]}]
    assert not findings_of(_net("192.168.1.10", lan), "NET003")  # --network=host: the LAN interface


# ------------------------------------------------------------------ GPU016 / NET002: two agents on one host
AGENT1 = {"TORCHELASTIC_RUN_ID": "ddp-2x2", "RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1",
          "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "1", "MASTER_ADDR": "localhost", "MASTER_PORT": "29500"}


def _loop(s):
    s["network"]["master_addr"] = {"host": "localhost", "addresses": ["127.0.0.1"]}


def test_gpu016_second_agent_on_the_host_of_rank_0_shares_its_gpus():
    # meta-pytorch/torchx#377: `-j 2x2` on one 4-GPU host, both agents on GPUs 0 and 1
    snap = fixture("dgx-a100-8x-nvswitch", env=AGENT1, edit=_loop, keep=4)
    [f] = findings_of(snap, "GPU016")
    assert f.severity == "warning" and "launch agent 1" in f.title and "CUDA_VISIBLE_DEVICES" in f.fix
    [n] = findings_of(snap, "NET002")
    assert n.severity == "warning" and "launch agents, not hosts" in n.detail  # loopback may be right here


def agents(snap):
    return [f for f in findings_of(snap, "GPU016") if "launch agent" in f.title]


def test_gpu016_quiet_with_own_gpus_a_remote_master_or_agent_0():
    assert agents(fixture("dgx-a100-8x-nvswitch", env=AGENT1, edit=_loop, keep=4))  # the trigger, as above
    assert not agents(fixture("dgx-a100-8x-nvswitch", env=dict(AGENT1, CUDA_VISIBLE_DEVICES="2,3"), edit=_loop,
                              keep=4))
    assert not agents(fixture("dgx-a100-8x-nvswitch", env=dict(AGENT1, MASTER_ADDR="10.0.0.1"), keep=4))
    assert not agents(fixture("dgx-a100-8x-nvswitch", env=dict(AGENT1, GROUP_RANK="0", RANK="1"), edit=_loop, keep=4))


def test_net002_loopback_across_slurm_nodes_stays_an_error():
    env = dict(AGENT1, SLURM_JOB_NUM_NODES="2", SLURM_NNODES="2")
    found = findings_of(fixture("dgx-a100-8x-nvswitch", env=env, edit=_loop, keep=4), "NET002")
    assert found and found[0].severity == "error"
    assert not agents(fixture("dgx-a100-8x-nvswitch", env=env, edit=_loop, keep=4))  # Slurm counts hosts
