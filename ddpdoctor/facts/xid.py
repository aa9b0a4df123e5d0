"""The NVIDIA driver's Xid events: what a kernel log line says, and what its code means for a job.

The codes and their classes are a catalogue (ddpdoctor/data/xid.json, mined by tools/mine_xid.py from
the driver's nverror.h); this module parses the driver's log line and answers "which class is this
code". Pure: the `driver` gatherer reads the kernel log, checks ask here.
"""
from __future__ import annotations

import re
from typing import List, Optional

from ddpdoctor.facts import catalogue

# "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus." (older drivers
# omit "PCI:"; the driver prints the bus location without the function)
LINE = re.compile(r"NVRM: Xid \((?:PCI:)?(?P<bdf>[0-9a-fA-F:.]+)\): (?P<code>\d+),? ?(?P<rest>.*)")
# Classes that say the GPU (not the program) is unwell: a check reports these.
HARDWARE = ("gpu-lost", "memory-uncorrectable", "memory-contained", "memory-retirement", "nvlink", "firmware")


def norm_bdf(raw: str) -> str:
    """The driver writes "0000:3b:00" (no function); -> "0000:3b:00.0", comparable with facts.pci.norm_bdf."""
    parts = raw.strip().lower().split(":")
    if len(parts) == 2:
        parts = ["0000"] + parts
    if len(parts) < 3:
        return raw.strip().lower()
    dev = parts[2] if "." in parts[2] else parts[2] + ".0"
    try:
        return f"{int(parts[0], 16):04x}:{parts[1]}:{dev}"
    except ValueError:
        return raw.strip().lower()


def parse(line: str) -> Optional[dict]:
    """{code, bdf, text} of a driver Xid line, or None."""
    m = LINE.search(line)
    if not m:
        return None
    return {"code": int(m.group("code")), "bdf": norm_bdf(m.group("bdf")), "text": m.group("rest").strip()[:300]}


def entry(code: int) -> Optional[dict]:
    for e in catalogue.entries("xid"):
        if e.get("code") == code:
            return e
    return None


def class_of(code: int) -> str:
    e = entry(code)
    return e["class"] if e else "unknown"


def entry_problems(e: dict) -> List[str]:
    """For tests/test_catalogues.py: the code is an int, the class known, and every example parses to it."""
    out = []
    if not isinstance(e.get("code"), int):
        out.append("code is not an integer")
    known = set(HARDWARE) | {"application", "informational", "engine"}
    if e.get("class") not in known:
        out.append(f"unknown class {e.get('class')!r}")
    for ex in e.get("examples") or []:
        got = parse(ex)
        if got is None or got["code"] != e.get("code"):
            out.append(f"example not recognised as Xid {e.get('code')}: {ex!r}")
    return out
