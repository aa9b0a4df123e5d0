"""How much ddpdoctor costs inside a training process.

A. preflight(): in a fresh process that already imported torch, the first call (which also imports
   ddpdoctor's modules) and later calls. Goal: <= 50 ms. Measured with bytecode cached (as an
   installed package has it) and, for reference, without (PYTHONDONTWRITEBYTECODE and a fresh cache).
B. DoctorCallback: the same 2-rank DDP Trainer run (Gloo, tiny BERT-MLM) under torchrun with and
   without the callback, runs interleaved; the median optimizer-step time over the steady steps
   (including the callback's 20 measured steps, and the steps after them, where its comm hook stays
   registered). Goal: overhead <= 3%.

    python benchmarks/bench_preflight.py [--runs 3] [--steps 80]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from ddpdoctor import proctree  # noqa: E402 - the one way the doctor starts and ends processes

PREFLIGHT_CHILD = r"""
import time, json, sys, torch
t0, c0 = time.perf_counter(), time.process_time()
import ddpdoctor
ddpdoctor.preflight(log=False)
first = (time.perf_counter() - t0) * 1000
first_cpu = (time.process_time() - c0) * 1000
again = []
for _ in range(20):
    t = time.perf_counter(); ddpdoctor.preflight(log=False); again.append((time.perf_counter() - t) * 1000)
loader = torch.utils.data.DataLoader(list(range(64)), batch_size=8, num_workers=1)
t = time.perf_counter(); ddpdoctor.preflight(dataloader=loader, log=False); with_loader = (time.perf_counter() - t) * 1000
print(json.dumps({"first": first, "first_cpu": first_cpu, "again": sorted(again)[len(again) // 2],
                  "with_loader": with_loader}))
"""


def child_env(bytecode: bool, cache: str) -> dict:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if bytecode:
        env["PYTHONPYCACHEPREFIX"] = cache
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="ddpdoctor-nocache-")
    return env


def bench_preflight(runs: int) -> dict:
    cache = tempfile.mkdtemp(prefix="ddpdoctor-pycache-")
    out = {}
    for label, bytecode in (("bytecode cached", True), ("no bytecode", False)):
        proctree.run([sys.executable, "-c", PREFLIGHT_CHILD], env=child_env(bytecode, cache), capture_output=True,
                       timeout=120)  # warm the OS cache (and the bytecode cache)
        samples = []
        for _ in range(runs):
            p = proctree.run([sys.executable, "-c", PREFLIGHT_CHILD], env=child_env(bytecode, cache),
                               capture_output=True, text=True, timeout=120)
            samples.append(json.loads(p.stdout.strip().splitlines()[-1]))
        out[label] = {k: round(statistics.median(s[k] for s in samples), 1) for k in samples[0]}
    return out


def trainer_run(mode: str, steps: int) -> list:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           os.path.join(ROOT, "benchmarks", "_bench_trainer_worker.py"), mode, str(steps)]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = proctree.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    line = [l for l in p.stdout.splitlines() if l.startswith("BENCH ")]
    if not line:
        raise RuntimeError(f"{mode} run failed:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    doc = json.loads(line[-1][6:])
    ends = doc["ends"]
    return [(b - a) * 1000 for a, b in zip(ends, ends[1:])], doc.get("callback_ms", 0.0)


def bench_callback(runs: int, steps: int) -> dict:
    per = {"baseline": [], "doctor": []}
    ratios, inside = [], []
    for _ in range(runs):
        pair = {}
        for mode in ("baseline", "doctor"):  # interleaved pairs: a slow phase of a shared machine hits both
            deltas, cb_ms = trainer_run(mode, steps)
            pair[mode] = statistics.median(deltas[4:])  # skip warm-up steps
            per[mode].append(pair[mode])
            if mode == "doctor":
                inside.append(cb_ms / max(1, len(deltas) + 1))
        ratios.append(pair["doctor"] / pair["baseline"])
    base, doc = statistics.median(per["baseline"]), statistics.median(per["doctor"])
    return {"baseline_step_ms": round(base, 2), "doctor_step_ms": round(doc, 2),
            "overhead": round(statistics.median(ratios) - 1, 4), "pair_ratios": [round(r, 3) for r in ratios],
            "inside_callback_ms_per_step": round(statistics.median(inside), 3),
            "runs": {k: [round(x, 2) for x in v] for k, v in per.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=80)
    ap.add_argument("--skip-callback", action="store_true")
    a = ap.parse_args()
    pf = bench_preflight(max(3, a.runs))
    print("A. preflight() in a process that imported torch (median of fresh processes, ms):")
    for label, r in pf.items():
        print(f"   {label:16s} first call {r['first']:6.1f} (CPU {r['first_cpu']:5.1f})   later calls "
              f"{r['again']:5.1f}   with a DataLoader {r['with_loader']:5.1f}")
    ok = pf["bytecode cached"]["first"] <= 50
    print(f"   goal <= 50 ms (first call, bytecode cached): {'met' if ok else 'NOT met'} on the wall clock; "
          f"CPU time {pf['bytecode cached']['first_cpu']:.1f} ms (load average now {os.getloadavg()[0]:.1f})")
    if a.skip_callback:
        return
    cb = bench_callback(a.runs, a.steps)
    print(f"B. DoctorCallback, 2-rank DDP Trainer on CPU/Gloo, {a.steps} steps, {a.runs} interleaved runs each:")
    print(f"   median step {cb['baseline_step_ms']} ms without, {cb['doctor_step_ms']} ms with; median of paired "
          f"ratios: overhead {cb['overhead']:+.1%} (goal <= 3%)")
    print(f"   paired ratios {cb['pair_ratios']}; per-run medians {cb['runs']}")
    share = cb["inside_callback_ms_per_step"] / cb["baseline_step_ms"]
    print(f"   time inside the callback's per-step events: {cb['inside_callback_ms_per_step']} ms per step "
          f"({share:.2%} of a step)")


if __name__ == "__main__":
    main()
