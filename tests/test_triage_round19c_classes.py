"""Round-19 wave-3 classes of issue 24 (triage, 2026-12-07), found AFTER the first read of 178-180 (read at c4cf8553;
the figure stays that first read), each with a trigger and a quiet twin. Pure in-process.

- A traceback's header relayed through another program's INFO logger whose time opens the line unbracketed
  (logging's asctime layout, "2023-05-08 10:33:13.000 [INFO] [Driver] Traceback (most recent call last):") is the
  relayed header, a failure when nothing follows it; the same relayed header with training progress after it is a
  traceback the job survived (words), no failure.
- A pull request whose author's own notebook run failed, shown as IPython's traceback (frame headers "File
  ~/x/trainer.py:2237, in Trainer.train(...)", "Cell In[9], line 1"), is a failure, not a quote; the same PR quoting
  the message alone stays a quote.
"""
from __future__ import annotations

from triage_factory import failed as _failed, found as _found


_RELAYED = ("2023-05-08 10:33:13.000 [INFO] [Driver] Traceback (most recent call last):\n"
            "2023-05-08 10:33:13.000 [INFO] [Driver] File \"\"/home/u/src/train_mem.py\"\", line 13, in <module>\"\n"
            "2023-05-08 10:33:13.000 [INFO] [Driver] train()\n"
            "2023-05-08 10:33:13.000 [INFO] [Driver] File \"\"/home/u/src/train.py\"\", line 245, in train\"\n"
            "2023-05-08 10:33:13.000 [INFO] [Driver] trainer.train()\n")


def test_a_relayed_traceback_after_an_unbracketed_time_is_a_failure(tmp_path):
    found = _failed(_found(tmp_path, _RELAYED))
    assert found and found[0].id in ("LOG028", "LOG004"), [(f.id, f.title) for f in _found(tmp_path, _RELAYED)]


def test_a_relayed_traceback_with_progress_after_it_is_none(tmp_path):
    progress = "".join(f"{{'loss': 1.{i:02d}, 'learning_rate': 2e-05, 'epoch': 0.{i:02d}}}\n" for i in range(1, 9))
    text = _RELAYED + "2023-05-08 10:33:14.000 [INFO] [Driver] retrying the step\n" + progress
    assert not _failed(_found(tmp_path, text)), [(f.id, f.title) for f in _found(tmp_path, text)]


# - A pull request whose author's own notebook run failed shows IPython's traceback: its frame headers ("File
#   ~/x/trainer.py:2237, in Trainer.train(...)", "Cell In[9], line 1"; IPython/core/ultratb.py VerboseTB.format_record)
#   are a traceback a process printed, as Python's own 'File "x.py", line 3, in f' frames are: a failure, not a quote.
#   The same PR quoting only the message, with no frame, stays a quote.
_PR_HEAD = ("# Fix different devices error when using multiple GPUs with FSDP\n\nuser · description · 2025-08-01\n"
            "The trackback is:\n```\n")
_IPY_TB = ("---------------------------------------------------------------------------\n"
           "ValueError                                Traceback (most recent call last)\n"
           "Cell In[9], line 1\n----> 1 trainer_stats = trainer.train()\n\n"
           "File ~/cache/UnslothSFTTrainer.py:55, in prepare_for_training_mode.<locals>.wrapper(self, *args, **kwargs)\n"
           "     53 if hasattr(self, 'model'):\n---> 55 output = f(self, *args, **kwargs)\n\n"
           "File ~/miniconda3/lib/python3.10/site-packages/transformers/trainer.py:2237, in Trainer.train(self, trial)\n"
           "```\n")


def test_a_pull_request_showing_an_ipython_traceback_is_a_failure(tmp_path):
    found = _failed(_found(tmp_path, _PR_HEAD + _IPY_TB))
    assert found and found[0].id in ("LOG028", "LOG004", "LOG027"), [(f.id, f.title) for f in _found(tmp_path, _PR_HEAD + _IPY_TB)]


def test_a_pull_request_quoting_the_message_alone_is_a_quote(tmp_path):
    text = _PR_HEAD + "ValueError: Expected all tensors to be on the same device, but found cuda:0 and cuda:1\n```\n"
    assert not _failed(_found(tmp_path, text)), [(f.id, f.title) for f in _found(tmp_path, text)]
