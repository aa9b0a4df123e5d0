"""Native-library facts of the `packages` section: the shared objects a process will load, read from the file
system and from ELF headers (ld.so's search order, sonames, DT_NEEDED / .dynsym / .gnu.version_*), never by loading
them. What each function returns is a field of the `packages` section (gather/packages.py, the gatherer); the ELF
reading itself is gather/elf.py."""
from __future__ import annotations

import os
import re
from typing import Optional

from ddpdoctor.gather import Sources
from ddpdoctor.model.inputs import open_regular

LD_CUDA_LIB = r"^lib(cudnn(?:_[a-z_]+)?|cublas|cublasLt|cusparse|nvJitLink|cudart)\.so\.(\d+)$"
MAX_LD_DIRS, MAX_LD_LIBS = 12, 24


def ld_path_listings(src: Sources) -> list:
    """[(dir, its file names sorted)] for the first MAX_LD_DIRS absolute directories LD_LIBRARY_PATH names, each once,
    in order; a directory that cannot be listed is left out (ld_cuda_libs and ld_torch_libs look through these)."""
    out = []
    dirs = [d for d in (src.environ.get("LD_LIBRARY_PATH") or "").split(":") if d and os.path.isabs(d)]
    for d in list(dict.fromkeys(dirs))[:MAX_LD_DIRS]:
        try:
            out.append((d, sorted(os.listdir(src.path(d)))))
        except OSError:
            continue
    return out


def ld_cuda_libs(src: Sources) -> list:
    """The CUDA libraries (cuDNN and its sub-libraries, cuBLAS/cuBLASLt, cuSPARSE, nvJitLink, cudart) found by their
    soname (libcudnn_cnn_train.so.8) in the directories LD_LIBRARY_PATH names, each with the version its real file
    name carries (libcudnn_cnn_train.so.8 -> libcudnn_cnn_train.so.8.9.7: "8.9.7"; None when it carries none).
    ld.so searches LD_LIBRARY_PATH before a library's DT_RUNPATH, which is how torch's pip wheels point at their own
    nvidia-* copies (ld.so(8)), so these are the copies a process loads. Names only; no library is opened."""
    import re

    out = []
    for d, names in ld_path_listings(src):
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


def ld_torch_libs(src: Sources) -> list:
    """torch's own shared libraries (libc10*, libtorch*, libcaffe2*, libATen: TORCH_LIB_PREFIXES) found by name in the
    directories LD_LIBRARY_PATH names: a C++ libtorch distribution's lib/, another torch's torch/lib. [{dir, name}], at
    most MAX_LD_LIBS; names only, nothing opened. check18 (PKG024)."""
    out = []
    for d, names in ld_path_listings(src):
        for name in names:
            if _is_torch_lib(name):
                out.append({"dir": d, "name": name})
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
            with open_regular(os.path.join(site, name), "r", encoding="utf-8", errors="replace") as fh:
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
        root = os.path.join(site, top)
        module = top.endswith(".so") and not top.startswith(".")  # a top-level module (_cffi_backend...so) too
        if (top.startswith((".", "_")) and not module) \
                or top.endswith((".dist-info", ".egg-info", ".pth", ".libs", ".egg-link")) \
                or top.split(".")[0] in SKIP_PACKAGES:
            continue
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


def torch_site() -> Optional[str]:
    """The site-packages folder that holds the installed torch, from its distribution metadata (not an import of
    torch); None when the metadata cannot be read. The default `site` of the native gatherers below."""
    from importlib import metadata

    try:
        return os.path.dirname(str(metadata.distribution("torch").locate_file("torch")))
    except Exception:  # noqa: BLE001 - unreadable metadata
        return None


def _torch_lib_dir(site: str) -> Optional[str]:
    """Where torch's libc10.so is: site-packages/torch/lib (pip wheels, the pytorch channel), else the environment's
    lib/ two levels above site-packages (conda-forge's pytorch keeps libtorch there, in its libtorch package)."""
    for d in (os.path.join(site, "torch", "lib"), os.path.normpath(os.path.join(site, os.pardir, os.pardir))):
        if os.path.exists(os.path.join(d, "libc10.so")):
            return d
    return None


def _torch_library(site: Optional[str], name: str) -> tuple:
    """(torch's library folder, the ELF headers of its library `name` there) for `site` (the installed torch's
    site-packages when None: torch_site); (folder or None, None) when the folder or the library cannot be found or
    read. The one prelude of the gatherers that read one of torch's own libraries."""
    from ddpdoctor.gather.elf import read_object

    site = torch_site() if site is None else site
    lib = _torch_lib_dir(site) if site is not None else None
    path = os.path.join(lib, name) if lib else None
    return lib, (read_object(path) if path and os.path.exists(path) else None)


def absent_torch_libraries(needed, present) -> list:
    """The libtorch*/libc10* names in an extension's DT_NEEDED that torch's library folder (`present`, its file
    names) does not hold: a library of another torch build (libtorch_cuda_cu.so / libtorch_cuda_cpp.so of a
    split-CUDA torch under a torch that ships one libtorch_cuda.so), which ld.so(8) then finds nowhere and
    `import` fails with "ImportError: libtorch_cuda_cu.so: cannot open shared object file". Pure."""
    return [n for n in needed if _is_torch_lib(n) and n not in present]


def torch_extensions(site: Optional[str] = None) -> Optional[list]:
    """The compiled extensions in torch's site-packages (flash-attn, apex, xformers, torch-scatter, a source build...)
    and in the checkouts it points into (develop installs: `setup.py build develop`, `pip install -e`) that link
    torch's libraries (libtorch*/libc10* in DT_NEEDED; found in torch/lib, or in a conda-forge environment's lib/),
    with their undefined GLOBAL c10/at/torch symbols that none of torch's libraries exports (looked up in each one's
    .gnu.hash): the symbols whose absence makes `import` fail with "undefined symbol: _ZN3c10..." (an extension
    built against another torch). Each entry keeps the package, the file (relative to site-packages, or absolute in
    a checkout), the first MAX_MISSING missing names, and counts, and `absent_libraries`: torch libraries it
    needs that torch's folder does not hold (absent_torch_libraries). Only extensions
    with a missing symbol or an absent library are listed; [] when none; None when torch's libraries cannot be read (not judged).
    Bounded: MAX_EXT_FILES files, MAX_EXT_DEPTH levels, EXT_DEADLINE_S seconds. Pure ELF reading (gather/elf.py)."""
    import time

    from ddpdoctor.gather.elf import read_object

    if site is None:
        site = torch_site()
        if site is None:
            return None
    lib = _torch_lib_dir(site)
    if lib is None:
        return None
    deadline = time.monotonic() + EXT_DEADLINE_S
    libs = {}
    try:
        present = set(os.listdir(lib))
    except OSError:
        present = set()
    names = sorted(n for n in present if _is_torch_lib(n))[:MAX_TORCH_LIBS]
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
                needed = ext.needed()
                if not any(_is_torch_lib(n) for n in needed):
                    continue
                absent = absent_torch_libraries(needed, present)
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
            if missing or absent:
                rel = os.path.relpath(path, site)
                out.append({"package": package, "file": path if rel.startswith(os.pardir) else rel,
                            "missing": sorted(missing)[:MAX_MISSING], "missing_count": len(missing),
                            "undefined_count": len(wanted), **({"absent_libraries": absent} if absent else {})})
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
        site = torch_site()
        if site is None:
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


# symbols of Intel's ITT/JIT profiling API that a conda build of torch takes from the MKL it links dynamically; MKL
# 2024.1 stopped exporting iJIT_NotifyEvent ("ImportError: .../libtorch_cpu.so: undefined symbol: iJIT_NotifyEvent",
# pytorch/pytorch#123097); pip wheels link MKL statically and carry it
MKL_ITT_PREFIXES = ("iJIT_",)


def torch_mkl_symbols(src: Sources, site: Optional[str] = None) -> dict:
    """{lib, undefined, mkl_libs, unresolved, exported} for torch's libtorch_cpu.so: its GLOBAL undefined iJIT_*
    symbols (.dynsym), the MKL libraries in its DT_NEEDED as ld.so would find them (LD_LIBRARY_PATH, its RUNPATH with
    $ORIGIN expanded, torch/lib, the system directories) and the MKL libraries those need in turn, which of the
    symbols any of them or another direct DT_NEEDED library exports (.gnu.hash), and the MKL names not found. {}
    when libtorch_cpu.so needs no such symbol (a pip wheel: MKL linked in) or links no MKL library, or cannot be
    read. Headers only, never loaded."""
    import platform

    from ddpdoctor.gather.elf import read_object

    lib, obj = _torch_library(site, "libtorch_cpu.so")
    if obj is None:
        return {}
    try:
        und = sorted(set(obj.undefined(MKL_ITT_PREFIXES)))
        direct = obj.needed()
        needed = [n for n in direct if n.startswith("libmkl")]
        runpath = [os.path.normpath(d.replace("$ORIGIN", lib).replace("${ORIGIN}", lib)) for d in obj.runpath()]
    except Exception:  # noqa: BLE001 - a truncated object
        return {}
    finally:
        obj.close()
    if not und or not needed:
        return {}
    arch = platform.machine() or "x86_64"
    dirs = [d for d in (src.environ.get("LD_LIBRARY_PATH") or "").split(":") if d.startswith("/")]
    dirs += [d for d in runpath if d.startswith("/")] + [lib] + [d.format(arch=arch) for d in SYSTEM_LIB_DIRS]
    # every direct DT_NEEDED library may define the symbol (ld.so searches the whole load order); an MKL library
    # that cannot be found or read leaves the fact open (unresolved), another one is only skipped
    found, unresolved, exported, queue, seen = [], [], set(), list(dict.fromkeys(direct)), set()
    while queue and len(seen) < 32:
        name = queue.pop(0)
        if name in seen:
            continue
        seen.add(name)
        mkl = name.startswith("libmkl")
        where = next((os.path.join(d, name) for d in dirs if os.path.exists(src.path(os.path.join(d, name)))), None)
        dep = read_object(src.path(where)) if where else None
        if dep is None:
            if mkl:
                unresolved.append(name)
            continue
        try:
            got = dep.exports(set(und))
            if got is None and mkl:  # no .gnu.hash: not judged
                unresolved.append(name)
            exported |= got or set()
            if mkl:
                queue += [n for n in dep.needed() if n.startswith("libmkl") and n not in seen]
        except Exception:  # noqa: BLE001
            if mkl:
                unresolved.append(name)
        finally:
            dep.close()
        if mkl:
            found.append(where)
    return {"lib": os.path.join(lib, "libtorch_cpu.so"), "undefined": und, "mkl_libs": found,
            "unresolved": unresolved, "exported": sorted(exported)}


MAX_CXX_NEEDS, MAX_CUDA_MODULES, TORCH_ARCH_DEADLINE_S = 8, 16, 1.0


def _module_facts(path: str, deadline: float) -> tuple:
    """(libstdc++ needs, CUDA architectures) of one compiled module: {"glibcxx", "cxxabi"} - the newest GLIBCXX_/CXXABI_
    versions it needs from libstdc++.so.6 (.gnu.version_r), None when it needs none (a C extension); {"sass", "ptx"}
    of its .nv_fatbin (ElfObject.cuda_archs), None when it carries no CUDA code. (None, None) when unreadable."""
    from ddpdoctor.gather.elf import read_object

    obj = read_object(path)
    if obj is None:
        return None, None, None
    try:
        wanted = obj.version_needs().get("libstdc++.so.6") or []
    except Exception:  # noqa: BLE001 - a truncated or odd object
        wanted = []
    cudart = None
    try:
        archs = obj.cuda_archs(deadline)
        name = next((n for n in obj.needed() if CUDART_SO.match(n)), None)
        if name:
            paths = obj.search_paths()
            cudart = {"needed": name, "rpath": paths["rpath"], "runpath": paths["runpath"]}
    except Exception:  # noqa: BLE001
        archs = None
    finally:
        obj.close()
    needs = {"glibcxx": _max_version(wanted, "GLIBCXX_"), "cxxabi": _max_version(wanted, "CXXABI_")} if wanted else None
    return needs, archs, cudart


# the CUDA runtime as a shared library: libcudart.so.10.2, libcudart.so.11.0, libcudart.so.12 (the soname carries the
# major.minor up to CUDA 10.2 and 11.0, the major alone from CUDA 11.1 on) - not torch's own hashed copy
# (libcudart-80664282.so.10.2, which only torch's own libraries name)
CUDART_SO = re.compile(r"^libcudart\.so\.(\d+(?:\.\d+)?)$")
MAX_CUDART_NEEDS = 8


def ld_conf_dirs(src: Sources, limit: int = 32) -> list:
    """The directories /etc/ld.so.conf lists, its `include` globs followed one level (/etc/ld.so.conf.d/*.conf:
    cuda-*.conf puts /usr/local/cuda/lib64 there): what ldconfig puts in /etc/ld.so.cache, which ld.so(8) searches
    after LD_LIBRARY_PATH and DT_RUNPATH. [] when unreadable."""
    import glob

    out: list = []

    def parse(text, depth):
        for line in (text or "").splitlines():
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            if line.startswith("include "):
                if depth:
                    continue
                for pattern in line.split()[1:]:
                    pattern = pattern if pattern.startswith("/") else os.path.join("/etc", pattern)
                    for f in sorted(glob.glob(src.path(pattern)))[:32]:
                        try:
                            with open(f, encoding="utf-8", errors="replace") as fh:
                                parse(fh.read(1 << 14), depth + 1)
                        except OSError:
                            pass
            elif line.startswith("/") and line not in out:
                out.append(line)

    parse(src.read("/etc/ld.so.conf", 1 << 14), 0)
    return out[:limit]


def resolve_needed(src: Sources, name: str, origin_dir: str, rpath: list, runpath: list,
                   conf_dirs: Optional[list] = None) -> dict:
    """{path, from} where ld.so(8) finds DT_NEEDED `name` of an object in `origin_dir` (real path) carrying `rpath` /
    `runpath` (unexpanded): DT_RPATH when there is no DT_RUNPATH, LD_LIBRARY_PATH, DT_RUNPATH, the ld.so.conf
    directories (ld.so.cache), the system directories. {} when found nowhere."""
    import platform

    def expand(dirs):
        return [os.path.normpath(d.replace("${ORIGIN}", origin_dir).replace("$ORIGIN", origin_dir)) for d in dirs]

    arch = platform.machine() or "x86_64"
    order = [("RPATH", d, True) for d in (expand(rpath) if not runpath else [])]
    order += [("LD_LIBRARY_PATH", d, False) for d in (src.environ.get("LD_LIBRARY_PATH") or "").split(":")
              if d.startswith("/")]
    order += [("RUNPATH", d, True) for d in expand(runpath)]
    order += [("ld.so.conf", d, False) for d in (conf_dirs if conf_dirs is not None else ld_conf_dirs(src))]
    order += [("system", d.format(arch=arch), False) for d in SYSTEM_LIB_DIRS]
    for origin, d, real in order[:64]:
        if not d.startswith("/"):
            continue
        candidate = os.path.join(d, name)
        if os.path.exists(candidate if real else src.path(candidate)):
            return {"path": candidate, "from": origin}
    return {}


# torch's own libraries that carry its CUDA kernels: libtorch_cuda.so (1.5+; libtorch_cuda_cu/_cpp in 1.8-1.10),
# libcaffe2_gpu.so / libATen_cuda.so before
TORCH_CUDA_LIBS = ("libtorch_cuda.so", "libtorch_cuda_cu.so", "libcaffe2_gpu.so", "libATen_cuda.so")


def scan_extension_modules(src: Sources, site: Optional[str] = None, torch_version: Optional[str] = None) -> dict:
    """One bounded walk of the compiled modules (see extension_cxx_needs) and torch's CUDA libraries:
    {"cxx": extension_cxx_needs' list, "cuda": [{package, file, sass, ptx}] for each module with CUDA code (torch's
    own first), MAX_CUDA_MODULES at most}; {} when site-packages is not known."""
    import sys
    import time

    from ddpdoctor.gather.host import torch_extension_root

    if site is None:
        site = torch_site()
        if site is None:
            return {}
    deadline = time.monotonic() + EXT_DEADLINE_S
    cuda: list = []
    torch_cudart = None
    lib = _torch_lib_dir(site)
    for name in TORCH_CUDA_LIBS if lib else ():
        path = os.path.join(lib, name)
        if os.path.exists(path):
            _needs, archs, own = _module_facts(path, deadline + TORCH_ARCH_DEADLINE_S)
            if own is not None:
                torch_cudart = own["needed"]
            if archs is not None:
                rel = os.path.relpath(path, site)
                cuda.append(dict(archs, package="torch", file=path if rel.startswith(os.pardir) else rel))
                break
    walks = [_extension_files(site, deadline)]
    root, _depth = torch_extension_root(src.environ, sys.platform, torch_version)
    if root and os.path.isdir(src.path(root)):
        walks.append(_walk_so("torch_extensions", src.path(root), deadline))
    out, runtimes, conf = [], [], None
    seen = 0
    for walk in walks:
        for package, path in walk:
            seen += 1
            if seen > 2 * MAX_EXT_FILES or time.monotonic() > deadline:
                break
            needs, archs, cudart = _module_facts(path, deadline)
            if not needs and archs is None and cudart is None:
                continue
            rel = os.path.relpath(path, site)
            if package == "torch_extensions":  # <root>/[py310_cu121/]<name>/<name>.so: the extension's name
                package = os.path.basename(os.path.dirname(path))
                shown = path if src.root == "/" else "/" + os.path.relpath(path, src.root)
            else:
                shown = path if rel.startswith(os.pardir) else rel
            if needs:
                out.append(dict(needs, package=package, file=shown))
            if archs is not None and len(cuda) < MAX_CUDA_MODULES:
                cuda.append(dict(archs, package=package, file=shown))
            if cudart is not None and len(runtimes) < MAX_CUDART_NEEDS:
                if conf is None:
                    conf = ld_conf_dirs(src)
                found = resolve_needed(src, cudart["needed"], os.path.dirname(os.path.realpath(path)),
                                       cudart["rpath"], cudart["runpath"], conf)
                runtimes.append(dict(found, package=package, file=shown, needed=cudart["needed"],
                                     version=CUDART_SO.match(cudart["needed"]).group(1)))
    key = lambda e: (_rel(e.get("glibcxx")), _rel(e.get("cxxabi")))  # noqa: E731
    return {"cxx": sorted(out, key=key, reverse=True)[:MAX_CXX_NEEDS], "cuda": cuda, "cudart": runtimes,
            "torch_cudart": torch_cudart}


def extension_cxx_needs(src: Sources, site: Optional[str] = None, torch_version: Optional[str] = None) -> Optional[list]:
    """The compiled extension modules of torch's site-packages (and the checkouts it points into) and of torch's JIT
    build directory (torch.utils.cpp_extension: TORCH_EXTENSIONS_DIR, else ~/.cache/torch_extensions; gather.host
    torch_extension_root) with the newest GLIBCXX_/CXXABI_ versions each needs from libstdc++.so.6, read from its
    .gnu.version_r (no import). A module built by a newer GCC than the libstdc++.so.6 the process loads fails to
    import: "libstdc++.so.6: version `GLIBCXX_3.4.32' not found (required by .../gymtorch.so)". The MAX_CXX_NEEDS
    neediest, newest GLIBCXX first; [] when none needs libstdc++; None when site-packages is not known. Bounded as
    torch_extensions (MAX_EXT_FILES files, EXT_DEADLINE_S seconds)."""
    scan = scan_extension_modules(src, site, torch_version)
    return scan["cxx"] if scan else None


def _rel(v) -> tuple:
    return tuple(int(x) for x in str(v or "").split(".") if x.isdigit())


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


def torch_nccl(src: Sources, site: Optional[str] = None) -> dict:
    """{needed, path, from, real_name, version, search} for the libnccl.so.N torch's libtorch_cuda.so names in its
    DT_NEEDED, as ld.so(8) finds it ("Search order": the object's DT_RPATH when it has no DT_RUNPATH, then
    LD_LIBRARY_PATH, then DT_RUNPATH, then ld.so.cache and the default directories; $ORIGIN expanded): `from` says
    which step found it ("RPATH", "LD_LIBRARY_PATH", "RUNPATH", "system"), `search` which kind of path the object
    carries ("RPATH": pip wheels, patchelf --force-rpath, so LD_LIBRARY_PATH cannot override; "RUNPATH": it can;
    "none"). `version` from the real file's name (libnccl.so.2.18.3), left out when the name carries none (the
    nvidia-nccl wheel's libnccl.so.2). {"needed": None} when libtorch_cuda.so links NCCL statically (no DT_NEEDED
    libnccl); {} when it cannot be read. An LD_PRELOAD copy comes first of all (nccl_preloaded, PKG011). ld.so.cache
    is not read: its directories are approximated by the system ones. Headers only, never loaded."""
    import platform

    from ddpdoctor.facts.env import NCCL_SO, nccl_version_in_name

    lib, obj = _torch_library(site, "libtorch_cuda.so")
    if obj is None:
        return {}
    try:
        needed = next((n for n in obj.needed() if NCCL_SO.match(n)), None)
        paths = obj.search_paths()
    except Exception:  # noqa: BLE001 - a truncated object
        return {}
    finally:
        obj.close()
    if needed is None:
        return {"needed": None}

    def expand(dirs):
        return [os.path.normpath(d.replace("${ORIGIN}", lib).replace("$ORIGIN", lib)) for d in dirs]

    rpath, runpath = expand(paths["rpath"]), expand(paths["runpath"])
    arch = platform.machine() or "x86_64"
    order = [("RPATH", d) for d in (rpath if not runpath else [])]
    order += [("LD_LIBRARY_PATH", d) for d in (src.environ.get("LD_LIBRARY_PATH") or "").split(":") if d.startswith("/")]
    order += [("RUNPATH", d) for d in runpath] + [("system", d.format(arch=arch)) for d in SYSTEM_LIB_DIRS]
    out = {"needed": needed, "search": "RUNPATH" if runpath else "RPATH" if rpath else "none"}
    for origin, d in order[:32]:
        if not d.startswith("/"):
            continue
        candidate = os.path.join(d, needed)
        local = candidate if origin in ("RPATH", "RUNPATH") else src.path(candidate)
        if not os.path.exists(local):
            continue
        out.update({"path": candidate, "from": origin})
        try:
            real = os.path.basename(os.path.realpath(local))
        except OSError:
            real = None
        if real:
            out["real_name"] = real
            version = nccl_version_in_name(real)
            if version:
                out["version"] = version
        break
    return out
