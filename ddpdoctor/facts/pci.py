"""PCI bus IDs, normalised so NVML's and sysfs's spellings compare equal."""
from __future__ import annotations


def norm_bdf(bdf: str) -> str:
    """"00000000:07:00.0" (NVML) and "0000:07:00.0" (sysfs) -> "0000:07:00.0"."""
    bdf = str(bdf or "").strip().lower()
    dom, _, rest = bdf.partition(":")
    if not rest:
        return bdf
    try:
        return f"{int(dom, 16):04x}:{rest}"
    except ValueError:
        return bdf


def torch_bdf(dev: dict) -> str:
    """The PCI address of a torch device record ({"pci_domain_id": 0, "pci_bus_id": 7,
    "pci_device_id": 0}: cudaDeviceProp's integers), spelt as norm_bdf spells NVML's and sysfs's:
    "0000:07:00.0" (function 0, as torch/numa/binding.py formats it). "" when torch did not say."""
    dom, bus, slot = dev.get("pci_domain_id"), dev.get("pci_bus_id"), dev.get("pci_device_id")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (bus, slot)):
        return ""
    return f"{dom if isinstance(dom, int) else 0:04x}:{bus:02x}:{slot:02x}.0"


def same_uuid(torch_uuid, nvml_uuid) -> bool:
    """torch prints a GPU UUID without NVML's "GPU-" prefix."""
    a, b = str(torch_uuid or "").lower(), str(nvml_uuid or "").lower()
    return bool(a and b) and a.removeprefix("gpu-") == b.removeprefix("gpu-")
