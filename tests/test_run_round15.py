"""Round 15, issue 27 (C): RT003 read again at a rank's first DataLoader with workers, from the recorder's
DataLoader hook (under `ddpdoctor run` a plain loop's preflight runs before its DataLoader exists). Pure:
recorded facts and a made-up loader, no process."""
import json
import multiprocessing

from ddpdoctor.checks.rt.launcher import rank_started_by_mp_spawn
from ddpdoctor.inprocess.preflight import rt003_at_loader
from ddpdoctor.run import recorder


def _note(start_method="spawn"):
    """RT003's note as a rank's preflight saved it (no DataLoader yet), beside another finding."""
    snap = {"runtime": {"started_by": "multiprocessing.spawn", "mp_process_name": "SpawnProcess-2",
                        "start_method": start_method, "distributed": {"initialized": True, "world_size": 2}}}
    (f,) = rank_started_by_mp_spawn(snap)
    assert f.severity == "info"
    other = {"id": "RT004", "severity": "warning", "title": "threads", "subjects": ["rank:1"], "evidence": {}}
    return [other, dict(f.to_dict(), id="RT003", name="rank-started-by-mp-spawn", family="launcher")]


def test_spawned_workers_turn_the_note_into_a_warning():
    got = rt003_at_loader(_note(), 2, None)  # no context of its own: the rank's start method, spawn
    assert got is not None and got[0]["id"] == "RT004"
    assert got[1]["id"] == "RT003" and got[1]["severity"] == "warning" and "spawns 2 workers" in got[1]["title"]
    assert got[1]["evidence"]["dataloader_workers"] == 2 and got[1]["name"] == "rank-started-by-mp-spawn"


def test_forked_or_no_workers_or_no_note_change_nothing():
    assert rt003_at_loader(_note(), 2, "fork") is None  # multiprocessing_context="fork": the fix, quiet
    assert rt003_at_loader(_note(), 0, None) is None
    assert rt003_at_loader(_note(start_method="fork"), 2, None) is None
    assert rt003_at_loader(_note()[:1], 2, "spawn") is None


class _Loader:
    def __init__(self, workers, ctx=None):
        self.num_workers = workers
        self.multiprocessing_context = ctx


class _Report:
    def __init__(self, findings):
        self.findings = [type("F", (), {"to_dict": (lambda self, d=d: d)})() for d in findings]


def _saved(tmp_path, monkeypatch, findings):
    monkeypatch.setattr(recorder.S, "dir", str(tmp_path))
    monkeypatch.setattr(recorder.S, "pid", 4242)
    monkeypatch.setattr(recorder.S, "preflight_saved", None)
    recorder._save_preflight(_Report(findings))
    return tmp_path / "preflight.4242.json"


def test_the_recorder_rewrites_the_saved_preflight_once(tmp_path, monkeypatch):
    path = _saved(tmp_path, monkeypatch, _note())
    assert recorder.S.preflight_saved is not None
    recorder._loader_preflight(_Loader(2))
    got = json.loads(path.read_text())["findings"]
    assert [f["severity"] for f in got if f["id"] == "RT003"] == ["warning"]
    assert recorder.S.preflight_saved is None  # once: a later loader reads nothing again


def test_the_recorder_leaves_a_forked_loader_s_note(tmp_path, monkeypatch):
    path = _saved(tmp_path, monkeypatch, _note())
    recorder._loader_preflight(_Loader(2, multiprocessing.get_context("fork")))
    assert [f["severity"] for f in json.loads(path.read_text())["findings"] if f["id"] == "RT003"] == ["info"]
    path = _saved(tmp_path, monkeypatch, _note()[:1])  # no RT003: nothing waits for a loader
    assert recorder.S.preflight_saved is None


# (D) issue 27 item 5 on a cgroup v2 host, end to end on recorded files: the kill's evidence (kills.explain on a v2
# tree: the rank moved into a cgroup with memory.max 700 MiB, its memory.events' oom_kill rose), put into the
# rank's end as the supervisor does (Supervisor: cause oom-killer/cgroup-limit -> why oom-killer), then the
# finding the user reads. kills.explain alone is tested in test_run_kills_cgroup.py; this is the line printed.

def _v2_kill(tmp_path, killed: bool) -> dict:
    from ddpdoctor.run import kills

    root = tmp_path / "sys/fs/cgroup"
    (root / "small").mkdir(parents=True)
    (root / "memory.events").write_text("low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n")
    (root / "small/memory.max").write_text(f"{700 * 2 ** 20}\n")
    (root / "small/memory.events").write_text("low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n")
    ev = kills.KillEvidence(environ={}, cgroup_dir=str(root), kmsg_path=str(tmp_path / "no-kmsg"), xid=False,
                            sys_root=str(tmp_path))
    ev.note_cgroup(31, "0::/small\n")  # read with the rank's RSS while it lived
    if killed:
        (root / "small/memory.events").write_text("low 0\nhigh 0\nmax 41\noom 1\noom_kill 1\n")
    end = {"how": "vanished", "signal": "SIGKILL", "t": 5.0, "rss_mb": 690.0}
    end["kill"] = ev.explain(31, rss_mb=690.0, t=5.0)
    if end["kill"].get("cause") in ("oom-killer", "cgroup-limit"):
        end["why"] = "oom-killer"
        end.setdefault("oom_kill", 1)
    return end


def test_a_minus_9_on_cgroup_v2_is_explained_by_the_limit(tmp_path):
    from run_factory import findings, rank, section

    r1 = rank(1, "died", end=_v2_kill(tmp_path, killed=True))
    found = findings(section([rank(0), r1], stall=False, death={"first_rank": 1, "ranks": [1], "order": [1]}))
    assert [f.id for f in found] == ["RUN011"], [(f.id, f.title) for f in found]
    text = found[0].title + " " + found[0].detail
    assert "small/memory.max" in text and "0.7 GiB" in text and "oom_kill 0 -> 1" in text, text


def test_a_minus_9_on_cgroup_v2_with_no_counter_moved_says_what_to_read(tmp_path):
    from run_factory import findings, rank, section

    r1 = rank(1, "died", end=_v2_kill(tmp_path, killed=False))
    found = findings(section([rank(0), r1], stall=False, death={"first_rank": 1, "ranks": [1], "order": [1]}))
    assert [f.id for f in found] == ["RUN010"]
    assert "SIGKILL" in found[0].title and "Nothing on this node said why" in found[0].detail
