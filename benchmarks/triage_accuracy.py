"""Score `ddpdoctor triage` on the measurement corpus: real logs users pasted into public threads.

benchmarks/triage_corpus.json lists every log (its file name, the thread it was copied from, the batch it was
collected in, the verdict: failed / healthy / warning-only, the rules that report it rightly, the rank when the
log shows it, and one line of why) and, per batch, the score judged on first read: before any code was changed
for that batch. The logs themselves are not in the repository (they are other people's text): DIR holds them,
one file per entry, under the names the JSON gives.

    python benchmarks/triage_accuracy.py DIR            # scores the current code, batch by batch
    python benchmarks/triage_accuracy.py DIR --batch 7  # one batch
    python benchmarks/triage_accuracy.py DIR -v         # every log's verdict and the first finding
    python benchmarks/triage_accuracy.py DIR --corpus HELDOUT.json   # a set kept out of the repository

A held-out set (the issues' review sets) uses the same schema in its own file, next to its logs, never in the
repository; it is scored the same way.

How a log is scored (the same rule the first-read judgement used):
- a failed job is right when the first error or warning finding is one of the rules its entry names (and names
  the entry's rank, when it gives one); it is "called healthy" when no error or warning finding is reported;
- a healthy or warning-only log is right when no error finding is reported, and no LOG028 "unexplained failure"
  warning (which says that a process failed) either.

The first-read figures in the JSON were judged by reading each output before the batch's code changes; this
script re-scores the whole corpus with today's code, so batches fixed after their first read show higher here.
Only the first-read figures measure the tool on text it had not been fitted to.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Dict, List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
CORPUS = os.path.join(ROOT, "benchmarks", "triage_corpus.json")


def judge(entry: dict, report) -> Dict[str, object]:
    """right / called_healthy / error_on_healthy for one log, from its report."""
    from ddpdoctor.model import ERROR, WARNING

    found = [f for f in report.sorted_findings() if f.severity in (ERROR, WARNING)]
    first = found[0] if found else None
    # an error, or LOG028's "unexplained failure" (it says a process failed; its "the log stops mid-training" does not)
    errors = [f for f in found if f.severity == ERROR or (f.id == "LOG028" and f.title.startswith("unexplained failure"))]
    out = {"first": f"{first.id} {first.title}" if first else "No issues found"}
    if entry["verdict"] == "failed":
        ok = first is not None and first.id in entry["expect"]
        rank = entry.get("rank")
        if ok and rank is not None:
            ok = f"rank:{rank}" in first.subjects
        out.update(right=ok, called_healthy=first is None, error_on_healthy=False)
    else:
        out.update(right=not errors, called_healthy=False, error_on_healthy=bool(errors))
    return out


def score(logdir: str, batch: Optional[int] = None, verbose: bool = False, corpus: Optional[dict] = None) -> List[dict]:
    """Every log of `corpus` (default: the project's own, benchmarks/triage_corpus.json) judged with today's code."""
    from ddpdoctor.triage.api import triage_paths

    if corpus is None:
        with open(CORPUS, encoding="utf-8") as fh:
            corpus = json.load(fh)
    rows = []
    for entry in corpus["logs"]:
        if batch is not None and entry["batch"] != batch:
            continue
        path = os.path.join(logdir, entry["file"])
        if not os.path.exists(path):
            rows.append({"entry": entry, "missing": True})
            continue
        verdict = judge(entry, triage_paths([path]))
        rows.append({"entry": entry, **verdict})
        if verbose:
            mark = "ok " if verdict["right"] else "BAD"
            print(f"{mark} b{entry['batch']} {entry['file']}: {verdict['first'][:150]}")
    return rows


def summarise(rows: List[dict], corpus: dict) -> str:
    lines = []
    batches = sorted({r["entry"]["batch"] for r in rows})
    first_read = {b["batch"]: b for b in corpus.get("batches", [])}
    for b in batches:
        mine = [r for r in rows if r["entry"]["batch"] == b and not r.get("missing")]
        right = sum(1 for r in mine if r["right"])
        healthy_calls = sum(1 for r in mine if r["called_healthy"])
        healthy = [r for r in mine if r["entry"]["verdict"] != "failed"]
        err_healthy = sum(1 for r in healthy if r["error_on_healthy"])
        fr = first_read.get(b, {}).get("first_read", {})
        fr_txt = (f"first read {fr['right']}/{fr['logs']} ({100 * fr['right'] / fr['logs']:.0f}%), "
                  f"{fr['failed_called_healthy']} failed called healthy, {fr['errors_on_healthy']} errors on "
                  f"{fr['healthy_logs']} healthy" if fr else "first read: not recorded")
        lines.append(f"batch {b}: {len(mine)} logs ({len(healthy)} healthy/warning-only); now {right}/{len(mine)} right "
                     f"({100 * right / max(1, len(mine)):.0f}%), {healthy_calls} failed called healthy, {err_healthy} "
                     f"errors on healthy; {fr_txt}")
    missing = [r for r in rows if r.get("missing")]
    total = [r for r in rows if not r.get("missing")]
    right = sum(1 for r in total if r["right"])
    threads = len({r["entry"]["url"] for r in rows})
    lines.append(f"all: {len(total)} logs from {threads} threads, {right} right ({100 * right / max(1, len(total)):.0f}%)"
                 + (f"; {len(missing)} log files missing from the folder" if missing else ""))
    bare = [r for r in total if r["right"] and r["entry"].get("no_failure_in_excerpt")]
    if bare:
        strict = right - len(bare)
        lines.append(f"strict: {strict}/{len(total)} ({100 * strict / max(1, len(total)):.0f}%), counting as wrong the "
                     f"{len(bare)} failed jobs whose excerpt holds no failure line and that were judged right")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="the folder that holds the corpus's log files")
    ap.add_argument("--batch", type=int)
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--corpus", default=CORPUS, help="the corpus file (default: benchmarks/triage_corpus.json); "
                                                     "a held-out set keeps its own file outside the repository")
    args = ap.parse_args(argv)
    if not os.path.isdir(args.dir):
        print(f"triage_accuracy: {args.dir}: not a folder", file=sys.stderr)
        return 2
    try:
        with open(args.corpus, encoding="utf-8") as fh:
            corpus = json.load(fh)
        if not isinstance(corpus, dict) or not isinstance(corpus.get("logs"), list):
            raise ValueError("no 'logs' list")
    except (OSError, ValueError) as exc:
        print(f"triage_accuracy: {args.corpus}: not a corpus file ({exc})", file=sys.stderr)
        return 2
    rows = score(args.dir, args.batch, args.verbose, corpus)  # the file read once, above
    print(summarise(rows, corpus))
    return 0


if __name__ == "__main__":
    sys.exit(main())
