"""What `ddpdoctor run` costs a job, and how fast it localizes a stall.

A. Overhead: the same 2-rank Trainer job (fixtures/run/trainer_job.py, Gloo, torchrun) bare and
   under `ddpdoctor run`, alternated pair by pair in one run; per job the median steady optimizer-step
   time of rank 0 (steps after the first third, i.e. after DoctorCallback's measured steps), per pair
   the ratio run/bare, and the goal (<= 1%) on the median of the pairs' ratios; beside it the same for
   the ranks' main-thread CPU per step (time.thread_time), which the peer's waits do not move. Two jobs: a step that
   does work (`--width 1024 --batch 64`, an MLP: ~17 ms here) and the worst case for any per-step
   cost (`--width 0`, Linear(8, 1): ~2.5 ms, where Gloo and the scheduler of 2 shared cores move the
   step by +-20% from one job to the next, so its median says little; A' below is its cost).
B. Memory: each rank's peak RSS under `run` minus bare (the attach, preflight and DoctorCallback).
   Goal: <= 30 MiB.
A'. Per-event cost of the attach, in a child process (load-robust, unlike A on a shared machine): one
   beacon update, a wrapped collective against the bare call (a no-op stands for the collective), a
   DataLoader batch through the wrapped iterator against the bare one; then the per-step estimate
   for a step with 2 user-level collectives, 1 batch and 1 optimizer step, as a share of the bare step.
C. Detection latency: the rank-0-only barrier (fixtures/run/loop.py) under
   `ddpdoctor run --stall-after S`: from the last progress any rank made to the printed report.
   Goal: <= S + 2 s.

    python benchmarks/bench_run.py [--rounds 6] [--steps 600] [--tiny-steps 2000] [--width 1024 --batch 64] [--stall-after 5] [--latency-runs 2]
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


def trainer_round(under_run: bool, steps: int, tmp: str, width: int = 0, batch: int = 4) -> list:
    stats = os.path.join(tmp, f"stats-{'run' if under_run else 'bare'}-{len(os.listdir(tmp))}")
    job = torchrun(os.path.join(FIX, "trainer_job.py"), "--steps", str(steps), "--stats", stats,
                   "--width", str(width), "--batch", str(batch))
    cmd = [sys.executable, "-m", "ddpdoctor", "run", "--", *job] if under_run else job
    for attempt in (1, 2):  # torchrun --standalone now and then loses its free port to a neighbour: once more
        done = subprocess.run(cmd, cwd=ROOT, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=900)
        if done.returncode == 0:
            break
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-3:]
        print(f"job failed (exit {done.returncode}, attempt {attempt}): {' | '.join(tail)}", file=sys.stderr)
    else:
        raise SystemExit("the job failed twice; see above")
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


def overhead_ab(rounds: int, steps: int, tmp: str, width: int, batch: int) -> tuple:
    """`rounds` pairs (bare, run), the order flipped every other pair so that drift hits both alike.
    Returns the printed figures, the median bare step (ms) and the median peak RSS of each side."""
    pairs, cpu_pairs, rss = [], [], {"bare": [], "run": []}
    for i in range(rounds):
        got, cpu = {}, {}
        for under in ((False, True) if i % 2 == 0 else (True, False)):
            ranks = trainer_round(under, steps, tmp, width, batch)
            side = "run" if under else "bare"
            got[side] = ranks[0]["step_ms"] if ranks else None
            cpus = [x["cpu_ms"] for x in ranks if x.get("cpu_ms")]
            cpu[side] = statistics.mean(cpus) if cpus else None
            rss[side] += [x["maxrss_mb"] for x in ranks]
        if got.get("bare") and got.get("run"):
            pairs.append((got["bare"], got["run"]))
        if cpu.get("bare") and cpu.get("run"):
            cpu_pairs.append((cpu["bare"], cpu["run"]))
    ratios = sorted(r / b - 1 for b, r in pairs)
    cpu_ratios = sorted(r / b - 1 for b, r in cpu_pairs)
    bare_ms = statistics.median(b for b, _ in pairs)
    return {"width": width, "batch": batch, "bare_step_ms": round(bare_ms, 2),
            "run_step_ms": round(statistics.median(r for _, r in pairs), 2),
            "overhead_pct": round(100 * statistics.median(ratios), 2),
            "pair_overheads_pct": [round(100 * x, 1) for x in ratios],
            # how far two bare jobs differ here: an overhead inside this band is not measurable
            "bare_spread_pct": round(100 * (max(b for b, _ in pairs) / min(b for b, _ in pairs) - 1), 1),
            # the ranks' main-thread CPU per step (time.thread_time): what the attach adds to the rank's
            # own work, without the waits for the peer and the scheduler's placement that move the wall time
            "cpu_step_ms": {"bare": round(statistics.median(b for b, _ in cpu_pairs), 2),
                            "run": round(statistics.median(r for _, r in cpu_pairs), 2)} if cpu_pairs else None,
            "cpu_overhead_pct": round(100 * statistics.median(cpu_ratios), 2) if cpu_ratios else None,
            "cpu_pair_overheads_pct": [round(100 * x, 1) for x in cpu_ratios],
            "steps": steps}, bare_ms, {k: statistics.median(v) for k, v in rss.items()}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=6, help="pairs (bare, run) per job")
    p.add_argument("--width", type=int, default=1024, help="the hidden width of the job that does work")
    p.add_argument("--batch", type=int, default=64)
    # Seconds of steady steps, not a handful: in a sub-second job the first steps still share the
    # cores with the ranks' own start-up (preflight, the callback's first gather) and the parent's.
    p.add_argument("--steps", type=int, default=600, help="steps of the job that does work (~10 s here)")
    p.add_argument("--tiny-steps", type=int, default=2000, help="steps of the Linear(8, 1) job (~5 s here)")
    p.add_argument("--stall-after", type=float, default=5.0)
    p.add_argument("--latency-runs", type=int, default=2)
    args = p.parse_args()
    with open("/proc/loadavg") as fh:
        load = fh.read().split()[:3]
    tmp = tempfile.mkdtemp(prefix="ddpdoctor-bench-run-")
    work, _, rss = overhead_ab(args.rounds, args.steps, tmp, args.width, args.batch)
    tiny, step, _ = overhead_ab(args.rounds, args.tiny_steps, tmp, 0, 4)
    overheads = {"work": work, "tiny": tiny}
    lat = [latency(args.stall_after, tmp) for _ in range(args.latency_runs)]
    ev = event_costs(tmp)
    per_step_us = 2 * ev["collective_us"] + ev["batch_us"] + ev["publish_us"]
    result = {
        "loadavg": load,
        "overhead": dict(overheads, goal_pct=1.0, rounds=args.rounds),
        "event_costs": dict(ev, per_step_us=round(per_step_us, 1),
                            per_step_pct_of_tiny_step=round(100 * per_step_us / (1000 * step), 3)),
        "memory": {"bare_peak_rss_mb": round(rss["bare"], 1), "run_peak_rss_mb": round(rss["run"], 1),
                   "extra_mb": round(rss["run"] - rss["bare"], 1), "goal_mb": 30},
        "latency": {"stall_after_s": args.stall_after, "runs": lat,
                    "max_latency_s": max(x["latency_s"] for x in lat), "goal_s": args.stall_after + 2},
    }
    print(json.dumps(result, indent=2))
    ok = (overheads["work"]["overhead_pct"] <= 1.0 and rss["run"] - rss["bare"] <= 30
          and result["latency"]["max_latency_s"] <= args.stall_after + 2)
    print("goals met" if ok else "goal(s) missed", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
