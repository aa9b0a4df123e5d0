"""The launch command: the launcher command lines above this process (torchrun, srun, accelerate, deepspeed),
parsed into their options, and what they imply for the facts checks read.

`check` run under a launcher (`srun ddpdoctor check`, `torchrun ... -m ddpdoctor check`) can read its own launch:
the command lines of its parent chain (gather.launch records them in the `launch` section). Checks that judge
torchrun's rendezvous options read them from the environment (its PET_* variables) and, through `launch_env`, from
the command line as well. Option names and defaults come from the launchers' own parsers:

- torchrun: pytorch/pytorch torch/distributed/run.py get_args_parser() @ 72e2c6b2 (`--nnodes`, `--nproc-per-node`
  and its underscore spelling, `--rdzv-backend` default "static", `--rdzv-endpoint`, `--standalone` = c10d on
  localhost:0 with one node, `--node-rank`, `--master-addr`, `--master-port`; every option also read from PET_<NAME>
  by torch/distributed/argparse_util.env; torchrun sets OMP_NUM_THREADS=1 when nproc_per_node > 1 and it is unset);
- srun: SchedMD/slurm doc/man/man1/srun.1 (`-N/--nodes`, `-n/--ntasks`, `--ntasks-per-node`; srun starts the
  command once per task);
- accelerate launch: huggingface/accelerate src/accelerate/commands/launch.py @ e7998c9f (`--num_processes`,
  `--num_machines`, `--machine_rank`, `--main_process_ip`, `--main_process_port`, `--config_file`);
- deepspeed: deepspeedai/DeepSpeed deepspeed/launcher/runner.py @ 32c66452 (`--num_gpus`, `--num_nodes`,
  `--hostfile`, `--include`, `--exclude`, `--master_addr`, `--master_port`).
Pure functions: no process is read here.
"""
from __future__ import annotations

import os
from typing import Mapping, Optional

from ddpdoctor.facts.env import env_of

# options that take no value, per launcher (every other option takes one: `--x v` or `--x=v`)
_FLAGS = {
    "torchrun": {"--standalone", "--no-python", "--no_python", "-m", "--module", "--run-path", "--run_path",
                 "--use-env", "--use_env", "--virtual-local-rank", "--virtual_local_rank"},
    "srun": {"-l", "--label", "-u", "--unbuffered", "--exclusive", "-v", "--verbose", "-Q", "--quiet", "-K",
             "--kill-on-bad-exit", "--mpi=none", "-X", "--disable-status", "--overlap", "--pty", "-O",
             "--overcommit", "-Z", "--no-allocate", "-E", "--preserve-env", "--export-file"},
    "accelerate": {"--multi_gpu", "--cpu", "--use_deepspeed", "--use_fsdp", "--use_megatron_lm", "--use_xpu", "-m",
                   "--module", "--no_python", "--debug", "--same_network", "--tpu", "--rdzv_conf", "--quiet", "-q"},
    "deepspeed": {"--no_python", "--module", "--no_local_rank", "--no_ssh_check", "--force_multi", "--autotuning",
                  "--enable_each_rank_log", "--elastic_training", "--bind_cores_to_rank", "--save_pid", "--no_ssh"},
}
# accelerate's --rdzv_conf takes a value; keep it out of the flag set above
_FLAGS["accelerate"].discard("--rdzv_conf")
# the options kept (normalised: no dashes, '-' as '_'); the rest of the command line is not recorded
KEPT = {
    "torchrun": {"nnodes", "nproc_per_node", "rdzv_backend", "rdzv_endpoint", "rdzv_id", "rdzv_conf", "standalone",
                 "node_rank", "master_addr", "master_port", "local_addr", "max_restarts"},
    "srun": {"nodes", "ntasks", "ntasks_per_node", "gpus_per_task", "gpus_per_node", "gres", "cpus_per_task"},
    "accelerate": {"num_processes", "num_machines", "machine_rank", "main_process_ip", "main_process_port",
                   "config_file", "multi_gpu", "use_deepspeed", "use_fsdp", "rdzv_backend", "same_network"},
    "deepspeed": {"num_gpus", "num_nodes", "hostfile", "include", "exclude", "master_addr", "master_port", "launcher",
                  "node_rank", "no_ssh"},
}
_SHORT = {"srun": {"-N": "nodes", "-n": "ntasks", "-c": "cpus_per_task", "-G": "gpus"}, "deepspeed": {"-H": "hostfile",
          "-i": "include", "-e": "exclude"}}


def which_launcher(argv: list) -> tuple:
    """(launcher name, index of its first option) for a command line, or (None, 0). `python -m torch.distributed.run`
    and `.launch` are torchrun; `python /path/torchrun` too."""
    if not argv:
        return None, 0
    names = [os.path.basename(str(a)) for a in argv[:3]]
    for i, name in enumerate(names):
        if name in ("torchrun", "srun", "deepspeed"):
            return name, i + 1
        if name == "accelerate" and len(argv) > i + 1 and argv[i + 1] == "launch":
            return "accelerate", i + 2
        if name == "accelerate-launch":
            return "accelerate", i + 1
        if name.startswith("python") and len(argv) > i + 2 and argv[i + 1] == "-m":
            mod = argv[i + 2]
            if mod in ("torch.distributed.run", "torch.distributed.launch"):
                return "torchrun", i + 3
            if mod in ("accelerate.commands.launch",):
                return "accelerate", i + 3
            if mod in ("deepspeed.launcher.runner",):
                return "deepspeed", i + 3
        if not name.startswith("python"):
            break
    return None, 0


def parse_command(argv: list) -> Optional[dict]:
    """{launcher, options, program} for a launcher's command line, else None. `options` holds the launcher's own
    options that KEPT names, as strings (a flag: "1"); `program` is the first word after them (the script)."""
    argv = [str(a) for a in argv or []]
    kind, i = which_launcher(argv)
    if kind is None:
        return None
    flags, kept, short = _FLAGS[kind], KEPT[kind], _SHORT.get(kind, {})
    options: dict = {}
    program = None
    while i < len(argv):
        tok = argv[i]
        if not tok.startswith("-") or tok == "--":
            program = argv[i + 1] if tok == "--" and i + 1 < len(argv) else tok
            break
        name, eq, value = tok.partition("=")
        if name in short and not eq:
            key = short[name]
            value = argv[i + 1] if i + 1 < len(argv) else ""
            i += 2
        elif eq:
            key = name.lstrip("-").replace("-", "_")
            i += 1
        elif tok in flags or kind == "srun" and name.lstrip("-").replace("-", "_") not in kept:
            key, value = name.lstrip("-").replace("-", "_"), "1"
            i += 1
        else:
            key = name.lstrip("-").replace("-", "_")
            value = argv[i + 1] if i + 1 < len(argv) else ""
            i += 2
        if key in kept:
            options[key] = value
    return {"launcher": kind, "options": options, "program": program}


def commands(snap) -> list:
    """The parsed launcher commands recorded in the snapshot's `launch` section, nearest ancestor first."""
    launch = snap.get("launch") or {}
    if not isinstance(launch, dict) or launch.get("error") or launch.get("unavailable"):
        return []
    return [c for c in launch.get("commands") or [] if isinstance(c, dict) and isinstance(c.get("options"), dict)]


def command_of(snap, launcher: str) -> Optional[dict]:
    """The nearest recorded command of `launcher`, or None."""
    return next((c for c in commands(snap) if c.get("launcher") == launcher), None)


def _int(raw) -> Optional[int]:
    try:
        return int(str(raw).strip().rsplit(":", 1)[-1])
    except (TypeError, ValueError):
        return None


def torchrun_nproc(snap) -> Optional[int]:
    """torchrun's --nproc-per-node from a recorded torchrun command, when it is a number (not gpu/auto/cpu)."""
    cmd = command_of(snap, "torchrun")
    if not cmd:
        return None
    raw = str(cmd["options"].get("nproc_per_node") or "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else None


def launch_env(snap) -> Mapping[str, str]:
    """The environment as torchrun reads its options: the PET_* variables, with the options of a torchrun command in
    the launch section over them (an option given on the command line wins over its PET_ variable), `--standalone`
    as torch expands it (c10d, localhost:0, one node). The environment itself when no torchrun command is recorded."""
    env = env_of(snap)
    cmd = command_of(snap, "torchrun")
    if not cmd:
        return env
    out = dict(env)
    opts = cmd["options"]
    for key, value in opts.items():
        out["PET_" + key.upper()] = str(value)
    if opts.get("standalone"):
        out.update({"PET_RDZV_BACKEND": "c10d", "PET_RDZV_ENDPOINT": "localhost:0", "PET_NNODES": "1"})
    elif not out.get("PET_RDZV_BACKEND"):
        out["PET_RDZV_BACKEND"] = "static"  # the parser's default
    return out


def described(cmd: dict) -> str:
    """`torchrun --nproc-per-node 8 --nnodes 2` as recorded (its kept options only)."""
    opts = " ".join(f"--{k.replace('_', '-')}" + ("" if v == "1" and k in ("standalone", "multi_gpu") else f" {v}")
                    for k, v in cmd.get("options", {}).items())
    return f"{cmd.get('launcher')} {opts}".strip()
