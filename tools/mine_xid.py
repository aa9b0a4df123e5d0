"""Mine the Xid catalogue (ddpdoctor/data/xid.json) from the NVIDIA kernel driver's own list of codes.

The open GPU kernel modules declare every Xid the driver logs ("NVRM: Xid (PCI:...): <code>, ...") in
src/common/sdk/nvidia/inc/nverror.h as `#define <MNEMONIC> (<code>)`. This script reads those lines
from a copy of that file and writes one entry per code: its mnemonics, a class derived from the
mnemonic, and what the class means for a distributed training job. The classes follow NVIDIA's Xid
catalog ("Resolution Bucket": RESTART_APP for application faults, RESET_GPU / CONTACT_SUPPORT for the
hardware ones; docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html).

    python tools/mine_xid.py NVERROR_H [--commit SHA] > ddpdoctor/data/xid.json

NVERROR_H: a copy of nverror.h (e.g. `git show <sha>:src/common/sdk/nvidia/inc/nverror.h` in a clone of
NVIDIA/open-gpu-kernel-modules). Nothing is downloaded here.
"""
from __future__ import annotations

import argparse
import json
import re
import sys

REPO = "NVIDIA/open-gpu-kernel-modules"
PATH = "src/common/sdk/nvidia/inc/nverror.h"
DEFINE = re.compile(r"^#define\s+([A-Z0-9_]+)\s+\((\d+)\)", re.M)

# class, by mnemonic (first match wins): (pattern, class)
CLASSES = (
    (r"FALLEN_OFF_THE_BUS", "gpu-lost"),
    (r"ECC_DBE|UNCONTAINED", "memory-uncorrectable"),
    (r"CONTAINED_ERROR", "memory-contained"),
    (r"RETIREMENT|SBE_INTERRUPTS", "memory-retirement"),
    (r"NVLINK", "nvlink"),
    (r"GSP_|PMU_|C2C_|SPI_|INFOROM|LTC_", "firmware"),
    (r"GR_EXCEPTION|GR_ERROR_SW_NOTIFY|MMU_ERR_FLT|BAD_ADDR_ACCESS|RESETCHANNEL_VERIF|PREEMPTIVE_REMOVAL|"
     r"GR_CLASS_ERROR|GR_FAULT_DURING_CTXSW|PBDMA_ERROR|PUSHBUFFER_CRC", "application"),
    (r"FAKE_ERROR|RC_LOGGING|RESERVED|TELEMETRY|VGPU|DISP|VGA", "informational"),
    (r".", "engine"),
)
MEANING = {
    "gpu-lost": ("The GPU stopped answering on the PCIe bus. Every process on it dies, NVML reports it as 'GPU is "
                 "lost', and nothing recovers it but a reset or reboot: power, thermals, a riser or the board.",
                 "drain the node; sudo nvidia-smi -r -i <gpu> (or reboot); if it returns, a hardware ticket"),
    "memory-uncorrectable": ("An uncorrectable memory error: the process that owned the memory was killed, and the "
                             "GPU needs a reset before its memory can be trusted.",
                             "drain the node and reset the GPU (sudo nvidia-smi -r -i <gpu>); if it repeats, RMA"),
    "memory-contained": ("A contained memory error: the affected process was killed, the GPU keeps serving others; "
                         "a pending row remap needs a GPU reset.",
                         "restart the job on another GPU; reset this GPU when it is idle (sudo nvidia-smi -r -i <gpu>)"),
    "memory-retirement": ("The memory row remapper or page retirement acted on failing memory; it takes effect "
                          "after a GPU reset, and a failure means the GPU is out of spare rows.",
                          "reset the GPU when idle (sudo nvidia-smi -r -i <gpu>); if retirement failed, RMA"),
    "nvlink": ("An NVLink error: traffic over the link was retried or failed; NCCL collectives through it slow "
               "down or hang.", "nvidia-smi nvlink -e -i <gpu>   # error counters; reset the GPU or reseat the link"),
    "firmware": ("The GPU's firmware (GSP, PMU, InfoROM) failed or timed out; the GPU is in an unknown state until "
                 "it is reset.", "sudo nvidia-smi -r -i <gpu> (or reboot); update the driver if it recurs"),
    "application": ("A fault of the program that ran on the GPU (an illegal memory access, a killed channel): "
                    "the GPU itself is healthy.",
                    "nothing on the machine; run the failing program with CUDA_LAUNCH_BLOCKING=1 to find the kernel"),
    "informational": ("Logged for information; not a failure of the GPU.", "nothing to do"),
    "engine": ("An error in one of the GPU's engines (copy, video, security); usually the program using it fails, "
               "a repeat points at the GPU.", "restart the program; if it repeats on this GPU, reset it"),
}


def classify(mnemonic: str) -> str:
    for pattern, cls in CLASSES:
        if re.search(pattern, mnemonic):
            return cls
    return "engine"


def entries(text: str, commit: str) -> list:
    by_code: dict = {}
    for name, code in DEFINE.findall(text):
        if name.startswith("ROBUST_CHANNEL_LAST"):
            continue
        by_code.setdefault(int(code), []).append(name)
    out = []
    for code in sorted(by_code):
        names = by_code[code]
        cls = classify(" ".join(names))
        meaning, fix = MEANING[cls]
        out.append({"id": f"xid-{code}", "code": code, "mnemonics": names, "class": cls, "meaning": meaning,
                    "fix": fix, "source": {"repo": REPO, "path": PATH, "commit": commit, "symbol": names[0]},
                    "examples": [f"NVRM: Xid (PCI:0000:3b:00): {code}, pid=4242, name=python, {names[0]}"]})
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("nverror_h")
    p.add_argument("--commit", default="0b7b8041c2667cf18f353d2dbdfd5f09dbebf264")
    args = p.parse_args(argv)
    with open(args.nverror_h, encoding="utf-8") as fh:
        text = fh.read()
    doc = {"schema": "ddpdoctor/catalogue/1", "name": "xid",
           "sources": {REPO: {"commit": args.commit, "how": "every `#define NAME (code)` of " + PATH +
                              "; classes from the mnemonic, after NVIDIA's Xid catalog resolution buckets "
                              "(docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html)"}},
           "entries": entries(text, args.commit)}
    json.dump(doc, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
