"""Reusable timing pieces for a training loop: where does each optimizer step's time go?

Three parts, usable on their own or together, with no dependency on the rest of ddpdoctor:

- `PhaseTimer`: splits each step into *contiguous* phases. Every `enter(phase)` closes the phase
  that was running and opens the next one, so the parts always sum to the step total exactly; the
  question "did we miss anything?" is answered by how much lands in the catch-all phase `other`.
  On the CPU it reads `time.perf_counter`; on a GPU it records CUDA events on the current stream,
  so a phase measures what the device did between two points of the host program (kernels run
  asynchronously, so host clocks would only measure how fast Python enqueues them). Events are
  resolved one step late, never with a device-wide synchronize inside the step.
- `AllReduceProbe`: a DDP communication hook that does exactly what DDP's built-in hook does
  (average each gradient bucket with one all_reduce) while counting the buckets, the bytes and the
  rounds of buckets per optimizer step, and timing each bucket from launch to completion. A round
  ends at the bucket DDP marks `is_last()`; with gradient accumulation and a working `no_sync`
  there is one round per optimizer step, without it one round per micro-step (transformers
  PR#7742, pytorch#43201).
- `StepRecorder`: ties the two to a Hugging Face `Trainer` through callback events
  (`on_step_begin`, `on_substep_end`, `on_pre_optimizer_step`, `on_step_end`) and forward hooks,
  and keeps start-up milestones (wall-clock epochs so that ranks line up on one time axis).
  `trainer_callback(recorder, trainer)` returns a real `transformers.TrainerCallback`. A Trainer
  subclass can call `data_begin/data_end/training_step_begin/training_step_end` for sharper
  boundaries (ddpdoctor's probe does).

Nothing here imports torch or transformers at module import time.

Phases of one optimizer step (names are stable; reports and checks key on them):
    data       waiting for the next batch(es) from the DataLoader
    forward    input preparation and the model's forward pass (loss included)
    backward   autograd until the last gradient bucket is ready (all-reduce overlaps this part)
    sync       other collectives the loop waits on before computing: Trainer's gather of every rank's
               token count after the data fetch, and DDP's pre-forward work (buffer broadcast when
               broadcast_buffers=True); a fast rank waits here for a rank that is slow to load data
    allreduce  exposed gradient communication: from the launch of the last bucket until DDP has
               every bucket back (this includes waiting for slower peers to launch theirs)
    optimizer  gradient clipping, optimizer.step, scheduler, zero_grad
    other      everything else (logging, callbacks, loop overhead)
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, Dict, List, Optional

PHASES = ("data", "sync", "forward", "backward", "allreduce", "optimizer", "other")


# ------------------------------------------------------------------------------------------ clocks

class HostClock:
    """perf_counter marks; elapsed is known at once."""

    kind = "host"

    def now(self) -> float:
        return time.perf_counter()

    @staticmethod
    def elapsed_ms(a: float, b: float) -> float:
        return (b - a) * 1000.0

    @staticmethod
    def ready(_mark: Any) -> bool:
        return True


class CudaClock:
    """CUDA events recorded on the current stream; elapsed needs both events complete."""

    kind = "cuda"

    def __init__(self) -> None:
        import torch

        self._torch = torch

    def now(self) -> Any:
        ev = self._torch.cuda.Event(enable_timing=True)
        ev.record()
        return ev

    @staticmethod
    def elapsed_ms(a: Any, b: Any) -> float:
        b.synchronize()
        return float(a.elapsed_time(b))

    @staticmethod
    def ready(mark: Any) -> bool:
        return bool(mark.query())


def make_clock(device: Any = None) -> Any:
    """CUDA events for a CUDA device, perf_counter otherwise."""
    if device is not None and getattr(device, "type", str(device).split(":")[0]) == "cuda":
        return CudaClock()
    return HostClock()


# ------------------------------------------------------------------------------------------ phases

class PhaseTimer:
    """Contiguous phase marks within steps. Thread-safe: DDP hooks may fire on autograd threads."""

    def __init__(self, clock: Any = None) -> None:
        self.clock = clock or HostClock()
        self._lock = threading.Lock()
        self._marks: Optional[list] = None  # [[phase, mark], ...] of the open step
        self._start_epoch = 0.0
        self._pending: list = []  # closed steps whose CUDA events may not be complete yet
        self.records: List[dict] = []
        self.entered_at = 0.0  # wall-clock epoch of the last phase change (for watchdogs)

    @property
    def active(self) -> bool:
        return self._marks is not None

    def begin_step(self, phase: str = "other") -> None:
        with self._lock:
            self._start_epoch = self.entered_at = time.time()
            self._marks = [[phase, self.clock.now()]]

    def enter(self, phase: str, latest: bool = False) -> None:
        """Close the running phase and open `phase`. Entering the running phase again is a no-op,
        unless `latest` is set: then the running phase restarts now and the time since its previous
        start goes to the phase before it (used for "the last bucket was launched at ...")."""
        with self._lock:
            marks = self._marks
            if marks is None:
                return
            if marks[-1][0] == phase:
                if latest and len(marks) > 1:
                    marks[-1][1] = self.clock.now()
                return
            marks.append([phase, self.clock.now()])
            self.entered_at = time.time()

    def current(self) -> Optional[str]:
        marks = self._marks
        return marks[-1][0] if marks else None

    def end_step(self, **extra: Any) -> None:
        """Close the step. `extra` (step number, counters, ...) is stored with its record."""
        with self._lock:
            marks = self._marks
            if marks is None:
                return
            marks.append(["<end>", self.clock.now()])
            self._marks = None
            self._pending.append((self._start_epoch, marks, extra))
        self._resolve(force=False)

    def flush(self) -> List[dict]:
        """Resolve every closed step (waits for outstanding CUDA events) and return all records."""
        self._resolve(force=True)
        return self.records

    def _resolve(self, force: bool) -> None:
        clock = self.clock
        while self._pending:
            start_epoch, marks, extra = self._pending[0]
            # One step late on a GPU: the previous step's events are complete by now in practice.
            if not force and len(self._pending) < 2 and not clock.ready(marks[-1][1]):
                return
            self._pending.pop(0)
            seq = []
            phases: Dict[str, float] = {}
            for (phase, a), (_next, b) in zip(marks, marks[1:]):
                ms = max(0.0, clock.elapsed_ms(a, b))
                phases[phase] = phases.get(phase, 0.0) + ms
                seq.append([phase, round(ms, 4)])
            total = clock.elapsed_ms(marks[0][1], marks[-1][1])
            rec = {"start": round(start_epoch, 6), "total_ms": round(total, 4),
                   "phases": {k: round(v, 4) for k, v in phases.items()}, "seq": seq}
            for key, value in extra.items():
                rec[key] = value() if callable(value) else value
            self.records.append(rec)


# ------------------------------------------------------------------------------------------ DDP hook

class AllReduceProbe:
    """A DDP comm hook identical in effect to DDP's default (bucket /= world; all_reduce), counted
    and timed. Attach with `probe.attach(ddp_model)` before the first backward."""

    def __init__(self, timer: Optional[PhaseTimer] = None, process_group: Any = None,
                 clock: Any = None) -> None:
        self.timer = timer
        self.process_group = process_group
        self.clock = clock or (timer.clock if timer else HostClock())
        self._lock = threading.Lock()
        self._reset()
        self.bucket_bytes: Dict[int, int] = {}  # bucket index -> bytes, from the first round
        self.enabled = True  # False: behave exactly like DDP's default hook, measure nothing

    def _reset(self) -> None:
        self.calls = 0
        self.rounds = 0
        self.bytes = 0
        self._spans: list = []  # (launch mark, done mark or None)
        self._last: list = [None, None]  # wall-clock epochs of the last bucket's launch and completion

    def attach(self, ddp_model: Any) -> "AllReduceProbe":
        ddp_model.register_comm_hook(state=self.process_group, hook=self.hook)
        return self

    def hook(self, state, bucket):  # no annotations: DDP rejects any but its own (strings included)
        """The comm hook: DDP calls it once per gradient bucket, as soon as the bucket is ready."""
        import torch.distributed as dist

        tensor = bucket.buffer()
        group = state if state is not None else dist.group.WORLD
        if not self.enabled:  # exactly torch's default_hooks.allreduce_hook
            tensor.div_(dist.get_world_size(group))
            return dist.all_reduce(tensor, group=group, async_op=True).get_future().then(lambda f: f.value()[0])
        launch = self.clock.now()
        wall = time.time()
        if self.timer is not None:
            self.timer.enter("allreduce", latest=True)
        with self._lock:
            self.calls += 1
            nbytes = tensor.numel() * tensor.element_size()
            self.bytes += nbytes
            self.bucket_bytes.setdefault(bucket.index(), nbytes)
            if bucket.is_last():
                self.rounds += 1
            span = [launch, None]
            self._spans.append(span)
            last = [wall, None]
            self._last = last
        tensor.div_(dist.get_world_size(group))
        fut = dist.all_reduce(tensor, group=group, async_op=True).get_future()

        def done(f):
            span[1] = self.clock.now()
            last[1] = time.time()
            return f.value()[0]

        return fut.then(done)

    def take(self) -> Callable[[], dict]:
        """The counters of the step that just ended, reset for the next. Returned as a callable so
        that CUDA events are read only when the step record is resolved."""
        with self._lock:
            calls, rounds, nbytes, spans, last = self.calls, self.rounds, self.bytes, self._spans, self._last
            self._reset()
        clock = self.clock

        def resolve() -> dict:
            busy = 0.0
            for a, b in spans:
                if b is not None:
                    busy += max(0.0, clock.elapsed_ms(a, b))
            out = {"calls": calls, "rounds": rounds, "bytes": nbytes, "busy_ms": round(busy, 4)}
            if clock.kind == "host" and last[0] is not None:
                # Epochs let an analysis line ranks up: nobody's all-reduce can finish before the
                # last rank launched its bucket, so the difference is time spent waiting for peers.
                out["last_launch"], out["last_done"] = last[0], last[1]
            return out

        return resolve


# ------------------------------------------------------------------------------------------ recorder

class StepRecorder:
    """Per-rank step and start-up recorder for a Trainer (or any loop that calls its events).

    Milestones are wall-clock epochs (`time.time()`), comparable across processes on one host and,
    with synchronised clocks, across hosts. Step records come from `PhaseTimer`.
    """

    def __init__(self, device: Any = None, precise: bool = False) -> None:
        self.timer = PhaseTimer(make_clock(device))
        self.comm: Optional[AllReduceProbe] = None
        self.precise = precise  # a Trainer subclass marks data and training_step boundaries itself
        self.enabled = True  # pause()/resume(): the overhead benchmark alternates within one run
        self.milestones: Dict[str, float] = {}
        self.ddp: Dict[str, Any] = {}
        self.unused_parameters: Optional[List[str]] = None
        self._model: Any = None
        self._handles: list = []
        self._step = 0

    # -- start-up --------------------------------------------------------------------------------
    def milestone(self, name: str, when: Optional[float] = None) -> None:
        """Record a start-up milestone once (the first time wins)."""
        self.milestones.setdefault(name, time.time() if when is None else when)

    # -- attaching -------------------------------------------------------------------------------
    def attach_model(self, model: Any) -> None:
        """Forward hooks on the (unwrapped) model: the end of forward opens `backward`."""
        if self._model is model:
            return
        self._model = model
        self._handles.append(model.register_forward_pre_hook(self._fwd_pre))
        self._handles.append(model.register_forward_hook(self._fwd_post))

    def attach_ddp(self, ddp_model: Any, comm_hook: bool = True) -> None:
        """Read the DDP wrapper's settings and (optionally) install the timing comm hook."""
        self.ddp = ddp_facts(ddp_model)
        if comm_hook and self.comm is None and self.ddp.get("is_ddp"):
            self.comm = AllReduceProbe(self.timer, clock=self.timer.clock).attach(ddp_model)

    def pause(self) -> None:
        """Stop measuring (at a step boundary): events become no-ops, the comm hook a plain all-reduce."""
        self.enabled = False
        self.timer._marks = None
        if self.comm is not None:
            self.comm.enabled = False
            self.comm.take()

    def resume(self) -> None:
        """Measure again from now on (call at a step boundary, e.g. right after on_step_end)."""
        self.enabled = True
        if self.comm is not None:
            self.comm.enabled = True
        self.timer.begin_step("other" if self.precise else "data")

    def detach(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()

    def _fwd_pre(self, _module, _inputs):
        if not self.enabled:
            return
        self.timer.enter("forward")

    def _fwd_post(self, _module, _inputs, _output):
        if not self.enabled:
            return
        self.timer.enter("backward")

    # -- precise marks (a Trainer subclass) -------------------------------------------------------
    def data_begin(self) -> None:
        if not self.enabled:
            return
        if not self.timer.active:
            self.timer.begin_step("data")
        self.timer.enter("data")

    def data_end(self, collective: bool = True) -> None:
        """After the batches were fetched. The Trainer then gathers token counts across ranks."""
        if not self.enabled:
            return
        self.timer.enter("sync" if collective else "other")

    def training_step_begin(self, collective: bool = False) -> None:
        """Before input preparation and the DDP wrapper's forward. With `collective`, the time until
        the inner model's forward starts counts as `sync` (DDP broadcasts buffers there)."""
        if not self.enabled:
            return
        self.timer.enter("sync" if collective else "forward")

    def training_step_end(self, sync: bool) -> None:
        """After loss.backward() returned (DDP has waited for its all-reduces by then)."""
        if not self.enabled:
            return
        self.timer.enter("optimizer" if sync else "other")
        if sync and self.unused_parameters is None and self._model is not None:
            self.unused_parameters = unused_parameter_names(self._model)

    # -- Trainer callback events ------------------------------------------------------------------
    def on_train_begin(self, trainer: Any = None) -> None:
        self.milestone("train_begin")
        if trainer is not None:
            wrapped = getattr(trainer, "model_wrapped", None)
            self.attach_model(trainer.model)
            if wrapped is not None:
                self.attach_ddp(wrapped)
        if not self.timer.active:
            self.timer.begin_step("other" if self.precise else "data")

    def on_step_begin(self) -> None:
        if not self.enabled:
            return
        if not self.timer.active:
            self.timer.begin_step("forward")
        self.timer.enter("forward")

    def on_substep_end(self) -> None:
        if not self.enabled:
            return
        self.timer.enter("forward")

    def on_pre_optimizer_step(self) -> None:
        if not self.enabled:
            return
        self.timer.enter("optimizer")
        if self.unused_parameters is None and self._model is not None:
            self.unused_parameters = unused_parameter_names(self._model)

    def on_step_end(self, global_step: Optional[int] = None) -> None:
        if not self.enabled:
            return
        self._step += 1
        step = global_step if global_step is not None else self._step
        extra: Dict[str, Any] = {"step": step}
        if self.comm is not None:
            extra["comm"] = self.comm.take()
        self.timer.end_step(**extra)
        if step == 1:
            self.milestone("first_step_end")
        self.timer.begin_step("other" if self.precise else "data")

    def on_train_end(self) -> None:
        self.timer._marks = None  # drop the step opened after the last on_step_end
        self.milestone("train_end")

    # -- results ----------------------------------------------------------------------------------
    def steps(self) -> List[dict]:
        return self.timer.flush()

    def to_dict(self) -> dict:
        return {"clock": self.timer.clock.kind, "milestones": dict(self.milestones), "ddp": dict(self.ddp),
                "unused_parameters": self.unused_parameters, "steps": self.steps(),
                "bucket_bytes": sorted((self.comm.bucket_bytes if self.comm else {}).values(), reverse=True)}


def ddp_facts(model: Any) -> dict:
    """The DDP settings that matter for speed, read from a (possibly) DDP-wrapped model."""
    name = type(model).__name__
    facts: Dict[str, Any] = {"wrapper": name, "is_ddp": name == "DistributedDataParallel"}
    for attr in ("find_unused_parameters", "static_graph", "gradient_as_bucket_view", "broadcast_buffers",
                 "bucket_bytes_cap"):
        if hasattr(model, attr):
            value = getattr(model, attr)
            facts[attr] = value if isinstance(value, (bool, int, float, str)) or value is None else str(value)
    if name == "DataParallel":
        facts["device_ids"] = list(getattr(model, "device_ids", []) or [])
    return facts


def unused_parameter_names(model: Any) -> List[str]:
    """Parameters that require a gradient but got none in the last backward: DDP's "unused"."""
    return [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]


def trainer_callback(recorder: StepRecorder, trainer: Any = None):
    """A `transformers.TrainerCallback` that drives `recorder`. Pass the Trainer so that the DDP
    wrapper (created inside `train()`) gets the timing comm hook at `on_train_begin`."""
    from transformers import TrainerCallback

    class _RecorderCallback(TrainerCallback):
        def on_train_begin(self, args, state, control, **kw):
            recorder.on_train_begin(trainer)

        def on_step_begin(self, args, state, control, **kw):
            recorder.on_step_begin()

        def on_substep_end(self, args, state, control, **kw):
            recorder.on_substep_end()

        def on_pre_optimizer_step(self, args, state, control, **kw):
            recorder.on_pre_optimizer_step()

        def on_step_end(self, args, state, control, **kw):
            recorder.on_step_end(state.global_step)

        def on_train_end(self, args, state, control, **kw):
            recorder.on_train_end()

    return _RecorderCallback()
