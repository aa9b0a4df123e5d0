"""Batch 14's classes (issue 26): NCCL_IB_HCA as ncclIbInit reads it, a link-local MASTER_ADDR, GPU Direct RDMA's
peer-memory modules, P2P inside a virtual machine, and an IOMMU on by default; with the gatherers behind them."""
import os

from factory import findings_of, make_snapshot
from factory import fixture_snapshot as fixture

from ddpdoctor.gather import Sources
from ddpdoctor.gather.host import virtualization
from ddpdoctor.gather.pci import gdr_modules
from ddpdoctor.pipeline.snapshot import Snapshot

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TWO_NODES = {"TORCHELASTIC_RUN_ID": "j", "RANK": "8", "LOCAL_RANK": "0", "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8",
             "GROUP_RANK": "1", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500", "OMP_NUM_THREADS": "1"}
HCAS = [f"mlx5_{i}" for i in range(12)]


def write(root, rel, text=""):
    path = os.path.join(root, rel.lstrip("/"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(text)


# ------------------------------------------------------------------ NCCL_IB_HCA (NCCL003)

def test_ib_hca_prefix_match_and_misplaced_modifiers():
    # NVIDIA/nccl#236: mlx5_1 also matches mlx5_10 and mlx5_11; NVIDIA/nccl-tests#150: '^=' twice
    [f] = findings_of(make_snapshot(env={"NCCL_IB_HCA": "mlx5_1:1"}, pci={"rdma_devices": HCAS}), "NCCL003")
    assert "also selects mlx5_10, mlx5_11" in f.title and f.fix == "export NCCL_IB_HCA='=mlx5_1:1'"
    [f] = findings_of(make_snapshot(env={"NCCL_IB_HCA": "^=mlx5_8,^=mlx5_14"}, pci={"rdma_devices": HCAS + ["mlx5_14"]}),
                      "NCCL003")
    assert "'^=mlx5_14' is read as a device name" in f.title and f.fix == "export NCCL_IB_HCA='^=mlx5_8,mlx5_14'"
    [f] = findings_of(make_snapshot(env={"NCCL_IB_HCA": "mlx4_0"}, pci={"rdma_devices": HCAS}), "NCCL003")
    assert "matches no RDMA device" in f.title


def test_ib_hca_quiet_when_read_as_meant():
    for spec in ("=mlx5_1:1", "mlx5_0,mlx5_2", "^=mlx5_8,mlx5_9", "mlx5"):
        assert findings_of(make_snapshot(env={"NCCL_IB_HCA": spec}, pci={"rdma_devices": HCAS}), "NCCL003") == [], spec
    assert findings_of(make_snapshot(env={"NCCL_IB_HCA": "mlx5_1"}), "NCCL003") == []  # no pci facts: nothing to judge


# ------------------------------------------------------------------ a link-local MASTER_ADDR (NET002)

def test_link_local_master_addr_needs_its_interface():
    # pytorch/pytorch#108047: fe80:: without %iface fails with EINVAL; [::1] works
    env = {"MASTER_ADDR": "fe80::121b:54ff:fe0f:41d3", "MASTER_PORT": "29500", "RANK": "1", "WORLD_SIZE": "4"}
    [f] = findings_of(make_snapshot(env=env), "NET002")
    assert f.severity == "error" and "link-local" in f.title
    for addr in ("::1", "2001:db8::5", "fe80::1%eth0", "10.0.0.1"):
        # check33: a bare IPv6 MASTER_ADDR gets one note (a tcp:// URL built from it needs brackets), no more
        got = [f.severity for f in findings_of(make_snapshot(env=dict(env, MASTER_ADDR=addr)), "NET002")]
        assert got == (["info"] if ":" in addr else []), addr


# ------------------------------------------------------------------ GPU Direct RDMA (GPU030)

def test_gdr_modules_from_a_fake_sysfs(tmp_path):
    root = str(tmp_path)
    assert gdr_modules(Sources(environ={}, root=root)) == {"nv_mem": False, "nv_mem_nc": False, "nvidia_peermem": False,
                                                           "open_kernel_module": None}
    write(root, "/sys/module/nvidia_peermem/version", "1.0\n")
    write(root, "/proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15\n")
    assert gdr_modules(Sources(environ={}, root=root)) == {"nv_mem": False, "nv_mem_nc": False, "nvidia_peermem": True,
                                                           "open_kernel_module": True}


NO_GDR = {"nv_mem": False, "nv_mem_nc": False, "nvidia_peermem": False, "open_kernel_module": None}


def _gdr(gdr, env=TWO_NODES, kernel=None):
    snap = fixture("hgx-h100-8x", env=env)
    doc = snap.to_dict()
    doc["sections"]["pci"]["gdr"] = gdr
    if kernel:
        doc["sections"]["host"]["kernel"] = kernel
    return Snapshot.from_dict(doc)


def test_gpu030_no_peer_memory_module_on_a_multi_node_job():
    # NVIDIA/nccl#897, #1343: `modprobe nvidia-peermem` fixed it
    [f] = findings_of(_gdr(NO_GDR), "GPU030")
    assert "no GPU Direct RDMA peer-memory module" in f.title and "not known here" in f.detail
    [f] = findings_of(_gdr(dict(NO_GDR, open_kernel_module=True), kernel="3.10.0-957.el7.x86_64"), "GPU030")
    assert "older than 5.12" in f.detail
    [f] = findings_of(_gdr(dict(NO_GDR, open_kernel_module=False)), "GPU030")
    assert "proprietary" in f.detail


def test_gpu030_quiet_with_a_module_dmabuf_one_node_or_no_ib():
    assert findings_of(_gdr(dict(NO_GDR, nvidia_peermem=True)), "GPU030") == []
    assert findings_of(_gdr(dict(NO_GDR, open_kernel_module=True), kernel="6.8.0-45-generic"), "GPU030") == []
    single = {k: v for k, v in TWO_NODES.items() if k not in ("WORLD_SIZE", "GROUP_RANK")}
    assert findings_of(_gdr(NO_GDR, env=single), "GPU030") == []
    assert findings_of(_gdr(NO_GDR, env=dict(TWO_NODES, NCCL_IB_DISABLE="1")), "GPU030") == []


# ------------------------------------------------------------------ P2P inside a virtual machine (GPU031)

def test_virtualization_from_cpuinfo_and_dmi(tmp_path):
    root = str(tmp_path)
    write(root, "/proc/cpuinfo", "processor\t: 0\nflags\t\t: fpu vme de pse msr\n")
    assert virtualization(Sources(environ={}, root=root)) is None
    write(root, "/proc/cpuinfo", "processor\t: 0\nflags\t\t: fpu vme de pse msr hypervisor lahf_lm\n")
    write(root, "/sys/class/dmi/id/sys_vendor", "QEMU\n")
    assert virtualization(Sources(environ={}, root=root)) == "kvm"


def _vm_pair(hv, read="OK", nvlink="NOT_SUPPORTED"):
    snap = fixture("pcie-switch-acs-2x-l40s")
    doc = snap.to_dict()
    doc["sections"]["host"]["virtualization"] = hv
    doc["sections"]["gpus"]["pairs"] = [{"a": 0, "b": 1, "p2p": {"nvlink": nvlink, "read": read, "write": read},
                                         "topology": "NVML_TOPOLOGY_HOSTBRIDGE"}]
    return Snapshot.from_dict(doc)


def test_gpu031_p2p_reported_between_gpus_of_a_vm():
    # NVIDIA/nccl#2335: 2x RTX 3090 under QEMU/VFIO report P2P OK, and NCCL's P2P transport hangs
    [f] = findings_of(_vm_pair("kvm"), "GPU031")
    assert "virtual machine (kvm)" in f.title and "NCCL_P2P_DISABLE=1" in f.fix
    assert findings_of(_vm_pair(None), "GPU031") == []  # bare metal
    # no P2P at all between the VM's GPUs is not the hang above; since batch 36 (NVIDIA/nccl#175) it is GPU031's
    # other finding: collectives through host memory with no topology for NCCL (NCCL_TOPO_FILE quiets it)
    [g] = findings_of(_vm_pair("kvm", read="CHIPSET_NOT_SUPPORTED"), "GPU031")
    assert "no P2P between any pair" in g.title and "NCCL_P2P_DISABLE" not in g.fix
    assert findings_of(_vm_pair("kvm", nvlink="OK"), "GPU031") == []


# ------------------------------------------------------------------ an IOMMU on by default (GPU004)

def test_gpu004_an_iommu_on_without_a_command_line_and_unread_groups():
    # NVIDIA/nccl#667: VT-d on in the BIOS, nothing on the command line; group types not read
    snap = fixture("pcie-switch-acs-2x-l40s")
    doc = snap.to_dict()
    doc["sections"]["pci"]["iommu"] = {"cmdline": [], "state": "enabled", "units": ["dmar0"]}
    for g in doc["sections"]["pci"]["gpus"].values():
        g["iommu_group_type"] = None
    [f] = findings_of(Snapshot.from_dict(doc), "GPU004")
    assert "group types unknown" in f.detail
    doc["sections"]["pci"]["iommu"] = {"cmdline": ["iommu=pt"], "state": "passthrough", "units": ["dmar0"]}
    assert findings_of(Snapshot.from_dict(doc), "GPU004") == []


def _with_nccl(snap, version):
    doc = snap.to_dict()
    doc["sections"]["packages"]["versions"]["nvidia-nccl-cu12"] = version
    return Snapshot.from_dict(doc)


def test_gpu030_nvidia_peermem_invisible_to_nccl_before_2_23_4():
    # NVIDIA/nccl#1676: DGX OS 25.01 swapped nv_peer_mem for nvidia-peermem; NCCL <= 2.22.3 reads only nv_mem[_nc]
    peermem = dict(NO_GDR, nvidia_peermem=True)
    [f] = findings_of(_with_nccl(_gdr(peermem), "2.21.5"), "GPU030")
    assert f.severity == "warning" and "2.21.5" in f.title and "net_ib.cc:614" in f.detail and "pkg:nccl" in f.subjects
    assert findings_of(_with_nccl(_gdr(peermem), "2.23.4"), "GPU030") == []  # NCCL that looks for nvidia_peermem
    assert findings_of(_with_nccl(_gdr(dict(peermem, nv_mem=True)), "2.21.5"), "GPU030") == []  # nv_mem entry present
    single = {k: v for k, v in TWO_NODES.items() if k not in ("WORLD_SIZE", "GROUP_RANK")}
    assert findings_of(_with_nccl(_gdr(peermem, env=single), "2.21.5"), "GPU030") == []  # one node
