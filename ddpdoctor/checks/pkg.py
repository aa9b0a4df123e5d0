"""Installed-package checks: the deprecated `pynvml` distribution, NCCL wheels that overwrite each other."""
from __future__ import annotations

import re
from typing import Optional

from ddpdoctor.facts import gpu_versions
from ddpdoctor.facts.env import script_asks
from ddpdoctor.model import error, info, warning
from ddpdoctor.model.registry import check


@check("PKG001", "deprecated-pynvml", family="packages", needs=("packages",))
def deprecated_pynvml(snap):
    """The deprecated `pynvml` PyPI package is installed.

    What it checks
        Whether the distribution named `pynvml` is installed (read from package metadata, without
        importing it). NVIDIA's maintained binding is `nvidia-ml-py`, which installs the same
        import name `pynvml`.

    Why it matters
        The `pynvml` distribution is deprecated; older releases ship their own pynvml.py that can
        shadow nvidia-ml-py's, giving stale constants and missing functions for newer GPUs and
        drivers (gpuopenanalytics/pynvml#28). torch warns about it at import
        ("The pynvml package is deprecated. Please install nvidia-ml-py instead.").

    Example
        pip install pynvml   # pulled in by an old monitoring tool

    Fix
        pip uninstall -y pynvml && pip install --force-reinstall nvidia-ml-py
    """
    versions = snap["packages"].get("versions") or {}
    if not versions.get("pynvml"):
        return
    yield warning(f"the deprecated 'pynvml' distribution ({versions['pynvml']}) is installed",
                  detail=("It provides the same import name as nvidia-ml-py, NVIDIA's maintained binding, and may "
                          "shadow it." + (f" nvidia-ml-py {versions['nvidia-ml-py']} is installed too."
                                          if versions.get("nvidia-ml-py") else "")),
                  fix="pip uninstall -y pynvml && pip install --force-reinstall nvidia-ml-py",
                  subjects=["pkg:pynvml"], evidence={"pynvml": versions["pynvml"],
                                                     "nvidia-ml-py": versions.get("nvidia-ml-py")})


NCCL_WHEELS = ("nvidia-nccl-cu11", "nvidia-nccl-cu12", "nvidia-nccl-cu13")


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

    Example
        pip install torch (cu12) next to a package that pins nvidia-nccl-cu11

    Fix
        pip uninstall -y <the wheels for the other CUDA major>, then
        pip install --force-reinstall <the NCCL wheel torch requires>
    """
    versions = snap["packages"].get("versions") or {}
    present = {name: versions[name] for name in NCCL_WHEELS if versions.get(name)}
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


# The first NCCL release whose default build compiles for each GPU major architecture is data with its sources
# (ddpdoctor/data/gpu_versions.json: NVIDIA/nccl makefiles/common.mk at each release tag), read through
# facts.gpu_versions. Earlier releases neither carry kernels for the GPU nor know its links (Hopper's NVLink4 and
# NVSwitch: "Failed to find reverse path", mila-iqia/milabench#183).
NCCL_WHEELS = ("nvidia-nccl-cu11", "nvidia-nccl-cu12", "nvidia-nccl-cu13")


def _version(text) -> tuple:
    """(major, minor, patch) as far as given: facts.gpu_versions.release, the one release parser."""
    return gpu_versions.release(text)


def _nccl_older_than(snap, floor: tuple, torch_bundling: tuple):
    """(basis, guess, nccl, torch) when the NCCL torch loads is older than `floor`: from its recorded version, or,
    when none was recorded, from a torch older than `torch_bundling` (the first torch whose wheel bundles an NCCL
    at or past the floor's minor), said as a guess. None when it is not older, or nothing tells."""
    from ddpdoctor.facts.net import nccl_version_of

    nccl = nccl_version_of(snap)
    torch = _version(((snap["packages"].get("versions") or {}).get("torch") or "").split("+")[0])
    if nccl:
        if nccl >= floor:
            return None
        return f"NCCL {'.'.join(map(str, nccl))}", False, nccl, torch
    if len(torch) >= 2 and torch[:2] < torch_bundling:
        return (f"torch {'.'.join(map(str, torch))} (its bundled NCCL is older than {floor[0]}.{floor[1]}: a guess, "
                "NCCL's version was not recorded)", True, nccl, torch)
    return None


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




def torch_backends(snap) -> dict:
    """{'distributed': bool|None, 'nccl': bool|None, 'how': str}: what the installed torch offers.

    The `torch` facts (torch.distributed.is_available() / is_nccl_available(), from a snapshot that
    recorded them) when present, without gathering them: they cost an interpreter that imports torch.
    Otherwise what the platform settles: torch's Windows wheels had no torch.distributed before 1.7
    and never NCCL (NCCL is Linux-only); ROCm's Windows builds are made without USE_DISTRIBUTED
    (ROCm/TheRock external-builds/pytorch/build_prod_wheels.py)."""
    recorded = (getattr(snap, "sections", None) or {}).get("torch")
    if isinstance(recorded, dict) and not recorded.get("error") and "distributed_available" in recorded:
        return {"distributed": recorded.get("distributed_available"),
                "nccl": recorded.get("nccl_available") if not recorded.get("hip_build") else None,
                "gloo": recorded.get("gloo_available"), "how": "torch.distributed.is_available() as recorded"}
    os_name = str((snap.get("host") or {}).get("os") or "")
    version = ((snap.get("packages") or {}).get("versions") or {}).get("torch")
    release = gpu_versions.release(version)
    if os_name != "Windows" or not release:
        return {"distributed": None, "nccl": None, "gloo": None, "how": ""}
    if "rocm" in str(version):
        return {"distributed": False, "nccl": None, "gloo": False,
                "how": "ROCm's Windows builds of torch are made without USE_DISTRIBUTED"}
    if release < gpu_versions.windows_distributed_since():
        return {"distributed": False, "nccl": False, "gloo": False,
                "how": "torch's Windows wheels had no torch.distributed before 1.7"}
    return {"distributed": True, "nccl": False, "gloo": True,
            "how": "torch's Windows wheels ship Gloo only: NCCL is Linux-only"}


@check("PKG005", "torch-without-distributed-backend", family="packages", needs=("packages",), reads=("host", "gpus", "lint"))
def torch_without_distributed_backend(snap):
    """The installed torch has no torch.distributed, or no NCCL on a machine with NVIDIA GPUs.

    What it checks
        What torch itself reports, when a snapshot recorded it (the `torch` facts, not gathered by
        check because they cost an interpreter importing torch): `torch.distributed.is_available()`
        (torch/distributed/__init__.py: False when torch was built without USE_DISTRIBUTED, so the
        module exposes no init_process_group), and `torch.distributed.is_nccl_available()` while
        NVML sees NVIDIA GPUs. Otherwise what the platform settles from the OS and torch's version:
        torch's Windows wheels had no torch.distributed before 1.7 and have shipped Gloo only since
        (NCCL is Linux-only); ROCm's Windows builds have none. An error, not a warning, when the
        training script read (`check --script`, or the script of check's own launch command)
        names "nccl" in init_process_group.

    Why it matters
        Without torch.distributed every training script fails at its first distributed call
        ("module 'torch.distributed' has no attribute 'init_process_group'", or a "Default process
        group has not been initialized" further on); without NCCL, init_process_group("nccl")
        raises "Distributed package doesn't have NCCL built in". No setting fixes either: the
        build lacks the code.

    Example
        torch 1.1.0 on Windows 10 with 4 GPUs (ultralytics/yolov3#336); torch 1.10 on Windows with
        backend="nccl" (aim-uofa/AdelaiDet#524).

    Fix
        On Windows: init_process_group(backend="gloo"), or run under Linux/WSL2 for NCCL; otherwise
        install a torch build with distributed support (the official Linux wheels).
    """
    b = torch_backends(snap)
    os_name = str((snap.get("host") or {}).get("os") or "")
    version = ((snap.get("packages") or {}).get("versions") or {}).get("torch")
    where = f"torch {version}" + (f" on {os_name}" if os_name else "")
    launched = (snap.get("launcher") or {}).get("kind") not in (None, "none")
    if b["distributed"] is False:
        yield (error if launched else warning)(
            f"{where} has no torch.distributed: init_process_group does not exist in it",
            detail=f"torch.distributed.is_available() is False ({b['how']}). Any distributed training script fails "
                   "at its first distributed call: \"module 'torch.distributed' has no attribute "
                   "'init_process_group'\" or \"Default process group has not been initialized\".",
            fix=("pip install -U torch   # 1.7 or later on Windows, which has Gloo; or run under Linux/WSL2"
                 if os_name == "Windows" else "install an official torch wheel (built with USE_DISTRIBUTED=1)"),
            subjects=["pkg:torch"], evidence={"torch": version, "os": os_name or None, "distributed_available": False,
                                              "how": b["how"]})
        return
    devices = [d for d in ((snap.get("gpus") or {}).get("devices") or []) if isinstance(d, dict)]
    asked = [a for a in script_asks(snap, "backends") if a.get("backend") == "nccl"]
    if b["nccl"] is False and devices and asked:  # the script read asks for NCCL by name: it fails at that call
        a = asked[0]
        yield error(f"the training script asks for the NCCL backend ({a.get('path')}:{a.get('line')} {a.get('what')}) "
                    f"and {where} has none",
                    detail=f"torch.distributed.is_nccl_available() is False ({b['how']}): that init_process_group "
                           "raises \"Distributed package doesn't have NCCL built in\" on every rank."
                           + (" Gloo is the backend this build has." if b.get("gloo") else ""),
                    fix=('dist.init_process_group(backend="gloo")   # or run under Linux/WSL2 for NCCL'
                         if os_name == "Windows" else "install a CUDA build of torch, which bundles NCCL"),
                    subjects=["pkg:torch", "script:" + str(a.get("path"))],
                    evidence={"torch": version, "os": os_name or None, "nccl_available": False, "asked": a.get("what"),
                              "gloo_available": b.get("gloo"), "how": b["how"]})
        return
    if b["nccl"] is False and devices:
        gloo = b.get("gloo")
        yield warning(f"{where} has no NCCL backend, and this machine has {len(devices)} NVIDIA GPU(s)",
                      detail=f"torch.distributed.is_nccl_available() is False ({b['how']})"
                             + ": init_process_group(backend=\"nccl\") raises \"Distributed package doesn't have NCCL "
                             "built in\"" + (", and Gloo is the backend this build has." if gloo else "."),
                      fix=('dist.init_process_group(backend="gloo")   # or run under Linux/WSL2 for NCCL'
                           if os_name == "Windows" else "install a CUDA build of torch (pip install torch from the "
                                                        "CUDA index), which bundles NCCL"),
                      subjects=["pkg:torch"],
                      evidence={"torch": version, "os": os_name or None, "nccl_available": False,
                                "gloo_available": gloo, "gpus": len(devices), "how": b["how"]})


@check("PKG004", "torch-older-than-accelerate-needs", family="packages", needs=("packages",), reads=("host", "env"))
def torch_older_than_accelerate_needs(snap):
    """The installed torch is older than the installed accelerate accepts, for the launch configured.

    What it checks
        The accelerate and torch versions against the floors mined from each accelerate release
        (ddpdoctor/data/torch_floors.json, tools/mine_torch_floors.py): the `torch>=` of its
        setup.py, and the torch its launcher demands for a multi-GPU or multi-node launch (`raise
        NotImplementedError("... requires pytorch>=1.9.1")` in accelerate/commands/launch.py,
        0.13-0.20), the latter when the accelerate config (distributed_type MULTI_GPU, num_machines)
        or ACCELERATE_* variables ask for it.

    Why it matters
        pip enforces the declared floor, but conda, `--no-deps` and editable installs do not, and
        the launcher's floor is not declared at all: `accelerate launch --multi_gpu` on torch 1.8
        installs fine and fails at launch, because the multi-GPU launcher is torch.distributed.run,
        which torch 1.8 lacks (huggingface/accelerate#1199, #1203).

    Example
        accelerate 0.17.1 with torch 1.8.1 and distributed_type: MULTI_GPU.

    Fix
        pip install "torch>=1.9.1" (the floor named), or an accelerate release that matches the torch.
    """
    from ddpdoctor.facts import torch_floors

    versions = (snap.get("packages") or {}).get("versions") or {}
    acc, torch = versions.get("accelerate"), versions.get("torch")
    if not acc or not torch:
        return
    cfg = ((snap.get("host") or {}).get("accelerate_config") or {}).get("values") or {}
    env = snap["env"].get("vars") or {} if snap.get("env") else {}
    wanted = ["installed"]
    kind = str(cfg.get("distributed_type") or env.get("ACCELERATE_DISTRIBUTED_TYPE") or "").upper()
    if kind in ("MULTI_GPU", "DISTRIBUTEDTYPE.MULTI_GPU") or env.get("ACCELERATE_USE_MULTI_GPU"):
        wanted.append("multi_gpu")
    try:
        machines = int(cfg.get("num_machines") or env.get("ACCELERATE_NUM_MACHINES") or 1)
    except (TypeError, ValueError):
        machines = 1
    if machines > 1:
        wanted.append("multi_node")
    hits = torch_floors.floors("accelerate", acc, torch, tuple(wanted))
    if not hits:
        return
    top = max(hits, key=lambda e: torch_floors.release(e["torch"]))
    at_launch = [e for e in hits if e["when"] != "installed"]
    src = top["source"]
    yield warning(f"torch {torch} is older than accelerate {acc} accepts"
                  + (f" for a {'multi-node' if top['when'] == 'multi_node' else 'multi-GPU'} launch" if at_launch else "")
                  + f" (torch>={top['torch']})",
                  detail=("; ".join(f"{'accelerate launch refuses it: ' + repr(e['message']) if e['when'] != 'installed' else 'accelerate declares torch>=' + e['torch'] + ' (setup.py; pip enforces it, conda, --no-deps and editable installs do not)'}"
                                    f" (huggingface/accelerate {e['source']['path']}, {e['source']['tag']})" for e in hits)
                          + "."),
                  fix=f'pip install "torch>={top["torch"]}"   # or an accelerate release that accepts torch {torch}',
                  subjects=["pkg:torch", "pkg:accelerate"],
                  evidence={"accelerate": acc, "torch": torch, "floors": [
                      {"when": e["when"], "torch": e["torch"], "source": f"{src['repo']}/{e['source']['path']}@{e['source']['commit'][:12]}"}
                      for e in hits]})


@check("PKG006", "deepspeed-launcher-missing", family="packages", needs=("packages", "host"))
def deepspeed_launcher_missing(snap):
    """DeepSpeed's multi-node launch cannot start: pdsh is not installed, or the hostfile does not parse.

    What it checks
        With deepspeed installed and its default hostfile present (/job/hostfile, runner.py's
        DLTS_HOSTFILE) naming more than one host: whether `pdsh`, the default `--launcher`
        (PDSH_LAUNCHER), is on PATH (PDSHRunner.backend_exists: shutil.which('pdsh')); and whether
        every hostfile line parses as runner.py's _parse_hostfile reads it (`host slots=N`, no host
        twice).

    Why it matters
        Without pdsh the launch stops at once with "launcher 'pdsh' not installed."; a bad line
        with "Hostfile contains a bad entry" (stanford-crfm/mistral#38: pdsh missing on the cluster).

    Example
        deepspeed 0.12 with /job/hostfile listing node1 and node2, and no pdsh.

    Fix
        apt-get install pdsh (on the launching node), or deepspeed --launcher openmpi|slurm|mvapich
    """
    versions = snap["packages"].get("versions") or {}
    hostfile = snap["host"].get("deepspeed_hostfile") or {}
    if not versions.get("deepspeed") or not hostfile:
        return
    hosts = hostfile.get("hosts") or {}
    path = hostfile.get("path") or "/job/hostfile"
    errors = [e for e in hostfile.get("errors") or [] if isinstance(e, str)]
    if errors:
        yield warning(f"DeepSpeed's hostfile {path} will not parse: {errors[0]}",
                      detail="deepspeed/launcher/runner.py (_parse_hostfile) takes `host slots=N` lines and "
                             "'#' comments, and raises on anything else or a repeated host ('Hostfile contains a bad "
                             f"entry ...'). Problems: {'; '.join(errors[:5])}.",
                      fix=f"fix {path}: one `hostname slots=<GPUs>` per line",
                      subjects=[f"path:{path}", "pkg:deepspeed"], evidence={"hostfile": hostfile})
    tools = snap["host"].get("launcher_tools") or {}
    if len(hosts) > 1 and "pdsh" in (tools.get("missing") or []):
        yield warning(f"DeepSpeed will launch on {len(hosts)} hosts from {path} with pdsh, which is not installed",
                      detail="pdsh is DeepSpeed's default multi-node launcher (runner.py --launcher, PDSH_LAUNCHER); "
                             "PDSHRunner.backend_exists() looks it up with shutil.which, and without it the launch "
                             "stops with \"launcher 'pdsh' not installed.\" Hosts: " + ", ".join(list(hosts)[:8]) + ".",
                      fix="apt-get install pdsh   # or: deepspeed --launcher openmpi|slurm|mvapich ...",
                      subjects=["pkg:deepspeed", "tool:pdsh", f"path:{path}"],
                      evidence={"hosts": hosts, "pdsh": None, "deepspeed": versions.get("deepspeed")})


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
        The torch version, and the NCCL it loads where recorded, against ddpdoctor/data/known_defects.json:
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
    from ddpdoctor.facts.net import nccl_version_of  # noqa: PLC0415

    torch = (snap["packages"].get("versions") or {}).get("torch")
    nccl = nccl_version_of(snap)
    env = env_of(snap)
    launcher = snap.get("launcher") or {}
    world, local = launcher.get("world_size"), launcher.get("local_world_size")
    nodes = launcher.get("nnodes") or (world // local if world and local and world % local == 0 else None)
    gpus = snap.get("gpus") if isinstance(snap.get("gpus"), dict) else {}
    caps = [tuple(d["cuda_capability"]) for d in gpus.get("devices") or [] if d.get("cuda_capability")]
    # NCCL loads NCCL_TOPO_FILE, else /var/run/nvidia-topologyd/virtualTopology.xml (src/graph/topo.cc)
    vt = (snap.get("pci") or {}).get("nccl_virtual_topology") if "pci" in snap else None
    topology_file = True if (env.get("NCCL_TOPO_FILE") or "").strip() or vt else (False if vt is False else None)
    for entry, nccl_known in known_defects.matching(torch, nccl):
        workaround = entry.get("workaround_env") or {}
        if workaround and all(str(env.get(k, "")).strip() == v for k, v in workaround.items()):
            continue
        host = (snap.get("host") or {}) if "host" in snap else {}
        if known_defects.conditions_unmet(entry, nodes, caps, topology_file, str(host.get("os") or "") or None,
                                          hostname=host.get("hostname"), gpu_subset=_gpu_subset_in_container(snap)):
            continue
        src = entry["source"]
        shown = ".".join(map(str, nccl)) if nccl else None
        if not entry.get("torch"):  # a defect of NCCL alone: the NCCL release is the subject, the fix is NCCL's
            yield warning(f"NCCL {shown} has a known defect on this job: {entry['effect']}",
                          detail=(f"When {entry['when']}; fixed in {entry['fixed_in']}. Read in {src['repo']} "
                                  f"{src['path']}@{src['commit'][:12]} ({src['function']}): \"{src['quote']}\"; "
                                  f"{src['change']}. Reports: " + ", ".join(entry.get("reports") or []) + "."),
                          fix=entry.get("fix", "upgrade NCCL") + ("   # or: export " + " ".join(
                              f"{k}={v}" for k, v in workaround.items()) if workaround else ""),
                          subjects=["pkg:nccl"] + list(workaround), env_fix=dict(workaround),
                          evidence={"torch": torch, "nccl": shown, "defect": entry["id"], "nodes": nodes,
                                    "source": f"{src['repo']}/{src['path']}@{src['commit'][:12]}"})
            continue
        yield warning(f"torch {torch}" + (f" with NCCL {shown}" if shown else "") + f" has a known defect: {entry['effect']}",
                      detail=(f"When {entry['when']}, {entry['effect']}; fixed in {entry['fixed_in']} ({src['repo']} "
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


@check("ENV014", "ssh-launch-without-keys", family="launcher", needs=("packages", "host"))
def ssh_launch_without_keys(snap):
    """DeepSpeed will reach the hostfile's hosts over ssh, and this host has no ssh client or no key.

    What it checks
        With deepspeed installed and a hostfile it will read (one host or more): whether the `ssh`
        client is on PATH, and whether a default identity (~/.ssh/id_rsa, id_ecdsa, id_ed25519, ...) or
        an agent (SSH_AUTH_SOCK) is there for it. A ~/.ssh/config, which may name another IdentityFile,
        turns the finding into a note.

    Why it matters
        DeepSpeed's runner first runs `ssh -o PasswordAuthentication=no <first host> hostname`
        (deepspeed/launcher/runner.py) and stops with "Using hostfile at ... but host=... was not
        reachable via ssh ... setup passwordless ssh" when it fails; its pdsh launcher sets
        PDSH_RCMD_TYPE=ssh (multinode_runner.py). deepspeedai/DeepSpeed#4907: the check returned 255
        on two nodes without passwordless ssh. One host is no exception: main() sets
        multi_node_exec = True as soon as fetch_hostfile() returns hosts, runs the ssh check on that
        condition, and without --master_addr asks `ssh <first host> hostname -I` for the address; only
        without a hostfile does it launch locally with master 127.0.0.1 (runner.py @ 066d912052b5; the
        ssh check since a773996d, v0.6.1; v0.3.16 and v0.5.10 already ask `ssh <first host> hostname -I`). Its own message says "If you are running with a single
        node please remove <hostfile>".

    Example
        deepspeed --hostfile hostfile train.py, hostfile naming 192.168.3.100 and .101, and ~/.ssh empty.

    Fix
        ssh-keygen -t ed25519 -N '' -f ~/.ssh/id_ed25519 && ssh-copy-id <each host>   # or --launcher slurm|openmpi, or --no_ssh
    """
    versions = snap["packages"].get("versions") or {}
    host = snap["host"]
    hostfile = host.get("deepspeed_hostfile") or {}
    ssh = host.get("ssh")
    hosts = list((hostfile.get("hosts") or {}))
    if not versions.get("deepspeed") or not hosts or not isinstance(ssh, dict):
        return
    path = hostfile.get("path") or "/job/hostfile"
    if not ssh.get("client"):
        problem, sev = "there is no ssh client on PATH", warning
    elif not ssh.get("keys") and not ssh.get("agent"):
        problem = "~/.ssh holds no default key and no ssh agent is offered (SSH_AUTH_SOCK)"
        sev = info if ssh.get("config") else warning
        if ssh.get("config"):
            problem += " (~/.ssh/config may name another IdentityFile)"
    else:
        return
    one = len(hosts) == 1
    what = f"only {hosts[0]}" if one else f"{len(hosts)} hosts"
    yield sev(f"DeepSpeed will reach {hosts[0] if one else f'{len(hosts)} hosts'} from {path} over ssh, but {problem}",
              detail=("deepspeed/launcher/runner.py checks `ssh -o PasswordAuthentication=no <first host> hostname` "
                      "whenever it has read a hostfile and stops with \"... was not reachable via ssh ... setup "
                      "passwordless ssh\"; the pdsh launcher runs every rank over ssh (PDSH_RCMD_TYPE=ssh)."
                      + (f" The hostfile names {what}: a one-host hostfile still takes this path (and `ssh <host> "
                         "hostname -I` for the master address when --master_addr is not given); without a hostfile "
                         "the runner launches on the local GPUs with master 127.0.0.1." if one
                         else " Hosts: " + ", ".join(hosts[:8]) + ".")),
              fix=((f"rm {path}   # one host: deepspeed then launches locally; or set up passwordless ssh to "
                    f"{hosts[0]}, or pass --no_ssh_check --master_addr 127.0.0.1") if one else
                   ("ssh-keygen -t ed25519 -N '' -f ~/.ssh/id_ed25519 && for h in " + " ".join(hosts[:8])
                    + "; do ssh-copy-id $h; done   # or: deepspeed --launcher slurm|openmpi ...")),
              subjects=["pkg:deepspeed", "tool:ssh", f"path:{path}"],
              evidence={"hosts": hosts[:16], "ssh": ssh})


# deepspeedai/DeepSpeed deepspeed/launcher/runner.py @ 2d991ba3: on several hosts the runner forwards only the
# variables whose names start with EXPORT_ENVS ('MLFLOW', 'PYTHON', 'MV2', 'UCX', plus Nebula/AzureML names) or with
# the accelerator's export_envs() ('NCCL' for CUDA: accelerator/cuda_accelerator.py @ 58ddff65), and the lines of
# .deepspeed_env (DS_ENV_FILE) in ~ and the current directory; multinode_runner.py @ 06ae7e07 PDSHRunner.get_cmd
# then runs `export ...; cd <cwd>; <sys.executable> -u -m deepspeed.launcher.launch` on every host.
DS_EXPORTED_PREFIXES = ("MLFLOW", "PYTHON", "MV2", "UCX", "NCCL", "NEBULA", "AZUREML", "DLTS_")
# what each rank gets from the launcher itself, not from this shell
DS_SET_PER_RANK = {"CUDA_VISIBLE_DEVICES", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_SIZE", "LOCAL_WORLD_SIZE",
                   "MASTER_ADDR", "MASTER_PORT", "CROSS_RANK", "CROSS_SIZE"}
# experiment trackers and hubs a training script reads by name (not catalogued as settings)
DS_TRACKER_PREFIXES = ("WANDB_", "HF_", "HUGGING_FACE_", "COMET_", "NEPTUNE_", "CLEARML_")
_IN_A_RANK_VARS = ("RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID")


def _ds_hosts(snap) -> list:
    host = snap["host"]
    return list(((host.get("deepspeed_hostfile") or {}).get("hosts") or {}))


@check("ENV018", "deepspeed-remote-environment", family="launcher", needs=("packages", "host", "env"))
def deepspeed_remote_environment(snap):
    """DeepSpeed's multi-node runner will not give the other hosts this host's environment.

    What it checks
        With deepspeed installed, a hostfile of two hosts or more, and this shell not a rank itself:
        the variables set here that the other hosts need - settings the catalogue knows (torch,
        CUDA, transformers, accelerate, tokenizers, DeepSpeed) and experiment trackers' (WANDB_*,
        HF_*...) - whose names start with none of the prefixes the runner forwards (MLFLOW, PYTHON,
        MV2, UCX, and NCCL from the CUDA accelerator) and that no .deepspeed_env file lists. And, as a
        note, the interpreter path (sys.executable) and directory the runner will use on every host.

    Why it matters
        The runner starts the ranks on the other hosts through pdsh (or mpirun -x) with only those
        variables exported (deepspeed/launcher/runner.py, EXPORT_ENVS and DEEPSPEED_ENVIRONMENT_NAME);
        the rest stay on this host, so the hosts train with different settings (an allocator config,
        TORCH_NCCL_* timeouts or debug switches only where the job was started) or without the
        tracker's key (snowflakedb/ArcticTraining#316: WANDB_API_KEY never reached the other nodes).
        The pdsh runner sends `export ...; cd <current directory>; <this interpreter> -u -m
        deepspeed.launcher.launch` to every host (multinode_runner.py PDSHRunner.get_cmd; the MPI
        runners pass the same path): an environment at another path there fails with 'No such file
        or directory' (deepspeedai/DeepSpeedExamples#889).

    Example
        export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True WANDB_API_KEY=...; deepspeed --hostfile hf train.py

    Fix
        List them in ~/.deepspeed_env (or ./.deepspeed_env), one KEY=value per line, or set them in the
        hosts' shell profiles.
    """
    from ddpdoctor.facts.env import env_of  # noqa: PLC0415

    versions = snap["packages"].get("versions") or {}
    hosts = _ds_hosts(snap)
    env = env_of(snap)
    if not versions.get("deepspeed") or len(hosts) < 2 or any(v in env for v in _IN_A_RANK_VARS):
        return
    host = snap["host"]
    path = (host.get("deepspeed_hostfile") or {}).get("path") or "/job/hostfile"
    if host.get("python_executable"):
        python = host["python_executable"]
        yield info(f"DeepSpeed will run {python} on each of the {len(hosts)} hosts of {path}: that interpreter path "
                   "and the current directory must exist on every one of them",
                   detail=("The pdsh runner sends `export ...; cd <current directory>; <this interpreter> -u -m "
                           "deepspeed.launcher.launch ...` to every host (deepspeed/launcher/multinode_runner.py "
                           "PDSHRunner.get_cmd, sys.executable; the MPI runners pass the same path): a conda "
                           "environment or checkout at another path on another host fails there with 'No such file "
                           "or directory' (deepspeedai/DeepSpeedExamples#889)."),
                   fix=f"install the environment at {python} on every host (or on a shared filesystem), and start "
                       "deepspeed from a directory that exists everywhere",
                   subjects=["pkg:deepspeed", f"path:{python}"], evidence={"python": python, "hosts": hosts[:16]})
    from ddpdoctor.facts import settings as catalog  # noqa: PLC0415

    listed = set(((snap["host"].get("deepspeed_env") or {}).get("names")) or [])
    settings, trackers = [], []
    for name in sorted(env):
        if name in listed or name in DS_SET_PER_RANK or name.startswith(DS_EXPORTED_PREFIXES):
            continue
        if catalog.lookup(name) is not None and not name.startswith(("PET_", "TORCHELASTIC_")):
            settings.append(name)
        elif name.startswith(DS_TRACKER_PREFIXES):
            trackers.append(name)
    if not settings and not trackers:
        return
    names = settings + trackers
    # The `--launcher` flag is on deepspeed's command line, which check does not see. Only pdsh (the default) and
    # openmpi (`mpirun -x` per export) send no more than the exports; slurm runs `srun --export=ALL,...`, and mpich,
    # impi and mvapich run a Hydra `mpirun` that passes the whole environment by default (multinode_runner.py
    # @edaa7221, SlurmRunner / MPICHRunner / IMPIRunner / MVAPICHRunner.get_cmd). Without pdsh here the default
    # launcher cannot run, so another one is in use and which one is unknown: a note.
    tools = host.get("launcher_tools") if isinstance(host.get("launcher_tools"), dict) else {}
    no_pdsh = "pdsh" in (tools.get("missing") or [])
    in_slurm = bool(env.get("SLURM_JOB_ID"))
    sev = warning if settings and not no_pdsh else info
    which = ("with `--launcher openmpi` (pdsh, the default launcher, is not installed here"
             + (", and this is a Slurm allocation, where `--launcher slurm` carries the whole environment)" if in_slurm
                else ")") if no_pdsh else
             "with its default pdsh launcher or `--launcher openmpi`")
    yield sev(f"DeepSpeed's runner will not carry {', '.join(names[:6])}{' ...' if len(names) > 6 else ''} to the "
              f"other {len(hosts) - 1} host(s) of the hostfile {which}",
              detail=("On several hosts the pdsh and openmpi launchers export only variables whose names start with "
                      "MLFLOW, PYTHON, MV2, UCX or NCCL, plus the lines of .deepspeed_env (deepspeed/launcher/runner.py); "
                      + (f"the settings {', '.join(settings[:8])} would hold on this host's ranks only, so the hosts "
                         "would train differently" if settings else "")
                      + ("; " if settings and trackers else "")
                      + (f"{', '.join(trackers[:8])} would be missing on the other hosts" if trackers else "") + ". "
                      "`--launcher slurm` (srun --export=ALL) and mpich, impi or mvapich (Hydra's mpirun passes the "
                      "whole environment) carry them; check does not see deepspeed's command line, so it cannot tell "
                      "which launcher you pass (multinode_runner.py)."),
              fix="printf '%s\\n' " + " ".join(f'"{n}=${n}"' for n in names[:8]) + " >> ~/.deepspeed_env",
              subjects=["pkg:deepspeed"] + names[:16],
              evidence={"not_forwarded": names[:32], "hosts": hosts[:16], "deepspeed_env": sorted(listed)[:32]})


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


# xformers' wheels target torch's stable ABI from 0.0.34 on (any later torch runs them): the xformers repository's
# csrc docs, "Since xFormers 0.0.34, builds target the PyTorch stable ABI" (read in a stored copy, commit not pinned)
XFORMERS_STABLE_ABI = (0, 0, 34)


def _xformers_built_for_another_torch(pk):
    """xformers' recorded build (packages.xformers_build, from xformers/cpp_lib.json) against the installed torch and
    Python: a warning, xformers only warns and runs without its kernels."""
    xf = pk.get("xformers_build") if isinstance(pk.get("xformers_build"), dict) else {}
    versions = pk.get("versions") or {}
    torch, built = str(versions.get("torch") or ""), str(xf.get("torch") or "")
    if not torch or not built:
        return
    rel = lambda v: gpu_versions.release(v)  # noqa: E731
    local = lambda v: v.split("+", 1)[1] if "+" in v else None  # noqa: E731
    xver = rel(versions.get("xformers"))
    if xver and xver >= XFORMERS_STABLE_ABI:
        differs = rel(torch)[:2] < rel(built)[:2]
    else:
        differs = rel(torch) != rel(built) or (local(torch) and local(built) and local(torch) != local(built))
    python, built_py = str(pk.get("python") or ""), str(xf.get("python") or "")
    py_differs = bool(python and built_py and rel(python)[:2] != rel(built_py)[:2])
    if not differs and not py_differs:
        return
    what = (f"PyTorch {built}" + (f" with CUDA {xf['cuda']}" if xf.get("cuda") else "") + f" (you have {torch})"
            if differs else f"Python {built_py} (you have {python})")
    yield warning(f"xformers{' ' + str(versions['xformers']) if versions.get('xformers') else ''} was built for {what}",
                  detail=("xformers loads its C++/CUDA library only into the torch and Python it was built for "
                          "(xformers/_cpp_lib.py): otherwise it warns \"xFormers can't load C++/CUDA extensions\" and "
                          "every memory_efficient_attention call raises \"No operator found for "
                          "`memory_efficient_attention_forward`\" (the build recorded in xformers/cpp_lib.json)."),
                  fix="pip install -U xformers --index-url https://download.pytorch.org/whl/cu"
                      + (str((pk.get("torch_build") or {}).get("cuda") or "121").replace(".", "")[:3])
                      + "   # the wheel built for this torch; or install the torch it was built for",
                  subjects=["pkg:xformers", "pkg:torch"],
                  evidence={"xformers": versions.get("xformers"), "built_for": xf, "torch": torch, "python": python})


def _flash_attn_built_for_another_torch(pk):
    """flash-attn's recorded wheel build (packages.flash_attn_build: torch major.minor, CUDA, C++ ABI from the wheel's
    name) against the installed torch: an error, `import flash_attn` fails outright."""
    fa = pk.get("flash_attn_build") if isinstance(pk.get("flash_attn_build"), dict) else {}
    versions = pk.get("versions") or {}
    torch = str(versions.get("torch") or "")
    if not torch or not fa.get("torch"):
        return
    mm = lambda v: gpu_versions.release(v)[:2]  # noqa: E731
    build = pk.get("torch_build") if isinstance(pk.get("torch_build"), dict) else {}
    have_cuda, was_cuda = str(build.get("cuda") or ""), str(fa.get("cuda") or "")
    have_abi, was_abi = pk.get("torch_cxx11_abi"), fa.get("cxx11_abi")
    why = []
    if mm(torch) and mm(fa["torch"]) and mm(torch) != mm(fa["torch"]):
        why.append(f"torch {fa['torch']} (you have {torch})")
    if have_cuda and was_cuda and gpu_versions.release(have_cuda)[:1] != gpu_versions.release(was_cuda)[:1]:
        why.append(f"CUDA {was_cuda} (torch is built for CUDA {have_cuda})")
    if have_abi in ("0", "1") and was_abi in ("0", "1") and have_abi != was_abi:
        why.append(f"the C++ ABI _GLIBCXX_USE_CXX11_ABI={was_abi} (torch's is {have_abi})")
    if not why:
        return
    fa_version = versions.get("flash-attn")
    yield error(f"flash-attn{' ' + str(fa_version) if fa_version else ''} was built for " + "; ".join(why),
                detail=("flash-attn's CUDA extension (flash_attn_2_cuda) links against the libtorch/c10 symbols of the "
                        "torch it was compiled with: under another torch release, CUDA major or C++ ABI `import "
                        "flash_attn` fails with \"flash_attn_2_cuda...so: undefined symbol: _ZN3c10...\" "
                        "(Dao-AILab/flash-attention#931: wheels built for torch 2.2.2/2.3.0 do not load under 2.2.0; "
                        "huggingface/open-r1#684: a cxx11abiTRUE build under torch 2.6.0's ABI 0). The build is read "
                        f"from the wheel's name ({fa.get('from')})."),
                fix=("pip install flash-attn --no-build-isolation --no-cache-dir --force-reinstall   # fetches or "
                     "builds the wheel for this torch; or install the wheel whose name matches torch "
                     f"{'.'.join(str(p) for p in mm(torch))}, cu{have_cuda.split('.')[0] if have_cuda else 'XX'} and "
                     f"cxx11abi{'TRUE' if have_abi == '1' else 'FALSE' if have_abi == '0' else '?'}"),
                subjects=["pkg:flash-attn", "pkg:torch"],
                evidence={"flash-attn": fa_version, "built_for": fa, "torch": torch, "torch_build": build,
                          "torch_cxx11_abi": have_abi})


def _extensions_missing_torch_symbols(pk):
    """Compiled extensions whose undefined c10/at/torch symbols torch's libraries do not export (packages.
    torch_extensions, read from ELF .dynsym/.gnu.hash): an error each, `import` fails with "undefined symbol"."""
    exts = pk.get("torch_extensions")
    if not isinstance(exts, list):
        return
    torch = (pk.get("versions") or {}).get("torch")
    for ext in [e for e in exts if isinstance(e, dict) and e.get("missing")][:4]:
        package, missing = str(ext.get("package") or "?"), [str(m) for m in ext.get("missing") or []]
        count = ext.get("missing_count") if isinstance(ext.get("missing_count"), int) else len(missing)
        yield error(f"{package}'s compiled extension {ext.get('file')} needs {count} c10/ATen/torch symbol"
                    f"{'s' if count != 1 else ''} that torch{' ' + str(torch) if torch else ''} does not export "
                    f"(e.g. {missing[0]})",
                    detail=("The extension links torch's libraries (libtorch/libc10 in its DT_NEEDED) and was "
                            "compiled against another torch release, CUDA build or C++ ABI: `import` fails with "
                            f"\"ImportError: {ext.get('file')}: undefined symbol: {missing[0]}\" (flash-attn from "
                            "an sdist built under an older torch: huggingface/open-r1#684; apex, torch-scatter, "
                            "xformers source builds alike). Read from the extension's ELF dynamic symbol table against "
                            "torch's libraries' exports (.gnu.hash); nothing is imported."),
                    fix=(f"pip install --no-build-isolation --no-cache-dir --force-reinstall {package}   # rebuild it "
                         "against the installed torch; or install the torch it was built for"),
                    subjects=[f"pkg:{package}", "pkg:torch"],
                    evidence={"extension": ext, "torch": torch})


@check("PKG012", "deepspeed-ops-built-for-another-torch", family="packages", needs=("packages",))
def deepspeed_ops_built_for_another_torch(snap):
    """DeepSpeed's pre-built ops were compiled against another torch or CUDA than the one installed.

    What it checks
        The torch and CUDA (or HIP) versions DeepSpeed's setup.py recorded when it compiled ops at install
        time (DS_BUILD_OPS=1 or DS_BUILD_<OP>=1: deepspeed/git_version_info_installed.py, `torch_info` and
        `installed_ops`, read as text) against the installed torch's release and CUDA build, each to
        major.minor as DeepSpeed compares them. Ops compiled just in time (none pre-built) are not judged.

    Why it matters
        DeepSpeed loads a pre-built op only after OpBuilder.validate_torch_version / validate_torch_op_version
        (deepspeedai/DeepSpeed op_builder/builder.py @edaa7221) pass: after `pip install -U torch` the first
        FusedAdam or CPUAdam raises "PyTorch version mismatch! DeepSpeed ops were compiled and installed with
        a different version than what is being used at runtime" (or "CUDA version mismatch!") on every rank;
        binaries built against another torch's ABI are stale (huggingface/transformers#12715).

        The same for xformers' C++/CUDA extensions: the torch (release and +cuXXX build) and Python recorded in
        the wheel's xformers/cpp_lib.json against the installed ones. xformers loads its library only when they
        match and otherwise warns "xFormers can't load C++/CUDA extensions. xFormers was built for: PyTorch 2.3.0+cu121
        with CUDA 1201 (you have 2.1.0+cu121)" and runs without its kernels: the first memory_efficient_attention
        call raises "No operator found for `memory_efficient_attention_forward`" (yangjianxin1/Firefly#258,
        yufu-wang/PromptHMR#4; facebookresearch/xformers xformers/_cpp_lib.py). From xformers 0.0.34 the library
        targets torch's stable ABI and runs under any later torch: only an older installed torch is reported then.

        And flash-attn's CUDA extension: the torch major.minor, CUDA major and C++ ABI its prebuilt wheel was built
        for, read from the wheel's name (flash_attn-2.5.8+cu122torch2.3cxx11abiFALSE-...: the URL in the dist-info's
        direct_url.json, or the installed version's local part), against torch's release, CUDA build and ABI
        (TorchConfig.cmake's _GLIBCXX_USE_CXX11_ABI). A mismatch is an error: `import flash_attn` fails with
        "flash_attn_2_cuda...so: undefined symbol: _ZN3c10..." (Dao-AILab/flash-attention#931, huggingface/open-r1#684).
        A flash-attn installed from PyPI's sdist records no build; apex records none either.

        And any compiled extension in torch's site-packages that links libtorch/libc10 (DT_NEEDED): its undefined
        GLOBAL c10/at/torch symbols (ELF .dynsym) that none of torch's libraries exports (looked up in their
        .gnu.hash tables, read as bytes; nothing imported) are the symbols whose absence makes `import` fail with
        "undefined symbol: _ZN3c10..." (flash-attn or apex source builds under an older torch). Bounded: 64 .so
        files, 4 levels deep, 1 s. An error per extension.

    Example
        deepspeed installed with DS_BUILD_OPS=1 under torch 1.9 + CUDA 11.1, then torch upgraded to 2.1 + cu121;
        xformers 0.0.26.post1 (built for torch 2.3.0+cu121) beside torch 2.1.0+cu121; the flash-attn wheel
        +cu122torch2.3cxx11abiFALSE beside torch 2.2.0.

    Fix
        DS_BUILD_OPS=1 pip install --no-cache-dir --force-reinstall deepspeed   # rebuild against this torch;
        or pip install deepspeed without DS_BUILD_* to compile ops just in time.
    """
    pk = snap.get("packages") or {}
    yield from _xformers_built_for_another_torch(pk)
    yield from _flash_attn_built_for_another_torch(pk)
    yield from _extensions_missing_torch_symbols(pk)
    built = pk.get("deepspeed_build")
    if not isinstance(built, dict) or not built.get("installed_ops"):
        return
    versions = pk.get("versions") or {}
    torch, ds = versions.get("torch"), versions.get("deepspeed")
    mm = lambda v: ".".join(str(p) for p in gpu_versions.release(v)[:2])  # noqa: E731 - DeepSpeed's major.minor
    ops = ", ".join(built["installed_ops"][:6]) + (" ..." if len(built["installed_ops"]) > 6 else "")
    fix = ("DS_BUILD_OPS=1 pip install --no-cache-dir --force-reinstall deepspeed"
           + (f"=={ds}" if ds else "") + "   # rebuild the ops against this torch; or reinstall without DS_BUILD_*")
    evidence = {"deepspeed": ds, "built_with": built, "torch": torch, "torch_build": pk.get("torch_build")}
    if torch and built.get("torch") and mm(torch) and mm(torch) != mm(built["torch"]):
        yield error(f"DeepSpeed{' ' + ds if ds else ''}'s pre-built ops ({ops}) were compiled with torch "
                    f"{built['torch']}; torch {torch} is installed",
                    detail=("DeepSpeed checks the torch its ops were built with before loading one (op_builder/"
                            "builder.py validate_torch_version): the first optimizer or kernel from them raises "
                            "\"PyTorch version mismatch! DeepSpeed ops were compiled and installed with a different "
                            f"version than what is being used at runtime\" (install {mm(built['torch'])}, runtime "
                            f"{mm(torch)}) on every rank."),
                    fix=fix, subjects=["pkg:deepspeed", "pkg:torch"], evidence=evidence)
        return
    build = pk.get("torch_build") if isinstance(pk.get("torch_build"), dict) else {}
    for key, name in (("cuda", "CUDA"), ("hip", "HIP")):
        have, was = build.get(key), built.get(key)
        if have and was and mm(have) and mm(have) != mm(was):
            yield error(f"DeepSpeed's pre-built ops ({ops}) were compiled for {name} {was}; this torch is built for "
                        f"{name} {have}",
                        detail=(f"DeepSpeed checks the {name} version of its ops before loading one on a GPU "
                                f"(op_builder/builder.py validate_torch_op_version): it raises \"{name} version "
                                "mismatch! DeepSpeed ops were compiled and installed with a different version than "
                                "what is being used at runtime\" on every rank."),
                        fix=fix, subjects=["pkg:deepspeed", "pkg:torch"], evidence=evidence)
            return


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
        if not have or not _version(pin) or not _version(have) or _version(have) >= _version(pin):
            continue
        yield warning(f"{name} {have} is installed, older than the {pin} torch {versions.get('torch')} pins",
                      detail=("torch's CUDA wheel loads libnccl.so.2 from this wheel; one older than the pin lacks "
                              "symbols torch was built against: 'undefined symbol: ncclCommRegister' at import "
                              "(pytorch/pytorch#119932) or a failure at the first collective. Another package's "
                              "requirement probably pulled it back (pip check names it)."),
                      fix=f"pip install {name}=={pin}   # then pip check",
                      subjects=[f"pkg:{name}", "pkg:torch"],
                      evidence={"installed": have, "pinned": pin, "torch": versions.get("torch")})


def _jit_builders(snap, pk) -> list:
    """What compiles a CUDA extension when the job runs: DeepSpeed installed with no pre-built ops (its ops are built
    just in time, op_builder/builder.py jit_load), and the script's torch.utils.cpp_extension load() calls."""
    out = []
    versions = pk.get("versions") or {}
    built = pk.get("deepspeed_build") if isinstance(pk.get("deepspeed_build"), dict) else {}
    if versions.get("deepspeed") and not built.get("installed_ops"):
        out.append(f"DeepSpeed {versions['deepspeed']}'s ops (none pre-built: compiled at their first use)")
    out += [f"{r.get('path')}:{r.get('line')} {r.get('what')}" for r in script_asks(snap, "extension_builds")]
    return out


def _no_cuda_toolkit(snap, pk):
    """No CUDA toolkit found (PKG014's gatherer records {}) under a CUDA build of torch while something compiles CUDA
    code at run time: a warning; nothing that compiles: nothing said (most jobs need no toolkit)."""
    build = pk.get("torch_build") if isinstance(pk.get("torch_build"), dict) else {}
    builders = _jit_builders(snap, pk)
    if not build.get("cuda") or not builders:
        return
    yield warning("No CUDA toolkit found, and " + builders[0] + " compiles CUDA code at run time",
                  detail=("Neither CUDA_HOME, CUDA_PATH, an nvcc on PATH nor /usr/local/cuda names a toolkit, which is "
                          "where torch.utils.cpp_extension and DeepSpeed's op builder look: the build stops with "
                          "\"OSError: CUDA_HOME environment variable is not set. Please set it to your CUDA install "
                          "root.\" (torch/utils/cpp_extension.py) or \"CUDA_HOME does not exist, unable to compile CUDA "
                          f"op(s)\" (DeepSpeed op_builder/builder.py). torch is built for CUDA {build['cuda']}; what "
                          "compiles here: " + "; ".join(builders[:3]) + "."),
                  fix=(f"install a CUDA {build['cuda']} toolkit (conda install -c nvidia cuda-toolkit={build['cuda']}, "
                       "or NVIDIA's installer) and export CUDA_HOME=<its root>; or pre-build the ops (DS_BUILD_OPS=1 "
                       "pip install deepspeed) where a toolkit exists"),
                  subjects=["pkg:cuda-toolkit", "pkg:torch"],
                  evidence={"toolkit": {}, "torch_build": build, "builders": builders})


@check("PKG014", "cuda-toolkit-mismatch", family="packages", needs=("packages",), reads=("gpus", "lint"))
def cuda_toolkit_mismatch(snap):
    """The local CUDA toolkit cannot build extensions for this torch or for these GPUs.

    What it checks
        The CUDA toolkit an extension compiled at run time uses (CUDA_HOME, CUDA_PATH, the `nvcc` on PATH, or
        /usr/local/cuda, as torch.utils.cpp_extension finds it; its version from version.json / version.txt)
        against the CUDA release torch was built with (major versions) and against the GPUs' compute capability
        (the newest architecture that toolkit compiles for: gpu_versions.json newest_arch_of_toolkit). A warning
        when something will compile at run time (DeepSpeed without pre-built ops, a cpp_extension load() in the
        script read), info otherwise.

    Why it matters
        torch.utils.cpp_extension refuses a toolkit of another major than torch's build: "The detected CUDA version
        (11.5) mismatches the version that was used to compile PyTorch (12.1). Please make sure to use the same
        CUDA versions." (pytorch/pytorch torch/utils/cpp_extension.py _check_cuda_version, CUDA_MISMATCH_MESSAGE);
        DeepSpeed's op builder refuses first ("Installed CUDA version X does not match the version torch was
        compiled with Y, unable to compile cuda/cpp extensions without a matching cuda version": op_builder/
        builder.py assert_no_cuda_mismatch). A toolkit older than the GPU's architecture fails in nvcc itself
        ("nvcc fatal : Unsupported gpu architecture 'compute_89'": deepspeedai/DeepSpeedExamples#634, fused_adam
        on an sm_89 GPU with CUDA 11.7).

        No toolkit at all (packages.cuda_toolkit recorded empty: no CUDA_HOME/CUDA_PATH, no nvcc on PATH, no
        /usr/local/cuda) under a CUDA build of torch, while something compiles at run time, is a warning too: the
        build stops before compiling ("OSError: CUDA_HOME environment variable is not set. Please set it to your
        CUDA install root.": torch/utils/cpp_extension.py _join_cuda_home; DeepSpeed's op builder: "CUDA_HOME does
        not exist, unable to compile CUDA op(s)", op_builder/builder.py).

    Example
        torch 2.1.2+cu121, CUDA_HOME=/usr/local/cuda-11.7, DeepSpeed installed without DS_BUILD_OPS, RTX 4090s.

    Fix
        export CUDA_HOME=<a toolkit of torch's CUDA release> (conda install -c nvidia cuda-toolkit=<torch's CUDA>),
        or install torch built for the local toolkit, or pre-build the ops (DS_BUILD_OPS=1).
    """
    pk = snap.get("packages") or {}
    kit = pk.get("cuda_toolkit") if isinstance(pk.get("cuda_toolkit"), dict) else {}
    if pk.get("cuda_toolkit") == {}:  # searched and none found (a snapshot without the field says nothing)
        yield from _no_cuda_toolkit(snap, pk)
        return
    have = gpu_versions.release(kit.get("version"))
    if not have:
        return
    builders = _jit_builders(snap, pk)
    make = warning if builders else info
    when = ("; what compiles at run time here: " + "; ".join(builders[:3])) if builders else \
        ("; nothing found that compiles at run time (DeepSpeed's pre-built ops, no cpp_extension load() in a script "
         "read), so it matters only to an extension built later")
    where = f"{kit.get('home')} (from {kit.get('from')})"
    evidence = {"toolkit": kit, "torch_build": pk.get("torch_build"), "builders": builders}
    build = pk.get("torch_build") if isinstance(pk.get("torch_build"), dict) else {}
    torch_cuda = gpu_versions.release(build.get("cuda"))
    if torch_cuda and torch_cuda[0] != have[0]:
        yield make(f"The CUDA toolkit at {where} is CUDA {kit['version']}; torch is built for CUDA {build['cuda']}",
                   detail="torch.utils.cpp_extension refuses a toolkit of another major version than torch's build "
                          f"(\"The detected CUDA version ({kit['version']}) mismatches the version that was used to "
                          f"compile PyTorch ({build['cuda']})\": pytorch/pytorch torch/utils/cpp_extension.py "
                          "_check_cuda_version), and DeepSpeed's op builder likewise (\"Installed CUDA version ... does "
                          "not match the version torch was compiled with\")" + when + ".",
                   fix=f"export CUDA_HOME=<a CUDA {build['cuda']} toolkit>   # or install torch built for CUDA "
                       f"{'.'.join(map(str, have[:2]))}",
                   subjects=["pkg:cuda-toolkit", "pkg:torch"], evidence=evidence)
        return
    newest = gpu_versions.newest_arch(have)
    devices = [d for d in ((snap.get("gpus") or {}).get("devices") or [])
               if isinstance(d, dict) and isinstance(d.get("cuda_capability"), (list, tuple))
               and len(d["cuda_capability"]) == 2]
    low = [d for d in devices if newest is not None and d["cuda_capability"][0] * 10 + d["cuda_capability"][1] > newest]
    if low:
        cc = max(d["cuda_capability"][0] * 10 + d["cuda_capability"][1] for d in low)
        models = sorted({str(d.get("name")) for d in low})
        yield make(f"The CUDA toolkit at {where} (CUDA {kit['version']}) cannot compile for sm_{cc} "
                   f"({', '.join(models)}): its newest architecture is sm_{newest}",
                   detail=f"An extension compiled here for these GPUs fails in nvcc (\"nvcc fatal : Unsupported gpu "
                          f"architecture 'compute_{cc}'\": deepspeedai/DeepSpeedExamples#634). The newest architecture "
                          "of each toolkit: data/gpu_versions.json newest_arch_of_toolkit" + when + ".",
                   fix="export CUDA_HOME=<a toolkit that knows the GPU (CUDA 11.8+ for sm_89/sm_90, 12.8+ for "
                       "sm_100/sm_120)>; or TORCH_CUDA_ARCH_LIST=<an older arch> (PTX, slower)",
                   subjects=["pkg:cuda-toolkit"] + [f"gpu:{d.get('index')}" for d in low], evidence=evidence)


CONDA_CUDA_RUNTIME = ("cudatoolkit", "cuda-toolkit", "cuda-runtime", "cuda-cudart", "cuda-libraries", "cuda-version",
                      "libcublas", "pytorch-cuda")


@check("PKG015", "conda-cuda-vs-torch", family="packages", needs=("packages",))
def conda_cuda_vs_torch(snap):
    """The conda environment carries CUDA libraries of another release than the one torch is built for.

    What it checks
        The CUDA packages of the conda environment the Python runs from (cudatoolkit, cuda-cudart,
        cuda-runtime, cuda-version, libcublas, pytorch-cuda: the names of its conda-meta records,
        <name>-<version>-<build>.json) against the CUDA release torch was built with (torch/version.py): a
        package of another CUDA major, or of the same major but an older minor.

    Why it matters
        The environment's lib/ is where a conda build of torch (and the environment's python, RPATH
        $ORIGIN/../lib) finds libcudart, libcublas and libcublasLt. Libraries of the same major share a soname
        (libcublas.so.11), so an older minor is loaded in place of the one torch was linked against and
        lacks its symbols: "libcublas.so.11: symbol free_gemm_select version libcublasLt.so.11 not defined in
        file libcublasLt.so.11 with link time reference" when torch starts (Sara-Ahmed/SiT#12: cudatoolkit 11.0
        under a torch built for 11.1, fixed with cudatoolkit=11.1; ContinuumIO/anaconda-issues#12251). A package
        of another major is a second CUDA beside torch's: extensions and libraries built in the environment
        follow it, not torch.

    Example
        conda's cudatoolkit 11.0.221 in an environment whose torch is built for CUDA 11.1.

    Fix
        conda install cudatoolkit=<torch's CUDA major.minor>   # or remove it (pip wheels of torch bring their
        own CUDA libraries: conda remove cudatoolkit)
    """
    pk = snap.get("packages") or {}
    build = pk.get("torch_build") if isinstance(pk.get("torch_build"), dict) else {}
    torch_cuda = gpu_versions.release(build.get("cuda"))[:2]
    if len(torch_cuda) < 2:
        return
    for rec in pk.get("conda_cuda") or []:
        if not isinstance(rec, dict) or rec.get("name") not in CONDA_CUDA_RUNTIME:
            continue
        have = gpu_versions.release(rec.get("version"))[:2]
        if len(have) < 2 or have >= torch_cuda and have[0] == torch_cuda[0]:
            continue
        older = have[0] == torch_cuda[0]
        yield warning(f"The conda environment's {rec['name']} {rec['version']} is CUDA {have[0]}.{have[1]}; torch is "
                      f"built for CUDA {build['cuda']}" + (" (same soname, older library)" if older else ""),
                      detail=(("Libraries of one CUDA major share a soname (libcublas.so.11): the environment's older "
                               "one is loaded in place of the one torch was linked against and lacks its symbols "
                               "(\"libcublas.so.11: symbol free_gemm_select version libcublasLt.so.11 not defined\": "
                               "Sara-Ahmed/SiT#12, fixed with the cudatoolkit of torch's CUDA).") if older else
                              ("A second CUDA release beside torch's: a conda build of torch links the environment's "
                               "CUDA libraries, and extensions built in the environment follow them rather than "
                               "torch's build.")) + f" Found in {rec.get('prefix')}/conda-meta.",
                      fix=f"conda install {rec['name']}={build['cuda']}   # or conda remove {rec['name']} when torch "
                          "comes from pip with its own CUDA libraries",
                      subjects=[f"pkg:{rec['name']}", "pkg:torch"],
                      evidence={"conda": rec, "torch_build": build})
        return


LD_LIB_WHEELS = {"cudnn": "nvidia-cudnn-cu{}", "cublas": "nvidia-cublas-cu{}", "cublasLt": "nvidia-cublas-cu{}",
                 "cusparse": "nvidia-cusparse-cu{}", "nvJitLink": "nvidia-nvjitlink-cu{}",
                 "cudart": "nvidia-cuda-runtime-cu{}"}


def _ld_lib_family(name: str) -> tuple:
    """('cudnn', 8) from 'libcudnn_cnn_train.so.8', ('cublasLt', 12) from 'libcublasLt.so.12'. Pure."""
    stem, _, major = name.partition(".so.")
    stem = stem[3:] if stem.startswith("lib") else stem
    family = "cudnn" if stem.startswith("cudnn") else stem
    return family, int(major) if major.isdigit() else None


def _libstdcxx_too_old(pk):
    """The libstdc++.so.6 ld.so finds for torch (packages.libstdcxx) lacks a GLIBCXX_/CXXABI_ version torch's libraries
    need: an error, `import torch` fails."""
    cxx = pk.get("libstdcxx") if isinstance(pk.get("libstdcxx"), dict) else {}
    if not cxx.get("path"):
        return
    rel = lambda v: tuple(int(x) for x in str(v).split(".") if x.isdigit())  # noqa: E731
    short = [(tag, need, have) for tag, need, have in (("GLIBCXX", cxx.get("needs_glibcxx"), cxx.get("glibcxx")),
                                                       ("CXXABI", cxx.get("needs_cxxabi"), cxx.get("cxxabi")))
             if need and have and rel(need) > rel(have)]
    if not short:
        return
    tag, need, have = short[0]
    needer = cxx.get("needed_by") or "libraries"
    yield error(f"{cxx['path']} ({cxx.get('from')}) provides {tag}_{have}; torch's {needer} need {tag}_{need}",
                detail=("ld.so takes the first libstdc++.so.6 it finds (LD_LIBRARY_PATH, then the RUNPATH of torch's "
                        "libraries, then the system's directories): an older copy makes `import torch` fail with "
                        f"\"{cxx['path']}: version `{tag}_{need}' not found (required by .../{cxx.get('needed_by')})\" "
                        "(pytorch/pytorch#157709: a conda environment's newer copy without its libstdc++.so.6 link; "
                        "#8318: CentOS 7's copy under conda's torch)."),
                fix=("put the environment's newer libstdc++ first: `conda install -c conda-forge libstdcxx-ng` (and "
                     "check $CONDA_PREFIX/lib/libstdc++.so.6 exists), or export LD_LIBRARY_PATH=$CONDA_PREFIX/lib"),
                subjects=["pkg:torch", "lib:libstdc++"], evidence=dict(cxx))


@check("PKG016", "ld-library-path-cuda-libs-vs-torch", family="packages", needs=("packages",))
def ld_library_path_cuda_libs_vs_torch(snap):
    """LD_LIBRARY_PATH puts other copies of the CUDA libraries torch's own wheels provide before them.

    What it checks
        The CUDA libraries (cuDNN and its sub-libraries, cuBLAS/cuBLASLt, cuSPARSE, nvJitLink, cudart) found by
        soname in the directories LD_LIBRARY_PATH names, with the version their real file names carry, against
        the nvidia-* wheels a pip build of torch loads its own copies from (nvidia-cudnn-cu12, nvidia-cublas-cu12,
        ...; their installed versions). Only copies with the same soname as the wheel's (libcudnn*.so.8 beside
        nvidia-cudnn-cu12 8.x) are judged: a cuDNN of another version, or another library older than the wheel's,
        is a warning; a copy whose version cannot be read is info.

    Why it matters
        torch's pip wheels find their nvidia-* libraries through DT_RUNPATH, and ld.so searches LD_LIBRARY_PATH
        before DT_RUNPATH (ld.so(8)): a system cuDNN or cuBLAS there is loaded in place of torch's. cuDNN's
        sub-libraries are opened lazily, so the process mixes versions and fails at the first convolution:
        "Could not load library libcudnn_cnn_train.so.8. Error: /usr/local/cuda-12.1/lib/libcudnn_cnn_train.so.8:
        undefined symbol: ..." (andimarafioti/florence2-finetuning#2, fixed by `unset LD_LIBRARY_PATH`), or
        "cuDNN version incompatibility: PyTorch was compiled against (8, 9, 2) but found runtime version
        (8, 8, 1) ... one possibility is that there is a conflicting cuDNN in LD_LIBRARY_PATH"
        (pytorch/pytorch torch/backends/cudnn/__init__.py).

    Example
        LD_LIBRARY_PATH=/usr/local/cuda-12.1/lib holding cuDNN 8.9.7, torch 2.2.0 with nvidia-cudnn-cu12 8.9.2.26.

    Fix
        unset LD_LIBRARY_PATH (or drop the directory from it) in the job's environment: torch's pip wheels bring
        their own CUDA libraries.

    Also: libstdc++
        The libstdc++.so.6 ld.so finds for torch's libraries (LD_LIBRARY_PATH, their RUNPATH, the system's
        directories; ld.so.cache's extra directories and a copy an earlier import loaded are not seen) against the
        newest GLIBCXX_/CXXABI_ versions libc10/libtorch_cpu/libtorch_python need from it (.gnu.version_r read
        against its .gnu.version_d): an older copy is an error, `import torch` fails with "version `GLIBCXX_3.4.30'
        not found" (pytorch/pytorch#157709, #8318).
    """
    pk = snap.get("packages") or {}
    versions = pk.get("versions") or {}
    if not versions.get("torch"):
        return
    yield from _libstdcxx_too_old(pk)
    bad, unknown = [], []
    for lib in pk.get("ld_cuda_libs") or []:
        if not isinstance(lib, dict):
            continue
        family, major = _ld_lib_family(str(lib.get("name") or ""))
        wheel_of = LD_LIB_WHEELS.get(family)
        if not wheel_of or major is None:
            continue
        wheels = [(w, versions.get(w)) for w in dict.fromkeys(wheel_of.format(cu) for cu in ("11", "12", "13"))
                  if versions.get(w)]
        wheels = [(w, v) for w, v in wheels if gpu_versions.release(v)[:1] == (major,)]  # the same soname
        if not wheels:
            continue
        wheel, wheel_version = wheels[0]
        have, own = gpu_versions.release(lib.get("version")), gpu_versions.release(wheel_version)
        if not have:
            unknown.append((lib, wheel, wheel_version))
        elif (have[:3] != own[:3]) if family == "cudnn" else (have[:2] < own[:2]):
            bad.append((lib, wheel, wheel_version))
    rows = bad or unknown
    if not rows:
        return
    lib, wheel, wheel_version = rows[0]
    where = sorted({str(r[0].get("dir")) for r in rows})
    names = ", ".join(f"{r[0].get('name')} {r[0].get('version') or '(version unknown)'}" for r in rows[:4])
    make = warning if bad else info
    yield make(f"LD_LIBRARY_PATH puts {names} ({', '.join(where[:2])}) before torch's own {wheel} {wheel_version}",
               detail=("ld.so searches LD_LIBRARY_PATH before the DT_RUNPATH through which torch's pip wheels find "
                       "their nvidia-* libraries (ld.so(8)), so these copies are loaded instead"
                       + (": versions differ, and cuDNN's lazily opened sub-libraries then mix versions (\"Could not "
                          "load library libcudnn_cnn_train.so.8 ... undefined symbol\": andimarafioti/"
                          "florence2-finetuning#2) or torch refuses them (\"cuDNN version incompatibility ... a "
                          "conflicting cuDNN in LD_LIBRARY_PATH\")." if bad else
                          "; their versions cannot be read from their file names, so whether they match is unknown.")),
               fix=f"unset LD_LIBRARY_PATH   # or drop {where[0]} from it; torch's wheels bring their own CUDA libraries",
               subjects=["env:LD_LIBRARY_PATH", f"pkg:{wheel}"],
               evidence={"libraries": [r[0] for r in rows[:8]], "torch_wheels": {r[1]: r[2] for r in rows}})


@check("PKG017", "glibc-older-than-torch-binaries", family="packages", needs=("packages", "host"))
def glibc_older_than_torch_binaries(snap):
    """The host's glibc is older than the one the installed torch's own binaries need.

    What it checks
        The C library version (host.glibc, from confstr CS_GNU_LIBC_VERSION; or the "-with-glibc2.17" of
        platform.platform()) against the oldest glibc PyTorch's own Linux binaries of that release load under
        (ddpdoctor/data/torch_glibc.json: glibc 2.17 for torch 0.3-2.5, as PyTorch's maintainers state in
        pytorch/pytorch#6607 and #14274). Releases outside the table, torch built from source, and other
        architectures than x86-64 (aarch64 wheels) are not judged.

    Why it matters
        The dynamic loader refuses torch's libraries outright: `import torch` fails on every rank with
        "ImportError: /lib64/libc.so.6: version `GLIBC_2.17' not found (required by .../torch/_C...so)" (CentOS 6's
        glibc 2.12 under torch 0.3.1 or 1.0). No environment variable fixes it.

    Example
        CentOS 6.8 (glibc 2.12) with conda's pytorch 1.0.0.

    Fix
        Run on a distribution with glibc >= 2.17 (CentOS 7+, Ubuntu 14.04+) or in a container built on one;
        or build torch from source on this machine.
    """
    pk, host = snap.get("packages") or {}, snap.get("host") or {}
    if str(host.get("os") or "Linux") != "Linux" or re.search(r"aarch64|arm64|ppc64|s390x", str(host.get("platform"))):
        return  # the table is for the x86-64 binaries
    from ddpdoctor.facts.torch_glibc import glibc_floor, host_glibc

    torch = (pk.get("versions") or {}).get("torch")
    row = glibc_floor(torch) if torch else None
    have = host_glibc(host)
    if not row or not have:
        return
    need = tuple(int(p) for p in row["glibc"].split(".")[:2])
    if have >= need:
        return
    yield error(f"glibc {have[0]}.{have[1]} is older than the {row['glibc']} torch {torch}'s binaries need",
                detail=("The loader refuses torch's own libraries: `import torch` fails with \"/lib64/libc.so.6: "
                        f"version `GLIBC_{row['glibc']}' not found (required by .../torch/...)\" on every rank. "
                        f"PyTorch's maintainers: {row['message']} ({', '.join(s['url'] for s in row['sources'])})."),
                fix=("run on a distribution with glibc >= " + row["glibc"] + " (e.g. CentOS 7+, Ubuntu 14.04+) or in a "
                     "container built on one; or build torch from source here"),
                subjects=["pkg:torch", "host:glibc"],
                evidence={"torch": torch, "glibc": f"{have[0]}.{have[1]}", "needs": row["glibc"],
                          "platform": host.get("platform")})
