"""check33 (issue 26, round 25, first cycle): classes from primary sources, each with a trigger and a quiet fixture.
Pure: snapshots are built by the factory over recorded facts; no process is started."""
from __future__ import annotations

from factory import findings_of, make_snapshot

# -- ENV018 arm: the dynamic loader's variables (glibc elf/rtld.c process_envvars: LD_LIBRARY_PATH, LD_PRELOAD), which
# DeepSpeed's runner does not forward (runner.py EXPORT_ENVS @ edaa7221; data/launchers.json
# deepspeed_remote_loader_variables) --


def _carried(env, listed=()):
    host = {"deepspeed_hostfile": {"path": "/job/hostfile", "hosts": {"node-0": 8, "node-1": 8}, "errors": []},
            "deepspeed_env": {"paths": ["/home/u/.deepspeed_env"] if listed else [], "names": list(listed)},
            "ssh": {"client": "/usr/bin/ssh", "keys": ["id_ed25519"], "agent": False, "config": False}}
    snap = make_snapshot(env=env, host=host, packages={"deepspeed": "0.17.5"})
    return [f for f in findings_of(snap, "ENV018") if "carry" in f.title]


def test_library_path_set_here_is_counted_beside_a_catalogued_setting():
    [f] = _carried({"LD_LIBRARY_PATH": "/opt/nccl-2.21/lib:/usr/local/cuda/lib64", "OMP_NUM_THREADS": "8"})
    assert f.severity == "warning"
    assert "LD_LIBRARY_PATH" in f.title and "OMP_NUM_THREADS" in f.title
    assert "dynamic loader" in f.detail and "LD_LIBRARY_PATH" in f.evidence["not_forwarded"]
    assert '"LD_LIBRARY_PATH=$LD_LIBRARY_PATH"' in f.fix


def test_preload_alone_is_counted():
    [f] = _carried({"LD_PRELOAD": "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"})
    assert "LD_PRELOAD" in f.title and f.severity == "warning"


def test_loader_variables_listed_in_deepspeed_env_or_empty_are_quiet():
    assert _carried({"LD_LIBRARY_PATH": "/opt/nccl/lib"}, listed=["LD_LIBRARY_PATH"]) == []
    assert _carried({"LD_LIBRARY_PATH": ""}) == []
    assert _carried({"LD_LIBRARY_PATH": ":"}) == []
    # forwarded by name (PYTHON*), not a loader variable
    assert _carried({"PYTHONPATH": "/work/src"}) == []


def test_loader_variable_names_come_from_the_data_file_with_their_sources():
    import json
    import pathlib

    from ddpdoctor.facts.launchers import deepspeed_remote_loader_variables

    data = json.loads((pathlib.Path(__file__).resolve().parents[1] / "ddpdoctor" / "data" / "launchers.json")
                      .read_text())["deepspeed_remote_loader_variables"]
    assert set(deepspeed_remote_loader_variables()) == {"LD_LIBRARY_PATH", "LD_PRELOAD"}
    assert {s["repo"] for s in data["sources"]} == {"bminor/glibc", "deepspeedai/DeepSpeed"}
    assert all(len(s["commit"]) == 40 for s in data["sources"])


# -- PKG030: an accelerate older than the installed transformers' own ACCELERATE_MIN_VERSION (transformers
# utils/import_utils.py @71e0f4e7: 0.26.0; TrainingArguments._setup_devices raises ImportError below it;
# data/transformers_floors.json) --

FLOOR = {"accelerate": "0.26.0", "from": "transformers/utils/import_utils.py"}


def _pkg030(**versions):
    return findings_of(make_snapshot(packages=dict(versions, transformers_floors=FLOOR)), "PKG030")


def test_accelerate_below_the_installed_transformers_floor_is_a_warning_naming_the_floor():
    [f] = _pkg030(transformers="4.46.0", accelerate="0.21.0")
    assert f.severity == "warning" and "accelerate 0.21.0" in f.title and "accelerate>=0.26.0" in f.title
    assert "requires `accelerate>=0.26.0`" in f.detail and f.fix == 'pip install -U "accelerate>=0.26.0"'


def test_accelerate_at_or_above_the_floor_or_without_a_floor_is_quiet():
    assert _pkg030(transformers="4.46.0", accelerate="0.26.0") == []
    assert _pkg030(transformers="4.46.0", accelerate="1.2.1") == []
    assert _pkg030(transformers="4.46.0") == []  # accelerate not installed: not judged here
    old = make_snapshot(packages={"transformers": "4.30.0", "accelerate": "0.19.0"})  # a release without the constant
    assert findings_of(old, "PKG030") == []


def test_floor_is_parsed_from_the_module_text():
    from ddpdoctor.gather.packages import parse_transformers_floors as parse

    assert parse('TORCH_FX_REQUIRED_VERSION = version.parse("1.10")\n\nACCELERATE_MIN_VERSION = "0.26.0"\n') == "0.26.0"
    assert parse("x = 1\nACCELERATE_MIN_VERSION = '1.1.0'\n") == "1.1.0"
    assert parse('def f(min_version: str = ACCELERATE_MIN_VERSION):\n    pass\n') is None
    assert parse('    ACCELERATE_MIN_VERSION = "9.9.9"  # not module level\n') is None
    assert parse("") is None


def test_floor_is_read_through_the_real_call_path_from_the_installed_transformers():
    import importlib.util

    import pytest

    if importlib.util.find_spec("transformers") is None:
        pytest.skip("transformers is not installed")
    from ddpdoctor.gather.packages import transformers_floors

    got = transformers_floors()
    from transformers.utils import import_utils  # the constant transformers itself compares with

    assert got["accelerate"] == import_utils.ACCELERATE_MIN_VERSION and got["from"].startswith("transformers/utils/")


# -- NET002 arm: an IPv6 MASTER_ADDR (torch/distributed/rendezvous.py @0140b62d: env:// hands MASTER_ADDR to TCPStore
# unchanged; tcp:// goes through urllib's urlparse; data/launchers.json master_addr_ipv6) --

def _net002(addr, resolved=None, error=None):
    res = {"host": addr, "addresses": resolved or []}
    if error:
        res["error"] = error
    snap = make_snapshot(env={"MASTER_ADDR": addr, "MASTER_PORT": "29500"}, network={"master_addr": res})
    return findings_of(snap, "NET002")


def test_bracketed_ipv6_master_addr_is_an_error_whose_fix_drops_the_brackets():
    [f] = _net002("[fd00:10::5]", error="[Errno -2] Name or service not known")
    assert f.severity == "error" and "brackets" in f.title and f.fix == "export MASTER_ADDR=fd00:10::5"
    assert "does not resolve:" not in f.title  # the cause named, not only the symptom


def test_bare_ipv6_master_addr_is_a_note_about_tcp_urls_with_urllibs_own_error():
    [f] = _net002("fd00:10::5", resolved=["fd00:10::5"])
    assert f.severity == "info" and f.evidence["guess"] is True
    assert "Port could not be cast to integer value as '10::5:29500'" in f.detail
    assert 'tcp://[fd00:10::5]:29500' in f.fix
    # the message in the data file is urllib's own: the URL it names really fails to parse here
    from urllib.parse import urlparse

    import pytest

    with pytest.raises(ValueError, match="Port could not be cast to integer value as '10::5:29500'"):
        urlparse("tcp://fd00:10::5:29500").port
    assert urlparse("tcp://[fd00:10::5]:29500").port == 29500


def test_ipv4_and_host_names_get_no_ipv6_note():
    assert _net002("10.0.0.5", resolved=["10.0.0.5"]) == []
    assert _net002("node-0", resolved=["10.0.0.5"]) == []


def test_tcp_url_with_a_bare_ipv6_host_in_a_script_option_or_variable_is_an_error_with_urllibs_message():
    cmd = {"launcher": "python", "options": {}, "program": "main_moco.py", "depth": 0,
           "script_options": {"dist-url": "tcp://fd00:10::5:23456", "world-size": "2"}}
    snap = make_snapshot(env={"MASTER_ADDR": "fd00:10::5", "MASTER_PORT": "29500"},
                         network={"master_addr": {"host": "fd00:10::5", "addresses": ["fd00:10::5"]}},
                         launch={"commands": [cmd], "depth_read": 0})
    got = findings_of(snap, "NET002")
    [f] = [g for g in got if g.severity == "error"]
    assert "tcp://fd00:10::5:23456" in f.title and "--dist-url of main_moco.py" in f.title
    assert "Port could not be cast to integer value as '10::5:23456'" in f.detail
    assert f.fix.startswith("tcp://[fd00:10::5]:23456")
    assert [g.severity for g in got] == ["error"]  # the URL is seen: no separate guess-level note
    # a URL option with no MASTER_ADDR at all
    [f] = findings_of(_with_option("tcp://2001:db8::7:29500"), "NET002")
    assert f.severity == "error" and "--init_method of train.py" in f.title


def _with_option(url):
    cmd = {"launcher": "python", "options": {}, "program": "train.py", "depth": 0, "script_options": {"init_method": url}}
    return make_snapshot(launch={"commands": [cmd], "depth_read": 0})


def test_bracketed_or_ipv4_tcp_urls_are_quiet():
    for url in ("tcp://[fd00:10::5]:23456", "tcp://10.0.0.5:23456", "tcp://node-0:23456", "env://"):
        assert findings_of(_with_option(url), "NET002") == [], url


# -- NET021: on AWS EFA, the variables aws-ofi-nccl's EFA cheatsheet (doc/efa-env-var.md @2daf7d30;
# data/efa_settings.json) says not to use (RDMAV_*) or not to need --

EFA = {"rdma_devices": ["rdmap16s27", "rdmap32s27"], "rdma_drivers": {"rdmap16s27": "efa", "rdmap32s27": "efa"},
       "net_plugins": ["/opt/amazon/ofi-nccl/lib/libnccl-net.so"]}
IB = {"rdma_devices": ["mlx5_0"], "rdma_drivers": {"mlx5_0": "mlx5_core"},
      "rdma_ports": {"mlx5_0:1": {"link_layer": "InfiniBand", "state": "ACTIVE"}}}


def _net021(env, pci=EFA):
    return findings_of(make_snapshot(env=env, pci=pci), "NET021")


def test_rdmav_fork_safe_on_efa_is_a_warning_quoting_the_plugins_document():
    got = _net021({"RDMAV_FORK_SAFE": "1", "NCCL_PROTO": "simple", "FI_PROVIDER": "efa"})
    [w] = [f for f in got if f.severity == "warning"]
    assert "RDMAV_FORK_SAFE=1" in w.title and "rdmap16s27" in w.title and "can break things" in w.detail
    assert w.fix.startswith("unset RDMAV_FORK_SAFE")
    [n] = [f for f in got if f.severity == "info"]
    assert "NCCL_PROTO=simple" in n.title and "FI_PROVIDER=efa" in n.title and "aws-ofi-nccl<=1.5.0" in n.detail


def test_efa_note_only_for_the_values_the_rows_are_about():
    [n] = _net021({"FI_EFA_USE_DEVICE_RDMA": "1", "NCCL_SOCKET_NTHREADS": "4", "NCCL_PROTO": "LL128",
                   "FI_EFA_USE_HUGE_PAGE": "0"})
    assert n.severity == "info" and set(n.evidence["settings"]) == {"FI_EFA_USE_DEVICE_RDMA", "NCCL_SOCKET_NTHREADS"}


def test_the_same_settings_off_efa_or_none_set_are_quiet():
    env = {"RDMAV_FORK_SAFE": "1", "NCCL_PROTO": "simple", "NCCL_MIN_CHANNELS": "32"}
    assert _net021(env, pci=IB) == []
    assert _net021(env, pci={"rdma_devices": []}) == []
    assert _net021({"NCCL_DEBUG": "WARN", "FI_EFA_USE_HUGE_PAGE": "0", "FI_EFA_FORK_SAFE": "0"}) == []


def test_rdmav_variables_are_gathered():
    from ddpdoctor.gather.env import relevant

    assert relevant("RDMAV_FORK_SAFE") and relevant("RDMAV_HUGEPAGES_SAFE")


# -- SYS012: RLIMIT_STACK unlimited under an NCCL older than 2.28.3 (NVIDIA/nccl runtime_and_mpi_issues.rst 'Stack
# size' @5067397c; src/init.cc setCpuStackSize @f1308997 = 2.28.3-1; data/nccl_stack_limit.json) --

UNLIMITED = {"RLIMIT_STACK": {"soft": None, "hard": None}}
EIGHT_MB = {"RLIMIT_STACK": {"soft": 8388608, "hard": None}}


def _sys012(rlimits, nccl=None, env=None, gpus=None):
    packages = {"torch": "2.5.1"}
    if nccl:
        packages["nvidia-nccl-cu12"] = nccl
    return findings_of(make_snapshot(host={"rlimits": rlimits}, packages=packages, env=env or {}, gpus=gpus), "SYS012")


def test_unlimited_stack_under_an_nccl_before_2_28_3_is_a_warning_naming_both():
    [f] = _sys012(UNLIMITED, nccl="2.21.5")
    assert f.severity == "warning" and "NCCL 2.21.5" in f.title and "2.28.3" in f.title
    assert f.fix.startswith("ulimit -s 8192") and "2 MB" in f.detail


def test_unlimited_stack_with_ncclss_own_fix_switched_off_is_a_warning():
    [f] = _sys012(UNLIMITED, nccl="2.28.3", env={"NCCL_SET_CPU_STACK_SIZE": "0"})
    assert f.severity == "warning" and "NCCL_SET_CPU_STACK_SIZE=0" in f.title


def test_finite_stack_or_an_nccl_that_fixes_it_is_quiet():
    assert _sys012(EIGHT_MB, nccl="2.21.5") == []
    assert _sys012(UNLIMITED, nccl="2.28.3") == []
    assert _sys012(UNLIMITED, nccl="2.29.2") == []
    assert _sys012({}, nccl="2.21.5") == []  # not recorded: nothing claimed
    assert _sys012(UNLIMITED) == []          # no NCCL known and no GPU: nothing to judge


def test_unknown_nccl_on_a_gpu_host_is_a_note():
    [f] = _sys012(UNLIMITED, gpus={"devices": [{"index": 0, "name": "NVIDIA H100 80GB HBM3"}]})
    assert f.severity == "info" and "not recorded" in f.title


def test_the_gather_records_the_stack_limit_as_the_process_has_it():
    import resource

    from ddpdoctor.gather.host import rlimits

    soft, _hard = resource.getrlimit(resource.RLIMIT_STACK)
    got = rlimits()["RLIMIT_STACK"]["soft"]
    assert got == (None if soft == resource.RLIM_INFINITY else soft)


# -- NET022: HPE Slingshot (CXI) NICs in a job across hosts against HPE's NCCL application note
# (ryanhankins/shs-ccl-docs nccl/nccl_tuning_guide.md @1e588596; data/cxi_settings.json) --

CXI = {"cxi_devices": ["cxi0", "cxi1", "cxi2", "cxi3"], "rdma_devices": []}
TWO_NODES = {"RANK": "0", "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4", "MASTER_ADDR": "nid001", "MASTER_PORT": "29500",
             "TORCHELASTIC_RUN_ID": "j1", "GROUP_RANK": "0"}
HPE_SETTINGS = {"FI_MR_CACHE_MONITOR": "userfaultfd", "FI_CXI_DISABLE_HOST_REGISTER": "1",
                "FI_CXI_DEFAULT_CQ_SIZE": "131072", "FI_CXI_RDZV_PROTO": "alt_read", "FI_CXI_RX_MATCH_MODE": "hybrid",
                "FI_CXI_RDZV_EAGER_SIZE": "0", "FI_CXI_DEFAULT_TX_SIZE": "2048", "NCCL_NET_GDR_LEVEL": "PHB",
                "NCCL_NET": "AWS Libfabric"}


def _net022(env, pci=CXI):
    return findings_of(make_snapshot(env=dict(TWO_NODES, **env), pci=pci), "NET022")


def test_slingshot_job_without_the_mandatory_libfabric_settings_is_a_warning_and_a_note():
    got = _net022({"FI_MR_CACHE_MONITOR": "memhooks"})
    [w] = [f for f in got if f.severity == "warning"]
    assert "FI_MR_CACHE_MONITOR=memhooks" in w.title and "FI_CXI_DISABLE_HOST_REGISTER=(unset)" in w.title
    assert "may cause deadlocks" in w.detail
    assert w.fix == "export FI_MR_CACHE_MONITOR=userfaultfd FI_CXI_DISABLE_HOST_REGISTER=1"
    [n] = [f for f in got if f.severity == "info"]
    assert "FI_CXI_DEFAULT_CQ_SIZE" in n.title and "NCCL_NET='AWS Libfabric'" in n.fix


def test_the_notes_values_and_larger_queues_are_quiet():
    assert _net022(HPE_SETTINGS) == []
    assert _net022(dict(HPE_SETTINGS, FI_MR_CACHE_MONITOR="kdreg2", FI_CXI_DEFAULT_CQ_SIZE="262144")) == []


def test_no_slingshot_nic_or_one_host_is_quiet():
    assert _net022({}, pci={"cxi_devices": [], "rdma_devices": []}) == []
    one = findings_of(make_snapshot(env={"RANK": "0", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "4",
                                         "TORCHELASTIC_RUN_ID": "j1"}, pci=CXI), "NET022")
    assert one == []


def test_cxi_devices_are_gathered_from_the_drivers_class(tmp_path):
    from ddpdoctor.gather import Sources
    from ddpdoctor.gather.pci import cxi_devices

    (tmp_path / "sys" / "class" / "cxi_user" / "cxi0").mkdir(parents=True)
    (tmp_path / "sys" / "class" / "cxi_user" / "cxi1").mkdir(parents=True)
    assert cxi_devices(Sources(root=str(tmp_path))) == ["cxi0", "cxi1"]
    assert cxi_devices(Sources(root=str(tmp_path / "none"))) == []


def test_slingshot_known_by_its_hsn_interfaces_when_the_driver_class_was_not_recorded():
    ifaces = [{"name": "lo", "up": True, "addresses": [{"family": "ipv4", "address": "127.0.0.1"}]},
              {"name": "hsn0", "up": True, "addresses": [{"family": "ipv4", "address": "10.150.0.5"}]}]
    got = findings_of(make_snapshot(env=TWO_NODES, pci={"rdma_devices": []}, network={"interfaces": ifaces}), "NET022")
    assert [f.severity for f in got] == ["warning", "info"] and "hsn0" in got[0].title
    ifaces[1]["name"] = "eth1"  # no Slingshot interface, no cxi device: quiet
    assert findings_of(make_snapshot(env=TWO_NODES, pci={"rdma_devices": []}, network={"interfaces": ifaces}),
                       "NET022") == []
