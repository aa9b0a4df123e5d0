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
