"""CUDA device-selection variables, judged from their syntax alone (catalogue A9, A10).

The GPU-aware parts (mixed models without PCI_BUS_ID order, ranks vs visible GPUs) need NVML
facts and live in checks/gpu.py.
"""
from __future__ import annotations

import re

from ddpdoctor.model import error, info, warning
from ddpdoctor.model.registry import check
from ddpdoctor.facts.env import env_of
from ddpdoctor.facts.ranks import local_ranks, ranks_inherit_this_environment

# CUDA and torch take any GPU-/MIG- token as a UUID, or a unique prefix of one; whether it names a GPU
# of this machine is GPU019's question, which has the NVML facts.
_UUID = re.compile(r"^(GPU|MIG)-\S+$")


def parse_visible_devices(raw: str) -> dict:
    """Parse CUDA_VISIBLE_DEVICES the way the CUDA driver does: comma-separated integers or
    GPU-/MIG- UUIDs; parsing stops at the first invalid entry (and a negative index hides all that
    follow). torch's `_parse_visible_devices` mirrors this and returns no devices on duplicates."""
    tokens = [t.strip() for t in raw.split(",")]
    used, stopped_at = [], None
    for i, tok in enumerate(tokens):
        if re.fullmatch(r"\d+", tok) or _UUID.match(tok):
            used.append(tok)
            continue
        if re.fullmatch(r"-\d+", tok):
            stopped_at = (i, tok, "negative index")
        else:
            stopped_at = (i, tok, "not an index or a GPU-/MIG- UUID")
        break
    dups = sorted({t for t in used if used.count(t) > 1})
    return {"tokens": tokens, "used": used, "stopped_at": stopped_at, "duplicates": dups}


# Values that hide every GPU on purpose: CPU runs ("", "-1") and SLURM jobs without a GPU
# allocation ("NoDevFiles"); GPU001 treats the same values as "no GPU expected".
HIDE_ALL = {"", "-1", "none", "void", "NoDevFiles"}


@check("ENV009", "cuda-visible-devices-malformed", family="launcher", needs=("env",), reads=("launcher", "gpus"),
       catalogue=("A9", "A10"))
def cuda_visible_devices_malformed(snap):
    """CUDA_VISIBLE_DEVICES has duplicates, a typo, or hides every GPU.

    What it checks
        CUDA_VISIBLE_DEVICES is a comma list of indices or GPU-/MIG- UUIDs. The driver silently
        stops at the first entry it cannot parse (so "0,1,2,x,3" means 0,1,2 and "0 1" means
        nothing), a negative index hides the rest, and duplicates make torch see no device at all.
        The values that hide every GPU on purpose ("", "-1", SLURM's "NoDevFiles") are only noted,
        except an empty value in a rank of a multi-process launch on a host whose GPUs NVML lists:
        that is what a launch script writes when it exports a variable it never set
        (radical-cybertools/radical.pilot#2251: jsrun's per-rank GPU overridden, every rank on the
        same device), so it is a warning there. And GPU-/MIG- UUIDs (a form CUDA accepts) under
        DeepSpeed's `deepspeed` runner with no hostfile and none of --include/--exclude/--num_gpus/
        --num_nodes: it turns the value into --include=localhost:<value> and int()s each entry
        (deepspeed/launcher/runner.py, since 0.5.7; data/launchers.json
        deepspeed_visible_devices_include): ValueError before any worker starts.

    Why it matters
        Ranks silently get fewer GPUs than planned, share one, or fall back to the CPU; the
        symptom shows much later as an OOM on GPU 0, "invalid device ordinal", or a very slow run
        (pytorch/examples#969, NVIDIA/DIGITS#1358).

    Example
        CUDA_VISIBLE_DEVICES="0 1" (space instead of comma) or CUDA_VISIBLE_DEVICES=0,1,1.

    Fix
        Use a plain comma list of distinct entries: `export CUDA_VISIBLE_DEVICES=0,1,2,3`, or unset
        it and let each rank call `torch.cuda.set_device(LOCAL_RANK)`.
    """
    env = env_of(snap)
    raw = env.get("CUDA_VISIBLE_DEVICES")
    if raw is None:
        return
    if raw.strip() in HIDE_ALL:
        # The usual ways to run on the CPU on purpose (and SLURM's value in a job without GPUs):
        # a note, so that a CPU-only run never fails on it. An empty value in a rank of a multi-process job on
        # a GPU host is the trace of an unset shell variable exported by a launch script: a warning.
        launcher = snap.get("launcher") or {}
        world = launcher.get("world_size") or 0
        gpus = snap.get("gpus") if "gpus" in snap and isinstance(snap.get("gpus"), dict) else {}
        n_gpus = len(gpus.get("devices") or [])
        if raw == "" and world > 1 and n_gpus:
            yield warning(f"CUDA_VISIBLE_DEVICES is set but empty in rank {launcher.get('rank')} of {world}, on a host "
                          f"with {n_gpus} GPU(s): this process sees none of them",
                          detail=("An empty value hides every device, and it overrides the GPU a launcher or scheduler "
                                  "would give each rank (jsrun resource sets, srun --gpus-per-task, the container "
                                  "runtime): a launch script that exports a variable it never set leaves exactly this. "
                                  "The ranks fall back to the CPU, or a NCCL job fails at its first collective. Fine "
                                  "only for a CPU (gloo) run on purpose."),
                          fix="unset CUDA_VISIBLE_DEVICES   # in the launch script, instead of exporting it empty",
                          env_fix={"CUDA_VISIBLE_DEVICES": None}, subjects=["CUDA_VISIBLE_DEVICES"],
                          evidence={"CUDA_VISIBLE_DEVICES": raw, "world_size": world, "gpus": n_gpus})
            return
        yield info(f"CUDA_VISIBLE_DEVICES={raw!r} hides every GPU from this process",
                   detail="torch.cuda.is_available() is False, so training runs on the CPU. Fine for a CPU run.",
                   fix="unset CUDA_VISIBLE_DEVICES   # only if this job should use the GPUs",
                   subjects=["CUDA_VISIBLE_DEVICES"], evidence={"CUDA_VISIBLE_DEVICES": raw})
        return
    parsed = parse_visible_devices(raw)
    yield from _deepspeed_include_from_uuids(snap, raw, parsed)
    clean = ",".join(dict.fromkeys(parsed["used"])) or "0,1   # the GPU indices this job should use: nvidia-smi -L"
    if parsed["duplicates"]:
        yield error(f"CUDA_VISIBLE_DEVICES lists {', '.join(parsed['duplicates'])} more than once",
                    detail=("A device listed twice makes torch report no usable devices (torch.cuda's "
                            "_parse_visible_devices returns an empty list on duplicates), and two ranks would share it."),
                    fix=f"export CUDA_VISIBLE_DEVICES={clean}", subjects=["CUDA_VISIBLE_DEVICES"],
                    # the same devices, each once; only when nothing else in the list is in doubt
                    env_fix={} if parsed["stopped_at"] or "#" in clean else {"CUDA_VISIBLE_DEVICES": clean},
                    evidence={"CUDA_VISIBLE_DEVICES": raw, "duplicates": parsed["duplicates"]})
    if parsed["stopped_at"]:
        idx, tok, why = parsed["stopped_at"]
        sev = warning if tok.startswith("-") and idx == 0 else error
        ignored = parsed["tokens"][idx:]
        yield sev(f"CUDA_VISIBLE_DEVICES entry {tok!r} is {why}: CUDA ignores it and everything after it",
                  detail=(f"CUDA parses the list up to the first invalid entry. This process sees "
                          f"{len(parsed['used'])} device(s) ({', '.join(parsed['used']) or 'none'}); "
                          f"ignored: {', '.join(ignored)}."),
                  fix=f"export CUDA_VISIBLE_DEVICES={clean}" + ("" if "#" in clean else "   # comma-separated, no spaces"),
                  subjects=["CUDA_VISIBLE_DEVICES"],
                  evidence={"CUDA_VISIBLE_DEVICES": raw, "used": parsed["used"], "ignored": ignored})


@check("ENV008", "cuda-device-order-invalid", family="launcher", needs=("env",), catalogue=("A9",))
def cuda_device_order_invalid(snap):
    """CUDA_DEVICE_ORDER has a value CUDA does not know.

    What it checks
        CUDA_DEVICE_ORDER is either FASTEST_FIRST (CUDA's default) or PCI_BUS_ID (nvidia-smi's order).

    Why it matters
        Any other value is ignored and CUDA falls back to FASTEST_FIRST, so on a node with mixed
        GPU models CUDA index 0 is not nvidia-smi's GPU 0, and jobs land on a busy or wrong GPU
        (NVIDIA/DIGITS#1358, nanoporetech/bonito#120).

    Example
        export CUDA_DEVICE_ORDER=PCI   # not a valid value

    Fix
        export CUDA_DEVICE_ORDER=PCI_BUS_ID
    """
    raw = env_of(snap).get("CUDA_DEVICE_ORDER")
    if raw is None or raw in ("FASTEST_FIRST", "PCI_BUS_ID"):
        return
    # A misspelling of FASTEST_FIRST means the default that is in effect anyway; anything else meant
    # to change the order, and PCI_BUS_ID is the only other one.
    meant = "FASTEST_FIRST" if raw.strip().upper().startswith("FAST") else "PCI_BUS_ID"
    yield warning(f"CUDA_DEVICE_ORDER={raw!r} is not FASTEST_FIRST or PCI_BUS_ID; CUDA ignores it",
                  detail="CUDA falls back to FASTEST_FIRST, which differs from nvidia-smi's PCI order on mixed-GPU nodes.",
                  fix=f"export CUDA_DEVICE_ORDER={meant}", env_fix={"CUDA_DEVICE_ORDER": meant},
                  subjects=["CUDA_DEVICE_ORDER"],
                  evidence={"CUDA_DEVICE_ORDER": raw})


def _gpu_facts_known(snap) -> bool:
    """True when NVML listed this machine's GPUs, so GPU016 (which sees the devices) judges ranks against them."""
    gpus = snap.get("gpus")
    return isinstance(gpus, dict) and not gpus.get("unavailable") and not gpus.get("error") and bool(gpus.get("devices"))


@check("ENV017", "visible-devices-fewer-than-local-ranks", family="launcher", needs=("env",), reads=("gpus", "launcher"),
       catalogue=("A10",))
def visible_devices_fewer_than_local_ranks(snap):
    """CUDA_VISIBLE_DEVICES names fewer devices than the launcher starts ranks on this host (no GPU facts needed).

    What it checks
        When NVML could not list the GPUs (no driver library here, nvidia-smi missing, a snapshot of the
        environment only): the entries CUDA would use from CUDA_VISIBLE_DEVICES (up to the first invalid
        one) against the local rank count the launcher declared (LOCAL_WORLD_SIZE, or every rank when
        MASTER_ADDR is loopback). A process sees at most as many devices as the variable names, whatever
        the hardware, so ranks from that count on have no device of their own. One named device with
        several ranks is left alone (a wrapper or Slurm's --gpu-bind may give each rank its own), unless
        the ranks are counted from the launch command this shell is about to run, whose ranks all
        inherit the variable (facts.ranks.ranks_inherit_this_environment), or this process is a
        worker of torchrun's agent with LOCAL_RANK > 0 (the agent passes its own list to every worker
        unless --virtual-local-rank, which sets LOCAL_RANK=0: data/launchers.json
        elastic_worker_visible_devices); so is an
        srun step with SLURM_GPUS_PER_TASK (per-task binding). With NVML facts GPU016 judges the same
        question against the devices it sees.

    Why it matters
        torch.cuda.set_device(local_rank) (or .to(f"cuda:{local_rank}")) raises "CUDA error: invalid device
        ordinal" on the ranks past the list; without set_device they pile onto cuda:0, and NCCL stops with
        "Duplicate GPU detected" (pytorch/examples#969, hpcaitech/ColossalAI#2439).

    Example
        CUDA_VISIBLE_DEVICES=0,1 torchrun --nproc-per-node 4 train.py

    Fix
        torchrun --nproc-per-node <number of entries> ..., or list as many devices as ranks.
    """
    raw = env_of(snap).get("CUDA_VISIBLE_DEVICES")
    if raw is None or raw.strip() in HIDE_ALL or _gpu_facts_known(snap):
        return
    parsed = parse_visible_devices(raw)
    named = len(dict.fromkeys(parsed["used"]))
    if parsed["duplicates"] or (named < 2 and not ranks_inherit_this_environment(snap)):
        return  # duplicates are ENV009's error; one device may be per-rank binding, unless the ranks inherit it
    ranks = local_ranks(snap).declared()
    if not ranks or ranks <= named:
        return
    if (snap.get("launcher") or {}).get("kind") == "slurm" and env_of(snap).get("SLURM_GPUS_PER_TASK"):
        return  # srun's per-task GPU binding: each task is meant to see only its own devices (GPU016's question)
    me = env_of(snap).get("LOCAL_RANK", "")
    mine = f" (this process is local rank {me})" if me.strip().isdigit() and int(me) >= named else ""
    yield error(f"{ranks} local ranks but CUDA_VISIBLE_DEVICES={raw} names {named} device(s): local ranks "
                f"{named}..{ranks - 1} have no GPU of their own{mine}",
                detail=("A process sees at most the devices CUDA_VISIBLE_DEVICES names, so cuda:" + str(named)
                        + " and above do not exist for any rank: set_device(local_rank) fails with 'invalid device "
                        "ordinal', or the ranks share a GPU and NCCL reports 'Duplicate GPU detected'. The GPUs were not "
                        "listed here (no NVML facts); the count comes from the variable alone."),
                fix=f"torchrun --nproc-per-node {named} ...   # or name {ranks} devices in CUDA_VISIBLE_DEVICES",
                subjects=["CUDA_VISIBLE_DEVICES", "LOCAL_WORLD_SIZE"],
                evidence={"CUDA_VISIBLE_DEVICES": raw, "named": parsed["used"], "local_ranks": ranks,
                          "LOCAL_RANK": me or None})


@check("ENV026", "visible-devices-rotated-per-worker", family="launcher", needs=("env", "launcher"))
def visible_devices_rotated_per_worker(snap):
    """This rank's CUDA_VISIBLE_DEVICES is rotated to put its own GPU first: cuda:<rank> is another rank's GPU.

    What it checks
        A rank r > 0 (LOCAL_RANK, else RANK where WORLD_SIZE fits the list) whose CUDA_VISIBLE_DEVICES is
        its sorted indices rotated by r, visible[r:] + visible[:r] - the per-worker order dask-cuda's
        LocalCUDACluster gives worker r (rapidsai/dask-cuda dask_cuda/utils.py cuda_visible_devices:
        data/visible_devices.json rotated_per_worker). Rank 0's list is not rotated and is not judged.

    Why it matters
        Under that order the rank's own GPU is cuda:0. Training code that selects its device by rank
        (torch.cuda.set_device(LOCAL_RANK), cuda:RANK - the convention of every torch launcher, which
        gives all ranks one order) gets entry r of the rotated list: the physical GPU of rank 2r mod n.
        Two ranks then share a GPU and NCCL refuses the communicator: 'Duplicate GPU detected' /
        "NCCL error ... invalid usage" (dask-cuda#516, torch 1.7 with NCCL 2.7.8). A guess about the code:
        it is worded as one.

    Example
        Dask-CUDA worker with RANK=2, WORLD_SIZE=4, CUDA_VISIBLE_DEVICES=2,3,0,1 and
        torch.cuda.set_device(rank).

    Fix
        torch.cuda.set_device(0)   # the launcher already put this rank's GPU first; or give every rank the
        same CUDA_VISIBLE_DEVICES order and select by rank
    """
    from ddpdoctor.facts.cuda_map import rotated_visible_devices

    env = env_of(snap)
    value = env.get("CUDA_VISIBLE_DEVICES")
    if not value:
        return
    launcher = snap.get("launcher") or {}
    rank, which = launcher.get("local_rank"), "LOCAL_RANK"
    if rank is None:
        world = launcher.get("world_size")
        rank, which = launcher.get("rank"), "RANK"
        count = len([p for p in str(value).split(",") if p.strip()])
        if not isinstance(world, int) or world > count:
            return
    got = rotated_visible_devices(value, rank)
    if not got:
        return
    src = got["row"]["sources"][0]
    yield warning(
        f"CUDA_VISIBLE_DEVICES={value} puts this rank's GPU {got['own']} first ({which}={rank}): code that selects "
        f"cuda:{rank} gets GPU {got['picked']}, another rank's",
        detail=(f"The list is its sorted indices rotated by {rank}, the per-worker order of {src['repo']} "
                f"{src['path']} @{src['commit'][:8]} (cuda_visible_devices): this rank's own GPU is cuda:0. "
                f"{got['row']['about']} Whether the program selects its device by rank is a guess: the launcher "
                "convention of torchrun, mpirun and Slurm."),
        fix=("torch.cuda.set_device(0)   # the launcher already put this rank's GPU first; or give every rank one "
             "CUDA_VISIBLE_DEVICES order and select by rank"),
        subjects=["CUDA_VISIBLE_DEVICES", which],
        evidence={"order": got["order"], "rank": rank, "rank_from": which, "own": got["own"],
                  "picked_by_rank": got["picked"], "guess": True})


def _deepspeed_include_from_uuids(snap, raw, parsed):
    """ENV009: CUDA_VISIBLE_DEVICES as GPU-/MIG- UUIDs (a form CUDA accepts) handed to DeepSpeed's `deepspeed` runner,
    which, with no hostfile and no --include/--exclude/--num_gpus/--num_nodes, makes it --include=localhost:<value>
    and parses each entry with int() (deepspeed/launcher/runner.py; data/launchers.json
    deepspeed_visible_devices_include): the launch stops before any worker starts."""
    from ddpdoctor.facts.gpu import version_tuple  # noqa: PLC0415
    from ddpdoctor.facts.launch import command_of, deepspeed_hostfile_of  # noqa: PLC0415
    from ddpdoctor.facts.launchers import deepspeed_visible_devices_include  # noqa: PLC0415

    uuids = [t for t in parsed["used"] if _UUID.match(t)]
    cmd = command_of(snap, "deepspeed")
    if not uuids or cmd is None:
        return
    rule = deepspeed_visible_devices_include()
    opts = cmd.get("options") or {}
    if any(str(opts.get(o) or "").strip() for o in rule.get("options_that_skip_it") or []):
        return  # an explicit resource filter: the runner ignores CUDA_VISIBLE_DEVICES
    hostfile = deepspeed_hostfile_of(snap)
    if hostfile and hostfile.get("hosts"):
        return  # a resource pool from the hostfile: not the single-node path
    version = ((snap.get("packages") or {}).get("versions") or {}).get("deepspeed") if "packages" in snap else None
    have, since = version_tuple(version), version_tuple(rule.get("since"))
    if have and since and have < since:
        return
    src = (rule.get("sources") or [{}])[0]
    yield error(f"CUDA_VISIBLE_DEVICES names GPUs by UUID ({uuids[0]}...), and the deepspeed launcher parses it as "
                "GPU indices: it stops with 'ValueError: invalid literal for int()' before any worker starts",
                detail=("With no hostfile and none of --include/--exclude/--num_gpus/--num_nodes, DeepSpeed's runner "
                        f"turns CUDA_VISIBLE_DEVICES into --include=localhost:{raw} and parses each slot with int() "
                        f"({src.get('repo')} {src.get('path')}@{str(src.get('commit'))[:8]}: parse_node_config, "
                        f"since DeepSpeed {rule.get('since')}). CUDA itself accepts GPU-/MIG- UUIDs; the launcher does "
                        f"not. DeepSpeed here: {version or 'not recorded'}."),
                fix="export CUDA_VISIBLE_DEVICES=$(nvidia-smi --query-gpu=index,uuid --format=csv,noheader | "
                    "grep -E '" + "|".join(uuids[:4]) + "' | cut -d, -f1 | paste -sd,)   # the same GPUs by index; "
                    "or: deepspeed --include localhost:<indices> ...",
                subjects=["CUDA_VISIBLE_DEVICES", "pkg:deepspeed"],
                evidence={"CUDA_VISIBLE_DEVICES": raw, "uuids": uuids, "deepspeed": version,
                          "source": f"{src.get('repo')}/{src.get('path')}@{str(src.get('commit'))[:12]}"})
