"""Round 19 (run19), issue 27: the short straggler rule's exposure, and a short job's lead said with its figure.

1. The short rule (facts.steps, 8-19 common steps spanning >= 3 s, every step led by the same rank by >= 50%) judged
   whatever records it was given: the supervisor's live check every second read the first 8-19 steps of a LONG job
   as a short job, so a warm-up on one rank (a cold page cache, compilation, rank 0's extra first-step work) was
   named RUN020 at step 8 (real: trainer_job.py --steps 40 --delay-backward 1=0.5 --delay-until 10, "Steps 1-9").
   Now the short rule judges a job that ENDED within the window (`ended`), at the job's end, with the facts the
   supervisor took while it ran.
2. A short job whose rank leads by 25-50% of the step (below the short rule's bar) was silent beyond "only a
   straggler that leads every step by >= 50% could be named": now the lead is said with its figures, not named.
"""
from __future__ import annotations

import pytest

from ddpdoctor.facts import steps as st

from test_run_faults import doctor, run_findings, torchrun
from test_run_round18c import short_job


def _live(by_rank, ended):
    """The supervisor's live checks: every prefix of the records, as they grow."""
    n = len(next(iter(by_rank.values())))
    return [k for k in range(2, n + 1) if st.straggler({r: v[:k] for r, v in by_rank.items()}, ended=ended)]


# ---- 1. the exposure: a warm-up in a long job is not a short job

def test_a_warm_up_of_8_to_15_steps_on_one_rank_of_a_long_job_is_not_named_live():
    """Rank 1 held +1 s or +3 s (1 s steps) for its first 8, 10, 12 or 15 steps of a 60-step job: judged live as the
    records grow, nothing is named (before: named at step 8-9 in most seeds, with ended=True, the old behaviour, which
    this test also shows so that it can fail); judged whole at the end, nothing either (the later steps show no lead)."""
    before = 0
    for warm in (8, 10, 12, 15):
        for extra in (1000.0, 3000.0):
            for seed in range(5):
                job = short_job(steps=60, base=1000.0, noise=0.1, seed=seed, held={1: (1, warm, extra)})
                assert _live(job, ended=False) == [], (warm, extra, seed)
                assert st.straggler(job, ended=True) is None
                before += bool(_live(job, ended=True))
    assert before >= 20  # the old reading (the short rule on any prefix) named most of these 40 warm-ups


def test_a_job_that_ended_within_the_window_is_still_judged_by_the_short_rule():
    """Trigger kept: the 10-step job of ~1 s steps whose rank 1 loads each batch 1 s slower is named when judged as a
    whole ended job (the supervisor's check at the end); a live check of its first 10 steps names nobody yet."""
    job = short_job(slow=1, extra=1000.0, noise=0.05)
    assert _live(job, ended=False) == []
    s = st.straggler(job, ended=True)
    assert s is not None and s["ranks"] == [1] and s["rule"] == "short"
    assert st.straggler(short_job(steps=40, slow=1, extra=1000.0, noise=0.05), ended=False)["rule"] == "window"


class _Sup:
    """The supervisor's straggler path (_check_straggler, _hold_short, _check_short_straggler, _publish_straggler) with
    its readers of the machine stubbed: the records come from `records`, the facts from a counter."""

    def __init__(self):
        from ddpdoctor.run.supervisor import Supervisor

        self.sup = Supervisor(["true"])
        self.records = {}
        self.facts_taken = []
        self.published = []
        s = self.sup
        s.steps_by_rank = lambda: self.records
        s._sample_host = lambda ranks: {}
        s.build = lambda **kw: {}
        s._supersede_attribution = lambda new: None
        s.death_done = s.stall_open = False  # set by the watch loop (_loop)

        def facts(verdict):
            self.facts_taken.append(list(verdict["ranks"]))
            return {str(r): {"workers": 0, "line": "job.py:7 `load()`"} for r in verdict["ranks"]}

        def judge(sec, what, kind=None):
            self.published.append(sec["straggler"])
            return []

        s.straggler_facts = facts
        s._judge_and_print = judge

    def run(self, job):
        n = len(next(iter(job.values())))
        for k in range(1, n + 1):
            self.records = {r: v[:k] for r, v in job.items()}
            self.sup._check_straggler(1000.0 + k)
        self.sup._check_short_straggler()


def test_the_supervisor_names_a_short_jobs_straggler_at_its_end_with_the_facts_taken_while_it_ran():
    sup = _Sup()
    sup.run(short_job(slow=1, extra=1000.0, part="data", noise=0.05))
    assert len(sup.published) == 1 and sup.published[0]["rule"] == "short" and sup.published[0]["ranks"] == [1]
    assert sup.facts_taken == [[1]]  # once, live (at the step the short rule first held), not after the ranks exited
    assert "job.py:7" in sup.published[0]["cause"]["text"]


def test_the_supervisor_names_nobody_for_a_warm_up_in_a_long_job():
    sup = _Sup()
    sup.run(short_job(steps=40, base=1000.0, noise=0.1, held={1: (1, 10, 3000.0)}))
    assert sup.published == []
    assert sup.facts_taken == [[1]]  # the warm-up looked like a short job's straggler while it lasted: held, not said


# ---- 2. a short job's lead below the short rule's bar: said, with its figure

def test_a_short_jobs_lead_of_a_third_of_the_step_is_said_not_named():
    """10 steps of ~1 s, rank 1's loader +500 ms (33% of the ~1.5 s step): not named (the short rule needs 50%), and the
    end says which rank led, in how many steps, and what it cost."""
    job = short_job(base=1000.0, slow=1, extra=500.0, noise=0.05)
    assert st.straggler(job) is None
    nj = st.not_judged(job)
    assert nj["reason"] == "short" and nj["leader"]["ranks"] == [1] and nj["leader"]["led"] == 10
    assert 0.25 <= nj["leader"]["cost_frac"] < 0.5
    text = st.not_judged_text(nj)
    assert "Seen: rank 1 waited least in 10 of its 10 sampled common step(s) (step(s) 1-10)" in text
    assert "33% of the" in text and "not named" in text
    # fewer steps than the short rule's 8 (reason "steps"): the same figure
    assert st.not_judged(short_job(steps=5, base=1000.0, slow=1, extra=500.0))["leader"]["ranks"] == [1]


def test_healthy_short_jobs_show_no_leader():
    """Quiet: 1,000 healthy 10-step jobs (+-30% jitter on every part), a rank held for 3 of 10 steps, an even 10% lead
    (under the 25% bar): no leader said."""
    for seed in range(1000):
        assert "leader" not in st.not_judged(short_job(base=1000.0, noise=0.3, seed=seed)), seed
    assert "leader" not in st.not_judged(short_job(base=1000.0, noise=0.05, held={1: (4, 6, 1000.0)}))
    assert "leader" not in st.not_judged(short_job(base=1000.0, slow=1, extra=100.0, noise=0.02))


# ---- for real: Gloo, torchrun, the Trainer fixture

@pytest.mark.slow
@pytest.mark.timeout(300)
def test_real_warm_up_on_one_rank_of_a_40_step_job_is_not_named(tmp_path):
    """Rank 1's backward sleeps 0.5 s in its first 10 steps only (--delay-until 10), then the job runs on: before this
    round RUN020 named rank 1 live ("Steps 1-9"); now no RUN020. First asserts the state the question needs: each rank
    recorded more steps than the window (a long job) and rank 1's slowest steps carry the injected sleep."""
    rc, out, rep = doctor(tmp_path, torchrun("trainer_job.py", "--steps", "40", "--delay-backward", "1=0.5",
                                             "--delay-until", "10"), "--stall-after", "60")
    ranks = {r["rank"]: r for r in rep["run"]["ranks"]}
    assert set(ranks) == {0, 1}, out[-3000:]
    assert all(((r.get("split") or {}).get("steps") or 0) > st.WINDOW for r in ranks.values()), out[-3000:]
    assert ranks[1]["split"]["compute"]["p95"] >= 400, out[-3000:]  # the injected 0.5 s sleep happened
    assert [f for f in run_findings(rep) if f["id"] == "RUN020"] == [] and rc == 0, out[-3000:]


# ---- 3. every SIGKILL explained: the kernel's OOM report in each of its forms (mm/oom_kill.c, see run/kills.py)

def _evidence(tmp_path, lines):
    from ddpdoctor.run import kills

    ev = kills.KillEvidence(environ={}, cgroup_dir=str(tmp_path / "none"), kmsg_path=str(tmp_path / "no-kmsg"), xid=False)
    ev.kmsg.lines = list(lines)
    return ev


MODERN_NODE = [  # 5.x/6.x, a node-wide OOM (dump_oom_summary, then __oom_kill_process)
    "python invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, oom_score_adj=0",
    "oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/user.slice,"
    "task=python,pid=4242,uid=1000",
    "Out of memory: Killed process 4242 (python) total-vm:9000000kB, anon-rss:8000000kB, file-rss:0kB, shmem-rss:0kB, "
    "UID:1000 pgtables:17000kB oom_score_adj:0"]
ALLOCATING = [  # vm.oom_kill_allocating_task=1: the allocating task is killed, with its own prefix
    "Out of memory (oom_kill_allocating_task): Killed process 6161 (python) total-vm:100kB, anon-rss:90kB, "
    "file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:1kB oom_score_adj:0"]
OLD_MEMCG = [  # <= 4.x (RHEL 7/8): the scope on the lines before a bare "Killed process"
    "python invoked oom-killer: gfp_mask=0xd0, order=0, oom_score_adj=0",
    "Task in /slurm/uid_1000/job_77/step_0 killed as a result of limit of /slurm/uid_1000/job_77",
    "memory: usage 8388608kB, limit 8388608kB, failcnt 451",
    "Memory cgroup out of memory: Kill process 7171 (python) score 998 or sacrifice child",
    "Killed process 7171 (python) total-vm:9000000kB, anon-rss:8000000kB, file-rss:0kB, shmem-rss:0kB"]
OLD_CHILD = [  # <= 4.x: the rank (8181) chosen, its DataLoader worker (8282) sacrificed
    "Out of memory: Kill process 8181 (python) score 900 or sacrifice child",
    "Killed process 8282 (pt_data_worker) total-vm:900kB, anon-rss:800kB, file-rss:0kB, shmem-rss:0kB"]


def test_each_form_of_the_kernels_oom_report_explains_the_sigkill(tmp_path):
    """The 5.x/6.x node and memcg forms (read before too), the oom_kill_allocating_task prefix and the <= 4.x two-line
    form with its scope before it (both unexplained before: 'nothing on this node says who sent it')."""
    got = _evidence(tmp_path, MODERN_NODE).explain(4242)
    assert got["cause"] == "oom-killer" and "Killed process 4242" in got["evidence"]
    got = _evidence(tmp_path, ALLOCATING).explain(6161)
    assert got["cause"] == "oom-killer" and "oom_kill_allocating_task" in got["evidence"]
    got = _evidence(tmp_path, OLD_MEMCG).explain(7171)
    assert got["cause"] == "cgroup-limit" and "Killed process 7171" in got["evidence"]
    assert "its report: Memory cgroup out of memory: Kill process 7171" in got["evidence"]
    got = _evidence(tmp_path, OLD_CHILD).explain(8282)
    assert got["cause"] == "oom-killer"


def test_the_process_chosen_but_not_killed_and_other_pids_are_not_explained_by_it(tmp_path):
    """Quiet: in the <= 4.x form the chosen rank (8181) whose child was sacrificed was not killed; another pid's kill
    is not this rank's; nothing readable says what to read on the node."""
    assert _evidence(tmp_path, OLD_CHILD).explain(8181)["cause"] is None
    for lines in (MODERN_NODE, ALLOCATING, OLD_MEMCG):
        got = _evidence(tmp_path, lines).explain(1)
        assert got["cause"] is None and "dmesg" in got["read"]


# ---- first read run-r19, its class: a rank's own failure before torchrun's teardown is no consequence of it

def _death(procs):
    from ddpdoctor.run import section

    from test_run_split import findings

    sec = section.build(procs, 60.0, death=True)
    return sec, findings(sec, "RUN010")


def _exc(typ, msg, t, line=17):
    return {"type": typ, "message": msg, "t": t,
            "user": {"file": "/job/app.py", "line": line, "func": "<module>", "code": "x"}}


def _terminated(t, after):
    return {"role": "terminated", "signal": "SIGTERM", "after": after, "t": t, "reason": "a worker failed"}


def test_an_exception_raised_before_torchruns_teardown_is_the_first_failure_not_its_consequence():
    """j5's shape: rank 1 raises ValueError at 100.00 and stays alive finalising (Gloo's group); rank 0 raises
    TypeError at 100.20 and exits; torchrun tears rank 1 down at 101.60 'after rank 0 failed'. Rank 1 failed first:
    RUN010 names it (before: rank 0, and rank 1's ValueError 'a consequence of it, -0.20 s'); rank 0's TypeError is
    told as a failure of its own, not a consequence."""
    from run_factory import proc

    r0 = proc(10, 0, exc=_exc("TypeError", "Trainer.__init__() got an unexpected keyword argument 'tokenizer'", 100.2, 22),
              end_t=100.3, status=1)
    r1 = proc(11, 1, exc=_exc("ValueError", "injected: a malformed example", 100.0), end_t=101.7,
              launcher=_terminated(101.6, [0]))
    sec, [f] = _death([r0, r1])
    assert sec["death"]["first_rank"] == 1 and "rank 1 died first" in f.title and "ValueError" in f.title
    assert "Also failed of itself, later (not a consequence): rank 0 (raised TypeError" in f.detail
    assert "consequences of it" not in f.detail


def test_an_exception_after_the_teardown_record_or_naming_a_lost_peer_stays_a_consequence():
    """Quiet: the same ranks, but rank 1's exception comes after torchrun recorded its teardown (the peer's end may
    have reached it first), or it is a lost peer's error, or the SystemExit a SIGTERM handler raises: rank 0 first."""
    from run_factory import proc

    r0 = proc(10, 0, exc=_exc("TypeError", "bad kwarg", 100.2, 22), end_t=100.3, status=1)
    for exc in (_exc("ValueError", "late", 101.65), _exc("RuntimeError", "Connection closed by peer [127.0.0.1]:1", 100.0),
                _exc("SystemExit", "15", 100.0)):
        r1 = proc(11, 1, exc=exc, end_t=101.7, launcher=_terminated(101.6, [0]))
        sec, [f] = _death([dict(r0), r1])
        assert sec["death"]["first_rank"] == 0 and "rank 0 died first" in f.title, exc
        assert "consequences of it: rank 1" in f.detail


def test_a_killed_ranks_end_is_bounded_by_the_teardown_that_names_it():
    """j4's shape: rank 1 SIGKILLed at ~100.00, seen gone by the poll at 100.15; torchrun records tearing rank 0 down
    'after rank 1 failed' at 100.05; rank 0's TypeError at 100.10 (after that record: a consequence, as before). Rank
    1's end is at most 100.05 (t_src launcher): rank 0 reads +0.05 s after it, not -0.05 s."""
    from run_factory import proc

    r1 = proc(11, 1, status=-9, end_t=100.15)
    r0 = proc(10, 0, exc=_exc("TypeError", "bad kwarg", 100.10, 22), end_t=100.3, launcher=_terminated(100.05, [1]))
    sec, [f] = _death([r0, r1])
    e1 = next(r for r in sec["ranks"] if r["rank"] == 1)["end"]
    assert (e1["t"], e1["t_src"]) == (100.05, "launcher")
    assert sec["death"]["first_rank"] == 1 and "+0.05 s" in f.detail and "-0.05 s" not in f.detail
    # no teardown record names it: its poll time stands
    sec, _ = _death([proc(11, 1, status=-9, end_t=100.15), proc(10, 0, exc=_exc("TypeError", "x", 100.3, 22), end_t=100.4,
                                                                   status=1)])
    assert next(r for r in sec["ranks"] if r["rank"] == 1)["end"]["t_src"] == "poll"


def test_the_same_error_on_every_rank_is_said_to_be_the_scripts():
    """j1's shape: both ranks raise the same TypeError at the same line (the script's bug): the detail says so; two
    different errors do not get that line."""
    from run_factory import proc

    msg = "Trainer.__init__() got an unexpected keyword argument 'tokenizer'"
    r0 = proc(10, 0, exc=_exc("TypeError", msg, 100.0, 22), end_t=100.3, status=1)
    r1 = proc(11, 1, exc=_exc("TypeError", msg, 100.27, 22), end_t=100.4, status=1)
    _, [f] = _death([r0, r1])
    assert "Every rank that failed raised the same TypeError at app.py:22" in f.detail
    r1 = proc(11, 1, exc=_exc("ValueError", "other", 100.27, 17), end_t=100.4, status=1)
    _, [f] = _death([dict(r0), r1])
    assert "Every rank that failed" not in f.detail


# ---- first read run-r19: ddpdoctor's own stack signal ended ranks that were finishing ("exitcode -40")

_LATE_CHILD = r"""
import ctypes, os, sys
from ddpdoctor.run import recorder
recorder.S.dir, recorder.S.pid, recorder.S.files = sys.argv[1], os.getpid(), []
recorder._register_faulthandler()
libc = ctypes.CDLL(None)
# C exit handlers run in exit(), after Py_FinalizeEx (faulthandler's fini among it), in reverse order: close(fd) tells
# the parent this process got there, then pause() holds it there, as Gloo's teardown holds a rank waiting for a peer
libc.__cxa_atexit(ctypes.cast(libc.pause, ctypes.c_void_p), None, None)
libc.__cxa_atexit(ctypes.cast(libc.close, ctypes.c_void_p), ctypes.c_void_p(int(sys.argv[2])), None)
raise ValueError("the rank's own failure")
"""


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_a_stack_signal_after_the_interpreter_finalised_does_not_end_the_process(tmp_path):
    """A rank that raised and is held in its C exit handlers (after CPython unregistered faulthandler's handlers) gets
    the stack signal (torchrun's agent takes every live worker's stacks before its SIGTERM): it must not die of it
    (before: killed by SIGRTMIN+6, torchrun's table "exitcode -40 ... Signal 40"). First the state: the child closed
    its pipe from its C exit handlers (EOF here); the signal is then no longer pending (delivered or ignored); only then
    SIGTERM ends it: -15 means the stack signal did not."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from ddpdoctor.run import recorder

    sig = recorder.default_signal()
    r, w = os.pipe()
    child = subprocess.Popen([sys.executable, "-c", _LATE_CHILD, str(tmp_path), str(w)], pass_fds=(w,),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    os.close(w)
    try:
        assert os.read(r, 1) == b"", "the child should close the pipe in its C exit handlers"
        os.kill(child.pid, sig)
        for _ in range(500):  # until the kernel no longer holds it pending for the process (or the process is gone)
            try:
                with open(f"/proc/{child.pid}/status") as fh:
                    pend = next(int(ln.split()[1], 16) for ln in fh if ln.startswith("ShdPnd:"))
            except (OSError, StopIteration):
                break
            if not pend & (1 << (sig - 1)) or child.poll() is not None:
                break
            time.sleep(0.01)
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=30) == -signal.SIGTERM, child.stderr.read().decode()[-2000:]
    finally:
        os.close(r)
        if child.poll() is None:
            child.kill()


# ---- first read run-r19: a library on PYTHONPATH read as the user's code

def test_import_path_dirs_holding_installed_projects_are_library_prefixes(tmp_path):
    """A directory on the import path with a *.dist-info (pip install --target, a module tree on PYTHONPATH) is a
    library: its frames are not the user's line (before: datasets' fingerprint.py:214 named as a rank's line). Quiet:
    a directory of plain modules, the script's own directory and the working directory even with a dist-info, an
    egg-info only (setup.py develop writes one into the user's source tree)."""
    from ddpdoctor.run.recorder import installed_dirs

    lib, plain, script, egg = (tmp_path / n for n in ("lib", "plain", "script", "egg"))
    for d in (lib, plain, script, egg):
        d.mkdir()
    (lib / "datasets").mkdir()
    (lib / "datasets-5.2.0.dist-info").mkdir()
    (plain / "helpers.py").write_text("")
    (script / "tool-1.0.dist-info").mkdir()
    (egg / "proj.egg-info").mkdir()
    got = installed_dirs([str(lib), str(plain), str(script), str(egg), "", str(tmp_path / "missing")],
                         skip=(str(script),))
    assert got == {str(lib) + "/"}
    from ddpdoctor.run.stacks import is_library

    assert is_library(str(lib / "datasets" / "fingerprint.py"), tuple(got))
    assert not is_library(str(plain / "helpers.py"), tuple(got))


# ---- item 5: a SIGKILL that is torchrun's own escalation (its SIGTERM not obeyed within the timeout)

def test_torchruns_sigkill_after_an_unobeyed_sigterm_is_explained_as_its_teardown():
    """torch/distributed/elastic/multiprocessing/api.py SubprocessContext._close (torch 2.13.0, cf30153c): SIGTERM to
    each live worker, then after `timeout` (30 s) "Unable to shutdown process ... forcefully exiting via" SIGKILL.
    The agent's record (launcher_hook) says torchrun ended the rank and its exit code -9: the kill is torchrun's, after
    rank 0 failed, not a node's OOM killer or an unknown sender. Quiet: the same teardown obeyed (SIGTERM: no kill to
    explain), and a SIGKILL only guessed (no exit status on record) is not claimed for torchrun."""
    from ddpdoctor.run.supervisor import Supervisor

    sup = Supervisor(["true"])
    by = {"who": "torchrun", "signal": "SIGTERM", "after_ranks": [0], "reason": "a worker failed", "t": 10.0}
    killed = {"rank": 1, "pid": 11, "end": {"how": "signal", "signal": "SIGKILL", "terminated_by": dict(by)}}
    obeyed = {"rank": 2, "pid": 12, "end": {"how": "signal", "signal": "SIGTERM", "terminated_by": dict(by)}}
    guessed = {"rank": 3, "pid": 13, "end": {"how": "vanished", "signal": "SIGKILL", "signal_guessed": True,
                                             "terminated_by": dict(by)}}
    sec = {"ranks": [killed, obeyed, guessed]}
    sup._explain_kills(sec)
    kill = killed["end"]["kill"]
    assert kill["cause"] == "torchrun" and "after its SIGTERM was not obeyed" in kill["text"] and "rank 0" in kill["text"]
    assert "kill" not in obeyed["end"] and "kill" not in guessed["end"]


def test_a_peers_own_error_inside_a_killed_ranks_unknown_moment_is_a_tie_not_a_first():
    """The re-read's j4: rank 1 SIGKILLed at ~856.72 (run last saw it running at 856.63; torchrun recorded tearing rank 0
    down "after rank 1 failed" at 856.832), rank 0 raised its own TypeError at 856.790, before that record. Rank 1's end
    lies in (856.63, 856.832], which holds 856.790: nothing orders them, RUN010 says so (before this: "rank 0 died
    first"). Quiet: rank 1 seen running after rank 0's exception (856.80): rank 0 first; rank 0's exception after the
    record: rank 1 first (torchrun had seen it fail by then)."""
    from run_factory import proc

    def job(alive_t, exc_t):
        r1 = proc(11, 1, status=-9, end_t=856.95, alive_t=alive_t)
        r0 = proc(10, 0, exc=_exc("TypeError", "bad kwarg", exc_t, 30), end_t=857.0, launcher=_terminated(856.832, [1]))
        return _death([r0, r1])

    sec, [f] = job(856.63, 856.790)
    assert sorted(sec["death"]["tied"]) == [0, 1] and sec["death"]["first_rank"] is None
    assert "nothing recorded which came first" in f.title
    sec, [f] = job(856.80, 856.790)
    assert sec["death"]["first_rank"] == 0 and "rank 0 died first" in f.title
    sec, [f] = job(856.63, 856.850)
    assert sec["death"]["first_rank"] == 1 and "rank 1 died first" in f.title


# ---- round 19 wave 2 (run19b): a warm-up lasting the whole first window is a start-up, judged at the job's end

def _run_sup(job):
    sup = _Sup()
    sup.sup._judge_and_print = lambda sec, what, kind=None, only=None: sup.published.append(sec["straggler"]) or []
    sup.run(job)
    sup.sup._check_startup()
    return sup


def test_a_warm_up_lasting_the_whole_first_window_is_a_start_up_at_the_jobs_end():
    """Rank 1 held +1 s (1 s steps) for its first 25 steps of a 60-step job: the window's rule names it live (it cannot
    tell while it lasts), and at the end it is judged again as a start-up: slow in steps 1-25, then 35 steady steps
    in which it does not lead by the cost bar."""
    for seed in range(5):
        job = short_job(steps=60, base=1000.0, noise=0.1, seed=seed, held={1: (1, 25, 1000.0)})
        sup = _run_sup(job)
        assert sup.published and sup.published[0]["ranks"] == [1] and "startup" not in sup.published[0], seed
        su = sup.published[-1].get("startup")
        assert su is not None and su["ranks"] == [1] and su["slow_steps"] == [1, 25], (seed, su)
        assert su["steady_n"] == 35 and su["steady_lead_ms"] < su["bar_ms"]


def test_a_straggler_that_began_later_eased_or_has_too_few_steady_steps_stays_a_straggler():
    """Quiet twins: the same 25 slow steps starting at step 15 (not the job's start), a straggler for the whole job,
    a warm-up followed by only 15 steady steps (fewer than the window), and a straggler that eased from +1 s to
    +400 ms (still above the cost bar): no start-up said."""
    cases = {"later": short_job(steps=80, base=1000.0, noise=0.1, held={1: (15, 40, 1000.0)}),
             "whole": short_job(steps=60, base=1000.0, noise=0.1, slow=1, extra=1000.0, part="compute"),
             "few": short_job(steps=40, base=1000.0, noise=0.1, held={1: (1, 25, 1000.0)})}
    eased = short_job(steps=60, base=1000.0, noise=0.1, slow=1, extra=400.0, part="compute")
    for r in eased:
        eased[r] = [a if a[0] > 25 else b for a, b in zip(eased[r], cases["whole"][r])]
    cases["eased"] = eased
    for name, job in cases.items():
        sup = _run_sup(job)
        assert sup.published and sup.published[0]["ranks"] == [1], name
        assert not any(v.get("startup") for v in sup.published), name


def test_the_start_up_finding_is_an_info_with_its_statistics():
    from ddpdoctor.pipeline.judge import judge
    from ddpdoctor.pipeline.runner import load_all
    from ddpdoctor.pipeline.snapshot import Snapshot

    load_all()
    job = short_job(steps=60, base=1000.0, noise=0.1, held={1: (1, 25, 1000.0)})
    v = st.straggler({r: s[:22] for r, s in job.items()}, ended=False)
    v.update(cause={}, facts={}, startup=st.startup(job, v))
    rep = judge(Snapshot(sections={"run": {"straggler": v}}), command="run", only={"RUN020"}, when="run")
    (f,) = rep.findings
    assert str(f.severity).lower().endswith("info") and "slow only at the job's start (steps 1-25" in f.title
    assert "a start-up, not a straggler" in f.title and "phase:start-up" in f.subjects
    del v["startup"]
    (g,) = judge(Snapshot(sections={"run": {"straggler": v}}), command="run", only={"RUN020"}, when="run").findings
    assert str(g.severity).lower().endswith("warning") and "is the straggler" in g.title


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_real_warm_up_lasting_the_first_window_is_told_as_a_start_up(tmp_path):
    """Rank 1's backward sleeps 0.5 s in its first 25 steps, then 300 more steps of >= 20 ms on every rank (every sample
    takes 5 ms to load on every rank: the steady steps span >= 6 s on any machine): named live (RUN020 warning, the
    window's rule at step ~20), then at the end judged again: an info, slow in steps 1-25, then steady."""
    rc, out, rep = doctor(tmp_path, torchrun("trainer_job.py", "--steps", "325", "--delay-backward", "1=0.5",
                                             "--delay-until", "25", "--delay-data", "*=0.005"), "--stall-after", "60")
    ranks = {r["rank"]: r for r in rep["run"]["ranks"]}
    assert set(ranks) == {0, 1} and rc == 0, out[-3000:]
    assert all(((r.get("split") or {}).get("steps") or 0) > 300 for r in ranks.values()), out[-3000:]
    assert "! warning RUN020" in out and "rank 1 is the straggler" in out, out[-3000:]  # named live first
    (f,) = [f for f in run_findings(rep) if f["id"] == "RUN020"]
    assert f["severity"] == "info" and "rank 1 was slow only at the job's start" in f["title"], out[-3000:]
    su = f["evidence"]["startup"]
    assert su["slow_steps"][0] == 1 and 20 <= su["slow_steps"][1] <= 26 and su["steady_s"] >= 3.0, su
    assert f["evidence"]["supersedes"][0]["title"].startswith("rank 1 is the straggler")


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_real_straggler_that_began_after_the_start_stays_a_straggler(tmp_path):
    """Quiet twin: the same job, rank 1's backward +0.5 s in steps 30-55 only (not from the start): RUN020 stays the
    straggler warning (and 'has caught up' is said), no start-up."""
    rc, out, rep = doctor(tmp_path, torchrun("trainer_job.py", "--steps", "350", "--delay-backward", "1=0.5",
                                             "--delay-after", "30", "--delay-until", "55", "--delay-data", "*=0.005"),
                          "--stall-after", "60")
    ranks = {r["rank"]: r for r in rep["run"]["ranks"]}
    assert set(ranks) == {0, 1} and rc == 0, out[-3000:]
    assert all(((r.get("split") or {}).get("steps") or 0) > 300 for r in ranks.values()), out[-3000:]
    found = [f for f in run_findings(rep) if f["id"] == "RUN020"]
    assert len(found) == 1 and found[0]["severity"] == "warning" and "rank 1 is the straggler" in found[0]["title"], out[-3000:]
    assert "startup" not in found[0]["evidence"] and "slow only at the job's start" not in out
