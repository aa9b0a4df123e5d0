"""The GPU stack under CUDA: the driver against torch's CUDA build, CUDA initialisation, GPUs the PCI
bus has and NVML does not, the NVSwitch fabric, and power caps."""
from __future__ import annotations

import os
import re
from typing import Optional

from ddpdoctor.facts.cuda_map import devices_of
from ddpdoctor.facts.env import env_of, script_asks
from ddpdoctor.facts import gpu_versions
from ddpdoctor.facts.gpu import subjects, version_tuple, view
from ddpdoctor.facts.gpu_versions import newest_arch
from ddpdoctor.facts.pci import norm_bdf
from ddpdoctor.model import error, info, warning
from ddpdoctor.model.registry import check

# The version tables (the oldest driver of each CUDA major, the newest architecture of each toolkit, the
# architectures of PyTorch's wheels, the ROCm targets of its ROCm wheels) are data with their sources:
# ddpdoctor/data/gpu_versions.json, read through facts.gpu_versions.


def _cuda_tuple(text) -> tuple:
    return version_tuple(text)[:2]


@check("GPU023", "torch-cuda-vs-driver", family="gpu", needs=("gpus", "packages"))
def torch_cuda_vs_driver(snap):
    """The installed torch was built for a CUDA the NVIDIA driver does not support, or for no CUDA at all.

    What it checks
        The CUDA version torch was built with (torch/version.py, read as text: `check` never imports
        torch) against the highest CUDA the driver supports (nvmlSystemGetCudaDriverVersion, what
        nvidia-smi prints as "CUDA Version"), and a CPU-only torch on a machine whose GPUs NVML sees.

    Why it matters
        A driver of an older CUDA major cannot run the build: torch.cuda.is_available() is False and
        torch warns "The NVIDIA driver on your system is too old (found version 11040)", so training
        runs on the CPU or fails at `.cuda()`. Within one major, CUDA's minor-version compatibility
        runs the build, but kernels that need a newer PTX JIT fail: an error where torch's own
        libtorch_cuda.so (packages.cuda_archs) serves a GPU only through PTX (cudaErrorUnsupportedPtxVersion,
        "the provided PTX was compiled with an unsupported toolchain"), and where the driver is below the
        major's minor-version-compatibility floor (450.80.02 for CUDA 11, 525.60.13 for 12: a 450.51
        driver reports CUDA 11.0 but runs no 11.1+ build). Otherwise a note that says what is known
        and what is not: without torch's compiled architectures recorded, whether a GPU needs PTX JIT
        is a guess from PyTorch's own wheels' architecture list, marked as one. A CPU build of torch (the default
        `pip install torch` on some platforms, or a requirements file pinning `+cpu`) ignores the GPUs; an
        error when the training script read puts work on a CUDA device ("Torch not compiled with CUDA
        enabled": zhysora/UCGAN#2).

    Example
        A 470 driver (CUDA 11.4) with torch 2.3.1+cu121.

    Fix
        Install a torch built for the driver's CUDA (`pip install torch --index-url
        https://download.pytorch.org/whl/cu118`), or upgrade the driver.
    """
    gpus = snap.get("gpus") or {}
    pk = snap.get("packages") or {}
    build = pk.get("torch_build")
    version = (pk.get("versions") or {}).get("torch")
    if not version or not isinstance(build, dict) or not devices_of(gpus):
        return
    if build.get("cuda") is None and build.get("hip") is None and "cuda" in build:
        uses = script_asks(snap, "cuda_uses")  # the training script read puts work on a CUDA device: it fails there
        where = f" ({uses[0].get('path')}:{uses[0].get('line')} {uses[0].get('what')})" if uses else ""
        yield (error if uses else warning)(
                      f"torch {version} is a CPU build, but NVML sees {len(devices_of(gpus))} NVIDIA GPU(s)"
                      + (f" and the training script uses CUDA{where}" if uses else ""),
                      detail="torch.cuda.is_available() is False with this build: training runs on the CPU, or "
                             "fails at .cuda() / init_process_group('nccl')"
                             + (" - here at the script's first CUDA use, with \"AssertionError: Torch not compiled with "
                                "CUDA enabled\" (torch/cuda/__init__.py _lazy_init)." if uses else "."),
                      fix="pip install torch --index-url https://download.pytorch.org/whl/cu"
                          + (str(gpus.get("cuda_driver") or "12.1").replace(".", "")[:3]) + "   # a build for this driver",
                      subjects=["pkg:torch"], evidence={"torch": version, "torch_build": build,
                                                        "driver_cuda": gpus.get("cuda_driver")})
        return
    built, driver = _cuda_tuple(build.get("cuda")), _cuda_tuple(gpus.get("cuda_driver"))
    if len(built) < 2 or len(driver) < 2:
        return
    evidence = {"torch": version, "torch_cuda": build.get("cuda"), "driver_version": gpus.get("driver_version"),
                "driver_cuda": gpus.get("cuda_driver")}
    if driver[0] < built[0]:
        need = gpu_versions.min_driver_of_cuda_major().get(built[0])
        yield error(f"torch {version} needs a CUDA {built[0]}.x driver; driver {gpus.get('driver_version')} supports "
                    f"CUDA {gpus.get('cuda_driver')}",
                    detail="torch.cuda.is_available() is False: torch warns 'The NVIDIA driver on your system is too "
                           "old' and the job runs on the CPU or fails at the first .cuda() or NCCL call."
                           + (f" CUDA {built[0]}.x needs driver {need} or newer." if need else ""),
                    fix=f"pip install torch --index-url https://download.pytorch.org/whl/cu{driver[0]}{driver[1]}   "
                        "# a build this driver runs; or upgrade the driver",
                    subjects=["pkg:torch"], evidence=evidence)
    elif driver < built and built[0] < 11:
        # minor-version compatibility starts with CUDA 11: before it a build needs a driver of its own minor
        yield error(f"torch {version} needs a CUDA {build.get('cuda')} driver; driver {gpus.get('driver_version')} "
                    f"supports CUDA {gpus.get('cuda_driver')}",
                    detail="Before CUDA 11 there is no minor-version compatibility: torch.cuda.is_available() is False "
                           "and torch warns 'The NVIDIA driver on your system is too old'.",
                    fix=f"pip install torch built for CUDA {gpus.get('cuda_driver')}   # or upgrade the driver",
                    subjects=["pkg:torch"], evidence=evidence)
    elif driver < built and _below_major_floor(gpus.get("driver_version"), built[0]):
        floor = gpu_versions.min_driver_of_cuda_major().get(built[0])
        yield error(f"torch {version} (CUDA {build.get('cuda')}) needs driver {floor}+ for minor-version "
                    f"compatibility; driver {gpus.get('driver_version')} supports CUDA {gpus.get('cuda_driver')} only",
                    detail=(f"Minor-version compatibility runs a CUDA {built[0]}.x build on an older driver of the same "
                            f"major only from driver {floor} on (docs.nvidia.com/deploy/cuda-compatibility, minimum "
                            "required driver): below it torch.cuda.is_available() is False or the first kernel fails."),
                    fix=f"upgrade the driver to {floor} or newer; or install a torch built for CUDA "
                        f"{gpus.get('cuda_driver')}",
                    subjects=["pkg:torch"], evidence=dict(evidence, minor_version_floor=floor))
    elif driver < built and _ptx_only_gpus(snap):
        only = _ptx_only_gpus(snap)
        names = ", ".join(sorted({f"{n} (sm_{c})" for _, n, c, _ in only}))
        row = gpu_versions.rows("ptx_jit_needs_driver")[0]
        yield error(f"torch {version} (CUDA {build.get('cuda')}) runs on {names} only by JIT-compiling its PTX, which "
                    f"driver {gpus.get('driver_version')} (CUDA {gpus.get('cuda_driver')}) cannot",
                    detail=(f"torch's libtorch_cuda.so carries no cubin for these GPUs, only PTX "
                            f"({', '.join(sorted({f'compute_{a}' for *_, p in only for a in p}))}) that the CUDA "
                            f"{build.get('cuda')} toolkit generated. Minor-version compatibility does not cover PTX JIT: "
                            f"an older driver fails it with {row['error']} (\"{row['message']}\"; "
                            f"{row['source']['url']})."),
                    fix="upgrade the driver to one that reports CUDA " + str(build.get("cuda")) + " or newer; or install "
                        "a torch whose build carries cubins for these GPUs",
                    subjects=subjects([i for i, *_ in only], "pkg:torch"),
                    evidence=dict(evidence, gpus=[{"index": i, "name": n, "capability": f"sm_{c}"}
                                                  for i, n, c, _ in only]))
    elif driver < built:
        yield _minor_compatibility_note(snap, version, build, gpus, built, evidence)


def _minor_compatibility_note(snap, version: str, build: dict, gpus: dict, built: tuple, evidence: dict):
    """GPU023's note for a driver below the build's CUDA within one major, above the major's minor-version floor:
    what is known (it runs through minor-version compatibility; torch's own kernels need no PTX JIT when its
    compiled architectures were read and every GPU has a cubin) and what is not (without that reading, whether torch
    serves a GPU only through PTX: a guess from PyTorch's own wheels' architecture list, gpu_versions release_archs,
    marked as a guess; other libraries' PTX, such as torch.compile's Triton kernels, in any case)."""
    row = gpu_versions.rows("ptx_jit_needs_driver")[0]
    ptx = f"{row['error']}, \"{row['message']}\""
    devices = [(d.get("index"), d.get("name"), _capability(d)) for d in view(snap).devices if _capability(d)]
    if _torch_archs_known(snap):
        known = ("torch's own libtorch_cuda.so carries a cubin for every visible GPU (read from its .nv_fatbin), so "
                 "its kernels need no PTX JIT.")
        guess, covered = "", None
    else:
        host = snap.get("host") or {}
        arch_key = "aarch64" if "aarch64" in str(host.get("platform") or "").lower() else "x86_64"
        wheel = (gpu_versions.release_archs(version).get(tuple(built[:2])) or {}).get(arch_key)
        known = "torch's compiled architectures were not recorded (packages.cuda_archs), so whether it serves each " \
                "GPU with a cubin or only through PTX is not known."
        if wheel:
            bare = sorted({f"{n} (sm_{c})" for _i, n, c in devices if not gpu_versions.runs_on(sorted(wheel), [], c)})
            covered = not bare
            guess = (f" A guess from PyTorch's own CUDA {build.get('cuda')} wheels for {arch_key} (cubins for "
                     f"{', '.join(f'sm_{a}' for a in sorted(wheel))}; a build from elsewhere may differ): "
                     + ("every visible GPU has a cubin there, so torch's kernels likely need no PTX JIT." if covered else
                        f"{', '.join(bare)} have no cubin there (GPU032 judges that), and PTX JIT, if the build carries "
                        f"PTX for them, is what this driver cannot do ({ptx})."))
        else:
            guess, covered = f" No architecture list of PyTorch's CUDA {build.get('cuda')} wheels is recorded either.", None
    return info(f"torch {version} is built for CUDA {build.get('cuda')}, the driver supports CUDA "
                f"{gpus.get('cuda_driver')}: it runs through minor-version compatibility",
                detail=(f"Known: driver {gpus.get('driver_version')} is of CUDA {built[0]}, "
                        + (f"at or above the major's minor-version-compatibility floor ({floor}), "
                           if (floor := gpu_versions.min_driver_of_cuda_major().get(built[0])) else
                           "whose minor-version-compatibility floor is not recorded (not known whether it is met), ")
                        + "so the build runs with a limited feature set; PTX the "
                        f"newer toolkit generated cannot be JIT-compiled by it ({ptx}; {row['source']['url']}). "
                        + known + guess + " Not known here: the PTX of other libraries (torch.compile's Triton "
                        "kernels, extensions), which meets the same limit."),
                fix="upgrade the driver to one that reports CUDA " + str(build.get("cuda")) + " or newer   # `ddpdoctor "
                    "snapshot` on the machine itself records torch's compiled architectures (libtorch_cuda.so)",
                subjects=["pkg:torch"],
                evidence=dict(evidence, torch_archs_recorded=_torch_archs_known(snap), wheel_cubins_cover=covered))


def _below_major_floor(driver_version, major: int) -> bool:
    """Whether a driver is older than the minimum driver of `major`'s minor-version compatibility (data/
    gpu_versions.json min_driver_of_cuda_major: 450.80.02 for CUDA 11, 525.60.13 for 12); False when unknown."""
    floor = gpu_versions.min_driver_of_cuda_major().get(major)
    have = version_tuple(driver_version)
    return bool(floor and len(have) >= 2 and have < version_tuple(floor))


def _ptx_only_gpus(snap) -> list:
    """[(index, name, capability, ptx)] of the GPUs torch's own libtorch_cuda.so (packages.cuda_archs, read from its
    .nv_fatbin) serves only through PTX: no cubin of the GPU's major at or below its minor, a PTX at or below it."""
    out = []
    for mod in (snap.get("packages") or {}).get("cuda_archs") or ():
        if not isinstance(mod, dict) or mod.get("package") != "torch":
            continue
        sass = [a for a in mod.get("sass") or () if isinstance(a, int)]
        ptx = [a for a in mod.get("ptx") or () if isinstance(a, int)]
        for dev in view(snap).devices:
            cc = _capability(dev)
            if cc is not None and not gpu_versions.runs_on(sass, [], cc) and gpu_versions.runs_on([], ptx, cc):
                out.append((dev.get("index"), dev.get("name"), cc, [a for a in ptx if a <= cc]))
    return out


@check("GPU025", "gpus-missing-from-nvml", family="gpu", needs=("gpus", "pci"))
def gpus_missing_from_nvml(snap):
    """The PCI bus has NVIDIA GPUs that NVML does not list.

    What it checks
        The NVIDIA display/3D controllers in /sys/bus/pci against NVML's devices, by PCI address, and
        the kernel driver each missing one is bound to (vfio-pci, nouveau, none).

    Why it matters
        A GPU NVML cannot see is invisible to CUDA too: the job gets fewer GPUs than the machine has
        (torchrun --nproc-per-node 8 on a host where one GPU fell off, was passed to a VM, or failed
        to initialise), and rank 7 fails with "invalid device ordinal".

    Example
        8 GPUs in `lspci`, 7 in `nvidia-smi`: one bound to vfio-pci, or lost after an Xid 79.

    Fix
        `lspci -k -d 10de:` shows the driver of each; rebind it to nvidia, or reset/reboot the node if
        it was lost (`sudo dmesg | grep -i xid`).
    """
    pci = snap.get("pci") or {}
    gpus = snap.get("gpus") or {}
    on_bus = {b: f for b, f in (pci.get("gpus") or {}).items() if isinstance(f, dict)}
    nvml = {norm_bdf(d.get("pci_bus_id")) for d in devices_of(gpus) if d.get("pci_bus_id")}
    lost = [d for d in devices_of(gpus) if d.get("lost") or not d.get("pci_bus_id")]
    missing = sorted(b for b in on_bus if b not in nvml)
    if not on_bus or len(missing) <= len(lost):  # a lost GPU is GPU021's finding
        return
    drivers = {b: on_bus[b].get("driver") or "no driver" for b in missing}
    yield warning(f"{len(on_bus)} NVIDIA GPUs on the PCI bus, NVML sees {gpus.get('count', len(devices_of(gpus)))}: "
                  + ", ".join(f"{b} ({drivers[b]})" for b in missing) + " missing",
                  detail="CUDA enumerates only the GPUs the nvidia driver owns: the job sees fewer GPUs than the "
                         "machine has, and a rank mapped past the last one fails with 'invalid device ordinal'.",
                  fix="lspci -k -d 10de:   # which driver holds each GPU; rebind to nvidia, or reset/reboot "
                      "if one was lost (sudo dmesg | grep -i xid)",
                  subjects=[f"path:/sys/bus/pci/devices/{b}" for b in missing],
                  evidence={"pci": sorted(on_bus), "nvml": sorted(nvml), "missing": drivers})


@check("GPU026", "nvswitch-fabric-not-ready", family="gpu", needs=("gpus",), reads=("pci", "cuda"))
def nvswitch_fabric_not_ready(snap):
    """On an NVSwitch system, a GPU is not registered with the fabric (the fabric manager is not up).

    What it checks
        Each GPU's fabric state and status (nvmlDeviceGetGpuFabricInfo: Hopper and later on NVSwitch
        systems) and, on any system with NVSwitches on the PCI bus, a CUDA initialisation that fails
        with CUDA_ERROR_SYSTEM_NOT_READY (802) (A100 HGX/DGX, whose GPUs NVML does not report fabric
        state for).

    Why it matters
        Until the fabric manager has set up the NVSwitch fabric, CUDA cannot start on these GPUs:
        every rank fails in cuInit ("system not yet initialized", error 802) or, for a GPU still
        registering, waits. It is the fabric manager service, not the job.

    Example
        An HGX H100 after a driver upgrade where nvidia-fabricmanager was not restarted: fabric state
        NOT_STARTED on all 8 GPUs.

    Fix
        sudo systemctl enable --now nvidia-fabricmanager   # its version must match the driver's
    """
    v = view(snap)
    cuda = snap.get("cuda") or {}
    pci = snap.get("pci") or {}
    bad = [(d["index"], (d.get("fabric") or {})) for d in v.devices
           if (d.get("fabric") or {}).get("state") in ("NOT_STARTED", "IN_PROGRESS")
           or ((d.get("fabric") or {}).get("state") == "COMPLETED"
               and (d.get("fabric") or {}).get("status") not in (None, "Success"))]
    switches = pci.get("nvswitches") or []
    not_ready = cuda.get("init_result") == 802
    if not bad and not (not_ready and switches):
        return
    if bad:
        states = sorted({f"{f.get('state')}/{f.get('status')}" for _, f in bad})
        title = (f"{len(bad)} GPU(s) not registered with the NVSwitch fabric ({', '.join(states)}): "
                 + ", ".join(v.short(i) for i, _ in bad))
    else:
        title = f"CUDA cannot start: the NVSwitch fabric is not ready (cuInit = 802) on a system with {len(switches)} NVSwitches"
    yield error(title,
                detail="CUDA initialisation fails ('system not yet initialized', 802) or waits on these GPUs until the "
                       "fabric manager has configured the NVSwitch fabric.",
                fix="sudo systemctl enable --now nvidia-fabricmanager   # then nvidia-smi -q | grep -A2 Fabric; its "
                    "version must match the driver",
                subjects=subjects([i for i, _ in bad]),
                evidence={"fabric": {str(i): f for i, f in bad}, "cuInit": cuda.get("init_result"), "nvswitches": switches})


@check("GPU027", "gpu-power-capped", family="gpu", needs=("gpus",))
def gpu_power_capped(snap):
    """A visible GPU's power limit is set below its default.

    What it checks
        The enforced power limit (nvmlDeviceGetEnforcedPowerLimit) against the default
        (nvmlDeviceGetPowerManagementDefaultLimit) of each visible GPU; reported below 90%.

    Why it matters
        A capped GPU lowers its clocks under load: in synchronous data-parallel training every step
        waits for it, so one capped GPU (an `nvidia-smi -pl` left from a test, a power-saving profile)
        slows every rank, and it looks like a slow network.

    Example
        gpu:3 of an 8x A100 node capped at 250 W of its 400 W default.

    Fix
        sudo nvidia-smi -i N -pl <default W>   # or reset it: the default is in nvidia-smi -q -d POWER
    """
    v = view(snap)
    capped = []
    for d in v.devices:
        p = d.get("power") or {}
        enforced, default = p.get("enforced_limit_w"), p.get("default_limit_w")
        if isinstance(enforced, (int, float)) and isinstance(default, (int, float)) and default > 0 \
                and enforced < 0.9 * default:
            capped.append((d["index"], enforced, default))
    if not capped:
        return
    some = len(capped) < len(v.devices)
    yield warning(("; ".join(f"{v.short(i)} capped at {e:g} W of its {dflt:g} W default" for i, e, dflt in capped))
                  + (": it paces every rank" if some else ""),
                  detail=("A GPU that may not draw its default power runs at lower clocks under load; every DDP step "
                          "waits for the slowest rank."),
                  fix="; ".join(f"sudo nvidia-smi -i {i} -pl {dflt:g}" for i, _, dflt in capped),
                  subjects=subjects([i for i, _, _ in capped]),
                  evidence={"capped": [{"gpu": i, "enforced_w": e, "default_w": dflt} for i, e, dflt in capped]})


@check("GPU028", "cuda-init-fails", family="gpu", needs=("gpus", "cuda"), reads=("pci",))
def cuda_init_fails(snap):
    """CUDA does not initialise in this environment (cuInit fails).

    What it checks
        The result of cuInit(0), the first call of every CUDA program, made in this environment
        (its CUDA_VISIBLE_DEVICES, its LD_LIBRARY_PATH); the code is explained from NVIDIA's cuda.h
        (the cuda_errors catalogue): no device, a stub libcuda, a driver mismatch, the fabric manager,
        a wedged driver. The NVSwitch case is GPU026's.

    Why it matters
        Every rank fails at its first CUDA call ("RuntimeError: CUDA error: ... / CUDA driver
        initialization failed, you might not have a CUDA gpu"), or torch silently reports no GPU and
        trains on the CPU, although nvidia-smi looks fine.

    Example
        LD_LIBRARY_PATH=/usr/local/cuda/lib64/stubs: cuInit = 34 (CUDA_ERROR_STUB_LIBRARY).

    Fix
        The fix of the code's class: remove the stub directory, align the driver and forward
        compatibility library, start the daemons, reset the GPU.
    """
    from ddpdoctor.facts import cuda_init

    cuda = snap.get("cuda") or {}
    code = cuda.get("init_result")
    if not isinstance(code, int) or code == 0:
        return
    fabric_pending = any((d.get("fabric") or {}).get("state") in ("NOT_STARTED", "IN_PROGRESS")
                         for d in devices_of(snap.get("gpus") or {}))
    if code == 802 and ((snap.get("pci") or {}).get("nvswitches") or fabric_pending):
        return  # GPU026 names the fabric manager: one finding per fault
    entry = cuda_init.entry(code) or {}
    name = cuda.get("init_error") or entry.get("id") or f"error {code}"
    lib = cuda.get("library")
    detail = f"NVIDIA: {entry.get('meaning', 'an error code this ddpdoctor does not know')}"
    if lib:
        detail += f" libcuda loaded from {lib}."
        if "stub" in lib:
            detail += " That is the CUDA toolkit's stub, not the driver's library."
    yield error(f"CUDA does not initialise here: cuInit = {code} ({name})",
                detail=detail + " Every rank fails at its first CUDA call.",
                fix=entry.get("fix", "nvidia-smi; sudo dmesg | grep -i -e nvrm -e xid"),
                subjects=["LD_LIBRARY_PATH"] if lib and "stub" in lib else [],
                evidence={"cuInit": code, "name": name, "class": entry.get("class"), "library": lib})


def _cc_label(name, cc: int) -> str:
    """A GPU as torch's own warnings name it: "Found GPU0 <name> which is of cuda capability 3.5" (_check_capability)
    and "<name> with CUDA capability sm_86 is not compatible" (_check_cubins), pytorch/pytorch torch/cuda/__init__.py:
    both forms, so a user's search for either finds the finding."""
    return f"{name} (cuda capability {cc // 10}.{cc % 10}, sm_{cc})"


def _arch_range(archs) -> str:
    """A build's architectures as torch prints them: "The current PyTorch install supports CUDA capabilities sm_50
    sm_60 sm_70 ..." (_check_cubins joins torch.cuda.get_arch_list() with spaces)."""
    return " ".join(f"sm_{a}" for a in sorted(archs))


def _capability(dev: dict) -> int | None:
    cap = dev.get("cuda_capability")
    if isinstance(cap, (list, tuple)) and len(cap) == 2 and all(isinstance(c, int) for c in cap):
        return 10 * cap[0] + cap[1]
    return None


@check("GPU032", "gpu-newer-than-torch-build", family="gpu", needs=("gpus", "packages"), reads=("host", "lint", "cuda"))
def gpu_arch_vs_torch_build(snap):
    """A GPU whose architecture the installed torch's CUDA build carries no kernels for.

    What it checks
        Each GPU's compute capability against the CUDA version torch was built with (torch/version.py,
        read as text). A CUDA toolkit builds kernels up to one architecture (CUDA 10.x: sm_75, 11.0:
        sm_80, 11.1: sm_86, 11.8: sm_90, 12.8: sm_120; pytorch/pytorch's select_compute_arch.cmake), and
        a GPU runs a kernel built for its own major only (torch/cuda/__init__.py, _check_cubins: "GPU
        architectures are backward compatible within major version"): a GPU of a newer major than the
        toolkit knows has none. For PyTorch's own wheels whose architectures torch lists
        (PYTORCH_RELEASES_CODE_CC: CUDA 12.6, 12.9, 13.0) or pytorch/builder built (CUDA 10.2: sm_37 to
        sm_70, so a Tesla K20m's sm_35 has none: neuralhydrology/neuralhydrology#43; CUDA 9.2-10.1 from
        torch 1.3.1 on, when builder moved 3.5 to 3.7: facebookresearch/detectron2#512; the CUDA 8.0-10.1
        wheels of torch 0.3.0-1.3.0 by release, with the PTX they carry, so a GPU in a gap is found too:
        0.3.1's "3.5;5.2+PTX" has nothing for a 5.0 GPU; CUDA 11.6-11.8: sm_37
        to sm_86/sm_90), a GPU older than the
        oldest is reported too, as a warning, since a build from elsewhere may carry more. A GPU older than
        the build's CUDA toolkit compiles for at all is an error whatever the build: NVIDIA's compiler
        stopped at sm_20/21 after CUDA 8.0, sm_30/32 after 10.2, sm_35/37 after 11.8, sm_50-72 after 12.9
        (data/gpu_versions.json last_toolkit_of_arch: llvm clang/lib/Basic/Cuda.cpp MaxVersionForCudaArch,
        NVIDIA's CUDA 13.0 release notes), and torch says "PyTorch no longer supports this GPU because it is
        too old" (torch/cuda/__init__.py, _check_capability). And the
        kernel library beside torch: flash-attn 2+ installed where no GPU is Ampere (sm_80) or newer,
        whose every entry point refuses the device ("FlashAttention only supports Ampere GPUs or
        newer", flash_api.cpp @765fbd92); a warning, since the script chooses whether to use it -
        an error when the training script read (`check --script`, or the script of check's own
        launch command) asks for FlashAttention, or asks for it with flash-attn not installed; and
        flash-attn 1.x where no GPU is Turing (sm_75) or newer ("Expected is_sm90 || is_sm8x ||
        is_sm75"). And
        torch.compile in that script where inductor's Triton cannot run: no GPU of compute
        capability 7.0+ (GPUTooOldForTriton), or no triton installed - neither triton nor the
        pytorch-triton that torch's nightly and ROCm wheels install (TritonMissing; on Windows, where
        neither publishes wheels, a warning when triton was not recorded); and, with triton
        installed, no unversioned libcuda.so beside the driver library the process loaded (Triton
        links its launcher with -lcuda: "/usr/bin/ld: cannot find -lcuda"), a warning. A library
        whose own kernels are Triton's, imported by that script (Unsloth, Liger Kernel:
        data/triton_libraries.json), is judged the same way; so is a library that calls torch.compile by
        default (compile_by_default: nnU-Net v2, vLLM's V1 engine from 0.8.0), installed or launched through
        its own entry point (python -m nnunetv2.run.run_training). And the kernels torch compiles at run time with
        the NVRTC of its own CUDA release (the jiterator, the TorchScript fuser): torch before 1.13 passes the GPU's
        own architecture to NVRTC 11.1-11.7, which knows GPUs up to sm_86, so an sm_89/sm_90 GPU gets "nvrtc:
        error: invalid value for --gpu-architecture (-arch)" although the sm_86 cubins run (data/gpu_versions.json
        nvrtc_arch_clamp: jit_utils.cpp codegenOutputQuery, pytorch/pytorch#87595); a warning.

        Where the snapshot holds the architectures torch's libtorch_cuda.so and the compiled extensions
        really carry (packages.cuda_archs: the cubins and PTX of their .nv_fatbin), each GPU is judged
        against those instead (a cubin runs on its own major architecture at the same or a newer minor,
        PTX on any GPU at or above it): torch's own an error, an extension's a warning. That is what a
        source build (TORCH_CUDA_ARCH_LIST, else the GPUs visible when it was built) or an extension
        built for other GPUs carries.

    Why it matters
        torch warns "NVIDIA GeForce RTX 3090 with CUDA capability sm_86 is not compatible with the
        current PyTorch installation" and every kernel fails with "CUDA error: no kernel image is
        available for execution on the device" (niuchuangnn/SPICE#26 on CUDA 10.2 builds,
        Hellod035/LeggedLab#26: an RTX 5090 under a CUDA 12.4 build). torch.cuda.is_available() is
        still True, so nothing fails before the first kernel.

    Example
        An RTX 3090 (sm_86) with torch 1.10.1+cu102; an RTX 5090 (sm_120) with torch 2.5.1+cu124.

    Fix
        pip install torch --index-url https://download.pytorch.org/whl/cu128 (a build whose CUDA knows
        the GPU: 11.1+ for sm_86, 11.8+ for sm_90, 12.8+ for sm_100/sm_120).
    """
    gpus = snap.get("gpus") or {}
    pk = snap.get("packages") or {}
    build = pk.get("torch_build")
    version = (pk.get("versions") or {}).get("torch")
    yield from _flash_attn_beyond_the_gpus(snap, view(snap).devices)
    yield from _compile_beyond_the_machine(snap, view(snap).devices)
    compiled = list(_compiled_archs_beyond_the_gpus(snap, view(snap).devices))
    yield from compiled
    if any(f.evidence.get("package") == "torch" for f in compiled) or _torch_archs_known(snap):
        return  # torch's own compiled architectures read: they, not the wheel table, say what it runs on
    if not version or not isinstance(build, dict) or not build.get("cuda"):
        return
    cuda = _cuda_tuple(build.get("cuda"))
    newest = newest_arch(cuda) if len(cuda) == 2 else None
    if newest is None:
        return
    v = view(snap)
    too_new, too_old, dropped = [], [], []
    host = snap.get("host") or {}
    arch_key = "aarch64" if "aarch64" in str(host.get("platform") or "").lower() else "x86_64"
    wheel = (gpu_versions.release_archs(version).get(cuda) or {}).get(arch_key)
    wheel_ptx = (gpu_versions.release_ptx(version).get(cuda) or {}).get(arch_key) or frozenset()
    for dev in v.devices:
        cc = _capability(dev)
        if cc is None:
            continue
        last = gpu_versions.dropped_by_toolkit(cuda, cc)
        if last is not None:
            dropped.append((dev.get("index"), dev.get("name"), cc, last))
        elif cc // 10 > newest // 10:
            too_new.append((dev.get("index"), dev.get("name"), cc))
        elif wheel and not gpu_versions.runs_on(wheel, wheel_ptx, cc) and (cc < min(wheel) or wheel_ptx):
            # below the oldest cubin, or (where the row records its PTX) in a gap no cubin or PTX of it serves:
            # 0.3.1's "3.5;5.2+PTX" has nothing for a 5.0 GPU
            too_old.append((dev.get("index"), dev.get("name"), cc))
    names = lambda rows: ", ".join(sorted({_cc_label(n, c) for _, n, c in rows}))  # noqa: E731
    supports = (f"supports {_arch_range(wheel)}" if wheel else f"builds kernels up to sm_{newest}")
    fix_cuda = next((f"{m}.{n}" for m, n, a in reversed(gpu_versions.newest_arch_of_toolkit()) if too_new and
                     a // 10 >= max(c for _, _, c in too_new) // 10), "12.8")
    if dropped:
        last = min(d[3] for d in dropped)
        yield error(
            f"torch {version} (CUDA {build.get('cuda')} build) has no kernels for "
            + ", ".join(sorted({_cc_label(n, c) for _, n, c, _ in dropped}))
            + f": "
            f"CUDA after {last[0]}.{last[1]} cannot build code for it",
            detail=(f"NVIDIA's compiler stopped building code for this GPU's architecture after CUDA {last[0]}.{last[1]} "
                    f"(data/gpu_versions.json last_toolkit_of_arch), so no CUDA {build.get('cuda')} build - a wheel, conda, "
                    "a container or a source build - carries a kernel it can run: torch warns \"Found GPU0 ... which is of "
                    "cuda capability X.Y. PyTorch no longer supports this GPU because it is too old\" and the first "
                    "kernel fails with \"CUDA error: no kernel image is available for execution on the device\" "
                    "(torch.cuda.is_available() is still True)."),
            fix=(f"use a newer GPU, or a torch built with CUDA {last[0]}.{last[1]} or older for sm_"
                 f"{min(d[2] for d in dropped)} (TORCH_CUDA_ARCH_LIST={min(d[2] for d in dropped) // 10}."
                 f"{min(d[2] for d in dropped) % 10} python setup.py develop, with that toolkit and a driver that has it)"),
            subjects=subjects([d[0] for d in dropped], "pkg:torch"),
            evidence={"torch": version, "torch_cuda": build.get("cuda"), "last_toolkit": f"{last[0]}.{last[1]}",
                      "gpus": [{"index": i, "name": n, "capability": f"sm_{c}"} for i, n, c, _ in dropped]})
    if too_new:
        yield error(
            f"torch {version} (CUDA {build.get('cuda')} build) has no kernels for {names(too_new)}: the build "
            f"{supports}",
            detail=(f"CUDA {build.get('cuda')} builds kernels up to sm_{newest}, and a GPU runs only kernels of its own "
                    "major architecture: torch warns \"... with CUDA capability sm_XY is not compatible with the current "
                    "PyTorch installation\" and the first kernel fails with \"CUDA error: no kernel image is available "
                    "for execution on the device\" (torch.cuda.is_available() is still True)."),
            fix=f"pip install torch --index-url https://download.pytorch.org/whl/cu{fix_cuda.replace('.', '')}   "
                f"# a build of CUDA {fix_cuda} or newer knows this GPU (the driver must support that CUDA too)",
            subjects=subjects([i for i, _, _ in too_new], "pkg:torch"),
            evidence={"torch": version, "torch_cuda": build.get("cuda"), "newest_arch_of_toolkit": f"sm_{newest}",
                      "wheel_archs": _arch_range(wheel) if wheel else None,
                      "gpus": [{"index": i, "name": n, "capability": f"sm_{c}"} for i, n, c in too_new]})
    yield from _nvrtc_beyond_its_arch(snap, version, build, cuda, v.devices, {i for i, _, _ in too_new})
    if too_old:
        yield warning(
            f"torch {version} (CUDA {build.get('cuda')} build) likely has no kernels for {names(too_old)}: PyTorch's "
            f"wheels of it support {_arch_range(wheel)}",
            detail=(f"PyTorch's own CUDA {build.get('cuda')} wheels ({arch_key}) carry sm_"
                    + ", sm_".join(str(c) for c in sorted(wheel)) + ": older GPUs were dropped, and torch says \"... is "
                    "not compatible with the current PyTorch installation\". A guess: a build from elsewhere (conda, "
                    "a container) may carry more."),
            fix=("pip install torch --index-url https://download.pytorch.org/whl/cu126   # the last wheels with sm_50-sm_70"
                 if min(c for _, _, c in too_old) >= 50 else
                 f"TORCH_CUDA_ARCH_LIST={min(c for _, _, c in too_old) // 10}.{min(c for _, _, c in too_old) % 10} "
                 "python setup.py develop   # a torch built from source for this GPU: PyTorch's wheels since the "
                 "torch 1.3.1 builds (CUDA 9.2-10.2 and later) start at sm_37"),
            subjects=subjects([i for i, _, _ in too_old], "pkg:torch"),
            evidence={"torch": version, "torch_cuda": build.get("cuda"), "wheel_archs": sorted(wheel),
                      "gpus": [{"index": i, "name": n, "capability": f"sm_{c}"} for i, n, c in too_old]})


def _nvrtc_beyond_its_arch(snap, version, build, cuda, devices, reported):
    """GPU032 for the kernels torch compiles at run time with NVRTC (the jiterator, the TorchScript fuser): a torch
    release that passes the GPU's own architecture to an NVRTC that does not know it (data/gpu_versions.json
    nvrtc_arch_clamp: CUDA 11.1-11.7 before torch 1.13, pytorch/pytorch#87595) fails there with "nvrtc: error: invalid
    value for --gpu-architecture (-arch)", while the build's precompiled cubins of the same major still run. A GPU
    whose major the build has no kernels for at all is the error above, not this."""
    have = gpu_versions.release(version)
    for row in gpu_versions.rows("nvrtc_arch_clamp"):
        lo, hi = _cuda_tuple(row["nvrtc_from"]), _cuda_tuple(row["nvrtc_to"])
        if not (lo <= cuda <= hi) or not have or have >= gpu_versions.release(row["torch_clamps_from"]):
            continue
        beyond = [(d.get("index"), d.get("name"), _capability(d)) for d in devices
                  if _capability(d) is not None and _capability(d) > row["max_arch"] and d.get("index") not in reported]
        if not beyond:
            continue
        labels = ", ".join(sorted({_cc_label(n, c) for _, n, c in beyond}))
        yield warning(
            f"torch {version}'s NVRTC (CUDA {build.get('cuda')}) cannot compile for {labels}: its run-time compiled "
            f"kernels fail with 'nvrtc: error: invalid value for --gpu-architecture (-arch)'",
            detail=(f"torch compiles some kernels when first used (the jiterator: prod and other reductions of some "
                    f"dtypes, special functions; the TorchScript CUDA fuser) with the NVRTC of its CUDA {build.get('cuda')} "
                    f"build, which knows GPUs up to sm_{row['max_arch']}. torch releases before "
                    f"{row['torch_clamps_from']} pass the GPU's own architecture (compute_{max(c for _, _, c in beyond)}) "
                    "instead of clamping it (aten/src/ATen/native/cuda/jit_utils.cpp codegenOutputQuery; "
                    "pytorch/pytorch#87595). The build's precompiled sm_"
                    f"{row['max_arch']} kernels still run on this GPU, so only those run-time compiled ops fail."),
            fix="pip install torch --index-url https://download.pytorch.org/whl/cu118   # a CUDA 11.8+ build (its NVRTC "
                f"knows sm_89/sm_90), or torch {row['torch_clamps_from']}+ of the same CUDA (clamps to sm_{row['max_arch']})",
            subjects=subjects([i for i, _, _ in beyond], "pkg:torch"),
            evidence={"torch": version, "torch_cuda": build.get("cuda"), "nvrtc_max_arch": f"sm_{row['max_arch']}",
                      "torch_clamps_from": row["torch_clamps_from"], "source": row["source"]["path"],
                      "gpus": [{"index": i, "name": n, "capability": f"sm_{c}"} for i, n, c in beyond]})


def _torch_archs_known(snap) -> bool:
    return any(isinstance(m, dict) and m.get("package") == "torch"
               for m in (snap.get("packages") or {}).get("cuda_archs") or ())


def _compiled_archs_beyond_the_gpus(snap, devices):
    """GPU032 for the architectures torch's libtorch_cuda.so and each compiled extension really carry (packages.
    cuda_archs, read from their .nv_fatbin) against the GPUs: a GPU none of a module's cubins or PTX runs on
    (gpu_versions.runs_on) gets "no kernel image is available" from that module's first kernel. torch's own: an
    error; an extension's: a warning (the job may not call it)."""
    pk = snap.get("packages") or {}
    for mod in pk.get("cuda_archs") or ():
        if not isinstance(mod, dict) or not (mod.get("sass") or mod.get("ptx")):
            continue
        sass, ptx = [a for a in mod.get("sass") or () if isinstance(a, int)], [a for a in mod.get("ptx") or ()
                                                                              if isinstance(a, int)]
        bad = []
        for dev in devices:
            cc = _capability(dev)
            if cc is not None and not gpu_versions.runs_on(sass, ptx, cc):
                bad.append((dev.get("index"), dev.get("name"), cc))
        if not bad:
            continue
        torch_own = mod.get("package") == "torch"
        carried = " ".join([f"sm_{a}" for a in sorted(sass)] + [f"compute_{a} (PTX)" for a in sorted(ptx)])
        gpus = ", ".join(sorted({_cc_label(n, c) for _, n, c in bad}))
        arch_list = ";".join(sorted({f"{c // 10}.{c % 10}" for _, _, c in bad}))
        make = error if torch_own else warning
        yield make(f"{mod.get('file')} ({mod.get('package')}) has no CUDA code for {gpus}: it carries {carried}",
                   detail=("A cubin runs only on GPUs of its own major architecture and the same or a newer minor, and "
                           "PTX only on GPUs at or above its architecture (CUDA C++ Programming Guide, binary and PTX "
                           "compatibility): the first kernel of this module on " + gpus + " fails with \"CUDA error: no "
                           "kernel image is available for execution on the device\". A build targets the architectures "
                           "TORCH_CUDA_ARCH_LIST names, else those of the GPUs visible when it ran (pytorch/pytorch#3865, "
                           "thomasbrandon/mish-cuda#10)."),
                   fix=(f"TORCH_CUDA_ARCH_LIST=\"{arch_list}\" pip install --no-build-isolation --force-reinstall "
                        f"--no-cache-dir <{mod.get('package')}>   # rebuild it for these GPUs"
                        + ("; or install a PyTorch wheel built for them" if torch_own else "")),
                   subjects=subjects([i for i, _, _ in bad], f"pkg:{mod.get('package')}"),
                   evidence={"package": mod.get("package"), "file": mod.get("file"), "sass": sass, "ptx": ptx,
                             "gpus": [{"index": i, "name": n, "capability": f"sm_{c}"} for i, n, c in bad]})


# FlashAttention 2's kernels exist for Ampere and newer only: every entry point checks the device first,
# TORCH_CHECK(is_sm90 || is_sm8x, "FlashAttention only supports Ampere GPUs or newer.") (Dao-AILab/flash-attention
# csrc/flash_attn/flash_api.cpp mha_fwd / mha_varlen_fwd / mha_bwd @ 765fbd928364); 1.x also ran on Turing (sm_75).
FLASH_ATTN_MIN_CAPABILITY = 80


def _flash_attn_beyond_the_gpus(snap, devices):
    """flash-attn 2+ installed on a machine none of whose GPUs it has kernels for: a model that uses it (transformers'
    attn_implementation="flash_attention_2", remote code that imports it when installed, a train_mem.py patch) fails
    at its first attention call. A warning: whether the job uses it is the script's choice - an error when the
    script read (`check --script`, or its launch command's script: lint.scriptfacts `attention`) asks for it, and
    an error too when it asks for it and flash-attn is not installed (transformers: "FlashAttention2 has been toggled
    on, but it cannot be used due to the following error: the package flash_attn seems to be not installed")."""
    versions = (snap.get("packages") or {}).get("versions") or {}
    version = str(versions.get("flash-attn") or "")
    asks = [a for a in script_asks(snap, "attention") if str(a.get("kernel", "")).startswith("flash_attention")]
    where = f"{asks[0].get('path')}:{asks[0].get('line')} {asks[0].get('what')}" if asks else None
    if asks and "flash-attn" in versions and versions.get("flash-attn") is None:
        yield error(f"the training script asks for FlashAttention ({where}) and flash-attn is not installed",
                    detail=("transformers raises at model load: \"FlashAttention2 has been toggled on, but it cannot be "
                            "used due to the following error: the package flash_attn seems to be not installed\"; a "
                            "script that imports flash_attn fails at that import."),
                    fix="pip install flash-attn --no-build-isolation   # on Ampere (sm_80) or newer GPUs; or "
                        "attn_implementation=\"sdpa\"",
                    subjects=["script:" + str(asks[0].get("path")), "pkg:flash-attn"],
                    evidence={"asked": where, "flash-attn": None})
        return
    caps = [(dev.get("index"), dev.get("name"), _capability(dev)) for dev in devices]
    caps = [row for row in caps if row[2] is not None]
    if not caps or any(c >= FLASH_ATTN_MIN_CAPABILITY for _, _, c in caps):
        return
    installed = version[:1].isdigit() and int(version.split(".")[0]) >= 2
    if version[:1].isdigit() and int(version.split(".")[0]) == 1:
        yield from _flash_attn_1_beyond_the_gpus(version, caps, asks)
        return
    if not installed and not asks:
        return
    names = ", ".join(sorted({f"{n} (sm_{c})" for _, n, c in caps}))
    head = (f"the training script asks for FlashAttention ({where}) and no GPU here has kernels for it: {names}" if asks
            else f"flash-attn {version} is installed but has no kernels for {names}")
    yield (error if asks else warning)(
        head,
        detail=("FlashAttention 2 runs on Ampere (sm_80) and newer only: a model that uses it (attn_implementation="
                "\"flash_attention_2\", remote model code that imports flash_attn when it is installed, a training "
                "script's flash-attn patch) fails at its first attention call with \"RuntimeError: FlashAttention only "
                "supports Ampere GPUs or newer\" (flash_api.cpp)."),
        fix=("pip uninstall flash-attn   # or load the model with attn_implementation=\"sdpa\" (\"eager\"); "
             "FlashAttention 2 needs GPUs of compute capability 8.0+"),
        subjects=subjects([i for i, _, _ in caps], "pkg:flash-attn") + (["script:" + str(asks[0].get("path"))] if asks else []),
        evidence={"flash-attn": version or None, "needs": "sm_80", "asked": where,
                  "gpus": [{"index": i, "name": n, "capability": f"sm_{c}"} for i, n, c in caps]})


def _triton_link(snap, where, compiles, asks=None):
    """torch.compile with triton installed, and no unversioned libcuda.so beside the driver library the process loaded
    (the cuda section's `unversioned_link`): Triton compiles its launcher with `gcc ... -lcuda`, which needs that link
    name, and finds libcuda through `ldconfig -p` (triton third_party/nvidia/backend/driver.py, libcuda_dirs: "libcuda.so
    cannot found! ... Please create a symlink of libcuda.so"; read in stored pull requests triton-lang/triton#1981,
    #3053, not at a commit). A warning: TRITON_LIBCUDA_PATH or a libcuda.so on another searched path may serve."""
    cuda = (snap.get("cuda") or {}) if "cuda" in snap else {}
    env = (snap.get("env") or {}).get("vars") or {}
    if not isinstance(cuda, dict) or cuda.get("unversioned_link") is not False or env.get("TRITON_LIBCUDA_PATH"):
        return
    lib = str(cuda.get("library") or "libcuda.so.1")
    yield warning(f"the training script {asks or f'calls torch.compile ({where})'} and there is no libcuda.so beside "
                  f"{lib}",
                  detail=("Triton, torch.compile's kernel compiler, builds its launcher with `gcc ... -lcuda`, and the "
                          "linker needs the unversioned name libcuda.so: without it the first compiled call fails with "
                          "\"/usr/bin/ld: cannot find -lcuda\" (or \"libcuda.so cannot found!\"). A guess: Triton may "
                          "find one through TRITON_LIBCUDA_PATH or another library path."),
                  fix=f"sudo ln -s {lib} {os.path.join(os.path.dirname(lib), 'libcuda.so')}   # or export "
                      "TRITON_LIBCUDA_PATH=<a directory holding libcuda.so>; sudo ldconfig",
                  subjects=[(compiles[0].get("subject") or "script:" + str(compiles[0].get("path"))), "lib:libcuda.so"],
                  evidence={"asked": where, "library": lib, "unversioned_link": False})


# flash-attn 1.x refuses GPUs older than Turing: csrc/flash_attn/fmha_api.cpp `TORCH_CHECK(is_sm90 || is_sm8x || is_sm75)`
# ("Expected is_sm90 || is_sm8x || is_sm75 to be true, but got false"; the message read in stored reports,
# lm-sys/FastChat#498, QwenLM/Qwen#103; the source not read at a commit).
FLASH_ATTN_1_MIN_CAPABILITY = 75


def _flash_attn_1_beyond_the_gpus(version, caps, asks):
    """flash-attn 1.x installed where no GPU is Turing (sm_75) or newer: a warning (an error when the script asks
    for FlashAttention)."""
    if not caps or any(c >= FLASH_ATTN_1_MIN_CAPABILITY for _, _, c in caps):
        return
    names = ", ".join(sorted({f"{n} (sm_{c})" for _, n, c in caps}))
    yield (error if asks else warning)(
        f"flash-attn {version} is installed but has no kernels for {names}",
        detail=("FlashAttention 1.x runs on Turing (sm_75), Ampere and Hopper only: a model or a training script's "
                "patch that uses it fails at its first attention call with \"Expected is_sm90 || is_sm8x || is_sm75 "
                "to be true, but got false\" (fmha_api.cpp)."),
        fix="pip uninstall flash-attn   # or train without the flash-attn patch (attn_implementation=\"sdpa\"/\"eager\")",
        subjects=subjects([i for i, _, _ in caps], "pkg:flash-attn"),
        evidence={"flash-attn": version, "needs": "sm_75",
                  "gpus": [{"index": i, "name": n, "capability": f"sm_{c}"} for i, n, c in caps]})


# torch.compile's default backend (inductor) generates Triton kernels for CUDA GPUs. pytorch/pytorch
# torch/_inductor/scheduler.py (Scheduler.create_backend): `if device.type == "cuda" and not has_triton(): if
# device_props.major < 7: raise GPUTooOldForTriton ... else: raise TritonMissing` - "Found <GPU> which is too old to be
# supported by the triton GPU compiler, which is used as the backend. Triton only supports devices of CUDA
# Capability >= 7.0" / "Cannot find a working triton installation" (torch/_dynamo/exc.py); the floor itself is data
# (data/triton_libraries.json min_capability: torch/utils/_triton.py has_triton @f44ba642, capability >= (7, 0)). Triton's own wheels on PyPI are built for Linux only (a guess from its release
# files, not read at a commit): on Windows a plain `pip install torch` has no triton.
def _triton_min_capability() -> int:
    """data/triton_libraries.json min_capability (torch/utils/_triton.py has_triton: capability >= (7, 0)), as 70."""
    import json

    with open(os.path.join(os.path.dirname(gpu_versions.DATA), "triton_libraries.json"), encoding="utf-8") as fh:
        major, minor = json.load(fh)["min_capability"]["capability"]
    return int(major) * 10 + int(minor)


TRITON_MIN_CAPABILITY = _triton_min_capability()
# the distributions that install the `triton` module: triton itself, and pytorch-triton / pytorch-triton-rocm, on
# which torch's nightly and ROCm wheels depend (download.pytorch.org/whl/nightly/pytorch_triton-*.whl)
TRITON_DISTRIBUTIONS = ("triton", "pytorch-triton", "pytorch-triton-rocm")


def _compiles_by_default(snap) -> list:
    """Installed libraries that call torch.compile by default (data/triton_libraries.json compile_by_default: nnU-Net
    v2's trainer, vLLM's V1 engine from its `first` release on), unless their variable turns it off or the system is one they skip: as `triton_libraries` rows."""
    import json

    versions = (snap.get("packages") or {}).get("versions") or {}
    env = env_of(snap)
    system = str((snap.get("host") or {}).get("os") or "")
    with open(os.path.join(os.path.dirname(gpu_versions.DATA), "triton_libraries.json"), encoding="utf-8") as fh:
        rows = json.load(fh).get("compile_by_default", {}).get("packages") or ()
    out = []
    for row in rows:
        launched = None if versions.get(row["distribution"]) else _launches_entry_point(snap, row)
        if not (versions.get(row["distribution"]) or launched) or system in row.get("not_on_os", ()):
            continue
        if row.get("first") and (not versions.get(row["distribution"]) or gpu_versions.release(
                str(versions[row["distribution"]])) < gpu_versions.release(row["first"])):
            continue  # a release from before the default, or one not recorded
        value = env.get(row["env"])
        if value is not None and str(value).lower() not in row["on"]:
            continue
        src = row["source"]
        where = f"{src['repo']} {src['path']}"
        ran = launched or versions[row["distribution"]]
        out.append({"path": row["distribution"], "library": row["name"], "where": where, "subject": "pkg:" + row["distribution"],
                    "asks": (f"runs {row['name']} {ran}, which calls torch.compile by default "
                             f"({row['env']} unset or on: {where}; {row['off']} turns it off)")})
    return out


def _launches_entry_point(snap, row) -> Optional[str]:
    """How the recorded launch runs one of a compile-by-default library's training entry points (the row's `modules`,
    `python -m <module>`; its `commands`, the console script), e.g. "(python -m nnunetv2.run.run_training)"; None."""
    from ddpdoctor.facts.launch import commands  # noqa: PLC0415

    for cmd in commands(snap):
        module = str(cmd.get("module") or "")
        if module and any(module == m or module.startswith(m + ".") for m in row.get("modules") or ()):
            return f"(python -m {module})"
        word = os.path.basename(str(cmd.get("program_word") or cmd.get("launcher") or ""))
        if word and word in (row.get("commands") or ()):
            return f"({word})"
    return None


def _compile_beyond_the_machine(snap, devices):
    """torch.compile in the script read (lint.scriptfacts `compiles`) where inductor's Triton cannot run: no GPU of
    compute capability 7.0+, or no triton installed (the packages section names it: None), or Windows without a
    recorded triton (a warning: a guess)."""
    compiles = script_asks(snap, "compiles")
    libs = script_asks(snap, "triton_libraries")  # a library whose own kernels are Triton's (Unsloth, Liger)
    if not compiles and not libs:
        libs = _compiles_by_default(snap)  # check27: an installed library that calls torch.compile unless told not to
    if not compiles and not libs:
        return
    if compiles:
        where = f"{compiles[0].get('path')}:{compiles[0].get('line')} torch.compile"
        asks = f"calls torch.compile ({where})"
    else:
        compiles = libs
        where = libs[0].get("where") or f"{libs[0].get('path')}:{libs[0].get('line')} {libs[0].get('what')}"
        asks = libs[0].get("asks") or f"uses {libs[0].get('library')}, whose kernels are Triton kernels ({where})"
    caps = [(dev.get("index"), dev.get("name"), _capability(dev)) for dev in devices]
    caps = [row for row in caps if row[2] is not None]
    low = [row for row in caps if row[2] < TRITON_MIN_CAPABILITY]
    if low:
        names = ", ".join(sorted({f"{n} (sm_{c})" for _, n, c in low}))
        yield error(f"the training script {asks}; Triton, its kernel compiler, has no support for {names}",
                    detail=("inductor generates Triton kernels, and Triton supports compute capability 7.0 and newer: "
                            "the first compiled call raises \"Found <GPU> which is too old to be supported by the "
                            "triton GPU compiler ... Triton only supports devices of CUDA Capability >= 7.0\" "
                            "(torch/_inductor/scheduler.py, GPUTooOldForTriton)."),
                    fix="drop torch.compile on these GPUs (or torch.compile(model, backend=\"eager\"/\"aot_eager\")); "
                        "or run on GPUs of compute capability 7.0+",
                    subjects=subjects([i for i, _, _ in low], (compiles[0].get("subject") or "script:" + str(compiles[0].get("path")))),
                    evidence={"asked": where, "needs": "sm_70",
                              "gpus": [{"index": i, "name": n, "capability": f"sm_{c}"} for i, n, c in low]})
        return
    versions = (snap.get("packages") or {}).get("versions") or {}
    windows = str((snap.get("host") or {}).get("os") or "") == "Windows"
    if any(versions.get(d) for d in TRITON_DISTRIBUTIONS):
        yield from _triton_link(snap, where, compiles, asks)
        return
    # the `triton` module comes from the triton distribution or from pytorch-triton (torch's nightly and ROCm wheels
    # depend on it): missing only when every one of them was looked for; on Windows neither publishes wheels
    recorded = all(d in versions for d in TRITON_DISTRIBUTIONS)
    if recorded or (windows and versions.get("triton") is None):
        make = error if "triton" in versions else warning
        yield make(f"the training script {asks} and no triton is installed"
                   + (" (Windows: triton publishes Linux wheels only; a guess, triton not recorded)"
                      if "triton" not in versions else ""),
                   detail=("inductor, torch.compile's default backend, generates Triton kernels for CUDA GPUs: without "
                           "triton the first compiled call raises \"Cannot find a working triton installation\" "
                           "(torch/_inductor/scheduler.py, TritonMissing)."),
                   fix="pip install triton   # Linux; on Windows drop torch.compile, or use a triton build for Windows",
                   subjects=[(compiles[0].get("subject") or "script:" + str(compiles[0].get("path"))), "pkg:triton"],
                   evidence={"asked": where, "triton": versions.get("triton"), "windows": windows})


def job_amd_gpus(snap) -> list:
    """The AMD GPUs of the snapshot (pci.amd_gpus, KFD node order) this process's masks leave it: ROCR_VISIBLE_DEVICES,
    then HIP_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES (facts.cuda_map.hip_visible_positions); all of them when no mask is
    set or an entry is not an index."""
    from ddpdoctor.facts.cuda_map import hip_visible_positions  # noqa: PLC0415

    pci = (snap.get("pci") or {}) if "pci" in snap else {}
    gpus = [g for g in pci.get("amd_gpus") or [] if isinstance(g, dict)]
    kept = hip_visible_positions(env_of(snap) if "env" in snap else {}, len(gpus))
    return gpus if kept is None else [gpus[i] for i in kept]


def listed_amd_gpus(snap, visible_only: bool = False) -> list:
    """(KFD node, gfx target, first ROCm release of PyTorch's wheels with it) for each AMD GPU of the snapshot whose
    target gpu_versions.rocm_wheel_target_since() lists; an APU's or an unlisted target is left out (no verdict on it).
    `visible_only`: only the GPUs the process's masks leave it (job_amd_gpus)."""
    pci = (snap.get("pci") or {}) if "pci" in snap else {}
    out = []
    for gpu in (job_amd_gpus(snap) if visible_only else pci.get("amd_gpus") or []):
        since = gpu_versions.rocm_wheel_target_since().get(str(gpu.get("gfx") or "")) if isinstance(gpu, dict) else None
        if since is not None:
            out.append((gpu.get("node"), gpu.get("gfx"), since))
    return out


def _never_in_rocm_wheels(snap, version: str, build: dict):
    """GPU036's finding for AMD GPUs whose target no PyTorch ROCm wheel has ever carried (gpu_versions.
    rocm_wheel_targets_ever: gfx803, gfx90c, gfx1031/gfx1032...), unless HSA_OVERRIDE_GFX_VERSION already maps them
    onto a target the wheels carry."""
    pci = (snap.get("pci") or {}) if "pci" in snap else {}
    ever = gpu_versions.rocm_wheel_targets_ever()
    override = str((env_of(snap) if "env" in snap else {}).get("HSA_OVERRIDE_GFX_VERSION") or "").strip()
    if override:
        parts = override.split(".")
        if len(parts) == 3 and all(p.isdigit() for p in parts) and \
                f"gfx{int(parts[0])}{int(parts[1]):x}{int(parts[2]):x}" in ever:
            return  # the runtime presents the GPU as a target the build carries
    gpus = [g for g in job_amd_gpus(snap) if isinstance(g, dict) and g.get("gfx")
            and gpu_versions.gfx_parts(str(g["gfx"])) and str(g["gfx"]) not in ever]
    if not gpus:
        return
    targets = sorted({str(g["gfx"]) for g in gpus})
    overrides = {t: gpu_versions.override_for(t) for t in targets}
    hint = "; ".join(f"HSA_OVERRIDE_GFX_VERSION={o} runs {t} as gfx{o.replace('.', '')[:-1]}0" for t, o in overrides.items() if o)
    yield warning(
        f"torch {version} (ROCm {build.get('hip')} build) has no kernels for {', '.join(targets)}: no PyTorch ROCm "
        "wheel carries it",
        detail=("PyTorch's ROCm wheels are built for a fixed list of targets (PYTORCH_ROCM_ARCH: pytorch/pytorch "
                ".ci/docker/manywheel/build.sh, and pytorch/builder before it), and " + ", ".join(targets)
                + " has never been in it (ROCm's maintainers close such reports as not officially supported: "
                "pytorch/pytorch#91699, ROCm/hip#3282). torch still lists "
                "the GPU, then the first kernel fails (\"hipErrorNoBinaryForGpu\", \"invalid device function\") or the "
                "process segfaults. A build from elsewhere may carry it."
                + (f" The usual workaround, unsupported by AMD: {hint}." if hint else "")),
        fix=(f"export HSA_OVERRIDE_GFX_VERSION={next(o for o in overrides.values() if o)}   # unsupported by AMD; or "
             if any(overrides.values()) else "")
            + f"build torch with PYTORCH_ROCM_ARCH={';'.join(targets)}",
        subjects=["pkg:torch", "HSA_OVERRIDE_GFX_VERSION"],
        evidence={"torch": version, "torch_hip": build.get("hip"), "targets": targets,
                  "override": overrides, "HSA_OVERRIDE_GFX_VERSION": override or None})


def _added_to_rocm_wheels_later(snap, version: str, build: dict):
    """GPU036 for AMD targets PyTorch's own ROCm wheels gained in pytorch/pytorch's .ci era (gpu_versions.
    rocm_wheel_target_torch: gfx1101 from torch 2.6, gfx1102/gfx1200/gfx1201 from 2.7, gfx950/gfx1150/gfx1151 from
    2.10) under a torch release or nightly from before it; 'unknown' (a nightly of a ROCm release that may have
    carried it earlier) is said as a guess. HSA_OVERRIDE_GFX_VERSION set: no verdict (the runtime presents another
    target)."""
    pci = (snap.get("pci") or {}) if "pci" in snap else {}
    if str((env_of(snap) if "env" in snap else {}).get("HSA_OVERRIDE_GFX_VERSION") or "").strip():
        return
    verdicts = {}
    for g in job_amd_gpus(snap):
        if isinstance(g, dict) and g.get("gfx"):
            said = gpu_versions.torch_wheel_carries_gfx(version, build.get("hip"), str(g["gfx"]))
            if said in ("no", "unknown"):
                verdicts.setdefault(str(g["gfx"]), said)
    if not verdicts:
        return
    table = gpu_versions.rocm_wheel_target_torch()
    targets = sorted(verdicts)
    first = max((version_tuple(table[t]["torch"])[:2] for t in targets))
    sure = [t for t in targets if verdicts[t] == "no"]
    rows = "; ".join(f"{t}: from torch {table[t]['torch']} (nightlies from {table[t]['nightly']}, "
                     f"{table[t]['source']['url']})" for t in targets)
    yield warning(
        f"torch {version} (ROCm {build.get('hip')} build) {'likely has' if sure else 'may have'} no kernels for "
        f"{', '.join(targets)}: PyTorch's ROCm wheels carry {'it' if len(targets) == 1 else 'them'} from torch "
        f"{first[0]}.{first[1]}",
        detail=("PyTorch's ROCm wheels are built for the targets in PYTORCH_ROCM_ARCH (pytorch/pytorch "
                f".ci/docker/manywheel/build.sh), and these were added later ({rows}; data/gpu_versions.json "
                "rocm_wheel_target_torch). torch lists the GPU, then its first kernel fails (\"HIP error: invalid "
                "device function\", \"hipErrorNoBinaryForGpu\", \"hipErrorInvalidImage\") or the process crashes; "
                "torch.cuda.get_arch_list() shows the targets the build carries."
                + ("" if sure else " A guess for " + ", ".join(t for t in targets if t not in sure) + ": before that "
                   "date only the nightlies of ROCm " + ", ".join(sorted({str(table[t]['rocm_from']) for t in targets
                                                                        if t not in sure})) + "+ had it, from a date "
                   "not read; torch.cuda.get_arch_list() settles it.")),
        fix=(f"python -c 'import torch; print(torch.cuda.get_arch_list())'   # no {targets[0]} listed: pip install "
             f"--pre torch --index-url https://download.pytorch.org/whl/nightly/rocm{max(version_tuple(build.get('hip'))[:2], (7, 0))[0]}."
             f"{max(version_tuple(build.get('hip'))[:2], (7, 0))[1]} (or torch>={first[0]}.{first[1]} from a ROCm index)"
             if first >= (2, 10) else
             f"pip install 'torch>={first[0]}.{first[1]}' --index-url https://download.pytorch.org/whl/rocm6.3   # a "
             f"release whose ROCm wheels carry {', '.join(targets)}"),
        subjects=["pkg:torch"],
        evidence={"torch": version, "torch_hip": build.get("hip"), "targets": targets, "verdicts": verdicts,
                  "first_torch": f"{first[0]}.{first[1]}"})


def _rocm_build_vs_host_rocm(snap, version, build):
    """GPU036: torch's ROCm release more than rocm_user_kernel_window releases from the host's installed ROCm."""
    rocm = (snap.get("host") or {}).get("rocm") or {}
    installed = rocm.get("version") if isinstance(rocm, dict) else None
    apart = gpu_versions.rocm_release_distance(build.get("hip"), installed)
    window = gpu_versions.rocm_user_kernel_window()
    if apart is None or apart <= window:
        return
    built, host = version_tuple(build.get("hip"))[:2], version_tuple(installed)[:2]
    src = gpu_versions.rows("rocm_user_kernel_window")[0]["source"]
    yield warning(
        f"torch {version} brings ROCm {built[0]}.{built[1]} user space; this host has ROCm {installed} installed "
        f"({apart} releases apart)",
        detail=(f"AMD supports its kernel-mode driver with ROCm user space within {window} releases either way "
                f"({src['url']}). torch's ROCm wheels bundle their own HIP and ROCr runtime, so their ROCm "
                f"{built[0]}.{built[1]} meets the kernel driver installed with ROCm {host[0]}.{host[1]} at {rocm.get('path')} "
                "(a guess: the amdgpu driver may come from the distribution's kernel instead, which this snapshot does "
                "not say). Outside that window the runtime can crash inside ROCr (segfaults in hsa_amd_* calls) or "
                "see no GPU."),
        fix=f"pip install torch --index-url https://download.pytorch.org/whl/rocm{host[0]}.{host[1]}   # a build of "
            f"a ROCm release within {window} of the installed one (check that index exists for your torch)",
        subjects=["pkg:torch"],
        evidence={"torch": version, "torch_hip": build.get("hip"), "host_rocm": installed, "host_rocm_path": rocm.get("path"),
                  "releases_apart": apart, "window": window})


@check("GPU036", "gpu-newer-than-rocm-build", family="gpu", needs=("packages",), reads=("pci", "env", "host"))
def amd_gpu_vs_rocm_build(snap):
    """An AMD GPU whose architecture the installed torch's ROCm build likely carries no kernels for.

    What it checks
        Each AMD GPU the process sees (its masks: ROCR_VISIBLE_DEVICES, then HIP_VISIBLE_DEVICES or
        CUDA_VISIBLE_DEVICES over what it left, data/visible_devices.json; an integrated GPU the job hides is
        not its), its ISA as ROCm's kernel driver reports it (the KFD topology's gfx_target_version,
        decoded as libhsakmt does: ROCm/ROCR-Runtime libhsakmt/src/topology.c), against the ROCm
        version torch was built with (torch.version.hip, read as text). PyTorch's own ROCm wheels
        carry a fixed list of targets (PYTORCH_ROCM_ARCH in pytorch/builder's wheel builds): gfx90a
        and gfx1030 from ROCm 4.3, gfx1100 (Radeon RX 7900) from ROCm 5.5, gfx942 (MI300) from 6.0.
        A target no PyTorch ROCm wheel has ever carried (neither there nor in pytorch/pytorch's
        .ci/docker/manywheel/build.sh: gfx803, the APUs' gfx90c, the Radeon RX 6600-6700's
        gfx1031/gfx1032) is reported too, with the HSA_OVERRIDE_GFX_VERSION of the same generation's
        target the wheels carry, unless that override is already set. Targets added once the builds
        moved to pytorch/pytorch's .ci (gfx1101 from torch 2.6; gfx1102, gfx1200, gfx1201 from 2.7;
        gfx950, gfx1150, gfx1151 from 2.10: data/gpu_versions.json rocm_wheel_target_torch, each with its
        pull request) are judged by torch release, and a nightly by its date; a nightly of a ROCm release
        that may have carried the target earlier is said as a guess. And the ROCm release of torch's
        build (whose user space its wheels bundle) against the ROCm installed on the host ($ROCM_PATH or
        /opt/rocm, .info/version): AMD supports its kernel driver with user space within 2 releases
        either way (data/gpu_versions.json rocm_user_kernel_window, AMD's user and kernel-space support
        matrix); further apart is a warning. The host's ROCm stands in for the kernel driver installed
        with it - a guess, said as such: a distribution's own amdgpu may differ.

    Why it matters
        A GPU without kernels in the build is listed by torch (torch.cuda.is_available() is True), then
        fails at its first kernel ("HIP error: invalid device function") or crashes: a Radeon RX 7900
        XTX under a ROCm 5.4 build segfaults when a tensor is placed on it (ROCm/ROCm#1977).

    Example
        A gfx1100 GPU (RX 7900 XTX) with torch 2.0.0+rocm5.4.2.

    Fix
        pip install torch --index-url https://download.pytorch.org/whl/rocm6.2   (a build of a ROCm
        release that lists the GPU; AMD's own wheels may carry more targets).
    """
    pk = snap.get("packages") or {}
    build = pk.get("torch_build")
    version = (pk.get("versions") or {}).get("torch")
    if not version or not isinstance(build, dict) or not build.get("hip"):
        return
    hip = version_tuple(build.get("hip"))[:2]
    missing = [(node, gfx, since) for node, gfx, since in listed_amd_gpus(snap, visible_only=True)
               if len(hip) == 2 and hip < since]
    yield from _never_in_rocm_wheels(snap, version, build)
    yield from _added_to_rocm_wheels_later(snap, version, build)
    yield from _rocm_build_vs_host_rocm(snap, version, build)
    if not missing:
        return
    targets = sorted({g for _, g, _ in missing})
    first = max(s for _, _, s in missing)
    yield warning(
        f"torch {version} (ROCm {build.get('hip')} build) likely has no kernels for {', '.join(targets)}",
        detail=(f"PyTorch's ROCm wheels carry {', '.join(targets)} only from ROCm {first[0]}.{first[1]} (PYTORCH_ROCM_ARCH "
                "in pytorch/builder's wheel builds). torch still lists the GPU, then its first kernel fails (\"HIP error: "
                "invalid device function\") or the process crashes. A build from elsewhere (AMD's wheels, a source "
                "build) may carry the target."),
        fix=f"pip install torch --index-url https://download.pytorch.org/whl/rocm{max(first, (6, 2))[0]}."
            f"{max(first, (6, 2))[1]}   # a ROCm build that lists {', '.join(targets)}",
        subjects=["pkg:torch"],
        evidence={"torch": version, "torch_hip": build.get("hip"),
                  "gpus": [{"kfd_node": n, "target": g, "first_rocm_wheels": f"{s[0]}.{s[1]}"} for n, g, s in missing]})


def _triton_libcuda_lookup() -> dict:
    """data/triton_libraries.json libcuda_lookup: the first Triton release that finds libcuda outside ldconfig's cache."""
    import json

    with open(os.path.join(os.path.dirname(gpu_versions.DATA), "triton_libraries.json"), encoding="utf-8") as fh:
        return json.load(fh)["libcuda_lookup"]


@check("GPU040", "triton-libcuda-not-in-ld-cache", family="gpu", needs=("gpus", "packages"), reads=("cuda", "env", "host"))
def triton_libcuda_not_in_ld_cache(snap):
    """A Triton that finds the CUDA driver only through ldconfig's cache, on a machine whose cache does not list it.

    What it checks
        The installed triton (or pytorch-triton) version against the first release that looks anywhere else
        (data/triton_libraries.json libcuda_lookup: 2.2.0, read in triton-lang/triton python/triton/common/build.py
        libcuda_dirs: up to 2.1.x only `ldconfig -p`; from 2.2.0 TRITON_LIBCUDA_PATH, then the cache, then
        LD_LIBRARY_PATH), and whether the loader's cache lists libcuda (the cuda section's `ld_cache_libcuda`,
        read from /etc/ld.so.cache beside the driver library the process loaded, `library`).

    Why it matters
        Every Triton compile (torch.compile's inductor, Triton kernels of libraries) first asks for libcuda's
        directory: with none in the cache, Triton 2.1 raises "AssertionError: libcuda.so cannot found!" although
        CUDA itself works (the process loaded the driver through LD_LIBRARY_PATH). Containers started without the
        NVIDIA runtime, whose driver libraries are mounted by hand (GCP Batch's /usr/local/nvidia/lib64) and never
        passed to ldconfig, meet it.

    Example
        triton 2.1.0 (torch 2.1) in a container with LD_LIBRARY_PATH=/usr/local/nvidia/lib64 and an ld.so.cache
        that names no libcuda.

    Fix
        echo /usr/local/nvidia/lib64 > /etc/ld.so.conf.d/nvidia.conf && ldconfig (the directory of the loaded
        libcuda), or run the container with the NVIDIA runtime (--gpus), or a torch whose triton is 2.2+
        (TRITON_LIBCUDA_PATH).
    """
    versions = (snap.get("packages") or {}).get("versions") or {}
    cuda = snap.get("cuda") if "cuda" in snap and isinstance(snap.get("cuda"), dict) else {}
    if cuda.get("ld_cache_libcuda") is not False or not cuda.get("library"):
        return
    dist, have = next(((d, versions[d]) for d in TRITON_DISTRIBUTIONS if versions.get(d)), (None, None))
    rule = _triton_libcuda_lookup()
    since = version_tuple(rule["ldconfig_only_before"])
    if not have or version_tuple(str(have).split("+")[0])[:3] >= since or dist == "pytorch-triton-rocm":
        return
    lib = str(cuda["library"])
    where = os.path.dirname(lib)
    src = rule["sources"][0]
    yield warning(
        f"{dist} {have} finds libcuda only through ldconfig's cache, which does not list it here: its first compile "
        f"fails 'libcuda.so cannot found!'",
        detail=(f"This process loaded the driver from {lib}, but /etc/ld.so.cache names no libcuda, and Triton before "
                f"{rule['ldconfig_only_before']} looks nowhere else ({src['repo']} {src['path']} {src['release']}: "
                "libcuda_dirs reads `ldconfig -p` only; 2.2.0 adds TRITON_LIBCUDA_PATH and LD_LIBRARY_PATH). Every "
                "torch.compile (inductor) or Triton kernel launch fails; CUDA itself works."),
        fix=(f"echo {where} | sudo tee /etc/ld.so.conf.d/nvidia.conf && sudo ldconfig   # the loaded driver's "
             "directory; or start the container with the NVIDIA runtime (--gpus all), or a torch whose triton is >= "
             f"{rule['ldconfig_only_before']} and export TRITON_LIBCUDA_PATH={where}"),
        subjects=[f"pkg:{dist}", f"path:{lib}", "LD_LIBRARY_PATH"],
        evidence={"triton": have, "distribution": dist, "library": lib, "ld_cache_libcuda": False,
                  "ldconfig_only_before": rule["ldconfig_only_before"]})
