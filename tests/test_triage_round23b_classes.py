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


# --- the miner follows a message built in a local variable ------------------------------------------------------------
def test_the_miner_follows_a_message_built_in_a_local_before_its_raise():
    """`msg = f"..."; msg += "..."; raise X(msg)` (DeepSpeed engine.py _configure_optimizer's shape): the message is
    the assignments' text, at the assignment's line; each branch's assignment is its own message."""
    import ast

    from tools.mine_messages import _python_tree_messages

    src = ("def f(opt, ok):\n"
           "    msg = f'You are using ZeRO-Offload with a client provided optimizer ({type(opt)})'\n"
           "    msg += ' which in most cases will yield poor performance.'\n"
           "    if not ok:\n"
           "        raise ZeRORuntimeException(msg)\n"
           "def g(x):\n"
           "    if x:\n"
           "        why = 'the world size does not divide the batch'\n"
           "    else:\n"
           "        why = 'the checkpoint tag differs across ranks'\n"
           "    logger.error(why)\n")
    got = {(c.line, c.how, c.text) for c in _python_tree_messages(ast.parse(src), "o/r", "m.py")}
    assert (2, "raise:ZeRORuntimeException", "You are using ZeRO-Offload with a client provided optimizer ({type}) which "
            "in most cases will yield poor performance.") in got, got
    assert {(8, "log:error", "the world size does not divide the batch"),
            (10, "log:error", "the checkpoint tag differs across ranks")} <= got, got


def test_the_miner_takes_no_message_from_a_local_that_holds_none():
    """The quiet side: a local that holds an exception or a value (`raise RuntimeError(e)`, `raise X(err)` with err
    from a call), or one assigned only after the raise, or in another function, gives no message."""
    import ast

    from tools.mine_messages import _python_tree_messages

    src = ("def f():\n"
           "    try:\n        run()\n    except Exception as e:\n        raise RuntimeError(e)\n"
           "    err = compute()\n    raise ValueError(err)\n"
           "def g():\n    raise KeyError(late)\n    late = 'assigned after the raise'\n"
           "def h():\n    text = 'only in h, never raised there'\n"
           "def k():\n    raise OSError(text)\n")
    assert list(_python_tree_messages(ast.parse(src), "o/r", "m.py")) == []


# --- Ray's autoscaler refusing a request no node type can hold --------------------------------------------------------
_RAY_HEAD = ("2024-05-30 16:31:59,841 INFO worker.py:1564 -- Connecting to existing Ray cluster at address: 10.0.0.1:6379\n"
             "(autoscaler +2s) Tip: use `ray status` to view detailed cluster status. To disable these messages, set "
             "RAY_SCHEDULER_EVENTS=0.\n")


def test_an_infeasible_resource_request_is_a_launch_that_asks_too_much(tmp_path):
    """ray autoscaler.py @8f70aec (StandardAutoscaler, the infeasible bundles): the request waits forever."""
    line = ("(autoscaler +2s) Error: No available node types can fulfill resource request {'GPU': 8.0, 'CPU': 8.0}. "
            "Add suitable node types to this cluster to resolve this issue.\n")
    f = _found(tmp_path, _RAY_HEAD + line + line.replace("+2s", "+33s"))
    assert f and f[0].id == "LOG023" and "line 3" in f[0].detail + f[0].title, _ids(f)


def test_a_request_pending_behind_actors_that_then_runs_is_no_failure(tmp_path):
    """The quiet side: the same autoscaler's "Warning: The following resource request cannot be scheduled right now"
    (cluster full of actors, autoscaler.py @8f70aec) is a wait the job may survive; the steps after it say it did."""
    f = _found(tmp_path, _RAY_HEAD + "(autoscaler +2s) Warning: The following resource request cannot be scheduled "
               "right now: {'CPU': 1.0}. This is likely due to all cluster resources being claimed by actors. Consider "
               "creating fewer actors or adding more nodes to this Ray cluster.\n" + _STEPS)
    assert not any(x.severity == "error" or x.id == "LOG023" for x in f), _ids(f)


# --- glog's level in the Hyperscan expression -------------------------------------------------------------------------
def _glog_db():
    import pytest

    hyperscan = pytest.importorskip("hyperscan")
    from ddpdoctor.facts.messages import ANCHORS
    from ddpdoctor.triage import reader

    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(expressions=reader._hs_expressions(ANCHORS), ids=list(range(len(ANCHORS))),
               flags=[0] * len(ANCHORS))
    assert reader._hs_probe(hyperscan, db, ANCHORS)
    return db, {i for i, a in enumerate(ANCHORS) if a in reader.GLOG_HEAD}


def _glog_hits(db, ids, text: bytes):
    got = []
    db.scan(text, match_event_handler=lambda i, _f, to, _fl, _c: got.append(to) if i in ids else None)
    return [text[:to].rsplit(b"\n", 1)[-1] for to in got]


def test_a_glog_head_on_an_error_or_warning_line_is_a_match_in_hyperscan_itself():
    db, ids = _glog_db()
    text = (b"E1207 10:43:16.922251 3493939 rpc_server.cc:134] Connection failed\n"
            b"[W1207 10:43:16.922251 3493939 socket.py:12] retrying\n"
            b"F20220801 07:29:34.701110 2256 fs_coordinator.cc:42] Check failed: ok\n")
    assert len(_glog_hits(db, ids, text)) == 3


def test_a_glog_head_on_an_info_line_or_a_python_warning_is_no_match():
    """The quiet side: glog's INFO head and a Python warning's 'x.py:295: ' never reach Python at all."""
    db, ids = _glog_db()
    text = (b"I1207 10:43:16.922251 3493939 rpc_server.cc:134] step 10 loss 0.1\n"
            b"/opt/x/trainer.py:295: FutureWarning: deprecated\n")
    assert _glog_hits(db, ids, text) == []


def test_a_level_letter_inside_a_longer_line_passes_hyperscan_and_is_dropped_by_the_python_check():
    """The expression has no '^' (a multi-line anchor with an unbounded prefix cost the 1 GiB benchmark 0.35 s of CPU):
    a level letter later in a line reaches Python, and `_glog_kept` drops it there, as it does for an older database."""
    from ddpdoctor.triage import reader

    db, ids = _glog_db()
    text = b"some text E1207 then rpc_server.cc:134] inside\n"
    assert len(_glog_hits(db, ids, text)) == 1
    end = text.index(b"]") + 1
    assert reader._glog_kept(text, [end], len(text), 0) == []
    head = b"E1207 10:43:16.922251 3493939 rpc_server.cc:134] Connection failed\n"
    assert reader._glog_kept(head, [head.index(b"]") + 1], len(head), 0) != []


# --- an IPython traceback cut among a frame's numbered context lines --------------------------------------------------
_IPY = ("File /envs/x/lib/python3.8/site-packages/pytorch_lightning/trainer/trainer.py:420, in Trainer.__init__(self)\n"
        "    417 # init connectors\n"
        "    418 self._data_connector = DataConnector(self, multiple_trainloader_mode)\n"
        "--> 420 self._accelerator_connector = AcceleratorConnector(\n"
        "    421     num_processes=num_processes,\n"
        "    422     devices=devices,\n"
        "    423     tpu_cores=tpu_cores,\n"
        "    424     ipus=ipus,\n"
        "    425     accelerator=accelerator,\n")


def test_a_log_that_ends_among_an_ipython_frames_context_lines_ends_inside_a_traceback(tmp_path):
    f = _found(tmp_path, "[turn 0, continued]\n" + _IPY)
    assert f and f[0].title.startswith("unexplained failure"), _ids(f)


def test_numbered_lines_with_no_ipython_arrow_above_them_are_no_traceback(tmp_path):
    """The quiet side: a table of right-aligned numbers (no arrow line above it) is no frame's context."""
    rows = "".join(f"    {400 + i} samples read from shard {i}\n" for i in range(8))
    f = _found(tmp_path, "Dataset summary:\n" + rows)
    assert not any(x.severity == "error" or x.title.startswith("unexplained failure") for x in f), _ids(f)


# --- an unranked exception quoted apart from the one rank's cut traceback ---------------------------------------------
_TAGGED = "".join(f'[1,{{r}}]<stderr>:  File "/opt/conda/lib/python3.8/site-packages/torchrec/m{i}.py", line {100 + i}, '
                  f'in f{i}\n[1,{{r}}]<stderr>:    return g{i}(x)\n' for i in range(3))
_QUOTED = "```\nRuntimeError: Storage size calculation overflowed with sizes=[8410156404468110876]\n```\n```\n"


def test_an_exception_quoted_apart_from_the_only_ranks_cut_traceback_is_that_ranks(tmp_path):
    f = _found(tmp_path, "I am hitting this error randomly during training:\n\n" + _QUOTED + _TAGGED.format(r=7) + "```\n")
    assert f and f[0].id == "LOG004" and "rank:7" in f[0].subjects, _ids(f)
    assert f[0].evidence.get("rank_from_cut_traceback") == 7, f[0].evidence


def test_two_ranks_in_the_log_leave_the_quoted_exception_unranked(tmp_path):
    """The quiet side: with another rank's output in the log, which traceback the quote ends is not shown."""
    other = "[1,3]<stdout>:epoch 1 step 10 loss 0.5\n"
    f = _found(tmp_path, "I am hitting this error randomly during training:\n\n" + _QUOTED + other
               + _TAGGED.format(r=7) + "```\n")
    assert f and f[0].id == "LOG004" and not any(s.startswith("rank:") for s in f[0].subjects), _ids(f)
    assert "rank_from_cut_traceback" not in f[0].evidence


# --- a catalogued raise's text inside a Python warning's own message --------------------------------------------------
_UNSLOTH_WARN = ("/envs/u/lib/python3.10/site-packages/unsloth/__init__.py:47: UserWarning: Unsloth: 'CUDA_VISIBLE_DEVICES' "
                 "is currently 0,1 \nUnsloth currently does not support multi GPU setups - but we are working on it!\n"
                 "Multiple CUDA devices detected but we require a single device.\n")


def test_a_raised_message_continuing_a_warnings_text_is_the_warning(tmp_path):
    """unsloth __init__.py warns the text its tokenizer_utils.py raises (messages.json unsloth.trainer.multi_gpu_refused,
    "raises": RuntimeError): inside the warning's message it is no raise (Lib/warnings.py _formatwarnmsg_impl)."""
    f = _found(tmp_path, "When I set CUDA_VISIBLE_DEVICES=0,1 it says:\n\n" + _UNSLOTH_WARN + "\n" + _STEPS)
    assert not any(x.severity == "error" or x.id == "LOG023" for x in f), _ids(f)


def test_the_same_text_raised_after_the_warning_or_a_kill_after_it_still_fail(tmp_path):
    """The quiet side: the raise itself (its exception line) still reads LOG023, and a line that says a process died
    right under a warning still fails."""
    raised = ('Traceback (most recent call last):\n  File "train.py", line 9, in <module>\n    trainer.train()\n'
              "RuntimeError: Unsloth currently does not support multi GPU setups - but we are working on it!\n")
    f = _found(tmp_path, _UNSLOTH_WARN + raised)
    assert f and f[0].id == "LOG023", _ids(f)
    f = _found(tmp_path, _STEPS + "/x/y.py:12: UserWarning: slow path\nKilled\n")
    assert f and f[0].id == "LOG002", _ids(f)
