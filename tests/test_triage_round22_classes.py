"""Round 22 (issue 24, triage25): classes from the sources, each with a trigger and a quiet case.

- accelerate's own refusals (state.py, accelerator.py, utils/launch.py, commands/launch.py, utils/dataclasses.py at
  16cb6eb) are catalogued by what they refuse: the DeepSpeed config against accelerate's kwargs and a tensor-parallel
  size against the model's are configuration (LOG024), devices are device set-up, the launcher's values are the launch
  (LOG023), mixed precision and sharding are a refused setting (LOG027).
- A configuration refusal printed alone (Hydra's "Could not override ...", OmegaConf's "Missing mandatory value: ...",
  Lightning's MisconfigurationException, ConfigurationError) is a failure of the config class, never "no failure";
  an entry marked "fallback" gives way to a specific one on the same line.
- absl-Python's glog lines ("E1207 12:00:02.123456 140 file.py:88] ...") in the middle of a large log are read, like
  C++ glog's ".cc:" lines; a glog-head keyword counts only on an E/F/W line, so an INFO-heavy log is not handed on
  line by line.
- An end line followed by a new phase the log stops in (the Trainer reloading its best model, a JIT extension build)
  cannot show health (LOG029).
The fixtures under fixtures/triage/rules (LOG023/LOG024/LOG027/LOG029 *accelerate*, *hydra*, *omegaconf*,
*configuration_error_alone*, LOG029_quiet_best_model_loaded_then_train_metrics) are the trigger and quiet files of
these classes; the end-then-cut trigger is the test below (a trigger fixture is padded with progress after it, and a
log that goes on training has left that phase).
"""
import pytest

from ddpdoctor.facts import messages
from ddpdoctor.triage import reader
from triage_loud import brief as _ids, loud_findings as _found


# --- accelerate's refusals, by class --------------------------------------------------------------------------------
@pytest.mark.parametrize("line,cls", [
    ("ValueError: Please correct the following DeepSpeed config values that mismatch kwargs  values:", "config_mismatch"),
    ("ValueError: tp_size in the plugin 4 should be same as model's tp size 2", "config_mismatch"),
    ("RuntimeError: There are currently no available devices found, must be one of 'XPU', 'CUDA', 'MLU', 'NPU', "
     "'MUSA', or 'HPU'.", "cuda_setup"),
    ("ValueError: bf16 mixed precision requires PyTorch >= 1.10 and a supported device.", "cuda_setup"),
    ("ValueError: Unknown mixed_precision mode: fp32. Choose between ['no', 'fp16', 'bf16', 'fp8'].", "api_misuse"),
    ("ValueError: Unknown dynamo backend: INDUCTR. Choose between ['NO', 'INDUCTOR'].", "launch_misconfigured"),
    ("ValueError: Could not find the transformer layer class LlamaDecoderLayer in the model.", "api_misuse"),
])
def test_accelerate_refusals_are_catalogued_by_what_they_refuse(line, cls):
    best = messages.match(line)
    assert best is not None and best.entry["source"]["repo"] == "huggingface/accelerate", line
    assert best.cls == cls, (line, best.entry["id"], best.cls)
    assert best.entry["source"]["commit"] == "16cb6eb80dd9aa8b4df1a63ef57863e455d53b83"


def test_an_accelerate_message_quoted_in_a_note_is_not_a_refusal():
    assert messages.match("note: set the values to 'auto' so that accelerate fills them in") is None


# --- configuration refusals printed alone ---------------------------------------------------------------------------
_CONFIG_ALONE = {
    "hydra": "Could not override 'trainer.gpu'.\nTo append to your config use +trainer.gpu=4\nKey 'gpu' is not in struct\n"
             "    full_key: trainer.gpu\n    object_type=dict\n",
    "omegaconf": "Missing mandatory value: data.train_path\n    full_key: data.train_path\n    object_type=dict\n",
    "omegaconf_typed": "omegaconf.errors.ConfigAttributeError: Key 'lr' is not in struct\n    full_key: optim.lr\n",
    "lightning": "lightning.fabric.utilities.exceptions.MisconfigurationException: No `training_step()` method defined.\n",
    "configuration_error": "ConfigurationError: 'Unknown distributed backend ncl'\n",
}


@pytest.mark.parametrize("name", sorted(_CONFIG_ALONE))
def test_a_configuration_refusal_alone_is_a_config_failure(tmp_path, name):
    text = "[2026-02-11 08:01:12,118][__main__][INFO] - world_size=8 backend=nccl\n" + _CONFIG_ALONE[name]
    f = _found(tmp_path, text)
    assert f and f[0].id == "LOG027" and f[0].severity == "error", _ids(f)


def test_a_specific_entry_wins_over_a_fallback_on_the_same_line():
    line = ("lightning_fabric.utilities.exceptions.MisconfigurationException: You requested gpu: [0, 1, 2, 3] But your "
            "machine only has: [0]")
    found = messages.match_all(line)
    assert [m.entry["id"] for m in found] == ["lightning.misconfiguration_exception"], [m.entry["id"] for m in found]
    assert any(e.get("fallback") for e in messages.entries() if e["id"] == "lightning.misconfiguration_exception.any")


def test_a_config_key_named_in_prose_then_training_is_no_failure(tmp_path):
    text = ("tip: 'Could not override' means the key is missing from the config; trainer.gpus is in conf/trainer.yaml\n"
            + "".join(f"epoch 0 step {i} loss 2.{i}\n" for i in range(1, 6)) + "Training completed.\n")
    f = _found(tmp_path, text)
    assert not any(x.severity == "error" or x.id in ("LOG027", "LOG028") for x in f), _ids(f)


# --- absl-Python glog lines mid-log; glog-head keywords only on E/F/W lines -----------------------------------------
def _absl(n, start=0, what="host input pipeline prefetched"):
    return "".join(f"I0110 10:{(start + i) // 60 % 60:02d}:{(start + i) % 60:02d}.{i:06d}   140 train.py:212] "
                   f"{what} {i % 17} batches of shard {start + i}, queue depth {i % 5}\n" for i in range(n))


def test_an_absl_python_e_line_mid_log_is_read(tmp_path):
    text = (_absl(3000) + "E0110 10:50:00.000000   140 coordinator.py:88] Connection to the coordination service at "
            "10.0.0.2:8476 failed; giving up after 30 attempts\n" + _absl(400, 3000, "shutting down, released"))
    assert len(text) > (64 << 10) + (16 << 10)
    f = _found(tmp_path, text)
    assert f and f[0].id == "LOG028" and "line:3001" in f[0].subjects, (_ids(f), f and f[0].subjects)


def test_an_absl_python_log_with_a_warning_mid_log_is_no_failure(tmp_path):
    text = (_absl(3000) + "W0110 10:50:00.000000   140 checkpoints.py:88] checkpoint step 3000 exists, overwriting\n"
            + _absl(400, 3000))
    f = _found(tmp_path, text)
    assert not any(x.severity == "error" or x.id == "LOG028" for x in f), _ids(f)


def test_glog_head_keywords_are_the_readers_and_stand_last():
    assert reader.GLOG_HEAD == messages.GLOG_HEAD
    assert messages.ANCHORS[-len(messages.GLOG_HEAD):] == messages.GLOG_HEAD


@pytest.mark.parametrize("hyperscan", [True, False])
def test_glog_info_lines_past_the_head_are_not_handed_on_error_lines_are(tmp_path, monkeypatch, hyperscan):
    if hyperscan:
        pytest.importorskip("hyperscan")
    else:
        monkeypatch.setenv("DDPDOCTOR_TRIAGE_NO_HYPERSCAN", "1")
    monkeypatch.setattr(reader, "_HS", None)
    lines = _absl(2000).replace("train.py:", "gpu_compiler.cc:", 1000).splitlines(keepends=True)
    lines[1500] = "E0110 10:50:00.000000   140 coordinator.py:88] Connection to 10.0.0.2:8476 failed\n"
    lines[1600] = "[W0110 10:50:01.000000   140 pjrt_client.cc:42] device 3 slow to respond\n"
    lines[1700] = "F0110 10:50:02.000000   140 tpu_driver.cc:42] Check that the device is present\n"
    p = tmp_path / "absl.log"
    p.write_text("".join(lines) + "x\n" * 20000)   # a tail of lines with no keyword, past the last 16 KiB
    got = []
    with open(p, "rb", buffering=0) as fh:
        reader.scan(fh, lambda n, off, raw: got.append(n), head_full=4096)
    past_head = [n for n in got if n > 100 and n <= 2000]
    assert past_head == [1501, 1601, 1701], past_head[:10]
    assert messages.has_anchor(lines[1500]) and not messages.has_anchor(lines[1499])


# --- an end line, then a new phase the log stops in -----------------------------------------------------------------
def test_an_end_then_a_jit_build_cut_cannot_show_health(tmp_path):
    text = ("{'loss': 1.2, 'epoch': 2.9}\nTraining completed. Do not forget to share your model on huggingface.co/models =)\n"
            "Loading best model from ./out/checkpoint-1000 (score: 0.91).\n"
            "Using /root/.cache/torch_extensions/py310_cu117 as PyTorch extensions root...\n"
            "Building extension module cpu_adam...\n")
    f = _found(tmp_path, text)
    assert f and f[0].id == "LOG029" and "after its end line" in f[0].title, _ids(f)


def test_an_end_then_the_build_that_finished_then_metrics_is_health(tmp_path):
    text = ("Training completed. Do not forget to share your model on huggingface.co/models =)\n"
            "Loading best model from ./out/checkpoint-1000 (score: 0.91).\nLoading extension module cpu_adam...\n"
            "{'train_runtime': 3600.1, 'train_samples_per_second': 10.0, 'train_loss': 1.4, 'epoch': 3.0}\n")
    assert _found(tmp_path, text) == [], _ids(_found(tmp_path, text))
