"""Batch 19's classes (issue 26): a node rank left in a shell that starts its own ranks (ENV004), MASTER_ADDR outside
the Slurm job's nodes (ENV011), NCCL_GRAPH_FILE left on (SET004), NCCL too old for the GPU (PKG003), and a multi-node
job NCCL can only run over sockets (NET007)."""
from factory import findings_of, make_snapshot

from ddpdoctor.facts.slurm import expand_hostlist

H100 = {"devices": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "cuda_capability": [9, 0]},
                    {"index": 1, "name": "NVIDIA H100 80GB HBM3", "cuda_capability": [9, 0]}]}


def stray(snap):
    return [f for f in findings_of(snap, "ENV004") if "rank 0 would be on this host" in f.title]


def test_env004_node_rank_left_in_a_shell_that_spawns_its_own_ranks():
    # CompVis/taming-transformers#12: NODE_RANK set, Lightning started by `python main.py`, hangs at init
    [f] = stray(make_snapshot(env={"NODE_RANK": "1"}))
    assert f.severity == "warning" and "unset NODE_RANK" in f.fix and "127.0.0.1" in f.title
    assert stray(make_snapshot(env={"NODE_RANK": "1", "MASTER_ADDR": "127.0.0.1"}))


def test_env004_quiet_for_node_0_a_remote_master_or_a_launcher():
    assert not stray(make_snapshot(env={"NODE_RANK": "0"}))
    remote = make_snapshot(env={"NODE_RANK": "1", "MASTER_ADDR": "10.0.0.1"})  # factory: resolves, not this host
    assert not stray(remote)
    assert not stray(make_snapshot(env={"NODE_RANK": "1", "LOCAL_RANK": "0"}))  # processes started outside
    assert not stray(make_snapshot(env={"GROUP_RANK": "1", "TORCHELASTIC_RUN_ID": "x", "MASTER_ADDR": "localhost"}))


def test_expand_hostlist_as_scontrol_prints_it():
    assert expand_hostlist("gpu[01-03,07],login1") == ["gpu01", "gpu02", "gpu03", "gpu07", "login1"]
    assert expand_hostlist("queue0-dy-p4d24xlarge-[1-2]") == ["queue0-dy-p4d24xlarge-1", "queue0-dy-p4d24xlarge-2"]
    assert expand_hostlist("n[1-3]-ib") == ["n1-ib", "n2-ib", "n3-ib"]
    assert expand_hostlist("x[a-b]") is None and expand_hostlist("") is None
    assert expand_hostlist("n[1-100000]") is None  # beyond the limit


SLURM = {"SLURM_JOB_ID": "17", "SLURM_JOB_NODELIST": "queue0-dy-p4d24xlarge-[1-2]", "SLURM_NTASKS": "2",
         "SLURM_PROCID": "1", "SLURM_SUBMIT_HOST": "ip-192-168-1-95", "MASTER_PORT": "12234"}


def outside(snap):
    return [f for f in findings_of(snap, "ENV011") if "is not a node of this Slurm job" in f.title]


def test_env011_master_addr_is_the_submit_host_not_a_job_node():
    # aws-samples/aws-hpc-tutorials#448: MASTER_ADDR set to the head node the job was submitted from
    [f] = outside(make_snapshot(env=dict(SLURM, MASTER_ADDR="ip-192-168-1-95")))
    assert f.severity == "warning" and "submitted from" in f.title and "scontrol show hostnames" in f.fix


def test_env011_quiet_for_a_job_node_its_aliases_or_an_address():
    for addr in ("queue0-dy-p4d24xlarge-1", "queue0-dy-p4d24xlarge-1-ib", "queue0-dy-p4d24xlarge-1.cluster.local",
                 "10.0.0.7", "localhost"):
        assert not outside(make_snapshot(env=dict(SLURM, MASTER_ADDR=addr))), addr
    assert not outside(make_snapshot(env={**SLURM, "SLURM_JOB_NODELIST": "", "MASTER_ADDR": "elsewhere"}))


def test_set004_nccl_graph_file_is_a_debugging_override():
    # NVIDIA/nccl#1240: NCCL_GRAPH_FILE from an Azure image, "should never be set in production"
    [f] = findings_of(make_snapshot(env={"NCCL_GRAPH_FILE": "/opt/microsoft/ncv4/graph.xml"}), "SET004")
    assert f.severity == "warning" and "NCCL_GRAPH_FILE" in f.title
    assert not findings_of(make_snapshot(env={"NCCL_TOPO_FILE": "/opt/microsoft/ncv4/topo.xml"}), "SET004")


def test_pkg003_blackwell_needs_nccl_2_25_and_the_wheel_of_torchs_cuda_major():
    b200 = {"devices": [{"index": 0, "name": "NVIDIA B200", "cuda_capability": [10, 0]}]}
    [f] = findings_of(make_snapshot(packages={"nvidia-nccl-cu12": "2.21.5"}, gpus=b200), "PKG003")
    assert "2.25.1" in f.title and "nvidia-nccl-cu12>=2.25.1" in f.fix
    assert not findings_of(make_snapshot(packages={"nvidia-nccl-cu12": "2.26.2"}, gpus=b200), "PKG003")
    # two wheels, none of torch's CUDA major known: not PKG003's to pick (PKG002 judges the overlap)
    assert not findings_of(make_snapshot(packages={"nvidia-nccl-cu11": "2.14.3", "nvidia-nccl-cu12": "2.14.3"},
                                         gpus=H100), "PKG003")


def test_net007_leaves_rdma_turned_off_by_a_setting_to_nccl004():
    env = {"TORCHELASTIC_RUN_ID": "j", "RANK": "8", "LOCAL_RANK": "0", "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8",
           "GROUP_RANK": "1", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500", "NCCL_IB_DISABLE": "1"}
    snap = make_snapshot(env=env, pci={"rdma_devices": ["mlx5_0"]})
    assert not findings_of(snap, "NET007") and findings_of(snap, "NCCL004")  # one finding for one fault
    [f] = findings_of(make_snapshot(env=env, pci={"rdma_devices": []}), "NET007")
    assert f.severity == "info" and "TCP sockets" in f.title
    assert not findings_of(make_snapshot(env=env, pci={"rdma_devices": None}), "NET007")  # not gathered: unknown
