"""What the installed torch offers and what its companions need of it: PKG005 (no torch.distributed or NCCL),
PKG004 (older than accelerate needs), PKG019 (NumPy 2 under a torch built against NumPy 1.x),
PKG022 (two torch installs, or a torch directory shadowing it)."""
from __future__ import annotations

from ddpdoctor.facts import gpu_versions
from ddpdoctor.facts.env import script_asks
from ddpdoctor.model import error, info, warning
from ddpdoctor.model.registry import check


def torch_backends(snap) -> dict:
    """{'distributed': bool|None, 'nccl': bool|None, 'how': str}: what the installed torch offers.

    The `torch` facts (torch.distributed.is_available() / is_nccl_available(), from a snapshot that
    recorded them) when present, without gathering them: they cost an interpreter that imports torch.
    Otherwise what the platform settles: torch's Windows wheels had no torch.distributed before 1.7
    and never NCCL (NCCL is Linux-only); ROCm's Windows builds are made without USE_DISTRIBUTED
    (ROCm/TheRock external-builds/pytorch/build_prod_wheels.py), told by '+rocm' in the version or by the
    build's HIP version (packages.torch_build.hip, torch.version.hip) when the version has no local part."""
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
    build = (snap.get("packages") or {}).get("torch_build")
    hip = build.get("hip") if isinstance(build, dict) else None  # torch.version.hip: a ROCm build whatever its name
    if "rocm" in str(version) or hip:
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
        names "nccl" in init_process_group. The plain no-NCCL warning (no script read names nccl) is info
        where this torch release may not import at all on this OS (a known import-time defect, PKG010: torch
        2.4.0's Windows fbgemm.dll without libomp140): the root cause is met first.

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
    from ddpdoctor.facts.known_defects import stops_at_import, torch_imported

    b = torch_backends(snap)
    os_name = str((snap.get("host") or {}).get("os") or "")
    version = ((snap.get("packages") or {}).get("versions") or {}).get("torch")
    where = f"torch {version}" + (f" on {os_name}" if os_name else "")
    launched = (snap.get("launcher") or {}).get("kind") not in (None, "none")
    # root cause first: the plain no-NCCL warning below holds only if the script asks for NCCL (not read); where this
    # release may not even import here (a known import-time defect, PKG010), that import failure leads and the
    # no-NCCL note is info. The certain findings (no torch.distributed; a script read that names nccl) keep their rank.
    first = [e["id"] for e in stops_at_import(version, os_name or None, torch_imported(snap))]
    later = (lambda make: info) if first else (lambda make: make)  # noqa: E731
    after = (f" Second to PKG010 ({', '.join(first)}): this torch release may not import here at all, which is met "
             "first.") if first else ""
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
        yield later(warning)(f"{where} has no NCCL backend, and this machine has {len(devices)} NVIDIA GPU(s)",
                      detail=f"torch.distributed.is_nccl_available() is False ({b['how']})"
                             + ": init_process_group(backend=\"nccl\") raises \"Distributed package doesn't have NCCL "
                             "built in\"" + (", and Gloo is the backend this build has." if gloo else ".") + after,
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


# check18 (batch 90): the first torch releases whose wheels were built against NumPy 2.0 (whose C API serves both
# NumPy 1.x and 2.x at run time); a wheel built against NumPy 1.x cannot use NumPy 2's C API.
NUMPY2_BUILT_SINCE = (2, 3, 0)          # pytorch/builder#1770 (2024-04-04): numpy 2.0.0rc1 for release/2.3's wheels and conda
NUMPY2_BUILT_SINCE_WINDOWS = (2, 4, 1)  # pytorch/pytorch#131668: 2.4.0's Windows wheels were built against 1.x again
WINDOWS_NUMPY1_AGAIN = (2, 4, 0)        # (2.3.x on Windows is not judged: no source says how its wheels were built)


@check("PKG019", "numpy2-under-torch-built-for-numpy1", family="packages", needs=("packages",), reads=("host",))
def numpy2_under_torch_built_for_numpy1(snap):
    """NumPy 2 is installed under a torch release built against NumPy 1.x.

    What it checks
        The numpy and torch versions: numpy 2.x with a torch older than 2.3.0, the first release whose
        wheels were built against NumPy 2.0 (pytorch/builder#1770, cherry-picked onto release/2.3:
        "Add numpy 2.0.0rc1 support to conda and wheels"); on Windows also 2.4.0, whose Windows wheels were
        built against NumPy 1.x (pytorch/pytorch#131668, "Fixed in rc 2.4.1"); 2.3.x on Windows is not
        judged.

    Why it matters
        A module compiled against NumPy 1.x's C API cannot use NumPy 2's: `import torch` prints "A module
        that was compiled using NumPy 1.x cannot be run in NumPy 2.0.0 as it may crash" and "Failed to
        initialize NumPy: _ARRAY_API not found", then torch.from_numpy, tensor.numpy(), torch.tensor on a
        NumPy array and the DataLoader's default collate of NumPy arrays fail with "Numpy is not available"
        (Cambridge-ICCS/practical-ml-with-pytorch#70, xai4space/meteors#20). A fresh `pip install numpy`
        or a dependency without an upper bound brings NumPy 2 into an environment that pins an old torch.

    Example
        torch 2.2.2 (the last macOS x86-64 release) with numpy 2.0.0.

    Fix
        pip install "numpy<2", or a torch built against NumPy 2 (torch>=2.3; on Windows not 2.4.0).
    """
    versions = (snap.get("packages") or {}).get("versions") or {}
    torch, numpy = versions.get("torch"), versions.get("numpy")
    t, n = gpu_versions.release(torch), gpu_versions.release(numpy)
    if not t or not n or n[0] < 2:
        return
    windows = str((snap.get("host") or {}).get("os") or "") == "Windows"
    since = NUMPY2_BUILT_SINCE_WINDOWS if windows and t >= WINDOWS_NUMPY1_AGAIN else NUMPY2_BUILT_SINCE
    if t >= since:
        return
    floor = ".".join(map(str, since))
    yield warning(f"numpy {numpy} is installed under torch {torch}, which was built against NumPy 1.x: "
                  "torch's NumPy interop fails",
                  detail=(("torch 2.4.0's Windows wheels were built against NumPy 1.x again (pytorch/pytorch#131668; "
                           "fixed in 2.4.1)" if since == NUMPY2_BUILT_SINCE_WINDOWS else
                           "torch's wheels are built against NumPy 2.0 from 2.3.0 (pytorch/builder#1770 moved release/2.3's "
                           "wheel and conda builds to numpy 2.0.0rc1)")
                          + ". Under NumPy 2, `import torch` warns 'A module that was compiled using NumPy 1.x cannot be "
                          "run in NumPy 2 ...' and '_ARRAY_API not found'; torch.from_numpy, .numpy(), torch.tensor of "
                          "an ndarray and the DataLoader's collate of NumPy arrays then raise 'Numpy is not available'."),
                  fix=f'pip install "numpy<2"   # or: pip install "torch>={floor}" (built against NumPy 2)',
                  subjects=["pkg:numpy", "pkg:torch"],
                  evidence={"torch": torch, "numpy": numpy, "built_against_numpy2_since": floor, "windows": windows})


@check("PKG022", "torch-installed-twice", family="packages", needs=("packages",))
def torch_installed_twice(snap):
    """More than one torch is installed where this Python imports from, or a torch directory shadows it.

    What it checks
        packages.torch_installs: the distributions named torch that importlib.metadata finds on
        sys.path (site-packages, the user site ~/.local, PYTHONPATH), one per directory; the conda
        records of torch packages in the environment (pytorch, pytorch-nightly, pytorch-cpu,
        pytorch-gpu: different names that write the same torch/ directory); and a torch package
        directory (torch/__init__.py) in the current directory, which `python script.py` run from
        there puts ahead of site-packages.

    Why it matters
        Only one torch is imported, and it need not be the one the metadata, pip or the launcher
        reports; files of two installs mix in one directory: 'module torch has no attribute version'
        after conda's pytorch and pytorch-nightly (pytorch/pytorch#12031), 'module object has no
        attribute _init_names' from two versions (pytorch/pytorch#2094), a library's version check
        and the imported torch disagreeing (huggingface/transformers#29022), 'No module named
        torch._C' from a source checkout's torch/ in the working directory (pytorch/pytorch#574).

    Example
        pip install torch==2.2.0 in a conda environment that already has conda's pytorch 2.1.0.

    Fix
        Uninstall every copy (pip uninstall torch; conda remove pytorch) and install one; run from a
        directory without a torch/ folder.
    """
    ti = (snap.get("packages") or {}).get("torch_installs") or {}
    if not isinstance(ti, dict):
        return
    dists = [d for d in ti.get("dists") or [] if isinstance(d, dict)]
    conda = [str(c) for c in ti.get("conda") or []]
    shadow = ti.get("cwd_shadow")
    where = []
    if len(dists) >= 2:
        where.append("distributions named torch in " + ", ".join(f"{d.get('location')} ({d.get('version')})" for d in dists[:4]))
    if len(conda) >= 2:
        where.append("conda packages " + ", ".join(conda[:4]))
    if shadow:
        where.append(f"a torch package directory in the current directory ({shadow})")
    if not where:
        return
    yield warning(("a torch directory in the current directory shadows the installed torch" if shadow and len(where) == 1
                   else "more than one torch is installed for this Python"),
                  detail=("Found: " + "; ".join(where) + ". Python imports one of them (the first on sys.path), which "
                          "need not be the one pip, conda or a library's version check reports, and two installs "
                          "writing the same torch/ leave a mixture: \"module 'torch' has no attribute ...\", "
                          "\"No module named torch._C\"."),
                  fix=("cd to another directory (or rename ./torch)" if shadow and len(where) == 1 else
                       "pip uninstall -y torch; conda remove pytorch pytorch-nightly   # repeat until none is left, "
                       "then install one torch"),
                  subjects=["pkg:torch"], evidence={"dists": dists[:4], "conda": conda[:4], "cwd_shadow": shadow})
