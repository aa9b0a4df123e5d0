"""check25 (issue 26, round 22): the classes batches 100-113 lacked, each with a trigger and a quiet fixture.
Pure: snapshots are built by the factory over recorded facts; no process is started."""
from __future__ import annotations

from factory import findings_of, make_snapshot

# the runtimes a conda torch with MKL numpy records (gather.packages.openmp_runtimes: kind from the file name)
GOMP_AND_IOMP = [{"path": "/opt/conda/lib/libgomp.so.1", "kind": "gnu", "owner": "env"},
                 {"path": "/opt/conda/lib/libiomp5.so", "kind": "intel", "owner": "env"}]
TORCHRUN_4 = {"TORCHELASTIC_RUN_ID": "x", "RANK": "0", "WORLD_SIZE": "4", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "4",
              "GROUP_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}


# -- PKG021 arm: mkl-service's threading layer against GNU OpenMP (IntelPython/mkl-service mkl/_mklinitmodule.c) --

def _mkl(env=None, runtimes=GOMP_AND_IOMP, **versions):
    return make_snapshot(env=env, packages={"torch": "1.5.0", "mkl-service": "2.3.0", "openmp_runtimes": runtimes,
                                            **versions})


def test_mkl_threading_layer_intel_set_with_libgomp_is_named():
    [f] = findings_of(_mkl(env={"MKL_THREADING_LAYER": "intel"}), "PKG021")
    assert f.severity == "warning"
    assert "MKL_THREADING_LAYER=INTEL is incompatible with libgomp.so.1" in f.title
    assert f.fix.startswith("export MKL_THREADING_LAYER=GNU")
    assert f.evidence["rule"] == "set_intel"


def test_mkl_threading_layer_unset_on_a_job_of_several_processes_is_a_note():
    # left unset, the failure depends on whether a parent imported numpy before torch (not read): a note, not a verdict
    [f] = findings_of(_mkl(env=TORCHRUN_4), "PKG021")
    assert f.severity == "info" and f.evidence["rule"] == "unset" and f.evidence["processes"] == 4
    assert "exports it to the processes it starts afterwards" in f.detail and "import order" in f.detail


def test_mkl_threading_layer_quiet_when_chosen_forced_alone_or_without_its_parts():
    assert findings_of(_mkl(env=dict(TORCHRUN_4, MKL_THREADING_LAYER="GNU")), "PKG021") == []
    assert findings_of(_mkl(env=dict(TORCHRUN_4, MKL_SERVICE_FORCE_INTEL="1")), "PKG021") == []
    assert findings_of(_mkl(env={}), "PKG021") == []  # one process: mkl-service follows the runtime loaded first
    no_gomp = [r for r in GOMP_AND_IOMP if r["kind"] != "gnu"]
    assert findings_of(_mkl(env={"MKL_THREADING_LAYER": "INTEL"}, runtimes=no_gomp), "PKG021") == []
    plain = make_snapshot(env={"MKL_THREADING_LAYER": "INTEL"}, packages={"openmp_runtimes": GOMP_AND_IOMP})
    assert findings_of(plain, "PKG021") == []  # no mkl-service recorded


# -- NET002 arm: torchrun's store node (static rendezvous node rank 0, or a job of one node) with MASTER_ADDR elsewhere
# (torch/distributed/elastic/rendezvous/static_tcp_rendezvous.py: TCPStore(master_addr, ..., is_master=rank == 0)) --

def _torchrun(argv: str, master="192.168.0.1", resolved="192.168.0.1", node_rank="0", nnodes="1"):
    from ddpdoctor.facts.launch import parse_command

    words = argv.split()
    env = {"TORCHELASTIC_RUN_ID": "none", "RANK": "0" if node_rank == "0" else "4", "WORLD_SIZE": str(4 * int(nnodes)),
           "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "4", "GROUP_RANK": node_rank, "MASTER_ADDR": master,
           "MASTER_PORT": "29500"}
    return make_snapshot(env=env, cmdline=words, network={"master_addr": {"host": master, "addresses": [resolved]}},
                         launch={"commands": [dict(parse_command(words), depth=1)], "depth_read": 1})


ONE_NODE = "torchrun --nproc_per_node 4 --nnodes 1 --node_rank 0 --master_addr 192.168.0.1 --master_port 29500 t.py"
TWO_NODES = "torchrun --nproc_per_node 4 --nnodes 2 --node_rank {r} --master_addr 192.168.0.1 --master_port 29500 t.py"


def test_one_node_torchrun_with_master_addr_of_another_host_is_an_error():
    [f] = [f for f in findings_of(_torchrun(ONE_NODE), "NET002") if "rendezvous store" in f.title]
    assert f.severity == "error" and "192.168.0.1" in f.title and "--nnodes 1" in f.title
    assert f.fix.startswith("torchrun --standalone")


def test_static_rendezvous_node_rank_0_with_master_addr_of_another_host_is_an_error():
    [f] = [f for f in findings_of(_torchrun(TWO_NODES.format(r=0), nnodes="2"), "NET002") if "store" in f.title]
    assert "node rank 0 of torchrun's static rendezvous" in f.title


def test_store_node_quiet_when_master_is_here_or_another_node_hosts_it():
    def store(snap):
        return [f for f in findings_of(snap, "NET002") if "rendezvous store" in f.title]

    assert store(_torchrun(ONE_NODE, resolved="10.0.0.5")) == []  # MASTER_ADDR is this host's eth0
    assert store(_torchrun(TWO_NODES.format(r=1), node_rank="1", nnodes="2")) == []  # node 1 is a client
    c10d = ("torchrun --nproc_per_node 4 --nnodes 2 --rdzv_backend c10d --rdzv_endpoint 192.168.0.1:29400 "
            "--master_addr 192.168.0.1 t.py")
    assert store(_torchrun(c10d, nnodes="2")) == []  # c10d: the endpoint's host runs the store
    assert store(_torchrun("torchrun --standalone --nproc_per_node 4 t.py")) == []


# -- an inference server's own node count (SGLang --nnodes N; data/serving.json multi_node '*') makes the job one of
# several nodes for the network checks: NET005's firewall judgement on a serving launch --

FIREWALL = {"tool": "firewalld", "active": True, "default_incoming": "deny", "allowed": ["22/tcp"]}


def _sglang(extra: str):
    from ddpdoctor.facts.launch import parse_command

    words = ("python3 -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 16 "
             "--dist-init-addr 10.0.0.1:5000 " + extra).split()
    cmd = parse_command(words)
    return cmd, make_snapshot(network={"firewall": FIREWALL},
                              launch={"commands": [dict(cmd, depth=0)] if cmd else [], "depth_read": 0})


def test_serving_launch_is_parsed_with_its_node_count():
    cmd, _ = _sglang("--nnodes 2 --node-rank 1")
    assert cmd["launcher"] == "sglang" and cmd["serving"]["nodes"] == 2 and cmd["serving"]["multi_node"] is True
    assert cmd["script_models"] == {"--model-path": "deepseek-ai/DeepSeek-V3"}


def test_firewall_on_a_serving_launch_of_two_nodes_is_a_warning():
    _, snap = _sglang("--nnodes 2 --node-rank 1")
    [f] = [f for f in findings_of(snap, "NET005") if f.severity == "warning"]
    assert "firewalld denies incoming connections" in f.title
    assert f.evidence["why_multi_node"] == "2 nodes (sglang --nnodes 2)"


def test_firewall_on_a_serving_launch_of_one_node_is_not_a_warning():
    for extra in ("", "--nnodes 1"):
        _, snap = _sglang(extra)
        assert [f for f in findings_of(snap, "NET005") if f.severity != "info"] == []


# -- SYS004 arm: ranks x the checkpoint's size on disk (its weight files beside config.json) against host memory --

GiB = 1024 ** 3


def test_model_config_facts_sum_the_weight_files_beside_config_json(tmp_path):
    from ddpdoctor.gather import Sources
    from ddpdoctor.gather.launch import model_config_facts

    model = tmp_path / "Llama-2-70b-hf"
    model.mkdir()
    (model / "config.json").write_text('{"torch_dtype": "float16", "num_attention_heads": 64}')
    for i, size in ((1, 3000), (2, 1000)):  # sparse: sizes without writing data
        with open(model / f"model-0000{i}-of-00002.safetensors", "wb") as fh:
            fh.truncate(size)
    (model / "model.safetensors.index.json").write_text('{"metadata": {"total_size": 4000}}')
    (model / "pytorch_model-00001-of-00001.bin").write_bytes(b"x" * 10)  # safetensors first, as transformers loads
    [fact] = model_config_facts(Sources(), {"--model_name_or_path": str(model)}, None)
    assert (fact["weights_bytes"], fact["weights_files"]) == (4000, 2)
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "config.json").write_text("{}")
    [bare] = model_config_facts(Sources(), {"--model_name_or_path": str(tmp_path / "empty")}, None)
    assert "weights_bytes" not in bare


def _loading(size, available, env=None, nproc=8):
    env = dict({"TORCHELASTIC_RUN_ID": "x", "RANK": "0", "WORLD_SIZE": str(nproc), "LOCAL_RANK": "0",
                "LOCAL_WORLD_SIZE": str(nproc), "GROUP_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"},
               **(env or {}))
    cmd = {"launcher": "deepspeed", "options": {"num_gpus": str(nproc)}, "program": "train.py", "depth": 1,
           "script_models": {"--model_name_or_path": "/models/Llama-2-70b-hf"},
           "model_configs": [{"option": "--model_name_or_path", "path": "/models/Llama-2-70b-hf",
                              "config": "/models/Llama-2-70b-hf/config.json", "weights_bytes": size,
                              "weights_files": 15}]}
    return make_snapshot(env=env, host={"memory": {"total_bytes": 256 * GiB, "available_bytes": available}},
                         launch={"commands": [cmd], "depth_read": 1})


def test_eight_ranks_loading_a_138_gib_checkpoint_on_a_256_gib_host_is_named():
    [f] = findings_of(_loading(138 * GiB, 248 * GiB), "SYS004")
    assert f.severity == "warning" and "8 local rank(s) each loading the 138.0 GiB checkpoint" in f.title
    assert "MemAvailable" in f.title and f.evidence["needed_bytes"] == 8 * 138 * GiB
    assert f.fix.startswith("FSDP_CPU_RAM_EFFICIENT_LOADING=true")


def test_checkpoint_copies_quiet_when_they_fit_or_one_process_loads():
    assert findings_of(_loading(13 * GiB, 248 * GiB), "SYS004") == []  # 8 x 13 GiB fit
    assert findings_of(_loading(138 * GiB, 248 * GiB, env={"FSDP_CPU_RAM_EFFICIENT_LOADING": "true"}), "SYS004") == []


# -- NET002 arm: a torchrun command of several nodes left to the parser's defaults (torch/distributed/run.py:
# --rdzv-endpoint default '', read as localhost; --master-addr default 127.0.0.1) --

def _launch(argv: str):
    from ddpdoctor.facts.launch import parse_command

    words = argv.split()
    return make_snapshot(env={}, cmdline=words, launch={"commands": [dict(parse_command(words), depth=0)],
                                                        "depth_read": 0})


def _net002(argv: str) -> list:
    return [f for f in findings_of(_launch(argv), "NET002") if f.severity != "info"]


def test_two_nodes_with_c10d_and_no_endpoint_or_static_and_no_master_addr_are_named():
    [c10d] = _net002("torchrun --nnodes 2 --nproc_per_node 4 --rdzv_backend c10d t.py")
    assert "--rdzv-endpoint not given" in c10d.title and "2 nodes" in c10d.title
    [static] = _net002("torchrun --nnodes 2 --nproc_per_node 4 t.py")
    assert "without --master-addr" in static.title and "127.0.0.1" in static.title


def test_rendezvous_defaults_quiet_on_one_node_or_with_an_address_given():
    assert _net002("torchrun --nnodes 1 --nproc_per_node 4 t.py") == []
    assert _net002("torchrun --nproc_per_node 4 --rdzv_backend c10d t.py") == []
    assert _net002("torchrun --nnodes 2 --nproc_per_node 4 --master_addr node0 --master_port 29500 t.py") == []
    assert _net002("torchrun --nnodes 2 --nproc_per_node 4 --rdzv_backend c10d --rdzv_endpoint node0:29400 t.py") == []


# -- PKG016 arm: the cuDNN a pytorch-channel conda build of torch was built with, from its build string
# (pytorch/builder conda/build_pytorch.sh: py3.9_cuda11.3_cudnn8.3.2_0) against a cuDNN ahead of it in LD_LIBRARY_PATH --

def _conda_torch(ld_version, builds=("py3.9_cuda11.3_cudnn8.3.2_0",), torch="1.12.1"):
    return make_snapshot(packages={
        "torch": torch, "nvidia-cudnn-cu11": None, "nvidia-cudnn-cu12": None, "torch_build": {"cuda": "11.3", "hip": None},
        "torch_installs": {"conda": [f"pytorch-{torch}"], "conda_builds": list(builds)},
        "ld_cuda_libs": [{"dir": "/usr/local/cuda/lib64", "name": "libcudnn.so.8", "version": ld_version}]})


def test_conda_build_string_names_the_cudnn():
    from ddpdoctor.facts.gpu_versions import conda_build_cudnn

    assert conda_build_cudnn(["py3.9_cuda11.3_cudnn8.2.0_0"]) == "8.2.0"
    assert conda_build_cudnn(["py3.10_cuda11.8_cudnn8.7.0_0"]) == "8.7.0"
    assert conda_build_cudnn(["py3.9_cpu_0", "cuda112py39h4e14dd4_0"]) is None  # a CPU build; conda-forge's names none


def test_an_older_cudnn_ahead_of_a_conda_torch_is_refused():
    [f] = findings_of(_conda_torch("8.2.1"), "PKG016")
    assert f.severity == "warning" and "conda's torch 1.12.1 was built with (8.3.2): torch refuses it" in f.title
    assert f.evidence["from"] == "conda build string"


def test_a_cudnn_torch_accepts_or_no_build_string_is_not_a_warning():
    assert findings_of(_conda_torch("8.4.1"), "PKG016") == []  # same major, newer minor: accepted
    assert [f for f in findings_of(_conda_torch("8.2.1", builds=("py3.9_cpu_0",)), "PKG016")
            if f.severity != "info"] == []


# -- SYS002's title in the words the user sees: the EMFILE text ("[Errno 24] Too many open files") --

def test_open_file_limit_title_names_the_error_the_user_sees():
    [f] = findings_of(make_snapshot(host={"rlimits": {"RLIMIT_NOFILE": {"soft": 1024, "hard": 1048576}}}), "SYS002")
    assert "Too many open files" in f.title and "ulimit -n" in f.title
    assert findings_of(make_snapshot(host={"rlimits": {"RLIMIT_NOFILE": {"soft": 65536, "hard": 1048576}}}),
                       "SYS002") == []
