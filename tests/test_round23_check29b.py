"""check29b (issue 26, round 23): ENV/launch classes, each with a trigger and a quiet fixture.
Pure: snapshots are built by the factory over recorded facts; no process is started."""
from __future__ import annotations

from factory import findings_of, make_snapshot

from ddpdoctor.facts.launchers import deepspeed_checks_included_slots, deepspeed_resource_filter

# -- ENV021: a `deepspeed` launch against the runner's resource pool (data/launchers.json deepspeed_resource_filter,
# deepspeed/launcher/runner.py parse_resource_filter @edaa7221; included slots as device indices from 0.15.2, #6530) --


def _ds(options, hostfile=("absent",), version="0.9.2", n=2, hostname="work1", env=None):
    host = {"hostname": hostname}
    if hostfile != ("absent",):
        host["deepspeed_hostfile"] = hostfile
    return make_snapshot(env=env or {}, host=host, packages={"deepspeed": version},
                         gpus={"devices": [{"index": i} for i in range(n)]},
                         launch={"commands": [{"launcher": "deepspeed", "options": options, "program": "train.py",
                                               "depth": 0}], "depth_read": 0})


HF = {"path": "/job/hostfile", "hosts": {"work1": 2, "work2": 2}, "errors": []}


def test_the_table_gives_the_release_that_took_included_slots_as_devices():
    table = deepspeed_resource_filter()
    assert table["slots_from_include_since"] == "0.15.2"
    assert all(src.get("commit") and len(src["commit"]) == 40 for src in table["sources"])
    assert deepspeed_checks_included_slots("0.15.1") is True
    assert deepspeed_checks_included_slots("0.16.4") is False
    assert deepspeed_checks_included_slots(None) is None


def test_a_slot_beyond_another_hosts_slots_in_the_hostfile_stops_an_old_runner():
    [f] = findings_of(_ds({"include": "work2:2,3"}, hostfile=HF), "ENV021")
    assert f.severity == "error" and "slot 2 on work2" in f.title and "slots=2" in f.title
    assert "No slot '2' specified on host 'work2'" in f.detail and "host:work2" in f.subjects
    # from 0.15.2 the runner takes the slots as device indices: a warning (slots= may understate the host)
    [g] = findings_of(_ds({"include": "work2:2,3"}, hostfile=HF, version="0.16.4"), "ENV021")
    assert g.severity == "warning" and "CUDA_VISIBLE_DEVICES" in g.title


def test_slots_within_the_hostfile_are_quiet():
    assert findings_of(_ds({"include": "work1:0,1@work2:1"}, hostfile=HF), "ENV021") == []
    assert findings_of(_ds({"hostfile": "/job/hostfile"}, hostfile=HF), "ENV021") == []


def test_a_host_the_pool_lacks_stops_the_launch():
    [f] = findings_of(_ds({"include": "work3:0"}, hostfile=HF), "ENV021")
    assert f.severity == "error" and "work3" in f.title and "Hostname 'work3' not found in hostfile" in f.detail
    # no hostfile gathered (None: the gatherer found none) and none named: the pool is localhost only
    [g] = findings_of(_ds({"include": "work1:0"}, hostfile=None), "ENV021")
    assert "localhost" in g.title and g.severity == "error"
    assert findings_of(_ds({"include": "localhost:0,1"}, hostfile=None), "ENV021") == []


def test_num_gpus_with_include_is_refused_and_num_gpus_above_slots_warns():
    [f] = findings_of(_ds({"include": "localhost:0", "num_gpus": "1"}, hostfile=None), "ENV021")
    assert f.severity == "error" and "Cannot specify num_nodes/gpus with include/exclude" in f.detail
    [g] = findings_of(_ds({"num_gpus": "4"}, hostfile=HF), "ENV021")
    assert g.severity == "warning" and "--num_gpus 4" in g.title and "slots=2" in g.title
    assert findings_of(_ds({"num_gpus": "2"}, hostfile=HF), "ENV021") == []


# -- ENV011: a task's torch variables against its srun ids (RANK/SLURM_PROCID, LOCAL_RANK/SLURM_LOCALID) as ONE finding,
# whatever tells the GPUs the task sees (CUDA_VISIBLE_DEVICES, SLURM's node count, typed `a100:4`, NVML); ENV007 no
# longer reports RANK vs SLURM_PROCID beside it --
STEP = {"SLURM_JOB_ID": "77", "SLURM_STEP_ID": "0", "SLURM_NNODES": "1", "SLURM_JOB_NUM_NODES": "1", "SLURM_NODEID": "0",
        "SLURM_JOB_NODELIST": "gpu01", "SLURM_NTASKS": "4", "SLURM_NTASKS_PER_NODE": "4", "SLURM_PROCID": "2",
        "SLURM_LOCALID": "2", "MASTER_ADDR": "gpu01", "MASTER_PORT": "29500", "WORLD_SIZE": "4"}


def _env011(**env):
    return findings_of(make_snapshot(env={k: v for k, v in {**STEP, **env}.items() if v is not None}), "ENV011")


def test_rank_and_local_rank_exported_once_are_one_finding_not_env007():
    [f] = _env011(RANK="0", LOCAL_RANK="0", SLURM_GPUS_ON_NODE="4")
    assert f.severity == "error" and "RANK=0 but SLURM_PROCID=2" in f.title and "LOCAL_RANK=0 but SLURM_LOCALID=2" in f.title
    assert {"RANK", "SLURM_PROCID", "LOCAL_RANK", "SLURM_LOCALID"} <= set(f.subjects)
    snap = make_snapshot(env={**STEP, "RANK": "0", "LOCAL_RANK": "0", "SLURM_GPUS_ON_NODE": "4"})
    assert [g for g in findings_of(snap, "ENV007") if "SLURM_PROCID" in g.title] == []


def test_local_rank_off_is_judged_whatever_tells_the_gpus():
    for gpus in ({"CUDA_VISIBLE_DEVICES": "0,1,2,3"}, {"SLURM_GPUS_PER_NODE": "a100:4"}, {"SLURM_JOB_GPUS": "0,1,2,3"}):
        [f] = _env011(LOCAL_RANK="0", RANK="2", **gpus)
        assert f.severity == "error" and "cuda:0, not its own cuda:2" in f.title, gpus
    [w] = _env011(LOCAL_RANK="0", RANK="2")  # GPUs not known: a warning, said as a condition
    assert w.severity == "warning" and "if the tasks share" in w.title
    # LOCAL_RANK=$SLURM_PROCID on the second node: a GPU the task does not have
    [e] = _env011(SLURM_NNODES="2", SLURM_JOB_NUM_NODES="2", SLURM_NODEID="1", SLURM_NTASKS="8", SLURM_PROCID="5",
                  SLURM_LOCALID="1", SLURM_GPUS_ON_NODE="4", RANK="5", LOCAL_RANK="5", WORLD_SIZE="8")
    assert e.severity == "error" and "cuda:5 does not exist" in e.title


def test_per_task_binding_and_matching_ids_are_quiet():
    assert _env011(LOCAL_RANK="0", RANK="2", CUDA_VISIBLE_DEVICES="2") == []  # srun binds one GPU: cuda:0 is its own
    assert _env011(LOCAL_RANK="2", RANK="2", SLURM_GPUS_ON_NODE="4") == []
    assert _env011(LOCAL_RANK="0", RANK="0", SLURM_PROCID="0", SLURM_LOCALID="0", SLURM_GPUS_ON_NODE="4") == []


# -- ENV017 / GPU016: one visible GPU and several local ranks counted from the launch command this shell runs: its
# ranks all inherit this CUDA_VISIBLE_DEVICES (torchrun passes the agent's environment to its workers), so it is
# not a per-rank binding (facts.ranks.ranks_inherit_this_environment) --


def _launch(cmd, env, gpus=None):
    from ddpdoctor.facts.launch import parse_command

    parsed = dict(parse_command(cmd), depth=1)
    extra = {"gpus": gpus} if gpus is not None else {}
    return make_snapshot(env=env, launch={"commands": [parsed], "depth_read": 1}, **extra)


def test_one_visible_gpu_under_a_launch_from_this_shell_is_every_ranks():
    from ddpdoctor.facts.ranks import ranks_inherit_this_environment

    snap = _launch(["torchrun", "--nproc-per-node=2", "train.py"], {"CUDA_VISIBLE_DEVICES": "3"})
    assert ranks_inherit_this_environment(snap)
    [f] = findings_of(snap, "ENV017")  # no NVML facts: ENV017 judges it
    assert f.severity == "error" and "2 local ranks" in f.title and "names 1 device" in f.title
    four = {"devices": [{"index": i, "name": "NVIDIA A100-SXM4-80GB"} for i in range(4)]}
    [g] = [x for x in findings_of(_launch(["torchrun", "--nproc-per-node=2", "train.py"], {"CUDA_VISIBLE_DEVICES": "3"},
                                          gpus=four), "GPU016") if "visible GPU" in x.title]
    assert g.severity == "error" and "2 local ranks but only 1 visible" in g.title


def test_one_visible_gpu_in_a_rank_or_one_rank_is_quiet():
    from ddpdoctor.facts.ranks import ranks_inherit_this_environment

    # check30b: a torchrun worker whose agent is not its parent (a wrapper between them may bind per rank); a worker
    # that is the agent's own child inherits the agent's list (tests/test_round24_check30b.py)
    rank = make_snapshot(env={"CUDA_VISIBLE_DEVICES": "3", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "RANK": "1",
                              "WORLD_SIZE": "2", "TORCHELASTIC_RUN_ID": "x"},
                         launch={"commands": [{"launcher": "torchrun", "options": {"nproc_per_node": "2"},
                                               "program": "wrap.sh", "depth": 2}], "depth_read": 2})
    assert not ranks_inherit_this_environment(rank) and findings_of(rank, "ENV017") == []  # binding per rank: may be
    assert findings_of(_launch(["torchrun", "--nproc-per-node=1", "train.py"], {"CUDA_VISIBLE_DEVICES": "3"}),
                       "ENV017") == []


# -- ENV025: a launcher's count option given a value its parser refuses (data/launchers.json launch_count_options:
# torch/distributed/run.py determine_local_world_size / parse_min_max_nnodes, accelerate and deepspeed argparse
# type=int); a typed Slurm GPU count ([type:]<number>) named as such --


def test_a_typed_slurm_gpu_count_as_nproc_per_node_stops_torchrun():
    [f] = findings_of(_launch(["torchrun", "--nproc_per_node=a100:4", "train.py"], {}), "ENV025")
    assert f.severity == "error" and "'a100:4'" in f.title and "--nproc-per-node" in f.title
    assert "Unsupported nproc_per_node value: a100:4" in f.detail and "typed Slurm GPU count" in f.detail
    assert "##*:" in f.fix and f.evidence["typed_slurm_count"] is True
    [g] = findings_of(_launch(["accelerate", "launch", "--num_processes", "$NGPUS", "train.py"], {}), "ENV025")
    assert "invalid int value: '$NGPUS'" in g.detail and g.evidence["typed_slurm_count"] is False
    [h] = findings_of(_launch(["deepspeed", "--num_gpus", "h100:8", "train.py"], {}), "ENV025")
    assert "--num_gpus/--num_accelerators: invalid int value" in h.detail


def test_counts_the_launchers_read_are_quiet():
    for cmd in (["torchrun", "--nproc_per_node=4", "--nnodes=1:2", "train.py"],
                ["torchrun", "--nproc-per-node", "gpu", "train.py"],
                ["torchrun", "--nproc-per-node", "npu", "train.py"],  # an out-of-tree backend's name: torchrun takes it
                ["accelerate", "launch", "--num_processes", "8", "--num_machines", "2", "train.py"],
                ["deepspeed", "--num_gpus", "2", "train.py"]):
        assert findings_of(_launch(cmd, {}), "ENV025") == [], cmd


# -- NET007: NCCL_NET naming NCCL's socket transport on a multi-node job whose host has RDMA devices (NCCL compares
# NCCL_NET with each net's name by strcasecmp: src/plugin/net.cc @5067397c; names in data/settings.json NCCL_NET) --
RDMA = {"rdma_devices": ["mlx5_0", "mlx5_1"], "net_plugins": []}
TWO_NODES = {"RANK": "8", "WORLD_SIZE": "16", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "8", "GROUP_RANK": "1",
             "GROUP_WORLD_SIZE": "2", "TORCHELASTIC_RUN_ID": "x", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}


def _net007(env):
    return [f for f in findings_of(make_snapshot(env=env, pci=RDMA), "NET007") if "NCCL_NET" in f.title]


def test_nccl_net_socket_across_hosts_with_rdma_warns():
    [f] = _net007({**TWO_NODES, "NCCL_NET": "socket"})  # any case: strcasecmp
    assert f.severity == "warning" and "TCP sockets" in f.title and "mlx5_0" in f.title
    assert list(f.subjects) == ["NCCL_NET"] and f.fix.startswith("unset NCCL_NET")


def test_nccl_net_ib_or_one_node_is_quiet():
    assert _net007({**TWO_NODES, "NCCL_NET": "IB"}) == []
    one = {**TWO_NODES, "WORLD_SIZE": "8", "RANK": "0", "GROUP_RANK": "0", "GROUP_WORLD_SIZE": "1",
           "MASTER_ADDR": "127.0.0.1", "NCCL_NET": "Socket"}
    assert _net007(one) == []


# -- PKG010 (data only, plus the `arch` condition in facts.known_defects): NCCL 2.28.9-2.29.2's proxy CAS loop hangs on
# ARM (NVIDIA/nccl v2.29.3-1 release commit 25368a7f; the loop came with v2.28.9-1, dbc86fd0) --
ARM = "Linux-6.8.0-1015-nvidia-64k-aarch64-with-glibc2.39"


def _cas(nccl, platform):
    snap = make_snapshot(host={"platform": platform}, packages={"torch": "2.10.0", "nvidia-nccl-cu12": nccl})
    return [f for f in findings_of(snap, "PKG010") if "hang on ARM" in f.title or "proxy" in (f.detail or "")]


def test_nccl_2_29_2_on_arm_is_the_proxy_cas_hang():
    [f] = _cas("2.29.2", ARM)
    assert f.severity == "warning" and "NCCL 2.29.2" in f.title and "25368a7f" in f.detail and "2.29.3" in f.fix
    assert f.evidence["defect"] == "nccl-2.28.9-2.29.2-proxy-cas-hang-arm"
    assert _cas("2.28.9", ARM)


def test_fixed_release_older_release_and_x86_are_quiet():
    assert _cas("2.29.3", ARM) == [] and _cas("2.28.7", ARM) == []
    assert _cas("2.29.2", "Linux-5.15.0-105-generic-x86_64-with-glibc2.35") == []
    assert _cas("2.29.2", None) == []  # platform not recorded: a platform defect is not assumed
