"""Round 22 (issue 24, triage26): classes from the sources, each with a trigger and a quiet case.

- A traceback is not training progress: a frame's source line ("raise TrainingFailed(f"step {step} failed") from e")
  and the exception line under the last frame ("TrainingFailed: step 1200 failed") of a chained traceback ("The above
  exception was the direct cause of the following exception") name a step, but the process did not go on after the
  inner cause (CPython Lib/traceback.py @v3.12.0: StackSummary.format prints each frame's source indented under its
  'File "x.py", line N, in f' header, optional carets under it, then format_exception_only's "Name: message" at
  column 0). The innermost known cause (CUDA OOM, NCCL, the store) is the failure, the wrapper folded under it.
- Hydra's compact report of an instantiated target's exception ("Error in call to target 'x':" then repr(e) on the next
  line, hydra/_internal/instantiate/_instantiate2.py @2c03d1b) is read as that exception, so the catalogue classes it.
- Refusals not mined before, catalogued by class (ddpdoctor/data/messages.json, each with repo, path, commit):
  DeepSpeed's pydantic config models ("<n> validation error(s) for DeepSpeed...Config", deepspeed/runtime/zero/config.py)
  refuse how DeepSpeed was configured (api_misuse, LOG027); vLLM's parallel sizes against the model (vllm/config.py
  verify_with_parallel_config) are two settings that disagree (config_mismatch, LOG024);
  TensorRT-LLM's "mpiSize == tp * pp" / GPUs per node (worldConfig.cpp) and Unsloth's multi-GPU refusal
  (unsloth/tokenizer_utils.py) are the launch (LOG023).
"""
import pytest

from triage_loud import brief as _ids, loud_findings as _found

_INNER_OOM = (
    "Traceback (most recent call last):\n"
    '  File "/home/u/lib/trainer.py", line 120, in step\n'
    "    loss = self.model(batch)\n"
    '  File "/opt/conda/lib/python3.10/site-packages/torch/nn/modules/module.py", line 1518, in _wrapped_call_impl\n'
    "    return self._call_impl(*args, **kwargs)\n"
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB"
    " of which 1.02 GiB is free.\n"
    "\n"
    "The above exception was the direct cause of the following exception:\n"
    "\n"
    "Traceback (most recent call last):\n"
    '  File "/home/u/run.py", line 30, in <module>\n'
    "    trainer.fit()\n"
    '  File "/home/u/lib/trainer.py", line 140, in fit\n'
    '    raise TrainingFailed(f"step {self.step} failed") from e\n'
)
_WRAPPER_END = {
    "py310": "lib.trainer.TrainingFailed: step 1200 failed\n",
    # Python 3.11+: carets under the frame's source, then the exception line
    "py311_carets": "    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\nlib.trainer.TrainingFailed: step 1200 failed\n",
    "message_is_a_loss": "RuntimeError: loss: 0.000 at step 1200, giving up\n",
}


@pytest.mark.parametrize("end", sorted(_WRAPPER_END))
def test_a_chained_traceback_naming_a_step_is_not_progress_after_its_cause(tmp_path, end):
    found = _found(tmp_path, _INNER_OOM + _WRAPPER_END[end])
    assert found and found[0].id == "LOG005" and found[0].severity == "error", _ids(found)
    assert "went_on_at" not in found[0].evidence, found[0].evidence


def test_quiet_progress_after_the_traceback_still_shows_the_process_went_on(tmp_path):
    # the same caught OOM, then the loop printing its next steps: the process survived it (a warning)
    text = (_INNER_OOM + _WRAPPER_END["py310"] + "step 1201 loss 2.31\nstep 1202 loss 2.29\n")
    found = _found(tmp_path, text)
    oom = [f for f in found if f.id == "LOG005"]
    assert oom and oom[0].severity == "warning", _ids(found)


# --- refusals of the serving/fine-tuning stacks and of DeepSpeed's pydantic config, by class ------------------------
from ddpdoctor.facts import messages  # noqa: E402


@pytest.mark.parametrize("line,cls,repo", [
    ("pydantic_core._pydantic_core.ValidationError: 1 validation error for DeepSpeedZeroConfig", "api_misuse",
     "deepspeedai/DeepSpeed"),
    ("ValueError: Total number of attention heads (40) must be divisible by tensor parallel size (3).",
     "config_mismatch", "vllm-project/vllm"),
    ("ValueError: Total number of hidden layers (30) must be divisible by pipeline parallel size (4).",
     "config_mismatch", "vllm-project/vllm"),
    ("[TensorRT-LLM][ERROR] Assertion failed: mpiSize == tp * pp (/x/worldConfig.cpp:99)", "launch_misconfigured",
     "NVIDIA/TensorRT-LLM"),
    ("RuntimeError: Unsloth currently does not support multi GPU setups - but we are working on it!",
     "launch_misconfigured", "unslothai/unsloth"),
])
def test_refusals_of_the_stacks_are_catalogued_by_class(line, cls, repo):
    best = messages.match(line)
    assert best is not None and best.cls == cls, (line, best and best.entry["id"])
    assert best.entry["source"]["repo"] == repo and len(best.entry["source"]["commit"]) == 40


@pytest.mark.parametrize("line", [
    # pydantic's header for a model that is not DeepSpeed's config: not a DeepSpeed config refusal
    "pydantic_core._pydantic_core.ValidationError: 1 validation error for ChatCompletionRequest",
    # the same words in prose, not the refusal
    "note: tensor parallel size should divide the number of attention heads",
])
def test_quiet_lines_near_the_refusals_are_not_them(line):
    best = messages.match(line)
    assert best is None or not best.entry["id"].startswith(
        ("deepspeed.config.pydantic", "vllm.config.", "tensorrt_llm.", "unsloth.")), best.entry["id"]


def test_a_refusal_in_a_log_is_reported_as_its_class_not_a_bare_exception(tmp_path):
    text = ("Traceback (most recent call last):\n"
            '  File "/home/u/serve.py", line 10, in <module>\n'
            "    llm = LLM(model=path, tensor_parallel_size=3)\n"
            "ValueError: Total number of attention heads (32) must be divisible by tensor parallel size (3).\n")
    found = _found(tmp_path, text)
    assert found and found[0].id == "LOG024", _ids(found)


# --- Hydra's compact report: "Error in call to target 'x':" and the cause's repr below it ----------------------------
_HYDRA = ("Error executing job with overrides: ['experiment=llama_8gpu']\n"
          "Error in call to target 'lightning.pytorch.trainer.trainer.Trainer':\n"
          "{cause}\n"
          "full_key: trainer\n"
          "\n"
          "Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.\n")


@pytest.mark.parametrize("cause,rule", [
    # the catalogue's class of the cause, its message unescaped ('\n' inside the repr)
    ("MisconfigurationException('You requested gpu: [0, 1, 2, 3, 4, 5, 6, 7]\\n But your machine only has: [0, 1]')",
     "LOG024"),
    ('OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB")',
     "LOG005"),
    # a cause no entry knows: the exception's own class, not "unexplained"
    ("KeyError('input_ids')", "LOG004"),
])
def test_hydra_instantiate_cause_is_read_as_its_exception(tmp_path, cause, rule):
    found = _found(tmp_path, _HYDRA.format(cause=cause))
    assert found and found[0].id == rule and found[0].severity == "error", _ids(found)


def test_quiet_a_repr_line_not_under_hydras_header_is_no_exception(tmp_path):
    # the same repr printed by a program's own log (a dict of counters), not under Hydra's header: no failure
    text = ("epoch 1 step 10 loss 2.31\n" "KeyError('input_ids')\n" "epoch 1 step 20 loss 2.20\n")
    found = _found(tmp_path, text)
    assert not any(f.severity == "error" for f in found), _ids(found)



def test_a_cause_repr_carries_a_reader_keyword_past_the_head():
    # the reader hands on a line past its head only with a keyword: every "*Error(...)" / "*Exception(...)" repr has one
    for cause in ("KeyError('input_ids')", "MisconfigurationException('Trainer(devices=8) but this machine has 4')"):
        assert messages.has_anchor(cause), cause
