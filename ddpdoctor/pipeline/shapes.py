"""The JSON types of the snapshot fields that checks read, enforced when a recorded snapshot loads.

A snapshot attached to a bug report may have been hand-edited ("RANK": 5 instead of "5") or
written by another version. Checked here, once, such a file is rejected with the field named
(exit 2, as the contract asks for a bad snapshot) instead of crashing checks whose DOC001 finding
would blame ddpdoctor. Live snapshots never go through this: gatherers write these types.

Paths: `a.b` is key b of object a; `*` is every value of an object; `[]` is every element of a
list. A field may be null (checks read it as "unknown"); list elements and object values may not.
"""
from __future__ import annotations

from typing import Any, Iterator, Tuple

INT, NUM, STR, BOOL, OBJ, LIST = "an integer", "a number", "a string", "true or false", "an object", "a list"

FIELDS = {
    "env.vars": OBJ, "env.vars.*": STR,
    "host.shm": OBJ, "host.shm.exists": BOOL, "host.shm.size_bytes": INT, "host.shm.free_bytes": INT,
    "host.usable_cpus": INT, "host.affinity_count": INT, "host.cpu_count": INT,
    "host.cgroup": OBJ, "host.cgroup.quota_cpus": NUM, "host.container": STR,
    "host.rlimits": OBJ, "host.rlimits.*": OBJ, "host.rlimits.*.soft": INT, "host.rlimits.*.hard": INT,
    "host.default_start_method": STR, "host.default_sharing_strategy": STR,
    "launcher.kind": STR, "launcher.rank": INT, "launcher.world_size": INT, "launcher.local_rank": INT,
    "launcher.local_world_size": INT, "launcher.node_rank": INT, "launcher.nnodes": INT,
    "launcher.elastic_run_id": STR, "launcher.spawned_by_multiprocessing": BOOL,
    "network.interfaces": LIST, "network.interfaces[]": OBJ, "network.interfaces[].name": STR,
    "network.interfaces[].up": BOOL, "network.interfaces[].addresses": LIST,
    "network.interfaces[].addresses[]": OBJ, "network.interfaces[].addresses[].address": STR,
    "network.listening_tcp_ports": LIST, "network.listening_tcp_ports[]": INT,
    "network.master_addr": OBJ, "network.master_addr.addresses": LIST, "network.master_addr.addresses[]": STR,
    "packages.versions": OBJ, "packages.versions.*": STR,
    "gpus.hints": OBJ, "gpus.devices": LIST, "gpus.devices[]": OBJ, "gpus.devices[].index": INT,
    "gpus.devices[].name": STR, "gpus.devices[].cuda_capability": LIST, "gpus.devices[].cuda_capability[]": INT,
    "gpus.devices[].memory": OBJ, "gpus.devices[].ecc_errors": OBJ, "gpus.devices[].errors": OBJ,
    "gpus.devices[].remapped_rows": OBJ, "gpus.devices[].mig": OBJ, "gpus.devices[].mig_devices": LIST,
    "gpus.devices[].mig_devices[]": OBJ, "gpus.devices[].mig_devices[].memory_total_bytes": INT,
    "gpus.devices[].nvlinks": LIST, "gpus.devices[].nvlinks[]": OBJ, "gpus.devices[].nvlinks[].link": INT, "gpus.devices[].pcie": OBJ,
    "gpus.devices[].processes": LIST, "gpus.devices[].processes[]": OBJ,
    "gpus.devices[].throttle_reasons": OBJ, "gpus.devices[].throttle_reasons.names": LIST,
    "gpus.pairs": LIST, "gpus.pairs[]": OBJ, "gpus.pairs[].a": INT, "gpus.pairs[].b": INT, "gpus.pairs[].p2p": OBJ,
    "pci.iommu": OBJ, "pci.iommu.cmdline": LIST, "pci.iommu.cmdline[]": STR,
    "pci.gpus": OBJ, "pci.gpus.*": OBJ, "pci.gpus.*.iommu_group_type": STR, "pci.gpus.*.upstream": LIST,
    "pci.gpus.*.upstream[]": STR,
    "pci.bridges": OBJ, "pci.bridges.*": OBJ, "pci.bridges.*.acs": OBJ, "pci.bridges.*.acs.ctl": OBJ,
}


# Object values that may be null: a package that is not installed.
NULLABLE_VALUES = {"packages.versions.*"}
# Keys that must be present (and not null) in every element that has the parent.
REQUIRED = {"network.interfaces[].name", "network.interfaces[].addresses[].address", "gpus.devices[].nvlinks[].link"}


def _is(value: Any, kind: str) -> bool:
    if kind == INT:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == NUM:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, {STR: str, BOOL: bool, OBJ: dict, LIST: list}[kind])


def _steps(pattern: str) -> list:
    out = []
    for part in pattern.split("."):
        key, lists = part.rstrip("[]"), (len(part) - len(part.rstrip("[]"))) // 2
        out.append(("*", None) if key == "*" else ("key", key))
        out += [("[]", None)] * lists
    return out


def _values(node: Any, steps: list, where: str, required: bool = False) -> Iterator[Tuple[str, Any, bool]]:
    """(path, value, nullable) for every value the pattern reaches; wrong containers on the way are
    left to their own pattern."""
    if not steps:
        yield where, node, True
        return
    (kind, key), rest = steps[0], steps[1:]
    if kind == "key":
        if isinstance(node, dict) and node.get(key) is not None:
            yield from _values(node[key], rest, f"{where}.{key}", required)
        elif isinstance(node, dict) and required and not rest:
            yield f"{where}.{key}", None, False
    elif kind == "*" and isinstance(node, dict):
        for k, v in node.items():
            if rest:
                yield from _values(v, rest, f"{where}.{k}", required)
            else:
                yield f"{where}.{k}", v, False
    elif kind == "[]" and isinstance(node, list):
        for i, v in enumerate(node):
            if rest:
                yield from _values(v, rest, f"{where}[{i}]", required)
            else:
                yield f"{where}[{i}]", v, False


def shape_error(sections: dict) -> str:
    """The first field of a known section with the wrong JSON type, as one line; "" when all fit."""
    for pattern, kind in FIELDS.items():
        section, _, rest = pattern.partition(".")
        sec = sections.get(section)
        if not isinstance(sec, dict):
            continue
        for path, value, nullable in _values(sec, _steps(rest), section, pattern in REQUIRED):
            if value is None and (nullable or pattern in NULLABLE_VALUES):
                continue
            if not _is(value, kind):
                got = "missing or null" if value is None else type(value).__name__
                hint = f" (write \"{value}\")" if kind == STR and isinstance(value, (int, float)) else ""
                return f"field {path} is {got}, expected {kind}{hint}"
    return ""
