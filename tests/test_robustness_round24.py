"""Round 24's robustness audit (robust24): the classes its cells found in the code this branch may change, each with
a test that fails before its fix. No process, no timed assert: what is counted is the work the code does."""
import re

from ddpdoctor.facts import aborts


def test_abort_patterns_start_a_search_only_at_a_literal_or_a_word_start():
    """A pattern that opens with a repeated class (\\S+) and no anchor is tried at every character of a line: a 1 MiB
    line of non-blanks costs a pass per character (robust24: `ddpdoctor run` held for ever at a job's end by a what()
    line of 1 MiB). Every pattern of data/abort_texts.json opens with a literal, ^ or (?<!\\S)."""
    for e in aborts._entries():
        p = e["pattern"]
        assert p.startswith(("^", "(?<!\\S)")) or re.match(r"[A-Za-z]", p), (e["id"], p)


def test_reasons_searches_at_most_max_line_characters_of_a_line(monkeypatch):
    """The reader searches each line's first MAX_LINE characters, whatever the data file's patterns cost."""
    seen = []

    class Spy:
        def search(self, line):
            seen.append(len(line))
            return None

    monkeypatch.setattr(aborts, "_entries", lambda: ({"id": "x", "_re": Spy(), "_what": None, "meaning": ""},))
    aborts.reasons("terminate called after throwing an instance of 'x'\n  what():  " + "x" * (1 << 20) + "\n")
    assert seen and max(seen) <= aborts.MAX_LINE < (1 << 20)


def test_reasons_still_reads_the_assert_and_terminate_lines_it_read():
    """The anchor changes no match: a prefixed assert line and a long what() keep their reasons."""
    r = aborts.reasons("[rank0]:t.c:12: void f(): Assertion `n > 0' failed.\n")
    assert [x["id"] for x in r] == ["glibc.assert_fail"] and r[0]["what"] == "n > 0"
    r = aborts.reasons("terminate called after throwing an instance of 'c10::Error'\n  what():  " + "y" * (1 << 20)
                       + "\n" + "z" * (1 << 20) + " Assertion `q' failed.\n")
    assert [x["id"] for x in r] == ["libstdcxx.terminate_after_throwing"] and r[0]["what"] == "y" * 400


def test_a_hostfile_is_read_only_when_it_is_a_regular_file(tmp_path):
    """check -- deepspeed --hostfile FIFO: open() on a FIFO with no writer waits for ever (fifo(7)); the hostfile is
    read with the non-blocking reader, and a FIFO or a folder is 'cannot be read' (None), a regular file is parsed."""
    import os

    from ddpdoctor.gather import Sources
    from ddpdoctor.gather.host import read_hostfile

    class NoBlockingRead(Sources):
        def read(self, p, limit=-1):
            raise AssertionError(f"blocking read of {p}")

    good = tmp_path / "hostfile"
    good.write_text("worker-0 slots=8\n")
    assert read_hostfile(NoBlockingRead(), str(good))["hosts"] == {"worker-0": 8}
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert read_hostfile(Sources(), str(fifo)) is None
    assert read_hostfile(Sources(), str(tmp_path)) is None


def test_a_hostfile_slot_count_of_thousands_of_digits_is_a_bad_entry(tmp_path):
    """`worker-0 slots=<5,000 digits>`: int() refuses it (CPython >= 3.11's 4,300-digit limit) and the ValueError lost
    every fact of the command after `--`; it is the runner's bad entry, the other hosts kept."""
    from ddpdoctor.gather import Sources
    from ddpdoctor.gather.host import read_hostfile

    f = tmp_path / "hostfile"
    f.write_text("worker-0 slots=" + "9" * 5000 + "\nworker-1 slots=8\n")
    r = read_hostfile(Sources(), str(f))
    assert r["hosts"] == {"worker-1": 8} and r["errors"] and r["errors"][0].startswith("bad entry: worker-0")
