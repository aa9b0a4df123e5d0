"""Round-19 classes of issue 24 (triage, 2026-12-07), each with a trigger and a quiet twin. Pure in-process.

- NEGATED prose: an error named as not raised / not re-thrown / never thrown / "without any error", or as what should
  be raised ("exception should be rethrown"), is a sentence about a failure that did not happen; a message that holds
  such words after its exception type ("AssertionError: RuntimeError not raised") stays a failure.
- torch's TORCH_INTERNAL_ASSERT format ('{cond} INTERNAL ASSERT FAILED at "{file}":{line}', c10/util/Exception.h) in a
  title quotes a message, though it has no ": " after its failure word; a title that only names an error does not.
- A one-line ```...``` span (not a fence: a backtick fence's info string holds no backtick, CommonMark 4.5) holding a
  message is a message; a real ```text fence still opens a block.
- A raise's string argument continued on its own line, and `raise Exception(` with the bare base class, are code.
- A pull request's own test run reported failing ("- `pytest -q` *(fails: ...)*") is a failure, not a quote; a PR
  that only quotes the error it fixes stays quoted.
- torch's blocking-wait timeout ("Work WorkNCCL(SeqNum=..., ...) timed out in blocking wait", ProcessGroupNCCL.cpp)
  is a collective timeout (LOG001), its rank named; the same line's format with placeholders is none.
"""
from __future__ import annotations

from triage_factory import failed as _failed, found as _found


# b163_11's shape (pytorch/pytorch#29924): a test that does NOT see the remote exception
_NOT_RETHROWN = ("# Remote python exception is not rethrown when create remote reference to itself\n\n"
                 "## Bug\n\nIt is found that remote python exception is not re-thrown when create remote reference "
                 "to itself\n\nadd a new unit test; the remote exception is not rethrown\n\n"
                 "## Expected behavior\n\nexception should be rethrown\n\n"
                 "The call does not raise an exception and returns None. It runs without any error.\n")


def test_prose_saying_an_exception_is_not_raised_is_no_failure(tmp_path):
    assert not _failed(_found(tmp_path, _NOT_RETHROWN))


def test_a_message_saying_an_exception_was_not_raised_stays_a_failure(tmp_path):
    # unittest's assertRaises failing: the exception type opens the line, the negated words are its message
    found = _failed(_found(tmp_path, "test_remote_exception (test_rpc.RpcTest) ... FAIL\n"
                                     "AssertionError: RuntimeError not raised\n"))
    assert found


_ASSERT_TITLE = ('# remote failure INTERNAL ASSERT FAILED at "../torch/csrc/distributed/rpc/rref_context.cpp":389\n\n'
                 "### Describe the bug\n\nWhen running the following code, it crashes.\n")


def test_a_title_quoting_torchs_internal_assert_is_a_failure(tmp_path):
    assert _failed(_found(tmp_path, _ASSERT_TITLE))


def test_a_title_naming_an_assert_without_its_format_is_none(tmp_path):
    text = "# internal assert failed when using rpc remote with a timeout\n\nA question about the design.\n"
    assert not _failed(_found(tmp_path, text))


_ONE_LINE_SPAN = ("# pretrain does not work on GPU\n\nWhen training on 4 devices, I get an FSDP-related error\n"
                  "```AssertionError: The `grad_fn` is needed to access the `AccumulateGrad` and register the "
                  "post-backward hook```\n")


def test_a_message_in_a_one_line_triple_backtick_span_is_a_failure(tmp_path):
    assert _failed(_found(tmp_path, _ONE_LINE_SPAN))


def test_a_fence_opened_by_three_backticks_and_a_language_is_still_a_block(tmp_path):
    # a python block's raise is code; the block closes, and nothing after it failed
    text = ("# how to check for CUDA\n\n```python\nif not torch.cuda.is_available():\n"
            "    raise RuntimeError(\"Must run on CUDA devices\")\n```\n\nThat works.\n")
    assert not _failed(_found(tmp_path, text))


_RAISE_STRING = ("# torch.compile failed with pytorchddp\n\n```\nclass Net(nn.Module):\n    pass\n\n"
                 "def main():\n    if not torch.cuda.is_available():\n        raise Exception(\n"
                 "            \"Must run the example on CUDA-capable devices: NCCL error otherwise.\"\n        )\n"
                 "    torch.manual_seed(1)\n```\n")


def test_a_raise_and_its_continued_string_are_code(tmp_path):
    assert not _failed(_found(tmp_path, _RAISE_STRING))


def test_an_exception_printed_with_a_quoted_message_stays_a_failure(tmp_path):
    found = _failed(_found(tmp_path, "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
                                     "    main()\nException: \"Must run the example on CUDA-capable devices\"\n"))
    assert found


_PR_TEST_FAILED = ("# Fix trainer argument in multi node ddp example\n\n## Summary\n- fix undefined variable when "
                   "instantiating `Trainer` in multi-node DDP script\n\n## Testing\n"
                   "- `pytest -q` *(fails: ModuleNotFoundError: No module named 'transformers')*\n")
_PR_QUOTE = ("# Fix trainer argument in multi node ddp example\n\nThis PR fixes the "
             "ModuleNotFoundError: No module named 'transformers' users hit.\n\n## Testing\n- `pytest -q` passes\n")


def test_a_pull_requests_own_failing_test_run_is_a_failure(tmp_path):
    assert _failed(_found(tmp_path, _PR_TEST_FAILED))


def test_a_pull_request_quoting_the_error_with_a_passing_test_run_stays_quoted(tmp_path):
    assert not _failed(_found(tmp_path, _PR_QUOTE))


_BLOCKING = ("[rank4]:[E601 07:25:57.393526823 ProcessGroupNCCL.cpp:756] [Rank 4] Work WorkNCCL(SeqNum=201809, "
             "OpType=BROADCAST, NumelIn=32, NumelOut=32, Timeout(ms)=10800000) timed out in blocking wait.\n")


def test_torchs_blocking_wait_timeout_is_a_collective_timeout(tmp_path):
    found = _found(tmp_path, _BLOCKING)
    assert found and found[0].id == "LOG001" and "rank:4" in found[0].subjects


def test_the_blocking_wait_format_with_placeholders_is_none(tmp_path):
    text = ("# blocking wait message\n\nThis PR changes the message to\n"
            "[Rank <rank>] Work WorkNCCL(SeqNum=..., OpType=..., NumelIn=..., NumelOut=..., Timeout(ms)=...) timed out "
            "in blocking wait.\n")
    assert not _failed(_found(tmp_path, text))


# torch_npu's error header (NPUException.cpp formatErrorCode): "(PID:p, Device:d, RankID:r)"; RankID is the job's RANK
_NPU = "training...\n[ERROR] 2024-05-21-11:57:54 (PID:927000, Device:3, RankID:{r}) ERR02200 DIST call hccl api failed.\n"


def test_torch_npus_error_header_names_its_rank(tmp_path):
    found = _failed(_found(tmp_path, _NPU.format(r=3)))
    assert found and "rank:3" in found[0].subjects


def test_torch_npus_header_without_a_rank_names_none(tmp_path):
    found = _failed(_found(tmp_path, _NPU.format(r=-1)))
    assert found and not any(s.startswith("rank:") for s in found[0].subjects)


# a config dumped unfenced at the end of an excerpt (Hydra/mmengine YAML, a DeepSpeed JSON)
_CONFIG = ("Config:\nmodel:\n  name: llama\n  log_level: ERROR\ntrainer:\n  raise_exception: Exception\n"
           "{\n  \"error_mode\": \"FATAL\",\n  \"on_failure\": \"Killed\"\n}\n")


def test_an_unfenced_config_naming_failure_words_is_no_failure(tmp_path):
    assert not _failed(_found(tmp_path, _CONFIG))


def test_a_status_field_or_a_message_shaped_like_a_setting_stays_a_failure(tmp_path):
    assert _failed(_found(tmp_path, "Pod train-0\n  Status: Failed\n"))
    assert _failed(_found(tmp_path, "x\nKeyError: 'PDSH_SSH_ARGS_APPEND'\n", name="k.log"))


# a spawned child unpickling its arguments (Lib/multiprocessing/spawn.py _main) runs out of host memory
_SPAWN_MEMORY = ("Traceback (most recent call last):\n  File \"<string>\", line 1, in <module>\n"
                 "  File \"/usr/lib/python3.10/multiprocessing/spawn.py\", line 116, in spawn_main\n"
                 "    exitcode = _main(fd, parent_sentinel)\n"
                 "  File \"/usr/lib/python3.10/multiprocessing/spawn.py\", line 126, in _main\n"
                 "    self = reduction.pickle.load(from_parent)\nMemoryError\n")


def test_a_memoryerror_is_host_memory(tmp_path):
    found = _found(tmp_path, _SPAWN_MEMORY)
    assert found and found[0].id == "LOG002"


def test_cudas_out_of_memory_error_is_no_host_memory(tmp_path):
    found = _found(tmp_path, "x\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    assert found and found[0].id == "LOG005"


# XLA's distributed runtime client giving up on the coordinator (tensorflow/compiler/xla/pjrt/distributed/client.cc)
def test_jaxs_connect_timeout_is_an_unreachable_coordinator(tmp_path):
    found = _found(tmp_path, "jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: Connect() timed out after 5m "
                             "with 33 attempts. Most recent failure was: UNAVAILABLE: failed to connect to all addresses\n")
    assert found and found[0].id == "LOG008"


def test_jaxs_connected_line_is_no_failure(tmp_path):
    text = "I0812 10:00:00.000000 1234 client.cc:170] Connected to distributed JAX controller\nstep 1 loss 2.3\n"
    assert not _failed(_found(tmp_path, text))


# --- classes found by the first reads of batches 166-168 (fixed after them; read again in 169-171) ---

def test_a_bare_raise_and_a_raise_in_a_code_span_are_code(tmp_path):
    text = ("# wandb.init keeps spawned processes alive\n\n```\ndef main(rank):\n    wandb.init()\n    raise ValueError\n```\n\n"
            "When I remove `raise ValueError` the program does not stop either.\n")
    assert not _failed(_found(tmp_path, text))


def test_a_raised_value_error_printed_stays_a_failure(tmp_path):
    text = ("Traceback (most recent call last):\n  File \"train.py\", line 3, in main\n    raise ValueError\n"
            "ValueError\n")
    assert _failed(_found(tmp_path, text))


def test_exception_handling_and_an_attributive_failed_are_prose(tmp_path):
    text = ("# make W&B init best-effort\n\n`_init_wandb` calls `wandb.init()` only on the main process, with no\n"
            "exception handling and no rendezvous afterwards.\n- Add a barrier after rank-0 init so a slow or failed\n"
            "  init cannot desync collectives.\n")
    assert not _failed(_found(tmp_path, text))


def test_a_failure_sentence_stays_a_failure(tmp_path):
    assert _failed(_found(tmp_path, "x\nRuntimeError: the init failed on rank 0\n"))


_HYPOTHETICAL = ("# A better way to handle DDP raised error\n\nIf torch.distributed is not available, users may meet errors "
                 "like:\n```\nAttributeError: module 'torch.distributed' has no attribute 'is_initialized'\n```\n"
                 "The error message is not informative enough.\n")


def test_an_example_error_a_hypothetical_sentence_announces_is_no_failure(tmp_path):
    assert not _failed(_found(tmp_path, _HYPOTHETICAL))


def test_an_error_the_writer_got_stays_a_failure(tmp_path):
    text = _HYPOTHETICAL.replace("users may meet errors like:", "I got this error:")
    assert _failed(_found(tmp_path, text))


def test_torchs_device_mismatch_is_a_known_error(tmp_path):
    found = _found(tmp_path, "x\nRuntimeError: Expected all tensors to be on the same device, but found at least two "
                             "devices, cuda:0 and cuda:1! (when checking argument for argument index in method "
                             "wrapper_CUDA__index_select)\n")
    assert found and found[0].id == "LOG027" and "device_map" in found[0].fix


def test_prose_about_devices_is_no_known_error(tmp_path):
    text = "# multi GPU\n\nAre all tensors expected to be on the same device when I use DataParallel?\n"
    assert not _failed(_found(tmp_path, text))


def test_bitsandbytes_cuda_check_is_a_gpu_fault(tmp_path):
    found = _found(tmp_path, "x\nError invalid configuration argument at line 119 in file /src/csrc/ops.cu\n")
    assert found and found[0].id == "LOG020"


def test_an_error_at_a_python_file_line_is_no_cuda_check(tmp_path):
    found = _found(tmp_path, "x\nError handling at line 5 in file train.py is fine\nstep 1 loss 2.0\nstep 2 loss 1.9\n")
    assert not any(f.id == "LOG020" for f in found)


_ISSUE_WITH_PR_LINK = ("# LoRA finetuning a larger model on multi-GPUs\n\nI get this error:\nRuntimeError: CUDA error: "
                       "an illegal memory access was encountered\n\nreply\nThis PR, merged yesterday, addresses it "
                       "https://github.com/o/r/pull/131\n")


def test_an_issue_reply_linking_another_pr_keeps_the_failure(tmp_path):
    assert _failed(_found(tmp_path, _ISSUE_WITH_PR_LINK))


def test_a_pr_describing_itself_still_quotes(tmp_path):
    text = _ISSUE_WITH_PR_LINK.replace(" https://github.com/o/r/pull/131", "").replace("This PR, merged yesterday, "
                                                                                      "addresses it", "This PR fixes it")
    assert not _failed(_found(tmp_path, text))


_IPY = ("When trying to run it this error occurs:\n\n<ipython-input-8-a05> in train(**kwargs)\n     76 \n"
        "     77     # Launch.\n---> 78     launch_training(c=c, desc=desc, outdir=opts.outdir)\n\n"
        "<ipython-input-7-7e4> in launch_training(c, desc, outdir, rank)\n     44     x = 1\n"
        "---> 45     training_loop.training_loop(rank=rank, **c)\n")


def test_ipython_traceback_frames_cut_above_are_a_failure(tmp_path):
    found = _failed(_found(tmp_path, _IPY))
    assert found and found[0].id == "LOG028"


def test_an_arrow_in_prose_is_no_traceback(tmp_path):
    text = "# notes\n\nnodes:\n--> 2 nodes with 8 GPUs each\nstep 1 loss 2.0\nstep 2 loss 1.9\n"
    assert not _failed(_found(tmp_path, text))


# --- classes found by the first reads of batches 169-171 (fixed after them; read again in 172-174) ---

def test_pythons_connection_reset_in_a_data_loop_is_no_lost_nccl_peer(tmp_path):
    text = ('[rank1]:   File "/opt/ml/code/train.py", line 235, in main\n[rank1]:     for step, batch in pbar:\n'
            "[rank1]: ConnectionResetError: [Errno 104] Connection reset by peer\n")
    found = _failed(_found(tmp_path, text))
    assert found and found[0].id != "LOG022" and "rank:1" in found[0].subjects


def test_c10d_connection_reset_stays_a_lost_peer(tmp_path):
    text = ("[rank1]: RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970, remote process exited or there was a "
            "network error, NCCL version 2.20.5\n[rank1]: ncclRemoteError: A call failed possibly due to a network "
            "error or a remote process exiting prematurely.\n[rank1]: Last error:\n"
            "[rank1]: socketProgress: Connection reset by peer\n")
    found = _found(tmp_path, text)
    assert found and found[0].id == "LOG022"


def test_keyerror_rank_with_its_closing_quote_cut_is_a_missing_launcher(tmp_path):
    text = ('  File "/content/g/distributed_utils.py", line 73, in dist_init_pytorch\n    rank = int(os.environ[\'RANK\'])\n'
            '  File "/usr/lib/python3.7/os.py", line 681, in __getitem__\n    raise KeyError(key) from None\nKeyError: \'RANK\n')
    found = _found(tmp_path, text)
    assert found and found[0].id == "LOG023" and "os.environ['RANK']" in found[0].title


def test_another_variables_keyerror_is_no_missing_launcher(tmp_path):
    found = _found(tmp_path, "x\nKeyError: 'RANKS_PER_NODE'\n")
    assert found and found[0].id != "LOG023"
