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


# Audit gaps of issue 27 (docs/measured/run.md, "Round 15, audit"), in the order a user meets them.
# Item 4, "`ddpdoctor run` itself gets SIGTERM or SIGINT (scancel, Ctrl-C, a CI timeout)": the stop's own finding
# (RUN015, every rank's line and last collective from the stacks taken before the kill) had a test only for its
# "still starting" branch; the process tests of a stop (test_run_cli.py) assert that nothing survives, not what is said.

def _stopped_job(kill):
    from run_factory import coll, rank, section

    r0 = rank(0, "collective", line=52, code="dist.all_reduce(t)",
              coll=coll("all_reduce", 7, shape=[4], dtype="float32", line=52))
    r1 = rank(1, "data", line=31, code="batch = next(it)")
    return section([r0, r1], stall=False, **({"kill": kill} if kill else {}))


def test_a_stop_from_outside_says_where_every_rank_was_and_its_last_collective():
    from run_factory import findings

    kill = {"reason": "ddpdoctor run received SIGTERM", "t": 1.0, "slurm_job": "4242", "processes": 3}
    (f,) = findings(_stopped_job(kill), "RUN015")
    assert f.severity == "warning" and f.title.startswith("the job was stopped (SLURM job 4242): ddpdoctor run "
                                                          "received SIGTERM; rank 0: all_reduce #7")
    assert "rank 1: loading a batch in the rank at train.py:31" in f.title
    assert "Last collectives: rank 0: all_reduce #7" in f.detail and {"rank:0", "rank:1", "line:31"} <= set(f.subjects)
    assert findings(_stopped_job(None), "RUN015") == []  # no stop, nothing said


class _Proc:
    def __init__(self, pid, phase="run", kind=None, parent=None):
        self.pid, self.alive, self.beacon = pid, True, {"phase": phase}
        self.info = {"kind": kind, "parent_pid": parent}


def _stopping_supervisor(stack_s, calls):
    """A Supervisor's parts that stacks_before_kill uses; taking the stacks costs `stack_s` (a clock moved by hand)."""
    from types import SimpleNamespace

    ranks = [_Proc(10), _Proc(11), _Proc(12, phase="init")]
    worker = _Proc(20, kind="worker", parent=10)
    clock = [1000.0]

    def take_stacks(ps):
        calls.append(("stacks", sorted(p.pid for p in ps)))
        clock[0] += stack_s

    sup = SimpleNamespace(
        procs={p.pid: p for p in ranks + [worker]}, _rank_procs=lambda: ranks, take_stacks=take_stacks,
        take_native=lambda ps, timeout_s: calls.append(("native", sorted(p.pid for p in ps), timeout_s)),
        rendezvous_wait=lambda: None, build=lambda: {"ranks": []}, write=lambda s: calls.append(("write", s)),
        _judge_and_print=lambda sec, headline, kind: calls.append(("judge", sec["kill"], headline, kind)))
    return sup, clock


@pytest.mark.parametrize("stack_s,native", [(0.3, True), (2.5, False)])
def test_the_stop_takes_every_ranks_and_workers_stacks_first_and_native_frames_only_with_time_left(
        monkeypatch, stack_s, native):
    """Item 4's "within 5 s": the Python stacks (faulthandler, no GIL) of every rank past init and of their DataLoader
    workers first; py-spy's native frames (2.5 s at most) only where the stacks took under 2 s; then the verdict."""
    from ddpdoctor.run import supervisor as sv

    calls = []
    sup, clock = _stopping_supervisor(stack_s, calls)
    monkeypatch.setattr(sv.time, "time", lambda: clock[0])
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    sv.Supervisor.stacks_before_kill(sup, "ddpdoctor run received SIGINT")
    assert calls[0] == ("stacks", [10, 11, 20])  # the rank still in init_process_group is left alone
    assert [c[0] for c in calls] == ["stacks", "native", "judge"] if native else ["stacks", "judge"]
    if native:
        assert calls[1] == ("native", [10, 11], 2.5)
    judged = calls[-1]
    assert judged[1]["reason"] == "ddpdoctor run received SIGINT" and judged[1]["slurm_job"] == "4242"
    assert judged[3] == "kill" and judged[2].startswith(f"stacks before the stop ({stack_s:.1f} s)")


# Item 6, "`--trace FILE` ... every rank's steps, their split, its collectives, the stall and the kill. The report
# names the file and how to open it": the trace's tests drew steps, collectives and a straggler event only.

def test_the_trace_holds_the_stall_the_death_and_the_kill():
    from ddpdoctor.run.trace import trace_events

    steps = [(s, 1, 1000.0 + 0.02 * s, 1.0, 10.0, 2.0, 1.0, 0.5, 11.0) for s in range(1, 6)]
    ranks = {0: {"host": "h", "pid": 10, "steps": steps, "colls": [], "end": None},
             1: {"host": "h", "pid": 11, "steps": steps, "colls": [],
                 "end": {"t": 1003.0, "how": "signal", "signal": "SIGKILL", "why": "oom-killer"}}}
    events = [{"t": 1002.0, "kind": "stall", "title": "RUN001 rank 0 waits in a barrier", "ranks": None},
              {"t": 1003.5, "kind": "kill", "title": "RUN015 the job was stopped", "ranks": None}]
    evs = trace_events(1000.0, ranks, events)
    death = [e for e in evs if e.get("cat") == "death"]
    assert len(death) == 1 and death[0]["tid"] == 1 and death[0]["name"] == "ended: SIGKILL"
    assert death[0]["args"]["why"] == "oom-killer"
    for kind, ts in (("stall", 2e6), ("kill", 3.5e6)):
        (e,) = [e for e in evs if e.get("cat") == kind]
        assert e["s"] == "g" and e["ts"] == ts and e["name"].startswith(f"{kind}: RUN0")
    assert trace_events(1000.0, {0: dict(ranks[0])}, [])[-1].get("cat") == "split"  # a healthy job: no such event


def test_the_report_names_the_trace_file_and_how_to_open_it(tmp_path, capsys):
    from types import SimpleNamespace

    from ddpdoctor.commands.run import _write_trace

    sup = SimpleNamespace(t_start=1000.0, _rank_procs=lambda: [], sections=[], straggler_reports=[],
                          events=[{"t": 1001.0, "kind": "stall", "findings": ["RUN001"], "title": "RUN001 x"}])
    report = SimpleNamespace(extra={"run": {}})
    path = str(tmp_path / "job.json")
    _write_trace(sup, report, path)
    assert report.extra["run"]["trace"] == path
    err = capsys.readouterr().err
    assert f"trace written to {path}" in err and "https://ui.perfetto.dev" in err
    doc = json.loads(open(path).read())
    assert any(e.get("cat") == "stall" for e in doc["traceEvents"])
    _write_trace(sup, report, str(tmp_path / "no-such-dir" / "job.json"))  # unwritable: said, not raised
    assert "cannot write the trace" in capsys.readouterr().err


# Item 3, "Where py-spy is installed, add native frames to the stacks. Without it, say how to get them": the process
# test (test_run_faults.py::test_same_stack_hang_named_by_collective_sequence) checks one branch or the other, the one
# its host allows (py-spy is installed here: the "say how" branch never ran). Both, on one recorded same-stack hang.

def test_the_same_stack_hang_says_native_frames_are_there_or_how_to_get_them():
    from run_factory import findings

    def stalled(rank, group, native=None):
        hist = [{"group": 0, "group_name": "default", "group_ranks": None, "seq": 5, "op": "all_reduce",
                 "state": "done", "line": "/x/t.py:30", "bytes": 4, "t": 1.0},
                {"group": 1, "group_name": group, "group_ranks": [0, 1], "seq": 1, "op": "all_reduce", "state": "in",
                 "line": "/x/t.py:30", "bytes": 4, "t": 2.0}]
        return {"rank": rank, "pid": 100 + rank, "state": "collective", "doing": "all_reduce", "alive": True,
                "step": 3, "user_frame": {"file": "/x/t.py", "line": 30, "func": "main"}, "coll_history": hist,
                "last_collective": {"op": "all_reduce", "seq": 2, "in": True}, **({"native": native} if native else {})}

    (without,) = findings({"ranks": [stalled(0, "A"), stalled(1, "B")], "stall": {"idle_s": 5}}, "RUN008")
    assert "pip install 'ddpdoctor[native]'" in without.detail and "py-spy dump --native --pid" in without.detail
    (with_,) = findings({"ranks": [stalled(0, "A", "Thread 1\n  c10d::Work::wait"), stalled(1, "B")],
                         "stall": {"idle_s": 5}}, "RUN008")
    assert "Native frames (py-spy) are in the report's stacks" in with_.detail and "pip install" not in with_.detail
