"""check28 (issue 26, round 23): the classes batches 110-117 lacked, each with a trigger and a quiet fixture.
Pure: snapshots are built by the factory over recorded facts; no process is started."""
from __future__ import annotations

from factory import findings_of, make_snapshot

from ddpdoctor.facts import gpu_versions

# -- PKG014 arm: an architecture torch.utils.cpp_extension of the installed torch does not know (its supported_arches
# per release: data/gpu_versions.json cpp_extension_arch_since); every CUDAExtension build stops with
# "ValueError: Unknown CUDA arch (X) or GPU not supported" --


def _gpus(cap=(8, 9), name="NVIDIA GeForce RTX 4090", n=2):
    return {"devices": [{"index": i, "name": name, "cuda_capability": list(cap)} for i in range(n)]}


def _snap(torch="1.12.1+cu116", cuda="11.6", env=None, kit="11.7.64", cap=(8, 0), name="NVIDIA A100-SXM4-80GB"):
    toolkit = {"home": "/usr/local/cuda", "from": "nvcc", "version": kit} if kit else {"home": None}
    return make_snapshot(env=env or {}, packages={"torch": torch, "torch_build": {"cuda": cuda, "hip": None},
                                                  "cuda_toolkit": toolkit},
                         gpus=_gpus(cap, name))


def _unknown(snap):
    return [f for f in findings_of(snap, "PKG014") if "cpp_extension does not know" in f.title
            or "cpp_extension does" in f.title]


def test_the_table_reads_each_release_and_expands_named_arches():
    rej = gpu_versions.cpp_extension_rejects
    assert rej("1.12.1+cu116", "5.2 6.0 6.1 7.0 7.5 8.0 8.6 9.0+PTX", []) == [("9.0+PTX", (2, 0))]
    assert rej("1.13.1", "Ampere;Hopper", []) == [("9.0+PTX", (2, 0))]  # Hopper -> 9.0+PTX
    assert rej("2.0.1", "8.9;9.0", []) == []
    assert rej("2.1.2", "9.0a", []) == [("9.0a", (2, 2))] and rej("2.2.0", "9.0a", []) == []
    assert rej("1.7.1+cu110", None, [(8, 9), (8, 9)]) == [("8.9", (2, 0))]
    assert rej("1.5.0", None, [(8, 0)]) == [("8.0", (1, 6))]
    assert rej("1.12.1", None, [(9, 0)]) == []  # unset list after no_clamp_through: not judged
    assert rej("1.7.1", None, [(8, 7)]) == []  # 8.7 has no row: not judged (check29: 8.6 has one since round 23)
    assert rej("0.4.1", "9.0", [(8, 9)]) == [] and rej("1.2.0", None, [(8, 0)]) == []  # before the list existed


def test_a_listed_arch_this_torch_does_not_know_is_a_warning_naming_it():
    [f] = _unknown(_snap(env={"TORCH_CUDA_ARCH_LIST": "5.2 6.0 6.1 7.0 7.5 8.0 8.6 9.0+PTX"}))
    assert f.severity == "warning"
    assert "TORCH_CUDA_ARCH_LIST" in f.title and "9.0+PTX" in f.title and "1.12.1" in f.title
    assert "Unknown CUDA arch (9.0+PTX)" in f.detail and "2.0" in f.detail
    assert "9.0" not in f.fix.split("#")[0].split("=")[1].split(";")[-1]  # the fix drops it
    assert "env:TORCH_CUDA_ARCH_LIST" in f.subjects


def test_an_unset_list_on_a_gpu_newer_than_torch_warns_where_a_toolkit_builds():
    [f] = _unknown(_snap(torch="1.7.1+cu110", cuda="11.0", kit="11.0.221", cap=(8, 9), name="NVIDIA GeForce RTX 4090"))
    assert f.severity == "warning" and "8.9" in f.title and "4090" in f.title and "sm_89" in f.title
    assert "gpu:0" in f.subjects and "torch>=2.0" in f.fix
    [g] = _unknown(_snap(torch="1.7.1+cu110", cuda="11.0", kit=None, cap=(8, 9), name="NVIDIA GeForce RTX 4090"))
    assert g.severity == "info"  # no toolkit, nothing builds: it matters only to a later build


def test_known_arches_and_unjudged_releases_are_quiet():
    assert _unknown(_snap(torch="2.0.1+cu118", cuda="11.8", env={"TORCH_CUDA_ARCH_LIST": "8.0;8.6;9.0+PTX"})) == []
    assert _unknown(_snap(env={"TORCH_CUDA_ARCH_LIST": "7.0;8.0+PTX"})) == []
    assert _unknown(_snap(torch="1.12.1+cu116", cap=(9, 0), name="NVIDIA H100 80GB HBM3")) == []  # clamp unknown
    assert _unknown(_snap(torch="2.1.0", cuda="12.1", kit="12.1.105", cap=(9, 0), name="NVIDIA H100")) == []
    assert _unknown(_snap(torch="1.12.1", cuda=None, env={"TORCH_CUDA_ARCH_LIST": "9.0"})) == []  # a CPU build


# -- GPU001: a launch command that counts the local GPUs itself and stops when there are none (data/launchers.json
# launcher_needs_local_gpu: the DeepSpeed runner without a hostfile, `torchrun --nproc-per-node gpu`) is a sign that
# GPUs were expected --

def _no_driver(argv: str, env=None):
    from ddpdoctor.facts.launch import parse_command, parse_program

    cmd = parse_command(argv.split()) or parse_program(argv.split())
    return make_snapshot(env=env or {}, packages={"torch": "1.7.0", "torch_build": {"cuda": "10.2", "hip": None}},
                         gpus={"unavailable": "no NVIDIA driver found (NVML library not loaded)"},
                         launch={"commands": [dict(cmd, depth=1)], "depth_read": 1})


def test_a_launcher_that_counts_local_gpus_makes_no_driver_a_warning_naming_its_error():
    [f] = findings_of(_no_driver("deepspeed train.py --deepspeed"), "GPU001")
    assert f.severity == "warning" and "deepspeed" in f.title
    assert "Unable to proceed, no GPU resources available" in f.title and "NVML" in f.title
    [g] = findings_of(_no_driver("torchrun --nproc-per-node gpu train.py"), "GPU001")
    assert g.severity == "warning" and "Cuda is not available." in g.title


def test_launches_that_do_not_count_local_gpus_leave_no_driver_an_info():
    for argv, env in (("deepspeed --hostfile hosts train.py", None),  # the hostfile is the pool
                      ("deepspeed train.py", {"DS_ACCELERATOR": "cpu"}),  # another accelerator
                      ("torchrun --nproc-per-node 2 train.py", None),  # a number: Gloo on the CPU works
                      ("python train.py", None)):
        [f] = findings_of(_no_driver(argv, env), "GPU001")
        assert f.severity == "info", argv
