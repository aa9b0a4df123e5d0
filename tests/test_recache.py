"""ddpdoctor.recache: the compiled code of regular expressions, kept between runs (issue 24's start-up). Pure: no process
is started; each test installs the cache in this process and takes it off again."""
from __future__ import annotations

import os
import re
from re import _compiler

import pytest

from ddpdoctor import recache

PATTERNS = [
    (r"\[rank(?P<rank>\d+)\]:", 0),
    (r"(?P<file>[^\"]+)\", line (?P<line>\d+), in (?P<func>[\w<>.]+)", 0),
    (r"watchdog caught collective operation timeout", re.IGNORECASE),
    (r"^(?:NCCL WARN|NCCL INFO) (.*)$", re.MULTILINE),
    (rb"Killed|oom[-_]kill", 0),
    (r"(?x) a  b # comment", 0),
]
SAMPLES = ['[rank3]: File "/x/train.py", line 12, in <module>', "Watchdog caught collective operation timeout",
           "NCCL WARN Call to connect returned\nNCCL INFO ok", "a b ab", ""]


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("DDPDOCTOR_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("DDPDOCTOR_NO_RE_CACHE", raising=False)
    recache.uninstall()
    yield tmp_path
    recache.uninstall()


def _compile_all():
    return [_compiler.compile(p, f) for p, f in PATTERNS]


def _same(a, b) -> None:
    assert (a.pattern, a.flags, a.groups, a.groupindex) == (b.pattern, b.flags, b.groups, b.groupindex)
    for s in SAMPLES:
        s = s.encode() if isinstance(a.pattern, bytes) else s
        ma, mb = a.search(s), b.search(s)
        assert (ma and (ma.span(), ma.groups())) == (mb and (mb.span(), mb.groups()))


def test_second_run_builds_the_same_patterns_from_the_file(cache_dir):
    real = [_compiler.compile(p, f) for p, f in PATTERNS]   # re's own, before the cache is installed
    assert recache.install()
    first = _compile_all()
    assert recache._STATE["hits"] == 0 and recache.save()
    assert os.path.exists(recache.cache_file())
    recache.uninstall()
    assert recache.install()
    second = _compile_all()
    assert recache._STATE["hits"] == len(PATTERNS)   # every one came from the file
    assert not recache.save()                         # nothing new: the file is not rewritten
    for r, a, b in zip(real, first, second):
        _same(r, a)
        _same(r, b)


def test_off_damaged_or_foreign_files_fall_back_to_re(cache_dir, monkeypatch):
    monkeypatch.setenv("DDPDOCTOR_NO_RE_CACHE", "1")
    assert not recache.install()
    assert _compiler.compile is not None and not getattr(_compiler.compile, "_ddpdoctor_recache", False)
    monkeypatch.delenv("DDPDOCTOR_NO_RE_CACHE")
    path = recache.cache_file()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    for junk in (b"\x00garbage", b"[1, 2]"):
        with open(path, "wb") as fh:
            fh.write(junk)
        assert recache.install()
        got = _compile_all()
        assert recache._STATE["hits"] == 0
        recache.uninstall()
        for (p, f), g in zip(PATTERNS, got):
            _same(re.compile(p, f), g)
    # an entry _sre rejects (code that is not a matcher) is compiled afresh, not trusted
    import marshal

    with open(path, "wb") as fh:
        fh.write(marshal.dumps({PATTERNS[0]: (0, [999, 1, 2], 0, {}, (None,))}))
    assert recache.install()
    _same(re.compile(*PATTERNS[0]), _compiler.compile(*PATTERNS[0]))
    assert recache._STATE["hits"] == 0


def test_nothing_compiled_after_the_input_is_read_is_kept(cache_dir, tmp_path):
    """The triage command stops recording before it reads the user's input (api.read_inputs): a pattern built later
    (a future rule's re.escape of a host name or token from the log) must never reach the cache file."""
    from ddpdoctor.triage import api, reader
    from ddpdoctor.triage.job import Job

    assert recache.install()
    _compile_all()                                     # the package's own patterns: kept
    log = tmp_path / "job.log"
    log.write_text("[rank0]: hello\n")
    api.read_inputs(reader.collect([str(log)]), Job())
    secret = re.escape("hf_SeCrEtToKeN") + r"\d+"
    _compiler.compile(secret, 0)
    assert recache.save()
    recache.uninstall()
    assert recache.install()
    kept = recache._STATE["cache"]
    assert (PATTERNS[0][0], 0) in kept                 # recorded before the input
    assert not any("SeCrEt" in str(k[0]) for k in kept)


def test_own_patterns_are_kept_after_recording_stops_and_others_are_not(cache_dir):
    """After stop_recording (the input is open) only a compile inside own_patterns() (the package's own text, e.g. a
    catalogue entry compiled lazily on its first candidate line) is kept; one outside is not; the context nests."""
    assert recache.install()
    recache.stop_recording()
    with recache.own_patterns():
        with recache.own_patterns():
            _compiler.compile(r"own (\d+) inner", 0)
        _compiler.compile(r"own (\d+) outer", 0)
    _compiler.compile(r"from the input (\d+)", 0)
    assert recache._STATE["new"] == 2 and recache.save()
    recache.uninstall()
    assert recache.install()
    cache = recache._STATE["cache"]
    assert (r"own (\d+) inner", 0) in cache and (r"own (\d+) outer", 0) in cache
    assert (r"from the input (\d+)", 0) not in cache


def test_load_json_gives_what_json_gives_from_its_kept_copy_and_survives_a_damaged_one(cache_dir, tmp_path):
    """recache.load_json (the catalogues' reader): the object json.load gives, on the first read (the copy written) and
    on the next (served from the copy: its file is there, and a copy changed on purpose is what comes back); a damaged
    copy reads the JSON again; a changed file is read afresh (the copy is named by its size, time and inode)."""
    import json

    from ddpdoctor.facts import catalogue

    src = catalogue.DATA_DIR / "messages.json"
    with open(src, encoding="utf-8") as fh:
        want = json.load(fh)
    first = recache.load_json(str(src))
    kept = [p for p in os.listdir(cache_dir) if p.startswith("json-messages-")]
    assert first == want and list(first) == list(want) and len(kept) == 1
    assert recache.load_json(str(src)) == want
    path = os.path.join(cache_dir, kept[0])
    import marshal

    with open(path, "rb") as fh:
        size, doc = marshal.loads(fh.read())
    with open(path, "wb") as fh:
        fh.write(marshal.dumps((size, {"served": "from the copy"})))
    assert recache.load_json(str(src)) == {"served": "from the copy"}
    with open(path, "wb") as fh:
        fh.write(b"\x00damaged")
    assert recache.load_json(str(src)) == want
    mine = tmp_path / "mine.json"
    mine.write_text('{"a": [1, 2.5, null, true, "\\u00e9"]}', encoding="utf-8")
    assert recache.load_json(str(mine)) == {"a": [1, 2.5, None, True, "\u00e9"]}
    mine.write_text('{"a": 2}', encoding="utf-8")
    os.utime(mine, ns=(1, 2))
    assert recache.load_json(str(mine)) == {"a": 2}
    mine.write_text('{"a": 3}', encoding="utf-8")   # the same size: another time
    assert recache.load_json(str(mine)) == {"a": 3}
    mine.write_text('{"a": ', encoding="utf-8")
    with pytest.raises(ValueError):
        recache.load_json(str(mine))


def test_gc_paused_for_the_start_up_and_resumed_with_the_start_up_frozen(monkeypatch):
    """pause_gc (the triage command's start) turns cyclic collection off; resume_gc (before the input is read) freezes
    what was made and turns it on again; resume_gc undoes only its own pause (a collector already off stays off)."""
    import gc

    monkeypatch.delenv("DDPDOCTOR_NO_GC_PAUSE", raising=False)
    was = gc.isenabled()
    try:
        gc.enable()
        recache.pause_gc()
        assert not gc.isenabled()
        kept = [object() for _ in range(3)], {"a": []}
        recache.resume_gc()
        assert gc.isenabled() and gc.get_freeze_count() > 0 and kept
        gc.unfreeze()
        gc.disable()
        recache.resume_gc()
        assert not gc.isenabled() and gc.get_freeze_count() == 0
        recache.pause_gc()
        recache.resume_gc()
        assert not gc.isenabled()
    finally:
        gc.unfreeze()
        if was:
            gc.enable()
