"""check24 (issue 26, round 21): classes left by check23, each with a trigger and a quiet fixture.
Pure: snapshots from the factory, judged by the checks; the tables are data with their sources."""
from __future__ import annotations

import pytest

from factory import findings_of, make_snapshot


def _gpus(name, cc, n=1):
    return {"count": n, "devices": [{"index": i, "name": name, "uuid": f"GPU-{i}", "cuda_capability": list(cc)}
                                    for i in range(n)], "pairs": []}


def _torch(version, cuda):
    return {"torch": version, "torch_build": {"cuda": cuda, "hip": None, "git_version": "0" * 40}}


# ------------------------------------------------------------------ GPU032: the GPU and the build, as torch names them

@pytest.mark.parametrize("name, cc, version, cuda, build", [
    ("NVIDIA GeForce RTX 5090", (12, 0), "2.6.0", "12.4", "builds kernels up to sm_90"),   # newer than the toolkit
    ("NVIDIA A100-SXM4-40GB", (8, 0), "1.10.1", "10.2", "supports sm_37 sm_50 sm_60 sm_70"),  # wheel list known
    ("Tesla M60", (5, 2), "2.9.0+cu129", "12.9", "support sm_75 sm_80 sm_86 sm_90 sm_100 sm_120"),  # older than the wheel
    ("GeForce GT 630", (2, 1), "1.0.0", "9.0", "cannot build code"),                       # older than the toolkit
])
def test_gpu032_every_arm_names_the_capability_as_torch_prints_it(name, cc, version, cuda, build):
    """Trigger: each arm's title carries "cuda capability X.Y" (_check_capability), "sm_XY" (_check_cubins) and
    the build's architectures in torch's "sm_50 sm_60 ..." form, so a search for torch's warning finds it."""
    snap = make_snapshot(packages=_torch(version, cuda), gpus=_gpus(name, cc))
    titles = [f.title for f in findings_of(snap, "GPU032")]
    assert titles, "GPU032 must fire on this pair"
    label = f"{name} (cuda capability {cc[0]}.{cc[1]}, sm_{cc[0]}{cc[1]})"
    assert any(label in t and build in t for t in titles), titles


def test_gpu032_the_compiled_arm_names_the_capability_and_what_the_module_carries():
    snap = make_snapshot(packages=dict(_torch("2.5.1", "12.4"), cuda_archs=[
        {"package": "torch", "file": "libtorch_cuda.so", "sass": [80, 50, 90], "ptx": [90]}]),
        gpus=_gpus("Tesla K80", (3, 7)))
    [f] = [f for f in findings_of(snap, "GPU032") if f.evidence.get("package") == "torch"]
    assert "Tesla K80 (cuda capability 3.7, sm_37)" in f.title and "sm_50 sm_80 sm_90 compute_90 (PTX)" in f.title


@pytest.mark.parametrize("name, cc, version, cuda", [
    ("NVIDIA GeForce RTX 5090", (12, 0), "2.7.0+cu128", "12.8"),
    ("NVIDIA A100-SXM4-40GB", (8, 0), "1.10.1+cu113", "11.3"),
])
def test_gpu032_quiet_where_the_build_carries_the_gpu(name, cc, version, cuda):
    snap = make_snapshot(packages=_torch(version, cuda), gpus=_gpus(name, cc))
    assert [f for f in findings_of(snap, "GPU032") if f.severity != "info"] == []


# ------------------------------------------------------------------ GPU036: targets PyTorch's ROCm wheels gained later

def _amd(torch, hip, targets, env=None):
    kw = {"env": env} if env else {}
    snap = make_snapshot(packages={"torch": torch}, pci={"amd_gpus": [
        {"node": i + 1, "gfx_target_version": 0, "gfx": t, "device_id": None} for i, t in enumerate(targets)]}, **kw)
    snap.sections["packages"]["torch_build"] = {"cuda": None, "hip": hip}
    return snap


def _later(snap):
    return [f for f in findings_of(snap, "GPU036") if "carry" in f.title and "from torch" in f.title]


def test_the_later_targets_are_data_with_sources():
    from ddpdoctor.facts import gpu_versions

    table = gpu_versions.rocm_wheel_target_torch()
    assert table["gfx1201"]["torch"] == "2.7" and table["gfx1151"]["torch"] == "2.10"
    assert all(r["source"]["repo"] == "pytorch/pytorch" and r["source"]["url"] for r in table.values())
    # every later target is in the current build script's list too (rocm_wheel_targets_current)
    assert set(table) <= gpu_versions.rocm_wheel_targets_ever()


@pytest.mark.parametrize("torch, hip, gfx, verdict", [
    ("2.6.0+rocm6.2.4", "6.2.41133", "gfx1201", "likely has"),          # RDNA 4 before torch 2.7
    ("2.9.1+rocm6.4", "6.4.43482", "gfx1151", "likely has"),            # Strix Halo before torch 2.10
    ("2.5.1+rocm6.2", "6.2.41133", "gfx1101", "likely has"),            # Navi 32 before torch 2.6
    ("2.10.0.dev20250929+rocm7.0", "7.0.51831", "gfx1151", "may have"),  # a ROCm 7.0 nightly before the date: a guess
])
def test_gpu036_a_target_the_wheels_gained_later_warns(torch, hip, gfx, verdict):
    [f] = _later(_amd(torch, hip, [gfx]))
    assert f.severity == "warning" and gfx in f.title and verdict in f.title
    assert ("a guess" in f.detail.lower()) == (verdict == "may have")


@pytest.mark.parametrize("torch, hip, gfx, env", [
    ("2.7.0+rocm6.3", "6.3.42131", "gfx1201", None),                     # the release that added it
    ("2.10.0.dev20251120+rocm7.0", "7.0.51831", "gfx1151", None),        # a nightly after every ROCm got it
    ("2.11.0+rocm7.14.0a20260508", "7.14.0", "gfx1151", None),           # AMD's TheRock wheel: its own list
    ("2.4.0+rocm6.3.4.git7cecbf6d", "6.3.42134", "gfx1201", None),       # AMD's repo.radeon.com wheel
    ("2.6.0+rocm6.2.4", "6.2.41133", "gfx1201", {"HSA_OVERRIDE_GFX_VERSION": "11.0.0"}),  # presented as gfx1100
    ("2.6.0+rocm6.2.4", "6.2.41133", "gfx1100", None),                   # a target of every such wheel
])
def test_gpu036_quiet_where_the_wheel_carries_the_target_or_is_not_pytorchs(torch, hip, gfx, env):
    assert _later(_amd(torch, hip, [gfx], env)) == []


# ------------------------------------------------------------------ PKG016: the cuDNN a "+cu" wheel carries, as data

def _ld_cudnn(torch, cuda, version):
    return make_snapshot(packages={"torch": torch, "torch_build": {"cuda": cuda, "hip": None},
                                   "ld_cuda_libs": [{"dir": "/usr/local/cuda/lib64", "name": "libcudnn.so.8",
                                                     "version": version}]})


def test_the_bundled_cudnn_table_is_data_with_sources():
    from ddpdoctor.facts import gpu_versions

    table = gpu_versions.torch_bundled_cudnn()
    assert table[("1.13", "11.7")] == "8.5.0" and table[("2.0", "11.8")] == "8.7.0" and table[("1.12", "11.6")] == "8.3.2"
    assert ("2.1", "12.1") not in table  # from 2.1 the nvidia-cudnn wheels carry it


@pytest.mark.parametrize("torch, cuda, have, own", [
    ("1.13.1+cu117", "11.7", "8.3.3", "8.5.0"),   # an older minor in LD_LIBRARY_PATH
    ("1.12.1+cu116", "11.6", "7.6.5", "8.3.2"),   # another major
    ("2.0.1+cu117", "11.7", "8.4.1", "8.5.0"),
])
def test_pkg016_a_cudnn_torch_refuses_ahead_of_its_own_warns(torch, cuda, have, own):
    [f] = findings_of(_ld_cudnn(torch, cuda, have), "PKG016")
    assert f.severity == "warning" and "torch refuses it" in f.title and own in f.title
    assert f"compiled against ({', '.join(own.split('.'))})" in f.detail


@pytest.mark.parametrize("torch, cuda, have", [
    ("1.13.1+cu117", "11.7", "8.5.0"),   # its own
    ("1.13.1+cu117", "11.7", "8.9.7"),   # a newer minor of the same major: torch accepts it
    ("1.12.1+cu116", "11.6", "8.3.2"),
])
def test_pkg016_quiet_where_torch_accepts_the_cudnn(torch, cuda, have):
    assert [f for f in findings_of(_ld_cudnn(torch, cuda, have), "PKG016") if f.severity != "info"] == []


# ------------------------------------------------------------------ PKG015: a conda CUDA runtime newer than the driver

def _conda(torch, cuda, name, version, driver_cuda, driver="410.48"):
    return make_snapshot(packages={"torch": torch, "torch_build": {"cuda": cuda, "hip": None},
                                   "conda_cuda": [{"name": name, "version": version, "prefix": "/opt/conda"}]},
                         gpus=dict(_gpus("Tesla V100-SXM2-16GB", (7, 0)), driver_version=driver,
                                   cuda_driver=driver_cuda))


def _beyond(snap):
    return [f for f in findings_of(snap, "PKG015") if "newer than driver" in f.title]


@pytest.mark.parametrize("torch, cuda, name, version, driver_cuda", [
    ("1.4.0", "10.1", "cudatoolkit", "10.2.89", "10.1"),     # before CUDA 11: a newer minor needs a newer driver
    ("1.13.1+cu117", "11.7", "cuda-runtime", "12.1.0", "11.4"),  # a newer major
])
def test_pkg015_a_conda_cuda_runtime_newer_than_the_driver_warns(torch, cuda, name, version, driver_cuda):
    [f] = _beyond(_conda(torch, cuda, name, version, driver_cuda))
    assert f.severity == "warning" and name in f.title and f"CUDA {driver_cuda}" in f.title
    assert "insufficient for CUDA runtime version" in f.detail


@pytest.mark.parametrize("torch, cuda, name, version, driver_cuda", [
    ("1.13.1+cu117", "11.7", "cudatoolkit", "11.8.0", "11.4"),  # CUDA 11+: minor-version compatibility
    ("1.4.0", "10.1", "cudatoolkit", "10.1.243", "10.1"),       # the driver's own CUDA
    ("1.4.0", "10.2", "cudatoolkit", "10.2.89", "10.1"),        # torch's own CUDA: GPU023 says it
    ("1.4.0", "10.1", "libcublas", "12.1.0", "10.1"),           # not a runtime package
])
def test_pkg015_quiet_where_the_driver_runs_the_conda_runtime(torch, cuda, name, version, driver_cuda):
    assert _beyond(_conda(torch, cuda, name, version, driver_cuda)) == []
