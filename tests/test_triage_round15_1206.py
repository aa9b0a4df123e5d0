"""Round-15 classes of issue 24 (triage, 2026-12-06): trigger and quiet cases whose assertions can fail.
Logs are written from the formats the sources print (transformers Trainer's logging dict); pure in-process tests."""
from __future__ import annotations

from ddpdoctor.triage.api import triage_paths


def _all(tmp_path, text):
    p = tmp_path / "job.log"
    p.write_text(text, encoding="utf-8")
    return triage_paths([str(p)]).sorted_findings()


def _found(tmp_path, text):
    return [f for f in _all(tmp_path, text) if f.severity in ("error", "warning")]


def _steps(n):
    return "".join(f"{{'loss': {2.0 - i / 100:.4f}, 'grad_norm': 3.2, 'learning_rate': 1e-05, 'epoch': {i / 100:.2f}}}\n"
                   for i in range(1, n + 1))


# --- an excerpt of steady progress, nothing around it: round 16 (the lead's decision) makes it a warning again, one
# that says the excerpt shows no failure and no end (tests/test_triage_round16b_1206.py) ----------------------------
def test_progress_excerpt_is_a_warning_that_says_no_end(tmp_path):
    found = _found(tmp_path, _steps(8))
    assert [f.id for f in found] == ["LOG029"] and found[0].title.startswith("no failure in this excerpt")


def test_few_progress_lines_still_warn(tmp_path):
    assert [f.id for f in _found(tmp_path, _steps(2))] == ["LOG029"]


def test_progress_after_a_launcher_banner_still_warns(tmp_path):
    banner = ("W0410 08:56:49.493000 1403 torch/distributed/run.py:793] Setting OMP_NUM_THREADS environment variable "
              "for each process to be 1 in default, to avoid your system being overloaded, please further tune the "
              "variable for optimal performance in your application as needed.\n"
              "torchrun --nnodes 2 --nproc-per-node 8 train.py\n")
    assert [f.id for f in _found(tmp_path, banner + _steps(8))] == ["LOG029"]


def test_progress_then_other_lines_still_warn(tmp_path):
    assert [f.id for f in _found(tmp_path, _steps(8) + "saving checkpoint to out/ckpt-800\n")] == ["LOG029"]


# --- a failed attempt (the port in use), then a run that trained and ended in the same log: a note, not the failure ---
_PORT = ("[W socket.cpp:436] [c10d] The server socket has failed to bind to [::]:29500 (errno: 98 - Address already "
         "in use).\n"
         "Traceback (most recent call last):\n"
         '  File "/usr/lib/python3/site-packages/torch/distributed/run.py", line 806, in main\n'
         "    run(args)\n"
         "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. "
         "The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).\n")
_TABLE = ("torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
          "Root Cause (first observed failure):\n[0]:\n  time      : 2024-03-01_10:00:00\n  host      : node0\n"
          "  rank      : 0 (local_rank: 0)\n  exitcode  : 1 (pid: 1234)\n  error_file: <N/A>\n")
_END = ("{'train_runtime': 400.1, 'train_samples_per_second': 4.0, 'train_steps_per_second': 0.5, 'train_loss': 1.1, "
        "'epoch': 1.0}\n")


def test_port_in_use_then_a_run_that_ended_is_a_note(tmp_path):
    text = _PORT + _TABLE + "$ torchrun --master_port 29517 train.py\n" + _steps(3) + _END
    assert _found(tmp_path, text) == []
    notes = {f.id: f for f in _all(tmp_path, text)}
    assert notes["LOG007"].severity == "info" and "trained and ended" in notes["LOG007"].title


def test_port_in_use_then_progress_but_no_end_stays_an_error(tmp_path):
    found = _found(tmp_path, _PORT + _TABLE + _steps(3))
    assert found and found[0].id == "LOG007" and found[0].severity == "error"


def test_port_in_use_after_the_end_stays_an_error(tmp_path):
    found = _found(tmp_path, _steps(3) + _END + _PORT + _TABLE)
    assert found and found[0].id == "LOG007" and found[0].severity == "error"


# --- Open MPI's "Process name: [[jobid,1],RANK]" and the next line's "Exit code: N": the rank named ---------------
_MPI_TAIL = ("-------------------------------------------------------\n"
             "Primary job  terminated normally, but 1 process returned\n"
             "a non-zero exit code.. Per user-direction, the job has been aborted.\n"
             "-------------------------------------------------------\n"
             "mpirun detected that one or more processes exited with non-zero status, thus causing\n"
             "the job to be terminated. The first process to do so was:\n\n")


def test_mpirun_process_name_names_the_rank_and_its_code(tmp_path):
    found = _found(tmp_path, _MPI_TAIL + "  Process name: [[35302,1],3]\n  Exit code:    2\n")
    assert found and found[0].id == "LOG004" and "rank:3" in found[0].subjects and "code 2" in found[0].title


def test_mpirun_process_name_without_its_code_line_is_code_1(tmp_path):
    found = _found(tmp_path, _MPI_TAIL + "  Process name: [[35302,1],5]\n")
    assert found and "rank:5" in found[0].subjects and "code 1" in found[0].title


def test_process_name_in_prose_is_no_exit(tmp_path):
    found = _found(tmp_path, "see the docs: Process name: [[jobid,1],rank] names the rank\n" + _steps(3) + _END)
    assert found == []


# --- a stamped launcher banner, unstamped progress, a stamped stop: the silence bounded, marked as a bound ----------
_BANNER = ("W0410 08:56:49.493000 1403 torch/distributed/run.py:793] Setting OMP_NUM_THREADS environment variable for "
           "each process to be 1 in default, to avoid your system being overloaded, please further tune the variable "
           "for optimal performance in your application as needed.\n")
_STOP = ("W0410 10:56:49.493000 1403 torch/distributed/elastic/agent/server/api.py:704] Received Signals.SIGTERM death "
         "signal, shutting down workers\n")


def test_stamped_banner_bounds_the_untimed_progress_before_a_stop(tmp_path):
    found = _found(tmp_path, _BANNER + _steps(3) + _STOP)
    assert found and found[0].id == "LOG026"
    assert "at most 120 min" in found[0].title and "a bound" in found[0].title and "hang" not in found[0].title


def test_stamped_banner_after_the_progress_gives_no_bound(tmp_path):
    found = _found(tmp_path, _steps(3) + _BANNER + _STOP)
    assert found and found[0].id == "LOG026" and "at most" not in found[0].title


# --- batch 95: the ROCm runtime's abort lines are GPU faults (LOG020) ------------------------------------------
def test_rocclr_queue_abort_is_a_gpu_fault(tmp_path):
    found = _found(tmp_path, ":0:rocdevice.cpp            :2673: 1263352162 us: 21870: [tid:0x7f64e3eff640] "
                   "Device::callbackQueue aborting with error : HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION: The agent "
                   "attempted to access memory beyond the largest legal address. code: 0x29\n")
    assert found and found[0].id == "LOG020" and "HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION" in found[0].title


def test_rocr_memory_access_fault_is_a_gpu_fault(tmp_path):
    found = _found(tmp_path, "Memory access fault by GPU node-1 (Agent handle: 0x561401550ed0) on address "
                   "0x7f8942626000. Reason: Page not present or supervisor privilege.\n")
    assert found and found[0].id == "LOG020" and "ROCm" in found[0].title


def test_hsa_status_named_in_prose_is_no_fault(tmp_path):
    found = _found(tmp_path, "note: HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION is code 0x29 in the HSA headers\n"
                   + _steps(3) + _END)
    assert found == []


# --- batch 95: dataset-preparation bars alone are not steady training progress --------------------------------
def test_datasets_map_bars_alone_still_warn(tmp_path):
    bars = "".join(f"Map:  {i}%|####      | {i * 1000}/100000 [00:2{i % 10}<00:30, 3152.12 examples/s]\n"
                   for i in range(40, 50))
    found = _found(tmp_path, bars)
    assert [f.id for f in found] == ["LOG029"] and "data preparation" in found[0].title


# --- batch 96: a launch typed again after a failed attempt; the attempt's error is not the job's ----------------
_RETYPED = ("(test) root@8pxb:~/code# python -m torch.distribute.launch --nnodes 2 --nproc_per_node=2 train.py\n"
            "/root/envs/test/bin/python: Error while finding module specification for 'torch.distribute.launch' "
            "(ModuleNotFoundError: No module named 'torch.distribute')\n"
            "(test) root@8pxb:~/code# python -m torch.distributed.launch --nnodes 2 --nproc_per_node=2 train.py\n"
            "/root/envs/test/lib/python3.8/site-packages/torch/distributed/launch.py:178: FutureWarning: The module "
            "torch.distributed.launch is deprecated\n")


def test_failed_attempt_then_the_launch_typed_again_is_not_the_failure(tmp_path):
    found = _found(tmp_path, _RETYPED)
    assert [f.id for f in found] == ["LOG029"]
    notes = [f for f in _all(tmp_path, _RETYPED) if f.id == "LOG028"]
    assert notes and notes[0].severity == "info" and "run again" in notes[0].title


def test_error_after_the_last_launch_is_still_the_failure(tmp_path):
    found = _found(tmp_path, _RETYPED + "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
                   "    main()\nValueError: bad config\n")
    assert found and found[0].id in ("LOG004", "LOG028") and found[0].severity in ("error", "warning")
    assert not found[0].title.startswith("failure lines of an earlier attempt")


def test_hip_error_title_names_the_error(tmp_path):
    found = _found(tmp_path, "torch.AcceleratorError: HIP error: an illegal memory access was encountered\n")
    assert found and found[0].id == "LOG020" and "illegal memory access" in found[0].title
