"""Unit formatting and number reading shared by checks and commands."""
from __future__ import annotations

from typing import Iterable, List, Optional


def human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" or n == int(n) else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} GiB"


def runs_text(numbers: Iterable[int], sep: str = ",", pairs_as_runs: bool = True) -> str:
    """[0, 1, 2, 3, 5, 7, 8] -> '0-3,5,7-8': the one way CPU lists (cpuset syntax) and rank lists are written.

    Duplicates are dropped and the order is sorted, so the text is the same whatever order the
    facts were gathered in. With pairs_as_runs=False two neighbours stay a list ('7, 8'), which reads
    better in prose about ranks than '7-8'.
    """
    nums = sorted({int(n) for n in numbers})
    out: List[str] = []
    i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        if i == j:
            out.append(str(nums[i]))
        elif j == i + 1 and not pairs_as_runs:
            out.append(f"{nums[i]}{sep}{nums[j]}")
        else:
            out.append(f"{nums[i]}-{nums[j]}")
        i = j + 1
    return sep.join(out)


def whole_number(text: str) -> Optional[int]:
    """A non-negative integer written in ASCII digits that fits 64 bits (what C++'s stoull/stoul and
    Rust's usize accept), or None: str.isdigit() takes '²' and int() refuses 5,000 digits."""
    if not text or not text.isascii() or not text.isdigit() or len(text.lstrip("0")) > 20:
        return None
    n = int(text)
    return n if n < 1 << 64 else None
