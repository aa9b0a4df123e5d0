"""Round-13 classes of issue 24 (triage, 2026-12-06): trigger and quiet cases whose assertions can fail.
Logs are written from the formats the sources print (torch 2.13.0's torchrun and ProcessGroupGloo.cpp strings,
facebookincubator/gloo @cc44198 gloo/transport/tcp, Cloud Build's step prefix); pure in-process tests."""
from __future__ import annotations

from ddpdoctor.triage.api import triage_paths


def _found_text(tmp_path, text):
    p = tmp_path / "job.log"
    p.write_text(text, encoding="utf-8")
    return [f for f in triage_paths([str(p)]).sorted_findings() if f.severity in ("error", "warning")]


def _ranks(f):
    return [int(s.split(":", 1)[1]) for s in f.subjects if s.startswith("rank:")]


def _first(tmp_path, text):
    found = _found_text(tmp_path, text)
    assert found, "no finding"
    return found[0]


# --- a job stopped from outside after its progress stopped: a hang ----------------------------------------------
_BANNER = ("W1206 14:01:00.123000 12345 torch/distributed/run.py:793] Setting OMP_NUM_THREADS environment variable for "
           "each process to be 1 in default, to avoid your system being overloaded, please further tune the variable "
           "for optimal performance in your application as needed.\n")
_STOP = ("W1206 14:03:40.456000 12345 torch/distributed/elastic/agent/server/api.py:704] Received Signals.SIGTERM death "
         "signal, shutting down workers\n"
         "W1206 14:03:40.457000 12345 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 12400 closing "
         "signal SIGTERM\n"
         "torch.distributed.elastic.multiprocessing.api.SignalException: Process 12345 got signal: 15\n")


def _stamped(times):
    return "".join(f"2026-12-06 {t},000 INFO [1, {200 * (i + 1):5d}] loss: {2.2 - 0.1 * i:.3f}\n"
                   for i, t in enumerate(times))


def test_stop_after_stamped_progress_stopped_names_the_hang(tmp_path):
    f = _first(tmp_path, _BANNER + _stamped(["14:01:20", "14:01:25", "14:01:30", "14:01:35", "14:02:05"]) + _STOP)
    assert f.id == "LOG026" and "a hang is likely" in f.title and "95 s" in f.title
    assert "py-spy dump" in f.fix and "timeout=timedelta" in f.fix


def test_stop_while_progress_went_on_stays_a_plain_stop(tmp_path):
    f = _first(tmp_path, _BANNER + _stamped(["14:03:10", "14:03:15", "14:03:20", "14:03:25", "14:03:38"]) + _STOP)
    assert f.id == "LOG026" and "hang" not in f.title


def test_stop_after_a_tqdm_bar_stopped_is_a_guessed_hang(tmp_path):
    bar = ("{'loss': 1.2345, 'grad_norm': 3.2, 'learning_rate': 1e-05, 'epoch': 0.05}\n"
           " 10%|█         | 20/200 [00:40<06:00,  2.00s/it]\n")
    f = _first(tmp_path, _BANNER + bar + _STOP)
    assert f.id == "LOG026" and "(a guess)" in f.title and "a hang is likely" in f.title


def test_stop_after_a_bar_that_ran_up_to_it_is_no_hang(tmp_path):
    bar = " 90%|█████████ | 180/200 [02:30<00:16,  0.83s/it]\n"
    f = _first(tmp_path, _BANNER + bar + _STOP)
    assert f.id == "LOG026" and "hang" not in f.title


def test_stop_glued_to_a_bar_that_had_stopped_is_a_guessed_hang(tmp_path):
    """A tqdm frame ends with a carriage return, so the launcher's stamped signal line is glued to the last frame
    ("29/60 [00:19<..]W1206 ... death signal", held-out sets 13 and 14): the stamp is the signal's, not the frame's."""
    bar = (" 43%|████▎     | 26/60 [00:00<00:01, 28.61it/s]\n"
           " 48%|████▊     | 29/60 [00:19<00:01, 28.61it/s]")
    f = _first(tmp_path, _BANNER + bar + _STOP)
    assert f.id == "LOG026" and "(a guess)" in f.title and "a hang is likely" in f.title


def test_stop_glued_to_a_bar_that_ran_up_to_it_is_no_hang(tmp_path):
    bar = " 90%|█████████ | 54/60 [02:35<00:06,  0.83s/it]"
    f = _first(tmp_path, _BANNER + bar + _STOP)
    assert f.id == "LOG026" and "hang" not in f.title


def test_stop_with_unstamped_progress_says_the_log_cannot_tell(tmp_path):
    f = _first(tmp_path, _BANNER + "[1,   200] loss: 2.201\n[1,   400] loss: 1.902\n" + _STOP)
    # round 15: the banner's and the stop's own stamps bound the silence (was "cannot be told")
    assert f.id == "LOG026" and "hang" not in f.title and "at most" in f.title and "a bound" in f.title


# --- monitored_barrier names the ranks that never arrived -------------------------------------------------------
def test_monitored_barrier_names_the_missing_ranks(tmp_path):
    f = _first(tmp_path, "Traceback (most recent call last):\n  File \"train.py\", line 30, in <module>\n"
               "    dist.monitored_barrier(wait_all_ranks=True)\n"
               "RuntimeError: Ranks 1, 3 failed to pass monitoredBarrier in 30000 ms\n")
    assert f.id == "LOG001" and _ranks(f) == [1, 3] and "never reached monitored_barrier" in f.title


def test_monitored_barrier_with_rank_prefix_names_the_missing_rank_not_rank_0(tmp_path):
    f = _first(tmp_path, "[rank0]: RuntimeError: [Rank 0]: Rank 1 failed to pass monitoredBarrier in 30000 ms\n")
    assert f.id == "LOG001" and _ranks(f) == [1]


def test_monitored_barrier_after_the_missing_ranks_own_crash_is_that_crash(tmp_path):
    f = _first(tmp_path, "[rank1]: Traceback (most recent call last):\n[rank1]:   File \"train.py\", line 50, in <module>\n"
               "[rank1]:     x = batch['img']\n[rank1]: KeyError: 'img'\n"
               "[rank0]: RuntimeError: [Rank 0]: Rank 1 failed to pass monitoredBarrier in 30000 ms\n")
    assert f.id == "LOG004" and _ranks(f) == [1]


# --- Gloo's own sockets: the peer's address, its listener, not MASTER_ADDR/PORT ----------------------------------
_GLOO = "RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp"


def test_gloo_connect_failure_names_the_remote_address_it_prints(tmp_path):
    f = _first(tmp_path, "RuntimeError: Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/tcp/pair.cc:144]"
               " timed out connecting: SO_ERROR: Connection refused, remote=[10.0.0.2]:41234\n")
    assert f.id == "LOG008" and "10.0.0.2:41234" in f.title and "MASTER_ADDR" not in f.title


def test_c10d_store_refusal_keeps_the_store_wording(tmp_path):
    f = _first(tmp_path, "torch.distributed.DistNetworkError: The client socket has failed to connect to "
               "[node-a]:29500 (errno: 111 - Connection refused).\n")
    assert f.id == "LOG008" and "Gloo" not in f.title


def test_gloo_bind_in_use_is_gloos_listener_not_master_port(tmp_path):
    f = _first(tmp_path, _GLOO + "/socket.cc:95] rv != -1. -1 vs -1. bind: Address already in use\n")
    assert f.id == "LOG007" and "Gloo" in f.title and "rendezvous port" not in f.title


def test_c10d_bind_in_use_stays_the_rendezvous_port(tmp_path):
    f = _first(tmp_path, "[W socket.cpp:436] [c10d] The server socket has failed to bind to [::]:29500 (errno: 98 - "
               "Address already in use).\nRuntimeError: Address already in use\n")
    assert f.id == "LOG007" and "rendezvous port" in f.title


def test_gloo_connect_to_self_is_a_known_error(tmp_path):
    f = _first(tmp_path, _GLOO + "/device.cc:311] rv != 0. 0 vs 0. Cannot connect to self\n")
    assert f.id == "LOG027" and "facebookincubator/gloo" in f.title


def test_gloo_socket_closed_names_the_peer_address(tmp_path):
    f = _first(tmp_path, "[rank1]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:797] Socket closed "
               "[10.0.0.2]:41234\n")
    assert f.id == "LOG022" and "10.0.0.2" in f.title


def test_gloo_closed_by_peer_after_a_rank_crash_is_that_crash(tmp_path):
    f = _first(tmp_path, "[rank0]: Traceback (most recent call last):\n[rank0]:   File \"train.py\", line 50, in <module>\n"
               "[rank0]:     x = batch['img']\n[rank0]: KeyError: 'img'\n"
               "[rank1]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer "
               "[10.0.0.2]:41234\n")
    assert f.id == "LOG004" and _ranks(f) == [0]


# --- a line prefix that is not a rank ----------------------------------------------------------------------------
def test_cloud_build_step_number_is_not_a_rank(tmp_path):
    f = _first(tmp_path, "3: InvalidArgument                           Traceback (most recent call last)\n"
               "Step #3: Input In [22], in <cell line: 1>()\nStep #3: ----> 1 custom_container_training_job.run(\n"
               "Step #3:       2     args=args,\n")
    assert "rank 3" not in f.title and 3 not in _ranks(f)


def test_srun_label_stays_a_rank(tmp_path):
    f = _first(tmp_path, "3: Traceback (most recent call last):\n3:   File \"train.py\", line 9, in <module>\n"
               "3:     x = batch['img']\n3: KeyError: 'img'\n")
    assert _ranks(f) == [3]


# --- batch 82's classes: fatal lines in other tools' words -------------------------------------------------------
_PROGRESS_TAIL = "INFO:root:Epoch[0] Batch [20] Speed: 26.81 samples/sec accuracy=0.109747\n"


def test_mpich_abort_is_a_failure_of_the_rank_it_names(tmp_path):
    f = _first(tmp_path, "application called MPI_Abort(MPI_COMM_WORLD, 1) - process 3\n")
    assert f.id == "LOG028" and _ranks(f) == [3]


def test_mpich_abort_in_another_communicator_names_no_rank(tmp_path):
    f = _first(tmp_path, "application called MPI_Abort(comm=0x84000002, 1) - process 0\n")
    assert f.id == "LOG028" and _ranks(f) == []


def test_dmlc_fatal_log_is_a_failure(tmp_path):
    f = _first(tmp_path, "[08:41:20] /home/u/mxnet/dmlc-core/include/dmlc/./logging.h:300: [08:41:20] "
               "src/kvstore/kvstore.cc:37: compile with USE_DIST_KVSTORE=1 to use dist_sync\n")
    assert f.id == "LOG028"


def test_dmlc_info_log_is_no_failure(tmp_path):
    found = _found_text(tmp_path, "[08:41:20] src/io/local_filesys.cc:66: LocalFileSystem.GetPathInfo: data/train.rec\n"
                        + _PROGRESS_TAIL)
    assert not [f for f in found if f.severity == "error" or f.id == "LOG028"]


def test_glog_fatal_line_is_a_failure(tmp_path):
    f = _first(tmp_path, "F20220801 07:29:34.701110  2256 fs_coordinator.cc:42] Invalid tracker path: root://graphlearn/\n"
               "*** Check failure stack trace: ***\n")
    assert f.id == "LOG028"


def test_glog_info_line_is_no_failure(tmp_path):
    found = _found_text(tmp_path, "I20220801 07:29:34.701110  2256 fs_coordinator.cc:42] tracker path: root://graphlearn/\n"
                        + _PROGRESS_TAIL)
    assert not [f for f in found if f.id == "LOG028"]


def test_a_traceback_run_into_one_line_is_a_failure(tmp_path):
    f = _first(tmp_path, "/w/launch.py:148: DeprecationWarning: setDaemon() is deprecated thread.setDaemon(True) Traceback "
               "(most recent call last): File “train.py”, line 5, in import dgl ModuleNotFoundError: No module named ‘dgl’ Called "
               "process error Command ‘ssh -o StrictHostKeyChecking=no 192.168.85.128 ...’\n")
    assert f.id in ("LOG028", "LOG004")


def test_a_deprecation_warning_alone_is_no_failure(tmp_path):
    found = _found_text(tmp_path, "/w/launch.py:148: DeprecationWarning: setDaemon() is deprecated thread.setDaemon(True)\n"
                        + _PROGRESS_TAIL)
    assert not [f for f in found if f.id in ("LOG028", "LOG004")]


# --- mp.spawn: a process SIGTERM ended is a stop from outside -----------------------------------------------------
_SPAWN_TB = ("Traceback (most recent call last):\n  File \"train.py\", line 80, in <module>\n"
             "    mp.spawn(main_worker, nprocs=4, args=(args,))\n"
             "  File \"/usr/lib/python3/site-packages/torch/multiprocessing/spawn.py\", line 140, in join\n"
             "    raise ProcessExitedException(\n")


def test_spawn_process_ended_by_sigterm_is_a_stop_from_outside(tmp_path):
    f = _first(tmp_path, _SPAWN_TB + "torch.multiprocessing.spawn.ProcessExitedException: process 1 terminated with "
               "signal SIGTERM\n")
    assert f.id == "LOG026" and _ranks(f) == [1] and "from outside" in f.title


def test_spawn_process_ended_by_sigkill_stays_the_oom_reading(tmp_path):
    f = _first(tmp_path, _SPAWN_TB + "torch.multiprocessing.spawn.ProcessExitedException: process 1 terminated with "
               "signal SIGKILL\n")
    assert f.id != "LOG026"


def test_monitored_barrier_error_on_a_waiting_rank_points_at_rank_0(tmp_path):
    f = _first(tmp_path, "[rank2]: RuntimeError: Rank 2 successfully reached monitoredBarrier, but received errors while "
               "waiting for send/recv from rank 0. Please check rank 0 logs for faulty rank.\n")
    assert f.id == "LOG022" and "rank 0 failed first" in f.title


def test_monitored_barrier_error_after_rank_0s_own_crash_is_that_crash(tmp_path):
    f = _first(tmp_path, "[rank0]: Traceback (most recent call last):\n[rank0]:   File \"train.py\", line 9, in <module>\n"
               "[rank0]:     x = batch['img']\n[rank0]: KeyError: 'img'\n"
               "[rank2]: RuntimeError: Rank 2 successfully reached monitoredBarrier, but received errors while "
               "waiting for send/recv from rank 0. Please check rank 0 logs for faulty rank.\n")
    assert f.id == "LOG004" and _ranks(f) == [0]


def test_gloo_bind_cannot_assign_is_worded_as_an_address_not_a_name(tmp_path):
    f = _first(tmp_path, _GLOO + "/socket.cc:95] rv != -1. -1 vs -1. bind: Cannot assign requested address\n")
    assert f.id == "LOG025" and "could not bind its listening socket" in f.title and "resolve" not in f.title


def test_gloo_unresolved_interface_keeps_its_own_wording(tmp_path):
    f = _first(tmp_path, "RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:83] "
               "Unable to find address for: eth0\n")
    assert f.id == "LOG025" and "could not bind" not in f.title


# --- HIP's fat-binary check (ROCm/hipamd src/hip_code_object.cpp @e63d35e, guarantee(false, ...)) --------------
def test_hip_no_binary_for_gpu_alone_is_gpu_setup(tmp_path):
    f = _first(tmp_path, '"hipErrorNoBinaryForGpu: Unable to find code object for all current devices!"\n')
    assert f.id == "LOG021" and "fat binary" in f.detail


def test_hip_no_binary_for_gpu_old_wording_is_gpu_setup(tmp_path):
    f = _first(tmp_path, "hipErrorNoBinaryForGpu: Coudn't find binary for current devices!\n")
    assert f.id == "LOG021"


def test_hip_no_binary_named_in_a_comment_of_a_finished_run_is_not_gpu_setup(tmp_path):
    found = _found_text(tmp_path, "# hipErrorNoBinaryForGpu means the build lacks this gfx target; HSA_OVERRIDE_GFX_VERSION set\n"
                        "Epoch 1/1: 100%|##########| 50/50 [00:10<00:00, 5.00it/s, loss=0.31]\n"
                        "Training completed.\n")
    assert not any(f.id == "LOG021" for f in found)


# --- launchers' and runtimes' own fatal reports (Open MPI's errmgr [node-died] help text; the TPU runtime's halt) ---
_ORTE = ("--------------------------------------------------------------------------\n"
         "ORTE has lost communication with a remote daemon.\n\n"
         "  HNP daemon   : [[64112,0],0] on node head\n  Remote daemon: [[64112,0],1] on node 10.0.0.2\n\n"
         "This is usually due to either a failure of the TCP network\nconnection to the node, or possibly an internal "
         "failure of\nthe daemon itself. We cannot recover from this failure, and\ntherefore will terminate the job.\n")


def test_orte_lost_daemon_is_a_failure_not_cannot_show(tmp_path):
    f = _first(tmp_path, _ORTE)
    assert f.id == "LOG028" and f.title.startswith("unexplained failure")


def test_orte_lost_daemon_old_wording_is_a_failure(tmp_path):
    f = _first(tmp_path, "ORTE has lost communication with its daemon located on node:\n\n  hostname:  ip-10-0-0-7\n")
    assert f.id == "LOG028" and f.title.startswith("unexplained failure")


def test_tpu_halt_is_unexpected_is_a_failure(tmp_path):
    f = _first(tmp_path, "E1224 22:35:53.165575   26868 real_program_continuator.cc:1331] 0x0x0_TC0: *** Halt is "
               "unexpected, all pending programs will fail. This is likely an XLA compiler bug.\n")
    assert f.id == "LOG028" and f.title.startswith("unexplained failure")


def test_orte_named_in_a_finished_mpirun_is_not_a_failure(tmp_path):
    found = _found_text(tmp_path, "[1,0]<stdout>:ORTE daemon on node02 reports 4 slots\n"
                        "[1,0]<stdout>:Epoch 3/3 - loss: 0.12 - accuracy: 0.97\n"
                        "[1,0]<stdout>:Training finished.\n")
    assert not any(f.id == "LOG028" and f.title.startswith("unexplained failure") for f in found)


# --- b85 classes: Ray's pre-1.0 node-death wording; Open MPI's BTL reachability abort --------------------------
def test_ray_old_client_id_node_marked_dead_is_peer_lost(tmp_path):
    f = _first(tmp_path, "2019-02-26 21:00:52,092 ERROR worker.py:1734 -- The node with client ID "
               "41a220789a6b7a5851f56e81526fd89a99bb8d8b has been marked dead because the monitor has missed too many "
               "heartbeats from it.\n")
    assert f.id == "LOG022"


def test_ray_client_id_line_that_is_not_a_death_is_not_peer_lost(tmp_path):
    found = _found_text(tmp_path, "2019-02-26 21:00:10,000 INFO worker.py:1200 -- The node with client ID "
                        "41a220789a6b7a5851f56e81526fd89a99bb8d8b has joined the cluster.\n"
                        "Epoch 3/3: loss 0.12\nTraining finished.\n")
    assert not any(f.id == "LOG022" for f in found)


def test_open_mpi_btl_unreachable_abort_is_a_failure(tmp_path):
    f = _first(tmp_path, "At least one pair of MPI processes are unable to reach each other for\nMPI communications. "
               "This means that no Open MPI device has indicated\n\n  Process 1 ([[34076,1],8]) is on host: algo-2\n"
               "  BTLs attempted: self vader\n\nYour MPI job is now going to abort; sorry.\n")
    assert f.id == "LOG028" and f.title.startswith("unexplained failure")


# --- wave 1's LEFT class: torch ROCm's deviceCount c10::Error with its message cut (pytorch/pytorch @10afd1a,
# aten/src/ATen/hip/impl/HIPGuardImplMasqueradingAsCUDA.h: C10_HIP_CHECK(hipGetDeviceCount(&deviceCnt))) ----------
_HIP_FRAMES = ("frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x68 (0x7f69ad843fc8 in "
               "/opt/conda/lib/python3.6/site-packages/torch/lib/libc10.so)\n"
               "frame #1: <unknown function> + 0x59a09c (0x7f653816d09c in /opt/conda/lib/python3.6/site-packages/torch/"
               "lib/libtorch_hip.so)\n")


def test_hip_device_count_error_is_gpu_setup(tmp_path):
    f = _first(tmp_path, "Exception raised from deviceCount at /var/lib/jenkins/pytorch/aten/src/ATen/hip/impl/"
               "HIPGuardImplMasqueradingAsCUDA.h:102 (most recent call first):\n" + _HIP_FRAMES)
    assert f.id == "LOG021"


def test_hip_guard_error_from_another_function_is_not_gpu_setup(tmp_path):
    found = _found_text(tmp_path, "Exception raised from queryEvent at /var/lib/jenkins/pytorch/aten/src/ATen/hip/impl/"
                        "HIPGuardImplMasqueradingAsCUDA.h:214 (most recent call first):\n" + _HIP_FRAMES)
    assert not any(f.id == "LOG021" for f in found)


# --- wave 1's LEFT class: a SageMaker job's 'Completed' status line (apache/airflow @9e83aed providers/amazon
# hooks/sagemaker.py secondary_training_status_message: "<time> <Status> - <StatusMessage>"), here inside a diff ---
def test_sagemaker_completed_status_in_a_pasted_diff_is_an_end(tmp_path):
    found = _found_text(tmp_path, "+2021-04-01 13:16:47 Uploading - Uploading generated training model\n"
                        "+2021-04-01 13:27:49 Completed - Training job completed\n+Training seconds: 2882\n")
    assert found == []


def test_sagemaker_failed_status_is_not_an_end(tmp_path):
    found = _found_text(tmp_path, "2022-06-02 17:10:01 Training - Training image download completed. Training in "
                        "progress.\n2022-06-02 17:28:14 Failed - Training job failed\n")
    assert found and found[0].id == "LOG028" and found[0].title.startswith("unexplained failure")



# --- one worker stopped from outside: torchrun sent its closing signal only to the others (the lead, round 13) -------
_RESET = ("[rank1]: RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error "
          "[127.0.0.1]:7305: Connection reset by peer. This is typically caused by a remote worker hanging or bugs in "
          "the application.\n")
_CLOSE_1 = ("W1206 14:44:53.719000 21876 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 22424 "
            "closing signal SIGTERM\n")
_FAILED_0 = ("E1206 14:44:53.892000 21876 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: -15) "
             "local_rank: 0 (pid: 22423) of binary: /usr/bin/python\n")


def test_a_worker_sigtermed_from_outside_is_the_root_cause_not_its_peers_reset(tmp_path):
    f = _first(tmp_path, _RESET + _CLOSE_1 + _FAILED_0)
    assert f.id == "LOG026" and "pid 22423" in f.title and "from outside the job" in f.title and _ranks(f) == [0]


def test_a_worker_torchrun_itself_sigtermed_is_not_called_stopped_from_outside(tmp_path):
    """torchrun's own teardown (its closing line names the pid), or an agent that was signalled itself (it forwards
    the signal), or an excerpt without any closing line: nothing says the signal came from outside the job."""
    own = _CLOSE_1.replace("22424", "22423")
    for text in (_RESET + own + _FAILED_0,
                 _RESET + "W1206 14:44:53.700000 21876 torch/distributed/elastic/agent/server/api.py:753] Received 15 "
                          "death signal, shutting down workers\n" + _CLOSE_1 + _FAILED_0,
                 _RESET + _FAILED_0):
        assert not any("from outside the job" in f.title for f in _found_text(tmp_path, text)), text
