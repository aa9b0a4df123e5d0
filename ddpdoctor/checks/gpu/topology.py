"""How the visible GPUs talk to each other (catalogue B1-B4): P2P, NVLink, PCIe, ACS and IOMMU.

NCCL picks, per pair of GPUs, NVLink or PCIe peer-to-peer when it can, else a copy through host
memory (its SHM transport). These checks read NVML's view of each pair and the PCIe fabric facts
of the `pci` section, and say what NCCL will do with them.
"""
from __future__ import annotations

from ddpdoctor.model import error, info, warning
from ddpdoctor.model.registry import check
from ddpdoctor.facts import gpu_versions, ranks as _ranks
from ddpdoctor.facts.gpu import (CONSUMER, expected_nvlinks, flag_on, nvlink_ok, p2p, pcie_p2p_ok, subjects,
                   version_tuple, view)


@check("GPU002", "no-gpu-p2p", family="gpu", needs=("gpus",), reads=("launcher", "launch", "env"), catalogue=("B1",))
def no_gpu_p2p(snap):
    """Visible GPUs cannot reach each other peer-to-peer (typical of GeForce cards), graded by the job.

    What it checks
        `nvmlDeviceGetP2PStatus(read)` and `(nvlink)` for every pair of visible GPUs that share a
        socket, and the consumer families whose older drivers report P2P that does not work
        (data/gpu_versions.json consumer_p2p: GeForce RTX 40 before driver 550.40.07, accelerate's
        check_cuda_p2p_ib_support). Graded by the job: how many ranks the launcher or the launch
        command puts on this host, and whether NCCL_P2P_DISABLE is set.

    Why it matters
        RTX 40xx cards on drivers before 550.40.07 claim P2P, NCCL uses it, and the first
        all-reduce hangs (NVIDIA/nccl-tests#117; accelerate refuses to start there): an error
        when this host runs several ranks, a warning when no launch says how many, nothing
        when it runs one. Where NVML reports P2P not OK, NCCL turns P2P off for that pair itself
        (NVIDIA/nccl src/graph/paths.cc ncclTopoCheckP2p, "P2P is disabled between connected
        GPUs") and copies through host memory: correct, at a fraction of the bandwidth, and
        NCCL_P2P_DISABLE changes nothing (NVIDIA/nccl#1637), so that is a note, and nothing when
        the job runs one rank on this host. An inference server whose MoE all-to-all maps every local
        peer's memory directly (SGLang --moe-a2a-backend deepep: DeepEP's Buffer::sync
        cudaIpcOpenMemHandle; data/serving.json peer_memory) is an error where any pair of visible GPUs
        lacks P2P and NVLink: it fails at init ("peer access is not supported between these two
        devices", DeepEP#584), with no fallback.

    Example
        4x GeForce RTX 4090 on one workstation: `nvidia-smi topo -p2p r` shows no OK.

    Fix
        On drivers before 550.40.07 with RTX 40xx: upgrade the driver, or
        `export NCCL_P2P_DISABLE=1 NCCL_IB_DISABLE=1`. Otherwise nothing is broken; for more
        bandwidth use GPUs with NVLink or P2P support.
    """
    v = view(snap)
    if len(v.devices) < 2:
        return
    peer = list(_peer_memory_backend(snap, v))
    if peer:
        yield from peer
        return
    ranks, how = _ranks_here(snap)
    driver = v.gpus.get("driver_version")
    for row in gpu_versions.consumer_p2p_defects():
        family = [d["index"] for d in v.devices if row["name_contains"] in str(d.get("name"))]
        fixed = version_tuple(row["driver_fixed"])
        if not family or not version_tuple(driver) or version_tuple(driver) >= fixed \
                or flag_on(v.env, "NCCL_P2P_DISABLE") or ranks == 1:
            continue
        src = row["source"]
        make = error if ranks else warning
        job = (f"this host runs {ranks} ranks ({how})" if ranks else
               "no launch recorded says how many ranks run here: a job with one rank per GPU meets it")
        env = " ".join(f"{k}={val}" for k, val in row["workaround_env"].items())
        yield make(f"{row['name_contains']}xx GPUs with driver {driver}: NCCL will use P2P that does not work and hang",
                   detail=(f"{', '.join(v.short(i) for i in family)} are GeForce {row['name_contains']} series; "
                           f"{row['effect']}. Fixed from driver {row['driver_fixed']} ({src['repo']} {src['path']} "
                           f"@{src['commit'][:8]}, {src['symbol'].split(':')[0]}). {job[0].upper() + job[1:]}."),
                   fix=f"export {env}   # or upgrade the NVIDIA driver to >= {row['driver_fixed']}",
                   subjects=subjects(family, "NCCL_P2P_DISABLE"),
                   evidence={"driver_version": driver, "gpus": [v.device(i).get("name") for i in family],
                             "driver_fixed": row["driver_fixed"], "local_ranks": ranks, "local_ranks_source": how})
        return
    blocked = [p for p in v.pairs if p.get("topology") != "NVML_TOPOLOGY_SYSTEM"
               and p2p(p, "read") not in (None, "OK") and not nvlink_ok(p)]
    if not blocked or ranks == 1:
        return  # one rank on this host: no collective crosses a GPU pair here
    gpus = sorted({p["a"] for p in blocked} | {p["b"] for p in blocked})
    statuses = sorted({str(p2p(p, "read")) for p in blocked})
    consumer = any(CONSUMER.search(str(v.device(i).get("name"))) for i in gpus)
    nccl = gpu_versions.nccl_disables_unreported_p2p()
    yield info(f"no GPU peer-to-peer between {len(blocked)} pair(s) of visible GPUs: NCCL will copy through host memory",
               detail=(f"NVML P2P status {', '.join(statuses)} for " + "; ".join(v.pair_text(p) for p in blocked[:6])
                       + ". NCCL falls back to its SHM transport (GPU -> host memory -> GPU): correct, but all-reduce "
                       "bandwidth is a fraction of P2P" + (" (GeForce cards do not support P2P)" if consumer else "")
                       + f". {nccl['effect'][0].upper() + nccl['effect'][1:]} ({nccl['source']['repo']} "
                       f"{nccl['source']['path']} @{nccl['source']['commit'][:8]})."),
               fix="nothing to fix; for speed: fewer, larger GPUs, or GPUs with NVLink/P2P. Keep /dev/shm large "
                   "(docker: --ipc=host), since that path needs it",
               subjects=subjects(gpus), evidence={"pairs": [[p["a"], p["b"], p2p(p, "read")] for p in blocked],
                                                  "local_ranks": ranks, "local_ranks_source": how})


def _peer_memory_backend(snap, v):
    """GPU002's arm: an inference server whose options choose an all-to-all that maps every local peer GPU's memory
    (data/serving.json peer_memory: SGLang --moe-a2a-backend deepep; DeepEP's Buffer::sync cudaIpcOpenMemHandle) on a
    host where some pair of visible GPUs has neither P2P nor NVLink: it fails at init, NCCL's fallback does not apply."""
    from ddpdoctor.facts.launch import serving_of, serving_table

    wants = [(srv.get("engine"), srv["peer_memory"]) for _cmd, srv in serving_of(snap) if srv.get("peer_memory")]
    if not wants:
        return
    blocked = [p for p in v.pairs if p2p(p, "read") not in (None, "OK") and not nvlink_ok(p)]
    if not blocked:
        return
    engine, option = wants[0]
    row = next((r for r in serving_table()["engines"] if r["name"] == engine), {})
    src = ((row.get("peer_memory") or {}).get("sources") or [{}])[0]
    gpus = sorted({p["a"] for p in blocked} | {p["b"] for p in blocked})
    ok = [p for p in v.pairs if p not in blocked]
    yield error(f"{engine} {option} needs CUDA peer access between every pair of this host's GPUs: {len(blocked)} of "
                f"{len(v.pairs)} pairs have no P2P",
                detail=(f"{(row.get('peer_memory') or {}).get('about', '')} ({src.get('repo')} {src.get('path')} "
                        f"@{str(src.get('commit'))[:8]}). No P2P (NVML status "
                        f"{', '.join(sorted({str(p2p(p, 'read')) for p in blocked}))}): "
                        + "; ".join(v.pair_text(p) for p in blocked[:6]) + (" ..." if len(blocked) > 6 else "")
                        + (". P2P only between: " + ", ".join(f"{p['a']}-{p['b']}" for p in ok[:8]) if ok else "")
                        + ". NCCL's own collectives would fall back to host memory here; this backend does not."),
                fix=(f"drop `{option}` (the MoE all-to-all then goes through NCCL), or run the expert-parallel group "
                     "only on GPUs with P2P between every pair (CUDA_VISIBLE_DEVICES=" +
                     (f"{ok[0]['a']},{ok[0]['b']}" if ok else "<GPUs with P2P>") + "), or on NVLink-connected GPUs"),
                subjects=subjects(gpus),
                evidence={"backend": option, "engine": engine,
                          "pairs_without_p2p": [[p["a"], p["b"], p2p(p, "read")] for p in blocked],
                          "pairs_with_p2p": [[p["a"], p["b"]] for p in ok]})


def _ranks_here(snap) -> tuple:
    """(ranks on this host as the launcher or the launch command declares them, how), or (None, why not): the
    GPU checks do not guess it (facts.ranks.local_ranks().declared())."""
    reading = _ranks.local_ranks(snap)
    n = reading.declared()
    return (n, reading.source) if n else (None, "not declared by a launcher or a recorded launch")


def _between(pci: dict, a_bdf: str, b_bdf: str) -> list:
    """Bridges on the two GPUs' paths below their lowest common ancestor (where P2P turns around)."""
    gpus = pci.get("gpus") or {}
    up_a = (gpus.get(a_bdf) or {}).get("upstream") or []
    up_b = (gpus.get(b_bdf) or {}).get("upstream") or []
    common = 0
    while common < min(len(up_a), len(up_b)) and up_a[common] == up_b[common]:
        common += 1
    return list(dict.fromkeys(up_a[common:] + up_b[common:]))


def _bdf(dev: dict) -> str:
    from ddpdoctor.facts.pci import norm_bdf

    return norm_bdf(dev.get("pci_bus_id") or "")


def _pcie_pairs(v, snap=None) -> list:
    """Pairs NCCL joins with PCIe P2P by default: PXB and closer, or any NVML-readable pair where its default
    level reaches PATH_SYS (AMD CPUs: nccl_p2p_level_sys)."""
    from ddpdoctor.facts.gpu import pcie_p2p_used
    from ddpdoctor.facts.net import nccl_p2p_level_sys

    level_sys = bool(snap) and nccl_p2p_level_sys(snap, len(v.devices))
    return [p for p in v.pairs if pcie_p2p_used(p, level_sys)]


def acs_redirect_hits(snap, v, root_ports: bool = False) -> tuple:
    """(pairs NCCL joins over PCIe whose path has ACS redirect on, the bridges responsible). PXB and closer; with
    `root_ports`, also the pairs NCCL joins across root ports of an AMD host (its default P2P level reaches PATH_SYS)
    whose GPUs' DMA the IOMMU translates: there the redirect hands every peer write to the translating IOMMU
    (NVIDIA/nccl#2079: AMD GPP bridges with ACSCtl 0x001d, fixed by clearing ACS). Under iommu=pt the redirected
    traffic passes untranslated, and ACS on root ports is left alone."""
    pci = snap.get("pci") or {}
    bridges = pci.get("bridges") or {}
    hits, seen_bridges = [], []
    pairs = list(_pcie_pairs(v))
    if root_ports:
        translated = set(iommu_translated(snap, v)[0])
        pairs += [p for p in _pcie_pairs(v, snap) if p not in pairs and (p["a"] in translated or p["b"] in translated)]
    for pair in pairs:
        bad = []
        for bdf in _between(pci, _bdf(v.device(pair["a"])), _bdf(v.device(pair["b"]))):
            ctl = ((bridges.get(bdf) or {}).get("acs") or {}).get("ctl") or {}
            if ctl.get("ReqRedir") or ctl.get("CmpltRedir"):
                bad.append(bdf)
        if bad:
            hits.append(pair)
            seen_bridges += [b for b in bad if b not in seen_bridges]
    return hits, seen_bridges


def acs_unread(snap, v) -> tuple:
    """(pairs NCCL joins over PCIe P2P by default, at least one bridge between them whose ACS state is unknown,
    those bridges). Unknown: the bridge is on the GPUs' recorded path but its `acs` entry is missing or says
    readable: false (its extended config space, where the ACS capability lives, is readable by root only).
    Pairs with no recorded path (no pci.gpus entries) are left out: nothing says a bridge is between them."""
    pci = snap.get("pci") or {}
    bridges = pci.get("bridges") or {}
    out, unread = [], []
    for pair in _pcie_pairs(v):
        between = _between(pci, _bdf(v.device(pair["a"])), _bdf(v.device(pair["b"])))
        bad = [b for b in between if not ((bridges.get(b) or {}).get("acs") or {}).get("readable")]
        if bad:
            out.append(pair)
            unread += [b for b in bad if b not in unread]
    return out, unread


def iommu_translated(snap, v) -> tuple:
    """(visible GPUs doing PCIe P2P whose DMA the IOMMU translates, their group types)."""
    pci = snap.get("pci") or {}
    pairs = _pcie_pairs(v, snap)
    if not pairs:
        return [], {}
    involved = sorted({p["a"] for p in pairs} | {p["b"] for p in pairs})
    gpus_pci = pci.get("gpus") or {}
    types = {i: (gpus_pci.get(_bdf(v.device(i))) or {}).get("iommu_group_type") for i in involved}
    iommu = pci.get("iommu") or {}
    translated = [i for i, t in types.items() if t and t.upper().startswith("DMA")]
    if not translated and not any(types.values()) and iommu.get("state") == "enabled":
        # group types unread: an IOMMU that is on (its units registered in /sys/class/iommu, no iommu=pt or
        # =off on the command line) translates DMA by default, whether the command line or the kernel's
        # default configuration (CONFIG_INTEL_IOMMU_DEFAULT_ON, VT-d in the BIOS) turned it on
        translated = involved
    return translated, types


@check("GPU003", "pcie-acs-redirect", family="gpu", needs=("gpus", "pci"), catalogue=("B2",))
def pcie_acs_redirect(snap):
    """PCIe ACS redirects peer-to-peer traffic between GPUs that NCCL will connect over PCIe.

    What it checks
        For every pair of visible GPUs that NCCL would join with PCIe P2P (no NVLink, NVML P2P
        OK, behind the same switch or bridge), the ACS control register of the bridges between
        them: P2P Request Redirect (ReqRedir) or Completion Redirect (CmpltRedir) set. On an AMD
        host, where NCCL's default P2P crosses root ports, the root-port bridges too when the IOMMU
        translates the GPUs' DMA (under iommu=pt the redirected writes pass untranslated).
        Where a bridge on such a path could not be read (its ACS capability sits in extended
        config space, which only root may read), it says so at info: the state is unknown,
        neither on nor off.

    Why it matters
        With redirect on, every peer write goes up to the root complex and is translated or
        dropped there. NCCL initialises fine and then hangs at the first all-reduce, with the
        GPUs at 100% and no traffic, or crawls (NVIDIA/nccl#2079, NVIDIA/nccl#257,
        NVIDIA/nccl-tests#117; NCCL troubleshooting guide, "PCI Access Control Services").
        Linux turns ACS on for switch ports whenever an IOMMU is enabled.

    Example
        2 GPUs behind a Broadcom PEX switch, `lspci -vvv` shows `ACSCtl: SrcValid+ ReqRedir+
        CmpltRedir+` on the downstream ports.

    Fix
        Disable ACS on those bridges: `sudo setpci -s <bridge> ECAP_ACS+0x6.w=0000` (lost at
        reboot; a BIOS "ACS" option makes it permanent), or `export NCCL_P2P_DISABLE=1` to
        route around it.
    """
    v = view(snap)
    if flag_on(v.env, "NCCL_P2P_DISABLE"):
        return
    hits, seen_bridges = acs_redirect_hits(snap, v, root_ports=True)
    bridges = (snap.get("pci") or {}).get("bridges") or {}
    if not hits:
        pairs, unread = acs_unread(snap, v)
        if pairs:
            gpus = sorted({p["a"] for p in pairs} | {p["b"] for p in pairs})
            reasons = sorted({str(((bridges.get(b) or {}).get("acs") or {}).get("reason") or "not recorded")
                              for b in unread})
            yield info(f"PCIe ACS state unknown between {len(pairs)} pair(s) of GPUs that NCCL joins over PCIe P2P",
                       detail=("The ACS control register of bridge(s) " + ", ".join(unread[:6]) + " on the path of "
                               + "; ".join(v.pair_text(p) for p in pairs[:6]) + " could not be read ("
                               + "; ".join(reasons) + "). With P2P request/completion redirect on there, NCCL "
                               "initialises and then hangs or crawls at the first collective; with it off, P2P is "
                               "fine. This run cannot tell which."),
                       fix=("sudo lspci -vvv | grep -E '^[0-9a-f]|ACSCtl'   # ReqRedir+ or CmpltRedir+ on a bridge "
                            "above the GPUs: disable it (setpci) or export NCCL_P2P_DISABLE=1; or rerun "
                            "`sudo ddpdoctor check` to let it read them"),
                       subjects=subjects(gpus),
                       evidence={"unread_bridges": unread, "reasons": reasons,
                                 "pairs": [[p["a"], p["b"]] for p in pairs]})
        return
    gpus = sorted({p["a"] for p in hits} | {p["b"] for p in hits})
    fix = "; ".join(f"sudo setpci -s {b} ECAP_ACS+0x6.w=0000" for b in seen_bridges[:4])
    yield error(f"PCIe ACS redirects GPU peer-to-peer traffic: NCCL will hang or crawl on {len(hits)} pair(s)",
                detail=("ACS P2P request/completion redirect is on at " + ", ".join(seen_bridges) + ", between "
                        + "; ".join(v.pair_text(p) for p in hits[:6]) + ". NCCL sees P2P as available, uses it, and "
                        "the transfers are bounced to the root complex: a hang after a clean init, or very low bandwidth."),
                fix=f"{fix}   # as root, until reboot; or: export NCCL_P2P_DISABLE=1",
                subjects=subjects(gpus),
                evidence={"bridges": {b: (bridges.get(b) or {}).get("acs") for b in seen_bridges},
                          "pairs": [[p["a"], p["b"]] for p in hits]})


@check("GPU004", "iommu-translation", family="gpu", needs=("gpus", "pci"), catalogue=("B2",))
def iommu_translation(snap):
    """The IOMMU translates DMA for GPUs that NCCL will connect peer-to-peer over PCIe.

    What it checks
        The IOMMU group type of each visible GPU (/sys/kernel/iommu_groups/N/type: "DMA" or
        "DMA-FQ" translate, "identity" is passthrough), or, where groups are unknown, an IOMMU
        that is on (its units in /sys/class/iommu, by the command line or the kernel's default, e.g.
        VT-d enabled in the BIOS) without `iommu=pt`; only when some pair of visible
        GPUs uses PCIe P2P (NVLink traffic does not cross the IOMMU): behind one switch (NCCL's default
        level, PXB), or anywhere on the host under an AMD CPU, where NCCL's default reaches PATH_SYS
        before 2.23 and with at most two GPUs since (ncclTopoCheckP2p, src/graph/paths.cc).

    Why it matters
        With DMA translation, PCIe peer-to-peer between GPUs is remapped or blocked: NCCL hangs
        or runs far below PCIe bandwidth (NVIDIA/nccl#257, NVIDIA/nccl#85; NCCL troubleshooting
        guide, "IOMMU"). The tinygrad P2P driver and NVIDIA both say to use passthrough.

    Example
        `intel_iommu=on` on the kernel command line of a server with 2 GPUs behind one switch.

    Fix
        Add `iommu=pt` to the kernel command line (GRUB_CMDLINE_LINUX in /etc/default/grub),
        `sudo update-grub`, reboot; or `export NCCL_P2P_DISABLE=1`.
    """
    v = view(snap)
    if flag_on(v.env, "NCCL_P2P_DISABLE"):
        return
    translated, types = iommu_translated(snap, v)
    if not translated:
        return
    pairs = _pcie_pairs(v, snap)
    iommu = (snap.get("pci") or {}).get("iommu") or {}
    yield warning(f"the IOMMU translates DMA for {', '.join(v.short(i) for i in translated)}: PCIe P2P between them is "
                  "rerouted",
                  detail=(f"IOMMU state {iommu.get('state')}, kernel arguments {' '.join(iommu.get('cmdline') or []) or 'none'}, "
                          f"group types {', '.join(f'gpu:{i}={t}' for i, t in types.items() if t) or 'unknown'}. NCCL will "
                          "use PCIe P2P for " + "; ".join(v.pair_text(p) for p in pairs[:6])
                          + ", and translated peer DMA hangs or crawls."),
                  fix="sudo sed -i 's/GRUB_CMDLINE_LINUX=\"/GRUB_CMDLINE_LINUX=\"iommu=pt /' /etc/default/grub && "
                      "sudo update-grub && sudo reboot   # or: export NCCL_P2P_DISABLE=1",
                  subjects=subjects(translated), evidence={"iommu": iommu, "group_types": types})


@check("GPU035", "rocm-iommu-not-passthrough", family="gpu", needs=("packages", "pci"), reads=("host", "launcher"))
def rocm_iommu_not_passthrough(snap):
    """A ROCm build of torch runs several local ranks on a kernel booted without `iommu=pt`.

    What it checks
        torch's build (torch.version.hip set: AMD GPUs through HIP and RCCL), the IOMMU arguments of
        the kernel command line, and the ranks on this host. RCCL's own rule (ROCm/rccl
        src/init.cc ncclInit at 0067dbf6): unless /proc/cmdline holds `iommu=pt`, it warns
        "Missing \"iommu=pt\" from kernel command line which can lead to system instablity or hang!",
        except on Hyper-V guests and Cray kernels.

    Why it matters
        With the IOMMU translating, the GPUs' peer-to-peer DMA between ranks is remapped and
        collectives hang with the GPUs at 100% (ROCm/rccl#1129: PyTorch DDP and rccl-tests on 2x
        MI100 hung until `iommu=pt` was added; the ROCm install FAQ, "Application hangs on
        Multi-GPU systems"). NVIDIA hosts are GPU004's.

    Example
        torchrun --nproc-per-node 2 on a ROCm 6 host whose /proc/cmdline has no iommu= argument.

    Fix
        Add `iommu=pt` to GRUB_CMDLINE_LINUX_DEFAULT in /etc/default/grub, `sudo update-grub`,
        reboot, and check `cat /proc/cmdline`.
    """
    from ddpdoctor.facts.ranks import local_ranks

    hip = ((snap.get("packages") or {}).get("torch_build") or {}).get("hip")
    if not hip:
        return
    iommu = (snap.get("pci") or {}).get("iommu") or {}
    args = [str(a) for a in iommu.get("cmdline") or []]
    if "iommu=pt" in args or iommu.get("state") == "passthrough":
        return
    host = (snap.get("host") or {}) if "host" in snap else {}
    if "cray" in str(host.get("kernel") or "").lower() \
            or str(host.get("virtualization") or "").lower() in ("microsoft", "hyperv", "hyper-v"):
        return  # RCCL does not warn there
    nlocal, how = local_ranks(snap)
    if not nlocal or nlocal < 2:
        return
    yield warning(f"torch is a ROCm (HIP {hip}) build running {nlocal} ranks on this host, and the kernel was booted "
                  "without iommu=pt: RCCL warns of instability or hangs",
                  detail=(f"Kernel IOMMU arguments: {' '.join(args) or 'none'} (IOMMU state {iommu.get('state')}). RCCL "
                          "prints 'Missing \"iommu=pt\" from kernel command line which can lead to system instablity "
                          "or hang!' (src/init.cc) and multi-GPU collectives hang with the GPUs busy "
                          f"(ROCm/rccl#1129). Ranks on this host: {nlocal} ({how})."),
                  fix="sudo sed -i 's/GRUB_CMDLINE_LINUX_DEFAULT=\"/GRUB_CMDLINE_LINUX_DEFAULT=\"iommu=pt /' "
                      "/etc/default/grub && sudo update-grub && sudo reboot   # then: cat /proc/cmdline",
                  subjects=["kernel:iommu"], evidence={"torch_hip": hip, "iommu": iommu, "local_ranks": nlocal})


@check("GPU005", "nvlink-p2p-disabled", family="gpu", needs=("gpus",), catalogue=("B3",))
def nvlink_p2p_disabled(snap):
    """GPUs with active NVLinks, which NVML says cannot use NVLink peer-to-peer with each other.

    What it checks
        Pairs of visible GPUs that both have active NVLinks, and either a link between them or
        a model that is always NVLink-connected (SXM/HGX), while `nvmlDeviceGetP2PStatus(nvlink)`
        is not OK.

    Why it matters
        NCCL then warns "P2P is disabled between NVLINK connected GPUs 1 and 0. This should not
        be the case given their connectivity, and is probably due to a hardware issue" and falls
        back to PCIe or host memory, at a tenth of the bandwidth (NVIDIA/nccl#2329,
        NVIDIA/nccl#340). On NVSwitch systems a stopped nvidia-fabricmanager looks the same.

    Example
        An HGX A100 board after a driver upgrade without restarting nvidia-fabricmanager.

    Fix
        `systemctl status nvidia-fabricmanager` on NVSwitch systems; `nvidia-smi nvlink -s` and
        `nvidia-smi topo -p2p n`; if it persists, reset the GPUs or open a hardware ticket.
    """
    v = view(snap)
    active = {d["index"]: [l for l in d.get("nvlinks") or [] if l.get("active")] for d in v.devices}
    bad = []
    for pair in v.pairs:
        a, b = pair["a"], pair["b"]
        if not active.get(a) or not active.get(b) or p2p(pair, "nvlink") in (None, "OK"):
            continue
        b_bdf, a_bdf = _bdf(v.device(b)), _bdf(v.device(a))
        from ddpdoctor.facts.pci import norm_bdf

        direct = any(norm_bdf(l.get("remote_pci_bus_id") or "") == b_bdf for l in active[a]) or \
            any(norm_bdf(l.get("remote_pci_bus_id") or "") == a_bdf for l in active[b])
        if direct or (expected_nvlinks(v.device(a).get("name")) and expected_nvlinks(v.device(b).get("name"))):
            bad.append(pair)
    if bad:
        gpus = sorted({p["a"] for p in bad} | {p["b"] for p in bad})
        yield warning(f"NVLink-connected GPUs cannot use NVLink P2P on {len(bad)} pair(s)",
                      detail=("NVML P2P status over NVLink: " + "; ".join(
                          f"{v.short(p['a'])} <-> {v.short(p['b'])}: {p2p(p, 'nvlink')}" for p in bad[:6])
                          + ". NCCL will print 'P2P is disabled between NVLINK connected GPUs' and fall back to PCIe "
                          "or host memory."),
                      fix="systemctl status nvidia-fabricmanager   # NVSwitch systems; then: nvidia-smi nvlink -s; "
                          "nvidia-smi topo -p2p n",
                      subjects=subjects(gpus), evidence={"pairs": [[p["a"], p["b"], p2p(p, "nvlink")] for p in bad]})


@check("GPU006", "nvlink-links-down", family="gpu", needs=("gpus",), catalogue=("B3",))
def nvlink_links_down(snap):
    """A visible GPU has fewer active NVLinks than its model always has.

    What it checks
        `nvmlDeviceGetNvLinkState` per link of SXM/HGX parts, against the count each model ships
        with (A100 SXM4: 12, H100 SXM5 and H200: 18, V100 SXM2: 6, A800/H800: 8). PCIe cards
        are skipped: their links depend on which bridges were fitted.

    Why it matters
        A link that is down (badly seated, failed) lowers every all-reduce that crosses this GPU,
        silently: NCCL uses the remaining links (Azure/azhpc-diagnostics#73, NVIDIA/nccl#340).
        When no GPU has any link up, it is one finding about the node (tatsu-lab/stanford_alpaca#32:
        a provider's 8x A100 routing through the host bridge), not one per GPU.

    Example
        `nvidia-smi nvlink -s -i 3` shows "Link 7: <inactive>" on an 8x A100 node.

    Fix
        Drain the node and open a hardware ticket (reseat the GPU/baseboard); until then expect
        lower bandwidth.
    """
    v = view(snap)
    short = []
    for dev in v.devices:
        want = expected_nvlinks(dev.get("name"))
        links = dev.get("nvlinks")
        if not want or not isinstance(links, list) or "nvlinks" in (dev.get("errors") or {}):
            continue
        up = [l["link"] for l in links if l.get("active")]
        if len(up) < want:
            short.append((dev, want, links, up))
    if len(short) > 1 and all(not up for _, _, _, up in short):
        # one fault, not one per GPU: no NVLink is up anywhere (a VM or node whose NVLinks were never enabled, the
        # NVSwitch fabric not trained), and NCCL routes every pair through PCIe and the host bridge
        idx = [dev["index"] for dev, *_ in short]
        yield warning(f"no NVLink is active on {len(idx)} GPUs ({', '.join(v.short(i) for i in idx)}) that have "
                      f"{short[0][1]} each",
                      detail=("Every GPU of this model ships with NVLinks, and none is up: NCCL routes every pair "
                              "through PCIe and the host bridge (nvidia-smi topo -m shows PHB or SYS instead of NV#), "
                              "several times slower. Links down on every GPU at once point to the node's set-up (a VM "
                              "or cloud instance without NVLink passthrough, the fabric not trained after a driver "
                              "change), not to one badly seated card."),
                      fix="nvidia-smi topo -m; nvidia-smi nvlink -s   # confirm, then ask the provider/admin to enable "
                          "NVLink (fabric manager, VM passthrough) or move to a correctly configured node",
                      subjects=subjects(idx), evidence={"gpus": idx, "expected_each": short[0][1], "active_each": 0})
        return
    for dev, want, links, up in short:
        down = [l["link"] for l in links if not l.get("active")]
        n = dev["index"]
        missing = want - len(links) if len(links) < want else 0
        what = ", ".join(f"link {l}" for l in down) + (" inactive" if down else "")
        if missing:
            what += (", " if down else "") + f"{missing} link(s) not reported at all"
        yield warning(f"{v.label(n)} has {len(up)} of {want} NVLinks active ({what})",
                      detail=(f"A healthy {dev.get('name')} has {want} active NVLinks. Traffic through this GPU "
                              "uses the rest, so every collective that crosses it is slower."),
                      fix=f"nvidia-smi nvlink -s -i {n}   # confirm, then drain the node and open a hardware ticket",
                      subjects=subjects([n]), evidence={"active": up, "inactive": down, "expected": want})


@check("GPU007", "pcie-width-downtrained", reads=("pci",), family="gpu", needs=("gpus",), catalogue=("B4",))
def pcie_width_downtrained(snap):
    """A visible GPU's PCIe link runs narrower than the width it and its slot support, or at a lower
    generation while the GPU is busy.

    What it checks
        `nvmlDeviceGetCurrPcieLinkWidth` against `nvmlDeviceGetMaxPcieLinkWidth` (which already
        accounts for the slot), or /sys/bus/pci/devices/<bdf>/current_link_width against
        max_link_width. The link *generation* drops at idle to save power and comes back under
        load, so a lower current generation is normal on an idle GPU; it is a fault on a busy one.
        `nvmlDeviceGetMaxPcieLinkGeneration` is "the maximum PCIe link generation possible with this
        device and system" (nvml.h: a Gen2 device in a Gen1 bus reports 1), so the slot is already
        accounted for. Busy means both signals NVML gives that are known say so: the clocks-event
        reasons lack GpuIdle (nvmlClocksEventReasonGpuIdle: "nothing is running on the GPU and the
        clocks are dropping to Idle state") and the SM clock is at least half its maximum.

    Why it matters
        An x16 GPU training at x4 or x8 moves host-to-device data and any PCIe P2P traffic at a
        quarter or half the bandwidth: a bad riser, a dirty slot or a BIOS setting
        (janhq/jan#183, Syllo/nvtop#6, NVIDIA/open-gpu-kernel-modules#1010). A link held at Gen2
        under load runs at an eighth of Gen5 (local-inference-lab/rtx6kpro#88: a switch port with
        Hardware Autonomous Speed Disable kept one GPU at Gen2 x16 for hours of training, nothing logged).

    Example
        `nvidia-smi -q` shows "Link Width Max 16x Current 8x", or "Link Generation Max 5 Current 2"
        while the GPU runs at full clocks.

    Fix
        Reseat the card or riser, check the BIOS slot bifurcation setting; `sudo lspci -vvv -s
        <bdf> | grep LnkSta` confirms.
    """
    v = view(snap)
    pci_gpus = (snap.get("pci") or {}).get("gpus") or {}
    for dev in v.devices:
        pcie = dev.get("pcie") or {}
        cur, top = pcie.get("width_current"), pcie.get("width_max")
        source = "NVML"
        if not (isinstance(cur, int) and isinstance(top, int)):
            link = (pci_gpus.get(_bdf(dev)) or {}).get("link") or {}
            cur, top, source = link.get("current_width"), link.get("max_width"), "sysfs"
        if isinstance(cur, int) and isinstance(top, int) and 0 < cur < top:
            n = dev["index"]
            yield warning(f"{v.label(n)} PCIe link runs at x{cur} instead of x{top}",
                          detail=(f"{source}: width x{cur} of x{top} (generation {pcie.get('gen_current')} of "
                                  f"{pcie.get('gen_max')}; a lower generation at idle is normal, a narrower width is not). "
                                  "Host-to-GPU copies and PCIe P2P run at a fraction of their bandwidth."),
                          fix=f"sudo lspci -vvv -s {_bdf(dev)} | grep -E 'LnkCap|LnkSta'   # then reseat the card/riser, "
                              "check the BIOS slot setting",
                          subjects=subjects([n]), evidence={"pcie": pcie, "source": source})
            continue
        gen, gen_top = pcie.get("gen_current"), pcie.get("gen_max")
        if isinstance(gen, int) and isinstance(gen_top, int) and 0 < gen < gen_top and _busy(dev):
            n = dev["index"]
            clocks = dev.get("clocks") or {}
            yield warning(f"{v.label(n)} PCIe link runs at Gen{gen} instead of Gen{gen_top} while the GPU is busy",
                          detail=(f"NVML: generation {gen} of {gen_top} (the maximum this GPU and its slot support) with "
                                  f"the SM clock at {clocks.get('sm_mhz')} of {clocks.get('sm_max_mhz')} MHz and no GpuIdle "
                                  "clocks-event reason. The generation drops at idle and must come back under load; a link "
                                  "held low while busy (a switch or root port with autonomous speed changes disabled, a "
                                  "BIOS speed cap, a marginal riser) moves host-to-GPU copies and PCIe P2P at a fraction "
                                  "of their bandwidth."),
                          fix=f"sudo lspci -vvv -s {_bdf(dev)} | grep -E 'LnkCap|LnkSta'   # under load; then check the "
                              "BIOS/switch link-speed settings and the riser",
                          subjects=subjects([n]), evidence={"pcie": pcie, "clocks": clocks,
                                                            "throttle_reasons": dev.get("throttle_reasons")})


def _busy(dev: dict) -> bool:
    """True when every load signal NVML gave says the GPU is working: no GpuIdle clocks-event reason and the
    SM clock at least half its maximum. Needs the clock pair; an unknown reason mask is not counted against."""
    clocks = dev.get("clocks") or {}
    sm, sm_top = clocks.get("sm_mhz"), clocks.get("sm_max_mhz")
    if not (isinstance(sm, int) and isinstance(sm_top, int) and sm_top > 0 and sm * 2 >= sm_top):
        return False
    names = (dev.get("throttle_reasons") or {}).get("names")
    return not (isinstance(names, list) and "GpuIdle" in names)


@check("GPU033", "resizable-bar-uneven", family="gpu", needs=("gpus",))
def resizable_bar_uneven(snap):
    """GPUs of the same model on this host have BAR1 apertures of different sizes: resizable BAR is
    active on some of them only.

    What it checks
        `nvmlDeviceGetBAR1MemoryInfo(...).bar1Total` of every visible GPU, grouped by model name:
        within one model, the largest aperture at least 4 times the smallest. Cards of one model on
        one host that are set up alike report the same BAR1 size; a 256 MiB aperture next to a
        32 GiB one means resizable BAR (with "Above 4G decoding") took effect on some cards only.

    Why it matters
        CUDA peer-to-peer over PCIe reaches a peer's memory through its BAR1 window. With the
        small legacy aperture on some cards, P2P between them fails or falls back, and NCCL's P2P
        transport between those GPUs errors or hangs while the others work
        (aikitoria/open-gpu-kernel-modules#22: simpleP2P failing on 4x RTX 3090 until the other
        cards' vBIOS was updated so that resizable BAR activated).

    Example
        `nvidia-smi -q -d MEMORY` shows "BAR1 Memory Usage Total: 32768 MiB" on GPU 0 and
        "256 MiB" on GPUs 1-3.

    Fix
        Enable "Above 4G decoding" and "Resizable BAR" in the BIOS; for cards where it still does
        not take effect, update the card's vBIOS; then check BAR1 again with `nvidia-smi -q -d MEMORY`.
    """
    v = view(snap)
    by_model: dict = {}
    for dev in v.devices:
        size = (dev.get("bar1") or {}).get("total_bytes")
        if isinstance(size, int) and size > 0 and dev.get("name"):
            by_model.setdefault(dev["name"], []).append((dev["index"], size))
    for model, sizes in sorted(by_model.items()):
        if len(sizes) < 2:
            continue
        top = max(b for _, b in sizes)
        small = [n for n, b in sizes if b * 4 <= top]
        if not small:
            continue
        mib = {n: b // 2 ** 20 for n, b in sizes}
        yield warning(f"resizable BAR is active on only some {model} GPUs: BAR1 of "
                      + ", ".join(f"GPU {n} {mib[n]} MiB" for n in small) + f" against {top // 2 ** 20} MiB",
                      detail=("The same model reports BAR1 apertures of different sizes, so resizable BAR (with Above 4G "
                              "decoding) took effect on some cards only. CUDA P2P over PCIe maps a peer through its BAR1: "
                              "P2P and NCCL's P2P transport between these GPUs fail, hang or fall back."),
                      fix="enable 'Above 4G decoding' and 'Resizable BAR' in the BIOS, update the vBIOS of the cards "
                          "where it stays off; verify with `nvidia-smi -q -d MEMORY` (BAR1 Memory Usage Total)",
                      subjects=subjects(small), evidence={"bar1_mib": mib, "model": model})


@check("GPU017", "cross-socket-pairs", family="gpu", needs=("gpus",))
def cross_socket_pairs(snap):
    """Visible GPUs on different CPU sockets, with no NVLink between them.

    What it checks
        Pairs whose NVML common ancestor is NVML_TOPOLOGY_SYSTEM (SYS in `nvidia-smi topo -m`:
        the path crosses the inter-socket link, QPI/UPI/xGMI) and that have no NVLink P2P.

    Why it matters
        NCCL does not use PCIe P2P across CPU host bridges by default (its P2P level is PXB,
        except for pairs of GPUs on AMD CPUs; see NCCL `src/graph/paths.cc`, ncclTopoCheckP2p):
        these pairs go through host memory (the SHM transport) and across the socket link, and
        the ring's slowest hop is usually this one. Ranks on the wrong socket also pay for remote
        memory.

    Example
        4 PCIe GPUs split 2+2 across the two sockets of a dual-Xeon server.

    Fix
        Prefer GPUs on one socket for small jobs (`CUDA_VISIBLE_DEVICES` from `nvidia-smi topo
        -m`), bind each rank to its GPU's NUMA node (`torchrun --numa-binding node`, or numactl),
        and keep /dev/shm large. `NCCL_P2P_LEVEL=SYS` forces P2P across sockets: measure first.
    """
    v = view(snap)
    sys_pairs = [p for p in v.pairs if p.get("topology") == "NVML_TOPOLOGY_SYSTEM" and not nvlink_ok(p)]
    if not sys_pairs:
        return
    gpus = sorted({p["a"] for p in sys_pairs} | {p["b"] for p in sys_pairs})
    numa = {i: v.device(i).get("numa_node") for i in gpus}
    yield info(f"{len(sys_pairs)} pair(s) of visible GPUs cross CPU sockets without NVLink: NCCL routes them through "
               "host memory",
               detail=("Pairs at SYS distance: " + "; ".join(v.pair_text(p) for p in sys_pairs[:8])
                       + f". NUMA nodes: {', '.join(f'gpu:{i}={n}' for i, n in numa.items())}. NCCL will not use P2P "
                       "across the socket link by default, so these hops use its SHM transport and the inter-socket "
                       "bandwidth."),
               fix="nvidia-smi topo -m   # pick GPUs on one socket for small jobs: export CUDA_VISIBLE_DEVICES=...; "
                   "bind ranks to their GPU's NUMA node (numactl --cpunodebind=N --membind=N)",
               subjects=subjects(gpus), evidence={"pairs": [[p["a"], p["b"]] for p in sys_pairs], "numa": numa})


@check("GPU031", "p2p-in-virtual-machine", family="gpu", needs=("gpus", "host"), reads=("pci",))
def p2p_in_virtual_machine(snap):
    """GPUs passed through to a virtual machine report PCIe peer-to-peer that may not work, or have none.

    What it checks
        Whether this host is a virtual machine (the CPU's `hypervisor` flag, named from the DMI
        vendor) and NVML reports P2P without NVLink between visible GPUs, at any topology level (a
        VM's PCIe tree is the hypervisor's invention). And a VM whose GPUs have no P2P between any
        pair while NCCL has no topology (NCCL_TOPO_FILE unset, no
        /var/run/nvidia-topologyd/virtualTopology.xml): collectives crawl through host memory.

    Why it matters
        Inside a VM, peer-to-peer depends on the hypervisor: the PCIe topology it exposes, ACS and
        ATS on the host, and driver overrides. The driver can report P2P as working while peer
        writes land elsewhere, and NCCL's P2P transport then hangs at the first collective or
        returns wrong results (NVIDIA/nccl#2335: 2x RTX 3090 under QEMU/VFIO, P2P 'OK' both ways).

    Example
        A Proxmox VM with two PCIe GPUs passed through and `nvidia-smi topo -p2p r` showing OK.

    Fix
        Verify P2P before training (p2pBandwidthLatencyTest from cuda-samples, or
        `ddpdoctor comm --gpus 2`); if it hangs or is wrong, `export NCCL_P2P_DISABLE=1`.
    """
    hv = snap["host"].get("virtualization")
    if not hv:
        return
    v = view(snap)
    if flag_on(v.env, "NCCL_P2P_DISABLE"):
        return
    # any pair the driver reports P2P for, whatever topology level the VM's virtual PCIe tree shows: that tree
    # is the hypervisor's invention, and NCCL_P2P_LEVEL or a P2P clique makes NCCL use the pair anyway
    pairs = [p for p in v.pairs if not nvlink_ok(p) and p2p(p, "read") == "OK"]
    if not pairs:
        yield from _vm_without_p2p(snap, v, hv)
        return
    gpus = sorted({p["a"] for p in pairs} | {p["b"] for p in pairs})
    yield warning(f"this host is a virtual machine ({hv}) and NVML reports PCIe P2P between "
                  f"{', '.join(v.short(i) for i in gpus)}: it may not work as reported",
                  detail=("Peer-to-peer between passed-through GPUs depends on the hypervisor (the topology it exposes, ACS "
                          "and ATS on the host); NCCL uses it for " + "; ".join(v.pair_text(p) for p in pairs[:6])
                          + ", and where it does not really work NCCL hangs at the first collective or returns wrong "
                            "results (NVIDIA/nccl#2335)."),
                  fix="ddpdoctor comm --gpus 2   # or cuda-samples' p2pBandwidthLatencyTest; if it hangs: export NCCL_P2P_DISABLE=1",
                  subjects=subjects(gpus), evidence={"virtualization": hv, "pcie_p2p_pairs": [[p["a"], p["b"]] for p in pairs]})


def _vm_without_p2p(snap, v, hv: str):
    """Several GPUs of a VM with no P2P and no NVLink between any pair, and no topology for NCCL: NCCL moves every
    intra-node byte through host memory and tunes its rings and channels to the hypervisor's invented PCIe tree.
    NCCL loads NCCL_TOPO_FILE, or by default /var/run/nvidia-topologyd/virtualTopology.xml (NVIDIA/nccl
    src/graph/topo.cc@5067397c; docs/userguide env.rst NCCL_TOPO_FILE), for exactly this. Reports: NVIDIA/nccl#175
    (1080 Ti passed to QEMU, 'chipset not supported', NCCL performance very bad), pytorch/pytorch#127077 (g5 VM, the
    instance's topology XML from aws-ofi-nccl recovered most of the all-reduce bandwidth)."""
    if len(v.devices) < 2 or not v.pairs or (v.env.get("NCCL_TOPO_FILE") or "").strip():
        return
    if any(nvlink_ok(p) or p2p(p, "read") == "OK" for p in v.pairs):
        return
    if (snap.get("pci") or {}).get("nccl_virtual_topology") is True:
        return
    gpus = sorted({p["a"] for p in v.pairs} | {p["b"] for p in v.pairs})
    yield warning(f"this host is a virtual machine ({hv}) whose {len(gpus)} GPUs have no P2P between any pair, and NCCL "
                  "has no topology file: collectives between them go through host memory on the hypervisor's PCIe tree",
                  detail=("NCCL detects the topology the VM shows (the hypervisor's invention), finds no P2P and copies "
                          "through shared host memory; it reads the real layout from NCCL_TOPO_FILE or, by default, "
                          "/var/run/nvidia-topologyd/virtualTopology.xml (NVIDIA/nccl src/graph/topo.cc), and neither is "
                          "there. All-reduce between these GPUs is slow (NVIDIA/nccl#175; pytorch/pytorch#127077, where "
                          "the instance's topology XML recovered most of the bandwidth). GPUs that support P2P (data-centre "
                          "parts) may get it with the hypervisor's ACS/ATS settings; consumer GPUs do not."),
                  fix="export NCCL_TOPO_FILE=<the instance type's topology XML>   # cloud: the provider's (e.g. aws-ofi-nccl's); "
                      "measure with `ddpdoctor comm --gpus 2`",
                  subjects=subjects(gpus), evidence={"virtualization": hv, "pairs_without_p2p": len(v.pairs),
                                                     "nccl_virtual_topology": (snap.get("pci") or {}).get("nccl_virtual_topology")})


# Docker's default address pools for bridge networks (dockerd --default-address-pool: 172.17-31.0.0/16 and
# 192.168.0-240.0/20): a bridge network lives on one host; overlay networks span hosts and default to 10.0.0.0/8.
_DOCKER_BRIDGE_POOLS = ("172.16.0.0/12", "192.168.0.0/16")


def _second_node_on_master_host(launcher: dict, container: str, world: int, local: int, addr: str, snap):
    """A torchrun agent of node_rank > 0 in a container whose own address is MASTER_ADDR: node 0 is on this host too.

    Under torchrun MASTER_ADDR is node 0's (the static rendezvous: --master_addr; GROUP_RANK is this agent's node
    rank). When it is an address of this container, it is the host's (host network, as a bridge-mode container has
    only its own), so another container of this machine is "node 0". With --network=host both share the host's
    name and boot_id, so NCCL's host hash (src/misc/utils.cc, getHostHash) puts the two "nodes" on one host and its
    topology search asks NVML for the other container's GPU, which this one cannot see
    ("nvmlDeviceGetHandleByPciBusId() failed: Not Found", graph/xml.cc; NVIDIA/nccl#1529)."""
    node = launcher.get("node_rank")
    if not isinstance(node, int) or node <= 0:
        return
    devices = [d for d in (snap["gpus"].get("devices") or []) if isinstance(d, dict)]
    yield warning(f"node {node} of this job runs in a {container} container whose own address is MASTER_ADDR ({addr}): "
                  "node 0 is another container of this same host",
                  detail="MASTER_ADDR is node 0's, and it is an address of this container (the host's network), so two "
                         "'nodes' of the job share one machine in separate containers. They share hostname and boot_id, "
                         "so NCCL's host hash (src/misc/utils.cc, getHostHash) treats them as one host and looks up the "
                         "other container's GPU through NVML, which fails here ('nvmlDeviceGetHandleByPciBusId() failed: "
                         f"Not Found', NVIDIA/nccl#1529). This container sees {len(devices)} GPU(s).",
                  fix="run the job in one container with all its GPUs (torchrun --nnodes 1 --nproc-per-node <GPUs>); or "
                      "give each container the whole GPU set and restrict ranks with CUDA_VISIBLE_DEVICES inside",
                  subjects=[f"container:{container}", "MASTER_ADDR"],
                  evidence={"world_size": world, "local_world_size": local, "node_rank": node, "master": addr,
                            "gpus_visible": len(devices)})


@check("GPU034", "ranks-split-across-containers", family="gpu", needs=("gpus", "host", "env", "network"))
def ranks_split_across_containers(snap):
    """Ranks of one job run in separate containers of the same host, joined by a bridge network.

    What it checks
        In a docker or podman container with a network namespace of its own (lo and one interface,
        as a bridge-mode container has; with --network=host it sees the host's docker0, veths and
        NICs), a job whose world is larger than the ranks this container runs (LOCAL_WORLD_SIZE, or
        one rank without it), whose MASTER_ADDR is another address on that interface's subnet,
        within docker's default bridge address pools (bridge networks are local to one host; overlay
        networks span hosts and default to 10.0.0.0/8); or, for a pod, in the same per-node subnet of a
        pod network that leases each node its own (flannel: a /24 of 10.244.0.0/16, flannel-io/flannel
        Documentation/configuration.md SubnetLen; data/containers.json pod_networks): pods of one node.

    Why it matters
        NCCL decides which ranks share a host by a host hash of the hostname and
        /proc/sys/kernel/random/boot_id (src/misc/utils.cc, getHostHash): every container has its
        own hostname, so NCCL treats the others as remote hosts and moves data through the bridge
        network instead of NVLink, PCIe P2P or shared memory. With one GPU visible per container
        (`docker run --gpus device=N`) CUDA IPC cannot map the peer's GPU at all (NVIDIA/nccl#324,
        #360): NVLink is idle and collectives run at network speed.

    Example
        docker run --gpus device=1 ... with RANK=1 WORLD_SIZE=2 MASTER_ADDR=172.17.0.2 (the other
        container) on an NVLink machine.

        Also: a torchrun agent of node rank > 0 whose MASTER_ADDR is this container's own address
        (host network): "node 0" is another container of the same host (NVIDIA/nccl#1529).

    Fix
        run every rank of the host in one container (docker run --gpus all ..., torchrun
        --nproc-per-node N); or start the containers with --network=host --ipc=host --pid=host and
        all GPUs visible, so NCCL sees one host.
    """
    import ipaddress

    from ddpdoctor.facts import net as netfacts

    from ddpdoctor.facts.launch import container_table

    host = snap["host"]
    container = str(host.get("container") or "")
    if container not in ("docker", "podman", "kubernetes"):
        return
    launcher = snap.get("launcher") or {}
    world = launcher.get("world_size")
    local = launcher.get("local_world_size") or 1
    if not world or world <= local:
        return
    master = [a for a in ((snap["network"].get("master_addr") or {}).get("addresses") or []) if isinstance(a, str)]
    ifaces = [i for i in (snap["network"].get("interfaces") or []) if isinstance(i, dict)]
    own = {a for i in ifaces for a, _ in netfacts.v4(i)}
    pools = [ipaddress.ip_network(p) for p in _DOCKER_BRIDGE_POOLS] if container != "kubernetes" else []
    # pod networks with a subnet per node (data/containers.json pod_networks: flannel's /24 lease of 10.244.0.0/16)
    pod_nets = [(ipaddress.ip_network(r["network"]), int(r["per_node_prefix"]), r["cni"])
                for r in (container_table().get("pod_networks") or {}).get("rows") or []]
    peer, bridge, pod_cni = None, None, None
    for a in master:
        if a in own:
            if container == "kubernetes":
                return  # the torchrun agent arm below reads docker's host network
            yield from _second_node_on_master_host(launcher, container, world, local, a, snap)
            return  # this container is the master's: nothing says where the other ranks run
        for i in ifaces:
            mine = [x for x, _ in netfacts.v4(i)]
            if mine and netfacts.same_subnet(i, a) and all(any(ipaddress.ip_address(x) in p for p in pools) for x in mine):
                peer, bridge = a, i
                break
            for net, prefix, cni in pod_nets:
                try:
                    far = ipaddress.ip_address(a)
                except ValueError:
                    continue
                if mine and far in net and all(ipaddress.ip_address(x) in net and far in
                                               ipaddress.ip_network(f"{x}/{prefix}", strict=False) for x in mine):
                    peer, bridge, pod_cni = a, i, (cni, f"/{prefix} of {net}")
                    break
            if peer:
                break
    if peer is None:
        return
    others = [i for i in ifaces if i is not bridge and not str(i.get("name", "")).startswith("lo")]
    if others:
        return  # more interfaces than a bridge-mode container has (eth0 and lo): the host's network, or unknown
    devices = [d for d in (snap["gpus"].get("devices") or []) if isinstance(d, dict)]
    links = sum(1 for d in devices for l in (d.get("nvlinks") or []) if isinstance(l, dict) and l.get("active"))
    where = (f"another pod on this node ({pod_cni[0]} gives each node one {pod_cni[1]})" if pod_cni else
             f"another container on its bridge network ({bridge['name']})")
    yield warning(f"rank {launcher.get('rank')} of {world} runs in a {container} container and MASTER_ADDR {peer} is "
                  f"{where}: NCCL will treat the containers as separate hosts (no NVLink, P2P or shared memory)",
                  detail="NCCL groups ranks by a host hash of hostname and boot_id (src/misc/utils.cc, getHostHash); "
                         "each container has its own hostname, so ranks in different containers of one machine talk "
                         "through the bridge network, never NVLink, PCIe P2P or shared memory, and with one GPU "
                         "visible per container CUDA IPC cannot reach the peer's GPU (NVIDIA/nccl#324). "
                         f"This container sees {len(devices)} GPU(s)"
                         + (f" with {links} active NVLink link(s) left unused." if links else "."),
                  fix="run all ranks of the host in one container: docker run --gpus all ... torchrun "
                      "--nproc-per-node <GPUs>; or --network=host --ipc=host --pid=host with all GPUs visible",
                  subjects=[f"container:{container}", f"iface:{bridge['name']}", "MASTER_ADDR"],
                  evidence={"world_size": world, "local_world_size": local, "master": peer,
                            "bridge": bridge["name"], "gpus_visible": len(devices), "active_nvlinks": links,
                            "pod_network": list(pod_cni) if pod_cni else None})
