"""Renderers: a Report in, text out. They choose nothing; the command chose what to report.

Every renderer passes its output through `redact_tree` / `redact_text` as the last step, so a
secret that slipped into a finding's evidence still never reaches the terminal or a file.
"""
from __future__ import annotations

import json
from typing import Optional

from ddpdoctor.model import ERROR, INFO, WARNING, Report, severity_rank
from ddpdoctor.model.redact import redact_text, redact_tree
from ddpdoctor.model.registry import FAMILIES

MARK = {None: "[✓]", INFO: "[✓]", WARNING: "[!]", ERROR: "[✗]"}
IN_PART = "[~]"  # nothing wrong in what ran, but some of the family's checks could not be judged (issue 26)
SEV_LABEL = {ERROR: "error", WARNING: "warning", INFO: "info"}


def render(report: Report, fmt: str, verbose: bool = False) -> str:
    if fmt == "json":
        return render_json(report)
    if fmt == "markdown":
        return render_markdown(report, verbose)
    return render_text(report, verbose)


def render_json(report: Report) -> str:
    return json.dumps(redact_tree(report.to_dict()), indent=2, default=str, ensure_ascii=False)


def _families_in_order(report: Report) -> list:
    fams = list(report.families)
    for f in report.findings:
        if f.family not in fams:
            fams.append(f.family)
    return sorted(fams, key=lambda x: list(FAMILIES).index(x) if x in FAMILIES else 99)


def _indent(text: str, prefix: str) -> str:
    return "\n".join(prefix + line if line.strip() else line for line in text.splitlines())


def held_in_preview(f) -> str:
    """"error" or "warning" when this note is a note only because its rule has not yet earned that severity
    at first read (lint's `preview_severity` evidence, lint.engine.earned_severity), else "". Such notes
    name likely faults, so a report holding them makes no claim of health."""
    held = f.evidence.get("preview_severity") if f.severity == INFO else None
    return held if held in (ERROR, WARNING) else ""


def unjudged_in_part(report: Report) -> dict:
    """{family: checks not judged} for the families judged in part (Report.not_judged, in_part)."""
    out: dict = {}
    for item in report.not_judged():
        if item.get("in_part"):
            out[item["family"]] = out.get(item["family"], 0) + item["checks"]
    return out


def family_mark(fam: str, found: list, in_part: dict) -> tuple:
    """(mark, note) for one family's line: [✗]/[!] by its worst finding; [?] for notes held in preview;
    [~] when nothing at warning or above was found but some of its checks were not judged, with the
    note saying how many, so a family judged in part never reads as a clean [✓]."""
    worst = max((f.severity for f in found), key=severity_rank, default=None)
    missing = in_part.get(fam, 0)
    note = f"{missing} check{'s' if missing != 1 else ''} not judged" if missing else ""
    if worst == INFO and any(held_in_preview(f) for f in found):
        return "[?]", note
    if worst in (None, INFO) and missing:
        return IN_PART, note
    return MARK[worst], note


def not_judged_text(report: Report) -> str:
    """One clause naming the families this report could not judge, grouped by why (Report.not_judged), or ""."""
    by_reason: dict = {}
    order = list(FAMILIES)
    for item in sorted(report.not_judged(), key=lambda x: order.index(x["family"]) if x["family"] in order else 99):
        label = FAMILIES.get(item["family"], item["family"] or "other checks")
        if item.get("in_part"):  # other checks of the family ran: say which part was not judged
            label += f" [{item['checks']} check{'s' if item['checks'] != 1 else ''}]"
        names = by_reason.setdefault(item["reason"], [])
        if label not in names:
            names.append(label)
    groups: dict = {}  # the same families missing for several reasons: one clause, its reasons joined
    for reason, names in by_reason.items():
        groups.setdefault(", ".join(names), []).append(reason)
    return "; ".join(f"{names} ({' and '.join(reasons)})" for names, reasons in groups.items())


def summary_line(report: Report) -> str:
    bad = {f.family for f in report.findings if f.severity in (ERROR, WARNING)}
    e, w, i = report.count(ERROR), report.count(WARNING), report.count(INFO)
    ran = f"{report.checks_run} check{'s' if report.checks_run != 1 else ''} ran, {len(report.skipped)} skipped."
    gaps = not_judged_text(report)
    unjudged = f" Not judged: {gaps}." if gaps else ""
    held = [h for h in (held_in_preview(f) for f in report.findings) if h]
    if not bad and held:  # "No issues found!" is a claim of health: not over notes that name likely faults
        he, hw = held.count("error"), held.count("warning")
        shown = " and ".join(x for x in (f"{he} error{'s' if he != 1 else ''}" if he else "",
                                          f"{hw} warning{'s' if hw != 1 else ''}" if hw else "") if x)
        return (f"Nothing at warning or above by default, which is not a clean bill: {len(held)} of the {i} "
                f"note{'s' if i != 1 else ''} come from rules not yet measured right often enough to warn "
                f"(at their own severity: {shown}; docs/lint.md gives each rule's figures). {ran}{unjudged}")
    if not bad:
        tail = f" ({i} note{'s' if i != 1 else ''})" if i else ""
        if gaps:  # "No issues found!" is a claim of health: only where nothing material went unjudged
            return f"No problems in what was judged{tail}. {ran}{unjudged}"
        return f"No issues found!{tail} {ran}"
    n = len(bad)
    return (f"Doctor found issues in {n} categor{'y' if n == 1 else 'ies'}: {e} error{'s' if e != 1 else ''}, "
            f"{w} warning{'s' if w != 1 else ''}, {i} note{'s' if i != 1 else ''}. {ran}{unjudged}")


def render_text(report: Report, verbose: bool = False) -> str:
    lines = []
    by_family: dict = {}
    for f in report.sorted_findings():
        by_family.setdefault(f.family, []).append(f)
    in_part = unjudged_in_part(report)
    for fam in _families_in_order(report):
        found = by_family.get(fam, [])
        label = FAMILIES.get(fam, fam)
        mark, note = family_mark(fam, found, in_part)
        parts = [f"{len(found)} finding{'s' if len(found) != 1 else ''}"] if found else []
        parts += [note] if note else []
        count = f" ({', '.join(parts)})" if parts else ""
        lines.append(f"{mark} {label}{count}")
        for f in found:
            lines.append(f"    {SEV_LABEL[f.severity]} {f.id} {f.name}: {f.title}")
            if f.detail and (verbose or f.severity != INFO):
                lines.append(_indent(f.detail, "        "))
            if f.fix:
                lines.append("        fix:")
                lines.append(_indent(f.fix, "          "))
            if verbose and f.subjects:
                lines.append(f"        subjects: {', '.join(f.subjects)}")
            if verbose and f.evidence:
                for k, v in f.evidence.items():
                    lines.append(f"        evidence {k}: {_short(v)}")
    if report.extra.get("text_sections"):
        lines.append("")
        lines.extend(report.extra["text_sections"])
    if verbose and report.skipped:
        lines.append("")
        lines.append("Skipped:")
        by_reason: dict = {}  # one line per reason: 18 GPU checks skipped for "no driver" is one fact
        for s in report.skipped:
            by_reason.setdefault(s.reason, []).append(s.id)
        for reason, ids in by_reason.items():
            lines.append(f"    {', '.join(ids)}: {reason}")
    lines.append("")
    lines.append(summary_line(report))
    if not verbose and report.findings:
        lines.append("Run `ddpdoctor explain ID` for the why behind a finding, or add -v for evidence.")
    return redact_text("\n".join(lines))


def _short(value, limit: int = 300) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + "…"


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(report: Report, verbose: bool = False, snapshot: Optional[dict] = None) -> str:
    """Fit to paste into a GitHub issue: a summary table, findings, then the snapshot folded away."""
    from ddpdoctor import __version__

    out = [f"## ddpdoctor {report.command} report", "",
           f"ddpdoctor {__version__}: **{summary_line(report)}**", ""]
    by_family: dict = {}
    for f in report.sorted_findings():
        by_family.setdefault(f.family, []).append(f)
    out += ["| | Category | Findings |", "|---|---|---|"]
    in_part = unjudged_in_part(report)
    for fam in _families_in_order(report):
        found = by_family.get(fam, [])
        mark, note = family_mark(fam, found, in_part)
        out.append(f"| {mark} | {FAMILIES.get(fam, fam)} | {len(found)}{f' ({note})' if note else ''} |")
    out.append("")
    if report.findings:
        out += ["### Findings", ""]
        for f in report.sorted_findings():
            out.append(f"#### {SEV_LABEL[f.severity]} `{f.id}` {f.name}: {_md_escape(f.title)}")
            out.append("")
            if f.detail:
                out += [f.detail, ""]
            if f.fix:
                out += ["Fix:", "", "```sh", f.fix, "```", ""]
            if f.subjects:
                out += ["Subjects: " + ", ".join(f"`{s}`" for s in f.subjects), ""]
            if f.evidence:
                out += ["<details><summary>Evidence</summary>", "", "```json",
                        json.dumps(f.evidence, indent=2, default=str, ensure_ascii=False), "```", "", "</details>", ""]
    if report.extra.get("text_sections"):
        out += ["```", *report.extra["text_sections"], "```", ""]
    if report.skipped:
        out += ["<details><summary>Skipped checks</summary>", ""]
        out += [f"- `{s.id}`: {s.reason}" for s in report.skipped]
        out += ["", "</details>", ""]
    snap = snapshot if snapshot is not None else report.snapshot_dict()
    if snap is not None:
        out += ["<details><summary>Snapshot (secrets redacted)</summary>", "", "```json",
                json.dumps(snap, indent=2, sort_keys=True, default=str, ensure_ascii=False), "```", "", "</details>", ""]
    return redact_text("\n".join(out))


def render_checks_markdown(specs: list) -> str:
    """docs/checks.md, generated from the check docstrings (`ddpdoctor checks --format markdown`)."""
    out = ["# ddpdoctor checks", "",
           "Generated by `ddpdoctor checks --format markdown` from each check's docstring. Do not edit by hand.", "",
           "| ID | Name | Family | Catalogue | Summary |", "|---|---|---|---|---|"]
    for s in specs:
        out.append(f"| [{s.id}](#{s.id.lower()}-{s.slug}) | {s.slug} | {s.family} | {', '.join(s.catalogue)} | "
                   f"{_md_escape(s.summary)} |")
    out.append("")
    for s in specs:
        out.append(f"## {s.id} {s.slug}")
        out.append("")
        parts = s.sections()
        out.append(parts.get("summary", ""))
        out.append("")
        meta = [f"Family: {s.family}"]
        if s.catalogue:
            meta.append("catalogue: " + ", ".join(s.catalogue))
        if s.needs:
            meta.append("needs: " + ", ".join(s.needs))
        out.append("*" + "; ".join(meta) + "*")
        out.append("")
        for heading in ("What it checks", "Why it matters", "Example", "Fix"):
            if parts.get(heading):
                out += [f"**{heading}**", "", parts[heading], ""]
    out += catalogue_sizes_markdown()
    return "\n".join(out).rstrip() + "\n"


def catalogue_sizes_markdown() -> list:
    """The knowledge catalogues (ddpdoctor/data/*.json): entries per source repository, with the commit
    each was read at."""
    from ddpdoctor.facts import catalogue

    names = catalogue.names()
    if not names:
        return []
    out = ["## Catalogues", "",
           "Knowledge read from other projects' sources, one entry per message, setting or code, each with the "
           "repository, path and commit it was read from (`ddpdoctor/data/`; the mining scripts are in `tools/`).", ""]
    for name in names:
        sizes = catalogue.size_by_source(name)
        sources = catalogue.header(name).get("sources") or {}
        out += [f"### {name} ({sum(sizes.values())} entries)", "", "| Source | Entries | Read at |", "|---|---|---|"]
        for repo, n in sorted(sizes.items(), key=lambda kv: (-kv[1], kv[0])):
            commit = str((sources.get(repo) or {}).get("commit", ""))
            out.append(f"| {repo} | {n} | {_md_escape(commit[:40])} |")
        out.append("")
    return out


def render_explain(spec) -> str:
    parts = spec.sections()
    lines = [f"{spec.id} {spec.slug} ({spec.family})", "", parts.get("summary", "")]
    if spec.catalogue:
        lines += ["", "Catalogue: " + ", ".join(spec.catalogue)]
    for heading in ("What it checks", "Why it matters", "Example", "Fix"):
        if parts.get(heading):
            lines += ["", heading, _indent(parts[heading], "    ")]
    return "\n".join(lines)
