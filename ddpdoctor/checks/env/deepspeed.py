"""CUDA_VISIBLE_DEVICES in the shell that starts DeepSpeed's own launcher (`deepspeed train.py`)."""
from __future__ import annotations

from ddpdoctor.checks.env.cuda import HIDE_ALL, parse_visible_devices
from ddpdoctor.facts.env import env_of
from ddpdoctor.model import error, warning
from ddpdoctor.model.registry import check

# deepspeedai/DeepSpeed deepspeed/launcher/runner.py @ edaa7221267243c7be7fb49c5d5f5c4fb97b4641:
# main() turns CUDA_VISIBLE_DEVICES into `--include localhost:<value>`, builds the resource pool as
# slots 0..device_count()-1, and parse_resource_filter raises "No slot '<n>' specified on host
# 'localhost'" for any value outside it.
_RUNNER = "deepspeedai/DeepSpeed deepspeed/launcher/runner.py@edaa7221"
# Rank variables the deepspeed launcher (launcher/launch.py) and every other launcher set in each rank.
_IN_A_RANK = ("RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK")


@check("ENV016", "deepspeed-visible-devices-as-slots", family="launcher", needs=("env", "packages"))
def deepspeed_visible_devices_as_slots(snap):
    """The `deepspeed` launcher would read CUDA_VISIBLE_DEVICES as slot numbers it does not have.

    What it checks
        With deepspeed installed, in a shell that is not yet a rank (no RANK or LOCAL_RANK): whether
        CUDA_VISIBLE_DEVICES holds an entry that is not one of 0..n-1, n being the number of devices it
        makes visible (an index such as 4 in "4,5", or a GPU-/MIG- UUID).

    Why it matters
        DeepSpeed's runner (deepspeed/launcher/runner.py, main) turns CUDA_VISIBLE_DEVICES into
        `--include localhost:<value>`, but counts its slots as 0..device_count()-1, the renumbered
        devices CUDA shows under that same variable. "4,5" gives slots 0 and 1, so the launch stops with
        "ValueError: No slot '4' specified on host 'localhost'" (deepspeedai/DeepSpeed#5818 with 0,2;
        #1331 with a Slurm allocation of 4,5). `--include` with the physical ids fails the same way while
        the variable is set.

    Example
        CUDA_VISIBLE_DEVICES=0,2 deepspeed train.py

    Fix
        unset CUDA_VISIBLE_DEVICES; deepspeed --include localhost:0,2 train.py   # or launch with torchrun / accelerate
    """
    env = env_of(snap)
    versions = snap["packages"].get("versions") or {}
    raw = env.get("CUDA_VISIBLE_DEVICES")
    if not versions.get("deepspeed") or raw is None or raw.strip() in HIDE_ALL:
        return
    if any(env.get(name) not in (None, "") for name in _IN_A_RANK):
        return
    used = parse_visible_devices(raw)["used"]
    slots = set(range(len(used)))
    outside = [tok for tok in used if not (tok.isdigit() and int(tok) in slots)]
    if not used or not outside:
        return
    physical = ",".join(used)
    yield warning(f"`deepspeed` would read CUDA_VISIBLE_DEVICES={raw} as slots; it has only "
                  f"{', '.join(map(str, sorted(slots)))}",
                  detail=(f"DeepSpeed's launcher ({_RUNNER}, main) passes CUDA_VISIBLE_DEVICES on as "
                          f"`--include localhost:{physical}` but numbers its slots 0..{len(used) - 1}, the devices "
                          f"CUDA renumbers under that variable, so {outside[0]!r} is no slot: the launch stops with "
                          f"\"ValueError: No slot '{outside[0]}' specified on host 'localhost'\". This applies when "
                          "the job is started with the `deepspeed` command; torchrun and accelerate read the variable "
                          "as CUDA does."),
                  fix=f"unset CUDA_VISIBLE_DEVICES; deepspeed --include localhost:{physical} train.py   # same GPUs, "
                      "numbered as deepspeed counts them",
                  subjects=["env:CUDA_VISIBLE_DEVICES", "pkg:deepspeed"],
                  evidence={"CUDA_VISIBLE_DEVICES": raw, "slots": sorted(slots), "not_slots": outside,
                            "deepspeed": versions.get("deepspeed")})


def _resource_filter(spec: str) -> list:
    """DeepSpeed's --include/--exclude string as [(host, [slots] or None)], as runner.py parse_resource_filter
    reads it: NODE_SPEC[@NODE_SPEC ...], NODE_SPEC = NAME[:SLOT[,SLOT ...]]. None for a malformed entry."""
    out = []
    for node in str(spec or "").split("@"):
        node = node.strip()
        if not node:
            continue
        host, _, slots = node.partition(":")
        if not slots:
            out.append((host, None))
            continue
        toks = [t.strip() for t in slots.split(",") if t.strip()]
        if not toks or not all(t.isdigit() for t in toks):
            return []
        out.append((host, [int(t) for t in toks]))
    return out


@check("ENV021", "deepspeed-include-slot-missing", family="launcher", needs=("gpus", "launch"), reads=("env", "host"))
def deepspeed_include_slot_missing(snap):
    """The `deepspeed` launch names, for this host, a GPU slot (--include/--exclude host:N) it does not have.

    What it checks
        The `deepspeed` command of the launch (`ddpdoctor check -- deepspeed ...`, or the command above this
        process): the slots its -i/--include or -e/--exclude give for this host (its hostname, short name or
        `localhost`), against the GPUs here, numbered 0..n-1 as DeepSpeed's resource pool numbers a host's
        slots. Quiet when CUDA_VISIBLE_DEVICES is set (ENV016 reads that case) and for other hosts' entries.

    Why it matters
        DeepSpeed's runner (deepspeed/launcher/runner.py, parse_resource_filter) builds each host's slots as
        0..slots-1 (the hostfile's `slots=`, or this machine's device count without a hostfile) and stops the
        launch with "ValueError: No slot 'N' specified on host 'H'" for any slot outside it, before a rank
        starts: deepspeedai/DeepSpeed#3624, `--include=work1:2,3` on a host with `work1 slots=2`, meant as
        its third and fourth GPUs, which it does not have.

    Example
        deepspeed --hostfile hostfile --include=work1:2,3 train.py   # on work1, which has GPUs 0 and 1

    Fix
        deepspeed --hostfile hostfile --include=work1:0,1 train.py   # the slots this host has, 0..n-1
    """
    from ddpdoctor.facts.launch import commands

    env = env_of(snap)
    if (env.get("CUDA_VISIBLE_DEVICES") or "").strip():
        return
    gpus = snap["gpus"] if isinstance(snap["gpus"], dict) else {}
    devices = gpus.get("devices")
    if not isinstance(devices, list) or not devices:
        return
    n = len(devices)
    host = snap.get("host") if isinstance(snap.get("host"), dict) else {}
    name = str(host.get("hostname") or "")
    here = {"localhost", "127.0.0.1"} | ({name, name.split(".")[0]} if name else set())
    for cmd in commands(snap):
        if cmd.get("launcher") != "deepspeed":
            continue
        opts = cmd.get("options") or {}
        for key in ("include", "exclude"):
            for node, slots in _resource_filter(opts.get(key)):
                missing = sorted({s for s in (slots or []) if s >= n})
                if node not in here or not missing:
                    continue
                flag = f"--{key}={opts.get(key)}"
                have = ",".join(map(str, range(n)))
                yield error(f"`deepspeed {flag}` names slot {missing[0]} on {node}, which has {n} GPU"
                            f"{'s' if n != 1 else ''} (slots {have}): the launch stops before any rank starts",
                            detail=(f"DeepSpeed's runner ({_RUNNER}, parse_resource_filter) numbers a host's slots "
                                    f"0..slots-1 from the hostfile's `slots=` (or this machine's device count without "
                                    f"one) and raises \"ValueError: No slot '{missing[0]}' specified on host "
                                    f"'{node}'\" for a slot outside them. This host has {n} GPU"
                                    f"{'s' if n != 1 else ''} here; slot numbers are this host's own 0..{n - 1}, "
                                    "not a count across nodes."),
                            fix=f"deepspeed --{key}={node}:{have} ...   # or name only the slots {have} this host has",
                            subjects=["pkg:deepspeed"],
                            evidence={key: opts.get(key), "host": node, "gpus_here": n, "missing_slots": missing})
                return
