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
    assert f.severity == "error" and f"compute capability {cc[0]}.{cc[1]}" in f.title
    assert f.evidence["last_toolkit"] == last and "no longer supports this GPU" in f.detail


@pytest.mark.parametrize("name, cc, version, cuda", [
    ("GeForce GT 630", (2, 1), "0.1.12", "8.0"),             # the last toolkit that builds for Fermi
    ("Tesla K80", (3, 7), "1.12.1+cu113", "11.3"),            # CUDA 11 still builds sm_37
    ("Tesla T4", (7, 5), "2.9.0+cu130", "13.0"),              # Turing is kept by CUDA 13
])
def test_gpu032_quiet_where_the_toolkit_still_builds_for_the_gpu(name, cc, version, cuda):
    snap = make_snapshot(packages=_torch(version, cuda), gpus=_gpus(name, cc))
    assert [f for f in findings_of(snap, "GPU032") if "cannot build code" in f.title] == []
