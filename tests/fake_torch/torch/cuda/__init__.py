import json as _json
import os as _os

from . import nccl  # noqa: F401


class _CUuuid:
    """torch._C._CUuuid: `bytes` (16 ints) and str() "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (no "GPU-")."""

    def __init__(self, text: str):
        self._hex = text.lower().replace("gpu-", "").replace("-", "")

    @property
    def bytes(self):
        return [int(self._hex[i:i + 2], 16) for i in range(0, 32, 2)]

    def __str__(self) -> str:
        h = self._hex
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


class _CudaDeviceProperties:
    """torch._C._CudaDeviceProperties, read-only, with the binding's field types."""

    def __init__(self, spec: dict):
        self.name = str(spec.get("name", "NVIDIA A100-SXM4-80GB"))
        self.major = int(spec.get("major", 8))
        self.minor = int(spec.get("minor", 0))
        self.multi_processor_count = int(spec.get("multi_processor_count", 108))
        self.total_memory = int(spec.get("total_memory", 85095874560))
        self.is_integrated = int(spec.get("is_integrated", 0))
        self.is_multi_gpu_board = int(spec.get("is_multi_gpu_board", 0))
        self.max_threads_per_multi_processor = int(spec.get("max_threads_per_multi_processor", 2048))
        self.gcnArchName = self.name  # HIP-only; CUDA builds reuse the name
        self.warp_size = 32
        self.regs_per_multiprocessor = 65536
        self.L2_cache_size = int(spec.get("L2_cache_size", 41943040))
        self.clock_rate = int(spec.get("clock_rate", 1410000))
        self.memory_clock_rate = int(spec.get("memory_clock_rate", 1593000))
        self.memory_bus_width = int(spec.get("memory_bus_width", 5120))
        self.shared_memory_per_block = 49152
        self.shared_memory_per_multiprocessor = 167936
        self.pci_bus_id = int(spec.get("pci_bus_id", 7))
        self.pci_device_id = int(spec.get("pci_device_id", 0))
        self.pci_domain_id = int(spec.get("pci_domain_id", 0))
        self.uuid = _CUuuid(spec.get("uuid", "GPU-6f1c2a7e-0000-4000-8000-00000000d0c7"))


def _devices() -> list:
    raw = _os.environ.get("DDPDOCTOR_FAKE_TORCH_DEVICES")
    return _json.loads(raw) if raw else [{}, {"pci_bus_id": 8, "uuid": "GPU-" + "1" * 32}]


def is_available() -> bool:
    return bool(_devices())


def is_initialized() -> bool:
    return False


def device_count() -> int:
    return len(_devices())


def get_device_properties(i: int) -> _CudaDeviceProperties:
    return _CudaDeviceProperties(_devices()[i])
