"""The calls every rank of a distributed run would make: shared by the rules whose fault is one action done by all
ranks at once (LINT027 downloads, LINT028 folder creation)."""
from __future__ import annotations

from typing import Callable, Iterator, Optional, Tuple

from ..analysis import Call
from ._common import is_distributed, launched_distributed, lightning_relaunch, reads_launcher_env
from ._reach import reach


def every_rank_calls(t, wanted: Callable[[Call], bool], gap: int,
                     quiet: Optional[Callable[[Call], bool]] = None) -> Iterator[Tuple[Call, object]]:
    """(call, proof) for each call of the linted module that `wanted` accepts, in a distributed script (it joins a
    process group, is launched as one, or another module of the run does), that every rank would run: not under a
    rank test, not in a function every caller gates, not dead, not in the parent that spawns the ranks, not on a
    branch no caller takes, not `quiet(call)`. Calls within `gap` lines after the last one kept, in the same
    function, are one block: only the first is yielded. `proof`: reach's every_rank (None: not shown to run on
    every rank of a training run; the rule says why with `unproven`)."""
    index = t.index
    if not (is_distributed(index) or launched_distributed(index) or lightning_relaunch(index) is not None or
            reads_launcher_env(index) or (
            len(t.facts.indexes) > 1 and t.facts.distributed_anywhere(is_distributed))):
        return   # (round 21: a Lightning Trainer whose strategy re-runs this script per rank counts; round 25: a
        #          script that reads os.environ["RANK"] without a default runs only under a launcher)
    gated = None
    last = None
    for call in index.calls:
        if not wanted(call) or t.facts.gated(index, call):
            continue
        if gated is None:
            gated = t.facts.gated_functions(index, t.real_path)  # a rank passed in is no gate here
        if id(call.scope) in gated or t.facts.dead(call.scope, index):
            continue
        if reach(t).in_launcher(index, call) or reach(t).branch_never_taken(index, call):
            continue  # the parent that spawns the ranks does it once, or no caller takes the branch
        if quiet is not None and quiet(call):
            continue
        if last is not None and last.scope is call.scope and call.line - last.line <= gap:
            continue
        last = call
        yield call, reach(t).every_rank(index, call)


def unproven(t, call: Call, proof) -> str:
    """The title's tail when the call is not shown to run on every rank: why not, from reach."""
    return "" if proof is not None else " (if it runs on every rank: " + reach(t).why_not(t.index, call) + ")"
