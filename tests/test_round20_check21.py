"""check21 (issue 26, round 20, second wave): classes left by check20, each with a trigger and a quiet fixture.
Pure: snapshots are built by the factory (or gathered from a fake /dev and /sys tree); no process is started."""
from __future__ import annotations

import os

import pytest

from factory import findings_of, make_snapshot

from ddpdoctor.gather import Sources

ROCM = {"torch": "2.5.1+rocm6.2", "torch_build": {"hip": "6.2.41133", "cuda": None}}
NO_NVML = {"unavailable": "NVML library not found", "reason": "library_not_found"}


def _hints(**kw):
    base = {"dev_nvidia0": False, "proc_driver_nvidia": False, "dev_kfd": True, "dev_kfd_rw": True,
            "dev_dri_render": True, "dev_dri_render_rw": True, "amdgpu_module": True}
    base.update(kw)
    return base


def _rocm_snap(host=None, amd=("gfx90a",), **hints):
    return make_snapshot(packages=ROCM, host=host or {}, gpus=dict(NO_NVML, hints=_hints(**hints)),
                         pci={"gpus": {}, "amd_gpus": [{"node": i + 1, "gfx_target_version": 90010, "gfx": g,
                                                        "device_id": 29704} for i, g in enumerate(amd)]})


# ------------------------------------------------ GPU038: a ROCm build that can open no AMD GPU (rocm_device_files)

def test_device_hints_read_the_rocm_device_files(tmp_path):
    from ddpdoctor.gather.gpus import device_hints

    (tmp_path / "dev" / "dri").mkdir(parents=True)
    (tmp_path / "dev" / "dri" / "card0").write_text("")
    got = device_hints(Sources(environ={}, root=str(tmp_path)))
    assert got["dev_kfd"] is False and got["dev_dri_render"] is False and got["amdgpu_module"] is False
    (tmp_path / "dev" / "kfd").write_text("")
    (tmp_path / "dev" / "dri" / "renderD128").write_text("")
    (tmp_path / "sys" / "module" / "amdgpu").mkdir(parents=True)
    got = device_hints(Sources(environ={}, root=str(tmp_path)))
    assert got["dev_kfd"] and got["dev_kfd_rw"] and got["dev_dri_render"] and got["dev_dri_render_rw"]
    assert got["amdgpu_module"] is True


@pytest.mark.skipif(os.geteuid() == 0, reason="root opens any file: the mode cannot deny it")
def test_device_hints_see_a_kfd_this_user_cannot_open(tmp_path):
    from ddpdoctor.gather.gpus import device_hints

    (tmp_path / "dev" / "dri").mkdir(parents=True)
    (tmp_path / "dev" / "kfd").write_text("")
    (tmp_path / "dev" / "kfd").chmod(0o440)
    got = device_hints(Sources(environ={}, root=str(tmp_path)))
    assert got["dev_kfd"] is True and got["dev_kfd_rw"] is False


def test_gpu038_container_without_the_device_options():
    """Trigger: the host's driver lists an MI250 in sysfs, the container has no /dev/kfd nor render node."""
    snap = _rocm_snap(host={"container": "docker"}, dev_kfd=False, dev_kfd_rw=False, dev_dri_render=False,
                      dev_dri_render_rw=False)
    [f] = findings_of(snap, "GPU038")
    assert f.severity == "warning" and "/dev/kfd" in f.title and "docker container" in f.title
    assert "--device=/dev/kfd --device=/dev/dri" in f.fix and "gfx90a" in f.detail
    assert "path:/dev/kfd" in f.subjects
    assert findings_of(snap, "GPU001") == []  # not "as expected with AMD GPUs"


def test_gpu038_kfd_not_openable_names_the_groups():
    snap = _rocm_snap(dev_kfd_rw=False)
    [f] = findings_of(snap, "GPU038")
    assert "cannot open /dev/kfd" in f.title and "usermod -aG render,video" in f.fix
    assert f.evidence["not_openable"] == ["/dev/kfd"]


def test_gpu038_no_driver_is_a_marked_guess():
    snap = _rocm_snap(amd=(), dev_kfd=False, dev_kfd_rw=False, dev_dri_render=False, dev_dri_render_rw=False,
                      amdgpu_module=False)
    [f] = findings_of(snap, "GPU038")
    assert "no amdgpu driver" in f.title and "a guess" in f.detail


def test_gpu038_quiet_when_the_devices_open_or_not_rocm_or_not_recorded():
    """Quiet: every device file there and openable (GPU001's ROCm note stays); a CUDA build; hints not recorded."""
    snap = _rocm_snap()
    assert findings_of(snap, "GPU038") == []
    assert [f.severity for f in findings_of(snap, "GPU001")] == ["info"]
    cuda = make_snapshot(packages={"torch": "2.5.1+cu124", "torch_build": {"cuda": "12.4", "hip": None}},
                         gpus=dict(NO_NVML, hints=_hints(dev_kfd=False, dev_dri_render=False)))
    assert findings_of(cuda, "GPU038") == []
    old = make_snapshot(packages=ROCM, gpus=dict(NO_NVML, hints={"dev_nvidia0": False, "proc_driver_nvidia": False}))
    assert findings_of(old, "GPU038") == []
