"""The fixture walk of the per-round lint tests (tests/test_lint_round26.py ..): lint one fixture file (or any path)
with the engine's defaults and keep the findings of one rule, as (line, severity) pairs or as the findings.

    FIX = Fixtures("r26")                       # fixtures/lint/r26/
    assert FIX.found("x_bad.py", "LINT013") == [(19, "warning")]
    [f] = FIX.findings("x_bad.py", "LINT013")   # for what a test reads beyond line and severity
    lines(tmp_path / "train.py", "LINT043")     # a file a test wrote

Pure: lint_paths never imports or runs what it reads."""
from __future__ import annotations

from pathlib import Path
from typing import List, Tuple, Union

from ddpdoctor.lint.api import lint_paths

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "lint"


def findings(path: Union[str, Path], rid: str, **options) -> list:
    """The findings of rule `rid` when linting `path` (options go to lint_paths: preview, only, ...)."""
    return [f for f in lint_paths([str(path)], **options).findings if f.id == rid]


def lines(path: Union[str, Path], rid: str, **options) -> List[Tuple[int, str]]:
    """(line, severity) of each finding of `rid` in `path`, in the report's order."""
    return [(f.evidence["line"], f.severity) for f in findings(path, rid, **options)]


class Fixtures:
    """One round's fixture folder, fixtures/lint/<folder>/; `FIX / name` is still the fixture's path."""

    def __init__(self, folder: str) -> None:
        self.dir = FIXTURES / folder

    def __truediv__(self, name: str) -> Path:
        return self.dir / name

    def findings(self, name: str, rid: str, **options) -> list:
        return findings(self.dir / name, rid, **options)

    def found(self, name: str, rid: str, **options) -> List[Tuple[int, str]]:
        return lines(self.dir / name, rid, **options)
