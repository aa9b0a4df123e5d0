"""Gatherers behind SYS005 (thread limits), NET010 (SR-IOV virtual functions) and ENV014 (ssh for DeepSpeed's
multi-node launch), on a fake root laid out as the kernel and OpenSSH lay theirs."""
from __future__ import annotations

import os

from ddpdoctor.gather import Sources


def test_cgroup_pids_reads_v2_then_v1(tmp_path):
    from ddpdoctor.gather.host import cgroup_pids

    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/self/cgroup").write_text("0::/kubepods/pod1\n")
    pod = tmp_path / "sys/fs/cgroup/kubepods/pod1"
    pod.mkdir(parents=True)
    (pod / "pids.max").write_text("1024\n")
    (pod / "pids.current").write_text("37\n")
    assert cgroup_pids(Sources(root=str(tmp_path), environ={})) == {"pids_max": 1024, "pids_current": 37}
    (pod / "pids.max").write_text("max\n")  # no limit
    assert cgroup_pids(Sources(root=str(tmp_path), environ={}))["pids_max"] is None
    v1 = tmp_path / "v1"
    (v1 / "sys/fs/cgroup/pids").mkdir(parents=True)
    (v1 / "sys/fs/cgroup/pids/pids.max").write_text("512\n")
    assert cgroup_pids(Sources(root=str(v1), environ={}))["pids_max"] == 512


def test_rdma_virtual_functions_are_the_devices_with_a_physfn_link(tmp_path):
    from ddpdoctor.gather.pci import rdma_virtual_functions

    for dev, vf in (("mlx5_0", False), ("mlx5_1", True)):
        d = tmp_path / "sys/class/infiniband" / dev / "device"
        d.mkdir(parents=True)
        if vf:
            os.symlink("../0000:3b:00.0", d / "physfn")  # a dangling link is still a VF's mark
    got = rdma_virtual_functions(Sources(root=str(tmp_path), environ={}), ["mlx5_0", "mlx5_1", "mlx5_9"])
    assert got == ["mlx5_1"]


def test_ssh_facts_name_keys_never_read_them(tmp_path):
    from ddpdoctor.gather.host import ssh_facts

    ssh = tmp_path / "home/u/.ssh"
    ssh.mkdir(parents=True)
    (ssh / "id_ed25519").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nsecret\n")
    (ssh / "id_ed25519.pub").write_text("ssh-ed25519 AAAA u@h\n")
    (ssh / "known_hosts").write_text("")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "ssh").write_text("#!/bin/sh\n")
    (bindir / "ssh").chmod(0o755)
    got = ssh_facts(Sources(root=str(tmp_path), environ={"HOME": "/home/u", "PATH": str(bindir)}))
    assert got == {"client": str(bindir / "ssh"), "keys": ["id_ed25519"], "agent": False, "config": False}
    assert "secret" not in repr(got)
    none = ssh_facts(Sources(root=str(tmp_path), environ={"HOME": "/nobody", "PATH": str(tmp_path / "empty"),
                                                           "SSH_AUTH_SOCK": "/tmp/agent.1"}))
    assert none == {"client": None, "keys": [], "agent": True, "config": False}


def test_rdma_verbs_names_the_uverbs_file_and_whether_it_exists(tmp_path):
    from ddpdoctor.gather.pci import rdma_verbs

    for dev, n in (("mlx5_0", 0), ("mlx5_1", 1)):
        (tmp_path / f"sys/class/infiniband/{dev}/device/infiniband_verbs/uverbs{n}").mkdir(parents=True)
    (tmp_path / "dev/infiniband").mkdir(parents=True)
    (tmp_path / "dev/infiniband/uverbs0").write_text("")
    got = rdma_verbs(Sources(root=str(tmp_path), environ={}), ["mlx5_0", "mlx5_1", "mlx5_2"])
    assert got == {"mlx5_0": {"uverbs": "uverbs0", "present": True}, "mlx5_1": {"uverbs": "uverbs1", "present": False}}


def test_port_privilege_facts_from_proc(tmp_path):
    from ddpdoctor.gather.host import cap_net_bind_service, unprivileged_port_start

    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/sys/net/ipv4").mkdir(parents=True)
    (tmp_path / "proc/sys/net/ipv4/ip_unprivileged_port_start").write_text("1024\n")
    (tmp_path / "proc/self/status").write_text("Name:\tpython\nCapEff:\t0000000000000400\n")  # bit 10 only
    src = Sources(root=str(tmp_path), environ={})
    assert unprivileged_port_start(src) == 1024
    assert cap_net_bind_service(src) is True
    (tmp_path / "proc/self/status").write_text("CapEff:\t0000000000000000\n")
    assert cap_net_bind_service(src) is False
    assert unprivileged_port_start(Sources(root=str(tmp_path / "none"), environ={})) is None


def test_verbs_providers_and_rdma_drivers_from_a_fake_root(tmp_path):
    """rdma-core: /etc/libibverbs.d/<name>.driver holds `driver <name>`; providers are lib<name>-rdmav<ABI>.so in
    <libdir>/libibverbs; a device's kernel driver is the basename of <dev>/device/driver."""
    from ddpdoctor.gather.pci import rdma_drivers, verbs_providers

    lib = tmp_path / "usr/lib/x86_64-linux-gnu"
    (lib / "libibverbs").mkdir(parents=True)
    (lib / "libibverbs.so.1").write_text("")
    (lib / "libibverbs/libefa-rdmav34.so").write_text("")
    (tmp_path / "etc/libibverbs.d").mkdir(parents=True)
    (tmp_path / "etc/libibverbs.d/efa.driver").write_text("driver efa\n")
    got = verbs_providers(Sources(root=str(tmp_path), environ={}))
    assert got["libibverbs"] == ["/usr/lib/x86_64-linux-gnu"] and got["libraries"] == ["efa"] and got["config"] == ["efa"]
    assert verbs_providers(Sources(root=str(tmp_path / "empty"), environ={}))["config"] is None
    assert got["ld_so_conf"] is False  # no /etc/ld.so.conf in this root: an empty list would prove nothing
    d = tmp_path / "sys/class/infiniband/mlx5_0/device"
    d.mkdir(parents=True)
    os.symlink("../../../bus/pci/drivers/mlx5_core", d / "driver")
    assert rdma_drivers(Sources(root=str(tmp_path), environ={}), ["mlx5_0", "mlx5_1"]) == {"mlx5_0": "mlx5_core"}


def test_verbs_providers_follow_ld_so_conf_includes(tmp_path):
    """ld.so.conf(5): directories one per line, `include` globs; libibverbs in an included directory is found."""
    from ddpdoctor.gather.pci import ld_so_conf_dirs, verbs_providers

    (tmp_path / "etc/ld.so.conf.d").mkdir(parents=True)
    (tmp_path / "etc/ld.so.conf").write_text("include /etc/ld.so.conf.d/*.conf\n# a comment\n/opt/site/lib\n")
    (tmp_path / "etc/ld.so.conf.d/mofed.conf").write_text("/opt/mellanox/lib64\n")
    src = Sources(root=str(tmp_path), environ={})
    assert ld_so_conf_dirs(src) == ["/opt/mellanox/lib64", "/opt/site/lib"]
    assert verbs_providers(src) == {"libibverbs": [], "libraries": [], "config": None, "ld_so_conf": True}
    (tmp_path / "opt/mellanox/lib64").mkdir(parents=True)
    (tmp_path / "opt/mellanox/lib64/libibverbs.so.1").write_text("")
    assert verbs_providers(src)["libibverbs"] == ["/opt/mellanox/lib64"]


def test_interface_bus_tells_usb_from_pci(tmp_path):
    from ddpdoctor.gather.network import interface_bus

    for name, target in (("eno1", "devices/pci0000:00/0000:00:1f.6"),
                         ("enx0", "devices/pci0000:2b/0000:2e:00.3/usb1/1-1/1-1.2/1-1.2:2.0")):
        (tmp_path / "sys" / target).mkdir(parents=True)
        (tmp_path / "sys/class/net" / name).mkdir(parents=True)
        os.symlink(os.path.relpath(tmp_path / "sys" / target, tmp_path / "sys/class/net" / name),
                   tmp_path / "sys/class/net" / name / "device")
    (tmp_path / "sys/class/net/lo").mkdir(parents=True)
    src = Sources(root=str(tmp_path), environ={})
    assert [interface_bus(src, n) for n in ("eno1", "enx0", "lo")] == ["pci", "usb", None]


def test_cpu_vendor_reads_cpuinfo(tmp_path):
    from ddpdoctor.gather.host import cpu_vendor

    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/cpuinfo").write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\n")
    assert cpu_vendor(Sources(root=str(tmp_path), environ={})) == "AuthenticAMD"
    (tmp_path / "proc/cpuinfo").write_text("processor\t: 0\nCPU implementer\t: 0x41\n")
    assert cpu_vendor(Sources(root=str(tmp_path), environ={})) == "ARM"


def test_every_section_is_gathered_by_its_own_gather_function():
    """A helper written between a @gatherer decorator and its function takes the section over (the host section
    once returned cpu_vendor's string); every registered gatherer is a gather_<section> function."""
    import ddpdoctor.gather.host  # noqa: F401 - registers its gatherers
    import ddpdoctor.gather.network  # noqa: F401
    import ddpdoctor.gather.pci  # noqa: F401
    from ddpdoctor.gather import GATHERERS

    for name in ("host", "network", "pci"):
        assert GATHERERS[name].fn.__name__ == f"gather_{name}", (name, GATHERERS[name].fn.__name__)
