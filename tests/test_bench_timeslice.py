"""benchmarks/_timeslice.py: the time-sliced A/B of bench_run (two jobs taking turns on the machine).
The pure part on made-up step streams; the turns for real on two small Python jobs."""
import importlib.util
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

from procs import marked, reached
from bench_modules import load

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ts = load("_timeslice")


def stream(slices, name, step_s, offset=0.0):
    """Steps of `step_s` that a job makes only during its own slices (stopped otherwise); CPU time
    advances with its steps."""
    rows, cpu = [], 0.0
    for who, start, end in slices:
        if who != name:
            continue
        t = start + offset
        while t + step_s <= end:
            t += step_s
            cpu += step_s / 2
            rows.append((t, cpu, 1000))
    return rows


def abba(n, slice_s=1.0, first="A"):
    order = ["A", "B", "B", "A"] if first == "A" else ["B", "A", "A", "B"]
    return [(order[k % 4], k * slice_s, (k + 1) * slice_s) for k in range(n)]


def test_a_constant_overhead_is_measured_and_the_control_is_zero():
    slices = abba(40)
    a, b = stream(slices, "A", 0.010), stream(slices, "B", 0.0105)
    per_a, per_b = ts.slice_stats(a, slices, "A"), ts.slice_stats(b, slices, "B")
    got = ts.summarize([ts.paired_ratios(slices, per_a, per_b, "wall")])
    assert got["pairs"] == 20
    assert got["overhead_pct"] == pytest.approx(5.0, abs=0.01)
    assert got["ci95_pct"][0] == pytest.approx(5.0, abs=0.01) and got["ci95_pct"][1] == pytest.approx(5.0, abs=0.01)
    same = ts.summarize([ts.paired_ratios(slices, per_a, ts.slice_stats(stream(slices, "B", 0.010), slices, "B"),
                                          "cpu")])
    assert same["overhead_pct"] == pytest.approx(0.0, abs=0.01)


def test_a_drift_both_jobs_share_cancels_in_the_ratio():
    """The machine slows down 30% over the run; a job 2% slower is still measured at 2%."""
    slices = abba(60)
    def slowing(name, step):
        rows = []
        for who, start, end in slices:
            if who != name:
                continue
            t = start
            s = step * (1 + 0.3 * start / 60)
            while t + s <= end:
                t += s
                rows.append((t, t, 0))
        return rows
    pa = ts.slice_stats(slowing("A", 0.010), slices, "A")
    pb = ts.slice_stats(slowing("B", 0.0102), slices, "B")
    got = ts.summarize([ts.paired_ratios(slices, pa, pb, "wall")])
    assert got["overhead_pct"] == pytest.approx(2.0, abs=0.2)
    assert got["ci95_pct"][1] - got["ci95_pct"][0] < 0.5


def test_a_step_across_a_stop_or_inside_the_guard_is_not_counted():
    slices = [("A", 0.0, 1.0), ("B", 1.0, 2.0), ("A", 2.0, 3.0)]
    # A: steps of 0.1 s in its first slice; one step spans B's slice (0.95 -> 2.02: stopped in between)
    rows = [(0.1 * k, 0.0, 0) for k in range(1, 10)] + [(0.95, 0, 0), (2.02, 0, 0), (2.3, 0, 0), (2.6, 0, 0),
                                                      (2.9, 0, 0), (2.99, 0, 0)]
    per = ts.slice_stats(rows, slices, "A")
    assert per[1] is None
    assert per[0]["n"] == 9 and per[0]["wall"] == pytest.approx(0.1)
    # the last slice: 0.95 -> 2.02 spans the stop and 2.02 -> 2.3 began inside the guard (2.02 < 2.05)
    assert per[2]["n"] == 3 and per[2]["wall"] == pytest.approx(0.3)


def test_pairs_skip_two_slices_of_the_same_job_where_measuring_began():
    slices = abba(9)[1:]  # starts B B A A B B A A
    per_a = ts.slice_stats(stream(slices, "A", 0.01), slices, "A")
    per_b = ts.slice_stats(stream(slices, "B", 0.02), slices, "B")
    logs = ts.paired_ratios(slices, per_a, per_b, "wall")
    assert len(logs) == 3
    assert all(x == pytest.approx(math.log(2)) for x in logs)


def test_summary_of_nothing():
    assert ts.summarize([]) == {"pairs": 0}
    assert ts.summarize([[], []]) == {"pairs": 0}


def test_a_job_that_runs_slow_as_a_whole_widens_the_interval():
    """Three pairs of jobs agree (+1%), a fourth is 8% off as a whole: the pooled mean moves, and the
    two-level interval is wider than one that treats its pairs as independent."""
    steady = [[math.log(1.01) + d for d in (-0.002, 0.002) * 20] for _ in range(3)]
    odd = [math.log(1.09) + d for d in (-0.002, 0.002) * 20]
    got = ts.summarize(steady + [odd])
    assert got["jobs"] == 4 and got["pairs"] == 160
    assert got["per_job_pct"] == pytest.approx([1.0, 1.0, 1.0, 9.0], abs=0.01)
    assert got["overhead_pct"] == pytest.approx(2.97, abs=0.05)
    flat = ts.summarize([steady[0] + steady[1] + steady[2] + odd])
    assert got["ci95_pct"][1] - got["ci95_pct"][0] > 3 * (flat["ci95_pct"][1] - flat["ci95_pct"][0])


JOB = textwrap.dedent("""
    import sys, time
    with open(sys.argv[1], "w", buffering=1) as fh:
        while True:
            t = time.monotonic()
            while time.monotonic() - t < 0.004:
                pass
            fh.write(f"{time.monotonic():.6f} {time.thread_time():.6f} 1000\\n")
""")


def toggled(steps, block, on_s, off_s, drift=0.0):
    """One process's steps with the hooks on/off every `block` steps (as trainer_job --toggle-attach
    writes them: the mode of step g was set at the end of step g-1), optionally on a drifting machine."""
    rows, t, cpu = [(0.0, 0.0, 1)], 0.0, 0.0
    for g in range(1, steps + 1):
        on = 0 if ((g - 1) // block) % 2 == 1 else 1
        d = (on_s if on else off_s) * (1 + drift * g / steps)
        t, cpu = t + d, cpu + d / 2
        rows.append((t, cpu, on))
    return rows


def test_toggled_blocks_measure_the_hooks_and_nothing_when_they_cost_nothing():
    rows = toggled(4000, 40, 0.00315, 0.003, drift=0.3)  # +5%, while the machine slows by 30%
    for key in ("wall", "cpu"):
        got = ts.summarize([ts.toggled_ratios(rows, key, skip=400)])
        assert abs(got["overhead_pct"] - 5.0) < 0.3, got
    same = ts.summarize([ts.toggled_ratios(toggled(4000, 40, 0.003, 0.003, drift=0.3), "wall", skip=400)])
    assert abs(same["overhead_pct"]) < 0.3, same
    assert same["pairs"] == (4000 - 400) // 80 - 1 or same["pairs"] == (4000 - 400) // 80, same


def test_toggled_ratios_leave_out_the_switching_step_and_short_blocks():
    rows = toggled(800, 40, 0.003, 0.003)
    # the first step of every block is 10x slower (the switch): it must not move the medians
    spiked = [rows[0]]
    shift = 0.0
    for i in range(1, len(rows)):
        if rows[i][2] != rows[i - 1][2]:
            shift += 0.027
        spiked.append((rows[i][0] + shift, rows[i][1], rows[i][2]))
    assert abs(ts.summarize([ts.toggled_ratios(spiked, "wall")])["overhead_pct"]) < 0.1
    assert ts.toggled_ratios(toggled(20, 2, 0.003, 0.003), "wall") == []  # blocks of 1 usable step


def test_read_toggled_takes_only_four_column_lines(tmp_path):
    path = tmp_path / "s.rank0.steps"
    path.write_text("1.0 0.5 1000 1\n1.1 0.55 1000 0\n1.2 0.6 1000\ngarbage\n")
    assert ts.read_toggled(str(path)) == [(1.0, 0.5, 1), (1.1, 0.55, 0)]
    assert ts.read_toggled(str(tmp_path / "missing")) == []


@pytest.mark.slow
@pytest.mark.exclusive
@pytest.mark.timeout(60)
def test_two_jobs_take_turns_and_leave_nothing_behind(tmp_path):
    mark = uuid.uuid4().hex
    env = dict(os.environ, DDPDOCTOR_TEST_MARK=mark)
    series = {n: str(tmp_path / f"{n}.steps") for n in ("a", "b")}
    # each job is a parent that starts a child: the whole tree must be stopped and killed
    cmds = {n: [sys.executable, "-c", "import subprocess, sys; subprocess.run([sys.executable, '-c', sys.argv[1], "
                                        "sys.argv[2]])", JOB, series[n]] for n in series}
    got = ts.run_sliced(cmds, series, slice_s=0.25, duration_s=3.0, warmup_steps=20, env=env, cwd=str(tmp_path))
    assert not got["early_exit"]
    slices = got["slices"]
    assert len(slices) >= 10 and {s[0] for s in slices} == {"a", "b"}
    # random order: every pair id holds one turn of each job, and the CPU of each turn was read
    pairs = {}
    for who, _, _, pair in slices:
        pairs.setdefault(pair, []).append(who)
    assert all(sorted(v) == ["a", "b"] for v in pairs.values()), pairs
    assert len(got["slice_cpu"]) == len(slices)
    assert sum(c["ranks"] for c in got["slice_cpu"]) > 0.2 * sum(e - s for _, s, e, _ in slices)  # they spin
    rows = {n: ts.read_steps(series[n]) for n in series}
    # while one job has its turn, the other makes no step (a grace of 20 ms for SIGSTOP to land)
    for who, start, end, _ in slices:
        other = "b" if who == "a" else "a"
        inside = [t for t, _, _ in rows[other] if start + 0.02 < t < end - 0.001]
        assert inside == [], (who, start, end, inside[:3])
    for n in series:
        # the steps counted in the job's own turns are the steps it made there (a bound from what it did,
        # not from time: at load ~9 a job made 70 steps in 1.5 s of turns, where 100 were expected): a
        # step whose end lies in a turn (after the guard) is counted unless it began before the guard,
        # at most one per turn
        per = ts.slice_stats(rows[n], slices, n)
        own = [(start, end) for who, start, end, _ in slices if who == n]
        ended_inside = sum(1 for t, _, _ in rows[n][1:] for start, end in own if start + ts.GUARD_S < t <= end)
        counted = sum(x["n"] for x in per if x)
        assert counted > 0 and ended_inside - len(own) <= counted <= ended_inside, (counted, ended_inside, len(own))
    deadline = time.monotonic() + 10
    while marked(mark) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marked(mark) == []


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_a_harness_ended_by_sigterm_kills_the_stopped_trees(tmp_path):
    """bench_run stopped with SIGTERM (a CI timeout, kill): the job it holds stopped must not stay
    behind, stopped, in its own session."""
    mark = uuid.uuid4().hex
    env = dict(os.environ, DDPDOCTOR_TEST_MARK=mark)
    series = {n: str(tmp_path / f"{n}.steps") for n in ("a", "b")}
    harness = textwrap.dedent(f"""
        import importlib.util, sys
        spec = importlib.util.spec_from_file_location("_timeslice", {os.path.join(ROOT, "benchmarks", "_timeslice.py")!r})
        ts = importlib.util.module_from_spec(spec); spec.loader.exec_module(ts)
        cmds = {{n: [sys.executable, "-c", {JOB!r}, p] for n, p in {series!r}.items()}}
        ts.run_sliced(cmds, {series!r}, slice_s=0.25, duration_s=600, warmup_steps=20, env=None, cwd={str(tmp_path)!r})
        """)
    proc = subprocess.Popen([sys.executable, "-c", harness], env=env)
    # the state the test needs: both jobs stepping under the harness (bare interpreters, no torch: 40 s of the
    # test's 60 is ample at any load). Before, the wait fell through at its bound and the test signalled anyway.
    reached(lambda: all(ts.count_lines(p) > 30 for p in series.values()), 40, "both jobs past 30 steps",
            alive=lambda: proc.poll() is None)
    assert len(marked(mark)) >= 3  # the harness and its two jobs
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    deadline = time.monotonic() + 10
    while marked(mark) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marked(mark) == []


def random_pairs(n_pairs, seed=0, slice_s=1.0, fixed=None):
    """Slices in pairs of turns: random order (next_pair), or `fixed` first in every pair."""
    rng = __import__("random").Random(seed)
    out, t = [], 0.0
    for p in range(n_pairs):
        order = ts.next_pair(["A", "B"], rng) if fixed is None else [fixed, "B" if fixed == "A" else "A"]
        for who in order:
            out.append((who, t, t + slice_s, p))
            t += slice_s
    return out


def slot_stream(slices, name, step_s, second_slower):
    """A job's steps in its turns; in the second turn of a pair its steps are `second_slower` longer
    (a turn's position: what ran before it, its caches, a host task on the harness's period)."""
    rows, t_cpu = [], 0.0
    first = {}
    for who, start, end, pair in slices:
        first.setdefault(pair, who)
        if who != name:
            continue
        s = step_s * (1 + (second_slower if first[pair] != who else 0.0))
        t = start
        while t + s <= end:
            t += s
            t_cpu += s / 2
            rows.append((t, t_cpu, 0))
    return rows


def test_the_random_order_puts_each_job_first_in_about_half_the_pairs():
    rng = __import__("random").Random(3)
    firsts = [ts.next_pair(["A", "B"], rng)[0] for _ in range(2000)]
    assert 900 < firsts.count("A") < 1100
    assert all(sorted(ts.next_pair(["x", "y"], rng)) == ["x", "y"] for _ in range(10))


def test_a_turn_position_effect_cancels_in_the_random_order_and_not_in_a_fixed_one():
    """Two identical jobs (A/A); the second turn of every pair runs 6% slower. A fixed order (A first in
    every pair) reads that as B being 6% slower; the random order centres on 0, within its interval."""
    fixed = random_pairs(300, fixed="A")
    pa = ts.slice_stats(slot_stream(fixed, "A", 0.010, 0.06), fixed, "A")
    pb = ts.slice_stats(slot_stream(fixed, "B", 0.010, 0.06), fixed, "B")
    biased = ts.summarize([ts.paired_ratios(fixed, pa, pb, "wall")])
    assert biased["overhead_pct"] == pytest.approx(6.0, abs=0.3)
    rnd = random_pairs(300, seed=1)
    pa = ts.slice_stats(slot_stream(rnd, "A", 0.010, 0.06), rnd, "A")
    pb = ts.slice_stats(slot_stream(rnd, "B", 0.010, 0.06), rnd, "B")
    got = ts.summarize([ts.paired_ratios(rnd, pa, pb, "wall")])
    assert got["pairs"] == 300
    assert abs(got["overhead_pct"]) < 1.0, got
    assert got["ci95_pct"][0] < 0 < got["ci95_pct"][1], got
    # what the random order cancelled, shown apart: the second turn of a pair, whichever job had it
    pos = ts.summarize([ts.position_ratios(rnd, pa, pb, "wall")])
    assert pos["overhead_pct"] == pytest.approx(6.0, abs=0.1) and pos["pairs"] == 300
    # and a real 2% is still measured through the position effect
    pb2 = ts.slice_stats(slot_stream(rnd, "B", 0.0102, 0.06), rnd, "B")
    real = ts.summarize([ts.paired_ratios(rnd, pa, pb2, "wall")])
    assert real["overhead_pct"] == pytest.approx(2.0, abs=1.0) and real["ci95_pct"][0] > 0


def test_pairs_by_id_take_one_turn_of_each_job_whatever_their_order():
    slices = [("B", 0, 1, 0), ("A", 1, 2, 0), ("B", 2, 3, 1), ("A", 3, 4, 1), ("A", 4, 5, 2), ("B", 5, 6, 2)]
    pa = ts.slice_stats(stream([s[:3] for s in slices], "A", 0.01), slices, "A")
    pb = ts.slice_stats(stream([s[:3] for s in slices], "B", 0.02), slices, "B")
    logs = ts.paired_ratios(slices, pa, pb, "wall")
    assert len(logs) == 3 and all(x == pytest.approx(math.log(2)) for x in logs)
    # the adjacency rule of the A B B A cycle would have paired (A, B) of pairs 1 and 2 as well: 3 here too,
    # but across pair ids; with ids, a pair whose turn has no steps is dropped, not re-paired
    pb[5] = {"n": 0}
    assert len(ts.paired_ratios(slices, pa, pb, "wall")) == 2


def test_every_rank_counts_one_slow_rank_weighs_one_half():
    """Job B's rank 1 runs 6% slower as a whole (its own layout or core), rank 0 not: rank 0 alone reads
    0, both ranks read 3% (geometric mean); combine_ranks drops a slice that one rank lacks."""
    slices = random_pairs(40)
    a0 = ts.slice_stats(slot_stream(slices, "A", 0.010, 0.0), slices, "A")
    a1 = ts.slice_stats(slot_stream(slices, "A", 0.010, 0.0), slices, "A")
    b0 = ts.slice_stats(slot_stream(slices, "B", 0.010, 0.0), slices, "B")
    b1 = ts.slice_stats(slot_stream(slices, "B", 0.0106, 0.0), slices, "B")
    only0 = ts.summarize([ts.paired_ratios(slices, a0, b0, "cpu")])
    both = ts.summarize([ts.paired_ratios(slices, ts.combine_ranks([a0, a1]), ts.combine_ranks([b0, b1]), "cpu")])
    assert only0["overhead_pct"] == pytest.approx(0.0, abs=0.01)
    assert both["overhead_pct"] == pytest.approx(100 * (math.sqrt(1.06) - 1), abs=0.02)
    gap = list(b1)
    k = next(i for i, x in enumerate(gap) if x)
    gap[k] = {"n": 1}
    assert ts.combine_ranks([b0, gap])[k] == {"n": 1}


def test_the_supervisor_cpu_is_charged_to_its_side():
    """The tree CPU read at the turns: side B's ranks use what A's do, and B has a process of its own
    (the `run` parent: "other") using 1.5% of that. The tree's figure shows +1.5%, the ranks' alone 0."""
    slices = random_pairs(50)
    cpu, steps = [], {"A": [], "B": []}
    for who, _, _, _ in slices:
        cpu.append({"ranks": 1.0, "launcher": 0.01, "other": 0.015 if who == "B" else 0.0})
        for n in "AB":
            steps[n].append(100 if who == n else 0)
    tree = ts.summarize([ts.paired_tree_cpu(slices, cpu, steps, "A", "B")])
    ranks = ts.summarize([ts.paired_tree_cpu(slices, cpu, steps, "A", "B", roles=("ranks",))])
    assert tree["overhead_pct"] == pytest.approx(100 * 0.015 / 1.01, abs=0.01)
    assert ranks["overhead_pct"] == pytest.approx(0.0, abs=0.001)
    assert tree["pairs"] == 50


def test_steps_in_slices_counts_the_steps_that_ended_inside_each_turn():
    slices = [("A", 0.0, 1.0, 0), ("B", 1.0, 2.0, 0), ("A", 2.0, 3.0, 1)]
    rows = [(0.5, 0, 0), (0.9, 0, 0), (2.1, 0, 0), (2.2, 0, 0), (2.95, 0, 0), (3.5, 0, 0)]
    assert ts.steps_in_slices(rows, slices, "A") == [2, 0, 3]


def test_roles_from_the_command_line():
    py = b"/usr/bin/python3"
    assert ts.role_of(b"\0".join([py, b"-m", b"torch.distributed.run", b"--standalone", b"job.py"])) == "launcher"
    assert ts.role_of(b"\0".join([b"/v/bin/torchrun", b"--nproc-per-node", b"2", b"job.py"])) == "launcher"
    assert ts.role_of(b"\0".join([py, b"-m", b"ddpdoctor", b"run", b"--", py])) == "other"
    # the parent's own command line holds the launcher's: it is still the parent
    assert ts.role_of(b"\0".join([py, b"-m", b"ddpdoctor", b"run", b"--", py, b"-m", b"torch.distributed.run",
                                  b"--standalone", b"job.py"])) == "other"
    assert ts.role_of(b"\0".join([py, b"/v/bin/torchrun", b"job.py"])) == "launcher"
    assert ts.role_of(b"\0".join([b"/v/bin/ddpdoctor", b"run", b"--", b"torchrun"])) == "other"
    assert ts.role_of(b"\0".join([py, b"-u", b"fixtures/run/trainer_job.py", b"--steps", b"9"])) == "ranks"


def test_one_pair_of_jobs_says_its_interval_leaves_out_the_job_effect():
    one = ts.summarize([[0.01, -0.01, 0.02]])
    two = ts.summarize([[0.01, -0.01], [0.0, 0.02]])
    assert one["interval_covers_jobs"] is False and two["interval_covers_jobs"] is True


def test_straggler_bench_quiet_bound_is_the_exact_poisson_upper_limit():
    """The quiet figure's 95% bound (one-sided, exact): 3.00 after 0 events, 4.74 after 1, 6.30 after 2
    (e.g. 1 false alarm in 17,500 steps: at most 2.7 per 10k)."""
    spec = importlib.util.spec_from_file_location("bench_run", os.path.join(ROOT, "benchmarks", "bench_run.py"))
    br = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(br)
    assert [round(br.poisson_upper(k), 2) for k in (0, 1, 2)] == [3.0, 4.74, 6.3]
    assert round(1e4 * br.poisson_upper(1) / 17500, 1) == 2.7


def test_chi2_tail_matches_the_tables():
    for x, df in ((3.841, 1), (5.991, 2), (7.815, 3), (11.070, 5), (18.307, 10)):
        assert ts.chi2_sf(x, df) == pytest.approx(0.05, abs=0.0005)
    assert ts.chi2_sf(0.0, 3) == 1.0 and ts.chi2_sf(60.0, 4) < 1e-10


def _jobs(offsets, pairs=20, sd=0.08, seed=1):
    import random
    rng = random.Random(seed)
    return [[off + rng.gauss(0.0, sd) for _ in range(pairs)] for off in offsets]


def test_jobs_that_differ_only_by_the_turns_noise_give_a_q_near_its_df():
    """Cochran's Q of the pairs of jobs: per-job means that scatter by their own standard error alone (as
    the round-10 A/A's did) give no job effect; one job 8% off as a whole gives a Q far above its df."""
    quiet = ts.summarize(_jobs([0.0] * 6))["jobs_differ"]
    assert quiet["df"] == 5 and quiet["p"] > 0.05 and quiet["q"] < 11.07
    assert abs(quiet["pooled_pct"]) < 3 * quiet["pooled_se_pct"]
    odd = ts.summarize(_jobs([0.0] * 5 + [0.08]))["jobs_differ"]
    assert odd["p"] < 0.001 and odd["q"] > 3 * quiet["q"]


def test_job_heterogeneity_needs_two_pairs_of_jobs():
    assert ts.summarize([[0.01, -0.01, 0.02]])["jobs_differ"] is None
    assert ts.job_heterogeneity([[0.01, 0.02], [0.03]]) is None  # one pair of turns has no standard error
    assert ts.job_heterogeneity([[0.01, 0.02], [0.0, 0.03]])["df"] == 1


def _bench_run():
    spec = importlib.util.spec_from_file_location("bench_run", os.path.join(ROOT, "benchmarks", "bench_run.py"))
    br = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(br)
    return br


def _save_pair(d, j, b_step_s, sides=("bare", "bare"), no_aslr=False, **more):
    """One saved pair of jobs as overhead_sliced leaves it: slices-*.json and each side's two ranks' steps
    (`more`: the fields round 11 saves, width and commit; a file of round 10 has neither)."""
    import json
    names = {"a": f"{sides[0]}-a{j}", "b": f"{sides[1]}-b{j}"}
    slices = [(names["a" if k % 2 == 0 else "b"], k * 1.0, (k + 1) * 1.0, k // 2) for k in range(20)]
    stats = {k: os.path.join(d, f"sliced-{names[k]}-{j}") for k in "ab"}
    for k, step_s in (("a", 0.010), ("b", b_step_s)):
        for r in (0, 1):
            rows = stream([sl[:3] for sl in slices], names[k], step_s)
            with open(f"{stats[k]}.rank{r}.steps", "w") as fh:
                fh.writelines(f"{t:.6f} {c:.6f} {rss}\n" for t, c, rss in rows)
    with open(os.path.join(d, f"slices-{names['a']}-{names['b']}-{j}.json"), "w") as fh:
        json.dump(dict({"slices": slices, "slice_cpu": [], "stats": stats, "names": names, "sides": list(sides),
                        "no_aslr": no_aslr}, **more), fh)


def test_pool_takes_every_pair_of_jobs_of_every_run_by_comparison(tmp_path):
    """--pool: the saved slices of two runs pool into one summary per comparison (A/A apart from A/B, runs
    under setarch -R apart), from the ranks' step files, as the run itself read them."""
    br = _bench_run()
    one, two = tmp_path / "run1", tmp_path / "run2"
    one.mkdir(), two.mkdir()
    _save_pair(str(one), 0, 0.010)
    _save_pair(str(one), 1, 0.0102, sides=("bare", "run"))
    _save_pair(str(two), 0, 0.010)
    _save_pair(str(two), 1, 0.010, no_aslr=True)
    got = br.pool_saved([str(one), str(two)])
    assert set(got) == {"bare,bare", "bare,run", "bare,bare (no ASLR)"}
    assert got["bare,bare"]["pairs_of_jobs"] == 2 and got["bare,bare"]["wall"]["jobs"] == 2
    assert got["bare,bare"]["wall"]["overhead_pct"] == pytest.approx(0.0, abs=0.01)
    assert got["bare,run"]["cpu"]["overhead_pct"] == pytest.approx(2.0, abs=0.01)



def test_pool_keeps_the_tiny_job_and_each_code_version_apart(tmp_path):
    """Round 11: the tiny job (width 0) pools apart from the job that does work, and the commits pooled are
    listed per comparison."""
    br = _bench_run()
    _save_pair(str(tmp_path), 0, 0.0102, sides=("bare", "run"), width=1024, commit="aaa")
    _save_pair(str(tmp_path), 1, 0.0110, sides=("bare", "run"), width=0, commit="aaa")
    _save_pair(str(tmp_path), 2, 0.0104, sides=("bare", "run"), width=1024, commit="bbb")
    got = br.pool_saved([str(tmp_path)])
    assert set(got) == {"bare,run", "bare,run (tiny)"}
    assert got["bare,run"]["pairs_of_jobs"] == 2 and got["bare,run"]["commits"] == ["aaa", "bbb"]
    assert got["bare,run"]["cpu"]["overhead_pct"] == pytest.approx(100 * (math.sqrt(1.02 * 1.04) - 1), abs=0.01)
    assert got["bare,run (tiny)"]["cpu"]["overhead_pct"] == pytest.approx(10.0, abs=0.01)


def _pooled(work_pct, work_ci, control_ci, control_jobs=2, commits=("aaa",)):
    one = lambda pct, ci, jobs: {"overhead_pct": pct, "ci95_pct": list(ci), "jobs": jobs, "pairs": 10 * jobs,  # noqa: E731
                                 "interval_covers_jobs": jobs >= 2}
    return {"bare,run": {"commits": list(commits), "wall": one(work_pct, work_ci, 4), "cpu": one(work_pct, work_ci, 4)},
            "bare,bare": {"commits": list(commits), "wall": one(0.1, control_ci, control_jobs),
                          "cpu": one(0.1, control_ci, control_jobs)}}


def test_pooled_verdict_met_shown_or_not():
    """The verdict: met where both centres are <= 1%, shown where both upper ends are too, none without a
    control of two pairs of jobs or more that holds 0, none over mixed code versions."""
    br = _bench_run()
    v = br.pooled_verdict(_pooled(0.6, (0.2, 0.9), (-0.5, 0.7)))
    assert v["met"] and v["shown"] and v["control_holds"]
    v = br.pooled_verdict(_pooled(0.8, (0.1, 1.6), (-0.5, 0.7)))
    assert v["met"] and not v["shown"]
    v = br.pooled_verdict(_pooled(1.5, (0.7, 2.3), (-0.5, 0.7)))
    assert not v["met"] and v["why"].startswith("not met")
    v = br.pooled_verdict(_pooled(0.6, (0.2, 0.9), (0.3, 1.4)))  # the control leans: no verdict
    assert not v["met"] and not v["control_holds"] and "does not hold" in v["why"]
    v = br.pooled_verdict(_pooled(0.6, (0.2, 0.9), (-0.5, 0.7), control_jobs=1))
    assert not v["met"] and "two pairs" in v["why"]
    v = br.pooled_verdict(_pooled(0.6, (0.2, 0.9), (-0.5, 0.7), commits=("aaa", "bbb")))
    assert not v["met"] and "different code versions" in v["why"]
    pooled = _pooled(0.6, (0.2, 0.9), (-0.5, 0.7))
    pooled["bare,run"]["cpu"] = dict(pooled["bare,run"]["cpu"], overhead_pct=1.2, ci95_pct=[0.4, 2.0])
    assert not br.pooled_verdict(pooled)["met"]  # the wall alone under the goal is not enough


def test_pooled_verdict_over_saved_runs_equals_the_pairs_of_jobs_pooled(tmp_path):
    """From saved files to a verdict: two runs of one code version, each with a control pair and a pair
    of the job that does work, pool to 2 + 2 pairs of jobs; the run side 0.5% slower on every step: met."""
    br = _bench_run()
    for i, d in enumerate((tmp_path / "r1", tmp_path / "r2")):
        d.mkdir()
        _save_pair(str(d), 0, 0.010, width=1024, commit="aaa")
        _save_pair(str(d), 1, 0.01005, sides=("bare", "run"), width=1024, commit="aaa")
    pooled = br.pool_saved([str(tmp_path / "r1"), str(tmp_path / "r2")])
    assert pooled["bare,bare"]["pairs_of_jobs"] == 2 and pooled["bare,run"]["pairs_of_jobs"] == 2
    v = br.pooled_verdict(pooled)
    assert v["control_holds"] and v["met"] and v["work"]["cpu"]["overhead_pct"] == pytest.approx(0.5, abs=0.01)

@pytest.mark.slow
def test_no_aslr_prefix_reaches_the_grandchildren():
    """--no-aslr puts every job under `setarch <arch> -R`: the personality (ADDR_NO_RANDOMIZE, 0x0040000) is
    inherited through the launcher's fork and exec, so the ranks of both sides have one address layout."""
    import platform
    child = "import subprocess, sys; print(subprocess.run([sys.executable, '-c', " \
            "\"print(open('/proc/self/personality').read().strip())\"], capture_output=True, text=True).stdout.strip())"
    plain = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60).stdout.strip()
    fixed = subprocess.run(["setarch", platform.machine(), "-R", sys.executable, "-c", child],
                           capture_output=True, text=True, timeout=60).stdout.strip()
    assert int(plain, 16) & 0x0040000 == 0 and int(fixed, 16) & 0x0040000
