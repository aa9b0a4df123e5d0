"""RUN checks on literal `run` sections (what ddpdoctor run saw): each one triggered and quiet,
and the pieces they stand on (beacon files, faulthandler dumps, the section builder)."""
from __future__ import annotations

import os
import textwrap

import pytest

from run_factory import TRAIN, coll, findings, frame, rank, section

from ddpdoctor.model.registry import REGISTRY, parse_doc
from ddpdoctor.pipeline.runner import load_all
from ddpdoctor.run import beacon, section as run_section, stacks

RUN_IDS = ["RUN001", "RUN002", "RUN003", "RUN004", "RUN005", "RUN006", "RUN007", "RUN010", "RUN011", "RUN012", "RUN013",
           "RUN022"]


def ids(found) -> list:
    return sorted(f.id for f in found)


def test_every_run_check_is_documented():
    load_all(plugins=False)
    for cid in RUN_IDS:
        spec = REGISTRY[cid]
        assert spec.family == "run"
        parts = parse_doc(spec.doc)
        for heading in ("What it checks", "Why it matters", "Example", "Fix"):
            assert parts.get(heading), (cid, heading)


def test_no_stall_no_death_is_quiet():
    sec = section([rank(0), rank(1)], stall=False)
    assert findings(sec) == []


def test_run001_rank0_only_barrier():
    r0 = rank(0, "collective", 31, "dist.barrier()", coll=coll("barrier", 1, line=31), guard="if rank == 0:")
    r1 = rank(1, "backward", 36)
    found = findings(section([r0, r1]))
    assert ids(found) == ["RUN001"]
    f = found[0]
    assert f.severity == "error" and "rank 0" in f.title and "barrier()" in f.title and "if rank == 0:" in f.title
    assert "rank:0" in f.subjects and "line:31" in f.subjects and "rank:1" in f.subjects


def test_run001_quiet_when_every_rank_is_in_the_same_collective():
    rs = [rank(n, "collective", 31, coll=coll("barrier", 1, line=31)) for n in (0, 1)]
    assert findings(section(rs), "RUN001") == []


def test_run002_rank_sleeping_in_getitem():
    r1 = rank(1, "data", 12, "time.sleep(600)")
    found = findings(section([rank(0), r1]))
    assert ids(found) == ["RUN002"]
    assert "rank 1" in found[0].title and "line:12" in found[0].subjects and "data loading" in found[0].title


def test_run002_quiet_when_nobody_waits():
    assert findings(section([rank(0, "outside"), rank(1, "outside")]), "RUN002") == []


def _worker(forced="true", imported=True):
    return [{"pid": 300, "alive": True, "user_frame": frame(27, "tok.encode_batch(batch)", func="__getitem__"),
             "stack": [], "in_tokenizers": True,
             "tokenizers": {"imported": imported, "version": "0.23.3", "TOKENIZERS_PARALLELISM": forced}}]


def test_run003_tokenizers_deadlock_named():
    rs = [rank(n, "data-workers", 50, "for x in loader:", step=0, workers=_worker()) for n in (0, 1)]
    found = findings(section(rs))
    assert ids(found) == ["RUN003"]
    assert "tokenizers deadlock" in found[0].title and "TOKENIZERS_PARALLELISM=true" in found[0].title
    assert "TOKENIZERS_PARALLELISM=false" in found[0].fix


def test_run003_generic_worker_stall_without_forced_parallelism():
    rs = [rank(0, "data-workers", 50, workers=_worker(forced=None)), rank(1)]
    found = findings(section(rs), "RUN003")
    assert len(found) == 1 and "tokenizers deadlock" not in found[0].title and "DataLoader worker" in found[0].title


def test_run003_quiet_without_data_wait():
    assert findings(section([rank(0), rank(1)]), "RUN003") == []


def test_run004_slow_rank0_before_init():
    r0 = rank(0, "before-init", 17, "time.sleep(seconds)", step=0)
    r1 = rank(1, "rendezvous", 24, "dist.init_process_group('gloo')", step=0, since_s=600.0)
    found = findings(section([r0, r1]))
    assert ids(found) == ["RUN004"]
    f = found[0]
    assert f.severity == "warning" and "rank 0" in f.title and "20.0 min" in f.title and f.evidence["left_s"] == 1200


def test_run004_quiet_when_all_wait_at_rendezvous():
    rs = [rank(n, "rendezvous", 24, step=0) for n in (0, 1)]
    assert findings(section(rs), "RUN004") == []


def test_run005_uneven_batches():
    r0 = rank(0, "backward", 62, dl={"n": 7, "len": 7, "end": False, "workers": 0})
    r1 = rank(1, "collective", 67, "dist.barrier()", coll=coll("barrier", 1, line=67),
              dl={"n": 6, "len": 6, "end": True, "workers": 0})
    found = findings(section([r0, r1]))
    assert ids(found) == ["RUN005"]
    assert "rank 1 ran out of data after 6" in found[0].title and "DistributedSampler" in found[0].fix


def test_run005_quiet_when_the_rank_still_fetching_is_in_the_next_epoch():
    """Same loader length: rank 0 ran out at the epoch's end and waits in a barrier only it calls (a
    rank-0 save), rank 1 took as many steps and is in the next epoch's backward. Not uneven data: the
    collective only rank 0 calls (RUN001)."""
    r0 = rank(0, "collective", 67, "dist.barrier()", step=32, coll=coll("barrier", 1, line=67), guard="if rank == 0:",
              dl={"n": 32, "len": 32, "end": True, "workers": 0})
    r1 = rank(1, "backward", 50, step=32, dl={"n": 0, "len": 32, "end": False, "workers": 0})
    found = findings(section([r0, r1]))
    assert "RUN005" not in ids(found), [f.title for f in found]
    assert "RUN001" in ids(found), [f.title for f in found]
    # the same ranks, but the one still fetching is behind the one that ran out: still uneven
    r1_behind = rank(1, "backward", 50, step=20, dl={"n": 20, "len": 32, "end": False, "workers": 0})
    assert ids(findings(section([r0, r1_behind]), "RUN005")) == ["RUN005"]


def test_run005_quiet_with_equal_loaders():
    r0 = rank(0, "collective", 31, coll=coll("barrier", 1, line=31))
    assert findings(section([r0, rank(1)]), "RUN005") == []


def test_run006_shapes_disagree_and_death_folded():
    mm = run_section.mismatch([
        rank(0, "collective", coll=coll("all_reduce", 1, [10], "float32", 60)),
        rank(1, "collective", coll=coll("all_reduce", 1, [11], "float32", 60))])
    r0 = rank(0, "died", end={"how": "signal", "signal": "SIGABRT", "t": 1.0})
    r1 = rank(1, "died", end={"how": "signal", "signal": "SIGTERM", "t": 2.0, "secondary": True})
    sec = section([r0, r1], stall=False, death={"first_rank": 0, "ranks": [0, 1], "order": [0, 1]}, mismatch=mm)
    found = findings(sec)
    assert ids(found) == ["RUN006"]  # the abort is its consequence, folded
    assert "[10]" in found[0].title and "[11]" in found[0].title and "SIGABRT" in found[0].title


def test_run006_quiet_when_collectives_agree():
    rs = [rank(n, "collective", coll=coll("all_reduce", 1, [10], "float32", 60)) for n in (0, 1)]
    assert run_section.mismatch(rs) is None
    assert findings(section(rs), "RUN006") == []


def test_run007_names_groups_when_no_cause_is_known():
    rs = [rank(n, "collective", 44, coll=coll("all_reduce", 9, [1], "float32", 44)) for n in (0, 1)]
    found = findings(section(rs))
    assert ids(found) == ["RUN007"] and "ranks 0, 1" in found[0].title


def test_run007_quiet_when_a_cause_is_known():
    r0 = rank(0, "collective", 31, coll=coll("barrier", 1, line=31))
    assert findings(section([r0, rank(1)]), "RUN007") == []


def test_run010_first_death_by_time_not_by_exit():
    exc = {"type": "ValueError", "message": "bad batch", "user": frame(58, "raise ValueError('bad batch')"),
           "traceback": "Traceback ...\nValueError: bad batch"}
    r0 = rank(0, "died", end={"how": "exception", "t": 10.5, "secondary": True,
                              "exception": {"type": "RuntimeError", "message": "Connection closed by peer"}})
    r1 = rank(1, "died", end={"how": "exception", "t": 10.0, "exception": exc})
    sec = section([r0, r1], stall=False, death={"first_rank": 1, "ranks": [0, 1], "order": [1, 0]})
    found = findings(sec)
    assert ids(found) == ["RUN010"]
    assert "rank 1 died first" in found[0].title and "ValueError" in found[0].title and "line:58" in found[0].subjects


def test_run010_quiet_without_death():
    assert findings(section([rank(0), rank(1)], stall=False), "RUN010") == []


def test_run011_oom_killer():
    r1 = rank(1, "died", end={"how": "vanished", "signal": "SIGKILL", "oom_kill": 1, "why": "oom-killer",
                              "rss_mb": 20480.0, "t": 5.0})
    sec = section([rank(0), r1], stall=False, death={"first_rank": 1, "ranks": [1], "order": [1]})
    found = findings(sec)
    assert ids(found) == ["RUN011"] and "20480.0 MiB" in found[0].title


def test_run011_quiet_for_a_plain_sigkill():
    r1 = rank(1, "died", end={"how": "vanished", "signal": "SIGKILL", "t": 5.0})
    sec = section([rank(0), r1], stall=False, death={"first_rank": 1, "ranks": [1], "order": [1]})
    assert ids(findings(sec)) == ["RUN010"]


def _exit_abort(n: int, pg: bool = True, t: float = 10.0) -> dict:
    return rank(n, "died", step=8, end={"how": "signal", "signal": "SIGABRT", "t": t, "at_exit": True,
                                        "pg_at_exit": pg, "secondary": True})


def test_run013_abort_at_exit_with_the_process_group_alive():
    """Training ended; rank 1 aborted while shutting down, torchrun then SIGTERMed rank 0 (before its
    exit handlers ran): one finding, RUN013, naming rank 1 and destroy_process_group; no RUN010."""
    r0 = rank(0, "died", end={"how": "signal", "signal": "SIGTERM", "t": 9.0, "secondary": True})
    sec = section([r0, _exit_abort(1)], stall=False, death={"first_rank": 0, "ranks": [0, 1], "order": [0, 1]})
    found = findings(sec)
    assert ids(found) == ["RUN013"]
    assert found[0].title.startswith("rank 1 died on SIGABRT while the interpreter shut down after its last step (8)")
    assert "destroy_process_group()" in found[0].fix and found[0].subjects[0] == "rank:1"


def test_run013_says_when_the_group_was_destroyed():
    found = findings(section([rank(0), _exit_abort(1, pg=False)], stall=False), "RUN013")
    assert ids(found) == ["RUN013"] and "had been destroyed" in found[0].title
    assert "destroy_process_group" not in found[0].fix


def test_run013_quiet_when_a_rank_failed_first():
    """A rank that raised is the root cause; a peer's abort at exit is its consequence (RUN010 only)."""
    r0 = rank(0, "died", end={"how": "exception", "t": 5.0, "exception": {"type": "ValueError", "message": "bad"}})
    sec = section([r0, _exit_abort(1, t=6.0)], stall=False, death={"first_rank": 0, "ranks": [0, 1], "order": [0, 1]})
    assert ids(findings(sec)) == ["RUN010"]
    assert findings(section([rank(0), rank(1)], stall=False), "RUN013") == []


def test_run012_not_attached_and_quiet_when_attached():
    assert ids(findings({"attached": False, "argv0": "python"})) == ["RUN012"]
    assert findings({"attached": True, "ranks": []}, "RUN012") == []


def test_run012_a_stop_before_any_process_attached_is_said_as_such_not_a_missing_install():
    """SIGTERM to `ddpdoctor run` while the job was still importing (holdout review, round 12: a stop 10 s into a
    busy host's start-up read "no process loaded ddpdoctor (another interpreter?)", then RUN022)."""
    stopped = {"attached": False, "argv0": "torchrun", "exit_status": 1, "processes": 0,
               "events": [{"kind": "kill", "t": 1.0, "findings": [], "title": ""}]}
    (f,) = findings(stopped)
    assert f.id == "RUN012" and f.severity == "warning" and f.title.startswith("the job was stopped from outside")
    assert "pip install" not in f.fix and findings(stopped, "RUN022") == []
    (g,) = findings({"attached": False, "argv0": "python", "events": []})
    assert g.severity == "info" and "pip install ddpdoctor" in g.fix


def test_run015_a_stop_while_the_job_was_still_starting_says_so():
    kill = {"reason": "ddpdoctor run received SIGTERM", "t": 1.0, "processes": 1}
    (f,) = findings({"ranks": [], "kill": kill}, "RUN015")
    assert f.severity == "warning" and "while it was still starting: 1 of its processes" in f.title
    assert findings({"ranks": [], "kill": dict(kill, processes=0)}, "RUN015") == []   # RUN012's case
    assert findings({"ranks": [], "kill": kill, "rendezvous": {"nnodes": 2}}, "RUN015") == []   # RUN024's case


def _ended(status, ranks=(), **kw) -> dict:
    sec = section(list(ranks), stall=False, exit_status=status, attached=True, processes=3, events=[],
                  command=["torchrun", "--nproc-per-node", "2", "train.py"])
    sec.update(kw)
    return sec


def test_run022_a_failed_job_with_no_rank_is_unexplained_not_healthy():
    (f,) = findings(_ended(1))
    assert f.id == "RUN022" and f.severity == "error" and "exit status 1" in f.title
    assert "none joined a process group" in f.detail
    assert "torchrun --nproc-per-node 2 train.py 2>&1 | tee job.log" in f.fix and "ddpdoctor triage job.log" in f.fix
    assert f.evidence["exit_status"] == 1 and f.evidence["ranks_seen"] == []


def test_run022_says_what_it_saw():
    (f,) = findings(_ended(2, [rank(0), rank(1)]), "RUN022")
    assert "saw ranks 0, 1" in f.detail and list(f.subjects) == ["rank:0", "rank:1"]
    (g,) = findings(_ended(2, attached=False), "RUN022")
    assert "RUN012" in g.detail


def test_run022_quiet_on_success_interrupts_stops_and_explained_failures():
    assert findings(_ended(0), "RUN022") == []
    assert findings(_ended(130), "RUN022") == [] and findings(_ended(143), "RUN022") == []
    assert findings(_ended(1, stopped=True), "RUN022") == []
    explained = _ended(1, events=[{"kind": "death", "findings": ["RUN010"]}])
    assert findings(explained, "RUN022") == []
    slow_only = _ended(1, events=[{"kind": "straggler", "findings": ["RUN020"]}])
    assert [f.id for f in findings(slow_only, "RUN022")] == ["RUN022"]  # a straggler explains no failure
    assert findings(section([rank(0)], stall=False), "RUN022") == []  # a live section: no exit status yet


def test_run022_never_prints_a_secret_of_the_command():
    token = "hf_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7"
    (f,) = findings(_ended(1, command=["python", "train.py", f"--hub_token={token}"]), "RUN022")
    assert token not in f.fix and "train.py" in f.fix


# ---------------------------------------------------------------- the pieces

def test_beacon_round_trip_and_unwritten(tmp_path):
    path = str(tmp_path / "beacon.1")
    w = beacon.Writer(path)
    assert beacon.read(path) is None
    w.cold({"rank": 1, "coll": {"op": "barrier", "seq": 3}, "dl": {"len": 8, "workers": 0}})
    w.hot("coll", True, False, 10.0, 9.5, 8.0, 0.25, 4, 3, 5, 0)
    b = beacon.read(path)
    assert b["phase"] == "coll" and b["rank"] == 1 and b["step"] == 4 and b["seq"] == 3 and b["t"] == 10.0
    assert b["coll"] == {"op": "barrier", "seq": 3, "in": True, "t": 9.5} and b["dl"]["n"] == 5 and b["sd"] == [0.25]
    w.hot("run", False, True, 11.0, 11.0, 8.0, 0.25, 4, 3, 6, 0)
    b = beacon.read(path)
    assert b["phase"] == "run" and b["coll"]["in"] is False and b["dl"]["end"] is True
    w.phase("data", False, False, 12.0, 12.0, 7)  # a change of phase: its own fields, the others stay
    b = beacon.read(path)
    assert (b["phase"], b["t"], b["dl"]["n"], b["dl"]["end"]) == ("data", 12.0, 7, False)
    assert b["step"] == 4 and b["seq"] == 3 and b["sd"] == [0.25] and b["st"] == 8.0 and b["rank"] == 1
    w.cold({"big": "x" * 10000, "rank": 1, "kind": "proc"})
    assert beacon.read(path)["rank"] == 1
    assert beacon.read(str(tmp_path / "missing")) is None


DUMP = textwrap.dedent('''\
    Thread 0x00007f0000000002 (most recent call first):
      File "/usr/lib/python3.11/threading.py", line 320 in wait
      File "/usr/lib/python3.11/threading.py", line 1002 in _bootstrap

    Current thread 0x00007f0000000001 (most recent call first):
      File "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 4800 in barrier
      File "/job/train.py", line 31 in main
      File "/job/train.py", line 70 in <module>
    ''')


def test_stacks_parse_fold_and_innermost_user_frame():
    dump = stacks.parse_dump(DUMP)
    assert len(dump["threads"]) == 2
    main = stacks.main_thread(dump, 0x7F0000000001)
    assert main["frames"][0]["func"] == "barrier"
    user = stacks.innermost_user(main["frames"], ("/usr/lib/python3.11/",))
    assert user["line"] == 31 and user["file"] == TRAIN
    folded = stacks.fold(main["frames"], ())
    assert folded[0].startswith("/job/train.py:70") and "library frame" in folded[-1]


def test_stacks_fatal_dump_and_enclosing_if(tmp_path):
    d = stacks.parse_dump("Fatal Python error: Aborted\n\n" + DUMP)
    assert d["fatal"] == "Aborted" and stacks.SIGNAL_OF_FATAL[d["fatal"]] == "SIGABRT"
    src = tmp_path / "t.py"
    src.write_text("def f(rank):\n    if rank == 0:\n        x = 1\n    else:\n        y = 2\n")
    assert stacks.enclosing_if(str(src), 3) == "if rank == 0:"
    assert stacks.enclosing_if(str(src), 5) == "else of `if rank == 0:`"
    assert stacks.enclosing_if(str(src), 1) is None


def test_section_roles_and_first_death():
    procs = [
        {"pid": 1, "info": {"kind": "proc", "ppid": 0, "env": {}}, "beacon": {"phase": "start"}, "alive": True},
        {"pid": 2, "info": {"kind": "proc", "ppid": 1, "env": {"RANK": "0"}}, "beacon": {"phase": "run", "rank": 0},
         "alive": False, "end_t": 20.0, "exc": {"type": "RuntimeError", "message": "Connection closed by peer",
                                               "t": 11.0}},
        {"pid": 3, "info": {"kind": "proc", "ppid": 1, "env": {"RANK": "1"}}, "beacon": {"phase": "run", "rank": 1},
         "alive": False, "end_t": 10.8, "exc": {"type": "ValueError", "message": "bad", "t": 10.0}},
        {"pid": 4, "info": {"kind": "worker", "parent_pid": 3}, "beacon": {"phase": "worker"}, "alive": False},
    ]
    ranks, workers, others = run_section.roles(procs)
    assert [p["pid"] for p in ranks] == [2, 3] and [p["pid"] for p in workers[3]] == [4]
    assert [p["pid"] for p in others] == [1]
    sec = run_section.build(procs, 30.0, death=True)
    assert sec["death"]["first_rank"] == 1


def test_section_clean_exit_is_no_death_and_a_teardown_abort_is_an_exit_abort():
    clean = {"pid": 2, "info": {}, "beacon": {"phase": "exit"}, "alive": False}
    assert run_section.end_of(clean, 0) is None
    teardown = dict(clean, beacon={"phase": "exit", "pgx": True}, fatal="Fatal Python error: Aborted\n")
    end = run_section.end_of(teardown, 0)
    assert end["how"] == "signal" and end["signal"] == "SIGABRT"
    assert end["at_exit"] is True and end["pg_at_exit"] is True and end["secondary"] is True
    mid_run = dict(teardown, beacon={"phase": "run"})
    assert not run_section.end_of(mid_run, 0).get("at_exit")
    killed = {"pid": 3, "info": {}, "beacon": {"phase": "run"}, "alive": False, "end_t": 5.0}
    end = run_section.end_of(killed, 1)
    assert end["how"] == "vanished" and end["why"] == "oom-killer"


def test_a_process_that_raised_in_init_process_group_without_a_rank_is_a_death():
    """`accelerate launch --cpu --num_processes 2` starts one process without RANK (accelerate's
    multi-CPU mode wants mpirun): init_process_group raises. It entered init (pgt set), so it is a
    rank for the death report, named by its pid, not 'no stall, no death'."""
    launcher = {"pid": 1, "info": {"kind": "proc", "ppid": 0, "env": {}}, "beacon": {"phase": "start"}, "alive": True}
    proc = {"pid": 7, "info": {"kind": "proc", "ppid": 1, "env": {}}, "beacon": {"phase": "exception", "pgt": 1800.0},
            "alive": False, "end_t": 10.8,
            "exc": {"type": "ValueError", "message": "environment variable RANK expected, but not set", "t": 10.0,
                    "user": frame(45, 'dist.init_process_group("gloo")')}}
    ranks, _, others = run_section.roles([launcher, proc])
    assert [p["pid"] for p in ranks] == [7] and [p["pid"] for p in others] == [1]
    sec = run_section.build([launcher, proc], 30.0, death=True)
    found = findings(sec, "RUN010")
    assert ids(found) == ["RUN010"]
    assert found[0].title.startswith("process 7 (rank unknown, in init_process_group) died first: raised ValueError")


def test_run_doctor_callback_leaves_the_callback_list_when_nothing_is_left_per_step():
    """`run` adds one DoctorCallback to a Trainer; with no step timing and no stall watch it has
    nothing to do per step after on_train_begin, so it leaves the list (a new list: the handler may
    be iterating the old one) instead of costing ~2 us at every event of every step."""
    from types import SimpleNamespace

    from ddpdoctor.run import agent

    cls = agent._run_doctor_class()
    other = object()
    cb = cls(measure=False, log=False)
    handler = SimpleNamespace(callbacks=[other, cb])
    old = handler.callbacks
    cb.trainer, cb._done = SimpleNamespace(callback_handler=handler), True
    cb._step_aside()
    assert handler.callbacks == [other] and old == [other, cb]
    busy = cls(measure=True, log=False)  # --measure-steps: it still times steps, so it stays
    handler2 = SimpleNamespace(callbacks=[busy])
    busy.trainer = SimpleNamespace(callback_handler=handler2)
    busy._step_aside()
    assert handler2.callbacks == [busy]
