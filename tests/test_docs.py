"""The docs stand alone: nothing in the repository points outside it, every relative link in the
Markdown resolves (file and anchor), and every catalogue ID a check cites is defined in docs/faults.md."""
from __future__ import annotations

import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Folders that are built or installed, never committed (see .gitignore).
SKIP_DIRS = {".git", ".venv", "build", "dist", "__pycache__", ".pytest_cache", ".hypothesis", ".whl", ".gl", ".firstread"}
# Written in pieces so that this file does not match itself.
_SHARED = "shared"
OUTSIDE = [  # the reference folder beside the checkout, its three documents and the question; this workplace
    re.compile(r"\.\./+" + _SHARED + r"\b"),
    re.compile(r"(?<![\w-])" + _SHARED + r"/(design|faults|style)\.md"),
    re.compile(r"(?<![\w-])" + _SHARED + r"/seed\b"),
    re.compile("/" + "work" + r"/(?:" + _SHARED + r"|wt|main|venvs|coord|corpora|notes)\b"),  # + engineers' logs, raw sets
]
# A recorded snapshot keeps the interpreter path of the machine it was recorded on: a fact, not a link.
RECORDED_FACT = re.compile(r'^\s*"python_executable": ')


def repo_files():
    for top, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info")]
        for name in files:
            if name != ".git":  # a worktree's pointer to its repository
                yield os.path.join(top, name)


def text_of(path):
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except (UnicodeDecodeError, OSError):
        return None  # binary


def test_no_file_refers_to_a_path_outside_the_repository():
    hits = []
    for path in repo_files():
        text = text_of(path)
        if text is None:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if RECORDED_FACT.match(line) and path.endswith(".json"):
                continue
            if any(p.search(line) for p in OUTSIDE):
                hits.append(f"{os.path.relpath(path, ROOT)}:{n}: {line.strip()[:120]}")
    assert hits == [], "point inside the repository (docs/report-format.md, docs/faults.md, README):\n" + \
        "\n".join(hits)


def test_the_outside_path_patterns_catch_what_they_are_for():
    bad = ["see ../" + _SHARED + "/design.md", "(" + _SHARED + "/faults.md)", _SHARED + "/seed/000.txt",
           "/" + "work/" + _SHARED + "/faults.md"]
    fine = ["a shared filesystem", "/cluster/tools/ddpdoctor", "docs/faults.md", "torch.multiprocessing shared memory"]
    assert all(any(p.search(b) for p in OUTSIDE) for b in bad)
    assert not any(p.search(f) for p in OUTSIDE for f in fine)


def anchors(markdown: str) -> set:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, -1 -2 for repeats."""
    out, seen = set(), {}
    in_code = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code:
            continue
        m = re.match(r"#{1,6} (.+)", line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


MARKDOWN = sorted(p for p in repo_files() if p.endswith(".md"))


@pytest.mark.parametrize("md", MARKDOWN, ids=lambda p: os.path.relpath(p, ROOT))
def test_relative_links_resolve(md):
    text = text_of(md)
    text_no_code = re.sub(r"```.*?```", "", text, flags=re.S)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text_no_code):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        full = os.path.normpath(os.path.join(os.path.dirname(md), path)) if path else md
        if not full.startswith(ROOT) or not os.path.exists(full):
            broken.append(f"{target}: no such file")
            continue
        if anchor and full.endswith(".md") and anchor not in anchors(text_of(full)):
            broken.append(f"{target}: no heading with that anchor")
    assert broken == []


def test_every_catalogue_id_is_defined_in_faults_md():
    from ddpdoctor.model.registry import REGISTRY
    from ddpdoctor.pipeline.runner import load_all, load_lint_rules

    load_all(plugins=False)
    load_lint_rules()
    cited = {c for spec in REGISTRY.values() for c in spec.catalogue}
    with open(os.path.join(ROOT, "docs", "faults.md"), encoding="utf-8") as fh:
        defined = set(re.findall(r"^### ([A-F]\d+) [a-z0-9-]+$", fh.read(), re.M))
    assert cited, "no check cites a catalogue ID"
    assert sorted(cited - defined) == [], "cited by a check but not defined in docs/faults.md"
