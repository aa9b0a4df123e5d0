"""Issue 27 (round 13, wave 2): `ddpdoctor run`'s copy of the job's stderr survives the doctor. A relay process
(run/capture.py run as a script, its own session) holds the job's stderr; a SIGKILL of the doctor (the OOM killer,
kill -9) no longer makes the job's next stderr write fail. Pure tests for what the relay keeps (its files in the run
directory); one process test whose fact is a job outliving its killed supervisor."""
import json
import os
import subprocess
import sys

import pytest

from ddpdoctor import proctree
from ddpdoctor.run import capture


def _keeper(tmp_path, head=8, seg=10):
    return capture.Keeper(str(tmp_path), head=head, seg=seg)


def test_the_relay_keeps_the_head_and_the_last_segment_and_counts_the_middle(tmp_path):
    k = _keeper(tmp_path)
    k.feed(b"HEAD1234")
    for i in range(5):
        k.feed(b"%02d--------" % i)  # 10 bytes each: segments 0..4, the last full
    k.feed(b"TAIL")
    head, tail, dropped = capture.read_kept(str(tmp_path), seg=10)
    assert head == b"HEAD1234"
    assert tail == b"------TAIL"  # the last 10 bytes, across the last two segments
    assert dropped == 50 + 4 - 10
    assert len([n for n in os.listdir(tmp_path) if n.startswith(capture.TAIL_FILE)]) == 2  # disk bounded


def test_a_short_stderr_the_relay_kept_is_whole_and_nothing_is_counted_left_out(tmp_path):
    k = _keeper(tmp_path, head=64, seg=64)
    k.feed(b"line 1\n")
    k.feed(b"line 2\n")
    assert capture.read_kept(str(tmp_path), seg=64) == (b"line 1\nline 2\n", b"", 0)
    assert capture.read_kept(str(tmp_path / "none"), seg=64) == (b"", b"", 0)


def test_a_chunk_larger_than_a_segment_is_split_and_its_end_kept(tmp_path):
    k = _keeper(tmp_path, head=4, seg=10)
    k.feed(b"abcd" + bytes(range(48, 48 + 35)))  # 4 head bytes, 35 after: segments 0..3
    head, tail, dropped = capture.read_kept(str(tmp_path), seg=10)
    assert head == b"abcd" and tail == bytes(range(48 + 25, 48 + 35)) and dropped == 25


def test_the_text_for_the_verdict_is_read_from_the_relays_files(tmp_path):
    tee = capture.StderrTee(keep_dir=str(tmp_path))
    tee.relay = type("Ended", (), {"poll": lambda self: 0})()  # stands for a relay that has ended
    capture.Keeper(str(tmp_path)).feed(b"Timed out after 5 seconds waiting for clients. 1/2 clients joined.\r\n")
    assert tee.text(1.0) == "Timed out after 5 seconds waiting for clients. 1/2 clients joined.\n"


def test_where_the_relay_cannot_start_a_thread_copies_as_before(tmp_path, monkeypatch):
    def no_process(*a, **k):
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(capture.subprocess, "Popen", no_process)
    r, w = os.pipe()  # the doctor's own stderr: a pipe
    tee = capture.StderrTee(out_fd=w, keep_dir=str(tmp_path))
    err = tee.child_stderr()
    assert err is not None and tee.relay is None and tee.mode == "pipe"
    os.write(err, b"gloo line\n")  # what the job would write
    tee.started()  # closes the job's end here: the copy reads to EOF
    assert tee.text(5.0) == "gloo line\n"
    os.close(w)
    assert os.read(r, 100) == b"gloo line\n"
    os.close(r)


def test_the_relay_is_never_counted_as_the_jobs():
    tree = proctree.Tree(adopt=False)
    tree._subreaper_on = True  # as `ddpdoctor run` is: every child of this process would be the job's
    ppids = {424242: os.getpid()}  # a recorded /proc pass: one child of this process
    tree.refresh(ppids)
    assert 424242 in tree.members  # the gate can fail: a child of a subreaper is counted ...
    tree.members.clear()
    tree.ignored.add(424242)
    tree.refresh(ppids)
    assert 424242 not in tree.members  # ... unless it is this process's own helper


_JOB = r"""
import os, sys, time
marker = sys.argv[1]
i = 0
while not os.path.exists(marker) and i < 400:  # writes until its supervisor was killed (20 s at most)
    sys.stderr.write("tick %d\n" % i); sys.stderr.flush(); time.sleep(0.05); i += 1
for j in range(20):  # a further ~1 s of stderr (a tqdm bar, warnings, logging) after the doctor's death
    sys.stderr.write("after %d\n" % j); sys.stderr.flush(); time.sleep(0.05)
sys.stderr.write("job-end\n"); sys.stderr.flush()
"""

_SUPERVISOR = r"""
import subprocess, sys, time
from ddpdoctor.run.capture import StderrTee
tee = StderrTee(keep_dir=sys.argv[1])
err = tee.child_stderr()
job = subprocess.Popen([sys.executable, "-c", sys.argv[2], sys.argv[3]], stderr=err)
tee.started()
print(job.pid, tee.relay.pid if tee.relay else 0, tee.mode, flush=True)
time.sleep(60)
"""

_OUTER = r"""
import ctypes, json, os, signal, subprocess, sys, threading, time
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: the job and the relay come back here
keep, job_code, marker, out_path, sup_code, orig = sys.argv[1:7]
if orig == "pty":  # the doctor's original stderr: a terminal, drained here into out_path
    import pty
    master, slave = pty.openpty()
    def drain():
        with open(out_path, "ab", buffering=0) as fh:
            while True:
                try:
                    data = os.read(master, 65536)
                except OSError:
                    return
                if not data:
                    return
                fh.write(data.replace(b"\r\n", b"\n"))
    open(out_path, "wb").close()
    threading.Thread(target=drain, daemon=True).start()
    sup = subprocess.Popen([sys.executable, "-c", sup_code, keep, job_code, marker], stdout=subprocess.PIPE,
                           stderr=slave)
    os.close(slave)
else:
    with open(out_path, "wb") as out:  # the doctor's original stderr: a file
        sup = subprocess.Popen([sys.executable, "-c", sup_code, keep, job_code, marker], stdout=subprocess.PIPE,
                               stderr=out)
job, relay, mode = sup.stdout.readline().split()
job, relay = int(job), int(relay)
end = time.monotonic() + 20
while b"tick 3\n" not in open(out_path, "rb").read() and time.monotonic() < end:
    time.sleep(0.02)
before = open(out_path, "rb").read().decode()
alive = os.path.exists("/proc/%d" % job) and open("/proc/%d/stat" % job).read().split(") ")[1][0] != "Z"
os.kill(sup.pid, signal.SIGKILL)
sup.wait()
open(marker, "w").close()
_, st = os.waitpid(job, 0)
res = {"mode": mode.decode(), "relay": relay, "before": before, "alive_at_kill": alive,
       "job": os.waitstatus_to_exitcode(st), "relay_end": None}
end = time.monotonic() + 10
while relay and time.monotonic() < end:
    got, st = os.waitpid(relay, os.WNOHANG)
    if got == relay:
        res["relay_end"] = os.waitstatus_to_exitcode(st)
        break
    time.sleep(0.02)
end = time.monotonic() + (10 if orig == "pty" else 0)  # the drain thread's last read: its bytes, not a fixed 0.1 s
while b"job-end\n" not in open(out_path, "rb").read() and time.monotonic() < end:
    time.sleep(0.02)
res["after"] = open(out_path, "rb").read().decode()
print(json.dumps(res))
"""


@pytest.mark.slow
@pytest.mark.parametrize("orig", ["file", "pty"])
def test_a_sigkill_of_the_supervisor_does_not_break_the_jobs_stderr(tmp_path, orig):
    """Needs processes: the fact is a job that keeps writing to stderr after its supervisor got SIGKILL (~1.5 s);
    the doctor's own stderr a file (the job's a pipe) or a terminal (the job's a pty)."""
    keep = tmp_path / "run"
    keep.mkdir()
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(capture.__file__))))
    res = subprocess.run([sys.executable, "-c", _OUTER, str(keep), _JOB, str(tmp_path / "killed"),
                          str(tmp_path / "stderr"), _SUPERVISOR, orig],
                         capture_output=True, text=True, timeout=60, env=env)
    assert res.returncode == 0, res.stderr
    r = json.loads(res.stdout)
    assert r["mode"] == {"file": "pipe", "pty": "pty"}[orig] and r["relay"] > 0
    assert r["alive_at_kill"] and "tick 3\n" in r["before"]  # the job was running and writing when the doctor died
    assert r["job"] == 0  # no BrokenPipeError: the job ended as it would have without the doctor
    assert "after 19\njob-end\n" in r["after"] and "after" not in r["before"]  # its later bytes reached the stderr
    assert r["relay_end"] == 0  # and the relay ended with the job's stderr: none is left
    head, tail, _ = capture.read_kept(str(keep))
    assert (head + tail).endswith(b"job-end\n")
