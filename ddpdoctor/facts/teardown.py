"""torch's own teardown failures of a finished rank (ddpdoctor/data/teardown.json): how a Gloo worker thread that
releases a collective's tensors aborts the process while it shuts down, or hangs it when the process group is freed
with the GIL held; the texts RUN013 says it with. Loaded once; pure lookups."""
from __future__ import annotations

import functools
import json
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "data" / "teardown.json"


@functools.lru_cache(maxsize=1)
def entries() -> tuple:
    with open(DATA, encoding="utf-8") as fh:
        return tuple(json.load(fh)["entries"])


def entry(backend: str = "gloo") -> dict:
    """The teardown entry of a backend ({} when none is known)."""
    return next((e for e in entries() if e.get("backend") == backend), {})


@functools.lru_cache(maxsize=1)
def hangs() -> tuple:
    """Where a rank whose code has returned can hang before it exits (teardown.json "hangs"), with sources."""
    with open(DATA, encoding="utf-8") as fh:
        return tuple(json.load(fh).get("hangs") or ())


def hang_of(frames: list, native: str = "") -> dict:
    """The known teardown hang that the main thread's frames (innermost first, dicts with file and func) or its native
    stack text show: the first entry whose Python frame or native marker is there ({} when none)."""
    for h in hangs():
        for suffix, func in h.get("python") or ():
            if any(str(fr.get("file", "")).endswith(suffix) and fr.get("func") == func for fr in frames):
                return h
        if native and any(m in native for m in h.get("native") or ()):
            return h
    return {}


@functools.lru_cache(maxsize=1)
def after_exit() -> dict:
    """What is known of a rank alive past ddpdoctor's own exit handler (teardown.json "after_exit"), with sources."""
    with open(DATA, encoding="utf-8") as fh:
        return json.load(fh).get("after_exit") or {}
