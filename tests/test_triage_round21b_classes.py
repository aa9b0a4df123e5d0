"""Round 21 (issue 24, triage24): classes from the sources, each with a trigger and a quiet case.

- A traceback cut before its exception line (a Python frame cut after its "in", rich's box cut inside a frame) is a
  process that failed (LOG028) naming the last frame shown, never "cannot show health" (LOG029).
- A launcher's exit on SIGBUS ("exitcode: -7", DeepSpeed's "exits with return code = -7"; a negative code is minus the
  signal's number) is the bus-error class (LOG010) like the shell's "Bus error"; -9 stays the OOM/kill class (LOG002).
- Ray's "RayTaskError(Cause)" (ray python/ray/exceptions.py as_instanceof_cause) is read by its cause.
- A C++ backtrace through c10d::TCPStore's constructor (its message cut) is the store class (LOG008); through the store
  server's set-up (TCPStoreMasterDaemon, create_tcpstore_backend) the server's port (LOG007).
- torchrun's "Unsupported nproc_per_node value" is a launch argument (LOG023), and Lightning's / AllenNLP's refusals of
  their device / distributed settings are configuration (LOG024).
- glog's E-lines with failure words but no other keyword in the middle of a large log are read (".cc:" keyword).
"""
from triage_loud import brief as _ids, loud_findings as _found

_STEPS = "".join(f"step {i} loss 0.{i:02d}\n" for i in range(1, 6))
_END = "Training completed.\n"


# --- a traceback cut before its exception line -----------------------------------------------------------------------
def test_a_python_frame_cut_after_in_is_a_failure_naming_the_last_frame(tmp_path):
    f = _found(tmp_path, "WARNING:torch.distributed.run:\nSetting OMP_NUM_THREADS environment variable for each process\n"
               'File "/opt/conda/lib/python3.8/site-packages/torch/distributed/elastic/utils/store.py", line 34, in\n')
    assert f and f[0].id == "LOG028", _ids(f)
    assert "the last frame shown (line 3)" in f[0].detail and "utils/store.py" in f[0].detail, f[0].detail


def test_a_rich_box_cut_inside_a_frame_is_a_failure_naming_the_last_frame(tmp_path):
    box = ("│ /opt/conda/lib/python3.10/site-packages/deepspeed/runtime/engine.py:297 in   │\n"
           "│ __init__                                                                     │\n"
           "│ ❱  297 │   │   self._configure_distributed_model(model)                      │\n"
           "│                                                                              │\n"
           "│ /opt/conda/lib/python3.10/site-packages/deepspeed/runtime/engine.py:1146 in  │\n"
           "│ _configure_distributed_model                                                 │\n│\n")
    f = _found(tmp_path, "[INFO] DeepSpeed info: version=0.9.2\n" + box)
    assert f and f[0].id == "LOG028" and "engine.py:1146" in f[0].detail, _ids(f)
    assert not any(x.id == "LOG029" for x in f), _ids(f)


def test_a_full_traceback_with_its_exception_line_is_not_called_cut(tmp_path):
    f = _found(tmp_path, 'Traceback (most recent call last):\n  File "/x/train.py", line 3, in <module>\n    main()\n'
               "RuntimeError: something the rules do not know\n")
    assert f and "its exception line cut" not in f[0].detail, _ids(f)


def test_a_rich_panel_with_a_path_then_training_that_ends_is_no_failure(tmp_path):
    f = _found(tmp_path, "╭── run ──╮\n│ /opt/venv/lib/python3.10/site-packages/proj/config.py:120 in load    │\n"
               "│ model: llama-7b                                                     │\n╰──────╯\n" + _STEPS + _END)
    assert not any(x.id == "LOG028" for x in f), _ids(f)


# --- negative exit codes: signals ------------------------------------------------------------------------------------
def test_launcher_exits_on_sigbus_are_the_bus_error_class(tmp_path):
    for line in ("[2026-01-10 10:05:00,000] [ERROR] [launch.py:322:sigkill_handler] ['/usr/bin/python', '-u', "
                 "'train.py', '--local_rank=1'] exits with return code = -7",
                 "E0110 10:05:00.000000 140 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -7) "
                 "local_rank: 1 (pid: 1235) of binary: /usr/bin/python"):
        f = _found(tmp_path, _STEPS + line + "\n")
        assert f and f[0].id == "LOG010" and "SIGBUS" in f[0].title and "/dev/shm" in f[0].title, (line, _ids(f))
        assert not any(x.id == "LOG004" for x in f), _ids(f)


def test_launcher_exit_on_sigkill_stays_the_kill_class_and_a_positive_7_is_no_signal(tmp_path):
    f = _found(tmp_path, _STEPS + "[ERROR] [launch.py:322:sigkill_handler] ['python', 'train.py'] exits with return "
               "code = -9\n")
    assert f and f[0].id == "LOG002", _ids(f)
    f = _found(tmp_path, _STEPS + "[ERROR] [launch.py:322:sigkill_handler] ['python', 'train.py'] exits with return "
               "code = 7\n")
    assert f and not any(x.id == "LOG010" for x in f), _ids(f)


def test_a_sigbus_exit_after_the_ranks_own_exception_is_that_exception(tmp_path):
    f = _found(tmp_path, "[rank1]: Traceback (most recent call last):\n[rank1]:   File \"/x/train.py\", line 3, in <module>\n"
               "[rank1]: ValueError: bad shape\n"
               "E0110 10:05:00.000000 140 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -7) "
               "local_rank: 1 (pid: 1235) of binary: /usr/bin/python\n")
    assert f and f[0].id == "LOG004" and "ValueError" in f[0].title, _ids(f)


# --- Ray's wrapped errors --------------------------------------------------------------------------------------------
_RAY = ("ray.exceptions.RayTaskError({}): ray::_RayTrainWorker__execute.get_next() (pid=4242, ip=10.0.0.2, "
        "actor_id=8f0e, repr=<ray.train._internal.worker_group.RayTrainWorker object at 0x7f2c>)\n")


def test_ray_task_errors_are_read_by_their_cause(tmp_path):
    f = _found(tmp_path, "INFO worker.py:1841 -- Started a local Ray instance.\n" + _RAY.format("OutOfMemoryError"))
    assert f and f[0].id == "LOG005", _ids(f)
    f = _found(tmp_path, "INFO worker.py:1841 -- Started a local Ray instance.\n" + _RAY.format("AcceleratorError"))
    assert f and f[0].id == "LOG020" and "AcceleratorError" in f[0].title, _ids(f)
    f = _found(tmp_path, "INFO worker.py:1841 -- Started a local Ray instance.\n" + _RAY.format("ValueError"))
    assert f and f[0].id == "LOG004" and "RayTaskError(ValueError)" in f[0].title, _ids(f)


def test_the_causes_own_line_wins_over_the_wrapper(tmp_path):
    f = _found(tmp_path, _RAY.format("AcceleratorError") + '  File "/home/u/run.py", line 30, in train_func\n'
               "    loss.backward()\ntorch.AcceleratorError: CUDA error: an illegal memory access was encountered\n")
    assert f and f[0].id == "LOG020" and "illegal memory access" in f[0].title, _ids(f)


# --- TCPStore's constructor in a headless C++ backtrace ---------------------------------------------------------------
_LIB = "(0x7f3 in /usr/lib/python3/site-packages/torch/lib/libtorch_cpu.so)"


def test_tcpstore_constructor_frames_are_the_store_class_also_past_the_head(tmp_path):
    bt = (f"frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x98 {_LIB}\n"
          f"frame #1: <unknown function> + 0x5e1d2c {_LIB}\n"
          f"frame #2: c10d::TCPStore::TCPStore(std::string, c10d::TCPStoreOptions const&) + 0x20c {_LIB}\n")
    f = _found(tmp_path, bt)
    assert f and f[0].id == "LOG008" and f[0].severity == "error", _ids(f)
    pad = "".join(f"loading shard {i} of the dataset index from /data/part-{i:05d}\n" for i in range(20000))
    f = _found(tmp_path, pad + bt + "".join(f"cleanup {i}\n" for i in range(2000)))
    assert f and f[0].id == "LOG008", _ids(f)


def test_store_server_setup_frames_are_the_servers_port_and_one_finding(tmp_path):
    bt = (f"frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x98 {_LIB}\n"
          f"frame #1: c10d::detail::create_tcpstore_backend(c10d::TCPStoreOptions const&) + 0x5c {_LIB}\n"
          f"frame #2: c10d::TCPStore::TCPStore(std::string, c10d::TCPStoreOptions const&) + 0x20c {_LIB}\n")
    f = _found(tmp_path, bt)
    assert f and f[0].id == "LOG007" and "most often" in f[0].title, _ids(f)
    assert not any(x.id == "LOG008" for x in f), _ids(f)


def test_tcpstore_get_frames_are_not_the_constructor(tmp_path):
    f = _found(tmp_path, f"frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x98 {_LIB}\n"
               f"frame #1: c10d::TCPStore::doGet(std::string const&) + 0x6c {_LIB}\n")
    assert not any(x.id in ("LOG007", "LOG008") for x in f), _ids(f)


# --- launch and framework configuration refusals ----------------------------------------------------------------------
def test_torchruns_unsupported_nproc_per_node_is_a_launch_argument_not_gpu_setup(tmp_path):
    f = _found(tmp_path, 'Traceback (most recent call last):\n  File "/usr/lib/python3/site-packages/torch/distributed/'
               'run.py", line 770, in determine_local_world_size\n    raise ValueError(f"Unsupported nproc_per_node value: '
               '{nproc_per_node}") from e\nValueError: Unsupported nproc_per_node value: gpus\n')
    assert f and f[0].id == "LOG023" and "line:4" in f[0].subjects, (_ids(f), f[0].subjects)
    assert not any(x.id == "LOG021" for x in f), _ids(f)
    f = _found(tmp_path, "ValueError: Cuda is not available.\n")
    assert f and f[0].id == "LOG021", _ids(f)


def test_framework_refusals_of_device_settings_are_configuration_others_are_not(tmp_path):
    for line in ("lightning_fabric.utilities.exceptions.MisconfigurationException: You requested gpu: [0, 1, 2, 3]",
                 "allennlp.common.checks.ConfigurationError: 'Multiple cuda devices/GPUs need to be specified to run "
                 "distributed training.'"):
        f = _found(tmp_path, "Loading config\n" + line + "\n")
        assert f and f[0].id == "LOG024", (line, _ids(f))
    f = _found(tmp_path, "lightning.fabric.utilities.exceptions.MisconfigurationException: No `val_dataloader()` method "
               "defined to run `Trainer.validate`.\n")
    assert f and f[0].id != "LOG024", _ids(f)


# --- glog E-lines in the middle of a large log ---------------------------------------------------------------------
def _glog(n, msg, start=0):
    return "".join(f"I0110 10:{(start + i) // 60 % 60:02d}:{(start + i) % 60:02d}.{i:06d}  1234 {msg}.cc:120] "
                   f"event {i} of the host runtime, buffers in flight {i % 17}, queue depth {i % 5}\n" for i in range(n))


def test_a_glog_e_line_with_failure_words_mid_log_is_read(tmp_path):
    text = (_glog(3000, "runtime") + "E0110 10:30:00.000000  1234 grpc_client.cc:77] Connect to 10.0.0.2:8470 failed; "
            "giving up after 30 attempts\n" + _glog(400, "shutdown", 3000))
    assert len(text) > (64 << 10) + (16 << 10)
    f = _found(tmp_path, text)
    assert f and f[0].id == "LOG028" and "line:3001" in f[0].subjects, (_ids(f), f and f[0].subjects)


def test_a_glog_log_with_no_failure_mid_log_is_no_failure(tmp_path):
    text = (_glog(3000, "runtime") + "W0110 10:30:00.000000  1234 pool.cc:77] buffer pool at 80% of its size\n"
            + _glog(400, "shutdown", 3000))
    f = _found(tmp_path, text)
    assert not any(x.severity == "error" or x.id == "LOG028" for x in f), _ids(f)
