"""Issue 27 (stall reports): an unsampled step (recorder._on_optimizer_step's fast path) stores its own end into
the beacon: the last progress time and step end exactly, the batch count and the step count, with one pack_into
(beacon.END_AT). Before, only the step count was stored, so a stall's idle time and a rank's "since" were up to
one due period (~2 x SPLIT_EVERY_S) early and its batch count up to that many steps' batches low. A rank's
"since" counts from the later of its phase's start and its last step's end (section._since). In-process, a fake
clock; no job is started."""
from ddpdoctor.run import beacon, recorder
from ddpdoctor.run import section as run_section


def _keep_state(monkeypatch, S) -> None:
    """Every field of the recorder's state comes back after the test (S has slots, no __dict__ to swap)."""
    for name in type(S).__slots__:
        if hasattr(S, name):
            monkeypatch.setattr(S, name, getattr(S, name))


def _fast_path_rank(monkeypatch, tmp_path):
    S = recorder.S
    _keep_state(monkeypatch, S)
    w = beacon.Writer(str(tmp_path / "b"))
    for name, value in (("off", False), ("kind", "proc"), ("writer", w), ("step", 40), ("due", 1000),
                        ("st", 100.0), ("sdm", 0.004), ("phase", "run"), ("pt", 90.0), ("in_coll", False),
                        ("dl", None), ("dl_desc", None), ("spl", False), ("ring", True)):
        setattr(S, name, value)
    recorder._bind_writer(w)
    S.dl = {"n": 5, "len": 1000, "end": False, "workers": 0, "bs": 4, "pin": False, "persistent": False,
            "prefetch": None}
    recorder._publish_cold()  # the last full write: t, pt 90.0 (the phase's start), batches 5, step 40
    recorder._publish(None, 100.0)  # ...its time on the test's clock (the last step's end, 100.0), not the machine's
    return S, w


def test_an_unsampled_steps_end_is_exact_in_the_beacon(monkeypatch, tmp_path):
    S, w = _fast_path_rank(monkeypatch, tmp_path)
    seq = w.seq
    S.dl["n"] = 7  # two batches on the fast path (no beacon write but the phase byte)
    recorder._on_optimizer_step(None, (), {}, _time=lambda: 100.01)
    assert w.seq == seq  # the fast path: no bracketed write
    b = beacon.read(str(tmp_path / "b"))
    assert b["step"] == 41 and b["t"] == 100.01 and b["st"] == 100.01, b
    assert b["dl"]["n"] == 7 and b["pt"] == 90.0 and b["sd"] == [0.004]  # pt and the step mean as they stood
    # the DataLoader's fast path marks "data" with the phase byte alone; the stall comes 0.5 s after the step
    S.mm[beacon.PHASE_AT] = beacon.CODE["data"]
    b = beacon.read(str(tmp_path / "b"))
    assert b["phase"] == "data" and run_section._since(b, 100.51) == 0.5  # was 10.5: from the old pt


def test_since_counts_from_the_phase_start_when_it_is_the_later(monkeypatch, tmp_path):
    S, w = _fast_path_rank(monkeypatch, tmp_path)
    recorder._on_optimizer_step(None, (), {}, _time=lambda: 100.01)
    assert run_section._since({"pt": 100.2, "st": 100.01}, 101.2) == 1.0  # a collective issued after the step
    assert run_section._since({"pt": 90.0, "st": None}, 91.0) == 1.0  # before any step: the phase's start
    assert run_section._since({}, 91.0) is None


def test_an_unsampled_steps_store_writes_its_three_fields_alone(monkeypatch, tmp_path):
    """The cost of the fast path (benchmarks/bench_run_instr.py): the step's end stores what changed, the batch
    count, the step's end and the step count (one pack_into of three values), not the six fields round 8 wrote
    back (t, pt, dl_n, st, sdm, step: ~980 instructions per step more than the step count alone). The last full
    write's t, pt and step mean stay as they were in the file; a reader takes the later of t and the step's end."""
    import struct

    S, w = _fast_path_rank(monkeypatch, tmp_path)
    recorder._publish(None, 100.0)
    before = bytes(w.mm[:beacon.COLD_AT])
    recorder._on_optimizer_step(None, (), {}, _time=lambda: 100.01)
    after = bytes(w.mm[:beacon.COLD_AT])
    changed = [i for i in range(len(before)) if before[i] != after[i]]
    # round 23 (run25): and the phase byte alone, "between" steps (beacon.PHASES), until the next batch overwrites it
    assert after[beacon.PHASE_AT] == beacon.CODE["between"]
    changed = [i for i in changed if i != beacon.PHASE_AT]
    assert changed and min(changed) >= beacon.END_AT and max(changed) < beacon.END_AT + beacon.END.size == beacon.STEP_AT + 8
    assert beacon.END.size == 24 and struct.unpack_from("<QdQ", after, beacon.END_AT) == (5, 100.01, 41)
    b = beacon.read(str(tmp_path / "b"))
    assert b["t"] == 100.01 and b["pt"] == 90.0 and b["sd"] == [0.004]


def test_the_in_process_stall_watch_counts_an_unsampled_steps_end_as_progress(monkeypatch):
    """DoctorCallback's in-process watch (inprocess.StallWatch) read the last progress from S.t, which an
    unsampled step does not set (it sets S.st and stores its end in the beacon): as the beacon's reader does,
    it now takes the later of the two, and the rank's own record (own_facts) says the same."""
    import threading
    import time

    from ddpdoctor.run import inprocess

    S = recorder.S
    _keep_state(monkeypatch, S)
    now = time.time()
    S.t, S.st, S.phase = now - 30.0, now, "run"  # the last full write 30 s ago, the last step just now
    fired, polls = [], []

    class CountedStop(threading.Event):
        def wait(self, timeout=None):
            polls.append(1)
            return super().wait(timeout)

    watch = inprocess.StallWatch(5.0, log=False, poll_s=0.01)
    watch._stop = CountedStop()
    monkeypatch.setattr(watch, "_fire", lambda idle: fired.append(idle))
    th = threading.Thread(target=watch._loop, daemon=True)
    th.start()
    # 50 polls of the watch, counted (a loaded machine may give the thread few in 0.5 s: then "no stall" said nothing),
    # while unsampled steps keep ending (each sets S.st alone): no stall
    until = time.monotonic() + 60
    while len(polls) < 51 and time.monotonic() < until:
        S.st = time.time()
        time.sleep(0.01)
    watch.stop()
    th.join(5)
    assert len(polls) > 50 and fired == [] and inprocess.own_facts()["beacon"]["t"] == S.st
    S.st = now - 20.0  # no step either for 20 s: a stall
    watch = inprocess.StallWatch(5.0, log=False, poll_s=0.01)
    monkeypatch.setattr(watch, "_fire", lambda idle: (fired.append(idle), watch.stop()))
    th = threading.Thread(target=watch._loop, daemon=True)
    th.start()
    th.join(5)
    assert len(fired) == 1 and fired[0] >= 20.0
