"""SARIF 2.1.0 output, so GitHub code scanning shows lint findings on the pull request.

One run, tool `ddpdoctor`, one reporting descriptor per selected rule (its docstring as help), one
result per finding with a physical location: the path relative to the current directory (GitHub
resolves it against the repository root) and the 1-based line and column.
"""
from __future__ import annotations

import os
from urllib.parse import quote
from typing import Iterable, List, Optional

from ddpdoctor.model import Report
from ddpdoctor.model.redact import redact_tree
from ddpdoctor.model.registry import REGISTRY, Spec

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
LEVEL = {"error": "error", "warning": "warning", "info": "note"}


def _uri(path: str) -> str:
    """A relative URI with forward slashes when the file is under the current directory."""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive on Windows
        rel = path
    if rel.startswith(".."):
        return "file://" + quote(os.path.abspath(path).replace(os.sep, "/").encode("utf-8", "replace"), safe="/:")
    return quote(rel.replace(os.sep, "/").encode("utf-8", "replace"), safe="/")


def _descriptor(spec: Spec) -> dict:
    parts = spec.sections()
    full = " ".join(parts.get("What it checks", "").split()) or spec.summary
    help_text = "\n\n".join(f"{h}\n{parts[h]}" for h in ("Why it matters", "Example", "Fix") if parts.get(h))
    md = "\n\n".join(f"**{h}**\n\n{parts[h]}" if h != "Example" else f"**{h}**\n\n```python\n{parts[h]}\n```"
                     for h in ("Why it matters", "Example", "Fix") if parts.get(h))
    level = "error" if spec.id in ("LINT001", "LINT004", "LINT007", "LINT090") else \
        ("note" if spec.id in ("LINT006", "LINT010", "LINT014") else "warning")
    return {
        "id": spec.id,
        "name": "".join(w.capitalize() for w in spec.slug.split("-")),
        "shortDescription": {"text": spec.summary},
        "fullDescription": {"text": full},
        "help": {"text": help_text or spec.summary, "markdown": md or spec.summary},
        "defaultConfiguration": {"level": level},
        "properties": {"tags": ["ddp", *spec.catalogue], "slug": spec.slug, "catalogue": list(spec.catalogue)},
    }


def to_sarif(report: Report, specs: Optional[Iterable[Spec]] = None) -> dict:
    """The report as a SARIF 2.1.0 log (a dict; json.dumps it)."""
    from ddpdoctor import __version__

    rule_specs: List[Spec] = sorted({s.id: s for s in (specs or [])}.values(), key=lambda s: s.id)
    known = {s.id for s in rule_specs}
    for f in report.findings:  # findings of rules outside the selection (internal ones) still need a descriptor
        if f.id not in known and f.id in REGISTRY:
            rule_specs.append(REGISTRY[f.id])
            known.add(f.id)
    index = {s.id: i for i, s in enumerate(rule_specs)}
    results = []
    for f in report.sorted_findings():
        ev = f.evidence
        result = {
            "ruleId": f.id,
            "level": LEVEL[f.severity],
            "message": {"text": f.title + (f"\n{f.detail}" if f.detail else "") + (f"\nFix:\n{f.fix}" if f.fix else "")},
            "properties": {"severity": f.severity, "subjects": list(f.subjects)},
        }
        if f.id in index:
            result["ruleIndex"] = index[f.id]
        path = ev.get("path")
        if path:
            loc: dict = {"physicalLocation": {"artifactLocation": {"uri": _uri(str(path))}}}
            line = ev.get("line")
            if isinstance(line, int) and line >= 1:
                region = {"startLine": line}
                col = ev.get("col")
                if isinstance(col, int) and col >= 1:
                    region["startColumn"] = col
                end = ev.get("end_line")
                if isinstance(end, int) and end >= line:
                    region["endLine"] = end
                loc["physicalLocation"]["region"] = region
            result["locations"] = [loc]
        results.append(result)
    doc = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "ddpdoctor", "version": __version__, "semanticVersion": __version__,
                                "rules": [_descriptor(s) for s in rule_specs]}},
            "columnKind": "unicodeCodePoints",
            "results": results,
        }],
    }
    return redact_tree(doc)
