"""`DoctorCallback`: ddpdoctor inside an unmodified Hugging Face Trainer.

    trainer = Trainer(model=model, args=args, train_dataset=ds, callbacks=[DoctorCallback()])

- on_train_begin: runs `ddpdoctor.preflight()` with the Trainer's args, model (and its DDP
  wrapper) and train DataLoader, and installs the fork guard before the DataLoader forks.
- the first `steps` optimizer steps (default 20): times data wait, forward, backward, exposed
  all-reduce and optimizer with the probe's instrument (`ddpdoctor.instrument.StepRecorder`: a
  timing DDP comm hook that counts all-reduce rounds per optimizer step, plus forward hooks), and
  notes parameters that got no gradient in the first backward.
- after those steps: every rank puts its record in the process group's store once; rank 0
  collects them (bounded wait), builds a `probe` section and judges it with the probe's own
  verdict checks (PRB004 comm-bound, PRB005 input-bound, PRB007 straggler, PRB008 find_unused
  overhead, PRB009 accumulation without no_sync) plus RT031 (unused parameters vs DDP settings).

Nothing here raises into the training loop unless `fail_on` asks preflight to.
"""
from __future__ import annotations

import json
import socket
import sys
from typing import Any, Optional

try:
    from transformers import TrainerCallback
except Exception:  # noqa: BLE001 - importing this module without transformers must not crash
    TrainerCallback = object  # type: ignore[misc,assignment]



def _find_trainer() -> Any:
    """The Trainer calling us: the callback API passes args, model and dataloaders, not the
    Trainer, and the DDP wrapper (where the comm hook goes) lives only on `trainer.model_wrapped`."""
    tf = sys.modules.get("transformers")
    trainer_cls = getattr(tf, "Trainer", None) if tf else None
    f = sys._getframe(1)
    for _ in range(30):
        if f is None:
            break
        obj = f.f_locals.get("self")
        if trainer_cls is not None and isinstance(obj, trainer_cls):
            return obj
        f = f.f_back
    return None


class DoctorCallback(TrainerCallback):
    """Runs preflight at on_train_begin and judges the first `steps` steps. Zero-argument use
    works; `trainer=` skips the stack lookup. `stall_after=S` also starts the stall localizer of
    `ddpdoctor run` in-process: once no rank has progressed for S seconds, rank 0 names the rank and
    the line through the job's own store (see ddpdoctor/run/inprocess.py)."""

    def __init__(self, steps: int = 20, fail_on: Optional[str] = None, log: Any = True, trainer: Any = None,
                 measure: bool = True, peer_timeout_s: float = 10.0, preflight_kwargs: Optional[dict] = None,
                 stall_after: Optional[float] = None):
        if stall_after is not None and not stall_after > 0:
            raise ValueError(f"stall_after must be > 0, not {stall_after!r}")
        self.stall_after = stall_after  # the stall localizer of `ddpdoctor run`, in-process (run/inprocess.py)
        self.stall_watch = None
        self.steps = max(2, int(steps))
        self.fail_on = fail_on
        self.log = log
        self.trainer = trainer
        self.measure = measure
        self.peer_timeout_s = peer_timeout_s
        self.preflight_kwargs = dict(preflight_kwargs or {})
        self.preflight_report = None
        self.steps_report = None
        self.recorder = None
        self._done = False
        self._seen = 0
        self._unused_checked = False
        self.unused_findings = None
        self._grad_accum = 1
        self._record_extra: dict = {}

    # -- events ----------------------------------------------------------------------------------
    def on_train_begin(self, args, state, control, model=None, train_dataloader=None, processing_class=None, **kw):
        from ddpdoctor.inprocess.preflight import preflight

        trainer = self.trainer or _find_trainer()
        self.trainer = trainer
        if self.stall_after is not None and self.stall_watch is None:
            try:
                from ddpdoctor.run.inprocess import StallWatch

                self.stall_watch = StallWatch(self.stall_after, log=self.log,
                                              peer_timeout_s=self.peer_timeout_s).start()
            except Exception as exc:  # noqa: BLE001 - the doctor never breaks the run
                self._record_extra["stall_watch_error"] = f"{type(exc).__name__}: {exc}"
        self.preflight_report = preflight(trainer=trainer, args=args, model=model, dataloader=train_dataloader,
                                          tokenizer=processing_class, fail_on=self.fail_on, log=self.log,
                                          when="train_begin", peer_timeout_s=self.peer_timeout_s,
                                          **self.preflight_kwargs)
        if not self.measure:
            self._done = True
            return
        try:
            from ddpdoctor.inprocess.instrument import StepRecorder

            self.recorder = StepRecorder(device=getattr(args, "device", None), precise=trainer is not None)
            if trainer is not None:
                self._wrap(trainer, self.recorder, int(getattr(args, "world_size", 1) or 1))
            self.recorder.on_train_begin(trainer)
        except Exception as exc:  # noqa: BLE001 - e.g. the user already registered a comm hook
            self._record_extra["instrument_error"] = f"{type(exc).__name__}: {exc}"
            if self.recorder is not None and self.recorder.comm is None and trainer is not None:
                self.recorder.attach_model(trainer.model)
        self._grad_accum = int(getattr(args, "gradient_accumulation_steps", 1) or 1)
        self._record_extra.update({
            "config": {"grad_accum": self._grad_accum, "workers": getattr(args, "dataloader_num_workers", None),
                       "batch_size": getattr(args, "per_device_train_batch_size", None)},
            "trainer": {k: _plain(getattr(args, k, None)) for k in
                        ("parallel_mode", "world_size", "process_index", "local_process_index",
                         "ddp_find_unused_parameters", "train_batch_size")},
        })

    def on_step_begin(self, args, state, control, **kw):
        if self.recorder is not None and not self._done:
            self.recorder.on_step_begin()

    def on_substep_end(self, args, state, control, **kw):
        if self.recorder is not None and not self._done:
            self.recorder.on_substep_end()

    def on_pre_optimizer_step(self, args, state, control, **kw):
        if self.recorder is not None and not self._done:
            self.recorder.on_pre_optimizer_step()
            if not self._unused_checked and self.recorder.unused_parameters is not None:
                self._unused_checked = True
                self._check_unused_now()

    def _check_unused_now(self) -> None:
        """F2 cannot wait for the end of the measured steps: with find_unused_parameters=False,
        DDP fails at the very next forward. Judge it on this rank right after the first backward."""
        rec = self.recorder
        if not rec.unused_parameters:
            return
        try:
            from ddpdoctor.pipeline.judge import judge
            from ddpdoctor.gather.launcher import launcher_from_env
            from ddpdoctor.inprocess.preflight import emit_findings
            from ddpdoctor.pipeline.snapshot import Snapshot
            import os

            steps = {"unused_parameters": rec.unused_parameters, "ddp": bool(rec.ddp.get("is_ddp")),
                     "find_unused_parameters": rec.ddp.get("find_unused_parameters")}
            snap = Snapshot(sections={"runtime_steps": steps, "launcher": launcher_from_env(dict(os.environ)),
                                      "runtime": {"distributed": {"initialized": True, "rank": _rank()}}})
            report = judge(snap, command="preflight-steps", only={"RT031"})
            self.unused_findings = [f.to_dict() for f in report.findings]
            emit_findings(report.findings, rank=_rank(), log=self.log,
                          header="ddpdoctor DoctorCallback: after the first backward")
        except Exception:  # noqa: BLE001
            pass

    def on_step_end(self, args, state, control, **kw):
        rec = self.recorder
        if rec is None:
            return
        if self._done:
            if rec.comm is not None:
                rec.comm.take()  # the hook stays registered (DDP cannot remove it): drop its spans
            return
        rec.on_step_end(state.global_step)
        self._seen += 1
        if self._seen >= self.steps:
            self._finish(args)

    def on_train_end(self, args, state, control, **kw):
        if self.stall_watch is not None:
            self.stall_watch.stop()
        if not self._done and self.recorder is not None:
            self._finish(args)

    # -- sharper phase boundaries --------------------------------------------------------------
    def _wrap(self, trainer, rec, world: int) -> None:
        """Mark the batch fetch, the token-count all-gather that follows it, and training_step by
        wrapping three methods of this Trainer *instance* (restored after the measured steps).
        Without them "data" would also hold the wait for slower ranks in that all-gather."""
        self._wrapped = []

        def wrap(name, before=None, after=None):
            orig = getattr(trainer, name, None)
            if not callable(orig) or name in vars(trainer):
                return

            def wrapper(*a, **k):
                if before is not None:
                    before()
                try:
                    return orig(*a, **k)
                finally:
                    if after is not None:
                        after()

            setattr(trainer, name, wrapper)
            self._wrapped.append((trainer, name))

        wrap("get_batch_samples", before=rec.data_begin)
        wrap("_get_num_items_in_batch", before=lambda: rec.data_end(collective=world > 1))
        sync = lambda: bool(getattr(getattr(getattr(trainer, "accelerator", None), "gradient_state", None),  # noqa: E731
                                    "sync_gradients", True))
        wrap("training_step", before=rec.training_step_begin, after=lambda: rec.training_step_end(sync=sync()))
        self._wrap_compute_loss(trainer)

    def _wrap_compute_loss(self, trainer) -> None:
        """At the first compute_loss only: does the model's loss ignore num_items_in_batch while Trainer
        multiplies it by the world size (PRB010 in the user's run; ddpdoctor/inprocess/loss_scaling.py)."""
        orig = getattr(trainer, "compute_loss", None)
        if not callable(orig) or "compute_loss" in vars(trainer):
            return
        done = []

        def compute_loss(model, inputs, *a, **k):
            saved = dict(inputs.items()) if not done and hasattr(inputs, "items") else None
            result = orig(model, inputs, *a, **k)
            if not done:
                done.append(True)
                try:
                    from ddpdoctor.inprocess.loss_scaling import measure

                    items = k.get("num_items_in_batch", a[1] if len(a) > 1 else None)
                    self._record_extra["loss_scaling"] = measure(trainer, model, saved, items, result)
                except Exception:  # noqa: BLE001 - the doctor never breaks the run
                    pass
            return result

        setattr(trainer, "compute_loss", compute_loss)
        self._wrapped.append((trainer, "compute_loss"))

    def _unwrap(self) -> None:
        for obj, name in getattr(self, "_wrapped", []):
            try:
                delattr(obj, name)
            except AttributeError:
                pass
        self._wrapped = []

    # -- end of measurement ----------------------------------------------------------------------
    def _finish(self, args) -> None:
        self._done = True
        rec = self.recorder
        self._unwrap()
        rec.on_train_end()
        rec.detach()
        try:
            self.steps_report = judge_steps(self._record(rec, args), timeout_s=self.peer_timeout_s, log=self.log)
        except Exception as exc:  # noqa: BLE001 - the doctor never breaks the run
            self._record_extra["judge_error"] = f"{type(exc).__name__}: {exc}"

    def _record(self, rec, args) -> dict:
        rank = _rank()
        out = rec.to_dict()
        out.update(self._record_extra)
        try:  # what Trainer logged so far (PRB010 quotes it)
            history = self.trainer.state.log_history if self.trainer is not None else []
            out["logs"] = [{k: e[k] for k in ("step", "loss", "grad_norm") if k in e} for e in history
                           if "loss" in e][:5]
        except Exception:  # noqa: BLE001
            pass
        out.update({"rank": rank, "host": socket.gethostname(), "complete": True,
                    "device": str(getattr(args, "device", "cpu"))})
        return out


def _plain(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    value = getattr(v, "value", None)
    return value if isinstance(value, (str, int)) else str(v)


def _rank() -> int:
    """This process's rank: the process group's, else the launcher's RANK (without a process group,
    rank 1 of a torchrun job must not call itself rank 0)."""
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_rank()
    except Exception:  # noqa: BLE001
        pass
    import os

    for name in ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"):
        try:
            return int(os.environ[name])
        except (KeyError, ValueError):
            continue
    return 0


def gather_records(record: dict, timeout_s: float = 10.0, label: str = "callback") -> Optional[list]:
    """Every rank's step record on rank 0 (None elsewhere), through the c10d store, once."""
    from ddpdoctor.inprocess.runtime.peers import _calls, _store_and_group, gather_ranks

    store, rank, world = _store_and_group()
    if store is None or world <= 1:
        return [record]
    n = _calls[label] = _calls.get(label, 0) + 1
    prefix = f"ddpdoctor/{label}/{n}/"
    store.set(prefix + str(rank), json.dumps(record, default=str))
    if rank != 0:
        return None
    got, missing = gather_ranks(store, prefix, world, timeout_s)
    records = [got[r] for r in sorted(got)]
    for r in missing:
        records.append({"rank": r, "complete": False, "error": f"did not report within {timeout_s:g} s"})
    return records


def steps_sections(records: list, grad_accum: int = 1) -> dict:
    """The `probe` section (for the probe's PRB verdicts) and `runtime_steps` (for RT031)."""
    from ddpdoctor.probe.analyze import probe_section

    world = len(records)
    config = {"grad_accum": grad_accum, "steps": max((len(r.get("steps") or []) for r in records), default=0),
              "command": "DoctorCallback"}
    probe = probe_section({"trainer": {"ranks": records, "nproc": world, "status": "ok"}}, config,
                          main="trainer", baseline="none")
    mine = next((r for r in records if r.get("rank") == _rank()), records[0] if records else {})
    ddp = mine.get("ddp") or {}
    steps = {"steps_measured": config["steps"], "grad_accum": grad_accum,
             "unused_parameters": mine.get("unused_parameters"), "ddp": bool(ddp.get("is_ddp")),
             "find_unused_parameters": ddp.get("find_unused_parameters")}
    return {"probe": probe, "runtime_steps": steps}


def judge_steps(record: dict, timeout_s: float = 10.0, log: Any = True):
    """Collect the records on rank 0 and judge them there; other ranks return None."""
    from ddpdoctor.inprocess.preflight import emit_findings
    from ddpdoctor.pipeline.judge import judge
    from ddpdoctor.pipeline.runner import ids_for
    from ddpdoctor.pipeline.snapshot import Snapshot

    records = gather_records(record, timeout_s=timeout_s)
    if records is None:
        return None
    grad_accum = ((record.get("config") or {}).get("grad_accum")) or 1
    sections = steps_sections(records, grad_accum)
    report = judge(Snapshot(sections=sections), command="preflight-steps", only=ids_for("step"), when="step")
    from ddpdoctor.inprocess import forkguard

    report.extra["fork_guard"] = forkguard.summary()
    report.extra["loss_scaling"] = record.get("loss_scaling")
    report.extra["steps"] = {"ranks": {str(r.get("rank")): {k: r.get(k) for k in ("step_ms", "phases_ms", "comm")}
                                       for r in sections["probe"]["modes"]["trainer"]["ranks"]}}
    n = sections["runtime_steps"]["steps_measured"]
    ranks = sections["probe"]["modes"]["trainer"]["ranks"]
    header = f"ddpdoctor DoctorCallback: first {n} steps on {len(records)} rank(s)"
    # without a process group every process judges its own record: label it with its own rank
    me = records[0].get("rank", 0) if len(records) == 1 else 0
    shown = emit_findings(report.findings, rank=me if isinstance(me, int) else 0, log=log,
                          header=lambda shown: f"{header}: {len(shown)} finding(s); {breakdown(ranks)}")
    if not shown and not report.findings:
        if log is not False and log is not None:
            (log if callable(log) else _stderr)(f"{header}: no issues found; {breakdown(ranks)}")
    return report


def _stderr(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def breakdown(ranks: list) -> str:
    """'rank 0: 26.8 ms/step (data 17%, forward 14%, ...), 1 all-reduce round/step; rank 1: ...'"""
    parts = []
    for r in ranks:
        if not r.get("step_ms"):
            parts.append(f"rank {r.get('rank')}: no steps ({r.get('error') or 'not measured'})")
            continue
        shares = ", ".join(f"{k} {v:.0%}" for k, v in (r.get("shares") or {}).items() if v >= 0.005)
        rounds = (r.get("comm") or {}).get("rounds_per_step")
        comm = f", {rounds:g} all-reduce round(s)/step" if rounds is not None else ""
        parts.append(f"rank {r.get('rank')}: {r['step_ms']:.1f} ms/step ({shares}){comm}")
    return "; ".join(parts)
