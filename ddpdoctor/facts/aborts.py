"""Why a process aborted itself, from what it printed on stderr just before (data/abort_texts.json: the C++ runtime's
verbose terminate handler, glibc's assert). SIGABRT is raised by the process that gets it (abort()), so "who sent it"
is the wrong question: the line before it answers why. Pure: text in, reasons out."""
from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import List, Optional

DATA = Path(__file__).resolve().parent.parent / "data" / "abort_texts.json"
MAX_REASONS = 4  # the last ones: a job's stderr can hold one per rank, and the newest are nearest the end
# robust24: each line is searched in its first MAX_LINE characters. The patterns come from a data file and a regex
# search costs up to (length x matches tried) on one line: a what() of 1 MiB (a tensor printed in an error) held
# `ddpdoctor run` at the job's end for ever. Every text the file names is far shorter (what() is kept to 400).
MAX_LINE = 16 * 1024


@functools.lru_cache(maxsize=1)
def _entries() -> tuple:
    with open(DATA, encoding="utf-8") as fh:
        data = json.load(fh)
    return tuple(dict(e, _re=re.compile(e["pattern"]), _what=re.compile(e["what_pattern"]) if e.get("what_pattern")
                      else None) for e in data["entries"])


def reasons(text: str) -> List[dict]:
    """The abort messages in `text`, oldest first (at most MAX_REASONS, the last ones): {"id", "type", "what", "line",
    "meaning", and where the what() text is a catalogued message (facts.messages): "message_id", "fix"}."""
    if "terminate called" not in text and "Assertion `" not in text:
        return []  # the common case, without a regex over the whole stderr
    lines = [x[:MAX_LINE] for x in text.splitlines()]
    out = []
    for i, line in enumerate(lines):
        for e in _entries():
            m = e["_re"].search(line)
            if not m:
                continue
            what = m.groupdict().get("what")
            if e["_what"] is not None:  # the what() line follows the type line (the next non-empty line)
                nxt = next((x for x in lines[i + 1:i + 3] if x.strip()), "")
                w = e["_what"].match(nxt)
                what = w.group("what").strip() if w else None
            r = {"id": e["id"], "type": m.groupdict().get("type"), "what": (what or "")[:400] or None,
                 "line": line.strip()[:300], "meaning": e["meaning"]}
            r.update(_catalogued(r["what"]))
            out.append(r)
            break
    return out[-MAX_REASONS:]


def _catalogued(what: Optional[str]) -> dict:
    """The messages catalogue's word on the what() text (Gloo's size mismatch, NCCL's watchdog ...), if any."""
    if not what:
        return {}
    from . import messages

    try:
        m = messages.match(what)
    except Exception:  # noqa: BLE001 - a catalogue that cannot be read leaves the reason as printed
        return {}
    if m is None:
        return {}
    return {"message_id": m.entry.get("id"), "fix": m.entry.get("fix")}


def text(r: dict) -> str:
    """One reason in words, as printed."""
    if r["id"] == "libstdcxx.terminate_after_throwing":
        return f"terminate called after throwing '{r.get('type')}'" + (f": {r['what']}" if r.get("what") else "")
    if r["id"] == "glibc.assert_fail":
        return f"assertion failed: {r['line']}"
    return r["line"]
