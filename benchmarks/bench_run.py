"""What `ddpdoctor run` costs a job, and how fast it localizes a stall.

A. Overhead: the same 2-rank Trainer job (fixtures/run/trainer_job.py, Gloo, torchrun) bare and
   under `ddpdoctor run`, alternated in one run; the median steady optimizer-step time of rank 0
   (steps after the first third, i.e. after DoctorCallback's measured steps). Goal: <= 1%.
B. Memory: each rank's peak RSS under `run` minus bare (the attach, preflight and DoctorCallback).
   Goal: <= 30 MiB.
A'. Per-event cost of the attach, in a child process (load-robust, unlike A on a shared machine): one
   beacon update, a wrapped collective against the bare call (a no-op stands for the collective), a
   DataLoader batch through the wrapped iterator against the bare one; then the per-step estimate
   for a step with 2 user-level collectives, 1 batch and 1 optimizer step, as a share of the bare step.
C. Detection latency: the rank-0-only barrier (fixtures/run/loop.py) under
   `ddpdoctor run --stall-after S`: from the last progress any rank made to the printed report.
   Goal: <= S + 2 s.

    python benchmarks/bench_run.py [--rounds 3] [--steps 150] [--stall-after 5] [--latency-runs 2]
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "fixtures", "run")


def env() -> dict:
    e = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "DDPDOCTOR_RUN_DIR"):
        e.pop(name, None)
    return e


def torchrun(*args: str) -> list:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", *args]


def trainer_round(under_run: bool, steps: int, tmp: str) -> list:
    stats = os.path.join(tmp, f"stats-{'run' if under_run else 'bare'}-{len(os.listdir(tmp))}")
    job = torchrun(os.path.join(FIX, "trainer_job.py"), "--steps", str(steps), "--stats", stats)
    cmd = [sys.executable, "-m", "ddpdoctor", "run", "--", *job] if under_run else job
    subprocess.run(cmd, cwd=ROOT, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=900,
                   check=True)
    out = []
    for path in sorted(glob.glob(stats + ".rank*.json")):
        with open(path) as fh:
            out.append(json.load(fh))
    return out


EVENT_CHILD = r"""
import json, time, torch
from ddpdoctor.run import recorder
def per(f, n):
    t = time.perf_counter()
    for _ in range(n): f()
    return (time.perf_counter() - t) / n * 1e6
noop = lambda *a, **k: None
x = torch.ones(4)
w = recorder._wrap_collective("all_reduce", noop)
publish = min(per(recorder._publish, 20000) for _ in range(3))
coll = min(per(lambda: w(x), 20000) for _ in range(3)) - min(per(lambda: noop(x), 20000) for _ in range(3))
base = torch.utils.data.dataloader._BaseDataLoaderIter
wrapped, bare = base.__next__, base.__next__.__wrapped__
data = list(range(20000))
def loop():
    for _ in torch.utils.data.DataLoader(data, batch_size=1): pass
base.__next__ = bare; tb = min(per(loop, 1) for _ in range(3)) / len(data)
base.__next__ = wrapped; tw = min(per(loop, 1) for _ in range(3)) / len(data)
print(json.dumps({"publish_us": publish, "collective_us": coll, "batch_us": tw - tb}))
"""


def event_costs(tmp: str) -> dict:
    d = tempfile.mkdtemp(dir=tmp)
    from ddpdoctor.run.supervisor import SITE_DIR

    e = dict(env(), DDPDOCTOR_RUN_DIR=d, DDPDOCTOR_RUN_PREFLIGHT="0")
    e["PYTHONPATH"] = SITE_DIR + os.pathsep + e["PYTHONPATH"]
    out = subprocess.run([sys.executable, "-c", EVENT_CHILD], env=e, capture_output=True, text=True, timeout=300)
    return {k: round(v, 2) for k, v in json.loads(out.stdout.strip().splitlines()[-1]).items()}


def latency(stall_after: float, tmp: str) -> dict:
    report = os.path.join(tmp, f"latency-{len(os.listdir(tmp))}.json")
    cmd = [sys.executable, "-m", "ddpdoctor", "run", "--stall-after", str(stall_after), "--on-stall", "stop",
           "--grace", "3", "--report", report, "--",
           *torchrun(os.path.join(FIX, "loop.py"), "--fault", "barrier")]
    subprocess.run(cmd, cwd=ROOT, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600)
    with open(report) as fh:
        rep = json.load(fh)
    ev = next(e for e in rep["run"]["events"] if e["kind"] == "stall")
    return {"latency_s": ev["latency_s"], "findings": ev["findings"]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--stall-after", type=float, default=5.0)
    p.add_argument("--latency-runs", type=int, default=2)
    args = p.parse_args()
    with open("/proc/loadavg") as fh:
        load = fh.read().split()[:3]
    tmp = tempfile.mkdtemp(prefix="ddpdoctor-bench-run-")
    bare, run = [], []
    for i in range(args.rounds):  # alternated, so drift in the machine's load hits both alike
        for under in ((False, True) if i % 2 == 0 else (True, False)):
            (run if under else bare).append(trainer_round(under, args.steps, tmp))
    step = {k: statistics.median(r[0]["step_ms"] for r in rounds if r and r[0]["step_ms"])
            for k, rounds in (("bare", bare), ("run", run))}
    rss = {k: statistics.median(x["maxrss_mb"] for r in rounds for x in r) for k, rounds in (("bare", bare), ("run", run))}
    overhead = step["run"] / step["bare"] - 1
    lat = [latency(args.stall_after, tmp) for _ in range(args.latency_runs)]
    ev = event_costs(tmp)
    per_step_us = 2 * ev["collective_us"] + ev["batch_us"] + ev["publish_us"]
    result = {
        "loadavg": load,
        "overhead": {"bare_step_ms": round(step["bare"], 2), "run_step_ms": round(step["run"], 2),
                     "overhead_pct": round(100 * overhead, 2), "goal_pct": 1.0, "rounds": args.rounds,
                     "steps": args.steps},
        "event_costs": dict(ev, per_step_us=round(per_step_us, 1),
                            per_step_pct_of_bare=round(100 * per_step_us / (1000 * step["bare"]), 3)),
        "memory": {"bare_peak_rss_mb": round(rss["bare"], 1), "run_peak_rss_mb": round(rss["run"], 1),
                   "extra_mb": round(rss["run"] - rss["bare"], 1), "goal_mb": 30},
        "latency": {"stall_after_s": args.stall_after, "runs": lat,
                    "max_latency_s": max(x["latency_s"] for x in lat), "goal_s": args.stall_after + 2},
    }
    print(json.dumps(result, indent=2))
    ok = (overhead <= 0.01 and rss["run"] - rss["bare"] <= 30
          and result["latency"]["max_latency_s"] <= args.stall_after + 2)
    print("goals met" if ok else "goal(s) missed", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
