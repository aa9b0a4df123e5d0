"""The messages catalogue (ddpdoctor/data/messages.json, ddpdoctor.facts.messages): its goals (>= 400 messages
from >= 8 projects, each with repo/path/commit, class, meaning and fix), a sample of each source recognised by
`match`, real-format excerpts of every failure class recognised as their class, healthy lines recognised as
nothing, and the reader's prefilter keywords being the catalogue's. tests/test_catalogues.py runs
`entry_problems` (pattern compiles, every example carries a keyword and is recognised) on every entry."""
import os
import random

import pytest

from ddpdoctor.facts import catalogue, messages
from ddpdoctor.triage import reader

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXCERPTS = os.path.join(ROOT, "fixtures", "triage", "messages", "excerpts.txt")


def test_goals_400_messages_from_8_projects_each_with_source_class_meaning_fix():
    entries = messages.entries()
    assert len(entries) >= 400
    projects = messages.summary()
    assert len(projects) >= 8, projects
    for name in ("torch", "NCCL", "CUDA runtime", "transformers", "accelerate", "DeepSpeed", "Ray", "SLURM",
                 "Linux kernel"):
        assert projects.get(name, 0) >= 1, (name, projects)
    for e in entries:
        src = e["source"]
        assert src["repo"] and src["path"] and len(src["commit"]) >= 7, e["id"]
        assert e["class"] in messages.classes() and e["meaning"] and e["fix"], e["id"]


@pytest.mark.parametrize("repo", sorted(catalogue.header("messages")["sources"]))
def test_a_sample_of_each_source_is_recognised_as_its_class(repo):
    """Up to 12 entries per source, drawn at random (fixed seed): the best match of each first example is an
    entry of the same class, and the entry itself is among all matches."""
    mine = [e for e in messages.entries() if e["source"]["repo"] == repo]
    assert mine
    for e in random.Random(24).sample(mine, min(12, len(mine))):
        ex = e["examples"][0]
        best = messages.match(ex)
        assert best is not None, (e["id"], ex)
        assert e["id"] in [m.entry["id"] for m in messages.match_all(ex)], (e["id"], ex)
        assert e["class"] in {m.cls for m in messages.match_all(ex)}, (e["id"], best.entry["id"])


def _excerpts():
    out = []
    with open(EXCERPTS, encoding="utf-8") as fh:
        for n, raw in enumerate(fh, 1):
            raw = raw.rstrip("\n")
            if not raw or raw.startswith("#"):
                continue
            cls, line = raw.split("\t", 1)
            out.append(pytest.param(cls, line, id=f"{n}-{cls}"))
    return out


@pytest.mark.parametrize("cls,line", _excerpts())
def test_real_format_excerpts_are_recognised_as_their_class(cls, line):
    """Lines in the formats real jobs print (fixtures/triage/messages/excerpts.txt; `none` = must match nothing)."""
    found = {m.cls for m in messages.match_all(line)}
    if cls == "none":
        assert not found, (line, [m.entry["id"] for m in messages.match_all(line)])
    else:
        assert cls in found, (line, [m.entry["id"] for m in messages.match_all(line)])


def test_every_failure_class_has_a_trigger_and_a_quiet_excerpt():
    triggers = {p.values[0] for p in _excerpts()}
    roles = messages.classes()
    missing = sorted(c for c, meta in roles.items() if c not in triggers)
    assert not missing, f"classes without an excerpt: {missing}"
    assert "none" in triggers


def test_match_gives_the_entry_and_its_fields():
    m = messages.match("RuntimeError: [enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't allocate "
                       "memory: you tried to allocate 2415919104 bytes. Error code 12 (Cannot allocate memory)")
    assert m is not None and m.cls == "host_oom" and m.fields["bytes"] == "2415919104"
    assert m.entry["source"]["repo"] == "pytorch/pytorch" and m.entry["fix"]
    wd = messages.match("[rank3]:[E1206 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught collective operation timeout: "
                        "WorkNCCL(SeqNum=88, OpType=ALLGATHER, NumelIn=8, NumelOut=64, Timeout(ms)=1800000)")
    assert wd.cls == "collective_timeout" and wd.fields["seq"] == "88" and wd.fields["op"] == "ALLGATHER"


def test_a_message_quoted_without_its_exception_type_is_recognised():
    # the first line of a pasted excerpt: no "ValueError:" before it, and no prefilter keyword in it
    m = messages.match("Please correct the following DeepSpeed config values that mismatch TrainingArguments values:")
    assert m is not None and m.cls == "config_mismatch"
    assert messages.match("") is None


def test_the_reader_scans_for_the_catalogues_keywords():
    assert reader.ANCHORS is messages.ANCHORS


def test_required_words_are_whole_words_of_every_match():
    words = messages._required_words
    assert words(r"Kill(?:ed)? process (?P<pid>\d+) \(") == ["process"]
    assert "kill" not in words(r"Detected (?P<n>\d+) oom[_-]kill events? in ")
    assert messages._top_level_alternation(r"a|b") and not messages._top_level_alternation(r"(?:a|b)c")
