"""`ddpdoctor triage`: every LOG rule against its trigger and quiet fixtures, and the root-cause order.

Fixtures live in fixtures/triage/rules/, named LOGnnn_trigger_*.log and LOGnnn_quiet_*.log: log
excerpts in the formats real tools print (torchrun's three logging styles, the elastic
ChildFailedError table, ProcessGroupNCCL's watchdog lines old and new, NCCL INFO/WARN lines with
their host:pid:tid prefixes, DataLoader and tokenizers messages).
"""
import os
import re

import pytest

from ddpdoctor.model.registry import REGISTRY, parse_doc
from ddpdoctor.pipeline.runner import load_triage_rules
from ddpdoctor.triage.api import triage_paths

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "fixtures", "triage")
RULES = os.path.join(FIX, "rules")

load_triage_rules()
LOG_RULES = sorted(i for i, s in REGISTRY.items() if s.kind == "log")


def fixtures(kind):
    return sorted(f for f in os.listdir(RULES) if f.split("_")[1] == kind)


def ids(report):
    return [f.id for f in report.sorted_findings()]


@pytest.mark.parametrize("name", fixtures("trigger"))
def test_trigger_fixture_fires_its_rule_first(name):
    rule = name.split("_")[0]
    report = triage_paths([os.path.join(RULES, name)])
    assert ids(report)[:1] == [rule], (name, [(f.id, f.title) for f in report.sorted_findings()])


@pytest.mark.parametrize("name", fixtures("quiet"))
def test_quiet_fixture_does_not_fire_its_rule(name):
    rule = name.split("_")[0]
    report = triage_paths([os.path.join(RULES, name)])
    assert rule not in ids(report), [(f.id, f.title) for f in report.findings]


def test_every_rule_has_a_trigger_and_a_quiet_fixture():
    triggers = {f.split("_")[0] for f in fixtures("trigger")}
    quiet = {f.split("_")[0] for f in fixtures("quiet")}
    flight_only = {"LOG019"}  # its fixtures are dumps, tested in test_triage_flight.py
    assert set(LOG_RULES) - flight_only <= triggers
    assert set(LOG_RULES) - flight_only <= quiet


@pytest.mark.parametrize("rid", LOG_RULES)
def test_rule_docs_have_the_headings_and_cite_a_real_issue(rid):
    spec = REGISTRY[rid]
    parts = parse_doc(spec.doc)
    for heading in ("What it checks", "Why it matters", "Example", "Fix"):
        assert parts.get(heading), f"{rid} lacks {heading}"
    assert re.search(r"[\w-]+/[\w.-]+#\d+", spec.doc), f"{rid} cites no owner/repo#issue"


def test_acceptance_rank5_oom_killed_first_others_time_out():
    """8 ranks on 2 nodes; rank 5 was OOM-killed at 10:46; ranks 0-3 printed their watchdog timeouts
    30 minutes later, and they come first in the combined file. Triage names rank 5 and the OOM
    killer first, and folds the timeouts under it."""
    report = triage_paths([os.path.join(FIX, "acceptance_torchrun_2node_rank5_oom.log")])
    first = report.sorted_findings()[0]
    assert first.id == "LOG002"
    assert "rank 5" in first.title and "OOM killer" in first.title
    assert "rank:5" in first.subjects and "host:gpu-b02" in first.subjects
    cons = first.evidence["consequences"]
    assert cons["timed_out_ranks"] == [0, 1, 2, 3]
    assert cons["timed_out_in"][0] == {"op": "ALLREDUCE", "seq": 1317}
    assert "LOG001" not in ids(report)  # the timeouts are folded, not a second finding
    assert report.extra["triage"]["job"]["world_size"] == 8


def test_acceptance_srun_labels_rank5_oom():
    report = triage_paths([os.path.join(FIX, "acceptance_srun_8rank_rank5_oom.log")])
    first = report.sorted_findings()[0]
    assert first.id == "LOG002" and "rank:5" in first.subjects, [(f.id, f.title) for f in report.sorted_findings()]
    assert "the host's OOM killer" in first.title
    assert first.evidence["consequences"]["timed_out_ranks"] == [0, 1, 2, 3, 4, 6, 7]


def test_root_cause_is_earliest_failure_not_first_printed():
    """rank 2's ValueError is printed before the others' timeouts, but the point is the fold: the
    timeouts of ranks 0, 1 and 3 are evidence of rank 2's failure, not their own finding."""
    report = triage_paths([os.path.join(RULES, "LOG004_trigger_valueerror_rank2.log")])
    assert ids(report) == ["LOG004"]
    f = report.findings[0]
    assert f.evidence["consequences"]["timed_out_ranks"] == [0, 1, 3]
    assert "line:9" in f.subjects and any(s.startswith("path:") for s in f.subjects)


def test_many_repeated_lines_are_one_finding_with_count(tmp_path):
    line = ("[rank1]:[E1206 09:54:03.447920361 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
            "ran for 600043 milliseconds before timing out.\n")
    p = tmp_path / "rep.log"
    # 2,000 lines, not 10,000 (round 17: each is parsed, ~4 s): 480 KB, still past the reader's 64 KiB head and
    # 250 times the examples kept per event (job.KEEP), and the same reader path (one region, no threads below 64 MiB)
    p.write_text(line * 2000)
    report = triage_paths([str(p)])
    assert ids(report) == ["LOG001"]
    assert report.findings[0].evidence["count"] == 2000
    assert report.findings[0].evidence["first_seen"]["line"] == 1


def test_laggard_rank0_named_from_cross_tab():
    report = triage_paths([os.path.join(RULES, "LOG001_trigger_rank0_behind.log")])
    f = report.findings[0]
    assert "rank 0 never joined" in f.title and f.subjects[0] == "rank:0"
    tab = {row["rank"]: row for row in f.evidence["cross_tab"]}
    assert tab[0]["enqueued"] == 4401 and tab[1]["enqueued"] == 4402


def test_subset_of_rank_logs_per_file_folder(tmp_path):
    """One log per rank in a folder, only 3 of 4 present: the missing rank is the suspect."""
    for r in (0, 2, 3):
        (tmp_path / f"rank{r}.log").write_text(
            f"[rank{r}]:[E1206 09:54:03.44792036{r} ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=90, OpType=ALLGATHER, NumelIn=8, NumelOut=32, Timeout(ms)=600000) "
            "ran for 600043 milliseconds before timing out.\n"
            f"[rank{r}]:gpu-a:10{r}:10{r} [{r}] NCCL INFO comm 0x1 rank {r} nranks 4 cudaDev {r} busId {r}000 "
            "commId 0x2 - Init COMPLETE\n")
    report = triage_paths([str(tmp_path)])
    f = report.findings[0]
    assert f.id == "LOG001" and f.evidence["missing_ranks"] == [1] and "rank:1" in f.subjects


def test_secrets_in_logs_are_redacted_in_every_format(tmp_path):
    from ddpdoctor.pipeline.render import render

    p = tmp_path / "secret.log"
    p.write_text("[rank0]:Traceback (most recent call last):\n"
                 "[rank0]:  File \"train.py\", line 3, in <module>\n"
                 "[rank0]:ValueError: could not load https://user:hunter2pass@hub.example.com/x?token=hf_abcdefghijklmnopqrstu\n")
    report = triage_paths([str(p)])
    assert ids(report) == ["LOG004"]
    for fmt in ("text", "json", "markdown"):
        out = render(report, fmt, verbose=True)
        assert "hunter2pass" not in out and "hf_abcdefghijklmnop" not in out, fmt
        assert "<redacted>" in out


def test_per_rank_files_without_prefixes_take_the_rank_from_the_name(tmp_path):
    d = tmp_path / "run1" / "attempt_0"
    for r in (0, 1):
        (d / str(r)).mkdir(parents=True)
        text = "step 10 loss 2.1\n"
        if r == 1:
            text += ("Traceback (most recent call last):\n  File \"/srv/proj/train.py\", line 12, in <module>\n"
                     "KeyError: 'input_ids'\n")
        (d / str(r) / "stderr.log").write_text(text)
    (tmp_path / "log_rank_3.txt").write_text("RuntimeError: DataLoader worker (pid 77) is killed by signal: Bus error.\n")
    report = triage_paths([str(tmp_path)])
    by_id = {f.id: f for f in report.findings}
    assert "rank:1" in by_id["LOG004"].subjects and "rank:3" in by_id["LOG010"].subjects


@pytest.mark.parametrize("name", ["acceptance_torchrun_2node_rank5_oom.log", "acceptance_srun_8rank_rank5_oom.log",
                                  "rules/LOG004_trigger_valueerror_rank2.log", "rules/LOG013_trigger_forced_deadlock.log",
                                  "rules/LOG016_trigger_p2p_first_collective.log", "rules/LOG009_trigger_shm.log"])
def test_rules_are_pure_any_order_gives_the_same_findings(name):
    """The one runner may run rules in any order: shared conclusions live in verdict.py, not in
    side effects of earlier rules."""
    import random

    from ddpdoctor.triage import reader as rd
    from ddpdoctor.triage.api import read_inputs, rule_specs, run_rules
    from ddpdoctor.triage.job import Job

    def findings(order):
        job = Job()
        read_inputs(rd.collect([os.path.join(FIX, name)]), job)
        return sorted((f.id, f.title, tuple(f.subjects)) for f in run_rules(job, order))

    specs = rule_specs()
    shuffled = specs[:]
    random.Random(7).shuffle(shuffled)
    assert findings(specs) == findings(list(reversed(specs))) == findings(shuffled)


def test_buried_cuda_oom_is_named_before_the_peers_errors_printed_first():
    """`cat rank*.log`: ranks 0-2's errors about a lost peer come first in the file; rank 3's CUDA OOM,
    4 seconds earlier by the timestamps, is the root cause and the peers' errors fold under it."""
    report = triage_paths([os.path.join(FIX, "combined_rank3_cuda_oom_buried.log")])
    assert ids(report) == ["LOG005"]
    f = report.findings[0]
    assert "rank:3" in f.subjects and f.evidence["consequences"]["peer_error_ranks"] == [0, 1, 2]


def test_torchrun_table_naming_the_wrong_rank_is_corrected():
    """torchrun's "Root Cause" names rank 0 (it aborted while exiting), but rank 1 raised first."""
    report = triage_paths([os.path.join(FIX, "combined_table_names_wrong_rank.log")])
    assert ids(report) == ["LOG004"]
    f = report.findings[0]
    assert "rank:1" in f.subjects and "KeyError" in f.title
    assert f.evidence["consequences"]["later_aborts"] == [{"rank": 0, "signal": "SIGABRT"}]


def test_failure_order_puts_rank5_first():
    report = triage_paths([os.path.join(FIX, "acceptance_torchrun_2node_rank5_oom.log")])
    order = report.extra["triage"]["job"]["failure_order"]
    assert order[0] == {"rank": 5, "how": "SIGKILL", "time": "12-06 10:46:27"}
    assert {f["rank"] for f in order if f["how"] == "timed out"} == {0, 1, 2, 3}


def test_sigabrt_at_exit_is_named_the_teardown_race_not_a_bare_crash(tmp_path):
    """Training printed its summary, then libstdc++'s "terminate called without an active exception" and
    torchrun's -6 for rank 1, no Python exception: torch's Gloo teardown (facts.teardown; measured on this
    project's own trainer job, torch 2.13, Gloo). Without that line the same exit is the generic SIGABRT."""
    name = os.path.join(RULES, "LOG004_trigger_sigabrt_at_exit.log")
    f = next(f for f in triage_paths([name]).sorted_findings() if f.id == "LOG004")
    assert f.title.startswith("rank 1 died on SIGABRT (exit -6) while shutting down") and "teardown" in f.title
    assert "destroy_process_group()" in f.fix and "gc.collect()" in f.fix and "190489" in f.detail and f.evidence["terminate_line"]["line"] == 6
    with open(name) as fh:
        text = fh.read()
    plain = tmp_path / "plain.log"
    plain.write_text(text.replace("terminate called without an active exception\n", ""))
    g = next(f for f in triage_paths([str(plain)]).sorted_findings() if f.id == "LOG004")
    assert g.title == "rank 1 died on SIGABRT (exit -6)" and "destroy_process_group" not in g.fix


def test_cuda_oom_while_wrapping_the_model_advises_sharding_not_a_smaller_batch():
    f = triage_paths([os.path.join(RULES, "LOG005_trigger_ddp_wrap_does_not_fit.log")]).sorted_findings()[0]
    assert f.id == "LOG005" and "does not fit" in f.title and "--deepspeed" in f.fix and "LoraConfig" in f.fix
    assert "per_device_train_batch_size" not in f.fix


def test_cuda_oom_with_several_processes_on_one_gpu_names_torch_load_map_location():
    f = triage_paths([os.path.join(RULES, "LOG005_trigger_load_without_map_location.log")]).sorted_findings()[0]
    assert f.id == "LOG005" and "3 processes" in f.title and "map_location" in f.fix


def test_nccl_out_of_memory_is_a_gpu_oom_not_a_network_error():
    f = triage_paths([os.path.join(RULES, "LOG005_trigger_nccl_oom.log")]).sorted_findings()[0]
    assert f.id == "LOG005" and "NCCL ran out of GPU memory" in f.title


def test_world_size_from_the_highest_rank_is_a_guess_and_names_no_missing_rank(tmp_path):
    """Ranks 2 and 7 time out and nothing counts the ranks: no rank is said to have never joined."""
    p = tmp_path / "t.log"
    p.write_text("".join(
        f"[rank{r}]:[E626 05:06:30.929 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective operation "
        f"timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600065 "
        "milliseconds before timing out.\n" for r in (2, 7)))
    report = triage_paths([str(p)])
    f = report.findings[0]
    assert f.id == "LOG001" and "never joined" not in f.title and f.evidence["missing_ranks"] == []
    assert "a guess" in " ".join(report.extra["text_sections"])


def test_a_remote_error_names_the_peer_address_and_the_exit_is_not_said_to_lack_its_traceback():
    """The rank's traceback (torch's `[rank3]:` prefix) ends in ncclRemoteError and NCCL's "Last error" names the
    peer's address; torchrun's exit 1 is its consequence, not an exit "without traceback"."""
    report = triage_paths([os.path.join(RULES, "LOG022_trigger_peer_address_in_last_error.log")])
    assert ids(report) == ["LOG022"], [(f.id, f.title) for f in report.sorted_findings()]
    f = report.findings[0]
    assert "10.9.0.12" in f.title and f.evidence["peer_hosts"] == ["10.9.0.12"]


def test_an_exception_raised_by_the_rendezvous_store_is_the_store_failing_and_mp_spawn_names_the_process():
    """Old torch raised the socket's bare strerror ("RuntimeError: Connection timed out") from `store = TCPStore(...)`
    in the rendezvous handler; mp.spawn's "-- Process 1 terminated with the following error:" owns the traceback."""
    report = triage_paths([os.path.join(RULES, "LOG008_trigger_store_constructor_raised.log")])
    f = report.sorted_findings()[0]
    assert f.id == "LOG008" and "timed out" in f.title and "rank:1" in f.subjects


def test_an_nccl_warn_counts_as_a_failure_only_when_nccl_traces_an_error_back():
    """NCCL warns of what it survives (no libibverbs: it falls back to sockets): no failure. A WARN followed by
    NCCL's error trace (` -> 3`) is where the failure began, behind a pdsh `worker-1: ` prefix too."""
    assert triage_paths([os.path.join(RULES, "LOG028_quiet_nccl_warn_it_survives.log")]).findings == []
    f = triage_paths([os.path.join(RULES, "LOG022_trigger_pdsh_prefixed_nccl.log")]).sorted_findings()[0]
    assert f.id == "LOG022" and "worker-1" in f.title and "host:worker-1" in f.subjects


def test_a_traceback_cut_above_its_header_or_a_cpp_terminate_is_never_called_healthy():
    for name, line in (("LOG028_trigger_traceback_without_header.log", 1), ("LOG028_trigger_cut_traceback_header.log", 3),
                       ("LOG028_trigger_cpp_terminate.log", 2)):
        f = triage_paths([os.path.join(RULES, name)]).sorted_findings()[0]
        assert f.id == "LOG028" and f.severity == "warning" and f"(line {line})" in f.title, (name, f.title)


def test_the_nvidia_drivers_kernel_messages_and_cudas_unknown_error_are_gpu_faults():
    f = triage_paths([os.path.join(RULES, "LOG020_trigger_nvrm_fallen_off_bus.log")]).sorted_findings()[0]
    assert f.id == "LOG020" and "Xid 79" in f.title and "0000:3b:00" in f.title
    f = triage_paths([os.path.join(RULES, "LOG020_trigger_nccl_cuda_unknown_error.log")]).sorted_findings()[0]
    assert f.id == "LOG020" and "unknown error" in f.title and "line:1" in f.subjects   # NCCL's WARN, before the stamps


def test_an_nccl_internal_error_no_cuda_error_explains_is_reported_with_its_rank():
    f = triage_paths([os.path.join(RULES, "LOG009_trigger_nccl_internal_error.log")]).sorted_findings()[0]
    assert f.id == "LOG009" and f.title == "rank 2: NCCL internal error" and "rank:2" in f.subjects


def test_watchdog_ranks_are_the_global_prefix_and_process_groups_are_not_compared():
    """`[rank13]: ... [Rank 1]`: 1 is the rank within process group 11; two groups' sequence numbers differ."""
    f = triage_paths([os.path.join(RULES, "LOG001_trigger_process_groups_global_ranks.log")]).sorted_findings()[0]
    assert f.id == "LOG001" and "ranks 13, 15" in f.title and "2 process groups" in f.title
    assert "rank:0" not in f.subjects and "rank:1" not in f.subjects


def test_a_local_rank_taken_for_the_rank_is_said_to_be_a_guess(tmp_path):
    p = tmp_path / "t.log"
    p.write_text("E0213 12:07:20.086000 870572 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) "
                 "local_rank: 0 (pid: 876053) of binary: /usr/bin/python3\n")
    f = triage_paths([str(p)]).sorted_findings()[0]
    assert f.id == "LOG004" and f.title.startswith("local rank 0 (rank 0 if this node is the whole job)")


def test_rendezvous_errors_slurm_cancels_and_launch_failures_are_named():
    cases = {"LOG008_trigger_rendezvous_timeout_error.log": ("LOG008", "RendezvousTimeoutError"),
             "LOG026_trigger_slurm_plain_cancel.log": ("LOG026", "SLURM cancelled job 168885 on gpu-a17"),
             "LOG023_trigger_slurm_task_launch_failed.log": ("LOG023", "node cn131: Job credential expired")}
    for name, (rid, words) in cases.items():
        f = triage_paths([os.path.join(RULES, name)]).sorted_findings()[0]
        assert f.id == rid and words in f.title, (name, f.title)
    got = triage_paths([os.path.join(RULES, "LOG009_quiet_single_nccl_trace_in_stride.log")]).findings
    assert not [f for f in got if f.id == "LOG009" or f.severity == "error"]   # at most: it stops in NCCL's set-up


def test_nccls_own_connection_refusals_are_not_the_rendezvous_store():
    """NCCL's bootstrap/transport connects ("Call to connect returned Connection refused, retrying", a bare "NCCL WARN
    Connect to IP<port> failed") are NCCL's (LOG009), behind a harness's `stdout: ` label too; retries with nothing
    after them saying NCCL connected are a warning."""
    got = triage_paths([os.path.join(RULES, "LOG008_quiet_nccl_own_connect_refused.log")]).sorted_findings()
    assert got and got[0].id == "LOG009" and "unhandled system error" not in got[0].title
    f = triage_paths([os.path.join(RULES, "LOG009_trigger_nccl_connect_retries.log")]).sorted_findings()[0]
    assert f.id == "LOG009" and f.severity == "warning" and "4 times" in f.title


def test_pastes_that_start_below_the_first_line_of_an_error_are_still_read():
    """The reducer error's later lines alone, and torchrun's table with its fields run together, keep their class."""
    f = triage_paths([os.path.join(RULES, "LOG012_trigger_reducer_error_tail_only.log")]).sorted_findings()[0]
    assert f.id == "LOG012"
    f = triage_paths([os.path.join(RULES, "LOG002_trigger_table_fields_run_together.log")]).sorted_findings()[0]
    assert f.id == "LOG002" and "rank:2" in f.subjects


def test_an_ib_port_error_is_a_warning_and_a_completion_error_is_not_also_a_lost_peer():
    got = triage_paths([os.path.join(RULES, "LOG009_trigger_ib_port_error.log")]).sorted_findings()
    assert [(f.id, f.severity) for f in got] == [("LOG009", "warning")] and "port" in got[0].title
    got = triage_paths([os.path.join(RULES, "LOG022_quiet_ib_completion_traced_as_remote.log")]).sorted_findings()
    assert [f.id for f in got] == ["LOG009"]


def test_a_log_that_ends_in_the_distributed_set_up_is_said_to_stop_there():
    """NCCL's channel/ring lines and nothing after: a hang in set-up or the first collective, or only an excerpt;
    either way "No issues found!" would say more than the log does."""
    f = triage_paths([os.path.join(RULES, "LOG029_trigger_stops_in_setup.log")]).sorted_findings()[0]
    assert f.id == "LOG029" and f.severity == "warning" and "stops during the distributed set-up" in f.title


def test_two_processes_claiming_one_rank_are_a_launch_error_and_old_nccl_lines_are_nccls():
    f = triage_paths([os.path.join(RULES, "LOG023_trigger_ranks_claimed_twice.log")]).sorted_findings()[0]
    assert f.id == "LOG023" and "ranks 0, 1 started twice" in f.title and "ranks 2, 3 of 4 never started" in f.title
    # NCCL 2.1's "host:pid:tid [0] misc/ibvwrap.cu:60 WARN ..." (no "NCCL" word) is NCCL's warning it survives
    assert triage_paths([os.path.join(RULES, "LOG028_quiet_old_nccl_warn_survived.log")]).findings == []


def test_store_barrier_waits_cuda_wording_store_resets_and_old_nccl_traces():
    cases = {"LOG018_trigger_barrier_more_workers_than_world.log": ("LOG018", "8 processes joined"),
             "LOG021_trigger_cuda_driver_insufficient.log": ("LOG021", "CUDA driver version is insufficient"),
             "LOG008_trigger_store_connection_reset.log": ("LOG008", "connection reset by peer"),
             "LOG009_trigger_old_nccl_warn_trace.log": ("LOG009", "NCCL")}
    for name, (rid, words) in cases.items():
        got = triage_paths([os.path.join(RULES, name)]).sorted_findings()
        assert got[0].id == rid and words in got[0].title, (name, [(f.id, f.title) for f in got])
        assert "LOG022" not in [f.id for f in got] or rid == "LOG009", name   # the store's reset is not a lost peer


def test_batch13_classes_frames_list_rich_top_deepspeed_start_and_nccl_error_after_timeout():
    for name, title in (("LOG028_trigger_frames_as_a_list.log", "unexplained failure"),
                        ("LOG028_trigger_rich_box_top_cut.log", "unexplained failure"),
                        ("LOG029_trigger_deepspeed_launcher_start_only.log", "stops during the distributed set-up")):
        f = triage_paths([os.path.join(RULES, name)]).sorted_findings()[0]
        assert f.id == name.split("_")[0] and title in f.title, (name, f.title)
    got = triage_paths([os.path.join(RULES, "LOG001_trigger_nccl_error_after_watchdog.log")]).sorted_findings()
    assert [f.id for f in got] == ["LOG001"], [(f.id, f.title) for f in got]


def test_batch14_classes_metrics_elastic_info_cut_table_row_rich_code_and_stray_mpirun_bracket():
    """Named losses ("total_loss: 2.4") are progress; torchelastic's INFO start lines are set-up; a table row whose
    exit code a paste cut still names the failed rank; rich's quoted source lines are code, not failures; a stray
    "[" before mpirun's "[1,0]<stdout>:" still leaves NCCL's survived warning a warning."""
    for name, title in (("LOG029_trigger_metrics_then_nothing.log", "stops mid-training"),
                        ("LOG029_trigger_elastic_agent_info_start_only.log", "stops during the distributed set-up")):
        f = triage_paths([os.path.join(RULES, name)]).sorted_findings()[0]
        assert f.id == name.split("_")[0] and title in f.title, (name, f.title)
    f = triage_paths([os.path.join(RULES, "LOG004_trigger_table_row_exit_cut.log")]).sorted_findings()[0]
    assert f.id == "LOG004" and "rank:0" in f.subjects and "exit code and traceback are not in these logs" in f.title
    assert triage_paths([os.path.join(RULES, "LOG028_quiet_mpirun_stray_bracket_nccl_warn.log")]).findings == []


def test_a_line_without_its_own_stamp_is_not_given_one():
    """Lines before their stream's first stamp are ordered by it, but the finding does not print it as their time."""
    f = triage_paths([os.path.join(RULES, "LOG004_trigger_unstamped_traceback_before_stamp.log")]).sorted_findings()[0]
    seen = f.evidence["first_seen"]
    assert f.id == "LOG004" and "time" not in seen and seen["near_time"] == "03-01 10:20:31"


def test_batch15_classes_setup_lines_cut_exit_line_aborted_communicator_and_dated_warnings():
    """DeepSpeed's own start lines, torchrun's OMP banner and peft's parameter count are set-up, and a log that shows
    set-up and nothing of training after it says so (warnings after it change nothing); torchrun's exit line cut
    after its code still names the signal; an aborted communicator is not called a remote error; a logger's
    "NAME WARNING <date>" line is a warning, not a failure."""
    for name, title in (("LOG029_trigger_deepspeed_comm_start_only.log", "stops during the distributed set-up"),
                        ("LOG029_trigger_setup_then_warnings.log", "stops after the set-up"),
                        ("LOG029_trigger_torchrun_omp_banner_only.log", "stops after the set-up")):
        f = triage_paths([os.path.join(RULES, name)]).sorted_findings()[0]
        assert f.id == name.split("_")[0] and title in f.title, (name, f.title)
    f = triage_paths([os.path.join(RULES, "LOG002_trigger_torchrun_exit_cut.log")]).sorted_findings()[0]
    assert f.id == "LOG002" and f.title.startswith("a process was killed by SIGKILL")
    f = triage_paths([os.path.join(RULES, "LOG022_trigger_communicator_aborted.log")]).sorted_findings()[0]
    assert f.id == "LOG022" and "communicator was aborted" in f.title and "remote error" not in f.title
    assert triage_paths([os.path.join(RULES, "LOG028_quiet_logger_warning_with_date.log")]).findings == []


def test_batch16_classes_starting_trainer_rank_prefixes_own_rank_survived_notice_and_gloo_uv_assert():
    """A framework's "Starting trainer..." as the last line is set-up; a quoted Determined "[] [rank=1]" prefix names
    the rank; a failure line naming its own rank and host ("from node-7 with rank id: 2") is that rank's; a failure
    notice the process trains on after ("Importing plotly failed.") was survived; Gloo's libuv abort is catalogued."""
    f = triage_paths([os.path.join(RULES, "LOG029_trigger_starting_trainer_only.log")]).sorted_findings()[0]
    assert f.id == "LOG029" and "set-up" in f.title
    f = triage_paths([os.path.join(RULES, "LOG005_trigger_quoted_rank_equals_prefix.log")]).sorted_findings()[0]
    assert f.id == "LOG005" and "rank:1" in f.subjects
    f = triage_paths([os.path.join(RULES, "LOG028_trigger_line_names_its_rank.log")]).sorted_findings()[0]
    assert f.id == "LOG028" and "rank:2" in f.subjects and "host:node-7" in f.subjects
    assert triage_paths([os.path.join(RULES, "LOG028_quiet_failed_notice_then_training.log")]).findings == []
    f = triage_paths([os.path.join(RULES, "LOG027_trigger_gloo_uv_assert.log")]).sorted_findings()[0]
    assert f.id == "LOG027" and "uv_accept: invalid argument" in f.title and "(pytorch/gloo)" in f.title


def test_batch17_classes_redacted_hosts_cut_lines_watchdog_frames_and_open_mpi_banner():
    """NCCL's lines with a redacted host ('<node b>') are NCCL's; a DeepSpeed line cut inside its file field is set-up;
    a progress bar cut after its percentage is progress; the watchdog's checkTimeout frame alone is a collective
    timeout; Open MPI's fatal banner is a failure."""
    assert triage_paths([os.path.join(RULES, "LOG028_quiet_redacted_host_nccl_warn.log")]).findings == []
    for name, title in (("LOG029_trigger_deepspeed_line_cut.log", "set-up"),
                        ("LOG029_trigger_bar_cut_at_percentage.log", "stops in the data preparation"),
                        ("LOG028_trigger_open_mpi_fatal_banner.log", "unexplained failure")):
        f = triage_paths([os.path.join(RULES, name)]).sorted_findings()[0]
        assert f.id == name.split("_")[0] and title in f.title, (name, f.title)
    f = triage_paths([os.path.join(RULES, "LOG001_trigger_watchdog_frames_only.log")]).sorted_findings()[0]
    assert f.id == "LOG001" and "checkTimeout" in f.title


def test_batch18_class_one_headless_frame_that_ends_its_stream_is_a_traceback():
    """A paste cut above a traceback's header and inside its last frame (one frame, its source line, carets, a message
    cut short) is a failure; a lone frame that output follows (logging's stack_info) is not."""
    f = triage_paths([os.path.join(RULES, "LOG028_trigger_one_frame_cut_at_both_ends.log")]).sorted_findings()[0]
    assert f.id == "LOG028" and f.title.startswith("unexplained failure") and "(line 1)" in f.title
    assert triage_paths([os.path.join(RULES, "LOG028_quiet_lone_frame_then_training.log")]).findings == []


def test_batch19_classes_nccl_before_2_12_peer_closed_and_mmengine_runner_start():
    """NCCL before 2.12 has no ncclRemoteError: its 'Net : Connection closed by remote peer' WARN, traced back as a
    system error (' -> 2'), is a lost peer (LOG022), not an unhandled system error (LOG009). mmengine's (mmcv's)
    runner prints its hooks table before the first iteration: a log that stops there stops in the set-up."""
    f = triage_paths([os.path.join(RULES, "LOG022_trigger_nccl_before_2_12_peer_closed.log")]).sorted_findings()[0]
    assert f.id == "LOG022" and "lost a peer" in f.title
    assert "LOG009" not in ids(triage_paths([os.path.join(RULES, "LOG009_quiet_nccl_before_2_12_peer_closed.log")]))
    f = triage_paths([os.path.join(RULES, "LOG029_trigger_mmengine_hooks_table_then_nothing.log")]).sorted_findings()[0]
    assert f.id == "LOG029" and "after the set-up" in f.title
    # training went on after the hooks table (no LOG028); the log ends on a checkpoint save, no end: LOG029's progress note
    found = triage_paths([os.path.join(RULES, "LOG028_quiet_mmengine_hooks_table_then_training.log")]).findings
    assert [(f.id, f.severity) for f in found] == [("LOG029", "warning")], [(f.id, f.title) for f in found]
    assert found[0].title.startswith("the log shows progress up to line 8, but no end"), found[0].title


def test_batch20_classes_hostname_loopback_gloo_peer_addresses_and_serving_init():
    """A connection to 127.0.1.1 (what /etc/hosts gives a host's own name) is the address problem (LOG025), whatever
    the host count; Gloo's 'connect [ADDR]:PORT' gives its address (no MASTER_ADDR placeholder) and is a peer, not
    the store; a serving framework's 'Init torch distributed begin.' is set-up."""
    f = triage_paths([os.path.join(RULES, "LOG025_trigger_gloo_peer_at_hostname_loopback.log")]).sorted_findings()[0]
    assert f.id == "LOG025" and "127.0.1.1" in f.title
    f = triage_paths([os.path.join(RULES, "LOG025_quiet_gloo_peer_refused_routable_address.log")]).sorted_findings()[0]
    assert f.id == "LOG008" and "10.1.4.22:41523" in f.title and "peer" in f.title and "MASTER_ADDR" not in f.title
    f = triage_paths([os.path.join(RULES, "LOG029_trigger_serving_init_torch_distributed.log")]).sorted_findings()[0]
    assert f.id == "LOG029" and "set-up" in f.title


def test_batch21_classes_horovod_stall_report_and_rays_oom_summary():
    """Horovod's stall report names the ranks that never submitted a collective (LOG001, a warning: the job may get
    past it, and it is not LOG028's failure line); the raylet's 'N Workers ... killed due to memory pressure (OOM)'
    summary is Ray's OOM killer (LOG002)."""
    f = triage_paths([os.path.join(RULES, "LOG001_trigger_horovod_stall_missing_ranks.log")]).sorted_findings()[0]
    assert f.id == "LOG001" and f.severity == "warning" and "rank 2 never submitted" in f.title
    report = triage_paths([os.path.join(RULES, "LOG028_quiet_horovod_stall_then_training.log")])
    assert ids(report) == ["LOG001"] and report.findings[0].severity == "warning"
    f = triage_paths([os.path.join(RULES, "LOG002_trigger_ray_raylet_oom_summary.log")]).sorted_findings()[0]
    assert f.id == "LOG002" and "Ray's memory monitor" in f.title
    # no kill; the log ends on Ray's per-iteration report, not an end: only LOG029's progress note
    found = triage_paths([os.path.join(RULES, "LOG002_quiet_ray_train_no_memory_kill.log")]).findings
    assert [(f.id, f.severity) for f in found] == [("LOG029", "warning")], [(f.id, f.title) for f in found]
    assert found[0].title.startswith("the log shows progress up to line 2, but no end"), found[0].title


def test_batch21_class_a_rank_that_enqueued_the_others_collective_is_not_said_to_never_join_it():
    """Rank 0 times out at #40 having enqueued up to #44; rank 1 waits at #43: rank 0 did enqueue #43, so no rank is
    named as never joining (the cross-tab of enqueued counts alone would call rank 0 behind)."""
    f = triage_paths([os.path.join(RULES, "LOG001_trigger_ranks_past_each_others_collectives.log")]).sorted_findings()[0]
    assert f.id == "LOG001" and "never joined" not in f.title and "ranks 0, 1 waiting" in f.title


def test_batch21_class_an_nccl_info_line_is_context_never_the_failure_line():
    """NCCL's INFO 'Allocated N bytes of shared memory in /dev/shm/...' is what it does, not a failure: a log that
    stops there stops in the set-up, and one that trains on after it is healthy."""
    f = triage_paths([os.path.join(RULES, "LOG029_trigger_nccl_info_shm_allocation_then_nothing.log")]).sorted_findings()[0]
    assert f.id == "LOG029" and "set-up" in f.title and "failed" not in f.title
    assert "LOG028" not in ids(triage_paths([os.path.join(RULES, "LOG028_quiet_nccl_info_shm_allocation_then_training.log")]))


def test_optional_field_patterns_take_their_fields_from_mid_line():
    """A signature made of optional field groups matched empty at the line's start and kept no fields, so c10d's
    '... failed to bind to [::]:29400 ...' gave LOG007 no port: the port the line states is the one named."""
    f = triage_paths([os.path.join(RULES, "LOG007_trigger_bind_port_mid_line.log")]).sorted_findings()[0]
    assert f.id == "LOG007" and "29400" in f.title and "MASTER_PORT" not in f.title


def test_a_host_memory_oom_error_is_one_finding_not_also_a_cuda_oom():
    # Ray's ray.exceptions.OutOfMemoryError (its memory monitor) and the kernel's OOM killer are host RAM: LOG002's,
    # one finding; LOG005 needs CUDA's own texts ("CUDA out of memory", torch.cuda.OutOfMemoryError)
    report = triage_paths([os.path.join(RULES, "LOG002_trigger_ray_oom_error_is_host_memory.log")])
    assert ids(report) == ["LOG002"], [(f.id, f.title) for f in report.sorted_findings()]
    quiet = triage_paths([os.path.join(RULES, "LOG005_quiet_host_oom_messages.log")])
    assert ids(quiet)[:1] == ["LOG002"] and "LOG005" not in ids(quiet), [(f.id, f.title) for f in quiet.findings]


def test_a_log_of_only_c10d_store_address_warnings_stops_in_the_set_up_and_is_not_called_healthy():
    # c10d's address-trying warnings (socket.cpp) are benign, but printed only while the processes connect to the
    # rendezvous store: a log that holds nothing else shows a job in its set-up, never a job that ended well
    from ddpdoctor.facts import messages
    assert messages.phase("store_address_retry") == "setup" and messages.role("store_address_retry") == "benign"
    report = triage_paths([os.path.join(RULES, "LOG029_trigger_c10d_store_address_warnings_only.log")])
    found = report.sorted_findings()
    assert [f.id for f in found] == ["LOG029"] and found[0].severity == "warning", [(f.id, f.title) for f in found]
    assert "set-up" in found[0].title and not found[0].title.startswith("unexplained failure")
    quiet = triage_paths([os.path.join(RULES, "LOG028_quiet_c10d_store_address_warnings_then_training.log")])
    assert not quiet.findings, [(f.id, f.title) for f in quiet.findings]



def test_gpu_fault_names_the_rank_processgroupnccl_gives_itself(tmp_path):
    """ProcessGroupNCCL prefixes its lines with its own rank ("[Rank 3]", "[PG ID 0 PG GUID 0(default_pg) Rank 3]"): a
    watchdog line without torchrun's [rankN]: prefix still names whose GPU faulted (corpus b23_05, vLLM's Ray workers)."""
    f = triage_paths([os.path.join(RULES, "LOG020_trigger_old_watchdog_line_names_its_rank.log")]).sorted_findings()[0]
    assert f.id == "LOG020" and "rank:3" in f.subjects and f.title.startswith("rank 3 "), (f.title, f.subjects)
    # the same fault on a line that names no rank stays unattributed: no rank is invented
    log = tmp_path / "fault.log"
    log.write_text("RuntimeError: CUDA error: an illegal memory access was encountered\n")
    g = triage_paths([str(log)]).sorted_findings()[0]
    assert g.id == "LOG020" and not any(s.startswith("rank:") for s in g.subjects), (g.title, g.subjects)


def test_elastic_table_root_cause_row_wins_at_the_same_second():
    """torchrun stamps every row of its failure table with the second it collected them; the row under "Root Cause
    (first observed failure)" is the first failure even when the paste lists it after the others (corpus b25_16)."""
    f = triage_paths([os.path.join(RULES, "LOG004_trigger_table_root_cause_listed_last.log")]).sorted_findings()[0]
    assert f.id == "LOG004" and f.title.startswith("rank 3 ") and "rank:3" in f.subjects, (f.title, f.subjects)


def test_log029_health_needs_evidence():
    """No failure, no end, no progress: not "No issues found!" but LOG029, with what the log shows; an end is the
    evidence that keeps the report quiet."""
    for name in ("LOG029_trigger_library_warnings_only.log", "LOG029_trigger_framework_messages_only.log"):
        r = triage_paths([os.path.join(RULES, name)])
        found = [f for f in r.findings if f.severity in ("error", "warning")]
        assert [f.id for f in found] == ["LOG029"], (name, [f.id for f in found])
        f = found[0]
        assert "cannot show that the job is healthy" in f.title and "unexplained failure" not in f.title
        assert f.evidence["ended_well"] is False and f.evidence["lines_read"] > 0 and f.evidence["last_line"]["line"]
        assert "ddpdoctor run" in f.fix
    for name in ("LOG029_quiet_warnings_then_training_completed.log", "LOG029_quiet_progress_then_eval.log",
                 "LOG029_quiet_torchelastic_events_succeeded.log"):
        r = triage_paths([os.path.join(RULES, name)])
        assert not [f for f in r.findings if f.severity in ("error", "warning")], name


def test_log029_progress_is_not_an_end():
    """Progress with no end and no failure (a bar at 100%, then other lines: corpus b32_09, a job whose CUDA OOM the
    paste left out) is not evidence that the job ended well: LOG029 says where the progress stops and that no end
    follows. An end (the Trainer's train metrics, Lightning's max_epochs reached, nccl-tests' summary) keeps it quiet,
    and nccl-tests' header ('step: 2(factor)') is no progress."""
    f = triage_paths([os.path.join(RULES, "LOG029_trigger_progress_bar_done_then_no_end.log")]).sorted_findings()[0]
    assert f.id == "LOG029" and f.severity == "warning", (f.id, f.title)
    assert f.title.startswith("the log shows progress up to line 1, but no end"), f.title
    assert f.evidence["last_progress"]["line"] == 1 and f.evidence["last_line"]["line"] == 4, f.evidence
    h = triage_paths([os.path.join(RULES, "LOG029_trigger_nccl_tests_header_only.log")]).sorted_findings()[0]
    assert h.id == "LOG029" and h.evidence["progress_lines"] == 0 and "no end or progress" in h.title, h.title
    for name in ("LOG029_quiet_trainer_train_metrics.log", "LOG029_quiet_lightning_fit_stopped.log",
                 "LOG029_quiet_nccl_tests_complete.log"):
        assert triage_paths([os.path.join(RULES, name)]).findings == [], name


def test_lost_peer_lines_fold_under_the_fault_of_the_same_log():
    """One finding per fault: NCCL's 'Connection closed by remote peer' after NCCL ran out of GPU memory on another GPU,
    or after its own IB verbs call failed, and torch's 'communicator was aborted ... Original reason for failure was:
    [Rank 1] Watchdog caught collective operation timeout', are consequences: no second error (LOG022) beside the
    root cause, whose finding says what followed (corpus b6_25, b22_12, b25_20)."""
    for name, root in (("LOG022_quiet_peer_closed_after_nccl_oom.log", "LOG005"),
                       ("LOG022_quiet_peer_closed_after_ib_verbs_failure.log", "LOG009"),
                       ("LOG022_quiet_aborted_after_watchdog_timeout.log", "LOG001")):
        found = [f for f in triage_paths([os.path.join(RULES, name)]).sorted_findings() if f.severity == "error"]
        assert [f.id for f in found] == [root], (name, [(f.id, f.title) for f in found])
        if root != "LOG001":
            assert "Connection closed by remote peer" in found[0].detail and "a consequence of this fault" in found[0].detail
            assert found[0].evidence["consequences"]["peer_errors"] >= 1
    # with no fault of its own in the log, the lost peer is still LOG022's
    f = triage_paths([os.path.join(RULES, "LOG022_trigger_peer_address_in_last_error.log")]).sorted_findings()[0]
    assert f.id == "LOG022", (f.id, f.title)


def test_nccl_warn_text_after_last_error_is_nccls_not_the_store():
    """torch prints NCCL's last error on the line after 'Last error:', without NCCL's prefix: 'Net : Call to recv from
    IP<port> failed : Connection refused' is NCCL's transport socket (its WARN formats open with the subsystem), not the
    c10d store (corpus b32_01): no LOG008 beside the NCCL error."""
    found = [f for f in triage_paths([os.path.join(RULES, "LOG008_quiet_nccl_last_error_connection_refused.log")]).sorted_findings()
             if f.severity == "error"]
    assert [f.id for f in found] == ["LOG009"], [(f.id, f.title) for f in found]


def test_batch34_classes_unprefixed_traceback_header_and_other_programs_dev_shm():
    """A traceback header pasted without the '[rank5]:' prefix its frames carry is rank 5's (corpus b34_10); Ray's
    WARNING that its object store uses /tmp instead of /dev/shm is no NCCL shared-memory failure, nor a process failing
    (b34_22): no failure at all, so LOG029 says the log cannot show health."""
    f = triage_paths([os.path.join(RULES, "LOG028_trigger_unprefixed_header_of_a_rank_traceback.log")]).sorted_findings()[0]
    assert f.id == "LOG028" and f.title.startswith("unexplained failure: rank 5 failed first (line 1)"), f.title
    assert f.evidence["first_failure_lines"][0]["rank"] == 5 and len(f.evidence["first_failure_lines"]) == 1
    found = triage_paths([os.path.join(RULES, "LOG009_quiet_ray_dev_shm_warning.log")]).sorted_findings()
    assert [x.id for x in found] == ["LOG029"], [(x.id, x.title) for x in found]


def test_batch35_class_processgroupnccl_message_wrapped_inside_a_word():
    """A terminal that wraps at a fixed width breaks ProcessGroupNCCL's heartbeat report inside a word ("ProcessGroupNCCL'"
    / "s watchdog got stuck for 480 seconds"), the continuation without the [rankN]: prefix: the pieces are joined when
    the joined text is the catalogued message, so the stuck watchdog of rank 3 is reported (corpus b35_19 was LOG029's
    'no failure')."""
    f = triage_paths([os.path.join(RULES, "LOG001_trigger_heartbeat_stuck_wrapped_mid_word.log")]).sorted_findings()[0]
    assert f.id == "LOG001" and f.severity == "error" and "rank:3" in f.subjects, (f.id, f.title, f.subjects)
    found = triage_paths([os.path.join(RULES, "LOG001_quiet_wrapped_processgroupnccl_info.log")]).sorted_findings()
    assert not [x for x in found if x.severity == "error"], [(x.id, x.title) for x in found]


def test_batch36_class_traceback_escaped_in_torchelastic_error_json():
    """torchelastic's error handler logs the error file's JSON, its py_callstack a traceback.format_exc() escaped by
    json.dumps ('\\  File \\"/x/api.py\\"'): frames in that form are a traceback cut above its header (corpus
    b36_15 was LOG029's 'no failure'); one escaped path in a config line followed by training is not."""
    f = triage_paths([os.path.join(RULES, "LOG028_trigger_escaped_frames_only.log")]).sorted_findings()[0]
    assert f.id == "LOG028" and f.title.startswith("unexplained failure"), (f.id, f.title)
    assert triage_paths([os.path.join(RULES, "LOG028_quiet_one_escaped_path_then_training.log")]).findings == []


def test_log029_quiet_when_another_rule_speaks():
    """A log that stops in the set-up is one LOG029 warning ("stops during the set-up"), not also LOG028's failure; and
    when LOG028 reports a failure, LOG029 adds no second warning beside it."""
    ids = [f.id for f in triage_paths([os.path.join(RULES, "LOG029_trigger_stops_in_setup.log")]).findings]
    assert ids == ["LOG029"], ids
    ids = [f.id for f in triage_paths([os.path.join(RULES, "LOG028_trigger_getopt_refused_option.log")]).findings]
    assert "LOG028" in ids and "LOG029" not in ids, ids


def test_log008_names_an_ipv4_mapped_address_whole():
    """'[::ffff:192.168.1.219]:23456' is one address and its port, not '::ffff' and port 192: the title says what the
    log says, in brackets."""
    f = triage_paths([os.path.join(RULES, "LOG008_trigger_ipv4_mapped_address.log")]).sorted_findings()[0]
    assert f.id == "LOG008" and "[::ffff:192.168.1.219]:23456" in f.title, f.title


def test_log022_proxy_call_rank_is_the_reporter_not_the_peer():
    """NCCL's 'Proxy Call to rank 1 failed (Connect)' is rank 1's own proxy: the peer that went away is the host
    'Connection closed by remote peer node-b<59227>' names, and rank 1 is not called the first failure."""
    f = triage_paths([os.path.join(RULES, "LOG022_trigger_proxy_call_names_own_rank.log")]).sorted_findings()[0]
    assert f.id == "LOG022" and "node-b" in f.title and "rank 1 failed first" not in f.title, f.title


def test_an_unraisable_exception_report_is_no_failure_but_a_cut_one_hides_nothing():
    """CPython's 'Exception ignored in: ...' report (a destructor's error; the program goes on) is no process failing;
    when the report is cut and another traceback follows, that traceback's exception is still reported."""
    from ddpdoctor.model import ERROR

    quiet = triage_paths([os.path.join(RULES, "LOG004_quiet_unraisable_exception_ignored.log")]).sorted_findings()
    assert not [f for f in quiet if f.severity == ERROR or f.title.startswith("unexplained failure")], quiet
    f = triage_paths([os.path.join(RULES, "LOG004_trigger_failure_after_cut_unraisable_report.log")]).sorted_findings()[0]
    assert f.id == "LOG004" and "expected a non-empty batch" in f.title, f.title


def test_horovodrun_rank_tag_names_the_rank():
    """horovodrun prefixes each worker's output with '[rank]<stderr>:' (no job id, unlike mpirun --tag-output):
    the failing rank is named."""
    f = triage_paths([os.path.join(RULES, "LOG009_trigger_horovodrun_rank_tag.log")]).sorted_findings()[0]
    assert f.id == "LOG009" and "rank:1" in f.subjects, (f.title, f.subjects)


def test_log009_names_the_traced_return_code():
    """NCCL's trace lines carry only a return code: 1 is ncclUnhandledCudaError, 3 ncclInternalError; the title
    says which, not one for both."""
    one = triage_paths([os.path.join(RULES, "LOG009_trigger_traced_code_1_is_unhandled_cuda.log")]).sorted_findings()[0]
    three = triage_paths([os.path.join(RULES, "LOG009_trigger_traced_code_3_is_internal.log")]).sorted_findings()[0]
    assert one.id == three.id == "LOG009", (one.title, three.title)
    assert "unhandled CUDA error" in one.title and "internal error" in three.title, (one.title, three.title)


def test_one_rank_out_of_memory_of_a_guessed_world_says_it_is_a_guess():
    """No line counts the ranks: the world size is the highest rank seen + 1, a lower bound. "Only rank 1 of N ran
    out" then says "at least N (a guess)", and is said only when another rank's lines are in sight (an excerpt of
    rank 1's output alone shows nothing of the others)."""
    f = triage_paths([os.path.join(RULES, "LOG005_trigger_one_rank_of_a_guessed_world.log")]).sorted_findings()[0]
    assert f.id == "LOG005" and "Only rank 1 of at least 2 (a guess" in f.detail
    alone = triage_paths([os.path.join(RULES, "LOG005_trigger_only_this_rank_in_sight.log")]).sorted_findings()[0]
    assert alone.id == "LOG005" and "rank:1" in alone.subjects and "Only rank" not in alone.detail
    counted = triage_paths([os.path.join(RULES, "LOG005_trigger_one_rank_of_a_counted_world.log")]).sorted_findings()[0]
    assert "Only rank 1 of 4 ran out" in counted.detail and "a guess" not in counted.detail


def test_batch37_class_torchrun_sigkill_after_its_sigterm_wait_is_no_oom():
    """torchrun's agent stops the surviving workers with SIGTERM, waits (PContext.close: 30 s by default), then sends
    SIGKILL: a SIGKILL row of its table at a later second than another rank's own failure row (exit code 1) is that
    escalation, so the first failure is the exit-1 rank (corpus b37_01 was LOG002 on the later SIGKILL). A SIGKILL that
    is itself the first failure is still LOG002."""
    f = triage_paths([os.path.join(RULES, "LOG004_trigger_exit_before_torchrun_sigkill.log")]).sorted_findings()[0]
    assert f.id == "LOG004" and "rank:2" in f.subjects and "SIGKILL later" in f.detail, (f.id, f.title, f.subjects)
    ids = [x.id for x in triage_paths([os.path.join(RULES, "LOG004_quiet_sigkill_first_then_exit_codes.log")]).findings]
    assert ids[:1] == ["LOG002"] and "LOG004" not in ids, ids


def test_batch38_classes_c10d_attempts_dataloader_pids_numeric_addresses_disk_full_git_probe():
    """Batch 38's classes. c10d's warning-level 'The client socket has failed to connect to [X]:P' is one address
    tried (socket.cpp recordError), not the connect failing: a job that goes on after it is healthy. 'DataLoader worker
    (pid(s) N, M) exited unexpectedly' is LOG010. A connect to 0.0.0.0/8 (also IPv4-mapped) is a numeric host name
    read as an IP (LOG025). 'No space left on device' is a failure line; git's 'fatal: not a git repository' is not."""
    def first(name):
        found = triage_paths([os.path.join(RULES, name + ".log")]).sorted_findings()
        return found[0] if found else None
    assert first("LOG008_quiet_c10d_one_address_attempt_then_training") is None
    f = first("LOG010_trigger_worker_pids_exited_unexpectedly")
    assert f.id == "LOG010" and "rank:1" in f.subjects and "4411, 4412" in f.title, (f.id, f.title)
    f = first("LOG025_trigger_numeric_host_as_mapped_address")
    assert f.id == "LOG025" and "0.0.3.241" in f.title, (f.id, f.title)
    f = first("LOG028_trigger_disk_full")
    assert f.id == "LOG028" and "line 3" in f.title, (f.id, f.title)
    ids = [x.id for x in triage_paths([os.path.join(RULES, "LOG028_quiet_git_probe_at_start.log")]).findings]
    assert "LOG028" not in ids, ids


def test_batch39_classes_slurmstepd_task_exit_refusal_chdir_to_tmp_getopt_refusal():
    """Batch 39's classes. slurmstepd's 'Failed to send MESSAGE_TASK_EXIT: Connection refused' (mgr.c: srun already
    gone) is no c10d store refusal: the requeue is the first finding and LOG008 is absent. slurmstepd's "couldn't
    chdir to `X': ...: going to /tmp instead" is a warning the task survives (it starts in /tmp), not a failure line.
    getopt's "unrecognized option" is a command refusing its arguments: a failure line."""
    def found(name):
        return triage_paths([os.path.join(RULES, name + ".log")]).sorted_findings()
    f = found("LOG026_trigger_requeue_then_task_exit_refused")
    assert f[0].id == "LOG026" and "LOG008" not in [x.id for x in f], [(x.id, x.title) for x in f]
    assert "LOG008" not in [x.id for x in found("LOG008_quiet_slurmstepd_task_exit_refused")]
    f = found("LOG029_trigger_slurm_chdir_to_tmp_then_setup_only")
    assert f[0].id == "LOG029" and "failed first" not in f[0].title and "set-up" in f[0].title, f[0].title
    f = found("LOG028_trigger_getopt_refused_option")
    assert f[0].id == "LOG028" and "line 2" in f[0].title, f[0].title


def test_nccl_own_connect_refusal_after_last_error_is_a_peer_not_the_store():
    """NCCL's 'socketPollConnect: connect to IP<port> returned Connection refused, exceeded error retry count' (its
    bootstrap or transport socket: src/os/linux.cc socketConnectCheck returns ncclRemoteError), printed by torch on the
    line after 'Last error:' without NCCL's prefix, names the peer NCCL could not reach: LOG022 with that address, no
    LOG008 (the c10d store writes [host]:port)."""
    f = triage_paths([os.path.join(RULES, "LOG022_trigger_nccl_connect_retries_exceeded_after_last_error.log")]).sorted_findings()
    assert f[0].id == "LOG022" and "169.254.20.10" in f[0].title, [(x.id, x.title) for x in f]
    assert "LOG008" not in [x.id for x in f]
