"""What the triage class tests of rounds 20-21 ask of one log: its loud findings (errors and warnings, root cause
first), from a file written into the test's tmp_path. One helper for every such file (each carried its own copy)."""
from ddpdoctor.triage.api import triage_paths


def loud_findings(tmp_path, text, name="job.log"):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return [f for f in triage_paths([str(p)]).sorted_findings() if f.severity in ("error", "warning")]


def brief(findings):
    """(id, severity, title) of each finding: what an assertion's message shows."""
    return [(x.id, x.severity, x.title) for x in findings]
