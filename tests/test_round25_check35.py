"""check35 (issue 26, round 25, third engineer): classes from primary sources, each with a trigger and a quiet fixture.
Pure: snapshots are built by the factory over recorded facts; no process is started."""
from __future__ import annotations

from factory import findings_of, make_snapshot

TORCHRUN = {"TORCHELASTIC_RUN_ID": "j", "RANK": "0", "WORLD_SIZE": "4", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "4",
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}

# -- PKG010 entry: NCCL 2.23.4 on an AMD CPU (NVIDIA/TensorRT-LLM docs/source/performance/perf-overview.md
# @258c7540, known issue; workaround NCCL_P2P_LEVEL=SYS); data/known_defects.json cpu_vendor + min_gpus_on_node --
AMD = "nccl-2.23.4-amd-cpu-p2p-level-pxb"


def _amd(nccl="2.23.4", vendor="AuthenticAMD", local=4, **env):
    e = dict(TORCHRUN, LOCAL_WORLD_SIZE=str(local), WORLD_SIZE=str(local), **env)
    snap = make_snapshot(env=e, host={"cpu_vendor": vendor}, packages={"torch": "2.6.0", "nvidia-nccl-cu12": nccl})
    return [f for f in findings_of(snap, "PKG010") if f.evidence.get("defect") == AMD]


def test_nccl_2_23_4_on_an_amd_cpu_with_several_gpus_is_a_known_defect_with_the_p2p_level_workaround():
    [f] = _amd()
    assert f.severity == "warning" and f.title.startswith("NCCL 2.23.4 has a known defect")
    assert f.env_fix == {"NCCL_P2P_LEVEL": "SYS"} and "NCCL_P2P_LEVEL" in f.subjects
    assert "AMD" in f.detail and "TensorRT-LLM" in f.detail


def test_intel_cpu_unknown_vendor_one_gpu_other_release_or_workaround_set_is_quiet():
    assert _amd(vendor="GenuineIntel") == []
    assert _amd(vendor=None) == []  # unrecorded: not assumed
    assert _amd(local=1) == []
    assert _amd(nccl="2.21.5") == [] and _amd(nccl="2.26.2") == []
    assert _amd(NCCL_P2P_LEVEL="SYS") == []


# -- GPU036 judges the AMD GPUs the process's masks leave it: ROCR_VISIBLE_DEVICES first, then HIP_VISIBLE_DEVICES
# (else CUDA_VISIBLE_DEVICES) indexing what it left (data/visible_devices.json hip: pytorch/pytorch torch/cuda/
# __init__.py _parse_visible_devices @cf30153c); an iGPU the job hides is not the job's --

def _rocm(targets, **env):
    snap = make_snapshot(env=env, packages={"torch": "2.11.0"}, pci={"amd_gpus": [
        {"node": i + 1, "gfx_target_version": 0, "gfx": t, "device_id": 0} for i, t in enumerate(targets)]})
    snap.sections["packages"]["torch_build"] = {"cuda": None, "hip": "7.2.53211"}
    return findings_of(snap, "GPU036")


def test_gpu036_still_names_a_visible_gpu_the_build_lacks():
    [f] = _rocm(["gfx1201", "gfx1201", "gfx1036"])  # no mask: the iGPU is the process's too
    assert f.severity == "warning" and "gfx1036" in f.title
    [g] = _rocm(["gfx1201", "gfx1036"], HIP_VISIBLE_DEVICES="1")
    assert "gfx1036" in g.title
    [h] = _rocm(["gfx1036", "gfx1201", "gfx1201"], ROCR_VISIBLE_DEVICES="0,1", HIP_VISIBLE_DEVICES="0")
    assert "gfx1036" in h.title
    [u] = _rocm(["gfx1201", "gfx1036"], HIP_VISIBLE_DEVICES="GPU-5d1ef3a2")  # a UUID: not judged, all GPUs kept
    assert "gfx1036" in u.title


def test_gpu036_is_quiet_on_a_gpu_the_masks_hide():
    assert _rocm(["gfx1201", "gfx1201", "gfx1036"], HIP_VISIBLE_DEVICES="0,1") == []
    assert _rocm(["gfx1201", "gfx1201", "gfx1036"], CUDA_VISIBLE_DEVICES="1,0") == []
    assert _rocm(["gfx1036", "gfx1201", "gfx1201"], ROCR_VISIBLE_DEVICES="1,2") == []
    assert _rocm(["gfx1201", "gfx1036", "gfx1201"], ROCR_VISIBLE_DEVICES="0,1,2", HIP_VISIBLE_DEVICES="0,2") == []


# -- GPU039: a Slurm step that binds GPUs per task (SLURM_GPUS_PER_TASK implies --tres-bind=gres/gpu:per_task;
# SLURM_GPU_BIND / SLURM_TRES_BIND other than none) without --gres-flags=allow-task-sharing: the node's tasks cannot
# reach each other's GPUs (SchedMD/slurm doc/man/man1/srun.1 @284c3b95; data/slurm_env.json gpu_task_binding) --

def _gpus(n):
    return {"count": n, "devices": [{"index": i, "name": "NVIDIA A100-SXM4-80GB", "pci_bus_id": f"00000000:{i + 7:02X}:00.0",
                                     "uuid": f"GPU-{i:08d}-0000-0000-0000-000000000000", "cuda_capability": [8, 0],
                                     "memory_total_mib": 81920} for i in range(n)], "pairs": []}


def _slurm(n_visible=1, tasks="8", **extra):
    env = {"SLURM_JOB_ID": "4711", "SLURM_STEP_ID": "0", "SLURM_NNODES": "1", "SLURM_NTASKS": tasks,
           "SLURM_NTASKS_PER_NODE": tasks, "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_NODEID": "0"}
    env.update(extra)
    snap = make_snapshot(env=env, gpus=_gpus(n_visible))
    return findings_of(snap, "GPU039"), findings_of(snap, "GPU016")


def test_per_task_gpu_binding_on_a_node_of_several_tasks_is_a_warning_and_not_gpu016s_missing_gpus():
    found, gpu016 = _slurm(SLURM_GPUS_PER_TASK="1", SLURM_GPU_BIND="closest")
    [f] = found
    assert f.severity == "warning" and "8 tasks" in f.title and "allow-task-sharing" in f.fix
    assert "SLURM_GRES_FLAGS" in f.subjects
    assert [g for g in gpu016 if g.severity == "error"] == []  # each task has its own GPU, as cuda:0
    [g] = _slurm(SLURM_GPUS_PER_TASK="1")[0]  # --gpus-per-task alone binds per task (implicit per_task)
    assert g.severity == "warning"
    [h] = _slurm(n_visible=2, SLURM_TRES_BIND="gres/gpu:per_task:2")[0]
    assert "sees 2" in h.title


def test_no_binding_binding_none_sharing_allowed_one_task_or_all_gpus_seen_is_quiet():
    assert _slurm()[0] == []  # nothing binds
    assert _slurm(SLURM_GPUS_PER_TASK="1", SLURM_GPU_BIND="none")[0] == []
    assert _slurm(SLURM_GPUS_PER_TASK="1", SLURM_TRES_BIND="gres/gpu:verbose,none")[0] == []
    assert _slurm(SLURM_GPUS_PER_TASK="1", SLURM_GRES_FLAGS="allow-task-sharing")[0] == []
    assert _slurm(tasks="1", SLURM_GPUS_PER_TASK="1")[0] == []
    assert _slurm(n_visible=8, SLURM_GPU_BIND="closest")[0] == []
    # and without binding, one visible GPU of a one-GPU machine under 8 tasks stays GPU016's error
    assert [g.severity for g in _slurm()[1]] == ["error"]


# -- PKG002 arm: one NCCL wheel alone, of another CUDA major than torch's build: every nvidia-nccl-cuNN wheel
# installs nvidia/nccl/lib/libnccl.so.2, which a torch 2.x CUDA wheel loads (PKG002's class) --

def _wheels(torch="2.2.2", cuda="12.1", pins=None, **wheels):
    pk = {"torch": torch, "torch_build": {"cuda": cuda, "hip": None}}
    pk.update({k.replace("_", "-"): v for k, v in wheels.items()})
    if pins is not None:
        pk["torch_pins"] = pins
    return findings_of(make_snapshot(packages=pk), "PKG002")


def test_a_lone_nccl_wheel_of_another_cuda_major_is_the_one_torch_loads():
    [f] = _wheels(nvidia_nccl_cu11="2.14.3", pins={"nvidia-nccl-cu12": "2.19.3"})
    assert f.severity == "warning" and "nvidia-nccl-cu11 2.14.3" in f.title and "CUDA 12.1" in f.title
    assert "older than the 2.19.3" in f.detail and f.fix.startswith("pip uninstall -y nvidia-nccl-cu11")
    [g] = _wheels(nvidia_nccl_cu12="2.21.5", cuda="11.8", torch="2.1.0")
    assert "nvidia-nccl-cu12" in g.title


def test_the_wheel_of_torchs_own_major_an_old_torch_or_no_cuda_build_is_quiet():
    assert _wheels(nvidia_nccl_cu12="2.19.3") == []
    assert _wheels(nvidia_nccl_cu11="2.14.3", torch="1.12.1", cuda="11.6") == []  # NCCL linked into torch
    assert _wheels(nvidia_nccl_cu11="2.14.3", cuda=None) == []
    assert _wheels() == []


# -- GPU040: Triton before 2.2.0 finds libcuda only through ldconfig's cache (triton/common/build.py libcuda_dirs in
# the triton-2.1.0 wheel; TRITON_LIBCUDA_PATH and LD_LIBRARY_PATH from 2.2.0: triton-lang/triton @886f8c5a;
# data/triton_libraries.json libcuda_lookup); the cuda section's ld_cache_libcuda, read from /etc/ld.so.cache --

def _triton(triton="2.1.0", cached=False, library="/usr/local/nvidia/lib64/libcuda.so.1", dist="triton"):
    cuda = {"init_result": 0, "device_count": 4, "driver_version": 12020, "library": library, "unversioned_link": True}
    if cached is not None:
        cuda["ld_cache_libcuda"] = cached
    snap = make_snapshot(env={"LD_LIBRARY_PATH": "/usr/local/nvidia/lib64"}, packages={"torch": "2.1.0", dist: triton},
                         cuda=cuda, gpus=_gpus(4))
    return findings_of(snap, "GPU040")


def test_triton_2_1_with_no_libcuda_in_the_loader_cache_is_a_warning_naming_the_directory_to_cache():
    [f] = _triton()
    assert f.severity == "warning" and "triton 2.1.0" in f.title and "libcuda.so cannot found" in f.title
    assert "/usr/local/nvidia/lib64" in f.fix and "ldconfig" in f.fix
    [g] = _triton(triton="2.0.0", dist="pytorch-triton")
    assert g.severity == "warning"


def test_a_cached_libcuda_an_unread_cache_or_triton_2_2_is_quiet():
    assert _triton(cached=True) == []
    assert _triton(cached=None) == []  # the cache was not read: not assumed
    assert _triton(triton="2.2.0") == [] and _triton(triton="3.0.0") == []


def test_the_gatherer_reads_the_loader_cache_for_libcuda(tmp_path):
    from ddpdoctor.gather import Sources
    from ddpdoctor.gather.cuda import ld_cache_lists

    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "ld.so.cache").write_bytes(b"glibc-ld.so.cache1.1\x00libcudart.so.12\x00/usr/lib/libz.so.1\x00")
    assert ld_cache_lists(Sources(environ={}, root=str(tmp_path))) is False
    (tmp_path / "etc" / "ld.so.cache").write_bytes(b"glibc-ld.so.cache1.1\x00libcuda.so.1\x00/usr/lib/x86_64-linux-gnu/"
                                                   b"libcuda.so.1\x00")
    assert ld_cache_lists(Sources(environ={}, root=str(tmp_path))) is True
    assert ld_cache_lists(Sources(environ={}, root=str(tmp_path / "none"))) is None
