"""Round-18 classes of issue 24 (triage, 2026-12-07), after the first reads of batches 122-124. Pure in-process.

- Ascend's CANN error codes for HCCL (EIxxxx) and HCCP (EJxxxx), mined from the table CANN's collective library
  registers (hcomm src/common/error_code/error_code.cc, tools/mine_hccl_codes.py), are catalogue entries: a coded line
  is reported with the code's meaning and fix, and "EJ0001:" opening a line is a code, not a pdsh host prefix.
- Prose that names an error with a determiner ("I get an error when ...", "this Exception is not raised") is no failure
  line; a message quoted in the same sentence still is.
- bash's "%s: command not found" (execute_cmd.c, exit status 127) is a failure line.
"""
from __future__ import annotations

from ddpdoctor.facts import messages

from triage_factory import failed as _failed, found as _found


# b122_13's shape (hiyouga/LlamaFactory#3839): torch_npu's barrier fails, its ERR02200 header, then HCCP's coded line
_EJ0001 = ("RuntimeError: [ERROR] HCCL error in: torch_npu/csrc/distributed/ProcessGroupHCCL.cpp:64\n"
           "[ERROR] 2024-05-21-11:57:54 (PID:927000, Device:3, RankID:3) ERR02200 DIST call hccl api failed.\n"
           "EJ0001: 2024-05-21-11:57:54.167.645 Failed to initialize the HCCP process. Reason: Maybe the last training "
           "process is running.\n"
           "        Solution: Wait for 10s after killing the last training process and try again.\n")


def test_hccp_ej0001_is_reported_with_its_meaning_and_fix(tmp_path):
    found = _found(tmp_path, _EJ0001)
    assert found[0].id == "LOG027" and found[0].severity == "error"
    assert "EJ0001" in found[0].title and "previous training process" in found[0].detail
    assert "Kill the previous training process" in found[0].fix


def test_a_cann_code_opening_a_line_is_not_a_host(tmp_path):
    from ddpdoctor.triage.lines import parse

    line = parse(0, 1, 0, b"EJ0003: [PID: 10233] 2025-06-17-06:11:32.832.492 Failed to bind the IP port. Reason: x\n")
    assert line.host is None
    assert parse(0, 1, 0, b"worker-3: RuntimeError: x\n").host == "worker-3"


def test_hccl_title_form_with_any_title_name_is_recognised(tmp_path):
    found = _found(tmp_path, "[PID: 60571] 2025-12-04-14:46:07.669.968 Bind_Failed(EJ0003): Failed to bind the IP port. "
                   "Reason: The IP address and port have been bound already.\n")
    assert found[0].id == "LOG027" and "EJ0003" in found[0].title


def test_hccl_error_cqe_is_a_lost_peer_not_a_cause(tmp_path):
    found = _found(tmp_path, "[PID: 4242] 2025-10-23-17:30:40.098.984 Execution_Error_ROCE_CQE(EI0013): An error CQE "
                   "occurred during operator execution. Local information: server 10.0.0.1, device ID 1, device IP "
                   "192.168.1.1. Peer information: server 10.0.0.2, device ID 3, device IP 192.168.1.3.\n")
    assert found[0].id == "LOG022" and "EI0013" in found[0].title


def test_hccl_codes_in_prose_without_colon_or_message_are_no_failure(tmp_path):
    found = _found(tmp_path, "export HCCL_IF_BASE_PORT=61000   # against EI0019 when two jobs share a host\n"
                   "the EJ0001 page says to wait 10 s\n")
    assert not _failed(found)


def test_every_mined_hccl_entry_matches_both_printed_forms():
    mined = [e for e in messages.entries() if e["id"].startswith("hccl.")]
    assert len(mined) >= 20
    for e in mined:
        code = e["id"].split(".")[1].split("_")[0].upper()
        for ex in e["examples"]:
            assert code in ex and e["id"] in [m.entry["id"] for m in messages.match_all(ex)], (e["id"], ex)


def test_prose_naming_an_error_is_no_failure(tmp_path):
    text = ("I get an error when I start the training using `TorchTrainer`. The Error is given below:\n"
            "Previously with Ray Train, if 1 worker raises an Exception in the application code, this Exception is not "
            "raised in the driver until all workers have finished.\n")
    assert not _failed(_found(tmp_path, text))


def test_prose_quoting_the_message_stays_a_failure(tmp_path):
    found = _found(tmp_path, "I get an error when I start the training: RuntimeError: NCCL error in: "
                   "ProcessGroupNCCL.cpp:1269, unhandled system error, NCCL version 2.14.3\n")
    assert _failed(found)


def test_open_mpi_banner_that_begins_like_prose_stays_a_failure(tmp_path):
    found = _found(tmp_path, "*** An error occurred in MPI_Init_thread\n*** on a NULL communicator\n"
                   "*** MPI_ERRORS_ARE_FATAL (processes in this communicator will now abort,\n")
    assert _failed(found)


def test_bash_command_not_found_is_a_failure(tmp_path):
    found = _found(tmp_path, "[INFO] Converting whiteouts...\n"
                   "/bin/bash: enroot-aufs2ovlfs: command not found\n")
    assert found[0].id == "LOG028" and found[0].title.startswith("unexplained failure")


def test_the_words_command_not_found_in_prose_are_no_failure(tmp_path):
    found = _found(tmp_path, "If the launcher prints that a command was not found, add it to PATH.\n")
    assert not _failed(found)


# "stops after torchrun's start" said of a launch that was not torchrun's (the task's class): the launcher is the one
# the line that asks for the nodes names (data/launchers.json, a `python -m` module, torchrun's launch configs)
def test_a_multi_node_launch_by_another_program_is_named_as_that_program(tmp_path):
    found = _found(tmp_path, "$ python3 -m sglang.launch_server --model-path /model --tp 16 --dist-init-addr "
                   "10.0.0.1:20000 --nnodes 2 --node-rank 0\n[2025-02-10 12:17:35] server_args=ServerArgs(tp_size=16)\n")
    assert found[0].id == "LOG029" and "sglang.launch_server's start on a 2-node launch" in found[0].title
    assert "torchrun" not in found[0].title + found[0].detail


def test_a_torchrun_launch_keeps_torchruns_rendezvous(tmp_path):
    found = _found(tmp_path, "torchrun --nnodes 2 --nproc-per-node 8 --rdzv-endpoint node0:29400 train.py\n"
                   "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your "
                   "system being overloaded, please further tune the variable for optimal performance in your "
                   "application as needed.\n")
    assert "torchrun's start on a 2-node launch" in found[0].title and "RendezvousTimeoutError" in found[0].detail


# A Markdown ATX heading (CommonMark 0.31.2, 4.2) names what its section or thread is about: no failure line unless it
# quotes a message (a failure word, ': ', its text). Batch 125's thread titles; an issue template's own headings.
def test_a_heading_naming_an_error_is_no_failure(tmp_path):
    text = ("# Error while launching Deepspeed\n\n# DistNetworkError when using multiprocessing_context parameter\n"
            "### Error messages and logs\n")
    assert not _failed(_found(tmp_path, text))


def test_the_message_under_a_template_heading_stays_the_failure(tmp_path):
    found = _found(tmp_path, "### Error messages and logs\n\nhere is what I see\n"
                   "ValueError: You selected an invalid strategy name: `strategy=x`.\n")
    assert found[0].id in ("LOG004", "LOG028") and "line 4" in found[0].title + found[0].detail


def test_a_heading_quoting_a_message_stays_a_failure(tmp_path):
    found = _found(tmp_path, "# [FSDP+TP] RuntimeError: 'weight' must be 2-D\n\nDo you need to pass the sharded model?\n")
    assert _failed(found)


# A failure verb in a conditional or temporal clause is a sentence about failures, not one (batch 126's errors on
# healthy logs: a quote of submitit's docs, a PR's test note); the job's own "Timed out ..." line stays a failure.
def test_a_failure_verb_in_a_conditional_clause_is_no_failure(tmp_path):
    text = ("> it will be checkpointed and requeued at most `slurm_max_num_timeout=3` times if timed out\n"
            "Ran the job and it was able to requeue correctly 3 times after being timed out with the same config.\n")
    assert not _failed(_found(tmp_path, text))


def test_a_job_that_timed_out_stays_a_failure(tmp_path):
    found = _found(tmp_path, "epoch 3 step 100 loss 1.2\nRuntimeError: Timed out waiting for peers after 1800 seconds "
                   "when the store was queried\n")
    assert _failed(found)


# NCCL's libfabric plugin (aws-ofi-nccl) warns only before it fails a call (include/nccl_ofi_log.h NCCL_OFI_WARN; 496
# of its 653 WARN formats name the failure, tools/mine_ofi_warnings.py): such a WARN line is the failure, named with
# the plugin's own words, in NCCL's form and in its early tests' "WARN: Function: ... Line: N:" form (batch 128).
def test_an_ofi_plugin_warn_naming_a_failure_is_the_cause(tmp_path):
    found = _found(tmp_path, "ip-10-0-0-1:75:95 [2] NCCL INFO NET/OFI Selected Provider is efa\n"
                   "ip-10-0-0-1:75:95 [2] configure_sendrecv_inorder:213 NCCL WARN NET/OFI Couldn't set "
                   "FI_OPT_EFA_SENDRECV_IN_ORDER_ALIGNED_128_BYTES. RC: -95, ERROR: Operation not supported\n")
    assert found[0].id == "LOG009" and "aws/aws-ofi-nccl failed" in found[0].title
    assert "Couldn't set FI_OPT_EFA" in found[0].title
    found = _found(tmp_path, "10.3.35.83: WARN: Function: main Line: 66: NET/OFI OFI NCCL failure: 2\n", "b.log")
    assert found[0].id == "LOG009"


def test_the_ofi_plugins_info_and_plain_warnings_are_no_failure(tmp_path):
    found = _found(tmp_path, "ip-10-0-0-1:75:95 [2] NCCL INFO NET/OFI Selected Provider is efa\n"
                   "ip-10-0-0-1:75:95 [2] nccl_net_ofi_init:99 NCCL WARN NET/OFI CUDA flush enabled\n"
                   "ip-10-0-0-1:75:95 [2] NCCL INFO comm 0x5 rank 2 nranks 16 cudaDev 2 busId 5a000 - Init COMPLETE\n")
    assert not any(f.severity == "error" for f in found)


# A question about failures and a bare label introducing a quote are a writer's words (batch 130's error on a healthy
# PR review, and an 'Error:' label line); a question quoting a message, and the quoted message itself, stay failures.
def test_a_question_or_a_label_about_errors_is_no_failure(tmp_path):
    text = ("could you elaborate on whether the node fails/exits on a signal, exception, or exits successfully?\n"
            "Error:\n")
    assert not _failed(_found(tmp_path, text))


def test_a_question_quoting_a_message_and_the_quoted_message_stay_failures(tmp_path):
    assert _failed(_found(tmp_path, "Why do I get RuntimeError: CUDA error: an illegal memory access was encountered?\n"))
    found = _found(tmp_path, "Error:\nRuntimeError: Expected to mark a variable ready only once.\n", "b.log")
    assert found[0].id == "LOG012"


# b131_06's shape (ROCm/rccl-tests#16): rccl-tests' hipified CUDACHECK prints "Test HIP failure FILE:LINE '<text>'",
# and an older HIP runtime's hipGetErrorString gave the enum's name
def test_rccl_tests_hip_failure_with_the_enum_name_is_gpu_setup(tmp_path):
    found = _found(tmp_path, "sharbox: Test HIP failure common.cu:1129 'hipErrorInvalidDevice'\n"
                             " .. sharbox pid 1: Test failure common.cu:1161\n")
    assert found[0].id == "LOG021" and "invalid device ordinal" in found[0].title
    found = _found(tmp_path, "node-a: Test HIP failure common.cu:1129 'invalid device ordinal'\n")
    assert found[0].id == "LOG021"
    found = _found(tmp_path, "node-a: Test HIP failure common.cu:731 'hipErrorIllegalAddress'\n")
    assert found[0].id == "LOG020"


def test_a_hip_enum_name_in_prose_without_a_failure_prefix_is_no_failure(tmp_path):
    found = _found(tmp_path, "The runtime returns hipErrorInvalidDevice when the ordinal is out of range.\n")
    assert not _failed(found)


# b132_13's shape (open-mmlab/mmdetection#3520): `python tools/dist_train.sh` compiles the shell script as Python
def test_python_running_a_shell_script_is_a_launch_mistake(tmp_path):
    found = _found(tmp_path, '  File "./tools/dist_train.sh", line 3\n    CONFIG=$1\n           ^\n'
                             "SyntaxError: invalid syntax\n")
    assert found[0].id == "LOG023" and "dist_train.sh" in found[0].title and "bash" in found[0].fix


def test_a_syntax_error_in_a_python_file_stays_the_rank_failure(tmp_path):
    found = _found(tmp_path, '  File "train.py", line 3\n    CONFIG=$1\n           ^\nSyntaxError: invalid syntax\n')
    assert found[0].id != "LOG023" and _failed(found)


# b134_09's shape (pytorch/pytorch#153354): a failure after a modal verb is what would happen, not what did
def test_a_failure_after_a_modal_verb_is_no_failure(tmp_path):
    found = _found(tmp_path, "I also can't batch the inputs together because the model will OOM.\n"
                             "Raising the timeout would crash the job on slow nodes.\n")
    assert not _failed(found)


def test_a_modal_sentence_with_a_message_stays_a_failure(tmp_path):
    found = _found(tmp_path, "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB; the next step will OOM too\n")
    assert _failed(found)


# b135_02's shape (goodfire-ai/spd#537): a kind of failure given as an example in parentheses
def test_a_failure_named_as_an_example_in_parentheses_is_no_failure(tmp_path):
    found = _found(tmp_path, "Add --kill-on-bad-exit=1 so a dead torchrun on one node (e.g. OOM) kills the whole step "
                             "immediately.\n")
    assert not _failed(found)


def test_a_message_outside_the_parentheses_stays_a_failure(tmp_path):
    found = _found(tmp_path, "torch.cuda.OutOfMemoryError: CUDA out of memory (e.g. 2.00 GiB requested)\n")
    assert _failed(found)


# b138_14's shape (facebookresearch/maskrcnn-benchmark#103): torch's MapAllocator could not shm_open a shared tensor
def test_unable_to_open_shared_memory_object_is_the_fd_limit(tmp_path):
    found = _found(tmp_path, "RuntimeError: unable to open shared memory object </torch_29919_1396182366> in read-write "
                             "mode\n")
    assert found[0].id == "LOG011" and "file descriptors" in found[0].title
    found = _found(tmp_path, "RuntimeError: unable to open shared memory object </torch_1_2> in read-write mode: Too many "
                             "open files (24)\n")
    assert found[0].id == "LOG011" and "file descriptors" in found[0].title


def test_unable_to_open_shared_memory_object_with_another_errno_names_it(tmp_path):
    found = _found(tmp_path, "RuntimeError: unable to open shared memory object </torch_1_2> in read-write mode: No such "
                             "file or directory (2)\n")
    assert found[0].id == "LOG011" and "No such file or directory (errno 2)" in found[0].title


# b142_02's title (deepspeedai/DeepSpeed#5318): a heading naming a change quotes the error it removes
def test_a_heading_naming_a_fix_is_no_failure(tmp_path):
    found = _found(tmp_path, "# resolve KeyError: 'PDSH_SSH_ARGS_APPEND'\n\n## [Bugfix] Fix RuntimeError: NCCL error on 2 nodes\n")
    assert not _failed(found)


def test_a_heading_quoting_an_error_without_a_fix_verb_stays_a_failure(tmp_path):
    found = _found(tmp_path, "# RuntimeError: 'weight' must be 2-D\n")
    assert _failed(found)


# b143_05 / b143_08's shapes (pytorch/pytorch#73897, #46879): PR prose about NCCL's errors and error handling
def test_prose_about_ncclsystemerror_and_error_handling_is_no_failure(tmp_path):
    found = _found(tmp_path, "rather than applying the hint to all ncclSystemError's which may also include those\n"
                             "Docs Changes for NCCL Async Error Handling. Adds info about the async error handling variable\n")
    assert not _failed(found)


def test_ncclsystemerror_as_printed_stays_the_nccl_system_error(tmp_path):
    found = _found(tmp_path, "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or "
                             "device error.\n")
    assert found[0].id == "LOG009"


# b154_12's shape (espnet/espnet#1506): a PR test comment says what causes errors, in the plural, after a causal verb
def test_prose_naming_what_causes_errors_is_no_failure(tmp_path):
    found = _found(tmp_path, "I found that `collect_stats` stage allocates gpu memory and many `nj` causes OOM errors "
                             "without gpu allocation through the slurm.\n")
    assert not _failed(found)


def test_a_message_after_prose_about_causes_stays_a_failure(tmp_path):
    found = _found(tmp_path, "Large batches cause OOM errors on this node.\n"
                             "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    assert _failed(found)
