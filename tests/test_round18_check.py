"""Round 18 (check18): the classes batches 85 and 86 missed at first read, each with a trigger and a quiet fixture.
The script facts are read from real source text (lint.scriptfacts), the checks judge snapshots built from them."""
from __future__ import annotations

import textwrap

from factory import findings_of, fixture_snapshot, make_snapshot

from ddpdoctor.lint.scriptfacts import script_facts
from bench_modules import load


def _facts(tmp_path, source: str, name: str = "train.py") -> dict:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return script_facts([str(path)])


def _with_script(facts: dict, **kw):
    return make_snapshot(lint={"scripts": ["train.py"], "files": [], "findings": [], "rules_run": 0, "facts": facts},
                         **kw)


TORCHRUN = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "x"}


# SET004: what the script switches on itself (WavTokenizer#17, BernoulliDiffusion#23, nerf-pytorch#42)

def test_script_settings_and_debug_calls_are_read_from_the_source(tmp_path):
    facts = _facts(tmp_path, """
        import os
        import torch
        os.environ["CUDA_LAUNCH_BLOCKING"] = "1"
        os.environ.setdefault("NCCL_DEBUG", "INFO")
        os.environ["CUDA_VISIBLE_DEVICES"] = "0"
        os.environ[name] = "1"
        torch.autograd.set_detect_anomaly(True)
        torch.autograd.set_detect_anomaly(flag)
        with torch.autograd.detect_anomaly():
            pass
        """)
    assert [(s["name"], s["value"], s["line"], s["how"]) for s in facts["setting_sets"]] == [
        ("CUDA_LAUNCH_BLOCKING", "1", 4, "assign"), ("NCCL_DEBUG", "INFO", 5, "setdefault")]
    assert sorted((c["call"], c["value"], c["line"]) for c in facts["debug_calls"]) == [
        ("torch.autograd.detect_anomaly", "True", 10), ("torch.autograd.set_detect_anomaly", "True", 8)]


def test_set004_fires_on_a_debug_setting_the_script_assigns(tmp_path):
    facts = _facts(tmp_path, 'import os\nos.environ["CUDA_LAUNCH_BLOCKING"] = "1"\n')
    [finding] = findings_of(_with_script(facts), "SET004")
    assert finding.severity == "warning" and "CUDA_LAUNCH_BLOCKING=1" in finding.title
    assert "line:2" in finding.subjects and "CUDA_LAUNCH_BLOCKING" in finding.subjects


def test_set004_fires_on_anomaly_detection_left_on(tmp_path):
    facts = _facts(tmp_path, "import torch\ntorch.autograd.set_detect_anomaly(True)\n")
    [finding] = findings_of(_with_script(facts), "SET004")
    assert finding.severity == "warning" and "set_detect_anomaly" in finding.title and "line:2" in finding.subjects


def test_set004_quiet_when_the_script_turns_nothing_costly_on(tmp_path):
    facts = _facts(tmp_path, """
        import os
        import torch
        os.environ["CUDA_LAUNCH_BLOCKING"] = "0"
        torch.autograd.set_detect_anomaly(False)
        os.environ.setdefault("CUDA_LAUNCH_BLOCKING", "1")
        """)
    # the setdefault yields to the environment's own value
    assert findings_of(_with_script(facts, env={"CUDA_LAUNCH_BLOCKING": "0"}), "SET004") == []


def test_set004_does_not_repeat_the_environment_finding(tmp_path):
    facts = _facts(tmp_path, 'import os\nos.environ["CUDA_LAUNCH_BLOCKING"] = "1"\n')
    found = findings_of(_with_script(facts, env={"CUDA_LAUNCH_BLOCKING": "1"}), "SET004")
    assert len(found) == 1 and found[0].title.startswith("CUDA_LAUNCH_BLOCKING=1")


# ENV001: a script that reads a launcher's variable without a default, started where no launcher runs
# (MC-DDPM#1, LOMO#31, pysot#39, DAT#31)

LAUNCHED_SCRIPT = """
    import os
    import torch.distributed as dist
    def setup():
        local_rank = int(os.environ["LOCAL_RANK"])
        if "WORLD_SIZE" in os.environ:
            world = int(os.environ["WORLD_SIZE"])
        try:
            master = os.environ["MASTER_ADDR"]
        except KeyError:
            master = "localhost"
        port = os.environ.get("MASTER_PORT", "29500")
        dist.init_process_group("nccl")
    """


def test_unguarded_launcher_reads_are_recorded_guarded_ones_are_not(tmp_path):
    facts = _facts(tmp_path, LAUNCHED_SCRIPT)
    assert [(r["name"], r["line"]) for r in facts["launcher_env_reads"]] == [("LOCAL_RANK", 5)]
    own = _facts(tmp_path, 'import os\nos.environ["RANK"] = "0"\nr = int(os.environ["RANK"])\n', "own.py")
    assert own["launcher_env_reads"] == []  # the script sets it itself


def test_env001_fires_when_the_script_needs_a_launcher_and_none_runs(tmp_path):
    [finding] = findings_of(_with_script(_facts(tmp_path, LAUNCHED_SCRIPT)), "ENV001")
    assert finding.severity == "warning" and "KeyError: 'LOCAL_RANK'" in finding.title
    assert "LOCAL_RANK" in finding.subjects and "line:5" in finding.subjects and finding.fix.startswith("torchrun")


def test_env001_quiet_under_a_launcher_or_with_the_variables_set(tmp_path):
    facts = _facts(tmp_path, LAUNCHED_SCRIPT)
    assert findings_of(_with_script(facts, env=TORCHRUN), "ENV001") == []
    under = _with_script(facts)
    under.sections["launch"] = {"commands": [{"launcher": "torchrun", "options": {"nproc_per_node": "2"},
                                              "program": "train.py", "depth": 1}], "depth_read": 1}
    assert findings_of(under, "ENV001") == []
    guarded = _facts(tmp_path, 'import os\nr = int(os.environ.get("LOCAL_RANK", 0))\n', "guarded.py")
    assert findings_of(_with_script(guarded), "ENV001") == []


# GPU036: an AMD target no PyTorch ROCm wheel has carried (pytorch/pytorch#91699, ROCm/hip#3282: gfx90c)

def _amd(gfx: str, **kw):
    snap = make_snapshot(gpus={"unavailable": "no NVIDIA driver library (libnvidia-ml.so.1)"},
                         packages={"torch": "2.0.1", "torch_build": {"cuda": None, "hip": "5.4.22804"}}, **kw)
    snap.sections.setdefault("pci", {})["amd_gpus"] = [{"node": 1, "gfx": gfx, "gfx_target_version": None}]
    return snap


def test_override_is_derived_from_the_wheel_targets():
    from ddpdoctor.facts import gpu_versions

    assert gpu_versions.gfx_parts("gfx90c") == (9, 0, 12) and gpu_versions.gfx_parts("gfx1032") == (10, 3, 2)
    assert (gpu_versions.override_for("gfx90c"), gpu_versions.override_for("gfx1032")) == ("9.0.0", "10.3.0")
    assert gpu_versions.override_for("gfx803") is None  # no gfx8 target in any wheel


def test_gpu036_fires_on_a_target_no_wheel_carries():
    [finding] = findings_of(_amd("gfx90c"), "GPU036")
    assert finding.severity == "warning" and "gfx90c" in finding.title
    assert "HSA_OVERRIDE_GFX_VERSION=9.0.0" in finding.fix


def test_gpu036_quiet_with_the_override_set_or_a_carried_target():
    assert findings_of(_amd("gfx90c", env={"HSA_OVERRIDE_GFX_VERSION": "9.0.0"}), "GPU036") == []
    assert findings_of(_amd("gfx90a"), "GPU036") == []


# PKG018: NVIDIA's apex installed without its extensions (NVIDIA/apex#499, NVIDIA-NeMo/Speech#842)

def test_apex_extensions_are_the_top_level_compiled_modules():
    from ddpdoctor.gather.packages import apex_extensions

    assert apex_extensions(["amp_C.cpython-310-x86_64-linux-gnu.so", "apex/__init__.py", "apex/contrib/x.so",
                            "fused_layer_norm_cuda.cpython-310-x86_64-linux-gnu.so"]) == ["amp_C", "fused_layer_norm_cuda"]


def test_apex_build_reads_a_dist_info_record(tmp_path, monkeypatch):
    from ddpdoctor.gather.packages import apex_build

    info = tmp_path / "apex-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: apex\nVersion: 0.1\n")
    (info / "RECORD").write_text("apex/__init__.py,,\napex/amp/__init__.py,,\napex-0.1.dist-info/METADATA,,\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert apex_build() == {"extensions": [], "from": "RECORD", "has_amp": True}


def test_pkg018_fires_when_apex_has_no_cuda_extensions():
    snap = make_snapshot(packages={"apex": "0.1", "apex_build": {"extensions": ["apex_C"], "from": "RECORD",
                                                                   "has_amp": True}})
    [finding] = findings_of(snap, "PKG018")
    assert finding.severity == "warning" and "amp_C" in finding.title and "--cuda_ext" in finding.fix


def test_pkg018_fires_on_pypis_unrelated_apex():
    snap = make_snapshot(packages={"apex": "0.9.10.dev0", "apex_build": {"extensions": [], "from": "RECORD",
                                                                           "has_amp": False}})
    [finding] = findings_of(snap, "PKG018")
    assert "not NVIDIA's apex" in finding.title


def test_pkg018_quiet_with_the_extensions_or_without_the_fact():
    built = {"extensions": ["amp_C", "apex_C", "fused_layer_norm_cuda", "syncbn"], "from": "RECORD", "has_amp": True}
    assert findings_of(make_snapshot(packages={"apex": "0.1", "apex_build": built}), "PKG018") == []
    assert findings_of(make_snapshot(packages={"apex": "0.1"}), "PKG018") == []  # not recorded: no verdict


# PKG014: a CUDA toolkit newer than the driver (BachiLi/diffvg#84: "the provided PTX was compiled with an
# unsupported toolchain" until the driver was upgraded)

def _toolkit(version: str, driver_cuda: str):
    return make_snapshot(packages={"torch": "1.8.1+cu111", "torch_build": {"cuda": "11.1", "hip": None},
                                   "cuda_toolkit": {"home": "/usr/local/cuda", "from": "/usr/local/cuda",
                                                    "version": version}},
                         gpus={"cuda_driver": driver_cuda, "driver_version": "470.256.02"})


def test_pkg014_fires_on_a_toolkit_newer_than_the_driver():
    found = [f for f in findings_of(_toolkit("12.1.105", "11.4"), "PKG014") if f.severity == "warning"]
    assert len(found) == 1 and "newer than the driver" in found[0].title and "11.4" in found[0].title


def test_pkg014_quiet_on_the_driver_side_with_an_older_toolkit():
    assert [f for f in findings_of(_toolkit("11.1.105", "11.4"), "PKG014") if "driver" in f.title] == []


# NET002: torchrun's c10d rendezvous endpoint whose host does not resolve (meta-pytorch/torchx#541)

def _rdzv(endpoint: dict, container=None):
    snap = make_snapshot(host={"container": container} if container else None)
    snap.sections["network"]["rdzv_endpoint"] = endpoint
    snap.sections["launch"] = {"commands": [{"launcher": "torchrun", "depth": 1, "program": "train.py",
                                             "options": {"rdzv_backend": "c10d", "rdzv_endpoint": endpoint["host"] + ":29400",
                                                         "nnodes": "2", "nproc_per_node": "8"}}], "depth_read": 1}
    return snap


def test_net002_fires_on_an_unresolvable_rendezvous_endpoint():
    found = [f for f in findings_of(_rdzv({"host": "trainer-0.trainer", "error": "[Errno -2] Name or service not known"},
                                          "kubernetes"), "NET002") if "rendezvous endpoint" in f.title]
    assert len(found) == 1 and found[0].severity == "error" and "getent hosts trainer-0.trainer" in found[0].fix


def test_net002_quiet_when_the_rendezvous_endpoint_resolves():
    snap = _rdzv({"host": "trainer-0.trainer", "addresses": ["10.0.0.7"]})
    assert [f for f in findings_of(snap, "NET002") if "rendezvous endpoint" in f.title] == []


# Batch 88's classes (check18): a script that picks its GPU by the global rank (meta-llama/llama-cookbook#90), two NICs
# in one subnet (NVIDIA/nccl#1581), a cuDNN in LD_LIBRARY_PATH before the one torch carries in torch/lib
# (bmaltais/kohya_ss#1096)

def test_global_rank_devices_follow_the_rank_through_one_binding(tmp_path):
    facts = _facts(tmp_path, """
        import os
        import torch
        import torch.distributed as dist

        def main():
            rank = int(os.environ["RANK"])
            local_rank = int(os.environ["LOCAL_RANK"])
            torch.cuda.set_device(rank)
            model.to(local_rank)

        class Trainer:
            def __init__(self):
                self.rank = dist.get_rank()
            def setup(self):
                torch.cuda.set_device(self.rank)
                DDP(model, device_ids=[dist.get_rank()])

        def worker(rank, world):
            torch.cuda.set_device(rank)

        def wrapped():
            r = dist.get_rank()
            r = r % torch.cuda.device_count()
            torch.cuda.set_device(r)
    """)
    got = [(p["line"], p["what"]) for p in facts["global_rank_devices"]]
    assert got == [(9, "torch.cuda.set_device(rank)"), (16, "torch.cuda.set_device(self.rank)"),
                   (17, "DDP(model, device_ids=[dist.get_rank()])")]


def _rank_pick(env):
    facts = {"global_rank_devices": [{"path": "train.py", "line": 9, "what": "torch.cuda.set_device(rank)",
                                      "rank": "int(os.environ['RANK'])"}]}
    lint = {"scripts": ["train.py"], "files": [], "findings": [], "rules_run": 0, "facts": facts}
    return fixture_snapshot("rtx4090-4x-no-p2p", env=env, keep=2, edit=lambda s: s.__setitem__("lint", lint))


def test_gpu016_fires_on_a_global_rank_device_on_the_second_node():
    env = {**TORCHRUN, "RANK": "2", "WORLD_SIZE": "4", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "1",
           "MASTER_ADDR": "10.0.0.1"}
    found = [f for f in findings_of(_rank_pick(env), "GPU016") if "global rank" in f.title]
    assert found and found[0].severity == "error" and "cuda:2" in found[0].title
    assert "LOCAL_RANK" in found[0].fix


def test_gpu016_quiet_on_a_global_rank_device_on_one_node():
    assert not [f for f in findings_of(_rank_pick(TORCHRUN), "GPU016") if "global rank" in f.title]


def test_net020_notes_an_overlap_no_variable_chooses_between():
    ifaces = [{"name": "eno1", "up": True, "addresses": [{"family": "ipv4", "address": "10.1.0.5", "netmask": "255.255.0.0"}]},
              {"name": "eno2", "up": True, "addresses": [{"family": "ipv4", "address": "10.1.7.5", "netmask": "255.255.255.0"}]}]
    env = {**TORCHRUN, "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2"}
    [finding] = findings_of(make_snapshot(env=env, network={"interfaces": ifaces}), "NET020")
    assert finding.severity == "info" and "10.1.0.0/16" in finding.title


def test_net020_quiet_without_recorded_netmasks_or_on_virtual_interfaces():
    env = {**TORCHRUN, "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2"}
    bare = [{"name": "eno1", "up": True, "addresses": [{"family": "ipv4", "address": "10.1.0.5"}]},
            {"name": "eno2", "up": True, "addresses": [{"family": "ipv4", "address": "10.1.0.6"}]}]
    assert not findings_of(make_snapshot(env=env, network={"interfaces": bare}), "NET020")
    bridged = [{"name": "eth0", "up": True, "addresses": [{"family": "ipv4", "address": "172.17.0.5", "netmask": "255.255.0.0"}]},
               {"name": "docker0", "up": True, "addresses": [{"family": "ipv4", "address": "172.17.0.1", "netmask": "255.255.0.0"}]}]
    assert not findings_of(make_snapshot(env=env, network={"interfaces": bridged}), "NET020")


def _bundled(torch_v: str, lib_version, **extra):
    return make_snapshot(packages={"torch": torch_v, "torch_build": {"cuda": "11.8", "hip": None},
                                   "ld_cuda_libs": [{"dir": "/usr/local/cuda/lib64", "name": "libcudnn.so.8",
                                                     "version": lib_version}], **extra})


def test_pkg016_fires_on_a_cudnn_torch_refuses_before_its_own():
    [finding] = findings_of(_bundled("2.0.1+cu118", "8.2.4"), "PKG016")
    assert finding.severity == "warning" and "8.7.0" in finding.title and "refuses" in finding.title


def test_pkg016_bundled_cudnn_quiet_or_note():
    assert not findings_of(_bundled("2.0.1+cu118", "8.9.7"), "PKG016")  # a newer minor: torch accepts it
    assert not findings_of(_bundled("2.0.1", "8.2.4"), "PKG016")  # not a download.pytorch.org +cu wheel
    [note] = findings_of(_bundled("1.13.1+cu117", "8.2.4"), "PKG016")  # its own cuDNN not known here
    assert note.severity == "info"


# Batch 89's class (check18): a host compiler older than torch's headers accept, while DeepSpeed's ops compile at run
# time (deepspeedai/DeepSpeed#7143, #5429: "We need GCC 9 or later"; #1435: g++ 4.8.5 under torch 1.x)

def test_host_compiler_is_read_from_gccs_layout_without_running_it(tmp_path):
    from ddpdoctor.gather import Sources
    from ddpdoctor.gather.packages import host_compiler
    (tmp_path / "usr/bin").mkdir(parents=True)
    (tmp_path / "usr/libexec/gcc/x86_64-redhat-linux/4.8.5").mkdir(parents=True)
    (tmp_path / "usr/libexec/gcc/x86_64-redhat-linux/4.8.5/cc1plus").write_text("")
    gxx = tmp_path / "usr/bin/g++"
    gxx.write_text("")
    gxx.chmod(0o755)
    (tmp_path / "usr/bin/c++").symlink_to("g++")
    got = host_compiler(Sources(environ={"PATH": "/usr/bin"}, root=str(tmp_path)))
    assert got["kind"] == "gcc" and got["version"] == "4.8.5" and got["cmd"] == "c++"
    (tmp_path / "usr/libexec/gcc/x86_64-redhat-linux/11").mkdir()
    (tmp_path / "usr/libexec/gcc/x86_64-redhat-linux/11/cc1plus").write_text("")
    assert host_compiler(Sources(environ={"PATH": "/usr/bin"}, root=str(tmp_path))) is None  # two g++: ambiguous
    assert host_compiler(Sources(environ={"PATH": "/nowhere"}, root=str(tmp_path))) is None


def _compiling(torch_v: str, gcc: str, **extra):
    return make_snapshot(packages={"torch": torch_v, "deepspeed": "0.14.0", "torch_build": {"cuda": "12.1", "hip": None},
                                   "host_compiler": {"cmd": "c++", "kind": "gcc", "version": gcc}, **extra})


def test_pkg014_fires_on_a_compiler_older_than_torchs_headers_need():
    found = [f for f in findings_of(_compiling("2.2.2+cu121", "8.5.0"), "PKG014") if "host compiler" in f.title]
    assert found and found[0].severity == "warning" and "GCC 9" in found[0].title
    old = [f for f in findings_of(_compiling("1.9.1+cu111", "4.8.5"), "PKG014") if "host compiler" in f.title]
    assert old and "GCC 5" in old[0].title


def test_pkg014_host_compiler_quiet():
    def said(snap):
        return [f for f in findings_of(snap, "PKG014") if "host compiler" in f.title]
    assert not said(_compiling("2.2.2+cu121", "9.4.0"))  # new enough
    assert not said(_compiling("2.2.1+cu121", "8.5.0"))  # before the GCC 9 check reached a release
    assert not said(_compiling("1.6.0", "4.8.5"))  # a release the table does not judge
    assert not said(_compiling("2.2.2+cu121", "8.5.0", deepspeed_build={"installed_ops": ["fused_adam"]}))  # nothing compiles


# PKG019: NumPy 2 under a torch built against NumPy 1.x (Cambridge-ICCS/practical-ml-with-pytorch#70,
# xai4space/meteors#20: "A module that was compiled using NumPy 1.x cannot be run in NumPy 2.0.0")

def test_pkg019_fires_on_numpy2_under_torch_before_2_3():
    snap = make_snapshot(packages={"torch": "2.2.2", "numpy": "2.0.0"}, host={"os": "Darwin"})
    [finding] = findings_of(snap, "PKG019")
    assert finding.severity == "warning" and "NumPy 1.x" in finding.title and 'numpy<2' in finding.fix
    assert "pytorch/builder#1770" in finding.detail


def test_pkg019_windows_2_4_0_was_built_against_numpy1_again():
    snap = make_snapshot(packages={"torch": "2.4.0+cpu", "numpy": "2.0.1"}, host={"os": "Windows"})
    [finding] = findings_of(snap, "PKG019")
    assert "pytorch/pytorch#131668" in finding.detail and "torch>=2.4.1" in finding.fix
    # the same release on Linux was built against NumPy 2; 2.3.x on Windows is not judged
    assert findings_of(make_snapshot(packages={"torch": "2.4.0", "numpy": "2.0.1"}, host={"os": "Linux"}), "PKG019") == []
    assert findings_of(make_snapshot(packages={"torch": "2.3.1", "numpy": "2.0.1"}, host={"os": "Windows"}), "PKG019") == []


def test_pkg019_quiet_with_numpy1_a_newer_torch_or_no_numpy():
    assert findings_of(make_snapshot(packages={"torch": "2.2.2", "numpy": "1.26.4"}), "PKG019") == []
    assert findings_of(make_snapshot(packages={"torch": "2.3.0", "numpy": "2.0.0"}), "PKG019") == []
    assert findings_of(make_snapshot(packages={"torch": "1.13.1", "numpy": None}), "PKG019") == []


def test_corpus_case_setting_torch_drops_the_bases_numpy():

    mod = load("check_corpus", "check_corpus_r18")
    base = mod.base_snapshot("cpu-only")["sections"]["packages"]["versions"]
    old = mod.snapshot_of({"base": "cpu-only", "set": {"packages.versions.torch": "1.1.0"}})
    stated = mod.snapshot_of({"base": "cpu-only", "set": {"packages.versions.torch": "2.2.2",
                                                          "packages.versions.numpy": "2.0.0"}})
    assert "numpy" in base and "numpy" not in old["packages"]["versions"]
    assert stated["packages"]["versions"]["numpy"] == "2.0.0"


# PKG020: mmcv without its compiled ops under mmdet (open-mmlab/mmdetection#3272: "No module named 'mmcv._ext'")

def test_mmcv_ops_are_the_compiled_ext_module():
    from ddpdoctor.gather.packages import mmcv_has_ops

    assert mmcv_has_ops(["__init__.py", "ops", "_ext.cpython-38-x86_64-linux-gnu.so"])
    assert mmcv_has_ops(["_ext.cp310-win_amd64.pyd"])
    assert not mmcv_has_ops(["__init__.py", "ops", "utils", "_ext.py"])


def test_mmcv_build_reads_the_package_directory_without_importing_it(tmp_path, monkeypatch):
    from ddpdoctor.gather.packages import mmcv_build

    pkg = tmp_path / "mmcv"
    (pkg / "ops").mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise RuntimeError('imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert mmcv_build() == {"ops": False, "dir": str(pkg)}
    (pkg / "_ext.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    assert mmcv_build()["ops"] is True


def test_pkg020_fires_on_mmcv_lite_under_mmdet():
    snap = make_snapshot(packages={"mmcv": "1.0.0", "mmdet": "2.2.0",
                                   "mmcv_build": {"ops": False, "dir": "/site-packages/mmcv"}})
    [finding] = findings_of(snap, "PKG020")
    assert finding.severity == "warning" and "mmcv._ext" in finding.title and "mmcv-full" in finding.fix


def test_pkg020_quiet_with_ops_without_a_user_or_before_mmcv_1():
    lite = {"ops": False, "dir": "/site-packages/mmcv"}
    assert findings_of(make_snapshot(packages={"mmcv-full": "1.7.2", "mmdet": "2.28.2",
                                               "mmcv_build": {"ops": True, "dir": "/x"}}), "PKG020") == []
    assert findings_of(make_snapshot(packages={"mmcv": "1.7.2", "mmcv_build": lite}), "PKG020") == []  # no mmcv.ops user
    assert findings_of(make_snapshot(packages={"mmcv": "0.6.2", "mmdet": "1.2.0", "mmcv_build": lite}), "PKG020") == []
    assert findings_of(make_snapshot(packages={"mmcv": "1.0.0", "mmdet": "2.3.0"}), "PKG020") == []  # not recorded


# SYS010: Triton's cache where this user cannot create it (foundation-model-stack/fms-hf-tuning#367: OpenShift,
# random UID, HOME=/, "cannot access /.triton")

def test_triton_cache_fact_records_whether_the_nearest_directory_is_writable(tmp_path, monkeypatch):
    import os

    from ddpdoctor.gather import Sources
    from ddpdoctor.gather.host import triton_cache_fact

    (tmp_path / "proc" / "self").mkdir(parents=True)
    (tmp_path / "proc" / "self" / "mountinfo").write_text("21 1 0:21 / / rw - overlay overlay rw\n")
    (tmp_path / "home" / "u").mkdir(parents=True)
    fact = triton_cache_fact(Sources(environ={"HOME": "/home/u"}, root=str(tmp_path)))
    assert fact["writable_at"] == "/home/u" and fact["writable"] is True
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, m: False if str(p).rstrip("/") == str(tmp_path) else real(p, m))
    fact = triton_cache_fact(Sources(environ={"HOME": "/"}, root=str(tmp_path)))
    assert (fact["path"], fact["writable_at"], fact["writable"]) == ("/.triton/cache", "/", False)


ROOT_CACHE = {"path": "/.triton/cache", "from": "home", "fstype": "overlay", "mount_point": "/", "manager": None,
              "writable": False, "writable_at": "/"}


def test_sys010_warns_with_a_triton_kernel_library_and_notes_without():
    snap = make_snapshot(host={"triton_cache": ROOT_CACHE}, packages={"triton": "2.3.1", "auto-gptq": "0.7.1"})
    [finding] = findings_of(snap, "SYS010")
    assert finding.severity == "warning" and "/.triton/cache" in finding.title and "TRITON_CACHE_DIR" in finding.fix
    [note] = findings_of(make_snapshot(host={"triton_cache": ROOT_CACHE}, packages={"triton": "2.3.1"}), "SYS010")
    assert note.severity == "info"


def test_sys010_quiet_when_writable_without_triton_or_with_a_cache_manager():
    ok = dict(ROOT_CACHE, writable=True)
    assert findings_of(make_snapshot(host={"triton_cache": ok}, packages={"triton": "2.3.1"}), "SYS010") == []
    assert findings_of(make_snapshot(host={"triton_cache": ROOT_CACHE}, packages={"triton": None}), "SYS010") == []
    managed = dict(ROOT_CACHE, manager="mypkg:RedisCache")
    assert findings_of(make_snapshot(host={"triton_cache": managed}, packages={"triton": "2.3.1"}), "SYS010") == []
    unknown = {k: v for k, v in ROOT_CACHE.items() if k not in ("writable", "writable_at")}
    assert findings_of(make_snapshot(host={"triton_cache": unknown}, packages={"triton": "2.3.1"}), "SYS010") == []


# PKG021: a second copy of Intel's OpenMP runtime beside torch's (aleximmer/Laplace#56: "OMP: Error #15:
# Initializing libiomp5md.dll, but found libiomp5md.dll already initialized")

def test_openmp_kind_reads_runtime_file_names():
    from ddpdoctor.gather.packages import openmp_kind

    assert [openmp_kind(n) for n in ("libiomp5md.dll", "libiomp5.dylib", "libomp.dylib", "libgomp-a34b3233.so.1.0.0",
                                     "vcomp140.dll")] == ["intel", "intel", "llvm", "gnu", "msvc"]
    assert openmp_kind("libomptarget.so") is None and openmp_kind("libiomp5md.lib") is None


def test_openmp_runtimes_lists_torch_env_and_vendored_copies(tmp_path, monkeypatch):
    import sys

    from ddpdoctor.gather.packages import openmp_runtimes

    site = tmp_path / "site"
    (site / "torch" / "lib").mkdir(parents=True)
    (site / "torch" / "lib" / "libiomp5.so").write_bytes(b"")
    (site / "scikit_learn.libs").mkdir()
    (site / "scikit_learn.libs" / "libgomp-a34b3233.so.1.0.0").write_bytes(b"")
    (tmp_path / "prefix" / "lib").mkdir(parents=True)
    (tmp_path / "prefix" / "lib" / "libiomp5.so").write_bytes(b"")
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "prefix"))
    got = {(r["owner"], r["kind"]) for r in openmp_runtimes(torch_dir=str(site / "torch"))}
    assert got == {("torch", "intel"), ("env", "intel"), ("scikit_learn", "gnu")}


TWO_INTEL = [{"path": "C:/env/Lib/site-packages/torch/lib/libiomp5md.dll", "kind": "intel", "owner": "torch"},
             {"path": "C:/env/Library/bin/libiomp5md.dll", "kind": "intel", "owner": "env"}]


def test_pkg021_warns_on_two_intel_runtimes_and_notes_under_kmp_duplicate_lib_ok():
    [finding] = findings_of(make_snapshot(packages={"openmp_runtimes": TWO_INTEL}), "PKG021")
    assert finding.severity == "warning" and "Intel's OpenMP" in finding.title
    [note] = findings_of(make_snapshot(env={"KMP_DUPLICATE_LIB_OK": "TRUE"}, packages={"openmp_runtimes": TWO_INTEL}),
                         "PKG021")
    assert note.severity == "info" and "KMP_DUPLICATE_LIB_OK" in note.subjects


def test_pkg021_quiet_with_one_intel_runtime_or_none_of_torchs():
    assert findings_of(make_snapshot(packages={"openmp_runtimes": TWO_INTEL[:1]}), "PKG021") == []
    not_torch = [dict(r, owner="env") for r in TWO_INTEL]
    assert findings_of(make_snapshot(packages={"openmp_runtimes": not_torch}), "PKG021") == []
    assert findings_of(make_snapshot(packages={}), "PKG021") == []


# PKG022: two torch installs, or a torch directory shadowing the installed one (pytorch/pytorch#12031, #2094, #574;
# huggingface/transformers#29022)

def test_torch_installs_reads_dists_conda_records_and_a_cwd_torch_package(tmp_path):
    from ddpdoctor.gather.packages import torch_installs

    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("")
    got = torch_installs(cwd=str(tmp_path), dists=[{"version": "2.2.0", "location": "/e/site-packages"},
                                                   {"version": "2.2.0", "location": "/e/site-packages/"},
                                                   {"version": "2.1.0", "location": "/home/u/.local/site-packages"}],
                         conda_names=["pytorch-0.4.1", "pytorch-nightly-1.0.0.dev20180921"])
    assert [d["version"] for d in got["dists"]] == ["2.2.0", "2.1.0"]  # one per directory
    assert got["conda"] == ["pytorch-0.4.1", "pytorch-nightly-1.0.0.dev20180921"]
    assert got["cwd_shadow"] == str(tmp_path / "torch")
    assert torch_installs(cwd=str(tmp_path / "torch"), dists=[], conda_names=[]) == {}


def test_pkg022_warns_on_two_installs_and_on_a_shadowing_directory():
    two = {"dists": [{"version": "2.2.0", "location": "/e/site-packages"},
                     {"version": "2.1.0", "location": "/home/u/.local/site-packages"}]}
    [finding] = findings_of(make_snapshot(packages={"torch_installs": two}), "PKG022")
    assert finding.severity == "warning" and "more than one torch" in finding.title and "2.1.0" in finding.detail
    shadow = {"dists": two["dists"][:1], "cwd_shadow": "/src/pytorch/torch"}
    [finding] = findings_of(make_snapshot(packages={"torch_installs": shadow}), "PKG022")
    assert "shadows" in finding.title and "cd to another directory" in finding.fix


def test_pkg022_quiet_with_one_install():
    one = {"dists": [{"version": "2.2.0", "location": "/e/site-packages"}], "conda": ["pytorch-2.2.0"]}
    assert findings_of(make_snapshot(packages={"torch_installs": one}), "PKG022") == []
    assert findings_of(make_snapshot(packages={}), "PKG022") == []


# PKG024: another torch's libraries in LD_LIBRARY_PATH (pytorch/pytorch#96797: a C++ libtorch's lib/ from .bashrc)

def test_ld_torch_libs_lists_torch_library_names_in_ld_library_path(tmp_path):
    from ddpdoctor.gather import Sources
    from ddpdoctor.gather.packages import ld_torch_libs

    for n in ("libtorch_cpu.so", "libc10.so", "libopencv_core.so.4.5"):
        (tmp_path / n).write_bytes(b"")
    got = ld_torch_libs(Sources(environ={"LD_LIBRARY_PATH": f"{tmp_path}:relative/dir:/nonexistent"}))
    assert [r["name"] for r in got] == ["libc10.so", "libtorch_cpu.so"]


def test_pkg024_warns_on_another_libtorch_and_spares_torchs_own_lib_dir():
    libs = [{"dir": "/home/u/libtorch/lib", "name": "libtorch_cpu.so"}]
    [finding] = findings_of(make_snapshot(packages={"ld_torch_libs": libs}), "PKG024")
    assert finding.severity == "warning" and "/home/u/libtorch/lib" in finding.title
    own = [{"dir": "/e/site-packages/torch/lib/", "name": "libc10.so"}]
    installs = {"dists": [{"version": "2.2.0", "location": "/e/site-packages"}]}
    assert findings_of(make_snapshot(packages={"ld_torch_libs": own, "torch_installs": installs}), "PKG024") == []
    assert findings_of(make_snapshot(packages={"torch": None, "ld_torch_libs": libs}), "PKG024") == []


# PKG023: conda's magma built for another CUDA than torch (pytorch/pytorch#3018, #12283)

def test_conda_magma_reads_magma_records_by_name():
    from ddpdoctor.gather.packages import conda_magma

    names = ["magma-cuda80-2.1.0-5.json", "magma-2.5.4-h1.json", "pytorch-0.2.0-py36.json", "magma-cuda121-2.6.1-1.json"]
    assert conda_magma(names) == [{"name": "magma-cuda80", "version": "2.1.0"}, {"name": "magma-cuda121", "version": "2.6.1"}]


def test_pkg023_warns_on_magma_of_another_cuda_and_is_quiet_on_a_match():
    snap = make_snapshot(packages={"torch_build": {"cuda": "9.0", "hip": None},
                                   "conda_magma": [{"name": "magma-cuda80", "version": "2.1.0"}]})
    [finding] = findings_of(snap, "PKG023")
    assert finding.severity == "warning" and "CUDA 8.0" in finding.title and "magma-cuda90" in finding.fix
    same = make_snapshot(packages={"torch_build": {"cuda": "10.0", "hip": None},
                                   "conda_magma": [{"name": "magma-cuda100", "version": "2.5.0"}]})
    assert findings_of(same, "PKG023") == []
    cpu = make_snapshot(packages={"torch_build": {"cuda": None, "hip": None},
                                  "conda_magma": [{"name": "magma-cuda80", "version": "2.1.0"}]})
    assert findings_of(cpu, "PKG023") == []


# ------------------------------------------------ PKG025: a triton other than the one torch pins (check18b)
# batch 93: coreweave/ml-containers#64 (triton 2.3.0 under a torch pinned to 2.2.0: "cannot import name
# 'triton_key'"), unslothai/unsloth#2403 (triton 3.3.0 under torch 2.6.0, pinned to 3.2.0).
def test_triton_pins_parsed_beside_nccl():
    from ddpdoctor.gather.packages import parse_pins

    linux = 'platform_system == "Linux" and platform_machine == "x86_64"'
    req = [f"nvidia-nccl-cu12==2.21.5; {linux}", f"triton==3.2.0; {linux}", "sympy==1.13.1; python_version >= '3.9'",
           f"pytorch-triton==3.0.0+45fff310c8; {linux}", "triton>=2.0; extra == 'dynamo'"]
    assert parse_pins(req, "x86_64", "Linux") == {"nvidia-nccl-cu12": "2.21.5", "triton": "3.2.0",
                                                   "pytorch-triton": "3.0.0+45fff310c8"}
    assert parse_pins(req, "x86_64", "Windows") == {}


def _pkg25(pins, **installed):
    snap = make_snapshot(packages={"torch": "2.6.0", **installed, "torch_pins": pins})
    return [(f.severity, f.title) for f in findings_of(snap, "PKG025")]


def test_triton_other_than_torch_pin_is_reported():
    got = _pkg25({"triton": "3.2.0"}, triton="3.3.0")
    assert [s for s, _ in got] == ["warning"] and "3.3.0" in got[0][1] and "triton==3.2.0" in got[0][1]
    got = _pkg25({"pytorch-triton": "3.0.0+45fff310c8"}, triton="2.3.0")  # a nightly's pin, another dist installed
    assert [s for s, _ in got] == ["warning"] and "triton 2.3.0" in got[0][1]
    got = _pkg25({"pytorch-triton": "3.0.0+45fff310c8"}, **{"pytorch-triton": "3.0.0+989adb9a29"})
    assert [s for s, _ in got] == ["warning"]


def test_triton_at_torch_pin_or_unpinned_is_quiet():
    assert _pkg25({"triton": "3.2.0"}, triton="3.2.0") == []
    assert _pkg25({"pytorch-triton": "3.0.0+45fff310c8"}, **{"pytorch-triton": "3.0.0+45fff310c8"}) == []
    assert _pkg25({}, triton="3.3.0") == []                       # torch pins nothing (conda, a source build)
    assert _pkg25({"triton": "3.2.0"}) == []                      # no triton at all: GPU032's business
    assert _pkg25({"nvidia-nccl-cu12": "2.21.5"}, triton="3.3.0") == []


def test_nccl_pin_check_ignores_triton_pins():
    snap = make_snapshot(packages={"torch": "2.6.0", "triton": "3.1.0", "torch_pins": {"triton": "3.2.0"}})
    assert findings_of(snap, "PKG013") == []
