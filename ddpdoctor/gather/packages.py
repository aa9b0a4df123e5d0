"""The `packages` section: versions from installed metadata, never by importing the package."""
from __future__ import annotations

from ddpdoctor.gather import OBJ, STR, Sources, gatherer

DISTRIBUTIONS = ("torch", "transformers", "tokenizers", "accelerate", "deepspeed", "datasets", "h5py", "numpy",
                 "nvidia-ml-py", "pynvml", "nvidia-nccl-cu12", "nvidia-nccl-cu13", "safetensors", "huggingface-hub")


# The fields checks read, with their JSON types (the recorded-snapshot schema).
FIELDS = {
    "versions": OBJ, "versions.*": STR,
    # issue 13: every recorded field has a declared type, so a hand-edited snapshot is rejected uniformly
    "python": STR
}


@gatherer("packages", when=("check", "preflight"), fields=FIELDS, nullable=('versions.*',))
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

    return {"versions": versions, "python": sys.version.split()[0]}
