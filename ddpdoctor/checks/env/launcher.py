"""Launcher and rank-environment checks (catalogue A1-A8): is this process set up to join a job?"""
from __future__ import annotations

from ddpdoctor.model import error, info, warning
from ddpdoctor.model.registry import check
from ddpdoctor.facts.env import env_int, env_of, script_asks
from ddpdoctor.facts.launch import bound_port, commands
from ddpdoctor.facts.launchers import rank_passed_explicitly
from ddpdoctor.facts.slurm import slurm_batch_world_below, slurm_procid_beyond


@check("ENV003", "rank-out-of-range", reads=("comm",), family="launcher", needs=("env",), catalogue=("A4",))
def rank_out_of_range(snap):
    """RANK must be a whole number in [0, WORLD_SIZE).

    What it checks
        RANK and WORLD_SIZE, when both are set, satisfy 0 <= RANK < WORLD_SIZE. When the live comm
        test ran into the same rank, COMM009 reports it instead.

    Why it matters
        The rendezvous waits for WORLD_SIZE distinct ranks 0..WORLD_SIZE-1. A rank outside that
        range never matches a slot: init_process_group hangs until its timeout (30 minutes by
        default) instead of failing. See pytorch/pytorch#52848.

    Example
        RANK=5 WORLD_SIZE=4 python train.py

    Fix
        Let torchrun assign ranks: `torchrun --nproc-per-node 4 train.py`. If you must set them
        by hand, RANK = NODE_RANK * LOCAL_WORLD_SIZE + LOCAL_RANK and stays below WORLD_SIZE.
    """
    env = env_of(snap)
    rank, world = env_int(env, "RANK"), env_int(env, "WORLD_SIZE")
    if rank is None or world is None or world <= 0:
        return
    failure = (snap.get("comm") or {}).get("failure")
    if isinstance(failure, dict) and failure.get("kind") == "rank-out-of-range":
        return  # the live comm test hit it too: COMM009 reports it, with the ranks and hosts
    procid, _ = slurm_procid_beyond(env)
    if procid is not None and rank == procid:
        return  # the rank was taken from a SLURM_PROCID beyond SLURM_NTASKS: ENV011 reports the cause
    if not 0 <= rank < world:
        yield error(
            f"RANK={rank} is not below WORLD_SIZE={world}",
            detail=(f"Ranks run from 0 to WORLD_SIZE-1 = {world - 1}. Rank {rank} will never match a slot in the "
                    "rendezvous, so init_process_group blocks until its timeout (30 min by default)."),
            fix=f"torchrun --nproc-per-node {world} train.py   # lets torchrun assign RANK, LOCAL_RANK and WORLD_SIZE",
            subjects=["RANK", "WORLD_SIZE"],
            evidence={"RANK": env.get("RANK"), "WORLD_SIZE": env.get("WORLD_SIZE")},
        )


RENDEZVOUS_VARS = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE")


def _needs_a_launcher(snap, env):
    """ENV001's finding for a script that reads a launcher's variable without a default where no launcher runs: no
    launcher variable (launcher.kind "none") and no launcher command above check (the launch section)."""
    if snap["launcher"].get("kind") != "none" or any(c.get("launcher") != "python" for c in commands(snap)):
        return
    reads = [r for r in script_asks(snap, "launcher_env_reads") if r.get("name") and not env.get(r["name"])]
    if not reads:
        yield from _env_rendezvous_without_launcher(snap, env)
        return
    names = sorted({r["name"] for r in reads})
    first = reads[0]
    where = f"{first.get('path')}:{first.get('line')}"
    yield warning(f"{where} reads os.environ[{first['name']!r}], which only a launcher sets: started without one "
                  f"it stops with KeyError: {first['name']!r}",
                  detail=("No launcher variable is set here and no launcher started this process. torchrun (and "
                          "python -m torch.distributed.launch --use-env, accelerate launch, deepspeed) set RANK, "
                          "LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR and MASTER_PORT in each "
                          "worker (torch/distributed/elastic/agent/server/local_elastic_agent.py); the script reads "
                          + ", ".join(f"{r['name']} ({r.get('path')}:{r.get('line')})" for r in reads[:6])
                          + " with no default. Checked in the shell that will start a launcher, this is expected."),
                  fix="torchrun --nproc-per-node <GPUs> " + str(first.get("path") or "train.py")
                      + "   # sets " + ", ".join(names) + "; or read them with os.environ.get(name, default)",
                  subjects=names + [f"line:{first.get('line')}", f"path:{first.get('path')}"],
                  evidence={"reads": reads[:12], "launcher": "none"})


def _deepspeed_without_rank_env(snap, env):
    """ENV001 for a program handed a DeepSpeed config (`--deepspeed ds.json`) by a launch that exports none of the
    rank variables deepspeed.init_distributed needs (plain python; accelerate launch's simple launcher): DeepSpeed then
    discovers the ranks through MPI and imports mpi4py (data/launchers.json deepspeed_mpi_discovery)."""
    import json
    import os

    if snap["launcher"].get("kind") != "none":
        return
    cmd = next((c for c in commands(snap) if c.get("script_deepspeed")), None)
    if cmd is None or cmd.get("launcher") not in ("python", "accelerate"):
        return
    opts = cmd.get("options") or {}
    cfg = (((snap.get("host") or {}) if "host" in snap else {}).get("accelerate_config") or {}).get("values") or {}
    kind = str(cfg.get("distributed_type") or "").upper().replace("DISTRIBUTEDTYPE.", "")
    if cmd["launcher"] == "accelerate":
        if any(opts.get(k) for k in ("use_deepspeed", "use_fsdp", "use_megatron_lm", "multi_gpu")) \
                or kind in ("DEEPSPEED", "MULTI_GPU", "FSDP", "MEGATRON_LM"):
            return  # a launcher that sets the rank variables (deepspeed's, or torchrun's)
        try:
            if int(opts.get("num_processes") or 1) > 1:
                return  # accelerate takes the multi-GPU launcher for several processes
        except ValueError:
            return
    versions = (snap.get("packages") or {}).get("versions") or {}
    if not versions.get("deepspeed") or versions.get("mpi4py"):
        return  # no DeepSpeed to initialise, or MPI discovery has its mpi4py (one process: world size 1)
    with open(os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "data",
                           "launchers.json"), encoding="utf-8") as fh:
        table = json.load(fh)["deepspeed_mpi_discovery"]
    need = [v for v in table["required_env"] if not env.get(v)]
    src = table["sources"][0]
    how = ("accelerate launch's simple launcher (no --use_deepspeed, no --multi_gpu, one process)"
           if cmd["launcher"] == "accelerate" else "python, with no launcher")
    unknown = "mpi4py" not in versions
    yield warning(f"DeepSpeed is given {cmd['script_deepspeed']} under {how}, which sets none of {', '.join(need)}: "
                  "deepspeed.init_distributed falls back to MPI discovery and imports mpi4py, "
                  + ("which is not recorded here" if unknown else "which is not installed"),
                  detail=(f"{src['repo']} {src['path']}@{src['commit'][:12]} init_distributed: when any of "
                          f"{', '.join(table['required_env'])} is unset it calls mpi_discovery(), whose first line is "
                          "`from mpi4py import MPI`: the job stops with \"ModuleNotFoundError: No module named 'mpi4py'\" "
                          "before training" + (" (mpi4py's presence was not recorded: a guess)" if unknown else "")
                          + ". accelerate runs the program with its simple launcher unless --use_deepspeed, --use_fsdp, "
                          "--multi_gpu or a DEEPSPEED/MULTI_GPU config selects a launcher that sets them "
                          "(huggingface/accelerate src/accelerate/commands/launch.py launch_command)."),
                  fix=("accelerate launch --use_deepspeed --deepspeed_config_file " + str(cmd["script_deepspeed"])
                       + " ...   # or: deepspeed <program> ...; torchrun --nproc-per-node 1 <program> ... (all set "
                       "RANK & co); or pip install mpi4py"),
                  subjects=need + ["pkg:deepspeed"],
                  evidence={"launcher": cmd["launcher"], "deepspeed_config": cmd["script_deepspeed"], "missing": need,
                            "mpi4py": versions.get("mpi4py")})


def _env_rendezvous_without_launcher(snap, env):
    """ENV001 for a script whose init_process_group rendezvous is env:// (the default) where no launcher runs and the
    script does not set the variables itself nor start its own processes (mp.spawn: its workers' env is the script's)."""
    if script_asks(snap, "spawn_worlds") and any(r.get("kind") == "spawn" for r in script_asks(snap, "spawn_worlds")):
        return
    for call in script_asks(snap, "env_rendezvous"):
        passed = {str(p).upper() for p in call.get("passes") or ()}
        own = set(call.get("script_sets") or ())
        need = [v for v in RENDEZVOUS_VARS if v not in passed and v not in own and not env.get(v)]
        if not need:
            continue
        where = f"{call.get('path')}:{call.get('line')}"
        yield warning(f"{where} calls init_process_group with the env:// rendezvous, which reads {', '.join(need)}: "
                      "only a launcher sets them, and none runs here",
                      detail=("torch's env:// handler (the default init_method) reads RANK and WORLD_SIZE unless they "
                              "are passed, and always MASTER_ADDR and MASTER_PORT (torch/distributed/rendezvous.py "
                              "_env_rendezvous_handler); started as `python train.py` it stops with \"ValueError: Error "
                              f"initializing torch.distributed using env:// rendezvous: environment variable {need[0]} "
                              "expected, but not set\" (NVIDIA/apex#99). torchrun sets them in each worker. Checked in "
                              "the shell that will start a launcher, this is expected."),
                      fix=("torchrun --nproc-per-node <GPUs> " + str(call.get("path") or "train.py")
                           + "   # sets " + ", ".join(need) + "; or pass init_method='tcp://<host>:<port>' with rank= "
                           "and world_size="),
                      subjects=need + [f"line:{call.get('line')}", f"path:{call.get('path')}"],
                      evidence={"init_process_group": call, "missing": need, "launcher": "none"})
        return


def _rank_passed_explicitly(env, passer):
    """ENV001's note for a process of a launcher that exports no RANK and passes the rank to init_process_group
    itself (data/launchers.json "rank_passed_explicitly"): only a script calling init_process_group() with env://
    on its own would need RANK."""
    source = passer["sources"][0]
    yield info(f"RANK not set: this is the environment {passer['framework'].split(' (')[0]} gives its processes, "
               "which pass the rank to init_process_group themselves",
               detail=(f"{', '.join(passer['sets'])} are set and RANK is not, as {passer['name']} sets them "
                       f"({source['repo']} {source['path']}); the framework computes {passer['rank']}. Nothing "
                       "fails there. Only code that calls init_process_group() with the default env:// on its own "
                       "in this process needs RANK (\"environment variable RANK expected, but not set\")."),
               fix=("# only if your own code calls init_process_group() with env:// here:\n"
                    "export RANK=$(( NODE_RANK * <processes per node> + LOCAL_RANK ))"),
               subjects=["RANK", f"launcher:{passer['name']}"],
               evidence={"set": {v: env.get(v) for v in passer["sets"]}, "missing": ["RANK"],
                         "launcher": passer["name"], "source": source})


@check("ENV001", "rendezvous-env-incomplete", family="launcher", needs=("env", "launcher"), reads=("lint", "launch"),
       catalogue=("A2",))
def rendezvous_env_incomplete(snap):
    """Some, but not all, of MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE are set, or the script needs a launcher.

    What it checks
        The env:// rendezvous (the default of `init_process_group`) reads all four variables. When
        a launcher set none of them the process is not distributed and that is fine; when a
        hand-written launch set only some, `init_process_group` fails at start-up. With the training
        script read (check --script), no launcher variable set and no launcher in check's own launch
        command: the script's unguarded reads of a variable only a launcher sets
        (`int(os.environ["LOCAL_RANK"])`; torch's elastic agent sets RANK, LOCAL_RANK, WORLD_SIZE,
        LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT in each worker) stop it with
        "KeyError: 'LOCAL_RANK'" when it is started as `python train.py`; and, the same way, an
        init_process_group with the env:// rendezvous (no init_method and no store, or "env://"), which
        reads RANK and WORLD_SIZE unless passed and MASTER_ADDR and MASTER_PORT always
        (torch/distributed/rendezvous.py _env_rendezvous_handler), in a script that neither sets them
        nor starts its own processes with mp.spawn. And a program handed a DeepSpeed config (`--deepspeed
        ds.json`) by a launch that sets none of RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, LOCAL_RANK (plain
        python; accelerate launch's simple launcher): deepspeed.init_distributed then discovers the ranks
        through MPI and imports mpi4py (deepspeed/comm/comm.py; data/launchers.json deepspeed_mpi_discovery):
        "No module named 'mpi4py'" where it is not installed.

    Why it matters
        "ValueError: Error initializing torch.distributed using env:// rendezvous: environment
        variable MASTER_ADDR expected, but not set" (pytorch/pytorch#39832, mit-han-lab/distrifuser#11).
        Under SLURM, `srun` sets SLURM_PROCID but not RANK or MASTER_ADDR: a script that calls
        `init_process_group()` still needs them. When srun or mpirun provide the rank and world
        size under their own names (SLURM_PROCID/SLURM_NTASKS, OMPI_COMM_WORLD_RANK/SIZE) and
        only RANK/WORLD_SIZE are missing, this is a note: Lightning, DeepSpeed and most job
        scripts map them. With only MASTER_ADDR/MASTER_PORT set (a batch script or shell that will
        launch the ranks) it is a note too, and with WORLD_SIZE=1 a warning: nothing hangs. Only
        RANK missing in the environment a launcher that passes the rank itself gives its processes
        (data/launchers.json "rank_passed_explicitly": PyTorch Lightning's subprocess script launcher
        exports MASTER_ADDR, MASTER_PORT, NODE_RANK, LOCAL_RANK and WORLD_SIZE, never RANK, and calls
        init_process_group(rank=..., world_size=...)) is a note: nothing fails there. A torchrun
        worker (TORCHELASTIC_RUN_ID set) without RANK stays an error: torch's agent always sets it.

    Example
        export RANK=0 WORLD_SIZE=2; python train.py   # no MASTER_ADDR / MASTER_PORT

    Fix
        Launch with `torchrun --nproc-per-node N train.py`, which sets all four (and LOCAL_RANK),
        or export the missing ones on every rank.
    """
    env = env_of(snap)
    present = [v for v in RENDEZVOUS_VARS if env.get(v, "").strip()]
    missing = [v for v in RENDEZVOUS_VARS if v not in present]
    if not present:
        yield from _needs_a_launcher(snap, env)
        yield from _deepspeed_without_rank_env(snap, env)
    if not present or not missing or slurm_batch_world_below(env):
        return  # (a batch script exporting WORLD_SIZE below SLURM_NTASKS: ENV011 reports the cause)
    kind = snap["launcher"].get("kind")
    world = env_int(env, "WORLD_SIZE")
    if present == ["WORLD_SIZE"] and world == 1:
        return  # WORLD_SIZE=1 alone is a common harmless default in job templates
    fix_lines = {"MASTER_ADDR": "export MASTER_ADDR=<hostname of rank 0>",
                 "MASTER_PORT": "export MASTER_PORT=29500   # any free port, the same on every rank",
                 "RANK": "export RANK=<this process's global rank>",
                 "WORLD_SIZE": "export WORLD_SIZE=<total number of processes>"}
    if kind == "slurm":
        fix_lines.update({"RANK": "export RANK=$SLURM_PROCID", "WORLD_SIZE": "export WORLD_SIZE=$SLURM_NTASKS",
                          "MASTER_ADDR": 'export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)'})
    elif kind == "mpi":
        fix_lines.update({"RANK": "export RANK=$OMPI_COMM_WORLD_RANK   # PMI_RANK under MPICH/Intel MPI",
                          "WORLD_SIZE": "export WORLD_SIZE=$OMPI_COMM_WORLD_SIZE   # PMI_SIZE under MPICH/Intel MPI"})
    launcher = snap["launcher"]
    if kind in ("slurm", "mpi") and set(missing) <= {"RANK", "WORLD_SIZE"} \
            and launcher.get("rank") is not None and launcher.get("world_size") is not None:
        # srun / mpirun export the ranks under their own names; Lightning, submitit, DeepSpeed and
        # most SLURM/MPI job scripts map them, so this is healthy unless the script relies on env://.
        names = "SLURM_PROCID/SLURM_NTASKS" if kind == "slurm" else "the MPI rank variables"
        yield info(
            f"{', '.join(missing)} not set; {kind} provides the ranks as {names}",
            detail=(f"MASTER_ADDR and MASTER_PORT are set, and {kind} exported this process's rank under its own "
                    "names. Frameworks such as Lightning and DeepSpeed read them; a script that calls "
                    "init_process_group() with the default env:// must map them to RANK and WORLD_SIZE first."),
            fix="# only if your script calls init_process_group() itself:\n" + "\n".join(fix_lines[m] for m in missing),
            subjects=missing,
            evidence={"set": present, "missing": missing, "launcher": kind},
        )
        return
    if "RANK" in missing and "WORLD_SIZE" in missing and kind not in ("slurm", "mpi"):
        # Only MASTER_* set: this is a shell that will launch the ranks (an sbatch script before srun,
        # ~/.bashrc before torchrun), not a rank. Only a script started directly from here needs more.
        yield info(
            f"{', '.join(present)} set, but this process is not a rank (no RANK or WORLD_SIZE)",
            detail=("Fine in a shell that launches the job with torchrun, srun or accelerate, which set the rest "
                    "(torchrun takes --master-addr/--master-port, not these variables). A script started directly "
                    "from here that calls init_process_group() would fail: \"environment variable RANK expected, "
                    "but not set\"."),
            fix="torchrun --nproc-per-node N train.py   # sets all of them\n# or, by hand, on every rank:\n"
                + "\n".join(fix_lines[m] for m in missing),
            subjects=missing,
            evidence={"set": present, "missing": missing, "launcher": kind},
        )
        return
    passer = rank_passed_explicitly(env) if missing == ["RANK"] and kind == "manual" else None
    if passer:
        yield from _rank_passed_explicitly(env, passer)
        return
    make = warning if world == 1 else error  # a single process fails at once; nothing hangs
    yield make(
        f"env:// rendezvous is half configured: {', '.join(missing)} not set",
        detail=(f"{', '.join(present)} {'is' if len(present) == 1 else 'are'} set but {', '.join(missing)} "
                f"{'is' if len(missing) == 1 else 'are'} not. init_process_group(init_method='env://') raises "
                "\"environment variable ... expected, but not set\" at start-up."),
        fix="torchrun --nproc-per-node N train.py   # sets all of them\n# or, by hand, on every rank:\n"
            + "\n".join(fix_lines[m] for m in missing),
        subjects=missing,
        evidence={"set": present, "missing": missing, "launcher": kind},
    )


@check("ENV002", "master-port-in-use", reads=("comm", "lint", "launch", "host"), family="launcher", needs=("env", "launcher", "network"), catalogue=("A3",))
def master_port_in_use(snap):
    """The rendezvous port is already taken on this host before the job has started.

    What it checks
        Whether MASTER_PORT (or torchrun's default 29500 when it is unset) is in LISTEN state on
        this host, read from /proc/net/tcp and tcp6. Inside a torchrun worker the agent's own
        TCPStore holds MASTER_PORT, so it is expected there and not reported. When the live comm
        test ran into the same port, COMM008 reports it (with the holder's PID) instead.

    Why it matters
        Rank 0 cannot bind its store: "RuntimeError: Address already in use" / "[c10d] The server
        socket has failed to bind to [::]:29500 (errno: 98 - Address already in use)". The usual
        cause is a second job on the default port, or an orphan of the last run
        (pytorch/pytorch#85604, pytorch/pytorch#126510, huggingface/accelerate#74).

    Example
        A crashed run left a worker holding 29500; the next `torchrun` fails to start.

    Fix
        Pick a free port (`torchrun --standalone` or `--master-port 0`-style helpers pick one), or
        find and stop the orphan: `ss -ltnp 'sport = :29500'`, then `kill <pid>`.

    Also
        The port of a literal `init_method='tcp://127.0.0.1:33271'` in the training script read (check
        --script, or the script of check's launch command): rank 0 binds the store there whatever
        MASTER_PORT says (torch/distributed/rendezvous.py _tcp_rendezvous_handler), so a process still
        listening on it - the last run's, not yet gone - fails the new run with "Address already in use"
        (CoinCheung/BiSeNet#19). A MASTER_PORT that is free now but inside the kernel's ephemeral range
        (net.ipv4.ip_local_port_range, 32768-60999 by default) is a warning: the kernel hands those
        ports to outgoing connections, so one may hold it when rank 0 binds, and the job fails with
        EADDRINUSE only now and then (NVIDIA/enroot#243: the slurm-pytorch hook's
        SLURM_JOB_ID % 16384 + 49152). The same for an init_method the script builds from 'tcp://' and
        MASTER_ADDR/MASTER_PORT (lint.scriptfacts url_env), read with this environment's values; inside an
        elastic launcher's worker (torchrun, torch.distributed.launch from torch 1.9) a MASTER_PORT listened
        on is the agent's own store, and rank 0's second bind there fails the same way
        (NVIDIA/Megatron-LM#125): the finding says so and points at env://.
        When the recorded launch is torchrun or `accelerate launch` (`check -- torchrun ...`), the port judged is
        the one that launcher binds, not MASTER_PORT (torchrun reads --master-port / PET_MASTER_PORT, default
        29500; accelerate --main_process_port or its config's, default 29500); and nothing is reported when the
        launcher picks a free port itself (torchrun --standalone, a c10d endpoint of port 0, accelerate
        --main_process_port 0) or moves to one when its port is taken (accelerate launch on one machine:
        "Accelerate will attempt to launch in a standalone-like mode", accelerate/utils/launch.py
        prepare_multi_gpu_env @ e7998c9f; facts.launch.bound_port).
        Nothing is judged inside a rank whose process group is already up (the preflight `ddpdoctor run`
        makes at init_process_group): the port is listened on by that group's own store (round 24, runcol24:
        ranks started with mp.Process and init_process_group(rank=...), with no RANK in their environment,
        were told their own store's port was in use).
    """
    if ((snap.get("runtime") or {}).get("distributed") or {}).get("initialized"):
        return  # judged inside a rank whose process group is up (preflight at init_process_group): the port is the job's own store
    launcher = snap["launcher"]
    if list(_script_url_port_in_use(snap)):
        yield from _script_url_port_in_use(snap)
        return
    if launcher.get("kind") == "torchrun" or launcher.get("elastic_run_id"):
        return
    failure = (snap.get("comm") or {}).get("failure")
    if isinstance(failure, dict) and failure.get("kind") == "port-in-use":
        return  # the comm test hit it too: COMM008 reports it, with the process holding the port
    bound = bound_port(snap)
    if bound is not None:  # torchrun / accelerate launch choose the port themselves: MASTER_PORT is not read
        yield from _launch_port_in_use(snap, bound)
        return
    env = env_of(snap)
    raw = env.get("MASTER_PORT")
    port = env_int(env, "MASTER_PORT") if raw is not None else 29500
    if port is None or not 0 < port < 65536:
        return  # ENV010 reports a malformed port
    listening = set(snap["network"].get("listening_tcp_ports") or [])
    if port not in listening:
        yield from _port_in_ephemeral_range(snap, env, raw, port)
        return
    rank = env_int(env, "RANK")
    if raw is not None and rank not in (None, 0):
        return  # only rank 0 binds MASTER_PORT; other ranks connect to it
    if raw is None and launcher.get("kind") not in ("none", None):
        return
    subject = ["MASTER_PORT"] if raw is not None else []
    how = f"MASTER_PORT={port}" if raw is not None else f"torchrun's default port {port}"
    yield error(
        f"{how} is already in use on this host",
        detail=("Something is already listening on it, so rank 0 of a new job cannot bind its rendezvous store "
                "(\"errno: 98 - Address already in use\"). Often an orphaned worker of an earlier run."),
        fix=(f"ss -ltnp 'sport = :{port}'   # who holds it; kill it if it is an orphan\n"
             "# or use another port:\nexport MASTER_PORT=$(python -c 'import socket; s=socket.socket(); "
             "s.bind((\"\",0)); print(s.getsockname()[1])')"),
        subjects=subject,
        evidence={"port": port, "from_env": raw is not None, "rank": rank},
    )


def _launch_port_in_use(snap, bound):
    """The port the recorded launch command binds (facts.launch.bound_port): none when the launcher picks a free one
    itself (torchrun --standalone, accelerate --main_process_port 0), nor when accelerate on one machine moves to a
    free port itself; else an error when it is listened on, a warning when an explicit choice is ephemeral."""
    port = bound["port"]
    if bound["free"] or port is None or not 0 < port < 65536:
        return
    listening = set(snap["network"].get("listening_tcp_ports") or [])
    env = env_of(snap)
    ignored = env.get("MASTER_PORT")
    note = (f" MASTER_PORT={ignored} in the environment is not what it reads." if ignored not in (None, str(port))
            else "")
    if port in listening:
        if bound["fallback"]:
            return  # accelerate launch on one machine: "Port ... is already in use", then a free port of its own
        yield error(
            f"{bound['by']} {port} is already in use on this host",
            detail=("Something is already listening on it, so the launcher's rendezvous store cannot bind it "
                    "(\"errno: 98 - Address already in use\"). Often an orphaned worker of an earlier run." + note),
            fix=(f"ss -ltnp 'sport = :{port}'   # who holds it; kill it if it is an orphan\n"
                 + ("torchrun --standalone ...   # a free port of its own (one node)" if "torchrun" in bound["by"]
                    else "accelerate launch --main_process_port 0 ...   # a free port of its own (one machine)")),
            subjects=[f"launch:{bound['by'].split()[0]}"],
            evidence={"port": port, "by": bound["by"], "MASTER_PORT": ignored},
        )
        return
    if "default" in bound["by"]:
        return  # 29500 sits below every default ephemeral range
    eph = snap["network"].get("ip_local_port_range")
    read = isinstance(eph, list) and len(eph) == 2 and all(isinstance(p, int) for p in eph)
    low, high = eph if read else (32768, 60999)
    if not low <= port <= high or bound["fallback"]:
        return
    yield warning(
        f"{bound['by']} {port} is inside the ephemeral port range {low}-{high}",
        detail=("It is free now, but the kernel hands ports in that range to outgoing connections, so one may hold it "
                "when the launcher binds its store: the job then fails with \"errno: 98 - Address already in use\" "
                "only now and then." + note),
        fix=f"use a port below {low} (29500 is torchrun's and accelerate's default), or let the launcher pick one",
        subjects=[f"launch:{bound['by'].split()[0]}"],
        evidence={"port": port, "by": bound["by"], "ip_local_port_range": [low, high], "range_read": read},
    )


def _port_in_ephemeral_range(snap, env, raw, port):
    """MASTER_PORT set by hand (or by a launcher hook) inside the ephemeral range: free now, maybe not at bind time."""
    if raw is None:
        return  # torchrun's default 29500 sits below every default range
    rank = env_int(env, "RANK")
    if rank not in (None, 0):
        return  # only rank 0 binds MASTER_PORT
    eph = snap["network"].get("ip_local_port_range")
    read = isinstance(eph, list) and len(eph) == 2 and all(isinstance(p, int) for p in eph)
    low, high = eph if read else (32768, 60999)
    if not low <= port <= high:
        return
    where = "net.ipv4.ip_local_port_range" if read else "the kernel's default ip_local_port_range (not read here)"
    yield warning(
        f"MASTER_PORT={port} is inside the ephemeral port range {low}-{high}",
        detail=(f"It is free now, but the kernel hands ports in {where} to outgoing connections (this host's own "
                "clients, NCCL's and Gloo's sockets), so one may hold it when rank 0 binds its store: the job then "
                "fails with \"errno: 98 - Address already in use\" only now and then. NVIDIA/enroot#243: the "
                "slurm-pytorch hook's SLURM_JOB_ID % 16384 + 49152 lands there."),
        fix=(f"export MASTER_PORT=29500   # or any free port below {low}; or reserve it: sysctl -w "
             f"net.ipv4.ip_local_reserved_ports={port}"),
        subjects=["MASTER_PORT"],
        evidence={"port": port, "ip_local_port_range": [low, high], "range_read": read, "rank": rank},
    )


@check("ENV004", "rank-arithmetic", family="launcher", needs=("env",), reads=("lint", "gpus"), catalogue=("A4",))
def rank_arithmetic(snap):
    """LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK and RANK do not add up.

    What it checks
        0 <= LOCAL_RANK < LOCAL_WORLD_SIZE; LOCAL_RANK <= RANK; LOCAL_WORLD_SIZE <= WORLD_SIZE;
        and, where GROUP_RANK (node rank) is set, RANK == GROUP_RANK * LOCAL_WORLD_SIZE + LOCAL_RANK,
        which is how torchrun numbers ranks on homogeneous nodes.

    Why it matters
        Two processes with the same RANK, or RANK taken from the local index on node 1, leave a
        slot of the rendezvous empty: init hangs for 30 minutes, then times out
        (pytorch/pytorch#52848, dptech-corp/deepmd-pytorch PR#45).

        Also a node rank left in the environment of a script that starts its own processes: with no
        LOCAL_RANK, Lightning spawns the ranks of this node itself and numbers them from NODE_RANK
        (or GROUP_RANK) times the devices; its main address defaults to 127.0.0.1
        (lightning/fabric/plugins/environments/lightning.py, node_rank / main_address). NODE_RANK >= 1
        with MASTER_ADDR unset or this host means this node waits for a node 0 on itself that never
        starts: the job hangs at "initializing ddp" (CompVis/taming-transformers#12).

        Also, with `check --script` (lint.scriptfacts spawn_worlds): a script that starts its own processes
        (`torch.multiprocessing.spawn(fn, nprocs=N)`, N a literal or `torch.cuda.device_count()`: the GPUs this
        process sees) and tells init_process_group a literal world_size=M != N. torch numbers the spawned processes
        0..N-1 (torch/multiprocessing/spawn.py) and the process group waits for exactly M of them: with M < N the
        ranks from M on never return from init_process_group (pytorch/pytorch#62381: nprocs=2, world_size=1), with
        M > N every rank waits for ranks that never start until the rendezvous times out. And a literal
        `rank=R` beside a literal world_size > 1: every process running the line is rank R, so the group never
        forms (pytorch/pytorch#49846).

    Example
        On the second node: RANK=$LOCAL_RANK (0..3) instead of 4..7.

    Fix
        Let torchrun compute ranks (`torchrun --nnodes 2 --node-rank K --nproc-per-node 4 ...`), or
        set RANK = NODE_RANK * LOCAL_WORLD_SIZE + LOCAL_RANK.
    """
    env = env_of(snap)
    stray = _stray_node_rank(snap, env)
    if stray:
        yield stray
    yield from _spawn_world_mismatch(snap, env)
    yield from _literal_rank(snap)
    rank, world = env_int(env, "RANK"), env_int(env, "WORLD_SIZE")
    lrank, lworld = env_int(env, "LOCAL_RANK"), env_int(env, "LOCAL_WORLD_SIZE")
    node = env_int(env, "GROUP_RANK")
    fix = "torchrun --nnodes NNODES --node-rank NODE --nproc-per-node NPROC train.py   # computes every rank for you"
    if lrank is not None and lworld is not None and lworld > 0 and not 0 <= lrank < lworld:
        yield error(f"LOCAL_RANK={lrank} is not below LOCAL_WORLD_SIZE={lworld}",
                    detail="Local ranks run from 0 to LOCAL_WORLD_SIZE-1; this process has no GPU/slot on this node.",
                    fix=fix, subjects=["LOCAL_RANK", "LOCAL_WORLD_SIZE"],
                    evidence={"LOCAL_RANK": lrank, "LOCAL_WORLD_SIZE": lworld})
        return
    if rank is not None and lrank is not None and lrank > rank:
        yield error(f"LOCAL_RANK={lrank} is larger than RANK={rank}",
                    detail="A process's local index can never exceed its global rank; one of them was set by hand wrongly.",
                    fix=fix, subjects=["RANK", "LOCAL_RANK"], evidence={"RANK": rank, "LOCAL_RANK": lrank})
        return
    if world is not None and lworld is not None and lworld > world > 0:
        yield error(f"LOCAL_WORLD_SIZE={lworld} is larger than WORLD_SIZE={world}",
                    detail="More processes on this node than in the whole job: the rendezvous can never complete.",
                    fix=fix, subjects=["LOCAL_WORLD_SIZE", "WORLD_SIZE"],
                    evidence={"LOCAL_WORLD_SIZE": lworld, "WORLD_SIZE": world})
        return
    if None not in (rank, lrank, lworld, node) and lworld > 0 and rank != node * lworld + lrank:
        expected = node * lworld + lrank
        yield error(f"RANK={rank} but GROUP_RANK*LOCAL_WORLD_SIZE+LOCAL_RANK={expected}",
                    detail=(f"On node {node} with {lworld} processes per node, local rank {lrank} should be global rank "
                            f"{expected}. Another process probably has RANK={rank} too, and rank {expected} is missing."),
                    fix=fix, subjects=["RANK", "GROUP_RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE"],
                    evidence={"RANK": rank, "GROUP_RANK": node, "LOCAL_RANK": lrank, "LOCAL_WORLD_SIZE": lworld})


def _stray_node_rank(snap, env):
    """NODE_RANK/GROUP_RANK >= 1 in a shell that starts its own ranks, with rank 0's address on this host."""
    from ddpdoctor.facts.net import master_here

    name = "NODE_RANK" if env.get("NODE_RANK") is not None else "GROUP_RANK"
    node = env_int(env, name)
    launched = any(env.get(k) is not None for k in ("LOCAL_RANK", "TORCHELASTIC_RUN_ID", "SLURM_PROCID",
                                                     "OMPI_COMM_WORLD_RANK", "PMI_RANK"))
    if node is None or node < 1 or launched:
        return None
    addr = env.get("MASTER_ADDR")
    here = master_here(snap) if addr else "MASTER_ADDR is unset (Lightning then uses 127.0.0.1)"
    if not here:
        return None  # MASTER_ADDR is another host, or unknown: a manual multi-node launch
    return warning(
        f"{name}={node} is set but rank 0 would be on this host ({here})",
        detail=(f"A script that starts its own ranks (Lightning's default environment, with no LOCAL_RANK) numbers "
                f"this node's ranks from {name} times its devices, so they wait for the ranks of node 0; with "
                "rank 0's address on this host those never start, and init hangs (\"initializing ddp\" forever). "
                f"Often {name} is left over from another job or a cluster profile."),
        fix=f"unset {name}   # one node; for several: MASTER_ADDR=<node 0's address> on every node",
        subjects=[name, "MASTER_ADDR"], evidence={name: node, "MASTER_ADDR": addr, "why_here": here})


@check("ENV005", "ranks-set-by-hand", family="launcher", needs=("env", "launcher"), reads=("packages", "gpus"),
       catalogue=("A5", "A1"))
def ranks_set_by_hand(snap):
    """WORLD_SIZE > 1 but LOCAL_RANK is unset and no torch elastic agent launched this process.

    What it checks
        A multi-process job whose rank variables were set by hand (as inside
        `torch.multiprocessing.spawn`), detected by WORLD_SIZE > 1 with LOCAL_RANK unset and no
        TORCHELASTIC_RUN_ID. SLURM and MPI launches are judged by what they export: an mpirun or
        mpiexec that starts several ranks on this host (OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS)
        exports no LOCAL_RANK either (Open MPI's ORTE sets only OMPI_COMM_WORLD_*: open-mpi/ompi
        orte/mca/odls/base/odls_base_default_fns.c@b217c8ce), so a script that picks cuda:LOCAL_RANK,
        defaulting to 0, puts every rank on GPU 0 (open-mmlab/mmdetection#8940, DeepSpeed's MPICH
        runner before deepspeedai/DeepSpeed#3372). Frameworks that map the MPI names themselves
        (accelerate, Lightning with mpi4py, DeepSpeed for Open MPI) do so only after this check runs.
        Ranks set by something check does not know (Kubeflow's PyTorchJob operator, Ray, a script)
        with MASTER_ADDR on another host: how many ranks share this host is said nowhere, and one
        rank per pod or node needs no LOCAL_RANK, so that is a note saying what is unknown.

    Why it matters
        The HF Trainer and accelerate decide how to set up from LOCAL_RANK (transformers
        `training_args.py` `_setup_devices`, accelerate `state.py`). Without it every rank
        believes it is local process 0: "main process only" work and logs run on every rank, each
        rank may pick cuda:0, OMP_NUM_THREADS is never set, and no elastic error files are written.
        This is the original ddpdoctor question: Trainer inside mp.spawn was slower than
        DataParallel (pytorch/pytorch#47587, facebookresearch/dinov2#345).

    Example
        mp.spawn(train, nprocs=4) with os.environ["RANK"] = str(rank) inside `train`.

    Fix
        Launch with torchrun instead of spawning: `torchrun --nproc-per-node 4 train.py`.
        If you must keep your own launcher, also export LOCAL_RANK, LOCAL_WORLD_SIZE and
        OMP_NUM_THREADS in every child.
    """
    launcher = snap["launcher"]
    env = env_of(snap)
    world = env_int(env, "WORLD_SIZE")
    kind = launcher.get("kind")
    mpi_local = launcher.get("local_world_size") if kind == "mpi" else None
    if world is None and isinstance(mpi_local, int) and mpi_local > 1 and env.get("LOCAL_RANK") is None:
        # mpirun/mpiexec name the ranks only their own way (OMPI_COMM_WORLD_*, PMI_*): with several ranks on this
        # host and no LOCAL_RANK, a script or framework that picks cuda:LOCAL_RANK (default 0) puts them all on
        # one GPU (open-mmlab/mmdetection#8940; DeepSpeed's MPICH runner before deepspeedai/DeepSpeed#3372)
        versions = ((snap.get("packages") or {}) if "packages" in snap else {}).get("versions") or {}
        horovod = versions.get("horovod")
        gpus = snap.get("gpus") if "gpus" in snap and isinstance(snap.get("gpus"), dict) else None
        no_gpus = gpus is not None and (gpus.get("unavailable") or not gpus.get("devices"))
        make = info if horovod or no_gpus else warning  # no NVIDIA GPU here: only init's RANK/WORLD_SIZE matter
        yield make(f"mpirun/mpiexec started {mpi_local} ranks on this host and LOCAL_RANK is not set: if they run a "
                   "torch program that picks cuda:LOCAL_RANK (default 0), they all land on GPU 0",
                   detail=("MPI launchers export only their own names (OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, "
                           "PMI_RANK...; Open MPI's ORTE odls_base_default_fns.c), not torch's RANK, WORLD_SIZE and "
                           "LOCAL_RANK: init_process_group's env:// rendezvous fails without RANK, and device choices "
                           "made from LOCAL_RANK fall to 0. Frameworks that map the MPI names themselves (accelerate, "
                           "DeepSpeed's mpi_discovery, Lightning with mpi4py) do it after this check runs. A program "
                           "that picks its GPU from the MPI rank itself (nccl-tests, Horovod) needs no LOCAL_RANK: "
                           "check cannot see which program mpirun starts."
                           + (f" Horovod {horovod} is installed: hvd.local_rank() reads the MPI rank directly, so a "
                              "Horovod script needs no LOCAL_RANK." if horovod else "")),
                   fix=("export LOCAL_RANK=$OMPI_COMM_WORLD_LOCAL_RANK RANK=$OMPI_COMM_WORLD_RANK WORLD_SIZE="
                        "$OMPI_COMM_WORLD_SIZE   # in each rank: mpirun ... bash -c '...'" if "OMPI_COMM_WORLD_RANK" in env
                        else "export LOCAL_RANK=$MPI_LOCALRANKID RANK=$PMI_RANK WORLD_SIZE=$PMI_SIZE   # MPICH/Hydra names"),
                   subjects=["LOCAL_RANK", "RANK", "WORLD_SIZE"],
                   evidence={"local_ranks": mpi_local, "world_size": launcher.get("world_size"), "horovod": horovod})
        return
    if world is None or world <= 1 or env.get("LOCAL_RANK") is not None or slurm_batch_world_below(env):
        return
    if kind in ("torchrun", "accelerate", "deepspeed"):
        return
    spawned = launcher.get("spawned_by_multiprocessing")
    if kind == "slurm":
        fix = ("srun --ntasks-per-node=N bash -c 'LOCAL_RANK=$SLURM_LOCALID RANK=$SLURM_PROCID "
               "WORLD_SIZE=$SLURM_NTASKS python train.py'\n# or run one torchrun agent per node under srun")
    elif kind == "mpi":
        if "OMPI_COMM_WORLD_LOCAL_RANK" in env:
            fix = ("export LOCAL_RANK=$OMPI_COMM_WORLD_LOCAL_RANK LOCAL_WORLD_SIZE=$OMPI_COMM_WORLD_LOCAL_SIZE "
                   "RANK=$OMPI_COMM_WORLD_RANK WORLD_SIZE=$OMPI_COMM_WORLD_SIZE   # in each rank (mpirun ... bash -c '...')")
        else:
            fix = ("export LOCAL_RANK=$MPI_LOCALRANKID LOCAL_WORLD_SIZE=$MPI_LOCALNRANKS RANK=$PMI_RANK "
                   "WORLD_SIZE=$PMI_SIZE   # in each rank (MPICH/Hydra names)")
    else:
        fix = (f"torchrun --nproc-per-node {world} train.py   # instead of torch.multiprocessing.spawn\n"
               "# keeping your own launcher: export LOCAL_RANK, LOCAL_WORLD_SIZE and OMP_NUM_THREADS in each child")
    how = "spawned by multiprocessing" if spawned else f"launcher: {kind}"
    from ddpdoctor.facts.net import master_elsewhere  # noqa: PLC0415
    from ddpdoctor.facts.ranks import master_named_elsewhere_on_loopback  # noqa: PLC0415

    remote = (master_elsewhere(snap) or master_named_elsewhere_on_loopback(snap)) if kind == "manual" and not spawned \
        else None
    if remote:
        # Ranks set by something check does not know (Kubeflow's PyTorchJob operator, Ray, a custom script) with
        # rank 0 on another host: whether several ranks share this host, which is what LOCAL_RANK is for, is
        # said nowhere. One rank per pod or node (the operator pattern) needs no LOCAL_RANK: say what is unknown.
        yield info(f"WORLD_SIZE={world} set by hand, no LOCAL_RANK, rank 0 on another host ({remote}): check cannot "
                   "tell how many ranks run on this host",
                   detail=("No launcher check knows set these ranks (an operator such as Kubeflow's PyTorchJob, Ray, "
                           "or a script). With one rank per host or pod, LOCAL_RANK 0 is what transformers and "
                           "accelerate assume and nothing is wrong; with several ranks here, each would take itself "
                           "for local process 0 (same GPU, every rank logging and saving)."),
                   fix=("# only if several ranks start on this host:\n" + fix),
                   subjects=["LOCAL_RANK", "WORLD_SIZE"],
                   evidence={"WORLD_SIZE": world, "launcher": kind, "master_addr_elsewhere": remote})
        return
    yield warning(
        f"WORLD_SIZE={world} but LOCAL_RANK is not set ({how}); Trainer/accelerate will treat every rank as local process 0",
        detail=("Ranks were set by hand, not by torchrun. transformers and accelerate read LOCAL_RANK to pick the "
                "device and the local main process; without it each rank logs, saves and preprocesses as if it were "
                "alone on the node, and torchrun's OMP_NUM_THREADS=1 is missing too. We measured a 2-rank Trainer run "
                "under mp.spawn at 53-57 ms/step against 16 ms under torchrun on the same 2 cores."),
        fix=fix,
        subjects=["LOCAL_RANK", "WORLD_SIZE"],
        evidence={"WORLD_SIZE": world, "launcher": kind, "spawned_by_multiprocessing": bool(spawned)},
    )


def _readers(name: str) -> dict:
    """Where the settings catalogue says the libraries read `name` (SET002's evidence, folded into ENV010's finding)."""
    from ddpdoctor.facts import settings as catalog

    entry = catalog.lookup(name)
    src = (entry or {}).get("source") or {}
    return {"read_by": f"{src.get('repo')}/{src.get('path')}@{str(src.get('commit'))[:12]}"} if src.get("path") else {}


@check("ENV010", "rank-env-malformed", family="launcher", needs=("env",), catalogue=("A2", "A4"))
def rank_env_malformed(snap):
    """RANK, WORLD_SIZE, LOCAL_RANK, MASTER_PORT and friends must be plain integers in range.

    What it checks
        RANK, LOCAL_RANK, GROUP_RANK, NODE_RANK are integers >= 0; WORLD_SIZE, LOCAL_WORLD_SIZE,
        GROUP_WORLD_SIZE are integers >= 1; MASTER_PORT is an integer in 1..65535.

    Why it matters
        torch parses these with int(); a stray space, a shell expression that was never expanded
        ("$SLURM_PROCID" in single quotes) or an empty value fails at init_process_group with a
        ValueError far from where the variable was set.

    Example
        export RANK='$SLURM_PROCID'

    Fix
        Export the evaluated number: `export RANK=$SLURM_PROCID` (double quotes or none), or let
        torchrun set them.
    """
    from ddpdoctor.facts.ranks import RANK_ENV_MINIMUMS

    env = env_of(snap)
    for name, minimum in RANK_ENV_MINIMUMS:
        raw = env.get(name)
        if raw is None:
            continue
        value = env_int(env, name)
        if value is None or value < minimum:
            yield error(f"{name}={raw!r} is not {'an integer' if value is None else f'>= {minimum}'}",
                        detail=f"torch.distributed reads {name} with int(); this value makes init_process_group fail.",
                        fix=f"export {name}=<integer>   # or let torchrun set it", subjects=[name],
                        evidence={name: raw, **_readers(name)})
    raw = env.get("MASTER_PORT")
    if raw is not None:
        port = env_int(env, "MASTER_PORT")
        if port is None or not 0 < port < 65536:
            yield error(f"MASTER_PORT={raw!r} is not a TCP port (1-65535)",
                        detail="Rank 0 cannot bind the rendezvous store on it and the other ranks cannot connect.",
                        fix="export MASTER_PORT=29500   # any free port, the same on every rank",
                        subjects=["MASTER_PORT"], evidence={"MASTER_PORT": raw, **_readers("MASTER_PORT")})


@check("ENV015", "master-port-privileged", family="launcher", needs=("env", "launcher", "host"), reads=("network",))
def master_port_privileged(snap):
    """MASTER_PORT is below the first port this user may bind, on the host that binds it.

    What it checks
        MASTER_PORT against net.ipv4.ip_unprivileged_port_start (1024 by default), for a process that
        is not root and lacks CAP_NET_BIND_SERVICE, on the host that hosts the rendezvous store (rank 0,
        or MASTER_ADDR is this host).

    Why it matters
        Rank 0 (or torchrun's agent) binds the TCPStore on MASTER_PORT; the kernel refuses a port below
        ip_unprivileged_port_start without CAP_NET_BIND_SERVICE (inet_bind: -EACCES), so the job stops at
        once with "RuntimeError: Permission denied" (ultralytics/yolov5#13099: --master_port 1;
        `--master_port=$RANDOM` hits it one time in 32).

    Example
        torchrun --master_port 1 train.py   # as a normal user

    Fix
        export MASTER_PORT=29500   # any free port >= 1024
    """
    env = env_of(snap)
    raw = env.get("MASTER_PORT") or (snap["launcher"].get("master_port") if snap.get("launcher") else None)
    port = env_int(env, "MASTER_PORT")
    if port is None or not 0 < port < 65536:
        return  # ENV010 reports a malformed port
    host = snap["host"]
    start = host.get("unprivileged_port_start")
    floor = start if isinstance(start, int) else 1024
    if port >= floor or host.get("uid") == 0 or host.get("cap_net_bind_service") is True:
        return
    if not isinstance(host.get("uid"), int):
        return  # who we are is not known: the port may be fine for root
    rank = env_int(env, "RANK")
    from ddpdoctor.facts.net import master_here

    here = master_here(snap)
    if rank not in (None, 0) and not here:
        return  # another host binds the store
    yield error(f"MASTER_PORT={raw} is below {floor}: the rendezvous store cannot bind it as uid {host.get('uid')}",
                detail=(f"Ports below net.ipv4.ip_unprivileged_port_start ({floor}) need root or CAP_NET_BIND_SERVICE; "
                        "rank 0 (or torchrun's agent) binds the TCPStore there and init stops with 'RuntimeError: "
                        "Permission denied'."),
                fix="export MASTER_PORT=29500   # or torchrun --master_port 29500; any free port >= 1024",
                env_fix={"MASTER_PORT": "29500"}, subjects=["MASTER_PORT"],
                evidence={"MASTER_PORT": raw, "unprivileged_port_start": start, "uid": host.get("uid"),
                          "cap_net_bind_service": host.get("cap_net_bind_service"), "store_here": here})


def _no_local_rank_argument(snap, facts, torch):
    """ENV019 for a script that takes no local-rank argument at all, parses sys.argv strictly (parse_args, no
    parse_known_args), and runs in the environment the old torch.distributed.launch gives its workers: RANK and
    WORLD_SIZE set, LOCAL_RANK not, no torch elastic agent. That launcher (without --use_env) passes the rank as an
    argument (torch/distributed/launch.py @00fb0a9c `cmd.append("--local_rank={}")`) and sets no LOCAL_RANK, so argparse
    exits with 'unrecognized arguments: --local_rank=0' on every rank (CoinCheung/BiSeNet#259: the reporter added the
    argument and it ran). The same environment can be set by hand (no argument passed), hence the 'if' in the title."""
    strict = [p for p in facts.get("strict_parse_args") or () if isinstance(p, dict)]
    env = env_of(snap)
    if not strict or facts.get("parse_known_args") or torch >= (2, 0):
        return
    if (snap.get("launcher") or {}).get("kind") != "manual" or "LOCAL_RANK" in env or "WORLD_SIZE" not in env:
        return
    top = strict[0]
    yield warning(f"{top.get('path')}:{top.get('line')} parses its arguments strictly and takes no --local_rank; if "
                  f"torch.distributed.launch started this rank, argparse exits on the --local_rank=N it passes",
                  detail=("This rank has RANK/WORLD_SIZE but no LOCAL_RANK and no torch elastic agent: the environment "
                          f"torch {'.'.join(map(str, torch[:2]))}'s torch.distributed.launch gives its workers when run "
                          "without --use_env. That launcher appends --local_rank=N to the script's arguments, and "
                          "parse_args() rejects it: 'error: unrecognized arguments: --local_rank=0' on every rank."),
                  fix=('parser.add_argument("--local_rank", "--local-rank", type=int, default=0)   '
                       "# or launch with --use_env / torchrun and read os.environ['LOCAL_RANK']"),
                  subjects=[f"path:{top.get('path')}", "pkg:torch"],
                  evidence={"parse_args": strict[:4], "torch": ".".join(map(str, torch[:2])), "launcher": "manual"})


def _local_rank_passers(snap):
    """(row, its recorded command or None) for the launcher that started this rank when it is one that always passes
    `--local_rank=N` (launchers.json `passes_local_rank`; torch.distributed.launch, which passes it only before torch
    2.0 or without --use-env, is judged by the arms of ENV019 that read torch's version)."""
    from ddpdoctor.facts.launch import command_of
    from ddpdoctor.facts.launchers import launchers

    kind = (snap.get("launcher") or {}).get("kind") if "launcher" in snap else None
    for row in launchers():
        if not row.get("passes_local_rank") or row["options"] == "torchrun":
            continue
        cmd = command_of(snap, row["options"]) if "launch" in snap else None
        if cmd is not None and (cmd.get("options") or {}).get("no_local_rank"):
            continue
        if cmd is None and kind != row["name"]:
            continue
        yield row, cmd


def _launcher_passes_local_rank(snap, facts):
    """ENV019 for a rank started by a launcher that ALWAYS appends `--local_rank=N` to the script's arguments, whatever
    torch's version (data/launchers.json `passes_local_rank` with its source: DeepSpeed's launcher/launch.py
    `if not args.no_local_rank: cmd.append(f"--local_rank={local_rank}")`), into a script whose argparse declares no
    local-rank option and that does not parse_known_args: argparse exits 'unrecognized arguments: --local_rank=0' on
    every rank (yangjianxin1/Firefly#30). The launcher is known from its command (check's parent chain, or
    `check -- deepspeed ...`) or from the variables only it exports (gather.launcher: CROSS_RANK/LOCAL_SIZE). A script
    whose parse calls were read and that calls no parse_args() on sys.argv is quiet (nothing rejects the argument)."""
    if facts.get("parse_known_args"):
        return
    strict = [p for p in facts.get("strict_parse_args") or () if isinstance(p, dict)]
    if "strict_parse_args" in facts and not strict:
        return  # read, and nothing parses sys.argv strictly
    for row, cmd in _local_rank_passers(snap):
        passes = row["passes_local_rank"]
        how = described_launch(cmd) if cmd is not None else f"{row['name']}'s launcher (its variables are set)"
        lint = snap.get("lint") if "lint" in snap else None
        script = strict[0].get("path") if strict else next(iter((lint or {}).get("scripts") or ()), None)
        where = f"{strict[0].get('path')}:{strict[0].get('line')}" if strict else (script or "the script")
        yield warning(f"{row['name']}'s launcher passes {passes['option'].split('=')[0]}=N to every rank, but {where} "
                      f"declares no --local_rank argument: argparse exits 'unrecognized arguments: --local_rank=0'",
                      detail=(f"This rank was started by {how}. It appends {passes['option']} to the script's "
                              f"arguments unless started with {passes['unless']} ({passes['source']['repo']} "
                              f"{passes['source']['path']}), whatever torch's version. The script's argparse has no "
                              "local-rank option and does not use parse_known_args, so "
                              + ("parse_args() rejects it on every rank." if strict else
                                 "if it parses sys.argv with parse_args() (its parse calls were not recorded), every "
                                 "rank exits at start-up.")),
                      fix=('parser.add_argument("--local_rank", "--local-rank", type=int, '
                           f'default=int(os.environ.get("LOCAL_RANK", 0)))   # or: {row["name"]} {passes["unless"]} ...'),
                      subjects=[f"path:{script}"] if script else [],
                      evidence={"launcher": row["name"], "passes": passes["option"], "parse_args": strict[:4],
                                "source": passes["source"]})
        return


def described_launch(cmd: dict) -> str:
    from ddpdoctor.facts.launch import described

    return described(cmd)


@check("ENV019", "local-rank-argument-spelling", family="launcher", needs=("packages",), reads=("lint",))
def local_rank_argument_spelling(snap):
    """The script takes its local rank as an argument spelled the way this torch's launcher does not pass it.

    What it checks
        With `check --script`: the script's argparse options for the local rank (`--local_rank`, `--local-rank`)
        against the installed torch. `python -m torch.distributed.launch` (without --use-env) passes
        `--local-rank=N` since torch 2.0 and `--local_rank=N` before (pytorch/pytorch torch/distributed/launch.py:
        @271cacccab21 "If only "--local_rank" is provided, the launcher will trigger an error: error: unrecognized
        arguments: --local-rank=<rank>"; @00fb0a9c cmd.append("--local_rank={}")). A script that accepts only the
        other spelling is reported; one that accepts both is not. A script that takes no local-rank argument at all
        but parses sys.argv strictly (parse_args) is reported when this rank has the old launcher's environment
        (RANK/WORLD_SIZE, no LOCAL_RANK, no elastic agent, torch before 2.0): that launcher passes --local_rank=N
        anyway (CoinCheung/BiSeNet#259). With
        parse_known_args the argument is ignored rather than rejected, and a script that also reads LOCAL_RANK works
        under torchrun (which passes no argument): a note in both cases.

    Why it matters
        Every rank stops at start-up with "train.py: error: unrecognized arguments: --local-rank=0"
        (ziplab/SN-Net#2 under torch 2.0, hkchengrex/XMem#18); torchrun passes no argument at all, so a script that
        reads only args.local_rank keeps its default and puts every rank on one GPU.

    Example
        parser.add_argument("--local_rank", type=int) in train.py, torch 2.1, python -m torch.distributed.launch.

    Fix
        parser.add_argument("--local-rank", "--local_rank", type=int, default=int(os.environ.get("LOCAL_RANK", 0)))
        and launch with torchrun
    """
    from ddpdoctor.facts.env import lint_facts
    from ddpdoctor.facts.gpu_versions import release

    facts = lint_facts(snap)
    args = [a for a in facts.get("local_rank_args") or () if isinstance(a, dict)]
    torch = release((snap["packages"].get("versions") or {}).get("torch"))
    if not args and facts and "local_rank_args" in facts:
        found = list(_launcher_passes_local_rank(snap, facts))
        if found:
            yield from found
            return
    if not args and len(torch) >= 2:
        yield from _no_local_rank_argument(snap, facts, torch)
    if not args or len(torch) < 2:
        return
    flags = {f for a in args for f in a.get("flags") or ()}
    if next(_local_rank_passers(snap), None) is not None:
        if "--local_rank" in flags:
            return  # DeepSpeed's launcher passes --local_rank=N whatever torch's version: this spelling is the one
        passed, who = "--local_rank", "DeepSpeed's launcher"
    else:
        passed = "--local-rank" if torch >= (2, 0) else "--local_rank"
        who = f"torch {'.'.join(map(str, torch[:2]))}'s torch.distributed.launch"
    if passed in flags:
        return
    top = args[0]
    where = f"{top.get('path')}:{top.get('line')}"
    known = bool(facts.get("parse_known_args"))
    env_too = bool(facts.get("reads_local_rank_env"))
    sev = info if known or env_too else warning
    version = ".".join(map(str, torch[:2]))
    yield sev(f"{where} accepts only {', '.join(sorted(flags))}, but {who} passes "
              f"{passed}=N",
              detail=(("The script also reads LOCAL_RANK, so under torchrun (which passes no argument) it works; only "
                       "torch.distributed.launch breaks it. " if env_too and not known else "")
                      + ("parse_known_args leaves the launcher's argument unread, so args.local_rank keeps its default "
                       "on every rank. " if known else
                       f"argparse rejects it: 'error: unrecognized arguments: {passed}=0' on every rank. ")
                      + "torch.distributed.launch passes --local-rank since 2.0 and --local_rank before; torchrun "
                        "passes none (LOCAL_RANK is in the environment)."),
              fix=('parser.add_argument("--local-rank", "--local_rank", type=int, '
                   'default=int(os.environ.get("LOCAL_RANK", 0)))   # and launch with torchrun'),
              subjects=[f"path:{top.get('path')}", "pkg:torch"],
              evidence={"flags": sorted(flags), "torch": version, "passed": passed, "parse_known_args": known})


def _spawn_world_mismatch(snap, env):
    """ENV004 for a script's mp.spawn(nprocs=N) against its init_process_group(world_size=M), M != N."""
    from ddpdoctor.facts.cuda_map import resolve

    rows = script_asks(snap, "spawn_worlds")
    inits = [r for r in rows if r.get("kind") == "init" and isinstance(r.get("size"), int)]
    spawns = [r for r in rows if r.get("kind") == "spawn"]
    if not inits or not spawns:
        return
    spawn = spawns[0]
    started, source = spawn.get("size"), f"{spawn.get('path')}:{spawn.get('line')} {spawn.get('what')}"
    if not isinstance(started, int):
        gpus = snap.get("gpus")
        if not str(spawn.get("how") or "").startswith("device_count") or not isinstance(gpus, dict) \
                or gpus.get("error") or gpus.get("unavailable"):
            return
        started = len(resolve(env, gpus).visible)
        source += f" (torch.cuda.device_count() = {started} GPU(s) this process sees)"
        if started == 0:
            return
    init = next((r for r in inits if r["size"] != started), None)
    if init is None:
        return
    told = init["size"]
    where = f"{init.get('path')}:{init.get('line')}"
    consequence = (f"ranks {told}..{started - 1} are outside a group of {told} and never return from "
                   "init_process_group (pytorch/pytorch#62381)" if told < started else
                   f"every rank waits for {told - started} rank(s) that never start, until the rendezvous times out")
    yield error(f"The script starts {started} process(es) but tells init_process_group world_size={told} ({where})",
                detail=(f"torch.multiprocessing.spawn numbers its processes 0..{started - 1} ({source}); the process "
                        f"group waits for exactly world_size={told} ranks: {consequence}."),
                fix=(f"pass the number of processes spawned: init_process_group(..., world_size={started}) - better the "
                     "same variable given to mp.spawn(nprocs=world_size) and to the worker as an argument"),
                subjects=["WORLD_SIZE", f"path:{init.get('path')}", f"line:{init.get('line')}"],
                evidence={"spawn": spawn, "init": init, "started": started})


def _literal_rank(snap):
    """ENV004 for init_process_group(rank=<literal>, world_size=<literal N > 1>) in the script: every process that runs
    the line claims the same rank, so a group of N never forms."""
    for row in script_asks(snap, "spawn_worlds"):
        rank, size = row.get("rank"), row.get("size")
        if row.get("kind") != "init" or not isinstance(rank, int) or not isinstance(size, int) or size <= 1:
            continue
        where = f"{row.get('path')}:{row.get('line')}"
        yield error(f"{where} passes a literal rank={rank} with world_size={size}: every process claims rank {rank}, "
                    f"and a group of {size} never forms",
                    detail=(f"init_process_group waits until world_size={size} distinct ranks join. A process that runs "
                            f"this line is always rank {rank}: started once (a notebook, `python train.py`) it waits "
                            "for ranks nobody starts; started several times (mp.spawn, a launcher) the copies collide "
                            "on one rank - either way it hangs until the timeout (pytorch/pytorch#49846: rank=0, "
                            "world_size=2 in a notebook; the maintainer: another process must join with rank=1)."),
                    fix=("take the rank from the process: mp.spawn(fn, nprocs=N) passes it as fn's first argument; "
                         "under torchrun use int(os.environ['RANK']) (or call init_process_group() with no rank and "
                         "world_size, env://); run the processes from the command line, not a notebook"),
                    subjects=["RANK", "WORLD_SIZE", f"path:{row.get('path')}", f"line:{row.get('line')}"],
                    evidence={"init": row})
        return


LOCAL_HOSTS = ("127.0.0.1", "localhost", "0.0.0.0", "::1", "[::1]", "")


def _script_url_port_in_use(snap):
    """ENV002 for the port of the script's literal tcp:// init_method, on this host, already listened on."""
    from urllib.parse import urlsplit

    env = env_of(snap)
    if env_int(env, "RANK") not in (None, 0) and env_int(env, "LOCAL_RANK") not in (None, 0):
        return  # only rank 0 binds the store
    listening = set(((snap.get("network") or {}).get("listening_tcp_ports")) or [])
    own = {str(a) for i in ((snap.get("network") or {}).get("interfaces") or []) if isinstance(i, dict)
           for a in (x.get("address") for x in i.get("addresses") or [] if isinstance(x, dict))}
    launcher = snap.get("launcher") if "launcher" in snap else {}
    elastic = isinstance(launcher, dict) and (launcher.get("kind") == "torchrun" or bool(launcher.get("elastic_run_id")))
    for row in script_asks(snap, "spawn_worlds"):
        url = str(row.get("url") or "")
        built = row.get("url_env") if isinstance(row.get("url_env"), dict) else None
        if not url and built:  # 'tcp://' + MASTER_ADDR + ':' + MASTER_PORT, read from this environment
            port_v = env.get(built.get("port") or "MASTER_PORT") or built.get("port_default")
            host_v = (env.get(built["host"]) if built.get("host") else None) or built.get("host_default") or "localhost"
            if not port_v:
                continue
            url = f"tcp://{host_v}:{port_v}"
        if not url.startswith("tcp://"):
            continue
        try:
            parts = urlsplit(url)
            host, port = parts.hostname or "", parts.port
        except ValueError:
            continue
        if port is None or port not in listening or (host not in LOCAL_HOSTS and host not in own):
            continue
        where = f"{row.get('path')}:{row.get('line')}"
        agent = elastic and str(port) == str(env.get("MASTER_PORT") or "")
        if agent:  # inside an elastic launcher's worker, MASTER_PORT is the agent's own store
            yield error(f"{where} binds its store at {url}" + (" (from MASTER_ADDR/MASTER_PORT)" if built else "")
                        + ", where the launcher's agent already serves its store",
                        detail=("Under torchrun / torch.distributed.launch (torch >= 1.9, the elastic agent) the agent "
                                f"serves the rendezvous TCPStore on MASTER_PORT ({port}, listening now); the script's "
                                "init_method='tcp://MASTER_ADDR:MASTER_PORT' makes rank 0 bind a second store there "
                                "(torch/distributed/rendezvous.py _tcp_rendezvous_handler): \"RuntimeError: Address "
                                "already in use\" (NVIDIA/Megatron-LM#125: fixed by the env:// rendezvous)."),
                        fix=("init_process_group(backend)   # init_method='env://' (the default): the workers use the "
                             "agent's store; drop init_method, rank and world_size the launcher already sets"),
                        subjects=[f"path:{row.get('path')}", f"line:{row.get('line')}"],
                        evidence={"url": url, "port": port, "init": row, "launcher": launcher})
            return
        yield error(f"{where} binds its store at {url}, and port {port} is already in use on this host",
                    detail=("Rank 0 binds the init_method's port itself (torch/distributed/rendezvous.py "
                            "_tcp_rendezvous_handler), whatever MASTER_PORT says; something already listens there - "
                            "most often a process of the last run that has not exited - so the new run fails with "
                            "\"RuntimeError: Address already in use\" (CoinCheung/BiSeNet#19)."),
                    fix=(f"ss -ltnp 'sport = :{port}'   # who holds it; kill the leftover process\n"
                         "# or take the port from the environment: init_method='env://' with MASTER_PORT set per run"),
                    subjects=[f"path:{row.get('path')}", f"line:{row.get('line')}"],
                    evidence={"url": url, "port": port, "init": row})
        return


def _bash_script_under_posix_sh(snap):
    """`sh script.sh` where `sh` is a POSIX-only shell here (dash, BusyBox ash: data/launchers.json shell_syntax) and
    the script uses bash-only syntax (a warning, with its line) or only names bash in its #! line (a note)."""
    from ddpdoctor.facts.launchers import shell_syntax

    launch = snap.get("launch") if "launch" in snap else None
    run = (launch or {}).get("shell_run") if isinstance(launch, dict) else None
    if not isinstance(run, dict):
        return
    shell, real, script = run.get("shell"), run.get("shell_is"), run.get("script")
    posix = shell_syntax().get("posix_only_shells") or ()
    reader = real if real in posix else (shell if shell in posix else None)
    lines = [r for r in run.get("bash_only") or () if isinstance(r, dict)]
    if reader is None or not (lines or run.get("shebang") == "bash"):
        return
    words = f"`{shell} {script}`" + (f" ({shell} is {real} here)" if real and real != shell else "")
    fix = f"bash {script} ...   # or chmod +x {script} && ./{script} ..., which runs its #! interpreter"
    evidence = {"shell": shell, "shell_is": real, "script": script, "shebang": run.get("shebang"), "bash_only": lines}
    if not lines:
        yield info(f"{words} runs a script whose #! line asks for bash: {reader} ignores it and reads the script itself",
                   detail=("A shell given a script file reads it whatever its #! line says; no bash-only form was "
                           f"found in {script}, so it may run under {reader} too."),
                   fix=fix, subjects=[f"path:{script}"], evidence=evidence)
        return
    top = lines[0]
    yield warning(f"{words} reads a bash script with {reader}: line {top['line']} uses {top['what']}, which {reader} "
                  f"stops at (\"{top.get('dash_says')}\") before the launch runs",
                  detail=(f"{script}:{top['line']}: {top.get('text')}. A shell given a script file reads it whatever its "
                          f"#! line ({run.get('shebang') or 'none'}) says; {reader} implements POSIX sh only, so the "
                          "script stops at that line and no rank starts (open-mmlab/mmsegmentation#3820: "
                          "'tools/dist_train.sh: 8: Bad substitution' under sh, fixed by running it with bash)."
                          + (f" Other bash-only lines: {', '.join(str(r['line']) for r in lines[1:])}."
                             if len(lines) > 1 else "")),
                  fix=fix, subjects=[f"path:{script}", f"line:{top['line']}"], evidence=evidence)


@check("ENV020", "launch-program-not-found", family="launcher", needs=("launch",), reads=("packages", "env"))
def launch_program_not_found(snap):
    """The launch command's program (srun, torchrun, deepspeed, accelerate, python) is not on this machine's PATH.

    What it checks
        The training command given to `ddpdoctor check -- <command>`, or the launch lines of the shell
        script given that way (`-- sh train.sh`): whether the shell finds each line's program (its first
        word after VAR=value assignments) on PATH here, as an executable file for a path; and, when the
        file is there, whether the kernel will run it (data/launchers.json exec_failures: execve(2)'s
        EACCES for a directory or a file without execute permission, ENOENT for a #! script whose
        interpreter is missing: a moved virtual environment's torchrun, `#!/usr/bin/env python` without
        python on PATH, a CRLF #! line). Each gets its own wording: it is not a PATH problem. And a launch
        run through sudo (`sudo sh build.sh`, `sudo python setup.py ...`): sudo rebuilds the environment
        (sudo's plugins/sudoers/env.c rebuild_env; data/launchers.json sudo): PATH becomes sudoers'
        secure_path even with -E, and env_reset drops CUDA_HOME, LD_LIBRARY_PATH and the rest of the user's
        variables, so the CUDA toolkit this shell finds (its nvcc outside secure_path's directories) is not
        found by whatever the command builds with nvcc (speedinghzl/CCNet#56, traveller59/second.pytorch#7:
        "nvcc: not found" under sudo). And `sh script.sh` where this host's sh is a POSIX-only shell (dash,
        BusyBox ash) while the script uses bash-only syntax (${@:3}, [[ ]], arrays, source: data/launchers.json
        shell_syntax): the shell ignores the script's #! line and stops at that line, "Bad substitution"
        (open-mmlab/mmsegmentation#3820); a #! line asking for bash with no such line found is a note.

    Why it matters
        The job stops before any rank starts: "train.sh: 1: srun: not found" on a machine outside a SLURM
        cluster (zhiyuanyou/SAFECount#16: the repository's SLURM script run on a workstation), "/bin/sh:
        torchrun: not found" when sudo or a module resets PATH, "slurmstepd: error: execve(): torchrun: No
        such file or directory" inside a container image without it.

    Example
        sh train.sh   # whose first line is `srun -p gpu python train.py`, on a machine without SLURM

    Fix
        Use the launch this machine has (torchrun --nproc-per-node <GPUs> train.py instead of srun), or put the
        environment's bin directory on PATH (`conda activate <env>`, `module load`), or call the program by its
        full path (python -m torch.distributed.run instead of torchrun).
    """
    from ddpdoctor.facts.launch import commands

    yield from _bash_script_under_posix_sh(snap)
    sudo = next((c for c in commands(snap) if isinstance(c.get("sudo"), dict)), None)
    if sudo is not None:
        yield from _sudo_hides_toolkit(snap, sudo)
    for cmd in commands(snap):
        if cmd.get("found") is not False:
            continue
        word = str(cmd.get("program_word") or cmd.get("launcher"))
        where = f" ({cmd['from_script']})" if cmd.get("from_script") else ""
        if cmd.get("program_why") in ("directory", "not_executable", "bad_interpreter"):
            yield _cannot_run(cmd, word, where)
            return
        slurm = cmd.get("launcher") == "srun" or word.endswith("srun")
        yield error(f"{word}{where} is not found on this machine's PATH: the launch stops before any rank starts",
                    detail=(f"The shell will say \"{word}: not found\"."
                            + (" srun is SLURM's launcher: it exists only on the nodes of a SLURM cluster; on a "
                               "workstation the repository's non-SLURM launch (torchrun) is the one to run."
                               if slurm else " The environment that has it is not active here (PATH), or it is not "
                               "installed in this image.")),
                    fix=("torchrun --nproc-per-node <GPUs> train.py ...   # the launch for a machine without SLURM"
                         if slurm else
                         f"conda activate <env> (or module load ...) so that `which {word}` finds it; or "
                         "python -m torch.distributed.run ... instead of torchrun"),
                    subjects=[f"path:{cmd['from_script'].rsplit(':', 1)[0]}"] if cmd.get("from_script") else [],
                    evidence={"command": {k: cmd.get(k) for k in ("launcher", "program_word", "from_script", "found")}})
        return


def _sudo_hides_toolkit(snap, cmd: dict):
    """ENV020 for a launch run through sudo when the CUDA toolkit this shell finds is outside sudo's PATH
    (data/launchers.json sudo: secure_path's directories; env_reset's kept variables)."""
    from ddpdoctor.facts.env import env_of
    from ddpdoctor.facts.launch import sudo_table

    table = sudo_table()
    pk = snap.get("packages") if "packages" in snap else {}
    kit = (pk or {}).get("cuda_toolkit") if isinstance((pk or {}).get("cuda_toolkit"), dict) else {}
    home = str(kit.get("home") or "").rstrip("/")
    if not home:
        return
    bindir = home + "/bin"
    if bindir in (table.get("secure_path_dirs") or ()):
        return  # a toolkit of the system's own directories (/usr/bin/nvcc): sudo's PATH has it
    env = env_of(snap) if "env" in snap else {}
    facts = cmd["sudo"]
    keep = set(table.get("env_keep_default") or ())
    deleted = tuple(table.get("always_deleted") or ())
    assigned = set(facts.get("assigns") or ())

    def dropped(name: str) -> bool:
        if name in assigned or env.get(name) in (None, ""):
            return False
        if any(name == d or (d.endswith("*") and name.startswith(d[:-1])) for d in deleted):
            return True
        return not facts.get("preserve_env") and name not in keep

    lost = [n for n in ("CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "CUDA_VISIBLE_DEVICES") if dropped(n)]
    src = table.get("source") or {}
    shown = " ".join(([] if not facts.get("preserve_env") else ["-E"]) + [str(cmd.get("program_word") or cmd.get("launcher") or "")]
                     + ([str(cmd["program"])] if cmd.get("program") else []))
    yield warning(f"the launch runs under sudo (sudo {shown}): PATH becomes sudoers' secure_path, without {bindir}, so "
                  f"nvcc of the CUDA toolkit this shell finds ({home}" + (f", CUDA {kit['version']}" if kit.get("version") else "")
                  + ") is not found" + (f", and {', '.join(lost)} {'is' if len(lost) == 1 else 'are'} dropped" if lost else ""),
                  detail=(f"sudo runs the command in an environment it rebuilds ({src.get('repo')} {src.get('path')}@"
                          f"{str(src.get('commit'))[:12]}, rebuild_env): PATH is replaced by secure_path whatever -E says "
                          "(Debian/Ubuntu and RHEL/Fedora set it to the system directories), and env_reset keeps only a "
                          "few variables (LD_* and PYTHONPATH are dropped even with -E). The toolkit here was found "
                          f"through {kit.get('from') or 'this shell'}; a build the command runs that calls nvcc by name "
                          "stops with \"nvcc: not found\" (a build script, a Makefile, an extension's setup), and "
                          "torch's cpp_extension falls back to /usr/local/cuda."),
                  fix=("run the launch without sudo (fix the permission that asked for it: chown the directory it "
                       "writes); or pass the environment on: sudo env \"PATH=$PATH\" \"CUDA_HOME=$CUDA_HOME\" "
                       "\"LD_LIBRARY_PATH=$LD_LIBRARY_PATH\" <command>"),
                  subjects=["PATH"] + lost,
                  evidence={"sudo": facts, "toolkit": kit, "secure_path_dirs": table.get("secure_path_dirs"),
                            "dropped": lost})


def _sentence(text: str) -> str:
    return (text[:1].upper() + text[1:] + ".") if text else ""


def _cannot_run(cmd: dict, word: str, where: str):
    """ENV020's finding for a program the shell finds but the kernel will not run (data/launchers.json exec_failures)."""
    from ddpdoctor.facts.launchers import exec_failure

    why, file = cmd["program_why"], str(cmd.get("program_file") or word)
    interp = str(cmd.get("interpreter") or "")
    crlf = interp.endswith("\r")
    row = exec_failure(why, via_env=bool(cmd.get("interpreter_via_env")), crlf=crlf) or {}
    interp_shown = interp.rstrip("\r")
    fill = {"word": word, "file": file, "interpreter": interp_shown}
    says = str(row.get("shell_says", "")).format(**fill)
    what = {"directory": f"{word} is a directory, not a program",
            "not_executable": f"{file} exists but is not executable",
            "bad_interpreter": (f"{file} exists but its #! line ends in a carriage return (CRLF)" if crlf else
                                f"{file} exists but its interpreter {interp_shown} is not found")}[why]
    return error(f"{what}{where}: the launch stops before any rank starts",
                 detail=(f"The program is there, so this is not a PATH problem: execve(2) fails with {row.get('errno')} "
                         f"and the shell will say \"{says}\". {_sentence(str(row.get('meaning', '')).format(**fill))}"),
                 fix=str(row.get("fix", "")).format(**fill),
                 subjects=[f"path:{file}"],
                 evidence={"command": {k: cmd.get(k) for k in ("launcher", "program_word", "from_script", "found",
                                                               "program_why", "program_file", "interpreter")}})


@check("ENV022", "launch-script-not-found", family="launcher", needs=("launch",))
def launch_script_not_found(snap):
    """The training script that the given command runs does not exist where the command would look for it.

    What it checks
        The command given to `ddpdoctor check -- <command>` (`python train.py`, `torchrun ... train.py`,
        `accelerate launch train.py`, `deepspeed train.py`, `sh train.sh`): whether its .py program (or the
        shell's script) is a file, relative to the directory check runs in. A module program (`-m pkg.train`)
        is not judged.

    Why it matters
        Every rank stops at once with "python: can't open file '/work/train.py': [Errno 2] No such file or
        directory" (CPython's Modules/main.c pymain_run_file), and torchrun then reports each worker's exit code 2
        as a ChildFailedError, which reads like a distributed failure. On a cluster it happens after the job
        waited in the queue: the launch line names a path relative to another directory, or a file that was
        renamed.

    Example
        ddpdoctor check -- torchrun --nproc-per-node 4 scripts/trian.py

    Fix
        Run the launch from the directory the script path is relative to (`cd` in the job script), or give
        the script's absolute path.
    """
    from ddpdoctor.facts.launch import commands

    for cmd in commands(snap):
        if cmd.get("depth") != 0 or cmd.get("program_exists") is not False or not cmd.get("program"):
            continue
        program, cwd = str(cmd["program"]), str(cmd.get("cwd") or ".")
        python = program.endswith(".py")
        yield warning(f"{program} is not found from {cwd}: "
                      + ("every rank will stop with \"can't open file\" before the job starts" if python else
                         "the shell stops with \"No such file or directory\" before the job starts"),
                      detail=(f"The command runs {program!r}, which is not a file relative to {cwd} (where check ran). "
                              "If the launch runs from another directory, run check from there."),
                      fix=f"cd <the directory that holds {program}>   # or give its absolute path in the launch line",
                      subjects=[f"path:{program}"],
                      evidence={"program": program, "cwd": cwd, "launcher": cmd.get("launcher")})
        return


@check("ENV024", "serving-parallel-size-invalid", family="launcher", needs=("launch",), reads=("gpus", "env"))
def serving_parallel_size_invalid(snap):
    """An inference server's tensor-parallel size that its model or this machine cannot take.

    What it checks
        The inference-server launch given to `ddpdoctor check -- <command>` (`vllm serve MODEL -tp N`,
        `python -m vllm.entrypoints.openai.api_server --model M --tensor-parallel-size N`, `python -m
        sglang.launch_server --model-path M --tp-size N`; data/serving.json, from vLLM's engine/arg_utils.py
        and SGLang's server_args.py): for vLLM, the model's attention heads (num_attention_heads of its
        config.json, the text part of a multimodal one, read only for a local directory or a Hub id already
        in the local Hugging Face cache) against the
        tensor-parallel size, the rule vLLM's ModelConfig.verify_with_parallel_config applies; for both,
        tensor x pipeline parallel workers against the GPUs this process sees, when no multi-node
        launch is recorded (vLLM's --distributed-executor-backend ray or RAY_ADDRESS, SGLang's --nnodes).

    Why it matters
        vLLM stops before loading a weight with "Total number of attention heads (32) must be divisible
        by tensor parallel size (3)". Each tensor-parallel worker takes one GPU: asking for more than the
        node has leaves the engine waiting for GPUs (Ray placement groups) or failing at startup, after the
        model download.

    Example
        vllm serve ./Qwen3-8B --tensor-parallel-size 3   # 32 heads; on a 3-GPU machine

    Fix
        A tensor-parallel size that divides the heads and fits the GPUs (1, 2, 4, 8 for 32 heads), with
        --pipeline-parallel-size for the rest.
    """
    from ddpdoctor.facts.gpu import view
    from ddpdoctor.facts.launch import serving_of

    for cmd, srv in serving_of(snap):
        tp, pp = srv.get("tensor_parallel") or 1, srv.get("pipeline_parallel") or 1
        engine = srv.get("engine")
        fact = next((f for f in cmd.get("model_configs") or () if isinstance(f, dict)
                     and f.get("heads") and f.get("option") == srv.get("model_option")), {})
        heads, config = fact.get("heads"), str(fact.get("config") or f"{srv.get('model')}/config.json")
        rule = next((r for r in _serving_engines() if r["name"] == engine), {})
        if heads and tp > 1 and heads % tp and rule.get("heads_divisible_by_tp"):
            ok = [d for d in range(1, heads + 1) if heads % d == 0 and d <= max(tp, 8)]
            yield error(f"{engine} --tensor-parallel-size {tp} does not divide the model's {heads} attention heads: "
                        "the server stops before it loads the model",
                        detail=(f"{config} has num_attention_heads={heads}. vLLM checks it "
                                "against the tensor-parallel size (ModelConfig.verify_with_parallel_config) and raises "
                                f"\"Total number of attention heads ({heads}) must be divisible by tensor parallel size "
                                f"({tp}).\""),
                        fix=f"--tensor-parallel-size {max(d for d in ok if d < tp)}   # a divisor of {heads}: "
                            + ", ".join(map(str, ok)) + "; add --pipeline-parallel-size to use more GPUs",
                        subjects=[f"path:{config}"],
                        evidence={"engine": engine, "tensor_parallel": tp, "heads": heads, "model": srv.get("model")})
            return
        gpus = snap.get("gpus") if "gpus" in snap else None
        if not isinstance(gpus, dict) or gpus.get("unavailable") or gpus.get("error"):
            continue
        ray = [k for k in (rule.get("multi_node") or {}).get("env") or () if env_of(snap).get(k)]
        if srv.get("multi_node") or ray:
            continue  # several nodes (a Ray cluster, --nnodes): the workers need not fit here
        visible = len(view(snap).devices)
        need = tp * pp
        if visible and need > visible:
            yield error(f"{engine} asks for {need} GPU worker(s) (tensor parallel {tp} x pipeline parallel {pp}) but "
                        f"this process sees {visible} GPU(s)",
                        detail=("Each worker of the engine takes one GPU. No multi-node launch was recorded, so the "
                                "workers must fit on this machine (CUDA_VISIBLE_DEVICES applied): the engine fails at "
                                "startup or waits for GPUs that never free up. If a Ray cluster spans several nodes, "
                                "this is expected (check cannot see it from here)."),
                        fix=f"--tensor-parallel-size {visible}   # or fewer; or export CUDA_VISIBLE_DEVICES to more GPUs",
                        subjects=["CUDA_VISIBLE_DEVICES"],
                        evidence={"engine": engine, "tensor_parallel": tp, "pipeline_parallel": pp, "visible": visible})
            return


def _serving_engines() -> list:
    from ddpdoctor.facts.launch import serving_table

    return serving_table()["engines"]


@check("ENV025", "launch-count-not-a-number", family="launcher", needs=("launch",), reads=("env",))
def launch_count_not_a_number(snap):
    """A launch command gives a count option a value its launcher cannot read (a typed Slurm GPU count `a100:4`).

    What it checks
        The recorded launch commands (`ddpdoctor check -- torchrun ...`, or the launcher above this process):
        torchrun's --nproc-per-node (a number, or cpu/gpu/xpu/auto) and --nnodes (N or MIN:MAX), accelerate
        launch's --num_processes and --num_machines, deepspeed's --num_gpus and --num_nodes (numbers), against
        what each launcher's own parser accepts (data/launchers.json launch_count_options, each row with its
        source). A bare lower-case word for --nproc-per-node is left alone: torchrun also takes the name of an
        out-of-tree device backend (`npu`). A torchrun option the command line does not give is read from
        its PET_<OPTION> variable (PET_NPROC_PER_NODE, PET_NNODES: torch/distributed/argparse_util.py env,
        data/launchers.json elastic_worker_visible_devices), and judged the same.

    Why it matters
        The launcher stops before any rank starts: torchrun with "ValueError: Unsupported nproc_per_node value:
        a100:4" (torch/distributed/run.py determine_local_world_size), accelerate and deepspeed with argparse's
        "invalid int value". The usual source is a Slurm variable passed as the count: Slurm's GPU options take
        `[type:]<number>` (`--gpus-per-node=a100:4`), so $SLURM_GPUS_PER_NODE can carry the type too, and a
        script written on a cluster without GPU types breaks on one with them.

    Example
        torchrun --nproc_per_node=$SLURM_GPUS_PER_NODE train.py   # with #SBATCH --gpus-per-node=a100:4

    Fix
        torchrun --nproc_per_node=${SLURM_GPUS_PER_NODE##*:} train.py   # the number after the last ':'
    """
    from ddpdoctor.facts.launch import commands  # noqa: PLC0415
    from ddpdoctor.facts.launchers import count_value_refused, launch_count_options  # noqa: PLC0415

    table = launch_count_options()
    rows = table.get("rows") or ()
    for cmd in commands(snap):
        opts = cmd.get("options") if isinstance(cmd.get("options"), dict) else {}
        for row in rows:
            if cmd.get("launcher") != row["launcher"]:
                continue
            value, via = opts.get(row["option"]), None
            if value is None and row["launcher"] == "torchrun":  # its PET_<DEST> default (argparse_util.env)
                via = "PET_" + row["option"].upper()
                value = env_of(snap).get(via)
            if value is None or str(value) == "" or not count_value_refused(row, str(value)):
                continue
            value = str(value)
            head, _, tail = value.rpartition(":")
            typed = bool(head) and tail.strip().isdigit() and not head.strip().isdigit()
            number = tail.strip() if typed else None
            src = row.get("source") or {}
            given = (f"{via}={value!r} gives `{described_launch(cmd)}` its {row['flag']}" if via else
                     f"`{described_launch(cmd)}` gives {row['flag']} the value {value!r}")
            yield error(f"{given}, which {row['launcher']} cannot read: the launch stops before any rank starts",
                        detail=(f"{row['launcher']} reads {row['flag']} as "
                                + {"int": "a number (argparse type=int)",
                                   "int_or_words": "a number or one of " + ", ".join(row.get("words") or ()),
                                   "min_max": "a number or MIN:MAX"}.get(row.get("accepts"), "a number")
                                + f" and stops with \"{row['error'].format(value=value)}\" ({src.get('repo')} "
                                f"{src.get('path')} @{str(src.get('commit'))[:8]})."
                                + (f" {value!r} is a typed Slurm GPU count ([type:]<number>, as --gpus-per-node="
                                   f"{value} asks for {number} GPUs of type {head}): a variable such as "
                                   "SLURM_GPUS_PER_NODE passed where the launcher needs the number." if typed else "")),
                        fix=(f"{via or row['flag']}=${{SLURM_GPUS_PER_NODE##*:}}   # the number after the type: "
                             f"{number}" if typed else
                             f"{via or row['flag']}=<a number>   # echo the variable the launch line passes"),
                        subjects=[f"arg:{row['flag'].lstrip('-')}"] + ([via] if via else []),
                        evidence={"launcher": row["launcher"], "option": row["flag"], "value": value,
                                  "typed_slurm_count": typed, "source": src})
            break
