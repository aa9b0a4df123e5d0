"""What sets a job's pace when no rank is slower than the others: the part of the step split that takes at least a
bar of EVERY rank's median step (data/step_pace.json; RUN029 data, RUN030 collectives, RUN031 the loop's own code).
Pure: the run section's rank rows in, the shares out. One rank alone above the bar is a straggler (RUN020), so every
rank that has a rank number must have a split, and each must hold the minimum of measured steps."""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Optional

DATA = Path(__file__).resolve().parent.parent / "data" / "step_pace.json"


@functools.lru_cache(maxsize=1)
def knowledge() -> dict:
    with open(DATA, encoding="utf-8") as fh:
        return json.load(fh)["parts"]


def shares(ranks: list, part: str, bar: float, min_steps: int) -> Optional[dict]:
    """{"shares": {rank: (part_ms, step_ms)}, "steps": the fewest measured steps of a rank, "rows": the ranks' rows,
    "low": the lowest share} when every rank's median `part` is at least `bar` of its median step over at least
    `min_steps` measured steps (start-up left out: facts.steps.summary); else None."""
    rows = [r for r in ranks or () if isinstance((r.get("split") or {}).get(part), dict)]
    if not rows or len(rows) < len([r for r in ranks if r.get("rank") is not None]):
        return None  # a rank without a split: not every rank is known to wait
    out = {}
    for r in rows:
        sp = r["split"]
        med = (sp.get(part) or {}).get("median")
        step = (sp.get("step_ms") or {}).get("median")
        if not isinstance(med, (int, float)) or not step or (sp.get("split_steps") or 0) < min_steps:
            return None
        out[r.get("rank")] = (med, step)
    low = min(m / s for m, s in out.values())
    if low < bar:
        return None
    return {"shares": out, "rows": rows, "low": low,
            "steps": min(r["split"].get("split_steps") or 0 for r in rows)}


def ordered(sh: dict) -> list:
    """The (rank, (part_ms, step_ms)) pairs in rank order, a rank with no number last."""
    return sorted(sh.items(), key=lambda kv: (kv[0] is None, kv[0]))


def medians(sh: dict) -> tuple:
    """The median rank's part and step (ms)."""
    n = len(sh) // 2
    return sorted(m for m, _ in sh.values())[n], sorted(s for _, s in sh.values())[n]
