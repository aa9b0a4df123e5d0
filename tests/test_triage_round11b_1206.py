"""Round-11 wave-2 classes of issue 24 (triage, 2026-12-06): trigger and quiet cases whose assertions can fail.
Logs are written from the formats users' logs show (no logs copied); pure in-process tests."""
from __future__ import annotations

from ddpdoctor.triage.api import triage_paths


def _found_text(tmp_path, text):
    p = tmp_path / "job.log"
    p.write_text(text, encoding="utf-8")
    return [f for f in triage_paths([str(p)]).sorted_findings() if f.severity in ("error", "warning")]


def _first(tmp_path, text):
    found = _found_text(tmp_path, text)
    assert found, "no finding"
    return found[0]


# --- launchers that name the rank whose process ended (batches 75, 76) -------------------------------------------
_COMPOSER_HEAD = ("2023-04-24 16:03:12,379: rank0[1003409][MainThread]: DEBUG: composer.utils.dist: Initializing "
                  "torch.dist: global_rank=0, local_rank=0, world_size=8, local_world_size=8, node_rank=0\n")


def test_composer_launcher_names_the_crashed_rank_and_its_exit_code(tmp_path):
    f = _first(tmp_path, _COMPOSER_HEAD + "ERROR:composer.cli.launcher:Rank 1 crashed with exit code 1.\n"
               "Waiting up to 30 seconds for all training processes to terminate. Press Ctrl-C to exit immediately.\n")
    assert f.id == "LOG004" and "rank:1" in f.subjects and "exited with code 1" in f.title


def test_composer_launcher_negative_code_is_the_signal(tmp_path):
    f = _first(tmp_path, "Building trainer...\nERROR:composer.cli.launcher:Rank 2 crashed with exit code -7.\n")
    assert "rank:2" in f.subjects and "SIGBUS" in f.title


def test_composer_launcher_global_rank_format(tmp_path):
    f = _first(tmp_path, "ERROR:composer.cli.launcher:Global rank 0 (PID 208865) exited with code -11\n")
    assert "rank:0" in f.subjects and "SIGSEGV" in f.title


def test_paddle_launch_abort_names_the_aborted_ranks(tmp_path):
    f = _first(tmp_path, "INFO 2021-05-24 17:17:14,611 launch_utils.py:307] terminate all the procs\n"
               "ERROR 2021-05-24 17:17:14,611 launch_utils.py:545] ABORT!!! Out of all 4 trainers, the trainer process "
               "with rank=[3] was aborted. Please check its log.\n")
    assert f.id == "LOG004" and "rank:3" in f.subjects and "paddle" in f.title
    f = _first(tmp_path, "ERROR 2024-08-30 08:43:09,589 launch_utils.py:642] ABORT!!! Out of all 2 trainers, the trainer "
               "process with rank=[0, 1] was aborted. Please check its log.\n")
    assert f.id == "LOG004" and "rank:0" in f.subjects


def test_composer_launcher_exit_code_zero_is_no_failure(tmp_path):
    found = _found_text(tmp_path, _COMPOSER_HEAD + "[batch=1/10]: Train trainer/global_step: 0\n"
                        "ERROR:composer.cli.launcher:Rank 1 crashed with exit code 0.\n")
    assert not [x for x in found if x.id == "LOG004" or "rank:1" in x.subjects]


# --- UCX's InfiniBand completion error and JAX's coordination barrier (catalogued, batches 75, 76) ----------------
def test_ucx_transport_retry_count_exceeded_is_a_known_error(tmp_path):
    f = _first(tmp_path, "[master:19546:0:19546] ib_mlx5_log.c:139  Transport retry count exceeded on mlx5_0:1/IB "
               "(synd 0x15 vend 0x81 hw_synd 0/0)\n[master:19546:0:19546] ib_mlx5_log.c:139  DCI QP 0xa9f wqe[0]: SEND "
               "s-e [rqpn 0xa66 rlid 703] [inl len 18]\n")
    assert f.id == "LOG027" and f.severity == "error" and "retry count exceeded" in f.title


def test_ucx_retry_settings_in_a_healthy_log_are_no_failure(tmp_path):
    found = _found_text(tmp_path, "host:1:1 [0] NCCL INFO NCCL_IB_RETRY_CNT set by environment to 7\n"
                        "UCX_RC_RETRY_COUNT=7 UCX_TLS=rc,sm\n" + "Epoch 1 step 10 loss 2.345\nEpoch 1 step 20 loss 2.101\n")
    assert not [x for x in found if x.severity == "error" or x.title.startswith("unexplained failure")]


def test_jax_connect_barrier_timeout_is_the_start_up_barrier(tmp_path):
    f = _first(tmp_path, "  File \"/root/train.py\", line 89, in main\n"
               "    jax.distributed.initialize(coordinator_address=\"localhost\", num_processes=8, process_id=0)\n"
               "jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: Barrier timed out. Barrier_id: "
               "PjRT_Client_Connect. Timed out task names:\n/job:jax_worker/replica:0/task:1\n")
    assert f.id == "LOG018" and "jax.distributed.initialize" in f.title


def test_jax_connected_log_is_no_failure(tmp_path):
    found = _found_text(tmp_path, "I0101 00:00:00.000000 1 client.cc:123] Connected to distributed JAX controller\n"
                        "Epoch 1 step 10 loss 2.345\nEpoch 1 step 20 loss 2.101\n")
    assert not [x for x in found if x.id == "LOG018" or x.severity == "error"]


# --- XLA's rendezvous watchdog (catalogued, batch 75) ------------------------------------------------------------
_STUCK = ("2024-07-29 17:14:59.920189: E external/xla/xla/service/rendezvous.cc:38] This thread has been waiting for "
          "`initialize clique for rank 6; clique=devices=[0,1]; stream=0; run_id=1` for 10 seconds and may be stuck. "
          "Expected 8 threads to join the rendezvous, but not all of them arrived on time.\n")


def test_xla_rendezvous_stuck_last_in_the_log_is_a_failure(tmp_path):
    found = _found_text(tmp_path, _STUCK)
    assert [x for x in found if x.severity == "error" or x.title.startswith("unexplained failure")]


def test_xla_rendezvous_termination_timeout_is_a_failure(tmp_path):
    found = _found_text(tmp_path, "F0101 00:00:00.000000 1 rendezvous.cc:140] [id=0] Termination timeout for "
                        "`initialize clique for rank 0` of 40 seconds exceeded. Exiting to ensure a consistent program "
                        "state. Expected 8 threads to join the rendezvous, but only 4 of them arrived on time.\n")
    assert [x for x in found if x.severity == "error" or x.title.startswith("unexplained failure")]


def test_xla_rendezvous_unstuck_then_progress_is_no_failure(tmp_path):
    found = _found_text(tmp_path, _STUCK + "E0101 00:00:10.000000 1 rendezvous.cc:118] [id=0] This thread is unstuck "
                        "waiting for `initialize clique for rank 6` after 12.5s. Threads joined rendezvous with "
                        "significant delay, system can be overloaded and theads make progess at different rate. Warning "
                        "above was a false-positive. Perhaps the timeout is too short.\n"
                        "Epoch 1 step 10 loss 2.345\nEpoch 1 step 20 loss 2.101\n")
    assert not [x for x in found if x.severity == "error" or x.title.startswith("unexplained failure")]


# --- aws-ofi-nccl's endpoint set-up failures (catalogued, batch 75) ---------------------------------------------
def test_aws_ofi_nccl_endpoint_setup_failure_is_an_nccl_system_error(tmp_path):
    f = _first(tmp_path, "[1,23]<stdout>:ip-172-32-45-165:72593:73427 [7] NCCL INFO Ring 00 : 23 -> 24 [send] via "
               "NET/AWS Libfabric/0\n[1,23]<stdout>:ip-172-32-45-165:72593:73427 [7] create_nccl_ofi_component:459 "
               "NCCL WARN NET/OFI Couldn't open AV. RC: -22, ERROR: Invalid argument\n")
    assert f.id == "LOG009" and f.severity == "error" and "rank:23" in f.subjects


def test_aws_ofi_nccl_set_up_info_lines_are_no_failure(tmp_path):
    found = _found_text(tmp_path, "algo-1:462:462 [0] NCCL INFO NET/OFI Selected Provider is efa\n"
                        "algo-1:462:462 [0] NCCL INFO Using network AWS Libfabric\n"
                        "Epoch 1 step 10 loss 2.345\nEpoch 1 step 20 loss 2.101\n")
    assert not [x for x in found if x.severity == "error" or x.title.startswith("unexplained failure")]
