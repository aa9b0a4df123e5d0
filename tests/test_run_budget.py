"""Round 17 wave 2 (issue 27): the split's sampling period follows a cost budget (recorder._split_period,
recorder._cycle_cost). Pure: the recorder's hooks driven on a fake clock, no process."""
from __future__ import annotations

from ddpdoctor.facts import steps as st
from ddpdoctor.run import beacon, recorder


def _keep_state(monkeypatch, S) -> None:
    for name in type(S).__slots__:
        if hasattr(S, name):
            monkeypatch.setattr(S, name, getattr(S, name))


def test_the_period_keeps_the_cycle_within_the_budget_and_the_goals_bounds(monkeypatch):
    """k is the least power of two with cost / (k x step) <= SPLIT_BUDGET, unless the goals bound it: sampled steps
    at most SPLIT_MAX_PERIOD_S apart (20 in facts.steps' 3 s straggler window), every step after a step of
    SPLIT_EVERY_S or more."""
    S = recorder.S
    _keep_state(monkeypatch, S)
    S.spl_every = 0
    assert recorder.SPLIT_MAX_PERIOD_S * st.WINDOW <= st.MIN_WINDOW_S  # the bound is the straggler window's
    for cost in (5e-6, 40e-6, 125e-6, 1e-3, 0.1):
        S.sp_cost = cost
        for step_s in (0.0001, 0.0003, 0.001, 0.0024, 0.01, 0.024, 0.049):
            k = recorder._split_period(step_s)
            assert k & (k - 1) == 0 and 1 <= k <= recorder.SPLIT_MAX_K  # a power of two: ranks share sampled steps
            assert k * step_s <= recorder.SPLIT_MAX_PERIOD_S or k == 1
            if k < recorder.SPLIT_MAX_K and 2 * k * step_s <= recorder.SPLIT_MAX_PERIOD_S:
                assert cost / (k * step_s) <= recorder.SPLIT_BUDGET * (1 + 1e-9), (cost, step_s, k)  # within budget
            if k > 1:
                assert cost / (k // 2 * step_s) > recorder.SPLIT_BUDGET  # and the least such k
    # trigger: the dearer the cycle, or the shorter the step, the rarer the samples
    S.sp_cost = 40e-6
    assert recorder._split_period(0.001) == 16 and recorder._split_period(0.0001) == 256
    S.sp_cost = 400e-6
    assert recorder._split_period(0.001) == 128 and recorder._split_period(0.01) == 8  # 8: the 0.15 s bound
    # the prior is round 17's fixed rule (k x step >= 50 ms)
    S.sp_cost = recorder.SPLIT_COST_PRIOR_S
    assert recorder._split_period(0.022) == 4 and recorder._split_period(0.011) == 8
    # quiet: a long step samples the next one whatever the cost; a short one with a cheap cycle samples every step
    S.sp_cost = 0.1
    assert recorder._split_period(0.05) == 1 and recorder._split_period(0.2) == 1 and recorder._split_period(0.0) == 1
    S.sp_cost = 5e-6
    assert recorder._split_period(0.024) == 1
    S.spl_every = 4  # a fixed period (bench_run --split-every, --trace's 1) wins
    assert recorder._split_period(0.2) == 4


def test_cycle_cost_is_a_bounded_moving_average(monkeypatch):
    S = recorder.S
    _keep_state(monkeypatch, S)
    S.sp_cost, S.sp_cost_n = 100e-6, 0
    recorder._cycle_cost(20e-6)  # x SPLIT_HOOK_FACTOR
    want = 100e-6 + (20e-6 * recorder.SPLIT_HOOK_FACTOR - 100e-6) / 4
    assert abs(S.sp_cost - want) < 1e-12 and S.sp_cost_n == 1
    before = S.sp_cost
    recorder._cycle_cost(1.0)  # a preemption inside the bracket counts as 4x the estimate at most
    assert abs(S.sp_cost - (before + 3 * before / 4)) < 1e-12
    for _ in range(200):
        recorder._cycle_cost(30e-6)
    assert abs(S.sp_cost - 30e-6 * recorder.SPLIT_HOOK_FACTOR) < 1e-9


def _drive(monkeypatch, tmp_path, step_s: float, due_s: float, steps: int) -> list:
    """`steps` optimizer steps of `step_s` each (fake time.time), each _step_due call taking `due_s` of CPU (a fake
    time.thread_time, read on measured cycles only); the step numbers whose split was measured."""
    S = recorder.S
    _keep_state(monkeypatch, S)
    clock, pc = [100.0], [0.0]
    w = beacon.Writer(str(tmp_path / "b"))
    for name, value in (("ring", True), ("spl", True), ("spl_every", 0), ("sp", recorder.OTHER), ("sp_t", 100.0),
                        ("sp_t0", 100.0), ("sp_acc", [0.0] * recorder.NPARTS), ("sp_cpu", None), ("nb", 0),
                        ("cpu_step", 0), ("off", False), ("kind", "proc"), ("is_compiling", None), ("step", 0),
                        ("st", None), ("sdm", 0.0), ("due", 0), ("due_step", 0), ("due_t", 100.0), ("pre", None),
                        ("writer", w), ("main", recorder._ident()), ("fw", {}), ("dl", None), ("armed", True),
                        ("sp_cost", recorder.SPLIT_COST_PRIOR_S), ("sp_cost_n", 0), ("sp_due_s", 0.0),
                        ("sp_cyc", 0), ("sp_meas", False)):
        setattr(S, name, value)
    recorder._bind_writer(w)
    monkeypatch.setattr(recorder, "_framework_facts", lambda: {})
    monkeypatch.setattr(recorder, "_ARMED", [])
    monkeypatch.setattr(recorder, "_ARMED_PRE", [])

    def due_clock():  # _step_due reads it at its start and end: each read advances the path's cost
        pc[0] += due_s
        reads.append(recorder.S.step)
        return pc[0]

    monkeypatch.setattr(recorder._step_due, "__defaults__", (due_clock,))
    monkeypatch.setattr(recorder._sp_step_end, "__defaults__", (lambda: clock[0], lambda: 5.0, float("nan")))
    monkeypatch.setattr(recorder._step_light, "__defaults__", (lambda: clock[0],))
    measured, reads = [], []
    for step in range(1, steps + 1):
        if S.spl:
            measured.append(step)
        clock[0] += step_s
        recorder._on_optimizer_step(None, (), {}, _time=lambda: clock[0])
    cycles = recorder.S.sp_cyc
    assert cycles == len(measured) and len(reads) <= 4 * (cycles // recorder.SPLIT_COST_EVERY + 1)  # every 8th cycle
    assert recorder.S.sp_cost_n >= cycles // recorder.SPLIT_COST_EVERY - 2
    return measured


def test_short_steps_with_a_dear_cycle_sample_less_often(monkeypatch, tmp_path):
    """Trigger: 2 ms steps whose cycle bookkeeping costs 100 us (x SPLIT_HOOK_FACTOR: ~400 us a cycle of two due
    steps) settle at k = 64 (the budget asks 128; the 0.15 s bound allows 64), where the prior's k was 32; a cycle of
    9 us due steps settles at k = 8 (36 us a cycle). Each cycle stays within the budget, or at the bound."""
    dear = _drive(monkeypatch, tmp_path, 0.002, 100e-6, 3000)
    gaps = [b - a for a, b in zip(dear, dear[1:])]
    assert gaps[1] == 32 and gaps[-5:] == [64] * 5, gaps[:6]  # step 1, then every 32nd (the prior), then 64th
    cost = recorder.S.sp_cost
    assert 32 * 0.002 * recorder.SPLIT_BUDGET < cost <= 2 * 100e-6 * recorder.SPLIT_HOOK_FACTOR  # beyond k = 32's
    assert 64 * 0.002 <= recorder.SPLIT_MAX_PERIOD_S < 128 * 0.002
    monkeypatch.undo()
    cheap = _drive(monkeypatch, tmp_path, 0.002, 9e-6, 3000)
    gaps = [b - a for a, b in zip(cheap, cheap[1:])]
    assert gaps[-5:] == [8] * 5, gaps[-8:]
    assert recorder.S.sp_cost / (8 * 0.002) <= recorder.SPLIT_BUDGET


def test_long_steps_sample_every_step_whatever_the_cost(monkeypatch, tmp_path):
    """Quiet: steps of 200 ms (the straggler bench's injected delay) are all measured, however dear the cycle (the
    straggler's window fills at the rate of the steps), and so are 24 ms steps with a cheap cycle (5 us of
    bookkeeping a due step: 20 us a cycle, 0.08% of a step)."""
    assert _drive(monkeypatch, tmp_path, 0.2, 5e-3, 60) == list(range(1, 61))
    monkeypatch.undo()
    every = _drive(monkeypatch, tmp_path, 0.024, 5e-6, 400)
    assert every[-50:] == list(range(351, 401))


def test_the_budget_takes_the_moving_average_where_the_last_step_was_longer(monkeypatch):
    """The step that decides k is often the sampled one, whose own time carries the sampling's cost: with the moving
    average (S.sdm) shorter, k is the average's (trigger); a moving average longer than the last step, or none, is
    not used (quiet), and a long last step still samples the next one."""
    S = recorder.S
    _keep_state(monkeypatch, S)
    S.spl_every, S.sp_cost = 0, 250e-6
    assert recorder._split_period(0.003) == 32 and recorder._split_period(0.003, 0.0008) == 128  # 32: the 0.15 s bound
    assert recorder._split_period(0.0008, 0.003) == 128 == recorder._split_period(0.0008)
    assert recorder._split_period(0.003, 0.0) == 32
    assert recorder._split_period(0.06, 0.0008) == 1
