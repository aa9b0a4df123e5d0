"""Round-9 classes of issue 24 (triage, 2026-12-06 session 2): trigger and quiet cases whose assertions can fail. Logs
are written from the formats the sources print (no logs copied); pure in-process tests (no process launched)."""
from __future__ import annotations

import json
import pathlib

from ddpdoctor.triage.api import triage_paths


def _found_text(tmp_path, text):
    p = tmp_path / "job.log"
    p.write_text(text, encoding="utf-8")
    return [f for f in triage_paths([str(p)]).sorted_findings() if f.severity in ("error", "warning")]


_PAD = "".join(f"{{'loss': {1 + i % 7 / 10:.2f}, 'learning_rate': 5e-05, 'epoch': {i / 1000:.3f}}}\n" for i in range(1500))
_MMSEG = ("2020-12-18 19:36:37,584 - mmseg - INFO - Iter [1100/40000]\tlr: 9.755e-03, eta: 4:23:27, time: 0.402, "
          "data_time: 0.003, memory: 19873, loss: 0.1652\n"
          "2020-12-18 19:56:07,472 - mmseg - INFO - Saving checkpoint at 4000 iterations\n")
_BAR = "[>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>> ] 3217/3849, 4.0 task/s, elapsed: 799s, ETA: 157s"
_STRSIGNAL = json.loads((pathlib.Path(__file__).resolve().parent.parent / "ddpdoctor" / "data" / "strsignal.json")
                        .read_text(encoding="utf-8"))


# --- the shell's "Killed" in glibc's translations, and glued to a progress bar drawn with "\r" ------------------------
def test_localized_killed_after_a_progress_bar_is_sigkill(tmp_path):
    """bash prints strsignal(SIGKILL), translated by glibc under the job's locale ('已杀死' under zh_CN); an mmcv bar
    drawn with '\\r' leaves it on the bar's line in a paste. Each translation, alone or glued, at the top or ~3 MiB in."""
    for lang in ("zh_CN", "ja", "de", "ru", "fr"):
        word = _STRSIGNAL["SIGKILL"][lang]
        for text in (_MMSEG + _BAR + word + "\n", _MMSEG + word + "\n", _PAD * 40 + _MMSEG + _BAR + word + "\n"):
            f = _found_text(tmp_path, text)
            assert f and f[0].id == "LOG002", (lang, [(x.id, x.title) for x in f])
    f = _found_text(tmp_path, _MMSEG + _BAR + "Killed\n")
    assert f and f[0].id == "LOG002", [(x.id, x.title) for x in f]


def test_a_translation_inside_prose_or_a_bar_without_it_is_no_kill(tmp_path):
    """The quiet side: the bar alone stops mid-evaluation (LOG029), and a sentence that holds the word is not bash's
    report ('... was Killed by the user' is prose, 'Getötet wurde nichts' is no job status)."""
    for text in (_MMSEG + _BAR + "\n", _MMSEG + "the job was Killed by the user yesterday, restarting\n",
                 _MMSEG + "Getötet wurde nichts, der Lauf geht weiter\n"):
        f = _found_text(tmp_path, text)
        assert "LOG002" not in {x.id for x in f}, (text[-60:], [(x.id, x.title) for x in f])


# --- os.environ['SLURM_PROCID'] outside srun ----------------------------------------------------------------------------
_SLURM_TB = ('Traceback (most recent call last):\n  File "train.py", line 12, in <module>\n'
             "    rank = int(os.environ['SLURM_PROCID'])\n"
             '  File "/usr/lib/python3.8/os.py", line 675, in __getitem__\n    raise KeyError(key) from None\n')


def test_keyerror_on_a_slurm_variable_is_a_launch_outside_srun(tmp_path):
    for tail in ("KeyError: 'SLURM_PROCID'\n", "KeyError:'SLURM_PROCID'\n", "[rank0]: KeyError: 'SLURM_LOCALID'\n"):
        f = _found_text(tmp_path, _SLURM_TB + tail)
        assert f and f[0].id == "LOG023" and "outside srun" in f[0].title, [(x.id, x.title) for x in f]
    f = _found_text(tmp_path, _SLURM_TB + "KeyError:'LOCAL_RANK'\n")
    assert f and f[0].id == "LOG023" and "without a launcher" in f[0].title, [(x.id, x.title) for x in f]


def test_keyerror_on_another_key_stays_a_plain_failure(tmp_path):
    f = _found_text(tmp_path, _SLURM_TB + "KeyError: 'SLURM_CONFIG_PATH_OF_MY_TOOL'\n")
    assert f and f[0].id != "LOG023", [(x.id, x.title) for x in f]
    f = _found_text(tmp_path, _SLURM_TB + "KeyError: 'model.layers.0.weight'\n")
    assert f and f[0].id != "LOG023", [(x.id, x.title) for x in f]


# --- the TCPStore's libuv backend on a torch built without it ------------------------------------------------------------
def test_libuv_not_built_is_known_with_its_fix(tmp_path):
    for msg in ("torch.distributed.DistStoreError: use_libuv was requested but PyTorch was built without libuv support, "
                "run with USE_LIBUV=0 to disable it.\n",
                "RuntimeError: use_libuv was requested but PyTorch was build without libuv support\n"):
        f = _found_text(tmp_path, 'Traceback (most recent call last):\n  File "<frozen runpy>", line 198, in _run_module_as_main\n'
                        + msg)
        assert f and f[0].id == "LOG027" and "USE_LIBUV=0" in (f[0].fix or ""), [(x.id, x.title) for x in f]


def test_another_diststoreerror_is_not_libuv(tmp_path):
    f = _found_text(tmp_path, "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 "
                    "clients joined.\n")
    assert f and "USE_LIBUV" not in (f[0].fix or ""), [(x.id, x.title) for x in f]


# --- a multiprocessing queue's feeder thread prints its own error; the process goes on ----------------------------------
_FEEDER = ('Traceback (most recent call last):\n'
           '  File "/usr/lib/python3.8/multiprocessing/queues.py", line 245, in _feed\n    send_bytes(obj)\n'
           '  File "/usr/lib/python3.8/multiprocessing/connection.py", line 200, in send_bytes\n'
           '    self._send_bytes(m[offset:offset + size])\n'
           '  File "/usr/lib/python3.8/multiprocessing/connection.py", line 368, in _send\n'
           '    n = write(self._handle, buf)\nBrokenPipeError: [Errno 32] Broken pipe\n')


def test_a_queue_feeder_threads_broken_pipe_is_no_failure(tmp_path):
    """CPython Lib/multiprocessing/queues.py: Queue._feed hands an error to _on_queue_feeder_error, which prints it
    (traceback.print_exc) and the thread goes on: no error, no peer lost, no 'unexplained failure'."""
    f = _found_text(tmp_path, _FEEDER)
    assert not [x for x in f if x.severity == "error" or x.title.startswith("unexplained failure")], \
        [(x.id, x.title) for x in f]


def test_the_same_broken_pipe_from_the_main_thread_is_a_failure(tmp_path):
    f = _found_text(tmp_path, 'Traceback (most recent call last):\n  File "train.py", line 40, in <module>\n'
                    '    sock.sendall(payload)\nBrokenPipeError: [Errno 32] Broken pipe\n')
    assert f and f[0].severity == "error" or (f and f[0].title.startswith("unexplained failure")), \
        [(x.id, x.title) for x in f]
    f = _found_text(tmp_path, _FEEDER + 'Traceback (most recent call last):\n  File "train.py", line 9, in <module>\n'
                    "    main()\nRuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    assert f and f[0].id == "LOG005", [(x.id, x.title) for x in f]


# --- a wrapper's CalledProcessError after the child's exit is an echo ----------------------------------------------------
_ROW = ("  time      : 2025-08-15_10:48:34\n  host      : localhost\n  rank      : 2 (local_rank: 2)\n"
        "  exitcode  : 1 (pid: 34)\n  error_file: <N/A>\n"
        "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html\n"
        "============================================================\n")
_CPE = ('Traceback (most recent call last):\n  File "/root/runner.py", line 441, in exec_subprocess\n'
        '    raise subprocess.CalledProcessError(exitcode, " ".join(cmd))\n'
        "subprocess.CalledProcessError: Command 'accelerate launch --multi_gpu -m train' returned non-zero exit status 1.\n")


def test_calledprocesserror_after_a_table_row_names_the_rows_rank(tmp_path):
    f = _found_text(tmp_path, _ROW + _CPE)
    assert f and f[0].id == "LOG004" and "rank:2" in f[0].subjects, [(x.id, x.title, x.subjects) for x in f]


def test_calledprocesserror_alone_is_still_the_failure(tmp_path):
    f = _found_text(tmp_path, _CPE)
    assert f and f[0].id == "LOG004" and "CalledProcessError" in f[0].title, [(x.id, x.title) for x in f]


# --- NCCL's memory manager (src/mem_manager.cc) and SHM transport checks (src/transport/shm.cc) -------------------------
_NW = "node-a:48213:48290 [3] NCCL WARN "
_SYSERR = ("[rank3]: torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.hpp:"
           "268, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.28.9\n")


def test_a_memory_manager_warn_says_what_it_means_not_a_network_guess(tmp_path):
    for warn in ("MemManager: Failed to allocate CPU backup for offload", "MemManager: Barrier failed during resume",
                 "MemManager: Recv from rank 5 failed - handle exchange incomplete"):
        f = _found_text(tmp_path, _NW + warn + "\n" + _SYSERR)
        assert f and f[0].id == "LOG009" and "MemManager" in f[0].title and "connection" not in f[0].title, \
            [(x.id, x.title) for x in f]
        assert "suspend" in f[0].detail, f[0].detail


def test_a_memory_manager_usage_warn_is_known_with_its_fix(tmp_path):
    f = _found_text(tmp_path, _NW + "MemManager: Suspend not supported, memory manager is disabled\n"
                    "RuntimeError: NCCL error: invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.28.9\n")
    assert f and any("memory manager" in (x.detail + (x.fix or "")) for x in f), [(x.id, x.title) for x in f]


def test_a_socket_warn_stays_a_connection_failure(tmp_path):
    f = _found_text(tmp_path, _NW + "socketProgress: Connection closed by remote peer node-b<51159>\n" + _SYSERR)
    assert f and "MemManager" not in f[0].title, [(x.id, x.title) for x in f]


def test_nccl_ignoring_shm_locality_is_benign(tmp_path):
    f = _found_text(tmp_path, _NW + "Ignoring SHM locality, must be 1 (sender side) or 2 (receiver side, default)\n"
                    "{'loss': 1.21, 'learning_rate': 5e-06, 'epoch': 0.5}\n")
    assert not [x for x in f if x.severity == "error"], [(x.id, x.title) for x in f]


# --- torch elastic, the TCPStore's libuv server and accelerate: messages mined in round 9 ------------------------------
def test_mined_launch_checks_are_launch_misconfigured(tmp_path):
    for msg in ("AssertionError: When using multiple machines, you need to specify the main process IP.\n",
                "ValueError: You need to use at least 2 processes to use `--multi_gpu`.\n",
                'RuntimeError: nnodes=2:1:3 is not in "MIN:MAX" format\n',
                "AssertionError: max_restarts must be >= 0\n"):
        f = _found_text(tmp_path, msg)
        assert f and f[0].id == "LOG023", (msg, [(x.id, x.title) for x in f])


def test_a_user_assertion_about_machines_is_not_a_launch_check(tmp_path):
    f = _found_text(tmp_path, "AssertionError: When using multiple machines, the dataset must be sharded first.\n")
    assert f and f[0].id != "LOG023", [(x.id, x.title) for x in f]


def test_accelerate_state_before_accelerator_is_known(tmp_path):
    f = _found_text(tmp_path, "ValueError: The `PartialState` or `Accelerator` must be initialized before calling this "
                    "function.\n")
    assert f and f[0].id == "LOG027" and "Accelerator()" in (f[0].fix or "") + f[0].detail, [(x.id, x.title) for x in f]
    f = _found_text(tmp_path, "AttributeError: 'MyTrainer' object has no attribute 'train_dataset'\n")
    assert f and f[0].id != "LOG027", [(x.id, x.title) for x in f]


def test_libuv_store_daemon_failure_is_the_store_and_its_ipv4_fallback_is_benign(tmp_path):
    f = _found_text(tmp_path, "[E1106 04:43:02.065000 26021 TCPStoreLibUvBackend.cpp:1] TCPStoreMasterDaemon::run() "
                    "failed with exception: std::bad_alloc\n")
    assert f and f[0].id == "LOG008", [(x.id, x.title) for x in f]
    f = _found_text(tmp_path, "[W1106 04:43:02.065000 26021 TCPStoreLibUvBackend.cpp:1] Failed to bind to ipv6 address, "
                    "trying ipv4. Error: address family not supported\n{'loss': 1.2, 'epoch': 0.1}\n")
    assert not [x for x in f if x.severity == "error"], [(x.id, x.title) for x in f]


_WORKER_FAIL = ("E1106 04:43:02.651000 26021 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) "
                "local_rank: 3 (pid: 26026) of binary: /usr/bin/python\n")


def test_torchrun_teardown_lines_stay_consequences_of_the_first_exit(tmp_path):
    f = _found_text(tmp_path, _WORKER_FAIL + "W1106 04:43:32.700000 26021 torch/distributed/elastic/multiprocessing/api.py:"
                    "930] Unable to shutdown process 26024 via Signals.SIGTERM, forcefully exiting via Signals.SIGKILL\n")
    assert f and f[0].id == "LOG004" and "rank:3" in f[0].subjects, [(x.id, x.title) for x in f]


def test_a_worker_stuck_in_d_state_is_reported_and_one_entering_it_is_not(tmp_path):
    stuck = ("I1106 05:13:02.000000 26021 torch/distributed/elastic/agent/server/local_elastic_agent.py:400] [default] "
             "Worker pid=26026 stuck in uninterruptible sleep (D-state) for 1830s (>= 1800s); marking worker group "
             "UNHEALTHY and disabling restarts.\n")
    f = _found_text(tmp_path, stuck)
    assert f, "a worker stuck in the kernel is a failure"
    entered = stuck.replace("stuck in uninterruptible sleep (D-state) for 1830s (>= 1800s); marking worker group "
                            "UNHEALTHY and disabling restarts.", "entered uninterruptible sleep (D-state); will mark "
                            "UNHEALTHY if it remains for 1800s.")
    f = _found_text(tmp_path, entered + "{'loss': 1.2, 'epoch': 0.1}\n")
    assert not [x for x in f if x.severity == "error" or x.title.startswith("unexplained failure")], \
        [(x.id, x.title) for x in f]


# --- torchrun's exit line without its spaces (retyped, or reflowed by a page) ---------------------------------------------
def test_torchrun_failed_exitcode_without_spaces_is_still_the_exit(tmp_path):
    for line in ("torch.distributed.elastic.multiprocessing.api:failed(exitcode:-9)\n",
                 "ERROR:torch.distributed.elastic.multiprocessing.api:failed(exitcode:-9) local_rank:0 (pid:4242) of binary: "
                 "/usr/bin/python\n"):
        f = _found_text(tmp_path, "When I train the code on two GPU, there is an error that " + line)
        assert f and f[0].id == "LOG002", [(x.id, x.title) for x in f]


def test_a_failed_word_next_to_exitcode_zero_prose_is_no_kill(tmp_path):
    f = _found_text(tmp_path, "the job failed (exitcode: 0 in the summary, so maybe not)\n")
    assert "LOG002" not in {x.id for x in f}, [(x.id, x.title) for x in f]


# --- batch 62's classes ----------------------------------------------------------------------------------------------------
def test_an_applications_own_cuda_error_prefix_is_the_cuda_error(tmp_path):
    """cudaGetErrorString's text under an application's own 'Cuda error ' prefix (paboyle/Grid prints it so)."""
    f = _found_text(tmp_path, "Cuda error invalid device ordinal \n/home/Grid/lattice/Lattice_base.h Line 149\n")
    assert f and f[0].id == "LOG021", [(x.id, x.title) for x in f]
    f = _found_text(tmp_path, "Cuda error handling was reworked in this release; see the notes\n")
    assert "LOG021" not in {x.id for x in f}, [(x.id, x.title) for x in f]


def test_megatron_cores_pipeline_split_assert_is_a_config_mismatch(tmp_path):
    """megatron/core/transformer/transformer_block.py get_num_layers_to_build, both wordings (before/after bb451db)."""
    for msg in ("[rank15]: AssertionError: num_layers should be divisible by pipeline_model_parallel_size\n",
                "AssertionError: num_layers=30 should be divisible by config.pipeline_model_parallel_size=4\n"):
        f = _found_text(tmp_path, msg)
        assert f and f[0].id == "LOG024", (msg, [(x.id, x.title) for x in f])
    f = _found_text(tmp_path, "AssertionError: num_layers should be divisible by num_attention_heads\n")
    assert f and f[0].id != "LOG024", [(x.id, x.title) for x in f]


def test_a_frame_cut_before_its_path_and_an_assert_under_it_is_that_ranks_failure(tmp_path):
    text = ('megatron sft --pipeline_model_parallel_size 4\n'
            'Megatron-LM/megatron/training/arguments.py", line 561, in validate_args\n'
            "[rank14]:     assert num_layers % args.transformer_pipeline_model_parallel_size == 0, \\\n[rank14]:\n")
    f = _found_text(tmp_path, text)
    assert f and f[0].id == "LOG028" and "rank:14" in f[0].subjects, [(x.id, x.title, x.subjects) for x in f]


def test_a_lone_cut_frame_that_output_follows_is_no_failure(tmp_path):
    text = ('utils/logging.py", line 40, in emit\n' + "".join(
        f"{{'loss': {1 + i / 10:.2f}, 'learning_rate': 5e-05, 'epoch': {i / 10:.1f}}}\n" for i in range(8)))
    f = _found_text(tmp_path, text)
    assert not [x for x in f if x.severity == "error" or x.title.startswith("unexplained failure")], \
        [(x.id, x.title) for x in f]


# --- c10d strings of libtorch_cpu.so mined in round 9 (socket.cpp, ProcessGroupGloo.cpp, TCPStoreBackend.cpp) -------------
def test_mined_c10d_failures_are_their_classes(tmp_path):
    cases = {
        "RuntimeError: The server could not be initialized on any address for port=29500, family=2\n": "LOG007",
        "RuntimeError: Cannot use ReduceOp.PREMUL_SUM with Gloo\n": "LOG027",
        "[E socket.cpp:1] RuntimeError: waitForInput: poll for socket SocketImpl(fd=9) returned 0, likely a timeout\n": "LOG008",
    }
    for text, rid in cases.items():
        f = _found_text(tmp_path, text)
        assert f and f[0].id == rid, (text, [(x.id, x.title) for x in f])


def test_the_agent_store_bind_note_is_benign(tmp_path):
    f = _found_text(tmp_path, "[W1106 04:43:02 TCPStoreBackend.cpp:1] The server socket on [::]:29500 has failed to bind. "
                    "TORCHELASTIC_USE_AGENT_STORE is enabled so ignoring the error.\n{'loss': 1.2, 'epoch': 0.1}\n")
    assert not [x for x in f if x.severity == "error"], [(x.id, x.title) for x in f]


# --- NCCL WARN formats mined in round 9's second pass (os/linux_ipcsocket.cc, init.cc, graph/search.cc, proxy.cc) ------
def test_nccl_uds_and_init_warns_say_what_they_mean(tmp_path):
    cases = (("UDS: Receiving data over socket /tmp/nccl-socket-0-1 failed : Connection reset by peer", "LOG009", "UDS"),
             ("Multiple Ranks are using the same GPU/Partition. Set NCCL_MULTI_RANK_GPU_ENABLE=1 to enable this "
              "configuration.", "LOG006", "same GPU"),
             ("Detected mixed local Net device counts across ranks (min 4, max 8). Set NCCL_IGNORE_NET_MISMATCH=1 to "
              "continue.", "LOG009", "mixed local Net"),
             ("No path computed to go from GPU/0 to NET/1", "LOG009", "No path"))
    for warn, rid, said in cases:
        f = _found_text(tmp_path, _NW + warn + "\n" + _SYSERR)
        assert f and f[0].id == rid and said in f[0].title and "ranks -1" not in f[0].title, (warn, [(x.id, x.title) for x in f])


def test_duplicate_gpu_with_ranks_keeps_its_ranks(tmp_path):
    f = _found_text(tmp_path, _NW + "Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1a000\n"
                    "RuntimeError: NCCL error: invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.28.9\n")
    assert f and f[0].id == "LOG006" and "ranks 0 and 1" in f[0].title, [(x.id, x.title) for x in f]


def test_elastic_pcontext_and_accelerate_setting_misuse_are_known(tmp_path):
    for msg in ("ValueError: The process context already initialized. Most likely the start method got called twice.\n",
                "ValueError: Using `cp_size>1` requires FSDP2, but the provided `fsdp_plugin` is using FSDP1.\n"):
        f = _found_text(tmp_path, msg)
        assert f and f[0].id == "LOG027", (msg, [(x.id, x.title) for x in f])
    f = _found_text(tmp_path, "ValueError: The cache context already initialized in my_module\n")
    assert f and f[0].id != "LOG027", [(x.id, x.title) for x in f]


# --- wave 2, batch 63: torch's load_state_dict 'size mismatch for ...' (torch/nn/modules/module.py @cf30153, line
# 2443), an error under strict=True and a warning a strict=False loader trains on after --------------------------------
_MISMATCH = ("size mismatch for lm_head.weight: copying a param with shape torch.Size([32000, 1024]) from checkpoint, "
             "the shape in current model is torch.Size([32000, 4096]).")


def test_load_state_dict_size_mismatch_is_a_config_mismatch_of_its_rank(tmp_path):
    text = ("[rank1]:        " + _MISMATCH + "\n"
            "W0527 01:21:26.844000 140472356030272 torch/distributed/elastic/multiprocessing/api.py:851] Sending "
            "process 1056309 closing signal SIGTERM\n")
    f = _found_text(tmp_path, text)
    assert f and f[0].id == "LOG024" and "rank:1" in f[0].subjects, [(x.id, x.title, x.subjects) for x in f]


def test_size_mismatch_a_loader_trains_on_after_is_no_failure(tmp_path):
    text = ("2021-03-01 10:00:00,100 - mmdet - WARNING - The model and loaded state dict do not match exactly\n\n"
            + _MISMATCH + "\n"
            "2021-03-01 10:00:30,000 - mmdet - INFO - Epoch [1][50/1000]\tlr: 2.000e-02, eta: 3:10:00, time: 0.500, "
            "data_time: 0.010, memory: 3000, loss: 0.9\n"
            "2021-03-01 10:01:00,000 - mmdet - INFO - Epoch [1][100/1000]\tlr: 2.000e-02, eta: 3:09:00, time: 0.500, "
            "data_time: 0.010, memory: 3000, loss: 0.8\n")
    f = _found_text(tmp_path, text)
    assert not [x for x in f if x.severity == "error" or x.title.startswith("unexplained failure")], \
        [(x.id, x.title) for x in f]


# --- wave 2, batch 63: rich's traceback box cut above its top, its frame header wrapped at the box's width (rich
# traceback.py Traceback._render_stack: "{filename}:{lineno} in {name}") ------------------------------------------------
_RICH_CUT = ("│ /usr/lib/python3/dist-packages/torch/distributed/checkpoint/state_dict.py:83 │\n"
             "│ 4 in set_optimizer_state_dict                                                │\n"
             "│                                                                              │\n"
             "│    833 │   │   _verify_state_dict({}, optim_state_dict, info)                │\n"
             "│ ❱  834 │   │   _load_optim_state_dict(model, optimizers, optim_state_dict, i │\n"
             "│    835                                                                       │\n"
             "│                                                                              │\n"
             "│ /usr/lib/python3/dist-packages/torch/distributed/checkpoint/state_dict.py:55 │\n"
             "│ 6 in _load_optim_state_dict                                                  │\n")


def test_a_cut_rich_traceback_box_is_a_failure(tmp_path):
    f = _found_text(tmp_path, _RICH_CUT)
    assert f and f[0].id == "LOG028" and f[0].title.startswith("unexplained failure"), [(x.id, x.title) for x in f]


def test_a_rich_table_is_no_traceback(tmp_path):
    """The quiet side: Lightning's rich model summary and a config panel are boxes with '│' too, and no frames."""
    text = ("┏━━━┳━━━━━━━┳━━━━━━━━━━━━━━━━━━┳━━━━━━━━┓\n"
            "┃   ┃ Name  ┃ Type             ┃ Params ┃\n"
            "┡━━━╇━━━━━━━╇━━━━━━━━━━━━━━━━━━╇━━━━━━━━┩\n"
            "│ 0 │ model │ GPT              │  124 M │\n"
            "│ 1 │ loss  │ CrossEntropyLoss │      0 │\n"
            "└───┴───────┴──────────────────┴────────┘\n"
            "│ config: conf/train.py:12 │\n"
            "Epoch 0:  50%|█████     | 500/1000 [01:00<01:00, 8.3it/s, loss=3.2, v_num=0]\n"
            "Epoch 0: 100%|██████████| 1000/1000 [02:00<00:00, 8.3it/s, loss=3.1, v_num=0]\n"
            "`Trainer.fit` stopped: `max_epochs=1` reached.\n")
    f = _found_text(tmp_path, text)
    assert not [x for x in f if x.severity == "error" or x.title.startswith("unexplained failure")], \
        [(x.id, x.title) for x in f]


# --- wave 2, batch 64: Paddle's DataLoader SIGBUS message (paddle/fluid/imperative/data_loader.cc @e1e2380) and PMIx's
# buffer-unpack error log (openpmix src/mca/bfrops/base/bfrop_base_unpack.c @0e7adcc, PMIX_ERROR_LOG) --------------------
def test_paddle_dataloader_bus_error_is_shm(tmp_path):
    f = _found_text(tmp_path, "ERROR: Unexpected BUS error encountered in DataLoader worker. This might be caused by "
                              "insufficient shared memory (shm), please check whether use_shared_memory is set and "
                              "storage space in /dev/shm is enough\n")
    assert f and f[0].id == "LOG010", [(x.id, x.title) for x in f]


def test_pmix_unpack_errors_before_ranks_run_are_no_failure(tmp_path):
    text = ("$ srun --mpi=pmix -n 2 ./train\n"
            "[node1:821449] PMIX ERROR: OUT-OF-RESOURCE in file base/bfrop_base_unpack.c at line 750\n"
            "[node2:132476] PMIX ERROR: OUT-OF-RESOURCE in file base/bfrop_base_unpack.c at line 750\n"
            "rank 0 of 2 started on node1\nrank 1 of 2 started on node2\n")
    f = _found_text(tmp_path, text)
    assert not [x for x in f if x.severity == "error" or x.title.startswith("unexplained failure")], \
        [(x.id, x.title) for x in f]


def test_pmix_client_errors_and_a_failed_mpi_init_are_still_a_failure(tmp_path):
    """The quiet side: the entry covers the buffer code's log only; PMIx's client failing, and MPI_Init aborting after
    an unpack error, are failures."""
    for text in ("[n1:64919] PMIX ERROR: OUT-OF-RESOURCE in file client/pmix_client.c at line 228\n"
                 "*** An error occurred in MPI_Init_thread\n*** on a NULL communicator\n",
                 "[n1:4242] PMIX ERROR: OUT-OF-RESOURCE in file base/bfrop_base_unpack.c at line 750\n"
                 "*** An error occurred in MPI_Init_thread\n*** on a NULL communicator\n"
                 "*** MPI_ERRORS_ARE_FATAL (processes in this communicator will now abort,\n"):
        f = _found_text(tmp_path, text)
        assert f and (f[0].severity == "error" or f[0].title.startswith("unexplained failure")), \
            [(x.id, x.title) for x in f]


# --- wave 2, batch 65: cudaErrorDevicesUnavailable's text (libcudart.so.13 strings; driver_types.h: 46) and a CUDA-init
# message a job trains on after (the catalogue's "survivable", same file and rank) ------------------------------------
def test_devices_busy_or_unavailable_is_gpu_setup(tmp_path):
    for text in ("Test CUDA failure common.cu:1007\n'CUDA-capable device(s) is/are busy or unavailable'\n",
                 "RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable\n"):
        f = _found_text(tmp_path, text)
        assert f and f[0].id == "LOG021", (text, [(x.id, x.title) for x in f])


def test_no_cuda_device_then_training_on_is_no_failure(tmp_path):
    text = ("THCudaCheck FAIL file=torch/csrc/cuda/Module.cpp line=109 error=38 : no CUDA-capable device is detected\n"
            + "".join(f"Train Epoch: 1 [{i * 640}/60000 ({i}%)]\tLoss: 2.3{i}\n" for i in range(5)))
    f = _found_text(tmp_path, text)
    assert not [x for x in f if x.severity == "error" or x.title.startswith("unexplained failure")], \
        [(x.id, x.title) for x in f]


def test_no_cuda_device_alone_or_of_another_rank_is_still_gpu_setup(tmp_path):
    """The quiet side: with no progress after it, or with only another rank's progress after it, it is LOG021."""
    for text in ("THCudaCheck FAIL file=torch/csrc/cuda/Module.cpp line=109 error=38 : no CUDA-capable device is detected\n",
                 "[rank1]: RuntimeError: CUDA error: no CUDA-capable device is detected\n"
                 "[rank0]: Train Epoch: 1 [640/60000 (1%)]\tLoss: 2.31\n[rank0]: Train Epoch: 1 [1280/60000 (2%)]\tLoss: 2.30\n"):
        f = _found_text(tmp_path, text)
        assert f and f[0].id == "LOG021", (text, [(x.id, x.title) for x in f])
