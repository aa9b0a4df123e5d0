"""Round-8 classes of issue 24 (triage, 2026-12-06): trigger and quiet cases whose assertions can fail. Logs are written
from the formats the sources print (no logs copied); pure in-process tests (no process launched)."""
from __future__ import annotations

from ddpdoctor.triage.api import triage_paths


def _found_text(tmp_path, text):
    p = tmp_path / "job.log"
    p.write_text(text)
    return [f for f in triage_paths([str(p)]).sorted_findings() if f.severity in ("error", "warning")]


_PAD = "".join(f"{{'loss': {1 + i % 7 / 10:.2f}, 'learning_rate': 5e-05, 'epoch': {i / 1000:.3f}}}\n" for i in range(1500))

# --- (c) Horovod's per-rank stall rows past the head -------------------------------------------------------------
_HVD_WARN = ("[1,0]<stderr>:[2024-01-02 10:00:00.000000: W /tmp/horovod/common/stall_inspector.cc:107] One or more "
             "tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting for "
             "remainder of ranks for more than 60 seconds. This may indicate that different ranks are trying to submit "
             "different tensors or that only subset of ranks is submitting tensors, which will cause deadlock. \n")
_HVD_ROWS = ("[1,0]<stderr>:Missing ranks:\n"
             "[1,0]<stderr>:3: [allreduce.model.fc.weight, allreduce.model.fc.bias]\n")


def test_horovod_stall_rows_far_past_the_head_name_the_rank(tmp_path):
    """The rows under 'Missing ranks:' carry no prefilter keyword; the header opens a window (reader.WINDOW_OPENERS,
    one row per missing rank: stall_inspector.cc @0f37436), so ~3 MiB into a log they name rank 3 as at its top."""
    deep = _found_text(tmp_path, _PAD * 40 + _HVD_WARN + _HVD_ROWS + _PAD)
    assert deep and deep[0].id == "LOG001" and "rank 3 never submitted" in deep[0].title, [(x.id, x.title) for x in deep]


def test_rank_like_rows_far_past_the_head_without_the_header_name_no_rank(tmp_path):
    """The quiet side: the same stall warning with rank-like rows but no 'Missing ranks:' header above them."""
    deep = _found_text(tmp_path, _PAD * 40 + _HVD_WARN + "[1,0]<stderr>:3: [allreduce.model.fc.weight]\n" + _PAD)
    assert deep and deep[0].id == "LOG001" and "rank 3" not in deep[0].title, [(x.id, x.title) for x in deep]


# --- (b) the ends healthy jobs print, by the source that prints them ---------------------------------------------
_START = ("06-16 21:29:11 [TRAIN] [Rank 0] [INFO] [train.py:100] start training on 1 rank(s)\n")
_ENDS = {
    "prime-rl src/zeroband/train.py @f77e0fe": "06-16 21:29:32 [TRAIN] [Rank 0] [INFO] [train.py:535] Training finished, exiting ...\n",
    "prime-rl src/prime_rl/trainer/rl/train.py @d5106a4": "12:01:33 SUCCESS RL trainer finished!\n",
    "axolotl (older src/axolotl/train.py)": "[2024-05-01 10:00:00,000] [INFO] [axolotl.train.train:190] [PID:123] [RANK:0] "
                                              "Training Completed!!! Saving pre-trained model to ./lora-out\n",
    "axolotl src/axolotl/train.py @002a637": "[axolotl.train.save_trained_model:228] Training completed! Saving trained model to ./out.\n",
    "Megatron megatron/training/training.py @86df799": "[after training is done] datetime: 2024-03-01 10:12:44 \n",
}


def test_each_sources_end_line_is_an_end(tmp_path):
    """Without an end line this excerpt gets LOG029 ('stops after the set-up'); with each source's end line, at the
    top or ~3 MiB into the log, it is a finished job and LOG029 stays quiet."""
    bare = _found_text(tmp_path, _START)
    assert "LOG029" in {x.id for x in bare}, [(x.id, x.title) for x in bare]
    for src, end in _ENDS.items():
        for text in (_START + end, _START + _PAD * 40 + end):
            f = _found_text(tmp_path, text)
            assert not f, (src, [(x.id, x.title) for x in f])


def test_words_like_an_end_that_are_not_one_stay_unread_as_ends(tmp_path):
    """The quiet side: 'Training finished iteration 3' (Ray Train's per-report line) and 'after training is done, we
    save' (prose) are no end: the excerpt still gets LOG029."""
    for line in ("Training finished iteration 3 at 2024-01-01 10:00:00. Total running time: 12s\n",
                 "# After training is done, we save the final weights.\n"):
        f = _found_text(tmp_path, _START + line)
        assert "LOG029" in {x.id for x in f}, (line, [(x.id, x.title) for x in f])


# --- (a) SIGBUS inside NCCL, read by the NCCL version (src/misc/shmutils.cc by tag) -------------------------------
def _ucx_sigbus(version: str) -> str:
    return (f"node1:4242:4242 [0] NCCL INFO NCCL version {version}+cuda11.8\n"
            "node1:4242:4300 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct\n"
            "[node1:4242:0:4300] Caught signal 7 (Bus error: nonexistent physical address)\n"
            "==== backtrace (tid:   4300) ====\n"
            " 0 0x00000000000143c0 __funlockfile()  ???:0\n"
            " 1 0x000000000006c9f1 ncclShmOpen()  ???:0\n"
            " 2 0x000000000008170d ncclGroupEnd()  ???:0\n"
            "=================================\n")


def test_sigbus_in_ncclshmopen_on_a_sparse_shm_nccl_is_dev_shm(tmp_path):
    """NCCL 2.12.7-2.18.6 ftruncate and zero the /dev/shm file: a SIGBUS with ncclShmOpen on the stack is /dev/shm."""
    f = _found_text(tmp_path, _ucx_sigbus("2.14.3"))
    assert f and f[0].id == "LOG009" and "/dev/shm is too small" in f[0].title and "ncclShmOpen" in f[0].title, [
        (x.id, x.title) for x in f]


def test_sigbus_in_nccl_on_a_fallocate_nccl_is_not_called_dev_shm(tmp_path):
    """NCCL 2.19.1+ (and <= 2.11) allocate the file first and WARN when /dev/shm is full: a SIGBUS there is not
    blamed on /dev/shm, and not on a DataLoader worker."""
    f = _found_text(tmp_path, _ucx_sigbus("2.21.5"))
    assert f and f[0].id == "LOG009" and "is not the cause" in f[0].title and "DataLoader" not in f[0].title, [
        (x.id, x.title) for x in f]


def test_sigbus_frames_past_the_head_are_read(tmp_path):
    """The backtrace under UCX's line carries no keyword: 'Caught signal 7 (' opens a window (reader.WINDOW_OPENERS)."""
    f = _found_text(tmp_path, _PAD * 40 + _ucx_sigbus("2.14.3") + _PAD)
    assert f and f[0].id == "LOG009" and "ncclShmOpen" in f[0].title, [(x.id, x.title) for x in f]


def test_dataloader_bus_error_beside_nccl_lines_stays_the_dataloaders(tmp_path):
    """The quiet side: torch's DataLoader bus-error message in a job that also printed NCCL lines is LOG010's."""
    f = _found_text(tmp_path, "node1:4242:4242 [0] NCCL INFO NCCL version 2.14.3+cuda11.8\n"
                    "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared "
                    "memory (shm).\n")
    assert f and f[0].id == "LOG010" and "DataLoader" in f[0].title, [(x.id, x.title) for x in f]


def test_torchrun_sigbus_exit_with_nccl_frames_names_the_rank(tmp_path):
    """torchrun's 'failed (exitcode: -7)' under a cut backtrace through ncclGroupEnd (Megatron-LM#516's shape)."""
    f = _found_text(tmp_path, " 1 0x000000000008170d ncclGroupEnd()  ???:0\n"
                    " 2 0x00000000000742f0 ncclGroupEnd()  ???:0\n"
                    "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -7) local_rank: 0 (pid: 5275) "
                    "of binary: /usr/bin/python\n")
    assert f and f[0].id == "LOG009" and "rank:0" in f[0].subjects and "ncclGroupEnd" in f[0].title, [
        (x.id, x.title, x.subjects) for x in f]


def test_sigbus_exit_without_nccl_frames_stays_a_plain_death(tmp_path):
    """The quiet side: the same exit with no NCCL frame anywhere is no NCCL finding: the bus-error class (LOG010, round
    21: an exit on SIGBUS reads like the shell's "Bus error"), still naming SIGBUS."""
    f = _found_text(tmp_path, "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -7) local_rank: 0 "
                    "(pid: 5275) of binary: /usr/bin/python\n")
    assert f and f[0].id == "LOG010" and "SIGBUS" in f[0].title, [(x.id, x.title) for x in f]
    assert not any(x.id == "LOG009" for x in f), [(x.id, x.title) for x in f]


# --- (d) failure messages of c10d's C++ the catalogue lacked (tools/catalogue_coverage.py) -----------------------
def test_tcpstore_protocol_replies_are_a_store_that_is_not_this_jobs(tmp_path):
    """TCPStore.cpp's other protocol checks (wait_canceled, ready/not_ready, ping) read as stop_waiting does."""
    for line in ("RuntimeError: wait_canceled response is expected\n",
                 "torch.distributed.DistStoreError: ready or not_ready response expected\n",
                 "torch.distributed.DistNetworkError: Ping failed, invalid value returned from server. Expected: 2812, "
                 "Got: 1195725856\n"):
        f = _found_text(tmp_path, line)
        assert f and f[0].id == "LOG008" and "not the TCPStore protocol's" in f[0].title, (line, [(x.id, x.title) for x in f])


def test_store_socket_wait_timeout_warning_is_a_store_timeout(tmp_path):
    """socket.cpp's 'waitForInput: socket N timed out after Mms' is the store client's timeout (LOG008)."""
    f = _found_text(tmp_path, "[W1206 10:00:00.123456 socket.cpp:663] [c10d] waitForInput: socket 12 timed out after "
                    "300000ms\n")
    assert f and f[0].id == "LOG008", [(x.id, x.title) for x in f]


def test_store_recv_0_bytes_is_a_consequence_of_the_first_failure(tmp_path):
    """Utils.hpp recvBytes' 'Failed to recv, got 0 bytes' is the store's host gone: with rank 0's own CUDA OOM in the
    log, the OOM is the cause named, not rank 1's store error."""
    f = _found_text(tmp_path, "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 "
                    "has a total capacity of 79.15 GiB of which 1.10 GiB is free.\n"
                    "[rank1]: torch.distributed.DistNetworkError: Failed to recv, got 0 bytes. Connection was likely "
                    "closed. Did the remote server shutdown or crash?\n")
    assert f and f[0].id == "LOG005" and "rank:0" in f[0].subjects, [(x.id, x.title, x.subjects) for x in f]


def test_rank_words_near_the_store_texts_are_not_matched(tmp_path):
    """The quiet side: prose with the same words is no catalogue match."""
    from ddpdoctor.facts import messages
    for line in ("we expected the ready response from the server", "socket 12 waited for input",
                 "got 0 bytes from the cache, retrying"):
        assert not messages.match_all(line), line


# --- batch 57: sglang's scheduler prefix ("[<asctime> TP<n>]") -----------------------------------------------------
def test_sglang_tp_prefix_is_the_rank_and_keeps_its_time():
    """sglang's run_scheduler_process logs '[<asctime> TP<n>] ...'; with TP alone ModelRunner's world rank is the tp
    rank (rank = tp_size * pp_rank + tp_rank): the line is rank 2's, at the prefix's time."""
    from ddpdoctor.triage.lines import parse
    ln = parse(0, 1, 0, b"[2025-02-26 12:01:56 TP2] Scheduler hit an exception: Traceback (most recent call last):\n")
    assert ln.rank == 2 and ln.ts is not None and ln.text.startswith("Scheduler hit"), (ln.rank, ln.ts, ln.text)


def test_sglang_dp_or_pp_prefix_names_no_rank():
    """The quiet side: 'DP1 TP1' or 'PP1 TP0' is not the world rank (several groups share a tp rank): no rank."""
    from ddpdoctor.triage.lines import parse
    for raw in (b"[2025-04-12 09:01:07 DP1 TP1] Scheduler hit an exception: x\n",
                b"[2025-04-12 09:01:07 PP1 TP0] Scheduler hit an exception: x\n",
                b"[2025-04-12 09:01:07] Received sigquit from a child process. It usually means the child failed.\n"):
        ln = parse(0, 1, 0, raw)
        assert ln.rank is None and ln.ts is not None, (raw, ln.rank, ln.ts)


def test_sglang_scheduler_exception_names_its_tp_rank(tmp_path):
    f = _found_text(tmp_path, "[2025-02-26 12:01:56 TP3] sglang is using nccl==2.21.5\n"
                    "[2025-02-26 12:01:56 TP2] Scheduler hit an exception: Traceback (most recent call last):\n"
                    '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 1816, in run_scheduler_process\n'
                    "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, dp_rank)\n")
    assert f and "rank:2" in f[0].subjects, [(x.id, x.title, x.subjects) for x in f]


# --- batch 58 classes -------------------------------------------------------------------------------------------
def test_blocking_wait_timeout_without_watchdog_word_is_a_collective_timeout(tmp_path):
    """torch 1.8-2.0 raised '[Rank 1] Caught collective operation timeout: WorkNCCL(...)' from the waiting thread
    (NCCL_BLOCKING_WAIT): the same timeout as the watchdog's, a consequence; LOG001, not a rank's own failure."""
    f = _found_text(tmp_path, "RuntimeError: [Rank 1] Caught collective operation timeout: WorkNCCL(SeqNum=1, "
                    "OpType=BROADCAST, TensorShape=[], Timeout(ms)=10800000) ran for 10800031 milliseconds before "
                    "timing out.\n")
    assert f and f[0].id == "LOG001", [(x.id, x.title) for x in f]


def test_caught_words_in_other_text_are_no_timeout(tmp_path):
    """The quiet side: 'caught' and 'timeout' in a user's print are no collective timeout."""
    f = _found_text(tmp_path, "Caught exception in data loader, retrying with a longer timeout\n")
    assert "LOG001" not in {x.id for x in f}, [(x.id, x.title) for x in f]


def test_record_wrapper_tuple_names_the_first_failed_global_rank(tmp_path):
    """torchrun's record() logs a tuple, "('local_rank %s FAILED with no error file. ...', 3)": the number is the
    first failure's GLOBAL rank (get_first_failure's key), so rank 3 failed first."""
    f = _found_text(tmp_path, "I1107 01:20:28.501000 7974 torch/distributed/elastic/multiprocessing/errors/__init__.py:"
                    "368] ('local_rank %s FAILED with no error file. Decorate your entrypoint fn with @record for "
                    "traceback info. See: https://pytorch.org/docs/stable/elastic/errors.html', 3)\n")
    assert f and f[0].id == "LOG004" and "rank:3" in f[0].subjects, [(x.id, x.title, x.subjects) for x in f]


def test_torchrun_table_index_is_not_a_rank(tmp_path):
    """The quiet side (ChildFailedError.format_msg: '[${idx}]:' enumerates the failures): a table cut after '[2]:'
    names no rank 2."""
    f = _found_text(tmp_path, "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
                    "============================================================\ntrain.py FAILED\n"
                    "------------------------------------------------------------\nFailures:\n  <NO_OTHER_FAILURES>\n"
                    "------------------------------------------------------------\n"
                    "Root Cause (first observed failure):\n[2]:\n  time\n")
    assert not any("rank:2" in x.subjects for x in f), [(x.id, x.title, x.subjects) for x in f]


def test_ray_actor_whose_owner_died_is_a_consequence(tmp_path):
    """Ray's GenOwnerDiedCause text: the actor died because its owner did (here with the owner's node): LOG022's
    consequence, not an unread healthy log."""
    f = _found_text(tmp_path, "ray.exceptions.RayActorError: The actor is dead because its owner has died. Owner Id: "
                    "05000000ffffffffffffffffffffffffffffffffffffffffffffffff Owner Ip address: 10.208.0.212 Owner worker "
                    "exit type: SYSTEM_ERROR Worker exit detail: Owner's node has crashed.\n")
    assert f and f[0].id == "LOG022", [(x.id, x.title) for x in f]


# --- batch 59 classes -------------------------------------------------------------------------------------------
def test_spawn_report_cut_after_terminated_with_names_the_process(tmp_path):
    """ProcessRaisedException's '-- Process N terminated with the following error:' cut after 'terminated with': by
    spawn.py's _wrap (traceback queued, then sys.exit(1)) process N failed with exit code 1."""
    f = _found_text(tmp_path, "torch.multiprocessing.spawn.ProcessRaisedException: \n\n-- Process 0 terminated with\n")
    assert f and f[0].id == "LOG004" and "rank:0" in f[0].subjects, [(x.id, x.title, x.subjects) for x in f]


def test_spawn_report_with_its_error_still_names_the_error(tmp_path):
    """The quiet side: the whole report keeps naming the process's own exception, not a bare exit code."""
    f = _found_text(tmp_path, "-- Process 1 terminated with the following error:\nTraceback (most recent call last):\n"
                    '  File "train.py", line 9, in main\n    x = cfg["lr"]\nKeyError: \'lr\'\n')
    assert f and f[0].id == "LOG004" and "KeyError" in f[0].title, [(x.id, x.title) for x in f]


def test_collector_stamp_before_nccl_prefix_is_read_off():
    """'2026-09-17 13:40:03 host:pid:tid [dev] NCCL INFO ...': the stamp a job console adds is read off (kept as the
    line's time), NCCL's own prefix is parsed."""
    from ddpdoctor.triage.lines import parse
    ln = parse(0, 1, 0, b"2026-09-17 13:40:03 worker-0:229:558816 [3] NCCL INFO misc/socket.cc:868 -> 3\n")
    assert ln.nccl == "INFO" and ln.host == "worker-0" and ln.text.startswith("misc/socket.cc") and ln.ts is not None
    ln = parse(0, 1, 0, b"2024-01-01T10:00:00.123456789Z node-a:11:12 [0] NCCL WARN Net : Connection closed by remote peer\n")
    assert ln.nccl == "WARN" and ln.host == "node-a", (ln.nccl, ln.host, ln.text)


def test_a_message_that_starts_with_its_own_time_keeps_it():
    """The quiet side: '2020-11-11 18:27:52,420 - mmdet - INFO - Epoch ...' is not an NCCL line; its text is whole."""
    from ddpdoctor.triage.lines import parse
    ln = parse(0, 1, 0, b"2020-11-11 18:27:52,420 - mmdet - INFO - Epoch [1][2150/29317]\tlr: 2.000e-02\n")
    assert ln.nccl is None and ln.text.startswith("2020-11-11"), (ln.nccl, ln.text)


def test_stamped_nccl_error_trace_is_an_nccl_failure(tmp_path):
    trace = "".join(f"2026-09-17 13:40:03 w0:228:558817 [2] NCCL INFO misc/socket.cc:{n} -> 3\n" for n in (64, 81, 868))
    f = _found_text(tmp_path, trace)
    assert f and f[0].id == "LOG009", [(x.id, x.title) for x in f]


def test_vllm_cumem_allocator_out_of_memory_is_a_cuda_oom(tmp_path):
    """vLLM csrc/cumem_allocator.cpp CUDA_CHECK: 'CUDA Error: %s at %s:%d' with cuGetErrorString's 'out of memory'."""
    f = _found_text(tmp_path, "RuntimeError: CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:139\n")
    assert f and f[0].id == "LOG005", [(x.id, x.title) for x in f]


def test_vllm_cumem_allocator_other_error_is_not_an_oom():
    from ddpdoctor.facts import messages
    found = {m.cls for m in messages.match_all("RuntimeError: CUDA Error: invalid argument at /workspace/csrc/"
                                                "cumem_allocator.cpp:62")}
    assert "cuda_oom" not in found, found


# --- refused connections: the peer's host answered (nothing listened there), not a wrong interface -------------------
_REFUSED = ("node-b:941227:943077 [0] NCCL INFO Call to connect returned Connection refused, retrying\n"
            "node-b:941227:943077 [0] NCCL WARN Connect to 10.38.10.112<21724> failed : Connection refused\n"
            "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1269, unhandled system "
            "error, NCCL version 2.14.3\n")


def test_refused_connection_alone_is_a_peer_not_listening(tmp_path):
    f = _found_text(tmp_path, _REFUSED)
    assert f[0].id == "LOG009" and "not listening" in f[0].title and "interface" not in f[0].title, f[0].title


def test_refused_connection_on_a_docker_interface_stays_the_wrong_interface(tmp_path):
    f = _found_text(tmp_path, "node-b:941227:941227 [0] NCCL INFO NET/Socket : Using [0]docker0:172.17.0.1<0>\n"
                    + _REFUSED)
    assert f[0].id == "LOG009" and "wrong network interface" in f[0].title and "docker0" in f[0].detail + f[0].title, \
        f[0].title


# --- an end line whose stream then starts a new set-up and stops there is no end --------------------------------------
_TRAINER_END = ("{'loss': 1.21, 'learning_rate': 5e-06, 'epoch': 2.98}\n\n\nTraining completed. Do not forget to share "
                "your model on huggingface.co/models =)\n\n\nLoading best model from out/checkpoint-1200 (score: 1.29).\n")
_DS_INIT = ("[2023-03-30 20:51:23,074] [INFO] [logging.py:68:log_dist] [Rank 0] DeepSpeed info: version=0.8.0, "
            "git-hash=eecd6a2, git-branch=HEAD\n")


def test_trainer_end_then_a_new_deepspeed_set_up_that_stops_is_not_health(tmp_path):
    f = _found_text(tmp_path, _TRAINER_END + _DS_INIT)
    assert f and f[0].id == "LOG029" and "after its end line" in f[0].title, [(x.id, x.title) for x in f]


def test_trainer_end_then_metrics_or_nccl_teardown_stays_health(tmp_path):
    assert _found_text(tmp_path, _TRAINER_END + _DS_INIT + "***** train metrics *****\n  epoch = 3.0\n"
                       "  train_loss = 1.25\n") == []
    assert _found_text(tmp_path, _TRAINER_END + "node-a:11:11 [0] NCCL INFO comm 0x5581 rank 0 nranks 2 cudaDev 0 "
                       "busId 1000 - Destroy COMPLETE\n") == []
