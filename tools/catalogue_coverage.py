"""How many of a primary source file's failure messages the messages catalogue recognises (issue 24, round 8).

For each source file: the messages tools/mine_messages.py extracts from it (the same extractors: NCCL's WARN(...)
formats, Python raise / logger.error / logger.warning / warnings.warn texts, a shared library's strings attributed
to their __FILE__), each filled as tools/mine_messages.fill does and prefixed as it appears in a log (NCCL's
"host:pid:tid [dev] NCCL WARN ", an exception's type), then asked of `messages.match_all`. A message counts as
covered when some catalogue entry recognises the filled line. "Failure messages" of a library's strings are the
ones whose words say so (fail, error, timed out, refused, invalid, unable, cannot, expected ...): an approximation,
said as one.

    python tools/catalogue_coverage.py --nccl DIR --deepspeed DIR [--missing]

DIR: a git archive of the catalogue's commit of that repo (its `sources` table names it). torch, accelerate and
transformers are read from the installed packages (the catalogue's torch 2.13.0 and accelerate are those).
"""
from __future__ import annotations

import argparse
import glob
import os
import re
import sys
from typing import Dict, List, Tuple

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mine_messages as mm  # noqa: E402
from ddpdoctor.facts import messages  # noqa: E402

_FAILURE = re.compile(r"\b(?:fail\w*|error|timed out|timeout|refused|invalid|unable|cannot|can't|could not|expected|"
                      r"not (?:found|supported|available|set|initialized)|mismatch|abort\w*|exceed\w*|unknown)\b", re.I)


def _covered(line: str) -> bool:
    return bool(messages.match_all(line))


def _fills(parts) -> List[str]:
    """The message filled as the miner fills it, then with every hole a number, then an address: a pattern that
    wants digits where the miner's fill put "x" is still the message's (the coverage is of the catalogue, not of
    the fill)."""
    out = [mm.fill(parts).strip()]
    for v in ("7", "10.1.0.11:29500", "node-a"):
        out.append("".join(t if k == "lit" else v for k, t in parts).strip())
    return out


def _row(cands, prefix) -> Tuple[int, int, List[str]]:
    seen, total, hit, miss = set(), 0, 0, []
    for c in cands:
        fills = _fills(c.parts)
        text = fills[0]
        if not text or text in seen:
            continue
        seen.add(text)
        total += 1
        if any(_covered(prefix(c) + t) for t in fills):
            hit += 1
        else:
            miss.append(text[:140])
    return total, hit, miss


def nccl_rows(root: str) -> Dict[str, tuple]:
    out = {}
    for path in sorted(glob.glob(os.path.join(root, "src", "**", "*.cc"), recursive=True)):
        rel = os.path.relpath(path, root)
        cands = list(mm.c_messages(root, [rel], "NVIDIA/nccl", ("WARN",)))
        if cands:
            out[rel] = _row(cands, lambda c: "node-a:48213:48290 [3] NCCL WARN ")
    return out


def _py_prefix(c) -> str:
    return c.how.split(":", 1)[1] + ": " if c.how.startswith("raise:") else ""


def python_rows(root: str, rels: List[str], repo: str) -> Dict[str, tuple]:
    out = {}
    for rel in rels:
        cands = [c for c in mm.python_messages(root, [rel], repo)
                 if c.how.startswith("raise:") or c.how in ("log:error", "log:warning", "warn")]
        out[rel] = _row(cands, _py_prefix)
    return out


def library_rows(lib: str, paths: Tuple[str, ...]) -> Dict[str, tuple]:
    by: Dict[str, list] = {}
    for c in mm.binary_strings(lib, "pytorch/pytorch"):
        base = os.path.basename(c.path)
        if base in paths and _FAILURE.search(c.text):
            by.setdefault(base, []).append(c)
    return {p: _row(cs, lambda c: "RuntimeError: ") for p, cs in sorted(by.items())}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nccl")
    ap.add_argument("--deepspeed")
    ap.add_argument("--missing", action="store_true", help="list the messages no entry recognises")
    a = ap.parse_args(argv)
    import accelerate
    import torch

    tdir = os.path.dirname(torch.__file__)
    groups = []
    if a.nccl:
        groups.append(("NCCL WARN formats (NVIDIA/nccl src/**/*.cc)", nccl_rows(a.nccl)))
    groups.append(("torch elastic agent / launcher (installed torch %s)" % torch.__version__, python_rows(
        os.path.dirname(tdir), ["torch/distributed/elastic/agent/server/api.py",
                                "torch/distributed/elastic/agent/server/local_elastic_agent.py",
                                "torch/distributed/elastic/multiprocessing/api.py",
                                "torch/distributed/elastic/rendezvous/dynamic_rendezvous.py",
                                "torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py",
                                "torch/distributed/run.py"], "pytorch/pytorch")))
    groups.append(("torch c10d C++ (libtorch_cpu.so strings near each __FILE__; failure words only)", library_rows(
        os.path.join(tdir, "lib", "libtorch_cpu.so"),
        ("TCPStore.cpp", "TCPStoreBackend.cpp", "TCPStoreLibUvBackend.cpp", "socket.cpp", "ProcessGroupGloo.cpp",
         "Utils.hpp", "reducer.cpp"))))
    if a.deepspeed:
        groups.append(("DeepSpeed launcher (deepspeed/launcher)", python_rows(
            a.deepspeed, ["deepspeed/launcher/launch.py", "deepspeed/launcher/runner.py",
                          "deepspeed/launcher/multinode_runner.py"], "deepspeedai/DeepSpeed")))
    adir = os.path.dirname(os.path.dirname(accelerate.__file__))
    groups.append(("accelerate state / launch (installed accelerate %s)" % accelerate.__version__, python_rows(
        adir, ["accelerate/state.py", "accelerate/commands/launch.py", "accelerate/utils/launch.py"],
        "huggingface/accelerate")))
    for title, rows in groups:
        tot = sum(r[0] for r in rows.values())
        hit = sum(r[1] for r in rows.values())
        print(f"\n## {title}: {hit}/{tot} recognised")
        for rel, (n, h, miss) in sorted(rows.items(), key=lambda kv: -kv[1][0]):
            if n:
                print(f"  {rel}: {h}/{n}")
                if a.missing:
                    for m in miss:
                        print(f"      - {m}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
