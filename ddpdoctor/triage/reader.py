"""Find the inputs and stream each log once, in bounded memory, handing on only the lines that matter.

A log of N ranks is mostly progress bars and loss lines. Reading it line by line in Python costs
more than the disk. So the reader works on big chunks of bytes: it searches each chunk for a few
keywords (`ANCHORS`) that the line of every signature in `signatures.py` carries: all of them in one Hyperscan
pass when the optional `fast` extra is installed, else one libc `memmem` pass per keyword (or
`bytes.find` where ctypes has no memmem), and only the lines around a hit are sliced,
decoded and parsed. The first `HEAD_FULL` bytes of every file are parsed line by line, because
start-up lines (versions, interfaces) carry no keyword. A window of lines after a keyword line is
passed through too, so the "Root Cause (first observed failure)" table below a ChildFailedError is
read whole.

A big input (`THREADS_FROM` and up) is searched by two worker threads while the calling thread reads
the next chunks and hands on the lines in file order: the keyword scan (Hyperscan) and the newline
count (numpy) run without the GIL, so a second core shortens the wall time; the lines handed on, their
numbers and offsets are the same as with one thread. A big regular file goes further (`_Ahead`): each worker
reads (pread) and searches the next region itself, keeping only the region's result, and the calling thread
re-reads only the regions with a hit; `ddpdoctor triage` starts that search (`prefetch`) before it imports
its rules, so the start-up and the search overlap, and runs it in a forked copy of itself (`_AheadProcess`: its own
GIL, so numpy's import and the search never wait for the start-up's Python), which sends the regions' results back
through a pipe; that process searches a mapping of the file (`_map`), not copies of it.

Memory is a few chunks (two per worker, plus two) and one partial line, whatever the size of the file. A
line longer than `MAX_LINE` is cut into pieces (a truncated or binary line cannot exhaust memory).
"""
from __future__ import annotations

import functools
import io
import os
import stat
import struct
import sys
import threading
from array import array
from typing import BinaryIO, Callable, List, Optional, Tuple

# No module-level import of the catalogue (ddpdoctor.facts.messages, which imports dataclasses, and so inspect, ast,
# dis, tokenize), json or gzip: the search process ddpdoctor.start forks imports this module before its search starts,
# so every import here delays the search (issue 24, round 15). ANCHORS is loaded on first use (`_anchors`, and
# `reader.ANCHORS` through the module's __getattr__); the search process takes the keywords' Hyperscan database from
# the cache (`_hs_src_path`) without them.

CHUNK = 1 << 20  # 128 KiB-4 MiB measured within noise of each other here (CPU time, hyperscan or memmem)
MAX_LINE = 64 << 10
HEAD_FULL = 64 << 10   # start-up lines (versions, environment) carry no keyword: read them all
SNIFF = 64 << 10
MAX_JSON = 64 << 20   # elastic error files, run reports and JSON Flight Recorder dumps are small
MAX_PICKLE = 256 << 20

# Every signature's line and every catalogue message carries one of these keywords: the list lives with the
# catalogue (ddpdoctor.facts.messages.ANCHORS, which says why each is there), whose test checks every entry's
# examples carry one; tests/test_triage_reader.py checks the verdicts equal parsing every line.
def _anchors() -> Tuple[bytes, ...]:
    """messages.ANCHORS, imported on first use (the module's own uses go through here)."""
    from ..facts.messages import ANCHORS

    return ANCHORS


def __getattr__(name: str):
    if name == "ANCHORS":   # `reader.ANCHORS`, `from ...reader import ANCHORS`: the catalogue's own tuple
        return _anchors()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

# A line containing one of these opens a window: the next lines are read whole.
WINDOW_OPENERS = {b"WorkNCCL(": 2, b"operation timeout:": 2, b"memory users": 12, b"ChildFailedError": 40, b"failed (exitcode": 14, b"Traceback (most recent call last)": 60,
                  b"Expected to have finished reduction": 12, b"ERROR: Unexpected bus": 2, b"ddpdoctor run: ": 200,
                  # ProcessGroupNCCL's long messages, wrapped by a terminal ("ProcessGroupNCCL'" / "s watchdog got stuck"):
                  # the continuations carry no keyword of their own (api._read_log joins them)
                  b"ProcessGroupNCCL.cpp:": 3,
                  # Horovod's stall report: the header line "Missing ranks:" ("Stalled ranks:" to v0.20.0) carries a
                  # catalogue keyword ("issing ranks"/"talled ranks", messages.ANCHORS), the rows under it ("3: [t1,
                  # t2 ...]", one per rank that has not submitted, at most the job's size: horovod/common/
                  # stall_inspector.cc CheckForStalledTensors @0f37436) carry none. Rank 0 prints it once per stall
                  # check (60 s by default), so the window costs little; rows past 1024 ranks are not read past the head.
                  b"issing ranks:": 1024, b"talled ranks:": 1024,
                  # UCX's signal handler ("[host:pid:0:tid] Caught signal 7 (Bus error: ...)") prints the dying thread's
                  # backtrace next ("==== backtrace (tid: N) ====", one frame a line, ~20-30): frames inside NCCL tell
                  # where it died (Job._nccl_sigbus), and they carry no keyword
                  b"Caught signal 7 (": 40,
                  # libstdc++'s verbose terminate handler (gcc-mirror/gcc libstdc++-v3/libsupc++/vterminate.cc @83f5179,
                  # __verbose_terminate_handler) writes "terminate called after throwing an instance of 'T'" and, for a
                  # std::exception, the message on the next line: "  what():  " + exc.what(). That line is the C++
                  # message (a TORCH_CHECK's text, "Tensors must be CUDA and dense"), and carries no keyword of its own
                  b"terminate called after throwing": 2,
                  # argparse's usage banner (CPython Lib/argparse.py @8ea6cc14): its wrapped lines (one per ~80
                  # columns, 100 and more for transformers' TrainingArguments) carry no keyword, nor does the line after
                  # them, which says whether it was a rejection (Job.usage_open: the log ends in the banner) or -h's
                  # help (its "options:" list)
                  b"[-h]": 256,
                  # AutoGluon's caught model failure ("Warning: Exception caused M to fail during training... Skipping
                  # this model.") logs the exception's str() on the next line, without its type and with no keyword
                  # (autogluon timeseries/.../trainer/abstract_trainer.py @b63bfd40 _train_and_save): LOG028's cause
                  b"to fail during training": 2}

_GATE: list = []


def _opener_gate():
    """A regex that finds any of the WINDOW_OPENERS (each a literal): a line it does not find opens no window.

    `bytes in bytes` first tries the needle as an integer (a byte value) and formats and drops a TypeError on every
    test: ~2,400 instructions each, ~40 M of the command's ~920 M on issue 24's 1 GiB log (callgrind, round 16)."""
    if not _GATE:
        import re

        from ..recache import own_patterns

        with own_patterns():   # the package's own text: kept in the regex cache though compiled after input is read
            _GATE.append(re.compile(b"|".join(re.escape(o) for o in WINDOW_OPENERS)))
    return _GATE[0]


SKIP_DIRS = {"__pycache__", ".git", "node_modules", ".venv", "venv", "site-packages"}
LOG_EXTS_SKIP = (".py", ".pyc", ".so", ".png", ".jpg", ".pt", ".pth", ".bin", ".safetensors", ".ckpt", ".npy",
                 ".npz", ".zip", ".tar", ".whl", ".h5", ".hdf5", ".parquet", ".arrow")


class Input:
    """One input as the user named it. `kind`: log, log-gz, elastic, report, fr-pickle, fr-json, or a problem
    (binary, empty, unreadable, too-large). (A plain class, not a dataclass: see the imports above.)"""
    __slots__ = ("path", "kind", "reason", "size")

    def __init__(self, path: str, kind: str, reason: str = "", size: int = 0):
        self.path, self.kind, self.reason, self.size = path, kind, reason, size

    def _key(self) -> tuple:
        return self.path, self.kind, self.reason, self.size

    def __eq__(self, other) -> bool:
        return self._key() == other._key() if type(other) is Input else NotImplemented

    __hash__ = None   # as a dataclass's: mutable, compared by value

    def __repr__(self) -> str:
        return f"Input(path={self.path!r}, kind={self.kind!r}, reason={self.reason!r}, size={self.size!r})"


class MissingPath(ValueError):
    """A path on the command line does not exist (exit 2, one line)."""


# ------------------------------------------------------------------ discovery

def collect(paths: List[str]) -> List[Input]:
    """Expand folders recursively (sorted, no symlink loops) and classify every file."""
    out: List[Input] = []
    seen = set()
    missing = [p for p in paths if p != "-" and not os.path.lexists(p)]
    if missing:
        raise MissingPath(f"no such file or folder: {missing[0]}")
    for raw in paths:
        if raw == "-":
            out.append(Input("-", "stdin"))
            continue
        if os.path.isdir(raw):
            for dirpath, dirnames, filenames in os.walk(raw, followlinks=False):
                dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
                for name in sorted(filenames):
                    full = os.path.join(dirpath, name)
                    if name.startswith(".") or name.lower().endswith(LOG_EXTS_SKIP):
                        continue
                    key = os.path.realpath(full)
                    if key not in seen:
                        seen.add(key)
                        out.append(classify(full, in_folder=True))
            continue
        key = os.path.realpath(raw)
        if key not in seen:
            seen.add(key)
            out.append(classify(raw))
    return [i for i in out if i is not None]


def classify(path: str, in_folder: bool = False) -> Optional[Input]:
    try:
        st = os.stat(path)
    except OSError as exc:
        return Input(path, "unreadable", f"cannot read: {exc.strerror or exc}")
    if not stat.S_ISREG(st.st_mode):
        if in_folder or stat.S_ISDIR(st.st_mode) or stat.S_ISSOCK(st.st_mode):
            return None if in_folder else Input(path, "unreadable", "not a regular file")
        # A FIFO (`<(zcat job.log.gz)`) or a device: read once, as standard input is (sniffing it here would consume
        # its first bytes, and opening one that has no writer would block), under model.inputs' idle bound.
        return Input(path, "stream")
    try:
        with open(path, "rb") as fh:
            head = fh.read(SNIFF)
    except OSError as exc:
        return Input(path, "unreadable", f"cannot read: {exc.strerror or exc}")
    kind, reason = sniff(head, st.st_size, path)
    return Input(path, kind, reason, st.st_size)


def sniff(head: bytes, size: int, path: str = "") -> Tuple[str, str]:
    """What a file is, from its first bytes."""
    if not head:
        return "empty", "empty file"
    if head[:2] == b"\x1f\x8b":
        return "log-gz", ""
    if head[:1] == b"\x80" and len(head) > 1 and 2 <= head[1] <= 5:
        if size > MAX_PICKLE:
            return "too-large", f"pickle of {size >> 20} MiB is larger than a Flight Recorder dump"
        return "fr-pickle", ""
    stripped = head.lstrip()
    if stripped[:1] == b"{" and size <= MAX_JSON:
        kind = _json_kind(path, head, size)
        if kind:
            return kind, ""
    if _is_binary(head):
        return "binary", "binary data, not a text log"
    return "log", ""


def _json_kind(path: str, head: bytes, size: int) -> Optional[str]:
    """elastic / report / fr-json for a JSON document; None for a log that starts with `{` (JSON lines)."""
    text = head
    if size > len(head) and path:
        try:
            with open(path, "rb") as fh:
                text = fh.read(MAX_JSON + 1)
        except OSError:
            return None
    import json

    try:
        doc = json.loads(text.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return None
    return json_kind(doc)


def json_kind(doc) -> Optional[str]:
    if not isinstance(doc, dict):
        return None
    if str(doc.get("schema", "")).startswith("ddpdoctor/report"):
        return "report"
    if isinstance(doc.get("message"), (dict, str)) and ("timestamp" in doc or "extraInfo" in str(doc.get("message"))[:2000]):
        return "elastic"
    if "entries" in doc and ("pg_config" in doc or "version" in doc or "rank" in doc):
        return "fr-json"
    return None


def _is_binary(head: bytes) -> bool:
    """Data, not a text log. NULs alone do not say it: a file cut by a crash is padded with them (XFS's "NULL files",
    ext4's delayed allocation: the size was written, the data not), and lines.clean drops them; a binary file keeps
    its other control bytes or its high bytes once the NULs are gone (round 21, robust21: a log with a NUL tail was
    refused whole)."""
    head = head.replace(b"\x00", b"")
    if not head:
        return True
    sample = head[:8192]
    bad = sum(1 for b in sample if b < 9 or (13 < b < 27) or 27 < b < 32 or b == 127)
    if bad > len(sample) * 0.05:
        return True
    try:
        sample.decode("utf-8")
        return False
    except UnicodeDecodeError as exc:
        if exc.start > len(sample) - 4:  # a multi-byte character cut by the sample's end
            return False
    # Not UTF-8: latin-1 logs exist, but mostly high bytes means data.
    return sum(1 for b in sample if b >= 128) > len(sample) * 0.3


def open_stream(inp: Input, stdin: Optional[BinaryIO] = None) -> BinaryIO:
    if inp.kind == "stdin":
        return stdin if stdin is not None else _stdin()
    if inp.kind == "log-gz":
        return _tolerant_gzip()(inp.path, "rb")
    return open(inp.path, "rb", buffering=0)


@functools.lru_cache(maxsize=None)
def _tolerant_gzip():
    """gzip.GzipFile whose readinto keeps what it decompressed before damage: a .gz cut short (a copy stopped
    mid-file: EOFError), with garbage after its last member (BadGzipFile) or a corrupt block (zlib.error) ends the
    stream there, and `damage` says why (round 21, robust21: the lines before the damage were lost with the file).
    Made on first use: gzip is imported only for a .gz input."""
    import gzip
    import zlib

    class TolerantGzipFile(gzip.GzipFile):
        damage: Optional[BaseException] = None

        def readinto(self, b) -> int:
            if self.damage is not None:
                return 0
            view = memoryview(b).cast("B")
            n = 0
            try:
                while n < len(view):
                    chunk = self.read1(len(view) - n)
                    if not chunk:
                        break
                    view[n:n + len(chunk)] = chunk
                    n += len(chunk)
            except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
                self.damage = exc
            return n

    return TolerantGzipFile


def _gzipped(stream) -> bool:
    """A gzip.GzipFile (none can exist before gzip is imported)."""
    gzip = sys.modules.get("gzip")
    return gzip is not None and isinstance(stream, gzip.GzipFile)


def _stdin() -> BinaryIO:
    from ..model.inputs import stdin_input

    return stdin_input()


class Prefixed(io.RawIOBase):
    """A stream whose first bytes were already read (to sniff standard input)."""

    def __init__(self, head: bytes, rest: BinaryIO):
        self._head = memoryview(head)
        self._rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        if self._head:
            n = min(len(b), len(self._head))
            b[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        if hasattr(self._rest, "readinto"):
            return self._rest.readinto(b) or 0
        data = self._rest.read(len(b))
        b[:len(data)] = data
        return len(data)


# ------------------------------------------------------------------ the scan

def _libc_memmem() -> Optional[Callable]:
    """libc's memmem through the process's own symbols (no find_library: it runs ldconfig)."""
    import ctypes

    try:
        try:
            fn = ctypes.CDLL(None).memmem
        except (OSError, AttributeError, TypeError):
            import ctypes.util

            name = ctypes.util.find_library("c")
            if not name:
                return None
            fn = ctypes.CDLL(name).memmem
        fn.restype = ctypes.c_void_p
        fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
        return fn
    except (OSError, AttributeError):
        return None


_UNSET = object()
_MEMMEM = _UNSET  # resolved on first use: with Hyperscan the reader never needs ctypes


def _finder(buf: bytearray) -> Callable[[bytes, int, int], int]:
    """find(needle, start, end) -> position in buf or -1, with memmem when libc has it (looked up on the
    first call, so that a scan with Hyperscan never imports ctypes)."""
    impl: List[Callable[[bytes, int, int], int]] = []

    def find(needle: bytes, start: int, end: int) -> int:
        if not impl:
            impl.append(_make_finder(buf))
        return impl[0](needle, start, end)

    return find


def _make_finder(buf: bytearray) -> Callable[[bytes, int, int], int]:
    global _MEMMEM
    if _MEMMEM is _UNSET:
        _MEMMEM = _libc_memmem() if os.environ.get("DDPDOCTOR_TRIAGE_NO_MEMMEM") is None else None
    if _MEMMEM is None:
        return lambda needle, start, end: buf.find(needle, start, end)
    import ctypes

    base = ctypes.addressof((ctypes.c_char * len(buf)).from_buffer(buf))
    memmem = _MEMMEM

    def find(needle: bytes, start: int, end: int) -> int:
        if end - start < len(needle):
            return -1
        p = memmem(base + start, end - start, needle, len(needle))
        return -1 if not p else p - base

    return find


def _hyperscan():
    """A Hyperscan database of the ANCHORS (the optional `fast` extra), or None: one pass over a chunk
    finds every keyword, where memmem makes one pass per keyword. DDPDOCTOR_TRIAGE_NO_HYPERSCAN=1 turns
    it off; any failure to import or compile falls back to memmem, with the same lines handed on.
    Before the catalogue is imported (the search process, and the command until its rules load), the database
    comes from the copy kept with its keywords under the catalogue source's name (`_hs_src_path`), where one is."""
    global _HS
    if _HS is None:
        _HS = False
        if os.environ.get("DDPDOCTOR_TRIAGE_NO_HYPERSCAN") is None:
            try:
                import hyperscan

                src = _hs_src_path(hyperscan)
                db = _hs_load_src(hyperscan, src) if src and _MESSAGES not in sys.modules else None
                if db is None:
                    anchors = _anchors()
                    path = _hs_cache_path(hyperscan)
                    db = _hs_load(hyperscan, path) if path else None
                    if db is None:
                        db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
                        db.compile(expressions=_hs_expressions(anchors), ids=list(range(len(anchors))),
                                   flags=[0] * len(anchors))
                        _set_glog_from(db, anchors)
                        if path:
                            _hs_save(hyperscan, db, path)
                    if src and not os.path.exists(src):
                        _hs_save(hyperscan, db, src, anchors)
                        _hs_prune_src(src)
                _HS = db
            except Exception:  # noqa: BLE001 - not installed, or a build without this CPU's support
                _HS = False
    return _HS or None


_HS = None
_MESSAGES = "ddpdoctor.facts.messages"
_HS_SRC_MAGIC = b"ddpdoctor-hs-src/1\n"


def _hs_cache_path(hyperscan) -> Optional[str]:
    """Where the compiled database of today's ANCHORS is kept between runs: the user's cache folder
    (ddpdoctor.recache.cache_dir), named by Hyperscan's version and a checksum of the keywords. Compiling it cost ~10 ms
    of every run's start, before the search could begin (issue 24's profile). DDPDOCTOR_TRIAGE_NO_HS_CACHE=1: none."""
    if os.environ.get("DDPDOCTOR_TRIAGE_NO_HS_CACHE") is not None:
        return None
    import zlib

    from ..recache import cache_dir

    anchors = _anchors()
    blob = b"\0".join(anchors)
    version = "".join(c if c.isalnum() else "_" for c in str(getattr(hyperscan, "__version__", "x")))
    return os.path.join(cache_dir(), f"hs4-{version}-{zlib.crc32(blob):08x}{zlib.adler32(blob):08x}-{len(anchors)}.db")


def _hs_src_path(hyperscan, source: Optional[str] = None) -> Optional[str]:
    """Where the database is kept with its keywords, named by Hyperscan's version and the catalogue source's path,
    modification time and size (ANCHORS is a literal of ddpdoctor/facts/messages.py): found without importing the
    catalogue, whose import (dataclasses and what it imports) cost the search process ~16 ms of its start, on the
    1 GiB benchmark's critical path (round 15). None without the source file (an install of .pyc files only) or with
    DDPDOCTOR_TRIAGE_NO_HS_CACHE=1. `source`: that file (tests)."""
    if os.environ.get("DDPDOCTOR_TRIAGE_NO_HS_CACHE") is not None:
        return None
    import zlib

    from ..recache import cache_dir

    if source is None:
        source = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "facts", "messages.py")
    try:
        st = os.stat(source)
    except OSError:
        return None
    key = f"{os.path.realpath(source)}|{st.st_mtime_ns}|{st.st_size}|{st.st_ino}".encode()
    version = "".join(c if c.isalnum() else "_" for c in str(getattr(hyperscan, "__version__", "x")))
    return os.path.join(cache_dir(), f"hs4-{version}-src-{zlib.crc32(key):08x}{zlib.adler32(key):08x}.db")


HS_SRC_KEEP_S = 7 * 86400   # copies under an older source's name go once unused this long (a week of edits at most)


def _hs_prune_src(kept: str, now: Optional[float] = None) -> int:
    """Remove the other source-keyed copies (`_hs_src_path`) beside `kept` not modified for HS_SRC_KEEP_S: each edit
    of the catalogue source names a new one (~0.1 MB), and nothing else would remove the old. Returns how many."""
    import time

    folder, name = os.path.split(kept)
    prefix = name[:name.index("-src-") + 5]
    limit = (time.time() if now is None else now) - HS_SRC_KEEP_S
    gone = 0
    try:
        names = os.listdir(folder)
    except OSError:
        return 0
    for other in names:
        if other == name or not other.startswith(prefix) or not other.endswith(".db"):
            continue
        path = os.path.join(folder, other)
        try:
            if os.stat(path).st_mtime < limit:
                os.unlink(path)
                gone += 1
        except OSError:
            pass
    return gone


def _hs_probe(hyperscan, db, anchors: Optional[Tuple[bytes, ...]] = None) -> bool:
    """The database finds every keyword of `anchors` (ANCHORS) where it stands, and nothing that is not one (a file of
    other keywords, another build's, or a damaged one fails this, and the database is compiled instead)."""
    if anchors is None:
        anchors = _anchors()
    probes = [GLOG_LEVEL_PROBE + a + GLOG_TAIL_PROBE if a in GLOG_HEAD else a for a in anchors]
    text = b"\n".join(probes)
    want, at = set(), 0
    for i, a in enumerate(probes):
        at += len(a)
        want.add((i, at))
        at += 1
    got: list = []
    db.scan(text, match_event_handler=lambda i, _frm, to, _fl, _ctx: got.append((i, to)))
    return want <= set(got) and all(0 <= i < len(probes) and text[to - len(probes[i]):to] == probes[i]
                                    for i, to in got)


def _hs_load(hyperscan, path: str, anchors: Optional[Tuple[bytes, ...]] = None, data: Optional[bytes] = None):
    try:
        if data is None:
            with open(path, "rb") as fh:
                data = fh.read()
        db = hyperscan.loadb(data, hyperscan.HS_MODE_BLOCK)
        db.scratch = hyperscan.Scratch(db)   # a compiled database has its own; a loaded one none
        if not _hs_probe(hyperscan, db, anchors):
            return None
        _set_glog_from(db, _anchors() if anchors is None else anchors)
        return db
    except Exception:  # noqa: BLE001 - none yet, another platform's, damaged: compile
        return None


def _set_glog_from(db, anchors: Tuple[bytes, ...]) -> None:
    """The id of the first GLOG_HEAD keyword (they stand last in ANCHORS): matches from it on are kept only on a glog
    E/F/W line (`_search`). None where they do not stand last (every match kept, as before round 22)."""
    n = len(GLOG_HEAD)
    _GLOG_FROM[id(db)] = len(anchors) - n if tuple(anchors[-n:]) == GLOG_HEAD else None


_GLOG_FROM: dict = {}   # id(database) -> its first GLOG_HEAD id (a hyperscan.Database takes no attribute of ours)


def _hs_load_src(hyperscan, path: str):
    """The database kept by `_hs_save(..., anchors)` at `path`, checked against the keywords kept with it, or None
    (none yet, damaged, or not one that finds its keywords)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    head = len(_HS_SRC_MAGIC) + 8
    if not data.startswith(_HS_SRC_MAGIC) or len(data) < head:
        return None
    n = struct.unpack_from("<Q", data, len(_HS_SRC_MAGIC))[0]
    anchors = tuple(data[head:head + n].split(b"\0"))
    if head + n > len(data) or not all(anchors):
        return None
    return _hs_load(hyperscan, path, anchors, data[head + n:])


def _hs_save(hyperscan, db, path: str, anchors: Optional[Tuple[bytes, ...]] = None) -> None:
    """Keep the database at `path`; with `anchors`, those keywords before it (`_hs_load_src`)."""
    from ..recache import write_cached

    try:
        data = hyperscan.dumpb(db)
    except Exception:  # noqa: BLE001 - a build that cannot serialise: compile next time too
        return
    if anchors is not None:
        blob = b"\0".join(anchors)
        data = _HS_SRC_MAGIC + struct.pack("<Q", len(blob)) + blob + data
    write_cached(path, data)   # a read-only folder: compile next time too


SCAN_BLOCK = 256 << 10   # bytes per Hyperscan call, each counted right after it (`_search`)


# Keywords that count only on a line opening with glog's level E, F or W and its date ("E1207 ", "[W1207 "): glog's and
# absl-Python's line heads name their source file (".cc:", ".py:"), and a glog-heavy log has one on every INFO line, each
# handed on for nothing (round 22: the cost measured in docs/measured/triage.md). The same tuple as
# ddpdoctor.facts.messages.GLOG_HEAD (tests/test_triage_round22_classes.py), kept here so that the search process need
# not import the catalogue; they stand last in ANCHORS.
GLOG_HEAD = (b".cc:", b".py:")
# ... and each is followed by the line number and glog's ']' ("file.cc:123] ", absl/logging/__init__.py's head; glog's
# LogMessage): a Python warning ("x.py:295: FutureWarning") or a traceback's frame is not a head. Searched as one
# expression with the keyword (`_hs_expressions`) so that Hyperscan reports no match on such a line at all: every match
# is a call into Python, and the ~80,000 warning lines of issue 24's 1 GiB log cost the search 0.4 s of CPU (round 22).
GLOG_TAIL = rb"\d{1,9}\]"
GLOG_TAIL_PROBE = b"1]"
# ... and glog's level E, F or W with its date comes before it on the line (the level `_glog_rx` checks; inside c10d's
# bracketed head "[W1207 ..." too), in the same expression: an INFO line's head ("I1207 ... file.cc:123] ") is then no
# match either, where before each one was a call into Python and a look back for its level (16.8x `grep -c` on round
# 22's glog-heavy 128 MiB log). Bounded (256 characters from the level to the keyword, no '^'): triage28's first form,
# '^' multi-line with an unbounded `[^\n]*`, made Hyperscan track every line from its start and cost issue 24's 1 GiB
# log 0.35 s more CPU (1.31x -> 1.81x wall of `grep -c`, the lead's bisection at round 23's end); bounded, the keyword is
# matched as a literal and its prefix verified behind it. The Python check stays behind it (`_glog_kept`), for a
# database compiled before this (loaded from an older cache name) and for a level letter inside a longer line.
GLOG_LEVEL = rb"[EFW]\d{4}(?:\d{4})? [^\n]{0,256}"   # (E1207 or the full-year F20220801)
GLOG_LEVEL_PROBE = b"E1207 "
_GLOG_RX: list = []


def _hs_expressions(anchors: Tuple[bytes, ...]) -> list:
    """The keywords as Hyperscan expressions: each byte outside [A-Za-z0-9_] written as a \\xHH escape (the literal
    itself), a GLOG_HEAD keyword followed by GLOG_TAIL."""
    out = []
    for a in anchors:
        lit = b"".join(bytes([c]) if (48 <= c <= 57 or 65 <= c <= 90 or 97 <= c <= 122 or c == 95) else b"\\x%02x" % c
                       for c in a)
        out.append(GLOG_LEVEL + lit + GLOG_TAIL if a in GLOG_HEAD else lit)
    return out


def _glog_rx():
    """(glog's E/F/W level opening a line, GLOG_TAIL after a GLOG_HEAD keyword), compiled on first use."""
    if not _GLOG_RX:
        import re

        from ..recache import own_patterns

        with own_patterns():
            _GLOG_RX.extend((re.compile(rb"\[?[EFW]\d{4}"), re.compile(GLOG_TAIL)))
    return _GLOG_RX[0], _GLOG_RX[1]


def _glog_kept(buf, ends: list, cut: int, base: int) -> list:
    """The match ends (relative to `base`) of GLOG_HEAD keywords whose line opens with glog's E/F/W level."""
    rx = _glog_rx()[0]
    out = []
    for to in ends:
        ls = buf.rfind(b"\n", base, base + to) + 1
        if ls == 0 and base:
            ls = base
        if rx.match(buf, max(ls, base), base + cut) is not None:
            out.append(to)
    return out


def _search(buf, cut: int, scratch=None, count=None, base: int = 0) -> Tuple[set, int]:
    """(the start offsets of the lines of buf[base:base + cut] that contain an anchor, relative to `base`; the newlines
    there, by `count(start, end)` over buf's own offsets, or 0 without one), with Hyperscan.

    The region is searched in blocks of about SCAN_BLOCK bytes, each cut after its last newline (no anchor holds one,
    tests/test_triage_reader.py: so no match spans two blocks and each is found once, as in one call over the region),
    and each block's newlines are counted right after its scan, while it is still in the core's cache. One Hyperscan
    call over a 4 MiB region and one count after it read the region from memory twice: on issue 24's 1 GiB log
    (mapped, this 2-core VM, 2 MiB L2 per core) 0.73-0.80 s of CPU against 0.37-0.40 s in 256 KiB blocks (128 KiB the
    same, 512 KiB 0.43 s; Hyperscan alone 0.55 s against 0.30 s), round 18. `scratch`: the calling thread's own
    Hyperscan scratch (two threads must never share one)."""
    db = _hyperscan()
    ends: list = []
    got: list = []
    glog: list = []
    hit = got.append
    glog_hit = glog.append
    first_glog = _GLOG_FROM.get(id(db))
    kw = {} if scratch is None else {"scratch": scratch}
    if first_glog is None:
        kw["match_event_handler"] = lambda _id, _frm, to, _fl, _ctx: hit(to)
    else:
        kw["match_event_handler"] = lambda _id, _frm, to, _fl, _ctx: hit(to) if _id < first_glog else glog_hit(to)
    counted = 0
    at = 0
    with memoryview(buf) as view:
        while at < cut:
            end = at + SCAN_BLOCK
            if end >= cut:
                end = cut
            else:
                nl = buf.rfind(b"\n", base + at, base + end)
                if nl < 0:   # a line longer than a block: to its end
                    nl = buf.find(b"\n", base + end, base + cut)
                end = cut if nl < 0 else nl - base + 1
            with view[base + at:base + end] as block:
                db.scan(block, **kw)
            if got:
                ends.extend(at + to for to in got)
                got.clear()
            if glog:
                ends.extend(_glog_kept(buf, [at + to for to in glog], cut, base))
                glog.clear()
            if count is not None:
                counted += count(base + at, base + end)
            at = end
    return _line_starts(buf, ends, cut, base), counted


def _line_starts(buf, ends: list, cut: int, base: int) -> set:
    """The start offsets (relative to `base`) of the lines of buf[base:base + cut] where the matches ending at `ends`
    (relative offsets) lie."""
    starts = set()
    last_le = -1
    for to in sorted(ends):
        if to <= last_le:
            continue  # another anchor on a line already taken
        ls = buf.rfind(b"\n", base, base + to)
        starts.add(ls + 1 - base if ls >= 0 else 0)
        last_le = buf.find(b"\n", base + to - 1, base + cut)
        last_le = last_le - base if last_le >= 0 else cut
    return starts


def _anchor_lines(buf: bytearray, find, cut: int, scratch=None, base: int = 0) -> set:
    """The start offsets of the lines of buf[0:cut] that contain an anchor. `scratch`: the calling
    thread's own Hyperscan scratch (two threads must never share one). `base`: the region is buf[base:base + cut]
    (a file mapped whole, `_Ahead`'s search process), and the offsets are relative to it; Hyperscan only there."""
    if _hyperscan() is not None:
        return _search(buf, cut, scratch, None, base)[0]
    if base:
        raise ValueError("a region inside a buffer is searched with Hyperscan only")
    starts = set()
    level, tail = _glog_rx()
    for needle in _anchors():
        glog = needle in GLOG_HEAD
        pos = find(needle, 0, cut)
        while pos >= 0:
            ls = buf.rfind(b"\n", 0, pos) + 1
            le = buf.find(b"\n", pos, cut)
            if le < 0:
                le = cut
            if not glog or (level.match(buf, ls, cut) is not None
                            and tail.match(buf, pos + len(needle), le) is not None):
                starts.add(ls)
            pos = find(needle, le, cut) if le < cut else -1
    return starts


LineSink = Callable[[int, int, bytes], None]  # (line number, byte offset, raw line without newline)

COUNT_BLOCK = 256 << 10  # numpy compares this much at a time into one reused array (a buffer's counter is used by
#                          one thread at a time: the one holding the buffer)
NUMPY_FROM = 256 << 20  # counting newlines with numpy pays for its import (~0.2 s) above this size
THREADS_FROM = 64 << 20  # below this a file is read in well under a second: no worker threads


def _counter(buf: bytearray, expected: int, block: int = COUNT_BLOCK, light: bool = False) -> Callable[[int, int], int]:
    """count(start, end) -> newlines in buf[start:end]. Counting every line of a big log is as slow as
    two keyword passes with bytes.count; numpy's vectorised compare is about 5x faster (and, unlike
    bytes.count, lets other threads run meanwhile). `block`: bytes compared per numpy call, into one reused
    array of that size (64 KiB-4 MiB measured within 10% of each other per byte; a thread searching ahead
    counts a region in one call, because each call hands the GIL back and forth). `light`: numpy's compiled
    core alone will do (`_numpy_core`: the search process, which uses numpy for nothing else)."""
    if expected >= NUMPY_FROM and os.environ.get("DDPDOCTOR_TRIAGE_NO_NUMPY") is None:
        try:
            core = _numpy_core() if light else None
            if core is None:
                import numpy as np

                core = (np.frombuffer, np.empty, np.equal, np.count_nonzero, np.dtype(np.uint8), np.dtype(np.bool_))
            frombuffer, empty, equal, count_nonzero, u8, bool_ = core
            arr = frombuffer(buf, dtype=u8)
            block = max(1, min(len(buf), block))
            flags = empty(block, dtype=bool_)   # reused: no chunk-sized temporary per call

            def count(start: int, end: int) -> int:
                n = 0
                for at in range(start, end, block):
                    upto = min(at + block, end)
                    n += int(count_nonzero(equal(arr[at:upto], 10, out=flags[:upto - at])))
                return n

            return count
        except Exception:  # noqa: BLE001 - no numpy, or a broken one: the plain count works
            pass
    if not hasattr(buf, "count"):   # a mapped file (mmap has no count): a copy of the span
        return lambda start, end: buf[start:end].count(b"\n")
    return lambda start, end: buf.count(b"\n", start, end)


_NP_CORE: list = []   # _numpy_core's answer, once found: [parts] or [None]
_NP_CORE_LOCK = threading.Lock()


def _numpy_core():
    """(frombuffer, empty, equal, count_nonzero, uint8 dtype, bool dtype) from numpy's compiled core
    (numpy._core._multiarray_umath) loaded without numpy's package, or None (numpy < 2, numpy already imported, any
    failure: the caller then imports numpy as usual, with the stand-ins taken out again).

    `import numpy` is the search process's largest fixed cost (issue 24, round 14: 70-130 ms of CPU of a ~0.8 s
    command on the 1 GiB benchmark; python -X importtime: numpy.lib, linalg, matrixlib, _typing, _add_newdocs...),
    and the newline count needs four functions of its core. Stand-in package modules named `numpy` and `numpy._core`
    (their real folders as `__path__`, nothing executed) let the core load alone (~18 ms; it imports the handful of
    small modules it needs itself); a probe count must then equal bytes.count before it is used. Only the search
    process (`_search_and_send`), which exits without running anything else, loads numpy this way: any other
    `import numpy` there would find the stand-in. DDPDOCTOR_TRIAGE_FULL_NUMPY=1 imports numpy whole."""
    with _NP_CORE_LOCK:
        if _NP_CORE:
            return _NP_CORE[0]
        import sys

        parts = None
        loaded = any(name == "numpy" or name.startswith("numpy.") for name in list(sys.modules))
        if not loaded and os.environ.get("DDPDOCTOR_TRIAGE_FULL_NUMPY") is None:
            before = set(sys.modules)
            try:
                import importlib
                import importlib.util
                import types

                spec = importlib.util.find_spec("numpy")
                folders = list(spec.submodule_search_locations or []) if spec is not None else []
                if folders and os.path.isdir(os.path.join(folders[0], "_core")):
                    for name, folder in (("numpy", folders[0]), ("numpy._core", os.path.join(folders[0], "_core"))):
                        stand_in = types.ModuleType(name)
                        stand_in.__path__ = [folder]
                        sys.modules[name] = stand_in
                    mu = importlib.import_module("numpy._core._multiarray_umath")
                    u8, bool_ = mu.asarray(memoryview(b"\n")).dtype, mu.dtype(bool)
                    probe = bytearray(b"a\n\nbc\n" * 5 + b"d")
                    flags = mu.empty(len(probe), dtype=bool_)
                    got = int(mu.count_nonzero(mu.equal(mu.frombuffer(probe, dtype=u8), 10, out=flags)))
                    if (u8.kind, u8.itemsize) == ("u", 1) and got == probe.count(b"\n"):
                        parts = (mu.frombuffer, mu.empty, mu.equal, mu.count_nonzero, u8, bool_)
            except Exception:  # noqa: BLE001 - another numpy layout, or none: numpy is imported as usual
                parts = None
            if parts is None:
                for name in set(sys.modules) - before:
                    del sys.modules[name]
        _NP_CORE.append(parts)
        return parts


SWITCH_AHEAD = 0.0005   # s: the interpreter's switch interval while a search ahead runs (default 0.005)
_SWITCH = [0, None]     # searches ahead running, the switch interval before the first


def _quick_switch(delta: int) -> bool:
    """Shorten the interpreter's switch interval while a file is searched ahead, and restore it after the last.

    A search thread needs the GIL between its C calls (read, Hyperscan, numpy); while the calling thread runs
    Python (importing the rules, parsing lines) it gets it back only when the interval forces a switch. At the
    default 5 ms the search ahead got through 28-83 of 256 regions of a 1 GiB log while the calling thread ran
    0.2 s of Python; at 0.5 ms, 125-175 (issue 24's profile, on the shared 2-core machine under load, with the
    reader thread the search had before). The calling thread loses little: a switch costs microseconds. DDPDOCTOR_TRIAGE_NO_SWITCH=1 leaves the interval alone. Returns whether it counted this one
    (only those are undone with -1)."""
    import sys

    if delta > 0:
        if os.environ.get("DDPDOCTOR_TRIAGE_NO_SWITCH") is not None:
            return False
        if _SWITCH[0] == 0:
            _SWITCH[1] = sys.getswitchinterval()
            sys.setswitchinterval(min(_SWITCH[1], SWITCH_AHEAD))
        _SWITCH[0] += 1
        return True
    if _SWITCH[0] > 0:
        _SWITCH[0] -= 1
        if _SWITCH[0] == 0 and _SWITCH[1] is not None:
            sys.setswitchinterval(_SWITCH[1])
    return False


def workers_for(expected: int) -> int:
    """How many threads search chunks while the calling thread reads the next ones: none for a small or
    unknown-size input, else up to 2 (the keyword scan and the newline count run without the GIL in
    Hyperscan and numpy; a third thread adds nothing on a log read from the page cache).
    DDPDOCTOR_TRIAGE_THREADS=N overrides it (0: everything in the calling thread)."""
    env = os.environ.get("DDPDOCTOR_TRIAGE_THREADS", "").strip()
    if env.isdigit():
        return min(int(env), 8)
    if expected < THREADS_FROM:
        return 0
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return 2 if cpus >= 2 else 0


def _line_cut(buf: bytearray, carry: int, end: int, n: int, chunk: int, base: int = 0) -> int:
    """Where a region read into buf[0:end] ends, so that no line is split between two regions: after the last
    newline of the `n` bytes just read (the `carry` bytes before them are the previous region's unfinished last
    line, which holds none). At `end` for the input's last bytes (`n == 0`) and for a line longer than a chunk
    (cut there); -1 to read more first (a short read ended inside a line). Every loop that cuts regions uses
    this one rule, so that their regions, and so the lines handed on, are the same. `base`: the region starts at
    buf[base] (a mapped file), the offsets stay relative to it."""
    if n == 0:
        return end
    nl = buf.rfind(b"\n", base + carry, base + end)
    if nl >= 0:
        return nl - base + 1
    return -1 if end < chunk else end


class _Now:
    """A finished result with the Future interface (the no-thread path)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def result(self):
        return self.value


def scan(stream: BinaryIO, on_line: LineSink, *, everything: bool = False, head_full: Optional[int] = None,
         chunk: Optional[int] = None, expected: int = 0, workers: Optional[int] = None) -> Tuple[int, int]:
    """Read `stream` once and call `on_line` for every line that may matter. Returns (bytes, lines).

    `everything=True` passes every line (tests, small inputs). `head_full`: the bytes parsed line by line
    whatever they hold; None reads HEAD_FULL when called (as api.py's job.head_bytes does), not when defined.
    `expected`: the size, when known.
    `workers`: threads that search chunks (the keyword scan and the newline count) while this thread
    reads the next chunks and hands on the lines in order; None chooses by `expected`. The lines
    handed on, their numbers and offsets are the same whatever the number of workers.

    Memory: buffers of `chunk` + MAX_LINE bytes, 2 * workers + 2 of them with workers, else 2."""
    if head_full is None:
        head_full = HEAD_FULL
    if workers is None:
        workers = 0 if everything else workers_for(expected)
    handed = [-1]   # offset of the last line handed on: the tail below hands on only what follows it
    user_sink = on_line
    # The lines of a regular file's last TAIL_BYTES are held back and handed on at the end, merged in file order with
    # the tail's lines (_tail): a keyword line at the very end ("Aborted (core dumped)") no longer hides the tail's
    # lines before it (a glog F-/E-line burst, an error line with no keyword), and every line still comes in order.
    tail_from = _tail_start(stream) if not everything else None
    held: List[Tuple[int, int, bytes]] = []

    def on_line(lineno: int, offset: int, raw: bytes) -> None:  # noqa: F811 - the same sink, remembering offsets
        if tail_from is not None and offset >= tail_from:
            held.append((lineno, offset, raw))
            return
        handed[0] = offset
        user_sink(lineno, offset, raw)

    ahead = None
    if workers and not everything:
        ahead = _ahead_for(stream, AHEAD_CHUNK if chunk is None else chunk, head_full, workers, expected)
    chunk = CHUNK if chunk is None else chunk
    if ahead is not None:
        try:
            total, lines = _consume_ahead(ahead, on_line, expected)
        finally:
            ahead.close()
        _tail(stream, total, lines, handed[0], user_sink, held)
        return total, lines

    nbuf = 2 * workers + 2 if workers else 2
    size = chunk + MAX_LINE
    bufs = [bytearray(size) for _ in range(nbuf)]
    views = [memoryview(b) for b in bufs]
    finds = [_finder(b) for b in bufs]
    counts = [_counter(b, expected) for b in bufs]
    pool = None
    if workers:
        import threading
        from concurrent.futures import ThreadPoolExecutor

        local = threading.local()
        db = _hyperscan()

        def scratch():
            sc = getattr(local, "scratch", None)
            if sc is None and db is not None:
                import hyperscan

                sc = local.scratch = hyperscan.Scratch(db)
            return sc

        def prefilter(slot: int, cut: int):
            if db is not None:   # scanned and counted block by block
                return _search(bufs[slot], cut, scratch(), counts[slot])
            return _anchor_lines(bufs[slot], finds[slot], cut), counts[slot](0, cut)

        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ddpdoctor-triage")
    pending = []  # (result, slot, cut) in file order, oldest first
    state = [1, 0, 0]  # line_base, off_base, window

    def consume() -> None:
        res, slot, cut = pending.pop(0)
        window, counted = _region(bufs[slot], finds[slot], counts[slot], cut, state[1], state[0], state[2],
                                  everything, head_full, on_line, res.result())
        state[0] += counted
        state[1] += cut
        state[2] = window

    def submit(slot: int, cut: int, at: int) -> None:
        """`at`: the region's offset in the input, known when it is read (the regions before it need not be
        consumed yet, so the workers search ahead while this thread walks the head line by line)."""
        if pool is None or everything or at < head_full:
            # head and everything-mode regions are walked line by line: nothing to search ahead of them
            pending.append((_Now(None), slot, cut))
            if pool is None:
                consume()
        else:
            pending.append((pool.submit(prefilter, slot, cut), slot, cut))

    carry = 0
    total = 0
    read_off = 0  # the input offset of the region read next
    i = 0  # the chunk being read goes into bufs[i % nbuf]
    try:
        while True:
            slot = i % nbuf
            buf, view = bufs[slot], views[slot]
            n = stream.readinto(view[carry:carry + chunk]) or 0
            total += n
            end = carry + n
            if end == 0:
                break
            cut = _line_cut(buf, carry, end, n, chunk)
            if cut < 0:
                carry = end  # keep reading: a partial line
                continue
            submit(slot, cut, read_off)
            read_off += cut
            rest = end - cut
            i += 1
            while len(pending) >= nbuf - 1:
                consume()  # the slot read next must not be in flight
            if rest:
                nxt = (i % nbuf)
                bufs[nxt][0:rest] = view[cut:end]
            carry = rest
            if n == 0:
                break
        while pending:
            consume()
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        for v in views:
            v.release()
    lines = state[0] - 1
    if not everything:
        _tail(stream, total, lines, handed[0], user_sink, held)
    return total, lines


def _tail_start(stream: BinaryIO) -> Optional[int]:
    """The offset where a regular file's last TAIL_BYTES begin (its size known before the read), else None (standard
    input, a pipe, a .gz: their tail is read as before, after the last line handed on)."""
    try:
        st = os.fstat(stream.fileno())
        if not stat.S_ISREG(st.st_mode) or _gzipped(stream) or stream.tell() != 0:
            return None
    except (OSError, AttributeError, ValueError, io.UnsupportedOperation):
        return None
    return max(0, st.st_size - TAIL_BYTES)


TAIL_BYTES = 16 << 10
TAIL_LINES = 40


def _tail(stream: BinaryIO, total: int, lines: int, after: int, on_line: LineSink,
          held: Optional[List[Tuple[int, int, bytes]]] = None) -> None:
    """Hand on the file's last lines (up to TAIL_LINES within its last TAIL_BYTES) that follow the last line
    handed on: whether a log ends mid-training or with its job's end is read from them, whatever their
    keywords. Only for a regular file, which can seek back there cheaply; standard input and .gz are not.
    `held`: the lines of the last TAIL_BYTES that the scan found (keywords, windows, the head) and held back
    (scan's tail_from): handed on here with the tail's lines, in file order, each once."""
    if held:
        merged = {off: (no, off, raw) for no, off, raw in held}
        rows = _tail_rows(stream, total, lines)
        for no, off, raw in rows[-TAIL_LINES:]:
            if off > after and off not in merged:
                merged[off] = (no, off, raw[:MAX_LINE])
        for off in sorted(merged):
            on_line(*merged[off])
        return
    for no, off, raw in _tail_rows(stream, total, lines)[-TAIL_LINES:]:
        if off > after:
            on_line(no, off, raw[:MAX_LINE])


def _tail_rows(stream: BinaryIO, total: int, lines: int) -> List[Tuple[int, int, bytes]]:
    """(line number, offset, bytes) of each line in the file's last TAIL_BYTES (the first, cut, left out); [] where
    the file cannot be read back (standard input, .gz)."""
    try:
        fd = stream.fileno()
        if not stat.S_ISREG(os.fstat(fd).st_mode) or _gzipped(stream):
            return []
        start = max(0, total - TAIL_BYTES)
        data = os.pread(fd, total - start, start)
    except (OSError, AttributeError, ValueError, io.UnsupportedOperation):
        return []
    if start > 0:
        nl = data.find(b"\n")
        if nl < 0:
            return []
        start += nl + 1
        data = data[nl + 1:]
    if not data:
        return []
    ends_nl = data.endswith(b"\n")
    parts = data.split(b"\n")
    if ends_nl:
        parts.pop()
    last_no = lines if ends_nl else lines + 1
    first_no = last_no - len(parts) + 1
    rows, off = [], start
    for i, raw in enumerate(parts):
        rows.append((first_no + i, off, raw))
        off += len(raw) + 1
    return rows


def _region(buf: bytearray, find, count, cut: int, off_base: int, line_base: int, window: int, everything: bool,
            head_full: int, on_line: LineSink, found: Optional[Tuple[set, int]] = None) -> Tuple[int, int]:
    """Hand on the lines of buf[0:cut] that match an anchor (or fall in a window). Returns the window
    still open at the end and the number of newlines in the region. `found`: the anchor line starts and
    the newline count of buf[0:cut], when a worker thread already computed them."""
    if everything or off_base < head_full:
        limit = cut if everything else min(cut, head_full - off_base)
        starts = None  # every line up to `limit`
    else:
        limit = 0
        starts = _anchor_lines(buf, find, cut) if found is None else found[0]
        if not starts and not window:
            return 0, count(0, cut) if found is None else found[1]
    pos = 0
    line = line_base
    todo = sorted(starts) if starts else []
    ti = 0
    while pos < cut:
        if starts is None:
            if pos >= limit and not window:
                # the rest of the region is past the head: continue in anchor mode
                rest_window, rest_count = _region_from(buf, find, pos, cut, off_base, line, on_line)
                return rest_window, (line - line_base) + rest_count
            take = True
        elif window:
            take = True
        else:
            while ti < len(todo) and todo[ti] < pos:
                ti += 1
            if ti >= len(todo):
                break
            nxt = todo[ti]
            if found is not None and cut - nxt < nxt - pos:
                # the region's newlines are known (found[1]) and those before pos are line - line_base: count the
                # shorter side (a failure at a region's end: ~4 MiB of bytes.count, ~20 M instructions, avoided)
                line = line_base + found[1] - count(nxt, cut)
            else:
                line += count(pos, nxt)
            pos = nxt
            take = True
        le = buf.find(b"\n", pos, cut)
        if le < 0:
            le = cut
        if take:
            raw = bytes(buf[pos:min(le, pos + MAX_LINE)])
            on_line(line, off_base + pos, raw)
            if window:
                window -= 1
            if _opener_gate().search(raw) is not None:   # most lines open none: one search, not ~13 `in` tests
                for opener, span in WINDOW_OPENERS.items():
                    if raw.find(opener) >= 0:   # = `opener in raw`, without the TypeError `in` makes and drops first
                        window = max(window, span)
            if raw.rstrip().endswith((b"Error:", b"Exception:")):
                window = max(window, 12)  # a multi-line message follows (RuntimeError: \n  An attempt ...)
        pos = le + 1
        line += 1
    if pos < cut:
        if found is not None:
            return window, found[1]   # the newlines of buf[0:cut], counted where it was searched
        line += count(pos, cut)
    return window, line - line_base


def _region_from(buf, find, start: int, cut: int, off_base: int, line: int, on_line: LineSink) -> Tuple[int, int]:
    """Anchor mode for buf[start:cut] (the part of the first chunk after the head)."""
    sub = bytearray(buf[start:cut])
    return _region(sub, _finder(sub), lambda a, b: sub.count(b"\n", a, b), len(sub), off_base + start, line, 0,
                   False, 0, on_line)


# ------------------------------------------------------------------ a regular file, searched ahead

AHEAD_CHUNK = 4 << 20   # per region: 2 MiB, 8 MiB and 16 MiB cost 3-9% more CPU on 1 GiB (1 MiB: 10% more)
AHEAD_HELD = 1 << 18     # anchor line starts kept for regions not handed on yet (a few MiB at most)
AHEAD_REGIONS = 4096     # regions searched but not handed on yet (their results are a few bytes each)
_HEAD = ("head",)        # a region of the head: walked line by line, nothing to search ahead of it
_AHEAD_OK = hasattr(os, "preadv") and hasattr(os, "pread")   # not on Windows: the loop below reads there
_PREFETCHED: dict = {}   # (st_dev, st_ino) -> _Ahead started by prefetch(), taken by scan()


class _Ahead:
    """A regular file searched ahead of the thread that hands its lines on.

    Each worker thread reads the next region itself (pread into its own buffer, up to `chunk` bytes cut after
    the last newline: the regions of `scan`'s loop, by the same `_line_cut`) and searches it (Hyperscan, newline
    count). The reads take turns under a lock, the searches run side by side. Only the region's result (its
    anchor line starts and newline count) is kept, so the search can run far ahead (bounded by AHEAD_HELD and
    AHEAD_REGIONS) while the calling thread is busy elsewhere, e.g. importing the rules. The consumer re-reads
    (pread) only the regions it must walk: the head and those with a hit or an open window, a few in a long log.
    The lines handed on are those of `scan`'s other paths; the file is read twice only where it has hits.

    Why no reader thread and no mmap (issue 24's profile, 1 GiB, this 2-core VM): the search needs the GIL
    between its C calls, and a thread that wants it back while the calling thread runs Python (the rules'
    imports) waits up to the switch interval (5 ms). A separate reader thread, a numpy count in 256 KiB blocks
    and the queues between them made ~40 such hand-overs per 4 MiB region (counted from the code), and the search
    ahead got through a fifth of the file during 0.2 s of Python (_quick_switch); now a region costs about 5
    (read, search, the count's two numpy calls, the result). In this process the file is read, never mapped: a log
    truncated while mapped (logrotate's copytruncate) kills the process that maps it with SIGBUS. The search process
    (`_AheadProcess`) maps it (`mapped`, `_map`): its death is survived, and the search there then skips the copy
    (issue 24, round 13: 1 GiB searched single-threaded, 6 runs each, medians 0.50-0.51 s CPU mapped against 0.53-0.55 s
    read; the faults cost less than the copy on this kernel, 6.18, where round 4 measured them even)."""

    def __init__(self, fd: int, chunk: int, head_full: int, workers: int, expected: int,
                 start: Tuple[int, int] = (0, 0), mapped: bool = False):
        """`start`: the offset of the first region and the bytes of an unfinished line read before it (0, 0: the
        file's start; elsewhere, where a search process that died left off, so that the regions are cut as there).
        `mapped`: search the file through a read-only mapping of it instead of reading it into buffers (only in the
        search process, `_search_and_send`: see `_map`), and count its newlines with numpy's core alone (`_numpy_core`)."""
        self.fd, self.chunk, self.head_full, self.expected = fd, chunk, head_full, expected
        self.cv = threading.Condition()
        self.regions: list = []   # [offset, cut, result]: result None until searched, _HEAD, or (starts, count)
        self.finished = False     # every worker has ended: no region will be added or searched
        self.error: Optional[BaseException] = None
        self.stopped = False
        self.held = 0
        self.taken = 0            # regions handed to the consumer
        self.read_lock = threading.Lock()   # one worker at a time cuts the next region (reads it)
        self.next_off = start[0]  # where the next region starts
        self.carry = start[1]     # bytes of an unfinished line there, read again with the next region
        self.carry_after = 0      # `carry` after the region results() handed out last
        self.eof = False
        self.live = workers
        db = _hyperscan()
        self.light = mapped   # the search process: numpy's core alone (_numpy_core)
        self.mm = _map(fd) if mapped and db is not None else None
        self.threads = [threading.Thread(target=self._work, args=(db,), name="ddpdoctor-triage-search",
                                         daemon=True) for _ in range(workers)]
        self.switched = _quick_switch(+1)
        for t in self.threads:
            t.start()

    def _fail(self, exc: BaseException) -> None:
        with self.cv:
            if self.error is None:
                self.error = exc
            self.stopped = True
            self.cv.notify_all()

    def _work(self, db) -> None:
        try:
            import hyperscan

            scratch = hyperscan.Scratch(db)
            buf = bytearray(self.chunk + MAX_LINE)
            count = _counter(buf, self.expected, block=len(buf), light=self.light)   # one numpy call per block (_search)
            mm = self.mm
            mcount = None if mm is None else _counter(mm, self.expected, block=len(buf), light=self.light)
            while True:
                got = self._next_region(buf)
                if got is None:
                    return
                idx, cut, base = got
                if idx < 0:
                    continue   # a region of the head: the consumer walks it line by line
                if base < 0:
                    starts, counted = _search(buf, cut, scratch, count)
                else:   # the region is mm[base:base + cut]
                    _populate_pages(mm, base, cut)
                    starts, counted = _search(mm, cut, scratch, mcount, base=base)
                    _unmap_pages(mm, base, cut)
                with self.cv:
                    self.regions[idx][2] = (starts, counted)
                    self.held += len(starts)
                    self.cv.notify_all()
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, raised there
            self._fail(exc)
        finally:
            with self.cv:
                self.live -= 1
                if self.live <= 0:
                    self.finished = True
                self.cv.notify_all()

    def _next_region(self, buf: bytearray) -> Optional[Tuple[int, int, int]]:
        """Read the next region into buf[0:cut]: (its index, cut, -1), the index negative for a region of the head;
        (index, cut, offset) for a region that lies whole in the mapping (`self.mm[offset:offset + cut]`, not read);
        None at the end of the file or once stopped."""
        with self.read_lock:
            with self.cv:
                while not self.stopped and (self.held > AHEAD_HELD or len(self.regions) - self.taken > AHEAD_REGIONS):
                    self.cv.wait(0.5)
                if self.stopped or self.eof:
                    return None
            off, carry = self.next_off, self.carry
            base = -1
            new = min(self.chunk, len(buf) - carry)   # the bytes the read below asks for after the unfinished line
            if off < self.head_full:
                # a region of the head ends within MAX_LINE past it: the consumer walks a head region itself (its
                # lines one by one, then the rest through a copy, Hyperscan and bytes.count), so the rest of a whole
                # chunk there cost the command ~60 M instructions of 1.3 G (callgrind, issue 24's log, round 14)
                # that the search here does at a fraction (a short read without a newline reads a chunk, as below)
                new = min(new, self.head_full - off + MAX_LINE)
            if self.mm is not None and off >= self.head_full and off + carry + new <= len(self.mm):
                # what the read would return, in place: the same region, cut by the same rule (a region that reaches
                # the mapping's end, the file's last, is read as below, so that its end is found as there)
                base, n = off, new
                end = carry + n
                cut = _line_cut(self.mm, carry, end, n, self.chunk, base=off)
            while base < 0:
                # the unfinished line's bytes are read again with up to `chunk` new ones (`new` in the head): the
                # buffer `scan`'s loop would hold (it keeps them in memory), so that the regions are cut at the same places
                with memoryview(buf) as view, view[:carry + new] as into:
                    got = os.preadv(self.fd, [into], off)
                n = max(0, got - carry)
                end = carry + n if got >= carry else got   # less than before: the file shrank under us
                if end == 0:
                    self.eof = True
                    return None
                cut = _line_cut(buf, carry, end, n, self.chunk)
                if cut >= 0:
                    break
                carry = end   # keep reading: a partial line
                new = min(self.chunk, len(buf) - carry)
            head = off < self.head_full
            with self.cv:
                idx = len(self.regions)
                self.regions.append([off, cut, _HEAD if head else None, end - cut])
                self.cv.notify_all()
            self.next_off, self.carry = off + cut, end - cut
            if n == 0:
                self.eof = True
            return (-1 - idx if head else idx), cut, base

    def results(self):
        """(offset, cut, result) of each region in file order, as soon as it is searched."""
        i = 0
        while True:
            with self.cv:
                while self.error is None and not (i < len(self.regions) and self.regions[i][2] is not None):
                    if self.finished and i >= len(self.regions):
                        return
                    self.cv.wait(0.5)
                if self.error is not None:
                    raise self.error
                off, cut, res, self.carry_after = self.regions[i]
                self.regions[i] = None
                self.taken = i + 1
                if res is not _HEAD:
                    self.held -= len(res[0])
                self.cv.notify_all()
            yield off, cut, res
            i += 1

    def close(self) -> None:
        """Stop the threads (a consumer that failed, or a file never scanned) and close the file."""
        with self.cv:
            self.stopped = True
            self.cv.notify_all()
        for t in self.threads:
            t.join(timeout=5)
        if self.mm is not None:
            try:
                self.mm.close()
            except BufferError:   # a worker that did not end still holds a view of it: the process's end unmaps it
                pass
            self.mm = None
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
            if self.switched:
                self.switched = _quick_switch(-1)


# a search process's record: offset, cut, newline count (or a marker), number of anchor line starts (which follow),
# the unfinished line's bytes after the region (where a search of the rest would start: `_Ahead`'s `start`)
_REC = struct.Struct("<qqqqq")
_REC_HEAD, _REC_END = -1, -2


class _Ended(Exception):
    """The search process's pipe closed before its end record."""


class _AheadProcess:
    """The search ahead of a big file (`_Ahead`, its reads, keyword search and newline counts) in a forked copy of
    this process, which sends each region's result (offset, cut, newline count, anchor line starts) through a pipe.

    Why a process: the search's threads share the GIL with the calling thread, and the start of `ddpdoctor triage`
    is GIL-bound: the calling thread imports the CLI and the rules (~90 ms of Python) while a worker imports numpy
    (~70 ms), and the workers wait for it before their first search (issue 24's timeline: first search at
    170-180 ms, workers started at 25 ms). In a process of its own the search, numpy's import included, runs on
    the other core from the start, and never waits for the calling thread's Python. The same regions and results
    as `_Ahead` in this process (it is `_Ahead`, run there). Only forked while this process runs no other thread
    (`prefetch`, before the CLI starts any); the copy never returns from this call (os._exit), writes nothing but
    its records, and is reaped by `close`, so its CPU time is this process's children's."""

    def __init__(self, fd: int, chunk: int, head_full: int, workers: int, expected: int,
                 started: Optional[Tuple[int, int]] = None):
        """`started`: (pid, read end of its pipe) of a search process ddpdoctor.start forked already (`adopt`)."""
        self.fd, self.chunk, self.head_full, self.expected = fd, chunk, head_full, expected
        self.threads = [None] * workers   # the size _ahead_for compares
        self.pid = 0
        self.resumed: Optional[Tuple[int, int]] = None   # where this process took the search over, if it had to
        if started is not None:
            self.pid, self.rfd = started
            return
        self.rfd, wfd = os.pipe()
        try:
            self._start(wfd)
        except BaseException:
            os.close(self.rfd)
            self.rfd = -1
            raise

    def _start(self, wfd: int) -> None:
        """Fork the search process, which writes its records into `wfd` (tests run `_search_and_send` in a thread
        instead: a fast test starts no process)."""
        try:
            pid = os.fork()
        except BaseException:
            os.close(wfd)
            raise
        if pid == 0:   # the search process: never returns
            code = 1
            try:
                os.close(self.rfd)
                _search_and_send(self.fd, wfd, self.chunk, self.head_full, len(self.threads), self.expected)
                code = 0
            finally:
                os._exit(code)   # no atexit handler, no flush of the parent's buffers
        os.close(wfd)
        self.pid = pid

    def _read(self, n: int) -> bytes:
        parts, got = [], 0
        while got < n:
            part = os.read(self.rfd, n - got)
            if not part:
                raise _Ended()
            parts.append(part)
            got += len(part)
        return b"".join(parts)

    def results(self):
        """(offset, cut, result) of each region in file order, as the search process sends them. Should it die
        before the end (killed, out of memory), the rest of the file is searched here, from the region after the
        last one received, cut as it would have been."""
        rec = _REC
        resume = (0, 0)
        while True:
            try:
                off, cut, counted, n, carry = rec.unpack(self._read(rec.size))
                if counted == _REC_END:
                    return
                starts = array("q")
                if n:
                    starts.frombytes(self._read(8 * n))
            except _Ended:
                break
            resume = (off + cut, carry)
            yield off, cut, (_HEAD if counted == _REC_HEAD else (set(starts), counted))
        self.resumed = resume
        here = _Ahead(os.dup(self.fd), self.chunk, self.head_full, len(self.threads), self.expected, start=resume)
        try:
            yield from here.results()
        finally:
            here.close()

    def close(self) -> None:
        """Stop the search process (if it still runs) and reap it; close the file."""
        if self.rfd >= 0:
            os.close(self.rfd)
            self.rfd = -1
        if self.pid:
            import signal

            try:
                if os.waitpid(self.pid, os.WNOHANG)[0] == 0:
                    os.kill(self.pid, signal.SIGKILL)
                    os.waitpid(self.pid, 0)
            except (ChildProcessError, ProcessLookupError):
                pass
            self.pid = 0
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _search_and_send(fd: int, wfd: int, chunk: int, head_full: int, workers: int, expected: int) -> None:
    """In the search process: run `_Ahead` over the file and write each region's result as it comes, then the end."""
    rec = _REC
    ahead = _Ahead(fd, chunk, head_full, workers, expected, mapped=True)
    try:
        for off, cut, res in ahead.results():
            if res is _HEAD:
                data = rec.pack(off, cut, _REC_HEAD, 0, ahead.carry_after)
            else:
                starts, counted = res
                data = rec.pack(off, cut, counted, len(starts), ahead.carry_after) \
                    + array("q", sorted(starts)).tobytes()
            with memoryview(data) as view:
                at = 0
                while at < len(data):
                    at += os.write(wfd, view[at:])
        os.write(wfd, rec.pack(0, 0, _REC_END, 0, 0))
    finally:
        ahead.close()


def search_process(fd: int, wfd: int, expected: int) -> None:
    """The search process ddpdoctor.start forks before it imports the package (`ddpdoctor.start.fork_search`): what
    prefetch's fork runs (`_search_and_send`), with prefetch's regions and workers; nothing (its pipe closes) where
    prefetch would not have searched this file in a process: the command then stops it (`adopt`)."""
    workers = workers_for(expected)
    if workers and _AHEAD_OK and _hyperscan() is not None:
        _search_and_send(fd, wfd, AHEAD_CHUNK, HEAD_FULL, workers, expected)


def adopt(path: str, fd: int, rfd: int, pid: int, st) -> bool:
    """Take over the search process ddpdoctor.start forked for `path` (opened as `fd`, `st` its os.stat then; `rfd`
    the read end of its pipe): scan() then uses it as one prefetch started. Stopped instead (and False) where prefetch
    would not search this file in a process: too small for this reader, no Hyperscan, DDPDOCTOR_TRIAGE_NO_AHEAD, or
    one is searched already. `pid` 0: no process (tests run `_search_and_send` in a thread)."""
    workers = workers_for(st.st_size)
    started = _AheadProcess(fd, AHEAD_CHUNK, HEAD_FULL, workers, st.st_size, started=(pid, rfd))
    key = (st.st_dev, st.st_ino)
    if not workers or not _AHEAD_OK or os.environ.get("DDPDOCTOR_TRIAGE_NO_AHEAD") is not None \
            or _hyperscan() is None or key in _PREFETCHED or any(isinstance(a, _AheadProcess) for a in _PREFETCHED.values()):
        started.close()
        return False
    if not _PREFETCHED:
        import atexit

        atexit.register(_drop_prefetched)
    _PREFETCHED[key] = started
    return True


def _map(fd: int):
    """A read-only mapping of the whole file, or None (empty, not mappable, DDPDOCTOR_TRIAGE_NO_MAP=1).

    Only the search process maps (`_search_and_send`): Hyperscan and the newline count then read the page cache in
    place, where reading each region into a buffer first copied the whole file (the kernel's copy was ~15% of the
    command's CPU samples on issue 24's 1 GiB log, perf record -e cpu-clock). A file truncated while mapped ends the
    process that maps it on SIGBUS: that is the search process, never the command, which then searches the rest
    itself from the last region it received (`_AheadProcess.results`), as for a search process killed any other way."""
    if os.environ.get("DDPDOCTOR_TRIAGE_NO_MAP") is not None:
        return None
    try:
        import mmap

        size = os.fstat(fd).st_size
        if size <= 0:
            return None
        return mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
    except (OSError, ValueError, AttributeError, ImportError):
        return None


def _unmap_pages(mm, base: int, cut: int) -> None:
    """Take the pages of a searched region out of this process's mapping (MADV_DONTNEED; the page cache keeps them), so
    that its resident size stays a few regions, not the whole file (issue 24's goal: peak RSS <= 100 MiB; a mapping
    searched whole counted 1 GiB of file pages as resident). An edge page shared with the next region, still being
    searched by the other thread, is read again from the page cache there if it needs it: same bytes."""
    try:
        import mmap

        page = mmap.PAGESIZE
        start = base - base % page
        if base + cut > start:
            mm.madvise(mmap.MADV_DONTNEED, start, base + cut - start)
    except (AttributeError, OSError, ValueError):
        pass


MADV_POPULATE_READ = 22   # Linux 5.14's uapi asm-generic/mman-common.h (Python 3.11's mmap does not name it)
_POPULATE: list = []      # [False] once the kernel refused it (older than 5.14): not asked again


def _populate_pages(mm, base: int, cut: int) -> None:
    """Map the pages of a region about to be searched in one call (MADV_POPULATE_READ), instead of one page fault
    per 64 KiB the scan takes in them (the kernel's fault-around): on issue 24's 1 GiB log, the search's CPU 0.43-0.44 s
    against 0.48-0.51 s faulting (round 18, this VM, 6.18 kernel). The same pages end up mapped, and `_unmap_pages`
    takes them out after the search: the resident size is the same. A kernel without it (EINVAL) faults as before.
    Python's madvise holds the GIL, so where the file is not in the page cache the reads it starts wait with the GIL
    held, where the scan's faults waited without it: the 1 GiB log evicted from the cache before each run (4 alternated
    runs each, same minutes), wall 1.0-1.6 s against 1.1-2.4 s without the call: no loss seen at this noise."""
    if _POPULATE:
        return
    try:
        import mmap

        page = mmap.PAGESIZE
        start = base - base % page
        if base + cut > start:
            mm.madvise(getattr(mmap, "MADV_POPULATE_READ", MADV_POPULATE_READ), start, base + cut - start)
    except (AttributeError, OSError, ValueError):
        _POPULATE.append(False)


def _fork_ok() -> bool:
    """Whether prefetch may search in a forked process: on Linux, with no other thread running in this one (a fork
    copies only the calling thread: a lock another thread holds would stay held in the copy), one such process at
    a time (each holds its own numpy and buffers, ~45 MiB: the command's other big files are searched by threads
    here), unless DDPDOCTOR_TRIAGE_NO_FORK=1."""
    import sys
    import threading

    return sys.platform.startswith("linux") and hasattr(os, "fork") and threading.active_count() == 1 \
        and os.environ.get("DDPDOCTOR_TRIAGE_NO_FORK") is None \
        and not any(isinstance(a, _AheadProcess) for a in _PREFETCHED.values())


def _ahead_for(stream: BinaryIO, chunk: int, head_full: int, workers: int, expected: int) -> Optional[_Ahead]:
    """An _Ahead for `stream` when it is a regular file read from its start (the one prefetch() started for
    it, or a new one), with Hyperscan; None for standard input, .gz, or without Hyperscan."""
    if not _AHEAD_OK or os.environ.get("DDPDOCTOR_TRIAGE_NO_AHEAD") is not None or _gzipped(stream):
        return None
    try:
        fd = stream.fileno()
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or stream.tell() != 0:
            return None
    except (OSError, AttributeError, ValueError, io.UnsupportedOperation):
        return None
    started = _PREFETCHED.pop((st.st_dev, st.st_ino), None)
    if started is not None:
        if (started.chunk, started.head_full, started.expected) == (chunk, head_full, expected) \
                and len(started.threads) == workers:
            return started
        started.close()
    if _hyperscan() is None:
        return None
    return _Ahead(os.dup(fd), chunk, head_full, workers, expected)


def _consume_ahead(ahead: _Ahead, on_line: LineSink, expected: int) -> Tuple[int, int]:
    """Hand on the lines of the regions `ahead` searched, in file order. Returns (bytes, lines)."""
    line_base, window, total = 1, 0, 0
    walk = None   # (buffer, find, count): made when the first region must be walked
    for off, cut, res in ahead.results():
        total = off + cut
        if res is not _HEAD and not res[0] and not window:
            line_base += res[1]
            continue
        if walk is None:
            buf = bytearray(ahead.chunk + MAX_LINE)
            # with the search in another process this one counts only the spans it walks: bytes.count, no numpy import
            walk = (buf, _finder(buf), _counter(buf, 0 if isinstance(ahead, _AheadProcess) else expected))
        buf, find, count = walk
        with memoryview(buf) as view, view[:cut] as into:
            got = os.preadv(ahead.fd, [into], off)
        found = None if res is _HEAD or got != cut else res   # a file changed under us: search it again
        window, counted = _region(buf, find, count, got, off, line_base, window, False, ahead.head_full,
                                  on_line, found)
        line_base += counted
    return total, line_base - 1


def prefetch(paths: List[str]) -> None:
    """Start searching the big regular files among `paths` ahead, before the caller imports its rules (about
    0.1 s of start-up that the search then overlaps on a second core); scan() takes the search over when it
    reads the file. Does nothing for small files, folders, .gz, standard input, or without Hyperscan."""
    if not _AHEAD_OK or os.environ.get("DDPDOCTOR_TRIAGE_NO_AHEAD") is not None:
        return
    for path in paths:
        try:
            st = os.stat(path)
            if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) in _PREFETCHED:
                continue
            workers = workers_for(st.st_size)
            if not workers:
                continue
            fd = os.open(path, os.O_RDONLY)
        except (OSError, ValueError):
            continue
        try:
            if os.pread(fd, 2, 0) == b"\x1f\x8b" or _hyperscan() is None:
                os.close(fd)
                continue
            if not _PREFETCHED:
                import atexit

                atexit.register(_drop_prefetched)
            started = None
            if _fork_ok():
                try:
                    started = _AheadProcess(fd, AHEAD_CHUNK, HEAD_FULL, workers, st.st_size)
                except OSError:   # no fork (EAGAIN, ENOMEM): the threads of this process search instead
                    started = None
            if started is None:
                started = _Ahead(fd, AHEAD_CHUNK, HEAD_FULL, workers, st.st_size)
            _PREFETCHED[(st.st_dev, st.st_ino)] = started
        except Exception:  # noqa: BLE001 - a prefetch that cannot start leaves scan() to read as usual
            os.close(fd)


def _drop_prefetched() -> None:
    """Stop the searches of files that were never scanned (a file found to be binary, a command that failed)."""
    while _PREFETCHED:
        _PREFETCHED.popitem()[1].close()
