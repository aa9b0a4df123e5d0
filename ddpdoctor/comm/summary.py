"""What each rank tells the others about itself (the all_gather phase): enough to spot a node
that differs (catalogue C4). Versions come from package metadata, the NCCL and driver versions
from torch / NVML when present. Env values pass through the redactor."""
from __future__ import annotations

import os
import socket
from typing import Mapping

PACKAGES = ("torch", "transformers", "accelerate", "tokenizers", "numpy", "nvidia-nccl-cu12", "nvidia-nccl-cu13")
ENV_PREFIXES = ("NCCL_", "GLOO_", "TORCH_NCCL_", "TORCH_DISTRIBUTED_", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS")


def package_versions() -> dict:
    from importlib import metadata

    out = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
        except Exception:  # noqa: BLE001 - broken metadata must not stop the test
            continue
    return out


def comm_env(env: Mapping[str, str]) -> dict:
    from ddpdoctor.model.redact import redact_env_value

    return {k: redact_env_value(k, v) for k, v in sorted(env.items()) if k.startswith(ENV_PREFIXES)}


def rank_summary(rank: int, world: int, local_rank: int, backend: str, env: Mapping[str, str]) -> dict:
    import torch

    out = {"rank": rank, "world_size": world, "local_rank": local_rank, "host": socket.gethostname(),
           "pid": os.getpid(), "backend": backend, "versions": package_versions(),
           "torch_cuda": getattr(torch.version, "cuda", None), "env": comm_env(env)}
    out["versions"]["torch_runtime"] = torch.__version__
    if torch.cuda.is_available():
        try:
            v = torch.cuda.nccl.version()
            out["versions"]["nccl"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
        except Exception:  # noqa: BLE001
            pass
        try:
            dev = local_rank % max(1, torch.cuda.device_count())
            out["gpu"] = {"index": dev, "name": torch.cuda.get_device_name(dev)}
        except Exception:  # noqa: BLE001
            pass
        try:
            import pynvml

            pynvml.nvmlInit()
            drv = pynvml.nvmlSystemGetDriverVersion()
            out["versions"]["cuda_driver"] = drv.decode() if isinstance(drv, bytes) else drv
        except Exception:  # noqa: BLE001
            pass
    return out
