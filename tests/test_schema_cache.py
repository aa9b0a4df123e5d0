"""gather.schema() is built once and shared (a snapshot load calls it): the same read-only objects while the
registered gatherers are the same, equal to a fresh build, and rebuilt when a gatherer is registered or removed."""
from __future__ import annotations

import pytest

from ddpdoctor import gather


def _fresh() -> tuple:
    """What schema() gives, built here from the registered gatherers without its cache."""
    fields, required, nullable = {}, set(), set()
    order = gather.ORDER
    for name in sorted(gather.GATHERERS, key=lambda n: (order.index(n) if n in order else len(order), n)):
        g = gather.GATHERERS[name]
        fields.update({f"{name}.{k}": v for k, v in g.fields.items()})
        required |= {f"{name}.{k}" for k in g.required}
        nullable |= {f"{name}.{k}" for k in g.nullable}
    for pattern, kind in gather.inprocess_fields().items():  # the in-process sections (runtime, runtime_*)
        fields.setdefault(pattern, kind)
    return fields, required, nullable


def test_schema_is_shared_read_only_and_equal_to_a_fresh_build():
    first, second = gather.schema(), gather.schema()
    assert all(a is b for a, b in zip(first, second))  # one build, shared
    fields, required, nullable = first
    want = _fresh()
    assert dict(fields) == want[0] and list(fields) == list(want[0])  # same contents, same order
    assert required == want[1] and nullable == want[2] and len(fields) > 100
    assert isinstance(required, frozenset) and isinstance(nullable, frozenset)
    with pytest.raises(TypeError):
        fields["gpus.new"] = "str"  # shared: nobody may change it


def test_a_gatherer_registered_or_removed_rebuilds_the_schema():
    before = gather.schema()
    try:
        gather.gatherer("schemacachetoy", fields={"x": gather.INT}, required=("x",))(lambda src: {"x": 1})
        after = gather.schema()
        assert after[0] is not before[0] and after[0]["schemacachetoy.x"] == gather.INT
        assert "schemacachetoy.x" in after[1] and "schemacachetoy.x" not in before[0]
    finally:
        gather.GATHERERS.pop("schemacachetoy", None)
    again = gather.schema()
    assert "schemacachetoy.x" not in again[0] and dict(again[0]) == dict(before[0])


def test_the_shape_walks_compiled_patterns_follow_the_schema():
    from ddpdoctor.pipeline import shapes

    declared, required, nullable = gather.schema()
    got = shapes._patterns(declared, required, nullable)
    assert shapes._patterns(declared, required, nullable) is got  # the same schema: compiled once
    # a different schema object (equal contents) compiles anew, to an equal result
    other = shapes._patterns(dict(declared), frozenset(required), frozenset(nullable))
    assert other is not got and [o[0] for o in other[0]] == [o[0] for o in got[0]]
