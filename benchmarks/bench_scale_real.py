"""Time to the connectivity verdict with real Gloo ranks, 2 to 32, against bare torchrun (issue 15).

For each N, interleaved in one run (so load drift hits both alike), medians over --runs:

* ours: `ddpdoctor comm --cpu --nproc N --no-sweep --json` (launch, rendezvous, init, barrier,
  checked all_reduce, all_gather, the pair rounds, judged and rendered);
* bare: `python -m torch.distributed.run --standalone --nproc-per-node N bare.py`, a script doing
  init_process_group + one all_reduce + barrier.

Goal: ratio <= 1.0 at every N, pairs included. Then one check at 32 ranks: a rank that stalls in
the all_reduce phase is named (COMM002) within the run's deadline + 2 s.

    python benchmarks/bench_scale_real.py                     # N = 2,4,8,16,32, 3 runs each
    python benchmarks/bench_scale_real.py --n 2,8 --runs 5 --no-stall-check

/proc/loadavg is printed beside each figure: the machine has 2 cores.
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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from ddpdoctor import proctree  # noqa: E402 - the one way the doctor starts and ends processes

BARE = """
import torch, torch.distributed as dist
from datetime import timedelta
dist.init_process_group("gloo", timeout=timedelta(seconds=120))
t = torch.ones(1024)
dist.all_reduce(t)
assert t[0].item() == dist.get_world_size()
dist.barrier()
dist.destroy_process_group()
"""

STALL = """
import json, sys, time
from ddpdoctor.comm.api import report_for_section, run_local
n, deadline, victim = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
t0 = time.monotonic()
sec = run_local(nproc=n, backend="gloo", sizes="1K", deadline_s=deadline, phase_timeout_s=float(sys.argv[4]),
                sweep=False, rank_env={victim: {"DDPDOCTOR_COMM_FAULT": "stall@all_reduce"}})
elapsed = time.monotonic() - t0
found = [(f.id, list(f.subjects), dict(f.evidence).get("phase")) for f in report_for_section(sec).findings]
print("RESULT " + json.dumps({"elapsed": elapsed, "findings": found}))
"""


def load() -> str:
    try:
        return open("/proc/loadavg").read().split()[0]
    except OSError:
        return "?"


def timed(argv: list, env: dict, timeout: float) -> tuple:
    t = time.perf_counter()
    out = proctree.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
    return time.perf_counter() - t, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", default="2,4,8,16,32")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-stall-check", action="store_true")
    ap.add_argument("--stall-n", type=int, default=32)
    ap.add_argument("--json", default=None, help="write the rows here")
    args = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
               TORCH_CPP_LOG_LEVEL="ERROR", OMP_NUM_THREADS="1")
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    tmp = tempfile.mkdtemp(prefix="ddpdoctor-bench-")
    bare = os.path.join(tmp, "bare.py")
    with open(bare, "w", encoding="utf-8") as fh:
        fh.write(BARE)
    rows, status = [], 0
    for n in [int(x) for x in args.n.split(",")]:
        deadline = max(60, 6 * n)
        ours_cmd = [sys.executable, "-m", "ddpdoctor", "comm", "--cpu", "--nproc", str(n), "--no-sweep", "--json",
                    "--deadline", str(deadline)]
        bare_cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(n), bare]
        t_ours, t_bare, loads = [], [], []
        for i in range(args.runs):
            pair = [("ours", ours_cmd), ("bare", bare_cmd)]
            for name, cmd in (pair if i % 2 == 0 else pair[::-1]):  # alternate who goes first
                loads.append(float(load()) if load() != "?" else 0.0)
                w, out = timed(cmd, env, deadline + 60)
                if name == "ours":
                    doc = json.loads(out.stdout) if out.stdout.strip().startswith("{") else {}
                    if not (doc.get("comm") or {}).get("ok"):
                        print(f"  n={n}: comm run not ok: {out.stdout[-500:]} {out.stderr[-500:]}")
                        status = 1
                    t_ours.append(w)
                else:
                    if out.returncode != 0:
                        print(f"  n={n}: bare torchrun failed: {out.stderr[-500:]}")
                    t_bare.append(w)
        mo, mb = statistics.median(t_ours), statistics.median(t_bare)
        rows.append({"n": n, "ours_s": round(mo, 2), "bare_s": round(mb, 2), "ratio": round(mo / mb, 2),
                     "runs": args.runs, "load": round(statistics.median(loads), 2)})
        print(f"n={n:>3}: ddpdoctor comm --no-sweep {mo:6.2f} s, bare torchrun {mb:6.2f} s -> ratio {mo / mb:.2f} "
              f"(goal <= 1.0)  load {statistics.median(loads):.1f}", flush=True)
    if rows:
        top = max(max(r["ours_s"], r["bare_s"]) for r in rows) or 1
        print("time to verdict (o = ddpdoctor comm, b = bare torchrun), seconds:")
        for r in rows:
            print(f"  n={r['n']:>3} o {'#' * max(1, int(40 * r['ours_s'] / top)):<40} {r['ours_s']}")
            print(f"        b {'=' * max(1, int(40 * r['bare_s'] / top)):<40} {r['bare_s']}")
    stall = None
    if not args.no_stall_check:
        n = args.stall_n
        deadline, phase_timeout, victim = float(max(90, 4 * n)), 15.0, n // 2 + 1
        w, out = timed([sys.executable, "-c", STALL, str(n), str(deadline), str(victim), str(phase_timeout)], env,
                       deadline + 60)
        line = next((ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")), None)
        res = json.loads(line[7:]) if line else {"elapsed": w, "findings": []}
        named = any(fid == "COMM002" and f"rank:{victim}" in subj and ph == "all_reduce"
                    for fid, subj, ph in res["findings"])
        within = res["elapsed"] <= deadline + 2
        stall = {"n": n, "victim": victim, "deadline_s": deadline, "elapsed_s": round(res["elapsed"], 2),
                 "named": named, "within_deadline_plus_2": within, "load": load()}
        print(f"stall check, {n} ranks: rank {victim} stalled in all_reduce -> "
              f"{'named (COMM002)' if named else 'NOT NAMED: ' + str(res['findings'])[:300]} after "
              f"{res['elapsed']:.1f} s (deadline {deadline:.0f} s + 2: {'ok' if within else 'LATE'})  load {load()}")
        if not (named and within):
            status = 1
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"rows": rows, "stall": stall}, fh, indent=1)
    import shutil

    shutil.rmtree(tmp, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
