"""Round 11 (issue 26): classes mined from the sources before batches 56-57 and from those batches.
Each class: a trigger that fails on the code before and a quiet case (pure functions on recorded facts)."""
from __future__ import annotations

from factory import findings_of, make_snapshot

# ------------------------------------------------ ENV007: Lightning >= 1.8 refuses --ntasks without --ntasks-per-node
# Lightning-AI/pytorch-lightning src/lightning/fabric/plugins/environments/slurm.py @03f57f9c _validate_srun_variables
NTASKS_ONLY = {"SLURM_JOB_ID": "8812", "SLURM_JOB_NAME": "train", "SLURM_NTASKS": "4", "SLURM_NNODES": "1",
               "SLURM_JOB_NUM_NODES": "1", "SLURM_TASKS_PER_NODE": "4", "SLURM_STEP_ID": "0", "SLURM_PROCID": "1",
               "SLURM_LOCALID": "1", "SLURM_NODEID": "0", "SLURM_GPUS_ON_NODE": "4"}


def _refused(env, packages):
    return [f.severity for f in findings_of(make_snapshot(env=env, packages=packages), "ENV007")
            if "will refuse" in f.title]


def test_lightning_refuses_ntasks_without_ntasks_per_node():
    assert _refused(NTASKS_ONLY, {"lightning": "2.4.0"}) == ["warning"]
    assert _refused(NTASKS_ONLY, {"pytorch-lightning": "1.9.5"}) == ["warning"]


def test_lightning_ntasks_quiet_cases():
    assert not _refused(dict(NTASKS_ONLY, SLURM_NTASKS_PER_NODE="4"), {"lightning": "2.4.0"})  # --ntasks-per-node given
    assert not _refused(NTASKS_ONLY, {"pytorch-lightning": "1.7.7"})                            # before #15011
    assert not _refused(NTASKS_ONLY, {})                                                       # no Lightning
    assert not _refused(dict(NTASKS_ONLY, SLURM_JOB_NAME="interactive"), {"lightning": "2.4.0"})
    assert not _refused(dict(NTASKS_ONLY, SLURM_NTASKS="1", SLURM_TASKS_PER_NODE="1"), {"lightning": "2.4.0"})



# ------------------------------------------------ ENV007: Lightning in the batch step of a several-task allocation
# Lightning-AI/pytorch-lightning slurm.py @03f57f9c: world_size() = SLURM_NTASKS, global_rank() = SLURM_PROCID, and
# detect() holds outside srun; the batch step is one process, so it waits for ranks srun never starts (#14022).
BATCH_8 = {"SLURM_JOB_ID": "51324", "SLURM_JOB_NAME": "train", "SLURM_NTASKS": "8", "SLURM_NTASKS_PER_NODE": "4",
           "SLURM_TASKS_PER_NODE": "4(x2)", "SLURM_JOB_NUM_NODES": "2", "SLURM_NNODES": "2", "SLURM_PROCID": "0",
           "SLURM_LOCALID": "0", "SLURM_NODEID": "0", "SLURM_STEP_ID": "batch", "SLURM_GPUS_ON_NODE": "4"}


def _waits(env, packages):
    return [f.severity for f in findings_of(make_snapshot(env=env, packages=packages), "ENV007")
            if "Lightning" in f.title and "waits at the rendezvous" in f.detail]


def test_lightning_in_the_batch_step_of_several_tasks_waits_for_ranks_never_started():
    assert _waits(BATCH_8, {"lightning": "2.3.3"}) == ["warning"]


def test_lightning_batch_step_quiet_cases():
    assert not _waits(BATCH_8, {})                                                      # no Lightning
    assert not _waits(dict(BATCH_8, SLURM_JOB_NAME="interactive"), {"lightning": "2.3.3"})
    assert not _waits(dict(BATCH_8, SLURM_STEP_ID="0"), {"lightning": "2.3.3"})         # srun started the tasks
    assert not _waits(dict(BATCH_8, SLURM_NTASKS="1", SLURM_NTASKS_PER_NODE="1", SLURM_TASKS_PER_NODE="1",
                           SLURM_JOB_NUM_NODES="1", SLURM_NNODES="1", SLURM_GPUS_ON_NODE="1"), {"lightning": "2.3.3"})


# ------------------------------------------------ SYS006: the extension root as torch picks it (batches 58-59)
# torch/utils/cpp_extension.py get_default_build_root -> torch/_appdirs.py user_cache_dir (torch 2.13 in the venv);
# before torch 1.6 <tempdir>/torch_extensions (pytorch/pytorch PR #34239 moved it)
def _locks(tmp_path, environ, system, torch_version):
    from ddpdoctor.gather import Sources
    from ddpdoctor.gather.host import torch_extension_locks

    out = torch_extension_locks(Sources(root=str(tmp_path), environ=environ), system=system, torch_version=torch_version)
    return None if out is None else (out["path"], [l["path"] for l in out["locks"]])


def test_extension_locks_found_where_torch_builds(tmp_path):
    import os

    mac = tmp_path / "Users/u/Library/Caches/torch_extensions/py312_cpu/metal_gauss_metal"
    mac.mkdir(parents=True)
    (mac / "lock").write_text("")
    assert _locks(tmp_path, {"HOME": "/Users/u"}, "darwin", "2.8.0") == (
        "/Users/u/Library/Caches/torch_extensions", [os.path.join("py312_cpu", "metal_gauss_metal", "lock")])
    old = tmp_path / "scratch/torch_extensions/quantized_functions_cuda"  # torch 1.5: <tempdir>/torch_extensions/<name>
    old.mkdir(parents=True)
    (old / "lock").write_text("")
    assert _locks(tmp_path, {"HOME": "/home/u", "TMPDIR": "/scratch"}, "linux", "1.5.1+cu102") == (
        "/scratch/torch_extensions", [os.path.join("quantized_functions_cuda", "lock")])
    from ddpdoctor.gather.host import torch_extension_root
    assert torch_extension_root({"LOCALAPPDATA": r"C:\Users\u\AppData\Local"}, "win32", "1.11.0")[0] == os.path.join(
        r"C:\Users\u\AppData\Local", "torch_extensions", "torch_extensions", "Cache")
    assert torch_extension_root({}, "linux", "1.4.0") == ("/tmp/torch_extensions", 1)


def test_extension_locks_quiet_outside_torchs_root(tmp_path):
    linux = tmp_path / "Users/u/.cache/torch_extensions/py312_cpu/ext"  # ~/.cache is not torch's root on macOS
    linux.mkdir(parents=True)
    (linux / "lock").write_text("")
    assert _locks(tmp_path, {"HOME": "/Users/u"}, "darwin", "2.8.0") is None
    stale_tmp = tmp_path / "tmp/torch_extensions/ext"  # from torch 1.6 /tmp is no longer searched
    stale_tmp.mkdir(parents=True)
    (stale_tmp / "lock").write_text("")
    assert _locks(tmp_path, {"HOME": "/nobody"}, "linux", "1.8.1") is None
    assert _locks(tmp_path, {"HOME": "/nobody"}, "linux", "1.5.0") == ("/tmp/torch_extensions", ["ext/lock"])


# ------------------------------------------------ GPU001: AMD GPUs under a torch that is not a ROCm build
def _amd_host(torch, build, targets, nvidia_on_bus=False):
    from factory import make_snapshot as mk

    pci = {"amd_gpus": [{"node": i + 1, "gfx_target_version": 0, "gfx": t, "device_id": None}
                        for i, t in enumerate(targets)]}
    if nvidia_on_bus:
        pci["gpus"] = {"0000:01:00.0": {"vendor": "0x10de", "class": "0x030000"}}
    snap = mk(packages={"torch": torch}, pci=pci)
    snap.sections["gpus"] = {"unavailable": "no NVIDIA driver found (NVML library not loaded)",
                             "reason": "library_not_found", "hints": {}}
    snap.sections["packages"]["torch_build"] = build
    return [(f.severity, f.title) for f in findings_of(snap, "GPU001")]


def test_gpu001_amd_gpus_under_a_cuda_build_warn():
    got = _amd_host("2.4.0+cu121", {"cuda": "12.1", "hip": None}, ["gfx1100"])
    assert [s for s, _ in got] == ["warning"] and "AMD" in got[0][1] and "CUDA 12.1" in got[0][1]
    assert [s for s, _ in _amd_host("2.4.0+cpu", {"cuda": None, "hip": None}, ["gfx90a", "gfx90a"])] == ["warning"]


def test_gpu001_amd_gpus_quiet_cases():
    assert [s for s, _ in _amd_host("2.4.0+rocm6.1", {"cuda": None, "hip": "6.1.40091"}, ["gfx1100"])] == ["info"]
    assert [s for s, _ in _amd_host("2.4.0+cpu", {"cuda": None, "hip": None}, ["gfx90c"])] == ["info"]  # an APU: no verdict
    assert not [s for s, _ in _amd_host("2.4.0+cu121", {"cuda": "12.1", "hip": None}, ["gfx1100"], nvidia_on_bus=True)
                if s == "warning" and "AMD" in _]
