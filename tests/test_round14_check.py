"""Round 14 (issue 26): classes the stop-39 note left and the batches 67/68 showed, each with a trigger and quiet cases."""
from __future__ import annotations

import copy

from factory import findings_of, fixture_snapshot, make_snapshot

# ------------------------------------------------ NET018: DeepSpeed's runner takes `hostname -I`'s first address
# deepspeedai/DeepSpeed#5136 (batch 66): the runner took 192.168.121.122 (eth0, listed first) instead of the
# 192.168.10.161 the other node shares; runner.py keeps `ssh <first host> hostname -I`.split()[0].
MULTI_HOMED = {"hostname": "node1", "interfaces": [
    {"name": "lo", "up": True, "order": 0, "addresses": [{"family": "ipv4", "address": "127.0.0.1"}]},
    {"name": "eth0", "up": True, "order": 1,
     "addresses": [{"family": "ipv4", "address": "192.168.121.122", "netmask": "255.255.255.0"}]},
    {"name": "eth1", "up": True, "order": 2,
     "addresses": [{"family": "ipv4", "address": "192.168.10.161", "netmask": "255.255.255.0"},
                   {"family": "ipv6", "address": "fe80::1"}]},
]}


def _ds(hosts, env=None, network=MULTI_HOMED, deepspeed="0.13.1"):
    snap = make_snapshot(env=env or {}, network=copy.deepcopy(network),
                         packages={"deepspeed": deepspeed} if deepspeed else None,
                         host={"deepspeed_hostfile": {"path": "/job/hostfile", "hosts": hosts, "errors": []}})
    return [(f.severity, f.title) for f in findings_of(snap, "NET018")]


def test_hostname_i_order_is_getifaddrs_order():
    from ddpdoctor.facts.net import hostname_i

    ifaces = copy.deepcopy(MULTI_HOMED["interfaces"])
    ifaces.append({"name": "docker0", "up": False, "order": 3, "addresses": [{"family": "ipv4", "address": "172.17.0.1"}]})
    ifaces.append({"name": "eth2", "up": True, "order": 4, "addresses": [{"family": "ipv6", "address": "2001:db8::5"}]})
    # loopback, a down interface and IPv6 link-local are left out; IPv4 before IPv6
    assert hostname_i(ifaces) == [("192.168.121.122", "eth0"), ("192.168.10.161", "eth1"), ("2001:db8::5", "eth2")]


def test_deepspeed_first_address_on_another_network_than_the_hostfile_hosts():
    got = _ds({"192.168.10.161": 8, "192.168.10.162": 8})
    assert [s for s, _ in got] == ["warning"]
    assert "192.168.121.122 (eth0" in got[0][1] and "eth1's network" in got[0][1]


def test_deepspeed_first_address_not_the_master_addr_set_here():
    got = _ds({"node1": 8, "node2": 8}, env={"MASTER_ADDR": "192.168.10.161"})
    assert [s for s, _ in got] == ["warning"] and "MASTER_ADDR here is 192.168.10.161" in got[0][1]


def test_deepspeed_first_address_on_a_virtual_interface():
    net = copy.deepcopy(MULTI_HOMED)
    net["interfaces"][1]["name"] = "virbr0"
    got = _ds({"node1": 8, "node2": 8}, network=net)
    assert [s for s, _ in got] == ["warning"] and "virbr0 is a virtual interface" in got[0][1]


def test_deepspeed_first_address_quiet_or_note():
    # the first address is on the hosts' network: quiet
    assert _ds({"192.168.121.122": 8, "192.168.121.123": 8}) == []
    # host names only: a note naming the address it will take
    assert [s for s, _ in _ds({"node1": 8, "node2": 8})] == ["info"]
    # this host is not the first host (its interfaces are not the ones asked), one host (local launch),
    # no deepspeed, one address
    assert _ds({"node2": 8, "node1": 8}) == []
    assert _ds({"node1": 8}) == []
    assert _ds({"node1": 8, "node2": 8}, deepspeed=None) == []
    assert _ds({"node1": 8, "node2": 8}, network={"hostname": "node1", "interfaces": MULTI_HOMED["interfaces"][:2]}) == []


def test_deepspeed_first_address_on_a_recorded_snapshot():
    # hgx-h100-8x as recorded: eth0 10.0.0.5 then ib0 192.168.10.5; a hostfile of IB addresses
    snap = fixture_snapshot("hgx-h100-8x")
    doc = snap.to_dict()
    doc["sections"]["packages"]["versions"]["deepspeed"] = "0.14.0"
    doc["sections"]["host"]["deepspeed_hostfile"] = {"path": "/job/hostfile", "errors": [],
                                                     "hosts": {"dgx-h100-01": 8, "192.168.10.6": 8}}
    from ddpdoctor.pipeline.snapshot import Snapshot

    got = findings_of(Snapshot.from_dict(doc), "NET018")
    assert [f.severity for f in got] == ["warning"] and "10.0.0.5 (eth0" in got[0].title
    doc["sections"]["host"]["deepspeed_hostfile"]["hosts"] = {"dgx-h100-01": 8, "10.0.0.6": 8}
    assert findings_of(Snapshot.from_dict(doc), "NET018") == []


# ------------------------------------------------ one release parser
def test_release_parsers_agree():
    from ddpdoctor.checks.pkg import _version
    from ddpdoctor.facts import gpu_versions, torch_floors

    for text, want in ((" 2.1.0+cu121", (2, 1, 0)), ("2.1.0a0+git", (2, 1, 0)), ("12.4.127 ", (12, 4, 127)),
                       ("1.8", (1, 8)), ("", ()), (None, ())):
        assert _version(text) == gpu_versions.release(text) == want
        assert torch_floors.release(text) == (want + (0,) * (3 - len(want)) if len(want) >= 2 else None)


# ------------------------------------------------ PKG013: the NCCL wheel older than torch's pin
# pytorch/pytorch#119932 (batch 68): torch 2.2.0 with an older NCCL from another package, 'undefined symbol:
# ncclCommRegister' at import.
def test_torch_pins_parsed_with_markers_of_this_machine():
    from ddpdoctor.gather.packages import parse_pins

    req = ['filelock', 'nvidia-nccl-cu12==2.19.3; platform_system == "Linux" and platform_machine == "x86_64"',
           "nvidia-nccl-cu11==2.14.3 ; platform_machine == 'aarch64'", 'nvidia-nccl-cu13>=2.27']
    assert parse_pins(req, "x86_64", "Linux") == {"nvidia-nccl-cu12": "2.19.3"}
    assert parse_pins(req, "aarch64", "Linux") == {"nvidia-nccl-cu11": "2.14.3"}
    assert parse_pins(req, "x86_64", "Windows") == {}
    assert parse_pins(None, "x86_64", "Linux") == {}


def _pkg13(installed, pins=None):
    snap = make_snapshot(packages={"torch": "2.2.0", "nvidia-nccl-cu12": installed,
                                   **({"torch_pins": pins} if pins is not None else {})})
    return [(f.severity, f.title) for f in findings_of(snap, "PKG013")]


def test_nccl_wheel_below_torch_pin():
    got = _pkg13("2.18.1", {"nvidia-nccl-cu12": "2.19.3"})
    assert [s for s, _ in got] == ["warning"] and "2.18.1" in got[0][1] and "2.19.3" in got[0][1]


def test_nccl_wheel_at_or_above_pin_or_no_pin_is_quiet():
    assert _pkg13("2.19.3", {"nvidia-nccl-cu12": "2.19.3"}) == []
    assert _pkg13("2.20.5", {"nvidia-nccl-cu12": "2.19.3"}) == []
    assert _pkg13("2.18.1", {}) == []          # torch pins nothing (conda, source build)
    assert _pkg13("2.18.1") == []              # not gathered
    assert _pkg13(None, {"nvidia-nccl-cu12": "2.19.3"}) == []  # the wheel absent: another check's business


def test_nccl_wheel_below_pin_on_a_recorded_snapshot():
    from ddpdoctor.pipeline.snapshot import Snapshot

    doc = fixture_snapshot("hgx-h100-8x").to_dict()
    doc["sections"]["packages"]["versions"].update({"torch": "2.2.0", "nvidia-nccl-cu12": "2.18.1"})
    doc["sections"]["packages"]["torch_pins"] = {"nvidia-nccl-cu12": "2.19.3"}
    assert [f.severity for f in findings_of(Snapshot.from_dict(doc), "PKG013")] == ["warning"]
    doc["sections"]["packages"]["versions"]["nvidia-nccl-cu12"] = "2.19.3"
    assert findings_of(Snapshot.from_dict(doc), "PKG013") == []


# ------------------------------------------------ NET019: RDMA link went down (counters)
# NVIDIA/nccl#905 (batch 68): 'NET/IB : Got async event : port error', a flapping link the port state hides.
def test_link_counters_read_from_sysfs(tmp_path):
    from ddpdoctor.gather import Sources
    from ddpdoctor.gather.pci import rdma_ports

    port = tmp_path / "sys/class/infiniband/mlx5_0/ports/1"
    (port / "counters").mkdir(parents=True)
    (port / "state").write_text("4: ACTIVE\n")
    (port / "link_layer").write_text("InfiniBand\n")
    (port / "counters/link_downed").write_text("7\n")
    (port / "counters/link_error_recovery").write_text("0\n")
    got = rdma_ports(Sources(root=str(tmp_path), environ={}), ["mlx5_0"])
    assert got["mlx5_0:1"]["counters"] == {"link_downed": 7, "link_error_recovery": 0}
    (port / "counters/link_downed").unlink()
    (port / "counters/link_error_recovery").unlink()
    assert "counters" not in rdma_ports(Sources(root=str(tmp_path), environ={}), ["mlx5_0"])["mlx5_0:1"]


def _net19(counters, env=None, multi=True):
    env = dict(env or {})
    if multi:
        env.update({"TORCHELASTIC_RUN_ID": "x", "RANK": "8", "WORLD_SIZE": "16", "LOCAL_RANK": "0",
                    "LOCAL_WORLD_SIZE": "8", "GROUP_RANK": "1", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"})

    def edit(s):
        s["pci"]["rdma_devices"] = ["mlx5_0", "mlx5_1"]
        s["pci"]["rdma_ports"] = {
            "mlx5_0:1": {"link_layer": "InfiniBand", "state": "4: ACTIVE", "gids": {}, "counters": counters},
            "mlx5_1:1": {"link_layer": "InfiniBand", "state": "4: ACTIVE", "gids": {},
                         "counters": {"link_downed": 0, "link_error_recovery": 0}}}
    snap = fixture_snapshot("hgx-h100-8x", env=env, edit=edit)
    return [(f.severity, f.title) for f in findings_of(snap, "NET019")]


def test_rdma_link_went_down_on_a_multi_node_job():
    got = _net19({"link_downed": 7, "link_error_recovery": 3})
    assert [s for s, _ in got] == ["warning"] and "mlx5_0:1 7 times" in got[0][1]


def test_rdma_link_errors_quiet_or_note():
    assert _net19({"link_downed": 0, "link_error_recovery": 0}) == []
    assert _net19({}) == []                                                  # not gathered
    assert _net19({"link_downed": 7}, env={"NCCL_IB_DISABLE": "1"}) == []    # IB not used
    assert _net19({"link_downed": 7}, env={"NCCL_IB_HCA": "mlx5_1"}) == []   # the port is not selected
    assert [s for s, _ in _net19({"link_downed": 2}, multi=False)] == ["info"]
    assert [s for s, _ in _net19({"link_error_recovery": 4})] == ["info"]


# ------------------------------------------------ ENV007: the config's num_nodes against the SLURM allocation
# Lightning-AI/pytorch-lightning#10098 (batch 67): Trainer(num_nodes=2) under an allocation left at one node hangs.
SLURM1 = {"SLURM_JOB_ID": "4242", "SLURM_NNODES": "1", "SLURM_JOB_NUM_NODES": "1", "SLURM_NTASKS": "4",
          "SLURM_NTASKS_PER_NODE": "4", "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_NODEID": "0",
          "SLURM_STEP_ID": "0", "SLURM_JOB_NODELIST": "node1"}


def test_config_facts_read_node_counts(tmp_path):
    from ddpdoctor.lint.configfacts import config_facts

    p = tmp_path / "trainer.yaml"
    p.write_text("trainer:\n  num_nodes: 2\n  devices: 4\n")
    a = tmp_path / "accel.yaml"
    a.write_text("num_machines: 1\nnum_processes: 8\n")
    got = config_facts([str(p), str(a)])["node_args"]
    assert sorted((x["flag"], x["value"]) for x in got) == [("num_machines", 1), ("num_nodes", 2)]


def _env7(tmp_path, text, env=SLURM1):
    from ddpdoctor.pipeline.check import add_config_facts

    p = tmp_path / "trainer.yaml"
    p.write_text(text)
    snap = make_snapshot(env=env)
    add_config_facts(snap, [str(p)])
    return [(f.severity, f.title) for f in findings_of(snap, "ENV007")]


def test_config_num_nodes_differs_from_the_allocation(tmp_path):
    got = _env7(tmp_path, "trainer:\n  num_nodes: 2\n  devices: 4\n")
    assert [s for s, t in got if "num_nodes" in t] == ["warning"]


def test_config_num_nodes_quiet(tmp_path):
    assert not [t for _, t in _env7(tmp_path, "trainer:\n  num_nodes: 1\n  devices: 4\n") if "num_nodes" in t]
    assert not [t for _, t in _env7(tmp_path, "trainer:\n  devices: 4\n") if "num_nodes" in t]
    env = {k: v for k, v in SLURM1.items() if not k.startswith("SLURM")}
    assert not [t for _, t in _env7(tmp_path, "trainer:\n  num_nodes: 2\n", env=env) if "num_nodes" in t]


def test_config_num_nodes_on_a_recorded_snapshot(tmp_path):
    from ddpdoctor.pipeline.check import add_config_facts

    p = tmp_path / "trainer.yaml"
    p.write_text("trainer:\n  num_nodes: 2\n  devices: 4\n")
    snap = fixture_snapshot("slurm-step-4-tasks-4-gpus")
    add_config_facts(snap, [str(p)])
    assert [f.severity for f in findings_of(snap, "ENV007") if "num_nodes" in f.title] == ["warning"]
    p.write_text("trainer:\n  num_nodes: 1\n  devices: 4\n")
    snap = fixture_snapshot("slurm-step-4-tasks-4-gpus")
    add_config_facts(snap, [str(p)])
    assert not [f for f in findings_of(snap, "ENV007") if "num_nodes" in f.title]


# ------------------------------------------------ ENV019: the local-rank argument spelled as this launcher does not
# ziplab/SN-Net#2, hkchengrex/XMem#18 (batch 68): 'unrecognized arguments: --local-rank=5' under torch 2.0.
def _script(tmp_path, text):
    from ddpdoctor.lint.scriptfacts import script_facts

    p = tmp_path / "train.py"
    p.write_text(text)
    return script_facts([str(p)])


def _env19(tmp_path, text, torch="2.0.1"):
    facts = _script(tmp_path, text)
    lint = {"scripts": ["train.py"], "files": [], "findings": [], "rules_run": 0, "facts": facts}
    snap = fixture_snapshot("rtx4090-4x-no-p2p", edit=lambda s: s.update(lint=lint))
    snap.sections["packages"]["versions"]["torch"] = torch
    return [(f.severity, f.title) for f in findings_of(snap, "ENV019")]


UNDERSCORE = 'import argparse\np = argparse.ArgumentParser()\np.add_argument("--local_rank", type=int, default=0)\nargs = p.parse_args()\n'


def test_local_rank_args_read_from_script(tmp_path):
    facts = _script(tmp_path, UNDERSCORE)
    assert [(a["flags"], a["line"]) for a in facts["local_rank_args"]] == [(["--local_rank"], 3)]
    assert facts["parse_known_args"] is False


def test_local_rank_underscore_under_torch2_launcher(tmp_path):
    got = _env19(tmp_path, UNDERSCORE)
    assert [s for s, _ in got] == ["warning"] and "--local-rank=N" in got[0][1]
    got = _env19(tmp_path, UNDERSCORE.replace("parse_args()", "parse_known_args()[0]"))
    assert [s for s, _ in got] == ["info"]
    # the dashed spelling alone under torch 1.x: that launcher passes --local_rank
    assert [s for s, _ in _env19(tmp_path, UNDERSCORE.replace("--local_rank", "--local-rank"), torch="1.13.1")] == ["warning"]
    # the script also reads LOCAL_RANK: works under torchrun, only the deprecated launcher breaks it - a note
    got = _env19(tmp_path, UNDERSCORE.replace("default=0", "default=int(os.environ.get('LOCAL_RANK', 0))"))
    assert [s for s, _ in got] == ["info"]


def test_local_rank_spelling_quiet(tmp_path):
    assert _env19(tmp_path, UNDERSCORE, torch="1.13.1") == []                             # what 1.x passes
    assert _env19(tmp_path, UNDERSCORE.replace('"--local_rank"', '"--local-rank", "--local_rank"')) == []  # both
    assert _env19(tmp_path, "import os\nrank = int(os.environ['LOCAL_RANK'])\n") == []     # reads the environment


# ------------------------------------------------ GPU001: accelerate's default config asks for GPUs, no driver
# Akegarasu/lora-scripts#101 (batch 67): accelerate launch on a laptop whose only GPU is an Intel iGPU.
NO_NVML = {"unavailable": "NVML Shared Library Not Found", "reason": "no_library",
           "hints": {"dev_nvidia0": False, "proc_driver_nvidia": False}}


def _gpu001(values):
    host = {"accelerate_config": {"path": "/home/u/.cache/huggingface/accelerate/default_config.yaml", "values": values}}
    snap = make_snapshot(host=host, gpus=NO_NVML)
    return [f.severity for f in findings_of(snap, "GPU001")]


def test_no_driver_with_an_accelerate_config_for_gpus():
    assert _gpu001({"distributed_type": "MULTI_GPU", "use_cpu": "false", "num_processes": 2}) == ["warning"]
    assert _gpu001({"distributed_type": "NO", "gpu_ids": "0", "use_cpu": "false"}) == ["warning"]


def test_no_driver_with_a_cpu_accelerate_config_is_a_note():
    assert _gpu001({"distributed_type": "MULTI_CPU", "use_cpu": "true"}) == ["info"]
    assert _gpu001({"distributed_type": "MULTI_GPU", "use_cpu": "true"}) == ["info"]
    assert _gpu001({}) == ["info"]


def test_no_driver_with_an_accelerate_gpu_config_on_a_recorded_snapshot():
    def edit(s):
        s["host"]["accelerate_config"] = {"path": "/root/.cache/huggingface/accelerate/default_config.yaml",
                                          "values": {"distributed_type": "MULTI_GPU", "use_cpu": "false"}}
    assert [f.severity for f in findings_of(fixture_snapshot("cpu-only", edit=edit), "GPU001")] == ["warning"]
    assert [f.severity for f in findings_of(fixture_snapshot("cpu-only"), "GPU001")] == ["info"]


# ------------------------------------------ GPU001: NVML answers but libcuda.so.1 does not load (batch 69)
# NVIDIA/nvidia-docker#533: in a container nvidia-smi works and torch says 'Found no NVIDIA driver on your system';
# NVIDIA_DRIVER_CAPABILITIES without `compute` keeps libcuda out. SET001 must not read the toolkit's NVIDIA_*.
NO_LIBCUDA = {"unavailable": "no CUDA driver library (libcuda.so.1): libcuda.so.1: cannot open shared object file"}


def _libcuda(env=None, cuda=NO_LIBCUDA, container="docker"):
    def edit(s):
        s["cuda"] = copy.deepcopy(cuda)
        s["host"]["container"] = container
    return fixture_snapshot("rtx4090-4x-no-p2p", env=env, edit=edit)


def test_libcuda_missing_under_nvml_names_driver_capabilities():
    snap = _libcuda(env={"NVIDIA_DRIVER_CAPABILITIES": "utility", "NVIDIA_VISIBLE_DEVICES": "all"})
    got = findings_of(snap, "GPU001")
    assert [f.severity for f in got] == ["warning"]
    assert list(got[0].subjects) == ["NVIDIA_DRIVER_CAPABILITIES"] and "compute" in got[0].detail
    assert findings_of(snap, "SET001") == []  # the toolkit's variables are not misspelt CUDA ones


def test_libcuda_missing_without_the_variable_is_still_a_warning():
    got = findings_of(_libcuda(container=None), "GPU001")
    assert [f.severity for f in got] == ["warning"] and list(got[0].subjects) == []


def test_libcuda_quiet_when_cuda_loads_or_compute_is_granted():
    ok = {"init_result": 0, "device_count": 4, "library": "/usr/lib/x86_64-linux-gnu/libcuda.so.1"}
    assert findings_of(_libcuda(env={"NVIDIA_DRIVER_CAPABILITIES": "utility"}, cuda=ok), "GPU001") == []
    assert findings_of(fixture_snapshot("rtx4090-4x-no-p2p"), "GPU001") == []
    # granted compute but libcuda still missing: a warning that does not blame the variable
    got = findings_of(_libcuda(env={"NVIDIA_DRIVER_CAPABILITIES": "compute,utility"}), "GPU001")
    assert [f.severity for f in got] == ["warning"] and list(got[0].subjects) == []
    assert findings_of(_libcuda(env={"NVIDIA_DRIVER_CAPABILITIES": "all"}), "GPU001")[0].subjects == ()


# ------------------------------- GPU032: a GPU below the CUDA 10.2 wheels' sm_37 floor (batch 70, K20m sm_35)
# neuralhydrology/neuralhydrology#43: "Found GPU0 Tesla K20m which is of cuda capability 3.5 ... The minimum cuda
# capability supported by this library is 3.7"; pytorch/builder manywheel/build_cuda.sh: TORCH_CUDA_ARCH_LIST 3.7;5.0;6.0;7.0.
def _cu102(name, cap, torch="1.8.1"):
    def edit(s):
        for d in s["gpus"]["devices"]:
            d["name"], d["cuda_capability"] = name, list(cap)
        s["packages"]["versions"]["torch"] = torch
        s["packages"]["torch_build"] = {"cuda": "10.2", "hip": None}
    return findings_of(fixture_snapshot("rtx4090-4x-no-p2p", keep=2, edit=edit), "GPU032")


def test_gpu_below_the_cu102_floor_is_a_warning_with_a_source_build_fix():
    got = _cu102("Tesla K20m", (3, 5))
    assert [f.severity for f in got] == ["warning"]
    assert "sm_35" in got[0].title and "TORCH_CUDA_ARCH_LIST=3.5" in got[0].fix and "cu126" not in got[0].fix


def test_gpus_the_cu102_wheels_carry_are_quiet():
    for name, cap in (("Tesla K80", (3, 7)), ("GeForce GTX 1080 Ti", (6, 1)), ("Tesla V100-SXM2-32GB", (7, 0)),
                      ("GeForce RTX 2080 Ti", (7, 5)), ("Quadro M6000", (5, 2))):
        assert _cu102(name, cap) == [], name


# ------------------------------------ ENV002: MASTER_PORT free now but inside the ephemeral range (batch 70)
# NVIDIA/enroot#243: the slurm-pytorch hook sets MASTER_PORT = SLURM_JOB_ID % 16384 + 49152 (49152-65535), inside
# Linux's default 32768-60999, and PyTorch jobs fail with EADDRINUSE now and then.
def _env002(env, port_range=None, listening=(22,)):
    def edit(s):
        s["network"]["listening_tcp_ports"] = list(listening)
        if port_range is not None:
            s["network"]["ip_local_port_range"] = port_range
    base = {"RANK": "0", "WORLD_SIZE": "8", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1"}
    base.update(env)
    return findings_of(fixture_snapshot("hgx-h100-8x", env=base, edit=edit), "ENV002")


def test_master_port_in_the_ephemeral_range_is_a_warning():
    got = _env002({"MASTER_PORT": "58816", "SLURM_JOB_ID": "123456"}, port_range=[32768, 60999])
    assert [(f.severity, list(f.subjects)) for f in got] == [("warning", ["MASTER_PORT"])]
    assert "32768-60999" in got[0].title and got[0].evidence["range_read"] is True
    # a recorded snapshot without the range: the kernel's default, said so
    got = _env002({"MASTER_PORT": "40000"})
    assert [f.severity for f in got] == ["warning"] and "not read here" in got[0].detail


def test_master_port_outside_the_range_or_not_ours_to_bind_is_quiet():
    assert _env002({"MASTER_PORT": "29500"}, port_range=[32768, 60999]) == []
    assert _env002({"MASTER_PORT": "61000"}, port_range=[32768, 60999]) == []
    assert _env002({"MASTER_PORT": "58816"}, port_range=[61000, 65000]) == []  # a tuned range
    assert _env002({"MASTER_PORT": "58816", "RANK": "3"}, port_range=[32768, 60999]) == []  # rank 3 connects
    assert _env002({}, port_range=[32768, 60999]) == []  # torchrun's default 29500
    # in use now: the existing error, not the range warning
    got = _env002({"MASTER_PORT": "58816"}, port_range=[32768, 60999], listening=(22, 58816))
    assert [f.severity for f in got] == ["error"]


# ------------------------------- ENV007: Trainer(num_nodes=N) read from the script by check --script (wave-1 follow-up)
# Lightning-AI/pytorch-lightning#10098: Trainer(num_nodes=2) in train.py under an allocation of one node hangs.
TRAINER = "import lightning as L\ntrainer = L.Trainer(accelerator='gpu', devices=4, num_nodes={n}, strategy='ddp')\n"


def _env7_script(tmp_path, text, env=SLURM1, fixture=None):
    facts = _script(tmp_path, text)
    lint = {"scripts": ["train.py"], "files": [], "findings": [], "rules_run": 0, "facts": facts}
    if fixture:
        snap = fixture_snapshot(fixture, edit=lambda s: s.update(lint=lint))
    else:
        snap = make_snapshot(env=env, lint=lint)
    return [(f.severity, f.title) for f in findings_of(snap, "ENV007") if "num_nodes" in f.title]


def test_trainer_num_nodes_literal_read_from_script(tmp_path):
    facts = _script(tmp_path, TRAINER.format(n=2))
    assert [(a["flag"], a["value"], a["line"]) for a in facts["node_args"]] == [("Trainer(num_nodes=...)", 2, 2)]
    assert _script(tmp_path, "from pytorch_lightning import Trainer\nt = Trainer(num_nodes=args.nodes)\n")["node_args"] == []


def test_trainer_num_nodes_in_script_differs_from_the_allocation(tmp_path):
    got = _env7_script(tmp_path, TRAINER.format(n=2))
    assert [s for s, _ in got] == ["warning"] and "train.py" in got[0][1]
    # the recorded srun step of 4 tasks on one node
    assert [s for s, _ in _env7_script(tmp_path, TRAINER.format(n=2), fixture="slurm-step-4-tasks-4-gpus")] == ["warning"]


def test_trainer_num_nodes_in_script_quiet(tmp_path):
    assert _env7_script(tmp_path, TRAINER.format(n=1)) == []
    env = {k: v for k, v in SLURM1.items() if not k.startswith("SLURM")}
    assert _env7_script(tmp_path, TRAINER.format(n=2), env=env) == []  # not under SLURM
    assert _env7_script(tmp_path, TRAINER.format(n=1), fixture="slurm-step-4-tasks-4-gpus") == []
