"""Exceptions a framework raises again in another process or thread, its message naming where it was first raised
(ddpdoctor/data/reraised_exceptions.json, each row read from the framework's file at a recorded commit): torch's
ExceptionWrapper.reraise for a DataLoader worker and the pin-memory thread. Pure lookups."""
from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Optional, Tuple

DATA = Path(__file__).resolve().parent.parent / "data" / "reraised_exceptions.json"


@functools.lru_cache(maxsize=1)
def rows() -> tuple:
    with open(DATA, encoding="utf-8") as fh:
        return tuple({**r, "rx": re.compile(r["message"])} for r in json.load(fh)["rows"])


def of(exception: str, message: str) -> Optional[Tuple[dict, str]]:
    """(row, unit number) where an exception's message is a re-raise's ('Caught KeyError in DataLoader worker process
    3.') and the class it names is the exception's own (the last dotted name); a message cut after its class ('Caught
    TypeError') is (row of the re-raise that prints it, '') only where the caller knows the frame re-raised it."""
    name = str(exception).rsplit(".", 1)[-1]
    msg = str(message).strip()
    if not msg.startswith("Caught "):
        return None
    for r in rows():
        m = r["rx"].match(msg)
        if m and (m.group("type").rsplit(".", 1)[-1] == name or name == "RuntimeError"):
            return r, m.group("unit")
    return None


def cut(exception: str, message: str) -> bool:
    """The message is ExceptionWrapper.reraise's first words with the rest cut ('Caught TypeError'): the class it
    names is the exception's own."""
    m = re.match(r"Caught ([A-Za-z_][\w.]*)\.?$", str(message).strip())
    return bool(m) and m.group(1).rsplit(".", 1)[-1] == str(exception).rsplit(".", 1)[-1]
