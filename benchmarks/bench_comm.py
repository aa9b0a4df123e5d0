"""`ddpdoctor comm` against bare torch, interleaved in one run (issue 4).

1. Time to a verdict for 2 Gloo ranks: `ddpdoctor comm --cpu --nproc 2 --no-sweep` (rendezvous,
   init, barrier, checked all_reduce, all_gather, send/recv pair, judged and rendered) against
   `torchrun --standalone --nproc-per-node 2 bare.py`, a script doing one all_reduce. Goal <= 1.25x.
2. Bandwidth: the algbw we report against a bare torch.distributed timing loop under torchrun at
   the same sizes (same warm-up, same iteration counts, slowest rank's time). Goal >= 0.9x.

Medians over --runs interleaved repetitions, so load drift hits both sides alike.
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

BARE_ONE = """
import torch, torch.distributed as dist
from datetime import timedelta
dist.init_process_group("gloo", timeout=timedelta(seconds=30))
t = torch.ones(1024)
dist.all_reduce(t)
assert t[0].item() == dist.get_world_size()
dist.destroy_process_group()
"""

BARE_SWEEP = """
import json, sys, time, torch, torch.distributed as dist
from datetime import timedelta
from ddpdoctor.comm.metrics import iters_for
dist.init_process_group("gloo", timeout=timedelta(seconds=60))
rows = []
for nbytes in [int(s) for s in sys.argv[1].split(",")]:
    x = torch.ones(nbytes // 4)
    iters = iters_for(nbytes)
    dist.all_reduce(x)
    dist.barrier()
    t = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(x)
    rows.append((time.perf_counter() - t) / iters)
times = torch.tensor(rows, dtype=torch.float64)
dist.all_reduce(times, op=dist.ReduceOp.MAX)
if dist.get_rank() == 0:
    sizes = [int(s) for s in sys.argv[1].split(",")]
    print("BW " + json.dumps({n: n / s / 1e9 for n, s in zip(sizes, times.tolist())}))
dist.destroy_process_group()
"""


def timed(argv: list, env: dict) -> tuple:
    t = time.perf_counter()
    out = proctree.run(argv, env=env, capture_output=True, text=True, timeout=300)
    return time.perf_counter() - t, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--sizes", default="1M,16M,64M", help="bandwidth sizes (bytes or 1M-style)")
    args = ap.parse_args()
    from ddpdoctor.comm.metrics import parse_sizes

    sizes = parse_sizes(args.sizes)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
               TORCH_CPP_LOG_LEVEL="ERROR", OMP_NUM_THREADS="1")
    tmp = tempfile.mkdtemp(prefix="ddpdoctor-bench-")
    one, sweep = os.path.join(tmp, "bare_one.py"), os.path.join(tmp, "bare_sweep.py")
    open(one, "w").write(BARE_ONE)
    open(sweep, "w").write(BARE_SWEEP)
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    ours_cmd = [sys.executable, "-m", "ddpdoctor", "comm", "--cpu", "--nproc", "2", "--no-sweep", "--json"]
    bw_cmd = [sys.executable, "-m", "ddpdoctor", "comm", "--cpu", "--nproc", "2", "--no-pairs", "--json",
              "--sizes", ",".join(str(s) for s in sizes)]
    t_ours, t_bare, bw_ours, bw_bare = [], [], {s: [] for s in sizes}, {s: [] for s in sizes}
    for _ in range(args.runs):
        w, out = timed(ours_cmd, env)
        assert out.returncode == 0, out.stderr[-2000:]
        t_ours.append(w)
        w, out = timed(torchrun + [one], env)
        assert out.returncode == 0, out.stderr[-2000:]
        t_bare.append(w)
        _, out = timed(bw_cmd, env)
        for row in json.loads(out.stdout)["comm"]["bandwidth"]:
            bw_ours[row["bytes"]].append(row["algbw_gbps"])
        _, out = timed(torchrun + [sweep, ",".join(str(s) for s in sizes)], env)
        line = next(ln for ln in out.stdout.splitlines() if ln.startswith("BW "))
        for k, v in json.loads(line[3:]).items():
            bw_bare[int(k)].append(v)
    mo, mb = statistics.median(t_ours), statistics.median(t_bare)
    print(f"time to verdict, 2 gloo ranks: ddpdoctor comm --no-sweep {mo:.2f} s, bare torchrun all_reduce "
          f"{mb:.2f} s -> ratio {mo / mb:.2f} (goal <= 1.25)")
    ratios = []
    for s in sizes:
        o, b = statistics.median(bw_ours[s]), statistics.median(bw_bare[s])
        ratios.append(o / b)
        print(f"algbw {s >> 20:>4} MiB: ddpdoctor {o:.3f} GB/s, bare loop {b:.3f} GB/s -> ratio {o / b:.2f}")
    print(f"bandwidth ratio (median over sizes) {statistics.median(ratios):.2f} (goal >= 0.9); runs={args.runs}")
    import shutil

    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
