"""Round 25 (issue 24, the lead's triage35 after batches 224-226): two classes from first reads, each with a trigger and a
quiet fixture.

- Markdown around a pasted traceback (triagecol31 b226_13): GitHub-flavored Markdown's emphasis and code spans put
  `**` around an exception line and single backticks around the paste; the exception is the program's, the marks the
  page's. A bold heading of an issue template ("**Error with full stack trace**") and the HF Trainer's own
  "***** eval metrics *****" stay as they were.
- mp.spawn's "-- Process N terminated with the following error:" cut by the paste anywhere after "terminated"
  (b226_11: "-- Process 0 terminated with the"): process N failed (torch/multiprocessing/spawn.py).
"""
from triage_loud import brief as _ids, loud_findings as _found

_FRAMES = ('  File "/env/lib/python3.9/site-packages/torch/multiprocessing/spawn.py", line 76, in _wrap\n'
           "    fn(i, *args)\n"
           '  File "/home/u/train.py", line 595, in process\n'
           "    var = build(args)\n"
           '  File "/home/u/models/__init__.py", line 37, in build\n'
           "    return MaskVAR(\n")


def test_an_exception_line_in_bold_inside_backticks_is_the_programs_failure(tmp_path):
    text = ("When I run train.py, some errors:\n\n`Traceback (most recent call last):\n" + _FRAMES
            + "**NameError: name 'MaskVAR' is not defined**\n"
            "torch.multiprocessing.spawn.ProcessRaisedException: `\n\nIt cannot be found, either.\n")
    f = _found(tmp_path, text)
    assert f and f[0].id == "LOG004" and "NameError" in f[0].title and "MaskVAR" in f[0].title, _ids(f)


def test_a_bold_heading_and_the_trainers_metrics_banner_are_not_read_as_failures(tmp_path):
    text = ("**Describe the bug**\nThe loss is fine.\n\n**Error with full stack trace**\n\n"
            "***** eval metrics *****\n  epoch = 3.0\n  eval_loss = 0.41\n")
    assert not any("Error with full stack trace" in x.title for x in _found(tmp_path, text))
    quiet = "***** train metrics *****\n  epoch = 3.0\n  train_loss = 0.52\n  train_runtime = 0:01:02\n"
    assert _found(tmp_path, quiet) == [], _ids(_found(tmp_path, quiet))


def test_mp_spawn_s_raised_line_cut_anywhere_after_terminated_names_the_process(tmp_path):
    head = ("Traceback (most recent call last):\n"
            '  File "/env/lib/python3.6/site-packages/torch/multiprocessing/spawn.py", line 118, in join\n'
            "    raise Exception(msg)\nException: \n\n")
    for cut in ("-- Process 0 terminated with the", "-- Process 0 terminated with", "-- Process 0 terminated"):
        f = _found(tmp_path, head + cut + "\n")
        assert f and f[0].id == "LOG004" and f[0].title.startswith("rank 0 exited with code 1"), (cut, _ids(f))
    f = _found(tmp_path, head + "-- Process 0 terminated with thx\n")
    assert not f or not f[0].title.startswith("rank 0 exited"), _ids(f)
