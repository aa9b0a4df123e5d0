"""Every static check: a fixture that triggers it and one that does not (ruff-style: one check per test);
then the cases review found: launchers that name ranks their own way, faults seen by two checks."""
import os

import pytest

from factory import GiB, findings_of, make_snapshot

MiB = 1024 ** 2
TORCHRUN = {"TORCHELASTIC_RUN_ID": "abc", "RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4",
            "GROUP_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "OMP_NUM_THREADS": "1",
            "TORCHELASTIC_RESTART_COUNT": "0", "GROUP_WORLD_SIZE": "1"}
# A NIC enslaved to a bridge: the address is on br0, eno1 has none (DeepSpeedExamples#845's layout).
BRIDGED = [{"name": "lo", "up": True, "addresses": [{"family": "ipv4", "address": "127.0.0.1"}]},
           {"name": "eno1", "up": True, "addresses": []},
           {"name": "br0", "up": True, "addresses": [{"family": "ipv4", "address": "192.168.3.101"}]}]
SLURM_STEP = {"SLURM_JOB_ID": "77", "SLURM_STEP_ID": "0", "SLURM_PROCID": "3", "SLURM_LOCALID": "1",
              "SLURM_NTASKS": "8", "SLURM_NTASKS_PER_NODE": "4", "SLURM_NODEID": "1", "SLURM_JOB_NUM_NODES": "2",
              "SLURM_GPUS_ON_NODE": "4", "RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4",
              "MASTER_ADDR": "node01", "MASTER_PORT": "29400", "OMP_NUM_THREADS": "4"}

ROCE_6_7 = {"mlx5_0:1": {"link_layer": "Ethernet", "state": "4: ACTIVE", "gids": {
    "6": {"gid": "fe80:0000:0000:0000:0a00:27ff:fe00:0006", "type": "IB/RoCE v1"},
    "7": {"gid": "0000:0000:0000:0000:0000:ffff:0a00:0006", "type": "RoCE v2"}}}}

ROCE_LINK_LOCAL = {"mlx5_0:1": {"link_layer": "Ethernet", "state": "4: ACTIVE", "gids": {
    "0": {"gid": "fe80:0000:0000:0000:0ac0:ebff:feda:1cfb", "type": "IB/RoCE v1"},
    "1": {"gid": "fe80:0000:0000:0000:0ac0:ebff:feda:1cfb", "type": "RoCE v2"},
    "2": {"gid": "0000:0000:0000:0000:0000:ffff:c800:d106", "type": "IB/RoCE v1"},
    "3": {"gid": "0000:0000:0000:0000:0000:ffff:c800:d106", "type": "RoCE v2"}}}}

# (check id, snapshot kwargs that trigger it, expected severity, subjects that must appear)
GPUS2 = {"devices": [{"index": 0, "name": "NVIDIA A100-SXM4-80GB", "pci_bus_id": "00000000:07:00.0"}, {"index": 1, "name": "NVIDIA A100-SXM4-80GB", "pci_bus_id": "00000000:0F:00.0"}]}


TORCHRUN_2N = {"TORCHELASTIC_RUN_ID": "x", "RANK": "8", "WORLD_SIZE": "16", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "8",
               "GROUP_RANK": "1", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}
TRIGGERS = [
    ("ENV001", dict(env={"RANK": "0", "WORLD_SIZE": "2"}), "error", {"MASTER_ADDR", "MASTER_PORT"}),
    ("ENV002", dict(env={"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29555", "RANK": "0", "WORLD_SIZE": "2"},
                    network={"listening_tcp_ports": [22, 29555]}), "error", {"MASTER_PORT"}),
    ("ENV002", dict(network={"listening_tcp_ports": [29500]}), "error", set()),
    ("ENV003", dict(env={"RANK": "5", "WORLD_SIZE": "4"}), "error", {"RANK", "WORLD_SIZE"}),
    ("ENV004", dict(env={**TORCHRUN, "RANK": "1", "GROUP_RANK": "1"}), "error", {"RANK", "GROUP_RANK"}),
    ("ENV004", dict(env={"LOCAL_RANK": "4", "LOCAL_WORLD_SIZE": "4"}), "error", {"LOCAL_RANK"}),
    ("ENV005", dict(env={"RANK": "1", "WORLD_SIZE": "4", "MASTER_ADDR": "localhost", "MASTER_PORT": "12355"},
                    cmdline=["python", "-c", "from multiprocessing.spawn import spawn_main; spawn_main()"]),
     "warning", {"LOCAL_RANK", "WORLD_SIZE"}),
    ("ENV006", dict(env={"RANK": "0", "WORLD_SIZE": "4", "MASTER_ADDR": "localhost", "MASTER_PORT": "1"}),
     "warning", {"OMP_NUM_THREADS"}),
    ("ENV006", dict(env={**TORCHRUN, "OMP_NUM_THREADS": "8"}), "warning", {"OMP_NUM_THREADS"}),
    ("ENV006", dict(env={"OMP_NUM_THREADS": "4"},
                    host={"cpu_count": 64, "affinity_count": 64, "usable_cpus": 2, "cgroup": {"version": 2, "quota_cpus": 2.0}}),
     "warning", {"OMP_NUM_THREADS"}),
    ("ENV007", dict(env={**SLURM_STEP, "WORLD_SIZE": "4"}), "error", {"WORLD_SIZE", "SLURM_NTASKS"}),
    ("ENV007", dict(env={**SLURM_STEP, "SLURM_NTASKS_PER_NODE": "1", "SLURM_NTASKS": "2", "WORLD_SIZE": "2",
                         "LOCAL_WORLD_SIZE": "1", "LOCAL_RANK": "0", "SLURM_LOCALID": "0", "RANK": "1", "SLURM_PROCID": "1"}),
     "warning", {"SLURM_NTASKS_PER_NODE"}),
    ("ENV007", dict(env={"SLURM_JOB_ID": "77", "SLURM_NTASKS": "4"}), "info", {"SLURM_NTASKS"}),
    # pytorch/pytorch#153960: torch 2.7.0 + NCCL 2.26 non-blocking communicators under eager init hang at random
    ("PKG010", dict(env=TORCHRUN, packages={"torch": "2.7.0", "nvidia-nccl-cu12": "2.26.2"}), "warning",
     {"pkg:torch", "pkg:nccl", "TORCH_NCCL_USE_COMM_NONBLOCKING"}),
    ("PKG010", dict(env=TORCHRUN, packages={"torch": "2.7.0+cu126"}), "warning", {"pkg:torch"}),  # NCCL not recorded
    # pytorch/pytorch#121944: sbatch --nodes=2 --ntasks=4, `srun torchrun --nnodes=2 --nproc_per_node=2`: 4 agents
    ("ENV007", dict(env={**TORCHRUN, "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2", "LOCAL_RANK": "1", "GROUP_WORLD_SIZE": "2",
                         "SLURM_JOB_ID": "7710", "SLURM_STEP_ID": "0", "SLURM_PROCID": "0", "SLURM_LOCALID": "0",
                         "SLURM_NTASKS": "4", "SLURM_NTASKS_PER_NODE": "2", "SLURM_JOB_NUM_NODES": "2"}),
     "error", {"SLURM_NTASKS", "GROUP_WORLD_SIZE"}),
    ("ENV011", dict(env={**SLURM_STEP, "SLURM_PROCID": "8", "RANK": "8"}), "error", {"SLURM_PROCID", "SLURM_NTASKS"}),
    ("ENV011", dict(env={**SLURM_STEP, "LOCAL_RANK": "0"}), "error", {"LOCAL_RANK", "SLURM_LOCALID"}),
    ("ENV011", dict(env={"SLURM_JOB_ID": "77", "SLURM_NTASKS": "8", "WORLD_SIZE": "4"}), "warning",
     {"WORLD_SIZE", "SLURM_NTASKS"}),
    ("ENV008", dict(env={"CUDA_DEVICE_ORDER": "PCI"}), "warning", {"CUDA_DEVICE_ORDER"}),
    ("ENV009", dict(env={"CUDA_VISIBLE_DEVICES": "0,1,1"}), "error", {"CUDA_VISIBLE_DEVICES"}),
    ("ENV009", dict(env={"CUDA_VISIBLE_DEVICES": "0,1,x,3"}), "error", {"CUDA_VISIBLE_DEVICES"}),
    ("ENV009", dict(env={"CUDA_VISIBLE_DEVICES": ""}), "info", {"CUDA_VISIBLE_DEVICES"}),
    ("ENV010", dict(env={"RANK": "$SLURM_PROCID", "WORLD_SIZE": "2"}), "error", {"RANK"}),
    ("ENV010", dict(env={"MASTER_PORT": "70000"}), "error", {"MASTER_PORT"}),
    ("NET001", dict(env={"NCCL_SOCKET_IFNAME": "eth9"}), "error", {"NCCL_SOCKET_IFNAME", "iface:eth9"}),
    ("NET001", dict(env={"NCCL_SOCKET_IFNAME": "=eth"}), "error", {"NCCL_SOCKET_IFNAME", "iface:eth"}),
    ("NET001", dict(env={"NCCL_SOCKET_IFNAME": "^eth,ib", "GROUP_WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "4",
                         "WORLD_SIZE": "8", "RANK": "1", "LOCAL_RANK": "1", "TORCHELASTIC_RUN_ID": "x",
                         "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29400", "GROUP_RANK": "0"}),
     "warning", {"NCCL_SOCKET_IFNAME", "iface:lo"}),
    ("NET001", dict(env={"GLOO_SOCKET_IFNAME": "eth0,eth9"}), "error", {"GLOO_SOCKET_IFNAME", "iface:eth9"}),
    ("NET001", dict(env={"NCCL_SOCKET_IFNAME": "eth"},
                    network={"interfaces": [{"name": "lo", "up": True, "addresses": []},
                                            {"name": "eth0", "up": False, "addresses": []}]}),
     "error", {"NCCL_SOCKET_IFNAME", "iface:eth0"}),
    ("NET001", dict(env={"NCCL_SOCKET_IFNAME": "eno1"}, network={"interfaces": BRIDGED}),  # eno1 is br0's member
     "error", {"NCCL_SOCKET_IFNAME", "iface:eno1"}),
    ("NET001", dict(env={"GLOO_SOCKET_IFNAME": "eno1"}, network={"interfaces": BRIDGED}),
     "error", {"GLOO_SOCKET_IFNAME", "iface:eno1"}),
    ("NET002", dict(env={"MASTER_ADDR": "no-such-host.invalid"},
                    network={"master_addr": {"host": "no-such-host.invalid", "error": "Name or service not known"}}),
     "error", {"MASTER_ADDR", "host:no-such-host.invalid"}),
    ("NET002", dict(env={**SLURM_STEP, "MASTER_ADDR": "localhost"},
                    network={"master_addr": {"host": "localhost", "addresses": ["127.0.0.1", "::1"]}}),
     "error", {"MASTER_ADDR"}),
    ("NCCL001", dict(env={"NCCL_SOCKET_IFNAMES": "eth0"}), "warning", {"NCCL_SOCKET_IFNAMES"}),
    ("NET003", dict(env={**TORCHRUN, "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8"},
                    network={"interfaces": [
                        {"name": "lo", "up": True, "addresses": [{"family": "ipv4", "address": "127.0.0.1"}]},
                        {"name": "veth3f2a9b1", "up": True, "addresses": [{"family": "ipv4", "address": "169.254.12.7"}]},
                        {"name": "enp65s0f0", "up": True, "addresses": [{"family": "ipv4", "address": "10.0.0.5"}]}]}),
     "warning", {"NCCL_SOCKET_IFNAME", "iface:veth3f2a9b1", "iface:enp65s0f0"}),
    ("NET003", dict(env={"MASTER_ADDR": "192.168.0.91", "MASTER_PORT": "29500", "RANK": "1", "WORLD_SIZE": "2",
                         "NCCL_COMM_ID": "192.168.0.91:27030"}, host={"container": "docker"},
                    network={"interfaces": [
                        {"name": "lo", "up": True, "addresses": [{"family": "ipv4", "address": "127.0.0.1"}]},
                        {"name": "eth0", "up": True, "addresses": [{"family": "ipv4", "address": "172.17.0.3"}]}],
                             "master_addr": {"host": "192.168.0.91", "addresses": ["192.168.0.91"]}}),
     "warning", {"NCCL_SOCKET_IFNAME", "iface:eth0"}),
    ("ENV012", dict(env=TORCHRUN, host={"affinity": [0], "affinity_count": 1},
                    siblings={"ranks": [{"pid": 9, "rank": 0, "local_rank": 0, "cpus": "0"},
                                        {"pid": 10, "rank": 2, "local_rank": 2, "cpus": "0"}]}),
     "warning", {"rank:0", "rank:1", "rank:2"}),
    ("NCCL001", dict(env={"NCCL_FROBNICATE": "1"}), "info", {"NCCL_FROBNICATE"}),
    ("NCCL001", dict(env={"TORCH_NCCL_BLOCKING_WAITS": "1"}), "warning", {"TORCH_NCCL_BLOCKING_WAITS"}),
    ("NCCL002", dict(env={"NCCL_ASYNC_ERROR_HANDLING": "1"}), "warning", {"NCCL_ASYNC_ERROR_HANDLING"}),
    ("NCCL002", dict(env={"TORCH_NCCL_TRACE_BUFFER_SIZE": "2000"}), "warning", {"TORCH_NCCL_TRACE_BUFFER_SIZE"}),
    ("NCCL003", dict(env={"NCCL_DEBUG": "verbose"}), "warning", {"NCCL_DEBUG"}),
    # hiyouga/LlamaFactory#6111: NCCL_IB_HCA names mlx5_*, /sys/class/infiniband is empty, two nodes: NCCL uses sockets
    ("NCCL003", dict(env={**TORCHRUN, "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8", "NCCL_IB_HCA": "mlx5_0,mlx5_1"},
                     pci={"rdma_devices": []}), "warning", {"NCCL_IB_HCA"}),
    ("NCCL003", dict(env={**TORCHRUN, "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8", "NCCL_IB_HCA": "mlx5", "NCCL_NET": "IB"},
                     pci={"rdma_devices": []}), "error", {"NCCL_IB_HCA", "NCCL_NET"}),
    ("NCCL003", dict(env={"NCCL_P2P_DISABLE": "true"}), "warning", {"NCCL_P2P_DISABLE"}),
    # torch raises on it ("The value of TORCH_DISTRIBUTED_DEBUG must be OFF, INFO, or DETAIL.", libtorch_cpu.so): an error
    ("NCCL003", dict(env={"TORCH_DISTRIBUTED_DEBUG": "VERBOSE"}), "error", {"TORCH_DISTRIBUTED_DEBUG"}),
    ("NCCL003", dict(env={"OMP_NUM_THREADS": "auto"}), "warning", {"OMP_NUM_THREADS"}),
    ("NCCL003", dict(env={"NCCL_DEBUG_SUBSYS": "INIT,NETWORK"}), "warning", {"NCCL_DEBUG_SUBSYS"}),
    ("NCCL004", dict(env={"NCCL_P2P_DISABLE": "1", "NCCL_IB_DISABLE": "1"}), "info", {"NCCL_P2P_DISABLE", "NCCL_IB_DISABLE"}),
    ("SYS001", dict(host={"container": "docker", "shm": {"path": "/dev/shm", "exists": True, "size_bytes": 64 * MiB,
                                                         "free_bytes": 64 * MiB}}), "warning", {"path:/dev/shm"}),
    ("SYS001", dict(env=TORCHRUN | {"LOCAL_WORLD_SIZE": "8", "WORLD_SIZE": "8"},
                    host={"shm": {"path": "/dev/shm", "exists": True, "size_bytes": 2 * GiB, "free_bytes": 2 * GiB}}),
     "warning", {"path:/dev/shm"}),
    ("SYS002", dict(host={"rlimits": {"RLIMIT_NOFILE": {"soft": 1024, "hard": 1048576}}}), "warning", set()),
    # NVIDIA/nccl-tests#206: ulimit -l 8192 (KB) with Mellanox HCAs
    ("SYS003", dict(host={"rlimits": {"RLIMIT_MEMLOCK": {"soft": 8 * MiB, "hard": 8 * MiB}}},
                    pci={"rdma_devices": ["mlx5_0", "mlx5_1"]}), "warning", {"rdma:mlx5_0"}),
    # mosaicml/llm-foundry#336: two 8-GPU nodes with no RDMA device, NCCL over sockets
    ("NET007", dict(env={**TORCHRUN, "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8"}, pci={"rdma_devices": []}),
     "info", set()),
    # pytorch/pytorch#73380: Volcano's host.subdomain endpoint for a pod named host, torch 1.10
    ("NET008", dict(env={"PET_RDZV_BACKEND": "c10d", "PET_RDZV_ENDPOINT": "sh-0-0.sh:29400"},
                    packages={"torch": "1.10.0"},
                    network={"hostname": "sh-0-0", "own_hostname": {"host": "sh-0-0", "addresses": ["10.0.0.5"]},
                             "rdzv_endpoint": {"host": "sh-0-0.sh", "addresses": ["10.0.0.5"]}}),
     "warning", {"PET_RDZV_ENDPOINT", "host:sh-0-0.sh"}),
    # round 10 (issue 26, left by round 9): NCCL_TOPO_FILE / NCCL_GRAPH_FILE absent, or for another machine
    # (NVIDIA/nccl src/graph/xml.cc: a missing topology file is skipped at INFO, a missing graph file fails init)
    ("NCCL006", dict(env={"NCCL_TOPO_FILE": "/opt/microsoft/ndv4-topo.xml"},
                     nccl_files=[{"name": "NCCL_TOPO_FILE", "path": "/opt/microsoft/ndv4-topo.xml", "exists": False,
                                  "readable": False, "parsed": False, "gpu_bus_ids": [], "gpu_devs": []}]),
     "warning", {"env:NCCL_TOPO_FILE", "path:/opt/microsoft/ndv4-topo.xml"}),
    ("NCCL006", dict(env={"NCCL_GRAPH_FILE": "/shared/graph.xml"},
                     nccl_files=[{"name": "NCCL_GRAPH_FILE", "path": "/shared/graph.xml", "exists": False,
                                  "readable": False, "parsed": False, "gpu_bus_ids": [], "gpu_devs": []}]),
     "error", {"env:NCCL_GRAPH_FILE"}),
    ("NCCL006", dict(env={"NCCL_TOPO_FILE": "/etc/topo.xml"}, gpus=GPUS2,
                     nccl_files=[{"name": "NCCL_TOPO_FILE", "path": "/etc/topo.xml", "exists": True, "readable": True,
                                  "parsed": True, "gpu_bus_ids": ["0001:00:00.0", "0002:00:00.0"], "gpu_devs": []}]),
     "warning", {"env:NCCL_TOPO_FILE", "gpu:0", "gpu:1"}),
    ("NCCL006", dict(env={"NCCL_GRAPH_FILE": "/etc/g.xml"}, gpus=GPUS2,
                     nccl_files=[{"name": "NCCL_GRAPH_FILE", "path": "/etc/g.xml", "exists": True, "readable": True,
                                  "parsed": True, "gpu_bus_ids": [], "gpu_devs": [0, 1, 2, 3]}]),
     "warning", {"env:NCCL_GRAPH_FILE"}),
    # luxingcom/aicad-nccl-optimization#1: an image's /etc/nccl.conf kept non-default IB settings
    ("NCCL005", dict(nccl_conf=[{"path": "/etc/nccl.conf", "vars": {"NCCL_IB_USE_INLINE": "1"}}]), "warning",
     {"path:/etc/nccl.conf", "NCCL_IB_USE_INLINE"}),
    ("NCCL005", dict(nccl_conf=[{"path": "/root/.nccl.conf", "vars": {"NCCL_SOCKET_IFNAME ": "eth0"}}]), "warning",
     {"path:/root/.nccl.conf"}),  # spaces around '=': a name no parameter reads
    ("NCCL005", dict(nccl_conf=[{"path": "/etc/nccl.conf", "vars": {"NCCL_SOCKET_IFNAME": "eth0"}}]), "info",
     {"path:/etc/nccl.conf", "NCCL_SOCKET_IFNAME"}),  # NVIDIA/nccl#286: a per-node interface, as recommended
    # huggingface/accelerate#1203: accelerate 0.17.1's multi-GPU launcher refuses torch 1.8.1
    ("PKG004", dict(packages={"accelerate": "0.17.1", "torch": "1.8.1"},
                    host={"accelerate_config": {"path": "c.yaml", "values": {"distributed_type": "MULTI_GPU"}}}),
     "warning", {"pkg:torch", "pkg:accelerate"}),
    ("PKG004", dict(packages={"accelerate": "1.3.0", "torch": "1.13.1"}), "warning", {"pkg:torch"}),  # setup.py floor
    # sunset1995/torch_efficient_distloss#3: a killed JIT build left its lock; every later load waits
    ("SYS006", dict(host={"torch_extensions": {"path": "/root/.cache/torch_extensions",
                                               "locks": [{"path": "py310_cu121/fused_adam/lock", "age_s": 172800}]}}),
     "warning", {"path:/root/.cache/torch_extensions/py310_cu121/fused_adam/lock"}),
    ("SYS006", dict(host={"torch_extensions": {"path": "/x", "locks": [{"path": "e/lock", "age_s": 30}]}}),
     "info", {"path:/x/e/lock"}),  # a build may be running now
    # triton-lang/triton#11512: TRITON_CACHE_DIR on a shared filesystem, ranks on two hosts
    ("SYS007", dict(env={**TORCHRUN, "WORLD_SIZE": "8"}, host={"triton_cache": {
        "path": "/shared/tc", "from": "TRITON_CACHE_DIR", "fstype": "lustre", "mount_point": "/shared", "manager": None}}),
     "warning", {"TRITON_CACHE_DIR"}),
    # foundation-model-stack/fms-hf-tuning#367: HOME=/ in a random-UID pod, Triton kernels of auto-gptq (check18)
    ("SYS010", dict(host={"triton_cache": {"path": "/.triton/cache", "from": "home", "fstype": "overlay", "mount_point": "/",
                                           "manager": None, "writable": False, "writable_at": "/"}},
                    packages={"triton": "2.3.1", "auto-gptq": "0.7.1"}), "warning", {"TRITON_CACHE_DIR"}),
    # cresset-template/cresset#96: a container process pinned to 1 of 32 CPUs
    ("SYS008", dict(host={"cpu_count": 32, "affinity": [0], "affinity_count": 1, "usable_cpus": 1}), "warning", set()),
    # mlcommons/storage#528: RemoveIPC=yes for a regular user
    ("SYS009", dict(host={"uid": 1000, "logind": {"remove_ipc": True, "from": "/etc/systemd/logind.conf"}}),
     "warning", {"path:/dev/shm"}),
    # stanford-crfm/mistral#38: a DeepSpeed hostfile of two hosts and no pdsh on the cluster
    ("PKG006", dict(packages={"deepspeed": "0.12.6"},
                    host={"deepspeed_hostfile": {"path": "/job/hostfile", "hosts": {"n1": 8, "n2": 8}, "errors": []},
                          "launcher_tools": {"found": {}, "missing": ["pdsh"]}}),
     "warning", {"tool:pdsh", "pkg:deepspeed"}),
    ("PKG006", dict(packages={"deepspeed": "0.12.6"},
                    host={"deepspeed_hostfile": {"path": "/job/hostfile", "hosts": {"n1": 8},
                                                 "errors": ["bad entry: n2 lots=8"]}}),
     "warning", {"path:/job/hostfile"}),
    # ultralytics/yolov3#336: torch 1.1.0 on Windows has no torch.distributed
    ("PKG005", dict(host={"os": "Windows"}, torch={"version": "1.1.0", "distributed_available": False}),
     "warning", {"pkg:torch"}),
    ("PKG005", dict(host={"os": "Windows"}, packages={"torch": "1.4.0"}), "warning", {"pkg:torch"}),  # not recorded
    ("PKG005", dict(host={"os": "Windows"}, packages={"torch": "2.9.0a0+rocm7.0.0rc20250728"}), "warning",
     {"pkg:torch"}),  # ROCm/TheRock#1179
    ("PKG005", dict(host={"os": "Windows"}, packages={"torch": "2.4.1+cu121"},
                    gpus={"devices": [{"index": 0, "name": "NVIDIA GeForce RTX 4090"}]}), "warning", {"pkg:torch"}),
    ("PKG005", dict(env={"TORCHELASTIC_RUN_ID": "x", "RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0",
                         "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"},
                    torch={"version": "2.1.0", "distributed_available": False}), "error", {"pkg:torch"}),
    # aim-uofa/AdelaiDet#524: Windows torch has Gloo only, the script asks for NCCL on a GPU machine
    ("PKG005", dict(host={"os": "Windows"}, gpus={"devices": [{"index": 0, "name": "NVIDIA GeForce RTX 3090"}]},
                    torch={"version": "1.10.2", "distributed_available": True, "nccl_available": False,
                           "gloo_available": True}), "warning", {"pkg:torch"}),
    # mila-iqia/milabench#183: NCCL 2.14.3 (torch 2.0.1+cu118) on H100
    ("PKG003", dict(packages={"nvidia-nccl-cu11": "2.14.3"},
                    gpus={"devices": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "cuda_capability": [9, 0]}]}),
     "error", {"pkg:nvidia-nccl-cu11", "gpu:0"}),
    # researchmm/Stark#7: 4 torchrun ranks in a container limited to 8 GiB
    ("SYS004", dict(env=TORCHRUN, host={"container": "docker", "memory": {"total_bytes": 512 * GiB},
                                        "cgroup": {"version": 2, "quota_cpus": None, "memory_max_bytes": 8 * GiB}}),
     "warning", {"cgroup:memory.max"}),
    ("NET005", dict(env={**TORCHRUN, "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8"},
                    network={"firewall": {"tool": "ufw", "active": True, "default_incoming": "deny",
                                          "allowed": ["22/tcp"]}}), "warning", {"firewall:ufw"}),
    ("ENV013", dict(env={"SLURM_JOB_ID": "9", "CUDA_VISIBLE_DEVICES": "0,1"},
                    host={"accelerate_config": {"path": "cfg.yaml", "values": {"num_processes": 8, "gpu_ids": "0,1,2,3"}}}),
     "warning", {"CUDA_VISIBLE_DEVICES"}),
    # aws-samples/aws-do-eks#50: the pod's hostname does not resolve; Gloo falls back to loopback
    ("NET006", dict(env={**TORCHRUN, "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8"},
                    network={"own_hostname": {"host": "pod-1", "error": "[Errno -2] Name or service not known"}}),
     "warning", {"GLOO_SOCKET_IFNAME", "host:pod-1"}),
    ("NET006", dict(env={**TORCHRUN, "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8"},
                    network={"own_hostname": {"host": "node0", "addresses": ["127.0.1.1"]}}),  # Debian's /etc/hosts
     "warning", {"GLOO_SOCKET_IFNAME"}),
    # NVIDIA/nccl#1581: two NICs in one /20 on each node, NCCL_SOCKET_IFNAME picks one of them (check18)
    ("NET020", dict(env={**TORCHRUN, "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8", "NCCL_SOCKET_IFNAME": "enp37s0f0"},
                    network={"interfaces": [
                        {"name": "lo", "up": True, "addresses": [{"family": "ipv4", "address": "127.0.0.1", "netmask": "255.0.0.0"}]},
                        {"name": "eno1", "up": True, "addresses": [{"family": "ipv4", "address": "192.168.3.14", "netmask": "255.255.240.0"}]},
                        {"name": "enp37s0f0", "up": True, "addresses": [{"family": "ipv4", "address": "192.168.5.14", "netmask": "255.255.240.0"}]}]}),
     "warning", {"iface:enp37s0f0", "iface:eno1", "NCCL_SOCKET_IFNAME"}),
    # rwth-i6/returnn#1802: two NCCL wheels install the same libnccl.so.2
    ("PKG002", dict(packages={"nvidia-nccl-cu11": "2.14.3", "nvidia-nccl-cu12": "2.27.3"}), "warning",
     {"pkg:nvidia-nccl-cu11", "pkg:nvidia-nccl-cu12"}),
    # NVIDIA/nccl#718: NCCL_IB_GID_INDEX=5 where this pod's RoCE port has GIDs at 6 and 7 only
    ("NET004", dict(env={"NCCL_IB_GID_INDEX": "5"}, pci={"rdma_devices": ["mlx5_0"], "rdma_ports": ROCE_6_7}),
     "error", {"NCCL_IB_GID_INDEX", "rdma:mlx5_0:1"}),
    # NVIDIA/nccl#769: a forced GID index naming the link-local RoCE v2 GID, two hosts (connect.cc validGid)
    ("NET004", dict(env={**TORCHRUN, "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8", "NCCL_IB_GID_INDEX": "1"},
                    pci={"rdma_devices": ["mlx5_0"], "rdma_ports": ROCE_LINK_LOCAL}),
     "warning", {"NCCL_IB_GID_INDEX", "rdma:mlx5_0:1"}),
    # pytorch/pytorch#139990: torch 2.5 on Windows creates the TCPStore with libuv, which its wheels lack
    ("PKG010", dict(env=TORCHRUN, packages={"torch": "2.5.1"}, host={"os": "Windows"}), "warning", {"pkg:torch", "USE_LIBUV"}),
    # huggingface/accelerate#1848: accelerate 0.21.0's prepare_multi_gpu_env ignores gpu_ids (fixed by #1850 in 0.22.0)
    ("PKG010", dict(packages={"accelerate": "0.21.0"}, host={"accelerate_config": {"path": "~/.cache/huggingface/accelerate/default_config.yaml", "values": {"distributed_type": "MULTI_GPU", "num_processes": 2, "gpu_ids": "6,7"}}}), "warning", {"pkg:accelerate"}),
    # pytorch/pytorch#163063: NCCL_ALGO=NVLS leaves Broadcast/Reduce without Ring (src/graph/tuning.cc, >= 2.17.1)
    ("NCCL003", dict(env={**TORCHRUN, "NCCL_ALGO": "NVLS"}, packages={"nvidia-nccl-cu12": "2.26.2"}), "warning", {"NCCL_ALGO"}),
    ("TOK001", dict(env={"TOKENIZERS_PARALLELISM": "true"}), "error", {"TOKENIZERS_PARALLELISM"}),
    ("TOK001", dict(env={"TOKENIZERS_PARALLELISM": "1"}), "error", {"TOKENIZERS_PARALLELISM"}),
    ("PKG001", dict(packages={"pynvml": "11.5.0"}), "warning", {"pkg:pynvml"}),
    # pytorch/pytorch#193859: a per-user process limit of 400 on a many-core host, OpenMP threads per core
    ("SYS005", dict(env={**TORCHRUN, "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "4", "OMP_NUM_THREADS": "96"},
                    host={"uid": 1000, "rlimits": {"RLIMIT_NPROC": {"soft": 400, "hard": 400}}}), "warning", set()),
    # a pod whose pids.max is nearly used up
    ("SYS005", dict(env={**TORCHRUN, "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "8"},
                    host={"uid": 0, "cgroup": {"version": 2, "quota_cpus": None, "pids_max": 1024,
                                                "pids_current": 1000}}), "warning", set()),
    # NVIDIA/nccl#1422: the VFs' RDMA devices beside the PFs', NCCL_IB_HCA unset
    ("NET010", dict(pci={"rdma_devices": ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"],
                         "rdma_virtual_functions": ["mlx5_2", "mlx5_3"]}), "warning", {"rdma:mlx5_2", "NCCL_IB_HCA"}),
    ("NET010", dict(env={"NCCL_IB_HCA": "mlx5_1"},  # prefix match: mlx5_1 selects mlx5_10 and mlx5_11 too
                    pci={"rdma_devices": ["mlx5_0", "mlx5_1", "mlx5_10", "mlx5_11"],
                         "rdma_virtual_functions": ["mlx5_10", "mlx5_11"]}), "warning", {"rdma:mlx5_10"}),
    # msr-fiddle/pipedream#32: torch 1.1 on one host whose name does not resolve: Gloo had no loopback fallback yet
    # pytorch/gloo#223: rank 0 of hand-set ranks publishes its own routable address; its name maps to 127.0.1.1
    ("NET006", dict(env={"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "10.0.0.5", "MASTER_PORT": "6379"},
                    network={"own_hostname": {"host": "node0", "addresses": ["127.0.1.1"]},
                             "master_addr": {"host": "10.0.0.5", "addresses": ["10.0.0.5"]}}),
     "warning", {"GLOO_SOCKET_IFNAME", "host:node0"}),
    ("NET006", dict(env={"RANK": "0", "WORLD_SIZE": "4", "MASTER_ADDR": "localhost", "MASTER_PORT": "12345"},
                    packages={"torch": "1.1.0"},
                    network={"own_hostname": {"host": "dgx-1.ai", "addresses": [], "error": "Name or service not known"},
                             "master_addr": {"host": "localhost", "addresses": ["127.0.0.1"]}}),
     "warning", {"GLOO_SOCKET_IFNAME", "host:dgx-1.ai"}),
    # NVIDIA/nccl#1113: torch 1.8.1 (NCCL 2.7.8) under WSL 2
    ("PKG007", dict(host={"kernel": "5.15.133.1-microsoft-standard-WSL2"}, packages={"torch": "1.8.1+cu111"}),
     "warning", {"pkg:torch", "pkg:nccl"}),
    ("PKG007", dict(host={"kernel": "5.10.16.3-microsoft-standard-WSL2"}, packages={"torch": "2.1.0", "nvidia-nccl-cu12": "2.9.9"}),
     "warning", {"pkg:nccl"}),
    # ultralytics/yolov5#13099: --master_port 1 as a normal user
    ("ENV015", dict(env={**TORCHRUN, "RANK": "0", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"},
                    host={"uid": 1000, "unprivileged_port_start": 1024, "cap_net_bind_service": False}),
     "error", {"MASTER_PORT"}),
    # NVIDIA/nccl-tests#41: libibverbs in the image, no mlx5 provider for the HCA
    ("NET014", dict(pci={"rdma_devices": ["mlx5_0"], "rdma_drivers": {"mlx5_0": "mlx5_core"},
                         "verbs_providers": {"libibverbs": ["/usr/lib/x86_64-linux-gnu"], "libraries": ["efa"],
                                             "config": ["efa"]}}),
     "warning", {"rdma:mlx5_0", "verbs-provider:mlx5"}),
    # sgl-project/sglang#1427: an image without libibverbs on an InfiniBand cluster: "Failed to open libibverbs.so[.1]"
    ("NET014", dict(env={**TORCHRUN, "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8"},
                    pci={"rdma_devices": ["mlx5_0"], "rdma_drivers": {"mlx5_0": "mlx5_core"},
                         "verbs_providers": {"libibverbs": [], "libraries": [], "config": None, "ld_so_conf": True}}),
     "warning", {"rdma:mlx5_0", "lib:libibverbs"}),
    # NVIDIA/nccl#1125: NCCL 2.19.3 with a USB Ethernet interface among its socket picks
    ("PKG009", dict(packages={"torch": "2.2.0", "nvidia-nccl-cu12": "2.19.3"},
                    network={"interfaces": [{"name": "lo", "up": True, "addresses": [{"family": "ipv4", "address": "127.0.0.1"}]},
                                            {"name": "eno1", "up": True, "bus": "pci", "addresses": [{"family": "ipv4", "address": "10.1.0.5"}]},
                                            {"name": "enx00e04c680001", "up": True, "bus": "usb",
                                             "addresses": [{"family": "ipv4", "address": "192.168.100.2"}]}]}),
     "warning", {"pkg:nccl", "iface:enx00e04c680001"}),
    # NVIDIA/nccl#451: the HCA in sysfs, its /dev/infiniband/uverbs0 not passed into the container
    ("NET013", dict(host={"container": "docker"},
                    pci={"rdma_devices": ["mlx5_0"], "rdma_verbs": {"mlx5_0": {"uverbs": "uverbs0", "present": False}}}),
     "warning", {"rdma:mlx5_0", "path:/dev/infiniband"}),
    # skypilot-org/skypilot#4448: an accelerated-networking VF with only an IPv6 link-local address, kept by NCCL's default
    ("NET003", dict(env={**TORCHRUN, "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8"},
                    network={"interfaces": [{"name": "lo", "up": True, "order": 1, "addresses": [{"family": "ipv4", "address": "127.0.0.1"}]},
                                            {"name": "enP7906s1", "up": True, "order": 2, "addresses": [{"family": "ipv6", "address": "fe80::20d:3aff:fef7:74b2"}]},
                                            {"name": "eth0", "up": True, "order": 3, "addresses": [{"family": "ipv4", "address": "10.0.0.4"}]}]}),
     "warning", {"NCCL_SOCKET_IFNAME", "iface:enP7906s1", "iface:eth0"}),
    # aws/deep-learning-containers#4756: /etc/nccl.conf's NCCL_SOCKET_IFNAME=^docker0 leaves lo first in the kernel's order
    ("NET001", dict(env={**TORCHRUN, "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8"},
                    nccl_conf=[{"path": "/etc/nccl.conf", "vars": {"NCCL_SOCKET_IFNAME": "^docker0"}}],
                    network={"interfaces": [{"name": "lo", "up": True, "order": 1, "addresses": [{"family": "ipv4", "address": "127.0.0.1"}]},
                                            {"name": "ens32", "up": True, "order": 2, "addresses": [{"family": "ipv4", "address": "10.2.0.11"}]}]}),
     "warning", {"NCCL_SOCKET_IFNAME", "iface:lo"}),
    # deepspeedai/DeepSpeed#5818 (0,2) and #1331 (a Slurm allocation 4,5): the runner reads them as slots
    ("ENV016", dict(env={"CUDA_VISIBLE_DEVICES": "0,2"}, packages={"deepspeed": "0.14.4"}),
     "warning", {"env:CUDA_VISIBLE_DEVICES", "pkg:deepspeed"}),
    ("ENV016", dict(env={"SLURM_JOB_ID": "7", "SLURM_PROCID": "0", "SLURM_NTASKS": "1", "CUDA_VISIBLE_DEVICES": "4,5"},
                    packages={"deepspeed": "0.5.0"}),
     "warning", {"env:CUDA_VISIBLE_DEVICES"}),
    # snowflakedb/ArcticTraining#316 (round 9): a setting the runner does not forward to the other host
    ("ENV018", dict(env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}, packages={"deepspeed": "0.17.5"},
                    host={"deepspeed_hostfile": {"path": "/job/hostfile", "hosts": {"a": 8, "b": 8}, "errors": []}}),
     "warning", {"pkg:deepspeed", "PYTORCH_CUDA_ALLOC_CONF"}),
    # deepspeedai/DeepSpeed#4907: a two-host hostfile and no key for passwordless ssh
    ("ENV014", dict(packages={"deepspeed": "0.12.6"},
                    host={"deepspeed_hostfile": {"path": "/job/hostfile", "hosts": {"a": 2, "b": 2}, "errors": []},
                          "ssh": {"client": "/usr/bin/ssh", "keys": [], "agent": False, "config": False}}),
     "warning", {"tool:ssh", "pkg:deepspeed"}),
    ("ENV014", dict(packages={"deepspeed": "0.12.6"},
                    host={"deepspeed_hostfile": {"path": "/job/hostfile", "hosts": {"a": 2, "b": 2}, "errors": []},
                          "ssh": {"client": None, "keys": ["id_rsa"], "agent": False, "config": False}}),
     "warning", {"tool:ssh"}),
    ("ENV014", dict(packages={"deepspeed": "0.12.6"},
                    host={"deepspeed_hostfile": {"path": "/job/hostfile", "hosts": {"a": 2, "b": 2}, "errors": []},
                          "ssh": {"client": "/usr/bin/ssh", "keys": [], "agent": False, "config": True}}),
     "info", {"tool:ssh"}),  # ~/.ssh/config may name another key
    # check2 round 8: a RoCE port with a 169.254/16 GID on a job across hosts (getainode/ainode#89; tests/test_rdma_gid_link_local.py)
    ("NET017", dict(env={"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1", "MASTER_ADDR": "10.0.0.1",
                         "MASTER_PORT": "29500"},
                    pci={"rdma_devices": ["mlx5_0"], "rdma_ports": {"mlx5_0:1": {"link_layer": "Ethernet", "state": "4: ACTIVE",
                         "gids": {"3": {"gid": "0000:0000:0000:0000:0000:ffff:a9fe:0307", "type": "RoCE v2"}}}}}),
     "warning", {"NCCL_IB_HCA", "rdma:mlx5_0:1"}),
    # check2 round 8: an NCCL in LD_PRELOAD older than torch's wheel (pytorch/pytorch#119932; tests/test_nccl_preloaded.py)
    ("PKG011", dict(env={"LD_PRELOAD": "/usr/local/lib/libmsamp_dist.so:/usr/lib/libnccl.so.2.18.3"},
                    packages={"torch": "2.2.0", "nvidia-nccl-cu12": "2.19.3"}),
     "warning", {"env:LD_PRELOAD", "pkg:nvidia-nccl-cu12"}),
    # check12 round 12: DeepSpeed ops pre-built for torch 1.9 under torch 2.1 (tests/test_round12_check.py)
    ("PKG012", dict(packages={"torch": "2.1.2", "deepspeed": "0.9.5", "deepspeed_build": {
        "torch": "1.9", "cuda": "11.1", "hip": None, "installed_ops": ["fused_adam"]}}), "error", {"pkg:deepspeed"}),
    # check2 round 8: a hostfile naming one host still takes the runner's ssh path (deepspeed/launcher/runner.py
    # @ 066d912052b5: multi_node_exec = True once fetch_hostfile returns hosts; ssh check since a773996d, v0.6.1)
    ("ENV014", dict(packages={"deepspeed": "0.12.6"},
                    host={"deepspeed_hostfile": {"path": "/job/hostfile", "hosts": {"a": 2}, "errors": []},
                          "ssh": {"client": None, "keys": [], "agent": False, "config": False}}),
     "warning", {"tool:ssh", "path:/job/hostfile"}),
    # check2 round 7. NET006 on one host (nyu-systems/Grendel-GS#9): torchrun --standalone hands socket.getfqdn() to
    # its workers as MASTER_ADDR (elastic/agent/server/api.py _set_master_addr_port); a name that does not resolve
    ("NET006", dict(network={"hostname": "user", "own_hostname": {"host": "user", "addresses": [],
                             "error": "[Errno -3] Temporary failure in name resolution"}}), "warning", {"host:user"}),
    ("NET006", dict(env={"PET_RDZV_BACKEND": "c10d"},  # a stale /etc/hosts address no interface has
                    network={"own_hostname": {"host": "node0", "addresses": ["10.9.9.9"]}}), "warning", {"host:node0"}),
    # ENV017: only the variable is known (no NVML facts): 2 devices named for 4 local ranks
    ("ENV017", dict(env={**TORCHRUN, "CUDA_VISIBLE_DEVICES": "0,1", "LOCAL_RANK": "3"},
                    gpus={"unavailable": "no NVIDIA driver found (NVML library not loaded)"}),
     "error", {"CUDA_VISIBLE_DEVICES", "LOCAL_WORLD_SIZE"}),
    # SYS004: in a container whose cgroup memory files cannot be read the limit is unknown, said as such
    ("SYS004", dict(env=TORCHRUN, host={"container": "docker", "cgroup": {
        "version": None, "quota_cpus": None, "memory_max_bytes": None, "memory_max_state": "unknown"}}),
     "info", {"cgroup:memory.max"}),
    # check14 round 14
    ("NET018", dict(packages={"deepspeed": "0.13.1"}, host={"deepspeed_hostfile": {"path": "/job/hostfile", "errors": [], "hosts": {"192.168.10.161": 8, "192.168.10.162": 8}}}, network={"hostname": "node1", "interfaces": [{"name": "lo", "up": True, "order": 0, "addresses": [{"family": "ipv4", "address": "127.0.0.1"}]}, {"name": "eth0", "up": True, "order": 1, "addresses": [{"family": "ipv4", "address": "192.168.121.122", "netmask": "255.255.255.0"}]}, {"name": "eth1", "up": True, "order": 2, "addresses": [{"family": "ipv4", "address": "192.168.10.161", "netmask": "255.255.255.0"}]}]}), "warning", {"pkg:deepspeed"}),
    ("NET019", dict(env=TORCHRUN_2N, pci={"rdma_devices": ["mlx5_0"], "rdma_ports": {"mlx5_0:1": {"link_layer": "InfiniBand", "state": "4: ACTIVE", "gids": {}, "counters": {"link_downed": 7, "link_error_recovery": 0}}}}), "warning", {"rdma:mlx5_0:1"}),
    ("NET021", dict(env={"RDMAV_FORK_SAFE": "1"}, pci={"rdma_devices": ["rdmap16s27"], "rdma_drivers": {"rdmap16s27": "efa"}}), "warning", {"RDMAV_FORK_SAFE", "rdma:rdmap16s27"}),  # check33, aws-ofi-nccl doc/efa-env-var.md
    ("NET022", dict(env={**TORCHRUN_2N, "FI_CXI_DISABLE_HOST_REGISTER": "1"}, pci={"cxi_devices": ["cxi0"], "rdma_devices": []}), "warning", {"FI_MR_CACHE_MONITOR", "cxi:cxi0"}),  # check33, HPE Slingshot NCCL note
    ("PKG013", dict(packages={"torch": "2.2.0", "nvidia-nccl-cu12": "2.18.1", "torch_pins": {"nvidia-nccl-cu12": "2.19.3"}}), "warning", {"pkg:nvidia-nccl-cu12"}),
    ("PKG014", dict(packages={"torch": "2.1.2", "deepspeed": "0.12.0", "torch_build": {"cuda": "12.1", "hip": None}, "cuda_toolkit": {"home": "/usr/local/cuda", "from": "/usr/local/cuda", "version": "11.7.1"}}), "warning", {"pkg:cuda-toolkit"}),  # check17
    ("PKG015", dict(packages={"torch": "1.9.0", "torch_build": {"cuda": "11.1", "hip": None}, "conda_cuda": [{"name": "cudatoolkit", "version": "11.0.221", "prefix": "/opt/conda"}]}), "warning", {"pkg:cudatoolkit"}),  # check17b
    ("PKG016", dict(packages={"torch": "2.2.0", "nvidia-cudnn-cu12": "8.9.2.26", "ld_cuda_libs": [{"dir": "/usr/local/cuda/lib64", "name": "libcudnn_cnn_train.so.8", "version": "8.9.7"}]}), "warning", {"env:LD_LIBRARY_PATH"}),  # check17b
    ("PKG017", dict(packages={"torch": "1.0.0"}, host={"glibc": "2.12", "os": "Linux"}), "error", {"pkg:torch", "host:glibc"}),  # check17c
    ("PKG018", dict(packages={"apex": "0.1", "apex_build": {"extensions": [], "from": "RECORD", "has_amp": True}}), "warning", {"pkg:apex"}),  # check18
    ("PKG019", dict(packages={"torch": "2.2.2", "numpy": "2.0.0"}), "warning", {"pkg:numpy", "pkg:torch"}),  # check18
    ("PKG020", dict(packages={"mmcv": "1.0.0", "mmdet": "2.3.0", "mmcv_build": {"ops": False, "dir": "/x/mmcv"}}), "warning", {"pkg:mmcv"}),  # check18
    ("PKG021", dict(packages={"openmp_runtimes": [{"path": "/env/site-packages/torch/lib/libiomp5.so", "kind": "intel", "owner": "torch"}, {"path": "/env/lib/libiomp5.so", "kind": "intel", "owner": "env"}]}), "warning", {"pkg:torch"}),  # check18
    ("PKG022", dict(packages={"torch_installs": {"conda": ["pytorch-0.4.1", "pytorch-nightly-1.0.0.dev20180921"]}}), "warning", {"pkg:torch"}),  # check18
    ("PKG024", dict(packages={"ld_torch_libs": [{"dir": "/home/u/libtorch/lib", "name": "libtorch_cpu.so"}]}), "warning", {"env:LD_LIBRARY_PATH", "pkg:torch"}),  # check18
    ("PKG023", dict(packages={"torch_build": {"cuda": "9.0", "hip": None}, "conda_magma": [{"name": "magma-cuda80", "version": "2.1.0"}]}), "warning", {"pkg:torch", "pkg:magma-cuda80"}),  # check18
    ("PKG025", dict(packages={"torch": "2.6.0", "triton": "3.3.0", "torch_pins": {"triton": "3.2.0"}}), "warning", {"pkg:triton", "pkg:torch"}),  # check18b
    ("ENV020", dict(launch={"commands": [{"launcher": "srun", "options": {}, "depth": 0, "from_script": "train.sh:1", "program_word": "srun", "found": False}], "depth_read": 0}), "error", {"path:train.sh"}),  # check19
    ("ENV022", dict(launch={"commands": [{"launcher": "torchrun", "options": {}, "program": "trian.py", "depth": 0, "program_exists": False, "cwd": "/job"}], "depth_read": 0}), "warning", {"path:trian.py"}),  # lead20
    ("ENV023", dict(env={"SLURM_JOB_ID": "77", "SLURM_STEP_ID": "0", "SLURM_PROCID": "6", "SLURM_LOCALID": "0", "SLURM_NODEID": "3", "SLURM_NTASKS": "7", "SLURM_JOB_NUM_NODES": "4", "SLURM_GPUS_ON_NODE": "2", "SLURM_STEP_TASKS_PER_NODE": "2(x3),1"}), "warning", {"SLURM_STEP_TASKS_PER_NODE", "SLURM_GPUS_ON_NODE"}),  # check22
    ("ENV024", dict(launch={"commands": [{"launcher": "vllm", "options": {}, "depth": 0, "serving": {"engine": "vllm", "model": "./m", "model_option": "serve", "tensor_parallel": 3, "pipeline_parallel": None}, "model_configs": [{"option": "serve", "path": "./m", "config": "./m/config.json", "heads": 32}]}], "depth_read": 0}), "error", {"path:./m/config.json"}),  # check22
    # check29b: a typed Slurm GPU count as torchrun's --nproc-per-node (torch/distributed/run.py determine_local_world_size)
    ("ENV025", dict(launch={"commands": [{"launcher": "torchrun", "options": {"nproc_per_node": "a100:4"}, "program": "train.py", "depth": 0}], "depth_read": 0}),
     "error", {"arg:nproc-per-node"}),
    # check32: dask-cuda's per-worker rotation (rapidsai/dask-cuda dask_cuda/utils.py cuda_visible_devices), dask-cuda#516
    ("ENV026", dict(env={"RANK": "2", "WORLD_SIZE": "4", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "12355",
                         "CUDA_VISIBLE_DEVICES": "2,3,0,1"}), "warning", {"CUDA_VISIBLE_DEVICES", "RANK"}),
    # deepspeedai/DeepSpeed#3624 (check19b, batch 99): --include=work1:2,3 on work1, a host of two GPUs (slots 0,1)
    ("ENV021", dict(host={"hostname": "work1"}, gpus={"devices": [{"index": 0}, {"index": 1}]},
                    launch={"commands": [{"launcher": "deepspeed", "options": {"hostfile": "hostfile", "include": "work1:2,3"}, "program": "training.py", "depth": 0}], "depth_read": 0}),
     "error", {"pkg:deepspeed"}),
    ("SYS011", dict(launch={"commands": [{"launcher": "python", "options": {}, "program": "train.py", "depth": 0, "save_dirs": [{"option": "--output_dir", "path": "/w/out", "checked": "/w/out", "exists": True, "free_bytes": 3221225472, "total_bytes": 536870912000, "largest_checkpoint": "checkpoint-500", "largest_checkpoint_bytes": 13958643712}]}], "depth_read": 0}), "error", {"path:/w/out"}),  # check19
    ("SYS012", dict(host={"rlimits": {"RLIMIT_STACK": {"soft": None, "hard": None}}}, packages={"torch": "2.5.1", "nvidia-nccl-cu12": "2.21.5"}), "warning", set()),  # check33, NVIDIA/nccl 'Stack size' 
    ("PKG026", dict(packages={"torch": "2.4.1", "libstdcxx": {"path": "/opt/conda/lib/libstdc++.so.6", "from": "RUNPATH", "glibcxx": "3.4.29", "cxxabi": "1.3.13"}, "extension_cxx_needs": [{"package": "gymtorch", "file": "/root/.cache/torch_extensions/py38_cu121/gymtorch/gymtorch.so", "glibcxx": "3.4.32", "cxxabi": "1.3.14"}]}), "error", {"pkg:gymtorch", "lib:libstdc++"}),  # check19
    ("PKG027", dict(packages={"torch": "2.0.1", "torch_mkl": {"lib": "/opt/conda/lib/python3.10/site-packages/torch/lib/libtorch_cpu.so", "undefined": ["iJIT_NotifyEvent"], "mkl_libs": ["/opt/conda/lib/libmkl_core.so.2"], "unresolved": [], "exported": []}}), "error", {"pkg:torch", "pkg:mkl"}),  # check19
    ("PKG028", dict(packages={"torch": "2.2.0", "nvidia-nccl-cu12": "2.19.3", "torch_pins": {"nvidia-nccl-cu12": "2.19.3"}, "torch_nccl": {"needed": "libnccl.so.2", "search": "RUNPATH", "from": "LD_LIBRARY_PATH", "path": "/usr/local/nccl/lib/libnccl.so.2", "real_name": "libnccl.so.2.18.3", "version": "2.18.3"}}), "error", {"pkg:torch", "pkg:nvidia-nccl-cu12", "LD_LIBRARY_PATH"}),  # check20
    ("PKG029", dict(packages={"torch": "1.6.0", "torch_build": {"cuda": "10.2", "hip": None}, "extension_cudart": [{"package": "det3d", "file": "det3d/ops/iou3d_nms_cuda.so", "needed": "libcudart.so.9.0", "version": "9.0"}]}), "error", {"pkg:det3d", "pkg:torch"}),  # check20, CenterPoint#102
    ("PKG030", dict(packages={"transformers": "4.46.0", "accelerate": "0.21.0", "transformers_floors": {"accelerate": "0.26.0", "from": "transformers/utils/import_utils.py"}}), "warning", {"pkg:accelerate", "pkg:transformers"}),  # check33
    ("PKG012", dict(packages={"torch": "2.6.0", "torch_extensions": [{"package": "flash_attn", "file": "flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so", "missing": ["_ZN3c105ErrorC2ENS_14SourceLocationESs"], "missing_count": 1, "undefined_count": 40}]}), "error", {"pkg:flash_attn", "pkg:torch"}),  # check17c
    ("ENV019", dict(packages={"torch": "2.1.0"}, lint={"scripts": ["train.py"], "files": [], "findings": [], "rules_run": 0, "facts": {"local_rank_args": [{"flags": ["--local_rank"], "path": "train.py", "line": 3}], "parse_known_args": False}}), "warning", {"path:train.py"}),
]

# (check id, snapshot kwargs that must NOT trigger it)
CLEAN = [
    ("ENV001", dict()), ("ENV001", dict(env=TORCHRUN)), ("ENV001", dict(env={"WORLD_SIZE": "1"})),
    ("ENV002", dict(env=TORCHRUN, network={"listening_tcp_ports": [29500]})),
    ("ENV002", dict(env={"MASTER_ADDR": "n0", "MASTER_PORT": "29555", "RANK": "1", "WORLD_SIZE": "2"},
                    network={"listening_tcp_ports": [29555]})),
    ("ENV002", dict(network={"listening_tcp_ports": [22, 8080]})),
    # round 24 (runcol24): inside a rank whose group is up (init_process_group(rank=...), no RANK in the env)
    ("ENV002", dict(env={"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29564"}, network={"listening_tcp_ports": [29564]},
                    runtime={"distributed": {"initialized": True, "rank": 1, "world_size": 2}})),
    ("ENV003", dict(env={"RANK": "3", "WORLD_SIZE": "4"})), ("ENV003", dict()),
    ("ENV004", dict(env=TORCHRUN)), ("ENV004", dict(env=SLURM_STEP)),
    ("ENV004", dict(env={**TORCHRUN, "GROUP_RANK": "1", "RANK": "5", "WORLD_SIZE": "8", "GROUP_WORLD_SIZE": "2"})),
    ("ENV005", dict(env=TORCHRUN)), ("ENV005", dict(env=SLURM_STEP)), ("ENV005", dict()),
    ("ENV005", dict(env={"WORLD_SIZE": "1", "RANK": "0"})),
    ("ENV006", dict()), ("ENV006", dict(env=TORCHRUN)), ("ENV006", dict(env=SLURM_STEP)),
    ("ENV006", dict(env={**TORCHRUN, "OMP_NUM_THREADS": "4"})),
    ("ENV007", dict()), ("ENV007", dict(env=SLURM_STEP)),
    ("ENV011", dict()), ("ENV011", dict(env=SLURM_STEP)), ("ENV011", dict(env=TORCHRUN)),
    ("ENV011", dict(env={"SLURM_JOB_ID": "77", "SLURM_NTASKS": "8", "WORLD_SIZE": "8"})),
    ("ENV011", dict(env={**SLURM_STEP, "SLURM_NTASKS_PER_NODE": "1", "LOCAL_RANK": "0"})),  # one task per node
    ("ENV007", dict(env={"SLURM_JOB_ID": "77", "SLURM_NTASKS": "1"})),
    ("ENV008", dict(env={"CUDA_DEVICE_ORDER": "PCI_BUS_ID"})), ("ENV008", dict()),
    ("ENV009", dict(env={"CUDA_VISIBLE_DEVICES": "0,1,2,3"})),
    ("ENV009", dict(env={"CUDA_VISIBLE_DEVICES": "GPU-8f3e2a1b-1c2d-4e5f-8a9b-0c1d2e3f4a5b,MIG-1b2c3d4e-aaaa-bbbb-cccc-111122223333"})),
    ("ENV009", dict()),
    ("ENV010", dict(env=TORCHRUN)), ("ENV010", dict(env=SLURM_STEP)), ("ENV010", dict()),
    ("NET001", dict(env={"NCCL_SOCKET_IFNAME": "eth", "GLOO_SOCKET_IFNAME": "eth0"})),
    ("NET001", dict(env={"NCCL_SOCKET_IFNAME": "=eth0,ib0"})),
    ("NET001", dict(env={"NCCL_SOCKET_IFNAME": "^docker,lo"})),
    ("NET001", dict(env={"NCCL_SOCKET_IFNAME": "^=docker0"})),
    ("NET001", dict(env={"NCCL_SOCKET_IFNAME": "br0", "GLOO_SOCKET_IFNAME": "br0"}, network={"interfaces": BRIDGED})),
    ("NET001", dict(env={"NCCL_SOCKET_IFNAME": "eno1,br"}, network={"interfaces": BRIDGED})),  # br0 has the address
    ("NET001", dict(env={"NCCL_SOCKET_IFNAME": "lo", "GLOO_SOCKET_IFNAME": "lo"})),  # one node: loopback is fine
    ("NET001", dict()),
    ("NET002", dict(env=SLURM_STEP)), ("NET002", dict(env={"MASTER_ADDR": "127.0.0.1"})), ("NET002", dict()),
    ("NCCL001", dict(env={"NCCL_DEBUG": "INFO", "NCCL_SOCKET_IFNAME": "eth0", "NCCL_IB_HCA": "mlx5",
                          "NCCL_OFI_USE_GDRCOPY": "1", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
                          "TORCH_NCCL_DUMP_ON_TIMEOUT": "1", "NCCL_NVLS_ENABLE": "0"})),
    ("NCCL002", dict(env={"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1", "TORCH_FR_BUFFER_SIZE": "2000"})),
    # (torch 2.8 reads TORCH_FR_BUFFER_SIZE first: the rename is in 2.8.0's FlightRecorder.hpp, not in 2.7.1's)
    ("NCCL002", dict(env={"TORCH_NCCL_TRACE_BUFFER_SIZE": "2000"}, packages={"torch": "2.7.1"})),
    ("NCCL003", dict(env={"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET,^COLL", "NCCL_P2P_DISABLE": "1",
                          "TORCH_DISTRIBUTED_DEBUG": "DETAIL", "OMP_NUM_THREADS": "4", "NCCL_P2P_LEVEL": "NVL",
                          "NCCL_PROTO": "^LL128", "NCCL_IB_GID_INDEX": "3", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "3"})),
    ("NCCL004", dict()), ("NCCL004", dict(env={"NCCL_P2P_DISABLE": "0"})),
    ("NET003", dict(env={**TORCHRUN, "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8"})),  # ib0/eth0: real NICs
    ("NET003", dict(env={**TORCHRUN, "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8", "NCCL_SOCKET_IFNAME": "eth0"},
                    network={"interfaces": [
                        {"name": "veth3f2a9b1", "up": True, "addresses": [{"family": "ipv4", "address": "169.254.12.7"}]},
                        {"name": "eth0", "up": True, "addresses": [{"family": "ipv4", "address": "10.0.0.5"}]}]})),
    ("ENV012", dict(env=TORCHRUN, host={"affinity": [0, 1, 2, 3], "affinity_count": 4},
                    siblings={"ranks": [{"pid": 9, "rank": 0, "local_rank": 0, "cpus": "4-7"}]})),
    ("NCCL004", dict(env={"NCCL_P2P_DISABLE": "1"}, gpus={"devices": [{"index": 0}]})),
    ("SYS001", dict()), ("SYS001", dict(env=TORCHRUN)),
    ("SYS003", dict(host={"rlimits": {"RLIMIT_MEMLOCK": {"soft": None, "hard": None}}},
                    pci={"rdma_devices": ["mlx5_0"]})),  # unlimited
    ("SYS003", dict(host={"rlimits": {"RLIMIT_MEMLOCK": {"soft": 8 * MiB, "hard": 8 * MiB}}, "cap_ipc_lock": True},
                    pci={"rdma_devices": ["mlx5_0"]})),
    ("SYS003", dict(env={"NCCL_IB_DISABLE": "1"}, host={"rlimits": {"RLIMIT_MEMLOCK": {"soft": 65536, "hard": 65536}}},
                    pci={"rdma_devices": ["mlx5_0"]})),
    ("SYS003", dict(host={"rlimits": {"RLIMIT_MEMLOCK": {"soft": 65536, "hard": 65536}}}, pci={"rdma_devices": []})),
    ("SYS004", dict(env=TORCHRUN, host={"container": "docker", "memory": {"total_bytes": 512 * GiB},
                                        "cgroup": {"version": 2, "quota_cpus": None, "memory_max_bytes": 64 * GiB}})),
    ("NET007", dict(env={**TORCHRUN, "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8"}, pci={"rdma_devices": ["mlx5_0"]})),
    ("NET007", dict(env=TORCHRUN, pci={"rdma_devices": []})),  # one node: no network between ranks
    ("PKG004", dict(packages={"accelerate": "0.17.1", "torch": "1.8.1"})),  # no multi-GPU launch configured
    ("PKG004", dict(packages={"accelerate": "0.17.1", "torch": "1.9.1"},
                    host={"accelerate_config": {"path": "c.yaml", "values": {"distributed_type": "MULTI_GPU"}}})),
    ("SYS006", dict(host={"torch_extensions": {"path": "/root/.cache/torch_extensions", "locks": []}})),
    ("SYS006", dict()),  # no extensions directory
    ("SYS008", dict()),  # the whole host
    ("SYS009", dict(host={"uid": 1000, "logind": {"remove_ipc": False, "from": "/etc/systemd/logind.conf"}})),
    ("SYS007", dict(env={**TORCHRUN, "WORLD_SIZE": "8"}, host={"triton_cache": {
        "path": "/tmp/tc", "from": "TRITON_CACHE_DIR", "fstype": "tmpfs", "mount_point": "/tmp", "manager": None}})),
    ("SYS010", dict(host={"triton_cache": {"path": "/tmp/.triton/cache", "from": "home", "fstype": "tmpfs",
                                           "mount_point": "/tmp", "manager": None, "writable": True, "writable_at": "/tmp"}},
                    packages={"triton": "2.3.1", "auto-gptq": "0.7.1"})),  # check18
    ("PKG006", dict(packages={"deepspeed": "0.12.6"},
                    host={"deepspeed_hostfile": {"path": "/job/hostfile", "hosts": {"n1": 8, "n2": 8}, "errors": []},
                          "launcher_tools": {"found": {"pdsh": "/usr/bin/pdsh"}, "missing": []}})),
    ("PKG006", dict(packages={"deepspeed": "0.12.6"},
                    host={"deepspeed_hostfile": {"path": "/job/hostfile", "hosts": {"n1": 8}, "errors": []},
                          "launcher_tools": {"found": {}, "missing": ["pdsh"]}})),  # one host: no pdsh needed
    ("NCCL005", dict()),  # no config file
    ("NCCL006", dict()),  # neither variable set
    ("NCCL006", dict(env={"NCCL_TOPO_FILE": "/etc/topo.xml"}, gpus=GPUS2,  # this machine's file (NVML's 8-digit domain)
                     nccl_files=[{"name": "NCCL_TOPO_FILE", "path": "/etc/topo.xml", "exists": True, "readable": True,
                                  "parsed": True, "gpu_bus_ids": ["0000:07:00.0", "0000:0f:00.0", "0000:47:00.0"],
                                  "gpu_devs": []}])),
    ("NCCL006", dict(env={"NCCL_GRAPH_FILE": "/etc/g.xml"}, gpus=GPUS2,
                     nccl_files=[{"name": "NCCL_GRAPH_FILE", "path": "/etc/g.xml", "exists": True, "readable": True,
                                  "parsed": True, "gpu_bus_ids": [], "gpu_devs": [0, 1]}])),
    ("NCCL005", dict(env={"NCCL_IB_USE_INLINE": "0"},
                     nccl_conf=[{"path": "/etc/nccl.conf", "vars": {"NCCL_IB_USE_INLINE": "1"}}])),  # env wins
    ("PKG005", dict(torch={"version": "2.5.1", "distributed_available": True, "nccl_available": True},
                    gpus={"devices": [{"index": 0, "name": "NVIDIA A100-SXM4-80GB"}]})),
    ("PKG005", dict(torch={"version": "2.5.1+cpu", "distributed_available": True, "nccl_available": False})),  # no GPU
    ("PKG005", dict(packages={"torch": "1.4.0"}, gpus={"devices": [{"index": 0, "name": "NVIDIA A100"}]})),  # Linux
    ("PKG005", dict(host={"os": "Windows"}, packages={"torch": "2.4.1"})),  # Gloo on Windows, no NVIDIA GPU
    ("PKG005", dict(torch={"version": "2.5.1+rocm6.2", "distributed_available": True, "nccl_available": False,
                           "hip_build": "6.2"}, gpus={"devices": [{"index": 0, "name": "NVIDIA A100"}]})),
    ("NET008", dict(env={"PET_RDZV_BACKEND": "c10d", "PET_RDZV_ENDPOINT": "sh-0-0:29400"},
                    packages={"torch": "1.10.0"},
                    network={"hostname": "sh-0-0", "own_hostname": {"host": "sh-0-0", "addresses": ["10.0.0.5"]},
                             "rdzv_endpoint": {"host": "sh-0-0", "addresses": ["10.0.0.5"]}})),  # the hostname
    ("NET007", dict(env={**TORCHRUN, "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8"},
                    pci={"rdma_devices": [], "net_plugins": ["/opt/aws-ofi-nccl/lib/libnccl-net.so"]})),  # EFA plugin
    ("PKG003", dict(packages={"nvidia-nccl-cu12": "2.21.5"},
                    gpus={"devices": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "cuda_capability": [9, 0]}]})),
    ("PKG003", dict(packages={"nvidia-nccl-cu11": "2.14.3"},
                    gpus={"devices": [{"index": 0, "name": "NVIDIA A100-SXM4-80GB", "cuda_capability": [8, 0]}]})),
    ("SYS004", dict(env=TORCHRUN, host={"container": "docker", "cgroup": {"version": 2, "quota_cpus": None,
                                                                          "memory_max_bytes": None}})),
    ("NET005", dict(env={**TORCHRUN, "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8"},
                    network={"firewall": {"tool": "ufw", "active": True, "default_incoming": "deny",
                                          "allowed": ["22/tcp", "from 10.0.0.0/8"]}})),
    ("ENV013", dict(env={"SLURM_JOB_ID": "9", "CUDA_VISIBLE_DEVICES": "0,1"},
                    host={"accelerate_config": {"path": "cfg.yaml", "values": {"num_processes": 2, "gpu_ids": "all"}}})),
    ("NET006", dict(env={**TORCHRUN, "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8"},
                    network={"own_hostname": {"host": "node0", "addresses": ["10.0.0.5"]}})),  # eth0's address
    ("NET006", dict(env={**TORCHRUN, "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8", "GLOO_SOCKET_IFNAME": "eth0"},
                    network={"own_hostname": {"host": "pod-1", "error": "not known"}})),
    ("NET006", dict(env=TORCHRUN, network={"own_hostname": {"host": "pod-1", "error": "not known"}})),  # one node
    ("NET006", dict(env={"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "6379"},
                    network={"own_hostname": {"host": "node0", "addresses": ["127.0.1.1"]},
                             "master_addr": {"host": "127.0.0.1", "addresses": ["127.0.0.1"]}})),  # store on loopback: one host
    ("NET006", dict(env={"RANK": "0", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "10.0.0.5",
                         "MASTER_PORT": "6379"},
                    network={"own_hostname": {"host": "node0", "addresses": ["127.0.1.1"]},
                             "master_addr": {"host": "10.0.0.5", "addresses": ["10.0.0.5"]}})),  # all ranks declared here
    ("PKG002", dict(packages={"nvidia-nccl-cu12": "2.27.3"})),
    ("NET004", dict(env={"NCCL_IB_GID_INDEX": "7"}, pci={"rdma_devices": ["mlx5_0"], "rdma_ports": ROCE_6_7})),
    ("NET004", dict(env={"NCCL_IB_GID_INDEX": "-1"}, pci={"rdma_devices": ["mlx5_0"], "rdma_ports": ROCE_6_7})),
    ("NET004", dict(env={"NCCL_IB_GID_INDEX": "5", "NCCL_IB_HCA": "mlx5_1"},
                    pci={"rdma_devices": ["mlx5_0"], "rdma_ports": ROCE_6_7})),
    ("NET004", dict(env={"NCCL_IB_GID_INDEX": "5"}, pci={"rdma_devices": ["mlx5_0"], "rdma_ports": {
        "mlx5_0:1": dict(ROCE_6_7["mlx5_0:1"], link_layer="InfiniBand")}})),  # IB ports do not use it
    ("SYS002", dict()), ("SYS002", dict(host={"rlimits": {"RLIMIT_NOFILE": {"soft": 1024, "hard": 1024}},
                                             "default_sharing_strategy": "file_system"})),
    ("TOK001", dict(env={"TOKENIZERS_PARALLELISM": "false"})), ("TOK001", dict(env={"TOKENIZERS_PARALLELISM": "off"})),
    ("TOK001", dict()), ("TOK001", dict(env={"TOKENIZERS_PARALLELISM": "true"}, host={"default_start_method": "spawn"})),
    ("PKG001", dict()),
    ("SYS005", dict(env={**TORCHRUN, "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "4"},  # 4 x (1 + 16) fits in 400
                    host={"uid": 1000, "rlimits": {"RLIMIT_NPROC": {"soft": 400, "hard": 400}}})),
    ("SYS005", dict(env={**TORCHRUN, "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "4", "OMP_NUM_THREADS": "96"},
                    host={"uid": 0, "rlimits": {"RLIMIT_NPROC": {"soft": 400, "hard": 400}}})),  # root is exempt
    ("SYS005", dict(env={**TORCHRUN, "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "8"},
                    host={"uid": 1000, "rlimits": {"RLIMIT_NPROC": {"soft": 513000, "hard": 513000}},
                          "cgroup": {"version": 2, "quota_cpus": None, "pids_max": 4096, "pids_current": 40}})),
    ("NET010", dict(pci={"rdma_devices": ["mlx5_0", "mlx5_1"], "rdma_virtual_functions": ["mlx5_0", "mlx5_1"]})),  # VM: VFs only
    ("NET010", dict(env={"NCCL_IB_HCA": "=mlx5_0,mlx5_1"},
                    pci={"rdma_devices": ["mlx5_0", "mlx5_1", "mlx5_10"], "rdma_virtual_functions": ["mlx5_10"]})),
    ("NET010", dict(env={"NCCL_IB_DISABLE": "1"},
                    pci={"rdma_devices": ["mlx5_0", "mlx5_1"], "rdma_virtual_functions": ["mlx5_1"]})),
    ("NET010", dict(pci={"rdma_devices": ["mlx5_0", "mlx5_1"], "rdma_virtual_functions": ["mlx5_1"],
                         "rdma_ports": {"mlx5_0:1": {"state": "4: ACTIVE"}, "mlx5_1:1": {"state": "1: DOWN"}}})),
    ("ENV014", dict(packages={"deepspeed": "0.12.6"},
                    host={"deepspeed_hostfile": {"path": "/job/hostfile", "hosts": {"a": 2, "b": 2}, "errors": []},
                          "ssh": {"client": "/usr/bin/ssh", "keys": ["id_ed25519"], "agent": False, "config": False}})),
    ("NET006", dict(env={"RANK": "0", "WORLD_SIZE": "4", "MASTER_ADDR": "localhost", "MASTER_PORT": "12345"},
                    packages={"torch": "2.1.0"},  # loopback fallback since torch 1.3: fine on one host
                    network={"own_hostname": {"host": "dgx-1.ai", "addresses": [], "error": "Name or service not known"},
                             "master_addr": {"host": "localhost", "addresses": ["127.0.0.1"]}})),
    ("PKG007", dict(host={"kernel": "5.15.133.1-microsoft-standard-WSL2"}, packages={"torch": "2.1.0", "nvidia-nccl-cu12": "2.18.1"})),
    ("PKG007", dict(host={"kernel": "5.15.0-91-generic"}, packages={"torch": "1.8.1"})),  # not WSL
    ("ENV015", dict(env={**TORCHRUN, "RANK": "0", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"},
                    host={"uid": 0, "unprivileged_port_start": 1024})),  # root may bind it
    ("ENV015", dict(env={**TORCHRUN, "RANK": "0", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "80"},
                    host={"uid": 1000, "unprivileged_port_start": 0})),  # sysctl opened every port
    ("ENV015", dict(env={**TORCHRUN, "RANK": "0", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"},
                    host={"uid": 1000, "unprivileged_port_start": 1024})),
    ("NET013", dict(pci={"rdma_devices": ["mlx5_0"], "rdma_verbs": {"mlx5_0": {"uverbs": "uverbs0", "present": True}}})),
    ("NET014", dict(pci={"rdma_devices": ["mlx5_0"], "rdma_drivers": {"mlx5_0": "mlx5_core"},
                         "verbs_providers": {"libibverbs": ["/usr/lib64"], "libraries": ["mlx5"], "config": ["mlx5"]}})),
    ("NCCL003", dict(env={**TORCHRUN, "NCCL_IB_HCA": "mlx5_0"}, pci={"rdma_devices": []})),  # one host: P2P/SHM
    ("NET004", dict(env={**TORCHRUN, "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8", "NCCL_IB_GID_INDEX": "3"},
                    pci={"rdma_devices": ["mlx5_0"], "rdma_ports": ROCE_LINK_LOCAL})),  # the routable RoCE v2 GID
    ("NET004", dict(env={**TORCHRUN, "NCCL_IB_GID_INDEX": "1"},
                    pci={"rdma_devices": ["mlx5_0"], "rdma_ports": ROCE_LINK_LOCAL})),  # one host: link-local is reachable
    ("PKG010", dict(env=TORCHRUN, packages={"torch": "2.5.1"}, host={"os": "Linux"})),  # Linux wheels have libuv
    ("PKG010", dict(env={**TORCHRUN, "USE_LIBUV": "0"}, packages={"torch": "2.5.1"}, host={"os": "Windows"})),  # worked around
    ("PKG010", dict(env=TORCHRUN, packages={"torch": "2.3.1"}, host={"os": "Windows"})),  # before libuv was the default
    ("NCCL003", dict(env={**TORCHRUN, "NCCL_ALGO": "NVLS,Ring"}, packages={"nvidia-nccl-cu12": "2.26.2"})),
    ("NCCL003", dict(env={**TORCHRUN, "NCCL_ALGO": "allreduce:nvls"}, packages={"nvidia-nccl-cu12": "2.26.2"})),
    ("NCCL003", dict(env={**TORCHRUN, "NCCL_ALGO": "NVLS"}, packages={"nvidia-nccl-cu12": "2.16.5"})),  # AllReduce only then
    ("NCCL003", dict(env={**TORCHRUN, "NCCL_ALGO": "^Tree"}, packages={"nvidia-nccl-cu12": "2.26.2"})),
    ("PKG010", dict(env=TORCHRUN, packages={"torch": "2.7.1", "nvidia-nccl-cu12": "2.26.2"})),  # the fixed release
    ("PKG010", dict(packages={"accelerate": "0.22.0"}, host={"accelerate_config": {"path": "~/.cache/huggingface/accelerate/default_config.yaml", "values": {"distributed_type": "MULTI_GPU", "num_processes": 2, "gpu_ids": "6,7"}}})),  # the fixed accelerate release
    ("PKG010", dict(packages={"accelerate": "0.20.3"}, host={"accelerate_config": {"path": "~/.cache/huggingface/accelerate/default_config.yaml", "values": {"distributed_type": "MULTI_GPU", "num_processes": 2, "gpu_ids": "6,7"}}})),  # before #1676
    ("PKG010", dict(packages={"accelerate": "0.21.0"}, host={"accelerate_config": {"path": "~/.cache/huggingface/accelerate/default_config.yaml", "values": {"distributed_type": "MULTI_GPU", "num_processes": 2, "gpu_ids": "all"}}})),  # gpu_ids all: nothing ignored
    ("PKG010", dict(packages={"accelerate": "0.21.0"})),  # no accelerate config
    ("PKG010", dict(env=TORCHRUN, packages={"torch": "2.7.0", "nvidia-nccl-cu12": "2.27.3"})),  # another NCCL
    ("PKG010", dict(env={**TORCHRUN, "TORCH_NCCL_USE_COMM_NONBLOCKING": "0"}, packages={"torch": "2.7.0", "nvidia-nccl-cu12": "2.26.2"})),
    # `srun --ntasks-per-node=1 torchrun --nnodes=2 --nproc-per-node=4`: one agent per task, as many as the rendezvous holds
    ("ENV007", dict(env={**TORCHRUN, "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4", "GROUP_WORLD_SIZE": "2",
                         "SLURM_JOB_ID": "7711", "SLURM_STEP_ID": "0", "SLURM_PROCID": "1", "SLURM_LOCALID": "0",
                         "SLURM_NTASKS": "2", "SLURM_NTASKS_PER_NODE": "1", "SLURM_JOB_NUM_NODES": "2"})),
    # torchrun from the batch script (no srun step): one agent, ENV007's note is for a process without a launcher
    ("ENV007", dict(env={**TORCHRUN, "SLURM_JOB_ID": "7712", "SLURM_STEP_ID": "batch", "SLURM_NTASKS": "4"})),
    ("NCCL003", dict(env={**TORCHRUN, "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8", "NCCL_IB_HCA": "mlx5_0",
                          "NCCL_IB_DISABLE": "1"}, pci={"rdma_devices": []})),  # IB off on purpose: NCCL004's
    ("NCCL003", dict(env={**TORCHRUN, "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8", "NCCL_IB_HCA": "mlx5_0"})),  # not gathered
    ("NET014", dict(env={"NCCL_IB_DISABLE": "1"}, pci={"rdma_devices": ["mlx5_0"], "rdma_drivers": {"mlx5_0": "mlx5_core"},
                         "verbs_providers": {"libibverbs": ["/usr/lib64"], "libraries": [], "config": []}})),
    ("NET014", dict(pci={"rdma_devices": ["mlx5_0"], "rdma_drivers": {"mlx5_0": "mlx5_core"},
                         "verbs_providers": {"libibverbs": [], "libraries": [], "config": None}})),  # no libibverbs found
    ("NET014", dict(env={"NCCL_IB_DISABLE": "1"}, pci={"rdma_devices": ["mlx5_0"], "rdma_drivers": {"mlx5_0": "mlx5_core"},
                         "verbs_providers": {"libibverbs": [], "libraries": [], "config": None, "ld_so_conf": True}})),
    ("NET014", dict(pci={"rdma_devices": ["efa_0"], "rdma_drivers": {"efa_0": "efa"}, "net_plugins": ["/opt/aws-ofi-nccl/lib/libnccl-net.so"],
                         "verbs_providers": {"libibverbs": [], "libraries": [], "config": None, "ld_so_conf": True}})),
    ("PKG009", dict(packages={"torch": "2.3.0", "nvidia-nccl-cu12": "2.20.5"}, network={"interfaces": [{'name': 'lo', 'up': True, 'addresses': [{'family': 'ipv4', 'address': '127.0.0.1'}]}, {'name': 'eno1', 'up': True, 'bus': 'pci', 'addresses': [{'family': 'ipv4', 'address': '10.1.0.5'}]}, {'name': 'enx00e04c680001', 'up': True, 'bus': 'usb', 'addresses': [{'family': 'ipv4', 'address': '192.168.100.2'}]}]})),  # fixed
    ("PKG009", dict(env={"NCCL_SOCKET_IFNAME": "eno1"}, packages={"torch": "2.2.0", "nvidia-nccl-cu12": "2.19.3"},
                    network={"interfaces": [{'name': 'lo', 'up': True, 'addresses': [{'family': 'ipv4', 'address': '127.0.0.1'}]}, {'name': 'eno1', 'up': True, 'bus': 'pci', 'addresses': [{'family': 'ipv4', 'address': '10.1.0.5'}]}, {'name': 'enx00e04c680001', 'up': True, 'bus': 'usb', 'addresses': [{'family': 'ipv4', 'address': '192.168.100.2'}]}]})),  # the USB interface left out
    ("PKG009", dict(packages={"torch": "2.2.0", "nvidia-nccl-cu12": "2.19.3"},
                    pci={"rdma_devices": ["mlx5_0"]}, network={"interfaces": [{'name': 'lo', 'up': True, 'addresses': [{'family': 'ipv4', 'address': '127.0.0.1'}]}, {'name': 'eno1', 'up': True, 'bus': 'pci', 'addresses': [{'family': 'ipv4', 'address': '10.1.0.5'}]}, {'name': 'enx00e04c680001', 'up': True, 'bus': 'usb', 'addresses': [{'family': 'ipv4', 'address': '192.168.100.2'}]}]})),  # IB transport: HCAs only
    ("NET013", dict(env={"NCCL_IB_DISABLE": "1"},
                    pci={"rdma_devices": ["mlx5_0"], "rdma_verbs": {"mlx5_0": {"uverbs": "uverbs0", "present": False}}})),

    ("NET001", dict(env={**TORCHRUN, "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8"},
                    nccl_conf=[{"path": "/etc/nccl.conf", "vars": {"NCCL_SOCKET_IFNAME": "^docker,lo"}}],
                    network={"interfaces": [{"name": "lo", "up": True, "order": 1, "addresses": [{"family": "ipv4", "address": "127.0.0.1"}]},
                                            {"name": "ens32", "up": True, "order": 2, "addresses": [{"family": "ipv4", "address": "10.2.0.11"}]}]})),
    ("NET001", dict(env={**TORCHRUN, "NCCL_SOCKET_IFNAME": "^docker0"},  # one node: loopback reaches every rank
                    network={"interfaces": [{"name": "lo", "up": True, "order": 1, "addresses": [{"family": "ipv4", "address": "127.0.0.1"}]},
                                            {"name": "ens32", "up": True, "order": 2, "addresses": [{"family": "ipv4", "address": "10.2.0.11"}]}]})),
    ("NET003", dict(env={**TORCHRUN, "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8", "NCCL_SOCKET_FAMILY": "AF_INET"},
                    network={"interfaces": [{"name": "lo", "up": True, "order": 1, "addresses": [{"family": "ipv4", "address": "127.0.0.1"}]},
                                            {"name": "enP7906s1", "up": True, "order": 2, "addresses": [{"family": "ipv6", "address": "fe80::20d:3aff:fef7:74b2"}]},
                                            {"name": "eth0", "up": True, "order": 3, "addresses": [{"family": "ipv4", "address": "10.0.0.4"}]}]})),  # IPv4 only: the VF is not considered
    ("ENV016", dict(env={"CUDA_VISIBLE_DEVICES": "1,0"}, packages={"deepspeed": "0.14.4"})),  # every entry a slot
    ("ENV016", dict(env={"CUDA_VISIBLE_DEVICES": "4,5", "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "2"},
                    packages={"deepspeed": "0.14.4"})),  # already a rank: CUDA, not the runner, reads it
    ("ENV016", dict(env={"CUDA_VISIBLE_DEVICES": "4,5"})),  # no deepspeed
    ("NET017", dict(env={"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1", "MASTER_ADDR": "10.0.0.1",
                         "MASTER_PORT": "29500"},  # a routable RoCE v2 GID
                    pci={"rdma_devices": ["mlx5_0"], "rdma_ports": {"mlx5_0:1": {"link_layer": "Ethernet", "state": "4: ACTIVE",
                         "gids": {"3": {"gid": "0000:0000:0000:0000:0000:ffff:0a00:0001", "type": "RoCE v2"}}}}})),
    ("PKG011", dict(env={"LD_PRELOAD": "/opt/aws-ofi-nccl/lib/libnccl-net.so"},  # a net plugin, not NCCL itself
                    packages={"torch": "2.2.0", "nvidia-nccl-cu12": "2.19.3"})),
    ("PKG012", dict(packages={"torch": "2.1.2", "deepspeed": "0.12.6", "deepspeed_build": {  # built for this torch
        "torch": "2.1", "cuda": None, "hip": None, "installed_ops": ["fused_adam"]}})),
    # check9 round 9: DeepSpeed's runner forwards NCCL*/PYTHON* and .deepspeed_env lines; one host copies the env
    ("ENV018", dict(env={"NCCL_DEBUG": "WARN", "WANDB_API_KEY": "k"}, packages={"deepspeed": "0.17.5"},
                    host={"deepspeed_hostfile": {"path": "/job/hostfile", "hosts": {"a": 8, "b": 8}, "errors": []},
                          "deepspeed_env": {"paths": ["/root/.deepspeed_env"], "names": ["WANDB_API_KEY"]},
                          "python_executable": None})),  # no interpreter recorded: no path note either
    ("ENV018", dict(env={"WANDB_API_KEY": "k"}, packages={"deepspeed": "0.17.5"},
                    host={"deepspeed_hostfile": {"path": "/job/hostfile", "hosts": {"a": 8}, "errors": []}})),
    # check2 round 8: one host with a key is fine (the runner's ssh check to it passes)
    ("ENV014", dict(packages={"deepspeed": "0.12.6"},
                    host={"deepspeed_hostfile": {"path": "/job/hostfile", "hosts": {"localhost": 8}, "errors": []},
                          "ssh": {"client": "/usr/bin/ssh", "keys": ["id_ed25519"], "agent": False, "config": False}})),
    ("ENV014", dict(packages={"deepspeed": "0.12.6"},  # no hostfile: the runner launches locally, master 127.0.0.1
                    host={"deepspeed_hostfile": {"path": "/job/hostfile", "hosts": {}, "errors": []},
                          "ssh": {"client": None, "keys": [], "agent": False, "config": False}})),
    # check2 round 7 quiet cases
    # loopback: fine on one host (round 10: with no launcher at all the span is unknown, a note names it:
    # tests/test_round10_check.py)
    ("NET006", dict(env=TORCHRUN, network={"own_hostname": {"host": "node0", "addresses": ["127.0.1.1"]}})),
    ("NET006", dict(env={"PET_RDZV_BACKEND": "static"},  # static rendezvous publishes --master-addr, not the name
                    network={"own_hostname": {"host": "user", "addresses": [], "error": "not known"}})),
    ("NET006", dict(env={"PET_LOCAL_ADDR": "127.0.0.1"},  # --local-addr names the address the agent publishes
                    network={"own_hostname": {"host": "user", "addresses": [], "error": "not known"}})),
    ("NET006", dict(packages={"torch": "2.4.0"}, network={"own_hostname": {"host": "node0", "addresses": ["10.0.0.5"]}})),
    ("ENV017", dict(env={**TORCHRUN, "CUDA_VISIBLE_DEVICES": "0,1,2,3"}, gpus={"unavailable": "no driver"})),  # 4 for 4
    # per-rank binding by a wrapper between the torchrun agent and this worker (the agent at depth 2): check30b
    ("ENV017", dict(env={**TORCHRUN, "CUDA_VISIBLE_DEVICES": "2"}, gpus={"unavailable": "no driver"},
                    launch={"commands": [{"launcher": "torchrun", "options": {}, "program": "bind.sh", "depth": 2}],
                            "depth_read": 2})),
    ("ENV017", dict(env={**SLURM_STEP, "SLURM_GPUS_PER_TASK": "2", "CUDA_VISIBLE_DEVICES": "0,1"},  # srun per-task binding
                    gpus={"unavailable": "no driver"})),
    ("ENV017", dict(env={**TORCHRUN, "CUDA_VISIBLE_DEVICES": "0,1"},  # NVML facts: GPU016's question
                    gpus={"devices": [{"index": 0, "name": "NVIDIA A100-SXM4-80GB"}, {"index": 1, "name": "NVIDIA A100-SXM4-80GB"}]})),
    ("SYS004", dict(env=TORCHRUN, host={"container": "docker", "cgroup": {
        "version": 2, "quota_cpus": None, "memory_max_bytes": None, "memory_max_state": "none"}})),  # read: no limit
    # check14 round 14
    ("NET018", dict(packages={"deepspeed": "0.13.1"}, host={"deepspeed_hostfile": {"path": "/job/hostfile", "errors": [], "hosts": {"192.168.121.122": 8, "192.168.121.123": 8}}}, network={"hostname": "node1", "interfaces": [{"name": "lo", "up": True, "order": 0, "addresses": [{"family": "ipv4", "address": "127.0.0.1"}]}, {"name": "eth0", "up": True, "order": 1, "addresses": [{"family": "ipv4", "address": "192.168.121.122", "netmask": "255.255.255.0"}]}, {"name": "eth1", "up": True, "order": 2, "addresses": [{"family": "ipv4", "address": "192.168.10.161", "netmask": "255.255.255.0"}]}]})),
    ("NET019", dict(env=TORCHRUN_2N, pci={"rdma_devices": ["mlx5_0"], "rdma_ports": {"mlx5_0:1": {"link_layer": "InfiniBand", "state": "4: ACTIVE", "gids": {}, "counters": {"link_downed": 0, "link_error_recovery": 0}}}})),
    ("NET021", dict(env={"FI_EFA_USE_HUGE_PAGE": "0"}, pci={"rdma_devices": ["rdmap16s27"], "rdma_drivers": {"rdmap16s27": "efa"}})),  # check33
    ("NET022", dict(env={**TORCHRUN_2N, "FI_MR_CACHE_MONITOR": "userfaultfd", "FI_CXI_DISABLE_HOST_REGISTER": "1", "FI_CXI_DEFAULT_CQ_SIZE": "131072", "FI_CXI_RDZV_PROTO": "alt_read", "FI_CXI_RX_MATCH_MODE": "hybrid", "FI_CXI_RDZV_EAGER_SIZE": "0", "FI_CXI_DEFAULT_TX_SIZE": "2048", "NCCL_NET_GDR_LEVEL": "PHB", "NCCL_NET": "AWS Libfabric"}, pci={"cxi_devices": ["cxi0"], "rdma_devices": []})),  # check33
    ("PKG013", dict(packages={"torch": "2.2.0", "nvidia-nccl-cu12": "2.19.3", "torch_pins": {"nvidia-nccl-cu12": "2.19.3"}})),
    ("PKG014", dict(packages={"torch": "2.1.2", "deepspeed": "0.12.0", "torch_build": {"cuda": "12.1", "hip": None}, "cuda_toolkit": {"home": "/usr/local/cuda", "from": "/usr/local/cuda", "version": "12.1.1"}})),  # check17
    ("PKG015", dict(packages={"torch": "1.9.0", "torch_build": {"cuda": "11.1", "hip": None}, "conda_cuda": [{"name": "cudatoolkit", "version": "11.1.74", "prefix": "/opt/conda"}]})),  # check17b
    ("PKG016", dict(packages={"torch": "2.2.0", "nvidia-cudnn-cu12": "8.9.2.26", "ld_cuda_libs": [{"dir": "/usr/local/cuda/lib64", "name": "libcudnn_cnn_train.so.8", "version": "8.9.2"}]})),  # check17b
    ("PKG017", dict(packages={"torch": "1.0.0"}, host={"glibc": "2.17", "os": "Linux"})), ("PKG017", dict(packages={"torch": "2.8.0"}, host={"glibc": "2.12", "os": "Linux"})),  # check17c: at the floor; a release outside the table
    ("PKG018", dict(packages={"apex": "0.1", "apex_build": {"extensions": ["amp_C", "apex_C", "fused_layer_norm_cuda", "syncbn"], "from": "RECORD", "has_amp": True}})),  # check18
    ("PKG019", dict(packages={"torch": "2.2.2", "numpy": "1.26.4"})),  # check18
    ("PKG020", dict(packages={"mmcv-full": "1.7.2", "mmdet": "2.28.2", "mmcv_build": {"ops": True, "dir": "/x/mmcv"}})),  # check18
    ("PKG021", dict(packages={"openmp_runtimes": [{"path": "/env/site-packages/torch/lib/libgomp.so.1", "kind": "gnu", "owner": "torch"}, {"path": "/env/lib/libiomp5.so", "kind": "intel", "owner": "env"}]})),  # check18
    ("PKG022", dict(packages={"torch_installs": {"dists": [{"version": "2.2.0", "location": "/env/site-packages"}], "conda": ["pytorch-2.2.0"]}})),  # check18
    ("PKG024", dict(packages={"ld_torch_libs": [{"dir": "/env/site-packages/torch/lib", "name": "libc10.so"}], "torch_installs": {"dists": [{"version": "2.2.0", "location": "/env/site-packages"}]}})),  # check18
    ("PKG023", dict(packages={"torch_build": {"cuda": "12.1", "hip": None}, "conda_magma": [{"name": "magma-cuda121", "version": "2.6.1"}]})),  # check18
    ("PKG025", dict(packages={"torch": "2.6.0", "triton": "3.2.0", "torch_pins": {"triton": "3.2.0", "nvidia-nccl-cu12": "2.21.5"}})),  # check18b
    ("NET020", dict(env={**TORCHRUN, "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8", "NCCL_SOCKET_IFNAME": "enp37s0f0"},
                    network={"interfaces": [
                        {"name": "eno1", "up": True, "addresses": [{"family": "ipv4", "address": "192.168.3.14", "netmask": "255.255.255.0"}]},
                        {"name": "enp37s0f0", "up": True, "addresses": [{"family": "ipv4", "address": "192.168.5.14", "netmask": "255.255.255.0"}]}]})),  # check18
    ("NET020", dict(env=TORCHRUN, network={"interfaces": [
        {"name": "eno1", "up": True, "addresses": [{"family": "ipv4", "address": "192.168.3.14", "netmask": "255.255.240.0"}]},
        {"name": "enp37s0f0", "up": True, "addresses": [{"family": "ipv4", "address": "192.168.5.14", "netmask": "255.255.240.0"}]}]})),  # one node
    ("PKG012", dict(packages={"torch": "2.6.0", "torch_extensions": []})),  # check17c
    ("ENV020", dict(launch={"commands": [{"launcher": "srun", "options": {}, "depth": 0, "from_script": "train.sh:1", "program_word": "srun", "found": True}], "depth_read": 0})),  # check19
    ("ENV022", dict(launch={"commands": [{"launcher": "torchrun", "options": {}, "program": "train.py", "depth": 0, "program_exists": True, "cwd": "/job"}], "depth_read": 0})),  # lead20
    ("ENV023", dict(env={"SLURM_JOB_ID": "77", "SLURM_STEP_ID": "0", "SLURM_PROCID": "6", "SLURM_LOCALID": "0", "SLURM_NODEID": "3", "SLURM_NTASKS": "8", "SLURM_JOB_NUM_NODES": "4", "SLURM_GPUS_ON_NODE": "2", "SLURM_STEP_TASKS_PER_NODE": "2(x4)"})),  # check22
    ("ENV024", dict(launch={"commands": [{"launcher": "vllm", "options": {}, "depth": 0, "serving": {"engine": "vllm", "model": "./m", "model_option": "serve", "tensor_parallel": 4, "pipeline_parallel": None}, "model_configs": [{"option": "serve", "path": "./m", "config": "./m/config.json", "heads": 32}]}], "depth_read": 0})),  # check22
    ("ENV025", dict(launch={"commands": [{"launcher": "torchrun", "options": {"nproc_per_node": "4", "nnodes": "1:2"}, "program": "train.py", "depth": 0}], "depth_read": 0})),  # check29b
    ("ENV026", dict(env={"RANK": "2", "WORLD_SIZE": "4", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "12355",
                         "CUDA_VISIBLE_DEVICES": "0,1,2,3"})),  # check32: one order for every rank
    # check19b: the slots this host has; another host's slots; the CUDA_VISIBLE_DEVICES case (ENV016's)
    ("ENV021", dict(host={"hostname": "work1"}, gpus={"devices": [{"index": 0}, {"index": 1}]},
                    launch={"commands": [{"launcher": "deepspeed", "options": {"include": "work1:0,1@work2:2,3"}, "program": "training.py", "depth": 0}], "depth_read": 0})),
    ("ENV021", dict(env={"CUDA_VISIBLE_DEVICES": "0,1"}, host={"hostname": "work1"}, gpus={"devices": [{"index": 0}, {"index": 1}]},
                    launch={"commands": [{"launcher": "deepspeed", "options": {"include": "localhost:2"}, "program": "training.py", "depth": 0}], "depth_read": 0})),
    ("SYS011", dict(launch={"commands": [{"launcher": "python", "options": {}, "program": "train.py", "depth": 0, "save_dirs": [{"option": "--output_dir", "path": "/w/out", "checked": "/w/out", "exists": True, "free_bytes": 42949672960, "total_bytes": 536870912000, "largest_checkpoint": "checkpoint-500", "largest_checkpoint_bytes": 13958643712}]}], "depth_read": 0})),  # check19
    ("SYS012", dict(host={"rlimits": {"RLIMIT_STACK": {"soft": 8388608, "hard": None}}}, packages={"torch": "2.5.1", "nvidia-nccl-cu12": "2.21.5"})),  # check33
    ("PKG026", dict(packages={"torch": "2.4.1", "libstdcxx": {"path": "/opt/conda/lib/libstdc++.so.6", "from": "RUNPATH", "glibcxx": "3.4.29", "cxxabi": "1.3.13"}, "extension_cxx_needs": [{"package": "apex", "file": "amp_C.so", "glibcxx": "3.4.29", "cxxabi": "1.3.13"}]})),  # check19
    ("PKG027", dict(packages={"torch": "2.0.1", "torch_mkl": {"lib": "/opt/conda/lib/python3.10/site-packages/torch/lib/libtorch_cpu.so", "undefined": ["iJIT_NotifyEvent"], "mkl_libs": ["/opt/conda/lib/libmkl_core.so.2"], "unresolved": [], "exported": ["iJIT_NotifyEvent"]}})),  # check19
    ("PKG028", dict(packages={"torch": "2.2.0", "nvidia-nccl-cu12": "2.19.3", "torch_nccl": {"needed": "libnccl.so.2", "search": "RPATH", "from": "RPATH", "path": "/venv/lib/python3.10/site-packages/nvidia/nccl/lib/libnccl.so.2"}})),  # check20
    ("PKG029", dict(packages={"torch": "1.6.0", "torch_build": {"cuda": "10.2", "hip": None}, "extension_cudart": [{"package": "det3d", "file": "det3d/ops/iou3d_nms_cuda.so", "needed": "libcudart.so.10.2", "version": "10.2", "path": "/usr/local/cuda-10.2/lib64/libcudart.so.10.2", "from": "ld.so.conf"}]})),  # check20
    ("PKG030", dict(packages={"transformers": "4.46.0", "accelerate": "0.26.0", "transformers_floors": {"accelerate": "0.26.0", "from": "transformers/utils/import_utils.py"}})),  # check33
    ("ENV019", dict(packages={"torch": "2.1.0"}, lint={"scripts": ["train.py"], "files": [], "findings": [], "rules_run": 0, "facts": {"local_rank_args": [{"flags": ["--local-rank", "--local_rank"], "path": "train.py", "line": 3}], "parse_known_args": False}})),
]


@pytest.mark.parametrize("check_id, kwargs, severity, subjects", TRIGGERS,
                         ids=[f"{t[0]}-{i}" for i, t in enumerate(TRIGGERS)])
def test_check_triggers(check_id, kwargs, severity, subjects):
    found = findings_of(make_snapshot(**kwargs), check_id)
    assert found, f"{check_id} did not fire"
    assert any(f.severity == severity and subjects <= set(f.subjects) for f in found), \
        [(f.severity, f.subjects, f.title) for f in found]
    for f in found:
        assert f.fix.strip() and f.title.strip() and f.detail.strip()


@pytest.mark.parametrize("check_id, kwargs", CLEAN, ids=[f"{c[0]}-{i}" for i, c in enumerate(CLEAN)])
def test_check_stays_quiet(check_id, kwargs):
    assert findings_of(make_snapshot(**kwargs), check_id) == []


def test_every_issue2_check_has_a_trigger_and_a_clean_case():
    from ddpdoctor.model.registry import REGISTRY
    from ddpdoctor.pipeline.runner import load_all

    load_all(plugins=False)
    mine = {i for i in REGISTRY if i.startswith(("ENV", "NET", "NCCL", "SYS", "TOK", "PKG"))}
    assert mine <= {t[0] for t in TRIGGERS}
    assert mine <= {c[0] for c in CLEAN}


HEALTHY_DAYS = {
    "clean shell": {},
    "torchrun worker": TORCHRUN,
    "SLURM step with MASTER_ADDR": SLURM_STEP,
    "CPU-only laptop": {"OMP_NUM_THREADS": "4"},
}


@pytest.mark.parametrize("name", list(HEALTHY_DAYS))
def test_healthy_setups_get_no_error_or_warning(name):
    found = findings_of(make_snapshot(env=HEALTHY_DAYS[name]))
    assert [(f.id, f.title) for f in found if f.severity != "info"] == []


@pytest.mark.slow
def test_rank5_world4_and_bad_ifname_from_the_cli():
    """The issue's 'done when': an error finding with the right subjects, a fix, and exit 1."""
    import json

    from test_core import cli

    res = cli("check", "--no-comm", "--json", env={"RANK": "5", "WORLD_SIZE": "4"})
    assert res.returncode == 1
    f = [f for f in json.loads(res.stdout)["findings"] if f["id"] == "ENV003"][0]
    assert f["severity"] == "error" and set(f["subjects"]) == {"RANK", "WORLD_SIZE"} and f["fix"]
    res = cli("check", "--no-comm", "--json", env={"NCCL_SOCKET_IFNAME": "nosuchif0"})
    assert res.returncode == 1
    f = [f for f in json.loads(res.stdout)["findings"] if f["id"] == "NET001"][0]
    assert f["severity"] == "error" and "NCCL_SOCKET_IFNAME" in f["subjects"] and "iface:nosuchif0" in f["subjects"]


# ------------------------------------------------------------------------------------------------
# Launchers that export ranks under their own names (srun, mpirun), and faults reported once when two checks see them.

MiB = 1024 ** 2
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# `srun python train.py` on node 1 of 2, 4 tasks per node: srun exports SLURM_*, the job script
# exports MASTER_ADDR/MASTER_PORT, and the training code (Lightning, submitit, accelerate's SLURM
# support, or a few lines of its own) maps SLURM_PROCID/SLURM_NTASKS to RANK/WORLD_SIZE.
SRUN_STEP = {"SLURM_JOB_ID": "77", "SLURM_STEP_ID": "0", "SLURM_PROCID": "5", "SLURM_LOCALID": "1",
             "SLURM_NTASKS": "8", "SLURM_NTASKS_PER_NODE": "4", "SLURM_NODEID": "1", "SLURM_JOB_NUM_NODES": "2",
             "SLURM_GPUS_ON_NODE": "4", "MASTER_ADDR": "node01", "MASTER_PORT": "29400"}
# `mpirun -np 4 python train.py` (OpenMPI), MASTER_ADDR/PORT exported by the job script.
MPIRUN = {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
          "OMPI_COMM_WORLD_LOCAL_SIZE": "4", "MASTER_ADDR": "node01", "MASTER_PORT": "29500", "OMP_NUM_THREADS": "4"}


def severities(snap, check_id):
    return {f.severity for f in findings_of(snap, check_id)}


# ---------------------------------------------------------------- ENV001 under srun / mpirun

@pytest.mark.parametrize("env", [SRUN_STEP, MPIRUN], ids=["srun-step", "mpirun"])
def test_env001_no_error_when_launcher_exports_ranks_under_its_own_names(env):
    assert "error" not in severities(make_snapshot(env=env), "ENV001")


def test_env001_under_srun_still_notes_the_mapping():
    found = findings_of(make_snapshot(env=SRUN_STEP), "ENV001")
    assert [f.severity for f in found] == ["info"]
    assert "RANK=$SLURM_PROCID" in found[0].fix


def test_env001_under_srun_without_master_port_is_still_an_error():
    env = {k: v for k, v in SRUN_STEP.items() if k != "MASTER_PORT"}
    assert "error" in severities(make_snapshot(env=env), "ENV001")


# ---------------------------------------------------------------- ENV006 under SLURM CPU binding

def test_env006_srun_task_bound_to_its_own_cores_is_not_oversubscribed():
    # --cpus-per-task=4 with task binding: this task's affinity is its own 4 cores of 16, and torch's
    # default of one thread per usable core gives 4 threads per task on 4 cores.
    env = {**SRUN_STEP, "RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "SLURM_CPUS_PER_TASK": "4"}
    host = {"affinity": [4, 5, 6, 7], "affinity_count": 4, "usable_cpus": 4}
    assert findings_of(make_snapshot(env=env, host=host), "ENV006") == []


def test_env006_srun_tasks_sharing_all_cores_still_warn():
    env = {**SRUN_STEP, "RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "SLURM_CPUS_PER_TASK": "4"}
    assert severities(make_snapshot(env=env), "ENV006") == {"warning"}  # affinity: all 16 cores


def test_env006_fix_does_not_repeat_the_value_already_set():
    # 4 MPI ranks with OMP_NUM_THREADS=1 on a 2-core host: lowering threads cannot help.
    host = {"cpu_count": 2, "affinity": [0, 1], "affinity_count": 2, "usable_cpus": 2}
    env = {**MPIRUN, "OMP_NUM_THREADS": "1"}
    found = findings_of(make_snapshot(env=env, host=host), "ENV006")
    assert len(found) == 1
    assert "OMP_NUM_THREADS=1 " not in found[0].fix and "fewer" in found[0].fix


# ---------------------------------------------------------------- ENV007 in the batch script

def test_env007_batch_script_is_a_note_not_a_warning():
    # `ddpdoctor check` in the sbatch script before `srun python train.py` is the natural place to run it.
    env = {"SLURM_JOB_ID": "77", "SLURM_NTASKS": "8", "SLURM_STEP_ID": "batch", "SLURM_PROCID": "0"}
    assert severities(make_snapshot(env=env), "ENV007") == {"info"}


# ---------------------------------------------------------------- ENV009 hide-every-GPU idioms

@pytest.mark.parametrize("value", ["-1", "", "NoDevFiles", "none"])
def test_env009_hide_all_idioms_are_notes(value):
    # CUDA_VISIBLE_DEVICES=-1 / "" hides the GPUs on purpose (CPU runs); SLURM sets NoDevFiles in
    # jobs without a GPU allocation. None of these may fail a CPU-only run.
    found = findings_of(make_snapshot(env={"CUDA_VISIBLE_DEVICES": value}), "ENV009")
    assert [f.severity for f in found] == ["info"]
    assert "CUDA_VISIBLE_DEVICES=0" not in found[0].fix


def test_env009_fix_never_invents_a_device_list():
    found = findings_of(make_snapshot(env={"CUDA_VISIBLE_DEVICES": "a,1"}), "ENV009")
    assert found and found[0].severity == "error"
    assert "CUDA_VISIBLE_DEVICES=0 " not in found[0].fix


# ---------------------------------------------------------------- one fault, one finding

def _docker_4gpu_snapshot(env=None):
    from ddpdoctor.pipeline.snapshot import Snapshot

    snap = Snapshot.load(os.path.join(ROOT, "fixtures", "snapshots", "docker-shm-64mb-hgx-a100-4x.json"))
    if env is not None:
        from ddpdoctor.gather.launcher import launcher_from_env

        snap.sections["env"]["vars"].update(env)
        snap.sections["launcher"] = launcher_from_env(snap.sections["env"]["vars"])
    return snap


def test_small_shm_in_docker_with_gpus_is_reported_once():
    found = findings_of(_docker_4gpu_snapshot())
    assert [f.id for f in found if "path:/dev/shm" in f.subjects] == ["GPU014"]


def test_small_shm_without_gpus_is_still_sys001():
    snap = make_snapshot(host={"container": "docker", "shm": {"path": "/dev/shm", "exists": True,
                                                              "size_bytes": 64 * MiB, "free_bytes": 64 * MiB}})
    assert [f.id for f in findings_of(snap) if "path:/dev/shm" in f.subjects] == ["SYS001"]


def test_port_in_use_is_reported_once_when_the_comm_test_saw_it_too():
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29562", "RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0",
           "LOCAL_WORLD_SIZE": "2"}
    comm = {"ok": False, "backend": "gloo", "failure": {"kind": "port-in-use", "port": 29562, "addr": "127.0.0.1",
                                                        "message": "MASTER_PORT 29562 on 127.0.0.1 is already in use"}}
    snap = make_snapshot(env=env, network={"listening_tcp_ports": [22, 29562]}, comm=comm)
    assert [f.id for f in findings_of(snap) if "MASTER_PORT" in f.subjects] == ["COMM008"]
    snap = make_snapshot(env=env, network={"listening_tcp_ports": [22, 29562]})
    assert [f.id for f in findings_of(snap) if "MASTER_PORT" in f.subjects] == ["ENV002"]


# ---------------------------------------------------------------- ENV001 in a launching shell

@pytest.mark.parametrize("env", [
    {"MASTER_ADDR": "node01", "MASTER_PORT": "29500", "SLURM_JOB_ID": "77", "SLURM_NTASKS": "8",
     "SLURM_STEP_ID": "batch", "SLURM_PROCID": "0"},  # the sbatch script, before `srun python train.py`
    {"MASTER_PORT": "29500"},  # exported in ~/.bashrc for later torchrun/accelerate runs
], ids=["sbatch-script", "bashrc"])
def test_env001_shell_that_only_sets_the_master_is_a_note(env):
    assert severities(make_snapshot(env=env), "ENV001") == {"info"}


def test_env001_single_process_is_a_warning_not_an_error():
    # RANK=0 WORLD_SIZE=1 without MASTER_*: init_process_group() fails at once, nothing hangs.
    assert severities(make_snapshot(env={"RANK": "0", "WORLD_SIZE": "1"}), "ENV001") == {"warning"}


def test_missing_gloo_interface_is_reported_once_when_the_comm_test_hit_it():
    env = {"WORLD_SIZE": "2", "GLOO_SOCKET_IFNAME": "eth9"}
    comm = {"ok": False, "backend": "gloo", "failure": {
        "kind": "interface-missing", "iface": "eth9", "rank": 0, "phase": "init_process_group",
        "message": "RuntimeError: Unable to find address for: eth9"}}
    with_comm = [f.id for f in findings_of(make_snapshot(env=env, comm=comm)) if "iface:eth9" in f.subjects]
    assert with_comm == ["COMM006"]
    without = [f.id for f in findings_of(make_snapshot(env=env)) if "iface:eth9" in f.subjects]
    assert without == ["NET001"]


def test_missing_nccl_interface_left_to_comm006_does_not_hide_the_gloo_one():
    env = {"WORLD_SIZE": "2", "NCCL_SOCKET_IFNAME": "eth9", "GLOO_SOCKET_IFNAME": "eth7"}
    comm = {"ok": False, "backend": "nccl", "failure": {
        "kind": "interface-missing", "iface": "eth9", "rank": 0, "phase": "init_process_group", "message": "x"}}
    found = [(f.id, f.subjects[0]) for f in findings_of(make_snapshot(env=env, comm=comm)) if f.id == "NET001"]
    assert found == [("NET001", "GLOO_SOCKET_IFNAME")]


def test_rank_out_of_range_is_reported_once_when_the_comm_test_saw_it_too():
    env = {"RANK": "5", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": "29571"}
    comm = {"ok": False, "backend": "gloo", "failure": {"kind": "rank-out-of-range", "rank": 5, "phase": "rendezvous",
                                                        "message": "RANK=5 is not in [0, WORLD_SIZE=4)"}}
    assert [f.id for f in findings_of(make_snapshot(env=env, comm=comm)) if "RANK" in f.subjects] == ["COMM009"]
    assert [f.id for f in findings_of(make_snapshot(env=env)) if "RANK" in f.subjects] == ["ENV003"]


def test_thread_count_reads_as_english():
    host = {"cpu_count": 2, "affinity": [0, 1], "affinity_count": 2, "usable_cpus": 2}
    found = findings_of(make_snapshot(env={**MPIRUN, "OMP_NUM_THREADS": "1"}, host=host), "ENV006")
    assert "x 1 thread =" in found[0].title


def test_unknown_gpu_uuid_is_reported_once_by_the_gpu_aware_check():
    # CUDA and torch take any GPU-/MIG- token as a (possibly abbreviated) UUID; whether it exists is GPU019's call.
    from ddpdoctor.pipeline.snapshot import Snapshot

    doc = __import__("json").load(open(os.path.join(ROOT, "fixtures", "snapshots", "dgx-a100-8x-nvswitch.json")))
    doc["sections"]["env"]["vars"]["CUDA_VISIBLE_DEVICES"] = "GPU-nope"
    found = [f.id for f in findings_of(Snapshot.from_dict(doc)) if "CUDA_VISIBLE_DEVICES" in f.subjects]
    assert found == ["GPU019"]


def test_comm001_fix_starts_with_a_command():
    comm = {"ok": False, "backend": "gloo", "world_size": 2, "deadline_s": 30.0, "master_addr": "127.0.0.1",
            "master_port": 29555, "failure": {"kind": "missing-ranks", "phase": "rendezvous", "missing": [1], "rank": 0}}
    found = findings_of(make_snapshot(comm=comm), "COMM001")
    assert found and found[0].fix.split()[0] in ("ddpdoctor", "python", "torchrun", "srun")


def test_macos_laptop_has_no_dev_shm_and_that_is_fine():
    host = {"os": "Darwin", "shm": {"path": "/dev/shm", "exists": False, "error": "No such file or directory"},
            "default_start_method": "spawn", "default_sharing_strategy": "file_system", "container": None}
    assert findings_of(make_snapshot(host=host), "SYS001") == []
    linux = {"shm": {"path": "/dev/shm", "exists": False, "error": "No such file or directory"}}
    assert severities(make_snapshot(host=linux), "SYS001") == {"warning"}


def test_malformed_rank_variables_get_one_finding_each():
    """ENV010 owns the launcher's rank variables: SET002 (and NCCL003) must not report the same value again; the
    catalogue's 'where the library reads it' is folded into ENV010's evidence."""
    found = findings_of(make_snapshot(env={"WORLD_SIZE": "abc", "LOCAL_RANK": "x", "RANK": "0"}))
    about = [(f.id, s) for f in found for s in f.subjects if s in ("WORLD_SIZE", "LOCAL_RANK")]
    assert sorted(about) == [("ENV010", "LOCAL_RANK"), ("ENV010", "WORLD_SIZE")], about
    env010 = [f for f in found if f.id == "ENV010" and "WORLD_SIZE" in f.subjects][0]
    assert env010.evidence.get("read_by"), env010.evidence


# ---------------------------------------------------------------- ENV007: --ntasks below --ntasks-per-node x nodes
# Slurm sbatch/srun --ntasks-per-node: "If used with the --ntasks option, the --ntasks option will take precedence
# and the --ntasks-per-node will be treated as a maximum count of tasks per node" (Lightning-AI/pytorch-lightning#20391).
NTASKS_1_PER_NODE_2 = {"SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0", "SLURM_PROCID": "0", "SLURM_LOCALID": "0",
                       "SLURM_NTASKS": "1", "SLURM_NTASKS_PER_NODE": "2", "SLURM_JOB_NUM_NODES": "1",
                       "SLURM_NODEID": "0", "CUDA_VISIBLE_DEVICES": "0,1"}


def _ntasks_findings(env):
    return [f for f in findings_of(make_snapshot(env=env), "ENV007") if "SLURM_NTASKS_PER_NODE=" in f.title]


def test_env007_ntasks_below_ntasks_per_node_times_nodes():
    found = _ntasks_findings(NTASKS_1_PER_NODE_2)
    assert len(found) == 1 and found[0].severity == "warning"
    assert "only 1 task run, not 2" in found[0].title
    assert {"SLURM_NTASKS", "SLURM_NTASKS_PER_NODE"} <= set(found[0].subjects)
    # two nodes, --ntasks=3 --ntasks-per-node=2: one node runs a single task
    env = {**NTASKS_1_PER_NODE_2, "SLURM_NTASKS": "3", "SLURM_JOB_NUM_NODES": "2"}
    assert "not 4" in _ntasks_findings(env)[0].title


@pytest.mark.parametrize("change", [
    {"SLURM_NTASKS": "2"},                                        # the counts agree
    {"SLURM_NTASKS": "4", "SLURM_JOB_NUM_NODES": "2"},            # 2 per node on 2 nodes
    {"SLURM_NTASKS_PER_NODE": None},                              # --ntasks alone: nothing to compare
    {"SLURM_JOB_ID": None},                                       # not inside a Slurm job
])
def test_env007_ntasks_per_node_quiet(change):
    env = {k: v for k, v in {**NTASKS_1_PER_NODE_2, **change}.items() if v is not None}
    assert _ntasks_findings(env) == []


def _rank0_elsewhere(env, master="192.168.1.10", own="192.168.1.11"):
    net = {"master_addr": {"host": master, "addresses": [master]},
           "interfaces": [{"name": "lo", "up": True, "mtu": 65536, "speed_mbps": 0, "order": 1,
                           "addresses": [{"family": "ipv4", "address": "127.0.0.1"}]},
                          {"name": "eth0", "up": True, "mtu": 1500, "speed_mbps": 25000, "order": 2,
                           "addresses": [{"family": "ipv4", "address": own}]}]}
    return make_snapshot(env=dict({"MASTER_ADDR": master, "MASTER_PORT": "29500"}, **env), network=net)


def test_net002_rank0_on_a_host_that_is_not_master_addr():
    # pytorch/pytorch#46800: rank 0 starts the TCPStore on its own host (rendezvous.py, start_daemon = rank == 0)
    [f] = [f for f in findings_of(_rank0_elsewhere({"RANK": "0", "WORLD_SIZE": "2"}), "NET002")]
    assert f.severity == "error" and "RANK=0 runs on this host" in f.title and "RANK" in f.subjects
    assert findings_of(_rank0_elsewhere({"RANK": "1", "WORLD_SIZE": "2"}), "NET002") == []  # a client: right
    assert findings_of(_rank0_elsewhere({"RANK": "0", "WORLD_SIZE": "2"}, own="192.168.1.10"), "NET002") == []
    assert findings_of(_rank0_elsewhere({"RANK": "0", "WORLD_SIZE": "1"}), "NET002") == []
    # torchrun's agent holds the store for its workers: not judged there
    assert findings_of(_rank0_elsewhere({**TORCHRUN, "RANK": "0", "MASTER_ADDR": "192.168.1.10"}), "NET002") == []


def test_sys001_dev_shm_not_writable():
    # NVIDIA/nccl#328: 'Call to shm_open failed : Permission denied' until `chmod 777 /dev/shm`
    shm = {"path": "/dev/shm", "exists": True, "size_bytes": 64 * 1024 ** 3, "free_bytes": 64 * 1024 ** 3}
    [f] = findings_of(make_snapshot(env=TORCHRUN, host={"shm": dict(shm, mode="0755", writable=False)}), "SYS001")
    assert f.severity == "error" and "not writable" in f.title and "0755" in f.title
    assert findings_of(make_snapshot(env=TORCHRUN, host={"shm": dict(shm, mode="1777", writable=True)}), "SYS001") == []
    assert findings_of(make_snapshot(env=TORCHRUN, host={"shm": shm}), "SYS001") == []  # an older snapshot: unknown


def test_shm_facts_record_mode_and_writability(tmp_path):
    from ddpdoctor.gather.host import shm_facts

    class Src:
        def path(self, p):
            return str(tmp_path)
    tmp_path.chmod(0o755)
    got = shm_facts(Src())
    assert got["exists"] and got["mode"] == "0755" and got["writable"] is True  # the owner may write


def test_env014_one_host_hostfile_says_remove_it_or_set_up_ssh():
    """check2 round 8: deepspeed's runner treats a one-host hostfile as a multi-node launch for its ssh check
    (deepspeed/launcher/runner.py @ 066d912052b5), and its own error says to remove the hostfile on one node."""
    snap = make_snapshot(packages={"deepspeed": "0.14.4"},
                         host={"deepspeed_hostfile": {"path": "/job/hostfile", "hosts": {"localhost": 8}, "errors": []},
                               "ssh": {"client": "/usr/bin/ssh", "keys": [], "agent": False, "config": False}})
    (f,) = findings_of(snap, "ENV014")
    assert f.severity == "warning" and "localhost" in f.title
    assert f.fix.startswith("rm /job/hostfile") and "one-host hostfile" in f.detail
