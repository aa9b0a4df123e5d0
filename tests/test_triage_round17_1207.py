"""Round-17 classes of issue 24 (triage, 2026-12-07). NCCL's socket transport's 'message truncated : receiving N bytes
instead of M' means the ranks' collectives differ (sizes, ops, or NCCL_PROTO/NCCL_ALGO), not a network interface
problem: both LOG009 (an unhandled system error quoting it) and LOG006 (ncclInvalidUsage after it) say so; other NCCL
network warnings keep their readings. Pure in-process."""
from __future__ import annotations

from triage_factory import found as _found


_TRUNC = ("host-a:74737:75914 [1] transport/net_socket.cc:488 NCCL WARN NET/Socket : peer 10.0.5.194<41988> message "
          "truncated : receiving 4 bytes instead of 2. If you believe your socket network is in healthy state, there "
          "may be a mismatch in collective sizes or environment settings (e.g. NCCL_PROTO, NCCL_ALGO) between ranks\n")
_SYSERR = ("[rank1]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
           "ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version "
           "2.20.5\n[rank1]: ncclSystemError: System call (e.g. socket, malloc) or external library call failed or "
           "device error.\n")
_INVALID = ("host-a:74737:74737 [1] init.cc:290 NCCL WARN Attempt to use communicator before the previous operation "
            "returned ncclSuccess\n")


def test_truncated_under_a_system_error_says_the_collectives_differ(tmp_path):
    found = _found(tmp_path, _TRUNC + _SYSERR)
    assert found[0].id == "LOG009" and found[0].severity == "error"
    assert "the ranks' collectives differ" in found[0].title
    assert "received 4 bytes where 2 were expected" in found[0].title
    assert "NCCL_SOCKET_IFNAME" not in found[0].fix and "TORCH_DISTRIBUTED_DEBUG=DETAIL" in found[0].fix


def test_truncated_then_invalid_usage_is_not_the_network_set_up(tmp_path):
    found = _found(tmp_path, _TRUNC + "\n" + _INVALID + "[rank9]: Traceback (most recent call last):\n"
                   "[rank9]:   File \"pretrain_gpt.py\", line 301, in <module>\n")
    assert found[0].id == "LOG006"
    assert "the ranks' collectives differ" in found[0].title
    assert "network set-up" not in found[0].title and "two ranks on one GPU" not in found[0].title
    assert found[0].evidence["received"] == 4 and found[0].evidence["expected"] == 2


def test_a_closed_connection_keeps_its_reading(tmp_path):
    closed = "host-a:1:2 [1] transport/net_socket.cc:500 NCCL WARN NET/Socket : Connection closed by remote peer\n"
    found = _found(tmp_path, closed + _SYSERR)
    assert not any("collectives differ" in f.title for f in found)


def test_no_socket_interface_keeps_the_network_set_up_reading(tmp_path):
    noif = "host-a:1:1 [0] bootstrap.cc:72 NCCL WARN Bootstrap : no socket interface found\n"
    found = _found(tmp_path, noif + "[rank0]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:"
                   "1970, invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.20.5\n"
                   "[rank0]: ncclInvalidUsage: This usually reflects invalid usage of NCCL library.\n")
    assert not any("collectives differ" in f.title for f in found)


# Ascend HCCL's CANN error codes (torch_npu's troubleshooting pages, Ascend/pytorch docs/zh/troubleshooting): EI0006 is
# the link set-up's socket timeout (a peer exited, started late, or the network is broken: a lost peer, LOG022), EI0002
# the Notify wait of a collective past HCCL_EXEC_TIMEOUT (a collective timeout, LOG001)
_EI0006 = ("ERROR 07-01 00:40:04 [engine.py:458] EI0006: [PID: 176930] 2025-07-01-00:40:04.135.732 Getting socket times "
           "out. Reason: Remote Rank did not send the data in time. Please check the reason for the rank being stuck\n")


def test_hccl_ei0006_is_a_peer_lost_at_link_set_up(tmp_path):
    found = _found(tmp_path, _EI0006)
    assert found[0].id == "LOG022" and found[0].severity == "error"
    assert "Ascend HCCL EI0006" in found[0].title and "NCCL" not in found[0].title
    found = _found(tmp_path, "The confirmed error fingerprint is:\n\nCommunication_Error_Get_Socket(EI0006)\n", "b.log")
    assert found[0].id == "LOG022"


def test_hccl_ei0002_is_a_collective_timeout(tmp_path):
    found = _found(tmp_path, "EI0002: [PID: 7277] 2024-11-28-11:59:30.645.648 The wait execution of the Notify register "
                   "times out. Reason: The Notify register has not received the Notify record from remote rank "
                   "[unknown].\n")
    assert found[0].id == "LOG001" and "HCCL_EXEC_TIMEOUT" in found[0].detail


def test_hccl_codes_named_without_their_message_are_no_failure(tmp_path):
    found = _found(tmp_path, "export HCCL_CONNECT_TIMEOUT=900   # against EI0006 on slow starts\n"
                   "see the EI0002 page for HCCL_EXEC_TIMEOUT\n")
    assert not any(f.severity == "error" for f in found)


# Batch classes (round 17, not first reads). A shell script's own text in a log (an `echo "[ERROR] ..."` guard, an
# `#SBATCH --err=` directive, a PR diff of a script) is no failure line; the same words printed by the job still are.
_SBATCH = "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --err=<YOUR ERROR PATH>\nexport NCCL_DEBUG=INFO\n"


def test_script_text_with_failure_words_is_no_failure(tmp_path):
    text = (_SBATCH + 'if ! source venv/bin/activate; then\n    echo "[ERROR] Failed to activate environment" >&2\n'
            "    exit 1\nfi\n"
            '+      echo "FATAL: coordinator resolved to loopback; JAX ranks would never rendezvous" >&2\n')
    found = _found(tmp_path, text)
    assert not any(f.severity == "error" or f.title.startswith("unexplained failure") for f in found)


def test_the_same_words_printed_by_the_job_stay_a_failure(tmp_path):
    found = _found(tmp_path, _SBATCH + "[ERROR] Failed to activate environment\n")
    assert any(f.id == "LOG028" and f.title.startswith("unexplained failure") for f in found)


# c10d's connect-retry warning reads as "the job stops in its set-up" only when nothing shows the process group was
# made: a ProcessGroupNCCL watchdog timeout (its numbered work) shows it was, and that timeout is the finding.
_RETRY = ("[W socket.cpp:601] [c10d] The client socket has failed to connect to [localhost]:29500 (errno: 99 - Cannot "
          "assign requested address).\n")


def test_a_watchdog_timeout_outranks_the_connect_retry_warning(tmp_path):
    found = _found(tmp_path, "[E ProcessGroupNCCL.cpp:828] [Rank 0] Watchdog caught collective operation timeout: "
                   "WorkNCCL(SeqNum=1, OpType=ALLREDUCE, Timeout(ms)=60000) ran for 69027 milliseconds before timing "
                   "out.\n" + _RETRY)
    assert found[0].id == "LOG001"
    assert not any(f.title.startswith("the job stops in its set-up") for f in found)


def test_the_connect_retry_alone_keeps_its_warning(tmp_path):
    found = _found(tmp_path, _RETRY)
    assert found[0].id == "LOG008" and found[0].title.startswith("the job stops in its set-up")
