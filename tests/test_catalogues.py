"""The one test of every catalogue (design.md, "Catalogues"): each file loads, each entry records where
it was read (repo, path, commit), and each entry's own module recognises every one of its examples
with the code the rules and checks use. A catalogue's goals (size, projects) are tested beside it."""
from __future__ import annotations

import importlib
import json

import pytest

from ddpdoctor.facts import catalogue


def test_the_loader_refuses_an_entry_without_a_source():
    doc = {"schema": catalogue.SCHEMA, "entries": [{"id": "x", "class": "c", "meaning": "m", "examples": ["e"]}]}
    assert any("missing 'source'" in p for p in catalogue.problems(doc))
    doc["entries"][0]["source"] = {"repo": "a/b", "path": "p"}
    assert any("no 'commit'" in p for p in catalogue.problems(doc))
    doc["entries"][0]["source"]["commit"] = "0" * 40
    assert catalogue.problems(doc) == []
    doc["entries"].append(dict(doc["entries"][0]))
    assert any("duplicate id" in p for p in catalogue.problems(doc))


def test_the_loader_refuses_a_repo_missing_from_the_sources_table():
    doc = {"schema": catalogue.SCHEMA, "sources": {"a/b": {"commit": "0" * 40}},
           "entries": [{"id": "x", "class": "c", "meaning": "m", "examples": ["e"],
                        "source": {"repo": "c/d", "path": "p", "commit": "1" * 40}}]}
    assert any("not listed under 'sources'" in p for p in catalogue.problems(doc))


@pytest.mark.parametrize("name", catalogue.names())
def test_every_entry_has_a_source_and_is_recognised_by_its_own_examples(name):
    entries = catalogue.entries(name)
    assert entries, f"catalogue {name} is empty"
    assert name in catalogue.MODULES, f"catalogue {name} has no module in catalogue.MODULES"
    module = importlib.import_module(catalogue.MODULES[name])
    bad = {}
    for entry in entries:
        found = module.entry_problems(entry)
        if found:
            bad[entry["id"]] = found
    assert not bad, json.dumps(dict(list(bad.items())[:10]), indent=1)


@pytest.mark.parametrize("name", catalogue.names())
def test_every_source_repo_records_its_commit(name):
    for repo, meta in catalogue.header(name).get("sources", {}).items():
        assert len(str(meta.get("commit", ""))) >= 7, f"{name}: source {repo} has no commit"
