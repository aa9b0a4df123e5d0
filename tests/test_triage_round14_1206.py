"""Round-14 classes of issue 24 (triage, 2026-12-06): trigger and quiet cases whose assertions can fail.
Logs are written from the formats the sources print (transformers Trainer speed_metrics, Lightning-AI/pytorch-lightning
@0a5208c callbacks/timer.py and callbacks/early_stopping.py, torch's ROCm build's 'HIP error: ' prefix); pure in-process
tests."""
from __future__ import annotations

from ddpdoctor.triage.api import triage_paths


def _found(tmp_path, text):
    p = tmp_path / "job.log"
    p.write_text(text, encoding="utf-8")
    return [f for f in triage_paths([str(p)]).sorted_findings() if f.severity in ("error", "warning")]


_HF_STEP = "{'loss': 1.2345, 'grad_norm': 3.2, 'learning_rate': 1e-05, 'epoch': 0.05}\n"
_PL_BAR = "Epoch 3: 100%|##########| 50/50 [00:10<00:00, 5.00it/s, v_num=0, train_loss=0.31]\n"


# --- end markers: the Trainer's final metrics however printed, Lightning's Timer and EarlyStopping stops --------
def test_trainer_final_metrics_printed_as_json_are_an_end(tmp_path):
    assert _found(tmp_path, _HF_STEP + '{"train_runtime": 400.1, "train_samples_per_second": 4.0, '
                  '"train_steps_per_second": 0.5, "train_loss": 1.1, "epoch": 1.0}\n') == []


def test_trainer_final_metrics_with_quoted_values_are_an_end(tmp_path):
    assert _found(tmp_path, _HF_STEP + "{'train_runtime': '0:06:40.12', 'train_samples_per_second': '4.0', "
                  "'train_loss': 1.1, 'epoch': 1.0}\n") == []


def test_trainer_periodic_logs_alone_are_no_end(tmp_path):
    found = _found(tmp_path, _HF_STEP + '{"loss": 1.1, "train_tokens_per_second": 4000.0, "epoch": 0.5}\n')
    assert [f.id for f in found] == ["LOG029"]


def test_lightning_time_limit_is_an_end(tmp_path):
    assert _found(tmp_path, _PL_BAR + "Time limit reached. Elapsed time is 0:10:00. Signaling Trainer to stop.\n") == []


def test_lightning_early_stopping_is_an_end(tmp_path):
    assert _found(tmp_path, _PL_BAR + "Monitored metric val_loss did not improve in the last 3 records. Best score: "
                  "0.152. Signaling Trainer to stop.\n") == []


def test_lightning_non_finite_metric_stop_is_no_end(tmp_path):
    found = _found(tmp_path, _PL_BAR + "Monitored metric val_loss = nan is not finite. Previous best value was 0.152. "
                   "Signaling Trainer to stop.\n")
    assert found and found[0].id == "LOG029"


# --- LOG021's title names the runtime the message came from ----------------------------------------------------
_HIP_TAIL = ("HIP kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be "
             "incorrect.\nFor debugging consider passing AMD_SERIALIZE_KERNEL=3\n")


def test_hip_error_prefix_is_gpu_setup_titled_hip(tmp_path):
    f = _found(tmp_path, "Traceback (most recent call last):\n  File \"train.py\", line 10, in <module>\n"
               "    x = torch.ones(3).cuda()\nRuntimeError: HIP error: invalid device function\n" + _HIP_TAIL)[0]
    assert f.id == "LOG021" and "HIP, ROCm" in f.title and "invalid device function" in f.title


def test_hip_runtime_text_title_says_hip(tmp_path):
    f = _found(tmp_path, '"hipErrorNoBinaryForGpu: Unable to find code object for all current devices!"\n')[0]
    assert f.id == "LOG021" and "HIP, ROCm" in f.title and "CUDA" not in f.title


def test_cuda_error_title_does_not_say_hip(tmp_path):
    f = _found(tmp_path, "Traceback (most recent call last):\n  File \"train.py\", line 10, in <module>\n"
               "    x = torch.ones(3).cuda()\n"
               "RuntimeError: CUDA error: no kernel image is available for execution on the device\n")[0]
    assert f.id == "LOG021" and "HIP" not in f.title


# --- a multi-node launch started on one node: the rendezvous wait (torchrun's banner, launch configs) ----------
_LAUNCH = "$ torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint 10.0.0.1:29500 train.py\n"
_TBANNER = ("W1206 14:01:00.123000 12345 torch/distributed/run.py:793] *****************************************\n"
            "W1206 14:01:00.123000 12345 torch/distributed/run.py:793] Setting OMP_NUM_THREADS environment variable for "
            "each process to be 1 in default, to avoid your system being overloaded, please further tune the variable "
            "for optimal performance in your application as needed.\n")
_TERM = ("W1206 14:11:00.456000 12345 torch/distributed/elastic/agent/server/api.py:704] Received Signals.SIGTERM death "
         "signal, shutting down workers\n"
         "torch.distributed.elastic.multiprocessing.api.SignalException: Process 12345 got signal: 15\n")


def test_two_node_launch_stopping_after_the_banner_names_the_rendezvous_wait_as_a_guess(tmp_path):
    f = _found(tmp_path, _LAUNCH + _TBANNER)[0]
    assert f.id == "LOG029" and "rendezvous" in f.title and "2-node" in f.title and "(a guess" in f.title


def test_two_node_launch_waiting_in_the_rendezvous_line_is_not_a_guess(tmp_path):
    f = _found(tmp_path, _LAUNCH + _TBANNER + "I1206 14:01:00.200000 12345 torch/distributed/elastic/agent/server/api.py:"
               "680] [default] Rendezvous'ing worker group\n")[0]
    assert f.id == "LOG029" and "rendezvous" in f.title and "guess" not in f.title


def test_two_node_launch_stopped_from_outside_names_the_rendezvous_wait(tmp_path):
    f = _found(tmp_path, _LAUNCH + _TBANNER + _TERM)[0]
    assert f.id == "LOG026" and "waiting in the rendezvous" in f.title and "rdzv-endpoint" in f.fix


def test_two_node_launch_whose_workers_started_is_no_rendezvous_wait(tmp_path):
    found = _found(tmp_path, _LAUNCH + _TBANNER + "[rank0]: NCCL version 2.21.5+cuda12.4\n"
                   "[rank0]: epoch 0 step 10 loss 2.1\n")
    assert found and not any("rendezvous" in f.title for f in found)


def test_one_node_launch_stopping_after_the_banner_is_no_rendezvous_wait(tmp_path):
    found = _found(tmp_path, _LAUNCH.replace("--nnodes 2", "--nnodes 1") + _TBANNER)
    assert found and found[0].id == "LOG029" and "rendezvous" not in found[0].title


# --- a hang in a log without times: progress, then a stop from outside ------------------------------------------
_UNTIMED = "Epoch 1 step 20 loss 2.1\nEpoch 1 step 30 loss 2.0\n"


def test_stop_after_untimed_progress_names_a_likely_hang_without_times(tmp_path):
    f = _found(tmp_path, _UNTIMED + "torch.distributed.elastic.multiprocessing.api.SignalException: Process 12345 got "
               "signal: 15\n")[0]
    assert f.id == "LOG026" and "a hang is likely" in f.title and "no times in the log" in f.title
    assert "py-spy dump" in f.fix


def test_stop_whose_own_lines_carry_the_only_times_names_a_likely_hang(tmp_path):
    """The launcher stamps its stop lines, the job's output has no time (an accelerate run's tqdm bar): no line before
    the stop has a time, as when the log has none."""
    f = _found(tmp_path, _UNTIMED + " 35%|###5      | 28/80 [00:19<00:05,  9.66it/s]W1206 17:32:10.498000 2151 "
               "torch/distributed/elastic/agent/server/api.py:753] Received 15 death signal, shutting down workers\n"
               "W1206 17:32:10.499000 2151 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 2322 "
               "closing signal SIGTERM\n")[0]
    assert f.id == "LOG026" and "a hang is likely" in f.title and "no times in the log" in f.title


def test_stop_after_stamped_progress_up_to_it_is_no_hang_claim(tmp_path):
    """Quiet: stamped progress lines up to the stop (a time before the stop exists and shows no silence)."""
    f = _found(tmp_path, "W1206 17:32:05.000000 2151 train.py:1] step 29 loss 2.0\n"
               "W1206 17:32:09.000000 2151 train.py:1] step 30 loss 2.0\n"
               "W1206 17:32:10.498000 2151 torch/distributed/elastic/agent/server/api.py:753] Received 15 death "
               "signal, shutting down workers\n")[0]
    assert f.id == "LOG026" and "hang is likely" not in f.title


def test_ctrl_c_after_untimed_progress_is_no_hang_claim(tmp_path):
    f = _found(tmp_path, _UNTIMED + "torch.distributed.elastic.multiprocessing.api.SignalException: Process 12345 got "
               "signal: 2\n")[0]
    assert f.id == "LOG026" and "hang is likely" not in f.title


# --- batch 86's classes: ROCm's words for CUDA's messages; Open MPI's signal backtrace without its header ----------
def test_hip_out_of_memory_alone_is_an_oom(tmp_path):
    f = _found(tmp_path, "HIP out of memory. Tried to allocate 432.00 MiB. GPU 0 has a total capacity of 15.92 GiB of "
               "which 7.12 GiB is free.\n")[0]
    assert f.id == "LOG005" and "HIP out of memory" in f.title


def test_cuda_out_of_memory_title_keeps_cuda(tmp_path):
    f = _found(tmp_path, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
               "capacity of 79.14 GiB of which 1.10 GiB is free.\n")[0]
    assert f.id == "LOG005" and "HIP" not in f.title


def test_device_error_message_alone_is_a_failure_line(tmp_path):
    found = _found(tmp_path, "VAEEncode\nHIP error: Invalid device function\n")
    assert found and found[0].id == "LOG028" and found[0].title.startswith("unexplained failure")


def test_device_error_message_then_training_and_an_end_is_survived(tmp_path):
    found = _found(tmp_path, "CUDA error: Invalid device function (retrying on the CPU path)\n" + _HF_STEP +
                   "{'train_runtime': 400.1, 'train_samples_per_second': 4.0, 'train_loss': 1.1, 'epoch': 1.0}\n")
    assert not any(f.severity == "error" or f.title.startswith("unexplained failure") for f in found)


_OPAL = ("/lib/x86_64-linux-gnu/libc.so.6(+0x45330)[0x78edd2a45330]\n"
         "[ip-10-0-0-1:10610] [ 1] /lib/x86_64-linux-gnu/libpmix.so.2(+0x13a8aa)[0x78edcfd3a8aa]\n"
         "[ip-10-0-0-1:10610] [ 2] /lib/x86_64-linux-gnu/libpmix.so.2(pmix_gds_base_store_modex+0x8f3)[0x78edcfd36013]\n")


def test_signal_backtrace_frames_without_their_header_are_a_failure(tmp_path):
    found = _found(tmp_path, _OPAL)
    assert found and found[0].id == "LOG028" and found[0].title.startswith("unexplained failure")


def test_host_pid_prefixed_info_lines_are_no_failure(tmp_path):
    found = _found(tmp_path, "[ip-10-0-0-1:10610] [ 1] rank 1 of 2 ready on ip-10-0-0-1\n"
                   "[ip-10-0-0-1:10610] [ 2] rank 2 of 2 ready on ip-10-0-0-1\n")
    assert not any(f.title.startswith("unexplained failure") or f.severity == "error" for f in found)


# --- batch 88's class: a traceback re-logged line by line under a wrapper's INFO level -----------------------------
_RELOGGED = ("[2024-09-09 19:22:16] [INFO] Traceback (most recent call last):\n"
             "[2024-09-09 19:22:16] [INFO] File \"runpy.py\", line 196, in _run_module_as_main\n"
             "[2024-09-09 19:22:16] [INFO] File \"accelerate/commands/launch.py\", line 734, in multi_gpu_launcher\n")


def test_traceback_relogged_at_info_level_is_a_failure(tmp_path):
    found = _found(tmp_path, _RELOGGED)
    assert found and found[0].id == "LOG028" and found[0].title.startswith("unexplained failure")


def test_traceback_relogged_at_info_level_then_training_and_an_end_is_survived(tmp_path):
    found = _found(tmp_path, _RELOGGED + _HF_STEP + "{'train_runtime': 400.1, 'train_samples_per_second': 4.0, "
                   "'train_loss': 1.1, 'epoch': 1.0}\n")
    assert not any(f.severity == "error" or f.title.startswith("unexplained failure") for f in found)


def test_info_line_naming_a_traceback_file_is_no_failure(tmp_path):
    found = _found(tmp_path, "[2024-09-09 19:22:16] [INFO] Traceback (most recent call last): see tb.txt for the "
                   "profiler's sample\n" + _HF_STEP)
    assert not any(f.title.startswith("unexplained failure") for f in found)


# --- noticed in batch 88: a device type torch has no collective backend for (mps) ----------------------------------
def test_accelerator_without_a_backend_is_named_not_cuda(tmp_path):
    f = _found(tmp_path, "E   ValueError: We detected accelerator mps on your machine. But we don't know which "
               "communication backend to use for this accelerator. Please specify the `backend` argument in the "
               "`init_process_group` call.\n")[0]
    assert f.id == "LOG021" and "accelerator mps" in f.title and "CUDA" not in f.title and "gloo" in f.fix


def test_backend_not_built_keeps_its_own_title(tmp_path):
    f = _found(tmp_path, "RuntimeError: Distributed package doesn't have NCCL built in\n")[0]
    assert f.id == "LOG021" and "NCCL backend" in f.title


# --- wave 2 (batches 89-90): a full disk named; the libuv store's EADDRINUSE port read ---------------------------
_SAVE_TB = ("Traceback (most recent call last):\n  File \"train.py\", line 250, in <module>\n"
            "    torch.save(model.state_dict(), 'ckpt/best.pt')\n")


def test_enospc_on_save_is_named_a_full_disk(tmp_path):
    f = _found(tmp_path, _SAVE_TB + "OSError: [Errno 28] No space left on device\n")[0]
    assert f.id == "LOG027" and "full" in f.detail and "df -h" in f.fix


def test_quota_exceeded_is_named_a_full_disk(tmp_path):
    f = _found(tmp_path, _SAVE_TB + "OSError: [Errno 122] Disk quota exceeded: 'ckpt/best.pt'\n")[0]
    assert f.id == "LOG027" and "quota" in f.detail


def test_other_oserror_on_save_is_not_a_full_disk(tmp_path):
    f = _found(tmp_path, _SAVE_TB + "PermissionError: [Errno 13] Permission denied: 'ckpt/best.pt'\n")[0]
    assert f.id == "LOG004" and "df -h" not in (f.fix or "")


def test_nccl_shm_no_space_stays_nccl(tmp_path):
    found = _found(tmp_path, "node-a:48213:48290 [3] NCCL WARN Error: failed to extend /dev/shm/nccl-Xa81Qz to 9637892 "
                   "bytes, error: No space left on device (28)\n")
    assert found and found[0].id != "LOG027"


def test_libuv_store_eaddrinuse_names_its_port(tmp_path):
    f = _found(tmp_path, "torch.distributed.DistNetworkError: The server socket has failed to listen on any local "
               "network address. port: 29511, useIpv6: false, code: -98, name: EADDRINUSE, message: address already "
               "in use\n")[0]
    assert f.id == "LOG007" and "29511" in f.title


def test_socket_bind_port_still_read(tmp_path):
    f = _found(tmp_path, "[W socket.cpp:436] [c10d] The server socket has failed to bind to [::]:29533 (errno: 98 - "
               "Address already in use).\n")[0]
    assert f.id == "LOG007" and "29533" in f.title


# --- batch 91: a training script's own stop on a non-finite loss ------------------------------------------------
_D2_STEP = ("[08/21 15:48:06 d2.utils.events]:  eta: 2:36:14  iter: 19  total_loss: 20.71  loss_cls: 18.63  time: 0.0750"
            "  data_time: 0.0180  lr: 0.00039962  max_mem: 411M\n")


def test_detr_style_nan_stop_is_a_named_failure(tmp_path):
    f = _found(tmp_path, _D2_STEP + "Loss is nan, stopping training\n{'loss_ce': tensor(nan, device='cuda:0')}\n")[0]
    assert f.severity == "error" and f.id == "LOG027" and "NaN" in f.detail and "learning rate" in f.fix


def test_yolo_nan_stop_at_warning_level_is_a_failure(tmp_path):
    f = _found(tmp_path, "  0%|          | 0/29316 [00:00<?, ?it/s]WARNING: non-finite loss, ending training  "
               "tensor([nan, 0.03, 0.01, nan], device='cuda:0')\n")[0]
    assert f.severity == "error" and f.id == "LOG027"


def test_nan_grad_norm_while_training_goes_on_is_no_failure(tmp_path):
    found = _found(tmp_path, "{'loss': 0.2051, 'grad_norm': nan, 'learning_rate': 9.77e-06, 'epoch': 0.53}\n" * 3)
    assert not any(f.severity == "error" for f in found)


def test_early_stopping_training_wording_is_no_failure(tmp_path):
    found = _found(tmp_path, _D2_STEP + "Early stopping training: no improvement in val_loss for 5 epochs\n")
    assert not any(f.severity == "error" or f.title.startswith("unexplained failure") for f in found)


# --- wave 1 leftover: the store's bind refused (errno 13), not a port in use ------------------------------------
def test_bind_permission_denied_is_named_not_port_in_use(tmp_path):
    f = _found(tmp_path, "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network "
               "address. The server socket has failed to bind to [::]:443 (errno: 13 - Permission denied). The server "
               "socket has failed to bind to 0.0.0.0:443 (errno: 13 - Permission denied).\n")[0]
    assert f.id == "LOG027" and "1024" in f.detail and "--master-port" in f.fix


def test_bind_address_in_use_stays_port_in_use(tmp_path):
    f = _found(tmp_path, "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network "
               "address. The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).\n")[0]
    assert f.id == "LOG007"


def test_known_error_title_drops_a_glued_progress_bar(tmp_path):
    f = _found(tmp_path, " 12%|█▏        | 2905/25120 [2:12:37<17:37:09,  2.86s/it]WARNING: non-finite loss, ending "
               "training  tensor([nan, 0.03], device='cuda:0')\n")[0]
    assert f.id == "LOG027" and f.title.startswith("a process: WARNING: non-finite loss") and "it/s" not in f.title


def test_known_error_title_without_a_bar_is_kept_whole(tmp_path):
    # (round 15 wave 2: the param-count mismatch now has its own two-sided title; its strides twin keeps the quote)
    f = _found(tmp_path, "RuntimeError: params[0] in this process with sizes [32, 3] appears not to match strides of the "
               "same param in process 0.\n")[0]
    assert f.id == "LOG027" and "RuntimeError: params[0] in this process with sizes [32, 3] appears not to match " \
        "strides" in f.title


# --- wave 3 (batch 93's class): a Python warning's echoed source line is code, not a failure line ---------------
# CPython Lib/warnings.py _formatwarnmsg_impl (@v3.12.0): "<file>:<lineno>: <Category>: <message>" then "  <source line>"
_PL_DDP_WARNING = ("/opt/conda/lib/python3.10/site-packages/pytorch_lightning/strategies/ddp.py:428: UserWarning: Error "
                   "handling mechanism for deadlock detection is uninitialized. Skipping check.\n"
                   '  rank_zero_warn("Error handling mechanism for deadlock detection is uninitialized. Skipping check.")\n')


def test_warning_source_echo_is_no_failure_line(tmp_path):
    found = _found(tmp_path, "RCCL version 2.17.1+hip5.7 HEAD:cbbb3d8\n" + _PL_DDP_WARNING)
    assert not any(f.id == "LOG028" or f.severity == "error" for f in found)


def test_two_space_line_after_no_warning_header_still_fails(tmp_path):
    found = _found(tmp_path, "RCCL version 2.17.1+hip5.7 HEAD:cbbb3d8\nstarting step 3\n"
                   '  Error handling mechanism for deadlock detection failed: aborting\n')
    assert [f.id for f in found] == ["LOG028"]


# --- wave 3 leftover: bash's report of a command that died on SIGABRT names no rank, and is still a death ---------
# bash jobs.c pretty_print_job: "<script>: line N: PID Aborted (core dumped) <command>"
def test_shell_abort_without_rank_is_a_signal_death(tmp_path):
    f = _found(tmp_path, "./pretrain.sh: line 184: 2324239 Aborted                 (core dumped) litgpt pretrain "
               "--resume out/step1000/lit_model.pth --data FineWebDataset\n")[0]
    assert f.id == "LOG004" and "SIGABRT" in f.title and "litgpt pretrain" in f.title


def test_shell_abort_with_rank_in_its_command_names_the_rank(tmp_path):
    f = _found(tmp_path, "bash: line 1: 4411 Aborted                 (core dumped) HOROVOD_RANK=1 python train.py\n")[0]
    assert f.id == "LOG004" and f.title.startswith("rank 1 died on SIGABRT") and "shell ran" not in f.title


# --- wave 4: same SeqNum, different sizes: a collective mismatch (torch ProcessGroupWrapper.cpp CollectiveFingerPrint) --
def _wd(rank, seq, op, numel):
    return (f"[rank{rank}]:[E ProcessGroupNCCL.cpp:563] [Rank {rank}] Watchdog caught collective operation timeout: "
            f"WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn={numel}, NumelOut={numel}, Timeout(ms)=600000) ran for "
            "600057 milliseconds before timing out.\n")


def test_same_seq_different_sizes_is_a_collective_mismatch(tmp_path):
    found = _found(tmp_path, _wd(0, 3437, "ALLREDUCE", 4311252) + _wd(1, 3437, "ALLREDUCE", 1))
    assert found[0].id == "LOG001"
    assert "collective mismatch" in found[0].title and "4311252" in found[0].title and "of 1 element" in found[0].title
    assert "TORCH_DISTRIBUTED_DEBUG=DETAIL" in found[0].fix


def test_same_seq_same_size_is_no_mismatch(tmp_path):
    found = _found(tmp_path, _wd(0, 3437, "ALLREDUCE", 4311252) + _wd(1, 3437, "ALLREDUCE", 4311252))
    assert found[0].id == "LOG001" and "mismatch" not in found[0].title


def test_alltoall_sizes_may_differ_without_a_mismatch(tmp_path):
    found = _found(tmp_path, _wd(0, 12, "ALLTOALL_BASE", 4096) + _wd(1, 12, "ALLTOALL_BASE", 2048))
    assert found[0].id == "LOG001" and "mismatch" not in found[0].title


# --- wave 4: progress formats mined from their sources (MXNet Speedometer, BasicSR MessageLogger, MetricLogger) -------
def test_mxnet_basicsr_and_metriclogger_lines_are_progress():
    from ddpdoctor.triage.job import is_progress
    assert is_progress("INFO:root:Epoch[0] Batch [15920-15940]\tSpeed: 27.11 samples/sec\tacc=0.466406")
    assert is_progress("INFO:root:Batch [50]\tSpeed: 120.31 samples/sec")
    assert is_progress("19-08-09 08:25:25.996 - INFO: <epoch: 86, iter: 107,200, lr:2.500e-05> l_g_pix: 1.4819e-03")
    assert is_progress("2021-01-01 12:00:00,000 INFO: [train..][epoch:  1, iter:   1,000, lr:(1.000e-04,)] [eta: 1:00:00")
    assert is_progress("[03:23:49.951215] Epoch: [0]  [1480/1504]  lr: 0.000026  time: 4.5833  data: 0.0002")


def test_words_of_those_formats_alone_are_no_progress():
    from ddpdoctor.triage.job import is_progress
    assert not is_progress("Batch [5] failed to load")
    assert not is_progress("Epoch: [0]")
    assert not is_progress("resume from epoch: 3, iteration unknown")


def test_mxnet_speedometer_log_that_stops_reads_mid_training(tmp_path):
    found = _found(tmp_path, "".join(f"INFO:root:Epoch[0] Batch [{i}-{i + 20}]\tSpeed: 27.11 samples/sec\tacc=0.46\n"
                                     for i in range(0, 80, 20)))   # 4 lines: 5 are round 15's steady excerpt (info)
    assert [f.id for f in found] == ["LOG029"] and "mid-training" in found[0].title


# --- wave 4: rankless lines whose own words say what failed (Open MPI's mpirun banner, Apple Metal's assertion) -----
_MPI = ("-------------------------------------------------------\nPrimary job  terminated normally, but 1 process returned\n"
        "a non-zero exit code. Per user-direction, the job has been aborted.\n"
        "-------------------------------------------------------\n")


def test_mpirun_banner_alone_says_a_process_exited_non_zero(tmp_path):
    found = _found(tmp_path, _MPI)
    assert [f.id for f in found] == ["LOG028"]
    assert "non-zero code" in found[0].title and "--tag-output" in found[0].fix


def test_metal_failed_assertion_is_named(tmp_path):
    found = _found(tmp_path, "/AppleInternal/Library/BuildRoots/x/Library/Caches/com.apple.xbs/Sources/"
                   "MetalPerformanceShaders/MPSCore/Types/MPSNDArray.mm:88: failed assertion `[MPSNDArrayDescriptor "
                   "sliceDimension:withSubrange:] error: subRange.start (6) is not less than length of dimension[0] (6)'\n")
    assert [f.id for f in found] == ["LOG028"] and "Apple Metal (MPS)" in found[0].title


def test_other_assertions_and_mpirun_lines_are_not_named_so(tmp_path):
    found = _found(tmp_path, "Assertion failed: (0 <= mpsAxis), function getKernelAxes, file GPUReductionOps.mm, line 31.\n"
                   "mpirun noticed that process rank 1 with PID 0 on node n1 exited on signal 6 (Aborted).\n")
    assert found and not any("Apple Metal" in f.title or "banner names no rank" in f.title for f in found)


# --- wave 4: a hang ended from outside whose log names no silent rank: who went quiet, or plainly not shown --------
_STOP15 = "torch.distributed.elastic.multiprocessing.api.SignalException: Process 12345 got signal: 15\n"


def test_hang_stop_with_no_ranked_line_says_the_stuck_rank_is_not_shown(tmp_path):
    f = _found(tmp_path, _UNTIMED + _STOP15)[0]
    assert f.id == "LOG026" and "no line names a rank, so the stuck rank is not shown" in f.title
    assert "py-spy dump --pid" in f.detail


def test_hang_stop_names_the_rank_whose_output_ended_first(tmp_path):
    f = _found(tmp_path, "[rank0]: Epoch 1 step 10 loss 2.1\n[rank1]: Epoch 1 step 10 loss 2.1\n"
               "[rank0]: Epoch 1 step 20 loss 2.0\n[rank0]: Epoch 1 step 30 loss 2.0\n" + _STOP15)[0]
    assert f.id == "LOG026" and "rank 1's output ended first (in log order, a guess)" in f.title
    assert "rank 0 at line 4; rank 1 at line 2" in f.detail


def test_hang_stop_with_ranks_ending_together_names_none(tmp_path):
    """Quiet: every rank printed up to the stop; none is named as quiet first."""
    f = _found(tmp_path, "[rank0]: Epoch 1 step 10 loss 2.1\n[rank1]: Epoch 1 step 10 loss 2.1\n"
               "[rank0]: Epoch 1 step 20 loss 2.0\n[rank1]: Epoch 1 step 20 loss 2.0\n" + _STOP15)[0]
    assert f.id == "LOG026" and "ended first" not in f.title
