"""Every issue-2 check: a fixture that triggers it and one that does not (ruff-style: one check per test)."""
import pytest

from factory import GiB, findings_of, make_snapshot

MiB = 1024 ** 2
TORCHRUN = {"TORCHELASTIC_RUN_ID": "abc", "RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4",
            "GROUP_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "OMP_NUM_THREADS": "1",
            "TORCHELASTIC_RESTART_COUNT": "0", "GROUP_WORLD_SIZE": "1"}
SLURM_STEP = {"SLURM_JOB_ID": "77", "SLURM_STEP_ID": "0", "SLURM_PROCID": "3", "SLURM_LOCALID": "1",
              "SLURM_NTASKS": "8", "SLURM_NTASKS_PER_NODE": "4", "SLURM_NODEID": "1", "SLURM_JOB_NUM_NODES": "2",
              "SLURM_GPUS_ON_NODE": "4", "RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4",
              "MASTER_ADDR": "node01", "MASTER_PORT": "29400", "OMP_NUM_THREADS": "4"}

# (check id, snapshot kwargs that trigger it, expected severity, subjects that must appear)
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
    ("NET002", dict(env={"MASTER_ADDR": "no-such-host.invalid"},
                    network={"master_addr": {"host": "no-such-host.invalid", "error": "Name or service not known"}}),
     "error", {"MASTER_ADDR", "host:no-such-host.invalid"}),
    ("NET002", dict(env={**SLURM_STEP, "MASTER_ADDR": "localhost"},
                    network={"master_addr": {"host": "localhost", "addresses": ["127.0.0.1", "::1"]}}),
     "error", {"MASTER_ADDR"}),
    ("NCCL001", dict(env={"NCCL_SOCKET_IFNAMES": "eth0"}), "warning", {"NCCL_SOCKET_IFNAMES"}),
    ("NCCL001", dict(env={"NCCL_FROBNICATE": "1"}), "info", {"NCCL_FROBNICATE"}),
    ("NCCL001", dict(env={"TORCH_NCCL_BLOCKING_WAITS": "1"}), "warning", {"TORCH_NCCL_BLOCKING_WAITS"}),
    ("NCCL002", dict(env={"NCCL_ASYNC_ERROR_HANDLING": "1"}), "warning", {"NCCL_ASYNC_ERROR_HANDLING"}),
    ("NCCL002", dict(env={"TORCH_NCCL_TRACE_BUFFER_SIZE": "2000"}), "warning", {"TORCH_NCCL_TRACE_BUFFER_SIZE"}),
    ("NCCL003", dict(env={"NCCL_DEBUG": "verbose"}), "warning", {"NCCL_DEBUG"}),
    ("NCCL003", dict(env={"NCCL_P2P_DISABLE": "true"}), "warning", {"NCCL_P2P_DISABLE"}),
    ("NCCL003", dict(env={"TORCH_DISTRIBUTED_DEBUG": "VERBOSE"}), "warning", {"TORCH_DISTRIBUTED_DEBUG"}),
    ("NCCL003", dict(env={"OMP_NUM_THREADS": "auto"}), "warning", {"OMP_NUM_THREADS"}),
    ("NCCL003", dict(env={"NCCL_DEBUG_SUBSYS": "INIT,NETWORK"}), "warning", {"NCCL_DEBUG_SUBSYS"}),
    ("NCCL004", dict(env={"NCCL_P2P_DISABLE": "1", "NCCL_IB_DISABLE": "1"}), "info", {"NCCL_P2P_DISABLE", "NCCL_IB_DISABLE"}),
    ("SYS001", dict(host={"container": "docker", "shm": {"path": "/dev/shm", "exists": True, "size_bytes": 64 * MiB,
                                                         "free_bytes": 64 * MiB}}), "warning", {"path:/dev/shm"}),
    ("SYS001", dict(env=TORCHRUN | {"LOCAL_WORLD_SIZE": "8", "WORLD_SIZE": "8"},
                    host={"shm": {"path": "/dev/shm", "exists": True, "size_bytes": 2 * GiB, "free_bytes": 2 * GiB}}),
     "warning", {"path:/dev/shm"}),
    ("SYS002", dict(host={"rlimits": {"RLIMIT_NOFILE": {"soft": 1024, "hard": 1048576}}}), "warning", set()),
    ("TOK001", dict(env={"TOKENIZERS_PARALLELISM": "true"}), "error", {"TOKENIZERS_PARALLELISM"}),
    ("TOK001", dict(env={"TOKENIZERS_PARALLELISM": "1"}), "error", {"TOKENIZERS_PARALLELISM"}),
    ("PKG001", dict(packages={"pynvml": "11.5.0"}), "warning", {"pkg:pynvml"}),
]

# (check id, snapshot kwargs that must NOT trigger it)
CLEAN = [
    ("ENV001", dict()), ("ENV001", dict(env=TORCHRUN)), ("ENV001", dict(env={"WORLD_SIZE": "1"})),
    ("ENV002", dict(env=TORCHRUN, network={"listening_tcp_ports": [29500]})),
    ("ENV002", dict(env={"MASTER_ADDR": "n0", "MASTER_PORT": "29555", "RANK": "1", "WORLD_SIZE": "2"},
                    network={"listening_tcp_ports": [29555]})),
    ("ENV002", dict(network={"listening_tcp_ports": [22, 8080]})),
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
    ("NET001", dict(env={"NCCL_SOCKET_IFNAME": "lo", "GLOO_SOCKET_IFNAME": "lo"})),  # one node: loopback is fine
    ("NET001", dict()),
    ("NET002", dict(env=SLURM_STEP)), ("NET002", dict(env={"MASTER_ADDR": "127.0.0.1"})), ("NET002", dict()),
    ("NCCL001", dict(env={"NCCL_DEBUG": "INFO", "NCCL_SOCKET_IFNAME": "eth0", "NCCL_IB_HCA": "mlx5",
                          "NCCL_OFI_USE_GDRCOPY": "1", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
                          "TORCH_NCCL_DUMP_ON_TIMEOUT": "1", "NCCL_NVLS_ENABLE": "0"})),
    ("NCCL002", dict(env={"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1", "TORCH_FR_BUFFER_SIZE": "2000"})),
    ("NCCL002", dict(env={"TORCH_NCCL_TRACE_BUFFER_SIZE": "2000"}, packages={"torch": "2.8.0"})),
    ("NCCL003", dict(env={"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET,^COLL", "NCCL_P2P_DISABLE": "1",
                          "TORCH_DISTRIBUTED_DEBUG": "DETAIL", "OMP_NUM_THREADS": "4", "NCCL_P2P_LEVEL": "NVL",
                          "NCCL_PROTO": "^LL128", "NCCL_IB_GID_INDEX": "3", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "3"})),
    ("NCCL004", dict()), ("NCCL004", dict(env={"NCCL_P2P_DISABLE": "0"})),
    ("NCCL004", dict(env={"NCCL_P2P_DISABLE": "1"}, gpus={"devices": [{"index": 0}]})),
    ("SYS001", dict()), ("SYS001", dict(env=TORCHRUN)),
    ("SYS002", dict()), ("SYS002", dict(host={"rlimits": {"RLIMIT_NOFILE": {"soft": 1024, "hard": 1024}},
                                             "default_sharing_strategy": "file_system"})),
    ("TOK001", dict(env={"TOKENIZERS_PARALLELISM": "false"})), ("TOK001", dict(env={"TOKENIZERS_PARALLELISM": "off"})),
    ("TOK001", dict()), ("TOK001", dict(env={"TOKENIZERS_PARALLELISM": "true"}, host={"default_start_method": "spawn"})),
    ("PKG001", dict()),
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
