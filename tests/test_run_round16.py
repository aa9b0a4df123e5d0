"""Round 16, issue 27 (waves 1 and 2): the straggler bench's Quiet goal can be decided by its default (and says what its healthy
steps can decide), and the batch fast path's allowance is a limit on the one batch counter. Pure: the bench's own
functions on recorded tallies, and the recorder's DataLoader hook on a stand-in iterator; no process."""
import os
from bench_modules import load

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load(name):
    return load(name)


br = _load("bench_run")


def _healthy(steps, alarms=0):
    return {"kind": "straggler bench healthy", "steps": steps, "RUN020": alarms, "RUN023": 0}


def test_the_default_healthy_steps_can_decide_quiet_and_the_old_default_says_it_cannot():
    assert br.steps_to_meet(0) == 29958 and br.steps_to_meet(1) > br.steps_to_meet(0)
    jobs = 4
    steps = br.default_healthy_steps(jobs)
    plan = br.quiet_plan(jobs, steps)
    assert plan["can_meet"] and "decide 'met'" in plan["says"]
    # each job one step short of what was asked (its split's last step): 0 alarms still decide "met"
    assert br.quiet_tally([_healthy(steps - 1)] * jobs)["decision"] == "met"
    old = br.quiet_plan(4, 1500)  # round 15's default: 0 in 6,000 is a bound of 5 per 10,000
    assert not old["can_meet"] and "cannot decide 'met'" in old["says"] and "--healthy-steps 7490" in old["says"]
    assert old["not_met_from_alarms"] == 1
    assert br.quiet_tally([_healthy(1500)] * 4)["decision"] == "cannot resolve at this noise"


def test_the_straggler_bench_exit_follows_the_quiet_decision_not_its_centre(capsys):
    named = [{"named": True, "part_right": True, "cause": "a slow data loader", "latency_steps": 20}]
    quiet_short = dict(br.quiet_tally([_healthy(1500)] * 4))  # 0 per 10,000 at the centre: exit 0 before
    assert br.straggler_exit(named, 20, quiet_short) == br.EXIT_CANNOT_RESOLVE
    assert "cannot resolve" in capsys.readouterr().err
    assert br.straggler_exit(named, 20, br.quiet_tally([_healthy(7565)] * 4)) == 0
    assert br.straggler_exit(named, 20, br.quiet_tally([_healthy(7565, 4)] + [_healthy(7565)] * 3)) == 1  # 1.3 per 10,000
    late = [dict(named[0], latency_steps=60)]
    assert br.straggler_exit(late, 60, br.quiet_tally([_healthy(7565)] * 4)) == 1


# ---- RUN023 on a healthy job whose rank 0 waited for a CPU that the job's own output took (round 16, item 3)

import random  # noqa: E402

from ddpdoctor.facts import steps as st  # noqa: E402
from ddpdoctor.model.registry import REGISTRY  # noqa: E402,F401
from ddpdoctor.pipeline.judge import judge  # noqa: E402
from ddpdoctor.pipeline.runner import load_all  # noqa: E402
from ddpdoctor.pipeline.snapshot import Snapshot  # noqa: E402

load_all()

# Each rank's own parts and main-thread CPU per step (ms): the slow rank's compute takes 11 ms more wall time at the
# same CPU (it waited for a CPU), as round 15 wave 3's healthy 1200-step Trainer job logging every step with its bar
OTHERS = {"data": 1.0, "compute": 15.0, "optimizer": 3.0, "other": 5.0, "cpu": 20.0}
WAITED = {"data": 1.0, "compute": 26.0, "optimizer": 3.0, "other": 5.0, "cpu": 20.0}


def _job(slow: int, steps: int = 150, noise: float = 0.02, seed: int = 0):
    rnd = random.Random(seed)
    out = {0: [], 1: []}
    for s in range(1, steps + 1):
        own = {r: {k: v * (1 + rnd.uniform(-noise, noise)) for k, v in (WAITED if r == slow else OTHERS).items()}
               for r in (0, 1)}
        slowest = max(sum(v for k, v in p.items() if k != "cpu") for p in own.values())
        for r, p in own.items():
            mine = sum(v for k, v in p.items() if k != "cpu")
            out[r].append((s, 1, 1000.0 + 0.035 * s, p["data"], p["compute"], slowest - mine, p["optimizer"],
                           p["other"], p["cpu"]))
    return out


def _judged(slow: int, runq: dict):
    s = st.straggler(_job(slow))
    assert s is not None and s["ranks"] == [slow]
    held = st.host_held(s, runq, None)
    facts = {str(r): {} for r in (0, 1)}
    s = dict(s, host_held=held, facts=facts)
    s["cause"] = st.cause(s, facts)
    got = judge(Snapshot(sections={"run": {"ranks": [], "straggler": s}}), command="run", only={"RUN020", "RUN023"},
                when="run").findings
    return s, {f.id: f for f in got}


def test_rank0_waiting_for_a_cpu_is_the_hosts_and_the_output_path_reading_is_gone():
    """Round 16 wave 2 removed the 'own-output' reading (the stderr relay's CPU moved to the job's share where the
    straggler is rank 0): it rested on a guess (rank 0 writes the output; the relay copies every rank's stderr) and
    never fired on real jobs (the relay used 0.0 ms of CPU per second logging every step). Trigger: rank 0 waited
    10.5 ms per step more than rank 1 for a CPU: RUN023 (the host's), as on main before round 16. Quiet: the same
    wait with rank 1's run-queue rate alike (0.50 both): no host share, RUN020."""
    s, got = _judged(0, {0: 0.50, 1: 0.20})
    assert set(got) == {"RUN023"} and s["host_held"]["held"]
    assert "output_ms" not in s["host_held"] and s["cause"]["kind"] != "own-output"
    assert not hasattr(st, "OUTPUT_RANK")
    s, got = _judged(0, {0: 0.50, 1: 0.50})
    assert set(got) == {"RUN020"} and not s["host_held"]["held"]


# ---- the loader's batch count is dl["n"] + S.nb: one counter per batch (round 16, item 1)

def test_the_loaders_count_is_exact_across_due_steps_epochs_and_an_older_iterator(monkeypatch):
    """Batches on the fast path, a due step between them (S.nb moves into dl["n"]), a new epoch of the same loader
    (the count starts again), and an older iterator's batch (the step's, not the loader's): the loader's count
    dl["n"] + S.nb is each time what the loader gave, and S.nb the batches since the last due step."""
    from ddpdoctor.run import recorder

    from run_factory import hooked_recorder

    S, Base, Loader = hooked_recorder(monkeypatch)
    data = Loader(range(6))
    old = Base(data)
    it = Base(data)
    for _ in range(3):
        next(it)
    assert S.dl["n"] + S.nb == 3 and S.nb == 3
    recorder._sp_step_end(2, 1.0, 0.9)  # a due step: the step's batches start again, the loader's go on
    assert S.nb == 0 and S.dl["n"] + S.nb == 3
    next(it), next(old)  # the older iterator's batch: counted for the step, not for the loader
    assert S.nb == 2 and S.dl["n"] + S.nb == 4
    it = Base(data)  # a new epoch of the same loader
    next(it)
    assert S.dl["n"] + S.nb == 1 and S.nb == 3


# ---- bench_run --until-decided: more pairs of jobs while the decision cannot resolve and the budget allows (item 2)

def test_more_pairs_only_while_undecided_and_within_the_budget():
    undecided = {"decision": "cannot resolve at this noise", "wall": {"jobs_needed": 24}, "cpu": {"jobs_needed": 9}}
    go = br.more_pairs(undecided, elapsed_s=600, pairs_run=10, budget_s=900)  # 60 s a pair: a round of 2 is 120 s
    assert go["more"] and go["jobs_needed"] == 24 and go["rounds_that_fit"] == 2 and "~24 pairs" in go["why"]
    assert not br.more_pairs(undecided, elapsed_s=850, pairs_run=10, budget_s=900)["more"]  # no round fits
    assert not br.more_pairs(dict(undecided, decision="met"), elapsed_s=100, pairs_run=10, budget_s=900)["more"]
    assert not br.more_pairs(dict(undecided, decision="not met"), elapsed_s=100, pairs_run=10, budget_s=900)["more"]
    assert br.more_pairs({"decision": "cannot resolve at this noise"}, 100, 2, 900, per_round=1)["rounds_that_fit"] == 16


# ---- round 16 wave 2: the step before a sampled one on the light path; the bench's ranks' own run time per quad

def test_records_of_the_step_before_a_sampled_one_wait_and_are_written_at_the_end(monkeypatch, tmp_path):
    """The step before a sampled one takes the light path (recorder._step_light): no bracketed beacon write, its
    records (the run before it, its own wall time) wait in S.pre. Trigger: the job ends right there (_flush_run):
    they are written, every step 1..7 has its record and the loader's count holds every batch. Quiet: a step that
    is not due stays on the fast path and leaves S.pre alone."""
    from ddpdoctor.run import beacon, recorder

    S = recorder.S
    for name in type(S).__slots__:
        if hasattr(S, name):
            monkeypatch.setattr(S, name, getattr(S, name))
    w = beacon.Writer(str(tmp_path / "b"))
    clock = [100.0]
    for name, value in (("ring", True), ("spl", False), ("armed", False), ("spl_every", 8), ("sp", recorder.OTHER),
                        ("sp_t0", 100.0), ("nb", 0), ("pre", None), ("off", False), ("kind", "proc"), ("step", 1),
                        ("st", 100.0), ("sdm", 0.01), ("due", 7), ("due_step", 1), ("due_t", 100.0), ("writer", w),
                        ("main", recorder._ident()), ("dl", {"n": 0, "end": False}), ("nb_lim", 100)):
        setattr(S, name, value)
    recorder._bind_writer(w)
    monkeypatch.setattr(recorder, "_ARMED", [])
    monkeypatch.setattr(recorder, "_ARMED_PRE", [])
    monkeypatch.setattr(recorder._step_light, "__defaults__", (lambda: clock[0],))
    for step in range(2, 8):
        S.nb += 2
        clock[0] += 0.01
        seq = w.seq
        recorder._on_optimizer_step(None, (), {}, _time=lambda: clock[0])
        assert w.seq == seq  # no bracketed write: the fast path (2..6), then the light path (7)
        assert (S.pre is None) == (step < 7)
    assert S.spl and S.due == 8 and S.step == 7 and S.dl["n"] + S.nb == 12
    recorder._flush_run()
    assert S.pre is None and S.dl["n"] + S.nb == 12
    rows = beacon.expand(beacon.read(str(tmp_path / "b"))["ring"]["steps"])
    assert [r[0] for r in rows] == [2, 3, 4, 5, 6, 7] and sum(r[1] for r in rows) == 12
    assert abs(rows[-1][7] - 10.0) < 1e-6  # step 7's own wall time, ms


def test_the_ranks_run_time_per_step_is_paired_per_quad_in_opposite_orders():
    """_timeslice.balanced_tree_run: one log ratio per quad (pairs 2q, 2q+1 in opposite orders) of the ranks' run time
    per step. Trigger: b's ranks run 1% more per step in every turn: +1% per quad, the supervisor ('other') not
    counted. Quiet: a quad whose two pairs ran in the same order, or a turn without steps, gives no ratio."""
    import math

    ts = _load("_timeslice")
    slices = [("a", 0, 1, 0), ("b", 1, 2, 0), ("b", 2, 3, 1), ("a", 3, 4, 1),
              ("a", 4, 5, 2), ("b", 5, 6, 2), ("a", 6, 7, 3), ("b", 7, 8, 3)]
    run = [{"ranks": 1.0 * (1.01 if s[0] == "b" else 1.0), "other": 0.5 if s[0] == "b" else 0.0} for s in slices]
    steps = {"a": [100 if s[0] == "a" else 0 for s in slices], "b": [100 if s[0] == "b" else 0 for s in slices]}
    got = ts.balanced_tree_run(slices, run, steps, "a", "b")
    assert len(got) == 1 and abs(got[0] - math.log(1.01)) < 1e-12  # quad 1: pairs 2 and 3 both a-first
    steps["b"][1] = 0
    assert ts.balanced_tree_run(slices, run, steps, "a", "b") == []


def test_the_rank_run_decision_stands_beside_the_goals_with_the_pairs_it_needs():
    """decision(): the ranks' run time per quad gets its own interval and decision against the A/A control's same
    measure, and the pairs of jobs it needs for +-0.5%; the goal's decision (wall and CPU) is unchanged by it."""
    def fig(c, lo, hi, jobs=2):
        return {"overhead_pct": c, "ci95_pct": [lo, hi], "pairs": 20, "jobs": jobs, "interval_covers_jobs": True}
    work = {"commits": ["x"], "wall": fig(0.5, -1.0, 2.0), "cpu": fig(0.5, -1.0, 2.0),
            "balanced": {"wall": fig(0.5, -1.0, 2.0), "cpu": fig(0.5, -1.0, 2.0), "rank_run": fig(0.4, 0.1, 0.7)}}
    control = {"commits": ["x"], "wall": fig(0.0, -1, 1), "cpu": fig(0.0, -1, 1),
               "balanced": {"wall": fig(0.0, -1, 1), "cpu": fig(0.0, -1, 1), "rank_run": fig(0.0, -0.3, 0.3)}}
    dec = br.decision({"bare,run": work, "bare,bare": control})
    assert dec["decision"] == "cannot resolve at this noise"  # the goal's: wall and CPU straddle 1%
    assert dec["rank_run"]["decision"] == "met" and dec["rank_run"]["pairs_for_half_width_0_5"] == 1
    work["balanced"]["rank_run"] = fig(0.9, -0.6, 2.4, jobs=4)
    dec = br.decision({"bare,run": work, "bare,bare": control})
    assert dec["rank_run"]["decision"] == "cannot resolve at this noise"
    assert dec["rank_run"]["pairs_for_half_width_0_5"] == 9 * 4
    del work["balanced"]["rank_run"]
    assert "rank_run" not in br.decision({"bare,run": work, "bare,bare": control})
