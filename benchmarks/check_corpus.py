"""Score `ddpdoctor check` on machine and launch cases modelled on real public reports.

benchmarks/check_corpus.json holds the cases, in batches. Each case is one report (its URL), turned into a
snapshot: a base fixture of fixtures/snapshots/ (a vendor-documented machine) or a clean host, the
report's environment variables, and edits of single facts (`gpus.devices[3].compute_mode`). `expect`
names the check(s) that would name the report's root cause (any one of them, at `min_severity` or
worse); `expect_text` (optional: a phrase, or a list of them, case-insensitive) names the pre-registered cause
itself, which the expected finding's title, detail or subjects must carry - so a case is scored twice: by ID (the
figure kept since batch 1) and by cause (`cause named`: an expected ID at the floor that carries the phrase; a case
with no `expect_text` counts as by ID there and is counted apart as "unchecked"); a case that sets torch's version and not numpy's drops the base's numpy (recorded beside the base's
torch, it says nothing of the report's); `must_not` (optional) names wrong answers, any of which at warning or worse fails the case; a case with `expect: []` is a healthy set-up on which check must not warn. The first-read score
of every batch is recorded in the file when the batch is added, before any code changes for it
(`first_read`), so the figures below it measure the tool, not its memory of the cases.

    python benchmarks/check_corpus.py                 # score every batch now, beside its first-read score
    python benchmarks/check_corpus.py --batch 3 -v    # one batch, each case's findings
    python benchmarks/check_corpus.py --record 3      # write batch 3's first-read score (once, before fixing)
    python benchmarks/check_corpus.py --corpus FILE -v  # a held-out set kept outside the repository
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))
CORPUS = os.path.join(HERE, "check_corpus.json")
SEVERITY = {"info": 0, "warning": 1, "error": 2}


def base_snapshot(name: str) -> dict:
    if name == "clean-host":
        from factory import make_snapshot

        return make_snapshot().to_dict()
    with open(os.path.join(ROOT, "fixtures", "snapshots", f"{name}.json"), encoding="utf-8") as fh:
        return json.load(fh)


def set_path(doc: dict, path: str, value) -> None:
    """`gpus.devices[3].compute_mode` = value; [*] applies to every element."""
    parts = re.findall(r"[^.\[\]]+|\[\*?\d*\]", path)
    targets = [doc]
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        nxt = []
        for t in targets:
            if part.startswith("["):
                idx = part[1:-1]
                items = t if idx == "*" else [t[int(idx)]]
                if last:
                    for k in (range(len(t)) if idx == "*" else [int(idx)]):
                        t[k] = copy.deepcopy(value)
                nxt += items
            else:
                if last:
                    t[part] = copy.deepcopy(value)
                else:
                    nxt.append(t.setdefault(part, {} if not parts[i + 1].startswith("[") else []))
        targets = nxt


def snapshot_of(case: dict):
    from ddpdoctor.facts.launch import parse_command, parse_program
    from ddpdoctor.gather.launcher import launcher_from_env
    from ddpdoctor.pipeline.snapshot import Snapshot

    doc = copy.deepcopy(base_snapshot(case.get("base", "clean-host")))
    sections = doc["sections"]
    env = sections.setdefault("env", {"vars": {}, "redacted": []}).setdefault("vars", {})
    for k in case.get("unset", []):
        env.pop(k, None)
    env.update({k: str(v) for k, v in (case.get("env") or {}).items()})
    keep = case.get("keep_gpus")
    if keep is not None and isinstance(sections.get("gpus"), dict):  # a smaller machine of the same model
        g = sections["gpus"]
        g["devices"] = g["devices"][:keep]
        g["pairs"] = [p for p in g.get("pairs") or [] if p["a"] < keep and p["b"] < keep]
        g["count"] = keep
        kept = {d.get("pci_bus_id", "").lower()[-12:] for d in g["devices"]}
        pci = sections.get("pci") or {}
        if isinstance(pci.get("gpus"), dict):  # the machine has these GPUs only, on the bus too
            pci["gpus"] = {b: f for b, f in pci["gpus"].items() if b.lower()[-12:] in kept}
    sections["launcher"] = launcher_from_env(env, case.get("cmdline"))
    # the case's launch command, as `check` run under it reads it from its parent chain (gather.launch); a program
    # started without a launcher (`python train.py ...`) as `ddpdoctor check -- python train.py ...` records it
    cmd = parse_command(case.get("cmdline") or []) or parse_program(case.get("cmdline") or [])
    sections["launch"] = {"commands": [dict(cmd, depth=1)] if cmd else [], "depth_read": 1 if cmd else 0}
    if cmd and cmd.get("program") is None:
        sections["launch"]["commands"][0].pop("program")
    sets = case.get("set") or {}
    if "packages.versions.torch" in sets and "packages.versions.numpy" not in sets:
        # the base's numpy was recorded beside the base's torch: under the case's own torch, a numpy the report
        # does not state is not known (check18: PKG019 would otherwise judge the base's NumPy 2 under a 2019 torch)
        ((sections.get("packages") or {}).get("versions") or {}).pop("numpy", None)
    for path, value in sets.items():
        set_path(sections, path, value)
    return Snapshot.from_dict(doc)


def _carries(finding, phrases: list) -> bool:
    text = " ".join([finding.title, finding.detail or "", " ".join(finding.subjects or ())]).lower()
    return any(p.lower() in text for p in phrases)


def judge_case(case: dict) -> tuple:
    """(passed, findings as (id, severity, title)); passed by ID, as scored since batch 1. cause_of() adds the
    second figure."""
    passed, found, _cause = judge_case_both(case)
    return passed, found


def judge_case_both(case: dict) -> tuple:
    """(passed by ID, findings as (id, severity, title), passed by cause: True/False, or None when the case names
    no `expect_text`)."""
    from ddpdoctor.pipeline.judge import judge

    report = judge(snapshot_of(case))
    found = [(f.id, f.severity, f.title) for f in report.findings]
    floor = SEVERITY[case.get("min_severity", "warning")]
    expect = case.get("expect") or []
    phrases = case.get("expect_text")
    phrases = [phrases] if isinstance(phrases, str) else list(phrases or [])
    cause = None
    if not expect:
        passed = not any(SEVERITY[s] >= 1 for _, s, _ in found)
    else:
        hits = [f for f in report.findings if f.id in expect and SEVERITY[f.severity] >= floor]
        passed = bool(hits)
        if phrases:
            cause = any(_carries(f, phrases) for f in hits)
    # pre-registered wrong answers (briefing, 2026-12-05): a case fails when one of them is reported at warning or worse
    if any(i in (case.get("must_not") or []) and SEVERITY[s] >= 1 for i, s, _ in found):
        passed = False
        cause = False if cause is not None else None
    return passed, found, cause


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=None)
    ap.add_argument("--record", type=int, default=None, help="record this batch's first-read score (refused if set)")
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--corpus", default=CORPUS,
                    help="cases file (default: the repository's); a held-out set kept outside the repository")
    args = ap.parse_args(argv)
    try:
        with open(args.corpus, encoding="utf-8") as fh:
            corpus = json.load(fh)
        batches = corpus["batches"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"check_corpus: cannot read {args.corpus}: {exc}", file=sys.stderr)
        return 2
    from ddpdoctor.pipeline.snapshot import SnapshotError

    total_now = total = total_named = 0
    for batch in batches:
        n = batch["batch"]
        if args.batch is not None and n != args.batch and args.record != n:
            continue
        results = []
        for case in batch["cases"]:
            try:
                ok, found, cause = judge_case_both(case)
            except SnapshotError as exc:  # a case modelled against the schema: scored as failed, said, never a crash
                print(f"  INVALID {case['id']}: {exc}")
                results.append((case, False, [], False))
                continue
            results.append((case, ok, found, cause))
            if args.verbose:
                mark = "PASS" if ok and cause is not False else ("PASS-BY-ID-ONLY" if ok else "FAIL")
                print(f"  {mark} {case['id']}: expect {case.get('expect') or 'no warning'}"
                      + (f" carrying {case['expect_text']!r}" if case.get("expect_text") else "") + "; got "
                      + (", ".join(f"{i}({s[0]})" for i, s, _ in found if s != 'info') or "nothing above info"))
        passed = sum(1 for _, ok, _, _ in results if ok)
        named = sum(1 for _, ok, _, cause in results if ok and cause is not False)
        unchecked = sum(1 for c, _, _, cause in results if cause is None and c.get("expect"))
        first = batch.get("first_read")
        print(f"batch {n}: {len(results)} cases ({batch.get('theme', '')}), now {passed}/{len(results)}"
              + f" (cause named {named}/{len(results)}" + (f", {unchecked} unchecked" if unchecked else "") + ")"
              + (f", first read {first['passed']}/{first['cases']} at {first['commit'][:10]}" if first else
                 ", first read NOT RECORDED")
              + (f" (cause named {first['cause_named']})" if first and "cause_named" in first else ""))
        total_now += passed
        total_named += named
        total += len(results)
        if args.record == n:
            if first:
                print(f"batch {n} already has its first-read score; it is never rewritten", file=sys.stderr)
                return 2
            commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
            batch["first_read"] = {"passed": passed, "cases": len(results), "commit": commit,
                                   "failed": [c["id"] for c, ok, _, _ in results if not ok]}
            if any(c.get("expect_text") for c, _, _, _ in results):
                batch["first_read"]["cause_named"] = f"{named}/{len(results)}"
                batch["first_read"]["by_id_only"] = [c["id"] for c, ok, _, cause in results if ok and cause is False]
            with open(args.corpus, "w", encoding="utf-8") as fh:
                json.dump(corpus, fh, indent=1, ensure_ascii=False)
                fh.write("\n")
            print(f"recorded batch {n}: {passed}/{len(results)} at {commit[:10]}")
    print(f"all batches now: {total_now}/{total} (cause named {total_named}/{total}; a case with no expect_text "
          "counts by ID there)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
