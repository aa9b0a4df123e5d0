"""Round-10 classes of issue 24 (triage, 2026-12-06 session 3): trigger and quiet cases whose assertions can fail. Logs
are written from the formats the sources print (no logs copied); pure in-process tests (no process launched)."""
from __future__ import annotations

from ddpdoctor.triage.api import triage_paths


def _found_text(tmp_path, text):
    p = tmp_path / "job.log"
    p.write_text(text, encoding="utf-8")
    return [f for f in triage_paths([str(p)]).sorted_findings() if f.severity in ("error", "warning")]


def _ids(f):
    return [(x.id, x.title) for x in f]


# --- batch 66: NVML's NVML_ERROR_GPU_IS_LOST ('GPU is lost', NVIDIA/go-nvml gen/nvml/nvml.h @314e96d) ------------------
def test_nvidia_smi_gpu_is_lost_is_a_gpu_fault(tmp_path):
    for text in ("Unable to determine the device handle for GPU 0000:17:00.0: GPU is lost.  Reboot the system to "
                 "recover this GPU\n",
                 "epoch 3 step 120 loss 0.41\npynvml.NVMLError_GPUIsLost: GPU is lost\n"):
        f = _found_text(tmp_path, text)
        assert f and f[0].id == "LOG020", _ids(f)


def test_prose_about_a_lost_gpu_is_no_fault(tmp_path):
    """The quiet side: the words in a sentence (no caller's ': ' before NVML's text) are no NVML error."""
    text = ("checking whether the GPU is lost before training\n"
            "epoch 1 step 10 loss 0.9\nepoch 1 step 20 loss 0.8\nTraining completed!\n")
    f = _found_text(tmp_path, text)
    assert not [x for x in f if x.id == "LOG020" or x.severity == "error"], _ids(f)


# --- left by round 9: NCCL's WARN text without its prefix (src/os/linux.cc @5067397 ncclOsShmOpen's fail: WARN) ---------
def test_nccl_shm_warn_text_without_its_prefix_is_shm(tmp_path):
    """A paste that lost the 'host:pid:tid [dev] NCCL WARN' prefix keeps NCCL's words: LOG009 (/dev/shm), not LOG028."""
    for text in ("Error while creating shared memory segment /dev/shm/nccl-pZafXL (size 7340384)\n",
                 "Error while creating shared memory segment /dev/shm/nccl-cjY8K5 (size 10617216), error: No space left "
                 "on device (28)\n"):
        f = _found_text(tmp_path, text)
        assert f and f[0].id == "LOG009", _ids(f)


def test_nccl_info_line_with_shm_words_is_no_warn(tmp_path):
    """The quiet side: NCCL's own INFO lines about /dev/shm (it allocated its segments) in a run that ends are no
    failure, and the same words under an INFO prefix are not a WARN."""
    text = ("node1:12:40 [0] NCCL INFO Allocated 9637892 bytes of shared memory in /dev/shm/nccl-Xa81Qz\n"
            "node1:12:40 [0] NCCL INFO Failed to open libnvidia-ml.so.1: x\n"
            "node1:12:40 [0] NCCL INFO comm 0x55d1 rank 0 nranks 2 cudaDev 0 busId 1a000 - Init COMPLETE\n"
            "epoch 1 step 100 loss 0.31\nTraining completed!\n")
    f = _found_text(tmp_path, text)
    assert not [x for x in f if x.id in ("LOG009", "LOG028") or x.severity == "error"], _ids(f)


# --- left by round 9: "survivable" judged per process (Job.many_writers) --------------------------------------------
_MISMATCH = ("size mismatch for head.weight: copying a param with shape torch.Size([10, 512]) from checkpoint, the shape "
             "in current model is torch.Size([20, 512]).\n")
_STEPS = "".join(f"epoch 1 step {i} loss 0.{90 - i}\n" for i in range(10, 60, 10))


def test_survivable_line_in_a_paste_of_several_ranks_stays_a_failure(tmp_path):
    """Two processes wrote this paste (two NCCL pids, nranks 2) and its lines name no rank: the progress after the
    strict-load message may be the other rank's, so the message is still the failure (LOG024), not survived."""
    text = ("node1:100:200 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1a000 - Init COMPLETE\n"
            "node1:101:201 [1] NCCL INFO comm 0x2 rank 1 nranks 2 cudaDev 1 busId 1b000 - Init COMPLETE\n"
            + _MISMATCH + _STEPS)
    f = _found_text(tmp_path, text)
    assert f and f[0].id == "LOG024" and f[0].severity == "error", _ids(f)


def test_survivable_line_of_one_process_with_progress_after_is_no_failure(tmp_path):
    """The quiet side: one process wrote it (nothing says more did): a strict=False load that trains on."""
    f = _found_text(tmp_path, "load checkpoint from local path: ckpt.pth\n" + _MISMATCH + _STEPS)
    assert not [x for x in f if x.severity == "error" or x.title.startswith("unexplained failure")], _ids(f)


# --- left by round 9: an error line followed by the same process's progress (rules.hit, Job.went_on_after) -------------
_OOM = ("RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 10.76 GiB total capacity; 9.80 GiB "
        "already allocated)\n")
_TB = ("Traceback (most recent call last):\n  File \"train.py\", line 88, in log_metrics\n    row = float(v)\n"
       "ValueError: could not convert string to float: 'nan%'\n")


def test_an_error_the_process_trained_on_after_is_a_warning(tmp_path):
    """One process: a caught OOM and a logged traceback, each with training progress after it and nothing later saying
    the job failed: reported (same rule), as warnings, never as errors or an unexplained failure."""
    for bad in (_OOM, _TB):
        f = _found_text(tmp_path, "epoch 1 step 10 loss 0.91\n" + bad + _STEPS)
        assert f, bad
        assert not [x for x in f if x.severity == "error" or x.title.startswith("unexplained failure")], _ids(f)
    f = _found_text(tmp_path, "epoch 1 step 10 loss 0.91\n" + _OOM + _STEPS)
    assert f[0].id == "LOG005", _ids(f)


def test_an_error_followed_by_a_failed_exit_or_by_another_writer_stays_an_error(tmp_path):
    """The quiet side: the same lines stay errors when the launcher then reports a process failing, when nothing
    follows them, or when the progress after them may be another process's (two NCCL pids, no rank prefix)."""
    tail = ("E1206 10:02:11.305000 817 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) "
            "local_rank: 0 (pid: 4242) of binary: /usr/bin/python3\n")
    two = ("node1:100:200 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1a000 - Init COMPLETE\n"
           "node1:101:201 [1] NCCL INFO comm 0x2 rank 1 nranks 2 cudaDev 1 busId 1b000 - Init COMPLETE\n")
    for text in ("epoch 1 step 10 loss 0.91\n" + _OOM + _STEPS + tail, "epoch 1 step 10 loss 0.91\n" + _OOM,
                 two + _OOM + _STEPS):
        f = _found_text(tmp_path, text)
        assert f and f[0].id == "LOG005" and f[0].severity == "error", _ids(f)


# --- batch 68: ParlAI's rank prefix ("rank:{:3d} |", parlai/utils/distributed.py @3f7e570) -----------------------------
def test_parlai_rank_prefix_names_the_rank(tmp_path):
    for head in ("rank:  3 | 2022-05-08 14:35:40,808 CRITICAL | ", "rank: 3 | 2022-05-08 14:35:40,808 CRITICAL | "):
        text = ("2022-05-08 14:35:33,820 INFO   | training...\n" + head + "Traceback (most recent call last):\n"
                ' File "/x/parlai/scripts/train_model.py", line 907, in train_steps\n  world.parley()\n'
                "ValueError: bad batch\n")
        f = _found_text(tmp_path, text)
        assert f and "rank:3" in f[0].subjects, (head, _ids(f), f[0].subjects if f else None)


def test_rank_words_inside_a_message_are_no_prefix(tmp_path):
    """The quiet side: the words mid-line (a metric table) are not ParlAI's prefix."""
    f = _found_text(tmp_path, "eval: best rank: 3 | hits@1 0.41\nValueError: bad batch\n")
    assert f and "rank:3" not in f[0].subjects, [(x.id, x.subjects) for x in f]


# --- batch 67 (noticed): DeepSpeed's skipped fp16 step is a step (deepspeed/runtime/fp16/loss_scaler.py @68ee9f8) ------
_OVF = "".join(f"[2024-09-11 17:52:{10 + i},030] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 "
               f"Skipping step. Attempted loss scale: {2 ** (32 - i)}, reducing to {2 ** (31 - i)}\n" for i in range(5))


def test_deepspeed_overflow_skips_are_training_progress(tmp_path):
    """A log of skipped fp16 steps ran steps: LOG029 says where the progress stops, not 'during the set-up'."""
    f = _found_text(tmp_path, "[2024-09-11 17:52:01,000] [INFO] [comm.py:637:init_distributed] cdb=None\n" + _OVF)
    assert f and f[0].id == "LOG029" and "progress" in f[0].title and "set-up" not in f[0].title, _ids(f)


def test_deepspeed_set_up_lines_alone_are_still_set_up_and_a_minimum_scale_still_fails(tmp_path):
    """The quiet side: DeepSpeed's own INFO lines without a step stay set-up; the scaler giving up still fails."""
    f = _found_text(tmp_path, "[2024-09-11 17:52:01,000] [INFO] [comm.py:637:init_distributed] cdb=None\n"
                              "[2024-09-11 17:52:02,000] [INFO] [config.py:1000:print] train_batch_size ...... 32\n")
    assert f and f[0].id == "LOG029" and "set-up" in f[0].title, _ids(f)
    f = _found_text(tmp_path, _OVF + "Exception: Current loss scale already at minimum - cannot decrease scale anymore. "
                                     "Exiting run.\n")
    assert f and (f[0].severity == "error" or f[0].title.startswith("unexplained failure")), _ids(f)


# --- batch 67 (noticed): accelerate's bf16 check (src/accelerate/accelerator.py @16cb6eb line 566; commands/launch.py) ----
def test_accelerate_bf16_on_a_device_without_it_is_gpu_setup(tmp_path):
    for msg in ("bf16 mixed precision requires a supported device.",
                "bf16 mixed precision requires PyTorch >= 1.10 and a supported device."):
        text = ("preparing accelerator\nTraceback (most recent call last):\n"
                '  File "/x/accelerate/accelerator.py", line 566, in __init__\n    raise ValueError(...)\n'
                f"ValueError: {msg}\n")
        f = _found_text(tmp_path, text)
        assert f and f[0].id == "LOG021", _ids(f)


def test_a_bf16_setting_in_a_config_print_is_no_finding(tmp_path):
    """The quiet side: the words of a config dump are not the check failing."""
    f = _found_text(tmp_path, "mixed_precision: bf16\nDistributed environment: MULTI_GPU  Backend: nccl\n"
                              "Mixed precision type: bf16\nepoch 1 step 10 loss 0.5\nTraining completed!\n")
    assert not [x for x in f if x.id == "LOG021" or x.severity == "error"], _ids(f)
