"""Round 15, issue 27 (A): bench_run's time-sliced method, pure on made-up step streams (no process).
The balanced order (quads A B B A / B A A B, one ratio per quad) and the three-way decision (met / not
met / cannot resolve at this noise)."""
import json
import math
import os
import random
from bench_modules import load

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load(name):
    return load(name)


ts = _load("_timeslice")


def quads(n_quads, seed=0, slice_s=1.0):
    """Slices as run_sliced's balanced order makes them: (name, start, end, pair id), pair ids 2q, 2q + 1."""
    rng = random.Random(seed)
    out, t = [], 0.0
    for q in range(n_quads):
        for i, who in enumerate(ts.next_quad(["A", "B"], rng)):
            out.append((who, t, t + slice_s, 2 * q + i // 2))
            t += slice_s
    return out


def pairs(n_pairs, seed=0, slice_s=1.0):
    """Round 10's random order: (name, start, end, pair id) in pairs of random order."""
    rng = random.Random(seed)
    out, t = [], 0.0
    for p in range(n_pairs):
        for who in ts.next_pair(["A", "B"], rng):
            out.append((who, t, t + slice_s, p))
            t += slice_s
    return out


def steps(slices, name, step_s, second_slower=0.0, drift_per_turn=0.0):
    """A job's steps in its turns: `second_slower` longer in the second turn of a pair, and the machine
    slower by `drift_per_turn` more at each turn (a linear drift)."""
    rows, cpu, first = [], 0.0, {}
    for k, (who, start, end, pair) in enumerate(slices):
        first.setdefault(pair, who)
        if who != name:
            continue
        s = step_s * (1 + (second_slower if first[pair] != who else 0.0)) * (1 + drift_per_turn * k)
        t = start
        while t + s <= end:
            t += s
            cpu += s / 2
            rows.append((t, cpu, 0))
    return rows


def ratios(slices, b_step_s, fn, **effects):
    pa = ts.slice_stats(steps(slices, "A", 0.010, **effects), slices, "A")
    pb = ts.slice_stats(steps(slices, "B", b_step_s, **effects), slices, "B")
    return fn(slices, pa, pb, "wall")


def test_next_quad_is_a_pair_and_its_reverse_each_order_about_half():
    rng = random.Random(5)
    got = [ts.next_quad(["A", "B"], rng) for _ in range(1000)]
    assert all(q in (["A", "B", "B", "A"], ["B", "A", "A", "B"]) for q in got)
    assert 400 < sum(q[0] == "A" for q in got) < 600


def test_a_quad_cancels_the_turns_position_and_a_linear_drift_exactly():
    """Trigger: 8 pairs of random order with the second turn 6% slower and a drift of 0.5% per turn, an A/A:
    the pairs' mean leans (the position does not cancel in so few pairs). Quiet: the same effects in 4 quads
    (the same 16 turns) give 0 in every quad, and a real 2% reads 2% in every quad."""
    rnd = pairs(8, seed=2)
    leaned = ratios(rnd, 0.010, ts.paired_ratios, second_slower=0.06, drift_per_turn=0.005)
    assert abs(100 * (math.exp(sum(leaned) / len(leaned)) - 1)) > 1.0
    bal = quads(4, seed=2)
    aa = ratios(bal, 0.010, ts.balanced_ratios, second_slower=0.06, drift_per_turn=0.005)
    assert len(aa) == 4 and all(abs(x) < 0.004 for x in aa), aa
    ab = ratios(bal, 0.0102, ts.balanced_ratios, second_slower=0.06, drift_per_turn=0.005)
    assert all(math.log(1.02) - 0.004 < x < math.log(1.02) + 0.004 for x in ab), ab
    # the pairs of the same balanced run, one ratio each, still swing by the position effect
    each = ratios(bal, 0.010, ts.paired_ratios, second_slower=0.06)
    assert max(each) - min(each) > 0.1


def test_balanced_ratios_leave_out_quads_not_in_opposite_orders():
    """A random order's neighbouring pairs (2q, 2q + 1) in the same order are no quad: left out."""
    same = [("A", 0, 1, 0), ("B", 1, 2, 0), ("A", 2, 3, 1), ("B", 3, 4, 1)]
    opposite = [("A", 0, 1, 0), ("B", 1, 2, 0), ("B", 2, 3, 1), ("A", 3, 4, 1)]
    assert ratios(same, 0.010, ts.balanced_ratios) == []
    assert len(ratios(opposite, 0.010, ts.balanced_ratios)) == 1


def _summary(pct, ci, jobs=4):
    return {"overhead_pct": pct, "ci95_pct": list(ci), "jobs": jobs, "pairs": 40 * jobs, "interval_covers_jobs": jobs >= 2}


def test_decide_met_not_met_or_cannot_resolve():
    control = _summary(0.1, (-0.6, 0.8))
    assert ts.decide(_summary(0.4, (0.1, 0.9)), control)["decision"] == "met"
    assert ts.decide(_summary(2.3, (1.4, 3.2)), control)["decision"] == "not met"
    # round 14's lead figure: +2.26% (+0.12 .. +4.44) holds 1%: not "not met", cannot resolve
    got = ts.decide(_summary(2.26, (0.12, 4.44)), _summary(-0.86, (-4.30, 2.32)))
    assert got["decision"] == "cannot resolve at this noise" and got["resolution_pct"] == 2.16
    assert got["jobs_needed"] == math.ceil(4 * (2.16 / 1.26) ** 2)
    # no control of two pairs of jobs, or one that leaves out 0: nothing counts, however narrow the figure
    assert ts.decide(_summary(0.4, (0.1, 0.9)), None)["decision"] == "cannot resolve at this noise"
    one = ts.decide(_summary(0.4, (0.1, 0.9)), _summary(0.1, (-0.6, 0.8), jobs=1))
    assert one["decision"] == "cannot resolve at this noise" and "two pairs" in one["why"]
    biased = ts.decide(_summary(0.4, (0.1, 0.9)), _summary(3.87, (1.7, 9.97)))
    assert biased["decision"] == "cannot resolve at this noise" and "biased" in biased["why"]


def _save(d, j, b_step_s, sides, order, commit="aaa"):
    """One saved pair of jobs (slices-*.json and each side's two ranks' steps), as overhead_sliced leaves it."""
    names = {"a": f"{sides[0]}-a{j}", "b": f"{sides[1]}-b{j}"}
    made = quads(10, seed=j) if order == "balanced" else pairs(20, seed=j)
    slices = [(names["a"] if who == "A" else names["b"], s, e, p) for who, s, e, p in made]
    stats = {k: os.path.join(d, f"sliced-{names[k]}-{j}") for k in "ab"}
    for k, step_s in (("a", 0.010), ("b", b_step_s)):
        for r in (0, 1):
            rows = steps(slices, names[k], step_s * (1 + 0.01 * r), second_slower=0.05)
            with open(f"{stats[k]}.rank{r}.steps", "w") as fh:
                fh.writelines(f"{t:.6f} {c:.6f} {rss}\n" for t, c, rss in rows)
    with open(os.path.join(d, f"slices-{names['a']}-{names['b']}-{j}.json"), "w") as fh:
        json.dump({"slices": slices, "slice_cpu": [], "stats": stats, "names": names, "sides": list(sides),
                   "no_aslr": False, "width": 1024, "order": order, "commit": commit}, fh)


@pytest.mark.parametrize("b_step_s,expected", [(0.01003, "met"), (0.0103, "not met")])
def test_decision_from_saved_balanced_runs(tmp_path, b_step_s, expected):
    """From saved files: 2 control pairs and 2 pairs of the job that does work, all in quads, a 5% position
    effect in every pair: the decision reads the quads (basis) and gives met at +0.3%, not met at +3%."""
    br = _load("bench_run")
    for j in (0, 1):
        _save(str(tmp_path), j, 0.010, ("bare", "bare"), "balanced")
        _save(str(tmp_path), 10 + j, b_step_s, ("bare", "run"), "balanced")
    pooled = br.pool_saved([str(tmp_path)])
    assert "balanced" in pooled["bare,run"] and pooled["bare,run"]["balanced"]["wall"]["pairs"] == 20
    got = br.decision(pooled)
    assert got["basis"] == "quads (balanced order)" and got["decision"] == expected, got


def test_decision_without_quads_reads_pairs_and_without_a_control_cannot_resolve(tmp_path):
    br = _load("bench_run")
    for j in (0, 1):
        _save(str(tmp_path), 10 + j, 0.01003, ("bare", "run"), "random")
    pooled = br.pool_saved([str(tmp_path)])
    assert "balanced" not in pooled["bare,run"]
    got = br.decision(pooled)
    assert got["basis"] == "pairs of turns" and got["decision"] == "cannot resolve at this noise"
    assert "A/A control" in got["wall"]["why"]


def test_the_turn_plan_gives_whole_quads_on_even_ids_after_a_restart():
    """run_sliced's plan (TurnPlan): the measured part starts by clearing the plan mid-quad (the warm-up's end);
    the turns after it are whole quads on ids 2q, 2q + 1 in opposite orders, which balanced_ratios reads
    (one ratio each); the random order gives one id per pair and no quad."""
    plan = ts.TurnPlan(["A", "B"], "balanced", random.Random(7))
    plan.take(), plan.take(), plan.take()  # the warm-up, three turns into its first quad
    plan.plan.clear()
    got = [plan.take() for _ in range(4 * 12)]
    assert all(pid % 2 == 0 for _, pid in got[0::4]) and all(got[i][1] + 1 == got[i + 2][1] for i in range(0, 48, 4))
    slices = [(who, float(k), k + 1.0, pid) for k, (who, pid) in enumerate(got)]
    assert len(ratios(slices, 0.0101, ts.balanced_ratios)) == 12
    rnd = ts.TurnPlan(["A", "B"], "random", random.Random(7))
    ids = [rnd.take()[1] for _ in range(20)]
    assert ids == [i // 2 for i in range(20)]
