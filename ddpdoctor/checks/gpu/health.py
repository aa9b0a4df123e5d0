"""GPU presence and health (catalogue B5-B9): driver, MIG, ECC, memory held by others, modes, clocks.

Each check reads the `gpus` section through `_gpu.view`, so it judges only the GPUs this job can
see and names them as the job will ("cuda:1 = gpu:3").
"""
from __future__ import annotations

from ddpdoctor.model import error, info, warning
from ddpdoctor.model.registry import check
from ddpdoctor.facts import gpu_versions
from ddpdoctor.facts.cuda_map import devices_of
from ddpdoctor.facts.env import env_of, script_asks
from ddpdoctor.facts.gpu import GiB, gib, local_ranks, subjects, view
from ddpdoctor.facts.pci import norm_bdf


@check("GPU001", "no-nvidia-driver", reads=("gpus", "packages", "host", "pci", "cuda"), family="gpu", needs=())
def no_nvidia_driver(snap):
    """NVML cannot be used on this machine, so every GPU check is skipped; said once.

    What it checks
        The `gpus` section reports that NVML is unavailable: no libnvidia-ml (no driver), a driver
        whose kernel module is not loaded, a user/kernel version mismatch after an upgrade, or no
        permission on /dev/nvidia*. On a machine whose GPUs are AMD (the KFD topology lists targets
        PyTorch's ROCm wheels are built for, GPU036's table) and no NVIDIA GPU is on the bus, a torch
        that is not a ROCm build cannot use them: a warning. Also when NVML works (nvidia-smi lists
        the GPUs) but libcuda.so.1 cannot be loaded, so CUDA has no driver and torch says "Found no
        NVIDIA driver on your system": in a container, the NVIDIA Container Toolkit mounted the
        driver's utility libraries (NVML, nvidia-smi) but not its compute ones because
        NVIDIA_DRIVER_CAPABILITIES lacks `compute` (NVIDIA/nvidia-docker#533); a warning that names
        the variable when it is set without `compute` or `all`.

    Why it matters
        On a CPU-only machine this is expected and only noted (info). It is a warning when
        something says GPUs were expected: /dev/nvidia0 exists, CUDA_VISIBLE_DEVICES or NCCL_*
        is set, the training script read puts work on a CUDA device (`.cuda()`, "cuda:0"; pytorch/pytorch#28111),
        the kernel module is installed but not loaded, a CUDA build of torch runs in a
        container (the image was meant for GPUs), accelerate's default config asks for GPUs
        (distributed_type MULTI_GPU/DEEPSPEED/FSDP or gpu_ids, use_cpu not true: Akegarasu/lora-scripts#101,
        an Intel-only laptop), the launch command counts the local GPUs and stops when there are none (the
        DeepSpeed runner without a hostfile: "Unable to proceed, no GPU resources available", deepspeedai/DeepSpeed
        #535; `torchrun --nproc-per-node gpu`: "Cuda is not available."; data/launchers.json
        launcher_needs_local_gpu), or NVIDIA GPUs sit on the PCI bus (sysfs, which
        a container sees too). A container started without
        `--gpus` (or without the NVIDIA Container Toolkit) looks exactly like this, and torch then
        silently trains on the CPU. See NVIDIA/nvidia-docker#1279. The other way round, a container launch read
        by check (`check -- docker run --gpus all IMAGE ...`) that asks a host with no NVIDIA driver for GPUs is a
        warning naming the request: Docker registers its 'gpu' device capability only with the NVIDIA Container
        Toolkit's hook, and stops with 'could not select device driver "" with capabilities: [[gpu]]'
        (data/containers.json: docker/cli opts.go, moby daemon/devices.go and nvidia_linux.go;
        fboulnois/stable-diffusion-docker#82, an Intel-only laptop).

    Example
        `docker run image python train.py` without `--gpus all` on a GPU host.

    Fix
        On a GPU host: `nvidia-smi` must work first. In docker: `docker run --gpus all ...`.
        After a driver upgrade: reboot (or reload nvidia.ko). On a CPU machine: nothing to do.
    """
    gpus = snap.get("gpus")
    if isinstance(gpus, dict) and not gpus.get("unavailable"):
        yield from _libcuda_missing(snap, gpus)
        return
    if not isinstance(gpus, dict) or not gpus.get("unavailable"):
        return
    kind = gpus.get("reason") or "init_failed"
    env = env_of(snap)
    hip = ((snap.get("packages") or {}).get("torch_build") or {}).get("hip") if "packages" in snap else None
    on_bus_nv = {b: f for b, f in (((snap.get("pci") or {}).get("gpus") if "pci" in snap else None) or {}).items()
                 if isinstance(f, dict) and str(f.get("vendor") or "0x10de").lower() == "0x10de"}
    if hip and not on_bus_nv and kind not in ("version_mismatch", "driver_not_loaded"):
        if gpu_versions.rocm_unreachable(snap) is not None:
            return  # GPU038 says why no AMD GPU is reachable: "as expected with AMD GPUs" would be wrong here
        # a ROCm (HIP) build of torch drives AMD GPUs through HIP/RCCL: no NVML is expected, and the NVIDIA
        # checks do not apply (GPU035 judges what RCCL itself warns about)
        yield info(f"torch is a ROCm (HIP {hip}) build: the NVIDIA GPU checks do not apply here",
                   detail=(f"NVML is unavailable ({gpus['unavailable']}), as expected with AMD GPUs: torch.cuda runs "
                           "on HIP and collectives on RCCL. The NVML-based GPU checks were skipped."),
                   fix="nothing to do for NVIDIA; `rocm-smi` lists the AMD GPUs",
                   subjects=[], evidence={"reason": kind, "torch_hip": hip})
        return
    amd = _amd_gpus_torch_builds_for(snap)
    torch_text = str(((snap.get("packages") or {}).get("versions") or {}).get("torch") or "") if "packages" in snap else ""
    if amd and not hip and "+rocm" not in torch_text and not on_bus_nv and kind not in ("version_mismatch", "driver_not_loaded"):
        # AMD GPUs that PyTorch's ROCm wheels target, under a torch that is not a ROCm build: torch.cuda has no
        # device at all (a CUDA build needs the NVIDIA driver, a CPU build has no GPU backend), and training runs
        # on the CPU or fails on .cuda(); torch.version.hip is None on such builds
        pk = snap.get("packages") or {}
        version = (pk.get("versions") or {}).get("torch")
        build = pk.get("torch_build") if isinstance(pk.get("torch_build"), dict) else {}
        kind_of = f"a CUDA {build['cuda']} build" if build.get("cuda") else "not a ROCm build"
        yield warning(f"this machine's GPUs are AMD ({', '.join(sorted({g for g in amd}))}), but torch {version} is "
                      f"{kind_of}: torch.cuda will see no GPU",
                      detail=("The KFD topology lists AMD GPUs of architectures PyTorch's ROCm wheels are built for, and "
                              "no NVIDIA GPU is on the bus. A torch built for CUDA (or the CPU) has torch.version.hip "
                              "None and cannot drive them: torch.cuda.is_available() is False, so a training script "
                              "runs on the CPU or fails on .cuda() / the NCCL backend."),
                      fix="pip install torch --index-url https://download.pytorch.org/whl/rocm6.2   # a ROCm build; "
                          "then python -c 'import torch; print(torch.version.hip, torch.cuda.is_available())'",
                      subjects=["pkg:torch"], evidence={"reason": kind, "torch": version, "torch_build": build or None,
                                                        "amd_gpus": sorted(amd)})
        return
    hints = gpus.get("hints") or {}
    expected = [k for k in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES") if (env.get(k) or "").strip()
                not in ("", "-1", "none", "void", "NoDevFiles")]
    expected += sorted(k for k in env if k.startswith("NCCL_"))[:3]
    if hints.get("dev_nvidia0"):
        expected.append("/dev/nvidia0 exists")
    if hints.get("proc_driver_nvidia"):
        expected.append("/proc/driver/nvidia exists")
    # a CUDA build of torch inside a container: the image was built to run on GPUs, and a container started
    # without `--gpus` (or the NVIDIA Container Toolkit) has neither libnvidia-ml nor /dev/nvidia*
    build = ((snap.get("packages") or {}).get("torch_build") or {}).get("cuda") if "packages" in snap else None
    container = ((snap.get("host") or {}).get("container")) if "host" in snap else None
    if build and container:
        expected.append(f"torch is a CUDA {build} build running in a {container} container")
    # accelerate's default config made for GPUs (`accelerate config` answered multi-GPU/DeepSpeed/FSDP, or named
    # gpu_ids): huggingface/accelerate src/accelerate/commands/config/config_args.py @6a0677cc (ClusterConfig
    # distributed_type, gpu_ids, use_cpu); Akegarasu/lora-scripts#101: accelerate launch on a laptop whose only GPU
    # was an Intel iGPU
    acc = ((((snap.get("host") or {}).get("accelerate_config")) if "host" in snap else None) or {})
    values = acc.get("values") if isinstance(acc, dict) and isinstance(acc.get("values"), dict) else {}
    dist = str(values.get("distributed_type") or "").upper()
    if str(values.get("use_cpu")).lower() != "true" and (
            dist in ("MULTI_GPU", "DEEPSPEED", "FSDP", "MEGATRON_LM") or values.get("gpu_ids") not in (None, "")):
        what = f"distributed_type {dist}" if dist in ("MULTI_GPU", "DEEPSPEED", "FSDP", "MEGATRON_LM") else \
            f"gpu_ids {values.get('gpu_ids')}"
        expected.append(f"accelerate's default config ({acc.get('path') or 'default_config.yaml'}) sets {what}")
    # NVIDIA VGA/3D controllers in sysfs (vendor 0x10de, class 0x0300/0x0302: gather/pci.py): the hardware is there,
    # only the driver's view of it is missing (a container started without --gpus still sees /sys/bus/pci)
    on_bus = on_bus_nv  # NVIDIA's vendor id only: another vendor's GPU says nothing about NVML
    if isinstance(on_bus, dict) and on_bus:
        expected.append(f"{len(on_bus)} NVIDIA GPU(s) on the PCI bus"
                        + (f" seen from a {container} container" if container else ""))
    # the training script read (`check --script`, or the launch command's script) puts work on a CUDA device
    # (lint.scriptfacts `cuda_uses`): without a usable driver it fails there, or, for torch's CPU build, raises
    # "Torch not compiled with CUDA enabled" (pytorch/pytorch#28111: "that code requires cuda")
    uses = script_asks(snap, "cuda_uses")
    # the launch command counts the local GPUs itself and stops when there are none (data/launchers.json
    # launcher_needs_local_gpu: the DeepSpeed runner without a hostfile, `torchrun --nproc-per-node gpu`)
    from ddpdoctor.facts.launch import commands
    from ddpdoctor.facts.launchers import launch_needs_local_gpu

    for cmd in (commands(snap) if "launch" in snap else ()):
        row = launch_needs_local_gpu(cmd, env)
        if row:
            expected.append(f"the {row['launcher']} launcher counts this machine's GPUs and stops with "
                            f"'{row['error']}' when there are none ({row['source']['repo']} {row['source']['path']})")
            break
    if uses:
        expected.append(f"the training script uses CUDA ({uses[0].get('path')}:{uses[0].get('line')} {uses[0].get('what')})")
    # a container launch that asks this host for GPUs (`check -- docker run --gpus all IMAGE ...`, data/containers.json):
    # Docker matches the request to a device driver it registered only when the NVIDIA Container Toolkit's hook is on
    # its PATH; with no NVIDIA driver here the request cannot be met (moby daemon/devices.go, daemon/nvidia_linux.go)
    from ddpdoctor.facts.launch import container_gpu_request

    box = container_gpu_request(snap) if "launch" in snap else None
    evidence = {"reason": kind, "nvml_error": gpus.get("nvml_error"), "gpu_expected_because": expected}
    if box is not None and kind != "version_mismatch":
        row = box.get("row") or {}
        said = f": {row['name'].capitalize()} stops with '{row['unmatched_error']}'" if row.get("unmatched_error") else ""
        yield warning(f"`{box['command']} {box['gpu_request']}` asks this host for NVIDIA GPUs, but it has no usable "
                      f"NVIDIA driver ({gpus['unavailable']}){said}",
                      detail=(f"The launch asks {row.get('name', box['runtime'])} for GPUs ({box['gpu_request']}). The "
                              "container runtime hands GPUs to a container through the NVIDIA Container Toolkit, which "
                              "needs the host's NVIDIA driver (nvidia-smi working on the host); NVML does not answer "
                              "here, so the request cannot be met and the container does not start"
                              + (" (" + ", ".join(expected) + ")" if expected else "")
                              + ". A machine without an NVIDIA GPU (integrated Intel/AMD graphics only) can never meet "
                                "it."),
                      fix=(f"without an NVIDIA GPU: drop {box['gpu_request'].split('=')[0].split()[0]} and run the "
                           "image on the CPU; with one: install the NVIDIA driver (nvidia-smi must work), then the "
                           "NVIDIA Container Toolkit: sudo nvidia-ctk runtime configure --runtime=docker && "
                           "sudo systemctl restart docker"),
                      subjects=[], evidence=dict(evidence, container=box["runtime"], gpu_request=box["gpu_request"],
                                                 sources=[x.get("path") for x in row.get("sources") or ()]))
        return
    if kind == "version_mismatch":
        yield error("the NVIDIA driver's library and kernel module disagree: CUDA will fail too",
                    detail=f"{gpus['unavailable']}. This happens after a driver upgrade without a reboot; "
                           "every CUDA program fails to initialise until the module is reloaded.",
                    fix="sudo reboot   # or: sudo rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && sudo modprobe nvidia",
                    subjects=[], evidence=evidence)
        return
    if kind in ("driver_not_loaded", "no_permission", "no_devices", "count_failed") or expected:
        because = f" ({', '.join(expected)})" if expected else ""
        yield warning(f"GPUs seem expected{because} but NVML is unavailable: {gpus['unavailable']}",
                      detail="Every GPU check was skipped. torch.cuda.is_available() will be False, so a "
                             "training script silently falls back to the CPU (or fails on .cuda()).",
                      fix="nvidia-smi   # must list the GPUs; in docker run with --gpus all; after a driver "
                          "install: sudo modprobe nvidia (or reboot)",
                      subjects=expected[:1] if expected and not expected[0].startswith("/") else [],
                      evidence=evidence)
        return
    yield info(f"no NVIDIA GPU checks: {gpus['unavailable']}",
               detail="Nothing suggests GPUs were expected on this machine, so this is fine for CPU (Gloo) training. "
                      "The GPU checks were skipped with this reason.",
               fix="nothing to do on a CPU-only machine; on a GPU host, install the NVIDIA driver so that `nvidia-smi` works",
               subjects=[], evidence=evidence)


def _libcuda_missing(snap, gpus):
    """NVML answers but the CUDA driver library does not load (GPU001's 'Also')."""
    cuda = snap.get("cuda") if "cuda" in snap else None
    if not isinstance(cuda, dict) or "libcuda" not in str(cuda.get("unavailable") or ""):
        return
    if not devices_of(gpus):
        return
    env = env_of(snap)
    caps = env.get("NVIDIA_DRIVER_CAPABILITIES")
    container = ((snap.get("host") or {}).get("container")) if "host" in snap else None
    words = {w.strip().lower() for w in str(caps or "").split(",") if w.strip()}
    no_compute = caps is not None and not words & {"compute", "all"}
    where = f" in this {container} container" if container else ""
    detail = (f"NVML lists {len(devices_of(gpus))} GPU(s), so the driver is there, but {cuda['unavailable']}. "
              "torch.cuda.is_available() is False ('Found no NVIDIA driver on your system') and training runs on "
              "the CPU or fails on .cuda().")
    if no_compute:
        detail += (f" NVIDIA_DRIVER_CAPABILITIES={caps} lacks 'compute': the NVIDIA Container Toolkit then mounts "
                   "nvidia-smi and NVML but not libcuda (NVIDIA/nvidia-docker#533).")
        fix = ("docker run --gpus all -e NVIDIA_DRIVER_CAPABILITIES=compute,utility ...   # or ENV "
               "NVIDIA_DRIVER_CAPABILITIES compute,utility in the image")
    else:
        fix = ("ldconfig -p | grep libcuda.so.1   # the driver's CUDA library must be on the loader's path; in a "
               "container: -e NVIDIA_DRIVER_CAPABILITIES=compute,utility")
    yield warning(f"NVML sees the GPUs but CUDA has no driver library{where}: libcuda.so.1 does not load",
                  detail=detail, fix=fix,
                  subjects=["NVIDIA_DRIVER_CAPABILITIES"] if no_compute else [],
                  evidence={"cuda": cuda.get("unavailable"), "nvidia_driver_capabilities": caps,
                            "container": container, "gpus": len(devices_of(gpus))})


@check("GPU008", "mig-enabled", family="gpu", needs=("gpus",), catalogue=("B5",))
def mig_enabled(snap):
    """MIG is enabled on a GPU this job uses.

    What it checks
        `nvmlDeviceGetMigMode` of every visible GPU, the MIG devices on it, CUDA_VISIBLE_DEVICES
        and the number of local ranks. Several local ranks reach separate slices only through one
        MIG UUID each; an index, a GPU UUID or no CUDA_VISIBLE_DEVICES at all is an error.

    Why it matters
        A CUDA process enumerates exactly one MIG device, whatever CUDA_VISIBLE_DEVICES lists, so
        several local ranks sharing one environment all land on the same slice, or fail with
        "device >= 0 && device < num_gpus INTERNAL ASSERT FAILED" (pytorch/pytorch#130181). NCCL
        has no P2P between MIG devices and its MIG support is limited (NVIDIA/nccl#431,
        NVIDIA/nccl#1716).

    Example
        torchrun --nproc-per-node 2 train.py on an A100 split into two 3g.40gb instances.

    Fix
        Give each rank its own MIG UUID (`CUDA_VISIBLE_DEVICES=MIG-<uuid>` per rank, from
        `nvidia-smi -L`), or turn MIG off: `sudo nvidia-smi -i N -mig 0` and reset the GPU.
    """
    v = view(snap)
    ranks = local_ranks(snap)
    # Several MIG UUIDs in one CUDA_VISIBLE_DEVICES (one slice of each of several GPUs, as a container
    # runtime hands them out): the process still enumerates one MIG device only, the first.
    migs = [e for e in v.cmap.visible if e.mig_uuid]
    if len(migs) > 1:
        gpus = sorted({e.nvml for e in migs})
        yield error(f"CUDA_VISIBLE_DEVICES lists {len(migs)} MIG devices: a CUDA process enumerates only one of them",
                    detail=(f"MIG devices listed: {', '.join(e.mig_uuid for e in migs)} (on "
                            f"{', '.join(v.short(i) for i in gpus)}). CUDA enumerates a single MIG device per process, "
                            "so this process sees cuda:0 only: a launcher's local ranks 1.. fail with 'invalid device "
                            "ordinal' or all land on the same slice, and NCCL cannot use P2P between MIG devices."),
                    fix="export CUDA_VISIBLE_DEVICES=MIG-<uuid>   # exactly one per process (one per rank); or turn "
                        "MIG off on these GPUs for multi-GPU training",
                    subjects=subjects(gpus, "CUDA_VISIBLE_DEVICES"),
                    evidence={"mig_listed": [e.mig_uuid for e in migs], "local_ranks": ranks,
                              "CUDA_VISIBLE_DEVICES": v.cmap.cvd})
        return
    for dev in v.devices:
        mig = dev.get("mig") or {}
        if mig.get("current") is False and mig.get("pending") is True:
            n = dev["index"]
            yield warning(f"MIG mode is pending on {v.label(n)}: it takes effect only at the next GPU reset, so no MIG "
                          "device exists yet",
                          detail=("nvmlDeviceGetMigMode reports current=disabled, pending=enabled: the mode change "
                                  "(nvidia-smi -mig 1, a MIG manager) waits for a GPU reset. Until then CUDA sees the "
                                  "whole GPU and `nvidia-smi -L` lists no MIG device."),
                          fix=f"sudo nvidia-smi -i {n} -r   # after draining the GPU; or reboot the node",
                          subjects=subjects([n]), evidence={"mig": mig})
            continue
        if not mig.get("current"):
            continue
        n = dev["index"]
        slices = [m for m in dev.get("mig_devices") or []]
        if not slices and dev.get("mig_devices") is not None:
            yield warning(f"MIG is on for {v.label(n)} but no MIG instance exists: CUDA has no device on this GPU",
                          detail=("MIG mode survives a reboot, the GPU and compute instances do not: they must be created "
                                  "again (nvidia-smi mig -cgi ... -C, or a MIG manager) before anything runs here."
                                  + (" A mode change is pending too (current != pending)."
                                     if mig.get("pending") is not None and mig.get("pending") != mig.get("current") else "")),
                          fix=f"sudo nvidia-smi mig -i {n} -cgi <profiles> -C   # or turn MIG off: sudo nvidia-smi -i {n} -mig 0 "
                              f"&& sudo nvidia-smi -i {n} -r",
                          subjects=subjects([n]), evidence={"mig": mig, "mig_devices": []})
            continue
        listed = [e for e in v.cmap.visible if e.nvml == n]
        sizes = ", ".join(f"{m.get('name') or 'MIG'} ({gib(m.get('memory_total_bytes'))})" for m in slices) or "none created"
        evidence = {"mig_devices": [m.get("uuid") for m in slices], "local_ranks": ranks,
                    "CUDA_VISIBLE_DEVICES": v.cmap.cvd, "mig_pending": mig.get("pending")}
        pending = (" MIG mode will change at the next GPU reset (pending differs from current)."
                   if mig.get("pending") is not None and mig.get("pending") != mig.get("current") else "")
        # A rank gets its own slice only through its own MIG UUID. An index or GPU UUID (or nothing) in
        # CUDA_VISIBLE_DEVICES means the whole GPU: every rank of this environment lands on the same first
        # slice, or rank 1 fails with "invalid device ordinal" (no index reaches a second slice).
        by_mig_uuid = v.cmap.cvd is not None and any(e.mig_uuid for e in listed)
        if len(listed) > 1 or (ranks and ranks > 1 and not by_mig_uuid):
            how = (f"CUDA_VISIBLE_DEVICES={v.cmap.cvd} names the GPU, not a slice, so " if v.cmap.cvd is not None
                   else "")
            yield error(f"MIG is on for {v.label(n)}: each process sees only one MIG device",
                        detail=(f"MIG devices: {sizes}. CUDA enumerates a single MIG device per process; {how}"
                                f"the {ranks or len(listed)} ranks sharing this environment do not each get a slice: "
                                "they all use the first one, or set_device(1) fails with 'invalid device ordinal'. "
                                "NCCL cannot use P2P between MIG devices." + pending),
                        fix="export CUDA_VISIBLE_DEVICES=MIG-<uuid>   # one different UUID per rank, from `nvidia-smi -L`; "
                            f"or: sudo nvidia-smi -i {n} -mig 0 && sudo nvidia-smi -i {n} -r",
                        subjects=subjects([n], "CUDA_VISIBLE_DEVICES"), evidence=evidence)
        else:
            yield warning(f"MIG is on for {v.label(n)}: this process gets one slice, not the whole GPU",
                          detail=(f"MIG devices: {sizes}. A process sees exactly one MIG device and its memory; "
                                  "data-parallel training across MIG slices is not supported by NCCL (no P2P, "
                                  "experimental support)." + pending),
                          fix=f"sudo nvidia-smi -i {n} -mig 0 && sudo nvidia-smi -i {n} -r   # whole GPU back; "
                              "or keep MIG for single-process jobs only",
                          subjects=subjects([n]), evidence=evidence)


@check("GPU009", "gpu-memory-errors", family="gpu", needs=("gpus",), catalogue=("B6",))
def gpu_memory_errors(snap):
    """A visible GPU has uncorrectable ECC errors, or retired/remapped memory waiting for a reset.

    What it checks
        `nvmlDeviceGetTotalEccErrors(UNCORRECTED, VOLATILE/AGGREGATE)`,
        `nvmlDeviceGetRetiredPagesPendingStatus` and `nvmlDeviceGetRemappedRows` (pending,
        failure) of every visible GPU. Lifetime-only errors are a note on a GPU that remaps rows
        (Ampere and later), a warning on an older one, which can only retire pages.

    Why it matters
        An uncorrectable error since the last reset kills the CUDA context of whatever runs there
        ("CUDA error: uncorrectable ECC error encountered") and shows up in DDP as one rank dying
        or a NCCL timeout on one node only (huggingface/accelerate#1192,
        jade-hpc-gpu/jade-hpc-gpu.github.io#194, MLI-lab/DeepDeWedge#22). A pending remap only
        takes effect after a GPU reset; a remap failure means the GPU needs service.

    Example
        remapped_rows pending=1 with 1 volatile uncorrectable error on gpu:5 of an 8-GPU node.

    Fix
        Drain the node, then reset the GPU (`sudo nvidia-smi -i N -r`, or reboot). If errors come
        back or a remap failed, take the GPU out of service.
    """
    v = view(snap)
    for dev in v.devices:
        n = dev["index"]
        ecc = dev.get("ecc_errors") or {}
        rows = dev.get("remapped_rows") or {}
        vol, agg = ecc.get("volatile_uncorrected") or 0, ecc.get("aggregate_uncorrected") or 0
        facts, level = [], None
        if vol:
            facts.append(f"{vol} uncorrectable ECC error(s) since the last reset")
            level = "error"
        if rows.get("failure"):
            facts.append("a row remap failed (the GPU is out of spare rows)")
            level = "error"
        if rows.get("pending"):
            facts.append("remapped rows are pending until the GPU is reset")
            level = level or "warning"
        if dev.get("retired_pages_pending"):
            facts.append("retired pages are pending until the GPU is reset")
            level = level or "warning"
        if agg and not vol:
            facts.append(f"{agg} uncorrectable ECC error(s) over the GPU's lifetime")
            # Ampere and later remap the failing row in place (remapped_rows answers); older GPUs only
            # retire the page (dynamic page retirement), and uncorrectable errors that come back after
            # each reset are a failing board (NVIDIA's GPU memory error management guide).
            remaps = isinstance(dev.get("remapped_rows"), dict)
            level = level or ("info" if remaps else "warning")
            if not remaps:
                facts.append("this GPU retires pages but cannot remap rows, so repeated errors mean a failing board")
        if not facts:
            continue
        make = {"error": error, "warning": warning, "info": info}[level]
        yield make(f"{v.label(n)}: " + "; ".join(facts),
                   detail="A job on this GPU can die with 'CUDA error: uncorrectable ECC error encountered', which "
                          "DDP shows as a NCCL timeout on this node only.",
                   fix=f"sudo nvidia-smi -i {n} -r   # after draining the node (or reboot); if errors return, "
                       "take the GPU out of service",
                   subjects=subjects([n]),
                   evidence={"ecc_errors": ecc, "remapped_rows": rows,
                             "retired_pages_pending": dev.get("retired_pages_pending")})


@check("GPU010", "gpu-memory-in-use", family="gpu", needs=("gpus",), catalogue=("B7",))
def gpu_memory_in_use(snap):
    """GPU memory on a visible GPU is already held by processes that are not this job.

    What it checks
        `nvmlDeviceGetComputeRunningProcesses` of every visible GPU, minus this job (this process,
        its ancestors, and processes whose TORCHELASTIC_RUN_ID or SLURM_JOB_ID match ours: the
        sibling ranks), and memory in use that no listed process accounts for (a process in another
        container's PID namespace, or an orphan that still holds /dev/nvidia*).

    Why it matters
        Training starts with "CUDA out of memory" on one rank, or runs slower while another job
        shares the GPU. Orphaned ranks of a previous run and forked DataLoader workers that
        touched CUDA are the usual holders (apache/mxnet#17837, PaddlePaddle/PaddleOCR#2074).

    Example
        A crashed torchrun left rank 3 alive holding 30 GiB on gpu:3.

    Fix
        `nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv`, then stop
        those processes (`kill <pid>`); `sudo fuser -v /dev/nvidia*` also shows holders that NVML
        cannot name.
    """
    v = view(snap)
    for dev in v.devices:
        n = dev["index"]
        procs = [p for p in dev.get("processes") or [] if isinstance(p, dict)]
        foreign = [p for p in procs if not p.get("ours")]
        foreign_bytes = sum(p.get("used_bytes") or 0 for p in foreign)
        mem = dev.get("memory") or {}
        used, total = mem.get("used_bytes"), mem.get("total_bytes")
        listed = sum(p.get("used_bytes") or 0 for p in procs)
        unaccounted = (used - listed) if isinstance(used, int) and "processes" not in (dev.get("errors") or {}) else 0
        if not foreign and unaccounted < GiB:
            continue
        who = ", ".join(f"pid {p.get('pid')} {p.get('name') or '(name hidden)'} {gib(p.get('used_bytes'))}"
                        + ("" if p.get("in_our_proc", True) else " [not in this PID namespace]") for p in foreign[:6])
        parts = []
        if foreign:
            parts.append(f"{len(foreign)} other process(es) hold {gib(foreign_bytes)}: {who}")
        if unaccounted >= GiB:
            parts.append(f"{gib(unaccounted)} is used by processes NVML does not list (another container, or an orphan)")
        yield warning(f"{v.label(n)} is already in use: {gib(used)} of {gib(total)} taken",
                      detail="; ".join(parts) + ". This job may hit CUDA out-of-memory or run slower.",
                      fix="nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv   # then: kill <pid>",
                      subjects=subjects([n]),
                      evidence={"processes": foreign[:16], "used_bytes": used, "total_bytes": total,
                                "unaccounted_bytes": unaccounted})


@check("GPU011", "persistence-mode-off", reads=("host",), family="gpu", needs=("gpus",), catalogue=("B8",))
def persistence_mode_off(snap):
    """Persistence mode is off on visible GPUs (Linux).

    What it checks
        `nvmlDeviceGetPersistenceMode` of every visible GPU; and whether this host, outside a
        container, starts GPU containers through the NVIDIA container runtime (nvidia-container-cli
        or its config file, host.nvidia_container_runtime).

    Why it matters
        Without persistence mode (or nvidia-persistenced), the driver tears the GPU state down
        whenever the last client exits and rebuilds it for the next: every rank's CUDA init and
        every `nvidia-smi` pays up to seconds (arrayfire/arrayfire#2467, dmlc/cxxnet#108,
        NVIDIA/nvidia-docker#1279). Mostly a cost, not a failure. Where GPU containers are started
        it can be a failure: nvidia-container-cli initialises NVML inside an RPC service whose client
        waits 10 s (NVIDIA/libnvidia-container src/rpc.c@658f2dc7 setup_client, CLSET_TIMEOUT;
        src/driver.c@06deb20d driver_init_1_svc calls nvmlInit_v2), and bringing every GPU up from
        cold can take longer (VMs, many GPUs): "nvidia-container-cli: initialization error: driver
        error: timed out" and no container starts (NVIDIA/nvidia-docker#723, Azure N-series VMs).

    Example
        A workstation with 4 GeForce cards and the default driver settings (info); a Docker host
        with the NVIDIA container toolkit and persistence off (warning).

    Fix
        `sudo systemctl enable --now nvidia-persistenced` (or `sudo nvidia-smi -pm 1`).
    """
    v = view(snap)
    host = snap.get("host") or {}
    if "windows" in str(host.get("os", "")).lower():
        return
    off = [d["index"] for d in v.devices if d.get("persistence_mode") is False]
    if not off:
        return
    runtime = host.get("nvidia_container_runtime")
    fix = "sudo systemctl enable --now nvidia-persistenced   # or: sudo nvidia-smi -pm 1"
    if runtime and not host.get("container"):
        yield warning(f"persistence mode is off on {', '.join(v.short(i) for i in off)} of a host that starts GPU "
                      f"containers ({runtime})",
                      detail=("nvidia-container-cli brings the driver up through an RPC service it waits 10 s for "
                              "(libnvidia-container src/rpc.c, driver_init -> nvmlInit_v2); with persistence off every "
                              "container start re-initialises the GPUs from cold, and where that takes longer (VMs, many "
                              "GPUs) the start fails with 'nvidia-container-cli: initialization error: driver error: "
                              "timed out'. Each CUDA initialisation outside containers is slower too."),
                      fix=fix, subjects=subjects(off),
                      evidence={"gpus": off, "nvidia_container_runtime": runtime,
                                "virtualization": host.get("virtualization")})
        return
    yield info(f"persistence mode is off on {', '.join(v.short(i) for i in off)}",
               detail="Each CUDA initialisation (every rank, every run) re-initialises the GPU when no other "
                      "client holds it; expect a slower start.",
               fix=fix, subjects=subjects(off), evidence={"gpus": off})


@check("GPU012", "compute-mode-restricted", family="gpu", needs=("gpus",), catalogue=("B9",))
def compute_mode_restricted(snap):
    """A visible GPU's compute mode forbids the CUDA contexts this job will create.

    What it checks
        `nvmlDeviceGetComputeMode`: PROHIBITED always; EXCLUSIVE_THREAD always (NVML: "Support
        Removed"; torch uses each GPU from several threads); EXCLUSIVE_PROCESS when another process
        already holds the GPU or more local ranks than visible GPUs must share one.

    Why it matters
        The second context on an exclusive GPU fails with "all CUDA-capable devices are busy or
        unavailable" (NVIDIA/DIGITS#2005, pytorch/pytorch#3871, arrayfire/arrayfire#1004); a rank
        that touches cuda:0 before `set_device` is enough to trigger it.

    Example
        Slurm sets EXCLUSIVE_PROCESS and two ranks both initialise CUDA on gpu:0.

    Fix
        One rank per GPU with `torch.cuda.set_device(local_rank)` before any CUDA call; or, as
        admin, `sudo nvidia-smi -i N -c DEFAULT`.
    """
    v = view(snap)
    ranks = local_ranks(snap)
    # one visible GPU under several ranks is per-rank binding (GPU016) unless the machine has only that GPU:
    # then every local rank opens a context on it
    sole = len(v.devices) == 1 and len(devices_of(v.gpus)) == 1
    crowded = bool(ranks and (len(v.devices) > 1 or sole) and ranks > len(v.devices))
    for dev in v.devices:
        n, mode = dev["index"], dev.get("compute_mode")
        others = [p for p in dev.get("processes") or [] if isinstance(p, dict) and not p.get("ours")]
        if mode == "PROHIBITED":
            yield error(f"{v.label(n)} is in compute mode PROHIBITED: no CUDA context may be created on it",
                        detail="Every rank mapped to this GPU fails at its first CUDA call.",
                        fix=f"sudo nvidia-smi -i {n} -c DEFAULT   # or hide it: CUDA_VISIBLE_DEVICES without {n}",
                        subjects=subjects([n]), evidence={"compute_mode": mode})
        elif mode == "EXCLUSIVE_THREAD":
            # nvml.h (nvidia-ml-py's pynvml): NVML_COMPUTEMODE_EXCLUSIVE_THREAD = 1 "Support Removed".
            yield error(f"{v.label(n)} is in compute mode EXCLUSIVE_THREAD: only the thread that created the "
                        "CUDA context may use it",
                        detail="NVML marks this mode 'Support Removed'. torch uses a GPU from several threads of one "
                               "process (autograd's per-device backward threads, the NCCL watchdog, the DataLoader "
                               "pin-memory thread), so the second thread fails ('all CUDA-capable devices are busy or "
                               "unavailable' or 'context is already in use').",
                        fix=f"sudo nvidia-smi -i {n} -c EXCLUSIVE_PROCESS   # or -c DEFAULT; ask the admin",
                        subjects=subjects([n]), evidence={"compute_mode": mode})
        elif mode == "EXCLUSIVE_PROCESS" and (others or crowded):
            why = (f"another process (pid {others[0].get('pid')}) already holds it" if others
                   else f"{ranks} local ranks share {len(v.devices)} GPUs")
            yield error(f"{v.label(n)} is in compute mode {mode} and {why}",
                        detail="Only one CUDA context may exist on it; the next one fails with 'all CUDA-capable "
                               "devices are busy or unavailable'.",
                        fix=f"sudo nvidia-smi -i {n} -c DEFAULT   # or one rank per GPU, with "
                            "torch.cuda.set_device(local_rank) before any CUDA call",
                        subjects=subjects([n]), evidence={"compute_mode": mode, "other_processes": others[:8]})
    # Several local ranks, one exclusive GPU each: it works only if every rank selects its own GPU before its
    # first CUDA call. A rank that touches cuda:0 first (a default device, torch.load without map_location,
    # a tensor made before set_device) takes a context there and the owner of GPU 0 fails.
    exclusive = [d["index"] for d in v.devices if d.get("compute_mode") == "EXCLUSIVE_PROCESS"
                 and not [p for p in d.get("processes") or [] if isinstance(p, dict) and not p.get("ours")]]
    if exclusive and ranks and ranks > 1 and not crowded and len(v.devices) > 1:
        yield warning(f"{ranks} local ranks on GPUs in exclusive compute mode ({', '.join(v.short(i) for i in exclusive)}): "
                      "each rank must select its own GPU before any CUDA call",
                      detail="Only one CUDA context may exist per GPU. If any rank touches cuda:0 before "
                             "torch.cuda.set_device(local_rank) (a model or tensor created first, torch.load without "
                             "map_location, a library's default device), the rank that owns GPU 0 fails with 'all "
                             "CUDA-capable devices are busy or unavailable'.",
                      fix="torch.cuda.set_device(int(os.environ['LOCAL_RANK']))   # first thing in each rank; or "
                          "CUDA_VISIBLE_DEVICES=<one GPU> per rank (srun --gpu-bind=single:1)",
                      subjects=subjects(exclusive, "LOCAL_WORLD_SIZE"),
                      evidence={"compute_mode": {str(i): by for i, by in ((d["index"], d.get("compute_mode"))
                                                                             for d in v.devices)}, "local_ranks": ranks})


HW_SLOWDOWN = ("HwSlowdown", "HwThermalSlowdown", "HwPowerBrakeSlowdown", "SwThermalSlowdown")


@check("GPU018", "clocks-throttled", family="gpu", needs=("gpus",))
def clocks_throttled(snap):
    """A visible GPU's clocks are being held down by a thermal or hardware slowdown right now.

    What it checks
        `nvmlDeviceGetCurrentClocksEventReasons` (formerly ...ThrottleReasons) for HwSlowdown,
        HwThermalSlowdown, HwPowerBrakeSlowdown and SwThermalSlowdown. Idle, application-clock
        and software power-cap reasons are normal and ignored.

    Why it matters
        In synchronous data parallel training every step waits for the slowest rank: one hot or
        power-braked GPU slows the whole job, and it looks like a communication problem.

    Example
        A failed fan makes gpu:2 report HwThermalSlowdown at 89 °C.

    Fix
        Check cooling and power (`nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER`); a persistent
        HW slowdown is a hardware ticket.
    """
    v = view(snap)
    for dev in v.devices:
        names = [r for r in ((dev.get("throttle_reasons") or {}).get("names") or []) if r in HW_SLOWDOWN]
        if names:
            n = dev["index"]
            yield warning(f"{v.label(n)} is slowed down right now: {', '.join(names)}",
                          detail=(f"Temperature {dev.get('temperature_c')} °C, power limit {dev.get('power_limit_w')} W. "
                                  "Every DDP step waits for the slowest rank, so this GPU sets the pace for all."),
                          fix=f"nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER -i {n}   # check cooling and power supply",
                          subjects=subjects([n]), evidence={"throttle_reasons": dev.get("throttle_reasons"),
                                                            "temperature_c": dev.get("temperature_c")})


def _lost_bdf(dev: dict, snap, nvml_bdfs: set) -> tuple:
    """(PCI address, how it is known) of a GPU NVML cannot read: from a "fallen off the bus" Xid, or the
    one NVIDIA GPU on the PCI bus (sysfs, or the driver's /proc list) that no readable NVML device is."""
    xid = snap.get("xid") or {}
    lost_events = [e for e in xid.get("events") or [] if e.get("code") == 79 and e.get("bdf")]
    if len(lost_events) == 1 or len({e["bdf"] for e in lost_events}) == 1:
        return lost_events[-1]["bdf"], "Xid 79 in the kernel log"
    on_bus = set((snap.get("pci") or {}).get("gpus") or {}) | {
        norm_bdf(g.get("bdf")) for g in (snap.get("driver") or {}).get("gpus") or [] if g.get("bdf")}
    unread = sorted(b for b in on_bus if b not in nvml_bdfs)
    if len(unread) == 1:
        return unread[0], "the one NVIDIA GPU on the PCI bus that NVML cannot read"
    return None, None


def unreachable(dev: dict):
    """The one error NVML gives to every call about a GPU it counts but cannot open, else None:
    the gatherer's `unreachable`, or (older snapshots) no name, UUID or PCI address, all three
    failing with the same error that is not "Not Supported"."""
    if dev.get("lost") or dev.get("reset_required"):
        return None
    if isinstance(dev.get("unreachable"), str):
        return dev["unreachable"]
    errors = dev.get("errors") or {}
    keys = ("name", "uuid", "pci_bus_id")
    if any(dev.get(k) for k in keys) or not all(isinstance(errors.get(k), str) for k in keys):
        return None
    reasons = {errors[k] for k in keys}
    return reasons.pop() if len(reasons) == 1 and "Not Supported" not in reasons else None


@check("GPU021", "gpu-lost", reads=("pci", "driver", "xid"), family="gpu", needs=("gpus",), catalogue=("B6",))
def gpu_lost(snap):
    """NVML says a GPU is lost (it fell off the bus, Xid 79), needs a reset, or cannot be reached.

    What it checks
        Every NVML device whose calls answer NVML_ERROR_GPU_IS_LOST ("GPU is lost") or
        NVML_ERROR_RESET_REQUIRED ("GPU requires restart"), and every device NVML counts but cannot
        open at all (every call fails with one error, e.g. "Unknown Error": nvidia-smi's "Unable to
        determine the device handle for GPU..."). The GPU is named by its NVML index and,
        where the facts allow, its PCI address: from a "GPU has fallen off the bus" Xid in the kernel
        log, or as the one NVIDIA GPU on the PCI bus that NVML cannot read.

    Why it matters
        A lost GPU answers nothing: every process on it died, `nvidia-smi` prints "Unable to determine
        the device handle for GPU ...: GPU is lost", and CUDA initialisation can fail for every process
        on the machine, not only the ranks that used it. It is a state of the GPU, not a model: no
        other check should read its unknown name as a second GPU model. Only a reset (or reboot)
        brings it back; a repeat is hardware (power, thermals, the riser or the board).

    Example
        gpu:3 of 8 answers "GPU is lost" after `NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus`.

    Fix
        Drain the node, then `sudo nvidia-smi -r -i N` or reboot; `sudo dmesg | grep -i xid` for the
        history; if it happens again, open a hardware ticket for that slot.
    """
    gpus = snap.get("gpus") or {}
    machine = devices_of(gpus)
    bad = [d for d in machine if d.get("lost") or d.get("reset_required") or unreachable(d)]
    if not bad:
        return
    v = view(snap)
    visible = set(v.cmap.nvml_indices)
    nvml_bdfs = {norm_bdf(d.get("pci_bus_id")) for d in machine if d.get("pci_bus_id")}
    for dev in bad:
        n = dev["index"]
        bdf, how = _lost_bdf(dev, snap, nvml_bdfs)
        where = f"gpu:{n}" + (f" (PCI {bdf}, from {how})" if bdf else "")
        cut_off = unreachable(dev) if not (dev.get("lost") or dev.get("reset_required")) else None
        state = ("lost (fallen off the bus)" if dev.get("lost") else "in need of a reset" if dev.get("reset_required")
                 else "unreachable")
        answer = "GPU is lost" if dev.get("lost") else "GPU requires restart" if dev.get("reset_required") else cut_off
        make = error if n in visible or not v.cmap.visible else warning
        yield make(f"{where} is {state}: NVML answers \"{answer}\"" + (" to every call" if cut_off else ""),
                   detail=(("NVML counts this GPU but cannot open it (nvidia-smi: \"Unable to determine the device "
                            f"handle for GPU...: {cut_off}\"): the board or its PCIe link is failing; the kernel log "
                            "usually has PCIe AER errors or an Xid for it. " if cut_off else "")
                           + "Every call about this GPU fails, so its model, memory and links are unknown (not a "
                           "second model). Processes on it died or hang; CUDA initialisation may fail on this machine "
                           "until it is reset." + ("" if n in visible else " This job's CUDA_VISIBLE_DEVICES does not "
                                                   "include it, but the node is not healthy.")),
                   fix=f"sudo nvidia-smi -r -i {n}   # after draining the node, or reboot; then `sudo dmesg | grep -i xid`; "
                       "if it repeats, a hardware ticket for that slot",
                   subjects=subjects([n], f"path:/sys/bus/pci/devices/{bdf}" if bdf else ""),
                   evidence={"nvml_index": n, "pci_bus_id": bdf, "pci_from": how,
                             "errors": sorted(set((dev.get("errors") or {}).values()))})


@check("GPU022", "gpu-xid-errors", family="gpu", needs=("gpus", "xid"), catalogue=("B6",))
def gpu_xid_errors(snap):
    """The NVIDIA driver logged hardware Xid errors since boot (the kernel log).

    What it checks
        The driver's "NVRM: Xid (PCI:...): <code>" lines in the kernel log, classified by the Xid
        catalogue mined from the driver's own list of codes (nverror.h): GPU lost, uncorrectable or
        contained memory errors, memory retirement, NVLink and firmware errors. Application faults
        (Xid 13, 31, 43: a program's illegal memory access) are the program's, not the machine's,
        and are not reported. A GPU GPU021 already reports as lost is not reported twice.

    Why it matters
        These errors kill the processes on the GPU or leave it degraded until a reset; a job
        restarted on the same node fails again, and in DDP it shows up as one rank dying or a NCCL
        timeout on this node only.

    Example
        `NVRM: Xid (PCI:0000:10:1c): 48, ... An uncorrectable double bit error` two hours ago.

    Fix
        Drain the node and reset the GPU (`sudo nvidia-smi -r -i N`), or reboot; repeated errors on
        one GPU are a hardware ticket. `sudo dmesg -T | grep -i xid` shows the full history.
    """
    from ddpdoctor.facts import xid as xidcat

    events = [e for e in (snap.get("xid") or {}).get("events") or [] if isinstance(e.get("code"), int)]
    hw = [dict(e, cls=xidcat.class_of(e["code"])) for e in events]
    hw = [e for e in hw if e["cls"] in xidcat.HARDWARE]
    if not hw:
        return
    machine = devices_of(snap.get("gpus") or {})
    by_bdf = {norm_bdf(d.get("pci_bus_id")): d["index"] for d in machine if d.get("pci_bus_id")}
    lost_bdfs = set()
    if any(d.get("lost") for d in machine):
        lost_bdfs = {e["bdf"] for e in hw if e["code"] == 79}
    groups: dict = {}
    for e in hw:
        if e["bdf"] in lost_bdfs:
            continue  # GPU021's finding
        groups.setdefault((e["bdf"], e["cls"]), []).append(e)
    for (bdf, cls), evs in sorted(groups.items()):
        n = by_bdf.get(bdf)
        codes = sorted({e["code"] for e in evs})
        last = evs[-1]
        age = last.get("age_s")
        when = f"{age / 3600:.1f} h ago" if isinstance(age, (int, float)) else "since boot"
        entry = xidcat.entry(last["code"]) or {}
        severe = cls in ("gpu-lost", "memory-uncorrectable", "firmware")
        make = error if severe else warning
        who = f"gpu:{n} (PCI {bdf})" if n is not None else f"the GPU at PCI {bdf}"
        yield make(f"{who}: Xid {', '.join(map(str, codes))} ({cls.replace('-', ' ')}), {len(evs)} event(s), the last {when}",
                   detail=f"{entry.get('meaning', '')} Last: \"{last.get('text')}\".",
                   fix=str(entry.get("fix", "sudo nvidia-smi -r -i <gpu>")).replace("<gpu>", str(n) if n is not None else bdf),
                   subjects=subjects([n] if n is not None else [], f"path:/sys/bus/pci/devices/{bdf}"),
                   evidence={"codes": codes, "class": cls, "events": evs[-8:], "pci_bus_id": bdf})


def _amd_gpus_torch_builds_for(snap) -> list:
    """The ISAs (gfx names) of this machine's AMD GPUs that PyTorch's ROCm wheels are built for (GPU036's table),
    when torch is installed; [] otherwise (an APU's or an unlisted target gets no verdict)."""
    from ddpdoctor.checks.gpu.driver import listed_amd_gpus  # noqa: PLC0415

    pk = (snap.get("packages") or {}) if "packages" in snap else {}
    if not (pk.get("versions") or {}).get("torch"):
        return []
    return [str(gfx) for _node, gfx, _since in listed_amd_gpus(snap)]


@check("GPU038", "rocm-gpu-unreachable", family="gpu", needs=("packages",), reads=("gpus", "pci", "host"))
def rocm_gpu_unreachable(snap):
    """A ROCm build of torch on a host or container where it can open no AMD GPU.

    What it checks
        With torch built for ROCm (torch.version.hip set), the device files ROCm's HSA thunk opens
        read-write before HIP lists any GPU: /dev/kfd (hsaKmtOpenKFD, ROCm/ROCR-Runtime
        libhsakmt/src/openclose.c) and the GPUs' render nodes /dev/dri/renderD* (libhsakmt fmm.c):
        missing, or present but not openable by this user; and whether the amdgpu kernel driver is
        loaded and its KFD topology (sysfs, which a container sees too) lists AMD GPUs. Sources in
        data/gpu_versions.json, table rocm_device_files.

    Why it matters
        Without them HIP counts no device, so torch.cuda.is_available() is False (is_available is
        device count > 0): the script trains on the CPU without a word or fails on .cuda() and the
        NCCL (RCCL) backend. A container started without `--device=/dev/kfd --device=/dev/dri` (the
        ROCm docs' docker options) has the driver's sysfs topology but no device file; a user outside
        the render/video groups gets "Unable to open /dev/kfd read-write: Permission denied"
        (ROCm/ROCm-docker#116); a host without the amdgpu driver has neither.

    Example
        `docker run rocm/pytorch python train.py` on a host with MI250s, without the --device options.

    Fix
        docker run --device=/dev/kfd --device=/dev/dri --group-add video --group-add render ...; on a
        host: sudo usermod -aG render,video $USER (then log in again); without the driver: install
        amdgpu-dkms (ROCm's install guide) or use a CUDA/CPU build of torch on this machine.
    """
    why = gpu_versions.rocm_unreachable(snap)
    if why is None:
        return
    host = (snap.get("host") or {}) if "host" in snap else {}
    container = host.get("container")
    docker = gpu_versions.rocm_docker_options()
    groups = gpu_versions.rocm_groups()
    seen_gpus = why["kfd_topology"]
    files = ", ".join(why["missing"] + why["denied"])
    if why["missing"] and not why["driver"] and not seen_gpus and not container:
        title = f"torch is a ROCm (HIP {why['hip']}) build, but this host has no amdgpu driver and no AMD GPU device"
        detail = ("No /sys/module/amdgpu, no KFD topology and no " + files + ": HIP will count no device, so "
                  "torch.cuda.is_available() is False and training runs on the CPU or fails on .cuda(). Either the "
                  "amdgpu kernel driver is not installed or loaded, or this machine has no AMD GPU (a guess between "
                  "the two: nothing recorded tells them apart).")
        fix = "sudo modprobe amdgpu   # or install amdgpu-dkms (ROCm's install guide); on a machine without AMD GPUs, " \
              "install torch's CUDA or CPU build instead"
    elif why["missing"]:
        where = f"this {container} container" if container else "this machine"
        driver = (f"the host's amdgpu driver lists {len(seen_gpus)} AMD GPU(s) ({', '.join(sorted(set(seen_gpus)))}) "
                  "in sysfs" if seen_gpus else "the amdgpu driver is loaded" if why["driver"] else
                  "a container shares the host's kernel driver")
        title = f"torch is a ROCm (HIP {why['hip']}) build, but {', '.join(why['missing'])} is missing in {where}"
        detail = (f"{driver.capitalize()}, but {', '.join(why['missing'])} is not there: HIP opens /dev/kfd and each "
                  "GPU's render node read-write before it counts a device, so torch.cuda.is_available() is False. A "
                  f"container needs `{docker}` (ROCm docs, 'Accessing GPUs in containers').")
        fix = f"docker run {docker} " + " ".join(f"--group-add {g}" for g in groups) + " IMAGE ...   # expose the " \
              "AMD GPUs to the container"
    else:
        title = f"torch is a ROCm (HIP {why['hip']}) build, but this user cannot open {files} read-write"
        detail = (f"{files} exist{'s' if len(why['denied']) == 1 else ''} but the user is not allowed to open "
                  f"{'it' if len(why['denied']) == 1 else 'them'} read-write; they belong to group "
                  f"{' or '.join(groups)}. HIP then counts no device (\"Unable to open /dev/kfd read-write: "
                  "Permission denied\" in rocminfo), so torch.cuda.is_available() is False.")
        fix = (f"sudo usermod -aG {','.join(groups)} $USER   # then log in again; in a container: "
               + " ".join(f"--group-add {g}" for g in groups))
    yield warning(title, detail=detail, fix=fix,
                  subjects=["pkg:torch"] + [f"path:{f}" for f in why["missing"] + why["denied"]],
                  evidence={"torch_hip": why["hip"], "missing": why["missing"], "not_openable": why["denied"],
                            "amdgpu_module": why["driver"], "kfd_topology_gpus": seen_gpus,
                            "container": container})
