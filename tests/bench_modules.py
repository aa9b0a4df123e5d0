"""Load a module of benchmarks/ by file (the folder is not a package): one helper for every test that checks a
benchmark's pure parts."""
from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def load(name: str, as_name: str = "") -> ModuleType:
    """benchmarks/<name>.py, executed as a fresh module (`as_name`: the module's own name, default `name`)."""
    spec = importlib.util.spec_from_file_location(as_name or name, BENCHMARKS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
