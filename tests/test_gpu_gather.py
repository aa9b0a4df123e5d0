"""The `gpus` gatherer: record/replay round trip, per-field NVML failures, the live binding over a
fake driver, missing driver vs unloaded driver, and the deadline."""
import copy
import json
import os
import time
import types

import pytest
from hypothesis import given, settings, strategies as st

import pynvml
from fake_nvml import FakeGpu, FakeNvmlLibrary
from ddpdoctor.gather import Sources
from ddpdoctor.gather.gpus import gather_gpus, gather_with, walk
from ddpdoctor.gather.nvml import (DEVICE_FIELDS, PAIR_FIELDS, SYSTEM_FIELDS, LiveNvml, NvmlUnavailable,
                                   ReplayNvml, cpulist)
from ddpdoctor.pipeline.snapshot import Snapshot

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SNAPS = os.path.join(ROOT, "fixtures", "snapshots")
GPU_FIXTURES = [n[:-5] for n in sorted(os.listdir(SNAPS)) if n.endswith(".json") and n != "cpu-only.json"]


def recorded(name):
    with open(os.path.join(SNAPS, f"{name}.json"), encoding="utf-8") as fh:
        return json.load(fh)["sections"]["gpus"]


def strip(section):
    return {k: v for k, v in section.items() if k not in ("backend", "_elapsed_ms")}


@pytest.mark.parametrize("name", GPU_FIXTURES)
def test_replay_round_trip_reproduces_the_recorded_section(name):
    section = recorded(name)
    again = gather_with(ReplayNvml(section), Sources(environ={}))
    assert strip(again) == strip(section)


def test_not_supported_on_one_field_is_recorded_for_that_field_only():
    section = recorded("dgx-a100-8x-nvswitch")
    backend = ReplayNvml(section, inject={(2, "pcie.replay_counter"): "Not Supported",
                                          (None, "cuda_driver_version"): "Function Not Found",
                                          ((0, 1), "p2p.read"): "Unknown Error"})
    out = walk(backend, None)
    dev = out["devices"][2]
    assert dev["errors"] == dict(section["devices"][2].get("errors") or {}, **{"pcie.replay_counter": "Not Supported"})
    assert dev["pcie"]["replay_counter"] is None and dev["pcie"]["width_current"] == 16
    assert out["errors"] == {"cuda_driver_version": "Function Not Found"} and out["cuda_driver"] is None
    assert out["pairs"][0]["errors"] == {"p2p.read": "Unknown Error"} and out["pairs"][0]["p2p"]["nvlink"] == "OK"
    assert backend.shut


FIELDS = st.sampled_from([(i, f) for i in range(4) for f in DEVICE_FIELDS] + [(None, f) for f in SYSTEM_FIELDS]
                         + [((a, b), f) for a in range(4) for b in range(a + 1, 4) for f in PAIR_FIELDS]
                         + [(None, "count")])
FAILURES = st.sampled_from(["Not Supported", "GPU is lost", "Insufficient Permissions", ValueError("odd answer"),
                            TypeError("argument 3: wrong type"), OSError("ioctl failed"), KeyError("busId"),
                            ZeroDivisionError("x")])


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(FIELDS, FAILURES, max_size=12))
def test_no_nvml_failure_on_any_field_crashes_a_run(inject):
    from ddpdoctor.pipeline.judge import judge

    section = recorded("docker-shm-64mb-hgx-a100-4x")
    out = gather_with(ReplayNvml(section, inject=inject), Sources(environ={}), deadline_s=30)
    assert "error" not in out
    with open(os.path.join(SNAPS, "docker-shm-64mb-hgx-a100-4x.json"), encoding="utf-8") as fh:
        doc = json.load(fh)
    doc["sections"]["gpus"] = out
    report = judge(Snapshot.from_dict(doc))
    assert not [f for f in report.findings if f.id == "DOC001"], [f.title for f in report.findings]


def test_missing_library_and_unloaded_driver_are_different_reasons(tmp_path):
    lib = gather_with(ReplayNvml({}, init_error=NvmlUnavailable("library_not_found", "no NVIDIA driver found (NVML "
                                                                 "library not loaded)")), Sources(root=str(tmp_path)))
    assert lib["reason"] == "library_not_found" and lib["unavailable"].startswith("no NVIDIA driver found")
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "nvidia0").write_text("")
    drv = gather_with(ReplayNvml({}, init_error=NvmlUnavailable("driver_not_loaded", "kernel module not loaded")),
                      Sources(root=str(tmp_path)))
    assert drv["reason"] == "driver_not_loaded" and drv["hints"]["dev_nvidia0"] is True


def test_live_backend_on_this_machine_reports_no_driver_once():
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError_LibraryNotFound:
        pass
    else:  # pragma: no cover - a machine with a driver
        pynvml.nvmlShutdown()
        pytest.skip("an NVIDIA driver is present")
    out = gather_gpus(Sources(environ={}))
    assert out["unavailable"] == "no NVIDIA driver found (NVML library not loaded)"
    assert out["reason"] == "library_not_found" and "devices" not in out


def test_a_hung_nvml_call_is_cut_off_by_the_deadline():
    class Hung(ReplayNvml):
        def device(self, index, field):
            time.sleep(5)

    start = time.monotonic()
    out = gather_with(Hung(recorded("a100-mig")), Sources(environ={}), deadline_s=0.3)
    assert time.monotonic() - start < 3
    assert "did not answer within" in out["error"]


def test_cpulist_compresses_affinity_words():
    assert cpulist([0xFFFF0000, 0, 0xFFFF]) == "16-31,128-143"
    assert cpulist([0]) == ""


# ------------------------------------------------------------------- live binding over a fake driver

class FakeDriver:
    """A 2-GPU box at the C ABI of libnvidia-ml (tests/fake_nvml.py): the real nvidia-ml-py runs over it,
    so every value LiveNvml converts has the type the real binding returns."""

    def __init__(self, monkeypatch, init_code=None):
        gpus = [FakeGpu(name="NVIDIA A100-SXM4-80GB", uuid=f"GPU-{h}", bus_id="00000000:%02X:00.0" % (7 + h),
                        memory_total=80 * 2 ** 30, memory_used=2 ** 22, processes=[(99999999, 2 ** 30)],
                        compute_mode=3, mig=None, clocks_event_reasons=0x41, temperature=33,
                        power_limit_mw=400000, pcie=(1, 4, 8, 16), errors={"nvmlDeviceGetPcieReplayCounter": 3},
                        numa_node=3, cpu_affinity=(0xFFFF << 48, 0),
                        nvlinks=[(1, "00000000:%02X:00.0" % (8 - h))] * 2)
                for h in range(2)]
        self.lib = FakeNvmlLibrary(gpus, driver_version="535.161.08", cuda_driver_version=12020,
                                   init_error=init_code or 0, topology={(0, 1): 20}, p2p={(0, 1, 2): 5})
        self.lib.install(monkeypatch)

    @property
    def calls(self):
        return self.lib.p2p_indices


def test_live_backend_converts_a_fake_driver(monkeypatch, tmp_path):
    drv = FakeDriver(monkeypatch)
    out = gather_with(LiveNvml(), Sources(environ={}, root=str(tmp_path)))
    assert out["driver_version"] == "535.161.08" and out["cuda_driver"] == "12.2" and out["count"] == 2
    d0 = out["devices"][0]
    assert d0["pci_bus_id"] == "00000000:07:00.0" and d0["compute_mode"] == "EXCLUSIVE_PROCESS"
    assert d0["throttle_reasons"] == {"mask": 0x41, "names": ["GpuIdle", "HwThermalSlowdown"]}
    assert d0["pcie"] == {"gen_current": 1, "gen_max": 4, "width_current": 8, "width_max": 16, "replay_counter": None}
    assert d0["errors"]["pcie.replay_counter"] == "Not Supported" and d0["errors"]["mig.current"] == "Not Supported"
    assert d0["cpu_affinity"] == "48-63" and d0["power_limit_w"] == 400.0
    assert d0["bar1"] == {"total_bytes": 128 * 2 ** 30}  # c_nvmlBAR1Memory_t.bar1Total, an int
    assert d0["nvlinks"] == [{"link": 0, "active": True, "remote_pci_bus_id": "00000000:08:00.0"},
                             {"link": 1, "active": True, "remote_pci_bus_id": "00000000:08:00.0"}]
    assert d0["processes"] == [{"pid": 99999999, "name": None, "used_bytes": 2 ** 30, "ours": False, "in_our_proc": False}]
    assert out["pairs"] == [{"a": 0, "b": 1, "topology": "NVML_TOPOLOGY_MULTIPLE",
                             "p2p": {"read": "OK", "write": "OK", "nvlink": "NOT_SUPPORTED"}}]
    assert 0 in drv.calls  # NVML_P2P_CAPS_INDEX_READ = (0,) was unwrapped


@pytest.mark.parametrize("code, kind", [(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "library_not_found"),
                                        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "driver_not_loaded"),
                                        (pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, "version_mismatch"),
                                        (pynvml.NVML_ERROR_NO_PERMISSION, "no_permission")])
def test_live_init_failures_are_named(monkeypatch, code, kind):
    FakeDriver(monkeypatch, init_code=code)
    out = gather_with(LiveNvml(), Sources(environ={}))
    assert out["reason"] == kind and out["unavailable"] and set(out) >= {"nvml_error", "hints"}


def test_replayed_unavailable_section_round_trips():
    section = recorded_cpu = json.load(open(os.path.join(SNAPS, "cpu-only.json")))["sections"]["gpus"]
    out = gather_with(ReplayNvml(copy.deepcopy(section)), Sources(environ={}))
    assert out["unavailable"] == recorded_cpu["unavailable"] and out["reason"] == "library_not_found"


@pytest.mark.slow
@pytest.mark.timeout(270)
def test_live_check_without_driver_says_so_once_and_skips_the_gpu_checks():
    import subprocess
    import sys

    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError_LibraryNotFound:
        pass
    else:  # pragma: no cover
        pynvml.nvmlShutdown()
        pytest.skip("an NVIDIA driver is present")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp"),
           "PYTHONPATH": ROOT}
    proc = subprocess.run([sys.executable, "-m", "ddpdoctor", "check", "--no-comm", "--json", "--only", "gpu"],
                          capture_output=True, text=True, timeout=180, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert [(f["id"], f["severity"]) for f in report["findings"]] == [("GPU001", "info")]
    reasons = {s["reason"] for s in report["skipped"] if s["id"].startswith("GPU")}
    assert reasons == {"no NVIDIA driver found (NVML library not loaded)"}


def test_sibling_ranks_of_the_same_torchrun_job_are_ours(monkeypatch, tmp_path):
    FakeDriver(monkeypatch)
    proc = tmp_path / "proc" / "99999999"
    proc.mkdir(parents=True)
    (proc / "environ").write_bytes(b"PATH=/usr/bin\0TORCHELASTIC_RUN_ID=run-7\0LOCAL_RANK=1\0")
    same = gather_with(LiveNvml(), Sources(environ={"TORCHELASTIC_RUN_ID": "run-7"}, root=str(tmp_path)))
    assert same["devices"][0]["processes"][0]["ours"] is True
    other = gather_with(LiveNvml(), Sources(environ={"TORCHELASTIC_RUN_ID": "run-8"}, root=str(tmp_path)))
    assert other["devices"][0]["processes"][0]["ours"] is False
    assert other["devices"][0]["processes"][0]["in_our_proc"] is True


def test_visible_gpu_count_follows_cuda_visible_devices():
    """comm and probe pick NCCL or Gloo from this count, without importing torch."""
    import json as _json

    from ddpdoctor.gather.gpus import visible_gpu_count
    from ddpdoctor.gather.nvml import ReplayNvml

    section = _json.load(open(os.path.join(os.path.dirname(__file__), "..", "fixtures", "snapshots",
                                           "dgx-a100-8x-nvswitch.json")))["sections"]["gpus"]
    assert visible_gpu_count({}, ReplayNvml(section)) == 8
    assert visible_gpu_count({"CUDA_VISIBLE_DEVICES": "0,3"}, ReplayNvml(section)) == 2
    assert visible_gpu_count({"CUDA_VISIBLE_DEVICES": "1,x,2"}, ReplayNvml(section)) == 1
    assert visible_gpu_count({"CUDA_VISIBLE_DEVICES": "-1"}, ReplayNvml(section)) == 0
    assert visible_gpu_count({}) == 0  # this sandbox: no driver


def test_driver_and_xid_gatherers_read_the_kernel_view(tmp_path):
    from ddpdoctor.gather.driver import gather_driver, gather_xid

    assert "not loaded" in gather_xid(Sources(root=str(tmp_path)))["unavailable"]
    nv = tmp_path / "proc" / "driver" / "nvidia"
    (nv / "gpus" / "0000:3b:00.0").mkdir(parents=True)
    (nv / "version").write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.161.08  Thu Feb 29 2024\n")
    (nv / "gpus" / "0000:3b:00.0" / "information").write_text("Model: \t\t NVIDIA A100-SXM4-80GB\nGPU UUID: \t GPU-1\n")
    (tmp_path / "proc" / "uptime").write_text("10000.00 1.00\n")
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "kmsg").write_text(
        "6,100,500000000,-;nvidia: loading out-of-tree module\n"
        "4,101,9000000000,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.\n")
    drv = gather_driver(Sources(root=str(tmp_path)))
    assert drv["module_version"] == "535.161.08"
    assert drv["gpus"] == [{"bdf": "0000:3b:00.0", "model": "NVIDIA A100-SXM4-80GB", "uuid": "GPU-1"}]
    x = gather_xid(Sources(root=str(tmp_path)))
    assert x["events"] == [{"code": 79, "bdf": "0000:3b:00.0", "text": "pid=1234, name=python, GPU has fallen off the bus.",
                            "age_s": 1000.0}]
    (tmp_path / "dev" / "kmsg").chmod(0)
    if os.geteuid() != 0:
        assert "cannot read the kernel log" in gather_xid(Sources(root=str(tmp_path)))["unavailable"]


def test_cuda_facts_through_a_fake_libcuda():
    from fake_cuda import FakeLibcuda

    from ddpdoctor.gather.cuda import gather_cuda

    assert gather_cuda(Sources(cuda=FakeLibcuda())) == {"init_result": 0, "device_count": 8, "driver_version": 12020}
    assert gather_cuda(Sources(cuda=FakeLibcuda(802))) == {"init_result": 802, "init_error": "CUDA_ERROR_SYSTEM_NOT_READY"}
    assert "libcuda.so.1" in gather_cuda(Sources())["unavailable"]  # this sandbox has no driver


def test_sibling_ranks_are_read_from_proc(tmp_path):
    from ddpdoctor.gather.siblings import gather_siblings

    def proc(pid, env, cpus):
        d = tmp_path / "proc" / str(pid)
        d.mkdir(parents=True)
        (d / "environ").write_bytes(b"\0".join(f"{k}={v}".encode() for k, v in env.items()) + b"\0")
        (d / "status").write_text(f"Name:\tpython\nCpus_allowed_list:\t{cpus}\n")

    proc(101, {"TORCHELASTIC_RUN_ID": "j1", "RANK": "1", "LOCAL_RANK": "1", "CUDA_VISIBLE_DEVICES": "0,1",
               "HF_TOKEN": "secret"}, "8-15")
    proc(102, {"TORCHELASTIC_RUN_ID": "j1"}, "0-15")  # torchrun's agent: no rank
    proc(103, {"TORCHELASTIC_RUN_ID": "other", "RANK": "0", "LOCAL_RANK": "0"}, "0-7")
    out = gather_siblings(Sources(environ={"TORCHELASTIC_RUN_ID": "j1"}, root=str(tmp_path)))
    assert out["ranks"] == [{"pid": 101, "rank": 1, "local_rank": 1, "cuda_visible_devices": "0,1", "cpus": "8-15"}]
    assert "secret" not in json.dumps(out)
    assert "unavailable" in gather_siblings(Sources(environ={}, root=str(tmp_path)))


def test_torch_build_is_read_without_importing_torch():
    import sys as _sys

    from ddpdoctor.gather.packages import gather_packages

    before = "torch" in _sys.modules
    build = gather_packages(Sources())["torch_build"]
    assert build["cuda"] is None and len(build["git_version"]) == 40  # this venv: the CPU build
    assert ("torch" in _sys.modules) == before
