#!/usr/bin/env python3
"""`make gpu-selftest`: every GPU path of ddpdoctor, on this machine's GPUs, in one command.

Steps, each with its own timeout, all inside one time budget (default 450 s, under 8 minutes):
  snapshot   `ddpdoctor snapshot`, also saved as fixtures/snapshots/recorded-<gpu model>.json
  check      `ddpdoctor check --json` (it runs the connectivity test too, since GPUs are visible)
  comm       `ddpdoctor comm --gpus N --json`
  probe      `ddpdoctor probe --gpus N --compare dp --json`
  preflight  `ddpdoctor.preflight()` inside a CUDA Trainer under torchrun, one rank per GPU
             (benchmarks/_gpu_selftest_trainer.py: tiny BERT from a config, tokenizer trained in
             memory; nothing is downloaded)
Every output goes into one folder (default build/gpu-selftest/<host>-<UTC time>/); the last thing
printed is a one-screen summary, also saved there as summary.txt and summary.json.

It runs ddpdoctor from this checkout with the Python that runs it, so run it with the Python of
your training environment (the one with the CUDA build of torch), not the CPU-only .venv:
    make gpu-selftest PY=/path/to/env/bin/python        # or: conda activate env && make gpu-selftest
That Python needs click, psutil and nvidia-ml-py besides torch and transformers
(`pip install click psutil nvidia-ml-py` leaves torch alone).

Without an NVIDIA GPU it says so in one line and exits 0. Exit status otherwise: 0 when every step
ran to a report (findings about the machine are results, not failures), 1 when a step failed, timed
out or could not run.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAINER_SCRIPT = os.path.join(ROOT, "benchmarks", "_gpu_selftest_trainer.py")
DEFAULT_TIMEOUTS = {"snapshot": 60, "check": 120, "comm": 120, "probe": 240, "preflight": 180}
NEEDS_CUDA = ("comm", "probe", "preflight")
MIN_STEP_S = 10  # a step with less time left than this is skipped rather than started
OK, FOUND, FAIL, TIMEOUT, SKIPPED = "ok", "found", "FAIL", "TIMEOUT", "skipped"


@dataclass
class Result:
    name: str
    status: str
    seconds: float = 0.0
    note: str = ""
    rc: Optional[int] = None
    files: list = field(default_factory=list)


# ------------------------------------------------------------------------------------------ GPUs
def detect_gpus(nvml=None) -> tuple:
    """(devices, driver, reason): devices as [{"index", "name"}]; reason says why there are none.

    `nvml` is the pynvml module (or a fake with the same functions, for tests).
    """
    if nvml is None:
        try:
            import pynvml as nvml  # from the nvidia-ml-py package
        except ImportError:
            return _detect_with_smi()
    try:
        nvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return [], None, f"NVML: {type(exc).__name__}: {exc}".rstrip(": ")
    try:
        driver = _text(nvml.nvmlSystemGetDriverVersion())
        devices = []
        for i in range(int(nvml.nvmlDeviceGetCount())):
            devices.append({"index": i, "name": _text(nvml.nvmlDeviceGetName(nvml.nvmlDeviceGetHandleByIndex(i)))})
        return devices, driver, "" if devices else "NVML found no GPU"
    except Exception as exc:  # noqa: BLE001
        return [], None, f"NVML: {type(exc).__name__}: {exc}"
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def _detect_with_smi() -> tuple:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return [], None, "no nvidia-ml-py (pynvml) in this Python and no nvidia-smi on PATH"
    try:
        out = _proctree().run([smi, "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return [], None, f"nvidia-smi -L failed: {exc}"
    devices = [{"index": int(m.group(1)), "name": m.group(2).strip()}
               for m in re.finditer(r"^GPU (\d+): (.+?)(?: \(UUID: [^)]*\))?$", out, re.M)]
    return devices, None, "" if devices else "nvidia-smi lists no GPU"


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def model_slug(names) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3'; several models joined with '+', in order."""
    slugs = []
    for name in names:
        slug = re.sub(r"[^a-z0-9]+", "-", str(name).lower()).strip("-") or "unknown-gpu"
        if slug not in slugs:
            slugs.append(slug)
    return "+".join(slugs) or "unknown-gpu"


def snapshot_gpu_names(path: str) -> list:
    """GPU model names recorded in a snapshot file ([] if none or unreadable)."""
    try:
        with open(path, encoding="utf-8") as fh:
            gpus = json.load(fh)["sections"]["gpus"]
        return [d.get("name") or "unknown-gpu" for d in gpus.get("devices") or []]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return []


def torch_cuda(python: str, env: dict, timeout_s: float = 90) -> dict:
    """What the torch of `python` says about CUDA, in a child (this process never imports torch)."""
    code = ("import json, torch; print(json.dumps({'torch': torch.__version__, 'cuda': torch.version.cuda, "
            "'available': torch.cuda.is_available(), 'count': torch.cuda.device_count()}))")
    try:
        proc = _proctree().run([python, "-c", code], capture_output=True, text=True, timeout=timeout_s, env=env)
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except subprocess.TimeoutExpired:
        return {"error": f"`import torch` took over {timeout_s:.0f} s"}
    except (OSError, ValueError, IndexError):
        return {"error": "torch is not importable in this Python"}


def missing_modules(names=("click", "psutil", "pynvml", "torch", "transformers", "tokenizers", "h5py")) -> list:
    return [n for n in names if importlib.util.find_spec(n) is None]


# ----------------------------------------------------------------------------------- processes
def _proctree():
    """ddpdoctor.proctree from this checkout (as the steps use it, through PYTHONPATH): the one way the
    doctor starts processes and ends them with everything they started."""
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    from ddpdoctor import proctree

    return proctree


def stop_step(tree, proc: subprocess.Popen, grace_s: float = 15.0) -> None:
    """Stop a step and everything it started, even children in their own sessions or re-parented.

    SIGTERM to the step first (ddpdoctor then stops its ranks and reports; not SIGINT, which a self-test
    started in the background inherits as ignored), then SIGTERM to every process of the step's tree,
    then SIGKILL to whatever is left (ddpdoctor.proctree.Tree.stop).
    """
    tree.send(signal.SIGTERM, [proc.pid])
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
    tree.stop(grace_s=5.0)


def run_step(argv: list, timeout_s: float, stdout_path: str, stderr_path: str, env: Optional[dict] = None,
             cwd: Optional[str] = None, grace_s: float = 15.0) -> tuple:
    """Run one step with its outputs in files. Returns (exit status or None on timeout, seconds).
    Nothing it started survives it: its processes carry a marker and this process is their subreaper."""
    proctree = _proctree()
    start = time.monotonic()
    tree = proctree.Tree()
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        proc = tree.popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env, cwd=cwd,
                          new_session=True, die_with_parent=None)
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            stop_step(tree, proc, grace_s)
            rc = None
        except BaseException:  # Ctrl-C on the self-test itself: leave nothing behind
            stop_step(tree, proc, grace_s)
            raise
        finally:  # whatever the step left, wherever it was re-parented
            tree.stop(grace_s=0.0, first=signal.SIGKILL)
    return rc, time.monotonic() - start


# ------------------------------------------------------------------------------------- verdicts
def report_note(path: str, width: int = 60) -> tuple:
    """(ok, text) for a ddpdoctor JSON report: the counts and the first findings' IDs."""
    try:
        with open(path, encoding="utf-8") as fh:
            report = json.load(fh)
        summary = report["summary"]
        ids = [f["id"] for f in report.get("findings", [])]
    except (OSError, ValueError, KeyError, TypeError):
        return False, "no JSON report in the output"
    counts = f"{summary.get('errors', 0)}E {summary.get('warnings', 0)}W {summary.get('infos', 0)}I"
    shown = ", ".join(ids[:6]) + (f" +{len(ids) - 6}" if len(ids) > 6 else "")
    text = f"{counts}" + (f": {shown}" if shown else ": no findings")
    return True, text[:width]


def judge_report_step(name: str, rc: Optional[int], seconds: float, json_path: str, timeout_s: float) -> Result:
    if rc is None:
        return Result(name, TIMEOUT, seconds, f"stopped after {timeout_s:.0f} s", rc)
    ok, note = report_note(json_path)
    if rc in (0, 1) and ok:
        return Result(name, OK if rc == 0 else FOUND, seconds, note, rc)
    return Result(name, FAIL, seconds, f"exit {rc}; " + (note if ok else "see the .err file"), rc)


def judge_preflight(rc: Optional[int], seconds: float, out_dir: str, ranks: int, timeout_s: float) -> Result:
    if rc is None:
        return Result("preflight", TIMEOUT, seconds, f"stopped after {timeout_s:.0f} s", rc)
    docs, problems = [], []
    for r in range(ranks):
        path = os.path.join(out_dir, f"preflight-rank{r}.json")
        try:
            with open(path, encoding="utf-8") as fh:
                docs.append(json.load(fh))
        except (OSError, ValueError):
            problems.append(f"rank {r} wrote no report")
    for doc in docs:
        if doc.get("error"):
            problems.append(f"rank {doc.get('rank')}: {doc['error']}")
        elif not str(doc.get("device", "")).startswith("cuda"):
            problems.append(f"rank {doc.get('rank')} trained on {doc.get('device')}, not CUDA")
    if rc != 0 or problems:
        return Result("preflight", FAIL, seconds, f"exit {rc}; " + ("; ".join(problems) or "see the .err file"), rc)
    parts = [d.get(part) or {} for d in docs for part in ("preflight", "steps")]
    ids = sorted({f["id"] for p in parts for f in p.get("findings", [])})
    errors = sum(p.get("summary", {}).get("errors", 0) for p in parts)
    steps = docs[0].get("train", {}).get("steps") if docs else None
    note = f"{len(docs)} rank(s) on {docs[0].get('device') if docs else '?'}, {steps} steps; " + (
        ", ".join(ids[:6]) if ids else "no findings")
    return Result("preflight", FOUND if errors else OK, seconds, note[:60], rc)


# -------------------------------------------------------------------------------------- summary
def render_summary(header: list, results: list, out_dir: str, footer: list = ()) -> str:
    lines = list(header) + ["", f"  {'step':<10} {'result':<8} {'time':>7}  detail"]
    for r in results:
        lines.append(f"  {r.name:<10} {r.status:<8} {r.seconds:>6.1f}s  {r.note}")
    ran = sum(r.status in (OK, FOUND) for r in results)
    bad = [r.name for r in results if r.status in (FAIL, TIMEOUT)]
    skipped = [r.name for r in results if r.status == SKIPPED]
    verdict = f"{ran} of {len(results)} steps ran to a report"
    if bad:
        verdict += f"; failed: {', '.join(bad)}"
    if skipped:
        verdict += f"; not run: {', '.join(skipped)}"
    lines += ["", verdict + ".", "ok: no error-level finding; found: error-level findings (read them in the .json files)",
              *dict.fromkeys(footer), f"Everything is in {out_dir}"]
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------- main
def plan(python: str, out: str, gpus: int) -> list:
    """(name, argv, json output or None) for every step, in order."""
    dd = [python, "-m", "ddpdoctor"]
    return [
        ("snapshot", dd + ["snapshot", "-o", os.path.join(out, "snapshot.json")], None),
        ("check", dd + ["check", "--json"], os.path.join(out, "check.json")),
        ("comm", dd + ["comm", "--gpus", str(gpus), "--json"], os.path.join(out, "comm.json")),
        ("probe", dd + ["probe", "--gpus", str(gpus), "--compare", "dp", "--json"], os.path.join(out, "probe.json")),
        ("preflight", [python, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={gpus}",
                       TRAINER_SCRIPT, out], None),
    ]


def main(argv=None, nvml=None, runner: Callable = run_step, cuda_info: Optional[dict] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 epilog="Run it with your training environment's Python; see the module docstring.")
    ap.add_argument("--out", help="output folder (default: build/gpu-selftest/<host>-<UTC time>)")
    ap.add_argument("--gpus", type=int, default=None, help="GPUs to use (default: every GPU CUDA sees)")
    ap.add_argument("--budget", type=float, default=450.0, help="seconds for all steps together (default 450)")
    ap.add_argument("--timeout", action="append", default=[], metavar="STEP=SECONDS",
                    help="override one step's timeout, e.g. --timeout probe=300")
    ap.add_argument("--only", default="", help="comma-separated steps to run (default: all)")
    ap.add_argument("--fixtures-dir", default=os.path.join(ROOT, "fixtures", "snapshots"),
                    help="where recorded-<gpu model>.json goes")
    ap.add_argument("--no-fixture", action="store_true", help="do not copy the snapshot into --fixtures-dir")
    opts = ap.parse_args(argv)
    timeouts = dict(DEFAULT_TIMEOUTS)
    for item in opts.timeout:
        name, _, value = item.partition("=")
        if name not in timeouts or not re.fullmatch(r"\d+(\.\d+)?", value):
            ap.error(f"--timeout {item!r}: expected STEP=SECONDS with STEP one of {', '.join(timeouts)}")
        timeouts[name] = float(value)
    only = {s.strip() for s in opts.only.split(",") if s.strip()}
    if only - set(timeouts):
        ap.error(f"--only: unknown step(s) {', '.join(sorted(only - set(timeouts)))}")

    devices, driver, reason = detect_gpus(nvml)
    if not devices:
        print(f"gpu-selftest: no NVIDIA GPU on this machine ({reason}); nothing to test.")
        return 0

    started = time.monotonic()
    host = socket.gethostname().split(".")[0] or "host"
    out = os.path.abspath(opts.out or os.path.join(ROOT, "build", "gpu-selftest",
                                                   f"{host}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"))
    os.makedirs(out, exist_ok=True)
    python = sys.executable
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("PYTHONUNBUFFERED", "1")

    missing = missing_modules()
    cuda = cuda_info if cuda_info is not None else torch_cuda(python, env)
    gpus = opts.gpus or cuda.get("count") or len(devices)
    cuda_ok = bool(cuda.get("available")) and not cuda.get("error")
    why_no_cuda = cuda.get("error") or (
        f"torch {cuda.get('torch')} in {python} has no CUDA; run with your training env's Python: "
        f"make gpu-selftest PY=/path/to/env/bin/python")
    names = [d["name"] for d in devices]
    header = [f"ddpdoctor GPU self-test on {host}: {len(devices)} GPU(s) {model_slug(names)}, driver {driver or '?'}",
              f"python {python} ({'.'.join(map(str, sys.version_info[:3]))}), torch {cuda.get('torch', '-')}, "
              f"CUDA {cuda.get('cuda') or '-'}, using {gpus} GPU(s)"]
    if missing:
        header.append(f"missing in this Python: {', '.join(missing)} (pip install {' '.join(missing).replace('pynvml', 'nvidia-ml-py')})")

    results, footer = [], []
    for name, step_argv, json_out in plan(python, out, gpus):
        if only and name not in only:
            continue
        left = opts.budget - (time.monotonic() - started)
        if name in NEEDS_CUDA and not cuda_ok:
            results.append(Result(name, SKIPPED, 0.0, "this Python's torch has no CUDA (see below)"))
            footer.append(f"Not run: {why_no_cuda}")
            continue
        if left < MIN_STEP_S:
            results.append(Result(name, SKIPPED, 0.0, f"time budget of {opts.budget:.0f} s used up"))
            continue
        timeout_s = min(timeouts[name], left)
        if name == "probe":  # let the probe end on its own deadline, with a report, before we stop it
            step_argv = step_argv + ["--deadline", str(max(10, int(timeout_s - 20)))]
        stdout_path = json_out or os.path.join(out, f"{name}.out")
        stderr_path = os.path.join(out, f"{name}.err")
        rc, seconds = runner(step_argv, timeout_s, stdout_path, stderr_path, env=env, cwd=out)
        if name == "snapshot":
            result = _judge_snapshot(rc, seconds, out, names, timeout_s, opts, footer)
        elif name == "preflight":
            result = judge_preflight(rc, seconds, out, gpus, timeout_s)
        else:
            result = judge_report_step(name, rc, seconds, json_out, timeout_s)
        result.files = [p for p in (stdout_path, stderr_path) if os.path.exists(p)]
        results.append(result)

    text = render_summary(header + [f"total {time.monotonic() - started:.0f} s of a {opts.budget:.0f} s budget"],
                          results, out, footer)
    with open(os.path.join(out, "summary.txt"), "w", encoding="utf-8") as fh:
        fh.write(text + "\n")
    with open(os.path.join(out, "summary.json"), "w", encoding="utf-8") as fh:
        json.dump({"host": host, "gpus": devices, "driver": driver, "torch": cuda, "python": python,
                   "results": [asdict(r) for r in results]}, fh, indent=2)
    print(text)
    return 1 if any(r.status in (FAIL, TIMEOUT, SKIPPED) for r in results) else 0


def _judge_snapshot(rc, seconds, out, detected_names, timeout_s, opts, footer) -> Result:
    path = os.path.join(out, "snapshot.json")
    if rc is None:
        return Result("snapshot", TIMEOUT, seconds, f"stopped after {timeout_s:.0f} s", rc)
    if rc != 0 or not os.path.exists(path):
        return Result("snapshot", FAIL, seconds, f"exit {rc}; see snapshot.err", rc)
    recorded = snapshot_gpu_names(path)
    slug = model_slug(recorded or detected_names)
    note = f"{len(recorded)} GPU(s) recorded"
    if not recorded:
        note = "no GPU in the snapshot (NVML failed in ddpdoctor?)"
    if not opts.no_fixture:
        os.makedirs(opts.fixtures_dir, exist_ok=True)
        target = os.path.join(opts.fixtures_dir, f"recorded-{slug}.json")
        shutil.copyfile(path, target)
        note += f" -> {os.path.basename(target)}"
        footer.append(f"New fixture {target}")
        footer.append("  add it to EXPECTED in tests/test_gpu_fixtures.py and to fixtures/README.md, with its findings.")
    return Result("snapshot", OK if recorded else FAIL, seconds, note[:60], rc)


if __name__ == "__main__":
    _proctree().own_this_process()  # the self-test script: its steps' orphans come back here
    sys.exit(main())
