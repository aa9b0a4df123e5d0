"""Round-16 wave-4 class of issue 24 (triage, 2026-12-07): a failure-looking line no rule explains, in a log that shows
the job went on after it (training progress after it running to the log's end, or then an end that says success, no
process ending badly), is reported as unexplained with its evidence at warning ("unexplained error line the job went
on after"), never as "unexplained failure"; with no later progress it stays the failure. Pure in-process."""
from __future__ import annotations

from triage_factory import found as _found


def _steps(n, prefix="[rank0]: "):
    return "".join(f"{prefix}{{'loss': {2.0 - i / 100:.3f}, 'epoch': {i / 10:.1f}}}\n" for i in range(1, n + 1))


_ODD = "[rank1]: ERROR: could not fetch shard 7\n"


def test_progress_to_the_end_after_an_unexplained_line_is_a_warning(tmp_path):
    found = _found(tmp_path, _ODD + _steps(7))
    assert [f.id for f in found] == ["LOG028"]
    f = found[0]
    assert f.severity == "warning"
    assert f.title.startswith("unexplained error line the job went on after: rank 1 printed it (line 1)")
    assert not f.title.startswith("unexplained failure")
    assert f.evidence["went_on_at"] == 8 and f.evidence["first_failure_lines"][0]["line"] == 1


def test_a_failed_exit_after_the_progress_keeps_the_failure(tmp_path):
    found = _found(tmp_path, _ODD + _steps(7) + "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
                   "E0624 16:39:03.239000 140 torch/distributed/elastic/multiprocessing/api.py:833] failed "
                   "(exitcode: 1) local_rank: 1 (pid: 4242) of binary: /usr/bin/python3\n")
    assert not any(f.title.startswith("unexplained error line the job went on after") for f in found)


def test_no_progress_after_the_line_stays_the_failure(tmp_path):
    found = _found(tmp_path, _steps(7) + _ODD)
    assert [f.id for f in found] == ["LOG028"]
    assert found[0].title.startswith("unexplained failure: rank 1 failed first")


def test_progress_that_stops_before_the_end_stays_the_failure(tmp_path):
    # progress after the line, then the log goes on without it: the log does not show the job going on to its end
    found = _found(tmp_path, _ODD + _steps(3) + "[rank0]: saving shard\n" * 5)
    assert found[0].title.startswith("unexplained failure: rank 1 failed first")


def test_progress_not_well_past_the_line_stays_the_failure(tmp_path):
    found = _found(tmp_path, _ODD + _steps(2))
    assert found[0].title.startswith("unexplained failure: rank 1 failed first")


# Batch classes (110-112, not first reads)

def test_status_table_header_is_no_failure(tmp_path):
    # b110_02: a CI bot's results table; its header names a "Failed" column
    found = _found(tmp_path, "| Tests | Passed ✅ | Skipped ⚠️ | Failed |\n"
                             "| TT-Torch Tests | 764 ran | 747 passed | 17 skipped | 0 failed |\n")
    assert not any(f.id == "LOG028" for f in found)


def test_failed_result_row_stays_a_failure(tmp_path):
    # a result row, not a header: one status cell, and the test named in it
    found = _found(tmp_path, "| test_allreduce_nccl | FAILED | RuntimeError |\n")
    assert [f.id for f in found] == ["LOG028"]
    assert found[0].title.startswith("unexplained failure")


_ZERO_DP = ("[rank0]: deepspeed.runtime.zero.utils.ZeRORuntimeException: \n"
            "The checkpoint being loaded used a DP world size of 4 but the current world size is 8. \n"
            "Automatic adjustment of ZeRO's optimizer state partitioning with a new world size is not currently "
            "supported.\n")


def test_exception_message_below_its_name_is_read_with_it(tmp_path):
    # b112_19: DeepSpeed's message starts with a newline, so its first line is printed below the exception's name
    found = _found(tmp_path, _ZERO_DP)
    assert found[0].id == "LOG024"
    assert found[0].title.startswith("the ZeRO checkpoint was saved by 4 data-parallel ranks and this job has 8")


def test_empty_exception_message_followed_by_a_frame_stays_the_exception(tmp_path):
    found = _found(tmp_path, "[rank0]: RuntimeError: \n"
                             "[rank0]:   File \"/app/train.py\", line 3, in <module>\n")
    assert not any(f.id == "LOG024" for f in found)
    assert found and found[0].severity in ("error", "warning")


_MPI_TB = ("Traceback (most recent call last):\n"
           "  File \"/work/train.py\", line 12, in <module>\n"
           "    x = parts[0][0]\n"
           "IndexError: list index out of range\n"
           "-------------------------------------------------------\n"
           "Primary job  terminated normally, but 1 process returned\n"
           "a non-zero exit code. Per user-direction, the job has been aborted.\n"
           "-------------------------------------------------------\n"
           "--------------------------------------------------------------------------\n"
           "mpirun detected that one or more processes exited with non-zero status, thus causing\n"
           "the job to be terminated. The first process to do so was:\n\n"
           "  Process name: [[35302,1],{rank}]\n"
           "  Exit code:    1\n")


def test_mpirun_report_names_the_rank_of_an_unprefixed_traceback(tmp_path):
    # b111_20: the traceback has no rank prefix; mpirun's report below it names the process
    found = _found(tmp_path, _MPI_TB.format(rank=2))
    assert found[0].id == "LOG004"
    assert found[0].title.startswith("rank 2 failed with IndexError")


def test_no_mpirun_report_keeps_the_process_unnamed(tmp_path):
    found = _found(tmp_path, _MPI_TB.split("-----")[0])
    assert found[0].id == "LOG004"
    assert found[0].title.startswith("a process failed with IndexError")
