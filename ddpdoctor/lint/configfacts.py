"""Facts the machine checks want from the job's configuration files (`check --config FILE`, YAML or JSON), read as
data, never run: the GPU ordinals and counts a config names, and the process count it launches. They join the script
facts (lint.scriptfacts) under the same names, so GPU019 and GPU016 judge them as they judge a script's literals.

- `gpu_indices`: a key that names GPUs by id - `gpu_ids` (accelerate's config: "0,1" or "all"; huggingface/accelerate
  src/accelerate/commands/config/config_args.py @6a0677cc ClusterConfig.gpu_ids), `gpu`, `gpu_id`, `device_ids`,
  `device_id` - with an int, a list of ints or "1,3"; `gpus` / `devices` (Lightning's Trainer: "a positive number
  (int or str), a sequence of device indices (list or str)", src/lightning/pytorch/trainer/trainer.py @d2bf065f:
  an int or "2" is a count, a list or "1,3" are ids) and `num_gpus`, `n_gpu`, `ngpu`, `gpu_count` (counts: ordinal
  N-1); any "cuda:N" string value.
- `world_args`: `num_processes` (accelerate's ClusterConfig.num_processes: the processes of all `num_machines`, so
  divided by num_machines for one machine), `world_size`, `nprocs`, `nproc_per_node` with an int above 1.
- `node_args`: `num_nodes` (Lightning's Trainer) and `num_machines` (accelerate's ClusterConfig) with an int: the
  nodes the job expects, which a SLURM allocation must match ("#SBATCH --nodes=4  # This needs to match
  Trainer(num_nodes=...)", Lightning-AI/pytorch-lightning docs/source-pytorch/clouds/cluster_advanced.rst @015e1676).
- `precision` and `attention` (what the job asks of the GPU, as lint.scriptfacts reads them from a script's literals):
  `bf16: true` / `tf32: true` / `fp16: true` (HF TrainingArguments-style YAML: axolotl, LLM-Finetuning-Toolkit), a
  DeepSpeed config's `"bf16": {"enabled": true}`, `mixed_precision: bf16|fp8` (accelerate's config and
  Accelerator-style keys); `flash_attention: true` (axolotl) or `attn_implementation: flash_attention_2`. A key read
  off any nesting level, whatever tool reads it: the findings say which file and key they came from.
A value the config computes (Hydra's `${...}` interpolation) or "all"/"auto" is not guessed.
"""
from __future__ import annotations

import json
import re
from typing import List

_ID_KEYS = re.compile(r"^(gpu|gpu_?ids?|device_?ids?)$", re.I)
_IDS_OR_COUNT = re.compile(r"^(gpus|devices)$", re.I)
_COUNT_KEYS = re.compile(r"^(num_?gpus?|n_?gpus?|ngpus?|gpu_?count)$", re.I)
_WORLD_KEYS = re.compile(r"^(num_?processes|world_?size|n_?procs?|nproc_?per_?node)$", re.I)
_CUDA_N = re.compile(r"^cuda:(\d+)$")
_NODE_KEYS = re.compile(r"^(num_?nodes|num_?machines)$", re.I)


def _ids(value) -> List[int]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [value] if value >= 0 else []
    if isinstance(value, str) and re.fullmatch(r"\s*\d+(\s*,\s*\d+)*\s*,?\s*", value):
        return [int(x) for x in value.split(",") if x.strip()]
    if isinstance(value, list) and value and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0
                                                 for x in value):
        return list(value)
    return []


def _load(path: str):
    from ddpdoctor.model.inputs import open_input, read_limited

    with open_input(path) as fh:   # a FIFO (`--config <(...)`) is read under the idle bound, never waited on forever
        text = read_limited(fh, 64 * 2 ** 20).decode("utf-8")
    if path.endswith(".json"):
        return json.loads(text)
    try:
        import yaml
    except ImportError:  # PyYAML comes with transformers; JSON is a subset of YAML 1.2 for the plain cases
        return json.loads(text)
    return yaml.safe_load(text)


def config_facts(paths: List[str]) -> dict:
    """{"gpu_indices": [...], "world_args": [...], "node_args": [...], "configs": [...], "errors": [...]} of the config files."""
    indices: list = []
    worlds: list = []
    nodes: list = []
    errors: list = []
    precision: list = []
    attention: list = []
    models: list = []
    for path in paths:
        try:
            doc = _load(path)
        except Exception as exc:  # noqa: BLE001 - a config that does not parse costs its facts, not the run
            errors.append({"path": path, "error": f"{type(exc).__name__}: {exc}"})
            continue

        def add(values, key, raw):
            indices.extend({"index": i, "path": path, "line": 0, "what": f"{key}: {raw!r}"} for i in values)

        stack = [("", doc)]
        while stack:
            key, node = stack.pop()
            if isinstance(node, dict):
                for k, v in node.items():
                    k = str(k)
                    _asks(k, v, path, precision, attention)
                    if k in _model_options() and isinstance(v, str) and v.strip():
                        models.append({"key": k, "value": v.strip(), "path": path})  # the model it trains (check21)
                    if _NODE_KEYS.match(k) and isinstance(v, int) and not isinstance(v, bool) and v >= 1:
                        nodes.append({"flag": k, "value": v, "path": path, "line": 0, "source": "config"})
                    if _ID_KEYS.match(k):
                        add(_ids(v), k, v)
                    elif _IDS_OR_COUNT.match(k):
                        count = v if isinstance(v, int) and not isinstance(v, bool) else (
                            int(v) if isinstance(v, str) and v.strip().isdigit() else None)
                        if count is not None:
                            add([count - 1] if count > 0 else [], k, v)
                        else:
                            add(_ids(v), k, v)
                    elif _COUNT_KEYS.match(k) and isinstance(v, int) and not isinstance(v, bool):
                        add([v - 1] if v > 0 else [], k, v)
                    elif _WORLD_KEYS.match(k) and isinstance(v, int) and not isinstance(v, bool) and v > 1:
                        machines = node.get("num_machines") if k == "num_processes" else None
                        per = v // machines if isinstance(machines, int) and machines > 1 else v
                        if per > 1:
                            worlds.append({"flag": k, "default": per, "path": path, "line": 0, "source": "config"})
                    else:
                        stack.append((k, v))
            elif isinstance(node, list):
                stack.extend((key, x) for x in node)
            elif isinstance(node, str):
                m = _CUDA_N.match(node.strip())
                if m:
                    add([int(m.group(1))], key or "value", node)
    return {"gpu_indices": indices, "world_args": worlds, "node_args": nodes, "configs": list(paths), "errors": errors,
            "precision": precision, "attention": attention, "models": models}


def _model_options() -> frozenset:
    """The config keys that name the model a job trains (data/precision_calls.json model_config options)."""
    from ddpdoctor.facts.launch import model_config_table  # noqa: PLC0415

    return frozenset(model_config_table()["options"])


def _asks(key: str, value, path: str, precision: list, attention: list) -> None:
    """The precision / attention a config key asks for (see the module doc), appended as script-fact rows."""
    k = key.lower()
    if k in ("bf16", "tf32", "fp16") and (value is True or (isinstance(value, dict) and value.get("enabled") is True)):
        what = f"{key}: true" if value is True else f'"{key}": {{"enabled": true}}'
        precision.append({"precision": k, "path": path, "line": 0, "what": what})
    elif k == "mixed_precision" and isinstance(value, str) and value.strip().lower() in ("bf16", "fp8"):
        precision.append({"precision": value.strip().lower(), "path": path, "line": 0, "what": f"mixed_precision: {value}"})
    elif k == "flash_attention" and value is True:
        attention.append({"kernel": "flash_attention_2", "path": path, "line": 0, "what": "flash_attention: true"})
    elif k == "attn_implementation" and isinstance(value, str) and value.startswith("flash_attention"):
        attention.append({"kernel": value, "path": path, "line": 0, "what": f"attn_implementation: {value}"})
