"""Round 23 (issue 24, triage29): classes from the sources, each with a trigger and a quiet case.

- torch's "The NVIDIA driver on your system is too old (found version N)" (c10/cuda/CUDAFunctions.cpp
  device_count_impl, pytorch/pytorch @01a6a16d): raised where CUDA must start; printed as a UserWarning ("CUDA
  initialization: ...") where torch only counts devices, and that process then has no GPU. A job that prints it and
  never trains failed at its GPU set-up (LOG021), even when the text came as a warning; a job that trains after it
  is not called failed on it (the warning stays a warning).
- A catalogued message whose straight quotes (Python's repr, every '{name}' of a raised message) a reporter's editor
  turned into typographic ones (U+2018/U+2019, U+201C/U+201D) is the same message: read with them straightened.
- DeepSpeed's launcher's "[...] exits with return code = N" prints its spawn loop's last command
  (deepspeed/launcher/launch.py sigkill_handler): its --local_rank=N names the failed process only when N = 0 (one
  process on the node); otherwise no rank is taken from it, and the finding says why.
- The NCCL watchdog loop's own frames before torch 2.7 (ProcessGroupNCCL::ncclCommWatchdog() around
  watchdogHandler(); Watchdog::run() since) in a stack whose message the paste cut: the watchdog thread threw (a
  collective timed out or failed); below a named NCCL error, the named error stays first.
"""
from ddpdoctor.facts import messages
from triage_loud import brief as _ids, loud_findings as _found

_WARN = ("/usr/lib/python3/site-packages/torch/cuda/__init__.py:138: UserWarning: CUDA initialization: The NVIDIA "
         "driver on your system is too old (found version 11040). Please update your GPU driver by downloading and "
         "installing a new version from the URL: http://www.nvidia.com/Download/index.aspx Alternatively, go to: "
         "https://pytorch.org to install a PyTorch version that has been compiled with your version of the CUDA "
         "driver. (Triggered internally at ../c10/cuda/CUDAFunctions.cpp:108.)\n"
         "  return torch._C._cuda_getDeviceCount() > 0\n")
_DS = ("[2023-05-01 10:00:00,000] [INFO] [real_accelerator.py:110:get_accelerator] Setting ds_accelerator to cuda "
       "(auto detect)\n")
_LAUNCH = ("[2023-05-01 10:00:01,000] [WARNING] [runner.py:196:fetch_hostfile] Unable to find hostfile, will proceed "
           "with training with local resources only.\n"
           "[2023-05-01 10:00:01,500] [INFO] [runner.py:555:main] cmd = /usr/bin/python3 -u -m deepspeed.launcher.launch "
           "--world_info=eyJsb2NhbGhvc3QiOiBbMF19 --master_addr=127.0.0.1 --master_port=29500 train.py\n")
_TRAINED = ("{'loss': 2.31, 'learning_rate': 1e-05, 'epoch': 0.1}\n{'loss': 2.05, 'learning_rate': 1e-05, 'epoch': 0.2}\n"
            "{'train_runtime': 120.5, 'train_samples_per_second': 3.2, 'train_loss': 2.0, 'epoch': 1.0}\n")


def test_a_driver_too_old_warning_at_a_launch_that_never_trains_is_the_gpu_set_up_failure(tmp_path):
    f = _found(tmp_path, _DS + _WARN + _LAUNCH)
    assert f and f[0].id == "LOG021" and f[0].severity == "error", _ids(f)
    assert "driver on your system is too old" in f[0].title and f[0].evidence["first_seen"]["line"] == 2, _ids(f)


def test_the_raised_driver_too_old_error_is_the_gpu_set_up_failure(tmp_path):
    tb = ('Traceback (most recent call last):\n  File "train.py", line 9, in <module>\n    torch.cuda.set_device(0)\n'
          "RuntimeError: The NVIDIA driver on your system is too old (found version 12080). Please update your GPU "
          "driver by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx\n")
    f = _found(tmp_path, tb)
    assert f and f[0].id == "LOG021" and f[0].severity == "error", _ids(f)


def test_a_driver_too_old_warning_before_training_that_went_on_is_not_the_failure(tmp_path):
    f = _found(tmp_path, _DS + _WARN + _LAUNCH + _TRAINED)
    assert not [x for x in f if x.severity == "error"], _ids(f)
    assert not [x for x in f if x.id == "LOG028"], _ids(f)


def test_typographic_quotes_around_a_catalogued_message_are_read_as_the_program_printed_them(tmp_path):
    f = _found(tmp_path, "Loading model...\nAttributeError: \u2018DistributedDataParallel\u2019 object has no attribute "
                         "\u2018save_pretrained\u2019\n")
    assert f and f[0].id == "LOG027" and "DistributedDataParallel" in f[0].title, _ids(f)
    mm = messages.match("\u2018DataParallel\u2019 object has no attribute \u2018generate\u2019")
    assert mm is not None and mm.entry["id"] == "torch.nn.module.getattr.through_ddp_wrapper", mm
    assert (mm.fields["name"], mm.start) == ("generate", 0), mm


def test_typographic_quotes_around_an_uncatalogued_name_stay_a_generic_failure(tmp_path):
    f = _found(tmp_path, "Loading model...\nAttributeError: \u2018MyTrainer\u2019 object has no attribute "
                         "\u2018save_pretrained\u2019\n")
    assert f and f[0].id == "LOG004" and "AttributeError" in f[0].title, _ids(f)
    assert messages.match("\u2018MyTrainer\u2019 object has no attribute \u2018x\u2019") is None


_DS_EXIT = ("[2023-05-01 10:01:00,000] [INFO] [launch.py:428:sigkill_handler] Killing subprocess 1001\n"
            "[2023-05-01 10:01:00,000] [ERROR] [launch.py:434:sigkill_handler] ['/usr/bin/python3', '-u', 'train.py', "
            "'--local_rank=%d', '--deepspeed', 'ds.json'] exits with return code = 1\n")


def test_deepspeeds_exit_line_names_the_rank_only_when_it_is_the_nodes_one_process(tmp_path):
    f = _found(tmp_path, _DS_EXIT % 0)
    assert f and f[0].id == "LOG004" and "rank:0" in f[0].subjects, _ids(f)
    assert "only process" in f[0].detail, f[0].detail


def test_deepspeeds_exit_line_with_a_higher_local_rank_takes_no_rank_and_says_why(tmp_path):
    f = _found(tmp_path, "[2023-05-01 10:00:00,000] [INFO] [launch.py:229:main] dist_world_size=2\n" + _DS_EXIT % 1)
    assert f and f[0].id == "LOG004" and not [s for s in f[0].subjects if s.startswith("rank:")], _ids(f)
    assert "last one it started" in f[0].detail and "torchrun reports" not in f[0].detail, f[0].detail


_WD_FRAMES = ("frame #2: c10d::ProcessGroupNCCL::watchdogHandler() + 0x233 (0x7f in /usr/lib/libtorch_cuda.so)\n"
              "frame #3: c10d::ProcessGroupNCCL::ncclCommWatchdog() + 0x14d (0x7f in /usr/lib/libtorch_cuda.so)\n"
              "frame #4: <unknown function> + 0x145c0 (0x7f in /usr/lib/libtorch.so)\n")


def test_the_pre_2_7_watchdog_loops_frames_alone_are_the_watchdogs_abort(tmp_path):
    f = _found(tmp_path, "on3.11/site-packages/torch/lib/libtorch_cuda.so)\n" + _WD_FRAMES)
    assert f and f[0].id == "LOG001" and "watchdog thread" in f[0].title, _ids(f)


def test_the_watchdog_loops_frames_under_a_named_nccl_error_leave_it_first(tmp_path):
    head = ("[rank1]:[E ProcessGroupNCCL.cpp:1182] [Rank 1] NCCL watchdog thread terminated with exception: NCCL error: "
            "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.19.3\n"
            "Exception raised from checkForNCCLErrorsInternal at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1436 "
            "(most recent call first):\n")
    f = _found(tmp_path, head + _WD_FRAMES)
    assert f and f[0].id == "LOG009", _ids(f)
