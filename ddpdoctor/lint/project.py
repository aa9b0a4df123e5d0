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

from typing import Dict, List, Optional

from .analysis import ModuleIndex
from .facts import ProjectFacts

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
        script = read(path)
        project.scripts[path] = script
        if not isinstance(script, Script):
            continue
        try:
            project.add(path, ModuleIndex(script.tree, script.path, script.text))
        except (RecursionError, MemoryError, Exception):  # noqa: BLE001 - lint_script reports it
            continue
    return project
