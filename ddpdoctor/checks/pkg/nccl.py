"""The NCCL torch loads, against the other wheels, the GPUs, the platform (WSL, a USB NIC), LD_PRELOAD and torch's
pin: PKG002, PKG003, PKG007, PKG009, PKG011, PKG013."""
from __future__ import annotations

from ddpdoctor.checks.pkg._common import NCCL_WHEELS, _nccl_older_than, _version
from ddpdoctor.facts import gpu_versions
from ddpdoctor.model import error, info, warning
from ddpdoctor.model.registry import check


@check("PKG002", "nccl-wheels-overlap", family="packages", needs=("packages",))
def nccl_wheels_overlap(snap):
    """More than one NCCL wheel (nvidia-nccl-cu11, -cu12, -cu13) is installed in one environment.

    What it checks
        The installed versions of the NCCL runtime wheels. Every one of them installs the same file,
        nvidia/nccl/lib/libnccl.so.2 (the wheels' RECORD: nvidia_nccl_cu11-2.14.3, nvidia_nccl_cu12-2.27.3
        and nvidia_nccl_cu13-2.29.7 all list that path), which torch loads.

    Why it matters
        The wheel installed last wins the file, and uninstalling either removes it, so torch may load a
        libnccl older than the one it was built against: `import torch` fails with "libtorch_cuda.so:
        undefined symbol: ncclMemFree" (or ncclCommRegister, ncclCommResume), or NCCL misbehaves at
        run time (rwth-i6/returnn#1802, pytorch/pytorch#186591).

        One NCCL wheel alone, of another CUDA major than torch's build (nvidia-nccl-cu11 under a +cu121 torch,
        whose own nvidia-nccl-cu12 is gone): torch loads that wheel's libnccl.so.2, an NCCL built for the
        other CUDA release and usually older than torch's pin (torch 2.0+ wheels load NCCL from the wheel of
        their CUDA major: Requires-Dist nvidia-nccl-cu12==... for a cu12 build).

    Example
        pip install torch (cu12) next to a package that pins nvidia-nccl-cu11

    Fix
        pip uninstall -y <the wheels for the other CUDA major>, then
        pip install --force-reinstall <the NCCL wheel torch requires>
    """
    versions = snap["packages"].get("versions") or {}
    present = {name: versions[name] for name in NCCL_WHEELS if versions.get(name)}
    if len(present) == 1:
        yield from _one_wheel_of_another_cuda_major(snap, versions, present)
        return
    if len(present) < 2:
        return
    build = ((snap["packages"].get("torch_build") or {}).get("cuda") or "")
    keep = f"nvidia-nccl-cu{str(build).split('.')[0]}" if build else None
    listed = ", ".join(f"{n}=={v}" for n, v in present.items())
    drop = [n for n in present if n != keep] if keep in present else None
    yield warning(f"{len(present)} NCCL wheels share nvidia/nccl/lib/libnccl.so.2: {listed}",
                  detail=("Each installs the same libnccl.so.2, so whichever was installed last is the one torch loads, "
                          "and uninstalling either removes it: torch can load a NCCL older than it was built for "
                          "('undefined symbol: ncclMemFree' at import, rwth-i6/returnn#1802)."
                          + (f" torch is built for CUDA {build}: keep {keep}." if keep else
                             " Keep the one for the CUDA major torch is built for (torch.version.cuda).")),
                  fix=(f"pip uninstall -y {' '.join(drop)} && pip install --force-reinstall {keep}=={present[keep]}"
                       if drop else "pip uninstall -y <the NCCL wheel for the other CUDA major> && "
                                    "pip install --force-reinstall <the one torch requires>"),
                  subjects=[f"pkg:{n}" for n in present], evidence={"nccl_wheels": present, "torch_cuda": build or None})


def _one_wheel_of_another_cuda_major(snap, versions: dict, present: dict):
    """PKG002 for a single NCCL wheel whose CUDA major is not torch's build's: the wheel of torch's major is absent, so
    the libnccl.so.2 at nvidia/nccl/lib that torch (2.0+, or pinning an nvidia-nccl wheel) loads is that one."""
    (wheel, have), = present.items()
    build = str((snap["packages"].get("torch_build") or {}).get("cuda") or "")
    torch = versions.get("torch")
    pins = {k: v for k, v in (snap["packages"].get("torch_pins") or {}).items() if k.startswith("nvidia-nccl-")}
    if not build or not torch or (not pins and _version(torch)[:1] < (2,)):
        return  # no CUDA build, or a torch older than the NCCL wheels (its NCCL is linked in)
    major = build.split(".")[0]
    keep = f"nvidia-nccl-cu{major}"
    if wheel == keep or not wheel.startswith("nvidia-nccl-cu"):
        return
    pin = pins.get(keep)
    yield warning(f"the only NCCL wheel is {wheel} {have}, built for CUDA {wheel.rsplit('cu', 1)[1]}, under torch "
                  f"{torch} built for CUDA {build}: torch will load it",
                  detail=(f"NCCL wheels all install nvidia/nccl/lib/libnccl.so.2, the file a torch wheel of CUDA {major} "
                          f"loads; its own {keep} is not installed, so every collective runs on {wheel}'s NCCL, "
                          "built for another CUDA release" + (f" and older than the {pin} torch pins" if pin and
                                                               _version(have) < _version(pin) else "")
                          + ": import may fail ('undefined symbol: ncclCommRegister', pytorch/pytorch#119932) or "
                          "NCCL's init fails in the engine that loads it (InternLM/lmdeploy#1803)."),
                  fix=f"pip uninstall -y {wheel} && pip install {keep}" + (f"=={pin}" if pin else "")
                      + "   # the NCCL wheel of torch's CUDA major",
                  subjects=[f"pkg:{wheel}", "pkg:torch"],
                  evidence={"nccl_wheels": present, "torch_cuda": build, "expected_wheel": keep, "pin": pin})


# The first NCCL release whose default build compiles for each GPU major architecture is data with its sources
# (ddpdoctor/data/gpu_versions.json: NVIDIA/nccl makefiles/common.mk at each release tag), read through
# facts.gpu_versions. Earlier releases neither carry kernels for the GPU nor know its links (Hopper's NVLink4 and
# NVSwitch: "Failed to find reverse path", mila-iqia/milabench#183).


@check("PKG003", "nccl-older-than-gpu", family="packages", needs=("packages", "gpus"))
def nccl_older_than_gpu(snap):
    """The NCCL that torch loads is older than the first NCCL release that supports this GPU.

    What it checks
        The version of the NCCL wheel torch's CUDA build loads (nvidia-nccl-cu11/12/13, the one of
        torch's CUDA major) against each visible GPU's architecture: Hopper (sm_90) needs NCCL 2.15.1,
        Blackwell (sm_100, sm_120) 2.25.1, sm_110 2.27.5 (the first releases whose makefiles build for
        them, NVIDIA/nccl makefiles/common.mk).

    Why it matters
        An NCCL older than the GPU has no kernels compiled for it and does not know its NVLink and
        NVSwitch topology: init fails with "ncclInternalError: Internal check failed ... Failed to find
        reverse path" or "no kernel image is available" (mila-iqia/milabench#183: NCCL 2.14.3 on H100).
        Containers that pin an old torch (and with it an old nvidia-nccl wheel) meet it on new GPUs.

    Example
        torch 2.0.1+cu118 (nvidia-nccl-cu11 2.14.3) on an H100 server.

    Fix
        pip install -U "nvidia-nccl-cu12>=2.15.1" (the wheel of torch's CUDA major), or a torch whose
        pinned NCCL is new enough.
    """
    from ddpdoctor.facts.cuda_map import devices_of

    pk = snap.get("packages") or {}
    versions = pk.get("versions") or {}
    cuda_major = _version((pk.get("torch_build") or {}).get("cuda"))[:1]
    wheels = {w: versions.get(w) for w in NCCL_WHEELS if versions.get(w)}
    if not wheels:
        return
    mine = f"nvidia-nccl-cu{cuda_major[0]}" if cuda_major else None
    name = mine if mine in wheels else (next(iter(wheels)) if len(wheels) == 1 else None)
    if not name:
        return  # several wheels and none of torch's CUDA major: PKG002's to judge
    have = _version(wheels[name])
    if len(have) < 2:
        return
    short = []
    for dev in devices_of(snap.get("gpus") or {}):
        cap = dev.get("cuda_capability")
        if not (isinstance(cap, (list, tuple)) and cap and isinstance(cap[0], int)):
            continue
        need = gpu_versions.nccl_first_for_gpu_major().get(cap[0])
        if need and have < need:
            short.append((dev.get("index"), dev.get("name"), cap, need))
    if not short:
        return
    need = max(n for *_, n in short)
    names = ", ".join(sorted({f"{n} (sm_{c[0]}{c[1]})" for _, n, c, _ in short}))
    need_text = ".".join(map(str, need))
    yield error(
        f"NCCL {wheels[name]} ({name}) is older than the first NCCL for {names}: {need_text}",
        detail=("NCCL releases before " + need_text + " have no kernels for this GPU architecture and do not know its "
                "NVLink/NVSwitch topology: init fails (\"ncclInternalError ... Failed to find reverse path\", "
                "\"no kernel image is available\") or collectives run on a wrong graph."),
        fix=f'pip install -U "{name}>={need_text}"   # or a torch release whose pinned NCCL is new enough',
        subjects=[f"pkg:{name}"] + [f"gpu:{i}" for i, *_ in short],
        evidence={"nccl_wheel": name, "nccl_version": wheels[name], "needed": need_text,
                  "gpus": [{"index": i, "name": n, "capability": c} for i, n, c, _ in short]})


NCCL_TOLERATES_NO_PCI_PATH = (2, 10, 3)  # NVIDIA/nccl v2.10.3-1 src/graph/xml.cc: getPciPath's failure no longer fatal


TORCH_BUNDLING_NCCL_2_10 = (1, 10)  # a guess when NCCL's version is not recorded: torch 1.10 moved to NCCL 2.10.3


def _wsl(host: dict) -> bool:
    text = f"{host.get('kernel') or ''} {host.get('platform') or ''}".lower()
    return "microsoft" in text or "wsl" in text


@check("PKG007", "nccl-too-old-for-wsl", family="packages", needs=("packages", "host"), reads=("gpus",))
def nccl_too_old_for_wsl(snap):
    """Under WSL 2, an NCCL older than 2.10.3 fails at init: its GPUs are not on a PCI bus it can read.

    What it checks
        A WSL 2 kernel (its release names microsoft-standard-WSL2) with NVIDIA GPUs, against the NCCL
        torch loads (torch.cuda.nccl.version() or the nvidia-nccl wheel); when neither is recorded, a torch
        older than 1.10 (whose bundled NCCL is older than 2.10, a guess marked as such).

    Why it matters
        NCCL builds its topology from /sys/class/pci_bus/<bus>/../../<busid> for each GPU (getPciPath,
        src/graph/xml.cc). WSL 2 exposes the GPUs through /dev/dxg, not on a PCI bus, so that path does not
        exist: "NCCL WARN Could not find real path of /sys/class/pci_bus/0000:21/../../0000:21:00.0" and
        ncclSystemError ("System call (socket, malloc, munmap, etc) failed", NVIDIA/nccl#442, #1113). Before
        v2.10.3-1 the failure was fatal (NCCLCHECK(getPciPath(...)), ncclTopoGetPciNode); from 2.10.3 NCCL
        goes on without the PCI node.

    Example
        torch 1.8.1+cu111 (NCCL 2.7.8) under WSL 2 with one RTX 2080 Ti, torch.distributed.launch.

    Fix
        pip install -U torch   # 1.10 or later bundles NCCL >= 2.10.3; or init_process_group(backend="gloo")
    """
    host = snap["host"]
    if not _wsl(host):
        return
    gpus = snap.get("gpus") if "gpus" in snap else None
    if isinstance(gpus, dict) and not (gpus.get("devices") or gpus.get("count")):
        return  # no GPU: NCCL is not in play
    older = _nccl_older_than(snap, NCCL_TOLERATES_NO_PCI_PATH, TORCH_BUNDLING_NCCL_2_10)
    if older is None:
        return
    basis, guess, nccl, torch = older
    yield warning(f"{basis} under WSL 2: NCCL before 2.10.3 fails at init because WSL's GPUs are on no PCI bus it can read",
                  detail=("NCCL looks up each GPU's /sys/class/pci_bus path (getPciPath, src/graph/xml.cc); under WSL 2 it "
                          "does not exist ('Could not find real path of /sys/class/pci_bus/...'), which NCCL before "
                          "v2.10.3-1 treats as fatal: ncclSystemError at init_process_group (NVIDIA/nccl#442, #1113). "
                          f"Kernel: {host.get('kernel')}."),
                  fix='pip install -U torch   # torch >= 1.10 bundles NCCL >= 2.10.3; or init_process_group(backend="gloo")',
                  subjects=["pkg:torch", "pkg:nccl"],
                  evidence={"kernel": host.get("kernel"), "nccl": ".".join(map(str, nccl)) if nccl else None,
                            "torch": ".".join(map(str, torch)) if torch else None, "guess": guess})


# NVIDIA/nccl b6475625 (2.20.3-1), src/graph/xml.cc ncclTopoGetXmlFromSys: a sibling PCI node without a busid
# (a USB network device, "attaching to first CPU") is skipped instead of failing xmlGetAttrStr.
NCCL_TOLERATES_USB_NIC = (2, 20, 3)


TORCH_BUNDLING_NCCL_2_20 = (2, 3)  # torch 2.3 pins nvidia-nccl-cu12 2.20.5; torch 2.2 pinned 2.19.3


@check("PKG009", "nccl-usb-nic-topology", family="packages", needs=("packages", "network", "env"), reads=("pci", "gpus"))
def nccl_usb_nic_topology(snap):
    """An NCCL older than 2.20.3 will put a USB network interface in its topology, which can fail its init.

    What it checks
        The interfaces NCCL's socket transport would use (NCCL_SOCKET_IFNAME, or its default pick; only when its
        IB transport is not in use) whose device sits on a USB port (/sys/class/net/<if>/device under a USB
        controller: a BMC's or a dongle's CDC Ethernet), against the NCCL torch loads (torch.cuda.nccl.version()
        or the nvidia-nccl wheel); when neither is recorded, a torch older than 2.3 (bundling NCCL 2.19 or older,
        a guess marked as such).

    Why it matters
        NCCL adds each network device's PCI path to its topology; a USB device is "not a PCI device (usb).
        Attaching to first CPU", and NCCL before 2.20.3 then read the missing busid of that node as an error
        when it sorted the next PCI node in: "NCCL WARN Attribute busid of node nic not found" and
        ncclInternalError at init (NVIDIA/nccl#1125, on 1 or 2 GPUs of a 4-GPU host; fixed in 2.20.3-1,
        src/graph/xml.cc ncclTopoGetXmlFromSys).

    Example
        torch 2.2 (NCCL 2.19.3) on a workstation whose only other interface is a USB Ethernet adapter.

    Fix
        export NCCL_SOCKET_IFNAME=<the PCI interface>   # keep the USB one out; or pip install -U torch (NCCL >= 2.20.3)
    """
    from ddpdoctor.facts.env import env_of
    from ddpdoctor.facts.net import nccl_default_pick, nccl_ib_wanted, nccl_ifname_match

    env = env_of(snap)
    if nccl_ib_wanted(env, snap.get("pci") or {}):
        return  # NCCL's IB transport: its topology holds the HCAs, not the socket interfaces
    ifaces = [i for i in (snap["network"].get("interfaces") or []) if isinstance(i, dict)]
    usb = {i.get("name") for i in ifaces if i.get("bus") == "usb"}
    if not usb:
        return
    spec = env.get("NCCL_SOCKET_IFNAME")
    names = [i.get("name") for i in ifaces if i.get("up") is not False]
    picks = nccl_ifname_match(spec, names)[0] if spec else nccl_default_pick(ifaces)[0]
    hit = [n for n in picks if n in usb]
    if not hit:
        return
    older = _nccl_older_than(snap, NCCL_TOLERATES_USB_NIC, TORCH_BUNDLING_NCCL_2_20)
    if older is None:
        return
    basis, guess, nccl, torch = older
    others = [n for n in picks if n not in usb]
    yield warning(f"{basis} will put the USB network interface {', '.join(hit)} in its topology: NCCL before 2.20.3 can "
                  "fail at init on it ('Attribute busid of node nic not found')",
                  detail=("NCCL adds each socket interface it uses to its topology by PCI path; a USB device is 'not a PCI "
                          "device (usb). Attaching to first CPU', and before 2.20.3-1 the node's missing busid failed "
                          "ncclTopoGetXmlFromSys (src/graph/xml.cc): ncclInternalError at init_process_group "
                          "(NVIDIA/nccl#1125). NCCL_SOCKET_IFNAME " + (f"is {spec!r}" if spec else "is unset (NCCL's default pick)")
                          + f"; it selects {', '.join(picks[:6])}."),
                  fix=(f"export NCCL_SOCKET_IFNAME=={others[0]}   # keep {hit[0]} out" if others else
                       f"export NCCL_SOCKET_IFNAME=^{','.join(hit)}") + "   # or: pip install -U torch (NCCL >= 2.20.3)",
                  env_fix={"NCCL_SOCKET_IFNAME": f"={others[0]}" if others else "^" + ",".join(hit)},
                  subjects=["pkg:nccl", "NCCL_SOCKET_IFNAME"] + [f"iface:{n}" for n in hit],
                  evidence={"usb_interfaces": sorted(usb), "nccl_picks": picks, "nccl": ".".join(map(str, nccl)) if nccl else None,
                            "torch": ".".join(map(str, torch)) if torch else None, "guess": guess})


@check("PKG011", "nccl-preloaded", family="packages", needs=("packages",), reads=("env",))
def nccl_preloaded(snap):
    """LD_PRELOAD loads an NCCL before torch does, so torch uses it instead of the NCCL it was installed with.

    What it checks
        LD_PRELOAD entries that are NCCL itself (libnccl.so*, not the libnccl-net plugins) while torch
        is installed, and the version in the name of the file each resolves to (libnccl.so.2.18.3)
        against the NCCL wheel torch came with (nvidia-nccl-cu11/12/13).

    Why it matters
        glibc satisfies a library's DT_NEEDED name with an object already loaded under that soname
        (elf/dl-load.c _dl_map_object: "If the requested name matches the soname of a loaded object,
        use that object"), and LD_PRELOAD objects are loaded first. libtorch_cuda.so's DT_NEEDED
        libnccl.so.2 then binds to the preloaded file although its DT_RPATH
        ($ORIGIN/../../nvidia/nccl/lib, written with patchelf --force-rpath by pytorch
        .ci/manywheel/build_cuda.sh @ 799d09f21574) would otherwise win even over LD_LIBRARY_PATH.
        An NCCL older than torch's fails at import with "libtorch_cuda.so: undefined symbol:
        ncclCommRegister" (torch 2.2 needs NCCL 2.19; pytorch/pytorch#119932, where the maintainer
        points at Azure/MS-AMP, whose install guide sets
        LD_PRELOAD="/usr/local/lib/libmsamp_dist.so:${NCCL_LIBRARY}").

    Example
        LD_PRELOAD=/usr/local/lib/libmsamp_dist.so:/usr/lib/x86_64-linux-gnu/libnccl.so (libnccl.so.2.18.3)
        with torch 2.2.0 and nvidia-nccl-cu12 2.19.3.

    Fix
        Drop the libnccl entry from LD_PRELOAD, or preload an NCCL at least as new as the nvidia-nccl
        wheel torch requires.
    """
    from ddpdoctor.facts.env import env_of, nccl_version_in_name, preloaded_nccl

    versions = snap["packages"].get("versions") or {}
    if not versions.get("torch"):
        return
    preloaded = snap["packages"].get("nccl_preloaded")
    if preloaded is None:  # a snapshot recorded before the field: the variable alone, versions from the names
        preloaded = [{"path": p, **({"version": v} if (v := nccl_version_in_name(p)) else {})}
                     for p in preloaded_nccl(env_of(snap).get("LD_PRELOAD"))]
    if not preloaded:
        return
    wheels = {w: versions.get(w) for w in NCCL_WHEELS if versions.get(w)}
    wheel, wheel_v = max(wheels.items(), key=lambda kv: _version(kv[1])) if wheels else (None, None)
    first = preloaded[0]
    pre_v = first.get("version")
    names = ", ".join(e["path"] + (f" ({e['real_name']})" if e.get("real_name") else "") for e in preloaded[:4])
    older = bool(pre_v and wheel_v and _version(pre_v) < _version(wheel_v))
    what = f"NCCL {pre_v}" if pre_v else "an NCCL of unknown version"
    than = f" instead of {wheel} {wheel_v}" if wheel else " instead of the NCCL it was built with"
    sev = warning if older else info
    yield sev(f"LD_PRELOAD loads {what} before torch, which will use it{than}"
              + (": older than torch needs" if older else ""),
              detail=("The dynamic loader binds libtorch_cuda.so's libnccl.so.2 to an object already loaded under "
                      "that name (glibc elf/dl-load.c), and LD_PRELOAD objects load first, ahead of torch's own "
                      "RPATH to nvidia/nccl/lib. Preloaded: " + names + "."
                      + (" An NCCL older than the one torch was built against fails at import with \"undefined "
                         "symbol: ncclCommRegister\" (or ncclMemFree, ...) or misbehaves at run time." if older else
                         " Intended when it is a newer or patched NCCL; otherwise every collective runs on it.")),
              fix=("unset LD_PRELOAD   # or keep its other entries and drop " + first["path"]
                   + (f"; or preload an NCCL >= {wheel_v}" if older else "")),
              subjects=["env:LD_PRELOAD", "pkg:torch"] + ([f"pkg:{wheel}"] if wheel else []),
              evidence={"preloaded": preloaded[:8], "wheel": wheel, "wheel_version": wheel_v})


@check("PKG013", "nccl-wheel-below-torch-pin", family="packages", needs=("packages",))
def nccl_wheel_below_torch_pin(snap):
    """The installed NCCL wheel is older than the one the installed torch pins.

    What it checks
        The exact pins of nvidia-nccl-cuNN in torch's own metadata (Requires-Dist, the lines pip reads: "torch
        2.2.0 requires nvidia-nccl-cu12==2.19.3; platform_system == "Linux" and platform_machine == "x86_64"",
        kept only where their platform markers hold here) against the version of that wheel installed.

    Why it matters
        torch's CUDA wheels load libnccl.so.2 from the nvidia-nccl wheel rather than carrying their own. When
        another package pins an older NCCL wheel (pip warns once, at install time, then installs it anyway),
        torch binds to a library that lacks the symbols it was built against: "import torch" fails with
        "undefined symbol: ncclCommRegister" (pytorch/pytorch#119932, torch 2.2.0; the maintainer: another
        package provides an incompatible NCCL), or a collective fails later. A newer wheel keeps the old
        symbols and is not reported.

    Example
        torch 2.2.0 (pins nvidia-nccl-cu12==2.19.3) with nvidia-nccl-cu12 2.18.1 installed by another package.

    Fix
        pip install nvidia-nccl-cu12==<the pinned version>   # and let the package that wanted the old one use it
    """
    pk = snap["packages"]
    pins = pk.get("torch_pins") or {}
    versions = pk.get("versions") or {}
    for name, pin in sorted(pins.items()):
        have = versions.get(name)
        if not name.startswith("nvidia-nccl-") or not have or not _version(pin) or not _version(have) or _version(have) >= _version(pin):
            continue
        yield warning(f"{name} {have} is installed, older than the {pin} torch {versions.get('torch')} pins",
                      detail=("torch's CUDA wheel loads libnccl.so.2 from this wheel; one older than the pin lacks "
                              "symbols torch was built against: 'undefined symbol: ncclCommRegister' at import "
                              "(pytorch/pytorch#119932) or a failure at the first collective. Another package's "
                              "requirement probably pulled it back (pip check names it)."),
                      fix=f"pip install {name}=={pin}   # then pip check",
                      subjects=[f"pkg:{name}", "pkg:torch"],
                      evidence={"installed": have, "pinned": pin, "torch": versions.get("torch")})


@check("PKG028", "torch-loads-another-nccl", family="packages", needs=("packages",), reads=("env",))
def torch_loads_another_nccl(snap):
    """The libnccl.so.2 torch's libtorch_cuda.so will load is not the NCCL wheel torch was installed with.

    What it checks
        The library libtorch_cuda.so's DT_NEEDED libnccl.so.2 resolves to, found as ld.so(8) searches
        (packages.torch_nccl: its DT_RPATH when it has no DT_RUNPATH, LD_LIBRARY_PATH, its DT_RUNPATH,
        then the system directories), read from the ELF headers without importing torch, against the
        nvidia-nccl-cuNN wheel installed and the version torch pins. A torch whose path is DT_RUNPATH (a
        conda or source build, a container's own torch) lets LD_LIBRARY_PATH choose: a container's
        /usr/lib libnccl or an NCCL directory on LD_LIBRARY_PATH wins over the wheel. A pip wheel's
        DT_RPATH (patchelf --force-rpath) keeps its own. And a libnccl.so.2 found nowhere, with no NCCL
        wheel that torch's import could preload either.

    Why it matters
        An NCCL older than the one torch was built against fails at import with "undefined symbol:
        ncclCommRegister" (torch 2.2 needs NCCL 2.19; pytorch/pytorch#119932) or misbehaves at the first
        collective; an unintended one runs every collective on code nobody tested with this torch. A
        missing one fails `import torch` with "libnccl.so.2: cannot open shared object file".

    Example
        LD_LIBRARY_PATH=/usr/local/nccl/lib (libnccl.so.2.18.3) with a RUNPATH build of torch 2.2 that
        pins nvidia-nccl-cu12==2.19.3.

    Fix
        Drop the NCCL directory from LD_LIBRARY_PATH (or put torch's nvidia/nccl/lib before it), or install
        an NCCL at least as new as torch's pin there.
    """
    pk = snap["packages"]
    fact = pk.get("torch_nccl")
    versions = pk.get("versions") or {}
    if not isinstance(fact, dict) or not fact.get("needed") or not versions.get("torch") or pk.get("nccl_preloaded"):
        return  # no fact, NCCL linked in statically, or LD_PRELOAD decides (PKG011)
    wheels = {w: versions.get(w) for w in NCCL_WHEELS if versions.get(w)}
    pins = {k: v for k, v in (pk.get("torch_pins") or {}).items() if k.startswith("nvidia-nccl-")}
    wheel, wheel_v = max(wheels.items(), key=lambda kv: _version(kv[1])) if wheels else (None, None)
    want = (pins.get(wheel) if wheel else None) or next(iter(pins.values()), None) or wheel_v
    if not fact.get("path"):
        if wheels:
            return  # torch's import preloads the wheel's copy when the loader finds none (torch/__init__.py)
        yield error(f"libtorch_cuda.so needs {fact['needed']}, which the dynamic loader finds nowhere",
                    detail=("No directory of its search path (" + str(fact.get("search")) + ", LD_LIBRARY_PATH, the "
                            "system ones) holds it and no nvidia-nccl wheel is installed: `import torch` fails with \""
                            + fact["needed"] + ": cannot open shared object file\"."),
                    fix="pip install " + (next(iter(pins), None) or "nvidia-nccl-cu12")
                        + (f"=={want}" if want else "") + "   # the NCCL torch links",
                    subjects=["pkg:torch"], evidence={"torch_nccl": fact, "pins": pins})
        return
    if fact.get("from") in ("RPATH", "RUNPATH") or not wheels:
        return  # torch's own directory, or no wheel to compare with (a build that expects the system NCCL)
    got = fact.get("version")
    older = bool(got and want and _version(got) < _version(want))
    same = bool(got and want and _version(got) == _version(want))
    if same:
        return
    make = error if older else warning if not got else info
    via = "LD_LIBRARY_PATH" if fact["from"] == "LD_LIBRARY_PATH" else "the system library directories"
    yield make(f"torch will load {fact['path']} ({'NCCL ' + got if got else 'version unknown'}) from {via}, not "
               f"{wheel} {wheel_v}" + (f": older than the {want} torch needs" if older else ""),
               detail=(f"libtorch_cuda.so carries a {fact.get('search')} search path, so ld.so looks in {via} before "
                       "torch's nvidia/nccl/lib (ld.so(8), search order)."
                       + (" An NCCL older than torch's fails at import with \"undefined symbol: ncclCommRegister\" "
                          "(pytorch/pytorch#119932) or at the first collective." if older else
                          " Every collective runs on that NCCL, which this torch was not tested with.")),
               fix=(f"remove {fact['path'].rsplit('/', 1)[0]} from LD_LIBRARY_PATH (or put torch's nvidia/nccl/lib "
                    "before it)" if fact["from"] == "LD_LIBRARY_PATH" else
                    f"export LD_LIBRARY_PATH=<site-packages>/nvidia/nccl/lib:$LD_LIBRARY_PATH   # torch's {wheel}")
                   + (f"; or install NCCL >= {want} there" if older else ""),
               subjects=["pkg:torch", f"pkg:{wheel}"] + (["LD_LIBRARY_PATH"] if fact["from"] == "LD_LIBRARY_PATH"
                                                         else [f"path:{fact['path']}"]),
               evidence={"torch_nccl": fact, "wheel": wheel, "wheel_version": wheel_v, "needs": want})
