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
