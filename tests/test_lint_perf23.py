"""Issue 25's speed goal, round 23 (lintperf23): the shortcuts taken for speed give the answers of the walks they
replace. Each test compares the fast path with the slow one on the repository's own lint fixtures and the benchmark's
generated files (pure functions over parsed trees; no process is started), and one trigger/quiet pair per shortcut
shows it can tell the cases apart."""
from __future__ import annotations

import ast
import os
import textwrap
from pathlib import Path

import pytest

from ddpdoctor.lint import context
from ddpdoctor.lint.analysis import ModuleIndex
from ddpdoctor.lint.facts import _BUFFER_MARKERS, buffer_marker, index_buffer_marker
from ddpdoctor.lint.names import stmt_nodes
from ddpdoctor.lint.rules import _reach
from bench_modules import load

ROOT = Path(__file__).resolve().parent.parent


def _bench():
    return load("bench_lint")


def _texts(limit: int = 160):
    """Fixture scripts that parse (every fourth one, to keep the test short) and the two generated bench files."""
    files = sorted(p for p in (ROOT / "fixtures" / "lint").rglob("*.py"))[::4][:limit]
    out = []
    for p in files:
        text = p.read_text(encoding="utf-8", errors="replace")
        try:
            out.append((str(p), ast.parse(text), text))
        except (SyntaxError, ValueError, RecursionError):
            continue
    bench = _bench()
    for findings in (False, True):
        text = bench.generate(1200, findings=findings)
        out.append((f"bench-{findings}", ast.parse(text), text))
    return out


TEXTS = _texts()


def test_stmt_nodes_finds_every_statement_ast_walk_finds():
    for name, tree, _text in TEXTS:
        assert {id(n) for n in stmt_nodes(tree)} == {id(n) for n in ast.walk(tree) if isinstance(n, ast.stmt)}, name


def test_stmt_nodes_enters_handlers_and_nested_blocks_but_no_expression():
    tree = ast.parse(textwrap.dedent("""
        try:
            pass
        except OSError:
            class Inner:
                def f(self):
                    return lambda: 1
        f = lambda: [x for x in range(3)]
    """))
    kinds = sorted(type(n).__name__ for n in stmt_nodes(tree))
    assert kinds == ["Assign", "ClassDef", "FunctionDef", "Pass", "Return", "Try"]


def _old_own(fn):
    body = getattr(fn, "body", None)
    stack = list(body) if isinstance(body, list) else []
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))


def test_reach_own_returns_are_those_of_the_full_walk_in_the_same_order():
    for name, tree, _text in TEXTS:
        for fn in [tree] + [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
            old = [n for n in _old_own(fn) if isinstance(n, ast.Return) and n.value is not None]
            new = [n for n in _reach._own(fn) if isinstance(n, ast.Return) and n.value is not None]
            assert new == old, (name, getattr(fn, "name", "<module>"))


def test_reach_own_leaves_out_the_returns_of_nested_functions():
    fn = ast.parse(textwrap.dedent("""
        def outer():
            def inner():
                return 1
            if x:
                return 2
            return 3
    """)).body[0]
    assert [r.value.value for r in _reach._returns(fn)] == [3, 2]


def test_function_of_answers_as_the_scope_walk_for_every_call():
    for name, tree, text in TEXTS:
        index = ModuleIndex(tree, name, text)
        assert index._defined is None  # made on the first question after the walk
        fast = [index.function_of(c.node.func, c.scope) for c in index.calls]
        index._walking = True  # the shortcut is off while the walk runs: every answer from the scopes
        slow = [index.function_of(c.node.func, c.scope) for c in index.calls]
        assert fast == slow, name


def test_function_of_still_finds_a_local_function_a_method_and_a_class_init():
    index = ModuleIndex(ast.parse(textwrap.dedent("""
        import functools
        class Trainer:
            def __init__(self):
                self.step()
            def step(self):
                pass
        def worker(rank):
            len([])
        Trainer()
        worker(0)
        job = functools.partial(worker)
        job(1)
    """)), "t.py")
    got = {c.text: index.function_of(c.node.func, c.scope) for c in index.calls}
    assert index._defined == {"Trainer", "__init__", "step", "worker", "job"}
    assert got["self.step"].qualname == "Trainer.step"
    assert got["worker"].qualname == "worker"
    assert got["job"].qualname == "worker"  # a value of the module (`job = partial(worker)`) names the function
    assert got["Trainer"].qualname == "Trainer.__init__"
    assert got["len"] is None


def _index(text: str) -> ModuleIndex:
    text = textwrap.dedent(text)
    return ModuleIndex(ast.parse(text), "t.py", text)


@pytest.mark.parametrize("marker", _BUFFER_MARKERS)
def test_buffer_marker_found_in_a_file_that_names_it(marker):
    assert index_buffer_marker(_index(f"import torch.nn as nn\nlayer = nn.{marker}(8)\n")) == marker


def test_buffer_marker_none_in_a_file_without_one_and_in_a_docstring_only():
    assert index_buffer_marker(_index("import torch\nx = torch.zeros(2)\n")) is None
    assert index_buffer_marker(_index('"""uses BatchNorm"""\nimport torch\n')) is None  # text only, no identifier


def test_buffer_marker_text_shortcut_agrees_with_the_walk():
    for name, tree, text in TEXTS:
        assert index_buffer_marker(ModuleIndex(tree, name, text)) == buffer_marker(tree), name


def _old_is_context(name: str) -> bool:
    low = name.lower()
    return context._is_config(low) or low.startswith("readme") or low.endswith(".sh") or \
        (low.startswith("requirements") and low.endswith(".txt")) or \
        low in ("setup.py", "setup.cfg", "pyproject.toml", "environment.yml", "environment.yaml", "makefile")


def test_is_context_agrees_with_the_old_test():
    stems = ["", "readme", "README", "Requirements", "requirements-dev", "package", "tsconfig", "setup", "pyproject",
             "environment", "makefile", "Makefile", "train", "packagereadme", "readmepackage", "x.sh"]
    ends = ["", ".json", ".yaml", ".yml", ".sh", ".txt", ".py", ".cfg", ".toml", ".md", ".JSON", ".SH", "-dev.txt"]
    names = [a + b for a in stems for b in ends] + os.listdir(ROOT)
    assert [context._is_context(n) for n in names] == [_old_is_context(n) for n in names]
    assert context._is_context("train.sh") and not context._is_context("train.py")


def test_project_roots_keeps_each_listing_for_read_context(tmp_path):
    (tmp_path / "README.md").write_text("torchrun --nproc-per-node 2 src/train.py\n")
    (tmp_path / "src").mkdir()
    script = tmp_path / "src" / "train.py"
    script.write_text("import torch\n")
    listings: dict = {}
    assert context.project_roots([str(script)], listings) == [str(tmp_path)]
    assert set(listings) == {str(tmp_path / "src"), str(tmp_path)}
    assert "README.md" in listings[str(tmp_path)]
    ctx = context.read_context([str(script)])
    assert ctx is not None and ctx.sources == ["README.md"]
