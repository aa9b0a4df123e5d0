"""Round-6 classes of issue 24 (triage, 2026-12-05): trigger and quiet cases whose assertions can fail. Fixtures in
fixtures/triage/rules/ were written from the formats (no logs copied)."""
from __future__ import annotations

import os

from ddpdoctor.triage.api import triage_paths

RULES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "triage", "rules")


def _found(name):
    return [f for f in triage_paths([os.path.join(RULES, name + ".log")]).sorted_findings()
            if f.severity in ("error", "warning")]


def test_store_reset_title_names_the_rank_its_prefix_gives():
    """torchrun's '[rankN]:' prefix on c10d's TCPStore 'recvValue failed ...: Connection reset by peer' says which rank
    lost the store: LOG008's title names it (round-5 note 3: it said 'a process')."""
    f = _found("LOG008_trigger_store_reset_names_prefixed_rank")
    assert f and f[0].id == "LOG008" and f[0].title.startswith("rank 3 lost its connection"), [(x.id, x.title) for x in f]


def test_store_reset_without_a_rank_prefix_names_no_rank():
    """The quiet side: the same line with no prefix names no rank; the title must not invent one."""
    f = _found("LOG008_trigger_tcpstore_recvvalue_reset_in_connect")
    assert f and f[0].id == "LOG008" and f[0].title.startswith("a process lost"), [(x.id, x.title) for x in f]
