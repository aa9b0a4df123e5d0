"""Round 25 (run29): the time a hand-written loop spends after optimizer.step() until its next batch is the loop's
own ("other"), not the optimizer's; zero_grad and the scheduler's step stay the optimizer's; a Trainer's tail up to
its on_step_end stays the optimizer's. runcol25's j9/j11: a wait in a wrapper around the loader's iterator (outside
ddpdoctor's own hook) read as "optimizer (clipping and optimizer.step)", where no rule looks for a wait."""
import types

import pytest

from ddpdoctor.run import recorder


def _keep_state(monkeypatch, S) -> None:
    for name in type(S).__slots__:
        if hasattr(S, name):
            monkeypatch.setattr(S, name, getattr(S, name))


@pytest.fixture
def sampled_tail(monkeypatch):
    """The recorder as a sampled step leaves it after the optimizer's post hook: the tail open, a fake clock."""
    S = recorder.S
    _keep_state(monkeypatch, S)
    clock = [100.0]
    for name, value in (("spl", True), ("sp", recorder.TAIL), ("sp_t", 100.0), ("sp_acc", [0.0] * recorder.NPARTS),
                        ("off", False), ("kind", "proc"), ("main", recorder._ident()), ("is_compiling", None)):
        setattr(S, name, value)
    monkeypatch.setattr(recorder._sp, "__defaults__", (lambda: clock[0],))
    return S, clock


def _tick(clock, s):
    clock[0] += s


def test_a_wait_before_the_loaders_own_fetch_is_the_loops_time_not_the_optimizers(sampled_tail):
    S, clock = sampled_tail

    def batches():
        _tick(clock, 0.01)  # the loader's own fetch: data
        yield 1

    zero_grad = recorder._wrap_span(lambda: _tick(clock, 0.002), recorder.OPTIM)
    _tick(clock, 0.5)  # a wrapper around the loader's iterator sleeps before calling it (outside ddpdoctor's hook)
    assert next(recorder._DataIter(batches())) == 1
    assert S.sp == recorder.OTHER  # the tail ended at the fetch; what follows until the forward is the loop's
    zero_grad()
    _tick(clock, 0.003)
    recorder._sp(recorder.OTHER)
    data, compute, coll, optim, other = recorder.split_parts(S.sp_acc)
    assert data == pytest.approx(0.01) and optim == pytest.approx(0.002)
    assert other == pytest.approx(0.503) and compute == coll == 0.0


def test_a_trainers_tail_up_to_on_step_end_stays_the_optimizers(sampled_tail):
    S, clock = sampled_tail
    _tick(clock, 0.004)  # the Trainer's scheduler step and zero_grad, after its optimizer step
    recorder.step_callbacks_begin()
    assert S.sp == recorder.OTHER
    _tick(clock, 0.02)  # its logging and callbacks
    recorder._sp(recorder.OTHER)
    *_, optim, other = recorder.split_parts(S.sp_acc)
    assert optim == pytest.approx(0.004) and other == pytest.approx(0.02)


def test_clipping_between_backward_and_step_is_the_optimizers():
    acc = [0.0] * recorder.NPARTS
    acc[recorder.AFTER_BW], acc[recorder.OPTIM], acc[recorder.TAIL] = 0.003, 0.01, 0.2
    assert recorder.split_parts(acc) == (0.0, 0.0, 0.0, pytest.approx(0.013), pytest.approx(0.2))


def test_zero_grad_and_the_schedulers_step_are_bracketed_on_torchs_own_classes(monkeypatch):
    """The patches find what they wrap on the installed torch (an assertion that fails if torch moves them), and on
    a stand-in module they install a wrapper that _arm swaps in and out."""
    import torch.optim.lr_scheduler as lrs
    import torch.optim.optimizer as opt

    assert callable(opt.Optimizer.__dict__.get("zero_grad")) and callable(lrs.LRScheduler.__dict__.get("step"))
    monkeypatch.setattr(recorder, "_ARMED", [])
    calls = []
    Optimizer = type("Optimizer", (), {"zero_grad": lambda self: calls.append("zero_grad")})
    LRScheduler = type("LRScheduler", (), {"step": lambda self: calls.append("step")})
    recorder._patch_zero_grad(types.SimpleNamespace(Optimizer=Optimizer))
    recorder._patch_scheduler(types.SimpleNamespace(LRScheduler=LRScheduler))
    assert getattr(Optimizer.zero_grad, "__ddpdoctor_wrapped__", False)
    assert getattr(LRScheduler.step, "__ddpdoctor_wrapped__", False)
    assert [(o, n) for o, n, *_ in recorder._ARMED] == [(Optimizer, "zero_grad"), (LRScheduler, "step")]
    Optimizer().zero_grad()
    LRScheduler().step()
    assert calls == ["zero_grad", "step"]
    recorder._patch_zero_grad(types.SimpleNamespace(Optimizer=Optimizer))  # once only
    assert len(recorder._ARMED) == 2
