"""NCCL / Gloo / torch.distributed settings: names NCCL does not know, deprecated spellings,
values NCCL silently misreads, and stale "disable" flags (catalogue C7)."""
from __future__ import annotations

import difflib
import re

from ddpdoctor.facts import nccl_env as envspec
from ddpdoctor.model import info, warning
from ddpdoctor.model.registry import check
from ddpdoctor.facts.env import env_of


def _torch_version(snap) -> tuple:
    raw = ((snap.get("packages") or {}).get("versions") or {}).get("torch") or ""
    m = re.match(r"(\d+)\.(\d+)", raw)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


@check("NCCL001", "unknown-nccl-variable", family="nccl", needs=("env",))
def unknown_nccl_variable(snap):
    """An NCCL_* or TORCH_NCCL_* variable that neither NCCL nor torch reads.

    What it checks
        Every NCCL_* name against NCCL's documented variables (plus network-plugin families such
        as NCCL_OFI_*), and every TORCH_NCCL_* name against the ones torch's ProcessGroupNCCL
        reads. A near miss of a known name is a warning with a did-you-mean; other unknown names
        are a note.

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
    known = envspec.NCCL_VARS | envspec.TORCH_NCCL_VARS | set(envspec.DEPRECATED)
    for name in sorted(env):
        if not (name.startswith("NCCL_") or name.startswith("TORCH_NCCL_")):
            continue
        if name in known or name.startswith(envspec.NCCL_PLUGIN_PREFIXES):
            continue
        pool = envspec.TORCH_NCCL_VARS if name.startswith("TORCH_NCCL_") else envspec.NCCL_VARS
        close = difflib.get_close_matches(name, sorted(pool), n=1, cutoff=0.85)
        who = "torch" if name.startswith("TORCH_NCCL_") else "NCCL"
        if close:
            yield warning(f"{name} is not a variable {who} reads (did you mean {close[0]}?)",
                          detail=f"{who} ignores unknown variables silently, so this setting has no effect.",
                          fix=f"export {close[0]}=\"${name}\"; unset {name}", subjects=[name],
                          # the misspelt name has no effect: renaming keeps what was meant (an already
                          # set correct name wins, as it does now)
                          env_fix={name: None} if close[0] in env else {close[0]: env[name], name: None},
                          evidence={"name": name, "did_you_mean": close[0]})
        else:
            yield info(f"{name} is not a documented {who} variable",
                       detail=(f"It is not in {who}'s documented list known to this ddpdoctor; a plugin may read it, "
                               "otherwise it has no effect."),
                       fix=f"unset {name}   # if nothing reads it", subjects=[name], evidence={"name": name})


@check("NCCL002", "deprecated-distributed-variable", family="nccl", needs=("env", "packages"))
def deprecated_distributed_variable(snap):
    """A torch.distributed variable under its old, deprecated name.

    What it checks
        NCCL_ASYNC_ERROR_HANDLING, NCCL_BLOCKING_WAIT, NCCL_DESYNC_DEBUG and NCCL_ENABLE_TIMING
        (renamed TORCH_NCCL_* in torch 2.2), and TORCH_NCCL_TRACE_BUFFER_SIZE /
        TORCH_NCCL_TRACE_CPP_STACK (the flight recorder's TORCH_FR_BUFFER_SIZE / TORCH_FR_CPP_STACK
        since torch 2.9), against the installed torch version.

    Why it matters
        torch still reads the old names as a fallback and warns, but the fallback is scheduled for
        removal and, when both spellings are set, the new one silently wins; job scripts carry
        the old name for years. (torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp lists both.)

    Example
        export NCCL_ASYNC_ERROR_HANDLING=1

    Fix
        export TORCH_NCCL_ASYNC_ERROR_HANDLING=1; unset NCCL_ASYNC_ERROR_HANDLING
    """
    env = env_of(snap)
    version = _torch_version(snap)
    for old, (new, since) in sorted(envspec.DEPRECATED.items()):
        if old not in env or version < since:
            continue
        both = new in env
        yield warning(f"{old} is deprecated since torch {since[0]}.{since[1]}; use {new}",
                      detail=(f"torch {'.'.join(map(str, version))} reads {old} only as a fallback"
                              + (f"; {new} is also set and wins." if both else ".")),
                      fix=f"export {new}={env[old]!s}; unset {old}" if not both else f"unset {old}",
                      env_fix={old: None} if both else {new: env[old], old: None},
                      subjects=[old, new] if both else [old],
                      evidence={old: env[old], new: env.get(new), "torch": ".".join(map(str, version))})


@check("NCCL003", "invalid-distributed-value", family="nccl", needs=("env",))
def invalid_distributed_value(snap):
    """A distributed-training variable whose value its reader will misread or reject.

    What it checks
        NCCL_DEBUG and NCCL_DEBUG_SUBSYS levels, NCCL_P2P_LEVEL / NCCL_NET_GDR_LEVEL,
        TORCH_DISTRIBUTED_DEBUG, TORCH_NCCL_ASYNC_ERROR_HANDLING, CUDA-free enums; 0/1 switches
        such as NCCL_P2P_DISABLE; and integer settings such as OMP_NUM_THREADS or NCCL_IB_GID_INDEX.

    Why it matters
        NCCL parses switches with atoi, so NCCL_P2P_DISABLE=true means 0 and P2P stays on; a
        misspelt NCCL_DEBUG level prints nothing; TORCH_DISTRIBUTED_DEBUG=VERBOSE raises at import
        time; OMP_NUM_THREADS=auto is ignored with only a libgomp warning.

    Example
        export NCCL_P2P_DISABLE=true TORCH_DISTRIBUTED_DEBUG=verbose

    Fix
        Use the documented values: NCCL_P2P_DISABLE=1, NCCL_DEBUG=INFO, TORCH_DISTRIBUTED_DEBUG=DETAIL.
    """
    env = env_of(snap)
    for name, (allowed, hint) in envspec.ENUMS.items():
        raw = env.get(name)
        if raw is None or name == "CUDA_DEVICE_ORDER":
            continue  # CUDA_DEVICE_ORDER has its own check, ENV008
        value = raw.strip().upper()
        if allowed is None:
            if name == "NCCL_PROTO":
                items = [i.strip().lstrip("^").upper() for i in raw.split(",") if i.strip()]
                if items and all(i in ("LL", "LL128", "SIMPLE") for i in items):
                    continue
            else:
                continue
        elif value in allowed:
            continue
        yield warning(f"{name}={raw!r} is not a valid value ({hint})",
                      detail="The value is rejected or silently replaced by the default.",
                      fix=f"export {name}=<{hint}>", subjects=[name], evidence={name: raw, "expected": hint})
    subsys = env.get("NCCL_DEBUG_SUBSYS")
    if subsys:
        bad = [s for s in (p.strip().lstrip("^").upper() for p in subsys.split(",")) if s and s not in envspec.NCCL_DEBUG_SUBSYS]
        if bad:
            yield warning(f"NCCL_DEBUG_SUBSYS names unknown subsystems: {', '.join(bad)}",
                          detail="NCCL ignores unknown subsystem names, so those logs will not appear.",
                          fix="export NCCL_DEBUG_SUBSYS=INIT,NET   # from: " + ",".join(envspec.NCCL_DEBUG_SUBSYS),
                          subjects=["NCCL_DEBUG_SUBSYS"], evidence={"NCCL_DEBUG_SUBSYS": subsys, "unknown": bad})
    for name in envspec.BOOLEAN_01:
        raw = env.get(name)
        if raw is None or raw.strip() in ("0", "1"):
            continue
        meant = "1" if raw.strip().lower() in ("true", "yes", "on", "y", "t") else "0"
        yield warning(f"{name}={raw!r} is not 0 or 1; it is read as {'0 (off)' if not raw.strip().isdigit() else raw}",
                      detail=("NCCL and torch parse these switches as integers: a word such as 'true' reads as 0, "
                              "so the setting does the opposite of what it says."),
                      fix=f"export {name}={meant}", subjects=[name], evidence={name: raw},
                      # a transport switch is a judgement about the hardware (NCCL004, GPU013); others are not
                      env_fix={} if name in DISABLE_FLAGS else {name: meant})
    for name in envspec.POSITIVE_INTS + envspec.NON_NEGATIVE_INTS:
        raw = env.get(name)
        if raw is None:
            continue
        minimum = 1 if name in envspec.POSITIVE_INTS else 0
        try:
            ok = int(raw.strip()) >= minimum
        except ValueError:
            ok = False
        if not ok:
            yield warning(f"{name}={raw!r} is not an integer >= {minimum}",
                          detail="The reader ignores it (or fails) and falls back to its default.",
                          fix=f"export {name}=<integer >= {minimum}>", subjects=[name], evidence={name: raw})


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
