"""Round 19, wave 2 of the robustness audit: the sections the training process writes (runtime, runtime_*) have
declared field types, so a hand-edited one is exit 2 naming the field instead of a crashed RT check (DOC001)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ddpdoctor.cli import main

HERE = Path(__file__).parent
RECORDED = HERE / "data" / "runtime_recorded_gloo_cpu.snap.json"  # gather_sections() on CPU under Gloo (see below)


def _call(capsys, argv):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out, err = capsys.readouterr()
    return exc.value.code, out, err


def _edited(tmp_path, section, key, value):
    doc = json.loads(RECORDED.read_text())
    doc["sections"].setdefault(section, {})[key] = value
    path = tmp_path / "edited.snap.json"
    path.write_text(json.dumps(doc))
    return path


# one wrong type per runtime section, each in a field an RT check reads (the audit's cells crashed RT004 with
# "'list' object has no attribute 'get'")
@pytest.mark.parametrize("section,key,value,field", [
    ("runtime", "threads", [None], "runtime.threads"),
    ("runtime", "cuda", 5, "runtime.cuda"),
    ("runtime", "usable_cpus", "8", "runtime.usable_cpus"),
    ("runtime_data", "sampler", "DistributedSampler", "runtime_data.sampler"),
    ("runtime_data", "num_workers", "4", "runtime_data.num_workers"),
    ("runtime_trainer", "args", ["--ddp_timeout", "60"], "runtime_trainer.args"),
    ("runtime_peers", "ranks", [1, 2], "runtime_peers.ranks"),
    ("runtime_steps", "steps_measured", "3", "runtime_steps.steps_measured"),
])
def test_a_hand_edited_runtime_field_is_an_input_error_naming_it(capsys, tmp_path, section, key, value, field):
    rc, out, err = _call(capsys, ["check", "--snapshot", str(_edited(tmp_path, section, key, value)), "--json"])
    assert rc == 2, (rc, out[:400])
    assert field in err and "DOC001" not in out and "Traceback" not in err + out


def test_the_recorded_runtime_sections_are_judged_without_a_crash(capsys):
    rc, out, err = _call(capsys, ["check", "--snapshot", str(RECORDED), "--json"])
    report = json.loads(out)
    assert rc in (0, 1), err
    assert not [f for f in report["findings"] if f["id"] == "DOC001"], out[:600]
    assert "Traceback" not in err


RECORD = r"""
import json, os, sys
import torch, torch.distributed as dist
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:" + sys.argv[2], rank=0, world_size=1)
from ddpdoctor.inprocess.runtime import gather_sections
ds = TensorDataset(torch.randn(64, 4))
dl = DataLoader(ds, batch_size=8, sampler=DistributedSampler(ds), num_workers=2)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 2))
sections = gather_sections(dataloader=dl, model=model, peers=True, peer_timeout_s=3)
json.dump(sections, open(sys.argv[1], "w"), default=str)
dist.destroy_process_group()
"""


@pytest.mark.slow
def test_what_the_in_process_writers_record_fits_the_declared_types(tmp_path):
    """Re-records the sections with the real writers (Gloo on CPU) and checks them with the declared types: the
    declaration follows the writers, not the other way round."""
    import socket

    from ddpdoctor.gather import schema
    from ddpdoctor.pipeline.shapes import shape_error

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "sections.json"
    script = tmp_path / "record.py"
    script.write_text(RECORD)
    subprocess.run([sys.executable, str(script), str(out), str(port)], check=True, timeout=300,
                   env={**os.environ, "PYTHONPATH": str(HERE.parent)})
    sections = json.loads(out.read_text())
    assert {"runtime", "runtime_data", "runtime_trainer", "runtime_peers"} <= set(sections)
    assert "error" not in sections["runtime"] and "error" not in sections["runtime_data"], sections
    assert sections["runtime_data"]["sampler"]["distributed"] is True  # the state the declaration is about
    assert shape_error(sections) == ""
    declared = schema()[0]
    assert "runtime.threads" in declared and "runtime_data.sampler" in declared


# ---------------------------------------------------------------- one redacting writer for the doctor's own stderr

ENV_SECRET = "Pl41nS3cretValue9"   # the value of a secret-named variable: no pattern knows its form
ARG_SECRET = "Arg5ecretValue77"    # given on the command line as --api-key=...


def test_the_writer_redacts_every_write_to_stderr_inside_a_command(monkeypatch, capsys):
    import click

    from ddpdoctor.model.redact import redacted_stderr

    monkeypatch.setenv("DB_PASSWORD", ENV_SECRET)
    with redacted_stderr():
        click.echo(f"ddpdoctor run: cannot start {ENV_SECRET} --api-key={ARG_SECRET}", err=True)
        print(f"status: {ENV_SECRET}", file=sys.stderr)
        sys.stderr.write(f"note {ENV_SECRET}\n")
    err = capsys.readouterr().err
    assert err.count("<redacted>") == 4 and ENV_SECRET not in err and ARG_SECRET not in err


def test_the_writer_leaves_lines_without_secrets_as_they_are(monkeypatch, capsys):
    from ddpdoctor.model.redact import RedactingWriter, redacted_stderr

    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")  # not a secret name
    monkeypatch.setenv("DB_PASSWORD", "1")  # too short to be looked for in text: `1` is everywhere
    line = "ddpdoctor run: job exit status 1; false start at rank 1 (TOKENIZERS_PARALLELISM=false)\n"
    with redacted_stderr():
        sys.stderr.write(line)
        assert isinstance(sys.stderr, RedactingWriter) and not hasattr(sys.stderr, "buffer")
    assert capsys.readouterr().err == line
    assert not isinstance(sys.stderr, RedactingWriter)  # put back after the command


def test_main_installs_the_writer_for_the_whole_command(monkeypatch, capsys, tmp_path):
    seen = []
    monkeypatch.setattr("ddpdoctor.cli._main", lambda args, argv: seen.append(type(sys.stderr).__name__))
    from ddpdoctor.cli import main as entry

    entry(["check"])
    assert seen == ["RedactingWriter"]


def _no_secret(where: dict) -> list:
    return [name for name, text in where.items() if ENV_SECRET in text or ARG_SECRET in text]


@pytest.mark.slow
def test_a_run_prints_and_saves_no_secret_of_env_or_argv(tmp_path):
    """The job fails with an exception that quotes the secrets; the doctor quotes that exception in its stderr
    lines, its report and its trace. Its own output must hide them; the job's own stderr is passed on as it is."""
    job = [sys.executable, "-c", "import os, sys; raise RuntimeError('login refused for ' + os.environ['DB_PASSWORD']"
           " + ' with ' + sys.argv[1])", f"--api-key={ARG_SECRET}"]
    env = {**os.environ, "DB_PASSWORD": ENV_SECRET, "PYTHONPATH": str(HERE.parent)}
    alone = subprocess.run(job, env=env, capture_output=True, text=True, timeout=120)
    report, trace = tmp_path / "run.json", tmp_path / "trace.json"
    got = subprocess.run([sys.executable, "-m", "ddpdoctor", "run", "--report", str(report), "--trace", str(trace),
                          "--", *job], env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert got.returncode == 1, got.stderr[-2000:]
    assert "RuntimeError: login refused" in got.stderr and "<redacted>" in got.stderr  # the doctor quoted it
    job_lines = set(alone.stderr.splitlines())
    assert ENV_SECRET in alone.stderr  # the job's own lines do carry it: they are passed on unchanged
    doctor_lines = "\n".join(line for line in got.stderr.splitlines() if line not in job_lines)
    files = {p.name: p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file()}
    assert report.name in files and trace.name in files
    assert _no_secret({"stdout": got.stdout, "doctor's stderr": doctor_lines, **files}) == []


@pytest.mark.slow
def test_a_comm_prints_no_secret_of_env_or_argv(tmp_path):
    """The rendezvous address given is the value of a secret variable (a pasted token): comm cannot resolve it and
    says so, without echoing it on stdout or stderr."""
    env = {**os.environ, "DB_PASSWORD": ENV_SECRET, "PYTHONPATH": str(HERE.parent)}
    got = subprocess.run([sys.executable, "-m", "ddpdoctor", "comm", "--cpu", "--nproc", "2", "--deadline", "60",
                          "--no-sweep", "--no-pairs", "--json", "--master-addr", ENV_SECRET],
                         env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    report = json.loads(got.stdout)
    assert got.returncode != 0 and report["findings"], got.stderr[-2000:]  # it reached a verdict on the address
    assert "<redacted>" in got.stdout
    files = {p.name: p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file()}
    assert _no_secret({"stdout": got.stdout, "stderr": got.stderr, **files}) == []
