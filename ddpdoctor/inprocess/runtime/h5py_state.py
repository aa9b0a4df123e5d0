"""Open HDF5 objects in this process, from h5py's own registry (H5Fget_obj_ids), not a gc walk."""
from __future__ import annotations

import sys


def h5py_state() -> dict:
    if "h5py" not in sys.modules:
        return {"imported": False}
    h5py = sys.modules["h5py"]
    out = {"imported": True, "version": getattr(h5py, "__version__", None), "open_files": [], "open_datasets": 0}
    try:
        from h5py import h5f

        for fid in h5f.get_obj_ids(types=h5f.OBJ_FILE):
            name = fid.name
            out["open_files"].append(name.decode(errors="replace") if isinstance(name, bytes) else str(name))
        out["open_datasets"] = int(h5f.get_obj_count(types=h5f.OBJ_DATASET))
    except Exception as exc:  # noqa: BLE001
        out["error"] = f"{type(exc).__name__}: {exc}"
    out["open_files"] = sorted(set(out["open_files"]))
    return out


def h5py_kind(obj) -> str:
    """'File', 'Dataset' or 'Group' for an h5py high-level object, '' otherwise. No import of h5py."""
    h5py = sys.modules.get("h5py")
    if h5py is None:
        return ""
    for kind in ("File", "Dataset", "Group"):
        cls = getattr(h5py, kind, None)
        if cls is not None and isinstance(obj, cls):
            return kind
    return ""


def h5py_file_of(obj) -> str:
    try:
        return str(obj.file.filename)
    except Exception:  # noqa: BLE001 - a closed handle raises
        return ""
