"""One raw log line -> `Line`: decoded, ANSI-free, its prefixes (rank, host, pid) and timestamp parsed.

Prefixes seen in real reports, possibly stacked (`0: [rank3]:[E1206 ...]`):
- torchrun `--log-line-prefix` / default tee: `[rank3]:` and the older `[default3]:` (local rank);
- mpirun `--tag-output`: `[1,3]<stdout>:` (job 1, rank 3); horovodrun: `[3]<stdout>:` (rank 3);
- srun `--label`: `3: `; pdsh (DeepSpeed's multi-node runner), clush, kubectl logs --prefix: `worker-0: `;
- Ray: `(WorkerDict pid=1234, ip=10.0.0.2) `; tools that number lines: `[80746] `;
- NCCL's own: `node-a:1234:1299 [3] NCCL INFO ...` (host, pid, thread, CUDA device).

Timestamps (for "who failed first"): glog `E1206 18:44:16.994932`, Python logging
`[2024-04-18 10:46:28,089]`, ISO dates, the elastic table's `2024-04-18_10:46:28`. The year is
dropped: glog has none, and only the order within one job matters.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Optional

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][A-Za-z0-9]|\x1b[=>]")
# torch's "[rank3]:", and Determined's "[rank=0] " (after its empty "[] " container field)
_RANK = re.compile(r"\[rank=?(\d{1,6})\](?::\s?|\s)")
# ParlAI's rank prefix on its workers' prints and log records: "rank:{:3d} |" (parlai/utils/distributed.py
# distributed_context @3f7e570, handed to override_print and logging.logger.add_format_prefix, so "rank:  3 | <time>
# CRITICAL | Traceback ..."). Its older "[rank:{:2d}]" (parlai/scripts/multiprocessing_train.py @03cb486) is not read:
# Lightning's rank_prefixed_message writes the same "[rank: 3] " before messages its own parsers read whole.
_PARLAI = re.compile(r"rank:\s*(\d{1,6}) \| ")
# OLMo's RichHandler: "[%Y-%m-%d %X] " + the level padded to 8 + " [<logger>:<lineno>, rank=<local_rank>]" ("root" alone
# for the root logger), the process's LOCAL rank (allenai/OLMo olmo/util.py @005860e, RichHandler.get_location_text:
# f"[{name_and_line}, rank={record.local_rank}]"): "[2024-04-18 09:09:04] CRITICAL [root, rank=0] Uncaught ValueError: ..."
_OLMO = re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] (?:DEBUG|INFO|WARNING|ERROR|CRITICAL) *\[[\w.]+(?::\d+)?, rank=(\d{1,6})\] ")
_EMPTY = re.compile(r"\[\]\s")
_DEFAULT = re.compile(r"\[default(\d{1,5})\]:\s?")
_LABEL = re.compile(r"\s{0,3}(\d{1,6}): ")
_RAY = re.compile(r"\((\w+) pid=(\d+)(?:, ip=([\w.:\-]+))?\)\s")
# vLLM's worker processes: _add_prefix(file, worker_name, pid) writes "({worker_name} pid={pid}) " before each line of
# the worker's stdout and stderr (vllm-project/vllm vllm/executor/multiproc_worker_utils.py @0531c222). V1's WorkerProc
# names its worker "VllmWorker rank={rank}" (vLLM 0.8.x vllm/v1/executor/multiproc_executor.py WorkerProc.__init__:
# _add_prefix(sys.stdout, f"VllmWorker rank={rank}", pid)), later "VllmWorker" + " TP{t}" or " PP{p}_TP{t}" (the same
# file @00f6c9bf: decorate_logs(process_name), the PP part only when pipeline_parallel_size > 1, the TP part only when
# tensor_parallel_size > 1). The rank is the worker's rank in vLLM's world (world_size = tp x pp, rank = pp_rank x tp +
# tp_rank): "rank=N" names it; "TPn" alone (no PP) is it; "PPp_TPt" does not name it without the TP size.
_VLLM_WORKER = re.compile(r"\((\w+) (?:rank=(\d{1,6})|(PP\d{1,5}_)?TP(\d{1,5})) pid=(\d+)\)\s")
# vLLM's logger: "%(levelname)s %(asctime)s [%(filename)s:%(lineno)d] %(message)s", datefmt "%m-%d %H:%M:%S" (older:
# "... %(filename)s:%(lineno)d] ..."), and its NewLineFormatter repeats that prefix before each line of a multi-line
# message (vllm-project/vllm vllm/logger.py @00656a8e), so logger.exception("WorkerProc hit an exception.") prints the
# traceback one prefixed line at a time. Read off only where the rest is the traceback's own line (a frame, its source,
# the header, the exception line), so the traceback reads as printed; other records keep their level and time.
_VLLM_LOG = re.compile(r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[?[\w.\-]+\.py:\d+\] ")
_TB_PART = re.compile(r"\s|Traceback \(most recent call|(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Interrupt|Exit)\b")
_NUMBERED = re.compile(r"\[(\d{3,9})\] ")
# (a host a paste redacted as "<2nd node server>" is a host all the same)
# NCCL before 2.3 printed its level without the word NCCL ("host:350:457 [0] misc/ibvwrap.cu:60 WARN Failed to open ...")
_NCCL = re.compile(r"([\w.\-]+|<[^<>]{1,60}>):(\d+):(\d+) \[(\d+)\] (?:[\w./\-]+[: ]\d+ )?(?:NCCL )?(INFO|WARN|TRACE|ERROR|ABORT)\b ?")
# mpirun --tag-output's "[job,rank]<stdout>:" (a paste may add a stray "[" before it), and horovodrun's own
# "[rank]<stdout>:" (horovod/horovod horovod/runner/common/util/safe_shell_exec.py, prefix_connection,
# 2626dc87a3a8eb8fb7d2216198ce45bce0f9e65a); with --timestamp-output horovodrun puts time.asctime() before it
# ("Fri Oct 23 17:16:00 2020[0]<stderr>:", get_context in the same file @b4c191c v0.24.2)
_MPI = re.compile(r"(?:[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4})?\[?\[(?:\d+,)?(\d+)\]<std(?:out|err)>:")
# a test harness's or subprocess wrapper's stream label ("stdout: ..."), and NCCL's level without its host:pid prefix
_STREAM = re.compile(r"(?:stdout|stderr): ")
# sglang's scheduler processes log "[<asctime> TP<n>] ..." ("DP<d> TP<t>" under --dp, "PP<p> TP<t>" under pipeline
# parallelism): run_scheduler_process builds the prefix, configure_logger puts it in the format (sgl-project/sglang
# python/sglang/srt/managers/scheduler.py @d51c1c2), and ModelRunner.init_torch_distributed joins the world as
# rank = tp_size * pp_rank + tp_rank. With TP alone the tp rank is the global rank; with DP or PP it is not, and the
# line names no rank. The prefix's time stays the line's time.
# A collector's date-time stamp before NCCL's own "host:pid:tid [dev] NCCL INFO" prefix (NVIDIA/nccl src/debug.cc's
# format, _NCCL above): `kubectl logs --timestamps` writes RFC 3339 ("2026-09-17T13:40:03.123456789Z "), job consoles
# "2026-09-17 13:40:03 ". Read off only when NCCL's prefix follows, so a message that starts with its own time is left
# whole; the stamp stays the line's time.
_STAMP = re.compile(r"(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?) ")
_SGLANG = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)((?: (?:DP|PP|TP|EP)\d{1,5})+)\] ")
_BARE_NCCL = re.compile(r"NCCL (WARN|INFO) ")
# PSM3's label ("machine:rank1: Assertion failure at ...", "[1705415958.879795729] machine:rank1.cpu_allreduce_test:
# Reading from remote process' memory failed"): host, the MPI rank, then the program's name for _HFI_ERROR lines
# (cornelisnetworks/opa-psm2 include/opa_udebug.h prints '<label><progname>: '; PSM3's 'host:rankN.' label is from users' logs)
_PSM = re.compile(r"(?:\[\d{9,11}\.\d{1,9}\] )?([A-Za-z][\w.\-]{0,62}):rank(\d{1,6})(?:\.[\w.\-]{1,64})?: ")
# torch_xla's xmp.spawn worker before 2.1: print('Exception in device={}: {}'.format(MP_DEVICE, e)) then exit 17
# (pytorch/xla torch_xla/distributed/xla_multiprocessing.py @1605972, _mp_start_fn): MP_DEVICE is the process's
# device on its host ("TPU:3"), a local rank; the rest is the exception's message
_XLA_DEVICE = re.compile(r"Exception in device=(?:TPU|GPU|CPU|XPU|CUDA|NEURON):(\d{1,5}): ")
_HOSTP = re.compile(r"([A-Za-z][\w.\-]{0,62}): (?=\[rank\d)")
# pdsh's (DeepSpeed's multi-node runner's) and kubectl/clush-style `HOST: ` prefix: a host-like name (it has a digit or
# a hyphen: worker-0, node01, gpu-dev006) and not a word a message itself puts before a colon (rank0:, epoch1:)
_PDSH = re.compile(r"([A-Za-z][A-Za-z0-9.]*[\d\-][A-Za-z0-9.\-]{0,60}|\d{1,3}(?:\.\d{1,3}){3}): (?=\S)")  # host names have no underscore
# (a hostfile may name its hosts by IPv4 address: "10.110.3.66: frame #16: ..." is pdsh's prefix all the same)
_NOT_HOST = re.compile(r"(?:rank|local_rank|epoch|step|iter|iteration|batch|cuda|device|layer|stage|phase|task|job|"
                       r"process|proc|thread|pid|loss|lr|top\d?|acc|utf-8|ipv[46]|python|py|cp|torch|cu|v)[\d._\-]*$|"
                       # Ascend CANN's error codes (a module letter and four digits: "EJ0001: [PID: N] ...", "EE9999:
                       # Inner Error!"; CANN hcomm src/common/error_code/error_code.cc), not hosts (round 18)
                       r"E[A-Z]\d{4}$", re.I)

_GLOG = re.compile(r"\b[IWEF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?\b")
_ISO = re.compile(r"\b(?:\d{4})-(\d\d)-(\d\d)[ T_](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?")
_DAYS = (0, 31, 60, 91, 121, 152, 182, 213, 244, 274, 305, 335)


@dataclass
class Line:
    src: int            # index of the input file
    lineno: int
    offset: int
    text: str           # without prefixes, ANSI codes and line ends
    rank: Optional[int] = None
    local_rank: Optional[int] = None
    label: Optional[int] = None   # srun --label task id
    host: Optional[str] = None
    pid: Optional[int] = None
    device: Optional[int] = None
    nccl: Optional[str] = None    # INFO / WARN / ... for NCCL's own lines
    ts: Optional[float] = None    # seconds since 1 January (year dropped)
    ts_near: bool = False         # ts is its stream's nearest stamp (for ordering), not printed on this line


def _seconds(mo: str, dd: str, hh: str, mi: str, ss: str, frac: Optional[str]) -> Optional[float]:
    m, d = int(mo), int(dd)
    if not (1 <= m <= 12 and 1 <= d <= 31):
        return None
    f = float("0." + frac) if frac else 0.0
    return ((_DAYS[m - 1] + d - 1) * 24 + int(hh)) * 3600 + int(mi) * 60 + int(ss) + f


def timestamp(text: str) -> Optional[float]:
    head = text[:120]
    if ":" not in head:
        return None   # both forms hold "HH:MM:SS"
    m = _ISO.search(head)
    if m:
        return _seconds(*m.groups())
    m = _GLOG.search(head)
    if m:
        return _seconds(*m.groups())
    return None


def clean(raw: bytes) -> str:
    """Decode (UTF-8, latin-1 bytes replaced), strip ANSI codes, CR and NUL; keep the last tqdm frame."""
    text = raw.decode("utf-8", "replace")
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    text = text.rstrip("\r\n").replace("\x00", "")
    if "\r" in text:
        # tqdm redraws with \r; an error glued after the last frame is what matters. Keep any
        # rank prefix of the physical line (torchrun prefixes the line, not each frame).
        parts = [p for p in text.split("\r") if p.strip()]
        if parts:
            m = _RANK.match(text) or _LABEL.match(text)
            last = parts[-1]
            text = (m.group(0) + last) if m and not last.startswith(m.group(0)) else last
    if len(text) > _MAX_DIGITS and _DIGIT_RUN.search(text):
        # no program prints a number of more than 64 digits (a 64-bit value has 20), and CPython (>= 3.11, gh-95778)
        # refuses int() and str() past 4,300: every reader below turns a field's digits into a number (a rank, a pid,
        # a world size it prints), so a longer run is cut here, once, for all of them
        text = _DIGIT_RUN.sub(lambda m: m.group(0)[:_MAX_DIGITS], text)
    return text


_MAX_DIGITS = 64
_DIGIT_RUN = re.compile(r"\d{%d,}" % (_MAX_DIGITS + 1))


_GLUED = re.compile(r"(?<=.)(?=\[rank\d{1,6}\]:)")
# NCCL's own lines glued together by a web page or a terminal: "...Init COMPLETE      node-a:11983:12550 [5] NCCL INFO ..."
# the look-behind starts a match only where the run begins: a search that restarts inside a run its first quantifier
# consumed is O(n^2) on a long line (round 21: benchmarks/bench_regex.py)
_GLUED_NCCL = re.compile(r"(?<!\s)\s{2,}(?=[\w.\-]+:\d+:\d+ \[\d+\] (?:[\w./\-]+:\d+ )?NCCL (?:INFO|WARN|TRACE|ERROR)\b)")


def parse_all(src: int, lineno: int, offset: int, raw: bytes) -> List[Line]:
    """One physical line -> its logical lines. Ranks writing to one stream interleave without a
    newline (`[rank0]: 45%|███ [rank1]:RuntimeError: ...`); each `[rankN]:` starts a new line."""
    text = clean(raw)
    if text.count(" NCCL ") > 1 or (" NCCL " in text and not _NCCL.match(text)):
        parts = [p for p in _GLUED_NCCL.split(text) if p.strip()]
        if len(parts) > 1:
            return [_parse_text(src, lineno, offset, p) for p in parts[:64]]
    if "[rank" in text[1:]:
        parts = [p for p in _GLUED.split(text) if p.strip()]
        if len(parts) > 1:
            return [_parse_text(src, lineno, offset, p) for p in parts[:64]]
    return [_parse_text(src, lineno, offset, text)]


def parse(src: int, lineno: int, offset: int, raw: bytes) -> Line:
    return _parse_text(src, lineno, offset, clean(raw))


# torch_npu's error header (Ascend/pytorch torch_npu/csrc/core/npu/NPUException.cpp @d396f13, formatErrorCode):
# "\n[ERROR] " + time + " (PID:" + getpid() + ", Device:" + device + ", RankID:" + OptionsManager::GetRankId() + ") ERR"
# + module and code ("[ERROR] 2024-05-21-11:57:54 (PID:927000, Device:3, RankID:3) ERR02200 DIST call hccl api failed.");
# RankID is the job's RANK, -1 when the launcher set none (a vLLM worker's: then the line names no rank)
_NPU_ERR = re.compile(r"\[ERROR\] \d{4}-\d\d-\d\d-\d\d:\d\d:\d\d(?:\.\d+)? \(PID:(\d+), Device:(-?\d+), RankID:(-?\d+)\) ")
_QUOTE = re.compile(r">(?: ?>)* (?=\S|\s)")   # a Markdown quote of a pasted log ("> [rank0]: ...")
# Markdown around a pasted log's lines (round 25, triagecol31 b226_13: "**NameError: name 'MaskVAR' is not defined**"
# between the frames, the traceback opened and closed by single backticks): a bold line and the backtick that opens a
# traceback or closes an exception line are the page's, not the program's (GitHub-flavored Markdown's emphasis and
# code spans, spec 0.29-gfm sections 6.1 and 6.4)
_MD_BOLD = re.compile(r"(\*\*|__)(?=[^\s*_])(.+?)(?<=[^\s*_])\1\s*$")   # not a run of stars: "***** eval metrics *****"
_MD_EXC = re.compile(r"[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)(?::|$)")
_MD_OPENS = ("`Traceback (most recent call last):", '`  File "', '`File "')


def _parse_text(src: int, lineno: int, offset: int, text: str) -> Line:
    q = _QUOTE.match(text)
    if q:
        text = text[q.end():]
    if text[:1] in "*_`":
        m = _MD_BOLD.match(text)
        if m and _MD_EXC.match(m.group(2)):  # an exception line in bold; a bold heading ("**Error with full stack
            text = m.group(2)                # trace**" of an issue template) stays the page's prose
        elif text.startswith(_MD_OPENS):
            text = text[1:]
    if text.endswith(": `"):
        text = text[:-2]
    line = Line(src, lineno, offset, text)
    stamp = None
    for _ in range(6):  # stacked prefixes, outermost first
        s = line.text
        m = _STAMP.match(s) if s[:1].isdigit() else None
        if m and _NCCL.match(s, m.end()):
            stamp = timestamp(m.group(1))
            line.text = s[m.end():]
            continue
        m = _SGLANG.match(s) if s.startswith("[") else None
        if m:
            stamp = timestamp(m.group(1))
            tp = re.fullmatch(r" TP(\d+)", m.group(2))
            if tp and line.rank is None:
                line.rank = int(tp.group(1))
            line.text = s[m.end():]
            continue
        m = _RANK.match(s)
        if m:
            line.rank = int(m.group(1))
            line.text = s[m.end():]
            continue
        m = _PARLAI.match(s) if s.startswith("rank:") else None
        if m:
            line.rank = int(m.group(1))
            line.text = s[m.end():]
            continue
        m = _NCCL.match(s)
        if m:
            line.host, line.pid, line.device, line.nccl = m.group(1), int(m.group(2)), int(m.group(4)), m.group(5)
            line.text = s[m.end():]
            break
        m = _LABEL.match(s)
        if m and line.label is None and line.rank is None:
            line.label = int(m.group(1))
            line.text = s[m.end():]
            continue
        m = _MPI.match(s)
        if m:
            line.rank = int(m.group(1))
            line.text = s[m.end():]
            continue
        m = _DEFAULT.match(s)
        if m:
            line.local_rank = int(m.group(1))
            line.text = s[m.end():]
            continue
        m = _VLLM_WORKER.match(s) if s[:1] == "(" and "pid=" in s[:80] else None
        if m:
            line.pid = int(m.group(5))
            if line.rank is None and (m.group(2) is not None or (m.group(4) is not None and m.group(3) is None)):
                line.rank = int(m.group(2) if m.group(2) is not None else m.group(4))
            line.text = s[m.end():]
            continue
        m = _VLLM_LOG.match(s) if s[:1] in "DIWEC" and "] " in s[:80] else None
        if m and _TB_PART.match(s, m.end()):
            line.text = s[m.end():]
            continue
        m = _RAY.match(s)
        if m:
            line.pid = int(m.group(2))
            if m.group(3):
                line.host = m.group(3)
            line.text = s[m.end():]
            continue
        m = _NUMBERED.match(s) or _STREAM.match(s) or _EMPTY.match(s)
        if m:
            line.text = s[m.end():]
            continue
        m = _BARE_NCCL.match(s)
        if m and line.nccl is None:
            line.nccl = m.group(1)
            line.text = s[m.end():]
            break
        m = _XLA_DEVICE.match(s) if s.startswith("Exception in device=") else None
        if m:
            line.local_rank = int(m.group(1))
            line.text = "Exception: " + s[m.end():]
            break
        m = _PSM.match(s) if line.rank is None and ":rank" in s[:140] else None
        if m and not _NOT_HOST.match(m.group(1)):
            line.host, line.rank = m.group(1), int(m.group(2))
            line.text = s[m.end():]
            continue
        m = _HOSTP.match(s)
        if m:
            line.host = m.group(1)
            line.text = s[m.end():]
            continue
        m = _PDSH.match(s) if line.host is None and line.rank is None and line.label is None else None
        if m and not _NOT_HOST.match(m.group(1)):
            line.host = m.group(1)
            line.text = s[m.end():]
            continue
        break
    if line.rank is None and line.text.find("RankID:", 0, 240) >= 0:
        m = _NPU_ERR.search(line.text, 0, 240)
        if m and int(m.group(3)) >= 0:
            line.rank = int(m.group(3))   # torch_npu's error header names the process's RANK (-1: not set)
            if line.pid is None:
                line.pid = int(m.group(1))
    if line.rank is None and line.local_rank is None and ", rank=" in line.text[:120]:
        m = _OLMO.match(line.text)
        if m:
            line.local_rank = int(m.group(1))   # the text keeps its time and level (the rules read them)
    line.ts = timestamp(line.text)
    if line.ts is None:
        line.ts = stamp
    return line
