"""A fake libcuda.so.1 at the C ABI (the functions ddpdoctor.gather.cuda calls, with ctypes arguments),
so the gatherer's real code path runs: cuInit's result, cuGetErrorName writing a const char*, the
device count and driver version written through pointers."""
from __future__ import annotations

import ctypes


class FakeLibcuda:
    NAMES = {0: b"CUDA_SUCCESS", 34: b"CUDA_ERROR_STUB_LIBRARY", 100: b"CUDA_ERROR_NO_DEVICE",
             802: b"CUDA_ERROR_SYSTEM_NOT_READY", 803: b"CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", 999: b"CUDA_ERROR_UNKNOWN"}

    def __init__(self, init_result: int = 0, devices: int = 8, driver_version: int = 12020):
        self.init_result, self.devices, self.version = init_result, devices, driver_version
        self._names = {k: ctypes.c_char_p(v) for k, v in self.NAMES.items()}

    def cuInit(self, flags):  # noqa: N802 - the C name
        return self.init_result

    def cuGetErrorName(self, code, out):  # noqa: N802
        if code not in self._names:
            return 1
        out._obj.value = self._names[code].value
        return 0

    def cuDeviceGetCount(self, out):  # noqa: N802
        out._obj.value = self.devices
        return 0 if self.init_result == 0 else 3

    def cuDriverGetVersion(self, out):  # noqa: N802
        out._obj.value = self.version
        return 0
