"""NCCL / Gloo / torch.distributed settings: names NCCL does not know, deprecated spellings,
values NCCL silently misreads, and stale "disable" flags (catalogue C7)."""
from __future__ import annotations

import re

from ddpdoctor.facts import settings as catalog
from ddpdoctor.model import error, info, warning
from ddpdoctor.model.registry import check
from ddpdoctor.facts.env import nccl_conf_applied, env_of
from ddpdoctor.facts.ranks import RANK_ENV_NAMES
from ddpdoctor.facts.gpu import version_tuple

distributed = catalog.distributed  # the variables these checks own; checks/settings.py judges the rest


def _torch_version(snap) -> tuple:
    raw = ((snap.get("packages") or {}).get("versions") or {}).get("torch") or ""
    parts = version_tuple(raw)   # facts' reader: a part int() would refuse (4,300+ digits) ends the tuple
    return parts[:2] if len(parts) >= 2 else (0, 0)


@check("NCCL001", "unknown-nccl-variable", family="nccl", needs=("env",))
def unknown_nccl_variable(snap):
    """An NCCL_* or TORCH_NCCL_* variable that neither NCCL nor torch reads.

    What it checks
        Every NCCL_* name against the settings catalogue, which holds every parameter NCCL declares
        (NCCL_PARAM, DEFINE_NCCL_PARAM and ncclGetEnv in NCCL's source, at every release from 2.10 to
        today: a name an older NCCL still reads is known), plus network-plugin families such as
        NCCL_OFI_*; and every TORCH_NCCL_* name against those torch's ProcessGroupNCCL and flight
        recorder read. A near miss of a known name is a warning with a did-you-mean; other unknown
        names are a note.

    Why it matters
        Misspelt variables are silently ignored: `NCCL_SOCKET_IFNAMES=eth0` leaves NCCL choosing an
        interface by itself, and the fix you think you applied never happened.

    Example
        export NCCL_DEBUG_SUBSYSTEM=INIT   # NCCL reads NCCL_DEBUG_SUBSYS

    Fix
        Rename it to the name NCCL documents (https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html),
        or unset it.
    """
    env = env_of(snap)
    for name in sorted(env):
        if not (name.startswith("NCCL_") or name.startswith("TORCH_NCCL_")):
            continue
        if catalog.lookup(name) is not None or name.startswith(catalog.PLUGIN_PREFIXES):
            continue
        close = catalog.near_miss(name)
        who = "torch" if name.startswith("TORCH_NCCL_") else "NCCL"
        if close:
            yield warning(f"{name} is not a variable {who} reads (did you mean {close}?)",
                          detail=f"{who} ignores unknown variables silently, so this setting has no effect.",
                          fix=f"export {close}=\"${name}\"; unset {name}", subjects=[name],
                          # the misspelt name has no effect: renaming keeps what was meant (an already
                          # set correct name wins, as it does now)
                          env_fix={name: None} if close in env else {close: env[name], name: None},
                          evidence={"name": name, "did_you_mean": close})
        else:
            yield info(f"{name} is not a documented {who} variable",
                       detail=(f"No release of {who} known to this ddpdoctor reads it; a plugin may, "
                               "otherwise it has no effect."),
                       fix=f"unset {name}   # if nothing reads it", subjects=[name], evidence={"name": name})


@check("NCCL002", "deprecated-distributed-variable", family="nccl", needs=("env", "packages"))
def deprecated_distributed_variable(snap):
    """A torch.distributed variable under its old, deprecated name.

    What it checks
        The old spellings torch's ProcessGroupNCCL and flight recorder still read after the new name
        (the alias lists of torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp and FlightRecorder.hpp:
        NCCL_ASYNC_ERROR_HANDLING, NCCL_BLOCKING_WAIT, NCCL_DESYNC_DEBUG, NCCL_ENABLE_TIMING renamed
        TORCH_NCCL_* in torch 2.2; TORCH_NCCL_TRACE_BUFFER_SIZE / TORCH_NCCL_TRACE_CPP_STACK renamed
        TORCH_FR_* in 2.8), against the installed torch version; and variables torch says are
        deprecated outright (TORCH_NCCL_AVOID_RECORD_STREAMS).

    Why it matters
        torch still reads the old names as a fallback and warns, but the fallback is scheduled for
        removal and, when both spellings are set, the new one silently wins; job scripts carry
        the old name for years.

    Example
        export NCCL_ASYNC_ERROR_HANDLING=1

    Fix
        export TORCH_NCCL_ASYNC_ERROR_HANDLING=1; unset NCCL_ASYNC_ERROR_HANDLING
    """
    env = env_of(snap)
    version = _torch_version(snap)
    for old in sorted(env):
        entry = catalog.replaced_by(old)
        if entry is None or not distributed(entry["name"]):
            if (catalog.lookup(old) or {}).get("deprecated_note") and distributed(old):
                note = catalog.lookup(old)["deprecated_note"]
                yield info(f"{old} is deprecated: {note.split(':', 1)[-1].strip().strip(chr(39))}",
                           detail=f"torch reads it only to warn. Source: {note}", fix=f"unset {old}",
                           env_fix={old: None}, subjects=[old], evidence={old: env[old]})
            continue
        new = entry["name"]
        since = tuple(int(x) for x in str((entry.get("alias_since") or {}).get(old, "0.0")).split("."))
        if version < since:
            continue
        both = new in env
        since_text = ".".join(map(str, since))
        yield warning(f"{old} is deprecated since torch {since_text}; use {new}",
                      detail=(f"torch {'.'.join(map(str, version))} reads {old} only as a fallback"
                              + (f"; {new} is also set and wins." if both else ".")),
                      fix=f"export {new}={env[old]!s}; unset {old}" if not both else f"unset {old}",
                      env_fix={old: None} if both else {new: env[old], old: None},
                      subjects=[old, new] if both else [old],
                      evidence={old: env[old], new: env.get(new), "torch": ".".join(map(str, version))})


@check("NCCL003", "invalid-distributed-value", family="nccl", needs=("env",), reads=("pci",))
def invalid_distributed_value(snap):
    """A distributed-training variable whose value its reader will misread or reject.

    What it checks
        Every set NCCL_*, TORCH_NCCL_*, TORCH_FR_*, GLOO_* variable, TORCH_DISTRIBUTED_DEBUG,
        TORCH_CPP_LOG_LEVEL and OMP_NUM_THREADS, with the grammar of its reader as the settings
        catalogue records it: NCCL reads integer parameters with strtoll ("true" is 0), its debug
        levels and subsystems from fixed lists, NCCL_P2P_LEVEL case-sensitively; ProcessGroupNCCL
        reads switches with c10d::getCvarBool (y/yes/1/t/true, n/no/0/f/false, anything else raises)
        and numbers with getCvarInt; libgomp reads OMP_NUM_THREADS as positive integers. NCCL_IB_HCA
        against this host's RDMA devices (prefix matching, '^' and '='), and, on a job across hosts, an
        NCCL_IB_HCA on a host with no RDMA device at all (NCCL finds none and falls back to sockets).
        NCCL_ALGO and NCCL_PROTO as per-function lists ("list;function:list", NCCL >= 2.24.3 parseList),
        and, with the NCCL version recorded, an NCCL_ALGO that leaves Broadcast or Reduce without Ring,
        their only algorithm (src/graph/tuning.cc; the list applies to every function since 2.17.1).

    Why it matters
        NCCL parses switches with strtoll, so NCCL_P2P_DISABLE=true means 0 and P2P stays on; a
        misspelt NCCL_DEBUG level prints nothing; NCCL_P2P_LEVEL=nvl is ignored; TORCH_NCCL_BLOCKING_WAIT=on
        and TORCH_DISTRIBUTED_DEBUG=VERBOSE make torch raise at start-up; OMP_NUM_THREADS=auto is
        ignored with only a libgomp warning.

    Example
        export NCCL_P2P_DISABLE=true TORCH_DISTRIBUTED_DEBUG=verbose

    Fix
        Use the values the reader accepts: NCCL_P2P_DISABLE=1, NCCL_DEBUG=INFO, TORCH_DISTRIBUTED_DEBUG=DETAIL.
    """
    env = env_of(snap)
    for name, entry, raw, problem in catalog.invalid_values(
            env, keep=lambda n: distributed(n) and n != "CUDA_DEVICE_ORDER" and n not in RANK_ENV_NAMES):
        make = error if problem.severity == "error" else warning
        fix_value = _meant(entry, raw)
        env_fix = {name: fix_value} if fix_value is not None and name not in DISABLE_FLAGS else {}
        yield make(f"{name}={raw!r} is not a valid value: {problem.reads_as}",
                   detail=(f"{entry['name']} takes {problem.expected}. "
                           + (f"Read by {_who(entry)} ({entry['source']['path']})." if entry.get("source") else "")),
                   fix=f"export {name}={fix_value if fix_value is not None else '<' + problem.expected + '>'}",
                   subjects=[name], env_fix=env_fix,
                   evidence={name: raw, "expected": problem.expected, "parser": entry.get("parser")})
    yield from _ib_hca_list(snap, env)
    yield from _algo_leaves_no_ring(snap, env)


_NCCL_FUNCS = ("Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce")  # NVIDIA/nccl src/init.cc ncclFuncStr


def _algo_leaves_no_ring(snap, env):
    """NCCL_ALGO, as this NCCL reads it, leaves Broadcast or Reduce without Ring, the one algorithm they have.

    settings.json NCCL_ALGO `ring_only_functions` (src/graph/tuning.cc@5067397c ncclTopoTuneModel: Broadcast and
    Reduce skip every algorithm but Ring; since 2.17.1 the NCCL_ALGO list applies to every function) and
    `prefixes` (per-function lists since 2.24.3, parseList). Needs the NCCL version recorded."""
    from ddpdoctor.facts.net import nccl_version_of

    raw = str(env.get("NCCL_ALGO") or "").strip()
    entry = catalog.lookup("NCCL_ALGO") or {}
    spec, pre = entry.get("ring_only_functions"), entry.get("prefixes") or {}
    version = nccl_version_of(snap)
    if not raw or not spec or version is None or tuple(version) < catalog.version(spec["since"])[:3]:
        return
    algos = {a.upper() for a in catalog._choices(entry)}
    enabled = {f: set(algos) for f in _NCCL_FUNCS}
    per_function = bool(pre) and tuple(version) >= catalog.version(pre["since"])[:3]
    for seg in (raw.split(";") if per_function else [raw]):
        fn, sep, lst = seg.partition(":") if per_function else ("", "", seg)
        if not sep:
            lst, targets = fn if per_function else lst, list(_NCCL_FUNCS)
        else:
            targets = [f for f in _NCCL_FUNCS if f.lower() == fn.strip().lower()]
        lst = lst.strip()
        negate = lst.startswith("^")
        listed = {x.strip().upper() for x in lst.lstrip("^").split(",") if x.strip()}
        for f in targets:
            enabled[f] = (algos - listed) if negate else (algos & listed)
    starved = [f for f in spec["values"] if "RING" not in enabled.get(f, algos)]
    if not starved:
        return
    src = spec["source"]
    shown = ".".join(map(str, version))
    yield warning(f"NCCL_ALGO={raw!r} leaves {' and '.join(starved)} without Ring, the only algorithm "
                  f"{'they implement' if len(starved) > 1 else 'it implements'}: NCCL {shown} fails at the first one",
                  detail=(f"NCCL implements {', '.join(spec['values'])} with Ring alone ({src['repo']} {src['path']}"
                          f"@{src['commit'][:8]} {src['symbol']}: \"{src['quote']}\"), and since {spec['since']} applies "
                          "NCCL_ALGO to every function" + (" (per-function lists 'function:list' since "
                                                            f"{pre['since']})" if per_function else "")
                          + ", so the collective fails with 'no algorithm/protocol available for function "
                          f"{starved[0]}' (invalid usage; pytorch/pytorch#163063 with NCCL_ALGO=NVLS)."),
                  fix=(f"export NCCL_ALGO='{raw};" + ";".join(f"{f.lower()}:ring" for f in starved) + "'"
                       if per_function else "add Ring to NCCL_ALGO, or unset it"),
                  subjects=["NCCL_ALGO"], evidence={"NCCL_ALGO": raw, "nccl": shown, "without_ring": starved})


def _ib_hca_list(snap, env):
    """NCCL_IB_HCA as ncclIbInit reads it (src/transport/net_ib/init.cc): one leading '^' (exclude), then one
    leading '=' (exact names), then `name[:port]` entries matched by prefix unless '=' was given
    (matchIfList); judged against the RDMA devices of this host (pci.rdma_devices)."""
    spec = env.get("NCCL_IB_HCA")
    devices = ((snap.get("pci") or {}).get("rdma_devices") or []) if "pci" in snap else []
    if spec and not devices:
        yield from _ib_hca_without_devices(snap, env, spec)
    if not spec or not devices:
        return
    rest = spec.strip()
    exclude = rest.startswith("^")
    rest = rest[1:] if exclude else rest
    exact = rest.startswith("=")
    rest = rest[1:] if exact else rest
    items = [i.strip() for i in rest.split(",") if i.strip()]
    problems, extra = [], {}
    vfs = set((snap.get("pci") or {}).get("rdma_virtual_functions") or [])
    for item in items:
        name = item.split(":")[0]
        if name[:1] in ("^", "="):
            problems.append(f"'{item}' is read as a device name ('^' and '=' count only once, at the start of the list)")
            continue
        hits = [d for d in devices if (d == name if exact else d.startswith(name))]
        if not hits:
            problems.append(f"'{name}' matches no RDMA device here ({', '.join(devices[:6])}{', ...' if len(devices) > 6 else ''})")
        elif not exact and len(hits) > 1 and name in devices:
            more = [d for d in hits if d != name]
            if exclude or not set(more) <= vfs:  # selected virtual functions: NET010 reports them
                extra[name] = more
    for name, more in extra.items():
        problems.append(f"'{name}' also {'excludes' if exclude else 'selects'} {', '.join(more)} (NCCL matches names by prefix)")
    if not problems:
        return
    fixed = ("^" if exclude else "") + "=" + ",".join(i.lstrip("^=") for i in items)
    yield warning(f"NCCL_IB_HCA={spec!r} is not read as meant: " + "; ".join(problems),
                  detail=("NCCL reads one leading '^' (exclude the list) and then one leading '=' (exact names), and "
                          "matches each `name[:port]` as a prefix of the device names otherwise (ncclIbInit, "
                          "src/transport/net_ib/init.cc, with matchIfList; NVIDIA/nccl#236, NVIDIA/nccl-tests#150). "
                          f"RDMA devices here: {', '.join(devices)}."),
                  fix=f"export NCCL_IB_HCA='{fixed}'", subjects=["NCCL_IB_HCA"] + [f"rdma:{d}" for d in extra][:8],
                  evidence={"NCCL_IB_HCA": spec, "rdma_devices": devices, "exclude": exclude, "exact": exact})


# NVIDIA/nccl src/transport/net_ib/init.cc@e5d9a7ae17 (ncclIbInit): with no device left after NCCL_IB_HCA's
# matching it logs "NET/IB : No device found." and the IB plugin fails to initialise; ncclNetInit then takes
# the next network, the socket transport, without an error.
IB_INIT_SOURCE = "NVIDIA/nccl src/transport/net_ib/init.cc@e5d9a7ae1783 (ncclIbInit)"


def _ib_hca_without_devices(snap, env, spec: str):
    """NCCL_IB_HCA asks for RDMA devices on a host that has none (pci.rdma_devices gathered and empty) in a
    job across hosts: NCCL finds no IB device and carries every inter-node byte over TCP sockets, silently.
    On one host the setting is harmless (NCCL moves data inside a node over P2P/SHM), so it says nothing."""
    from ddpdoctor.facts.net import multi_node

    pci = snap.get("pci") or {}
    if pci.get("rdma_devices") != [] or _flag_on(env.get("NCCL_IB_DISABLE")):
        return  # not gathered, or IB switched off on purpose (NCCL004's to report)
    if [p for p in pci.get("net_plugins") or [] if p]:
        return  # an external net plugin (aws-ofi-nccl, a vendor's) brings its own transport
    spread = multi_node(snap)
    if not spread:
        return
    forced = (env.get("NCCL_NET") or "").strip().lower() == "ib"
    make = error if forced else warning
    yield make(f"NCCL_IB_HCA={spec!r} asks for RDMA devices, but this host has none: NCCL will find no IB device"
               + (" and NCCL_NET=IB makes init fail" if forced else " and send all inter-node traffic over TCP sockets"),
               detail=(f"The job spans hosts ({spread}). /sys/class/infiniband is empty here (no InfiniBand, RoCE or EFA "
                       "device: the HCA is absent, its driver not loaded, or its RDMA function not set up or not passed "
                       "into the container). NCCL's IB plugin then logs 'NET/IB : No device found.' and does not "
                       f"initialise ({IB_INIT_SOURCE}); NCCL falls back to its socket transport without an error, so "
                       "a multi-node job runs but scales like one on Ethernet (hiyouga/LlamaFactory#6111: NCCL_IB_HCA=mlx5_0..7 "
                       "set, RDMA not configured, two nodes no faster than one)."),
               fix=("ls /sys/class/infiniband && ibv_devinfo   # must list the HCAs; load the driver (mlx5_core, ib_uverbs) "
                    "or configure RDMA; in a container pass --device /dev/infiniband --cap-add IPC_LOCK"),
               subjects=["NCCL_IB_HCA"] + (["NCCL_NET"] if forced else []),
               evidence={"NCCL_IB_HCA": spec, "rdma_devices": [], "why_multi_node": spread,
                         "NCCL_NET": env.get("NCCL_NET")})


def _flag_on(raw) -> bool:
    """NCCL reads NCCL_IB_DISABLE with strtoll (src/misc/param.cc): a non-zero integer prefix turns it on."""
    m = re.match(r"\s*[-+]?\d+", str(raw or ""))
    return bool(m and int(m.group()) != 0)


def _who(entry: dict) -> str:
    return {"nccl": "NCCL", "torch": "torch", "cuda": "the CUDA runtime"}.get(entry["family"], entry["family"])


def _meant(entry: dict, raw: str):
    """The value a word meant, for a 0/1 integer switch written as a word (NCCL reads 'true' as 0)."""
    if entry.get("parser") == "nccl_int" and entry.get("default") in ("0", "1"):
        word = raw.strip().lower()
        if word in ("true", "yes", "on", "y", "t", "enable", "enabled"):
            return "1"
        if word in ("false", "no", "off", "n", "f", "disable", "disabled"):
            return "0"
    if entry.get("parser") in ("nccl_level", "nccl_enum") and raw.strip().upper() in {
            str(c).upper() for c in entry.get("values") or []}:
        return raw.strip().upper()
    return None


DISABLE_FLAGS = ("NCCL_P2P_DISABLE", "NCCL_IB_DISABLE", "NCCL_SHM_DISABLE", "NCCL_NVLS_ENABLE")


@check("NCCL004", "nccl-transport-disabled", reads=("gpus",), family="nccl", needs=("env",), catalogue=("C7",))
def nccl_transport_disabled(snap):
    """An NCCL transport is switched off by environment (a note, until GPU facts say more).

    What it checks
        NCCL_P2P_DISABLE=1, NCCL_IB_DISABLE=1, NCCL_SHM_DISABLE=1 or NCCL_NVLS_ENABLE=0, on a
        machine where ddpdoctor has no GPU facts. Where NVML shows GPUs, the GPU check GPU-C7
        judges the flag against the real P2P/NVLink health instead, and this note stays silent.

    Why it matters
        These flags are workarounds copied from forum answers and accelerate's advice for RTX 40xx
        cards (huggingface/accelerate state.py). Left set on NVLink or InfiniBand hardware, they
        route traffic through host memory or TCP and make all-reduce many times slower.

    Example
        export NCCL_P2P_DISABLE=1 NCCL_IB_DISABLE=1   # from an old bug report

    Fix
        unset NCCL_P2P_DISABLE NCCL_IB_DISABLE   # unless you know this machine needs them
    """
    gpus = snap.get("gpus") or {}
    if gpus.get("devices"):
        return
    env = env_of(snap)
    off = [n for n in DISABLE_FLAGS if (env.get(n, "").strip() == ("0" if n.endswith("ENABLE") else "1"))]
    if not off:
        return
    yield info(f"NCCL transports switched off by environment: {', '.join(off)}",
               detail=("Fine as a workaround for GPUs without working P2P, but costly on NVLink/InfiniBand hardware. "
                       "Re-check on the GPU node: `ddpdoctor check` there judges them against NVML's P2P status."),
               fix="unset " + " ".join(off) + "   # if the hardware supports these transports",
               subjects=off, evidence={n: env[n] for n in off})


def _differs_from_default(entry: dict, value: str) -> bool:
    default = entry.get("default")
    if default is None or entry.get("class") == "debug":
        return False
    if entry.get("parser") == "nccl_int":
        try:
            return catalog.strtoll(value.strip()) != catalog.strtoll(str(default))
        except (TypeError, ValueError):
            return True
    return value.strip().upper() != str(default).strip().upper()


@check("NCCL005", "nccl-config-file-settings", family="nccl", needs=("env",))
def nccl_config_file_settings(snap):
    """NCCL takes settings from a config file (/etc/nccl.conf, ~/.nccl.conf, NCCL_CONF_FILE) that the environment does not show.

    What it checks
        The files NCCL reads at init, in its order (src/misc/param.cc, initEnvFunc: NCCL_CONF_FILE
        when set, else $HOME/.nccl.conf; then /etc/nccl.conf), parsed as NCCL parses them
        (setEnvFile: `NAME=value` lines, `#` comments, the name everything before the first `=`).
        A line applies unless the environment already sets the name. Reported as a warning when an
        applied line changes a parameter from its NCCL_PARAM default (debug settings aside), or
        names nothing NCCL reads (a typo, or spaces around `=`, which become part of the name);
        otherwise as information, so a reader of the report knows where those settings come from.

    Why it matters
        Nothing in `env` shows these settings, yet NCCL applies them exactly as if exported. A file
        left in a container image keeps tuning NCCL long after the experiment it was written for
        (luxingcom/aicad-nccl-optimization#1: NCCL_IB_USE_INLINE=1 and
        NCCL_IB_PREPOST_RECEIVE_WORK_REQUESTS=1 in an image's /etc/nccl.conf froze a 4-byte
        warm-up). The maintainers recommend the file for per-node settings (NVIDIA/nccl#286), so
        its presence alone is no fault.

    Example
        /etc/nccl.conf: NCCL_IB_USE_INLINE=1

    Fix
        remove the line from the file (or the file from the image), or override it in the
        environment: export NCCL_IB_USE_INLINE=0
    """
    applied, shadowed = nccl_conf_applied(snap)
    if not applied:
        return
    changed, unread, rest = [], [], []
    for name, (value, path) in sorted(applied.items()):
        entry = catalog.lookup(name) if name == name.strip() else None
        if entry is None:
            unread.append((name, value, path))
        elif _differs_from_default(entry, value):
            changed.append((name, value, path, entry.get("default")))
        else:
            rest.append((name, value, path))
    paths = sorted({p for _, (_, p) in applied.items() if p})
    listing = ", ".join(f"{n}={v}" for n, (v, _) in sorted(applied.items()))
    evidence = {"applied": {n: {"value": v, "file": p} for n, (v, p) in applied.items()},
                "overridden_by_env": [{"name": n, "file": p} for n, p in shadowed]}
    subjects = [f"path:{p}" for p in paths] + sorted(n.strip() for n in applied)
    if changed or unread:
        parts = []
        if changed:
            parts.append("changed from NCCL's defaults: " + ", ".join(
                f"{n}={v} (default {d}, from {p})" for n, v, p, d in changed))
        if unread:
            parts.append("read by no NCCL parameter: " + ", ".join(
                f"{n!r}={v} (from {p}{', a near miss of ' + catalog.near_miss(n.strip()) if catalog.near_miss(n.strip()) else ''})"
                for n, v, p in unread))
        first = (changed or unread)[0]
        yield warning(f"NCCL takes settings from {', '.join(paths)} that the environment does not show ({listing})",
                      detail="NCCL reads these files at init and applies each line the environment does not "
                             "override (src/misc/param.cc): " + "; ".join(parts) + ". A file left in a container "
                             "image or a home directory keeps tuning NCCL long after the experiment it was for.",
                      fix=(f"remove the line from {first[2]}, or override it: export {first[0]}={first[3]}" if changed
                           else f"correct or remove the line {first[0]!r} in {first[2]} (no spaces around '=')"),
                      subjects=subjects, evidence=evidence)
        return
    yield info(f"NCCL takes settings from {', '.join(paths)} ({listing})",
               detail="NCCL applies each line of these files that the environment does not set (src/misc/param.cc); "
                      "they are not in the environment, so other tools do not show them.",
               fix=f"to change one, edit {paths[0]} or export the variable (the environment wins)",
               subjects=subjects, evidence=evidence)


@check("NCCL006", "nccl-xml-file-mismatch", family="nccl", needs=("env",), reads=("gpus",))
def nccl_xml_file_mismatch(snap):
    """NCCL_TOPO_FILE or NCCL_GRAPH_FILE names a file that is not there, or that describes another machine.

    What it checks
        The files the two variables name, as NCCL opens them (NVIDIA/nccl src/graph/xml.cc @5067397c):
        whether each exists; in a topology file (<system>), the PCI bus id around each <gpu> against the
        bus ids NVML gives this machine's visible GPUs; in a graph file (<graphs>), each <gpu dev=N>
        against the number of visible GPUs.

    Why it matters
        A missing topology file is skipped silently (ncclTopoGetXmlFromFile only logs "Could not open
        XML topology file" at INFO): NCCL then detects the layout itself, so the VM or cloud layout the
        file was set for is not used and rings and trees run over the wrong paths. A missing graph file
        stops init ("Could not open XML graph file", ncclSystemError). A file copied from another
        machine type names GPUs this machine does not have at those addresses: the topology search
        falls back to a simple order ("Could not find a path for pattern N, falling back to simple
        order", src/graph/search.cc) or routes over links that are not there (NVIDIA/nccl#175).

    Example
        NCCL_TOPO_FILE=/opt/microsoft/ndv4-topo.xml on a host that is not an NDv4, or a path left from an
        image that no longer ships the file.

    Fix
        unset NCCL_TOPO_FILE (NCCL detects the topology), or point it at this machine type's file; dump one
        on a good node with NCCL_TOPO_DUMP_FILE=/tmp/topo.xml.
    """
    files = (snap.get("env") or {}).get("nccl_files") or []
    if not files:
        return
    from ddpdoctor.facts.gpu import view
    from ddpdoctor.facts.xid import norm_bdf  # also "07:00.0" (no domain) and NVML's 8-digit domain

    gpus = snap.get("gpus") if "gpus" in snap and isinstance(snap.get("gpus"), dict) else None
    visible = view(snap).devices if gpus and not gpus.get("unavailable") else []
    for f in files:
        if not isinstance(f, dict) or not f.get("path"):
            continue
        name, path = f.get("name"), f["path"]
        relative = not path.startswith("/")
        where = " (a relative path: NCCL opens it from the directory each rank starts in)" if relative else ""
        subjects = [f"env:{name}", f"path:{path}"]
        if not f.get("exists"):
            if name == "NCCL_GRAPH_FILE":
                make = warning if relative else error
                yield make(f"NCCL_GRAPH_FILE={path} does not exist: NCCL init fails with \"Could not open XML graph "
                           f"file\"{where}",
                           detail="ncclTopoGetXmlGraphFromFile returns ncclSystemError when fopen fails (NVIDIA/nccl "
                                  "src/graph/xml.cc), so every communicator init on this host fails.",
                           fix=f"unset NCCL_GRAPH_FILE   # or copy the graph file to {path} on every node",
                           subjects=subjects, evidence=dict(f))
            else:
                yield warning(f"NCCL_TOPO_FILE={path} does not exist: NCCL skips it silently and detects the "
                              f"topology itself{where}",
                              detail="ncclTopoGetXmlFromFile logs \"Could not open XML topology file\" only at INFO "
                                     "level and goes on (NVIDIA/nccl src/graph/xml.cc): the layout the file was set "
                                     "for (a VM's or a cloud instance's real PCI/NVLink tree) is not used, so NCCL "
                                     "may choose rings and transports from the virtual layout.",
                              fix=f"export NCCL_TOPO_FILE=<this instance type's topology XML>   # or unset it; "
                                  f"{path} is not on this host",
                              subjects=subjects, evidence=dict(f))
            continue
        if not f.get("parsed") or not visible:
            continue
        if name == "NCCL_TOPO_FILE" and f.get("gpu_bus_ids"):
            listed = {norm_bdf(b) for b in f["gpu_bus_ids"]}
            ours = [(d.get("index"), norm_bdf(d.get("pci_bus_id"))) for d in visible if d.get("pci_bus_id")]
            missing = [(i, b) for i, b in ours if b not in listed]
            if ours and missing:
                yield warning(f"NCCL_TOPO_FILE={path} describes another machine: {len(missing)} of this host's "
                              f"{len(ours)} visible GPUs are not in it ({', '.join(b for _, b in missing[:4])})",
                              detail=(f"The file places GPUs at {', '.join(sorted(listed)[:8])}; NVML puts this "
                                      "host's at " + ", ".join(b for _, b in ours[:8]) + ". NCCL merges the "
                                      "file with what it detects by bus id, so this host's GPUs hang off no switch "
                                      "or NIC the file describes: the topology search falls back to a simple order "
                                      "(\"Could not find a path for pattern\") or routes over links that do not "
                                      "exist."),
                              fix="unset NCCL_TOPO_FILE, or use this machine type's file (dump one on a healthy "
                                  "node: NCCL_TOPO_DUMP_FILE=/tmp/topo.xml)",
                              subjects=subjects + [f"gpu:{i}" for i, _ in missing],
                              evidence=dict(f, visible_bus_ids=[b for _, b in ours]))
        elif name == "NCCL_GRAPH_FILE" and f.get("gpu_devs"):
            beyond = [d for d in f["gpu_devs"] if d >= len(visible)]
            if beyond:
                yield warning(f"NCCL_GRAPH_FILE={path} uses GPU {beyond[0]}, but this host shows NCCL only "
                              f"{len(visible)} GPU(s): the graph is for another machine",
                              detail="A graph file fixes each channel's GPU and NIC order by device number; NCCL "
                                     "cannot build channels through devices it does not have.",
                              fix="unset NCCL_GRAPH_FILE, or write the graph for this machine (NCCL_GRAPH_DUMP_FILE "
                                  "on a healthy node)",
                              subjects=subjects, evidence=dict(f, visible=len(visible)))
