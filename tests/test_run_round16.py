"""Round 16, issue 27: the straggler bench's Quiet goal can be decided by its default (and says what its healthy
steps can decide), and the batch fast path's allowance is a limit on the one batch counter. Pure: the bench's own
functions on recorded tallies, and the recorder's DataLoader hook on a stand-in iterator; no process."""
import importlib.util
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "benchmarks", f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


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
