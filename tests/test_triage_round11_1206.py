"""Round-11 classes of issue 24 (triage, 2026-12-06 session 4): trigger and quiet cases whose assertions can fail.
Logs are written from the formats the sources print (no logs copied); pure in-process tests."""
from __future__ import annotations

from ddpdoctor.facts import messages
from ddpdoctor.triage.api import triage_paths


def _found_text(tmp_path, text):
    p = tmp_path / "job.log"
    p.write_text(text, encoding="utf-8")
    return [f for f in triage_paths([str(p)]).sorted_findings() if f.severity in ("error", "warning")]


def _ids(f):
    return [(x.id, x.title) for x in f]


def _no_failure(f):
    return not [x for x in f if x.severity == "error" or x.title.startswith("unexplained failure")]


_STEPS = "Epoch 1 step 10 loss 2.345\nEpoch 1 step 20 loss 2.101\n"

# --- harmless notices with failure words, mined from the sources (torch 2.13.0 @cf30153, accelerate @16cb6eb,
# transformers v5.25.0: logger.warning/info and warnings.warn texts), printed bare as logging's last-resort handler and
# transformers' default handler print them, last in a log (nothing after them to show the job went on) --------------
NOTICES = (
    "Failed to destroy default group during shrinking",                                  # distributed_c10d.py
    "Failed to abort process group default_pg",
    "Failed to fully clean up global state for process group",
    "Rendezvous attempt failed, will retry. Reason: etcd key not found",               # etcd_rendezvous.py
    "Socket creation attempt failed.",                                                 # elastic/utils/distributed.py
    "Unlimited buffer size is set for `demux`, please be aware of OOM at random places",
    "We will use 90% of the memory on device 0 for storing the model, and 10% for the buffer to avoid OOM. You can set "
    "`max_memory` in to a higher value to use more memory (at your own risk).",
    "Could not log the number of model parameters in Weights & Biases due to an AttributeError.",
    "Could not remove checkpoint `checkpoint-500` after going over the `save_total_limit`. Error is: [Errno 39] "
    "Directory not empty",
    "  - If you are the owner of the model architecture code, please modify your model class such that it inherits "
    "from `GenerationMixin` (after `PreTrainedModel`, otherwise you'll get an exception).",
    "torchcodec is installed but failed to load (libavutil.so.58: cannot open shared object file), so it will not be used.",
)


def test_mined_harmless_notices_last_in_a_healthy_log_are_no_failure(tmp_path):
    for notice in NOTICES:
        f = _found_text(tmp_path, _STEPS + notice + "\n")
        assert _no_failure(f), (notice, _ids(f))


def test_a_failure_after_a_harmless_notice_is_still_reported(tmp_path):
    """The quiet side: the notice is benign, not a shield; an uncatalogued failure line of the same kind ("Failed to
    ...") and a traceback after the notice are still failures."""
    for tail in ("Failed to allocate the optimizer state on rank 0\n",
                 "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
                 "RuntimeError: CUDA error: an illegal memory access was encountered\n"):
        f = _found_text(tmp_path, _STEPS + "Failed to destroy default group during shrinking\n" + tail)
        assert f and not _no_failure(f), (tail, _ids(f))


def test_benign_entries_may_carry_no_prefilter_keyword_but_others_must():
    benign = {"id": "x", "class": "benign_warning", "pattern": "Socket creation attempt failed", "fix": "-",
              "examples": ["Socket creation attempt failed."]}
    assert not messages.has_anchor(benign["examples"][0])
    assert not [p for p in messages.entry_problems(benign) if "prefilter keyword" in p]
    cause = dict(benign, **{"class": "store_refused"})
    assert [p for p in messages.entry_problems(cause) if "prefilter keyword" in p]


# --- NCCL src/init.cc internals (@5067397) and torch's socket.cpp / TCPStore messages (libtorch_cpu.so 2.13.0) -------
def test_nccl_p2p_schedule_internal_errors_read_as_nccl_errors(tmp_path):
    for warn in ("nLocals = 8 should be a diviser of the number of ranks in node 1 = 6",
                 "P2p schedule creation has bugs."):
        f = _found_text(tmp_path, f"node-a:48213:48290 [3] NCCL WARN {warn}\n"
                                  "node-a:48213:48290 [3] NCCL INFO init.cc:1234 -> 3\n")
        assert f and f[0].id == "LOG009", (warn, _ids(f))


def test_store_bind_errno_99_is_an_address_problem_and_errno_98_stays_a_port_in_use(tmp_path):
    f = _found_text(tmp_path, "RuntimeError: The server socket has failed to bind to 10.0.0.5:29500 (errno: 99 - "
                              "Cannot assign requested address).\n")
    assert f and f[0].id == "LOG025", _ids(f)
    f = _found_text(tmp_path, "RuntimeError: The server socket has failed to bind to [::]:29500 (errno: 98 - "
                              "Address already in use).\n")
    assert f and f[0].id == "LOG007", _ids(f)


def test_store_shutdown_notices_are_no_failure_and_a_broken_store_poll_is(tmp_path):
    for notice in ("[W1206 09:00:00.123456 1234 torch/csrc/distributed/c10d/TCPStoreLibUvBackend.cpp:1180] "
                   "uv_loop_close failed with:-16 errn:EBUSY desc:resource busy or locked",
                   "[W1206 09:00:00.123456 1234 torch/csrc/distributed/c10d/TCPStoreBackend.cpp:123] failed to parse "
                   "somaxconn proc file due to No such file or directory"):
        assert _no_failure(_found_text(tmp_path, _STEPS + notice + "\n")), notice
    f = _found_text(tmp_path, "RuntimeError: waitForInput: poll for socket SocketImpl(fd=14, addr=[node-b]:43310, "
                              "remote=[node-a]:29500) failed with res=-1, err=Connection reset by peer.\n")
    assert f and not _no_failure(f), _ids(f)
    assert messages.match("waitForInput: poll for socket SocketImpl(fd=14) failed with res=-1, err=x.").entry["class"] \
        == "nccl_aborted"


# --- left by round 10: DeepSpeed's launcher exit retold by a user ("exits with run code= -9") -----------------------
def test_retold_deepspeed_launcher_exit_minus_9_is_a_sigkill(tmp_path):
    for text in ("I ran into error exits with run code= -9. Then [ERROR] [launch.py:434:sigkill_handler].\n",
                 "[ERROR] [launch.py:434:sigkill_handler] the worker exits with return code -9\n"):
        f = _found_text(tmp_path, text)
        assert f and f[0].id == "LOG002", (text, _ids(f))


def test_horovod_status_code_and_a_zero_exit_are_not_read_as_deepspeed_kills(tmp_path):
    """The quiet side: horovodrun's "exit with status code" keeps its own reading, and exit code 0 is no SIGKILL."""
    f = _found_text(tmp_path, "Process 2 exit with status code 1.\n")
    assert not f or f[0].id != "LOG002", _ids(f)
    f = _found_text(tmp_path, _STEPS + "the worker exits with run code = 0\nTraining completed.\n")
    assert _no_failure(f), _ids(f)


# --- batch 72: c10d's bind failure on Windows, "(system error: 10048 - <text in the system's language>)" -----------
def test_windows_bind_error_10048_is_a_port_in_use(tmp_path):
    f = _found_text(tmp_path, "[W socket.cpp:436] [c10d] The server socket has failed to bind to [DESKTOP-1]:10086 "
                              "(system error: 10048 - 通常每个套接字地址只允许使用一次。).\n"
                              "[E socket.cpp:472] [c10d] The server socket has failed to listen on any local network "
                              "address.\n")
    assert f and f[0].id == "LOG007", _ids(f)


def test_other_windows_bind_errors_are_not_a_port_in_use(tmp_path):
    """The quiet side: another Windows code (10013, access denied) is no port held by another job."""
    f = _found_text(tmp_path, "RuntimeError: The server socket has failed to bind to [DESKTOP-1]:10086 (system error: "
                              "10013 - An attempt was made to access a socket in a way forbidden by its access "
                              "permissions.).\n")
    assert f and f[0].id != "LOG007", _ids(f)


# --- harmless notices logged at INFO/DEBUG level: the record's own level field, in logging's usual layouts -----------
def test_info_level_records_with_failure_words_are_no_failure(tmp_path):
    for line in ("2024-03-01 10:00:01,200 - transformers.integrations.hub_kernels - INFO - Failed to load kernel rmsnorm: "
                 "no module named 'kernels'",
                 "[2024-03-01 10:00:01,200] [INFO] [engine.py:333:run] Error during conversion: unsupported dtype, skipped",
                 "INFO:torch.distributed.elastic.rendezvous.etcd_rendezvous:Shutdown failed",
                 "I0301 10:00:01.200000 1234 torch/distributed/elastic/agent/server/api.py:333] Failed to start the health "
                 "check server, going on without it"):
        f = _found_text(tmp_path, _STEPS + line + "\n")
        assert _no_failure(f), (line, _ids(f))


def test_error_level_records_and_exceptions_quoting_info_stay_failures(tmp_path):
    """The quiet side: the same layouts at ERROR level, an exception whose message holds 'INFO', and a catalogued
    failure logged at INFO (torchrun's worker group FAILED) are failures."""
    for line in ("2024-03-01 10:00:01,200 - trainer - ERROR - Failed to load kernel rmsnorm: no module named 'kernels'",
                 "[2024-03-01 10:00:01,200] [ERROR] [engine.py:333:run] Error during conversion: unsupported dtype",
                 "RuntimeError: INFO: failed to read the shard index",
                 "E0301 10:00:01.200000 1234 torch/distributed/elastic/multiprocessing/api.py:882] failed (exitcode: 1) "
                 "local_rank: 0 (pid: 4242) of binary: /usr/bin/python"):
        f = _found_text(tmp_path, _STEPS + line + "\n")
        assert f and not _no_failure(f), (line, _ids(f))
