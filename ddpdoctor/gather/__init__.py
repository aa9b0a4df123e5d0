"""Gatherers read the machine; each fills one snapshot section and never raises.

Every gatherer takes a `Sources` object, so tests pass a fake environment, a fake /proc root or a
fake NVML backend instead of patching the real machine. Gatherer modules register themselves with
`@gatherer("name")`; importing this package imports them all.
"""
from __future__ import annotations

import importlib
import os
import pkgutil
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional


# Display / gathering order. Sections not listed here come after, alphabetically.
ORDER = ("host", "env", "packages", "launcher", "network", "torch", "gpus", "pci")


@dataclass
class Sources:
    """Where gatherers read from. Defaults are the live machine."""

    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    root: str = "/"  # prefix for /proc, /sys, /dev/shm reads, so tests can point at a fake tree
    nvml: Any = None  # an NVML backend (ddpdoctor.gather.gpus); None means the live library
    python: Optional[str] = None  # interpreter for subprocess facts (torch); None: sys.executable
    timeout_s: float = 20.0

    def path(self, p: str) -> str:
        return os.path.join(self.root, p.lstrip("/")) if self.root != "/" else p


GATHERERS: dict = {}


def gatherer(name: str, *, in_snapshot: bool = True) -> Callable:
    """Register `fn(sources) -> dict` as the gatherer of section `name`."""

    def decorate(fn: Callable) -> Callable:
        GATHERERS[name] = (fn, in_snapshot)
        return fn

    return decorate


def _load() -> None:
    for mod in pkgutil.iter_modules(__path__):
        if not mod.name.startswith("_"):
            importlib.import_module(f"{__name__}.{mod.name}")
