"""The host firewall read from ufw's and firewalld's own files (fake roots), and NET005 on it (issue 26,
batch 12: NVIDIA/nccl-tests#162, huggingface/trl#4737)."""
import os

from factory import findings_of, make_snapshot

from ddpdoctor.gather import Sources
from ddpdoctor.gather.firewall import firewall, ip_local_port_range

TWO_NODES = {"TORCHELASTIC_RUN_ID": "j", "RANK": "8", "LOCAL_RANK": "0", "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8",
             "GROUP_RANK": "1", "MASTER_ADDR": "10.20.0.11", "MASTER_PORT": "40000", "OMP_NUM_THREADS": "1"}


def write(root, rel, text):
    path = os.path.join(root, rel.lstrip("/"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(text)


def test_ufw_from_its_files(tmp_path):
    root = str(tmp_path)
    write(root, "/etc/ufw/ufw.conf", "# /etc/ufw/ufw.conf\nENABLED=yes\nLOGLEVEL=low\n")
    write(root, "/etc/default/ufw", 'IPV6=yes\nDEFAULT_INPUT_POLICY="DROP"\nDEFAULT_OUTPUT_POLICY="ACCEPT"\n')
    write(root, "/etc/ufw/user.rules", "*filter\n### tuple ### allow tcp 22 0.0.0.0/0 any 0.0.0.0/0 in\n"
                                       "-A ufw-user-input -p tcp --dport 22 -j ACCEPT\n"
                                       "### tuple ### allow tcp 40000:40050 0.0.0.0/0 any 0.0.0.0/0 in\n")
    write(root, "/proc/sys/net/ipv4/ip_local_port_range", "32768\t60999\n")
    src = Sources(environ={}, root=root)
    assert firewall(src) == {"tool": "ufw", "active": True, "default_incoming": "deny",
                             "allowed": ["22/tcp", "40000-40050/tcp"]}
    assert ip_local_port_range(src) == [32768, 60999]
    os.chmod(os.path.join(root, "etc/ufw/user.rules"), 0)  # root-only, as on a real host
    if os.geteuid() != 0:
        assert firewall(src)["allowed"] is None


def test_firewalld_zone_from_its_files(tmp_path):
    root = str(tmp_path)
    write(root, "/etc/firewalld/firewalld.conf", "DefaultZone=public\n")
    write(root, "/etc/systemd/system/multi-user.target.wants/firewalld.service", "")
    write(root, "/usr/lib/firewalld/zones/public.xml", '<?xml version="1.0" encoding="utf-8"?>\n<zone>\n'
          '  <short>Public</short>\n  <service name="ssh"/>\n  <service name="dhcpv6-client"/>\n'
          '  <port port="40000-40050" protocol="tcp"/>\n</zone>\n')
    fw = firewall(Sources(environ={}, root=root))
    assert fw == {"tool": "firewalld", "active": True, "zone": "public", "default_incoming": "reject",
                  "allowed": ["40000-40050/tcp", "22/tcp", "546/udp"]}
    assert firewall(Sources(environ={}, root=str(tmp_path / "none"))) is None


def _snap(env, fw, eph=(32768, 60999)):
    return make_snapshot(env=env, network={"firewall": fw, "ip_local_port_range": list(eph)})


def test_net005_ports_the_firewall_leaves_closed_between_nodes():
    fw = {"tool": "firewalld", "active": True, "default_incoming": "reject", "allowed": ["22/tcp", "40000-40050/tcp"]}
    [f] = findings_of(_snap(TWO_NODES, fw), "NET005")
    assert f.severity == "warning" and "ephemeral ports 32768-60999" in f.title and "MASTER_PORT" not in f.title
    ufw = {"tool": "ufw", "active": True, "default_incoming": "deny", "allowed": ["22/tcp"]}
    [f] = findings_of(_snap(TWO_NODES, ufw), "NET005")
    assert "MASTER_PORT 40000" in f.title and "ufw allow from" in f.fix


def test_net005_quiet_when_open_one_node_or_unknown():
    single = {k: v for k, v in TWO_NODES.items() if k not in ("WORLD_SIZE", "GROUP_RANK")}
    ufw = {"tool": "ufw", "active": True, "default_incoming": "deny", "allowed": ["22/tcp"]}
    assert findings_of(_snap(single, ufw), "NET005") == []  # one node: loopback is allowed by ufw's own rules
    for fw in ({"tool": "ufw", "active": False, "default_incoming": "deny", "allowed": ["22/tcp"]},
               {"tool": "ufw", "active": True, "default_incoming": "allow", "allowed": []},
               {"tool": "ufw", "active": True, "default_incoming": "deny", "allowed": ["22/tcp", "from 10.20.0.0/16"]},
               {"tool": "ufw", "active": True, "default_incoming": "deny", "allowed": ["1024-65535/tcp"]},
               None):
        assert findings_of(_snap(TWO_NODES, fw), "NET005") == [], fw
    # rules not readable: said as a note, not claimed
    [f] = findings_of(_snap(TWO_NODES, {"tool": "ufw", "active": True, "default_incoming": "deny", "allowed": None}),
                      "NET005")
    assert f.severity == "info" and "not readable" in f.title
