"""The compiled code of regular expressions, kept between runs: `ddpdoctor triage` starts without parsing its patterns.

`ddpdoctor triage` compiles ~200 regular expressions (the rules, the line parser, the catalogue's fields) before it
reads a line. `re` parses each pattern and generates its matcher code in Python: on issue 24's profile that was ~0.1 s
of the command's ~0.17 s of start-up CPU (144 patterns at import, measured by wrapping re._compiler.compile). The code
`re` generates depends only on the pattern, its flags and the interpreter, so it is kept in a file of the user's cache
folder, keyed by those, and handed to `_sre.compile` (C) on the next run; what that builds is the Pattern that
re.compile would have built from the same arguments. What is stored is exactly what `re._compiler.compile` passed to
`_sre.compile` (recorded through a stand-in for its `_sre`), so nothing of `re`'s internals is re-implemented here.

- The file: `$DDPDOCTOR_CACHE_DIR`, else `$XDG_CACHE_HOME/ddpdoctor`, else `~/.cache/ddpdoctor`, named by the
  interpreter (cache tag, version, `_sre.MAGIC`, `_sre.CODESIZE`), read with `marshal` (no code runs from it). It is
  written once at exit when the run compiled patterns it did not hold (a temporary file, then an atomic rename), up to
  `MAX_ENTRIES` patterns.
- Anything wrong (no file, a file of another interpreter, a damaged or foreign one, a read-only folder, an entry
  `_sre.compile` rejects: CPython validates the code it is given) falls back to `re`'s own compile for that pattern, or
  to no cache at all. `DDPDOCTOR_NO_RE_CACHE=1` turns it off; it is only installed on CPython.
- Installed by `ddpdoctor.start` for the triage command only (the command issue 24 times); other commands compile as
  before. `cache_dir()` is also where the triage reader keeps its Hyperscan database (ddpdoctor.triage.reader).
  This module imports nothing of the package (it sits in the bottom layer, so the reader may use its folder).
"""
from __future__ import annotations

import os
import sys
from typing import Dict, Optional, Tuple

MAX_ENTRIES = 4096   # patterns kept (triage compiles ~200; the bound keeps a file that grows from odd inputs small)

_STATE: Dict[str, object] = {"installed": False, "path": None, "cache": None, "new": 0, "hits": 0, "undo": None,
                             "recording": False}


def cache_dir() -> str:
    """The user's cache folder for ddpdoctor."""
    d = os.environ.get("DDPDOCTOR_CACHE_DIR")
    if d:
        return d
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "ddpdoctor")


def cache_file() -> Optional[str]:
    """The cache file of this interpreter, or None where there is no `_sre` to key it by."""
    try:
        import _sre
    except ImportError:
        return None
    tag = sys.implementation.cache_tag or "none"
    return os.path.join(cache_dir(), f"re-{tag}-{sys.hexversion:x}-{_sre.MAGIC}-{_sre.CODESIZE}.marshal")


def _load(path: str) -> dict:
    import marshal

    try:
        with open(path, "rb") as fh:
            data = marshal.loads(fh.read())
    except (OSError, EOFError, ValueError, TypeError):
        return {}
    if not isinstance(data, dict):
        return {}
    return data


class _SreRecorder:
    """Stands in for `_sre` inside `re._compiler`: records the arguments of `compile` (per thread), passes the rest."""

    def __init__(self, real):
        import threading

        self._real = real
        self._local = threading.local()

    def __getattr__(self, name):
        return getattr(self._real, name)

    def compile(self, pattern, *args):
        self._local.args = args
        return self._real.compile(pattern, *args)

    def take(self) -> Optional[tuple]:
        args = getattr(self._local, "args", None)
        self._local.args = None
        return args


def install() -> bool:
    """Serve `re`'s compiles from the cache file from now on, and save the new ones at exit. Returns whether it is on."""
    if _STATE["installed"]:
        return True
    if os.environ.get("DDPDOCTOR_NO_RE_CACHE") or sys.implementation.name != "cpython":
        return False
    try:
        import _sre
        from re import _compiler
    except ImportError:
        return False
    path = cache_file()
    real_compile = getattr(_compiler, "compile", None)
    if path is None or real_compile is None or getattr(_compiler, "_sre", None) is not _sre:
        return False
    cache = _load(path)
    recorder = _SreRecorder(_sre)
    debug = getattr(_compiler, "SRE_FLAG_DEBUG", 128)

    def compile(p, flags=0):  # noqa: A001 - stands in for re._compiler.compile
        if not isinstance(p, (str, bytes)):
            return real_compile(p, flags)
        flags = int(flags)
        if flags & debug:
            return real_compile(p, flags)
        key = (p, flags)
        hit = cache.get(key)
        if hit is not None:
            try:
                out = _sre.compile(p, *hit)
                _STATE["hits"] = int(_STATE["hits"]) + 1
                return out
            except Exception:  # noqa: BLE001 - a damaged entry: compile it afresh
                cache.pop(key, None)
        recorder.take()
        out = real_compile(p, flags)
        args = recorder.take()
        own = _OWN is not None and getattr(_OWN, "on", False)   # a package pattern compiled after stop_recording
        if args is not None and (_STATE["recording"] or own) and len(cache) < MAX_ENTRIES:
            cache[key] = _plain_args(args)
            _STATE["new"] = int(_STATE["new"]) + 1
        return out

    compile._ddpdoctor_recache = True  # type: ignore[attr-defined]
    _compiler._sre = recorder
    _compiler.compile = compile
    _STATE.update(installed=True, path=path, cache=cache, new=0, hits=0, undo=(_compiler, real_compile, _sre),
                  recording=True)
    import atexit

    atexit.register(save)
    return True


def uninstall() -> None:
    """Give `re` its own compile back (tests), without saving."""
    import atexit

    undo = _STATE.get("undo")
    if isinstance(undo, tuple):
        compiler, real_compile, sre = undo
        compiler.compile, compiler._sre = real_compile, sre
    atexit.unregister(save)
    _STATE.update(installed=False, path=None, cache=None, new=0, hits=0, undo=None, recording=False)


def stop_recording() -> None:
    """No pattern compiled from now on is kept (those already kept are still served). Called before the first byte
    of the user's input is read: the file then holds the package's own patterns only, never one a future rule might
    build from a log's text (a host name, a token), since nothing of a user's input may be saved."""
    _STATE["recording"] = False


_OWN = None   # a threading.local once own_patterns() is first used: .on while its context is entered


def own_patterns() -> "_OwnPatterns":
    """A context in which this thread's compiles are recorded even after `stop_recording` (see `_OwnPatterns`)."""
    global _OWN
    if _OWN is None:
        import threading

        _OWN = threading.local()
    return _OwnPatterns()


class _OwnPatterns:
    """`with own_patterns():` the patterns compiled inside are the package's own text (a catalogue entry's pattern, a
    literal of its code), kept even after `stop_recording`, in this thread only. Triage compiles the messages
    catalogue's patterns lazily, when a line first makes an entry a candidate: on issue 24's 1 GiB log ~30 of them,
    all after the input is opened, so `re` parsed them on every run (round 16: on the failure's last lines, after the
    search has ended, the command's one-core part). Never wrap a pattern built from a user's input."""

    __slots__ = ("_prev",)

    def __enter__(self) -> None:
        self._prev = getattr(_OWN, "on", False)
        _OWN.on = True

    def __exit__(self, *exc) -> bool:
        _OWN.on = self._prev
        return False


def pause_gc() -> None:
    """The triage command's start (ddpdoctor.start.entry): no cyclic garbage collection while it imports its rules and
    loads its catalogues, which make ~100 K long-lived objects and almost no garbage (317 objects collected in 45
    collections, ~25 M instructions / ~12 ms of CPU on issue 24's 1 GiB log, round 16). `resume_gc` (before the input
    is read) freezes what was made (gc.freeze: never traversed again) and collects as usual from then on, so that a
    long log's cycles are still collected. Nothing if collection was already off."""
    import gc

    if gc.isenabled() and not os.environ.get("DDPDOCTOR_NO_GC_PAUSE"):
        gc.disable()
        _STATE["gc_paused"] = True


def resume_gc() -> None:
    """Undo `pause_gc` (only what it did): the objects made so far are frozen, collection is on again."""
    if _STATE.get("gc_paused"):
        import gc

        _STATE["gc_paused"] = False
        gc.freeze()
        gc.enable()


JSON_KEEP = 8   # kept copies of the package's JSON files (a new copy prunes older ones of the same stem beyond this)


def load_json(path: str):
    """`json.load` of one of the package's own data files (the catalogues), through a marshal copy in the cache folder
    named by the file's stem, size, modification time (ns), inode and device and by the interpreter (as the reader's
    keyword database is kept under its source's, ddpdoctor.triage.reader._hs_src_path): the same file gives the same
    object (dicts in their order, lists, str, int, float, bool, None), in ~2 ms instead of json's ~7-10 ms for
    messages.json (1.1 MB; round 16), without reading the file. A missing, damaged or foreign copy, or an unwritable
    folder, reads the JSON as before; DDPDOCTOR_NO_JSON_CACHE=1 always does. Raises what reading and `json.loads`
    raise (OSError, ValueError) as they would. Never for a user's input: only files shipped with the package."""
    import json
    import marshal

    st = os.stat(path)
    tag = (st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev)
    stem = os.path.splitext(os.path.basename(path))[0]
    kept = os.path.join(cache_dir(), f"json-{stem}-{st.st_size}-{st.st_mtime_ns}-{st.st_ino}-{st.st_dev}"
                                     f"-{sys.hexversion:x}.marshal")
    if not os.environ.get("DDPDOCTOR_NO_JSON_CACHE"):
        try:
            with open(kept, "rb") as fh:
                got, doc = marshal.loads(fh.read())
            if got == tag:
                return doc
        except Exception:  # noqa: BLE001 - no copy yet, or a damaged one: read the JSON
            pass
    with open(path, "rb") as fh:
        raw = fh.read()
    doc = json.loads(raw.decode("utf-8"))
    if os.environ.get("DDPDOCTOR_NO_JSON_CACHE"):
        return doc
    after = os.stat(path)
    if (after.st_size, after.st_mtime_ns, after.st_ino, after.st_dev) != tag or len(raw) != st.st_size:
        return doc   # changed while read: keep nothing
    try:
        data = marshal.dumps((tag, doc))
    except ValueError:
        return doc
    if write_cached(kept, data):
        _prune_json(kept, stem)
    return doc


def _prune_json(kept: str, stem: str) -> None:
    """Remove the oldest copies of `stem` beyond JSON_KEEP (a catalogue edited many times leaves no pile behind)."""
    folder = os.path.dirname(kept)
    try:
        mine = [os.path.join(folder, n) for n in os.listdir(folder)
                if n.startswith(f"json-{stem}-") and n.endswith(".marshal")]
        mine.sort(key=lambda q: os.stat(q).st_mtime, reverse=True)
        for old in mine[JSON_KEEP:]:
            if old != kept:
                os.unlink(old)
    except OSError:
        pass


def save() -> bool:
    """Write the cache file if this run compiled patterns it did not hold. Returns whether a file was written."""
    path, cache = _STATE.get("path"), _STATE.get("cache")
    if not _STATE["installed"] or not _STATE["new"] or not isinstance(path, str) or not isinstance(cache, dict):
        return False
    import marshal

    try:
        data = marshal.dumps({k: v for k, v in cache.items() if _plain(k, v)})
    except ValueError:
        return False
    if not write_cached(path, data):
        return False
    _STATE["new"] = 0
    return True


def write_cached(path: str, data: bytes) -> bool:
    """Write a file of the cache folder whole or not at all (a temporary file, then an atomic rename; the folder
    made private if missing): a concurrent run reads the old file or the new one, never half. False when it cannot
    be written (a read-only folder): the caller compiles again next time."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
        return True
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return False


def _plain_args(args: tuple) -> tuple:
    """`_sre.compile`'s arguments with its code's named opcodes (int subclasses) as plain ints: what marshal writes."""
    if len(args) == 5 and isinstance(args[1], list):
        flags, code, groups, groupindex, indexgroup = args
        return (int(flags), [int(c) for c in code], int(groups), dict(groupindex), tuple(indexgroup))
    return args


def _plain(key: Tuple, args: Tuple) -> bool:
    """An entry marshal can write and read back as it is (every value is, from re; checked, not assumed)."""
    import marshal

    try:
        marshal.dumps((key, args))
        return True
    except ValueError:
        return False
