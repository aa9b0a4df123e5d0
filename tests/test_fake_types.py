"""The fakes carry the real libraries' types (issue 26): a snapshot taken on a real GPU host must replay.

torch: the fields of `torch.cuda.get_device_properties(i)` are read from the installed torch's own stubs
(torch/_C/__init__.pyi, class _CudaDeviceProperties) and, for the fields the stubs omit, from how the
installed torch itself uses them (torch/numa/binding.py formats pci_bus_id with `:02x`: an int). The fake
CUDA torch in tests/fake_torch must have exactly those types, and the `torch` section's schema must
declare them. NVML: the fake is the C library under the real nvidia-ml-py (tests/fake_nvml.py), so the
types come from pynvml's own wrappers and ctypes structures; what LiveNvml makes of them must match the
`gpus` schema, field by field.
"""
from __future__ import annotations

import ast
import contextlib
import ctypes
import importlib.util
import io
import json
import os
import sys

import pytest
import pynvml
from click.testing import CliRunner
from fake_nvml import FakeGpu, FakeNvmlLibrary

from ddpdoctor.gather import INT, NUM, STR, BOOL, LIST, OBJ, Sources
from ddpdoctor.gather import gpus as gpus_gatherer
from ddpdoctor.gather import torchinfo
from ddpdoctor.gather.gpus import gather_with
from ddpdoctor.gather.nvml import DEVICE_FIELDS, LiveNvml, dig
from ddpdoctor.pipeline.snapshot import Snapshot

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAKE_TORCH = os.path.join(ROOT, "tests", "fake_torch")
PY_TO_JSON = {int: INT, float: NUM, str: STR, bool: BOOL, list: LIST, dict: OBJ}


def _torch_dir() -> str:
    spec = importlib.util.find_spec("torch")
    return os.path.dirname(spec.origin)


def stub_fields() -> dict:
    """name -> Python type of `_CudaDeviceProperties` in the installed torch's stubs."""
    with open(os.path.join(_torch_dir(), "_C", "__init__.pyi"), encoding="utf-8") as fh:
        tree = ast.parse(fh.read())
    aliases = {"_int": int, "int": int, "str": str, "_bool": bool, "bool": bool, "_float": float, "float": float}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "_CudaDeviceProperties":
            return {st.target.id: aliases[ast.unparse(st.annotation)] for st in node.body
                    if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)}
    raise AssertionError("torch's stubs no longer declare _CudaDeviceProperties")


def fields_torch_formats_as_ints() -> set:
    """The device-property attributes the installed torch formats with an integer format spec (x, d)."""
    with open(os.path.join(_torch_dir(), "numa", "binding.py"), encoding="utf-8") as fh:
        tree = ast.parse(fh.read())
    names = {}  # local name -> attribute of device_properties
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute) and \
                isinstance(node.value.value, ast.Name) and node.value.value.id == "device_properties":
            names[node.targets[0].id] = node.value.attr
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FormattedValue) and isinstance(node.value, ast.Name) and node.format_spec is not None:
            spec = ast.unparse(node.format_spec)
            if spec.rstrip("'\"").endswith(("x", "d")) and node.value.id in names:
                out.add(names[node.value.id])
    return out


@contextlib.contextmanager
def fake_torch(monkeypatch, devices=None, cuda="12.1"):
    """The fake CUDA torch in place of the real one, for code that imports torch in this process."""
    if devices is not None:
        monkeypatch.setenv("DDPDOCTOR_FAKE_TORCH_DEVICES", json.dumps(devices))
    monkeypatch.setenv("DDPDOCTOR_FAKE_TORCH_CUDA", cuda)
    saved = {k: v for k, v in sys.modules.items() if k == "torch" or k.startswith("torch.")}
    for k in saved:
        monkeypatch.delitem(sys.modules, k)
    monkeypatch.syspath_prepend(FAKE_TORCH)
    try:
        yield
    finally:
        for k in [k for k in sys.modules if k == "torch" or k.startswith("torch.")]:
            del sys.modules[k]
        sys.modules.update(saved)


def torch_section_from_fake(monkeypatch, devices=None) -> dict:
    """The torch gatherer's script, run here against the fake CUDA torch (what it prints on a GPU host)."""
    out = io.StringIO()
    with fake_torch(monkeypatch, devices), contextlib.redirect_stdout(out):
        exec(compile(torchinfo._SCRIPT, "torchinfo", "exec"), {})
    return json.loads(out.getvalue().strip().splitlines()[-1])


# ----------------------------------------------------------------------------------------- torch

def test_the_fake_torch_device_properties_have_the_stub_types(monkeypatch):
    stubs = stub_fields()
    assert {"name", "major", "minor", "total_memory", "uuid"} <= set(stubs)
    with fake_torch(monkeypatch):
        import torch

        props = torch.cuda.get_device_properties(0)
        for name, kind in stubs.items():
            if name == "uuid":
                # the stubs say str; the binding returns a _CUuuid (Module.cpp: py::class_<CUuuid>(m, "_CUuuid")
                # with __str__), which is what the gatherers str()
                assert str(props.uuid).count("-") == 4 and not str(props.uuid).startswith("GPU-")
                continue
            assert type(getattr(props, name)) is kind, (name, type(getattr(props, name)), kind)


def test_the_fields_beyond_the_stubs_are_ints_in_torch_itself(monkeypatch):
    as_ints = fields_torch_formats_as_ints()
    assert {"pci_bus_id", "pci_device_id", "pci_domain_id"} <= as_ints
    with fake_torch(monkeypatch):
        import torch

        props = torch.cuda.get_device_properties(0)
        for name in as_ints:
            assert type(getattr(props, name)) is int, name


def test_the_torch_schema_declares_the_binding_types():
    stubs = stub_fields()
    fields = torchinfo.FIELDS
    assert fields["devices[].name"] == PY_TO_JSON[stubs["name"]]
    assert fields["devices[].total_memory"] == PY_TO_JSON[stubs["total_memory"]]
    assert fields["devices[].capability[]"] == PY_TO_JSON[stubs["major"]]
    for name in fields_torch_formats_as_ints():
        assert fields[f"devices[].{name}"] == INT, name  # was STR for pci_bus_id: the issue-26 bug


def test_a_torch_section_from_a_cuda_host_replays(monkeypatch):
    """Before the fix: `check --snapshot` refused it ("was the snapshot edited by hand?")."""
    section = torch_section_from_fake(monkeypatch)
    dev = section["devices"][1]
    assert dev["pci_bus_id"] == 8 and isinstance(dev["pci_bus_id"], int)
    doc = {"schema": "ddpdoctor/snapshot/1", "sections": {"torch": section}}
    Snapshot.from_dict(doc)  # raises SnapshotError on a type the schema does not declare


def test_check_replays_a_snapshot_recorded_through_the_real_gatherers(monkeypatch, tmp_path):
    """The live path on this CPU machine: the real nvidia-ml-py over the C-level fake driver for `gpus`,
    the torch gatherer's script over the fake CUDA torch, the rest of this machine as it is; written by
    `ddpdoctor snapshot` and judged by `ddpdoctor check --snapshot`."""
    from ddpdoctor.cli import cli
    from ddpdoctor.pipeline.snapshot import live_snapshot

    FakeNvmlLibrary([FakeGpu(bus_id="00000000:07:00.0", uuid="GPU-6f1c2a7e-0000-4000-8000-00000000d0c7"),
                     FakeGpu(bus_id="00000000:08:00.0", uuid="GPU-" + "1" * 32)]).install(monkeypatch)
    snap = live_snapshot(Sources(environ={"PATH": "/usr/bin"}))
    snap.sections["torch"] = torch_section_from_fake(monkeypatch)
    for name in ("host", "env", "packages", "launcher", "gpus", "pci"):
        snap.get(name)
    path = tmp_path / "snap.json"
    path.write_text(snap.dumps())
    out = CliRunner().invoke(cli, ["check", "--snapshot", str(path), "--json"])
    assert out.exit_code in (0, 1), out.output
    report = json.loads(out.output)
    assert not [f for f in report["findings"] if f["id"] == "DOC001"]


# ------------------------------------------------------------------------------------------ NVML

def _json_type(value):
    return PY_TO_JSON.get(type(value))


def test_every_nvml_field_the_real_binding_returns_has_its_schema_type(monkeypatch):
    fields = gpus_gatherer.FIELDS
    FakeNvmlLibrary([FakeGpu(mig=(0, 0), nvlinks=[(1, "00000000:08:00.0")], fabric=(3, 0, 7),
                             processes=[(4242, 2 ** 30)])]).install(monkeypatch)
    section = gather_with(LiveNvml(), Sources(environ={}, root="/nonexistent"))
    dev = section["devices"][0]
    assert not dev.get("errors"), dev.get("errors")
    for field in DEVICE_FIELDS:
        value = dig(dev, field)
        assert value is not None, field
        declared = fields.get(f"devices[].{field}")
        if declared is None:  # a compound field (processes, remapped_rows, ...): its parts are declared
            assert isinstance(value, (list, dict)), field
            continue
        got = _json_type(value)
        assert got == declared or (declared == NUM and got == INT), (field, value, declared)
    assert dev["fabric"] == {"state": "COMPLETED", "status": "Success"}
    assert Snapshot.from_dict({"schema": "ddpdoctor/snapshot/1", "sections": {"gpus": section}})


def test_the_fake_library_answers_through_pynvml_own_structures(monkeypatch):
    """pynvml's wrappers built these values: a ctypes struct for the PCI info, bytes decoded by pynvml."""
    FakeNvmlLibrary([FakeGpu()]).install(monkeypatch)
    pynvml.nvmlInit()
    try:
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        info = pynvml.nvmlDeviceGetPciInfo(h)
        assert isinstance(info, ctypes.Structure) and type(info) is pynvml.nvmlPciInfo_t
        assert isinstance(pynvml.nvmlDeviceGetName(h), str)  # convertStrBytes: str, never bytes
        assert isinstance(info.busId, (bytes, str))
        with pytest.raises(pynvml.NVMLError_NotSupported):
            pynvml.nvmlDeviceGetMigMode(h)
    finally:
        pynvml.nvmlShutdown()


def test_a_lost_gpu_is_one_state_not_a_second_model(monkeypatch):
    """Issue 26, bug 3: was 'mixed GPU models (NVIDIA A100-SXM4-80GB, None)'."""
    from factory import findings_of, make_snapshot

    FakeNvmlLibrary([FakeGpu(name="NVIDIA A100 80GB PCIe"),
                     FakeGpu(name="NVIDIA A100 80GB PCIe", bus_id="00000000:08:00.0", lost=True)]).install(monkeypatch)
    section = gather_with(LiveNvml(), Sources(environ={}, root="/nonexistent"))
    assert section["devices"][1]["lost"] is True and "lost" not in section["devices"][0]
    found = findings_of(make_snapshot(gpus=section))
    assert [f.id for f in found if f.id == "GPU015"] == []
    [lost] = [f for f in found if f.id == "GPU021"]
    assert lost.severity == "error" and "gpu:1" in lost.subjects and "GPU is lost" in lost.title


def test_a_gpu_nvml_cannot_open_is_named_unreachable(monkeypatch):
    """nvidia-smi: 'Unable to determine the device handle for GPU0000:03:00.0: Unknown Error'
    (rwth-i6/returnn#1486): every call fails with the handle's error; one state, one finding."""
    from factory import findings_of, make_snapshot
    from fake_nvml import UNKNOWN

    FakeNvmlLibrary([FakeGpu(name="NVIDIA A100 80GB PCIe"),
                     FakeGpu(name="NVIDIA A100 80GB PCIe", bus_id="00000000:08:00.0", handle_error=UNKNOWN)]
                    ).install(monkeypatch)
    section = gather_with(LiveNvml(), Sources(environ={}, root="/nonexistent"))
    assert section["devices"][1]["unreachable"] == "Unknown Error" and "unreachable" not in section["devices"][0]
    found = findings_of(make_snapshot(gpus=section))
    assert [f.id for f in found if f.id in ("GPU015", "GPU025")] == []
    [cut] = [f for f in found if f.id == "GPU021"]
    assert cut.severity == "error" and "gpu:1" in cut.subjects and "unreachable" in cut.title
    assert "Unknown Error" in cut.title and "device handle" in cut.detail
