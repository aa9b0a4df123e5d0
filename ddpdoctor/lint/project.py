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
from typing import Dict, List, Optional, Set, Tuple

from .analysis import ModuleIndex

MAX_FILES = 500


def gated_scopes(index: ModuleIndex, external: Optional[Dict[str, bool]] = None) -> Set[int]:
    """Functions (ids of their scopes) whose every call site is under a rank test, directly, through
    callers that are themselves gated, or (for module-level functions and classes) through callers in
    other modules of the same run (`external`: name -> all those sites gated)."""
    sites: Dict[int, list] = {}
    scopes: Dict[int, object] = {}
    for call in index.calls:
        fn = index.function_of(call.node.func, call.scope)
        if fn is None:
            klass = index.local_class(call.node.func, call.scope)
            fn = klass.functions.get("__init__") if klass is not None else None
        if fn is not None:
            sites.setdefault(id(fn), []).append(call)
            scopes[id(fn)] = fn
    gated: Set[int] = set()
    if external:
        for name, all_gated in external.items():
            fn = index.module.functions.get(name)
            if fn is None and name in index.module.classes:
                fn = index.module.classes[name].functions.get("__init__")
            if fn is None:
                continue
            if all_gated and all(c.ctx.gated for c in sites.get(id(fn), [])):
                gated.add(id(fn))
            elif not all_gated:
                sites.setdefault(id(fn), []).append(None)  # an ungated caller elsewhere
    for _ in range(6):
        changed = False
        for key, calls in sites.items():
            if key in gated:
                continue
            if all(c is not None and (c.ctx.gated or id(c.scope) in gated) for c in calls):
                gated.add(key)
                changed = True
        if not changed:
            break
    # Methods of a class whose constructor is only called under a gate: the object exists on rank 0 only.
    for s in index.scopes:
        if s.kind == "class":
            init = s.functions.get("__init__")
            if init is not None and id(init) in gated:
                for m in s.functions.values():
                    gated.add(id(m))
    return gated


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
