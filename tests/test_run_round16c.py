"""Issue 27, round 16 (the lead's held-out review, set 17): pure tests on recorded facts.

RT036 timed set-up from the process's start, which holds the interpreter's start, `import torch` /
transformers and model building before any process group existed: it warned on 5 of 6 healthy jobs
(ages 16-29 s against a 30 s group timeout). It now times from the rank's entry into
init_process_group, which `ddpdoctor run`'s wrapper records; an age alone is an upper bound."""
from __future__ import annotations

from factory import findings_of
from test_preflight_checks import TORCHRUN_ENV, peers, runtime, snap, trainer

PG30 = {"initialized": True, "rank": 0, "world_size": 2, "timeout_s": 30.0}


def _rt036(per_rank, **rt):
    s = snap(env=TORCHRUN_ENV, rt=runtime(distributed=PG30, **rt), peers=peers(**per_rank),
             tr=trainer(args={"ddp_timeout": 30, "use_cpu": True, "device": "cpu"}))
    return findings_of(s, "RT036")


def test_rt036_rank0_preprocessing_after_init_is_named():
    """Trigger: rank 0 preprocesses for 18 s (60% of the 30 s timeout) after init_process_group while
    rank 1 waits in a barrier; both ranks are ~25 s old at training."""
    [f] = _rt036({"0": {"seconds_since_start": 26.0, "seconds_since_group": 18.4},
                  "1": {"seconds_since_start": 25.5, "seconds_since_group": 18.6}})
    assert f.severity == "warning" and "from init_process_group to training" in f.title
    assert "rank 1 needed 19 s" in f.title and "the process group's timeout is 30 s" in f.title
    assert f.evidence["seconds_since_group"] == {0: 18.4, 1: 18.6}


def test_rt036_quiet_for_a_slow_import_under_load():
    """Quiet: ranks 27-29 s old at training (imports under load 6-9), 2-3 s after init_process_group."""
    assert not _rt036({"0": {"seconds_since_start": 29.0, "seconds_since_group": 2.9},
                       "1": {"seconds_since_start": 27.2, "seconds_since_group": 2.1}})


def test_rt036_an_age_alone_is_an_upper_bound():
    """Without the group's start (preflight or DoctorCallback without `ddpdoctor run`), an age under the
    whole timeout stays quiet (the held-out healthy jobs: 16-29 s of 30); one over it warns, as a bound."""
    assert not _rt036({"0": {"seconds_since_start": 29.0}, "1": {"seconds_since_start": 16.3}})
    [f] = _rt036({"0": {"seconds_since_start": 12.0}, "1": {"seconds_since_start": 41.0}})
    assert "rank 1 needed up to 41 s to reach training" in f.title and "upper bound" in f.detail
    assert f.evidence["seconds_since_start_upper_bound"] == {0: 12.0, 1: 41.0}
    # this rank's own facts when the peers' are missing
    assert not _rt036({}, seconds_since_start=29.0)
    assert [g.id for g in _rt036({}, seconds_since_start=29.0, seconds_since_group=16.0)] == ["RT036"]


def test_run_init_wrapper_notes_when_the_group_started(monkeypatch):
    """The fact's source: run's init_process_group wrapper notes the entry and the group's start, and
    the runtime facts time set-up from the entry."""
    from ddpdoctor.inprocess.runtime import process
    from ddpdoctor.run import recorder

    for name in ("_publish_cold", "_register_kill_dump", "_after_init", "_set_phase"):
        monkeypatch.setattr(recorder, name, lambda *a, **k: None)
    monkeypatch.setattr(process, "_GROUP", {})
    for name in ("off", "rank", "world", "threads", "phase", "pt", "pl", "pg_timeout"):  # restored after the test
        monkeypatch.setattr(recorder.S, name, getattr(recorder.S, name, None))
    monkeypatch.setattr(recorder.S, "off", False)

    class Mod:
        @staticmethod
        def get_rank():
            return 0

        @staticmethod
        def get_world_size():
            return 2

    times = iter([100.0, 130.0, 131.0, 140.0])
    monkeypatch.setattr(recorder.time, "time", lambda: next(times))
    wrapped = recorder._wrap_init(lambda *a, **k: "pg", Mod)
    assert wrapped("gloo") == "pg"
    assert process.group_start() == {"entered_wall": 100.0, "up_wall": 130.0}
    monkeypatch.setattr(process, "distributed_facts", lambda: {"initialized": True, **process.group_start()})
    monkeypatch.setattr(process.time, "time", lambda: 141.5)
    assert process.process_facts({})["seconds_since_group"] == 41.5
