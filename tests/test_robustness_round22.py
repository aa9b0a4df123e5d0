"""Round 22's robustness audit (robust22): the classes its first read found in the files it may change, each with a
test that fails before the fix (main b732fe6d). No process is launched: the pipeline functions are called in-process.

1. Reading check's `-- COMMAND` raised out of the command: `check -- vllm serve m --tensor-parallel-size <5,000
   digits>` exited 3 (internal error): CPython >= 3.11 refuses int() of a digit string over 4,300 digits
   (python/cpython gh-95778) and the serving parser tests only isdigit(). The parser's own bug stays the parser's (left
   for the lead: facts/launch.py); the class fixed here is that a failure while reading the user's command aborted the
   whole check: the command is now read as one gatherer is (pipeline/check.py read_given_command), its failure a
   warning (DOC002, 'given_command'), the other checks still run.
2. A read that never returns hung check for ever: `check -- torchrun ... --model_name_or_path org/name` with the
   Hugging Face cache's refs/main a FIFO (gather/launch.py reads it with a plain open(), which waits for a writer,
   fifo(7)). The same holds for every live gatherer: none had a deadline. The reading of `-- COMMAND` and each live
   gatherer now run under pipeline/snapshot.py GATHER_DEADLINE_S (`bounded`): past it, their facts are an error, and
   the blocked read is left in a daemon thread. The tests shorten the deadline and first assert the read really
   blocked (the FIFO has a reader waiting: a non-blocking open for writing succeeds only then), which also releases it.
"""
from __future__ import annotations

import errno
import os
import threading

import pytest

import ddpdoctor.pipeline.snapshot as snapmod
from ddpdoctor.pipeline.check import run_check
from ddpdoctor.pipeline.snapshot import Snapshot, bounded, call_gatherer


def _release_when(fifo: str, done: threading.Event, wait_s: float = 60.0) -> threading.Thread:
    """A helper that, once `done` is set (or after wait_s, so code without a deadline does not hang the suite), opens
    `fifo` for writing without blocking, which succeeds only while a reader is blocked in open(): records whether
    one was, and so releases it."""
    seen: dict = {}

    def work() -> None:
        done.wait(wait_s)
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            seen["reader"] = False
            seen["errno"] = exc.errno
            return
        seen["reader"] = True
        os.close(fd)

    t = threading.Thread(target=work, daemon=True)
    t.seen = seen  # type: ignore[attr-defined]
    t.start()
    return t


def _ids(report) -> list:
    return [f.id for f in report.findings]


def _given_error(report) -> str:
    for f in report.findings:
        if (f.evidence or {}).get("section") == "given_command":
            return str(f.evidence.get("error"))
    return ""


def test_given_command_parser_error_is_a_warning_not_exit_3(tmp_path, monkeypatch):
    """A parser that raises on the user's command. The audit's cell was `vllm serve -tp <5,000 digits>` (int() refuses
    4,300+ digits); that parser now reads such a size as no size (tests/test_robustness_round22_lead.py), so the class
    is provoked here by a parser that raises as it did."""
    import ddpdoctor.facts.launch as launchmod

    def raising(argv):
        raise ValueError("Exceeds the limit (4300 digits) for integer string conversion")

    monkeypatch.setattr(launchmod, "serving_command", raising)
    monkeypatch.chdir(tmp_path)
    report = run_check(comm=False, command=["vllm", "serve", "m/x", "--tensor-parallel-size", "4"])
    why = _given_error(report)
    assert "4300 digits" in why and "the command after --" in why
    assert len(report.findings) > 1  # this machine's checks still ran
    assert all(f.severity != "error" for f in report.findings if (f.evidence or {}).get("section") == "given_command")


def test_given_command_quiet_when_it_parses(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    report = run_check(comm=False, command=["vllm", "serve", "m/x", "--tensor-parallel-size", "4"])
    assert _given_error(report) == ""


def test_given_command_read_that_never_returns_is_given_up_at_the_deadline(tmp_path, monkeypatch):
    """A read of the command's files that never returns costs the deadline, not the doctor. The audit's cell was a
    FIFO as the Hub cache's refs/main; that read is now never blocking (Sources.read_regular: the lead test), so the
    class is provoked by the Hub-cache reader blocking until the test releases it."""
    import ddpdoctor.gather.launch as gl

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(snapmod, "GATHER_DEADLINE_S", 1.0, raising=False)
    done, entered = threading.Event(), threading.Event()

    def blocking(src, repo_id):
        entered.set()
        done.wait(60)
        return None

    monkeypatch.setattr(gl, "_hub_cached_config", blocking)
    try:
        report = run_check(comm=False, command=["torchrun", "--nproc-per-node", "2", "train.py",
                                                "--model_name_or_path", "org/name"])
    finally:
        done.set()
    assert entered.is_set()  # the read really began (and blocked)
    why = _given_error(report)
    assert "did not finish within 1 s" in why, why


def test_given_command_hub_cache_quiet_with_a_regular_ref(tmp_path, monkeypatch):
    base = tmp_path / "hf" / "hub" / "models--org--name"
    (base / "refs").mkdir(parents=True)
    (base / "refs" / "main").write_text("a" * 40)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(snapmod, "GATHER_DEADLINE_S", 1.0, raising=False)
    report = run_check(comm=False, command=["torchrun", "--nproc-per-node", "2", "train.py",
                                            "--model_name_or_path", "org/name"])
    assert _given_error(report) == ""
    assert "ENV022" in _ids(report)  # the command was read: train.py is not found here


def test_live_gatherer_blocked_on_a_fifo_is_given_up_at_the_deadline(tmp_path):
    fifo = str(tmp_path / "ref")
    os.mkfifo(fifo)

    def gatherer() -> dict:
        with open(fifo) as fh:  # a gatherer that opens a path it expected to be a file
            return {"text": fh.read()}

    snap = Snapshot(gatherers={"blocked": gatherer})
    snap.deadline_s = 0.5
    done = threading.Event()
    helper = _release_when(fifo, done)
    try:
        section = snap.get("blocked")
    finally:
        done.set()
        helper.join(10)
    assert helper.seen.get("reader") is True, helper.seen
    assert "did not finish within 0.5 s" in section["error"]
    assert any("blocked" in f"{k}" for k in snap.errors())


def test_live_snapshot_has_the_deadline_and_quick_gatherers_are_unchanged():
    assert snapmod.live_snapshot().deadline_s == snapmod.GATHER_DEADLINE_S
    assert call_gatherer("ok", lambda: {"a": 1}, 5.0)["a"] == 1
    assert call_gatherer("raises", lambda: 1 / 0, 5.0)["error"].startswith("ZeroDivisionError")
    assert call_gatherer("type", lambda: [1], 5.0)["error"].startswith("TypeError")
    assert bounded(lambda: 7, None) == (7, None)
    no_fifo = bounded(lambda: os.open("/nonexistent-robust22", os.O_RDONLY), 5.0)
    assert no_fifo[0] is None and "FileNotFoundError" in no_fifo[1] and str(errno.ENOENT) in no_fifo[1]


@pytest.mark.parametrize("deadline", [None, 5.0])
def test_bounded_returns_what_the_function_returns(deadline):
    assert bounded(lambda: {"x": [1, 2]}, deadline) == ({"x": [1, 2]}, None)
