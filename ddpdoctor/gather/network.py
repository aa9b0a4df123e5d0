"""The `network` section: interfaces (psutil), listening TCP ports, and whether MASTER_ADDR resolves.

Name resolution can block on a dead DNS server, so it runs in a daemon thread with a deadline.
"""
from __future__ import annotations

import os
import socket

from ddpdoctor.gather.firewall import firewall, ip_local_port_range
from ddpdoctor.gather.names import RESOLVE_TIMEOUT_S, resolve  # noqa: F401 - re-exported: tests and gatherers import it here
from ddpdoctor.gather import BOOL, INT, LIST, OBJ, STR, Sources, gatherer



def interfaces() -> list:
    import psutil

    stats = psutil.net_if_stats()
    addrs = psutil.net_if_addrs()
    out = []
    order = {n: i for i, n in enumerate(addrs)}  # getifaddrs order: the order NCCL walks them in
    for name in sorted(set(stats) | set(addrs)):
        st = stats.get(name)
        fams = []
        for a in addrs.get(name, []):
            fam = {socket.AF_INET: "ipv4", getattr(socket, "AF_INET6", -1): "ipv6"}.get(a.family)
            if fam:
                fams.append({"family": fam, "address": a.address.split("%")[0],
                             "netmask": a.netmask if isinstance(a.netmask, str) else None})
        out.append({"name": name, "up": bool(st.isup) if st else None, "mtu": st.mtu if st else None,
                    "speed_mbps": st.speed if st else None, "addresses": fams, "order": order.get(name)})
    return out


def interface_bus(src: Sources, name) -> "str | None":
    """Where an interface's device sits: "usb" when /sys/class/net/<name>/device resolves under a USB port
    (NCCL's topology walk then meets a network path that is not a PCI device), "pci" for any other device,
    None for a virtual interface (no device link) or an unreadable one."""
    if not isinstance(name, str) or "/" in name:
        return None
    try:
        real = os.path.realpath(src.path(f"/sys/class/net/{name}/device"))
    except OSError:
        return None
    if not os.path.exists(real):
        return None
    return "usb" if "/usb" in real else "pci"


def listening_ports(src: Sources) -> list:
    """LISTEN sockets from /proc/net/tcp{,6}: cheap, no root needed, no psutil connection scan."""
    ports = set()
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(src.path(path)) as fh:
                next(fh, None)
                for line in fh:
                    parts = line.split()
                    if len(parts) > 3 and parts[3] == "0A":  # TCP_LISTEN
                        ports.add(int(parts[1].rsplit(":", 1)[1], 16))
        except (OSError, ValueError):
            continue
    return sorted(ports)


def default_route(src: Sources) -> "dict | None":
    """{iface, metric} of the IPv4 default route the kernel uses (the lowest-metric 0.0.0.0/0 route that is up, from
    /proc/net/route: Destination and Mask 00000000, RTF_UP 0x1 in Flags; linux include/uapi/linux/route.h), or None
    (no such file: not Linux; no default route). An engine that picks its address from the route to 8.8.8.8 (vLLM
    get_ip(), SGLang get_local_ip_auto(); data/serving.json host_ip) gets this interface's address."""
    text = src.read("/proc/net/route")
    if not text:
        return None
    best = None
    for line in text.splitlines()[1:]:
        parts = line.split()
        if len(parts) < 8:
            continue
        try:
            dest, flags, metric, mask = int(parts[1], 16), int(parts[3], 16), int(parts[6]), int(parts[7], 16)
        except ValueError:
            continue
        if dest == 0 and mask == 0 and flags & 0x1 and (best is None or metric < best["metric"]):
            best = {"iface": parts[0], "metric": metric}
    return best


# The fields checks read, with their JSON types (the recorded-snapshot schema).
FIELDS = {
    "interfaces": LIST, "interfaces[]": OBJ, "interfaces[].name": STR, "interfaces[].up": BOOL,
    "interfaces[].addresses": LIST, "interfaces[].addresses[]": OBJ, "interfaces[].addresses[].address": STR,
    "listening_tcp_ports": LIST, "listening_tcp_ports[]": INT, "master_addr": OBJ,
    "master_addr.addresses": LIST, "master_addr.addresses[]": STR,
    # issue 13: every recorded field has a declared type, so a hand-edited snapshot is rejected uniformly
    "hostname": STR, "interfaces[].mtu": INT, "interfaces[].speed_mbps": INT,
    "interfaces[].addresses[].family": STR, "master_addr.host": STR, "master_addr.error": STR,
    "interfaces[].addresses[].netmask": STR, "interfaces[].order": INT, "interfaces[].bus": STR,
    "firewall": OBJ, "firewall.tool": STR, "firewall.active": BOOL, "firewall.zone": STR,
    "firewall.default_incoming": STR, "firewall.allowed": LIST, "firewall.allowed[]": STR,
    "ip_local_port_range": LIST, "ip_local_port_range[]": INT,
    "own_hostname": OBJ, "own_hostname.host": STR, "own_hostname.addresses": LIST, "own_hostname.addresses[]": STR,
    "own_hostname.error": STR, "own_hostname.canonical": STR,
    "rdzv_endpoint": OBJ, "rdzv_endpoint.host": STR, "rdzv_endpoint.addresses": LIST, "rdzv_endpoint.addresses[]": STR,
    "rdzv_endpoint.error": STR, "rdzv_endpoint.canonical": STR,
    "default_route": OBJ, "default_route.iface": STR, "default_route.metric": INT,
}


def _launch_endpoint(src: Sources) -> str:
    from ddpdoctor.gather.launch import launch_commands

    try:
        cmd = next((c for c in launch_commands(src)["commands"] if c["launcher"] == "torchrun"), None)
    except Exception:  # noqa: BLE001 - a gatherer never raises
        return ""
    return str((cmd or {}).get("options", {}).get("rdzv_endpoint") or "")


def endpoint_host(endpoint: str) -> str:
    """The host of torchrun's --rdzv-endpoint (`host`, `host:port`, `[v6]:port`), as torch's
    parse_rendezvous_endpoint splits it."""
    endpoint = endpoint.strip()
    if endpoint.startswith("["):
        return endpoint[1:].split("]", 1)[0]
    if endpoint.count(":") == 1:
        return endpoint.split(":", 1)[0]
    return endpoint


@gatherer("network", when=("check", "preflight"), fields=FIELDS, required=('interfaces[].addresses[].address', 'interfaces[].name'))
def gather_network(src: Sources) -> dict:
    out: dict = {"hostname": socket.gethostname()}
    try:
        out["interfaces"] = interfaces()
        for iface in out["interfaces"]:
            iface["bus"] = interface_bus(src, iface.get("name"))
    except Exception as exc:  # noqa: BLE001
        out["interfaces"] = None
        out["interfaces_error"] = f"{type(exc).__name__}: {exc}"
    out["listening_tcp_ports"] = listening_ports(src)
    out["default_route"] = default_route(src)
    out["firewall"] = firewall(src)
    out["ip_local_port_range"] = ip_local_port_range(src)
    # what Gloo binds to when GLOO_SOCKET_IFNAME is unset: the addresses this host's own name resolves to
    out["own_hostname"] = resolve(out["hostname"], canonical=True)
    addr = src.environ.get("MASTER_ADDR")
    if addr:
        out["master_addr"] = resolve(addr.strip())
    # torchrun's --rdzv-endpoint given as its PET_ variable: NET008 asks whether it is this host
    # or the --rdzv-endpoint of a torchrun command above this process (the launch section's parent chain)
    endpoint = endpoint_host(src.environ.get("PET_RDZV_ENDPOINT") or _launch_endpoint(src))
    if endpoint:
        out["rdzv_endpoint"] = resolve(endpoint)
    return out
