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


# ---- batch 45's classes (first read f304bce), fixed as classes from the sources' formats

def test_an_nccl_trace_chain_without_a_warn_is_an_error():
    """NCCL traces a failing call back up its stack ("misc/socket.cc:47 -> 3", ...): three trace lines in one process are
    an error chain even with no WARN before them (a chain's trace lines no longer end it); ncclResult_t 3 is
    ncclInternalError (NVIDIA/nccl src/nccl.h.in). One trace line among normal ones stays a fallback."""
    f = _found("LOG009_trigger_nccl_info_trace_chain_without_warn")
    assert f and f[0].id == "LOG009" and "internal error" in f[0].title, [(x.id, x.title) for x in f]
    assert "host:gpu-node-4" in f[0].subjects
    assert not _found("LOG009_quiet_single_trace_line_then_training")


def test_the_watchdog_loop_frames_are_a_watchdog_failure_of_the_one_rank_in_sight():
    """torch >= 2.7's ProcessGroupNCCL::Watchdog::run() rethrows what its loop threw ("Exception raised from run at
    .../ProcessGroupNCCL.cpp"): with the message cut, LOG001 says the watchdog thread ended with an exception, naming the
    only rank the log shows; a CUDA check's frames are no watchdog."""
    f = _found("LOG001_trigger_watchdog_run_frames_message_cut")
    assert f[0].id == "LOG001" and "rank:5" in f[0].subjects and "watchdog thread" in f[0].title, f[0].title
    assert "LOG001" not in [x.id for x in _found("LOG001_quiet_cuda_check_frames_no_watchdog")]


def test_an_unprefixed_error_takes_the_rank_of_the_one_failing_process_as_an_inference():
    """No line names the rank, the launcher reports exactly one process failing (local rank 2): the NCCL error is said to
    be that process's, as an inference; two failing processes leave it unnamed."""
    f = _found("LOG009_trigger_system_error_rank_from_launcher_exit")
    assert f[0].id == "LOG009" and "rank:2" in f[0].subjects and "local rank 2" in f[0].title, f[0].title
    g = _found("LOG009_trigger_system_error_two_launcher_failures_no_rank")
    assert g[0].id == "LOG009" and not any(s.startswith("rank:") for s in g[0].subjects), g[0].subjects


def test_accelerate_port_in_use_is_a_taken_port():
    """accelerate's 'Tried to launch distributed communication on port N, but another process is utilizing it'
    (src/accelerate/utils/launch.py @16cb6eb) is LOG007 with the port, not a launch misconfiguration."""
    f = _found("LOG007_trigger_accelerate_port_in_use")
    assert f[0].id == "LOG007" and "29501" in f[0].title, f[0].title
    assert "LOG007" not in [x.id for x in _found("LOG007_quiet_accelerate_other_connection_error")]


def test_pycharm_exit_on_a_signal_is_that_signal():
    """PyCharm's 'Process finished with exit code 137 (interrupted by signal 9: SIGKILL)' is a SIGKILL (LOG002);
    139 / SIGSEGV is a segfault (LOG003), not a SIGKILL."""
    f = _found("LOG002_trigger_pycharm_exit_137_sigkill")
    assert f[0].id == "LOG002" and "SIGKILL" in f[0].title, f[0].title
    g = _found("LOG002_quiet_pycharm_exit_139_sigsegv")
    assert g[0].id == "LOG003" and "LOG002" not in [x.id for x in g], [(x.id, x.title) for x in g]


def test_internal_error_whose_last_error_is_a_closed_peer_is_a_lost_peer():
    """torch appends NCCL's last WARN ('Last error: Net : Connection closed by remote peer node-7<51822>'): the
    ncclInternalError is that lost peer (LOG022, naming it); another last error keeps LOG009."""
    f = _found("LOG022_trigger_internal_error_last_error_peer_closed")
    assert [x.id for x in f] == ["LOG022"] and "node-7" in f[0].title, [(x.id, x.title) for x in f]
    g = _found("LOG022_quiet_internal_error_last_error_cuda")
    assert g[0].id == "LOG009" and "LOG022" not in [x.id for x in g]


# ---- batch 46's class (first read aab425c)

def test_c10d_connect_retries_then_a_stop_in_the_set_up_is_a_likely_unreachable_store():
    """c10d logs each failed connect to the store as a warning and retries (socket.cpp SocketConnectOp::tryConnect);
    when those warnings are the last thing before the log stops in its set-up, LOG008 warns that the store at H:P was
    likely never reachable, naming the address and the error (Windows 10049 WSAEADDRNOTAVAIL too), said as a guess.
    One attempt followed by training stays quiet."""
    for name, target in (("LOG008_trigger_c10d_connect_retries_then_setup_stop", "node-0.cluster:29500"),
                         ("LOG008_trigger_c10d_windows_connect_retry_then_stop", "DESKTOP-4H2K:29500")):
        f = _found(name)
        assert f[0].id == "LOG008" and f[0].severity == "warning" and target in f[0].title, f[0].title
        assert f[0].evidence["guess"] is True
    assert not _found("LOG008_quiet_c10d_one_address_attempt_then_training")


# ---- batch 47's classes (first read 4289f96)

def test_the_store_barrier_timeout_names_the_rank_its_message_names():
    """'Timed out initializing process group in store based barrier on rank: 3, ...' (distributed_c10d.py
    _store_based_barrier) names the rank that waited: LOG018 names it, with no prefix on the line."""
    f = _found("LOG018_trigger_barrier_timeout_names_its_rank")
    assert f[0].id == "LOG018" and "rank:3" in f[0].subjects and "rank 3" in f[0].title, (f[0].title, f[0].subjects)


def test_gloo_pair_connect_timeout_is_an_unreachable_peer():
    """Gloo's '[.../gloo/transport/tcp/pair.cc:611] Connect timeout [ADDR]:PORT' is a connection to a peer that did not
    answer (LOG008's Gloo branch, with the address); connectFullMesh's 'no error' is not that."""
    f = _found("LOG008_trigger_gloo_pair_connect_timeout")
    assert f[0].id == "LOG008" and "10.0.3.17:41234" in f[0].title and "did not answer" in f[0].title, f[0].title
    assert "LOG008" not in [x.id for x in _found("LOG008_quiet_gloo_connectfullmesh_no_error")]


def test_a_traceback_cut_in_get_default_group_is_a_missing_process_group():
    """torch's _get_default_group raises only 'Default process group has not been initialized': a traceback cut before
    its message whose last frame is that function is LOG023; one cut in another torch function stays unexplained."""
    f = _found("LOG023_trigger_traceback_cut_in_get_default_group")
    assert f[0].id == "LOG023" and "_get_default_group" in f[0].title, f[0].title
    assert "LOG023" not in [x.id for x in _found("LOG023_quiet_traceback_cut_in_another_function")]


def test_a_device_side_assert_cut_at_the_end_of_a_long_log_is_a_gpu_fault(tmp_path):
    """A CUDA kernel's device-side assert ('IndexKernel.cu:92: ... Assertion `... "index out of bounds"` failed.',
    CUDA_KERNEL_ASSERT in aten/src/ATen/native/cuda/IndexKernel.cu @899df3e) printed past the reader's head with no error
    word: the prefilter keeps it ("Assertion `" anchor) and LOG020 names the assert; glibc's host assert of a C program
    (src/foo.c: ... Assertion `x' failed.) is no GPU fault."""
    head = "".join(f"step {i} loss 0.5\n" for i in range(6000))   # past the 64 KiB head
    trig = tmp_path / "cut.log"
    trig.write_text(head + '/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [0,0,0], '
                    'thread: [3,0,0] Assertion `-sizes[i] <= index && index < sizes[i] && "index out of bounds"` failed.\n')
    f = [x for x in triage_paths([str(trig)]).sorted_findings() if x.severity in ("error", "warning")]
    assert f and f[0].id == "LOG020" and "index out of bounds" in f[0].title, [(x.id, x.title) for x in f]
    quiet = tmp_path / "host.log"
    quiet.write_text(head + "python: src/foo.c:12: main: Assertion `x > 0' failed.\nAborted (core dumped)\n")
    q = [x.id for x in triage_paths([str(quiet)]).sorted_findings() if x.severity in ("error", "warning")]
    assert "LOG020" not in q, q
