"""What sets a job's pace when no rank is slower than the others: the part of the step split that takes at least a
bar of EVERY rank's median step (data/step_pace.json; RUN029 data, RUN030 collectives, RUN031 the loop's own code).
Pure: the run section's rank rows in, the shares out. One rank alone above the bar is a straggler (RUN020), so every
rank that has a rank number must have a split, and each must hold the minimum of measured steps."""
from __future__ import annotations

import functools
import json
import math
from pathlib import Path
from typing import Optional

DATA = Path(__file__).resolve().parent.parent / "data" / "step_pace.json"


@functools.lru_cache(maxsize=1)
def knowledge() -> dict:
    with open(DATA, encoding="utf-8") as fh:
        return json.load(fh)["parts"]


def figure(value) -> Optional[float]:
    """A median in ms as a float: a finite number >= 0 (not a bool); None for anything else. NaN is how a step whose
    split was not measured is recorded (facts.steps.sampled), and NaN / inf / a negative / an int past float's range /
    a string is no measurement: a share made of one compared NaN-false with the bar and passed it (robust25: NaN
    medians gave RUN029, RUN030 and RUN031 together; 10**400 raised OverflowError; "100" TypeError)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        f = float(value)
    except OverflowError:
        return None
    return f if math.isfinite(f) and f >= 0 else None


def _split_of(r, part: str) -> Optional[dict]:
    sp = r.get("split") if isinstance(r, dict) else None
    return sp if isinstance(sp, dict) and isinstance(sp.get(part), dict) else None


def shares(ranks: list, part: str, bar: float, min_steps: int) -> Optional[dict]:
    """{"shares": {rank: (part_ms, step_ms)}, "steps": the fewest measured steps of a rank, "rows": the ranks' rows,
    "low": the lowest share} when every rank's median `part` is at least `bar` of its median step over at least
    `min_steps` measured steps (start-up left out: facts.steps.summary); else None. Only measurements count
    (`figure`: finite, >= 0, a step > 0; split_steps an int): a rank row, split or figure of another shape is not one."""
    if not isinstance(ranks, (list, tuple)) or not all(isinstance(r, dict) for r in ranks):
        return None  # a rank row of another shape: not every rank is known
    rows = [r for r in ranks if _split_of(r, part) is not None]
    if not rows or len(rows) < len([r for r in ranks if r.get("rank") is not None]):
        return None  # a rank without a split: not every rank is known to wait
    out, steps = {}, []
    for r in rows:
        sp = r["split"]
        med = figure(sp[part].get("median"))
        step = figure((sp.get("step_ms") or {}).get("median") if isinstance(sp.get("step_ms"), dict) else None)
        n = sp.get("split_steps")
        n = n if isinstance(n, int) and not isinstance(n, bool) else 0
        if med is None or not step or n < min_steps:
            return None
        out[r.get("rank")] = (med, step)
        steps.append(n)
    low = min(m / s for m, s in out.values())
    if low < bar:
        return None
    return {"shares": out, "rows": rows, "low": low, "steps": min(steps)}


def rank_key(rank) -> tuple:
    """A sort key for rank numbers: ints in order, then anything else by its text, then None (a rank row of another
    shape must not stop a sort: robust25, a rank "1" beside 0 raised TypeError)."""
    if isinstance(rank, int) and not isinstance(rank, bool):
        return (0, rank, "")
    return (1, 0, str(rank)) if rank is not None else (2, 0, "")


def ordered(sh: dict) -> list:
    """The (rank, (part_ms, step_ms)) pairs in rank order, a rank with no number last."""
    return sorted(sh.items(), key=lambda kv: rank_key(kv[0]))


def medians(sh: dict) -> tuple:
    """The median rank's part and step (ms)."""
    n = len(sh) // 2
    return sorted(m for m, _ in sh.values())[n], sorted(s for _, s in sh.values())[n]
