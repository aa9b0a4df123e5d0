"""The `packages` section: versions from installed metadata, never by importing the package."""
from __future__ import annotations

import os
from typing import Optional

from ddpdoctor.gather import INT, LIST, OBJ, STR, Sources, gatherer

DISTRIBUTIONS = ("torch", "transformers", "tokenizers", "accelerate", "deepspeed", "datasets", "h5py", "numpy",
                 "nvidia-ml-py", "pynvml", "nvidia-nccl-cu11", "nvidia-nccl-cu12", "nvidia-nccl-cu13", "safetensors", "huggingface-hub",
                 "lightning", "pytorch-lightning", "horovod", "flash-attn", "triton", "pytorch-triton",
                 "pytorch-triton-rocm", "xformers",
                 # check17b: the CUDA library wheels torch's pip builds load (PKG016 compares LD_LIBRARY_PATH's copies)
                 "nvidia-cudnn-cu11", "nvidia-cudnn-cu12", "nvidia-cublas-cu11", "nvidia-cublas-cu12",
                 "nvidia-cusparse-cu12", "nvidia-nvjitlink-cu12", "nvidia-cuda-runtime-cu11", "nvidia-cuda-runtime-cu12")


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
    # check14 round 14 (PKG013): the NCCL wheel version torch's own metadata pins (Requires-Dist), where it pins one
    "torch_pins": OBJ, "torch_pins.*": STR,
    # check17 round 17 (PKG014): the CUDA toolkit an extension built at run time compiles with (cpp_extension's CUDA_HOME)
    "cuda_toolkit": OBJ, "cuda_toolkit.home": STR, "cuda_toolkit.from": STR, "cuda_toolkit.version": STR,
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
    # check17c (PKG016): the libstdc++.so.6 ld.so finds for torch's libraries and the GLIBCXX/CXXABI versions they need
    "libstdcxx": OBJ, "libstdcxx.path": STR, "libstdcxx.from": STR, "libstdcxx.glibcxx": STR, "libstdcxx.cxxabi": STR,
    "libstdcxx.needs_glibcxx": STR, "libstdcxx.needs_cxxabi": STR, "libstdcxx.needed_by": STR,
}


@gatherer("packages", when=("check", "preflight"), fields=FIELDS,
          nullable=('versions.*', 'torch_build.*', 'libstdcxx.needs_glibcxx', 'libstdcxx.needs_cxxabi',
                    'libstdcxx.glibcxx', 'libstdcxx.cxxabi', 'libstdcxx.needed_by',
                    'deepspeed_build.torch', 'deepspeed_build.cuda', 'deepspeed_build.hip',
                    'cuda_toolkit.version', 'xformers_build.cuda', 'xformers_build.hip', 'xformers_build.python',
                    'ld_cuda_libs[].version'))
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
    if versions.get("torch"):
        exts = torch_extensions()
        if exts is not None:
            out["torch_extensions"] = exts
    if versions.get("torch"):
        cxx = libstdcxx(src)
        if cxx:
            out["libstdcxx"] = cxx
    if versions.get("xformers"):
        xf = xformers_build()
        if xf:
            out["xformers_build"] = xf
    if versions.get("deepspeed"):
        built = deepspeed_build()
        if built:
            out["deepspeed_build"] = built
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
        with open(src.path(os.path.join(home, "version.json")), encoding="utf-8") as fh:
            version = str(json.load(fh)["cuda"]["version"])
    except (OSError, ValueError, KeyError, TypeError):
        try:
            with open(src.path(os.path.join(home, "version.txt")), encoding="utf-8") as fh:
                m = re.search(r"CUDA Version\s+([\d.]+)", fh.read(4096))
                version = m.group(1) if m else None
        except OSError:
            pass
    return {"home": home, "from": how, "version": version}


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
        with open(path, encoding="utf-8") as fh:
            version = json.load(fh).get("version") or {}
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
        return parse_torch_abi(open(path, encoding="utf-8").read(65536))
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


LD_CUDA_LIB = r"^lib(cudnn(?:_[a-z_]+)?|cublas|cublasLt|cusparse|nvJitLink|cudart)\.so\.(\d+)$"
MAX_LD_DIRS, MAX_LD_LIBS = 12, 24


def ld_cuda_libs(src: Sources) -> list:
    """The CUDA libraries (cuDNN and its sub-libraries, cuBLAS/cuBLASLt, cuSPARSE, nvJitLink, cudart) found by their
    soname (libcudnn_cnn_train.so.8) in the directories LD_LIBRARY_PATH names, each with the version its real file
    name carries (libcudnn_cnn_train.so.8 -> libcudnn_cnn_train.so.8.9.7: "8.9.7"; None when it carries none).
    ld.so searches LD_LIBRARY_PATH before a library's DT_RUNPATH, which is how torch's pip wheels point at their own
    nvidia-* copies (ld.so(8)), so these are the copies a process loads. Names only; no library is opened."""
    import re

    out = []
    dirs = [d for d in (src.environ.get("LD_LIBRARY_PATH") or "").split(":") if d and os.path.isabs(d)]
    for d in list(dict.fromkeys(dirs))[:MAX_LD_DIRS]:
        try:
            names = sorted(os.listdir(src.path(d)))
        except OSError:
            continue
        for name in names:
            if not re.match(LD_CUDA_LIB, name):
                continue
            real = os.path.basename(os.path.realpath(src.path(os.path.join(d, name))))
            base = name.rsplit(".so.", 1)[0] + ".so."
            rest = real[len(base):] if real.startswith(base) and real != name else ""
            out.append({"dir": d, "name": name, "version": rest if re.fullmatch(r"\d+(\.\d+)+", rest) else None})
            if len(out) >= MAX_LD_LIBS:
                return out
    return out


# torch's own libraries, by name prefix: libc10*, libtorch* (libtorch_cpu, _cuda, _python, _hip, _cuda_linalg ...),
# and torch 1.0-1.x's libcaffe2*/libATen (ATen lived there); both what an extension's DT_NEEDED names and where
# its c10/at/torch symbols are looked up
TORCH_LIB_PREFIXES = ("libc10", "libtorch", "libcaffe2", "libATen")
MAX_TORCH_LIBS = 24


def _is_torch_lib(name: str) -> bool:
    return name.startswith(TORCH_LIB_PREFIXES) and (name.endswith(".so") or ".so." in name)
TORCH_SYMBOL_PREFIXES = ("_ZN3c10", "_ZNK3c10", "_ZN2at", "_ZNK2at", "_ZN5torch", "_ZNK5torch",
                         "_ZTIN3c10", "_ZTVN3c10", "_ZTIN2at", "_ZTVN2at", "_ZTIN5torch", "_ZTVN5torch")
SKIP_PACKAGES = ("torch", "nvidia", "triton", "functorch", "torchgen", "numpy", "scipy", "pip", "setuptools")
SKIP_DIRS = ("node_modules", "__pycache__", "tests", "test", "fixtures")
MAX_EXT_FILES, MAX_EXT_DEPTH, MAX_MISSING, EXT_DEADLINE_S, MAX_DEVELOP_ROOTS = 64, 4, 5, 1.0, 8


def develop_roots(site: str) -> list:
    """The source checkouts a site-packages points into: the first line of each *.egg-link (`setup.py develop`,
    `pip install -e` with setuptools' legacy path) and the absolute directory lines of *.pth files (easy-install.pth,
    __editable__ path files), outside site-packages itself; at most MAX_DEVELOP_ROOTS. Extensions built in place
    (`python setup.py build develop`: maskrcnn-benchmark, detectron2, DCNv2) sit there, not in site-packages."""
    roots = []
    try:
        names = sorted(os.listdir(site))
    except OSError:
        return roots
    for name in names:
        if not name.endswith((".egg-link", ".pth")):
            continue
        try:
            with open(os.path.join(site, name), encoding="utf-8", errors="replace") as fh:
                lines = fh.read(8192).splitlines()
        except OSError:
            continue
        for line in lines[:1] if name.endswith(".egg-link") else lines:
            line = line.strip()
            if line.startswith("/") and os.path.isdir(line) and os.path.realpath(line) != os.path.realpath(site) \
                    and line not in roots:
                roots.append(line)
        if len(roots) >= MAX_DEVELOP_ROOTS:
            return roots[:MAX_DEVELOP_ROOTS]
    return roots


def _walk_so(top: str, root: str, deadline: float):
    import time

    for d, dirs, files in os.walk(root):
        if d[len(root):].count(os.sep) >= MAX_EXT_DEPTH:
            dirs[:] = []
        dirs[:] = sorted(x for x in dirs if not x.startswith(".") and x not in SKIP_DIRS)
        for f in sorted(files):
            if f.endswith(".so"):
                yield top, os.path.join(d, f)
        if time.monotonic() > deadline:
            return


def _extension_files(site: str, deadline: float):
    """(package, path) of the .so files in site-packages' top-level packages other than torch's own, then in the
    checkouts site-packages points into (develop_roots), at most MAX_EXT_DEPTH directories down, MAX_EXT_FILES in
    all, until `deadline` (time.monotonic())."""
    import time

    found = 0
    try:
        tops = sorted(os.listdir(site))
    except OSError:
        tops = []
    walks = []
    for top in tops:
        if top.startswith((".", "_")) or top.endswith((".dist-info", ".egg-info", ".pth", ".libs", ".egg-link")) \
                or top.split(".")[0] in SKIP_PACKAGES:
            continue
        root = os.path.join(site, top)
        if top.endswith(".so") and os.path.isfile(root):
            walks.append([(top.split(".")[0], root)])
        elif os.path.isdir(root):
            walks.append(_walk_so(top, root, deadline))
    for root in develop_roots(site):
        walks.append(_walk_so(os.path.basename(root.rstrip("/")), root, deadline))
    for walk in walks:
        for item in walk:
            yield item
            found += 1
            if found >= MAX_EXT_FILES:
                return
        if time.monotonic() > deadline:
            return


def _torch_lib_dir(site: str) -> Optional[str]:
    """Where torch's libc10.so is: site-packages/torch/lib (pip wheels, the pytorch channel), else the environment's
    lib/ two levels above site-packages (conda-forge's pytorch keeps libtorch there, in its libtorch package)."""
    for d in (os.path.join(site, "torch", "lib"), os.path.normpath(os.path.join(site, os.pardir, os.pardir))):
        if os.path.exists(os.path.join(d, "libc10.so")):
            return d
    return None


def torch_extensions(site: Optional[str] = None) -> Optional[list]:
    """The compiled extensions in torch's site-packages (flash-attn, apex, xformers, torch-scatter, a source build...)
    and in the checkouts it points into (develop installs: `setup.py build develop`, `pip install -e`) that link
    torch's libraries (libtorch*/libc10* in DT_NEEDED; found in torch/lib, or in a conda-forge environment's lib/),
    with their undefined GLOBAL c10/at/torch symbols that none of torch's libraries exports (looked up in each one's
    .gnu.hash): the symbols whose absence makes `import` fail with "undefined symbol: _ZN3c10..." (an extension
    built against another torch). Each entry keeps the package, the file (relative to site-packages, or absolute in
    a checkout), the first MAX_MISSING missing names, and counts. Only extensions
    with a missing symbol are listed; [] when none; None when torch's libraries cannot be read (not judged).
    Bounded: MAX_EXT_FILES files, MAX_EXT_DEPTH levels, EXT_DEADLINE_S seconds. Pure ELF reading (gather/elf.py)."""
    import time
    from importlib import metadata

    from ddpdoctor.gather.elf import read_object

    if site is None:
        try:
            site = os.path.dirname(str(metadata.distribution("torch").locate_file("torch")))
        except Exception:  # noqa: BLE001 - unreadable metadata
            return None
    lib = _torch_lib_dir(site)
    if lib is None:
        return None
    deadline = time.monotonic() + EXT_DEADLINE_S
    libs = {}
    try:
        names = sorted(n for n in os.listdir(lib) if _is_torch_lib(n))[:MAX_TORCH_LIBS]
    except OSError:
        names = []
    for name in names:
        obj = read_object(os.path.join(lib, name))
        if obj is not None:
            libs[name] = obj
    if "libc10.so" not in libs:
        for obj in libs.values():
            obj.close()
        return None
    out = []
    try:
        for package, path in _extension_files(site, deadline):
            ext = read_object(path)
            if ext is None:
                continue
            try:
                if not any(_is_torch_lib(n) for n in ext.needed()):
                    continue
                wanted = set(ext.undefined(TORCH_SYMBOL_PREFIXES))
                missing = set(wanted)
                for obj in libs.values():
                    if not missing:
                        break
                    got = obj.exports(missing)
                    if got is None:  # a torch library without .gnu.hash: not judged
                        missing = set()
                        break
                    missing -= got
            except Exception:  # noqa: BLE001 - a truncated or odd object
                continue
            finally:
                ext.close()
            if missing:
                rel = os.path.relpath(path, site)
                out.append({"package": package, "file": path if rel.startswith(os.pardir) else rel,
                            "missing": sorted(missing)[:MAX_MISSING], "missing_count": len(missing),
                            "undefined_count": len(wanted)})
            if time.monotonic() > deadline:
                break
    finally:
        for obj in libs.values():
            obj.close()
    return out


SYSTEM_LIB_DIRS = ("/lib/{arch}-linux-gnu", "/usr/lib/{arch}-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib")


def _max_version(names, prefix: str) -> Optional[str]:
    """"3.4.30" from ["GLIBCXX_3.4", "GLIBCXX_3.4.30", ...] for prefix "GLIBCXX_"; None when none. Pure."""
    import re

    best = None
    for n in names:
        m = re.fullmatch(re.escape(prefix) + r"(\d+(?:\.\d+)*)", n)
        if m:
            v = tuple(int(x) for x in m.group(1).split("."))
            best = v if best is None or v > best else best
    return ".".join(str(x) for x in best) if best else None


def libstdcxx(src: Sources, site: Optional[str] = None) -> dict:
    """The libstdc++.so.6 ld.so finds for torch's libraries, approximating ld.so(8)'s order for an object with
    DT_RUNPATH: LD_LIBRARY_PATH's directories, then the RUNPATH of libtorch_python.so ($ORIGIN expanded), then the
    system directories (ld.so.cache's extra directories are not read), with the newest GLIBCXX_/CXXABI_ version it
    defines (.gnu.version_d), and the newest ones torch's libc10/libtorch_cpu/libtorch_python need from it
    (.gnu.version_r). A copy already loaded by an earlier import is not seen. {} when unreadable."""
    import platform

    from ddpdoctor.gather.elf import read_object

    if site is None:
        try:
            from importlib import metadata

            site = os.path.dirname(str(metadata.distribution("torch").locate_file("torch")))
        except Exception:  # noqa: BLE001 - unreadable metadata
            return {}
    lib = _torch_lib_dir(site)
    if lib is None:
        return {}
    needs, needed_by, runpath = [], None, []
    for name in ("libtorch_python.so", "libtorch_cpu.so", "libc10.so", "libATen.so", "libcaffe2.so"):
        obj = read_object(os.path.join(lib, name)) if os.path.exists(os.path.join(lib, name)) else None
        if obj is None:
            continue
        try:
            got = obj.version_needs().get("libstdc++.so.6", [])
            if got and needed_by is None:
                needed_by = name
            needs += got
            if not runpath:
                runpath = [d.replace("$ORIGIN", lib).replace("${ORIGIN}", lib) for d in obj.runpath()]
        except Exception:  # noqa: BLE001 - a truncated object
            pass
        finally:
            obj.close()
    if not needs:
        return {}
    arch = platform.machine() or "x86_64"
    order = [("LD_LIBRARY_PATH", d) for d in (src.environ.get("LD_LIBRARY_PATH") or "").split(":") if d.startswith("/")]
    order += [("RUNPATH", os.path.normpath(d)) for d in runpath if d.startswith("/")]
    order += [("system", d.format(arch=arch)) for d in SYSTEM_LIB_DIRS]
    out = {"needs_glibcxx": _max_version(needs, "GLIBCXX_"), "needs_cxxabi": _max_version(needs, "CXXABI_"),
           "needed_by": needed_by}
    for origin, d in order[:24]:
        path = os.path.join(d, "libstdc++.so.6")
        if not os.path.exists(src.path(path)):
            continue
        obj = read_object(src.path(path))
        if obj is None:
            continue
        try:
            defs = obj.version_defs()
        except Exception:  # noqa: BLE001
            defs = []
        finally:
            obj.close()
        out.update({"path": path, "from": origin, "glibcxx": _max_version(defs, "GLIBCXX_"),
                    "cxxabi": _max_version(defs, "CXXABI_")})
        break
    return out


def deepspeed_build() -> dict:
    """What DeepSpeed's pre-built ops were compiled against: its setup.py writes deepspeed/git_version_info_installed.py
    with `installed_ops={...}` and `torch_info={'version': '2.1', 'cuda_version': '12.1', 'hip_version': '0.0', ...}`
    (deepspeedai/DeepSpeed setup.py @edaa7221). Read as text, never imported; {} when absent or unreadable."""
    from importlib import metadata

    try:
        path = metadata.distribution("deepspeed").locate_file("deepspeed/git_version_info_installed.py")
        text = open(path, encoding="utf-8").read()
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
    """{nvidia-nccl-cuNN: version} from a distribution's Requires-Dist lines ("nvidia-nccl-cu12==2.19.3;
    platform_system == "Linux" and platform_machine == "x86_64""), keeping only exact pins whose platform markers
    hold on this machine (a marker naming another platform_system or platform_machine is left out). Pure."""
    import re

    out = {}
    for line in requires or ():
        m = re.match(r"\s*(nvidia-nccl-cu\d+)\s*==\s*([\w.]+)\s*(?:;(.*))?$", str(line))
        if not m:
            continue
        marker = m.group(3) or ""
        wanted = dict(re.findall(r"(platform_system|platform_machine)\s*==\s*['\"]([^'\"]+)['\"]", marker))
        if wanted.get("platform_system", system) != system or wanted.get("platform_machine", machine) != machine:
            continue
        out[m.group(1)] = m.group(2)
    return out


def torch_pins() -> dict:
    """The NCCL wheel torch's installed metadata pins (pip reads the same Requires-Dist: "torch 2.2.0 requires
    nvidia-nccl-cu12==2.19.3 ..., but you have nvidia-nccl-cu12 2.18.1"). {} when torch pins none (conda, a
    source build, a CPU wheel) or the metadata cannot be read."""
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
        tree = ast.parse(open(path, encoding="utf-8").read())
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


MAX_PRELOADED = 8


def nccl_preloaded(src: Sources) -> list:
    """The LD_PRELOAD entries that are NCCL itself, each with the name of the file it resolves to and the version
    that name carries (libnccl.so -> libnccl.so.2 -> libnccl.so.2.18.3), both left out when unknown. ld.so(8) takes
    LD_PRELOAD items separated by spaces or colons and maps them before the program's own libraries, so a
    preloaded libnccl.so.2 is the NCCL torch binds to (PKG011)."""
    from ddpdoctor.facts.env import nccl_version_in_name, preloaded_nccl

    out: list = []
    for item in preloaded_nccl(src.environ.get("LD_PRELOAD")):
        entry = {"path": item}
        try:
            local = src.path(item)
            if os.path.exists(local):
                entry["real_name"] = os.path.basename(os.path.realpath(local))
        except OSError:
            pass
        version = nccl_version_in_name(entry.get("real_name") or item)
        if version:
            entry["version"] = version
        out.append(entry)
        if len(out) >= MAX_PRELOADED:
            break
    return out
