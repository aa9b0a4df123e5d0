"""Round 21 (issue 24, triage23): classes from the sources, each with a trigger and a quiet fixture.

- zsh's and fish's spellings of "command not found" for the launcher or python (zsh Src/exec.c: zerr("command not found:
  %s"); fish share/functions/fish_command_not_found.fish: "fish: Unknown command: %s") are the launch failure (LOG023)
  that bash's and dash's texts already map to; a helper command that is no launcher is not.
- Open MPI's mapper refusing -np above its slots ("There are not enough slots available in the system to satisfy the N
  slots", orte/mca/rmaps/base/help-orte-rmaps-base.txt [orte-rmaps-base:alloc-error]) is a launch that never started a
  rank (LOG023) naming the slots asked for; Open MPI's older "noticed that job rank N ... on node "h" exited on signal
  S" (help-orterun.txt [orterun:proc-aborted]) names the rank and the signal like today's "process rank" form.
"""
from ddpdoctor.triage.api import triage_paths
from triage_loud import brief as _ids, loud_findings as _found

_STEPS = "".join(f"step {i} loss 0.{i:02d}\n" for i in range(1, 6))
_END = "Training completed.\n"
_RULE = "-" * 74 + "\n"


# --- zsh / fish: the launcher not found ------------------------------------------------------------------------------
def test_zsh_and_fish_that_find_no_launcher_are_a_launch_failure(tmp_path):
    for line, cmd in (("zsh: command not found: torchrun", "torchrun"), ("zsh:1: command not found: python3", "python3"),
                      ("train.zsh:12: command not found: accelerate", "accelerate"),
                      ("fish: Unknown command: deepspeed", "deepspeed"), ("fish: Unknown command 'torchrun'", "torchrun")):
        f = _found(tmp_path, "Loading modules\nstarting job on node01\n" + line + "\n")
        assert f and f[0].id == "LOG023" and f[0].severity == "error", (line, _ids(f))
        assert f"`{cmd}`" in f[0].title and "never started" in f[0].title, (line, _ids(f))
        assert "line:3" in f[0].subjects, (line, f[0].subjects)


def test_zsh_launcher_not_found_past_a_large_log_head_is_read(tmp_path):
    pad = "".join(f"module load step {i}: ok\n" for i in range(40000))
    for line in ("zsh: command not found: torchrun", "fish: Unknown command: torchrun"):
        f = _found(tmp_path, pad + line + "\n" + "".join(f"cleanup {i}\n" for i in range(300)))
        assert f and f[0].id == "LOG023", (line, _ids(f))


def test_zsh_or_fish_missing_a_helper_that_is_no_launcher_is_no_launch_failure(tmp_path):
    for line in ("zsh: command not found: nvidia-smi", "fish: Unknown command: ninja", "zsh: command not found: module"):
        f = _found(tmp_path, line + "\n" + _STEPS + _END)
        assert not any(x.id == "LOG023" for x in f), (line, _ids(f))


# --- Open MPI --------------------------------------------------------------------------------------------------------
_SLOTS = (_RULE + "There are not enough slots available in the system to satisfy the 8\n"
          "slots that were requested by the application:\n\n  python\n\n"
          "Either request fewer slots for your application, or make more slots\navailable for use.\n" + _RULE)


def test_open_mpi_without_enough_slots_is_a_launch_failure_naming_the_slots(tmp_path):
    f = _found(tmp_path, "$ mpirun -np 8 python train.py\n" + _SLOTS)
    assert f and f[0].id == "LOG023" and f[0].severity == "error", _ids(f)
    assert "8 processes" in f[0].title and "slots" in f[0].title and "line:3" in f[0].subjects, _ids(f)
    assert "--oversubscribe" in f[0].fix, f[0].fix


def test_open_mpi_slots_past_a_large_log_head_is_read(tmp_path):
    pad = "".join(f"[node01:01234] mca: base: components_register: component {i} register function successful\n"
                  for i in range(30000))
    f = _found(tmp_path, pad + _SLOTS)
    assert f and f[0].id == "LOG023", _ids(f)


def test_open_mpi_that_mapped_its_slots_is_no_launch_failure(tmp_path):
    # the help text's other words in a healthy run's banner: no refusal
    f = _found(tmp_path, "$ mpirun -np 2 --oversubscribe python train.py\nA \"slot\" is the Open MPI term for an "
               "allocatable unit where we can launch a process.\n" + _STEPS + _END)
    assert not any(x.id == "LOG023" for x in f), _ids(f)


def test_open_mpi_older_job_rank_form_names_the_rank_and_signal(tmp_path):
    f = _found(tmp_path, _STEPS + _RULE + 'mpirun noticed that job rank 3 with PID 399 on node "sun06" exited on '
               "signal 9.\n" + _RULE)
    assert f and f[0].severity == "error" and "rank 3" in f[0].title and "SIGKILL" in f[0].title, _ids(f)


def test_open_mpi_today_form_wrapped_names_the_rank_and_signal(tmp_path):
    f = _found(tmp_path, _STEPS + _RULE + "mpirun noticed that process rank 1 with PID 14678 on node zo-fe1\n"
               "exited on signal 11 (Segmentation fault).\n" + _RULE)
    assert f and f[0].id == "LOG003" and "rank 1" in f[0].title, _ids(f)


# --- an issue's title that is no Markdown heading ---------------------------------------------------------------------
_TB = ("Traceback (most recent call last):\n  File \"train.py\", line 10, in <module>\n    main()\n"
       "ValueError: bad value for lr\n")


def test_a_plain_title_is_not_the_jobs_failure_line_when_the_body_holds_output(tmp_path):
    for title in ("[BUG] RuntimeError: NCCL error when training with 8 GPUs", "[Bug]: CUDA out of memory on rank 3",
                  "Title: RuntimeError: NCCL communicator was aborted", "RuntimeError: NCCL error when training with 8 GPUs"):
        f = _found(tmp_path, title + "\n\nI run torchrun and get:\n" + _STEPS + _TB)
        assert f and f[0].id == "LOG004" and "ValueError" in f[0].title, (title, _ids(f))
        assert "line:1" not in f[0].subjects, (title, f[0].subjects)


def test_a_plain_title_over_prose_only_is_still_read(tmp_path):
    # no program output under it: the title is all there is (as a Markdown heading's is)
    f = _found(tmp_path, "[BUG] RuntimeError: CUDA out of memory when training with ZeRO-3\n\n"
               "It happens on every run, any idea?\n")
    assert f and f[0].id == "LOG005", _ids(f)


def test_a_first_line_that_output_follows_directly_is_no_title(tmp_path):
    # an untagged first line with no blank line after it is the program's own: read in its place
    f = _found(tmp_path, "RuntimeError: CUDA error: an illegal memory access was encountered\n" + _STEPS)
    assert f and f[0].id == "LOG020" and "line:1" in f[0].subjects, _ids(f)


# --- "No issues found!" only with its evidence line; --json carries the verdict ---------------------------------------
def _report(tmp_path, text, name="job.log"):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return triage_paths([str(p)])


def test_a_log_that_ended_well_is_healthy_with_its_end_line(tmp_path):
    for end, n in (("{'train_runtime': 123.4, 'train_samples_per_second': 10.0, 'train_steps_per_second': 1.0, "
                    "'train_loss': 0.5, 'epoch': 3.0}", 6), ("`Trainer.fit` stopped: `max_epochs=3` reached.", 6),
                   ("Training completed.", 6)):
        r = _report(tmp_path, _STEPS + end + "\n")
        h = r.extra["triage"]["health"]
        assert h["verdict"] == "ended_well" and h["evidence"]["line"] == f"line:{n}", (end, h)
        assert any(s.startswith("Ended well: job.log line:") for s in r.extra["text_sections"]), r.extra["text_sections"]
        assert "health" in r.to_dict()["triage"], r.to_dict().keys()


def test_a_log_with_neither_failure_nor_end_is_no_verdict_of_health(tmp_path):
    r = _report(tmp_path, _STEPS)
    h = r.extra["triage"]["health"]
    assert h["verdict"] == "not_shown" and "evidence" not in h, h
    assert any(f.id == "LOG029" and f.severity == "warning" for f in r.findings), [f.id for f in r.findings]
    assert not any(s.startswith("Ended well") for s in r.extra["text_sections"])


def test_a_failed_log_is_failed_whatever_end_line_it_holds(tmp_path):
    r = _report(tmp_path, _STEPS + "Training completed.\n" + _TB)
    assert r.extra["triage"]["health"]["verdict"] == "failed", r.extra["triage"]["health"]


# --- glog / absl CHECK failures past a large log's head -------------------------------------------------------------
_GLOG_PAD = "".join(f"I1207 12:00:0{i % 10}.123456  4242 trainer.cc:88] step {i} ok\n" for i in range(3000))
_GLOG_FATAL = ("F1207 12:01:02.000001  4242 pjrt_client.cc:77] Check failed: devices.size() == 8 (4 vs. 8)\n"
               "*** Check failure stack trace: ***\n"
               "    @     0x7f00 absl::log_internal::LogMessageFatal::~LogMessageFatal()\n")


def test_a_glog_check_failure_past_the_head_is_the_failure_line_not_the_abort_after_it(tmp_path):
    text = _GLOG_PAD + _GLOG_FATAL + "".join(f"    @     0x7f{i:02d} frame{i}\n" for i in range(60)) + \
        "Aborted (core dumped)\n"
    f = _found(tmp_path, text)
    assert f and "line:3001" in f[0].subjects, _ids(f)
    assert "Check failed" in f[0].detail or "Check failed" in f[0].title, _ids(f)


def test_a_glog_log_without_a_check_failure_is_no_failure(tmp_path):
    r = _report(tmp_path, _GLOG_PAD + "I1207 12:02:00.000001  4242 trainer.cc:99] Training completed.\n")
    assert not [f for f in r.findings if f.severity in ("error", "warning")], [(f.id, f.title) for f in r.findings]


# --- TrainingArguments' own checks (transformers src/transformers/training_args.py, __post_init__) ---------------------
def test_training_arguments_refusing_their_values_is_a_config_mismatch(tmp_path):
    for msg in ("ValueError: --load_best_model_at_end requires the save and eval strategy to match, but found\n"
                "- Evaluation strategy: IntervalStrategy.NO\n- Save strategy: IntervalStrategy.STEPS",
                "ValueError: At most one of fp16 and bf16 can be True, but not both",
                "ValueError: evaluation strategy steps requires either non-zero --eval_steps or --logging_steps",
                "ValueError: --tf32 requires Ampere or a newer GPU arch, cuda>=11 and torch>=1.7"):
        f = _found(tmp_path, "[INFO] loading model\nTraceback (most recent call last):\n  File \"train.py\", line 40, in "
                   "<module>\n    args = parser.parse_args_into_dataclasses()\n" + msg + "\n")
        assert f and f[0].id == "LOG024" and f[0].severity == "error", (msg, _ids(f))
        assert "TrainingArguments" in f[0].detail and "line:5" in f[0].subjects, (msg, f[0].detail, f[0].subjects)


def test_training_arguments_printed_by_a_healthy_run_are_no_config_mismatch(tmp_path):
    f = _found(tmp_path, "TrainingArguments(load_best_model_at_end=True, eval_strategy=steps, save_strategy=steps, "
               "fp16=True, bf16=False, tf32=None, logging_steps=10)\n" + _STEPS + _END)
    assert not any(x.id == "LOG024" for x in f), _ids(f)


# --- the heartbeat monitor ending a rank "due to collective timeout or exception" (ProcessGroupNCCL.cpp, torch >= 2.4) --
def test_heartbeat_monitor_termination_after_a_collective_timeout_is_the_watchdogs_abort(tmp_path):
    f = _found(tmp_path, _STEPS + "[rank1]:[F1207 12:00:01.123456 4242 ProcessGroupNCCL.cpp:1306] [PG ID 0 PG GUID "
               "0(default_pg) Rank 1] [PG ID 0 PG GUID 0(default_pg) Rank 1] Terminating the process after attempting to "
               "dump debug info, due to collective timeout or exception.\n")
    assert f and f[0].id == "LOG001" and f[0].severity == "error" and "rank 1" in f[0].title, _ids(f)


def test_heartbeat_monitor_options_of_a_healthy_run_are_no_abort(tmp_path):
    f = _found(tmp_path, "[rank0]:[I1207 12:00:01.123456 4242 ProcessGroupNCCL.cpp:946] [PG ID 0 PG GUID 0(default_pg) "
               "Rank 0] ProcessGroupNCCL initialization options: TORCH_NCCL_DUMP_ON_TIMEOUT: 1, "
               "TORCH_NCCL_ENABLE_MONITORING: 1, TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC: 480\n" + _STEPS + _END)
    assert not f, _ids(f)


# --- CPython that cannot open the script (Modules/main.c pymain_run_file_obj, exit 2) ----------------------------------
def test_python_that_cannot_open_the_script_is_a_launch_failure_naming_it(tmp_path):
    f = _found(tmp_path, "WARNING:torch.distributed.run:*****\n" + "/opt/conda/bin/python: can't open file "
               "'/path/to/proj//tools/train.py': [Errno 2] No such file or directory\n" * 2 +
               "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 2) local_rank: 0 (pid: 1234) of "
               "binary: /opt/conda/bin/python\n")
    assert f and f[0].id == "LOG023" and "/path/to/proj//tools/train.py" in f[0].title, _ids(f)
    assert "line:2" in f[0].subjects, f[0].subjects


def test_a_file_that_could_not_be_opened_in_prose_of_a_healthy_run_is_no_launch_failure(tmp_path):
    # another program's message in the same words, not the interpreter's "<prog>: can't open file '<path>': [Errno N]"
    f = _found(tmp_path, "tensorboard: can't open file events.out (skipped)\n" + _STEPS + _END)
    assert not any(x.id == "LOG023" for x in f), _ids(f)


# --- Open MPI: a rank that exited without MPI_Finalize ([orterun:proc-exit-no-sync] as logs print it) ------------------
def test_mpirun_exited_due_to_a_rank_names_that_rank(tmp_path):
    f = _found(tmp_path, _STEPS + _RULE + "mpirun has exited due to process rank 2 with PID 18385 on\nnode gpu01 exiting "
               "improperly. There are three reasons this could occur:\n\n1. this process did not call \"init\" before "
               "exiting, but others in\n" + _RULE)
    assert f and f[0].severity in ("error", "warning") and "rank:2" in f[0].subjects, _ids(f)
    assert "line:7" in f[0].subjects, f[0].subjects


def test_mpirun_exited_banner_after_the_ranks_traceback_leaves_the_traceback_first(tmp_path):
    f = _found(tmp_path, _STEPS + _TB + _RULE + "mpirun has exited due to process rank 0 with PID 1 on\nnode gpu01 "
               "exiting improperly. There are three reasons this could occur:\n" + _RULE)
    assert f and f[0].id == "LOG004" and "ValueError" in f[0].title, _ids(f)


def test_an_mpi_run_that_ended_well_has_no_exit_banner_finding(tmp_path):
    f = _found(tmp_path, "$ mpirun -np 2 python train.py\n" + _STEPS + _END)
    assert not f, _ids(f)


# --- the tail's lines before a keyword line at the very end (reader.scan holds the last TAIL_BYTES back) ---------------
def test_an_error_burst_without_keywords_before_the_final_abort_is_read(tmp_path):
    text = _GLOG_PAD + ("E1207 12:01:01.123456  4242 tpu_driver.cc:311] Failed to connect to TPU worker 3\n"
                        "E1207 12:01:01.223456  4242 tpu_driver.cc:311] Failed to connect to TPU worker 3\n"
                        "Aborted (core dumped)\n")
    f = _found(tmp_path, text)
    assert f and "line:3001" in f[0].subjects, _ids(f)


def test_a_healthy_tail_after_a_keyword_line_stays_healthy(tmp_path):
    # the tail's lines are read whatever their keywords: an end line after a benign keyword line is still the end
    r = _report(tmp_path, _GLOG_PAD + "I1207 12:02:00.000001  4242 trainer.cc:99] no NCCL errors seen\n"
                "I1207 12:02:00.000002  4242 trainer.cc:99] Training completed.\n")
    assert r.extra["triage"]["health"]["verdict"] == "ended_well", (r.extra["triage"]["health"],
                                                                    [(f.id, f.title) for f in r.findings])
