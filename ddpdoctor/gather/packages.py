"""The `packages` section: versions from installed metadata, never by importing the package."""
from __future__ import annotations

from ddpdoctor.gather import OBJ, STR, Sources, gatherer

DISTRIBUTIONS = ("torch", "transformers", "tokenizers", "accelerate", "deepspeed", "datasets", "h5py", "numpy",
                 "nvidia-ml-py", "pynvml", "nvidia-nccl-cu11", "nvidia-nccl-cu12", "nvidia-nccl-cu13", "safetensors", "huggingface-hub")


# The fields checks read, with their JSON types (the recorded-snapshot schema).
FIELDS = {
    "versions": OBJ, "versions.*": STR, "torch_build": OBJ, "torch_build.*": STR,
    # issue 13: every recorded field has a declared type, so a hand-edited snapshot is rejected uniformly
    "python": STR
}


@gatherer("packages", when=("check", "preflight"), fields=FIELDS, nullable=('versions.*', 'torch_build.*'))
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

    out = {"versions": versions, "python": sys.version.split()[0]}
    if versions.get("torch"):
        out["torch_build"] = torch_build()
    return out


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
