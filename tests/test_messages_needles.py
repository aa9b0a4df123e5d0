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
    monkeypatch.setattr(ix, "needles", lambda i: ())   # the matcher before the prefilter: every candidate searched
    old = [_key(ix.match_all(line)) for line in lines]
    for line, a, b in zip(lines, new, old):
        assert a == b, line
    assert sum(bool(a) for a in new) > 50   # the fixtures do exercise matches, not only misses
