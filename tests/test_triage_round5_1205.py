"""Round-5 classes of issue 24 (triage, 2026-12-05), from batches 48-50 (first reads recorded before these fixes): each
grounded in the source that prints the message, with a trigger and a quiet case whose assertion can fail. Fixtures in
fixtures/triage/rules/ were written from the formats (no logs copied)."""
from __future__ import annotations

import os

from ddpdoctor.triage.api import triage_paths

RULES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "triage", "rules")


def _found(name):
    return [f for f in triage_paths([os.path.join(RULES, name + ".log")]).sorted_findings()
            if f.severity in ("error", "warning")]


def test_cuda_illegal_instruction_is_a_gpu_fault():
    """cudaErrorIllegalInstruction's text (libcudart's table: 'an illegal instruction was encountered'), in std::terminate's
    what() line, is a GPU fault (LOG020), not an unexplained failure."""
    f = _found("LOG020_trigger_cuda_illegal_instruction_terminate")
    assert f and f[0].id == "LOG020" and "illegal instruction" in f[0].title, [(x.id, x.title) for x in f]


def test_illegal_instruction_words_outside_a_cuda_error_are_not_a_gpu_fault():
    """The quiet side: the same words in a program's own text (no 'CUDA error' / 'Cuda failure' / what()) are not CUDA's."""
    assert "LOG020" not in [x.id for x in _found("LOG020_quiet_illegal_instruction_in_user_text")]


def test_nccl_collective_mismatch_names_the_reporting_rank():
    """NCCL's ncclCommGetAsyncError WARN (src/init.cc) 'Mismatched collective detected ... at and around rank %d' prints
    comm->rank: a collective mismatch (LOG027), naming that rank."""
    f = _found("LOG027_trigger_nccl_mismatched_collective_around_rank")
    assert f and f[0].id == "LOG027" and "rank:27" in f[0].subjects, [(x.id, x.title, x.subjects) for x in f]


def test_nccl_coll_info_lines_are_not_a_mismatch():
    """The quiet side: NCCL_DEBUG_SUBSYS=COLL's own INFO lines are not a mismatch."""
    assert "LOG027" not in [x.id for x in _found("LOG027_quiet_nccl_info_coll_lines")]


def test_agent_forwarding_sighup_is_the_launcher_getting_sighup():
    """torchrun's agent forwards the signal it received (run(): _shutdown(e.sigval)): 'closing signal SIGHUP' alone says
    the launcher got SIGHUP (LOG026, the terminal closed), not an unexplained failure."""
    f = _found("LOG026_trigger_agent_forwards_sighup")
    assert f and f[0].id == "LOG026" and "SIGHUP" in f[0].title, [(x.id, x.title) for x in f]


def test_closing_sigterm_after_a_worker_failure_is_not_a_stop_from_outside():
    """The quiet side: SIGTERM is the agent's own default after a worker fails: the worker's failure leads, not LOG026."""
    f = _found("LOG026_quiet_closing_sigterm_after_worker_failure")
    assert f and f[0].id != "LOG026", [(x.id, x.title) for x in f]


def test_tcpstore_socket_reset_is_the_store_not_an_nccl_peer():
    """c10d TCPStore's '[c10d] recvValue failed on SocketImpl(..., remote=[A]:P): Connection reset by peer'
    (TCPStore.cpp) is the store's socket: LOG008 naming the store's address, not LOG022's 'NCCL remote error'."""
    f = _found("LOG008_trigger_tcpstore_recvvalue_reset_in_connect")
    assert f and f[0].id == "LOG008" and "10.0.0.1:29500" in f[0].title and "reset" in f[0].title, \
        [(x.id, x.title) for x in f]


def test_an_nccl_socket_reset_stays_nccl():
    """The quiet side: NCCL's own socketProgress reset is NCCL's connection, not the c10d store's."""
    assert "LOG008" not in [x.id for x in _found("LOG008_quiet_nccl_socket_reset_is_not_the_store")]


def test_deepspeed_batch_assertion_before_pr_1734_is_a_config_mismatch():
    """DeepSpeed before PR #1734 printed 'world_size2 != 1 * 1 * 1' (no space): still LOG024 with the numbers."""
    f = _found("LOG024_trigger_deepspeed_batch_assert_old_format")
    assert f and f[0].id == "LOG024" and "2" in f[0].title, [(x.id, x.title) for x in f]


def test_unique_id_wait_names_the_waiting_rank_the_message_names():
    """ProcessGroupNCCL's '[N] is setting up NCCL communicator and retrieving ncclUniqueId from [0] ...' names the rank that
    printed it; on a line without torchrun's [rankN]: prefix the finding's ranks are still that rank (the evidence),
    and rank 0, which never published, is said in the title but not made a subject (an inference, not seen)."""
    f = _found("LOG008_trigger_unique_id_wait_unprefixed_names_waiting_rank")
    assert f and f[0].id == "LOG008" and "rank:3" in f[0].subjects, [(x.id, x.title, x.subjects) for x in f]
    assert "rank:0" not in f[0].subjects, f[0].subjects
