"""What a rank left running alone (every other rank finished and exited cleanly) waits in
(ddpdoctor/data/left_alone.json, read from torch's source): the causes RUN027 names, each with its fix and sources.
Loaded once; pure lookups, and the one pure function that picks the cause from the ranks' recorded facts."""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Optional

DATA = Path(__file__).resolve().parent.parent / "data" / "left_alone.json"


@functools.lru_cache(maxsize=1)
def causes() -> tuple:
    with open(DATA, encoding="utf-8") as fh:
        return tuple(json.load(fh)["causes"])


def cause(cid: str) -> dict:
    return next((c for c in causes() if c["id"] == cid), {})


def cause_of(lone: dict, exited: list) -> Optional[str]:
    """The cause whose facts the records show (rank records of run/section: dataloader {n, len}, step, collectives),
    or None when none does. `lone`: the rank still running; `exited`: the ranks that finished and exited cleanly.
    more-batches: its loader is longer than one of theirs, or it fetched more batches of a loader of the same length;
    more-steps: it took more optimizer steps; extra-call: it issued more collectives than any of them."""
    dl = lone.get("dataloader") or {}
    for o in exited:
        odl = o.get("dataloader") or {}
        if isinstance(dl.get("len"), int) and isinstance(odl.get("len"), int):
            if dl["len"] > odl["len"] or (dl["len"] == odl["len"] and (dl.get("n") or 0) > (odl.get("n") or 0)
                                          and odl.get("end")):
                return "more-batches"
    if any(isinstance(o.get("step"), int) and (lone.get("step") or 0) > o["step"] for o in exited):
        return "more-steps"
    if exited and all((lone.get("collectives") or 0) > (o.get("collectives") or 0) for o in exited):
        return "extra-call"
    return None
