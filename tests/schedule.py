"""The order the suite runs in: the longest tests first, spread evenly over the xdist workers.

Why: `make test` runs on 2 workers with xdist's `worksteal` scheduler, which hands each worker one
contiguous share of the collected order and later moves tests from the end of the longest queue to an
idle worker. In file order the slow process tests (test_probe_faults, test_run_*, test_real_examples)
all sit in the second half: one worker starts with nearly all of them, and the last long test can run
alone for a minute while the other worker has nothing to do. Longest-first (LPT) ordering, dealt out
so that each worker's share holds every k-th test, starts the long tests at once and leaves only
short ones to steal at the end.

The durations come from a recorded run (tests/data/durations.json, refreshed by `make test-durations`);
a test it does not know gets the median of its kind (slow or not), so a new test is neither first nor
forgotten. Pure functions: tests/test_schedule.py checks them.
"""
from __future__ import annotations

import json
import os
import statistics
from typing import Callable, Iterable, Sequence, TypeVar

T = TypeVar("T")

DURATIONS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "durations.json")


def load_durations(path: str = DURATIONS) -> dict:
    """{nodeid: seconds} from the recorded run; {} when the file is missing or unreadable (the suite
    then runs in collection order, as before)."""
    try:
        with open(path) as fh:
            data = json.load(fh)
        return {str(k): float(v) for k, v in data.get("seconds", {}).items()}
    except (OSError, ValueError, AttributeError, TypeError):
        return {}


def estimates(ids: Sequence[str], slow: Sequence[bool], known: dict) -> list:
    """Each test's expected seconds: its recorded time, else the median recorded time of its kind."""
    by_kind = {True: [known[i] for i, s in zip(ids, slow) if s and i in known],
               False: [known[i] for i, s in zip(ids, slow) if not s and i in known]}
    default = {k: (statistics.median(v) if v else (5.0 if k else 0.01)) for k, v in by_kind.items()}
    return [known.get(i, default[s]) for i, s in zip(ids, slow)]


def lpt_order(items: Sequence[T], seconds: Sequence[float], workers: int) -> list:
    """Items sorted longest first (stable for ties, so the order is the same in every worker),
    then dealt round-robin into `workers` contiguous shares: share j holds the j-th, (j+k)-th, ...
    longest, which is what a contiguous split hands worker j."""
    ranked = [items[i] for i in sorted(range(len(items)), key=lambda i: -seconds[i])]
    k = max(1, workers)
    return [x for j in range(k) for x in ranked[j::k]]


def workers_of(env: dict, default: int = 1) -> int:
    """The xdist worker count as every worker sees it (PYTEST_XDIST_WORKER_COUNT)."""
    try:
        return max(1, int(env.get("PYTEST_XDIST_WORKER_COUNT", default)))
    except ValueError:
        return default


def reorder(items: list, nodeid: Callable[[T], str], is_slow: Callable[[T], bool], env: dict,
            known: dict) -> list:
    """The suite's order for `items`; the same set of items, each once."""
    ids = [nodeid(i) for i in items]
    slow = [is_slow(i) for i in items]
    return lpt_order(items, estimates(ids, slow, known), workers_of(env))


def recorded(reports: Iterable[tuple]) -> dict:
    """{nodeid: seconds} summed over setup, call and teardown, from (nodeid, duration) pairs."""
    out: dict = {}
    for nodeid, duration in reports:
        out[nodeid] = out.get(nodeid, 0.0) + float(duration)
    return {k: round(v, 2) for k, v in sorted(out.items())}
