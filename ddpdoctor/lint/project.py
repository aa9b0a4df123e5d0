"""The files of one lint run, indexed together, with the facts rules ask about the whole project.

`ddpdoctor lint src/` sees every module of a repository at once. A write in `utils.py`
(`class TensorboardLogger: def __init__: self.writer = SummaryWriter(...)`) is on every rank only if
some caller runs it on every rank; ConvNeXt's and DeiT's `main.py` create it under
`if global_rank == 0`. Every file is indexed first, then `facts.ProjectFacts` answers the
cross-module questions (gated callers, rank-test flags set in one module and tested in another,
dead code, how the project is launched and which versions it pins).

A single file is a project of one. Runs of more than MAX_FILES files index each file on its own.
"""
from __future__ import annotations

import ast
import os
from typing import Dict, List, Optional

from .analysis import ModuleIndex
from .facts import ProjectFacts
from .names import import_bindings

MAX_FILES = 500


class Project:
    """The indexes of a run and their facts."""

    def __init__(self, context=None) -> None:
        self.indexes: Dict[str, ModuleIndex] = {}
        self.scripts: Dict[str, object] = {}  # path -> the parsed Script, handed to the rule pass once
        self.context = context
        self.facts = ProjectFacts(self.indexes, context)

    def add(self, path: str, index: ModuleIndex) -> None:
        self.indexes[path] = index

    def release(self) -> None:
        """Free every index of the run once no rule reads them (ModuleIndex.release: cycles broken, so reference
        counting frees them now instead of the cyclic collector later)."""
        for index in self.indexes.values():
            index.release()
        self.indexes.clear()
        self.scripts.clear()
        self.facts.release()

    def external_for(self, path: str) -> Dict[str, bool]:
        """name -> whether every call into `path`'s module-level `name` from other files is gated."""
        return self.facts.external_for(path)


def wants_project(files: List[str]) -> bool:
    return 1 <= len(files) <= MAX_FILES


def build_project(files: List[str], context=None) -> Optional[Project]:
    """Index every readable file once, for the cross-module questions. The caller pauses the cyclic
    garbage collector around this and the rule pass."""
    if not wants_project(files):
        return None
    from .source import Script, read

    project = Project(context)
    for path in files:
        project.scripts[path] = read(path)
    reexports = _reexports({p: s.tree for p, s in project.scripts.items() if isinstance(s, Script)}) \
        if len(files) > 1 else {}
    for path in files:
        script = project.scripts[path]
        if not isinstance(script, Script):
            continue
        try:
            project.add(path, ModuleIndex(script.tree, script.path, script.text, reexports))
        except (RecursionError, MemoryError, Exception):  # noqa: BLE001 - lint_script reports it
            continue
    project.facts.imported = _imported_modules(project.indexes)
    return project


_NOT_PROJECT = {"torch", "transformers", "accelerate", "datasets", "tokenizers", "h5py", "numpy", "os", "sys",
                "multiprocessing", "functools", "trl", "deepspeed", "lightning", "pytorch_lightning", "peft",
                "wandb", "typing", "collections", "itertools", "logging", "json", "math", "random", "time", "re",
                "dataclasses", "pathlib", "argparse", "subprocess", "socket", "contextlib", "shutil", "copy",
                "torchvision", "timm", "einops", "tqdm", "omegaconf", "hydra", "yaml", "scipy", "sklearn", "PIL"}
MAX_IMPORTED = 40
MAX_IMPORTED_BYTES = 256 * 1024


def _imported_modules(indexes: Dict[str, ModuleIndex]) -> Dict[str, ast.Module]:
    """The modules of the user's project that the linted files import but that are not linted with them
    (`from nerfstudio.utils.decorators import check_main_thread`), found beside a linted file or up to
    two folders above it, parsed (never imported): a reader opens them to see what a decorator or a
    gate function does. At most MAX_IMPORTED files."""
    out: Dict[str, ast.Module] = {}
    linted = {os.path.normpath(os.path.abspath(p)) for p in indexes}
    seen: set = set()
    for path, index in indexes.items():
        if len(out) >= MAX_IMPORTED:
            break
        here = os.path.dirname(os.path.abspath(path))
        # `from engine import *` binds every public name of engine.py but no name the index records: its module
        # counts too (Cecilia-xue/AGT runs engine.evaluate(model) on rank 0, fr53)
        stars = ["." * (node.level or 0) + (node.module or "") for node in index.tree.body
                 if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names) and node.module]
        for target in list(index.module.imports.values()) + stars:
            if not target or target.split(".")[0].lstrip(".") in _NOT_PROJECT:
                continue
            parts = target.lstrip(".").split(".")
            for module in (parts, parts[:-1]):  # `pkg.mod` or `pkg.mod.name`
                if not module:
                    continue
                rel = os.path.join(*module)
                bases = [here] if target.startswith(".") else [here, os.path.dirname(here),
                                                               os.path.dirname(os.path.dirname(here))]
                hit = None
                for base in bases:
                    for cand in (os.path.join(base, rel + ".py"), os.path.join(base, rel, "__init__.py")):
                        if cand in seen:
                            continue
                        seen.add(cand)
                        if os.path.isfile(cand):
                            hit = os.path.normpath(cand)
                            break
                    if hit:
                        break
                if hit and hit not in linted and hit not in out:
                    try:
                        if os.path.getsize(hit) <= MAX_IMPORTED_BYTES:
                            with open(hit, encoding="utf-8", errors="replace") as fh:
                                out[hit] = ast.parse(fh.read())
                    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
                        pass
                    break
            if len(out) >= MAX_IMPORTED:
                break
    return out


def _reexports(trees: Dict[str, ast.Module]) -> Dict[str, str]:
    """`<module>.<name>` -> library name, for names a project module binds by a top-level import
    (`import torch.distributed as dist` in multi_train_utils/distributed_utils.py gives
    `multi_train_utils.distributed_utils.dist` -> `torch.distributed`), under every dotted suffix of the
    module's path, as importers may spell it."""
    out: Dict[str, str] = {}
    for path, tree in trees.items():
        parts = os.path.splitext(os.path.normpath(path))[0].split(os.sep)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        aliases = [(local, target) for stmt in tree.body if isinstance(stmt, (ast.Import, ast.ImportFrom))
                   for local, target in import_bindings(stmt) if not target.startswith(".")]
        if not aliases:
            continue
        for k in range(1, min(len(parts), 4) + 1):
            module = ".".join(parts[-k:])
            for local, target in aliases:
                out.setdefault(f"{module}.{local}", target)
    return out
