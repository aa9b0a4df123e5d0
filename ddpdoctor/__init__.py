"""ddpdoctor: finds why a distributed PyTorch / Hugging Face training set-up is broken or slow.

The package root stays import-light on purpose: `ddpdoctor check` must start fast and must not
import torch or transformers. Heavy entry points (preflight, the Trainer callback) are loaded on
first use.
"""
from __future__ import annotations

__version__ = "0.1.0"

import os as _os
import sys as _sys

# The environment as the training script saw it when it imported ddpdoctor, before accelerate
# (TrainingArguments) writes RANK/LOCAL_RANK/LOCAL_WORLD_SIZE defaults into os.environ: preflight
# judges what the launcher or the user set, not what accelerate filled in. (env, accelerate
# already set up at that moment?)
_ENV_AT_IMPORT = (dict(_os.environ), bool(getattr(getattr(_sys.modules.get("accelerate.state"), "PartialState", None),
                                                  "_shared_state", None)))

__all__ = ["__version__", "preflight", "PreflightError"]


def __getattr__(name: str):
    # Lazy so that `import ddpdoctor` costs nothing for the CLI.
    if name in ("preflight", "PreflightError"):
        # importlib, not `from . import preflight`: that form calls hasattr(ddpdoctor, "preflight"),
        # which lands back here and recurses forever. Once imported, the package attribute
        # `preflight` is the module, which is callable (see ddpdoctor/preflight.py).
        import importlib

        return getattr(importlib.import_module(f"{__name__}.preflight"), name)
    raise AttributeError(f"module 'ddpdoctor' has no attribute {name!r}")
