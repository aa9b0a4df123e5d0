"""SLURM set-up checks (catalogue A8): does what srun launched match what the job asks for?"""
from __future__ import annotations

from ddpdoctor.facts.slurm import expand_hostlist, slurm_procid_beyond, slurm_tasks_on_this_node, tasks_per_node
from ddpdoctor.model import error, info, warning
from ddpdoctor.model.registry import check
from ddpdoctor.facts.env import env_int, env_of
from ddpdoctor.facts.launch import command_of, described
from ddpdoctor.facts.gpu import version_tuple


def _gpus_on_node(env) -> tuple:
    for name in ("SLURM_GPUS_ON_NODE", "SLURM_GPUS_PER_NODE"):
        raw = env.get(name)
        if raw:
            try:
                return int(raw.split(":")[-1].split("(")[0]), name
            except ValueError:
                continue
    # SLURM_JOB_GPUS: "The global GPU IDs of the GPUs allocated to this job ... Only set in batch and interactive
    # jobs" (Slurm sbatch(1)/salloc(1), OUTPUT ENVIRONMENT VARIABLES, https://slurm.schedmd.com/sbatch.html
    # #OPT_SLURM_JOB_GPUS). A job-wide list, so it counts this node's GPUs only in a one-node allocation; it stands
    # in where SLURM_GPUS_ON_NODE is not exported (--gres=gpu:N on Slurm releases or setups that do not set it).
    nodes = env_int(env, "SLURM_JOB_NUM_NODES") or env_int(env, "SLURM_NNODES")
    ids = _id_list(env.get("SLURM_JOB_GPUS"))
    if ids and nodes in (None, 1):
        return len(ids), "SLURM_JOB_GPUS"
    return None, None


def _id_list(raw) -> list:
    """'0,1,2,3' or '0-3' (a Slurm list of GPU indices) as the indices; [] when it is anything else."""
    out = []
    for part in str(raw or "").split(","):
        part = part.strip()
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            return []
        out.extend(range(int(lo), int(hi) + 1) if hi else [int(lo)])
    return out


def _lightning_takes_slurm(snap, env, kind, ntasks, step):
    """Lightning installed, SLURM_NTASKS visible, the job not named bash/interactive, and the process not one srun
    started per task (no step, the batch step) or a torchrun worker: Lightning's SLURMEnvironment will still claim
    the launch (slurm.py _is_srun_used at 03f57f9c) with SLURM_NTASKS ranks."""
    versions = ((snap.get("packages") or {}) if "packages" in snap else {}).get("versions") or {}
    lightning = versions.get("lightning") or versions.get("pytorch-lightning")
    if not lightning or ntasks is None or str(env.get("SLURM_JOB_NAME") or "") in ("bash", "interactive"):
        return
    gpus, gpus_var = _gpus_on_node(env)
    per_node = slurm_tasks_on_this_node(env) or ntasks
    own_launch = kind in ("none", "manual") and step in (None, "batch")
    under_torchrun = kind in ("torchrun", "accelerate") and (snap["launcher"].get("local_world_size") or 0) > 1
    # Outside srun in an allocation of several tasks, only this process runs, yet Lightning takes SLURM_NTASKS as the
    # world size and SLURM_PROCID as the rank: it waits at the rendezvous for ranks srun never starts (#14022).
    waits = own_launch and ntasks > 1 and not under_torchrun
    if not (own_launch and gpus and gpus > per_node) and not waits and not under_torchrun:
        return
    how = ("torchrun's workers" if under_torchrun else
           f"this process, started outside srun in an allocation of {ntasks} task(s)"
           + (f" with {gpus} GPUs ({gpus_var})" if gpus else ""))
    yield warning(f"Lightning {lightning} will take SLURM as the launcher for {how}",
                  detail=("Lightning's SLURMEnvironment.detect() is true whenever SLURM_NTASKS is set and the job is not "
                          "named bash or interactive; it then reads the world size from SLURM_NTASKS and the rank from "
                          "SLURM_PROCID and starts no processes itself, so "
                          + ("every torchrun worker gets the same rank." if under_torchrun else
                             f"this one process waits at the rendezvous for the other {ntasks - 1} rank(s), which srun "
                             "never starts (Lightning-AI/pytorch-lightning#14022)." if waits else
                             f"a Trainer with {gpus} devices does not match the {per_node} task(s) SLURM launched.")
                          + " (Lightning-AI/pytorch-lightning#16955: interactive allocations.)"),
                  fix=(f"srun --ntasks-per-node={gpus or 'N'} python train.py   # one task per device; or, to launch "
                       "the processes yourself: export SLURM_JOB_NAME=interactive (or srun --job-name=interactive)"),
                  subjects=["SLURM_NTASKS", "SLURM_JOB_NAME", "pkg:lightning"],
                  evidence={"lightning": lightning, "SLURM_NTASKS": ntasks, "SLURM_JOB_NAME": env.get("SLURM_JOB_NAME"),
                            "gpus_on_node": gpus, "launcher": kind})


def _lightning_rejects_ntasks(snap, env, ntasks):
    """Lightning >= 1.8.0 refuses an allocation of several tasks without --ntasks-per-node: SLURMEnvironment.__init__
    calls _validate_srun_variables(), which raises "You set `--ntasks=N` in your SLURM bash script, but this variable
    is not supported. HINT: Use `--ntasks-per-node=N` instead." when SLURM_NTASKS > 1 and SLURM_NTASKS_PER_NODE is not
    in the environment (Lightning-AI/pytorch-lightning src/lightning/fabric/plugins/environments/slurm.py at
    03f57f9c, added by 576757fd "Validate SRUN variables when launching in SLURM (#15011)", first in 1.8.0).
    SLURMEnvironment is chosen whenever SLURM_NTASKS is set and the job is not named bash/interactive (detect()),
    and Slurm exports SLURM_NTASKS_PER_NODE only when --ntasks-per-node was given (sbatch(1), OUTPUT ENVIRONMENT
    VARIABLES)."""
    versions = ((snap.get("packages") or {}) if "packages" in snap else {}).get("versions") or {}
    name, lightning = next(((n, versions[n]) for n in ("lightning", "pytorch-lightning", "lightning-fabric")
                            if versions.get(n)), (None, None))
    if not lightning or version_tuple(lightning) < (1, 8) or not ntasks or ntasks < 2:
        return
    if "SLURM_NTASKS_PER_NODE" in env or str(env.get("SLURM_JOB_NAME") or "") in ("bash", "interactive"):
        return
    yield warning(f"Lightning {lightning} will refuse this allocation: SLURM_NTASKS={ntasks} without --ntasks-per-node",
                  detail=("Lightning's SLURMEnvironment raises \"RuntimeError: You set `--ntasks="
                          f"{ntasks}` in your SLURM bash script, but this variable is not supported. HINT: Use "
                          f"`--ntasks-per-node={ntasks}` instead.\" when SLURM_NTASKS > 1 and SLURM_NTASKS_PER_NODE is "
                          "unset (Slurm sets it only for --ntasks-per-node). The Trainer stops at start-up on every "
                          "task."),
                  fix=(f"#SBATCH --ntasks-per-node=<GPUs per node>   # instead of --ntasks={ntasks}, with --nodes=<N>; "
                       "or, to launch the processes yourself: srun --job-name=interactive ..."),
                  subjects=["SLURM_NTASKS", "SLURM_NTASKS_PER_NODE", f"pkg:{name}"],
                  evidence={name: lightning, "SLURM_NTASKS": ntasks, "SLURM_NTASKS_PER_NODE": None,
                            "SLURM_JOB_NAME": env.get("SLURM_JOB_NAME")})


@check("ENV007", "slurm-task-mismatch", family="launcher", needs=("env", "launcher"), reads=("packages", "lint", "launch"),
       catalogue=("A8",))
def slurm_task_mismatch(snap):
    """SLURM's task layout disagrees with the ranks or GPUs the job expects.

    What it checks
        Inside a SLURM allocation: WORLD_SIZE against SLURM_NTASKS when srun launches the ranks
        directly (RANK against SLURM_PROCID is ENV011's, with LOCAL_RANK); tasks per node against the GPUs SLURM gave the node;
        a multi-task allocation run from the batch script without srun; under `srun torchrun`,
        the torchrun agents srun started (one per task) against the agents the rendezvous holds (its
        GROUP_WORLD_SIZE, or, in the srun step before torchrun, the --nnodes of the torchrun command the
        launch section recorded; a torchrun command also stops the tasks-per-node-vs-GPUs warning, since
        each task then starts several ranks); and
        SLURM_NTASKS against SLURM_NTASKS_PER_NODE x nodes (with --ntasks the per-node count is
        only a maximum, so fewer tasks run than a per-node count suggests); and, with `check --config`
        (or `check --script`, a literal `Trainer(num_nodes=N)` in the script), the nodes the job's
        config asks for (Lightning's num_nodes, accelerate's num_machines) against
        the nodes of the allocation ("#SBATCH --nodes=4  # This needs to match Trainer(num_nodes=...)",
        Lightning-AI/pytorch-lightning docs/source-pytorch/clouds/cluster_advanced.rst @015e1676;
        Lightning-AI/pytorch-lightning#10098: a hang at initialisation with --nodes left at 1).

    Why it matters
        Lightning and accelerate derive ranks from SLURM variables. When `--ntasks-per-node` differs
        from the GPUs per node, the job freezes at the rendezvous or uses only some GPUs: "You
        requested 2 GPUs but launched 1 slurm tasks" (Lightning-AI/pytorch-lightning#20391,
        #19883). Running `python train.py` in the batch script (not under `srun`) starts one
        process for an N-task allocation (sbatch runs "a single copy of the batch script",
        SchedMD/slurm doc/man/man1/sbatch.1): a warning when the launch chain shows that python
        program with no srun above it; otherwise a note (info), since the batch script is also
        where `ddpdoctor check` itself runs before `srun`.

        With Lightning installed, outside an srun step (or under torchrun) in an allocation whose job
        is not named bash/interactive: Lightning's SLURMEnvironment.detect() takes any process that
        sees SLURM_NTASKS as srun-launched and reads its world from SLURM_NTASKS and its rank from
        SLURM_PROCID (Lightning-AI/pytorch-lightning src/lightning/fabric/plugins/environments/slurm.py
        at 03f57f9c, _is_srun_used), so `python train.py` with 4 devices in a 1-task allocation stops
        at the device check, torchrun's workers all take rank SLURM_PROCID (#16955, #16730), and
        `python train.py` in the batch step of an N-task allocation (N > 1) is rank 0 of N waiting at
        the rendezvous for ranks srun never starts (#14022).
        Lightning >= 1.8.0 also refuses SLURM_NTASKS > 1 without SLURM_NTASKS_PER_NODE (an
        allocation made with --ntasks alone): "You set `--ntasks=N` in your SLURM bash script, but
        this variable is not supported" (_validate_srun_variables, #15011).

    Example
        #SBATCH --ntasks-per-node=1 --gres=gpu:4, then `srun python train.py` with 4 devices.

    Fix
        Match `--ntasks-per-node` to the GPUs per node and launch every task with `srun`, or run one
        `torchrun --nproc-per-node <gpus>` per node under `srun --ntasks-per-node=1`.
    """
    env = env_of(snap)
    if not env.get("SLURM_JOB_ID") and not env.get("SLURM_JOBID"):
        return
    kind = snap["launcher"].get("kind")
    ntasks = env_int(env, "SLURM_NTASKS")
    step = env.get("SLURM_STEP_ID") or env.get("SLURM_STEPID")
    yield from _config_nodes_vs_slurm(snap, env)
    yield from _lightning_takes_slurm(snap, env, kind, ntasks, step)
    yield from _lightning_rejects_ntasks(snap, env, ntasks)
    program = command_of(snap, "python")  # the training program itself, recorded in the launch chain
    if kind in ("none", "manual") and step in (None, "batch") and ntasks and ntasks > 1 and program \
            and not command_of(snap, "srun"):
        # the program itself runs here, in the batch step and not under srun: sbatch runs ONE copy of the batch
        # script (SchedMD/slurm doc/man/man1/sbatch.1 @284c3b95: "Slurm runs a single copy of the batch script on
        # one of the allocated nodes"); only srun starts a process per task
        yield warning(
            f"SLURM allocated {ntasks} tasks, but `python {program.get('program') or '...'}` runs in the batch "
            "script without srun: it runs once, not once per task",
            detail=("sbatch runs a single copy of the batch script on one of the allocated nodes (SchedMD/slurm "
                    "doc/man/man1/sbatch.1); a command in it runs once, as one process, whatever --ntasks says. Only "
                    f"srun starts one process per task. The other {ntasks - 1} task(s) of the allocation run nothing: "
                    "a script that reads its rank from SLURM_PROCID (Lightning, accelerate, submitit) is rank 0 of "
                    f"{ntasks} waiting at the rendezvous for ranks never started; otherwise it trains alone on one "
                    "node's share."),
            fix=f"srun python {program.get('program') or 'train.py'}   # one process per task; or: srun "
                "--ntasks-per-node=1 torchrun --nproc-per-node=<gpus> ...",
            subjects=["SLURM_NTASKS"], evidence={"SLURM_NTASKS": ntasks, "SLURM_STEP_ID": step,
                                                 "program": program.get("program")})
    elif kind in ("none", "manual") and step in (None, "batch") and ntasks and ntasks > 1:
        # A note, not a warning: the batch script is also where people run `ddpdoctor check` before
        # `srun python train.py`; only the training command itself must go through srun.
        yield info(
            f"SLURM allocated {ntasks} tasks, but this process was not started by srun",
            detail=("The batch script itself runs as one process. `python train.py` there uses one task of the "
                    f"allocation; the other {ntasks - 1} sit idle, or a distributed script waits for them forever. "
                    "Start the training command with srun."),
            fix="srun python train.py   # one process per task; or: srun --ntasks-per-node=1 torchrun --nproc-per-node=<gpus> train.py",
            subjects=["SLURM_NTASKS"], evidence={"SLURM_NTASKS": ntasks, "SLURM_STEP_ID": step})
    launched = command_of(snap, "torchrun") if kind == "slurm" else None  # each srun task runs this torchrun
    if (kind in ("torchrun", "accelerate") or launched) and step not in (None, "batch", "extern") and ntasks:
        yield from _torchrun_per_srun_task(env, ntasks, launched)
    if kind == "slurm" or (step not in (None, "extern") and ntasks):
        yield from _ntasks_below_per_node(env, ntasks)
    if kind == "slurm":
        world, rank, procid = env_int(env, "WORLD_SIZE"), env_int(env, "RANK"), env_int(env, "SLURM_PROCID")
        if world is not None and ntasks is not None and world != ntasks:
            yield error(f"WORLD_SIZE={world} but srun launched SLURM_NTASKS={ntasks} tasks",
                        detail="The rendezvous waits for WORLD_SIZE ranks; srun started a different number.",
                        fix="export WORLD_SIZE=$SLURM_NTASKS   # or match --ntasks to the world size",
                        subjects=["WORLD_SIZE", "SLURM_NTASKS"],
                        evidence={"WORLD_SIZE": world, "SLURM_NTASKS": ntasks})
        # RANK against SLURM_PROCID is ENV011's (a torch variable against SLURM's, folded with LOCAL_RANK's)
        per_node = slurm_tasks_on_this_node(env)
        gpus, gpus_var = _gpus_on_node(env)
        uneven = len(set((tasks_per_node(env) or ("", [0]))[1])) > 1  # ENV023 says it, node by node
        if per_node and gpus and per_node != gpus and not launched and not uneven:  # under torchrun: several ranks
            yield warning(
                f"{per_node} SLURM task{'s' if per_node != 1 else ''} per node but {gpus} GPUs per node",
                detail=(f"srun starts one rank per task; with {gpus_var}={gpus} each node "
                        + ("leaves GPUs idle." if per_node < gpus else "puts several ranks on one GPU.")
                        + " Lightning reports this as \"You requested N GPUs but launched M slurm tasks\"."),
                fix=f"#SBATCH --ntasks-per-node={gpus}   # one task per GPU",
                subjects=["SLURM_NTASKS_PER_NODE", gpus_var],
                evidence={"tasks_per_node": per_node, gpus_var: gpus})


def _config_nodes_vs_slurm(snap, env):
    """ENV007 for the nodes a config file or the script names (node_args: lint.configfacts, lint.scriptfacts) against
    the allocation's nodes."""
    from ddpdoctor.facts.env import lint_facts

    nodes = env_int(env, "SLURM_JOB_NUM_NODES") or env_int(env, "SLURM_NNODES")
    args = [a for a in lint_facts(snap).get("node_args") or () if isinstance(a, dict) and isinstance(a.get("value"), int)]
    if not nodes or not args:
        return
    off = [a for a in args if a["value"] != nodes]
    if not off:
        return
    top = off[0]
    where = str(top.get("path"))
    yield warning(f"{where}: {top['flag']} is {top['value']}, but this SLURM allocation has {nodes} node"
                  f"{'s' if nodes != 1 else ''}",
                  detail=("The ranks of the missing (or extra) nodes never start, so the rendezvous waits for them: "
                          "Lightning stops at 'Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/N' "
                          "(Lightning-AI/pytorch-lightning#10098). Lightning's SLURM guide: #SBATCH --nodes must match "
                          "Trainer(num_nodes=...), and --ntasks-per-node must match devices."),
                  fix=f"#SBATCH --nodes={top['value']}   # or set {top['flag']}: {nodes} in {where}",
                  subjects=["SLURM_JOB_NUM_NODES", f"path:{where}"],
                  evidence={"config": {a["flag"]: a["value"] for a in off}, "slurm_nodes": nodes, "path": where})


def _ntasks_below_per_node(env, ntasks):
    """--ntasks with --ntasks-per-node: "the --ntasks option will take precedence and the --ntasks-per-node will be
    treated as a maximum count of tasks per node" (Slurm sbatch(1)/srun(1), OPT_ntasks-per-node,
    https://slurm.schedmd.com/sbatch.html#OPT_ntasks-per-node). SLURM_NTASKS_PER_NODE still carries the requested
    count, so code that sizes the job from it (devices per node x nodes) waits for tasks that never start
    (Lightning-AI/pytorch-lightning#20391: --ntasks=1 --ntasks-per-node=2 --gres=gpu:2)."""
    requested = env_int(env, "SLURM_NTASKS_PER_NODE")
    nodes = env_int(env, "SLURM_JOB_NUM_NODES") or env_int(env, "SLURM_NNODES")
    if not (ntasks and requested and nodes) or ntasks >= requested * nodes:
        return
    yield warning(
        f"SLURM_NTASKS={ntasks} but SLURM_NTASKS_PER_NODE={requested} on {nodes} node{'s' if nodes != 1 else ''}: "
        f"only {ntasks} task{'s' if ntasks != 1 else ''} run, not {requested * nodes}",
        detail=("With --ntasks given, Slurm treats --ntasks-per-node as a maximum (sbatch/srun --ntasks-per-node), "
                "yet SLURM_NTASKS_PER_NODE keeps the requested number. A framework that counts processes per node "
                "from it (Lightning's devices per node) expects ranks that srun never starts and waits at the "
                "rendezvous; or GPUs stay idle."),
        fix=(f"#SBATCH --ntasks={requested * nodes}   # or drop --ntasks and keep --nodes={nodes} "
             f"--ntasks-per-node={requested}"),
        subjects=["SLURM_NTASKS", "SLURM_NTASKS_PER_NODE"],
        evidence={"SLURM_NTASKS": ntasks, "SLURM_NTASKS_PER_NODE": requested, "nodes": nodes})


def _torchrun_per_srun_task(env, ntasks: int, launched=None):
    """`srun torchrun ...` runs one torchrun agent per Slurm task (srun starts the command once per task), and each
    agent counts as one node of the rendezvous (torch/distributed/run.py: --nnodes is the number of agents; every
    agent starts --nproc-per-node workers). torchrun exports GROUP_WORLD_SIZE, the agents in the rendezvous
    (torch/distributed/elastic/agent/server/api.py); WORLD_SIZE/LOCAL_WORLD_SIZE is the same count for a fixed
    --nproc-per-node. Agents started by srun that the rendezvous does not hold wait or fail
    ("RendezvousConnectionError: The connection to the C10d store has failed", pytorch/pytorch#121944)."""
    nodes = env_int(env, "GROUP_WORLD_SIZE")
    world, local = env_int(env, "WORLD_SIZE"), env_int(env, "LOCAL_WORLD_SIZE")
    if nodes is None and world and local and world % local == 0:
        nodes = world // local
    told = ""
    if nodes is None and launched:  # in the srun step, before torchrun: the agents its --nnodes asks for (MIN:MAX: MAX)
        raw = str(launched["options"].get("nnodes") or "1").strip().rsplit(":", 1)[-1]
        nodes = int(raw) if raw.isdigit() else None
        told = f" (the launch command: {described(launched)})"
    if not nodes or nodes == ntasks:
        return
    per_node = slurm_tasks_on_this_node(env)
    yield error(f"srun started SLURM_NTASKS={ntasks} tasks and each runs its own torchrun, but the rendezvous holds "
                f"{nodes} agent{'s' if nodes != 1 else ''}{told}",
                detail=("srun runs its command once per task, so `srun torchrun ...` starts one torchrun agent per task; "
                        "torchrun counts every agent as a node (--nnodes) and each starts --nproc-per-node workers. "
                        f"Here {ntasks} agents were started"
                        + (f" ({per_node} on this node)" if per_node else "")
                        + f" for a rendezvous of {nodes}: the extra agents wait for a round that never opens or fail "
                        "with 'RendezvousConnectionError: The connection to the C10d store has failed' "
                        "(pytorch/pytorch#121944), and agents that share a node put their workers on the same GPUs."),
                fix=("srun --ntasks-per-node=1 torchrun --nnodes=$SLURM_JOB_NUM_NODES --nproc-per-node=<gpus per node> "
                     "...   # one agent per node; or run the ranks with srun alone (one task per GPU) and no torchrun"),
                subjects=["SLURM_NTASKS"] + (["SLURM_NTASKS_PER_NODE"] if per_node else [])
                + (["torchrun --nnodes"] if told else ["GROUP_WORLD_SIZE"]),
                evidence={"SLURM_NTASKS": ntasks, "agents_in_rendezvous": nodes, "tasks_on_this_node": per_node,
                          "WORLD_SIZE": world, "LOCAL_WORLD_SIZE": local,
                          "launch_command": described(launched) if told else None})


@check("ENV011", "slurm-vs-torch-variables", family="launcher", needs=("env", "launcher"), reads=("gpus",),
       catalogue=("A8", "A4"))
def slurm_vs_torch_variables(snap):
    """SLURM's task variables and the torch variables of the same process contradict each other.

    What it checks
        Inside a SLURM allocation: SLURM_PROCID against SLURM_NTASKS (a task id must be below the
        task count); a WORLD_SIZE exported by hand in the batch script that is smaller than
        SLURM_NTASKS (every `srun` of that allocation starts SLURM_NTASKS ranks); and, in an srun task,
        RANK against SLURM_PROCID and LOCAL_RANK against SLURM_LOCALID, as one finding: judged against
        the GPUs the task sees (CUDA_VISIBLE_DEVICES, else SLURM_GPUS_ON_NODE / SLURM_GPUS_PER_NODE, typed
        `a100:4` included, else SLURM_JOB_GPUS of a one-node job, else the GPUs NVML shows): an error
        when the task's cuda:LOCAL_RANK is another task's GPU or does not exist, a warning when the GPU
        count is not known, quiet when srun binds each task its own GPU and LOCAL_RANK is below the
        GPUs it sees. Inside an srun step, WORLD_SIZE against SLURM_NTASKS is ENV007's.

    Why it matters
        SLURM_PROCID >= SLURM_NTASKS means the variables come from different steps (an env saved
        from one job step and replayed in another, or a nested srun): the rank derived from it is
        out of range and the rendezvous waits for a rank that never comes. With WORLD_SIZE below
        the task count, the extra tasks get ranks >= WORLD_SIZE. A LOCAL_RANK that is not
        SLURM_LOCALID (a stale `export LOCAL_RANK=0` in the batch script, or LOCAL_RANK=$SLURM_PROCID)
        puts two ranks on one GPU through cuda:LOCAL_RANK: "Duplicate GPU detected" or an OOM
        (Lightning-AI/pytorch-lightning#20391, #19883).

    Example
        `export LOCAL_RANK=0` in the sbatch script, then `srun --ntasks-per-node 4 --gres gpu:4 python train.py`.

    Fix
        Derive the torch variables from SLURM's in each task: RANK=$SLURM_PROCID,
        LOCAL_RANK=$SLURM_LOCALID, WORLD_SIZE=$SLURM_NTASKS (`srun bash -c '...'` evaluates them per
        task), and do not export them in the batch script. MASTER_ADDR must be a node of the job:
        `export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)`.

    Also
        MASTER_ADDR, when it is a host name, against the job's nodes (SLURM_JOB_NODELIST): rank 0 is
        a task of the job, so its store listens on one of them; a name that is none of them (often
        SLURM_SUBMIT_HOST, the login or head node the job was submitted from) is a host where nothing
        listens, and every rank times out connecting (aws-samples/aws-hpc-tutorials#448). A name
        that begins with a node's name (node01-ib, node01.cluster) counts as that node.
    """
    env = env_of(snap)
    if not (env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID")):
        return
    kind = (snap.get("launcher") or {}).get("kind")
    ntasks = env_int(env, "SLURM_NTASKS")
    procid, _ = slurm_procid_beyond(env)
    if procid is not None:
        yield error(f"SLURM_PROCID={procid} is not below SLURM_NTASKS={ntasks}",
                    detail=("SLURM numbers the tasks of a step 0..SLURM_NTASKS-1, so these variables cannot come from "
                            "one step: an environment saved in one step and reused in another, or an srun nested in an "
                            "srun. A rank taken from SLURM_PROCID is out of range and the rendezvous waits for a rank "
                            "that never joins."),
                    fix="srun python train.py   # a fresh step: SLURM sets SLURM_PROCID/SLURM_NTASKS per task; "
                        "do not save and replay SLURM_* variables",
                    subjects=["SLURM_PROCID", "SLURM_NTASKS"] + (["RANK"] if env.get("RANK") is not None else []),
                    evidence={"SLURM_PROCID": procid, "SLURM_NTASKS": ntasks, "RANK": env.get("RANK")})
    step = env.get("SLURM_STEP_ID") or env.get("SLURM_STEPID")
    world = env_int(env, "WORLD_SIZE")
    if kind != "slurm" and kind != "torchrun" and step in (None, "batch") and world is not None and ntasks \
            and world < ntasks:
        yield warning(f"WORLD_SIZE={world} is exported, but every srun in this allocation starts "
                      f"SLURM_NTASKS={ntasks} tasks",
                      detail=(f"No launch under this allocation gives {world} ranks: `srun python train.py` starts "
                              f"{ntasks} tasks, and tasks {world}..{ntasks - 1} get ranks beyond WORLD_SIZE (or two tasks "
                              "share a rank), so the rendezvous never completes."),
                      fix="unset WORLD_SIZE   # and in the task: export WORLD_SIZE=$SLURM_NTASKS; "
                          f"or run fewer tasks: srun --ntasks {world} python train.py",
                      subjects=["WORLD_SIZE", "SLURM_NTASKS"],
                      evidence={"WORLD_SIZE": world, "SLURM_NTASKS": ntasks, "SLURM_STEP_ID": step})
    if kind == "slurm" and procid is None:
        yield from _torch_ids_vs_task_ids(snap, env)

    yield from _master_outside_job(env)


def _visible_to_task(snap, env) -> tuple:
    """(GPUs this task sees, where the count came from): CUDA_VISIBLE_DEVICES when set (srun's per-task binding
    leaves one), else the node's SLURM GPU count, else the devices the snapshot read; (None, None) when unknown."""
    from ddpdoctor.checks.env.cuda import HIDE_ALL, parse_visible_devices  # noqa: PLC0415

    raw = env.get("CUDA_VISIBLE_DEVICES")
    if raw is not None and raw.strip() not in HIDE_ALL:
        used = parse_visible_devices(raw)["used"]
        return (len(used), "CUDA_VISIBLE_DEVICES") if used else (None, None)
    count, name = _gpus_on_node(env)  # the allocation's, before the machine's (NVML may count GPUs of other jobs)
    if count is not None:
        return count, name
    devices = (snap.get("gpus") or {}).get("devices") if isinstance(snap.get("gpus"), dict) else None
    if isinstance(devices, list) and devices:
        return len(devices), "GPUs on this node"
    return None, None


def _torch_ids_vs_task_ids(snap, env):
    """ENV011 under srun: RANK against SLURM_PROCID and LOCAL_RANK against SLURM_LOCALID, one finding for both (the
    same fault: torch's variables exported once in the batch script, or taken from the wrong SLURM variable). The
    GPU a task picks is cuda:LOCAL_RANK (the Trainer, accelerate, torchrun-style scripts); a LOCAL_RANK other than
    the task's SLURM_LOCALID is another task's GPU when the tasks of the node share its GPUs, a GPU that does not
    exist when it is not below the GPUs the task sees ("invalid device ordinal"), and harmless for the GPU when srun
    binds one GPU per task and LOCAL_RANK is 0."""
    rank, procid = env_int(env, "RANK"), env_int(env, "SLURM_PROCID")
    local, localid = env_int(env, "LOCAL_RANK"), env_int(env, "SLURM_LOCALID")
    bad_rank = rank is not None and procid is not None and rank != procid
    bad_local = local is not None and localid is not None and local != localid
    if not (bad_rank or bad_local):
        return
    per_node = slurm_tasks_on_this_node(env)
    visible, seen_from = _visible_to_task(snap, env)
    gpu_fault, gpu_sev = "", None
    if bad_local:
        if visible is not None and local >= visible:
            gpu_fault, gpu_sev = (f"cuda:{local} does not exist: this task sees {visible} GPU{'s' if visible != 1 else ''} "
                                  f"({seen_from}), so torch fails with 'invalid device ordinal'"), error
        elif per_node and per_node > 1 and (visible is None or visible >= per_node):
            gpu_fault = (f"this task will use cuda:{local}, not its own cuda:{localid}"
                         + (f", the GPU of task {local} of this node" if local < per_node else "")
                         + ("" if visible is not None else " (if the tasks share the node's GPUs)"))
            gpu_sev = error if visible is not None else warning
    subjects, evidence, parts = [], {}, []
    if bad_rank:
        parts.append(f"RANK={rank} but SLURM_PROCID={procid}")
        subjects += ["RANK", "SLURM_PROCID"]
        evidence.update({"RANK": rank, "SLURM_PROCID": procid})
    if bad_local and (gpu_sev or bad_rank):
        parts.append(f"LOCAL_RANK={local} but SLURM_LOCALID={localid}")
        subjects += ["LOCAL_RANK", "SLURM_LOCALID"]
        evidence.update({"LOCAL_RANK": local, "SLURM_LOCALID": localid, "tasks_per_node": per_node,
                         "gpus_seen": visible, "gpus_seen_from": seen_from})
    if not parts:
        return  # LOCAL_RANK off alone, on a task that owns its GPU(s): cuda:LOCAL_RANK still exists and is its own
    sev = error if bad_rank else gpu_sev
    exported = all(v in (0, None) for v in (rank if bad_rank else None, local if bad_local else None))
    yield sev(" and ".join(parts) + (f": {gpu_fault}" if gpu_fault else ": two tasks of this job share a rank"),
              detail=("srun starts one task per rank and numbers them: SLURM_PROCID across the job, SLURM_LOCALID on "
                      "the node. The torch variables of this task say otherwise, "
                      + ("as when `export RANK=0 LOCAL_RANK=0` (or WORLD_SIZE...) runs once in the batch script and "
                         "every task inherits it" if exported else
                         "as when they are set from the wrong SLURM variable (LOCAL_RANK=$SLURM_PROCID) or once in the "
                         "batch script")
                      + ". "
                      + ("With RANK off, two tasks claim one rank: the rendezvous never completes, or fails with a "
                         "duplicate rank. " if bad_rank else "")
                      + (f"The Trainer, accelerate and most scripts pick cuda:LOCAL_RANK: {gpu_fault}; NCCL then "
                         "reports 'Duplicate GPU detected' or the GPU runs out of memory "
                         "(Lightning-AI/pytorch-lightning#20391, #19883)." if gpu_fault else "")),
              fix=("srun bash -c 'export RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID WORLD_SIZE=$SLURM_NTASKS; "
                   "python train.py'   # per task; do not export them once in the batch script"),
              subjects=subjects, evidence=evidence)


def _master_outside_job(env):
    addr = (env.get("MASTER_ADDR") or "").strip()
    nodes = expand_hostlist(env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST") or "")
    if not addr or not nodes or addr.lower() in ("localhost",) or not any(c.isalpha() for c in addr) or ":" in addr:
        return  # unset, an IP address (not comparable with host names), or loopback (NET002's)
    label = addr.lower()
    if any(label == n.lower() or label.startswith(n.lower() + sep) for n in nodes for sep in ("", ".", "-", "_")):
        return
    submit = (env.get("SLURM_SUBMIT_HOST") or "").strip()
    is_submit = submit and label.split(".")[0] == submit.lower().split(".")[0]
    shown = ", ".join(nodes[:4]) + (", ..." if len(nodes) > 4 else "")
    yield warning(
        f"MASTER_ADDR={addr} is not a node of this Slurm job ({shown})"
        + (": it is the host the job was submitted from" if is_submit else ""),
        detail=("Rank 0 is a task of the job, so its rendezvous store listens on one of the job's nodes; at "
                f"{addr} nothing listens, and every rank times out connecting (\"The client socket has timed out "
                "... while trying to connect\")."
                + (" SLURM_SUBMIT_HOST is the login or head node, which runs no task of the job." if is_submit else "")),
        fix='export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        subjects=["MASTER_ADDR", "SLURM_JOB_NODELIST"],
        evidence={"MASTER_ADDR": addr, "job_nodes": nodes[:16], "SLURM_SUBMIT_HOST": submit or None})


@check("ENV023", "slurm-uneven-tasks-per-node", family="launcher", needs=("env", "launcher"), reads=("launch",),
       catalogue=("A8",))
def slurm_uneven_tasks_per_node(snap):
    """SLURM runs a different number of tasks on the nodes of one job step.

    What it checks
        The step's per-node task list (SLURM_STEP_TASKS_PER_NODE, else SLURM_TASKS_PER_NODE), read with the
        grammar SLURM writes it in (data/slurm_env.json: '2(x3),1' is 2, 2, 2 and 1 task, in node-list order;
        SchedMD/slurm src/common/env.c), when srun starts the ranks itself (one task per rank) or the batch
        script will: whether every node gets the same count, and each count against this node's GPUs
        (SLURM_GPUS_ON_NODE / SLURM_GPUS_PER_NODE / SLURM_JOB_GPUS).

    Why it matters
        `--ntasks=7 --nodes=4` (or --ntasks without --ntasks-per-node on nodes of different sizes) spreads
        the tasks unevenly: a node with fewer tasks than GPUs leaves GPUs idle, one with more has a rank
        without a GPU of its own ("invalid device ordinal", or two ranks on one GPU: NCCL's "Duplicate GPU
        detected"). Code that takes the world size as
        nodes x tasks per node, or the local rank as RANK % tasks per node, is wrong on such a layout and
        waits at the rendezvous for ranks that never start. Lightning and accelerate read the per-node count
        from SLURM and assume it is the same on every node.

    Example
        #SBATCH --nodes=4 --ntasks=7 --gres=gpu:2   ->   SLURM_TASKS_PER_NODE=2(x3),1

    Fix
        #SBATCH --nodes=N --ntasks-per-node=<GPUs per node> (and no --ntasks), so every node runs one task
        per GPU.
    """
    env = env_of(snap)
    if not (env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID")):
        return
    kind = snap["launcher"].get("kind")
    step = env.get("SLURM_STEP_ID") or env.get("SLURM_STEPID")
    if not (kind == "slurm" or (kind in ("none", "manual") and step in (None, "batch"))):
        return
    if command_of(snap, "torchrun"):
        return  # agents per node: ENV007 (_torchrun_per_srun_task) judges `srun torchrun`
    got = tasks_per_node(env)
    if not got or len(set(got[1])) < 2:
        return
    name, counts = got
    gpus, gpus_var = _gpus_on_node(env)
    shown = str(env.get(name))
    layout = ", ".join(str(c) for c in counts[:16]) + (", ..." if len(counts) > 16 else "")
    detail = (f"{name}={shown} is {len(counts)} nodes running {layout} task(s) in node-list order "
              f"({sum(counts)} in all). srun starts one rank per task, so the nodes run different numbers of ranks.")
    if gpus:
        idle = sum(1 for c in counts if c < gpus)
        shared = sum(1 for c in counts if c > gpus)
        detail += (f" With {gpus} GPUs on this node ({gpus_var}), and as a guess the same on the others: "
                   + ", ".join(p for p in (f"{idle} node(s) leave GPUs idle" if idle else "",
                                           f"{shared} node(s) run more ranks than GPUs (a rank without a GPU of its own: 'invalid "
                                           "device ordinal', or two on one GPU: NCCL's 'Duplicate GPU detected')"
                                           if shared else "") if p)
                   + ".")
    detail += (" Code that computes the world size as nodes x tasks per node, or the local rank as RANK % tasks per "
               "node, is wrong on this layout and waits at the rendezvous for ranks that never start.")
    per = gpus or max(counts)
    yield warning(f"SLURM runs {min(counts)} to {max(counts)} tasks per node across the {len(counts)} nodes of this "
                  "job: the ranks are spread unevenly",
                  detail=detail,
                  fix=f"#SBATCH --nodes={len(counts)} --ntasks-per-node={per}   # instead of --ntasks={sum(counts)}: "
                      "the same count on every node, one task per GPU",
                  subjects=[name] + ([gpus_var] if gpus else []),
                  evidence={name: shown, "per_node": counts[:64], "gpus_on_node": gpus})
