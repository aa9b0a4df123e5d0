"""What a reader of the project sees besides the code: how it is launched and which versions it pins.

`ddpdoctor lint` reads, next to the linted files (their folder and up to two parents, stopping at the
first folder that holds a README, requirements, setup.py, pyproject.toml or .git), the README files,
shell scripts, requirements*.txt, setup.py, setup.cfg and pyproject.toml. From them it keeps:
- launch command lines: `torchrun ... train.py`, `python -m torch.distributed.launch ...`,
  `deepspeed train.py`, `accelerate launch train.py`, `python train.py`, and which script each runs;
- pinned versions: `transformers==4.28.1`, `transformers<5`, `"transformers>=4.30,<4.40"`;
- variables exported for the job (`export MASTER_ADDR=...`).
The text is never executed. Each file is read once, at most 256 KiB of it.
"""
from __future__ import annotations

import os
from typing import Dict, Iterable, List, Optional

from .launchinfo import ProjectContext, parse_config_urls, parse_exports, parse_launches, parse_pins

_MARKERS = ("README.md", "README.rst", "README", "README.txt", "requirements.txt", "setup.py", "pyproject.toml",
            ".git", "setup.cfg")
_MAX_BYTES = 256 * 1024
_MAX_FILES = 200
_MAX_FOLDERS = 400
_UNMARKED_FOLDERS = 40


def _is_config(name: str) -> bool:
    low = name.lower()
    return low.endswith((".json", ".yaml", ".yml")) and not low.startswith(("package", "tsconfig"))


_CONTEXT_NAMES = frozenset(("setup.py", "setup.cfg", "pyproject.toml", "environment.yml", "environment.yaml", "makefile"))
_CONTEXT_ENDS = (".json", ".yaml", ".yml", ".sh", ".txt")


def _is_context(name: str) -> bool:
    """A README, a shell script, requirements*.txt, a config (_is_config) or one of _CONTEXT_NAMES. Asked of every
    name of the folders read (thousands in /tmp or a home folder): one lower() and one endswith for most names."""
    low = name.lower()
    if low.endswith(_CONTEXT_ENDS):
        if low.endswith(".sh"):
            return True
        if low.endswith(".txt"):
            return low.startswith(("requirements", "readme"))
        return not low.startswith(("package", "tsconfig")) or low.startswith("readme")
    return low.startswith("readme") or low in _CONTEXT_NAMES


def project_roots(files: Iterable[str], listings: Optional[Dict[str, List[str]]] = None) -> List[str]:
    """The nearest folder (the file's own, or up to four parents: `src/pkg/sub/module.py`) that looks like a project root; the
    file's own folder when none does. `listings` (folder -> its names) keeps each folder's listing for read_context, which
    would list the same folders again (a script in /tmp or a home folder: thousands of names, listed three times)."""
    roots: List[str] = []
    listings = {} if listings is None else listings
    for f in files:
        here = os.path.dirname(os.path.abspath(f))
        best = here
        cur = here
        for _ in range(5):
            names = _listing(cur, listings)
            if names is None:
                break
            if not _MARKER_SET.isdisjoint(names):
                best = cur
                break
            parent = os.path.dirname(cur)
            if parent == cur:
                break
            cur = parent
        if best not in roots:
            roots.append(best)
    return roots


_MARKER_SET = frozenset(_MARKERS)


def _listing(folder: str, listings: Dict[str, List[str]]) -> Optional[List[str]]:
    """os.listdir(folder), once per run (None when it cannot be listed)."""
    if folder not in listings:
        try:
            listings[folder] = os.listdir(folder)
        except OSError:
            listings[folder] = None  # type: ignore[assignment]
    return listings[folder]


def _read(path: str) -> str:
    from ddpdoctor.model.inputs import open_regular

    try:
        with open_regular(path, "rb") as fh:  # a FIFO among the project's files would block open() for ever
            return fh.read(_MAX_BYTES).decode("utf-8", "replace")
    except OSError:
        return ""


def _zero_stage(text: str) -> Optional[int]:
    """The ZeRO stage a DeepSpeed JSON config asks for (`"zero_optimization": {"stage": 3}`), or None ("auto", a
    file that does not parse)."""
    import json
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser's stack (within 64 KiB)
        return None
    zero = doc.get("zero_optimization") if isinstance(doc, dict) else None
    stage = zero.get("stage") if isinstance(zero, dict) else None
    return stage if isinstance(stage, int) and not isinstance(stage, bool) else None


def read_context(files: List[str]) -> Optional[ProjectContext]:
    """The launch lines, pins and exports of the projects the files belong to (None when none found)."""
    ctx = ProjectContext()
    seen = 0
    folders = 0
    listings: Dict[str, List[str]] = {}
    for root in project_roots(files, listings):
        names = _listing(root, listings)
        if names is None:
            continue
        marked = not _MARKER_SET.isdisjoint(names)
        for dirpath, dirnames, filenames in os.walk(root):
            folders += 1
            depth = os.path.relpath(dirpath, root).count(os.sep) + (0 if dirpath == root else 1)
            if folders > _MAX_FOLDERS or (not marked and (depth >= 2 or folders > _UNMARKED_FOLDERS
                                                          or (depth == 0 and len(dirnames) > _UNMARKED_FOLDERS))):
                # not a project root (a copy of some of a repository's files, a home folder, /tmp): its own folder
                # and two levels below, a few dozen folders at most (round 23: `scripts/stage1/train.sh` launching
                # `torch.distributed.launch --nproc_per_node=8 main.py` beside a main.py with no README, fr161)
                # An unmarked folder with more subfolders than that is a home folder or /tmp, never one project:
                # not descended at all (lintperf23: a script in /tmp paid 220 ms listing 40 of its 5,202 folders)
                dirnames[:] = []
            dirnames[:] = [d for d in dirnames if not d.startswith(".") and d not in ("node_modules", "venv", ".venv",
                                                                                      "site-packages", "__pycache__")]
            if depth >= 3:
                dirnames[:] = []
            for name in sorted(filter(_is_context, filenames)):
                if seen >= _MAX_FILES:
                    continue
                seen += 1
                path = os.path.join(dirpath, name)
                text = _read(path)
                if not text:
                    continue
                rel = os.path.relpath(path, root)
                low = name.lower()
                if _is_config(low):
                    if low.endswith(".json") and len(text) <= 64 * 1024 and "zero_optimization" in text:
                        stage = _zero_stage(text)   # a DeepSpeed config (round 20, LINT040)
                        if stage is not None:
                            ctx.ds_configs[rel] = stage
                    if len(text) <= 64 * 1024 and "tcp://" in text:
                        for key, url in parse_config_urls(text).items():
                            ctx.config_values.setdefault(key, url)
                    continue
                if low.startswith("readme") or low.endswith(".sh") or low == "makefile":
                    ctx.launches.extend(parse_launches(text, rel, os.path.abspath(dirpath)))
                    exported = parse_exports(text)
                    ctx.exports.update(exported)
                    if exported:
                        ctx.exports_at.setdefault(os.path.abspath(dirpath), set()).update(exported)
                if low.startswith("requirements") or low in ("setup.py", "setup.cfg", "pyproject.toml",
                                                             "environment.yml", "environment.yaml"):
                    for pkg, spec in parse_pins(text).items():
                        ctx.pins.setdefault(pkg, spec)
                        ctx.pins_at.setdefault(os.path.abspath(dirpath), {}).setdefault(pkg, spec)
                ctx.sources.append(rel)
    return ctx if ctx.sources else None
