"""The layer rule, enforced: every import in the package (module-level and inside functions) points
down the layer order written in ddpdoctor/__init__.py's docstring, and no modules form a cycle."""
from __future__ import annotations

import ast
import functools
import pathlib
import re

import ddpdoctor

PKG = pathlib.Path(ddpdoctor.__file__).parent


def layers() -> list:
    """[(layer name, [module prefixes])], top first, parsed from the package docstring."""
    out = []
    for line in (ddpdoctor.__doc__ or "").splitlines():
        m = re.match(r"^    ([a-z]+)\s+(ddpdoctor\S*(?:\s+ddpdoctor\S*)*)\s*$", line)
        if m:
            out.append((m.group(1), m.group(2).split()))
            continue
        more = re.match(r"^ {11,}(ddpdoctor\S*(?:\s+ddpdoctor\S*)*)\s*$", line)
        if more and out:  # a continuation line of the layer above
            out[-1][1].extend(more.group(1).split())
    return out


def modules() -> dict:
    """module name -> path, for every .py file in the package."""
    out = {}
    for path in PKG.rglob("*.py"):
        parts = path.relative_to(PKG.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def import_nodes(tree: ast.AST):
    """Every Import and ImportFrom statement in `tree`, nested ones included. Imports are statements, so only the
    statement lists are walked (body, orelse, finalbody, handlers, match cases), not every expression node as
    ast.walk does: the same statements (round 17: test_every_ddpdoctor_import_exists_in_this_checkout walked 777k
    nodes of 555 files, most of its ~6 s)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
            continue
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            block = getattr(node, field, None)
            if isinstance(block, list):
                todo.extend(reversed(block))


@functools.lru_cache(maxsize=None)
def file_imports(path: pathlib.Path) -> tuple:
    """The import statements of one file, parsed once per test process (three tests here read the package's);
    None where the file does not parse (lint fixtures are broken on purpose)."""
    try:
        return tuple(import_nodes(ast.parse(path.read_text(encoding="utf-8"))))
    except SyntaxError:
        return None


def imports(mods: dict) -> dict:
    """module -> set of package modules it imports (anywhere in the file)."""
    def known(name: str):
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for mod, path in mods.items():
        is_pkg = path.name == "__init__.py"
        here = mod if is_pkg else mod.rpartition(".")[0]
        deps = set()
        for node in file_imports(path):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here.split(".")
                    base = base[: len(base) - node.level + 1]
                    pkg = ".".join(base + ([node.module] if node.module else []))
                else:
                    pkg = node.module or ""
                targets = [f"{pkg}.{a.name}" for a in node.names]
            else:
                continue
            for t in targets:
                k = known(t)
                if k and k != mod:
                    deps.add(k)
        graph[mod] = deps
    return graph


def layer_of(mod: str, table: list) -> tuple:
    """(rank, layer name, matched prefix); rank 0 is the top. The longest matching prefix wins;
    the bare root `ddpdoctor` matches only the package root itself."""
    best = None
    for rank, (name, prefixes) in enumerate(table):
        for p in prefixes:
            hit = mod == p or (p != "ddpdoctor" and mod.startswith(p + "."))
            if hit and (best is None or len(p) > len(best[2])):
                best = (rank, name, p)
    return best


def family_of(mod: str):
    """The family folder/module of a check module: ddpdoctor.checks.gpu.topology -> 'gpu'."""
    for root in ("ddpdoctor.checks.", "ddpdoctor.lint.rules"):
        if mod.startswith(root):
            return root + mod[len(root):].split(".")[0] if root.endswith(".") else root
    return None


_VIOLATIONS: list = []


def violations() -> tuple:
    """(upward imports, cycles), computed once per session."""
    if not _VIOLATIONS:
        _VIOLATIONS.append(_violations())
    return _VIOLATIONS[0]


def _violations() -> tuple:
    table = layers()
    mods = modules()
    graph = imports(mods)
    up = []
    for mod, deps in sorted(graph.items()):
        me = layer_of(mod, table)
        for dep in sorted(deps):
            it = layer_of(dep, table)
            if me is None or it is None:
                up.append(f"{mod} -> {dep}: module not in any layer")
            elif it[0] < me[0]:
                up.append(f"{mod} ({me[1]}) -> {dep} ({it[1]}): upward")
            elif me[1] == "checks" and it[1] == "gather":
                up.append(f"{mod} -> {dep}: a check reads a gatherer; move the helper into facts/")
            elif me[1] == "checks" and it[1] == "checks" and family_of(mod) != family_of(dep):
                up.append(f"{mod} -> {dep}: one check family imports another; share it through facts/")
    # cycles: Tarjan's strongly connected components
    index, low, stack, on, sccs = {}, {}, [], set(), []

    def strong(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(sorted(comp))

    import sys
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 10000))
    try:
        for v in sorted(graph):
            if v not in index:
                strong(v)
    finally:
        sys.setrecursionlimit(old)
    return up, sccs


def test_layer_order_is_declared():
    names = [n for n, _ in layers()]
    assert names == ["cli", "commands", "pipeline", "checks", "gather", "facts", "model"]


def test_every_module_has_a_layer():
    table = layers()
    assert [m for m in modules() if layer_of(m, table) is None] == []


def test_no_upward_imports():
    up, _ = violations()
    assert up == []


def test_no_import_cycles():
    _, cycles = violations()
    assert cycles == []


def test_the_walker_sees_function_level_imports_and_cycles(tmp_path, monkeypatch):
    """The test itself can fail: a function-level upward import and a two-module cycle are caught."""
    mods = {"ddpdoctor.model.x": tmp_path / "x.py", "ddpdoctor.cli": tmp_path / "c.py"}
    (tmp_path / "x.py").write_text("def f():\n    from ddpdoctor.cli import main\n")
    (tmp_path / "c.py").write_text("from ddpdoctor.model import x\n")
    graph = imports(mods)
    assert graph["ddpdoctor.model.x"] == {"ddpdoctor.cli"}
    assert layer_of("ddpdoctor.model.x", layers())[1] == "model"
    assert layer_of("ddpdoctor.cli", layers())[1] == "cli"


_BOUND: dict = {}


def _bound_names(path: pathlib.Path, mods: dict) -> set:
    """Names a module binds at top level (what `from module import name` can take), plus __all__.
    A public alias module (ddpdoctor/preflight.py...) binds what its target binds."""
    if path not in _BOUND:
        _BOUND[path] = _read_bound_names(path, mods)
    return _BOUND[path]


def _read_bound_names(path: pathlib.Path, mods: dict) -> set:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set = {"__name__", "__doc__", "__file__"}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and any(a.name == "__name__" for a in node.names) \
                and node.module in mods:
            names |= _bound_names(mods[node.module], mods)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        names.add(n.id)
                if isinstance(t, ast.Name) and t.id == "__all__" and isinstance(node.value, (ast.List, ast.Tuple)):
                    names |= {e.value for e in node.value.elts if isinstance(e, ast.Constant)}
    return names


def test_every_ddpdoctor_import_exists_in_this_checkout():
    """An import of a module that moved away must fail here, not resolve silently elsewhere (an
    editable install of another checkout would otherwise serve its old copy)."""
    mods = modules()
    root = PKG.parent
    files = [p for d in ("ddpdoctor", "tests", "benchmarks", "fixtures/scripts") for p in (root / d).rglob("*.py")]
    bad = []
    for path in files:
        if PKG not in path.parents and "ddpdoctor" not in path.read_text(encoding="utf-8"):
            continue  # no absolute import of the package without its name (the package's files: parsed once, cached)
        found = file_imports(path)
        if found is None:
            continue  # lint fixtures are broken on purpose
        for node in found:
            if isinstance(node, ast.Import):
                bad += [f"{path.relative_to(root)}:{node.lineno} import {a.name}" for a in node.names
                        if a.name.split(".")[0] == "ddpdoctor" and a.name not in mods]
            elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "ddpdoctor":
                if node.module not in mods:
                    bad.append(f"{path.relative_to(root)}:{node.lineno} from {node.module}")
                    continue
                bound = _bound_names(mods[node.module], mods)
                bad += [f"{path.relative_to(root)}:{node.lineno} from {node.module} import {a.name}" for a in node.names
                        if a.name != "*" and f"{node.module}.{a.name}" not in mods and a.name not in bound]
    assert bad == []
