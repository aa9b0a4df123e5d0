"""Round 23 (run25): where a SIGKILLed rank was when no stack was taken, and an evaluation loader told from the
training one by what runs (grad mode, the Trainer's evaluation loop) rather than by its shape.

Pure functions over recorded facts (beacon dicts as run/section.build reads them, the recorder's DataLoader hook on
stand-in loaders): no process is launched."""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from run_factory import findings, hooked_recorder, proc, rank, section  # noqa: E402


def _run010(beacon: dict, **rank1) -> str:
    from ddpdoctor.pipeline.judge import judge
    from ddpdoctor.pipeline.snapshot import Snapshot
    from ddpdoctor.run import section as run_section

    p1 = proc(11, 1, end_t=50.1, beacon=dict({"rank": 1, "step": 3}, **beacon), **dict({"status": -9}, **rank1))
    sec = run_section.build([proc(10, 0, end_t=50.5, status=1), p1], 60.0, death=True)
    (f,) = [f for f in judge(Snapshot(sections={"run": sec}), command="run", only={"RUN010"}, when="run").findings]
    return f.title


_DL = {"n": 3, "len": 10, "end": False, "workers": 0, "bs": 4, "s0": 0, "at": "/job/train.py:30"}


def test_trigger_a_sigkilled_rank_in_data_loading_is_placed_in_its_step_and_loop():
    t = _run010({"phase": "data", "dl": _DL, "st": 49.95, "sd": [0.05]})
    assert "killed by SIGKILL" in t, t
    assert ", in data loading (fetching the batch of step 4), in the loop at train.py:30 (its last recorded place" in t, t
    assert "a guess" not in t, t


def test_trigger_a_sigkilled_rank_in_compute_is_placed_in_its_step():
    t = _run010({"phase": "run", "dl": _DL, "st": 49.95, "sd": [0.05]})
    assert ", in step 4's work after fetching its batch (forward, backward or the optimizer" in t, t
    assert "in the loop at train.py:30" in t, t


def test_trigger_a_sigkilled_rank_between_steps_is_placed_after_its_optimizer_step():
    t = _run010({"phase": "run", "between": True, "dl": _DL, "st": 49.95, "sd": [0.05]})
    assert ", in what runs after step 3's optimizer step, before step 4's batch (the callbacks" in t, t


def test_quiet_a_collective_since_the_last_step_leaves_the_part_unknown():
    """Quiet (no claim of 'after its batch'): a collective issued after the last step's end wrote the beacon, which
    overwrites the optimizer hook's byte too: between steps or in the step is not known."""
    cring = [(5, 49.97, 0, 0, 2, 0, 4)]  # all_reduce, completed, issued after the step's end at 49.95
    t = _run010({"phase": "run", "dl": _DL, "st": 49.95, "sd": [0.05], "cring": cring})
    assert "after fetching its batch" not in t and "a collective since its last step leaves which one unknown" in t, t
    assert "a guess" not in t, t


def test_trigger_a_place_older_than_its_steps_is_a_guess():
    """Its last step ended 10 s before its end with 50 ms steps: it may have left the loop (a checkpoint)."""
    t = _run010({"phase": "run", "dl": _DL, "st": 40.1, "sd": [0.05]})
    assert "step 4's" in t and "a guess: its last step ended 10.0 s before its end" in t, t


def test_trigger_an_evaluation_loaders_place_says_evaluation():
    dl = dict(_DL, eval="grad mode off (torch.no_grad or inference_mode)", s0=3)
    t = _run010({"phase": "data", "dl": dl, "st": 49.95, "sd": [0.05]})
    assert ", in its evaluation (grad mode off" in t and "after step 3, fetching a batch" in t, t


def test_quiet_a_rank_inside_a_collective_or_with_an_exception_keeps_its_own_line():
    coll = {"op": "all_reduce", "seq": 7, "line": "/job/train.py:38", "in": True}
    t = _run010({"phase": "coll", "dl": _DL, "coll": coll, "pl": "/job/train.py:38", "st": 49.95, "sd": [0.05]})
    assert "inside all_reduce #7" in t and "last recorded place" not in t, t
    exc = {"type": "ValueError", "message": "bad", "t": 50.0, "user": {"file": "/job/train.py", "line": 12, "func": "main"}}
    t = _run010({"phase": "run", "dl": _DL, "st": 49.95, "sd": [0.05]}, exc=exc, status=1)
    assert ", at train.py:12" in t and "last recorded place" not in t, t


def test_quiet_no_loop_line_no_place():
    """A beacon without the loader's line (no DataLoader: a hand-fed loop) says nothing it does not hold."""
    t = _run010({"phase": "run", "pl": "/job/train.py:38", "st": 49.95, "sd": [0.05]})
    assert "last recorded place" not in t and "its last recorded line train.py:38" in t, t


# ------------------------------------------------------------------------------ the recorder's loader origin

def test_trigger_recorder_marks_a_loader_iterated_under_no_grad_as_an_evaluation(monkeypatch):
    torch = pytest.importorskip("torch")
    S, Base, Loader = hooked_recorder(monkeypatch)
    train = Loader(range(4))
    it = Base(train)
    next(it)
    S.step = 1
    assert S.dl["eval"] is None and S.dl["at"].endswith("test_run_round25.py:" + str(sys._getframe().f_lineno - 3))
    with torch.no_grad():
        ev = Base(Loader(range(4)))  # the same length and batch size as training, another loader
        next(ev)
    assert S.dl["eval"].startswith("grad mode off"), S.dl
    assert S.dl_tr is not None and S.dl_tr["step"] == 1 and S.dl_tr["at"], S.dl_tr


def test_trigger_recorder_marks_a_loader_of_the_trainers_evaluation_loop(monkeypatch):
    S, Base, Loader = hooked_recorder(monkeypatch)
    code = compile("def evaluation_loop(Base, loader):\n    return Base(loader)\n",
                   "/site-packages/transformers/trainer.py", "exec")
    ns: dict = {}
    exec(code, ns)  # noqa: S102 - a stand-in for Trainer.evaluation_loop's frame (its file and function)
    ns["evaluation_loop"](Base, Loader(range(4)))
    assert S.dl["eval"] == "evaluation_loop (transformers/trainer.py)", S.dl


def test_quiet_recorder_a_new_epoch_of_the_same_loader_is_no_new_loader(monkeypatch):
    """Quiet: the training loader iterated again (a new epoch: the same object) stays the loader it was: no training
    loader kept aside, its start step unchanged, no evaluation word."""
    S, Base, Loader = hooked_recorder(monkeypatch)
    train = Loader(range(2))
    for epoch in range(2):
        it = Base(train)
        for _ in range(2):
            next(it)
            S.step += 1
    assert S.dl_tr is None and S.dl["s0"] == 0 and S.dl["eval"] is None, (S.dl, S.dl_tr)


# ------------------------------------------------------------------------------ RUN005 by the recorder's word

def _left_pair(eval_word):
    """runcol22's job j6 (tests/test_run_round24.py) with the evaluation loader of the training loader's shape (25
    batches of 16), before any step in it: rank 0 left the training loop one batch short and waits in the evaluation's
    all_gather; rank 1 is still in its 25th step."""
    from run_factory import coll

    evl = {"n": 2, "len": 25, "end": False, "workers": 0, "bs": 16, "s0": 24, "eval": eval_word}
    tr0 = {"n": 24, "len": 25, "end": True, "bs": 16, "step": 24}
    r0 = rank(0, "collective", 101, "trainer.train()", step=24,
              coll=coll("all_gather", 26, shape=[16], dtype="float32", line=101), dl=evl, train_loader=tr0)
    r1 = rank(1, "ddp-forward", 101, "trainer.train()", step=24,
              dl={"n": 25, "len": 25, "end": True, "workers": 0, "bs": 16, "s0": 0}, train_loader=None)
    r1["doing"] = "DDP's forward synchronisation"
    return r0, r1


def test_trigger_run005_an_evaluation_loader_of_the_training_shape_before_its_first_step_is_left():
    r0, r1 = _left_pair("evaluation_loop (transformers/trainer.py)")
    found = findings(section([r0, r1]), "RUN005")
    assert len(found) == 1 and "left the training loop" in found[0].title, [f.title for f in found]
    assert "by evaluation_loop (transformers/trainer.py)" in found[0].detail, found[0].detail


def test_quiet_run005_the_same_shape_without_the_recorders_word_is_training_again():
    r0, r1 = _left_pair(None)
    assert findings(section([r0, r1]), "RUN005") == []


# ------------------------------------------------------------------------------ RUN028: a rank that never arrived

def _rdv(ranks, world):
    rs = [rank(i, "rendezvous", 12, "dist.init_process_group('gloo')", step=0, world=world) for i in ranks]
    for r in rs:
        r["phase"] = "init"
    return rs


def test_trigger_run028_names_the_rank_that_never_arrived_and_the_store_the_others_wait_on():
    (f,) = findings(section(_rdv((0, 1, 2), 4)), "RUN028")
    assert f.title.startswith("ranks 0–2 wait in init_process_group's rendezvous for rank 3, which never arrived"), f.title
    assert "rank 0's TCPStore (MASTER_ADDR:MASTER_PORT) waits for all 4 ranks" in f.title, f.title
    assert "rank:3" in f.subjects and f.severity == "error", (f.subjects, f.severity)


def test_trigger_run028_rank_0_never_arrived_nobody_serves_the_store():
    (f,) = findings(section(_rdv((1, 2, 3), 4)), "RUN028")
    assert "for rank 0, which never arrived" in f.title and "connect to rank 0's TCPStore" in f.title, f.title


def test_quiet_run028_every_rank_of_the_world_in_the_rendezvous_or_one_still_starting():
    assert findings(section(_rdv((0, 1, 2, 3), 4)), "RUN028") == []
    late = rank(3, "before-init", 8, "data = preprocess()", step=0)
    assert findings(section(_rdv((0, 1, 2), 4) + [late]), "RUN028") == []


# ------------------------------------------------------------------------------ the beacon's "between" byte

def test_trigger_the_optimizer_hook_marks_between_steps_and_the_next_batch_clears_it(monkeypatch, tmp_path):
    import time

    from ddpdoctor.run import beacon, recorder

    S, Base, Loader = hooked_recorder(monkeypatch)
    for name in ("_store_u64", "_DL_N_AT", "_DL_END_AT", "_store_end", "_END_AT", "_PH_AT", "_BETWEEN"):
        monkeypatch.setattr(recorder, name, getattr(recorder, name))
    w = beacon.Writer(str(tmp_path / "beacon.1"))
    w.hot("run", False, False, 1.0, 1.0, 0.0, 0.0, 0, 0, 0, 0)
    recorder._bind_writer(w)
    monkeypatch.setattr(S, "writer", w)
    S.due, S.st = 1 << 40, time.time()
    it = Base(Loader(range(4)))
    next(it)
    assert beacon.read(w.path).get("between") is None  # in the step, after its batch
    recorder._on_optimizer_step(None, (), {})  # an unsampled step's end: the fast path
    b = beacon.read(w.path)
    assert b["phase"] == "run" and b["between"] is True and b["step"] == 1, b
    next(it)  # the next step's batch overwrites the byte
    b = beacon.read(w.path)
    assert b["phase"] == "run" and "between" not in b and b["step"] == 1, b
    w.close()
