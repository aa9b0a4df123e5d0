"""Issue 27, cost: what the `ddpdoctor run` parent does per second of a steady job, which takes a share of the
cores the ranks run on. (1) The watch loop's wait before the next poll is bounded by how fast each rank's beacon
ring is really written (records per second between the last two polls), not by the step time as if every step
wrote a record: a tiny job's 2.5 ms steps write about 3 records per 32 steps (the unsampled ones are runs), and
the parent polled it 5 times a second (the POLL_S floor) instead of about once. (2) The run directory is listed
for new processes only when it changed (or changed lately). Pure, in-process; no job is started."""
import os

from ddpdoctor.run import beacon
from ddpdoctor.run import supervisor as sv


def _sup_with_ranks(now, **beacon_fields):
    sup = sv.Supervisor(["true"], stall_after=5.0)
    sup.t_start, sup.stall_open, sup.death_seen_t = now - 60.0, False, None
    procs = []
    for r in range(2):
        p = sv.Proc.__new__(sv.Proc)
        p.pid, p.info, p.alive, p.missed, p.steps = 1000 + r, {"kind": "proc", "ppid": 1, "env": {"RANK": str(r)}}, True, 0, []
        p.beacon = {"phase": "run", "rank": r, "t": now - 0.01, **beacon_fields}
        sup.procs[p.pid] = p
        procs.append(p)
    return sup, procs


def test_a_tiny_steps_ring_rate_not_its_step_time_bounds_the_poll_wait():
    now = 1000.0
    sup, procs = _sup_with_ranks(now, sd=[0.0025])
    assert sup._poll_wait(now) == sv.POLL_S  # no rate yet: as if each 2.5 ms step wrote a record (64 in 80 ms)
    for p in procs:
        p.ring_rate = 40.0  # what the tiny job writes: ~3 records per 32 steps of 2.5 ms
    assert abs(sup._poll_wait(now) - beacon.RING / 2 / 40.0) < 1e-9  # 0.8 s, not 0.2
    procs[1].ring_rate = 2000.0  # a rank that does write a record per fast step: the floor again
    assert sup._poll_wait(now) == sv.POLL_S
    procs[1].ring_rate = 0.0  # nothing written since the last poll (a pause): no bound from it
    assert abs(sup._poll_wait(now) - 0.8) < 1e-9
    for p in procs:
        p.beacon = dict(p.beacon, t=now - 4.7)  # but a stall is still due in 0.3 s
    assert abs(sup._poll_wait(now) - 0.3) < 1e-9


def test_the_ring_rate_is_measured_between_polls(tmp_path):
    w = beacon.Writer(str(tmp_path / f"beacon.{os.getpid()}"))
    p = sv.Proc.__new__(sv.Proc)
    p.pid, p.dir, p.alive, p._bfd, p.ps, p.start_ticks = os.getpid(), str(tmp_path), True, None, object(), None
    p.ring_n, p.steps, p.missed, p.cpu, p.ring_rate, p._ring_mark, p.rss_mb = 0, [], 0, [], None, None, None

    def records(first, n):
        for s in range(first, first + n):
            w.hot("run", False, False, 1.0, 1.0, 1.0, 0.0, s, 0, 0, 0, rec=(s, 1, 1.0, 0, 0, 0, 0, 0.0025, 0))

    records(1, 10)
    p.poll(100.0, False)
    assert p.ring_rate is None and p.ring_n == 10  # one poll: no rate yet
    records(11, 30)
    p.poll(100.5, False)
    assert p.ring_n == 40 and abs(p.ring_rate - 60.0) < 1e-9  # 30 records in 0.5 s
    p.poll(101.5, False)
    assert p.ring_rate == 0.0 and p.alive


def test_the_run_directory_is_listed_only_when_it_changed(tmp_path, monkeypatch):
    made = []
    monkeypatch.setattr(sv, "Proc", lambda pid, info, d: made.append(pid) or object())
    sup = sv.Supervisor(["true"])
    sup.run_dir = str(tmp_path)
    sup.tree = type("T", (), {"add": lambda self, pid: None})()
    (tmp_path / "info.11.json").write_text("{}")
    old = 1_000_000.0
    os.utime(tmp_path, (old, old))
    sup._discover()
    assert made == [11]
    listed = []
    real_glob = sv.glob.glob
    monkeypatch.setattr(sv.glob, "glob", lambda pat: listed.append(pat) or real_glob(pat))
    sup._discover()
    assert listed == []  # unchanged and old: no listing
    (tmp_path / "info.12.json").write_text("{}")  # a new process: the directory's mtime moves
    sup._discover()
    assert made == [11, 12] and len(listed) == 1
    sup._discover()  # changed just now (within DISCOVER_FRESH_S): listed again, in case of a file in the same tick
    assert len(listed) == 2 and made == [11, 12]
