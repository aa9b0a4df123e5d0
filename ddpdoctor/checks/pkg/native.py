"""The native libraries torch loads beside its own: PKG015 (a conda environment's CUDA packages), PKG016
(LD_LIBRARY_PATH's CUDA libraries, libstdc++), PKG017 (glibc), PKG021
(a second copy of Intel's OpenMP runtime), PKG024 (another torch's libraries in LD_LIBRARY_PATH),
PKG023 (magma built for another CUDA), PKG027 (an Intel ITT symbol torch needs that its MKL no longer exports)."""
from __future__ import annotations

import re

from ddpdoctor.facts import gpu_versions
from ddpdoctor.model import error, info, warning
from ddpdoctor.model.registry import check


CONDA_CUDA_RUNTIME = ("cudatoolkit", "cuda-toolkit", "cuda-runtime", "cuda-cudart", "cuda-libraries", "cuda-version",
                      "libcublas", "pytorch-cuda")


@check("PKG015", "conda-cuda-vs-torch", family="packages", needs=("packages",), reads=("gpus",))
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

        And a conda CUDA runtime package (cudatoolkit, cuda-runtime, cuda-cudart) newer than the NVIDIA
        driver supports (gpus.cuda_driver, what nvidia-smi prints as "CUDA Version"): of a newer major, or,
        before CUDA 11 (no minor-version compatibility: docs.nvidia.com/deploy/cuda-compatibility), a newer
        minor. Its libcudart refuses the driver at the first CUDA call ("CUDA driver version is insufficient
        for CUDA runtime version"), which is the first thing a program using it hits - before any kernel, so
        before a GPU too old for the build (GPU032) can show. When the package is torch's own CUDA, GPU023
        says it; otherwise this is a warning (a pip torch brings its own runtime; extensions and other
        libraries of the environment load this one).

    Example
        conda's cudatoolkit 11.0.221 in an environment whose torch is built for CUDA 11.1.

    Fix
        conda install cudatoolkit=<torch's CUDA major.minor>   # or remove it (pip wheels of torch bring their
        own CUDA libraries: conda remove cudatoolkit)
    """
    pk = snap.get("packages") or {}
    build = pk.get("torch_build") if isinstance(pk.get("torch_build"), dict) else {}
    torch_cuda = gpu_versions.release(build.get("cuda"))[:2]
    yield from _conda_cuda_beyond_the_driver(snap, pk, torch_cuda)
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


CONDA_CUDA_RUNTIME_LIBS = ("cudatoolkit", "cuda-runtime", "cuda-cudart")


def _conda_cuda_beyond_the_driver(snap, pk, torch_cuda):
    """PKG015: a conda CUDA runtime package newer than the driver's CUDA (a newer major; before CUDA 11, a newer
    minor: no minor-version compatibility). Skipped when it is torch's own CUDA (GPU023 judges that)."""
    gpus = (snap.get("gpus") or {}) if "gpus" in snap else {}
    driver = gpu_versions.release(gpus.get("cuda_driver"))[:2] if isinstance(gpus, dict) else ()
    if len(driver) < 2:
        return
    for rec in pk.get("conda_cuda") or []:
        if not isinstance(rec, dict) or rec.get("name") not in CONDA_CUDA_RUNTIME_LIBS:
            continue
        have = gpu_versions.release(rec.get("version"))[:2]
        if len(have) < 2 or have == tuple(torch_cuda):
            continue
        if not (have[0] > driver[0] or (have[0] < 11 and have > driver)):
            continue
        need = gpu_versions.min_driver_of_cuda_major().get(have[0])
        yield warning(
            f"The conda environment's {rec['name']} {rec['version']} (CUDA {have[0]}.{have[1]}) is newer than driver "
            f"{gpus.get('driver_version')} supports (CUDA {gpus.get('cuda_driver')})",
            detail=("Its libcudart refuses an older driver at the first CUDA call: \"CUDA driver version is "
                    "insufficient for CUDA runtime version\" (cudaErrorInsufficientDriver), and torch says \"The NVIDIA "
                    "driver on your system is too old\" when it is torch's runtime. "
                    + ("Before CUDA 11 a runtime needs a driver of its own minor or newer (no minor-version "
                       "compatibility: NVIDIA's CUDA compatibility guide). " if have[0] < 11 else "")
                    + "This is hit before any kernel runs, so a GPU-architecture problem (GPU032) shows only after it "
                    f"is fixed. Found in {rec.get('prefix')}/conda-meta; torch is built for CUDA "
                    f"{'.'.join(str(x) for x in torch_cuda) or 'unknown'} (a pip torch brings its own runtime; this "
                    "one is loaded by a conda build of torch and by the environment's extensions)."),
            fix=(f"conda install {rec['name']}={gpus.get('cuda_driver')}   # a CUDA the driver supports; or upgrade the "
                 "driver" + (f" (CUDA {have[0]}.x needs {need}+)" if need else "")),
            subjects=[f"pkg:{rec['name']}", "driver:nvidia"],
            evidence={"conda": rec, "driver_version": gpus.get("driver_version"), "driver_cuda": gpus.get("cuda_driver"),
                      "torch_cuda": ".".join(str(x) for x in torch_cuda) or None})
        return


LD_LIB_WHEELS = {"cudnn": "nvidia-cudnn-cu{}", "cublas": "nvidia-cublas-cu{}", "cublasLt": "nvidia-cublas-cu{}",
                 "cusparse": "nvidia-cusparse-cu{}", "nvJitLink": "nvidia-nvjitlink-cu{}",
                 "cudart": "nvidia-cuda-runtime-cu{}"}


# The cuDNN the download.pytorch.org "+cuXXX" wheels of torch before 2.1 carry inside torch/lib (no nvidia-cudnn
# wheel), as torch's own check names it when another one is loaded ("PyTorch was compiled against (8, 7, 0)",
# torch/backends/cudnn/__init__.py): data/gpu_versions.json torch_bundled_cudnn (pytorch/builder's install_cuda.sh
# per CUDA version: 1.12/1.13 +cu116 8.3.2, 1.13/2.0 +cu117 8.5.0, 2.0 +cu118 8.7.0; 1.12 +cu113 8.3.2 from
# pytorch/pytorch#80637). Other pairs are not known here.
# From 2.1 the download.pytorch.org "+cu" wheels declare the nvidia-* wheels as dependencies instead of carrying the
# libraries (pytorch/pytorch#104757, "Update cuDNN to 8.9.2.26 ... manywheel-py3_8-cuda12_1-with-pypi-cudnn").
TORCH_CUDNN_WHEELS_SINCE = (2, 1)


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
        is a warning; a copy whose version cannot be read is info. Under a torch that carries its cuDNN inside
        torch/lib (a download.pytorch.org "+cu" wheel before 2.1, no nvidia-cudnn wheel), a cuDNN there that
        torch's own check refuses (another major, or a minor below the one it was built with, where that is
        known: data/gpu_versions.json torch_bundled_cudnn, the cuDNN pytorch/builder's install_cuda.sh put in
        each CUDA version's build image - 1.12/1.13 +cu116 8.3.2, 1.13/2.0 +cu117 8.5.0, 2.0 +cu118 8.7.0,
        1.12 +cu113 8.3.2) is a warning; one whose fit is not known is info. The same for a conda build of torch
        from the pytorch channel, whose build string names the cuDNN it was built with
        (py3.9_cuda11.3_cudnn8.2.0_0: pytorch/builder conda/build_pytorch.sh; data/gpu_versions.json
        conda_torch_build_string).

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
        yield from _ld_cudnn_vs_bundled(pk, versions)
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


def _ld_cudnn_vs_bundled(pk, versions):
    """A cuDNN in LD_LIBRARY_PATH under a torch that carries its own in torch/lib (a download.pytorch.org "+cu" wheel
    and no nvidia-cudnn wheel of that major): torch loads the first libcudnn.so.N ld.so finds, LD_LIBRARY_PATH's, and
    refuses one whose major differs or whose minor is below its own (torch/backends/cudnn/__init__.py: "cuDNN
    version incompatibility: PyTorch was compiled against (8, 7, 0) but found runtime version (8, 2, 4) ... one
    possibility is that there is a conflicting cuDNN in LD_LIBRARY_PATH", bmaltais/kohya_ss#1096)."""
    torch_v = str(versions.get("torch") or "")
    build = pk.get("torch_build") if isinstance(pk.get("torch_build"), dict) else {}
    cuda = str(build.get("cuda") or "")
    installs = pk.get("torch_installs") if isinstance(pk.get("torch_installs"), dict) else {}
    # a pytorch-channel conda build names its cuDNN in its build string (py3.9_cuda11.3_cudnn8.2.0_0: check25)
    conda = gpu_versions.conda_build_cudnn(installs.get("conda_builds")) if installs.get("conda") else None
    if ("+cu" not in torch_v and not conda) or not cuda:
        return
    rel = gpu_versions.release(torch_v)
    if not conda and rel[:2] >= TORCH_CUDNN_WHEELS_SINCE:
        return  # its '+cu' wheels take cuDNN from nvidia-cudnn: without that wheel, torch came from elsewhere (conda, NGC)
    own = conda or gpu_versions.torch_bundled_cudnn().get((".".join(str(x) for x in rel[:2]),
                                                           ".".join(cuda.split(".")[:2])))
    for lib in pk.get("ld_cuda_libs") or []:
        if not isinstance(lib, dict):
            continue
        family, major = _ld_lib_family(str(lib.get("name") or ""))
        if family != "cudnn" or major is None:
            continue
        if any(versions.get(f"nvidia-cudnn-cu{cu}") for cu in ("11", "12", "13")):
            return  # torch's cuDNN is a wheel: the rows above judge it
        have = gpu_versions.release(lib.get("version"))
        want = gpu_versions.release(own) if own else ()
        if have and want and have[:1] == want[:1] and have[1:2] >= want[1:2]:
            return  # torch accepts the same major with a minor at least its own
        refused = bool(have and want)
        where = str(lib.get("dir"))
        name = f"{lib.get('name')} {lib.get('version') or '(version unknown)'}"
        make = warning if refused else info
        carries = f"the cuDNN conda's torch {torch_v} was built with" if conda else f"the cuDNN torch {torch_v} carries"
        yield make(f"LD_LIBRARY_PATH puts {name} ({where}) before {carries}"
                   + (f" ({own}): torch refuses it" if refused else ""),
                   detail=("This torch brings its own cuDNN in torch/lib, found through its RUNPATH; ld.so searches "
                           "LD_LIBRARY_PATH first (ld.so(8)), so this copy is loaded"
                           + (f", and torch's check refuses a runtime cuDNN of another major or an older minor than the "
                              f"{own} it was built with: \"cuDNN version incompatibility: PyTorch was compiled against "
                              f"({', '.join(own.split('.'))}) but found runtime version ({', '.join(str(x) for x in have[:3])})"
                              "\" (bmaltais/kohya_ss#1096)." if refused else
                              "; torch accepts a runtime cuDNN of its own major with a minor at least its own, and "
                              "which it was built with is not known here.")),
                   fix=f"unset LD_LIBRARY_PATH   # or drop {where} from it; torch brings its own cuDNN",
                   subjects=["env:LD_LIBRARY_PATH", "pkg:torch"],
                   evidence={"library": lib, "torch": torch_v, "torch_cudnn": own,
                             "from": "conda build string" if conda else "pip '+cu' wheel table"})
        return


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


@check("PKG021", "duplicate-intel-openmp", family="packages", needs=("packages",), reads=("env", "host", "launcher", "launch"))
def duplicate_intel_openmp(snap):
    """torch carries its own copy of Intel's OpenMP runtime, and the environment holds another; or MKL's threading
    layer is set (or left to mkl-service) to Intel's runtime while torch loads GNU's.

    What it checks
        packages.openmp_runtimes: the OpenMP runtime libraries in torch's own directories (torch/lib,
        torch/.dylibs), in the Python environment (sys.prefix/lib; Library/bin of a conda environment
        on Windows) and vendored by other wheels (*.libs). Two copies of Intel's runtime (libiomp5.so,
        libiomp5.dylib, libiomp5md.dll) in different directories, one of them torch's: the pip wheel's
        copy beside a conda environment's intel-openmp, which MKL builds of numpy and scipy load. LLVM's
        libomp counts as a copy of the same runtime (it is Intel's runtime, upstreamed into LLVM, and
        registers itself the same way): torch's libomp beside an environment's libiomp5, or the reverse.

    Why it matters
        Intel's runtime refuses to start a second copy of itself in one process: "OMP: Error #15:
        Initializing libiomp5md.dll, but found libiomp5md.dll already initialized ... multiple copies
        of the OpenMP runtime have been linked into the program" and the process aborts
        (aleximmer/Laplace#56: Windows, conda, torch 1.8.1; pytorch/pytorch#44282: torch's own
        torch/.dylibs/libiomp5.dylib on macOS). KMP_DUPLICATE_LIB_OK=TRUE lets it run, in the
        runtime's words "unsafe, unsupported, undocumented", and "may cause crashes or silently
        produce incorrect results".

    Also
        mkl-service (conda's MKL numpy imports it) with a GNU OpenMP runtime recorded (the libgomp torch
        loads on Linux): MKL_THREADING_LAYER=INTEL, or MKL_THREADING_LAYER unset on a job that starts
        several processes. mkl-service's initialiser refuses Intel's layer once another OpenMP runtime is
        loaded: "Error: mkl-service + Intel(R) MKL: MKL_THREADING_LAYER=INTEL is incompatible with
        libgomp.so.1 library. Try to import numpy first or set the threading layer accordingly. Set
        MKL_SERVICE_FORCE_INTEL to force it." and exit(1) (a warning when INTEL is set); left unset, it
        picks INTEL when it is imported before torch and exports MKL_THREADING_LAYER=INTEL to every process
        started later, so spawned ranks that import torch before numpy exit; that depends on the parent's
        import order (torchrun imports torch first and exports GNU), which is not read: a note
        (IntelPython/mkl-service mkl/_mklinitmodule.c, _preload_threading_layer; data/mkl_threading.json;
        pytorch/pytorch#37377). Fix: export MKL_THREADING_LAYER=GNU.

    Example
        pip install torch in a conda environment whose numpy is MKL's (conda's intel-openmp).

    Fix
        One runtime per environment: install torch from the same channel as numpy (conda install
        pytorch ...), or numpy without MKL (conda install nomkl / pip install numpy from PyPI).
    """
    from ddpdoctor.facts.env import env_of  # noqa: PLC0415

    yield from _mkl_layer_vs_libgomp(snap)
    runtimes = (snap["packages"].get("openmp_runtimes") or [])
    # LLVM's libomp is the same runtime as Intel's (llvm-project openmp/runtime: one kmp_runtime.cpp, whose
    # __kmp_register_library_startup registers __KMP_REGISTERED_LIB_<pid> for either): a libomp beside a libiomp5
    # is a second copy as well ("OMP: Error #15: Initializing libomp.dylib, but found libiomp5.dylib already
    # initialized"; the DuplicateLibrary hint of openmp/runtime/src/i18n/en_US.txt @0267abce)
    intel = [r for r in runtimes if isinstance(r, dict) and r.get("kind") in ("intel", "llvm")]
    dirs = {}
    for r in intel:
        dirs.setdefault(str(r.get("path") or "").replace("\\", "/").rsplit("/", 1)[0], r)
    owners = {r.get("owner") for r in dirs.values()}
    if len(dirs) < 2 or "torch" not in owners:
        return
    env = env_of(snap)
    allowed = str(env.get("KMP_DUPLICATE_LIB_OK") or "").strip().upper() in ("TRUE", "1", "YES")
    paths = [r["path"] for r in dirs.values()][:4]
    level = info if allowed else warning
    kinds = {r.get("kind") for r in dirs.values()}
    what = "Intel's OpenMP runtime" if kinds == {"intel"} else (
        "LLVM's OpenMP runtime" if kinds == {"llvm"} else "the Intel/LLVM OpenMP runtime (libiomp5 and libomp)")
    yield level(f"two copies of {what}, torch's and another ({', '.join(paths)})",
                detail=("A process that loads both (torch, then numpy or scipy built with MKL) aborts with \"OMP: Error "
                        "#15: Initializing libiomp5..., but found libiomp5... already initialized\"."
                        + (" KMP_DUPLICATE_LIB_OK is set, so it runs on; the runtime calls that unsafe and says it may "
                           "crash or give incorrect results." if allowed else "")),
                fix="conda install pytorch -c pytorch   # torch from the environment's channel; or: conda install nomkl",
                subjects=["pkg:torch"] + (["KMP_DUPLICATE_LIB_OK"] if allowed else []),
                evidence={"intel_openmp": paths, "owners": sorted(o for o in owners if o),
                          "kmp_duplicate_lib_ok": allowed})


def _mkl_layer_vs_libgomp(snap):
    """mkl-service refuses MKL_THREADING_LAYER=INTEL once GNU OpenMP is loaded (facts.openmp, data/mkl_threading.json)."""
    from ddpdoctor.facts import openmp  # noqa: PLC0415
    from ddpdoctor.facts.env import env_of  # noqa: PLC0415
    from ddpdoctor.facts.ranks import local_ranks, world_size  # noqa: PLC0415

    pk = snap["packages"]
    env = env_of(snap)
    processes = max(local_ranks(snap).value or 1, world_size(snap).value or 1)
    hit = openmp.mkl_layer_conflict(pk.get("versions") or {}, pk.get("openmp_runtimes") or [], env, processes)
    if not hit:
        return
    data = openmp.mkl_threading()
    src = data["source"]
    how = ("MKL_THREADING_LAYER=INTEL is set" if hit["rule"] == "set_intel" else
           f"MKL_THREADING_LAYER is unset on a job of {processes} processes: a process that imports numpy (mkl-service) "
           "before torch picks INTEL and exports it to the processes it starts afterwards (torch.multiprocessing "
           "spawn, a program's own workers); a launcher that imports torch first (torchrun) exports GNU instead, so "
           "whether it happens depends on the import order, which check does not read (a note, not a verdict)")
    # set: every process that imports torch first exits; unset: only the children of a parent that imported numpy first
    make = warning if hit["rule"] == "set_intel" else info
    yield make(f"{hit['service']} {hit['version']} with GNU OpenMP ({hit['runtime']}): MKL_THREADING_LAYER=INTEL is "
                  f"incompatible with {hit['runtime']}, a process that loads torch before numpy exits",
                  detail=(f"{how}. When a process has loaded torch's GNU OpenMP runtime first, mkl-service's initialiser "
                          f"prints \"{data['message'].split(chr(10))[0] % hit['runtime']}\" and calls exit(1) "
                          f"({src['repo']} {src['path']}, {src['symbol'].split(' ')[0]}; pytorch/pytorch#37377)."),
                  fix=data["fix"] + "   # or import numpy before torch in every process",
                  subjects=["MKL_THREADING_LAYER", f"pkg:{hit['service']}", "pkg:torch"],
                  evidence={"rule": hit["rule"], hit["service"]: hit["version"], "openmp_runtime": hit["path"],
                            "MKL_THREADING_LAYER": hit["layer"], "processes": processes})


@check("PKG024", "ld-library-path-other-libtorch", family="packages", needs=("packages",))
def ld_library_path_other_libtorch(snap):
    """LD_LIBRARY_PATH names a directory holding another torch's libraries (libtorch_cpu.so, libc10.so).

    What it checks
        packages.ld_torch_libs: torch's own library names (libc10*, libtorch*, libcaffe2*, libATen) in
        the directories LD_LIBRARY_PATH names, with the Python torch installed; directories that are
        the installed torch's own torch/lib (packages.torch_installs) are left out.

    Why it matters
        torch's extension module finds libtorch_cpu.so and libc10.so through its DT_RUNPATH, and ld.so
        searches LD_LIBRARY_PATH first (ld.so(8)): a C++ libtorch distribution's lib/ put there (often
        from .bashrc, for C++ work) is loaded in place of the wheel's own, of another version, and
        `import torch` segfaults or fails with undefined symbols (pytorch/pytorch#96797: "caused by a
        torch_cpu.so ... libtorch's runtime path added in .bashrc conflicted with pytorch's lib").

    Example
        export LD_LIBRARY_PATH=$HOME/libtorch/lib:$LD_LIBRARY_PATH   # in .bashrc, then python train.py

    Fix
        Take the libtorch directory out of LD_LIBRARY_PATH for Python jobs (set it only in the C++
        program's environment, or link the C++ program with an rpath).
    """
    pk = snap.get("packages") or {}
    if not (pk.get("versions") or {}).get("torch"):
        return
    own = {str(d.get("location") or "").rstrip("/") + "/torch/lib"
           for d in ((pk.get("torch_installs") or {}).get("dists") or []) if isinstance(d, dict)}
    libs = [r for r in pk.get("ld_torch_libs") or [] if isinstance(r, dict) and str(r.get("dir") or "").rstrip("/") not in own]
    if not libs:
        return
    dirs = list(dict.fromkeys(str(r.get("dir")) for r in libs))
    names = sorted({str(r.get("name")) for r in libs})
    yield warning(f"LD_LIBRARY_PATH holds another torch's libraries ({', '.join(names[:3])} in {', '.join(dirs[:2])})",
                  detail=("ld.so searches LD_LIBRARY_PATH before the DT_RUNPATH through which torch's extension finds "
                          "its own libtorch_cpu.so and libc10.so (ld.so(8)), so these are loaded instead: `import "
                          "torch` segfaults or fails with undefined symbols when their version differs."),
                  fix="export LD_LIBRARY_PATH=<the same without " + dirs[0] + ">   # set it only for the C++ program",
                  subjects=["env:LD_LIBRARY_PATH", "pkg:torch"], evidence={"dirs": dirs[:4], "libs": names[:8]})


def _magma_cuda(name: str):
    """(major, minor) from a magma package's name: magma-cuda80 -> (8, 0), magma-cuda92 -> (9, 2), magma-cuda100 ->
    (10, 0), magma-cuda121 -> (12, 1); None when it does not parse."""
    m = re.fullmatch(r"magma-cuda(\d+)(\d)", name or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


@check("PKG023", "magma-for-another-cuda", family="packages", needs=("packages",))
def magma_for_another_cuda(snap):
    """The conda environment's magma was built for another CUDA than the installed torch.

    What it checks
        packages.conda_magma: the magma-cudaXY packages among the environment's conda records (the name
        carries the CUDA they were built with: magma-cuda80 is CUDA 8.0, magma-cuda121 12.1) against the
        CUDA torch was built with (packages.torch_build). Another CUDA major.minor is a warning.

    Why it matters
        A torch built from source links the environment's magma; one built for another CUDA brings that
        CUDA's runtime pieces into the process, and CUDA initialisation hangs or takes minutes
        (pytorch/pytorch#3018: "the magma conda package built with CUDA 8 conflicts with pytorch when it
        is built with CUDA 9"; pytorch/pytorch#12283, resolved "by making sure you had the correct version
        of magma installed", per pytorch/pytorch#12275).

    Example
        conda install magma-cuda80, then a torch source build with CUDA 9.0.

    Fix
        conda install magma-cudaXY for torch's CUDA (XY = its major and minor), or remove magma.
    """
    pk = snap.get("packages") or {}
    cuda = (pk.get("torch_build") or {}).get("cuda")
    want = gpu_versions.release(cuda)[:2] if cuda else ()
    if len(want) < 2:
        return
    bad = [m for m in pk.get("conda_magma") or [] if isinstance(m, dict) and _magma_cuda(str(m.get("name")))
           and _magma_cuda(str(m.get("name"))) != tuple(want)]
    if not bad:
        return
    m = bad[0]
    mc = ".".join(map(str, _magma_cuda(str(m["name"]))))
    yield warning(f"conda's {m['name']} {m.get('version') or ''} was built for CUDA {mc}; torch was built with CUDA {cuda}".replace("  ", " "),
                  detail=("magma is named for the CUDA it was built against; a torch built against the environment's "
                          "magma of another CUDA loads both, and CUDA initialisation hangs or takes minutes "
                          "(pytorch/pytorch#3018, #12283)."),
                  fix=f"conda install magma-cuda{''.join(map(str, want))}   # or conda remove {m['name']}",
                  subjects=["pkg:torch", f"pkg:{m['name']}"], evidence={"magma": bad[:4], "torch_cuda": cuda})


@check("PKG027", "torch-needs-symbol-mkl-lacks", family="packages", needs=("packages",))
def torch_needs_symbol_mkl_lacks(snap):
    """torch's libtorch_cpu.so needs an Intel ITT symbol that the MKL it links no longer exports.

    What it checks
        packages.torch_mkl: libtorch_cpu.so's GLOBAL undefined iJIT_* symbols (its ELF .dynsym) and the MKL
        libraries of its DT_NEEDED, found as ld.so finds them (LD_LIBRARY_PATH, its RUNPATH, torch/lib, the
        system directories) with the MKL libraries they need in turn, each looked up through its .gnu.hash.
        A symbol none of them exports, with every MKL library found and readable, is an error.

    Why it matters
        A conda build of torch (the pytorch channel) links MKL dynamically and takes iJIT_NotifyEvent from
        it; MKL 2024.1 no longer exports it, and `import torch` stops: "ImportError: .../libtorch_cpu.so:
        undefined symbol: iJIT_NotifyEvent" (pytorch/pytorch#123097; open-mmlab/mmpretrain#1900, fixed by
        `conda install mkl==2024.0`). pip wheels link MKL statically and carry the symbol.

    Example
        conda install pytorch==2.0.1 pytorch-cuda=11.8 -c pytorch -c nvidia, which resolves mkl 2024.1.

    Fix
        conda install mkl==2024.0 (pin mkl<2024.1 in the environment file), or install torch from pip.
    """
    pk = snap.get("packages") or {}
    fact = pk.get("torch_mkl") if isinstance(pk.get("torch_mkl"), dict) else {}
    und = [s for s in fact.get("undefined") or [] if isinstance(s, str)]
    libs = [p for p in fact.get("mkl_libs") or [] if isinstance(p, str)]
    if not und or not libs or fact.get("unresolved"):
        return  # nothing needed, or an MKL library not found / not readable: not judged
    missing = [s for s in und if s not in set(fact.get("exported") or [])]
    if not missing:
        return
    yield error(f"torch's libtorch_cpu.so needs {missing[0]}, which none of the MKL libraries it links exports",
                detail=("The conda build of torch links MKL dynamically and takes Intel's ITT symbols from it; MKL "
                        "2024.1 stopped exporting iJIT_NotifyEvent, so `import torch` fails with \"ImportError: "
                        f"{fact.get('lib')}: undefined symbol: {missing[0]}\" (pytorch/pytorch#123097). MKL libraries "
                        "read: " + ", ".join(libs[:4]) + "."),
                fix="conda install mkl==2024.0   # pin mkl<2024.1 in the environment; or install torch from pip (MKL linked in)",
                subjects=["pkg:torch", "pkg:mkl"], evidence={"torch_mkl": fact, "missing": missing})
