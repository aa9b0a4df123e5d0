"""Issue 27, round 14: the classes the held-out review of `ddpdoctor run` left (no case read). (D) a resized terminal
reaches the job's pty (and SIGWINCH the job's processes outside the doctor's process group); a killed doctor's run
directory does not stay in the temporary directory; (E) one representation of the kept stderr (the relay's files).
Pure tests on ptys, pipes and directories made here: no process is started."""
from __future__ import annotations

import fcntl
import os
import pty
import signal
import struct
import termios

from ddpdoctor.run import capture
from ddpdoctor.run import supervisor as sup_mod


def _size(fd: int) -> tuple:
    rows, cols, _, _ = struct.unpack("HHHH", fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\0" * 8))
    return rows, cols


def _set_size(fd: int, rows: int, cols: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


# ---------------------------------------------------------------- (D) SIGWINCH

def test_a_resized_terminal_reaches_the_jobs_pty():
    """The doctor's own stderr is a terminal (a pty made here); the job's pty gets its size again after a resize."""
    term_master, term = pty.openpty()
    _set_size(term, 24, 80)
    tee = capture.StderrTee(out_fd=term)
    job_end = tee.child_stderr()  # no relay (no run directory): nothing started
    try:
        assert tee.mode == "pty" and _size(job_end) == (24, 80)
        _set_size(term, 50, 132)
        assert _size(job_end) == (24, 80)  # without the resize the job keeps reading the old width
        assert tee.resize() is True
        assert _size(job_end) == (50, 132)
    finally:
        for fd in (job_end, tee._read_fd, term, term_master):
            os.close(fd)


def test_no_resize_where_the_job_has_no_pty():
    r, w = os.pipe()
    tee = capture.StderrTee(out_fd=w)
    job_end = tee.child_stderr()
    try:
        assert tee.mode == "pipe" and tee.resize() is False
    finally:
        for fd in (job_end, tee._read_fd, r, w):
            os.close(fd)


class _Tree:
    def __init__(self, members):
        self.members = members


def test_sigwinch_goes_on_only_to_processes_outside_the_doctors_group(monkeypatch):
    """torchrun's workers have their own sessions: the terminal signals only its foreground group (the doctor's)."""
    groups = {101: 7, 202: 9, 303: 11}
    sent = []
    monkeypatch.setattr(sup_mod.os, "getpgid", lambda pid: groups[pid])
    monkeypatch.setattr(sup_mod.os, "kill", lambda pid, sig: sent.append((pid, sig)))
    monkeypatch.setattr(sup_mod.proctree, "running", lambda pid, start: pid != 303)  # 303 is gone
    assert sup_mod.winch_others(_Tree({101: 1, 202: 2, 303: 3}), own_group=7) == 1
    assert sent == [(202, signal.SIGWINCH)]


# ---------------------------------------------------------------- (D) a killed doctor's run directory

def _run_dir(parent, name, owner=None, ns=None):
    d = parent / name
    d.mkdir()
    (d / "stderr.head").write_bytes(b"x")
    if owner is not None:
        (d / capture.OWNER_FILE).write_text((ns or capture._pid_ns()) + "\n" + owner)
    return d


def _me() -> str:
    return f"{os.getpid()} {capture._started_at(os.getpid())}"


def test_a_run_dir_whose_doctor_and_relay_are_gone_is_swept(tmp_path):
    dead = f"{os.getpid()} {capture._started_at(os.getpid()) + 1}"  # this pid, another start: a reused pid
    gone = _run_dir(tmp_path, "ddpdoctor-run-gone", owner=dead)
    alive = _run_dir(tmp_path, "ddpdoctor-run-alive", owner=_me())
    relay_alive = _run_dir(tmp_path, "ddpdoctor-run-relay", owner=dead + " " + _me())
    older = _run_dir(tmp_path, "ddpdoctor-run-older")  # no owner file: an older doctor's, or kept on purpose
    other = _run_dir(tmp_path, "other-gone", owner=dead)
    elsewhere = _run_dir(tmp_path, "ddpdoctor-run-container", owner=dead, ns="pid:[1]")  # another pid namespace
    assert capture.sweep_stale(str(tmp_path)) == [str(gone)]
    assert not gone.exists() and alive.exists() and relay_alive.exists() and older.exists() and other.exists()
    assert elsewhere.exists()


def test_the_relay_removes_the_run_dir_when_its_doctor_died(tmp_path):
    for name, owner, kept in (("dead", f"{os.getpid()} {capture._started_at(os.getpid()) + 1}", False),
                              ("alive", f"{os.getppid()} {capture._started_at(os.getppid())}", True)):
        # (the relay here is this process, not counted as its own doctor: the live owner is pytest's parent)
        d = _run_dir(tmp_path, name, owner=owner)
        r, w = os.pipe()
        os.write(w, b"the job's last line\n")
        os.close(w)
        with open(os.devnull, "wb") as null:
            capture.copy_and_keep(r, str(d), out_fd=null.fileno())
        os.close(r)
        assert d.exists() is kept
        if kept:
            assert capture.read_kept(str(d))[0] == b"the job's last line\n"


def test_the_doctor_writes_its_own_and_its_relays_identity(tmp_path):
    capture.write_owner(str(tmp_path), relay_pid=os.getpid())
    assert capture.owners_alive(str(tmp_path)) is True
    assert capture.owners_alive(str(tmp_path), skip=os.getpid()) is False  # the relay asking: its doctor only
    assert capture.owners_alive(str(tmp_path / "none")) is None


# ---------------------------------------------------------------- (E) one representation of the kept stderr

def test_the_thread_fallback_keeps_in_the_relays_files(tmp_path):
    tee = capture.StderrTee(keep_dir=str(tmp_path))
    tee.keep(b"Gloo connectFullMesh failed\n")
    assert capture.read_kept(str(tmp_path)) == (b"Gloo connectFullMesh failed\n", b"", 0)
    assert tee.text(0) == "Gloo connectFullMesh failed\n"
    assert not hasattr(capture, "keep")  # no second, in-memory copy of the head/tail logic


def test_the_stores_count_line_is_read_with_the_catalogues_format(monkeypatch):
    from ddpdoctor.facts import messages
    from ddpdoctor.run import multinode

    line = "torch.distributed.DistStoreError: Timed out after 6 seconds waiting for clients. 1/2 clients joined.\n"
    got = multinode.rendezvous_end(line)
    assert (got["timeout_s"], got["joined"], got["expected"]) == (6, 1, 2)
    assert multinode.rendezvous_end("Timed out after 6 seconds waiting for the store\n") is None
    # the pattern is the catalogue's entry, not a copy: a changed format changes what is read
    entry = dict(messages.by_id(multinode._STORE_JOIN_ID), format="{f1} of {f2} joined within {f0} s.")
    monkeypatch.setattr(messages, "by_id", lambda _id: entry)
    multinode._store_join.cache_clear()
    try:
        got = multinode.rendezvous_end("3 of 4 joined within 30 s.")
        assert (got["timeout_s"], got["joined"], got["expected"]) == (30, 3, 4)  # by the format's field names
        assert multinode.rendezvous_end(line) is None
    finally:
        multinode._store_join.cache_clear()


def test_a_stop_from_outside_is_one_test_for_the_checks_and_the_summary():
    from ddpdoctor.checks.run import stopped_from_outside

    assert stopped_from_outside([{"kind": "stall"}, {"kind": "kill", "t": 1.0}])
    assert not stopped_from_outside([{"kind": "stall"}]) and not stopped_from_outside(None)


# ---------------------------------------------------------------- (C) the straggler window, kept up to date

def _growing(full: dict, chunk: int):
    """The ranks' lists as the supervisor's grow: the same list objects, `chunk` records more per check."""
    live = {r: [] for r in full}
    n = max(len(v) for v in full.values())
    for end in range(chunk, n + chunk, chunk):
        for r, v in full.items():
            live[r].extend(v[len(live[r]):end])
        yield live


def test_the_kept_window_gives_aligneds_window_and_the_same_verdicts():
    """The recorded jobs of tests/test_run_split.py (all sampled, sampled every 4th step, a straggler with an onset,
    healthy noise, ranks that record at different paces), checked as they grow: each check's window and verdict
    are those of the full recompute."""
    from test_run_split import job, sampled_job

    from ddpdoctor.facts import steps as st

    jobs = [job(slow=2, extra=200.0, noise=0.05), job(noise=0.3, seed=3, steps=400),
            job(slow=3, extra=200.0, steps=44, onset=25), job(slow=1, extra=8.0, steps=20, onset=5),
            sampled_job(k=4, slow=1, extra=10.0, steps=400, onset=285, noise=0.02), sampled_job(k=4, noise=0.2, steps=400),
            job(slow=1, extra=10.0, steps=300, noise=0.02)]
    uneven = job(slow=0, extra=50.0, steps=120, noise=0.02)
    uneven[1] = uneven[1][:100]  # rank 1's later records not read yet
    jobs.append(uneven)
    checks = verdicts = 0
    for full in jobs:
        for chunk in (13, 41):
            aligner = st.Aligner()
            for live in _growing(full, chunk):
                for window in (st.WINDOW, 150):
                    assert aligner.aligned(live, window) == st.aligned(live, window)
                for mws in (st.MIN_WINDOW_S, 0.0):
                    got = st.straggler(live, min_window_s=mws, aligner=aligner)
                    assert got == st.straggler(live, min_window_s=mws)
                    verdicts += got is not None
                checks += 1
    assert checks > 150 and verdicts > 50  # the comparison saw verdicts, not only Nones


def test_the_kept_window_follows_a_restart_a_cut_list_and_a_new_list():
    from test_run_split import job

    from ddpdoctor.facts import steps as st

    full = job(steps=60, slow=1, extra=20.0)
    live = {r: list(v[:40]) for r, v in full.items()}
    aligner = st.Aligner(keep=90)
    assert aligner.aligned(live, 10) == st.aligned(live, 10)
    for r, v in full.items():  # the steps start again (an elastic restart): numbers fall
        live[r].extend(v[:15])
    assert aligner.aligned(live, 10) == st.aligned(live, 10)
    for r in live:  # the supervisor cuts its lists from the front (MAX_STEPS_KEPT)
        del live[r][:30]
        live[r].extend(full[r][15:50])
    assert aligner.aligned(live, 10) == st.aligned(live, 10)
    fresh = {r: list(v) for r, v in full.items()}  # other list objects
    assert aligner.aligned(fresh, 10) == st.aligned(fresh, 10)
    assert aligner.aligned(fresh, 40) == st.aligned(fresh, 40)  # 3 x window past what it keeps: aligned's own
