"""The catalogues: knowledge that other projects' sources hold, kept as data with where it was read.

Two catalogues share one shape (design.md, "Catalogues"): `messages` (what torch, NCCL, CUDA,
transformers, accelerate, DeepSpeed, Ray, SLURM and the kernel print when a distributed job fails;
triage matches log lines against it) and `settings` (the environment variables and options they
read; check judges a set variable against it). Each lives in one JSON file under ddpdoctor/data/:

    {"schema": "ddpdoctor/catalogue/1",
     "name": "messages",
     "sources": {"pytorch/pytorch": {"commit": "cf30153c...", "ref": "v2.13.0", "how": "..."}, ...},
     "entries": [{"id": "...", "source": {"repo": "...", "path": "...", "commit": "...", "symbol": "..."},
                  "class": "...", "meaning": "...", "fix": "...", "examples": ["..."], ...}, ...]}

Every entry carries `source` (repo, path, commit, and the line or symbol it was read from) and at least
one `examples` line: a real excerpt, or the source's format with its placeholders filled. An entry without
a source is not knowledge. The fields beyond the common ones belong to each catalogue's own module
(facts/messages.py, facts/settings.py), which asks its questions of the entries loaded here.

Why a loader of its own: the files are read once per process and cached, and every consumer gets the
same validated entries. A malformed file is a bug in the package, so it raises CatalogueError at first
use (tests/test_catalogues.py loads every file, so no broken catalogue ships).
"""
from __future__ import annotations

import functools
import pathlib
from typing import Dict, List, Mapping, Tuple

from ..recache import load_json

SCHEMA = "ddpdoctor/catalogue/1"
DATA_DIR = pathlib.Path(__file__).resolve().parent.parent / "data"
REQUIRED_ENTRY_FIELDS = ("id", "source", "class", "meaning", "examples")
REQUIRED_SOURCE_FIELDS = ("repo", "path", "commit")
# catalogue name -> the facts module that owns its own fields. Each such module defines
# `entry_problems(entry) -> list of sentences`: its own fields are well formed (a pattern compiles, a
# type is known) and every one of the entry's `examples` is recognised by the same code that the
# rules and checks call. tests/test_catalogues.py runs it over every entry.
MODULES = {"messages": "ddpdoctor.facts.messages", "settings": "ddpdoctor.facts.settings",
           "xid": "ddpdoctor.facts.xid", "cuda_errors": "ddpdoctor.facts.cuda_init"}


class CatalogueError(ValueError):
    """A catalogue file that does not have the shape above."""


def names() -> List[str]:
    """Every catalogue shipped with the package (the stems of ddpdoctor/data/*.json that declare the schema)."""
    out = []
    for path in sorted(DATA_DIR.glob("*.json")):
        try:
            with path.open(encoding="utf-8") as fh:
                head = fh.read(200)
        except OSError:
            continue
        if SCHEMA in head:
            out.append(path.stem)
    return out


def problems(doc: Mapping) -> List[str]:
    """What is wrong with a loaded catalogue document, as sentences (empty when it is well formed)."""
    out: List[str] = []
    if doc.get("schema") != SCHEMA:
        out.append(f"schema is {doc.get('schema')!r}, expected {SCHEMA!r}")
    entries = doc.get("entries")
    if not isinstance(entries, list):
        return out + ["'entries' is not a list"]
    sources = doc.get("sources") or {}
    seen = set()
    for i, entry in enumerate(entries):
        where = f"entry {i} ({entry.get('id', '?') if isinstance(entry, dict) else '?'})"
        if not isinstance(entry, dict):
            out.append(f"{where}: not an object")
            continue
        for key in REQUIRED_ENTRY_FIELDS:
            if entry.get(key) in (None, "", []):
                out.append(f"{where}: missing {key!r}")
        if entry.get("id") in seen:
            out.append(f"{where}: duplicate id")
        seen.add(entry.get("id"))
        src = entry.get("source")
        if isinstance(src, dict):
            for key in REQUIRED_SOURCE_FIELDS:
                if not src.get(key):
                    out.append(f"{where}: source has no {key!r}")
            repo = src.get("repo")
            if repo and sources and repo not in sources:
                out.append(f"{where}: source repo {repo!r} is not listed under 'sources'")
        elif src is not None:
            out.append(f"{where}: source is not an object")
        if not isinstance(entry.get("examples", []), list):
            out.append(f"{where}: examples is not a list")
    return out


@functools.lru_cache(maxsize=None)
def _load(name: str) -> Tuple[dict, Tuple[dict, ...]]:
    path = DATA_DIR / f"{name}.json"
    try:
        doc = load_json(str(path))   # json.load, through a marshal copy of the same bytes where one is kept
    except (OSError, ValueError) as exc:
        raise CatalogueError(f"catalogue {name!r} cannot be read: {exc}") from None
    bad = problems(doc)
    if bad:
        raise CatalogueError(f"catalogue {name!r}: " + "; ".join(bad[:5]) + (" ..." if len(bad) > 5 else ""))
    header = {k: v for k, v in doc.items() if k != "entries"}
    return header, tuple(doc["entries"])


def entries(name: str) -> Tuple[dict, ...]:
    """The entries of one catalogue, validated, read once per process. Treat them as read-only."""
    return _load(name)[1]


def header(name: str) -> dict:
    """The catalogue's header: schema, name, and `sources` (repo -> commit, ref, how it was mined)."""
    return _load(name)[0]


def size_by_source(name: str) -> Dict[str, int]:
    """How many entries each source repository contributed (for docs and the test of the goals)."""
    out: Dict[str, int] = {}
    for entry in entries(name):
        repo = entry["source"]["repo"]
        out[repo] = out.get(repo, 0) + 1
    return out
