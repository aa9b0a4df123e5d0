"""Round-4 classes of issue 24 (triage, 2026-12-05): each grounded in its source's message format, with a trigger and a
quiet case whose assertion can fail. Fixtures in fixtures/triage/rules/ were written from the formats (no logs)."""
from __future__ import annotations

import os

from ddpdoctor.triage.api import triage_paths

RULES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "triage", "rules")


def _found(name):
    return [f for f in triage_paths([os.path.join(RULES, name + ".log")]).sorted_findings()
            if f.severity in ("error", "warning")]


def test_a_bare_shell_killed_line_is_a_sigkill():
    """bash prints strsignal(SIGKILL), "Killed", for a job that died of SIGKILL (alone, or "script: line N: PID Killed
    cmd"): LOG002, said as "most likely" the OOM killer, with dmesg and memory.events to read; not unexplained."""
    for name in ("LOG002_trigger_shell_killed_bare", "LOG002_trigger_shell_killed_script_line"):
        f = _found(name)
        assert f and f[0].id == "LOG002", [(x.id, x.title) for x in f]
        assert "Killed" in f[0].title and "most likely" in f[0].title, f[0].title
        assert "memory.events" in f[0].fix and "dmesg" in f[0].fix
    assert _found("LOG002_trigger_shell_killed_script_line")[0].evidence["pid"] == 12345


def test_killed_inside_a_sentence_is_not_a_sigkill():
    """The quiet side: a program's own "Killed 3 stale worker processes" is not the shell's report."""
    assert "LOG002" not in [x.id for x in _found("LOG002_quiet_killed_word_in_user_print")]


def test_a_cuda_fault_names_the_rank_its_watchdog_line_names():
    """Uncorrectable ECC surfacing through the watchdog: the rank is the one the watchdog's line names (in std::terminate's
    what() text, on the watchdog line before the error, or on the watchdog line after NCCL's WARN)."""
    for name, rank in (("LOG020_trigger_ecc_in_terminate_what_line", 6),
                       ("LOG020_trigger_ecc_after_rank_watchdog_line", 1),
                       ("LOG020_trigger_ecc_nccl_warn_watchdog_names_rank", 11)):
        f = _found(name)
        assert f[0].id == "LOG020" and f"rank:{rank}" in f[0].subjects, (name, f[0].title, f[0].subjects)
        assert "ECC" in f[0].title


def test_a_cuda_fault_with_two_watchdog_ranks_names_neither():
    """The quiet side: two ranks' watchdogs report the error, the fault line names no rank: which one faulted is not in
    the log, so no rank is named (evidence before inference)."""
    f = _found("LOG020_trigger_ecc_two_watchdog_ranks_names_neither")
    assert f[0].id == "LOG020" and not any(s.startswith("rank:") for s in f[0].subjects), f[0].subjects


def test_own_host_name_not_resolving_is_an_address_problem():
    """This node's own name: torch's _matches_machine_hostname getaddrinfo(socket.gethostname()) -> LOG025 saying so;
    Gloo's loopback fallback followed by a failed connect -> LOG025 naming the rank; "Cannot resolve H to a (local)
    address" names H; c10d's err=-3 (EAI_AGAIN) and then a stop in the set-up -> a LOG025 warning said as a guess."""
    f = _found("LOG025_trigger_own_hostname_getaddrinfo_in_rendezvous")
    assert f[0].id == "LOG025" and "own host name" in f[0].title, f[0].title
    f = _found("LOG025_trigger_gloo_loopback_fallback_then_connect_failed")
    assert f[0].id == "LOG025" and "own host name" in f[0].title and "rank:9" in f[0].subjects, (f[0].title, f[0].subjects)
    f = _found("LOG025_trigger_gloo_cannot_resolve_host_name")
    assert f[0].id == "LOG025" and "node-17" in f[0].title, f[0].title
    f = _found("LOG025_trigger_resolver_eai_again_then_setup_stops")
    assert f[0].id == "LOG025" and f[0].severity == "warning" and f[0].evidence["guess"] is True and "gpu-a03" in f[0].title, f[0].title


def test_own_host_warnings_alone_are_not_faults():
    """The quiet side: the loopback fallback on one host (vLLM prints it on every single-node start) and an err=-3 line
    followed by training are no error."""
    for name in ("LOG025_quiet_gloo_loopback_fallback_single_host", "LOG025_quiet_resolver_eai_again_then_training"):
        f = _found(name)
        assert not [x for x in f if x.severity == "error"] and "LOG025" not in [x.id for x in f], \
            (name, [(x.id, x.title) for x in f])


def test_a_remote_error_after_the_timeout_does_not_say_the_peer_failed_first():
    """LOG022's wording follows the order: after the watchdog timeout it says the timeout came first; before it, the
    peer failed first."""
    after = [x for x in _found("LOG001_trigger_timeout_before_remote_error") if x.id == "LOG022"]
    assert after and "failed first" not in after[0].title and "timeout came first" in after[0].title, after[0].title
    before = _found("LOG022_trigger_remote_error_then_watchdog_timeout")
    assert before[0].id == "LOG022" and "failed first" in before[0].title, before[0].title
