"""DDP's construction check, read from both sides: which ranks built which model.

torch's DistributedDataParallel compares the ranks' models when it is built (pytorch/pytorch
torch/csrc/distributed/c10d/reducer.cpp @ad78a7b, verify_params_across_processes): every rank allgathers the parameter
counts and throws on the first rank whose count differs from its own, "DDP expects same model across all ranks, but Rank
A has N params, while rank B has inconsistent M params."; then rank 0's sizes are broadcast and a rank whose param
differs throws "[A]: params[p] in this process with sizes [..] appears not to match sizes of the same param in process
0." Each line is one side of a comparison: the rank it names first is only the rank that printed it, never the culprit.
A culprit is named only where more ranks agree (issue 24's held-out review, set 16; `ddpdoctor run` on set 17 named the
rank that printed first). Shared by triage (LOG027) and run (RUN010): pure functions of the messages' texts.
"""
from __future__ import annotations

import re
from typing import Iterable, Optional

from .units import runs_text

COUNT = re.compile(r"Rank (\d{1,6}) has (\d+) params, while rank (\d{1,6}) has inconsistent (\d+) params")
SIZES = re.compile(r"\[(\d{1,6})\]: params\[(\d+)\] in this process with sizes (\[[^\]]{0,200}\]) appears not to match "
                   r"sizes of the same param in process (\d{1,6})")


def _who(ranks: Iterable[int]) -> str:
    rs = sorted(set(ranks))
    return f"rank{'s' if len(rs) != 1 else ''} {runs_text(rs, sep=', ', pairs_as_runs=False) or 'none'}"


def is_mismatch(text: str) -> bool:
    return bool(COUNT.search(text) or SIZES.search(text))


def judge(texts: Iterable[str]) -> Optional[tuple]:
    """(title, sentence, ranks, facts) from every DDP model-mismatch message given, or None when none of them parses
    or they show no difference. `ranks` are the culprits where a majority shows them, else every rank named."""
    counts: dict = {}
    sizes: dict = {}
    for text in texts:
        m = COUNT.search(text)
        if m:
            counts.setdefault(int(m.group(1)), int(m.group(2)))
            counts.setdefault(int(m.group(3)), int(m.group(4)))
            continue
        m = SIZES.search(text)
        if m:
            sizes.setdefault(int(m.group(1)), (int(m.group(2)), m.group(3), int(m.group(4))))
    if counts:
        groups: dict = {}
        for r, n in counts.items():
            groups.setdefault(n, []).append(r)
        if len(groups) < 2:
            return None
        parts = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        said = "; ".join(f"{_who(rs)} {'has' if len(rs) == 1 else 'have'} {n} params" for n, rs in parts)
        big_n, big = parts[0]
        rest = sorted(r for n, rs in parts[1:] for r in rs)
        facts = {str(r): counts[r] for r in sorted(counts)}
        if len(big) > len(rest):
            title = (f"the ranks built different models: {said} ({_who(rest)} {'is' if len(rest) == 1 else 'are'} the odd one "
                     f"out: {len(big)} of {len(counts)} ranks in the log agree on {big_n})")
            return title, (f"Each rank compares its parameter count with every other rank's and prints the first that "
                           f"differs; {len(big)} of the {len(counts)} ranks these lines name agree, so {_who(rest)} "
                           f"built the different model."), rest, facts
        title = (f"the ranks built different models: {said} (no majority in the log: which side is wrong "
                 f"cannot be told from it)")
        return title, ("Each rank compares its parameter count with every other rank's and prints the first that "
                       "differs: each line is one side of the comparison, and the rank that printed it is not the "
                       "culprit."), sorted(counts), facts
    if sizes:
        src0 = {v[2] for v in sizes.values()}
        shapes: dict = {}
        for r, (p, sz, _) in sizes.items():
            shapes.setdefault((p, sz), []).append(r)
        said = "; ".join(f"{_who(rs)} {'has' if len(rs) == 1 else 'have'} params[{p}] of sizes {sz}"
                         for (p, sz), rs in sorted(shapes.items(), key=lambda kv: (-len(kv[1]), kv[0])))
        ref = f"process {min(src0)}" if len(src0) == 1 else "the source process"
        facts = {str(r): {"param": v[0], "sizes": v[1]} for r, v in sorted(sizes.items())}
        (p, sz), agree = max(shapes.items(), key=lambda kv: len(kv[1]))
        if len(src0) == 1 and len(agree) >= 2 and len(shapes) == 1:
            r0 = min(src0)
            title = (f"the ranks built different models: {said}, unlike {ref} ({_who(agree)} agree with each "
                     f"other: rank {r0} is the odd one out)")
            return title, (f"Each rank checks its parameter sizes against rank {r0}'s and prints the first that differs; "
                           f"{len(agree)} ranks print the same sizes, so rank {r0} built the different model."), \
                [r0], facts
        title = f"the ranks built different models: {said}, unlike {ref} (no majority in the log)"
        return title, (f"Each rank checks its parameter sizes against {ref}'s and prints the first that differs: "
                       f"the rank that printed a line is one side of the comparison, not the culprit."), \
            sorted(set(sizes) | src0), facts
    return None
