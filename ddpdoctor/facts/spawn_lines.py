"""What an mp.spawn parent prints of its children, as patterns (torch/multiprocessing/spawn.py, ProcessContext.join,
torch 2.13.0 wheel): the first child that failed ("process N terminated with signal S" / "... with exit code C" /
"-- Process N terminated with the following error:", the last one cut by a paste anywhere after "terminated"), then, for
each child still alive, a warning before its SIGTERM, and one before a SIGKILL if it outlived the grace period. N is the
spawn index (the first argument of the function), not a pid. Read by triage (a log) and by run (the job's stderr).
"""
from __future__ import annotations

import re

FAILED = re.compile(r"ProcessExitedException: process (\d+) terminated with (?:signal (\w+)|exit code (-?\d+))")
RAISED = re.compile(r"-- Process (\d+) terminated with the following error:")


def _any_prefix(text: str) -> str:
    """A pattern for any prefix of `text`, the empty one included (a paste cut anywhere inside it)."""
    pat = ""
    for ch in reversed(text):
        pat = f"(?:{re.escape(ch)}{pat})?"
    return pat


# the line cut by a paste anywhere after "terminated" (round 25, triagecol31 b226_11: "-- Process 0 terminated with
# the"); the whole line is RAISED's
RAISED_CUT = re.compile(r"-- Process (\d+) terminated" + _any_prefix(" with the following error") + r"\s*$")
TERMINATING = re.compile(r"Terminating process (\d+) via signal SIGTERM")
KILLING = re.compile(r"Unable to shutdown process (\d+) via SIGTERM , forcefully exiting via SIGKILL")
