"""Round 20 wave 2 (issue 24, triage21): classes round 20's batches left.

- A caption with no colon ("Error message", "Error log", "Stack trace") alone on its line over a fenced block is the
  writer's label of the quote below it, not a failure line; the same words printed bare with no fence after them are
  judged as before.
- A terminal that wraps a long line at its width cuts words too (XLA's "... failed: un" / "handled cuda error"): the
  two lines are joined with no space where the word across the cut is one of the catalogue's (messages.words()), in a
  small log and past a large log's head alike; a cut whose word the catalogue does not know is left as two lines.
- A thread's title (its first Markdown heading) that quotes a message ("# ... error:TypeError: ...", "# ... KeyError:
  'x'", argparse's "error: unrecognized arguments") over a body that holds the program's own output (set-up lines, log
  records, progress, traceback frames): the body says what failed, and the title is no failure line of the job. Over a
  body of prose only, the title is read as before.
- Weights & Biases' end of a run (wandb/sdk/wandb_run.py: Run._on_finish's "Program ended successfully." / "Program
  failed with code N.", the footer's "Run history:" / "Run summary:" grids) is an end: a healthy log that ends with it is
  called healthy; its footer's rows ("wandb:   train/loss 0.123") are no training step, so a failure before them, or
  wandb's own "(failed N)" / "Program failed with code N", is still the job's failure.
"""
from ddpdoctor.facts import messages
from ddpdoctor.triage.api import _word_cut, triage_paths
from triage_loud import brief as _ids, loud_findings as _found

_SETUP = ("distributed_backend=nccl\nAll distributed processes registered. Starting with 2 processes\n"
          "{'data': {'batch_size': 1,\n          'lr': 0.1}}\n")
_TB = ("Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n    x = model(batch)\n"
       "KeyError: 'labels'\n")


# --- a caption with no colon over a fenced block ----------------------------------------------------------------------
def test_a_colonless_caption_over_a_fence_is_no_failure_line(tmp_path):
    for label in ("Error message", "Error log", "**Error messages**", "Full error", "Stack trace", "Error Traceback",
                  "Error"):
        for gap in ("\n", "\n\n"):
            f = _found(tmp_path, "# pretraining demo not working\n\nI run this\n\n" + label + gap + "```\n" + _SETUP
                       + "```\n")
            assert f and f[0].id == "LOG029", (label, _ids(f))
            assert not any(x.id == "LOG028" for x in f), (label, _ids(f))


def test_a_label_that_ends_with_a_full_width_colon_is_a_label(tmp_path):
    """A bilingual issue template's label ends with U+FF1A, the colon CJK text uses ("- 完整报错/Complete Error Message：")."""
    for label in ("- 完整报错/Complete Error Message：", "报错信息/Error log：", "Error log:"):
        f = _found(tmp_path, "I run this\n" + label + "\n" + _SETUP)
        assert f and f[0].id == "LOG029", (label, _ids(f))
    # a message after the colon is a message
    f = _found(tmp_path, "I run this\n- 完整报错/Complete Error Message：KeyError: 'valid_ratio'\n" + _SETUP)
    assert f and f[0].id != "LOG029", _ids(f)


def test_the_quote_under_a_caption_still_fails(tmp_path):
    f = _found(tmp_path, "Error message\n```\n" + _SETUP + _TB + "```\n")
    assert f and f[0].id == "LOG004" and "line 10" in f[0].detail, _ids(f)


def test_the_same_words_printed_bare_with_no_fence_after_still_fail(tmp_path):
    for label in ("Fatal error", "Error"):
        f = _found(tmp_path, _SETUP + label + "\n" + "worker exiting\n")
        assert f and f[0].id == "LOG028" and "line 5" in f[0].title, (label, _ids(f))


# --- a word cut by the terminal's width -------------------------------------------------------------------------------
_W = 122
_XLA = ("2022-10-23 01:07:26.771566: E external/org_tensorflow/tensorflow/compiler/xla/pjrt/pjrt_stream_executor_client.cc"
        ":2153] Execution of replica 1 failed: INTERNAL: external/org_tensorflow/tensorflow/compiler/xla/service/gpu/nccl_"
        "all_reduce_thunk.cc:70: NCCL operation ncclAllReduce(send_buffer, recv_buffer, element_count, dtype, reduce_op, "
        "comm, gpu_stream) failed: unhandled cuda error")
_STEPS = "".join(f"epoch 1 step {i} loss 0.{i % 89:02d} lr 1e-4\n" for i in range(1, 31))
_PAD = "".join(f"epoch 2 step {i} loss 0.{i % 89:02d} lr 1e-4 grad_norm 1.{i % 7}\n" for i in range(5000))


def _wrapped(text, width=_W):
    return "".join(text[i:i + width].ljust(width) .rstrip() + "\n" if i + width >= len(text) else text[i:i + width] + "\n"
                   for i in range(0, len(text), width))


def test_the_wrap_cuts_a_word_of_the_catalogue():
    assert "unhandled" in messages.words() and "un" not in messages.words()
    body = _wrapped(_XLA)
    assert "failed: un\nhandled cuda error" in body   # the fixture cuts the word where the paste did


def test_a_status_wrapped_inside_a_word_is_read_joined(tmp_path):
    for pad in ("", _PAD):
        f = _found(tmp_path, _STEPS + pad + _wrapped(_XLA) + "Traceback (most recent call last):\n"
                   "  File \"t5x/train.py\", line 757, in <module>\n    gin_utils.run(main)\n")
        assert f and f[0].id == "LOG009", (len(pad), _ids(f))


def test_a_cut_whose_word_the_catalogue_does_not_know_stays_two_lines(tmp_path):
    line = "epoch 1 step 31 loss 0.31 lr 1e-4 and the scheduler moves to the phase named warm"
    assert len(line) >= 64
    assert _word_cut(line.encode(), b"Traceback (most recent call last):") is None
    f = _found(tmp_path, _STEPS + line + "\n" + _TB)
    assert f and f[0].id == "LOG004" and "line 35" in f[0].detail, _ids(f)
    # a next line that opens with no letter (a number, a bracket, a space) continues no word
    assert _word_cut(b"x" * 60 + b" un", b" handled cuda error") is None
    assert _word_cut(b"x" * 60 + b" un", b"handled cuda error") is not None


# --- a title over a body that holds the program's output --------------------------------------------------------------
_TITLES = ("# Wav2vec2_s2s model fine_tuning error:TypeError: forward() missing 1 required positional argument: 'x'",
           "# 训练时 SimpleDataSet 重复报错 KeyError: 'valid_ratio'",
           "# train.py: error: unrecognized arguments: --local-rank=0",
           "## RuntimeError: CUDA error: an illegal memory access was encountered")
_BODIES = {
    "setup": ("2021-01-27 00:45:20 | INFO | fairseq.distributed_utils | distributed init (rank 1): tcp://localhost:15491\n"
              "2021-01-27 00:45:20 | INFO | fairseq.distributed_utils | distributed init (rank 0): tcp://localhost:15491\n"),
    "records": "".join(f"[2024/05/22 14:06:59] ppocr INFO:     Backbone : {i}\n" for i in range(6)),
    "progress": _STEPS,
    "rich": ("│ /home/u/MiniGPT-4/demo.py:60 in <module>                                    │\n"
             "│ ❱  60 model = model_cls.from_config(model_config).to('cuda:0')                │\n"),
}


def test_a_title_quoting_a_message_gives_way_to_the_bodys_output(tmp_path):
    for title in _TITLES:
        for name, body in _BODIES.items():
            f = _found(tmp_path, "org/repo · issue #1 · open\n" + title + "\n\nI ran it and got\n```\n" + body + "```\n")
            # (a rich traceback's frames cut before its exception are a failure of the body's own: LOG028 at them)
            assert f and f[0].id == ("LOG028" if name == "rich" else "LOG029"), (title, name, _ids(f))
            assert not any(x.severity == "error" or "line 2)" in x.title for x in f), (title, name, _ids(f))


def test_the_bodys_own_failure_outranks_the_titles(tmp_path):
    for title in _TITLES:
        f = _found(tmp_path, title + "\n\n" + _BODIES["setup"] + _TB)
        assert f and f[0].id == "LOG004" and "KeyError" in f[0].title, (title, _ids(f))


def test_no_event_of_a_title_over_output_reaches_the_rules(tmp_path):
    """Events a rule reads without a failure class (NCCL's transport words "NET/IB") wait with the title too: the
    body's own NCCL warning and error trace are the evidence, not the title's words."""
    body = ("host2:14508:15205 [0] transport/net_ib.cc:651 NCCL WARN NET/IB : collective mismatch error local size "
            "348160 remote 32768\n"
            "host2:14508:15205 [0] NCCL INFO include/net.h:31 -> 3\n"
            "host2:14508:15205 [0] NCCL INFO transport/net.cc:470 -> 3\n")
    f = triage_paths([str(_write(tmp_path, "# Run multi-worker with nccl error: NET/IB : collective mismatch error\n\n"
                                   + body))]).sorted_findings()
    loud = [x for x in f if x.severity in ("error", "warning")]
    assert loud and not any("line:1" in x.subjects for x in loud), _ids(loud)
    assert loud[0].id == "LOG009" and "line:3" in loud[0].subjects, _ids(loud)


def _write(tmp_path, text):
    p = tmp_path / "job.log"
    p.write_text(text, encoding="utf-8")
    return p


def test_a_title_over_prose_only_is_read_as_before(tmp_path):
    for title in _TITLES:
        f = _found(tmp_path, title + "\n\nIt happens on two nodes after a few minutes. Any idea?\n")
        assert f and f[0].id != "LOG029" and "line 1" in f[0].title + f[0].detail, (title, _ids(f))


# --- Weights & Biases' end of a run -----------------------------------------------------------------------------------
_FOOTER = ("wandb: Waiting for W&B process to finish... (success).\nwandb: \nwandb: Run history:\n"
           "wandb:   train/loss █▆▅▃▂▁\nwandb: \nwandb: Run summary:\nwandb:   train/loss 0.123\nwandb: \n"
           "wandb: 🚀 View run fancy-sun-3 at: https://wandb.ai/u/p/runs/abc\n")
_OLD_OK = "wandb: Waiting for W&B process to finish, PID 850\nwandb: Program ended successfully.\n"


def test_wandbs_end_of_a_run_is_an_end(tmp_path):
    for end in (_FOOTER, _OLD_OK, "wandb: Run summary:\nwandb:   train/loss 0.123\n"):
        for pad in ("", _PAD):
            f = _found(tmp_path, _STEPS + pad + end)
            assert not f, (end[:40], len(pad), _ids(f))


def test_a_failure_before_wandbs_footer_is_still_the_failure(tmp_path):
    oom = ("Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n    x = model(batch)\n"
           "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n")
    f = _found(tmp_path, _STEPS + oom + "wandb: Waiting for W&B process to finish... (failed 1). Press Control-C to abort "
               "syncing.\nwandb: Run summary:\nwandb:   train/loss 0.123\n")
    assert f and f[0].id == "LOG005" and f[0].severity == "error", _ids(f)
    for status in ("wandb: Waiting for W&B process to finish... (failed 1). Press Control-C to abort syncing.\n",
                   "wandb: Waiting for W&B process to finish, PID 850\nwandb: Program failed with code 1.  Press ctrl-c "
                   "to abort syncing.\n"):
        f = _found(tmp_path, _STEPS + status + "wandb: Run history:\nwandb:   train/loss █▆▅▃▂▁\nwandb: Run summary:\n"
                   "wandb:   train/loss 0.123\n")
        assert f and f[0].id == "LOG028" and "failed first" in f[0].title, (status[:60], _ids(f))


def test_the_catalogue_records_wandbs_sources():
    for eid in ("wandb.run.on_finish.program_ended_successfully", "wandb.run.on_finish.program_failed_with_code",
                "wandb.run.footer.run_summary"):
        e = messages.by_id(eid)
        assert e and e["source"]["repo"] == "wandb/wandb" and len(e["source"]["commit"]) == 40, eid
        assert not messages.entry_problems(e), (eid, messages.entry_problems(e))
