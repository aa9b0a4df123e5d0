"""List every source citation in ddpdoctor/data/*.json and check the ones that can be checked.

A citation is knowledge's provenance: a JSON object with a "commit" (and "repo", "path", optionally "quote" and
"line") or, in prose, a "source" string naming a 40-hex commit. The data files are knowledge (docs/design: every rule
comes from a primary source, recorded with repo, path and commit); a citation that was never opened at its commit is a
claim, not a source. This tool makes that visible:

    python tools/verify_sources.py list                       # every citation, one JSON line each
    python tools/verify_sources.py check --mirror DIR [--also FILE ...] > tests/data/sources_verified.json

`check` opens each structured citation (repo, path, commit) in a local bare git snapshot DIR/<owner>+<name> when
there is one (`git cat-file -e COMMIT:PATH`, and the quote, if any, searched in the file at that commit or in its commit message,
spaces collapsed, "..." eliding), or, for pytorch/pytorch's torch/**/*.py at the commit the installed torch was built
from (torch.version.git_version), in that wheel; and merges results made elsewhere (`--also`: a JSON list of {"repo", "path", "commit", "status", "via"},
e.g. files read at their commit through a code index). Every citation gets one status:

    ok               the path exists at the commit (and the quote is in it)
    path-missing     the commit is there but not the path
    quote-missing    the file is there but not the quote
    commit-missing   the snapshot lacks the commit (a shallow or older snapshot: not proven wrong)
    not-checked      no snapshot and no recorded result: what it would need is the repo at that commit
    incomplete       the citation has no repo or no path: it cannot be opened by anyone
    prose            a commit named inside a sentence: the sentence, not a (repo, path, commit), is recorded
    (a "tree" citation, a repo read whole at a commit, is ok when the snapshot holds the commit)

The test (tests/test_sources.py) reads the committed result; it needs no network and no snapshot.
"""
from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys
from typing import Dict, Iterator, List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "ddpdoctor", "data")
SHA = re.compile(r"\b[0-9a-f]{40}\b")
WRONG = ("path-missing", "quote-missing")


def _pointer(parts: List[str]) -> str:
    return "/" + "/".join(str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def _walk(obj, parts: List[str]) -> Iterator[tuple]:
    if isinstance(obj, dict):
        yield parts, obj
        for k, v in obj.items():
            yield from _walk(v, parts + [k])
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _walk(v, parts + [str(i)])
    else:
        yield parts, obj


REPO_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*")


def _repo_above(parts: List[str]) -> Optional[str]:
    """The nearest key above that names a repository (`"sources": {"pytorch/pytorch": {"commit": ...}}`)."""
    return next((p for p in reversed(parts) if REPO_KEY.fullmatch(p)), None)


def citations_in(doc, name: str) -> List[dict]:
    """The citations of one data file: structured ones (an object with a string "commit"), and prose ones (a string
    value under a key other than a structured citation's own, naming a 40-hex commit). A structured one with no repo
    of its own under a key that names one (a data file's table of the trees it was mined from) cites that repo; with
    no path either, it is a whole tree read at a commit (kind "tree"), not a file."""
    out = []
    for parts, node in _walk(doc, []):
        if isinstance(node, dict) and isinstance(node.get("commit"), str):
            repo = node.get("repo") or _repo_above(parts)
            kind = "tree" if not node.get("repo") and repo and not node.get("path") else "structured"
            cite = {"file": name, "at": _pointer(parts), "kind": kind, "repo": repo,
                    "path": node.get("path"), "commit": node["commit"]}
            for k in ("quote", "line"):
                if node.get(k) not in (None, ""):
                    cite[k] = node[k]
            out.append(cite)
        elif isinstance(node, str) and parts and parts[-1] not in ("commit",) and SHA.search(node):
            for sha in dict.fromkeys(SHA.findall(node)):
                out.append({"file": name, "at": _pointer(parts), "kind": "prose", "commit": sha,
                            "repos": sorted(set(re.findall(r"\b([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)\s", node))
                                            & _known_repos(node))})
    return out


def _known_repos(text: str) -> set:
    # owner/name followed by a path-like token: the way the data files write "pytorch/pytorch torch/x.py @sha"
    return {m.group(1) for m in re.finditer(r"\b([A-Za-z0-9_-]+/[A-Za-z0-9_.-]+) [A-Za-z0-9_./-]+\.[a-z]{1,4}\b", text)}


def all_citations(data_dir: str = DATA) -> List[dict]:
    out = []
    for path in sorted(glob.glob(os.path.join(data_dir, "*.json"))):
        with open(path, encoding="utf-8") as fh:
            out.extend(citations_in(json.load(fh), os.path.basename(path)))
    return out


def key(cite: dict) -> str:
    """What identifies a citation across edits of its file (positions move; the cited thing does not)."""
    return "|".join(str(cite.get(k) or "") for k in ("file", "kind", "repo", "path", "commit"))


def incomplete(cite: dict) -> bool:
    return cite["kind"] == "structured" and not (cite.get("repo") and cite.get("path"))


def _collapse(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def check_in_mirror(git_dir: str, commit: str, path: str, quote: Optional[str]) -> str:
    def git(*args) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "--git-dir", git_dir, *args], capture_output=True, timeout=120)

    if git("cat-file", "-e", f"{commit}^{{commit}}").returncode != 0:
        return "commit-missing"
    shown = git("show", f"{commit}:{path.lstrip('/')}")
    if shown.returncode != 0:
        return "path-missing"
    if quote and isinstance(quote, str):
        message = git("log", "-1", "--format=%B", commit).stdout.decode("utf-8", "replace")
        if not (quoted(quote, shown.stdout.decode("utf-8", "replace")) or quoted(quote, message)):
            return "quote-missing"
    return "ok"


def quoted(quote: str, text: str) -> bool:
    """`quote` is in `text`, spaces collapsed; "..." in a quote elides, so its pieces must come in order."""
    at, text = 0, _collapse(text)
    for piece in re.split(r"\.\.\.|\u2026", quote):
        piece = _collapse(piece)
        if not piece:
            continue
        found = text.find(piece, at)
        if found < 0:
            return False
        at = found + len(piece)
    return True


def _git_dir(mirror: str, repo: str) -> Optional[str]:
    """DIR/owner+name, or its `repo` git directory (how the snapshots are laid out), when it is a git directory."""
    base = os.path.join(mirror, repo.replace("/", "+"))
    for cand in (os.path.join(base, "repo"), base):
        if os.path.isfile(os.path.join(cand, "HEAD")):
            return cand
    return None


def installed_torch() -> Optional[dict]:
    """The installed torch wheel as a snapshot of pytorch/pytorch's Python files at the commit it was built from
    (torch.version.git_version): its torch/**/*.py are the repository's files at that commit, copied as they are."""
    try:
        import torch
    except ImportError:
        return None
    return {"repo": "pytorch/pytorch", "commit": getattr(torch.version, "git_version", ""),
            "root": os.path.dirname(os.path.dirname(os.path.abspath(torch.__file__)))}


def wheel_file(wheel: dict, path: str) -> Optional[str]:
    """The wheel's copy of `path`, for a Python source under its package; None for anything built or outside it."""
    if not (path.startswith("torch/") and path.endswith(".py")):
        return None
    return os.path.join(wheel["root"], path)


def check_in_wheel(wheel: dict, path: str, quote: Optional[str]) -> str:
    file = wheel_file(wheel, path)
    if not file or not os.path.isfile(file):
        return "path-missing"
    if quote and isinstance(quote, str):
        with open(file, encoding="utf-8", errors="replace") as fh:
            if not quoted(quote, fh.read()):
                return "quote-missing"
    return "ok"


def check(cites: List[dict], mirror: Optional[str], also: Dict[tuple, dict],
          wheel: Optional[dict] = None) -> List[dict]:
    results = []
    opened: Dict[tuple, str] = {}
    for c in cites:
        r = dict(c)
        if c["kind"] == "prose":
            r["status"], r["via"] = "prose", None
        elif c["kind"] == "tree":  # the commit, at least, must be the repo's
            git_dir = _git_dir(mirror, c["repo"]) if mirror else None
            if git_dir and re.fullmatch(r"[0-9a-f]{7,40}", c["commit"]):
                ok = subprocess.run(["git", "--git-dir", git_dir, "cat-file", "-e", f"{c['commit']}^{{commit}}"],
                                    capture_output=True, timeout=120).returncode == 0
                r["status"], r["via"] = ("ok" if ok else "commit-missing"), "snapshot"
            else:
                r["status"], r["via"] = "not-checked", None
        elif incomplete(c):
            r["status"], r["via"] = "incomplete", None
        else:
            t = (c["repo"], c["path"], c["commit"], c.get("quote"))
            got = also.get(t) or also.get(t[:3] + (None,))
            git_dir = _git_dir(mirror, c["repo"]) if mirror else None
            if got is not None and (c.get("quote") is None or got.get("quote") == c.get("quote")):
                r["status"], r["via"] = got["status"], got.get("via", "recorded")
            elif wheel and c["repo"] == wheel["repo"] and c["commit"] == wheel["commit"] and wheel_file(wheel, c["path"]):
                r["status"], r["via"] = check_in_wheel(wheel, c["path"], c.get("quote")), "installed wheel"
            elif git_dir:
                if t not in opened:
                    opened[t] = check_in_mirror(git_dir, c["commit"], c["path"], c.get("quote"))
                r["status"], r["via"] = opened[t], "snapshot"
            else:
                r["status"], r["via"] = "not-checked", None
        results.append(r)
    return results


def _load_also(paths: List[str]) -> Dict[tuple, dict]:
    out: Dict[tuple, dict] = {}
    for p in paths:
        with open(p, encoding="utf-8") as fh:
            for e in json.load(fh):
                out[(e["repo"], e["path"], e["commit"], e.get("quote"))] = e
    return out


def main(argv: List[str]) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("verb", choices=("list", "check"))
    ap.add_argument("--mirror", help="directory of bare git snapshots named owner+name")
    ap.add_argument("--also", action="append", default=[], help="recorded results made elsewhere (JSON list)")
    args = ap.parse_args(argv)
    cites = all_citations()
    if args.verb == "list":
        for c in cites:
            print(json.dumps(c, sort_keys=True))
        return 0
    results = check(cites, args.mirror, _load_also(args.also), installed_torch())
    counts: Dict[str, int] = {}
    for r in results:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    # one line per citation key (the position in its file is left out: it moves with unrelated edits)
    by_key: Dict[str, dict] = {}
    for r in results:
        slim = {k: r[k] for k in ("file", "kind", "repo", "path", "commit", "status", "via") if r.get(k) is not None}
        by_key.setdefault(key(r), slim)
    doc = {"schema": "ddpdoctor/sources-verified/1",
           "about": "tools/verify_sources.py check: each data file citation (file, kind, repo, path, commit) and what "
                    "opening it at its commit showed; tests/test_sources.py reads it.",
           "counts": dict(sorted(counts.items())), "citations": [by_key[k] for k in sorted(by_key)]}
    json.dump(doc, sys.stdout, indent=0, sort_keys=False)
    sys.stdout.write("\n")
    return 1 if any(r["status"] in WRONG for r in results) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
