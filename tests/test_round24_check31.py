"""check31 (issue 26, round 24): the classes batches 122-123 lacked, each with a trigger and a quiet fixture.
Pure: snapshots are built by the factory over recorded facts; no process is started."""
from __future__ import annotations

from factory import findings_of, make_snapshot


# -- NET003 arm: an inference server picks the address it publishes by itself (vLLM get_ip(), SGLang
# get_local_ip_auto(): VLLM_HOST_IP / SGLANG_HOST_IP unset -> the default route's source address;
# data/serving.json engines[].host_ip) on a host with several routable addresses --

def _iface(name, addr, mask="255.255.255.0"):
    return {"name": name, "up": True, "mtu": 1500, "speed_mbps": 0,
            "addresses": [{"family": "ipv4", "address": addr, "netmask": mask}]}


LO = _iface("lo", "127.0.0.1", "255.0.0.0")


def _serve(words: str, ifaces, env=None):
    from ddpdoctor.facts.launch import parse_command

    cmd = parse_command(words.split())
    assert cmd and cmd.get("serving"), "the launch must be read as an inference server's"
    return make_snapshot(env=env or {}, network={"interfaces": ifaces},
                         launch={"commands": [dict(cmd, depth=0)], "depth_read": 0})


SGLANG_2_NODES = ("python3 -m sglang.launch_server --model-path /m --tp 2 --nnodes 2 --node-rank 0 "
                  "--dist-init-addr 192.168.100.1:29500")
PINNED = {"NCCL_SOCKET_IFNAME": "enp1s0f1np1", "GLOO_SOCKET_IFNAME": "enp1s0f1np1"}
TWO_NICS = [LO, _iface("wlP9s9", "192.168.1.57"), _iface("enp1s0f1np1", "192.168.100.1")]


def _host_ip_findings(snap):
    return [f for f in findings_of(snap, "NET003") if "HOST_IP" in f.title]


def test_multi_node_server_on_a_host_with_two_routable_nics_names_the_other_address():
    [f] = _host_ip_findings(_serve(SGLANG_2_NODES, TWO_NICS, PINNED))
    assert f.severity == "warning"
    assert "SGLANG_HOST_IP is unset" in f.title and "192.168.1.57 (wlP9s9)" in f.title
    assert "192.168.100.1" not in f.title  # the interface NCCL/Gloo are pinned to is the one meant, not a suspect
    assert f.fix.startswith("export SGLANG_HOST_IP=192.168.100.1")
    assert f.evidence["cluster"] == [["enp1s0f1np1", "192.168.100.1"]]


def test_vllm_over_ray_without_a_pinned_interface_lists_every_address():
    snap = _serve("vllm serve /m --tensor-parallel-size 2 --distributed-executor-backend ray",
                  [LO, _iface("enP7s7", "192.168.50.192"), _iface("enp1s0f0np0", "192.168.201.10")])
    [f] = _host_ip_findings(snap)
    assert "VLLM_HOST_IP is unset" in f.title and "192.168.50.192" in f.title and "192.168.201.10" in f.title
    assert "--node-ip-address" in f.fix


def test_one_node_server_with_a_vpn_tunnel_names_the_tunnel_address():
    snap = _serve("vllm serve m --port 8000", [_iface("lo0", "127.0.0.1", "255.0.0.0"), _iface("en0", "192.168.12.165"),
                                               _iface("utun4", "10.4.6.125", "255.255.255.255")])
    [f] = _host_ip_findings(snap)
    assert "tunnel utun4 (10.4.6.125)" in f.title and f.fix.startswith("export VLLM_HOST_IP=127.0.0.1")


def test_host_ip_pick_quiet_when_set_one_address_or_one_node_without_a_tunnel():
    assert _host_ip_findings(_serve(SGLANG_2_NODES, TWO_NICS, dict(PINNED, SGLANG_HOST_IP="192.168.100.1"))) == []
    assert _host_ip_findings(_serve(SGLANG_2_NODES, TWO_NICS, dict(PINNED, SGLANG_LOCAL_IP_NIC="enp1s0f1np1"))) == []
    assert _host_ip_findings(_serve(SGLANG_2_NODES, [LO, _iface("enp1s0f1np1", "192.168.100.1")], PINNED)) == []
    # a docker bridge is never the default route: not a second candidate
    assert _host_ip_findings(_serve(SGLANG_2_NODES, [LO, _iface("docker0", "172.17.0.1", "255.255.0.0"),
                                                     _iface("enp1s0f1np1", "192.168.100.1")], PINNED)) == []
    # one node, two ordinary NICs: binding to either local address works
    assert _host_ip_findings(_serve("vllm serve m", TWO_NICS)) == []
    assert _host_ip_findings(_serve("vllm serve m", [LO, _iface("en0", "192.168.12.165"),
                                                     _iface("utun4", "10.4.6.125", "255.255.255.255")],
                                    {"VLLM_HOST_IP": "127.0.0.1"})) == []


# -- GPU019 arm: ROCR_VISIBLE_DEVICES with HIP_/CUDA_VISIBLE_DEVICES on a ROCm node: ROCr's mask first, renumbered
# from 0, and HIP indexes what it left (torch/cuda/__init__.py _parse_visible_devices; data/visible_devices.json) --

NO_NVML = {"unavailable": "no NVIDIA driver found (NVML library not loaded)", "reason": "library_not_found"}
MI250X = {"amd_gpus": [{"node": n, "gfx": "gfx90a", "gfx_target_version": 90010} for n in range(1, 9)]}


def _rocm(env, hip="6.2", pci=MI250X):
    return make_snapshot(env=env, packages={"torch": "2.5.1", "torch_build": {"cuda": None, "hip": hip}},
                         gpus=NO_NVML, pci=pci)


def test_both_masks_with_the_nodes_index_leave_no_gpu():
    [f] = findings_of(_rocm({"ROCR_VISIBLE_DEVICES": "1", "CUDA_VISIBLE_DEVICES": "1"}), "GPU019")
    assert f.severity == "error" and "sees 0 GPU(s)" in f.title
    assert "ROCR_VISIBLE_DEVICES=1 with CUDA_VISIBLE_DEVICES=1" in f.title
    assert "No HIP GPUs are available" in f.detail and f.fix.startswith("set one mask only")


def test_hip_mask_past_the_rocr_list_keeps_the_entries_before_it():
    [f] = findings_of(_rocm({"ROCR_VISIBLE_DEVICES": "2,3", "HIP_VISIBLE_DEVICES": "0,2"}), "GPU019")
    assert f.severity == "warning" and f.evidence["kept"] == 1 and f.evidence["beyond"] == [2]


def test_masks_quiet_when_one_is_set_counted_from_0_or_not_rocm():
    assert findings_of(_rocm({"ROCR_VISIBLE_DEVICES": "1", "CUDA_VISIBLE_DEVICES": "0"}), "GPU019") == []
    assert findings_of(_rocm({"ROCR_VISIBLE_DEVICES": "1"}), "GPU019") == []
    assert findings_of(_rocm({"CUDA_VISIBLE_DEVICES": "1"}), "GPU019") == []
    # a CUDA torch with no AMD GPU: ROCR_VISIBLE_DEVICES means nothing there
    assert findings_of(_rocm({"ROCR_VISIBLE_DEVICES": "1", "CUDA_VISIBLE_DEVICES": "1"}, hip=None, pci={}), "GPU019") == []


# -- ENV006 arm: the command line's DataLoader workers per rank x local ranks against the usable cores
# (data/loader_workers.json: --num_workers / --workers / --dataloader_num_workers) --

def _deit(workers: str, cpus: int = 32):
    from ddpdoctor.facts.launch import parse_command

    words = ("python -m torch.distributed.launch --nproc_per_node=8 --use_env main.py --model deit_tiny "
             + workers).split()
    cmd = parse_command(words)
    env = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "8", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500",
           "OMP_NUM_THREADS": "1"}
    return make_snapshot(env=env, cmdline=words, host={"cpu_count": cpus, "usable_cpus": cpus},
                         launch={"commands": [dict(cmd, depth=0)], "depth_read": 0})


def _worker_findings(snap):
    return [f for f in findings_of(snap, "ENV006") if "DataLoader workers" in f.title]


def test_eight_ranks_with_32_loader_workers_each_on_32_cores_is_named():
    [f] = _worker_findings(_deit("--num_workers 32"))
    assert f.severity == "warning" and "8 ranks x 32 DataLoader workers" in f.title and "= 256 worker processes" in f.title
    assert f.fix.startswith("--num_workers 4")


def test_loader_workers_quiet_when_they_fit_or_are_not_given():
    assert _worker_findings(_deit("--num_workers 4")) == []
    assert _worker_findings(_deit("--workers=4")) == []
    assert _worker_findings(_deit("")) == []
    assert _worker_findings(_deit("--num_workers 32", cpus=512)) == []


# -- SYS007 arm: the job's own variables put run-time compile caches on the network mount under Triton's cache
# (data/jit_caches.json: TRITON_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR, TORCH_EXTENSIONS_DIR, VLLM_CACHE_ROOT) --

TWO_NODES = {"TORCHELASTIC_RUN_ID": "x", "RANK": "0", "WORLD_SIZE": "16", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "8",
             "GROUP_RANK": "0", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}
HOME_ON_NFS = {"path": "/cache/hf/.triton/cache", "from": "home", "fstype": "nfs4", "mount_point": "/cache/hf",
               "manager": None}


def _caches(**env):
    return make_snapshot(env=dict(TWO_NODES, **env), host={"triton_cache": HOME_ON_NFS})


def test_compile_caches_placed_on_the_shared_mount_are_a_warning_naming_them():
    [f] = findings_of(_caches(TORCHINDUCTOR_CACHE_DIR="/cache/hf/inductor", VLLM_CACHE_ROOT="/cache/hf/vllm"), "SYS007")
    assert f.severity == "warning" and "so are TORCHINDUCTOR_CACHE_DIR, VLLM_CACHE_ROOT" in f.title
    assert "nfs4" in f.title and "VLLM_CACHE_ROOT=/tmp/" in f.fix
    assert f.evidence["caches_on_mount"] == [["TORCHINDUCTOR_CACHE_DIR", "/cache/hf/inductor"],
                                             ["VLLM_CACHE_ROOT", "/cache/hf/vllm"]]


def test_compile_caches_on_local_disk_leave_the_default_cache_a_note():
    [f] = findings_of(_caches(TORCHINDUCTOR_CACHE_DIR="/tmp/inductor", VLLM_CACHE_ROOT="/cache/hfx/vllm"), "SYS007")
    assert f.severity == "info" and "so are" not in f.title
    assert findings_of(make_snapshot(env=TWO_NODES, host={"triton_cache": dict(HOME_ON_NFS, fstype="ext4")}),
                       "SYS007") == []


# -- the default route the gatherer reads (/proc/net/route) settles the engine's pick --

def test_default_route_is_read_from_proc_net_route(tmp_path):
    from ddpdoctor.gather import Sources
    from ddpdoctor.gather.network import default_route

    (tmp_path / "proc" / "net").mkdir(parents=True)
    (tmp_path / "proc" / "net" / "route").write_text(
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
        "enp1s0f1np1\t0064A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
        "wlP9s9\t00000000\t0101A8C0\t0003\t0\t0\t600\t00000000\t0\t0\t0\n"
        "enp1s0f1np1\t00000000\t0164A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n")
    assert default_route(Sources(root=str(tmp_path))) == {"iface": "enp1s0f1np1", "metric": 100}
    assert default_route(Sources(root=str(tmp_path / "none"))) is None


def _routed(iface):
    snap = _serve(SGLANG_2_NODES, TWO_NICS, PINNED)
    snap.sections["network"]["default_route"] = {"iface": iface, "metric": 0}
    return snap


def test_default_route_on_another_interface_is_named_alone_and_on_the_cluster_one_is_quiet():
    [f] = _host_ip_findings(_routed("wlP9s9"))
    assert "which here is 192.168.1.57 (wlP9s9)" in f.title and "/proc/net/route" in f.detail
    assert _host_ip_findings(_routed("enp1s0f1np1")) == []


# -- SYS005 counts the command line's DataLoader workers too (facts.launch loader_workers_asked) --

def _nproc(workers: str, soft: int = 500):
    snap = _deit(workers)
    snap.sections["host"].update(uid=1000, rlimits={"RLIMIT_NPROC": {"soft": soft, "hard": soft}})
    return snap


def test_thread_limit_counts_the_command_lines_loader_workers():
    [f] = findings_of(_nproc("--num_workers 32"), "SYS005")
    assert "ulimit -u is 500" in f.title and f.evidence["loader_workers"] == 32
    assert "main.py --num_workers 32" in f.detail


def test_thread_limit_quiet_without_workers_or_with_room():
    assert findings_of(_nproc(""), "SYS005") == []
    assert findings_of(_nproc("--num_workers 32", soft=4096), "SYS005") == []
