"""check34 (issue 26, round 25, second cycle): classes from primary sources, each with a trigger and a quiet fixture.
Pure: snapshots are built by the factory over recorded facts; no process is started."""
from __future__ import annotations

from factory import findings_of, make_snapshot

# -- NET003 arm: NCCL's bootstrap takes ONE interface, the first of its default order (NVIDIA/nccl src/bootstrap.cc
# bootstrapNetInit -> ncclFindInterfaces(..., 1, ...) @5067397c; data/nccl_bootstrap.json), and publishes that
# interface's own address; the troubleshooting guide: UP interfaces that cannot reach the other nodes -> init fails
# or hangs --


def _iface(name, addr, mask="255.255.255.0", order=None):
    i = {"name": name, "up": True, "mtu": 1500, "speed_mbps": 25000,
         "addresses": [{"family": "ipv4", "address": addr, "netmask": mask}]}
    if order is not None:
        i["order"] = order
    return i


LO = {"name": "lo", "up": True, "mtu": 65536, "speed_mbps": 0, "addresses": [{"family": "ipv4", "address": "127.0.0.1"}]}
TORCHRUN = {"TORCHELASTIC_RUN_ID": "j", "RANK": "0", "WORLD_SIZE": "8", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "4",
            "GROUP_RANK": "0", "GROUP_WORLD_SIZE": "2", "MASTER_PORT": "29500"}


def _boot(ifaces, master, resolved=None, **env):
    e = dict(TORCHRUN, MASTER_ADDR=master, **env)
    net = {"interfaces": [LO] + ifaces, "master_addr": {"host": master, "addresses": [resolved or master]}}
    return findings_of(make_snapshot(env=e, network=net), "NET003")


def test_first_nic_outside_the_rendezvous_network_is_a_warning_naming_the_rendezvous_nic():
    # the kernel lists enp4s0 first; the rendezvous (this host, rank 0) is on enp65s0f0
    [f] = _boot([_iface("enp4s0", "192.168.1.20", order=2), _iface("enp65s0f0", "10.10.0.5", order=3)], "10.10.0.5")
    assert f.severity == "warning"
    assert "bootstrap over enp4s0" in f.title and "enp65s0f0" in f.title
    assert f.fix.startswith("export NCCL_SOCKET_IFNAME==enp65s0f0")
    assert "not able to communicate between" in f.detail  # NCCL's guide, from the data file
    # a remote rendezvous host: the NIC in its subnet is the one to name
    [g] = _boot([_iface("enp4s0", "192.168.1.20", order=2), _iface("enp65s0f0", "10.10.0.6", order=3)], "10.10.0.5")
    assert "enp65s0f0" in g.fix and g.severity == "warning"


def test_first_nic_in_the_rendezvous_network_or_socket_ifname_set_is_quiet():
    assert _boot([_iface("enp65s0f0", "10.10.0.5", order=2), _iface("enp4s0", "192.168.1.20", order=3)],
                 "10.10.0.5") == []
    assert _boot([_iface("enp4s0", "192.168.1.20", order=2), _iface("enp65s0f0", "10.10.0.5", order=3)],
                 "10.10.0.5", NCCL_SOCKET_IFNAME="enp65s0f0") == []
    # NCCL_COMM_ID: NCCL takes the interface in that address' subnet itself
    assert _boot([_iface("enp4s0", "192.168.1.20", order=2), _iface("enp65s0f0", "10.10.0.5", order=3)],
                 "10.10.0.5", NCCL_COMM_ID="10.10.0.5:29600") == []


def test_ipoib_first_is_quiet_unless_nccl_is_kept_off_the_fabric():
    ifaces = [_iface("eth0", "10.1.0.11", order=2), _iface("ib0", "192.168.100.11", order=3)]
    assert _boot(ifaces, "10.1.0.11") == []  # NCCL's designed preference: IPoIB on the job's fabric
    [g] = _boot(ifaces, "10.1.0.11", NCCL_IB_DISABLE="1")
    assert g.severity == "warning" and "bootstrap over ib0" in g.title and "NCCL_SOCKET_IFNAME==eth0" in g.fix
    assert "off the IB fabric" in g.detail
    [h] = _boot(ifaces, "10.1.0.11", NCCL_NET="Socket")
    assert h.severity == "warning"


def test_public_rendezvous_with_only_a_private_address_here_is_nat():
    [f] = _boot([_iface("ens5", "172.31.40.46", mask="255.255.240.0", order=2)], "54.201.10.20")
    assert f.severity == "warning" and "public" in f.title and "private" in f.title and "NAT" in f.title
    assert f.evidence["nat"] is True


def test_private_routed_rendezvous_or_public_address_here_is_not_nat():
    assert _boot([_iface("ens5", "172.31.40.46", mask="255.255.240.0", order=2)], "10.20.0.5") == []
    assert _boot([_iface("ens5", "54.201.10.21", mask="255.255.255.0", order=2)], "54.201.11.20") == []


def test_bootstrap_facts_come_from_the_data_file_with_their_sources():
    from ddpdoctor.facts.net import nccl_bootstrap

    data = nccl_bootstrap()
    assert data["bootstrap_interfaces"] == 1 and data["prefer_prefix"] == "ib"
    assert {s["path"] for s in data["sources"]} >= {"src/bootstrap.cc", "src/misc/socket.cc"}
    assert all(s["repo"] == "NVIDIA/nccl" and len(s["commit"]) == 40 for s in data["sources"])


# -- NET007 arm: HPE Slingshot (CXI NICs, or hsn<N> interfaces) with no NCCL net plugin: NCCL's built-in nets are IB
# verbs and sockets only (NVIDIA/nccl src/plugin/net.cc @5067397c); HPE's note: NCCL_NET='AWS Libfabric' prevents
# "an undesirable fallback to sockets" (data/cxi_settings.json without_plugin) --

SLURM2 = {"SLURM_JOB_ID": "9", "SLURM_NNODES": "2", "SLURM_JOB_NUM_NODES": "2", "SLURM_NTASKS": "8",
          "SLURM_PROCID": "0", "RANK": "0", "WORLD_SIZE": "8", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "4",
          "MASTER_ADDR": "nid001000", "MASTER_PORT": "29500"}


def _slingshot(plugins=(), cxi=(), hsn=True, **env):
    ifaces = [LO, _iface("nmn0", "10.100.0.10", order=2)]
    if hsn:
        ifaces += [_iface(f"hsn{n}", f"10.249.0.{10 + n}", order=3 + n) for n in range(2)]
    pci = {"rdma_devices": [], "net_plugins": list(plugins), "cxi_devices": list(cxi)}
    snap = make_snapshot(env=dict(SLURM2, **env), network={"interfaces": ifaces}, pci=pci)
    return findings_of(snap, "NET007")


def test_slingshot_without_a_net_plugin_is_a_warning_naming_sockets_and_the_plugin():
    [f] = _slingshot()
    assert f.severity == "warning" and "Slingshot" in f.title and "socket" in f.title and "plugin" in f.title
    assert "NCCL_NET='AWS Libfabric'" in f.fix
    [g] = _slingshot(cxi=["cxi0", "cxi1"], hsn=False)  # known by the cxi driver's class
    assert g.severity == "warning" and "cxi0" in g.title


def test_slingshot_with_a_plugin_or_sockets_asked_for_or_plain_ethernet_is_not_this_warning():
    assert _slingshot(plugins=["/opt/aws-ofi-nccl/lib/libnccl-net.so"]) == []
    assert [f.severity for f in _slingshot(NCCL_NET="Socket")] == ["info"]
    assert [f.severity for f in _slingshot(hsn=False)] == ["info"]  # Ethernet only: NET007's note


# -- PKG010 entry: NCCL 2.30.5 with the external SPCX net plugin (NVIDIA-NeMo/Megatron-Bridge docs/releases/
# known-issues.md @19f7b148, 26.08 known issue; data/known_defects.json needs_net_plugin) --

def _spcx(nccl="2.30.5", plugins=("/usr/lib/x86_64-linux-gnu/libnccl-net-spcx.so",), **env):
    e = dict(TORCHRUN, MASTER_ADDR="10.0.0.1", **env)
    snap = make_snapshot(env=e, packages={"torch": "2.9.0", "nvidia-nccl-cu12": nccl},
                         pci={"rdma_devices": ["mlx5_0"], "net_plugins": list(plugins)})
    return [f for f in findings_of(snap, "PKG010") if f.evidence.get("defect") == "nccl-2.30.5-spcx-plugin-alltoall-corruption"]


def test_nccl_2_30_5_with_the_spcx_plugin_is_a_known_defect_with_the_vendor_workaround():
    [f] = _spcx()
    assert f.severity == "warning" and f.title.startswith("NCCL 2.30.5 has a known defect")
    assert f.env_fix == {"NCCL_NET_PLUGIN": "none", "NCCL_NET": "IB"} and "NCCL_NET_PLUGIN" in f.subjects
    [g] = _spcx(plugins=(), NCCL_NET_PLUGIN="spcx")  # named by NCCL_NET_PLUGIN: libnccl-net-spcx.so
    assert g.severity == "warning"


def test_other_release_other_plugin_or_plugin_off_is_quiet():
    assert _spcx(nccl="2.29.7") == []
    assert _spcx(plugins=("/opt/amazon/ofi-nccl/lib/libnccl-net.so",)) == []
    assert _spcx(plugins=()) == []
    assert _spcx(NCCL_NET_PLUGIN="none") == []
    assert _spcx(NCCL_NET_PLUGIN="none", NCCL_NET="IB") == []
