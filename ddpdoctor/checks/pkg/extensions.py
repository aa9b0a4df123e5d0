"""Compiled extensions and the torch / CUDA they were built for: PKG012 (DeepSpeed ops, xformers, flash-attn,
other extensions missing torch symbols), PKG014 (the CUDA toolkit a just-in-time build compiles with), PKG018 (apex
without its extensions), PKG020 (mmcv without its compiled ops)."""
from __future__ import annotations

from ddpdoctor.facts import gpu_versions
from ddpdoctor.facts.env import env_of, script_asks
from ddpdoctor.facts.launch import commands
from ddpdoctor.model import error, info, warning
from ddpdoctor.model.registry import check


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
    for ext in [e for e in exts if isinstance(e, dict) and (e.get("missing") or e.get("absent_libraries"))][:4]:
        package, missing = str(ext.get("package") or "?"), [str(m) for m in ext.get("missing") or []]
        absent = [str(n) for n in ext.get("absent_libraries") or []]
        if absent:
            # check32 (SparseBEV#83): the extension names a torch library this torch does not ship; the loader
            # stops at that name before any symbol is looked up (glibc elf/dl-load.c _dl_map_object)
            yield error(f"{package}'s compiled extension {ext.get('file')} needs {', '.join(absent)}, which torch"
                        f"{' ' + str(torch) if torch else ''} does not ship (not in torch's library folder)",
                        detail=("The extension was linked against another torch build's libraries (DT_NEEDED): "
                                f"`import` fails with \"ImportError: {absent[0]}: cannot open shared object file: No "
                                "such file or directory\" - e.g. mmcv-full's ops built for a torch with a split "
                                "libtorch_cuda_cu.so/libtorch_cuda_cpp.so, loaded under a torch that ships one "
                                "libtorch_cuda.so (SparseBEV#83: mmcv-full 1.6.0 under torch 2.0.0). Read from the "
                                "extension's ELF dynamic section against torch's library folder; nothing is imported."),
                        fix=(f"pip install --no-build-isolation --no-cache-dir --force-reinstall {package}   # a build "
                             "for the installed torch (a wheel for its torch/CUDA, or rebuilt from source); or "
                             "install the torch it was built for"),
                        subjects=[f"pkg:{package}", "pkg:torch"],
                        evidence={"extension": ext, "torch": torch})
            continue
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
        files, 4 levels deep, 1 s. An error per extension. One whose DT_NEEDED names a libtorch*/libc10*
        library torch's folder does not hold (libtorch_cuda_cu.so of a split-CUDA build) is named by that
        library: the loader stops there, "ImportError: libtorch_cuda_cu.so: cannot open shared object file".

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


def _jit_builders(snap, pk) -> list:
    """What compiles a CUDA extension when the job runs: DeepSpeed installed with no pre-built ops (its ops are built
    just in time, op_builder/builder.py jit_load), the script's torch.utils.cpp_extension load() calls, and the
    installed libraries that compile their own kernels at first use (data/runtime_builds.json: xlstm, nvdiffrast)."""
    out = []
    versions = pk.get("versions") or {}
    built = pk.get("deepspeed_build") if isinstance(pk.get("deepspeed_build"), dict) else {}
    if versions.get("deepspeed") and not built.get("installed_ops"):
        out.append(f"DeepSpeed {versions['deepspeed']}'s ops (none pre-built: compiled at their first use)")
    out += [f"{r.get('path')}:{r.get('line')} {r.get('what')}" for r in script_asks(snap, "extension_builds")]
    for row in gpu_versions.runtime_builders():  # libraries that compile their kernels at first use (check26)
        if versions.get(row["distribution"]):
            out.append(f"{row['distribution']} {versions[row['distribution']]} ({row['what']}, compiled with "
                       f"torch.utils.cpp_extension at first use: {row['source']['repo']} {row['source']['path']})")
    building = set(gpu_versions.setup_build_commands())
    for cmd in commands(snap):  # the job is itself a build: `python setup.py build develop` (check27)
        words = [str(w) for w in cmd.get("setup_commands") or ()]
        if building & set(words):
            out.append(f"`{cmd.get('program') or cmd.get('launcher')} {' '.join(words)}` (setuptools' build_ext compiles the package's "
                       "extensions now)")
    return out


def _deepspeed_refuses_minor(snap, pk, kit, have, torch_cuda, build, where, evidence):
    """PKG014 for a toolkit of torch's CUDA major but another minor that the installed DeepSpeed's op builder refuses
    (data/deepspeed_cuda_check.json, read from every release tag: 0.3.8-0.3.16 accept only an exact match or toolkit
    11.1 with torch 11.0; from 0.4.0 both minors must be in cuda_minor_mismatch_ok of that major, which never lists
    13.x; DS_SKIP_CUDA_CHECK=1 from 0.9.3), while its ops compile at run time or a DS_BUILD_* switch asks for a
    build. Xirider/finetune-gpt2xl#1: DeepSpeed 0.3.x, toolkit 11.0, torch 1.8 built with 11.1."""
    version = (pk.get("versions") or {}).get("deepspeed")
    row = gpu_versions.deepspeed_cuda_rule(version) if version else None
    if row is None or not gpu_versions.deepspeed_refuses(row, have[:2], torch_cuda[:2]):
        return
    env = env_of(snap)
    if row.get("skip_env") and env.get(row["skip_env"]) == "1":
        return
    built = pk.get("deepspeed_build") if isinstance(pk.get("deepspeed_build"), dict) else {}
    switches = sorted(k for k in env if k.startswith("DS_BUILD_") and env.get(k) not in ("", "0"))
    if built.get("installed_ops") and not switches:
        return  # pre-built ops: nothing compiles, the check never runs
    sys_v, torch_v = f"{have[0]}.{have[1]}", f"{torch_cuda[0]}.{torch_cuda[1]}"
    ok = row["minor_mismatch_ok"].get(str(have[0])) or []
    yield warning(f"DeepSpeed {version} refuses the CUDA toolkit at {where}: installed CUDA {sys_v} does not match the "
                  f"CUDA {build.get('cuda')} torch was compiled with",
                  detail=(f"DeepSpeed's op builder compares the toolkit's major.minor with torch's before compiling an op "
                          f"and raises \"Installed CUDA version {sys_v} does not match the version torch was compiled "
                          f"with {build.get('cuda')}, unable to compile cuda/cpp extensions without a matching cuda "
                          "version\" (op_builder/builder.py assert_no_cuda_mismatch). "
                          + (f"DeepSpeed {version} accepts another minor only within CUDA {', '.join(ok)}" if ok else
                             f"DeepSpeed {version} accepts no other minor of CUDA {have[0]}")
                          + (f" (or {', '.join(p['toolkit'] + ' with torch ' + p['torch'] for p in row['accepted_pairs'])})"
                             if row["accepted_pairs"] else "")
                          + f"; rule of DeepSpeed {row['deepspeed_from']}+ (data/deepspeed_cuda_check.json). "
                          + ("Its ops are not pre-built, so the first one used compiles." if not switches else
                             f"{', '.join(switches)} asks for a build.")),
                  fix=(f"export CUDA_HOME=<a CUDA {torch_v} toolkit>   # or install torch built for CUDA {sys_v}"
                       + (f"; or {row['skip_env']}=1 to accept the pair at your own risk" if row.get("skip_env") else
                          "; or a newer DeepSpeed, whose list of compatible minors is longer")),
                  subjects=["pkg:deepspeed", "pkg:cuda-toolkit", "pkg:torch"],
                  evidence=dict(evidence, deepspeed=version, rule_from=row["deepspeed_from"], toolkit_cuda=sys_v,
                                torch_cuda=torch_v))


# DeepSpeed's build switches for its CPU ops, the TorchCPUOpBuilder ops that link -lcurand (op_builder/cpu_adam.py,
# cpu_adagrad.py, cpu_lion.py BUILD_VAR), and DS_BUILD_OPS, which builds every op (op_builder/builder.py).
DS_CURAND_BUILD_VARS = ("DS_BUILD_OPS", "DS_BUILD_CPU_ADAM", "DS_BUILD_CPU_ADAGRAD", "DS_BUILD_CPU_LION")


def _toolkit_links_missing(snap, pk, kit):
    """PKG014: the toolkit has lib<name>.so.N but not the unversioned lib<name>.so that `-l<name>` needs (a runtime-only
    install, no -dev package), while DeepSpeed's CPU ops are to be built (a DS_BUILD_* switch set, or DeepSpeed
    installed without pre-built ops: they compile at first use). Their link line is `-L<CUDA_HOME>/lib64 -lcudart
    -lcublas -lcurand` (deepspeedai/DeepSpeed op_builder/builder.py @4904d948, TorchCPUOpBuilder): the build stops in
    the linker, "/usr/bin/ld: cannot find -lcurand" (instructlab/training#593: fixed by a libcurand.so copy)."""
    missing = kit.get("missing_links") if isinstance(kit.get("missing_links"), dict) else {}
    if not missing:
        return
    env = env_of(snap)
    switches = [v for v in DS_CURAND_BUILD_VARS if str(env.get(v) or "").strip() not in ("", "0")]
    versions = pk.get("versions") or {}
    built = pk.get("deepspeed_build") if isinstance(pk.get("deepspeed_build"), dict) else {}
    jit = bool(versions.get("deepspeed")) and not built.get("installed_ops")
    if not switches and not jit:
        yield from _cudart_missing_for_cuda_extension(snap, pk, kit, missing)
        return
    why = (f"{', '.join(switches)} set: DeepSpeed's CPU ops are built at install" if switches
           else f"DeepSpeed {versions['deepspeed']} has no pre-built ops: its CPU ops compile at their first use")
    names = sorted(missing)
    lib = kit.get("home") or "the toolkit"
    yield warning(f"The CUDA toolkit at {lib} has no unversioned "
                  + ", ".join(f"lib{n}.so" for n in names) + f" ({why}): linking -l{names[0]} fails",
                  detail=("DeepSpeed links its CPU ops (cpu_adam, cpu_adagrad, cpu_lion) with -L<CUDA_HOME>/lib64 "
                          "-lcudart -lcublas -lcurand (op_builder/builder.py TorchCPUOpBuilder); the linker finds -lX "
                          "only as libX.so, which the toolkit's -dev packages provide. Found only "
                          + ", ".join(f"{missing[n]}" for n in names) + f": \"/usr/bin/ld: cannot find -l{names[0]}\" "
                          "(instructlab/training#593)."),
                  fix=(f"cd {lib}/lib64 && " + " && ".join(f"sudo ln -s {missing[n]} lib{n}.so" for n in names)
                       + "   # or install the toolkit's -dev packages (e.g. cuda-libraries-dev)"),
                  subjects=["pkg:cuda-toolkit"] + (["pkg:deepspeed"] if versions.get("deepspeed") else []),
                  evidence={"toolkit": kit, "missing_links": missing, "build_switches": switches, "jit": jit})


def _cudart_missing_for_cuda_extension(snap, pk, kit, missing):
    """PKG014: a toolkit with libcudart.so.N but no unversioned libcudart.so while something other than DeepSpeed
    builds a CUDA extension (a setup.py/pip build of a local tree, a cpp_extension load(), a run-time builder): torch's
    CUDAExtension links `-L<CUDA_HOME>/lib64 -lcudart` (torch/utils/cpp_extension.py CUDAExtension: libraries +=
    ['cudart', 'c10_cuda', 'torch_cuda'], library_dirs += library_paths(device_type='cuda')), so the link stops with
    "ld: cannot find -lcudart" (ivan-chai/torch-linear-assignment#2: a conda CUDA_HOME without cuda-cudart-dev)."""
    if "cudart" not in missing:
        return
    builders = _jit_builders(snap, pk)
    if not builders:
        return
    lib = kit.get("home") or "the toolkit"
    yield warning(f"The CUDA toolkit at {lib} has no unversioned libcudart.so, and {builders[0]} links -lcudart",
                  detail=("torch's CUDAExtension links every CUDA extension with -L<CUDA_HOME>/lib64 -lcudart "
                          "(torch/utils/cpp_extension.py CUDAExtension); the linker finds -lcudart only as libcudart.so, "
                          f"which the toolkit's -dev package provides. Found only {missing['cudart']}: \"ld: cannot find "
                          "-lcudart: No such file or directory\". What compiles here: " + "; ".join(builders[:3]) + "."),
                  fix=(f"install the toolkit's runtime dev files (conda install -c nvidia cuda-cudart-dev, or apt install "
                       f"cuda-cudart-dev-<X-Y>), or point CUDA_HOME at a full toolkit (/usr/local/cuda); or "
                       f"cd {lib}/lib64 && ln -s {missing['cudart']} libcudart.so"),
                  subjects=["pkg:cuda-toolkit"],
                  evidence={"toolkit": kit, "missing_links": missing, "builders": builders})


def _ninja_missing(snap, pk):
    """PKG014: no `ninja` on the job's PATH (packages.ninja.path None) while something compiles at run time. torch's
    load() checks first, `ninja --version` (torch/utils/cpp_extension.py is_ninja_available, verify_ninja_availability):
    "RuntimeError: Ninja is required to load C++ extensions"; DeepSpeed's jit_load raises "Unable to JIT load the
    <op> op due to ninja not being installed" (op_builder/builder.py, from the same check). A ninja pip package
    installed in an environment whose bin/ is not on PATH (a venv's python run without activating it, a batch job's
    PATH) fails alike: the fix then names that bin/. A snapshot without the field says nothing."""
    tool = pk.get("ninja") if isinstance(pk.get("ninja"), dict) else None
    if tool is None or tool.get("path"):
        return
    builders = _jit_builders(snap, pk)
    if not builders:
        return
    where = tool.get("package_bin")
    if tool.get("package") and where:
        title = (f"The ninja pip package ({tool['package']}) is installed but {where} is not on PATH, and "
                 + builders[0] + " compiles at run time")
        fix = f"export PATH={where}:$PATH   # in the job's environment (batch script, launcher), or activate the environment"
    else:
        title = "No ninja on PATH, and " + builders[0] + " compiles at run time"
        fix = "pip install ninja   # in the job's environment, with its bin/ on PATH (or apt install ninja-build)"
    yield warning(title,
                  detail=("torch.utils.cpp_extension.load() runs `ninja --version` before building and stops with "
                          "\"RuntimeError: Ninja is required to load C++ extensions\" (torch/utils/cpp_extension.py "
                          "verify_ninja_availability); DeepSpeed's op builder turns it into \"Unable to JIT load the "
                          "<op> op due to ninja not being installed\" (op_builder/builder.py jit_load). What compiles "
                          "here: " + "; ".join(builders[:3]) + "."),
                  fix=fix,
                  subjects=["pkg:ninja"] + (["pkg:deepspeed"] if (pk.get("versions") or {}).get("deepspeed") else []),
                  evidence={"ninja": tool, "builders": builders})


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


# The oldest host compilers torch's C++ headers accept, by torch release (the first release of each row), with the
# source: 2.2.2 - pytorch/pytorch#120126 raised c10/util/C++17.h's check to GCC 9 / Clang 9 and was picked onto
# release/2.2 ("Validated we no longer support gcc < 9 for release 2.2.2"); 1.7 - C++14 code: "We're on C++14 so
# unfortunately gcc4.8 is no good" (pytorch/pytorch#51339), the check then reading GCC 5 (pytorch/pytorch#120149's
# diff). Earlier releases: not judged.
HOST_COMPILER_FLOORS = (((2, 2, 2), {"gcc": (9,), "clang": (9,)}), ((1, 7), {"gcc": (5,)}))


def _host_compiler_too_old(snap, pk):
    """The host C++ compiler (packages.host_compiler) below the floor of torch's headers while something compiles at
    run time: a warning; the build stops in torch's own headers."""
    cc = pk.get("host_compiler") if isinstance(pk.get("host_compiler"), dict) else {}
    version = (pk.get("versions") or {}).get("torch")
    have, torch_rel = gpu_versions.release(cc.get("version")), gpu_versions.release(version)
    if not have or not torch_rel:
        return
    floor = next((f.get(cc.get("kind")) for since, f in HOST_COMPILER_FLOORS if torch_rel[:3] >= since), None)
    if not floor or have[:len(floor)] >= floor:
        return
    builders = _jit_builders(snap, pk)
    if not builders:
        return
    need = ".".join(str(x) for x in floor)
    name = "GCC" if cc.get("kind") == "gcc" else "Clang"
    yield warning(f"The host compiler is {name} {cc.get('version')} ({cc.get('cmd')}), older than the {name} {need} torch "
                  f"{version}'s headers need, and " + builders[0] + " compiles at run time",
                  detail=("torch.utils.cpp_extension and DeepSpeed's op builder compile with $CXX (else c++), and nvcc "
                          "hands .cu files to the same GCC on PATH; torch's headers refuse an older one: \"#error You're "
                          f"trying to build PyTorch with a too old version of GCC. We need GCC {need} or later.\" "
                          "(c10/util/C++17.h; deepspeedai/DeepSpeed#7143) or \"#error C++14 or later compatible compiler is "
                          "required to use ATen.\" (DeepSpeed#1435). What compiles here: " + "; ".join(builders[:3]) + "."),
                  fix=(f"load or install {name} {need}+ (module load gcc/12, conda install -c conda-forge gxx_linux-64=11, "
                       "apt install g++-11) and export CC=<its gcc> CXX=<its g++> before the job; or pre-build the ops "
                       "where a newer compiler exists"),
                  subjects=["pkg:host-compiler", "pkg:torch"],
                  evidence={"host_compiler": cc, "torch": version, "needs": need, "builders": builders})


def _host_compiler_too_new_for_nvcc(snap, pk, kit):
    """The host GCC (packages.host_compiler) newer than the CUDA toolkit's nvcc accepts (data/nvcc_host_compilers.json,
    crt/host_config.h's ceiling per CUDA release): every .cu file nvcc compiles stops in host_config.h. A warning
    when something compiles at run time or the toolkit was chosen for building (CUDA_HOME/CUDA_PATH set, an nvcc on
    PATH); info for a default /usr/local/cuda nothing uses."""
    cc = pk.get("host_compiler") if isinstance(pk.get("host_compiler"), dict) else {}
    if cc.get("kind") != "gcc" or not kit.get("version"):
        return
    have = gpu_versions.release(cc.get("version"))
    ceiling = gpu_versions.nvcc_gcc_max(kit.get("version"))
    if not have or ceiling is None or have[0] <= ceiling:
        return
    builders = _jit_builders(snap, pk)
    how = str(kit.get("from") or "")  # the gatherer's: CUDA_HOME, CUDA_PATH, "nvcc on PATH", "/usr/local/cuda"
    chosen = how in ("CUDA_HOME", "CUDA_PATH") or how.startswith("nvcc")
    make = warning if builders or chosen else info
    cuda = ".".join(str(x) for x in gpu_versions.release(kit.get("version"))[:2])
    why = (("; what compiles at run time here: " + "; ".join(builders[:3])) if builders else
           f"; the toolkit is the one {kit.get('from')} names, so builds here use it" if chosen else
           "; nothing found that compiles at run time, so it matters only to an extension built later")
    yield make(f"The host compiler is GCC {cc.get('version')} ({cc.get('cmd')}), newer than the GCC {ceiling} the "
               f"CUDA {cuda} toolkit's nvcc at {kit.get('home')} accepts",
               detail=("nvcc compiles the host side of every .cu file with the GCC on PATH (or -ccbin / $CC as torch's "
                       "cpp_extension passes it) and its crt/host_config.h refuses a newer one: \"#error -- unsupported "
                       f"GNU version! gcc versions later than {ceiling} are not supported!\" (the newest GCC per CUDA "
                       "release: data/nvcc_host_compilers.json)" + why + "."),
               fix=(f"install GCC {ceiling} (apt install g++-{ceiling}, conda install -c conda-forge gxx_linux-64={ceiling}) "
                    f"and export CC=gcc-{ceiling} CXX=g++-{ceiling} NVCC_PREPEND_FLAGS='-ccbin g++-{ceiling}' before the "
                    "build; or use a CUDA toolkit whose nvcc accepts GCC " + str(have[0])),
               subjects=["pkg:host-compiler", "pkg:cuda-toolkit"],
               evidence={"host_compiler": cc, "toolkit": kit, "gcc_max": ceiling, "builders": builders})


def _toolkit_newer_than_driver(snap, kit: dict, have: tuple, where: str, evidence: dict):
    """PKG014's finding for a toolkit newer than the CUDA the driver supports (gpus.cuda_driver): what it compiles
    carries PTX/cubins of that release, which the older driver refuses - "the provided PTX was compiled with an
    unsupported toolchain" (CUDA_ERROR_UNSUPPORTED_PTX_VERSION, 222, cuda.h; the cuda_errors catalogue) - whatever
    torch's own build is (torch runs through minor-version compatibility; GPU023 judges torch)."""
    gpus = snap.get("gpus") if "gpus" in snap else None
    if not isinstance(gpus, dict) or gpus.get("unavailable"):
        return
    driver = gpu_versions.release(gpus.get("cuda_driver"))
    if len(driver) < 2 or len(have) < 2 or tuple(have[:2]) <= tuple(driver[:2]):
        return
    yield warning(f"The CUDA toolkit at {where} (CUDA {kit['version']}) is newer than the driver "
                  f"{gpus.get('driver_version')} supports (CUDA {gpus.get('cuda_driver')})",
                  detail=("An extension compiled with it (a setup.py build of a CUDA extension, a cpp_extension "
                          "load(), DeepSpeed's ops) carries code of CUDA " + ".".join(map(str, have[:2]))
                          + ", which this driver cannot load: \"the provided PTX was compiled with an unsupported "
                          "toolchain\" (CUDA_ERROR_UNSUPPORTED_PTX_VERSION, cuda.h) or \"CUDA driver version is "
                          "insufficient for CUDA runtime version\" at its first kernel. torch's own wheels are not "
                          "affected (GPU023 judges them)."),
                  fix=f"upgrade the driver to one that reports CUDA {'.'.join(map(str, have[:2]))} or newer, or "
                      f"export CUDA_HOME=<a toolkit of CUDA {gpus.get('cuda_driver')} or older> and rebuild the "
                      "extension",
                  subjects=["pkg:cuda-toolkit"],
                  evidence=dict(evidence, driver_version=gpus.get("driver_version"), driver_cuda=gpus.get("cuda_driver")))


def _cpp_extension_unknown_arch(snap, pk, kit):
    """PKG014: torch.utils.cpp_extension of the installed torch refuses an architecture it would build for:
    TORCH_CUDA_ARCH_LIST's entries when set, else (releases that do not clamp it) each GPU's compute capability, when
    that architecture entered cpp_extension's supported_arches in a later torch (data/gpu_versions.json
    cpp_extension_arch_since). Every CUDAExtension build stops with "ValueError: Unknown CUDA arch (X) or GPU not
    supported" (_get_cuda_arch_flags), before nvcc runs (OpenBMB/BMTrain#83: '9.0+PTX' under torch 1.12; lhoyer/HRDA#35:
    an RTX 4090's 8.9 under torch 1.7.1). A warning when the list is set (it is read only by builds), or something
    builds here, or a CUDA toolkit is installed to build with; info otherwise."""
    versions = pk.get("versions") or {}
    build = pk.get("torch_build") if isinstance(pk.get("torch_build"), dict) else {}
    if not versions.get("torch") or not build.get("cuda"):
        return
    arch_list = env_of(snap).get("TORCH_CUDA_ARCH_LIST")
    devices = [d for d in ((snap.get("gpus") or {}).get("devices") or [])
               if isinstance(d, dict) and isinstance(d.get("cuda_capability"), (list, tuple))
               and len(d["cuda_capability"]) == 2]
    refused = gpu_versions.cpp_extension_rejects(versions["torch"], arch_list, [d["cuda_capability"] for d in devices])
    if not refused:
        return
    builders = _jit_builders(snap, pk)
    listed = arch_list is not None and str(arch_list).strip() != ""
    make = warning if (listed or builders or kit.get("version")) else info
    first = max(f for _, f in refused)
    names = ", ".join(e for e, _ in refused)
    if listed:
        title = (f"TORCH_CUDA_ARCH_LIST={arch_list!r} names {names}, which torch {versions['torch']}'s cpp_extension does "
                 "not know: every CUDA extension build stops")
        subjects = ["env:TORCH_CUDA_ARCH_LIST", "pkg:torch"]
        keep = [e for e in str(arch_list).replace(" ", ";").split(";") if e and e not in {x for x, _ in refused}]
        fix = (f"export TORCH_CUDA_ARCH_LIST=\"{';'.join(keep) or '<archs this torch knows>'}\"   # drop {names}; or "
               f"install torch >= {first[0]}.{first[1]}, whose cpp_extension knows it")
    else:
        cap = {f"{d['cuda_capability'][0]}.{d['cuda_capability'][1]}": d for d in devices}
        models = sorted({str(cap[e].get("name")) for e, _ in refused if e in cap})
        title = (f"torch {versions['torch']}'s cpp_extension does not know compute capability {names} "
                 f"({', '.join(models)}, sm_{names.replace('.', '')}): every CUDA extension built for these GPUs stops")
        subjects = ["pkg:torch"] + [f"gpu:{d.get('index')}" for d in devices
                                    if f"{d['cuda_capability'][0]}.{d['cuda_capability'][1]}" in {e for e, _ in refused}]
        fix = (f"pip install 'torch>={first[0]}.{first[1]}'   # its cpp_extension knows {names}; or build for an "
               "architecture this torch knows (PTX, slower): export TORCH_CUDA_ARCH_LIST=\"8.0+PTX\"")
    when = ("; what builds here: " + "; ".join(builders[:3])) if builders else ""
    yield make(title,
               detail=("torch.utils.cpp_extension validates each architecture it builds for against its own "
                       "supported_arches and raises \"ValueError: Unknown CUDA arch (" + refused[0][0] + ") or GPU not "
                       "supported\" (torch/utils/cpp_extension.py _get_cuda_arch_flags) before nvcc runs: setup.py / "
                       "pip builds of extensions (mmcv-full, apex, DCN, BMTrain), load() at run time, DeepSpeed's op "
                       f"builder. {names} entered that list in torch {first[0]}.{first[1]} (data/gpu_versions.json "
                       "cpp_extension_arch_since)" + when + "."),
               fix=fix, subjects=subjects,
               evidence={"torch": versions["torch"], "TORCH_CUDA_ARCH_LIST": arch_list, "refused": refused,
                         "builders": builders})


def _home_not_a_toolkit(kit: dict, windows: bool = False) -> list:
    """PKG014 for CUDA_HOME / CUDA_PATH set to something that is not one toolkit directory: a PATH-style list
    (':/usr/local/cuda-11.0', from CUDA_HOME=$CUDA_HOME:/usr/local/cuda-11.0 with the variable empty), or a directory
    without bin/nvcc (cuda_toolkit.nvcc False). torch's cpp_extension takes the variable whole (_find_cuda_home:
    `cuda_home = os.environ.get('CUDA_HOME') or os.environ.get('CUDA_PATH')`) and runs <it>/bin/nvcc, so every
    extension build fails ("<CUDA_HOME>/bin/nvcc: not found", Newbeeer/Poisson_flow#2)."""
    how, home = str(kit.get("from") or ""), str(kit.get("home") or "")
    if how not in ("CUDA_HOME", "CUDA_PATH") or not home:
        return []
    sep = ";" if windows else ":"  # the snapshot's system's list separator (C:\\ is a drive, not a list, on Windows)
    listed = sep in home
    if not listed and kit.get("nvcc") is not False:
        return []
    parts = [p for p in home.split(sep) if p]
    fix_to = parts[-1] if listed and parts else "<the toolkit directory, the one holding bin/nvcc>"
    return [warning(f"{how}={home!r} is not a CUDA toolkit directory: an extension build runs {home}/bin/nvcc, "
                    "which does not exist" + (f" (a '{sep}'-separated list, not one directory)" if listed else ""),
                    detail=("torch.utils.cpp_extension takes " + how + " whole as the toolkit's root "
                            "(torch/utils/cpp_extension.py _find_cuda_home) and compiles with <root>/bin/nvcc; DeepSpeed's "
                            "op builder uses the same root. " + (f"{how} holds a list, typically from `export {how}="
                            f"${how}:/usr/local/cuda-X` while it was empty, so the build stops with \"{home}/bin/nvcc: "
                            "not found\"." if listed else f"There is no bin/nvcc under {home}, so the build stops with "
                            "\"nvcc: not found\".")),
                    fix=f"export {how}={fix_to}   # one directory: the toolkit whose bin/nvcc exists",
                    subjects=[how, "pkg:cuda-toolkit"], evidence={"toolkit": kit, "list": listed})]


@check("PKG014", "cuda-toolkit-mismatch", family="packages", needs=("packages",), reads=("gpus", "lint", "env"))
def cuda_toolkit_mismatch(snap):
    """The local CUDA toolkit cannot build extensions for this torch or for these GPUs.

    What it checks
        The CUDA toolkit an extension compiled at run time uses (CUDA_HOME, CUDA_PATH, the `nvcc` on PATH, or
        /usr/local/cuda, as torch.utils.cpp_extension finds it; its version from version.json / version.txt)
        against the CUDA release torch was built with (major versions) and against the GPUs' compute capability
        (the newest architecture that toolkit compiles for: gpu_versions.json newest_arch_of_toolkit). A warning
        when something will compile at run time (DeepSpeed without pre-built ops, a cpp_extension load() in the
        script read), info otherwise. Also against the CUDA the driver supports: a toolkit newer than the
        driver builds code the driver refuses ("the provided PTX was compiled with an unsupported toolchain",
        BachiLi/diffvg#84), always a warning. And (check19) the link names DeepSpeed's CPU ops need from the
        toolkit's lib64 (-lcudart -lcublas -lcurand): a libcurand.so.N without libcurand.so while a DS_BUILD_* switch
        is set or DeepSpeed's ops compile at first use ("/usr/bin/ld: cannot find -lcurand", instructlab/training#593).
        And (check28) the architectures torch's own cpp_extension validates before nvcc runs: TORCH_CUDA_ARCH_LIST's
        entries, or when it is unset the GPUs' compute capabilities, against the release that first listed each in
        supported_arches (data/gpu_versions.json cpp_extension_arch_since): "ValueError: Unknown CUDA arch (9.0+PTX)
        or GPU not supported" (OpenBMB/BMTrain#83, torch 1.12; lhoyer/HRDA#35, an RTX 4090 under torch 1.7.1).
        Named arches ('Ampere', 'Blackwell') are expanded as that release expanded them (named_arches_before).
        And (check29) CUDA_HOME / CUDA_PATH set to what is not one toolkit directory: a ':'-separated list
        (';' on Windows), or a directory without bin/nvcc (cuda_toolkit.nvcc), which cpp_extension's
        _find_cuda_home takes whole, so every build stops with "<CUDA_HOME>/bin/nvcc: not found"
        (Newbeeer/Poisson_flow#2).

    Why it matters
        torch.utils.cpp_extension refuses a toolkit of another major than torch's build: "The detected CUDA version
        (11.5) mismatches the version that was used to compile PyTorch (12.1). Please make sure to use the same
        CUDA versions." (pytorch/pytorch torch/utils/cpp_extension.py _check_cuda_version, CUDA_MISMATCH_MESSAGE);
        DeepSpeed's op builder refuses first ("Installed CUDA version X does not match the version torch was
        compiled with Y, unable to compile cuda/cpp extensions without a matching cuda version": op_builder/
        builder.py assert_no_cuda_mismatch); within one major too, unless both minors are in that DeepSpeed
        release's list of compatible minors (0.3.8-0.3.16: exact match only; from 0.4.0 cuda_minor_mismatch_ok,
        which has never listed CUDA 13; DS_SKIP_CUDA_CHECK=1 from 0.9.3): data/deepspeed_cuda_check.json, read
        from every release tag (Xirider/finetune-gpt2xl#1: toolkit 11.0, torch built with 11.1). A toolkit older than the GPU's architecture fails in nvcc itself
        ("nvcc fatal : Unsupported gpu architecture 'compute_89'": deepspeedai/DeepSpeedExamples#634, fused_adam
        on an sm_89 GPU with CUDA 11.7).

        No toolkit at all (packages.cuda_toolkit recorded empty: no CUDA_HOME/CUDA_PATH, no nvcc on PATH, no
        /usr/local/cuda) under a CUDA build of torch, while something compiles at run time, is a warning too: the
        build stops before compiling ("OSError: CUDA_HOME environment variable is not set. Please set it to your
        CUDA install root.": torch/utils/cpp_extension.py _join_cuda_home; DeepSpeed's op builder: "CUDA_HOME does
        not exist, unable to compile CUDA op(s)", op_builder/builder.py).

        The host C++ compiler such a build uses ($CXX, else c++; packages.host_compiler) older than the one torch's
        headers accept is a warning too: from torch 2.2.2 c10/util/C++17.h stops with "#error You're trying to
        build PyTorch with a too old version of GCC. We need GCC 9 or later." (pytorch/pytorch#120126, picked onto
        release/2.2; deepspeedai/DeepSpeed#7143, #5429), and from torch 1.7, C++14 code, GCC 4.x cannot compile
        the headers ("#error C++14 or later compatible compiler is required to use ATen.", DeepSpeed#1435 with
        g++ 4.8.5; pytorch/pytorch#51339).

        No `ninja` on the job's PATH (packages.ninja) while something compiles at run time is a warning too:
        torch's load() stops with "RuntimeError: Ninja is required to load C++ extensions" (cpp_extension.py
        verify_ninja_availability, which runs `ninja --version`), DeepSpeed's with "Unable to JIT load the <op> op
        due to ninja not being installed"; a ninja pip package whose environment's bin/ is not on PATH is named.

    Example
        torch 2.1.2+cu121, CUDA_HOME=/usr/local/cuda-11.7, DeepSpeed installed without DS_BUILD_OPS, RTX 4090s.

    Fix
        export CUDA_HOME=<a toolkit of torch's CUDA release> (conda install -c nvidia cuda-toolkit=<torch's CUDA>),
        or install torch built for the local toolkit, or pre-build the ops (DS_BUILD_OPS=1).
    """
    pk = snap.get("packages") or {}
    yield from _host_compiler_too_old(snap, pk)
    yield from _ninja_missing(snap, pk)
    kit = pk.get("cuda_toolkit") if isinstance(pk.get("cuda_toolkit"), dict) else {}
    yield from _cpp_extension_unknown_arch(snap, pk, kit)
    windows = str((snap.get("host") or {}).get("os") or "") == "Windows" if "host" in snap else False
    if _home_not_a_toolkit(kit, windows):
        yield from _home_not_a_toolkit(kit, windows)
        return
    if pk.get("cuda_toolkit") == {}:  # searched and none found (a snapshot without the field says nothing)
        yield from _no_cuda_toolkit(snap, pk)
        return
    yield from _toolkit_links_missing(snap, pk, kit)
    yield from _host_compiler_too_new_for_nvcc(snap, pk, kit)
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
    yield from _toolkit_newer_than_driver(snap, kit, have, where, evidence)
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
    if torch_cuda and len(have) >= 2 and len(torch_cuda) >= 2:
        yield from _deepspeed_refuses_minor(snap, pk, kit, have, torch_cuda, build, where, evidence)
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


# NVIDIA/apex setup.py @007e4724: `--cpp_ext` builds apex_C, `--cuda_ext` builds amp_C (multi-tensor apply: fused
# optimizers, amp's gradient scaling), syncbn, fused_layer_norm_cuda, mlp_cuda and more, each a top-level module.
# Without the options only the Python package is installed, and the modules apex imports on use are missing.
APEX_CUDA_EXTENSIONS = ("amp_C", "fused_layer_norm_cuda", "syncbn")


@check("PKG018", "apex-without-extensions", family="packages", needs=("packages",), reads=("gpus",))
def apex_without_extensions(snap):
    """NVIDIA's apex is installed without its compiled C++/CUDA extensions.

    What it checks
        With the `apex` distribution installed, the top-level extension modules its files include
        (packages.apex_build, from the dist-info RECORD or the egg directory): NVIDIA/apex's setup.py
        builds apex_C only with `--cpp_ext` and amp_C, syncbn, fused_layer_norm_cuda, mlp_cuda and
        the others only with `--cuda_ext`. Also whether the distribution is NVIDIA's apex at all (an
        apex/amp package; PyPI's unrelated "apex" has none).

    Why it matters
        The Python package imports, then the first fused layer fails: FusedLayerNorm raises
        "ModuleNotFoundError: No module named 'fused_layer_norm_cuda'" (NVIDIA/apex#499), amp and
        the fused optimizers "No module named 'amp_C'" (NeMo's training, NVIDIA-NeMo/Speech#842),
        and apex.parallel falls back to Python kernels ("apex was installed without --cuda_ext").

    Example
        pip install -v --no-cache-dir ./   # in a clone of NVIDIA/apex, without the build options

    Fix
        pip uninstall -y apex && pip install -v --disable-pip-version-check --no-cache-dir
        --no-build-isolation --config-settings "--build-option=--cpp_ext" --config-settings
        "--build-option=--cuda_ext" ./   # in a clone of NVIDIA/apex, with nvcc of torch's CUDA
    """
    pk = snap["packages"]
    version = (pk.get("versions") or {}).get("apex")
    built = pk.get("apex_build")
    if not version or not isinstance(built, dict) or not isinstance(built.get("extensions"), list):
        return
    have = set(built["extensions"])
    missing = [m for m in APEX_CUDA_EXTENSIONS if m not in have]
    fix = ('pip uninstall -y apex && git clone https://github.com/NVIDIA/apex && cd apex && pip install -v '
           '--disable-pip-version-check --no-cache-dir --no-build-isolation --config-settings "--build-option=--cpp_ext" '
           '--config-settings "--build-option=--cuda_ext" ./')
    if built.get("has_amp") is False:
        yield warning(f"the installed 'apex' {version} is not NVIDIA's apex (no apex.amp)",
                      detail="PyPI's distribution named apex is an unrelated project: `from apex import amp` and apex's "
                             "fused layers fail. NVIDIA's apex is installed from its repository, built with its "
                             "extensions.",
                      fix=fix, subjects=["pkg:apex"], evidence={"apex": version, "apex_build": built})
        return
    if len(missing) < len(APEX_CUDA_EXTENSIONS):
        return  # built with --cuda_ext (some optional extensions may be absent)
    yield warning(f"apex {version} is installed without its CUDA extensions ({', '.join(missing)} missing)",
                  detail=("NVIDIA/apex's setup.py builds them only with --cuda_ext (apex_C with --cpp_ext); "
                          + ("found only " + ", ".join(sorted(have)) if have else "no compiled module is installed")
                          + f" ({built.get('from') or 'its files'}). The first fused layer or optimizer fails: "
                          "\"No module named 'fused_layer_norm_cuda'\", \"No module named 'amp_C'\"."),
                  fix=fix, subjects=["pkg:apex"], evidence={"apex": version, "apex_build": built, "missing": missing})


# check18 (batch 90): OpenMMLab packages that import mmcv.ops (which loads mmcv._ext) on import of their models
MMCV_OPS_USERS = ("mmdet", "mmdet3d", "mmsegmentation", "mmrotate", "mmpose")


@check("PKG020", "mmcv-without-ops", family="packages", needs=("packages",), reads=("lint",))
def mmcv_without_ops(snap):
    """The importable mmcv has no compiled ops (mmcv._ext), under a package that imports mmcv.ops.

    What it checks
        packages.mmcv_build: whether the mmcv package Python imports holds its compiled `_ext` module,
        with mmcv 1.0 or later installed (mmcv.ops came with 1.0) beside mmdet, mmdet3d, mmsegmentation,
        mmrotate or mmpose, or under a training script read (`check --script`, or the script of check's launch
        command) that imports mmcv.ops itself (`from mmcv.ops import DeformConv2d`: lint.scriptfacts mmcv_ops;
        XLearning-SCU/2022-CVPR-AirNet#5, a model importing mmcv's deformable convolution). mmcv's setup.py builds `_ext` only with MMCV_WITH_OPS=1: in the 1.x series
        the distribution "mmcv" is the build without it and "mmcv-full" the one with it; in 2.x
        "mmcv-lite" is the build without. Installing "mmcv" after "mmcv-full" overwrites the same mmcv/
        directory, so the fact reads the directory, not the distribution names.

    Why it matters
        mmcv.ops loads every op through mmcv/utils/ext_loader.py, `importlib.import_module('mmcv._ext')`:
        `from mmdet.apis import ...` fails with "ModuleNotFoundError: No module named 'mmcv._ext'" before
        training starts (open-mmlab/mmdetection#3272, #3271, #10619; open-mmlab/mmsegmentation#126).

    Example
        pip install mmcv==1.0.0 mmdet   # "mmcv", not "mmcv-full"

    Fix
        pip uninstall -y mmcv mmcv-full && pip install mmcv-full -f
        https://download.openmmlab.com/mmcv/dist/<cuda>/<torch>/index.html (1.x; 2.x: mim install mmcv),
        or build from source with MMCV_WITH_OPS=1.
    """
    pk = snap["packages"]
    versions = pk.get("versions") or {}
    built = pk.get("mmcv_build")
    if not isinstance(built, dict) or built.get("ops") is not False:
        return
    mmcv = versions.get("mmcv-full") or versions.get("mmcv") or versions.get("mmcv-lite")
    if gpu_versions.release(mmcv) < (1, 0, 0):
        return  # before mmcv.ops (mmcv 0.x never had compiled ops; mmdet 1.x built its own)
    users = [f"{n} {versions[n]}" for n in MMCV_OPS_USERS if versions.get(n)]
    users += [f"{e.get('path')}:{e.get('line')} ({e.get('what')})" for e in script_asks(snap, "mmcv_ops")[:2]]
    if not users:
        return
    names = [n for n in ("mmcv", "mmcv-full", "mmcv-lite") if versions.get(n)]
    yield warning(f"mmcv {mmcv} has no compiled ops (mmcv._ext), and {', '.join(users)} "
                  f"import{'s' if len(users) == 1 else ''} mmcv.ops",
                  detail=(f"The mmcv package Python imports ({built.get('dir') or 'its directory'}) holds no _ext module; "
                          f"installed distributions: {', '.join(f'{n} {versions[n]}' for n in names)}. mmcv's setup.py "
                          "builds _ext only with MMCV_WITH_OPS=1: 'mmcv' 1.x and 'mmcv-lite' 2.x are built without it, "
                          "and an 'mmcv' installed after 'mmcv-full' overwrites the same directory. mmcv.ops loads "
                          "'mmcv._ext' on import: \"No module named 'mmcv._ext'\"."),
                  fix=("pip uninstall -y mmcv mmcv-full mmcv-lite && pip install "
                       + ("mmcv-full" if gpu_versions.release(mmcv) < (2, 0, 0) else "mmcv")
                       + "   # the build for this torch/CUDA (download.openmmlab.com/mmcv/dist/...), or MMCV_WITH_OPS=1 from source"),
                  subjects=["pkg:mmcv"], evidence={"mmcv": mmcv, "distributions": names, "mmcv_build": built,
                                                   "users": users})


@check("PKG026", "extension-needs-newer-libstdcxx", family="packages", needs=("packages",), reads=("lint",))
def extension_needs_newer_libstdcxx(snap):
    """A compiled extension needs a GLIBCXX_/CXXABI_ version the libstdc++.so.6 the process loads does not define.

    What it checks
        The newest GLIBCXX_/CXXABI_ versions each compiled extension module needs from libstdc++.so.6 (its ELF
        .gnu.version_r: the modules of torch's site-packages, of the checkouts it points into, and of torch's JIT
        build directory, ~/.cache/torch_extensions or TORCH_EXTENSIONS_DIR) against the versions the libstdc++.so.6
        found for torch defines (.gnu.version_d; packages.libstdcxx): one it lacks is an error. When something
        compiles an extension at run time (torch.utils.cpp_extension load() in the script, DeepSpeed's JIT ops), the
        host compiler's own libstdc++ (the newest versions its GCC release defines: gcc's
        libstdc++-v3/doc/xml/manual/abi.xml, ddpdoctor/data/gcc_libstdcxx.json) newer than that copy is a warning.

    Why it matters
        A process loads one libstdc++.so.6: the first that ld.so finds (LD_LIBRARY_PATH, the RUNPATH of torch's
        libraries, a conda environment's lib/, then the system's). A module built by a newer GCC than that copy
        fails at import: "libstdc++.so.6: version `GLIBCXX_3.4.32' not found (required by .../gymtorch.so)"
        (FFTAI/Wiki-GRx-Gym#6: a JIT extension built by Ubuntu 24.04's GCC 13 under a conda environment's older
        libstdcxx-ng; pytorch/pytorch#115138: a module needing GLIBCXX_3.4.20 under CentOS 7's /lib64 copy).

    Example
        gymtorch.so needs GLIBCXX_3.4.32; $CONDA_PREFIX/lib/libstdc++.so.6 defines up to GLIBCXX_3.4.29.

    Fix
        conda install -c conda-forge "libstdcxx-ng>=<the GCC that built it>" (a newer copy defines every older
        version), or put the newer copy first: export LD_LIBRARY_PATH=<dir of a libstdc++.so.6 with that version>;
        or rebuild the extension with the GCC of the environment.
    """
    from ddpdoctor.facts import libstdcxx

    pk = snap.get("packages") or {}
    cxx = pk.get("libstdcxx") if isinstance(pk.get("libstdcxx"), dict) else {}
    if not cxx.get("path") or not (cxx.get("glibcxx") or cxx.get("cxxabi")):
        return
    have = {"glibcxx": cxx.get("glibcxx"), "cxxabi": cxx.get("cxxabi")}
    for ext in pk.get("extension_cxx_needs") or []:
        if not isinstance(ext, dict):
            continue
        short = libstdcxx.short_of(ext, have)
        if not short:
            continue
        tag, need, got = short[0]
        yield error(f"{ext.get('file')} ({ext.get('package')}) needs {tag}_{need}; the libstdc++.so.6 this process "
                    f"loads ({cxx['path']}) defines up to {tag}_{got}",
                    detail=("A process loads one libstdc++.so.6, the first ld.so finds (" + str(cxx.get("from"))
                            + f" here); the module was built by a newer GCC, so its import fails: \"{cxx['path']}: "
                            f"version `{tag}_{need}' not found (required by {ext.get('file')})\"."),
                    fix=(f"conda install -c conda-forge libstdcxx-ng   # a copy that defines {tag}_{need}; or export "
                         "LD_LIBRARY_PATH=<directory of a newer libstdc++.so.6>; or rebuild the extension with the "
                         "environment's GCC"),
                    subjects=[f"pkg:{ext.get('package')}", "lib:libstdc++", f"path:{ext.get('file')}"],
                    evidence={"extension": ext, "libstdcxx": cxx})
        return
    cc = pk.get("host_compiler") if isinstance(pk.get("host_compiler"), dict) else {}
    row = libstdcxx.of_gcc(cc.get("version")) if cc.get("kind") == "gcc" else None
    builders = _jit_builders(snap, pk) if row else []
    short = libstdcxx.short_of(row, have) if builders else []
    if not short:
        return
    tag, need, got = short[0]
    yield warning(f"{builders[0]} compiles with GCC {cc.get('version')}, whose libstdc++ defines {tag}_{need}; the "
                  f"libstdc++.so.6 this process loads ({cxx['path']}) defines up to {tag}_{got}",
                  detail=("torch.utils.cpp_extension (and DeepSpeed's op builder) compile with $CXX, else c++, and link "
                          "the host compiler's libstdc++: the module it builds may need symbols of GCC "
                          f"{row['gcc']}'s libstdc++ (GLIBCXX_{row['glibcxx']}, gcc's abi.xml), but the process has "
                          f"already loaded an older copy ({cxx.get('from')}), so the import of the new module fails: "
                          f"\"version `{tag}_{need}' not found\" (FFTAI/Wiki-GRx-Gym#6)."),
                  fix=(f"conda install -c conda-forge \"libstdcxx-ng>={row['gcc'].split('.')[0]}\"   # the environment's "
                       "libstdc++ as new as the compiler; or build with the environment's compiler: conda install "
                       "-c conda-forge gxx_linux-64 and export CXX=x86_64-conda-linux-gnu-g++"),
                  subjects=["pkg:host-compiler", "lib:libstdc++"],
                  evidence={"host_compiler": cc, "gcc_libstdcxx": row, "libstdcxx": cxx, "builders": builders})


def _cuda_of_soname(version: str) -> tuple:
    """(major, minor) a libcudart soname version names: "9.0" -> (9, 0), "11.0" -> (11, None) (every CUDA 11.x
    runtime carries the soname libcudart.so.11.0), "12" -> (12, None)."""
    parts = [int(p) for p in str(version).split(".") if p.isdigit()]
    if not parts:
        return ()
    return (parts[0], parts[1] if parts[0] <= 10 and len(parts) > 1 else None)


@check("PKG029", "extension-needs-other-cuda-runtime", family="packages", needs=("packages",))
def extension_needs_other_cuda_runtime(snap):
    """A compiled extension links a CUDA runtime (libcudart.so.N) the dynamic loader will not find, or another
    CUDA's than torch's.

    What it checks
        Each compiled extension's DT_NEEDED libcudart.so.X[.Y] (packages.extension_cudart, read from its ELF
        headers), where ld.so(8) finds it (its DT_RPATH without DT_RUNPATH, LD_LIBRARY_PATH, its DT_RUNPATH,
        the /etc/ld.so.conf directories of ld.so.cache, the system directories), against the soname torch's
        own libtorch_cuda.so needs (packages.torch_cudart: a name torch already loaded satisfies the
        extension too) and the CUDA torch was built with (torch/version.py).

    Why it matters
        A name found nowhere and not already loaded fails `import` of the extension with "ImportError:
        libcudart.so.9.0: cannot open shared object file: No such file or directory" - an extension
        built against another CUDA toolkit than the torch now installed (tianweiy/CenterPoint#102,
        det3d's iou3d_nms_cuda under torch 1.6 cu102), or one whose toolkit's lib64 is not on the
        library path. Found, it loads a second CUDA runtime of another major into the process beside
        torch's: torch's own cpp_extension refuses to build against another major ("The detected CUDA
        version ... mismatches the version that was used to compile PyTorch", torch/utils/
        cpp_extension.py _check_cuda_version).

    Example
        torch 1.6.0+cu102 and a det3d extension needing libcudart.so.9.0, no CUDA 9.0 anywhere.

    Fix
        Rebuild the extension against torch's CUDA (`pip install --no-build-isolation --force-reinstall
        <pkg>` / `python setup.py develop` with CUDA_HOME at that toolkit), or put the toolkit's lib64 on
        LD_LIBRARY_PATH.
    """
    pk = snap["packages"]
    rows = [r for r in pk.get("extension_cudart") or () if isinstance(r, dict) and r.get("needed")]
    if not rows:
        return
    build = pk.get("torch_build") or {}
    torch_cuda = gpu_versions.release(build.get("cuda"))[:2] if isinstance(build, dict) else ()
    own = pk.get("torch_cudart")
    for row in rows[:8]:
        want = _cuda_of_soname(row.get("version"))
        if not want:
            continue
        agrees = bool(torch_cuda) and want[0] == torch_cuda[0] and (want[1] is None or want[1] == torch_cuda[1])
        torch_s = f"CUDA {build.get('cuda')}" if torch_cuda else "an unknown CUDA"
        ext_s = f"CUDA {row['version']}" + (".x" if want[1] is None else "")
        ev = {"package": row.get("package"), "file": row.get("file"), "needed": row["needed"], "found": row.get("path"),
              "from": row.get("from"), "torch_cuda": build.get("cuda"), "torch_cudart": own}
        if row["needed"] == own:
            continue  # the name torch's own library loads first: the extension binds to that copy
        if not row.get("path"):
            if agrees and own is None:
                continue  # torch may load that very name itself (not read here): no verdict
            yield error(f"{row.get('package')} needs {row['needed']}, which the dynamic loader finds nowhere"
                        + ("" if agrees else f": it was built against {ext_s}, torch is {torch_s}"),
                        detail=(f"{row.get('file')} names {row['needed']} in its DT_NEEDED; no directory of its search "
                                "path, LD_LIBRARY_PATH, ld.so.conf or the system directories holds it, and torch's own "
                                f"libraries load {own or 'another name'}: importing it fails with \"ImportError: "
                                f"{row['needed']}: cannot open shared object file: No such file or directory\"."),
                        fix=(f"pip install --no-build-isolation --force-reinstall --no-cache-dir {row.get('package')}   "
                             f"# rebuild it against torch's {torch_s}" if not agrees else
                             f"export LD_LIBRARY_PATH=<the CUDA {row['version']} toolkit>/lib64:$LD_LIBRARY_PATH"),
                        subjects=[f"pkg:{row.get('package')}", "pkg:torch"], evidence=ev)
        elif not agrees and torch_cuda:
            yield warning(f"{row.get('package')} loads {row['path']} ({ext_s}) beside torch's {torch_s}",
                          detail=(f"{row.get('file')} was built against another CUDA toolkit than torch: the process then "
                                  "holds two CUDA runtimes, and torch's own cpp_extension refuses to build across a "
                                  "major (\"The detected CUDA version ... mismatches the version that was used to compile "
                                  "PyTorch\")."),
                          fix=f"pip install --no-build-isolation --force-reinstall --no-cache-dir {row.get('package')}   "
                              f"# rebuild it against torch's {torch_s}",
                          subjects=[f"pkg:{row.get('package')}", "pkg:torch"], evidence=ev)
