"""ddpdoctor.facts.literals: one Hyperscan pass says which literals a line holds, exactly what `in` tests say; the
per-line dispatch built on it (signatures' candidates, the messages catalogue's always-candidates) gives what the
`in` tests gave, with Hyperscan and without. Pure functions: no process is launched."""
from __future__ import annotations

import os

import pytest

from ddpdoctor.facts import literals, messages
from ddpdoctor.triage import signatures

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LITS = ("NCCL WARN", "rror", "Traceback (most", "已杀死", "x", "ab", "abc")


def _lines():
    for base, _dirs, files in os.walk(os.path.join(ROOT, "fixtures")):
        for name in sorted(files):
            if name.endswith((".log", ".txt", ".out", ".err")):
                with open(os.path.join(base, name), encoding="utf-8", errors="replace") as fh:
                    yield from (line.rstrip("\n") for line in fh)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DDPDOCTOR_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("DDPDOCTOR_TRIAGE_NO_HYPERSCAN", raising=False)
    monkeypatch.delenv("DDPDOCTOR_TRIAGE_NO_HS_CACHE", raising=False)
    return tmp_path


def _brute(lits, text):
    return {i for i, s in enumerate(lits) if s in text}


def test_found_is_the_in_tests(cache):
    pytest.importorskip("hyperscan")
    ls = literals.LiteralSet(LITS, "t")
    texts = ["", "nothing", "NCCL WARN x", "an error: abc", "已杀死 python", "a\ud800b ab", "Traceback (mos",
             "Traceback (most recent call last):", "rro r", "xab" * 3]
    for text in texts:
        assert ls.found(text) == _brute(LITS, text), text
    assert ls.found("NCCL WARN abc") == {0, 5, 6} and ls.found("nothing") == set()


def test_without_hyperscan_found_is_none(cache, monkeypatch):
    monkeypatch.setenv("DDPDOCTOR_TRIAGE_NO_HYPERSCAN", "1")
    assert literals.LiteralSet(LITS, "t").found("NCCL WARN") is None
    assert literals.LiteralSet(("a", ""), "t").found("a") is None   # an empty literal: no database, the `in` tests


def test_cached_database_is_used_only_when_it_is_this_set(cache):
    pytest.importorskip("hyperscan")
    first = literals.LiteralSet(LITS, "t")
    assert first.found("rror") == {1}
    files = sorted(os.listdir(cache))
    assert len(files) == 1 and files[0].startswith("hs-lit-t-")
    again = literals.LiteralSet(LITS, "t")
    assert again.found("x abc") == {4, 5, 6} and sorted(os.listdir(cache)) == files   # loaded, not rewritten
    path = os.path.join(cache, files[0])
    other = literals.LiteralSet(("zzz", "rror"), "t")
    with open(path, "rb") as fh:
        data = fh.read()
    # another set's database under this set's name: the probe rejects it and the set is compiled
    os.replace(path, path + ".keep")
    other.found("")
    other_file = [f for f in os.listdir(cache) if not f.endswith(".keep")][0]
    os.replace(os.path.join(cache, other_file), path)
    assert literals.LiteralSet(LITS, "t").found("NCCL WARN ab") == {0, 5}
    with open(path, "wb") as fh:   # damaged: compiled again, same answers
        fh.write(data[: len(data) // 2])
    assert literals.LiteralSet(LITS, "t").found("已杀死") == {3}


def _old_signature_candidates(text, nccl):
    return signatures._candidates(text) if (nccl or signatures._has_sub(text)) and signatures._ANY.search(text) else []


@pytest.mark.parametrize("hs", [True, False])
def test_signature_candidates_are_the_substring_tests(hs, monkeypatch):
    if hs:
        pytest.importorskip("hyperscan")
    monkeypatch.setattr(signatures, "_SUB_SCAN", literals.LiteralSet(signatures._SUB_LIST, "sig"))
    if not hs:
        monkeypatch.setenv("DDPDOCTOR_TRIAGE_NO_HYPERSCAN", "1")
    lines = list(_lines())[::3] + list(signatures._BY_SUB) + ["é" + s[1:] + "☃" for s in signatures._BY_SUB]
    got = [signatures._line_candidates(line, nccl) for line in lines for nccl in (False, True)]
    assert got == [_old_signature_candidates(line, nccl) for line in lines for nccl in (False, True)]
    assert (signatures._SUB_SCAN._db is False) == (not hs)
    assert 100 < sum(bool(g) for g in got) < len(got) - 1000


@pytest.mark.parametrize("hs", [True, False])
def test_messages_always_plan_scan_gives_the_in_tests(hs, monkeypatch):
    if hs:
        pytest.importorskip("hyperscan")
    else:
        monkeypatch.setenv("DDPDOCTOR_TRIAGE_NO_HYPERSCAN", "1")
    ix = messages._Index(messages.entries())
    lines = list(_lines())[::3]
    for e in messages.entries():
        lines += list(e.get("examples") or [])
    got = [[(m.entry["id"], m.start, m.end) for m in ix.match_all(line)] for line in lines]
    assert (ix._plan_scan._db is False) == (not hs)
    plain = messages._Index(messages.entries())
    plain._always_plan()
    plain._plan_scan = literals.LiteralSet(("",), "none")   # an empty literal: found() is None, the `in` tests
    assert got == [[(m.entry["id"], m.start, m.end) for m in plain.match_all(line)] for line in lines]
    assert sum(bool(g) for g in got) > 500


@pytest.mark.parametrize("hs", [True, False])
def test_prefiltered_with_many_needles_scans_and_says_what_the_regex_says(hs, monkeypatch):
    """triage's set-up words (52 needles) and failure words (28): one scan, then the regex; same as rx.search."""
    if hs:
        pytest.importorskip("hyperscan")
    else:
        monkeypatch.setenv("DDPDOCTOR_TRIAGE_NO_HYPERSCAN", "1")
    from ddpdoctor.triage import job, prose

    lines = list(_lines())[::2]
    for pre in (job._SETUP, prose._FAILED_WORDS):
        fresh = messages.Prefiltered(pre.rx)
        assert fresh._scan is not None and len(fresh.needles) >= messages._SCAN_NEEDLES
        got = [bool(fresh.search(line)) for line in lines]
        assert got == [pre.rx.search(line) is not None for line in lines]
        assert (fresh._scan._db is False) == (not hs) and 20 < sum(got) < len(got) - 20
    few = messages.Prefiltered(job._PROGRESS.rx)
    assert few._scan is None and len(few.needles) < messages._SCAN_NEEDLES   # a few needles: the `in` tests
