"""Round 10 wave 2 (issue 26), classes of batch 54: an Istio sidecar intercepting the ranks' connections (NET005), an
NCCL_SOCKET_IFNAME exclusion list judged on a snapshot that did not record the interfaces' kernel order (NET001).
Each class: a trigger that fails on the code before and a quiet case."""
from __future__ import annotations

from factory import findings_of, make_snapshot

LO = {"name": "lo", "up": True, "mtu": 65536, "speed_mbps": 0, "addresses": [{"family": "ipv4", "address": "127.0.0.1"}]}
POD = {"hostname": "trainer-worker-0", "interfaces": [
    LO, {"name": "eth0", "up": True, "mtu": 1450, "speed_mbps": 10000, "addresses": [{"family": "ipv4", "address": "10.244.2.31"}]}]}
ENVOY = [15000, 15001, 15004, 15006, 15020, 15021, 15090]
TORCHRUN_2 = {"TORCHELASTIC_RUN_ID": "none", "RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2",
              "GROUP_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
MPI_2_HOSTS = {"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_LOCAL_RANK": "0",
               "OMPI_COMM_WORLD_LOCAL_SIZE": "1"}


def _sev(snap, check):
    return [f.severity for f in findings_of(snap, check)]


def _pod(env, ports, **net):
    return make_snapshot(env=env, host={"container": "kubernetes"},
                         network=dict(POD, listening_tcp_ports=ports, **net))


def test_istio_sidecar_in_a_pod_of_several_ranks_is_a_warning():
    # kubeflow/kubeflow#5143: 2 GPUs in one notebook pod; NVIDIA/nccl#1638: mpirun across two pods
    for env in (TORCHRUN_2, MPI_2_HOSTS):
        found = findings_of(_pod(env, ENVOY), "NET005")
        assert [f.severity for f in found] == ["warning"] and "Istio sidecar" in found[0].title
        assert "sidecar:istio" in found[0].subjects


def test_istio_sidecar_quiet_for_one_process_loopback_or_other_listeners():
    assert _sev(_pod({}, ENVOY), "NET005") == []                                    # no job of several ranks
    looped = dict(TORCHRUN_2, NCCL_SOCKET_IFNAME="lo", GLOO_SOCKET_IFNAME="lo")     # the reporter's one-pod workaround
    assert _sev(_pod(looped, ENVOY), "NET005") == []
    assert _sev(_pod(dict(MPI_2_HOSTS, NCCL_SOCKET_IFNAME="lo"), ENVOY), "NET005") == ["warning"]  # not across pods
    assert _sev(_pod(TORCHRUN_2, [15090, 8888]), "NET005") == []                    # no capture listener: no sidecar


def test_exclusion_list_puts_loopback_first_when_the_order_was_not_recorded():
    # horovod/horovod#700: /etc/nccl.conf NCCL_SOCKET_IFNAME=^docker0 with NCCL >= 2.3.5 on Kubernetes; the
    # kernel registers lo first (ifindex 1), so an unrecorded order must not sort eth0 ahead of it by name
    conf = [{"path": "/etc/nccl.conf", "vars": {"NCCL_SOCKET_IFNAME": "^docker0"}}]
    found = findings_of(make_snapshot(env=MPI_2_HOSTS, nccl_conf=conf, network=POD), "NET001")
    assert [f.severity for f in found] == ["warning"] and "bootstrap over lo" in found[0].title
    # quiet: one host (loopback reaches every rank), and a recorded order that puts the NIC first
    assert _sev(make_snapshot(env=TORCHRUN_2, nccl_conf=conf, network=POD), "NET001") == []
    ordered = dict(POD, interfaces=[dict(POD["interfaces"][1], order=1), dict(LO, order=2)])
    assert _sev(make_snapshot(env=MPI_2_HOSTS, nccl_conf=conf, network=ordered), "NET001") == []


# UQ-RCC/hpc-docs#2: the short node names resolve to the admin network, the nodes train over ib0 (10.141.0.0/16)
SLURM_NODE2 = {"SLURM_JOB_ID": "88211", "SLURM_JOB_NUM_NODES": "2", "SLURM_NNODES": "2", "SLURM_NTASKS": "2",
               "SLURM_PROCID": "1", "SLURM_NODEID": "1", "SLURM_LOCALID": "0", "SLURM_STEP_ID": "0",
               "MASTER_ADDR": "bun003", "MASTER_PORT": "9901"}
IB_NODE = {"hostname": "bun004", "interfaces": [
    dict(LO, addresses=[{"family": "ipv4", "address": "127.0.0.1", "netmask": "255.0.0.0"}]),
    {"name": "ib0", "up": True, "mtu": 2044, "speed_mbps": 200000,
     "addresses": [{"family": "ipv4", "address": "10.141.2.4", "netmask": "255.255.0.0"}]}],
    "master_addr": {"host": "bun003", "addresses": ["172.30.1.3"]}}


def test_node_names_resolving_to_another_network_are_a_net002_warning():
    snap = make_snapshot(env=SLURM_NODE2, network=dict(IB_NODE, own_hostname={"host": "bun004", "addresses": ["172.30.1.4"]}))
    found = [f for f in findings_of(snap, "NET002") if "another network" in f.title]
    assert [f.severity for f in found] == ["warning"] and "10.141.0.0/16" in found[0].title


def test_node_names_on_another_subnet_of_a_routed_fabric_stay_quiet():
    # a routed fabric: MASTER_ADDR on another subnet, but this host's own name resolves to its own address
    routed = dict(IB_NODE, own_hostname={"host": "bun004", "addresses": ["10.141.2.4"]})
    assert _sev(make_snapshot(env=SLURM_NODE2, network=routed), "NET002") == []
    # one node: nothing crosses hosts
    single = dict(SLURM_NODE2, SLURM_JOB_NUM_NODES="1", SLURM_NNODES="1", SLURM_NTASKS="1", SLURM_PROCID="0",
                  SLURM_NODEID="0")
    off = dict(IB_NODE, own_hostname={"host": "bun004", "addresses": ["172.30.1.4"]})
    assert [f for f in findings_of(make_snapshot(env=single, network=off), "NET002") if "another network" in f.title] == []
    # no netmask recorded: the subnets would be guesses
    nomask = dict(off, interfaces=[IB_NODE["interfaces"][0], dict(IB_NODE["interfaces"][1], addresses=[
        {"family": "ipv4", "address": "10.141.2.4"}])])
    assert [f for f in findings_of(make_snapshot(env=SLURM_NODE2, network=nomask), "NET002") if "another network" in f.title] == []


# NVIDIA/nccl#2079 (batch 55): 2 GPUs of an AMD host, each on its own root port (PHB), ACS redirect on both root ports
ACS_ON = {"acs": {"ctl": {"CmpltRedir": True, "DirectTrans": False, "EgressCtrl": False, "ReqRedir": True,
                          "SrcValid": True, "TransBlk": False, "UpstreamFwd": True}, "ctl_raw": 29, "present": True,
                  "readable": True}}


def _amd_phb_pair(group_type="DMA-FQ", vendor="AuthenticAMD"):
    from factory import fixture_snapshot

    def edit(s):
        s["gpus"]["devices"][0]["pci_bus_id"] = "00000000:41:00.0"
        s["gpus"]["devices"][1]["pci_bus_id"] = "00000000:61:00.0"
        s["gpus"]["pairs"] = [{"a": 0, "b": 1, "p2p": {"nvlink": "NOT_SUPPORTED", "read": "OK", "write": "OK"},
                               "topology": "NVML_TOPOLOGY_HOSTBRIDGE"}]
        s["pci"]["bridges"] = {"0000:40:01.1": ACS_ON, "0000:60:01.1": ACS_ON}
        gpu = dict(s["pci"]["gpus"]["0000:19:00.0"], iommu_group_type=group_type)
        s["pci"]["gpus"] = {"0000:41:00.0": dict(gpu, upstream=["0000:40:01.1"]),
                            "0000:61:00.0": dict(gpu, upstream=["0000:60:01.1"])}
        s["host"]["cpu_vendor"] = vendor
    return fixture_snapshot("pcie-switch-acs-2x-l40s", edit=edit)


def test_acs_redirect_on_root_ports_under_a_translating_iommu_is_gpu003():
    found = findings_of(_amd_phb_pair(), "GPU003")
    assert len(found) == 1 and "0000:40:01.1" in found[0].detail and "0000:60:01.1" in found[0].detail


def test_acs_on_root_ports_quiet_under_passthrough_or_on_intel():
    assert findings_of(_amd_phb_pair(group_type="identity"), "GPU003") == []   # iommu=pt: redirected writes pass
    assert findings_of(_amd_phb_pair(vendor="GenuineIntel"), "GPU003") == []   # NCCL stops P2P at PXB: no P2P here


# left by wave 1: ENV005/ENV006 under mpirun, which starts any program (nccl-tests as often as a torch script)
MPI_8_LOCAL = {"OMPI_COMM_WORLD_SIZE": "8", "OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_LOCAL_RANK": "0",
               "OMPI_COMM_WORLD_LOCAL_SIZE": "8"}


def test_mpirun_findings_say_they_hold_for_a_torch_program():
    f005 = findings_of(make_snapshot(env=MPI_8_LOCAL), "ENV005")
    assert f005 and "torch program" in f005[0].title and "nccl-tests" in f005[0].detail
    f006 = findings_of(make_snapshot(env=MPI_8_LOCAL), "ENV006")
    assert f006 and f006[0].title.endswith("if each rank is a torch (OpenMP) program") and "nccl-tests" in f006[0].detail


def test_torchrun_and_explicit_threads_keep_the_plain_wording():
    # an explicit OMP_NUM_THREADS binds any OpenMP program: no hedge
    over = findings_of(make_snapshot(env=dict(MPI_8_LOCAL, OMP_NUM_THREADS="16")), "ENV006")
    assert over and "torch (OpenMP) program" not in over[0].title
    spawned = findings_of(make_snapshot(env={"RANK": "0", "WORLD_SIZE": "4", "MASTER_ADDR": "127.0.0.1",
                                             "MASTER_PORT": "29500"}), "ENV006")
    assert all("torch (OpenMP) program" not in f.title for f in spawned)


# left by wave 1 (batch 52, NVIDIA/nccl#326): NCCL 2.6.4-2.7.2 crash when containers of one host each see some GPUs
def _subset(nccl="2.7.2", container="docker", keep=4, world="2"):
    from factory import fixture_snapshot

    env = {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": world, "OMPI_COMM_WORLD_LOCAL_RANK": "0",
           "OMPI_COMM_WORLD_LOCAL_SIZE": "1"}

    def edit(s):  # NVML lists `keep` GPUs; the PCI bus (sysfs, seen from the container too) all 8
        s["gpus"]["devices"] = s["gpus"]["devices"][:keep]
        s["gpus"]["count"] = keep
        s["host"]["container"] = container
        s["packages"]["versions"]["nvidia-nccl-cu12"] = nccl
    return [f for f in findings_of(fixture_snapshot("dgx-a100-8x-nvswitch", env=env, edit=edit), "PKG010")
            if "topology detection" in f.title]


def test_old_nccl_in_a_container_seeing_some_gpus_is_the_known_crash():
    found = _subset()
    assert [f.severity for f in found] == ["warning"] and "f36540f5" in found[0].detail


def test_old_nccl_gpu_subset_quiet_cases():
    assert _subset(nccl="2.7.3") == []           # fixed release
    assert _subset(nccl="2.5.6") == []           # before the XML topology code (v2.6.4-1)
    assert _subset(keep=8) == []                 # the container sees every GPU
    assert _subset(container=None) == []         # no container: NVML sees what the host has
    assert _subset(world="1") == []              # one rank: no peer GPU to look up
