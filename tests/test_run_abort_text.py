"""RUN013 says a rank's abort at shutdown as torch's Gloo teardown, with the shutdown order that avoids both the abort
and the hang (round 20, issue 27): the text and the fix come from ddpdoctor/data/teardown.json, whose knowledge is read
from torch's and CPython's source (repo, path, commit). Trigger: the group still alive at exit; quiet: destroyed."""
from __future__ import annotations

from run_factory import findings, rank, section

from ddpdoctor.facts import teardown


def _exit_abort(n: int, pg: bool) -> dict:
    return rank(n, "died", step=8, end={"how": "signal", "signal": "SIGABRT", "t": 10.0, "at_exit": True,
                                        "pg_at_exit": pg, "secondary": True})


def test_teardown_knowledge_names_its_sources():
    e = teardown.entry("gloo")
    assert e["id"] == "gloo-worker-releases-python-tensors-at-teardown"
    paths = {(s["repo"], s["path"]) for s in e["sources"]}
    assert ("pytorch/pytorch", "torch/csrc/distributed/c10d/ProcessGroupGloo.cpp") in paths
    assert ("python/cpython", "Python/ceval_gil.h") in paths
    assert all(len(s["commit"]) == 40 and s["quote"] for s in e["sources"])
    assert teardown.entry("mpi") == {}


def test_run013_live_group_says_torch_teardown_and_frees_the_ddp_model_before_destroying():
    (f,) = findings(section([rank(0), _exit_abort(1, pg=True)], stall=False), "RUN013")
    assert f.title.startswith("rank 1 died on SIGABRT while the interpreter shut down after its last step (8)")
    assert "still initialized" in f.title and "torch's Gloo teardown" in f.title and "not your code" in f.title
    assert "terminate called without an active exception" in f.detail and "plain torchrun too" in f.detail
    # the order that matters: the DDP model (its Reducer holds the group) goes before destroy_process_group()
    fix = f.fix
    assert fix.index("del trainer, model") < fix.index("gc.collect()") < fix.index("dist.destroy_process_group()")
    assert compile(fix, "<fix>", "exec") is not None


def test_run013_destroyed_group_is_not_said_as_gloo_teardown():
    (f,) = findings(section([rank(0), _exit_abort(1, pg=False)], stall=False), "RUN013")
    assert "had been destroyed" in f.title and "Gloo teardown" not in f.title
    assert "dist.destroy_process_group()" not in f.fix and "gdb" in f.fix
    assert "can still be the cause" in f.detail and "not known from here" in f.detail
