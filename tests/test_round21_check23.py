"""check23 (issue 26, round 21): classes left by check22, each with a trigger and a quiet fixture.
Pure: snapshots from the factory, judged by the checks; the tables are data with their sources."""
from __future__ import annotations

import pytest

from ddpdoctor.facts import gpu_versions
from factory import findings_of, make_snapshot


def _gpus(name, cc, n=1):
    return {"count": n, "devices": [{"index": i, "name": name, "uuid": f"GPU-{i}", "cuda_capability": list(cc)}
                                    for i in range(n)], "pairs": []}


def _torch(version, cuda):
    return {"torch": version, "torch_build": {"cuda": cuda, "hip": None, "git_version": "0" * 40}}


# ------------------------------------------------------------------ GPU032: a GPU older than the toolkit builds for


def test_the_toolkit_floor_is_data_with_sources():
    """last_toolkit_of_arch (llvm clang/lib/Basic/Cuda.cpp MaxVersionForCudaArch; NVIDIA's CUDA 13.0 notes)."""
    last = gpu_versions.last_toolkit_of_arch()
    assert last[21] == (8, 0) and last[30] == (10, 2) and last[37] == (11, 8) and last[70] == (12, 9)
    assert 75 not in last and 80 not in last
    assert gpu_versions.dropped_by_toolkit((9, 0), 21) == (8, 0)
    assert gpu_versions.dropped_by_toolkit((8, 0), 21) is None and gpu_versions.dropped_by_toolkit((11, 8), 37) is None
    assert gpu_versions.dropped_by_toolkit((13, 0), 61) == (12, 9) and gpu_versions.dropped_by_toolkit((13, 0), 75) is None


@pytest.mark.parametrize("name, cc, version, cuda, last", [
    ("GeForce GT 630", (2, 1), "1.0.0", "9.0", "8.0"),        # Fermi under a CUDA 9 build
    ("Tesla K80", (3, 7), "2.1.0+cu121", "12.1", "11.8"),    # Kepler under a CUDA 12 build
    ("Tesla V100-SXM2-16GB", (7, 0), "2.9.0+cu130", "13.0", "12.9"),  # Volta under a CUDA 13 build
])
def test_gpu032_a_gpu_older_than_the_builds_toolkit_is_an_error(name, cc, version, cuda, last):
    """Trigger: the build's CUDA no longer compiles for the GPU: no build of it can carry its kernels."""
    snap = make_snapshot(packages=_torch(version, cuda), gpus=_gpus(name, cc))
    [f] = [f for f in findings_of(snap, "GPU032") if "cannot build code" in f.title]
    assert f.severity == "error" and f"cuda capability {cc[0]}.{cc[1]}" in f.title
    assert f.evidence["last_toolkit"] == last and "no longer supports this GPU" in f.detail


@pytest.mark.parametrize("name, cc, version, cuda", [
    ("GeForce GT 630", (2, 1), "0.1.12", "8.0"),             # the last toolkit that builds for Fermi
    ("Tesla K80", (3, 7), "1.12.1+cu113", "11.3"),            # CUDA 11 still builds sm_37
    ("Tesla T4", (7, 5), "2.9.0+cu130", "13.0"),              # Turing is kept by CUDA 13
])
def test_gpu032_quiet_where_the_toolkit_still_builds_for_the_gpu(name, cc, version, cuda):
    snap = make_snapshot(packages=_torch(version, cuda), gpus=_gpus(name, cc))
    assert [f for f in findings_of(snap, "GPU032") if "cannot build code" in f.title] == []


# ------------------------------------------------------------------ deepspeed: ranks with no --num_gpus, threads per rank

def _launch(argv):
    from ddpdoctor.facts.launch import parse_command

    return {"commands": [dict(parse_command(argv), depth=0)], "depth_read": 0}


def _rtx4090(n=4):
    return {"count": n, "devices": [{"index": i, "name": "NVIDIA GeForce RTX 4090", "uuid": f"GPU-{i}",
                                     "cuda_capability": [8, 9]} for i in range(n)], "pairs": []}


def test_deepspeed_without_num_gpus_runs_one_rank_per_visible_gpu():
    """runner.py main(): no hostfile -> resource_pool['localhost'] = device_count(); CUDA_VISIBLE_DEVICES -> --include."""
    from ddpdoctor.facts.launch import per_node_processes

    n, how = per_node_processes(make_snapshot(gpus=_rtx4090(4), launch=_launch(["deepspeed", "train.py"])))
    assert n == 4 and "one rank per visible GPU" in how
    n, _ = per_node_processes(make_snapshot(gpus=_rtx4090(4), env={"CUDA_VISIBLE_DEVICES": "0,1"},
                                            launch=_launch(["deepspeed", "train.py"])))
    assert n == 2


@pytest.mark.parametrize("argv", [["deepspeed", "-H", "hostfile", "train.py"],
                                  ["deepspeed", "--include", "localhost:0", "train.py"],
                                  ["deepspeed", "--num_nodes", "2", "train.py"]])
def test_deepspeed_ranks_not_guessed_where_the_command_names_hosts_or_devices(argv):
    from ddpdoctor.facts.launch import per_node_processes

    assert per_node_processes(make_snapshot(gpus=_rtx4090(4), launch=_launch(argv))) is None
    assert per_node_processes(make_snapshot(launch=_launch(["deepspeed", "train.py"]))) is None  # no GPUs recorded


def test_env006_deepspeed_leaves_omp_unset_so_every_rank_takes_every_core():
    """Trigger: 4 ranks of `deepspeed train.py` on 12 cores, OMP_NUM_THREADS unset (launch.py sets it only under
    --bind_cores_to_rank; torchrun would set 1)."""
    snap = make_snapshot(gpus=_rtx4090(4), launch=_launch(["deepspeed", "train.py"]),
                         host={"cpu_count": 12, "usable_cpus": 12})
    [f] = findings_of(snap, "ENV006")
    assert f.severity == "warning" and f.title.startswith("4 ranks x 12 threads = 48")
    assert "deepspeed launcher does not set it" in f.evidence["threads_source"] and f.env_fix == {"OMP_NUM_THREADS": "3"}


@pytest.mark.parametrize("argv, env", [(["deepspeed", "--bind_cores_to_rank", "train.py"], {}),
                                       (["deepspeed", "train.py"], {"OMP_NUM_THREADS": "3"}),
                                       (["torchrun", "--nproc-per-node", "4", "train.py"], {})])
def test_env006_quiet_where_the_threads_fit_the_cores(argv, env):
    snap = make_snapshot(gpus=_rtx4090(4), launch=_launch(argv), host={"cpu_count": 12, "usable_cpus": 12}, env=env)
    assert findings_of(snap, "ENV006") == []


def test_gpu002_rtx40_defect_is_an_error_under_a_plain_deepspeed_launch():
    """GPU002 graded by the job: `deepspeed train.py` now declares its ranks (one per visible GPU), so the RTX 40
    P2P defect before driver 550.40.07 is an error as under torchrun; quiet with NCCL_P2P_DISABLE=1."""
    g = dict(_rtx4090(2), driver_version="535.104.05")
    [f] = findings_of(make_snapshot(gpus=g, launch=_launch(["deepspeed", "train.py"])), "GPU002")
    assert f.severity == "error" and f.evidence["local_ranks"] == 2
    assert findings_of(make_snapshot(gpus=g, env={"NCCL_P2P_DISABLE": "1"},
                                     launch=_launch(["deepspeed", "train.py"])), "GPU002") == []


# ------------------------------------------------------------------ GPU036: torch's ROCm user space vs the host's ROCm

ROCM54 = {"torch": "2.0.1+rocm5.4.2", "torch_build": {"cuda": None, "hip": "5.4.22803", "git_version": "0" * 40}}


def test_host_rocm_is_gathered_from_its_info_version(tmp_path):
    from ddpdoctor.gather import Sources
    from ddpdoctor.gather.host import rocm_install

    (tmp_path / "opt/rocm/.info").mkdir(parents=True)
    (tmp_path / "opt/rocm/.info/version").write_text("5.7.2-19\n")
    assert rocm_install(Sources(environ={}, root=str(tmp_path))) == {"path": "/opt/rocm", "version": "5.7.2-19"}
    assert rocm_install(Sources(environ={"ROCM_PATH": "/elsewhere"}, root=str(tmp_path))) is None
    (tmp_path / "opt/rocm/.info/version").write_text("garbage\n")
    assert rocm_install(Sources(environ={}, root=str(tmp_path))) is None


def test_gpu036_a_rocm_build_three_releases_from_the_hosts_rocm_warns():
    """Trigger: torch rocm5.4 wheels on a host with ROCm 5.7.2 (AMD's window: +/- 2 releases)."""
    snap = make_snapshot(packages=ROCM54, host={"rocm": {"path": "/opt/rocm", "version": "5.7.2-19"}})
    [f] = [f for f in findings_of(snap, "GPU036") if "user space" in f.title]
    assert f.severity == "warning" and f.evidence["releases_apart"] == 3 and "a guess" in f.detail
    assert "ROCm 5.4" in f.title and "5.7.2" in f.title


@pytest.mark.parametrize("host", [{"rocm": {"path": "/opt/rocm", "version": "5.6.1"}},  # 2 apart: supported
                                  {"rocm": None},                                       # no ROCm recorded
                                  {"rocm": {"path": "/opt/rocm", "version": "4.5.2"}}])  # outside the table
def test_gpu036_quiet_within_the_window_or_without_the_fact(host):
    snap = make_snapshot(packages=ROCM54, host=host)
    assert [f for f in findings_of(snap, "GPU036") if "user space" in f.title] == []


def test_host_rocm_survives_a_snapshot_round_trip():
    from ddpdoctor.pipeline.snapshot import Snapshot

    snap = make_snapshot(host={"rocm": {"path": "/opt/rocm", "version": "6.2.4-120"}})
    back = Snapshot.from_dict(snap.to_dict())
    assert back.get("host")["rocm"] == {"path": "/opt/rocm", "version": "6.2.4-120"}


# ------------------------------------------------------------------ GPU032: PyTorch's CUDA 11.6-11.8 wheels start at sm_37

def test_the_cuda11_wheel_rows_name_the_builder_script():
    archs = gpu_versions.release_archs()
    assert archs[(11, 8)]["x86_64"] == {37, 50, 60, 70, 75, 80, 86, 90} and min(archs[(11, 6)]["x86_64"]) == 37


def test_gpu032_a_sm35_gpu_under_a_cu118_wheel_is_a_marked_guess():
    """Trigger: a Tesla K40m (sm_35) with torch 2.0.1+cu118: CUDA 11.8 still compiles sm_35, PyTorch's wheels
    carry sm_37 as their oldest (a cubin runs on its own major at the same or a newer minor only)."""
    snap = make_snapshot(packages=_torch("2.0.1+cu118", "11.8"), gpus=_gpus("Tesla K40m", (3, 5)))
    [f] = findings_of(snap, "GPU032")
    assert f.severity == "warning" and "likely has no kernels" in f.title and "A guess" in f.detail
    assert f.evidence["wheel_archs"][0] == 37


@pytest.mark.parametrize("name, cc", [("Tesla K80", (3, 7)), ("Tesla M40", (5, 2)), ("Tesla T4", (7, 5))])
def test_gpu032_quiet_for_gpus_the_cu118_wheels_carry(name, cc):
    snap = make_snapshot(packages=_torch("2.0.1+cu118", "11.8"), gpus=_gpus(name, cc))
    assert findings_of(snap, "GPU032") == []
