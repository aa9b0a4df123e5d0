"""The library behind `ddpdoctor triage`: paths in, a Report out, root cause first."""
from __future__ import annotations

import ast
import dataclasses
import os
import re
import time
from typing import BinaryIO, List, Optional, Sequence

from ..model import ERROR, Finding, Report, Skipped, severity_rank
from ..model.registry import Spec, selected
from ..pipeline.runner import crashed_finding, load_triage_rules, run_checks
from ..facts import messages as _messages
from . import reader
from .job import Job, _fmt_ts
from .lines import parse_all
from .signatures import events
from .verdict import failure_order

INF = float("inf")
UNEXPLAINED_RULE = "LOG028"   # runs after the others: a failure they leave unexplained is still reported
HEALTH_RULE = "LOG029"       # runs after LOG028: "No issues found!" only on evidence of health


class InputError(ValueError):
    """Nothing readable was given (exit 2, one line)."""


class TriageReport(Report):
    """A Report whose findings keep the triage order: root cause first, then by time."""

    def __init__(self, *args, order=None, **kw):
        super().__init__(*args, **kw)
        self._order = order or {}

    def sorted_findings(self) -> list:
        def key(f: Finding):
            stage, when, pos = self._order.get(f.title, (9, INF, (INF, INF)))
            return (stage, -severity_rank(f.severity), when, pos, f.id)

        return sorted(self.findings, key=key)


def rule_specs(only: Optional[set] = None, ignore: Optional[set] = None) -> List[Spec]:
    load_triage_rules()
    return selected("log", only, ignore)  # any order works: shared conclusions live in verdict.py


def read_inputs(inputs: List[reader.Input], job: Job, stdin: Optional[BinaryIO] = None) -> List[dict]:
    """Feed every input into `job`. Returns one summary row per input."""
    from . import flight, records
    from ..recache import resume_gc, stop_recording

    stop_recording()  # the regex cache keeps the package's patterns, never one compiled after input is read
    resume_gc()   # the command's start-up ran without cyclic collection (ddpdoctor.start): on again, for the lines
    summary = []
    job.paths = [i.path for i in inputs]
    job.head_bytes = reader.HEAD_FULL
    for src, inp in enumerate(inputs):
        row = {"path": inp.path, "kind": inp.kind}
        kind = inp.kind
        opened = None
        lines_before = job.lines_read
        try:
            if kind in ("stdin", "stream"):   # standard input, or a FIFO/device named on the command line
                if kind == "stream":
                    from ..model.inputs import open_input

                    stream = opened = open_input(inp.path)
                else:
                    stream = stdin if stdin is not None else reader._stdin()
                head = _read_head(stream)
                kind, reason = reader.sniff(head, len(head) + 1)
                if kind in ("fr-pickle", "report", "elastic", "fr-json") or (kind == "log" and head.lstrip()[:1] == b"{"):
                    data = head + stream.read(reader.MAX_JSON)
                    kind = _doc_kind(kind, data)
                    if kind in ("report", "elastic", "fr-json", "fr-pickle"):
                        row["kind"] = kind
                        _read_document(kind, data, src, job)
                        summary.append(row)
                        continue
                    stream = reader.Prefixed(data, stream)
                elif kind in ("binary", "empty"):
                    row.update(kind=kind, problem=reason)
                    summary.append(row)
                    continue
                else:
                    stream = reader.Prefixed(head, stream)
                row["kind"] = "log"
                _read_log(stream, src, job, row)
            elif kind in ("log", "log-gz"):
                row["size"] = inp.size
                with reader.open_stream(inp) as stream:
                    _read_log(stream, src, job, row)
                    damage = getattr(stream, "damage", None)
                if damage is not None:
                    _damaged_gz(row, job, job.lines_read - lines_before, damage)
            elif kind in ("report", "elastic", "fr-json", "fr-pickle"):
                with open(inp.path, "rb") as fh:
                    limit = reader.MAX_PICKLE if kind == "fr-pickle" else reader.MAX_JSON
                    data = fh.read(limit + 1)
                _read_document(kind, data, src, job)
            else:
                row["problem"] = inp.reason or kind
        except (OSError, EOFError) as exc:
            row["problem"] = f"cannot read: {getattr(exc, 'strerror', None) or exc}"
        except (flight.DumpError, records.RecordError) as exc:
            row["problem"] = str(exc)
        except Exception as exc:  # noqa: BLE001 - only a decompressor's own error class: a damaged .gz is input
            if type(exc).__module__ != "zlib":  # zlib.error, raised mid-stream by gzip on a corrupt deflate block
                raise
            row["problem"] = f"cannot read: damaged gzip data ({exc})"
        finally:
            if opened is not None:
                opened.close()
        summary.append(row)
    job.finish()
    return summary


def _damaged_gz(row: dict, job: Job, lines: int, exc: BaseException) -> None:
    """A .gz cut short (a copy stopped mid-file: EOFError) or followed by garbage (BadGzipFile) still gave the lines
    before the damage (reader's tolerant GzipFile stops there and keeps its `damage`): they are read and judged, and
    the damage is said (round 21, robust21: the whole log was refused). Damaged before its first line, it stays an
    input that could not be read."""
    if not lines:
        row["problem"] = f"cannot read: damaged gzip data ({exc})"
        return
    row["damaged"] = f"damaged gzip data after {lines} lines ({exc}): the lines before it were read"
    job.notes.append(f"{row['path']}: {row['damaged']}")


def _read_head(stream) -> bytes:
    out = b""
    while len(out) < reader.SNIFF:
        data = stream.read(reader.SNIFF - len(out))
        if not data:
            break
        out += data
    return out


def _doc_kind(kind: str, data: bytes) -> str:
    if kind == "fr-pickle":
        return kind
    import json

    try:
        return reader.json_kind(json.loads(data.decode("utf-8", "replace"))) or "log"
    except (ValueError, RecursionError):
        return "log"


def _read_document(kind: str, data: bytes, src: int, job: Job) -> None:
    from . import flight, records

    if kind in ("fr-pickle", "fr-json"):
        load = flight.load_pickle if kind == "fr-pickle" else flight.load_json
        dump = load(data, job.paths[src])
        job.flight.append(dump)
        if isinstance(dump.get("rank"), int):
            job.ranks.add(dump["rank"])
    elif kind == "elastic":
        records.read_elastic(data, src, job)
    elif kind == "report":
        records.read_report(data, src, job)


_RANK_IN_NAME = re.compile(r"(?:^|[^a-z])rank[_\-.]?(\d{1,6})(?!\d)", re.IGNORECASE)
_REDIRECT = re.compile(r"attempt_\d+[/\\](\d{1,6})[/\\](?:stdout|stderr)\.log$")


def rank_from_path(path: str) -> Optional[int]:
    """A per-rank log's rank from its name: `rank3.log`, `log_rank_3.txt`, torchrun's
    `--redirects` files `.../attempt_0/3/stderr.log` (the local rank: the rank on one node)."""
    m = _REDIRECT.search(path)
    if m:
        return int(m.group(1))
    m = _RANK_IN_NAME.search(os.path.basename(path))
    return int(m.group(1)) if m else None


# a watchdog line broken anywhere in its sentence or inside WorkNCCL(...) ("... Watchdog caught collective " /
# "operation timeout: WorkNCCL(SeqNum=691, ...") is joined with the next line
_OPEN_WORK = re.compile(r"Watchdog caught(?: collective(?: operation(?: timeout:?)?)?)?\s*$|WorkNCCL\((?![^)]*\))")

# Open MPI's launcher prints "%s noticed that process rank %lu with PID %lu on node %s exited on signal %d (%s)." as one
# line (open-mpi/ompi orte/tools/orterun/help-orterun.txt [orterun:proc-aborted-strsignal], one line from v1.6.5 to
# v4.1.6 @439b23d; printed by orte/runtime/orte_quit.c): a terminal or a web page that wraps it at a fixed width breaks it
# anywhere ("... on node" / "gpu3 exited on signal 9 (Killed).", "... exited on s" / "ignal 9"). Such a first half is
# joined with the next line, the way a wrapped watchdog line is.
_OPEN_MPIRUN = re.compile(r"noticed that process rank \d+(?!.*exited on signal)")


# An exception's message that a terminal, rich's console or a web page wrapped onto the next lines ("AssertionError: Check
# batch related parameters. train_batch_size is not" / "equal to micro_batch_per_gpu * ..."): the lines are joined when,
# and only when, the joined text is a message the catalogue knows and none of the pieces is one alone
_EXCEPTION_HEAD = re.compile(r"(?:^|[\s:])(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception): \S")
# an exception line whose message is printed below it (see _message_below)
_EMPTY_EXCEPTION = re.compile(r"(?:^|[\s:])(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception):\s*$")
_MAX_WRAPPED = 3   # continuation lines looked at after the exception line
# A debugger's exception widget, copied as text: VS Code's (microsoft/vscode src/vs/workbench/contrib/debug/browser/
# exceptionWidget.ts, commit not pinned here: "Exception has occurred: {0}" / "User-unhandled exception has occurred:
# {0}" with the exception's id, then its description, the message, in an element of its own) puts the exception's type
# on one line and its message on the next ("Exception has occurred: KeyError" / "'RANK'"). The two read as the one
# line Python prints, "KeyError: 'RANK'" (round 19 wave 2, issue 24: b170_25)
_DEBUGGER_HEAD = re.compile(r"^\s*(?:User-unhandled e|E)xception has occurred: ((?:[A-Za-z_]\w*\.)*[A-Z]\w*)\s*$")


def _same_stream(line, last) -> bool:
    """`line` continues `last`'s stream: the same markers, or none at all (a wrapped line's continuation carries no
    prefix of its own)."""
    return (line.src, line.rank, line.local_rank, line.label, line.host) == (
        last.src, last.rank, last.local_rank, last.label, last.host) or (
        line.src == last.src and (line.rank, line.local_rank, line.label, line.host) == (None, None, None, None))


def _may_continue(text: str) -> bool:
    t = text.strip()
    return bool(t) and "Traceback (most recent" not in t and not t.startswith('File "') \
        and _EXCEPTION_HEAD.search(t) is None and _messages.match(t) is None


def _message_below(pending: list, text: str) -> bool:
    """An exception line whose message is empty ("deepspeed.runtime.zero.utils.ZeRORuntimeException: " at its end) and
    the next line: the message itself, printed below it. Python prints str(exc) after "Name: "; a message that starts
    with a newline (DeepSpeed's ZeRORuntimeException texts, a multi-line f-string) puts its first line below the name
    (round 16 wave 4, b112_19). Joined even when that line alone is a catalogued message, so the two read as one
    exception with its message."""
    t = text.strip()
    return (len(pending) == 1 and (pending[0].text.rstrip().endswith(":") or _DEBUGGER_HEAD.match(pending[0].text)
                                   is not None) and bool(t)
            and "Traceback (most recent" not in t and not t.startswith('File "') and _EXCEPTION_HEAD.search(t) is None)


def _debugger_joined(head, line):
    """A debugger's "Exception has occurred: KeyError" and its message on the next line, as Python prints them."""
    m = _DEBUGGER_HEAD.match(head.text)
    return dataclasses.replace(head, text=f"{head.text.rstrip()}: {line.text.strip()}") if m else None


# Hydra's compact report of an exception raised by an instantiated target (facebookresearch/hydra
# hydra/_internal/instantiate/_instantiate2.py @2c03d1b: InstantiationException(f"Error in call to target '{t}':\n
# {repr(e)}" [+ "\nfull_key: k"]), printed as str(ex) by hydra/_internal/utils.py run_and_report without
# HYDRA_FULL_ERROR, under "Error executing job with overrides: [...]"): the line below the header is the cause's repr,
# "KeyError('input_ids')", "MisconfigurationException('You requested gpu: ...\\n But your machine only has: ...')".
# Read as the exception it is ("Name: message"), its message unescaped, so the catalogue classes the cause.
_HYDRA_TARGET_HEAD = re.compile(r"^\s*Error in (?:call to target '[^']{1,300}'|creating partial\(.{1,300}\) object):\s*$")
_REPR_EXC = re.compile(r"^\s*((?:[A-Za-z_]\w*\.)*[A-Z]\w*)\((.*)\)\s*$")


def _hydra_cause(head, line):
    """The cause's repr under Hydra's "Error in call to target 'x':" as "Name: message" (line's place kept), or None."""
    if not _HYDRA_TARGET_HEAD.match(head.text):
        return None
    m = _REPR_EXC.match(line.text)
    if m is None:
        return None
    args = m.group(2).strip()
    msg = args
    if args[:1] in ("'", '"') and len(args) < 20000:
        try:
            val = ast.literal_eval(args)   # a literal only: the repr of the exception's args
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            val = None
        if isinstance(val, tuple):
            val = ", ".join(str(v) for v in val)
        if isinstance(val, str):
            msg = " ".join(val.split())
    return dataclasses.replace(line, text=f"{m.group(1)}: {msg}" if msg else f"{m.group(1)}:")


def _join_wrapped(lines: list, sep: str = " "):
    return dataclasses.replace(lines[0], text=sep.join([lines[0].text.rstrip()] + [ln.text.strip() for ln in lines[1:]]))


# ProcessGroupNCCL's own messages ("[PG ID 0 PG GUID 0(default_pg) Rank 6] ProcessGroupNCCL's watchdog got stuck for 480
# seconds ...") are long: a terminal that wraps at a fixed width breaks them anywhere, even inside a word
# ("ProcessGroupNCCL'" / "s watchdog got stuck"); such a line the catalogue does not know waits for its continuation
_PG_NCCL_HEAD = re.compile(r"ProcessGroupNCCL\.cpp:\d+\]")


# A terminal (or a web page's <pre>) that wraps a long line at its width cuts it anywhere, inside a word too: XLA's
# "... NCCL operation ncclAllReduce(...) failed: un" / "handled cuda error" (a 122-column paste, round 20 wave 2,
# issue 24: b185_15). A line at least _WRAP_WIDTH bytes long that ends in a letter waits for the next one; the two are
# joined with no space only where the word they make across the cut is one of the catalogue's (messages.words():
# "unhandled", from NCCL's ncclGetErrorString text) and its two pieces are not both words of it. No pattern runs on
# the line: a vocabulary lookup of the one word at the cut.
_WRAP_WIDTH = 64
_LETTERS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_VOCAB: list = []   # messages.words() as bytes, on first use


def _word_cut(first: bytes, nxt: bytes) -> Optional[bytes]:
    """FIRST and NXT joined with no space when the word across the cut is a catalogue word, else None. (Every line a
    large log hands on may come here: bytes.rstrip/lstrip find the two pieces in C, ~1 us a line.)"""
    nb = len(nxt) - len(nxt.lstrip(_LETTERS))
    if not nb:
        return None
    na = len(first) - len(first.rstrip(_LETTERS))
    if na + nb < 6 or na > 40 or nb > 40:
        return None   # the catalogue's words have 6 letters or more (messages.words)
    a, b = first[-na:].lower(), nxt[:nb].lower()
    if not _VOCAB:
        _VOCAB.append(frozenset(w.encode("ascii") for w in _messages.words()))
    vocab = _VOCAB[0]
    if (a + b) not in vocab or (a in vocab and b in vocab):
        return None
    return first + nxt


# an exception line as CPython prints it under its frames: a class name, dotted or not, then ": message" or nothing
_EXC_SHAPE = re.compile(r"(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:: .*|:)?$")


def _unshift(line, frames_at: dict) -> None:
    """A traceback pasted with every line indented (a Markdown code block, a quote, an editor's indent): CPython prints
    each frame's 'File "x.py", line N, in f' two spaces in, its source four, and the exception line at column 0
    (Lib/traceback.py @v3.12.0: StackSummary.format_frame_summary '  File "{}", line {}, in {}\n' then '    {}\n'
    for the source, TracebackException.format_exception_only at column 0). An exception-shaped line two columns left
    of the frame above it (within its source and caret lines) is that traceback's exception line shifted by the paste:
    its indent is taken off, so it reads as the exception it is. The frame lines themselves are read where they are."""
    t = line.text
    key = (line.src, line.rank if line.rank is not None else line.label)
    if 'File "' in t and '", line ' in t:
        frames_at[key] = (line.lineno, len(t) - len(t.lstrip(" ")))
        return
    at = frames_at.get(key)
    if at is None or not 1 <= line.lineno - at[0] <= 3:
        return
    body = t.lstrip(" ")
    indent = len(t) - len(body)
    if indent == at[1] - 2 and indent > 0 and _EXC_SHAPE.match(body) and not body.startswith(("File ", "During ")):
        line.text = body


def _read_log(stream, src: int, job: Job, row: dict) -> None:
    default_rank = rank_from_path(job.paths[src]) if src < len(job.paths) else None
    held: list = []   # a watchdog line a terminal or a web page wrapped: (lineno, offset, raw), joined with the next

    pending: list = []   # an exception line no catalogue entry knows, and the lines after it: its message, wrapped?
    hydra: list = []     # Hydra's "Error in call to target 'x':" just fed: the next line is its cause's repr
    frames_at: dict = {}  # (src, stream) -> (lineno, indent) of its last traceback frame's 'File "' line (_unshift)

    def flush() -> None:
        for held_line in pending:
            job.feed_line(held_line, events(held_line))
        pending.clear()

    def take(line) -> None:
        if line.text[:1] == " ":
            _unshift(line, frames_at)
        if hydra:
            head = hydra.pop()
            cause = (_hydra_cause(head, line) if line.lineno == head.lineno + 1 and _same_stream(line, head)
                     else None)
            if cause is not None:
                job.feed_line(cause, events(cause))
                return
        if "Error in " in line.text and _HYDRA_TARGET_HEAD.match(line.text):
            flush()
            hydra.append(line)
            job.feed_line(line, events(line))
            return
        if pending:
            last = pending[-1]
            if line.lineno == last.lineno + 1 and _same_stream(line, last) and (
                    _may_continue(line.text) or _message_below(pending, line.text)):
                dbg = _debugger_joined(pending[0], line) if len(pending) == 1 else None
                if dbg is not None:
                    pending.clear()
                    job.feed_line(dbg, events(dbg))
                    return
                pending.append(line)
                # a wrap at a word's edge lost a space; one inside a word ("ProcessGroupNCCL'" / "s watchdog") did not
                joined = next((j for j in (_join_wrapped(pending), _join_wrapped(pending, ""))
                               if _messages.match(j.text) is not None), None)
                if joined is not None:
                    pending.clear()
                    job.feed_line(joined, events(joined))
                elif len(pending) > _MAX_WRAPPED:
                    flush()
                return
            flush()
        if (("rror: " in line.text or "xception: " in line.text) and _EXCEPTION_HEAD.search(line.text)
                or line.text.endswith(("rror:", "xception:", "rror: ", "xception: ")) and _EMPTY_EXCEPTION.search(line.text)
                or _PG_NCCL_HEAD.search(line.text)) and _messages.match(line.text) is None:
            pending.append(line)
            return
        if "xception has occurred: " in line.text and _DEBUGGER_HEAD.match(line.text):
            pending.append(line)   # its message is on the next line
            return
        job.feed_line(line, events(line))

    def feed(lineno: int, offset: int, raw: bytes) -> None:
        for line in parse_all(src, lineno, offset, raw):
            if default_rank is not None and line.rank is None and line.label is None:
                line.rank = default_rank
            take(line)

    cut: list = []   # a full-width line that ends inside a word, waiting for the next line (_word_cut)

    def on_line(lineno: int, offset: int, raw: bytes) -> None:
        if cut:
            cl, co, craw = cut.pop()
            joined = _word_cut(craw, raw) if lineno == cl + 1 else None
            if joined is None:
                on_whole(cl, co, craw)
            else:
                lineno, offset, raw = cl, co, joined
        if len(raw) >= _WRAP_WIDTH and raw[-1:].isalpha() and len(raw) < reader.MAX_LINE:
            cut.append((lineno, offset, raw))
            return
        on_whole(lineno, offset, raw)

    def on_whole(lineno: int, offset: int, raw: bytes) -> None:
        if held:
            hl, ho, hraw = held.pop()
            if lineno == hl + 1 and len(hraw) + len(raw) < reader.MAX_LINE:
                head, tail = hraw.rstrip(b" \t\r"), raw.lstrip()
                # a wrap inside a word ("exited on s" / "ignal 9") lost no space; one at a word's edge did
                raw = head + tail if (b"exited on signal" in head + tail
                                      and b"exited on signal" not in head + b" " + tail) else head + b" " + tail
                lineno, offset = hl, ho
            else:
                feed(hl, ho, hraw)
        # raw.find, not `in`: bytes' `in` formats and drops a TypeError first (it tries the needle as a byte value)
        if raw.find(b"WorkNCCL") >= 0 or raw.find(b"Watchdog caught") >= 0:
            text = raw.decode("utf-8", "replace").rstrip()
            if _OPEN_WORK.search(text):
                held.append((lineno, offset, raw))
                return
        if raw.find(b"noticed that process rank") >= 0 and _OPEN_MPIRUN.search(raw.decode("utf-8", "replace")):
            held.append((lineno, offset, raw))
            return
        feed(lineno, offset, raw)

    nbytes, nlines = reader.scan(stream, on_line, expected=row.get("size", 0))
    if cut:
        on_whole(*cut.pop())
    if held:
        feed(*held.pop())
    flush()
    row["bytes"], row["lines"] = nbytes, nlines
    job.bytes_read += nbytes
    job.lines_read += nlines


def triage_paths(paths: List[str], only: Optional[set] = None, ignore: Optional[set] = None,
                 stdin: Optional[BinaryIO] = None) -> Report:
    """Read the inputs, reconstruct the job, run the rules. Raises reader.MissingPath / InputError."""
    start = time.perf_counter()
    inputs = reader.collect(paths or ["-"])
    if not inputs:
        raise InputError(f"no log files found in {', '.join(paths)}")
    job = Job()
    summary = read_inputs(inputs, job, stdin)
    usable = [r for r in summary if "problem" not in r]
    if not usable:
        first = summary[0]
        raise InputError(f"{first['path']}: {first['problem']}; nothing to triage")
    specs = rule_specs(only, ignore)
    job.selected = {s.id for s in specs} if (only is not None or ignore) else None
    last = [s for s in specs if s.id == UNEXPLAINED_RULE]   # it judges what the others left unexplained
    health = [s for s in specs if s.id == HEALTH_RULE]      # it judges whether anything spoke at all
    findings = run_rules(job, [s for s in specs if s.id not in (UNEXPLAINED_RULE, HEALTH_RULE)])
    from .records import relayed_findings

    relayed = [f for f in relayed_findings(job) if (only is None or f.id in only) and not (ignore and f.id in ignore)]
    quoted = quoted_in_change(job)
    if quoted:
        findings = [_as_quoted(f, quoted) for f in findings]
    if job.titles_over_output:
        findings = [_as_title(job, f) for f in findings]
    if last:
        from .rules.unexplained import EXPLAINED

        # explained: an error finding, or a warning that names the line where a stream first failed (LOG009's port
        # error on the only failure line needs no "unexplained failure" next to it)
        fail_lines = {f"line:{ln.lineno}" for ln in job.first_fail.values()}
        job.cache["other_findings"] = any(f.severity in (ERROR, "warning") for f in findings + relayed)
        job.cache[EXPLAINED] = any(f.severity == ERROR for f in findings + relayed) or (
            bool(fail_lines) and any(f.severity == "warning" and fail_lines & set(f.subjects) for f in findings))
        findings += [_as_quoted(f, quoted) if quoted else f for f in run_rules(job, last)]
    if health:
        from .rules.health import REPORTED

        job.cache[REPORTED] = any(f.severity in (ERROR, "warning") for f in findings + relayed)
        findings += run_rules(job, health)
    live_ranks = {s for f in relayed if f.severity == ERROR for s in f.subjects if s.startswith("rank:")}
    for f in relayed:
        findings.append(f)
        job.sort_keys.setdefault(f.title, (0 if f.severity == ERROR else 3, -INF, (-INF, -INF)))
    if live_ranks:
        # One fault, one finding: a death `ddpdoctor run` measured live wins over the same death read from logs.
        findings = [f for f in findings if not (f.id.startswith("LOG") and job.sort_keys.get(f.title, (9,))[0] == 0
                                                and live_ranks & set(f.subjects))]
    report = TriageReport(command="triage", findings=findings, checks_run=len(rule_specs(only, ignore)),
                          families=["logs"], order=job.sort_keys)
    unread = [r for r in summary if "problem" in r]
    for r in unread:   # "Not judged" in the summary line: "No issues found!" must not cover a log nobody read
        report.skipped.append(Skipped(id=f"input:{os.path.basename(str(r['path']))}", family="logs",
                                      reason=f"{os.path.basename(str(r['path']))} could not be read: {r['problem']}"))
    verdict = health_verdict(job, findings, unread)
    report.extra["triage"] = {"inputs": summary, "job": job_summary(job), "health": verdict,
                              "elapsed_ms": round((time.perf_counter() - start) * 1000, 1)}
    report.extra["text_sections"] = text_summary(job, summary) + health_lines(verdict)
    return report


def health_verdict(job: Job, findings: List[Finding], unread: Sequence[dict] = ()) -> dict:
    """What the report says of the job's fate, and the line it rests on: "failed" (an error finding), "not_shown" (a
    warning, LOG029's "cannot show health" or LOG028's unexplained failure among them: no verdict of health), or
    "ended_well" with the end line that shows it (a launcher's exit 0, the Trainer's train_runtime metrics, Lightning's
    "`Trainer.fit` stopped: `max_epochs=N` reached", "Training completed"...: the catalogue's class job_ended_well)
    (round 21, issue 24: "No issues found!" is printed with its evidence, and --json carries it)."""
    from .rules.health import health_shown

    if any(f.severity == ERROR for f in findings):
        return {"verdict": "failed"}
    if any(f.severity == "warning" for f in findings):
        return {"verdict": "not_shown", "why": "a warning above: the log shows no failure the rules explain, "
                "or no evidence that the job ended well"}
    if unread:   # one rank's log could not be read: its fate is unknown, whatever the others show (round 21, robust21)
        return {"verdict": "not_shown", "why": "an input could not be read: " + "; ".join(
            f"{r['path']} ({r['problem']})" for r in unread[:4])}
    occ = job.get("job_ended_well")
    if occ and occ.count and health_shown(job):
        end = max((e.line for e in occ.first), key=lambda ln: (ln.src, ln.lineno))
        return {"verdict": "ended_well", "evidence": {
            "path": job.paths[end.src] if end.src < len(job.paths) else None, "line": f"line:{end.lineno}",
            "text": end.text.strip()[:200]}}
    if health_shown(job):
        return {"verdict": "ended_well", "why": "Flight Recorder dumps whose collectives completed"}
    return {"verdict": "no_failure_seen", "why": "no failure line and no rule's warning; no end line either"}


def health_lines(verdict: dict) -> List[str]:
    """The verdict of health_verdict as the text report's line: a claim of health names its line."""
    if verdict.get("verdict") == "ended_well" and verdict.get("evidence"):
        ev = verdict["evidence"]
        where = f"{os.path.basename(ev['path'])} {ev['line']}" if ev.get("path") else ev["line"]
        return [f"Ended well: {where}: {ev['text']}"]
    if verdict.get("verdict") == "no_failure_seen":
        return ["No failure seen, and no end line either: not a finding of health."]
    return []


def quoted_in_change(job: Job):
    """The line that marks this text a pull request's or a feature request's (prose.py _CHANGE_DOC), when nothing in
    the log is a run's own output: no line with a rank, NCCL or host prefix, no launcher's exit, no traceback's frames
    (two or more), no training progress.
    The failures such a text shows are the ones its change removes or its request is about, quoted; else None."""
    if job.change_doc is None or job.run_lines or job.frame_lines >= 2 or job.exits or job.progress_lines:
        return None
    return job.change_doc


def _as_quoted(f: Finding, marker) -> Finding:
    """A failure finding read from a quote in a change's or a request's text: said as what it is (info), not as a
    job that failed; the log holds no run to judge (LOG029, the health rule, then says what the log cannot show)."""
    if f.severity not in (ERROR, "warning") or not f.id.startswith("LOG"):
        return f
    return dataclasses.replace(
        f, severity="info",
        title=f"quoted, not a job's output: {f.title}",
        detail=(f"Line {marker.lineno} marks this text as a pull request's or a feature request's description "
                f"(\"{marker.text.strip()[:80]}\"), and no line in it is a run's own output (no rank, NCCL or host "
                "prefix, no launcher exit, no traceback, no training progress): the failure below is the one the change removes or "
                "the request is about, quoted. " + f.detail))


def _as_title(job: Job, f: Finding) -> Finding:
    """A failure finding whose evidence is a thread's title over a body that holds the program's output
    (Job._titles): said as the title's words (info), so the body's own lines decide what failed."""
    fs = f.evidence.get("first_seen") if isinstance(f.evidence, dict) else None
    if f.severity not in (ERROR, "warning") or not f.id.startswith("LOG") or not isinstance(fs, dict):
        return f
    line = next((t for t in job.titles_over_output if t.lineno == fs.get("line")
                 and (job.paths[t.src] if t.src < len(job.paths) else "?") == fs.get("path")), None)
    if line is None:
        return f
    return dataclasses.replace(
        f, severity="info", title=f"the thread's title, not the job's output: {f.title}",
        detail=(f"Line {line.lineno} is the text's title (its first heading); the lines under it hold the program's own "
                "output, which says what failed and where the excerpt stops. The title's words are the writer's, not a "
                "line the job printed. " + f.detail))


def run_rules(job: Job, specs: List[Spec]) -> List[Finding]:
    """The selected rules over the job, through the one check runner (a crash is one DOC001 finding)."""
    def crashed(spec: Spec, exc: Exception) -> Finding:
        title = f"triage rule {spec.id} ({spec.slug}) crashed: {type(exc).__name__}: {exc}"
        job.sort_keys[title] = (8, INF, (INF, INF))
        return crashed_finding(title, family="logs",
                               detail="This is a bug in ddpdoctor, not in your job. The other rules still ran.",
                               fix="Report it with the log (or a reduced copy) attached: DDPDOCTOR_DEBUG=1 ddpdoctor triage ...",
                               evidence={"rule": spec.id})

    findings, _skipped, _ran = run_checks(job, specs=specs, when="triage", crashed=crashed)
    return findings


def job_summary(job: Job) -> dict:
    ranks = sorted(r for r in job.ranks if r is not None and r >= 0)
    out = {
        "ranks_seen": ranks,
        "world_size": job.world,
        "world_size_from": "a guess: the highest rank seen" if job.world_guessed else sorted(job.world_sources),
        "hosts": sorted(job.hosts),
        "rank_hosts": {str(r): h for r, h in sorted(job.rank_host.items())},
        "versions": job.versions,
        "exits": [{"rank": e.rank, "local_rank": e.local_rank, "host": e.host, "exitcode": e.code, "signal": e.signal,
                   "source": e.source, "time": _fmt_ts(e.ts) if e.ts is not None else None}
                  for e in job.exits[:64]],
        "watchdog": [{k: v for k, v in row.items() if k != "line"} for row in job.timeout_table()[:256]],
        "failure_order": [dict(f, time=_fmt_ts(f["time"]) if f["time"] is not None else None)
                          for f in failure_order(job)],
        "bytes_read": job.bytes_read,
        "lines_read": job.lines_read,
    }
    if job.flight:
        out["flight_recorder_ranks"] = sorted(d.get("rank") for d in job.flight if d.get("rank") is not None)
    if job.notes:
        out["notes"] = job.notes
    return out


def text_summary(job: Job, summary: List[dict]) -> List[str]:
    from .rules import ranks_text

    ranks = sorted(r for r in job.ranks if r is not None and r >= 0)
    logs = [r for r in summary if "problem" not in r]
    mb = job.bytes_read / (1 << 20)
    lines = [f"Read {len(logs)} input{'s' if len(logs) != 1 else ''} ({mb:.1f} MiB, {job.lines_read} lines)."]
    job_line = []
    if ranks:
        job_line.append(f"ranks {ranks_text(ranks)}")
    if job.world and job.world_guessed:
        job_line.append(f"world size at least {job.world} (a guess from the highest rank seen: no line counts the ranks)")
    elif job.world:
        job_line.append(f"world size {job.world}" + (f" ({', '.join(sorted(job.world_sources))})" if job.world_sources else ""))
    if job.hosts:
        hs = sorted(job.hosts)
        job_line.append(f"host{'s' if len(hs) > 1 else ''} {', '.join(hs[:6])}{' …' if len(hs) > 6 else ''}")
    if job_line:
        lines.append("Job: " + "; ".join(job_line) + ".")
    order = failure_order(job, limit=8)
    if order:
        lines.append("Failure order: " + "; ".join(
            f"rank {f['rank']} {f['how']}" + (f" at {_fmt_ts(f['time'])}" if f["time"] is not None else "")
            for f in order) + ".")
    for who, vers in sorted(job.versions.items())[:8]:
        lines.append(f"Versions {who}: " + ", ".join(f"{k} {v}" for k, v in sorted(vers.items())))
    for r in summary:
        if "problem" in r:
            lines.append(f"Note: {r['path']} skipped: {r['problem']}")
    for note in job.notes[:10]:
        lines.append(f"Note: {note}")
    return lines
