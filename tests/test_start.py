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
