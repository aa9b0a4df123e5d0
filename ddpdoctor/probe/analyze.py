"""Pure arithmetic over per-rank records: steady-state step breakdown, start-up phases, all-reduce
counts and bandwidth, peer waiting, scaling efficiency and the break-even step count.

Input: `{mode: {"ranks": [record, ...], ...launch facts}}` as the runner collects them. Output: the
`probe` snapshot section that the PRB checks judge. No torch, no I/O, so tests feed literal records.
"""
from __future__ import annotations

import statistics
from typing import Any, Dict, List, Optional

from ddpdoctor.inprocess.instrument import PHASES

STARTUP_PHASES = (  # (name, from milestone, to milestone)
    ("launch", "launched", "process_start"),
    ("imports", "process_start", "imports_done"),
    ("process_group", "imports_done", "process_group_ready"),
    ("model_build", "process_group_ready", "model_built"),
    ("model_to_device", "model_built", "model_moved"),
    ("trainer_setup_ddp_wrap", "model_moved", "ddp_wrapped"),
    ("first_step", "ddp_wrapped", "first_step_end"),
)


def warmup_steps(n: int) -> int:
    """Steps left out of the steady state: the first (allocations, DDP bucket rebuild) and up to
    a fifth of the run."""
    return min(max(1, n // 5), max(0, n - 1))


def _mean(xs: List[float]) -> Optional[float]:
    return round(sum(xs) / len(xs), 4) if xs else None


def rank_summary(rec: dict, launched: Optional[float] = None) -> dict:
    """The steady-state figures of one rank's record."""
    steps = [s for s in rec.get("steps") or [] if isinstance(s, dict) and "total_ms" in s]
    skip = warmup_steps(len(steps))
    steady = steps[skip:]
    out: Dict[str, Any] = {
        "rank": rec.get("rank"), "host": rec.get("host"), "local_rank": rec.get("local_rank"),
        "complete": bool(rec.get("complete")), "error": rec.get("error"), "steps_recorded": len(steps),
        "steady_steps": len(steady), "warmup_steps": skip,
    }
    cfg = rec.get("config") or {}
    trainer = rec.get("trainer") or {}
    out["samples_per_step"] = (trainer.get("train_batch_size") or cfg.get("batch_size") or 0) * (cfg.get("grad_accum") or 1)
    if steady:
        totals = [s["total_ms"] for s in steady]
        step_ms = sum(totals) / len(totals)
        phases = {p: _mean([s["phases"].get(p, 0.0) for s in steady]) for p in PHASES}
        phases = {k: v for k, v in phases.items() if v}
        accounted = sum(phases.values())
        out.update({
            "step_ms": round(step_ms, 4), "step_ms_median": round(statistics.median(totals), 4),
            "step_ms_p90": round(sorted(totals)[int(0.9 * (len(totals) - 1))], 4),
            "phases_ms": phases, "shares": {k: round(v / step_ms, 4) for k, v in phases.items()} if step_ms else {},
            "phase_sum_ratio": round(accounted / step_ms, 4) if step_ms else None,
            "samples_per_s": round(out["samples_per_step"] / (step_ms / 1000.0), 3) if step_ms else None,
        })
        ends = rec.get("step_ends") or []
        if skip >= 1 and len(ends) == len(steps):
            # An independent clock on the same interval: perf_counter at each on_step_end callback.
            wall_ms = (ends[-1] - ends[skip - 1]) * 1000.0
            if wall_ms > 0:
                out["steps_vs_wall"] = round(sum(totals) / wall_ms, 4)
        comms = [s["comm"] for s in steady if isinstance(s.get("comm"), dict)]
        if comms:
            calls = _mean([c.get("calls", 0) for c in comms])
            rounds = _mean([c.get("rounds", 0) for c in comms])
            nbytes = _mean([c.get("bytes", 0) for c in comms]) or 0
            busy = _mean([c.get("busy_ms", 0) for c in comms]) or 0
            out["comm"] = {"calls_per_step": calls, "rounds_per_step": rounds,
                           "bytes_per_round": round(nbytes / rounds) if rounds else None, "busy_ms": busy}
    ms = dict(rec.get("milestones") or {})
    if launched is not None:
        ms.setdefault("launched", launched)
    startup = {}
    for name, a, b in STARTUP_PHASES:
        if ms.get(a) is not None and ms.get(b) is not None:
            startup[name] = round(max(0.0, ms[b] - ms[a]), 4)
    out["startup_s"] = startup
    origin = ms.get("launched", ms.get("process_start"))
    if origin is not None and ms.get("first_step_end") is not None:
        out["to_first_step_s"] = round(ms["first_step_end"] - origin, 4)
    if origin is not None and ms.get("train_end") is not None:
        out["to_train_end_s"] = round(ms["train_end"] - origin, 4)
    for key in ("trainer", "ddp", "threads", "logs", "loss_scaling", "model", "config", "device", "world_size", "injected", "env"):
        if key in rec:
            out[key] = rec[key]
    if rec.get("unused_parameters") is not None:
        out["unused_parameters"] = len(rec["unused_parameters"])
        out["unused_parameter_names"] = rec["unused_parameters"][:10]
    if rec.get("bucket_bytes"):
        out["buckets"] = len(rec["bucket_bytes"])
    return out


def peer_wait(records: List[dict]) -> Dict[int, dict]:
    """Per rank: how long, per steady step, its all-reduce waited for the last peer to launch its
    last bucket (peer_wait_ms), and how long the transfer took after that (transfer_ms).

    Uses the wall-clock epochs the comm hook stores on CPU; ranks must share a clock (same host,
    or NTP-synchronised hosts). Returns {} when the stamps are missing (GPU: CUDA events)."""
    by_step: Dict[int, Dict[int, dict]] = {}
    for rec in records:
        steps = [s for s in rec.get("steps") or [] if isinstance(s, dict)]
        for s in steps[warmup_steps(len(steps)):]:
            c = s.get("comm") or {}
            if c.get("last_launch") is not None and c.get("last_done") is not None:
                by_step.setdefault(s.get("step"), {})[rec.get("rank")] = c
    waits: Dict[int, List[float]] = {}
    transfers: Dict[int, List[float]] = {}
    for step, per_rank in by_step.items():
        if len(per_rank) < 2 or len(per_rank) != len(records):
            continue
        last = max(c["last_launch"] for c in per_rank.values())
        for rank, c in per_rank.items():
            waits.setdefault(rank, []).append(max(0.0, (last - c["last_launch"]) * 1000))
            transfers.setdefault(rank, []).append(max(0.0, (c["last_done"] - last) * 1000))
    return {r: {"peer_wait_ms": _mean(waits[r]), "transfer_ms": _mean(transfers.get(r, []))} for r in waits}


def busbw_gbps(nbytes: Optional[float], ms: Optional[float], world: int) -> Optional[float]:
    """nccl-tests' bus bandwidth of an all_reduce: algbw * 2(n-1)/n, in GB/s."""
    if not nbytes or not ms or ms <= 0 or world < 2:
        return None
    return round(nbytes / (ms / 1000.0) / 1e9 * 2 * (world - 1) / world, 4)


def mode_summary(name: str, run: dict) -> dict:
    """One launched mode: its rank summaries plus the launch facts (failures, wall time)."""
    launched = run.get("launched")
    records = [r for r in run.get("ranks") or [] if isinstance(r, dict)]
    ranks = sorted((rank_summary(r, launched) for r in records), key=lambda r: (r.get("rank") is None, r.get("rank")))
    waits = peer_wait([r for r in records if r.get("complete")])
    world = run.get("nproc") or len(ranks) or 1
    for r in ranks:
        w = waits.get(r.get("rank"))
        if w:
            r["comm"] = dict(r.get("comm") or {}, **w)
        c = r.get("comm") or {}
        t = c.get("transfer_ms") if c.get("transfer_ms") is not None else c.get("busy_ms")
        if c and c.get("bytes_per_round") and c.get("rounds_per_step"):
            per_round_ms = (t or 0) / c["rounds_per_step"] if c["rounds_per_step"] else None
            c["busbw_gbps"] = busbw_gbps(c["bytes_per_round"], per_round_ms, world)
    complete = [r for r in ranks if r.get("complete") and r.get("step_ms")]
    out = {k: v for k, v in run.items() if k not in ("ranks",)}
    out.update({"mode": name, "ranks": ranks, "nproc": world})
    if complete:
        step = max(r["step_ms"] for r in complete)  # synchronous DDP: the job moves at the slowest rank
        samples = sum(r.get("samples_per_step") or 0 for r in complete)
        if run.get("dp"):  # DataParallel: one process drives every GPU
            samples = complete[0].get("samples_per_step") or 0
        out["step_ms"] = round(step, 4)
        out["samples_per_s"] = round(samples / (step / 1000.0), 3) if step else None
        firsts = [r["to_first_step_s"] for r in complete if r.get("to_first_step_s") is not None]
        out["startup_s"] = round(max(firsts), 4) if firsts else None
        out["complete"] = len(complete) == world
    else:
        out["complete"] = False
    return out


def scaling(main: dict, base: dict) -> dict:
    """Scaling efficiency and the steps after which N ranks beat one, start-up included.

    efficiency = N-rank samples/s / (N * 1-rank samples/s). Processing s optimizer steps of the
    N-rank job takes S_N + s*t_N; the same samples on one rank take S_1 + s*N*t_1 (each N-rank
    step holds N one-rank batches), so N ranks win after (S_N - S_1) / (N*t_1 - t_N) steps."""
    n = main.get("nproc") or 1
    out: Dict[str, Any] = {"nproc": n}
    if not (main.get("samples_per_s") and base.get("samples_per_s")):
        return out
    out["samples_per_s"] = main["samples_per_s"]
    out["baseline_samples_per_s"] = base["samples_per_s"]
    out["efficiency"] = round(main["samples_per_s"] / (n * base["samples_per_s"]), 4)
    out["speedup"] = round(main["samples_per_s"] / base["samples_per_s"], 4)
    s_n, s_1 = main.get("startup_s"), base.get("startup_s")
    t_n, t_1 = main.get("step_ms"), base.get("step_ms")
    if None not in (s_n, s_1, t_n, t_1):
        gain_ms = n * t_1 - t_n
        extra_ms = (s_n - s_1) * 1000.0
        if extra_ms <= 0:
            out["break_even_steps"] = 0
        elif gain_ms > 0:
            out["break_even_steps"] = int(extra_ms // gain_ms) + 1
        else:
            out["break_even_steps"] = None  # never: N ranks are not faster per sample
        out["startup_extra_s"] = round(s_n - s_1, 4)
    return out


def probe_section(runs: Dict[str, dict], config: dict, main: str = "torchrun", baseline: str = "1-rank",
                  host: Optional[dict] = None) -> dict:
    """The `probe` snapshot section."""
    modes = {name: mode_summary(name, run) for name, run in runs.items()}
    section: Dict[str, Any] = {"schema": "ddpdoctor/probe/1", "config": dict(config), "modes": modes,
                               "main": main if main in modes else next(iter(modes), None),
                               "baseline": baseline if baseline in modes else None, "host": dict(host or {})}
    if section["main"] and section["baseline"]:
        section["scaling"] = scaling(modes[section["main"]], modes[section["baseline"]])
    return section
