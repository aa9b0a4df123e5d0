"""Classes fixed by the triage session of 2026-12-05 (the held-out set 2's misses, and batches 41-43), each with a
trigger and a quiet case whose assertion can fail."""
from __future__ import annotations

import os

from ddpdoctor.triage.api import triage_paths

RULES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "triage", "rules")


def _found(name):
    return triage_paths([os.path.join(RULES, name + ".log")]).sorted_findings()


def test_heartbeat_monitor_abort_is_the_watchdog_not_a_death():
    """ProcessGroupNCCL's heartbeat monitor ("Heartbeat monitor timed out!", "Terminating the process after attempting
    to dump debug info, due to ProcessGroupNCCL watchdog hang.") ends the rank with SIGABRT: the hang is the finding
    (LOG001, naming the rank), not the abort (LOG004)."""
    f = _found("LOG001_trigger_heartbeat_monitor_abort")
    assert f[0].id == "LOG001" and "rank:3" in f[0].subjects, [(x.id, x.title) for x in f]
    assert "LOG004" not in [x.id for x in f]


def test_heartbeat_aborts_after_an_oom_kill_fold_under_the_kill():
    """The quiet side: a rank SIGKILLed earlier (torchrun's root cause) is the cause; the survivors' heartbeat aborts
    are its consequences, and LOG001 is not reported as the first finding."""
    f = _found("LOG002_trigger_oom_kill_then_heartbeat_aborts")
    assert f[0].id == "LOG002" and "rank:2" in f[0].subjects, [(x.id, x.title) for x in f]


def test_a_log_that_only_stops_is_no_failure():
    """An excerpt that ends on progress or set-up lines says nothing of a hang: LOG029 says the log stops there, and
    LOG028 (which says a process failed) is absent."""
    names = sorted(n[:-4] for n in os.listdir(RULES) if n.startswith("LOG029_trigger_"))
    stops = 0
    for n in names:
        f = _found(n)
        assert "LOG028" not in [x.id for x in f], n
        if "stops" in f[0].title:
            stops += 1
            assert f[0].id == "LOG029" and f[0].severity == "warning", n
    assert stops >= 20
    # and a log with a failure line after its set-up is still LOG028's failure, not a stop
    f = _found("LOG028_trigger_getopt_refused_option")
    assert f[0].id == "LOG028" and f[0].title.startswith("unexplained failure")


def test_reducer_detail_line_names_the_rank_without_a_prefix():
    """Batch 41 (weihaox/UMBRAE#4): under TORCH_DISTRIBUTED_DEBUG=INFO/DETAIL the reducer prints "Parameters which did
    not receive grad for rank N: names" (reducer.cpp, libtorch_cpu.so of torch 2.13); the rank it names is reported."""
    f = _found("LOG012_trigger_detail_names_line_names_rank")
    assert f[0].id == "LOG012" and "rank:2" in f[0].subjects and "(rank 2)" in f[0].title, f[0].title
    assert f[0].evidence["parameter_indices"] == {"2": "decoder.aux_head.bias, decoder.aux_head.weight"}


def test_a_catalogued_message_cut_at_its_line_end_is_still_recognised():
    """Batch 41 (mlfoundations/open_clip#669): a paste cut "...retrieving ncclUniqueId from [0] via c10d key-value" before
    the message's end is still the store-timeout message (LOG008), naming the rank in its brackets; the same words in
    prose, without the message's head, are not."""
    from ddpdoctor.facts import messages
    f = _found("LOG008_trigger_unique_id_line_cut")
    assert f[0].id == "LOG008" and "rank:2" in f[0].subjects, [(x.id, x.title, x.subjects) for x in f]
    assert "LOG008" not in [x.id for x in _found("LOG008_quiet_unique_id_words_in_prose")]
    cut = "RuntimeError: [1] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-va"
    assert [m.entry["class"] for m in messages.match_all(cut)][:1] == ["store_timeout"]
    assert messages.match_all("is setting up NCCL communicator and retrieving") == []   # too short to tell


def test_lightning_child_process_exit_is_that_ranks_exit():
    """Batch 42 (Nixtla/neuralforecast#1291): Lightning's launcher prints "[rank: N] Child process with PID P terminated
    with code C. Forcefully terminating all other processes to avoid zombies" (subprocess_script.py @48e0597): rank N
    ended with code C (a negative code is a signal). A Lightning run that stopped at max_epochs has no such exit."""
    f = _found("LOG004_trigger_lightning_child_process_exit")
    assert f[0].id == "LOG004" and "rank:3" in f[0].subjects and "code 1" in f[0].title, f[0].title
    assert "LOG004" not in [x.id for x in _found("LOG004_quiet_lightning_fit_stopped")]
    from ddpdoctor.triage.job import Job  # noqa: F401 - the signal mapping below goes through the same parser
    from ddpdoctor.triage.signatures import SIGNATURES
    rx = next(r for k, _s, r in SIGNATURES if k == "lightning_exit")
    m = rx.search("[rank: 2] Child process with PID 13117 terminated with code -6. Forcefully terminating all other")
    assert m and m.group("rank") == "2" and m.group("code") == "-6"


def test_an_unprefixed_oom_belongs_to_the_one_process_the_launcher_reports_failing(tmp_path):
    """Batch 43 (deepspeedai/DeepSpeed#3869): a CUDA OOM line without a rank prefix, and the deepspeed launcher's
    "[... '--local_rank=1' ...] exits with return code = 1" as the only failing process: the finding names local rank 1,
    said as an inference from the exit. With two processes failing, it names none."""
    f = _found("LOG005_trigger_oom_rank_from_launcher_exit")
    assert f[0].id == "LOG005" and "rank:1" in f[0].subjects and "launcher reports failing" in f[0].title, f[0].title
    assert f[0].evidence["rank_from_launcher_exit"] == 1
    two = open(os.path.join(RULES, "LOG005_trigger_oom_rank_from_launcher_exit.log")).read() + (
        "[2024-03-02 10:11:27,757] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python3', '-u', 'train.py', "
        "'--local_rank=0', '--deepspeed'] exits with return code = 1\n")
    p = tmp_path / "two.log"
    p.write_text(two)
    g = triage_paths([str(p)]).sorted_findings()
    oom = next(x for x in g if x.id == "LOG005")
    assert not any(s.startswith("rank:") for s in oom.subjects) and oom.evidence["rank_from_launcher_exit"] is None
