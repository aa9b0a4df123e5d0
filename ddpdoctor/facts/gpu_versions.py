"""Version tables the GPU and package checks judge against (ddpdoctor/data/gpu_versions.json): the oldest driver of
each CUDA major, the newest architecture of each CUDA toolkit, the architectures of PyTorch's CUDA wheels, the first
ROCm release of PyTorch's wheels per AMD target, the first NCCL per GPU major, and torch.distributed on Windows. Every
row carries its source (repo, path, commit; or a vendor document's URL). Loaded once; pure lookups."""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Dict, Optional, Tuple

from ddpdoctor.facts.gpu import version_tuple

DATA = Path(__file__).resolve().parent.parent / "data" / "gpu_versions.json"


@functools.lru_cache(maxsize=1)
def tables() -> dict:
    with open(DATA, encoding="utf-8") as fh:
        return json.load(fh)["tables"]


def rows(name: str) -> tuple:
    return tuple(tables()[name]["rows"])


@functools.lru_cache(maxsize=1)
def min_driver_of_cuda_major() -> Dict[int, str]:
    """{CUDA major: the oldest driver that runs a build of any minor of it}."""
    return {r["cuda_major"]: r["driver"] for r in rows("min_driver_of_cuda_major")}


@functools.lru_cache(maxsize=1)
def newest_arch_of_toolkit() -> Tuple[Tuple[int, int, int], ...]:
    """((major, minor, newest sm_XY as XY), ...), newest toolkit first."""
    out = [version_tuple(r["cuda"])[:2] + (r["arch"],) for r in rows("newest_arch_of_toolkit")]
    return tuple(sorted(out, reverse=True))


def newest_arch(cuda: tuple) -> Optional[int]:
    """The newest sm_XY (as XY) a CUDA toolkit of this version can build kernels for; None if unknown (pre-10)."""
    for major, minor, arch in newest_arch_of_toolkit():
        if tuple(cuda[:2]) >= (major, minor):
            return arch
    return None


@functools.lru_cache(maxsize=1)
def last_toolkit_of_arch() -> Dict[int, Tuple[int, int]]:
    """{sm_XY as XY: (major, minor) of the last CUDA toolkit that compiles code for it}; architectures absent are
    still compiled by the newest toolkits."""
    return {a: version_tuple(r["last_cuda"])[:2] for r in rows("last_toolkit_of_arch") for a in r["archs"]}


def dropped_by_toolkit(cuda: tuple, capability: int) -> Optional[Tuple[int, int]]:
    """The last CUDA toolkit that built code for a GPU of this capability (XY) when `cuda` is newer than it: no
    build of that CUDA carries a cubin or PTX such a GPU runs (a cubin runs on its own major only, PTX on newer GPUs
    only); None when the toolkit still builds for it, or either is unknown."""
    last = last_toolkit_of_arch().get(capability)
    if last is None or len(tuple(cuda)) < 2:
        return None
    return last if tuple(cuda[:2]) > last else None


def rocm_release_distance(a, b) -> Optional[int]:
    """How many ROCm releases (major.minor, in the order of rocm_user_kernel_window's list) lie between two ROCm
    versions ('5.4.22803', '5.7.2-19'); None when either is not in the list."""
    row = rows("rocm_user_kernel_window")[0]
    order = [version_tuple(r)[:2] for r in row["releases"]]
    x, y = version_tuple(str(a or ""))[:2], version_tuple(str(b or ""))[:2]
    if x not in order or y not in order:
        return None
    return abs(order.index(x) - order.index(y))


def rocm_user_kernel_window() -> int:
    return int(rows("rocm_user_kernel_window")[0]["window"])


def _release_rows(torch: Optional[str]) -> list:
    """release_archs rows that describe the wheels of `torch`: a row with `torch_first` / `torch_last` holds only for
    the releases between them (an unknown torch release takes none of those rows)."""
    t = release(torch)
    out = []
    for r in rows("release_archs"):
        if (r.get("torch_first") or r.get("torch_last")) and not t:
            continue
        if r.get("torch_first") and t < release(r["torch_first"]) or r.get("torch_last") and t > release(r["torch_last"]):
            continue
        out.append(r)
    return out


@functools.lru_cache(maxsize=64)
def release_archs(torch: Optional[str] = None) -> Dict[Tuple[int, int], Dict[str, frozenset]]:
    """{(CUDA major, minor): {platform: the sm_XY (as XY) of PyTorch's own wheels}} for the wheels of `torch`
    (_release_rows)."""
    out: Dict[Tuple[int, int], Dict[str, frozenset]] = {}
    for r in _release_rows(torch):
        out.setdefault(version_tuple(r["cuda"])[:2], {})[r["platform"]] = frozenset(r["archs"])
    return out


@functools.lru_cache(maxsize=64)
def release_ptx(torch: Optional[str] = None) -> Dict[Tuple[int, int], Dict[str, frozenset]]:
    """{(CUDA major, minor): {platform: the compute_XY whose PTX those wheels carry}}, where a row records it (`ptx`);
    a row without it says nothing of PTX (empty)."""
    out: Dict[Tuple[int, int], Dict[str, frozenset]] = {}
    for r in _release_rows(torch):
        out.setdefault(version_tuple(r["cuda"])[:2], {})[r["platform"]] = frozenset(r.get("ptx") or ())
    return out


@functools.lru_cache(maxsize=1)
def rocm_wheel_target_since() -> Dict[str, Tuple[int, int]]:
    """{gfx target: (ROCm major, minor) of the first PyTorch wheels with it; (0, 0) = every ROCm build}."""
    return {r["gfx"]: version_tuple(r["rocm"])[:2] for r in rows("rocm_wheel_target_since")}


@functools.lru_cache(maxsize=1)
def rocm_wheel_targets_ever() -> frozenset:
    """Every AMD target PyTorch's own ROCm wheels have carried: rocm_wheel_target_since's rows (the pytorch/builder
    era) and the current build script's PYTORCH_ROCM_ARCH (rocm_wheel_targets_current)."""
    out = set(rocm_wheel_target_since())
    for r in rows("rocm_wheel_targets_current"):
        out.update(r["targets"])
    return frozenset(out)


@functools.lru_cache(maxsize=1)
def rocm_wheel_target_torch() -> Dict[str, dict]:
    """{gfx target: its rocm_wheel_target_torch row}: targets PyTorch's own ROCm wheels gained after the builds moved
    to pytorch/pytorch's .ci, with the first torch release and nightly date that carry them."""
    return {r["gfx"]: r for r in rows("rocm_wheel_target_torch")}


def torch_wheel_carries_gfx(torch_version: str, hip: str, gfx: str) -> Optional[str]:
    """Whether PyTorch's own ROCm wheel `torch_version` (e.g. '2.9.1+rocm6.4', '2.10.0.dev20250929+rocm7.0') carries
    `gfx`, by rocm_wheel_target_torch: 'yes', 'no', 'unknown' (a nightly of the first release before the date every
    ROCm nightly got it, of a ROCm release that may have had it earlier); None when the target is not in the table or
    the version is not one of PyTorch's own wheels (AMD's carry a local version of their own)."""
    import re

    row = rocm_wheel_target_torch().get(str(gfx or ""))
    m = re.fullmatch(r"(\d+)\.(\d+)\.\d+(?:\.dev(\d{8}))?\+rocm\d+\.\d+(?:\.\d+)?", str(torch_version or ""))
    if row is None or not m:
        return None
    release, date = (int(m.group(1)), int(m.group(2))), m.group(3)
    first = version_tuple(row["torch"])[:2]
    if release > first or (release == first and date is None) or (date and date >= row["nightly"]):
        return "yes"
    if release < first or date is None:
        return "no"
    if row.get("rocm_from") and version_tuple(hip)[:2] >= version_tuple(row["rocm_from"])[:2]:
        if row.get("rocm_nightly") and date >= row["rocm_nightly"]:
            return "yes"
        return "no" if row.get("rocm_nightly") else "unknown"
    return "no"


@functools.lru_cache(maxsize=1)
def torch_bundled_cudnn() -> Dict[Tuple[str, str], str]:
    """{(torch major.minor, CUDA major.minor): the cuDNN a download.pytorch.org '+cu' wheel of it carries in
    torch/lib} (torch_bundled_cudnn: pytorch/builder's install_cuda.sh per CUDA version)."""
    return {(t, r["cuda"]): r["cudnn"] for r in rows("torch_bundled_cudnn") for t in r["torch"]}


def conda_build_cudnn(builds) -> Optional[str]:
    """The cuDNN a pytorch-channel conda build of torch was built with, from its build string (conda_torch_build_string:
    py3.9_cuda11.3_cudnn8.2.0_0 -> '8.2.0'); None when no build string names one (a CPU or conda-forge build)."""
    import re

    for pattern in (r["pattern"] for r in rows("conda_torch_build_string")):
        for b in builds or ():
            m = re.search(pattern, str(b))
            if m:
                return m.group("cudnn")
    return None


def gfx_parts(gfx: str) -> Optional[Tuple[int, int, int]]:
    """(major, minor, stepping) of a target name as LLVM's AMDGPU names spell it: gfx90c -> (9, 0, 12),
    gfx1032 -> (10, 3, 2); the last two characters are the minor and the stepping, hexadecimal. None otherwise."""
    import re

    m = re.fullmatch(r"gfx(\d{1,2})([0-9a-f])([0-9a-f])", str(gfx or "").lower())
    return (int(m.group(1)), int(m.group(2), 16), int(m.group(3), 16)) if m else None


def override_for(gfx: str) -> Optional[str]:
    """The HSA_OVERRIDE_GFX_VERSION value ("10.3.0") naming the stepping-0 target of the same major and minor as
    `gfx` when PyTorch's wheels carry that one (gfx1032 -> gfx1030, gfx90c -> gfx900); None when they carry none of
    its generation (gfx803). ROCm's runtime takes the override as major.minor.stepping (ROCm/ROCR-Runtime reads
    HSA_OVERRIDE_GFX_VERSION); running one target's code on another is AMD's unsupported workaround."""
    parts = gfx_parts(gfx)
    if parts is None:
        return None
    major, minor, _ = parts
    return f"{major}.{minor}.0" if f"gfx{major}{minor:x}0" in rocm_wheel_targets_ever() else None


@functools.lru_cache(maxsize=1)
def nccl_first_for_gpu_major() -> Dict[int, Tuple[int, ...]]:
    """{GPU major architecture: the first NCCL release (major, minor, patch) whose default build compiles for it}."""
    return {r["gpu_major"]: version_tuple(r["nccl"])[:3] for r in rows("nccl_first_for_gpu_major")}


def windows_distributed_since() -> Tuple[int, ...]:
    """The first torch (major, minor) whose Windows wheels have torch.distributed."""
    return version_tuple(rows("windows_distributed_since")[0]["torch"])[:2]


def release(version) -> tuple:
    """(major, minor, patch) of a package version with any local part dropped ('1.7.0+cu101' -> (1, 7, 0),
    '2.1.0a0+git' -> (2, 1, 0), ' 2.1.0 ' -> (2, 1, 0)); () when it has none. The one release parser of the checks
    (checks.pkg used its own copy that stripped blanks where this did not); facts.gpu.version_tuple reads the digits."""
    return version_tuple(str(version or "").strip().split("+")[0])[:3]


def runs_on(sass, ptx, capability: int) -> bool:
    """Whether CUDA code compiled for the cubin architectures `sass` and the PTX architectures `ptx` (sm_XY as XY)
    runs on a GPU of compute capability `capability` (XY): a cubin for X.y runs on X.z with z >= y, never on another
    major; PTX for X.Y is compiled by the driver for any capability >= X.Y (NVIDIA CUDA C++ Programming Guide,
    "Binary Compatibility" and "PTX Compatibility": https://docs.nvidia.com/cuda/cuda-c-programming-guide/
    index.html#binary-compatibility). Otherwise: "no kernel image is available for execution on the device"."""
    return (any(a // 10 == capability // 10 and a <= capability for a in sass or ())
            or any(a <= capability for a in ptx or ()))


def _cap_key(cap) -> Optional[Tuple[int, int]]:
    try:
        major, minor = (int(x) for x in cap)
    except (TypeError, ValueError):
        return None
    return major, minor


@functools.lru_cache(maxsize=1)
def _fp16_rows() -> Dict[Tuple[int, int], dict]:
    out = {}
    for r in rows("fp16_throughput"):
        for cap in r["capabilities"]:
            out[tuple(int(x) for x in cap.split("."))] = r
    return out


def tensor_cores(cap) -> Optional[bool]:
    """Whether a GPU of compute capability `cap` ((major, minor)) has tensor cores; None when `cap` is not read."""
    key = _cap_key(cap)
    if key is None:
        return None
    since = tuple(int(x) for x in rows("tensor_cores_since")[0]["capability"].split("."))
    return key >= since


def fp16_without_speedup(cap) -> Optional[dict]:
    """{fp16, fp32, source} when a GPU of compute capability `cap` has no tensor cores and its native fp16 arithmetic
    is absent (fp16 None) or slower than its fp32 (the guide's throughput table): fp16 mixed precision buys nothing
    there and its casts cost time. None for GPUs with tensor cores, with fast fp16 (5.3, 6.0, 6.2), or not in the
    table."""
    key = _cap_key(cap)
    if key is None or tensor_cores(key):
        return None
    row = _fp16_rows().get(key)
    if row is None or (row["fp16"] is not None and row["fp16"] >= row["fp32"]):
        return None
    return {"fp16": row["fp16"], "fp32": row["fp32"], "source": row["source"]}


def rocm_docker_options() -> str:
    """The `docker run` options the ROCm documentation gives a container to reach the host's AMD GPUs."""
    return next(r["docker"] for r in rows("rocm_device_files") if r.get("docker"))


def rocm_groups() -> Tuple[str, ...]:
    """The groups that own /dev/kfd and the render nodes (render; video on older distributions)."""
    return tuple(next(r["groups"] for r in rows("rocm_device_files") if r.get("groups") and not r.get("docker")))


# NVML's "absent" kinds (gather/nvml.py NvmlUnavailable): no libnvidia-ml on the machine, or no Python binding to load
# it. Every other kind (driver_not_loaded, no_permission, version_mismatch, init_failed) means an NVIDIA driver is
# installed, and its failure is what the user must hear about.
NVML_ABSENT = ("library_not_found", "no_binding")


def rocm_unreachable(snap) -> Optional[dict]:
    """Why a ROCm (HIP) build of torch can reach no AMD GPU here, from the device files its HSA thunk opens read-write
    (rocm_device_files: /dev/kfd, /dev/dri/renderD*), or None: not a ROCm build, not recorded (the gpus section's
    hints are written when NVML is unusable, as it is beside AMD GPUs), or every file there and openable.
    {"missing": [...], "denied": [...], "driver": amdgpu module loaded, "kfd_topology": AMD GPUs the sysfs lists}."""
    pk = (snap.get("packages") or {}) if "packages" in snap else {}
    build = pk.get("torch_build") if isinstance(pk.get("torch_build"), dict) else {}
    if not build.get("hip"):
        return None
    host = (snap.get("host") or {}) if "host" in snap else {}
    if host.get("os") and str(host.get("os")).lower() != "linux":
        return None  # /dev/kfd and the DRM render nodes are Linux's; ROCm on Windows reaches GPUs otherwise
    gpus = (snap.get("gpus") or {}) if "gpus" in snap else {}
    hints = gpus.get("hints") if isinstance(gpus, dict) else None
    if not isinstance(hints, dict) or "dev_kfd" not in hints:
        return None
    if gpus.get("reason") not in NVML_ABSENT or hints.get("dev_nvidia0") or hints.get("proc_driver_nvidia"):
        return None  # NVML is there but failed (an NVIDIA driver is installed): the NVIDIA side is the story, not ROCm's
    pci = (snap.get("pci") or {}) if "pci" in snap else {}
    if any(isinstance(f, dict) and str(f.get("vendor") or "0x10de").lower() == "0x10de"
           for f in (pci.get("gpus") or {}).values()):
        return None  # NVIDIA GPUs on the bus: a ROCm build is the wrong build here, which GPU038's advice would hide
    missing, denied = [], []
    for name, present, rw in (("/dev/kfd", "dev_kfd", "dev_kfd_rw"), ("/dev/dri/renderD*", "dev_dri_render",
                                                                      "dev_dri_render_rw")):
        if not hints.get(present):
            missing.append(name)
        elif hints.get(rw) is False:
            denied.append(name)
    if not missing and not denied:
        return None
    topology = [str(g.get("gfx")) for g in (pci.get("amd_gpus") or []) if isinstance(g, dict)]
    return {"missing": missing, "denied": denied, "driver": bool(hints.get("amdgpu_module")),
            "kfd_topology": topology, "hip": build.get("hip")}


def consumer_p2p_defects() -> Tuple[dict, ...]:
    """The consumer GPU families whose older drivers report P2P that hangs NCCL ({name_contains, driver_fixed, ...})."""
    return tuple(r for r in rows("consumer_p2p") if r.get("name_contains"))


def nccl_disables_unreported_p2p() -> dict:
    """The row saying NCCL itself turns P2P off where NVML reports it not OK (its source and effect)."""
    return next(r for r in rows("consumer_p2p") if r.get("nvml_not_ok"))


@functools.lru_cache(maxsize=1)
def runtime_builders() -> tuple:
    """data/runtime_builds.json: the libraries that compile their CUDA kernels with torch.utils.cpp_extension at first
    use, each with its source (PKG014's 'something compiles at run time')."""
    with open(DATA.parent / "runtime_builds.json", encoding="utf-8") as fh:
        return tuple(json.load(fh)["packages"])


@functools.lru_cache(maxsize=1)
def _deepspeed_cuda_rows() -> tuple:
    with open(DATA.parent / "deepspeed_cuda_check.json", encoding="utf-8") as fh:
        return tuple(json.load(fh)["rows"])


def deepspeed_cuda_rule(deepspeed_version) -> Optional[dict]:
    """The row of data/deepspeed_cuda_check.json that holds for this DeepSpeed release (its op builder's
    assert_no_cuda_mismatch rule), or None before the check existed / for an unreadable version."""
    have = release(deepspeed_version)
    if not have:
        return None
    out = None
    for row in _deepspeed_cuda_rows():
        if release(row["deepspeed_from"]) <= have:
            out = row
    return out


def deepspeed_refuses(row: dict, toolkit: tuple, torch_cuda: tuple) -> bool:
    """Whether that DeepSpeed rule refuses a toolkit of (major, minor) under torch built for (major, minor)."""
    sys_v, torch_v = f"{toolkit[0]}.{toolkit[1]}", f"{torch_cuda[0]}.{torch_cuda[1]}"
    if sys_v == torch_v:
        return False
    ok = row["minor_mismatch_ok"].get(str(toolkit[0])) or []
    if sys_v in ok and torch_v in ok:
        return False
    return not any(p["toolkit"] == sys_v and p["torch"] == torch_v for p in row["accepted_pairs"])


@functools.lru_cache(maxsize=1)
def _nvcc_host_compiler_table() -> dict:
    with open(DATA.parent / "nvcc_host_compilers.json", encoding="utf-8") as fh:
        return json.load(fh)


def nvcc_gcc_max(toolkit_version) -> Optional[int]:
    """The newest GCC major this CUDA toolkit's nvcc accepts (crt/host_config.h's `#error -- unsupported GNU version!
    gcc versions later than N are not supported!`; data/nvcc_host_compilers.json), or None where not judged (before
    the first row, after last_judged, a release in not_judged, an unreadable version)."""
    have = version_tuple(str(toolkit_version or ""))
    if len(have) < 2:
        return None
    table = _nvcc_host_compiler_table()
    mm = tuple(have[:2])
    if f"{mm[0]}.{mm[1]}" in table.get("not_judged", ()) or mm > version_tuple(table["last_judged"])[:2]:
        return None
    best = None
    for row in table["rows"]:
        if version_tuple(row["cuda"])[:2] <= mm:
            best = row
    return None if best is None else int(best["gcc_max"])


def setup_build_commands() -> tuple:
    """data/runtime_builds.json setup_commands: the setuptools commands that run build_ext (PKG014's builders)."""
    with open(DATA.parent / "runtime_builds.json", encoding="utf-8") as fh:
        return tuple(json.load(fh).get("setup_commands", {}).get("commands") or ())


def _arch_key(entry: str) -> str:
    """'9.0+PTX' -> '9.0', ' 8.6 ' -> '8.6' (TORCH_CUDA_ARCH_LIST entries as cpp_extension validates them)."""
    return str(entry).strip().split("+")[0]


def cpp_extension_arch_since() -> Dict[str, Tuple[int, ...]]:
    """{arch as cpp_extension spells it ('8.9', '9.0a'): the first torch (major, minor) whose supported_arches has it}
    (data/gpu_versions.json cpp_extension_arch_since); an arch absent is not judged."""
    return {r["arch"]: version_tuple(r["torch"])[:2] for r in rows("cpp_extension_arch_since")}


def cpp_extension_named_arches(torch_version=None) -> Tuple[Tuple[str, str], ...]:
    """The named architectures cpp_extension expands before validating (its named_arches), in its order; with a torch
    version, a name whose expansion changed later (named_arches_before: 'Blackwell' was '10.0+PTX' before 2.7) takes
    the value that release had."""
    table = tables()["cpp_extension_arch_since"]
    have = release(torch_version)[:2] if torch_version is not None else ()
    before = {k: v for k, v in (table.get("named_arches_before") or {}).items() if isinstance(v, list)}
    out = []
    for name, value in table["named_arches"]:
        if have and name in before and have < version_tuple(before[name][0])[:2]:
            value = before[name][1]
        out.append((name, value))
    return tuple(out)


def cpp_extension_rejects(torch_version, arch_list: Optional[str], capabilities) -> list:
    """The architectures torch.utils.cpp_extension of this torch release refuses with "ValueError: Unknown CUDA arch
    (X) or GPU not supported" (_get_cuda_arch_flags): TORCH_CUDA_ARCH_LIST's entries when it is set (split on ' ' and
    ';', named arches expanded, '+PTX' kept in the message), else each GPU capability ((major, minor)) when this
    release does not clamp it (no_clamp_through); releases before validated_from are not judged. [(entry as written
    after expansion, first torch that knows it)]; only architectures with a row are judged, so [] also means 'not
    known'."""
    have = release(torch_version)[:2]
    if len(have) < 2:
        return []
    table = tables()["cpp_extension_arch_since"]
    if have < version_tuple(table["validated_from"])[:2]:
        return []  # before _get_cuda_arch_flags: nvcc's default arch, nothing validated
    since = cpp_extension_arch_since()
    if arch_list is not None and str(arch_list).strip():
        text = str(arch_list).replace(" ", ";")
        for name, value in cpp_extension_named_arches(torch_version):  # the order cpp_extension replaces them in
            text = text.replace(name, value)
        entries = [e for e in text.split(";") if e]
    else:
        if have > version_tuple(table["no_clamp_through"])[:2]:
            return []
        entries = [f"{c[0]}.{c[1]}" for c in capabilities if isinstance(c, (list, tuple)) and len(c) == 2]
    out = []
    for entry in dict.fromkeys(entries):
        first = since.get(_arch_key(entry))
        if first is not None and have < first:
            out.append((entry, first))
    return out
