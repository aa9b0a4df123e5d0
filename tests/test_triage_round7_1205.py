"""Round-7 classes of issue 24 (triage, 2026-12-05): trigger and quiet cases whose assertions can fail. Logs are written
from the formats (no logs copied); pure-function tests (no process launched)."""
from __future__ import annotations

import os

from ddpdoctor.triage.api import triage_paths

RULES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "triage", "rules")
_RULE = "-" * 74 + "\n"


def _found_text(tmp_path, text):
    p = tmp_path / "job.log"
    p.write_text(text)
    return [f for f in triage_paths([str(p)]).sorted_findings() if f.severity in ("error", "warning")]


def _found(name):
    return [f for f in triage_paths([os.path.join(RULES, name + ".log")]).sorted_findings()
            if f.severity in ("error", "warning")]


def test_mpirun_signal_line_wrapped_at_a_word_edge_is_joined(tmp_path):
    """Open MPI prints '... noticed that process rank N with PID P on node H exited on signal S (...).' as one line
    (ompi orte/tools/orterun/help-orterun.txt @v4.1.6); a paste wrapped after 'on node': still rank 3's SIGKILL on its
    node (round-6 note 4: the wrapped form was not matched)."""
    f = _found_text(tmp_path, _RULE + "mpirun noticed that process rank 3 with PID 0 on node\n"
                    "gpu-node-7 exited on signal 9 (Killed).\n" + _RULE)
    assert f and f[0].id == "LOG002" and "rank:3" in f[0].subjects and "gpu-node-7" in f[0].detail, \
        [(x.id, x.title, x.subjects) for x in f]


def test_mpirun_signal_line_wrapped_inside_a_word_is_joined(tmp_path):
    """A fixed-width wrap inside 'signal' ('exited on s' / 'ignal 11') is joined without a space: rank 5's SIGSEGV."""
    f = _found_text(tmp_path, _RULE + "mpirun noticed that process rank 5 with PID 4411 on node worker-2 exited on s\n"
                    "ignal 11 (Segmentation fault).\n" + _RULE)
    assert f and f[0].id == "LOG003" and "rank:5" in f[0].subjects, [(x.id, x.title, x.subjects) for x in f]


def test_mpirun_first_half_without_a_signal_after_it_names_no_exit(tmp_path):
    """The quiet side: a held first half whose next line is not its continuation is no rank's exit on a signal."""
    f = _found_text(tmp_path, "mpirun noticed that process rank 3 with PID 0 on node\n"
                    "{'loss': 1.05, 'learning_rate': 1e-05, 'epoch': 0.5}\n")
    assert not {"LOG002", "LOG003"} & {x.id for x in f}, [(x.id, x.title) for x in f]


def test_nccl_two_call_trace_through_a_transport_is_an_error():
    """'include/net.h:25 -> 2' then 'transport/net.cc:515 -> 2' (NCCL 2.12: ncclNetConnect under sendProxyConnect, both
    NCCLCHECK) with the log ending there: the connection failed (LOG009), not 'stops during set-up' (batch 51: LOG029)."""
    f = _found("LOG009_trigger_nccl_two_call_trace_through_transport")
    assert f and f[0].id == "LOG009", [(x.id, x.title) for x in f]


def test_nccl_single_transport_trace_line_then_training_is_quiet():
    f = _found("LOG009_quiet_single_transport_trace_line_then_training")
    assert "LOG009" not in {x.id for x in f}, [(x.id, x.title) for x in f]


def test_horovodrun_process_exit_status_137_is_that_ranks_sigkill(tmp_path):
    """horovodrun's Gloo launcher prints 'Process {rank} exit with status code {ec}.' (horovod/runner/gloo_run.py
    @b4c191c); safe_shell_exec reports death by signal N as 128 + N: 137 is rank 0's SIGKILL (batch 54: LOG028)."""
    f = _found_text(tmp_path, "Process 0 exit with status code 137.\nTraceback (most recent call last):\n"
                    '  File "/usr/bin/horovodrun", line 8, in <module>\n    sys.exit(run_commandline())\n')
    assert f and f[0].id == "LOG002" and "rank:0" in f[0].subjects, [(x.id, x.title, x.subjects) for x in f]


def test_horovodrun_process_exit_status_1_is_an_exit_code_not_a_signal(tmp_path):
    """The quiet side: status 1 is an exit code (no signal, no kill): LOG004 for rank 1, worded for horovodrun, not
    torchrun."""
    f = _found_text(tmp_path, "Process 1 exit with status code 1.\n"
                    "Terminating remaining workers after failure of Process 1.\n")
    ids = [x.id for x in f]
    assert "LOG002" not in ids and "LOG003" not in ids and f and f[0].id == "LOG004" and "rank:1" in f[0].subjects \
        and "torchrun" not in f[0].detail, [(x.id, x.title, x.detail) for x in f]


def test_store_barrier_waiting_lines_that_account_for_every_joined_rank_name_the_missing_ones():
    """Each rank adds itself to the barrier key before it waits and logs its rank with the count (torch
    distributed_c10d.py _store_based_barrier): ranks 0 and 2 logging worker_count=2 of world_size=4 are all the joined
    ranks, so 1 and 3 never arrived (batch 55: RVT#18 named none)."""
    f = _found("LOG018_trigger_barrier_waiting_names_the_rank_that_never_joined")
    assert f and f[0].id == "LOG018" and "ranks 1, 3 never joined" in f[0].title \
        and f[0].evidence.get("missing_ranks") == [1, 3], (f[0].title, f[0].evidence)


def test_store_barrier_waiting_lines_that_do_not_account_for_every_joined_rank_name_none(tmp_path):
    """The quiet side: rank 0 alone logs worker_count=3 of 4: two joined ranks are not in the lines, so which one is
    missing is not known and none is named."""
    line = ("[INFO] - Waiting in store based barrier to initialize process group for rank: 0, key: "
            "store_based_barrier_key:1 (world_size=4, worker_count=3, timeout=0:30:00)\n")
    f = _found_text(tmp_path, line * 2)
    assert f and f[0].id == "LOG018" and "never joined" not in f[0].title \
        and "missing_ranks" not in f[0].evidence, (f[0].title, f[0].evidence)


def test_torch2_store_barrier_timeout_with_num_workers_joined_is_read():
    """torch 2.x writes 'on rank 3, ... num_workers_joined=3' (no colon, renamed count): still LOG018 naming rank 3."""
    f = _found("LOG018_trigger_barrier_timeout_num_workers_joined")
    assert f and f[0].id == "LOG018" and "3 of 4" in f[0].title and "rank:3" in f[0].subjects, (f[0].title, f[0].subjects)


def test_watchdog_line_cut_before_worknccl_is_that_ranks_collective_timeout():
    """'[Rank 5] Watchdog caught collective oper' (a paste cut the line): ProcessGroupNCCL's checkTimeout text is the
    only one that starts so: rank 5's collective timed out (batch 55: verl#2995 read LOG028)."""
    f = _found("LOG001_trigger_watchdog_line_cut_before_worknccl")
    assert f and f[0].id == "LOG001" and "rank:5" in f[0].subjects, (f[0].title, f[0].subjects)


def test_watchdog_word_in_other_text_is_quiet():
    assert "LOG001" not in {x.id for x in _found("LOG001_quiet_watchdog_words_in_other_text")}


def test_shell_report_of_an_aborted_rank_command_names_the_rank_from_its_environment(tmp_path):
    """bash reports a command that died on a signal as 'line N: PID Aborted  CMD' (jobs.c pretty_print_job); horovodrun
    runs each rank as 'HOROVOD_RANK=0 ... python train.py', so the rank is rank 0, dead on SIGABRT (batch 56:
    horovod#2248 read LOG028 with no rank)."""
    f = _found_text(tmp_path, "[0]<stderr>:bash: line 1: 3523705 Aborted                 HOROVOD_HOSTNAME=w2 "
                    "HOROVOD_RANK=0 HOROVOD_SIZE=3 python train.py\n")
    assert f and f[0].id == "LOG004" and "rank:0" in f[0].subjects and "SIGABRT" in f[0].title, \
        [(x.id, x.title, x.subjects) for x in f]


def test_shell_report_of_a_segfault_names_the_rank_from_its_environment():
    f = _found("LOG003_trigger_shell_reports_segfault_with_rank_env")
    assert f and f[0].id == "LOG003" and "rank:3" in f[0].subjects, [(x.id, x.title, x.subjects) for x in f]


def test_shell_report_of_a_terminated_job_is_no_crash():
    """The quiet side: 'Terminated' (SIGTERM, someone stopped it) is not read as a crash of that rank."""
    assert not {"LOG003", "LOG004"} & {x.id for x in _found("LOG003_quiet_shell_reports_terminated_job")}


def test_a_torch_build_without_nccl_is_said_so_not_a_gpu_fault(tmp_path):
    """'Distributed package doesn't have NCCL built in' (distributed_c10d.py, is_nccl_available() false: Windows and
    macOS wheels, CPU builds) is the install, not 'could not use its GPU: CUDA could not be set up' (batch 56)."""
    f = _found_text(tmp_path, "RuntimeError: Distributed package doesn't have NCCL built in\n")
    assert f and "cannot use the NCCL backend" in f[0].title and "CUDA could not be set up" not in f[0].title, \
        [(x.id, x.title) for x in f]


def test_tcpstore_stop_waiting_reply_is_a_store_that_is_not_this_jobs(tmp_path):
    """TCPStore::doWait raises 'Stop_waiting response is expected' when the reply to its WAIT is not the server's
    STOP_WAITING (torch/csrc/distributed/c10d/TCPStore.cpp @b874478): LOG008 saying something else answers on the
    port (batch 56: colossalai#5890 with an empty --master_port read LOG004)."""
    f = _found_text(tmp_path, "RuntimeError: Stop_waiting response is expected\n")
    assert f and f[0].id == "LOG008" and "Stop_waiting" in f[0].title, [(x.id, x.title) for x in f]


def test_a_plain_rendezvous_closed_error_keeps_its_own_title(tmp_path):
    """The quiet side of that title: torchrun's RendezvousClosedError is still said as the rendezvous closing."""
    f = _found_text(tmp_path, "torch.distributed.elastic.rendezvous.api.RendezvousClosedError\n")
    assert f and f[0].id == "LOG008" and "Stop_waiting" not in f[0].title and "closed" in f[0].title, \
        [(x.id, x.title) for x in f]


_HVD_WARN = ("[1,0]<stderr>:[2024-01-02 10:00:00.000000: W /tmp/horovod/common/stall_inspector.cc:107] One or more "
             "tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting for "
             "remainder of ranks for more than 60 seconds. This may indicate that different ranks are trying to submit "
             "different tensors or that only subset of ranks is submitting tensors, which will cause deadlock. \n")


def test_horovod_missing_ranks_rows_name_the_rank_that_never_submitted(tmp_path):
    """Horovod >= 0.19 lists, under 'Missing ranks:' ('Stalled ranks:' to 0.20.0), one row per rank that has not
    submitted the tensors it names (stall_inspector.cc CheckForStalledTensors): rank 3 here."""
    f = _found_text(tmp_path, _HVD_WARN + "[1,0]<stderr>:Missing ranks:\n"
                    "[1,0]<stderr>:3: [allreduce.model.fc.weight, allreduce.model.fc.bias]\n")
    assert f and f[0].id == "LOG001" and "rank 3 never submitted" in f[0].title, [(x.id, x.title) for x in f]


def test_horovod_rows_where_every_rank_misses_a_different_tensor_name_none(tmp_path):
    """Every rank 0..3 listed, rank 0 missing one tensor and 1-3 another (insightface#1287's shape): each waits in a
    collective another has not joined; which rank went astray is unexplained, none is named."""
    rows = "".join(f"[1,0]<stderr>:{r}: [horovod_allreduce.noname.{691941 if r == 0 else 691943}]\n" for r in range(4))
    f = _found_text(tmp_path, _HVD_WARN + "[1,0]<stderr>:Stalled ranks:\n" + rows)
    assert f and f[0].id == "LOG001" and "unexplained" in f[0].title and not any(
        s.startswith("rank:") for s in f[0].subjects), [(x.id, x.title, x.subjects) for x in f]


def test_rank_like_rows_without_horovods_header_are_not_read(tmp_path):
    """The quiet side: '3: [1, 2]' rows of some other print, with no stall report above them, name no rank."""
    f = _found_text(tmp_path, "3: [1, 2]\n4: [3, 5]\n{'loss': 1.05, 'epoch': 0.5}\n")
    assert "LOG001" not in {x.id for x in f}, [(x.id, x.title) for x in f]


def test_horovodrun_timestamped_prefix_is_read_as_the_rank_prefix():
    """horovodrun --timestamp-output writes time.asctime() before '[rank]<stream>:' (safe_shell_exec.py get_context):
    the line is rank 0's, its text after the prefix (batch 54's insightface#1287 kept the whole prefix as text)."""
    from ddpdoctor.triage.lines import parse
    ln = parse(0, 1, 0, b"Fri Oct 23 17:16:00 2020[0]<stderr>:Stalled ranks:\n")
    assert ln.rank == 0 and ln.text == "Stalled ranks:", (ln.rank, ln.text)
    ln = parse(0, 1, 0, b"Mon Jan  4 09:05:00 2021[12]<stdout>:Iter #3: 100.0 img/sec per GPU\n")
    assert ln.rank == 12 and ln.text.startswith("Iter #3"), (ln.rank, ln.text)


_PAD = "".join(f"{{'loss': {1 + i % 7 / 10:.2f}, 'learning_rate': 5e-05, 'epoch': {i / 1000:.3f}}}\n" for i in range(1500))


def test_round7_lines_are_read_past_the_head_of_a_long_log(tmp_path):
    """Past the first 64 KiB only lines carrying a prefilter keyword are decoded (messages.ANCHORS): each round-7
    line kind, behind ~80 KiB of progress lines, gives the verdict it gives at the top of a log (before these
    keywords, the first half of a wrapped Open MPI line, horovodrun's exit line and bash's Aborted report were
    skipped there)."""
    assert len(_PAD.encode()) > 64 << 10
    cases = ["mpirun noticed that process rank 3 with PID 0 on node\ngpu-node-7 exited on signal 9 (Killed).\n",
             "Process 0 exit with status code 137.\n",
             "[0]<stderr>:bash: line 1: 3523705 Aborted                 HOROVOD_HOSTNAME=w2 HOROVOD_RANK=0 "
             "HOROVOD_SIZE=3 python train.py\n"]
    for text in cases:
        top = [(x.id, tuple(s for s in x.subjects if not s.startswith("line:")))
               for x in _found_text(tmp_path, text)]
        deep = [(x.id, tuple(s for s in x.subjects if not s.startswith("line:")))
                for x in _found_text(tmp_path, _PAD + text)]
        assert top and deep[:1] == top[:1], (text, top, deep)
