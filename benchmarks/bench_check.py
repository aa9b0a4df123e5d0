"""`ddpdoctor check --no-comm` against `python -m torch.utils.collect_env`, interleaved in one run.

Goal (issue 2): median wall-time ratio <= 0.25 and our peak RSS <= 60 MiB, with no GPU.
Peak RSS is the child's ru_maxrss (os.wait4), so it covers the whole process, not a sample.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

COMMANDS = {
    "ddpdoctor check --no-comm": [sys.executable, "-m", "ddpdoctor", "check", "--no-comm"],
    "torch.utils.collect_env": [sys.executable, "-m", "torch.utils.collect_env"],
}


def run_once(argv: list) -> tuple:
    start = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, dict(os.environ), file_actions=[
        (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0), (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0)])
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - start
    return wall, usage.ru_maxrss / 1024.0  # KiB -> MiB on Linux


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    walls = {k: [] for k in COMMANDS}
    rss = {k: [] for k in COMMANDS}
    for _ in range(args.runs):
        for name, argv in COMMANDS.items():  # interleaved, so drift hits both alike
            w, m = run_once(argv)
            walls[name].append(w)
            rss[name].append(m)
    ours, base = "ddpdoctor check --no-comm", "torch.utils.collect_env"
    for name in COMMANDS:
        print(f"{name:28} median {statistics.median(walls[name]) * 1000:7.0f} ms   peak RSS {max(rss[name]):6.1f} MiB")
    ratio = statistics.median(walls[ours]) / statistics.median(walls[base])
    print(f"wall-time ratio (ours / collect_env): {ratio:.3f}   goal <= 0.25   {'OK' if ratio <= 0.25 else 'MISSED'}")
    peak = max(rss[ours])
    print(f"peak RSS of check: {peak:.1f} MiB   goal <= 60 MiB   {'OK' if peak <= 60 else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
