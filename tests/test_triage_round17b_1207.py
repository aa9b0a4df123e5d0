"""Round-17 wave-2 classes of issue 24 (triage, 2026-12-07). A CI run's conclusion "failure" (a test report's
Conclusion field, a job table's cell: GitHub's check-run conclusions) is a failure with evidence, and a table of runs
that all succeeded stays quiet; pytest's own summary lines keep their readings; a watchdog message quoted with its
fields elided ("WorkNCCL(SeqNum=..., ...)") is a collective timeout whose title names no "#..." sequence. Pure
in-process."""
from __future__ import annotations

from triage_factory import failed as _failed, found as _found


_REPORT = ("# Test Report\n## Execution Information\n- **Workflow Name**: Full Test (NPU)\n- **Status**: completed\n"
           "- **Conclusion**: {c}\n\n## Job Execution Statistics\n"
           "| Index | Job Name | Status | Conclusion | Total | Passed | Failed | Skipped |\n"
           "|-------|----------|--------|------------|-------|--------|--------|---------|\n"
           "| 1 | full-16-npu-a3 | completed | {r} | 3 | {p} | {f} | 0 |\n"
           "| 2 | full-8-npu-a3 | completed | skipped | 0 | 0 | 0 | 0 |\n")


def test_a_ci_report_whose_run_failed_is_a_failure(tmp_path):
    found = _found(tmp_path, _REPORT.format(c="failure", r="failure", p=1, f=2))
    assert found[0].id == "LOG028" and found[0].title.startswith("unexplained failure")


def test_a_job_table_row_marked_timed_out_is_a_failure(tmp_path):
    found = _found(tmp_path, "| Job | Status | Conclusion |\n|---|---|---|\n| build | completed | success |\n"
                   "| multi-node-8xH100 | completed | timed_out |\n")
    assert _failed(found)


def test_a_ci_report_whose_runs_all_succeeded_is_quiet(tmp_path):
    found = _found(tmp_path, _REPORT.format(c="success", r="success", p=3, f=0))
    assert not _failed(found)


def test_failure_named_in_prose_is_no_conclusion(tmp_path):
    found = _found(tmp_path, "This PR adds a failure detector for the elastic agent.\n"
                   "Test plan: the conclusion of the design doc holds; the job table is unchanged.\n")
    assert not _failed(found)


def test_pytest_summaries_keep_their_readings(tmp_path):
    bad = _found(tmp_path, "=========================== short test summary info ============================\n"
                 "FAILED tests/test_dist.py::test_allreduce - AssertionError: assert 1 == 2\n"
                 "========================= 1 failed, 3 passed in 12.34s =========================\n", "a.log")
    good = _found(tmp_path, "tests/test_dist.py ....                                                  [100%]\n"
                  "================== 4 passed, 1 xfailed, 2 warnings in 12.34s ==================\n", "b.log")
    assert _failed(bad) and not _failed(good)


def test_a_quoted_watchdog_message_with_elided_fields(tmp_path):
    found = _found(tmp_path, 'It dies after 30 minutes with "Watchdog caught collective operation timeout: '
                   'WorkNCCL(SeqNum=..., OpType=ALLREDUCE, ...) ran for 1800000 milliseconds before timing out."\n')
    assert found[0].id == "LOG001"
    assert "#..." not in found[0].title and "ALLREDUCE" in found[0].title


def test_a_watchdog_line_with_its_sequence_number_keeps_it(tmp_path):
    found = _found(tmp_path, "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=37, OpType=ALLREDUCE, "
                   "Timeout(ms)=600000) ran for 600321 milliseconds before timing out.\n")
    assert found[0].id == "LOG001" and "ALLREDUCE #37" in found[0].title


# SkyPilot's logger ('%(levelname).1s %(asctime)s %(filename)s:%(lineno)d] %(message)s', '%m-%d %H:%M:%S'): an I-level
# line is a notice whatever words it holds (the controller killing its own process after the job succeeded); its E level
# stays a failure
_SKY_OK = ("(sky-a412, pid=635293) I 11-14 22:18:29 state.py:425] Job succeeded.\n"
           "(sky-a412, pid=635293) I 11-14 22:18:35 controller.py:593] Killing controller process 635841.\n"
           "(sky-a412, pid=635293) I 11-14 22:18:35 controller.py:601] Controller process 635841 killed.\n")


def test_skypilot_info_lines_are_no_failure(tmp_path):
    assert not _failed(_found(tmp_path, _SKY_OK))


def test_skypilot_error_lines_stay_a_failure(tmp_path):
    found = _found(tmp_path, "(sky-a412, pid=1) E 11-14 22:18:35 controller.py:593] Failed to launch the cluster: "
                   "RuntimeError: boom\n")
    assert _failed(found)


# An XLA/TensorFlow status printed alone ("Internal: ...", "FAILED_PRECONDITION: ...") is a failure line; the word in a
# sentence is not
def test_an_xla_status_line_is_a_failure(tmp_path):
    found = _found(tmp_path, "Internal: Invalid system configuration: 2x2 host topology with 0 missing hosts, but 1 hosts "
                   "in total.\n")
    # a failure line; since round 19 wave 5 its class is known (the TPU runtime's host topology: LOG023), before LOG028
    assert found[0].id == "LOG023" and "1 of its 4 hosts" in found[0].title, [(f.id, f.title) for f in found]


def test_internal_in_a_sentence_is_no_status(tmp_path):
    found = _found(tmp_path, "The internal: interconnect is NVLink; Internal APIs were used for the test.\n"
                   "Data loss prevention is handled elsewhere.\n")
    assert not _failed(found)


# glog's failure-signal handler banner is a failure line whatever level a framework's logger relays it at (Paddle: W);
# the same words in a sentence are not
_GLOG_SIG = ('W0529 18:27:06.378338 40642 init.cc:217] *** Aborted at 1590748026 (unix time) try "date -d @1590748026" if '
             'you are using GNU date ***\n'
             "W0529 18:27:06.380875 40650 init.cc:217] *** SIGTERM (@0x1f4000075c3) received by PID 40650 (TID "
             "0x7f2cd11ed700) from PID 30147; stack trace: ***\n"
             "W0529 18:27:06.382815 40650 init.cc:217]     @     0x7f2d46661160 (unknown)\n")


def test_glog_failure_signal_banner_under_a_warning_level_is_a_failure(tmp_path):
    assert _failed(_found(tmp_path, _GLOG_SIG))


def test_a_signal_named_in_a_warning_is_no_banner(tmp_path):
    found = _found(tmp_path, "W0529 18:27:06.378338 40642 init.cc:217] SIGTERM handler installed; the job aborted at "
                   "step 0 last time (unix time 1590748026)\n")
    assert not _failed(found)


# Python source in a log (a pasted script, a PR diff) is code: a raise statement, a print/log call with a literal; the
# exception line a traceback prints after its raise, and what a script printed, stay failures
def test_python_source_with_failure_words_is_no_failure(tmp_path):
    found = _found(tmp_path, "+            ):\n+                raise ValueError(\n+                    \"process_id should be "
                   "None for tpu backend.\"\n+                )\n"
                   "    if not torch.cuda.is_available():\n        log(\"ERROR: CUDA not available\")\n"
                   "        logger.error(f\"rank {rank} failed\")\n        sys.exit(1)\n")
    assert not _failed(found)


def test_a_raise_in_a_traceback_and_printed_errors_stay_failures(tmp_path):
    tb = _found(tmp_path, "Traceback (most recent call last):\n  File \"launch.py\", line 67, in launch\n"
                "    raise ValueError(\"dist_url=auto cannot work with distributed training.\")\n"
                "ValueError: dist_url=auto cannot work with distributed training.\n", "a.log")
    printed = _found(tmp_path, "[12:00:01] Starting simple NCCL test\n[12:00:01] ERROR: CUDA not available\n", "b.log")
    assert tb[0].id == "LOG004" and _failed(printed)
