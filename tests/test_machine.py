"""tests/machine.py: the slowness factor that stretches test deadlines. Pure: a fake measurement and a temp file
(the real one starts a process)."""
from __future__ import annotations

import threading

import machine


def test_the_factor_follows_the_load_between_measurements():
    measured = {"factor": 1.1, "load": 1.0, "at": 0.0}
    assert machine.adjusted(measured, 1.0, 2) == 1.1                  # same load: as measured
    assert machine.adjusted(measured, 5.0, 2) == round(1.1 * 3.0, 3)  # 6 runnable on 2 cores vs 2: 3x less CPU each
    assert machine.adjusted(dict(measured, load=7.0), 1.0, 2) == 1.0  # quieter now, never below 1
    assert machine.adjusted(dict(measured, factor=6.0), 30.0, 2) == machine.MAX_FACTOR
    assert machine.cpu_share_slowdown(0.5, 2) == 1.0 and machine.cpu_share_slowdown(3.0, 1) == 4.0


def test_one_measurement_per_session_shared_through_the_file(tmp_path):
    path = str(tmp_path / "slowness.json")
    calls = []
    clock = [1000.0]

    def measure():
        calls.append(1)
        return {"at": clock[0], "factor": 2.5, "load": 4.0}

    docs = []
    threads = [threading.Thread(target=lambda: docs.append(machine.shared_measurement(path, measure, lambda: clock[0])))
               for _ in range(4)]  # four workers at once: one measures, the others read its result
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(calls) == 1 and len(docs) == 4 and all(d["factor"] == 2.5 for d in docs)
    clock[0] += machine.TTL_S - 1
    machine.shared_measurement(path, measure, lambda: clock[0])
    assert len(calls) == 1                       # still fresh
    clock[0] += 2
    machine.shared_measurement(path, measure, lambda: clock[0])
    assert len(calls) == 2                       # stale: measured again


def test_slowness_reads_the_session_file_and_a_forced_factor_wins(tmp_path, monkeypatch):
    path = tmp_path / "slowness.json"
    path.write_text('{"at": 1e12, "factor": 2.0, "load": 3.0}')  # fresh (a time stamp far ahead)
    monkeypatch.setenv(machine.FILE_VAR, str(path))
    monkeypatch.delenv("DDPDOCTOR_TEST_SLOWNESS", raising=False)
    monkeypatch.setattr(machine, "load_now", lambda: 3.0)
    monkeypatch.setattr(machine.os, "cpu_count", lambda: 2)
    assert machine.slowness() == 2.0 and machine.scaled(10) == 20.0
    monkeypatch.setattr(machine, "load_now", lambda: 7.0)
    assert machine.slowness() == 4.0              # (7 + 1) / (3 + 1)
    monkeypatch.setenv("DDPDOCTOR_TEST_SLOWNESS", "1")
    assert machine.slowness() == 1.0


def test_with_room_retries_a_run_that_did_not_reach_its_state_with_more_room():
    ran = []

    def attempt(deadline):  # a machine that needs 25 s to reach the state, whatever the factor said
        ran.append(deadline)
        return deadline >= 25.0

    got, deadline = machine.with_room(attempt, bool, 10.0, "the state", factor=lambda: 1.2)
    assert got is True and ran == [12.0, 24.0, 48.0] and deadline == 48.0
    ran.clear()
    assert machine.with_room(attempt, bool, 30.0, "the state", factor=lambda: 1.0) == (True, 30.0) and ran == [30.0]
    # a load that rose between tries: the factor read again wins over the doubling
    factors = iter([1.0, 5.0])
    ran.clear()
    machine.with_room(attempt, bool, 10.0, "the state", factor=lambda: next(factors))
    assert ran == [10.0, 50.0]


def test_with_room_fails_the_test_when_the_state_is_never_reached():
    import pytest

    with pytest.raises(pytest.fail.Exception, match=r"not reached in 3 runs with deadlines \[2.0, 4.0, 8.0\]"):
        machine.with_room(lambda d: False, bool, 2.0, "never", factor=lambda: 1.0)
