"""Round 20 wave 2 (issue 24, triage21): classes round 20's batches left.

- A caption with no colon ("Error message", "Error log", "Stack trace") alone on its line over a fenced block is the
  writer's label of the quote below it, not a failure line; the same words printed bare with no fence after them are
  judged as before.
"""
import pathlib

from ddpdoctor.triage.api import triage_paths

_SETUP = ("distributed_backend=nccl\nAll distributed processes registered. Starting with 2 processes\n"
          "{'data': {'batch_size': 1,\n          'lr': 0.1}}\n")
_TB = ("Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n    x = model(batch)\n"
       "KeyError: 'labels'\n")


def _found(tmp_path, text, name="job.log"):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return [f for f in triage_paths([str(p)]).sorted_findings() if f.severity in ("error", "warning")]


def _ids(f):
    return [(x.id, x.severity, x.title) for x in f]


# --- a caption with no colon over a fenced block ----------------------------------------------------------------------
def test_a_colonless_caption_over_a_fence_is_no_failure_line(tmp_path):
    for label in ("Error message", "Error log", "**Error messages**", "Full error", "Stack trace", "Error Traceback",
                  "Error"):
        for gap in ("\n", "\n\n"):
            f = _found(tmp_path, "# pretraining demo not working\n\nI run this\n\n" + label + gap + "```\n" + _SETUP
                       + "```\n")
            assert f and f[0].id == "LOG029", (label, _ids(f))
            assert not any(x.id == "LOG028" for x in f), (label, _ids(f))


def test_the_quote_under_a_caption_still_fails(tmp_path):
    f = _found(tmp_path, "Error message\n```\n" + _SETUP + _TB + "```\n")
    assert f and f[0].id == "LOG004" and "line 10" in f[0].detail, _ids(f)


def test_the_same_words_printed_bare_with_no_fence_after_still_fail(tmp_path):
    for label in ("Fatal error", "Error"):
        f = _found(tmp_path, _SETUP + label + "\n" + "worker exiting\n")
        assert f and f[0].id == "LOG028" and "line 5" in f[0].title, (label, _ids(f))
