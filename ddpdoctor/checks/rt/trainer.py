"""Runtime Trainer / DDP checks (RT030-RT037): arguments, the DDP wrapper, peers, callbacks.

The step verdicts of DoctorCallback (comm-bound, input-bound, straggler, find_unused overhead,
accumulation without no_sync) reuse the probe's PRB checks over a `probe` section built from the
same instrument (ddpdoctor.instrument); see ddpdoctor/inprocess/callback.py.
"""
from __future__ import annotations

from ddpdoctor.model import error, info, warning
from ddpdoctor.model.registry import check
from ddpdoctor.facts import trainer_timeout
from ddpdoctor.facts.env import env_of
from ddpdoctor.facts.runtime import my_rank, rank_subject, rt, section, trainer_args, world_size


def _model(snap) -> dict:
    return section(snap, "runtime_trainer").get("model") or {}


def _find_unused(snap):
    """(find_unused_parameters in force or predicted, how we know)."""
    ddp = _model(snap).get("ddp")
    if ddp:
        return ddp.get("find_unused_parameters"), "the DDP wrapper"
    args = trainer_args(snap)
    if args.get("ddp_find_unused_parameters") is not None:
        return bool(args["ddp_find_unused_parameters"]), "ddp_find_unused_parameters"
    steps = section(snap, "runtime_steps")
    if steps.get("find_unused_parameters") is not None:
        return steps["find_unused_parameters"], "the DDP wrapper"
    return None, ""


@check("RT030", "dataparallel-not-ddp", family="trainer", needs=("runtime_trainer",), catalogue=("F1",))
def dataparallel_not_ddp(snap):
    """The Trainer uses DataParallel: one process driving several GPUs.

    What it checks
        `args.parallel_mode` is `not_distributed` with n_gpu > 1 in a single-process run.

    Why it matters
        DataParallel replicates the model every step and scatters/gathers in one Python process
        (GIL-bound), so DDP is normally faster. Its batch is per_device x n_gpu ("Training with
        DataParallel so batch size has been adjusted to"), so compare samples/s at the same global
        batch. See huggingface/transformers#24345 and PR#24430.

    Example
        python train.py on a 4-GPU node: train_batch_size = 4 x per_device_train_batch_size.

    Fix
        torchrun --nproc-per-node <n_gpu> train.py
    """
    args = trainer_args(snap)
    if args.get("parallel_mode") != "not_distributed" or (args.get("n_gpu") or 0) <= 1 or world_size(snap) > 1:
        return
    n = args["n_gpu"]
    yield warning(
        f"Trainer runs DataParallel over {n} GPUs in one process",
        detail=(f"train_batch_size is {args.get('train_batch_size')} = per_device_train_batch_size x {n}. "
                "DataParallel re-replicates the model each step and is limited by one Python process."),
        fix=f"torchrun --nproc-per-node {n} train.py",
        subjects=["arg:parallel_mode", "arg:n_gpu"] + [f"gpu:{i}" for i in range(n)],
        evidence={"n_gpu": n, "train_batch_size": args.get("train_batch_size")},
    )


@check("RT031", "unused-parameters", when=("static", "step"), family="trainer", needs=("runtime_steps",), catalogue=("F2",))
def unused_parameters(snap):
    """Parameters that took no part in the loss, seen after the first backward pass.

    What it checks
        After the first backward (before the optimizer step), parameters with requires_grad whose
        .grad is still None, against DDP's find_unused_parameters.

    Why it matters
        With find_unused_parameters=False, DDP waits for their gradients forever and the next step
        fails with "Expected to have finished reduction in the prior iteration before starting a
        new one". With it on, the flag is needed, but the parameters are dead weight. See
        pytorch/pytorch#68862 and #57473.

    Example
        A pooler or a second head that the loss never uses.

    Fix
        Remove or freeze the unused modules (p.requires_grad_(False)), or ddp_find_unused_parameters=True.
    """
    steps = snap["runtime_steps"]
    names = steps.get("unused_parameters")
    if not names:
        return
    find_unused, _how = _find_unused(snap)
    shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
    if steps.get("ddp") and find_unused is False:
        yield error(
            f"{len(names)} parameters got no gradient and DDP has find_unused_parameters=False",
            detail=(f"After the first backward these parameters had no gradient: {shown}. DDP will wait for them "
                    "and fail at the next step: \"Expected to have finished reduction in the prior iteration\"."),
            fix="ddp_find_unused_parameters=True   # or freeze them: p.requires_grad_(False)",
            subjects=["arg:ddp_find_unused_parameters"] + rank_subject(snap),
            evidence={"unused": names[:50], "count": len(names)},
        )
    else:
        yield info(
            f"{len(names)} trainable parameters got no gradient in the first step",
            detail=f"Unused: {shown}. They cost memory and optimizer time without learning.",
            fix="freeze them: for p in unused: p.requires_grad_(False)",
            subjects=rank_subject(snap), evidence={"unused": names[:50], "count": len(names)},
        )


@check("RT032", "reentrant-checkpointing-find-unused", family="trainer", needs=("runtime_trainer",), catalogue=("F4",))
def reentrant_checkpointing_find_unused(snap):
    """Reentrant gradient checkpointing together with find_unused_parameters=True.

    What it checks
        Gradient (activation) checkpointing is on, with use_reentrant not set to False, and DDP's
        find_unused_parameters is True.

    Why it matters
        Reentrant checkpointing runs a second backward inside the first; DDP's unused-parameter
        search then marks a parameter ready twice: "Expected to mark a variable ready only once"
        (or a silent hang). See transformers PR#4659 and PR#13961, huggingface/peft#313,
        accelerate#2017.

    Example
        gradient_checkpointing=True, gradient_checkpointing_kwargs={"use_reentrant": True},
        ddp_find_unused_parameters=True.

    Fix
        gradient_checkpointing_kwargs={"use_reentrant": False}, and ddp_find_unused_parameters=False.
    """
    args = trainer_args(snap)
    model = _model(snap)
    ckpt = model.get("gradient_checkpointing") or args.get("gradient_checkpointing") or args.get("activation_checkpointing")
    find_unused, how = _find_unused(snap)
    if not ckpt or find_unused is not True:
        return
    kwargs = args.get("activation_checkpointing_kwargs") or args.get("gradient_checkpointing_kwargs") or {}
    reentrant = kwargs.get("use_reentrant") if isinstance(kwargs, dict) else None
    if reentrant is False:
        return
    if reentrant is None:
        tf = str(section(snap, "runtime_trainer").get("transformers") or "0")
        if tf.split(".")[0].isdigit() and int(tf.split(".")[0]) >= 5:
            return  # transformers 5 defaults to use_reentrant=False
    yield error(
        "reentrant gradient checkpointing with find_unused_parameters=True",
        detail=(f"Checkpointing is on with use_reentrant={reentrant!r} and find_unused_parameters=True ({how}). DDP "
                "will mark a parameter ready twice: \"Expected to mark a variable ready only once\", or hang."),
        fix='gradient_checkpointing_kwargs={"use_reentrant": False}, ddp_find_unused_parameters=False',
        subjects=["arg:gradient_checkpointing_kwargs", "arg:ddp_find_unused_parameters"],
        evidence={"use_reentrant": reentrant, "find_unused_parameters": True},
    )


@check("RT033", "precision-unsupported", family="trainer", needs=("runtime_trainer",), catalogue=("F7",))
def precision_unsupported(snap):
    """Mixed precision that this device cannot run.

    What it checks
        fp16 with a CPU device, or bf16 on a CUDA device below compute capability 8.0.

    Why it matters
        The run fails at set-up ("fp16 mixed precision requires a GPU (not 'cpu')", "Your setup
        doesn't support bf16/gpu") or, forced through, runs emulated and slow. See transformers
        `training_args.py` `__post_init__` and accelerate `accelerator.py`.

    Example
        TrainingArguments(bf16=True) on a V100 (capability 7.0).

    Fix
        bf16 on Ampere or newer, fp16 before it, neither (or use_cpu=True) on CPU.
    """
    args = trainer_args(snap)
    device = str(args.get("device") or "")
    cuda = rt(snap).get("cuda") or {}
    if args.get("fp16") and device.startswith("cpu"):
        yield error("fp16=True but the Trainer runs on the CPU",
                    detail="fp16 mixed precision needs a GPU; accelerate refuses it on the CPU.",
                    fix="fp16=False   # or bf16=True on CPUs with bf16 support",
                    subjects=["arg:fp16"], evidence={"device": device})
    cap = cuda.get("capability")
    if args.get("bf16") and device.startswith("cuda") and cap and tuple(cap) < (8, 0):
        yield error(f"bf16=True on a GPU of compute capability {cap[0]}.{cap[1]} (needs 8.0+)",
                    detail="bf16 needs an Ampere or newer GPU.",
                    fix="fp16=True, bf16=False   # on this GPU",
                    subjects=["arg:bf16", f"gpu:{cuda.get('current_device', 0)}"], evidence={"capability": cap})


def _peers(snap) -> dict:
    return section(snap, "runtime_peers").get("ranks") or {}


@check("RT034", "uneven-batches-across-ranks", family="trainer", needs=("runtime_peers",), catalogue=("F9",))
def uneven_batches_across_ranks(snap):
    """Ranks will see different numbers of batches per epoch.

    What it checks
        Each rank's DataLoader length, collected on rank 0 through the process group's store.

    Why it matters
        The rank with fewer batches stops issuing all-reduces while the others wait for it: a hang
        at the end of the epoch until the collective timeout. See pytorch/pytorch#33148 and #38174,
        microsoft/PyMarlin#80.

    Example
        Each rank reads its own file shard of different size with a plain sampler.

    Fix
        Use DistributedSampler (drop_last=True) or equal shards; for uneven inputs wrap the loop in
        `with model.join():`.
    """
    lengths = {int(r): f.get("dataloader_length") for r, f in _peers(snap).items() if f.get("dataloader_length") is not None}
    if len(set(lengths.values())) <= 1:
        return
    lo = min(lengths, key=lengths.get)
    hi = max(lengths, key=lengths.get)
    yield error(
        f"ranks have different DataLoader lengths: rank {lo} has {lengths[lo]} batches, rank {hi} has {lengths[hi]}",
        detail=(f"Batches per epoch by rank: {dict(sorted(lengths.items()))}. When the shortest rank finishes, the "
                "others block in their next all-reduce until the timeout."),
        fix="DataLoader(ds, sampler=DistributedSampler(ds, drop_last=True))   # or model.join() for uneven inputs",
        subjects=[f"rank:{lo}", f"rank:{hi}"], evidence={"lengths": lengths},
    )


@check("RT035", "sampler-mismatch", family="trainer", needs=("runtime_data",), catalogue=("F10",))
def sampler_mismatch(snap):
    """The distributed sampler disagrees with the process group, or across ranks.

    What it checks
        A DistributedSampler whose num_replicas/rank differ from the process group's world size
        and rank; or sampler seeds that differ across ranks (collected on rank 0).

    Why it matters
        Shards overlap or samples go missing; with different seeds each rank shuffles differently,
        so the shards are no longer a partition. See pytorch/pytorch#31771 and #11324.

    Example
        DistributedSampler(ds, num_replicas=4, rank=0) hard-coded in a 2-rank job.

    Fix
        DistributedSampler(ds) with no num_replicas/rank (read from the process group), the same
        seed on every rank, and sampler.set_epoch(epoch) each epoch.
    """
    sampler = section(snap, "runtime_data").get("sampler") or {}
    d = rt(snap).get("distributed") or {}
    if sampler.get("distributed") and d.get("initialized"):
        if sampler.get("num_replicas") != d.get("world_size") or sampler.get("rank") != d.get("rank"):
            yield error(
                f"DistributedSampler(num_replicas={sampler.get('num_replicas')}, rank={sampler.get('rank')}) in a "
                f"process group of {d.get('world_size')} ranks (this is rank {d.get('rank')})",
                detail="The sampler partitions the data for a different job, so shards overlap or are missing.",
                fix="DistributedSampler(dataset)   # let it read the world size and rank",
                subjects=[f"rank:{d.get('rank')}"], evidence={"sampler": sampler, "distributed": d},
            )
    seeds = {int(r): f.get("sampler_seed") for r, f in _peers(snap).items() if f.get("sampler_seed") is not None}
    if len(set(seeds.values())) > 1:
        yield error(
            f"sampler seeds differ across ranks: {dict(sorted(seeds.items()))}",
            detail="Each rank shuffles with its own seed, so the per-rank shards overlap.",
            fix="DistributedSampler(dataset, seed=<the same value on every rank>)",
            subjects=[f"rank:{r}" for r in sorted(seeds)], evidence={"seeds": seeds},
        )


@check("RT036", "slow-start-vs-ddp-timeout", family="trainer", needs=("runtime",), catalogue=("F11",))
def slow_start_vs_ddp_timeout(snap):
    """A rank waited, or will wait, for the others in a collective for a large share of the timeout.

    What it checks
        In a multi-rank job, against the timeout the process group really got (else args.ddp_timeout
        where the Trainer's transformers passes it to the group: not on CPU since 4.29, where the group
        gets torch's default 1800 s; else 1800 s): what a timeout ends is one rank waiting in a
        collective for the others. With every rank's facts (`ddpdoctor run` records each rank's entry
        into init_process_group, its arrival at training and the longest it waited in one collective
        call), the gap between ranks: the latest rank's arrival at training minus the earliest's (the
        wait in the first collective of training), the spread of their entries into
        init_process_group (the wait in the rendezvous), and the longest wait already seen in a
        collective (a barrier while another rank preprocessed). Ranks slow together (a loaded host) wait
        for nobody. Ranks on different hosts are never compared by wall clock (the hosts' clocks may
        differ by any skew): under Gloo each rank's own clock from its group's start is (the group comes
        up on every rank at one moment: a full mesh is connected in init_process_group), else only the
        recorded collective waits are, and one rank's time stays a bound. A rank other than 0 compares with rank 0's record where the store already holds it
        (else rank 0, later, judges with this rank's). Where only one rank's time since
        init_process_group is known, that time is an upper bound of the wait, said so; where only the process's age is known, the age is a looser bound
        (it also holds the interpreter's start and imports). Rule: warn when the gap (or the bound from
        init_process_group) is at least half the timeout; an age warns when it reaches the whole timeout.

    Why it matters
        While rank 0 preprocesses (datasets.map under main_process_first), the others wait in a
        barrier; past ddp_timeout the watchdog kills the job with "Socket Timeout". Over half the
        timeout means the next, slightly bigger dataset will fail. See huggingface/transformers#18054,
        axolotl-ai-cloud/axolotl#921.

    Example
        Tokenizing 20 GB on rank 0 at start-up with the default ddp_timeout=1800.

    Fix
        Preprocess offline and load the cached dataset, or raise ddp_timeout (TrainingArguments).
    """
    if world_size(snap) <= 1:
        return  # no collective to time out (and a notebook kernel is old, not slow)
    args = trainer_args(snap)
    asked = args.get("ddp_timeout")
    got = ((rt(snap).get("distributed") or {}).get("timeout_s"))
    tf = section(snap, "runtime_trainer").get("transformers")
    # the group not up yet (or its timeout unread): what this transformers hands it (facts.trainer_timeout)
    unpassed = (not got and asked and trainer_timeout.on_cpu(args, env_of(snap))
                and trainer_timeout.passes_ddp_timeout(tf, cpu=True) is False)
    timeout = got or (trainer_timeout.TORCH_DEFAULT_S if unpassed else asked) or 1800  # what the group got, where read
    facts = {int(r): f for r, f in _peers(snap).items() if f.get("seconds_since_start") or f.get("seconds_since_group")}
    if not facts and (rt(snap).get("seconds_since_start") or rt(snap).get("seconds_since_group")):
        me = my_rank(snap) or 0
        facts = {me: dict(rt(snap), **{k: (rt(snap).get("distributed") or {}).get(k)
                                       for k in ("coll_wait_max_s", "coll_wait_max_op")})}
        exchanged = snap.get("runtime_peers") or {}
        rank0 = exchanged.get("rank0")  # a rank other than 0: rank 0's record, where it was in the store (peers.exchange)
        if me != 0 and isinstance(rank0, dict) and (rank0.get("seconds_since_group") or rank0.get("seconds_since_start")):
            facts[0] = rank0
        elif me != 0 and exchanged.get("published") and facts[me].get("seconds_since_group") is not None:
            return  # rank 0 came later and judges the gap with this rank's published record
    since_group = {r: f["seconds_since_group"] for r, f in facts.items() if f.get("seconds_since_group") is not None}
    ages = {r: f["seconds_since_start"] for r, f in facts.items()
            if f.get("seconds_since_group") is None and f.get("seconds_since_start")}
    which = (f"the process group's timeout is {timeout:g} s" if got else
             f"the process group gets torch's default timeout, {timeout:g} s" if unpassed else f"ddp_timeout is {timeout} s")
    note = (f" (ddp_timeout={asked} was not passed to it)" if got and asked and abs(float(asked) - got) > 1 else
            f" (transformers {tf} does not pass ddp_timeout={asked} to it on CPU)" if unpassed else "")
    evidence = {"seconds_since_group": since_group, "seconds_since_start_upper_bound": ages, "ddp_timeout": asked,
                "pg_timeout_s": got, "timeout_used_s": timeout, "ddp_timeout_not_passed": bool(unpassed)}
    fix = f"ddp_timeout={int(timeout * 4)}   # TrainingArguments; better: preprocess offline and cache"
    gap = _rank_gap(facts, since_group)
    if gap is not None:
        evidence["gap"] = gap
        if gap["s"] < 0.5 * timeout:
            return  # every rank's times known: the ranks waited for each other less than half the timeout
        yield warning(
            f"{gap['title']}; {which}{note}",
            detail=("A timeout ends a rank that waits in a collective for the others. Measured between ranks ("
                    f"{gap['clocks']}): arrival at training spread over {_secs(gap['train_s'])}, entry into "
                    f"init_process_group over {_secs(gap['rendezvous_s'])}, the longest wait seen in one collective call "
                    f"{gap['waited_s'] if gap['waited_s'] is not None else 'not recorded'}"
                    f"{' s' if gap['waited_s'] is not None else ''}. Past the timeout the waiting rank is killed."),
            fix=fix, subjects=[f"rank:{gap['rank']}", "arg:ddp_timeout"], evidence=evidence,
        )
        return
    worst = max(since_group, key=since_group.get) if since_group else None
    unknown = "the other ranks' times are" if len(since_group) == 1 else "the ranks' arrival times are"
    if worst is not None and since_group[worst] >= 0.5 * timeout:
        yield warning(
            f"rank {worst} needed {since_group[worst]:.0f} s from init_process_group to training, an upper bound of "
            f"any wait in a collective ({unknown} not known); {which}{note}",
            detail=("Ranks that finish set-up first wait in the rendezvous or a collective; past the process group's "
                    "timeout the job is killed. Timed from this rank's entry into init_process_group, the first "
                    "moment a timeout runs. Only this rank's time is known, so it bounds the wait from above: "
                    "ranks slow together (a loaded host) wait for nobody; `ddpdoctor run` records every rank's "
                    "times and judges the gap between them."),
            fix=fix, subjects=[f"rank:{worst}", "arg:ddp_timeout"], evidence=evidence,
        )
        return
    old = max(ages, key=ages.get) if ages else None
    if old is None or ages[old] < timeout:
        return  # an upper bound under the whole timeout: no doubt either way is left unsaid
    yield warning(
        f"rank {old} needed at most {ages[old]:.0f} s to reach training (its process's age); {which}{note}",
        detail=("Ranks that finish set-up first wait in a collective; past the process group's timeout the job is "
                "killed. The time is at most the process's age, an upper bound, since the age also holds the interpreter's "
                "start, the imports and whatever ran before the process group existed, when no timeout runs. It "
                "reaches the whole timeout, so the set-up since the group began is over half of it unless more "
                "than half went before the group (`ddpdoctor run` times it from init_process_group)."),
        fix=fix, subjects=[f"rank:{old}", "arg:ddp_timeout"], evidence=evidence,
    )


def _secs(x) -> str:
    return f"{x:.1f} s" if x is not None else "not measured"


def _rank_gap(facts: dict, since_group: dict):
    """The longest a rank waited, or will wait, for the others in a collective, from every rank's times (`ddpdoctor
    run`: each rank's arrival at training, `wall_time`, and its entry into init_process_group, `wall_time -
    seconds_since_group`; the longest wait in one collective call, `coll_wait_max_s`): {"s", "rank", "title", ...}.
    None unless two or more ranks' times are known (one rank's own time is no gap: a bound, said so by the caller)."""
    arrive = {r: float(facts[r]["wall_time"]) for r in since_group if facts[r].get("wall_time")}
    if len(arrive) < 2:
        return None
    hosts = {facts[r].get("host") for r in arrive}
    clocks = "one host's clock"
    cands = []
    if len(hosts - {None}) > 1:
        # ranks on different hosts: their wall clocks may differ by any skew, so wall times are not compared. Each rank's
        # own clock from its group's start is: under Gloo every rank's group comes up at one moment (ProcessGroupGloo
        # connects a full mesh in init_process_group: no rank's group is up before all have joined).
        since_up = {r: float(facts[r]["since_up_s"]) for r in arrive if facts[r].get("since_up_s") is not None}
        init = {r: float(facts[r]["init_s"]) for r in arrive if facts[r].get("init_s") is not None}
        gloo = all("gloo" in str(facts[r].get("backend") or "") and "nccl" not in str(facts[r].get("backend") or "")
                   and not facts[r].get("gloo_lazy") for r in arrive)
        clocks = "each rank's own clock from its group's start (hosts " + ", ".join(sorted(str(h) for h in hosts - {None})) + \
            "; wall clocks across hosts are not compared)" if gloo else \
            "not compared across hosts (their clocks may differ; this backend's group start is no common moment)"
        train_s = rdzv_s = None
        if gloo and len(since_up) == len(arrive):
            late, early = max(since_up, key=since_up.get), min(since_up, key=since_up.get)
            train_s = since_up[late] - since_up[early]
        if gloo and len(init) == len(arrive):
            in_late, in_early = min(init, key=init.get), max(init, key=init.get)  # the last to enter waited least
            rdzv_s = init[in_early] - init[in_late]
    else:
        entered = {r: arrive[r] - float(since_group[r]) for r in arrive}
        late, early = max(arrive, key=arrive.get), min(arrive, key=arrive.get)
        in_late, in_early = max(entered, key=entered.get), min(entered, key=entered.get)
        train_s, rdzv_s = arrive[late] - arrive[early], entered[in_late] - entered[in_early]
    waits = {r: float(facts[r]["coll_wait_max_s"]) for r in arrive if facts[r].get("coll_wait_max_s") is not None}
    w = max(waits, key=waits.get) if waits else None
    if train_s is not None:
        cands.append((train_s, late, f"rank {late} reached training {train_s:.0f} s after rank {early}, which waits that "
                                     "long in its first collective"))
    if rdzv_s is not None:
        cands.append((rdzv_s, in_late, f"rank {in_late} entered init_process_group {rdzv_s:.0f} s after rank "
                                       f"{in_early}, which waited that long in the rendezvous"))
    if w is not None:
        op = facts[w].get("coll_wait_max_op") or "a collective"
        cands.append((waits[w], w, f"rank {w} waited {waits[w]:.0f} s in {op} for the other ranks before training"))
    if not cands:
        return None
    s, rank, title = max(cands, key=lambda c: c[0])
    return {"s": round(s, 3), "rank": rank, "title": title,
            "train_s": round(train_s, 3) if train_s is not None else None,
            "rendezvous_s": round(rdzv_s, 3) if rdzv_s is not None else None,
            "waited_s": round(waits[w], 3) if w is not None else None, "clocks": clocks}


@check("RT037", "callback-writes-on-every-rank", family="trainer", needs=("runtime_trainer",), catalogue=("F12",))
def callback_writes_on_every_rank(snap):
    """A custom TrainerCallback writes files or starts runs without a rank-0 gate.

    What it checks
        In a multi-rank run, user callbacks whose on_log/on_save/on_evaluate/... methods call
        open/save/dump/init and never read state.is_world_process_zero, args.should_log/should_save
        or a rank.

    Why it matters
        Every rank executes the callback: duplicated logs and experiment-tracker runs, and
        checkpoints or files clobbered by concurrent writers. Trainer gates its own writes on
        `args.should_log` / `should_save` (transformers `training_args.py`).

    Example
        def on_log(self, args, state, control, logs=None, **kw): open("log.jsonl", "a").write(...)

    Fix
        if state.is_world_process_zero: ...   # at the top of the callback method
    """
    if world_size(snap) <= 1:
        return
    for cb in section(snap, "runtime_trainer").get("callbacks") or []:
        bad = cb.get("ungated_writes") or []
        if not bad:
            continue
        events = ", ".join(f"{b['event']} ({'/'.join(b['calls'])})" for b in bad)
        yield warning(
            f"{cb['type']} writes on every rank: {events}",
            detail="These callback methods write without checking state.is_world_process_zero, so all ranks write.",
            fix="if not state.is_world_process_zero: return   # first line of each writing callback method",
            subjects=["arg:callbacks"], evidence={"callback": cb["type"], "events": bad},
        )
