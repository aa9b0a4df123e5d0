"""E3/E4: an HDF5 file opened in a Dataset's constructor, then shared with forked or spawned workers."""
from __future__ import annotations

import ast

from ..analysis import ModuleIndex, Scope
from ..names import dotted
from . import rule
from ._common import DATALOADER, DATASETS, spawn_sites, workers

H5_OPEN = {"h5py.File"}


def _is_dataset(index: ModuleIndex, klass: Scope) -> bool:
    bases = index.class_bases(klass)
    if any(b in DATASETS for b in bases):
        return True
    # A base we cannot resolve (imported from the user's own package) but named like one.
    return any(b.startswith("?") and b.endswith("Dataset") for b in bases) or (
        not bases and "__getitem__" in klass.functions and "Dataset" in klass.name)


def _lookup_root(value):
    """`h5py.File(p)["a"]["b"]` -> the File call node (lookups by name keep the file open)."""
    while isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Constant) \
            and isinstance(value.slice.value, str):
        value = value.value
    return value


def _loaded_with_workers(t, name: str) -> str:
    """Where a DataLoader of the run with workers reads a dataset of class `name` (built in the call, or bound to a
    name in the same or an enclosing scope), or ""."""
    for index in t.facts.indexes.values():
        for call in index.calls:
            if call.qual != DATALOADER and call.name != "DataLoader":
                continue
            if not workers(call, index=index):
                continue
            data = call.arg(0, "dataset")
            if isinstance(data, ast.Name):
                s = call.scope
                while s is not None and data.id not in s.values:
                    s = s.parent
                data = s.values.get(data.id) if s is not None else None
            if isinstance(data, ast.Call) and (dotted(data.func) or "").rsplit(".", 1)[-1] == name:
                return f"DataLoader with workers at line {call.line} of {index.path}"
    return ""


@rule("LINT005", "h5py-open-in-dataset-init", catalogue=("E3", "E4"))
def h5py_open_in_dataset_init(t):
    """An h5py.File opened in a Dataset's __init__ and kept open (or stored on self).

    What it checks
        In a class deriving from `torch.utils.data.Dataset` (or `IterableDataset`, or a class of
        this file that does), an `h5py.File(...)` call in `__init__` that is not closed there: not
        used as `with h5py.File(...) as f:` and never `.close()`d, or assigned to `self`.

    Why it matters
        The open handle travels with the dataset into every DataLoader worker. Under the spawn or
        forkserver start methods (every DataLoader inside an mp.spawn rank, macOS, Python 3.14 on
        Linux), the dataset is pickled and fails for certain: "TypeError: h5py objects cannot be
        pickled" (h5py/h5py#1512). Under fork, the workers share one HDF5 file state, which gave
        garbage data and "bad object header version number" with older HDF5 (pytorch/pytorch#11929,
        #11887); with h5py 3.16 we measured correct reads, so it stays a warning there.

    Example
        class H5Dataset(Dataset):
            def __init__(self, path):
                self.file = h5py.File(path, "r")

    Fix
        Read what you need in `__init__` with `with h5py.File(path, "r") as f: self.n = len(f["x"])`
        and open the file lazily in `__getitem__` (once per worker):
        `if self.file is None: self.file = h5py.File(self.path, "r")`.
    """
    index = t.index
    spawned = any(kind == "spawn" for _c, _t, kind in spawn_sites(index)) \
        or bool(index.start_methods & {"spawn", "forkserver"})
    for klass in [s for s in index.scopes if s.kind == "class"]:
        init = klass.functions.get("__init__")
        if init is None or not _is_dataset(index, klass):
            continue
        opened = [c for c in init.calls if c.qual in H5_OPEN and not c.with_item]
        if not opened:
            continue
        closed = {c.recv for c in init.calls if c.name == "close" and c.recv}
        for c in opened:
            holders = [a for a in init.assigns if a.call is c]
            names = [n for a in holders for n in a.targets if n]
            on_self = [n for n in names if n.startswith("self.")]
            if not holders:
                # A temporary: `np.asarray(h5py.File(p)["x"])` reads and lets go of the file. Only a
                # group/dataset looked up by name and stored keeps it open: `self.x = h5py.File(p)["x"]`.
                on_self = [n for a in init.assigns for n in a.targets
                           if n and n.startswith("self.") and _lookup_root(a.value) is c.node]
                if not on_self:
                    continue
            elif not on_self and all(n in closed for n in names):
                continue
            # kept on self indirectly: `f = h5py.File(...)`; `self.data = f["x"]`
            if not on_self:
                for a in init.assigns:
                    for n in a.targets:
                        if n and n.startswith("self.") and a.value is not None and any(
                                isinstance(x, ast.Name) and x.id in names for x in ast.walk(a.value)):
                            on_self.append(n)
            fed = _loaded_with_workers(t, klass.name)
            # A warning needs the workers shown: a DataLoader of the run with num_workers > 0 reads this dataset.
            sev = ("error" if spawned else "warning") if fed else "info"
            held = f" and stored as {on_self[0]}" if on_self else ""
            yield t.finding(
                sev, c.node,
                f"h5py.File opened in {klass.name}.__init__{held}; the open handle is shared with every "
                "DataLoader worker" + (" and cannot be pickled under spawn" if spawned else ""),
                detail=(f"{klass.name} opens an HDF5 file when it is constructed and keeps it open. Workers started "
                        "with spawn/forkserver must pickle the dataset and fail with \"h5py objects cannot be "
                        "pickled\"; forked workers share the parent's HDF5 state."),
                fix=("def __init__(self, path):\n"
                     "    self.path, self.file = path, None\n"
                     "    with h5py.File(path, \"r\") as f:\n"
                     "        self.length = len(f[\"data\"])\n\n"
                     "def __getitem__(self, i):\n"
                     "    if self.file is None:  # opened once per worker process\n"
                     "        self.file = h5py.File(self.path, \"r\")\n"
                     "    return self.file[\"data\"][i]"),
                evidence={"dataset": klass.name, "stored_as": on_self[0] if on_self else None,
                          "why": fed or "no DataLoader with workers over this dataset is seen in the files linted",
                          "spawned_workers": spawned, "holder": dotted(c.node.func)},
            )
