"""Round 21 (robust21's audit, classes in triage's input handling), each with a trigger and a quiet twin:
1. an input that could not be read leaves health unshown ("No issues found!" never covers a log nobody read);
2. NUL padding (a file cut by a crash: XFS "NULL files", ext4 delayed allocation) does not make a log "binary";
3. a .gz cut short or followed by garbage gives the lines before the damage, and says so;
4. a finding's title stays one readable line (a 64 KiB exception name quoted from a log is cut)."""
import gzip

from ddpdoctor.pipeline.render import summary_line
from ddpdoctor.triage.api import triage_paths

_HEALTHY = "".join(f"step {i} loss 0.{i:02d}\n" for i in range(1, 6)) + "Training completed.\n"


def test_an_unreadable_input_leaves_health_unshown(tmp_path):
    good = tmp_path / "rank0.log"
    good.write_text(_HEALTHY)
    bad = tmp_path / "rank1.log"
    bad.write_bytes(b"\x01\x02\x03\x04" * 2000)          # binary: skipped with a problem
    report = triage_paths([str(good), str(bad)])
    health = report.extra["triage"]["health"]
    assert health["verdict"] == "not_shown" and "rank1.log" in health["why"], health
    assert any("rank1.log" in s.reason for s in report.skipped)
    quiet = triage_paths([str(good)]).extra["triage"]["health"]
    assert quiet["verdict"] == "ended_well", quiet          # the twin: the same log alone shows health


def test_the_summary_line_does_not_say_no_issues_over_an_unread_log(tmp_path):
    good = tmp_path / "rank0.log"
    good.write_text(_HEALTHY)
    bad = tmp_path / "rank1.log"
    bad.write_bytes(b"\x01\x02\x03\x04" * 2000)
    line = summary_line(triage_paths([str(good), str(bad)]))
    assert "No issues found!" not in line and "could not be read" in line, line
    assert "No issues found!" in summary_line(triage_paths([str(good)]))


def test_a_log_padded_with_nuls_is_read(tmp_path):
    log = tmp_path / "job.log"
    log.write_bytes(b"Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
                    b"RuntimeError: boom\n" + b"\x00" * 4096)
    report = triage_paths([str(log)])
    assert [r for r in report.extra["triage"]["inputs"] if "problem" in r] == []
    assert any(f.id == "LOG004" for f in report.findings)
    elf = tmp_path / "core.bin"
    elf.write_bytes(b"\x7fELF\x02\x01\x01" + bytes(range(1, 32)) * 200 + b"\x00" * 512)
    rows = triage_paths([str(log), str(elf)]).extra["triage"]["inputs"]
    assert any(r["path"].endswith("core.bin") and "binary" in r.get("problem", "") for r in rows), rows


def test_a_cut_gz_gives_its_lines_before_the_cut(tmp_path):
    import random
    rng = random.Random(0)   # an incompressible tail after the failure, so that the cut lands in it
    body = ("".join(f"[rank1]: step {i}\n" for i in range(200)) + "Traceback (most recent call last):\n"
            "  File \"train.py\", line 3, in <module>\nRuntimeError: boom\n"
            + "".join(f"{rng.getrandbits(128):032x}\n" for _ in range(5000))).encode()
    whole = gzip.compress(body)
    cut = tmp_path / "job.log.gz"
    cut.write_bytes(whole[: len(whole) * 2 // 3])
    report = triage_paths([str(cut)])
    assert any(f.id == "LOG004" for f in report.findings), [f.id for f in report.findings]
    rows = report.extra["triage"]["inputs"]
    assert any("damaged gzip data" in r.get("damaged", "") for r in rows), rows
    ok = tmp_path / "whole.log.gz"
    ok.write_bytes(whole)
    rows = triage_paths([str(ok)]).extra["triage"]["inputs"]
    assert not any("damaged" in r or "problem" in r for r in rows), rows


def test_a_huge_exception_name_gives_a_bounded_title(tmp_path):
    log = tmp_path / "job.log"
    log.write_text("Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
                   + "A" * 65000 + "Error: boom\n")
    titles = [f.title for f in triage_paths([str(log)]).findings]
    assert titles and max(len(t) for t in titles) <= 300, [len(t) for t in titles]
    log.write_text("Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\nValueError: boom\n")
    assert any("ValueError" in f.title and not f.title.endswith("…") for f in triage_paths([str(log)]).findings)
