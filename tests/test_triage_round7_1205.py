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
