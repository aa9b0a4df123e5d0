"""Log line -> events: the messages catalogue (ddpdoctor.facts.messages) classifies a line, and a short table
of parsers reads the fields rules need from the formats they reconstruct the job from.

Two sources of events, one per question:
- the catalogue answers "what kind of failure is this line": every entry mined from torch, NCCL, the CUDA
  runtime, transformers, accelerate, DeepSpeed, Ray, SLURM and the kernel that matches the line gives an
  event whose kind is the entry's class (`cuda_fault`, `host_oom`, `config_mismatch`...), with the entry
  and its fields. Rules ask for classes, never for texts.
- `SIGNATURES` below parse structure: the fields of the watchdog's cross-tab, torchrun's exits and its
  table, srun's tasks, NCCL's ranks, versions and interfaces, and a few texts no mined source prints as one
  literal (the shell's `Killed`, tokenizers' fork warning, `ddpdoctor run`'s own findings). When both give
  the same kind for a line, the parser's event (with its fields) is kept.

Every entry is (kind, a cheap substring test, a regex). The substring is checked first, so a line
that matches nothing costs a few `in` tests. Past the head of a file the reader hands over only the
lines that carry one of its ANCHORS (or follow an opener, in a window), so the real line behind every
signature must carry one: in the substring itself, or around it (the "Error" of the exception that
says it, NCCL's "NCCL INFO" prefix, torch's "[c10d]"). tests/test_triage_reader.py checks it with every
rule fixture buried past the head.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from ..facts import messages as _messages
from ..facts.literals import LiteralSet
from .lines import Line


@dataclass
class Event:
    kind: str
    line: Line
    data: Dict[str, object] = field(default_factory=dict)


# NCCL's WARN texts open with their subsystem ("Net : ", "NET/IB : ", "NET/Socket : ", "Bootstrap : ", "TOPO/NET : ":
# the WARN formats of NVIDIA/nccl src/ @5067397); a pdsh or srun host prefix ("node2: ") may stand before one
# the shell's word for a job killed by SIGKILL: "Killed", or glibc's translation of it under the job's locale
KILLED_ALT = "|".join(re.escape(t) for t in ("Killed",) + _messages.KILLED_TEXTS)
# the shell's words for a job dead on SIGSEGV, SIGABRT or SIGBUS in the other languages (glibc's strsignal() and bash's
# siglist.c through their .po catalogues, data/strsignal.json), bash's "line %d: " and "(core dumped)" likewise
SIGNAL_TEXTS_OTHER = tuple(t for sig in ("SIGSEGV", "SIGABRT", "SIGBUS") for t in _messages.SIGNAL_TEXTS.get(sig, ()))
SIGNAL_OF_TEXT = {t: sig for sig in ("SIGSEGV", "SIGABRT", "SIGBUS") for t in _messages.SIGNAL_TEXTS.get(sig, ())}
SIGNAL_OF_TEXT.update({"Aborted": "SIGABRT", "Segmentation fault": "SIGSEGV", "Bus error": "SIGBUS",
                       "Illegal instruction": "SIGILL", "Floating point exception": "SIGFPE"})
SIGNAL_ALT_OTHER = "|".join(re.escape(t) for t in sorted(SIGNAL_TEXTS_OTHER, key=len, reverse=True)) or "(?!)"
BASH_LINE_ALT = "|".join(re.escape(f.strip()).replace("%d", r"\d+") for f in _messages.BASH_LINE_FORMATS) or "(?!)"
# (a catalogue's full-width parentheses, "（核心已转储）", are ASCII ones in older translations: "段错误 (核心已转储)")
CORE_ALT = "|".join(re.escape(t) for t in sorted({v for t in _messages.CORE_DUMPED_TEXTS
                                                  for v in (t, t.replace("（", "(").replace("）", ")"))})) or "(?!)"
# what may stand before that word when a terminal's progress bar, drawn with "\r" and no newline, ends the line
# ("... elapsed: 799s, ETA: 157s已杀死"): a duration or a percentage, a rate, a bar's edge
GLUED_TO_PROGRESS = r".*(?:\d[smh%]|it/s|s/it|/s|\||\])\s*"
# what may follow that word when the shell's newline was lost (round 20, issue 24: b182_17): bash writes its notice
# ("Killed", strsignal(SIGKILL) through bash jobs.c notify_of_job_status) on a line of its own, but a terminal paste
# can keep it glued to what came next: the next prompt (bash's PS1: Debian's default "\u@\h:\w\$ " as
# "root@host:~# ", bash's own default "\s-\v\$ " as "bash-5.2$ ", a bare "$ " / "# " / "% " / "> "), or the rest of a
# progress line the program had drawn with "\r" and the notice overwrote from its first column ("Killedg in train
# batch: 127687 / 263115": a word's tail, then the line's counter, with no words after it)
# (The counter part is written so that a regex engine does linear work on a 64 KiB line: "the line's tail after its
# last letter holds a counter or a percentage, or that last letter ends it/s or s/it" - the same lines as
# `.*?(?:\d+\s*/\s*\d+|\d+(?:\.\d+)?%|it/s|s/it)[^A-Za-z]*$`, which re-scanned the tail from every counter: quadratic,
# seconds per line on "Killedg 1/1 1/1 ... x". `(?=(...))\1` takes the text up to the last letter at once (an atomic
# group, which Python < 3.11 lacks); a counter's digits are tried from the start of their run only.)
KILLED_GLUED = (r"(?:(?:\(\S+\)\s*)?[\w.-]+@[\w.-]+(?::\S*)?\s*[$#%>]|bash-\d+(?:\.\d+)?[$#]|[$#%>](?:\s|$)|"
                r"[a-z]\S*\s(?=(?P<_glued>.*[A-Za-z]|))(?P=_glued)"
                r"(?:(?<=it/s)|(?<=s/it)|[^A-Za-z]*?(?<!\d)(?:\d+\s*/\s*\d+|\d+(?:\.\d+)?%))[^A-Za-z]*$)")
_NCCL_SUBSYS = re.compile(r"^\s*(?:[\w.\-]+: )?(?:Net|NET/(?:IB|Socket|Plugin)|Bootstrap|TOPO/NET) : ")
# NCCL writes a socket address as "IP<port>" (ncclSocketToString, src/misc/socket.cc @5067397): a connect to such an
# address is NCCL's own socket (bootstrap or transport), also on the line torch prints after "Last error:" without
# NCCL's prefix ("socketPollConnect: connect to 169.254.20.10<52597> returned Connection refused, ..."); the c10d
# store writes "[host]:port"
_NCCL_ADDR = re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}<\d+>|\]<\d+>")
_UCX_LOG = re.compile(r"\.\w+:\d+\s+UCX\s+(?:FATAL|ERROR|WARN|DIAG|INFO|DEBUG|TRACE\w*)\s")


def _re(p: str) -> "re.Pattern":
    return re.compile(p)


def _any_prefix(text: str) -> str:
    """A regex for any prefix of `text` (the empty one included): where a paste cut a known message."""
    return "(?:" + "|".join(re.escape(text[:n]) for n in range(len(text), 0, -1)) + ")?"


# (kind, substrings (any), regex or None). Order matters only for readability.
SIGNATURES: List[Tuple[str, Tuple[str, ...], Optional["re.Pattern"]]] = [
    # ---- ProcessGroupNCCL watchdog (old and new wording)
    # the fields inside WorkNCCL(...) come in any order (OpType before SeqNum in older torch); job.py reads them
    # torch 1.8-2.0 also raised the same text from the waiting thread under NCCL_BLOCKING_WAIT, without "Watchdog":
    # WorkNCCL::synchronizeInternal's c10::str("[Rank ", rank_, "] ", "Caught collective operation timeout: ", (*this),
    # " ran for ", ms, " milliseconds before timing out.") (ProcessGroupNCCL.cpp of those releases; read from copies of
    # the file, commit not pinned here), TensorShape=[...] in the WorkNCCL(...) of the older printer
    ("watchdog", ("Watchdog caught collective operation timeout", "Caught collective operation timeout"),
     _re(r"(?:\[(?:PG ID \S+ PG GUID \S+ )?Rank (?P<rank>\d+)\] )?(?:Watchdog c|C)aught collective operation timeout:?\s*"
         r"WorkNCCL\((?P<body>[^)]*)\)(?:\)?\s*ran for (?P<ran>\d+) (?:milliseconds|ms))?")),
    ("watchdog_seq", ("NCCL work:", "last enqueued work:", "last enqueued NCCL work:"),
     _re(r"\[PG (?:ID )?(?P<pg>\S+)(?: PG GUID (?P<guid>\S+)| \([^)]*\))?(?: \([^)]*\))? Rank (?P<rank>\d+)\]\s+"
         r"(?:Timeout at NCCL work|.*?detected by watchdog at work(?: sequence id)?):? (?P<seq>\d+)(?:,| PG status:) "
         r"last enqueued (?:NCCL )?work: (?P<enq>\d+), last completed (?:NCCL )?work: (?P<done>\d+)")),
    # the watchdog's own C++ stack, when a paste kept only its frames: checkTimeout is where it found the timeout
    # (torch >= 2.7 moved the loop into a class: ProcessGroupNCCL::Watchdog::run() catches what the loop threw -- a
    # timeout, an NCCL or CUDA error -- logs "Process group watchdog thread terminated with exception" and rethrows it,
    # so its stack says "Exception raised from run at .../ProcessGroupNCCL.cpp"; before, ncclCommWatchdog did the same,
    # around watchdogHandler(), the loop's body: their frames "c10d::ProcessGroupNCCL::ncclCommWatchdog() + 0x14d" and
    # "...::watchdogHandler() + 0x233" are that rethrown stack's, as Watchdog::run's are -- round 23, b200_04)
    ("watchdog_frame", ("WorkNCCL::checkTimeout", "Exception raised from checkTimeout", "Watchdog::run",
                        "Exception raised from run at", "Exception raised from ncclCommWatchdog",
                        "ProcessGroupNCCL::ncclCommWatchdog()", "ProcessGroupNCCL::watchdogHandler()"),
     _re(r"ProcessGroupNCCL::WorkNCCL::checkTimeout|Exception raised from checkTimeout at \S*ProcessGroupNCCL|"
         r"(?P<loop>ProcessGroupNCCL::(?:Watchdog::run|ncclCommWatchdog|watchdogHandler)\(|"
         r"Exception raised from (?:run|ncclCommWatchdog) at \S*ProcessGroupNCCL)")),
    # the watchdog's timeout line cut by the paste before WorkNCCL(...) ("[Rank 62] Watchdog caught collective oper"):
    # "Watchdog caught collective operation timeout" is the only ProcessGroupNCCL text that starts so (its
    # checkTimeout message, pytorch/pytorch torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp @6170845): that rank's
    # collective timed out, the op and sequence number cut away
    ("watchdog_abort", ("Watchdog caught",),
     _re(r"Watchdog caught" + _any_prefix(" collective operation timeout:") + r"\s*$")),
    ("gloo_timeout", ("Timed out waiting", "rror"),
     _re(r"gloo.*Timed out waiting (?P<ms>\d+)ms for (?P<what>\w+) operation")),
    ("nccl_aborted", ("NCCL communicator was aborted", "NCCL error: remote process exited",
                      "remote process exited or there was a network error", "Connection reset by peer",
                      "Connection closed by peer", "Broken pipe"), None),
    # ---- torchrun (three logging styles share the message) and the elastic table
    # the deepspeed launcher's exit line names the local rank in the command it ran
    # (deepspeed/launcher/launch.py sigkill_handler: f"{cmd} exits with return code = {last_return_code}"); a user's
    # retelling keeps the words around the code but not their spacing or "return" ("exits with run code= -9",
    # "exits with return code -9"): the same report, read alike (not "exit with status code", horovodrun's)
    ("ds_exit", ("exits with return code", "exits with run code", "exits with exit code"),
     _re(r"(?:--local_rank=(?P<local_rank>\d+).*)?exits with (?:return|run|exit) code\s*(?:=\s*)?(?P<code>-?\d+)")),
    # torchrun's record() wrapper when the first failed worker wrote no error file: logger.info((fmt, rank)) hands
    # logging a TUPLE, so the line is its repr, "('local_rank %s FAILED with no error file. Decorate ...', 0)"; the
    # number is get_first_failure()'s key, the GLOBAL rank of the first failure despite the word "local_rank"
    # (torch/distributed/elastic/multiprocessing/errors/__init__.py, torch 2.13.0 wheel @cf30153; the same in 2.x)
    ("elastic_no_error_file", ("FAILED with no error file",),
     _re(r"local_rank (?:%s FAILED with no error file\..*?['\"],\s*(?P<rank>\d+)\)|(?P<rank2>\d+) FAILED with no error file)")),
    ("torchrun_failed", ("exitcode",),
     # (a paste may cut the line after the exit code: the code alone still says how the process ended)
     # (and one a user retyped or a page reflowed without its spaces: "failed(exitcode:-9)")
     # (or typed with an input method's full-width punctuation, U+FF08/U+FF09 parentheses, U+FF1A colon, U+FF1B
     # semicolon, or its pid part cut: "local_rank: 0；" names the local rank all the same; torch/distributed/elastic/
     # multiprocessing/api.py prints "failed (exitcode: %s) local_rank: %s (pid: %s) of binary: %s")
     _re(r"failed ?[(\uff08] ?exitcode ?[:\uff1a] ?(?P<code>-?\d+) ?[)\uff09](?: ?local_rank ?[:\uff1a] ?(?P<local_rank>\d+)"
         r"(?![\d.])(?:[ ;,\uff1b\uff0c]{0,2}[(\uff08]pid ?[:\uff1a] ?(?P<pid>\d+)[)\uff09])?)?")),
    ("table_row", ("exitcode  :", "exitcode :"), _re(r"^\s*exitcode\s*: (?P<code>-?\d+) \(pid: (?P<pid>\d+)\)")),
    ("child_failed", ("ChildFailedError",), None),
    # ---- Ray's OOM report: the rows of its "Top 10 memory users:" table (PID, MEM(GB), COMMAND)
    ("memory_table_row", ("ray::", "\tpython", " python"), _re(r"^\s*(?P<pid>\d+)\s+(?P<gb>\d+\.\d+)\s+(?P<cmd>\S.*)$")),
    # ---- the resolver (glibc's gai_strerror texts, as Python's socket.gaierror and c10d print them)
    ("address_unresolved", ("Name or service not known", "Temporary failure in name resolution",
                            "No address associated with hostname", "nodename nor servname provided"), None),
    # ---- host memory, signals
    ("oom_killer", ("Out of memory: Killed process", "oom-kill:", "Memory cgroup out of memory", "oom_kill_process",
                    "Killed process", "oom-kill event", "oom_kill event"),
     _re(r"(?:Killed process (?P<pid>\d+) \((?P<comm>[^)]*)\))?")),
    ("spawn_exit", ("terminated with signal", "terminated with exit code"),
     _re(r"process (?P<rank>\d+) terminated with (?:signal (?P<sig>SIG\w+)|exit code (?P<code>-?\d+))")),
    # Lightning's launcher (lightning/fabric/strategies/launchers/subprocess_script.py @48e0597, _ChildProcessObserver):
    # rank_prefixed_message("Child process with PID {pid} terminated with code {returncode}. Forcefully terminating
    # all other processes to avoid zombies", rank=i + 1): that rank's process ended with that code (negative: a signal)
    ("lightning_exit", ("Child process with PID",),
     _re(r"\[rank: (?P<rank>\d+)\] Child process with PID (?P<pid>\d+) terminated with code (?P<code>-?\d+)")),
    # Open MPI's launcher when a rank dies of a signal (orterun/prterun help text "proc-aborted-signal"; format of real
    # logs, the ompi commit not read here): "mpirun noticed that process rank 7 with PID 0 on node H exited on signal 9
    # (Killed)." -- the MPI rank (Horovod's rank) and the signal; PID 0 means mpirun did not know it. One line only.
    # Open MPI before v1.3 wrote "job rank" and quoted the node (orte/tools/orterun/help-orterun.txt @018c4aa4,
    # [orterun:proc-aborted]: '%s noticed that job rank %lu with PID %lu on node "%s" exited on signal %d.'; round 21)
    ("mpirun_exit", ("noticed that process rank", "noticed that job rank"),
     _re(r"(?:mpirun|mpiexec|orterun|prterun) noticed that (?:process|job) rank (?P<rank>\d+) with PID (?P<pid>\d+) on "
         r"node \"?(?P<node>[^\s\"]+)\"? exited on signal (?P<signum>\d+)")),
    # MPICH's Hydra launcher (mpiexec.hydra) when a process of the job ends badly: its banner "BAD TERMINATION OF ONE OF
    # YOUR APPLICATION PROCESSES / PID 9665 RUNNING AT host / EXIT CODE: 9", then, for a death by signal, "YOUR
    # APPLICATION TERMINATED WITH THE EXIT STRING: Killed (signal 9)" (strsignal's text and the number; format as users'
    # logs print it: openai/jukebox#155, round 17 wave 3 b121_06; the MPICH sources not read here). The signal; no rank.
    ("mpich_exit", ("TERMINATED WITH THE EXIT STRING",),
     _re(r"TERMINATED WITH THE EXIT STRING: (?P<what>[^()]*?)\s*\(signal (?P<signum>\d+)\)")),
    # Open MPI's launcher when a process exits non-zero (after its "Primary job terminated normally, but 1 process
    # returned a non-zero exit code" banner): "mpirun detected that one or more processes exited with non-zero status,
    # thus causing the job to be terminated. The first process to do so was:" then "  Process name: [[35302,1],0]" and
    # "  Exit code:    1" on the next line (format as users' logs print it: huyustats/SCATS#7, KhiopsML/khiops#216,
    # E3SM-Project/scream#2193 under mpiexec; the ompi sources are held out of this project's reading). The name is
    # [[jobid,vpid_of_job],RANK]: the rank in MPI_COMM_WORLD; Job reads the next line's code.
    ("mpirun_first", ("Process name: [[",),
     _re(r"^\s*Process name:\s*\[\[(?P<jobid>\d+),(?P<job>\d+)\],(?P<rank>\d+)\]\s*$")),
    # horovodrun's Gloo launcher when a rank's command ends non-zero (horovod/horovod horovod/runner/gloo_run.py
    # _exec_command @b4c191c v0.24.2: print('Process {idx} exit with status code {ec}.'), idx = slot_info.rank): the
    # Horovod rank and the shell's status; safe_shell_exec turns a death by signal N into 128 + N (the bash convention)
    ("horovod_exit", ("exit with status code",),
     _re(r"\bProcess (?P<rank>\d+) exit with status code (?P<code>\d+)\.")),
    # Launchers that name the rank whose process ended (batch 75/76's class; the formats as users' logs show them, the
    # launchers' sources not read here): composer's (mosaicml/composer composer/cli/launcher.py) "ERROR:composer.cli.launcher:
    # Rank 1 crashed with exit code 1." (mosaicml/examples#292, mosaicml/llm-foundry#258: "... exit code -7.") and its
    # later "Global rank 0 (PID 208865) exited with code -11" (mosaicml/llm-foundry#1501); paddle.distributed.launch's
    # "ABORT!!! Out of all 4 trainers, the trainer process with rank=[3] was aborted. Please check its log."
    # (PaddlePaddle/Paddle#33074; "rank=[0, 1]" lists several, PaddlePaddle/PaddleOCR#13791): the rank(s), and for
    # composer the exit code (negative: the signal).
    ("launcher_rank_exit", ("crashed with exit code", "exited with code", "trainer process with rank="),
     _re(r"(?:composer\.cli\.launcher:\s*(?:Global )?[Rr]ank (?P<rank>\d+) (?:\(PID (?P<pid>\d+)\) )?(?:crashed|exited) "
         r"with (?:exit )?code (?P<code>-?\d+)|Out of all (?P<world>\d+) trainers, the trainer process with "
         r"rank=\[(?P<ranks>\d+(?:, ?\d+)*)\] was aborted)")),
    # Horovod's stall inspector (v0.19+) lists, under "Stalled ranks:" (to v0.20.0) or "Missing ranks:" (v0.20.3 on), one
    # line per rank that has NOT submitted some stalled tensors: "3: [allreduce.grad_0, ...]", "3!: [...]" once that
    # rank passed the shutdown time (horovod/horovod horovod/common/stall_inspector.cc CheckForStalledTensors @396c131
    # v0.20.0, @b4c191c v0.24.2). The Job reads such a line only right under that header.
    ("hvd_rank_row", (": [",), _re(r"^(?P<rank>\d+)(?P<bang>!)?: \[(?P<ops>.*?)\]?\s*$")),
    # (also glibc's translations of "Killed", data/strsignal.json: "已杀死" under zh_CN; and the word glued to the end of
    # a progress bar that was drawn with "\r" and no newline, "... ETA: 157s已杀死", as a paste of the terminal keeps it)
    ("shell_killed", ("Killed",) + _messages.KILLED_TEXTS,
     _re(r"^(?:(?:.*: (?:line \d+:|%s) *\d+ )?(?:%s)(?: +.*)?|%s(?:%s)|Killed%s.*)$"
         % (BASH_LINE_ALT, KILLED_ALT, GLUED_TO_PROGRESS, KILLED_ALT, KILLED_GLUED))),
    # the same shell report for the other deadly signals: bash prints strsignal() of the job's signal ("Aborted",
    # "Segmentation fault", "Bus error", ... then "(core dumped)" when it dumped) and the command it ran (bash jobs.c,
    # pretty_print_job; glibc's signal names). A launcher that runs each rank through a shell (horovodrun's
    # "bash: line 1: PID Aborted  HOROVOD_RANK=0 ... python train.py") puts the rank's environment in that command.
    # Under another locale the shell writes each of these words, "line %d: " and "(core dumped)" translated (glibc's and
    # bash's .po catalogues, data/strsignal.json: "train.sh: Zeile 3: 4242 Speicherzugriffsfehler  python ...", "段错误
    # (核心已转储)"); a foreground job's report is the word alone on its line (round 20, issue 24: b179_16's locale).
    ("shell_signal", ("Aborted", "Segmentation fault", "Bus error", "Illegal instruction", "Floating point exception")
     + SIGNAL_TEXTS_OTHER,
     _re(r"(?:: (?:line \d+:|%s) *(?P<pid>\d+) +(?P<what>Aborted|Segmentation fault|Bus error|Illegal instruction|"
         r"Floating point exception|%s)(?: *(?:\(core dumped\)|%s))?(?: +(?P<cmd>\S.*))?|^(?P<bare>%s)(?: *(?:\(core dumped\)|%s))?"
         # the English foreground report alone on its line (bash jobs.c: strsignal(termsig), then " (core dumped)"):
         # SIGILL's and SIGFPE's words are no other program's, and the CPU raises them (arch/x86/kernel/traps.c: #UD,
         # #DE), so the death is the failure. "Aborted (core dumped)" alone is left to the line before it (abort() is
         # raised by the process after it printed why: a glog "Check failed", "terminate called"). "Segmentation
         # fault" and "Bus error" alone are the segfault and bus_error kinds' (round 25, issue 24: a bare "Illegal
         # instruction (core dumped)" was read as an unexplained failure)
         r"|^(?P<bare_en>Illegal instruction|Floating point exception)(?: \(core dumped\))?)$"
         % (BASH_LINE_ALT, SIGNAL_ALT_OTHER, CORE_ALT, SIGNAL_ALT_OTHER, CORE_ALT))),
    # zsh's report of a job that died on a signal: its own lower-case texts (Src/signames2.awk: "segmentation fault",
    # "abort", "killed", ...; data/strsignal.json "zsh"), after "zsh: " for the foreground job or "[N]  + " (and the
    # pid with `jobs -l`) for another, padded with at least two spaces before the command (Src/jobs.c printjob)
    ("zsh_signal", ("zsh: ",) + tuple(f"{t}  " for t in _messages.ZSH_SIGMSG) + ("(core dumped)",),
     _re(r"^(?:zsh: |\[\d+\]  [+\- ] (?:(?P<pid>\d+) )?)(?P<what>%s)(?: \(core dumped\))? {2,}(?P<cmd>\S.*)$"
         % "|".join(re.escape(t) for t in sorted(_messages.ZSH_SIGMSG, key=len, reverse=True)))),
    # PyCharm's (IntelliJ's) Run window when the process it started ends: IdeCoreBundle.properties @432c504
    # finished.with.exit.code.text.message "Process finished with exit code {0}", on a signal followed by
    # "(interrupted by signal N: SIGNAME)" (ProcessTerminatedListener; format of real logs: "exit code 137 (interrupted by
    # signal 9: SIGKILL)", "139 (interrupted by signal 11: SIGSEGV)"); exit code 0 is the catalogue's job_ended_well
    ("ide_exit", ("Process finished with exit code",),
     _re(r"Process finished with exit code (?P<code>\d+)(?: \(interrupted by signal (?P<signum>\d+): (?P<sig>SIG[A-Z]+)\))?")),
    ("segfault", ("Segmentation fault", "SIGSEGV"), None),
    # libstdc++'s std::terminate for a std::thread still joinable when destroyed: at interpreter exit, Gloo's
    # worker thread, ended by CPython while the interpreter finalizes (facts.teardown; pytorch/pytorch#190489)
    ("teardown_abort", ("terminate called without an active exception",), None),
    # ---- CUDA memory
    # CUDA's own texts only (c10/cuda/CUDACachingAllocator.cpp's "CUDA out of memory. Tried to allocate", and the
    # CUDA-only name torch.cuda.OutOfMemoryError): a bare "OutOfMemoryError" is as often a host's (Ray's
    # ray.exceptions.OutOfMemoryError from its memory monitor, java.lang.OutOfMemoryError), which LOG002 reads
    ("cuda_oom", ("CUDA out of memory", "cuda.OutOfMemoryError"),
     _re(r"(?:Tried to allocate (?P<want>[\d.]+ [KMGT]i?B))?(?:.*?GPU (?P<gpu>\d+) has a total capac\w* of (?P<total>[\d.]+ [KMGT]i?B))?"
         r"(?:.*?of which (?P<free>[\d.]+ [KMGT]i?B) is free)?")),
    # ---- two ranks, one GPU
    ("duplicate_gpu", ("Duplicate GPU detected",),
     _re(r"Duplicate GPU detected ?: rank (?P<a>\d+) and rank (?P<b>\d+) both on CUDA device (?P<dev>\w+)")),
    ("nccl_invalid_usage", ("ncclInvalidUsage", "invalid usage (run with NCCL_DEBUG=WARN"), None),
    # ---- rendezvous / store
    # the port: the socket's "bind to [ADDR]:PORT", or the libuv store's "port: PORT, useIpv6: ..., code: -98, name:
    # EADDRINUSE" (torch/csrc/distributed/c10d/TCPStoreLibUvBackend.cpp's TORCH_CHECK texts, the default store from 2.4)
    ("port_in_use", ("Address already in use", "errno: 98", "EADDRINUSE"),
     _re(r"(?:bind to \[?(?P<addr>[^\]\s]*)\]?:(?P<port>\d+)|\bport: (?P<uvport>\d+), useIpv6: )?")),
    ("store_refused", ("Connection refused", "errno: 111"),
     _re(r"^(?:.*?\bconnect (?:to )?\[?(?P<addr>[^\]\s]+?)\]?:(?P<port>\d+))?")),   # Gloo < 2023: "connect [ADDR]:PORT: ..."
    # (Gloo's transport names its own connect timeout "[.../gloo/transport/tcp/pair.cc:611] Connect timeout [ADDR]:PORT":
    # format from a real log, the file and line as the message names them; gloo's source commit not read here)
    ("store_timeout", ("The client socket has timed out", "DistStoreError: Timed out", "Socket Timeout",
                       "while trying to connect to", "errno: 110", "pair.cc:611] Connect timeout", "] Connect timeout ["),
     _re(r"(?:timed out after (?P<secs>\d+)(?:s| seconds|ms)?)?(?:.*?connect to (?:\((?P<addr>[^,]+), (?P<port>\d+)\)"
         r"|\[(?P<addr2>[^\]]+)\]:(?P<port2>\d+)|(?P<addr3>[\w.\-]+):(?P<port3>\d+)))?"
         r"(?:.*?Connect timeout \[(?P<addr4>[^\]]+)\]:(?P<port4>\d+))?")),
    ("srun_task", ("srun: error:",),
     # srun's _task_finish (SchedMD/slurm src/srun/launch.c @284c3b95): error("%s: %s %s: %s%s", hosts, task_str, tasks,
     # strsignal(WTERMSIG(rc)), core_str) for a task dead on any signal: each fatal signal's glibc text, SIGILL's and
     # SIGFPE's too (round 25, issue 24)
     _re(r"srun: error: (?P<host>[\w.\-]+): tasks? (?P<tasks>[\d,\-]+): (?P<what>Out Of Memory|Killed|Segmentation fault"
         r"|Aborted|Bus error|Illegal instruction|Floating point exception|Exited with exit code (?P<code>\d+))")),
    # (torch 2.x names the count num_workers_joined and drops the colon after "rank"; torch >= 2.2 logs the wait at
    # DEBUG as "... process group for {s} secondsrank: ..." -- torch/distributed/distributed_c10d.py
    # _store_based_barrier, pytorch/pytorch @6170845 and the 1.x text "worker_count")
    ("store_barrier", ("store based barrier",),
     _re(r"store based barrier on rank:? (?P<rank>\d+), for key: (?P<key>\S+) \(world_size=(?P<world>\d+), "
         r"(?:worker_count|num_workers_joined)=(?P<count>\d+), timeout=(?P<timeout>[^)\s]+)")),
    # the same barrier while it waits (torch logs it every 10 s): how many joined of how many
    ("store_barrier_wait", ("Waiting in store based barrier",),
     _re(r"Waiting in store based barrier to initialize process group for (?:[\d.]+ seconds\s*)?rank: (?P<rank>\d+), "
         r"key: (?P<key>\S+) \(world_size=(?P<world>\d+), (?:worker_count|num_workers_joined)=(?P<count>\d+), "
         r"timeout=(?P<timeout>[^)\s]+)")),
    # ---- NCCL system errors and their INFO context
    # (NCCL's result name counts where NCCL or torch print it, before ':' -- "ncclSystemError: System call (e.g. socket,
    # malloc) ... failed" -- not in a sentence about it: "applying the hint to all ncclSystemError's", round 18 b143_05)
    ("nccl_system_error", ("unhandled system error", "ncclSystemError"),
     _re(r"unhandled system error|ncclSystemError\s*[:(\]]")),
    ("nccl_internal_error", ("unhandled cuda error", "internal error - please report", "ncclInternalError",
                             "unhandled cuda error"), None),
    ("nccl_remote_error", ("remote process exited", "ncclRemoteError"), None),
    ("nccl_version", ("NCCL version",), _re(r"NCCL version (?P<nccl>\d+\.\d+\.\d+)(?:\+cuda(?P<cuda>[\d.]+))?")),
    ("nccl_comm", (" nranks ",), _re(r"\brank (?P<rank>\d+) nranks (?P<nranks>\d+) cudaDev (?P<dev>\d+)"
                                     r"(?: nvmlDev \d+)? busId (?P<bus>\w+)")),
    ("nccl_iface", ("NET/Socket : Using", "Bootstrap : Using", "NCCL_SOCKET_IFNAME set", "NET/IB : Using"),
     _re(r"(?:NET/Socket|Bootstrap) : Using (?P<list>.*)$|NCCL_SOCKET_IFNAME set (?:by environment )?to (?P<env>\S+)"
         r"|NET/IB : Using (?P<ib>.*)$")),
    ("nccl_no_iface", ("no socket interface found", "No socket interface found", "Bootstrap : no socket interface"),
     None),
    ("nccl_connect", ("Call to connect", "connect returned", "Connect to", "socketStartConnect", "socketPollConnect"),
     _re(r"(?:Connect(?:ion)? to (?P<addr>[\w.:\[\]%\-]+?)(?:<\d+>)? failed|Call to connect (?P<what>.*))?")),
    ("nccl_shm", ("posix_fallocate failed", "/dev/shm", "No space left on device", "shmOpen", "Error while creating shared memory"),
     _re(r"(?:(?P<seg>/dev/shm/[\w.\-]+)(?: \(size (?P<size>\d+)\))?)?")),
    ("nccl_ib", ("NET/IB", "ibv_", "IBV_WC_", "vendor err"),
     _re(r"(?:with error (?P<err>\d+))?(?:.*vendor err (?P<vendor>\d+))?")),
    ("nccl_p2p", (" via P2P/", "P2P/IPC", "P2P/CUMEM", "P2P is disabled", "P2P/direct"), None),
    ("nccl_init_complete", ("Init COMPLETE",), _re(r"rank (?P<rank>\d+) nranks (?P<nranks>\d+)")),
    # NCCL's INFO trace of each collective (NCCL_DEBUG_SUBSYS=COLL): "%s: opCount %lx sendbuff %p recvbuff %p count %zu
    # datatype %d op %d root %d comm %p [nranks=%d] stream %p" (NVIDIA/nccl src/enqueue.cc, ncclEnqueueCheck,
    # as NCCL 2.x prints it; the commit is not pinned here): the op's name and the communicator's own count of collectives (hex)
    ("nccl_coll_trace", (": opCount ",),
     _re(r"\b(?P<op>[A-Za-z]+): opCount (?P<opc>[0-9a-fA-F]+) sendbuff \S+ recvbuff \S+ count (?P<count>\d+) "
         r"datatype (?P<dt>\d+) op (?P<redop>\d+) root (?P<root>-?\d+) comm (?P<comm>\S+) \[nranks=(?P<nranks>\d+)\]")),
    ("nccl_warn", (), None),  # any NCCL WARN line (set from the prefix, not the text)
    # NCCL's error trace: every function that returns an error logs "file.cc:line -> code" at INFO; the code is an
    # ncclResult_t (src/nccl.h.in: 1 unhandled cuda error, 2 system error, 3 internal error, 4 invalid argument,
    # 5 invalid usage, 6 remote error), so these lines name the failure even when no WARN line does
    # NCCL tracing an error code back ("init.cc:1079 -> 3"; NCCL 2.3 and older as a WARN line: "transport.cu:153 ->2")
    ("nccl_result_trace", (" -> ", " ->"), _re(r"^(?:NCCL WARN )?(?P<where>[\w/.\-]+\.(?:cc|h|cu|c)):\d+ ?-> ?(?P<code>[1-6])\b")),
    ("p2p_consumer", ("doesn't support faster communication broadband via P2P",), None),
    # ---- DataLoader and files
    ("bus_error", ("Bus error", "bus error encountered in worker"),
     _re(r"(?:DataLoader worker \(pid (?P<pid>\d+)\))?")),
    # A native backtrace frame inside NCCL (UCX's "  1 0x000000000008170d ncclGroupEnd()  ???:0", gdb's "#3 0x7f.. in
    # ncclShmOpen (...)", glibc's "libnccl.so.2(ncclGroupEnd+0x2d)"): where a process that died on a signal was.
    # Job.finish joins it to a SIGBUS (NCCL 2.12-2.18 zero a sparse /dev/shm segment: rules/nccl.py)
    ("nccl_frame", ("ncclGroupEnd", "ncclShm", "ncclCommInitRank", "ncclTransportP2pSetup", "ncclProxy", "libnccl"),
     _re(r"(?:^\s*#?\d+\s+0x[0-9a-fA-F]+\s+(?:in\s+)?(?P<f1>nccl\w+)\s*\(|libnccl\.so[\w.]*\((?P<f2>nccl\w+)\+)")),
    ("worker_killed", ("DataLoader worker", "exited unexpectedly"),
     # "(pid 8121)", "(pids 1, 2)", and since torch 1.x's f-string "(pid(s) 8864)" / "(pid(s) 12048, 7612)"
     # (torch/utils/data/dataloader.py @cf30153, _try_get_data: "DataLoader worker (pid(s) {pids_str}) exited unexpectedly")
     _re(r"DataLoader worker \(pid(?:\(s\)|s)? ?(?P<pid>[\d, ]+)\) (?:is killed by signal: (?P<signal>[\w ]+)|exited unexpectedly)")),
    ("too_many_files", ("Too many open files", "received 0 items of ancdata", "EMFILE"), None),
    # ---- DDP
    # ProcessGroupNCCL::broadcastUniqueNCCLID: "[" rank_ "] is setting up NCCL communicator and retrieving ncclUniqueId
    # from [0] via c10d key-value store by key '...', but store->get('...') got error: ..." names the rank that waited
    ("store_timeout", ("] is setting up NCCL communicator",),
     _re(r"\[(?P<own_rank>\d+)\] is setting up NCCL communicators? and retrieving ncclUniqueId")),
    ("unused_params", ("Expected to have finished reduction in the prior iteration",), None),
    # reducer.cpp (libtorch_cpu.so of torch 2.13): "Parameter indices which did not receive grad for rank N: 3 7", and
    # under TORCH_DISTRIBUTED_DEBUG=INFO/DETAIL "Parameters which did not receive grad for rank N: name, name": both
    # name the rank that printed them
    ("unused_indices", ("did not receive grad for rank",),
     _re(r"did not receive grad for rank (?P<rank>\d+): (?P<idx>.*)")),
    ("ready_twice", ("marked as ready twice", "mark a variable ready only once"), None),
    # ---- tokenizers, pickling, bootstrapping
    ("tokenizers_fork", ("huggingface/tokenizers: The current process just got forked",), None),
    ("tokenizers_forced", ("TOKENIZERS_PARALLELISM=true", "TOKENIZERS_PARALLELISM=1"), None),
    ("unpicklable", ("objects cannot be pickled", "Can't pickle", "cannot pickle", "Can't get local object",
                     "Got pickle error when attempting to start a worker", "PicklingError"),
     _re(r"(?:(?P<what>h5py) objects cannot be pickled|cannot pickle '(?P<obj>[\w.]+)' object|Can't pickle (?P<thing>[^:]+))?")),
    ("bootstrapping", ("finished its bootstrapping phase", "bootstrapping phase"), None),
    # ---- `ddpdoctor run`'s own findings on stderr ("  ✗ error RUN011 rank-oom-killed: rank 1 was ...")
    ("run_finding", (" RUN0",),
     _re(r"^\s*(?:\S\s*)?(?P<sev>error|warning|info) (?P<id>RUN\d{3}) (?P<slug>[a-z0-9-]+): (?P<title>.+)$")),
    # ---- generic exceptions (the last line of a traceback): a *Error, or a *Exception whose line need not say "rror"
    # (Lightning's MisconfigurationException, torch.multiprocessing's ProcessRaisedException)
    # (Ray's RayTaskError.as_instanceof_cause names the class it raises "RayTaskError(<cause's class>)": the type read
    # whole, "RayTaskError(ValueError)"; ray-project/ray python/ray/exceptions.py @0073297)
    ("exception", ("rror", "xception:"), _re(r"^(?:\S+ )?(?P<type>(?:[A-Za-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception)"
                                             r"(?:\((?:[A-Za-z_]\w*\.)*[A-Z]\w*\))?)(?:: ?(?P<msg>.*))?$")),
    # ---- versions (parsed in the head of each file and from NCCL lines)
    ("torch_version", ("PyTorch version", "torch==", "torch version", "torch.__version__"),
     _re(r"(?:PyTorch version:? |torch==|torch version:? |torch\.__version__\s*[=:]\s*['\"]?)(?P<torch>\d+\.\d+[\w.+]*)")),
    ("cuda_version", ("CUDA used to build PyTorch", "CUDA runtime version", "cudaDriverVersion"),
     _re(r"(?:CUDA used to build PyTorch: (?P<build>[\d.]+)|CUDA runtime version:? (?P<runtime>[\d.]+)|cudaDriverVersion (?P<driver>\d+))")),
]

# Kinds the table above gives from a keyword alone, with no field: the catalogue's class for the same line wins.
_KEYWORD_ONLY = frozenset(kind for kind, _subs, rx in SIGNATURES if rx is None and kind not in ("nccl_warn",))

_USER_FRAME = _messages.Prefiltered(   # searched on every line: only those with '", line ' are searched
    # (or a frame whose 'File "' a paste cut, the line starting inside its path: 'Megatron-LM/megatron/training/
    # arguments.py", line 561, in validate_args')
    # (or a frame the paste cut after its "in", the log's last line: 'File ".../elastic/utils/store.py", line 34, in')
    re.compile(r'(?:(?:^|\s)File "|^(?=[\w./\\:~-]+\.py", line ))(?P<file>[^"]+)", line (?P<line>\d+), in'
               r'(?: (?P<func>[\w<>.]+)|\s*$)'))


# One pass over the line finds which signatures can match: their substrings, alternated.
_BY_SUB: Dict[str, List[int]] = {}
for _i, (_kind, _subs, _rx) in enumerate(SIGNATURES):
    for _s in _subs:
        _BY_SUB.setdefault(_s, []).append(_i)
_ANY = re.compile("|".join(re.escape(s) for s in sorted(_BY_SUB, key=len, reverse=True)))


def _candidates(text: str) -> List[int]:
    found = set()
    for m in _ANY.finditer(text):
        found.update(_BY_SUB[m.group(0)])
    if len(found) > 0:
        # a shorter substring can hide inside a longer one that matched first: test the rest directly
        for i, (_k, subs, _r) in enumerate(SIGNATURES):
            if i not in found and subs and any(s in text for s in subs):
                found.add(i)
    return sorted(found)


# Every substring of every signature: one cheap test before the alternation, for noise lines. One that contains another
# is left out (the shorter is in every line the longer is in): 129 -> 103 tests for a line that holds none.
_SUBS = tuple(s for s in sorted(_BY_SUB, key=len) if not any(o != s and o in s for o in _BY_SUB))


def _has_sub(text: str) -> bool:
    """Some signature's substring is in the line (what `_ANY.search` says, with a plain loop: no generator)."""
    for q in _SUBS:
        if q in text:
            return True
    return False


# Every substring, in one Hyperscan pass (ddpdoctor.facts.literals): the signatures a line can match are those of the
# substrings it holds, which is what `_candidates` gives once `_ANY` finds one; a line holding none (most handed-on
# lines) costs one scan instead of `_has_sub`'s ~100 tests and the alternation's search (~50 us a line). None where
# Hyperscan is missing: the tests above, as before.
_SUB_LIST = tuple(sorted(_BY_SUB))
_SUB_SCAN = LiteralSet(_SUB_LIST, "sig")


def _line_candidates(text: str, nccl: bool) -> List[int]:
    """The signatures `events` tries on a line: `_candidates(text)` when some substring is in it, else none."""
    hits = _SUB_SCAN.found(text)
    if hits is None:
        return _candidates(text) if (nccl or _has_sub(text)) and _ANY.search(text) else []
    if not hits:
        return []
    found = set()
    for k in hits:
        found.update(_BY_SUB[_SUB_LIST[k]])
    return sorted(found)


_PY_OSERROR = re.compile(r"\b(?:ConnectionResetError|BrokenPipeError|ConnectionAbortedError|ConnectionRefusedError): "
                         r"\[Errno \d+\]")


def _first_with_a_field(rx: "re.Pattern[str]", text: str, empty: "re.Match[str]") -> "re.Match[str]":
    """The leftmost match of `rx` that captures a field, for a pattern made of optional groups that matched empty at
    the line's start. A group that opens with `.*?`/`.*` would have matched from the start already (it may skip any
    prefix), so only the groups that open with their own text can start further in: they are searched (linear) and
    the pattern is matched where one starts. Trying every position instead (finditer) cost O(n^2) on a long line, each
    try running the `.*?` groups to the line's end (round 21: 20 s for one 20 KB line). Other shapes: as before."""
    heads = _field_heads(rx.pattern)
    if heads is None:
        return next((m2 for m2 in rx.finditer(text) if any(v is not None for v in m2.groupdict().values())), empty)
    for h in (heads.finditer(text) if heads is not False else ()):
        m2 = rx.match(text, h.start())
        if m2 is not None and any(v is not None for v in m2.groupdict().values()):
            return m2
    return empty


@functools.lru_cache(maxsize=None)
def _field_heads(pattern: str):
    """For a pattern that is only top-level optional groups `(...)?`: the alternation of those that do not open with
    `.*` (compiled; False when there is none); None for any other shape."""
    groups, i, n = [], 0, len(pattern)
    while i < n:
        if pattern[i] != "(":
            return None
        depth, j, in_class = 0, i, False
        while j < n:
            c = pattern[j]
            if c == "\\":
                j += 2
                continue
            if in_class:
                in_class = c != "]"
            elif c == "[":
                in_class = True
                if pattern[j + 1:j + 2] == "]":
                    j += 1
            elif c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        if j >= n - 1 or pattern[j + 1] != "?" or pattern[j + 2:j + 3] in ("?", "+"):
            return None
        groups.append(pattern[i:j + 1])
        i = j + 2
    heads = [g for g in groups if not re.match(r"\((?:\?:|\?P<\w+>)?\.\*", g)]
    if not heads:
        return False
    try:
        return re.compile("|".join(heads))
    except re.error:
        return None


def events(line: Line) -> List[Event]:
    """Every event this line carries (usually none, at most a few)."""
    text = line.text
    out: List[Event] = []
    idx = _line_candidates(text, line.nccl is not None)
    for i in idx:
        kind, subs, rx = SIGNATURES[i]
        data: Dict[str, object] = {}
        if rx is not None:
            m = rx.search(text)
            if m is None:
                if kind in ("watchdog", "watchdog_seq", "torchrun_failed", "ds_exit", "table_row", "duplicate_gpu", "exception",
                            "nccl_version", "nccl_comm", "store_barrier", "store_barrier_wait", "torch_version", "cuda_version",
                            "unused_indices", "nccl_init_complete", "spawn_exit", "lightning_exit", "srun_task", "run_finding", "shell_killed", "worker_killed", "gloo_timeout", "ide_exit", "mpirun_exit", "mpich_exit", "mpirun_first", "horovod_exit", "launcher_rank_exit", "watchdog_abort", "shell_signal", "zsh_signal", "hvd_rank_row",
                            "nccl_iface", "memory_table_row", "nccl_result_trace", "nccl_system_error"):
                    continue  # these need their fields
            else:
                if m.start() == m.end() and not any(v is not None for v in m.groupdict().values()):
                    # a pattern made of optional field groups matches empty at the line's start; its fields are
                    # further in ("... failed to bind to [::]:29400 ..."): take the first match that captures one
                    m = _first_with_a_field(rx, text, m)
                data = {k: v for k, v in m.groupdict().items() if v is not None and k[0] != "_"}  # (_: internal)
        out.append(Event(kind, line, data))
    if (line.nccl is not None or "NCCL WARN" in text or "NCCL INFO" in text or (" : " in text and _NCCL_SUBSYS.match(text))
            or ("<" in text and _NCCL_ADDR.search(text))):   # (each match holds " : " / "<": most lines skip the regexes)
        # NCCL's own connects ("Call to connect returned Connection refused, retrying", "Connect to IP<port> failed")
        # are its bootstrap and transport sockets, not the c10d store's: they are nccl_connect's. So is a WARN text
        # without NCCL's prefix: torch prints NCCL's last error on the line after "Last error:" ("Net : Call to recv
        # from 10.0.0.2<56843> failed : Connection refused", NVIDIA/nccl src/include/socket.h @7e51592)
        out = [ev for ev in out if ev.kind not in ("store_refused", "store_timeout")]
    if " UCX " in text and _UCX_LOG.search(text):
        # UCX's own log lines ("[ts] [host:pid:tid] sock.c:334  UCX  ERROR   connect(fd=143, dest_addr=...) failed:
        # Connection refused"; the "%16s:%-4u %-4s %-5s %s" format of openucx/ucx src/ucs/debug/log.c @0102e57) are its
        # transport's sockets (NIXL, UCC, MPI over UCX), not the c10d store's (round 16 wave 3, batch 109)
        out = [ev for ev in out if ev.kind not in ("store_refused", "store_timeout")]
    if not (line.nccl is not None or "nccl" in text.lower()):
        # NCCL's shared-memory failures are NCCL's lines ("NCCL WARN Error while creating shared memory segment
        # /dev/shm/nccl-Xa1b"); other programs speak of /dev/shm too (Ray's "The object store is using /tmp instead of
        # /dev/shm because /dev/shm has only 67108864 bytes available", a WARNING): not NCCL's transport failing
        out = [ev for ev in out if ev.kind != "nccl_shm"]
    if "Errno" in text and any(ev.kind == "nccl_aborted" for ev in out) and _PY_OSERROR.search(text):
        # Python's own socket or pipe error ("ConnectionResetError: [Errno 104] Connection reset by peer", OSError's
        # "[Errno %S] %S" form, CPython Objects/exceptions.c OSError_str @v3.11.7): the process's own connection (a
        # DataLoader worker's pipe, a data stream, an HTTP client) broke; c10d, Gloo and NCCL raise theirs as
        # RuntimeError/DistNetworkError with their own text, never as these classes (round 19, issue 24: b169_13, a
        # data loop's reset read as NCCL's lost peer)
        out = [ev for ev in out if ev.kind != "nccl_aborted"]
    if line.nccl == "WARN":
        out.append(Event("nccl_warn", line, {}))
    found = _messages.match_all(text)
    if found:
        # A keyword alone (no fields parsed) is a guess that the catalogue's own reading of the line overrules: Ray's
        # "worker died ... (3) ... due to SIGSEGV or other unexpected errors" lists SIGSEGV as a possibility, it is
        # not a segmentation fault.
        classes = {mm.cls for mm in found}
        out = [ev for ev in out if ev.kind not in _KEYWORD_ONLY or ev.kind in classes]
        if not classes & {"store_refused", "store_timeout"}:
            # "Connection refused" / "errno: 110" with no address parsed is only a keyword: on a line the catalogue
            # reads as another program's message it is that program's socket, not the c10d store (slurmstepd's
            # "Failed to send MESSAGE_TASK_EXIT: Connection refused" is its message to an srun already gone)
            out = [ev for ev in out if ev.kind not in ("store_refused", "store_timeout") or ev.data]
    have = {ev.kind for ev in out}
    for mm in found:
        if mm.cls in have:
            continue   # the parser's event for this kind carries the fields the rules read
        level = mm.entry.get("nccl_level")
        if level and line.nccl is not None and line.nccl != level:
            # an entry that holds only at one NCCL level: aws-ofi-nccl warns before it fails a call, while its INFO
            # lines with the same words are fallbacks it takes ("NET/OFI Could not load libgdrapi.so") (round 18)
            continue
        have.add(mm.cls)
        data: Dict[str, object] = dict(mm.fields)
        data["entry"] = mm.entry["id"]
        out.append(Event(mm.cls, line, data))
    if "failed to connect to" in text and _C10D_ATTEMPT.search(text):
        out = _attempt_events(line, out)
    return out


# c10d's per-address connect warning: SocketConnectOp::tryConnect (torch/csrc/distributed/c10d/socket.cpp @cf30153)
# logs "The client socket has failed to connect to {addr} {err}." through recordError, at WARNING, for one address of
# the store's name, and goes on with the next address (or retries until the deadline). The connect fails only with
# "...has failed to connect to any network address of (HOST, PORT)." or "...has timed out after ... while trying to
# connect to (HOST, PORT)." (C10D_ERROR and a thrown error). A warning-level attempt line is set-up, not a failure:
# "[W socket.cpp:697] [c10d] ...", "[W1015 10:02:11.305000 817 socket.cpp:697] [c10d] ...", Windows'
# "[W ..\torch\csrc\distributed\c10d\socket.cpp:601] [c10d] ..." (WSAEADDRNOTAVAIL 10049 on one address).
_C10D_ATTEMPT = re.compile(r"\[W[^\]]*socket\.cpp:\d+\]\s*\[c10d\] The client socket has failed to connect to "
                           r"(?!any network address)")


def _attempt_events(line: Line, out: List[Event]) -> List[Event]:
    """A c10d warning-level connect attempt: its store_refused/store_timeout events become one store_address_retry
    (benign, set-up) carrying the same address; the rules see the store connect still in progress."""
    keep = [ev for ev in out if ev.kind not in ("store_refused", "store_timeout", "store_address_retry")]
    data: Dict[str, object] = {}
    for ev in out:
        if ev.kind in ("store_refused", "store_timeout"):
            for k, v in ev.data.items():
                if k != "entry":
                    data.setdefault(k, v)
    data["attempt"] = True
    return keep + [Event("store_address_retry", line, data)]


def entry_of(ev: Event) -> Optional[dict]:
    """The catalogue entry behind a catalogue event (None for a parser's event)."""
    eid = ev.data.get("entry")
    return _messages.by_id(str(eid)) if eid else None


def survivable(ev: Event) -> bool:
    """The event's catalogue entry is marked "survivable": a message its library prints both when it raises and when
    the caller goes on (torch's load_state_dict 'size mismatch for ...' under strict=False)."""
    return bool((entry_of(ev) or {}).get("survivable"))


# `rich`'s tracebacks (accelerate, typer, many CLIs install it): frames inside a box, "│ /path/train.py:202 in main  │"
_RICH_FRAME = re.compile(r'^│ (?P<file>[^\s│]+\.py):(?P<line>\d+) in (?P<func>[\w<>.]+)\s*│')


def user_frame(text: str) -> Optional[Dict[str, str]]:
    m = _USER_FRAME.search(text) or (_RICH_FRAME.search(text) if text.startswith("│") else None)
    if not m:
        return None
    d = m.groupdict()
    if d.get("func") is None:
        d["func"] = "<cut>"   # the line ends after "in": its function's name was cut with the rest of the paste
    return d
