"""Round-10 wave-2 classes of issue 24 (triage, 2026-12-06 session 3, batches 69-71): trigger and quiet cases whose
assertions can fail. Logs are written from the formats the sources print (no logs copied); pure in-process tests."""
from __future__ import annotations

from ddpdoctor.triage.api import triage_paths


def _found_text(tmp_path, text):
    p = tmp_path / "job.log"
    p.write_text(text, encoding="utf-8")
    return [f for f in triage_paths([str(p)]).sorted_findings() if f.severity in ("error", "warning")]


def _ids(f):
    return [(x.id, x.title) for x in f]


def _no_failure(f):
    return not [x for x in f if x.severity == "error" or x.title.startswith("unexplained failure")]


# --- batch 69: a log record whose level field says WARNING, in logging's usual layouts, is no failure line ----------
def test_warning_level_records_with_error_words_are_no_failure(tmp_path):
    for text in ("[rank0]:[titan] 2026-05-18 16:07:12,517 - root - WARNING - Error running lspci: [Errno 2] No such "
                 "file or directory: 'lspci', fallback to use device_name\n"
                 "[rank0]:[titan] 2026-05-18 16:07:12,566 - root - INFO - Applied FSDP to the model\n",
                 "2024-03-01 10:00:01,200 | WARNING | loader failed to read shard 3, skipping it\n"
                 "2024-03-01 10:00:02,000 | INFO | building the model\n",
                 "2024-03-01 10:00:01,200 WARNING Exception in the metrics thread, ignored\n"
                 "2024-03-01 10:00:02,000 INFO building the model\n"):
        f = _found_text(tmp_path, text)
        assert _no_failure(f), (text, _ids(f))


def test_error_level_records_and_exceptions_quoting_warning_stay_failures(tmp_path):
    """The quiet side: the same layouts at ERROR level, and an exception whose message holds ' - WARNING - ' (no time
    before it: not a level field), are failures."""
    for text in ("[rank0]:[titan] 2026-05-18 16:07:12,517 - root - ERROR - Error running the step: bad shape\n",
                 "2024-03-01 10:00:01,200 | ERROR | loader failed to read shard 3\n",
                 "RuntimeError: check - WARNING - threshold exceeded\n"):
        f = _found_text(tmp_path, text)
        assert f and not _no_failure(f), (text, _ids(f))


# --- batch 69: PMIx's gds ds12/ds21 lock-init errors (openpmix src/mca/gds/ds12/gds_ds12_lock_pthread.c @3e0ca55) -----
def test_pmix_dstore_lock_errors_before_the_job_starts_are_no_failure(tmp_path):
    text = ("srun: lua: Submitted job 12168\n"
            "[n487:400139] PMIX ERROR: ERROR in file ../../../../../../src/mca/gds/ds12/gds_ds12_lock_pthread.c at line 169\n"
            "[n488:616078] PMIX ERROR: ERROR in file ../../../../../../src/mca/gds/ds12/gds_ds12_lock_pthread.c at line 169\n"
            "Started Multi Node training managed by Slurm: ProcessID:0, NumProcess::2, DeviceId:0\n"
            "| train data pattern    | /data/train_*.bin |\n")
    f = _found_text(tmp_path, text)
    assert _no_failure(f), _ids(f)


def test_other_pmix_errors_and_a_failed_start_after_a_lock_error_stay_failures(tmp_path):
    """The quiet side: the entry covers the dstore lock code only; PMIx's client failing, and MPI_Init aborting after
    a lock error, are failures."""
    for text in ("[n1:64919] PMIX ERROR: UNREACHABLE in file client/pmix_client.c at line 228\n",
                 "[n1:4242] PMIX ERROR: ERROR in file gds_ds12_lock_pthread.c at line 169\n"
                 "*** An error occurred in MPI_Init_thread\n*** on a NULL communicator\n"
                 "*** MPI_ERRORS_ARE_FATAL (processes in this communicator will now abort,\n"):
        f = _found_text(tmp_path, text)
        assert f and not _no_failure(f), (text, _ids(f))


# --- round 10 wave 2 mining (coverage of NCCL WARN formats, torch c10d C++ and elastic, accelerate) --------------------
def test_nccl_no_algorithm_protocol_is_a_known_error(tmp_path):
    """NVIDIA/nccl src/enqueue.cc @7e51592 (v2.10.3-1): 'Error : no algorithm/protocol available' (NCCL_ALGO/PROTO)."""
    for text in ("node1:41367:41367 [1] enqueue.cc:402 NCCL WARN Error : no algorithm/protocol available\n",
                 "201: :41367:41367 [1] enqueue.cc:422 NCCL WARN Error : no algorithm/protocol available\n"):
        f = _found_text(tmp_path, text)
        assert f and f[0].id == "LOG027" and "NCCL_ALGO" in f[0].detail + str(f[0].fix), _ids(f)


def test_reducer_internal_assert_and_nvls_shared_device(tmp_path):
    f = _found_text(tmp_path, 'RuntimeError: grad.numel() == bucket_view.numel() INTERNAL ASSERT FAILED at '
                              '"/__w/pytorch/pytorch/torch/csrc/distributed/c10d/reducer.cpp":330, please report a bug '
                              'to PyTorch.\n')
    assert f and f[0].id == "LOG027", _ids(f)
    f = _found_text(tmp_path, 'node1:1234:1300 [0] transport/nvls.cc:254 NCCL WARN NCCL_NVLS_ENABLE has been set to "1" '
                              'and communicator has multiple ranks using the same NVML device.\n')
    assert f and f[0].id == "LOG006", _ids(f)


def test_accelerate_fsdp_ram_efficient_loading_needs_sync_is_config_mismatch(tmp_path):
    f = _found_text(tmp_path, "ValueError: When using `--fsdp_cpu_ram_efficient_loading` set `--fsdp_sync_module_states` "
                              "to `True`\n")
    assert f and f[0].id == "LOG024", _ids(f)


def test_mined_messages_quiet_side(tmp_path):
    """The quiet side: the same words in config dumps, prose and a script's own prints are no finding."""
    text = ("fsdp_cpu_ram_efficient_loading: true\nfsdp_sync_module_states: true\n"
            "export GLOO_SOCKET_IFNAME=eth0\nexport NCCL_ALGO=Ring\n"
            "epoch 1 step 10 loss 0.9\nepoch 1 step 20 loss 0.8\nTraining completed!\n")
    f = _found_text(tmp_path, text)
    assert not [x for x in f if x.severity == "error" or x.id in ("LOG009", "LOG024", "LOG027", "LOG028")], _ids(f)


# --- wave 2, a quiet-side class noticed while mining: torchrun's "Cuda is not available." (torch/distributed/run.py
# @cf30153 line 755) is a ValueError; a script's own print of the same words is not torchrun's message ---------------
def test_torchrun_cuda_not_available_is_its_valueerror_only(tmp_path):
    f = _found_text(tmp_path, "Traceback (most recent call last):\n  File \"torchrun\", line 8, in <module>\n"
                              "ValueError: Cuda is not available.\n")
    assert f and f[0].id == "LOG021", _ids(f)
    f = _found_text(tmp_path, "Cuda is not available. Training on the CPU.\nepoch 1 step 10 loss 0.9\n"
                              "epoch 1 step 20 loss 0.8\nTraining completed!\n")
    assert not [x for x in f if x.id == "LOG021"], _ids(f)
