"""Round 20 (issue 27). A stall inside the backward pass on a thread that torch started (a DDP comm hook's
`fut.then(...)` callback run by Gloo's worker thread; autograd's device threads on a GPU): the rank's main thread shows
autograd's engine alone, as DDP's all-reduce does, and the stall was RUN007 "no rank made progress" with every rank in
the all-reduce. Now the rank is placed at its own code on that thread (data/python_threads.json)."""
from __future__ import annotations

import json
import os
import sys

import pytest
from test_run_faults import stopped_at_stall

SP = "/venv/lib/python3.11/site-packages"
LIB = ("/usr/lib/python3.11/",)
ENGINE = [(f"{SP}/torch/autograd/graph.py", 979, "_engine_run_backward"),
          (f"{SP}/torch/autograd/__init__.py", 395, "backward"),
          (f"{SP}/torch/_tensor.py", 623, "backward"),
          ("/job/train.py", 25, "<module>")]
BOOT = [("/usr/lib/python3.11/threading.py", 1038, "_bootstrap_inner"),
        ("/usr/lib/python3.11/threading.py", 995, "_bootstrap")]


def _thread(ident, frames):
    return f"Thread 0x{ident:016x} (most recent call first):\n" + "".join(
        f'  File "{f}", line {ln} in {fn}\n' for f, ln, fn in frames) + "\n"


def _rec(dump, cpu=0.0):
    from ddpdoctor.run.section import rank_record

    p = {"pid": 11, "alive": True, "dump": dump, "cpu_frac": cpu, "running_frac": 0.0,
         "beacon": {"phase": "run", "rank": 1, "step": 3}, "info": {"rank": 1, "main_thread": 1}}
    return rank_record(p, LIB, 100.0, [])


CALLBACK = [("/job/train.py", 16, "done")]  # a comm hook's then() callback, run by Gloo's worker thread (no bootstrap)


def test_trigger_a_rank_whose_comm_hook_callback_blocks_on_a_torch_thread_is_outside_at_that_line():
    """Trigger: the main thread in the engine alone, a thread with no threading bootstrap in the user's callback
    (train.py:16) -> 'outside' at train.py:16, the thread's stack in the record; busy -> 'busy'; autograd's device
    thread running a module hook (torch/utils/hooks.py between) is the same class."""
    dump = _thread(2, CALLBACK) + _thread(1, ENGINE)
    r = _rec(dump)
    assert r["state"] == "outside" and r["user_frame"]["line"] == 16, r
    assert "thread torch started" in r["doing"] and r["thread"]["stack"][-1].startswith("/job/train.py:16")
    assert _rec(dump, cpu=0.9)["state"] == "busy"
    device = [("/job/model.py", 30, "hook"), (f"{SP}/torch/utils/hooks.py", 100, "hook")]
    assert _rec(_thread(3, device) + _thread(1, ENGINE))["user_frame"]["file"] == "/job/model.py"


def test_quiet_python_threads_library_threads_and_two_candidates_leave_the_rank_in_the_all_reduce():
    """Quiet: the user's own threading.Thread sleeping (bootstrap outermost), a native thread in torch's code alone,
    a thread with no Python frame, two native threads in user code (a guess between them): 'backward'; and a main
    thread outside the engine is not moved to a side thread."""
    own = _thread(2, [("/job/train.py", 50, "heartbeat"), *BOOT])
    lib = _thread(3, [(f"{SP}/torch/distributed/algorithms/ddp_comm_hooks/default_hooks.py", 20, "decompress")])
    empty = "Thread 0x0000000000000004 (most recent call first):\n  <no Python frame>\n\n"
    for extra in (own, lib, empty, own + lib + empty):
        r = _rec(extra + _thread(1, ENGINE))
        assert r["state"] == "backward" and r["user_frame"]["line"] == 25 and "thread" not in r, r
    two = _thread(2, CALLBACK) + _thread(3, [("/job/train.py", 70, "other")])
    assert _rec(two + _thread(1, ENGINE))["state"] == "backward"
    main_elsewhere = [("/job/train.py", 60, "save"), ("/job/train.py", 80, "<module>")]
    r = _rec(_thread(2, CALLBACK) + _thread(1, main_elsewhere))
    assert r["user_frame"]["line"] == 60 and "thread" not in r


def test_an_ended_rank_held_in_a_callback_on_a_torch_thread_was_outside():
    """The same class for a rank ended there (its stack at the end): trigger -> 'outside'; quiet, the user's own
    Python thread beside the engine -> 'collective'."""
    from ddpdoctor.run.section import _before_end

    def p(dump):
        return {"pid": 11, "dump": dump, "beacon": {"phase": "run"}, "info": {"main_thread": 1}}

    assert _before_end(p(_thread(2, CALLBACK) + _thread(1, ENGINE)), LIB) == "outside"
    assert _before_end(p(_thread(2, [("/job/train.py", 50, "heartbeat"), *BOOT]) + _thread(1, ENGINE)), LIB) == "collective"


def test_the_thread_knowledge_has_its_sources_and_matches_its_excerpt():
    from ddpdoctor.run import stacks

    k = stacks._thread_knowledge()
    for entry in [k["python_thread_entry"], *k["native_threads_running_python"]]:
        src = entry["source"]
        assert src["repo"] and src["path"] and len(src["commit"]) == 40 and src["symbol"]
    dump = stacks.parse_dump(k["excerpt"])
    main = stacks.main_thread(dump, None)
    found = stacks.native_user_threads(dump, main, ())
    assert [t["user"]["func"] for t in found] == ["done"]


HOOK_JOB = """
import time
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = DDP(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1)))
step = [0]
def hook(state, bucket):
    fut = dist.all_reduce(bucket.buffer(), async_op=True).get_future()
    def done(f):
        if rank == 1 and step[0] >= BLOCK_AT:
            time.sleep(3600)  # CALLBACK-BLOCKS
        return f.value()[0] / dist.get_world_size()
    return fut.then(done)
model.register_comm_hook(None, hook)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for i in range(STEPS):
    step[0] = i
    if rank == 0 and i == 3:
        time.sleep(1.0)  # rank 0 late: rank 1's all-reduce completes, and runs `done`, on Gloo's worker thread
    model(torch.randn(4, 8)).sum().backward()
    opt.step(); opt.zero_grad()
    print(f"step {i}", flush=True)  # one write per line: two ranks share the pipe
"""


def _run_hook_job(tmp_path, block_at, steps=100000):
    script = tmp_path / "hook_job.py"
    script.write_text(HOOK_JOB.replace("BLOCK_AT", str(block_at)).replace("STEPS", str(steps)))
    return stopped_at_stall(tmp_path, script)


@pytest.mark.slow
def test_real_ddp_comm_hook_callback_blocking_on_glooss_thread_is_named_at_its_line(tmp_path):
    """For real, Gloo on CPU under torchrun: rank 1's comm hook callback sleeps from step 3 on Gloo's worker thread
    (rank 0 came late to that all-reduce); both main threads wait in the engine. RUN002 names rank 1 at the callback's
    line (at d87cb8c2: RUN007, 'ranks 0, 1: the DDP gradient all-reduce (backward)')."""
    rc, out, data = _run_hook_job(tmp_path, 3)
    ranks = {r["rank"]: r for r in data["run"]["ranks"]}
    assert "step 2" in out and ranks[1]["step"] >= 3, out[-4000:]
    assert ranks[0]["state"] == "backward"  # the state the test needs: rank 0 waits in DDP's all-reduce
    assert ranks[1]["state"] == "outside" and ranks[1]["user_frame"]["line"] == 14, ranks[1]
    stalls = [f for f in data["findings"] if f["id"] in ("RUN002", "RUN007")]
    assert [f["id"] for f in stalls] == ["RUN002"] and "rank 1" in stalls[0]["title"], stalls


@pytest.mark.slow
def test_real_quiet_the_same_comm_hook_job_without_the_block_ends_well(tmp_path):
    """Its healthy twin: the same callbacks on Gloo's thread (rank 0 late at step 3), none blocking, 8 steps -> exit
    0, no stall finding."""
    rc, out, data = _run_hook_job(tmp_path, 10 ** 9, steps=8)
    assert "step 7" in out, out[-4000:]  # the job ran to its end
    assert rc == 0 and not [f for f in data["findings"] if f["id"] in ("RUN002", "RUN007")], data["findings"]


# ddpdoctor run's OWN failure (a bug of the tool) while it watches or tears down a job: DOC004, no rank blamed, the
# job's own exit status kept and no process left behind.

def _sup(code: str):
    from ddpdoctor.run.supervisor import Supervisor

    lines = []
    return Supervisor([sys.executable, "-c", code], preflight=False, grace_s=2.0, write=lines.append,
                      capture_stderr=False), lines


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_trigger_an_own_error_while_tearing_down_is_doc004_and_the_jobs_status_stands(monkeypatch):
    """Trigger: the end-of-job death check (the job has exited: teardown) raises -> run() returns the job's own
    status (3), the report has DOC004 naming the phase, with no rank subject, and no RUN010/RUN022 blaming a rank."""
    from ddpdoctor.commands.run import build_report
    from ddpdoctor.run.supervisor import Supervisor

    real = Supervisor._check_death

    def broken(self, now, final=False):
        if final:
            raise KeyError("pid")  # ddpdoctor's own bug, in its teardown
        return real(self, now, final)

    monkeypatch.setattr(Supervisor, "_check_death", broken)
    sup, lines = _sup("import sys; sys.exit(3)")
    assert sup.run() == 3 and sup.root_status == 3  # the state the test needs: the job ran and ended of itself
    report = build_report(sup)
    doc = [f for f in report.findings if f.id == "DOC004"]
    assert len(doc) == 1 and "tearing the job down" in doc[0].title and "KeyError" in doc[0].title, report.findings
    assert not doc[0].subjects and "broken" in doc[0].evidence["traceback"]
    assert not [f for f in report.findings if f.id in ("RUN010", "RUN022") and any("rank" in s for s in f.subjects)]
    assert any("ddpdoctor's own error while tearing the job down" in ln for ln in lines), lines


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_trigger_an_own_error_while_watching_leaves_the_job_running_to_its_end(monkeypatch, tmp_path):
    """Trigger: the watch loop's stall check raises while the job runs -> the job is not ended by it: it runs to its
    own end (it writes its marker file after the error) and its status (0) stands; DOC004 says 'watching the job'."""
    from ddpdoctor.commands.run import build_report
    from ddpdoctor.run.supervisor import Supervisor

    def broken(self, now):
        raise RuntimeError("bug in the stall check")

    monkeypatch.setattr(Supervisor, "_check_stall", broken)
    mark = tmp_path / "done"
    sup, _ = _sup(f"import time; time.sleep(1.5); open({str(mark)!r}, 'w').write('x')")
    assert sup.run() == 0 and mark.exists()
    doc = [f for f in build_report(sup).findings if f.id == "DOC004"]
    assert len(doc) == 1 and "watching the job" in doc[0].title


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_quiet_a_run_without_an_own_error_has_no_doc004():
    from ddpdoctor.commands.run import build_report

    sup, lines = _sup("import sys; sys.exit(3)")
    assert sup.run() == 3
    assert not [f for f in build_report(sup).findings if f.id == "DOC004"] and not sup.own_errors
    assert not any("own error" in ln for ln in lines)


# A SIGKILL explained as SLURM's end of the job only on its evidence (data/slurm_states.json).

def _ev(tmp_path, info):
    from ddpdoctor.run import kills

    cg = tmp_path / "v1"
    cg.mkdir(exist_ok=True)
    (cg / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 0\n")
    return kills.KillEvidence(environ={"SLURM_JOB_ID": "77"}, cgroup_dir=str(cg), kmsg_path=str(tmp_path / "x"),
                              xid=False, slurm_reader=lambda job: dict(info))


def test_trigger_slurm_kill_named_when_run_got_sigterm_and_scontrol_says_the_job_ended(tmp_path):
    ev = _ev(tmp_path, {"JobState": "CANCELLED", "TimeLimit": "01:00:00", "EndTime": "2099-01-01T00:00:00"})
    ev.sigterm_t = 100.0
    got = ev.explain(5, t=130.0)  # SIGKILL 30 s after the SIGTERM (KillWait)
    assert got["cause"] == "slurm" and "(scancel)" in got["text"] and not got["guess"], got
    unread = _ev(tmp_path, {})
    unread.sigterm_t = 100.0
    g = unread.explain(5, t=130.0)
    assert g["cause"] == "slurm" and g["guess"] and "a guess" in g["text"] and "scontrol could not" in g["evidence"]


def test_quiet_no_slurm_claim_without_run_sigterm_while_the_job_runs_or_before_the_sigterm(tmp_path):
    """Quiet: `run` got no SIGTERM (a step cancelled around it); the job still RUNNING (the SIGTERM came from
    elsewhere); the kill 20 s BEFORE the SIGTERM -> not SLURM's, nothing claims scancel."""
    ended = {"JobState": "CANCELLED", "EndTime": "2099-01-01T00:00:00"}
    assert _ev(tmp_path, ended).explain(5, t=130.0)["cause"] is None  # sigterm_t unset
    running = _ev(tmp_path, {"JobState": "RUNNING", "EndTime": "2099-01-01T00:00:00"})
    running.sigterm_t = 100.0
    assert running.explain(5, t=130.0)["cause"] is None
    early = _ev(tmp_path, ended)
    early.sigterm_t = 100.0
    got = early.explain(5, t=80.0)
    assert got["cause"] is None and "scancel" not in got["text"]


def test_the_slurm_states_have_their_source():
    from ddpdoctor.run import kills

    st = kills.slurm_states()
    assert st["source"]["repo"] == "SchedMD/slurm" and len(st["source"]["commit"]) == 40
    assert set(st["ended_by_scheduler"]) & set(st["not_ended"]) == set()
    for name in (*st["ended_by_scheduler"], *st["not_ended"]):
        assert f"JOB_{name}" in st["source"]["symbol"] or name in ("SUSPENDED",)


# Sampled steps: what the straggler test judged and how many were sampled; a long job's records bounded.

NAN = float("nan")


def _series(n, every, ms, t0=1000.0, slow_coll=None):
    """One rank's records of `n` steps of `ms` ms, the split measured every `every`-th step (the recorder's
    sampling): sampled records carry the five parts, the others the wall time alone (facts.steps' form)."""
    out, t = [], t0
    for k in range(1, n + 1):
        t += ms / 1000.0
        if k % every == 0:
            coll = slow_coll if slow_coll is not None else ms * 0.3
            out.append((k, 1, t, 0.0, ms * 0.6 - (coll - ms * 0.3), coll, ms * 0.05, ms * 0.05, ms * 0.5))
        else:
            out.append((k, 1, t, NAN, NAN, NAN, NAN, ms, NAN))
    return out


def test_trigger_not_judged_says_which_steps_how_many_sampled_and_their_wall_time():
    """Trigger: 2 ranks, 120 steps of 10 ms, every 8th sampled -> 15 sampled common steps: 'steps 8-120: 15 of their
    113 steps sampled', their wall time 1.13 s (from the records' end times; the estimate is kept for the gate)."""
    from ddpdoctor.facts import steps

    nj = steps.not_judged({0: _series(120, 8, 10.0), 1: _series(120, 8, 10.0)})
    assert nj["reason"] == "steps" and nj["common_steps"] == 15
    assert (nj["first_step"], nj["last_step"], nj["spanned_steps"]) == (8, 120, 113)
    assert abs(nj["wall_s"] - 1.13) < 0.011, nj
    text = steps.not_judged_text(nj)
    assert "steps 8-120: 15 of their 113 steps sampled" in text and "1.13 s of steps (their wall time" in text, text


def test_trigger_sampled_slow_steps_do_not_inflate_the_span_said():
    """Trigger of the class round 19 left: the sampled steps are the job's slow ones (200 ms) among 2 ms steps, every
    8th sampled: the stride x median estimate says ~20 s; the wall time said is the records' (~3.5 s)."""
    from ddpdoctor.facts import steps

    def mixed():
        out, t = [], 0.0
        for k in range(1, 121):
            slow = k % 8 == 0
            t += 0.2 if slow else 0.002
            out.append((k, 1, t, 0.0, 130.0, 60.0, 5.0, 5.0, 150.0) if slow else (k, 1, t, NAN, NAN, NAN, NAN, 2.0, NAN))
        return out

    nj = steps.not_judged({0: mixed(), 1: mixed()})
    assert nj["span_s"] > 15 and nj["wall_s"] < 3.5, nj
    assert f"{nj['wall_s']:g} s of steps" in steps.not_judged_text(nj)


def test_quiet_unsampled_jobs_keep_their_words():
    """Quiet: every step sampled -> no 'of their ... sampled' clause; the steps and the figures as before."""
    from ddpdoctor.facts import steps

    nj = steps.not_judged({0: _series(10, 1, 100.0), 1: _series(10, 1, 100.0)})
    text = steps.not_judged_text(nj)
    assert "sampled)" not in text and "(steps 1-10), 1 s of steps of 100.0 ms" in text, text


def test_a_sampled_verdict_says_how_many_of_its_steps_were_judged():
    """The straggler verdict on sampled steps: judged_steps (sampled), spanned_steps, wall_s; RUN020's detail says
    them. Rank 1 waits least (the straggler) over 400 steps of 10 ms, every 4th sampled. Quiet: every step sampled ->
    judged == spanned, no clause."""
    from ddpdoctor.checks.run import straggler as run020  # noqa: F401 - the check's module
    from ddpdoctor.facts import steps

    by = {0: _series(400, 4, 10.0, slow_coll=6.0), 1: _series(400, 4, 10.0, slow_coll=0.5)}
    v = steps.straggler(by)
    assert v is not None and v["ranks"] == [1], v
    assert v["judged_steps"] < v["spanned_steps"] and v["spanned_steps"] == v["window"][1] - v["window"][0] + 1
    assert v["wall_s"] >= 3.0
    full = steps.straggler({0: _series(400, 1, 10.0, slow_coll=6.0), 1: _series(400, 1, 10.0, slow_coll=0.5)})
    assert full["judged_steps"] == full["spanned_steps"]


def test_a_long_jobs_records_are_bounded_and_the_table_says_which_steps_it_covers(monkeypatch):
    """>100k step records: a synthetic recorded series of 250,000 steps fed through a process's beacon ring in
    chunks -> at most MAX_STEPS_KEPT kept, the count dropped, the table's note names the first kept step, the split
    summary bounded (no per-step list). Quiet: 1,000 steps -> nothing dropped, no note."""
    from ddpdoctor.run import supervisor as sv

    monkeypatch.setattr(sv, "MAX_STEPS_KEPT", 20_000)  # the same rule at a smaller bound (fast)

    def proc(n):
        p = sv.Proc.__new__(sv.Proc)
        p.steps, p.ring_n, p.missed, p.dropped, p.beacon = [], 0, 0, 0, {}
        recs = _series(n, 8, 5.0)
        for i in range(0, n, 5000):
            chunk = [list(r) + [1] for r in recs[i:i + 5000]]
            p._take_ring({"ring": {"n": p.ring_n + len(chunk), "steps": chunk}})
        return p

    p = proc(50_000)
    assert len(p.steps) == 20_000 and p.dropped == 30_000 and p.steps[0][0] == 30_001
    sp = p.split()
    assert sp["dropped"] == 30_000 and sp["first"] == 30_001 and len(json.dumps(sp)) < 2000
    sup = sv.Supervisor.__new__(sv.Supervisor)
    sup.straggler_reports = []
    monkeypatch.setattr(sv.Supervisor, "summaries", lambda self: {0: sp, 1: sp})
    lines = sup.table_lines("on SIGUSR1")  # mid-job: the table alone
    assert any("steps 30,001 on, the first 30,000 steps' records were dropped" in ln for ln in lines), lines
    q = proc(1_000)
    assert q.dropped == 0 and "dropped" not in q.split()


def test_run020_detail_says_the_sampled_steps_it_judged():
    from ddpdoctor.facts import steps
    from ddpdoctor.pipeline.judge import judge
    from ddpdoctor.pipeline.snapshot import Snapshot

    def detail(every):
        v = steps.straggler({0: _series(400, every, 10.0, slow_coll=6.0), 1: _series(400, every, 10.0, slow_coll=0.5)})
        (f,) = judge(Snapshot(sections={"run": {"straggler": v}}), command="run", only={"RUN020"}, when="run").findings
        return v, f.detail

    v, d = detail(4)
    assert f"{v['judged_steps']} of these {v['spanned_steps']} steps were sampled" in d and f"{v['wall_s']:g} s of the job" in d, d
    assert "were sampled" not in detail(1)[1]


# ddpdoctor's own code raising INSIDE a rank (the recorder): its frames kept, DOC004, never RUN010 on the rank.

def _raise_in_recorder():
    from ddpdoctor.run import recorder

    return recorder._wrap_span(lambda: recorder.strip_own_frames(42), recorder.OTHER)  # raises in recorder.py


def test_trigger_an_exception_raised_in_the_recorder_keeps_its_frames_and_is_ours():
    import traceback

    from ddpdoctor.run import section

    try:
        _raise_in_recorder()()
    except AttributeError as exc:
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    from ddpdoctor.run import stacks

    assert stacks.traceback_frames(text)[0]["file"].endswith("recorder.py"), text  # the raise site is still there
    assert section.raised_in_ddpdoctor(text)


def test_quiet_the_users_exception_through_a_wrapper_is_not_ours():
    import traceback

    from ddpdoctor.run import recorder, section

    def user():
        raise ValueError("x")

    try:
        recorder._wrap_span(user, recorder.OTHER)()
    except ValueError as exc:
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    assert "recorder.py" not in text and not section.raised_in_ddpdoctor(text)
    assert not section.raised_in_ddpdoctor('  File "/job/ddpdoctor_like/train.py", line 3, in f\n')


def _dead_rank_sup(tb):
    class Sup:
        own_errors = []

        def exit_status(self):
            return 1

    sec = {"ranks": [{"rank": 1, "pid": 9, "end": {"how": "exception", "ours": section_ours(tb),
                                                   "exception": {"type": "AttributeError", "message": "boom",
                                                                 "traceback": tb}}}]}
    return Sup(), sec


def section_ours(tb):
    from ddpdoctor.run import section

    return section.raised_in_ddpdoctor(tb)


def test_trigger_doc004_for_ddpdoctors_failure_inside_a_rank_and_no_run010():
    import ddpdoctor.run.recorder as rec
    from ddpdoctor.commands.run import own_failures
    from ddpdoctor.pipeline.judge import judge
    from ddpdoctor.pipeline.snapshot import Snapshot

    tb = f'Traceback (most recent call last):\n  File "/job/train.py", line 9, in <module>\n  File "{rec.__file__}", line 300, in strip_own_frames\nAttributeError: boom\n'
    sup, sec = _dead_rank_sup(tb)
    (f,) = own_failures(sup, sec)
    assert f.id == "DOC004" and "inside rank 1" in f.title and not f.subjects and "recorder.py:300" in f.detail
    sec["death"] = {"first_rank": 1}
    assert not judge(Snapshot(sections={"run": sec}), command="run", only={"RUN010"}, when="run").findings
    user_tb = 'Traceback (most recent call last):\n  File "/job/train.py", line 9, in <module>\nAttributeError: boom\n'
    sup, sec = _dead_rank_sup(user_tb)
    assert own_failures(sup, sec) == []  # quiet: the user's own exception is not ours


# A rank blocked in a backward hook that is not the user's file (a library's, a profiler's, code injected into the job)
# inside autograd's engine: not DDP's all-reduce (first read run-r20 j4: RUN007 'ranks 0, 1: the DDP gradient
# all-reduce' for a global module backward hook from a sitecustomize that slept on rank 1).

def _rec_main(frames, injected=()):
    from ddpdoctor.run.section import rank_record

    p = {"pid": 11, "alive": True, "dump": _thread(1, frames), "cpu_frac": 0.0, "running_frac": 0.0,
         "beacon": {"phase": "run", "rank": 1, "step": 3}, "info": {"rank": 1, "main_thread": 1, "injected": list(injected)}}
    return rank_record(p, LIB, 100.0, [])


HOOKS = [(f"{SP}/torch/utils/hooks.py", 137, "hook"), (f"{SP}/torch/nn/modules/module.py", 100, "_call_impl")]


def test_trigger_a_non_user_backward_hook_inside_the_engine_is_outside_at_its_frame():
    """Trigger: the injected sitecustomize's hook (as in j4) and a library's hook in site-packages, innermost of the
    engine with torch's hook frames between -> 'outside', the hook frame named, the user's line kept as the place."""
    inj = "/job/inject/sitecustomize.py"
    r = _rec_main([(inj, 53, "bw"), *HOOKS, *ENGINE], injected=[inj])
    assert r["state"] == "outside" and r["hook_frame"]["file"] == inj and r["user_frame"]["line"] == 25, r
    assert "sitecustomize.py:53 in bw" in r["doing"]
    lib = f"{SP}/someprofiler/hooks.py"
    r = _rec_main([("/usr/lib/python3.11/threading.py", 320, "wait"), (lib, 40, "on_backward"), *HOOKS, *ENGINE])
    assert r["state"] == "outside" and r["hook_frame"]["file"] == lib, r


def test_quiet_torchs_frames_alone_or_a_library_hook_in_a_collective_stay_in_the_all_reduce():
    """Quiet: torch's own frames inside the engine (_DDPSink, torch/utils/hooks.py), our recorder's frame, and a
    library's hook that waits in torch.distributed (DeepSpeed's gradient reduction) -> 'backward', no hook_frame."""
    sink = [(f"{SP}/torch/nn/parallel/distributed.py", 260, "backward"), *HOOKS]
    rec = [("/venv/lib/python3.11/site-packages/ddpdoctor/run/recorder.py", 600, "span"), *HOOKS]
    coll = [(f"{SP}/torch/distributed/distributed_c10d.py", 2800, "all_reduce"),
            (f"{SP}/deepspeed/runtime/zero/stage_1_and_2.py", 900, "reduce_ipg_grads"), *HOOKS]
    for inside in (sink, rec, coll):
        r = _rec_main([*inside, *ENGINE])
        assert r["state"] == "backward" and "hook_frame" not in r, r


GLOBAL_HOOK_SITE = """
import os, sys, time
def _install():
    import torch
    steps = [0]
    def pre(opt, args, kwargs):
        steps[0] += 1
    from torch.optim.optimizer import register_optimizer_step_pre_hook
    register_optimizer_step_pre_hook(pre)
    def bw(module, grad_in, grad_out):
        if os.environ.get("RANK") == "1" and steps[0] >= BLOCK_AT:
            time.sleep(3600)  # A HOOK OF CODE INJECTED INTO THE JOB
    torch.nn.modules.module.register_module_full_backward_hook(bw)
class _Hook:
    def find_spec(self, name, path=None, target=None):
        if name != "torch" or getattr(self, "busy", False):
            return None
        import importlib.util
        self.busy = True
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self.busy = False
        real = spec.loader.exec_module
        def exec_module(module):
            real(module)
            _install()
        spec.loader.exec_module = exec_module
        sys.meta_path.remove(self)
        return spec
sys.meta_path.insert(0, _Hook())
"""

PLAIN_JOB = """
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group("gloo")
torch.manual_seed(0)
model = DDP(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1)))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for i in range(STEPS):
    model(torch.randn(4, 8)).sum().backward()
    opt.step(); opt.zero_grad()
    print(f"step {i}", flush=True)  # one write per line: two ranks share the pipe
dist.barrier()
dist.destroy_process_group()
"""


def _run_global_hook_job(tmp_path, block_at, steps):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(GLOBAL_HOOK_SITE.replace("BLOCK_AT", str(block_at)))
    script = tmp_path / "plain_job.py"
    script.write_text(PLAIN_JOB.replace("STEPS", str(steps)))
    path = str(site) + os.pathsep + os.environ.get("PYTHONPATH", "")
    return stopped_at_stall(tmp_path, script, env_extra={"PYTHONPATH": path})


@pytest.mark.slow
def test_real_a_hook_injected_into_the_job_blocking_in_backward_is_named_on_its_rank(tmp_path):
    """For real (Gloo, torchrun): a sitecustomize registers a global module backward hook that sleeps on rank 1 from
    its 3rd step. RUN002 names rank 1, the hook frame in its record (at d6321958: RUN007, both 'in the all-reduce')."""
    rc, out, data = _run_global_hook_job(tmp_path, 3, 100000)
    ranks = {r["rank"]: r for r in data["run"]["ranks"]}
    assert "step 1" in out and ranks[1]["step"] >= 2, out[-4000:]
    assert ranks[0]["state"] == "backward"  # the state the test needs: rank 0 waits in DDP's all-reduce
    assert ranks[1]["state"] == "outside" and "sitecustomize.py" in str(ranks[1]["stack"]), ranks[1]
    stalls = [f for f in data["findings"] if f["id"] in ("RUN002", "RUN007")]
    assert [f["id"] for f in stalls] == ["RUN002"] and "rank 1" in stalls[0]["title"], stalls


@pytest.mark.slow
def test_real_quiet_the_same_injected_hook_not_blocking_ends_well(tmp_path):
    rc, out, data = _run_global_hook_job(tmp_path, 10 ** 9, 8)
    assert "step 7" in out, out[-4000:]
    assert rc == 0 and not [f for f in data["findings"] if f["id"] in ("RUN002", "RUN007")], data["findings"]


# A SIGKILLed rank leaves no stack: its line is the one the recorder saw last, said as such (run-r20 j7 / run-r20c k7:
# "died first ... at accelerate_example.py:38" for a rank killed inside optimizer.step()).

def _kill_findings(**rank1):
    sys.path.insert(0, os.path.dirname(__file__))
    from run_factory import proc

    from ddpdoctor.pipeline.judge import judge
    from ddpdoctor.pipeline.snapshot import Snapshot
    from ddpdoctor.run import section as run_section

    beacon = {"phase": "run", "rank": 1, "step": 3, "pl": "/job/train.py:38"}
    p1 = proc(11, 1, end_t=50.1, beacon=beacon, **dict({"status": -9}, **rank1))
    sec = run_section.build([proc(10, 0, end_t=50.5, status=1), p1], 60.0, death=True)
    return [f for f in judge(Snapshot(sections={"run": sec}), command="run", only={"RUN010"}, when="run").findings]


def test_trigger_a_sigkilled_ranks_line_is_its_last_recorded_one():
    (f,) = _kill_findings()
    assert "killed by SIGKILL" in f.title and "its last recorded line train.py:38 (no stack at its end)" in f.title, f.title


def test_quiet_an_exceptions_line_or_a_stack_at_the_end_is_where_it_died():
    exc = {"type": "ValueError", "message": "bad", "t": 50.0,
           "user": {"file": "/job/train.py", "line": 12, "func": "main"}}
    (f,) = _kill_findings(exc=exc, status=1)
    assert ", at train.py:12" in f.title and "last recorded" not in f.title, f.title
    dump = 'Thread 0x0000000000000001 (most recent call first):\n  File "/job/train.py", line 44 in main\n'
    (g,) = _kill_findings(dump=dump)
    assert ", at train.py:44" in g.title and "last recorded" not in g.title, g.title
