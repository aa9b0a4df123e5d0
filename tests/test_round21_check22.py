"""check22 (issue 26, round 21): classes left by check21, each with a trigger and a quiet fixture.
Pure where it can be: snapshots from the factory; the gatherers read real files made under tmp_path."""
from __future__ import annotations

import os

import pytest

from factory import findings_of, make_snapshot

# ------------------------------------------------------------------ `check -- ""`: one usage line, exit 2


@pytest.mark.parametrize("word", ["", "   "])
def test_check_with_an_empty_program_word_is_a_usage_error(word, capsys):
    """`check -- ""` used to judge an empty word as a program missing from PATH (ENV020, exit 1)."""
    from ddpdoctor.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["check", "--no-comm", "--", word, "train.py"])
    out, err = capsys.readouterr()
    assert exc.value.code == 2 and out == ""
    assert err.count("\n") == 1 and "empty word" in err


def test_check_with_a_program_after_dashes_is_no_usage_error(tmp_path, capsys):
    from ddpdoctor.cli import main

    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        with pytest.raises(SystemExit) as exc:
            main(["check", "--no-comm", "--only", "ENV020", "--", "no-such-program-xyz", "train.py"])
    finally:
        os.chdir(old)
    out, err = capsys.readouterr()
    assert exc.value.code == 1 and "ENV020" in out and "empty word" not in err


# ------------------------------------------------------------------ GPU038 only where NVML is absent

ROCM = {"torch": "2.5.1+rocm6.2", "torch_build": {"hip": "6.2.41133", "cuda": None}}


def _rocm(reason="library_not_found", pci_gpus=None, **hints):
    base = {"dev_nvidia0": False, "proc_driver_nvidia": False, "dev_kfd": False, "dev_kfd_rw": False,
            "dev_dri_render": False, "dev_dri_render_rw": False, "amdgpu_module": False}
    base.update(hints)
    return make_snapshot(packages=ROCM, gpus={"unavailable": "x", "reason": reason, "hints": base},
                         pci={"gpus": pci_gpus or {}, "amd_gpus": []})


@pytest.mark.parametrize("reason", ["library_not_found", "no_binding"])
def test_gpu038_when_nvml_is_absent(reason):
    [f] = findings_of(_rocm(reason), "GPU038")
    assert "/dev/kfd" in f.title or "amdgpu" in f.title


@pytest.mark.parametrize("reason,kw", [("driver_not_loaded", {}), ("version_mismatch", {}), ("init_failed", {}),
                                       ("no_permission", {}), ("library_not_found", {"dev_nvidia0": True}),
                                       ("library_not_found", {"proc_driver_nvidia": True})])
def test_gpu038_quiet_where_an_nvidia_driver_is_there(reason, kw):
    assert findings_of(_rocm(reason, **kw), "GPU038") == []


def test_gpu038_quiet_with_nvidia_gpus_on_the_bus():
    snap = _rocm(pci_gpus={"0000:3b:00.0": {"vendor": "0x10de", "device": "0x20b0"}})
    assert findings_of(snap, "GPU038") == []


# ------------------------------------------------------------------ ENV020: a program that is there but cannot run

def _given(tmp_path, argv, monkeypatch, path=None):
    from ddpdoctor.pipeline.check import add_given_command
    from ddpdoctor.pipeline.snapshot import Snapshot

    monkeypatch.chdir(tmp_path)
    if path is not None:
        monkeypatch.setenv("PATH", path)
    snap = Snapshot(sections={})
    add_given_command(snap, argv)
    return findings_of(make_snapshot(launch=snap.sections["launch"]), "ENV020")


def _script(p, text, mode=0o755):
    p.write_bytes(text.encode())
    p.chmod(mode)
    return p


def test_env020_moved_venv_torchrun_is_a_bad_interpreter(tmp_path, monkeypatch):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    _script(bindir / "torchrun", "#!/old/place/venv/bin/python\nimport sys\n")
    [f] = _given(tmp_path, ["torchrun", "--nproc-per-node", "2", "train.py"], monkeypatch,
                 path=f"{bindir}{os.pathsep}/usr/bin:/bin")
    assert "/old/place/venv/bin/python" in f.title and "not found on this machine's PATH" not in f.title
    assert "bad interpreter" in f.detail and "force-reinstall" in f.fix


def test_env020_env_shebang_names_a_program_not_on_path(tmp_path, monkeypatch):
    _script(tmp_path / "launch", "#!/usr/bin/env python-not-here-xyz\n")
    [f] = _given(tmp_path, ["./launch"], monkeypatch)
    assert "python-not-here-xyz" in f.title and "/usr/bin/env: 'python-not-here-xyz'" in f.detail


def test_env020_crlf_script_run_directly(tmp_path, monkeypatch):
    _script(tmp_path / "train.sh", "#!/bin/sh\r\necho hi\r\n")
    [f] = _given(tmp_path, ["./train.sh"], monkeypatch)
    assert "CRLF" in f.title and "^M: bad interpreter" in f.detail and "dos2unix" in f.fix


def test_env020_script_without_execute_permission(tmp_path, monkeypatch):
    _script(tmp_path / "train.sh", "#!/bin/sh\necho hi\n", mode=0o644)
    [f] = _given(tmp_path, ["./train.sh"], monkeypatch)
    assert "not executable" in f.title and "Permission denied" in f.detail and "chmod +x" in f.fix


def test_env020_directory_as_program(tmp_path, monkeypatch):
    (tmp_path / "venv").mkdir()
    [f] = _given(tmp_path, ["./venv", "train.py"], monkeypatch)
    assert "is a directory" in f.title and "Is a directory" in f.detail


def test_env020_quiet_for_scripts_that_run(tmp_path, monkeypatch):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    _script(bindir / "torchrun", "#!/bin/sh\nexit 0\n")
    assert _given(tmp_path, ["torchrun", "train.py"], monkeypatch, path=f"{bindir}{os.pathsep}/usr/bin:/bin") == []
    _script(tmp_path / "train.sh", "#!/usr/bin/env sh\necho hi\n")
    assert _given(tmp_path, ["./train.sh"], monkeypatch) == []


def test_env020_missing_program_keeps_its_path_wording(tmp_path, monkeypatch):
    [f] = _given(tmp_path, ["no-such-launcher-xyz", "train.py"], monkeypatch)
    assert "not found on this machine's PATH" in f.title


# ------------------------------------------------------------------ SLURM per-node task lists (data/slurm_env.json)

def test_the_per_node_grammar_from_slurms_sources():
    import json

    from ddpdoctor.facts.slurm import DATA, expand_per_node

    table = json.load(open(DATA))["tasks_per_node"]
    assert expand_per_node(table["example"]["value"]) == table["example"]["per_node"]
    assert expand_per_node("4") == [4] and expand_per_node("3(x2),2(x2)") == [3, 3, 2, 2]
    assert expand_per_node("2(x") is None and expand_per_node("") is None and expand_per_node("x") is None
    assert expand_per_node("1(x999999)") is None  # bounded


def test_tasks_on_this_node_is_this_nodes_entry():
    from ddpdoctor.facts.slurm import slurm_tasks_on_this_node

    env = {"SLURM_TASKS_PER_NODE": "2(x3),1"}
    assert slurm_tasks_on_this_node(dict(env, SLURM_NODEID="3")) == 1
    assert slurm_tasks_on_this_node(dict(env, SLURM_NODEID="0")) == 2
    assert slurm_tasks_on_this_node(env) is None  # not the first entry: this node's is unknown
    assert slurm_tasks_on_this_node({"SLURM_STEP_TASKS_PER_NODE": "4(x2)"}) == 4


def _srun(**kw):
    env = {"SLURM_JOB_ID": "77", "SLURM_STEP_ID": "0", "SLURM_PROCID": "6", "SLURM_LOCALID": "0", "SLURM_NODEID": "3",
           "SLURM_NTASKS": "7", "SLURM_JOB_NUM_NODES": "4", "SLURM_GPUS_ON_NODE": "2",
           "SLURM_STEP_TASKS_PER_NODE": "2(x3),1", "SLURM_TASKS_PER_NODE": "2(x3),1"}
    env.update(kw)
    return make_snapshot(env={k: v for k, v in env.items() if v is not None})


def test_env023_uneven_tasks_per_node():
    [f] = findings_of(_srun(), "ENV023")
    assert f.severity == "warning" and "1 to 2 tasks per node" in f.title
    assert "2, 2, 2, 1" in f.detail and "1 node(s) leave GPUs idle" in f.detail and "guess" in f.detail
    assert "--ntasks-per-node=2" in f.fix
    assert findings_of(_srun(), "ENV007") == []  # this node's 1 task vs 2 GPUs is ENV023's to say


def test_env023_quiet_when_every_node_runs_the_same_count():
    assert findings_of(_srun(SLURM_STEP_TASKS_PER_NODE="2(x4)", SLURM_TASKS_PER_NODE="2(x4)", SLURM_NTASKS="8"),
                       "ENV023") == []
    assert findings_of(_srun(SLURM_STEP_TASKS_PER_NODE=None, SLURM_TASKS_PER_NODE=None), "ENV023") == []


def test_env007_still_says_an_even_layout_that_does_not_match_the_gpus():
    snap = _srun(SLURM_STEP_TASKS_PER_NODE="4(x2)", SLURM_TASKS_PER_NODE="4(x2)", SLURM_NTASKS="8", SLURM_NODEID="1")
    [f] = findings_of(snap, "ENV007")
    assert "4 SLURM tasks per node but 2 GPUs" in f.title


# ------------------------------------------------------------------ NCCL defects judged on the NCCL torch really loads

def _torch270(**pk):
    base = {"versions": {"torch": "2.7.0", "nvidia-nccl-cu12": "2.21.5"}}
    base.update(pk)
    return make_snapshot(packages=base, env={})


def test_the_loaded_nccl_is_the_preloaded_one():
    from ddpdoctor.facts.net import nccl_loaded

    snap = _torch270(nccl_preloaded=[{"path": "/opt/nccl/lib/libnccl.so.2", "real_name": "libnccl.so.2.26.2",
                                      "version": "2.26.2"}])
    assert nccl_loaded(snap) == ((2, 26, 2), "LD_PRELOAD /opt/nccl/lib/libnccl.so.2")
    [f] = findings_of(snap, "PKG010")
    assert "2.26.2" in f.title and "LD_PRELOAD" in f.detail


def test_the_wheel_stands_when_nothing_else_loads_first():
    from ddpdoctor.facts.net import nccl_loaded

    snap = _torch270(torch_nccl={"needed": "libnccl.so.2", "path": "/site/nvidia/nccl/lib/libnccl.so.2",
                                 "from": "RPATH", "search": "RPATH"})
    assert nccl_loaded(snap)[0] == (2, 21, 5)
    assert findings_of(snap, "PKG010") == []  # 2.21.5 is outside the 2.26 defect


def test_a_statically_linked_nccl_is_not_the_wheels():
    from ddpdoctor.facts.net import nccl_loaded

    snap = _torch270(torch_nccl={"needed": None})
    assert nccl_loaded(snap) == (None, "")
    snap = _torch270(torch_nccl={"needed": "libnccl.so.2", "path": "/usr/lib/x86_64-linux-gnu/libnccl.so.2",
                                 "real_name": "libnccl.so.2.26.2", "version": "2.26.2", "from": "system"})
    assert nccl_loaded(snap)[0] == (2, 26, 2)


# ------------------------------------------------------------------ ENV024: an inference server's parallel sizes

def _serve(tmp_path, monkeypatch, argv, heads=32, keep=None):
    from factory import fixture_snapshot

    from ddpdoctor.pipeline.check import add_given_command
    from ddpdoctor.pipeline.snapshot import Snapshot

    monkeypatch.chdir(tmp_path)
    (tmp_path / "qwen").mkdir(exist_ok=True)
    (tmp_path / "qwen" / "config.json").write_text(
        '{"architectures": ["Qwen3ForCausalLM"], "num_attention_heads": %d, "torch_dtype": "bfloat16"}' % heads)
    given = Snapshot(sections={})
    add_given_command(given, argv)
    snap = fixture_snapshot("hgx-h100-8x", keep=keep, edit=lambda s: s.update(launch=given.sections["launch"]))
    return findings_of(snap, "ENV024")


def test_serving_commands_are_parsed_from_the_engines_options():
    from ddpdoctor.facts.launch import serving_command

    assert serving_command(["vllm", "serve", "./m", "-tp", "3"])["tensor_parallel"] == 3
    got = serving_command(["python3", "-m", "vllm.entrypoints.openai.api_server", "--model=./m",
                           "--tensor-parallel-size", "8", "-pp", "2"])
    assert (got["model"], got["tensor_parallel"], got["pipeline_parallel"]) == ("./m", 8, 2)
    got = serving_command(["python", "-m", "sglang.launch_server", "--model-path", "/x", "--tp-size", "2"])
    assert (got["engine"], got["model"], got["tensor_parallel"]) == ("sglang", "/x", 2)
    assert serving_command(["python", "train.py", "--tp", "2"]) is None


def test_env024_tensor_parallel_not_dividing_the_heads(tmp_path, monkeypatch):
    [f] = _serve(tmp_path, monkeypatch, ["vllm", "serve", "./qwen", "--tensor-parallel-size", "3"])
    assert f.severity == "error" and "32 attention heads" in f.title
    assert "must be divisible by tensor parallel size (3)" in f.detail and "--tensor-parallel-size 2" in f.fix


def test_env024_multimodal_text_config_heads(tmp_path, monkeypatch):
    (tmp_path / "vl").mkdir()
    (tmp_path / "vl" / "config.json").write_text('{"text_config": {"num_attention_heads": 28}, "vision_config": '
                                                 '{"num_attention_heads": 16}}')
    [f] = _serve(tmp_path, monkeypatch, ["vllm", "serve", "./vl", "-tp", "8"])
    assert "28 attention heads" in f.title


def test_env024_more_workers_than_gpus(tmp_path, monkeypatch):
    [f] = _serve(tmp_path, monkeypatch, ["vllm", "serve", "./qwen", "-tp", "4", "-pp", "2"], keep=4)
    assert "8 GPU worker(s)" in f.title and "sees 4 GPU(s)" in f.title


def test_env024_quiet_for_a_size_that_fits(tmp_path, monkeypatch):
    assert _serve(tmp_path, monkeypatch, ["vllm", "serve", "./qwen", "-tp", "4"], keep=4) == []
    assert _serve(tmp_path, monkeypatch, ["vllm", "serve", "./qwen", "-tp", "8"]) == []
    assert _serve(tmp_path, monkeypatch, ["python", "train.py", "--model_name_or_path", "./qwen"]) == []


# ------------------------------------------------------------------ SET002: a served model's bf16 config below 8.0

def _served_on_v100(tmp_path, monkeypatch, argv):
    from factory import fixture_snapshot

    from ddpdoctor.pipeline.check import add_given_command
    from ddpdoctor.pipeline.snapshot import Snapshot

    monkeypatch.chdir(tmp_path)
    (tmp_path / "qwen").mkdir(exist_ok=True)
    (tmp_path / "qwen" / "config.json").write_text('{"num_attention_heads": 32, "torch_dtype": "bfloat16"}')
    given = Snapshot(sections={})
    add_given_command(given, argv)

    def edit(s):
        s["launch"] = given.sections["launch"]
        for d in s["gpus"]["devices"]:
            d["cuda_capability"], d["name"] = [7, 0], "Tesla V100-SXM2-32GB"

    return findings_of(fixture_snapshot("hgx-h100-8x", edit=edit), "SET002")


def test_set002_vllm_auto_dtype_with_a_bf16_config_on_v100(tmp_path, monkeypatch):
    [f] = _served_on_v100(tmp_path, monkeypatch, ["vllm", "serve", "./qwen", "-tp", "2"])
    assert "the model vllm serves asks for bf16" in f.title
    assert "Bfloat16 is only supported" in f.detail and "--dtype half" in f.fix


def test_set002_quiet_when_the_server_is_given_a_dtype(tmp_path, monkeypatch):
    assert _served_on_v100(tmp_path, monkeypatch, ["vllm", "serve", "./qwen", "--dtype", "half"]) == []
    assert _served_on_v100(tmp_path, monkeypatch, ["vllm", "serve", "./qwen", "--dtype=float16"]) == []


# ------------------------------------------------------------------ a Hub id's config.json from the local HF cache

def _hub_cache(tmp_path, repo_id="org/Model-8B", heads=32):
    folder = tmp_path / "hub" / ("models--" + repo_id.replace("/", "--"))
    commit = "0123456789abcdef0123456789abcdef01234567"
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "main").write_text(commit)
    (folder / "snapshots" / commit).mkdir(parents=True)
    (folder / "snapshots" / commit / "config.json").write_text('{"num_attention_heads": %d}' % heads)
    return str(tmp_path / "hub")


def test_env024_reads_a_hub_ids_config_from_the_local_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", _hub_cache(tmp_path))
    [f] = _serve(tmp_path, monkeypatch, ["vllm", "serve", "org/Model-8B", "-tp", "3"])
    assert "32 attention heads" in f.title and "snapshots/0123456789ab" in f.detail


def test_hf_home_default_layout(tmp_path, monkeypatch):
    from ddpdoctor.gather import Sources
    from ddpdoctor.gather.launch import _hub_cached_config

    _hub_cache(tmp_path / "hf")
    got = _hub_cached_config(Sources(environ={"HF_HOME": str(tmp_path / "hf")}), "org/Model-8B")
    assert got and got.endswith("config.json")
    assert _hub_cached_config(Sources(environ={"HF_HOME": str(tmp_path / "hf")}), "org/Other") is None
    assert _hub_cached_config(Sources(environ={"HF_HOME": str(tmp_path / "hf")}), "../etc") is None


def test_env024_quiet_for_a_hub_id_never_downloaded(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    assert _serve(tmp_path, monkeypatch, ["vllm", "serve", "org/Model-8B", "-tp", "3"]) == []


def test_env024_quiet_across_nodes(tmp_path, monkeypatch):
    argv = ["vllm", "serve", "./qwen", "-tp", "8", "-pp", "2", "--distributed-executor-backend", "ray"]
    assert _serve(tmp_path, monkeypatch, argv) == []
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    from factory import fixture_snapshot

    from ddpdoctor.pipeline.check import add_given_command
    from ddpdoctor.pipeline.snapshot import Snapshot

    given = Snapshot(sections={})
    add_given_command(given, ["vllm", "serve", "./qwen", "-tp", "8", "-pp", "2"])
    snap = fixture_snapshot("hgx-h100-8x", env={"RAY_ADDRESS": "10.0.0.1:6379"},
                            edit=lambda s: s.update(launch=given.sections["launch"]))
    assert findings_of(snap, "ENV024") == []
    argv = ["python", "-m", "sglang.launch_server", "--model-path", "./qwen", "--tp-size", "16", "--nnodes", "2"]
    assert _serve(tmp_path, monkeypatch, argv) == []
    assert _serve(tmp_path, monkeypatch, argv[:-2])  # the same on one node: 16 workers, 8 GPUs
