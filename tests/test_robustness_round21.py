"""Round 21's robustness audit (robust21): the classes its first read found in the files it may change, each with a
test that fails before the fix.

1. `ddpdoctor triage a.log b.log` where one of several logs cannot be read (mode 000, another user's file): click's
   Path type, readable by default, refused the whole command (exit 2, "Path 'b.log' is not readable"), so the root
   cause in a.log was lost. The reader already notes such an input ("skipped: cannot read: Permission denied") and
   says "nothing to triage" only when no input could be read; the command now leaves the check to it.
2. The report's redaction tried its URL-credentials regex (`scheme://user:pw@`) from every letter of a long run of
   letters, each try scanning the run to its end: quadratic in the run. A triage finding repeats a 64 KiB exception name
   ("Error" + 64 KiB of letters + "Error:") in its title, detail and evidence; `triage --json` of 16 such lines took
   30 s, all of it there. The regex now starts only where a run of scheme characters starts (same matches). The test
   is a ratio of CPU times in one process (8 times the run: linear work grows 8 times, quadratic 64; bound 24), not a
   time.
"""
from __future__ import annotations

import json
import os

import pytest
from ddpdoctor.cli import main
from ddpdoctor.model.redact import REDACTED, redact_text

ERR = "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1191, unhandled system error, NCCL version 2.18.1\n"


def _deny(monkeypatch, path):
    """`path` unreadable for this process: mode 000 (enough for a user) and, for root, whom modes do not stop, an
    os.access and an open that refuse it as the kernel would for a user."""
    os.chmod(path, 0)
    if os.geteuid() != 0:
        return
    real_access, real_open = os.access, os.open
    target = os.path.realpath(path)

    def access(p, mode, *a, **k):
        if isinstance(p, (str, bytes, os.PathLike)) and os.path.realpath(os.fsdecode(p)) == target and mode & os.R_OK:
            return False
        return real_access(p, mode, *a, **k)

    def open_(p, flags, *a, **k):
        if isinstance(p, (str, bytes, os.PathLike)) and os.path.realpath(os.fsdecode(p)) == target:
            raise PermissionError(13, "Permission denied", os.fsdecode(p))
        return real_open(p, flags, *a, **k)

    monkeypatch.setattr(os, "access", access)
    monkeypatch.setattr(os, "open", open_)
    import builtins
    real_bopen = builtins.open

    def bopen(p, *a, **k):
        if isinstance(p, (str, bytes, os.PathLike)) and os.path.realpath(os.fsdecode(p)) == target:
            raise PermissionError(13, "Permission denied", os.fsdecode(p))
        return real_bopen(p, *a, **k)

    monkeypatch.setattr(builtins, "open", bopen)


def _run(capsys, args):
    with pytest.raises(SystemExit) as exc:
        main(args)
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def _logs(tmp_path):
    ok = tmp_path / "rank0.log"
    ok.write_text("step 1 loss 0.3\n" * 20 + ERR)
    bad = tmp_path / "rank1.log"
    bad.write_text("step 1 loss 0.3\n")
    return str(ok), str(bad)


def test_triage_of_several_logs_with_one_unreadable_reads_the_others(tmp_path, monkeypatch, capsys):
    ok, bad = _logs(tmp_path)
    _deny(monkeypatch, bad)
    code, out, err = _run(capsys, ["triage", ok, bad, "--json"])
    assert code == 1, err                           # the error in rank0.log: a failed job, not a usage error
    doc = json.loads(out)
    assert doc["triage"]["health"]["verdict"] == "failed"
    assert doc["summary"]["errors"] >= 1
    rows = {r["path"]: r for r in doc["triage"]["inputs"]}
    assert "problem" not in rows[ok]
    assert "cannot read" in rows[bad]["problem"]     # the unreadable log is named, not silently dropped


def test_triage_of_one_readable_log_is_unchanged_and_one_unreadable_alone_is_one_line(tmp_path, monkeypatch,
                                                                                         capsys):
    ok, bad = _logs(tmp_path)
    code, out, _ = _run(capsys, ["triage", ok, "--json"])
    assert code == 1 and json.loads(out)["triage"]["health"]["verdict"] == "failed"
    _deny(monkeypatch, bad)
    code, out, err = _run(capsys, ["triage", bad])
    assert code == 2
    errs = [ln for ln in err.splitlines() if ln.startswith("ddpdoctor: error:")]
    assert len(errs) == 1 and "cannot read" in errs[0] and "nothing to triage" in errs[0], err
    assert "Traceback" not in out + err


def _cpu(text, calls=20):
    """CPU seconds of `calls` redactions of `text` (enough calls that the short word's time is well above the
    clock's resolution)."""
    import time

    start = time.process_time()
    for _ in range(calls):
        redact_text(text)
    return time.process_time() - start


@pytest.mark.parametrize("unit", ["a", "a1"])
def test_redaction_of_one_long_word_stays_linear(unit):
    """8 times the word costs about 8 times the CPU (quadratic: 64). Best of three for the short word; the long one
    is measured until one measure is under the bound (at most twice): a pause of the machine only slows a measure."""
    short = "Error" + unit * (4096 // len(unit)) + "Error:"
    long = "Error" + unit * (8 * 4096 // len(unit)) + "Error:"
    t_short = max(min(_cpu(short) for _ in range(3)), 1e-4)
    ratios = []
    for _ in range(2):
        ratios.append(_cpu(long) / t_short)
        if ratios[-1] < 24:
            break
    assert min(ratios) < 24, (t_short, ratios)


@pytest.mark.parametrize("text, kept", [
    ("pip install git+https://alice:s3cretPW@github.com/org/repo.git", "git+https://alice:"),
    ("MASTER=1http://bob:pw@host:29500", "1http://bob:"),
    ("proxy=http://user:p4ss@proxy:3128 and ftp://u:v@h", "http://user:"),
    ("see -+.redis://:topsecret@cache:6379/0", "-+.redis://:"),
])
def test_url_credentials_are_still_redacted_with_what_precedes_the_scheme(text, kept):
    out = redact_text(text)
    assert kept + REDACTED + "@" in out, out
    for secret in ("s3cretPW", "pw@", "p4ss", "topsecret"):
        assert secret not in out, out


def test_text_with_no_url_credentials_is_unchanged_by_the_url_pass():
    for text in ("Errorabc" * 1000, "http://host:29500/path", "a://b", "user@host: ok", "rank0: x:y@z"):
        assert redact_text(text) == text
