"""Round 25 (issue 24, triage34): classes from the sources, each with a trigger and a quiet fixture.

- vLLM's worker prefix "(VllmWorker rank=3 pid=N) " (vllm/executor/multiproc_worker_utils.py _add_prefix; the V1
  executor's worker names "VllmWorker rank={rank}", later "VllmWorker TP{t}" / "VllmWorker PP{p}_TP{t}") names the rank;
  vLLM's logger prefix "ERROR 04-23 01:03:33 [multiproc_executor.py:470] " repeated before each line of a traceback
  (vllm/logger.py NewLineFormatter) is read off the traceback's own lines.
- A traceback pasted with every line indented: the exception line two columns left of its frames (CPython
  Lib/traceback.py prints frames at 2, sources at 4, the exception at 0) is the exception line.
- An exception re-raised from a DataLoader worker or the pin-memory thread (torch/_utils.py ExceptionWrapper.reraise:
  "Caught KeyError in DataLoader worker process 3." + "Original Traceback"): the original exception is the cause;
  a message cut after "Caught TypeError" under the reraise frame is still that class (data/reraised_exceptions.json).
"""
from ddpdoctor.triage.lines import parse
from triage_loud import brief as _ids, loud_findings as _found

_FRAMES = ('Traceback (most recent call last):\n'
           '  File "/opt/conda/lib/python3.10/site-packages/vllm/v1/executor/multiproc_executor.py", line 465, in worker_busy_loop\n'
           '    output = func(*args, **kwargs)\n'
           '  File "/work/model.py", line 88, in forward\n'
           '    x = self.proj(x)\n'
           'RuntimeError: shape mismatch in proj\n')


def _vllm(prefix):
    log = "ERROR 04-23 01:03:33 [multiproc_executor.py:470] "
    return "".join(f"{prefix}{log}{ln}\n" for ln in ["WorkerProc hit an exception."] + _FRAMES.splitlines())


def test_a_vllm_workers_prefix_names_its_rank_and_its_logger_prefix_is_read_off_the_traceback(tmp_path):
    for prefix, rank in (("(VllmWorker rank=3 pid=1863294) ", 3), ("\x1b[1;36m(VllmWorker TP2 pid=77)\x1b[0;0m ", 2)):
        f = _found(tmp_path, _vllm(prefix))
        assert f and f[0].id == "LOG004" and f"rank {rank}" in f[0].title, _ids(f)
        assert "RuntimeError" in f[0].title and "shape mismatch" in f[0].title, _ids(f)
    line = parse(0, 1, 0, b"(VllmWorker rank=5 pid=12) INFO 04-23 01:03:33 [gpu_worker.py:232] Available KV cache memory")
    assert line.rank == 5 and line.pid == 12 and line.text.startswith("INFO 04-23"), line


def test_a_vllm_worker_under_pipeline_parallelism_names_no_rank_and_other_records_keep_their_level():
    line = parse(0, 1, 0, b"(VllmWorker PP1_TP2 pid=12) ERROR 04-23 01:03:33 [core.py:12] EngineCore failed to start.")
    assert line.rank is None and line.pid == 12, line
    assert line.text.startswith("ERROR 04-23 01:03:33"), line.text   # not a traceback's line: its level stays
    line = parse(0, 1, 0, b"(RayWorkerWrapper pid=12, ip=10.0.0.2) ERROR 04-23 01:03:33 [x.py:1]   File \"/a.py\", line 3, in f")
    assert line.rank is None and line.host == "10.0.0.2", line


_INDENTED = ('    File "/home/u/train.py", line 713, in main\n'
             '      train_one_epoch(\n'
             '    File "/home/u/utils.py", line 381, in train_one_epoch\n'
             '      loss = compute(batch)\n'
             '  ValueError: expected a non-empty batch\n')


def test_an_exception_line_pasted_two_columns_left_of_its_indented_frames_is_the_exception(tmp_path):
    f = _found(tmp_path, "Thanks, the error is as follows:\n\n" + _INDENTED)
    assert f and f[0].id == "LOG004" and "ValueError" in f[0].title and "non-empty batch" in f[0].title, _ids(f)


def test_an_indented_line_that_is_not_two_columns_left_of_the_frames_is_not_read_as_an_exception(tmp_path):
    # the same words as the frame's own source (four columns in, under a frame two in): code, not an exception line
    text = ('  File "/home/u/train.py", line 713, in main\n    ValueError\nStep 1 loss 0.5\n' + _END)
    f = _found(tmp_path, text)
    assert not any(x.id == "LOG004" and "ValueError" in x.title for x in f), _ids(f)


_END = "Training completed.\n"
_TB = ('Traceback (most recent call last):\n'
       '  File "train.py", line 88, in <module>\n    for batch in loader:\n'
       '  File "/opt/conda/lib/python3.10/site-packages/torch/utils/data/dataloader.py", line 1371, in _process_data\n'
       '    data.reraise()\n'
       '  File "/opt/conda/lib/python3.10/site-packages/torch/_utils.py", line 694, in reraise\n'
       '    raise exception\n')
_ORIGINAL = ('Original Traceback (most recent call last):\n'
             '  File "/opt/conda/lib/python3.10/site-packages/torch/utils/data/_utils/worker.py", line 308, in _worker_loop\n'
             '    data = fetcher.fetch(index)\n'
             '  File "/work/data.py", line 40, in __getitem__\n'
             '    return self.items[idx]["image"]\n')


def test_an_exception_reraised_from_a_dataloader_worker_names_the_worker_and_the_original(tmp_path):
    f = _found(tmp_path, "[rank1]: " + (_TB + "KeyError: Caught KeyError in DataLoader worker process 3.\n" + _ORIGINAL
                                        + "KeyError: 'image'\n").replace("\n", "\n[rank1]: ").rstrip("[rank1]: "))
    assert f and f[0].id == "LOG004" and "rank 1" in f[0].title, _ids(f)
    assert "DataLoader worker process 3" in f[0].title and "'image'" in f[0].title, _ids(f)
    assert "/work/data.py:40 in __getitem__" in f[0].title and "num_workers=0" in f[0].fix, (_ids(f), f[0].fix)
    f = _found(tmp_path, _TB + "RuntimeError: Caught RuntimeError in pin memory thread for device 0.\n" + _ORIGINAL
               + "RuntimeError: cannot pin 'torch.cuda.FloatTensor' only dense CPU tensors can be pinned\n")
    assert f and "pin memory thread for device 0" in f[0].title and "pin_memory=False" in f[0].fix, _ids(f)


def test_a_reraise_cut_after_its_class_is_read_by_the_frame_that_raised_it(tmp_path):
    f = _found(tmp_path, _TB + "TypeError: Caught TypeError\n")
    assert f and f[0].id == "LOG004" and "DataLoader worker" in f[0].title and "cut" in f[0].title, _ids(f)
    assert "an inference from the frame" in f[0].detail, f[0].detail


def test_a_message_that_starts_with_caught_elsewhere_is_not_a_dataloader_reraise(tmp_path):
    for text in ('Traceback (most recent call last):\n  File "train.py", line 8, in <module>\n    check(loss)\n'
                 "ValueError: Caught NaN in the loss at step 3\n",
                 'Traceback (most recent call last):\n  File "train.py", line 8, in <module>\n    check(loss)\n'
                 "TypeError: Caught TypeError\n"):
        f = _found(tmp_path, text)
        assert f and f[0].id == "LOG004" and "DataLoader" not in f[0].title and "DataLoader" not in f[0].detail, _ids(f)


# --- the legacy launcher's CalledProcessError (torch.distributed.launch, torch <= 1.8) -------------------------------
_LAUNCH_TB = ('Traceback (most recent call last):\n'
              '  File "/opt/conda/lib/python3.8/runpy.py", line 194, in _run_module_as_main\n'
              '    return _run_code(code, main_globals, None,\n'
              '  File "/opt/conda/lib/python3.8/site-packages/torch/distributed/launch.py", line 255, in main\n'
              '    raise subprocess.CalledProcessError(returncode=process.returncode,\n')
_CMD = "subprocess.CalledProcessError: Command '['/opt/conda/bin/python', '-u', 'tools/train.py', '--local_rank=%d', 'cfg.py']' "


def test_the_legacy_launchers_calledprocesserror_is_the_childs_exit_naming_its_local_rank(tmp_path):
    f = _found(tmp_path, "epoch 0 step 10 loss 2.31\n" + _LAUNCH_TB + _CMD % 0 + "died with <Signals.SIGSEGV: 11>.\n")
    assert f and f[0].id == "LOG003" and "local rank 0" in f[0].title and "guess" not in f[0].title, _ids(f)
    f = _found(tmp_path, "epoch 0 step 10 loss 2.31\n" + _LAUNCH_TB + _CMD % 3 + "returned non-zero exit status 1.\n")
    assert f and f[0].id == "LOG004" and "local rank 3 is a guess" in f[0].title and "code 1" in f[0].title, _ids(f)
    assert not any(s.startswith("rank:") for s in f[0].subjects), f[0].subjects
    assert "CalledProcessError" not in f[0].title, _ids(f)   # the launcher's report, not the program's exception


def test_a_programs_own_subprocess_call_with_local_rank_is_its_exception_not_a_launchers_exit(tmp_path):
    tb = ('Traceback (most recent call last):\n  File "/work/run_all.py", line 40, in <module>\n'
          '    subprocess.run(cmd, check=True)\n')
    f = _found(tmp_path, tb + _CMD % 3 + "returned non-zero exit status 1.\n")
    assert f and f[0].id == "LOG004" and "CalledProcessError" in f[0].title and "guess" not in f[0].title, _ids(f)


def test_elastics_failed_line_typed_with_full_width_punctuation_names_its_local_rank(tmp_path):
    for tail in ("local_rank: 1；(pid: 4242) of binary: /usr/bin/python", "local_rank：1 （pid：4242） of binary: x",
                 "local_rank: 1；请帮忙"):
        f = _found(tmp_path, "step 3 loss 1.0\nERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -11) "
                   + tail + "\n")
        assert f and f[0].id == "LOG003" and "local rank 1" in f[0].title, (tail, _ids(f))
    f = _found(tmp_path, "step 3 loss 1.0\nERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -11) "
               "local_rank: 12.5\n")
    assert f and "local rank 12" not in f[0].title, _ids(f)   # not a rank: a number that goes on


# --- EAGAIN on Gloo's socket: its receive timeout, the peer sent nothing (pytorch/gloo pair.cc @5b46c340 Pair::read) --
_COLL = ('torchrun --nnodes 2 --nproc_per_node 4 --rdzv_endpoint node1:29400 train.py\nTraceback (most recent call last):\n'
         '  File "train.py", line 120, in <module>\n    dist.all_reduce(t)\n')


def test_gloos_read_error_resource_temporarily_unavailable_is_the_peer_not_this_rank(tmp_path):
    f = _found(tmp_path, _COLL + "RuntimeError: [/opt/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:589] Read error "
               "[10.1.1.2]:53211: Resource temporarily unavailable\n")
    assert f and f[0].id == "LOG022" and "10.1.1.2" in f[0].title, _ids(f)


def test_a_programs_own_eagain_is_its_own_failure_not_a_lost_peer(tmp_path):
    # fcntl.flock(fd, LOCK_EX | LOCK_NB) on a held lock: BlockingIOError, errno 11, the same text
    f = _found(tmp_path, 'Traceback (most recent call last):\n  File "train.py", line 12, in <module>\n'
               "    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)\nBlockingIOError: [Errno 11] Resource temporarily unavailable\n")
    assert f and f[0].id == "LOG004" and "BlockingIOError" in f[0].title, _ids(f)


# --- an older torch's store read of 0 bytes, quoted by a ProcessGroup's store->get error (torch c10d Utils.hpp recvBytes)
def test_an_older_torchs_failed_to_recv_got_0_bytes_is_the_store_closing(tmp_path):
    f = _found(tmp_path, "(VllmWorkerProcess pid=53843) ERROR 12-17 09:32:03 [multiproc_worker_utils.py:239] RuntimeError: [1] is "
               "setting up HCCL communicator and retrieving hcclUniqueId from [0] via c10d key-value store by key '0', but "
               "store->get('0') got error: failed to recv, got 0 bytes\n")
    assert f and f[0].id == "LOG008" and "0 bytes" in f[0].title, _ids(f)


def test_other_words_after_got_0_bytes_are_not_the_store(tmp_path):
    f = _found(tmp_path, 'Traceback (most recent call last):\n  File "cam.py", line 3, in <module>\n    grab()\n'
               "RuntimeError: failed to recv, got 0 bytes of frame data from the camera\n")
    assert f and f[0].id == "LOG004" and "store" not in f[0].title, _ids(f)


# --- a bash multi-line command run by a shell that does not continue lines with '\' (cmd.exe, PowerShell) -----------
def test_a_continuation_character_as_an_argument_or_an_option_run_as_a_command_is_a_cut_multiline_command(tmp_path):
    for text in ("usage: train.py [-h] [--lr LR]\ntrain.py: error: unrecognized arguments: \\\n",
                 "usage: torchrun [-h] [--nproc-per-node NPROC]\ntorchrun: error: unrecognized arguments: ^\n"):
        f = _found(tmp_path, text)
        assert f and f[0].id == "LOG023" and "continuation character" in f[0].title, _ids(f)
        assert "one line" in f[0].fix, f[0].fix
    f = _found(tmp_path, "--epochs : The term '--epochs' is not recognized as the name of a cmdlet, function, script "
               "file, or operable program. Check the spelling of the name.\n")
    assert f and f[0].id == "LOG023" and "PowerShell ran the option --epochs" in f[0].title, _ids(f)
    assert "backtick" in f[0].fix, f[0].fix


def test_an_ordinary_unrecognized_argument_or_a_missing_program_under_powershell_is_not_a_continuation(tmp_path):
    f = _found(tmp_path, "usage: train.py [-h] [--lr LR]\ntrain.py: error: unrecognized arguments: --lrr 0.1\n")
    assert f and f[0].id == "LOG023" and "continuation" not in f[0].title, _ids(f)
    f = _found(tmp_path, "torchrun : The term 'torchrun' is not recognized as the name of a cmdlet, function, script "
               "file, or operable program.\n")
    assert not any("continuation" in x.title or "PowerShell ran the option" in x.title for x in f), _ids(f)


# --- a bare bus error names no DataLoader worker: the signal, /dev/shm as a guess (rules/dataloader.py) ---------------
def test_a_bare_bus_error_is_the_signal_with_shared_memory_as_a_guess(tmp_path):
    for text in ("epoch 0 step 10 loss 2.1\nBus error (core dumped)\n",
                 "+ python train.py\nepoch 0 step 10 loss 2.1\ntrain.sh: line 5: 12345 Bus error               (core dumped) python train.py\n"):
        f = _found(tmp_path, text)
        assert f and f[0].id == "LOG010" and "SIGBUS" in f[0].title and "a guess" in f[0].title, _ids(f)
        assert "DataLoader worker was killed" not in f[0].title, _ids(f)


def test_the_dataloaders_own_bus_error_message_still_names_the_worker(tmp_path):
    f = _found(tmp_path, "epoch 0 step 10 loss 2.1\nERROR: Unexpected bus error encountered in worker. This might be "
               "caused by insufficient shared memory (shm).\nBus error (core dumped)\n")
    assert f and f[0].id == "LOG010" and "DataLoader worker was killed" in f[0].title and "guess" not in f[0].title, _ids(f)


# --- the shell's "Aborted (core dumped)" beside the line that says why (data/abort_texts.json) -------------------------
_ABORTED = "run.sh: line 12: 4242 Aborted                 (core dumped) python train.py\n"


def test_a_sigabrt_death_is_named_by_the_abort_message_printed_before_it(tmp_path):
    for cause, said in (("python: /opt/src/foo.cpp:42: void f(): Assertion `n > 0' failed.\n", "Assertion `n > 0'"),
                        ("terminate called after throwing an instance of 'std::runtime_error'\n  what():  bad shape\n",
                         "std::runtime_error")):
        f = _found(tmp_path, "+ python train.py\nepoch 0 step 3 loss 1.0\n" + cause + _ABORTED)
        assert f and f[0].id == "LOG004" and "SIGABRT" in f[0].title and "aborted itself after" in f[0].title, _ids(f)
        assert said in f[0].title, _ids(f)


def test_a_sigabrt_death_with_no_abort_message_says_no_reason(tmp_path):
    f = _found(tmp_path, "+ python train.py\nepoch 0 step 3 loss 1.0\n" + _ABORTED)
    assert f and f[0].id == "LOG004" and "SIGABRT" in f[0].title and "aborted itself after" not in f[0].title, _ids(f)
