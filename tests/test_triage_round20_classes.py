"""Round 20 (issue 24, triage20): classes the round-19 batches left.

- A Markdown heading (an issue's title) that quotes no message is no process's output: "# Broken pipe when training with
  ..." named the job's failure (b182_21); the body decides.
- bash's "Killed" with its newline lost: glued to the next prompt ("Killedroot@host:~#") or over a "\\r" progress line
  ("Killedg in train batch: 127687 / 263115", b182_17) is still the shell's SIGKILL report.
- The shell's words under another locale for SIGSEGV, SIGABRT and SIGBUS, its "line %d: " and "(core dumped)" (glibc's
  and bash's .po catalogues, ddpdoctor/data/strsignal.json, tools/mine_strsignal.py).
- The reader's prefilter scope: a runtime status logged as absl/TensorFlow print it ("Internal: Invalid system
  configuration ...", data/status_codes.json) and a C++ exception's message on libstdc++'s "  what():  " line under
  "terminate called after throwing" are read past a large log's head, as they were in a small one.
"""
import json
import pathlib

from ddpdoctor.facts import messages
from triage_loud import brief as _ids, loud_findings as _found

_DATA = pathlib.Path(__file__).resolve().parent.parent / "ddpdoctor" / "data"
_STEPS = "".join(f"epoch 1 step {i} loss 0.{i % 89:02d} lr 1e-4\n" for i in range(1, 31))
# ~230 KiB of progress: far past the reader's head (64 KiB), so only prefilter keywords and windows are read there
_PAD = "".join(f"epoch 2 step {i} loss 0.{i % 89:02d} lr 1e-4 grad_norm 1.{i % 7}\n" for i in range(5000))
_TAIL = "".join(f"epoch 3 step {i} loss 0.{i % 89:02d}\n" for i in range(80))


# --- a title is not program output ------------------------------------------------------------------------------------
def test_a_title_naming_an_errno_text_gives_way_to_the_bodys_failure(tmp_path):
    text = ("# [Errno 111] Connection refused when training on 2 nodes\n\n" + _STEPS
            + "Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n    x = model(batch)\n"
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
            "79.15 GiB of which 1.10 GiB is free.\n")
    f = _found(tmp_path, text)
    assert f and f[0].id == "LOG005", _ids(f)
    assert not any(x.id in ("LOG008", "LOG022") for x in f), _ids(f)


def test_a_title_naming_an_errno_text_over_a_body_with_no_failure_is_not_that_failure(tmp_path):
    f = _found(tmp_path, "# Broken pipe when training with option --gpu_ids -1\n\n" + _STEPS)
    assert f and f[0].id == "LOG029" and not any(x.severity == "error" for x in f), _ids(f)


def test_a_title_quoting_a_message_and_the_same_line_in_the_body_still_fail(tmp_path):
    """The quiet side: a heading that quotes a message ('Error: text') over a body of prose only is kept as before (over
    a body that holds program output it gives way to the body: round 20 wave 2, test_triage_round20b_classes); a body
    line is program output."""
    f = _found(tmp_path, "# BrokenPipeError: [Errno 32] Broken pipe\n\nIt happens after a few epochs on two nodes.\n")
    assert f and f[0].id != "LOG029" and "line 1" in f[0].title, _ids(f)
    f = _found(tmp_path, "how to fix this?\n" + _STEPS + "BrokenPipeError: [Errno 32] Broken pipe\n")
    assert f and f[0].id != "LOG029" and "line 32" in f[0].title + f[0].detail, _ids(f)


# --- bash's "Killed" glued to what followed ---------------------------------------------------------------------------
def test_killed_glued_to_a_prompt_or_an_overwritten_progress_line_is_sigkill(tmp_path):
    for glued in ("Killedroot@gpu-node:~/work# ", "Killed(base) alice@host:~/proj$ python train.py", "Killed$ ls",
                  "Killedg in train batch: 127687 / 263115", "Killedrain:  43%|████▎     | 430/1000 [01:02<01:23]"):
        f = _found(tmp_path, _STEPS + glued + "\n")
        assert f and f[0].id == "LOG002", (glued, _ids(f))


def test_words_that_only_start_with_killed_are_no_kill(tmp_path):
    for line in ("KilledProcessCount: 3", "Killed_workers=2", "Killedness of the approach: see 3/4 of the paper",
                 "Mortality rate 3/4"):
        f = _found(tmp_path, _STEPS + line + "\n")
        assert not any(x.id == "LOG002" for x in f), (line, _ids(f))


# --- the shell's words under another locale ---------------------------------------------------------------------------
def _strsignal():
    return json.loads((_DATA / "strsignal.json").read_text(encoding="utf-8"))


def test_the_catalogue_records_its_sources_and_the_four_signals():
    doc = _strsignal()
    for table in (doc, doc["bash"]):
        src = table["source"]
        assert src["repo"] and src["path"] and src["commit"] and src["read_from"]
    for sig in ("SIGKILL", "SIGSEGV", "SIGABRT", "SIGBUS"):
        # (glibc's ja catalogue leaves "Segmentation fault" in English; bash's translates it)
        assert {"de", "fr", "es", "ru", "zh_CN", "ja"} <= set(doc[sig]) | set(doc["bash"][sig]), sig
    assert {"de", "fr", "es", "ru", "zh_CN", "ja"} <= set(doc["bash"]["line"])


def test_a_script_reporting_a_segfault_abort_or_bus_error_in_another_language_is_that_signal(tmp_path):
    doc = _strsignal()
    expect = {"SIGSEGV": "LOG003"}
    for lang in ("de", "fr", "es", "ru", "zh_CN", "ja"):
        line_fmt = doc["bash"]["line"][lang].strip()
        for sig in ("SIGSEGV", "SIGABRT", "SIGBUS"):
            word = doc[sig].get(lang) or doc["bash"][sig][lang]
            text = _STEPS + f"./train.sh: {line_fmt.replace('%d', '3')} 4242 {word}    python train.py\n"
            f = _found(tmp_path, text)
            assert f and f[0].severity == "error", (lang, sig, _ids(f))
            if sig in expect:
                assert f[0].id == expect[sig], (lang, sig, _ids(f))
            assert sig in " ".join(x.title + x.detail for x in f), (lang, sig, _ids(f))
    f = _found(tmp_path, _STEPS + doc["SIGSEGV"]["zh_CN"] + " (核心已转储)\n")
    assert f and f[0].id == "LOG003", _ids(f)


def test_a_translated_word_inside_a_sentence_is_no_signal(tmp_path):
    doc = _strsignal()
    for lang in ("de", "zh_CN", "fr"):
        word = doc["SIGSEGV"][lang]
        f = _found(tmp_path, _STEPS + f"Wie behebe ich {word} beim Laden? / {word} when loading, how to fix\n")
        assert not any(x.severity == "error" for x in f), (lang, _ids(f))


# --- the prefilter's scope: every catalogue line read past the head ---------------------------------------------------
def test_status_code_forms_are_all_prefilter_keywords():
    doc = json.loads((_DATA / "status_codes.json").read_text())
    assert all(s["repo"] and s["path"] and s["commit"] for s in doc["sources"])
    for c in doc["codes"]:
        for form in (c["absl"], c["tensorflow"]):
            assert form.encode() in messages.ANCHORS, form


def test_a_runtime_status_logged_past_the_head_is_read(tmp_path):
    line = "Internal: Invalid system configuration: 2x2 host topology with 0 missing hosts, but 1 hosts in total.\n"
    for text in (line, _PAD + line + _TAIL, _PAD + line.replace("Internal: ", "INTERNAL: ") + _TAIL):
        f = _found(tmp_path, text)
        assert f and f[0].id == "LOG023", _ids(f)


def test_a_cpp_exception_message_under_terminate_past_the_head_is_read(tmp_path):
    block = ("terminate called after throwing an instance of 'c10::Error'\n"
             "  what():  Tensors must be CUDA and dense\n")
    for text in (block, _PAD + block + _TAIL):
        f = _found(tmp_path, text)
        assert f and f[0].id == "LOG027" and "CUDA and dense" in f[0].title, _ids(f)


def test_status_words_in_progress_lines_past_the_head_raise_nothing(tmp_path):
    """The quiet side: lines now handed on for their status words, with no failure in them, change no verdict."""
    quiet = "".join(f"epoch 2 step {i} Not found: 0 samples skipped, Unavailable: none\n" for i in range(3))
    f = _found(tmp_path, _PAD + quiet + _TAIL)
    assert not any(x.severity == "error" for x in f), _ids(f)


def test_a_title_quoting_a_launcher_line_without_an_errno_text_is_still_read(tmp_path):
    """The quiet side of the title class: a heading that quotes a log line (no errno text) is kept as before."""
    f = _found(tmp_path, "# ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 4 "
               "(pid: 18320) of binary: /usr/bin/python\n\nI train on one node.\n")
    assert f and f[0].severity == "error" and f[0].id == "LOG002", _ids(f)


# --- a launcher's local rank is a global rank only where the log shows it --------------------------------------------
_TB = ("Traceback (most recent call last):\n  File \"main.py\", line 89, in main\n    amp.initialize(model)\n"
       "AttributeError: 'NoneType' object has no attribute 'initialize'\n")
_FAILED = ("ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 1 (pid: 93793) of "
           "binary: /usr/bin/python\n")


def test_a_one_node_launchs_local_rank_is_its_rank(tmp_path):
    for launch in ("python -m torch.distributed.launch --nproc_per_node 2 --master_port 12345 main.py\n",
                   "torchrun --standalone --nnodes=1 --nproc-per-node=2 main.py\n"):
        f = _found(tmp_path, launch + _TB + _FAILED)
        assert f and f[0].id == "LOG004" and "rank:1" in f[0].subjects, (launch, _ids(f), f and f[0].subjects)
        assert "local rank 1" in f[0].title and "one-node launch" in f[0].detail, _ids(f)


def test_a_local_rank_without_the_node_count_is_named_as_local_only(tmp_path):
    """The quiet side: no launch line (or a multi-node one): the local rank is named, no global rank is claimed."""
    for launch in ("", "torchrun --nnodes=2 --node_rank=1 --nproc-per-node=2 --rdzv-endpoint=n0:29400 main.py\n"):
        f = _found(tmp_path, launch + _TB + _FAILED)
        assert f and f[0].id == "LOG004" and "local rank 1" in f[0].title, (launch, _ids(f))
        assert not any(s.startswith("rank:") for s in f[0].subjects), (launch, f[0].subjects)
        assert "not in these logs" in f[0].detail, f[0].detail


# --- a lost connection that is not NCCL's is not called NCCL's; the TCPStore client's older spellings ----------------
_BARRIER = ('Traceback (most recent call last):\n  File "train.py", line 10, in <module>\n    dist.barrier()\n'
            '  File "/usr/lib/python3/site-packages/torch/distributed/distributed_c10d.py", line 3145, in barrier\n'
            '    work = default_pg.barrier(opts=opts)\n')


def test_a_reset_connection_with_no_nccl_line_says_the_sockets_error_not_nccls(tmp_path):
    f = _found(tmp_path, _BARRIER + "RuntimeError: Connection reset by peer\n")
    assert f and f[0].id == "LOG022" and "Connection reset by peer" in f[0].title, _ids(f)
    assert "NCCL" not in f[0].title, _ids(f)


def test_an_nccl_remote_error_is_still_called_so(tmp_path):
    f = _found(tmp_path, _BARRIER + "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:"
               "1269, remote process exited or there was a network error, NCCL version 2.14.3\n")
    assert f and f[0].id == "LOG022" and "NCCL" in f[0].title, _ids(f)


def test_the_store_clients_older_spellings_are_the_store_lost(tmp_path):
    """torch <= 2.3 threw ECONNRESET where the client's read got 0 bytes (torch/csrc/distributed/c10d/Utils.hpp
    recvBytes @059ed765: std::system_error(ECONNRESET) -> "Connection reset by peer"), and TCPStore.cpp's wrapper
    names the store: the store's host lost, with its address."""
    f = _found(tmp_path, "[W socket.cpp:601] [c10d] recvValue failed on SocketImpl(fd=64, addr=[node2]:35986, "
               "remote=[node1]:29500): Connection reset by peer\nTraceback (most recent call last):\n"
               '  File "train.py", line 10, in <module>\n    store.get("x")\n'
               "torch.distributed.DistNetworkError: Connection reset by peer\n")
    assert f and f[0].id == "LOG008" and "node1:29500" in f[0].title, _ids(f)
