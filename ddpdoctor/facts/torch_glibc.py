"""The oldest glibc torch's own Linux binaries need, by torch release (ddpdoctor/data/torch_glibc.json, with the
threads that state it). Pure lookups."""
from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Optional

from ddpdoctor.facts.gpu_versions import release

DATA = Path(__file__).resolve().parent.parent / "data" / "torch_glibc.json"


@functools.lru_cache(maxsize=1)
def entries() -> tuple:
    with open(DATA, encoding="utf-8") as fh:
        return tuple(json.load(fh)["entries"])


def glibc_floor(torch_version) -> Optional[dict]:
    """The row whose torch range holds `torch_version` ({"glibc": "2.17", "message", "sources"}), or None."""
    have = release(torch_version)
    if not have:
        return None
    for row in entries():
        if release(row["torch_from"]) <= have <= release(row["torch_to"]):
            return row
    return None


def host_glibc(host: dict) -> Optional[tuple]:
    """(major, minor) of the host's glibc: host.glibc ("2.17"), else the "-with-glibc2.17" of host.platform."""
    for text in (host.get("glibc"), host.get("platform")):
        m = re.search(r"(?:^|glibc)(\d+)\.(\d+)(?:$|\b)", str(text or "")) if text else None
        if m:
            return int(m.group(1)), int(m.group(2))
    return None
