"""The `pci` section: what the PCIe fabric does to GPU peer-to-peer traffic, from sysfs and /proc.

* IOMMU: /sys/class/iommu units, the kernel command line, and each GPU's IOMMU group type
  ("identity" is passthrough; "DMA"/"DMA-FQ" translates every peer-to-peer transfer).
* ACS: the Access Control Services control register of every bridge above a GPU, read from PCI
  config space (the extended capabilities at 0x100+ are readable by root only; otherwise the
  bridge says `readable: false`). Request/completion redirect sends P2P traffic up to the root
  complex, which is what makes NCCL hang or crawl behind a PCIe switch (nccl#2079).
* Link: current versus max speed and width of each GPU's link.
* RDMA devices in /sys/class/infiniband, so NCCL_IB_DISABLE can be judged.

Every path goes through `Sources.path`, so tests build a fake /sys tree.
"""
from __future__ import annotations

from ddpdoctor.facts.pci import norm_bdf  # noqa: F401 - used below and re-exported

import os
import re
from typing import Optional

from ddpdoctor.gather import BOOL, INT, LIST, OBJ, STR, Sources, gatherer, parse_int

BDF = re.compile(r"^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")
NVIDIA = "0x10de"
ACS_CAP_ID = 0x000D
ACS_CTL_BITS = ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl", "DirectTrans")
IOMMU_ARGS = ("intel_iommu", "amd_iommu", "iommu", "iommu.passthrough", "iommu.strict")


def _read(src: Sources, path: str) -> Optional[str]:
    """A sysfs attribute without its newline."""
    text = src.read(path)
    return text.strip() if text is not None else None


def parse_acs(config: bytes) -> dict:
    """Find the ACS extended capability in a config-space dump and decode its control register."""
    if len(config) < 0x104:
        return {"readable": False, "reason": "extended config space not readable (run as root to read ACS)"}
    offset, hops = 0x100, 0
    while offset and 0x100 <= offset <= len(config) - 8 and hops < 64:
        header = int.from_bytes(config[offset:offset + 4], "little")
        if header in (0, 0xFFFFFFFF):
            break
        cap_id, nxt = header & 0xFFFF, (header >> 20) & 0xFFC
        if cap_id == ACS_CAP_ID:
            ctl = int.from_bytes(config[offset + 6:offset + 8], "little")
            return {"readable": True, "present": True, "ctl_raw": ctl,
                    "ctl": {name: bool(ctl >> bit & 1) for bit, name in enumerate(ACS_CTL_BITS)}}
        offset, hops = nxt, hops + 1
    return {"readable": True, "present": False}


def iommu_state(src: Sources) -> dict:
    try:
        units = sorted(os.listdir(src.path("/sys/class/iommu")))
    except OSError:
        units = []
    cmdline = (_read(src, "/proc/cmdline") or "").split()
    args = [a for a in cmdline if a.split("=", 1)[0] in IOMMU_ARGS]
    values = dict(a.split("=", 1) if "=" in a else (a, "") for a in args)
    if values.get("iommu") == "pt" or values.get("iommu.passthrough") == "1":
        state = "passthrough"
    elif values.get("intel_iommu") == "off" or values.get("amd_iommu") == "off" or values.get("iommu") == "off":
        state = "disabled"
    elif units:
        state = "enabled"
    else:
        state = "disabled"
    return {"units": units, "cmdline": args, "state": state}


def _device_facts(src: Sources, bdf: str) -> dict:
    base = f"/sys/bus/pci/devices/{bdf}"
    group_link = src.path(base + "/iommu_group")
    group = os.path.basename(os.readlink(group_link)) if os.path.islink(group_link) else None
    facts = {
        "vendor": _read(src, base + "/vendor"),
        "device": _read(src, base + "/device"),
        "class": _read(src, base + "/class"),
        "numa_node": parse_int(_read(src, base + "/numa_node")),
        "link": {"current_speed": _read(src, base + "/current_link_speed"),
                 "max_speed": _read(src, base + "/max_link_speed"),
                 "current_width": parse_int(_read(src, base + "/current_link_width")),
                 "max_width": parse_int(_read(src, base + "/max_link_width"))},
        "iommu_group": parse_int(group) if group is not None else None,
        # the kernel driver bound to it: "nvidia" for NVML to see it; vfio-pci (passed to a VM), nouveau
        # or none hide it from NVML and CUDA
        "driver": os.path.basename(os.readlink(src.path(base + "/driver"))) if os.path.islink(src.path(base + "/driver"))
        else None,
        "iommu_group_type": _read(src, f"/sys/kernel/iommu_groups/{group}/type") if group is not None else None,
    }
    try:
        real = os.path.realpath(src.path(base))
        chain = [p for p in real.split(os.sep) if BDF.match(p)]
        facts["upstream"] = [norm_bdf(p) for p in chain[:-1]]
    except OSError:
        facts["upstream"] = []
    return facts


def _bridge_facts(src: Sources, bdf: str) -> dict:
    try:
        with open(src.path(f"/sys/bus/pci/devices/{bdf}/config"), "rb") as fh:
            config = fh.read(4096)
    except OSError as exc:
        return {"acs": {"readable": False, "reason": exc.strerror or str(exc)}}
    return {"acs": parse_acs(config)}


# The fields checks read, with their JSON types (the recorded-snapshot schema).
FIELDS = {
    "iommu": OBJ, "iommu.cmdline": LIST, "iommu.cmdline[]": STR, "gpus": OBJ, "gpus.*": OBJ,
    "gpus.*.iommu_group_type": STR, "gpus.*.upstream": LIST, "gpus.*.upstream[]": STR, "bridges": OBJ,
    "bridges.*": OBJ, "bridges.*.acs": OBJ, "bridges.*.acs.ctl": OBJ,
    # issue 13: every recorded field has a declared type, so a hand-edited snapshot is rejected uniformly
    "iommu.state": STR, "iommu.units": LIST, "iommu.units[]": STR, "rdma_devices": LIST, "rdma_devices[]": STR,
    "rdma_virtual_functions": LIST, "rdma_virtual_functions[]": STR,
    "rdma_verbs": OBJ, "rdma_verbs.*": OBJ, "rdma_verbs.*.uverbs": STR, "rdma_verbs.*.present": BOOL,
    "rdma_ports": OBJ, "rdma_ports.*": OBJ, "rdma_ports.*.link_layer": STR, "rdma_ports.*.state": STR,
    "rdma_ports.*.gids": OBJ, "rdma_ports.*.gids.*": OBJ, "rdma_ports.*.gids.*.gid": STR,
    "rdma_ports.*.gids.*.type": STR, "rdma_ports.*.counters": OBJ, "rdma_ports.*.counters.*": INT, "gdr": OBJ, "gdr.nv_mem": BOOL, "gdr.nv_mem_nc": BOOL, "gdr.nvidia_peermem": BOOL,
    "gdr.open_kernel_module": BOOL,
    "gpus.*.vendor": STR, "gpus.*.device": STR, "gpus.*.class": STR, "gpus.*.numa_node": INT, "gpus.*.iommu_group": INT,
    "gpus.*.link": OBJ, "gpus.*.link.current_speed": STR, "gpus.*.link.max_speed": STR, "gpus.*.link.current_width": INT,
    "gpus.*.link.max_width": INT, "bridges.*.acs.readable": BOOL, "bridges.*.acs.present": BOOL,
    "bridges.*.acs.ctl_raw": INT, "bridges.*.acs.ctl.*": BOOL, "bridges.*.acs.reason": STR,
    # issue 26
    "gpus.*.driver": STR, "nvswitches": LIST, "nvswitches[]": STR, "nccl_virtual_topology": BOOL, "net_plugins": LIST, "net_plugins[]": STR,
    # check33 (NET022): HPE Slingshot NICs, /sys/class/cxi_user
    "cxi_devices": LIST, "cxi_devices[]": STR,
    "rdma_drivers": OBJ, "rdma_drivers.*": STR, "verbs_providers": OBJ, "verbs_providers.libibverbs": LIST,
    "verbs_providers.libibverbs[]": STR, "verbs_providers.libraries": LIST, "verbs_providers.libraries[]": STR,
    "verbs_providers.config": LIST, "verbs_providers.config[]": STR, "verbs_providers.ld_so_conf": BOOL,
    # round 11: AMD GPUs as ROCm's kernel driver lists them (KFD topology), with the ISA each one runs
    "amd_gpus": LIST, "amd_gpus[]": OBJ, "amd_gpus[].node": INT, "amd_gpus[].gfx_target_version": INT,
    "amd_gpus[].gfx": STR, "amd_gpus[].device_id": INT,
}

KFD_NODES = "/sys/class/kfd/kfd/topology/nodes"
MAX_KFD_NODES = 64


def gfx_name(gfxv: int) -> str:
    """The LLVM AMDGPU target of a KFD gfx_target_version: libhsakmt decodes it as major = gfxv / 10000 % 100,
    minor = gfxv / 100 % 100, stepping = gfxv % 100 (ROCm/ROCR-Runtime libhsakmt HSA_GET_GFX_VERSION_MAJOR/MINOR/STEP,
    read from the node's properties in libhsakmt/src/topology.c @11fd5c25); the target name writes minor and stepping
    as one hex digit each (90010 -> gfx90a, 90402 -> gfx942, 110000 -> gfx1100)."""
    major, minor, step = (gfxv // 10000) % 100, (gfxv // 100) % 100, gfxv % 100
    return f"gfx{major}{minor:x}{step:x}"


def amd_gpus(src: Sources) -> list:
    """GPU nodes of the KFD topology (/sys/class/kfd/kfd/topology/nodes/N/properties, "name value" lines): a node
    whose gfx_target_version is non-zero is a GPU (CPU nodes report 0). Empty without the amdgpu/KFD driver."""
    try:
        nodes = sorted(os.listdir(src.path(KFD_NODES)), key=lambda n: int(n) if n.isdigit() else 1 << 30)
    except OSError:
        return []
    out = []
    for node in nodes[:MAX_KFD_NODES]:
        if not node.isdigit():
            continue
        props = {}
        for line in (src.read(f"{KFD_NODES}/{node}/properties") or "").splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1].isdigit():
                props[parts[0]] = int(parts[1])
        gfxv = props.get("gfx_target_version") or 0
        if gfxv <= 0:
            continue
        out.append({"node": int(node), "gfx_target_version": gfxv, "gfx": gfx_name(gfxv),
                    "device_id": props.get("device_id")})
    return out

MAX_PLUGIN_DIRS = 32


def nccl_net_plugins(src: Sources) -> list:
    """NCCL net plugins this process's NCCL would dlopen from LD_LIBRARY_PATH: its default name is
    libnccl-net.so, or libnccl-net-<name>.so per NCCL_NET_PLUGIN, and `none` loads none
    (NVIDIA/nccl src/plugin/net.cc). An external plugin (HPC-X's IBext, aws-ofi-nccl) carries its own
    IB transport, which NCCL_IB_DISABLE, a parameter of the internal one, does not reach."""
    env = src.environ
    name = (env.get("NCCL_NET_PLUGIN") or "").strip()
    if name.lower() == "none":
        return []
    wanted = "libnccl-net.so"
    if name:
        first = name.split(",")[0].strip()
        wanted = first if first.startswith("lib") or "/" in first else f"libnccl-net-{first}.so"
        if "/" in wanted:
            return [wanted] if os.path.exists(src.path(wanted)) else []
    out = []
    for d in [x for x in (env.get("LD_LIBRARY_PATH") or "").split(":") if x][:MAX_PLUGIN_DIRS]:
        candidate = os.path.join(d, wanted)
        if os.path.exists(src.path(candidate)) and candidate not in out:
            out.append(candidate)
    return out


@gatherer("pci", fields=FIELDS)
def gather_pci(src: Sources) -> dict:
    root = src.path("/sys/bus/pci/devices")
    try:
        names = sorted(os.listdir(root))
    except OSError as exc:
        return {"unavailable": f"no PCI information ({root}: {exc.strerror or exc})",
                "iommu": iommu_state(src)}
    gpus: dict = {}
    nvswitches: list = []
    for name in names:
        if (_read(src, f"/sys/bus/pci/devices/{name}/vendor") or "").lower() != NVIDIA:
            continue
        cls = (_read(src, f"/sys/bus/pci/devices/{name}/class") or "").lower()
        if cls.startswith("0x0680"):  # "other bridge": an NVSwitch (HGX/DGX fabric)
            nvswitches.append(norm_bdf(name))
            continue
        if not cls.startswith(("0x0300", "0x0302")):  # VGA or 3D controller; not NVSwitch/audio
            continue
        gpus[norm_bdf(name)] = _device_facts(src, name)
    bridges: dict = {}
    for facts in gpus.values():
        for up in facts.get("upstream") or []:
            if up not in bridges:
                sysname = next((n for n in names if norm_bdf(n) == up), up)
                bridges[up] = _bridge_facts(src, sysname)
    try:
        rdma = sorted(os.listdir(src.path("/sys/class/infiniband")))
    except OSError:
        rdma = []
    # the topology NCCL loads by default when NCCL_TOPO_FILE is unset (NVIDIA/nccl src/graph/topo.cc, "/var/run/
    # nvidia-topologyd/virtualTopology.xml"): a VM's real PCIe/NVLink layout written by the host's nvidia-topologyd
    virtual_topology = os.path.exists(src.path("/var/run/nvidia-topologyd/virtualTopology.xml"))
    return {"iommu": iommu_state(src), "gpus": gpus, "bridges": bridges, "rdma_devices": rdma, "nvswitches": nvswitches,
            "nccl_virtual_topology": virtual_topology,
            "net_plugins": nccl_net_plugins(src), "rdma_ports": rdma_ports(src, rdma),
            "rdma_virtual_functions": rdma_virtual_functions(src, rdma),
            "rdma_verbs": rdma_verbs(src, rdma),
            "rdma_drivers": rdma_drivers(src, rdma), "verbs_providers": verbs_providers(src) if rdma else None,
            "gdr": gdr_modules(src) if rdma else None, "amd_gpus": amd_gpus(src), "cxi_devices": cxi_devices(src)}


def cxi_devices(src: Sources) -> list:
    """HPE Slingshot (CXI) NICs: the cxi driver's /sys/class/cxi_user devices (HewlettPackard/shs-cxi-driver
    cxi/cxi_user_core.c, class "cxi_user"; data/cxi_settings.json). [] when there are none."""
    try:
        return sorted(os.listdir(src.path("/sys/class/cxi_user")))
    except OSError:
        return []


def rdma_verbs(src: Sources, devices: list) -> dict:
    """Each RDMA device's verbs character device and whether it is there: /sys/class/infiniband/<dev>/device/
    infiniband_verbs/uverbsN names it (the kernel's Documentation/ABI/stable/sysfs-class-infiniband), and libibverbs'
    ibv_open_device opens /dev/infiniband/uverbsN. A container can see the device in sysfs without the file."""
    out: dict = {}
    for dev in devices[:32]:
        try:
            names = sorted(n for n in os.listdir(src.path(f"/sys/class/infiniband/{dev}/device/infiniband_verbs"))
                           if n.startswith("uverbs"))
        except OSError:
            continue
        if names:
            out[dev] = {"uverbs": names[0], "present": os.path.exists(src.path(f"/dev/infiniband/{names[0]}"))}
    return out


def rdma_drivers(src: Sources, devices: list) -> dict:
    """Each RDMA device's kernel driver: the basename of /sys/class/infiniband/<dev>/device/driver (mlx5_core,
    efa, bnxt_en, ...), which tells which libibverbs provider (rdma-core providers/<name>) serves it."""
    out: dict = {}
    for dev in devices[:32]:
        try:
            out[dev] = os.path.basename(os.readlink(src.path(f"/sys/class/infiniband/{dev}/device/driver")))
        except OSError:
            continue
    return out


# Where rdma-core installs providers (VERBS_PROVIDER_DIR, <libdir>/libibverbs) and where the old libibverbs 1.x
# and MLNX_OFED put lib<name>-rdmav2.so (the library path itself); conda's rdma-core under sys.prefix.
VERBS_LIB_DIRS = ("/usr/lib64", "/usr/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
                  "/usr/local/lib", "/usr/local/lib64", "/lib64", "/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu")


def verbs_providers(src: Sources) -> dict:
    """The userspace verbs providers this environment has (rdma-core libibverbs/dynamic_driver.c: every
    /etc/libibverbs.d/*.driver file names one with a line `driver <name>`, loaded as lib<name>-rdmav<ABI>.so from
    VERBS_PROVIDER_DIR); the libibverbs.so.1 copies found; lists of names, None where a place was unreadable."""
    import sys

    conf_dirs = ld_so_conf_dirs(src)
    dirs = list(VERBS_LIB_DIRS) + [os.path.join(sys.prefix, "lib")]
    dirs += [d for d in (src.environ.get("LD_LIBRARY_PATH") or "").split(":") if d][:MAX_PLUGIN_DIRS]
    dirs += [d for d in conf_dirs or [] if d not in dirs][:MAX_PLUGIN_DIRS]
    libibverbs, libraries = [], []
    for d in dirs:
        for where in (d, os.path.join(d, "libibverbs")):
            try:
                names = os.listdir(src.path(where))
            except OSError:
                continue
            for n in names:
                if n.startswith("libibverbs.so") and where == d and where not in libibverbs:
                    libibverbs.append(where)
                m = re.match(r"lib(.+?)-rdmav\d+\.so$", n)
                if m and m.group(1) not in libraries:
                    libraries.append(m.group(1))
    config = None
    try:
        config = []
        for n in sorted(os.listdir(src.path("/etc/libibverbs.d"))):
            text = _read(src, f"/etc/libibverbs.d/{n}") or ""
            for line in text.splitlines():
                parts = line.split()
                if len(parts) >= 2 and parts[0] == "driver" and parts[1] not in config:
                    config.append(parts[1])
    except OSError:
        config = None
    # ld_so_conf: the dynamic loader's own search list was read too (glibc dlopen: LD_LIBRARY_PATH, the ld.so.cache
    # built from /etc/ld.so.conf, then the default /lib and /usr/lib dirs), so an empty libibverbs list means
    # NCCL's dlopen("libibverbs.so[.1]") fails as well; without it an empty list is only "not found where looked".
    return {"libibverbs": libibverbs, "libraries": sorted(libraries), "config": config,
            "ld_so_conf": conf_dirs is not None}


def ld_so_conf_dirs(src: Sources, path: str = "/etc/ld.so.conf", depth: int = 0) -> Optional[list]:
    """The library directories ldconfig caches (ld.so.conf(5): one directory per line, `include <glob>` lines,
    '#' comments), in order; None when /etc/ld.so.conf cannot be read."""
    import glob

    text = _read(src, path)
    if text is None:
        return None
    out: list = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("include") and depth < 4:
            pattern = line.split(None, 1)[1] if len(line.split(None, 1)) > 1 else ""
            if not pattern.startswith("/"):
                pattern = os.path.join(os.path.dirname(path), pattern)
            for inc in sorted(glob.glob(src.path(pattern))):
                rel = inc if src.root == "/" else "/" + os.path.relpath(inc, src.root)
                for d in ld_so_conf_dirs(src, rel, depth + 1) or []:
                    if d not in out:
                        out.append(d)
        elif line.startswith("/") and line not in out:
            out.append(line)
    return out


def rdma_virtual_functions(src: Sources, devices: list) -> list:
    """The RDMA devices that are SR-IOV virtual functions: their PCI function has a `physfn` link to the
    physical function that made it (the kernel's Documentation/ABI/testing/sysfs-bus-pci, sriov_numvfs)."""
    return [d for d in devices if os.path.lexists(src.path(f"/sys/class/infiniband/{d}/device/physfn"))]


def gdr_modules(src: Sources) -> dict:
    """The peer-memory modules NCCL's IB transport looks for before it uses GPU Direct RDMA (ncclIbGdrSupport,
    src/transport/net_ib/gdr.cc: /sys/kernel/mm/memory_peers/nv_mem[_nc]/version or /sys/module/nvidia_peermem/
    version), and whether the NVIDIA kernel module is the open one (/proc/driver/nvidia/version), which NCCL's
    other route, DMA-BUF, needs."""
    def there(path: str) -> bool:
        return os.path.exists(src.path(path))

    version = _read(src, "/proc/driver/nvidia/version")
    return {"nv_mem": there("/sys/kernel/mm/memory_peers/nv_mem/version"),
            "nv_mem_nc": there("/sys/kernel/mm/memory_peers/nv_mem_nc/version"),
            "nvidia_peermem": there("/sys/module/nvidia_peermem/version"),
            "open_kernel_module": None if version is None else "Open Kernel Module" in version}


MAX_GIDS = 256  # a RoCE port's GID table is typically 16-256 entries; reading stops there
ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"


def rdma_ports(src: Sources, devices: list) -> dict:
    """"dev:port" -> link layer, state and the populated GID entries (index -> gid and RoCE type), from
    /sys/class/infiniband/<dev>/ports/<n>/{link_layer,state,gids/<i>,gid_attrs/types/<i>} (the kernel's
    Documentation/ABI/stable/sysfs-class-infiniband). NCCL's IB transport uses the GID at
    NCCL_IB_GID_INDEX on RoCE ports (src/transport/net_ib/connect.cc, ncclIbGetGidIndex); an all-zero
    entry is an empty slot."""
    out: dict = {}
    for dev in devices[:16]:
        base = f"/sys/class/infiniband/{dev}/ports"
        try:
            ports = sorted(os.listdir(src.path(base)), key=lambda p: int(p) if p.isdigit() else 0)
        except OSError:
            continue
        for port in ports[:4]:
            pdir = f"{base}/{port}"
            gids: dict = {}
            try:
                names = sorted(os.listdir(src.path(f"{pdir}/gids")), key=lambda n: int(n) if n.isdigit() else 0)
            except OSError:
                names = []
            for idx in names[:MAX_GIDS]:
                gid = (_read(src, f"{pdir}/gids/{idx}") or "").strip()
                if not gid or gid == ZERO_GID:
                    continue
                gids[idx] = {"gid": gid, "type": (_read(src, f"{pdir}/gid_attrs/types/{idx}") or "").strip() or None}
            out[f"{dev}:{port}"] = {"link_layer": (_read(src, f"{pdir}/link_layer") or "").strip() or None,
                                    "state": (_read(src, f"{pdir}/state") or "").strip() or None, "gids": gids}
            counters = link_counters(src, pdir)
            if counters:
                out[f"{dev}:{port}"]["counters"] = counters
    return out


# the port's link error counters (counters/<name>, readable without root; prometheus/node_exporter
# collector/infiniband_linux.go @af65f85c reads the same files: link_downed "Number of times the link failed to
# recover from an error state and went down", link_error_recovery "... successfully recovered from an error state")
LINK_COUNTERS = ("link_downed", "link_error_recovery")


def link_counters(src: Sources, pdir: str) -> dict:
    out = {}
    for name in LINK_COUNTERS:
        raw = (_read(src, f"{pdir}/counters/{name}") or "").strip()
        if raw.isdigit():
            out[name] = int(raw)
    return out
