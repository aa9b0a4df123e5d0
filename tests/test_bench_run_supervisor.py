"""benchmarks/bench_run_supervisor.py's arithmetic (pure: recorded /proc text and samples, no process)."""
import os
from bench_modules import load

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
brs = load("bench_run_supervisor")

# /proc/PID/stat of a zombie supervisor (fields 14-17: utime 40, stime 4, cutime 3600, cstime 95 ticks); its
# command name holds a space and a ')', as a process may name itself
STAT = ("4156 (py thon) x) Z 4152 4156 3584 0 -1 4194560 9000 0 0 0 40 4 3600 95 20 0 1 0 3000 0 0 "
        "18446744073709551615 0 0 0 0 0 0 0 16781312 2 0 0 0 17 1 0 0 0 0 0")


def test_stat_times_reads_the_fields_after_the_last_parenthesis():
    t = brs.stat_times(STAT, 100.0)
    assert t == {"utime": 0.4, "stime": 0.04, "cutime": 36.0, "cstime": 0.95}


def test_figures_per_job_second_and_against_the_job():
    f = brs.figures({"utime": 0.4, "stime": 0.04, "cutime": 36.0, "cstime": 0.95}, 44.0)
    assert f["sup_cpu_s"] == 0.44 and f["job_cpu_s"] == 36.95
    assert f["sup_ms_per_job_s"] == 10.0
    assert f["sup_pct_of_job"] == round(100 * 0.44 / 36.95, 3)


def test_figures_without_a_job_cpu_or_a_wall_time_say_none():
    f = brs.figures({"utime": 0.1, "stime": 0.0, "cutime": 0.0, "cstime": 0.0}, 0.0)
    assert f["sup_ms_per_job_s"] is None and f["sup_pct_of_job"] is None


def test_steady_rate_leaves_out_the_start_and_the_end():
    # 1 s of CPU in the first 15 s (imports), then 3 ms a second, then 0.2 s in the report at the end
    series = [(t, 1.0 + 0.003 * max(0, t - 15)) for t in range(0, 41)]
    series[-1] = (40, series[-1][1] + 0.2)
    assert brs.steady_rate(series, 41.0) == 3.0


def test_steady_rate_of_a_run_too_short_is_none():
    assert brs.steady_rate([(1, 0.5), (2, 0.6), (16, 0.7)], 18.0) is None
