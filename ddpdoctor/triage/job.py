"""Reconstruct the job from its events: ranks, hosts, world size, versions, who died how and when, and
the watchdog cross-tab of sequence numbers. Memory stays bounded: repeated events are counted, and
only the first few of each kind are kept.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Tuple

from ..facts import messages as _messages
from ..facts import spawn_lines
from ..facts import faulthandler as _faulthandler
from ..facts import pyexc as _pyexc
from .blocks import SourceBlocks
from .lines import Line, timestamp
from . import prose as _prose
# the text-only judgement (prose, source code, configs, formats, quotes): prose.py
from .prose import (
    _CHANGE_DOC,
    _CHANGE_WORDS,
    _EXAMPLE_INTRO,
    _HEADING,
    _PLAIN_TITLE,
    _HEADING_QUOTE,
    _HEADING_FIX,
    _MPICH_ABORT,
    _PR_LINK,
    _TEST_RUN_FAILED,
    is_format_template,
)
from .signatures import BASH_LINE_ALT, GLUED_TO_PROGRESS, KILLED_ALT, KILLED_GLUED, SIGNAL_OF_TEXT, Event, entry_of, survivable, user_frame

KEEP = 8  # examples kept per event kind

SIGNALS = {1: "SIGHUP", 2: "SIGINT", 4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE", 9: "SIGKILL",
           11: "SIGSEGV", 13: "SIGPIPE", 15: "SIGTERM"}
SIGNUM = {v: k for k, v in SIGNALS.items()}

# Exceptions that are the *consequence* of another rank's failure, never a root cause on their own.
_CONSEQUENCE = re.compile(
    r"Watchdog caught collective|\] Caught collective operation timeout|ChildFailedError|Connection reset by peer|Connection closed by peer|Broken pipe"
    r"|NCCL communicator was aborted|remote process exited|ncclRemoteError|DistBackendError: \[?\d*\]?.*[Tt]imeout"
    r"|Timed out waiting \d+ms|ProcessGroupNCCL.*timed out|Some NCCL operations have failed or timed out"
    r"|terminate called|SignalException|Process \d+ terminated with signal SIGTERM|KeyboardInterrupt"
    r"|NCCL error: remote process|ProcessExitedException|ProcessRaisedException"
    r"|because its node has died"    # Ray: the actor's node died (gcs_actor_manager.cc GenNodeDiedCause): LOG022's
    r"|because its owner has died"   # Ray: the process that created the actor died first (GenOwnerDiedCause)
    # Gloo's pair-level timeouts and closures (facebookincubator/gloo gloo/transport/tcp/{pair,buffer,unbound_buffer}.cc):
    # how a collective timeout or a peer's death reaches this rank, not a failure of its own
    r"|Application timeout caused pair closure|(?:Read|Write) timeout \[|Socket (?:unexpectedly )?closed \[|\] writev \[[^\]]+\]:\d+: "
    # (an older Gloo's read that hit its receive timeout printed the errno's text: "Read error [peer]:port: Resource
    # temporarily unavailable", EAGAIN on the blocking socket = the timeout, pytorch/gloo pair.cc @5b46c340 Pair::read)
    r"|Read error \[[^\]]+\]:\d+: Resource temporarily unavailable"
    r"|Horovod has been shut down"   # another rank's failure stopped Horovod (horovod/common/common.h SHUT_DOWN_ERROR)
    # ProcessGroupGloo::monitoredBarrier (torch/csrc/distributed/c10d/ProcessGroupGloo.cpp): rank 0 names the ranks that
    # never reached the barrier, and a rank that reached it reports rank 0's failure: the named ranks are the story
    r"|failed to pass monitoredBarrier in|successfully reached monitoredBarrier, but received errors")
# a data row of Ray Tune's errored-trials table: trial name, failures (a "*" when the trial was retried), error file
_TUNE_ERRORED_ROW = re.compile(r"^[|│]\s*(?P<trial>[^\s|│]+)\s*(?:\||\s)\s*(?P<n>\d+)\*?\s*(?:\||\s)\s*"
                               r"(?P<file>[^\s|│]+)\s*[|│]$")
_LIB_FRAME = re.compile(r"[/\\](?:site-packages|dist-packages|lib/python\d[\d.]*)[/\\]|^<frozen |^<string>")

# torchrun's failure table and the watchdog's exception, compiled at import (served by ddpdoctor.recache's cache)
# rather than inside the per-line path, where `re` parsed them again on every run (round 16: after the input is opened
# nothing new is kept in that cache)
_NCCL_ERROR_WORDS = re.compile(r"NCCL error|DistBackendError")
_TABLE_RANK_ROW = re.compile(r"rank\s*: \d+ \(local_rank: \d+\)$")
_TABLE_ROW_HEAD = re.compile(r"\[\d+\]:")
_ROW_RANK = re.compile(r"(\d+)(?: \(local_rank: (\d+)\))?")
_ROW_EXITCODE = re.compile(r"(-?\d+)(?: \(pid: (\d+)\))?")
_ROW_SIGNAL = re.compile(r"Signal (\d+) \((SIG\w+)\)", re.I)

# bash's own report of a job that died of SIGKILL, and nothing else that says "Killed": the word alone (a foreground
# job), "script.sh: line 12: 4242 Killed   python train.py" (a script), "[1]+  Killed   python train.py" (job control)
# a rank's global rank as a launcher writes it into the command it runs (horovodrun's HOROVOD_RANK, torchrun's and
# mpirun's RANK / OMPI_COMM_WORLD_RANK / PMI_RANK, srun's SLURM_PROCID)
_ENV_RANK = re.compile(r"(?:^|\s)(?:HOROVOD_RANK|RANK|OMPI_COMM_WORLD_RANK|PMI_RANK|SLURM_PROCID)=(\d+)\b")
# the header of Horovod's per-rank stall list (stall_inspector.cc: "Stalled ranks:" to v0.20.0, "Missing ranks:" after)
_HVD_HEADER = re.compile(r"(?:^|[\s:])(?:Stalled|Missing) ranks:\s*$")
# (or glibc's translation of "Killed" under the job's locale, data/strsignal.json: "已杀死" under zh_CN; or the word glued to
# the end of a progress bar drawn with "\r" and no newline before it: "... elapsed: 799s, ETA: 157s已杀死")
_K = "(?:" + KILLED_ALT + ")"
_SHELL_KILLED = re.compile(r"^(?:%s|.*: (?:line \d+:|%s) *\d+ %s(?: +.*)?|\[\d+\][+-]? +(?:\d+ +)?%s(?: +.*)?|%s%s|Killed%s.*)$"
                           % (_K, BASH_LINE_ALT, _K, _K, GLUED_TO_PROGRESS, _K, KILLED_GLUED))


@dataclass
class Occ:
    """Every occurrence of one event kind: the count, the first few, the ranks and hosts involved."""
    count: int = 0
    first: List[Event] = field(default_factory=list)
    ranks: set = field(default_factory=set)
    hosts: set = field(default_factory=set)

    def add(self, ev: Event, rank: Optional[int], host: Optional[str]) -> None:
        self.count += 1
        if len(self.first) < KEEP:
            self.first.append(ev)
        if rank is not None:
            self.ranks.add(rank)
        if host:
            self.hosts.add(host)


# a shell prompt that (re)runs a training launch (round 15 b96_04: a mistyped launch failed at once and was typed
# again). The prompt forms come from the shells' defaults, not from cases: Debian's skel .bashrc PS1
# '${debian_chroot:+($debian_chroot)}\u@\h:\w\$ ' ("root@host:~/dir# "), Red Hat's /etc/bashrc '[\u@\h \W]\$ '
# ("[user@host dir]$ "), bash's built-in '\s-\v\$ ' ("bash-5.1$ "), zsh's '%m%# ' ("host% ", "host# ") and macOS's
# '%n@%m %1~ %# ' ("user@host dir % "), oh-my-zsh's "➜  dir git:(main) ✗ ", a bare "$ "/"# "/"% "; conda's and venv's
# "(env) " before any of them; IPython/Jupyter's shell escape "!cmd" (a cell line). The launch: python -m
# torch.distributed.*, torchrun, deepspeed, accelerate launch, python x.py, and SLURM's/MPI's srun, sbatch, mpirun,
# horovodrun typed at the prompt.
_PROMPT_LAUNCH = re.compile(
    r"^\s*(?:\([^()\s]+\)\s*)?(?:[\w.\-]+@[\w.\-]+:\S*\s*[#$]|\[[\w.\-]+@[\w.\-]+(?:\s+[^\]]*)?\]\s*[#$]"
    r"|[\w.\-]+@[\w.\-]+\s+\S+\s+[%#]|[\w.\-]*[#$%]|➜(?:\s+\S+)*?\s+[✗✔]?)\s+"
    r"(?:[A-Z_][A-Z0-9_]*=\S*\s+)*(?:python[\d.]*\s+-m\s+torch\.distributed\S*|torchrun|deepspeed|"
    r"accelerate\s+launch|python[\d.]*\s+\S+\.py|srun|sbatch|mpirun|horovodrun)\b"
    r"|^\s*!(?:[A-Z_][A-Z0-9_]*=\S*\s+)*(?:python[\d.]*\s+-m\s+torch\.distributed\S*|torchrun|deepspeed|"
    r"accelerate\s+launch|python[\d.]*\s+\S+\.py)\b")
_RUN_FAILURE_KINDS = frozenset({"torchrun_failed", "spawn_exit", "srun_task", "shell_killed", "shell_signal", "zsh_signal",
                                "mpirun_exit", "mpich_exit", "horovod_exit", "launcher_rank_exit", "segfault", "oom_killer",
                                "watchdog", "watchdog_seq", "nccl_aborted", "teardown_abort"})
_LAUNCH_WORDS = ("python", "torchrun", "deepspeed", "accelerate", "srun", "sbatch", "mpirun", "horovodrun")
# CPython compiling a shell script: `python tools/dist_train.sh` (instead of bash) stops at the script's first shell
# line with no traceback header, only the file, the line and a caret (Lib/traceback.py format_exception_only for a
# SyntaxError): '  File "./tools/dist_train.sh", line 3' / '    CONFIG=$1' / '           ^' / 'SyntaxError: invalid
# syntax' (open-mmlab/mmdetection#3520, #1135; round 18, batch 132)
_SHELL_FRAME = re.compile(r'\s*File "(?P<path>[^"]+\.(?:sh|bash|zsh|ksh))", line \d+\s*$')
_SHELL_SYNTAX = re.compile(r"SyntaxError: ")
_MPIRUN_CODE = re.compile(r"^\s*Exit code:\s*(-?\d+)\s*$")   # the line after Open MPI's "Process name: [[j,1],R]"


# subprocess.CalledProcessError's text for the legacy launcher's child (CPython Lib/subprocess.py @v3.8.10
# CalledProcessError.__str__: "Command '%s' died with %r." for a negative returncode, a signals.Signals repr
# "<Signals.SIGSEGV: 11>"; else "Command '%s' returned non-zero exit status %d.")
_LEGACY_LAUNCH_EXIT = re.compile(r"Command '\[.*?'--local_rank=(?P<local_rank>\d+)'.*?\]' (?:died with <Signals\.(?P<sig>SIG[A-Z0-9]+): "
                                 r"(?P<signo>\d+)>|returned non-zero exit status (?P<code>-?\d+))")


@dataclass
class Exit:
    """A process of the job ended: from torchrun's lines, the elastic table, an error file, mp.spawn or a run report."""
    rank: Optional[int]
    local_rank: Optional[int]
    host: Optional[str]
    code: Optional[int]
    signal: Optional[str]
    pid: Optional[int]
    ts: Optional[float]
    where: Optional[Line]
    source: str
    message: str = ""
    rank_guessed: bool = False   # the rank is the local rank, taken as global because one node is in sight
    guessed_local: Optional[int] = None  # a local rank a launcher's command names, which may be another process's

    @property
    def cause(self) -> str:
        if self.signal:
            return self.signal
        if self.code is None:
            return "unknown"
        return "exception" if self.code == 1 else f"exit {self.code}"


@dataclass
class Failure:
    """What we know about one rank's end: the earliest evidence of each kind."""
    rank: Optional[int]
    host: Optional[str] = None
    exits: List[Exit] = field(default_factory=list)
    exceptions: List[Tuple[Event, Optional[dict]]] = field(default_factory=list)  # (exception event, user frame)

    def first_ts(self) -> Optional[float]:
        tss = [e.ts for e in self.exits if e.ts is not None]
        tss += [ev.line.ts for ev, _ in self.exceptions if ev.line.ts is not None]
        return min(tss) if tss else None


class Job:
    """Everything the inputs said, aggregated."""

    def __init__(self) -> None:
        self._blocks = SourceBlocks()
        self.paths: List[str] = []
        self.occ: Dict[str, Occ] = {}
        self.ranks: set = set()
        self.hosts: set = set()
        self.rank_host: Dict[int, str] = {}
        self.world: Optional[int] = None
        self.world_sources: Dict[str, int] = {}
        self.versions: Dict[str, Dict[str, str]] = {}   # who (host:..., rank:N, file) -> {torch, nccl, cuda}
        self.watchdog: Dict[Tuple[str, int], dict] = {}  # (pg, rank) -> last record
        self.exits: List[Exit] = []
        self.exceptions: Dict[Optional[int], List[Tuple[Event, Optional[dict]]]] = {}
        self.flight: List[dict] = []          # Flight Recorder dumps, one per rank (flight.py)
        self.reports: List[dict] = []         # ddpdoctor run reports (records.py)
        self.notes: List[str] = []
        self.lines_read = 0
        self.bytes_read = 0
        self._frames: Dict[Tuple[int, Optional[int]], Optional[dict]] = {}
        self._tb: Dict[tuple, List[tuple]] = {}     # stream -> (file, function) of its current traceback's frames
        # CPython faulthandler's dumps of a fatal signal (facts.faulthandler): one dict each, in log order ("line" its
        # header, "signal", "rank", "frame" the crashing thread's innermost frame of the program's own code, "top" its
        # innermost frame); _fault_open: the stream whose dump is still being read
        self.fault_dumps: List[dict] = []
        self._fault_open: Dict[tuple, dict] = {}
        self.oom_frames: List[List[tuple]] = []     # the traceback frames that led to each CUDA OOM seen
        # file -> the first argparse usage banner (catalogue class argparse_usage) that only its own wrapped lines,
        # blank lines or other banners follow so far: argparse prints it alone before its "PROG: error:" line
        # (ArgumentParser.error) or as the head of -h's help; one still open at the end is a banner the log ends in
        # (LOG023). usage_after: what closed it (the error line, the help's "options:", any other line)
        self.usage_open: Dict[int, Line] = {}
        self.usage_after: Dict[int, Line] = {}
        self._table: Optional[dict] = None
        self._order = 0
        self._rank_prefixed = False
        # file -> numbers of a build tool's step prefix (Cloud Build's 'Step #3: ', 'Step #3 - "train": '): a bare
        # '3: ' in that file is the same prefix cut by the paste, not srun's task label
        self.step_labels: Dict[int, set] = {}
        self._stream_ts: Dict[tuple, float] = {}
        self.first_ts: Optional[float] = None
        self.last_ts: Optional[float] = None
        self.sort_keys: Dict[str, tuple] = {}   # finding title -> (stage, time, (file, line)); see rules/__init__
        self.cache: Dict[str, object] = {}     # verdict.py's memo (root cause, Flight Recorder analysis)
        self.selected: Optional[set] = None    # rule IDs --only/--ignore left (None: all)
        self.waiting_frames: Dict[int, dict] = {}  # rank -> user frame of its timeout's traceback
        # Evidence for "never silent" (LOG028): each stream's first failure line, its last line, whether it was
        # making progress, and the signs that the job ended well.
        self.first_fail: Dict[tuple, Line] = {}    # stream -> first line that looks like a failure
        # streams whose first failure line is one only its words mark ("Importing plotly failed."): training progress
        # after it in the same stream shows the process survived it, and the next failure line takes its place
        self._fail_by_words: set = set()
        self._example: Dict[int, int] = {}          # source -> lines into the example a hypothetical intro announced
        self._warn_header: dict = {}   # key -> (src, lineno) of a Python warning's "file:N: XWarning: msg" line
        self.survived: Dict[tuple, Line] = {}
        # streams whose first failure line is a catalogue entry marked "survivable" (signatures.survivable), and those
        # lines once progress in the stream passed them: in a stream that is not one process's (an unprefixed paste of
        # several ranks) that progress may be another rank's, so finish() makes them failure lines again
        self._fail_survivable: set = set()
        self._survived_entry: Dict[tuple, Line] = {}
        self.last_line: Dict[tuple, Line] = {}     # stream -> last line handed on (the file's tail is handed on)
        # a framework's caught-failure line (catalogue class work_unit_failed_caught) whose exception is printed on the
        # next line without its type (AutoGluon's _train_and_save logs str(e) there): file -> that line, and
        # (file, line number) -> the next line's text, the failure's cause in LOG028's title (round 24, triage32)
        self._caught_open: Dict[int, Line] = {}
        self._errored_table: Dict[int, Line] = {}   # file -> Ray Tune's "Number of errored trials" line, its table open
        self.caught_message: Dict[tuple, str] = {}
        # stream -> last line read whatever the reader's fast path: in a file's head, or carrying a keyword. Only
        # these say when a rank went quiet, so a big log and a small one are judged alike.
        self.last_seen: Dict[tuple, Line] = {}
        self.head_bytes = 64 << 10                 # set by the reader's caller: reader.HEAD_FULL
        self.progress_lines = 0                    # training progress seen (steps, tqdm, loss dicts)
        self.change_doc: Optional[Line] = None     # a line that marks the text a pull request's or feature request's
        self._headed: Dict[int, bool] = {}          # source -> its first Markdown heading (its title) was seen
        self._caption: Dict[int, tuple] = {}        # source -> (stream, line) of a colon-less label that opened a failure
        self._title: Dict[int, list] = {}           # source -> [its title (first heading), output under it?, -, held]
        self._texted: set = set()                  # sources whose first non-blank line was read (a plain title's place)
        self.titles_over_output: List[Line] = []     # titles (first headings) whose body holds program output
        self.frame_lines = 0                        # Python traceback frames ('  File "x.py", line 3, in f')
        self.run_lines = 0                          # lines with a run's prefix (a rank, NCCL's host:pid:tid, a host)
        self.last_progress: Optional[Line] = None  # the last of them (LOG029 says where the progress stops)
        self.stream_progress: Dict[tuple, Line] = {}   # stream -> its last progress line (went_on_after)
        self.stream_progress_tail: Dict[tuple, List[int]] = {}   # stream -> line numbers of its last 3 progress lines
        self.progress_stamps: List[float] = []     # own times of the last progress lines (at most 64)
        self.last_stamped_progress: Optional[Line] = None
        self.world_guessed = False                 # world size from the highest rank seen, not from a count
        self.rankless_timeouts: List[tuple] = []    # (line, fields) of watchdog lines that name no rank
        self.traceback_ranks: set = set()           # ranks whose own traceback is in the logs (even a consequence's)
        self._tb_header: set = set()                # streams where a traceback's header was seen
        self._unraisable: dict = {}                 # streams inside an "Exception ignored in: ..." report: header seen
        self._prev_by_src: Dict[int, Line] = {}     # the previous line of each file, whatever its stream
        # the lines a process prints right before it aborts itself (the C++ terminate handler and its what() line,
        # glibc's failed assert: data/abort_texts.json), per file, the last few: why a later SIGABRT death happened
        self.abort_lines: Dict[int, List[Line]] = {}
        self._spawn_owner: Dict[int, int] = {}      # file -> the mp.spawn process whose re-raised traceback it shows
        self.spawn_failed: set = set()               # mp.spawn indices whose failure the parent re-raised
        self.spawn_stopped: List[Tuple[int, Line]] = []   # (pid, line): processes mp.spawn terminated, still running
        self.first_stamped: Optional[Line] = None    # the line that printed first_ts (its own stamp)
        self.last_stamped: Optional[Line] = None     # the latest stamp a line printed itself (where a log stops, in time)
        self._unstamped: Dict[tuple, List[Line]] = {}  # stream -> its lines before its first time stamp
        self.hvd_rows: List[tuple] = []            # Horovod's "Missing ranks:" rows: (rank, ops, past shutdown, line)
        self._hvd_open: Dict[tuple, int] = {}       # stream -> line number of its last "Missing ranks:" header or row
        self._chain: Dict[tuple, list] = {}         # stream -> [first line, lines, confirmed, code, via a transport] of its NCCL error trace
        self._warned: set = set()                   # streams that printed an NCCL WARN
        self.watchdog_ranks: set = set()            # ranks that printed a ProcessGroupNCCL / watchdog line
        self.store_lines: set = set()               # (file, line) of exceptions raised by the rendezvous store
        self.setup_lines = 0                        # distributed set-up lines seen (NCCL INFO, frameworks' init lines)
        self.comm_rank: Dict[tuple, int] = {}       # (host, pid, comm pointer) -> its rank, from NCCL's "comm 0x.. rank R nranks N" line
        self.coll_trace: Dict[tuple, dict] = {}     # (host, pid, comm pointer) -> {opCount: (op name, nranks, line)} (NCCL COLL trace)
        self.last_setup: Dict[tuple, Line] = {}     # stream -> its last set-up line
        self.nnodes: Optional[Tuple[int, Line]] = None   # the node count a launch line or torchrun's configs ask for (> 1)
        self.one_node: Optional[Line] = None   # a launch line that starts one node only (job.py _ONE_NODE)
        self.rdzv_line: Optional[Line] = None       # the last line that says the agent waits in the rendezvous
        self.rdzv_done = False                      # a line says the rendezvous completed or the workers started
        self.rank_claims: Dict[tuple, List[Line]] = {}   # (file, rank) -> lines where a process said it is that rank
        # file -> {rank: first line} of the lines where a process printed its launcher-set RANK variable ("RANK=1 --
        # LOCAL_RANK=0"): torchrun's agent gives each worker RANK=<global rank> in its environment
        # (torch/distributed/elastic/agent/server/local_elastic_agent.py _start_workers @cf30153c); a file whose only
        # such line names one rank holds that rank's output (unexplained.failure_lines; round 24, issue 24: b217_09)
        self.env_ranks: Dict[int, Dict[int, Line]] = {}
        # a rank the reporter's own words name ('it fails on rank 3'), in a line no process printed (no prefix):
        # file -> {rank: its first such line}; LOG028 takes it for an unranked failure only as a guess, said so
        self.prose_ranks: Dict[int, Dict[int, Line]] = {}
        # stream -> (first frame, frames) of a traceback whose header is not in the log (a paste cut at its top); two
        # frames or more, and no other failure line in the stream, make it the stream's failure (unexplained.py)
        self.headless_frames: Dict[tuple, Tuple[Line, int]] = {}
        self.last_headless_frame: Dict[tuple, Line] = {}   # stream -> its last frame line seen without a header
        self.last_frame: Dict[tuple, Line] = {}   # stream -> its last traceback frame line (Python, rich, C++)
        self._ipy_body: Dict[tuple, Line] = {}   # stream -> the last line of an IPython frame's arrow and context run
        self.first_warn: Dict[tuple, Line] = {}    # stream -> its first NCCL WARN that was not (yet) a failure
        self.nccl_pids: set = set()                # (file, pid) of the processes that printed NCCL's own lines
        self.relaunch: Dict[int, Line] = {}        # file -> its last shell-prompt line that runs a training launch
        self._mpirun_code: Dict[int, tuple] = {}   # file -> (line number, Exit) of Open MPI's "Process name: [[j,1],R]"
        self._shell_frame: Dict[int, tuple] = {}   # file -> (line number, path) of a SyntaxError frame in a shell script
        self._record_owner: Dict[int, Optional[tuple]] = {}   # file -> (rank, line) of a traceback its rank prefix opened

    # ------------------------------------------------------------ feeding

    def _fault_line(self, line: Line) -> None:
        """Read CPython faulthandler's dump of a fatal signal (Modules/faulthandler.c, Python/traceback.c): its header
        names the signal, the "Current thread" (or "Stack") block's frames are the crashing thread's, innermost
        first. The dump ends at the first line that is none of its own (a blank line is)."""
        key = self._stream(line)
        m = _faulthandler.header().search(line.text) if "Fatal Python error: " in line.text else None
        if m:
            dump = {"line": line, "what": m.group("what"), "signal": _faulthandler.signal_of()[m.group("what")],
                    "rank": self.who(line), "state": None}
            self.fault_dumps.append(dump)
            self._fault_open[key] = dump
            return
        dump = self._fault_open.get(key)
        if dump is None:
            return
        text = line.text.strip()
        if not text or text.endswith(_faulthandler.doc()["no_frame"]):
            return
        th = _faulthandler.thread().search(line.text)
        if th:
            dump["state"] = "current" if th.group("current") else "other"
            return
        fr = _faulthandler.frame(line.text)
        if fr is not None:
            if dump["state"] == "current":
                dump.setdefault("top", fr)
                if "frame" not in dump and not _LIB_FRAME.search(fr["file"]):
                    dump["frame"] = fr
            return
        del self._fault_open[key]

    def _rendezvous_line(self, line: Line) -> None:
        """A multi-node launch's node count (torchrun's `--nnodes 2` / `--nnodes=2:4` on its command line, or its launch
        configs' `min_nodes : 2`), and whether the rendezvous got past its wait (unexplained.rendezvous_wait)."""
        if self.one_node is None and "per" in line.text and _ONE_NODE.search(line.text) \
                and not _MULTI_NODE.search(line.text):
            self.one_node = line
        m = _NNODES.search(line.text)
        if m:
            n = int(m.group("flag") or m.group("config"))
            if n > 1 and self.nnodes is None:
                self.nnodes = (n, line)
        if _RDZV_DONE.search(line.text):
            self.rdzv_done = True
        elif _RDZV_WAIT.search(line.text):
            self.rdzv_line = line

    def _bare_exception(self, line: Line, evs: Iterable[Event]) -> list:
        """The signatures' events of a line, with an exception event added where the line is a traceback's last line
        whose class has no Error/Exception suffix ("StopIteration", "queue.Empty": CPython's
        traceback.format_exception_only, data/python_exceptions.json): at column 0, under its stream's last frame
        (the frame's header one line up, or its source lines between them). SystemExit and KeyboardInterrupt are
        not read (data/python_exceptions.json "not_failures": an exit by design, the user's Ctrl-C)."""
        evs = list(evs)
        lf = self.last_frame.get(self._stream(line))
        if lf is None or lf.src != line.src or not 1 <= line.lineno - lf.lineno <= 3 or 'File "' not in lf.text:
            return evs
        prev = self._prev_by_src.get(line.src)
        if line.lineno - lf.lineno > 1 and (prev is None or prev.text[:1] not in (" ", "\t")):
            return evs
        if any(ev.kind == "exception" for ev in evs):
            return evs
        bare = _pyexc.bare_exception(line.text.strip())
        if bare is None:
            return evs
        return evs + [Event("exception", line, {"type": bare[0], "msg": bare[1]})]

    def _legacy_launch_exit(self, line: Line, key: tuple) -> bool:
        """torch.distributed.launch before torchrun (torch <= 1.8) waits for its processes in local-rank order and raises
        subprocess.CalledProcessError(returncode=process.returncode, cmd=...) for the first that exited non-zero: CPython
        prints "Command '[..., '--local_rank=N', ...]' returned non-zero exit status C." or "died with <Signals.SIGSEGV:
        11>." (Lib/subprocess.py CalledProcessError.__str__, a negative returncode being a signal). The command is
        process.args, the failed process's own, in the older launcher (tulsi123/pytorch, a fork of pytorch/pytorch,
        torch/distributed/launch.py @5f811600), but `cmd`, the last process the spawn loop started, in the later one
        (vdabravolski/pytorch's fork @cadd81ae, the form with --use_env/--no_python; DeepSpeed's launcher raises it the
        same way). So the process failed with that exit, and its local rank is N only for N = 0 (one process, or the
        first one); a higher N is said as a guess, in words only (no rank subject: tests/test_triage_round6_1205.py). A launcher's exit, not the program's traceback (which is above it,
        or in the process's own output)."""
        m = _LEGACY_LAUNCH_EXIT.search(line.text)
        if m is None:
            return False
        tb = self._tb.get(key) or []
        if tb and not any(f.replace("\\", "/").endswith(("torch/distributed/launch.py", "deepspeed/launcher/launch.py"))
                          for f, _fn in tb):
            return False   # a program's own subprocess call that passes --local_rank: not a launcher's report
        lr = int(m.group("local_rank"))
        if m.group("signo"):
            signo = int(m.group("signo"))
            code, sig = -signo, SIGNALS.get(signo) or m.group("sig")
        else:
            code = int(m.group("code"))
            code, sig = code, (SIGNALS.get(-code) if code < 0 else None)
        self.exits.append(Exit(None, lr if lr == 0 else None, line.host or self._label_host(line), code, sig, None,
                               line.ts, line, "torch.distributed.launch", guessed_local=lr if lr != 0 else None))
        return True

    def _stream(self, line: Line) -> tuple:
        """One rank's (or task's) output within one file: where its traceback frames and times belong."""
        r = self.who(line)
        return (line.src, r if r is not None else line.label)

    def who(self, line: Line) -> Optional[int]:
        """The global rank a line belongs to, if it can be told. srun's `--label` task id is the rank
        when no line carries torchrun's `[rankN]:` (then srun started one task per node)."""
        if line.rank is not None:
            self._rank_prefixed = True
            return line.rank
        if line.local_rank is not None and not self._rank_prefixed:
            return line.local_rank  # older torchrun --tee: [defaultN]: is the local rank (the rank on one node)
        if line.label is not None and not self._rank_prefixed and line.label not in self.step_labels.get(line.src, ()):
            return line.label
        return None

    def feed_line(self, line: Line, evs: Iterable[Event]) -> None:
        t = line.text
        if self._caught_open:
            w = self._caught_open.pop(line.src, None)
            if w is not None and line.lineno == w.lineno + 1 and t.strip():
                self.caught_message[(w.src, w.lineno)] = t.strip()[:160]
        if self._errored_table:
            self._errored_row(line)
        if "fail" in t:
            evs = list(evs)
            if any(ev.kind == "work_unit_failed_caught" for ev in evs):
                self._caught_open[line.src] = line
                self._caught_first(line)
        elif "errored trials" in t:
            evs = list(evs)
            if any(ev.kind == "work_unit_failed_caught" for ev in evs):
                self._errored_table[line.src] = line
                self._caught_first(line)
        if self.usage_open and line.src in self.usage_open:
            self._after_usage(line)
        if t[:1] not in (" ", "\t", "") and "rror" not in t:
            evs = self._bare_exception(line, evs)
        if "Fatal Python error: " in t or self._fault_open:
            self._fault_line(line)
        if self._caption and line.src in self._caption:
            self._after_caption(line)
        code = self._blocks.code(line.src, t, line.rank is not None or line.label is not None or line.nccl is not None
                                 or line.host is not None or (line.ts is not None and not line.ts_near))
        if code:
            # source code shown as text (a fenced block of a source language, a diff hunk, a pasted script): no
            # failure line, and no failure class or end from its words (blocks.py)
            evs = [ev for ev in evs if ev.kind not in _FAILURE_KINDS and ev.kind not in ("nccl_warn", "nccl_result_trace")
                   and _messages.role(ev.kind) not in ("cause", "consequence", "context", "end")]
        if (not code and evs and t[:1] in " #*_" and _prose.caption_heading(t) and _prose.errno_text(t)):
            # a Markdown heading (an issue's or a post's title) that names an errno's text and quotes no message ("#
            # Broken pipe when training with ...", "# [Errno 111] Connection refused when ..."): it names what the thread
            # is about, and no process printed it (round 20, issue 24: b182_21). The body's own lines say what failed. The same
            # for a caption that is one emphasis span ("**Broken pipe error**:", round 23: b208_16)
            evs = [ev for ev in evs if ev.kind not in _FAILURE_KINDS and ev.kind not in ("nccl_warn", "nccl_result_trace")
                   and _messages.role(ev.kind) not in ("cause", "consequence", "context", "end")]
        ttl = self._title.get(line.src) if self._title else None
        if ttl is not None and ttl[2] == "pending" and ttl[0] is not line:
            # an untagged first line stands alone as a title only when a blank line follows it; else it is read as
            # any line (what it held is fed now, in its place)
            if t.strip():
                self._untitle(line.src)
                ttl = None
            else:
                ttl[2] = "alone"
        if ttl is not None and not code and not ttl[1] \
                and line.offset < self.head_bytes and self._output_line(line, evs):
            ttl[1] = True   # the title's body holds the program's output
        first_text = line.src not in self._texted
        if first_text and t.strip():
            self._texted.add(line.src)
        plain = None
        if not code and line.src not in self._title and first_text and line.rank is None and t.strip():
            # an issue's title pasted as the thread's first line, not as a Markdown heading: with its form's label
            # ("[BUG] ...", "Title: ...") it is a title; untagged ("RuntimeError: NCCL error when training on 8 GPUs")
            # only when a blank line follows it and it is no program output itself (no run prefix, frame, stamp,
            # launcher exit, progress or log record; not a traceback's header) (round 21, issue 24)
            if _PLAIN_TITLE.match(t):
                plain = "tagged"
            elif (t[:1] not in " \t" and len(t) <= 200 and "Traceback (most recent call" not in t
                  and not self._output_line(line, evs)):
                plain = "pending"
        if not code and line.src not in self._title and ((t[:1] in " #" and _HEADING.match(t)) or plain):
            # the source's first heading: its title. Its events (a failure's, and the words a rule reads as context:
            # "NET/IB" in "# Run multi-worker with nccl error: NET/IB : ...") wait for the body (Job._titles): fed at
            # the end only where the body holds no program output
            self._title[line.src] = [line, False, "pending" if plain == "pending" else None, list(evs)]
            evs = []
        ex = self._example.get(line.src)
        if ex is not None:
            # the example a hypothetical intro announced: the fenced block after it (blank lines before it allowed),
            # or its one next line when no fence follows
            fence = t.lstrip()[:3] in ("```", "~~~")
            if ex == 0 and not t.strip():
                pass
            elif ex == 0 and not fence:
                del self._example[line.src]
                code = True
            elif ex == 0:
                self._example[line.src] = 1
                code = True
            else:
                code = True
                self._example[line.src] = ex + 1
                if fence or ex > 40:
                    del self._example[line.src]
            if code:
                evs = [ev for ev in evs if ev.kind not in _FAILURE_KINDS and ev.kind not in ("nccl_warn", "nccl_result_trace")
                       and _messages.role(ev.kind) not in ("cause", "consequence", "context", "end")]
        elif not code and ("like" in t or "such as" in t or "e.g." in t or "example" in t) and _EXAMPLE_INTRO.search(t):
            self._example[line.src] = 0
        if not code and ("..." in t or "%" in t or "<" in t) and is_format_template(t):
            code = True   # a message's format with its values left out ("status=... opcode=..."), not a message printed
            evs = [ev for ev in evs if ev.kind not in _FAILURE_KINDS and ev.kind not in ("nccl_warn", "nccl_result_trace")
                   and _messages.role(ev.kind) not in ("cause", "consequence", "context", "end")]
        if line.rank is not None or line.nccl is not None or line.host is not None or "terminate called" in t:
            self.run_lines += 1
        elif '", line ' in t and 'File "' in t and not code:
            self.frame_lines += 1   # a Python traceback's frame: two or more are a process's output (a traceback printed)
        elif t[:5] in ("File ", "Cell ") and not code and _IPY_FRAME.match(t):
            self.frame_lines += 1   # IPython's frame header ("File ~/x/trainer.py:2237, in Trainer.train(self, ...)")
        elif evs and not code and any(ev.kind in _FAILURE_KINDS for ev in evs) and (
                any(ev.kind in _RUN_FAILURE_KINDS for ev in evs) or self._tb.get(self._stream(line))):
            self.run_lines += 1   # a launcher's or a watchdog's failure line, or an exception under its traceback's frames
        elif "`" in t and ("ail" in t or "rror" in t) and _TEST_RUN_FAILED.search(t):
            self.run_lines += 1   # a change's own test run reported failing ("- `pytest -q` *(fails: ...)*")
        elif (self.change_doc is None and line.offset < self.head_bytes and any(w in t for w in _CHANGE_WORDS)
              and _CHANGE_DOC.search(t) and not ("/pull/" in t and _PR_LINK.search(t))):
            self.change_doc = line
        if self.change_doc is None and not self._headed.get(line.src) and t[:1] in " #" and _HEADING.match(t):
            self._headed[line.src] = True
            if _HEADING_FIX.match(t):
                self.change_doc = line   # the text's title names a change ("# resolve KeyError: ...", "# fix bug with ...")
        if any(w in t for w in _LAUNCH_WORDS) and _PROMPT_LAUNCH.match(t):
            self.relaunch[line.src] = line
        if '", line ' in t and _SHELL_FRAME.match(t):
            self._shell_frame[line.src] = (line.lineno, _SHELL_FRAME.match(t).group("path"))
        elif "SyntaxError" in t and line.src in self._shell_frame:
            at, path = self._shell_frame.pop(line.src)
            if line.lineno - at <= 4 and _SHELL_SYNTAX.match(t.strip()) and any(ev.kind == "exception" for ev in evs):
                # python ran a shell script: the launch is wrong, not the script (LOG023)
                evs = list(evs) + [Event("launch_misconfigured", line, {"shell_script": path})]
        if self._mpirun_code and line.src in self._mpirun_code:
            at, ex = self._mpirun_code.pop(line.src)
            m = _MPIRUN_CODE.match(line.text) if line.lineno == at + 1 else None
            if m:
                ex.code = int(m.group(1))
        if line.rank is None and "MPI_Abort(MPI_COMM_WORLD" in line.text:
            # MPICH names the aborting process by its rank in the communicator it aborted (comm_ptr->rank, pmodels/mpich
            # src/mpi/init/init_impl.c @6a79bf6): in MPI_COMM_WORLD that is the job's rank
            m = _MPICH_ABORT.search(line.text)
            if m:
                line.rank = int(m.group(1))
        if line.rank is None and "Terminating process" in t:
            # mp.spawn's ProcessContext.join, after one process failed: "Terminating process %s via signal SIGTERM" for
            # each process STILL ALIVE after the grace period (torch/multiprocessing/spawn.py, 2.13.0 wheel)
            m = _SPAWN_STOPPED.search(t)
            if m and len(self.spawn_stopped) < 64:
                self.spawn_stopped.append((int(m.group(1)), line))
        if line.text.startswith("Step #") and line.rank is None:
            m = _BUILD_STEP.match(line.text)
            if m:
                self.step_labels.setdefault(line.src, set()).add(int(m.group(1)))
        if line.rank is None and line.local_rank is None and line.label is None:
            # mp.spawn re-raises a child's error in the parent: "-- Process 0 terminated with the following error:"
            # and the child's traceback under it, unprefixed: that traceback is process 0's (its local rank)
            owner = self._spawn_owner.get(line.src)
            m = _SPAWN_OWNER.match(line.text)
            cut = None if m else _SPAWN_CUT.match(line.text)
            if m:
                self._spawn_owner[line.src] = int(m.group(1))
                self.spawn_failed.add(int(m.group(1)))
            elif cut:
                r = int(cut.group(1))
                self._spawn_owner[line.src] = r
                self.spawn_failed.add(r)
                self.exits.append(Exit(r, r, None, 1, None, None, line.ts, line, "mp.spawn"))
            elif owner is not None:
                line.local_rank = owner
            rec = self._record_owner.get(line.src)
            if rec is not None and line.local_rank is None and line.lineno == rec[1] + 1:
                # a multi-line log record whose first line alone carries the rank (Python logging formats its prefix
                # once per record: ParlAI's "rank:  3 | <time> CRITICAL | Traceback ..." and the frames under it)
                exc = _EXC_LINE.match(line.text.strip())
                if exc or _CONTINUATION.match(line.text):
                    line.rank = rec[0]
                    self._record_owner[line.src] = (rec[0], line.lineno) if not exc else None
        if line.rank is not None and "Traceback (most recent call" in line.text:
            self._record_owner[line.src] = (line.rank, line.lineno)
        elif line.rank is not None and self._record_owner.get(line.src) is not None:
            self._record_owner[line.src] = (line.rank, line.lineno) if self._record_owner[line.src][0] == line.rank \
                else None
        if line.rank is not None:
            self.ranks.add(line.rank)
            if line.host and line.rank not in self.rank_host:
                self.rank_host[line.rank] = line.host
        if line.host:
            self.hosts.add(line.host)
        if line.nccl and line.pid:
            self.nccl_pids.add((line.src, line.pid))
        key = self._stream(line)
        prev = self._prev_by_src.get(line.src)
        self._prev_by_src[line.src] = line
        if ("terminate called" in line.text or "Assertion `" in line.text or (
                prev is not None and "terminate called after" in prev.text and "what()" in line.text)):
            kept = self.abort_lines.setdefault(line.src, [])
            kept.append(line)
            if len(kept) > 8:
                del kept[0]
        if (prev is not None and line.rank is not None and prev.rank is None and prev.lineno == line.lineno - 1
                and key not in self.headless_frames):
            # a frame pasted without the rank prefix the lines under it carry ('.../arguments.py", line 561, in
            # validate_args' then '[rank14]:     assert ...'): the frame is that rank's
            pkey = self._stream(prev)
            hf = self.headless_frames.get(pkey)
            if hf is not None and hf[0] is prev and hf[1] == 1:
                del self.headless_frames[pkey]
                prev.rank = line.rank
                self.headless_frames[key] = hf
                if self.last_headless_frame.get(pkey) is prev:
                    self.last_headless_frame[key] = self.last_headless_frame.pop(pkey)
        if " ranks:" in line.text and _HVD_HEADER.search(line.text):   # (every match holds " ranks:")
            self._hvd_open[key] = line.lineno
        elif key in self._hvd_open:
            row = next((ev for ev in evs if ev.kind == "hvd_rank_row"), None)
            if row is not None and line.lineno == self._hvd_open[key] + 1:
                self._hvd_open[key] = line.lineno
                self.hvd_rows.append((int(row.data["rank"]), str(row.data.get("ops", "")), bool(row.data.get("bang")),
                                      line))
            else:
                del self._hvd_open[key]
        header = "Traceback (most recent call" in line.text
        if _UNRAISABLE.search(line.text):
            self._unraisable[key] = False
        elif key in self._unraisable and ((header and self._unraisable[key]) or not (
                header or line.text[:1] in (" ", "\t", "") or _EXC_LINE.match(line.text.strip()))):
            # a second traceback, or a line no such report holds: the report was cut and this line is new
            del self._unraisable[key]
        elif key in self._unraisable and header:
            self._unraisable[key] = True
        elif key in self._tb_header and not self._tb.get(key) and _FEEDER_FRAME.search(line.text):
            # a traceback whose first frame is a multiprocessing queue's feeder thread (CPython Lib/multiprocessing/
            # queues.py, Queue._feed: an error while it pickles or writes an item to the pipe goes to
            # _on_queue_feeder_error, which prints it with traceback.print_exc() and the thread goes on): a thread's
            # report, not the process failing. A BrokenPipeError there is the pipe's reader gone (the consumer
            # process exited first), not a network peer. Read it like an unraisable report, up to its exception line.
            self._unraisable[key] = True
            head = self.first_fail.get(key)
            if head is not None and "Traceback (most recent call" in head.text and head.lineno == line.lineno - 1:
                del self.first_fail[key]
                self._fail_by_words.discard(key)
        if key in self._unraisable:
            # CPython's unraisable hook (Python/errors.c, _PyErr_WriteUnraisableDefaultHook) prints "Exception ignored
            # in: <obj>", the traceback and the exception line of an error raised where it cannot propagate (a
            # destructor, a weakref callback), and the program goes on: none of it is a process failing
            evs = [ev for ev in evs if ev.kind != "exception"]
            if _EXC_LINE.match(line.text.strip()):
                del self._unraisable[key]   # its exception line ends the report
            self.last_line[key] = line
            return
        if line.ts is not None:
            if self.first_ts is None or line.ts < self.first_ts:
                self.first_stamped = line
            self.first_ts = line.ts if self.first_ts is None else min(self.first_ts, line.ts)
            self.last_ts = line.ts if self.last_ts is None else max(self.last_ts, line.ts)
            if not line.ts_near and (self.last_stamped is None or line.ts >= self.last_stamped.ts):
                self.last_stamped = line
            self._stream_ts[key] = line.ts
            for early in self._unstamped.pop(key, ()):
                early.ts = line.ts   # printed before its stream's first stamp: no later than it
                early.ts_near = True
        elif key in self._stream_ts:
            # an unstamped line (a traceback) happened no earlier than its stream's last stamp
            line.ts = self._stream_ts[key]
            line.ts_near = True
        else:
            early = self._unstamped.setdefault(key, [])
            if len(early) < 256:
                early.append(line)
        frame = user_frame(line.text)
        if frame is not None and key not in self._tb_header and line.text.count('File "') >= 2:
            # frames printed as a list on one line (traceback.format_tb's repr): each one counts
            first, n = self.headless_frames.get(key, (line, 0))
            self.headless_frames[key] = (first, n + line.text.count('File "') - 1)
        if _RICH_TB_TOP.match(line.text):
            self.first_fail.setdefault(key, line)   # a traceback's header, cut: still a traceback
        if frame is None and _ESCAPED_FRAME.search(line.text) and key not in self._tb_header:
            # a traceback printed escaped inside torchelastic's error JSON ("py_callstack": traceback.format_exc(),
            # json.dumps'ed by torch/distributed/elastic/multiprocessing/errors/error_handler.py): '\  File \"/x.py\"'
            first, n = self.headless_frames.get(key, (line, 0))
            self.headless_frames[key] = (first, n + 1)
        if frame is None and _CPP_FRAME.match(line.text) and key not in self._tb_header:
            # a C++ backtrace's frame (c10::Error's, the watchdog's), its exception's message cut from the paste
            first, n = self.headless_frames.get(key, (line, 0))
            self.headless_frames[key] = (first, n + 1)
        elif (frame is None and line.text[:1] == "#" and "frame #" in line.text and key not in self._tb_header
              and _HEADED_CPP_FRAME.match(line.text)):
            # a title quoting the frames ("# frame #4: <unknown function> + 0xdbbf4 (0x7eff in .../libstdc++.so.6)
            # frame #5: ..."): the issue's writer pasted the backtrace's last lines as its title; each frame counts
            first, n = self.headless_frames.get(key, (line, 0))
            self.headless_frames[key] = (first, n + len(_CPP_FRAME_IN.findall(line.text)))
        if frame is None and key not in self._tb_header and _RICH_FRAME.match(line.text):
            # rich's frame header in a box whose top the paste cut ("│ /x/state_dict.py:834 in _load_optim │", rich
            # traceback.py _render_stack; wrapped at the box's width, "│ /x/state_dict.py:83 │" then "│ 4 in ... │")
            first, n = self.headless_frames.get(key, (line, 0))
            self.headless_frames[key] = (first, n + 1)
        if frame is None and line.text[:1] == "-" and key not in self._tb_header and _IPY_ARROW.match(line.text):
            # IPython's verbose traceback marks each frame's current line with an arrow before its number ("---> 78
            # launch_training(...)"), its header cut by the paste
            first, n = self.headless_frames.get(key, (line, 0))
            self.headless_frames[key] = (first, n + 1)
            self.last_headless_frame[key] = self._ipy_body[key] = line
        elif frame is None and key not in self._tb_header and key in self._ipy_body:
            # ... and the frame's numbered context lines around it ("    421     num_processes=num_processes,": the
            # line number right-aligned in 7 columns then a space, or stack_data's gap "   (...)"; ultratb.py
            # _format_traceback_lines @02660f35, numbers_width = INDENT_SIZE - 1): a stream that ends among them ends
            # inside the traceback (unexplained._ends_inside_traceback), its exception line cut (round 23, issue 24:
            # b203_12, a Lightning traceback cut inside a frame read as "cannot show health")
            body = self._ipy_body[key]
            if body.src == line.src and body.lineno == line.lineno - 1 and _IPY_CONTEXT.match(line.text):
                self.last_headless_frame[key] = self._ipy_body[key] = line
            else:
                del self._ipy_body[key]
        if frame is None and line.text.startswith("│ ❱ ") and key not in self._tb_header:
            # rich's marker of a frame's failing line, in a box whose top (and frame names) the paste cut
            first, n = self.headless_frames.get(key, (line, 0))
            self.headless_frames[key] = (first, n + 1)
        if frame is not None or _RICH_FRAME.match(line.text) or _CPP_FRAME.match(line.text):
            self.last_frame[key] = line
        if line.text[:1] == "│" and key not in self._tb_header:
            # a line of rich's traceback box ("│ ... │"): a frame of a box whose top the paste cut, or a line of the
            # box under one; a stream that ends inside the box (no "╰" bottom, no exception line under it) ends
            # inside the traceback (unexplained._ends_inside_traceback)
            lf = self.last_headless_frame.get(key)
            if (_RICH_FRAME.match(line.text) or line.text.startswith("│ ❱ ") or (frame is not None and frame["file"]
                    in line.text) or (lf is not None and lf.src == line.src and lf.lineno == line.lineno - 1
                                      and lf.text[:1] == "│")):
                self.last_headless_frame[key] = line
        if frame is not None:
            if not _LIB_FRAME.search(frame["file"]):
                self._frames[key] = frame
            tb = self._tb.setdefault(key, [])
            if len(tb) < 80:
                tb.append((frame["file"], frame["func"]))
            if key not in self._tb_header:
                # frames without their "Traceback" header: a paste that starts inside a traceback
                first, n = self.headless_frames.get(key, (line, 0))
                self.headless_frames[key] = (first, n + 1)
                self.last_headless_frame[key] = line
        elif "Traceback (most recent call" in line.text:
            self._frames[key] = None
            self._tb[key] = []
            self._tb_header.add(key)
            who = self.who(line)
            if who is not None:
                self.traceback_ranks.add(who)
        self._table_line(line)
        if "ProcessGroupNCCL" in line.text or "atchdog" in line.text:
            r = self.who(line)
            if r is not None:
                self.watchdog_ranks.add(r)
        evs = list(evs)
        if (evs and prev is not None and prev.lineno == line.lineno - 1 and line.text[:1] in (" ", "\t")
                and line.text.lstrip().startswith("raise ") and user_frame(prev.text) is not None):
            # a frame's source line ('    raise ValueError(f"Unsupported nproc_per_node value: {nproc_per_node}")'):
            # the code that raised, its message a template; the exception line under the frames is the message
            evs = [ev for ev in evs if "entry" not in ev.data]
        self.last_line[key] = line
        if line.offset < self.head_bytes or _messages.has_anchor(line.text):
            self.last_seen[key] = line
        lf = self.last_frame.get(key)
        frame_source = (lf is not None and lf is not line and lf.src == line.src and 'File "' in lf.text
                        and ((line.text[:1] in (" ", "\t") and lf.lineno == line.lineno - 1)
                             or (lf.lineno >= line.lineno - 3 and _TB_END_LINE.match(line.text) is not None)))
        if ((is_progress(line.text) and not line.text.startswith("wandb: ") and not frame_source)
                or any(ev.kind == "overflow_skip" for ev in evs)):
            # (a frame's source line under its 'File "x.py", line N, in f', and the exception line under the last
            # frame, are the traceback, not a step: "raise TrainingFailed(f"step {step} failed") from e" and
            # "TrainingFailed: step 1200 failed" in a chained traceback. CPython Lib/traceback.py @v3.12.0
            # StackSummary.format prints each frame's source indented under its header, then
            # TracebackException.format_exception_only "Qualified.Name: message" at column 0)
            # (a "wandb: " line is Weights & Biases' own termlog, never a step: its footer's rows "wandb:   train/loss
            # 0.123" are the run's last values, printed by wandb.finish after the loop, failed or not:
            # wandb/sdk/wandb_run.py @cbe86604 Run._footer_history_summary_info)
            # (an fp16 loss scaler's skipped step is a step that ran: DeepSpeed's "OVERFLOW! Rank 0 Skipping step")
            self.progress_lines += 1
            if self.last_progress is None or (line.src, line.lineno) > (self.last_progress.src, self.last_progress.lineno):
                self.last_progress = line
            self.stream_progress[key] = line
            tail = self.stream_progress_tail.setdefault(key, [])
            tail.append(line.lineno)
            if len(tail) > 3:
                del tail[0]
            if line.ts is not None and not line.ts_near:
                # progress printed with its own time: when it stopped (LOG026: a job stopped from outside after a hang)
                self.progress_stamps.append(line.ts)
                if len(self.progress_stamps) > 64:
                    del self.progress_stamps[:32]
                self.last_stamped_progress = line
            if key in self._fail_by_words:
                self.survived.setdefault(key, self.first_fail.pop(key))
                self._fail_by_words.discard(key)
                if key in self._fail_survivable:
                    self._survived_entry.setdefault(key, self.survived[key])
                    self._fail_survivable.discard(key)
        t = line.text
        if "node" in t or "ndezvous" in t or "orker group" in t or "world_size=" in t or "registered" in t:
            self._rendezvous_line(line)
        if "RANK=" in t and line.rank is None:
            m = _PRINTED_RANK.search(t)
            if m:
                self.env_ranks.setdefault(line.src, {}).setdefault(int(m.group(1)), line)
        if "rank" in t and line.rank is None and line.nccl is None and line.host is None and line.label is None:
            for m in _PROSE_RANK.finditer(t):
                self.prose_ranks.setdefault(line.src, {}).setdefault(int(m.group(1)), line)
        if line.nccl == "INFO" or _SETUP.search(line.text) or any(_messages.phase(ev.kind) == "setup" for ev in evs):
            self.setup_lines += 1
            self.last_setup[key] = line
            c = _RANK_CLAIM.search(line.text)
            if c:
                self.rank_claims.setdefault((line.src, int(c.group(1))), []).append(line)
                self.world_sources.setdefault("lightning GLOBAL_RANK/MEMBER", int(c.group(3)))
        kinds = {ev.kind for ev in evs}
        traced = "nccl_result_trace" in kinds   # a trace line, kept in its chain even while the chain is not yet an error
        if traced:
            evs = self._trace_line(key, line, evs)
            kinds = {ev.kind for ev in evs}
        after_warn = self._warn_header.pop(key, None) == (line.src, line.lineno - 1)
        echo = after_warn and _WARN_SOURCE_ECHO.match(line.text)
        header = _PY_WARNING_HEADER.search(line.text)
        cont = (after_warn and not echo and not header and t.strip() and t[:1] not in " \t[" and not t[:1].isdigit()
                and not t.startswith("Traceback") and not _EXC_LINE.match(t))
        if (header or cont) and evs:
            # a warning's own message, on its header line or on the lines it continues on (warnings.warn("...\n...")
            # prints the message whole after "<file>:<lineno>: <Category>: ", Lib/warnings.py _formatwarnmsg_impl
            # @v3.12.0): a catalogued text that a library also raises ("Unsloth currently does not support multi GPU
            # setups", unsloth's __init__.py warns it, tokenizer_utils.py raises it) is the warning here, not the
            # raise (round 23, issue 24: b200_05, an error on a warning-only log)
            evs = [ev for ev in evs if not (entry_of(ev) or {}).get("raises")]
            kinds = {ev.kind for ev in evs}
        if header or cont:
            self._warn_header[key] = (line.src, line.lineno)
        ttl = self._title.get(line.src) if self._title else None
        if ttl is not None and ttl[0] is line:
            # the title's failure line waits too (Job._titles)
            ttl[3] = (key, _looks_failed(line, ttl[3]) if not echo and not code else False, ttl[3])
        elif key not in self.first_fail and not echo and not code:
            how = _looks_failed(line, evs)
            if how == "words":
                self._fail_by_words.add(key)
                if len(t) < 48 and not evs and _prose.bare_label(t):
                    self._caption[line.src] = (key, line)   # a caption if a fence follows (_after_caption)
                if any(survivable(ev) for ev in evs):
                    self._fail_survivable.add(key)
            if how:
                # NCCL traced an error back ("transport/net.cc:288 -> 3"): its first WARN before it, or the chain's
                # first line, is where it began
                chain = self._chain.get(key)
                self.first_fail[key] = (self.first_warn.get(key, chain[0] if chain else line)
                                        if "nccl_result_trace" in kinds else line)
            elif line.nccl == "WARN" and key not in self.first_warn:
                self.first_warn[key] = line
        if line.nccl == "WARN":
            self._warned.add(key)
            self._chain.pop(key, None)   # a new warning: the trace lines after it start a new chain
        elif line.nccl is not None and not traced:
            self._chain.pop(key, None)   # another NCCL line ends a chain
        for ev in evs:
            self.feed(ev)
        if any(ev.kind == "exception" for ev in evs):
            self._store_exception(key, line, evs)
            if line.local_rank is not None and self._spawn_owner.get(line.src) == line.local_rank:
                del self._spawn_owner[line.src]   # the child's traceback ends with its exception line

    @staticmethod
    def _output_line(line: Line, evs) -> bool:
        """Is this line (not source code) a program's own output: a line with a run's prefix (a rank, a task label,
        NCCL's), its own time stamp, a launcher's or a shell's exit, a traceback's frame (Python's, rich's, a C++ backtrace's), training
        progress, or a log
        record with its level ("[2024/05/22 14:06:59] ppocr INFO: ...")? Not a set-up word or a "name: value" prefix
        alone: unfenced source code ("rpc.init_rpc(..., world_size=2)") and a YAML config ("bf16: true") hold those."""
        t = line.text
        if line.rank is not None or line.label is not None or line.nccl is not None \
                or (line.ts is not None and not line.ts_near):
            return True
        if any(ev.kind in _RUN_FAILURE_KINDS for ev in evs):
            return True
        if t.startswith("Fatal Python error: "):
            # CPython's own fatal-error header (Python/pylifecycle.c fatal_error; faulthandler's for a fatal signal,
            # data/python_faulthandler.json), which a blank line follows: the interpreter's output, never a writer's
            # title (round 25, issue 24: a log opening with "Fatal Python error: Illegal instruction" read as healthy)
            return True
        if t[:1] in "#`>|" or not t.strip():
            return False   # a heading, a fence, a quote, a table: the writer's
        return bool(('", line ' in t and 'File "' in t) or _RICH_FRAME.match(t) or t.startswith("│ ❱ ")
                    or _CPP_FRAME.match(t) or is_progress(t) or _LOG_RECORD.match(t)
                    or _prose._INFO_LEVEL.search(t) or _prose._WARN_LEVEL.search(t))

    def _titles(self) -> None:
        """A thread's title (its source's first Markdown heading) is its writer's words, even where it quotes a message
        ("# Wav2vec2 fine_tuning error:TypeError: forward() missing ..."): where the body under it holds the program's
        own output (a run's prefixed lines, traceback frames, progress, set-up lines, an exit, stamped lines), that
        output says what failed and where the excerpt stops, and the title is no failure line of the job; where the
        body holds none (prose only), the title is all there is and is read as before (round 20 wave 2, issue 24)."""
        for line, output, _, held in self._title.values():
            if output:
                self.titles_over_output.append(line)
                continue
            if not isinstance(held, tuple):
                continue
            key, how, evs = held
            for ev in evs:
                self.feed(ev)
            if how:
                cur = self.first_fail.get(key)
                if cur is None or (cur.src, cur.lineno) > (line.src, line.lineno):
                    self.first_fail[key] = line
                    self._fail_by_words.discard(key)
                    if how == "words":
                        self._fail_by_words.add(key)

    def _untitle(self, src: int) -> None:
        """A source's first line held as a possible title is no title (a non-blank line follows it): its failure line
        and events are taken now, as they would have been in its place (it is the source's first line)."""
        line, _, _, held = self._title.pop(src)
        if not isinstance(held, tuple):
            return
        key, how, evs = held
        for ev in evs:
            self.feed(ev)
        if how and key not in self.first_fail:
            self.first_fail[key] = line
            if how == "words":
                self._fail_by_words.add(key)
                if any(survivable(ev) for ev in evs):
                    self._fail_survivable.add(key)
        if any(ev.kind == "exception" for ev in evs):
            self._store_exception(key, line, evs)

    def _after_caption(self, line: Line) -> None:
        """A colon-less label ("Error message", "Stack trace") opened its stream's first failure line by its words; the
        next non-blank line of its source decides: a fence opening ("```", "~~~") makes it the caption of the quote below
        (prose.bare_label), and its failure line is undone; anything else leaves it as it was."""
        key, label = self._caption[line.src]
        t = line.text.strip()
        if not t and line.lineno - label.lineno <= 2:
            return
        del self._caption[line.src]
        if t[:3] in ("```", "~~~") and self.first_fail.get(key) is label:
            del self.first_fail[key]
            self._fail_by_words.discard(key)
            self._fail_survivable.discard(key)

    def _trace_line(self, key: tuple, line: Line, evs: List[Event]) -> List[Event]:
        """NCCL traces an error code back up its calls ("misc/socket.cc:564 -> 2", "bootstrap.cc:270 -> 2", ...,
        "group.cc:106 -> 2"). A chain is an error when a WARN came before it, when it reaches NCCL's API (init.cc,
        group.cc, enqueue.cc), when it is three calls long, or two calls long with one in a transport (transport/*.cc:
        the connection between ranks -- a net plugin call such as include/net.h's ncclNetConnect, then net.cc's
        sendProxyConnect -- whose callers propagate every error with NCCLCHECK: src/transport.cc, src/transport/net.cc
        @v2.12.12-1; a log cut after two such lines is cut inside a failure); one trace line among normal ones is a
        fallback NCCL took in its stride ("Could not find real path of /sys/class/net/eth0/device", then
        "include/net.h:19 -> 2"). Returns the events to keep: the trace event only once its chain is an error,
        carrying the chain's first line."""
        ev = next(e for e in evs if e.kind == "nccl_result_trace")
        chain = self._chain.get(key)
        if chain is None:
            chain = self._chain[key] = [line, 0, False, ev.data.get("code"), False]
        chain[1] += 1
        where = str(ev.data.get("where", ""))
        chain[4] = chain[4] or where.startswith("transport/") or "/transport/" in where
        if not chain[2] and (key in self._warned or chain[1] >= 3 or (chain[1] >= 2 and chain[4])
                             or re.search(r"(?:^|/)(?:init|group|enqueue|collectives)\.cc$", where)):
            chain[2] = True
            return [e for e in evs if e.kind != "nccl_result_trace"] + [
                Event("nccl_result_trace", line, {**ev.data, "code": chain[3], "chain_start": chain[0]})]
        if chain[2]:
            return evs   # a later line of an error chain: a failure line, no new class
        return [e for e in evs if e.kind != "nccl_result_trace"]

    def _store_exception(self, key: tuple, line: Line, evs: List[Event]) -> None:
        """An exception raised where the rendezvous creates its TCPStore ("RuntimeError: Connection timed out" under
        _env_rendezvous_handler's `store = TCPStore(...)`) is the store failing to connect, whatever its words: old
        torch raised the socket's bare strerror there."""
        tb = self._tb.get(key)
        if not tb or {ev.kind for ev in evs} & {"store_timeout", "store_refused", "port_in_use", "address_unresolved"}:
            return
        file, func = tb[-1]
        if func not in _STORE_FUNCS and not file.endswith(("distributed/rendezvous.py",)):
            return
        msg = next((str(ev.data.get("msg", "")) for ev in evs if ev.kind == "exception"), "")
        if "store based barrier" in msg:
            return   # the barrier's own timeout: LOG018's
        cls = ("store_timeout" if re.search(r"timed? ?out", msg, re.I) else
               "store_refused" if re.search(r"refused|reset by peer|No route to host|unreachable|Broken pipe", msg, re.I)
               else None)
        if cls:
            self.feed(Event(cls, line, {"from": "traceback", "func": func,
                                        "reset": bool(re.search(r"reset by peer|Broken pipe", msg, re.I))}))
            self.store_lines.add((line.src, line.lineno))   # this line is the store's, not a collective's peer

    def _shell_death(self, line: Line, d: dict, sig: str, shell: str, rank: Optional[int]) -> Optional[int]:
        """A shell's report of a command that died on signal `sig` (bash's or zsh's job report): one exit, its rank
        from the command's own environment assignments when it carries one (HOROVOD_RANK=0, RANK=3); the rank the
        line is then counted under (`rank` when the command names none)."""
        m = _ENV_RANK.search(str(d.get("cmd", "")))
        r = int(m.group(1)) if m else None
        if r is not None:
            self.ranks.add(r)
            rank = r
        self.exits.append(Exit(r, None, line.host or self._label_host(line), -SIGNUM[sig], sig,
                               int(d["pid"]) if d.get("pid") else None, line.ts, line, shell))
        return rank

    def _caught_first(self, line: Line) -> None:
        """A framework's report of the unit of work that failed (work_unit_failed_caught: optuna's trial, Ray Tune's
        errored trials) is its stream's first failure line where the one before it was a failure by its words alone (a
        status line's count, "Trial status: 1 ERROR | 3 TERMINATED"): the report names the unit and its error."""
        key = self._stream(line)
        if key in self._fail_by_words and key not in self.survived:
            self.first_fail[key] = line
            self._fail_by_words.discard(key)

    def _errored_row(self, line: Line) -> None:
        """The first row of Ray Tune's errored-trials table under "Number of errored trials: N" (ray-project/ray
        python/ray/tune/experimental/output.py @0ff7fa55: headers "Trial name", "# failures", "error file"; '│' rows
        with columns apart by spaces, or psql's '|' rows in progress_reporter.py): the failing unit and where its
        traceback is, kept as the caught failure's message (LOG028's title). The table ends within a few lines."""
        w = self._errored_table.get(line.src)
        if w is None:
            return
        m = _TUNE_ERRORED_ROW.match(line.text.strip())
        if m and m.group("trial") != "Trial":
            n = int(m.group("n"))
            self.caught_message[(w.src, w.lineno)] = (f"trial {m.group('trial')} errored ({n} failure{'s' if n != 1 else ''}; "
                                                      f"its traceback is in {m.group('file')[:100]})")
            del self._errored_table[line.src]
        elif line.lineno - w.lineno > 6:
            del self._errored_table[line.src]

    def _after_usage(self, line: Line) -> None:
        """A line after an open usage banner in its file: the banner's own wrapped lines (argparse indents them under
        the prog: HelpFormatter._format_usage), blank lines and another process's banner keep it open; any other line
        closes it."""
        t = line.text
        if not t.strip() or t[:1] in " \t" or ("usage: " in t and "[-h]" in t):
            return
        self.usage_after[line.src] = line
        del self.usage_open[line.src]

    def feed(self, ev: Event) -> None:
        line = ev.line
        if ev.kind == "argparse_usage" and line.src not in self.usage_open and line.src not in self.usage_after:
            self.usage_open[line.src] = line
        rank = self.who(line)
        if rank is None and str(ev.data.get("own_rank", "")).isdigit():
            rank = int(ev.data["own_rank"])   # a message that names the rank printing it ("[1] is setting up NCCL ...")
        if rank is not None and rank >= 0:
            self.ranks.add(rank)
        kind = ev.kind
        d = ev.data
        if kind == "watchdog_seq" or kind == "watchdog":
            # torch's `[rank13]:` prefix is the global rank; the "[Rank 1]" / "[PG ID 11 ... Rank 1]" inside the line
            # is the rank within that process group (the global one only in the default group)
            r = line.rank if line.rank is not None else int(d.get("rank", rank if rank is not None else -1))
            if r >= 0:
                self.ranks.add(r)
            if kind == "watchdog":
                self._merge_watchdog(r, d, line)
            else:
                # the group: its ID, and its GUID when printed (two groups can share an ID across ranks' views)
                pg = str(d.get("pg", "0")) + (f"/{d['guid']}" if d.get("guid") else "")
                rec = self.watchdog.setdefault((pg, r), {"rank": r})
                rec.setdefault("first", line)
                rec.update(seq=int(d["seq"]), enqueued=int(d["enq"]), completed=int(d["done"]), line=line)
            rank = r
        elif kind == "gloo_timeout":
            if rank is not None:
                rec = self.watchdog.setdefault(("gloo", rank), {"rank": rank, "op": f"gloo {d.get('what', '')}".strip()})
                rec.setdefault("first", line)
                rec.update(timeout_ms=int(d["ms"]), line=line)
        elif kind == "torchrun_failed":
            code = int(d["code"])
            lr = int(d["local_rank"]) if d.get("local_rank") else None
            pid = int(d["pid"]) if d.get("pid") else None
            self.exits.append(Exit(None, lr, line.host or self._label_host(line), code,
                                   SIGNALS.get(-code) if code < 0 else None, pid, line.ts, line, "torchrun"))
        elif kind == "elastic_no_error_file":
            # the first failure's global rank (signatures.py): a worker that failed and left no error file
            r = int(d.get("rank") or d.get("rank2"))
            self.exits.append(Exit(r, None, line.host or self._label_host(line), None, None, None, line.ts, line,
                                   "elastic table (no error file)"))
        elif kind == "ds_exit":
            code = int(d["code"])
            # the launcher prints the command of the LAST process it spawned, not the failed one's: sigkill_handler
            # logs f"{cmd} exits with return code = {last_return_code}" with `cmd` left over from the spawn loop
            # (deepspeedai/DeepSpeed deepspeed/launcher/launch.py @32c6645; the same in 2020's launch.py). Its
            # --local_rank=N is the node's highest local rank; only N = 0 (one process on the node) names the failed one
            lr = int(d["local_rank"]) if d.get("local_rank") else None
            lr = lr if lr == 0 else None
            self.exits.append(Exit(None, lr, line.host or self._label_host(line), code,
                                   SIGNALS.get(-code) if code < 0 else None, None, line.ts, line, "deepspeed launcher"))
        elif kind in ("watchdog_abort", "collective_timeout") and rank is not None and rank >= 0 \
                and ("timeout", rank) not in self.watchdog:
            # the watchdog's own abort ("[Rank 4] Some NCCL operations have failed or timed out", "Process group
            # watchdog thread terminated with exception: [Rank 4] Watchdog caught...") when the timeout line itself
            # is missing or cut: this rank was waiting in a collective that failed or timed out
            m = re.search(r"\[Rank (\d+)\]", line.text)
            r = int(m.group(1)) if m else rank
            rec = self.watchdog.setdefault(("abort", r), {"rank": r})
            rec.setdefault("first", line)
            rec["line"] = line
        elif kind == "watchdog_frame" and not self.rankless_timeouts:
            # only the watchdog's frames (the message line cut away): a collective timed out, on a rank not named
            self.rankless_timeouts.append((line, {"frames": "1", "loop": "1" if d.get("loop") else ""}))
        elif kind == "nccl_result_trace" and d.get("chain_start"):
            # the class of the error NCCL traces back (a system error, an internal or CUDA error, a remote error): the
            # chain's first code (socket.cc:749 -> 6; the calls above it may convert it: transport/net.cc:288 -> 3)
            cls = _NCCL_RESULT_CLASS.get(str(d.get("code")))
            start = d["chain_start"]
            if cls and not self.has(cls):
                self.occ.setdefault(cls, Occ()).add(Event(cls, start, {"code": d.get("code"), "from": "nccl_result_trace"}),
                                                    self.who(start), start.host)
        elif kind == "lightning_exit":
            code, r = int(d["code"]), int(d["rank"])
            self.ranks.add(r)
            self.exits.append(Exit(r, r, None, code, SIGNALS.get(-code) if code < 0 else None, int(d["pid"]), line.ts,
                                   line, "lightning"))
            rank = r
        elif kind == "spawn_exit":
            sig = d.get("sig")
            code = -SIGNUM[sig] if sig in SIGNUM else (int(d["code"]) if "code" in d else None)
            r = int(d["rank"])
            self.ranks.add(r)
            self.exits.append(Exit(r, r, None, code, sig, None, line.ts, line, "mp.spawn"))
        elif kind == "shell_killed" and _SHELL_KILLED.match(line.text.strip()):
            # a POSIX shell's report of a job it waited for that died of SIGKILL: bash prints strsignal(SIGKILL), "Killed"
            # (glibc signal/siglist.h: init_sig (SIGKILL, "KILL", N_("Killed"))), alone for an interactive foreground
            # job, as "script.sh: line N: PID Killed  command" from a script (bash jobs.c, notify_of_job_status /
            # pretty_print_job). The rank is not named; the process is whatever the shell ran (the launcher or a rank).
            m = re.search(r"(?:: (?:line \d+:|%s)|^\[\d+\][+-]?) *(\d+) +%s" % (BASH_LINE_ALT, _K), line.text)
            self.exits.append(Exit(None, None, line.host or self._label_host(line), -9, "SIGKILL",
                                   int(m.group(1)) if m else None, line.ts, line, "shell"))
        elif kind == "mpirun_exit":
            # Open MPI names the MPI rank that died and the signal (its number; the name in brackets is strsignal's)
            signum, r, pid = int(d["signum"]), int(d["rank"]), int(d["pid"])
            self.ranks.add(r)
            self.exits.append(Exit(r, None, str(d["node"]).rstrip("."), -signum, SIGNALS.get(signum), pid or None,
                                   line.ts, line, "mpirun"))
            rank = r
        elif kind == "mpich_exit":
            # MPICH's Hydra names the signal a process of the job died of, not its rank (signatures.py)
            signum = int(d["signum"])
            self.exits.append(Exit(None, None, line.host or self._label_host(line), -signum, SIGNALS.get(signum), None,
                                   line.ts, line, "mpiexec"))
        elif kind == "mpirun_first":
            # Open MPI names the first process that exited non-zero (its MPI_COMM_WORLD rank); the code is on the next
            # line ("  Exit code:    1"), read by feed_line; 1 until then (mpirun prints this only for a non-zero one)
            r = int(d["rank"])
            self.ranks.add(r)
            self.exits.append(Exit(r, None, line.host or self._label_host(line), 1, None, None, line.ts, line, "mpirun"))
            self._mpirun_code[line.src] = (line.lineno, self.exits[-1])
            rank = r
        elif kind == "shell_signal":
            # a shell's report of a command that died on a signal (bash jobs.c): the signal from its strsignal() text
            # (or its translation under the job's locale: signatures.SIGNAL_OF_TEXT, data/strsignal.json)
            rank = self._shell_death(line, d, SIGNAL_OF_TEXT[str(d.get("what") or d.get("bare") or d.get("bare_en"))], "shell", rank)
        elif kind == "zsh_signal":
            # zsh's report of a job that died on a signal (Src/jobs.c printjob, its own texts: data/strsignal.json "zsh");
            # an interrupt it printed no line for
            sig = _messages.ZSH_SIGMSG.get(str(d.get("what")))
            if sig in SIGNUM:
                rank = self._shell_death(line, d, sig, "zsh", rank)
        elif kind == "horovod_exit":
            # horovodrun (Gloo) names the rank whose command ended and the shell's status: 128 + N is death by signal N
            status, r = int(d["code"]), int(d["rank"])
            signum = status - 128 if status > 128 and (status - 128) in SIGNALS else None
            self.ranks.add(r)
            self.exits.append(Exit(r, None, None, -signum if signum else status, SIGNALS.get(signum) if signum else None,
                                   None, line.ts, line, "horovodrun"))
            rank = r
        elif kind == "launcher_rank_exit":
            # a launcher names the rank(s) whose process ended: composer with the exit code, paddle's launch without it
            if d.get("rank") is not None:
                code, r = int(d["code"]), int(d["rank"])
                if code != 0:
                    self.ranks.add(r)
                    self.exits.append(Exit(r, None, line.host or self._label_host(line), code,
                                           SIGNALS.get(-code) if code < 0 else None, int(d["pid"]) if d.get("pid") else None,
                                           line.ts, line, "composer launcher"))
                    rank = r
            else:
                self.world_sources["paddle launch"] = int(d["world"])
                for r in (int(x) for x in str(d["ranks"]).replace(" ", "").split(",")):
                    self.ranks.add(r)
                    self.exits.append(Exit(r, None, line.host or self._label_host(line), None, None, None, line.ts, line,
                                           "paddle launch"))
                    rank = r if rank is None else rank
        elif kind == "ide_exit" and str(d.get("code")) != "0":
            # the IDE's account of the one process it ran: a signal when it names one, else the exit code
            sig = d.get("sig") if d.get("sig") in SIGNUM else None
            code = -SIGNUM[sig] if sig else int(d["code"])
            self.exits.append(Exit(None, None, line.host, code, sig, None, line.ts, line, "IDE (PyCharm)"))
        elif kind == "srun_task":
            what = str(d["what"])
            sig = {"Out Of Memory": "SIGKILL", "Killed": "SIGKILL"}.get(what) or SIGNAL_OF_TEXT.get(what)
            code = -SIGNUM[sig] if sig else int(d.get("code") or 1)
            for r in _task_list(str(d["tasks"])):
                self.ranks.add(r)
                self.hosts.add(str(d["host"]))
                self.rank_host.setdefault(r, str(d["host"]))
                self.exits.append(Exit(r, None, str(d["host"]), code, sig, None, line.ts, line, "srun",
                                       "out of memory (cgroup)" if what == "Out Of Memory" else what))
            if what == "Out Of Memory":
                self.occ.setdefault("oom_killer", Occ()).add(ev, None, str(d["host"]))
        elif kind == "nccl_coll_trace":
            key = (line.host, line.pid, str(d["comm"]))
            ops = self.coll_trace.setdefault(key, {})
            if len(ops) < _COLL_TRACE_KEEP:   # a bounded memory on a long trace: its first collectives
                ops.setdefault(int(str(d["opc"]), 16), (str(d["op"]), int(d["nranks"]), line))
        elif kind == "nccl_comm" or kind == "nccl_init_complete":
            r = int(d["rank"])
            c = _COMM_PTR.search(line.text)
            if c:
                self.comm_rank.setdefault((line.host, line.pid, c.group(1)), r)
            n = int(d["nranks"])
            self.ranks.add(r)
            self.world_sources["nccl"] = max(self.world_sources.get("nccl", 0), n)
            if line.host:
                self.rank_host.setdefault(r, line.host)
            rank = r
        elif kind == "store_barrier" and d.get("world") is not None:
            # torch's store barrier counts the world; JAX's coordination barrier (xla.coordination.barrier_timed_out) does not
            self.world_sources["store barrier"] = int(d["world"])
        elif kind == "nccl_version":
            self._version(line, "nccl", str(d["nccl"]))
            if d.get("cuda"):
                self._version(line, "cuda", str(d["cuda"]))
        elif kind == "torch_version":
            self._version(line, "torch", str(d["torch"]))
        elif kind == "cuda_version" and d.get("build"):
            self._version(line, "cuda", str(d["build"]))
        elif kind == "exception":
            text = line.text
            key = self._stream(line)
            # an NCCL error raised after a watchdog timeout in these logs is how the timeout surfaced in Python
            after_timeout = bool(self.watchdog) and _NCCL_ERROR_WORDS.search(text) is not None
            # subprocess.CalledProcessError is a parent reporting its child's exit (CPython Lib/subprocess.py,
            # CalledProcessError.__str__: "Command '...' returned non-zero exit status N." / "died with <Signals...>"):
            # a wrapper around the launcher (a job runner, accelerate's simple_launcher). Once the log has shown that
            # child's own exit (a launcher's exit line, a row of torchrun's table), the exit is the failure, not this echo.
            echo = "CalledProcessError" in text and any(x.where is not None and x.where.src == line.src and x.where.lineno < line.lineno
                                                          for x in self.exits)
            if "--local_rank=" in text and "CalledProcessError" in text and self._legacy_launch_exit(line, key):
                echo = True   # the launcher's report of its child's exit (an Exit now), not an exception of the program
            if not _CONSEQUENCE.search(text) and not after_timeout and not echo:
                tb = self._tb.get(key)
                if tb:
                    # the traceback's innermost frame (file, function): where a bare exception's cause is told by the
                    # frame, not the message (facts.bare_exceptions)
                    ev.data.setdefault("tb_inner", tb[-1])
                lst = self.exceptions.setdefault(rank, [])
                if len(lst) < KEEP:
                    lst.append((ev, self._frames.get(key)))
            elif rank is not None and self._frames.get(key) and rank not in self.waiting_frames:
                self.waiting_frames[rank] = self._frames[key]  # where a timed-out rank was waiting
        if kind == "address_unresolved" and "tb" not in d:
            # the frames that led to a resolver error say whose name it was (torch's _matches_machine_hostname looks
            # up socket.gethostname(): this node's own name)
            d["tb"] = [func for _file, func in self._tb.get(self._stream(line), [])][-6:]
        if kind == "cuda_oom" and len(self.oom_frames) < KEEP:
            self.oom_frames.append(list(self._tb.get(self._stream(line), [])) + [("", line.text[:200])])
        self.occ.setdefault(kind, Occ()).add(ev, rank, line.host)

    # (a value opens with a word character: "SeqNum=..." in a quote that elided it is no value)
    _FIELD = re.compile(r"(SeqNum|OpType|NumelIn|NumelOut|Timeout\(ms\))=(\w[\w.]*)")

    def _merge_watchdog(self, r: int, d: dict, line: Line) -> None:
        fields = dict(self._FIELD.findall(str(d.get("body", ""))))
        if r < 0:
            # a watchdog line that names no rank (no prefix, old format): a timeout all the same, of an unknown rank
            self.rankless_timeouts.append((line, fields))
            return
        rec = self.watchdog.setdefault(("timeout", r), {"rank": r})
        if "first" not in rec:
            rec["first"] = line
        rec.update(op=fields.get("OpType"), line=line)
        if fields.get("Timeout(ms)", "").isdigit():
            rec["timeout_ms"] = int(fields["Timeout(ms)"])
        if fields.get("SeqNum", "").isdigit():
            rec["seq"] = int(fields["SeqNum"])
        if fields.get("NumelIn", "").isdigit():
            rec["numel"] = int(fields["NumelIn"])
        if d.get("ran"):
            rec["ran_ms"] = int(d["ran"])

    def _label_host(self, line: Line) -> Optional[str]:
        if line.label is not None:
            return f"task{line.label}"
        return None

    def _version(self, line: Line, what: str, value: str) -> None:
        if line.host:
            who = f"host:{line.host}"
        elif line.rank is not None:
            who = f"rank:{line.rank}"
        else:
            who = f"file:{os.path.basename(self.paths[line.src]) if line.src < len(self.paths) else line.src}"
        self.versions.setdefault(who, {})[what] = value

    # ------------------------------------------------------------ the elastic table
    _ROW = re.compile(r"^\s*(time|host|rank|exitcode|error_file|traceback)\s*: ?(.*)$")

    def _table_line(self, line: Line) -> None:
        text = line.text.strip()
        if text.startswith("Root Cause (first observed failure)") or text == "Failures:":
            self._close_row()
            self._table = {"root": text.startswith("Root Cause"), "row": None}
            return
        g = _GLUED_ROW.search(text) if "(" in text else None   # (every match holds "(local")
        if g:
            # a row whose fields a paste ran together: "rank2 (local rank: 2)exitcode: -9 (pid: 36071)error file: <N/A>"
            self._close_row()
            if self._table is None:
                self._table = {"root": False, "row": None}
            self._table["row"] = {"line": line, "rank": f"{g.group(1)} (local_rank: {g.group(2)})",
                                  "exitcode": f"{g.group(3)} (pid: {g.group(4)})", "exit_line": line}
            return
        if self._table is None:
            if _TABLE_RANK_ROW.match(text):
                # a row of torchrun's table whose header is not in the excerpt: read it all the same
                self._table = {"root": False, "row": {"line": line}}
            else:
                return
        if _TABLE_ROW_HEAD.fullmatch(text):
            self._close_row()
            self._table["row"] = {"line": line}
            return
        m = self._ROW.match(line.text)
        if m and self._table.get("row") is not None:
            self._table["row"][m.group(1)] = m.group(2).strip()
            if m.group(1) == "exitcode":
                self._table["row"]["exit_line"] = line
            if m.group(1) == "traceback":
                self._close_row()
            return
        if text.startswith("=") or text.startswith("-"):
            self._close_row()
            if text.startswith("="):
                self._table = None

    def _close_row(self) -> None:
        if not self._table or not self._table.get("row"):
            return
        row = self._table["row"]
        self._table["row"] = None
        m = _ROW_RANK.match(row.get("rank", ""))
        c = _ROW_EXITCODE.match(row.get("exitcode", ""))
        if not m:
            return
        rank, local = int(m.group(1)), int(m.group(2)) if m.group(2) else None
        code = int(c.group(1)) if c else None
        pid = int(c.group(2)) if c and c.group(2) else None
        sig = None
        tb = row.get("traceback", "")
        sm = _ROW_SIGNAL.search(tb)
        if sm:
            sig = sm.group(2)
        elif code is not None and code < 0:
            sig = SIGNALS.get(-code)
        host = row.get("host") or None
        self.ranks.add(rank)
        if host:
            self.hosts.add(host)
            self.rank_host.setdefault(rank, host)
        ts = timestamp(row.get("time", "").replace("_", " "))
        self.exits.append(Exit(rank, local, host, code, sig, pid, ts, row.get("exit_line") or row["line"],
                               "elastic table (root cause)" if self._table.get("root") else "elastic table",
                               tb if not tb.startswith("To enable traceback") else ""))

    def finish(self) -> None:
        self._close_row()
        self._titles()
        self._resolve_local_ranks()
        self._nccl_sigbus()
        self._sigbus_exits()
        seen = [r for r in self.ranks if r is not None and r >= 0]
        cands = dict(self.world_sources)
        if cands:
            self.world = max(cands.values())
        elif seen:
            # No line counts the ranks: the highest rank seen is a lower bound, said as a guess, never used to
            # call a rank missing.
            self.world = max(seen) + 1
            self.world_guessed = True
        else:
            self.world = None
        for src, steps in self.step_labels.items():
            # a stream keyed by a label that is this file's build step number holds no rank's lines
            for key in [k for k in self.first_fail if k[0] == src and k[1] in steps and not self._rank_prefixed]:
                ln = self.first_fail.pop(key)
                cur = self.first_fail.get((src, None))
                if cur is None or cur.lineno > ln.lineno:
                    self.first_fail[(src, None)] = ln
        for key, ln in self._survived_entry.items():
            if key[1] is None and self.many_writers(key[0]):
                cur = self.first_fail.get(key)
                if cur is None or cur.lineno > ln.lineno:
                    self.first_fail[key] = ln

    def went_on_after(self, line: Line) -> Optional[Line]:
        """The progress line that shows the process which printed `line` went on after it, when the log shows that and
        nothing says the job then failed: training progress later in the same stream (one process's: a rank's, or a
        file one process wrote), no process of the job ending badly (a launcher's exit, a signal), and no stream's
        first failure line after that progress. An error line a process survived is a warning, never an error."""
        key = self._stream(line)
        lp = self.stream_progress.get(key)
        if lp is None or lp.lineno <= line.lineno:
            return None
        if key[1] is None and self.many_writers(line.src):
            return None
        if any((e.code not in (None, 0)) or e.signal for e in self.exits):
            return None
        for ff in self.first_fail.values():
            if ff.src == lp.src and ff.lineno > lp.lineno:
                return None
        return lp

    def prose_rank(self, line: Line):
        """(rank, the reporter's line) when the reporter's own words before an unranked failure line name one rank ("it
        fails on rank 3") and nothing in the file names another, prints a RANK variable, or shows more processes wrote
        it: a guess, which a finding that takes it says is one. Else None."""
        said = self.prose_ranks.get(line.src)
        if not said or len(said) != 1 or self.many_writers(line.src) or self.env_ranks.get(line.src):
            return None
        (rank, where), = said.items()
        return (rank, where) if where.lineno < line.lineno else None

    def many_writers(self, src: int) -> bool:
        """Can more than one process have written this file's lines that name no rank? Yes when the log says so: a
        counted world size larger than the files that hold it (not one file per rank), two NCCL pids in the file, or
        two ranks claimed in it. Survivability (progress after a line means the process went on) is judged per process:
        where the log cannot tell whose progress it is, the line stays a failure."""
        files = {k[0] for k in self.last_line}
        if self.world is not None and not self.world_guessed and self.world > max(1, len(files)):
            return True
        if len({pid for s, pid in self.nccl_pids if s == src}) > 1:
            return True
        return len({r for s, r in self.rank_claims if s == src}) > 1

    def _nccl_sigbus(self) -> None:
        """A process that died on SIGBUS with NCCL's frames on its stack (occ "nccl_sigbus", reported by LOG009): the
        bus-error lines that are not the DataLoader's ("Caught signal 7 (Bus error: ...)" of UCX's handler, "Fatal
        Python error: Bus error", a shell's "Bus error" report) or a launcher's SIGBUS exit, in a file that shows a
        native frame inside NCCL. What it means depends on the NCCL version (rules/nccl.py says it)."""
        frames = self.occ.get("nccl_frame")
        fr = frames.first if frames and frames.count else []
        srcs = {ev.line.src for ev in fr}
        frame = (fr[0].data.get("f1") or fr[0].data.get("f2")) if fr else None
        bus = self.occ.get("bus_error")
        occ = Occ()
        for ev in (bus.first if bus else []):
            if re.search(r"DataLoader|bus error encountered in worker", ev.line.text, re.I):
                continue
            # UCX's handler names the process: "[host:pid:thread-index:tid] Caught signal 7 (Bus error: ...)"; one
            # that printed NCCL's INFO lines died while NCCL ran in it
            m = _UCX_SIGNAL.match(ev.line.text)
            nccl_proc = bool(m) and (ev.line.src, int(m.group(1))) in self.nccl_pids
            if ev.line.src in srcs or nccl_proc:
                occ.add(Event("nccl_sigbus", ev.line, {"frame": frame if ev.line.src in srcs else None,
                                                       "nccl_process": nccl_proc}), self.who(ev.line), ev.line.host)
        for e in self.exits:
            if e.signal == "SIGBUS" and e.where is not None and e.where.src in srcs:
                occ.add(Event("nccl_sigbus", e.where, {"frame": frame, "exit": e.code}), e.rank, e.host)
        if occ.count:
            self.occ["nccl_sigbus"] = occ

    def _sigbus_exits(self) -> None:
        """A process the launcher reports dead of SIGBUS (torchrun's "exitcode: -7" and its table's "Signal 7 (SIGBUS)",
        DeepSpeed's launcher "exits with return code = -7", mp.spawn's "terminated with signal SIGBUS"; a negative
        exit code is -signum: Python's subprocess returncode, and torch/distributed/elastic/multiprocessing/api.py
        reports it so) with no exception of its own and no bus-error line of its own: the class of the shell's "Bus
        error" (strsignal(SIGBUS)), the bus-error class (occ "bus_error", LOG010): a mapped page with no memory
        behind it, in a job most often /dev/shm full. Not where NCCL's frames explain it (nccl_sigbus, LOG009's)."""
        bus, nsig = self.occ.get("bus_error"), self.occ.get("nccl_sigbus")
        if (bus and bus.count) or (nsig and nsig.count):
            return
        occ = Occ()
        for e in self.exits:
            if e.signal == "SIGBUS" and e.where is not None and not self.exceptions.get(e.rank):
                occ.add(Event("bus_error", e.where, {"exit": e.code, "signal": "SIGBUS", "source": e.source, "by": e}),
                        e.rank, e.host)
        if occ.count:
            self.occ["bus_error"] = occ

    def _resolve_local_ranks(self) -> None:
        """torchrun's own lines name the local rank; the table, the global one. Join them by pid, or
        assume rank == local_rank when only one node is in sight."""
        by_pid = {e.pid: e.rank for e in self.exits if e.rank is not None and e.pid}
        nodes = {e.host for e in self.exits if e.host} | self.hosts
        for e in self.exits:
            if e.rank is None:
                if e.pid in by_pid:
                    e.rank = by_pid[e.pid]
                elif len(nodes) <= 1 and e.local_rank is not None:
                    e.rank = e.local_rank   # a guess, said as one (rules/__init__.who_exited)
                    e.rank_guessed = True
            if e.rank is not None and e.host is None:
                e.host = self.rank_host.get(e.rank)

    # ------------------------------------------------------------ questions rules ask

    def has(self, kind: str) -> bool:
        return kind in self.occ and self.occ[kind].count > 0

    def get(self, kind: str) -> Optional[Occ]:
        return self.occ.get(kind)

    def failures(self) -> Dict[Optional[int], Failure]:
        """Per rank: its exits and its own (non-consequence) exceptions."""
        out: Dict[Optional[int], Failure] = {}
        for e in self.exits:
            f = out.setdefault(e.rank, Failure(e.rank, e.host))
            f.exits.append(e)
            f.host = f.host or e.host
        for rank, lst in self.exceptions.items():
            f = out.setdefault(rank, Failure(rank, self.rank_host.get(rank) if rank is not None else None))
            f.exceptions.extend(lst)
        return out

    def exits_of(self, rank: Optional[int]) -> List[Exit]:
        return [e for e in self.exits if e.rank == rank]

    def dead_ranks(self, signals: Tuple[str, ...] = ("SIGKILL", "SIGSEGV", "SIGBUS", "SIGABRT", "SIGILL", "SIGFPE"),
                   unranked: bool = False) -> Dict[Optional[int], Exit]:
        """Ranks that ended on a signal (earliest evidence each), excluding the SIGTERM torchrun sends to the rest.
        With `unranked`, when no rank is known: the earliest such exit of a process the log does not name, under
        None (a launcher line a paste cut after its exit code)."""
        out: Dict[Optional[int], Exit] = {}
        for e in self.exits:
            if e.rank is None or e.signal not in signals:
                continue
            cur = out.get(e.rank)
            if cur is None or _before(e, cur):
                out[e.rank] = e
        if unranked and not out:
            for e in self.exits:
                if e.rank is None and e.signal in signals and (out.get(None) is None or _before(e, out[None])):
                    out[None] = e
        return out

    def timeout_table(self) -> List[dict]:
        """One row per rank that reported a watchdog timeout: seq, op, numel, enqueued, completed."""
        rows: Dict[int, dict] = {}
        for (pg, r), rec in self.watchdog.items():
            row = rows.setdefault(r, {"rank": r})
            for k in ("seq", "op", "numel", "timeout_ms", "ran_ms", "enqueued", "completed"):
                if k in rec and k not in row:
                    row[k] = rec[k]
            line = rec.get("first") or rec.get("line")
            if line is not None and ("line" not in row or (line.ts or 0) < (row["line"].ts or 0)):
                row["line"] = line
        return [rows[r] for r in sorted(rows) if r >= 0]

    def where(self, line: Optional[Line]) -> dict:
        if line is None:
            return {}
        out = {"path": self.paths[line.src] if line.src < len(self.paths) else "?", "line": line.lineno}
        if line.ts is not None and not line.ts_near:
            out["time"] = _fmt_ts(line.ts)
        return out

    def subjects_at(self, line: Optional[Line]) -> List[str]:
        if line is None:
            return []
        w = self.where(line)
        return [f"path:{w['path']}", f"line:{w['line']}"]


# rich's traceback box, its top border cut by the paste: "╭───────── Tra"
# A frame of the C++ backtrace c10 appends to an exception ("frame #3: c10d::ProcessGroupNCCL::ncclCommWatchdog() + 0x10c
# (0x7f3b6e7236fc in .../libtorch_cuda.so)"; pytorch/pytorch c10/util/Backtrace.cpp, get_backtrace, whose "frame #" and
# "<unknown function>" are in libc10.so): printed only under an error, so frames alone are a traceback cut above them
_ESCAPED_FRAME = re.compile(r'File \\"[^"\\]+\.py\\"')
_CPP_FRAME = re.compile(r"frame #\d{1,4}: (?:<unknown function>|\S.*? \+ 0x[0-9a-f]+\b|\S.*?\(0x[0-9a-f]+ in )")
# the same frames quoted in a Markdown heading (an issue's title), one or more on the line (round 19 wave 2, issue 24:
# b174_25); each frame of the line found by its "frame #N: " and the " + 0x" offset or "(0x... in " library after it
_HEADED_CPP_FRAME = re.compile(r"^ {0,3}#{1,6}[ \t]+" + _CPP_FRAME.pattern)
_CPP_FRAME_IN = re.compile(r"\bframe #\d{1,4}: (?:<unknown function>|[^#]*? \+ 0x[0-9a-f]+\b|[^#]*?\(0x[0-9a-f]+ in )")
# rich's frame header (rich/traceback.py, Traceback._render_stack: "{filename}:{lineno} in {name}" for a file on disk,
# "in {name}:{lineno}" otherwise) on a line of its box, possibly wrapped after the line number's first digits
_RICH_FRAME = re.compile(r"^│ (?:[\w./\\:~-]+\.py:\d+(?: in(?: [\w<>.]+)?)?|in [\w<>.]+:\d+)\s*│\s*$")
# IPython's verbose traceback (ipython/ipython IPython/core/ultratb.py _format_traceback_lines, commit not pinned here:
# the current line of a frame is numbered after debugger.make_arrow(pad), "-" * (pad - 3) + "-> " in the older code,
# pad = 7 - len(lineno)): "---> 78     launch_training(c=c, ...)"; only in a traceback (round 19, issue 24: b168_17)
_IPY_ARROW = re.compile(r"^-{1,6}> ?\d{1,6}(?: |$)")
_IPY_CONTEXT = re.compile(r"^(?=[ \d]{7} ) *\d{1,7} |^   \(\.\.\.\)\s*$")
# IPython's verbose traceback names each frame on its own line: "File <path>[:<lineno>], in <func>(<args>)", or for a
# notebook cell "Cell In[9], line 1" (ipython/ipython IPython/core/ultratb.py @02660f35, VerboseTB.format_record:
# '%s, %s' % (link, call), link = _format_filename's "File %s", call "in %s%s"; later 8.x releases add ":<lineno>" and the
# "Cell In[n], line m" link, as users' pastes show). Two or more are a traceback a process printed, as Python's own
# 'File "x.py", line 3, in f' frames are (round 19 wave 3, issue 24: b179_06, a pull request whose author's own
# notebook run failed, read as a quote)
_IPY_FRAME = re.compile(r"^(?:File (?:~|/|[A-Za-z]:[\\/]|\.{1,2}/)\S*?\.pyx?(?::\d+)?, in [\w.<>]+|Cell In ?\[\d+\], line \d+)")
_RICH_TB_TOP = re.compile(r"╭─+\s*Tr(?:a(?:c(?:e(?:b(?:a(?:c(?:k)?)?)?)?)?)?)?\s*$")
_GLUED_ROW = re.compile(r"\brank\s*:?\s*(\d+)\s*\(local[ _]rank:\s*(\d+)\)\s*exitcode\s*:\s*(-?\d+)\s*\(pid:\s*(\d+)\)", re.I)
_SPAWN_OWNER = spawn_lines.RAISED        # matched at the line's start (.match)
# the same line cut by a paste after "terminated with": ProcessRaisedException's message is "\n\n-- Process %d
# terminated with the following error:\n" (torch/multiprocessing/spawn.py, 2.13.0 wheel), and _wrap put that traceback
# in the queue then sys.exit(1): process N failed with exit code 1
_SPAWN_CUT = spawn_lines.RAISED_CUT      # matched at the line's start (.match)
_SPAWN_STOPPED = spawn_lines.TERMINATING
# Where torch's rendezvous creates the TCPStore: an exception raised in these is the store's (rendezvous.py)
_STORE_FUNCS = {"_env_rendezvous_handler", "_tcp_rendezvous_handler", "_create_c10d_store", "_create_tcp_store",
                "_create_tcp_store_server", "create_c10d_store", "_get_store", "_store_based_barrier"}
# ncclResult_t codes (NVIDIA/nccl src/nccl.h.in) -> the catalogue class of that result
_NCCL_RESULT_CLASS = {"1": "nccl_internal_error", "2": "nccl_system_error", "3": "nccl_internal_error",
                      "4": "nccl_invalid_usage", "5": "nccl_invalid_usage", "6": "nccl_remote_error"}
# Training progress: tqdm frames, step/loss lines, the Trainer's loss dicts (searched only on lines with a needle).
# A loss may be negative (a Dice or log-likelihood loss): nnU-Net's epoch summary "train loss : -0.0581" and
# "validation loss: -0.2892" (MIC-DKFZ/nnUNet nnunet/training/network_training/network_trainer.py @b8f30c9,
# print_to_log_file("train loss : %.4f"); round 16 b101_19).
_PROGRESS = _messages.Prefiltered(re.compile(r"(?<!\d)\d+%\|[^|]*\|\s*\d+/\d+|"   # (?<!\d): one start per number
                       # tqdm counting in units ("35%|███▌      | 192M/548M [00:04<00:07, 47.2MB/s]"): downloads, caching
                       r"(?<!\d)\d+%\|[^|]*\|\s*\d+(?:\.\d+)?[kMGTP]/\d+(?:\.\d+)?[kMGTP]\b|(?<!\d)\d+%\|[█▏▎▍▌▋▊▉#]+\s*$|"
                       # a step number; not nccl-tests' header "step: 1048576(bytes)" / "step: 2(factor)", its size step
                       # (NVIDIA/nccl-tests src/util.cu), printed before any test ran
                       r"\bstep[ =:]+\d+(?![\d(])|'loss': |\b[Ll]oss(?: is)?[ =:]+-?[\d.]+|\bit/s\]|s/it\]|"
                       r"\b(?:[Bb]atch|[Ii]ter(?:ation)?)[ :]+\d+ ?/ ?\d+|\b[Ee]poch[ :\[]+\d+ ?/ ?\d+|"
                       # a named loss in a metrics line: "total_loss: 2.746", "train_loss=0.31", JSON's "train_loss": 11.09
                       r"_loss[ =:]+-?[\d.]+|(?<!\w)\w*loss\": -?[\d.]+|"   # the look-behind: one start per word (linear)
                       # TensorBoard-style tags in a metrics line: "Loss/total: 3.41968", "loss/train=0.52"
                       r"\b[Ll]oss/\w+[ =:]+-?[\d.]+|"
                       # mmcv's and HRNet's "Epoch [1][50/500]" / "Epoch: [0][100/167]", "Train Epoch: 1 [73%]"
                       r"\[\d+\]\[\d+/\d+\]|\b[Ee]poch:? \d+ \[\d+%\]|"
                       # MXNet's Speedometer "Batch [%d]\tSpeed: %.2f samples/sec" (apache/mxnet python/mxnet/callback.py
                       # @011bde4; later versions print "Epoch[%d] Batch [%d-%d]\tSpeed: ...")
                       r"\bBatch \[\d+(?:-\d+)?\]\s+Speed: [\d.]+ samples/sec|"
                       # BasicSR's MessageLogger "[name..][epoch:{epoch:3d}, iter:{current_iter:8,d}, lr:(...)]"
                       # (XPixelGroup/BasicSR basicsr/utils/logger.py @04d2449; its older train.py: "<epoch:..., iter:...>")
                       r"\bepoch: *\d+, iter: *\d[\d,]*[,>\]]|"
                       # the DeiT/MAE MetricLogger.log_every "{header}  [{i}/{len}]" under the header "Epoch: [N]"
                       # (Alpha-VLLM/LLaMA2-Accessory accessory/util/misc.py @0e6ac40)
                       r"\b[Ee]poch: \[\d+\]\s+\[\s*\d+/\d+\]"))
# the exception line that ends a Python traceback: "module.Qualified.Name: message" at column 0 (any class name)
_TB_END_LINE = re.compile(r"[A-Za-z_][\w.]{0,200}: ")
# A tqdm bar that has not moved ("Training Epoch:   0%|          | 0/188 [00:00<?, ?it/s]"): printed before the first
# step, so it shows no step done; a job that hangs in its first collective prints one and nothing after.
_ZERO_BAR = re.compile(r"(?<![\d.])0%\|[^|]*\|\s*0/\d+(?:\s*\[[^\]]*\])?")


# Cloud Build's step prefix on each line of a step's output ('Step #3: ', 'Step #3 - "train": '; the number is the
# step's index in cloudbuild.yaml, not a rank)
_BUILD_STEP = re.compile(r'Step #(\d{1,4})(?: - "[^"]{0,100}")?: ')


def is_progress(text: str) -> bool:
    """Training progress: a step, a loss, a bar that moved. A bar still at 0/N alone is not."""
    if not _PROGRESS.search(text):
        return False
    return "0%|" not in text or bool(_PROGRESS.search(_ZERO_BAR.sub(" ", text)))


# distributed set-up in progress: NCCL's INFO lines, and the frameworks' "initializing" lines
_SETUP = _messages.Prefiltered(re.compile(
                    r"GLOBAL_RANK: \d+, MEMBER: \d+/\d+|[Ii]nitializing distributed|initializing ddp|distributed init "
                    r"\(rank|Setting up process group|store_based_barrier|Rendezvous'ing worker group|init_process_group|"
                    r"Starting elastic_operator with launch configs|Waiting in store based barrier|"
                    r"Setting OMP_NUM_THREADS environment variable for each process|"   # torchrun's start banner
                    # torch.distributed.launch's main(), deprecated since 2.0 (torch/distributed/launch.py): its start
                    r"The module torch\.distributed\.launch is deprecated|"
                    # C++/CUDA ops built and loaded before the first step: torch.utils.cpp_extension's "Loading extension
                    # module cpu_adam..." and DeepSpeed's op_builder/builder.py "Time to load cpu_adam op: 60.9 seconds"
                    r"Loading extension module \w+\.\.\.|Time to load \w+ op: |"
                    # the same JIT build's earlier lines, which a log cut during the build ends on (torch/utils/
                    # cpp_extension.py @cf30153: "Using %s as PyTorch extensions root...", "Emitting ninja build file
                    # %s...", "Building extension module %s...", "Detected CUDA files, patching ldflags"; round 22)
                    r"as PyTorch extensions root\.\.\.|Emitting ninja build file |Building extension module \w+\.\.\.|"
                    r"Detected CUDA files, patching ldflags|"
                    # the Trainer reloading its best checkpoint after "Training completed" (transformers trainer.py
                    # v5.25.0 _load_best_model: "Loading best model from %s (score: %s)."): a new phase after the end
                    r"\bLoading best model from \S+ \(score: |"
                    r"trainable params: [\d,]+ \|\| all params|"   # peft's count, printed before training
                    r"\bStarting (?:trainer|training)\b|"   # a framework's last line before its first step
                    # mmengine's (and mmcv 1.x's) runner before its first iteration (mmengine/runner/runner.py,
                    # mmengine/hooks/checkpoint_hook.py)
                    r"Hooks will be executed in the following order|Checkpoints will be saved to |"
                    r"\bInit(?:ializ(?:e|ing))? torch distributed\b|"   # serving frameworks' (sglang's model runner)
                    # DeepSpeed's own log lines ("[2024-05-08 14:29:20,246] [INFO] [comm.py:616:init_distributed]"):
                    # its progress lines ("step=10, skipped=0") count as progress first
                    r"\] \[(?:INFO|WARNING)\] \[[\w.]+\.py:\d+|"
                    # torchelastic's own INFO lines while it starts the workers (logging's default format)
                    r"^INFO:torch\.distributed\.(?:elastic\.agent|elastic\.rendezvous|launcher)|"
                    r"\b(?:entrypoint|min_nodes|max_nodes|nproc_per_node|run_id|rdzv_backend|rdzv_endpoint|rdzv_configs|"
                    r"max_restarts|monitor_interval|log_dir|metrics_cfg)\s+: |"   # torchrun's launch configs
                    r"\[launch\.py:\d+:main\]|\[runner\.py:\d+:main\] cmd = |WORLD INFO DICT|dist_world_size=|"   # deepspeed's
                    r"DeepSpeed info: version=|"
                    # the frameworks' start banners: the Trainer's, accelerate's, Lightning's
                    r"\*\*\*\*\* Running training \*\*\*\*\*|Num examples = |Total optimization steps = |"
                    r"Distributed environment: (?:MULTI_GPU|DEEPSPEED|FSDP)|LOCAL_RANK: \d+ - CUDA_VISIBLE_DEVICES|"
                    r"GPU available: True|"
                    # any launcher's or script's own account of the process group: "world_size 4", "local_rank = 1",
                    # "MASTER_ADDR=10.0.0.1", Lightning's "All distributed processes registered"
                    r"\b(?:world_size|world size|local_rank|global_rank|MASTER_ADDR|MASTER_PORT|WORLD_SIZE|LOCAL_RANK)"
                    r"\s*[=:]?\s*\d|All (?:distributed|DDP) processes registered|distributed_backend="))
# a framework's line naming this process's rank and the world size (Lightning: "GLOBAL_RANK: 1, MEMBER: 2/8")
# a log record: its time first (a date in any order of '-', '/' or '.', or the time alone, bracketed or not), then within
# a few fields one of logging's level names (CPython Lib/logging/__init__.py @v3.12.0 _levelToName: CRITICAL, ERROR,
# WARNING, INFO, DEBUG; WARN its alias), whatever the layout the program's formatter chose (PaddleOCR ppocr/utils/
# logging.py: '[%(asctime)s] %(name)s %(levelname)s: %(message)s' with datefmt '%Y/%m/%d %H:%M:%S'). A program's own
# line: under a thread's title, it is output (Job._titles)
_LOG_RECORD = re.compile(r"^\W{0,2}(?:\d{2,4}[-/.]\d\d[-/.]\d{2,4}[ T_-]?)?\d\d:\d\d:\d\d\S{0,12}\s.{0,60}?"
                         r"\b(?:CRITICAL|ERROR|WARNING|WARN|INFO|DEBUG)\b")
# torchrun's node count: its command line (`--nnodes 2`, `--nnodes=2:4`, torch.distributed.launch's `--nnodes=2`) or
# its launch configs (torch/distributed/launcher/api.py launch_agent: "min_nodes        : 2")
# `(?=(?P<lead>\W*))(?P=lead)` takes the leading non-word run atomically: a line of 64 KiB '/' or '=' no longer
# backtracks through it once per split point, O(n^2) (round 21: benchmarks/bench_regex.py)
_NNODES = re.compile(r"--nnodes[= ](?P<flag>\d+)\b|^(?=(?P<lead>\W*))(?P=lead)(?:\S+\s+)?min_nodes\s+: (?P<config>\d+)\s*$")
# a launch of one node: torchrun's or torch.distributed.launch's command line with its --nproc-per-node and no
# node count above 1 (torchrun's --nnodes defaults to "1:1": pytorch/pytorch torch/distributed/run.py @010929fd,
# get_args_parser; torch.distributed.launch's to 1), no node rank above 0 and no rendezvous or master address of another
# host. Its workers' local ranks are their global ranks (rules/__init__.launcher_failure).
_ONE_NODE = re.compile(r"(?:\btorchrun|torch\.distributed\.(?:launch|run)|\bdistributed/(?:launch|run)\.py)\b.*"
                       r"--nproc[_-]per[_-]node")
_MULTI_NODE = re.compile(r"--nnodes[= ]+(?!1(?::1)?\b)\S|--node[_-]rank[= ]+[1-9]|--rdzv[_-]endpoint|"
                         r"--master[_-]addr[= ]+(?!(?:127\.0\.0\.1|localhost)\b)\S")
# the rendezvous completed, or workers started (torch/distributed/elastic/agent/server/api.py: "Rendezvous complete
# for workers", "[default] Starting worker group"; dynamic_rendezvous.py: "has joined round N of the rendezvous")
_RDZV_DONE = re.compile(r"Rendezvous complete for workers|has joined round \d+ of the rendezvous|Starting worker group|"
                        r"group_world_size=\d+|Rendezvous'ing worker group.*done|All (?:distributed|DDP) processes registered")
# the agent waiting in it (api.py "[default] Rendezvous'ing worker group"; dynamic_rendezvous.py "attempts to join the
# next round of the rendezvous"; static: "Waiting for N nodes" is not a torch text and not read)
_RDZV_WAIT = re.compile(r"Rendezvous'ing worker group|attempts to join the next round of the rendezvous")
_RANK_CLAIM = re.compile(r"GLOBAL_RANK: (\d+), MEMBER: (\d+)/(\d+)")
# the RANK environment variable as a process prints it (env, printenv, print(f"RANK={os.environ['RANK']}")): the word
# RANK alone (not LOCAL_RANK, GROUP_RANK, NODE_RANK, $RANK), "=", digits
_PRINTED_RANK = re.compile(r"(?<![\w$.-])RANK=(\d{1,6})\b")
# the reporter naming the failing process in prose: "the error happens on rank 3", "only in rank 5" (lower case, a
# preposition before it; a framework's "[rank3]:" prefix or "RANK=3" is not prose)
_PROSE_RANK = re.compile(r"\b(?:on|in|from|at|for) (?:the )?rank (\d{1,6})\b(?! *[:=\]])")
_UCX_SIGNAL = re.compile(r"^\[[\w.\-]+:(\d+):\d+(?::\d+)?\] Caught signal 7 \(Bus error")
# how many traced collectives of one communicator are kept (each holds its line)
_COLL_TRACE_KEEP = 20000
# the communicator's pointer NCCL prints before its rank ("comm 0x55d5a8f0c0 rank 0 nranks 2 cudaDev 0 ...")
_COMM_PTR = re.compile(r"\bcomm (0x[0-9a-fA-F]+|\(nil\)) rank \d+ nranks \d+")
_QUIET_KINDS = {"nccl_version", "nccl_comm", "nccl_iface", "nccl_p2p", "nccl_init_complete", "torch_version", "nccl_coll_trace",
                "cuda_version", "tokenizers_fork", "run_finding", "nccl_frame"}


# kinds the catalogue leaves without a role whose line is a process failing (an exit, a signal, a traceback's exception)
_FAILURE_KINDS = frozenset({"exception", "torchrun_failed", "table_row", "spawn_exit", "srun_task", "shell_killed",
                            "shell_signal", "zsh_signal", "ide_exit", "mpirun_exit", "mpich_exit", "horovod_exit", "launcher_rank_exit",
                            "segfault", "oom_killer", "watchdog", "watchdog_seq", "child_failed", "nccl_aborted",
                            "teardown_abort"})


def _looks_failed(line: Line, evs: List[Event]):
    """Is this line a sign of failure (for the first failure line of its rank)? A catalogue class decides when
    the line is a known message (a benign warning or an end is not a failure); else the words do ("words":
    true, but only the line's words say so)."""
    roles = {_messages.role(ev.kind) for ev in evs}
    if line.nccl == "INFO" and not any(ev.kind == "nccl_result_trace" for ev in evs):
        # NCCL's INFO lines say what it does ("Allocated 9637892 bytes of shared memory in /dev/shm/..."): context for
        # a failure its WARN lines or error traces show, never the failure line itself
        roles.discard("context")
    if roles & {"cause", "consequence", "context"}:
        failing = [ev for ev in evs if _messages.role(ev.kind) in ("cause", "consequence", "context")]
        if all(survivable(ev) for ev in failing):
            return "words"   # a message the job can go on from (its entry says so): failed only if nothing follows
        return True
    if roles & {"benign", "end"}:
        return False
    kinds = {ev.kind for ev in evs}
    if kinds - _QUIET_KINDS - {"nccl_warn"} and kinds & _FAILURE_KINDS:
        return True
    if "nccl_result_trace" in kinds:
        return True
    if "nccl_warn" in kinds:
        # NCCL warns of what it survives too (a library it falls back from, an IB port event): a WARN is a failure
        # when the catalogue says so (above) or when NCCL then traces an error back (" -> 3"); Job.first_warn keeps it
        return False
    if line.nccl == "INFO" or kinds & _QUIET_KINDS:
        return False
    return _prose.judge_text(line.text)   # the line's words alone: prose.py


# CPython's warnings module prints a warning as "<file>:<lineno>: <Category>: <message>" and then the warned-from
# source line indented by two spaces (Lib/warnings.py _formatwarnmsg_impl @v3.12.0: s += "  %s\n" % line): that echo
# is code (`rank_zero_warn("Error handling mechanism for deadlock detection is uninitialized...")`), whatever words it
# holds, never a failure line (round 14, wave 3: pytorch_lightning's DDP warning on ROCm/rccl#1055)
_PY_WARNING_HEADER = re.compile(r":\d+: [A-Z]\w*Warning: ")
_WARN_SOURCE_ECHO = re.compile(r"^  \S")
_FEEDER_FRAME = re.compile(r'multiprocessing[/\\]queues\.py", line \d+, in _feed\b')
_UNRAISABLE = _messages.Prefiltered(re.compile(r"\bException ignored (?:in|on|while)\b"))
# a traceback's later lines: a frame or its code (indented), or the chaining notes between two tracebacks
_CONTINUATION = re.compile(r"^\s+\S|^(?:During handling of the above exception|The above exception was the direct cause)")
_EXC_LINE = re.compile(r"^(?:\[rank\d+\]:\s*)?[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit)\b:?")


def _task_list(text: str) -> List[int]:
    out: List[int] = []
    for part in text.split(","):
        part = part.strip()
        if "-" in part:
            a, b = part.split("-", 1)
            if a.isdigit() and b.isdigit() and int(b) - int(a) < 100000:
                out.extend(range(int(a), int(b) + 1))
        elif part.isdigit():
            out.append(int(part))
    return out


def _before(a: Exit, b: Exit) -> bool:
    if a.ts is not None and b.ts is not None:
        return a.ts < b.ts
    if a.where is not None and b.where is not None:
        return (a.where.src, a.where.lineno) < (b.where.src, b.where.lineno)
    return False


def _fmt_ts(ts: float) -> str:
    """Seconds since 1 January back to 'MM-DD HH:MM:SS' (the year was never known)."""
    days = int(ts // 86400)
    rest = ts - days * 86400
    from .lines import _DAYS

    month = max(i for i, start in enumerate(_DAYS) if start <= days)
    day = days - _DAYS[month] + 1
    h, rem = divmod(int(rest), 3600)
    m, s = divmod(rem, 60)
    return f"{month + 1:02d}-{day:02d} {h:02d}:{m:02d}:{s:02d}"
