"""`ddpdoctor lint`: static analysis of training scripts for DDP mistakes, before anything runs.

The scripts are parsed with `ast` and never imported or executed. `analysis` walks each file once
and indexes calls (with imports and aliases resolved), scopes and their call graph, env
assignments, loops and `with` blocks, each call with the context it runs in (module level, under
the `__main__` guard, on rank 0 only). The rules in `rules/` are registered like checks
(`kind="rule"`, family "lint") and only read those indexes.
"""
from __future__ import annotations

__all__ = ["lint_paths", "lint_section", "lint_source"]


def __getattr__(name: str):
    if name in ("lint_paths", "lint_section"):
        from ddpdoctor.lint import api

        return getattr(api, name)
    if name == "lint_source":
        from ddpdoctor.lint.engine import lint_source

        return lint_source
    raise AttributeError(name)
