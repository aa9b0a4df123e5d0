"""The accelerate config file against the GPUs this environment gives the job."""
from __future__ import annotations

from ddpdoctor.facts.env import env_of
from ddpdoctor.model import error, info, warning
from ddpdoctor.model.registry import check


def _ids(text) -> list:
    return [p.strip() for p in str(text).split(",") if p.strip()]


@check("ENV013", "accelerate-config-vs-gpus", family="launcher", needs=("host", "env"))
def accelerate_config_vs_gpus(snap):
    """accelerate's default config would start more processes, or on other GPUs, than this allocation has.

    What it checks
        The config `accelerate launch` reads by default ($HF_HOME/accelerate/default_config.yaml,
        accelerate/commands/config/config_args.py): its `gpu_ids` against CUDA_VISIBLE_DEVICES when the
        environment already restricts the GPUs (Slurm's allocation, a container, the user), and its
        `num_processes` against the number of GPUs the job may use. On several machines, `num_processes` is the
        total over all of them: `accelerate launch` starts num_processes // num_machines per machine
        (huggingface/accelerate src/accelerate/utils/launch.py at e7998c9f: `nproc_per_node =
        str(num_processes // num_machines)` when num_machines > 1), so a per-machine count below num_machines
        starts no process at all, and one that is not a multiple leaves the remainder unstarted.

    Why it matters
        `accelerate launch` replaces CUDA_VISIBLE_DEVICES with the config's gpu_ids
        (accelerate/utils/launch.py: `current_env[visible_devices_env_var] = args.gpu_ids`), so a
        config written on a workstation (gpu_ids 0-7, num_processes 8) makes a job that Slurm gave 3
        GPUs run on 8, 5 of them allocated to other jobs (huggingface/accelerate#1643).

    Example
        srun --gres=gpu:3 accelerate launch train.py   # default_config.yaml: num_processes 8, gpu_ids 0,...,7

    Fix
        accelerate launch --num_processes 3 --gpu_ids all ...   # or rewrite the config with `accelerate config`
    """
    cfg = (snap["host"].get("accelerate_config") or {})
    values = cfg.get("values") or {}
    if not values:
        return
    yield from _processes_per_machine(cfg, values)
    env = env_of(snap)
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    if cvd is None or not _ids(cvd):
        return
    visible = _ids(cvd)
    gpu_ids = values.get("gpu_ids")
    procs = values.get("num_processes")
    machines = values.get("num_machines") if isinstance(values.get("num_machines"), int) else 1
    problems = []
    if gpu_ids not in (None, "all", "") and set(_ids(gpu_ids)) - set(visible):
        problems.append(f"gpu_ids {gpu_ids} replaces CUDA_VISIBLE_DEVICES={cvd} and adds GPU(s) "
                        f"{','.join(sorted(set(_ids(gpu_ids)) - set(visible), key=lambda x: (len(x), x)))}")
    if isinstance(procs, int) and machines and procs // max(machines, 1) > len(visible):
        problems.append(f"num_processes {procs} on {machines} machine(s) for {len(visible)} visible GPU(s)")
    if not problems:
        return
    scheduler = "Slurm" if env.get("SLURM_JOB_ID") else None
    make = warning if scheduler or gpu_ids not in (None, "all", "") else info
    yield make(f"the accelerate config ({cfg.get('path')}) does not fit this allocation: " + "; ".join(problems),
               detail=("`accelerate launch` without --config_file reads this file and sets CUDA_VISIBLE_DEVICES to its "
                       "gpu_ids (accelerate/utils/launch.py), so the job starts "
                       f"{procs if isinstance(procs, int) else 'its'} processes on GPUs "
                       + (f"{scheduler} did not give it" if scheduler else "outside the ones visible here")
                       + " (huggingface/accelerate#1643)."),
               fix=f"accelerate launch --num_processes {len(visible)} --gpu_ids all ...   # or re-run `accelerate config`",
               subjects=["CUDA_VISIBLE_DEVICES", f"path:{cfg.get('path')}"],
               evidence={"config": cfg, "CUDA_VISIBLE_DEVICES": cvd, "scheduler": scheduler})


def _processes_per_machine(cfg: dict, values: dict):
    """num_processes is the job's total: with num_machines > 1 accelerate launch gives each machine
    num_processes // num_machines (huggingface/accelerate#218: 1 process answered for 2 machines)."""
    procs, machines = values.get("num_processes"), values.get("num_machines")
    if not (isinstance(procs, int) and isinstance(machines, int) and not isinstance(procs, bool)
            and machines > 1 and procs > 0):
        return
    per, rest = procs // machines, procs % machines
    if per and not rest:
        return
    make = error if per == 0 else warning
    what = (f"num_processes {procs} over num_machines {machines} starts num_processes // num_machines = 0 processes "
            "per machine" if per == 0 else
            f"num_processes {procs} is not a multiple of num_machines {machines}: each machine starts {per}, "
            f"{per * machines} in all")
    yield make(f"the accelerate config ({cfg.get('path')}): {what}",
               detail=("num_processes is the total number of processes over all machines (one per GPU), not the "
                       "number per machine: `accelerate launch` passes num_processes // num_machines to torchrun as "
                       "--nproc_per_node (accelerate/utils/launch.py)."),
               fix=f"accelerate launch --num_machines {machines} --num_processes <{machines} x GPUs per machine> ...   "
                   "# or re-run `accelerate config` on every machine with the same total",
               subjects=[f"path:{cfg.get('path')}"],
               evidence={"num_processes": procs, "num_machines": machines, "per_machine": per})
