"""Round 23, run26 (issue 27): a data straggler under host-wide swings, and a lead judged but not named.
Pure functions over step records (no process): facts.steps.straggler's margin against the lead's own spread, and
facts.steps.seen (the end of the job says a lead the test judged and did not name)."""
from __future__ import annotations

import random

from ddpdoctor.facts import steps as st


def two_ranks(steps=24, slow_ms=1000.0, onset=3, swing=0.6, jitter=0.03, until=None, seed=0, base=1200.0):
    """Steps of a 2-rank DDP job whose compute swings with the host, the same factor on both ranks in a step (a busy
    shared host, a larger batch everywhere: +-`swing`), each rank's own jitter `jitter`; rank 1's data part is
    `slow_ms` longer from step `onset` (to `until`). Every rank's step ends together: the earlier rank waits in the
    collective for the later one."""
    rnd = random.Random(seed)
    out = {0: [], 1: []}
    t = 1000.0
    for s in range(1, steps + 1):
        common = 1 + rnd.uniform(-swing, swing)
        own = {}
        for r in (0, 1):
            data = 1.5 + (slow_ms if r == 1 and s >= onset and (until is None or s <= until) else 0.0)
            comp = base * common * (1 + rnd.uniform(-jitter, jitter))
            own[r] = (data, comp, 40.0 * (1 + rnd.uniform(-jitter, jitter)), 0.7)
        last = max(d + c for d, c, _, _ in own.values())
        step = 0.0
        for r, (d, c, o, x) in own.items():
            coll = 30.0 + last - (d + c)
            step = max(step, d + c + coll + o + x)
            out[r].append((s, 1, t + step / 1000.0, d, c, coll, o, x, 450.0))
        t += step / 1000.0
    return out


def test_a_steady_data_lead_under_host_wide_swings_is_a_straggler():
    """Trigger: rank 1's loader 1 s slower per batch while both ranks' compute swings +-60% together (the host): the
    others' own spread is over a third of the cost (3 sigma of it would have hidden the straggler), the lead is
    steady: RUN020's verdict, its data part named."""
    by = two_ranks()
    al = st.aligned(by)
    assert 3 * st.others_sigma(al, [0]) > 1000.0  # the state the class needs: the old margin alone drops it
    v = st.straggler(by)
    assert v is not None and v["ranks"] == [1] and v["part"] == "data", v
    sp = v["steady_part"]  # the second route decided: the data part 1 s longer in every step, the lead steady
    assert sp is not None and sp["part"] == "data" and sp["extra_ms"] > 900 and sp["lead_sigma_ms"] < v["others_sigma_ms"]
    assert st.seen(by) is None  # named: nothing more to say


def test_host_wide_swings_alone_name_nobody():
    """Quiet: the same swings, no slow loader: no verdict, no lead seen."""
    for seed in range(5):
        by = two_ranks(slow_ms=0.0, seed=seed)
        assert st.straggler(by) is None, seed
        assert st.seen(by) is None, seed


def test_a_lead_inside_each_ranks_own_jitter_is_still_no_straggler():
    """Quiet: with independent jitter (no host-wide swing) the lead swings as much as the ranks do: a 30% lead
    inside +-90% own jitter names nobody, whichever seed."""
    for seed in range(8):
        by = two_ranks(slow_ms=360.0, swing=0.0, jitter=0.9, seed=seed)
        al = st.aligned(by)
        assert st.steady_part(al, [1], [0], "data", 0.25 * 1200) is None, seed  # the data part's extra is steady...
        assert st.steady_part(al, [1], [0], "compute", 0.25 * 1200) is None, seed  # ...but the lead is not
        assert st.straggler(by) is None, seed


def test_a_lead_judged_and_not_named_is_said():
    """Trigger: a steady 1 s lead in the first two thirds of the judged window only (the sustain bar fails): no
    verdict, but `seen` gives the lead and its figures for the end of the job. Quiet: the healthy job (above) and a
    job too short for the window (not_judged says why; seen stays None)."""
    by = two_ranks(steps=24, swing=0.1, onset=1, until=15)
    assert st.not_judged(by) is None  # the window formed: judged
    assert st.straggler(by) is None
    lead = st.seen(by)
    assert lead is not None and lead["ranks"] == [1] and 2 * lead["led"] > lead["shown"]
    text = st.seen_text(lead)
    assert "rank 1 waited least" in text and "not named" in text and "its data part 1000 ms longer" in text, text
    short = two_ranks(steps=6, swing=0.1, onset=1, until=3)
    assert st.not_judged(short) is not None and st.seen(short) is None


def test_the_finding_says_the_steady_part_route():
    """RUN020's detail says how the margin was judged where the others' spread alone would have hidden it."""
    from ddpdoctor.model.registry import REGISTRY  # noqa: F401
    from ddpdoctor.pipeline.judge import judge
    from ddpdoctor.pipeline.runner import load_all
    from ddpdoctor.pipeline.snapshot import Snapshot

    load_all()
    v = st.straggler(two_ranks())
    sec = {"straggler": v, "ranks": [{"rank": 0}, {"rank": 1}]}
    [f] = judge(Snapshot(sections={"run": sec}), command="run", only={"RUN020"}, when="run").findings
    assert "judged instead by its data part" in f.detail and f.evidence["straggler"]["steady_part"]["part"] == "data"
    quiet = st.straggler(two_ranks(swing=0.02))  # no host-wide swing: the others' spread decides, nothing more said
    assert quiet is not None and quiet["steady_part"] is None
    [g] = judge(Snapshot(sections={"run": dict(sec, straggler=quiet)}), command="run", only={"RUN020"},
                when="run").findings
    assert "judged instead" not in g.detail


# ------------------------------------------------------------------ uneven batches behind a collective mismatch


def _mismatch_death(eps0, eps1, len0=20, len1=20):
    """Rank 1 aborted by Gloo at collective #58 (its float32 gather after training against rank 0's int64 gather of
    its next step), each rank's training loader as recorded (run/recorder.py: len, the steps of its last epoch)."""
    from ddpdoctor.run import section as run_section
    from run_factory import coll, rank, section

    mm = run_section.mismatch([
        rank(0, "collective", coll=coll("all_gather", 58, [1], "int64", 42)),
        rank(1, "collective", coll=coll("all_gather", 58, [1], "float32", 42))])
    dl = lambda ln, eps: {"n": 19, "len": ln, "end": False, "s0": 0, "workers": 0, "bs": 4, "es": 38, "ep": 3,  # noqa
                          "eps": eps}
    r0 = rank(0, "died", step=57, dl=dl(len0, eps0), end={"how": "exception", "t": 2.0, "secondary": True})
    r1 = rank(1, "died", step=57, dl=dl(len1, eps1), end={"how": "signal", "signal": "SIGABRT", "t": 1.0})
    return section([r0, r1], stall=False, death={"first_rank": 1, "ranks": [0, 1], "order": [1, 0]}, mismatch=mm)


def test_uneven_epochs_behind_a_mismatch_death_are_the_cause():
    """Trigger (runcol23 run-r23 j3's class): the same 20-batch loader, rank 1's epochs 19 steps, rank 0's 20; rank 1
    aborted at a mismatched collective: one RUN005 naming rank 1 and the mismatch as its consequence; no RUN006 and no
    separate death finding."""
    from run_factory import findings

    found = findings(_mismatch_death(20, 19))
    assert [f.id for f in found] == ["RUN005"], [(f.id, f.title) for f in found]
    f = found[0]
    assert "rank 1 took 19 optimizer step(s) per epoch" in f.title and "left training early" in f.title, f.title
    assert "collective #58" in f.title and "SIGABRT" in f.title and "consequence" in f.detail
    assert "line:42" in f.subjects and f.evidence["uneven"]["short"] == [1]


def test_uneven_lengths_behind_a_mismatch_death_are_the_cause():
    """Trigger: training loaders of 20 and 19 batches (a shard per rank, no DistributedSampler): RUN005 by length."""
    from run_factory import findings

    found = findings(_mismatch_death(20, 19, len1=19))
    assert [f.id for f in found] == ["RUN005"] and "19 batch(es) per epoch" in found[0].title, found[0].title


def test_even_batches_leave_the_mismatch_its_own():
    """Quiet: the same death with even loaders (20 steps per epoch on both ranks, or no epoch ended yet): RUN006 as
    before, no uneven batches."""
    from run_factory import findings

    for eps in ((20, 20), (None, None)):
        found = findings(_mismatch_death(*eps))
        assert [f.id for f in found] == ["RUN006"], (eps, [(f.id, f.title) for f in found])


def _epochs(monkeypatch, per_epoch):
    """The recorder's hook over epochs of one 5-batch loader, an optimizer step after each batch; each epoch stops
    after per_epoch[i] batches without a StopIteration through the hook (a wrapper above it ends it, as
    itertools.islice would). Returns (S, the cold publications made at the epochs' starts)."""
    from ddpdoctor.run import recorder
    from run_factory import hooked_recorder

    S, Base, Loader = hooked_recorder(monkeypatch)
    cold = []
    monkeypatch.setattr(recorder, "_publish_cold", lambda: cold.append(dict(S.dl)))
    loader = Loader(range(5))
    for k in per_epoch:
        it = Base(loader)
        for _ in range(k):
            next(it)
            S.step += 1
    return S, cold[1:]  # the first: the loader's own (made once)


def test_recorder_counts_the_steps_of_each_epoch_that_ended(monkeypatch):
    """Trigger: epochs of 4 steps of a 5-batch loader (its end never seen by the hook): "eps" 4 after the first."""
    S, cold = _epochs(monkeypatch, [4, 4, 4])
    assert S.dl["eps"] == 4 and S.dl["ep"] == 3 and S.dl["es"] == 8, S.dl
    assert [c["eps"] for c in cold] == [4]  # published when it changed, not every epoch


def test_recorder_even_epochs_publish_once(monkeypatch):
    """Quiet: even epochs (5 of 5) publish the count once; the rest of the epochs write nothing more."""
    S, cold = _epochs(monkeypatch, [5, 5, 5, 5])
    assert S.dl["eps"] == 5 and len(cold) == 1


def _first_epoch_death(n0, end0, n1, end1, ln=None):
    """Round 24 (run26's left class): the mismatch death INSIDE the first epoch (no "eps" yet), loaders of no length
    (an IterableDataset sharded per rank) unless `ln`: each rank's batches fetched and whether its iterator ended."""
    from ddpdoctor.run import section as run_section
    from run_factory import coll, rank, section

    mm = run_section.mismatch([
        rank(0, "collective", coll=coll("all_gather", 12, [1], "int64", 42)),
        rank(1, "collective", coll=coll("all_gather", 12, [1], "float32", 42))])
    dl = lambda n, end: {"n": n, "len": ln, "end": end, "s0": 0, "workers": 0, "bs": 4, "es": 0, "ep": 1}  # noqa
    r0 = rank(0, "died", step=n0, dl=dl(n0, end0), end={"how": "exception", "t": 2.0, "secondary": True})
    r1 = rank(1, "died", step=n1, dl=dl(n1, end1), end={"how": "signal", "signal": "SIGABRT", "t": 1.0})
    return section([r0, r1], stall=False, death={"first_rank": 1, "ranks": [0, 1], "order": [1, 0]}, mismatch=mm)


def test_a_loader_that_ran_out_inside_the_first_epoch_is_the_cause_of_the_mismatch():
    """Trigger: rank 1's iterable loader ended after 9 batches while rank 0's had fetched 10 and went on; rank 1 then
    aborted at a mismatched collective: one RUN005 naming rank 1 by its loader's end, the mismatch folded under it."""
    from run_factory import findings

    found = findings(_first_epoch_death(10, False, 9, True))
    assert [f.id for f in found] == ["RUN005"], [(f.id, f.title) for f in found]
    f = found[0]
    assert "rank 1's training loader ran out after 9 batch(es)" in f.title and "rank 0's had fetched 10" in f.title
    assert f.evidence["uneven"]["by"] == "end" and f.evidence["uneven"]["short"] == [1]


def test_an_ended_epoch_and_a_peer_in_the_next_one_are_not_uneven():
    """Quiet: equal 10-batch loaders, rank 1's ended at 10 of 10 while rank 0 is at batch 3 of its next epoch; and
    both iterators still going: the mismatch stays RUN006's own."""
    from run_factory import findings

    for args in ((3, False, 10, True, 10), (10, False, 9, False, None), (9, True, 9, True, None)):
        found = findings(_first_epoch_death(*args))
        assert [f.id for f in found] == ["RUN006"], (args, [(f.id, f.title) for f in found])


def _abort_after_its_data(first_rank=1, exc_on_0=False):
    """What `ddpdoctor run` recorded of a real 2-rank Gloo job (iterable shards of 10 and 9 records, round 24): rank 1's loader ended after 9 batches and it aborted (SIGABRT) in its final all_reduce while
    rank 0, at batch 10, was inside DDP's gradient all-reduce: no user-level mismatch record."""
    from run_factory import rank, section

    dl = lambda n, end: {"n": n, "len": None, "end": end, "s0": 0, "workers": 0, "bs": 1, "at": "t.py:14"}  # noqa
    fr = {"file": "t.py", "line": 19, "func": "<module>", "code": "dist.all_reduce(t)"}
    e0 = ({"how": "exception", "t": 1.0, "exception": {"type": "ValueError", "message": "bad", "user": {"file": "t.py", "line": 16}}}
          if exc_on_0 else {"how": "exception", "t": 2.0, "secondary": True,
                            "exception": {"type": "RuntimeError", "message": "Connection reset by peer"}})
    r0 = rank(0, "died", step=9, dl=dl(10, False), end=e0)
    r1 = rank(1, "died", step=9, dl=dl(9, True), end={"how": "signal", "signal": "SIGABRT", "fatal": "Aborted",
                                                       "fatal_frame": fr, "t": 1.5})
    order = [first_rank, 1 - first_rank]
    return section([r0, r1], stall=False, death={"first_rank": first_rank, "ranks": [0, 1], "order": order})


def test_a_rank_that_ran_out_and_aborted_at_its_next_collective_is_uneven_batches_not_a_stranger_s_sigabrt():
    """Trigger (a real job, no mismatch record): one RUN005 naming rank 1's 9 batches against rank 0's 10 and its
    abort at t.py:19 as the consequence; no RUN010 telling the user to find who sent SIGABRT."""
    from run_factory import findings

    found = findings(_abort_after_its_data())
    assert [f.id for f in found] == ["RUN005"], [(f.id, f.title) for f in found]
    assert "ran out after 9 batch(es)" in found[0].title and "t.py:19" in found[0].title
    assert "no length" in found[0].detail and "line:19" in found[0].subjects


def test_a_peer_that_died_first_of_its_own_error_keeps_its_death():
    """Quiet: rank 0 (still with data) raised its own ValueError first: RUN010 names it; the short loader is no cause."""
    from run_factory import findings

    found = findings(_abort_after_its_data(first_rank=0, exc_on_0=True))
    assert "RUN005" not in [f.id for f in found] and found and found[0].id == "RUN010", [(f.id, f.title) for f in found]
