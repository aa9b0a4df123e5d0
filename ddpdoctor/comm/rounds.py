"""The send/recv pair test in parallel rounds. No torch here.

Every rank is in at most one pair per round, and every rank walks the rounds in the same order,
so the pairs of one round run at the same time across the whole job and the schedule cannot
deadlock. The default is a constant number of rounds, whatever the number of ranks:

* the ring: rank i with the next rank (2 rounds for an even count, 3 for an odd one). With the
  ranks ordered host by host, the ring holds every intra-node neighbour pair and exactly one
  cross-node pair per pair of neighbouring nodes of the node ring;
* the half-way partner: rank i with rank i + n/2 (1 round): the cross-node (bisection) links.

So 3 or 4 rounds at any n, against n(n-1)/2 pairs one after another before.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

Pair = Tuple[int, int]


def order_by_host(world: int, hosts: Optional[Dict[int, str]] = None) -> List[int]:
    """Ranks grouped by host (hosts in order of their lowest rank), ranks ascending within one."""
    if not hosts:
        return list(range(world))
    first: Dict[str, int] = {}
    for r in range(world):
        h = hosts.get(r, "")
        first.setdefault(h, r)
    return sorted(range(world), key=lambda r: (first[hosts.get(r, "")], r))


def pair_rounds(world: int, hosts: Optional[Dict[int, str]] = None) -> List[List[Pair]]:
    """Rounds of disjoint pairs (i < j in each pair): ring rounds, then the half-way round."""
    if world < 2:
        return []
    order = order_by_host(world, hosts)
    n = len(order)
    rounds: List[List[Pair]] = []
    ring = [(order[i], order[(i + 1) % n]) for i in range(n if n > 2 else 1)]
    # Edge-colour the ring: even edges, odd edges, and for an odd n the closing edge alone.
    for parity in (0, 1):
        rnd = [ring[i] for i in range(parity, len(ring) - (1 if n % 2 and n > 2 else 0), 2)]
        if rnd:
            rounds.append(rnd)
    if n % 2 and n > 2:
        rounds.append([ring[-1]])
    half = n // 2
    if n >= 4:
        rounds.append([(order[i], order[i + half]) for i in range(half)])
    seen: set = set()
    out = []
    for rnd in rounds:
        keep = []
        for i, j in rnd:
            p = (min(i, j), max(i, j))
            if p not in seen:
                seen.add(p)
                keep.append(p)
        if keep:
            out.append(keep)
    return out


def flatten(rounds: Sequence[Sequence[Pair]]) -> List[Pair]:
    return sorted({p for rnd in rounds for p in rnd})


def partner(rounds: Sequence[Sequence[Pair]], rank: int) -> List[Optional[Pair]]:
    """This rank's pair in each round (None: idle in that round)."""
    out: List[Optional[Pair]] = []
    for rnd in rounds:
        out.append(next((p for p in rnd if rank in p), None))
    return out
