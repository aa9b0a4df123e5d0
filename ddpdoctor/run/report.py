"""The report of `ddpdoctor run`: findings of one severity put what the JOB did before what its ENVIRONMENT risks.

design.md's report contract says root cause first. In a run report two kinds of finding meet:
  - what the job did, observed while it ran: the ranks' records (family "run": stalls, deaths, RUN025 "the launch
    ran one process", stragglers) and, where no record explains a failure, the job's own output read by triage's rules;
  - what the environment risks, from the preflight each rank ran at start (family "preflight": ENV/NET/SET/... checks
    such as ENV002 "MASTER_PORT inside the ephemeral range").
A risk may explain nothing that happened; a thing that happened is the job's problem. So within one severity the
observed findings come first, then the risks; severity still orders first (an ERROR risk before a WARNING event),
and within a kind the order stays the usual one (ID, subjects).
"""
from __future__ import annotations

from ..model import Finding, Report, severity_rank

# families whose findings are risks of the environment, not something the job was seen to do
RISK_FAMILIES = frozenset({"preflight"})


def origin(f: Finding) -> int:
    """0 for what the job did (its records, its own output), 1 for what the environment risks."""
    return 1 if f.family in RISK_FAMILIES else 0


class RunReport(Report):
    """A Report whose findings, within one severity, put what the job did before what the environment risks."""

    def sorted_findings(self) -> list:
        return sorted(self.findings, key=lambda f: (-severity_rank(f.severity), origin(f), f.id, tuple(f.subjects)))
