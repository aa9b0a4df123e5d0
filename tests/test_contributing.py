"""CONTRIBUTING.md's worked examples are real code: each section's python blocks are run against
the current API, in order, and the example tests they contain must pass.

A block starts with a comment naming its file. A new module (`ddpdoctor/gather/ports.py`) is
installed under that name for the test; a block for an existing module (`ddpdoctor/checks/sys.py`)
runs in a module of its own, so the real one is never touched. Everything the examples register
(checks, rules, gatherers, modules) is removed afterwards."""
from __future__ import annotations

import inspect
import os
import re
import sys
import types

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECTIONS = ["Add a check", "Add a gatherer (a new fact) and the check that needs it", "Add a lint rule"]


def section_blocks(title: str) -> list:
    with open(os.path.join(ROOT, "CONTRIBUTING.md"), encoding="utf-8") as fh:
        text = fh.read()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return re.findall(r"```python\n(.*?)```", text[start:end if end > 0 else None], re.S)


def file_of(block: str) -> str:
    first = block.splitlines()[0]
    assert first.startswith("# ") and first.endswith(".py"), f"a block must start with '# path.py': {first!r}"
    return first[2:].strip()


@pytest.fixture
def clean_registry():
    from ddpdoctor import gather
    from ddpdoctor.model import registry
    from ddpdoctor.pipeline.runner import load_all, load_lint_rules

    # Load every built-in first, so that only what the examples add is removed afterwards.
    load_all(plugins=False)
    load_lint_rules()
    gather.sections_for("check")
    specs, slugs, gatherers, modules = set(registry.REGISTRY), set(registry._SLUGS), set(gather.GATHERERS), set(sys.modules)
    yield
    for key in set(registry.REGISTRY) - specs:
        del registry.REGISTRY[key]
    for key in set(registry._SLUGS) - slugs:
        del registry._SLUGS[key]
    for key in set(gather.GATHERERS) - gatherers:
        del gather.GATHERERS[key]
    for key in set(sys.modules) - modules:
        if key.startswith("contributing_") or key in _installed:
            del sys.modules[key]
    _installed.clear()


_installed: set = set()


def load_block(block: str, n: int) -> types.ModuleType:
    path = file_of(block)
    dotted = path[:-3].replace("/", ".")
    exists = os.path.exists(os.path.join(ROOT, path))
    name = f"contributing_{n}" if exists or path.startswith("tests/") else dotted
    module = types.ModuleType(name)
    module.__file__ = os.path.join(ROOT, path)
    sys.modules[name] = module
    _installed.add(name)
    exec(compile(block, f"CONTRIBUTING.md:{path}", "exec"), module.__dict__)
    return module


def run_tests(module: types.ModuleType, tmp_path) -> list:
    ran = []
    for name, fn in vars(module).items():
        if name.startswith("test_") and callable(fn):
            params = inspect.signature(fn).parameters
            kwargs = {"tmp_path": tmp_path / name} if "tmp_path" in params else {}
            if kwargs:
                kwargs["tmp_path"].mkdir()
            fn(**kwargs)
            ran.append(name)
    return ran


@pytest.mark.parametrize("title", SECTIONS)
def test_the_worked_example_runs(title, clean_registry, tmp_path):
    blocks = section_blocks(title)
    assert blocks, f"no python block under '## {title}'"
    ran = []
    for n, block in enumerate(blocks):
        module = load_block(block, n)
        if file_of(block).startswith("tests/"):
            ran += run_tests(module, tmp_path)
    assert len(ran) >= 2, f"'{title}' must show a test that triggers the example and one that does not: {ran}"


def test_the_examples_are_documented_like_real_checks(clean_registry, tmp_path):
    from ddpdoctor.model.registry import REGISTRY, parse_doc

    for n, title in enumerate(SECTIONS):
        for m, block in enumerate(section_blocks(title)):
            if not file_of(block).startswith("tests/"):
                load_block(block, 100 * n + m)
    examples = [s for s in REGISTRY.values() if s.id.endswith(("901",))]
    assert sorted(s.id for s in examples) == ["LINT901", "NET901", "SYS901"]
    for spec in examples:
        parts = parse_doc(spec.doc)
        for heading in ("What it checks", "Why it matters", "Example", "Fix"):
            assert parts.get(heading), (spec.id, heading)
