"""Find the files to lint and read them as text, turning every bad input into one plain message.

Nothing here imports or executes a script. A path that cannot be linted (binary, too large, not
decodable, unreadable, a syntax error) becomes an `InputProblem`, which the engine reports as one
finding; a path that does not exist is a usage error (exit 2) raised by the caller.
"""
from __future__ import annotations

import ast
import io
import os
import re
import stat
import sys
import tokenize
from dataclasses import dataclass
from typing import List, Optional, Tuple, Union

MAX_BYTES = 4 * 1024 * 1024  # larger than any hand-written training script; keeps lint fast and bounded
SKIP_DIRS = {"__pycache__", "node_modules", "site-packages", "venv", ".venv", "env", ".tox", ".nox", ".git"}


@dataclass
class InputProblem:
    """A path we could not lint. `kind` is syntax-error for LINT090, anything else for LINT091."""
    path: str
    kind: str
    message: str
    line: int = 0
    col: int = 0
    newer_python: bool = False  # the syntax error is Python 3.12 syntax this interpreter predates (see _pep701)
    recovered: bool = False     # the rest of the file was linted (source.recover)


@dataclass
class Script:
    path: str   # as shown to the user (relative when given relative)
    text: str
    tree: ast.Module
    # a file that does not parse as a whole, linted without the lines that do not (round 19): its LINT090
    problem: Optional[InputProblem] = None


def collect(paths: List[str]) -> Tuple[List[str], List[InputProblem], List[str]]:
    """Expand folders into their *.py files. Returns (files, problems, missing paths)."""
    files: List[str] = []
    problems: List[InputProblem] = []
    missing: List[str] = []
    seen: set = set()
    for raw in paths:
        path = os.fspath(raw)
        if not os.path.lexists(path):
            missing.append(path)
            continue
        if os.path.isdir(path):
            found, errs = _walk(path)
            problems.extend(errs)
            for f in found:
                key = os.path.realpath(f)
                if key not in seen:
                    seen.add(key)
                    files.append(f)
        else:
            key = os.path.realpath(path)
            if key not in seen:
                seen.add(key)
                files.append(path)
    return files, problems, missing


def _walk(root: str) -> Tuple[List[str], List[InputProblem]]:
    found: List[str] = []
    errs: List[InputProblem] = []

    def onerror(exc: OSError) -> None:
        where = shown(getattr(exc, "filename", None) or root)
        errs.append(InputProblem(where, "unreadable", f"cannot list folder: {exc.strerror or exc}"))

    for dirpath, dirnames, filenames in os.walk(root, onerror=onerror, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
        for name in sorted(filenames):
            if name.endswith((".py", ".pyw")):
                found.append(os.path.join(dirpath, name))
    return found, errs


def shown(path: str) -> str:
    """The path as text that any output can carry: undecodable bytes in a file name become U+FFFD."""
    try:
        path.encode("utf-8")
        return path
    except UnicodeEncodeError:
        return os.fsencode(path).decode("utf-8", "replace")


def read(path: str) -> Union[Script, InputProblem]:
    """Read and parse one file, or say in one line why not."""
    result = _read(path)
    name = shown(path)
    if result.path != name:
        result.path = name
    return result


def _read(path: str) -> Union[Script, InputProblem]:
    try:
        st = os.stat(path)
        if stat.S_ISDIR(st.st_mode):
            return InputProblem(path, "unreadable", "is a folder where a file was expected")
        if not stat.S_ISREG(st.st_mode):  # a FIFO or a device would block or never end
            return InputProblem(path, "unreadable", "not a regular file (a pipe, socket or device); not linted")
        size = st.st_size
        if size > MAX_BYTES:
            return InputProblem(path, "too-large", f"file is {size / 2**20:.1f} MiB, over the "
                                f"{MAX_BYTES // 2**20} MiB limit for a training script; not linted")
        with open(path, "rb") as fh:
            data = fh.read(MAX_BYTES + 1)
    except IsADirectoryError:
        return InputProblem(path, "unreadable", "is a folder where a file was expected")
    except OSError as exc:
        return InputProblem(path, "unreadable", f"cannot read: {exc.strerror or exc}")
    if len(data) > MAX_BYTES:
        return InputProblem(path, "too-large", f"file is over the {MAX_BYTES // 2**20} MiB limit; not linted")
    if b"\0" in data[:65536] or b"\0" in data:
        return InputProblem(path, "binary", "binary file (contains NUL bytes), not Python source; not linted")
    text = decode(path, data)
    if isinstance(text, InputProblem):
        return text
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError as exc:
        msg = exc.msg or "invalid syntax"
        if _pep701(text, exc):
            problem = InputProblem(path, "syntax-error", f"syntax error under Python {sys.version_info[0]}.{sys.version_info[1]}: "
                                   f"{msg}, in an f-string (Python 3.12 accepts an f-string whose replacement field "
                                   "spans lines or reuses its quotes, PEP 701)",
                                   exc.lineno or 0, (exc.offset or 1) - 1, newer_python=True)
            recovered = recover(text, path)
            if recovered is None:
                problem.message += "; not linted: run ddpdoctor under Python 3.12+"
                return problem
            tree, dropped = recovered
            problem.message += (f"; the rest of the file was linted without {_lines(dropped)} (run ddpdoctor under "
                                "Python 3.12+ to lint all of it)")
            problem.recovered = True
            return Script(path, text, tree, problem=problem)
        problem = InputProblem(path, "syntax-error", f"syntax error: {msg}", exc.lineno or 0, (exc.offset or 1) - 1)
        recovered = recover(text, path)
        if recovered is None:
            return problem
        tree, dropped = recovered
        problem.message += (f"; the rest of the file was linted without {_lines(dropped)}, which "
                            f"{'does' if len(dropped) == 1 else 'do'} not parse (faults there are not seen)")
        problem.recovered = True
        return Script(path, text, tree, problem=problem)
    except (RecursionError, MemoryError):
        return InputProblem(path, "too-complex", "too deeply nested to parse; not linted")
    except ValueError as exc:
        return InputProblem(path, "binary", f"not Python source: {exc}; not linted")
    return Script(path, text, tree)


def _lines(dropped: List[int]) -> str:
    """`line 12`, `lines 12-14`, `lines 3, 12-14 and 40` for the dropped physical lines."""
    runs: List[Tuple[int, int]] = []
    for n in sorted(set(dropped)):
        if runs and n == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], n)
        else:
            runs.append((n, n))
    parts = [f"{a}" if a == b else f"{a}-{b}" for a, b in runs]
    if len(parts) > 4:
        parts = parts[:3] + [f"{len(parts) - 3} more"]
    word = "line" if len(dropped) == 1 else "lines"
    return f"{word} {parts[0]}" if len(parts) == 1 else f"{word} {', '.join(parts[:-1])} and {parts[-1]}"


_MAX_REPAIRS = 40


def recover(text: str, path: str = "<string>") -> Optional[Tuple[ast.Module, List[int]]]:
    """Lint what parses (round 19, issue 25: a file that does not parse hid every other fault in it). Each syntax
    error's physical line is replaced by `pass` at its indentation (a Python 2 `print "x"`, a stray line); when the
    error stays on that line, the top-level block that holds it is blanked instead. Line numbers are kept, so the
    findings point at the real lines. None when nothing parses within a bounded number of repairs, or when more than
    half of the file would be dropped (too little left to judge)."""
    lines = text.splitlines()
    if not lines:
        return None
    dropped: set = set()
    tried: set = set()
    for _ in range(_MAX_REPAIRS):
        try:
            tree = ast.parse("\n".join(lines), filename=path)
        except SyntaxError as exc:
            no = exc.lineno or 0
            if not 1 <= no <= len(lines):
                return None
            if no not in tried and lines[no - 1].strip():
                tried.add(no)
                indent = lines[no - 1][:len(lines[no - 1]) - len(lines[no - 1].lstrip())]
                lines[no - 1] = indent + "pass"
                dropped.add(no)
                continue
            start = no
            while start > 1 and (not lines[start - 1].strip() or lines[start - 1][:1] in (" ", "\t", "#", ")", "]", "}")):
                start -= 1
            end = no
            while end < len(lines) and (not lines[end].strip() or lines[end][:1] in (" ", "\t", "#", ")", "]", "}")):
                end += 1
            for k in range(start, end + 1):
                if lines[k - 1].strip():
                    dropped.add(k)
                lines[k - 1] = ""
            continue
        except (ValueError, RecursionError, MemoryError):
            return None
        code = sum(1 for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#"))
        if not dropped or len(dropped) * 2 > max(code, 1):
            return None
        return tree, sorted(dropped)
    return None


_FSTRING_START = re.compile(r"(?<![\w'\"])(?:[rRbB]?[fF]|[fF][rR])['\"]")


def _pep701(text: str, exc: SyntaxError) -> bool:
    """A syntax error this interpreter raises inside an f-string that Python 3.12's grammar accepts (PEP 701: an
    f-string's replacement field may span lines, hold comments and reuse the enclosing quotes). fr80
    amithadiraju1694/trifecta_facedet_train: `print(f"[RANK{rank}] ... {iter` continued on the next line, valid in
    3.12, 'unterminated string literal' in 3.11: a false error at first read."""
    if sys.version_info >= (3, 12) or not exc.lineno:
        return False
    msg = exc.msg or ""
    if not (msg.startswith("f-string") or msg.startswith("unterminated string literal")):
        return False
    lines = text.splitlines()
    return 0 < exc.lineno <= len(lines) and bool(_FSTRING_START.search(lines[exc.lineno - 1]))


def decode(path: str, data: bytes) -> Union[str, InputProblem]:
    """Decode as Python would: a BOM or `# -*- coding: ... -*-` line, else UTF-8."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        return InputProblem(path, "encoding", f"bad encoding declaration: {exc.msg if hasattr(exc, 'msg') else exc}")
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        return InputProblem(path, "encoding", f"not valid {encoding} text (byte 0x{data[exc.start]:02x} at line "
                            f"{line}); save it as UTF-8 or declare its encoding", line)
    except LookupError:
        return InputProblem(path, "encoding", f"unknown encoding {encoding!r} declared")


def parse_text(text: str, path: str = "<string>") -> Optional[ast.Module]:
    try:
        return ast.parse(text, filename=path)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
