"""triage's other inputs (Flight Recorder dumps, elastic error files, run reports), hostile input,
and the command line: exit statuses, one-line errors, the report contract."""
import json
import os
import pickle
import subprocess
import sys

import pytest

from ddpdoctor.triage import safe_pickle
from ddpdoctor.triage.api import triage_paths
from ddpdoctor.triage.flight import DumpError, analyze, load_json, load_pickle

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "fixtures", "triage")
PY = sys.executable


class Result:
    def __init__(self, returncode, stdout: bytes, stderr: bytes):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def cli(*args, input=None):
    """`ddpdoctor ARGS` in this process (a fast test starts no process): exit status, stdout, stderr."""
    from click.testing import CliRunner

    from ddpdoctor.cli import main

    with CliRunner().isolation(input=input) as streams:
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        out, err = streams[0].getvalue(), streams[1].getvalue()
    return Result(code, out, err)


def cli_process(*args):
    """The same in a real process: what a user's shell sees."""
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([PY, "-m", "ddpdoctor", *args], capture_output=True, env=env, timeout=120, cwd=ROOT)


def dump(rank, entries, world=4):
    """A Flight Recorder dump as torch writes it (the fields fr_trace reads)."""
    return {
        "version": "2.4", "rank": rank, "comm_lib_version": "2.21.5",
        "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": json.dumps(list(range(world)))}},
        "pg_status": {"0": {"last_enqueued_collective": entries[-1][0], "last_completed_collective": entries[-1][0] - 1}},
        "entries": [{
            "record_id": i, "pg_id": 0, "process_group": ("0", "default_pg"), "collective_seq_id": seq,
            "p2p_seq_id": 0, "op_id": seq, "profiling_name": op, "time_created_ns": 1733475000000000000 + seq,
            "input_sizes": [list(shape)], "input_dtypes": ["Float"], "output_sizes": [list(shape)],
            "output_dtypes": ["Float"], "state": state, "timeout_ms": 600000, "is_p2p": False,
            "frames": [{"name": "train_step", "filename": "/srv/proj/train.py", "line": 88}],
        } for i, (seq, op, shape, state) in enumerate(entries)],
    }


def healthy(n):
    return [(s, "nccl:all_reduce", (1024,), "completed") for s in range(1, n + 1)]


def test_flight_recorder_mismatch_from_incomplete_set_pickle_and_json(tmp_path):
    """Ranks 0, 1, 3 dumped (rank 2 did not); at seq 12 rank 0 all-reduces a different shape."""
    d0 = dump(0, healthy(11) + [(12, "nccl:all_reduce", (1032,), "started")])
    d1 = dump(1, healthy(11) + [(12, "nccl:all_reduce", (1024,), "started")])
    d3 = dump(3, healthy(11) + [(12, "nccl:all_reduce", (1024,), "started")])
    (tmp_path / "nccl_trace_rank_0").write_bytes(pickle.dumps(d0))
    (tmp_path / "nccl_trace_rank_1").write_bytes(pickle.dumps(d1, protocol=2))
    (tmp_path / "nccl_trace_rank_3.json").write_text(json.dumps(d3))
    report = triage_paths([str(tmp_path)])
    f = report.sorted_findings()[0]
    assert f.id == "LOG019" and "#12" in f.title and "rank:0" in f.subjects
    assert f.evidence["missing_dumps"] == [2]
    assert f.evidence["first_divergent_seq"] == 12


def test_flight_recorder_rank_that_never_issued():
    dumps = [load_json(json.dumps(dump(r, healthy(40) + ([(41, "nccl:all_reduce", (1024,), "started")] if r else [])))
                       .encode(), f"nccl_trace_rank_{r}") for r in range(4)]
    res = analyze(dumps)
    assert res[0]["never_issued"] == [0] and res[0]["first_divergent_seq"] == 41
    assert res[0]["waiting"][1]["frame"] == "/srv/proj/train.py:88 in train_step"


def test_flight_recorder_agreeing_dumps_are_quiet(tmp_path):
    for r in range(4):
        (tmp_path / f"nccl_trace_rank_{r}").write_bytes(pickle.dumps(dump(r, healthy(30))))
    report = triage_paths([str(tmp_path)])
    assert [f.id for f in report.findings] == []


class Evil:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_malicious_pickle_is_refused_and_never_executed(tmp_path):
    target = tmp_path / "pwned"
    data = pickle.dumps({"entries": [Evil(str(target))]})
    with pytest.raises(safe_pickle.UnsafePickle):
        safe_pickle.loads(data)
    with pytest.raises(DumpError, match="nothing was executed"):
        load_pickle(data, "nccl_trace_rank_0")
    p = tmp_path / "nccl_trace_rank_0"
    p.write_bytes(data)
    r = cli("triage", str(p))
    assert r.returncode == 2 and not target.exists()
    err = r.stderr.decode()
    assert err.count("\n") == 1 and "refused" in err and "Traceback" not in err


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_hostile_inputs_in_a_real_process(tmp_path):
    """What the shell sees: one line on stderr, exit 2, nothing executed, for garbage and an evil pickle."""
    target = tmp_path / "pwned"
    (tmp_path / "nccl_trace_rank_0").write_bytes(pickle.dumps({"entries": [Evil(str(target))]}))
    (tmp_path / "garbage.log").write_bytes(os.urandom(1 << 16))
    for name, reason in (("nccl_trace_rank_0", b"refused"), ("garbage.log", b"binary")):
        r = cli_process("triage", str(tmp_path / name))
        assert r.returncode == 2 and r.stderr.count(b"\n") == 1 and reason in r.stderr and b"Traceback" not in r.stderr
    assert not target.exists()
    r = cli_process("triage", "--json", os.path.join(FIX, "acceptance_torchrun_2node_rank5_oom.log"))
    assert r.returncode == 1 and json.loads(r.stdout)["findings"][0]["id"] == "LOG002"


def test_corrupt_pickle_is_one_line(tmp_path):
    p = tmp_path / "nccl_trace_rank_1"
    p.write_bytes(pickle.dumps(dump(1, healthy(3)))[:40])
    r = cli("triage", str(p))
    assert r.returncode == 2 and r.stderr.decode().count("\n") == 1 and b"Traceback" not in r.stderr


def test_elastic_error_file_names_rank_and_exception(tmp_path):
    d = tmp_path / "torchelastic_x" / "run1" / "attempt_0" / "3"
    d.mkdir(parents=True)
    (d / "error.json").write_text(json.dumps({"message": {
        "message": "KeyError: 'labels'",
        "extraInfo": {"py_callstack": 'Traceback (most recent call last):\n  File "/srv/proj/train.py", line 61, in main\n'
                                      '    y = batch["labels"]\nKeyError: \'labels\'\n', "timestamp": "1733475121"}}}))
    report = triage_paths([str(tmp_path)])
    f = report.sorted_findings()[0]
    assert f.id == "LOG004" and "rank:3" in f.subjects and "KeyError" in f.title and "train.py:61" in f.title


def test_run_report_is_valid_input(tmp_path):
    report_json = json.load(open(os.path.join(FIX, "run_report_death.json")))
    (tmp_path / "report.json").write_text(json.dumps(report_json))
    report = triage_paths([str(tmp_path / "report.json")])
    got = report.sorted_findings()
    assert got and got[0].id == report_json["findings"][0]["id"]
    assert report.extra["triage"]["job"]["ranks_seen"]


def test_run_stderr_text_in_a_log_is_valid_input():
    """`ddpdoctor run` prints its findings on stderr, which lands in the job's log: triage relays them
    with their RUN IDs, and the same death read from torchrun's lines is not reported twice."""
    report = triage_paths([os.path.join(FIX, "run_stderr_death.log")])
    got = [(f.id, tuple(s for s in f.subjects if s.startswith("rank:"))) for f in report.sorted_findings()]
    assert got == [("RUN011", ("rank:1",))]


def test_cli_json_markdown_and_exit_codes():
    log = os.path.join(FIX, "acceptance_torchrun_2node_rank5_oom.log")
    r = cli("triage", "--json", log)
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert doc["schema"] == "ddpdoctor/report/1" and doc["command"] == "triage"
    assert doc["findings"][0]["id"] == "LOG002" and "rank:5" in doc["findings"][0]["subjects"]
    assert doc["triage"]["job"]["world_size"] == 8
    md = cli("triage", "--format", "markdown", log).stdout.decode()
    assert md.startswith("## ddpdoctor triage report") and "LOG002" in md
    quiet = cli("triage", os.path.join(FIX, "rules", "LOG001_quiet_healthy_options.log"))
    assert quiet.returncode == 0 and b"No issues found!" in quiet.stdout


def test_cli_reads_standard_input():
    with open(os.path.join(FIX, "rules", "LOG007_trigger_port_in_use.log"), "rb") as fh:
        r = cli("triage", "-", "--json", input=fh.read())
    assert r.returncode == 1 and json.loads(r.stdout)["findings"][0]["id"] == "LOG007"


@pytest.mark.parametrize("content,reason", [
    (os.urandom(1 << 16), "binary"),
    (b"\x00" * 4096, "binary"),
    (b"", "empty"),
])
def test_hostile_files_get_one_line_and_exit_2(tmp_path, content, reason):
    p = tmp_path / "bad.log"
    p.write_bytes(content)
    r = cli("triage", str(p))
    err = r.stderr.decode()
    assert r.returncode == 2 and err.count("\n") == 1 and reason in err and "Traceback" not in err, err


def test_missing_path_and_no_input_are_usage_errors(tmp_path):
    r = cli("triage", str(tmp_path / "nope.log"))
    assert r.returncode == 2 and r.stderr.decode().count("\n") == 1
    r = cli("triage", str(tmp_path))  # an empty folder
    assert r.returncode == 2 and b"no log files" in r.stderr


def test_mixed_folder_gives_a_partial_report_with_a_note(tmp_path):
    (tmp_path / "garbage.bin.log").write_bytes(os.urandom(4096))
    with open(os.path.join(FIX, "rules", "LOG011_trigger_ancdata.log"), "rb") as fh:
        (tmp_path / "rank1.log").write_bytes(fh.read())
    r = cli("triage", str(tmp_path))
    out = r.stdout.decode()
    assert r.returncode == 1 and "LOG011" in out and "skipped: binary data" in out


def test_explain_and_checks_list_the_log_rules():
    r = cli("explain", "LOG002")
    assert r.returncode == 0 and b"What it checks" in r.stdout and b"rank-oom-killed" in r.stdout
    r = cli("checks")
    assert b"LOG019" in r.stdout and b"flight-recorder-divergence" in r.stdout


def test_odd_and_deeply_nested_dumps_never_crash(tmp_path):
    deep = []
    for _ in range(5000):  # deeper than the JSON encoder and the renderer can recurse
        deep = [deep]
    odd = {"entries": [None, 7, "x", {"collective_seq_id": "3"}, {"collective_seq_id": 2, "input_sizes": deep,
                                                                   "process_group": ["0"], "state": 5}],
           "pg_config": {"0": {"ranks": "not json"}}}
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(20000)
    try:
        data = pickle.dumps(odd)
    finally:
        sys.setrecursionlimit(limit)
    (tmp_path / "nccl_trace_rank_0").write_bytes(data)
    (tmp_path / "nccl_trace_rank_1").write_bytes(pickle.dumps(dump(1, healthy(2))))
    r = cli("triage", "--json", str(tmp_path))
    assert r.returncode in (0, 1), r.stderr
    doc = json.loads(r.stdout)
    assert not [f for f in doc["findings"] if f["id"] == "DOC001"]


def test_only_and_ignore_move_the_timeouts_to_the_next_rule_in_line():
    log = os.path.join(FIX, "acceptance_torchrun_2node_rank5_oom.log")
    for args in (("--only", "LOG001"), ("--ignore", "LOG002")):
        doc = json.loads(cli("triage", "--json", *args, log).stdout)
        assert [f["id"] for f in doc["findings"]] == ["LOG001"], args
    r = cli("triage", "--only", "ENV003", log)
    assert r.returncode == 2 and b"selects no triage rule" in r.stderr


def test_docs_show_the_real_output():
    """docs/triage.md's first example is exactly what the command prints for the acceptance fixture."""
    from ddpdoctor.pipeline.render import render

    doc = open(os.path.join(ROOT, "docs", "triage.md"), encoding="utf-8").read()
    block = doc.split("$ ddpdoctor triage job.log\n", 1)[1].split("```", 1)[0].rstrip("\n")
    report = triage_paths([os.path.join(FIX, "acceptance_torchrun_2node_rank5_oom.log")])
    assert render(report, "text") == block


def test_real_run_output_log_and_report_together_give_one_finding():
    """fixtures/triage/run_real: what `ddpdoctor run --report report.json -- torchrun ... gloo_fault.py kill`
    really wrote (paths anonymised): its stderr in job.log and its report. One death, one finding: the
    live RUN010, not also LOG002 from torchrun's lines, nor twice from the two files."""
    report = triage_paths([os.path.join(FIX, "run_real")])
    assert [(f.id, "rank:1" in f.subjects) for f in report.findings] == [("RUN010", True)]
    alone = triage_paths([os.path.join(FIX, "run_real", "job.log")])
    assert [f.id for f in alone.findings] == ["RUN010"]
