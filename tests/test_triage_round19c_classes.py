"""Round-19 wave-3 classes of issue 24 (triage, 2026-12-07), found AFTER the first read of 178-180 (read at c4cf8553;
the figure stays that first read), each with a trigger and a quiet twin. Pure in-process.

- A traceback's header relayed through another program's INFO logger whose time opens the line unbracketed
  (logging's asctime layout, "2023-05-08 10:33:13.000 [INFO] [Driver] Traceback (most recent call last):") is the
  relayed header, a failure when nothing follows it; the same relayed header with training progress after it is a
  traceback the job survived (words), no failure.
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
