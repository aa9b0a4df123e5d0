"""Round-15 wave-2 classes of issue 24 (triage, 2026-12-06): trigger and quiet cases whose assertions can fail.
Logs are written from the formats the sources print (torch's reducer.cpp and GlooDeviceFactory.cpp, Open MPI's report
as users' logs show it); pure in-process tests."""
from __future__ import annotations

from triage_factory import found as _found


_COUNT = ("[rank{a}]: RuntimeError: DDP expects same model across all ranks, but Rank {a} has {n} params, while rank {b} "
          "has inconsistent {m} params.\n")
_EXIT = ("E1206 12:00:00.000000 77 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) "
         "local_rank: {r} (pid: 123) of binary: /usr/bin/python3\n")


# --- DDP's construction check: each rank prints its own side; both counts, a culprit only from a majority -----------
def test_model_mismatch_majority_names_the_odd_rank(tmp_path):
    text = (_COUNT.format(a=1, n=200, b=0, m=198) + _COUNT.format(a=2, n=200, b=0, m=198)
            + _COUNT.format(a=0, n=198, b=1, m=200) + _EXIT.format(r=1))
    top = _found(tmp_path, text)[0]
    assert top.id == "LOG027"
    assert "rank 0 has 198 params" in top.title and "ranks 1, 2 have 200 params" in top.title
    assert "rank 0 is the odd one out" in top.title
    assert "rank:0" in top.subjects and "rank:1" not in top.subjects


def test_model_mismatch_two_ranks_names_no_culprit(tmp_path):
    # torchrun's root cause (local rank 1 failed first) must not make rank 1 the culprit
    text = _COUNT.format(a=1, n=200, b=0, m=198) + _COUNT.format(a=0, n=198, b=1, m=200) + _EXIT.format(r=1)
    top = _found(tmp_path, text)[0]
    assert top.id == "LOG027"
    assert "rank 0 has 198 params" in top.title and "rank 1 has 200 params" in top.title
    assert "no majority" in top.title and "odd one out" not in top.title
    assert "rank:0" in top.subjects and "rank:1" in top.subjects


def test_model_mismatch_one_line_is_both_sides(tmp_path):
    top = _found(tmp_path, _COUNT.format(a=3, n=10, b=0, m=12))[0]
    assert "rank 3 has 10 params" in top.title and "rank 0 has 12 params" in top.title and "no majority" in top.title


_SIZES = ("RuntimeError: [{a}]: params[0] in this process with sizes [32, 3, 3, 3] appears not to match sizes of the "
          "same param in process 0.\n")


def test_model_sizes_agreeing_ranks_point_at_rank_0(tmp_path):
    top = _found(tmp_path, _SIZES.format(a=1) + _SIZES.format(a=2))[0]
    assert top.id == "LOG027" and "rank 0 is the odd one out" in top.title and "rank:0" in top.subjects


def test_model_sizes_one_rank_names_no_culprit(tmp_path):
    top = _found(tmp_path, _SIZES.format(a=1))[0]
    assert top.id == "LOG027" and "no majority" in top.title and "odd one out" not in top.title


# --- Gloo's device with neither interface nor host name: an address problem (LOG025), not a bare exception --------
def test_gloo_empty_interface_or_hostname_is_an_address_problem(tmp_path):
    text = ('Traceback (most recent call last):\n  File "train.py", line 188, in run\n'
            "    dist.init_process_group(backend='gloo', init_method='env://', world_size=1, rank=0)\n"
            "RuntimeError: GlooDeviceFactory::makeUVDevice(): interface or hostname can't be empty\n")
    assert _found(tmp_path, text)[0].id == "LOG025"


def test_other_gloo_runtime_error_is_not_an_address_problem(tmp_path):
    text = ('Traceback (most recent call last):\n  File "train.py", line 188, in run\n'
            "    dist.init_process_group(backend='gloo', init_method='env://', world_size=1, rank=0)\n"
            "RuntimeError: makeDeviceForHostname(): unsupported gloo device\n")
    assert _found(tmp_path, text)[0].id != "LOG025"


# --- Open MPI's first-failed-process report past a large log's head (prefilter keywords) -------------------------
_MPI = ("--------------------------------------------------------------------------\n"
        "mpirun detected that one or more processes exited with non-zero status, thus causing\n"
        "the job to be terminated. The first process to do so was:\n\n"
        "  Process name: [[35302,1],2]\n"
        "  Exit code:    3\n"
        "--------------------------------------------------------------------------\n")


def _big(mid):
    head = "".join(f"epoch 1 step {i} loss 0.{i % 97:02d} lr 0.001 throughput 123.4 samples/s\n" for i in range(2000))
    tail = "".join(f"cleanup line {i} removing temporary shard file /scratch/tmp/shard_{i}.bin ok\n" for i in range(2000))
    return head + mid + tail


def test_open_mpi_report_in_the_middle_of_a_large_log_names_the_rank(tmp_path):
    text = _big(_MPI)
    assert len(text.encode()) > 4 * 65536
    top = _found(tmp_path, text)[0]
    assert top.id == "LOG004" and "rank:2" in top.subjects and "code 3" in top.title


def test_large_log_without_the_report_names_no_rank(tmp_path):
    found = _found(tmp_path, _big("  Exit code:    3\n"))
    assert not any(f.id == "LOG004" for f in found)


# --- an NCCL WARN the job went on from (no NCCL error, no failure, more lines after): a warning, not the failure ----
_IBV = "[2026-09-11 23:05:42] devvm7508:2914395:2914395 [0] misc/ibvwrap.cc:185 (wrap_ibv_alloc_pd) NCCL WARN lib wrapper not initialized.\n"
_ON = ("[rank0]:[titan] 2026-09-11 23:05:43,256 - torchtitan.distributed.parallel_dims - INFO - Building device mesh\n"
       "[rank0]:[titan] 2026-09-11 23:05:44,151 - torchtitan.tools.utils - INFO - [GC] Initial GC collection took 0.00 s\n"
       "[rank0]:[titan] 2026-09-11 23:05:44,762 - torchtitan.trainer - INFO - Building llama3 debugmodel\n")


def test_nccl_warn_then_the_job_goes_on_is_a_warning(tmp_path):
    found = _found(tmp_path, "NCCL version 2.30.7+cuda13.3\n" + _IBV + _ON)
    assert found and found[0].id == "LOG009" and found[0].severity == "warning" and "went on" in found[0].title


def test_nccl_warn_then_an_nccl_error_stays_an_error(tmp_path):
    text = (_IBV + _ON + "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
            "ProcessGroupNCCL.cpp:1331, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.18.1\n")
    top = _found(tmp_path, text)[0]
    assert top.id == "LOG009" and top.severity == "error"


def test_nccl_warn_as_the_last_line_stays_an_error(tmp_path):
    top = _found(tmp_path, "NCCL version 2.30.7+cuda13.3\n" + _IBV)[0]
    assert top.id == "LOG009" and top.severity == "error"


# --- nccl-tests' own failure line (src/common.h NCCLCHECK): the NCCL result it names -----------------------------
def test_nccl_tests_failure_line_is_an_nccl_error(tmp_path):
    text = ("#   Rank  0 Pid 108039 on ip-0AB85F07 device  0 [0x00] Tesla V100-PCIE-16GB\n"
            "ip-0AB85F07: Test NCCL failure common.cu:775 'internal error'\n")
    top = _found(tmp_path, text)[0]
    assert top.id == "LOG009" and top.severity == "error"


def test_nccl_tests_summary_is_not_an_nccl_error(tmp_path):
    text = ("#   Rank  0 Pid 108039 on ip-0AB85F07 device  0 [0x00] Tesla V100-PCIE-16GB\n"
            "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 12.34\n")
    assert not any(f.id == "LOG009" for f in _found(tmp_path, text))


# --- watchdog timeouts at different sequence numbers with no majority: each rank's own collective is named ---------
_WD = ("[rank{r}]:[E ProcessGroupNCCL.cpp:563] [Rank {r}] Watchdog caught collective operation timeout: "
       "WorkNCCL(SeqNum={s}, OpType={o}, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600010 milliseconds "
       "before timing out.\n")


def test_watchdog_at_different_seqnums_names_each(tmp_path):
    text = _WD.format(r=1, s=313, o="_ALLGATHER_BASE") + _WD.format(r=0, s=315, o="ALLREDUCE")
    top = _found(tmp_path, text)[0]
    assert top.id == "LOG001" and "different collectives" in top.title
    assert "rank 0 in ALLREDUCE #315" in top.title and "rank 1 in _ALLGATHER_BASE #313" in top.title


def test_watchdog_at_one_seqnum_names_it(tmp_path):
    text = _WD.format(r=1, s=313, o="ALLREDUCE") + _WD.format(r=0, s=313, o="ALLREDUCE")
    top = _found(tmp_path, text)[0]
    assert top.id == "LOG001" and "in ALLREDUCE #313" in top.title and "different collectives" not in top.title


# --- ProcessGroupNCCL's heartbeat monitor: the watchdog thread hung, not a collective -------------------------------
def test_heartbeat_monitor_timeout_is_the_stuck_watchdog(tmp_path):
    text = "".join(f"[rank{r}]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank {r}] Heartbeat monitor timed out! Process will be "
                   f"terminated after dumping debug info. workMetaList_.size()=1\n" for r in (0, 1))
    top = _found(tmp_path, text)[0]
    assert top.id == "LOG001" and "watchdog got stuck" in top.title and not top.title.startswith("collective timeout")
