"""CPython faulthandler's dump of a fatal signal (ddpdoctor/data/python_faulthandler.json, from Modules/faulthandler.c
and Python/traceback.c): its header ("Fatal Python error: Segmentation fault"), its thread headers and its frames
('  File "x.py", line 3 in f', no comma), compiled once. Pure lookups."""
from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Dict, Optional

DATA = Path(__file__).resolve().parent.parent / "data" / "python_faulthandler.json"


@functools.lru_cache(maxsize=1)
def doc() -> dict:
    with open(DATA, encoding="utf-8") as fh:
        return json.load(fh)


def signal_of() -> Dict[str, str]:
    """faulthandler's name of each fatal signal it handles -> the signal ("Aborted" -> "SIGABRT")."""
    return {text: sig for sig, text in doc()["signals"].items()}


@functools.lru_cache(maxsize=1)
def header() -> "re.Pattern":
    d = doc()
    return re.compile(re.escape(d["header"]) + "(?P<what>" + "|".join(re.escape(t) for t in d["signals"].values())
                      + r")\s*$")


@functools.lru_cache(maxsize=1)
def thread() -> "re.Pattern":
    d = doc()
    return re.compile(r"(?:^|\s)(?:(?P<current>" + "|".join(re.escape(t) for t in d["current_thread"]) + ")|"
                      + "|".join(re.escape(t) for t in d["other_thread"]) + r")(?: 0x[0-9a-fA-F]+)? "
                      + re.escape(d["thread_suffix"]) + r"\s*$")


FRAME = re.compile(r'(?:^|\s)File "(?P<file>[^"]+)", line (?P<line>\d+|\?\?\?) in (?P<func>[^\s,]+)\s*$')


def frame(text: str) -> Optional[dict]:
    """A faulthandler frame's file, line and function (a traceback's frame, with its comma, is not one)."""
    m = FRAME.search(text) if 'File "' in text else None
    return m.groupdict() if m else None
