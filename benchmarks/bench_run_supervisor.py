"""The `ddpdoctor run` supervisor's own CPU per second of job, against the job's CPU (issue 27).

On a host whose cores the ranks fill, every CPU-second the supervisor (the `ddpdoctor run` process: its
watch loop, its threads) spends is taken from the ranks: a wall cost the ranks' own CPU figures do not
show. This bench runs a healthy 2-rank Gloo job (fixtures/run/loop.py under torchrun, ~`--seconds` of
steps) under `ddpdoctor run` and reads, when the supervisor has exited but before it is reaped
(waitid WNOWAIT: its /proc/PID/stat still holds the totals), its own user+sys CPU (every thread; not its
children) and its children's (cutime+cstime: the launcher and the ranks, all reaped by then). Figures per run:

- `sup_cpu_s`: the supervisor's CPU; `job_cpu_s`: the job's (launcher + ranks); `wall_s`: the job's wall time;
- `sup_ms_per_job_s` = 1000 * sup_cpu_s / wall_s: the supervisor's CPU per second of job;
- `sup_pct_of_job` = 100 * sup_cpu_s / job_cpu_s: its share against the ranks' CPU in the same run;
- `steady_ms_per_s`: the watch loop's steady cost, from its main thread's CPU sampled once a second
  (/proc/PID/schedstat, ns) between 15 s after its start and 3 s before its end (no imports, no report).

Both are CPU times, not wall times: they depend far less on the host's load than a wall A/B does (a
loaded host stretches wall time, so per-job-second figures shrink a little with load; compare two trees in
the same minutes, alternating, as this bench does with --root). `--root DIR` measures another checkout
(e.g. `git archive main | tar -x -C DIR`): its ddpdoctor supervises, this tree's fixture is the job.
`--profile FILE` writes a cProfile of the supervisor (this tree only) for what each poll does.

    python benchmarks/bench_run_supervisor.py [--seconds 30] [--runs 3] [--root DIR ...] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

PYCACHE = os.path.join(tempfile.gettempdir(), "ddpdoctor-bench-pycache")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "fixtures", "run")
STEP_S = 0.0075
STEADY_SKIP_S = 15.0  # the steady window starts here (after the startup and supervisor.TREE_EARLY_S)  # the loop's step on this host, roughly: --seconds is turned into a step count with it


def stat_times(text: str, hz: float) -> dict:
    """utime, stime, cutime, cstime (s) from the text of /proc/PID/stat (the command name may hold spaces
    and parentheses: the fields after the last ')' are counted)."""
    rest = text[text.rindex(")") + 2:].split()
    # rest[0] is field 3 (state): utime is field 14 -> rest[11]
    utime, stime, cutime, cstime = (int(x) / hz for x in rest[11:15])
    return {"utime": utime, "stime": stime, "cutime": cutime, "cstime": cstime}


def figures(times: dict, wall_s: float) -> dict:
    """The run's figures from the supervisor's stat times at its exit and the job's wall time."""
    sup = times["utime"] + times["stime"]
    job = times["cutime"] + times["cstime"]
    return {"sup_cpu_s": round(sup, 3), "job_cpu_s": round(job, 3), "wall_s": round(wall_s, 2),
            "sup_ms_per_job_s": round(1000 * sup / wall_s, 2) if wall_s > 0 else None,
            "sup_pct_of_job": round(100 * sup / job, 3) if job > 0 else None}


def schedstat_s(pid: int) -> float:
    """The process's main thread's time on a CPU (s, ns resolution: /proc/PID/schedstat's first field), where
    /proc/PID/stat counts in clock ticks (10 ms: a 1 s sample would read 0 or 10 ms). The supervisor's watch
    loop runs on its main thread; its other threads (the straggler's host sampler, NVML's Xid watch) are
    in the totals (stat), not in this steady rate."""
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return float("nan")


def steady_rate(series: list, wall_s: float, skip_s: float = STEADY_SKIP_S, tail_s: float = 3.0):
    """ms of the supervisor's CPU per second between `skip_s` after its start (its imports, the first
    TREE_EARLY_S of walks) and `tail_s` before its end (the report): the watch loop's steady cost. None when
    the run is too short for two samples in that window."""
    inner = [(t, c) for t, c in series if skip_s <= t <= wall_s - tail_s]
    if len(inner) < 2 or inner[-1][0] <= inner[0][0]:
        return None
    return round(1000 * (inner[-1][1] - inner[0][1]) / (inner[-1][0] - inner[0][0]), 2)


def one_run(root: str, steps: int, profile: str = "") -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("OMP_NUM_THREADS", "1")
    # bytecode cached (outside the trees) as a user's install has it: without it every run compiles the
    # supervisor's ~100 modules (~0.8 s of its CPU where PYTHONDONTWRITEBYTECODE is set)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = os.path.join(PYCACHE, root.strip(os.sep).replace(os.sep, "_"))
    job = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           os.path.join(FIXTURES, "loop.py"), "--steps", str(steps)]
    head = [sys.executable] + (["-m", "cProfile", "-o", profile] if profile else []) + ["-m", "ddpdoctor", "run", "--"]
    t0 = time.monotonic()
    p = subprocess.Popen(head + job, env=env, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    import threading

    hz = os.sysconf("SC_CLK_TCK")
    errs: list = []
    reader = threading.Thread(target=lambda: errs.append(p.stderr.read()), daemon=True)
    reader.start()
    series = []  # (s since the start, the supervisor's own CPU s), once a second: its steady rate
    while True:
        try:
            got = os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT | os.WNOHANG)
        except ChildProcessError:
            got = None
        with open(f"/proc/{p.pid}/stat") as f:
            times = stat_times(f.read(), hz)
        if got is not None:
            break
        series.append((time.monotonic() - t0, schedstat_s(p.pid)))
        time.sleep(1.0)
    wall = time.monotonic() - t0
    rc = p.wait()
    reader.join(5)
    err = errs[0] if errs else b""
    out = figures(times, wall)
    out["steady_ms_per_s"] = steady_rate(series, wall)
    out["rc"] = rc
    if rc != 0:
        out["stderr_tail"] = err.decode(errors="replace")[-2000:]
    return out


def summary(runs: list) -> dict:
    ok = [r for r in runs if r.get("rc") == 0]
    if not ok:
        return {"runs": len(runs), "ok": 0}
    return {"runs": len(runs), "ok": len(ok),
            "sup_ms_per_job_s_median": round(statistics.median(r["sup_ms_per_job_s"] for r in ok), 2),
            "sup_pct_of_job_median": round(statistics.median(r["sup_pct_of_job"] for r in ok), 3),
            "steady_ms_per_s": [r.get("steady_ms_per_s") for r in ok],
            "sup_cpu_s": [r["sup_cpu_s"] for r in ok], "wall_s": [r["wall_s"] for r in ok]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--steps", type=int, default=0, help="the loop's steps (default: --seconds / %s)" % STEP_S)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--root", action="append", default=[], help="another checkout to measure (repeatable)")
    ap.add_argument("--profile", default="", help="cProfile the supervisor of one run of this tree into FILE")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    steps = a.steps or int(a.seconds / STEP_S)
    roots = [ROOT] + [os.path.abspath(r) for r in a.root]
    if a.profile:
        print(json.dumps(one_run(ROOT, steps, a.profile)))
        return
    res = {r: [] for r in roots}
    for i in range(a.runs):  # alternating: the trees share the same minutes of the host's load
        for r in roots:
            got = one_run(r, steps)
            res[r].append(got)
            print(json.dumps({"root": r, "run": i, **got}), flush=True)
    out = {r: summary(v) for r, v in res.items()}
    print(json.dumps(out, indent=1))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"steps": steps, "summary": out, "runs": res}, f, indent=1)


if __name__ == "__main__":
    main()
