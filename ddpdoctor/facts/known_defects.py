"""Releases with a known defect a distributed job meets without a mistake of its own (ddpdoctor/data/known_defects.json,
each entry read from the fix in the project's source). Pure lookups: which entries the recorded versions fall in."""
from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import List, Optional, Tuple

from ddpdoctor.facts.torch_floors import release

DATA = Path(__file__).resolve().parent.parent / "data" / "known_defects.json"


@functools.lru_cache(maxsize=1)
def entries() -> tuple:
    with open(DATA, encoding="utf-8") as fh:
        return tuple(json.load(fh)["entries"])


def _within(version: Optional[Tuple[int, ...]], span: Optional[dict]) -> Optional[bool]:
    """Whether `version` lies in span's [first, last]; None when the version is unknown, True when no span is given."""
    if not span:
        return True
    if version is None:
        return None
    return release(span["first"]) <= tuple(version)[:3] <= release(span["last"])


def matching(torch: Optional[str], nccl: Optional[Tuple[int, ...]]) -> List[Tuple[dict, bool]]:
    """(entry, nccl_known) for every entry whose torch span holds `torch` and whose NCCL span does not exclude `nccl`
    (an unrecorded NCCL does not exclude: the entry is returned with nccl_known=False). An entry of NCCL alone
    (no torch span) needs the NCCL version recorded: without it nothing ties the job to that release. An entry with
    `torch_local_dated_before` holds only for a torch whose local version starts with one of its prefixes and carries
    a build date before its bound ('+rocm7.0.0rc20250905'); a wheel without a dated local version is not judged."""
    t = release(torch)
    out = []
    for e in entries():
        if e.get("accelerate"):  # launcher defects: matching_accelerate
            continue
        if e.get("torch") and (t is None or not _within(t, e.get("torch"))):
            continue
        dated = e.get("torch_local_dated_before")  # a build series told by its local version's date
        if dated:
            day = _local_date(torch, dated.get("prefixes") or ())
            if day is None or day >= str(dated["before"]):
                continue
        n = _within(nccl, e.get("nccl"))
        if n is False or (n is None and not e.get("torch")):
            continue
        if nccl is not None and tuple(nccl)[:3] in {release(x) for x in e.get("nccl_except") or ()}:
            continue  # a release inside the span that carries the fix (a patch release of an older series)
        out.append((e, n is True))
    return out


def matching_accelerate(accelerate: Optional[str], gpu_ids: Optional[str]) -> List[dict]:
    """Entries of an accelerate release span holding `accelerate` whose condition the launch config meets
    (`needs_gpu_ids`: the config names GPUs, not "all")."""
    a = release(accelerate)
    if a is None:
        return []
    named = gpu_ids is not None and str(gpu_ids).strip().lower() not in ("", "all", "none")
    return [e for e in entries() if e.get("accelerate") and _within(a, e["accelerate"])
            and (named or not e.get("needs_gpu_ids"))]


def _local_date(torch: Optional[str], prefixes) -> Optional[str]:
    """The build date (YYYYMMDD) in torch's local version when it starts with one of `prefixes`
    ('2.9.0a0+rocm7.0.0rc20250905' -> '20250905'), else None."""
    local = str(torch or "").partition("+")[2]
    if not local or not any(local.startswith(p) for p in prefixes):
        return None
    found = re.search(r"(20\d{6})", local)
    return found.group(1) if found else None


def conditions_unmet(entry: dict, nodes: Optional[int], capabilities: List[Tuple[int, int]],
                     topology_file: Optional[bool] = None, os_name: Optional[str] = None,
                     hostname: Optional[str] = None, gpu_subset: Optional[bool] = None,
                     platform: Optional[str] = None, nccl_from: Optional[str] = None,
                     graph_capture: Optional[str] = None, ranks: Optional[int] = None,
                     net_plugins: Optional[List[str]] = None, cpu_vendor: Optional[str] = None,
                     gpus_on_node: Optional[int] = None) -> Optional[str]:
    """Why the entry's job conditions do not hold (a reason), or None when they hold or cannot be told.
    `min_nodes`: the node count must be known and at least this; `gpu_min_capability`: every visible GPU
    must have it (an unrecorded GPU list does not exclude); `needs_topology_file`: NCCL must load one
    (NCCL_TOPO_FILE, or the VM default file; False excludes, None, unknown, does not); `os`: the host's OS must be
    this one (an unrecorded OS excludes: a platform defect is not assumed); `needs_dotted_hostname`: the host's
    name must have more than one label (an unrecorded name excludes); `needs_gpu_subset_in_container`: this process runs
    in a container whose NVML lists fewer GPUs than the PCI bus, in a job of several ranks (`gpu_subset`; anything
    but True excludes); `arch`: the host's machine architecture, read from its platform string
    (`Linux-...-aarch64-with-glibc2.35`; an unrecorded platform excludes, as for `os`); `nccl_distribution`: the NCCL
    version was read from that wheel (`nccl_from`, facts.net.nccl_loaded: a build of the same release elsewhere may
    differ); `needs_nccl_graph_capture`: the launch calls NCCL inside a CUDA graph capture (`graph_capture`,
    facts.launch.nccl_graph_capture; unknown excludes); `min_ranks`: the job has at least this many ranks (`ranks`, the
    larger of the world size and this host's ranks: facts.ranks; unknown excludes); `needs_net_plugin`: NCCL loads an
    external net plugin whose name holds this word (`net_plugins`: the plugin libraries found, pci.net_plugins, and
    NCCL_NET_PLUGIN's name; none recorded excludes, NCCL_NET_PLUGIN=none excludes); `cpu_vendor`: the host CPU's vendor
    string (/proc/cpuinfo vendor_id, 'AuthenticAMD'; unrecorded excludes); `min_gpus_on_node`: the GPUs NCCL joins on
    this node (`gpus_on_node`: this host's ranks, else its visible GPUs; unknown excludes) are at least this many."""
    vendor = entry.get("cpu_vendor")
    if vendor and str(cpu_vendor or "") != vendor:
        return f"the CPU is not {vendor}" if cpu_vendor else "the CPU's vendor is not recorded"
    fewest = entry.get("min_gpus_on_node")
    if fewest and (gpus_on_node is None or gpus_on_node < fewest):
        return f"{gpus_on_node or 'an unknown number of'} GPU(s) on this node, the defect needs {fewest}"
    word = entry.get("needs_net_plugin")
    if word:
        names = [str(n) for n in net_plugins or [] if n]
        if not any(word.lower() in n.lower().rsplit("/", 1)[-1] for n in names):
            return f"no {word} net plugin recorded"
    least = entry.get("min_ranks")
    if least and (ranks is None or ranks < least):
        return f"{ranks or 'an unknown number of'} rank(s), the defect needs {least}"
    wheel = entry.get("nccl_distribution")
    if wheel and wheel not in str(nccl_from or ""):
        return f"the NCCL loaded is not the {wheel} wheel"
    if entry.get("needs_nccl_graph_capture") and not graph_capture:
        return "nothing recorded captures NCCL in a CUDA graph"
    if entry.get("needs_gpu_subset_in_container") and gpu_subset is not True:
        return "not a container seeing only some of the host's GPUs"
    if entry.get("needs_dotted_hostname") and "." not in str(hostname or "").strip("."):
        return "the host name has a single label"
    want_arch = entry.get("arch")
    if want_arch and want_arch not in _arches(platform):
        return f"not on {want_arch}"
    want_os = entry.get("os")
    if want_os and str(os_name or "") != want_os:
        return f"not on {want_os}"
    need = entry.get("min_nodes")
    if need and (nodes is None or nodes < need):
        return f"{nodes or 'an unknown number of'} node(s), the defect needs {need}"
    if entry.get("needs_topology_file") and topology_file is False:
        return "NCCL loads no topology file"
    cap = entry.get("gpu_min_capability")
    if cap and capabilities and any(tuple(c) < tuple(cap) for c in capabilities):
        return f"GPUs below compute capability {cap[0]}.{cap[1]}"
    return None


def torch_imported(snap) -> bool:
    """Whether the snapshot recorded torch's own answers (the `torch` facts, gathered by importing torch in a
    subprocess) without an error: then torch imports on this machine, and no import-time defect holds here."""
    recorded = (getattr(snap, "sections", None) or {}).get("torch")
    return isinstance(recorded, dict) and not recorded.get("error") and "distributed_available" in recorded


def stops_at_import(torch: Optional[str], os_name: Optional[str], imported: bool = False) -> List[dict]:
    """The entries (`stage: import`) by which this torch does not import at all on this OS (torch 2.4.0's Windows
    fbgemm.dll without libomp140): every finding about what torch does after its import comes second to them. None
    where torch was seen to import (`imported`: torch_imported)."""
    if imported:
        return []
    out = []
    for entry, _known in matching(torch, None):
        if entry.get("stage") != "import":
            continue
        if conditions_unmet(entry, None, [], None, os_name) is None:
            out.append(entry)
    return out


def _arches(platform: Optional[str]) -> set:
    """The machine names a platform string (Python's platform.platform()) carries: 'aarch64' also for macOS's
    'arm64'."""
    words = set(str(platform or "").lower().replace("_", "-").split("-")) | set(str(platform or "").lower().split("-"))
    return words | ({"aarch64"} if "arm64" in words else set())
