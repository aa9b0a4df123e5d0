"""The host firewall as its configuration files show it, and the kernel's ephemeral port range.

NCCL and Gloo listen on ephemeral ports (NCCL: ncclSocketListen binds port 0 unless NCCL_COMM_ID forces
one, src/misc/socket.cc), which the kernel picks from net.ipv4.ip_local_port_range. A host firewall that
denies incoming connections by default and opens only a few ports lets the rendezvous through (the
MASTER_PORT) and then blocks NCCL's connections between nodes. The live rules need root (`iptables -S`,
`ufw status`), so this reads what any user can: ufw's and firewalld's configuration files. Read from the
tools' own file formats: ufw's /etc/ufw/ufw.conf (ENABLED), /etc/default/ufw (DEFAULT_INPUT_POLICY) and
/etc/ufw/user.rules ("### tuple ### allow tcp 22 0.0.0.0/0 any 0.0.0.0/0 in"); firewalld's
/etc/firewalld/firewalld.conf (DefaultZone) and the zone's XML (<port>, <service>, <source>, target).
"""
from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from typing import List, Optional

from ddpdoctor.gather import Sources

# firewalld's service files name their ports; the ones a training cluster meets (the rest count as unknown)
SERVICES = {"ssh": ["22/tcp"], "dhcpv6-client": ["546/udp"], "cockpit": ["9090/tcp"], "http": ["80/tcp"],
            "https": ["443/tcp"], "nfs": ["2049/tcp"], "mountd": ["20048/tcp"], "rpc-bind": ["111/tcp"]}


def _read(src: Sources, path: str) -> Optional[str]:
    return src.read(path, 1 << 20)  # a netfilter table can be long: the first MiB holds its policy


def _kv(text: Optional[str], key: str) -> Optional[str]:
    m = re.search(rf"^\s*{key}\s*=\s*\"?([^\"\n]*)\"?", text or "", re.M)
    return m.group(1).strip() if m else None


def _ufw(src: Sources) -> Optional[dict]:
    conf = _read(src, "/etc/ufw/ufw.conf")
    if conf is None:
        return None
    policy = (_kv(_read(src, "/etc/default/ufw"), "DEFAULT_INPUT_POLICY") or "").upper()
    rules = _read(src, "/etc/ufw/user.rules")
    allowed: Optional[List[str]] = None
    if rules is not None:
        allowed = []
        for m in re.finditer(r"^### tuple ### (allow|limit) (\S+) (\S+) (\S+) (\S+) (\S+) in", rules, re.M):
            _, proto, dport, _dst, _sport, source = m.groups()
            if source not in ("0.0.0.0/0", "::/0"):
                allowed.append(f"from {source}")
            else:
                for part in dport.split(","):
                    allowed.append(f"{part.replace(':', '-')}/{proto}")
    return {"tool": "ufw", "active": (_kv(conf, "ENABLED") or "").lower() == "yes",
            "default_incoming": {"DROP": "deny", "REJECT": "reject", "ACCEPT": "allow"}.get(policy), "allowed": allowed}


def _firewalld(src: Sources) -> Optional[dict]:
    conf = _read(src, "/etc/firewalld/firewalld.conf")
    if conf is None:
        return None
    zone = _kv(conf, "DefaultZone") or "public"
    enabled = os.path.exists(src.path("/etc/systemd/system/multi-user.target.wants/firewalld.service"))
    xml = _read(src, f"/etc/firewalld/zones/{zone}.xml") or _read(src, f"/usr/lib/firewalld/zones/{zone}.xml")
    allowed: Optional[List[str]] = None
    default = None
    if xml is not None:
        try:
            root = ET.fromstring(xml)
        except ET.ParseError:
            root = None
        if root is not None:
            target = (root.get("target") or "default").upper()
            default = "allow" if target == "ACCEPT" else "deny" if target == "DROP" else "reject"
            allowed = []
            for port in root.findall("port"):
                allowed.append(f"{port.get('port')}/{port.get('protocol')}")
            for svc in root.findall("service"):
                allowed += SERVICES.get(svc.get("name") or "", [f"service {svc.get('name')}"])
            for source in root.findall("source"):
                allowed.append(f"from {source.get('address') or source.get('ipset')}")
    return {"tool": "firewalld", "active": enabled, "zone": zone, "default_incoming": default, "allowed": allowed}


def firewall(src: Sources) -> Optional[dict]:
    """The first firewall tool configured here, or None when neither ufw nor firewalld is installed."""
    return _ufw(src) or _firewalld(src)


def ip_local_port_range(src: Sources) -> Optional[list]:
    text = _read(src, "/proc/sys/net/ipv4/ip_local_port_range")
    parts = (text or "").split()
    return [int(parts[0]), int(parts[1])] if len(parts) == 2 and all(p.isdigit() for p in parts) else None
