"""The `torch` section: facts that need `import torch`, read in a bounded subprocess.

`ddpdoctor check` never imports torch itself (it costs ~0.9 s and ~200 MiB); this section is only
gathered when a selected check needs it, or for a full `ddpdoctor snapshot`.
"""
from __future__ import annotations

import json
import subprocess
import sys

from ddpdoctor import proctree
from ddpdoctor.gather import BOOL, INT, LIST, OBJ, STR, Sources, gatherer

_SCRIPT = r"""
import json, sys
out = {}
try:
    import torch
    out["version"] = torch.__version__
    out["cuda_build"] = torch.version.cuda
    out["hip_build"] = getattr(torch.version, "hip", None)
    out["cuda_available"] = torch.cuda.is_available()
    out["device_count"] = torch.cuda.device_count() if out["cuda_available"] else 0
    import torch.distributed as dist
    out["distributed_available"] = dist.is_available()
    out["gloo_available"] = dist.is_available() and dist.is_gloo_available()
    out["nccl_available"] = dist.is_available() and dist.is_nccl_available()
    out["mpi_available"] = dist.is_available() and dist.is_mpi_available()
    try:
        v = torch.cuda.nccl.version() if out["nccl_available"] else None
        out["nccl_version"] = ".".join(map(str, v)) if isinstance(v, tuple) else v
    except Exception as e:
        out["nccl_version"] = None
    out["num_threads"] = torch.get_num_threads()
    import torch.multiprocessing as tmp
    out["sharing_strategy"] = tmp.get_sharing_strategy()
    devs = []
    for i in range(out["device_count"]):
        p = torch.cuda.get_device_properties(i)
        d = {"index": i, "name": p.name, "capability": [p.major, p.minor], "total_memory": p.total_memory,
             "uuid": str(getattr(p, "uuid", "")) or None}
        for k in ("pci_bus_id", "pci_device_id", "pci_domain_id"):  # ints (cudaDeviceProp::pciBusID...)
            v = getattr(p, k, None)
            d[k] = v if isinstance(v, int) and not isinstance(v, bool) else None
        devs.append(d)
    out["devices"] = devs
except Exception as e:
    out["error"] = f"{type(e).__name__}: {e}"
print(json.dumps(out))
"""


# The recorded-snapshot schema of this section (issue 13: every field typed). The device fields are
# the types of torch's `_CudaDeviceProperties` binding (torch/csrc/cuda/Module.cpp: def_readonly of
# cudaDeviceProp's name (char[256] -> str), major/minor/pciBusID/pciDeviceID/pciDomainID (int),
# totalGlobalMem (size_t -> int); uuid is a `_CUuuid` whose str() is "xxxxxxxx-xxxx-..." without
# NVML's "GPU-" prefix). pci_bus_id is the bus NUMBER (an int), not NVML's "00000000:07:00.0";
# facts.pci.torch_bdf builds the comparable address. tests/test_fake_types.py holds the fake torch
# to torch's own stubs and this table to both.
FIELDS = {
    "version": STR, "cuda_build": STR, "hip_build": STR, "cuda_available": BOOL, "device_count": INT,
    "devices": LIST, "devices[]": OBJ, "devices[].index": INT, "devices[].name": STR, "devices[].capability": LIST,
    "devices[].capability[]": INT, "devices[].total_memory": INT, "devices[].pci_bus_id": INT,
    "devices[].pci_device_id": INT, "devices[].pci_domain_id": INT, "devices[].uuid": STR,
    "distributed_available": BOOL, "nccl_available": BOOL, "gloo_available": BOOL, "mpi_available": BOOL,
    "nccl_version": STR, "num_threads": INT, "sharing_strategy": STR,
}


@gatherer("torch", fields=FIELDS)
def gather_torch(src: Sources) -> dict:
    python = src.python or sys.executable
    try:
        proc = proctree.run([python, "-c", _SCRIPT], capture_output=True, text=True, timeout=src.timeout_s,
                            env=dict(src.environ), stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return {"error": f"importing torch did not finish within {src.timeout_s:g} s"}
    except OSError as exc:
        return {"error": f"cannot run {python}: {exc}"}
    lines = [l for l in proc.stdout.splitlines() if l.startswith("{")]
    if not lines:
        tail = (proc.stderr or "").strip().splitlines()[-1:] or ["no output"]
        return {"error": f"torch probe exited {proc.returncode}: {tail[0]}"}
    data = json.loads(lines[-1])
    if "error" in data and "version" not in data:
        if "No module named 'torch'" in data["error"]:
            return {"unavailable": "torch is not installed in this interpreter"}
    return data
