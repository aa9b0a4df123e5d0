"""What the fork guard has seen in this process: the state `ddpdoctor.inprocess.forkguard` writes and
the runtime gatherer reads (`runtime.forks`), kept here so the gatherer never imports the guard."""
from __future__ import annotations


class _State:
    def __init__(self) -> None:
        self.installed = False
        self.count = 0
        self.events: list = []
        self.findings: list = []


STATE = _State()


def summary() -> dict:
    by: dict = {}
    for e in STATE.events:
        by[e["caller"]] = by.get(e["caller"], 0) + 1
    return {"guard_installed": STATE.installed, "count": STATE.count, "by_caller": by,
            "findings": sorted({f.id for f in STATE.findings})}
