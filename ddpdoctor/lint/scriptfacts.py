"""Facts the machine checks want from the training scripts of `check --script`, read from lint's own index
(analysis.ModuleIndex: its env_sets and calls), never by running the script.

- `env_sets`: environment variables the script sets to a literal (`os.environ["CUDA_VISIBLE_DEVICES"] = "3,2,1,0"`,
  `os.environ.setdefault(...)`, `os.environ.update(...)`, `os.putenv(...)`), with file and line. CUDA reads
  CUDA_VISIBLE_DEVICES from the process environment when it initialises, so a value the script sets before its
  first CUDA call is the one the job runs with, whatever the shell said (yqyao/SSD_Pytorch#4).
- `loader_workers`: the largest literal `num_workers=` of a DataLoader call, with file and line: each worker is a
  process of its own (torch/utils/data/dataloader.py _MultiProcessingDataLoaderIter), counted against ulimit -u and
  the cgroup's pids.max.
Only literals count: a value computed at run time is not guessed.
"""
from __future__ import annotations

import ast
from typing import List

from ddpdoctor.lint.analysis import ModuleIndex
from ddpdoctor.lint.source import InputProblem, collect, read

ENV_NAMES = ("CUDA_VISIBLE_DEVICES",)  # the variables a machine check judges from the script


def _how(node) -> str:
    if isinstance(node, ast.Call):
        func = node.func
        return func.attr if isinstance(func, ast.Attribute) else "call"
    return "assign"


def script_facts(paths: List[str]) -> dict:
    env_sets: list = []
    workers = None
    files, _problems, _missing = collect(list(paths))
    for path in files:
        script = read(path)
        if isinstance(script, InputProblem):
            continue
        index = ModuleIndex(script.tree, script.path, script.text)
        for e in index.env_sets:
            if e.name in ENV_NAMES and isinstance(e.value, ast.Constant) and isinstance(e.value.value, (str, int)):
                env_sets.append({"name": e.name, "value": str(e.value.value), "path": script.path,
                                 "line": e.node.lineno, "how": _how(e.node)})
        for call in index.by_name.get("DataLoader", ()):
            n = call.kw("num_workers")
            if isinstance(n, ast.Constant) and isinstance(n.value, int) and not isinstance(n.value, bool):
                if workers is None or n.value > workers["count"]:
                    workers = {"count": n.value, "path": script.path, "line": call.line}
    return {"env_sets": env_sets, "loader_workers": workers}
