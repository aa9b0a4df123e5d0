"""Round 17, issue 27: the host's share of a rank's wait is the run-queue delay on its step's path (the main thread, plus
its most-delayed compute thread), not every thread's delay summed. Pure: facts.steps.path_wait_s and host_held on
per-thread schedstat samples, no process.

The samples are one second of /proc/PID/task/*/schedstat (ns on a CPU, ns waiting for a CPU) built from the per-thread
rates suite17b recorded in round 17 wave 2 (docs/measured/suite.md, "The quiet twin under load"): rank 1 of
test_a_real_straggler_pinned_at_low_priority_stays_a_straggler's job at load ~7 (nice 10, a 200 ms sleep in backward;
main thread 0.183 s/s waiting, 0.020 s/s running; gloo_tcp_loop 0.382, pt_gloo_runloop 0.097 and 0.078 waiting, the
three running 0.009 s/s together), and the pinned-beside-a-hog trigger at load 5-8 (main 0.802 waiting, 0.027
running; gloo_tcp_loop 0.876, pt_gloo_runloop 0.266 and 0.244). The other rank's split per thread was not recorded,
only its sum (0.054 and 0.137 s/s): each test puts it on the side that makes its own assertion harder."""
import random

import pytest

from ddpdoctor.facts import steps as st
from ddpdoctor.pipeline.judge import judge
from ddpdoctor.pipeline.runner import load_all
from ddpdoctor.pipeline.snapshot import Snapshot

load_all()

NS = 10 ** 9
MAIN = 4242


def _sample(rates, base=None):
    """tid -> (run ns, wait ns) one second after `base` (tid -> the same), from tid -> (run s/s, wait s/s)."""
    base = base or {tid: (7 * NS, 3 * NS) for tid in rates}
    return base, {tid: (base.get(tid, (0, 0))[0] + int(r * NS), base.get(tid, (0, 0))[1] + int(w * NS))
                  for tid, (r, w) in rates.items()}


# rank 1 of the quiet twin: main, gloo_tcp_loop, pt_gloo_runloop x2 (their 0.009 s/s of CPU split 5/2/2)
TWIN = {MAIN: (0.020, 0.183), MAIN + 1: (0.005, 0.382), MAIN + 2: (0.002, 0.097), MAIN + 3: (0.002, 0.078)}
# the trigger's rank, pinned beside a hog: the Gloo threads' CPU not recorded; as little as the twin's
HOG = {MAIN: (0.027, 0.802), MAIN + 1: (0.005, 0.876), MAIN + 2: (0.002, 0.266), MAIN + 3: (0.002, 0.244)}


def _rate(rates):
    a, b = _sample(rates)
    return st.path_wait_s(a, b, MAIN, 1.0)


def _verdict(step_ms, cost_ms, steps=80):
    """A straggler verdict of a 2-rank job: rank 1's compute `cost_ms` longer at the same CPU, a `step_ms` step."""
    rnd = random.Random(0)
    own = {0: step_ms - cost_ms - 3.0, 1: step_ms - 3.0}
    out = {0: [], 1: []}
    for n in range(1, steps + 1):
        comp = {r: c * (1 + rnd.uniform(-0.01, 0.01)) for r, c in own.items()}
        for r in (0, 1):
            out[r].append((n, 1, 1000.0 + step_ms / 1000.0 * n, 1.0, comp[r], max(comp.values()) - comp[r], 1.0, 1.0,
                           20.0))
    s = st.straggler(out)
    assert s is not None and s["ranks"] == [1], s
    return s


def _judged(step_ms, cost_ms, rate, rate_others, facts=None):
    s = _verdict(step_ms, cost_ms)
    assert s["step_ms"] == pytest.approx(step_ms, rel=0.02) and s["cost_ms"] == pytest.approx(cost_ms, rel=0.02)
    h = st.host_held(s, {1: rate, 0: rate_others})
    s = dict(s, host_held=h, facts=facts or {"1": {}, "0": {}})
    s["cause"] = st.cause(s, s["facts"])
    got = judge(Snapshot(sections={"run": {"ranks": [], "straggler": s}}), command="run", only={"RUN020", "RUN023"},
                when="run").findings
    return h, {f.id for f in got}


def test_gloo_io_threads_that_mostly_sleep_are_not_on_the_path_and_the_nice_straggler_stays_a_straggler():
    """Quiet: the twin's 240.5 ms cost at a 267 ms step (bar 66.8 ms). The path is the main thread alone (the Gloo
    threads ran a quarter of its CPU): 0.183 x 267 = 49 ms to the host, 192 ms left to the job: RUN020. The old sum
    (0.740 s/s) charged 183 ms and left 57 ms: RUN023, the flake. The other rank's path taken as 0 (the least)."""
    got = _rate(TWIN)
    assert got["compute"] == 0 and got["path_s"] == pytest.approx(0.183, abs=1e-6)
    assert got["all_s"] == pytest.approx(0.740, abs=1e-6)  # what was charged before
    h, ids = _judged(267.0, 240.5, got["path_s"], 0.0)
    assert ids == {"RUN020"} and not h["held"] and h["job_ms"] > 150.0, h
    h_old, ids_old = _judged(267.0, 240.5, got["all_s"], 0.054)  # the sum: the same job read as the host's
    assert ids_old == {"RUN023"} and h_old["held"]
    # the busy-host cause reads runq_frac from the same measure: a sleeping rank is "waiting", not "busy-host"
    s = {"ranks": [1], "others": [0], "step_ms": 267.0, "cost_ms": 240.5, "part": "compute",
         "parts": {"compute": {"extra_ms": 200.0}}, "cpu_ms": {"straggler": 20.0, "others": 20.0}}
    f = {"sleeping_frac": 0.9, "running_frac": 0.1, "samples": 25, "load_per_cpu": 4.0, "runq_frac_others": 0.0}
    assert st.cause(s, {"1": dict(f, runq_frac=got["path_s"])})["kind"] == "waiting"
    assert st.cause(s, {"1": dict(f, runq_frac=got["all_s"])})["kind"] == "busy-host"  # the sum's reading


def test_a_rank_pinned_beside_a_hog_stays_held_by_the_host():
    """Trigger: cost 167.1 ms at a 214.2 ms step (bar 53.6 ms); the main thread waited 0.802 s/s. The other rank's
    whole sum (0.137) counted as its path (the most): (0.802 - 0.137) x 214.2 = 142 ms to the host, 25 ms left to the
    job: RUN023. The sum of the hog case's threads (2.19 s/s, more than the wall) is capped at the interval."""
    got = _rate(HOG)
    assert got["path_s"] == pytest.approx(0.802, abs=1e-6) and got["all_s"] > 2.0
    h, ids = _judged(214.2, 167.1, got["path_s"], 0.137)
    assert ids == {"RUN023"} and h["held"] and h["job_ms"] < h["bar_ms"], h
    busy_gloo = {**HOG, MAIN + 1: (0.027, 0.876)}  # had gloo_tcp_loop run like the main thread: on the path only
    got2 = _rate(busy_gloo)  # while the main thread was not runnable (1 - 0.027 - 0.802 = 0.171 s/s)
    assert got2["compute"] == 1 and got2["path_s"] == pytest.approx(0.802 + 0.171, abs=1e-6)


def test_an_openmp_heavy_ranks_wait_on_its_compute_threads_still_counts():
    """Trigger: a rank whose forward runs on 3 OpenMP workers as busy as its main thread (0.30 s/s each), which
    waited 0.5, 0.45 and 0.4 s/s for a CPU while the main thread waited 0.05. The path charges the main thread's wait
    and the most-delayed worker's (0.55 s/s, not the 1.4 of all): with the other rank at 0.10, 45 ms of a 50 ms cost
    at a 100 ms step are the host's: RUN023. The main thread alone (0.05) would have left the cost to the job.
    Quiet: the same workers waiting as little as the other rank's: RUN020."""
    omp = {MAIN: (0.30, 0.05), MAIN + 1: (0.30, 0.50), MAIN + 2: (0.29, 0.45), MAIN + 3: (0.31, 0.40),
           MAIN + 4: (0.004, 0.30)}  # the last one a Gloo I/O thread: not on the path
    got = _rate(omp)
    assert got["compute"] == 3 and got["path_s"] == pytest.approx(0.55, abs=1e-6)
    h, ids = _judged(100.0, 50.0, got["path_s"], 0.10)
    assert ids == {"RUN023"} and h["held"], h
    h, ids = _judged(100.0, 50.0, got["main_s"], 0.10)
    assert ids == {"RUN020"}, h
    calm = {**omp, MAIN + 1: (0.30, 0.05), MAIN + 2: (0.29, 0.04), MAIN + 3: (0.31, 0.05)}
    h, ids = _judged(100.0, 50.0, _rate(calm)["path_s"], 0.10)
    assert ids == {"RUN020"} and not h["held"], h


def test_a_thread_born_between_samples_counts_from_zero_and_missing_samples_read_none():
    a, b = _sample({MAIN: (0.5, 0.1)})
    b[MAIN + 9] = (int(0.5 * NS), int(0.2 * NS))  # a new worker, as busy as the main thread
    got = st.path_wait_s(a, b, MAIN, 1.0)
    assert got["compute"] == 1 and got["path_s"] == pytest.approx(0.3)
    assert st.path_wait_s(None, b, MAIN, 1.0) is None and st.path_wait_s(a, b, MAIN, 0.0) is None


def test_the_supervisor_adds_the_path_wait_up_per_rank_and_restarts_with_a_new_process():
    """Supervisor._path_wait: a counter per rank from its first sample (0.0), plus the path's wait between samples,
    read with runq_rates as before; a new process for the rank (a restart) adds nothing for the gap."""
    from ddpdoctor.run.supervisor import Supervisor

    sup = Supervisor(["true"])
    a, b = _sample(TWIN)
    assert sup._path_wait(1, MAIN, 100.0, a) == 0.0
    v = sup._path_wait(1, MAIN, 101.0, b)
    assert v == pytest.approx(0.183, abs=1e-6)
    sup.runq_series[1] = [(100.0, 0.0), (101.0, v)]
    assert sup._path_wait(1, MAIN + 50, 102.0, {MAIN + 50: (NS, NS)}) == pytest.approx(v)  # another pid: no gap charged
    assert sup._path_wait(1, MAIN, 103.0, None) is None


# Recorded here (round 17, load ~7.5 on 2 cores): /proc/PID/task/*/schedstat of one process 2.004 s apart, a torch CPU
# job with OMP_NUM_THREADS=2 (a 384x384 matmul and tanh, 20 per 10 ms sleep) and a thread of its own woken every 2 ms
# that does nothing (an I/O thread's pattern). tid -> (ns on a CPU, ns waiting for one); 1769 the main thread, 1895
# the OpenMP worker, 1894 the waking thread, 1791 and 1893 idle.
REC_A = {1769: (3840579898, 8018067767), 1791: (22617975, 89153214), 1893: (47228, 4146097),
         1894: (66890306, 3502904748), 1895: (1584875825, 5038993011)}
REC_B = {1769: (4293339242, 9529881871), 1791: (22617975, 89153214), 1893: (47228, 4146097),
         1894: (88094371, 4573488991), 1895: (2088973302, 6530417885)}


def test_a_recorded_openmp_worker_is_on_the_path_and_a_waking_thread_is_not():
    """The worker ran 0.25 s/s (the main thread 0.23) and waited 0.74 s/s: on the path. The waking thread ran 0.011 s/s
    and waited 0.53 s/s: not on it (before, its wait was charged too: 2.03 s of wait per second summed). The main
    thread's 0.75 plus the worker's 0.74 exceed the wall (round 17 charged the whole interval, 2.004 s, though the main
    thread ran 0.45 s of it): the main thread was runnable 1.96 of the 2.004 s, so at most 0.04 s of the worker's wait
    was not side by side with its own (round 18): 1.55 s on the path, never more than the wall less the main thread's
    run."""
    dt = 2.0039405822753906
    got = st.path_wait_s(REC_A, REC_B, 1769, dt)
    assert got["compute"] == 1 and got["compute_s"] == pytest.approx(1.4914, abs=1e-3)
    main_run = (REC_B[1769][0] - REC_A[1769][0]) / NS
    assert got["idle_s"] == pytest.approx(dt - main_run - got["main_s"], abs=1e-6) and got["idle_s"] < 0.05
    assert got["path_s"] == pytest.approx(got["main_s"] + got["idle_s"], abs=1e-6)
    assert got["path_s"] == pytest.approx(1.551, abs=1e-3) and got["path_s"] <= dt - main_run + 1e-9
    assert got["all_s"] / 2.004 > 2.0
    without_worker = {t: v for t, v in REC_B.items() if t != 1895}
    assert st.path_wait_s(REC_A, without_worker, 1769, 2.004)["compute"] == 0  # the waking thread alone: not compute


# Round 18, issue 27: waits side by side with the main thread's count once. Synthetic schedstat series, one sample a
# second, of a rank whose main thread and one OpenMP worker (as busy as it) are both delayed by the host.

def _series(rates, n=5):
    """n+1 cumulative samples one second apart, the same rates each second: [(t, {tid: (run ns, wait ns)})]."""
    base = {tid: (7 * NS, 3 * NS) for tid in rates}
    out = [(100.0, base)]
    for _ in range(n):
        out.append((out[-1][0] + 1.0, _sample(rates, out[-1][1])[1]))
    return out


def _path_rate(rates):
    """The supervisor's counter over the series (Supervisor._path_wait), read as a rate with runq_rates' reader."""
    from ddpdoctor.run.supervisor import Supervisor

    sup = Supervisor(["true"])
    for t, smp in _series(rates):
        sup.runq_series.setdefault(1, []).append((t, sup._path_wait(1, MAIN, t, smp)))  # as _sample_host keeps it
    return st.rates_over(sup.runq_series, 100.0)[1]


def test_a_worker_waiting_side_by_side_with_the_main_thread_is_counted_once():
    """Trigger of the overlap (an OpenMP team under a busy host, the main thread its master): the main thread is
    runnable the whole second (0.4 running, 0.6 waiting) and its worker waits 0.55 s/s at the same instants. The
    step lost 0.6 s/s, not 1.15 (round 17, capped at the wall: 1.0, all of the interval, though the main thread ran
    0.4 of it). With the other rank at 0.25 s/s and a 100 ms step that costs 40 ms (bar 25 ms): the host's share is
    35 ms, 5 ms left to the job: RUN023 either way; at a 70 ms cost the job keeps 35 ms: RUN020 (round 17 charged
    75 ms, the whole cost: RUN023)."""
    team = {MAIN: (0.40, 0.60), MAIN + 1: (0.40, 0.55), MAIN + 2: (0.003, 0.20)}  # + a Gloo I/O thread
    rate = _path_rate(team)
    assert rate == pytest.approx(0.60, abs=1e-6)
    h, ids = _judged(100.0, 40.0, rate, 0.25)
    assert ids == {"RUN023"} and h["held"], h
    h, ids = _judged(100.0, 70.0, rate, 0.25)
    assert ids == {"RUN020"} and not h["held"] and h["runq_ms"] == pytest.approx(35.0, abs=0.1), h
    h, ids = _judged(100.0, 70.0, 1.0, 0.25)  # what round 17's rule read here
    assert ids == {"RUN023"}, h


def test_a_main_thread_blocked_on_its_pool_has_the_pools_wait_counted_whole():
    """Quiet for the overlap cap (the waits are not side by side): the main thread runs the step's Python (0.2 s/s,
    waiting 0.3) and then sleeps on its pool (0.5 s/s not runnable), whose worker waits 0.3 s/s then: the step lost
    0.6 s/s, both waits. A rank whose main thread only waits on its pool (0.02 s/s running, no wait) has the
    worker's 0.7 counted whole."""
    serial_then_pool = {MAIN: (0.20, 0.30), MAIN + 1: (0.20, 0.30)}
    assert _path_rate(serial_then_pool) == pytest.approx(0.60, abs=1e-6)
    got = _rate(serial_then_pool)
    assert got["idle_s"] == pytest.approx(0.5, abs=1e-6) and got["compute"] == 1
    pool_only = {MAIN: (0.02, 0.0), MAIN + 1: (0.25, 0.70), MAIN + 2: (0.24, 0.65)}
    assert _path_rate(pool_only) == pytest.approx(0.70, abs=1e-6)
    h, ids = _judged(100.0, 50.0, _path_rate(pool_only), 0.10)
    assert ids == {"RUN023"} and h["held"], h
