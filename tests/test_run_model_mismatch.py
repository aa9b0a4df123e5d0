"""RUN010 when the ranks die of DDP's construction check (torch reducer.cpp, verify_params_across_processes): each rank
prints its own side of the comparison, so the rank that died first is not the culprit (the lead's held-out review, set
17: `run` blamed the rank whose message came first; triage had the class since round 15). The verdict is the shared
fact (facts.model_mismatch). Pure tests on literal `run` sections."""
from __future__ import annotations

from run_factory import findings, rank, section


def _msg(me, n_me, other, n_other):
    return (f"DDP expects same model across all ranks, but Rank {me} has {n_me} params, while rank {other} has "
            f"inconsistent {n_other} params.")


def _died(r, t, message):
    return rank(r, "died", end={"how": "exception", "t": t, "exception": {
        "type": "RuntimeError", "message": message, "user": {"file": "finetune.py", "line": 356, "func": "main",
                                                             "code": "trainer.train()"}}})


def test_two_ranks_two_sides_no_culprit():
    rs = [_died(0, 5.0, _msg(0, 28, 1, 29)), _died(1, 5.02, _msg(1, 29, 0, 28))]
    found = findings(section(rs, stall=False, death={"first_rank": 0, "ranks": [0, 1], "order": [0, 1]}), "RUN010")
    assert len(found) == 1
    f = found[0]
    assert "built different models" in f.title and "no majority" in f.title and "died first" not in f.title
    assert "rank 0 has 28 params" in f.title and "rank 1 has 29 params" in f.title
    assert "rank:0" in f.subjects and "rank:1" in f.subjects


def test_a_majority_names_the_odd_rank():
    rs = [_died(0, 5.0, _msg(0, 28, 2, 29)), _died(1, 5.01, _msg(1, 28, 2, 29)), _died(2, 5.02, _msg(2, 29, 0, 28))]
    found = findings(section(rs, stall=False, death={"first_rank": 0, "ranks": [0, 1, 2], "order": [0, 1, 2]}),
                     "RUN010")
    f = found[0]
    assert "rank 2 is the odd one out" in f.title
    assert [s for s in f.subjects if s.startswith("rank:")] == ["rank:2"]


def test_another_exception_keeps_died_first():
    rs = [_died(0, 5.0, "ValueError: bad batch"), rank(1)]
    found = findings(section(rs, stall=False, death={"first_rank": 0, "ranks": [0], "order": [0]}), "RUN010")
    assert found and "rank 0 died first" in found[0].title


# --- the launcher told to stop from outside: no rank failed by itself (set 17: SIGTERM to `accelerate launch`) ------
def _stopped(r, t, reason="the agent was told to stop"):
    return rank(r, "died", step=31, end={"how": "signal", "signal": "SIGTERM", "t": t, "terminated_by": {
        "who": "torchrun", "signal": "SIGTERM", "reason": reason, "after_ranks": []}})


def test_a_launcher_stopped_from_outside_blames_no_rank():
    sec = section([_stopped(0, 5.0), _stopped(1, 5.0)], stall=False,
                  death={"first_rank": 0, "ranks": [0, 1], "order": [0, 1]})
    (f,) = findings(sec, "RUN010")
    assert f.severity == "warning" and "stopped from outside" in f.title and "no rank failed by itself" in f.title
    assert "died first" not in f.title and "sacct" in f.fix


def test_a_teardown_after_a_failed_worker_is_not_a_stop_from_outside():
    exc = {"type": "ValueError", "message": "bad batch"}
    r1 = rank(1, "died", end={"how": "exception", "t": 4.0, "exception": exc})
    sec = section([_stopped(0, 5.0, reason="a worker failed"), r1], stall=False,
                  death={"first_rank": 1, "ranks": [1, 0], "order": [1, 0]})
    (f,) = findings(sec, "RUN010")
    assert "stopped from outside" not in f.title and "rank 1 died first" in f.title
