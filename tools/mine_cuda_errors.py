"""Mine the CUDA driver error catalogue (ddpdoctor/data/cuda_errors.json) from NVIDIA's cuda.h.

cuda.h declares every CUresult as `CUDA_ERROR_NAME = code,` under a doc comment; the header ships in
the PyPI wheel nvidia-cuda-runtime-cu12 (nvidia/cuda_runtime/include/cuda.h). Each entry keeps the
name, code and NVIDIA's comment, and a class that says what the code means for `cuInit` on a training
node (what ddpdoctor's `cuda` facts record): no device, the fabric manager, the driver, a busy GPU...

    python tools/mine_cuda_errors.py WHEEL.whl > ddpdoctor/data/cuda_errors.json
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import zipfile

CLASSES = (
    (r"^CUDA_ERROR_SYSTEM_NOT_READY$", "fabric-manager",
     "On an NVSwitch system: start the fabric manager (sudo systemctl enable --now nvidia-fabricmanager), whose "
     "version must match the driver's; elsewhere: check that every driver daemon the system guide lists runs"),
    (r"^CUDA_ERROR_NO_DEVICE$", "no-device",
     "nvidia-smi must list the GPU; check CUDA_VISIBLE_DEVICES, and in a container --gpus all (or the device "
     "nodes /dev/nvidia*)"),
    (r"^CUDA_ERROR_STUB_LIBRARY$", "stub-library",
     "remove the CUDA toolkit's lib64/stubs directory from LD_LIBRARY_PATH: the real libcuda.so.1 comes with the driver"),
    (r"^CUDA_ERROR_(INSUFFICIENT_DRIVER|SYSTEM_DRIVER_MISMATCH|COMPAT_NOT_SUPPORTED_ON_DEVICE)$", "driver",
     "install a driver that supports this CUDA (nvidia-smi's 'CUDA Version' must be at least the build's), or "
     "remove a forward-compatibility libcuda that does not match this GPU or kernel module"),
    (r"^CUDA_ERROR_(DEVICE_UNAVAILABLE|DEVICES_UNAVAILABLE)$", "busy",
     "the GPU's compute mode forbids another context (nvidia-smi -q -d COMPUTE); one process per GPU, or "
     "sudo nvidia-smi -i N -c DEFAULT"),
    (r"^CUDA_ERROR_(UNKNOWN|OPERATING_SYSTEM|NOT_INITIALIZED|INVALID_DEVICE)$", "driver-state",
     "look for Xid errors (sudo dmesg | grep -i xid) and check that nvidia_uvm is loaded (lsmod | grep nvidia_uvm); "
     "a reboot clears a wedged driver"),
    (r".", "other", "see NVIDIA's description of the code"),
)


def mine(text: str) -> list:
    out = []
    for m in re.finditer(r"/\*\*((?:(?!\*/).)*?)\*/\s*(CUDA_ERROR_[A-Z0-9_]+)\s*=\s*(\d+)", text, re.S):
        comment = " ".join(line.strip(" *") for line in m.group(1).splitlines()).strip()
        comment = re.sub(r"\s+", " ", re.sub(r"\\[a-z]+|::", "", comment))
        name, code = m.group(2), int(m.group(3))
        cls, fix = next((c, f) for p, c, f in CLASSES if re.search(p, name))
        out.append({"id": name, "code": code, "class": cls, "meaning": comment[:600], "fix": fix,
                    "examples": [f"cuInit(0) = {code} ({name})"]})
    return out


def main(argv=None) -> int:
    wheel = (argv or sys.argv[1:])[0]
    digest = hashlib.sha256(open(wheel, "rb").read()).hexdigest()
    version = re.search(r"-(\d+\.\d+\.\d+)-", os.path.basename(wheel)).group(1)
    with zipfile.ZipFile(wheel) as z:
        text = z.read("nvidia/cuda_runtime/include/cuda.h").decode("utf-8", "replace")
    repo = "pypi:nvidia-cuda-runtime-cu12"
    commit = f"{version} (wheel sha256 {digest})"
    entries = mine(text)
    for e in entries:
        e["source"] = {"repo": repo, "path": "nvidia/cuda_runtime/include/cuda.h", "commit": commit,
                       "symbol": f"enum cudaError_enum: {e['id']}"}
    doc = {"schema": "ddpdoctor/catalogue/1", "name": "cuda_errors",
           "sources": {repo: {"commit": commit, "how": "every `CUDA_ERROR_X = code` of enum cudaError_enum in the "
                              "wheel's cuda.h, with its doc comment; classes by name"}},
           "entries": entries}
    json.dump(doc, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
