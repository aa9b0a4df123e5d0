"""check20 (issue 26, round 20): classes left by batches 96-101, each with a trigger and a quiet fixture.
Pure: snapshots are built by the factory; no process is started."""
from __future__ import annotations

from factory import findings_of, make_snapshot


def _launch(argv):
    from ddpdoctor.facts.launch import parse_command, parse_program

    cmd = dict(parse_command(argv) or parse_program(argv), depth=0)
    return {"commands": [cmd], "depth_read": 0}


# ------------------------------------------- ENV002: the port a launcher binds, or picks itself (facts.launch.bound_port)

def test_bound_port_reads_the_launchers_own_options():
    from ddpdoctor.facts.launch import bound_port

    def of(argv, **kw):
        return bound_port(make_snapshot(launch=_launch(argv), **kw))

    assert of(["torchrun", "--standalone", "--nproc-per-node", "2", "t.py"])["free"] is True
    assert of(["torchrun", "--nproc-per-node", "2", "t.py"]) == {"port": 29500, "by": "torchrun's default",
                                                                 "free": False, "fallback": False}
    assert of(["torchrun", "--master-port", "41000", "t.py"])["port"] == 41000
    assert of(["torchrun", "--rdzv-backend", "c10d", "--rdzv-endpoint", "localhost:0", "t.py"])["free"] is True
    assert of(["torchrun", "--rdzv-backend", "c10d", "--rdzv-endpoint", "n0:29400", "t.py"]) is None
    assert of(["accelerate", "launch", "--main_process_port", "0", "t.py"])["free"] is True
    one = of(["accelerate", "launch", "--num_processes", "2", "t.py"])
    assert one["port"] == 29500 and one["fallback"] is True
    two = of(["accelerate", "launch", "--num_machines", "2", "--main_process_port", "29600", "t.py"])
    assert two["port"] == 29600 and two["fallback"] is False
    assert of(["accelerate", "launch", "--config_file", "c.yaml", "t.py"]) is None  # its config not read here
    assert of(["python", "t.py"]) is None
    assert of(["deepspeed", "t.py"]) is None


def test_env002_torchrun_standalone_and_accelerate_fallback_are_quiet():
    """Quiet: 29500 held and MASTER_PORT in the ephemeral range, but the launch picks (or moves to) a free port."""
    held = {"listening_tcp_ports": [22, 29500, 50123]}
    env = {"MASTER_PORT": "50123"}
    for argv in (["torchrun", "--standalone", "--nproc-per-node", "2", "train.py"],
                 ["accelerate", "launch", "--main_process_port", "0", "train.py"],
                 ["accelerate", "launch", "--num_processes", "2", "train.py"]):
        snap = make_snapshot(env=env, network=dict(held), launch=_launch(argv))
        assert findings_of(snap, "ENV002") == [], argv
    # the same environment without a recorded launch: MASTER_PORT held is reported (the check can fire)
    [f] = findings_of(make_snapshot(env=env, network=dict(held)), "ENV002")
    assert f.severity == "error" and "50123" in f.title


def test_env002_torchrun_judges_its_own_port_not_master_port():
    """Trigger: torchrun binds --master-port (default 29500), which is held; MASTER_PORT (free) is not what it reads."""
    snap = make_snapshot(env={"MASTER_PORT": "29555"}, network={"listening_tcp_ports": [22, 29500]},
                         launch=_launch(["torchrun", "--nproc-per-node", "2", "train.py"]))
    [f] = findings_of(snap, "ENV002")
    assert f.severity == "error" and "29500" in f.title and "torchrun" in f.title
    assert "MASTER_PORT=29555" in f.detail and "--standalone" in f.fix
    # two machines under accelerate: no fallback there, ConnectionError
    snap = make_snapshot(network={"listening_tcp_ports": [29500]},
                         launch=_launch(["accelerate", "launch", "--num_machines", "2", "--machine_rank", "0",
                                         "train.py"]))
    [f] = findings_of(snap, "ENV002")
    assert f.severity == "error" and "accelerate" in f.title
    # an explicit torchrun port in the ephemeral range: a warning; the default one: nothing
    snap = make_snapshot(network={"listening_tcp_ports": [22], "ip_local_port_range": [32768, 60999]},
                         launch=_launch(["torchrun", "--master-port", "45000", "train.py"]))
    [f] = findings_of(snap, "ENV002")
    assert f.severity == "warning" and "45000" in f.title
    snap = make_snapshot(network={"listening_tcp_ports": [22], "ip_local_port_range": [32768, 60999]},
                         env={"MASTER_PORT": "45000"}, launch=_launch(["torchrun", "train.py"]))
    assert findings_of(snap, "ENV002") == []  # torchrun binds 29500: MASTER_PORT is not read


def test_bound_port_reads_accelerates_default_config():
    from ddpdoctor.facts.launch import bound_port

    cfg = {"accelerate_config": {"path": "/h/.cache/huggingface/accelerate/default_config.yaml",
                                 "values": {"main_process_port": 0, "num_machines": 1}}}
    snap = make_snapshot(host=cfg, launch=_launch(["accelerate", "launch", "train.py"]))
    assert bound_port(snap)["free"] is True
    cfg["accelerate_config"]["values"] = {"main_process_port": 29700, "num_machines": 2}
    snap = make_snapshot(host=cfg, launch=_launch(["accelerate", "launch", "train.py"]))
    assert bound_port(snap) == {"port": 29700, "by": "main_process_port in the accelerate config", "free": False,
                                "fallback": False}


# ------------------------------------- GPU037: fp16 asked of GPUs without tensor cores or fast fp16 (mmdetection#3526)

def _gpu(name, cc, n=1):
    return {"count": n, "devices": [{"index": i, "name": name, "uuid": f"GPU-{i}", "cuda_capability": list(cc)}
                                    for i in range(n)]}


def test_fp16_table_from_the_programming_guide():
    from ddpdoctor.facts.gpu_versions import fp16_without_speedup, tensor_cores

    assert fp16_without_speedup((6, 1))["fp16"] == 2 and fp16_without_speedup((6, 1))["fp32"] == 128
    assert fp16_without_speedup((5, 2))["fp16"] is None  # no native fp16 arithmetic
    assert fp16_without_speedup((6, 0)) is None  # P100: fp16 twice fp32
    assert fp16_without_speedup((7, 0)) is None and tensor_cores((7, 0)) and not tensor_cores((6, 1))
    assert fp16_without_speedup((8, 6)) is None  # tensor cores
    assert fp16_without_speedup(None) is None


def test_gpu037_fp16_on_pascal_p40_from_launch_env_and_script():
    """Trigger: accelerate launch --mixed_precision fp16 / ACCELERATE_MIXED_PRECISION=fp16 / --fp16 on 4x Tesla P40."""
    p40 = _gpu("Tesla P40", (6, 1), 4)
    [f] = findings_of(make_snapshot(gpus=p40, launch=_launch(["accelerate", "launch", "--mixed_precision", "fp16",
                                                                "train.py"])), "GPU037")
    assert f.severity == "warning" and "Tesla P40 (6.1)" in f.title and "gpu:3" in f.subjects
    assert "2 vs fp32 128" in f.detail
    [f] = findings_of(make_snapshot(gpus=p40, env={"ACCELERATE_MIXED_PRECISION": "fp16"}), "GPU037")
    assert f.subjects[0] == "ACCELERATE_MIXED_PRECISION"
    [f] = findings_of(make_snapshot(gpus=_gpu("GeForce GTX 1080 Ti", (6, 1)),
                                    launch=_launch(["python", "train.py", "--precision", "16-mixed"])), "GPU037")
    assert "--precision 16-mixed" in f.title


def test_gpu037_quiet_on_gpus_that_gain_and_without_an_ask():
    ask = _launch(["accelerate", "launch", "--mixed_precision", "fp16", "train.py"])
    for name, cc in (("Tesla P100-PCIE-16GB", (6, 0)), ("Tesla V100-SXM2-32GB", (7, 0)), ("NVIDIA A100", (8, 0))):
        assert findings_of(make_snapshot(gpus=_gpu(name, cc), launch=ask), "GPU037") == [], name
    assert findings_of(make_snapshot(gpus=_gpu("Tesla P40", (6, 1))), "GPU037") == []  # fp32: nothing asked
    bf = _launch(["accelerate", "launch", "--mixed_precision", "no", "train.py"])
    assert findings_of(make_snapshot(gpus=_gpu("Tesla P40", (6, 1)), launch=bf), "GPU037") == []


def test_gpu037_reads_the_scripts_and_configs_fp16():
    row = {"path": "ds_config.json", "line": 3, "what": "fp16.enabled: true", "precision": "fp16"}
    lint = {"scripts": ["train.py"], "files": [], "findings": [], "rules_run": 0, "facts": {"precision": [row]}}
    [f] = findings_of(make_snapshot(gpus=_gpu("Tesla P4", (6, 1)), lint=lint), "GPU037")
    assert list(f.subjects[:2]) == ["path:ds_config.json", "gpu:0"]
    assert findings_of(make_snapshot(gpus=_gpu("Tesla T4", (7, 5)), lint=lint), "GPU037") == []


# --------------------- GPU016: per-node processes of accelerate launch / deepspeed against the visible GPUs (facts.launch)

def test_per_node_processes_of_accelerate_and_deepspeed():
    from ddpdoctor.facts.launch import per_node_processes

    def of(argv, **kw):
        return per_node_processes(make_snapshot(launch=_launch(argv), **kw))

    assert of(["accelerate", "launch", "--multi_gpu", "--num_processes", "8", "t.py"]) == \
        (8, "accelerate launch --num_processes 8")
    assert of(["accelerate", "launch", "--multi_gpu", "--num_processes", "16", "--num_machines", "2", "t.py"])[0] == 8
    assert of(["accelerate", "launch", "--num_processes", "8", "t.py"]) is None  # mode decided by the GPUs it sees
    assert of(["accelerate", "launch", "--config_file", "c.yaml", "t.py"]) is None
    assert of(["deepspeed", "--num_gpus", "2", "t.py"]) == (2, "deepspeed --num_gpus 2")
    assert of(["deepspeed", "--num_gpus", "2", "t.py"], env={"CUDA_VISIBLE_DEVICES": "0,1"}) is None  # ENV016's
    assert of(["deepspeed", "t.py"]) is None


def test_gpu016_accelerate_and_deepspeed_ask_more_processes_than_gpus():
    a100x4 = _gpu("NVIDIA A100-SXM4-40GB", (8, 0), 4)
    for argv in (["accelerate", "launch", "--multi_gpu", "--num_processes", "8", "train.py"],
                 ["deepspeed", "--num_gpus", "8", "train.py"]):
        [f] = findings_of(make_snapshot(gpus=a100x4, launch=_launch(argv)), "GPU016")
        assert f.severity == "error" and f.title.startswith("8 local ranks but only 4 visible GPU"), argv
    # accelerate's OMP_NUM_THREADS=1 default: no oversubscription reported for its 8 ranks
    snap = make_snapshot(gpus=a100x4, launch=_launch(["accelerate", "launch", "--multi_gpu", "--num_processes", "8",
                                                      "train.py"]))
    assert findings_of(snap, "ENV006") == []


def test_gpu016_quiet_when_the_counts_match_or_are_not_declared():
    a100x4 = _gpu("NVIDIA A100-SXM4-40GB", (8, 0), 4)
    for argv in (["accelerate", "launch", "--multi_gpu", "--num_processes", "4", "train.py"],
                 ["accelerate", "launch", "--num_processes", "8", "train.py"],
                 ["deepspeed", "--num_gpus", "4", "train.py"], ["deepspeed", "train.py"]):
        assert [f for f in findings_of(make_snapshot(gpus=a100x4, launch=_launch(argv)), "GPU016")
                if f.severity != "info"] == [], argv


# ------------------------- PKG028: the libnccl.so.2 libtorch_cuda.so resolves to, in ld.so's order (gather.native)
import os  # noqa: E402
import shutil  # noqa: E402

ELF = os.path.join(os.path.dirname(__file__), os.pardir, "fixtures", "elf")


def _torch_tree(tmp_path, kind):
    """site/torch/lib/{libc10.so, libtorch_cuda.so (DT_NEEDED libnccl.so.2, `kind` = rpath|runpath
    $ORIGIN/../../nvidia/nccl/lib)}, site/nvidia/nccl/lib/libnccl.so.2 (the wheel's), /opt/nccl/lib/libnccl.so.2 ->
    libnccl.so.2.18.3 (a container's)."""
    site = tmp_path / "site"
    (site / "torch" / "lib").mkdir(parents=True)
    shutil.copy(os.path.join(ELF, "site", "torch", "lib", "libc10.so"), site / "torch" / "lib" / "libc10.so")
    shutil.copy(os.path.join(ELF, "nccl", kind, "libtorch_cuda.so"), site / "torch" / "lib" / "libtorch_cuda.so")
    (site / "nvidia" / "nccl" / "lib").mkdir(parents=True)
    shutil.copy(os.path.join(ELF, "nccl", "libnccl.so.2"), site / "nvidia" / "nccl" / "lib" / "libnccl.so.2")
    other = tmp_path / "opt" / "nccl" / "lib"
    other.mkdir(parents=True)
    shutil.copy(os.path.join(ELF, "nccl", "libnccl.so.2"), other / "libnccl.so.2.18.3")
    os.symlink("libnccl.so.2.18.3", other / "libnccl.so.2")
    return str(site), str(other)


def test_torch_nccl_follows_the_loaders_order(tmp_path):
    from ddpdoctor.gather import Sources
    from ddpdoctor.gather.native import torch_nccl

    site, other = _torch_tree(tmp_path, "runpath")
    fact = torch_nccl(Sources(environ={"LD_LIBRARY_PATH": other}), site=site)
    assert fact["needed"] == "libnccl.so.2" and fact["search"] == "RUNPATH"
    assert fact["from"] == "LD_LIBRARY_PATH" and fact["version"] == "2.18.3"  # LD_LIBRARY_PATH before DT_RUNPATH
    fact = torch_nccl(Sources(environ={}), site=site)
    assert fact["from"] == "RUNPATH" and fact["path"].endswith("nvidia/nccl/lib/libnccl.so.2") and "version" not in fact
    site2, other2 = _torch_tree(tmp_path / "b", "rpath")
    fact = torch_nccl(Sources(environ={"LD_LIBRARY_PATH": other2}), site=site2)
    assert fact["search"] == "RPATH" and fact["from"] == "RPATH"  # DT_RPATH (no RUNPATH) before LD_LIBRARY_PATH


PINNED = {"torch": "2.2.0", "nvidia-nccl-cu12": "2.19.3"}


def _nccl_snap(fact, **extra):
    return make_snapshot(packages=dict(PINNED, torch_nccl=fact, torch_pins={"nvidia-nccl-cu12": "2.19.3"}, **extra))


def test_pkg028_an_older_nccl_on_ld_library_path_wins_over_the_wheel():
    fact = {"needed": "libnccl.so.2", "search": "RUNPATH", "from": "LD_LIBRARY_PATH",
            "path": "/usr/local/nccl/lib/libnccl.so.2", "real_name": "libnccl.so.2.18.3", "version": "2.18.3"}
    [f] = findings_of(_nccl_snap(fact), "PKG028")
    assert f.severity == "error" and "2.18.3" in f.title and "2.19.3" in f.title and "LD_LIBRARY_PATH" in f.subjects
    unknown = dict(fact, real_name="libnccl.so.2")
    del unknown["version"]
    [f] = findings_of(_nccl_snap(unknown), "PKG028")
    assert f.severity == "warning"
    missing = {"needed": "libnccl.so.2", "search": "RUNPATH"}
    [f] = findings_of(make_snapshot(packages={"torch": "2.2.0", "torch_nccl": missing}), "PKG028")
    assert f.severity == "error" and "cannot open shared object file" in f.detail


def test_pkg028_quiet_when_torch_loads_its_own_or_the_same_version():
    own = {"needed": "libnccl.so.2", "search": "RPATH", "from": "RPATH",
           "path": "/venv/lib/python3.10/site-packages/nvidia/nccl/lib/libnccl.so.2"}
    assert findings_of(_nccl_snap(own), "PKG028") == []
    same = {"needed": "libnccl.so.2", "search": "RUNPATH", "from": "LD_LIBRARY_PATH", "path": "/opt/n/libnccl.so.2",
            "version": "2.19.3"}
    assert findings_of(_nccl_snap(same), "PKG028") == []
    assert findings_of(_nccl_snap({"needed": None}), "PKG028") == []  # NCCL linked in statically
    # a missing libnccl with the wheel installed: torch's import preloads it
    assert findings_of(_nccl_snap({"needed": "libnccl.so.2", "search": "RUNPATH"}), "PKG028") == []


# ------------------ PKG029: an extension's DT_NEEDED libcudart.so.N found nowhere, or another CUDA's (CenterPoint#102)

def test_extension_cudart_resolved_like_ld_so(tmp_path):
    from ddpdoctor.gather import Sources
    from ddpdoctor.gather.native import scan_extension_modules

    site = tmp_path / "site"
    (site / "det3d" / "ops").mkdir(parents=True)
    shutil.copy(os.path.join(ELF, "cudart", "iou3d_nms_cuda.so"), site / "det3d" / "ops" / "iou3d_nms_cuda.so")
    (site / "torch" / "lib").mkdir(parents=True)
    shutil.copy(os.path.join(ELF, "site", "torch", "lib", "libc10.so"), site / "torch" / "lib" / "libc10.so")
    scan = scan_extension_modules(Sources(root=str(tmp_path), environ={}), str(site))
    [row] = scan["cudart"]
    assert row["package"] == "det3d" and row["needed"] == "libcudart.so.9.0" and row["version"] == "9.0"
    assert "path" not in row  # found nowhere
    # the CUDA 9.0 toolkit's lib64 listed in /etc/ld.so.conf.d (ld.so.cache): found there
    kit = tmp_path / "usr" / "local" / "cuda-9.0" / "lib64"
    kit.mkdir(parents=True)
    shutil.copy(os.path.join(ELF, "cudart", "libcudart.so.9.0"), kit / "libcudart.so.9.0")
    (tmp_path / "etc" / "ld.so.conf.d").mkdir(parents=True)
    (tmp_path / "etc" / "ld.so.conf").write_text("include /etc/ld.so.conf.d/*.conf\n")
    (tmp_path / "etc" / "ld.so.conf.d" / "cuda-9-0.conf").write_text("/usr/local/cuda-9.0/lib64\n")
    [row] = scan_extension_modules(Sources(root=str(tmp_path), environ={}), str(site))["cudart"]
    assert row["path"] == "/usr/local/cuda-9.0/lib64/libcudart.so.9.0" and row["from"] == "ld.so.conf"
    # LD_LIBRARY_PATH comes before ld.so.cache
    (tmp_path / "opt" / "c").mkdir(parents=True)
    shutil.copy(os.path.join(ELF, "cudart", "libcudart.so.9.0"), tmp_path / "opt" / "c" / "libcudart.so.9.0")
    [row] = scan_extension_modules(Sources(root=str(tmp_path), environ={"LD_LIBRARY_PATH": "/opt/c"}),
                                   str(site))["cudart"]
    assert row["from"] == "LD_LIBRARY_PATH"


def _cudart_snap(row, cuda="10.2", own=None):
    pk = {"torch": "1.6.0", "torch_build": {"cuda": cuda, "hip": None}, "extension_cudart": [row]}
    if own:
        pk["torch_cudart"] = own
    return make_snapshot(packages=pk)


CENTERPOINT = {"package": "det3d", "file": "det3d/ops/iou3d_nms/iou3d_nms_cuda.so", "needed": "libcudart.so.9.0",
               "version": "9.0"}


def test_pkg029_an_extension_built_against_cuda_9_under_a_cu102_torch():
    [f] = findings_of(_cudart_snap(CENTERPOINT), "PKG029")
    assert f.severity == "error" and "libcudart.so.9.0" in f.title and "CUDA 9.0" in f.title and "10.2" in f.title
    assert "pkg:det3d" in f.subjects and "cannot open shared object file" in f.detail
    found = dict(CENTERPOINT, path="/usr/local/cuda-9.0/lib64/libcudart.so.9.0", **{"from": "ld.so.conf"})
    [f] = findings_of(_cudart_snap(found), "PKG029")
    assert f.severity == "warning" and "beside torch's CUDA 10.2" in f.title


def test_pkg029_quiet_for_torchs_own_runtime_or_the_same_cuda():
    cu12 = {"package": "flash_attn", "file": "flash_attn_2_cuda.so", "needed": "libcudart.so.12", "version": "12"}
    assert findings_of(_cudart_snap(cu12, cuda="12.1", own="libcudart.so.12"), "PKG029") == []  # torch loads it
    assert findings_of(_cudart_snap(cu12, cuda="12.4"), "PKG029") == []  # same major, torch's own name not read
    same = dict(CENTERPOINT, needed="libcudart.so.10.2", version="10.2", path="/usr/local/cuda/lib64/libcudart.so.10.2")
    assert findings_of(_cudart_snap(same), "PKG029") == []
    cu11 = {"package": "apex", "file": "amp_C.so", "needed": "libcudart.so.11.0", "version": "11.0",
            "path": "/usr/local/cuda/lib64/libcudart.so.11.0", "from": "ld.so.conf"}
    assert findings_of(_cudart_snap(cu11, cuda="11.8"), "PKG029") == []  # every CUDA 11.x runtime is .so.11.0


# ----------------------------------- SYS004: the host's own RAM when no cgroup limit binds (the 4 GiB guess, said so)
GiB = 1024 ** 3


def test_sys004_host_ram_small_for_the_declared_ranks():
    eight = {"TORCHELASTIC_RUN_ID": "x", "RANK": "0", "WORLD_SIZE": "8", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "8",
             "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    snap = make_snapshot(env=eight, host={"memory": {"total_bytes": 16 * GiB, "available_bytes": 12 * GiB}})
    [f] = findings_of(snap, "SYS004")
    assert f.severity == "warning" and "16.0 GiB for 8 local ranks" in f.title and "guess" in f.detail
    assert f.subjects == ["path:/proc/meminfo"] or list(f.subjects) == ["path:/proc/meminfo"]


def test_sys004_host_ram_quiet_with_room_one_rank_or_no_declared_count():
    eight = {"TORCHELASTIC_RUN_ID": "x", "RANK": "0", "WORLD_SIZE": "8", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "8",
             "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    assert findings_of(make_snapshot(env=eight, host={"memory": {"total_bytes": 64 * GiB}}), "SYS004") == []
    assert findings_of(make_snapshot(host={"memory": {"total_bytes": 4 * GiB}}), "SYS004") == []  # one process
