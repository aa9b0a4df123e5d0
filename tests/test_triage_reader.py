"""The triage reader: one pass, bounded memory, the keyword fast path loses nothing, and messy text
(CRLF, ANSI colours, tqdm frames, truncated and interleaved lines, odd prefixes) parses the same."""
import gzip
import io
import os
import re
import subprocess
import sys
import tracemalloc

import pytest

from ddpdoctor.triage import reader
from ddpdoctor.triage.api import triage_paths
from ddpdoctor.triage.lines import parse, parse_all

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RULES = os.path.join(ROOT, "fixtures", "triage", "rules")
FILLER = b"[rank3]:{'loss': 2.1931, 'grad_norm': 1.8213, 'learning_rate': 4.8e-05, 'epoch': 0.11}\n"


def summary(report):
    return [(f.id, f.title) for f in report.sorted_findings()]


@pytest.mark.parametrize("name", sorted(f for f in os.listdir(RULES) if "_trigger_" in f))
def test_fast_path_finds_what_reading_every_line_finds(name, tmp_path, monkeypatch):
    """Past the head of the file only lines with an anchor keyword are parsed; the verdict must be
    the same as parsing every line. The head is cut to 4 KiB here (round 17): both runs parse the whole head line
    by line, and the 64 KiB one (~800 filler lines, twice) was most of this test's ~0.25 s x 150 fixtures; the
    path past the head is the same code at any size (test_run_findings_printed_late_in_a_long_log_are_read keeps
    the real HEAD_FULL)."""
    monkeypatch.setattr(reader, "HEAD_FULL", 4 << 10)
    with open(os.path.join(RULES, name), "rb") as fh:
        body = fh.read()
    p = tmp_path / "padded.log"
    p.write_bytes(FILLER * (reader.HEAD_FULL // len(FILLER) + 50) + body + FILLER * 20)
    fast = summary(triage_paths([str(p)]))
    real_scan = reader.scan
    monkeypatch.setattr(reader, "scan", lambda stream, on_line, **kw: real_scan(stream, on_line, everything=True))
    slow = summary(triage_paths([str(p)]))
    assert fast == slow and fast, name


def test_run_findings_printed_late_in_a_long_log_are_read(tmp_path):
    """`ddpdoctor run` prints its findings into the job's log at the stall, far past the head; a warning
    line ("warning RUN004 ...") carries no error keyword, so the headline above it opens the window."""
    body = ("ddpdoctor run: stall: no rank made progress for 60 s: 2 finding(s)\n"
            "  ! warning RUN004 stall-rank-still-starting: rank 1 is still starting while rank 0 waits at the rendezvous\n"
            "      Rank 1 has not reached init_process_group after 60 s.\n"
            "  ! warning RUN007 stall-unexplained: no rank made progress for 60 s; no cause is certain\n").encode()
    p = tmp_path / "job.log"
    p.write_bytes(FILLER * (reader.HEAD_FULL // len(FILLER) + 50) + body + FILLER * 20)
    got = {f.id for f in triage_paths([str(p)]).findings}
    assert {"RUN004", "RUN007"} <= got, got


def test_small_chunks_and_lines_split_across_chunks_give_the_same_lines():
    data = b"".join(b"[rank%d]:line %d with NCCL and Error %s\n" % (i % 8, i, b"x" * (i % 300)) for i in range(3000))
    got_small, got_big = [], []
    reader.scan(io.BytesIO(data), lambda n, off, raw: got_small.append((n, off, raw)), chunk=4096, head_full=0)
    reader.scan(io.BytesIO(data), lambda n, off, raw: got_big.append((n, off, raw)), head_full=0)
    assert got_small == got_big and len(got_big) == 3000
    n, off, raw = got_big[1234]
    assert n == 1235 and data[off:off + len(raw)] == raw


def test_line_numbers_count_lines_without_keywords():
    data = FILLER * 5000 + b"[rank1]:RuntimeError: boom\n" + FILLER
    got = []
    reader.scan(io.BytesIO(data), lambda n, off, raw: got.append((n, raw)), head_full=0)
    assert got == [(5001, b"[rank1]:RuntimeError: boom")]


class Endless(io.RawIOBase):
    """A stream of `total` bytes produced on the fly: a huge log that never exists in memory."""

    def __init__(self, total, tail=b""):
        self.left, self.tail = total, tail
        self.block = FILLER * 4096

    def readable(self):
        return True

    def readinto(self, b):
        if self.left <= 0:
            n = min(len(b), len(self.tail))
            b[:n], self.tail = self.tail[:n], self.tail[n:]
            return n
        n = min(len(b), len(self.block), self.left)
        b[:n] = self.block[:n]
        self.left -= n
        return n


def test_bounded_memory_on_a_large_stream():
    from ddpdoctor.triage.api import _read_log
    from ddpdoctor.triage.job import Job

    tail = (b"[rank5]:Traceback (most recent call last):\n"
            b"[rank5]:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n") * 500
    # 500 events, far above the examples a job keeps per kind (job.KEEP): every one counted, not kept. (5000 cost
    # ~12 s more CPU under tracemalloc, all in the tail's 10,000 lines, with the same peak; the 48 MiB filler is what
    # the bound is about.)
    job = Job()
    job.paths = ["<stream>"]
    tracemalloc.start()
    _read_log(Endless(48 << 20, tail), 0, job, {})  # 3x the bound below (96 MiB took 23 s under tracemalloc)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert job.bytes_read >= 48 << 20
    assert job.get("cuda_oom").count == 500
    assert peak < 16 << 20, f"peak {peak >> 20} MiB"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_two_gigabyte_sparse_log_streams_in_bounded_rss(tmp_path):
    """A 2 GiB log (sparse: a text head, then a hole of NUL bytes, then an error) is read to the end
    with a peak RSS far below its size."""
    p = tmp_path / "huge.log"
    with open(p, "wb") as fh:
        fh.write(FILLER * 1000)
        fh.seek(2 << 30)
        fh.write(b"\n[rank2]:RuntimeError: Expected to have finished reduction in the prior iteration before "
                 b"starting a new one.\n")
    # VmHWM, not ru_maxrss: Linux carries the parent's peak into ru_maxrss across a vfork+exec, so a
    # child of a pytest process that imported torch would report the parent's few hundred MiB.
    code = ("import json, sys; from ddpdoctor.triage.api import triage_paths; "
            "r = triage_paths([sys.argv[1]]); "
            "hwm = [int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM:')][0]; "
            "print(json.dumps([[f.id for f in r.findings], hwm]))")
    out = subprocess.run([sys.executable, "-c", code, str(p)], capture_output=True, text=True, timeout=280,
                         cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT))
    assert out.returncode == 0, out.stderr[-2000:]
    import json

    ids, maxrss_kib = json.loads(out.stdout.strip().splitlines()[-1])
    assert ids == ["LOG012"]
    assert maxrss_kib < 100 * 1024, f"peak RSS {maxrss_kib // 1024} MiB"


def test_crlf_ansi_and_tqdm_frames_parse_like_plain_text():
    plain = parse(0, 1, 0, b"[rank3]:[E1206 11:16:30.217733904 ProcessGroupNCCL.cpp:632] [Rank 3] Watchdog")
    messy = parse(0, 1, 0, b"\x1b[31m[rank3]:[E1206 11:16:30.217733904 ProcessGroupNCCL.cpp:632] [Rank 3] "
                           b"Watchdog\x1b[0m\r\n")
    assert (plain.rank, plain.text, plain.ts) == (messy.rank, messy.text, messy.ts)
    tqdm = parse(0, 1, 0, b"[rank1]: 12%|\xe2\x96\x88  | 12/100 [00:03<00:20]\r 13%|\xe2\x96\x88 | 13/100\r"
                          b"RuntimeError: CUDA error: an illegal memory access was encountered\r\n")
    assert tqdm.rank == 1 and tqdm.text.startswith("RuntimeError: CUDA error")


def test_prefixes_of_real_tools():
    cases = {
        b"3: [rank11]:RuntimeError: x": (11, None, 3),
        b"[1,2]<stdout>:smc-gpu-03:29880:30398 [0] init.cc:497 NCCL WARN Duplicate GPU detected": (2, "smc-gpu-03", None),
        b"(RayTrainWorker pid=4411, ip=10.0.0.9) [rank1]:ValueError: y": (1, "10.0.0.9", None),
        b"[80746] [rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] z": (0, None, None),
        b"[default2]:ValueError: w": (None, None, None),  # the local rank: line.local_rank
        b"node-b:12:12 [0] NCCL INFO NCCL version 2.20.5+cuda12.4": (None, "node-b", None),
    }
    for raw, (rank, host, label) in cases.items():
        line = parse(0, 1, 0, raw)
        assert (line.rank, line.host, line.label) == (rank, host, label), raw


def test_interleaved_partial_lines_of_two_ranks_are_split():
    lines = parse_all(0, 7, 0, b"[rank0]:Epoch 1:  45%|\xe2\x96\x88\xe2\x96\x88  | 45/100 [rank1]:torch.OutOfMemoryError: "
                               b"CUDA out of memory. Tried to allocate 2.00 GiB\n")
    assert [(l.rank, l.text.split(":")[0]) for l in lines] == [(0, "Epoch 1"), (1, "torch.OutOfMemoryError")]


def test_interleaved_log_names_the_right_rank(tmp_path):
    p = tmp_path / "interleaved.log"
    p.write_bytes(b"[rank0]:step 10 loss 2.1 [rank1]:torch.OutOfMemoryError: CUDA out of memory. Tried to "
                  b"allocate 2.00 GiB. GPU 1 has a total capacity of 79.15 GiB of which 1.06 GiB is free.\n"
                  b"[rank0]:step 11 loss 2.0\n")
    report = triage_paths([str(p)])
    assert summary(report)[0][0] == "LOG005" and "rank:1" in report.sorted_findings()[0].subjects


def test_truncated_last_line_and_overlong_line(tmp_path):
    p = tmp_path / "trunc.log"
    p.write_bytes(b"x" * (3 * reader.CHUNK) + b"\n[rank2]:RuntimeError: Expected to have finished reduction in the pri")
    report = triage_paths([str(p)])
    assert [f.id for f in report.findings] == ["LOG004"]  # the cut text still reads as rank 2's exception


def test_gzip_log_is_read(tmp_path):
    src = os.path.join(RULES, "LOG010_trigger_bus_error.log")
    p = tmp_path / "rank2.log.gz"
    with open(src, "rb") as fh, gzip.open(p, "wb") as gz:
        gz.write(fh.read())
    assert summary(triage_paths([str(p)]))[0][0] == "LOG010"


def test_sniff_kinds():
    assert reader.sniff(b"", 0)[0] == "empty"
    assert reader.sniff(b"\x80\x04\x95", 10)[0] == "fr-pickle"
    assert reader.sniff(os.urandom(4096), 4096)[0] == "binary"
    assert reader.sniff(b"\x00" * 100, 100)[0] == "binary"
    assert reader.sniff("héllo wörld, ça va\n".encode("latin-1") * 10, 200)[0] == "log"
    assert reader.sniff(b'{"schema": "ddpdoctor/report/1", "findings": []}', 48)[0] == "report"
    assert reader.sniff(b'{"level": "info", "msg": "json lines log"}\n', 44)[0] == "log"



def test_numpy_newline_counter_counts_like_bytes_count(monkeypatch):
    pytest.importorskip("numpy")
    data = b"".join(b"[rank%d]:line %d NCCL %s\n" % (i % 8, i, b"y" * (i % 97)) for i in range(20000))
    plain, fast = [], []
    reader.scan(io.BytesIO(data), lambda n, off, raw: plain.append((n, off)), head_full=0)
    reader.scan(io.BytesIO(data), lambda n, off, raw: fast.append((n, off)), head_full=0, expected=reader.NUMPY_FROM)
    assert plain == fast and plain[-1][0] == 20000


def test_older_torchrun_default_prefix_is_the_local_rank(tmp_path):
    p = tmp_path / "tee.log"
    p.write_text('[default1]:Traceback (most recent call last):\n[default1]:  File "train.py", line 30, in <module>\n'
                 "[default1]:ValueError: bad config\n")
    f = triage_paths([str(p)]).findings[0]
    assert f.id == "LOG004" and "rank:1" in f.subjects and "train.py:30" in f.title


def test_bytes_find_fallback_gives_the_same_lines(monkeypatch):
    """Where libc has no memmem (or ctypes is unavailable) the reader falls back to bytes.find."""
    data = FILLER * 3000 + b"[rank1]:RuntimeError: boom\n" + FILLER * 10 + b"[rank2]:x NCCL WARN y\n"
    fast, plain = [], []
    reader.scan(io.BytesIO(data), lambda n, off, raw: fast.append((n, raw)), head_full=0)
    monkeypatch.setattr(reader, "_MEMMEM", None)
    reader.scan(io.BytesIO(data), lambda n, off, raw: plain.append((n, raw)), head_full=0)
    assert fast == plain == [(3001, b"[rank1]:RuntimeError: boom"), (3012, b"[rank2]:x NCCL WARN y")]


def _lines_with(monkeypatch, hs, data, **kw):
    monkeypatch.setattr(reader, "_HS", None if hs else False)
    got = []
    reader.scan(io.BytesIO(data), lambda n, off, raw: got.append((n, off, raw)), **kw)
    return got


@pytest.mark.parametrize("name", sorted(f for f in os.listdir(RULES) if "_trigger_" in f))
def test_hyperscan_prefilter_hands_on_the_same_lines_as_memmem(name, monkeypatch):
    """The optional `fast` extra (one Hyperscan pass for all keywords) changes nothing but the speed."""
    pytest.importorskip("hyperscan")
    with open(os.path.join(RULES, name), "rb") as fh:
        body = fh.read()
    data = FILLER * 300 + body + b"[rank3]:[c10d] x rror NCCL ProcessGroupNCCL Killed\n" + FILLER * 20 + body
    for kw in ({"head_full": 0}, {"head_full": 0, "chunk": 4096}):
        with_hs = _lines_with(monkeypatch, True, data, **kw)
        assert reader._HS, "hyperscan imported but not used"
        assert with_hs == _lines_with(monkeypatch, False, data, **kw) and with_hs, name


def test_without_hyperscan_the_memmem_prefilter_is_used(monkeypatch):
    """DDPDOCTOR_TRIAGE_NO_HYPERSCAN (or no hyperscan installed) falls back to one memmem pass per keyword."""
    monkeypatch.setenv("DDPDOCTOR_TRIAGE_NO_HYPERSCAN", "1")
    monkeypatch.setattr(reader, "_HS", None)
    data = FILLER * 3000 + b"[rank1]:RuntimeError: boom\n" + FILLER * 10 + b"[rank2]:x NCCL WARN y\n"
    got = []
    reader.scan(io.BytesIO(data), lambda n, off, raw: got.append((n, raw)), head_full=0)
    assert reader._hyperscan() is None
    assert got == [(3001, b"[rank1]:RuntimeError: boom"), (3012, b"[rank2]:x NCCL WARN y")]


def _messy_log() -> bytes:
    """Every trigger fixture, filler, an over-long line and a last line without a newline."""
    body = b"".join(open(os.path.join(RULES, f), "rb").read() for f in sorted(os.listdir(RULES)))
    return (FILLER * 3000 + body + FILLER * 5000 + b"x" * (reader.MAX_LINE * 3) + b"\n" + body + FILLER * 100
            + b"[rank4]:RuntimeError: no newline at the end")


@pytest.mark.parametrize("hs", [True, False])
def test_worker_threads_hand_on_the_same_lines_as_one_thread(hs, monkeypatch):
    """The scan with worker threads (the keyword search and the newline count of a chunk run beside the
    read of the next) hands on the same lines, numbers and offsets, in the same order, as without."""
    if hs:
        pytest.importorskip("hyperscan")
    data = _messy_log()
    ref = _lines_with(monkeypatch, hs, data, chunk=4096, workers=0, head_full=0)
    assert len(ref) > 100 and ref[-1][2].endswith(b"no newline at the end")
    for workers in (1, 2, 3):
        for chunk in (4096, 65536, reader.CHUNK):
            for head_full in (0, reader.HEAD_FULL):
                got = _lines_with(monkeypatch, hs, data, chunk=chunk, workers=workers, head_full=head_full)
                want = ref if head_full == 0 else _lines_with(monkeypatch, hs, data, chunk=chunk, workers=0,
                                                              head_full=head_full)
                assert got == want, (workers, chunk, head_full)


def test_worker_threads_with_the_numpy_counter(monkeypatch):
    pytest.importorskip("numpy")
    data = _messy_log()
    plain = _lines_with(monkeypatch, True, data, chunk=8192, workers=0)
    fast = _lines_with(monkeypatch, True, data, chunk=8192, workers=2, expected=reader.NUMPY_FROM)
    assert fast == plain


def test_a_failing_sink_stops_the_worker_threads():
    """An exception while handing on a line propagates, and no worker thread is left behind."""
    import threading

    data = FILLER * 2000 + b"[rank1]:RuntimeError: boom\n" + FILLER * 2000

    def sink(n, off, raw):
        if b"boom" in raw:
            raise ValueError("sink failed")

    with pytest.raises(ValueError, match="sink failed"):
        reader.scan(io.BytesIO(data), sink, chunk=4096, workers=2, head_full=0)
    assert not [t for t in threading.enumerate() if t.name.startswith("ddpdoctor-triage")]


def test_worker_count(monkeypatch):
    monkeypatch.delenv("DDPDOCTOR_TRIAGE_THREADS", raising=False)
    assert reader.workers_for(0) == 0 and reader.workers_for(reader.THREADS_FROM - 1) == 0
    assert reader.workers_for(reader.THREADS_FROM) in (0, 2)  # 0 on a one-core machine
    monkeypatch.setenv("DDPDOCTOR_TRIAGE_THREADS", "0")
    assert reader.workers_for(1 << 40) == 0
    monkeypatch.setenv("DDPDOCTOR_TRIAGE_THREADS", "3")
    assert reader.workers_for(0) == 3


def test_a_pdsh_host_prefix_is_the_host_and_message_words_before_a_colon_are_not():
    from ddpdoctor.triage import lines

    got = lines.parse(0, 1, 0, b"worker-1: worker-1:19491:21059 [7] NCCL INFO transport/net.cc:288 -> 3")
    assert (got.host, got.nccl, got.text) == ("worker-1", "INFO", "transport/net.cc:288 -> 3")
    got = lines.parse(0, 1, 0, b"node01: Traceback (most recent call last):")
    assert (got.host, got.text) == ("node01", "Traceback (most recent call last):")
    for raw in (b"RuntimeError: CUDA error: out of memory", b"rank0: hello", b"Python3.10: x", b"d2.engine.train_loop: x",
                b"Epoch-1: loss 3", b"torch.distributed.DistBackendError: NCCL error"):
        assert lines.parse(0, 1, 0, raw).host is None, raw


def _file_lines(path, **kw):
    got = []
    with open(path, "rb", buffering=0) as fh:
        reader.scan(fh, lambda n, off, raw: got.append((n, off, raw)), **kw)
    return got


def test_a_regular_file_searched_ahead_hands_on_the_same_lines(tmp_path, monkeypatch):
    """A big regular file is searched ahead by background threads that keep only each region's result; the
    regions with a hit are read again to hand their lines on. Same lines, numbers, offsets and order as the
    scan that reads every chunk in the calling thread, with and without an open window across regions."""
    pytest.importorskip("hyperscan")
    monkeypatch.setattr(reader, "_HS", None)
    p = tmp_path / "messy.log"
    p.write_bytes(_messy_log())
    for chunk in (4096, 65536, reader.CHUNK):
        for head_full in (0, reader.HEAD_FULL):
            want = _file_lines(p, chunk=chunk, workers=0, head_full=head_full)
            assert len(want) > 100
            for workers in (1, 2):
                with open(p, "rb", buffering=0) as fh:
                    ahead = reader._ahead_for(fh, chunk, head_full, workers, 0)
                    assert ahead is not None, "a regular file with hyperscan is searched ahead"
                    ahead.close()
                got = _file_lines(p, chunk=chunk, workers=workers, head_full=head_full)
                assert got == want, (chunk, head_full, workers)


def test_held_results_are_bounded_and_a_failing_sink_stops_the_threads(tmp_path, monkeypatch):
    """A log with a hit on every line: the search waits for the consumer (AHEAD_HELD), the lines still come
    in order; a sink that raises ends every thread."""
    import threading

    pytest.importorskip("hyperscan")
    monkeypatch.setattr(reader, "_HS", None)
    monkeypatch.setattr(reader, "AHEAD_HELD", 50)
    p = tmp_path / "spam.log"
    p.write_bytes(b"".join(b"[rank0]:x NCCL INFO line %d\n" % i for i in range(20000)))
    got = _file_lines(p, chunk=4096, workers=2, head_full=0)
    assert [n for n, _, _ in got] == list(range(1, 20001))

    def sink(n, off, raw):
        if n == 5000:
            raise ValueError("sink failed")

    with pytest.raises(ValueError, match="sink failed"), open(p, "rb", buffering=0) as fh:
        reader.scan(fh, sink, chunk=4096, workers=2, head_full=0)
    assert not [t for t in threading.enumerate() if t.name.startswith("ddpdoctor-triage")]


def test_prefetch_starts_the_search_that_scan_takes_over(tmp_path, monkeypatch):
    """`ddpdoctor triage BIG.log` starts the search before it imports the rules; scan() takes it over (the
    same lines as without it); a prefetched file that is never scanned is left to stop at exit. Here with the
    search in threads of this process (DDPDOCTOR_TRIAGE_NO_FORK: a fast test starts no process; the search
    process is tested below with its work run in a thread)."""
    pytest.importorskip("hyperscan")
    monkeypatch.setattr(reader, "_HS", None)
    monkeypatch.setenv("DDPDOCTOR_TRIAGE_NO_FORK", "1")
    monkeypatch.setattr(reader, "THREADS_FROM", 1 << 16)
    monkeypatch.setattr(reader, "AHEAD_CHUNK", 8192)
    monkeypatch.setenv("DDPDOCTOR_TRIAGE_THREADS", "2")
    p = tmp_path / "messy.log"
    p.write_bytes(_messy_log())
    want = _file_lines(p, workers=0)
    made = []
    real_init = reader._Ahead.__init__
    monkeypatch.setattr(reader._Ahead, "__init__", lambda self, *a: made.append(a) or real_init(self, *a))
    reader.prefetch([str(p), str(tmp_path / "missing.log"), str(tmp_path)])
    assert len(reader._PREFETCHED) == 1
    got = _file_lines(p, expected=os.path.getsize(p))
    assert not reader._PREFETCHED and len(made) == 1, "scan took the prefetched search over"
    assert got == want
    reader.prefetch([str(p)])
    assert len(reader._PREFETCHED) == 1
    reader._drop_prefetched()   # what the exit does for a file never scanned
    assert not reader._PREFETCHED
    assert not [t for t in __import__("threading").enumerate() if t.name.startswith("ddpdoctor-triage")]


class _SearchInThread(reader._AheadProcess):
    """The search process's work (`_search_and_send`) run in a thread of this process (a fast test starts no
    process): the same records through the same pipe. `keep`: pass on only that many bytes of them (an int) or that
    share (a float): a search process that died there."""
    keep = None

    def _start(self, wfd):
        import threading

        fd = os.dup(self.fd)

        def run():
            try:
                if self.keep is None:
                    reader._search_and_send(fd, wfd, self.chunk, self.head_full, len(self.threads), self.expected)
                    return
                inner_r, inner_w = os.pipe()
                sent = []
                drain = threading.Thread(target=lambda: sent.extend(iter(lambda: os.read(inner_r, 1 << 16), b"")))
                drain.start()
                reader._search_and_send(fd, inner_w, self.chunk, self.head_full, len(self.threads), self.expected)
                os.close(inner_w)
                drain.join()
                os.close(inner_r)
                data = b"".join(sent)
                data = data[:self.keep if isinstance(self.keep, int) else int(len(data) * self.keep)]
                while data:
                    data = data[os.write(wfd, data):]
            except BrokenPipeError:
                pass
            finally:
                os.close(wfd)

        self.sender = threading.Thread(target=run, name="test-search-sender")
        self.sender.start()


def _lines_via_search_process(p, kind, chunk, head_full, workers=2):
    """scan() of `p` taking over a search started as prefetch() starts it, by `kind`."""
    st = os.stat(p)
    proc = kind(os.open(p, os.O_RDONLY), chunk, head_full, workers, st.st_size)
    reader._PREFETCHED[(st.st_dev, st.st_ino)] = proc
    try:
        got = _file_lines(p, chunk=chunk, head_full=head_full, workers=workers, expected=st.st_size)
    finally:
        reader._drop_prefetched()
        proc.sender.join(10)
    assert not reader._PREFETCHED and not proc.sender.is_alive() and proc.rfd == -1 and proc.fd == -1
    return got, proc


def test_the_search_process_hands_on_the_same_lines(tmp_path, monkeypatch):
    """The search in a process of its own (`ddpdoctor triage BIG.log`: its own GIL) sends each region's result
    through a pipe: scan() hands on the same lines, numbers, offsets and order as the scan that reads every chunk
    in the calling thread, with and without the head read whole, with an over-long line and an open window across
    regions."""
    pytest.importorskip("hyperscan")
    monkeypatch.setattr(reader, "_HS", None)
    p = tmp_path / "messy.log"
    p.write_bytes(_messy_log())
    for chunk in (4096, 65536):
        for head_full in (0, reader.HEAD_FULL):
            want = _file_lines(p, chunk=chunk, workers=0, head_full=head_full)
            got, proc = _lines_via_search_process(p, _SearchInThread, chunk, head_full)
            assert got == want and len(want) > 100, (chunk, head_full)
            assert proc.resumed is None


def test_a_search_process_that_dies_is_taken_over_where_it_left_off(tmp_path, monkeypatch):
    """Trigger: the search process's records stop after some regions, once mid-record (killed, out of memory):
    this process searches the rest from the region after the last whole record, cut as there, and hands on the
    same lines as a scan that never lost it. Quiet: a search process that sends everything is not taken over."""
    pytest.importorskip("hyperscan")
    monkeypatch.setattr(reader, "_HS", None)
    p = tmp_path / "messy.log"
    p.write_bytes(_messy_log())
    want = _file_lines(p, chunk=4096, workers=0, head_full=0)
    ahead = reader._Ahead(os.open(p, os.O_RDONLY), 4096, 0, 1, 0)
    try:   # where each region ends and the unfinished line read after it: where a take-over may start
        ends = [(0, 0)] + [(off + cut, ahead.carry_after) for off, cut, _ in ahead.results()]
    finally:
        ahead.close()
    for keep in (0, 3 * reader._REC.size + 8, 0.3, 0.7):
        dying = type("Dying", (_SearchInThread,), {"keep": keep})
        got, proc = _lines_via_search_process(p, dying, 4096, 0)
        assert got == want, keep
        assert proc.resumed in ends and (proc.resumed[0] > 0) == (keep != 0), (keep, proc.resumed)
    got, proc = _lines_via_search_process(p, _SearchInThread, 4096, 0)
    assert got == want and proc.resumed is None


def test_the_search_forks_only_a_process_without_other_threads(monkeypatch):
    """A fork copies only the calling thread (a lock another thread holds stays held in the copy): prefetch forks
    the search process only while no other thread runs, one at a time (the other big files are searched by
    threads), and never with DDPDOCTOR_TRIAGE_NO_FORK=1."""
    import threading

    monkeypatch.delenv("DDPDOCTOR_TRIAGE_NO_FORK", raising=False)
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    assert reader._fork_ok() is sys.platform.startswith("linux")
    monkeypatch.setattr(threading, "active_count", lambda: 2)
    assert reader._fork_ok() is False
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    monkeypatch.setitem(reader._PREFETCHED, (0, 0), object.__new__(_SearchInThread))
    assert reader._fork_ok() is False, "one search process at a time"
    del reader._PREFETCHED[(0, 0)]
    assert reader._fork_ok() is sys.platform.startswith("linux")
    monkeypatch.setenv("DDPDOCTOR_TRIAGE_NO_FORK", "1")
    assert reader._fork_ok() is False


def test_numpy_counter_in_one_call_per_region_counts_like_bytes_count():
    """A thread searching ahead counts a whole region in one numpy call (block = the buffer): same counts as
    bytes.count for every start and end, including a block larger than the span and a span of zero."""
    pytest.importorskip("numpy")
    buf = bytearray(b"".join(b"line %d %s\n" % (i, b"z" * (i % 131)) for i in range(3000)))
    for block in (1, 7, 4096, len(buf), 10 * len(buf)):
        count = reader._counter(buf, reader.NUMPY_FROM, block=block)
        for start, end in ((0, len(buf)), (5, 5), (13, 70001), (len(buf) - 1, len(buf))):
            assert count(start, end) == buf.count(b"\n", start, end), (block, start, end)


@pytest.mark.slow
def test_the_search_process_counts_with_numpys_core_alone():
    """Trigger: `_numpy_core` loads numpy's compiled core without numpy's package (no numpy.lib, no linalg) and a
    light counter counts like bytes.count. Needs a process: numpy's core loads once per process, and this one may
    have imported numpy already (then `_numpy_core` rightly declines: the quiet case below). ~0.3 s."""
    pytest.importorskip("numpy")
    code = ("import sys\nfrom ddpdoctor.triage import reader\n"
            "assert reader._numpy_core() is not None\n"
            "buf = bytearray(b''.join(b'line %d %s\\n' % (i, b'z' * (i % 131)) for i in range(3000)))\n"
            "for block in (7, len(buf)):\n"
            "    count = reader._counter(buf, reader.NUMPY_FROM, block=block, light=True)\n"
            "    assert count(0, len(buf)) == buf.count(b'\\n') and count(13, 70001) == buf.count(b'\\n', 13, 70001)\n"
            "print(sorted(m for m in ('numpy.lib', 'numpy.linalg', 'numpy._core.numeric') if m in sys.modules))\n")
    env = dict(os.environ)
    env.pop("DDPDOCTOR_TRIAGE_FULL_NUMPY", None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_numpys_core_alone_declines_and_leaves_no_stand_in(tmp_path, monkeypatch):
    """Quiet: with numpy already imported, or a numpy whose core cannot load alone (here a folder with an empty
    `_core`), `_numpy_core` answers None and leaves sys.modules as it found it (the caller imports numpy whole)."""
    import importlib.machinery
    import importlib.util

    monkeypatch.setattr(reader, "_NP_CORE", [])
    monkeypatch.setitem(sys.modules, "numpy", sys.modules.get("numpy", type(sys)("numpy")))
    assert reader._numpy_core() is None
    monkeypatch.setattr(reader, "_NP_CORE", [])
    for name in [name for name in sys.modules if name == "numpy" or name.startswith("numpy.")]:
        monkeypatch.delitem(sys.modules, name)
    (tmp_path / "numpy" / "_core").mkdir(parents=True)
    spec = importlib.machinery.ModuleSpec("numpy", None, is_package=True)
    spec.submodule_search_locations = [str(tmp_path / "numpy")]
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: spec)
    before = set(sys.modules)
    assert reader._numpy_core() is None
    assert set(sys.modules) == before


def test_the_switch_interval_is_short_only_while_a_file_is_searched_ahead(tmp_path, monkeypatch):
    """Trigger: a search ahead shortens the interpreter's switch interval (its threads get the GIL back between
    their C calls while the calling thread runs Python) and restores the caller's own interval when it ends,
    also for two overlapping searches. Quiet: DDPDOCTOR_TRIAGE_NO_SWITCH=1 leaves it alone."""
    pytest.importorskip("hyperscan")
    monkeypatch.setattr(reader, "_HS", None)
    monkeypatch.delenv("DDPDOCTOR_TRIAGE_NO_SWITCH", raising=False)
    p = tmp_path / "messy.log"
    p.write_bytes(_messy_log())
    before = sys.getswitchinterval()
    try:
        sys.setswitchinterval(0.004)
        seen = []
        # (the lines of the file's last TAIL_BYTES are handed on after the search ended, with its tail: reader.scan)
        searched = p.stat().st_size - reader.TAIL_BYTES
        with open(p, "rb", buffering=0) as fh:
            reader.scan(fh, lambda n, off, raw: seen.append(sys.getswitchinterval()) if off < searched else None,
                        chunk=8192, workers=2, head_full=0)
        assert seen and max(seen) <= reader.SWITCH_AHEAD, "shortened while the lines are handed on"
        assert sys.getswitchinterval() == pytest.approx(0.004), "the caller's interval is back"
        with open(p, "rb", buffering=0) as f1, open(p, "rb", buffering=0) as f2:
            a = reader._ahead_for(f1, 8192, 0, 1, 0)
            b = reader._ahead_for(f2, 8192, 0, 1, 0)
            a.close()
            assert sys.getswitchinterval() <= reader.SWITCH_AHEAD, "the other search still runs"
            b.close()
        assert sys.getswitchinterval() == pytest.approx(0.004)
        monkeypatch.setenv("DDPDOCTOR_TRIAGE_NO_SWITCH", "1")
        seen.clear()
        with open(p, "rb", buffering=0) as fh:
            reader.scan(fh, lambda n, off, raw: seen.append(sys.getswitchinterval()), chunk=8192, workers=2,
                        head_full=0)
        assert seen and all(x == pytest.approx(0.004) for x in seen)
    finally:
        sys.setswitchinterval(before)


def test_a_file_that_shrinks_while_searched_ahead_ends_the_scan_cleanly(tmp_path, monkeypatch):
    """The search threads read the file themselves (pread, never a mapping: a mapped file that shrinks kills
    the process with SIGBUS). A file cut short after the search started hands on what is still there, in
    order, and leaves no thread behind."""
    import threading

    pytest.importorskip("hyperscan")
    monkeypatch.setattr(reader, "_HS", None)
    p = tmp_path / "rotated.log"
    p.write_bytes(FILLER * 4000 + b"[rank1]:RuntimeError: first\n" + FILLER * 4000 + b"[rank2]:RuntimeError: later\n")
    got = []

    def sink(n, off, raw):
        got.append((n, raw))
        if b"first" in raw:
            os.truncate(p, off + len(raw) + 1 + len(FILLER) * 10)   # logrotate's copytruncate, mid-scan

    monkeypatch.setattr(reader, "AHEAD_REGIONS", 2)   # the search may not run to the end before the cut
    with open(p, "rb", buffering=0) as fh:
        reader.scan(fh, sink, chunk=4096, workers=2, head_full=0)
    assert [n for n, _ in got] == sorted(n for n, _ in got) and got[0][1].endswith(b"first")
    assert not any(b"later" in raw for _, raw in got)
    assert not [t for t in threading.enumerate() if t.name.startswith("ddpdoctor-triage")]


def test_line_cut_the_one_rule_for_where_a_region_ends():
    """After the last newline of the bytes just read (not inside the carried partial line); at the end for the
    input's last bytes or a line longer than a chunk; -1 (read more) for a short read that ended mid-line."""
    buf = bytearray(b"carried-part|a\nbb\ncc")
    assert reader._line_cut(buf, 12, len(buf), len(buf) - 12, 8) == buf.rindex(b"\n") + 1
    assert reader._line_cut(buf, 0, len(buf), 0, 8) == len(buf), "the last bytes, no newline: all of them"
    long_line = bytearray(b"x" * 16)
    assert reader._line_cut(long_line, 0, 16, 16, 8) == 16, "a line longer than a chunk is cut where read"
    assert reader._line_cut(bytearray(b"abc"), 0, 3, 3, 8) == -1, "a short read inside a line: read more"
    carried_nl = bytearray(b"x\nyz")   # a newline before `carry` is never searched: the carry holds none
    assert reader._line_cut(carried_nl, 2, 4, 2, 2) == 4


def _ahead_results(path, chunk, head_full, mapped, workers=2):
    ahead = reader._Ahead(os.open(path, os.O_RDONLY), chunk, head_full, workers, os.path.getsize(path), mapped=mapped)
    try:
        used_map = ahead.mm is not None
        out = [(off, cut, res if res is reader._HEAD else (sorted(res[0]), res[1])) for off, cut, res in ahead.results()]
        return out, used_map, ahead.carry_after
    finally:
        ahead.close()


def test_the_search_process_reads_the_mapped_file_into_the_same_regions_and_results(tmp_path, monkeypatch):
    """The search process maps the file and searches the page cache in place (no copy per region): the same regions
    (cut by the same rule: a carried unfinished line, a line longer than a region, the last region read as before),
    the same anchor line starts and newline counts as reading each region; DDPDOCTOR_TRIAGE_NO_MAP=1 reads instead."""
    pytest.importorskip("hyperscan")
    monkeypatch.setattr(reader, "_HS", None)
    monkeypatch.delenv("DDPDOCTOR_TRIAGE_NO_MAP", raising=False)
    p = tmp_path / "messy.log"
    p.write_bytes(_messy_log())
    for chunk, head_full in ((4096, 0), (8192, 20000), (reader.MAX_LINE + 4096, 0)):
        want, mapped_before, _ = _ahead_results(p, chunk, head_full, mapped=False)
        got, mapped_now, _ = _ahead_results(p, chunk, head_full, mapped=True)
        assert not mapped_before and mapped_now
        assert got == want, (chunk, head_full)
        assert any(cut >= chunk for _, cut, _ in got), "a line longer than a region was cut as when read"
    monkeypatch.setenv("DDPDOCTOR_TRIAGE_NO_MAP", "1")
    got, mapped_now, _ = _ahead_results(p, 4096, 0, mapped=True)
    assert not mapped_now and got == _ahead_results(p, 4096, 0, mapped=False)[0]


def test_the_keyword_database_is_kept_between_runs_and_checked_before_use(tmp_path, monkeypatch):
    """Trigger: the first run compiles the ANCHORS' Hyperscan database and keeps it in the cache folder; the next
    loads it (no compile) and finds the same lines. Quiet: a damaged file, or a database of other keywords under the
    name, is not used (compiled instead); DDPDOCTOR_TRIAGE_NO_HS_CACHE=1 keeps none."""
    hyperscan = pytest.importorskip("hyperscan")
    monkeypatch.setenv("DDPDOCTOR_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("DDPDOCTOR_TRIAGE_NO_HS_CACHE", raising=False)
    monkeypatch.setattr(reader, "_HS", None)
    path = reader._hs_cache_path(hyperscan)
    buf = bytearray(_messy_log())
    assert reader._hyperscan() is not None and os.path.exists(path)
    want = reader._anchor_lines(buf, None, len(buf))
    compiled = []
    real_db = hyperscan.Database

    def counting_db(*a, **k):
        compiled.append(1)
        return real_db(*a, **k)

    monkeypatch.setattr(hyperscan, "Database", counting_db)
    monkeypatch.setattr(reader, "_HS", None)
    assert reader._hyperscan() is not None and not compiled, "loaded, not compiled"
    assert reader._anchor_lines(buf, None, len(buf)) == want
    other = real_db(mode=hyperscan.HS_MODE_BLOCK)
    other.compile(expressions=[b"NCCL"], ids=[0], flags=[0], literal=True)
    for junk in (b"not a database", hyperscan.dumpb(other)):
        with open(path, "wb") as fh:
            fh.write(junk)
        monkeypatch.setattr(reader, "_HS", None)
        assert reader._hyperscan() is not None and compiled, "compiled again"
        assert reader._anchor_lines(buf, None, len(buf)) == want
        compiled.clear()
    os.unlink(path)
    monkeypatch.setenv("DDPDOCTOR_TRIAGE_NO_HS_CACHE", "1")
    monkeypatch.setattr(reader, "_HS", None)
    assert reader._hyperscan() is not None and compiled and not os.path.exists(path)
    monkeypatch.setattr(reader, "_HS", None)


def test_the_search_process_loads_the_keyword_database_without_the_catalogue(tmp_path, monkeypatch):
    """Trigger: before the catalogue is imported (the forked search process), the database comes from the copy kept
    with its keywords under the catalogue source's name: ANCHORS is not asked for, and the same lines are found.
    Quiet: a damaged copy, or one whose kept keywords its database does not find, is not used (the catalogue's
    keywords then, compiled); another source version (its stat changed) is another name; copies under other names
    are removed once unused for HS_SRC_KEEP_S, not before."""
    import time

    hyperscan = pytest.importorskip("hyperscan")
    monkeypatch.setenv("DDPDOCTOR_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("DDPDOCTOR_TRIAGE_NO_HS_CACHE", raising=False)
    monkeypatch.setattr(reader, "_MESSAGES", "ddpdoctor.no_such_module")   # as if the catalogue were not imported
    monkeypatch.setattr(reader, "_HS", None)
    src = reader._hs_src_path(hyperscan)
    buf = bytearray(_messy_log())
    assert reader._hyperscan() is not None and os.path.exists(src), "kept with its keywords on first use"
    want = reader._anchor_lines(buf, None, len(buf))

    def no_catalogue():
        raise AssertionError("the catalogue was asked for its keywords")

    monkeypatch.setattr(reader, "_anchors", no_catalogue)
    monkeypatch.setattr(reader, "_HS", None)
    assert reader._hyperscan() is not None, "loaded without ANCHORS"
    assert reader._anchor_lines(buf, None, len(buf)) == want
    monkeypatch.undo()
    monkeypatch.setenv("DDPDOCTOR_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(reader, "_MESSAGES", "ddpdoctor.no_such_module")
    kept = open(src, "rb").read()
    other = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    other.compile(expressions=[b"NCCL"], ids=[0], flags=[0], literal=True)
    blob = b"\0".join(reader.ANCHORS)
    asked = []
    real = reader._anchors
    monkeypatch.setattr(reader, "_anchors", lambda: asked.append(1) or real())
    for junk in (b"not a database", kept[:len(reader._HS_SRC_MAGIC) + 4],
                 reader._HS_SRC_MAGIC + reader.struct.pack("<Q", len(blob)) + blob + hyperscan.dumpb(other)):
        with open(src, "wb") as fh:
            fh.write(junk)
        assert reader._hs_load_src(hyperscan, src) is None
        asked.clear()
        monkeypatch.setattr(reader, "_HS", None)
        assert reader._hyperscan() is not None and asked, "the catalogue's keywords, not the copy"
        assert reader._anchor_lines(buf, None, len(buf)) == want
    stale, fresh = src[:-3] + "0.db", src[:-3] + "1.db"
    for path, age in ((stale, reader.HS_SRC_KEEP_S + 60), (fresh, 60)):
        with open(path, "wb") as fh:
            fh.write(b"x")
        os.utime(path, (time.time() - age,) * 2)
    assert reader._hs_prune_src(src) == 1 and not os.path.exists(stale) and os.path.exists(fresh) and os.path.exists(src)
    source = tmp_path / "messages.py"
    source.write_text("ANCHORS = ()\n")
    before = reader._hs_src_path(hyperscan, str(source))
    source.write_text("ANCHORS = (b'x',)\n")
    assert before and reader._hs_src_path(hyperscan, str(source)) != before
    assert reader._hs_src_path(hyperscan, str(tmp_path / "missing.py")) is None
    monkeypatch.setattr(reader, "_HS", None)


def test_the_reader_imports_no_catalogue_json_gzip_or_dataclasses_at_module_level():
    """Trigger/quiet on the source: the search process imports this module before its search starts, so its
    module-level imports are the stdlib's light ones (the catalogue, json, gzip and dataclasses load where used);
    reader.ANCHORS is still the catalogue's tuple, and Input compares and prints as the dataclass did."""
    import ast as _ast

    from ddpdoctor.facts import messages

    tree = _ast.parse(open(reader.__file__, encoding="utf-8").read())
    top = set()
    for node in tree.body:
        if isinstance(node, _ast.Import):
            top.update(a.name for a in node.names)
        elif isinstance(node, _ast.ImportFrom):
            top.add("." * node.level + (node.module or ""))
    assert top and not top & {"json", "gzip", "dataclasses", "..facts.messages", "ddpdoctor.facts.messages"}, top
    assert reader.ANCHORS is messages.ANCHORS
    a, b = reader.Input("x.log", "log", "", 3), reader.Input("x.log", "log", size=3)
    assert a == b and a != reader.Input("x.log", "log", "", 4)
    assert repr(a) == "Input(path='x.log', kind='log', reason='', size=3)"
    with pytest.raises(AttributeError):
        reader.NO_SUCH_NAME  # noqa: B018


def test_region_with_its_count_known_hands_on_the_same_lines_numbers_and_windows():
    """A region searched ahead comes with its newline count: `_region` then counts a jump to a hit from the region's
    nearer end and does not count the rest again. The lines handed on, their numbers and offsets, the window left
    open and the count must be those of the walk that counts everything (hits near the start, the middle, the end;
    a window opened by a Traceback; a last line without a newline). Pure: a buffer, no file."""
    rows = [b"step %d | loss 1.0" % i for i in range(6000)]
    rows[3] = b"[rank1]: Killed"
    rows[2999] = b"[rank2]: Traceback (most recent call last):"
    rows[5990] = b"[rank5]: ERROR: exitcode -9 Killed"
    for last, tail in ((b"[rank0]: Traceback (most recent call last):", b"\n"), (b"[rank0]: Traceback (most", b"\n"),
                       (b"[rank0]: Traceback (most recent call last):", b""), (b"step", b"")):
        rows[5997] = last
        buf = bytearray(b"\n".join(rows) + tail)
        cut = len(buf)
        find = reader._finder(buf)
        total = buf.count(b"\n", 0, cut)
        starts = reader._anchor_lines(buf, find, cut)
        assert len(starts) == (4 if last.endswith(b":") or b"Traceback" in last else 3)
        walks = []
        for found in (None, (starts, total)):
            got = []
            res = reader._region(buf, find, lambda a, b: buf.count(b"\n", a, b), cut, 1000, 7, 0, False, 0,
                                 lambda *a: got.append(a), found)
            walks.append((res, got))
        assert walks[0] == walks[1]
        assert walks[0][0][1] == (total if tail or last == b"step" else total + 1)   # a last line in a window: counted
        assert [no for no, _off, _raw in walks[0][1]][:2] == [7 + 3, 7 + 2999]


def test_no_anchor_holds_a_newline():
    """`_search` cuts a region into blocks after a newline, so that no match spans two blocks: true while no keyword
    holds a newline (a keyword is matched inside one line)."""
    assert all(b"\n" not in a and a for a in reader._anchors())


@pytest.mark.parametrize("block", [1, 97, 4096, reader.SCAN_BLOCK])
def test_the_search_in_blocks_finds_every_anchor_line_and_counts_every_newline(block, monkeypatch):
    """A region is searched and counted in blocks cut after a newline (`_search`, round 18: each block counted while
    it is still in the cache): the same anchor line starts and newline count as testing every line of it for every
    keyword, with blocks smaller than a line (a line longer than a block), at a region inside a bigger buffer (the
    mapped file's `base`), and for a region whose last line has no newline."""
    pytest.importorskip("hyperscan")
    monkeypatch.setattr(reader, "_HS", None)
    monkeypatch.setattr(reader, "SCAN_BLOCK", block)
    data = _messy_log()[:300_000] + b"\n" + b"x" * 5000 + b"NCCL WARN no newline"
    anchors = reader._anchors()
    plain = [a for a in anchors if a not in reader.GLOG_HEAD]
    want, at = set(), 0
    for line in data.split(b"\n"):
        # a glog-head keyword (".cc:", ".py:") counts only on a line opening with glog's E/F/W level (round 22)
        if any(a in line for a in plain) or (re.match(rb"\[?[EFW]\d{4}", line)
                                             and re.search(rb"\.(?:cc|py):\d{1,9}\]", line)):
            want.add(at)
        at += len(line) + 1
    assert len(want) > 50
    for base, pad in ((0, b""), (13, b"NCCL\n" + b"y" * 8)):
        buf = bytearray(pad + data + b"\nNCCL after the region\n")
        starts, counted = reader._search(buf, len(data), None, lambda a, b: buf.count(b"\n", a, b), base=base)
        assert starts == want, (block, base)
        assert counted == data.count(b"\n")
    assert reader._anchor_lines(bytearray(data), None, len(data)) == want


def _rss_file_kib() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("RssFile:"):
                return int(line.split()[1])
    raise AssertionError("no RssFile in /proc/self/status")


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="Linux's /proc")
def test_a_region_is_mapped_in_one_call_before_its_search(tmp_path, monkeypatch):
    """Trigger: `_populate_pages` maps a region's pages of the file at once (MADV_POPULATE_READ, round 18): the
    process's resident file pages grow by the region; `_unmap_pages` takes them out again. Quiet: a region not
    populated stays unmapped; a kernel that refuses the advice (EINVAL before 5.14) is asked once, then never again."""
    import mmap

    monkeypatch.setattr(reader, "_POPULATE", [])
    p = tmp_path / "big.log"
    p.write_bytes(FILLER * ((16 << 20) // len(FILLER)))
    with open(p, "rb") as fh:
        mm = mmap.mmap(fh.fileno(), 0, prot=mmap.PROT_READ)
        try:
            before = _rss_file_kib()
            reader._unmap_pages(mm, 0, len(mm))
            assert _rss_file_kib() - before < 2048, "nothing mapped before"
            reader._populate_pages(mm, 12345, 8 << 20)
            if reader._POPULATE:
                pytest.skip("this kernel has no MADV_POPULATE_READ")
            grown = _rss_file_kib() - before
            assert grown >= (8 << 10) - 8, f"the region's pages were mapped: {grown} KiB"
            reader._unmap_pages(mm, 0, len(mm))
            assert _rss_file_kib() - before < 2048, "and taken out after the search"
        finally:
            mm.close()
    calls = []

    class Refusing:
        def madvise(self, *args):
            calls.append(args)
            raise OSError(22, "Invalid argument")

    reader._populate_pages(Refusing(), 3 * mmap.PAGESIZE + 5, 100)
    reader._populate_pages(Refusing(), 0, 100)
    assert len(calls) == 1 and calls[0][1:] == (3 * mmap.PAGESIZE, 105)
