"""Add each setting's release history to the settings catalogue (ddpdoctor/data/settings.json).

tools/mine_settings.py reads every reader at one release (the installed torch, transformers and
accelerate; NCCL at all its tags). This pass reads the earlier releases of torch, transformers and
accelerate, so that `check` can tell which names the *installed* release reads:

* torch: one wheel per minor release (the last patch of each, from PyPI; any platform: the macOS
  wheels are small and carry the same Python sources and C++ headers), each unpacked into
  RELEASES/<version>/ with torch/include, torch/distributed, torch/utils/data, torch/cuda,
  torch/multiprocessing and the strings of torch/lib's libraries (`strings -n 6 lib > lib.strings`).
  A name is *seen* in a release when it is a string literal of those sources or headers or a token of
  the libraries' strings. For a catalogue entry seen in the newest release, `history.first` is the
  first release it is seen in (absent when it is seen in the oldest one: its age is not known); an
  alias (a deprecated old spelling) gets `alias_since` = the first release of its new name, when the old
  one is older. The CUDA caching allocator's own reads (`c10::utils::get_env("...")` in
  c10/cuda/CUDAAllocatorConfig.h) give `cuda_allocator_since` for each allocator-config variable.
  Only minor releases are compared (2.9.0 and 2.9.1 are "2.9"), and a name the macOS build cannot show
  (read only in libtorch_cuda) gets no history, rather than a wrong one.
* transformers and accelerate: the Python sources of the last patch of every minor release
  (RELEASES/<package>-<version>/), read with mine_settings.EnvReads (os.environ / getenv calls). A
  catalogue entry gets `history.first` as for torch; a name under the package's own prefix
  (TRANSFORMERS_, ACCELERATE_) that older releases read and the newest does not becomes an entry with
  `retired` = {reader, last, removed_in}, so `check` can say that the installed release ignores it.

    python tools/mine_settings_history.py --torch RELEASES --hf RELEASES \
        < ddpdoctor/data/settings.json > settings.new.json

Nothing is downloaded here; the unpacked releases are inputs.
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import re
import sys
from typing import Dict, List, Optional, Set, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from mine_settings import NAME, EnvReads  # noqa: E402

TORCH_PREFIXES = ("TORCH_", "PYTORCH_", "TORCHELASTIC_", "PET_", "GLOO_", "NCCL_", "CUDA_", "OMP_")
TOKEN = re.compile(r"\b((?:" + "|".join(p.rstrip("_") for p in TORCH_PREFIXES) + r")_[A-Z0-9_]*[A-Z0-9])\b")
TORCH_SOURCE_DIRS = ("torch/include/c10", "torch/include/torch/csrc/distributed", "torch/distributed",
                     "torch/utils/data", "torch/cuda", "torch/multiprocessing")
OWN_PREFIX = {"transformers": ("TRANSFORMERS_",), "accelerate": ("ACCELERATE_",),
              "torch": ("TORCH_", "PYTORCH_", "TORCHELASTIC_", "PET_", "GLOO_")}
# names only ROCm / XPU builds read: the mined wheels are CUDA and macOS builds, so their history is unknown
OTHER_BUILDS = re.compile(r"HIP|ROCM|MIOPEN|XPU")


def own(name: str, reader: str) -> bool:
    """History is kept only for names under the reader's own prefixes: a name such as LOCAL_WORLD_SIZE
    that accelerate started to read in 0.27 was read by torch long before, so its age says nothing."""
    return name.startswith(OWN_PREFIX[reader]) and not (reader == "torch" and OTHER_BUILDS.search(name))


def vkey(v: str) -> Tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v))


def minor(v: str) -> str:
    return ".".join(v.split(".")[:2])


# ------------------------------------------------------------------------------------ torch

def torch_seen(release_dir: str) -> Set[str]:
    """Every env-like name in one unpacked torch release: libraries' strings, headers, Python sources."""
    seen: Set[str] = set()
    libdir = os.path.join(release_dir, "torch", "lib")
    for f in sorted(os.listdir(libdir)) if os.path.isdir(libdir) else []:
        if f.endswith(".strings"):
            with open(os.path.join(libdir, f), encoding="utf-8", errors="replace") as fh:
                seen.update(TOKEN.findall(fh.read()))
    for rel in TORCH_SOURCE_DIRS:
        for d, _, files in os.walk(os.path.join(release_dir, rel)):
            for f in files:
                if not f.endswith((".h", ".hpp", ".py", ".cuh")):
                    continue
                with open(os.path.join(d, f), encoding="utf-8", errors="replace") as fh:
                    text = fh.read()
                seen.update(m for m in re.findall(r"[\"']([A-Z][A-Z0-9_]{3,})[\"']", text) if TOKEN.fullmatch(m))
    return seen


def cuda_allocator_reads(release_dir: str) -> List[str]:
    """The variables CUDAAllocatorConfig::instance() reads in this release (c10/cuda/CUDAAllocatorConfig.h)."""
    path = os.path.join(release_dir, "torch", "include", "c10", "cuda", "CUDAAllocatorConfig.h")
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8", errors="replace") as fh:
        text = fh.read()
    # ROCm builds only: not what a CUDA build reads (and ROCm builds are not mined)
    text = re.sub(r"#ifdef USE_ROCM.*?#endif", "", text, flags=re.S)
    return re.findall(r"get_env\(\s*\"([A-Z_]+)\"\s*\)", text) + re.findall(r"getenv\(\s*\"([A-Z_]+)\"\s*\)", text)


def cuda_allocator_since(name: str, releases: List[str], seen: Dict[str, Set[str]],
                         alloc: Dict[str, List[str]]) -> Optional[str]:
    """The first minor release whose CUDA allocator reads `name`, when every earlier release is known not
    to: its CUDAAllocatorConfig.h reads other names and not this one, or the name is nowhere in it.
    (Releases whose header reads nothing kept the read in the .cpp: unknown, so no claim.)"""
    reading = [r for r in releases if name in alloc[r]]
    if not reading or name not in alloc[releases[-1]]:
        return None
    for r in releases[:releases.index(reading[0])]:
        if name in seen[r] and not alloc[r]:
            return None
    return minor(reading[0]) if reading[0] != releases[0] else None


def torch_history(root: str) -> dict:
    releases = sorted((d for d in os.listdir(root) if re.fullmatch(r"\d+\.\d+\.\d+", d)), key=vkey)
    # a release counts only with the Linux build's libraries too (libtorch_cuda holds ProcessGroupNCCL's reads)
    releases = [r for r in releases if os.path.exists(os.path.join(root, r, "linux.done"))]
    seen = {r: torch_seen(os.path.join(root, r)) for r in releases}
    alloc = {r: cuda_allocator_reads(os.path.join(root, r)) for r in releases}
    return {"releases": releases, "seen": seen, "alloc": alloc}


def first_seen(name: str, releases: List[str], seen: Dict[str, Set[str]]) -> Optional[str]:
    """The first minor release `name` is seen in, when the newest release has it and the oldest does not."""
    if not releases or name not in seen[releases[-1]] or name in seen[releases[0]]:
        return None
    return next(minor(r) for r in releases if name in seen[r])


# ------------------------------------------------------------------------------------ transformers, accelerate

def python_reads(root: str) -> Dict[str, str]:
    """name -> relative path of one read, for every literal env name a release's Python reads."""
    out: Dict[str, str] = {}
    for d, _, files in os.walk(root):
        if "/test" in d:
            continue
        for f in sorted(files):
            if not f.endswith(".py"):
                continue
            path = os.path.join(d, f)
            try:
                with open(path, encoding="utf-8") as fh:
                    text = fh.read()
                if "env" not in text.lower():
                    continue  # no env read here: every call EnvReads counts has "env" in its name
                tree = ast.parse(text)
            except (OSError, SyntaxError, UnicodeDecodeError):
                continue
            v = EnvReads(text)
            v.visit(tree)
            for hit in v.found:
                out.setdefault(hit["name"], os.path.relpath(path, root))
    return out


def literals(root: str) -> Set[str]:
    """Every quoted NAME-like string in the Python sources under root (a name still written anywhere:
    set for a child process, or read through a prefix such as "ACCELERATE_DYNAMO_" + "BACKEND")."""
    out: Set[str] = set()
    for d, _, files in os.walk(root):
        for f in files:
            if f.endswith(".py"):
                with open(os.path.join(d, f), encoding="utf-8", errors="replace") as fh:
                    out.update(re.findall(r"[\"']([A-Z][A-Z0-9_]{2,})[\"']", fh.read()))
    return out


def hf_history(root: str, package: str) -> dict:
    dirs = sorted((d for d in os.listdir(root) if d.startswith(package + "-") and not d.endswith(".tmp")),
                  key=lambda d: vkey(d[len(package) + 1:]))
    releases = [d[len(package) + 1:] for d in dirs]
    reads = {r: python_reads(os.path.join(root, d)) for r, d in zip(releases, dirs)}
    written = {r: literals(os.path.join(root, d)) for r, d in zip(releases, dirs)}
    return {"releases": releases, "seen": {r: set(v) for r, v in reads.items()}, "reads": reads,
            "written": written, "newest_literals": written[releases[-1]] if releases else set()}


# ------------------------------------------------------------------------------------ apply

def apply(doc: dict, torch_h: Optional[dict], hf: Dict[str, dict], other_readers: Set[str] = frozenset()) -> List[str]:
    """Add history fields to the catalogue in place; returns a log of what changed. `other_readers`:
    names that other installed libraries still read (huggingface_hub reads TRANSFORMERS_OFFLINE), which
    are never retired."""
    log: List[str] = []
    entries = doc["entries"]
    by_name = {e["name"]: e for e in entries if e.get("kind") == "env"}
    if torch_h:
        rel, seen = torch_h["releases"], torch_h["seen"]
        span = f"torch {rel[0]}..{rel[-1]}"
        for e in by_name.values():
            if e["family"] != "torch" or not own(e["name"], "torch"):
                continue
            first = first_seen(e["name"], rel, seen)
            if first:
                e["history"] = {"reader": "torch", "first": first, "mined": span}
            for old in e.get("aliases") or ():
                new_first = first_seen(e["name"], rel, seen)
                old_seen = [r for r in rel if old in seen[r]]
                if new_first and old_seen and vkey(minor(old_seen[0])) < vkey(new_first):
                    before = (e.get("alias_since") or {}).get(old)
                    e.setdefault("alias_since", {})[old] = new_first
                    if before != new_first:
                        log.append(f"{e['name']}: alias_since[{old}] {before} -> {new_first}")
            if e.get("parser") == "alloc_conf":
                since = cuda_allocator_since(e["name"], rel, seen, torch_h["alloc"])
                if since:
                    e["cuda_allocator_since"] = since
                    log.append(f"{e['name']}: cuda_allocator_since {since}")
        doc["sources"]["pytorch/pytorch (releases)"] = {
            "commit": "release tags v" + ", v".join(rel),
            "how": "the last patch of each minor release's PyPI wheel (macOS arm64: the same Python sources and "
                   "C++ headers, and libtorch_cpu/libc10/libtorch_python): string literals of torch/include/c10, "
                   "the c10d headers and torch/{distributed,utils/data,cuda,multiprocessing}, tokens of the "
                   "libraries' strings; the CUDA allocator's get_env() calls in c10/cuda/CUDAAllocatorConfig.h "
                   "(tools/mine_settings_history.py)"}
    for package, h in hf.items():
        rel, seen = h["releases"], h["seen"]
        if not rel:
            continue
        span = f"{package} {rel[0]}..{rel[-1]}"
        for e in by_name.values():
            if e["family"] != package or not own(e["name"], package):
                continue
            # first written anywhere, not first read by an env call: an older release may have read the
            # name through a prefix ("ACCELERATE_FSDP_" + key) or a helper EnvReads does not know
            first = first_seen(e["name"], rel, h["written"])
            if first:
                e["history"] = {"reader": package, "first": first, "mined": span}
        newest = seen[rel[-1]]
        gone = sorted({n for r in rel for n in seen[r]} - newest)
        for name in gone:
            if not name.startswith(OWN_PREFIX[package]) or name in by_name or name in other_readers \
                    or name in h["newest_literals"]:
                continue
            last = max((r for r in rel if name in seen[r]), key=vkey)
            after = rel[rel.index(last) + 1]
            first = next(r for r in rel if name in seen[r])
            path = h["reads"][last][name]
            e = {"id": name, "name": name, "kind": "env", "family": package,
                 "source": {"repo": f"huggingface/{package}", "path": "src/" + path, "commit": f"v{last}",
                            "symbol": name},
                 "type": "string", "parser": "string", "class": "behaviour",
                 "meaning": f"Read by {package} {minor(first) if first != rel[0] else 'up to'} {minor(last)}"
                            f"{'' if first == rel[0] else ' (first: ' + minor(first) + ')'}; "
                            f"{package} {minor(after)} and later do not read it.",
                 "retired": {"reader": package, "removed_in": minor(after), "last": minor(last)},
                 "examples": [f"{name}=x"]}
            if first != rel[0]:
                e["history"] = {"reader": package, "first": minor(first), "mined": span}
            entries.append(e)
            by_name[name] = e
            log.append(f"{name}: retired from {package} {minor(after)} (last read in {last})")
        repo = f"huggingface/{package} (releases)"
        doc["sources"][repo] = {"commit": "release tags v" + ", v".join(rel),
                                "how": f"ast of the Python sources of the last patch of each minor release of {package} "
                                       "(PyPI wheels), env reads as in tools/mine_settings.py"}
    return log


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--torch", default=None, help="folder of unpacked torch releases, one folder per version")
    p.add_argument("--hf", default=None, help="folder of unpacked transformers-X / accelerate-X releases")
    p.add_argument("--other-reader", action="append", default=[],
                   help="sources of a library that reads these names on their behalf (huggingface_hub)")
    args = p.parse_args(argv)
    doc = json.load(sys.stdin)
    torch_h = torch_history(args.torch) if args.torch else None
    hf = {pkg: hf_history(args.hf, pkg) for pkg in ("transformers", "accelerate")} if args.hf else {}
    others: Set[str] = set()
    for root in args.other_reader:
        others |= literals(root)
    for line in apply(doc, torch_h, hf, others):
        print(line, file=sys.stderr)
    json.dump(doc, sys.stdout, indent=1, sort_keys=False)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
