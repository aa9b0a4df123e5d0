"""check30 (issue 26, round 24): PKG/GPU classes left by batches 118-121, each with a trigger and a quiet fixture.
Pure: snapshots are built by the factory over recorded facts; no process is started."""
from __future__ import annotations

from factory import findings_of, make_snapshot

from ddpdoctor.facts.launch import parse_command


def _gpus(n, name="NVIDIA A100-SXM4-80GB", cap=(8, 0)):
    return {"devices": [{"index": i, "name": name, "cuda_capability": list(cap)} for i in range(n)]}


def _launched(argv, n, env=None, **kw):
    cmd = dict(parse_command(argv), depth=1)
    return make_snapshot(env=env or {}, gpus=_gpus(n), launch={"commands": [cmd], "depth_read": 1}, **kw)


# -- GPU016: fewer ranks than GPUs names the launch option that set the count, and fixes it in that launcher --

def test_deepspeed_num_gpus_below_the_gpus_names_num_gpus_and_fixes_with_it():
    [f] = findings_of(_launched(["deepspeed", "--num_gpus=1", "train.py"], 5), "GPU016")
    assert f.severity == "info" and "deepspeed --num_gpus 1" in f.title
    assert f.fix.startswith("deepspeed --num_gpus 5") and "torchrun" not in f.fix


def test_accelerate_over_two_machines_fixes_with_the_total_count():
    argv = ["accelerate", "launch", "--multi_gpu", "--num_processes", "4", "--num_machines", "2", "train.py"]
    [f] = findings_of(_launched(argv, 4), "GPU016")
    assert "--num_processes 4 --num_machines 2" in f.title
    assert f.fix.startswith("accelerate launch --num_processes 8 --num_machines 2")


def test_deepspeed_num_gpus_equal_to_the_gpus_is_quiet():
    assert findings_of(_launched(["deepspeed", "--num_gpus=5", "train.py"], 5), "GPU016") == []


# -- GPU032: vLLM's V1 engine (0.8.0 on) compiles with torch.compile by default: Triton needs libcuda.so
# (data/triton_libraries.json compile_by_default, first) --

def _vllm(version, env=None):
    return make_snapshot(env=env or {}, packages={"torch": "2.6.0+cu124", "triton": "3.2.0", "vllm": version,
                                                  "torch_build": {"cuda": "12.4", "hip": None}},
                         gpus=_gpus(1, "NVIDIA GeForce RTX 4090", (8, 9)),
                         cuda={"library": "/lib/x86_64-linux-gnu/libcuda.so.1", "unversioned_link": False})


def _libcuda(snap):
    return [f for f in findings_of(snap, "GPU032") if "libcuda.so" in f.title]


def test_vllm_08_without_an_unversioned_libcuda_warns_and_names_vllm():
    [f] = _libcuda(_vllm("0.8.3"))
    assert f.severity == "warning" and "vLLM 0.8.3" in f.title and "pkg:vllm" in f.subjects
    assert "ln -s /lib/x86_64-linux-gnu/libcuda.so.1" in f.fix


def test_vllm_before_08_or_with_v1_off_is_quiet():
    assert _libcuda(_vllm("0.7.3")) == []
    assert _libcuda(_vllm("0.8.3", env={"VLLM_USE_V1": "0"})) == []


# -- PKG010: an NCCL built with CUDA < 11.3 (the nvidia-nccl-cu11 wheels) under a launch that captures NCCL in a CUDA
# graph (vLLM -tp > 1 without --enforce-eager): data/known_defects.json nccl_distribution, needs_nccl_graph_capture --

def _served(wheel="nvidia-nccl-cu11", version="2.19.3", extra=(), tp="2"):
    argv = ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "m", "--tensor-parallel-size", tp,
            *extra]
    cmd = dict(parse_command(argv), depth=1)
    return make_snapshot(packages={"torch": "2.2.0+cu118", wheel: version, "vllm": "0.3.2",
                                   "torch_build": {"cuda": "11.8", "hip": None}},
                         gpus=_gpus(2), launch={"commands": [cmd], "depth_read": 1})


def _capture(snap):
    return [f for f in findings_of(snap, "PKG010") if "nccl-cu11-wheel" in str(f.evidence.get("defect"))]


def test_the_enforce_eager_option_is_recorded():
    assert parse_command(["vllm", "serve", "m", "-tp", "2", "--enforce-eager"])["serving"]["eager"] is True
    assert parse_command(["vllm", "serve", "m", "-tp", "2"])["serving"]["eager"] is False


def test_cu11_nccl_wheel_under_vllm_tensor_parallel_graphs_warns():
    [f] = _capture(_served())
    assert f.severity == "warning" and "2.19.3" in f.title and "captured in a graph" in f.title
    assert "--enforce-eager" in f.fix and "strongstream.cc" in f.detail


def test_eager_serving_a_cu12_wheel_or_one_gpu_is_quiet():
    assert _capture(_served(extra=("--enforce-eager",))) == []
    assert _capture(_served(wheel="nvidia-nccl-cu12")) == []
    assert _capture(_served(tp="1")) == []
    assert _capture(_served(version="2.18.1")) == []


# -- GPU016: a Hugging Face Trainer program started as one plain python process over several visible GPUs
# (facts.launch script_trainer_args, data/trainer_args.json): DataParallel, not DDP --

_WHISPER = ["python", "run_speech_recognition_seq2seq.py", "--model_name_or_path", "openai/whisper-small",
            "--do_train", "--per_device_train_batch_size=16", "--output_dir", "./out"]


def _plain(argv, n, env=None):
    from ddpdoctor.facts.launch import parse_program

    cmd = dict(parse_program(argv), depth=1)
    return make_snapshot(env=env or {}, gpus=_gpus(n), launch={"commands": [cmd], "depth_read": 1})


def test_trainer_options_are_recorded_by_name_only():
    from ddpdoctor.facts.launch import parse_program

    assert parse_program(_WHISPER)["script_trainer_args"] == ["--do_train", "--per_device_train_batch_size"]
    assert "script_trainer_args" not in parse_program(["python", "train.py", "--output_dir", "x", "--lr", "1e-4"])


def test_a_trainer_script_under_plain_python_on_two_gpus_warns_and_fixes_with_torchrun():
    [f] = findings_of(_plain(_WHISPER, 2), "GPU016")
    assert f.severity == "warning" and "DataParallel" in f.title and "torchrun" in f.title
    assert f.fix.startswith("torchrun --nproc-per-node 2 run_speech_recognition_seq2seq.py")
    assert {"gpu:0", "gpu:1"} <= set(f.subjects)


def test_one_gpu_one_visible_gpu_or_a_plain_argparse_script_is_quiet():
    assert findings_of(_plain(_WHISPER, 1), "GPU016") == []
    assert findings_of(_plain(_WHISPER, 2, env={"CUDA_VISIBLE_DEVICES": "0"}), "GPU016") == []
    assert findings_of(_plain(["python", "train.py", "--output_dir", "x"], 2), "GPU016") == []


# -- PKG010: NCCL 2.18.1-2.18.5 and 2.19.1 connect peers through a pointer copied with cudaMemcpyAsync and used with
# no sync (src/transport.cc ncclTransportP2pSetup; fixed by 43654587 in 2.18.6 / 2.19.3): nccl_except, min_ranks --

_TWO_RANKS = {"TORCHELASTIC_RUN_ID": "none", "RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0",
              "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}


def _nccl(version, env=_TWO_RANKS):
    return make_snapshot(env=env, packages={"torch": "2.1.0+cu121", "nvidia-nccl-cu12": version,
                                            "torch_build": {"cuda": "12.1", "hip": None}}, gpus=_gpus(2))


def _race(snap):
    return [f for f in findings_of(snap, "PKG010") if "memcpy-race" in str(f.evidence.get("defect"))]


def test_nccl_2181_and_2191_under_two_ranks_warn_and_name_the_fixed_releases():
    [f] = _race(_nccl("2.18.1"))
    assert f.severity == "warning" and "NCCL 2.18.1" in f.title and "2.18.6" in f.fix
    assert "src/transport.cc" in f.detail and "pkg:nccl" in f.subjects
    assert len(_race(_nccl("2.19.1"))) == 1


def test_the_fixed_patch_releases_an_older_nccl_and_one_rank_are_quiet():
    assert _race(_nccl("2.18.6")) == [] and _race(_nccl("2.19.3")) == [] and _race(_nccl("2.17.1")) == []
    assert _race(_nccl("2.18.1", env={})) == []


# -- GPU032: PyTorch's CUDA 9.2-10.1 wheels from torch 1.3.1 on start at sm_37 (pytorch/builder manywheel/build.sh
# @2d91d533; 2aac90bd moved 3.5 to 3.7): data/gpu_versions.json release_archs torch_first --

def _k40(torch, cuda="10.1", name="Tesla K40m", cap=(3, 5)):
    return make_snapshot(packages={"torch": torch, "torch_build": {"cuda": cuda, "hip": None}},
                         gpus=_gpus(1, name, cap))


def test_a_k40_under_torch_131_cu101_warns_and_names_its_capability():
    [f] = [f for f in findings_of(_k40("1.3.1"), "GPU032") if "likely has no kernels" in f.title]
    assert f.severity == "warning" and "cuda capability 3.5" in f.title and "sm_37" in f.title


def test_a_k40_under_torch_130_and_a_k80_under_131_are_quiet():
    assert [f for f in findings_of(_k40("1.3.0"), "GPU032") if "likely has no kernels" in f.title] == []
    assert [f for f in findings_of(_k40("1.3.1", name="Tesla K80", cap=(3, 7)), "GPU032")
            if "likely has no kernels" in f.title] == []


def _old(torch, cuda, name, cap):
    found = findings_of(_k40(torch, cuda=cuda, name=name, cap=cap), "GPU032")
    return [f for f in found if "likely has no kernels" in f.title]


def test_torch_031_wheels_have_nothing_for_a_50_gpu_in_their_gap_and_040_has():
    # 0.3.1's "3.5;5.2+PTX": no sm_50 cubin, and compute_52 PTX does not JIT down to 5.0 (builder d3be5aa9)
    [f] = _old("0.3.1", "8.0", "GeForce GTX 960M", (5, 0))
    assert f.severity == "warning" and "cuda capability 5.0" in f.title
    assert _old("0.4.0", "8.0", "GeForce GTX 960M", (5, 0)) == []   # "3.5;5.0+PTX" again (44d9bfa6)


def test_a_fermi_gpu_under_torch_100_cu80_warns_and_an_unknown_release_takes_no_old_row():
    assert len(_old("1.0.0", "8.0", "GeForce GTX 670M", (2, 1))) == 1
    assert _old("custom-build", "8.0", "GeForce GTX 670M", (2, 1)) == []


# -- GPU032: a launch of a compile-by-default library's own entry point (python -m nnunetv2.run.run_training, the
# nnUNetv2_train console script: data/triton_libraries.json modules/commands) counts as the library, version unknown --

def _module_launch(argv, cap=(6, 1), versions=None):
    from ddpdoctor.facts.launch import parse_program

    cmd = dict(parse_program(argv), depth=1)
    return make_snapshot(packages={"torch": "2.3.1+cu121", "triton": "2.3.1", **(versions or {}),
                                   "torch_build": {"cuda": "12.1", "hip": None}},
                         gpus=_gpus(1, "NVIDIA GeForce GTX 1080 Ti", cap), launch={"commands": [cmd], "depth_read": 1})


def _too_old_for_triton(snap):
    return [f for f in findings_of(snap, "GPU032") if "Triton, its kernel compiler, has no support" in f.title]


def test_python_m_module_is_recorded_and_nnunet_training_on_a_61_gpu_is_an_error():
    from ddpdoctor.facts.launch import parse_program

    argv = ["python", "-m", "nnunetv2.run.run_training", "Dataset001", "3d_fullres", "0"]
    assert parse_program(argv)["module"] == "nnunetv2.run.run_training"
    [f] = _too_old_for_triton(_module_launch(argv))
    assert f.severity == "error" and "nnU-Net v2 (python -m nnunetv2.run.run_training)" in f.title


def test_another_module_a_70_gpu_or_a_floored_library_of_unknown_release_is_quiet():
    assert _too_old_for_triton(_module_launch(["python", "-m", "mypkg.train"])) == []
    assert _too_old_for_triton(_module_launch(["python", "-m", "nnunetv2.run.run_training"], cap=(7, 0))) == []
    # vLLM's row has a `first` release: a launch without its recorded version does not hold
    assert _too_old_for_triton(_module_launch(["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"])) == []
