"""Helpers shared by the runtime checks (runtime_*.py): one way to read rank, world and local
figures from the runtime sections, preferring what the live process saw over what env implies."""
from __future__ import annotations

from typing import Optional

from ddpdoctor.facts import ranks as _ranks
from ddpdoctor.facts.env import FALSY
from ddpdoctor.facts.ranks import LOCAL_HOSTS, local_ranks  # noqa: F401 - the one local-rank reading



def rt(snap) -> dict:
    return snap.get("runtime") or {}


def section(snap, name: str) -> dict:
    """A runtime section, or {} when absent/unavailable (for optional enrichment only)."""
    s = snap.get(name) or {}
    return {} if s.get("unavailable") or s.get("error") else s


def trainer_args(snap) -> dict:
    return section(snap, "runtime_trainer").get("args") or {}


def world_size(snap) -> int:
    return _ranks.world_size(snap).value


def my_rank(snap) -> Optional[int]:
    return _ranks.this_rank(snap).value


def rank_subject(snap) -> list:
    r = my_rank(snap)
    return [f"rank:{r}"] if r is not None else []


def usable_cpus(snap) -> Optional[int]:
    host = snap.get("host") or {}
    return host.get("usable_cpus") or rt(snap).get("usable_cpus")


def workers(snap) -> tuple:
    """(num_workers, start method or None) of the training DataLoader, from runtime_data."""
    data = section(snap, "runtime_data")
    n = int(data.get("num_workers") or 0)
    return n, (data.get("start_method") if n > 0 else None)


def forked_workers(snap) -> bool:
    n, method = workers(snap)
    return n > 0 and method == "fork"


def spawned_workers(snap) -> bool:
    n, method = workers(snap)
    return n > 0 and method in ("spawn", "forkserver")


def at_fork(snap) -> bool:
    return section(snap, "runtime_data").get("source") == "fork"


def tokenizers_parallelism_off(value: Optional[str]) -> bool:
    return value is not None and value.strip().lower() in FALSY


def fork_phrase(snap) -> str:
    data = section(snap, "runtime_data")
    if data.get("source") == "fork":
        return f"this process is forking now ({data.get('fork_caller', 'os.fork')})"
    n, _ = workers(snap)
    return f"the DataLoader will fork {n} worker process{'es' if n != 1 else ''}"


def workers_tokenize(snap) -> Optional[bool]:
    """Whether the DataLoader's dataset or collate_fn runs the tokenizer (runtime_data), None when unknown.
    False for pre-tokenized rows a padding collator batches (run_mlm, run_clm, trl)."""
    return (section(snap, "runtime_data").get("dataset") or {}).get("tokenizes")
