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
