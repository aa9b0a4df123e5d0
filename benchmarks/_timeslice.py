"""A time-sliced A/B of two long-running jobs: both start, then take turns on the machine.

Why: on a shared or virtual machine the speed of the same code drifts by 5-15% from one second, or
one job, to the next (measured on this project's 2-core machine: a one-rank matmul job's CPU time per
step moved from 9.2 to 13.4 ms across four identical runs, and by +-15% between 0.4 s windows of one
run). Two whole jobs run one after the other carry that drift into their ratio, so an overhead near
1% cannot be seen under it. Here each job's whole process tree is stopped (SIGSTOP) while the other
runs, in slices of about a second (round 9: in the order A B B A A B ...; now in pairs of random
order, below), for as long as asked. Adjacent slices see the same machine, and each pair of slices
gives one ratio.

Each rank streams its steps ("monotonic end time, thread CPU time, peak RSS KiB" per line, see
fixtures/run/trainer_job.py --stats-series); a step counts only when it began and ended inside one
slice of its own job, after a guard that lets every process of the tree resume.

Round 10 (the A/A control read +3.2% wall with one pair of jobs, 0 outside its interval): the turns
are drawn in pairs whose order is random (seeded), each pair carrying its own id, instead of a fixed
A B B A cycle that a periodic host task (a 2 s or 4 s timer) could lock onto; every rank's steps count
(the per-rank medians of a slice combined by their geometric mean), not rank 0's alone; and the CPU time
of every process of the tree is read at each turn from /proc (utime + stime, while the tree is stopped),
by role: the ranks, the launcher (torchrun), and the rest (under `ddpdoctor run`: its supervisor), so
the supervisor's cost is charged to its side explicitly and reported apart. `summarize` marks an
interval from one pair of jobs as blind to the job-to-job effect (a job that runs slow as a whole,
which only more pairs of jobs can show): that effect, not the turns, moved the one-pair A/A controls.

The same summary serves the in-process alternation (read_toggled, toggled_ratios): one job under
`ddpdoctor run` switches the attach's hooks off and on every N steps itself, so both sides share one
process, one memory layout and one second of the machine; it measures the hooks, not the `run` parent.
"""
from __future__ import annotations

import bisect
import math
import os
import random
import signal
import statistics
import subprocess
import time
from typing import Dict, List, Optional, Sequence, Tuple

GUARD_S = 0.05  # after SIGCONT, before a step may count: every process of the tree is running again


def pause(tree, sig: int) -> List[int]:
    """SIGSTOP or SIGCONT to every process of one job (its tree, walked from /proc: no marker scan at a
    turn, which would cost CPU inside the measured slices); the pids it found."""
    pids = tree.live(by_marker=False)
    tree.send(sig, pids)
    return pids


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


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def role_of(cmdline: bytes) -> str:
    """Which part of a job a process is, from its command line: "launcher" (torchrun), "other" (the
    `ddpdoctor run` parent and whatever it starts for itself), or "ranks" (the rest: the training script)."""
    args = cmdline.split(b"\0")
    # the parent first: its own command line holds the launcher's (`ddpdoctor run -- torchrun ...`)
    if b"ddpdoctor" in args[:3] or args[0].endswith(b"/ddpdoctor") or args[0] == b"ddpdoctor":
        return "other"
    if b"torch.distributed.run" in args[:3] or args[0].endswith(b"torchrun") \
            or (len(args) > 1 and args[1].endswith(b"/torchrun")):
        return "launcher"
    return "ranks"


def tree_cpu(pids, roles: Dict[int, str]) -> Dict[str, float]:
    """CPU seconds (utime + stime, every thread) used so far by `pids`, summed by role (role_of, cached
    per pid in `roles`). Read while a tree is stopped, these are exact at the turn."""
    out = {"ranks": 0.0, "launcher": 0.0, "other": 0.0}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                data = fh.read()
            if pid not in roles:
                with open(f"/proc/{pid}/cmdline", "rb") as fh:
                    roles[pid] = role_of(fh.read())
        except OSError:
            continue
        rest = data[data.rindex(b")") + 2:].split()
        out[roles[pid]] += (int(rest[11]) + int(rest[12])) / _TICK
    return out


def next_pair(names: List[str], rng: random.Random) -> List[str]:
    """The two jobs in a random order: one pair of turns."""
    pair = list(names)
    rng.shuffle(pair)
    return pair


def next_quad(names: List[str], rng: random.Random) -> List[str]:
    """Two pairs of turns, the second the first reversed (A B B A or B A A B; the first pair's order drawn at
    random): a turn's place in its pair and a drift linear over the four turns both cancel in the mean of the
    quad's two ratios (balanced_ratios), whatever their size, instead of on average over many pairs."""
    pair = next_pair(names, rng)
    return pair + pair[::-1]


class TurnPlan:
    """Which job runs next, and its pair id: `order` "random" (pairs of random order, one id each), "balanced"
    (quads, next_quad: the two pairs on ids 2q and 2q + 1, as balanced_ratios reads them) or "abba" (the fixed
    cycle, id None). `plan`: the turns left of the current pair (quad); clearing it starts a fresh one."""

    def __init__(self, names: List[str], order: str, rng: random.Random):
        self.names, self.order, self.rng = list(names), order, rng
        self.abba, self.k, self.pair_id = _abba(self.names), 0, -1
        self.plan: List[Tuple[str, int]] = []

    def take(self) -> Tuple[str, Optional[int]]:
        if self.order == "abba":
            self.k += 1
            return self.abba[self.k % len(self.abba)], None
        if not self.plan:
            if self.order == "balanced":  # a quad on an even pair id: balanced_ratios pairs 2q with 2q + 1
                base = self.pair_id + 1 + (self.pair_id + 1) % 2
                self.plan.extend(zip(next_quad(self.names, self.rng), (base, base, base + 1, base + 1)))
                self.pair_id = base + 1
            else:
                self.pair_id += 1
                self.plan.extend((n, self.pair_id) for n in next_pair(self.names, self.rng))
        return self.plan.pop(0)


def count_lines(path: str) -> int:
    try:
        with open(path, "rb") as fh:
            return fh.read().count(b"\n")
    except OSError:
        return 0


def tree_run_s(pids, roles: Dict[int, str]) -> Dict[str, float]:
    """CPU seconds run so far by `pids`, every thread, summed by role (role_of, cached in `roles`): the scheduler's
    own run time (/proc/PID/task/TID/schedstat, first field, ns; round 16 wave 2), where tree_cpu's utime + stime
    come in 10 ms ticks. Read while a tree is stopped, exact at the turn; a thread that ended before the read is
    missing from it (its time is in neither edge: the tiny job's ranks start no thread while measured).
    "ranks_main" (round 17): the ranks' main threads alone (tid == pid), part of "ranks": where the attach's hooks
    run, against the rest of the ranks' threads (Gloo's loops; the attach starts no thread in a rank)."""
    out = {"ranks": 0.0, "launcher": 0.0, "other": 0.0, "ranks_main": 0.0}
    for pid in pids:
        try:
            if pid not in roles:
                with open(f"/proc/{pid}/cmdline", "rb") as fh:
                    roles[pid] = role_of(fh.read())
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        ns = 0
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as fh:
                    t_ns = int(fh.read().split()[0])
            except (OSError, ValueError, IndexError):
                continue
            ns += t_ns
            if roles[pid] == "ranks" and tid == str(pid):
                out["ranks_main"] += t_ns / 1e9
        out[roles[pid]] += ns / 1e9
    return out


ROLES = ("ranks", "launcher", "other")  # tree_run_s's roles; "ranks_main" is part of "ranks"


def run_sliced(commands: Dict[str, Sequence[str]], series: Dict[str, str], *, slice_s: float, duration_s: float,
               warmup_steps: int, env: dict, cwd: str, start_timeout_s: float = 300.0, order: str = "random",
               seed: Optional[int] = None) -> dict:
    """Start every command (each writes its rank-0 steps to series[name]); take turns until each
    has made `warmup_steps` steps, then for `duration_s` more; kill every tree. Returns the slices
    [(name, start, end, pair id)] of the measured part, the CPU seconds of the running tree in each by
    role (slice_cpu, read at the turns while the tree is stopped) and the exit codes of jobs that ended
    early. `order`: "random" (pairs of turns in a random order, `seed`), "balanced" (round 15: quads of two
    pairs, the second the first reversed, next_quad; pair ids 2q and 2q + 1, the measured part starts and
    ends on whole quads), or "abba" (the fixed cycle of round 9, pair id None: pairs are then adjacent slices)."""
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
    rng = random.Random(seed)
    roles: Dict[int, str] = {}
    seen: Dict[str, Dict[int, float]] = {n: {} for n in names}  # pid -> CPU s at its last read (kept once gone)
    pids: Dict[str, List[int]] = {n: [] for n in names}
    slice_cpu: List[Dict[str, float]] = []
    seen_run: Dict[str, Dict[int, tuple]] = {n: {} for n in names}  # as `seen`: (run time, main thread's) (tree_run_s)
    slice_run: List[Dict[str, float]] = []

    def run_now(n: str) -> Dict[str, float]:
        """Run seconds of tree `n` so far, by role, and the ranks' main threads (tree_run_s; a process gone keeps its
        figures)."""
        for pid in pids[n]:
            got = tree_run_s([pid], roles)
            total = sum(got[r] for r in ROLES)
            if total:
                seen_run[n][pid] = (total, got["ranks_main"])
        out = {"ranks": 0.0, "launcher": 0.0, "other": 0.0, "ranks_main": 0.0}
        for pid, (sec, main) in seen_run[n].items():
            out[roles.get(pid, "other")] += sec
            out["ranks_main"] += main
        return out

    def cpu_now(n: str) -> Dict[str, float]:
        """CPU seconds of tree `n` so far, by role (its last walk's pids; a process gone keeps its figure)."""
        for pid in pids[n]:
            seen[n][pid] = sum(tree_cpu([pid], roles).values()) or seen[n].get(pid, 0.0)
        out = {"ranks": 0.0, "launcher": 0.0, "other": 0.0}
        for pid, sec in seen[n].items():
            out[roles.get(pid, "other")] += sec
        return out

    def turn(n: str, sig: int) -> None:
        pids[n] = pause(trees[n], sig)

    turns = TurnPlan(names, order, rng)
    plan, take = turns.plan, turns.take

    try:
        for n in names[1:]:
            turn(n, signal.SIGSTOP)
        t0 = time.monotonic()
        measuring_since: Optional[float] = None
        measured = False  # whether the turn now running is measured
        current, pair = names[0], None
        turn(current, signal.SIGCONT)  # (running already: this walk finds its pids)
        cpu_start, run_start = cpu_now(current), run_now(current)
        start = time.monotonic()
        while True:
            time.sleep(slice_s)
            end = time.monotonic()
            for n, p in procs.items():
                if p.poll() is not None:
                    early[n] = p.returncode
            if measuring_since is None and all(count_lines(series[n]) >= warmup_steps for n in names):
                measuring_since = end
                plan.clear()  # the measured part starts on a fresh pair
            finished = bool(early) or (measured and end - measuring_since >= duration_s
                                       and (order == "abba" or not plan))  # after a whole pair (quad)
            nxt, nxt_pair = (None, None) if finished else take()
            if nxt != current:
                turn(current, signal.SIGSTOP)
            cpu_end, run_end = cpu_now(current), run_now(current)
            if measured:
                slices.append((current, start, end, pair))
                slice_cpu.append({r: cpu_end[r] - cpu_start[r] for r in cpu_end})
                slice_run.append({r: run_end[r] - run_start[r] for r in run_end})
            if finished:
                break
            if measuring_since is None and end - t0 > start_timeout_s:
                raise RuntimeError(f"the jobs did not reach {warmup_steps} steps in {start_timeout_s:.0f} s")
            if nxt != current:
                cpu_start, run_start = cpu_now(nxt), run_now(nxt)  # stopped: exact
                turn(nxt, signal.SIGCONT)
                current = nxt
            else:
                cpu_start, run_start = cpu_end, run_end
            pair, measured = nxt_pair, measuring_since is not None
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
    return {"slices": slices, "slice_cpu": slice_cpu, "slice_run": slice_run, "early_exit": early, "errors": errors, "stderr": stderr,
            "order": order, "seed": seed}


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
    for who, start, end, *_ in slices:
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


def combine_ranks(per_rank: List[List[Optional[dict]]]) -> List[Optional[dict]]:
    """One slice_stats list from several ranks' (the same slices): per slice the geometric mean of the
    ranks' medians, where every rank has one (a rank's own layout and core then weigh 1/N, not all)."""
    if len(per_rank) == 1:
        return per_rank[0]
    out: List[Optional[dict]] = []
    for cells in zip(*per_rank):
        if any(c is None for c in cells):
            out.append(None)
            continue
        got: dict = {"n": min(c.get("n", 0) for c in cells)}
        for key in ("wall", "cpu"):
            if all(key in c and c[key] > 0 for c in cells):
                got[key] = math.exp(statistics.fmean(math.log(c[key]) for c in cells))
        out.append(got)
    return out


def paired_ratios(slices: List[tuple], a: Dict[str, list], b: Dict[str, list], key: str) -> List[float]:
    """log(b/a) for each pair of turns. Slices with a pair id (the random order) pair by it; without one
    (the A B B A cycle), adjacent slices of different jobs pair (0-1, 2-3, ...; a pair of slices of the
    same job, where the measurement began, is stepped over)."""
    out = []
    if slices and len(slices[0]) > 3 and slices[0][3] is not None:
        by_pair: Dict[int, List[int]] = {}
        for k, sl in enumerate(slices):
            by_pair.setdefault(sl[3], []).append(k)
        for ks in by_pair.values():
            sa = next((a[k] for k in ks if a[k]), None)
            sb = next((b[k] for k in ks if b[k]), None)
            if sa and sb and key in sa and key in sb:
                out.append(math.log(sb[key] / sa[key]))
        return out
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


def balanced_ratios(slices: List[tuple], a: List[Optional[dict]], b: List[Optional[dict]], key: str) -> List[float]:
    """One log(b/a) per quad of turns (the order "balanced": pair ids 2q and 2q + 1, in opposite orders): the
    mean of its two pairs' log ratios. A turn's place in its pair (+p on the second turn) and a drift linear
    over the quad's four turns cancel in it exactly: A B B A gives (b + p - a) and (b - a - p), and a drift d
    per turn (b + d - a) and (b + 2d - a - 3d). Quads whose two pairs are not both measured, or not in
    opposite orders (a random order's neighbours), are left out."""
    by_pair: Dict[int, List[int]] = {}
    for k, sl in enumerate(slices):
        if len(sl) > 3 and sl[3] is not None:
            by_pair.setdefault(sl[3], []).append(k)

    def one(ks: Optional[List[int]]) -> Optional[Tuple[float, str]]:
        if not ks:
            return None
        sa = next((a[k] for k in ks if a[k]), None)
        sb = next((b[k] for k in ks if b[k]), None)
        if not (sa and sb and key in sa and key in sb) or len({slices[k][0] for k in ks}) != 2:
            return None
        return math.log(sb[key] / sa[key]), slices[ks[0]][0]

    out = []
    for q in sorted({p // 2 for p in by_pair}):
        first, second = one(by_pair.get(2 * q)), one(by_pair.get(2 * q + 1))
        if first and second and first[1] != second[1]:
            out.append((first[0] + second[0]) / 2)
    return out


def decide(figure: dict, control: Optional[dict], goal_pct: float = 1.0) -> dict:
    """The goal read from one figure's summary (summarize) and its A/A control's: "met" (the 95% interval's
    upper end <= goal_pct), "not met" (its lower end above it), or "cannot resolve at this noise" (the
    interval straddles the goal; or there is no control of two pairs of jobs or more, or the control's own
    interval leaves out 0: the harness is biased at this noise, and no figure of it counts). With the
    interval's half-width (`resolution_pct`: the smallest difference from the goal this run could decide)
    and, where it straddles, the pairs of jobs that would narrow it enough at the same centre and noise
    (`jobs_needed`: the half-width shrinks as 1/sqrt(pairs of jobs))."""
    out: dict = {"goal_pct": goal_pct, "decision": "cannot resolve at this noise"}
    ci = figure.get("ci95_pct") if figure else None
    if not ci or not figure.get("pairs"):
        out["why"] = "no pairs of turns"
        return out
    lo, hi = ci
    centre = figure["overhead_pct"]
    out.update(overhead_pct=centre, ci95_pct=[lo, hi], resolution_pct=round((hi - lo) / 2, 2))
    c_ci = (control or {}).get("ci95_pct")
    if not control or not c_ci or not control.get("interval_covers_jobs"):
        out["why"] = "no A/A control of two pairs of jobs or more"
        return out
    out["control_ci95_pct"] = list(c_ci)
    if not c_ci[0] <= 0.0 <= c_ci[1]:
        out["why"] = (f"the A/A control reads {control.get('overhead_pct')}% ({c_ci[0]} .. {c_ci[1]}), 0 outside: "
                      "the harness is biased at this noise")
        return out
    if hi <= goal_pct:
        out.update(decision="met", why=f"the upper end {hi}% <= {goal_pct}%")
    elif lo > goal_pct:
        out.update(decision="not met", why=f"the lower end {lo}% > {goal_pct}%")
    else:
        margin = abs(centre - goal_pct)
        jobs = figure.get("jobs") or 1
        out["jobs_needed"] = math.ceil(jobs * ((hi - lo) / 2 / margin) ** 2) if margin > 0 else None
        out["why"] = f"the interval {lo} .. {hi}% holds the goal {goal_pct}% (resolution +-{out['resolution_pct']}%)"
    return out


def position_ratios(slices: List[tuple], a: List[Optional[dict]], b: List[Optional[dict]], key: str) -> List[float]:
    """log(second/first) for each pair of turns (pair ids), whichever job was first: what a turn's place in
    its pair does to its steps (the caches the other job left, a host task on the harness's period). The
    random order cancels it in the overhead; this shows how large it is."""
    by_pair: Dict[int, List[dict]] = {}
    for k, sl in enumerate(slices):
        if len(sl) < 4 or sl[3] is None:
            continue
        cell = a[k] or b[k]
        if cell and key in cell:
            by_pair.setdefault(sl[3], []).append(cell)
    return [math.log(v[1][key] / v[0][key]) for v in by_pair.values() if len(v) == 2]


def paired_tree_cpu(slices: List[tuple], slice_cpu: List[Dict[str, float]], steps: Dict[str, List[int]],
                    name_a: str, name_b: str, roles=("ranks", "launcher", "other")) -> List[float]:
    """log(b/a) of the whole tree's CPU per step (the `roles` summed), per pair of turns (pair ids), from
    the CPU read at the turns (slice_cpu) and the steps each job made in its turns (`steps[name][k]`: the
    steps that ended inside slice k). The supervisor's CPU is in it: its cost, charged to its side."""
    by_pair: Dict[int, Dict[str, List[float]]] = {}
    for k, sl in enumerate(slices):
        if len(sl) < 4 or sl[3] is None:
            continue
        n = steps.get(sl[0], [0] * len(slices))[k]
        if n <= 0:
            continue
        by_pair.setdefault(sl[3], {}).setdefault(sl[0], []).append(sum(slice_cpu[k][r] for r in roles) / n)
    out = []
    for got in by_pair.values():
        if name_a in got and name_b in got:
            a, b = statistics.fmean(got[name_a]), statistics.fmean(got[name_b])
            if a > 0 and b > 0:
                out.append(math.log(b / a))
    return out


def balanced_tree_run(slices: List[tuple], slice_run: List[Dict[str, float]], steps: Dict[str, List[int]],
                      name_a: str, name_b: str, roles=("ranks",)) -> List[float]:
    """Round 16 wave 2: one log(b/a) per quad of turns (the order "balanced", as balanced_ratios) of the ranks' own
    CPU per step: the scheduler's run time of every rank thread over the turn (slice_run, tree_run_s at the turn's
    edges while stopped) over the steps made in it (`steps[name][k]`, as paired_tree_cpu). A sum over the whole turn,
    not a median of single steps, in ns, not ticks; it counts every thread of the rank (the attach's hooks
    included) and not the supervisor (roles). Each pair: the mean per step of each job's turns; each quad: the mean
    of its two pairs' logs, where they ran in opposite orders."""
    by_pair: Dict[int, Dict[str, float]] = {}
    first: Dict[int, str] = {}
    for k, sl in enumerate(slices):
        if len(sl) < 4 or sl[3] is None or k >= len(slice_run):
            continue
        n = steps.get(sl[0], [0] * len(slices))[k]
        if n <= 0:
            continue
        first.setdefault(sl[3], sl[0])
        by_pair.setdefault(sl[3], {})[sl[0]] = sum(slice_run[k].get(r, 0.0) for r in roles) / n
    logs: Dict[int, float] = {}
    for p, got in by_pair.items():
        if name_a in got and name_b in got and got[name_a] > 0 and got[name_b] > 0:
            logs[p] = math.log(got[name_b] / got[name_a])
    out = []
    for q in sorted({p // 2 for p in logs}):
        p0, p1 = 2 * q, 2 * q + 1
        if p0 in logs and p1 in logs and first[p0] != first[p1]:
            out.append((logs[p0] + logs[p1]) / 2)
    return out


def thread_split(slice_run: List[Dict[str, float]]) -> List[Dict[str, float]]:
    """Round 17: each turn's ranks' run time split by thread (tree_run_s's "ranks_main"): "rank_main", the main
    threads (the attach's hooks, the step's Python and compute), and "rank_threads", the ranks' other threads
    (Gloo's loops); {} for a turn saved before the split existed. For balanced_tree_run(..., roles=(key,))."""
    return [{"rank_main": d["ranks_main"], "rank_threads": d["ranks"] - d["ranks_main"]} if "ranks_main" in d else {}
            for d in slice_run]


def steps_in_slices(steps: List[Tuple[float, float, int]], slices: List[tuple], name: str) -> List[int]:
    """Per slice, the steps of `name` that ended inside it (0 for the other job's slices)."""
    ends = [t for t, _, _ in steps]
    out = []
    for sl in slices:
        out.append(bisect.bisect_right(ends, sl[2]) - bisect.bisect_right(ends, sl[1]) if sl[0] == name else 0)
    return out


def chi2_sf(x: float, df: int) -> float:
    """P(X >= x) for X chi-square with an integer `df` >= 1 (closed forms: no scipy here)."""
    if x <= 0:
        return 1.0
    h = x / 2
    if df % 2 == 0:
        term = total = 1.0
        for i in range(1, df // 2):
            term *= h / i
            total += term
        return min(1.0, math.exp(-h) * total)
    total = math.erfc(math.sqrt(h))
    for i in range(1, (df - 1) // 2 + 1):
        total += math.exp((i - 0.5) * math.log(h) - h - math.lgamma(i + 0.5))
    return min(1.0, total)


def job_heterogeneity(groups: List[List[float]]) -> Optional[dict]:
    """Do the pairs of jobs differ as wholes, beyond what their turns' noise explains? Cochran's Q: each
    pair of jobs' mean log ratio against the inverse-variance pooled mean, in units of its own standard
    error (from its pairs of turns); Q near its df (the pairs of jobs - 1) when the jobs differ only by
    the turns' noise, far above it when one job runs slow or fast as a whole (its layout, its start). `p`:
    the chance of a Q this large without a job effect. Round 10 wave 2: the A/A's per-job spread that
    looked like a job effect gave Q 3.3 on 5 df (CPU), i.e. none: the turns' noise alone. None with fewer
    than two pairs of jobs of two or more pairs of turns each."""
    cells = []
    for g in groups:
        if len(g) >= 2:
            se2 = statistics.variance(g) / len(g)
            if se2 > 0:
                cells.append((statistics.fmean(g), se2))
    if len(cells) < 2:
        return None
    w = [1 / se2 for _, se2 in cells]
    pooled = sum(wi * m for wi, (m, _) in zip(w, cells)) / sum(w)
    q = sum((m - pooled) ** 2 / se2 for m, se2 in cells)
    df = len(cells) - 1
    return {"q": round(q, 2), "df": df, "p": round(chi2_sf(q, df), 4),
            # the pooled mean weighted by each pair of jobs' precision, and its standard error (no job effect)
            "pooled_pct": round(100 * (math.exp(pooled) - 1), 2), "pooled_se_pct": round(100 / math.sqrt(sum(w)), 2)}


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
            # one pair of jobs: the interval is the turns' alone; a job slow as a whole (its layout, its
            # cores) is inside the figure and outside the interval. Two pairs or more carry it.
            "interval_covers_jobs": len(groups) >= 2,
            "ci95_pct": [pct(means[int(0.025 * boot)]), pct(means[int(0.975 * boot) - 1])],
            "median_pct": pct(statistics.median(logs)),
            "per_job_pct": [pct(statistics.fmean(g)) for g in groups],
            "pair_sd_pct": round(100 * statistics.stdev(logs), 1) if len(logs) > 1 else None,
            # whether the pairs of jobs differ beyond the turns' noise (Cochran's Q; None: fewer than 2)
            "jobs_differ": job_heterogeneity(groups)}
