"""Mine the settings catalogue (ddpdoctor/data/settings.json) from the sources of what reads the settings.

Every entry is one environment variable (or one key of PYTORCH_CUDA_ALLOC_CONF) with where it was read:
repo, path, commit and the line or symbol. What is mined, and how:

* NCCL (a clone of NVIDIA/nccl, bare is fine): at every release tag from v2.10 to HEAD, each
  `NCCL_PARAM(Name, "ENV", default)` (an int64 read with strtoll, so "true" reads as 0), each
  `DEFINE_NCCL_PARAM(var, type, NCCL_ENV, default, flags, parser, "doc")` (newer typed parameters,
  with their `makeOption("VALUE", ...)` choices) and each `ncclGetEnv("NCCL_X")` / `getenv("NCCL_X")`
  (a string). The default comes from the newest tag declaring the name; `versions` says from which to
  which tag it exists, so a name dropped by newer NCCL is still known.
* torch (the installed wheel, whose torch.version.git_version is its commit): the Python sources of
  torch.distributed (c10d, elastic, torchrun), torch.utils.data and torch.cuda, read with `ast` for
  `os.environ.get` / `os.getenv` / `os.environ[...]` and env helpers, the parser inferred from the code
  around the read (int(), == "1", a truthy set); the C++ headers in torch/include for ProcessGroupNCCL's
  and the flight recorder's `static std::vector<std::string> NAME = {"NEW", "OLD"}` (new name first:
  the old ones are deprecated aliases, getCvar* warns and the first wins) read with c10d's getCvarBool
  / getCvarInt (torch/csrc/distributed/c10d/Utils.hpp: a value outside y/yes/1/t/true/n/no/0/f/false
  raises); torchrun's options, each also read from `PET_<OPTION>` (torch/distributed/argparse_util.py
  `env` action); and the CUDA caching allocator's PYTORCH_CUDA_ALLOC_CONF keys (c10's
  AllocatorConfig.h / CUDAAllocatorConfig.h, and libc10.so's key strings).
* transformers, accelerate, tokenizers: the installed packages' Python sources, as for torch;
  tokenizers' Rust reader is compiled, so its names come from the strings of its extension module.
* DeepSpeed (a clone of deepspeedai/DeepSpeed): the Python sources at HEAD, as for torch.
* The CUDA runtime: its source is not public. libcudart from the PyPI wheel nvidia-cuda-runtime-cu12
  holds few names in clear, so the list is NVIDIA's documented one (the CUDA programming guide's
  "CUDA Environment Variables" appendix), recorded as such; the libcudart strings confirm what they can.

What the sources do not say (what a debug setting costs at 64 ranks, which two settings fight) is
in KNOWLEDGE below, each item with the file or page that says it; the script checks that every value
it lists for a choice appears in the cited source file when that file is available.

    python tools/mine_settings.py --nccl-git NCCL.git --deepspeed-git DS.git \
        --site .venv/lib/python3.11/site-packages --cudart-wheel nvidia_cuda_runtime_cu12-*.whl \
        > ddpdoctor/data/settings.json

Nothing is downloaded here; the clones and the wheel are inputs. Then tools/mine_settings_history.py adds
what the earlier releases of torch, transformers and accelerate read (`history`, `alias_since`,
`cuda_allocator_since`, retired names).
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import re
import subprocess
import sys
import zipfile
from typing import Dict, Iterable, List, Optional, Tuple

NAME = re.compile(r"^[A-Z][A-Z0-9_]{2,}$")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from settings_knowledge import CUDA_DOC, KNOWLEDGE, PYTHON_SCANS, TORCH_DOC_FACTS  # noqa: E402


# ------------------------------------------------------------------------------------ helpers

def git(gitdir: str, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", gitdir, *args], capture_output=True, text=True, check=True).stdout


def split_args(text: str, start: int) -> Tuple[List[str], int]:
    """Top-level comma-separated arguments of the call whose '(' is at text[start]."""
    depth, cur, out, i, quote = 0, [], [], start, None
    while i < len(text):
        ch = text[i]
        if quote:
            cur.append(ch)
            if ch == "\\":
                cur.append(text[i + 1])
                i += 2
                continue
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
            cur.append(ch)
        elif ch in "([{":
            depth += 1
            if depth > 1:
                cur.append(ch)
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                out.append("".join(cur).strip())
                return out, i
            cur.append(ch)
        elif ch == "," and depth == 1:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
        i += 1
    return out, i


def c_int_expr(text: str) -> Optional[int]:
    """The value of a C integer constant expression made of literals (1LL << 30, 128 * 1024, -2), or None."""
    text = re.sub(r"(?<=\d)(?:[uU]?[lL]{1,2}|[lL]{1,2}[uU]?|[uU])\b", "", text)
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        return None
    ok = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.LShift, ast.RShift, ast.Mult, ast.Add, ast.Sub,
          ast.USub, ast.BitOr, ast.Div, ast.FloorDiv)
    if not all(isinstance(n, ok) for n in ast.walk(tree)) or \
            not all(isinstance(n.value, int) for n in ast.walk(tree) if isinstance(n, ast.Constant)):
        return None
    try:
        return int(eval(compile(tree, "<default>", "eval"), {"__builtins__": {}}))  # literals only, checked above
    except Exception:  # noqa: BLE001
        return None


def c_string(text: str) -> str:
    return "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', text))


def entry(name: str, family: str, source: dict, **kw) -> dict:
    e = {"id": name if kw.get("kind", "env") == "env" else f"{kw['kind']}:{name}", "name": name,
         "kind": "env", "family": family, "source": source}
    e.update({k: v for k, v in kw.items() if v is not None})
    return e


# ------------------------------------------------------------------------------------ NCCL

def nccl_tags(gitdir: str) -> List[str]:
    tags = [t for t in git(gitdir, "tag").split() if re.match(r"^v2\.\d+\.\d+-\d+$", t)]

    def key(t):
        return tuple(int(x) for x in re.findall(r"\d+", t))

    tags = sorted(tags, key=key)
    last_of_minor: Dict[tuple, str] = {}
    for t in tags:
        major_minor = key(t)[:2]
        if major_minor >= (2, 10):
            last_of_minor[major_minor] = t
    return [last_of_minor[k] for k in sorted(last_of_minor)]


def nccl_declarations(gitdir: str, ref: str) -> Dict[str, dict]:
    out: Dict[str, dict] = {}
    files = [f for f in git(gitdir, "ls-tree", "-r", "--name-only", ref, "--", "src").split()
             if f.endswith((".cc", ".h", ".cu", ".cpp", ".hpp"))]
    for path in files:
        text = git(gitdir, "show", f"{ref}:{path}")
        if "NCCL" not in text:
            continue
        for m in re.finditer(r"\bNCCL_PARAM\(", text):
            args, _ = split_args(text, m.end() - 1)
            if len(args) < 3 or not args[1].startswith('"'):
                continue
            env = "NCCL_" + c_string(args[1])
            line = text.count("\n", 0, m.start()) + 1
            out.setdefault(env, {"reader": "NCCL_PARAM", "symbol": f"NCCL_PARAM({args[0]})", "default": args[2],
                                 "path": path, "line": line})
        for m in re.finditer(r"\bDEFINE_NCCL_PARAM\(", text):
            args, end = split_args(text, m.end() - 1)
            if len(args) < 4 or not args[2].startswith("NCCL_"):
                continue
            env = args[2]
            line = text.count("\n", 0, m.start()) + 1
            options = re.findall(r'makeOption\(\s*"([^"]+)"', " ".join(args[5:6]) if len(args) > 5 else "")
            doc = c_string(args[-1]) if args[-1].startswith('"') else ""
            ctype = args[1]
            reader = "nccl_typed_" + ("enum" if "OneOf" in " ".join(args) else "bitset" if "BitsetOf" in " ".join(args)
                                      else re.sub(r"\W+", "_", ctype).strip("_"))
            out[env] = {"reader": reader, "symbol": f"DEFINE_NCCL_PARAM({args[0]})", "default": args[3], "path": path,
                        "line": line, "options": options, "doc": doc, "ctype": ctype}
        for m in re.finditer(r'\bncclGetLevel\(\s*&?\w+,\s*(NULL|"NCCL_[A-Z0-9_]+")\s*,\s*"(NCCL_[A-Z0-9_]+)"', text):
            line = text.count("\n", 0, m.start()) + 1
            if m.group(1) != "NULL":
                out.setdefault(m.group(1).strip('"'), {"reader": "NCCL_PARAM", "symbol": "ncclGetLevel (strtol; 1 disables)",
                                                      "default": "0", "path": path, "line": line})
            out[m.group(2)] = {"reader": "nccl_level", "symbol": "ncclGetLevel (strcmp with topoPathTypeStr, or "
                               "an old-style number)", "default": None, "path": path, "line": line}
        for array, key in (("topoPathTypeStr", "_levels"), ("ncclAlgoStr", "_algos"), ("ncclProtoStr", "_protos")):
            m = re.search(r"\b" + array + r"\s*\[[^\]]*\]\s*=\s*\{([^}]*)\}", text)
            if m:
                names = [n for n in re.findall(r'"([A-Za-z0-9]*)"', m.group(1)) if n]
                line = text.count("\n", 0, m.start()) + 1
                out[key] = {"values": names, "path": path, "line": line, "symbol": array}
        for m in re.finditer(r'\b(?:ncclGetEnv|getenv|std::getenv)\(\s*"(NCCL_[A-Z0-9_]+)"', text):
            env = m.group(1)
            line = text.count("\n", 0, m.start()) + 1
            out.setdefault(env, {"reader": "getenv", "symbol": "ncclGetEnv", "default": None, "path": path,
                                 "line": line})
    return out


def nccl_ref_version(gitdir: str, ref: str) -> str:
    """The NCCL version a branch declares (makefiles/version.mk): "2.31.0a7-1" for an unreleased dev branch."""
    text = git(gitdir, "show", f"{ref}:makefiles/version.mk")
    f = dict(re.findall(r"^(NCCL_MAJOR|NCCL_MINOR|NCCL_PATCH|NCCL_SUFFIX|PKG_REVISION)\s*:=\s*(\S*)", text, re.M))
    return f"{f['NCCL_MAJOR']}.{f['NCCL_MINOR']}.{f['NCCL_PATCH']}{f.get('NCCL_SUFFIX', '')}-{f.get('PKG_REVISION', '1')}"


def mine_nccl(gitdir: str, extra_refs: Iterable[str] = ()) -> Tuple[List[dict], dict]:
    """`extra_refs`: branches mined after HEAD (NVIDIA/nccl's `dev` carries the next, unreleased minor release);
    a name first declared there gets that branch's version.mk version as `first`."""
    extra_refs = tuple(extra_refs)
    tags = nccl_tags(gitdir)
    head = git(gitdir, "rev-parse", "HEAD").strip()
    refs = tags + ["HEAD"] + list(extra_refs)
    seen: Dict[str, dict] = {}
    arrays: Dict[str, dict] = {}
    for ref in refs:
        commit = head if ref == "HEAD" else git(gitdir, "rev-list", "-n1", ref).strip()
        extra = ref in extra_refs
        for env, d in nccl_declarations(gitdir, ref).items():
            if env.startswith("_"):  # a list of names (levels, algorithms, protocols): the union over versions
                cur = arrays.setdefault(env, {"values": []})
                cur["values"] += [v for v in d["values"] if v not in cur["values"]]
                cur.update({k: d[k] for k in ("path", "line", "symbol")}, commit=commit)
                continue
            version = ref.lstrip("v") if ref != "HEAD" else "HEAD"
            if extra:  # an unreleased branch: only what HEAD does not declare is taken from it
                if env in seen and seen[env]["last"] == "HEAD":
                    continue
                version = nccl_ref_version(gitdir, ref)
            cur = seen.setdefault(env, {"first": version})
            cur.update(d, last=version, commit=commit, ref=ref)
    entries = []
    for env in sorted(seen):
        d = seen[env]
        reader = {"NCCL_PARAM": "nccl_int", "getenv": "string"}.get(d["reader"], d["reader"])
        choices = {"NCCL_P2P_LEVEL": "_levels", "NCCL_NET_GDR_LEVEL": "_levels", "NCCL_P2P_PXN_LEVEL": None,
                   "NCCL_ALGO": "_algos", "NCCL_PROTO": "_protos"}.get(env)
        if choices and choices in arrays:
            a = arrays[choices]
            d = dict(d, options=a["values"])
            reader = "nccl_level" if choices == "_levels" else "nccl_list"
            d["values_source"] = {"repo": "NVIDIA/nccl", "path": a["path"], "commit": a["commit"], "symbol": a["symbol"],
                                  "line": a["line"]}
        if d["reader"].startswith("nccl_typed_"):
            reader = {"nccl_typed_enum": "nccl_enum", "nccl_typed_bitset": "nccl_bitset",
                      "nccl_typed_bool": "nccl_bool"}.get(d["reader"], "string" if "char" in d.get("ctype", "") else "nccl_int")
        src = {"repo": "NVIDIA/nccl", "path": d["path"], "commit": d["commit"], "symbol": d["symbol"], "line": d["line"]}
        default, default_expr = d.get("default"), None
        if isinstance(default, str):
            text = re.sub(r"/\*.*?\*/", "", default).strip()
            value = c_int_expr(text) if reader == "nccl_int" else None
            if value is not None:
                default = str(value)
            elif reader == "nccl_int" or text in ("nullptr", "NULL"):
                default, default_expr = None, (text if text not in ("nullptr", "NULL") else None)
            else:
                default = text.strip('"')
        e = entry(env, "nccl", src, type={"nccl_int": "int"}.get(reader, "enum" if reader in (
                      "nccl_enum", "nccl_bitset", "nccl_level", "nccl_list") else "bool" if reader == "nccl_bool" else "string"),
                  values_source=d.get("values_source"),
                  parser=reader, default=default, default_expr=default_expr,
                  versions={"first": d["first"], "last": d["last"]},
                  values=d.get("options") or None, meaning=d.get("doc") or None)
        if d["ref"] in extra_refs:
            e["versions"]["last"] = "HEAD"  # read by the branch's head; `first` is its unreleased version
            e["unreleased"] = {"ref": d["ref"], "version": d["first"]}
        elif d["last"] != "HEAD":
            e["removed_after"] = d["last"]
        entries.append(e)
    header = {"commit": head, "ref": f"tags v{tags[0].lstrip('v')}..{tags[-1].lstrip('v')} and HEAD"
              + "".join(f"; {r} at {git(gitdir, 'rev-parse', r).strip()} ({nccl_ref_version(gitdir, r)}, unreleased)"
                        for r in extra_refs),
              "how": "NCCL_PARAM / DEFINE_NCCL_PARAM / ncclGetEnv(\"NCCL_*\") in src/ at the last tag of every minor "
                     "release from 2.10 and at HEAD"}
    return entries, header


# ------------------------------------------------------------------------------------ Python sources

ENV_FUNCS = ("get", "getenv")


class EnvReads(ast.NodeVisitor):
    """Literal environment variable names read by a module, with the parser their surroundings imply."""

    def __init__(self, text: str):
        self.text = text
        self.found: List[dict] = []
        self.parents: Dict[ast.AST, ast.AST] = {}

    def visit(self, node):
        for child in ast.iter_child_nodes(node):
            self.parents[child] = node
        return super().visit(node)

    def generic_visit(self, node):
        for child in ast.iter_child_nodes(node):
            self.parents[child] = node
            self.visit(child)

    @staticmethod
    def _dotted(node) -> str:
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name):
            parts.append(node.id)
        return ".".join(reversed(parts))

    def _names(self, node) -> List[str]:
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and NAME.match(node.value):
            return [node.value]
        if isinstance(node, (ast.List, ast.Tuple)):
            return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)
                    and NAME.match(e.value)]
        return []

    def visit_Call(self, node):
        func = self._dotted(node.func)
        tail = func.rsplit(".", 1)[-1]
        env_call = (func.endswith(("environ.get", "environ.setdefault", "os.getenv")) or tail == "getenv"
                    or ("env" in tail.lower() and tail not in ("setenv", "patch_environment", "clear_environment")))
        if env_call and node.args:
            names = self._names(node.args[0])
            default = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords
                                                                     if k.arg == "default"), None)
            for n in names:
                self.found.append({"name": n, "line": node.lineno, "parser": self._parser(node, tail),
                                   "default": self._literal(default), "reader": func})
        self.generic_visit(node)

    def visit_Subscript(self, node):
        if self._dotted(node.value).endswith("environ"):
            for n in self._names(node.slice):
                if not isinstance(self.parents.get(node), ast.Assign) or self.parents[node].targets[0] is not node:
                    self.found.append({"name": n, "line": node.lineno, "parser": self._parser(node, "environ[]"),
                                       "default": None, "reader": "os.environ[]"})
        self.generic_visit(node)

    def visit_Compare(self, node):
        # "NAME" in os.environ
        if isinstance(node.left, ast.Constant) and isinstance(node.left.value, str) and NAME.match(node.left.value) \
                and any(self._dotted(c).endswith("environ") for c in node.comparators):
            self.found.append({"name": node.left.value, "line": node.lineno, "parser": "presence", "default": None,
                               "reader": "in os.environ"})
        self.generic_visit(node)

    @staticmethod
    def _literal(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, float, bool)):
            return node.value
        return None

    def _parser(self, node, func_tail: str) -> str:
        low = func_tail.lower()
        if "int" in low:
            return "py_int"
        if "flag" in low or "bool" in low:
            return "str_to_bool"
        parent = self.parents.get(node)
        hops = 0
        while parent is not None and hops < 4:
            if isinstance(parent, ast.Call):
                f = self._dotted(parent.func).rsplit(".", 1)[-1]
                if f == "int":
                    return "py_int"
                if f == "float":
                    return "py_float"
                if f in ("str_to_bool", "strtobool", "parse_flag_from_env", "_str2bool", "str2bool", "strtobool_"):
                    return "str_to_bool"
                if f in ("bool",):
                    return "py_nonempty"
                if f not in ("lower", "upper", "strip", "str"):
                    break
            if isinstance(parent, ast.Compare):
                lits = [c for c in parent.comparators if isinstance(c, (ast.Constant, ast.Set, ast.Tuple, ast.List,
                                                                        ast.Name, ast.Attribute))]
                text = ast.unparse(parent)
                if "TRUE_VALUES" in text or "true" in text.lower() and "in" in text:
                    return "py_truthy"
                if lits and any(isinstance(op, (ast.Eq, ast.NotEq)) for op in parent.ops):
                    return "py_switch"
                return "py_str"
            parent = self.parents.get(parent)
            hops += 1
        return "py_str"


def scan_python(root: str, rel_dirs: Iterable[str], family: str, repo: str, commit: str, path_prefix: str,
                keep=lambda n: True) -> List[dict]:
    out: Dict[str, dict] = {}
    for rel in rel_dirs:
        base = os.path.join(root, rel)
        paths = [base] if base.endswith(".py") else [os.path.join(d, f) for d, _, fs in os.walk(base) for f in fs
                                                     if f.endswith(".py")]
        for path in sorted(paths):
            if "/test" in path.replace(root, "") or "/tests/" in path:
                continue
            try:
                with open(path, encoding="utf-8") as fh:
                    text = fh.read()
                tree = ast.parse(text)
            except (OSError, SyntaxError, UnicodeDecodeError):
                continue
            v = EnvReads(text)
            v.visit(tree)
            for hit in v.found:
                if not keep(hit["name"]):
                    continue
                relpath = path_prefix + os.path.relpath(path, root)
                cur = out.get(hit["name"])
                # the most informative read wins: a typed parser over a plain string, a default over none
                rank = ("py_str", "presence", "py_nonempty", "py_switch", "py_truthy", "str_to_bool", "py_float", "py_int")
                if cur is None or rank.index(hit["parser"]) > rank.index(cur["parser"]) or \
                        (cur["default"] is None and hit["default"] is not None and hit["parser"] == cur["parser"]):
                    out[hit["name"]] = dict(hit, path=relpath)
    entries = []
    for name, hit in sorted(out.items()):
        src = {"repo": repo, "path": hit["path"], "commit": commit, "line": hit["line"], "symbol": hit["reader"]}
        ptype = {"py_int": "int", "py_float": "float", "str_to_bool": "bool", "py_truthy": "bool", "py_switch": "switch",
                 "presence": "presence", "py_nonempty": "presence"}.get(hit["parser"], "string")
        entries.append(entry(name, family, src, type=ptype, parser=hit["parser"],
                             default=None if hit["default"] is None else str(hit["default"])))
    return entries


# ------------------------------------------------------------------------------------ torch C++ / wheel

def mine_torch_headers(torch_dir: str, commit: str) -> List[dict]:
    out = []
    inc = os.path.join(torch_dir, "include")
    for rel in ("torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp", "torch/csrc/distributed/c10d/FlightRecorder.hpp",
                "torch/csrc/distributed/c10d/ProcessGroupGloo.hpp", "torch/csrc/distributed/c10d/NCCLUtils.hpp"):
        path = os.path.join(inc, rel)
        if not os.path.exists(path):
            continue
        text = open(path, encoding="utf-8").read()
        for m in re.finditer(r"static std::vector<std::string>\s+(\w+)\s*=\s*\{([^}]*)\}", text):
            names = re.findall(r'"([A-Z0-9_]+)"', m.group(2))
            if not names:
                continue
            comment_lines = []
            before = text[:m.start()].rstrip().splitlines()
            for line in reversed(before):
                if line.strip().startswith("//"):
                    comment_lines.insert(0, line.strip()[2:].strip())
                else:
                    break
            line = text.count("\n", 0, m.start()) + 1
            src = {"repo": "pytorch/pytorch", "path": rel, "commit": commit, "symbol": m.group(1), "line": line}
            is_int = re.search(r"_(MILSEC|SEC|SIZE|PER_ROOT|MS)$", names[0]) is not None
            out.append(entry(names[0], "torch", src, type="int" if is_int else "bool",
                             parser="c10d_int" if is_int else "c10d_bool",
                             parser_from="ProcessGroupNCCL.cpp reads *_MILSEC/_SEC/_SIZE/_PER_ROOT names with getCvarInt "
                                         "and the others with getCvarBool (c10d/Utils.hpp)",
                             aliases=names[1:] or None, meaning=" ".join(comment_lines) or None))
        for m in re.finditer(r"getCvar(Int|Bool|String)\(\s*\{([^}]*)\}\s*,\s*([^)]*)\)", text):
            names = re.findall(r'"([A-Z0-9_]+)"', m.group(2))
            kind = m.group(1)
            line = text.count("\n", 0, m.start()) + 1
            src = {"repo": "pytorch/pytorch", "path": rel, "commit": commit, "line": line,
                   "symbol": f"getCvar{kind}({{{', '.join(chr(34) + n + chr(34) for n in names)}}}, {m.group(3).strip()})"}
            out.append(entry(names[0], "torch", src, type={"Int": "int", "Bool": "bool"}.get(kind, "string"),
                             parser={"Int": "c10d_int", "Bool": "c10d_bool"}.get(kind, "string"),
                             default=m.group(3).strip(), aliases=names[1:] or None))
    return out


def lib_strings(path: str, pattern: str) -> List[str]:
    data = open(path, "rb").read()
    return sorted({m.decode() for m in re.findall(rb"(?<![A-Za-z0-9_])" + pattern.encode() + rb"(?![A-Za-z0-9_])", data)})


def mine_torch_libs(torch_dir: str, commit: str, known: set) -> List[dict]:
    out = []
    for lib in ("libc10.so", "libtorch_cpu.so", "libtorch_python.so"):
        path = os.path.join(torch_dir, "lib", lib)
        if not os.path.exists(path):
            continue
        for name in lib_strings(path, r"(?:TORCH|PYTORCH|TORCHELASTIC|GLOO)_[A-Z0-9_]{3,}"):
            if name in known or name.endswith("_") or not NAME.match(name):
                continue
            known.add(name)
            src = {"repo": "pytorch/pytorch", "path": f"torch/lib/{lib} (strings of the built library)",
                   "commit": commit, "symbol": name}
            out.append(entry(name, "torch", src, type="unknown", parser="string"))
    return out


def mine_torchrun(torch_dir: str, commit: str) -> List[dict]:
    path = os.path.join(torch_dir, "distributed", "run.py")
    tree = ast.parse(open(path, encoding="utf-8").read())
    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"):
            continue
        kws = {k.arg: k.value for k in node.keywords}
        if not (isinstance(kws.get("action"), ast.Name) and kws["action"].id in ("env", "check_env")):
            continue
        flags = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        long = [f for f in flags if f.startswith("--")]
        dest = kws["dest"].value if isinstance(kws.get("dest"), ast.Constant) else (long[0] if long else flags[0]).lstrip("-")
        name = "PET_" + dest.replace("-", "_").upper()
        default = kws.get("default")
        kind = "bool" if kws["action"].id == "check_env" else (
            "int" if isinstance(kws.get("type"), ast.Name) and kws["type"].id == "int" else "string")
        src = {"repo": "pytorch/pytorch", "path": "torch/distributed/run.py", "commit": commit, "line": node.lineno,
               "symbol": f"add_argument({', '.join(flags)})"}
        helptext = kws.get("help")
        meaning = ast.literal_eval(helptext) if isinstance(helptext, (ast.Constant, ast.JoinedStr)) and \
            isinstance(helptext, ast.Constant) else None
        out.append(entry(name, "torch", src, type=kind, parser={"int": "py_int", "bool": "py_truthy"}.get(kind, "py_str"),
                         default=None if not isinstance(default, ast.Constant) or default.value is None else str(default.value),
                         meaning=(f"torchrun {long[0] if long else flags[0]}, also read from {name}: " + (meaning or "")).strip()))
    return out


def mine_alloc_conf(torch_dir: str, commit: str) -> List[dict]:
    """PYTORCH_CUDA_ALLOC_CONF keys: the CUDA-specific keys of CUDAAllocatorConfig::getKeys() and the
    common keys the accelerator config parses (their names are in libc10.so, next to the parser)."""
    out = []
    hdr = os.path.join(torch_dir, "include", "c10", "cuda", "CUDAAllocatorConfig.h")
    text = open(hdr, encoding="utf-8").read()
    m = re.search(r"getKeys\(\)\s*\{[^{]*\{(.*?)\};", text, re.S)
    cuda_keys = []
    if m:
        body = re.sub(r"//[^\n]*", "", m.group(1))
        cuda_keys = ["".join(parts) for parts in re.findall(r'((?:"[a-z_]+"\s*)+)', body)]
        cuda_keys = [re.sub(r'"\s*"', "", k).strip('" \n') for k in cuda_keys]
    line = text.count("\n", 0, m.start()) + 1 if m else None
    for key in cuda_keys:
        src = {"repo": "pytorch/pytorch", "path": "c10/cuda/CUDAAllocatorConfig.h", "commit": commit,
               "symbol": "CUDAAllocatorConfig::getKeys", "line": line}
        out.append(entry(key, "torch", src, kind="alloc_conf"))
    common = lib_strings(os.path.join(torch_dir, "lib", "libc10.so"),
                         r"(?:large_segment_size_mb|max_split_size_mb|max_non_split_rounding_mb|garbage_collection_threshold"
                         r"|roundup_power2_divisions|expandable_segments|pinned_use_background_threads"
                         r"|pinned_max_round_threshold_mb|pinned_max_cached_size_mb)")
    for key in common:
        src = {"repo": "pytorch/pytorch", "path": "c10/core/AllocatorConfig.cpp (key strings in torch/lib/libc10.so)",
               "commit": commit, "symbol": "AcceleratorAllocatorConfig::parseArgs"}
        out.append(entry(key, "torch", src, kind="alloc_conf"))
    return out


# ------------------------------------------------------------------------------------ CUDA, tokenizers

def mine_cuda(wheel: Optional[str]) -> Tuple[List[dict], dict]:
    confirmed = set()
    digest = version = None
    if wheel:
        digest = hashlib.sha256(open(wheel, "rb").read()).hexdigest()
        version = re.search(r"-(\d+\.\d+\.\d+)-", os.path.basename(wheel)).group(1)
        with zipfile.ZipFile(wheel) as z:
            for n in z.namelist():
                if re.search(r"libcudart\.so", n):
                    data = z.read(n)
                    confirmed |= {m.decode() for m in re.findall(rb"CUDA_[A-Z0-9_]{3,}", data)}
    out = []
    for name, spec in CUDA_DOC["variables"].items():
        src = {"repo": CUDA_DOC["repo"], "path": CUDA_DOC["path"], "commit": CUDA_DOC["commit"], "symbol": name}
        if name in confirmed:
            src["also"] = f"libcudart.so.12 strings, nvidia-cuda-runtime-cu12 {version} (sha256 {digest[:16]})"
        spec = dict(spec)
        if "class_" in spec:
            spec["class"] = spec.pop("class_")
        out.append(entry(name, "cuda", src, **spec))
    header = {"commit": CUDA_DOC["commit"], "how": CUDA_DOC["how"] + (
        f"; libcudart.so.12 of nvidia-cuda-runtime-cu12 {version} (wheel sha256 {digest}) names "
        f"{', '.join(sorted(confirmed)) or 'none'} in clear" if wheel else "")}
    return out, header


def mine_tokenizers(site: str, version: str) -> List[dict]:
    out = []
    known_aliases = {a for e in KNOWLEDGE.values() if isinstance(e, dict) for a in e.get("aliases") or ()}
    for d, _, fs in os.walk(os.path.join(site, "tokenizers")):
        for f in fs:
            if f.endswith(".so"):
                rel = os.path.relpath(os.path.join(d, f), site)
                data = open(os.path.join(d, f), "rb").read()
                found = set()
                for run in re.findall(rb"(?:TOKENIZERS|RAYON)_[A-Z0-9_]{3,}", data):
                    # Rust packs string constants without separators: "RAYON_NUM_THREADSRAYON_RS_NUM_CPUS"
                    found |= {p.decode() for p in re.findall(rb"(?:TOKENIZERS|RAYON)_(?:(?!TOKENIZERS_|RAYON_)[A-Z0-9_])+", run)}
                # a constant packed against the next string's capital ("..._CPUSGlobalPool") is the
                # shorter name plus one stray letter
                found = {n for n in found if not (n[:-1] in found or n[:-1] in known_aliases)}
                for name in sorted(found):
                    src = {"repo": "huggingface/tokenizers", "path": f"{rel} (strings of the built extension)",
                           "commit": f"v{version}", "symbol": name}
                    out.append(entry(name, "tokenizers", src, type="unknown", parser="string"))
    return out


# ------------------------------------------------------------------------------------ merge

OWNERS = (("NCCL_", "nccl"), ("TORCH_", "torch"), ("PYTORCH_", "torch"), ("TORCHELASTIC_", "torch"), ("PET_", "torch"),
          ("GLOO_", "torch"), ("CUDA_", "cuda"), ("TOKENIZERS_", "tokenizers"), ("RAYON_", "tokenizers"),
          ("ACCELERATE_", "accelerate"), ("TRANSFORMERS_", "transformers"), ("DS_", "deepspeed"),
          ("DEEPSPEED_", "deepspeed"))


# torch's launchers set these, whoever else reads them
OWNER_EXACT = {n: "torch" for n in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                                    "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME",
                                    "OMP_NUM_THREADS")}


def owner(name: str) -> Optional[str]:
    return OWNER_EXACT.get(name) or next((fam for prefix, fam in OWNERS if name.startswith(prefix)), None)


def merge(entries: List[dict]) -> List[dict]:
    """One entry per name. The family that owns the name's prefix (NCCL_ -> NCCL) is its reader of record,
    else the first source; the others are kept under `also_read_by`. KNOWLEDGE overlays; an old spelling
    listed as an alias is not an entry of its own."""
    groups: Dict[str, List[dict]] = {}
    for e in entries:
        groups.setdefault(e["id"], []).append(e)
    by: Dict[str, dict] = {}
    for key, group in groups.items():
        own = owner(group[0]["name"]) if group[0].get("kind", "env") == "env" else None
        group = sorted(group, key=lambda e: 0 if e["family"] == own else 1)
        base = dict(group[0])
        for e in group[1:]:
            if e["family"] != base["family"]:
                also = {"family": e["family"], "repo": e["source"]["repo"], "path": e["source"]["path"],
                        "line": e["source"].get("line")}
                if also not in base.setdefault("also_read_by", []):
                    base["also_read_by"].append(also)
                continue
            for k, v in e.items():
                if base.get(k) in (None, "unknown", "string", "py_str") and v is not None and \
                        not (k in ("type", "parser") and v in ("unknown", "string", "py_str")):
                    base[k] = v
        by[key] = base
    for key, over in KNOWLEDGE.items():
        if "/" in key:  # "NAME/field": one field of an entry
            name, field = key.split("/", 1)
            by[name][field] = over
            continue
        e = by.get(key)
        if e is None:
            if "source" not in over:
                raise SystemExit(f"KNOWLEDGE names {key}, which no source mined, without a source of its own")
            e = by[key] = {"id": key, "name": key.split(":", 1)[-1], "kind": "env" if ":" not in key else key.split(":")[0]}
        for k, v in over.items():
            e["class" if k == "class_" else k] = v
    aliases = {a for e in by.values() for a in e.get("aliases") or ()}
    for a in aliases:
        by.pop(a, None)
    for e in by.values():
        e.setdefault("class", classify(e))
        e.setdefault("type", "unknown")
        e.setdefault("parser", "string")
        if not e.get("meaning"):
            e["meaning"] = default_meaning(e)
        e["examples"] = e.get("examples") or [example(e)]
    return sorted(by.values(), key=lambda e: (e["family"], e["id"]))


CLASS_PATTERNS = (
    (r"DEBUG|TRACE|LOG|DUMP|VERBOSE|PROFIL|BLOCKING|DESYNC|CHECK", "debug"),
    (r"SOCKET|IFNAME|_IB_|NET|ADDR|PORT|HOST|RDZV|MASTER", "network"),
    (r"P2P|SHM|NVLS|CUMEM|NVB|COLLNET|PXN|GDR|TRANSPORT", "transport"),
    (r"TIMEOUT|RETRY|HEARTBEAT|MILSEC|WAIT", "timeout"),
    (r"THREAD|NPROC|WORKERS|PARALLEL", "threads"),
    (r"ALLOC|MEMORY|CACHE|BUFF", "memory"),
    (r"RANK|WORLD|NNODES|NODE_|LOCAL_", "launcher"),
)


def classify(e: dict) -> str:
    if e.get("kind") == "alloc_conf":
        return "memory"
    for pattern, cls in CLASS_PATTERNS:
        if re.search(pattern, e["name"]):
            return cls
    return "behaviour"


def default_meaning(e: dict) -> str:
    reader = {"nccl_int": "an integer (strtoll: a word reads as 0)", "string": "a string",
              "py_int": "an integer (int(); anything else raises)", "str_to_bool": "a boolean (yes/no/true/false/1/0)",
              "py_truthy": "a boolean (a set of true words)", "py_switch": "a switch compared with fixed values",
              "presence": "whether it is set at all", "c10d_cvar": "torch's getCvar*"}.get(e.get("parser"), e.get("parser"))
    who = {"nccl": "NCCL", "torch": "torch", "cuda": "the CUDA runtime", "transformers": "transformers",
           "accelerate": "accelerate", "tokenizers": "tokenizers", "deepspeed": "DeepSpeed"}.get(e["family"], e["family"])
    if e.get("kind") == "alloc_conf":
        return f"A key of PYTORCH_CUDA_ALLOC_CONF / PYTORCH_ALLOC_CONF read by torch's CUDA caching allocator."
    return f"Read by {who} as {reader}" + (f"; default {e['default']}" if e.get("default") not in (None, "") else "") + "."


def example(e: dict) -> str:
    if e.get("kind") == "alloc_conf":
        return f"PYTORCH_CUDA_ALLOC_CONF={e['name']}:{e.get('example_value', 'True')}"
    value = e.get("example_value")
    if value is None:
        value = {"enum": (e.get("values") or ["x"])[0], "bool": "1", "switch": "1", "presence": "1",
                 "int": "1", "float": "0.5"}.get(e.get("type"), None)
        if e.get("default") not in (None, "") and e.get("type") in ("int", "string", "unknown", "float"):
            value = str(e["default"])
        if value is None:
            value = "1" if e.get("parser") in ("nccl_int",) else "x"
    return f"{e['name']}={value}"


def add_nccl(path: str, gitdir: str, extra_refs: List[str]) -> int:
    """Print the catalogue at `path` with the NCCL names it does not hold yet (mined from `gitdir`'s tags, HEAD and
    `extra_refs`), each finished as merge() finishes an entry; the other entries are left as they are."""
    with open(path, encoding="utf-8") as fh:
        doc = json.load(fh)
    have = {e["name"] for e in doc["entries"]} | {a for e in doc["entries"] for a in e.get("aliases") or ()}
    nccl, header = mine_nccl(gitdir, extra_refs)
    for e in nccl:
        if e["name"] in have:
            continue
        for k, v in (KNOWLEDGE.get(e["id"]) or {}).items():
            e["class" if k == "class_" else k] = v
        e.setdefault("class", classify(e))
        if not e.get("meaning"):
            e["meaning"] = default_meaning(e)
        e["examples"] = e.get("examples") or [example(e)]
        at = max((i for i, o in enumerate(doc["entries"]) if o["family"] == "nccl" and o["id"] < e["id"]), default=-1)
        doc["entries"].insert(at + 1, e)  # beside its neighbours; the rest of the file keeps its order
    doc["sources"]["NVIDIA/nccl"] = header
    json.dump(doc, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nccl-git", required=True)
    p.add_argument("--nccl-ref", action="append", default=[],
                   help="a branch mined after HEAD for names no release reads yet (NVIDIA/nccl's dev: the next minor)")
    p.add_argument("--add-nccl-to", default=None, metavar="SETTINGS_JSON",
                   help="print SETTINGS_JSON with the NCCL names it lacks added (nothing else re-mined)")
    p.add_argument("--deepspeed-git")
    p.add_argument("--site", help="site-packages with torch, transformers, accelerate, tokenizers")
    p.add_argument("--cudart-wheel", default=None)
    args = p.parse_args(argv)
    if args.add_nccl_to:
        return add_nccl(args.add_nccl_to, args.nccl_git, args.nccl_ref)
    if not (args.deepspeed_git and args.site):
        p.error("--deepspeed-git and --site are required (or --add-nccl-to)")

    sys.path.insert(0, args.site)
    from importlib import metadata

    torch_dir = os.path.join(args.site, "torch")
    torch_commit = re.search(r"git_version\s*=\s*'([0-9a-f]+)'", open(os.path.join(torch_dir, "version.py")).read()).group(1)
    versions = {d: metadata.version(d) for d in ("torch", "transformers", "accelerate", "tokenizers")}
    sources: dict = {}
    entries: List[dict] = []

    nccl, sources["NVIDIA/nccl"] = mine_nccl(args.nccl_git, args.nccl_ref)
    entries += nccl

    torch_entries = mine_torch_headers(torch_dir, torch_commit)
    for rel in PYTHON_SCANS["torch"]:
        torch_entries += scan_python(args.site, [rel], "torch", "pytorch/pytorch", torch_commit, "",
                                     keep=lambda n: not n.startswith(("NCCL_",)) or n in ("NCCL_DEBUG",))
    torch_entries += mine_torchrun(torch_dir, torch_commit)
    torch_entries += mine_alloc_conf(torch_dir, torch_commit)
    torch_entries += mine_torch_libs(torch_dir, torch_commit, {e["name"] for e in torch_entries})
    for e in torch_entries:
        if e["source"]["path"].startswith("torch/") and not e["source"]["path"].startswith("torch/csrc") \
                and not e["source"]["path"].startswith("torch/lib"):
            pass
    entries += torch_entries
    sources["pytorch/pytorch"] = {"commit": torch_commit, "ref": f"v{versions['torch'].split('+')[0]} (the wheel's "
                                  "torch.version.git_version)", "how": "ast of torch/distributed, torch/utils/data, "
                                  "torch/cuda, torch/multiprocessing; torch/include c10d headers; torchrun's PET_ "
                                  "options; PYTORCH_CUDA_ALLOC_CONF keys from c10 headers and libc10.so; other "
                                  "TORCH_*/PYTORCH_* names from the strings of torch/lib/*.so"}
    for fam, repo in (("transformers", "huggingface/transformers"), ("accelerate", "huggingface/accelerate")):
        entries += scan_python(args.site, PYTHON_SCANS[fam], fam, repo, f"v{versions[fam]}", "src/")
        sources[repo] = {"commit": f"v{versions[fam]}", "how": f"ast of the installed {fam} {versions[fam]} "
                                                              "(its release tag; the wheel carries no commit)"}
    entries += mine_tokenizers(args.site, versions["tokenizers"])
    sources["huggingface/tokenizers"] = {"commit": f"v{versions['tokenizers']}", "how": "strings of the compiled "
                                         "extension of the installed tokenizers (the reader is Rust)"}
    ds_commit = git(args.deepspeed_git, "rev-parse", "HEAD").strip()
    ds_root = os.path.join(os.environ.get("TMPDIR", "/tmp"), "ddpdoctor-mine-deepspeed")
    os.makedirs(ds_root, exist_ok=True)
    for path in git(args.deepspeed_git, "ls-tree", "-r", "--name-only", "HEAD", "--", "deepspeed").split():
        if path.endswith(".py"):
            dest = os.path.join(ds_root, path)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with open(dest, "w", encoding="utf-8") as fh:
                fh.write(git(args.deepspeed_git, "show", f"HEAD:{path}"))
    entries += scan_python(ds_root, ["deepspeed"], "deepspeed", "deepspeedai/DeepSpeed", ds_commit, "",
                           keep=lambda n: not n.startswith(("NCCL_", "CUDA_", "TORCH_", "PYTORCH_", "LOCAL_", "RANK",
                                                            "WORLD_", "MASTER_", "OMPI_", "SLURM_", "PMI_", "MV2_")))
    sources["deepspeedai/DeepSpeed"] = {"commit": ds_commit, "how": "ast of deepspeed/ at HEAD (names of other "
                                        "families' variables it reads are left to their owners)"}
    cuda, sources[CUDA_DOC["repo"]] = mine_cuda(args.cudart_wheel)
    entries += cuda
    sources["gcc-mirror/gcc"] = {"commit": "libgomp in torch " + versions["torch"],
                                 "how": "OMP_NUM_THREADS, read by the libgomp torch ships (its name in the library's strings)"}
    sources["rayon-rs/rayon"] = {"commit": "rayon-core linked into tokenizers " + versions["tokenizers"],
                                 "how": "the names are in the strings of tokenizers' compiled extension"}
    for repo, meta in TORCH_DOC_FACTS["sources"].items():
        sources.setdefault(repo, meta)
    merged = merge(entries)
    for e in merged:  # what KNOWLEDGE quotes from a built library must be in it
        for need in (e.get("needs_capability") or {}).values():
            nv = need.get("verify")
            if nv and nv["path"].startswith("site:"):
                text = open(os.path.join(args.site, nv["path"][5:]), "rb").read()
                gone = [t for t in nv["strings"] if t.encode() not in text]
                if gone:
                    raise SystemExit(f"{e['id']} needs_capability: {gone} not in {nv['path']}")
        v = e.get("verify")
        if not v:
            continue
        if v["path"].startswith("torch/lib/"):
            lib = os.path.join(torch_dir, "lib", v["path"].split()[0].split("/")[-1])
            data, where = open(lib, "rb").read(), lib
        elif v["path"].startswith("site:"):
            where = os.path.join(args.site, v["path"][5:])
            data = open(where, "rb").read()
        elif v["path"].startswith("nccl:"):
            where = v["path"][5:]
            data = "\n".join(git(args.nccl_git, "show", f"{ref}:{where}") for ref in nccl_tags(args.nccl_git)[-3:]
                             if where in git(args.nccl_git, "ls-tree", "-r", "--name-only", ref)).encode()
        else:
            continue
        missing = [t for t in v["strings"] if t.encode() not in data]
        if missing:
            raise SystemExit(f"{e['id']}: {missing} not in {where}")
    doc = {"schema": "ddpdoctor/catalogue/1", "name": "settings", "sources": sources, "entries": merged}
    json.dump(doc, sys.stdout, indent=1, sort_keys=False)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
