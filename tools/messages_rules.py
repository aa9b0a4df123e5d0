"""The sources tools/mine_messages.py reads, and the curation rules that turn extracted messages into
catalogue entries (class, meaning, fix). Data, kept beside the script that applies it."""
from __future__ import annotations

import os

from tools.message_classes import ANCHORS_NOTE, CLASSES, HAND_ENTRIES  # noqa: F401 - re-exported for the miner
from tools.message_rules_list import RULES  # noqa: F401


def _m():
    import tools.mine_messages as m

    return m


def _torch_py(root):
    m = _m()
    base = os.path.join(root, "torch213")
    files = m.py_files(base, ["distributed/elastic", "distributed/distributed_c10d.py", "distributed/rendezvous.py",
                              "distributed/run.py", "distributed/launch.py", "distributed/utils.py",
                              "distributed/fsdp", "distributed/checkpoint", "distributed/constants.py",
                              "nn/parallel/distributed.py", "utils/data/dataloader.py", "utils/data/_utils",
                              "multiprocessing/spawn.py", "cuda/__init__.py", "cuda/memory.py",
                              "distributed/c10d_logger.py", "distributed/device_mesh.py"])
    out = list(m.python_messages(base, files, "pytorch/pytorch", "torch/"))
    out.extend(m.python_exception_classes(base, ["distributed/elastic/rendezvous/api.py"], "pytorch/pytorch", "torch/"))
    return out


def _torch_cpp(root, cuda):
    m = _m()
    libs = (("torch214/torch/lib/libtorch_cuda.so", "torch214/torch/lib/libc10_cuda.so", "torch214/torch/lib/libc10.so")
            if cuda else ("torch213/lib/libtorch_cpu.so", "torch213/lib/libtorch_python.so"))
    out = []
    for lib in libs:
        out.extend(m.binary_strings(os.path.join(root, lib), "pytorch/pytorch"))
    return out


def _nccl(root):
    m = _m()
    base = os.path.join(root, "NVIDIA+nccl")
    files = m.c_files(base, ["src"])
    out = list(m.c_messages(base, files, "NVIDIA/nccl", ("WARN",)))
    out.extend(m.c_return_strings(base, "src/init.cc", "NVIDIA/nccl", r"nccl\w+"))
    return out


def _deepspeed(root):
    m = _m()
    base = os.path.join(root, "deepspeedai+DeepSpeed")
    files = m.py_files(base, ["deepspeed/runtime", "deepspeed/launcher", "deepspeed/comm", "deepspeed/elasticity",
                              "deepspeed/utils", "deepspeed/accelerator", "deepspeed/checkpoint"])
    return m.python_messages(base, files, "deepspeedai/DeepSpeed")


def _accelerate(root):
    m = _m()
    base = os.path.join(root, "huggingface+accelerate")
    files = m.py_files(base, ["src/accelerate"])
    return m.python_messages(base, files, "huggingface/accelerate")


def _transformers(root):
    m = _m()
    base = os.path.join(root, "transformers")
    files = m.py_files(base, ["trainer.py", "training_args.py", "integrations/deepspeed.py", "integrations/fsdp.py",
                              "modeling_utils.py", "trainer_utils.py", "trainer_pt_utils.py"])
    return m.python_messages(base, files, "huggingface/transformers", "src/transformers/")


def _slurm(root):
    m = _m()
    base = os.path.join(root, "SchedMD+slurm")
    files = m.c_files(base, ["src/slurmd/slurmstepd", "src/srun", "src/plugins/task/cgroup", "src/plugins/cgroup",
                             "src/common/slurm_errno.c", "src/api/step_launch.c", "src/plugins/jobacct_gather"])
    out = list(m.c_messages(base, files, "SchedMD/slurm", ("error", "fatal", "info", "verbose", "debug")))
    return out


def _clr(root):
    m = _m()
    base = os.path.join(root, "ROCm+clr")
    return list(m.c_return_strings(base, "hipamd/src/hip_error.cpp", "ROCm/clr", r"hipError\w+"))


def _ray(root):
    m = _m()
    base = os.path.join(root, "ray")
    out = list(m.python_messages(base, m.py_files(base, ["ray/exceptions.py", "ray/train", "ray/_private/worker.py",
                                                         "ray/_private/memory_monitor.py"]), "ray-project/ray",
                                 "python/"))
    raylet = os.path.join(base, "ray/core/src/ray/raylet/raylet")
    out.extend(m.binary_strings(raylet, "ray-project/ray", min_len=16))
    return out


def _kernel(root, which):
    m = _m()
    base = os.path.join(root, "kernel")
    name = ("oom_kill.c.c797bc88.excerpt", "oom_kill.c.01017a22.excerpt")[which]
    out = []
    for c in m.c_messages(base, [name], "torvalds/linux", ("pr_err", "pr_info", "panic", "printk", "oom_kill_process")):
        c.path = "mm/oom_kill.c"
        c.line = None   # read from excerpts of the file: the symbol is the message, the line unknown
        out.append(c)
    return out


def _cpython(root):
    m = _m()
    base = os.path.join(root, "cpython")
    return m.python_messages(base, ["argparse.py", "multiprocessing/reduction.py", "multiprocessing/spawn.py",
                                    "multiprocessing/resource_tracker.py", "pickle.py"], "python/cpython", "Lib/")


def _gloo(root):
    m = _m()
    base = os.path.join(root, "gloo")
    files = ["gloo/transport/tcp/pair.cc", "gloo/transport/tcp/unbound_buffer.cc", "gloo/transport/tcp/device.cc"]
    return (list(m.c_call_messages(base, files, "pytorch/gloo", ("GLOO_ERROR_MSG", "signalException", "GLOO_ENFORCE",
                                                                  "GLOO_THROW_IO_EXCEPTION")))
            # the libuv transport (macOS, Windows): UV_ASSERT prints "[file:line] <call>: <uv_strerror>" and aborts
            + list(m.c_assert_messages(base, ["gloo/transport/uv/libuv.h"], "pytorch/gloo", "UV_ASSERT",
                                       "{name}: {reason}")))


def _libuv(root):
    m = _m()
    return list(m.c_table_strings(os.path.join(root, "libuv+libuv"), "include/uv.h", "libuv/libuv", "XX"))


def _nvidia_open(root):
    m = _m()
    base = os.path.join(root, "nvidia-open")
    out = []
    for rel in ("src/nvidia/arch/nvalloc/unix/src/osapi.c", "src/nvidia/arch/nvalloc/unix/src/osinit.c",
                "src/nvidia/src/kernel/gpu/rc/kernel_rc.c"):
        out.extend(m.c_literal_runs(base, rel, "NVIDIA/open-gpu-kernel-modules", r"fallen off the bus|^NVRM: Xid"))
    return out


SOURCES = [
    {"repo": "pytorch/pytorch", "commit": "cf30153c4c131c8164ee7798e5022d810682e2cb", "ref": "v2.13.0", "project": "torch",
     "how": "the installed torch 2.13.0 wheel: Python sources (ast), libtorch_cpu.so (strings, attributed to the "
            "nearest __FILE__ path)",
     "extract": lambda root: list(_torch_py(root)) + _torch_cpp(root, cuda=False)},
    {"repo": "pytorch/pytorch", "commit": "5c4886908584029761b579af026dcfb627c84070", "ref": "v2.14.1 (cu130 wheel)",
     "project": "torch",
     "how": "the torch 2.14.1 CUDA wheel's libtorch_cuda.so, libc10_cuda.so and libc10.so (ProcessGroupNCCL, the CUDA "
            "caching allocator): strings, attributed to the nearest __FILE__ path",
     "extract": lambda root: _torch_cpp(root, cuda=True)},
    {"repo": "NVIDIA/nccl", "commit": "5067397c2676d5aed50042fc39e5c8ee96eb0027", "project": "NCCL",
     "how": "WARN(...) formats in src/ and ncclGetErrorString's table", "extract": _nccl},
    {"repo": "ROCm/clr", "commit": "f9f995c6d0aecec28debd3db0f41df0c15ec003d", "project": "CUDA runtime",
     "how": "hipamd/src/hip_error.cpp's ihipGetErrorString: HIP's copy of the texts cudaGetErrorString returns "
            "(libcudart's own table is not public source); torch prints them as 'CUDA error: <text>'",
     "extract": _clr},
    {"repo": "deepspeedai/DeepSpeed", "commit": "edaa7221267243c7be7fb49c5d5f5c4fb97b4641", "project": "DeepSpeed",
     "how": "raise/assert/logger texts of deepspeed/ (ast)", "extract": _deepspeed},
    {"repo": "huggingface/accelerate", "commit": "16cb6eb80dd9aa8b4df1a63ef57863e455d53b83", "project": "accelerate",
     "how": "raise/logger texts of src/accelerate (ast); round 22 (triage25): every raise of state.py, accelerator.py, "
            "utils/launch.py, commands/launch.py, utils/dataclasses.py, classed as DeepSpeed config / world size / "
            "mixed precision / device / launcher / sharding / config (tools/mine_messages.py --add-repo)",
     "extract": _accelerate},
    {"repo": "huggingface/transformers", "commit": "v5.25.0", "ref": "v5.25.0: the installed wheel, which records no hash",
     "project": "transformers",
     "how": "raise/logger texts of the Trainer, TrainingArguments and the DeepSpeed integration (ast)",
     "extract": _transformers},
    {"repo": "SchedMD/slurm", "commit": "284c3b95f08a2dc2478499837b03355e1b9c5c75", "project": "SLURM",
     "how": "error()/fatal()/info() formats of slurmstepd, srun and the cgroup plugins", "extract": _slurm},
    {"repo": "SchedMD/slurm", "commit": "f7bc53fb04e88f3684c76a846378b180a8af9b45", "project": "SLURM",
     "ref": "slurmstepd/req.c before March 2025, whose scancel message had no 'DUE to SIGNAL' (what most clusters "
            "still run)",
     "how": "error() formats of src/slurmd/slurmstepd/req.c at that commit",
     "extract": lambda root: list(_m().c_messages(os.path.join(root, "slurm-old"), ["src/slurmd/slurmstepd/req.c"],
                                                  "SchedMD/slurm", ("error",)))},
    {"repo": "NVIDIA/nccl", "commit": "7e515921295adaab72adf56ea71a0fafb0ecb5f3", "project": "NCCL",
     "ref": "v2.10.3-1: the libibverbs loader of NCCL 2.4-2.11 (src/misc/ibvwrap.cc), whose 'Failed to open "
            "libibverbs.so[.1]' WARN later NCCLs print as an INFO line, but many logs still carry",
     "how": "WARN() formats of src/misc/ibvwrap.cc at that tag",
     "extract": lambda root: list(_m().c_messages(os.path.join(root, "nccl-old"), ["src/misc/ibvwrap.cc"],
                                                  "NVIDIA/nccl", ("WARN",)))},
    {"repo": "ray-project/ray", "commit": "b7f4259e944bf6959f721b106adc366ddfa0c356", "ref": "ray 2.60.0 wheel",
     "project": "Ray",
     "how": "python/ray/exceptions.py and ray.train (ast); the raylet binary (strings, attributed to the nearest "
            "source path)", "extract": _ray},
    {"repo": "torvalds/linux", "commit": "c797bc88f77b51c4ba0b5d782b8284c7ed0233bc", "project": "Linux kernel",
     "how": "mm/oom_kill.c's pr_err/pr_info formats, read at this commit", "extract": lambda root: _kernel(root, 0)},
    {"repo": "torvalds/linux", "commit": "01017a227044d64face2588fab9427a1da1bdb9f", "project": "Linux kernel",
     "how": "mm/oom_kill.c's printk formats in an older version (the 'invoked oom-killer' line)",
     "extract": lambda root: _kernel(root, 1)},
    {"repo": "python/cpython", "commit": "v3.11.7", "ref": "v3.11.7: the interpreter's Lib/argparse.py",
     "project": "Python", "how": "argparse's, multiprocessing's and pickle's messages (ast)", "extract": _cpython},
    {"repo": "NVIDIA/open-gpu-kernel-modules", "commit": "df1c9a3de2be4b130f4fc7680f7198193d8ac6ad",
     "project": "NVIDIA GPU driver",
     "how": "the kernel driver's own messages (nv_printf / portDbgPrintf formats: Xid reports, a GPU fallen off the "
            "bus), as the kernel log (dmesg) shows them", "extract": _nvidia_open},
    {"repo": "pytorch/gloo", "commit": "70dc360272dfc57e3617184c78ff9b06f8cd4757", "project": "Gloo",
     "how": "GLOO_ERROR_MSG(...) / signalException(...) messages of the TCP transport (their string arguments "
            "joined, the others holes), and the libuv transport's UV_ASSERT(rv, \"call\") aborts (its format "
            "'[%s:%d] %s: %s' with the call's name)", "extract": _gloo},
    {"repo": "libuv/libuv", "commit": "6179e7af87413396d5853a1c3722c8b5749336c8", "project": "libuv",
     "how": "include/uv.h's UV_ERRNO_MAP (the texts uv_strerror returns; torch's RPC transport, TensorPipe, prints "
            "them as 'rv < 0: <text>')", "extract": _libuv},
]
