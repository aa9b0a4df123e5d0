"""Which of a fixed set of literal strings a line contains, in one Hyperscan pass (the optional `fast` extra).

The per-line dispatch of triage tests every handed-on line for many literals: signatures' substrings (~190, `in`
tests then a regex alternation of them all) and the messages catalogue's needles of the entries with no required word
(~90 `in` tests). A Hyperscan database of them answers all at once (~0.6 us a line against ~50 us), and a line holding
none skips them all. `LiteralSet.found(text)` gives the indices of the literals in the text, exactly what
`[i for i, s in enumerate(literals) if s in text]` gives (as a set): UTF-8 is self-synchronising, so a string is in the
text iff its bytes are in the text's bytes. It returns None where Hyperscan is missing, fails, or is turned off
(DDPDOCTOR_TRIAGE_NO_HYPERSCAN=1): the caller then tests the literals as before.

The compiled database is kept in the user's cache folder under a checksum of the literals (as the reader's), and a
loaded copy is used only when it finds every literal where it stands and nothing else (`_probe`).
"""
from __future__ import annotations

import os
import threading
from typing import Optional, Sequence, Set, Tuple


def _enc(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


class LiteralSet:
    """A Hyperscan database of `literals` (case-sensitive, each reported once a scan), compiled or loaded on first use."""

    __slots__ = ("literals", "_blobs", "_db", "_tag", "_lock")

    def __init__(self, literals: Sequence[str], tag: str):
        self.literals: Tuple[str, ...] = tuple(literals)
        self._blobs = tuple(_enc(s) for s in self.literals)
        self._db = None   # None: not tried yet; False: no Hyperscan
        self._tag = tag
        self._lock = threading.Lock()   # one scratch: two threads must never scan with it at once

    def found(self, text: str) -> Optional[Set[int]]:
        """The indices of the literals `text` contains, or None (no Hyperscan: test them yourself)."""
        db = self._db
        if db is None:
            with self._lock:
                if self._db is None:
                    self._db = self._load() or False
            db = self._db
        if db is False:
            return None
        hits: Set[int] = set()
        data = _enc(text)
        with self._lock:
            db.scan(data, match_event_handler=lambda i, _f, _t, _fl, _c: hits.add(i))
        return hits

    def _load(self):
        if os.environ.get("DDPDOCTOR_TRIAGE_NO_HYPERSCAN") is not None or not self._blobs or not all(self._blobs):
            return None
        try:
            import hyperscan
        except Exception:  # noqa: BLE001 - not installed
            return None
        path = self._cache_path(hyperscan)
        db = self._from_file(hyperscan, path) if path else None
        if db is not None:
            return db
        try:
            db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
            n = len(self._blobs)
            db.compile(expressions=list(self._blobs), ids=list(range(n)), elements=n,
                       flags=[hyperscan.HS_FLAG_SINGLEMATCH] * n, literal=True)
        except Exception:  # noqa: BLE001 - a build without this CPU's support
            return None
        if path:
            try:
                from ..recache import write_cached

                write_cached(path, hyperscan.dumpb(db))
            except Exception:  # noqa: BLE001 - cannot serialise or write: compile next time too
                pass
        return db

    def _cache_path(self, hyperscan) -> Optional[str]:
        if os.environ.get("DDPDOCTOR_TRIAGE_NO_HS_CACHE") is not None:
            return None
        import zlib

        from ..recache import cache_dir

        blob = b"\0".join(self._blobs)
        version = "".join(c if c.isalnum() else "_" for c in str(getattr(hyperscan, "__version__", "x")))
        return os.path.join(cache_dir(), f"hs-lit-{self._tag}-{version}-{zlib.crc32(blob):08x}"
                                         f"{zlib.adler32(blob):08x}-{len(self._blobs)}.db")

    def _from_file(self, hyperscan, path: str):
        try:
            with open(path, "rb") as fh:
                data = fh.read()
            db = hyperscan.loadb(data, hyperscan.HS_MODE_BLOCK)
            db.scratch = hyperscan.Scratch(db)   # a loaded database has none
            return db if self._probe(db) else None
        except Exception:  # noqa: BLE001 - none yet, another platform's, damaged: compile
            return None

    def _probe(self, db) -> bool:
        """The database finds each literal in a text holding it alone, and only literals that text holds (a file of
        other literals, another build's or a damaged one fails this)."""
        for i, b in enumerate(self._blobs):
            got: Set[int] = set()
            db.scan(b, match_event_handler=lambda k, _f, _t, _fl, _c: got.add(k))
            if i not in got or any(not 0 <= k < len(self._blobs) or self._blobs[k] not in b for k in got):
                return False
        return True
