"""QA: realistic healthy set-ups must not get noisy verdicts, and one fault gets one finding.

Each test names the scenario a user would be in when running `ddpdoctor check`.
"""
import os

import pytest

from factory import findings_of, make_snapshot

MiB = 1024 ** 2
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# `srun python train.py` on node 1 of 2, 4 tasks per node: srun exports SLURM_*, the job script
# exports MASTER_ADDR/MASTER_PORT, and the training code (Lightning, submitit, accelerate's SLURM
# support, or a few lines of its own) maps SLURM_PROCID/SLURM_NTASKS to RANK/WORLD_SIZE.
SRUN_STEP = {"SLURM_JOB_ID": "77", "SLURM_STEP_ID": "0", "SLURM_PROCID": "5", "SLURM_LOCALID": "1",
             "SLURM_NTASKS": "8", "SLURM_NTASKS_PER_NODE": "4", "SLURM_NODEID": "1", "SLURM_JOB_NUM_NODES": "2",
             "SLURM_GPUS_ON_NODE": "4", "MASTER_ADDR": "node01", "MASTER_PORT": "29400"}
# `mpirun -np 4 python train.py` (OpenMPI), MASTER_ADDR/PORT exported by the job script.
MPIRUN = {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
          "OMPI_COMM_WORLD_LOCAL_SIZE": "4", "MASTER_ADDR": "node01", "MASTER_PORT": "29500", "OMP_NUM_THREADS": "4"}


def severities(snap, check_id):
    return {f.severity for f in findings_of(snap, check_id)}


# ---------------------------------------------------------------- ENV001 under srun / mpirun

@pytest.mark.parametrize("env", [SRUN_STEP, MPIRUN], ids=["srun-step", "mpirun"])
def test_env001_no_error_when_launcher_exports_ranks_under_its_own_names(env):
    assert "error" not in severities(make_snapshot(env=env), "ENV001")


def test_env001_under_srun_still_notes_the_mapping():
    found = findings_of(make_snapshot(env=SRUN_STEP), "ENV001")
    assert [f.severity for f in found] == ["info"]
    assert "RANK=$SLURM_PROCID" in found[0].fix


def test_env001_under_srun_without_master_port_is_still_an_error():
    env = {k: v for k, v in SRUN_STEP.items() if k != "MASTER_PORT"}
    assert "error" in severities(make_snapshot(env=env), "ENV001")


# ---------------------------------------------------------------- ENV006 under SLURM CPU binding

def test_env006_srun_task_bound_to_its_own_cores_is_not_oversubscribed():
    # --cpus-per-task=4 with task binding: this task's affinity is its own 4 cores of 16, and torch's
    # default of one thread per usable core gives 4 threads per task on 4 cores.
    env = {**SRUN_STEP, "RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "SLURM_CPUS_PER_TASK": "4"}
    host = {"affinity": [4, 5, 6, 7], "affinity_count": 4, "usable_cpus": 4}
    assert findings_of(make_snapshot(env=env, host=host), "ENV006") == []


def test_env006_srun_tasks_sharing_all_cores_still_warn():
    env = {**SRUN_STEP, "RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "SLURM_CPUS_PER_TASK": "4"}
    assert severities(make_snapshot(env=env), "ENV006") == {"warning"}  # affinity: all 16 cores


def test_env006_fix_does_not_repeat_the_value_already_set():
    # 4 MPI ranks with OMP_NUM_THREADS=1 on a 2-core host: lowering threads cannot help.
    host = {"cpu_count": 2, "affinity": [0, 1], "affinity_count": 2, "usable_cpus": 2}
    env = {**MPIRUN, "OMP_NUM_THREADS": "1"}
    found = findings_of(make_snapshot(env=env, host=host), "ENV006")
    assert len(found) == 1
    assert "OMP_NUM_THREADS=1 " not in found[0].fix and "fewer" in found[0].fix


# ---------------------------------------------------------------- ENV007 in the batch script

def test_env007_batch_script_is_a_note_not_a_warning():
    # `ddpdoctor check` in the sbatch script before `srun python train.py` is the natural place to run it.
    env = {"SLURM_JOB_ID": "77", "SLURM_NTASKS": "8", "SLURM_STEP_ID": "batch", "SLURM_PROCID": "0"}
    assert severities(make_snapshot(env=env), "ENV007") == {"info"}


# ---------------------------------------------------------------- ENV009 hide-every-GPU idioms

@pytest.mark.parametrize("value", ["-1", "", "NoDevFiles", "none"])
def test_env009_hide_all_idioms_are_notes(value):
    # CUDA_VISIBLE_DEVICES=-1 / "" hides the GPUs on purpose (CPU runs); SLURM sets NoDevFiles in
    # jobs without a GPU allocation. None of these may fail a CPU-only run.
    found = findings_of(make_snapshot(env={"CUDA_VISIBLE_DEVICES": value}), "ENV009")
    assert [f.severity for f in found] == ["info"]
    assert "CUDA_VISIBLE_DEVICES=0" not in found[0].fix


def test_env009_fix_never_invents_a_device_list():
    found = findings_of(make_snapshot(env={"CUDA_VISIBLE_DEVICES": "a,1"}), "ENV009")
    assert found and found[0].severity == "error"
    assert "CUDA_VISIBLE_DEVICES=0 " not in found[0].fix


# ---------------------------------------------------------------- one fault, one finding

def _docker_4gpu_snapshot(env=None):
    from ddpdoctor.pipeline.snapshot import Snapshot

    snap = Snapshot.load(os.path.join(ROOT, "fixtures", "snapshots", "docker-shm-64mb-hgx-a100-4x.json"))
    if env is not None:
        from ddpdoctor.gather.launcher import launcher_from_env

        snap.sections["env"]["vars"].update(env)
        snap.sections["launcher"] = launcher_from_env(snap.sections["env"]["vars"])
    return snap


def test_small_shm_in_docker_with_gpus_is_reported_once():
    found = findings_of(_docker_4gpu_snapshot())
    assert [f.id for f in found if "path:/dev/shm" in f.subjects] == ["GPU014"]


def test_small_shm_without_gpus_is_still_sys001():
    snap = make_snapshot(host={"container": "docker", "shm": {"path": "/dev/shm", "exists": True,
                                                              "size_bytes": 64 * MiB, "free_bytes": 64 * MiB}})
    assert [f.id for f in findings_of(snap) if "path:/dev/shm" in f.subjects] == ["SYS001"]


def test_port_in_use_is_reported_once_when_the_comm_test_saw_it_too():
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29562", "RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0",
           "LOCAL_WORLD_SIZE": "2"}
    comm = {"ok": False, "backend": "gloo", "failure": {"kind": "port-in-use", "port": 29562, "addr": "127.0.0.1",
                                                        "message": "MASTER_PORT 29562 on 127.0.0.1 is already in use"}}
    snap = make_snapshot(env=env, network={"listening_tcp_ports": [22, 29562]}, comm=comm)
    assert [f.id for f in findings_of(snap) if "MASTER_PORT" in f.subjects] == ["COMM008"]
    snap = make_snapshot(env=env, network={"listening_tcp_ports": [22, 29562]})
    assert [f.id for f in findings_of(snap) if "MASTER_PORT" in f.subjects] == ["ENV002"]


# ---------------------------------------------------------------- ENV001 in a launching shell

@pytest.mark.parametrize("env", [
    {"MASTER_ADDR": "node01", "MASTER_PORT": "29500", "SLURM_JOB_ID": "77", "SLURM_NTASKS": "8",
     "SLURM_STEP_ID": "batch", "SLURM_PROCID": "0"},  # the sbatch script, before `srun python train.py`
    {"MASTER_PORT": "29500"},  # exported in ~/.bashrc for later torchrun/accelerate runs
], ids=["sbatch-script", "bashrc"])
def test_env001_shell_that_only_sets_the_master_is_a_note(env):
    assert severities(make_snapshot(env=env), "ENV001") == {"info"}


def test_env001_single_process_is_a_warning_not_an_error():
    # RANK=0 WORLD_SIZE=1 without MASTER_*: init_process_group() fails at once, nothing hangs.
    assert severities(make_snapshot(env={"RANK": "0", "WORLD_SIZE": "1"}), "ENV001") == {"warning"}


def test_missing_gloo_interface_is_reported_once_when_the_comm_test_hit_it():
    env = {"WORLD_SIZE": "2", "GLOO_SOCKET_IFNAME": "eth9"}
    comm = {"ok": False, "backend": "gloo", "failure": {
        "kind": "interface-missing", "iface": "eth9", "rank": 0, "phase": "init_process_group",
        "message": "RuntimeError: Unable to find address for: eth9"}}
    with_comm = [f.id for f in findings_of(make_snapshot(env=env, comm=comm)) if "iface:eth9" in f.subjects]
    assert with_comm == ["COMM006"]
    without = [f.id for f in findings_of(make_snapshot(env=env)) if "iface:eth9" in f.subjects]
    assert without == ["NET001"]


def test_missing_nccl_interface_left_to_comm006_does_not_hide_the_gloo_one():
    env = {"WORLD_SIZE": "2", "NCCL_SOCKET_IFNAME": "eth9", "GLOO_SOCKET_IFNAME": "eth7"}
    comm = {"ok": False, "backend": "nccl", "failure": {
        "kind": "interface-missing", "iface": "eth9", "rank": 0, "phase": "init_process_group", "message": "x"}}
    found = [(f.id, f.subjects[0]) for f in findings_of(make_snapshot(env=env, comm=comm)) if f.id == "NET001"]
    assert found == [("NET001", "GLOO_SOCKET_IFNAME")]


def test_rank_out_of_range_is_reported_once_when_the_comm_test_saw_it_too():
    env = {"RANK": "5", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": "29571"}
    comm = {"ok": False, "backend": "gloo", "failure": {"kind": "rank-out-of-range", "rank": 5, "phase": "rendezvous",
                                                        "message": "RANK=5 is not in [0, WORLD_SIZE=4)"}}
    assert [f.id for f in findings_of(make_snapshot(env=env, comm=comm)) if "RANK" in f.subjects] == ["COMM009"]
    assert [f.id for f in findings_of(make_snapshot(env=env)) if "RANK" in f.subjects] == ["ENV003"]


def test_thread_count_reads_as_english():
    host = {"cpu_count": 2, "affinity": [0, 1], "affinity_count": 2, "usable_cpus": 2}
    found = findings_of(make_snapshot(env={**MPIRUN, "OMP_NUM_THREADS": "1"}, host=host), "ENV006")
    assert "x 1 thread =" in found[0].title


def test_unknown_gpu_uuid_is_reported_once_by_the_gpu_aware_check():
    # CUDA and torch take any GPU-/MIG- token as a (possibly abbreviated) UUID; whether it exists is GPU019's call.
    from ddpdoctor.pipeline.snapshot import Snapshot

    doc = __import__("json").load(open(os.path.join(ROOT, "fixtures", "snapshots", "dgx-a100-8x-nvswitch.json")))
    doc["sections"]["env"]["vars"]["CUDA_VISIBLE_DEVICES"] = "GPU-nope"
    found = [f.id for f in findings_of(Snapshot.from_dict(doc)) if "CUDA_VISIBLE_DEVICES" in f.subjects]
    assert found == ["GPU019"]


def test_comm001_fix_starts_with_a_command():
    comm = {"ok": False, "backend": "gloo", "world_size": 2, "deadline_s": 30.0, "master_addr": "127.0.0.1",
            "master_port": 29555, "failure": {"kind": "missing-ranks", "phase": "rendezvous", "missing": [1], "rank": 0}}
    found = findings_of(make_snapshot(comm=comm), "COMM001")
    assert found and found[0].fix.split()[0] in ("ddpdoctor", "python", "torchrun", "srun")


def test_macos_laptop_has_no_dev_shm_and_that_is_fine():
    host = {"os": "Darwin", "shm": {"path": "/dev/shm", "exists": False, "error": "No such file or directory"},
            "default_start_method": "spawn", "default_sharing_strategy": "file_system", "container": None}
    assert findings_of(make_snapshot(host=host), "SYS001") == []
    linux = {"shm": {"path": "/dev/shm", "exists": False, "error": "No such file or directory"}}
    assert severities(make_snapshot(host=linux), "SYS001") == {"warning"}
