"""Mine the messages catalogue (ddpdoctor/data/messages.json) from the sources of the projects whose
messages users meet when a distributed job fails.

How the entries were extracted, so that the catalogue can be refreshed when torch or NCCL change:

1. **Extract** every message a source can print, with the file and line it sits on:
   - Python sources (torch's Python side, transformers, accelerate, DeepSpeed, Ray): `ast` walks
     `raise X("...")`, `raise X(f"...")`, `"..." % args`, `"...".format()`, `assert cond, "..."` and the
     logging calls (`logger.error/warning/...`, `warnings.warn`); an f-string's holes become named groups.
   - C and C++ sources (NCCL, SLURM, the kernel excerpts, HIP's copy of the CUDA runtime's error
     strings): the string literal of each printing call (`WARN(...)`, `error(...)`, `pr_err(...)`,
     `return "..."` in an error-string switch); adjacent literals are joined and printf conversions
     (`%d`, `%s`, `%lu`...) become groups.
   - Shared libraries whose source is too big to fetch (torch's C++ in libtorch_cuda.so/libtorch_cpu.so,
     Ray's raylet): `strings` with their offsets; a literal is attributed to the source file whose
     path string (`__FILE__`, which TORCH_CHECK and RAY_LOG embed) sits nearest before it in the same
     read-only section, because a compiler lays a translation unit's literals out together.
2. **Curate**: `RULES` below keeps the messages that say a distributed job failed (or ended, or is
   only warning) and gives each its class, meaning and fix. A rule names the source (repo, a path
   regex) and a regex over the message; every rule must keep at least one message (a rule that keeps
   none means the source changed, and the script says so).
3. **Write** each kept message as an entry: source (repo, path, commit, line), the verbatim `format`,
   the `pattern` derived from it (its first sentence, holes as groups), and `examples`: the format with
   its holes filled, as the line appears in a log (an exception's type before it, NCCL's
   `host:pid:tid [dev] NCCL WARN` prefix, torchrun's `[rankN]:` prefix), plus real excerpts where a rule
   gives them.

Run (paths are where the sources were fetched or unpacked; nothing here downloads):

    python tools/mine_messages.py --root /path/to/sources --out ddpdoctor/data/messages.json

`--root` holds: torch213/ (the installed torch 2.13.0 wheel's torch/ folder), torch214/ (libtorch_cuda.so,
libc10_cuda.so, libc10.so of the 2.14.1 CUDA wheel), NVIDIA+nccl/, deepspeedai+DeepSpeed/,
huggingface+accelerate/, SchedMD+slurm/, ROCm+clr/ (git archives of the fetched snapshots), transformers/
(the installed package), ray/ (the ray wheel, unpacked), kernel/ (excerpts of mm/oom_kill.c read at the
commits named in SOURCES), cpython/ (Lib/argparse.py of the interpreter), tokenizers/ (the tokenizers
extension module). `--candidates FILE` writes every extracted message (kept or not) as JSON lines.
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Dict, Iterable, Iterator, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from tools.messages_rules import RULES, SOURCES  # noqa: E402


@dataclass
class Candidate:
    repo: str
    path: str
    line: Optional[int]
    parts: List[Tuple[str, str]]   # ("lit", text) or ("hole", name)
    how: str                       # raise:ValueError, assert, log:error, warn, c:WARN, strings, ...
    symbol: str = ""
    extra: Dict[str, str] = field(default_factory=dict)
    commit: str = ""

    @property
    def text(self) -> str:
        return "".join(t if k == "lit" else "{" + t + "}" for k, t in self.parts)


# ------------------------------------------------------------------ Python

_LOG_METHODS = {"error": "log:error", "exception": "log:error", "critical": "log:error", "fatal": "log:error",
                "warning": "log:warning", "warn": "log:warning", "info": "log:info"}


def _name_of(node: ast.AST, i: int) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Call):
        return _name_of(node.func, i)
    if isinstance(node, ast.Subscript):
        return _name_of(node.value, i)
    return f"f{i}"


_PCT = re.compile(r"%(?:\([^)]*\))?[-+ #0]*\d*(?:\.\d+)?[hlLqjzt]*[diouxXeEfFgGcrsa%]")
_BRACE = re.compile(r"\{[^{}]*\}")


def _split_fmt(text: str, rx: "re.Pattern", names: List[str]) -> List[Tuple[str, str]]:
    out: List[Tuple[str, str]] = []
    pos = 0
    k = 0
    for m in rx.finditer(text):
        if m.group(0) in ("%%", "{{", "}}"):
            continue
        if m.start() > pos:
            out.append(("lit", text[pos:m.start()]))
        inner = m.group(0)
        name = names[k] if k < len(names) else re.sub(r"\W", "", inner.strip("{}%").split(":")[0]) or f"f{k}"
        out.append(("hole", name))
        k += 1
        pos = m.end()
    if pos < len(text):
        out.append(("lit", text[pos:]))
    return [(kind, t.replace("%%", "%")) if kind == "lit" else (kind, t) for kind, t in out]


def _parts(node: ast.AST, depth: int = 0) -> Optional[List[Tuple[str, str]]]:
    """The literal pieces and holes of a message expression, or None when it is not a message."""
    if depth > 6:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [("lit", node.value)]
    if isinstance(node, ast.JoinedStr):
        out: List[Tuple[str, str]] = []
        for i, v in enumerate(node.values):
            if isinstance(v, ast.Constant):
                out.append(("lit", str(v.value)))
            elif isinstance(v, ast.FormattedValue):
                out.append(("hole", _name_of(v.value, i)))
        return out
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        a, b = _parts(node.left, depth + 1), _parts(node.right, depth + 1)
        if a is None and b is None:
            return None
        return (a or [("hole", _name_of(node.left, 0))]) + (b or [("hole", _name_of(node.right, 1))])
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant) \
            and isinstance(node.left.value, str):
        args = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
        return _split_fmt(node.left.value, _PCT, [_name_of(a, i) for i, a in enumerate(args)])
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format" \
            and isinstance(node.func.value, ast.Constant) and isinstance(node.func.value.value, str):
        names = [_name_of(a, i) for i, a in enumerate(node.args)]
        return _split_fmt(node.func.value.value, _BRACE, names)
    return None


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _scope_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes of one scope (a module's or a function's body), not those of the functions and classes nested in it."""
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, _SCOPES):
            todo.extend(ast.iter_child_nodes(node))


def local_messages(tree: ast.AST) -> Dict[int, Dict[str, List[Tuple[int, str, List[Tuple[str, str]]]]]]:
    """id(scope) -> name -> [(line, "=" or "+=", parts)] in source order: the messages a function builds in a local
    variable before raising or logging it (`msg = f"..."` then `msg += "..."` then `raise ValueError(msg)`, DeepSpeed's
    and transformers' usual shape). Only assignments of a message expression (a literal, an f-string, a %/format
    string, a concatenation holding one) are kept."""
    out: Dict[int, Dict[str, list]] = {}
    scopes = [tree] + [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for scope in scopes:
        table: Dict[str, list] = {}
        for node in _scope_nodes(scope):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                name, op, value = node.targets[0].id, "=", node.value
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                name, op, value = node.target.id, "=", node.value
            elif isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add) and isinstance(node.target, ast.Name):
                name, op, value = node.target.id, "+=", node.value
            else:
                continue
            p = _parts(value)
            if p and any(k == "lit" and t.strip() for k, t in p):
                table.setdefault(name, []).append((node.lineno, op, p))
        for rows in table.values():
            rows.sort(key=lambda r: r[0])
        out[id(scope)] = table
    return out


def _message_args(arg: ast.AST, table: Dict[str, list], line: int) -> List[Tuple[int, List[Tuple[str, str]]]]:
    """(line, parts) of each message ARG can hold: the expression itself when it is one, else, for a local name, each
    assignment of it before LINE, extended by the `+=` pieces between that assignment and LINE (a branch's `msg = "a"`
    / `else: msg = "b"` gives both)."""
    p = _parts(arg)
    if p:
        return [(line, p)]
    if not isinstance(arg, ast.Name) or arg.id not in table:
        return []
    rows = [r for r in table[arg.id] if r[0] < line]
    out = []
    for i, (ln, op, parts) in enumerate(rows):
        if op != "=":
            continue
        text = list(parts)
        for ln2, op2, more in rows[i + 1:]:
            if op2 == "=":
                break
            text += more
        out.append((ln, text))
    return out


def python_messages(root: str, rel_files: Iterable[str], repo: str, path_prefix: str = "") -> Iterator[Candidate]:
    for rel in rel_files:
        full = os.path.join(root, rel)
        try:
            with open(full, encoding="utf-8") as fh:
                tree = ast.parse(fh.read())
        except (OSError, SyntaxError, ValueError):
            continue
        path = path_prefix + rel
        yield from _python_tree_messages(tree, repo, path)


def _python_tree_messages(tree: ast.AST, repo: str, path: str) -> Iterator[Candidate]:
    """The messages of one parsed module (python_messages); a message built in a local variable first is followed
    to its assignments (local_messages), for a raise, a `return XError(msg)`, an assert and a logging call."""
    locals_ = local_messages(tree)
    scope_of: Dict[int, dict] = {}
    for scope in [tree] + [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
        for node in _scope_nodes(scope):
            scope_of[id(node)] = locals_.get(id(scope), {})
    for node in ast.walk(tree):
        table = scope_of.get(id(node), {})
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
            exc = _name_of(node.exc.func, 0)
            for ln, p in _message_args(node.exc.args[0], table, node.lineno):
                yield Candidate(repo, path, ln, p, f"raise:{exc}")
        elif isinstance(node, ast.Return) and isinstance(node.value, ast.Call) and node.value.args \
                and _name_of(node.value.func, 0).lower().endswith(("error", "exception")):
            # `return ValueError(...)`: an error built for a caller to raise
            for ln, p in _message_args(node.value.args[0], table, node.lineno):
                yield Candidate(repo, path, ln, p, f"raise:{_name_of(node.value.func, 0)}")
        elif isinstance(node, ast.FunctionDef) and node.name in ("__str__", "_base_str"):
            for sub in ast.walk(node):   # an exception class's message (Ray's exceptions build them here)
                if isinstance(sub, ast.Return) and sub.value is not None:
                    p = _parts(sub.value)
                    if p and any(k == "lit" and len(t) > 20 for k, t in p):
                        yield Candidate(repo, path, sub.lineno, p, "raise:" + _enclosing_class(tree, node))
                elif isinstance(sub, ast.Assign) and any(isinstance(t, ast.Attribute) and "msg" in t.attr
                                                         for t in sub.targets):
                    p = _parts(sub.value)
                    if p and any(k == "lit" and len(t) > 20 for k, t in p):
                        yield Candidate(repo, path, sub.lineno, p, "raise:" + _enclosing_class(tree, node))
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Attribute) and t.attr in ("base_error_msg",)
                                                  for t in node.targets):
            p = _parts(node.value)
            if p:
                yield Candidate(repo, path, node.lineno, p, "raise:" + _enclosing_class(tree, node))
        elif isinstance(node, ast.Assert) and node.msg is not None:
            for ln, p in _message_args(node.msg, table, node.lineno):
                yield Candidate(repo, path, ln, p, "raise:AssertionError")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            how = _LOG_METHODS.get(node.func.attr)
            if node.func.attr == "warn" and _name_of(node.func.value, 0) == "warnings":
                how = "warn"
            if how:
                first = node.args[0]
                if how.startswith("log:") and isinstance(first, ast.Constant) and isinstance(first.value, str):
                    # logging formats lazily: logger.error("... %s ...", value)
                    p = _split_fmt(first.value, _PCT, [_name_of(a, i) for i, a in enumerate(node.args[1:])])
                    if p:
                        yield Candidate(repo, path, node.lineno, p, how)
                else:
                    for ln, p in _message_args(first, table, node.lineno):
                        yield Candidate(repo, path, ln, p, how)


def python_exception_classes(root: str, rel_files: Iterable[str], repo: str, path_prefix: str = "") -> Iterator[Candidate]:
    """The exception classes a module defines (`class RendezvousTimeoutError(RendezvousError)`): some are raised with no
    message, so a log shows only the class name ("RendezvousTimeoutError: "). The text is the name."""
    for rel in rel_files:
        try:
            with open(os.path.join(root, rel), encoding="utf-8") as fh:
                tree = ast.parse(fh.read())
        except (OSError, SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name.endswith(("Error", "Exception")) and node.bases:
                doc = ast.get_docstring(node) or ""
                yield Candidate(repo, path_prefix + rel, node.lineno, [("lit", node.name)], "class:",
                                symbol=node.name, extra={"doc": doc.split("\n\n")[0][:300]})


def _enclosing_class(tree: ast.AST, target: ast.AST) -> str:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and any(n is target for n in ast.walk(node)):
            return node.name
    return "Exception"


def py_files(root: str, under: Iterable[str]) -> List[str]:
    out = []
    for u in under:
        base = os.path.join(root, u)
        if os.path.isfile(base):
            out.append(u)
            continue
        for d, dirs, files in os.walk(base):
            dirs[:] = sorted(x for x in dirs if x not in ("tests", "test", "__pycache__"))
            for f in sorted(files):
                if f.endswith(".py"):
                    out.append(os.path.relpath(os.path.join(d, f), root))
    return out


# ------------------------------------------------------------------ C and C++

_C_LIT = r'"((?:[^"\\\n]|\\.)*)"'
_C_SPEC = re.compile(r"%[-+ #0]*(?:\*|\d+)?(?:\.(?:\*|\d+))?(?:hh|h|ll|l|z|j|t|L|I64)?[diouxXeEfFgGcspn%]"
                     r"|%(?:\*)?pb?l|%p[A-Za-z]+|%\" ?PRI[a-z0-9]+ ?\"")


def _unescape(s: str) -> str:
    return (s.replace("\\n", "\n").replace("\\t", "\t").replace('\\"', '"').replace("\\'", "'")
            .replace("\\\\", "\\")).rstrip("\n")


def c_messages(root: str, rel_files: Iterable[str], repo: str, funcs: Tuple[str, ...]) -> Iterator[Candidate]:
    """The format literal of each call to one of `funcs` (adjacent literals joined, PRI macros as holes)."""
    call = re.compile(r"\b(" + "|".join(re.escape(f) for f in funcs) + r")\s*\(\s*(?:KERN_\w+\s*)?((?:" + _C_LIT +
                      r"\s*(?:PRI[a-z0-9]+\s*)?)+)", re.S)
    for rel in rel_files:
        try:
            with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as fh:
                src = fh.read()
        except OSError:
            continue
        for m in call.finditer(src):
            lits = re.findall(_C_LIT + r"|(PRI[a-z0-9]+)", m.group(2))
            text = "".join(_unescape(a) if a else "%d" for a, b in lits for _ in [0]) if lits else ""
            text = "".join((_unescape(a) if a else "%d") for a, b in lits)
            if not text.strip():
                continue
            line = src.count("\n", 0, m.start()) + 1
            yield Candidate(repo, rel, line, _split_fmt(text, _C_SPEC, []), f"c:{m.group(1)}")


def c_return_strings(root: str, rel: str, repo: str, case_rx: str) -> Iterator[Candidate]:
    """`case X: return "text";` tables (error-string switches)."""
    with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as fh:
        src = fh.read()
    for m in re.finditer(r"case\s+(" + case_rx + r")\s*:\s*(?:default\s*:\s*)?return\s+" + _C_LIT + r"\s*;", src):
        line = src.count("\n", 0, m.start()) + 1
        yield Candidate(repo, rel, line, [("lit", _unescape(m.group(2)))], "c:return", symbol=m.group(1))


def c_table_strings(root: str, rel: str, repo: str, macro: str) -> Iterator[Candidate]:
    """`MACRO(NAME, "text")` tables (libuv's UV_ERRNO_MAP: `XX(EMFILE, "too many open files")`)."""
    with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as fh:
        src = fh.read()
    for m in re.finditer(r"\b" + re.escape(macro) + r"\(\s*(\w+)\s*,\s*" + _C_LIT + r"\s*\)", src):
        line = src.count("\n", 0, m.start()) + 1
        yield Candidate(repo, rel, line, [("lit", _unescape(m.group(2)))], "c:table", symbol=m.group(1))


def c_literal_runs(root: str, rel: str, repo: str, must: str) -> Iterator[Candidate]:
    """Runs of adjacent C string literals (a macro argument between them, `"NVRM: Xid (" attr "): %d"`, is a hole)
    whose text matches `must`: for printf-like calls the other extractors do not know (nv_printf(level, ...))."""
    with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as fh:
        src = fh.read()
    run = re.compile(_C_LIT + r"(?:\s*(?:[A-Za-z_]\w*\s*)?" + _C_LIT + r")*")
    for m in run.finditer(src):
        text = re.sub(_C_LIT + r"|\s*([A-Za-z_]\w*)\s*",
                      lambda x: _unescape(x.group(1)) if x.group(1) is not None else "%s", m.group(0))
        if not re.search(must, text):
            continue
        line = src.count("\n", 0, m.start()) + 1
        yield Candidate(repo, rel, line, _split_fmt(text, _C_SPEC, []), "c:literal")


def c_call_messages(root: str, rel_files: Iterable[str], repo: str, funcs: Tuple[str, ...]) -> Iterator[Candidate]:
    """The message of each call to one of `funcs` whose arguments are concatenated into it (Gloo's
    GLOO_ERROR_MSG("Connection closed by peer ", peer_.str(), ". ...")): literal arguments are text, the others
    holes; arguments before the first literal (a condition) are left out."""
    start = re.compile(r"\b(" + "|".join(re.escape(f) for f in funcs) + r")\s*\(")
    for rel in rel_files:
        try:
            with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as fh:
                src = fh.read()
        except OSError:
            continue
        for m in start.finditer(src):
            i, depth, args, cur = m.end(), 1, [], []
            while i < len(src) and depth:
                ch = src[i]
                if ch == '"':
                    j = i + 1
                    while j < len(src) and src[j] != '"':
                        j += 2 if src[j] == "\\" else 1
                    cur.append(src[i:j + 1])
                    i = j + 1
                    continue
                if ch in "([{":
                    depth += 1
                elif ch in ")]}":
                    depth -= 1
                    if not depth:
                        break
                elif ch == "," and depth == 1:
                    args.append("".join(cur).strip())
                    cur = []
                    i += 1
                    continue
                cur.append(ch)
                i += 1
            args.append("".join(cur).strip())
            parts: List[Tuple[str, str]] = []
            for a in args:
                lits = re.findall(_C_LIT, a)
                if lits and re.fullmatch(r'(?:\s*' + _C_LIT + r'\s*)+', a):
                    parts.append(("lit", "".join(_unescape(x) for x in lits)))
                elif parts:
                    parts.append(("hole", f"a{len(parts)}"))
            while parts and parts[-1][0] == "hole":
                parts.pop()
            if any(k == "lit" and t.strip() for k, t in parts):
                line = src.count("\n", 0, m.start()) + 1
                yield Candidate(repo, rel, line, parts, f"c:{m.group(1)}")


def c_assert_messages(root: str, rel_files: Iterable[str], repo: str, macro: str, fmt: str) -> Iterator[Candidate]:
    """Messages of an assert macro that prints a fixed format around its literal argument (Gloo's libuv transport:
    UV_ASSERT(rv, "uv_accept") prints "[%s:%d] %s: %s" - file, line, the literal, uv_strerror(rv) - and aborts).
    `fmt` is that format with the literal as {name} and the other holes as {holes}: "{name}: {reason}"."""
    call = re.compile(r"\b" + re.escape(macro) + r"\s*\(\s*[^,()]+,\s*(" + _C_LIT + r")\s*\)")
    for rel in rel_files:
        try:
            with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as fh:
                src = fh.read()
        except OSError:
            continue
        for m in call.finditer(src):
            name = _unescape(m.group(2))
            parts: List[Tuple[str, str]] = []
            for piece in re.split(r"(\{\w+\})", fmt):
                if piece == "{name}":
                    parts.append(("lit", name))
                elif re.fullmatch(r"\{\w+\}", piece):
                    parts.append(("hole", piece[1:-1]))
                elif piece:
                    parts.append(("lit", piece))
            yield Candidate(repo, rel, src.count("\n", 0, m.start()) + 1, parts, f"c:{macro}")


def c_files(root: str, under: Iterable[str], exts=(".c", ".cc", ".cpp", ".h", ".hpp", ".in")) -> List[str]:
    out = []
    for u in under:
        base = os.path.join(root, u)
        if os.path.isfile(base):
            out.append(u)
            continue
        for d, dirs, files in os.walk(base):
            dirs[:] = sorted(x for x in dirs if x not in ("tests", "test", "testsuite"))
            for f in sorted(files):
                if f.endswith(exts):
                    out.append(os.path.relpath(os.path.join(d, f), root))
    return out


# ------------------------------------------------------------------ shared libraries

# Only translation units: a header's path (TensorOptions.h, included everywhere) would capture its includers' strings.
# holes in a compiled literal: fmt's "{}" (torch's C++) and printf's conversions (Ray's raylet)
_BIN_HOLE = re.compile(r"\{\}|\{:[^{}]*\}|" + _C_SPEC.pattern)
_SRC_PATH = re.compile(r"(?:^|/)((?:torch|c10|aten|caffe2|src)/[\w/.\-]+\.(?:cpp|cc|cu))$")


def binary_strings(lib: str, repo: str, min_len: int = 12) -> Iterator[Candidate]:
    """Every printable string of a shared library, attributed to the source path string nearest to it
    (before or after) in the file: a compiler lays out one translation unit's literals together, and
    TORCH_CHECK and RAY_LOG put that unit's `__FILE__` among them."""
    out = subprocess.run(["strings", "-a", "-t", "x", "-n", str(min_len), lib], check=True, capture_output=True,
                         text=True, errors="replace").stdout
    rows = []
    paths = []
    for row in out.splitlines():
        row = row.strip()
        if " " not in row:
            continue
        off, text = row.split(" ", 1)
        m = _SRC_PATH.search(text.strip())
        if m:
            paths.append((int(off, 16), m.group(1)))
        elif not text.startswith("_Z"):
            rows.append((int(off, 16), off, text))
    import bisect

    starts = [p[0] for p in paths]
    for pos, off, text in rows:
        i = bisect.bisect_left(starts, pos)
        near = [paths[j] for j in (i - 1, i) if 0 <= j < len(paths)]
        if not near:
            continue
        where = min(near, key=lambda p: abs(p[0] - pos))
        if abs(where[0] - pos) > 65536:
            continue
        yield Candidate(repo, where[1], None, _split_fmt(text, _BIN_HOLE, []), "strings",
                        extra={"offset": off, "library": os.path.basename(lib)})


# ------------------------------------------------------------------ patterns and examples

_FILL = {"rank": "3", "local_rank": "3", "world_size": "8", "pid": "48213", "port": "29500", "host": "node-a",
         "hostname": "node-a", "addr": "10.1.0.11", "device": "3", "timeout": "1800", "size": "1073741824",
         "signal": "SIGKILL", "sig": "SIGKILL", "name": "train"}


def fill(parts: List[Tuple[str, str]]) -> str:
    out = []
    for kind, t in parts:
        if kind == "lit":
            out.append(t)
        else:
            out.append(_FILL.get(t.lower(), "7" if re.search(r"(num|count|size|rank|id|len|port|code)$", t, re.I)
                                 else "x"))
    return "".join(out)


def pattern_of(parts: List[Tuple[str, str]], max_lit: int = 140, enough: int = 32) -> str:
    """The regex of a message: literal text escaped (any run of whitespace matches any run, so a wrapped or
    re-indented line still matches; a colon may have a space before it, as older versions wrote "NET/IB : "),
    holes as non-greedy groups. It stops at the first hole after `enough` literal characters, or after the
    first sentence past `max_lit`: the head of a message identifies it, and its tail is what versions reword
    ("(size %ld)" became "(size %ld), error: %s (%d)")."""
    rx: List[str] = []
    used: Dict[str, int] = {}
    lit_len = 0
    for i, (kind, t) in enumerate(parts):
        if kind == "lit":
            piece = t
            cut = False
            if lit_len + len(piece) > max_lit:
                m = re.search(r"[.:!?](?:\s|$)", piece[max(0, 30 - lit_len):])
                end = (m.end() + max(0, 30 - lit_len)) if m else max(max_lit - lit_len, 30)
                piece, cut = piece[:end], True
            if "\n" in piece.strip():
                piece, cut = piece.strip().split("\n", 1)[0], True
            words = re.split(r"(\s+)", piece)
            esc = "".join(r"\s+" if w.isspace() else re.escape(w) for w in words)
            rx.append(esc.replace(r"\s+:", ":").replace(":", r"\s*:"))
            lit_len += len(piece.strip())
            if cut:
                break
        else:
            if lit_len >= enough:
                break
            name = re.sub(r"\W", "_", t)[:30] or f"f{i}"
            if not re.match(r"[A-Za-z_]", name):
                name = "f_" + name
            used[name] = used.get(name, 0) + 1
            if used[name] > 1:
                name = f"{name}_{used[name]}"
            last = i == len(parts) - 1
            rx.append(f"(?P<{name}>.*)" if last else f"(?P<{name}>.*?)")
    out = "".join(rx)
    while out.startswith(r"\s+"):
        out = out[3:]
    out = out.rstrip()
    while out.endswith((r"\s+", r"\s*")):
        out = out[:-3]
    return out


# ------------------------------------------------------------------ curation

def extract(root: str) -> List[Candidate]:
    cands: List[Candidate] = []
    for spec in SOURCES:
        for c in spec["extract"](root):
            c.commit = spec["commit"]
            cands.append(c)
    return cands


def curate(cands: List[Candidate], root: str) -> Tuple[List[dict], List[str]]:
    entries: List[dict] = []
    problems: List[str] = []
    seen_ids: Dict[str, int] = {}
    seen_text = set()
    for rule in RULES:
        kept = 0
        rx_path = re.compile(rule["path"])
        rx_msg = re.compile(rule["match"], re.S)
        for c in cands:
            if c.repo != rule["repo"] or not rx_path.search(c.path):
                continue
            if rule.get("how") and not re.match(rule["how"], c.how):
                continue
            text = c.text
            if not rx_msg.search(text):
                continue
            key = (c.repo, " ".join(text.split()))
            if key in seen_text:
                continue
            seen_text.add(key)
            entry = make_entry(c, rule)
            base = entry["id"]
            n = seen_ids.get(base, 0)
            seen_ids[base] = n + 1
            if n:
                entry["id"] = f"{base}.{n + 1}"
            entries.append(entry)
            kept += 1
            if rule.get("max") and kept >= rule["max"]:
                break
        if not kept:
            problems.append(f"rule kept nothing: {rule['repo']} {rule['path']} {rule['match']!r}")
    return entries, problems


def _slug(text: str) -> str:
    words = re.findall(r"[A-Za-z][A-Za-z0-9]+", text)[:6]
    return "_".join(w.lower() for w in words)[:48] or "message"


def make_entry(c: Candidate, rule: dict) -> dict:
    src = {"repo": c.repo, "path": rule.get("source_path") or c.path, "commit": c.commit}
    if c.line:
        src["line"] = c.line
    if c.symbol:
        src["symbol"] = c.symbol
    if c.extra.get("library"):
        src["library"] = c.extra["library"]
        src["read_from"] = ("strings of the shared library; file " + ("named by hand" if rule.get("source_path") else
                            "attributed by the nearest __FILE__ string"))
    prefix = rule.get("prefix")
    if prefix is None:
        prefix = PREFIX_BY_HOW(c)
    text = fill(c.parts).strip().split("\n", 1)[0]
    example = (prefix + text) if prefix else text
    body = pattern_of(c.parts)
    if rule.get("hip_to_cuda"):
        # HIP's copy of cudaGetErrorString drops CUDA's own words: "driver version is insufficient for runtime
        # version" is CUDA's "CUDA driver version is insufficient for CUDA runtime version"; "no ROCm-capable device"
        # is "no CUDA-capable device"
        body = re.sub(r"\b(driver|runtime)\b", r"(?:CUDA\\s+)?\1", body)
        body = body.replace("ROCm", "(?:ROCm|CUDA)")
    context = rule.get("context", "")
    if context and len(c.text) >= 30:
        # a long error text is specific by itself: the tool's own words around it ("CUDA error: ", "THCudaCheck FAIL
        # ... : ", onnxruntime's "CUDA failure 35: ", bitsandbytes' "Error ") vary, the text does not
        context = "(?:" + context + ")?"
    computed = context + body
    pattern = rule.get("pattern") or computed
    if rule.get("pattern") and not any(re.search(pattern, x) for x in [example] + list(rule.get("examples", []))):
        pattern = computed   # the rule's hand pattern is for another of the messages it keeps
    examples = []
    if re.search(pattern, example):
        examples.append(example)
    examples += [e for e in rule.get("examples", []) if e not in examples]
    entry = {
        "id": f"{rule['id_prefix']}.{_slug(c.text)}",
        "source": src,
        "class": rule["class"],
        "meaning": rule["meaning"],
        "fix": rule["fix"],
        "format": c.text[:600],
        "pattern": pattern,
        "examples": examples,
    }
    if c.how.startswith("raise:"):
        entry["raises"] = c.how.split(":", 1)[1]
    return entry


def PREFIX_BY_HOW(c: Candidate) -> str:
    if c.how.startswith("raise:"):
        return c.how.split(":", 1)[1] + ": "
    if c.how == "strings" and c.repo == "pytorch/pytorch":
        return "RuntimeError: "   # TORCH_CHECK and C10_THROW_ERROR reach Python as an exception
    if c.how == "c:WARN":
        return "node-a:48213:48290 [3] NCCL WARN "
    if c.how.startswith("log:error"):
        return "[2024-02-27 07:12:02,123] [ERROR] [" + os.path.basename(c.path) + ":1:main] "
    return ""


def check_entries(entries: List[dict]) -> Tuple[List[dict], List[str]]:
    """Keep the entries that ddpdoctor.facts.messages itself recognises from their examples (and whose examples
    carry one of the reader's prefilter keywords); report the others, which need a rule's pattern or prefix."""
    import re as _re

    from ddpdoctor.facts.messages import has_anchor

    kept, dropped = [], []
    for e in entries:
        try:
            rx = _re.compile(e["pattern"])
        except _re.error as exc:
            dropped.append(f"dropped {e['id']}: pattern does not compile ({exc})")
            continue
        literal = _re.sub(r"\(\?P<\w+>(?:[^()]|\([^()]*\))*\)|\(\?:|\\s\+|\\.|[()?*+|]", "", e["pattern"])
        if len(literal) < 16:
            dropped.append(f"dropped {e['id']}: its pattern has too little literal text to be specific ({e['pattern']!r})")
            continue
        exs = [x for x in e["examples"] if has_anchor(x) and rx.search(x)]
        if not exs:
            dropped.append(f"dropped {e['id']}: no example with a prefilter keyword that its pattern matches "
                           f"({e['examples'][:1]})")
            continue
        e["examples"] = exs
        kept.append(e)
    return kept, dropped


def sources_table() -> Dict[str, dict]:
    """repo -> its newest commit read, the project it stands for, and every commit read with how."""
    out: Dict[str, dict] = {}
    for spec in SOURCES:
        row = out.setdefault(spec["repo"], {"commit": spec["commit"], "project": spec["project"], "read": []})
        row["read"].append({k: v for k, v in spec.items() if k in ("commit", "ref", "how")})
    return out


def add_repo(root: str, out: str, repo: str) -> int:
    """--add-repo: extract one repo's messages, curate them with that repo's rules, append what `out` lacks."""
    import tools.messages_rules as mr

    cands: List[Candidate] = []
    for spec in SOURCES:
        if spec["repo"] == repo:
            for c in spec["extract"](root):
                c.commit = spec["commit"]
                cands.append(c)
    saved = list(RULES)
    try:
        RULES[:] = [r for r in saved if r["repo"] == repo]
        entries, problems = curate(cands, root)
    finally:
        RULES[:] = saved
    entries, dropped = check_entries(entries)
    with open(out, encoding="utf-8") as fh:
        doc = json.load(fh)
    ids = {e["id"] for e in doc["entries"]}
    texts = {(e["source"]["repo"], " ".join(e["format"].split())) for e in doc["entries"]}
    added = [e for e in entries if e["id"] not in ids and (repo, " ".join(e["format"].split())) not in texts]
    doc["entries"].extend(added)
    with open(out, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=1, ensure_ascii=False)
        fh.write("\n")
    print(f"{len(cands)} messages extracted from {repo}, {len(entries)} kept by its rules, {len(added)} added")
    for p in problems + dropped:
        print("warning:", p)
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", required=True)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(HERE), "ddpdoctor", "data", "messages.json"))
    ap.add_argument("--candidates", help="write every extracted message as JSON lines")
    ap.add_argument("--add-repo", help="only this repo's sources (REPO as owner/name, --root holding just its tree): "
                    "keep --out's entries and add the ones its rules keep that --out lacks (same id or same format "
                    "text), without the other sources")
    args = ap.parse_args(argv)
    if args.add_repo:
        return add_repo(args.root, args.out, args.add_repo)
    cands = extract(args.root)
    if args.candidates:
        with open(args.candidates, "w") as fh:
            for c in cands:
                fh.write(json.dumps({"repo": c.repo, "path": c.path, "line": c.line, "how": c.how, "text": c.text}) + "\n")
    entries, problems = curate(cands, args.root)
    from tools.messages_rules import CLASSES, HAND_ENTRIES, ANCHORS_NOTE

    entries.extend(HAND_ENTRIES)
    entries, dropped = check_entries(entries)
    problems += dropped
    doc = {
        "schema": "ddpdoctor/catalogue/1",
        "name": "messages",
        "about": ("What torch, NCCL, the CUDA runtime, transformers, accelerate, DeepSpeed, Ray, SLURM and the kernel "
                  "print when a distributed job fails, ends or only warns; mined by tools/mine_messages.py. "
                  + ANCHORS_NOTE),
        "sources": sources_table(),
        "classes": CLASSES,
        "entries": entries,
    }
    with open(args.out, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=1, ensure_ascii=False)
        fh.write("\n")
    by_repo: Dict[str, int] = {}
    for e in entries:
        by_repo[e["source"]["repo"]] = by_repo.get(e["source"]["repo"], 0) + 1
    print(f"{len(cands)} messages extracted, {len(entries)} kept: " + ", ".join(f"{r} {n}" for r, n in sorted(by_repo.items())))
    for p in problems:
        print("warning:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
