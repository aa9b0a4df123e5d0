"""The `gpus` section: every GPU NVML can see, its health, and how each pair is connected.

The walk is the same for the live driver and for a replayed snapshot (`ddpdoctor.gather.nvml`):
it asks the backend one named field at a time, so an NVML "Not Supported" on one field (ECC on a
GeForce card, remapped rows on a V100) is written under that device's `errors` and the rest of
the device is still read. A missing library or unloaded driver is recorded once, as
`{"unavailable": reason, "reason": kind}`, and every check needing this section is skipped with
that reason. The walk runs under a deadline: a GPU that has fallen off the bus can make NVML
calls block, and the doctor must never hang.
"""
from __future__ import annotations

import os
import threading
from typing import Any, Mapping, Optional

from ddpdoctor.gather import BOOL, INT, LIST, NUM, OBJ, STR, Sources, gatherer
from ddpdoctor.gather.nvml import (DEVICE_FIELDS, GPU_LOST_TEXT, NOT_SUPPORTED_TEXT, PAIR_FIELDS, RESET_REQUIRED_TEXT,
                                   SYSTEM_FIELDS, LiveNvml, NvmlError, NvmlUnavailable, put)

MAX_DEVICES = 64  # NVML supports far fewer per host; a bound keeps a corrupt answer from looping


def walk(backend: Any, src: Optional[Sources] = None) -> dict:
    """Read everything the checks judge from one backend. Raises nothing but NvmlUnavailable."""
    backend.init()
    try:
        out: dict = {"backend": getattr(backend, "name", type(backend).__name__)}
        errors: dict = {}
        for field in SYSTEM_FIELDS:
            out[field], reason = _ask(backend.system, field)
            if reason is not None:
                errors[field] = reason
        cuda = out.get("cuda_driver_version")
        out["cuda_driver"] = f"{cuda // 1000}.{cuda % 1000 // 10}" if isinstance(cuda, int) and cuda > 0 else None
        count, reason = _ask(backend.count)
        if reason is not None or not isinstance(count, int):
            reason = reason or f"unexpected answer {count!r}"
            out.update(errors=dict(errors, count=reason), devices=[], pairs=[])
            out["unavailable"] = f"NVML could not count the GPUs: {reason}"
            out["reason"] = "count_failed"
            return out
        if count == 0:
            out.update(count=0, devices=[], pairs=[], reason="no_devices",
                       unavailable="the NVIDIA driver is loaded but NVML sees no GPU")
            return out
        count = min(count, MAX_DEVICES)
        devices = [_device(backend, i) for i in range(count)]
        pairs = [_pair(backend, a, b) for a in range(count) for b in range(a + 1, count)]
        out.update(count=count, devices=devices, pairs=pairs)
        if errors:
            out["errors"] = errors
        if getattr(backend, "records_processes", False):
            out["own_pids"] = list(backend.section.get("own_pids") or [])  # replay: keep what was recorded
        else:
            _mark_processes(out, src)
        return out
    finally:
        backend.shutdown()


def _ask(fn, *args) -> tuple:
    """(value, None) or (None, reason). Any exception from one field is that field's failure only."""
    try:
        return fn(*args), None
    except NvmlError as exc:
        return None, exc.reason
    except NvmlUnavailable:
        raise
    except Exception as exc:  # noqa: BLE001 - a binding bug or odd driver answer must stay per field
        return None, f"{type(exc).__name__}: {exc}"


def _device(backend: Any, index: int) -> dict:
    record = _read_fields({"index": index}, DEVICE_FIELDS, lambda field: _ask(backend.device, index, field))
    # NVML answers "GPU is lost" (NVML_ERROR_GPU_IS_LOST: the GPU fell off the bus, Xid 79) or "GPU
    # requires restart" to every call about a GPU in that state: a state of the GPU, said once, not
    # a list of unknown fields (a lost GPU's name is None, not a second model).
    reasons = set((record.get("errors") or {}).values())
    if GPU_LOST_TEXT in reasons:
        record["lost"] = True
    if RESET_REQUIRED_TEXT in reasons:
        record["reset_required"] = True
    # Every call failing with one and the same reason is the handle failing, not the fields: nvidia-smi
    # prints "Unable to determine the device handle for GPU...: Unknown Error" (a GPU whose PCIe link
    # or board is failing). Said once, as a state of the GPU.
    errors = record.get("errors") or {}
    if (not record.get("lost") and not record.get("reset_required") and len(errors) == len(DEVICE_FIELDS)
            and len(reasons) == 1 and NOT_SUPPORTED_TEXT not in reasons):
        record["unreachable"] = next(iter(reasons))
    return record


def _pair(backend: Any, a: int, b: int) -> dict:
    return _read_fields({"a": a, "b": b}, PAIR_FIELDS, lambda field: _ask(backend.pair, a, b, field))


def _read_fields(record: dict, fields, ask) -> dict:
    """Fill `record` field by field; a field NVML cannot answer goes under `errors` with its reason,
    so one unsupported call never hides the others."""
    errors: dict = {}
    for field in fields:
        value, reason = ask(field)
        if reason is not None:
            errors[field] = reason
        put(record, field, value)
    if errors:
        record["errors"] = errors
    return record


def _mark_processes(section: dict, src: Optional[Sources]) -> None:
    """Which GPU processes belong to this job: this process, its ancestors (the launcher, the script
    that called us), and processes of the same torchrun run / Slurm job (sibling ranks). Also which
    PIDs do not exist in our /proc (another container's PID namespace)."""
    if src is None:
        return
    own = own_pids(src)
    section["own_pids"] = own
    job = {k: src.environ[k] for k in JOB_KEYS if src.environ.get(k)}
    for dev in section.get("devices") or []:
        for proc in dev.get("processes") or []:
            pid = proc.get("pid")
            visible = isinstance(pid, int) and os.path.exists(src.path(f"/proc/{pid}"))
            proc["ours"] = pid in own or bool(job and visible and _same_job(src, pid, job))
            proc["in_our_proc"] = visible


JOB_KEYS = ("TORCHELASTIC_RUN_ID", "SLURM_JOB_ID")


def _same_job(src: Sources, pid: int, job: dict) -> bool:
    """Compare only the job identifiers in another process's environment; nothing else is kept."""
    theirs = src.environ_of(pid, job)
    if theirs is None:
        return False
    return all(theirs.get(k) == v for k, v in job.items())


def own_pids(src: Sources, limit: int = 64) -> list:
    pids, pid = [], os.getpid()
    while pid > 1 and len(pids) < limit:
        pids.append(pid)
        try:
            with open(src.path(f"/proc/{pid}/stat"), "r") as fh:
                stat = fh.read()
            pid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return pids


def device_hints(src: Sources) -> dict:
    """Signs that an NVIDIA GPU was expected although NVML is unusable; and what a ROCm (HIP) build of torch needs
    to reach an AMD GPU, since NVML is unusable there too: the device files ROCm's HSA thunk opens read-write
    (/dev/kfd, one /dev/dri/renderD<N> per GPU; data/gpu_versions.json rocm_device_files), whether this process may
    open them (os.access R_OK|W_OK: the file mode and the groups, as open() will judge them), and whether the
    amdgpu kernel driver is loaded (/sys/module/amdgpu; its KFD topology is the pci section's amd_gpus)."""
    rw = os.R_OK | os.W_OK
    kfd = src.path("/dev/kfd")
    try:
        renders = sorted(n for n in os.listdir(src.path("/dev/dri")) if n.startswith("renderD"))[:64]
    except OSError:
        renders = []
    return {"dev_nvidia0": os.path.exists(src.path("/dev/nvidia0")),
            "proc_driver_nvidia": os.path.exists(src.path("/proc/driver/nvidia/version")),
            "dev_kfd": os.path.exists(kfd), "dev_kfd_rw": os.path.exists(kfd) and os.access(kfd, rw),
            "dev_dri_render": bool(renders),
            "dev_dri_render_rw": any(os.access(src.path(f"/dev/dri/{n}"), rw) for n in renders),
            "amdgpu_module": os.path.isdir(src.path("/sys/module/amdgpu"))}


def gather_with(backend: Any, src: Sources, deadline_s: Optional[float] = None) -> dict:
    """`walk` under a deadline, with NvmlUnavailable turned into the section's `unavailable` form."""
    box: dict = {}

    def run() -> None:
        try:
            box["section"] = walk(backend, src)
        except NvmlUnavailable as exc:
            box["section"] = {"unavailable": exc.reason, "reason": exc.kind, "nvml_error": exc.nvml_error,
                              "hints": device_hints(src)}
        except Exception as exc:  # noqa: BLE001 - a bug here must not take the doctor down
            box["section"] = {"error": f"{type(exc).__name__}: {exc}"}

    deadline = src.timeout_s if deadline_s is None else deadline_s
    worker = threading.Thread(target=run, name="ddpdoctor-nvml", daemon=True)
    worker.start()
    worker.join(deadline)
    if worker.is_alive():
        return {"error": f"NVML did not answer within {deadline:g} s; a GPU may have fallen off the bus "
                         "(look for 'NVRM: Xid' in `dmesg`)"}
    return box["section"]


# The fields checks read, with their JSON types (the recorded-snapshot schema).
FIELDS = {
    "devices[].bar1": OBJ, "devices[].bar1.total_bytes": INT,
    "hints": OBJ, "devices": LIST, "devices[]": OBJ, "devices[].index": INT, "devices[].name": STR,
    "devices[].cuda_capability": LIST, "devices[].cuda_capability[]": INT, "devices[].memory": OBJ,
    "devices[].ecc_errors": OBJ, "devices[].errors": OBJ, "devices[].remapped_rows": OBJ, "devices[].mig": OBJ,
    "devices[].mig_devices": LIST, "devices[].mig_devices[]": OBJ,
    "devices[].mig_devices[].memory_total_bytes": INT, "devices[].nvlinks": LIST, "devices[].nvlinks[]": OBJ,
    "devices[].nvlinks[].link": INT, "devices[].pcie": OBJ, "devices[].processes": LIST,
    "devices[].processes[]": OBJ, "devices[].throttle_reasons": OBJ, "devices[].throttle_reasons.names": LIST,
    "pairs": LIST, "pairs[]": OBJ, "pairs[].a": INT, "pairs[].b": INT, "pairs[].p2p": OBJ,
    # issue 13: every recorded field has a declared type, so a hand-edited snapshot is rejected uniformly
    "backend": STR, "count": INT, "driver_version": STR, "cuda_driver": STR, "cuda_driver_version": INT,
    "own_pids": LIST, "own_pids[]": INT, "reason": STR, "nvml_error": STR, "hints.*": BOOL,
    "devices[].uuid": STR, "devices[].pci_bus_id": STR, "devices[].compute_mode": STR, "devices[].cpu_affinity": STR,
    "devices[].numa_node": INT, "devices[].persistence_mode": BOOL, "devices[].power_limit_w": NUM,
    "devices[].temperature_c": NUM, "devices[].retired_pages_pending": BOOL, "devices[].memory.total_bytes": INT,
    "devices[].memory.used_bytes": INT, "devices[].ecc": OBJ, "devices[].ecc.current": BOOL, "devices[].ecc.pending": BOOL,
    "devices[].ecc_errors.volatile_uncorrected": INT, "devices[].ecc_errors.aggregate_uncorrected": INT,
    "devices[].errors.*": STR, "devices[].mig.current": BOOL, "devices[].mig.pending": BOOL,
    "devices[].mig_devices[].index": INT, "devices[].mig_devices[].uuid": STR, "devices[].mig_devices[].name": STR,
    "devices[].nvlinks[].active": BOOL, "devices[].nvlinks[].remote_pci_bus_id": STR,
    "devices[].pcie.gen_current": INT, "devices[].pcie.gen_max": INT, "devices[].pcie.width_current": INT,
    "devices[].pcie.width_max": INT, "devices[].pcie.replay_counter": INT, "devices[].processes[].pid": INT,
    "devices[].processes[].used_bytes": INT, "devices[].processes[].name": STR, "devices[].remapped_rows.correctable": INT,
    "devices[].remapped_rows.uncorrectable": INT, "devices[].remapped_rows.pending": BOOL,
    "devices[].remapped_rows.failure": BOOL, "devices[].throttle_reasons.mask": INT,
    "devices[].throttle_reasons.names[]": STR, "pairs[].topology": STR, "pairs[].p2p.*": STR,
    # issue 26
    "devices[].lost": BOOL, "devices[].reset_required": BOOL, "devices[].unreachable": STR, "devices[].clocks": OBJ,
    "devices[].clocks.sm_mhz": INT, "devices[].clocks.sm_max_mhz": INT, "devices[].clocks.mem_mhz": INT,
    "devices[].clocks.mem_max_mhz": INT, "devices[].power": OBJ, "devices[].power.default_limit_w": NUM,
    "devices[].power.enforced_limit_w": NUM, "devices[].power.usage_w": NUM, "devices[].fabric": OBJ,
    "devices[].fabric.state": STR, "devices[].fabric.status": STR,
}


# A pair field NVML cannot answer ("Not Supported") is recorded as null, so it may be null on replay.
@gatherer("gpus", fields=FIELDS, required=('devices[].nvlinks[].link',), nullable=("pairs[].p2p.*",))
def gather_gpus(src: Sources) -> dict:
    backend = src.nvml if src.nvml is not None else LiveNvml()
    return gather_with(backend, src)


def visible_gpu_count(environ: Optional[Mapping[str, str]] = None, nvml: Any = None) -> int:
    """How many GPUs this process's children will see: NVML's devices filtered and ordered by
    CUDA_VISIBLE_DEVICES exactly as CUDA does (UUIDs, MIG, the stop at a bad entry), 0 without a
    driver. `comm` and `probe` use it to choose NCCL or Gloo without importing torch."""
    from ddpdoctor.facts.cuda_map import resolve

    env = dict(os.environ if environ is None else environ)
    section = gather_gpus(Sources(environ=env, nvml=nvml))
    if not section.get("devices"):
        return 0
    return len(resolve(env, section).visible)
