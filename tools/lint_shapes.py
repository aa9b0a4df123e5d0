"""Write each first-read verdict's shape into benchmarks/lint_corpus.json (issue 25, round 23).

    python tools/lint_shapes.py FINDINGS.json COMMIT

FINDINGS.json: every finding of `lint_paths(preview=True)` over the corpus's first-read batches at COMMIT, one object
per finding with set, repo, path, rule, line, severity and title (the runner that lints each batch's files per
repository folder lives with the raw files, outside the repository). A first-read warning or error verdict of a batch
from fr<SEVERITY_FROM> on gets the shape (ddpdoctor.lint.engine.shape_of) of the warning or error the linter still
reports for the same rule within 3 lines of it; a verdict with no such finding (fixed since, or the line moved) gets
none. `python benchmarks/lint_precision.py --write-severity` then measures each shape (shape_table)."""
from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from ddpdoctor.lint.engine import shape_of  # noqa: E402

TOLERANCE = 3


def _bench():
    spec = importlib.util.spec_from_file_location("lint_precision", os.path.join(ROOT, "benchmarks", "lint_precision.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def annotate(corpus: dict, findings: list, commit: str) -> int:
    """Sets or clears `shape` on the first-read verdicts of the severity window; returns how many got one."""
    sets = set(_bench().severity_batches(corpus))
    loud = defaultdict(list)
    for f in findings:
        if f.get("severity") in ("warning", "error"):
            loud[(f["set"], f["repo"], f["path"], f["rule"])].append(f)
    n = 0
    for v in corpus["verdicts"]:
        v.pop("shape", None)
        if v.get("set") not in sets:
            continue
        near = [f for f in loud.get((v["set"], v["repo"], v["path"], v["rule"]), ())
                if abs(f["line"] - v["line"]) <= TOLERANCE]
        if near:
            best = min(near, key=lambda f: abs(f["line"] - v["line"]))
            v["shape"] = shape_of(best["title"])
            n += 1
    corpus["shapes_at"] = commit
    return n


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print(__doc__)
        return 2
    path = os.path.join(ROOT, "benchmarks", "lint_corpus.json")
    with open(path, encoding="utf-8") as fh:
        corpus = json.load(fh)
    with open(argv[0], encoding="utf-8") as fh:
        findings = json.load(fh)
    n = annotate(corpus, findings, argv[1])
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(corpus, fh, indent=1, ensure_ascii=False)
        fh.write("\n")
    print(f"{n} first-read verdicts carry a shape (findings at {argv[1]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
