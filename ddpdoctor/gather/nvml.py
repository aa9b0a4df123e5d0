"""NVML backends: the one place that talks to the NVIDIA driver, behind a tiny interface.

The `gpus` gatherer asks a backend for named fields ("memory.total_bytes", "p2p.read", ...) and
never sees pynvml. Two backends answer those questions:

* `LiveNvml`  wraps nvidia-ml-py (import name `pynvml`), converting handles, ctypes structs and
  enum integers into plain JSON values;
* `ReplayNvml` answers from a recorded `gpus` section (or a hand-written fake), so a snapshot of an
  8-GPU HGX box can be replayed through the very same gathering code on a laptop, and tests can
  inject an "NVML: Not Supported" on any single field.

Every failure is an `NvmlError` carrying NVML's own words; the gatherer records it per field.
A missing library or an unloaded driver is an `NvmlUnavailable` raised once, by `init()`.
"""
from __future__ import annotations

from ddpdoctor.facts.topology import TOPOLOGY_NAMES, TOPOLOGY_SHORT  # noqa: F401 - re-exported
from ddpdoctor.facts.units import runs_text

from typing import Any, Callable, Dict, Optional

# NVML return codes we name (nvml.h); kept here so the replay backend needs no pynvml import.
NOT_SUPPORTED = 3
NO_PERMISSION = 4
NOT_FOUND = 6
DRIVER_NOT_LOADED = 9
LIBRARY_NOT_FOUND = 12
FUNCTION_NOT_FOUND = 13
GPU_IS_LOST = 15
RESET_REQUIRED = 16
LIB_RM_VERSION_MISMATCH = 18
INVALID_ARGUMENT = 2

P2P_STATUS_NAMES = {0: "OK", 1: "CHIPSET_NOT_SUPPORTED", 2: "GPU_NOT_SUPPORTED", 3: "IOH_TOPOLOGY_NOT_SUPPORTED",
                    4: "DISABLED_BY_REGKEY", 5: "NOT_SUPPORTED", 6: "UNKNOWN"}
COMPUTE_MODE_NAMES = {0: "DEFAULT", 1: "EXCLUSIVE_THREAD", 2: "PROHIBITED", 3: "EXCLUSIVE_PROCESS"}
# nvmlClocksEventReason* bits (formerly ClocksThrottleReason*).
THROTTLE_BITS = {0x1: "GpuIdle", 0x2: "ApplicationsClocksSetting", 0x4: "SwPowerCap", 0x8: "HwSlowdown",
                 0x10: "SyncBoost", 0x20: "SwThermalSlowdown", 0x40: "HwThermalSlowdown",
                 0x80: "HwPowerBrakeSlowdown", 0x100: "DisplayClockSetting"}

# nvmlGpuFabricState_t (NVSwitch systems, Hopper and later: the GPU's registration with the fabric manager)
FABRIC_STATE_NAMES = {0: "NOT_SUPPORTED", 1: "NOT_STARTED", 2: "IN_PROGRESS", 3: "COMPLETED"}
# NVMLError's words for the codes that mean the GPU itself is gone or wedged, not one call unsupported.
GPU_LOST_TEXT = "GPU is lost"
RESET_REQUIRED_TEXT = "GPU requires restart"
NOT_SUPPORTED_TEXT = "Not Supported"

SYSTEM_FIELDS = ("driver_version", "cuda_driver_version")
DEVICE_FIELDS = (
    "name", "uuid", "pci_bus_id", "cuda_capability",
    "memory.total_bytes", "memory.used_bytes",
    "processes",
    "persistence_mode", "compute_mode",
    "mig.current", "mig.pending", "mig_devices",
    "ecc.current", "ecc.pending",
    "ecc_errors.volatile_uncorrected", "ecc_errors.aggregate_uncorrected",
    "retired_pages_pending", "remapped_rows",
    "throttle_reasons", "temperature_c", "power_limit_w",
    "pcie.gen_current", "pcie.gen_max", "pcie.width_current", "pcie.width_max", "pcie.replay_counter",
    "numa_node", "cpu_affinity",
    "nvlinks",
    # issue 26: clocks and power caps (a capped or down-clocked GPU paces every DDP step), the NVSwitch
    # fabric registration (CUDA init fails or waits until it completes)
    "clocks.sm_mhz", "clocks.sm_max_mhz", "clocks.mem_mhz", "clocks.mem_max_mhz",
    "power.default_limit_w", "power.enforced_limit_w", "power.usage_w",
    "fabric.state", "fabric.status",
    # batch 21: the BAR1 aperture (resizable BAR on or off; CUDA P2P over PCIe maps peers through it)
    "bar1.total_bytes",
)
PAIR_FIELDS = ("topology", "p2p.read", "p2p.write", "p2p.nvlink")


class NvmlError(Exception):
    """One NVML call failed. `reason` is NVML's text, e.g. "Not Supported"."""

    def __init__(self, reason: str, code: Optional[int] = None):
        super().__init__(reason)
        self.reason = reason
        self.code = code


class NvmlUnavailable(Exception):
    """NVML as a whole cannot be used. `kind` is one of: no_binding, library_not_found,
    driver_not_loaded, no_permission, version_mismatch, init_failed."""

    def __init__(self, kind: str, reason: str, nvml_error: str = ""):
        super().__init__(reason)
        self.kind = kind
        self.reason = reason
        self.nvml_error = nvml_error


def throttle_names(mask: int) -> list:
    return [name for bit, name in THROTTLE_BITS.items() if mask & bit]


def cpulist(words, width: int = 64) -> str:
    """NVML's affinity bitmask words -> Linux cpulist text such as "0-31,64-95"."""
    cpus = [w * width + b for w, word in enumerate(words) for b in range(width) if int(word) >> b & 1]
    return compress_cpus(cpus)


def compress_cpus(cpus) -> str:
    return runs_text(cpus)


# ------------------------------------------------------------------------------------------ live

class LiveNvml:
    """nvidia-ml-py over the real driver. Only `init()` imports pynvml."""

    name = "nvml"

    def __init__(self) -> None:
        self._nv: Any = None
        self._handles: Dict[int, Any] = {}

    # -- lifecycle --------------------------------------------------------------------------
    def init(self) -> None:
        try:
            import pynvml as nv
        except ImportError:
            raise NvmlUnavailable("no_binding", "nvidia-ml-py is not installed (pip install nvidia-ml-py)") from None
        try:
            nv.nvmlInit()
        except nv.NVMLError as exc:
            code = getattr(exc, "value", None)
            text = _text(exc)
            if code == LIBRARY_NOT_FOUND:
                raise NvmlUnavailable("library_not_found", "no NVIDIA driver found (NVML library not loaded)",
                                      text) from None
            if code == DRIVER_NOT_LOADED:
                raise NvmlUnavailable("driver_not_loaded", "the NVIDIA driver is installed but its kernel module is "
                                      "not loaded (NVML: Driver Not Loaded)", text) from None
            if code == NO_PERMISSION:
                raise NvmlUnavailable("no_permission", "no permission to open the NVIDIA device files (NVML: "
                                      "Insufficient Permissions)", text) from None
            if code == LIB_RM_VERSION_MISMATCH:
                raise NvmlUnavailable("version_mismatch", "the NVIDIA user-space library and kernel module versions "
                                      "differ (reboot after a driver upgrade)", text) from None
            raise NvmlUnavailable("init_failed", f"NVML failed to initialise: {text}", text) from None
        except OSError as exc:  # a broken libnvidia-ml.so can fail in dlopen itself
            raise NvmlUnavailable("library_not_found", "no NVIDIA driver found (NVML library not loaded)",
                                  str(exc)) from None
        self._nv = nv

    def shutdown(self) -> None:
        if self._nv is not None:
            try:
                self._nv.nvmlShutdown()
            except Exception:  # noqa: BLE001 - shutting down must not turn a result into a failure
                pass

    # -- questions --------------------------------------------------------------------------
    def count(self) -> int:
        return self._call(self._nv.nvmlDeviceGetCount)

    def system(self, field: str) -> Any:
        nv = self._nv
        if field == "driver_version":
            return _str(self._call(nv.nvmlSystemGetDriverVersion))
        if field == "cuda_driver_version":
            return int(self._call(nv.nvmlSystemGetCudaDriverVersion))
        raise KeyError(field)

    def device(self, index: int, field: str) -> Any:
        h = self._handle(index)
        getter = _DEVICE_GETTERS.get(field)
        if getter is None:
            raise KeyError(field)
        return self._call(getter, self._nv, h)

    def pair(self, a: int, b: int, field: str) -> Any:
        nv, ha, hb = self._nv, self._handle(a), self._handle(b)
        if field == "topology":
            level = self._call(nv.nvmlDeviceGetTopologyCommonAncestor, ha, hb)
            return TOPOLOGY_NAMES.get(int(level), f"UNKNOWN({level})")
        index = {"p2p.read": _unwrap(nv.NVML_P2P_CAPS_INDEX_READ), "p2p.write": _unwrap(nv.NVML_P2P_CAPS_INDEX_WRITE),
                 "p2p.nvlink": _unwrap(nv.NVML_P2P_CAPS_INDEX_NVLINK)}.get(field)
        if index is None:
            raise KeyError(field)
        status = self._call(nv.nvmlDeviceGetP2PStatus, ha, hb, index)
        return P2P_STATUS_NAMES.get(int(status), f"UNKNOWN({status})")

    # -- plumbing ---------------------------------------------------------------------------
    def _handle(self, index: int) -> Any:
        if index not in self._handles:
            self._handles[index] = self._call(self._nv.nvmlDeviceGetHandleByIndex, index)
        return self._handles[index]

    def _call(self, fn: Callable, *args: Any) -> Any:
        try:
            return fn(*args)
        except NvmlError:
            raise
        except Exception as exc:  # noqa: BLE001 - NVMLError, ctypes.ArgumentError, AttributeError (old binding)
            code = getattr(exc, "value", None)
            if self._nv is not None and isinstance(exc, self._nv.NVMLError):
                raise NvmlError(_text(exc), code if isinstance(code, int) else None) from None
            if isinstance(exc, AttributeError):
                raise NvmlError("Function Not Found (this nvidia-ml-py or driver lacks the call)",
                                FUNCTION_NOT_FOUND) from None
            raise NvmlError(f"{type(exc).__name__}: {exc}") from None


def _unwrap(value: Any) -> int:
    """nvidia-ml-py 13.615.71 defines `NVML_P2P_CAPS_INDEX_READ = 0,` (a tuple); ctypes rejects it."""
    while isinstance(value, (tuple, list)):
        value = value[0]
    return int(value)


def _str(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _text(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # noqa: BLE001 - NVMLError.__str__ itself calls into the library
        return f"NVML error {getattr(exc, 'value', '?')}"


def _link_count(nv: Any) -> int:
    return int(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18))


def _nvlinks(nv: Any, h: Any) -> list:
    """Per link: state and remote PCI bus ID. A GPU without NVLink says Not Supported on link 0 (-> []);
    the first link index past the GPU's own count says Invalid Argument (-> stop)."""
    links = []
    for link in range(_link_count(nv)):
        try:
            active = bool(nv.nvmlDeviceGetNvLinkState(h, link))
        except nv.NVMLError as exc:
            if getattr(exc, "value", None) in (NOT_SUPPORTED, INVALID_ARGUMENT, NOT_FOUND):
                break
            raise
        remote = None
        if active:
            try:
                remote = _str(nv.nvmlDeviceGetNvLinkRemotePciInfo(h, link).busId)
            except nv.NVMLError:
                remote = None
        links.append({"link": link, "active": active, "remote_pci_bus_id": remote})
    return links


def _processes(nv: Any, h: Any) -> list:
    out = []
    for p in nv.nvmlDeviceGetComputeRunningProcesses(h):
        try:
            name = _str(nv.nvmlSystemGetProcessName(p.pid))
        except Exception:  # noqa: BLE001 - another PID namespace: NVML knows the PID, not its name
            name = None
        used = getattr(p, "usedGpuMemory", None)
        out.append({"pid": int(p.pid), "name": name, "used_bytes": int(used) if used is not None else None})
    return out


def _mig_devices(nv: Any, h: Any) -> list:
    current, _pending = nv.nvmlDeviceGetMigMode(h)
    if not current:
        return []
    out = []
    for i in range(int(nv.nvmlDeviceGetMaxMigDeviceCount(h))):
        try:
            mh = nv.nvmlDeviceGetMigDeviceHandleByIndex(h, i)
        except nv.NVMLError:
            continue  # empty slot: NVML answers Not Found
        entry: dict = {"index": i, "uuid": None, "name": None, "memory_total_bytes": None}
        for key, fn in (("uuid", lambda: _str(nv.nvmlDeviceGetUUID(mh))),
                        ("name", lambda: _str(nv.nvmlDeviceGetName(mh))),
                        ("memory_total_bytes", lambda: int(nv.nvmlDeviceGetMemoryInfo(mh).total))):
            try:
                entry[key] = fn()
            except nv.NVMLError:
                pass
        out.append(entry)
    return out


def _remapped(nv: Any, h: Any) -> dict:
    corr, unc, pending, failure = nv.nvmlDeviceGetRemappedRows(h)
    return {"correctable": int(corr), "uncorrectable": int(unc), "pending": bool(pending), "failure": bool(failure)}


def _throttle(nv: Any, h: Any) -> dict:
    fn = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or nv.nvmlDeviceGetCurrentClocksThrottleReasons
    mask = int(fn(h))
    return {"mask": mask, "names": throttle_names(mask)}


def _watts(milliwatts: Any) -> float:
    return round(int(milliwatts) / 1000.0, 1)


def _fabric(nv: Any, h: Any) -> dict:
    """nvmlDeviceGetGpuFabricInfo (driver 525+, Hopper and later): the state of this GPU's registration
    with the NVSwitch fabric manager and its result (an nvmlReturn_t, in NVML's words)."""
    import ctypes

    info = nv.c_nvmlGpuFabricInfo_t()
    nv.nvmlDeviceGetGpuFabricInfo(h, ctypes.byref(info))
    status = int(info.status)
    return {"state": FABRIC_STATE_NAMES.get(int(info.state), f"UNKNOWN({int(info.state)})"),
            "status": "Success" if status == 0 else _text(nv.NVMLError(status))}


def _affinity(nv: Any, h: Any) -> str:
    import os

    words = max(1, ((os.cpu_count() or 64) + 63) // 64)
    return cpulist(list(nv.nvmlDeviceGetCpuAffinity(h, words)))


_DEVICE_GETTERS: Dict[str, Callable] = {
    "name": lambda nv, h: _str(nv.nvmlDeviceGetName(h)),
    "uuid": lambda nv, h: _str(nv.nvmlDeviceGetUUID(h)),
    "pci_bus_id": lambda nv, h: _str(nv.nvmlDeviceGetPciInfo(h).busId),
    "cuda_capability": lambda nv, h: list(nv.nvmlDeviceGetCudaComputeCapability(h)),
    "memory.total_bytes": lambda nv, h: int(nv.nvmlDeviceGetMemoryInfo(h).total),
    "memory.used_bytes": lambda nv, h: int(nv.nvmlDeviceGetMemoryInfo(h).used),
    "processes": _processes,
    "persistence_mode": lambda nv, h: bool(nv.nvmlDeviceGetPersistenceMode(h)),
    "compute_mode": lambda nv, h: COMPUTE_MODE_NAMES.get(int(nv.nvmlDeviceGetComputeMode(h)), "UNKNOWN"),
    "mig.current": lambda nv, h: bool(nv.nvmlDeviceGetMigMode(h)[0]),
    "mig.pending": lambda nv, h: bool(nv.nvmlDeviceGetMigMode(h)[1]),
    "mig_devices": _mig_devices,
    "ecc.current": lambda nv, h: bool(nv.nvmlDeviceGetEccMode(h)[0]),
    "ecc.pending": lambda nv, h: bool(nv.nvmlDeviceGetEccMode(h)[1]),
    "ecc_errors.volatile_uncorrected": lambda nv, h: int(nv.nvmlDeviceGetTotalEccErrors(
        h, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_VOLATILE_ECC)),
    "ecc_errors.aggregate_uncorrected": lambda nv, h: int(nv.nvmlDeviceGetTotalEccErrors(
        h, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_AGGREGATE_ECC)),
    "retired_pages_pending": lambda nv, h: bool(nv.nvmlDeviceGetRetiredPagesPendingStatus(h)),
    "remapped_rows": _remapped,
    "throttle_reasons": _throttle,
    "temperature_c": lambda nv, h: int(nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)),
    "power_limit_w": lambda nv, h: _watts(nv.nvmlDeviceGetPowerManagementLimit(h)),
    "pcie.gen_current": lambda nv, h: int(nv.nvmlDeviceGetCurrPcieLinkGeneration(h)),
    "pcie.gen_max": lambda nv, h: int(nv.nvmlDeviceGetMaxPcieLinkGeneration(h)),
    "pcie.width_current": lambda nv, h: int(nv.nvmlDeviceGetCurrPcieLinkWidth(h)),
    "pcie.width_max": lambda nv, h: int(nv.nvmlDeviceGetMaxPcieLinkWidth(h)),
    "pcie.replay_counter": lambda nv, h: int(nv.nvmlDeviceGetPcieReplayCounter(h)),
    "numa_node": lambda nv, h: int(nv.nvmlDeviceGetNumaNodeId(h)),
    "cpu_affinity": _affinity,
    "nvlinks": _nvlinks,
    "clocks.sm_mhz": lambda nv, h: int(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)),
    "clocks.sm_max_mhz": lambda nv, h: int(nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM)),
    "clocks.mem_mhz": lambda nv, h: int(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM)),
    "clocks.mem_max_mhz": lambda nv, h: int(nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_MEM)),
    "power.default_limit_w": lambda nv, h: _watts(nv.nvmlDeviceGetPowerManagementDefaultLimit(h)),
    "power.enforced_limit_w": lambda nv, h: _watts(nv.nvmlDeviceGetEnforcedPowerLimit(h)),
    "power.usage_w": lambda nv, h: _watts(nv.nvmlDeviceGetPowerUsage(h)),
    "fabric.state": lambda nv, h: _fabric(nv, h)["state"],
    "fabric.status": lambda nv, h: _fabric(nv, h)["status"],
    "bar1.total_bytes": lambda nv, h: int(nv.nvmlDeviceGetBAR1MemoryInfo(h).bar1Total),
}


# ---------------------------------------------------------------------------------------- replay

class ReplayNvml:
    """Answers from a recorded (or hand-written) `gpus` section.

    A field listed in a device's `errors` map raises `NvmlError` with the recorded text, exactly as
    the live call did; `unavailable` in the section makes `init()` fail the same way. Extra
    `inject` errors ({(index, field): reason}, index None for system/pair fields) let tests break
    any single call.
    """

    name = "replay"
    records_processes = True  # the recorded processes already say which were ours

    def __init__(self, section: dict, inject: Optional[dict] = None, init_error: Optional[NvmlUnavailable] = None):
        self.section = section or {}
        self.inject = dict(inject or {})
        self.init_error = init_error
        self.shut = False

    def init(self) -> None:
        if self.init_error is not None:
            raise self.init_error
        if self.section.get("unavailable"):
            raise NvmlUnavailable(self.section.get("reason", "init_failed"), self.section["unavailable"],
                                  self.section.get("nvml_error", ""))

    def shutdown(self) -> None:
        self.shut = True

    def count(self) -> int:
        self._maybe_fail(None, "count")
        return len(self.section.get("devices") or [])

    def system(self, field: str) -> Any:
        self._maybe_fail(None, field)
        errors = self.section.get("errors") or {}
        if field in errors:
            raise NvmlError(errors[field])
        return self.section.get(field)

    def device(self, index: int, field: str) -> Any:
        self._maybe_fail(index, field)
        dev = (self.section.get("devices") or [])[index]
        errors = dev.get("errors") or {}
        if field in errors:
            raise NvmlError(errors[field])
        return dig(dev, field)

    def pair(self, a: int, b: int, field: str) -> Any:
        self._maybe_fail((a, b), field)
        for p in self.section.get("pairs") or []:
            if {p.get("a"), p.get("b")} == {a, b}:
                errors = p.get("errors") or {}
                if field in errors:
                    raise NvmlError(errors[field])
                return dig(p, field)
        raise NvmlError("Not Found", NOT_FOUND)

    def _maybe_fail(self, where: Any, field: str) -> None:
        reason = self.inject.get((where, field))
        if reason is not None:
            if isinstance(reason, BaseException):
                raise reason
            raise NvmlError(str(reason))


def dig(d: dict, dotted: str) -> Any:
    cur: Any = d
    for part in dotted.split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


def put(d: dict, dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    cur = d
    for part in parts[:-1]:
        cur = cur.setdefault(part, {})
    cur[parts[-1]] = value
