"""Shared helpers of the in-process triage class tests: triage one log text and keep the findings a user acts on."""
from __future__ import annotations

from ddpdoctor.triage.api import triage_paths


def found(tmp_path, text, name="job.log"):
    """The error and warning findings triage gives for `text` written to tmp_path/name."""
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return [f for f in triage_paths([str(p)]).sorted_findings() if f.severity in ("error", "warning")]


def failed(findings):
    """The findings that say the job failed: errors, and LOG028's unexplained failure."""
    return [f for f in findings
            if f.severity == "error" or (f.id == "LOG028" and f.title.startswith("unexplained failure"))]
