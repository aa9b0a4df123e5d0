"""Round 23's robustness classes found by robust23's audit in files the audit may not change (its for-lead notes):
numbers no program prints (int() and str() refuse 4,300+ digits since CPython 3.11), characters str.isdigit() takes and
int() refuses, and a beacon whose cold part is not the object the recorder writes. Pure: no process."""
from __future__ import annotations

from ddpdoctor.checks import nccl, net
from ddpdoctor.run import beacon, section
from ddpdoctor.triage import lines
from ddpdoctor.triage.api import triage_paths


def _triage(tmp_path, text):
    p = tmp_path / "job.log"
    p.write_text(text)
    return triage_paths([str(p)])


def test_a_zsh_report_with_a_5000_digit_rank_is_read_not_an_internal_error(tmp_path):
    report = _triage(tmp_path, "zsh: segmentation fault  RANK=" + "9" * 5000 + " python train.py\n")
    assert [f.id for f in report.findings][:1] == ["LOG003"]


def test_a_zsh_job_report_with_a_5000_digit_pid_is_read(tmp_path):
    report = _triage(tmp_path, "[1]  + " + "4" * 5000 + " killed     python train.py\n")
    assert [f.id for f in report.findings][:1] == ["LOG002"]


def test_the_line_reader_cuts_only_digit_runs_no_program_prints():
    assert lines.clean(("x=" + "7" * 100).encode()) == "x=" + "7" * lines._MAX_DIGITS
    ordinary = "Storage size calculation overflowed with sizes=[8410156404468110876]"
    assert lines.clean(ordinary.encode()) == ordinary


def test_a_torch_version_with_a_5000_digit_part_is_no_crash_of_nccl_or_net_checks():
    snap = {"packages": {"versions": {"torch": "1." + "2" * 5000}}}
    assert nccl._torch_version(snap) == (0, 0)
    assert net._torch_at_least(snap, (2, 2)) is False
    good = {"packages": {"versions": {"torch": "2.4.1+cu121"}}}
    assert nccl._torch_version(good) == (2, 4) and net._torch_at_least(good, (2, 2)) is True


def test_a_loader_line_ending_in_a_superscript_digit_is_no_frame():
    assert section._frame_of_line("train.py:\u00b2") is None
    assert section._frame_of_line("train.py:12")["line"] == 12


def test_a_beacon_whose_cold_part_is_a_list_reads_as_no_fields(tmp_path):
    w = beacon.Writer(str(tmp_path / "beacon.1"))
    w.hot("run", False, False, 1.0, 1.0, 0.0, 0.0, 3, 0, 0, 0)
    w.cold([1, 2, 3])
    got = beacon.read(w.path)
    assert got is not None and got["step"] == 3 and "coll" not in got


def test_a_beacon_whose_loader_and_collective_are_not_objects_drops_them(tmp_path):
    w = beacon.Writer(str(tmp_path / "beacon.1"))
    w.hot("run", False, False, 1.0, 1.0, 0.0, 0.0, 3, 0, 0, 0)
    w.cold({"rank": 1, "dl": "x", "dlt": 5, "coll": [1]})
    got = beacon.read(w.path)
    assert got["rank"] == 1 and not {"dl", "dlt", "coll"} & set(got)
    w.cold({"rank": 1, "dl": {"at": "train.py:3"}})
    assert beacon.read(w.path)["dl"]["at"] == "train.py:3"


def test_the_loader_hook_reads_a_loaders_length_once_not_every_epoch(monkeypatch):
    # robust23: len(loader) calls the user's Dataset.__len__; the hook called it once more per iterator (every epoch)
    from run_factory import hooked_recorder

    S, Base, Loader = hooked_recorder(monkeypatch)
    calls = []

    class Counted(Loader):
        def __len__(self):
            calls.append(1)
            return list.__len__(self)

    loader = Counted(range(3))
    for _epoch in range(5):
        it = Base(loader)
        for _ in range(3):
            next(it)
    assert len(calls) == 1 and S.dl["len"] == 3
    other = Counted(range(4))   # a new loader object: its own length is read
    Base(other)
    assert len(calls) == 2 and S.dl["len"] == 4
