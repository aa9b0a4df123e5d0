"""Round 21's robustness audit (robust21): the classes its first read found in the files it may change, each with a
test that fails before the fix.

1. `ddpdoctor triage a.log b.log` where one of several logs cannot be read (mode 000, another user's file): click's
   Path type, readable by default, refused the whole command (exit 2, "Path 'b.log' is not readable"), so the root
   cause in a.log was lost. The reader already notes such an input ("skipped: cannot read: Permission denied") and
   says "nothing to triage" only when no input could be read; the command now leaves the check to it.
"""
from __future__ import annotations

import json
import os

import pytest
from ddpdoctor.cli import main

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
