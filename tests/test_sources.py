"""tools/verify_sources.py: every citation in ddpdoctor/data/*.json names what it cites (repo, path, commit), and the
recorded check (tests/data/sources_verified.json, made by `tools/verify_sources.py check` over git snapshots and the
installed torch wheel) found none wrong. No network and no snapshot: the tool's checks run here on a tiny git repo."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location("verify_sources", os.path.join(ROOT, "tools", "verify_sources.py"))
vs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(vs)
RECORDED = os.path.join(ROOT, "tests", "data", "sources_verified.json")


def recorded() -> dict:
    with open(RECORDED, encoding="utf-8") as fh:
        return json.load(fh)


def test_no_data_file_gains_a_citation_that_cannot_be_opened():
    """A citation with a commit but no repo or no path can be opened by no one; the ones recorded as such are known
    (listed as left in docs/measured/suite.md), a new one fails here."""
    known = {vs.key(c) for c in recorded()["citations"] if c["status"] == "incomplete"}
    new = sorted({vs.key(c) for c in vs.all_citations() if vs.incomplete(c)} - known)
    assert not new, "citations with no repo or no path (give them repo, path and commit):\n" + "\n".join(new[:20])


def test_the_recorded_check_found_no_wrong_citation():
    doc = recorded()
    wrong = [c for c in doc["citations"] if c["status"] in vs.WRONG]
    assert not wrong, wrong[:10]
    assert doc["counts"].get("ok", 0) > 1000  # the record is a real run, not an empty file
    assert sum(doc["counts"].values()) >= len(doc["citations"])


def test_citations_are_found_and_an_incomplete_one_is_told_apart():
    doc = {"rules": [{"id": "a", "source": {"repo": "o/r", "path": "x.py", "commit": "a" * 40, "quote": "q"}},
                     {"id": "b", "source": {"commit": "b" * 40}}],
           "source": "o/r src/y.py @" + "c" * 40 + " (prose)"}
    got = vs.citations_in(doc, "f.json")
    structured = [c for c in got if c["kind"] == "structured"]
    assert [(c["repo"], c["path"], c["at"]) for c in structured] == [("o/r", "x.py", "/rules/0/source"),
                                                                      (None, None, "/rules/1/source")]
    assert [vs.incomplete(c) for c in structured] == [False, True]
    (prose,) = [c for c in got if c["kind"] == "prose"]
    assert prose["commit"] == "c" * 40 and prose["repos"] == ["o/r"]
    # a table of the trees a data file was mined from: the repo is the key above, no path (a whole tree at a commit)
    (tree, read) = vs.citations_in({"sources": {"o/r": {"commit": "d" * 40, "read": [{"commit": "e" * 40}]}}}, "f")
    assert [(c["kind"], c["repo"], c["commit"][0]) for c in (tree, read)] == [("tree", "o/r", "d"), ("tree", "o/r", "e")]
    assert not vs.incomplete(tree)


def test_quotes_match_with_spaces_collapsed_and_elisions_in_order():
    text = "def f(x):\n    if x is None:\n        raise ValueError('no x')\n    return x\n"
    assert vs.quoted("if x is None: raise ValueError('no x')", text)
    assert vs.quoted("if x is None: ... return x", text)
    assert not vs.quoted("return x ... if x is None:", text)  # pieces out of order
    assert not vs.quoted("raise TypeError", text)


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory):
    """A bare git snapshot laid out as the tool expects (DIR/owner+name/repo), one commit with one file."""
    base = tmp_path_factory.mktemp("mirror")
    work = base / "work"
    work.mkdir()
    (work / "src").mkdir()
    (work / "src" / "a.py").write_text("MESSAGE = 'the rank timed out'\n")
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t")
    for cmd in (["init", "-q"], ["add", "."], ["commit", "-qm", "Fix the timeout message."]):
        subprocess.run(["git", "-C", str(work), *cmd], check=True, env=env, capture_output=True)
    sha = subprocess.run(["git", "-C", str(work), "rev-parse", "HEAD"], check=True, capture_output=True,
                         text=True).stdout.strip()
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(base / "o+r" / "repo")], check=True,
                   capture_output=True)
    return str(base), sha


@pytest.mark.slow  # git init/commit/clone: processes, ~0.2 s
@pytest.mark.timeout(60)
def test_a_snapshot_proves_a_citation_and_tells_each_wrong_one(snapshot):
    mirror, sha = snapshot

    def status(path, quote=None, commit=sha, repo="o/r"):
        cite = {"file": "f.json", "kind": "structured", "repo": repo, "path": path, "commit": commit}
        if quote:
            cite["quote"] = quote
        (r,) = vs.check([cite], mirror, {})
        return r["status"]

    assert status("src/a.py", "the rank timed out") == "ok"
    assert status("src/a.py", "Fix the timeout message.") == "ok"  # a quote of the commit's message
    assert status("a.py") == "path-missing"
    assert status("src/a.py", "the rank hung") == "quote-missing"
    assert status("src/a.py", commit="d" * 40) == "commit-missing"
    assert status("src/a.py", repo="o/other") == "not-checked"
    recorded_elsewhere = {("o/other", "x.py", sha, None): {"status": "ok", "via": "code index"}}
    (r,) = vs.check([{"file": "f", "kind": "structured", "repo": "o/other", "path": "x.py", "commit": sha}], mirror,
                    recorded_elsewhere)
    assert (r["status"], r["via"]) == ("ok", "code index")
