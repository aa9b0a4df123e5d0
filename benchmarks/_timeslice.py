"""A time-sliced A/B of two long-running jobs: both start, then take turns on the machine.

Why: on a shared or virtual machine the speed of the same code drifts by 5-15% from one second, or
one job, to the next (measured on this project's 2-core machine: a one-rank matmul job's CPU time per
step moved from 9.2 to 13.4 ms across four identical runs, and by +-15% between 0.4 s windows of one
run). Two whole jobs run one after the other carry that drift into their ratio, so an overhead near
1% cannot be seen under it. Here each job's whole process tree is stopped (SIGSTOP) while the other
runs, in slices of about a second, in the order A B B A A B ..., for as long as asked. Adjacent
slices see the same machine, and each pair of adjacent slices gives one ratio.

Each rank streams its steps ("monotonic end time, thread CPU time, peak RSS KiB" per line, see
fixtures/run/trainer_job.py --stats-series); a step counts only when it began and ended inside one
slice of its own job, after a guard that lets every process of the tree resume.

The same summary serves the in-process alternation (read_toggled, toggled_ratios): one job under
`ddpdoctor run` switches the attach's hooks off and on every N steps itself, so both sides share one
process, one memory layout and one second of the machine; it measures the hooks, not the `run` parent.
"""
from __future__ import annotations

import math
import os
import random
import signal
import statistics
import subprocess
import time
from typing import Dict, List, Optional, Sequence, Tuple

GUARD_S = 0.05  # after SIGCONT, before a step may count: every process of the tree is running again


def pause(tree, sig: int) -> None:
    """SIGSTOP or SIGCONT to every process of one job (its tree, walked from /proc: no marker scan at a
    turn, which would cost CPU inside the measured slices)."""
    tree.send(sig, tree.live(by_marker=False))


def _read_columns(path: str, n: int) -> List[List[str]]:
    """The lines of `path` that have exactly n fields (a line being written has fewer)."""
    try:
        with open(path) as fh:
            return [parts for parts in (line.split() for line in fh) if len(parts) == n]
    except OSError:
        return []


def read_steps(path: str) -> List[Tuple[float, float, int]]:
    """(monotonic end time, thread CPU time, peak RSS KiB) of every step of a --stats-series file."""
    return [(float(t), float(c), int(rss)) for t, c, rss in _read_columns(path, 3)]


def read_toggled(path: str) -> List[Tuple[float, float, int]]:
    """The steps of a job run with --toggle-attach: (monotonic end time, thread CPU time, 1 if the
    attach's hooks were on during the step)."""
    return [(float(t), float(c), int(on)) for t, c, _rss, on in _read_columns(path, 4)]


def toggled_ratios(rows: List[Tuple[float, float, int]], key: str, skip: int = 0) -> List[float]:
    """log(on/off) for each pair of adjacent blocks of steps (0-1, 2-3, ...) that ran with the hooks
    on and off inside one process: the in-process counterpart of paired_ratios. A block's figure is
    the median step (wall: end to end; cpu: thread CPU) without its first step, which carries the
    switch; blocks of fewer than 3 steps and the first `skip` steps do not count."""
    blocks: List[Tuple[int, List[float]]] = []
    for i in range(max(1, skip + 1), len(rows)):
        (t0, c0, _), (t1, c1, on) = rows[i - 1], rows[i]
        value = t1 - t0 if key == "wall" else c1 - c0
        if not blocks or blocks[-1][0] != on:
            blocks.append((on, []))  # the first step of a block is left out
            continue
        blocks[-1][1].append(value)
    if blocks:
        blocks.pop(0)  # it may have begun before `skip`
    med = [(on, statistics.median(v)) for on, v in blocks if len(v) >= 3 and statistics.median(v) > 0]
    out = []
    for k in range(0, len(med) - 1, 2):
        (on_a, a), (on_b, b) = med[k], med[k + 1]
        if on_a != on_b:
            out.append(math.log(a / b) if on_a else math.log(b / a))
    return out


def count_lines(path: str) -> int:
    try:
        with open(path, "rb") as fh:
            return fh.read().count(b"\n")
    except OSError:
        return 0


def run_sliced(commands: Dict[str, Sequence[str]], series: Dict[str, str], *, slice_s: float, duration_s: float,
               warmup_steps: int, env: dict, cwd: str, start_timeout_s: float = 300.0) -> dict:
    """Start every command (each writes its rank-0 steps to series[name]); take turns until each
    has made `warmup_steps` steps, then for `duration_s` more; kill every tree. Returns the slices
    [(name, start, end)] of the measured part and the exit codes of jobs that ended early."""
    names = list(commands)

    def _end(signum, _frame):
        raise SystemExit(128 + signum)  # through the finally below: the stopped trees are killed, not orphaned

    previous = {s: signal.signal(s, _end) for s in (signal.SIGTERM, signal.SIGHUP)}
    logs = {n: open(series[n] + ".stderr", "wb") for n in names}  # a file: a full pipe would block the job
    from ddpdoctor import proctree  # the one mechanism every launcher of the doctor uses

    trees = {n: proctree.Tree() for n in names}
    procs = {n: trees[n].popen(list(commands[n]), env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                               stderr=logs[n], new_session=True) for n in names}
    slices, early = [], {}
    try:
        for n in names[1:]:
            pause(trees[n], signal.SIGSTOP)
        t0 = time.monotonic()
        measuring_since: Optional[float] = None
        order = _abba(names)
        k = 0
        current = names[0]
        start = time.monotonic()
        while True:
            time.sleep(slice_s)
            end = time.monotonic()
            if measuring_since is not None:
                slices.append((current, start, end))
            for n, p in procs.items():
                if p.poll() is not None:
                    early[n] = p.returncode
            if early:
                break
            if measuring_since is None:
                if all(count_lines(series[n]) >= warmup_steps for n in names):
                    measuring_since = end
                elif end - t0 > start_timeout_s:
                    raise RuntimeError(f"the jobs did not reach {warmup_steps} steps in {start_timeout_s:.0f} s")
            elif end - measuring_since >= duration_s:
                break
            k += 1
            nxt = order[k % len(order)]
            if nxt != current:
                pause(trees[current], signal.SIGSTOP)
                pause(trees[nxt], signal.SIGCONT)
                current = nxt
            start = time.monotonic()
    finally:
        for t in trees.values():  # SIGKILL ends a stopped process too; by marker, wherever it went
            t.stop(grace_s=0.0, first=signal.SIGKILL)
        errors, stderr = {}, {}
        for n, p in procs.items():
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                pass
            logs[n].close()
            with open(series[n] + ".stderr", "rb") as fh:
                stderr[n] = fh.read().decode(errors="replace")
            if n in early:
                errors[n] = stderr[n].strip().splitlines()[-3:]
        for s, handler in previous.items():
            signal.signal(s, handler)
    return {"slices": slices, "early_exit": early, "errors": errors, "stderr": stderr}


def _abba(names: List[str]) -> List[str]:
    """A B B A for two jobs (each adjacent pair has both, and neither always goes first)."""
    if len(names) == 2:
        a, b = names
        return [a, b, b, a]
    return list(names)


def slice_stats(steps: List[Tuple[float, float, int]], slices: List[tuple], name: str) -> List[Optional[dict]]:
    """Per slice of `name` (None for the other job's slices): the median wall and CPU time of the steps
    that began and ended inside it."""
    out = []
    i = 1
    for who, start, end in slices:
        if who != name:
            out.append(None)
            continue
        while i < len(steps) and steps[i][0] <= start:
            i += 1
        walls, cpus = [], []
        j = i
        while j < len(steps) and steps[j][0] <= end:
            if steps[j - 1][0] >= start + GUARD_S:
                walls.append(steps[j][0] - steps[j - 1][0])
                cpus.append(steps[j][1] - steps[j - 1][1])
            j += 1
        out.append({"wall": statistics.median(walls), "cpu": statistics.median(cpus), "n": len(walls)}
                   if len(walls) >= 3 else {"n": len(walls)})
    return out


def paired_ratios(slices: List[tuple], a: Dict[str, list], b: Dict[str, list], key: str) -> List[float]:
    """log(b/a) for each pair of adjacent slices of different jobs (in A B B A order: 0-1, 2-3, ...;
    a pair of slices of the same job, where the measurement began, is stepped over)."""
    out = []
    k = 0
    while k + 1 < len(slices):
        if slices[k][0] == slices[k + 1][0]:
            k += 1
            continue
        sa = a[k] or a[k + 1]
        sb = b[k] or b[k + 1]
        if sa and sb and key in sa and key in sb:
            out.append(math.log(sb[key] / sa[key]))
        k += 2
    return out


def summarize(groups: List[List[float]], seed: int = 0, boot: int = 2000) -> dict:
    """The overhead as exp(mean log ratio) - 1 over every pair of slices of every group (one group per
    pair of jobs), with a 95% interval from a two-level bootstrap (the groups, then the pairs inside
    each): a job's own layout and placement can move it as a whole, and the interval must carry that."""
    groups = [g for g in groups if g]
    logs = [x for g in groups for x in g]
    if not logs:
        return {"pairs": 0}
    rng = random.Random(seed)
    means = []
    for _ in range(boot):
        sample = [x for g in rng.choices(groups, k=len(groups)) for x in rng.choices(g, k=len(g))]
        means.append(statistics.fmean(sample))
    means.sort()
    pct = lambda x: round(100 * (math.exp(x) - 1), 2)  # noqa: E731
    return {"pairs": len(logs), "jobs": len(groups), "overhead_pct": pct(statistics.fmean(logs)),
            "ci95_pct": [pct(means[int(0.025 * boot)]), pct(means[int(0.975 * boot) - 1])],
            "median_pct": pct(statistics.median(logs)),
            "per_job_pct": [pct(statistics.fmean(g)) for g in groups],
            "pair_sd_pct": round(100 * statistics.stdev(logs), 1) if len(logs) > 1 else None}
