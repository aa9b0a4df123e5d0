"""Precision and recall of `ddpdoctor lint` on real public training scripts, against hand verdicts.

The scripts themselves are not in this repository (their licences are their authors'). The
verdicts are: benchmarks/lint_corpus.json lists every file (repo, path, commit), a verdict for
every finding read by hand (rule, line, TP / FP / debatable, one-line reason) and every miss found
by reading (the rule that should fire, the line, the reason). Fetch the files at those commits
into DIR/<owner>__<repo>/<path> (for example with `git show COMMIT:PATH`), then:

    python benchmarks/lint_precision.py DIR [--corpus benchmarks/lint_corpus.json] [--json]

What it reports:
- precision on warnings and errors, strict (debatable and not-yet-judged findings count against)
  and lenient (TP / (TP + FP); debatable and unjudged left out), per rule and overall;
- false errors: error-severity findings judged FP (unjudged errors are listed too);
- recall on the recorded misses, overall and per miss class (a miss counts as caught when the
  rule reports it at any severity, a note included);
- findings with no verdict yet, so a rule change that adds findings is visible at once;
- verdicts whose finding no longer appears (fixed false positives, or a lost true positive).

Matching: a finding matches a verdict with the same repo, path and rule whose line is within
--tolerance lines (default 2; the closest wins, each verdict used once), so a small edit to a
rule's anchor line does not orphan its verdicts. A finding that folds several lines into one
(evidence "lines": one finding per block or per function) also covers verdicts and misses on
those lines: the repeats it replaced are neither lost true positives nor stale. Files listed in the corpus but missing from DIR
are reported and their verdicts skipped (the figures say how many files were linted).

Exit status: 0 when the goals of issue 12 hold (strict precision >= 0.90 on warnings and errors,
no false errors, every miss class caught at least once), 1 when one does not, 2 on bad input.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter, defaultdict

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

GOAL_PRECISION = 0.90
HERE = os.path.dirname(os.path.abspath(__file__))


def load_corpus(path: str) -> dict:
    with open(path, encoding="utf-8") as fh:
        corpus = json.load(fh)
    for key in ("files", "verdicts", "misses"):
        if not isinstance(corpus.get(key), list):
            raise ValueError(f"{path}: '{key}' must be a list")
    return corpus


def local_path(root: str, repo: str, path: str) -> str:
    return os.path.join(root, repo.replace("/", "__"), *path.split("/"))


def lint(root: str, corpus: dict):
    """Lint the corpus files present under root, one run per repository (so cross-module gates are
    seen as `ddpdoctor lint REPO` sees them). Returns (findings as dicts, files linted, files missing)."""
    from ddpdoctor.lint.api import lint_paths

    present, missing, where = [], [], {}
    for f in corpus["files"]:
        p = local_path(root, f["repo"], f["path"])
        if os.path.isfile(p):
            present.append(p)
            where[os.path.normpath(os.path.abspath(p))] = (f["repo"], f["path"])
        else:
            missing.append(f"{f['repo']}/{f['path']}")
    if not present:
        return [], 0, missing, 0.0
    # One run per repository, as its owner runs `ddpdoctor lint` on it: the project facts (gated callers,
    # flags set in another module, the README and requirements) are the repository's own.
    by_repo = defaultdict(list)
    for p in present:
        by_repo[where[os.path.normpath(os.path.abspath(p))][0]].append(p)
    start = time.perf_counter()
    found = []
    for repo_paths in by_repo.values():
        found.extend(lint_paths(repo_paths).findings)
    elapsed = time.perf_counter() - start
    out = []
    for fnd in found:
        ev = fnd.evidence or {}
        key = where.get(os.path.normpath(os.path.abspath(ev.get("path", ""))))
        if key is None:
            continue
        lines = ev.get("lines") if isinstance(ev.get("lines"), list) else []
        out.append({"repo": key[0], "path": key[1], "rule": fnd.id, "line": ev.get("line", 0),
                    "lines": [n for n in lines if isinstance(n, int)],
                    "severity": fnd.severity, "title": fnd.title.split(": ", 1)[-1]})
    return out, len(present), missing, elapsed


def match(findings: list, verdicts: list, tolerance: int):
    """Pair findings with verdicts: same repo/path/rule, closest line within tolerance."""
    pool = defaultdict(list)
    for i, v in enumerate(verdicts):
        pool[(v["repo"], v["path"], v["rule"])].append(i)
    used = set()
    pairs = []
    for f in sorted(findings, key=lambda f: (f["repo"], f["path"], f["rule"], f["line"])):
        best = None
        for i in pool.get((f["repo"], f["path"], f["rule"]), ()):
            if i in used:
                continue
            d = abs(verdicts[i]["line"] - f["line"])
            if d <= tolerance and (best is None or d < best[0]):
                best = (d, i)
        if best is not None:
            used.add(best[1])
            pairs.append((f, verdicts[best[1]]))
        else:
            pairs.append((f, None))
    stale = [v for i, v in enumerate(verdicts) if i not in used and not folded(v, findings)]
    return pairs, stale


def folded(v: dict, findings: list) -> bool:
    """The verdict's line is one a finding folds in (one finding per block or per function lists the
    other lines in its evidence): the repeat is covered, not lost."""
    return any(f["repo"] == v["repo"] and f["path"] == v["path"] and f["rule"] == v["rule"] and v["line"] in f["lines"]
               for f in findings)


def caught(miss: dict, findings: list, tolerance: int) -> bool:
    return any(f["repo"] == miss["repo"] and f["path"] == miss["path"] and f["rule"] == miss["rule"]
               and (abs(f["line"] - miss["line"]) <= tolerance or miss["line"] in f["lines"]) for f in findings)


def ratio(num: int, den: int) -> float:
    return num / den if den else 1.0


def measure(root: str, corpus: dict, tolerance: int) -> dict:
    findings, linted, missing, elapsed = lint(root, corpus)
    present = {(f["repo"], f["path"]) for f in corpus["files"]
               if os.path.isfile(local_path(root, f["repo"], f["path"]))}
    verdicts = [v for v in corpus["verdicts"] if (v["repo"], v["path"]) in present]
    pairs, stale = match(findings, verdicts, tolerance)
    loud = [(f, v) for f, v in pairs if f["severity"] in ("warning", "error")]
    per_rule = defaultdict(Counter)
    per_set = defaultdict(Counter)
    set_of = {(f["repo"], f["path"]): f.get("set", "all") for f in corpus["files"]}
    for key in present:
        per_set[set_of.get(key, "all")].update({})  # every set shows, also one with no findings
    for f, v in loud:
        per_rule[f["rule"]][v["verdict"] if v else "unjudged"] += 1
        per_set[set_of.get((f["repo"], f["path"]), "all")][v["verdict"] if v else "unjudged"] += 1
    total = Counter()
    for c in per_rule.values():
        total.update(c)
    tp, fp, deb, unj = total["TP"], total["FP"], total["debatable"], total["unjudged"]
    false_errors = [(f, v) for f, v in pairs if f["severity"] == "error" and (v is None or v["verdict"] != "TP")]
    misses = [m for m in corpus["misses"] if (m["repo"], m["path"]) in present]
    by_class = defaultdict(lambda: [0, 0])
    for m in misses:
        got = caught(m, findings, tolerance)
        by_class[m.get("class", m["rule"])][0] += got
        by_class[m.get("class", m["rule"])][1] += 1
    caught_n = sum(c for c, _n in by_class.values())
    result = {
        "files_linted": linted,
        "files_missing": missing,
        "repos": len({r for r, _p in present}),
        "lint_seconds": round(elapsed, 2),
        "findings": len(findings),
        "notes": sum(1 for f in findings if f["severity"] == "info"),
        "warnings_and_errors": len(loud),
        "tp": tp, "fp": fp, "debatable": deb, "unjudged": unj,
        "precision_strict": round(ratio(tp, tp + fp + deb + unj), 4),
        "precision_lenient": round(ratio(tp, tp + fp), 4),
        "false_errors": [dict(f, verdict=(v or {}).get("verdict")) for f, v in false_errors],
        "misses": len(misses), "misses_caught": caught_n,
        "recall_on_misses": round(ratio(caught_n, len(misses)), 4),
        "miss_classes": {k: {"caught": c, "of": n} for k, (c, n) in sorted(by_class.items())},
        "per_rule": {r: dict(c) for r, c in sorted(per_rule.items())},
        "per_set": {k: dict(c, files=sum(1 for f in corpus["files"] if f.get("set", "all") == k
                                         and (f["repo"], f["path"]) in present))
                    for k, c in sorted(per_set.items())},
        "unjudged_findings": [f for f, v in pairs if v is None],
        "judged_not_tp": [dict(f, verdict=v["verdict"], reason=v.get("reason", ""))
                          for f, v in loud if v is not None and v["verdict"] != "TP"],
        "verdicts_without_finding": [v for v in stale],
    }
    result["first_reads"] = corpus.get("holdout_first_reads", {})
    result["first_read_batches"] = corpus.get("first_read_batches", {})
    result["last_three_batches"] = last_batches(corpus)
    result["goals_met"] = (result["precision_strict"] >= GOAL_PRECISION and not result["false_errors"]
                           and all(c >= 1 for c, _n in by_class.values()))
    return result


GOAL_JUDGED = 20


SEVERITY_FROM = 111  # the first batch of the window the severities are measured over (issue 25, round 23)
SHAPE_MIN_JUDGED = 5  # a shape is split off as a note when measured below the bar over at least this many findings
# Round 24 (lint32): a shape judged fewer times is split off too when even the upper end of its precision's 95%
# Wilson score interval is below the bar (0 right of 2, 1 of 3, <= 2 of 4 judged): what it has been measured at
# rules out a near-certain shape. Never on one verdict alone.
SHAPE_MIN_JUDGED_FEW = 2
WILSON_Z = 1.96


def wilson_upper(right: int, judged: int, z: float = WILSON_Z) -> float:
    """The upper end of the Wilson score interval of right/judged (E. B. Wilson, JASA 22 (1927) 209-212)."""
    if not judged:
        return 1.0
    p = right / judged
    centre = p + z * z / (2 * judged)
    spread = z * ((p * (1 - p) / judged + z * z / (4 * judged * judged)) ** 0.5)
    return (centre + spread) / (1 + z * z / judged)


def shape_below_bar(right: int, judged: int) -> bool:
    """A shape measured below the bar: below GOAL_PRECISION over >= SHAPE_MIN_JUDGED judged findings, or (round 24)
    over >= SHAPE_MIN_JUDGED_FEW judged with the Wilson upper bound of its precision below GOAL_PRECISION."""
    precision = right / judged if judged else 0.0
    return (judged >= SHAPE_MIN_JUDGED and precision < GOAL_PRECISION) or (
        judged >= SHAPE_MIN_JUDGED_FEW and wilson_upper(right, judged) < GOAL_PRECISION)


def severity_batches(corpus: dict, since: int = SEVERITY_FROM) -> list:
    """Every first-read batch from fr<SEVERITY_FROM> on (corpus["first_read_batches"], in the order they were read)
    with judged findings: the batches read with the protocol of issue 25 (declared before collecting, judged before
    any fix, fr111 onwards). Files of copied code read apart from their batch (fr39x, fr41x, fr42x) are none."""
    judged = {v.get("set") for v in corpus["verdicts"]}
    return [name for name in corpus.get("first_read_batches", {}) if name in judged
            and (not since or (name[2:].isdigit() and int(name[2:]) >= since))]


def shape_table(corpus: dict) -> dict:
    """Each rule's first-read precision per shape (ddpdoctor.lint.engine.shape_of: the condition the rule fired on),
    over the first-read verdicts of severity_batches that carry a `shape` (tools/lint_shapes.py writes it: the shape
    of the finding the linter still reports within 3 lines of the judged one, at the commit in
    corpus["shapes_at"]). Returns {rule: {shape: figures}} for the shapes measured below GOAL_PRECISION over at
    least SHAPE_MIN_JUDGED judged findings: those are notes (engine.earned_severity) while the rule's other shapes
    keep the rule's severity."""
    sets = set(severity_batches(corpus))
    per: dict = defaultdict(Counter)
    for v in corpus["verdicts"]:
        if v.get("set") not in sets or not v.get("shape") or v.get("after_fix") \
                or v.get("severity", "warning") not in ("warning", "error"):
            continue
        per[(v["rule"], v["shape"])][v["verdict"]] += 1
    out: dict = {}
    for (rule, shape), c in sorted(per.items()):
        judged = c["TP"] + c["FP"] + c["debatable"]
        precision = round(c["TP"] / judged, 4) if judged else 0.0
        if shape_below_bar(c["TP"], judged):
            out.setdefault(rule, {})[shape] = {"judged": judged, "tp": c["TP"], "fp": c["FP"],
                                               "debatable": c["debatable"], "precision": precision}
    return out


def earns(judged: int, precision: float) -> str:
    """The severity a rule earns from its first-read figures: "warning" (>= GOAL_JUDGED judged, >= GOAL_PRECISION:
    its own severity by default), "preview" (fewer than GOAL_JUDGED judged: its own severity under --preview, a note
    by default, until it is measured), "note" (measured below the bar: a note by default, its own severity under
    --preview)."""
    if judged < GOAL_JUDGED:
        return "preview"
    return "warning" if precision >= GOAL_PRECISION else "note"


def severity_table(corpus: dict) -> dict:
    """Each rule's first-read precision over every first-read batch (severity_batches), over the findings the rule
    emitted as warnings or errors at its own severity (what the runner of a first read counts). A rule
    earns its warnings with >= GOAL_JUDGED judged findings and >= GOAL_PRECISION precision (strict:
    debatable counts against); see `earns`. Written to ddpdoctor/data/lint_severity.json."""
    sets = severity_batches(corpus)
    every = set(severity_batches(corpus, since=0))
    per: dict = defaultdict(Counter)
    seen: dict = defaultdict(set)
    for v in corpus["verdicts"]:
        if v.get("set") not in every or v.get("severity", "warning") not in ("warning", "error"):
            continue
        if v.get("after_fix"):
            continue  # judged after a fix made for its batch (a miss that became a warning): not a first read
        if v.get("severity") == "error" and v["verdict"] != "TP":
            # a false error is never forgotten: counted over every first-read batch (fr1 on), not only the window
            per[v["rule"]]["false_errors"] += 1
        if v.get("set") not in sets:
            continue
        per[v["rule"]][v["verdict"]] += 1
        seen[v["rule"]].add(v["set"])
    rules = {}
    for rule, c in sorted(per.items()):
        judged = c["TP"] + c["FP"] + c["debatable"]
        precision = round(c["TP"] / judged, 4) if judged else 0.0
        rules[rule] = {"judged": judged, "tp": c["TP"], "fp": c["FP"], "debatable": c["debatable"],
                       "false_errors": c["false_errors"], "precision": precision,
                       "batches": len(seen[rule]),
                       "earned": judged >= GOAL_JUDGED and precision >= GOAL_PRECISION,
                       "earns": earns(judged, precision)}
    return {"schema": "ddpdoctor/lint-severity/3",
            "source": f"benchmarks/lint_corpus.json, first-read verdicts of every first-read batch from "
                      f"fr{SEVERITY_FROM} ({len(sets)}: " + ", ".join(sets) + ")",
            "rule": f"a rule earns its own severity by default when its first-read precision is >= {GOAL_PRECISION:.0%} "
                    f"over >= {GOAL_JUDGED} judged warnings and errors (earns: warning); with fewer judged it is "
                    "a note by default and shown under --preview (earns: preview); measured below the bar it is "
                    "a note by default and shown under --preview (earns: note). Its errors stay errors unless a "
                    "first-read batch (any, fr1 on) judged one of them other than right. A shape of a rule (the condition it "
                    f"fired on) measured below {GOAL_PRECISION:.0%} over >= {SHAPE_MIN_JUDGED} judged findings, or "
                    f"over >= {SHAPE_MIN_JUDGED_FEW} with the upper end of its precision's 95% Wilson interval below "
                    f"{GOAL_PRECISION:.0%} (shapes), is a note at its own severity too; --preview shows it as a warning.",
            "rules": rules,
            "shapes_at": corpus.get("shapes_at", ""),
            "shapes": shape_table(corpus)}


def severity_markdown(corpus: dict) -> str:
    """The per-rule table of docs/lint.md ("Severity earned by measurement"), from severity_table: each rule's
    first-read count and precision, and what `ddpdoctor lint` shows by default and under --preview.
    tests/test_lint_issue25.py checks that docs/lint.md holds exactly this text between its severity-table markers."""
    table = severity_table(corpus)
    lines = ["| rule | judged at first read | batches | right | wrong | debatable | false errors | precision (strict) "
             "| by default | --preview |", "|---|---|---|---|---|---|---|---|---|---|"]
    for rule, r in table["rules"].items():
        if rule in ("LINT090", "LINT091"):
            shown = preview = "own severity (a file that cannot be read is always shown)"
        elif r["earns"] == "warning":
            shown = preview = "own severity"
        elif r["earns"] == "preview":
            shown, preview = f"notes ({r['judged']} judged, needs {GOAL_JUDGED})", "own severity"
        else:
            shown, preview = f"notes (needs {GOAL_PRECISION:.0%})", "own severity"
        if rule not in ("LINT090", "LINT091") and r["earns"] != "warning" and not r["false_errors"]:
            shown += "; errors stay errors"
            preview += "; errors stay errors" if preview.startswith("notes") else ""
        lines.append(f"| {rule} | {r['judged']} | {r['batches']} | {r['tp']} | {r['fp']} | {r['debatable']} | "
                     f"{r['false_errors']} | {r['precision']:.1%} | {shown} | {preview} |")
    sets = severity_batches(corpus)
    lines.append("")
    lines.append(f"Batches counted: every first-read batch from fr{SEVERITY_FROM}, {sets[0]} to {sets[-1]} "
                 f"({len(sets)} batches). Rules not listed had no warning or error judged "
                 "at first read: they report notes by default and their own severity under --preview.")
    lines.append("")
    lines.append(f"Shapes measured below the bar (>= {SHAPE_MIN_JUDGED} judged, < {GOAL_PRECISION:.0%}, or >= "
                 f"{SHAPE_MIN_JUDGED_FEW} judged with a 95% Wilson upper bound < {GOAL_PRECISION:.0%}; shapes of the "
                 f"findings the linter reports at {table['shapes_at'] or '?'}): notes at their own severity, "
                 "warnings under --preview, while the rule's other shapes keep the rule's severity.")
    lines.append("")
    lines.append("| rule | shape | judged | right | wrong | debatable | precision (strict) |")
    lines.append("|---|---|---|---|---|---|---|")
    for rule, shapes in table["shapes"].items():
        for shape, r in shapes.items():
            lines.append(f"| {rule} | {shape.replace('|', '/')} | {r['judged']} | {r['tp']} | {r['fp']} | "
                         f"{r['debatable']} | {r['precision']:.1%} |")
    return "\n".join(lines) + "\n"


def last_batches(corpus: dict, n: int = 3) -> dict:
    """The issue-25 goal: first-read figures over the last n fresh batches."""
    batches = corpus.get("first_read_batches", {})
    # A batch declared (its file list fixed) but not yet judged has no figures: it is not a first read yet.
    names = [name for name, b in batches.items() if "TP" in b][-n:]
    tot = Counter()
    for name in names:
        b = batches[name]
        for k in ("files", "TP", "FP", "debatable", "false_errors", "misses", "misses_caught"):
            tot[k] += b.get(k, 0)
    repos = {f["repo"] for f in corpus["files"] if f.get("set") in names}
    judged = tot["TP"] + tot["FP"] + tot["debatable"]
    return {"batches": names, "files": tot["files"], "repos": len(repos),
            "precision_strict": round(tot["TP"] / judged, 4) if judged else None,
            "TP": tot["TP"], "FP": tot["FP"], "debatable": tot["debatable"], "false_errors": tot["false_errors"],
            "misses": tot["misses"], "misses_caught": tot["misses_caught"],
            "recall_on_misses": round(tot["misses_caught"] / tot["misses"], 4) if tot["misses"] else None}


def print_text(r: dict) -> None:
    print(f"ddpdoctor lint on {r['files_linted']} files from {r['repos']} public repositories "
          f"({r['lint_seconds']} s; {len(r['files_missing'])} listed files missing)")
    print(f"  findings: {r['findings']} ({r['warnings_and_errors']} warnings/errors, {r['notes']} notes)")
    print(f"  warnings/errors judged: TP {r['tp']}, FP {r['fp']}, debatable {r['debatable']}, "
          f"no verdict yet {r['unjudged']}")
    print(f"  precision (strict: debatable and unjudged count against): {r['precision_strict']:.1%}   "
          f"goal >= {GOAL_PRECISION:.0%}")
    print(f"  precision (lenient: TP / (TP + FP)):                     {r['precision_lenient']:.1%}")
    print(f"  false errors: {len(r['false_errors'])}")
    print(f"  recall on recorded misses: {r['misses_caught']}/{r['misses']} ({r['recall_on_misses']:.0%})")
    for k, v in r["miss_classes"].items():
        print(f"    {'ok ' if v['caught'] else 'MISSED'} {k}: {v['caught']}/{v['of']}")
    if len(r["per_set"]) > 1 or r.get("first_reads"):
        print("  per file set (warnings and errors, as linted now):")
        for k, c in r["per_set"].items():
            print(f"    {k} ({c['files']} files): " + ", ".join(f"{n} {c[n]}" for n in ("TP", "FP", "debatable", "unjudged")
                                                              if c.get(n)))
    if r.get("first_reads"):
        print("  holdout batches as first read, before the fixes each one prompted:")
        for k, c in r["first_reads"].items():
            if isinstance(c, dict):
                print(f"    {k}: " + ", ".join(f"{n} {v}" for n, v in c.items()))
    print("  per rule (warnings and errors):")
    for rule, c in r["per_rule"].items():
        print(f"    {rule}: " + ", ".join(f"{k} {n}" for k, n in sorted(c.items())))
    for title, rows in (("findings with no verdict yet", r["unjudged_findings"]),
                        ("warnings/errors judged FP or debatable", r["judged_not_tp"]),
                        ("false errors", r["false_errors"])):
        if rows:
            print(f"  {title}:")
            for f in rows:
                extra = f" [{f['verdict']}] {f.get('reason', '')}" if f.get("verdict") else ""
                print(f"    {f['rule']} {f['severity']} {f['repo']}/{f['path']}:{f['line']}{extra}  {f.get('title', '')[:100]}")
    gone = [v for v in r["verdicts_without_finding"] if v["verdict"] == "TP"]
    if gone:
        print("  true positives no longer reported:")
        for v in gone:
            print(f"    {v['rule']} {v['repo']}/{v['path']}:{v['line']}  {v.get('reason', '')}")
    fixed = sum(1 for v in r["verdicts_without_finding"] if v["verdict"] != "TP")
    print(f"  FP/debatable verdicts whose finding is gone (fixed): {fixed}")
    print("PASS" if r["goals_met"] else "FAIL")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", nargs="?", help="local copy laid out as DIR/<owner>__<repo>/<path>")
    ap.add_argument("--write-severity", action="store_true",
                    help="write ddpdoctor/data/lint_severity.json from the corpus's first-read verdicts (no DIR needed)")
    ap.add_argument("--first-reads", action="store_true", help="print the first-read figures per batch and exit")
    ap.add_argument("--severity-markdown", action="store_true",
                    help="print the per-rule severity table of docs/lint.md (from the first-read verdicts) and exit")
    ap.add_argument("--corpus", default=os.path.join(HERE, "lint_corpus.json"))
    ap.add_argument("--tolerance", type=int, default=2, help="line distance for matching verdicts (default 2)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args(argv)
    if args.severity_markdown:
        print(severity_markdown(load_corpus(args.corpus)), end="")
        return 0
    if args.write_severity or args.first_reads:
        corpus = load_corpus(args.corpus)
        if args.write_severity:
            out = os.path.join(os.path.dirname(HERE), "ddpdoctor", "data", "lint_severity.json")
            with open(out, "w", encoding="utf-8") as fh:
                json.dump(severity_table(corpus), fh, indent=1)
                fh.write("\n")
            print(f"wrote {out}")
        if args.first_reads:
            for name, b in corpus.get("first_read_batches", {}).items():
                print(f"{name}: " + ", ".join(f"{k} {v}" for k, v in b.items()))
            print("last three:", json.dumps(last_batches(corpus)))
        return 0
    if not args.dir or not os.path.isdir(args.dir):
        print(f"lint_precision: error: no such folder: {args.dir}", file=sys.stderr)
        return 2
    try:
        corpus = load_corpus(args.corpus)
    except (OSError, ValueError, json.JSONDecodeError) as exc:
        print(f"lint_precision: error: {exc}", file=sys.stderr)
        return 2
    r = measure(args.dir, corpus, args.tolerance)
    if r["files_linted"] == 0:
        print(f"lint_precision: error: none of the {len(corpus['files'])} corpus files is under {args.dir}",
              file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(r, indent=1))
    else:
        print_text(r)
    return 0 if r["goals_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
