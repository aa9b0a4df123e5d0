"""Files linted together: a helper in one module, gated on rank 0 by its callers in another.

`ddpdoctor lint src/` sees every module of a repository at once. A write in `utils.py`
(`class TensorboardLogger: def __init__: self.writer = SummaryWriter(...)`) is on every rank only if
some caller runs it on every rank; ConvNeXt's and DeiT's `main.py` create it under
`if global_rank == 0`. This module records, for every call into another module of the same run
(`utils.TensorboardLogger(...)`, `from util.misc import save_on_master`), whether the call site is
rank-gated, so rules can ask `gated_elsewhere(path, name)`.

Only runs of 2 to MAX_FILES files build it (the indexes are kept for the rule pass, not rebuilt).
"""
from __future__ import annotations

import os
from typing import Dict, List, Optional, Tuple

from .analysis import ModuleIndex, gated_scopes

MAX_FILES = 500


class Project:
    """Call sites across the files of one run."""

    def __init__(self) -> None:
        self.indexes: Dict[str, ModuleIndex] = {}
        self.scripts: Dict[str, object] = {}  # path -> the parsed Script, handed to the rule pass once
        # (dotted module as spelled by the importer, name) -> [gated?]
        self._sites: Dict[Tuple[str, str], List[bool]] = {}

    def add(self, path: str, index: ModuleIndex) -> None:
        self.indexes[path] = index
        gated = gated_scopes(index)
        for call in index.calls:
            q = call.qual
            if not q or "." not in q.lstrip("."):
                continue
            module, name = q.rsplit(".", 1)
            if module.split(".")[0] in ("torch", "transformers", "os", "accelerate", "numpy", "wandb"):
                continue
            self._sites.setdefault((module, name), []).append(call.ctx.gated or id(call.scope) in gated)

    def external_for(self, path: str) -> Dict[str, bool]:
        """name -> whether every call into `path`'s module-level `name` from other files is gated."""
        stem = os.path.splitext(os.path.normpath(path))[0].split(os.sep)
        out: Dict[str, bool] = {}
        for (module, name), flags in self._sites.items():
            parts = [p for p in module.lstrip(".").split(".") if p]
            if not parts or stem[-len(parts):] != parts:
                continue
            out[name] = out.get(name, True) and all(flags)
        return out


def wants_project(files: List[str]) -> bool:
    return 2 <= len(files) <= MAX_FILES


def build_project(files: List[str]) -> Optional[Project]:
    """Index every readable file once, for the cross-module questions; None for a single file.
    The caller pauses the cyclic garbage collector around this and the rule pass."""
    if not wants_project(files):
        return None
    from .source import Script, read

    project = Project()
    for path in files:
        script = read(path)
        project.scripts[path] = script
        if not isinstance(script, Script):
            continue
        try:
            project.add(path, ModuleIndex(script.tree, script.path, script.text))
        except (RecursionError, MemoryError, Exception):  # noqa: BLE001 - lint_script reports it
            continue
    return project
