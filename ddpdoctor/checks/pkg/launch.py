"""DeepSpeed's multi-node launch: PKG006 (pdsh, the hostfile), ENV014 (ssh keys), ENV018 (what reaches the remote
ranks' environment)."""
from __future__ import annotations

from ddpdoctor.facts.env import env_of
from ddpdoctor.facts.launch import commands, deepspeed_hostfile_of
from ddpdoctor.facts.launchers import mpi_root_allowed, mpi_root_refusal
from ddpdoctor.model import info, warning
from ddpdoctor.model.registry import check


@check("PKG006", "deepspeed-launcher-missing", family="packages", needs=("packages", "host"))
def deepspeed_launcher_missing(snap):
    """DeepSpeed's multi-node launch cannot start: pdsh is not installed, or the hostfile does not parse.

    What it checks
        With deepspeed installed and its default hostfile present (/job/hostfile, runner.py's
        DLTS_HOSTFILE) naming more than one host: whether `pdsh`, the default `--launcher`
        (PDSH_LAUNCHER), is on PATH (PDSHRunner.backend_exists: shutil.which('pdsh')); and whether
        every hostfile line parses as runner.py's _parse_hostfile reads it (`host slots=N`, no host
        twice).

    Why it matters
        Without pdsh the launch stops at once with "launcher 'pdsh' not installed."; a bad line
        with "Hostfile contains a bad entry" (stanford-crfm/mistral#38: pdsh missing on the cluster).

    Example
        deepspeed 0.12 with /job/hostfile listing node1 and node2, and no pdsh.

    Fix
        apt-get install pdsh (on the launching node), or deepspeed --launcher openmpi|slurm|mvapich
    """
    versions = snap["packages"].get("versions") or {}
    hostfile = snap["host"].get("deepspeed_hostfile") or {}
    if not versions.get("deepspeed") or not hostfile:
        return
    hosts = hostfile.get("hosts") or {}
    path = hostfile.get("path") or "/job/hostfile"
    errors = [e for e in hostfile.get("errors") or [] if isinstance(e, str)]
    if errors:
        yield warning(f"DeepSpeed's hostfile {path} will not parse: {errors[0]}",
                      detail="deepspeed/launcher/runner.py (_parse_hostfile) takes `host slots=N` lines and "
                             "'#' comments, and raises on anything else or a repeated host ('Hostfile contains a bad "
                             f"entry ...'). Problems: {'; '.join(errors[:5])}.",
                      fix=f"fix {path}: one `hostname slots=<GPUs>` per line",
                      subjects=[f"path:{path}", "pkg:deepspeed"], evidence={"hostfile": hostfile})
    tools = snap["host"].get("launcher_tools") or {}
    if len(hosts) > 1 and "pdsh" in (tools.get("missing") or []):
        yield warning(f"DeepSpeed will launch on {len(hosts)} hosts from {path} with pdsh, which is not installed",
                      detail="pdsh is DeepSpeed's default multi-node launcher (runner.py --launcher, PDSH_LAUNCHER); "
                             "PDSHRunner.backend_exists() looks it up with shutil.which, and without it the launch "
                             "stops with \"launcher 'pdsh' not installed.\" Hosts: " + ", ".join(list(hosts)[:8]) + ".",
                      fix="apt-get install pdsh   # or: deepspeed --launcher openmpi|slurm|mvapich ...",
                      subjects=["pkg:deepspeed", "tool:pdsh", f"path:{path}"],
                      evidence={"hosts": hosts, "pdsh": None, "deepspeed": versions.get("deepspeed")})


def _mpirun_as_root(snap):
    """Open MPI's mpirun started by uid 0 with nothing that lifts its root refusal (data/launchers.json
    mpi_root_refusal, open-mpi/ompi orte/orted/orted_submit.c)."""
    if snap["host"].get("uid") != 0:
        return
    cmd = next((c for c in commands(snap) if c.get("launcher") == "mpirun"), None)
    env = env_of(snap)
    if cmd is None or mpi_root_allowed(cmd, env):
        return
    if any(env.get(v) is not None for v in ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK")):
        return  # this process is a rank that mpirun started: whatever lifted the refusal, it did start
    table = mpi_root_refusal()
    src = table.get("source") or {}
    allow_env = " ".join(f"{k}={v}" for k, v in (table.get("allow_env") or {}).items())
    yield warning("mpirun runs as root (uid 0) without --allow-run-as-root: Open MPI's mpirun refuses to start any rank",
                  detail=("Open MPI's mpirun checks geteuid() before anything else and, as root, stops with \""
                          + (table.get("message") or "%s").replace("%s", "mpirun") + "\" and exit status 1 unless "
                          f"--allow-run-as-root is given or both {allow_env} are set ({src.get('repo')} "
                          f"{src.get('path')} @ {str(src.get('commit'))[:8]}, orte_submit_init). The MPI behind this "
                          "mpirun is not known here: MPICH's and Intel MPI's mpirun have no such refusal."),
                  fix=f"mpirun --allow-run-as-root ...   # or: export {allow_env}; or run the job as a non-root user",
                  subjects=["tool:mpirun", "OMPI_ALLOW_RUN_AS_ROOT"],
                  evidence={"uid": 0, "mpirun_options": cmd.get("options") or {},
                            **{k: env.get(k) for k in (table.get("allow_env") or {})}})


@check("ENV014", "ssh-launch-without-keys", family="launcher", needs=("packages", "host"), reads=("launch", "env"))
def ssh_launch_without_keys(snap):
    """A launcher's precondition on this host is not met: ssh for DeepSpeed's hostfile, or root for Open MPI's mpirun.

    What it checks
        With deepspeed installed and a hostfile it will read (one host or more): whether the `ssh`
        client is on PATH, and whether a default identity (~/.ssh/id_rsa, id_ecdsa, id_ed25519, ...) or
        an agent (SSH_AUTH_SOCK) is there for it. A ~/.ssh/config, which may name another IdentityFile,
        turns the finding into a note.

    Why it matters
        DeepSpeed's runner first runs `ssh -o PasswordAuthentication=no <first host> hostname`
        (deepspeed/launcher/runner.py) and stops with "Using hostfile at ... but host=... was not
        reachable via ssh ... setup passwordless ssh" when it fails; its pdsh launcher sets
        PDSH_RCMD_TYPE=ssh (multinode_runner.py). deepspeedai/DeepSpeed#4907: the check returned 255
        on two nodes without passwordless ssh. One host is no exception: main() sets
        multi_node_exec = True as soon as fetch_hostfile() returns hosts, runs the ssh check on that
        condition, and without --master_addr asks `ssh <first host> hostname -I` for the address; only
        without a hostfile does it launch locally with master 127.0.0.1 (runner.py @ 066d912052b5; the
        ssh check since a773996d, v0.6.1; v0.3.16 and v0.5.10 already ask `ssh <first host> hostname -I`). Its own message says "If you are running with a single
        node please remove <hostfile>".
        Open MPI's mpirun (mpiexec, orterun) run as uid 0 stops at once with "mpirun has detected an
        attempt to run as root" unless --allow-run-as-root is given or both OMPI_ALLOW_RUN_AS_ROOT=1
        and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 are set (open-mpi/ompi orte/orted/orted_submit.c,
        data/launchers.json mpi_root_refusal); no rank starts (FedML-AI/FedML#601).

    Example
        deepspeed --hostfile hostfile train.py, hostfile naming 192.168.3.100 and .101, and ~/.ssh empty.

    Fix
        ssh-keygen -t ed25519 -N '' -f ~/.ssh/id_ed25519 && ssh-copy-id <each host>   # or --launcher slurm|openmpi, or --no_ssh
    """
    yield from _mpirun_as_root(snap)
    versions = snap["packages"].get("versions") or {}
    host = snap["host"]
    hostfile = deepspeed_hostfile_of(snap) or {}  # its --hostfile when it names one (check30b), else /job/hostfile
    ssh = host.get("ssh")
    hosts = list((hostfile.get("hosts") or {}))
    if not versions.get("deepspeed") or not hosts or not isinstance(ssh, dict):
        return
    path = hostfile.get("path") or "/job/hostfile"
    if not ssh.get("client"):
        problem, sev = "there is no ssh client on PATH", warning
    elif not ssh.get("keys") and not ssh.get("agent"):
        problem = "~/.ssh holds no default key and no ssh agent is offered (SSH_AUTH_SOCK)"
        sev = info if ssh.get("config") else warning
        if ssh.get("config"):
            problem += " (~/.ssh/config may name another IdentityFile)"
    else:
        return
    one = len(hosts) == 1
    what = f"only {hosts[0]}" if one else f"{len(hosts)} hosts"
    yield sev(f"DeepSpeed will reach {hosts[0] if one else f'{len(hosts)} hosts'} from {path} over ssh, but {problem}",
              detail=("deepspeed/launcher/runner.py checks `ssh -o PasswordAuthentication=no <first host> hostname` "
                      "whenever it has read a hostfile and stops with \"... was not reachable via ssh ... setup "
                      "passwordless ssh\"; the pdsh launcher runs every rank over ssh (PDSH_RCMD_TYPE=ssh)."
                      + (f" The hostfile names {what}: a one-host hostfile still takes this path (and `ssh <host> "
                         "hostname -I` for the master address when --master_addr is not given); without a hostfile "
                         "the runner launches on the local GPUs with master 127.0.0.1." if one
                         else " Hosts: " + ", ".join(hosts[:8]) + ".")),
              fix=((f"rm {path}   # one host: deepspeed then launches locally; or set up passwordless ssh to "
                    f"{hosts[0]}, or pass --no_ssh_check --master_addr 127.0.0.1") if one else
                   ("ssh-keygen -t ed25519 -N '' -f ~/.ssh/id_ed25519 && for h in " + " ".join(hosts[:8])
                    + "; do ssh-copy-id $h; done   # or: deepspeed --launcher slurm|openmpi ...")),
              subjects=["pkg:deepspeed", "tool:ssh", f"path:{path}"],
              evidence={"hosts": hosts[:16], "ssh": ssh})


# deepspeedai/DeepSpeed deepspeed/launcher/runner.py @ 2d991ba3: on several hosts the runner forwards only the
# variables whose names start with EXPORT_ENVS ('MLFLOW', 'PYTHON', 'MV2', 'UCX', plus Nebula/AzureML names) or with
# the accelerator's export_envs() ('NCCL' for CUDA: accelerator/cuda_accelerator.py @ 58ddff65), and the lines of
# .deepspeed_env (DS_ENV_FILE) in ~ and the current directory; multinode_runner.py @ 06ae7e07 PDSHRunner.get_cmd
# then runs `export ...; cd <cwd>; <sys.executable> -u -m deepspeed.launcher.launch` on every host.
DS_EXPORTED_PREFIXES = ("MLFLOW", "PYTHON", "MV2", "UCX", "NCCL", "NEBULA", "AZUREML", "DLTS_")


# what each rank gets from the launcher itself, not from this shell
DS_SET_PER_RANK = {"CUDA_VISIBLE_DEVICES", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_SIZE", "LOCAL_WORLD_SIZE",
                   "MASTER_ADDR", "MASTER_PORT", "CROSS_RANK", "CROSS_SIZE"}


# experiment trackers and hubs a training script reads by name (not catalogued as settings)
DS_TRACKER_PREFIXES = ("WANDB_", "HF_", "HUGGING_FACE_", "COMET_", "NEPTUNE_", "CLEARML_")


_IN_A_RANK_VARS = ("RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID")


def _ds_hosts(snap) -> list:
    return list(((deepspeed_hostfile_of(snap) or {}).get("hosts") or {}))


@check("ENV018", "deepspeed-remote-environment", family="launcher", needs=("packages", "host", "env"), reads=("launch",))
def deepspeed_remote_environment(snap):
    """DeepSpeed's multi-node runner will not give the other hosts this host's environment.

    What it checks
        With deepspeed installed, a hostfile of two hosts or more, and this shell not a rank itself:
        the variables set here that the other hosts need - settings the catalogue knows (torch,
        CUDA, transformers, accelerate, tokenizers, DeepSpeed), the dynamic loader's LD_LIBRARY_PATH
        and LD_PRELOAD (glibc's elf/rtld.c), and experiment trackers' (WANDB_*,
        HF_*...) - whose names start with none of the prefixes the runner forwards (MLFLOW, PYTHON,
        MV2, UCX, and NCCL from the CUDA accelerator) and that no .deepspeed_env file lists. And, as a
        note, the interpreter path (sys.executable) and directory the runner will use on every host.

    Why it matters
        The runner starts the ranks on the other hosts through pdsh (or mpirun -x) with only those
        variables exported (deepspeed/launcher/runner.py, EXPORT_ENVS and DEEPSPEED_ENVIRONMENT_NAME);
        the rest stay on this host, so the hosts train with different settings (an allocator config,
        TORCH_NCCL_* timeouts or debug switches only where the job was started) or without the
        tracker's key (snowflakedb/ArcticTraining#316: WANDB_API_KEY never reached the other nodes).
        The pdsh runner sends `export ...; cd <current directory>; <this interpreter> -u -m
        deepspeed.launcher.launch` to every host (multinode_runner.py PDSHRunner.get_cmd; the MPI
        runners pass the same path): an environment at another path there fails with 'No such file
        or directory' (deepspeedai/DeepSpeedExamples#889).

    Example
        export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True WANDB_API_KEY=...; deepspeed --hostfile hf train.py

    Fix
        List them in ~/.deepspeed_env (or ./.deepspeed_env), one KEY=value per line, or set them in the
        hosts' shell profiles.
    """
    from ddpdoctor.facts.env import env_of  # noqa: PLC0415

    versions = snap["packages"].get("versions") or {}
    hosts = _ds_hosts(snap)
    env = env_of(snap)
    if not versions.get("deepspeed") or len(hosts) < 2 or any(v in env for v in _IN_A_RANK_VARS):
        return
    host = snap["host"]
    path = (deepspeed_hostfile_of(snap) or {}).get("path") or "/job/hostfile"
    if host.get("python_executable"):
        python = host["python_executable"]
        yield info(f"DeepSpeed will run {python} on each of the {len(hosts)} hosts of {path}: that interpreter path "
                   "and the current directory must exist on every one of them",
                   detail=("The pdsh runner sends `export ...; cd <current directory>; <this interpreter> -u -m "
                           "deepspeed.launcher.launch ...` to every host (deepspeed/launcher/multinode_runner.py "
                           "PDSHRunner.get_cmd, sys.executable; the MPI runners pass the same path): a conda "
                           "environment or checkout at another path on another host fails there with 'No such file "
                           "or directory' (deepspeedai/DeepSpeedExamples#889)."),
                   fix=f"install the environment at {python} on every host (or on a shared filesystem), and start "
                       "deepspeed from a directory that exists everywhere",
                   subjects=["pkg:deepspeed", f"path:{python}"], evidence={"python": python, "hosts": hosts[:16]})
    from ddpdoctor.facts import settings as catalog  # noqa: PLC0415

    from ddpdoctor.facts.launchers import deepspeed_remote_loader_variables  # noqa: PLC0415

    loader = set(deepspeed_remote_loader_variables())
    listed = set(((snap["host"].get("deepspeed_env") or {}).get("names")) or [])
    settings, trackers = [], []
    for name in sorted(env):
        if name in listed or name in DS_SET_PER_RANK or name.startswith(DS_EXPORTED_PREFIXES):
            continue
        if ((catalog.lookup(name) is not None and not name.startswith(("PET_", "TORCHELASTIC_")))
                or (name in loader and str(env.get(name) or "").strip(": "))):
            settings.append(name)
        elif name.startswith(DS_TRACKER_PREFIXES):
            trackers.append(name)
    if not settings and not trackers:
        return
    names = settings + trackers
    # The `--launcher` flag is on deepspeed's command line, which check does not see. Only pdsh (the default) and
    # openmpi (`mpirun -x` per export) send no more than the exports; slurm runs `srun --export=ALL,...`, and mpich,
    # impi and mvapich run a Hydra `mpirun` that passes the whole environment by default (multinode_runner.py
    # @edaa7221, SlurmRunner / MPICHRunner / IMPIRunner / MVAPICHRunner.get_cmd). Without pdsh here the default
    # launcher cannot run, so another one is in use and which one is unknown: a note.
    tools = host.get("launcher_tools") if isinstance(host.get("launcher_tools"), dict) else {}
    no_pdsh = "pdsh" in (tools.get("missing") or [])
    in_slurm = bool(env.get("SLURM_JOB_ID"))
    sev = warning if settings and not no_pdsh else info
    which = ("with `--launcher openmpi` (pdsh, the default launcher, is not installed here"
             + (", and this is a Slurm allocation, where `--launcher slurm` carries the whole environment)" if in_slurm
                else ")") if no_pdsh else
             "with its default pdsh launcher or `--launcher openmpi`")
    yield sev(f"DeepSpeed's runner will not carry {', '.join(names[:6])}{' ...' if len(names) > 6 else ''} to the "
              f"other {len(hosts) - 1} host(s) of the hostfile {which}",
              detail=("On several hosts the pdsh and openmpi launchers export only variables whose names start with "
                      "MLFLOW, PYTHON, MV2, UCX or NCCL, plus the lines of .deepspeed_env (deepspeed/launcher/runner.py); "
                      + (f"the settings {', '.join(settings[:8])} would hold on this host's ranks only, so the hosts "
                         "would train differently" if settings else "")
                      + ("; " if settings and trackers else "")
                      + (f"{', '.join(trackers[:8])} would be missing on the other hosts" if trackers else "") + ". "
                      + (f"{' and '.join(n for n in settings if n in loader)} decide(s) which shared libraries the "
                         "dynamic loader finds (glibc's elf/rtld.c): a folder added here by `module load` or an "
                         "activated environment is not searched on the other hosts unless their own login shell "
                         "sets it. " if any(n in loader for n in settings) else "")
                      + "`--launcher slurm` (srun --export=ALL) and mpich, impi or mvapich (Hydra's mpirun passes the "
                      "whole environment) carry them; check does not see deepspeed's command line, so it cannot tell "
                      "which launcher you pass (multinode_runner.py)."),
              fix="printf '%s\\n' " + " ".join(f'"{n}=${n}"' for n in names[:8]) + " >> ~/.deepspeed_env",
              subjects=["pkg:deepspeed"] + names[:16],
              evidence={"not_forwarded": names[:32], "hosts": hosts[:16], "deepspeed_env": sorted(listed)[:32]})
