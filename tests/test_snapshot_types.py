"""Every field of a recorded snapshot is type-checked the same way (issue 13): a string where a number
is expected is rejected with exit 2 naming the field, for `memory.used_bytes` as for `link`."""
import copy
import glob
import json
import os
import subprocess
import sys

import pytest

from ddpdoctor.gather import schema
from ddpdoctor.pipeline.shapes import COMMON, _steps, _values
from ddpdoctor.pipeline.snapshot import Snapshot, SnapshotError
from mutate import replaced

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = sorted(glob.glob(os.path.join(ROOT, "fixtures", "snapshots", "*.json")))


def declared() -> dict:
    fields = dict(schema()[0])
    for section in {p.partition(".")[0] for p in fields}:
        for key, kind in COMMON.items():
            fields.setdefault(f"{section}.{key}", kind)
    return fields


def leaves(node, path):
    """(path, value) of every value below a section, containers included, in shapes' path syntax."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield f"{path}.{k}", v
            yield from leaves(v, f"{path}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield f"{path}[{i}]", v
            yield from leaves(v, f"{path}[{i}]")


def covered(sections: dict) -> set:
    out = set()
    for pattern in declared():
        section, _, rest = pattern.partition(".")
        if isinstance(sections.get(section), dict):
            out |= {path for path, _, _ in _values(sections[section], _steps(rest), section)}
    return out


def known_sections(sections: dict) -> dict:
    names = {p.partition(".")[0] for p in declared()}
    return {k: v for k, v in sections.items() if k in names}


def _live() -> dict:
    from ddpdoctor.pipeline.snapshot import live_snapshot

    return json.loads(live_snapshot().gather_all().dumps())


@pytest.mark.parametrize("path", FIXTURES, ids=[os.path.basename(p) for p in FIXTURES])
def test_every_recorded_field_has_a_declared_type(path):
    _covers_every_field(json.load(open(path)))


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_every_field_of_a_live_snapshot_has_a_declared_type():
    _covers_every_field(_live())  # the torch section comes from a subprocess


def _covers_every_field(doc):
    sections = known_sections(doc["sections"])
    every = {p for name, sec in sections.items() for p, v in leaves(sec, name) if v is not None}  # null: "unknown"
    assert not every - covered(sections), sorted(every - covered(sections))[:20]


def _wrong(value):
    if isinstance(value, bool):
        return "true"
    if isinstance(value, (int, float)):
        return str(value)  # a string where a number is expected
    if isinstance(value, str):
        return 12345
    return "not a container"


@pytest.mark.parametrize("name", ["dgx-a100-torchrun-worker", "pcie-switch-acs-2x-l40s", "a100-mig",
                                  "slurm-step-4-tasks-4-gpus", "recorded-cpu-sandbox", "rtx4090-4x-no-p2p"])
def test_a_wrong_type_anywhere_is_rejected_naming_the_field(name):
    doc = json.load(open(os.path.join(ROOT, "fixtures", "snapshots", f"{name}.json")))
    sections = known_sections(doc["sections"])
    paths = sorted(p for p in covered(sections) if "[" in p or "." in p)
    checked = 0
    pristine = copy.deepcopy(doc)
    for path in paths:
        try:
            bad = replaced(doc, ("sections", *_keys(path)), _wrong(_get(doc["sections"], path)))
        except (KeyError, IndexError, TypeError):
            continue
        if _get(doc["sections"], path) is None:
            continue
        with pytest.raises(SnapshotError) as exc:
            Snapshot.from_dict(bad)
        assert f"field {path} " in str(exc.value) or f"field {path}." in str(exc.value) \
            or f"field {path}[" in str(exc.value), (path, str(exc.value))
        checked += 1
    assert checked > 20
    assert doc == pristine, "loading a snapshot changed the document it was given"


def _keys(path):
    """'gpus.devices[0].name' -> ['gpus', 'devices', 0, 'name']."""
    import re

    return [int(part[1:-1]) if part.startswith("[") else part for part in re.findall(r"[^.\[\]]+|\[\d+\]", path)]


def _get(sections, path):
    node = sections
    for key in _keys(path):
        node = node[key]
    return node


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_cli_rejects_a_string_used_bytes_in_one_line(tmp_path):
    doc = json.load(open(os.path.join(ROOT, "fixtures", "snapshots", "dgx-a100-8x-nvswitch.json")))
    doc["sections"]["gpus"]["devices"][2]["memory"]["used_bytes"] = "4 MiB"
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(doc))
    res = subprocess.run([sys.executable, "-m", "ddpdoctor", "check", "--snapshot", str(path)], capture_output=True,
                         text=True, timeout=90)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.count("\n") == 1 and "gpus.devices[2].memory.used_bytes" in res.stderr
