"""facts.gpu.view is worked out once per snapshot and shared by every GPU check: that is only sound if no check
changes the view it is given. Pure tests on the recorded snapshots (fixtures/snapshots)."""
import dataclasses
import glob
import os

import pytest

from ddpdoctor.facts import gpu
from ddpdoctor.facts.cuda_map import CudaMap
from ddpdoctor.pipeline.runner import load_all, run_checks
from ddpdoctor.pipeline.snapshot import Snapshot

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = sorted(glob.glob(os.path.join(ROOT, "fixtures", "snapshots", "*.json")))
WITH_GPUS = [p for p in FIXTURES if (Snapshot.load(p).sections.get("gpus") or {}).get("devices")]


class _Frozen:
    """Setting an attribute after construction raises (a check that changed the shared view)."""

    def __setattr__(self, name, value):
        if getattr(self, "_frozen", False):
            raise AttributeError(f"a check set {type(self).__name__}.{name} on the shared view")
        object.__setattr__(self, name, value)


class FrozenMap(_Frozen, CudaMap):
    pass


class FrozenView(_Frozen, gpu.GpuView):
    pass


def frozen(v: gpu.GpuView) -> gpu.GpuView:
    """The view with every list a tuple (no append, sort, remove, item assignment) and no attribute settable."""
    c = v.cmap
    cmap = FrozenMap(**{f.name: getattr(c, f.name) for f in dataclasses.fields(c)})
    for name in ("visible", "problems", "ignored"):
        object.__setattr__(cmap, name, tuple(getattr(c, name)))
    cmap._frozen = True
    out = FrozenView(gpus=v.gpus, env=v.env, cmap=cmap, devices=tuple(v.devices), pairs=tuple(v.pairs))
    out._frozen = True
    return out


def findings(path: str) -> list:
    found, _skipped, _ran = run_checks(Snapshot.load(path))
    return sorted((f.id, tuple(f.subjects), f.title) for f in found)


@pytest.mark.parametrize("path", WITH_GPUS, ids=os.path.basename)
def test_every_check_judges_the_same_on_a_frozen_view(path, monkeypatch):
    """Trigger for a check that changes the view: its AttributeError/TypeError is a DOC001 (a crashed check)
    or a different verdict here; quiet: every check gives the same findings as on the view it may change."""
    load_all(plugins=False)
    plain = findings(path)
    real = gpu._view
    monkeypatch.setattr(gpu, "_view", lambda snap: frozen(real(snap)))
    got = findings(path)
    assert not [f for f in got if f[0] == "DOC001"], got
    assert got == plain


def test_frozen_view_refuses_changes():
    """The freezing above can fail: each change a check could make raises."""
    v = frozen(gpu.view(Snapshot.load(WITH_GPUS[0])))
    with pytest.raises(AttributeError):
        v.devices.append({})
    with pytest.raises(TypeError):
        v.pairs[0:0] = [{}]
    with pytest.raises(AttributeError):
        v.cmap.visible.sort()
    with pytest.raises(AttributeError):
        v.devices = []
    with pytest.raises(AttributeError):
        v.cmap.cvd = "0"


def test_the_view_is_kept_per_snapshot_while_its_sections_are_the_same():
    snap = Snapshot.load(WITH_GPUS[0])
    first = gpu.view(snap)
    assert gpu.view(snap) is first
    snap.sections["env"] = dict(snap.sections.get("env") or {}, vars={"CUDA_VISIBLE_DEVICES": "1"})
    second = gpu.view(snap)
    assert second is not first and second.cmap.cvd == "1"
    snap.sections["gpus"] = dict(snap.sections["gpus"])
    assert gpu.view(snap) is not second
    as_dict = {"gpus": snap.sections["gpus"], "env": snap.sections["env"]}  # a plain mapping: worked out each call
    assert gpu.view(as_dict) is not gpu.view(as_dict) and gpu.view(as_dict).cmap.cvd == "1"
