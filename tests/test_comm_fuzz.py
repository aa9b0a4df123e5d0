"""A recorded snapshot may hold any `comm` section (old versions, hand edits, truncation): the comm
checks must never crash on it."""
from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from factory import make_snapshot
from ddpdoctor.model.registry import REGISTRY
from ddpdoctor.pipeline.runner import load_all, run_checks
from test_comm_checks import HEALTHY

scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 10 ** 6), st.floats(allow_nan=True),
                    st.text(max_size=8))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                      max_leaves=8)
KEYS = list(HEALTHY) + ["claims", "missing", "peers"]


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(KEYS), values, max_size=6), st.booleans())
def test_comm_checks_never_crash(overrides, start_healthy):
    load_all(plugins=False)
    sec = copy.deepcopy(HEALTHY) if start_healthy else {}
    sec.update(overrides)
    ids = {s.id for s in REGISTRY.values() if s.family == "comm"}
    findings, _skipped, _ran = run_checks(make_snapshot(comm=sec), only=ids)
    crashed = [f for f in findings if f.id == "DOC001"]
    assert not crashed, crashed[0].evidence.get("traceback")
