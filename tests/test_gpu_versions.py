"""The GPU version tables as data (ddpdoctor/data/gpu_versions.json): every row names its source, the tables hold what
the checks held in code before, they are read once, and the checks judge by them (a changed row changes a verdict)."""
import json
import re

import pytest

from ddpdoctor.facts import gpu_versions
from factory import findings_of

from test_gpu_checks import build, fixture

HEX40 = re.compile(r"[0-9a-f]{40}")


def test_every_row_names_its_source():
    with open(gpu_versions.DATA, encoding="utf-8") as fh:
        tables = json.load(fh)["tables"]
    assert set(tables) == {"min_driver_of_cuda_major", "newest_arch_of_toolkit", "release_archs",
                           "rocm_wheel_target_since", "nccl_first_for_gpu_major", "windows_distributed_since",
                           "rocm_wheel_targets_current",  # round 18: the current build script's PYTORCH_ROCM_ARCH
                           "fp16_throughput", "tensor_cores_since",  # round 20: GPU037, the programming guide's table
                           "ptx_jit_needs_driver",  # round 20: GPU023, PTX JIT is not in minor-version compatibility
                           "rocm_device_files",  # round 20 (check21): GPU038, the device files a ROCm build opens
                           "consumer_p2p",  # round 20 (check21): GPU002, consumer P2P graded by the job
                           "last_toolkit_of_arch",  # round 21 (check23): GPU032, a GPU older than the toolkit
                           "rocm_user_kernel_window",  # round 21 (check23): GPU036, torch's ROCm vs the host's
                           "rocm_wheel_target_torch",  # round 21 (check24): GPU036, targets the wheels gained later
                           "torch_bundled_cudnn",  # round 21 (check24): PKG016, the cuDNN in torch/lib before 2.1
                           "conda_torch_build_string",  # round 22 (check25): PKG016, a conda torch's cuDNN
                           "nvrtc_arch_clamp",  # round 22 (check26): GPU032, torch's NVRTC and the GPU's arch
                           "cpp_extension_arch_since"}  # round 23 (check28): PKG014, cpp_extension's supported list
    for name, table in tables.items():
        assert table["rows"], name
        for row in table["rows"]:
            src = row["source"]
            if "url" in src:
                assert src["url"].startswith("https://") and src.get("where"), (name, row)
            else:
                assert src["repo"].count("/") == 1 and src["path"] and HEX40.fullmatch(src["commit"]), (name, row)


def test_the_tables_hold_what_the_checks_held_in_code():
    assert gpu_versions.min_driver_of_cuda_major() == {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}
    assert gpu_versions.newest_arch_of_toolkit() == ((13, 1, 121), (12, 8, 120), (11, 8, 90), (11, 1, 86),
                                                     (11, 0, 80), (10, 0, 75), (9, 0, 72), (8, 0, 62), (7, 0, 53))
    assert gpu_versions.release_archs()[(12, 6)] == {"x86_64": {50, 60, 70, 75, 80, 86, 90}, "aarch64": {80, 90}}
    assert gpu_versions.release_archs()[(13, 0)]["aarch64"] == {80, 90, 100, 110, 120}
    assert gpu_versions.rocm_wheel_target_since() == {"gfx900": (0, 0), "gfx906": (0, 0), "gfx908": (0, 0),
                                                      "gfx90a": (4, 3), "gfx1030": (4, 3), "gfx1100": (5, 5),
                                                      "gfx942": (6, 0)}
    assert gpu_versions.nccl_first_for_gpu_major() == {9: (2, 15, 1), 10: (2, 25, 1), 12: (2, 25, 1), 11: (2, 27, 5)}
    assert gpu_versions.windows_distributed_since() == (1, 7)
    assert {"gfx900", "gfx942", "gfx1100", "gfx1201"} <= gpu_versions.rocm_wheel_targets_ever()
    assert not {"gfx803", "gfx90c", "gfx1031", "gfx1032"} & gpu_versions.rocm_wheel_targets_ever()
    assert gpu_versions.newest_arch((12, 4)) == 90 and gpu_versions.newest_arch((9, 2)) == 72 and gpu_versions.newest_arch((6, 5)) is None


def test_read_once():
    assert gpu_versions.tables() is gpu_versions.tables()
    assert gpu_versions.release_archs() is gpu_versions.release_archs()


@pytest.mark.parametrize("text, want", [("1.7.0+cu101", (1, 7, 0)), ("1.10.2", (1, 10, 2)), ("2.1.0a0+git12ab", (2, 1, 0)),
                                        ("1.13.0rc1", (1, 13, 0)), ("2.13", (2, 13)), (None, ()), ("garbage", ())])
def test_release_is_the_one_parser(text, want):
    assert gpu_versions.release(text) == want


def test_the_checks_judge_by_the_data(monkeypatch):
    snap = lambda: fixture("dgx-a100-8x-nvswitch", edit=build("12.1", "11.4", "470.239.06"))  # noqa: E731
    assert "525.60.13" in findings_of(snap(), "GPU023")[0].detail
    moved = {11: "450.80.02", 12: "999.1.2", 13: "580.65.06"}
    monkeypatch.setattr(gpu_versions, "min_driver_of_cuda_major", lambda: moved)
    assert "999.1.2" in findings_of(snap(), "GPU023")[0].detail
