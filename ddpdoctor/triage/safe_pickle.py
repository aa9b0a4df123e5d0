"""A pickle reader that builds only plain data: dict, list, tuple, set, str, bytes, int, float, bool, None.

Flight Recorder dumps are pickles of plain containers. A pickle can also name any importable
callable and call it while loading (`__reduce__`), which is how a malicious file runs code. Every
such path goes through `find_class` (GLOBAL, STACK_GLOBAL, INST, OBJ, and the copyreg extension
codes) or `persistent_load`; both refuse here, so loading never imports or calls anything.
"""
from __future__ import annotations

import io
import pickle
from typing import Any


class UnsafePickle(ValueError):
    """The pickle asks for a class or function: refused, nothing was executed."""


class _Restricted(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:  # noqa: D401 - pickle's hook
        raise UnsafePickle(f"pickle refers to {module}.{name}; only plain data is read")

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickle("pickle uses persistent ids; only plain data is read")


def loads(data: bytes) -> Any:
    """Plain data from a pickle, or UnsafePickle / ValueError (truncated, corrupt)."""
    try:
        return _Restricted(io.BytesIO(data)).load()
    except UnsafePickle:
        raise
    except (pickle.UnpicklingError, EOFError, IndexError, KeyError, TypeError, AttributeError, MemoryError,
            RecursionError, OverflowError, UnicodeDecodeError, struct_error()) as exc:
        raise ValueError(f"not a readable pickle: {type(exc).__name__}: {exc}") from None


def struct_error():
    import struct

    return struct.error
