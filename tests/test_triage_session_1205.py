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
    """Batch 43 (deepspeedai/DeepSpeed#3869): a CUDA OOM line without a rank prefix and the deepspeed launcher's
    "[... '--local_rank=N' ...] exits with return code = 1". Round 7 (batch 55): the launcher prints the command left
    over from its spawn loop, the LAST local process's (deepspeed/launcher/launch.py @32c6645 sigkill_handler), not the
    failed one's: '--local_rank=1' of two processes names no rank; '--local_rank=0' (the only process) names rank 0."""
    f = _found("LOG005_trigger_oom_rank_from_launcher_exit")
    assert f[0].id == "LOG005" and not any(s.startswith("rank:") for s in f[0].subjects), (f[0].title, f[0].subjects)
    assert f[0].evidence["rank_from_launcher_exit"] is None
    one = open(os.path.join(RULES, "LOG005_trigger_oom_rank_from_launcher_exit.log")).read().replace(
        "'--local_rank=1'", "'--local_rank=0'").replace("{'localhost': [0, 1]}", "{'localhost': [0]}")
    p = tmp_path / "one.log"
    p.write_text(one)
    g = triage_paths([str(p)]).sorted_findings()
    oom = next(x for x in g if x.id == "LOG005")
    assert "rank:0" in oom.subjects and oom.evidence["rank_from_launcher_exit"] == 0, (oom.title, oom.subjects)


def test_a_rank_waiting_for_rank_0s_unique_id_points_at_rank_0():
    """ProcessGroupNCCL's broadcastUniqueNCCLID ("[N] is setting up NCCL communicator and retrieving ncclUniqueId from
    [0] via c10d key-value store by key 'K', but store->get('K') got error: ...") is a rank that reached the store and
    waited for rank 0's put: rank 0 crashed, was killed or is slow, more likely than a wrong address or a firewall. The
    finding says so and sends the user to rank 0's own output; a reset store says rank 0's process went away. The quiet
    side: a client socket that never connected keeps the address/firewall reading."""
    f = _found("LOG008_trigger_unique_id_timeout_rank0_first")[0]
    assert f.id == "LOG008" and "rank 0's NCCL unique id" in f.title and "(key '0')" in f.title, f.title
    assert "rank 0 crashed" in f.detail and "firewall" not in f.detail and "Rank 0's own output" in f.detail
    assert f.evidence["store_key"] == "0" and f.evidence["waiting_ranks"] == [1] and not f.evidence["reset"]
    r = _found("LOG008_trigger_unique_id_store_reset")[0]
    assert r.id == "LOG008" and "rank 0's process went away" in r.title and r.evidence["reset"], r.title
    q = _found("LOG008_trigger_client_socket_timeout_not_unique_id")[0]
    assert q.id == "LOG008" and "unique id" not in q.title and "firewall" in q.detail, (q.title, q.detail)


def test_a_ray_node_death_is_a_lost_host_not_a_generic_failure():
    """Ray's node deaths (src/ray/gcs/gcs_actor_manager.cc GenNodeDiedCause @e58c6c3: "The actor died because its
    node has died. Node Id: ..."; gcs_server/gcs_actor_manager.cc @47ac75a "The actor is dead because ..."; 
    gcs_server/gcs_node_manager.cc RemoveNode @59ec1d2: "... has been marked dead because the detector has missed too
    many heartbeats") are LOG022's lost peer (a host), naming the node, not LOG004's "a process failed with
    ActorDiedError". An actor that died of its own __init__ error stays LOG004's."""
    f = _found("LOG022_trigger_ray_actor_node_died")
    assert [x.id for x in f] == ["LOG022"] and "Ray node 8e1f0a6c2b9d" in f[0].title, [(x.id, x.title) for x in f]
    g = _found("LOG022_trigger_ray_node_marked_dead")
    assert [x.id for x in g] == ["LOG022"] and "Ray node 10.0.1.7" in g[0].title, [(x.id, x.title) for x in g]
    q = _found("LOG022_quiet_ray_actor_creation_task_error")
    assert q[0].id == "LOG004" and "LOG022" not in [x.id for x in q]


def test_a_launchers_or_ides_exit_0_is_the_end_a_users_own_message_is_not():
    """A job whose last lines are the user's own end message ("Finished train!") ends well only when a process's exit 0
    follows it: DeepSpeed's launcher "Process P exits successfully." (launch.py @f6aed2e), torchrun's agent "Done
    waiting for other agents" (api.py _exit_barrier @be6d266, reached only after its workers SUCCEEDED), PyCharm's
    "Process finished with exit code 0" (IdeCoreBundle.properties @432c504). No user string is learnt: the message
    alone still gets LOG029's note, and exit code 1 is a failure."""
    for name in ("LOG029_quiet_user_end_then_deepspeed_exit0", "LOG029_quiet_user_end_then_pycharm_exit0",
                 "LOG029_quiet_user_end_then_torchrun_done_waiting"):
        assert _found(name) == [], name
    f = _found("LOG029_trigger_user_end_message_only")
    assert [x.id for x in f] == ["LOG029"] and f[0].severity == "warning"
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as fh:
        fh.write(open(os.path.join(RULES, "LOG029_trigger_user_end_message_only.log")).read()
                 + "\nProcess finished with exit code 1\n")
    try:
        got = triage_paths([fh.name]).sorted_findings()
    finally:
        os.unlink(fh.name)
    assert got and got[0].id != "LOG029" and got[0].severity in ("error", "warning"), [(x.id, x.title) for x in got]


def test_a_stuck_watchdog_is_not_called_a_collective_timeout():
    """Batch 44 (modelscope/ms-swift#7992): ProcessGroupNCCL's heartbeat monitor "ProcessGroupNCCL's watchdog got stuck
    for N seconds without making progress in monitoring enqueued collectives ... a NCCL/CUDA API (e.g.,
    CudaEventDestroy) hang blocking the watchdog" says the watchdog thread hung in a CUDA/NCCL call; when such lines are
    all there is, LOG001 says so (the ranks, the seconds) and does not say a collective timed out or a rank lagged. The
    quiet side: a watchdog's collective timeout keeps its "collective timeout" title."""
    f = _found("LOG001_trigger_heartbeat_watchdog_stuck")[0]
    assert f.id == "LOG001" and "watchdog got stuck on ranks 1, 3 (480 s" in f.title and "not a collective timeout" in f.title
    assert "py-spy dump" in f.fix and "same collectives" not in f.fix
    q = _found("LOG001_trigger_rank0_behind")[0]
    assert q.id == "LOG001" and q.title.startswith("collective timeout") and "got stuck" not in q.title, q.title
