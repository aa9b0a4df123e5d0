"""check26 (issue 26, round 22): the classes batches 114-115 lacked, each with a trigger and a quiet fixture.
Pure: snapshots are built by the factory over recorded facts; no process is started."""
from __future__ import annotations

from factory import findings_of, make_snapshot

# -- ENV019 arm: a launcher that always passes --local_rank (DeepSpeed's launcher/launch.py) into a script whose
# argparse has no local-rank option (data/launchers.json passes_local_rank) --

DS_RANK_1 = {"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2", "LOCAL_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
             "MASTER_PORT": "29500", "CROSS_RANK": "0", "CROSS_SIZE": "1"}


def _script(strict=True, known=False, args=()):
    facts = {"local_rank_args": list(args), "parse_known_args": known, "reads_local_rank_env": False,
             "strict_parse_args": [{"path": "train.py", "line": 12, "what": "parser.parse_args()"}] if strict else []}
    return {"scripts": ["train.py"], "files": [], "findings": [], "rules_run": 0, "facts": facts}


def _ds(env=DS_RANK_1, argv=None, **lint):
    from ddpdoctor.facts.launch import parse_command

    launch = {"commands": [dict(parse_command(argv.split()), depth=1)], "depth_read": 1} if argv else \
        {"commands": [], "depth_read": 0}
    return make_snapshot(env=env, packages={"torch": "2.0.1", "deepspeed": "0.9.5"}, lint=_script(**lint),
                         launch=launch)


def test_deepspeed_launcher_into_a_script_without_local_rank_is_named_whatever_torch():
    [f] = findings_of(_ds(), "ENV019")
    assert f.severity == "warning"
    assert "deepspeed's launcher passes --local_rank=N" in f.title and "train.py:12" in f.title
    assert f.evidence["source"]["path"] == "deepspeed/launcher/launch.py"
    assert "--no_local_rank" in f.fix and 'add_argument("--local_rank"' in f.fix
    # known from the command too (check -- deepspeed ...), without the launcher's variables
    [g] = findings_of(_ds(env={}, argv="deepspeed --num_gpus 2 train.py --args a.json"), "ENV019")
    assert "deepspeed --num-gpus 2" in g.detail
    # lint facts of an older reader with no record of the parse calls: said as an 'if'
    lint = _script()
    del lint["facts"]["strict_parse_args"]
    [h] = findings_of(make_snapshot(env=DS_RANK_1, packages={"torch": "2.0.1"}, lint=lint), "ENV019")
    assert "its parse calls were not recorded" in h.detail and "path:train.py" in h.subjects


def test_deepspeed_launcher_quiet_when_the_script_accepts_or_ignores_it():
    assert findings_of(_ds(args=[{"flags": ["--local_rank"], "path": "train.py", "line": 3}]), "ENV019") == []
    assert findings_of(_ds(known=True), "ENV019") == []  # parse_known_args leaves it unread
    assert findings_of(_ds(strict=False), "ENV019") == []  # read: nothing parses sys.argv strictly
    assert findings_of(_ds(env={}, argv="deepspeed --no_local_rank --num_gpus 2 train.py"), "ENV019") == []
    torchrun = {"TORCHELASTIC_RUN_ID": "x", "RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2",
                "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    assert findings_of(_ds(env=torchrun), "ENV019") == []  # torchrun passes no argument


def test_deepspeed_launcher_spelling_is_its_own_not_torchs():
    # torch 2.0's torch.distributed.launch passes --local-rank, but DeepSpeed's launcher passes --local_rank
    [f] = findings_of(_ds(args=[{"flags": ["--local-rank"], "path": "train.py", "line": 3}]), "ENV019")
    assert "DeepSpeed's launcher passes --local_rank=N" in f.title


# -- GPU001 arm: a container launch asking a host with no NVIDIA driver for GPUs (data/containers.json: docker/cli
# opts.go --gpus; moby daemon/devices.go + nvidia_linux.go register 'gpu' only with the toolkit's hook) --

def _box(argv: str, gpus=None):
    from ddpdoctor.facts.launch import parse_command

    words = argv.split()
    return make_snapshot(gpus=gpus or {"unavailable": "no NVIDIA driver library (libnvidia-ml.so.1)"},
                         launch={"commands": [dict(parse_command(words), depth=1)], "depth_read": 1})


def test_docker_gpus_on_a_host_without_nvidia_driver_is_a_warning_naming_the_request():
    [f] = findings_of(_box("docker run --gpus=all --rm -v /a:/b sd-image a prompt"), "GPU001")
    assert f.severity == "warning" and "`docker run --gpus=all` asks this host for NVIDIA GPUs" in f.title
    assert "could not select device driver" in f.title and f.evidence["gpu_request"] == "--gpus=all"
    [g] = findings_of(_box("podman run --device nvidia.com/gpu=all img"), "GPU001")
    assert g.severity == "warning" and "--device nvidia.com/gpu=all" in g.title


def test_docker_without_gpus_or_on_a_gpu_host_is_quiet():
    [f] = findings_of(_box("docker run --rm -v /a:/b sd-image --device cpu"), "GPU001")
    assert f.severity == "info"  # nothing asks for GPUs: the CPU-only note
    healthy = make_snapshot(gpus={"driver_version": "550.54.15", "count": 0, "devices": [], "pairs": []},
                            launch=_box("docker run --gpus all img").get("launch"))
    assert [x for x in findings_of(healthy, "GPU001") if x.severity != "info"] == []


def test_container_command_reads_the_image_past_value_options():
    from ddpdoctor.facts.launch import parse_command

    cmd = parse_command("docker run --rm -it --gpus all -v /a:/b --shm-size 8g img python t.py".split())
    assert cmd["program"] == "img" and cmd["options"] == {"gpus": "all"}
    assert parse_command("docker ps".split()) is None


# -- PKG014: libraries that compile their CUDA kernels at first use (data/runtime_builds.json: xlstm cuda_init.py,
# nvdiffrast ops.py) count as 'something compiles at run time' --

def _kit(ninja_path=None, **versions):
    return make_snapshot(packages={"torch": "2.5.1+cu124", "torch_build": {"cuda": "12.4", "hip": None},
                                   "cuda_toolkit": {"home": "/usr/local/cuda", "from": "CUDA_HOME", "version": "12.4.131"},
                                   "ninja": {"path": ninja_path, "package": None, "package_bin": None}, **versions})


def test_a_library_compiling_at_first_use_without_ninja_is_a_warning_naming_it():
    [f] = [x for x in findings_of(_kit(xlstm="2.0.2"), "PKG014") if "ninja" in x.title.lower()]
    assert f.severity == "warning" and "xlstm 2.0.2" in f.title
    assert "NX-AI/xlstm xlstm/blocks/slstm/src/cuda_init.py" in f.title
    [g] = [x for x in findings_of(_kit(nvdiffrast="0.3.3"), "PKG014") if "ninja" in x.title.lower()]
    assert "nvdiffrast 0.3.3" in g.title


def test_no_runtime_builder_or_ninja_found_is_quiet():
    assert [x for x in findings_of(_kit(), "PKG014") if "ninja" in x.title.lower()] == []
    assert [x for x in findings_of(_kit(ninja_path="/usr/bin/ninja", xlstm="2.0.2"), "PKG014")
            if x.severity != "info"] == []


def test_runtime_builders_are_gathered():
    from ddpdoctor.gather.packages import DISTRIBUTIONS

    assert {"xlstm", "nvdiffrast"} <= set(DISTRIBUTIONS)


# -- GPU032 arm: torch's NVRTC of CUDA 11.1-11.7 asked for sm_89/sm_90 before torch 1.13 clamped it
# (data/gpu_versions.json nvrtc_arch_clamp: aten/src/ATen/native/cuda/jit_utils.cpp, pytorch/pytorch#87595) --

def _nvrtc(torch, cuda, cc=(8, 9)):
    dev = {"index": 0, "name": "NVIDIA GeForce RTX 4060 Ti", "cuda_capability": list(cc), "pci_bus_id": "00000000:01:00.0",
           "memory_total": 16 * 2**30, "memory_used": 0}
    return make_snapshot(packages={"torch": torch, "torch_build": {"cuda": cuda, "hip": None}},
                         gpus={"driver_version": "555.42.02", "cuda_driver": "12.5", "count": 1, "devices": [dev],
                               "pairs": []})


def test_nvrtc_of_cuda_11_3_on_sm_89_before_torch_1_13_is_a_warning_naming_both():
    [f] = [x for x in findings_of(_nvrtc("1.11.0+cu113", "11.3"), "GPU032") if "NVRTC" in x.title]
    assert f.severity == "warning" and "cuda capability 8.9" in f.title and "CUDA 11.3" in f.title
    assert "invalid value for --gpu-architecture" in f.title and f.evidence["nvrtc_max_arch"] == "sm_86"


def test_nvrtc_quiet_when_clamped_known_or_the_gpu_is_older():
    assert [x for x in findings_of(_nvrtc("1.13.1+cu117", "11.7"), "GPU032") if "NVRTC" in x.title] == []
    assert [x for x in findings_of(_nvrtc("1.12.1+cu118", "11.8"), "GPU032") if "NVRTC" in x.title] == []
    assert [x for x in findings_of(_nvrtc("1.11.0+cu113", "11.3", cc=(8, 6)), "GPU032") if "NVRTC" in x.title] == []


# -- PKG014 arm: DeepSpeed's op builder refuses another minor of torch's CUDA major outside its list
# (data/deepspeed_cuda_check.json from every release tag of deepspeedai/DeepSpeed op_builder/builder.py) --

def _dsk(ds, toolkit, torch_cuda, env=None, installed_ops=None):
    pk = {"torch": f"2.0.0+cu{torch_cuda.replace('.', '')}", "deepspeed": ds,
          "torch_build": {"cuda": torch_cuda, "hip": None},
          "cuda_toolkit": {"home": "/usr/local/cuda", "from": "CUDA_HOME", "version": toolkit + ".99"},
          "ninja": {"path": "/usr/bin/ninja", "package": None, "package_bin": None}}
    if installed_ops is not None:
        pk["deepspeed_build"] = {"installed_ops": installed_ops}
    return make_snapshot(env=env, packages=pk)


def _refused(snap):
    return [f for f in findings_of(snap, "PKG014") if f.title.startswith("DeepSpeed ")]


def test_deepspeed_refuses_a_minor_outside_its_list():
    [f] = _refused(_dsk("0.3.13", "11.0", "11.1"))
    assert f.severity == "warning" and "installed CUDA 11.0 does not match the CUDA 11.1" in f.title
    assert f.evidence["rule_from"] == "0.3.8" and "accepts no other minor" in f.detail
    [g] = _refused(_dsk("0.19.6", "13.0", "13.1"))  # cuda_minor_mismatch_ok has never listed CUDA 13
    assert "DS_SKIP_CUDA_CHECK=1" in g.fix


def test_deepspeed_minor_quiet_when_listed_accepted_skipped_or_prebuilt():
    assert _refused(_dsk("0.9.0", "11.7", "11.8")) == []  # both in 0.7.4+'s list
    assert _refused(_dsk("0.3.13", "11.1", "11.0")) == []  # the pair 0.3.8-0.3.16 accept by name
    assert _refused(_dsk("0.19.6", "13.0", "13.1", env={"DS_SKIP_CUDA_CHECK": "1"})) == []
    assert _refused(_dsk("0.19.6", "13.0", "13.1", installed_ops={"cpu_adam": True})) == []
    assert _refused(_dsk("0.3.1", "11.0", "11.1")) == []  # before the check existed
