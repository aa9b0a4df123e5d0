"""Every module-level regex of ddpdoctor and every catalogue pattern, timed on long adversarial lines at two sizes: a super-linear pattern shows
a time ratio near the square of the size ratio.

Why: triage reads lines of up to 64 KiB (triage/reader.py MAX_LINE) and every renderer passes the whole report through
`redact_text`; a pattern that restarts inside a run its first quantifier consumed (`\\s{2,}(?=...)` by `split`,
`[A-Za-z]*Error` by `search`) costs O(n^2) on such a line: in round 21's audit one 60 KiB line of spaces holding two
" NCCL " words took `triage` 146 s, and one of tabs 215 s. The bench reads each pattern the way the code calls it:
`match` only where the source calls nothing else on it (an anchored pattern starts once), else `search`.
Goal: no pattern whose ratio (time at 8N / time at N, both measured in this run; linear is 8, quadratic 64) is over
24 while one long line (8N = 64 Ki characters, MAX_LINE) costs it over 50 ms.
Usage: python benchmarks/bench_regex.py [--size 8192] [--only NAME_SUBSTRING]
"""
from __future__ import annotations

import argparse
import importlib
import pkgutil
import re
import sys
import time
from pathlib import Path

FILLS = [" ", "\t", "a", "0", "E", "a.", "a ", "a=", "a-", "a:", "a,", "[", "[0] ", "/", "=", "-", ": ", "0.", "rank",
         "'a' ", '"', "(", "PG ", "/a/b", "aA0 "]
LIMIT = 24.0
FLOOR_S = 0.05      # a long line cheaper than this is no risk, and its ratio is timer noise


def patterns() -> dict:
    """Module-level compiled patterns (and those in module-level tuples/dicts) of every ddpdoctor module, by name."""
    import ddpdoctor
    found: dict = {}

    def collect(obj, where: str, depth: int = 0) -> None:
        if isinstance(obj, re.Pattern):
            found.setdefault(where, obj)
        elif isinstance(getattr(obj, "rx", None), re.Pattern):      # facts.messages.Prefiltered and its kind
            found.setdefault(where, obj.rx)
        elif depth < 2 and isinstance(obj, (list, tuple)):
            for i, x in enumerate(obj):
                collect(x, f"{where}[{i}]", depth + 1)
        elif depth < 2 and isinstance(obj, dict):
            for k, x in obj.items():
                collect(x, f"{where}[{str(k)[:24]}]", depth + 1)

    for info in pkgutil.walk_packages(ddpdoctor.__path__, "ddpdoctor."):
        if info.name.endswith("__main__"):
            continue                   # importing it runs the CLI
        try:
            mod = importlib.import_module(info.name)
        except Exception:              # an optional extra that is not installed
            continue
        for name, val in vars(mod).items():
            if getattr(val, "__module__", info.name) == info.name or isinstance(val, (re.Pattern, list, tuple, dict)):
                collect(val, f"{info.name}.{name}")
    # the catalogue's patterns (data/messages*.json), compiled as triage compiles them (facts.messages.linear_pattern)
    from ddpdoctor.facts import messages
    index = messages._index()
    for i, entry in enumerate(index.entries):
        if index._rx(i) is not None:
            found[f"catalogue:{entry.get('id', i)}"] = _Entry(index, i)
    return found


class _Entry:
    """A catalogue entry searched as `match_all` searches it (its window on a long line), with its needles in the
    line so that the window sits where a real message's would."""

    def __init__(self, index, i: int) -> None:
        self.index, self.i = index, i
        self.needle = " ".join(index.needles(i))

    def search(self, text: str):
        return self.index.search(self.i, text + " " + self.needle)


def call_of(where: str) -> str:
    """`match` when the defining module only ever calls `NAME.match(` / `NAME.fullmatch(`, else `search`."""
    if where.startswith("catalogue:"):
        return "search"
    modname, _, name = where.partition("[")[0].rpartition(".")
    mod = sys.modules.get(modname)
    try:
        src = Path(mod.__file__).read_text(encoding="utf-8")
    except Exception:
        return "search"
    calls = set(re.findall(rf"\b{re.escape(name)}\.(\w+)\(", src))
    return "match" if calls and calls <= {"match", "fullmatch"} else "search"


def best(fn, text: str, repeat: int = 3) -> float:
    out = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn(text)
        out = min(out, time.perf_counter() - t)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=8192, help="N: the short line's length (the long one is 8N)")
    ap.add_argument("--only", default="", help="only patterns whose name holds this")
    args = ap.parse_args()
    n = args.size
    worst = []
    pats = {k: v for k, v in patterns().items() if args.only in k}
    for where, rx in sorted(pats.items()):
        how = call_of(where)
        fn = getattr(rx, how)
        top = (1.0, "", 0.0)
        for fill in FILLS:
            for tail in ("", "!"):
                short = (fill * (n // len(fill) + 1))[:n] + tail
                long = (fill * (8 * n // len(fill) + 1))[:8 * n] + tail
                t_long = best(fn, long, 1)
                if t_long < 2e-3:      # too fast to be a risk, and too short to time
                    continue
                ratio = best(fn, long) / max(best(fn, short), 1e-6)
                if ratio > top[0]:
                    top = (ratio, fill + tail, t_long)
        worst.append((top[0], where, how, top[1], top[2]))
    worst.sort(reverse=True)
    # a loaded machine can stretch one timing many times over: each pattern over the line is measured again, best of
    # 7 at both lengths, and counts only if it stays over (a super-linear one always does)
    again = []
    for ratio, where, how, fill, t in worst:
        if ratio > LIMIT and t > FLOOR_S:
            fn = getattr(pats[where], how)
            core, tail = (fill[:-1], "!") if fill.endswith("!") and len(fill) > 1 else (fill, "")
            short = (core * (n // len(core) + 1))[:n] + tail
            long = (core * (8 * n // len(core) + 1))[:8 * n] + tail
            t_long = best(fn, long, 7)
            ratio = t_long / max(best(fn, short, 7), 1e-6)
            t = t_long
        again.append((ratio, where, how, fill, t))
    worst = sorted(again, reverse=True)
    bad = [w for w in worst if w[0] > LIMIT and w[4] > FLOOR_S]
    print(f"{len(pats)} patterns, N={n}, long line {8 * n} characters; ratio = time(8N) / time(N), linear 8, quadratic 64")
    for ratio, where, how, fill, t in bad + [w for w in worst if w not in bad][:10]:
        print(f"  {ratio:6.1f}  {where} ({how}, fill {fill!r}, {t * 1e3:.1f} ms at 8N)")
    print(f"{'FAIL' if bad else 'ok'}: {len(bad)} pattern(s) over ratio {LIMIT:g} and {FLOOR_S * 1e3:.0f} ms a long line")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
