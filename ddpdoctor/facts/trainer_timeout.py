"""Whether transformers' TrainingArguments hands `ddp_timeout` to the process group it starts (_setup_devices), on
CPU (use_cpu, no_cuda before 4.34, or ACCELERATE_USE_CPU) and on GPU; where it does not, the group gets torch's
default (torch/distributed/constants.py default_pg_timeout, 30 min, for every backend but NCCL; torch 2.13.0).

Sources: huggingface/transformers, src/transformers/training_args.py (TrainingArguments._setup_devices), read in the
release wheels of each version below (the wheels carry no commit: the release tags v4.28.1, v4.29.2, v4.30.2, v4.36.2,
v4.46.3 and v5.25.0 name the commits):
- 4.28.1: before accelerate. CPU under a distributed launch: torch.distributed.init_process_group(backend=
  self.xpu_backend, rank=rank, world_size=size, timeout=self.ddp_timeout_delta); GPU: init_process_group(backend=
  "nccl", timeout=self.ddp_timeout_delta). Passed on both.
- 4.29.2, 4.30.2: `if self.no_cuda: PartialState(cpu=True, backend=self.ddp_backend)`; GPU: `PartialState(backend=
  self.ddp_backend)`; only DeepSpeed gets `timeout=timedelta(seconds=self.ddp_timeout)`. Passed on neither.
- 4.36.2: `if self.use_cpu or ACCELERATE_USE_CPU: PartialState(cpu=True, backend=...)`; GPU: PartialState(backend=...,
  timeout=timedelta(seconds=self.ddp_timeout)). CPU no, GPU yes.
- 4.46.3, 5.25.0: accelerator_state_kwargs; the use_cpu / ACCELERATE_USE_CPU branch sets cpu and backend, no timeout;
  the GPU branch sets timeout=timedelta(seconds=self.ddp_timeout). CPU no, GPU yes.
Between two versions read, the behaviour both show is assumed (4.37-4.46.2, 4.47-5.24); where they differ it is not
known (GPU, 4.31-4.36.1); after 5.25.0 nothing is known (None).
"""
from __future__ import annotations

from typing import Optional

from ddpdoctor.facts.gpu import version_tuple

# (first version, last version read, passed on CPU, passed on GPU); None: not read
SPANS = (
    ((0,), (4, 28, 1), True, True),
    ((4, 29), (4, 30, 2), False, False),
    ((4, 31), (4, 36, 1), False, None),  # CPU as on both sides; GPU not read
    ((4, 36, 2), (5, 25, 0), False, True),
)
TORCH_DEFAULT_S = 1800.0  # torch.distributed default_pg_timeout (non-NCCL backends)
TRUTHY = {"y", "yes", "t", "true", "on", "1"}  # accelerate.utils.strtobool, as training_args reads ACCELERATE_USE_CPU


def passes_ddp_timeout(version: Optional[str], cpu: bool) -> Optional[bool]:
    """Whether that transformers version passes ddp_timeout to the group on CPU (cpu=True) or GPU; None: not known."""
    v = version_tuple(version)
    if not v:
        return None
    for first, last, on_cpu, on_gpu in SPANS:
        if first <= v <= last:
            return on_cpu if cpu else on_gpu
    return None


def on_cpu(args: dict, env: dict) -> bool:
    """TrainingArguments' own CPU branch: use_cpu (no_cuda before 4.34), or ACCELERATE_USE_CPU true."""
    return bool(args.get("use_cpu") or args.get("no_cuda")
                or str(env.get("ACCELERATE_USE_CPU", "")).strip().lower() in TRUTHY)
