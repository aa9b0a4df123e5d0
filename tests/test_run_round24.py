"""Round 24 (issue 27): a rank that aborted itself (SIGABRT) is explained by what it printed before the abort, not by
"find who sent SIGABRT". Pure: facts.aborts over recorded stderr, RUN010 over a section, the supervisor's step that
reads the job's stderr with a stand-in for its tee."""
from __future__ import annotations

from pathlib import Path

from ddpdoctor.facts import aborts

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "run"


def test_the_gloo_abort_of_a_real_job_is_read_with_its_catalogued_meaning():
    """Trigger: the stderr of a real 2-rank Gloo job whose rank 1 aborted in Pair::read (size mismatch)."""
    [r] = aborts.reasons((FIX / "abort_gloo_size_mismatch.stderr").read_text())
    assert r["id"] == "libstdcxx.terminate_after_throwing" and r["type"] == "gloo::EnforceNotMet"
    assert "Received data size doesn't match" in r["what"] and r["message_id"] == "gloo.tcp.received_size_mismatch"
    assert "same collectives" in r["fix"]


def test_assert_and_bare_terminate_texts_are_read_and_plain_stderr_is_not():
    [a] = aborts.reasons("python: csrc/ops.cpp:88: void f(): Assertion `n > 0' failed.\nAborted (core dumped)\n")
    assert a["id"] == "glibc.assert_fail" and a["what"] == "n > 0"
    [b] = aborts.reasons("terminate called without an active exception\n")
    assert b["id"] == "libstdcxx.terminate_without_exception" and "message_id" not in b
    quiet = ("Traceback (most recent call last):\n  File \"t.py\", line 3\nRuntimeError: what(): nothing\n"
             "W1207 torch/distributed/elastic: Sending process 12 closing signal SIGTERM\n")
    assert aborts.reasons(quiet) == []  # a Python exception that quotes what() is no abort


def _died(end):
    from run_factory import rank, section

    r0 = rank(0, "died", step=9, end={"how": "exception", "t": 2.0, "secondary": True,
                                        "exception": {"type": "RuntimeError", "message": "Connection reset by peer"}})
    r1 = rank(1, "died", step=9, end=dict({"how": "signal", "signal": "SIGABRT", "fatal": "Aborted", "t": 1.0,
                                           "fatal_frame": {"file": "t.py", "line": 19, "func": "<module>",
                                                           "code": "dist.all_reduce(t)"}}, **end))
    return section([r0, r1], stall=False, death={"first_rank": 1, "ranks": [0, 1], "order": [1, 0]})


def test_run010_says_why_a_rank_aborted_itself():
    """Trigger: the abort read from stderr: the title says it, the fix is the catalogued message's, not a hunt for a
    sender."""
    from run_factory import findings

    rs = aborts.reasons((FIX / "abort_gloo_size_mismatch.stderr").read_text())
    [f] = findings(_died({"abort": {"reasons": rs, "aborted": 1}}), "RUN010")
    assert "it aborted itself: terminate called after throwing 'gloo::EnforceNotMet'" in f.title, f.title
    assert "same collectives" in f.fix and "who sent" not in f.fix and "raised by the process itself" in f.detail


def test_run010_without_an_abort_message_still_does_not_hunt_for_a_sender():
    """Quiet (no abort text kept): the title as before; the fix says SIGABRT is the process's own abort()."""
    from run_factory import findings

    [f] = findings(_died({}), "RUN010")
    assert "aborted itself" not in f.title and "was killed by SIGABRT" in f.title
    assert "raised by the process itself" in f.fix and "Find who sent" not in f.fix


def test_the_supervisor_reads_the_job_stderr_for_a_rank_that_aborted():
    """The step at a death: a SIGABRT rank with no exception gets the abort messages of the job's stderr; a rank
    torchrun ended, or one with an exception, gets none."""
    from ddpdoctor.run.supervisor import Supervisor

    class Tee:
        def text(self, wait_s=1.0):
            return (FIX / "abort_gloo_size_mismatch.stderr").read_text()

    sup = Supervisor(["true"])
    sup.stderr_tee = Tee()
    sec = {"ranks": [{"rank": 1, "end": {"how": "signal", "signal": "SIGABRT"}},
                     {"rank": 0, "end": {"how": "signal", "signal": "SIGABRT", "terminated_by": {"who": "torchrun"}}},
                     {"rank": 2, "end": {"how": "exception", "exception": {"type": "ValueError"}}}]}
    sup._explain_kills(sec)
    one, two, three = (r["end"] for r in sec["ranks"])
    assert one["abort"]["reasons"][0]["type"] == "gloo::EnforceNotMet" and one["abort"]["aborted"] == 1
    assert "abort" not in two and "abort" not in three


def test_uneven_batches_of_loaders_with_no_length_read_without_none():
    """A real stall (iterable shards of 10 and 9; rank 1 then in a sleep only it does): RUN005 as before, its words
    without "of None" (the recorder holds len None for an IterableDataset's loader)."""
    from run_factory import findings, rank, section

    dl = lambda n, end: {"n": n, "len": None, "end": end, "s0": 0, "workers": 0, "bs": 1}  # noqa
    r0 = rank(0, "backward", step=9, dl=dl(9, False))
    r1 = rank(1, "outside", step=9, line=18, code="time.sleep(120)", dl=dl(9, True))
    [f] = findings(section([r0, r1]), "RUN005")
    assert "None" not in f.title + f.detail, f.title
    assert "rank 1 ran out of data after 9 batch(es) and is outside any collective" in f.title, f.title
    assert "(a loader with no length)" in f.title


def _paced(data=(122.7, 122.7), step=(128.6, 127.8), steps=45, workers=0, stall=False):
    """The end of a job as `ddpdoctor run` recorded a real 2-rank Gloo job (30 ms per item made in __getitem__,
    num_workers=0): each rank's split summary and its loader."""
    from run_factory import rank, section

    rs = []
    for r in (0, 1):
        sp = {"steps": steps, "split_steps": steps, "step_ms": {"median": step[r], "p95": step[r] * 1.2},
              "data": {"median": data[r], "p95": data[r] * 1.1, "share": data[r] / step[r]}}
        dl = {"n": 50, "len": 50, "end": True, "workers": workers, "bs": 4, "pin": False, "persistent": False,
              "prefetch": None, "at": "slow_data.py:13"}
        rs.append(rank(r, "exited", dl=dl, split=sp))
    return section(rs, stall=stall)


def test_run029_every_rank_waiting_for_its_batches_is_the_answer_to_why_slow():
    """Trigger: 95% of every rank's step is data, num_workers=0: a warning with the loader's facts and the fix."""
    from run_factory import findings

    [f] = findings(_paced(), "RUN029")
    assert f.severity == "warning" and "every rank waits for its next batch 95% or more" in f.title, f.title
    assert "num_workers=0" in f.detail and "num_workers=4" in f.fix and "line:13" in f.subjects
    [g] = findings(_paced(workers=8), "RUN029")
    assert "Raise num_workers (now 8)" in g.fix


def test_run029_stays_quiet_on_compute_bound_jobs_one_slow_rank_short_jobs_and_stalls():
    """Quiet: data 10% of the step; one rank's data slow (RUN020's straggler, not the job's pace); 8 measured steps;
    a stall. (15 measured steps, a 20-step job's: said; run-r24 j5.)"""
    from run_factory import findings

    assert findings(_paced(data=(12.0, 12.0)), "RUN029") == []
    assert findings(_paced(data=(122.7, 3.0)), "RUN029") == []
    assert findings(_paced(steps=8), "RUN029") == []
    assert [f.id for f in findings(_paced(steps=15), "RUN029")] == ["RUN029"]
    assert findings(_paced(stall=True), "RUN029") == []


def _clean_exit(eps1=7, len1=8, rank1_end=None):
    """What `ddpdoctor run` recorded of run-r25 j8 (runcol25, a real 2-rank Gloo LSTM job): the same 8-batch loader,
    rank 1 takes 7 optimizer steps per epoch and exits with status 0 after its 70 steps; rank 0, in its step 71's
    backward, dies of "Connection closed by peer" (why: peer-lost)."""
    from run_factory import rank, section

    dl = lambda ln, eps: {"n": 7, "len": ln, "end": False, "s0": 0, "workers": 0, "bs": 64, "ep": 9, "eps": eps}  # noqa
    e0 = {"how": "exception", "why": "peer-lost", "t": 2.0, "exception": {
        "type": "RuntimeError", "message": "[pair.cc:553] Connection closed by peer [127.0.0.1]:14001.",
        "user": {"file": "ddp_lstm.py", "line": 70, "func": "main", "code": "loss.backward()"}}}
    r0 = rank(0, "exited", step=70, dl=dl(8, 8), end=e0)
    r1 = rank(1, "exited", step=70, dl=dl(len1, eps1), end=rank1_end)
    return section([r0, r1], stall=False, death={"first_rank": 0, "ranks": [0], "order": [0]})


def test_a_short_rank_that_exited_well_is_the_cause_of_its_peer_s_lost_connection():
    """Trigger (run-r25 j8's class): RUN005 naming rank 1's 7 steps per epoch against rank 0's 8, its clean exit, and
    rank 0's lost connection as the consequence; no RUN010 blaming rank 0."""
    from run_factory import findings

    found = findings(_clean_exit())
    assert [f.id for f in found] == ["RUN005"], [(f.id, f.title) for f in found]
    f = found[0]
    assert "rank 1 took 7 optimizer step(s) per epoch" in f.title and "exited (status 0)" in f.title, f.title
    assert "rank 0 then lost its peer at ddp_lstm.py:70" in f.title and "Connection closed by peer" in f.detail
    by_len = findings(_clean_exit(eps1=7, len1=7))
    assert [g.id for g in by_len] == ["RUN005"] and "7 batch(es) per epoch" in by_len[0].title


def test_even_epochs_or_a_short_rank_that_died_leave_run010():
    """Quiet: the same epochs on both ranks (the clean exit is no cause by itself), or the short rank itself died: RUN010
    as before."""
    from run_factory import findings

    assert [f.id for f in findings(_clean_exit(eps1=8))] == ["RUN010"]
    died = {"how": "signal", "signal": "SIGKILL", "t": 1.0}
    assert "RUN005" not in [f.id for f in findings(_clean_exit(rank1_end=died))]
