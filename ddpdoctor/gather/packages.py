"""The `packages` section: versions from installed metadata, never by importing the package."""
from __future__ import annotations

import os
import re
from typing import Optional

from ddpdoctor.gather import BOOL, INT, LIST, OBJ, STR, Sources, gatherer
# The native-library facts (shared objects found on ld.so's paths, read from their ELF headers) live in
# gather/native.py; imported here under their old names, which the gatherer and callers use.
from ddpdoctor.gather.native import (extension_cxx_needs, ld_cuda_libs, ld_torch_libs, libstdcxx,  # noqa: F401
                                     nccl_preloaded, scan_extension_modules, torch_extensions, torch_mkl_symbols,
                                     torch_nccl, torch_site)

DISTRIBUTIONS = ("torch", "transformers", "tokenizers", "accelerate", "deepspeed", "datasets", "h5py", "numpy",
                 "nvidia-ml-py", "pynvml",
                 # check25: Intel's mkl-service, whose threading-layer choice refuses GNU OpenMP (PKG021)
                 "mkl-service", "nvidia-nccl-cu11", "nvidia-nccl-cu12", "nvidia-nccl-cu13", "safetensors", "huggingface-hub",
                 "lightning", "pytorch-lightning", "horovod", "flash-attn", "triton", "pytorch-triton",
                 "pytorch-triton-rocm", "xformers",
                 # check17b: the CUDA library wheels torch's pip builds load (PKG016 compares LD_LIBRARY_PATH's copies)
                 "nvidia-cudnn-cu11", "nvidia-cudnn-cu12", "nvidia-cublas-cu11", "nvidia-cublas-cu12",
                 "nvidia-cusparse-cu12", "nvidia-nvjitlink-cu12", "nvidia-cuda-runtime-cu11", "nvidia-cuda-runtime-cu12",
                 # check18: NVIDIA's apex (distribution "apex"), whose compiled extensions PKG018 looks for
                 "apex",
                 # check18: OpenMMLab's mmcv (1.x: "mmcv" without compiled ops, "mmcv-full" with them; 2.x: "mmcv" with,
                 # "mmcv-lite" without) and the packages that import mmcv.ops (PKG020)
                 "mmcv", "mmcv-full", "mmcv-lite", "mmdet", "mmdet3d", "mmsegmentation", "mmrotate", "mmpose",
                 # check18: libraries whose kernels are Triton's, compiled into Triton's cache at run time (SYS010)
                 "auto-gptq", "liger-kernel", "unsloth", "mamba-ssm",
                 # check29: mpi4py, which deepspeed.init_distributed imports when no launcher set RANK & co (ENV001)
                 "mpi4py")


def _runtime_builders() -> tuple:
    """check26: the libraries that compile their CUDA kernels at first use (data/runtime_builds.json, PKG014)."""
    import json

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "runtime_builds.json")
    with open(path, encoding="utf-8") as fh:
        return tuple(row["distribution"] for row in json.load(fh)["packages"])


DISTRIBUTIONS = DISTRIBUTIONS + tuple(d for d in _runtime_builders() if d not in DISTRIBUTIONS)


def _compile_by_default() -> tuple:
    """check27: the libraries that call torch.compile by default (data/triton_libraries.json compile_by_default, GPU032)."""
    import json

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "triton_libraries.json")
    with open(path, encoding="utf-8") as fh:
        return tuple(row["distribution"] for row in json.load(fh).get("compile_by_default", {}).get("packages") or ())


DISTRIBUTIONS = DISTRIBUTIONS + tuple(d for d in _compile_by_default() if d not in DISTRIBUTIONS)


# The fields checks read, with their JSON types (the recorded-snapshot schema).
FIELDS = {
    "versions": OBJ, "versions.*": STR, "torch_build": OBJ, "torch_build.*": STR,
    # issue 13: every recorded field has a declared type, so a hand-edited snapshot is rejected uniformly
    "python": STR,
    # check2 round 8 (PKG011): NCCL itself named in LD_PRELOAD
    "nccl_preloaded": LIST, "nccl_preloaded[]": OBJ, "nccl_preloaded[].path": STR, "nccl_preloaded[].real_name": STR,
    "nccl_preloaded[].version": STR,
    # check12 round 12 (PKG012): what DeepSpeed's pre-built ops were compiled against (deepspeed/git_version_info_installed.py)
    "deepspeed_build": OBJ, "deepspeed_build.torch": STR, "deepspeed_build.cuda": STR, "deepspeed_build.hip": STR,
    "deepspeed_build.installed_ops": LIST, "deepspeed_build.installed_ops[]": STR,
    # check14 round 14 (PKG013): the NCCL wheel version torch's own metadata pins (Requires-Dist), where it pins one;
    # check18b (PKG025): the triton / pytorch-triton version it pins, under the same key
    "torch_pins": OBJ, "torch_pins.*": STR,
    # check17 round 17 (PKG014): the CUDA toolkit an extension built at run time compiles with (cpp_extension's CUDA_HOME)
    "cuda_toolkit": OBJ, "cuda_toolkit.home": STR, "cuda_toolkit.from": STR, "cuda_toolkit.version": STR,
    "cuda_toolkit.nvcc": BOOL,  # check29: whether <home>/bin/nvcc is a file (what cpp_extension runs)
    # check19: link names (-lcurand, ...) whose unversioned lib<name>.so the toolkit lacks, with the versioned file it has
    "cuda_toolkit.missing_links": OBJ, "cuda_toolkit.missing_links.*": STR,
    # check19 (PKG014): the ninja build tool a just-in-time extension build runs (`ninja --version` on the job's PATH),
    # and the version of the ninja pip package, whose executable sits in its environment's bin/
    "ninja": OBJ, "ninja.path": STR, "ninja.package": STR, "ninja.package_bin": STR,
    # check18 round 18 (PKG014): the host C++ compiler an extension built at run time uses ($CXX, else c++)
    "host_compiler": OBJ, "host_compiler.cmd": STR, "host_compiler.kind": STR, "host_compiler.version": STR,
    "host_compiler.from": STR,
    # check17 round 17 (PKG012): the torch / CUDA / Python xformers' C++/CUDA extensions were built for (xformers/cpp_lib.json)
    "xformers_build": OBJ, "xformers_build.torch": STR, "xformers_build.cuda": STR, "xformers_build.hip": STR,
    "xformers_build.python": STR,
    # check17b round 17 (PKG012): the torch / CUDA / C++ ABI flash-attn's prebuilt wheel was built for (its wheel name:
    # flash_attn-2.5.8+cu122torch2.3cxx11abiFALSE-..., in direct_url.json or the installed version's local part)
    "flash_attn_build": OBJ, "flash_attn_build.torch": STR, "flash_attn_build.cuda": STR,
    "flash_attn_build.cxx11_abi": STR, "flash_attn_build.from": STR,
    # check17b: the C++ ABI torch was built with (TorchConfig.cmake's TORCH_CXX_FLAGS -D_GLIBCXX_USE_CXX11_ABI=0|1)
    "torch_cxx11_abi": STR,
    # check17b round 17 (PKG015): the conda environment's CUDA packages (conda-meta/<name>-<version>-<build>.json)
    "conda_cuda": LIST, "conda_cuda[]": OBJ, "conda_cuda[].name": STR, "conda_cuda[].version": STR,
    "conda_cuda[].prefix": STR,
    # check17b round 17 (PKG016): CUDA libraries (cuDNN, cuBLAS, ...) in LD_LIBRARY_PATH's directories, by soname
    "ld_cuda_libs": LIST, "ld_cuda_libs[]": OBJ, "ld_cuda_libs[].dir": STR, "ld_cuda_libs[].name": STR,
    "ld_cuda_libs[].version": STR,
    # check17c round 17 (PKG012): compiled extensions linking libtorch/libc10 (DT_NEEDED) whose undefined c10/at/torch
    # symbols torch's libraries do not export (read from ELF .dynsym / .gnu.hash, no import): "undefined symbol"
    "torch_extensions": LIST, "torch_extensions[]": OBJ, "torch_extensions[].package": STR,
    "torch_extensions[].file": STR, "torch_extensions[].missing": LIST, "torch_extensions[].missing[]": STR,
    "torch_extensions[].missing_count": INT, "torch_extensions[].undefined_count": INT,
    # check32 round 24 (PKG012): libtorch*/libc10* names in DT_NEEDED that torch's library folder does not hold
    "torch_extensions[].absent_libraries": LIST, "torch_extensions[].absent_libraries[]": STR,
    # check17c (PKG016): the libstdc++.so.6 ld.so finds for torch's libraries and the GLIBCXX/CXXABI versions they need
    # check19 (PKG027): libtorch_cpu.so's undefined iJIT_* symbols and whether the MKL libraries it links export them
    "torch_mkl": OBJ, "torch_mkl.lib": STR, "torch_mkl.undefined": LIST, "torch_mkl.undefined[]": STR,
    "torch_mkl.mkl_libs": LIST, "torch_mkl.mkl_libs[]": STR, "torch_mkl.unresolved": LIST,
    "torch_mkl.unresolved[]": STR, "torch_mkl.exported": LIST, "torch_mkl.exported[]": STR,
    # check20 (PKG029): each compiled extension's DT_NEEDED libcudart.so.N[.M], where ld.so finds it (none: not found)
    "extension_cudart": LIST, "extension_cudart[]": OBJ, "extension_cudart[].package": STR,
    "extension_cudart[].file": STR, "extension_cudart[].needed": STR, "extension_cudart[].version": STR,
    "extension_cudart[].path": STR, "extension_cudart[].from": STR, "torch_cudart": STR,
    # check20 (PKG028): the libnccl.so.N libtorch_cuda.so's DT_NEEDED resolves to, in ld.so's search order
    "torch_nccl": OBJ, "torch_nccl.needed": STR, "torch_nccl.path": STR, "torch_nccl.from": STR,
    "torch_nccl.real_name": STR, "torch_nccl.version": STR, "torch_nccl.search": STR,
    "libstdcxx": OBJ, "libstdcxx.path": STR, "libstdcxx.from": STR, "libstdcxx.glibcxx": STR, "libstdcxx.cxxabi": STR,
    "libstdcxx.needs_glibcxx": STR, "libstdcxx.needs_cxxabi": STR, "libstdcxx.needed_by": STR,
    # check19 (PKG026): compiled extension modules (site-packages, torch's JIT build directory) and the newest
    # GLIBCXX_/CXXABI_ versions each needs from libstdc++.so.6 (.gnu.version_r)
    "extension_cxx_needs": LIST, "extension_cxx_needs[]": OBJ, "extension_cxx_needs[].package": STR,
    "extension_cxx_needs[].file": STR, "extension_cxx_needs[].glibcxx": STR, "extension_cxx_needs[].cxxabi": STR,
    # check19 (PKG027): the GPU architectures of the CUDA code torch's libtorch_cuda.so and compiled extensions carry
    # (.nv_fatbin: cubins "sass" for sm_XY, "ptx" the driver compiles for sm_XY and newer)
    "cuda_archs": LIST, "cuda_archs[]": OBJ, "cuda_archs[].package": STR, "cuda_archs[].file": STR,
    "cuda_archs[].sass": LIST, "cuda_archs[].sass[]": INT, "cuda_archs[].ptx": LIST, "cuda_archs[].ptx[]": INT,
    # check18 (PKG018): the compiled extension modules NVIDIA's apex installed (apex_C, amp_C, fused_layer_norm_cuda...)
    "apex_build": OBJ, "apex_build.extensions": LIST, "apex_build.extensions[]": STR, "apex_build.from": STR,
    "apex_build.has_amp": BOOL,
    # check18 (PKG020): whether the installed mmcv package holds its compiled ops (mmcv/_ext.*.so or .pyd)
    "mmcv_build": OBJ, "mmcv_build.ops": BOOL, "mmcv_build.dir": STR,
    # check18 (PKG021): the OpenMP runtime libraries torch, the Python environment and other wheels carry
    "openmp_runtimes": LIST, "openmp_runtimes[]": OBJ, "openmp_runtimes[].path": STR, "openmp_runtimes[].kind": STR,
    "openmp_runtimes[].owner": STR,
    # check18 (PKG024): torch's own library names found in LD_LIBRARY_PATH's directories
    "ld_torch_libs": LIST, "ld_torch_libs[]": OBJ, "ld_torch_libs[].dir": STR, "ld_torch_libs[].name": STR,
    # check18 (PKG023): conda's magma packages (magma-cuda92, magma-cuda121 ...), named for the CUDA they were built with
    "conda_magma": LIST, "conda_magma[]": OBJ, "conda_magma[].name": STR, "conda_magma[].version": STR,
    # check18 (PKG022): every torch distribution on sys.path, conda's torch records, a torch directory in the cwd
    "torch_installs": OBJ, "torch_installs.dists": LIST, "torch_installs.dists[]": OBJ,
    "torch_installs.dists[].version": STR, "torch_installs.dists[].location": STR, "torch_installs.conda": LIST,
    "torch_installs.conda[]": STR, "torch_installs.cwd_shadow": STR,
    "torch_installs.conda_builds": LIST, "torch_installs.conda_builds[]": STR,
    # check33 (PKG030): the oldest accelerate the installed transformers accepts (its own ACCELERATE_MIN_VERSION)
    "transformers_floors": OBJ, "transformers_floors.accelerate": STR, "transformers_floors.from": STR,
}


@gatherer("packages", when=("check", "preflight"), fields=FIELDS,
          nullable=('versions.*', 'torch_build.*', 'libstdcxx.needs_glibcxx', 'libstdcxx.needs_cxxabi',
                    'libstdcxx.glibcxx', 'libstdcxx.cxxabi', 'libstdcxx.needed_by',
                    'extension_cxx_needs[].glibcxx', 'extension_cxx_needs[].cxxabi',
                    'deepspeed_build.torch', 'deepspeed_build.cuda', 'deepspeed_build.hip',
                    'cuda_toolkit.version', 'xformers_build.cuda', 'xformers_build.hip', 'xformers_build.python',
                    'ld_cuda_libs[].version', 'ninja.path', 'ninja.package', 'ninja.package_bin', 'torch_nccl.needed'))
def gather_packages(src: Sources) -> dict:
    from importlib import metadata

    versions: dict = {}
    for dist in DISTRIBUTIONS:
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
        except Exception as exc:  # a corrupt dist-info directory
            versions[dist] = f"<unreadable: {type(exc).__name__}>"
    import sys

    out = {"versions": versions, "python": sys.version.split()[0], "nccl_preloaded": nccl_preloaded(src)}
    if versions.get("torch"):
        out["torch_build"] = torch_build()
        pins = torch_pins()
        if pins:
            out["torch_pins"] = pins
    # {} when none is found (check17b: "searched, none" for PKG014, told apart from a snapshot without the field)
    out["cuda_toolkit"] = cuda_toolkit(src)
    out["ninja"] = ninja_tool(src)
    compiler = host_compiler(src)
    if compiler is not None:
        out["host_compiler"] = compiler
    if versions.get("torch"):
        abi = torch_cxx11_abi()
        if abi is not None:
            out["torch_cxx11_abi"] = abi
    if versions.get("flash-attn"):
        fa = flash_attn_build(versions["flash-attn"])
        if fa:
            out["flash_attn_build"] = fa
    conda = conda_cuda(src)
    if conda:
        out["conda_cuda"] = conda
    ld_libs = ld_cuda_libs(src)
    if ld_libs:
        out["ld_cuda_libs"] = ld_libs
    ld_torch = ld_torch_libs(src) if versions.get("torch") else []
    if ld_torch:
        out["ld_torch_libs"] = ld_torch
    if versions.get("torch"):
        site = torch_site()   # one metadata lookup for the four native gatherers (each would make its own)
        exts = torch_extensions(site)
        if exts is not None:
            out["torch_extensions"] = exts
        cxx = libstdcxx(src, site)
        if cxx:
            out["libstdcxx"] = cxx
        mkl = torch_mkl_symbols(src, site)
        if mkl:
            out["torch_mkl"] = mkl
        nccl = torch_nccl(src, site)
        if nccl:
            out["torch_nccl"] = nccl
        scan = scan_extension_modules(src, site, torch_version=versions.get("torch"))
        if scan:
            out["extension_cxx_needs"], out["cuda_archs"] = scan["cxx"], scan["cuda"]
            out["extension_cudart"] = scan.get("cudart") or []
            if scan.get("torch_cudart"):
                out["torch_cudart"] = scan["torch_cudart"]
    if versions.get("xformers"):
        xf = xformers_build()
        if xf:
            out["xformers_build"] = xf
    if versions.get("deepspeed"):
        built = deepspeed_build()
        if built:
            out["deepspeed_build"] = built
    if versions.get("apex"):
        apex = apex_build()
        if apex:
            out["apex_build"] = apex
    if versions.get("mmcv") or versions.get("mmcv-full") or versions.get("mmcv-lite"):
        mm = mmcv_build()
        if mm:
            out["mmcv_build"] = mm
    if versions.get("torch"):
        omp = openmp_runtimes()
        if omp is not None:
            out["openmp_runtimes"] = omp
    if versions.get("transformers"):
        floors = transformers_floors()
        if floors:
            out["transformers_floors"] = floors
    installs = torch_installs()
    if installs:
        out["torch_installs"] = installs
    magma = conda_magma()
    if magma:
        out["conda_magma"] = magma
    return out


def cuda_toolkit(src: Sources) -> dict:
    """{home, from, version} of the CUDA toolkit an extension compiled at run time uses (DeepSpeed's just-in-time ops,
    torch.utils.cpp_extension.load), found as cpp_extension's _find_cuda_home finds it: CUDA_HOME, then CUDA_PATH, then
    the directory above the first `nvcc` on PATH, then /usr/local/cuda (pytorch/pytorch torch/utils/cpp_extension.py,
    read in stored copies, commit not pinned). The version is read from the toolkit's version.json (CUDA 11.1+:
    {"cuda": {"version": "11.7.1"}}) or version.txt ("CUDA Version 10.2.89"), never by running nvcc; None when
    neither is there. {} when no toolkit is found."""
    import json
    import re

    env = src.environ
    home, how = None, None
    for name in ("CUDA_HOME", "CUDA_PATH"):
        if env.get(name):
            home, how = env[name], name
            break
    if home is None:
        for d in (env.get("PATH") or "").split(os.pathsep):
            if d and os.path.isabs(d) and os.path.isfile(src.path(os.path.join(d, "nvcc"))):
                home, how = os.path.dirname(d.rstrip("/")), "nvcc on PATH"
                break
    if home is None and os.path.isdir(src.path("/usr/local/cuda")):
        home, how = "/usr/local/cuda", "/usr/local/cuda"
    if home is None:
        return {}
    version = None
    try:
        version = str(json.loads(_package_text(src.path(os.path.join(home, "version.json")), 1 << 20))["cuda"]["version"])
    except (OSError, ValueError, KeyError, TypeError):
        try:
            m = re.search(r"CUDA Version\s+([\d.]+)", _package_text(src.path(os.path.join(home, "version.txt")), 4096))
            version = m.group(1) if m else None
        except OSError:
            pass
    out = {"home": home, "from": how, "version": version,
           "nvcc": os.path.isfile(src.path(os.path.join(home, "bin", "nvcc")))}
    missing = _unversioned_links_missing(src, home)
    if missing:
        out["missing_links"] = missing
    return out


# The libraries an extension build links by their link name: DeepSpeed's CPU ops (TorchCPUOpBuilder: cpu_adam,
# cpu_adagrad, cpu_lion) pass `-L<CUDA_HOME>/lib64 -lcudart -lcublas` and `-lcurand` (deepspeedai/DeepSpeed
# op_builder/builder.py @4904d948, TorchCPUOpBuilder.cxx_args / extra_ldflags). The linker resolves -lX only through
# the unversioned libX.so, which the toolkit's -dev packages install; a runtime-only toolkit has libX.so.N alone.
TOOLKIT_LINK_NAMES = ("cudart", "cublas", "curand")


def _unversioned_links_missing(src: Sources, home: str) -> dict:
    """{name: the versioned file present} for each link name whose lib<name>.so is missing from the toolkit's lib64
    (or lib) while a lib<name>.so.N is there: `ld` then reports "cannot find -l<name>". {} when nothing is missing
    or the directory cannot be read."""
    for sub in ("lib64", "lib"):
        d = src.path(os.path.join(home, sub))
        try:
            names = set(os.listdir(d))
        except OSError:
            continue
        out = {}
        for lib in TOOLKIT_LINK_NAMES:
            plain = f"lib{lib}.so"
            versioned = sorted(n for n in names if n.startswith(plain + "."))
            if versioned and plain not in names:
                out[lib] = versioned[0]
        return out
    return {}


def ninja_tool(src: Sources) -> dict:
    """{path, package, package_bin}: the `ninja` executable the job's PATH finds (torch.utils.cpp_extension's
    is_ninja_available runs `ninja --version` and load() raises "Ninja is required to load C++ extensions" without
    it; DeepSpeed's jit_load wraps the same verify_ninja_availability: "Unable to JIT load the <op> op due to ninja
    not being installed"), or None; and the ninja pip package's version and the bin/ its executable was installed
    to (sys.prefix/bin), or None, so a package installed in an environment whose bin/ is not on PATH is told apart
    from none at all."""
    from importlib import metadata
    import sys

    path = None
    for d in (src.environ.get("PATH") or "").split(os.pathsep):
        if d and os.path.isabs(d):
            exe = src.path(os.path.join(d, "ninja"))
            if os.path.isfile(exe) and os.access(exe, os.X_OK):
                path = os.path.join(d, "ninja")
                break
    package, package_bin = None, None
    try:
        dist = metadata.distribution("ninja")
        package = dist.version
        # where pip put its console script: the RECORD's .../bin/ninja (a --user install: ~/.local/bin)
        script = next((f for f in dist.files or [] if str(f).replace("\\", "/").endswith("bin/ninja")), None)
        if script is not None:
            package_bin = os.path.dirname(os.path.normpath(str(dist.locate_file(script))))
    except Exception:  # noqa: BLE001 - not installed, or unreadable metadata
        pass
    if package and not package_bin:
        package_bin = os.path.join(sys.prefix, "bin")
    return {"path": path, "package": package, "package_bin": package_bin}


def host_compiler(src: Sources) -> Optional[dict]:
    """{cmd, kind, version, from} of the C++ compiler torch.utils.cpp_extension builds with: $CXX, else `c++` (its
    get_cxx_compiler; nvcc's host compiler is the same GCC on PATH unless -ccbin names another). Read without running
    it, as GCC lays itself out: the program's real path (through the alternatives links), then the versions under
    <prefix>/libexec/gcc/<target>/<version>/ that hold cc1plus, GCC's C++ compiler proper (one per installed g++;
    a name ending in -N, g++-12, picks the version of that major). None for clang, when there is no such compiler on
    PATH, or when the version is ambiguous."""
    import re

    cmd = (src.environ.get("CXX") or "c++").strip()
    word = cmd.split()[0] if cmd else ""
    dirs = [os.path.dirname(word)] if os.path.isabs(word) else (src.environ.get("PATH") or "").split(os.pathsep)
    exe = next((src.path(os.path.join(d, os.path.basename(word))) for d in dirs if d and os.path.isabs(d)
                and os.access(src.path(os.path.join(d, os.path.basename(word))), os.X_OK)), None) if word else None
    if not exe:
        return None
    real = os.path.realpath(exe)
    name = os.path.basename(real)
    if "clang" in name:
        return None
    prefix = os.path.dirname(os.path.dirname(real))
    found = []
    for top in ("libexec", "lib"):
        base = os.path.join(prefix, top, "gcc")
        try:
            targets = os.listdir(base)
        except OSError:
            continue
        for t in targets:
            try:
                versions = os.listdir(os.path.join(base, t))
            except OSError:
                continue
            found += [v for v in versions if re.fullmatch(r"\d+(\.\d+)*", v)
                      and os.path.isfile(os.path.join(base, t, v, "cc1plus"))]
    m = re.search(r"-(\d+)$", name)
    if m:
        found = [v for v in found if v.split(".")[0] == m.group(1)]
    found = sorted(set(found))
    if len(found) != 1:
        return None
    return {"cmd": cmd, "kind": "gcc", "version": found[0], "from": real}

def xformers_build() -> dict:
    """What xformers' C++/CUDA extensions were built for: its wheel carries xformers/cpp_lib.json,
    {"version": {"cuda": 1208, "hip": null, "torch": "2.10.0+cu128", "python": "3.10.11"}, "env": {...}}, which
    xformers/_cpp_lib.py reads before loading the library and names when the load fails ("xFormers was built for:
    PyTorch 2.3.0+cu121 with CUDA 1201 (you have 2.1.0+cu121)"; facebookresearch/xformers xformers/_cpp_lib.py, read in
    a stored copy, commit not pinned). Read as JSON, never imported; {} when absent (a build without extensions)."""
    import json
    from importlib import metadata

    try:
        path = metadata.distribution("xformers").locate_file("xformers/cpp_lib.json")
        version = json.loads(_package_text(path, 1 << 20)).get("version") or {}
    except Exception:  # noqa: BLE001 - no file, unreadable metadata
        return {}
    if not isinstance(version, dict) or not version.get("torch"):
        return {}
    return {k: (None if version.get(k) is None else str(version.get(k))) for k in ("torch", "cuda", "hip", "python")}


def parse_flash_attn_wheel(text) -> dict:
    """{torch, cuda, cxx11_abi} from a flash-attn prebuilt wheel's local version tag, as its setup.py names the wheels
    it publishes (Dao-AILab/flash-attention setup.py get_wheel_url: f"{version}+cu{cuda}torch{torch_mm}cxx11abi{ABI}"):
    "flash_attn-2.5.8+cu122torch2.3cxx11abiFALSE-cp310-cp310-linux_x86_64.whl" -> torch "2.3", cuda "12.2" (cu12 ->
    "12"), cxx11_abi "0". {} when the text carries no such tag (a PyPI sdist install, a source build). Pure."""
    import re

    m = re.search(r"\+cu(\d+)torch(\d+\.\d+)cxx11abi(true|false)", str(text or ""), re.IGNORECASE)
    if not m:
        return {}
    cu = m.group(1)
    cuda = cu if len(cu) <= 2 else f"{cu[:-1]}.{cu[-1]}"
    return {"torch": m.group(2), "cuda": cuda, "cxx11_abi": "1" if m.group(3).lower() == "true" else "0"}


def flash_attn_build(version: str) -> dict:
    """What flash-attn's CUDA extension was built for, from the wheel's name: the URL pip recorded in the dist-info's
    direct_url.json (PEP 610: installed from a URL or a local wheel file), else the installed version's local part
    (a wheel installed under its own name keeps "+cu122torch2.3cxx11abiFALSE"). {} when neither names a build (the
    PyPI sdist fetches a wheel for the torch present at install time and renames it; nothing records which)."""
    import json
    from importlib import metadata

    try:
        text = metadata.distribution("flash-attn").read_text("direct_url.json")
        url = json.loads(text).get("url") if text else None
    except Exception:  # noqa: BLE001 - unreadable metadata
        url = None
    for where, value in (("direct_url.json", url), ("version", version)):
        built = parse_flash_attn_wheel(value)
        if built:
            return dict(built, **{"from": where})
    return {}


def parse_torch_abi(text) -> Optional[str]:
    """"0" or "1" from TorchConfig.cmake's `set(TORCH_CXX_FLAGS "-D_GLIBCXX_USE_CXX11_ABI=1")`; None if absent. Pure."""
    import re

    m = re.search(r"_GLIBCXX_USE_CXX11_ABI=([01])", str(text or ""))
    return m.group(1) if m else None


def torch_cxx11_abi() -> Optional[str]:
    """The C++ ABI torch's libraries were built with, from torch/share/cmake/Torch/TorchConfig.cmake (the flags torch
    hands to extensions it builds: torch.utils.cpp_extension reads the same), read as text; None when unreadable."""
    from importlib import metadata

    try:
        path = metadata.distribution("torch").locate_file("torch/share/cmake/Torch/TorchConfig.cmake")
        return parse_torch_abi(_package_text(path, 65536))
    except Exception:  # noqa: BLE001 - a torch without cmake files
        return None


CONDA_CUDA_PACKAGES = ("cudatoolkit", "cuda-toolkit", "cuda-runtime", "cuda-cudart", "cuda-libraries", "cuda-version",
                       "cudnn", "libcublas", "cuda-nvcc", "pytorch-cuda")
MAX_CONDA_CUDA = 12


def parse_conda_meta_name(filename: str) -> Optional[dict]:
    """{name, version} from a conda-meta record's file name, <name>-<version>-<build>.json (conda names it so:
    conda/core/prefix_data.py); None for another file. Pure."""
    if not filename.endswith(".json"):
        return None
    parts = filename[:-5].rsplit("-", 2)
    if len(parts) != 3 or not all(parts):
        return None
    return {"name": parts[0], "version": parts[1]}


def conda_cuda(src: Sources) -> list:
    """The CUDA packages (cudatoolkit, cuda-cudart, cudnn, ...) of the conda environment this Python runs from
    (sys.prefix, or sys.base_prefix for a venv made from a conda python, whichever holds conda-meta/), from the names
    of its conda-meta records; never reads the records. Their libraries sit in <prefix>/lib, which that environment's
    python binary (RPATH $ORIGIN/../lib) and a conda build of torch find before the system's. CONDA_PREFIX is not
    used: it names the activated environment, not necessarily the Python that runs. [] outside a conda python."""
    import sys

    names, prefix = None, None
    for prefix in dict.fromkeys((sys.prefix, sys.base_prefix)):
        try:
            names = sorted(os.listdir(src.path(os.path.join(prefix, "conda-meta"))))
            break
        except OSError:
            continue
    if names is None:
        return []
    out = []
    for name in names:
        rec = parse_conda_meta_name(name)
        if rec and rec["name"] in CONDA_CUDA_PACKAGES:
            out.append(dict(rec, prefix=prefix))
        if len(out) >= MAX_CONDA_CUDA:
            break
    return out


MAX_APEX_FILES = 4000


def apex_extensions(names) -> list:
    """The top-level compiled extension modules among a distribution's file names ("amp_C.cpython-310-x86_64-linux-gnu.so"
    -> "amp_C"): what NVIDIA/apex's setup.py builds as CppExtension/CUDAExtension (apex_C with --cpp_ext; amp_C, syncbn,
    fused_layer_norm_cuda, mlp_cuda, ... with --cuda_ext: setup.py @007e4724). Sorted, without duplicates. Pure."""
    out = set()
    for n in names:
        base = str(n).replace("\\", "/")
        if "/" in base.rstrip("/"):
            continue  # a module inside a package, not one of setup.py's top-level extensions
        if base.endswith((".so", ".pyd")):
            out.add(base.split(".", 1)[0])
    return sorted(out)


def apex_build() -> dict:
    """{extensions, from, has_amp} of the installed "apex" distribution: its top-level compiled modules, from the
    dist-info RECORD (pip) or the egg's directory (`setup.py install`), and whether it is NVIDIA's apex at all (an
    apex/amp package; PyPI's unrelated "apex" has none). {} when neither can be read (not judged)."""
    from importlib import metadata

    try:
        dist = metadata.distribution("apex")
    except Exception:  # noqa: BLE001 - not installed, unreadable metadata
        return {}
    names, how = None, None
    try:
        files = dist.files
        if files:
            names, how = [str(f) for f in list(files)[:MAX_APEX_FILES]], "RECORD"
    except Exception:  # noqa: BLE001
        names = None
    if names is None:
        try:
            top = str(dist.locate_file(""))
            if top.endswith(".egg") or os.path.isdir(os.path.join(top, "apex")):
                names = sorted(os.listdir(top))[:MAX_APEX_FILES]
                names += [f"apex/{n}" for n in sorted(os.listdir(os.path.join(top, "apex")))[:MAX_APEX_FILES]] \
                    if os.path.isdir(os.path.join(top, "apex")) else []
                how = "egg directory"
        except OSError:
            names = None
    if names is None:
        return {}
    has_amp = any(n.replace("\\", "/").startswith("apex/amp") for n in names)
    return {"extensions": apex_extensions(names), "from": how, "has_amp": has_amp}


def mmcv_has_ops(names) -> bool:
    """Whether an mmcv package directory's file names hold its compiled ops module, `_ext` (mmcv/utils/ext_loader.py
    load_ext imports 'mmcv._ext'; setup.py builds it only with MMCV_WITH_OPS). Pure."""
    return any(str(n).startswith("_ext.") and str(n).endswith((".so", ".pyd")) for n in names)


def mmcv_build() -> dict:
    """{ops, dir} of the importable mmcv package: whether its directory holds the compiled `_ext` module. Found with
    importlib.util.find_spec, which locates a top-level package without running it; {} when not found."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("mmcv")
        dirs = list(spec.submodule_search_locations or []) if spec else []
    except Exception:  # noqa: BLE001 - a broken install
        return {}
    for d in dirs:
        try:
            return {"ops": mmcv_has_ops(os.listdir(d)), "dir": str(d)}
        except OSError:
            continue
    return {}


_OMP_KINDS = (("intel", re.compile(r"^(lib)?iomp5(md)?[.-]", re.I)), ("llvm", re.compile(r"^libomp([.-]|140)", re.I)),
              ("gnu", re.compile(r"^libgomp[.-]", re.I)), ("msvc", re.compile(r"^vcomp\d*\.dll$", re.I)))
MAX_OPENMP_FILES = 16


def openmp_kind(name: str):
    """'intel' (libiomp5.so, libiomp5.dylib, libiomp5md.dll), 'llvm' (libomp.so/.dylib, libomp140...dll), 'gnu'
    (libgomp.so.1, libgomp-a34b3233.so.1.0.0) or 'msvc' (vcomp140.dll) for an OpenMP runtime's file name; None
    otherwise (import libraries and symlink-free names alike: only the name is read). Pure."""
    for kind, rx in _OMP_KINDS:
        if rx.search(name) and not name.lower().endswith((".lib", ".a", ".h")):
            return kind
    return None


def openmp_runtimes(listdir=os.listdir, torch_dir: Optional[str] = None) -> "Optional[list]":
    """The OpenMP runtime libraries on disk where this Python's processes load them from: torch's own (torch/lib,
    torch/.dylibs), the environment's (sys.prefix/lib, and Library/bin of a conda environment on Windows) and other
    wheels' vendored copies (site-packages/*.libs, numpy/scipy/sklearn .dylibs). [{path, kind, owner}], at most 16;
    None when torch's directory cannot be found. Directory listings only; nothing is loaded."""
    import importlib.util
    import sys

    if torch_dir is None:
        try:
            spec = importlib.util.find_spec("torch")
            tdirs = list(spec.submodule_search_locations or []) if spec else []
        except Exception:  # noqa: BLE001
            return None
        if not tdirs:
            return None
        torch_dir = tdirs[0]
    tdir = torch_dir
    site = os.path.dirname(tdir)
    places = [(os.path.join(tdir, "lib"), "torch"), (os.path.join(tdir, ".dylibs"), "torch"),
              (os.path.join(sys.prefix, "lib"), "env"), (os.path.join(sys.prefix, "Library", "bin"), "env")]
    try:
        places += [(os.path.join(site, n), n[:-5]) for n in sorted(listdir(site)) if n.endswith(".libs")]
    except OSError:
        pass
    places += [(os.path.join(site, n, ".dylibs"), n) for n in ("numpy", "scipy", "sklearn")]
    out, seen = [], set()
    for where, owner in places:
        try:
            names = sorted(listdir(where))
        except OSError:
            continue
        for n in names:
            kind = openmp_kind(n)
            path = os.path.join(where, n)
            if kind and path not in seen:
                seen.add(path)
                out.append({"path": path, "kind": kind, "owner": owner})
            if len(out) >= MAX_OPENMP_FILES:
                return out
    return out


CONDA_TORCH_PACKAGES = ("pytorch", "pytorch-nightly", "pytorch-cpu", "pytorch-gpu")


def conda_magma(names=None) -> list:
    """The magma packages (magma-cuda80, magma-cuda92, magma-cuda121, ...) among the conda-meta records of this
    Python's environment: [{name, version}], by file name only. [] outside a conda environment. check18 (PKG023)."""
    import sys

    if names is None:
        names = []
        for prefix in dict.fromkeys((sys.prefix, sys.base_prefix)):
            try:
                names = sorted(os.listdir(os.path.join(prefix, "conda-meta")))
                break
            except OSError:
                continue
    out = []
    for n in names:
        rec = parse_conda_meta_name(n)
        if rec and re.fullmatch(r"magma-cuda\d+", rec["name"]):
            out.append(rec)
    return out[:4]


def torch_installs(cwd: Optional[str] = None, dists=None, conda_names=None) -> dict:
    """{dists, conda, cwd_shadow}: every distribution named torch that importlib.metadata finds on sys.path
    ({version, location}, one per directory), the conda-meta records of torch packages in this Python's environment
    (pytorch, pytorch-nightly, ...: conda installs them under different names that write the same torch/), and a
    torch package directory in the current directory (`python script.py` run here puts the script's directory first on
    sys.path, ahead of site-packages). Metadata and directory listings only; {} when none of it is found."""
    import sys
    from importlib import metadata

    out: dict = {}
    if dists is None:
        dists = []
        try:
            for d in metadata.distributions():
                name = (d.metadata.get("Name") or "").strip().lower() if d.metadata else ""
                if name == "torch":
                    dists.append({"version": str(d.version), "location": str(d.locate_file(""))})
        except Exception:  # noqa: BLE001
            dists = []
    seen, uniq = set(), []
    for d in dists:
        loc = os.path.normpath(d.get("location") or "")
        if loc not in seen:
            seen.add(loc)
            uniq.append({"version": d.get("version"), "location": loc})
    if uniq:
        out["dists"] = uniq[:8]
    builds: list = []
    if conda_names is None:
        conda_names = []
        for prefix in dict.fromkeys((sys.prefix, sys.base_prefix)):
            try:
                names = os.listdir(os.path.join(prefix, "conda-meta"))
            except OSError:
                continue
            for n in sorted(names):
                rec = parse_conda_meta_name(n)
                if rec and rec["name"] in CONDA_TORCH_PACKAGES:
                    conda_names.append(f"{rec['name']}-{rec['version']}")
                    builds.append(n[:-5].rsplit("-", 2)[2])  # check25: its build string names the cuDNN (PKG016)
            break
    if conda_names:
        out["conda"] = list(conda_names)[:8]
    if builds:
        out["conda_builds"] = builds[:8]
    try:
        here = os.path.abspath(cwd or os.getcwd())
        cand = os.path.join(here, "torch")
        if os.path.isfile(os.path.join(cand, "__init__.py")) and all(os.path.normpath(here) != u["location"] for u in uniq):
            out["cwd_shadow"] = cand
    except OSError:
        pass
    return out


def parse_transformers_floors(text: str) -> Optional[str]:
    """The literal of a module-level `ACCELERATE_MIN_VERSION = "x.y.z"` (transformers' utils/import_utils.py), or None."""
    import re

    m = re.search(r"""^ACCELERATE_MIN_VERSION\s*=\s*["']([0-9][0-9A-Za-z.+-]*)["']""", text or "", re.M)
    return m.group(1) if m else None


# Round 25 (robust25's cells for the lead): files of installed packages read as text (transformers' import_utils.py,
# DeepSpeed's git_version_info_installed.py, torch's version.py and cmake config, CUDA's version.json, xformers'
# cpp_lib.json) are read only when regular, at most PACKAGE_TEXT_MAX characters, undecodable bytes replaced: a FIFO there
# held `check` to the gatherer's deadline, a /dev/zero link was read into memory until the OOM killer came, and non-UTF-8
# bytes failed the whole packages gatherer (every PKG check skipped).
PACKAGE_TEXT_MAX = 8 << 20


def _package_text(path: str, limit: int = PACKAGE_TEXT_MAX) -> str:
    """The text of an installed package's file (see PACKAGE_TEXT_MAX); OSError when it is not a regular file."""
    from ..model.inputs import open_regular

    with open_regular(str(path), "r", encoding="utf-8", errors="replace") as fh:
        return fh.read(limit)


def transformers_floors() -> dict:
    """{'accelerate': floor, 'from': file} from the installed transformers' own ACCELERATE_MIN_VERSION (the default of
    its is_accelerate_available(), which every Trainer checks: data/transformers_floors.json). Read as text, never
    imported; {} when absent (transformers releases before the constant) or unreadable."""
    import glob
    from importlib import metadata

    try:
        dist = metadata.distribution("transformers")
        base = str(dist.locate_file("transformers/utils"))
    except Exception:  # noqa: BLE001 - no dist-info, an odd install
        return {}
    for path in [os.path.join(base, "import_utils.py")] + sorted(glob.glob(os.path.join(base, "import_utils", "*.py"))):
        try:
            floor = parse_transformers_floors(_package_text(path))
        except OSError:
            continue
        if floor:
            return {"accelerate": floor, "from": os.path.relpath(path, os.path.dirname(os.path.dirname(base)))}
    return {}


def deepspeed_build() -> dict:
    """What DeepSpeed's pre-built ops were compiled against: its setup.py writes deepspeed/git_version_info_installed.py
    with `installed_ops={...}` and `torch_info={'version': '2.1', 'cuda_version': '12.1', 'hip_version': '0.0', ...}`
    (deepspeedai/DeepSpeed setup.py @edaa7221). Read as text, never imported; {} when absent or unreadable."""
    from importlib import metadata

    try:
        path = metadata.distribution("deepspeed").locate_file("deepspeed/git_version_info_installed.py")
        text = _package_text(path)
    except Exception:  # noqa: BLE001 - a source checkout, a wheel without the file
        return {}
    return parse_deepspeed_build(text)


def parse_deepspeed_build(text: str) -> dict:
    """{'torch', 'cuda', 'hip', 'installed_ops'} from git_version_info_installed.py's literals; {} if it has none."""
    import ast

    values = {}
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and \
                node.targets[0].id in ("installed_ops", "torch_info"):
            try:
                values[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    info, ops = values.get("torch_info"), values.get("installed_ops")
    if not isinstance(info, dict):
        return {}
    text_of = lambda v: None if v in (None, "", "0.0") else str(v)  # noqa: E731 - setup.py writes "0.0" for none
    return {"torch": text_of(info.get("version")), "cuda": text_of(info.get("cuda_version")),
            "hip": text_of(info.get("hip_version")),
            "installed_ops": sorted(k for k, on in (ops or {}).items() if on is True) if isinstance(ops, dict) else []}


def parse_pins(requires, machine: str, system: str) -> dict:
    """{nvidia-nccl-cuNN | triton | pytorch-triton[-rocm|-xpu]: version} from a distribution's Requires-Dist lines
    ("nvidia-nccl-cu12==2.19.3; platform_system == "Linux" and platform_machine == "x86_64"", torch 2.6.0's
    "triton==3.2.0; platform_system == ...", a nightly's "pytorch-triton==3.0.0+45fff310c8"), keeping only exact
    pins whose platform markers hold on this machine (a marker naming another platform_system or platform_machine is
    left out). Pure."""
    import re

    out = {}
    for line in requires or ():
        m = re.match(r"\s*(nvidia-nccl-cu\d+|triton|pytorch-triton(?:-rocm|-xpu)?)\s*==\s*([\w.+]+)\s*(?:;(.*))?$",
                     str(line))
        if not m:
            continue
        marker = m.group(3) or ""
        wanted = dict(re.findall(r"(platform_system|platform_machine)\s*==\s*['\"]([^'\"]+)['\"]", marker))
        if wanted.get("platform_system", system) != system or wanted.get("platform_machine", machine) != machine:
            continue
        out[m.group(1)] = m.group(2)
    return out


def torch_pins() -> dict:
    """The NCCL wheel and the Triton torch's installed metadata pins (pip reads the same Requires-Dist: "torch 2.2.0
    requires nvidia-nccl-cu12==2.19.3 ..., but you have nvidia-nccl-cu12 2.18.1"; "torch 2.6.0 depends on
    triton==3.2.0"). {} when torch pins none (conda, a source build, a CPU wheel) or the metadata cannot be read."""
    import platform
    from importlib import metadata

    try:
        return parse_pins(metadata.requires("torch"), platform.machine(), platform.system())
    except Exception:  # noqa: BLE001 - unreadable metadata
        return {}


def torch_build() -> dict:
    """The CUDA (or HIP) version torch was built with, from the installed torch/version.py, read as text
    (`cuda: Optional[str] = '12.1'`): `check` never imports torch. {} when it cannot be read."""
    import ast
    from importlib import metadata

    try:
        path = metadata.distribution("torch").locate_file("torch/version.py")
        tree = ast.parse(_package_text(path))
    except Exception:  # noqa: BLE001 - a torch without version.py, an unreadable file
        return {}
    out = {}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        value = getattr(node, "value", None)
        if isinstance(target, ast.Name) and target.id in ("cuda", "hip", "git_version") and \
                isinstance(value, ast.Constant) and (value.value is None or isinstance(value.value, str)):
            out[target.id] = value.value  # None: not built for it (a CPU build has cuda = None)
    return out
