"""The reference that tests/test_core.py compares `shapes.shape_error` with: shape_error as it was written
before the fast walk (each declared pattern walked on its own, every value's path built). A test oracle, so it
lives with the tests, not in the product (moved here from ddpdoctor/pipeline/shapes.py, unchanged)."""
from __future__ import annotations

from ddpdoctor.gather import schema
from ddpdoctor.pipeline.shapes import _is, _message, _steps, _values, _with_common


def shape_error_walk(sections: dict) -> str:
    """The first field of a known section with the wrong JSON type, as one line; "" when all fit: each
    pattern walked in turn, every value's path built."""
    declared, required, nullable_values = schema()
    for pattern, kind in _with_common(declared).items():
        section, _, rest = pattern.partition(".")
        sec = sections.get(section)
        if not isinstance(sec, dict):
            continue
        for path, value, nullable in _values(sec, _steps(rest), section, pattern in required):
            if value is None and (nullable or pattern in nullable_values):
                continue
            if not _is(value, kind):
                return _message(path, value, kind)
    return ""
