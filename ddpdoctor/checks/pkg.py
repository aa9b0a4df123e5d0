"""Installed-package checks: the deprecated `pynvml` distribution, NCCL wheels that overwrite each other."""
from __future__ import annotations

from ddpdoctor.model import warning
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
