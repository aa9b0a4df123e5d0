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

def _run_dir(parent, name, owner=None):
    d = parent / name
    d.mkdir()
    (d / "stderr.head").write_bytes(b"x")
    if owner is not None:
        (d / capture.OWNER_FILE).write_text(owner)
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
    assert capture.sweep_stale(str(tmp_path)) == [str(gone)]
    assert not gone.exists() and alive.exists() and relay_alive.exists() and older.exists() and other.exists()


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
