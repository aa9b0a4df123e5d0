"""Round 15 wave 2, issue 27: the two RT003 cases under `ddpdoctor run` that round 15 left, pure (recorded facts, a
made-up loader and report; no process).
(a) A rank whose DataLoader iterator (and its workers) began before init_process_group: the recorder's hook saw the
    loader before preflight existed; preflight's save reads the note again with that loader's facts.
(b) RT003 folded into the static A5 finding (ENV005, the rank variables set by hand): its note is kept aside and
    comes back at the first DataLoader only as the warning, which adds a fact the static finding lacks (the spawned
    workers); preflight itself keeps such a warning beside ENV005 instead of folding it (`beyond_static`)."""
import json
import multiprocessing

import pytest

from ddpdoctor.checks.rt.launcher import rank_started_by_mp_spawn
from ddpdoctor.inprocess.preflight import rt003_at_loader
from ddpdoctor.run import recorder


def _rt003(workers=0, start_method="spawn"):
    snap = {"runtime": {"started_by": "multiprocessing.spawn", "mp_process_name": "SpawnProcess-2",
                        "start_method": start_method, "distributed": {"initialized": True, "world_size": 2}}}
    if workers:
        snap["runtime_data"] = {"num_workers": workers, "start_method": start_method, "source": "dataloader"}
    (f,) = rank_started_by_mp_spawn(snap)
    return f.stamped("RT003", "rank-started-by-mp-spawn", "launcher")


ENV005 = {"id": "ENV005", "severity": "warning", "title": "WORLD_SIZE=2 set by hand", "subjects": ["LOCAL_RANK"],
          "evidence": {}}


class _Report:
    def __init__(self, findings, folded_rt003=None):
        self.findings = [type("F", (), {"to_dict": (lambda self, d=d: d)})() for d in findings]
        self.extra = {"preflight": {"folded": {"RT003": ["ENV005"]}, "folded_rt003": folded_rt003}} \
            if folded_rt003 else {}


@pytest.fixture
def rank_state(tmp_path, monkeypatch):
    for name, value in (("dir", str(tmp_path)), ("pid", 4242), ("rank", 0), ("preflight_saved", None), ("dl", None),
                        ("dl_mp", None)):
        monkeypatch.setattr(recorder.S, name, value)
    return tmp_path / "preflight.4242.json"


def _rt003_severities(path):
    return [f["severity"] for f in json.loads(path.read_text())["findings"] if f["id"] == "RT003"]


# (a) the loader before init_process_group

def test_a_loader_with_spawned_workers_seen_before_preflight_is_read_at_its_save(rank_state, capsys):
    recorder.S.dl, recorder.S.dl_mp = {"n": 3, "workers": 2}, None  # the hook saw it; the process's method: spawn
    recorder._save_preflight(_Report([ENV005 | {"id": "RT004"}, _rt003().to_dict()]))
    assert _rt003_severities(rank_state) == ["warning"]
    assert recorder.S.preflight_saved is None  # read once
    assert "warning RT003" in capsys.readouterr().err


@pytest.mark.parametrize("dl,mp", [({"n": 3, "workers": 0}, None), ({"n": 3, "workers": 2}, "fork"), (None, None)])
def test_no_workers_a_forked_loader_or_no_loader_yet_leave_the_note(rank_state, dl, mp):
    recorder.S.dl, recorder.S.dl_mp = dl, mp
    recorder._save_preflight(_Report([_rt003().to_dict()]))
    assert _rt003_severities(rank_state) == ["info"]
    # no loader seen yet (or one without workers): the note still waits for the first loader with workers
    assert (recorder.S.preflight_saved is not None) == (mp is None)


# (b) RT003 folded into the static A5 finding

def test_a_folded_note_comes_back_as_the_warning_at_the_first_loader(rank_state):
    recorder._save_preflight(_Report([ENV005], folded_rt003=_rt003().to_dict()))
    assert recorder.S.preflight_saved is not None and _rt003_severities(rank_state) == []
    recorder._loader_preflight(type("L", (), {"num_workers": 2, "multiprocessing_context": None})())
    got = json.loads(rank_state.read_text())["findings"]
    assert [f["id"] for f in got] == ["ENV005", "RT003"]  # after the static finding, not instead of it
    assert got[1]["severity"] == "warning" and "spawns 2 workers" in got[1]["title"]
    assert got[1]["evidence"]["beyond_static"] and got[1]["evidence"]["seen_at"]


def test_a_folded_note_stays_folded_without_spawned_workers():
    note = _rt003().to_dict()
    assert rt003_at_loader([ENV005], 2, "fork", folded=note) is None
    assert rt003_at_loader([ENV005], 0, None, folded=note) is None
    assert rt003_at_loader([ENV005], 2, None, folded=_rt003(start_method="fork").to_dict()) is None
    assert rt003_at_loader([ENV005], 2, None) is None  # nothing folded, nothing noted


def test_preflight_folds_the_note_but_keeps_the_warning_beside_the_static_finding():
    from ddpdoctor.model import Report, warning
    from ddpdoctor.pipeline.runner import load_all
    from ddpdoctor.preflight import fold_sharpened

    load_all(plugins=False)
    static = warning("WORLD_SIZE=2 set by hand", subjects=["LOCAL_RANK"]).stamped("ENV005", "ranks-set-by-hand",
                                                                                    "launcher")
    dropped = []
    note = Report(command="preflight", findings=[static, _rt003()])
    assert fold_sharpened(note, dropped) == {"RT003": ["ENV005"]} and [f.id for f in dropped] == ["RT003"]
    warned = Report(command="preflight", findings=[static, _rt003(workers=2)])
    assert fold_sharpened(warned) == {} and [f.id for f in warned.findings] == ["ENV005", "RT003"]
    assert warned.findings[1].severity == "warning"
