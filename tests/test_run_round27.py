"""Round 25 (run29): the time a hand-written loop spends after optimizer.step() until its next batch is the loop's
own ("other"), not the optimizer's; zero_grad and the scheduler's step stay the optimizer's; a Trainer's tail up to
its on_step_end stays the optimizer's. runcol25's j9/j11: a wait in a wrapper around the loader's iterator (outside
ddpdoctor's own hook) read as "optimizer (clipping and optimizer.step)", where no rule looks for a wait."""
import types

import pytest

from ddpdoctor.run import recorder


@pytest.fixture
def sampled_tail(monkeypatch):
    """The recorder as a sampled step leaves it after the optimizer's post hook: the tail open, a fake clock."""
    from run_factory import sampled_split

    return sampled_split(monkeypatch, recorder.TAIL)


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


def _job(part="collective", share=(0.7, 0.68), step=(40.0, 40.5), steps=30, backend="gloo", straggler=None,
         stall=False):
    """The end of a 2-rank job as `ddpdoctor run` records it: each rank's split summary (start-up left out)."""
    from run_factory import rank, section

    rs = []
    for r in (0, 1):
        sp = {"steps": steps, "split_steps": steps, "step_ms": {"median": step[r], "p95": step[r] * 1.2}}
        for p in ("data", "compute", "collective", "optimizer", "other"):
            sp[p] = {"median": step[r] * 0.05, "p95": step[r] * 0.06}
        sp[part] = {"median": step[r] * share[r], "p95": step[r] * share[r] * 1.1}
        rs.append(rank(r, "exited", split=sp, framework={"backend": backend, "pg_world": 2}))
    return section(rs, stall=stall, straggler=straggler)


def test_run030_every_rank_blocked_in_collectives_with_no_straggler_is_the_jobs_pace():
    """Trigger: 68-70% of every rank's step in collectives, no straggler, a gloo group: a warning that says why DDP
    can be slower than one GPU, the sources, no_sync and the compression hook; gloo named first."""
    from run_factory import findings

    [f] = findings(_job(), "RUN030")
    assert f.severity == "warning" and f.title.startswith("the collectives set the pace: every rank spends 68% or more")
    assert "no rank is slower than the others" in f.title and "rank 0: 28.0 of 40.0 ms (70%)" in f.detail
    assert "backend: gloo" in f.detail and "no_sync" in f.fix and "fp16_compress_hook" in f.fix
    assert f.fix.splitlines()[0].startswith("# the group runs on gloo") and "@cf30153c" in f.detail
    [g] = findings(_job(backend="nccl"), "RUN030")
    assert "gloo" not in g.fix.splitlines()[0] and "backend: nccl" in g.detail


def test_run030_stays_quiet_under_the_bar_with_a_straggler_a_stall_or_few_steps():
    """Quiet: one rank under half the step; a straggler (its wait is RUN020's); a stall; 8 measured steps. A straggler
    named only for the job's start-up does not hide it."""
    from run_factory import findings

    assert findings(_job(share=(0.7, 0.4)), "RUN030") == []
    assert findings(_job(straggler={"ranks": [1], "cause": {}}), "RUN030") == []
    assert findings(_job(stall=True), "RUN030") == []
    assert findings(_job(steps=8), "RUN030") == []
    assert [f.id for f in findings(_job(straggler={"ranks": [1], "startup": {"slow_steps": [1, 5]}}), "RUN030")] \
        == ["RUN030"]
    assert findings(_job(part="compute", share=(0.9, 0.9)), "RUN030") == []  # compute-bound: the work itself


def test_run031_the_loops_own_code_between_steps_is_the_jobs_pace():
    """Trigger: 60% of every rank's step outside data, compute, collectives and the optimizer (runcol25 j9's class:
    a wait in the loop's code or a wrapper around the loader); quiet at 30%, and RUN029/RUN030 stay quiet on it."""
    from run_factory import findings

    [f] = findings(_job(part="other", share=(0.6, 0.62)), "RUN031")
    assert f.title.startswith("the loop's own code between steps sets the pace: every rank spends 60% or more")
    assert "py-spy dump" in f.fix and "wrapper around the DataLoader" in f.detail
    assert findings(_job(part="other", share=(0.3, 0.3)), "RUN031") == []
    assert findings(_job(part="other", share=(0.6, 0.62)), "RUN029") == []
    assert findings(_job(part="other", share=(0.6, 0.62)), "RUN030") == []


def _j4(train_loader=True):
    """What `ddpdoctor run` recorded at the stall of run-r26 j4 (runcol26: a ViT Trainer under torchrun, rank 1's
    training iterator ending one batch early each epoch from a wrapper above ddpdoctor's hook): rank 1 left its
    training loader after 19 of 20 batches for the epoch-end evaluation's loader and waits in its all_gather; rank 0
    fetched all 20 and waits in its 20th step's gradient all-reduce."""
    from run_factory import coll, rank, section

    dl0 = {"n": 20, "len": 20, "end": True, "s0": 0, "workers": 0, "bs": 16}
    dl1 = {"n": 2, "len": 2, "end": False, "s0": 19, "workers": 0, "bs": 16, "eval": "evaluation_loop (transformers/trainer.py)"}
    r0 = rank(0, "backward", line=29, code="trainer.train()", step=19, dl=dl0)
    r1 = rank(1, "collective", line=29, code="trainer.train()", step=19, dl=dl1,
              coll=coll("all_gather", seq=21, shape=[16], dtype="float32", line=29))
    if train_loader:
        r1["train_loader"] = {"n": 19, "len": 20, "end": False, "bs": 16, "step": 19}
    return section([r0, r1])


def test_run005_a_rank_that_left_its_training_loader_short_ran_out_even_unseen_by_the_hook():
    """Trigger (run-r26 j4, read as RUN001 'outside the if'): uneven batches, rank 1 named as the one that ran out
    after 19 of 20 and left for the evaluation, rank 0 still training; RUN001 quiet."""
    from run_factory import findings

    [f] = findings(_j4(), "RUN005")
    assert f.title.startswith("uneven batches: rank 1 ran out of data after 19 of 20 batch(es), left the training loop")
    assert "while rank 0 still trains (batch 20 of 20" in f.title, f.title
    assert findings(_j4(), "RUN001") == []


def test_run005_quiet_when_every_rank_left_its_loader_at_the_same_cap():
    """Quiet: a step cap that breaks every rank's loop at batch 19 of 20 (both left for the evaluation, alike)."""
    from run_factory import coll, findings, rank, section

    ev = {"n": 1, "len": 2, "end": False, "s0": 19, "workers": 0, "bs": 16, "eval": "evaluation_loop"}
    rs = []
    for r in (0, 1):
        x = rank(r, "collective", line=29, step=19, dl=dict(ev), coll=coll("all_gather", seq=21, line=29))
        x["train_loader"] = {"n": 19, "len": 20, "end": False, "bs": 16, "step": 19}
        rs.append(x)
    assert findings(section(rs), "RUN005") == []


LOOP = '''import torch.distributed as dist


def main(loader, budget):
    for x in loader:
        step(x)
        if over(budget):
            break
    dist.barrier()
    while True:
        dist.barrier()
'''


def test_after_loop_tells_a_call_after_the_loop_from_one_inside_it(tmp_path):
    from ddpdoctor.run import stacks

    path = tmp_path / "train.py"
    path.write_text(LOOP)
    assert stacks.after_loop(str(path), 9, 5) is True     # the barrier after the for loop
    assert stacks.after_loop(str(path), 6, 5) is False    # inside it
    assert stacks.after_loop(str(path), 11, 10) is False  # inside the while loop
    assert stacks.after_loop(str(path), 9, 4) is None     # no loop starts at line 4
    assert stacks.after_loop(str(tmp_path / "gone.py"), 9, 5) is None


def _parted(after=True, guard=None):
    """A 2-rank stall as a real Gloo job recorded it (round 25, lead): rank 1 stopped its loop on its own clock after
    5 of 40 batches and waits in the barrier after the loop; rank 0 still trains, in DDP's gradient all-reduce."""
    from run_factory import coll, frame, rank, section

    r0 = rank(0, "backward", line=18, code="loss.backward()", step=6,
              dl={"n": 7, "len": 40, "end": False, "s0": 0, "workers": 0, "bs": 1})
    r1 = rank(1, "collective", line=24, code="dist.barrier()", step=5, guard=guard,
              dl={"n": 5, "len": 40, "end": False, "s0": 0, "workers": 0, "bs": 1}, coll=coll("barrier", seq=1, line=24))
    for r in (r0, r1):
        r["loop_frame"] = frame(16, "for x, y in loader:")
    r1["after_loop"], r0["after_loop"] = after, False
    return section([r0, r1])


def test_run001_a_rank_that_left_its_loop_early_is_told_as_a_stop_condition_not_an_if():
    """Trigger (run-r26 j10/j11: a per-rank wall-clock stop; RUN001 said 'outside the `if`'): the title says rank 1
    left its loop after batch 5 of 40 while rank 0 still trains; the fix decides the stop on every rank together."""
    from run_factory import findings

    [f] = findings(_parted(), "RUN001")
    assert f.title.startswith("rank 1 left its training loop after batch 5 of 40 (the loop at train.py:16"), f.title
    assert "while rank 0 still trains" in f.title and "ReduceOp.MAX" in f.fix and "outside the `if`" not in f.fix
    # quiet on the new reading (the old one stays): a rank test around the call, or a call inside the loop
    for sec in (_parted(guard="if rank == 1:"), _parted(after=False), _parted(after=None)):
        [g] = findings(sec, "RUN001")
        assert "left its training loop" not in g.title and "outside the `if`" in g.fix


def test_run030_names_the_jobs_own_many_small_collectives_before_the_gradient_fixes():
    """run-r26 j13 (strict miss): 600 one-element all_reduce calls per step at :288 on every rank: RUN030 says the job's
    own code issues ~600 collectives per step, where, and its first fix batches them; without them (a gradient-bound
    job: one user collective per step) the gradient fixes lead."""
    from run_factory import findings

    sec = _job()
    for r in sec["ranks"]:
        r["step"] = 89
        r["last_collective"] = {"op": "barrier", "seq": 52201, "line": "/job/diff.py:325", "bytes": 0}
        r["coll_history"] = [{"op": "all_reduce", "line": "/job/diff.py:288", "bytes": 4, "seq": 52190 + i}
                             for i in range(11)] + [{"op": "barrier", "line": "/job/diff.py:325", "bytes": 0}]
    [f] = findings(sec, "RUN030")
    assert "issues about 587 collectives per step" in f.detail and "all_reduce of 4 bytes at diff.py:288" in f.detail
    assert f.fix.splitlines()[0].startswith("# batch the job's own per-step collectives (all_reduce at diff.py:288)")
    for r in sec["ranks"]:
        r["last_collective"]["seq"] = 89
    [g] = findings(sec, "RUN030")
    assert "collectives per step" not in g.detail and g.fix.splitlines()[0].startswith("# the group runs on gloo")


def test_run005_a_clean_exit_says_no_collective_met_its_peers():
    """runcol27 run-r27 j7 (weak, scored right): the clean-exit form of RUN005 no longer carries the mismatch form's
    sentence ('its next collective ... met its peers' ...; Gloo aborts on the size difference'): nothing met, the short
    rank exited."""
    from run_factory import findings
    from test_run_round24 import _clean_exit

    [f] = findings(_clean_exit())
    assert "Gloo aborts on the size difference" not in f.detail and "exited" in f.detail, f.detail
