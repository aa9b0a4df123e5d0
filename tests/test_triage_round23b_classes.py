"""Round 23 (issue 24, triage28): classes from the wrong first reads of batches 206-208, each with a trigger and a quiet
case (pure: one small log per case, no process).

- A failure word as the object of a verb of preventing it ("... to avoid OOM", "to prevent the crash") is a writer's
  aim, not a failure (b207_20: a healthy log read as "a process failed first (line 8)").
- A line that is one Markdown emphasis span ("**Broken pipe error**:", CommonMark 0.31.2 6.2) is a caption, read as a
  heading is: its errno text names the thread's subject, not a lost peer (b208_16: LOG022 where the log's own failure is
  a cut traceback).
"""
from ddpdoctor.triage import prose
from triage_loud import brief as _ids, loud_findings as _found

_EPOCHS = "".join(f"epoch: {i}, lr: 1.50e-04 - train loss: 0.{90 - i} - valid loss: 0.{95 - i}\n" for i in range(1, 11))
_STEPS = "".join(f"epoch 1 step {i} loss 0.{i % 89:02d} lr 1e-4\n" for i in range(1, 31))


# --- a failure named as what the writer avoids ------------------------------------------------------------------------
def test_a_failure_word_after_a_verb_of_avoiding_is_no_failure(tmp_path):
    for line in ("Training batch size is 1 and I apply the signal length limit to 32000 to avoid OOM.",
                 "I set NCCL_P2P_DISABLE=1 to prevent the NCCL hangs we saw last week.",
                 "We pin the workers to get rid of the timeouts."):
        f = _found(tmp_path, "Hi,\n" + line + "\nHere is my training log:\n\n" + _EPOCHS)
        assert not any(x.severity == "error" or x.title.startswith("unexplained failure") for x in f), (line, _ids(f))
        assert prose.judge_text(line) is False, line


def test_a_failure_quoted_after_the_avoiding_words_still_fails(tmp_path):
    line = "I lowered the batch to avoid OOM but still got RuntimeError: CUDA error: an illegal memory access was encountered"
    assert prose.judge_text(line) == "words"
    f = _found(tmp_path, "I cut the batch to avoid OOM.\n" + _STEPS + "Killed\n")
    assert f and f[0].id == "LOG002", _ids(f)


# --- a caption that is one emphasis span ------------------------------------------------------------------------------
_CUT = ("submitit ERROR (2024-04-03 06:30:10,782) - Submitted job triggered an exception\n"
        "Traceback (most recent call last):\n"
        '  File "/opt/conda/lib/python3.10/runpy.py", line 196, in _run_module_as_main\n'
        "    return _run_code(code, main_globals, None,\n")


def test_an_emphasis_caption_naming_an_errno_text_is_no_lost_peer(tmp_path):
    for cap in ("**Broken pipe error**:", "**Connection reset by peer**", "*Broken pipe*:"):
        assert prose.caption_heading(cap), cap
        f = _found(tmp_path, "Found in .err:\n" + cap + "\n```\n" + _CUT)
        assert f and f[0].id == "LOG028" and not any(x.id == "LOG022" for x in f), (cap, _ids(f))


def test_an_emphasis_span_that_quotes_a_message_or_a_bare_line_still_fails(tmp_path):
    for line in ("**BrokenPipeError: [Errno 32] Broken pipe**", "BrokenPipeError: [Errno 32] Broken pipe"):
        assert not prose.caption_heading(line), line
        f = _found(tmp_path, _STEPS + line + "\n")
        assert f and (f[0].severity == "error" or f[0].title.startswith("unexplained failure")), (line, _ids(f))
        assert "line 31" in f[0].title + f[0].detail, (line, _ids(f))
    assert not prose.caption_heading("*** Check failure stack trace: ***")   # glog's banner is no span
