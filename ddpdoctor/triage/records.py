"""Small JSON documents a failed job leaves: torch elastic error files and ddpdoctor run reports.

- The elastic error file (`@record`, TORCHELASTIC_ERROR_FILE) holds one rank's exception:
  `{"message": {"message": "ValueError: ...", "extraInfo": {"py_callstack": "Traceback ...",
  "timestamp": "1712345678"}}}`. torchrun writes it under `.../attempt_N/<local_rank>/error.json`.
- A `ddpdoctor run` report is the JSON report contract with command "run": its findings are
  already root causes measured live, so they are relayed as they are (their own IDs), and its
  `run` section adds ranks and hosts to the job.
"""
from __future__ import annotations

import json
import os
import re
import time
from typing import Optional

from ..model import Finding
from .job import Job
from .lines import parse
from .signatures import events


class RecordError(ValueError):
    """A JSON input that could not be read."""


def _load(data: bytes) -> dict:
    try:
        doc = json.loads(data.decode("utf-8", "replace"))
    except (ValueError, RecursionError) as exc:
        raise RecordError(f"not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise RecordError("not a JSON object")
    return doc


def _rank_from_path(path: str) -> Optional[int]:
    parts = re.split(r"[/\\]", path)
    for part in reversed(parts[:-1]):
        if part.isdigit():
            return int(part)
    m = re.search(r"rank[_-]?(\d+)", os.path.basename(path))
    return int(m.group(1)) if m else None


def _epoch_to_ts(epoch: float) -> float:
    t = time.localtime(epoch)
    from .lines import _DAYS

    return ((_DAYS[t.tm_mon - 1] + t.tm_mday - 1) * 24 + t.tm_hour) * 3600 + t.tm_min * 60 + t.tm_sec


def read_elastic(data: bytes, src: int, job: Job) -> None:
    doc = _load(data)
    msg = doc.get("message")
    extra = {}
    if isinstance(msg, dict):
        extra = msg.get("extraInfo") or {}
        text = str(msg.get("message", ""))
    else:
        text = str(msg or "")
    rank = _rank_from_path(job.paths[src])
    ts = None
    try:
        stamp = extra.get("timestamp") or doc.get("timestamp")
        ts = _epoch_to_ts(float(stamp)) if stamp is not None else None
    except (TypeError, ValueError, OverflowError, OSError):
        ts = None
    body = str(extra.get("py_callstack") or "").splitlines()
    body = [b for b in body if b.strip()] or []
    lines = body if body else []
    last = text.strip().splitlines()[-1] if text.strip() else ""
    if last and (not lines or lines[-1].strip() != last.strip()):
        lines.append(last)
    for i, raw in enumerate(lines[:400], 1):
        line = parse(src, i, 0, raw.encode("utf-8", "replace"))
        line.rank = rank if line.rank is None else line.rank
        if line.ts is None:
            line.ts = ts
        job.feed_line(line, events(line))


def read_report(data: bytes, src: int, job: Job) -> None:
    doc = _load(data)
    job.reports.append(doc)
    run = doc.get("run") if isinstance(doc.get("run"), dict) else {}
    for rec in run.get("ranks") or []:
        if not isinstance(rec, dict):
            continue
        r = rec.get("rank")
        if isinstance(r, int):
            job.ranks.add(r)
            if rec.get("host"):
                job.rank_host.setdefault(r, str(rec["host"]))
        if rec.get("host"):
            job.hosts.add(str(rec["host"]))
    ws = run.get("world_size")
    if isinstance(ws, int) and ws > 0:
        job.world_sources["run report"] = ws


def relayed_findings(job: Job):
    """The run reports' own findings, with their IDs, for `triage` to show as they are: from
    `--report` files first (their detail and fix are whole), then from the text `ddpdoctor run`
    printed on stderr into the job's log; the same finding seen in both is shown once."""
    from ..model import SEVERITIES

    seen = set()
    for doc in job.reports:
        for f in doc.get("findings") or []:
            if not isinstance(f, dict) or f.get("severity") not in SEVERITIES or not f.get("id"):
                continue
            key = (str(f["id"]), str(f.get("title", "")))
            if key in seen:
                continue
            seen.add(key)
            yield Finding(f["severity"], str(f.get("title", "")), detail=str(f.get("detail", "")),
                          fix=str(f.get("fix", "")), subjects=[str(s) for s in f.get("subjects") or []],
                          evidence=dict(f.get("evidence") or {}) if isinstance(f.get("evidence"), dict) else {},
                          id=str(f["id"]), name=str(f.get("name", "")), family="logs")
    occ = job.get("run_finding")
    for ev in (occ.first if occ else []):
        d = ev.data
        key = (str(d["id"]), str(d["title"]))
        if key in seen:
            continue
        seen.add(key)
        ranks = sorted({int(r) for r in re.findall(r"\brank (\d+)", str(d["title"]))})
        path = job.paths[ev.line.src] if ev.line.src < len(job.paths) else "?"
        yield Finding(str(d["sev"]), str(d["title"]), detail="Reported live by `ddpdoctor run` (its stderr, in this log).",
                      fix=f"ddpdoctor explain {d['id']}",
                      subjects=[f"rank:{r}" for r in ranks] + [f"path:{path}", f"line:{ev.line.lineno}"],
                      evidence={"source": "ddpdoctor run (stderr)"}, id=str(d["id"]), name=str(d["slug"]),
                      family="logs")
