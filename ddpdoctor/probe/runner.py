"""The parent side of `ddpdoctor probe`: make the data, launch each mode within the deadline,
collect per-rank records, build the `probe` section, judge it, and return a Report.

Modes, in the order they run:
    <launcher>  N ranks through torch's elastic launcher (`ddpdoctor.launch`), named "torchrun"
    1-rank      the baseline: the same workload on one rank with the resources of one of the N
                (same threads on CPU, one GPU), for scaling efficiency and loss agreement
    spawn       (--compare spawn) torch.multiprocessing.spawn with hand-set env, as in the question
    dp          (--compare dp) one process, DataParallel over every visible GPU
"""
from __future__ import annotations

import os
import re
import shutil
import socket
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from ddpdoctor.model import Report

from ddpdoctor.probe.report import BASELINE, MAIN, report_from_records, report_from_runs  # noqa: F401


@dataclass
class ProbeOptions:
    nproc: int = 2
    device: str = "cpu"  # cpu | cuda
    model: Optional[str] = None
    steps: int = 20
    batch_size: int = 8
    grad_accum: int = 1
    workers: int = 0
    seq_len: Optional[int] = None
    vocab: Optional[int] = None  # model vocabulary; None: the model size's default (workload.DEFAULT_VOCAB)
    seed: int = 0
    find_unused: str = "auto"
    compare: List[str] = field(default_factory=list)  # "spawn", "dp"
    baseline: bool = True
    inject: str = ""
    deadline_s: float = 240.0  # the whole command
    env: Dict[str, str] = field(default_factory=dict)  # extra env for every rank of the main mode
    trainer_args: List[str] = field(default_factory=list)  # NAME=VALUE, for every mode
    with_comm: bool = False  # measure the link with `ddpdoctor comm` at the gradient bucket size

    def worker_args(self, mode: str) -> List[str]:
        args = ["--mode", mode, "--steps", str(self.steps), "--batch-size", str(self.batch_size),
                "--grad-accum", str(self.grad_accum), "--workers", str(self.workers), "--seed", str(self.seed),
                "--device", self.device, "--find-unused", self.find_unused]
        if self.model:
            args += ["--model", self.model]
        if self.seq_len:
            args += ["--seq-len", str(self.seq_len)]
        if self.vocab:
            args += ["--vocab", str(self.vocab)]
        for item in self.trainer_args:
            args += ["--trainer-arg", item]
        return args

    def describe(self, steps: bool = True) -> str:
        dev = f"--gpus {self.nproc}" if self.device == "cuda" else f"--cpu --nproc {self.nproc}"
        extra = f" --grad-accum {self.grad_accum}" if self.grad_accum > 1 else ""
        if self.model:
            extra += f" --model {self.model}"
        if self.vocab:
            extra += f" --vocab {self.vocab}"
        for item in self.trainer_args:
            extra += f" --trainer-arg {item}"
        return f"ddpdoctor probe {dev}{extra}" + (f" --steps {self.steps}" if steps else "")


def _inject_env(inject: str) -> Dict[str, str]:
    """Faults that must be in the environment before Python starts (OMP_NUM_THREADS)."""
    from ddpdoctor.probe.worker import parse_inject

    env = {}
    for f in parse_inject(inject):
        if f["name"] == "omp":
            env["OMP_NUM_THREADS"] = str(int(f["value"]))
    return env


class Progress:
    """Shows which phase / step each rank is in while a mode runs (stderr, one line per change)."""

    def __init__(self, stream=None, enabled: bool = True) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._last = ""
        self._said_at = 0.0

    def say(self, text: str) -> None:
        if self.enabled:
            from ddpdoctor.model.redact import redact_text   # the options echoed (--trainer-arg hub_token=...)

            print(f"ddpdoctor probe: {redact_text(text)}", file=self.stream, flush=True)

    def watch(self, label: str, directory: str, nproc: int) -> "Progress":
        if not self.enabled:
            return self
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, args=(label, directory, nproc), daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1)
            self._thread = None

    def _loop(self, label: str, directory: str, nproc: int) -> None:
        from ddpdoctor.launch import read_json

        while not self._stop.wait(0.5):
            parts = []
            for r in range(nproc):
                prog = read_json(os.path.join(directory, f"progress-{r}.json")) or {}
                step = read_json(os.path.join(directory, f"probe-progress-{r}.json")) or {}
                phase = prog.get("phase") or "starting"
                if phase == "train" and step:
                    phase = f"step {step.get('step')}/{step.get('of')}"
                    if step.get("since") and step.get("time") and step["time"] - step["since"] > 5:
                        phase += f" ({step.get('phase')} for {step['time'] - step['since']:.0f} s)"
                parts.append(f"rank {r} {phase}")
            line = f"[{label}] " + ", ".join(parts)
            key = re.sub(r" for \d+ s\)", ")", line)  # a stuck rank: repeat its line every 5 s, not every 0.5 s
            now = time.monotonic()
            if key != self._last or now - self._said_at >= 5:
                self._last, self._said_at = key, now
                self.say(line)


def _launch_mode(opts: ProbeOptions, mode: str, nproc: int, data: str, env: Dict[str, str], deadline_s: float,
                 progress: Progress, workroot: str) -> dict:
    """One mode through ddpdoctor's launcher (torch elastic): the records plus launch facts."""
    from ddpdoctor.launch import LaunchSpec, launch

    workdir = tempfile.mkdtemp(prefix=f"{mode}-", dir=workroot)
    args = opts.worker_args(mode) + ["--data", data, "--timeout", str(int(max(10, deadline_s)))]
    if mode == MAIN and opts.inject:
        args += ["--inject", opts.inject]
    if mode == BASELINE:
        args += ["--alone"]
    spec = LaunchSpec(module="ddpdoctor.probe", args=args, nproc=nproc, deadline_s=deadline_s, env=env,
                      teardown_s=3.0, workdir=workdir)
    launched = time.time()
    progress.watch(mode, workdir, nproc)
    try:
        res = launch(spec)
    finally:
        progress.stop()
    from ddpdoctor.launch import read_json

    ranks, failures = [], []
    rc = res.root_cause or {}
    live = {r: read_json(os.path.join(workdir, f"probe-progress-{r}.json")) for r in range(nproc)}
    for r in res.ranks:
        if r.reported and isinstance(r.result, dict):
            rec = dict(r.result)
            rec.pop("phases", None)
            ranks.append(rec)
        elif r.exitcode not in (None, 0) or r.error:
            err = r.error or {}
            msg = err.get("message") or (r.stderr_tail.strip().splitlines() or [f"exit code {r.exitcode}"])[-1]
            etype, _, emsg = str(msg).partition(": ")
            failures.append({"rank": r.rank, "host": r.host, "exitcode": r.exitcode, "signal": r.signal,
                             "phase": r.phase, "root_cause": rc.get("rank") == r.rank and rc.get("kind") == "crashed",
                             "error": {"type": etype if emsg else "error", "message": emsg or etype,
                                       "traceback": (err.get("traceback") or "")[-3000:]}})
        else:
            beat = live.get(r.rank) or {}
            failures.append({"rank": r.rank, "host": r.host, "exitcode": r.exitcode, "phase": r.phase,
                             "root_cause": False, "error": None,
                             "live": {"step": beat.get("step"), "phase": beat.get("phase"),
                                      "for_s": round(beat["time"] - beat["since"], 2)
                                      if beat.get("time") and beat.get("since") else None} if beat else None})
    shutil.rmtree(workdir, ignore_errors=True)
    status = "ok" if res.ok else "timeout" if res.timed_out else "interrupted" if res.interrupted else "failed"
    out = {"nproc": nproc, "launcher": "torch.distributed.launcher (elastic_launch)", "launched": launched,
           "wall_s": res.elapsed_s, "status": status, "teardown": res.teardown, "ranks": ranks,
           "failures": [f for f in failures if f.get("error") or status != "ok"],
           "root_cause": {k: v for k, v in rc.items() if k != "traceback"} if rc else None,
           "env": {k: v for k, v in env.items()}}
    if res.agent_error:
        out["agent_error"] = res.agent_error
    return out


def _bounded_mode(opts: ProbeOptions, mode: str, nproc: int, data: str, deadline_s: float, progress: Progress,
                  workroot: str, env_extra: Optional[Dict[str, str]] = None) -> dict:
    """spawn / dp: not through the launcher (that is the point), but bounded and orphan-free."""
    from ddpdoctor.launch import free_port, read_json
    from ddpdoctor.probe.spawn_mode import plain_env, run_bounded

    outdir = tempfile.mkdtemp(prefix=f"{mode}-", dir=workroot)
    args = opts.worker_args(mode) + ["--data", data, "--out", outdir, "--timeout", str(int(max(10, deadline_s)))]
    if mode == "spawn":
        cmd = [sys.executable, "-m", "ddpdoctor.probe.spawn_mode", str(nproc), str(free_port()), *args]
        expect = [os.path.join(outdir, f"spawn-rank{r}.json") for r in range(nproc)]
    else:
        cmd = [sys.executable, "-m", "ddpdoctor.probe", *args]
        expect = [os.path.join(outdir, f"{mode}-rank0.json")]
    progress.say(f"[{mode}] running ({' '.join(cmd[1:4])} ...)")
    launched = time.time()
    res = run_bounded(cmd, plain_env(extra=env_extra), deadline_s, expect, log_path=os.path.join(outdir, "log.txt"))
    ranks = [r for r in (read_json(p) for p in expect) if r]
    failures = []
    for r in ranks:
        if r.get("error"):
            failures.append({"rank": r.get("rank"), "host": r.get("host"), "root_cause": True, "error": r["error"]})
    if res["status"] != "ok" and not failures:
        failures.append({"rank": None, "host": socket.gethostname(), "root_cause": True,
                         "error": {"type": res["status"], "message": (res["log_tail"].strip().splitlines() or [""])[-1]}})
    return {"nproc": nproc if mode == "spawn" else 1, "launcher": "torch.multiprocessing.spawn" if mode == "spawn" else
            "none (one process)", "launched": launched, "wall_s": res["wall_s"], "status": res["status"],
            "ranks": ranks, "failures": failures, "dp": mode == "dp"}


def run_probe(opts: ProbeOptions, progress: Optional[Progress] = None, trace_path: Optional[str] = None,
              keep: bool = False, only: Optional[set] = None, ignore: Optional[set] = None) -> Report:
    """Run every requested mode within `opts.deadline_s` and judge the result."""
    from ddpdoctor.probe import workload

    progress = progress or Progress(enabled=False)
    t0 = time.monotonic()
    workroot = tempfile.mkdtemp(prefix="ddpdoctor-probe-")
    runs: Dict[str, dict] = {}
    reference: Optional[dict] = None
    try:
        seq_len = opts.seq_len or (64 if opts.device == "cpu" else 128)
        data = workload.write_sequences(os.path.join(workroot, "sequences.h5"),
                                        workload.samples_needed(opts.steps, opts.batch_size, opts.grad_accum,
                                                                max(opts.nproc, 1)), seq_len, opts.seed)

        def left() -> float:
            return max(5.0, opts.deadline_s - (time.monotonic() - t0))

        main_env = dict(opts.env)
        main_env.update(_inject_env(opts.inject))
        progress.say(f"{opts.nproc} rank(s) through torch's elastic launcher ({opts.describe()})")
        runs[MAIN] = _launch_mode(opts, MAIN, opts.nproc, data, main_env, left(), progress, workroot)
        if opts.with_comm and opts.nproc > 1:
            reference = _comm_reference(opts, runs[MAIN], left(), progress)
        if opts.baseline:
            # One rank with the resources of one of the N: the threads each of them ran with.
            threads = [(r.get("threads") or {}).get("torch") for r in runs[MAIN]["ranks"]]
            base_env = dict(opts.env)
            if opts.device == "cpu":
                base_env["OMP_NUM_THREADS"] = str(min([t for t in threads if t] or
                                                      [int(main_env.get("OMP_NUM_THREADS", "1") or 1)]))
            else:
                # One GPU: a plain process that sees several would use DataParallel over all of them.
                visible = [v for v in os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",") if v.strip()]
                base_env["CUDA_VISIBLE_DEVICES"] = visible[0] if visible else "0"
            progress.say("1-rank baseline, same workload and seed")
            runs[BASELINE] = _launch_mode(opts, BASELINE, 1, data, base_env, left(), progress, workroot)
        if "spawn" in opts.compare:
            progress.say("mp.spawn with hand-set RANK/WORLD_SIZE/MASTER_*, as in the original question")
            runs["spawn"] = _bounded_mode(opts, "spawn", opts.nproc, data, left(), progress, workroot)
        if "dp" in opts.compare:
            progress.say("DataParallel in one process")
            runs["dp"] = _bounded_mode(opts, "dp", 1, data, left(), progress, workroot)
    finally:
        if not keep:
            shutil.rmtree(workroot, ignore_errors=True)
    config = {"nproc": opts.nproc, "device": opts.device, "model": opts.model, "steps": opts.steps,
              "batch_size": opts.batch_size, "grad_accum": opts.grad_accum, "workers": opts.workers,
              "seq_len": opts.seq_len, "vocab": opts.vocab, "seed": opts.seed, "compare": list(opts.compare), "inject": opts.inject,
              "trainer_args": list(opts.trainer_args),
              "command": opts.describe(steps=False), "wall_s": round(time.monotonic() - t0, 3)}
    return report_from_runs(runs, config, trace_path=trace_path, only=only, ignore=ignore, reference=reference)


def _comm_reference(opts: ProbeOptions, main_run: dict, deadline_s: float, progress: Progress) -> Optional[dict]:
    """What the link gives a bare all_reduce of one gradient round's size (`ddpdoctor comm`), so the
    comm-bound verdict compares the probe's busbw against this machine's own measurement."""
    sizes = [b for r in main_run.get("ranks") or [] for b in (r.get("bucket_bytes") or [])]
    if not sizes:
        return None
    try:
        from ddpdoctor.comm.api import run_local
    except ImportError:
        return None
    nbytes = sum(sorted(sizes, reverse=True)[: max(1, len(sizes) // max(1, len(main_run.get("ranks") or [1])))])
    progress.say(f"link reference: ddpdoctor comm all_reduce at {max(1, nbytes // 1024)} KiB")
    sec = run_local(nproc=opts.nproc, backend="nccl" if opts.device == "cuda" else "gloo",
                    sizes=f"{max(1, nbytes // 1024)}K", pairs=False, deadline_s=min(60.0, deadline_s))
    bw = [b.get("busbw_gbps") for b in sec.get("bandwidth") or [] if b.get("op") == "all_reduce"]
    if not sec.get("ok") or not bw or not bw[0]:
        return {"ok": False, "bytes": nbytes}
    return {"ok": True, "bytes": nbytes, "busbw_gbps": max(bw), "source": "ddpdoctor comm"}
