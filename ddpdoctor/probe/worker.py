"""One rank of the probe: build the workload, train under Trainer with the recorder attached, and
write what was measured as one JSON record.

Runs as `python -m ddpdoctor.probe` under any launcher: ddpdoctor's own (which passes `--out`),
a user's `torchrun` / `srun` across nodes (then rank 0 gathers every record over the process group
and prints the report), `torch.multiprocessing.spawn` (the `--compare spawn` reproduction, which
calls `run_rank` directly), or no launcher at all (one process; DataParallel when several GPUs are
visible, which is the `--compare dp` mode).

After its record is safely written a rank leaves with `os._exit`: Gloo's teardown may abort or hang
at interpreter exit (pytorch#190489), and a rank that has reported must not turn into a failure.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import sys
import tempfile
import time
import traceback
from typing import Any, Dict, List, Optional

from ..pipeline.argcheck import OneLineParser, at_least, positive

RECORD_SCHEMA = "ddpdoctor/probe-rank/1"
ENV_KEYS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "GROUP_RANK",
            "TORCHELASTIC_RUN_ID", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "TOKENIZERS_PARALLELISM",
            "CUDA_VISIBLE_DEVICES", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS")


def process_start_epoch() -> float:
    """When the kernel started this process (so interpreter start-up is counted too)."""
    try:
        with open("/proc/self/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        ticks = int(fields[19])  # starttime, field 22 overall
        hz = os.sysconf("SC_CLK_TCK")
        with open("/proc/uptime") as fh:
            uptime = float(fh.read().split()[0])
        return time.time() - uptime + ticks / hz
    except (OSError, ValueError, IndexError):
        return time.time()


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m ddpdoctor.probe",
                                description="ddpdoctor probe worker: one rank of an instrumented Trainer run.")
    p.add_argument("--mode", default="worker", help="label of this run in the report (torchrun, 1-rank, spawn, dp)")
    p.add_argument("--model", choices=("tiny", "small", "base"), default=None)
    p.add_argument("--steps", type=at_least(1), default=20)
    p.add_argument("--batch-size", type=at_least(1), default=8)
    p.add_argument("--grad-accum", type=at_least(1), default=1)
    p.add_argument("--workers", type=at_least(0), default=0)
    p.add_argument("--seq-len", type=int, default=None)
    p.add_argument("--vocab", type=at_least(8), default=None,
                   help="model vocabulary (embedding and MLM head rows); default: the model size's")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--find-unused", choices=("auto", "true", "false"), default="auto",
                   help="Trainer's ddp_find_unused_parameters (auto: Trainer's default)")
    p.add_argument("--data", default=None, help="HDF5 file of sequences (made in a temp dir when absent)")
    p.add_argument("--out", default=None, help="directory for rank<N>.json (ddpdoctor's launcher)")
    p.add_argument("--inject", default="", help="self-test faults, see docs/probe.md")
    p.add_argument("--timeout", type=positive, default=120.0, help="collective timeout, seconds")
    p.add_argument("--trainer-arg", action="append", default=[], metavar="NAME=VALUE",
                   help="extra TrainingArguments (try a fix: average_tokens_across_devices=False)")
    p.add_argument("--bare", action="store_true",
                   help="no instrumentation: plain Trainer, only step-end times (the overhead benchmark's control)")
    p.add_argument("--toggle", type=int, default=0, metavar="K",
                   help="overhead benchmark: measure K steps, pause the instrumentation K steps, and so on")
    p.add_argument("--alone", action="store_true",
                   help="train as a plain single process even under a launcher (the 1-rank baseline: no DDP wrap)")
    p.add_argument("--json", action="store_true", help="worker mode: rank 0 prints the JSON report")
    p.add_argument("--trace", default=None, help="worker mode: rank 0 writes a trace-event JSON file")
    return p


# ---------------------------------------------------------------------------------- fault injection

def parse_inject(spec: str) -> List[dict]:
    """`name[@rank][=value]` items, comma separated: slow-data, sleep, crash, no-sync, omp."""
    out = []
    for raw in (spec or "").split(","):
        raw = raw.strip()
        if not raw:
            continue
        name, _, value = raw.partition("=")
        name, _, rank = name.partition("@")
        if name not in INJECTIONS:
            raise ValueError(f"unknown --inject fault {name!r}; known: {', '.join(INJECTIONS)}")
        try:
            out.append({"name": name, "rank": int(rank) if rank else None,
                        "value": float(value) if value else INJECTIONS[name]})
        except ValueError:
            raise ValueError(f"bad --inject item {raw!r}: rank and value must be numbers") from None
    return out


INJECTIONS = {"slow-data": 0.02, "sleep": 0.1, "crash": 3.0, "no-sync": 1.0, "omp": 8.0}


def parse_trainer_args(items: List[str]) -> Dict[str, Any]:
    """NAME=VALUE pairs; values are JSON or Python literals when they parse (False, 4, 0.5), else strings."""
    import ast

    out: Dict[str, Any] = {}
    for item in items or []:
        name, sep, raw = item.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier():
            raise ValueError(f"bad --trainer-arg {item!r}: expected NAME=VALUE")
        lowered = {"true": "True", "false": "False", "none": "None", "null": "None"}.get(raw.strip().lower(), raw.strip())
        try:
            out[name] = ast.literal_eval(lowered)
        except (ValueError, SyntaxError):
            out[name] = raw.strip()
    return out


def injected(faults: List[dict], name: str, rank: int) -> Optional[float]:
    for f in faults:
        if f["name"] == name and (f["rank"] is None or f["rank"] == rank):
            return f["value"]
    return None


# ---------------------------------------------------------------------------------- the rank

def run_rank(argv: Optional[List[str]] = None, started: Optional[float] = None, reporter: Any = None) -> dict:
    """Train one rank and return its record. The record goes to ddpdoctor's launcher through
    `reporter` (a `ddpdoctor.launch.Reporter`), or to --out/<mode>-rank<N>.json."""
    args = build_parser().parse_args(argv)
    rep = reporter if reporter is not None else _NullReporter()
    t_start = started or process_start_epoch()
    env0 = {k: os.environ.get(k) for k in ENV_KEYS}
    rank = int(os.environ.get("RANK", os.environ.get("SLURM_PROCID", "0")) or 0)
    record: Dict[str, Any] = {"schema": RECORD_SCHEMA, "mode": args.mode, "rank": rank, "host": socket.gethostname(),
                              "pid": os.getpid(), "env": env0, "complete": False}
    try:
        faults = parse_inject(args.inject)
        _train(args, rank, faults, t_start, record, rep)
        record["complete"] = True
    except BaseException as exc:  # noqa: BLE001 - the record says what went wrong, then we re-raise
        record["error"] = {"type": type(exc).__name__, "message": str(exc)[:2000],
                           "traceback": traceback.format_exc(limit=-6)[-4000:]}
        _write(args.out, record)
        raise
    _write(args.out, record)
    rep.result(record)
    return record


class _NullReporter:
    dir = None

    def phase(self, name: str, **info: Any) -> None:
        pass

    def result(self, data: Any) -> None:
        pass


def _write(out_dir: Optional[str], record: dict) -> None:
    """--out DIR (spawn and DataParallel modes, which do not run under ddpdoctor's launcher)."""
    if not out_dir:
        return
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"{record.get('mode', 'run')}-rank{record['rank']}.json")
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as fh:
        json.dump(record, fh, default=str)
    os.replace(tmp, path)


class _Heartbeat:
    """A daemon thread that writes `probe-progress-R.json` (last finished step, the phase running
    now and since when) twice a second, off the training thread. The parent shows it as progress
    and, if the deadline passes, uses it to tell the stuck rank from those waiting for it."""

    def __init__(self, directory: Optional[str], rank: int, total: int, timer: Any) -> None:
        import threading

        self.path = os.path.join(directory, f"probe-progress-{rank}.json") if directory else None
        self.total, self.timer, self.step = total, timer, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ddpdoctor-heartbeat", daemon=True)

    def start(self) -> "_Heartbeat":
        if self.path:
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._write()

    def _loop(self) -> None:
        while not self._stop.wait(0.5):
            self._write()

    def _write(self) -> None:
        if not self.path:
            return
        doc = {"step": self.step, "of": self.total, "phase": self.timer.current(), "since": self.timer.entered_at,
               "time": time.time()}
        tmp = f"{self.path}.tmp"
        try:
            with open(tmp, "w") as fh:
                json.dump(doc, fh)
            os.replace(tmp, self.path)
        except OSError:
            pass


def _train(args, rank: int, faults: List[dict], t_start: float, record: dict, rep: Any) -> None:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # the right way: no rayon pool before forks
    if args.alone:
        # Trainer/accelerate read these to decide on DDP; a 1-rank torchrun would still wrap in DDP.
        for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
                    "MASTER_PORT", "TORCHELASTIC_RUN_ID"):
            os.environ.pop(key, None)
    rep.phase("imports")
    import torch

    from ddpdoctor.inprocess.instrument import StepRecorder
    from ddpdoctor.probe import workload

    from transformers import Trainer, TrainingArguments  # ~2.8 s: the "imports" start-up phase

    t_imports = time.time()
    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    size = args.model or ("tiny" if device == "cpu" else "base")
    seq_len = args.seq_len or (64 if device == "cpu" else 128)
    world_env = int(os.environ.get("WORLD_SIZE", "1") or 1)

    rep.phase("data_and_tokenizer")
    tok = workload.char_tokenizer(seq_len)
    data = args.data
    tmpdir = None
    if not data:
        tmpdir = tempfile.mkdtemp(prefix="ddpdoctor-probe-")
        data = workload.write_sequences(os.path.join(tmpdir, "sequences.h5"),
                                        workload.samples_needed(args.steps, args.batch_size, args.grad_accum, world_env),
                                        seq_len, args.seed)
    delay = injected(faults, "slow-data", rank) or 0.0
    dataset = workload.ProteinH5Dataset(data, tok, seq_len, delay_s=delay)

    find_unused = {"auto": None, "true": True, "false": False}[args.find_unused]
    # Trainer's output_dir: next to the data, in the parent's work dir, so that it goes with it even when
    # this rank is killed (a failed peer, the deadline) before its own clean-up runs.
    outdir = tmpdir or tempfile.mkdtemp(prefix="trainer-out-", dir=os.path.dirname(os.path.abspath(data)))
    targ_kwargs: Dict[str, Any] = dict(
        output_dir=outdir, max_steps=args.steps, per_device_train_batch_size=args.batch_size,
        gradient_accumulation_steps=args.grad_accum, dataloader_num_workers=args.workers,
        logging_steps=max(1, args.steps), logging_first_step=True, report_to=[], save_strategy="no",
        disable_tqdm=True, seed=args.seed, use_cpu=(device == "cpu"), ddp_find_unused_parameters=find_unused,
        ddp_timeout=int(max(10, args.timeout)), dataloader_persistent_workers=args.workers > 0,
    )
    targ_kwargs.update(parse_trainer_args(args.trainer_arg))
    targs = TrainingArguments(**targ_kwargs)
    rep.phase("init_process_group")
    _ = targs.device  # sets up the process group: rendezvous + init_process_group
    t_pg = time.time()

    rec = StepRecorder(device=targs.device, precise=True)
    rec.milestone("process_start", t_start)
    rec.milestone("imports_done", t_imports)
    rec.milestone("process_group_ready", t_pg)

    rep.phase("model_build")
    model = workload.build_model(size, tok, seq_len, args.seed, args.vocab)
    rec.milestone("model_built")
    rank = targs.process_index if targs.world_size > 1 else rank

    sleep_s = injected(faults, "sleep", rank)
    crash_at = injected(faults, "crash", rank)
    no_sync = injected(faults, "no-sync", rank) is not None

    class ProbeTrainer(Trainer):
        """Trainer with sharper phase boundaries: data fetch and training_step are marked."""

        def get_batch_samples(self, epoch_iterator, num_batches, device):
            rec.data_begin()
            batches = []
            for _ in range(num_batches):
                try:
                    batches.append(next(epoch_iterator))
                except StopIteration:
                    break
            rec.data_end(collective=self.args.world_size > 1)
            return batches, self._get_num_items_in_batch(batches, device)

        def training_step(self, model, inputs, num_items_in_batch=None):
            rec.training_step_begin(collective=self.args.world_size > 1)
            out = super().training_step(model, inputs, num_items_in_batch)
            rec.training_step_end(sync=self.accelerator.gradient_state.sync_gradients)
            return out

    rep.phase("trainer_setup")
    step_ends: List[float] = []  # the same cheap estimator in both arms of the overhead benchmark
    step_on: List[bool] = []  # was the instrumentation on during that step (--toggle)
    trainer = (Trainer if args.bare else ProbeTrainer)(model=model, args=targs, train_dataset=dataset,
                                                       data_collator=workload.collator(tok, args.seed))
    rec.milestone("model_moved")
    if no_sync:
        # Reproduce Trainers before transformers PR#7742: every micro-step all-reduces.
        trainer.accelerator.no_sync = lambda model=None: contextlib.nullcontext()

    from transformers import TrainerCallback

    beat = _Heartbeat(getattr(rep, "dir", None), rank, args.steps, rec.timer)

    class BareTimes(TrainerCallback):
        def on_train_begin(self, a, state, control, **kw):
            rep.phase("train")

        def on_step_end(self, a, state, control, **kw):
            step_ends.append(time.perf_counter())
            beat.step = state.global_step

    class Events(TrainerCallback):
        def on_train_begin(self, a, state, control, **kw):
            rec.milestone("ddp_wrapped")
            rec.on_train_begin(trainer)
            if sleep_s:
                # Injected straggler: this rank's model forward is slower (hook runs after the recorder's).
                trainer.model.register_forward_pre_hook(lambda *_: time.sleep(sleep_s))
            rep.phase("train")

        def on_step_begin(self, a, state, control, **kw):
            rec.on_step_begin()
            if crash_at is not None and state.global_step + 1 >= crash_at:
                raise RuntimeError(f"ddpdoctor --inject crash: rank {rank} stops at step {state.global_step + 1}")

        def on_substep_end(self, a, state, control, **kw):
            rec.on_substep_end()

        def on_pre_optimizer_step(self, a, state, control, **kw):
            rec.on_pre_optimizer_step()

        def on_step_end(self, a, state, control, **kw):
            step_ends.append(time.perf_counter())
            step_on.append(rec.enabled)
            rec.on_step_end(state.global_step)
            beat.step = state.global_step
            if args.toggle:
                want = (state.global_step // args.toggle) % 2 == 0
                if want != rec.enabled:
                    rec.resume() if want else rec.pause()

        def on_train_end(self, a, state, control, **kw):
            rec.on_train_end()

    trainer.add_callback(BareTimes() if args.bare else Events())
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    trainer.remove_callback(PrinterCallback)  # the launcher's output is ours, not Trainer's log dicts
    trainer.remove_callback(ProgressCallback)
    beat.start()
    try:
        trainer.train()
    finally:
        beat.stop()
        import shutil

        for path in {outdir, tmpdir} - {None}:
            shutil.rmtree(path, ignore_errors=True)
    rec.milestone("train_end")
    rep.phase("report")

    dstate = getattr(targs, "distributed_state", None)
    record.update({
        "rank": rank,
        "world_size": targs.world_size,
        "local_rank": getattr(dstate, "local_process_index", None),
        "device": str(targs.device),
        "model": {"size": size, "parameters": sum(p.numel() for p in model.parameters()), "seq_len": seq_len,
                  "vocab": model.config.vocab_size},
        "config": {"steps": args.steps, "batch_size": args.batch_size, "grad_accum": args.grad_accum,
                   "workers": args.workers, "seed": args.seed, "inject": args.inject,
                   "trainer_args": parse_trainer_args(args.trainer_arg)},
        "trainer": {
            "parallel_mode": str(getattr(targs.parallel_mode, "value", targs.parallel_mode)),
            "world_size": targs.world_size, "process_index": targs.process_index,
            "local_process_index": targs.local_process_index, "n_gpu": targs.n_gpu,
            "distributed_type": str(getattr(getattr(dstate, "distributed_type", None), "value",
                                            getattr(dstate, "distributed_type", None))),
            "train_batch_size": targs.train_batch_size,
            "average_tokens_across_devices": getattr(targs, "average_tokens_across_devices", None),
            "ddp_find_unused_parameters": targs.ddp_find_unused_parameters,
        },
        "threads": {"torch": torch.get_num_threads(), "interop": torch.get_num_interop_threads(),
                    "omp_env_at_start": record["env"].get("OMP_NUM_THREADS"), "omp_env_now": os.environ.get("OMP_NUM_THREADS"),
                    "usable_cpus": _usable_cpus()},
        "logs": [{k: e[k] for k in ("step", "loss", "grad_norm") if k in e}
                 for e in trainer.state.log_history if "loss" in e],
        "injected": faults,
        "step_ends": [round(t, 6) for t in step_ends],
        "step_on": step_on,
    })
    record.update(rec.to_dict())


def _usable_cpus() -> Optional[float]:
    try:
        from ddpdoctor.gather import Sources
        from ddpdoctor.gather.host import cgroup_cpu_limit

        affinity = len(os.sched_getaffinity(0))
        quota = cgroup_cpu_limit(Sources()).get("quota_cpus")
        return min(affinity, quota) if quota else affinity
    except Exception:  # noqa: BLE001
        return os.cpu_count()


# ---------------------------------------------------------------------------------- entry point

def main(argv: Optional[List[str]] = None) -> None:
    """`python -m ddpdoctor.probe`: one rank. Records its uncaught error for torch elastic."""
    started = process_start_epoch()
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        from torch.distributed.elastic.multiprocessing.errors import record as elastic_record
    except Exception:  # noqa: BLE001
        def elastic_record(fn):
            return fn

    from ddpdoctor.launch import ENV_DIR, Reporter

    launched = bool(os.environ.get(ENV_DIR))
    if not launched and os.environ.get("SLURM_PROCID") is not None and "TORCHELASTIC_RUN_ID" not in os.environ:
        try:  # srun without torchrun: derive RANK, WORLD_SIZE, LOCAL_RANK, MASTER_* from SLURM_*
            from ddpdoctor.comm.envmap import torch_env

            for key, value in torch_env(os.environ).items():
                os.environ.setdefault(key, value)
        except ImportError:
            pass
    reporter = Reporter.from_env() if launched else None

    @elastic_record
    def _main() -> dict:
        return run_rank(argv, started, reporter)

    rec = _main()
    args = build_parser().parse_args(argv)
    if not args.out and not launched:
        _worker_report(rec, args)
    _leave(0)


def _worker_report(rec: dict, args) -> None:
    """Under a user's torchrun/srun: gather every rank's record to rank 0 and print the report."""
    records = [rec]
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            gathered: List[Any] = [None] * dist.get_world_size()
            dist.all_gather_object(gathered, rec)
            records = [r for r in gathered if r]
    except Exception as exc:  # noqa: BLE001 - report what we have
        print(f"ddpdoctor probe: could not gather the other ranks' records: {exc}", file=sys.stderr)
    if rec.get("rank", 0) != 0:
        return
    from ddpdoctor.probe.report import report_from_records

    report = report_from_records({args.mode: records}, trace_path=args.trace)
    from ddpdoctor.pipeline.render import render

    print(render(report, "json" if args.json else "text"), flush=True)


def _leave(code: int) -> None:
    """Exit without running Gloo's destructors (pytorch#190489), after a bounded barrier."""
    try:
        import torch.distributed as dist

        if dist.is_initialized() and dist.get_world_size() > 1:
            import datetime

            if dist.get_backend() == "gloo":
                dist.monitored_barrier(timeout=datetime.timedelta(seconds=10))
            else:
                dist.barrier()
    except Exception:  # noqa: BLE001
        pass
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
