"""benchmarks/gpu_selftest.py (`make gpu-selftest`) on a machine without GPUs: NVML faked, steps run
by a fake runner where a CPU cannot run them, for real where it can (snapshot, check, a step that
times out and leaves children behind)."""
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import uuid

import pytest

from machine import with_room
from procs import marked

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SNAPS = os.path.join(ROOT, "fixtures", "snapshots")
_spec = importlib.util.spec_from_file_location("gpu_selftest", os.path.join(ROOT, "benchmarks", "gpu_selftest.py"))
st = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("gpu_selftest", st)  # dataclasses look their module up there
_spec.loader.exec_module(st)


class NVMLError(Exception):
    pass


class FakeNvml:
    """The few pynvml functions the self-test calls, over a list of GPU names."""

    def __init__(self, names=(), init_error=None, fail_at=None):
        self.names, self.init_error, self.fail_at, self.shut = list(names), init_error, fail_at, False

    def nvmlInit(self):
        if self.init_error:
            raise self.init_error

    def nvmlShutdown(self):
        self.shut = True

    def nvmlSystemGetDriverVersion(self):
        return b"550.54.15"

    def nvmlDeviceGetCount(self):
        return len(self.names)

    def nvmlDeviceGetHandleByIndex(self, i):
        if i == self.fail_at:
            raise NVMLError("GPU is lost")
        return i

    def nvmlDeviceGetName(self, handle):
        return self.names[handle].encode()


A100 = "NVIDIA A100-SXM4-80GB"
CUDA = {"torch": "2.5.1+cu124", "cuda": "12.4", "available": True, "count": 2}
NO_CUDA = {"torch": "2.13.0+cpu", "cuda": None, "available": False, "count": 0}


def report(errors=0, warnings=0, ids=()):
    return {"schema": "ddpdoctor/report/1", "summary": {"errors": errors, "warnings": warnings, "infos": 0},
            "findings": [{"id": i} for i in ids]}


class FakeRunner:
    """Writes what each real step would write; records the argv and timeout of every call."""

    def __init__(self, rcs=None, clock=None):
        self.calls, self.rcs, self.clock = [], dict(rcs or {}), clock

    def __call__(self, argv, timeout_s, stdout_path, stderr_path, env=None, cwd=None):
        name = self.step(argv)
        self.calls.append((name, argv, timeout_s, env))
        rc = self.rcs.get(name, 0)
        with open(stderr_path, "w") as fh:
            fh.write("")
        if name == "snapshot":
            shutil.copyfile(os.path.join(SNAPS, "dgx-a100-8x-nvswitch.json"), argv[argv.index("-o") + 1])
        elif name == "preflight":
            for r in range(2):
                with open(os.path.join(argv[-1], f"preflight-rank{r}.json"), "w") as fh:
                    json.dump({"rank": r, "device": f"cuda:{r}", "train": {"steps": 12},
                               "preflight": report(), "steps": report(warnings=1, ids=["PRB008"])}, fh)
        else:
            with open(stdout_path, "w") as fh:
                json.dump(report(errors=1, ids=["GPU011", "NCCL004"]) if rc == 1 else report(), fh)
        if self.clock is not None:
            self.clock[0] += timeout_s
            return None, timeout_s
        return rc, 1.5

    @staticmethod
    def step(argv):
        if "torch.distributed.run" in argv:
            return "preflight"
        return argv[argv.index("ddpdoctor") + 1]


def rows_text(text, step):
    return next(line for line in text.splitlines() if line.startswith(f"  {step} "))


def test_model_slug_names_the_fixture_file():
    assert st.model_slug(["NVIDIA H100 80GB HBM3"] * 8) == "nvidia-h100-80gb-hbm3"
    assert st.model_slug(["NVIDIA GeForce RTX 3090", "NVIDIA GeForce RTX 4090"]) == \
        "nvidia-geforce-rtx-3090+nvidia-geforce-rtx-4090"
    assert st.model_slug([]) == "unknown-gpu"
    assert st.model_slug(["///"]) == "unknown-gpu"


def test_gpu_names_are_read_from_a_recorded_snapshot():
    assert st.snapshot_gpu_names(os.path.join(SNAPS, "dgx-a100-8x-nvswitch.json")) == [A100] * 8
    assert st.snapshot_gpu_names(os.path.join(SNAPS, "mixed-rtx3090-rtx4090.json")) == \
        ["NVIDIA GeForce RTX 3090", "NVIDIA GeForce RTX 4090"]
    assert st.snapshot_gpu_names(os.path.join(SNAPS, "cpu-only.json")) == []
    assert st.snapshot_gpu_names(os.path.join(SNAPS, "no-such-file.json")) == []


def test_detect_gpus_through_a_fake_nvml():
    nvml = FakeNvml([A100, A100])
    assert st.detect_gpus(nvml) == ([{"index": 0, "name": A100}, {"index": 1, "name": A100}], "550.54.15", "")
    assert nvml.shut
    devices, driver, reason = st.detect_gpus(FakeNvml(init_error=NVMLError("NVML Shared Library Not Found")))
    assert (devices, driver) == ([], None) and reason == "NVML: NVMLError: NVML Shared Library Not Found"
    assert st.detect_gpus(FakeNvml([])) == ([], "550.54.15", "NVML found no GPU")
    lost = FakeNvml([A100, A100], fail_at=1)
    assert st.detect_gpus(lost) == ([], None, "NVML: NVMLError: GPU is lost") and lost.shut


def test_without_gpus_it_says_so_in_one_line_and_exits_0(tmp_path, capsys):
    out = tmp_path / "out"
    rc = st.main(["--out", str(out)], nvml=FakeNvml(init_error=NVMLError("NVML Shared Library Not Found")),
                 runner=pytest.fail)
    lines = capsys.readouterr().out.splitlines()
    assert rc == 0
    assert lines == ["gpu-selftest: no NVIDIA GPU on this machine (NVML: NVMLError: NVML Shared Library Not Found); "
                     "nothing to test."]
    assert not out.exists()


def test_every_step_runs_and_the_summary_fits_one_screen(tmp_path, capsys):
    runner = FakeRunner(rcs={"check": 1})
    out, fixtures = tmp_path / "out", tmp_path / "fixtures"
    rc = st.main(["--out", str(out), "--fixtures-dir", str(fixtures)], nvml=FakeNvml([A100, A100]), runner=runner,
                 cuda_info=CUDA)
    text = capsys.readouterr().out
    assert rc == 0
    assert [c[0] for c in runner.calls] == ["snapshot", "check", "comm", "probe", "preflight"]
    argv = {name: a for name, a, _, _ in runner.calls}
    assert argv["comm"][-3:] == ["--gpus", "2", "--json"]
    assert argv["probe"][argv["probe"].index("--gpus"):argv["probe"].index("--gpus") + 5] == \
        ["--gpus", "2", "--compare", "dp", "--json"]
    assert "--deadline" in argv["probe"] and "--nproc-per-node=2" in argv["preflight"]
    assert all(env["PYTHONPATH"].split(os.pathsep)[0] == ROOT for _, _, _, env in runner.calls)
    assert all(t <= st.DEFAULT_TIMEOUTS[name] for name, _, t, _ in runner.calls)
    assert (fixtures / "recorded-nvidia-a100-sxm4-80gb.json").read_bytes() == \
        (open(os.path.join(SNAPS, "dgx-a100-8x-nvswitch.json"), "rb").read())
    rows = {line.split()[0]: line.split()[1] for line in text.splitlines() if line.startswith("  ") and
            line.split()[0] in st.DEFAULT_TIMEOUTS}
    assert rows == {"snapshot": "ok", "check": "found", "comm": "ok", "probe": "ok", "preflight": "ok"}
    assert "1E 0W 0I: GPU011, NCCL004" in text and "2 rank(s) on cuda:0, 12 steps; PRB008" in text
    assert "recorded-nvidia-a100-sxm4-80gb.json" in rows_text(text, "snapshot")
    assert "5 of 5 steps ran to a report." in text and "add it to EXPECTED in tests/test_gpu_fixtures.py" in text
    assert len(text.splitlines()) <= 24 and max(len(line) for line in text.splitlines()) <= 200
    assert (out / "summary.txt").read_text().strip() == text.strip()
    saved = json.loads((out / "summary.json").read_text())
    assert [r["status"] for r in saved["results"]] == ["ok", "found", "ok", "ok", "ok"]


def test_a_torch_without_cuda_runs_the_nvml_steps_and_says_which_python_to_use(tmp_path, capsys):
    runner = FakeRunner()
    rc = st.main(["--out", str(tmp_path / "out"), "--no-fixture"], nvml=FakeNvml([A100]), runner=runner,
                 cuda_info=NO_CUDA)
    text = capsys.readouterr().out
    assert rc == 1
    assert [c[0] for c in runner.calls] == ["snapshot", "check"]
    assert "not run: comm, probe, preflight" in text
    assert "torch 2.13.0+cpu in " in text and "make gpu-selftest PY=/path/to/env/bin/python" in text
    assert text.count("Not run: torch 2.13.0+cpu") == 1
    assert not (tmp_path / "fixtures").exists()


def test_a_failed_step_fails_the_selftest(tmp_path, capsys):
    rc = st.main(["--out", str(tmp_path), "--no-fixture", "--only", "comm"], nvml=FakeNvml([A100, A100]),
                 runner=FakeRunner(rcs={"comm": 3}), cuda_info=CUDA)
    text = capsys.readouterr().out
    assert rc == 1
    assert "comm       FAIL" in text and "exit 3;" in text and "failed: comm" in text


def test_the_time_budget_bounds_every_step(tmp_path, capsys, monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(st.time, "monotonic", lambda: clock[0])
    runner = FakeRunner(clock=clock)  # every step runs into its timeout
    rc = st.main(["--out", str(tmp_path), "--no-fixture", "--budget", "100"], nvml=FakeNvml([A100, A100]),
                 runner=runner, cuda_info=CUDA)
    text = capsys.readouterr().out
    assert rc == 1
    assert [(c[0], c[2]) for c in runner.calls] == [("snapshot", 60), ("check", 40)]
    assert "snapshot   TIMEOUT" in text and "check      TIMEOUT" in text
    assert "comm       skipped" in text and "time budget of 100 s used up" in text


def test_bad_arguments_exit_2(capsys):
    with pytest.raises(SystemExit) as exc:
        st.main(["--timeout", "probe=soon"], nvml=FakeNvml([A100]))
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        st.main(["--only", "snapshot,nccl-tests"], nvml=FakeNvml([A100]))
    assert exc.value.code == 2
    assert "unknown step(s) nccl-tests" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_step_that_times_out_is_stopped_with_everything_it_started(tmp_path):
    mark = uuid.uuid4().hex
    # The step starts a grandchild in its own session, as torch's launcher does with its ranks, and waits
    # until it is up. When it is stopped it starts one more on its way out and exits at once: that one
    # is orphaned before any walk of the tree can see it (how a grandchild was lost before).
    ready = tmp_path / "grandchild-up"
    code = ("import os, signal, subprocess, sys, time\n"
            "def spawn(arg): subprocess.Popen([sys.executable, '-c', 'import pathlib, sys, time; "
            "pathlib.Path(sys.argv[1]).touch(); time.sleep(600)', arg], start_new_session=True)\n"
            "def bye(*a): spawn(sys.argv[1] + '.late'); os._exit(0)\n"
            "signal.signal(signal.SIGTERM, bye); signal.signal(signal.SIGINT, bye); spawn(sys.argv[1])\n"
            "while not os.path.exists(sys.argv[1]): time.sleep(0.02)\n"
            "print('started', flush=True); time.sleep(600)")
    env = dict(os.environ, DDPDOCTOR_TEST_MARK=mark)
    # The step runs to its timeout on the passing path (it never ends by itself): the timeout is what two bare
    # interpreters need to start (no torch; ~0.1 s idle), so 2 s idle, scaled, not 5 (round 17); the 'started'
    # state is asserted: a step stopped before it started its grandchild is run again with more room
    # (machine.with_room), never judged
    def step(timeout_s):
        for left in (ready, tmp_path / "grandchild-up.late"):  # a try's own grandchild, not an earlier one's
            left.unlink(missing_ok=True)
        got = st.run_step([sys.executable, "-c", code, str(ready)], timeout_s, str(tmp_path / "o"),
                          str(tmp_path / "e"), env=env, grace_s=2.0)
        return tuple(got) + ((tmp_path / "o").read_text() == "started\n",)

    (rc, seconds, started), timeout_s = with_room(step, lambda got: got[2], 2.0,
                                                  "the step's grandchild started before its timeout")
    assert rc is None
    assert seconds >= timeout_s
    assert marked(mark) == []


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_snapshot_and_check_run_for_real_with_nvml_faked(tmp_path, capsys):
    out, fixtures = tmp_path / "out", tmp_path / "fixtures"
    rc = st.main(["--out", str(out), "--fixtures-dir", str(fixtures), "--only", "snapshot,check"],
                 nvml=FakeNvml([A100, A100]), cuda_info=NO_CUDA)
    text = capsys.readouterr().out
    snap = json.loads((out / "snapshot.json").read_text())
    assert snap["schema"] == "ddpdoctor/snapshot/1"
    check = json.loads((out / "check.json").read_text())
    assert check["schema"] == "ddpdoctor/report/1" and check["command"] == "check"
    # ddpdoctor's own NVML finds no GPU here, so the recorded snapshot has none: a failed step,
    # named after the GPUs the (faked) detection saw.
    assert "snapshot   FAIL" in text and "no GPU in the snapshot" in text
    assert [p.name for p in fixtures.iterdir()] == ["recorded-nvidia-a100-sxm4-80gb.json"]
    assert "check      ok" in text or "check      found" in text
    assert rc == 1


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_the_script_on_this_machine_without_gpus(tmp_path):
    if st.detect_gpus()[0]:
        pytest.skip("this machine has NVIDIA GPUs: `make gpu-selftest` is the test")
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "gpu_selftest.py"), "--out",
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=100)
    assert proc.returncode == 0
    assert len(proc.stdout.splitlines()) == 1 and proc.stdout.startswith("gpu-selftest: no NVIDIA GPU on this machine (")
    assert not (tmp_path / "out").exists()
