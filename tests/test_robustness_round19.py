"""Round 19's adversarial audit (bad inputs, --json, no hangs, no orphans, no secrets): one test per class it found
broken, each failing before its fix. The audit itself (every command x every bad-input class) lives outside the
repository; docs/measured/suite.md records its figures."""
import gzip
import json
import os
import threading

import pytest

from ddpdoctor.cli import main


def _call(capsys, argv):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out, err = capsys.readouterr()
    return exc.value.code, out, err


class _Writer(threading.Thread):
    """Opens `fifo` for writing after `opened` is set (or after `valve` s, so that a reader that blocks in open() or
    in read() is released and the test fails instead of hanging), writes `data` after `write` is set, closes it."""

    def __init__(self, fifo, data=b"", valve=30.0):
        super().__init__(daemon=True)
        self.fifo, self.data, self.valve = fifo, data, valve
        self.write = threading.Event()

    def run(self):
        fd = os.open(self.fifo, os.O_WRONLY)   # blocks until a reader has it open
        try:
            self.write.wait(self.valve)
            if self.data:
                os.write(fd, self.data)
        finally:
            os.close(fd)


# ----------------------------------------------------------------------------- a FIFO or a pipe that never writes

@pytest.mark.parametrize("argv", [["triage", "--json"], ["check", "--json", "--snapshot"]])
def test_a_fifo_whose_writer_never_writes_is_an_input_error_not_a_hang(capsys, tmp_path, monkeypatch, argv):
    fifo = str(tmp_path / "silent")
    os.mkfifo(fifo)
    monkeypatch.setenv("DDPDOCTOR_INPUT_IDLE_S", "0.5")
    writer = _Writer(fifo)   # opens, never writes; its valve (30 s) releases a reader that waits for ever
    writer.start()
    code, out, err = _call(capsys, [*argv, fifo])
    writer.write.set()
    writer.join()
    assert code == 2 and err.count("\n") == 1
    assert "no data from" in err and "DDPDOCTOR_INPUT_IDLE_S" in err, err
    assert json.loads(out)["error"]["exit_status"] == 2


def test_a_fifo_that_nobody_opens_for_writing_is_an_input_error_not_a_hang(capsys, tmp_path, monkeypatch):
    # open() of a FIFO without a writer blocks in the kernel; the reader must not. The valve below opens it for
    # writing after 30 s, so that a reader blocked in open() ends and fails the assertions instead of hanging.
    fifo = str(tmp_path / "nowriter")
    os.mkfifo(fifo)
    monkeypatch.setenv("DDPDOCTOR_INPUT_IDLE_S", "0.5")
    valve = threading.Timer(30.0, lambda: os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)))
    valve.daemon = True
    valve.start()
    try:
        code, out, err = _call(capsys, ["triage", fifo])
    finally:
        valve.cancel()
    assert code == 2 and "no data from" in err, err


def test_a_fifo_that_writes_is_read_whole_once(capsys, tmp_path):
    # `ddpdoctor triage <(zcat job.log.gz)`: the FIFO is read once, its first bytes included (sniffing it by opening
    # it a first time consumed them: 0 lines read, the root cause lost).
    fifo = str(tmp_path / "logpipe")
    os.mkfifo(fifo)
    writer = _Writer(fifo, b"step 1 loss 2.0\n[rank3]: RuntimeError: NCCL communicator was aborted on rank 3.\n")
    writer.write.set()
    writer.start()
    code, out, err = _call(capsys, ["triage", "--json", fifo])
    writer.join()
    doc = json.loads(out)
    assert code == 1, err
    assert "LOG022" in [f["id"] for f in doc["findings"]], doc["findings"]


def test_a_silent_pipe_on_standard_input_is_an_input_error(tmp_path, monkeypatch):
    from ddpdoctor.model.inputs import InputStalled, stdin_input

    read_fd, write_fd = os.pipe()
    monkeypatch.setenv("DDPDOCTOR_INPUT_IDLE_S", "0.3")
    monkeypatch.setattr("sys.stdin", os.fdopen(read_fd, "r"))
    try:
        with pytest.raises(InputStalled):
            stdin_input().read(10)
        os.write(write_fd, b"abc")
        os.close(write_fd)
        assert stdin_input().read(10) == b"abc"   # data and then EOF: read to its end, no bound reached
    finally:
        os.close(read_fd)


def test_a_regular_file_is_read_as_before(tmp_path):
    from ddpdoctor.model.inputs import open_input

    path = tmp_path / "a.log"
    path.write_bytes(b"x" * 100)
    with open_input(str(path)) as fh:
        assert type(fh).__name__ == "FileIO" and fh.read() == b"x" * 100


# ----------------------------------------------------------------------------- a damaged .gz

def test_a_gz_whose_deflate_data_is_damaged_is_an_input_error(capsys, tmp_path):
    bad = tmp_path / "job.log.gz"
    bad.write_bytes(b"\x1f\x8b\x08\x00" + b"\x00garbage" * 100)   # a gzip header, then no valid deflate block
    code, out, err = _call(capsys, ["triage", "--json", str(bad)])
    assert code == 2 and "damaged gzip data" in err, err
    assert json.loads(out)["error"]["exit_status"] == 2


def test_a_good_gz_is_still_read(capsys, tmp_path):
    good = tmp_path / "job.log.gz"
    good.write_bytes(gzip.compress(b"[rank3]: RuntimeError: NCCL communicator was aborted on rank 3.\n"))
    code, out, err = _call(capsys, ["triage", "--json", str(good)])
    assert code == 1 and "LOG022" in [f["id"] for f in json.loads(out)["findings"]]


# ----------------------------------------------------------------------------- standard input closed

def test_check_snapshot_from_a_closed_standard_input_is_an_input_error(capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", None)   # `ddpdoctor check --snapshot - <&-`
    code, out, err = _call(capsys, ["check", "--json", "--snapshot", "-"])
    assert code == 2 and "standard input is closed" in err, err
    assert json.loads(out)["error"]["exit_status"] == 2


# ----------------------------------------------------------------------------- an output that cannot encode the report

@pytest.mark.parametrize("encoding", ["latin-1", "ascii"])
def test_a_non_utf8_stdout_gets_the_report_escaped_not_a_crash(monkeypatch, tmp_path, encoding):
    # PYTHONIOENCODING=latin-1, a C locale without coercion: the text report's [✓] raised UnicodeEncodeError (exit 3)
    import io

    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding=encoding, errors="strict", write_through=True)
    monkeypatch.setattr("sys.stdout", out)
    log = tmp_path / "job.log"
    log.write_text("[rank3]: RuntimeError: NCCL communicator was aborted on rank 3 \u2014 caf\u00e9 \U0001F600\n")
    for argv, parse in ((["triage", "-v", str(log)], False), (["triage", "--json", str(log)], True),
                        (["check", "--no-comm", "--snapshot", str(_SNAP)], False)):
        raw.seek(0)
        raw.truncate()
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code in (0, 1), (argv, exc.value.code)
        # click rewraps an ASCII stdout as UTF-8 itself; latin-1 it writes as it is: there the escapes show
        text = raw.getvalue().decode("utf-8" if encoding == "ascii" else encoding)
        if encoding == "latin-1" and not parse:
            assert "\\u" in text
        if parse:
            doc = json.loads(text)   # the escapes are JSON's own: the document parses to the same text
            assert doc["schema"] == "ddpdoctor/report/1" and doc["findings"]


_SNAP = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "fixtures", "snapshots")
_SNAP = os.path.join(_SNAP, sorted(n for n in os.listdir(_SNAP) if n.endswith(".json"))[0])


# ----------------------------------------------------------------------------- a config that cannot be read

def test_a_config_that_cannot_be_read_is_an_input_error_not_silence(capsys, tmp_path):
    bad = tmp_path / "accelerate.yaml"
    bad.write_bytes(b"gpu_ids: \xff\xfe\n")   # not UTF-8: its facts were dropped and the run said nothing
    code, out, err = _call(capsys, ["check", "--no-comm", "--json", "--snapshot", str(_SNAP), "--config", str(bad)])
    assert code == 2 and "cannot read --config" in err and "accelerate.yaml" in err, err


def test_a_config_that_reads_is_judged(capsys, tmp_path):
    good = tmp_path / "accelerate.yaml"
    good.write_text("gpu_ids: 0,1\nnum_processes: 2\n")
    code, out, err = _call(capsys, ["check", "--no-comm", "--json", "--snapshot", str(_SNAP), "--config", str(good)])
    assert code in (0, 1) and json.loads(out)["command"] == "check"


# ----------------------------------------------------------------------------- secrets on a command line, and in errors

TOKEN = "hf_QzXw9RtYuIoPaSdFgHjKlZxCvBnM1234"


@pytest.mark.parametrize("text, secret", [
    ("sh -c 'exit 3' argv0 --password=s3cr3t-PassW0rd-robust19", "s3cr3t-PassW0rd-robust19"),  # by its flag's name
    ("train.py --api-key Zq9word --nproc 2", "Zq9word"),
    ("HF_TOKEN=plainword torchrun train.py", "plainword"),
    ("MY_DB_PASSWORD=hunter2 python x.py", "hunter2"),
])
def test_a_value_named_secret_on_a_command_line_is_redacted(text, secret):
    from ddpdoctor.model.redact import redact_text

    assert secret not in redact_text(text) and "<redacted>" in redact_text(text)


@pytest.mark.parametrize("text", ["sorted(x, key=len)", "--master-port 29500 --nproc 2", "TOKENIZERS_PARALLELISM=false",
                                  "MASTER_PORT=29500 WORLD_SIZE=2", "NCCL_IB_PKEY=3", "PWD=/home/u", "--no-auth --x 1"])
def test_settings_that_are_not_secrets_stay_readable(text):
    from ddpdoctor.model.redact import redact_text

    assert redact_text(text) == text


@pytest.mark.parametrize("argv", [["triage", "--json", f"/nonexistent/{TOKEN}.log"], ["explain", TOKEN],
                                  ["check", "--no-comm", "--json", "--only", TOKEN], ["lint", f"/nonexistent/{TOKEN}.py"]])
def test_an_input_error_that_echoes_a_token_the_user_typed_redacts_it(capsys, argv):
    code, out, err = _call(capsys, argv)
    assert code == 2 and err.startswith("ddpdoctor: error: ") and TOKEN[3:] not in err + out


def test_the_probe_progress_line_redacts_the_options_it_echoes():
    import io

    from ddpdoctor.probe.runner import Progress

    stream = io.StringIO()
    Progress(stream=stream).say(f"2 rank(s) through torch's elastic launcher (--trainer-arg hub_token={TOKEN} "
                                "--trainer-arg push_to_hub_token=plainword)")
    assert TOKEN[3:] not in stream.getvalue() and "plainword" not in stream.getvalue()


# ----------------------------------------------------------------------------- an output FIFO that nobody reads

@pytest.mark.slow   # the live snapshot's gatherers start processes
def test_snapshot_to_a_fifo_nobody_reads_is_an_error_not_a_hang(capsys, tmp_path, monkeypatch):
    fifo = str(tmp_path / "out")
    os.mkfifo(fifo)
    monkeypatch.setenv("DDPDOCTOR_INPUT_IDLE_S", "0.3")

    def drain():   # the valve: a writer blocked in open() for 30 s is released, and the test fails instead of hanging
        with open(fifo, "rb") as fh:
            fh.read()

    valve = threading.Timer(30.0, drain)
    valve.daemon = True
    valve.start()
    try:
        code, out, err = _call(capsys, ["snapshot", "-o", fifo])
    finally:
        valve.cancel()
    assert code == 2 and "no reader opened" in err, err


@pytest.mark.slow   # the live snapshot's gatherers start processes
def test_snapshot_to_a_fifo_with_a_reader_is_written_whole(capsys, tmp_path):
    fifo = str(tmp_path / "out")
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()), daemon=True)
    reader.start()
    code, out, err = _call(capsys, ["snapshot", "-o", fifo])
    reader.join(60)
    assert code == 0 and json.loads(got[0])["schema"].startswith("ddpdoctor/snapshot/")
