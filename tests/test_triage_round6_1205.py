"""Round-6 classes of issue 24 (triage, 2026-12-05): trigger and quiet cases whose assertions can fail. Fixtures in
fixtures/triage/rules/ were written from the formats (no logs copied)."""
from __future__ import annotations

import os

from ddpdoctor.triage.api import triage_paths

RULES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "triage", "rules")


def _found(name):
    return [f for f in triage_paths([os.path.join(RULES, name + ".log")]).sorted_findings()
            if f.severity in ("error", "warning")]


def test_store_reset_title_names_the_rank_its_prefix_gives():
    """torchrun's '[rankN]:' prefix on c10d's TCPStore 'recvValue failed ...: Connection reset by peer' says which rank
    lost the store: LOG008's title names it (round-5 note 3: it said 'a process')."""
    f = _found("LOG008_trigger_store_reset_names_prefixed_rank")
    assert f and f[0].id == "LOG008" and f[0].title.startswith("rank 3 lost its connection"), [(x.id, x.title) for x in f]


def test_store_reset_without_a_rank_prefix_names_no_rank():
    """The quiet side: the same line with no prefix names no rank; the title must not invent one."""
    f = _found("LOG008_trigger_tcpstore_recvvalue_reset_in_connect")
    assert f and f[0].id == "LOG008" and f[0].title.startswith("a process lost"), [(x.id, x.title) for x in f]


def test_mpirun_names_the_rank_and_signal_it_saw_die():
    """Open MPI's 'mpirun noticed that process rank N with PID P on node H exited on signal S (...)' is rank N's exit on
    that signal: SIGSEGV -> LOG003 naming rank 2 (batch 51: the same line with signal 9 fell to LOG028)."""
    f = _found("LOG003_trigger_mpirun_rank_signal_11")
    assert f and f[0].id == "LOG003" and "rank:2" in f[0].subjects, [(x.id, x.title, x.subjects) for x in f]


def test_mpirun_nonzero_status_names_no_signal():
    """The quiet side: Open MPI's exit-code report (no signal) is not a kill or a crash."""
    assert not {"LOG002", "LOG003"} & {x.id for x in _found("LOG002_quiet_mpirun_nonzero_status_no_signal")}


def test_cuda_misaligned_address_is_a_gpu_fault():
    """cudaErrorMisalignedAddress's text ('misaligned address', libcudart's table) in the watchdog's exception is a GPU
    fault on that rank (LOG020), not a collective timeout (batch 51 read it as LOG001)."""
    f = _found("LOG020_trigger_cuda_misaligned_address_watchdog")
    assert f and f[0].id == "LOG020" and "rank:5" in f[0].subjects, [(x.id, x.title, x.subjects) for x in f]


def test_misaligned_words_outside_a_cuda_error_are_quiet():
    assert "LOG020" not in [x.id for x in _found("LOG020_quiet_misaligned_words_in_user_text")]


def test_nccl_rejecting_the_unset_blocking_value_is_two_nccl_libraries():
    """NCCL < 2.17 (src/init.cc:1270 @v2.14.3-1) accepts blocking 0 or 1 only; -2147483648 is NCCL_CONFIG_UNDEF_INT of
    the 2.17+ headers the caller was built with: LOG027 with the entry that says so."""
    f = _found("LOG027_trigger_nccl_config_blocking_int_min")
    assert f and f[0].id == "LOG027" and "blocking" in f[0].title, [(x.id, x.title) for x in f]


def test_nccl_blocking_config_info_is_quiet():
    assert "LOG027" not in [x.id for x in _found("LOG027_quiet_nccl_config_blocking_set_by_user")]


def test_c10d_retry_warning_keeps_a_bracketed_ipv6_address_whole():
    """c10d writes an IPv4-mapped IPv6 store address in brackets ('[::ffff:198.18.0.1]:3254'); the retry warning's title
    must carry it whole with its errno (batch 53 printed '::ffff:198' and lost the errno)."""
    f = _found("LOG008_trigger_c10d_retry_ipv4_mapped_address_then_stop")
    assert f and f[0].id == "LOG008" and "[::ffff:198.18.0.1]:3254" in f[0].title and "errno 110" in f[0].title, \
        [(x.id, x.title) for x in f]


def test_c10d_retry_warning_plain_host_unchanged():
    """The quiet side: a plain host:port keeps its form, no brackets added."""
    f = _found("LOG008_trigger_c10d_connect_retries_then_setup_stop")
    assert f and "node-0.cluster:29500" in f[0].title and "[node-0" not in f[0].title, [(x.id, x.title) for x in f]


def test_legacy_launch_calledprocesserror_names_no_rank():
    """torch.distributed.launch (pre-elastic, pytorch/pytorch torch/distributed/launch.py @00fb0a9) raises
    CalledProcessError(returncode=process.returncode, cmd=cmd) with the `cmd` left over from its spawn loop: the
    '--local_rank=N' in the message is the LAST process spawned, not the one that failed. The finding must not name it."""
    f = _found("LOG004_trigger_launch_calledprocesserror_names_no_rank")
    assert f and not any(s.startswith("rank:") for x in f for s in x.subjects), [(x.id, x.title, x.subjects) for x in f]


def test_horovod_ready_rank_lists_name_the_rank_missing_from_every_op():
    """Older Horovod stall reports list the ranks READY per op; the rank absent from every list (0..max seen) never
    submitted: named as an inference (batch 51: 'the lines shown do not name the missing ranks')."""
    f = _found("LOG001_trigger_horovod_ready_ranks_name_missing")
    assert f and f[0].id == "LOG001" and "rank 2 never submitted" in f[0].title, [(x.id, x.title) for x in f]


def test_horovod_ready_rank_lists_that_disagree_name_no_rank():
    """The quiet side: when no rank is missing from every op (ranks submitted different tensors), none is named, and
    the title says which rank went astray is unexplained (round 7; it said 'the lines shown do not name')."""
    f = _found("LOG001_trigger_horovod_ready_ranks_ops_disagree_name_none")
    assert f and "which rank went astray is unexplained" in f[0].title and not any(
        s.startswith("rank:") for s in f[0].subjects), [(x.id, x.title, x.subjects) for x in f]
