"""PKG001: the Python bindings of NVML (the deprecated `pynvml` distribution)."""
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
