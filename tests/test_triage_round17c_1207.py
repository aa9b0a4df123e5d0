"""Round-17 wave-3 class of issue 24 (triage, 2026-12-07): source code shown as text is no failure. ddpdoctor/triage/
blocks.py finds the blocks by the formats' own definitions (a Markdown fenced code block tagged with a source language,
CommonMark 0.31.2 section 4.5; a unified diff hunk, GNU diffutils' unified format; a pasted script opened by a shebang or
a scheduler's directive); their lines give no failure line, no failure class and no end. What a block shows as OUTPUT (a
traceback, an exception line, a rank-prefixed line, a fence tagged text/console or untagged, what follows a script)
keeps its failures. Pure in-process."""
from __future__ import annotations

from ddpdoctor.triage.blocks import SourceBlocks

from triage_factory import failed as _failed, found as _found


_OOM_CODE = ("I changed the retry loop:\n```python\ntry:\n    out = model(batch)\nexcept RuntimeError as e:\n"
             "    if \"CUDA out of memory\" in str(e):\n        torch.cuda.empty_cache()\n```\nTraining now runs to the end.\n")


def test_a_python_fence_quoting_an_error_message_is_code(tmp_path):
    assert not _failed(_found(tmp_path, _OOM_CODE))


def test_the_same_words_in_an_untagged_fence_are_output(tmp_path):
    found = _found(tmp_path, "```\nepoch 1 step 10 loss 2.3\n"
                   "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n```\n")
    assert found[0].id == "LOG005"


def test_a_traceback_pasted_in_a_python_fence_stays_a_failure(tmp_path):
    found = _found(tmp_path, "```python\nTraceback (most recent call last):\n  File \"train.py\", line 12, in <module>\n"
                   "    dist.all_reduce(t)\nRuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/"
                   "ProcessGroupNCCL.cpp:1269, unhandled system error, NCCL version 2.14.3\n```\n")
    assert found[0].id == "LOG009"


def test_code_then_its_output_in_one_bash_fence_keeps_the_output(tmp_path):
    found = _found(tmp_path, "```bash\nexport NCCL_DEBUG=INFO\ntorchrun --nproc_per_node 2 train.py\n"
                   "[rank1]: RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n```\n")
    assert found[0].id == "LOG005"


def test_a_diff_hunk_is_code(tmp_path):
    found = _found(tmp_path, "diff --git a/train.py b/train.py\n--- a/train.py\n+++ b/train.py\n"
                   "@@ -10,3 +10,4 @@ def main():\n     dist.init_process_group(\"nccl\")\n"
                   "-    timeout = timedelta(seconds=60)\n"
                   "+    # NCCL watchdog timeout: collective operation timed out after 60000 ms\n"
                   "+    timeout = timedelta(minutes=30)\n")
    assert not _failed(found)


def test_a_line_after_the_hunk_is_no_longer_code(tmp_path):
    found = _found(tmp_path, "@@ -1 +1 @@\n-a = 1\n+a = 2\n"
                   "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    assert found[0].id == "LOG005"


def test_a_pasted_job_script_is_code(tmp_path):
    found = _found(tmp_path, "#!/bin/bash\n#SBATCH --nodes=2\nexport NCCL_ASYNC_ERROR_HANDLING=1\n"
                   "trap 'echo \"Segmentation fault handler\"; exit 1' ERR\n"
                   "srun torchrun --nnodes 2 train.py || { echo \"torchrun failed\"; exit 1; }\n")
    assert not [f for f in found if f.severity == "error"]


def test_what_follows_a_script_keeps_its_failure(tmp_path):
    found = _found(tmp_path, "#!/bin/bash\nsrun python train.py\n\nKilled\n")
    assert found[0].id == "LOG002"


def test_a_yaml_fence_is_code(tmp_path):
    found = _found(tmp_path, "```yaml\ncompute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\n"
                   "on_error: \"RuntimeError: NCCL error\"\n```\n")
    assert not _failed(found)


def test_fences_close_by_commonmark_rules():
    b = SourceBlocks()
    seen = [b.code(0, t) for t in ["````python", "x = 1", "```", "y = 2", "````", "raise SystemExit(1)"]]
    # a shorter fence does not close a longer one (so "```" and "y = 2" are code); the closing fence ends the block
    assert seen == [True, True, True, True, True, False]
    b = SourceBlocks()
    seen = [b.code(0, t) for t in ["~~~text", "x = 1", "```", "~~~"]]
    assert seen == [True, False, False, True]   # a text block holds output; backticks do not close tildes


def test_prose_naming_an_exception_in_a_code_span_is_no_failure_line(tmp_path):
    # a Markdown code span holding a bare name is a reference to a class, not a message (b120_22's class)
    found = _found(tmp_path, "### Describe the bug\n\nWrapping the model with `DistributedDataParallel` and calling "
                   "`torch.compile` on it raises `AttributeError` when the `nn.Linear` module is called.\n")
    assert not _failed(found)


def test_a_code_span_holding_the_message_stays_a_failure(tmp_path):
    found = _found(tmp_path, "Training stops with `RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB`\n")
    assert found[0].id == "LOG005"


_HYDRA = ("===================================================================================\n"
          "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n=   PID 9665 RUNNING AT node7\n=   EXIT CODE: 9\n"
          "=   CLEANING UP REMAINING PROCESSES\n=   YOU CAN IGNORE THE BELOW CLEANUP MESSAGES\n"
          "===================================================================================\n"
          "YOUR APPLICATION TERMINATED WITH THE EXIT STRING: {s}\n")


def test_mpich_hydra_exit_string_names_the_signal(tmp_path):
    # MPICH's Hydra reports a death by signal in its exit string (b121_06's class)
    assert _found(tmp_path, _HYDRA.format(s="Killed (signal 9)"), "a.log")[0].id == "LOG002"
    assert _found(tmp_path, _HYDRA.format(s="Segmentation fault (signal 11)"), "b.log")[0].id == "LOG003"


def test_an_exit_string_without_a_signal_is_no_signal_death(tmp_path):
    found = _found(tmp_path, _HYDRA.format(s="Terminated by user request"))
    assert not [f for f in found if f.id in ("LOG002", "LOG003")]


def test_what_a_terminal_printed_in_a_bash_fence_stays_a_failure(tmp_path):
    # a "```bash" block is often a terminal's output: it is code only while its lines are statements
    found = _found(tmp_path, "```bash\npython train.py --nproc 8\nSegmentation fault (core dumped)\n```\n")
    assert found[0].id == "LOG003"
