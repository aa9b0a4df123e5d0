"""Which interface NCCL will bootstrap over when NCCL_SOCKET_IFNAME is unset, and whether the other
hosts can reach it. Pure, over the `network` facts.

NCCL's choice (src/misc/socket.cc, ncclFindInterfaces, NVIDIA/nccl at the catalogue's commit): the
`ib*` interfaces first; else, with NCCL_COMM_ID set, an interface in the same subnet as its address;
else the interfaces that are not `docker*`, `lo` or `virbr*`, in the order the kernel lists them; then
docker, lo, virbr. Everything else (veth, bridges, CNI and tunnel devices) counts as a real interface.
`virbr*` joined the exclusions in NCCL 2.28.3 (commit f1308997, "^docker,lo" became "^docker,lo,virbr");
every older NCCL takes libvirt's bridge like any NIC (NCCL_VIRBR_EXCLUDED_SINCE).
"""
from __future__ import annotations

import ipaddress
import re
from typing import List, Optional, Tuple

from ddpdoctor.facts.env import env_int, env_of
from ddpdoctor.facts.ranks import master_elsewhere  # noqa: F401 - lives beside the rank readings; re-exported
from ddpdoctor.facts.gpu import flag_on

# Interfaces of containers, bridges, tunnels and shapers: never the cluster network by default.
VIRTUAL = ("docker", "veth", "br-", "virbr", "cni", "flannel", "cali", "vxlan", "tun", "tap", "lxc", "kube",
           "weave", "ifb", "dummy", "podman", "zt")
NCCL_SKIPS = ("docker", "lo", "virbr")  # what NCCL's default leaves out (by prefix)
NCCL_SKIPS_BEFORE_VIRBR = ("docker", "lo")  # before 2.28.3: NVIDIA/nccl f1308997, src/misc/socket.cc
NCCL_VIRBR_EXCLUDED_SINCE = (2, 28, 3)


def nccl_version_of(snap) -> Optional[Tuple[int, ...]]:
    """The NCCL torch really loads, as recorded (nccl_loaded); None when it cannot be told."""
    return nccl_loaded(snap)[0]


def nccl_loaded(snap) -> Tuple[Optional[Tuple[int, ...]], str]:
    """(version, where it was read) of the NCCL torch really loads, in the loader's order: torch.cuda.nccl.version()
    (the `torch` facts, read only when a snapshot holds them: gathering them costs an interpreter importing torch);
    else the first LD_PRELOAD NCCL with a version in its file name (ld.so binds libtorch_cuda.so's libnccl.so.2 to a
    preloaded object of that soname: packages.nccl_preloaded, PKG011); else the libnccl.so.N libtorch_cuda.so's
    DT_NEEDED resolves to (packages.torch_nccl, ld.so's search order): its version when its file name carries one,
    the one nvidia-nccl wheel's version when it is the wheel's nvidia/nccl/lib copy, and nothing when torch links
    NCCL statically (the wheel is not what it runs); else, when that was not recorded, the one nvidia-nccl wheel
    installed. (None, "") when none of these tells it."""
    recorded = (getattr(snap, "sections", None) or {}).get("torch")
    raw = recorded.get("nccl_version") if isinstance(recorded, dict) else None
    where = "torch.cuda.nccl.version()" if raw else ""
    pk = snap.get("packages") or {}
    if not raw:
        pre = [e for e in pk.get("nccl_preloaded") or [] if isinstance(e, dict)]
        if pre:
            raw, where = pre[0].get("version"), f"LD_PRELOAD {pre[0].get('path')}"
            if not raw:
                return None, ""  # a preloaded NCCL of unknown version is what runs: the wheel's says nothing
    if not raw:
        versions = pk.get("versions") or {}
        wheels = [(w, versions[w]) for w in ("nvidia-nccl-cu11", "nvidia-nccl-cu12", "nvidia-nccl-cu13")
                  if versions.get(w)]
        linked = pk.get("torch_nccl") if isinstance(pk.get("torch_nccl"), dict) else {}
        if "needed" in linked and linked["needed"] is None:
            return None, ""  # NCCL inside libtorch_cuda.so: the version torch was built with, not recorded
        path = str(linked.get("path") or "")
        if linked.get("version"):
            raw, where = linked["version"], f"{path} ({linked.get('from')})"
        elif path and "/nvidia/nccl/lib/" not in path:
            return None, ""  # a libnccl outside the wheel, whose name carries no version
        elif len(wheels) == 1:
            raw, where = wheels[0][1], f"the {wheels[0][0]} wheel"
    nums = []
    for part in str(raw or "").split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        if not digits:
            break
        nums.append(int(digits))
    return (tuple(nums), where) if nums else (None, "")


def v4(iface: dict) -> List[Tuple[str, Optional[str]]]:
    return [(a.get("address"), a.get("netmask")) for a in iface.get("addresses") or []
            if a.get("family") == "ipv4" and a.get("address")]


def v6(iface: dict) -> List[str]:
    """The interface's IPv6 addresses other than loopback (NCCL skips ::1)."""
    out = []
    for a in iface.get("addresses") or []:
        addr = str(a.get("address") or "")
        if a.get("family") == "ipv6" and addr:
            try:
                if not ipaddress.ip_address(addr.split("%")[0]).is_loopback:
                    out.append(addr)
            except ValueError:
                continue
    return out


def network_of(address: str, netmask: Optional[str]):
    try:
        if netmask:
            return ipaddress.ip_network(f"{address}/{netmask}", strict=False)
        ip = ipaddress.ip_address(address)
        # no netmask recorded: Docker's default bridge is a /16, others are taken as /24
        return ipaddress.ip_network(f"{address}/{16 if ip in ipaddress.ip_network('172.16.0.0/12') else 24}", strict=False)
    except ValueError:
        return None


def same_subnet(iface: dict, remote: str) -> bool:
    try:
        r = ipaddress.ip_address(remote)
    except ValueError:
        return False
    return any((net := network_of(a, m)) is not None and r in net for a, m in v4(iface))


def _ordered(ifaces: list) -> list:
    """Interfaces in the kernel's order: the gathered `order`; where it was not recorded, `lo` first (the kernel
    registers loopback first in every network namespace, ifindex LOOPBACK_IFINDEX = 1: torvalds/linux
    include/net/flow.h, drivers/net/loopback.c) and the others by name."""
    def key(i):
        if isinstance(i.get("order"), int):
            return (i["order"], i.get("name", ""))
        return (1 if i.get("name") == "lo" else 1 << 20, i.get("name", ""))
    return sorted(ifaces, key=key)


def nccl_default_pick(ifaces: list, comm_id_host: Optional[str] = None,
                      skip_virbr: bool = True, ipv6: bool = True) -> Tuple[List[str], str]:
    """(names NCCL's default selects, in order; why), for NCCL_SOCKET_IFNAME unset. `skip_virbr=False`
    is the choice of an NCCL older than 2.28.3, which did not leave virbr* out."""
    skips = NCCL_SKIPS if skip_virbr else NCCL_SKIPS_BEFORE_VIRBR
    # getifaddrs() lists every interface's IPv4 addresses before any IPv6 one, and NCCL keeps an interface with
    # only IPv6 addresses, link-local ones too (it skips IPv6 loopback only: src/os/linux.cc findInterfaces,
    # NVIDIA/nccl 5067397c), unless NCCL_SOCKET_FAMILY=AF_INET.
    up = [i for i in _ordered(ifaces) if i.get("up") is not False]
    usable = [i for i in up if v4(i)] + ([i for i in up if not v4(i) and v6(i)] if ipv6 else [])
    ib = [i["name"] for i in usable if i["name"].startswith("ib")]
    if ib:
        return ib, "the ib* interfaces come first"
    if comm_id_host:
        match = [i["name"] for i in usable if same_subnet(i, comm_id_host)]
        if match:
            return match, f"in the subnet of NCCL_COMM_ID's {comm_id_host}"
    rest = [i["name"] for i in usable if not i["name"].startswith(skips)]
    if rest:
        return rest, ("any interface but docker*, lo and virbr*, in the kernel's order" if skip_virbr else
                      "any interface but docker* and lo, in the kernel's order (NCCL before 2.28.3)")
    for prefix in ("docker", "lo", "virbr"):
        got = [i["name"] for i in usable if i["name"].startswith(prefix)]
        if got:
            return got, f"nothing else: {prefix}"
    return [], "no interface with an IP address"


def hostname_i(ifaces: list) -> List[Tuple[str, str]]:
    """[(address, interface)] as `hostname -I` prints them: getifaddrs() order (every interface's IPv4 addresses, in
    the kernel's interface order, before any IPv6 one), interfaces that are up and not loopback, IPv6 link-local
    addresses left out (the hostname(1) manual: "all addresses for the host ... except the loopback interface and
    IPv6 link-local addresses"). DeepSpeed's runner takes the first as the master address."""
    up = [i for i in _ordered(ifaces) if i.get("up") is not False and i.get("name") != "lo"]
    out = [(a, i["name"]) for i in up for a, _ in v4(i) if not a.startswith("127.")]
    for i in up:
        for a in v6(i):
            try:
                if not ipaddress.ip_address(a.split("%")[0]).is_link_local:
                    out.append((a, i["name"]))
            except ValueError:
                continue
    return out


def is_virtual(iface: dict) -> bool:
    """A virtual interface by name, or one whose addresses are all link-local (169.254/16, fe80::/10): the
    other hosts cannot reach it."""
    if str(iface.get("name", "")).startswith(VIRTUAL):
        return True
    addrs = [a for a, _ in v4(iface)] + v6(iface)
    return bool(addrs) and all(ipaddress.ip_address(a.split("%")[0]).is_link_local for a in addrs)


# ----------------------------------------------------------------------------------- NCCL's IB transport

def nccl_ib_wanted(env, pci) -> bool:
    """Whether NCCL will use its IB/RoCE transport on this host: RDMA devices exist (pci facts) and
    neither NCCL_IB_DISABLE (NCCL_PARAM IbDisable, src/transport/net_ib) nor NCCL_NET=Socket turns it off."""
    if not (pci or {}).get("rdma_devices"):
        return False
    return not flag_on(env, "NCCL_IB_DISABLE") and (env.get("NCCL_NET") or "").strip().lower() != "socket"


def nccl_ib_ports(env, pci) -> dict:
    """The RDMA ports (pci.rdma_ports, "dev:port") that NCCL_IB_HCA selects: NCCL's list syntax, '^' to
    exclude, '=' for exact names, else a name prefix, an optional ':port' (src/transport/net_ib/init.cc,
    ncclIbInit with parseStringList/matchIfList); all of them when it is unset."""
    ports = dict((pci or {}).get("rdma_ports") or {})
    spec = (env.get("NCCL_IB_HCA") or "").strip()
    if not spec:
        return ports
    exclude = spec.startswith("^")
    spec = spec.lstrip("^")
    exact = spec.startswith("=")
    spec = spec.lstrip("=")
    wanted = [w.strip() for w in spec.split(",") if w.strip()]

    def hit(key: str) -> bool:
        dev, _, port = key.partition(":")
        for w in wanted:
            wdev, _, wport = w.partition(":")
            if (dev == wdev if exact else dev.startswith(wdev)) and (not wport or wport == port):
                return True
        return False

    return {k: v for k, v in ports.items() if hit(k) != exclude}


def multi_node(snap) -> Optional[str]:
    """Why we believe the job spans several hosts, or None."""
    launcher = snap.get("launcher") or {}
    env = env_of(snap)
    nnodes = launcher.get("nnodes") or env_int(env, "SLURM_JOB_NUM_NODES") or env_int(env, "SLURM_NNODES")
    if nnodes and nnodes > 1:
        return f"{nnodes} nodes"
    from ddpdoctor.facts.launch import command_of, serving_nodes  # noqa: PLC0415

    # the recorded torchrun / torch.distributed.launch command's --nnodes (its workers' environment carries no node
    # count before torchrun's GROUP_WORLD_SIZE; an elastic range MIN:MAX spans hosts only from MIN > 1)
    raw = str(((command_of(snap, "torchrun") or {}).get("options") or {}).get("nnodes") or "").strip()
    least = raw.split(":", 1)[0].strip()
    if least.isdigit() and int(least) > 1:
        return f"{int(least)} nodes (--nnodes {raw})"

    served = serving_nodes(snap)  # an inference server's own node count (SGLang --nnodes 2; data/serving.json)
    if served:
        return f"{served[1]} nodes ({served[0]} --nnodes {served[1]})"
    lw, w = launcher.get("local_world_size"), launcher.get("world_size")
    if lw and w and w > lw:
        return f"WORLD_SIZE={w} > LOCAL_WORLD_SIZE={lw}"
    remote = None if lw else master_elsewhere(snap)  # a declared local world settles it (above)
    if remote and (w or env_int(env, "WORLD_SIZE") or 0) > 1:
        # the old torch.distributed.launch and hand-set ranks declare no local world: rank 0's store
        # lives at MASTER_ADDR, so a MASTER_ADDR that is none of this host's addresses is a second host
        return f"MASTER_ADDR is another host ({remote})"
    return None


def master_here(snap) -> Optional[str]:
    """How we know MASTER_ADDR (rank 0's store) is this host: a loopback name or address, or an address
    of one of this host's interfaces; None when it is elsewhere or unknown."""
    env = env_of(snap)
    addr = str((snap.get("launcher") or {}).get("master_addr") or env.get("MASTER_ADDR") or "").strip().strip("[]")
    if not addr:
        return None
    if addr.lower() in ("localhost", "127.0.0.1", "::1"):
        return f"MASTER_ADDR={addr} is loopback"
    net = snap.get("network") or {}
    resolved = [a for a in ((net.get("master_addr") or {}).get("addresses") or []) if isinstance(a, str)]
    if not resolved:
        try:  # an address literal is its own resolution (check32: a snapshot with no master_addr record)
            resolved = [str(ipaddress.ip_address(addr.split("%")[0]))]
        except ValueError:
            pass
    own = {str(a.get("address")).split("%")[0] for i in (net.get("interfaces") or []) if isinstance(i, dict)
           for a in (i.get("addresses") or []) if a.get("address")}
    if addr.lower() == str(net.get("hostname") or "").lower() and addr:
        return f"MASTER_ADDR={addr} is this host's name"
    for a in resolved:
        try:
            ip = ipaddress.ip_address(a.split("%")[0])
        except ValueError:
            continue
        if ip.is_loopback:
            return f"MASTER_ADDR={addr} resolves to loopback {a}"
        if a.split("%")[0] in own:
            return f"MASTER_ADDR={addr} is this host's address {a}"
    return None


def master_published_here(snap) -> Optional[str]:
    """Rank 0's view of a job that may span hosts, which multi_node() cannot settle: ranks set by hand
    (no LOCAL_WORLD_SIZE, no node count), WORLD_SIZE > 1, and MASTER_ADDR this host's own routable
    address rather than loopback: the store is published where other hosts can reach it. A guess, to be
    worded as one; None otherwise."""
    launcher = snap.get("launcher") or {}
    env = env_of(snap)
    if launcher.get("local_world_size") or launcher.get("nnodes"):
        return None
    world = launcher.get("world_size") or env_int(env, "WORLD_SIZE") or 0
    if world < 2:
        return None
    here = master_here(snap)
    if not here or "this host's address" not in here:
        return None
    return f"{here}, published to WORLD_SIZE={world} ranks with no local world size declared"


def span_guessed(snap) -> Optional[str]:
    """Why ranks set by hand may span hosts although nothing declares it (a guess, to be worded as one), or None:
    rank 0 publishing its store on this host's routable address (master_published_here), or another rank whose
    MASTER_ADDR names another host yet resolves to loopback here (facts.ranks.master_named_elsewhere_on_loopback)."""
    from ddpdoctor.facts.ranks import master_named_elsewhere_on_loopback  # noqa: PLC0415

    return master_published_here(snap) or master_named_elsewhere_on_loopback(snap)


def span_unknown(snap) -> Optional[str]:
    """Words saying that nothing tells whether the job spans hosts, or None when something does (or may).

    No launcher check knows (torchrun, srun, mpirun, accelerate, deepspeed), no hand-set RANK / WORLD_SIZE /
    MASTER_ADDR and no Slurm allocation: a job started some other way (Ray, exo, a custom server, an operator that
    sets its own names) may take connections from other machines or run alone. Checks whose finding depends on
    that say so as a note instead of guessing either way."""
    launcher = snap.get("launcher") or {}
    env = env_of(snap)
    if launcher.get("kind") not in (None, "none"):
        return None
    if any(env.get(k) for k in ("WORLD_SIZE", "RANK", "MASTER_ADDR", "SLURM_JOB_ID", "PET_NNODES", "PET_RDZV_ENDPOINT")):
        return None
    return ("no launcher, rank or scheduler variable is set here, so check cannot tell whether processes on other "
            "machines connect to this host (a launcher check does not know: Ray, exo, a custom server) or the job "
            "runs on this host alone")


def hosts_counted(snap) -> Optional[int]:
    """The number of hosts a scheduler allocated (Slurm's node count), which, unlike torchrun's
    GROUP_WORLD_SIZE (agents), cannot be several agents on one host; None when no scheduler says."""
    env = env_of(snap)
    return env_int(env, "SLURM_JOB_NUM_NODES") or env_int(env, "SLURM_NNODES")


def nccl_ifname_match(spec: str, names: list) -> tuple:
    """Interfaces NCCL_SOCKET_IFNAME selects, following NCCL's parser: a leading '^' excludes, then
    a leading '=' switches from prefix to exact matching; both apply to the whole comma list."""
    s = spec.strip()
    exclude = s.startswith("^")
    if exclude:
        s = s[1:]
    exact = s.startswith("=")
    if exact:
        s = s[1:]
    items = [i.strip() for i in s.split(",") if i.strip()]

    def hit(name: str) -> bool:
        return any(name == i if exact else name.startswith(i) for i in items)

    chosen = [n for n in names if hit(n) != exclude]
    return chosen, {"exclude": exclude, "exact": exact, "items": items}


# NCCL's default P2P level (ncclTopoCheckP2p, src/graph/paths.cc): PATH_SYS (peer-to-peer across the host bridge
# and between sockets) on x86 CPUs other than Intel and Zhaoxin before 2.23 (v2.19.3-1: `int p2pLevel = PATH_SYS`,
# lowered to PXB for ARM, Intel, Zhaoxin); from v2.23.4-1 PATH_PXB, raised to PATH_SYS on AMD when the node has
# at most two GPUs. Elsewhere PXB, which pcie_p2p_ok models.
NCCL_P2P_PXB_DEFAULT_SINCE = (2, 23)
TORCH_BUNDLING_NCCL_2_23 = (2, 7)  # torch 2.6 pinned nvidia-nccl-cu12 2.21.5, torch 2.7 2.26.2


def nccl_p2p_level_sys(snap, gpus_on_node: int) -> bool:
    """Whether NCCL's default P2P level reaches PATH_SYS on this host (its CPU vendor, NCCL's version, the GPUs
    it joins here); when NCCL's version is not recorded, torch before 2.7 stands for NCCL before 2.23."""
    vendor = str(((snap.get("host") or {}) if "host" in snap else {}).get("cpu_vendor") or "")
    if vendor != "AuthenticAMD":
        return False
    if gpus_on_node <= 2:
        return True
    nccl = nccl_version_of(snap)
    if nccl:
        return nccl[:2] < NCCL_P2P_PXB_DEFAULT_SINCE
    raw = str(((snap.get("packages") or {}).get("versions") or {}).get("torch") or "").split("+")[0]
    torch = tuple(int(x) for x in re.findall(r"\d+", raw)[:2])
    return len(torch) == 2 and torch < TORCH_BUNDLING_NCCL_2_23


def efa_settings_rows() -> list:
    """data/efa_settings.json's rows (aws-ofi-nccl doc/efa-env-var.md): what the plugin's EFA cheatsheet says of each
    variable."""
    import functools  # noqa: PLC0415
    import json  # noqa: PLC0415
    import os  # noqa: PLC0415

    @functools.lru_cache(maxsize=1)
    def _load(path):
        with open(path, encoding="utf-8") as fh:
            return tuple(json.load(fh)["rows"])

    return list(_load(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data",
                                   "efa_settings.json")))


def efa_advice(env: dict) -> list:
    """(name, value, row) for each set variable a row of the EFA cheatsheet is about (an exact name before a prefix)."""
    out = []
    rows = efa_settings_rows()
    for name in sorted(env):
        value = str(env.get(name) or "").strip()
        if not value:
            continue
        row = next((r for r in rows if name in (r.get("names") or [])), None) or \
            next((r for r in rows if r.get("prefix") and name.startswith(r["prefix"])), None)
        if row is None or (row.get("values") and value.lower() not in row["values"]):
            continue
        out.append((name, value, row))
    return out


def nccl_stack_limit() -> dict:
    """data/nccl_stack_limit.json: from which NCCL release it raises its threads' stack itself, and its switch."""
    import json  # noqa: PLC0415
    import os  # noqa: PLC0415

    with open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "nccl_stack_limit.json"),
              encoding="utf-8") as fh:
        return json.load(fh)


def cxi_settings_rows() -> list:
    """data/cxi_settings.json's rows: the settings HPE's Slingshot application note for NCCL calls mandatory."""
    import json  # noqa: PLC0415
    import os  # noqa: PLC0415

    with open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "cxi_settings.json"),
              encoding="utf-8") as fh:
        return list(json.load(fh)["rows"])


def cxi_settings_off(env: dict) -> list:
    """(row, value set or None) for each row of the Slingshot note the environment does not meet."""
    out = []
    for row in cxi_settings_rows():
        value = env.get(row["name"])
        text = str(value).strip() if value is not None else ""
        if "at_least" in row:
            ok = text.isdigit() and int(text) >= row["at_least"]
        else:
            ok = text.lower() in {str(w).lower() for w in row["want"]}
        if not ok:
            out.append((row, value))
    return out


def nccl_bootstrap() -> dict:
    """data/nccl_bootstrap.json: how many interfaces NCCL's bootstrap takes by default (one) and the troubleshooting
    guide's words on UP interfaces the other nodes cannot reach."""
    import json  # noqa: PLC0415
    import os  # noqa: PLC0415

    with open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "nccl_bootstrap.json"),
              encoding="utf-8") as fh:
        return json.load(fh)


def slingshot_nics(snap) -> list:
    """HPE Slingshot NICs here: the cxi driver's /sys/class/cxi_user devices (pci.cxi_devices); when those were not
    recorded, Slingshot's hsn<N> host interfaces (the names HPE's note gives NCCL_SOCKET_IFNAME;
    data/cxi_settings.json)."""
    pci = snap.get("pci") or {}
    cxi = [d for d in pci.get("cxi_devices") or [] if d]
    if not cxi and "network" in snap:
        cxi = [str(i.get("name")) for i in (snap["network"].get("interfaces") or [])
               if isinstance(i, dict) and re.match(r"^hsn\d+$", str(i.get("name") or ""))]
    return cxi


def cxi_without_plugin() -> dict:
    """data/cxi_settings.json without_plugin: NCCL's built-in nets (IB verbs, sockets) and HPE's words on the fallback."""
    import json  # noqa: PLC0415
    import os  # noqa: PLC0415

    with open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "cxi_settings.json"),
              encoding="utf-8") as fh:
        return json.load(fh)["without_plugin"]
