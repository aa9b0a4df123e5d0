"""SLURM set-up checks (catalogue A8): does what srun launched match what the job asks for?"""
from __future__ import annotations

from ddpdoctor.facts.slurm import slurm_tasks_on_this_node
from ddpdoctor.model import error, info, warning
from ddpdoctor.model.registry import check
from ddpdoctor.facts.env import env_int, env_of


def _gpus_on_node(env) -> tuple:
    for name in ("SLURM_GPUS_ON_NODE", "SLURM_GPUS_PER_NODE"):
        raw = env.get(name)
        if raw:
            try:
                return int(raw.split(":")[-1].split("(")[0]), name
            except ValueError:
                continue
    return None, None


@check("ENV007", "slurm-task-mismatch", family="launcher", needs=("env", "launcher"), catalogue=("A8",))
def slurm_task_mismatch(snap):
    """SLURM's task layout disagrees with the ranks or GPUs the job expects.

    What it checks
        Inside a SLURM allocation: WORLD_SIZE against SLURM_NTASKS and RANK against SLURM_PROCID
        when srun launches the ranks directly; tasks per node against the GPUs SLURM gave the node;
        and a multi-task allocation run from the batch script without srun.

    Why it matters
        Lightning and accelerate derive ranks from SLURM variables. When `--ntasks-per-node` differs
        from the GPUs per node, the job freezes at the rendezvous or uses only some GPUs: "You
        requested 2 GPUs but launched 1 slurm tasks" (Lightning-AI/pytorch-lightning#20391,
        #19883). Running `python train.py` in the batch script (not under `srun`) starts one
        process for an N-task allocation; ddpdoctor notes this (info), since the batch script is
        also where `ddpdoctor check` itself runs before `srun`.

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
    if kind in ("none", "manual") and step in (None, "batch") and ntasks and ntasks > 1:
        # A note, not a warning: the batch script is also where people run `ddpdoctor check` before
        # `srun python train.py`; only the training command itself must go through srun.
        yield info(
            f"SLURM allocated {ntasks} tasks, but this process was not started by srun",
            detail=("The batch script itself runs as one process. `python train.py` there uses one task of the "
                    f"allocation; the other {ntasks - 1} sit idle, or a distributed script waits for them forever. "
                    "Start the training command with srun."),
            fix="srun python train.py   # one process per task; or: srun --ntasks-per-node=1 torchrun --nproc-per-node=<gpus> train.py",
            subjects=["SLURM_NTASKS"], evidence={"SLURM_NTASKS": ntasks, "SLURM_STEP_ID": step})
    if kind == "slurm":
        world, rank, procid = env_int(env, "WORLD_SIZE"), env_int(env, "RANK"), env_int(env, "SLURM_PROCID")
        if world is not None and ntasks is not None and world != ntasks:
            yield error(f"WORLD_SIZE={world} but srun launched SLURM_NTASKS={ntasks} tasks",
                        detail="The rendezvous waits for WORLD_SIZE ranks; srun started a different number.",
                        fix="export WORLD_SIZE=$SLURM_NTASKS   # or match --ntasks to the world size",
                        subjects=["WORLD_SIZE", "SLURM_NTASKS"],
                        evidence={"WORLD_SIZE": world, "SLURM_NTASKS": ntasks})
        if rank is not None and procid is not None and rank != procid:
            yield error(f"RANK={rank} but SLURM_PROCID={procid}",
                        detail="With one srun task per rank, the rank must be the task id; two tasks may share a rank.",
                        fix="export RANK=$SLURM_PROCID", subjects=["RANK", "SLURM_PROCID"],
                        evidence={"RANK": rank, "SLURM_PROCID": procid})
        per_node = slurm_tasks_on_this_node(env)
        gpus, gpus_var = _gpus_on_node(env)
        if per_node and gpus and per_node != gpus:
            yield warning(
                f"{per_node} SLURM task{'s' if per_node != 1 else ''} per node but {gpus} GPUs per node",
                detail=(f"srun starts one rank per task; with {gpus_var}={gpus} each node "
                        + ("leaves GPUs idle." if per_node < gpus else "puts several ranks on one GPU.")
                        + " Lightning reports this as \"You requested N GPUs but launched M slurm tasks\"."),
                fix=f"#SBATCH --ntasks-per-node={gpus}   # one task per GPU",
                subjects=["SLURM_NTASKS_PER_NODE", gpus_var],
                evidence={"tasks_per_node": per_node, gpus_var: gpus})
