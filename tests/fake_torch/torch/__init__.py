"""A CUDA build of torch, faked for CPU machines: what `ddpdoctor`'s torch gatherers call, no more.

The device properties are a stand-in for torch's `_CudaDeviceProperties` binding with the same field
types (tests/test_fake_types.py holds them to the stubs of the installed torch, torch/_C/__init__.pyi,
and to the fields torch binds beyond the stubs). Devices come from DDPDOCTOR_FAKE_TORCH_DEVICES (JSON,
a list of {name, major, minor, total_memory, pci_domain_id, pci_bus_id, pci_device_id, uuid}); the CUDA
build from DDPDOCTOR_FAKE_TORCH_CUDA (default "12.1"). Put tests/fake_torch first on PYTHONPATH.
"""
import os as _os

from . import version  # noqa: F401
from . import cuda  # noqa: F401
from . import distributed  # noqa: F401
from . import multiprocessing  # noqa: F401

__version__ = version.__version__


def get_num_threads() -> int:
    return 8
