"""ddpdoctor: finds why a distributed PyTorch / Hugging Face training set-up is broken or slow.

The package root stays import-light on purpose: `ddpdoctor check` must start fast and must not
import torch or transformers. Heavy entry points (preflight, the Trainer callback) are loaded on
first use.

Layers, top to bottom. A module imports only from its own layer or a lower one, never up, and no
two modules import each other, even through others (tests/test_layers.py reads this list and walks
every import, function-level ones included). The most specific prefix decides a module's layer.

    cli        ddpdoctor.cli ddpdoctor.__main__ ddpdoctor.start
    commands   ddpdoctor.commands ddpdoctor.comm.__main__ ddpdoctor.probe.__main__ ddpdoctor.launch.__main__
               ddpdoctor.preflight ddpdoctor.integrations ddpdoctor.instrument
    pipeline   ddpdoctor.pipeline ddpdoctor.comm ddpdoctor.probe ddpdoctor.lint ddpdoctor.launch ddpdoctor.inprocess
               ddpdoctor.triage ddpdoctor.run
    checks     ddpdoctor.checks ddpdoctor.lint.rules ddpdoctor.triage.rules
    gather     ddpdoctor.gather ddpdoctor.proctree ddpdoctor.inprocess.runtime ddpdoctor.lint.source ddpdoctor.lint.context
               ddpdoctor.triage.reader
               ddpdoctor.triage.records ddpdoctor.run.beacon ddpdoctor.run.section ddpdoctor.run.stacks
    facts      ddpdoctor.facts ddpdoctor.lint.analysis ddpdoctor.lint.conditions ddpdoctor.lint.names
               ddpdoctor.lint.facts ddpdoctor.lint.launchinfo
               ddpdoctor.triage.job ddpdoctor.triage.lines ddpdoctor.triage.signatures ddpdoctor.triage.verdict
               ddpdoctor.triage.flight ddpdoctor.triage.safe_pickle ddpdoctor.triage.blocks ddpdoctor.triage.prose
    model      ddpdoctor.model ddpdoctor ddpdoctor.recache

- cli/commands: parse arguments, call the pipeline, print, choose the exit status. A new command is
  one module in ddpdoctor/commands/ plus one line in cli.LAZY_COMMANDS.
- pipeline: gather -> snapshot -> judge (pipeline.runner, the one check runner) -> report
  (pipeline.render); the feature pipelines (comm, probe, lint, in-process preflight, launch) too.
- checks: pure functions of the snapshot, one folder or module per ID prefix (checks/gpu/ holds
  GPU0xx). A check module never imports another family's module, and never imports gather: what
  two checks share is a fact.
- gather: reads the machine (and, in-process, the live training process); sits beside facts and
  is read only by the pipeline. It may use facts, never the reverse.
  ddpdoctor.proctree is the one mechanism every launcher uses to start, follow and stop its processes.
- facts: pure derived readings shared by checks (rank counts with their source, the
  CUDA_VISIBLE_DEVICES mapping, PCI bus IDs, units, NCCL variable tables). No I/O, except
  reading the package's own knowledge files (ddpdoctor/data/: facts.catalogue, facts.messages,
  facts.known_defects, facts.gpu_versions), each once.
- model: Finding/Report, the check declarations (model.registry), redaction; recache (the user cache folder, compiled
  regular expressions kept between runs).
Public aliases kept for users: ddpdoctor.preflight, ddpdoctor.integrations, ddpdoctor.instrument.
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
        # `preflight` is the module, which is callable (see ddpdoctor/inprocess/preflight.py).
        import importlib

        return getattr(importlib.import_module(f"{__name__}.preflight"), name)
    raise AttributeError(f"module 'ddpdoctor' has no attribute {name!r}")
