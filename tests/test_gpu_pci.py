"""The `pci` section from a fake /sys and /proc tree: IOMMU, ACS on bridges between GPUs, link width."""
import os

from ddpdoctor.gather import Sources
from ddpdoctor.gather.pci import gather_pci, norm_bdf, parse_acs


def config_with_acs(ctl: int) -> bytes:
    cfg = bytearray(4096)
    cfg[0:4] = (0x10B5 | 0x8796 << 16).to_bytes(4, "little")  # a Broadcom/PLX switch port
    cfg[0x100:0x104] = (0x0001 | 1 << 16 | 0x148 << 20).to_bytes(4, "little")  # AER, next at 0x148
    cfg[0x148:0x14C] = (0x000D | 1 << 16 | 0 << 20).to_bytes(4, "little")  # ACS, last
    cfg[0x14C:0x14E] = (0x7F).to_bytes(2, "little")
    cfg[0x14E:0x150] = ctl.to_bytes(2, "little")
    return bytes(cfg)


def write(root, rel, text):
    path = os.path.join(root, rel.lstrip("/"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    mode = "wb" if isinstance(text, bytes) else "w"
    with open(path, mode) as fh:
        fh.write(text)


def fake_tree(root, acs_ctl=0x1D, readable=True):
    chain = ["0000:16:02.0", "0000:17:00.0"]
    devices = os.path.join(root, "sys/devices/pci0000:16")
    for i, (down, gpu) in enumerate((("0000:18:00.0", "0000:19:00.0"), ("0000:18:01.0", "0000:1a:00.0"))):
        real = os.path.join(devices, *chain, down, gpu)
        os.makedirs(real, exist_ok=True)
        for name, value in (("vendor", "0x10de"), ("class", "0x030200"), ("numa_node", "0"),
                            ("current_link_width", "8" if i else "16"), ("max_link_width", "16"),
                            ("current_link_speed", "2.5 GT/s PCIe"), ("max_link_speed", "16.0 GT/s PCIe")):
            write(root, os.path.relpath(os.path.join(real, name), root), value + "\n")
        os.makedirs(os.path.join(root, "sys/kernel/iommu_groups", str(30 + i)), exist_ok=True)
        write(root, f"sys/kernel/iommu_groups/{30 + i}/type", "DMA-FQ\n")
        os.symlink(os.path.join(root, "sys/kernel/iommu_groups", str(30 + i)), os.path.join(real, "iommu_group"))
        port = os.path.join(devices, *chain, down)
        cfg = config_with_acs(acs_ctl) if readable else bytes(64)
        with open(os.path.join(port, "config"), "wb") as fh:
            fh.write(cfg)
        links = os.path.join(root, "sys/bus/pci/devices")
        os.makedirs(links, exist_ok=True)
        os.symlink(real, os.path.join(links, gpu))
        if not os.path.exists(os.path.join(links, down)):
            os.symlink(port, os.path.join(links, down))
    # a non-GPU NVIDIA function (the GPU's audio) and an NVSwitch must not count as GPUs
    nvsw = os.path.join(devices, "0000:c4:00.0")
    os.makedirs(nvsw)
    write(root, "sys/devices/pci0000:16/0000:c4:00.0/vendor", "0x10de\n")
    write(root, "sys/devices/pci0000:16/0000:c4:00.0/class", "0x068000\n")
    os.symlink(nvsw, os.path.join(root, "sys/bus/pci/devices/0000:c4:00.0"))
    write(root, "proc/cmdline", "BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro intel_iommu=on quiet\n")
    os.makedirs(os.path.join(root, "sys/class/iommu/dmar0"))
    os.makedirs(os.path.join(root, "sys/class/infiniband/mlx5_0"))


def test_acs_iommu_and_links_from_a_fake_sysfs(tmp_path):
    fake_tree(str(tmp_path))
    pci = gather_pci(Sources(environ={}, root=str(tmp_path)))
    assert set(pci["gpus"]) == {"0000:19:00.0", "0000:1a:00.0"}
    g0, g1 = pci["gpus"]["0000:19:00.0"], pci["gpus"]["0000:1a:00.0"]
    assert g0["upstream"] == ["0000:16:02.0", "0000:17:00.0", "0000:18:00.0"]
    assert g0["iommu_group"] == 30 and g0["iommu_group_type"] == "DMA-FQ"
    assert g1["link"]["current_width"] == 8 and g1["link"]["max_width"] == 16
    acs = pci["bridges"]["0000:18:00.0"]["acs"]
    assert acs["readable"] and acs["ctl"]["ReqRedir"] and acs["ctl"]["CmpltRedir"] and not acs["ctl"]["EgressCtrl"]
    assert pci["bridges"]["0000:16:02.0"]["acs"]["readable"] is False  # no config file there: unreadable
    assert pci["iommu"] == {"units": ["dmar0"], "cmdline": ["intel_iommu=on"], "state": "enabled"}
    assert pci["rdma_devices"] == ["mlx5_0"]


def test_acs_needs_root_to_read(tmp_path):
    fake_tree(str(tmp_path), readable=False)
    acs = gather_pci(Sources(environ={}, root=str(tmp_path)))["bridges"]["0000:18:00.0"]["acs"]
    assert acs["readable"] is False and "root" in acs["reason"]


def test_parse_acs_walks_the_capability_chain():
    assert parse_acs(config_with_acs(0))["ctl"] == {k: False for k in parse_acs(config_with_acs(0))["ctl"]}
    loop = bytearray(4096)
    loop[0x100:0x104] = (0x0001 | 0x100 << 20).to_bytes(4, "little")  # points at itself
    assert parse_acs(bytes(loop)) == {"readable": True, "present": False}


def test_no_sysfs_is_unavailable_not_a_crash(tmp_path):
    pci = gather_pci(Sources(environ={}, root=str(tmp_path)))
    assert "unavailable" in pci and pci["iommu"]["state"] == "disabled"


def test_passthrough_on_the_command_line(tmp_path):
    write(str(tmp_path), "proc/cmdline", "ro intel_iommu=on iommu=pt\n")
    os.makedirs(tmp_path / "sys/bus/pci/devices")
    assert gather_pci(Sources(environ={}, root=str(tmp_path)))["iommu"]["state"] == "passthrough"


def test_norm_bdf():
    assert norm_bdf("00000000:0F:00.0") == "0000:0f:00.0" == norm_bdf("0000:0f:00.0")


def test_the_driver_of_each_gpu_and_the_nvswitches(tmp_path):
    fake_tree(str(tmp_path))
    drv = tmp_path / "sys/bus/pci/drivers/vfio-pci"
    drv.mkdir(parents=True)
    os.symlink(str(drv), os.path.join(os.path.realpath(str(tmp_path / "sys/bus/pci/devices/0000:1a:00.0")), "driver"))
    pci = gather_pci(Sources(environ={}, root=str(tmp_path)))
    assert pci["gpus"]["0000:1a:00.0"]["driver"] == "vfio-pci" and pci["gpus"]["0000:19:00.0"]["driver"] is None
    assert pci["nvswitches"] == ["0000:c4:00.0"]


def test_rdma_ports_and_their_gid_tables_from_a_fake_sysfs(tmp_path):
    # the layout of /sys/class/infiniband/<dev>/ports/<n> (kernel ABI, sysfs-class-infiniband): empty slots
    # read as all zeros and are left out; gid_attrs/types names the RoCE version
    fake_tree(str(tmp_path))
    port = "sys/class/infiniband/mlx5_0/ports/1"
    write(str(tmp_path), f"{port}/link_layer", "Ethernet\n")
    write(str(tmp_path), f"{port}/state", "4: ACTIVE\n")
    for i in range(8):
        gid = "0000:0000:0000:0000:0000:0000:0000:0000" if i < 6 else f"0000:0000:0000:0000:0000:ffff:0a00:000{i}"
        write(str(tmp_path), f"{port}/gids/{i}", gid + "\n")
    write(str(tmp_path), f"{port}/gid_attrs/types/6", "IB/RoCE v1\n")
    write(str(tmp_path), f"{port}/gid_attrs/types/7", "RoCE v2\n")
    pci = gather_pci(Sources(environ={}, root=str(tmp_path)))
    assert pci["rdma_ports"] == {"mlx5_0:1": {"link_layer": "Ethernet", "state": "4: ACTIVE", "gids": {
        "6": {"gid": "0000:0000:0000:0000:0000:ffff:0a00:0006", "type": "IB/RoCE v1"},
        "7": {"gid": "0000:0000:0000:0000:0000:ffff:0a00:0007", "type": "RoCE v2"}}}}


def test_cap_ipc_lock_from_proc_status(tmp_path):
    from ddpdoctor.gather.host import cap_ipc_lock

    write(str(tmp_path), "proc/self/status", "Name:\tpython\nCapEff:\t000001ffffffffff\n")
    assert cap_ipc_lock(Sources(environ={}, root=str(tmp_path))) is True
    write(str(tmp_path), "proc/self/status", "Name:\tpython\nCapEff:\t00000000a80425fb\n")  # docker's default set
    assert cap_ipc_lock(Sources(environ={}, root=str(tmp_path))) is False
    assert cap_ipc_lock(Sources(environ={}, root=str(tmp_path / "nothing"))) is None
