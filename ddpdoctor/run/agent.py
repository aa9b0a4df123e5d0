"""The attach side of `ddpdoctor run`, loaded by `_site/sitecustomize.py` when DDPDOCTOR_RUN_DIR is
set: the recorder (recorder.py) plus the Trainer hook, which adds DoctorCallback to every Trainer.

(Split from recorder.py so that DoctorCallback's in-process stall watch, which uses the recorder,
does not import this module back.)
"""
from __future__ import annotations

import os
import sys

from . import recorder
from .recorder import ENV_CALLBACK, ENV_DIR, ENV_MEASURE, ENV_PREFLIGHT, ENV_SIGNAL, ENV_SPLIT_EVERY, S, _log_once, default_signal  # noqa: F401

__all__ = ["install", "ENV_DIR", "ENV_SIGNAL", "ENV_PREFLIGHT", "ENV_CALLBACK", "ENV_MEASURE", "ENV_SPLIT_EVERY", "default_signal"]


def install() -> None:
    recorder.PATCHES.setdefault("transformers.trainer", _patch_trainer)
    recorder.install()


def _patch_trainer(mod) -> None:
    import functools

    trainer_cls = getattr(mod, "Trainer", None)
    if trainer_cls is None or getattr(trainer_cls.__init__, "__ddpdoctor_wrapped__", False):
        return
    orig = trainer_cls.__init__

    @functools.wraps(orig)
    def __init__(self, *a, **k):
        try:
            orig(self, *a, **k)
        except BaseException as exc:
            recorder._hide(exc)
            raise
        if S.off or os.environ.get(ENV_CALLBACK) == "0":
            return
        try:
            from ..inprocess.callback import DoctorCallback

            callbacks = getattr(getattr(self, "callback_handler", None), "callbacks", [])
            if not any(isinstance(c, DoctorCallback) for c in callbacks):
                # measure=False: its step timing leaves a Python DDP comm hook on every all-reduce for
                # the rest of the run (~10% of a 20 ms CPU step); `ddpdoctor run --measure-steps` opts in.
                # One callback, not two: the Trainer calls every callback at every event (~2 us each).
                self.add_callback(_run_doctor_class()(trainer=self, measure=os.environ.get(ENV_MEASURE) == "1"))
            else:
                self.add_callback(_run_callback_class()())
        except Exception as exc:  # noqa: BLE001
            _log_once("adding DoctorCallback", exc)

    __init__.__ddpdoctor_wrapped__ = True
    trainer_cls.__init__ = __init__
    _patch_step_end(sys.modules.get("transformers.trainer_callback"))


def _params(fn) -> tuple:
    """The names of fn's parameters, "**name" for a keyword catch-all; () where one is anything else (a default,
    *args, keyword-only) or there is no signature."""
    import inspect

    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return ()
    out = []
    for p in params:
        if p.kind is p.VAR_KEYWORD:
            out.append("**" + p.name)
        elif p.kind is not p.POSITIONAL_OR_KEYWORD or p.default is not p.empty:
            return ()
        else:
            out.append(p.name)
    return tuple(out)


def _patch_step_end(mod) -> None:
    """CallbackHandler.on_step_end marks where the Trainer's optimizer step ends (the split's "optimizer"
    ends there, as in the probe): one call per step, no callback of ours in the list."""
    import functools

    handler = getattr(mod, "CallbackHandler", None)
    fn = getattr(handler, "on_step_end", None)
    if fn is None or getattr(fn, "__ddpdoctor_wrapped__", False):
        return

    def begin() -> None:
        if not S.off and S.sp == recorder.TAIL:
            try:
                recorder.step_callbacks_begin()
            except Exception as exc:  # noqa: BLE001
                _log_once("the step-end hook", exc)

    @functools.wraps(fn)
    def on_step_end(self, *a, **k):
        begin()
        try:
            return fn(self, *a, **k)
        except BaseException as exc:
            recorder._hide(exc)
            raise

    @functools.wraps(fn)
    def on_step_end_exact(self, args, state, control, **kwargs):
        # transformers' own signature (round 11): the Trainer's call (three positional arguments) is passed on as
        # it came, where *a/**k packed and unpacked them again (a *args/**kwargs pass-through: ~2k instructions per
        # call in a callgrind micro)
        if not S.off and S.sp == recorder.TAIL:
            begin()
        try:
            if kwargs:
                return fn(self, args, state, control, **kwargs)
            return fn(self, args, state, control)
        except BaseException as exc:
            recorder._hide(exc)
            raise

    if _params(fn) == ("self", "args", "state", "control", "**kwargs"):
        on_step_end = on_step_end_exact
    on_step_end.__ddpdoctor_wrapped__ = True
    handler.on_step_end = on_step_end
    # swapped in for sampled steps only (as before round 11). Left in place (round 11, 4624478) it saved the two swaps
    # per k steps (~1,460 instructions per Trainer step) but passed every step's call through (~980 over the bare
    # call with this signature, ~2,280 through *a/**k: a callgrind micro), which the bench's blocks do not see
    recorder.arm_with(handler, "on_step_end", on_step_end, fn)  # only sampled steps open with TAIL


_RUN_CALLBACK = None
_RUN_DOCTOR = None


def _count_prediction_step() -> None:
    S.ev += 1
    try:
        recorder._publish()
    except Exception as exc:  # noqa: BLE001
        _log_once("counting evaluation steps", exc)


def _run_doctor_class():
    """DoctorCallback plus what `run` needs from the Trainer (RunBeaconCallback's two events), for
    a Trainer that has no DoctorCallback of its own."""
    global _RUN_DOCTOR
    if _RUN_DOCTOR is not None:
        return _RUN_DOCTOR
    from ..inprocess.callback import DoctorCallback

    class RunDoctorCallback(DoctorCallback):
        def on_train_begin(self, args, state, control, **kw):
            try:
                return super().on_train_begin(args, state, control, **kw)
            finally:
                try:
                    S.preflight_done = True
                    if self.preflight_report is not None:
                        recorder._save_preflight(self.preflight_report)
                    self._step_aside()
                except Exception as exc:  # noqa: BLE001
                    _log_once("saving preflight findings", exc)

        def _step_aside(self) -> None:
            """Nothing left to do per step (no step timing, no stall watch): leave the Trainer's
            callback list, so its ~6 events per step stop calling us (~2 us each). A new list, not
            an edit: the handler is iterating the old one right now. Evaluation still counts as
            progress through the DataLoader hook (every batch updates the beacon)."""
            handler = getattr(self.trainer, "callback_handler", None)
            if not self._done or self.stall_watch is not None or handler is None:
                return
            if any(c is self for c in handler.callbacks):
                handler.callbacks = [c for c in handler.callbacks if c is not self]

        def on_prediction_step(self, args, state, control, **kw):
            _count_prediction_step()

    _RUN_DOCTOR = RunDoctorCallback
    return RunDoctorCallback


def _run_callback_class():
    global _RUN_CALLBACK
    if _RUN_CALLBACK is not None:
        return _RUN_CALLBACK
    from transformers import TrainerCallback

    class RunBeaconCallback(TrainerCallback):
        """ddpdoctor run, beside the job's own DoctorCallback: saves its preflight findings for the
        parent, and counts evaluation batches as progress (a long evaluation is not a stall)."""

        def on_train_begin(self, args, state, control, **kw):
            try:
                from ..inprocess.callback import DoctorCallback

                S.preflight_done = True
                for cb in _trainer_callbacks():
                    if isinstance(cb, DoctorCallback) and cb.preflight_report is not None:
                        recorder._save_preflight(cb.preflight_report)
                        break
            except Exception as exc:  # noqa: BLE001
                _log_once("saving preflight findings", exc)

        def on_prediction_step(self, args, state, control, **kw):
            _count_prediction_step()

    _RUN_CALLBACK = RunBeaconCallback
    return RunBeaconCallback


def _trainer_callbacks() -> list:
    """The callbacks of the Trainer calling us (found on the stack, as DoctorCallback does)."""
    f = sys._getframe(1)
    for _ in range(30):
        if f is None:
            break
        handler = f.f_locals.get("self")
        cbs = getattr(handler, "callbacks", None)
        if isinstance(cbs, list):
            return cbs
        f = f.f_back
    return []


