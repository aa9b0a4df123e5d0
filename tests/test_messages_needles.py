"""The catalogue matcher's literal prefilter (ddpdoctor.facts.messages.needles): an entry is searched only when
the line carries one of its needles. It must change no result: every needle set is sound (each example of each
entry, which its pattern matches, carries one), and on every line of every fixture `match_all` gives exactly
what searching every candidate without the prefilter gives (the matcher before the prefilter)."""
import os
import re

import pytest

from ddpdoctor.facts import messages

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("pattern, expected", [
    ("abc", ("abc",)),
    ("a(?i:bcd)ef", ("ef",)),                      # the case-insensitive part gives nothing
    ("x(?:foo|barz)+y", ("barz", "foo")),          # an alternation: one of its branches' literals
    ("(?:a)?bcd", ("bcd",)),                       # an optional part gives nothing
    ("ab[cd]efg", ("efg",)),
    (r"failed\s+\(exitcode\s*:", ("(exitcode",)),
])
def test_needles_of_a_pattern(pattern, expected):
    assert messages.needles(pattern) == expected


@pytest.mark.parametrize("pattern", ["(?i)abc", r"(?:foo|\d)", r"\d+", "(?:abc)?", "(", "a*b?"])
def test_no_needles_when_nothing_is_certain(pattern):
    assert messages.needles(pattern) == ()


def test_every_entrys_needles_are_in_each_of_its_examples():
    """Soundness over the whole catalogue: a needle missing from a line its pattern matches would lose a match."""
    checked = 0
    for e in messages.entries():
        need = messages.needles(e.get("pattern", ""))
        rx = re.compile(e["pattern"])
        for ex in e.get("examples") or []:
            if rx.search(ex):
                assert any(n in ex for n in need) or not need, (e["id"], need, ex)
                checked += 1
    assert checked >= 400


def _fixture_lines():
    for base, _dirs, files in os.walk(os.path.join(ROOT, "fixtures")):
        for name in files:
            if name.endswith((".log", ".txt", ".out", ".err")):
                with open(os.path.join(base, name), encoding="utf-8", errors="replace") as fh:
                    yield from (line.rstrip("\n") for line in fh)


def _key(found):
    return [(m.entry["id"], m.start, m.end, tuple(sorted(m.fields.items()))) for m in found]


def test_match_all_with_and_without_the_prefilter_agree_on_every_fixture_line(monkeypatch):
    ix = messages._index()
    lines = list(_fixture_lines())
    assert len(lines) > 1000
    new = [_key(ix.match_all(line)) for line in lines]
    # the matcher before the prefilter: a fresh index whose entries have no needles, so every candidate is searched
    # (the index derives its always-candidates' needles once, so the cached one cannot be switched off afterwards)
    monkeypatch.setattr(messages, "needles", lambda pattern: ())
    plain = messages._Index(messages.entries(), derived=False)
    old = [_key(plain.match_all(line)) for line in lines]
    for line, a, b in zip(lines, new, old):
        assert a == b, line
    assert sum(bool(a) for a in new) > 50   # the fixtures do exercise matches, not only misses


def _reference_match_all(ix, text):
    """match_all as it was written before the always-candidates' plan: every candidate in index order, searched when
    the line carries one of its needles; when none matches, the cut-line matches of every candidate."""
    out = []
    cands = ix.candidates(text)
    for i in cands:
        need = ix.needles(i)
        if need and not any(n in text for n in need):
            continue
        rx = ix._rx(i)
        m = rx.search(text) if rx is not None else None
        if m is not None:
            out.append(messages.MessageMatch(ix.entries[i], {k: v for k, v in m.groupdict().items() if v is not None},
                                             m.start(), m.end()))
    if not out and cands and len(text) >= messages._CUT_MIN:
        out = ix._cut_matches(text, cands)
    return out


def test_match_all_equals_the_plain_candidate_loop_on_every_fixture_line_and_example():
    """The always-candidates' plan (needle -> entries, heads) changes no result, cut lines included."""
    ix = messages._index()
    lines = list(_fixture_lines())
    for e in messages.entries():
        for ex in e.get("examples") or []:
            lines += [ex, ex[:messages._CUT_MIN + 10], ex[:len(ex) * 2 // 3]]   # whole, and cut inside the message
    got = [_key(ix.match_all(line)) for line in lines]
    ref = [_key(_reference_match_all(ix, line)) for line in lines]
    for line, a, b in zip(lines, got, ref):
        assert a == b, line
    assert sum(bool(a) for a in got) > 500
    assert any(m.fields.get("cut") for line in lines for m in ix.match_all(line))   # cut lines are exercised


def test_always_candidates_plan_on_a_small_index():
    """Entries with no required word: one without needles (always searched), one with needles, one whose literal head
    makes a cut line recognisable. The plan gives what the plain candidate loop gives on lines that exercise each."""
    long_head = "The quick brown fox jumps over the lazy dog again and again and again"
    entries = [
        {"id": "bare", "pattern": r"(?i)x\d+|\d+y", "class": "c"},
        {"id": "needled", "pattern": r"\d+ apples|\d+ pears", "class": "c"},
        {"id": "headed", "pattern": long_head.replace(" ", r"\s+") + r" (?P<n>\d+)|zzz", "class": "c"},
        {"id": "worded", "pattern": r"Segmentation fault at (?P<addr>0x[0-9a-f]+)", "class": "c"},
    ]
    ix = messages._Index(entries)
    assert [entries[i]["id"] for i in ix.always] == ["bare", "needled", "headed"]
    by_needle, bare, heads = ix._always_plan()
    assert [entries[i]["id"] for i in bare] == ["bare"] and [entries[i]["id"] for i in heads] == ["headed"]
    lines = ["X12 and 3 apples", "nothing here at all", "4 pears", long_head + " 7", long_head[:50],
             "Segmentation fault at 0x1f", "Segmentation fault at", "12y then zzz", long_head[:20]]
    for line in lines:
        assert _key(ix.match_all(line)) == _key(_reference_match_all(ix, line)), line
    assert [m.entry["id"] for m in ix.match_all("X12 and 3 apples")] == ["bare", "needled"]
    assert [m.fields for m in ix.match_all(long_head[:50])] == [{"cut": "line ends inside the message"}]


def _required_words_char_by_char(pattern):
    """messages._required_words as first written (one Python iteration per pattern character): the reference that
    the faster walk (runs of plain characters taken in one step) must equal."""
    if messages._top_level_alternation(pattern):
        return []
    MARK = "\x00"
    depth, lit, i = 0, [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            after = pattern[i + 2] if i + 2 < len(pattern) else ""
            if nxt == "s" and after == "+":
                if depth == 0:
                    lit.append(" ")
                i += 3
                continue
            if depth == 0:
                lit.append(MARK if nxt in "sSdDwWbBAZ" or nxt.isdigit() else nxt)
            i += 2
            continue
        if ch == "[":
            j = i + 1
            if j < len(pattern) and pattern[j] == "^":
                j += 1
            if j < len(pattern) and pattern[j] == "]":
                j += 1
            while j < len(pattern) and pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            i = j + 1
            if depth == 0:
                lit.append(MARK)
            continue
        if ch in "()":
            depth += 1 if ch == "(" else -1
            lit.append(MARK)
        elif depth == 0 and ch in "?*{+":
            if lit:
                lit[-1] = MARK
            lit.append(MARK)
        elif depth == 0 and ch in ".^$|}":
            lit.append(MARK)
        elif depth == 0:
            lit.append(ch)
        i += 1
    text = "".join(lit)
    out = []
    for m in messages._WORD.finditer(text):
        s, e = m.start(), m.end()
        before = text[s - 1] if s > 0 else None
        after = text[e] if e < len(text) else None
        if before is None and not pattern.startswith(("^", "\\b")):
            continue
        if before == MARK or after == MARK or after is None:
            continue
        out.append(m.group(0))
    return out


def test_required_words_equal_the_char_by_char_walk():
    """Every catalogue pattern, and random strings over the characters the walk treats specially: the same words."""
    import random

    patterns = [e.get("pattern", "") for e in messages.entries()]
    rng = random.Random(7)
    alphabet = list("\\[]()?*{}+.^$|sdbwx0 :_-") + ["Word", "kill", "error", "\\s+", "[^]x]", "(?:", "\\b"]
    patterns += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 24))) for _ in range(20000)]
    differ = [p for p in patterns if messages._required_words(p) != _required_words_char_by_char(p)]
    assert not differ, differ[:5]
    assert sum(bool(_required_words_char_by_char(p)) for p in patterns) > 1000


def test_prefiltered_search_is_the_regex_search_on_every_fixture_line_and_example():
    """triage's set-up and failure-word regexes behind their needles: the same match (span and groups) on every
    fixture line and catalogue example, and most lines are spared the regex."""
    from ddpdoctor.triage import job, prose

    lines = list(_fixture_lines()) + [ex for e in messages.entries() for ex in e.get("examples") or []]
    from ddpdoctor.triage import signatures

    for gated in (job._SETUP, prose._FAILED_WORDS, job._PROGRESS, job._UNRAISABLE, signatures._USER_FRAME):
        assert isinstance(gated, messages.Prefiltered) and gated.needles
        hits = spared = 0
        for line in lines:
            a, b = gated.search(line), gated.rx.search(line)
            assert (a and (a.span(), a.groups())) == (b and (b.span(), b.groups())), (gated.pattern[:40], line)
            hits += b is not None
            spared += not any(n in line for n in gated.needles)
        assert hits >= 2 and spared > 1000, (gated.pattern[:40], hits, spared)


def test_prefiltered_on_its_own():
    rx = re.compile(r"(?:FAILED|FAIL|[Ff]ailed) (?P<n>\d+)")
    gated = messages.Prefiltered(rx)
    assert gated.needles == ("FAIL", "ailed")          # "FAILED" holds "FAIL": the longer one adds nothing
    assert gated.search("x FAILED 3").group("n") == "3" and gated.search("failed 4").group("n") == "4"
    assert gated.search("all good 5") is None
    for flags in (re.IGNORECASE, re.VERBOSE):          # they change what the text means: no needles, plain search
        loose = messages.Prefiltered(re.compile(r"fail ed", flags))
        assert loose.needles == ()
    assert messages.Prefiltered(re.compile(r"fail ed", re.IGNORECASE)).search("FAIL ED")
    assert messages.Prefiltered(re.compile(r"fail ed", re.VERBOSE)).search("failed")


def test_signature_substring_test_is_the_alternation_on_every_fixture_line():
    """signatures._has_sub (the minimal substrings, a plain loop) says what the full alternation says."""
    from ddpdoctor.triage import signatures

    assert len(signatures._SUBS) < len(signatures._BY_SUB)
    lines = list(_fixture_lines()) + list(signatures._BY_SUB)
    said = [signatures._has_sub(line) for line in lines]
    assert said == [signatures._ANY.search(line) is not None for line in lines]
    assert 100 < sum(said) < len(said) - 1000


def test_derived_file_holds_what_the_index_would_derive():
    """messages_derived.json (make catalogue-index): each record whose pattern is still the catalogue's holds that
    pattern's required words and needles as derived now; an index built from it equals one that derives everything."""
    known = messages._derived()
    cat = {e["id"]: e for e in messages.entries()}
    current = {k: v for k, v in known.items() if k in cat and cat[k].get("pattern") == v[0]}
    assert len(current) >= 0.9 * len(cat), "run `make catalogue-index` after editing messages.json"
    for eid, (pattern, words, need) in current.items():
        assert sorted(set(messages._required_words(pattern))) == words, eid
        assert messages.needles(pattern) == need, eid
    a, b = messages._Index(messages.entries()), messages._Index(messages.entries(), derived=False)
    assert (a.by_word, a.always, a.key) == (b.by_word, b.always, b.key)
    assert [a.needles(i) for i in range(len(a.entries))] == [b.needles(i) for i in range(len(b.entries))]


def test_a_record_for_another_pattern_is_not_used(monkeypatch):
    """An entry edited since the file was written is derived from its current pattern."""
    e = {"id": "x.edited", "pattern": r"Watchdog caught (?P<what>\w+) timeout", "class": "c"}
    monkeypatch.setattr(messages, "_derived", lambda: {"x.edited": ("old pattern", ["stale"], ("stale needle",))})
    ix = messages._Index([e])
    assert ix.key[0] == "caught" and ix.needles(0) == ("Watchdog caught ",)
    monkeypatch.setattr(messages, "_derived", lambda: {"x.edited": (e["pattern"], ["Watchdog"], ("Watchdog",))})
    ix = messages._Index([e])
    assert ix.key[0] == "Watchdog" and ix.needles(0) == ("Watchdog",)   # used while its pattern is the same


def test_prefiltered_needles_kept_between_runs_are_those_derived(tmp_path, monkeypatch):
    """messages._kept_needles: Prefiltered's needles come from a file of the cache folder once derived (named by this
    interpreter and messages.py's bytes); what it serves is what `needles` derives, a damaged file is derived again."""
    import marshal

    from ddpdoctor.triage import job, prose, signatures

    monkeypatch.setenv("DDPDOCTOR_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("DDPDOCTOR_NO_RE_CACHE", raising=False)
    monkeypatch.setattr(messages, "_KEPT", [])
    pats = [p.rx.pattern for p in (job._SETUP, prose._FAILED_WORDS, prose._FATAL_LINE, signatures._USER_FRAME)]
    assert [messages._kept_needles(p) for p in pats] == [messages.needles(p) for p in pats]
    files = [f for f in os.listdir(tmp_path) if f.startswith("needles-")]
    assert len(files) == 1
    path = os.path.join(tmp_path, files[0])
    with open(path, "rb") as fh:
        memo = marshal.loads(fh.read())
    assert set(memo) == set(pats)
    memo[pats[0]] = ("served from the file",)
    with open(path, "wb") as fh:
        fh.write(marshal.dumps(memo))
    monkeypatch.setattr(messages, "_KEPT", [])
    assert messages._kept_needles(pats[0]) == ("served from the file",)
    with open(path, "wb") as fh:
        fh.write(b"\x00damaged")
    monkeypatch.setattr(messages, "_KEPT", [])
    assert messages._kept_needles(pats[0]) == messages.needles(pats[0])
