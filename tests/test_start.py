"""ddpdoctor.start: `ddpdoctor triage FILE` starts the keyword search of its big files before the CLI loads;
every other command line is left alone, and the triage command's bad input still gets one line and exit 2."""
import os
import subprocess
import sys

import click
import pytest

from ddpdoctor import start
from ddpdoctor.triage import reader

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("argv, paths", [
    (["triage", "a.log"], ["a.log"]),
    (["triage", "--json", "a.log", "b.log"], ["a.log", "b.log"]),
    (["triage", "--format", "markdown", "a.log", "--only=LOG001", "-v", "dir"], ["a.log", "dir"]),
    (["triage", "--fail-on", "warning", "--", "-odd.log"], ["-odd.log"]),
    (["triage", "-"], ["-"]),
])
def test_the_paths_of_a_triage_command_line(argv, paths):
    assert start.triage_paths_in(argv) == paths


@pytest.mark.parametrize("argv", [
    [], ["check"], ["lint", "a.log"], ["explain", "triage"], ["--version"], ["triage"],
    ["triage", "--help", "a.log"], ["triage", "-h", "a.log"], ["triage", "--bogus", "a.log"], ["triage", "-vx", "a.log"],
])
def test_other_command_lines_name_no_path(argv):
    assert start.triage_paths_in(argv) == []


def test_the_options_it_knows_are_the_triage_commands():
    from ddpdoctor.commands.triage import command

    opts = [p for p in command.params if isinstance(p, click.Option)]
    assert {o for p in opts if not p.is_flag for o in p.opts} == start.TRIAGE_VALUE_OPTIONS
    assert {o for p in opts if p.is_flag for o in p.opts} == start.TRIAGE_FLAG_OPTIONS


def _big(tmp_path, monkeypatch):
    pytest.importorskip("hyperscan")
    monkeypatch.setattr(reader, "THREADS_FROM", 1 << 16)
    monkeypatch.setenv("DDPDOCTOR_TRIAGE_THREADS", "2")
    monkeypatch.setenv("DDPDOCTOR_TRIAGE_NO_FORK", "1")   # a fast test starts no process: the search runs in threads
    p = tmp_path / "big.log"
    p.write_bytes(b"[rank0]: step 1 | loss 2.0\n" * 8192)
    return str(p)


def test_search_ahead_starts_the_search_of_a_triage_commands_file(tmp_path, monkeypatch):
    big = _big(tmp_path, monkeypatch)
    try:
        start.search_ahead(["triage", "--json", big, str(tmp_path / "missing.log")])
        assert len(reader._PREFETCHED) == 1
    finally:
        reader._drop_prefetched()
    assert not reader._PREFETCHED


@pytest.mark.parametrize("head", [["check", "--snapshot"], ["triage", "--help"], ["lint"]])
def test_search_ahead_starts_nothing_for_other_command_lines(tmp_path, monkeypatch, head):
    big = _big(tmp_path, monkeypatch)
    start.search_ahead(head + [big])
    assert not reader._PREFETCHED


@pytest.mark.slow
@pytest.mark.parametrize("args", [["--format", "bogus"], ["--only", "NOPE999"], []])
def test_bad_input_still_gets_one_line_and_exit_2(tmp_path, args):
    p = tmp_path / "big.log"
    p.write_bytes(b"[rank0]: step 1 | loss 2.0\n" * 2600000)   # ~68 MiB: searched ahead (reader.THREADS_FROM)
    missing = [] if args else [str(tmp_path / "missing.log")]
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-m", "ddpdoctor", "triage", *args, str(p), *missing], cwd=ROOT,
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 2, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and out.stderr.startswith("ddpdoctor: error:"), out.stderr


def test_the_early_fork_starts_from_the_readers_size():
    assert start.EARLY_FROM == reader.THREADS_FROM


def test_fork_search_forks_for_a_big_file_only(tmp_path, monkeypatch):
    """Trigger: the first big regular file is forked for (os.fork stubbed: a pid no process has, never signalled).
    Quiet: a small file, a .gz, DDPDOCTOR_TRIAGE_NO_FORK=1 fork nothing."""
    import threading

    forks = []
    monkeypatch.setattr(os, "fork", lambda: forks.append(1) or 999999999)
    # fork_search forks only a process with one thread (a fork copies only the caller's): a test process may hold
    # others left by earlier tests (a full run), so the count is this test's to set; the quiet test below has two
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    monkeypatch.delenv("DDPDOCTOR_TRIAGE_NO_FORK", raising=False)
    monkeypatch.delenv("DDPDOCTOR_TRIAGE_NO_AHEAD", raising=False)
    small, big, gz = tmp_path / "small.log", tmp_path / "big.log", tmp_path / "big.log.gz"
    small.write_bytes(b"x\n")
    for p, head in ((big, b"[rank0]: step\n"), (gz, b"\x1f\x8b")):
        with open(p, "wb") as fh:
            fh.write(head)
            fh.truncate(start.EARLY_FROM)
    assert start.fork_search([str(small), str(gz)]) is None and not forks
    got = start.fork_search([str(small), str(big)])
    assert got is not None and forks == [1] and got[0] == str(big) and got[3] == 999999999
    for end in (got[1], got[2]):
        os.close(end)
    monkeypatch.setenv("DDPDOCTOR_TRIAGE_NO_FORK", "1")
    assert start.fork_search([str(big)]) is None and forks == [1]


def test_fork_search_forks_nothing_beside_another_thread(tmp_path, monkeypatch):
    """Quiet: with a second thread running, nothing is forked (the child would hold only the forking thread, and
    any lock another thread held stays locked in it)."""
    import threading

    forks = []
    monkeypatch.setattr(os, "fork", lambda: forks.append(1) or 999999999)
    monkeypatch.setattr(threading, "active_count", lambda: 2)
    monkeypatch.delenv("DDPDOCTOR_TRIAGE_NO_FORK", raising=False)
    monkeypatch.delenv("DDPDOCTOR_TRIAGE_NO_AHEAD", raising=False)
    big = tmp_path / "big.log"
    with open(big, "wb") as fh:
        fh.write(b"[rank0]: step\n")
        fh.truncate(start.EARLY_FROM)
    assert start.fork_search([str(big)]) is None and not forks


def test_adopt_takes_over_a_search_started_before_the_reader_was_imported(tmp_path, monkeypatch):
    """Trigger: a search started before the reader was imported (here its work in a thread, pid 0) is taken over:
    scan() hands on the lines a plain scan does. Quiet: a file this reader would not search ahead is not taken."""
    import threading

    big = _big(tmp_path, monkeypatch)
    data = open(big, "rb").read().replace(b"step 1 |", b"Traceback (most recent call last)", 1)
    open(big, "wb").write(data)
    plain = []
    monkeypatch.setenv("DDPDOCTOR_TRIAGE_NO_AHEAD", "1")
    with open(big, "rb") as fh:
        reader.scan(fh, lambda n, off, raw: plain.append((n, off, raw)), expected=len(data))
    monkeypatch.delenv("DDPDOCTOR_TRIAGE_NO_AHEAD")
    st = os.stat(big)
    rfd, wfd = os.pipe()
    fd = os.open(big, os.O_RDONLY)

    def work():
        try:
            reader._search_and_send(os.dup(fd), wfd, reader.AHEAD_CHUNK, reader.HEAD_FULL, 2, st.st_size)
        finally:
            os.close(wfd)

    t = threading.Thread(target=work)
    t.start()
    try:
        assert reader.adopt(big, fd, rfd, 0, st) is True
        got = []
        with open(big, "rb") as fh:
            reader.scan(fh, lambda n, off, raw: got.append((n, off, raw)), expected=st.st_size)
        assert got == plain and not reader._PREFETCHED
    finally:
        reader._drop_prefetched()
        t.join(timeout=30)
    monkeypatch.setattr(reader, "THREADS_FROM", st.st_size + 1)
    monkeypatch.delenv("DDPDOCTOR_TRIAGE_THREADS")
    rfd, wfd = os.pipe()
    os.close(wfd)
    assert reader.adopt(big, os.open(big, os.O_RDONLY), rfd, 0, st) is False and not reader._PREFETCHED


def test_a_finished_triage_command_ends_without_the_teardown(monkeypatch):
    """Trigger: fast_exit runs the atexit handlers, flushes the streams and ends with os._exit(code) (None is 0);
    start.entry hands a triage command's exit status to it. Quiet: a message as the code, or a stream that cannot be
    flushed, ends as Python would (SystemExit, same code, no os._exit); another command, or DDPDOCTOR_NO_FAST_EXIT,
    returns from entry as before. (os._exit and the atexit run are stand-ins: no process is launched.)"""
    import io
    import threading

    ran, ended, joined = [], [], []
    # the real one would run this process's threading atexit callbacks (concurrent.futures then refuses new work)
    monkeypatch.setattr(threading, "_shutdown", lambda: joined.append(1))
    for code, want in ((1, 1), (None, 0), (0, 0)):
        start.fast_exit(code, _exit=ended.append, _run_exitfuncs=lambda: ran.append(1))
        assert ended[-1] == want
    assert len(ran) == 3 and len(joined) == 3
    with pytest.raises(SystemExit) as exc:
        start.fast_exit("ddpdoctor: boom", _exit=ended.append, _run_exitfuncs=lambda: ran.append(1))
    assert exc.value.code == "ddpdoctor: boom" and len(ended) == 3 and len(ran) == 3

    class Closed(io.StringIO):
        def flush(self):
            raise BrokenPipeError

    monkeypatch.setattr(sys, "stdout", Closed())
    with pytest.raises(SystemExit) as exc:
        start.fast_exit(1, _exit=ended.append, _run_exitfuncs=lambda: None)
    assert exc.value.code == 1 and len(ended) == 3
    monkeypatch.undo()
    import concurrent.futures.thread as cft

    assert not cft._shutdown, "no real threading shutdown ran in this process"

    from ddpdoctor import cli, recache

    monkeypatch.setattr(recache, "install", lambda: None)
    monkeypatch.setattr(start, "search_ahead", lambda **kw: None)
    monkeypatch.setattr(start, "fork_search", lambda paths: None)
    got = []
    monkeypatch.setattr(start, "fast_exit", got.append)

    def cli_exit():
        raise SystemExit(1)

    monkeypatch.setattr(cli, "entry", cli_exit)
    monkeypatch.setattr(sys, "argv", ["ddpdoctor", "triage", "x.log"])
    start.entry()
    assert got == [1, 0]   # fast_exit is os._exit: the second call only follows the stand-in's return
    got.clear()
    monkeypatch.setattr(sys, "argv", ["ddpdoctor", "lint", "x.py"])
    with pytest.raises(SystemExit):
        start.entry()
    monkeypatch.setattr(sys, "argv", ["ddpdoctor", "triage", "x.log"])
    monkeypatch.setenv("DDPDOCTOR_NO_FAST_EXIT", "1")
    with pytest.raises(SystemExit):
        start.entry()
    assert got == []
