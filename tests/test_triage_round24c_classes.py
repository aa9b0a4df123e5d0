"""Round 24, fourth cycle (issue 24, triage32): held-out classes, each with a trigger and a quiet case.

- NCCL's socket transport's "NET/Socket : peer X message truncated : receiving N bytes instead of M" WARN returns
  ncclInvalidUsage itself (NVIDIA/nccl src/transport/net_socket.cc @5067397c, `return ncclInvalidUsage` after the WARN;
  so since 2.12.10): catalogue class nccl_invalid_usage, not a network fault. Alone (no torch error quoting it) it is a
  collective size mismatch between ranks (LOG006's truncated reading), not an unexplained failure (LOG028); under an
  unhandled system error LOG009 keeps it (tests/test_triage_round17_1207.py).

Pure: each case is triage over a fixture file or a few lines; no process is launched."""
import os

from ddpdoctor.facts import messages
from ddpdoctor.triage.api import triage_paths

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RULES = os.path.join(ROOT, "fixtures", "triage", "rules")


def _found(path):
    return [f for f in triage_paths([path]).sorted_findings() if f.severity in ("error", "warning")]


def test_socket_message_truncated_is_catalogued_as_invalid_usage_from_its_source():
    e = messages.by_id("nccl.net_socket.net_socket_peer_message_truncated_receiving")
    assert e["class"] == "nccl_invalid_usage"
    assert e["source"]["path"] == "src/transport/net_socket.cc" and e["source"]["repo"] == "NVIDIA/nccl"


def test_socket_message_truncated_alone_is_a_collective_mismatch():
    f = _found(os.path.join(RULES, "LOG006_trigger_socket_message_truncated_alone.log"))
    assert f and f[0].id == "LOG006" and f[0].severity == "error", [(x.id, x.title) for x in f]
    assert "the ranks' collectives differ" in f[0].title and "received 262144 bytes where 131072" in f[0].title
    assert "two ranks on one GPU" not in f[0].title and "TORCH_DISTRIBUTED_DEBUG=DETAIL" in f[0].fix
    assert not any(x.id == "LOG028" for x in f), [(x.id, x.title) for x in f]


def test_message_truncated_in_a_users_prose_is_no_failure():
    f = _found(os.path.join(RULES, "LOG006_quiet_message_truncated_in_prose.log"))
    assert f == [], [(x.id, x.title) for x in f]


# A caught exception on a WARNING-levelled line (python/cpython Lib/traceback.py @v3.11.7 _format_final_exc_line: the
# exception's "Type: message"; Lib/logging/__init__.py: the WARNING level name) after words saying something failed:
# catalogue entry python.logging.warning_failed_with_exception, class work_unit_failed_caught (LOG028). It was read as
# no failure at all, so a job whose trial/callback failed and that printed its end line read "No issues found!".
def test_a_caught_exception_on_a_warning_line_is_failure_evidence_not_health():
    f = _found(os.path.join(RULES, "LOG028_trigger_warning_caught_exception_then_training_goes_on.log"))
    assert f and f[0].id == "LOG028", [(x.id, x.title) for x in f]
    m = messages.match_all("2026-03-02 10:14:04,123 - WARNING - tuner - Trial trial_0003 failed: ValueError: x y")
    assert [x.entry["id"] for x in m] == ["python.logging.warning_failed_with_exception"]


def test_an_optional_import_that_failed_into_a_fallback_stays_healthy():
    f = _found(os.path.join(RULES, "LOG028_quiet_warning_optional_import_failed_fallback.log"))
    assert f == [], [(x.id, x.title) for x in f]
    # a Python warning category (UserWarning) is not a WARNING-levelled line, and a warning without a failure word or
    # without an exception's "Type: message" is not one either
    for text in ("torchvision/io/image.py:13: UserWarning: Failed to load image Python extension: OSError: x.so",
                 "WARNING:root:RuntimeError: retrying the download", "WARNING: step 3 failed to improve the loss"):
        assert not any(x.entry["id"] == "python.logging.warning_failed_with_exception"
                       for x in messages.match_all(text)), text


# The exception of a caught-failure line is the cause in LOG028's title: the line's own "Type: message" (the entry's
# groups), else the line after it, where AutoGluon logs str(e) without its type (autogluon timeseries/.../trainer/
# abstract_trainer.py @b63bfd40 _train_and_save; reader.WINDOW_OPENERS reads that line past the head too).
def test_the_exception_after_a_caught_failure_line_is_the_cause_in_the_title():
    f = _found(os.path.join(RULES, "LOG028_trigger_automl_model_failed_then_training_complete.log"))
    assert f and f[0].id == "LOG028", [(x.id, x.title) for x in f]
    assert "unexpected keyword argument 'use_reg_token'" in f[0].title, f[0].title


def test_a_caught_failure_line_that_ends_the_log_names_no_message(tmp_path):
    p = tmp_path / "job.log"
    p.write_text("Training timeseries model Chronos[bolt_base].\n"
                 "\tWarning: Exception caused Chronos[bolt_base] to fail during training... Skipping this model.\n")
    f = _found(str(p))
    assert f and f[0].id == "LOG028" and "its message is on the line after it" in f[0].title, [(x.id, x.title) for x in f]


# A rank the reporter's own words name ("the job always dies on rank 3") before an unranked failure is a guess the
# finding takes and says it is one (Job.prose_rank; LOG004 and LOG028); two ranks named, a RANK= line, or a rank prefix
# in the file (more processes wrote it) name none.
def test_a_rank_named_only_in_the_reporters_prose_is_a_guess_said_so():
    f = _found(os.path.join(RULES, "LOG004_trigger_rank_named_in_reporters_prose.log"))
    assert f and f[0].id == "LOG004" and "rank:3" in f[0].subjects, [(x.id, x.title, x.subjects) for x in f]
    assert "is a guess" in f[0].title and "line 1" in f[0].title


_TWO_RANKS = 'It works on rank 0 but after the first epoch it dies, I think on rank 3 (not sure, the output is below):\nEpoch 1: 100%|██████████| 50/50 [00:10<00:00, loss=0.52]\nTraceback (most recent call last):\n  File "train.py", line 88, in <module>\n    main()\n  File "train.py", line 80, in main\n    loss = criterion(out, y)\nValueError: Target size (torch.Size([16])) must be the same as input size (torch.Size([16, 1]))\n'


def test_two_ranks_named_in_prose_name_none(tmp_path):
    p = tmp_path / "job.log"
    p.write_text(_TWO_RANKS)
    f = _found(str(p))
    assert f and f[0].id == "LOG004", [(x.id, x.title) for x in f]
    assert not any(s.startswith("rank:") for s in f[0].subjects) and "guess" not in f[0].title, (f[0].title, f[0].subjects)


def test_a_rank_in_prose_after_the_failure_or_in_a_prefix_is_not_taken(tmp_path):
    p = tmp_path / "job.log"
    p.write_text('Traceback (most recent call last):\n  File "train.py", line 80, in main\nValueError: bad\n'
                 "This happened on rank 2.\n")
    f = _found(str(p))
    assert f and not any(s.startswith("rank:") for s in f[0].subjects), (f[0].title, f[0].subjects)
