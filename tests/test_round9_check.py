"""Round 9 (issue 26): classes found by the first reads of batches 48 and 49, each with a trigger and a quiet
case built here (not the corpus cases), failing on the code before the fix."""
from __future__ import annotations

from factory import findings_of, make_snapshot

SLURM_2 = {"SLURM_JOB_ID": "42", "SLURM_JOB_NUM_NODES": "2", "SLURM_NNODES": "2", "SLURM_JOB_NODELIST": "gpu[01-02]",
           "SLURM_NTASKS": "2", "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_NODEID": "0", "SLURM_STEP_ID": "0"}


def sev(env, check, **kw):
    return [(f.severity, f.title) for f in findings_of(make_snapshot(env=env, **kw), check)]


# ------------------------------------------------------------ NET002: torchrun's c10d endpoint by environment

def test_c10d_endpoint_loopback_on_two_nodes_is_reported():
    """pith-train#91's class: the endpoint came out as localhost on every node (torch reads localhost as this
    machine, so each node hosts its own store)."""
    env = dict(SLURM_2, PET_RDZV_BACKEND="c10d", PET_RDZV_ENDPOINT="localhost:29500", PET_NNODES="2")
    got = sev(env, "NET002")
    assert got and got[0][0] == "error" and "PET_RDZV_ENDPOINT" in got[0][1], got
    # no scheduler to count hosts: torchrun's node count alone, a warning
    got = sev({"PET_RDZV_BACKEND": "c10d", "PET_RDZV_ENDPOINT": "127.0.0.1", "PET_NNODES": "1:4"}, "NET002")
    assert got and got[0][0] == "warning", got
    # an empty endpoint is localhost too (parse_rendezvous_endpoint)
    assert sev(dict(SLURM_2, PET_RDZV_BACKEND="c10d", PET_RDZV_ENDPOINT="", PET_NNODES="2"), "NET002")


def test_c10d_endpoint_quiet_cases():
    # a node of the job: right
    assert not sev(dict(SLURM_2, PET_RDZV_BACKEND="c10d", PET_RDZV_ENDPOINT="gpu01:29500", PET_NNODES="2"), "NET002")
    # one node: --standalone's localhost is right
    assert not sev({"PET_RDZV_BACKEND": "c10d", "PET_RDZV_ENDPOINT": "localhost:0", "PET_NNODES": "1"}, "NET002")
    # the static backend rendezvouses at MASTER_ADDR, which NET002 judges as before
    assert not sev(dict(SLURM_2, PET_RDZV_BACKEND="static", PET_RDZV_ENDPOINT="localhost:29500"), "NET002")


# ------------------------------------------------------------ NET003: an IPv6-only host, a link-local tunnel first

LO = {"name": "lo", "up": True, "mtu": 65536, "speed_mbps": 0, "addresses": [{"family": "ipv4", "address": "127.0.0.1"}]}


def _iface(name, *addrs):
    return {"name": name, "up": True, "mtu": 1500, "speed_mbps": 10000,
            "addresses": [{"family": "ipv6" if ":" in a else "ipv4", "address": a} for a in addrs]}


def _two_hosts(ifaces, peer):
    env = {"TORCHELASTIC_RUN_ID": "j", "RANK": "0", "WORLD_SIZE": "4", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2",
           "GROUP_RANK": "0", "MASTER_ADDR": peer, "MASTER_PORT": "29500"}
    return sev(env, "NET003", network={"interfaces": ifaces, "master_addr": {"host": peer, "addresses": [peer]}})


def test_link_local_tunnel_ahead_of_the_only_routable_veth_is_reported():
    """NVIDIA/nccl#529's class: no IPv4 at all, the container's way out is veth0 (global IPv6) and a tunnel with
    only fe80:: comes first in the kernel's order, so NCCL bootstraps over the link-local address."""
    got = _two_hosts([LO, _iface("ip6tnl0", "fe80::e866:19ff:fe1e:1"), _iface("veth0", "2001:db8:1::5")], "2001:db8:1::9")
    assert got and got[0][0] == "warning" and "ip6tnl0" in got[0][1], got


def test_routable_veth_alone_or_first_stays_quiet():
    assert not _two_hosts([LO, _iface("veth0", "2001:db8:1::5")], "2001:db8:1::9")
    assert not _two_hosts([LO, _iface("veth0", "10.0.0.5")], "10.0.0.9")
    # a NIC with a global IPv6 address only: NCCL bootstraps over it (a link-local tunnel beside it would still be
    # used by the socket transport, which spreads over every interface it selects: that one is reported)
    assert not _two_hosts([LO, _iface("ens5", "2001:db8:1::5")], "2001:db8:1::9")


# ------------------------------------------------------------ GPU020: NCCL's default P2P level follows the CPU

from factory import fixture_snapshot  # noqa: E402


def _pcie_pair(vendor, level, nccl="2.26.2", keep=2, topology="NVML_TOPOLOGY_HOSTBRIDGE"):
    env = {"TORCHELASTIC_RUN_ID": "j", "RANK": "0", "WORLD_SIZE": str(keep), "LOCAL_RANK": "0",
           "LOCAL_WORLD_SIZE": str(keep), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "NCCL_P2P_LEVEL": level}

    def edit(s):
        s["host"]["cpu_vendor"] = vendor
        s["packages"]["versions"]["nvidia-nccl-cu12"] = nccl
        s["gpus"]["pairs"] = [{"a": a, "b": b, "p2p": {"nvlink": "NOT_SUPPORTED", "read": "OK", "write": "OK"},
                               "topology": topology} for a in range(keep) for b in range(a + 1, keep)]
    return [f.severity for f in findings_of(fixture_snapshot("rtx4090-4x-no-p2p", env=env, keep=keep, edit=edit),
                                            "GPU020")]


def test_nvl_level_on_a_two_gpu_amd_pcie_box_turns_p2p_off():
    """NCCL 2.23.4+ uses P2P up to SYS on an AMD host with at most two GPUs, so NCCL_P2P_LEVEL=NVL (NVLink only)
    turns off the host-bridge path NCCL would use (club-3090#291's class)."""
    assert _pcie_pair("AuthenticAMD", "NVL") == ["warning"]
    assert _pcie_pair("AuthenticAMD", "PXB", topology="NVML_TOPOLOGY_SYSTEM") == ["warning"]


def test_level_below_a_path_nccl_would_not_use_stays_quiet():
    assert _pcie_pair("GenuineIntel", "NVL") == []  # Intel: NCCL's default stops at PXB anyway
    assert _pcie_pair("AuthenticAMD", "NVL", keep=4) == []  # AMD, four GPUs, NCCL >= 2.23.4: PXB
    assert _pcie_pair("AuthenticAMD", "PHB") == []  # the level reaches the path


# ------------------------------------------------------------ PKG010: NCCL before 2.4.6 hashed the first label only

def _nccl_host(nccl, hostname, world=16, local=8):
    env = {"TORCHELASTIC_RUN_ID": "j", "RANK": "8", "WORLD_SIZE": str(world), "LOCAL_RANK": "0",
           "LOCAL_WORLD_SIZE": str(local), "GROUP_RANK": "1", "MASTER_ADDR": "10.0.0.4", "MASTER_PORT": "29500"}
    snap = make_snapshot(env=env, network={"hostname": hostname}, host={"hostname": hostname},
                         packages={"torch": "1.0.1", "nvidia-nccl-cu12": nccl})
    return [f.title for f in findings_of(snap, "PKG010") if "first label" in f.title]


def test_old_nccl_with_dotted_host_names_across_nodes_is_reported():
    """NVIDIA/nccl#197's class: NCCL 2.4.2 cuts the host name at the first '.', so gpu.rack1 and gpu.rack2 hash alike
    and NCCL tries IPC between them (src/misc/utils.cu at v2.4.2-1; fixed in 2.4.6-1)."""
    assert _nccl_host("2.4.2", "learnfair.rack2")


def test_old_nccl_quiet_cases():
    assert not _nccl_host("2.4.6", "learnfair.rack2")      # fixed release
    assert not _nccl_host("2.4.2", "learnfair0042")        # one label: nothing is cut
    assert not _nccl_host("2.4.2", "learnfair.rack2", world=8, local=8)  # one node


# ------------------------------------------------------------ ENV009: an empty CUDA_VISIBLE_DEVICES in a GPU job

def _cvd(value, world, keep=4):
    env = {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": str(world), "OMPI_COMM_WORLD_LOCAL_RANK": "1",
           "OMPI_COMM_WORLD_LOCAL_SIZE": str(world), "CUDA_VISIBLE_DEVICES": value}
    return [f.severity for f in findings_of(fixture_snapshot("dgx-a100-8x-nvswitch", env=env, keep=keep), "ENV009")]


def test_empty_visible_devices_in_a_rank_of_a_gpu_job_is_a_warning():
    """radical.pilot#2251's class: the launch script exported CUDA_VISIBLE_DEVICES empty over jsrun's per-rank GPU."""
    assert _cvd("", 6) == ["warning"]


def test_deliberate_hiding_stays_a_note():
    assert _cvd("-1", 6) == ["info"]     # the usual CPU-on-purpose value
    assert _cvd("", 1) == ["info"]       # a single process
    assert _cvd("NoDevFiles", 6) == ["info"]


# ------------------------------------------------------------ NET003: a Kubernetes pod is not behind a NAT bridge

def _pod(container):
    env = {"MASTER_ADDR": "trainer-master-0", "MASTER_PORT": "23456", "WORLD_SIZE": "2", "RANK": "1"}
    return sev(env, "NET003", host={"container": container},
               network={"interfaces": [LO, _iface("eth0", "10.244.2.9")],
                        "master_addr": {"host": "trainer-master-0", "addresses": ["10.244.1.17"]}})


def test_pod_address_in_another_nodes_subnet_is_not_a_nat_bridge():
    """A PyTorchJob worker (10.244.2.9) and its master on another node (10.244.1.17): the pod network routes between
    the nodes' pod subnets without NAT (kubeflow/website#2011's pods drew a false NET003)."""
    assert not _pod("kubernetes")


def test_docker_bridge_address_in_another_subnet_is_still_reported():
    assert _pod("docker") and _pod("docker")[0][0] == "warning"


# ------------------------------------------------------------ ENV005: mpirun/mpiexec ranks without LOCAL_RANK

def _mpi(env):
    return [f.severity for f in findings_of(make_snapshot(env=env), "ENV005")]


def test_mpi_ranks_sharing_a_host_without_local_rank_are_reported():
    ompi = {"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "8", "OMPI_COMM_WORLD_LOCAL_RANK": "2",
            "OMPI_COMM_WORLD_LOCAL_SIZE": "8", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    assert _mpi(ompi) == ["warning"]  # mmdetection#8940's class
    hydra = {"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2"}
    assert _mpi(hydra) == ["warning"]  # DeepSpeed's MPICH runner before #3372


def test_mpi_quiet_cases():
    one_per_host = {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "0",
                    "OMPI_COMM_WORLD_LOCAL_SIZE": "1"}
    assert _mpi(one_per_host) == []  # one rank per host: cuda:0 is right
    mapped = {"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "8", "OMPI_COMM_WORLD_LOCAL_RANK": "2",
              "OMPI_COMM_WORLD_LOCAL_SIZE": "8", "LOCAL_RANK": "2", "RANK": "2", "WORLD_SIZE": "8"}
    assert _mpi(mapped) == []


# ------------------------------------------------------------ ENV018 / ENV014: what DeepSpeed's runner takes to other hosts

def _ds(env, hosts=2, listed=(), python="/opt/conda/envs/ds/bin/python", check="ENV018"):
    host = {"deepspeed_hostfile": {"path": "/job/hostfile", "hosts": {f"node-{i}": 8 for i in range(hosts)}, "errors": []},
            "deepspeed_env": {"paths": ["/home/u/.deepspeed_env"] if listed else [], "names": list(listed)},
            "python_executable": python,
            "ssh": {"client": "/usr/bin/ssh", "keys": ["id_ed25519"], "agent": False, "config": False}}
    snap = make_snapshot(env=env, host=host, packages={"deepspeed": "0.17.5"})
    return [(f.severity, f.title) for f in findings_of(snap, check)]


def test_settings_and_tracker_keys_the_runner_does_not_forward_are_reported():
    """ArcticTraining#316's class: WANDB_API_KEY stayed on the launch host; a catalogued setting would make the hosts
    train differently (deepspeed/launcher/runner.py EXPORT_ENVS + .deepspeed_env)."""
    got = [g for g in _ds({"WANDB_API_KEY": "k", "NCCL_DEBUG": "WARN"}) if "carry" in g[1]]
    assert got and got[0][0] == "info" and "WANDB_API_KEY" in got[0][1] and "NCCL_DEBUG" not in got[0][1], got
    got = [g for g in _ds({"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}) if "carry" in g[1]]
    assert got and got[0][0] == "warning", got


def test_forwarded_listed_or_single_host_stays_quiet():
    def carried(got):
        return [g for g in got if "carry" in g[1]]
    assert not carried(_ds({"NCCL_DEBUG": "WARN", "PYTHONPATH": "/x"}))          # forwarded prefixes
    assert not carried(_ds({"WANDB_API_KEY": "k"}, listed=["WANDB_API_KEY"]))   # in .deepspeed_env
    assert not _ds({"WANDB_API_KEY": "k"}, hosts=1)                            # one host: the env is copied
    assert not _ds({"WANDB_API_KEY": "k", "RANK": "3", "LOCAL_RANK": "3"})     # inside a rank, not the launch shell


def test_env018_without_pdsh_another_launcher_is_in_use_so_a_note():
    """Round 10 (left by round 9): the `--launcher` flag is on deepspeed's command line, unseen. pdsh is the default;
    without it the launch uses another launcher, and slurm/mpich/impi/mvapich carry the whole environment
    (multinode_runner.py @edaa7221): a note, not a warning. With pdsh installed the warning stays (trigger above)."""
    host = {"deepspeed_hostfile": {"path": "/job/hostfile", "hosts": {"a": 8, "b": 8}, "errors": []},
            "launcher_tools": {"found": {}, "missing": ["pdsh"]}}
    env = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "SLURM_JOB_ID": "77"}
    got = [f for f in findings_of(make_snapshot(env=env, host=host, packages={"deepspeed": "0.17.5"}), "ENV018")
           if "carry" in f.title]
    assert [f.severity for f in got] == ["info"] and "--launcher slurm" in got[0].title, [f.title for f in got]
    host["launcher_tools"] = {"found": {"pdsh": "/usr/bin/pdsh"}, "missing": []}
    got = [f for f in findings_of(make_snapshot(env=env, host=host, packages={"deepspeed": "0.17.5"}), "ENV018")
           if "carry" in f.title]
    assert [f.severity for f in got] == ["warning"] and "default pdsh launcher" in got[0].title


def test_env018_notes_the_interpreter_path_run_on_every_host():
    """DeepSpeedExamples#889's class: the runner runs this host's sys.executable on every host; ENV014 (ssh) stays
    quiet when ssh is in order."""
    got = _ds({})
    assert got == [("info", got[0][1])] and "/opt/conda/envs/ds/bin/python" in got[0][1], got
    assert not _ds({}, hosts=1)
    assert not _ds({}, check="ENV014")


def test_deepspeed_env_file_is_gathered_names_only(tmp_path):
    from ddpdoctor.gather import Sources
    from ddpdoctor.gather.host import deepspeed_env_file

    home = tmp_path / "home" / "u"
    home.mkdir(parents=True)
    (home / ".deepspeed_env").write_text("WANDB_API_KEY=secret\nPYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n\n")
    out = deepspeed_env_file(Sources(root=str(tmp_path), environ={"HOME": "/home/u"}))
    assert out["names"] == ["PYTORCH_CUDA_ALLOC_CONF", "WANDB_API_KEY"] and "secret" not in str(out)
    assert deepspeed_env_file(Sources(root=str(tmp_path / "none"), environ={"HOME": "/home/u"}))["names"] == []


# ------------------------------------------------------------ ENV007: Lightning takes any SLURM_NTASKS process as srun's

ALLOC = {"SLURM_JOB_ID": "5512", "SLURM_JOB_NAME": "train", "SLURM_NTASKS": "1", "SLURM_NNODES": "1",
         "SLURM_JOB_NUM_NODES": "1", "SLURM_GPUS_ON_NODE": "4", "SLURM_TASKS_PER_NODE": "1"}


def _lightning(env, lightning="2.5.0"):
    pk = {"lightning": lightning} if lightning else {}
    return [(f.severity, f.title) for f in findings_of(make_snapshot(env=env, packages=pk), "ENV007")
            if "Lightning" in f.title]


def test_lightning_in_an_allocation_outside_srun_is_reported():
    """Lightning#16955's class: `python train.py` (4 devices) in a 1-task allocation; and torchrun's workers there."""
    assert _lightning(ALLOC) and _lightning(ALLOC)[0][0] == "warning"
    torchrun = dict(ALLOC, TORCHELASTIC_RUN_ID="j", RANK="1", LOCAL_RANK="1", WORLD_SIZE="4", LOCAL_WORLD_SIZE="4",
                    MASTER_ADDR="127.0.0.1", MASTER_PORT="29500")
    assert _lightning(torchrun)


def test_lightning_quiet_cases():
    assert not _lightning(dict(ALLOC, SLURM_JOB_NAME="interactive"))   # Lightning's own escape hatch
    assert not _lightning(ALLOC, lightning=None)                       # no Lightning: torchrun-in-sbatch is fine
    srun_step = dict(ALLOC, SLURM_NTASKS="4", SLURM_NTASKS_PER_NODE="4", SLURM_TASKS_PER_NODE="4", SLURM_STEP_ID="0", SLURM_PROCID="1",
                     SLURM_LOCALID="1", SLURM_NODEID="0")
    assert not _lightning(srun_step)                                   # srun started one task per GPU


def test_mpi_ranks_under_horovod_are_a_note():
    """Horovod scripts pick the GPU with hvd.local_rank(), which reads the MPI rank: no LOCAL_RANK needed."""
    ompi = {"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "8", "OMPI_COMM_WORLD_LOCAL_RANK": "2",
            "OMPI_COMM_WORLD_LOCAL_SIZE": "8"}
    got = [f.severity for f in findings_of(make_snapshot(env=ompi, packages={"horovod": "0.28.1"}), "ENV005")]
    assert got == ["info"]


def test_mpi_ranks_on_a_host_without_gpus_are_a_note():
    ompi = {"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "8", "OMPI_COMM_WORLD_LOCAL_RANK": "2",
            "OMPI_COMM_WORLD_LOCAL_SIZE": "8"}
    snap = make_snapshot(env=ompi, gpus={"unavailable": "no NVIDIA driver found (NVML library not loaded)"})
    assert [f.severity for f in findings_of(snap, "ENV005")] == ["info"]


# ------------------------------------------------------------ GPU011: persistence off where GPU containers start
# (wave 2, batch 51: NVIDIA/nvidia-docker#723). libnvidia-container's driver RPC client waits 10 s
# (src/rpc.c setup_client) for nvmlInit_v2 (src/driver.c driver_init_1_svc): a cold init past it stops every
# container start, so on a host with the NVIDIA container runtime persistence-off is more than a cost.

def _persistence(host_edit):
    from factory import fixture_snapshot

    def edit(sections):
        for d in sections["gpus"]["devices"]:
            d["persistence_mode"] = False
        sections["host"].update(host_edit)
    return [(f.severity, f.title) for f in findings_of(fixture_snapshot("dgx-a100-8x-nvswitch", edit=edit), "GPU011")]


def test_persistence_off_on_a_host_that_starts_gpu_containers_is_a_warning():
    got = _persistence({"nvidia_container_runtime": "/usr/bin/nvidia-container-cli", "container": None})
    assert got and got[0][0] == "warning" and "containers" in got[0][1], got
    got = _persistence({"nvidia_container_runtime": "/etc/nvidia-container-runtime/config.toml", "container": None,
                        "virtualization": "hyperv"})
    assert got and got[0][0] == "warning", got


def test_persistence_off_elsewhere_stays_a_cost():
    # no container runtime: a slower start only (info, as before)
    got = _persistence({"nvidia_container_runtime": None, "container": None})
    assert got and got[0][0] == "info", got
    # inside a container the container has started: the runtime's timeout is behind us
    got = _persistence({"nvidia_container_runtime": "/usr/bin/nvidia-container-cli", "container": "docker"})
    assert got and got[0][0] == "info", got
    # persistence on: nothing
    from factory import fixture_snapshot
    snap = fixture_snapshot("dgx-a100-8x-nvswitch",
                            edit=lambda s: s["host"].update({"nvidia_container_runtime": "/usr/bin/x"}))
    assert not findings_of(snap, "GPU011")


def test_nvidia_container_runtime_gatherer(tmp_path):
    import os
    from ddpdoctor.gather import Sources
    from ddpdoctor.gather.host import nvidia_container_runtime

    root = tmp_path
    (root / "bin").mkdir()
    src = Sources(environ={"PATH": str(root / "bin")}, root=str(root))
    if not os.path.exists("/usr/bin/nvidia-container-cli"):
        assert nvidia_container_runtime(src) is None
    cfg = root / "etc" / "nvidia-container-runtime"
    cfg.mkdir(parents=True)
    (cfg / "config.toml").write_text("")
    assert nvidia_container_runtime(src) in ("/etc/nvidia-container-runtime/config.toml", "/usr/bin/nvidia-container-cli")
    cli = root / "bin" / "nvidia-container-cli"
    cli.write_text("#!/bin/sh\n")
    cli.chmod(0o755)
    assert nvidia_container_runtime(src) == str(cli)
