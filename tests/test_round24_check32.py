"""check32 (issue 26, round 24, third cycle): classes left by batches 118-123, each with a trigger and a quiet
fixture. Pure: snapshots are built by the factory over recorded facts; no process is started."""
from __future__ import annotations

from factory import findings_of, make_snapshot

# -- SYS007 arm: a Triton that keys its kernel cache without the GPU architecture (before triton-lang/triton#1593,
# first released in 2.1.0; data/jit_caches.json cache_key_without_arch) whose cache serves several architectures --

HOME_ON_NFS = {"path": "/home/u/.triton/cache", "from": "home", "fstype": "nfs4", "mount_point": "/home",
               "manager": None, "writable": True, "writable_at": "/home/u/.triton/cache"}
LOCAL = dict(HOME_ON_NFS, fstype="ext4", mount_point="/")


def _gpus(*ccs):
    return {"devices": [{"index": i, "name": f"GPU {i}", "cuda_capability": list(cc)} for i, cc in enumerate(ccs)]}


def _arch(snap):
    return [f for f in findings_of(snap, "SYS007") if "without the GPU architecture" in f.title]


def test_old_triton_with_its_cache_on_a_shared_home_is_a_note_naming_the_release():
    [f] = _arch(make_snapshot(host={"triton_cache": HOME_ON_NFS}, packages={"triton": "2.0.0.dev20230217"},
                              gpus=_gpus((8, 0))))
    assert f.severity == "info"
    assert "triton 2.0.0.dev20230217" in f.title and "nfs4 at /home" in f.title and "sm_80" in f.title
    assert "device kernel image is invalid" in f.detail and "triton>=2.1" in f.fix


def test_old_triton_on_a_host_with_two_gpu_architectures_is_a_warning_even_on_local_disk():
    [f] = _arch(make_snapshot(host={"triton_cache": LOCAL}, packages={"triton": "2.1.0.dev20230301"},
                              gpus=_gpus((7, 0), (8, 0), (8, 0))))
    assert f.severity == "warning" and "sm_70, sm_80" in f.title and f.evidence["shared_fs"] is False


def test_triton_that_keys_by_architecture_is_quiet_on_a_shared_home():
    for version in ("2.1.0", "2.1.0.dev20230601", "3.1.0"):
        snap = make_snapshot(host={"triton_cache": HOME_ON_NFS}, packages={"triton": version}, gpus=_gpus((8, 0)))
        assert _arch(snap) == [], version


def test_old_triton_with_one_architecture_on_local_disk_is_quiet():
    snap = make_snapshot(host={"triton_cache": LOCAL}, packages={"triton": "2.0.0"}, gpus=_gpus((8, 0), (8, 0)))
    assert _arch(snap) == []


def test_cache_key_release_boundary_from_the_data_file():
    from ddpdoctor.facts.env import triton_cache_key_without_arch as lacks

    assert lacks({"triton": "2.0.0.post1"}) == "triton 2.0.0.post1"
    assert lacks({"pytorch-triton": "2.0.0+b8b470bc59"}) == "pytorch-triton 2.0.0+b8b470bc59"
    assert lacks({"pytorch-triton": "2.1.0+e6216047b8"}) is None
    assert lacks({"triton": "1.1.1"}) is None  # not read: nothing claimed
    assert lacks({"triton": "not-a-version"}) is None
