"""Mine the oldest torch each accelerate release accepts, from its sources, into ddpdoctor/data/torch_floors.json.

Two kinds of floor, per release tag of huggingface/accelerate:
- declared: setup.py's install_requires `torch>=X` (pip enforces it, but conda, --no-deps and editable
  installs do not);
- at launch: `raise NotImplementedError("... requires pytorch>=X")` in accelerate's launcher
  (src/accelerate/commands/launch.py, src/accelerate/utils/launch.py), which refuses a multi-GPU or
  multi-node launch on an older torch although the install succeeded.
Consecutive releases with the same floor are merged into one entry with its first and last release.

    python tools/mine_torch_floors.py --repo /path/to/accelerate.git   # a bare clone (git --git-dir)
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "ddpdoctor", "data", "torch_floors.json")
LAUNCH_FILES = ("src/accelerate/commands/launch.py", "src/accelerate/utils/launch.py")
RAISE = re.compile(r'raise NotImplementedError\(((?:\s*f?"[^"\n]*"\s*)+)\)')  # adjacent literals are one message
LITERAL = re.compile(r'f?"([^"\n]*)"')
FLOOR = re.compile(r"requires pytorch>=([0-9.]*[0-9])")
DECLARED = re.compile(r'"torch>=([0-9.]+)"')


def git(repo: str, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", repo, *args], capture_output=True, text=True).stdout


def release_tags(repo: str) -> list:
    tags = [t for t in git(repo, "tag").split() if re.fullmatch(r"v\d+\.\d+\.\d+", t)]
    return sorted(tags, key=lambda t: tuple(int(x) for x in t[1:].split(".")))


def floors_at(repo: str, tag: str) -> list:
    out = []
    setup = git(repo, "show", f"{tag}:setup.py")
    m = DECLARED.search(setup)
    if m:
        line = setup[:m.start()].count("\n") + 1
        out.append({"when": "installed", "torch": m.group(1), "path": "setup.py", "line": line,
                    "message": f"install_requires torch>={m.group(1)}"})
    for path in LAUNCH_FILES:
        text = git(repo, "show", f"{tag}:{path}")
        for g in RAISE.finditer(text):
            msg = "".join(LITERAL.findall(g.group(1)))
            floor = FLOOR.search(msg)
            if not floor:
                continue
            when = "multi_node" if "multi-node" in msg.lower() else "multi_gpu" if "multi-gpu" in msg.lower() else "launch"
            out.append({"when": when, "torch": floor.group(1), "path": path, "line": text[:g.start()].count("\n") + 1,
                        "message": msg})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", required=True, help="bare git directory of huggingface/accelerate")
    args = ap.parse_args(argv)
    out: list = []
    active: dict = {}  # (when, torch) -> its entry, for the floors the previous release had
    for tag in release_tags(args.repo):
        commit = git(args.repo, "rev-list", "-n", "1", tag).strip()
        now: dict = {}
        for f in floors_at(args.repo, tag):
            key = (f["when"], f["torch"])
            if key in now:
                continue
            e = active.get(key)
            if e is None:
                e = {"package": "accelerate", "when": f["when"], "torch": f["torch"], "message": f["message"],
                     "versions": {"first": tag[1:], "last": tag[1:]},
                     "source": {"repo": "huggingface/accelerate", "path": f["path"], "commit": commit,
                                "line": f["line"], "tag": tag}}
                out.append(e)
            e["versions"]["last"] = tag[1:]
            now[key] = e
        active = now
    doc = {"schema": "ddpdoctor/torch-floors/1",
           "about": "The oldest torch each accelerate release accepts: declared in setup.py, or refused at launch "
                    "for multi-GPU / multi-node (tools/mine_torch_floors.py)",
           "entries": sorted(out, key=lambda e: (e["when"], [int(x) for x in e["versions"]["first"].split(".")]))}
    with open(OUT, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=1)
        fh.write("\n")
    print(f"{len(out)} entries -> {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
