"""Small helpers shared by checks: reading env values from a snapshot the same way everywhere."""
from __future__ import annotations

from typing import Mapping, Optional

FALSY = {"", "0", "off", "false", "f", "no", "n"}


def env_of(snap) -> Mapping[str, str]:
    return (snap.get("env") or {}).get("vars") or {}


def env_int(env: Mapping[str, str], name: str) -> Optional[int]:
    """The integer value of `name`, or None when unset or not an integer (another check reports that)."""
    raw = env.get(name)
    if raw is None:
        return None
    try:
        return int(str(raw).strip())
    except ValueError:
        return None


def truthy(value: Optional[str]) -> bool:
    """How tokenizers and most HF libraries read a boolean env var: anything but the falsy set is on."""
    return value is not None and value.strip().lower() not in FALSY
