"""Round 22 (run24): RUN005 reads who ran out from each rank's TRAINING loader, not the loader it is in now.

The recorded facts are runcol22's job j6 (an HF Trainer with eval_strategy="epoch" on 2 Gloo ranks, rank 0's training
loader one batch short: 24 of 25): rank 0 left the training loop and waits in the epoch-end evaluation's all_gather
(its evaluation loader: batch 2 of 7); rank 1 fetched 25 of 25 (accelerate's look-ahead set the end flag) and is
still in its 25th step, in DDP's forward synchronisation. The round-22 report had them the wrong way round."""
from __future__ import annotations

from run_factory import coll, findings, hooked_recorder, rank, section


def _j6(rank0_left: bool = True):
    evl = {"n": 2, "len": 7, "end": False, "workers": 0, "bs": 16, "s0": 24}
    tr0 = {"n": 24, "len": 25, "end": True, "bs": 16, "step": 24}
    r0 = rank(0, "collective", 101, "trainer.train()", step=24,
              coll=coll("all_gather", 26, shape=[16], dtype="float32", line=101),
              dl=evl if rank0_left else {"n": 24, "len": 25, "end": False, "workers": 0, "bs": 16, "s0": 0},
              train_loader=tr0 if rank0_left else None)
    r1 = rank(1, "ddp-forward", 101, "trainer.train()", step=24,
              dl={"n": 25, "len": 25, "end": True, "workers": 0, "bs": 16, "s0": 0}, train_loader=None)
    r1["doing"] = "DDP's forward synchronisation"
    return r0, r1


def test_trigger_run005_rank_in_its_evaluation_ran_out_of_training_data():
    r0, r1 = _j6()
    found = findings(section([r0, r1]), "RUN005")
    assert len(found) == 1, [f.title for f in findings(section([r0, r1]))]
    t = found[0].title
    assert t.startswith("uneven batches: rank 0 ran out of data after 24 of 25 batch(es), left the training loop"), t
    assert "while rank 1 still trains (batch 25 of 25" in t, t
    assert "rank 1: 25 training batch(es) fetched of 25 (all fetched: still in its last step)" in found[0].detail


def test_quiet_run005_a_loader_consumed_in_full_in_its_last_step_is_not_ran_out():
    """Quiet: rank 1 fetched 25 of 25 (end flag up by accelerate's look-ahead) and rank 0 is at its 24th of 25 in
    the same training loader, in its step: nobody ran out, nobody left; the ranks are merely one batch apart."""
    r0, r1 = _j6(rank0_left=False)
    r0["state"], r0["doing"] = "backward", "the DDP gradient all-reduce (backward)"
    assert findings(section([r0, r1]), "RUN005") == []


def test_quiet_run005_the_training_loader_again_in_a_new_epoch_is_not_left():
    """Quiet: a rank back in its training loader (same length and batch size as the one it left) at a new epoch's
    first batch, before any step in it, is in training, not in another loader: with its peer in the same epoch's
    step it is not uneven."""
    tr = {"n": 25, "len": 25, "end": True, "bs": 16, "step": 25}
    r0 = rank(0, "backward", 101, "trainer.train()", step=25,
              dl={"n": 1, "len": 25, "end": False, "workers": 0, "bs": 16, "s0": 25}, train_loader=tr)
    r1 = rank(1, "backward", 101, "trainer.train()", step=25,
              dl={"n": 1, "len": 25, "end": False, "workers": 0, "bs": 16, "s0": 25}, train_loader=tr)
    assert findings(section([r0, r1]), "RUN005") == []


def test_trigger_recorder_keeps_the_training_loader_a_rank_left_for_its_evaluation(monkeypatch):
    """Steps taken while the 5-batch loader was current make it the training loader; when a 7-batch loader without
    steps (an evaluation's) takes its place, the rank's training loader is kept as it was left: 5 of 5, ended."""
    S, Base, Loader = hooked_recorder(monkeypatch)
    it = Base(Loader(range(5)))
    for k in range(5):
        next(it)
        S.step = k + 1  # an optimizer step after each batch
    try:
        next(it)
    except StopIteration:
        pass
    assert S.dl_tr is None  # not left yet
    ev = Base(Loader(range(7)))
    next(ev), next(ev)
    assert {k: v for k, v in S.dl_tr.items() if k != "at"} == {"n": 5, "len": 5, "end": True, "bs": 1, "step": 5}, S.dl_tr
    assert S.dl["len"] == 7 and S.dl["s0"] == 5 and S.dl["n"] + S.nb == 2


def test_quiet_recorder_keeps_no_training_loader_for_a_loader_without_steps(monkeypatch):
    """Quiet: a loader iterated without any optimizer step (an evaluation before training, a dataset scan) followed by
    another is no training loader: nothing is kept."""
    S, Base, Loader = hooked_recorder(monkeypatch)
    it = Base(Loader(range(3)))
    next(it), next(it)
    Base(Loader(range(6)))
    assert S.dl_tr is None and S.dl["len"] == 6
