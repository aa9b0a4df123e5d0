"""The `env` section: every variable that steers distributed training, with secrets redacted."""
from __future__ import annotations

from ddpdoctor.model.redact import redact_env_value
from ddpdoctor.gather import LIST, OBJ, STR, Sources, gatherer

PREFIXES = (
    "MASTER_", "LOCAL_", "TORCHELASTIC_", "PET_", "NCCL_", "TORCH_", "GLOO_", "CUDA_", "OMP_", "MKL_",
    "RAYON_", "HF_", "SLURM_", "OMPI_", "PMI_", "PMIX_", "ACCELERATE_", "MV2_", "KMP_", "OPENBLAS_",
    "TOKENIZERS_", "TRANSFORMERS_", "NVIDIA_", "UCX_", "FI_", "DEEPSPEED_", "DS_", "PYTORCH_", "WANDB_",
)
EXACT = {"RANK", "WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME",
         "NODE_RANK", "CROSS_RANK", "CROSS_SIZE", "LD_PRELOAD", "LD_LIBRARY_PATH", "PYTHONHASHSEED",
         "KUBERNETES_SERVICE_HOST", "CONTAINER", "container", "SINGULARITY_CONTAINER", "APPTAINER_CONTAINER",
         "TORCHINDUCTOR_COMPILE_THREADS"}
MAX_VALUE_CHARS = 4096


def relevant(name: str) -> bool:
    return name in EXACT or name.startswith(PREFIXES)


# The fields checks read, with their JSON types (the recorded-snapshot schema).
FIELDS = {
    "vars": OBJ, "vars.*": STR,
    # issue 13: every recorded field has a declared type, so a hand-edited snapshot is rejected uniformly
    "redacted": LIST, "redacted[]": STR
}


@gatherer("env", when=("check", "preflight"), fields=FIELDS)
def gather_env(src: Sources) -> dict:
    out: dict = {}
    redacted: list = []
    for name, value in src.environ.items():
        if not isinstance(name, str) or not relevant(name):
            continue
        value = value if isinstance(value, str) else str(value)
        if len(value) > MAX_VALUE_CHARS:
            value = value[:MAX_VALUE_CHARS] + f"...<{len(value) - MAX_VALUE_CHARS} more chars>"
        safe = redact_env_value(name, value)
        if safe != value:
            redacted.append(name)
        out[name] = safe
    return {"vars": dict(sorted(out.items())), "redacted": sorted(redacted)}
