"""Verdicts over the `probe` section: what an instrumented Trainer run measured, judged.

The section comes from `ddpdoctor probe` (ddpdoctor/probe/analyze.py builds it from per-rank
records). Each check reads only numbers already in it, so a recorded report can be re-judged.
"""
from __future__ import annotations

import statistics
from typing import List, Optional

from ddpdoctor.model import error, info, warning
from ddpdoctor.model.registry import check

FAMILY = "probe"

# Thresholds, as fractions of the steady optimizer step.
COMM_SHARE = 0.25
DATA_SHARE = 0.30
STARTUP_SHARE = 0.5
STRAGGLER_RATIO = 1.3
STRAGGLER_MIN_MS = 5.0
SPAWN_RATIO = 1.2
LOW_EFFICIENCY = 0.5
# Local Gloo all_reduce between two ranks, measured on a 2-core CPU VM (docs/faults.md, "What we measured").
GLOO_LOCAL_BUSBW_GBPS = 1.3


def _probe(snap) -> dict:
    return snap.get("probe") or {}


def _modes(snap) -> dict:
    return _probe(snap).get("modes") or {}


def _main(snap) -> Optional[dict]:
    p = _probe(snap)
    return _modes(snap).get(p.get("main")) if p.get("main") else None


def _complete(mode: dict) -> List[dict]:
    return [r for r in mode.get("ranks") or [] if r.get("complete") and r.get("step_ms")]


def _compared_ranks(snap) -> List[dict]:
    """The main run's completed ranks when there are at least two to compare, else []."""
    main = _main(snap)
    if not main or (main.get("nproc") or 1) < 2:
        return []
    ranks = _complete(main)
    return ranks if len(ranks) >= 2 else []


def _ms(x: Optional[float]) -> str:
    return "?" if x is None else (f"{x:.1f} ms" if x < 1000 else f"{x / 1000:.2f} s")


def _pct(x: Optional[float]) -> str:
    return "?" if x is None else f"{100 * x:.0f}%"


def _cmd(snap) -> str:
    cfg = _probe(snap).get("config") or {}
    return cfg.get("command") or "ddpdoctor probe"


@check("PRB001", "probe-rank-failed", family=FAMILY, needs=("probe",), catalogue=("C3",))
def rank_failed(snap):
    """A rank of the probe run died or never reported.

    What it checks
        Every launched rank of every probe mode wrote its record. A rank that raised is named with
        its error, taken the way torch elastic's @record error files give the "Root Cause (first
        observed failure)"; ranks the launcher then stopped, or that were still running at the
        whole-run deadline, are listed too.

    Why it matters
        In DDP one failed rank leaves its peers blocked in the next collective until the process
        group timeout (30 minutes by default; pytorch#118369). The first failure is the one to fix;
        the others are consequences.

    Example
        `ddpdoctor probe --cpu --nproc 2 --inject crash@1=3`: rank 1 raises at step 3, and the
        launcher stops rank 0.

    Fix
        Fix the root-cause error shown for the named rank; rerun with
        `TORCH_DISTRIBUTED_DEBUG=DETAIL` for more context on collective mismatches.
    """
    for name, mode in _modes(snap).items():
        failures = list(mode.get("failures") or [])
        seen = {f.get("rank") for f in failures}
        for r in mode.get("ranks") or []:
            if r.get("error") and r.get("rank") not in seen:
                failures.append({"rank": r.get("rank"), "host": r.get("host"), "error": r["error"], "root_cause": True})
        reported = {r.get("rank") for r in mode.get("ranks") or [] if r.get("complete")}
        if not failures and mode.get("status") in (None, "ok"):
            continue
        root = next((f for f in failures if f.get("root_cause")), None) or \
            next((f for f in failures if f.get("error") and f.get("signal") not in ("SIGTERM", "SIGKILL")), None)
        nproc = mode.get("nproc") or 0
        others = sorted(r for r in set(range(nproc)) - reported if root is None or r != root.get("rank"))
        if root is not None:
            err = root.get("error") or {}
            msg = f"{err.get('type', 'error')}: {err.get('message', '')}".strip(": ")
            rank = root.get("rank")
            subjects = ([f"rank:{rank}"] if rank is not None else []) + ([f"host:{root['host']}"] if root.get("host") else [])
            tail = "" if not others else (f" Rank(s) {', '.join(map(str, others))} did not finish: the launcher "
                                          "stopped them after this failure.")
            who = f"rank {rank}" if rank is not None else "the run"
            yield error(
                f"{name}: {who} failed: {msg[:160]}",
                detail=(f"Root cause (first observed failure) in the '{name}' run: {who}"
                        f"{' on ' + root['host'] if root.get('host') else ''}"
                        f"{' (phase ' + root['phase'] + ')' if root.get('phase') else ''} exited"
                        f"{' with code ' + str(root['exitcode']) if root.get('exitcode') is not None else ''}: "
                        f"{msg}.{tail}"),
                fix=("Fix the error above in the named rank. For more context on a collective mismatch rerun with\n"
                     f"TORCH_DISTRIBUTED_DEBUG=DETAIL {_cmd(snap)}"),
                subjects=subjects,
                evidence={"mode": name, "rank": rank, "error": err, "exitcode": root.get("exitcode"),
                          "not_finished": others},
            )
        elif others:
            phases = {f.get("rank"): f.get("phase") for f in failures}
            live = {f.get("rank"): f.get("live") or {} for f in failures}

            def where(r):
                lv = live.get(r) or {}
                if lv.get("phase"):
                    held = f" for {lv['for_s']:.0f} s" if lv.get("for_s") is not None else ""
                    return f"rank {r} in {lv['phase']} of step {(lv.get('step') or 0) + 1}{held}"
                return f"rank {r} in {phases.get(r) or 'start-up'}"

            # In a collective a rank waits for others; outside one, it is the one they wait for.
            waiting = [r for r in others if (live.get(r) or {}).get("phase") in ("sync", "allreduce")]
            culprits = [r for r in others if r not in waiting and (live.get(r) or {}).get("phase")] if waiting else []
            named = culprits or others
            text = "; ".join(where(r) for r in others)
            if len(culprits) == 1:
                lv = live[culprits[0]]
                head = (f"rank {culprits[0]} is stuck in {lv['phase']} (step {(lv.get('step') or 0) + 1}); "
                        "the other ranks wait for it in collectives")
            elif culprits:
                head = f"ranks {', '.join(map(str, culprits))} are stuck outside collectives; the others wait for them"
            else:
                head = f"rank(s) {', '.join(map(str, others))} did not report"
            yield error(
                f"{name}: {head} ({mode.get('status')})",
                detail=(f"The '{name}' run ended with status {mode.get('status')!r} after {mode.get('wall_s', '?')} s; "
                        f"{len(reported)} of {nproc} ranks reported. Last seen: {text}. They were stopped."),
                fix=(f"Look at what rank {named[0]} does in that phase (py-spy dump --pid <pid>), or rerun with a longer "
                     f"deadline to see whether it is slow or stuck: {_cmd(snap)} --deadline 600"),
                subjects=[f"rank:{r}" for r in named],
                evidence={"mode": name, "status": mode.get("status"), "reported": sorted(reported),
                          "phases": {str(k): v for k, v in phases.items()},
                          "live": {str(k): v for k, v in live.items() if v}},
            )


@check("PRB002", "trainer-not-distributed", family=FAMILY, needs=("probe",), catalogue=("A1", "A5"))
def trainer_not_distributed(snap):
    """Trainer did not really run as N-rank DDP, or every rank thinks it is local process 0.

    What it checks
        In each probe mode launched with several ranks, every rank's `TrainingArguments` reports
        `parallel_mode == distributed` and `world_size` equal to the number of ranks launched, and
        the ranks sharing a host have distinct local process indices.

    Why it matters
        Trainer (through accelerate's PartialState) decides on DDP from the environment a launcher
        sets: LOCAL_RANK, WORLD_SIZE. Without it each process trains alone on the whole dataset,
        doing N times the work (transformers PR#41382 removed the `local_rank` argument that
        scripts used to pass). Under `torch.multiprocessing.spawn` with RANK/WORLD_SIZE set by
        hand, LOCAL_RANK is unset: every rank believes it is local process 0, so "local main
        process only" work (dataset preparation, logging) runs on every rank.

    Example
        `mp.spawn(train, nprocs=4)` where `train` sets RANK, WORLD_SIZE and MASTER_* itself.

    Fix
        Launch with `torchrun --nproc-per-node N train.py` (or `accelerate launch`), which sets
        LOCAL_RANK, LOCAL_WORLD_SIZE and the rest for every process.
    """
    for name, mode in _modes(snap).items():
        nproc = mode.get("nproc") or 1
        ranks = _complete(mode) or [r for r in mode.get("ranks") or [] if r.get("trainer")]
        if nproc < 2 or mode.get("dp") or not ranks:
            continue
        wrong = [r for r in ranks if (r.get("trainer") or {}).get("world_size") not in (None, nproc)
                 or (r.get("trainer") or {}).get("parallel_mode") not in (None, "distributed")]
        if wrong:
            r = wrong[0]
            t = r.get("trainer") or {}
            yield error(
                f"{name}: Trainer ran with world_size={t.get('world_size')} ({t.get('parallel_mode')}) on {nproc} launched ranks",
                detail=(f"{len(wrong)} of {len(ranks)} ranks did not join a {nproc}-rank DDP job: each trained on its own, "
                        "repeating the same work. Trainer reads LOCAL_RANK/WORLD_SIZE from the environment a launcher sets."),
                fix="torchrun --nproc-per-node %d train.py   # sets RANK, LOCAL_RANK, WORLD_SIZE for every process" % nproc,
                subjects=[f"rank:{x.get('rank')}" for x in wrong] + ["arg:parallel_mode", "LOCAL_RANK"],
                evidence={"mode": name, "trainer": t, "nproc": nproc},
            )
            continue
        by_host: dict = {}
        for r in ranks:
            by_host.setdefault(r.get("host"), []).append(r)
        for host, group in by_host.items():
            locals_ = [(r.get("trainer") or {}).get("local_process_index") for r in group]
            if len(group) > 1 and None not in locals_ and len(set(locals_)) < len(group):
                yield warning(
                    f"{name}: {len(group)} ranks on {host} all think they are local process {locals_[0]}",
                    detail=(f"Local process indices seen: {locals_}. LOCAL_RANK was not set for these processes "
                            f"(LOCAL_RANK={(group[0].get('env') or {}).get('LOCAL_RANK') or 'unset'}), "
                            "so work meant for the local main process only (dataset preparation, logs, "
                            "`main_process_first` blocks) runs on every rank, and log lines are duplicated."),
                    fix=f"torchrun --nproc-per-node {len(group)} train.py   # instead of torch.multiprocessing.spawn with hand-set env",
                    subjects=[f"host:{host}"] + [f"rank:{r.get('rank')}" for r in group] + ["LOCAL_RANK"],
                    evidence={"mode": name, "local_process_index": locals_},
                )


@check("PRB003", "startup-dominates", family=FAMILY, needs=("probe",))
def startup_dominates(snap):
    """Start-up, not training, takes most of a run this short.

    What it checks
        In the main probe mode, the time from launch to the end of the first step (interpreters,
        `import transformers`, rendezvous and init_process_group, model build and move, DDP wrap
        with its parameter broadcast, first step) against the whole run of the requested steps;
        and, from the 1-rank baseline, after how many steps N ranks win once start-up is counted.

    Why it matters
        A 20-step comparison of DataParallel and DDP (the original question) mostly times start-up:
        N interpreters, N CUDA contexts, NCCL initialisation. Trainer's `train_runtime` and
        `train_samples_per_second` include it. Compare samples/s after warm-up instead.

    Example
        `max_steps=20` with BERT on 4 GPUs: 4m16s under DDP against 2m47s under DataParallel.

    Fix
        Judge throughput on the steady state (the probe's samples/s column), or run enough steps
        to pass the break-even point; keep start-up out of timed comparisons.
    """
    main = _main(snap)
    if not main or not main.get("startup_s") or not main.get("step_ms"):
        return
    steps = (_probe(snap).get("config") or {}).get("steps") or 0
    train_s = steps * main["step_ms"] / 1000.0
    share = main["startup_s"] / (main["startup_s"] + train_s) if (main["startup_s"] + train_s) else 0
    sc = _probe(snap).get("scaling") or {}
    be = sc.get("break_even_steps")
    if share < STARTUP_SHARE and not (be and steps and be > steps):
        return
    r0 = max(_complete(main), key=lambda r: r.get("to_first_step_s") or 0, default={})
    parts = r0.get("startup_s") or {}
    top = ", ".join(f"{k.replace('_', ' ')} {v:.2f} s" for k, v in sorted(parts.items(), key=lambda kv: -kv[1])[:4])
    be_text = ""
    if "break_even_steps" in sc:
        if be is None:
            be_text = " Against the 1-rank baseline, the N-rank run never catches up: it is not faster per sample."
        elif be == 0:
            be_text = f" {main.get('nproc')} ranks are ahead of the 1-rank baseline from the first step."
        else:
            be_text = (f" Against the 1-rank baseline, {main.get('nproc')} ranks finish the same samples sooner only "
                       f"after {be} optimizer steps.")
    yield warning(
        f"start-up is {_pct(share)} of a {steps}-step run ({main['startup_s']:.1f} s before the first step ended)",
        detail=(f"Steady steps take {_ms(main['step_ms'])}, so {steps} steps train for {train_s:.2f} s after "
                f"{main['startup_s']:.1f} s of start-up (slowest rank: {top}).{be_text} Wall-clock totals and "
                "Trainer's train_samples_per_second of a run this short measure start-up, not DDP."),
        fix=("Compare steady-state samples/s (the probe's table), or time a longer run:\n"
             f"{_cmd(snap)} --steps {max(steps * 5, (be or 0) * 2, 100)}"),
        subjects=[],
        evidence={"startup_s": main["startup_s"], "startup_phases_s": parts, "steps": steps,
                  "step_ms": main["step_ms"], "break_even_steps": be},
    )


@check("PRB004", "comm-bound", when=("static", "step"), family=FAMILY, needs=("probe",), catalogue=("F6", "B1"))
def comm_bound(snap):
    """The step waits on gradient all-reduce for a large share of its time.

    What it checks
        In the main mode, the exposed all-reduce time (after the last gradient bucket was launched,
        less the time spent waiting for a slower peer to launch its own) as a share of the steady
        step, on every rank; and the bus bandwidth the all-reduce reached (nccl-tests' busbw =
        algbw x 2(n-1)/n) against what the transport should give.

    Why it matters
        DDP overlaps the all-reduce with backward; what is left exposed adds directly to every
        step. When every rank waits, the interconnect (or its configuration) is the bottleneck, not
        a straggler: P2P disabled, NCCL falling back to sockets, a wrong interface.

    Example
        BERT-base on two GPUs without P2P: 440 MB of gradients cross PCIe through host memory on
        every step.

    Fix
        Amortise it: a larger per-device batch or `gradient_accumulation_steps` (one all-reduce per
        optimizer step); tune `ddp_bucket_cap_mb`. Check the link with `ddpdoctor comm`.
    """
    ranks = _compared_ranks(snap)
    if not ranks:
        return
    shares = []
    for r in ranks:
        c = r.get("comm") or {}
        exposed = (r.get("phases_ms") or {}).get("allreduce", 0.0)
        if c.get("peer_wait_ms") is not None:
            exposed = max(0.0, exposed - c["peer_wait_ms"])
        shares.append(exposed / r["step_ms"])
    if min(shares) < COMM_SHARE:
        return
    c0 = ranks[0].get("comm") or {}
    busbw = c0.get("busbw_gbps")
    expected = _probe(snap).get("expected_busbw_gbps")
    backend = "nccl" if str(ranks[0].get("device", "")).startswith("cuda") else "gloo"
    if expected is None and backend == "gloo":
        expected = GLOO_LOCAL_BUSBW_GBPS
    bw_text = ""
    if busbw is not None:
        bw_text = f" The all-reduce reached {busbw:.2f} GB/s bus bandwidth"
        if expected:
            source = ("a bare all_reduce of the same size reached on these ranks (ddpdoctor comm)"
                      if _probe(snap).get("comm_reference") else "local Gloo typically reaches (measured on a 2-core VM)")
            bw_text += f" against {expected:.2f} GB/s that {source} ({_pct(busbw / expected)})"
        bw_text += "."
    yield warning(
        f"communication-bound: the exposed all-reduce is {_pct(min(shares))}-{_pct(max(shares))} of every step",
        detail=(f"Each optimizer step all-reduces {c0.get('bytes_per_round') or '?'} bytes in "
                f"{c0.get('calls_per_step') or '?'} bucket call(s); what does not overlap with backward is "
                f"{_pct(min(shares))} or more of the step on every rank, so no single straggler explains it.{bw_text}"),
        fix=("Amortise the all-reduce over more work per step, e.g.\n"
             "TrainingArguments(per_device_train_batch_size=<larger>, gradient_accumulation_steps=4, ddp_bucket_cap_mb=100)\n"
             "and check the link itself: ddpdoctor comm" + (" --cpu" if backend == "gloo" else "")),
        subjects=[f"rank:{r.get('rank')}" for r in ranks],
        evidence={"shares": [round(s, 4) for s in shares], "busbw_gbps": busbw, "expected_busbw_gbps": expected,
                  "bytes_per_round": c0.get("bytes_per_round")},
    )


@check("PRB005", "input-bound", when=("static", "step"), family=FAMILY, needs=("probe",), catalogue=("E7", "E1"))
def input_bound(snap):
    """A rank spends a large share of each step waiting for data.

    What it checks
        Per rank of each probe mode, the steady-state share of the optimizer step spent in
        `next(dataloader)` (the Trainer's batch fetch), against 30%.

    Why it matters
        The accelerator idles while the batch is read, decoded and tokenized. In DDP one slow
        loader also holds back every other rank at the next collective, so one rank's input
        problem becomes everyone's.

    Example
        An HDF5 dataset that tokenizes in `__getitem__` with `dataloader_num_workers=0`.

    Fix
        Load in parallel and keep workers alive: `dataloader_num_workers=2`,
        `dataloader_persistent_workers=True`, `dataloader_pin_memory=True` on GPU; pre-tokenize.
    """
    for name, mode in _modes(snap).items():
        for r in _complete(mode):
            share = (r.get("shares") or {}).get("data", 0.0)
            if share < DATA_SHARE:
                continue
            workers = (r.get("config") or {}).get("workers")
            yield warning(
                f"{name}: rank {r.get('rank')} is input-bound: {_pct(share)} of each step waits for data",
                detail=(f"Rank {r.get('rank')} waits {_ms((r.get('phases_ms') or {}).get('data'))} per "
                        f"{_ms(r['step_ms'])} step for its batches (dataloader_num_workers={workers})."
                        + (" The other ranks wait for it at the next collective." if (mode.get('nproc') or 1) > 1 else "")),
                fix=("TrainingArguments(dataloader_num_workers=2, dataloader_persistent_workers=True)  "
                     "# and pre-tokenize, or make __getitem__ cheaper"),
                subjects=[f"rank:{r.get('rank')}"] + ([f"host:{r['host']}"] if r.get("host") else []) +
                         ["arg:dataloader_num_workers"],
                evidence={"mode": name, "data_ms": (r.get("phases_ms") or {}).get("data"), "step_ms": r["step_ms"],
                          "share": share, "workers": workers},
            )


@check("PRB006", "probe-cpu-oversubscribed", family=FAMILY, needs=("probe",), catalogue=("A7", "D3"))
def cpu_oversubscribed(snap):
    """The ranks on a host run more compute threads than it has cores.

    What it checks
        Per probe mode and host: the sum over local ranks of `torch.get_num_threads()` as each rank
        really ran (after torchrun or accelerate adjusted OMP_NUM_THREADS), against the usable
        cores (affinity and cgroup quota).

    Why it matters
        Each rank's intra-op pool spins on every core it was given; N ranks with all cores each
        fight for the same cores and every op slows down. We measured 53-57 ms per step under
        `mp.spawn` (OMP_NUM_THREADS unset, accelerate sets it to the core count) against 16 ms under
        torchrun, which sets OMP_NUM_THREADS=1 (pytorch#85604).

    Example
        Two ranks on a 2-core machine, each with 2 threads.

    Fix
        `OMP_NUM_THREADS=<cores / ranks per host>` in the launch environment, or launch with
        torchrun, which sets it to 1 when it starts several processes per node.
    """
    for name, mode in _modes(snap).items():
        by_host: dict = {}
        for r in mode.get("ranks") or []:
            if (r.get("threads") or {}).get("torch"):
                by_host.setdefault(r.get("host"), []).append(r)
        for host, group in by_host.items():
            threads = [r["threads"]["torch"] for r in group]
            cores = max((r["threads"].get("usable_cpus") or 0) for r in group)
            if not cores or sum(threads) <= cores or len(group) < 2 and threads[0] <= cores:
                continue
            per_rank = max(1, int(cores // len(group)))
            omp = sorted({str(r["threads"].get("omp_env_at_start")) for r in group})
            yield warning(
                f"{name}: {len(group)} ranks on {host} run {sum(threads)} threads on {cores:g} cores",
                detail=(f"torch.get_num_threads() per rank: {threads}; OMP_NUM_THREADS at start: {', '.join(omp)}. "
                        f"With more threads than cores the ranks' thread pools preempt each other"
                        + (f"; steady step {_ms(_complete(mode)[0]['step_ms'])}." if _complete(mode) else ".")),
                fix=f"OMP_NUM_THREADS={per_rank} torchrun --nproc-per-node {len(group)} train.py",
                subjects=["OMP_NUM_THREADS", f"host:{host}"] + [f"rank:{r.get('rank')}" for r in group],
                evidence={"mode": name, "threads": threads, "usable_cpus": cores, "omp_env": omp},
            )


@check("PRB007", "straggler-rank", when=("static", "step"), family=FAMILY, needs=("probe",), catalogue=("C3",))
def straggler(snap):
    """One rank computes much slower than the others, and they wait for it.

    What it checks
        In the main mode, each rank's busy time per steady step (the step less the time spent
        waiting in collectives) against the median of the other ranks; a rank 30% and 5 ms above
        is named, with the phase where it loses the time.

    Why it matters
        DDP is synchronous: every step runs at the speed of the slowest rank, and the others idle
        in all-reduce. A throttled GPU, a noisy neighbour, a slow disk or an unlucky data shard on
        one rank slows the whole job, and in the worst case ends in a collective timeout
        (pytorch#118369).

    Example
        One GPU at a lower clock; one node sharing its CPUs with another job.

    Fix
        Look at the named rank's host: `nvidia-smi -q -d CLOCK,PERFORMANCE` on GPUs, `top` on CPUs,
        and its data shard. Rerun the probe to see whether the same rank is slow again.
    """
    ranks = _compared_ranks(snap)
    if not ranks:
        return

    def busy(r):
        ph = r.get("phases_ms") or {}
        return r["step_ms"] - ph.get("allreduce", 0.0) - ph.get("sync", 0.0)

    for r in ranks:
        others = [busy(o) for o in ranks if o is not r]
        ref = statistics.median(others)
        mine = busy(r)
        if mine < STRAGGLER_RATIO * ref or mine - ref < STRAGGLER_MIN_MS:
            continue
        ph = r.get("phases_ms") or {}
        deltas = {p: ph.get(p, 0.0) - statistics.median([(o.get("phases_ms") or {}).get(p, 0.0) for o in ranks if o is not r])
                  for p in ("data", "forward", "backward", "optimizer", "other")}
        worst = max(deltas, key=deltas.get)
        yield warning(
            f"rank {r.get('rank')} is a straggler: {_ms(mine)} of work per step against {_ms(ref)} on the others",
            detail=(f"The other ranks wait for rank {r.get('rank')}{' on ' + r['host'] if r.get('host') else ''} in "
                    f"collectives. It is slower mostly in {worst} (+{_ms(deltas[worst])} per step). The job "
                    f"runs at its pace: {_ms(r['step_ms'])} per step."),
            fix=(f"Inspect rank {r.get('rank')}'s host: `top` / `nvidia-smi -q -d CLOCK,PERFORMANCE`, its data shard, and "
                 "rerun to see whether the same rank lags again."),
            subjects=[f"rank:{r.get('rank')}"] + ([f"host:{r['host']}"] if r.get("host") else []),
            evidence={"busy_ms": round(mine, 3), "others_median_busy_ms": round(ref, 3), "slowest_phase": worst,
                      "phase_excess_ms": {k: round(v, 3) for k, v in deltas.items()}},
        )


@check("PRB008", "find-unused-parameters-unneeded", when=("static", "step"), family=FAMILY, needs=("probe",), catalogue=("F3",))
def find_unused_unneeded(snap):
    """DDP searches for unused parameters every step, and there are none.

    What it checks
        In each probe mode, whether the DDP wrapper had `find_unused_parameters=True` while, after
        the first backward, every parameter that requires a gradient had one on every rank.

    Why it matters
        The flag costs an extra traversal of the autograd graph every iteration, and DDP warns
        "find_unused_parameters=True was specified in DDP constructor, but did not find any unused
        parameters". Trainer turns it on by default for models without gradient checkpointing
        (transformers trainer.py `_wrap_model`; cszn/KAIR#103).

    Example
        `Trainer(model=BertForMaskedLM(...))` under torchrun with default TrainingArguments.

    Fix
        `TrainingArguments(..., ddp_find_unused_parameters=False)`.
    """
    hit = []
    for name, mode in _modes(snap).items():
        ranks = _complete(mode)
        if (mode.get("nproc") or 1) < 2:
            continue
        flagged = [r for r in ranks if (r.get("ddp") or {}).get("find_unused_parameters") is True]
        if not flagged or any((r.get("unused_parameters") or 0) > 0 for r in ranks):
            continue
        if any(r.get("unused_parameters") is None for r in flagged):
            continue
        hit.append((name, flagged))
    if not hit:
        return
    name, flagged = hit[0]
    set_by = (flagged[0].get("trainer") or {}).get("ddp_find_unused_parameters")
    modes = ", ".join(n for n, _ in hit)
    yield warning(
        f"find_unused_parameters=True but no parameter went unused ({modes})",
        detail=(f"Every rank of {modes} wrapped the model with find_unused_parameters=True "
                f"({'Trainer default' if set_by is None else 'set explicitly'}), and after the first backward every "
                "trainable parameter had a gradient. The flag only adds an autograd-graph traversal per step."),
        fix="TrainingArguments(..., ddp_find_unused_parameters=False)",
        subjects=["arg:ddp_find_unused_parameters"],
        evidence={"modes": [n for n, _ in hit], "trainer_arg": set_by, "unused_parameters": 0},
    )


@check("PRB009", "accumulation-allreduce-every-microstep", when=("static", "step"), family=FAMILY, needs=("probe",), catalogue=("F5",))
def accum_every_microstep(snap):
    """Gradient accumulation all-reduces on every micro-step instead of once per optimizer step.

    What it checks
        The timing comm hook counts rounds of bucket all-reduces per optimizer step. With
        `gradient_accumulation_steps=k` and a working `no_sync`, that is one round; k rounds mean
        every micro-batch's backward synchronised gradients.

    Why it matters
        Communication grows k-fold for identical results. Trainers before transformers PR#7742 did
        this; custom loops do it when `no_sync()` wraps only the backward, or not the forward
        (pytorch#43201).

    Example
        `gradient_accumulation_steps=2` on an old transformers, or `loss.backward()` outside
        `with model.no_sync():` in a hand-written loop.

    Fix
        Wrap forward and backward of the non-final micro-steps in `model.no_sync()`, use
        `accelerator.accumulate(model)`, or upgrade transformers.
    """
    for name, mode in _modes(snap).items():
        for r in _complete(mode):
            accum = (r.get("config") or {}).get("grad_accum") or 1
            rounds = (r.get("comm") or {}).get("rounds_per_step")
            if accum < 2 or not rounds or rounds <= 1.05:
                continue
            yield warning(
                f"{name}: {rounds:g} all-reduce rounds per optimizer step with gradient_accumulation_steps={accum}",
                detail=(f"Rank {r.get('rank')} ran {(r.get('comm') or {}).get('calls_per_step'):g} bucket all-reduces "
                        f"per optimizer step ({rounds:g} rounds); with a working no_sync it would run one round. "
                        "Every micro-step synchronised gradients that the next micro-step overwrites."),
                fix=("with model.no_sync():  # wrap forward AND backward of every micro-step but the last\n"
                     "    loss = model(**batch).loss; loss.backward()\n"
                     "# or: pip install -U transformers accelerate"),
                subjects=["arg:gradient_accumulation_steps"],
                evidence={"mode": name, "rank": r.get("rank"), "rounds_per_step": rounds, "grad_accum": accum,
                          "calls_per_step": (r.get("comm") or {}).get("calls_per_step")},
            )
            break


@check("PRB010", "logged-loss-disagrees", when=("static", "step"), family=FAMILY, needs=("probe",))
def logged_loss_disagrees(snap):
    """The loss Trainer logs under N ranks is not the loss of the 1-rank baseline.

    What it checks
        The first logged loss (and grad_norm) of the main N-rank mode against the 1-rank baseline:
        same model, same initial weights (same seed), same data. At step 1 the weights are
        identical, so the two must agree closely; a ratio near N means the value is scaled by the
        world size.

    Why it matters
        With `average_tokens_across_devices=True` (the default) Trainer multiplies the loss by the
        number of processes, expecting the model to divide by the token count summed over all
        ranks. A model whose loss ignores `num_items_in_batch` (BertForMaskedLM did: 9.21 against
        4.61 on one process) then logs, clips and back-propagates a loss N times too large.

        In the user's own run (DoctorCallback) there is no 1-rank baseline: at the first step each
        rank runs its micro-batch twice more without gradients, with the same dropout masks, once
        with `num_items_in_batch` and once with twice that (ddpdoctor/inprocess/loss_scaling.py).
        A loss that does not change ignores it, and Trainer's factor (the number of processes) is
        then the error of every logged loss and grad_norm.

    Example
        BertForMaskedLM under torchrun with 2 ranks logs loss 6.43 where one process logs 3.22
        (transformers' run_mlm.py: 15.2 against 7.6).

    Fix
        `TrainingArguments(..., average_tokens_across_devices=False)` for such a model, or a loss
        that honours `num_items_in_batch`.
    """
    p = _probe(snap)
    main, base = _main(snap), _modes(snap).get(p.get("baseline") or "")
    if main and not base:
        yield from _loss_scaling_in_run(main)
        return
    if not main or not base or (main.get("nproc") or 1) < 2:
        return

    def first(mode, key):
        for r in _complete(mode):
            for e in r.get("logs") or []:
                if e.get(key) is not None:
                    return float(e[key]), r.get("trainer") or {}
        return None, {}

    n = main["nproc"]
    loss_n, tr = first(main, "loss")
    loss_1, _ = first(base, "loss")
    if not loss_n or not loss_1:
        return
    ratio = loss_n / loss_1
    if abs(ratio - 1) < 0.15:
        return
    gn_n, _ = first(main, "grad_norm")
    gn_1, _ = first(base, "grad_norm")
    gn_ratio = round(gn_n / gn_1, 3) if gn_n and gn_1 else None
    scaled = abs(ratio - n) < abs(ratio - 1)
    yield warning(
        f"logged loss {loss_n:.3f} on {n} ranks against {loss_1:.3f} on 1 rank at step 1 ({ratio:.2f}x)",
        detail=(f"Same weights and seed at step 1, yet the {n}-rank run logs {ratio:.2f}x the 1-rank loss"
                + (f" and {gn_ratio}x its grad_norm" if gn_ratio else "") + ". "
                + (f"That is the world size: the loss is multiplied by the number of processes "
                   f"(average_tokens_across_devices={tr.get('average_tokens_across_devices')}) and the model's loss "
                   "ignores num_items_in_batch, so gradients and clipping see it too."
                   if scaled else "The runs do not compute the same loss; check per-rank data and loss scaling.")),
        fix=("TrainingArguments(..., average_tokens_across_devices=False)  # for models whose loss ignores num_items_in_batch"
             if scaled else "Compare the loss computation across ranks; log per-rank losses before any reduction."),
        subjects=["arg:average_tokens_across_devices"] if scaled else [],
        evidence={"loss_n": loss_n, "loss_1": loss_1, "ratio": round(ratio, 4), "grad_norm_ratio": gn_ratio,
                  "world_size": n},
    )


def _loss_scaling_in_run(main: dict):
    """PRB010 from the measurement DoctorCallback made in the user's run (no baseline to compare)."""
    facts = [(r.get("rank"), r.get("loss_scaling")) for r in main.get("ranks") or []
             if isinstance(r.get("loss_scaling"), dict) and r["loss_scaling"].get("checked")]
    bad = [(rank, f) for rank, f in facts if f.get("ignores_num_items") and (f.get("trainer_scale") or 1) > 1]
    if not bad:
        return
    rank, f = bad[0]
    n = f["trainer_scale"]
    logged = next((e for r in main.get("ranks") or [] for e in r.get("logs") or [] if e.get("loss") is not None), None)
    model_loss, used = f.get("model_loss"), f.get("trainer_loss")
    seen = (f"; at step 1 rank {rank}'s loss is {model_loss:.4g} per token and Trainer back-propagates {used:.4g}"
            if isinstance(model_loss, (int, float)) and isinstance(used, (int, float)) else "")
    shown = f"logged loss {logged['loss']:.4g} is" if logged else "every logged loss and grad_norm are"
    yield warning(
        f"{shown} {n}x the model's loss: the model ignores num_items_in_batch while Trainer multiplies by {n}",
        detail=(f"With average_tokens_across_devices={f.get('average_tokens_across_devices')}, Trainer passes the "
                f"token count summed over all {n} ranks and multiplies the returned loss by {n}, expecting the model "
                "to divide by that count. This model's loss did not change when num_items_in_batch doubled (measured "
                f"in this run{seen}), so the logged loss, the grad_norm and the gradients are {n}x too large, and "
                "max_grad_norm clips {n}x earlier.".replace("{n}", str(n))),
        fix="TrainingArguments(..., average_tokens_across_devices=False)  # for models whose loss ignores num_items_in_batch",
        subjects=["arg:average_tokens_across_devices"],
        evidence={"world_size": n, "ratio": n, "logged_loss": logged.get("loss") if logged else None,
                  "logged_grad_norm": logged.get("grad_norm") if logged else None, "model_loss": model_loss,
                  "trainer_loss": used, "num_items_in_batch": f.get("num_items_in_batch"),
                  "model_loss_twice_the_items": f.get("model_loss_twice_the_items"), "measured_on_rank": rank},
    )


@check("PRB011", "low-scaling-efficiency", family=FAMILY, needs=("probe",))
def low_scaling(snap):
    """N ranks process less than half of N times what one rank does.

    What it checks
        Scaling efficiency = N-rank samples/s / (N x 1-rank samples/s), on steady-state steps, the
        1-rank baseline run with the same per-rank resources (threads, device, batch).

    Why it matters
        Below 0.5 the extra devices buy less than half of their worth; the other probe findings
        (communication, input, stragglers, threads) say where it goes.

    Example
        Two ranks on two CPU cores with a tiny model: compute per step is too small to hide the
        all-reduce and the Python overhead.

    Fix
        Address the other findings first; give each rank more work per step (batch size,
        accumulation) so that communication is amortised.
    """
    sc = _probe(snap).get("scaling") or {}
    eff = sc.get("efficiency")
    if eff is None or eff >= LOW_EFFICIENCY:
        return
    yield warning(
        f"scaling efficiency {eff:.2f}: {sc.get('nproc')} ranks give {sc.get('speedup', 0):.2f}x one rank's throughput",
        detail=(f"{sc.get('samples_per_s')} samples/s on {sc.get('nproc')} ranks against "
                f"{sc.get('baseline_samples_per_s')} samples/s on one rank with the same per-rank resources."),
        fix="Fix the other probe findings first, then give each rank more work per step:\n"
            "TrainingArguments(per_device_train_batch_size=<larger>, gradient_accumulation_steps=<k>)",
        subjects=[],
        evidence=dict(sc),
    )


@check("PRB012", "spawn-slower-than-torchrun", family=FAMILY, needs=("probe",), catalogue=("A5", "A7"))
def spawn_slower(snap):
    """The same job launched with torch.multiprocessing.spawn and hand-set env is slower, and why.

    What it checks
        With `--compare spawn`: the steady step of the mp.spawn run (RANK, WORLD_SIZE, MASTER_*
        set by hand, as in the original question) against the torchrun run, and the facts that
        differ: threads per rank, OMP_NUM_THREADS, LOCAL_RANK.

    Why it matters
        `mp.spawn` sets no OMP_NUM_THREADS (accelerate then sets it to the core count, so ranks
        oversubscribe the CPU), no LOCAL_RANK (every rank is "local process 0"), and no elastic
        error files. On a 2-core CPU we measured 53-57 ms per step under spawn against 16 ms under
        torchrun (pytorch#47587).

    Example
        `torch.multiprocessing.spawn(create_transformer_trainer, args=(4, ...), nprocs=4)`.

    Fix
        `torchrun --nproc-per-node N train.py`, with the training function called once per process.
    """
    modes = _modes(snap)
    spawn, main = modes.get("spawn"), _main(snap)
    if not spawn or not main or spawn is main or not spawn.get("step_ms") or not main.get("step_ms"):
        return
    ratio = spawn["step_ms"] / main["step_ms"]
    s_threads = [(r.get("threads") or {}).get("torch") for r in spawn.get("ranks") or []]
    m_threads = [(r.get("threads") or {}).get("torch") for r in main.get("ranks") or []]
    s_local = [(r.get("trainer") or {}).get("local_process_index") for r in spawn.get("ranks") or []]
    differs = s_threads != m_threads or len(set(s_local)) < len(s_local)
    if ratio < SPAWN_RATIO and not differs:
        return
    why = []
    if s_threads != m_threads:
        why.append(f"threads per rank {s_threads} under spawn against {m_threads} under torchrun "
                   f"(OMP_NUM_THREADS={(spawn['ranks'][0].get('threads') or {}).get('omp_env_at_start') or 'unset'} at start)")
    if len(set(s_local)) < len(s_local):
        why.append(f"local process index {s_local}: LOCAL_RANK unset, every rank is 'local process 0'")
    slower = ratio >= SPAWN_RATIO
    severity = warning if slower else info
    verdict = "slower" if slower else "no slower here"
    yield severity(
        f"mp.spawn ({verdict}): {_ms(spawn['step_ms'])} per step against {_ms(main['step_ms'])} under torchrun ({ratio:.2f}x)",
        detail=("Measured on this machine with the same workload. What differs: " + "; ".join(why) + "."
                if why else "Measured on this machine with the same workload."),
        fix=f"torchrun --nproc-per-node {spawn.get('nproc')} train.py   # not torch.multiprocessing.spawn with hand-set RANK/WORLD_SIZE",
        subjects=["OMP_NUM_THREADS", "LOCAL_RANK"],
        evidence={"spawn_step_ms": spawn["step_ms"], "torchrun_step_ms": main["step_ms"], "ratio": round(ratio, 3),
                  "spawn_threads": s_threads, "torchrun_threads": m_threads, "spawn_local_index": s_local},
    )


@check("PRB013", "dataparallel-comparison", family=FAMILY, needs=("probe",), catalogue=("F1",))
def dp_comparison(snap):
    """How DataParallel in one process compares with DDP on the same GPUs.

    What it checks
        With `--compare dp`: steady samples/s of one process driving every GPU with
        `torch.nn.DataParallel` against the DDP run, at the same per-device batch.

    Why it matters
        DataParallel replicates the model and scatters inputs every step from one Python thread
        (GIL contention); DDP should beat it once start-up is excluded. Note that Trainer reports
        the DP batch as per-device x n_gpu ("Training with DataParallel so batch size has been
        adjusted"), so compare samples/s, not steps/s (transformers#24345).

    Example
        The original question: 2m47s under DataParallel against 4m16s under spawn-launched DDP, 20 steps.

    Fix
        Compare steady samples/s at equal global batch; prefer DDP via torchrun.
    """
    modes = _modes(snap)
    dp, main = modes.get("dp"), _main(snap)
    if not dp or not main or not dp.get("samples_per_s") or not main.get("samples_per_s"):
        return
    ratio = main["samples_per_s"] / dp["samples_per_s"]
    sev = info if ratio >= 1 else warning
    yield sev(
        f"DDP {main['samples_per_s']:.1f} samples/s against DataParallel {dp['samples_per_s']:.1f} samples/s ({ratio:.2f}x)",
        detail=(f"Steady state, start-up excluded. DDP start-up {main.get('startup_s')} s, DataParallel start-up "
                f"{dp.get('startup_s')} s."),
        fix="Prefer DDP (torchrun); compare samples/s, not wall time of a short run.",
        subjects=[],
        evidence={"ddp_samples_per_s": main["samples_per_s"], "dp_samples_per_s": dp["samples_per_s"]},
    )

