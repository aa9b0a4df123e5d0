"""Round-19 wave-2 classes of issue 24 (triage, 2026-12-07), each with a trigger and a quiet twin. Pure in-process.

- A title quoting c10's C++ backtrace frames ("# frame #4: <unknown function> + 0xdbbf4 (0x7eff in .../libstdc++.so.6)
  frame #5: ...", c10/util/Backtrace.cpp's format) is a backtrace cut above its message; a title naming a frame
  number without the frame's format is none.
- A debugger's exception widget copied as text (VS Code's exceptionWidget.ts: "Exception has occurred: {id}", then
  the description on the next line) reads as the line Python prints ("KeyError: 'RANK'"): the catalogue's class when
  it knows the message, a plain exception otherwise.
- torch 1.x's argument checks (aten/src/ATen/Utils.h, checked_dense_tensor_unwrap: "Expected object of backend CUDA
  but got backend CPU ...", "... device type cuda but got device type cpu ...", "... scalar type Float but got scalar
  type Double ...") are catalogued (LOG027), quoted in prose or printed; the same words as a question without the
  message's format are none.
- After the first read of 175: a program's first output line glued to a fence's opening marker ("```Traceback (most
  recent call last):") is output, while an info string that only names an error stays a fence; xformers' "No operator
  found for `memory_efficient_attention_*` with inputs:" (xformers/ops/fmha/dispatch.py) is catalogued (LOG027), a
  question about its operators is none.
"""
from __future__ import annotations

from triage_factory import failed as _failed, found as _found


_FRAMES_TITLE = ("# frame #4: <unknown function> + 0xdbbf4 (0x7eff47d5ebf4 in /opt/conda/bin/../lib/libstdc++.so.6) "
                 "frame #5: <unknown function> + 0x8609 (0x7eff493c1609 in /lib/x86_64-linux-gnu/libpthread.so.0)\n\n"
                 "user · description · 2024-04-08\ni trained the model, but i found this type of error, please help me.\n"
                 "$  bash train_gen.sh\n")


def test_a_title_quoting_cpp_backtrace_frames_is_a_failure(tmp_path):
    assert _failed(_found(tmp_path, _FRAMES_TITLE))


def test_a_title_naming_a_frame_number_is_none(tmp_path):
    text = ("# frame #3 is missing from the backtrace shown in the docs\n\nuser · description\n"
            "The docs example lists frames 1, 2 and 4; a question about the page.\n")
    assert not _failed(_found(tmp_path, text))


_DEBUGGER = ("When I run train_val.py the error occurs in dist_helper.py\nThe error is reported as follows.\n"
             "Exception has occurred: KeyError\n{key}\n\n"
             "During handling of the above exception, another exception occurred:\n\n")


def test_a_debuggers_exception_with_its_key_below_is_the_catalogued_keyerror(tmp_path):
    found = _found(tmp_path, _DEBUGGER.format(key="'RANK'"))
    assert [f.id for f in _failed(found)][:1] == ["LOG023"], [(f.id, f.title) for f in found]


def test_a_debuggers_exception_with_another_key_is_no_launch_error(tmp_path):
    # the same widget, a key no launcher sets: a failure (an exception), but not the missing-launcher class
    found = _failed(_found(tmp_path, _DEBUGGER.format(key="'image_size'")))
    assert found and all(f.id != "LOG023" for f in found), [(f.id, f.title) for f in found]


def test_torch_1x_backend_mismatch_quoted_in_prose_is_catalogued(tmp_path):
    text = ("# Training with 2 GPUs fails\n\nuser · description · 2020-01-01\n"
            "When I run with 2 GPUs I get \"Expected object of backend CUDA but got backend CPU for argument #2 'weight'\"\n")
    assert [f.id for f in _failed(_found(tmp_path, text))][:1] == ["LOG027"]


def test_torch_1x_scalar_type_mismatch_printed_is_catalogued(tmp_path):
    text = ("Traceback (most recent call last):\n  File \"train.py\", line 40, in <module>\n    loss = crit(out, y)\n"
            "RuntimeError: Expected object of scalar type Long but got scalar type Float for argument #2 'target' "
            "in call to _thnn_nll_loss_forward\n")
    assert [f.id for f in _failed(_found(tmp_path, text))][:1] == ["LOG027"]


def test_a_question_about_backends_without_the_message_is_none(tmp_path):
    text = ("# Which backend is expected for objects on CPU?\n\nuser · description · 2020-01-01\n"
            "Is an object of backend CPU expected to work with NCCL, or only gloo?\n")
    assert not _failed(_found(tmp_path, text))


# b175_05's shape (facebookresearch/habitat-challenge#26): the traceback's header glued to the fence's opening marker,
# the frames cut before the exception line
_GLUED_HEADER = ("user · comment · 2020-04-30\nnow I get the following error:\n"
                 "```Traceback (most recent call last):\n  File \"ppo_agent.py\", line 41, in <module>\n    main()\n"
                 "  File \"ppo_agent.py\", line 37, in main\n    challenge.submit(agent)\n"
                 "  File \"/habitat-api/habitat/core/benchmark.py\", line 137, in local_evaluate\n"
                 "    action = agent.act(observations)\n```\n")


def test_a_traceback_header_glued_to_a_fence_is_output(tmp_path):
    assert _failed(_found(tmp_path, _GLUED_HEADER))


def test_a_fence_whose_info_string_only_names_an_error_is_still_a_fence(tmp_path):
    # "RuntimeError handling example" is an info string naming an error, no message glued to the fence (as a line of
    # its own it would read as a failure: the fence is what makes it quiet)
    text = "# how to retry\n\n```RuntimeError handling example\nstep() is retried three times.\n```\n\nThat works.\n"
    assert not _failed(_found(tmp_path, text))


def test_xformers_no_operator_found_without_its_type_is_catalogued(tmp_path):
    # xformers/ops/fmha/dispatch.py _run_priority_list's message, its NotImplementedError type not pasted
    text = ("Training a controlnet, xformers=0.0.16 is installed\n```\n"
            "No operator found for `memory_efficient_attention_backward` with inputs: \n"
            "      query :       shape=(16, 1824, 1, 80) (torch.float32) \n"
            "`flshattB` is not supported because: dtype=torch.float32 (supported: {torch.bfloat16, torch.float16}) \n"
            "```\n")
    assert [f.id for f in _failed(_found(tmp_path, text))][:1] == ["LOG027"]


def test_a_question_about_xformers_operators_is_none(tmp_path):
    text = ("# Which operator does memory_efficient_attention pick on an A100?\n\nuser · description\n"
            "Is an operator found for fp32 inputs, or only for fp16 and bf16?\n")
    assert not _failed(_found(tmp_path, text))


def test_torch_0x_tensor_type_mismatch_is_catalogued(tmp_path):
    # aten/src/ATen/Utils.h checked_cast (torch 0.3/0.4): the type string names device and dtype
    text = ("Yes, I tested with `cuda_device=[1,2]` and is raised an error:\n\n"
            "> RuntimeError: Expected object of type torch.cuda.LongTensor but found type torch.LongTensor for "
            "argument #3 'index'\n2018-11-16 10:47:37,239 - INFO - allennlp.semparse - Stopped SEMPRE server\n")
    assert [f.id for f in _failed(_found(tmp_path, text))][:1] == ["LOG027"]


def test_a_type_name_in_prose_without_the_message_is_none(tmp_path):
    text = ("# Which object of type torch.cuda.LongTensor does index_select expect?\n\nuser · description\n"
            "Is an object of type torch.LongTensor found on the CPU first, or moved?\n")
    assert not _failed(_found(tmp_path, text))
