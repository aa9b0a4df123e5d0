"""Round 10 (issue 26), classes round 9 left: jobs started by no launcher check knows, and the single- vs multi-host
ambiguity. check says what it cannot tell instead of guessing either way: the rank count on a host when ranks were
set by hand and rank 0 is elsewhere (ENV005, ENV006), a firewall or a 127.0.1.1 hostname when nothing says whether
other machines connect (NET005, NET006). Each class: a trigger that fails on the code before and a quiet case."""
from __future__ import annotations

from factory import findings_of, make_snapshot

ONE_NIC = {"hostname": "head", "interfaces": [
    {"name": "lo", "up": True, "mtu": 65536, "speed_mbps": 0, "addresses": [{"family": "ipv4", "address": "127.0.0.1"}]},
    {"name": "eno1", "up": True, "mtu": 1500, "speed_mbps": 10000,
     "addresses": [{"family": "ipv4", "address": "192.168.1.20"}]}]}
UFW = {"tool": "ufw", "active": True, "default_incoming": "deny", "allowed": ["22/tcp"]}
# Kubeflow's PyTorchJob operator (kubeflow/website#2011's pods): MASTER_ADDR, RANK, WORLD_SIZE, no LOCAL_RANK
OPERATOR = {"MASTER_ADDR": "job-master-0", "MASTER_PORT": "23456", "WORLD_SIZE": "2", "RANK": "1"}
POD_NET = {"hostname": "job-worker-0", "master_addr": {"host": "job-master-0", "addresses": ["10.244.1.17"]},
           "interfaces": [ONE_NIC["interfaces"][0],
                          {"name": "eth0", "up": True, "mtu": 1500, "speed_mbps": 25000,
                           "addresses": [{"family": "ipv4", "address": "10.244.2.9"}]}]}


def _sev(snap, check):
    return [f.severity for f in findings_of(snap, check)]


def test_hand_set_ranks_with_rank0_elsewhere_are_not_all_counted_here():
    # ENV006 took WORLD_SIZE=2 ranks x 16 threads on this pod's 16 cores: one rank per pod runs here
    assert _sev(make_snapshot(env=OPERATOR, network=POD_NET), "ENV006") == []
    # quiet-before / trigger-still: the same hand-set ranks on one host (MASTER_ADDR loopback) are all here
    on_one = dict(OPERATOR, MASTER_ADDR="127.0.0.1")
    assert _sev(make_snapshot(env=on_one, network=POD_NET), "ENV006") == ["warning"]


def test_env005_names_what_it_cannot_tell_for_an_unknown_launcher():
    found = findings_of(make_snapshot(env=OPERATOR, network=POD_NET), "ENV005")
    assert [f.severity for f in found] == ["info"] and "cannot tell how many ranks" in found[0].title
    # spawned by multiprocessing: several ranks on this host for sure, the warning stays
    spawned = make_snapshot(env=OPERATOR, network=POD_NET,
                            cmdline=["python", "-c", "from multiprocessing.spawn import spawn_main"])
    assert _sev(spawned, "ENV005") == ["warning"]


def test_firewall_with_no_launcher_is_a_note_naming_the_ambiguity():
    # exo-explore/exo#465's class: a job no launcher describes, ufw default deny
    found = findings_of(make_snapshot(network=dict(ONE_NIC, firewall=UFW)), "NET005")
    assert [f.severity for f in found] == ["info"] and "cannot tell" in found[0].title
    # quiet: torchrun says all 4 ranks are on this host
    single = {"TORCHELASTIC_RUN_ID": "a", "RANK": "0", "WORLD_SIZE": "4", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "4",
              "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    assert findings_of(make_snapshot(env=single, network=dict(ONE_NIC, firewall=UFW)), "NET005") == []


def test_firewall_under_hand_set_ranks_published_here_is_a_worded_guess():
    env = {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "192.168.1.20", "MASTER_PORT": "29500"}
    net = dict(ONE_NIC, firewall=UFW, master_addr={"host": "192.168.1.20", "addresses": ["192.168.1.20"]})
    found = findings_of(make_snapshot(env=env, network=net), "NET005")
    assert [f.severity for f in found] == ["warning"] and "if other ranks run on other hosts" in found[0].title


def test_loopback_hostname_with_no_launcher_is_a_note_naming_the_ambiguity():
    # tmills/uhhmm#51's class: Debian's `127.0.1.1 <hostname>` and a server other machines must reach
    net = dict(ONE_NIC, own_hostname={"host": "head", "addresses": ["127.0.1.1"]})
    found = findings_of(make_snapshot(network=net), "NET006")
    assert [f.severity for f in found] == ["info"] and "cannot tell" in found[0].title
    # quiet: a torchrun job on this host alone
    single = {"TORCHELASTIC_RUN_ID": "a", "RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2",
              "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    assert findings_of(make_snapshot(env=single, network=net), "NET006") == []
    # quiet: the name resolves to this host's routable address
    ok = dict(ONE_NIC, own_hostname={"host": "head", "addresses": ["192.168.1.20"]})
    assert findings_of(make_snapshot(network=ok), "NET006") == []


# ------------------------------------------------------------ NET007: EFA devices and no net plugin (batch 52)

TWO_NODES = {"TORCHELASTIC_RUN_ID": "j", "RANK": "8", "WORLD_SIZE": "16", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "8",
             "GROUP_RANK": "1", "GROUP_WORLD_SIZE": "2", "MASTER_ADDR": "10.1.0.10", "MASTER_PORT": "29500",
             "LD_LIBRARY_PATH": "/usr/local/cuda/compat/lib:/usr/local/nvidia/lib64"}


def _pci(**kw):
    base = {"rdma_devices": ["rdmap16s27", "rdmap32s27"], "net_plugins": []}
    base.update(kw)
    return base


def test_efa_without_the_ofi_plugin_is_a_warning():
    """NVIDIA-NeMo/RL#1973, aws/aws-parallelcluster#6942 (batch 52): NCCL's IB transport skips EFA's ports
    (src/transport/net_ib/init.cc), so without libnccl-net.so on LD_LIBRARY_PATH the job runs over sockets."""
    for pci in (_pci(), _pci(rdma_drivers={"rdmap16s27": "efa", "rdmap32s27": "efa"}),
                _pci(rdma_devices=["efa0"], rdma_ports={"efa0:1": {"link_layer": "Unknown", "state": "4: ACTIVE"}})):
        found = findings_of(make_snapshot(env=TWO_NODES, pci=pci), "NET007")
        assert [f.severity for f in found] == ["warning"] and "LD_LIBRARY_PATH" in found[0].subjects, pci


def test_efa_quiet_with_the_plugin_on_one_host_or_with_mellanox_devices():
    assert findings_of(make_snapshot(env=TWO_NODES, pci=_pci(net_plugins=["/opt/amazon/ofi-nccl/lib/libnccl-net.so"])),
                       "NET007") == []
    one = dict(TWO_NODES, WORLD_SIZE="8", GROUP_WORLD_SIZE="1", RANK="0", GROUP_RANK="0", MASTER_ADDR="127.0.0.1")
    assert findings_of(make_snapshot(env=one, pci=_pci()), "NET007") == []
    mlx = _pci(rdma_devices=["mlx5_0"], rdma_drivers={"mlx5_0": "mlx5_core"},
               rdma_ports={"mlx5_0:1": {"link_layer": "InfiniBand", "state": "4: ACTIVE"}})
    assert findings_of(make_snapshot(env=TWO_NODES, pci=mlx), "NET007") == []
    assert findings_of(make_snapshot(env=dict(TWO_NODES, NCCL_NET="Socket"), pci=_pci()), "NET007") == []
