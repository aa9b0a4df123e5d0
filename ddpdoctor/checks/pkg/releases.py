"""PKG010: torch and NCCL releases with a known defect (ddpdoctor/data/known_defects.json); PKG025: a triton other than
the one torch pins; PKG030: an accelerate older than the installed transformers accepts."""
from __future__ import annotations

from typing import Optional

from ddpdoctor.facts import gpu_versions
from ddpdoctor.model import warning
from ddpdoctor.model.registry import check


def _gpu_subset_in_container(snap) -> Optional[bool]:
    """In a container whose NVML lists fewer GPUs than the NVIDIA GPUs on the PCI bus it sees (sysfs shows the whole
    host), in a job of several ranks; None when a fact is missing."""
    host = (snap.get("host") or {}) if "host" in snap else {}
    gpus = snap.get("gpus") if isinstance(snap.get("gpus"), dict) else {}
    on_bus = ((snap.get("pci") or {}).get("gpus") if "pci" in snap else None)
    if not host.get("container") or not isinstance(on_bus, dict) or not gpus or gpus.get("unavailable"):
        return None
    nvidia = [b for b, f in on_bus.items() if isinstance(f, dict) and str(f.get("vendor") or "0x10de").lower() == "0x10de"]
    visible = len(gpus.get("devices") or [])
    world = (snap.get("launcher") or {}).get("world_size") or 0
    return bool(visible and len(nvidia) > visible and world > 1)


@check("PKG010", "known-defective-release", family="packages", needs=("packages", "env"), reads=("launcher", "gpus", "pci", "host"))
def known_defective_release(snap):
    """This torch (with the NCCL it loads), or this NCCL, has a known defect that hangs or slows distributed jobs.

    What it checks
        The torch version, and the NCCL it really loads where recorded (facts.net nccl_loaded, in the loader's
        order: torch.cuda.nccl.version(), an LD_PRELOAD NCCL, the libnccl libtorch_cuda.so's DT_NEEDED
        resolves to, the nvidia-nccl wheel; none for an NCCL linked into torch), against
        ddpdoctor/data/known_defects.json:
        releases with a defect the project fixed later, each read from the fix in the source (repo, path,
        commit), with the setting that works around it. A workaround already set is respected. Entries of
        NCCL alone need the NCCL version recorded, and hold only where the job meets their condition (node
        count from the launcher, GPU compute capability): NCCL 2.19.3/2.19.4 cap the NVLSTree all-reduce
        chunk at 64 KiB on 4 or more nodes with no knob (src/enqueue.cc; 2.20.3 adds
        NCCL_NVLSTREE_MAX_CHUNKSIZE); NCCL 2.9.6 fails on a topology file whose PCI nodes it cannot find
        in sysfs (src/graph/xml.cc; fixed in 2.9.8); NCCL 2.3.5-2.4.5 hash only the host name's first
        label (src/misc/utils.cu getHostName cuts at '.'; 2.4.6 takes the full name), so on several
        nodes with dotted names (gpu.rack1, gpu.rack2) it takes two hosts for one (NVIDIA/nccl#197):
        judged when this host's name has several labels. NCCL 2.6.4-2.7.2 crash in topology detection when
        ranks of one host run in separate containers that each see only some of its GPUs (src/graph/topo.cc,
        NVIDIA/nccl#326; fixed in 2.7.3 by f36540f5): judged in a container whose NVML lists fewer GPUs than
        the PCI bus it sees, on a job of several ranks. NCCL 2.3.5-2.4.5 clean the LL buffers every
        NCCL_LL_CLEAN_FREQ steps (src/collectives/device/primitives.h) and hang long-running jobs
        (NVIDIA/nccl#238; fixed in 2.4.6 by f40ce73e; workaround NCCL_LL_THRESHOLD=0). Entries may also name the host OS: torch 2.4-2.6 on
        Windows create the TCPStore with libuv, which the Windows wheels lack, unless USE_LIBUV=0
        (torch/distributed/rendezvous.py, pytorch/pytorch#148266; the upper bound 2.6 is assumed).
        Some entries stop the job at `import torch` (`stage: import`): torch 2.4.0's Windows wheels, whose
        fbgemm.dll needs MSVC's OpenMP runtime libomp140.x86_64.dll, which neither the wheel nor the VC++
        redistributable installs ("Error loading ...\\torch\\lib\\fbgemm.dll or one of its dependencies",
        pytorch/pytorch#131662, fixed by #130697 in 2.4.1), and ROCm TheRock Windows wheels dated before
        ROCm/TheRock#1520 (external-builds/pytorch/build_prod_wheels.py copy_msvc_libomp_to_torch_lib), told by
        the build date in torch's local version. Quiet where the snapshot recorded torch's own answers (torch
        imported there).
        Entries may name the NCCL wheel the version was read from and a use of it: the nvidia-nccl-cu11 wheels
        2.19.3-2.21.5 are built with CUDA 11.0, and NCCL built before CUDA 11.3 refuses a CUDA graph capture
        (src/misc/strongstream.cc ncclCudaGetCapturingGraph: "NCCL cannot be captured in a graph ..."), which
        vLLM makes at -tp > 1 without --enforce-eager (facts.launch.nccl_graph_capture). NCCL 2.18.1-2.18.5
        and 2.19.1 connect peers through an address copied by one cudaMemcpyAsync and used by the next with no
        sync (src/transport.cc ncclTransportP2pSetup; fixed in 2.18.6 and 2.19.3 by 43654587, NVIDIA/nccl#957):
        judged on a job of two or more ranks (`min_ranks`; `nccl_except` drops the fixed 2.18.6 inside the span).
        Entries may name an external net plugin (`needs_net_plugin`, read from the plugin libraries found and
        NCCL_NET_PLUGIN's name): NCCL 2.30.5 with the SPCX (Spectrum-X) plugin can corrupt grouped
        variable-split all-to-all payloads (NVIDIA's Megatron Bridge 26.08 known issue; workaround
        NCCL_NET_PLUGIN=none NCCL_NET=IB).
        Entries may name the host CPU's vendor and the GPUs NCCL joins on the node (`cpu_vendor`,
        `min_gpus_on_node`: this host's ranks, else its visible GPUs): NCCL 2.23.4 on AMD CPUs has a known
        multi-GPU AllReduce slowdown worked around by NCCL_P2P_LEVEL=SYS (NVIDIA/TensorRT-LLM
        docs/source/performance/perf-overview.md, known issues; v2.23.4-1 src/graph/paths.cc lowered NCCL's P2P
        default on AMD to PXB beyond two GPUs per node).
        Entries may name an accelerate release instead: accelerate 0.21.0 ignores gpu_ids from the config
        (src/accelerate/utils/launch.py prepare_multi_gpu_env sets ZE_AFFINITY_MASK instead of
        CUDA_VISIBLE_DEVICES; introduced by #1676, fixed by #1850 in 0.22.0), judged only when the
        accelerate config names gpu_ids.

    Why it matters
        Nothing in the job is wrong, so nothing else explains the hang. torch 2.7.0 opens NCCL
        communicators in non-blocking mode whenever init_process_group gets device_id, and NCCL 2.26's
        non-blocking mode hangs at random (pytorch/pytorch#153960; torch 2.7.1 stopped doing it:
        ProcessGroupNCCL::useNonblocking, pytorch/pytorch#154055).

    Example
        torch 2.7.0 with nvidia-nccl-cu12 2.26.2 on eight H100, init_process_group("nccl", device_id=...).

    Fix
        Upgrade torch to the fixed release, or set the workaround (TORCH_NCCL_USE_COMM_NONBLOCKING=0).
    """
    from ddpdoctor.facts import known_defects  # noqa: PLC0415
    from ddpdoctor.facts.env import env_of  # noqa: PLC0415
    from ddpdoctor.facts.launch import nccl_graph_capture  # noqa: PLC0415
    from ddpdoctor.facts.net import nccl_loaded  # noqa: PLC0415
    from ddpdoctor.facts.ranks import local_ranks, world_size  # noqa: PLC0415

    torch = (snap["packages"].get("versions") or {}).get("torch")
    nccl, nccl_from = nccl_loaded(snap)
    env = env_of(snap)
    launcher = snap.get("launcher") or {}
    world, local = launcher.get("world_size"), launcher.get("local_world_size")
    nodes = launcher.get("nnodes") or (world // local if world and local and world % local == 0 else None)
    gpus = snap.get("gpus") if isinstance(snap.get("gpus"), dict) else {}
    caps = [tuple(d["cuda_capability"]) for d in gpus.get("devices") or [] if d.get("cuda_capability")]
    # NCCL loads NCCL_TOPO_FILE, else /var/run/nvidia-topologyd/virtualTopology.xml (src/graph/topo.cc)
    vt = (snap.get("pci") or {}).get("nccl_virtual_topology") if "pci" in snap else None
    topology_file = True if (env.get("NCCL_TOPO_FILE") or "").strip() or vt else (False if vt is False else None)
    imported = known_defects.torch_imported(snap)
    graph_capture = nccl_graph_capture(snap)
    ranks = max(world_size(snap).value or 0, local_ranks(snap).value or 0) or None
    # the external net plugins NCCL would open: the libraries found (pci.net_plugins) and NCCL_NET_PLUGIN's name;
    # NCCL_NET_PLUGIN=none opens none (src/plugin/net.cc)
    named = (env.get("NCCL_NET_PLUGIN") or "").strip()
    plugins = [] if named.lower() == "none" else \
        [str(p) for p in ((snap.get("pci") or {}).get("net_plugins") or []) if p] + ([named] if named else [])
    # the GPUs NCCL joins on this node (its system->nodes[GPU].count): this host's ranks, else the GPUs it sees
    on_node = local_ranks(snap).value or len(gpus.get("devices") or []) or None
    for entry, nccl_known in known_defects.matching(torch, nccl):
        if entry.get("stage") == "import" and imported:
            continue  # torch was seen to import here: an import-time defect does not hold on this machine
        workaround = entry.get("workaround_env") or {}
        if workaround and all(str(env.get(k, "")).strip() == v for k, v in workaround.items()):
            continue
        host = (snap.get("host") or {}) if "host" in snap else {}
        if known_defects.conditions_unmet(entry, nodes, caps, topology_file, str(host.get("os") or "") or None,
                                          hostname=host.get("hostname"), gpu_subset=_gpu_subset_in_container(snap), platform=host.get("platform"),
                                          nccl_from=nccl_from, graph_capture=graph_capture, ranks=ranks,
                                          net_plugins=plugins, cpu_vendor=host.get("cpu_vendor"),
                                          gpus_on_node=on_node):
            continue
        src = entry["source"]
        shown = ".".join(map(str, nccl)) if nccl else None
        if not entry.get("torch"):  # a defect of NCCL alone: the NCCL release is the subject, the fix is NCCL's
            yield warning(f"NCCL {shown} has a known defect on this job: {entry['effect']}",
                          detail=(f"The NCCL torch loads: {shown}, read from {nccl_from}. "
                                  f"When {entry['when']}; fixed in {entry['fixed_in']}. Read in {src['repo']} "
                                  f"{src['path']}@{src['commit'][:12]} ({src['function']}): \"{src['quote']}\"; "
                                  f"{src['change']}. Reports: " + ", ".join(entry.get("reports") or []) + "."),
                          fix=entry.get("fix", "upgrade NCCL") + ("   # or: export " + " ".join(
                              f"{k}={v}" for k, v in workaround.items()) if workaround else ""),
                          subjects=["pkg:nccl"] + list(workaround), env_fix=dict(workaround),
                          evidence={"torch": torch, "nccl": shown, "defect": entry["id"], "nodes": nodes,
                                    "source": f"{src['repo']}/{src['path']}@{src['commit'][:12]}"})
            continue
        yield warning(f"torch {torch}" + (f" with NCCL {shown}" if shown else "") + f" has a known defect: {entry['effect']}",
                      detail=((f"The NCCL torch loads: {shown}, read from {nccl_from}. " if nccl_known else "")
                              + f"When {entry['when']}, {entry['effect']}; fixed in {entry['fixed_in']} ({src['repo']} "
                              f"{src['path']}@{src['commit'][:12]}, {src['function']}: \"{src['quote']}\"; {src['change']}). "
                              + ("" if nccl_known else "The NCCL torch loads was not recorded: this holds if it is the one "
                                 f"the entry names ({entry['nccl']['first']}-{entry['nccl']['last'].rsplit('.', 1)[0]}.x). ")
                              + "Reports: " + ", ".join(entry.get("reports") or []) + "."),
                      fix=(entry.get("fix") or f"pip install -U 'torch>={entry['torch']['last'].rsplit('.', 1)[0]}.{int(entry['torch']['last'].rsplit('.', 1)[1]) + 1}'")
                          + ("   # or: export " + " ".join(f"{k}={v}" for k, v in workaround.items()) if workaround else ""),
                      subjects=["pkg:torch"] + (["pkg:nccl"] if nccl_known else []) + list(workaround),
                      env_fix=dict(workaround),
                      evidence={"torch": torch, "nccl": shown, "defect": entry["id"],
                                "source": f"{src['repo']}/{src['path']}@{src['commit'][:12]}"})


    accel = (snap["packages"].get("versions") or {}).get("accelerate")
    cfg = ((snap.get("host") or {}).get("accelerate_config") or {})
    values = cfg.get("values") if isinstance(cfg, dict) else None
    gpu_ids = values.get("gpu_ids") if isinstance(values, dict) else None
    for entry in known_defects.matching_accelerate(accel, gpu_ids):
        src = entry["source"]
        yield warning(f"accelerate {accel} has a known defect: {entry['effect']}",
                      detail=(f"When {entry['when']}; the config here names gpu_ids={gpu_ids!r}. Fixed in {entry['fixed_in']}. "
                              f"Read in {src['repo']} {src['path']}@{src['commit'][:12]} ({src['function']}): "
                              f"\"{src['quote']}\"; {src['change']}. Reports: " + ", ".join(entry.get("reports") or []) + "."),
                      fix=entry.get("fix", "pip install -U accelerate"),
                      subjects=["pkg:accelerate"],
                      evidence={"accelerate": accel, "gpu_ids": gpu_ids, "defect": entry["id"],
                                "source": f"{src['repo']}/{src['path']}@{src['commit'][:12]}"})


# the distributions that install the `triton` module (torch's stable Linux wheels pin triton, its nightly and ROCm/XPU
# wheels pytorch-triton*: their Requires-Dist, e.g. torch 2.6.0's "triton==3.2.0; platform_system == "Linux" and
# platform_machine == "x86_64"" on PyPI)
TRITON_DISTS = ("triton", "pytorch-triton", "pytorch-triton-rocm", "pytorch-triton-xpu")


def _same_release(have: str, pin: str) -> bool:
    """The installed version is the pinned one: the same release, and the same local part when both carry one."""
    rel = gpu_versions.release
    if not rel(have) or not rel(pin) or rel(have) != rel(pin):
        return False
    local = lambda v: v.split("+", 1)[1] if "+" in v else None  # noqa: E731
    return not (local(have) and local(pin) and local(have) != local(pin))


@check("PKG025", "triton-vs-torch-pin", family="packages", needs=("packages",))
def triton_vs_torch_pin(snap):
    """The installed Triton is not the one the installed torch pins.

    What it checks
        The exact triton (or pytorch-triton, for nightly, ROCm and XPU wheels) pin in torch's own metadata
        (Requires-Dist, kept only where its platform markers hold here: torch 2.6.0 pins "triton==3.2.0;
        platform_system == "Linux" and platform_machine == "x86_64"") against the version of that distribution
        installed; and, when the pinned distribution is absent or beside another one, the other distribution that
        provides the `triton` module (both install the same directory).

    Why it matters
        inductor (torch.compile's default backend) and the libraries whose kernels are Triton's (Unsloth, Liger,
        bitsandbytes' Triton paths) import Triton's internals at the version torch was built against: another triton
        fails at the first compiled call or at the library's import - "ImportError: cannot import name
        'triton_key' from 'triton.compiler.compiler'" (triton 2.3 under a torch built for 2.2, or a torch nightly
        with triton 2.3: pytorch/pytorch#127271, coreweave/ml-containers#64), or unsloth's import under triton 3.3.0
        with a torch pinned to 3.2.0 (unslothai/unsloth#2403). pip warns once at install time ("torch 2.6.0 requires
        triton==3.2.0, but you have triton 3.3.0") and installs it anyway.

    Example
        torch 2.2.1 (pins triton==2.2.0) with triton 2.3.0 pulled in by another package.

    Fix
        pip install triton==<the pinned version>   # or a torch release built for the installed triton; then pip check
    """
    pk = snap["packages"]
    pins = pk.get("torch_pins") or {}
    versions = pk.get("versions") or {}
    torch = versions.get("torch")
    for name, pin in sorted((n, str(p)) for n, p in pins.items() if n in TRITON_DISTS):
        have = versions.get(name)
        others = [f"{d} {versions[d]}" for d in TRITON_DISTS if d != name and versions.get(d)]
        if have and _same_release(str(have), pin) and not others:
            continue
        if have and not _same_release(str(have), pin):
            title = f"{name} {have} is installed; torch {torch} pins {name}=={pin}"
        elif have:
            title = f"{', '.join(others)} installed beside the {name} {have} torch {torch} pins"
        elif others:
            title = f"torch {torch} pins {name}=={pin}, but the triton module comes from {', '.join(others)}"
        else:
            continue  # the pinned Triton is not installed and nothing else provides it: GPU032's missing-triton case
        yield warning(title,
                      detail=("torch.compile's inductor and Triton-kernel libraries use Triton internals at the "
                              "version torch was built against; another one fails at the first compiled call or at "
                              "the library's import (\"cannot import name 'triton_key' from "
                              "'triton.compiler.compiler'\": pytorch/pytorch#127271). Read from torch's own "
                              "Requires-Dist (the pin pip checks) and the installed distributions; several "
                              "distributions providing `triton` overwrite one directory."),
                      fix=(f"pip install {name}=={pin}" + (f"; pip uninstall {' '.join(o.split()[0] for o in others)}"
                                                          if others else "") + "   # then pip check"),
                      subjects=[f"pkg:{name}", "pkg:torch"] + [f"pkg:{o.split()[0]}" for o in others],
                      evidence={"pinned": {name: pin}, "installed": have, "others": others, "torch": torch})


@check("PKG030", "accelerate-older-than-transformers-needs", family="packages", needs=("packages",))
def accelerate_older_than_transformers_needs(snap):
    """The installed accelerate is older than the installed transformers accepts.

    What it checks
        The accelerate version against the installed transformers' own floor, ACCELERATE_MIN_VERSION
        (read as text from its utils/import_utils.py: gather/packages.py transformers_floors;
        ddpdoctor/data/transformers_floors.json), when both are installed.

    Why it matters
        transformers lists accelerate only as an extra (transformers[torch]), so upgrading
        transformers alone never upgrades an accelerate that is already installed, and pip does not
        complain. transformers compares at run time: is_accelerate_available() is False below the
        floor, and every Trainer (TrainingArguments._setup_devices, on every rank) raises
        ImportError "Using the `Trainer` with `PyTorch` requires `accelerate>=...`".

    Example
        transformers 4.46 (ACCELERATE_MIN_VERSION 0.26.0) with accelerate 0.21.0.

    Fix
        pip install -U "accelerate>=<the floor>"
    """
    from ddpdoctor.facts.torch_floors import release  # noqa: PLC0415

    packages = snap.get("packages") or {}
    versions = packages.get("versions") or {}
    floors = packages.get("transformers_floors") or {}
    acc, tf, floor = versions.get("accelerate"), versions.get("transformers"), floors.get("accelerate")
    have, need = release(acc), release(floor)
    if not tf or not have or not need or have >= need:
        return
    where = floors.get("from") or "transformers/utils/import_utils.py"
    yield warning(f"accelerate {acc} is older than transformers {tf} accepts (accelerate>={floor})",
                  detail=(f"transformers {tf} sets ACCELERATE_MIN_VERSION = \"{floor}\" ({where}); below it "
                          "is_accelerate_available() is False, and creating a Trainer raises ImportError: \"Using the "
                          f"`Trainer` with `PyTorch` requires `accelerate>={floor}`\" on every rank "
                          "(training_args.py, TrainingArguments._setup_devices). transformers declares accelerate "
                          "only as an extra, so pip does not check an accelerate that is already installed."),
                  fix=f'pip install -U "accelerate>={floor}"',
                  subjects=["pkg:accelerate", "pkg:transformers"],
                  evidence={"accelerate": acc, "transformers": tf, "floor": floor, "from": where})
