"""Findings of `ddpdoctor run` as text, the way they are printed while the job runs."""
from __future__ import annotations


def render_findings(findings: list, headline: str, sec: dict) -> str:
    from ..inprocess.preflight import MARK
    from ..model.redact import redact_text

    lines = [f"{headline}: {len(findings)} finding(s)"]
    for f in findings:
        lines.append(f"  {MARK[f.severity]} {f.severity} {f.id} {f.name}: {f.title}")
        for ln in (f.detail or "").splitlines():
            lines.append(f"      {ln}")
        fix = (f.fix or "").strip("\n").splitlines()
        if len(fix) == 1:
            lines.append(f"      fix: {fix[0]}")
        elif fix:  # a block to paste: every line indented under the finding, as the report's text renderer does
            lines.append("      fix:")
            lines.extend(f"        {ln}" for ln in fix)
    if not findings:
        for r in sec.get("ranks") or []:
            uf = r.get("user_frame") or {}
            lines.append(f"  rank {r.get('rank')}: {r.get('doing')} at {uf.get('file')}:{uf.get('line')}")
    return redact_text("\n".join(lines))
