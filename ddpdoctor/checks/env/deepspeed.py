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


@check("ENV021", "deepspeed-include-slot-missing", family="launcher", needs=("launch",),
       reads=("env", "host", "gpus", "packages"))
def deepspeed_include_slot_missing(snap):
    """The `deepspeed` launch names a host or GPU slot (--include/--exclude host:N, --num_gpus N) its pool lacks.

    What it checks
        The `deepspeed` command of the launch (`ddpdoctor check -- deepspeed ...`, or the command above this
        process), against the runner's resource pool: the hostfile's `host slots=N` lines (the gathered
        /job/hostfile, or the one --hostfile names when it is that file), or without a hostfile {localhost: the
        GPUs here}. It reads: a host in -i/--include or -e/--exclude that the pool lacks; a slot outside a host's
        0..n-1 (this host: its GPUs, numbered as DeepSpeed numbers them; another host: its `slots=`); --num_gpus
        or --num_nodes given with --include/--exclude; --num_gpus N above a hostfile host's `slots=`. Quiet when
        CUDA_VISIBLE_DEVICES is set and no hostfile is read (ENV016 reads that case).

    Why it matters
        DeepSpeed's runner (deepspeed/launcher/runner.py, parse_resource_filter) stops the launch before a rank
        starts with "ValueError: Hostname 'H' not found in hostfile", "ValueError: No slot 'N' specified on host
        'H'" (deepspeedai/DeepSpeed#3624, `--include=work1:2,3` with `work1 slots=2`) or "Cannot specify
        num_nodes/gpus with include/exclude". From release 0.15.2 (#6530) an included slot is taken as a device
        index and exported as that host's CUDA_VISIBLE_DEVICES (launcher/launch.py), so a slot the host does not
        have leaves its rank without a GPU instead. --num_gpus N gives every host slots 0..N-1 whatever its
        `slots=` says (runner.py main). Data: data/launchers.json deepspeed_resource_filter.

    Example
        deepspeed --hostfile hostfile --include=work1:2,3 train.py   # on work1, which has GPUs 0 and 1

    Fix
        deepspeed --hostfile hostfile --include=work1:0,1 train.py   # the slots this host has, 0..n-1
    """
    from ddpdoctor.facts.launch import commands
    from ddpdoctor.facts.launchers import deepspeed_checks_included_slots, deepspeed_resource_filter

    env = env_of(snap)
    cvd = bool((env.get("CUDA_VISIBLE_DEVICES") or "").strip())
    gpus = snap.get("gpus") if isinstance(snap.get("gpus"), dict) else {}
    devices = gpus.get("devices") if isinstance(gpus.get("devices"), list) else []
    host = snap.get("host") if isinstance(snap.get("host"), dict) else {}
    name = str(host.get("hostname") or "")
    here = {"localhost", "127.0.0.1"} | ({name, name.split(".")[0]} if name else set())
    version = ((snap.get("packages") or {}).get("versions") or {}).get("deepspeed")
    checked = deepspeed_checks_included_slots(version)
    errors = deepspeed_resource_filter().get("errors") or {}
    for cmd in commands(snap):
        if cmd.get("launcher") != "deepspeed":
            continue
        opts = cmd.get("options") or {}
        pool, where = _ds_pool(dict(host, deepspeed_hostfile=cmd["hostfile"]) if isinstance(cmd.get("hostfile"), dict)
                               else host, opts)  # its own --hostfile, read with the command (check30b)
        if cvd and pool is None:
            return  # ENV016's case: the runner turns the variable into --include localhost:<it>
        filters = [(key, opts.get(key)) for key in ("include", "exclude") if str(opts.get(key) or "").strip()]
        counts = [f"--{k}={opts.get(k)}" for k in ("num_gpus", "num_nodes") if str(opts.get(k) or "").strip()]
        if filters and counts:
            yield error(f"`deepspeed {counts[0]}` with `--{filters[0][0]}={filters[0][1]}`: the runner refuses both "
                        "together and stops before any rank starts",
                        detail=(f"DeepSpeed's runner ({_RUNNER}, main) raises \"{errors.get('num_with_filter')}\" "
                                "when --num_gpus or --num_nodes is given with --include or --exclude."),
                        fix=f"deepspeed --{filters[0][0]}={filters[0][1]} ...   # drop {counts[0].split('=')[0]}; "
                            "the filter already says which slots run",
                        subjects=["pkg:deepspeed"], evidence={"options": {k: opts.get(k) for k in
                                                                         ("include", "exclude", "num_gpus", "num_nodes")
                                                                         if opts.get(k) not in (None, "")}})
            return
        for key, spec in filters:
            for node, slots in _resource_filter(spec):
                finding = _ds_filter_fault(key, spec, node, slots, pool, where, here, devices, checked, version,
                                           errors)
                if finding is not None:
                    yield finding
                    return
        n = str(opts.get("num_gpus") or "").strip()
        if pool and where and n.isdigit() and int(n) > 0:
            short = {h: s for h, s in pool.items() if s < int(n)}
            if short:
                h, s = next(iter(short.items()))
                yield warning(f"`deepspeed --num_gpus {n}` starts {n} ranks on every host, but {where} gives {h} "
                              f"slots={s}",
                              detail=(f"DeepSpeed's runner ({_RUNNER}, main) replaces each host's slots by 0..{int(n) - 1} "
                                      "under --num_gpus, whatever the hostfile says, and launcher/launch.py exports them "
                                      f"as the host's CUDA_VISIBLE_DEVICES: on a host with {s} GPUs the ranks beyond "
                                      "them have no GPU ('invalid device ordinal'), and a host meant to lend only "
                                      f"{s} GPUs runs {n} ranks."),
                              fix=f"deepspeed --hostfile {where} train.py   # drop --num_gpus: each host runs its slots=",
                              subjects=["pkg:deepspeed", f"host:{h}"],
                              evidence={"num_gpus": int(n), "hostfile": where, "short_hosts": dict(list(short.items())[:8])})
                return


def _ds_pool(host: dict, opts: dict) -> tuple:
    """DeepSpeed's resource pool for this launch, as ({host: slots}, hostfile path) from the gathered hostfile, or
    (None, None) when the runner would use a hostfile that was not read; ({}, None) when the gatherer found no
    /job/hostfile and none is named (the runner's pool is then {'localhost': device_count()})."""
    import os  # noqa: PLC0415

    hf = host.get("deepspeed_hostfile") if isinstance(host.get("deepspeed_hostfile"), dict) else None
    asked = str(opts.get("hostfile") or "").strip()
    if hf and isinstance(hf.get("hosts"), dict) and hf["hosts"] and not hf.get("errors"):
        path = str(hf.get("path") or "")
        if not asked or os.path.basename(asked) == os.path.basename(path):
            return {str(h): int(s) for h, s in hf["hosts"].items() if isinstance(s, int)}, path
        return None, None
    if asked or "deepspeed_hostfile" not in host or hf:
        return None, None  # another file, a hostfile not gathered (an older snapshot), or one the runner refuses
    return {}, None


def _ds_filter_fault(key, spec, node, slots, pool, where, here, devices, checked, version, errors):
    """One --include/--exclude node spec against the pool: the finding, or None."""
    flag = f"--{key}={spec}"
    if pool is not None and (node not in pool if pool else node != "localhost"):
        known = ", ".join(list(pool)[:6]) if pool else "localhost"
        return error(f"`deepspeed {flag}` names host {node}, which is not in "
                     + (f"the hostfile {where}" if pool else "the runner's pool (no hostfile: only localhost)")
                     + ": the launch stops before any rank starts",
                     detail=(f"DeepSpeed's runner ({_RUNNER}, parse_resource_filter) checks every host of --{key} "
                             f"against its resource pool ({known}) and raises \""
                             + str(errors.get("hostname", "")).format(host=node) + "\"."
                             + ("" if pool else " Without a hostfile the pool is {'localhost': this machine's GPUs}, "
                                "so this machine is `localhost` there, not its host name.")),
                     fix=(f"deepspeed --{key}={spec.replace(node, 'localhost' if not pool else next(iter(pool)), 1)} "
                          "...   # a host name as the hostfile spells it"),
                     subjects=["pkg:deepspeed", f"host:{node}"],
                     evidence={key: spec, "host": node, "pool": dict(list((pool or {"localhost": None}).items())[:8]),
                               "hostfile": where})
    if not slots:
        return None
    mine = node in here and devices and (not pool or node == "localhost" or node not in pool)
    have = len(devices) if mine else (pool or {}).get(node)
    if have is None:
        return None
    missing = sorted({s for s in slots if s >= have})
    if not missing:
        return None
    told = "this host has" if mine else f"{where} gives it slots={have}:"
    stops = key == "exclude" or checked is not False
    sev = error if (mine or (key == "exclude" or checked)) else warning
    ver = f"DeepSpeed {version}" if version else "DeepSpeed (release not known)"
    how = ("the launch stops before any rank starts" if stops and checked is not None else
           "the launch stops (DeepSpeed < 0.15.2) or the rank there gets no GPU (0.15.2 and later)" if stops else
           "the ranks there get CUDA_VISIBLE_DEVICES with a device the host does not have")
    return sev(f"`deepspeed {flag}` names slot {missing[0]} on {node}, but {told} {have} GPU"
               f"{'s' if have != 1 else ''} (slots 0..{have - 1}): {how}",
               detail=(f"DeepSpeed's runner ({_RUNNER}, parse_resource_filter) numbers a host's slots 0..slots-1 from "
                       "the hostfile's `slots=` (or this machine's device count without one); before release 0.15.2 it "
                       "raises \"" + str(errors.get("slot", "")).format(slot=missing[0], host=node) + "\" for an "
                       "included or excluded slot outside them; from 0.15.2 (#6530) an included slot is taken as a "
                       "device index and exported as that host's CUDA_VISIBLE_DEVICES (launcher/launch.py), so a "
                       f"device the host lacks leaves its rank without a GPU. This is {ver}. Slot numbers are the host's "
                       "own, not a count across nodes."),
               fix=f"deepspeed --{key}={node}:{','.join(str(i) for i in range(min(have, len(slots) or have)))} ...   "
                   f"# slots this host has (0..{have - 1})",
               subjects=["pkg:deepspeed", f"host:{node}"],
               evidence={key: spec, "host": node, "slots_there": have, "missing_slots": missing,
                         "hostfile": where, "deepspeed": version})
