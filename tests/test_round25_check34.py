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


# -- ENV007 arm: the training program itself in the batch step of an N-task allocation, with no srun above it:
# sbatch runs a single copy of the batch script (SchedMD/slurm doc/man/man1/sbatch.1 @284c3b95;
# data/slurm_env.json batch_script) --

BATCH = {"SLURM_JOB_ID": "77", "SLURM_NTASKS": "8", "SLURM_NNODES": "2", "SLURM_JOB_NUM_NODES": "2",
         "SLURM_NTASKS_PER_NODE": "4", "SLURM_JOB_NAME": "train", "SLURM_NODEID": "0"}


def _batch(cmdline, **env):
    from ddpdoctor.facts.launch import parse_command, parse_program
    from ddpdoctor.pipeline.snapshot import Snapshot

    doc = make_snapshot(env=dict(BATCH, **env), cmdline=cmdline).to_dict()
    cmd = parse_command(cmdline) or parse_program(cmdline) if cmdline else None
    doc["sections"]["launch"] = {"commands": [dict(cmd, depth=1)] if cmd else [], "depth_read": 1 if cmd else 0}
    return [f for f in findings_of(Snapshot.from_dict(doc), "ENV007") if "srun" in f.title]


def test_python_program_in_the_batch_step_of_a_multi_task_allocation_is_a_warning():
    [f] = _batch(["python", "train.py", "--epochs", "3"])
    assert f.severity == "warning" and "runs once" in f.title and "train.py" in f.title
    assert "single copy of the batch script" in f.detail and f.fix.startswith("srun python train.py")


def test_under_srun_or_nothing_recorded_or_one_task_is_not_this_warning():
    assert _batch(["srun", "python", "train.py"], SLURM_STEP_ID="0", SLURM_PROCID="0") == []
    assert [f.severity for f in _batch([])] == ["info"]  # the batch script itself: `ddpdoctor check` before srun
    assert _batch(["python", "train.py"], SLURM_NTASKS="1", SLURM_NTASKS_PER_NODE="1", SLURM_NNODES="1",
                  SLURM_JOB_NUM_NODES="1") == []


def test_sbatch_single_copy_is_recorded_with_its_source():
    import json
    import pathlib

    data = json.loads((pathlib.Path(__file__).resolve().parents[1] / "ddpdoctor" / "data" / "slurm_env.json")
                      .read_text())["batch_script"]
    assert data["sources"][0]["repo"] == "SchedMD/slurm" and len(data["sources"][0]["commit"]) == 40
    assert "single copy of the batch script" in data["sources"][0]["where"]


# -- ENV009 arm: CUDA_VISIBLE_DEVICES as GPU UUIDs (CUDA accepts them) under DeepSpeed's `deepspeed` runner, which
# makes it --include=localhost:<value> and int()s each slot (deepspeedai/DeepSpeed deepspeed/launcher/runner.py
# @edaa7221, since 0.5.7; data/launchers.json deepspeed_visible_devices_include) --

UUIDS = "GPU-5e1b4c2a-9f0d-4a43-8a6e-0d1c2b3a4f50,GPU-7a2c9e11-0b3d-4c5e-9f60-1a2b3c4d5e6f"


def _ds(cmdline, cvd=UUIDS, deepspeed="0.14.4"):
    from ddpdoctor.facts.launch import parse_command
    from ddpdoctor.pipeline.snapshot import Snapshot

    doc = make_snapshot(env={"CUDA_VISIBLE_DEVICES": cvd}, packages={"deepspeed": deepspeed}).to_dict()
    doc["sections"]["launch"] = {"commands": [dict(parse_command(cmdline), depth=1)], "depth_read": 1}
    return [f for f in findings_of(Snapshot.from_dict(doc), "ENV009") if "deepspeed" in f.title]


def test_uuids_under_the_deepspeed_runner_are_an_error():
    [f] = _ds(["deepspeed", "train.py", "--deepspeed", "ds.json"])
    assert f.severity == "error" and "invalid literal for int()" in f.title
    assert "parse_node_config" in f.detail and "nvidia-smi --query-gpu=index,uuid" in f.fix


def test_indices_explicit_filters_or_an_older_deepspeed_are_quiet():
    assert _ds(["deepspeed", "train.py"], cvd="0,1") == []
    assert _ds(["deepspeed", "--num_gpus", "2", "train.py"]) == []
    assert _ds(["deepspeed", "--include", "localhost:0,1", "train.py"]) == []
    assert _ds(["deepspeed", "train.py"], deepspeed="0.5.6") == []
    assert _ds(["torchrun", "--nproc-per-node", "2", "train.py"]) == []  # torch reads UUIDs itself


# -- GPU034 arm: pods of one job on one node, known by a pod network that leases each node its own subnet (flannel:
# a /24 of 10.244.0.0/16: flannel-io/flannel Documentation/configuration.md SubnetLen, kube-flannel.yml Network;
# data/containers.json pod_networks) --

def _pod(master, mine="10.244.1.23", container="kubernetes", mask="255.255.255.0"):
    env = {"MASTER_ADDR": "ddp-master-0", "MASTER_PORT": "23456", "WORLD_SIZE": "8", "RANK": "3"}
    net = {"interfaces": [LO, _iface("eth0", mine, mask=mask)], "master_addr": {"host": "ddp-master-0", "addresses": [master]}}
    gpus = {"count": 1, "devices": [{"index": 0, "name": "NVIDIA A100-SXM4-40GB", "cuda_capability": [8, 0]}]}
    return findings_of(make_snapshot(env=env, host={"container": container}, network=net, gpus=gpus), "GPU034")


def test_master_pod_in_this_nodes_flannel_subnet_is_a_warning():
    [f] = _pod("10.244.1.17")
    assert f.severity == "warning" and "another pod on this node" in f.title and "flannel" in f.title
    assert f.evidence["pod_network"] == ["flannel", "/24 of 10.244.0.0/16"]
    [g] = _pod("10.244.1.17", container="docker", mask="255.255.0.0")  # the /24 lease decides, not the netmask
    assert "another pod on this node" in g.title


def test_master_pod_on_another_node_or_outside_a_per_node_pod_network_is_quiet():
    assert _pod("10.244.2.17") == []  # another node's /24
    assert _pod("192.168.7.9", mine="192.168.7.10", mask="255.255.255.255") == []  # a /32 pod address (Calico)
    assert _pod("10.32.0.9", mine="10.32.0.10", mask="255.240.0.0") == []  # a flat pod network (Weave): any node


# -- facts.net.multi_node: the recorded torchrun / torch.distributed.launch command's --nnodes (the old launcher's
# workers carry no node count in their environment) --

def _old_launch(nnodes):
    from ddpdoctor.facts.launch import parse_command
    from ddpdoctor.facts.net import multi_node
    from ddpdoctor.pipeline.snapshot import Snapshot

    argv = ["python", "-m", "torch.distributed.launch", "--nproc_per_node=2", f"--nnodes={nnodes}", "train.py"]
    doc = make_snapshot(env={"RANK": "0", "WORLD_SIZE": "4", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
                             "MASTER_PORT": "23456"},
                        network={"master_addr": {"host": "127.0.0.1", "addresses": ["127.0.0.1"]}}).to_dict()
    doc["sections"]["launch"] = {"commands": [dict(parse_command(argv), depth=1)], "depth_read": 1}
    return multi_node(Snapshot.from_dict(doc))


def test_the_launch_commands_nnodes_says_the_job_spans_hosts():
    assert _old_launch("2") == "2 nodes (--nnodes 2)"
    assert _old_launch("2:4") == "2 nodes (--nnodes 2:4)"


def test_one_node_or_an_elastic_range_from_one_does_not():
    assert _old_launch("1") is None
    assert _old_launch("1:4") is None
