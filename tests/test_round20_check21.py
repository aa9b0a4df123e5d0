"""check21 (issue 26, round 20, second wave): classes left by check20, each with a trigger and a quiet fixture.
Pure: snapshots are built by the factory (or gathered from a fake /dev and /sys tree); no process is started."""
from __future__ import annotations

import os

import pytest

from factory import findings_of, make_snapshot

from ddpdoctor.gather import Sources

ROCM = {"torch": "2.5.1+rocm6.2", "torch_build": {"hip": "6.2.41133", "cuda": None}}
NO_NVML = {"unavailable": "NVML library not found", "reason": "library_not_found"}


def _hints(**kw):
    base = {"dev_nvidia0": False, "proc_driver_nvidia": False, "dev_kfd": True, "dev_kfd_rw": True,
            "dev_dri_render": True, "dev_dri_render_rw": True, "amdgpu_module": True}
    base.update(kw)
    return base


def _rocm_snap(host=None, amd=("gfx90a",), **hints):
    return make_snapshot(packages=ROCM, host=host or {}, gpus=dict(NO_NVML, hints=_hints(**hints)),
                         pci={"gpus": {}, "amd_gpus": [{"node": i + 1, "gfx_target_version": 90010, "gfx": g,
                                                        "device_id": 29704} for i, g in enumerate(amd)]})


# ------------------------------------------------ GPU038: a ROCm build that can open no AMD GPU (rocm_device_files)

def test_device_hints_read_the_rocm_device_files(tmp_path):
    from ddpdoctor.gather.gpus import device_hints

    (tmp_path / "dev" / "dri").mkdir(parents=True)
    (tmp_path / "dev" / "dri" / "card0").write_text("")
    got = device_hints(Sources(environ={}, root=str(tmp_path)))
    assert got["dev_kfd"] is False and got["dev_dri_render"] is False and got["amdgpu_module"] is False
    (tmp_path / "dev" / "kfd").write_text("")
    (tmp_path / "dev" / "dri" / "renderD128").write_text("")
    (tmp_path / "sys" / "module" / "amdgpu").mkdir(parents=True)
    got = device_hints(Sources(environ={}, root=str(tmp_path)))
    assert got["dev_kfd"] and got["dev_kfd_rw"] and got["dev_dri_render"] and got["dev_dri_render_rw"]
    assert got["amdgpu_module"] is True


@pytest.mark.skipif(os.geteuid() == 0, reason="root opens any file: the mode cannot deny it")
def test_device_hints_see_a_kfd_this_user_cannot_open(tmp_path):
    from ddpdoctor.gather.gpus import device_hints

    (tmp_path / "dev" / "dri").mkdir(parents=True)
    (tmp_path / "dev" / "kfd").write_text("")
    (tmp_path / "dev" / "kfd").chmod(0o440)
    got = device_hints(Sources(environ={}, root=str(tmp_path)))
    assert got["dev_kfd"] is True and got["dev_kfd_rw"] is False


def test_gpu038_container_without_the_device_options():
    """Trigger: the host's driver lists an MI250 in sysfs, the container has no /dev/kfd nor render node."""
    snap = _rocm_snap(host={"container": "docker"}, dev_kfd=False, dev_kfd_rw=False, dev_dri_render=False,
                      dev_dri_render_rw=False)
    [f] = findings_of(snap, "GPU038")
    assert f.severity == "warning" and "/dev/kfd" in f.title and "docker container" in f.title
    assert "--device=/dev/kfd --device=/dev/dri" in f.fix and "gfx90a" in f.detail
    assert "path:/dev/kfd" in f.subjects
    assert findings_of(snap, "GPU001") == []  # not "as expected with AMD GPUs"


def test_gpu038_kfd_not_openable_names_the_groups():
    snap = _rocm_snap(dev_kfd_rw=False)
    [f] = findings_of(snap, "GPU038")
    assert "cannot open /dev/kfd" in f.title and "usermod -aG render,video" in f.fix
    assert f.evidence["not_openable"] == ["/dev/kfd"]


def test_gpu038_no_driver_is_a_marked_guess():
    snap = _rocm_snap(amd=(), dev_kfd=False, dev_kfd_rw=False, dev_dri_render=False, dev_dri_render_rw=False,
                      amdgpu_module=False)
    [f] = findings_of(snap, "GPU038")
    assert "no amdgpu driver" in f.title and "a guess" in f.detail


def test_gpu038_quiet_when_the_devices_open_or_not_rocm_or_not_recorded():
    """Quiet: every device file there and openable (GPU001's ROCm note stays); a CUDA build; hints not recorded."""
    snap = _rocm_snap()
    assert findings_of(snap, "GPU038") == []
    assert [f.severity for f in findings_of(snap, "GPU001")] == ["info"]
    cuda = make_snapshot(packages={"torch": "2.5.1+cu124", "torch_build": {"cuda": "12.4", "hip": None}},
                         gpus=dict(NO_NVML, hints=_hints(dev_kfd=False, dev_dri_render=False)))
    assert findings_of(cuda, "GPU038") == []
    old = make_snapshot(packages=ROCM, gpus=dict(NO_NVML, hints={"dev_nvidia0": False, "proc_driver_nvidia": False}))
    assert findings_of(old, "GPU038") == []


# ------------------------------------------------ GPU002: consumer P2P graded by the job (gpu_versions consumer_p2p)

def _torchrun(n):
    return {"TORCHELASTIC_RUN_ID": "abc", "RANK": "0", "WORLD_SIZE": str(n), "LOCAL_RANK": "0",
            "LOCAL_WORLD_SIZE": str(n), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}


def _claims_p2p(driver):
    def edit(s):
        s["gpus"]["driver_version"] = driver
        for p in s["gpus"]["pairs"]:
            p["p2p"].update(read="OK", write="OK")
    return edit


def test_gpu002_rtx40_reporting_p2p_on_an_old_driver_is_graded_by_the_job():
    """Trigger: 4 ranks on 4 RTX 4090s whose driver 535 claims P2P (accelerate's check_cuda_p2p_ib_support rule)."""
    from factory import fixture_snapshot as fixture

    [f] = findings_of(fixture("rtx4090-4x-no-p2p", env=_torchrun(4), edit=_claims_p2p("535.104.05")), "GPU002")
    assert f.severity == "error" and "This host runs 4 ranks" in f.detail
    assert "huggingface/accelerate" in f.detail and "550.40.07" in f.fix
    [f] = findings_of(fixture("rtx4090-4x-no-p2p", edit=_claims_p2p("535.104.05")), "GPU002")
    assert f.severity == "warning" and "No launch recorded" in f.detail
    # quiet: the fixed driver (which reports P2P not supported on RTX 40), or P2P disabled by the job
    assert findings_of(fixture("rtx4090-4x-no-p2p", env=_torchrun(4), edit=_claims_p2p("550.54.14")), "GPU002") == []
    assert findings_of(fixture("rtx4090-4x-no-p2p", env=dict(_torchrun(4), NCCL_P2P_DISABLE="1"),
                               edit=_claims_p2p("535.104.05")), "GPU002") == []


def test_gpu002_p2p_not_supported_is_a_note_with_nccls_own_fallback_and_quiet_for_one_rank():
    """NVML says P2P not supported: NCCL disables P2P itself (paths.cc), so a note; nothing when one rank runs here."""
    from factory import fixture_snapshot as fixture

    [f] = findings_of(fixture("rtx4090-4x-no-p2p", env=_torchrun(4)), "GPU002")
    assert f.severity == "info" and "NVIDIA/nccl src/graph/paths.cc" in f.detail and f.evidence["local_ranks"] == 4
    assert findings_of(fixture("rtx4090-4x-no-p2p", env=_torchrun(1)), "GPU002") == []


def test_gpu002_reads_the_consumer_p2p_table():
    """A changed row changes the verdict: the table, not the code, holds the family and the fixed driver."""
    from ddpdoctor.facts import gpu_versions
    from factory import fixture_snapshot as fixture

    [row] = gpu_versions.consumer_p2p_defects()
    assert row["name_contains"] == "RTX 40" and row["driver_fixed"] == "550.40.07"
    snap = fixture("rtx4090-4x-no-p2p", env=_torchrun(4), edit=_claims_p2p("550.40.06"))
    assert [f.severity for f in findings_of(snap, "GPU002")] == ["error"]
    row["driver_fixed"] = "550.40.05"
    try:
        assert findings_of(snap, "GPU002") == []
    finally:
        row["driver_fixed"] = "550.40.07"


# ------------------------------------------ SET002: bf16 asked by the model's own config.json (precision_calls.json)

def _gpus(name, cc, n=2):
    return {"count": n, "devices": [{"index": i, "name": name, "uuid": f"GPU-{i}", "cuda_capability": list(cc)}
                                    for i in range(n)], "pairs": []}


def _ckpt(tmp_path, config):
    import json

    d = tmp_path / "ckpt"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(config))
    return d


def test_the_launch_records_a_local_models_config_dtype(tmp_path):
    """Gathered: `--model_name_or_path ./ckpt` resolved against the command's cwd, its config.json read bounded."""
    from ddpdoctor.facts.launch import parse_command
    from ddpdoctor.gather.launch import model_config_facts

    _ckpt(tmp_path, {"architectures": ["LlamaForCausalLM"], "torch_dtype": "bfloat16"})
    cmd = parse_command(["torchrun", "--nproc-per-node", "2", "train.py", "--model_name_or_path", "./ckpt",
                         "--output_dir", "out", "--hub_token", "hf_secret"])
    assert cmd["script_models"] == {"--model_name_or_path": "./ckpt"}
    [fact] = model_config_facts(Sources(environ={}), cmd["script_models"], str(tmp_path))
    assert fact["key"] == "torch_dtype" and fact["dtype"] == "bfloat16" and fact["config"].endswith("ckpt/config.json")
    # a Hub id (no such directory) is not read; transformers 5's `dtype` key is
    assert model_config_facts(Sources(environ={}), {"--model_name_or_path": "meta-llama/Llama-3.2-1B"},
                              str(tmp_path)) == []
    (tmp_path / "v5").mkdir()
    (tmp_path / "v5" / "config.json").write_text('{"dtype": "bfloat16"}')
    from ddpdoctor.facts.launch import script_model_dirs

    assert script_model_dirs(["--model", "v5", "--lr", "1e-4"]) == {}  # --model is not a model option of the table
    [fact] = model_config_facts(Sources(environ={}), {"--model_path": "v5"}, str(tmp_path))
    assert fact["key"] == "dtype"


def _with_config(tmp_path, config, gpus):
    from ddpdoctor.facts.launch import parse_command
    from ddpdoctor.gather.launch import model_config_facts

    _ckpt(tmp_path, config)
    cmd = dict(parse_command(["torchrun", "--nproc-per-node", "2", "train.py", "--model_name_or_path", "./ckpt"]),
               depth=1)
    cmd["model_configs"] = model_config_facts(Sources(environ={}), cmd["script_models"], str(tmp_path))
    return make_snapshot(gpus=gpus, launch={"commands": [cmd], "depth_read": 1})


def test_set002_bf16_config_on_gpus_without_bf16_is_a_marked_guess(tmp_path):
    """Trigger: the model's config.json says bfloat16, the GPUs are V100s (7.0)."""
    snap = _with_config(tmp_path, {"torch_dtype": "bfloat16"}, _gpus("Tesla V100-SXM2-32GB", (7, 0)))
    [f] = [f for f in findings_of(snap, "SET002") if "model's config" in f.title]
    assert f.severity == "warning" and "torch_dtype=bfloat16" in f.title and "a guess" in f.detail
    assert "17e3b6a9" in f.detail and "float16" in f.fix
    assert any(s.startswith("path:") and s.endswith("config.json") for s in f.subjects)


def test_set002_bf16_config_quiet_on_ampere_or_float32(tmp_path):
    """Quiet: the same config on A100s (8.0); a float32 config on V100s."""
    snap = _with_config(tmp_path, {"torch_dtype": "bfloat16"}, _gpus("NVIDIA A100-SXM4-80GB", (8, 0)))
    assert [f for f in findings_of(snap, "SET002") if "model's config" in f.title] == []
    other = tmp_path / "b"
    other.mkdir()
    snap = _with_config(other, {"torch_dtype": "float32"}, _gpus("Tesla V100-SXM2-32GB", (7, 0)))
    assert [f for f in findings_of(snap, "SET002") if "model's config" in f.title] == []


def test_check_given_command_records_the_models_config(tmp_path, monkeypatch):
    """`ddpdoctor check -- torchrun train.py --model_name_or_path ./ckpt`: the pipeline resolves it against the cwd."""
    from ddpdoctor.pipeline.check import add_given_command

    _ckpt(tmp_path, {"dtype": "bfloat16"})
    monkeypatch.chdir(tmp_path)
    snap = make_snapshot(gpus=_gpus("Tesla T4", (7, 5)))
    add_given_command(snap, ["torchrun", "--nproc-per-node", "2", "train.py", "--model_name_or_path", "./ckpt"])
    [cmd] = snap.sections["launch"]["commands"]
    assert cmd["model_configs"][0]["dtype"] == "bfloat16"
    [f] = [f for f in findings_of(snap, "SET002") if "model's config" in f.title]
    assert "Tesla T4 (7.5)" in f.title


# ----------------------------- GPU023: a driver below the build's CUDA within a major, with or without the PTX fact

def _a100_under(build_cuda, driver_cuda="12.2", driver="535.161.08", archs=None):
    from factory import fixture_snapshot as fixture

    def edit(s):
        s["packages"]["versions"]["torch"] = "2.7.1+cu" + build_cuda.replace(".", "")
        s["packages"]["torch_build"] = {"cuda": build_cuda, "hip": None, "git_version": "0" * 40}
        s["gpus"]["cuda_driver"], s["gpus"]["driver_version"] = driver_cuda, driver
        if archs is not None:
            s["packages"]["cuda_archs"] = [{"package": "torch", "file": "torch/lib/libtorch_cuda.so", "sass": archs,
                                            "ptx": [90]}]
    return fixture("dgx-a100-8x-nvswitch", keep=2, edit=edit)


def test_gpu023_without_the_ptx_fact_says_what_is_not_known_and_marks_the_guess():
    """Trigger: cu126 build, 12.2 driver, torch's compiled architectures not recorded: the note names the unknown and
    the wheel-table guess (gpu_versions release_archs) as a guess."""
    [f] = findings_of(_a100_under("12.6"), "GPU023")
    assert f.severity == "info" and "minor-version compatibility" in f.title
    assert "not known" in f.detail and "A guess from PyTorch's own CUDA 12.6 wheels" in f.detail
    assert "every visible GPU has a cubin there" in f.detail and f.evidence["torch_archs_recorded"] is False
    assert f.evidence["wheel_cubins_cover"] is True
    # no wheel list for the build either: said so, no guess made
    [f] = findings_of(_a100_under("12.4"), "GPU023")
    assert "No architecture list of PyTorch's CUDA 12.4 wheels" in f.detail and f.evidence["wheel_cubins_cover"] is None


def test_gpu023_with_the_ptx_fact_states_it_and_quiet_on_the_builds_driver():
    """Quiet of the guess: torch's cubins read (sm_80 among them) -> the fact, no guess; the build's own driver -> nothing."""
    [f] = findings_of(_a100_under("12.6", archs=[80, 86, 90]), "GPU023")
    assert "read from its .nv_fatbin" in f.detail and "A guess" not in f.detail
    assert findings_of(_a100_under("12.6", driver_cuda="12.8", driver="570.86.10"), "GPU023") == []


def test_a_config_file_naming_the_model_is_read_like_the_command(tmp_path, monkeypatch):
    """`check --config job.yaml` with `model_name_or_path: ./ckpt` (LLaMA-Factory style): the model's config.json."""
    from ddpdoctor.pipeline.check import add_config_facts

    _ckpt(tmp_path, {"torch_dtype": "bfloat16"})
    (tmp_path / "job.yaml").write_text("model_name_or_path: ./ckpt\nstage: sft\nlearning_rate: 1.0e-4\n")
    (tmp_path / "hub.yaml").write_text("model_name_or_path: meta-llama/Llama-3.2-1B\n")
    monkeypatch.chdir(tmp_path)
    snap = make_snapshot(gpus=_gpus("Tesla V100-SXM2-32GB", (7, 0)))
    add_config_facts(snap, [str(tmp_path / "job.yaml")])
    [f] = [f for f in findings_of(snap, "SET002") if "model's config" in f.title]
    assert f.severity == "warning" and "job.yaml model_name_or_path" in f.title and "a guess" in f.detail
    quiet = make_snapshot(gpus=_gpus("Tesla V100-SXM2-32GB", (7, 0)))
    add_config_facts(quiet, [str(tmp_path / "hub.yaml")])  # a Hub id: nothing read, nothing said
    assert [f for f in findings_of(quiet, "SET002") if "model's config" in f.title] == []


def test_the_new_facts_survive_a_snapshot_round_trip(tmp_path):
    """Record and replay: the gathered hints and model configs are declared fields of their sections, so a snapshot
    written with them loads (and a hand-edited wrong type is rejected)."""
    import json

    from ddpdoctor.pipeline.snapshot import Snapshot

    snap = _with_config(tmp_path, {"torch_dtype": "bfloat16"}, _gpus("Tesla V100-SXM2-32GB", (7, 0)))
    doc = json.loads(json.dumps(snap.to_dict()))
    doc["sections"]["gpus"] = dict(NO_NVML, hints=_hints(dev_kfd=False))
    again = Snapshot.from_dict(doc)
    assert again.sections["launch"]["commands"][0]["model_configs"][0]["dtype"] == "bfloat16"
    assert again.sections["gpus"]["hints"]["dev_kfd"] is False
    doc["sections"]["launch"]["commands"][0]["model_configs"][0]["dtype"] = 16
    with pytest.raises(Exception):
        Snapshot.from_dict(doc)


def test_gpu038_quiet_off_linux():
    """Quiet: a ROCm build on Windows (TheRock) has no /dev/kfd by design."""
    snap = _rocm_snap(host={"os": "Windows", "platform": "Windows-10"}, dev_kfd=False, dev_kfd_rw=False,
                      dev_dri_render=False, dev_dri_render_rw=False)
    assert findings_of(snap, "GPU038") == []
