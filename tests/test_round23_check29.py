"""check29 (issue 26, round 23): classes left by check28, each with a trigger and a quiet fixture.
Pure: snapshots are built by the factory over recorded facts; no process is started."""
from __future__ import annotations

from factory import findings_of, make_snapshot

from ddpdoctor.facts import gpu_versions

# -- PKG014 arm: the first torch release whose cpp_extension knows 8.6 (1.8), 10.0 (2.6) and 12.0 (2.7), and the
# named arches as each release expanded them (data/gpu_versions.json cpp_extension_arch_since: rows,
# named_arches_before) --


def _snap(torch, cuda, env=None, kit="11.1.105", cap=(8, 6), name="NVIDIA GeForce RTX 3090"):
    toolkit = {"home": "/usr/local/cuda", "from": "nvcc", "version": kit} if kit else {"home": None}
    return make_snapshot(env=env or {}, packages={"torch": torch, "torch_build": {"cuda": cuda, "hip": None},
                                                  "cuda_toolkit": toolkit},
                         gpus={"devices": [{"index": 0, "name": name, "cuda_capability": list(cap)}]})


def _unknown(snap):
    return [f for f in findings_of(snap, "PKG014") if "cpp_extension does" in f.title]


def test_rows_for_86_100_120_are_read_by_release():
    rej = gpu_versions.cpp_extension_rejects
    assert rej("1.7.1+cu110", None, [(8, 6)]) == [("8.6", (1, 8))]
    assert rej("1.8.1+cu111", None, [(8, 6)]) == []
    assert rej("2.5.1", "10.0", []) == [("10.0", (2, 6))] and rej("2.6.0", "10.0", []) == []
    assert rej("2.6.0", "9.0;12.0+PTX", []) == [("12.0+PTX", (2, 7))] and rej("2.7.0", "12.0", []) == []


def test_named_arches_expand_as_that_release_did():
    rej = gpu_versions.cpp_extension_rejects
    assert rej("2.6.0", "Blackwell", []) == []            # 2.6's Blackwell was 10.0+PTX
    assert rej("2.5.1", "Blackwell", []) == [("10.0+PTX", (2, 6))]
    assert rej("1.7.1", "Ampere", []) == []               # 1.7's Ampere was 8.0+PTX
    assert rej("1.5.0", "Ampere", []) == [("8.0+PTX", (1, 6))]


def test_an_rtx_3090_under_torch_17_warns_and_names_the_release_that_knows_it():
    [f] = _unknown(_snap("1.7.1+cu110", "11.0", kit="11.0.221"))
    assert f.severity == "warning" and "8.6" in f.title and "3090" in f.title
    assert "torch>=1.8" in f.fix and "gpu:0" in f.subjects


def test_a_listed_120_under_torch_26_warns_and_27_is_quiet():
    env = {"TORCH_CUDA_ARCH_LIST": "9.0;12.0"}
    [f] = _unknown(_snap("2.6.0+cu126", "12.6", env=env, kit="12.8.61", cap=(12, 0), name="NVIDIA GeForce RTX 5090"))
    assert f.severity == "warning" and "12.0" in f.title and "TORCH_CUDA_ARCH_LIST" in f.title
    assert _unknown(_snap("2.7.0+cu128", "12.8", env=env, kit="12.8.61", cap=(12, 0),
                          name="NVIDIA GeForce RTX 5090")) == []


def test_an_rtx_3090_under_torch_18_is_quiet():
    assert _unknown(_snap("1.8.1+cu111", "11.1")) == []


# -- PKG020: an mmcv without its compiled ops under a training script that imports mmcv.ops itself
# (lint.scriptfacts mmcv_ops), not only under an OpenMMLab package that does --

def _mmcv(ops=False, asks=None, version="1.5.0"):
    sections = {"lint": {"unavailable": "no script", "facts": asks}} if asks is not None else {}
    return make_snapshot(packages={"mmcv": version, "torch": "1.8.1+cu111",
                                   "mmcv_build": {"ops": ops, "dir": "/env/lib/python3.8/site-packages/mmcv"}},
                         **sections)


def test_the_script_import_of_mmcv_ops_is_read():
    import ast

    from ddpdoctor.lint.scriptfacts import requests_of

    def read(text):
        return [e["what"] for e in requests_of(ast.parse(text), "net/model.py")["mmcv_ops"]]

    assert read("from mmcv.ops import DeformConv2d, ModulatedDeformConv2d\n") == [
        "from mmcv.ops import DeformConv2d, ModulatedDeformConv2d"]
    assert read("import mmcv.ops.nms as nms\n") == ["import mmcv.ops.nms"]
    assert read("from mmcv import ops\n") == ["from mmcv import ops"]
    # mmcv's pure-Python parts, another package's ops, the project's own relative package: not mmcv.ops
    assert read("import mmcv\nfrom mmcv import Config\nfrom mmdet.ops import nms\nfrom .mmcv.ops import x\n") == []


def test_mmcv_without_ops_under_a_script_importing_mmcv_ops_warns():
    asks = {"mmcv_ops": [{"path": "net/model.py", "line": 3, "what": "from mmcv.ops import DeformConv2d",
                          "package": "mmcv"}]}
    [f] = findings_of(_mmcv(asks=asks), "PKG020")
    assert f.severity == "warning" and "mmcv 1.5.0 has no compiled ops" in f.title and "net/model.py:3" in f.title
    assert "mmcv-full" in f.fix


def test_mmcv_without_ops_and_no_user_of_mmcv_ops_is_quiet():
    assert findings_of(_mmcv(), "PKG020") == []                       # nothing read imports mmcv.ops
    assert findings_of(_mmcv(asks={"mmcv_ops": []}), "PKG020") == []  # a script read that does not
    asks = {"mmcv_ops": [{"path": "train.py", "line": 1, "what": "from mmcv import ops", "package": "mmcv"}]}
    assert findings_of(_mmcv(ops=True, asks=asks), "PKG020") == []     # the ops are there


# -- PKG010 import-time defects of Windows wheels (data/known_defects.json `stage: import`: torch 2.4.0's fbgemm.dll
# without libomp140.x86_64.dll, fixed in 2.4.1; TheRock ROCm wheels dated before ROCm/TheRock#1520), and PKG005's
# plain no-NCCL warning ranked after them (root cause first) --

def _windows(torch="2.4.0+cu124", cuda="12.4", hip=None, gpus=1):
    devices = [{"index": i, "name": "NVIDIA GeForce RTX 4090", "cuda_capability": [8, 9]} for i in range(gpus)]
    return make_snapshot(host={"os": "Windows", "platform": "Windows-11-10.0.22631-SP0", "kernel": "10"},
                         packages={"torch": torch, "torch_build": {"cuda": cuda, "hip": hip}},
                         gpus={"devices": devices})


def _fbgemm(snap):
    return [f for f in findings_of(snap, "PKG010") if "fbgemm.dll" in f.title]


def test_torch_240_on_windows_names_the_fbgemm_import_failure_and_ranks_no_nccl_after_it():
    [f] = _fbgemm(_windows())
    assert f.severity == "warning" and "2.4.0" in f.title and "libomp140" in f.title
    assert "2.4.1" in f.fix and f.evidence["defect"] == "torch-2.4.0-windows-fbgemm-libomp140"
    [nccl] = findings_of(_windows(), "PKG005")
    assert nccl.severity == "info" and "Second to PKG010" in nccl.detail


def test_torch_241_on_windows_and_240_on_linux_are_quiet_and_no_nccl_keeps_its_warning():
    assert _fbgemm(_windows(torch="2.4.1+cu124")) == []
    linux = make_snapshot(packages={"torch": "2.4.0+cu124", "torch_build": {"cuda": "12.4", "hip": None}})
    assert _fbgemm(linux) == []
    [nccl] = findings_of(_windows(torch="2.4.1+cu124"), "PKG005")
    assert nccl.severity == "warning" and "Second to" not in nccl.detail


def test_therock_windows_wheels_are_judged_by_their_build_date():
    from ddpdoctor.facts.known_defects import stops_at_import

    old, new = "2.9.0a0+rocm7.0.0rc20250905", "2.9.0a0+rocm7.0.0rc20251002"
    assert [e["id"] for e in stops_at_import(old, "Windows")] == ["therock-rocm-windows-wheels-libomp140"]
    assert stops_at_import(new, "Windows") == [] and stops_at_import("2.9.0+rocm7.0.0", "Windows") == []
    assert stops_at_import(old, "Linux") == []
    [f] = _fbgemm(_windows(torch=old, cuda=None, hip="7.0", gpus=0))
    assert "MSVC" in f.fix and f.severity == "warning"
    # a certain finding keeps its rank: ROCm's Windows builds have no torch.distributed at all
    [d] = findings_of(_windows(torch=old, cuda=None, hip="7.0", gpus=0), "PKG005")
    assert d.severity == "warning" and "no torch.distributed" in d.title


# -- ENV020 arm: a launch run through sudo, whose rebuilt environment (sudo's plugins/sudoers/env.c rebuild_env:
# secure_path replaces PATH, env_reset keeps only env_keep) hides the CUDA toolkit this shell finds --

def test_sudo_prefix_is_parsed_as_the_command_it_runs():
    from ddpdoctor.facts.launch import parse_command, strip_sudo

    assert strip_sudo(["torchrun", "t.py"]) == (None, ["torchrun", "t.py"])
    facts, rest = strip_sudo(["sudo", "-u", "bob", "-E", "CUDA_HOME=/x", "python", "t.py"])
    assert facts == {"preserve_env": True, "assigns": ["CUDA_HOME"]} and rest == ["python", "t.py"]
    cmd = parse_command(["sudo", "torchrun", "--nproc-per-node", "2", "t.py"])
    assert cmd["launcher"] == "torchrun" and cmd["program"] == "t.py" and cmd["sudo"]["preserve_env"] is False
    assert parse_command(["sudo", "sh", "build.sh"])["program"] == "build.sh"
    assert "sudo" not in parse_command(["torchrun", "t.py"]) and parse_command(["sh", "build.sh"]) is None


def _sudo_job(argv, kit_home="/usr/local/cuda-9.0", env=None, how="CUDA_HOME"):
    from ddpdoctor.facts.launch import parse_command, parse_program

    cmd = dict(parse_command(argv) or parse_program(argv), depth=0)
    kit = {"home": kit_home, "from": how, "version": "9.0.176"} if kit_home else {}
    return make_snapshot(env=env if env is not None else {"CUDA_HOME": "/usr/local/cuda", "LD_LIBRARY_PATH": "/usr/local/cuda/lib64"},
                         packages={"torch": "1.0.0", "torch_build": {"cuda": "9.0", "hip": None}, "cuda_toolkit": kit},
                         launch={"commands": [cmd], "depth_read": 0})


def _sudo_findings(snap):
    return [f for f in findings_of(snap, "ENV020") if "under sudo" in f.title]


def test_a_build_under_sudo_loses_the_toolkit_on_path_and_its_variables():
    [f] = _sudo_findings(_sudo_job(["sudo", "sh", "build.sh"]))
    assert f.severity == "warning" and "nvcc" in f.title and "/usr/local/cuda-9.0/bin" in f.title
    assert "CUDA_HOME" in f.title and "LD_LIBRARY_PATH" in f.title and "PATH" in f.subjects
    assert "secure_path" in f.detail and "sudo env" in f.fix
    # -E keeps CUDA_HOME, but never PATH under secure_path nor LD_* (sudo's bad-variable table)
    [e] = _sudo_findings(_sudo_job(["sudo", "-E", "python", "setup.py", "build"]))
    assert "CUDA_HOME" not in e.title and "LD_LIBRARY_PATH" in e.title and "nvcc" in e.title


def test_no_sudo_a_system_toolkit_or_no_toolkit_is_quiet():
    assert _sudo_findings(_sudo_job(["python", "setup.py", "build"])) == []
    assert _sudo_findings(_sudo_job(["sudo", "python", "t.py"], kit_home="/usr", how="nvcc on PATH")) == []
    assert _sudo_findings(_sudo_job(["sudo", "python", "t.py"], kit_home=None)) == []


def test_the_gathered_parent_chain_keeps_sudo_as_a_fact_of_the_launch_it_runs(tmp_path):
    from ddpdoctor.gather import Sources
    from ddpdoctor.gather.launch import launch_commands

    def proc(pid, ppid, argv):
        d = tmp_path / "proc" / pid
        d.mkdir(parents=True)
        (d / "stat").write_text(f"{pid} (x) S {ppid} 1 1 0")
        (d / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")

    proc("self", "300", ["python", "-m", "ddpdoctor", "check"])
    proc("300", "301", ["/usr/bin/python3", "-u", "-m", "torch.distributed.run", "--nproc-per-node", "2", "t.py"])
    proc("301", "302", ["sudo", "-E", "torchrun", "--nproc-per-node", "2", "t.py"])
    proc("302", "1", ["sudo", "bash"])  # a sudo shell above: not a launch
    got = launch_commands(Sources(environ={}, root=str(tmp_path)))["commands"]
    assert len(got) == 1 and got[0]["launcher"] == "torchrun" and got[0]["sudo"]["preserve_env"] is True


# -- PKG014 arm: CUDA_HOME / CUDA_PATH that is not one toolkit directory (cpp_extension runs <it>/bin/nvcc) --

def _home(home, how="CUDA_HOME", nvcc=None, os_name="Linux"):
    kit = {"home": home, "from": how, "version": None}
    if nvcc is not None:
        kit["nvcc"] = nvcc
    return make_snapshot(env={how: home}, host={"os": os_name},
                         packages={"torch": "1.7.1+cu110", "torch_build": {"cuda": "11.0", "hip": None},
                                   "cuda_toolkit": kit})


def _not_toolkit(snap):
    return [f for f in findings_of(snap, "PKG014") if "is not a CUDA toolkit directory" in f.title]


def test_a_path_style_cuda_home_or_one_without_nvcc_warns():
    [f] = _not_toolkit(_home(":/usr/local/cuda-11.0:/usr/local/cuda-11.0"))
    assert f.severity == "warning" and "CUDA_HOME" in f.subjects and "list" in f.title
    assert f.fix.startswith("export CUDA_HOME=/usr/local/cuda-11.0")
    [g] = _not_toolkit(_home("/opt/cuda-empty", nvcc=False))
    assert "no bin/nvcc under /opt/cuda-empty" in g.detail


def test_a_real_toolkit_directory_and_a_windows_drive_path_are_quiet():
    assert _not_toolkit(_home("/usr/local/cuda-11.0", nvcc=True)) == []
    assert _not_toolkit(_home("/usr/local/cuda-11.0")) == []  # an older snapshot: nvcc not recorded, not a list
    assert _not_toolkit(_home(r"C:\Program Files\NVIDIA GPU Computing Toolkit\CUDA\v12.0", how="CUDA_PATH",
                              os_name="Windows")) == []


def test_the_gatherer_records_whether_bin_nvcc_is_there(tmp_path):
    from ddpdoctor.gather import Sources
    from ddpdoctor.gather.packages import cuda_toolkit

    (tmp_path / "opt" / "cuda" / "bin").mkdir(parents=True)
    (tmp_path / "opt" / "cuda" / "bin" / "nvcc").write_text("")
    (tmp_path / "opt" / "empty").mkdir(parents=True)
    assert cuda_toolkit(Sources(environ={"CUDA_HOME": "/opt/cuda"}, root=str(tmp_path)))["nvcc"] is True
    assert cuda_toolkit(Sources(environ={"CUDA_HOME": "/opt/empty"}, root=str(tmp_path)))["nvcc"] is False


# -- PKG005: a ROCm build of torch on Windows told by its HIP version when its version has no '+rocm' part --

def test_a_windows_rocm_build_without_rocm_in_its_version_has_no_distributed():
    [f] = findings_of(_windows(torch="2.8.0", cuda=None, hip="7.0", gpus=0), "PKG005")
    assert f.severity == "warning" and "no torch.distributed" in f.title and "USE_DISTRIBUTED" in f.detail


def test_a_windows_cuda_build_and_a_linux_rocm_build_are_not_taken_for_it():
    assert [f for f in findings_of(_windows(torch="2.8.0", cuda="12.8"), "PKG005")
            if "no torch.distributed" in f.title] == []
    linux = make_snapshot(packages={"torch": "2.8.0", "torch_build": {"cuda": None, "hip": "7.0"}})
    assert findings_of(linux, "PKG005") == []


# -- SET001: a name cut short at an underscore, the start of exactly one catalogued name of its family --

def test_a_cut_short_name_is_reported_with_the_one_name_it_starts():
    from ddpdoctor.facts.settings import near_miss

    assert near_miss("CUDA_VISIBLE") == "CUDA_VISIBLE_DEVICES"
    [f] = findings_of(make_snapshot(env={"CUDA_VISIBLE": "0"}), "SET001")
    assert "did you mean CUDA_VISIBLE_DEVICES" in f.title and f.severity == "warning"


def test_a_start_several_names_share_or_a_known_name_is_quiet():
    from ddpdoctor.facts.settings import near_miss

    assert near_miss("CUDA_CACHE") is None  # CUDA_CACHE_DISABLE, _MAXSIZE, _PATH: which one is not known
    assert near_miss("CUDA_VISIBLE_DEVICES") is None
    assert findings_of(make_snapshot(env={"CUDA_VISIBLE_DEVICES": "0"}), "SET001") == []


# -- ENV001 arm: a DeepSpeed config handed to a program whose launch sets no rank variables (plain python; accelerate
# launch's simple launcher): deepspeed.init_distributed falls back to MPI discovery and imports mpi4py --

def _ds_job(argv, mpi4py="absent", env=None):
    from ddpdoctor.facts.launch import parse_command, parse_program

    cmd = dict(parse_command(argv) or parse_program(argv), depth=1)
    pk = {"deepspeed": "0.13.1", "torch": "2.1.2+cu121", "torch_build": {"cuda": "12.1", "hip": None}}
    if mpi4py != "absent":
        pk["mpi4py"] = mpi4py
    return make_snapshot(env=env or {}, packages=pk, launch={"commands": [cmd], "depth_read": 1})


def _mpi(snap):
    return [f for f in findings_of(snap, "ENV001") if "mpi4py" in f.title]


def test_deepspeed_under_a_launch_without_rank_variables_needs_mpi4py():
    [f] = _mpi(_ds_job(["accelerate", "launch", "-m", "pkg.train", "cfg.yml", "--deepspeed", "zero1.json"]))
    assert f.severity == "warning" and "RANK" in f.subjects and "simple launcher" in f.title
    assert "not recorded" in f.title and "--use_deepspeed" in f.fix
    [g] = _mpi(_ds_job(["python", "train.py", "--deepspeed", "--deepspeed_config", "ds.json"], mpi4py=None))
    assert "not installed" in g.title and "ds.json" in g.title


def test_a_launcher_that_sets_them_or_an_installed_mpi4py_is_quiet():
    assert _mpi(_ds_job(["accelerate", "launch", "--use_deepspeed", "train.py", "--deepspeed", "ds.json"])) == []
    assert _mpi(_ds_job(["accelerate", "launch", "--num_processes", "2", "train.py", "--deepspeed", "ds.json"])) == []
    assert _mpi(_ds_job(["python", "train.py", "--deepspeed", "ds.json"], mpi4py="3.1.5")) == []
    assert _mpi(_ds_job(["python", "train.py", "--lr", "1e-4"])) == []
    assert _mpi(_ds_job(["python", "train.py", "--deepspeed", "ds.json"],
                        env={"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500",
                             "LOCAL_RANK": "0", "TORCHELASTIC_RUN_ID": "x"})) == []


# -- GPU019: CUDA_VISIBLE_DEVICES copied from SLURM_JOB_GPUS (the node's indices) inside a job that sees only its
# own GPUs, numbered from 0: the copy is named as the cause, with SLURM's own value as the fix --

def _slurm_job(cvd, job_gpus="4,5,6,7"):
    devices = [{"index": i, "name": "NVIDIA H100 80GB HBM3", "cuda_capability": [9, 0], "uuid": f"GPU-{i:08d}-0000"}
               for i in range(4)]
    return make_snapshot(env={"CUDA_VISIBLE_DEVICES": cvd, "SLURM_JOB_GPUS": job_gpus, "SLURM_JOB_ID": "42"},
                         gpus={"count": 4, "devices": devices})


def test_visible_devices_copied_from_slurm_job_gpus_name_the_copy():
    [f] = findings_of(_slurm_job("4,5,6,7"), "GPU019")
    assert f.severity == "error" and "copied from SLURM_JOB_GPUS" in f.title
    assert "SLURM sets the job's own value" in f.fix and f.evidence["from_slurm_job_gpus"] is True


def test_another_missing_index_keeps_the_plain_wording():
    [f] = findings_of(_slurm_job("0,9", job_gpus="0,1"), "GPU019")
    assert "SLURM_JOB_GPUS" not in f.title and f.fix.startswith("nvidia-smi -L")
    assert findings_of(_slurm_job("0,1,2,3", job_gpus="0,1,2,3"), "GPU019") == []


# -- GPU032: Triton's compute-capability floor is data with its source (torch/utils/_triton.py has_triton) --

def test_the_triton_floor_is_read_from_data_with_its_source():
    import json
    import os
    import re

    from ddpdoctor.checks.gpu.driver import TRITON_MIN_CAPABILITY
    from ddpdoctor.facts import gpu_versions

    with open(os.path.join(os.path.dirname(gpu_versions.DATA), "triton_libraries.json"), encoding="utf-8") as fh:
        row = json.load(fh)["min_capability"]
    assert row["capability"] == [7, 0] and TRITON_MIN_CAPABILITY == 70
    assert row["source"]["path"] == "torch/utils/_triton.py" and re.fullmatch(r"[0-9a-f]{40}", row["source"]["commit"])


def _compiling(cap, name):
    lint = {"unavailable": "no script", "facts": {"compiles": [{"path": "train.py", "line": 9}]}}
    return make_snapshot(packages={"torch": "2.3.0+cu121", "torch_build": {"cuda": "12.1", "hip": None},
                                   "triton": "2.3.0"},
                         gpus={"devices": [{"index": 0, "name": name, "cuda_capability": list(cap)}]}, lint=lint)


def test_torch_compile_below_the_floor_is_an_error_and_at_it_is_quiet():
    [f] = [f for f in findings_of(_compiling((6, 1), "NVIDIA GeForce GTX 1080 Ti"), "GPU032") if "Triton" in f.title]
    assert f.severity == "error" and "sm_61" in f.title
    assert [f for f in findings_of(_compiling((7, 0), "Tesla V100-SXM2-16GB"), "GPU032")
            if "has no support for" in f.title] == []


def test_a_snapshot_that_saw_torch_import_has_no_import_time_defect():
    snap = _windows()
    snap.sections["torch"] = {"version": "2.4.0+cu124", "distributed_available": True, "nccl_available": False,
                              "gloo_available": True, "mpi_available": False}
    assert _fbgemm(snap) == []
    [nccl] = findings_of(snap, "PKG005")
    assert nccl.severity == "warning" and "Second to" not in nccl.detail
