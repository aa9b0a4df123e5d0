"""Round 17 (run17d), issue 27: three classes the lead's held-out review (set 18) showed; fixed after that review
(tuning after review, disclosed). Pure tests on recorded facts; no process."""
from __future__ import annotations

from run_factory import findings

from ddpdoctor.run import section as run_section

# ---- "died first" is the first failure in time, not the first process exit (item 2)

GLOO_TIMEOUT = ("[../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 30000ms for recv "
                "operation to complete")
GLOO_CLOSED = "[../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [127.0.0.1]:29500"


def _rank(pid, rank, **kw):
    d = {"pid": pid, "info": {"kind": "proc", "ppid": 1, "env": {"RANK": str(rank)}},
         "beacon": {"phase": "run", "rank": rank, "step": 0}, "alive": False, "end_t": 50.0}
    d.update(kw)
    return d


def test_a_rank_whose_barrier_timed_out_first_is_first_though_its_peer_exited_sooner():
    """Trigger: a rank-0-only barrier under Gloo. Rank 0's barrier times out at 40.0 (its exception is recorded),
    rank 1 then gets "Connection closed by peer" at 40.3 and exits at 40.5; rank 0 still prints its traceback and runs
    atexit when the death is judged (alive, beacon phase "exception"). Before: rank 0 had no end, and RUN010 said
    "rank 1 died first ... Connection closed by peer"."""
    r0 = _rank(10, 0, alive=True, end_t=None, beacon={"phase": "exception", "rank": 0, "step": 0},
               exc={"type": "RuntimeError", "message": GLOO_TIMEOUT, "t": 40.0})
    r1 = _rank(11, 1, end_t=40.5, exc={"type": "RuntimeError", "message": GLOO_CLOSED, "t": 40.3})
    end0 = run_section.end_of(r0, 0)
    assert end0["how"] == "exception" and end0["t"] == 40.0 and end0["t_src"] == "exception" and end0["exiting"]
    sec = run_section.build([r0, r1], 41.0, death=True)
    assert sec["death"]["first_rank"] == 0 and sec["death"]["order"] == [0, 1]
    [f] = findings(sec, "RUN010")
    assert "rank 1 died first" not in f.title and "rank 0" in f.title.split(":")[0], f.title


def test_a_rank_that_really_failed_first_with_a_peer_error_stays_first():
    """Quiet: rank 1's peer error is the first failure in time (no peer failed earlier); rank 0, alive and not
    raising, has no end: rank 1 stays first. A live rank without an exception record is no failure."""
    r0 = _rank(10, 0, alive=True, end_t=None)
    r1 = _rank(11, 1, end_t=40.5, exc={"type": "RuntimeError", "message": GLOO_CLOSED, "t": 40.3})
    assert run_section.end_of(r0, 0) is None
    sec = run_section.build([r0, r1], 41.0, death=True)
    assert sec["death"]["first_rank"] == 1
    [f] = findings(sec, "RUN010")
    assert f.title.startswith("rank 1 died first"), f.title
    # a peer whose own exception came later does not take the first place either
    r0 = _rank(10, 0, alive=True, end_t=None, beacon={"phase": "exception", "rank": 0, "step": 0},
               exc={"type": "RuntimeError", "message": GLOO_TIMEOUT, "t": 41.0})
    sec = run_section.build([r0, r1], 41.5, death=True)
    assert sec["death"]["first_rank"] == 1 and sec["death"]["order"] == [1, 0]
