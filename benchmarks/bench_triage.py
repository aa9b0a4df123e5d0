"""Benchmark: `ddpdoctor triage` on a synthetic multi-rank log against `grep -c PATTERN` on the same file.

Goal (issue 14): a 1 GB log triaged in <= 2x the time of `grep -c` for one pattern, in one
streaming pass, with peak RSS <= 100 MiB.

The log is 8 ranks of a torchrun job on 2 nodes: NCCL INFO start-up, then training progress
(loss dicts, tqdm frames, step lines, the odd warning) interleaved across ranks, then the failure
of the acceptance case (rank 5 OOM-killed; the other node's ranks time out). It is written under
the system temporary folder and deleted afterwards.

Both sides are timed as whole processes, alternated, after one warm-up read so the file is in the page
cache for both; the best of `--runs` and the median of the per-run ratios are printed (on a shared machine
the median of paired ratios is the steadier figure). Peak RSS is the triage process's ru_maxrss (the larger of
it and the search process it forks for a big file, reaped before it exits). Printed beside
them: `grep -c -F -f KEYWORDS` with the reader's own keyword list (what a grep doing the same job
costs), the machine's load average, and the CPU time (user + system) of both sides: on a loaded
machine the wall times of a multi-threaded triage and a single-threaded grep say little, while the
goal's ratio stays the wall-time one.

`--compare-with TREE` runs the same command from another checkout (say the round's start commit, `git worktree add`)
in the same loop, alternated with this tree's (grep, this tree, that tree, each run): on a loaded machine only figures
taken in the same minutes compare, and the CPU time ratios to grep's of both trees are printed; the verdicts must agree.

    python benchmarks/bench_triage.py [--size-mb 1024] [--runs 3] [--pattern 'Watchdog caught'] [--compare-with TREE]

`--glog SHARE` makes the log glog-heavy: SHARE of its noise lines are glog INFO lines ("I1207 ... gpu_compiler.cc:42] ..."),
each carrying the '.cc:' keyword (round 22: what that keyword costs, with `--compare-with` a tree without it).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from ddpdoctor import proctree  # noqa: E402 - the one way the doctor starts and ends processes


def noise_lines(rng: random.Random) -> list:
    out = []
    for r in range(8):
        for step in range(0, 400, 7):
            loss = 3.0 - step / 300 + rng.random() / 10
            out.append(f"[rank{r}]:{{'loss': {loss:.4f}, 'grad_norm': {0.8 + rng.random():.4f}, "
                       f"'learning_rate': {5e-5 - step * 1e-8:.3e}, 'epoch': {step / 400:.2f}}}\n")
            out.append(f"[rank{r}]: {step * 100 // 400:>3}%|{'#' * (step * 10 // 400):<10}| {step}/400 "
                       f"[{step // 60:02d}:{step % 60:02d}<{(400 - step) // 60:02d}:{(400 - step) % 60:02d},  "
                       f"{1.5 + rng.random():.2f}it/s]\n")
            out.append(f"[rank{r}]:step {step} | lr {3e-4 * (1 - step / 400):.2e} | loss {loss:.4f} | "
                       f"tokens/s {140000 + rng.randint(0, 20000)} | mem {30 + rng.random() * 2:.1f}GiB\n")
        out.append(f"[rank{r}]:/opt/venv/lib/python3.11/site-packages/torch/utils/checkpoint.py:295: FutureWarning: "
                   "`torch.cpu.amp.autocast(args...)` is deprecated. Please use `torch.amp.autocast('cpu', args...)` "
                   "instead.\n")
    return out


def startup() -> str:
    lines = []
    for r in range(8):
        host, dev, pid = ("gpu-a01", r, 3020 + r) if r < 4 else ("gpu-b02", r - 4, 4110 + r - 4)
        lines += [f"[rank{r}]:{host}:{pid}:{pid} [{dev}] NCCL INFO Bootstrap : Using eth0:10.1.0.{11 + r // 4}<0>\n",
                  f"[rank{r}]:{host}:{pid}:{pid} [{dev}] NCCL INFO NCCL version 2.20.5+cuda12.4\n",
                  f"[rank{r}]:{host}:{pid}:{pid + 51} [{dev}] NCCL INFO comm 0x55d1c2a{r}e0 rank {r} nranks 8 "
                  f"cudaDev {dev} nvmlDev {dev} busId {dev + 1}8000 commId 0x8f2c1e5d9a3b7c41 - Init COMPLETE\n"]
    return "".join(lines)


def failure() -> str:
    with open(os.path.join(ROOT, "fixtures", "triage", "acceptance_torchrun_2node_rank5_oom.log")) as fh:
        text = fh.read()
    return text


def glog_lines(rng: random.Random, n: int) -> list:
    """`n` INFO lines in glog's head ("I1207 12:00:01.123456  4242 file.cc:42] ", google/glog src/logging.cc
    LogMessage::Init), as XLA, TensorFlow, gRPC and Paddle write them: each carries the '.cc:' prefilter keyword."""
    files = ("gpu_compiler.cc", "service.cc", "pjrt_stream_executor_client.cc", "cuda_dnn.cc", "bfc_allocator.cc",
             "executor.cc", "client.cc", "rendezvous.cc")
    return [f"I1207 {10 + i % 12:02d}:{i % 60:02d}:{(i * 7) % 60:02d}.{rng.randint(0, 999999):06d} {4000 + i % 8:5d} "
            f"{files[i % len(files)]}:{100 + (i * 13) % 900}] step {i} compiled module jit_train_step "
            f"in {rng.random() * 3:.3f}s, {rng.randint(1, 64)} buffers\n" for i in range(n)]


def generate(path: str, size: int, seed: int = 1, glog: float = 0.0) -> None:
    """`glog`: the share of the noise lines that are glog INFO lines (0: none, the goal's log)."""
    rng = random.Random(seed)
    block_lines = noise_lines(rng)
    if glog > 0:
        block_lines += glog_lines(rng, int(len(block_lines) * glog / (1 - glog)) if glog < 1 else len(block_lines))
    rng.shuffle(block_lines)
    block = "".join(block_lines).encode()
    head, tail = startup().encode(), failure().encode()
    with open(path, "wb") as fh:
        fh.write(head)
        left = size - len(head) - len(tail)
        while left > 0:
            chunk = block[:left]
            fh.write(chunk)
            left -= len(chunk)
        if not block.endswith(b"\n"):
            fh.write(b"\n")
        fh.write(tail)


CPU = {}  # command name -> CPU seconds (user + system) of each run: beside the wall times, not the goal


def timed(cmd: list, env=None, name: str = "", cwd=None) -> tuple:
    """(wall seconds, peak RSS KiB of the child, stdout). Also records the child's CPU time under `name`."""
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    before = ru0.ru_maxrss
    t = time.perf_counter()
    out = proctree.run(cmd, capture_output=True, env=env, cwd=cwd)
    wall = time.perf_counter() - t
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    after = ru1.ru_maxrss
    if name:
        CPU.setdefault(name, []).append(ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime)
    return wall, max(after, before) if after > before else after, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--pattern", default="Watchdog caught collective operation timeout")
    ap.add_argument("--keep", action="store_true", help="keep the generated log (its path is printed)")
    ap.add_argument("--compare-with", metavar="TREE", help="another checkout of ddpdoctor, run alternated with this one")
    ap.add_argument("--glog", type=float, default=0.0, metavar="SHARE",
                    help="a glog-heavy log: SHARE (0-1) of the noise lines are glog INFO lines naming a .cc file")
    args = ap.parse_args()
    grep = shutil.which("grep")
    if grep is None:
        print("grep not found: no baseline", file=sys.stderr)
        return 2
    from ddpdoctor.facts.messages import ANCHORS   # the reader loads it on first use (no static name there)

    tmp = tempfile.mkdtemp(prefix="ddpdoctor-bench-triage-")
    path = os.path.join(tmp, "job.log")
    kw = os.path.join(tmp, "keywords")
    try:
        t0 = time.perf_counter()
        generate(path, args.size_mb << 20, glog=args.glog)
        with open(kw, "wb") as fh:
            fh.write(b"\n".join(ANCHORS) + b"\n")
        size = os.path.getsize(path)
        print(f"generated {size / (1 << 20):.0f} MiB in {time.perf_counter() - t0:.1f} s: {path}")
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed ddpdoctor has its .pyc files; so does this run
        triage = [sys.executable, "-m", "ddpdoctor", "triage", "--json", path]
        proctree.run([sys.executable, "-m", "ddpdoctor", "triage", "--json", kw], capture_output=True, env=env)
        other_env = None
        if args.compare_with:
            other = os.path.abspath(args.compare_with)
            # run from that tree's root: `python -m` puts the working folder first on sys.path, before PYTHONPATH
            other_env = dict(env, PYTHONPATH=other + os.pathsep + os.environ.get("PYTHONPATH", ""))
            proctree.run([sys.executable, "-m", "ddpdoctor", "triage", "--json", kw], capture_output=True, env=other_env,
                         cwd=other)
            where = proctree.run([sys.executable, "-c", "import ddpdoctor; print(ddpdoctor.__file__)"],
                                 capture_output=True, env=other_env, cwd=other).stdout.decode().strip()
            if not os.path.realpath(where).startswith(os.path.realpath(other) + os.sep):
                print(f"--compare-with {other}: its runs would import {where}, not that tree's code", file=sys.stderr)
                return 2
        proctree.run([grep, "-c", args.pattern, path], capture_output=True)  # warm the page cache
        from ddpdoctor.triage import reader

        fast = reader._hyperscan() is not None
        slow_env = dict(env, DDPDOCTOR_TRIAGE_NO_HYPERSCAN="1")
        g, t, gk, rss, verdict, tm = [], [], [], [], None, []
        for _ in range(args.runs):
            w, _, _ = timed([grep, "-c", args.pattern, path], name="grep")
            g.append(w)
            w, peak, out = timed(triage, env, name="triage", cwd=ROOT)
            t.append(w)
            rss.append(peak)
            verdict = out
            if other_env is not None:   # the other checkout's code, in the same minutes
                w, _, out = timed(triage, other_env, name="other", cwd=other)
                CPU.setdefault("other wall", []).append(w)
                theirs = [(f["id"], f["title"]) for f in json.loads(out.stdout)["findings"]]
                mine = [(f["id"], f["title"]) for f in json.loads(verdict.stdout)["findings"]]
                CPU.setdefault("other differs", []).append(theirs != mine)
            w, _, _ = timed([grep, "-c", "-F", "-f", kw, path])
            gk.append(w)
            if fast:  # the same command without the fast extra: one memmem pass per keyword
                w, _, out = timed(triage, slow_env)
                tm.append(w)
                same = json.loads(out.stdout)["findings"] == json.loads(verdict.stdout)["findings"]
                assert same, "the memmem fallback gave different findings"
        doc = json.loads(verdict.stdout)
        first = doc["findings"][0] if doc["findings"] else {}
        best_g, best_t, best_gk = min(g), min(t), min(gk)
        peak_mib = max(rss) / 1024
        print(f"load average: {open('/proc/loadavg').read().split()[:3] if os.path.exists('/proc/loadavg') else '?'}")
        print(f"grep -c '{args.pattern}':           {best_g:.2f} s (best of {args.runs}; all {[round(x, 2) for x in g]})")
        print(f"grep -c -F -f <{len(ANCHORS)} keywords>:      {best_gk:.2f} s (all {[round(x, 2) for x in gk]})")
        print(f"ddpdoctor triage --json:          {best_t:.2f} s (all {[round(x, 2) for x in t]}), "
              f"peak RSS {peak_mib:.0f} MiB")
        print(f"verdict: {first.get('id')} {first.get('title')}")
        print(f"prefilter: {'hyperscan (the fast extra)' if fast else 'memmem, one pass per keyword'}")
        if tm:
            print(f"without the fast extra (memmem):  {min(tm):.2f} s (all {[round(x, 2) for x in tm]}): "
                  f"{min(tm) / best_g:.2f}x grep -c")
        ratio = best_t / best_g if best_g else float("inf")
        print(f"ratio triage / grep -c:           {ratio:.2f}x (goal <= 2x)  "
              f"{'OK' if ratio <= 2 else 'MISSED'}")
        paired = sorted(b / a for a, b in zip(g, t))
        print(f"median of the {len(paired)} per-run ratios:  {statistics.median(paired):.2f}x "
              f"(medians: grep -c {statistics.median(g):.2f} s, triage {statistics.median(t):.2f} s)")
        print(f"ratio triage / grep -F keywords:  {best_t / best_gk:.2f}x")
        print(f"peak RSS:                         {peak_mib:.0f} MiB (goal <= 100 MiB)  "
              f"{'OK' if peak_mib <= 100 else 'MISSED'}"
              + ("  (the larger of both trees': a high-water mark of the reaped children)" if args.compare_with else ""))
        cg, ct = min(CPU["grep"]), min(CPU["triage"])
        print(f"CPU time (user+sys, best), for a loaded machine: grep -c {cg:.2f} s, triage {ct:.2f} s "
              f"({ct / cg:.2f}x; triage searches in a second process with 2 threads, so on free cores its wall "
              "time is below its CPU time); "
              f"medians {statistics.median(CPU['grep']):.2f} s and {statistics.median(CPU['triage']):.2f} s")
        if other_env is not None:
            co, wo = CPU["other"], CPU["other wall"]
            mine = sorted(t / g for t, g in zip(CPU["triage"], CPU["grep"]))
            theirs = sorted(t / g for t, g in zip(co, CPU["grep"]))
            print(f"CPU time, this tree vs {args.compare_with} (alternated): best {ct:.2f} s vs {min(co):.2f} s; per-run "
                  f"CPU ratios to grep -c, medians {statistics.median(mine):.2f}x vs {statistics.median(theirs):.2f}x "
                  f"(all {[round(x, 2) for x in mine]} vs {[round(x, 2) for x in theirs]}); wall best {best_t:.2f} s vs "
                  f"{min(wo):.2f} s; verdicts {'DIFFER' if any(CPU['other differs']) else 'the same'}")
        ok = first.get("id") == "LOG002" and "rank:5" in first.get("subjects", [])
        print(f"root cause named (rank 5, OOM killer): {'yes' if ok else 'NO'}")
        return 0 if ok else 1
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
