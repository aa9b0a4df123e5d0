"""A fake libnvidia-ml.so at the C ABI, under the real nvidia-ml-py.

Why at this level: a fake of pynvml's Python functions must guess what they return (a bytes busId or a
str? a tuple or a list? an int or a ctypes struct?) and can drift from the real binding without any
test noticing; that is how a snapshot with the wrong types shipped (issue 26). Here pynvml itself runs:
its wrappers build their real ctypes buffers and structures, call "the library", check the return
code, and convert the answer exactly as on a GPU host. Only the C functions are ours: each takes the
same arguments as in nvml.h and writes its answers through the pointers pynvml passes (`byref(x)` is a
ctypes CArgObject whose `_obj` is `x`), then returns an nvmlReturn_t.

    with FakeNvmlLibrary([FakeGpu(...), FakeGpu(...)]).installed(monkeypatch):
        section = gather_with(LiveNvml(), Sources(...))   # the live path, pynvml included

A GPU described with `lost=True` answers NVML_ERROR_GPU_IS_LOST (15) to every per-device call, as a GPU
that fell off the bus (Xid 79) does; `handle_error=UNKNOWN` makes nvmlDeviceGetHandleByIndex fail (nvidia-smi's
"Unable to determine the device handle for GPU...: Unknown Error"). `errors={"nvmlDeviceGetPcieReplayCounter": 3}` makes one call fail
with that code; `missing=("nvmlDeviceGetGpuFabricInfo",)` removes a symbol, as an older driver lacks it.
"""
from __future__ import annotations

import contextlib
import ctypes
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import pynvml

SUCCESS, INVALID_ARGUMENT, NOT_SUPPORTED, NOT_FOUND, INSUFFICIENT_SIZE, GPU_IS_LOST, UNKNOWN = 0, 2, 3, 6, 7, 15, 999


@dataclass
class FakeGpu:
    """One GPU as the driver would describe it (raw NVML values: milliwatts, enums as integers)."""

    name: str = "NVIDIA A100-SXM4-80GB"
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"
    bus_id: str = "00000000:07:00.0"
    pci_device_id: int = 0x20B210DE
    capability: Tuple[int, int] = (8, 0)
    memory_total: int = 80 * 2 ** 30
    memory_used: int = 4 * 2 ** 20
    bar1_total: int = 128 * 2 ** 30  # an A100 80GB's BAR1 aperture; 256 MiB on a card without resizable BAR
    processes: Sequence[Tuple[int, Optional[int]]] = ()  # (pid, used bytes or None)
    persistence: int = 1
    compute_mode: int = 0  # 0 DEFAULT, 1 EXCLUSIVE_THREAD, 2 PROHIBITED, 3 EXCLUSIVE_PROCESS
    mig: Optional[Tuple[int, int]] = None  # (current, pending); None: Not Supported
    ecc: Tuple[int, int] = (1, 1)
    ecc_volatile_uncorrected: int = 0
    ecc_aggregate_uncorrected: int = 0
    retired_pages_pending: int = 0
    remapped_rows: Tuple[int, int, int, int] = (0, 0, 0, 0)
    clocks_event_reasons: int = 0
    temperature: int = 33
    power_limit_mw: int = 400000
    default_power_limit_mw: int = 400000
    enforced_power_limit_mw: int = 400000
    power_usage_mw: int = 60000
    clocks_mhz: Dict[int, Tuple[int, int]] = field(default_factory=lambda: {0: (1410, 1410), 1: (1410, 1410),
                                                                            2: (1593, 1593)})  # type: current, max
    pcie: Tuple[int, int, int, int] = (4, 4, 16, 16)  # gen current, gen max, width current, width max
    pcie_replay_counter: int = 0
    numa_node: int = 0
    cpu_affinity: Sequence[int] = (0xFFFF,)  # 64-bit words
    nvlinks: Sequence[Tuple[int, Optional[str]]] = ()  # (active, remote busId)
    fabric: Optional[Tuple[int, int, int]] = None  # (state, status, clique id); None: Not Supported
    lost: bool = False
    handle_error: int = SUCCESS  # nvmlDeviceGetHandleByIndex's answer, e.g. UNKNOWN (999) for a failing board
    errors: Dict[str, int] = field(default_factory=dict)


@dataclass
class FakeNvmlLibrary:
    gpus: List[FakeGpu]
    driver_version: str = "535.161.08"
    cuda_driver_version: int = 12020
    init_error: int = SUCCESS
    topology: Dict[Tuple[int, int], int] = field(default_factory=dict)  # (a, b) -> level; default 20 (MULTIPLE)
    p2p: Dict[Tuple[int, int, int], int] = field(default_factory=dict)  # (a, b, index) -> status; default 0 (OK)
    missing: Sequence[str] = ()
    calls: List[str] = field(default_factory=list)
    p2p_indices: List[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._handles = [ctypes.c_int(i) for i in range(len(self.gpus))]

    # ----------------------------------------------------------------- plumbing
    @contextlib.contextmanager
    def installed(self, monkeypatch):
        """pynvml loads this object as its library (no dlopen) and forgets cached symbols after."""
        monkeypatch.setattr(pynvml, "nvmlLib", self)
        monkeypatch.setattr(pynvml, "_nvmlGetFunctionPointer_cache", {})
        yield self

    def install(self, monkeypatch) -> "FakeNvmlLibrary":
        monkeypatch.setattr(pynvml, "nvmlLib", self)
        monkeypatch.setattr(pynvml, "_nvmlGetFunctionPointer_cache", {})
        return self

    def __getattr__(self, name: str):
        if name.startswith("_") or name in self.missing:
            raise AttributeError(name)  # what ctypes raises for a symbol the library lacks
        handler = getattr(type(self), "c_" + name, None)
        if handler is None:
            raise AttributeError(name)

        def call(*args):
            self.calls.append(name)
            return handler(self, *args)

        return call

    def _gpu(self, handle) -> Tuple[int, FakeGpu]:
        addr = ctypes.cast(handle, ctypes.c_void_p).value
        for i, h in enumerate(self._handles):
            if ctypes.addressof(h) == addr:
                return i, self.gpus[i]
        raise KeyError(addr)

    def _device_call(self, name: str, handle, write) -> int:
        _i, gpu = self._gpu(handle)
        if gpu.lost:
            return GPU_IS_LOST
        if name in gpu.errors:
            return gpu.errors[name]
        result = write(gpu)
        return SUCCESS if result is None else result

    @staticmethod
    def _out(arg):
        return arg._obj  # byref(x) -> x

    # ----------------------------------------------------------------- system
    def c_nvmlInitWithFlags(self, flags):
        return self.init_error

    def c_nvmlShutdown(self):
        return SUCCESS

    def c_nvmlErrorString(self, code):
        return b"Unknown Error"  # pynvml names the codes it knows itself; only others reach the library

    def c_nvmlSystemGetDriverVersion(self, buf, size):
        buf.value = self.driver_version.encode()
        return SUCCESS

    def c_nvmlSystemGetCudaDriverVersion(self, out):
        self._out(out).value = self.cuda_driver_version
        return SUCCESS

    def c_nvmlSystemGetProcessName(self, pid, buf, size):
        return NOT_FOUND  # another PID namespace: NVML knows the PID, not its name

    def c_nvmlDeviceGetCount_v2(self, out):
        self._out(out).value = len(self.gpus)
        return SUCCESS

    def c_nvmlDeviceGetHandleByIndex_v2(self, index, out):
        i = index.value
        if i >= len(self.gpus):
            return INVALID_ARGUMENT
        if self.gpus[i].lost:
            return GPU_IS_LOST
        if self.gpus[i].handle_error:
            return self.gpus[i].handle_error
        pointer = self._out(out)  # a c_nvmlDevice_t: make it point at this GPU's handle storage
        pointer.contents = type(pointer)._type_.from_address(ctypes.addressof(self._handles[i]))
        return SUCCESS

    # ----------------------------------------------------------------- device
    def _simple(name, attr, convert=lambda v: v):  # noqa: N805 - a factory used in the class body
        def handler(self, handle, out):
            def write(gpu):
                self._out(out).value = convert(getattr(gpu, attr))
            return self._device_call(name, handle, write)
        return handler

    c_nvmlDeviceGetPersistenceMode = _simple("nvmlDeviceGetPersistenceMode", "persistence")
    c_nvmlDeviceGetComputeMode = _simple("nvmlDeviceGetComputeMode", "compute_mode")
    c_nvmlDeviceGetRetiredPagesPendingStatus = _simple("nvmlDeviceGetRetiredPagesPendingStatus", "retired_pages_pending")
    c_nvmlDeviceGetCurrentClocksEventReasons = _simple("nvmlDeviceGetCurrentClocksEventReasons", "clocks_event_reasons")
    c_nvmlDeviceGetPowerManagementLimit = _simple("nvmlDeviceGetPowerManagementLimit", "power_limit_mw")
    c_nvmlDeviceGetPowerManagementDefaultLimit = _simple("nvmlDeviceGetPowerManagementDefaultLimit",
                                                         "default_power_limit_mw")
    c_nvmlDeviceGetEnforcedPowerLimit = _simple("nvmlDeviceGetEnforcedPowerLimit", "enforced_power_limit_mw")
    c_nvmlDeviceGetPowerUsage = _simple("nvmlDeviceGetPowerUsage", "power_usage_mw")
    c_nvmlDeviceGetPcieReplayCounter = _simple("nvmlDeviceGetPcieReplayCounter", "pcie_replay_counter")
    c_nvmlDeviceGetNumaNodeId = _simple("nvmlDeviceGetNumaNodeId", "numa_node")
    c_nvmlDeviceGetCurrPcieLinkGeneration = _simple("nvmlDeviceGetCurrPcieLinkGeneration", "pcie", lambda p: p[0])
    c_nvmlDeviceGetMaxPcieLinkGeneration = _simple("nvmlDeviceGetMaxPcieLinkGeneration", "pcie", lambda p: p[1])
    c_nvmlDeviceGetCurrPcieLinkWidth = _simple("nvmlDeviceGetCurrPcieLinkWidth", "pcie", lambda p: p[2])
    c_nvmlDeviceGetMaxPcieLinkWidth = _simple("nvmlDeviceGetMaxPcieLinkWidth", "pcie", lambda p: p[3])
    del _simple

    def c_nvmlDeviceGetName(self, handle, buf, size):
        return self._device_call("nvmlDeviceGetName", handle, lambda g: setattr(buf, "value", g.name.encode()))

    def c_nvmlDeviceGetUUID(self, handle, buf, size):
        return self._device_call("nvmlDeviceGetUUID", handle, lambda g: setattr(buf, "value", g.uuid.encode()))

    def c_nvmlDeviceGetPciInfo_v3(self, handle, out):
        def write(gpu):
            info = self._out(out)
            info.busIdLegacy = gpu.bus_id.encode()[:15]
            info.busId = gpu.bus_id.encode()
            domain, bus, rest = gpu.bus_id.split(":")
            info.domain, info.bus, info.device = int(domain, 16), int(bus, 16), int(rest.split(".")[0], 16)
            info.pciDeviceId = gpu.pci_device_id
        return self._device_call("nvmlDeviceGetPciInfo_v3", handle, write)

    def c_nvmlDeviceGetCudaComputeCapability(self, handle, major, minor):
        def write(gpu):
            self._out(major).value, self._out(minor).value = gpu.capability
        return self._device_call("nvmlDeviceGetCudaComputeCapability", handle, write)

    def c_nvmlDeviceGetMemoryInfo(self, handle, out):
        def write(gpu):
            mem = self._out(out)
            mem.total, mem.used, mem.free = gpu.memory_total, gpu.memory_used, gpu.memory_total - gpu.memory_used
        return self._device_call("nvmlDeviceGetMemoryInfo", handle, write)

    def c_nvmlDeviceGetBAR1MemoryInfo(self, handle, out):
        def write(gpu):
            bar = self._out(out)
            bar.bar1Total, bar.bar1Used, bar.bar1Free = gpu.bar1_total, 0, gpu.bar1_total
        return self._device_call("nvmlDeviceGetBAR1MemoryInfo", handle, write)

    def c_nvmlDeviceGetComputeRunningProcesses_v3(self, handle, count, procs):
        def write(gpu):
            n = self._out(count)
            if procs is None or n.value < len(gpu.processes):
                n.value = len(gpu.processes)
                return INSUFFICIENT_SIZE if gpu.processes else SUCCESS
            for i, (pid, used) in enumerate(gpu.processes):
                procs[i].pid = pid
                procs[i].usedGpuMemory = used if used is not None else pynvml.NVML_VALUE_NOT_AVAILABLE_ulonglong.value
            n.value = len(gpu.processes)
            return SUCCESS
        return self._device_call("nvmlDeviceGetComputeRunningProcesses_v3", handle, write)

    def c_nvmlDeviceGetMigMode(self, handle, current, pending):
        def write(gpu):
            if gpu.mig is None:
                return NOT_SUPPORTED
            self._out(current).value, self._out(pending).value = gpu.mig
        return self._device_call("nvmlDeviceGetMigMode", handle, write)

    def c_nvmlDeviceGetEccMode(self, handle, current, pending):
        def write(gpu):
            self._out(current).value, self._out(pending).value = gpu.ecc
        return self._device_call("nvmlDeviceGetEccMode", handle, write)

    def c_nvmlDeviceGetTotalEccErrors(self, handle, error_type, counter_type, out):
        def write(gpu):
            aggregate = counter_type.value == pynvml.NVML_AGGREGATE_ECC
            self._out(out).value = gpu.ecc_aggregate_uncorrected if aggregate else gpu.ecc_volatile_uncorrected
        return self._device_call("nvmlDeviceGetTotalEccErrors", handle, write)

    def c_nvmlDeviceGetRemappedRows(self, handle, corr, unc, pending, failure):
        def write(gpu):
            for ptr, value in zip((corr, unc, pending, failure), gpu.remapped_rows):
                self._out(ptr).value = value
        return self._device_call("nvmlDeviceGetRemappedRows", handle, write)

    def c_nvmlDeviceGetTemperature(self, handle, sensor, out):
        return self._device_call("nvmlDeviceGetTemperature", handle,
                                 lambda g: setattr(self._out(out), "value", g.temperature))

    def c_nvmlDeviceGetClockInfo(self, handle, kind, out):
        def write(gpu):
            if kind.value not in gpu.clocks_mhz:
                return NOT_SUPPORTED
            self._out(out).value = gpu.clocks_mhz[kind.value][0]
        return self._device_call("nvmlDeviceGetClockInfo", handle, write)

    def c_nvmlDeviceGetMaxClockInfo(self, handle, kind, out):
        def write(gpu):
            if kind.value not in gpu.clocks_mhz:
                return NOT_SUPPORTED
            self._out(out).value = gpu.clocks_mhz[kind.value][1]
        return self._device_call("nvmlDeviceGetMaxClockInfo", handle, write)

    def c_nvmlDeviceGetCpuAffinity(self, handle, size, out):
        def write(gpu):
            words = self._out(out)
            for i in range(min(int(size), len(gpu.cpu_affinity))):
                words[i] = gpu.cpu_affinity[i]
        return self._device_call("nvmlDeviceGetCpuAffinity", handle, write)

    def c_nvmlDeviceGetNvLinkState(self, handle, link, out):
        def write(gpu):
            if not gpu.nvlinks:
                return NOT_SUPPORTED
            if int(link) >= len(gpu.nvlinks):
                return INVALID_ARGUMENT
            self._out(out).value = gpu.nvlinks[int(link)][0]
        return self._device_call("nvmlDeviceGetNvLinkState", handle, write)

    def c_nvmlDeviceGetNvLinkRemotePciInfo_v2(self, handle, link, out):
        def write(gpu):
            remote = gpu.nvlinks[int(link)][1]
            if remote is None:
                return NOT_SUPPORTED
            self._out(out).busId = remote.encode()
        return self._device_call("nvmlDeviceGetNvLinkRemotePciInfo_v2", handle, write)

    def c_nvmlDeviceGetGpuFabricInfo(self, handle, out):
        def write(gpu):
            if gpu.fabric is None:
                return NOT_SUPPORTED
            info = self._out(out)
            info.state, info.status, info.cliqueId = gpu.fabric
        return self._device_call("nvmlDeviceGetGpuFabricInfo", handle, write)

    def c_nvmlDeviceGetMaxMigDeviceCount(self, handle, out):
        return self._device_call("nvmlDeviceGetMaxMigDeviceCount", handle, lambda g: setattr(self._out(out), "value", 0))

    # ----------------------------------------------------------------- pairs
    def _pair_call(self, name: str, a_handle, b_handle, write) -> int:
        a, ga = self._gpu(a_handle)
        b, gb = self._gpu(b_handle)
        if ga.lost or gb.lost:
            return GPU_IS_LOST
        return write(min(a, b), max(a, b))

    def c_nvmlDeviceGetTopologyCommonAncestor(self, a, b, out):
        def write(i, j):
            self._out(out).value = self.topology.get((i, j), 20)
            return SUCCESS
        return self._pair_call("nvmlDeviceGetTopologyCommonAncestor", a, b, write)

    def c_nvmlDeviceGetP2PStatus(self, a, b, index, out):
        if not isinstance(index, int):  # ctypes refuses what nvml.h's nvmlGpuP2PCapsIndex_t is not
            raise ctypes.ArgumentError("argument 3: <class 'TypeError'>: Don't know how to convert parameter 3")
        self.p2p_indices.append(index)

        def write(i, j):
            self._out(out).value = self.p2p.get((i, j, int(index)), 0)
            return SUCCESS
        return self._pair_call("nvmlDeviceGetP2PStatus", a, b, write)
