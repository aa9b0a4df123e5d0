"""Is a line a failure a process printed, or a writer's text about one? The judgement by a line's TEXT alone (pure
functions of the text, no job state, no catalogue roles): prose that names an error (a determiner, a negation, a
conditional, a modal verb, an example), source code (a raise statement, a print/log call with a literal, a continued
string, a shell echo), a configuration's setting pasted unfenced, a Markdown heading, label or code span, a message's
format template, a change's or request's description, a results table's header, a counter that reads zero, a log
record's WARNING/INFO level; and the words that say something failed (_FAILED_WORDS) or that no process goes on from
(_FATAL_LINE). job.Job asks judge_text once the catalogue has no class for a line (job._looks_failed); job.Job also
uses the change/example/format tests to tell a quoted failure from a run's.

Moved out of job.py unchanged (round 19 wave 3, issue 24): each pattern keeps its comment with its source.
"""
from __future__ import annotations

import re
from typing import Optional

from ..facts import messages as _messages

# A message's FORMAT, not a message: an issue or a pull request that shows how a log line reads (NCCL's "NET/IB: Got
# completion from peer ... status=... opcode=... vendor_err=... localGid ... remoteGid ... hca ...", a C printf format
# "%s:%d -> %d", "<rank>" placeholders) holds the words of an error with its values left out. A line is a format when
# three placeholders or more stand where values go (after "=", or as a whole word: "...", a printf conversion
# (C11 7.21.6.1: "%" flags width length conversion), "<name>") and they outnumber the concrete values ("key=value")
# twice over (a number of two digits or more is a value too); a real message the writer shortened keeps most of its values ("WorkNCCL(SeqNum=..., OpType=ALLREDUCE,
# NumelIn=..., NumelOut=..., Timeout(ms)=600000) ran for 600053 milliseconds": 3 placeholders, 2 values, a failure).
# (round 18 wave 2, issue 24: NVIDIA/nccl#2219, #2220, errors on healthy threads read as NCCL's IB error)
_PLACEHOLDER = re.compile(r"(?:(?<=[=\s(\[,:])|^)(?:\.\.\.|…|<\.\.\.>|<[A-Za-z_][\w -]{0,24}>|%[-+ #0]?\d*(?:\.\d+)?"
                          r"(?:hh|h|ll|l|z|j|t|L)?[sdiuxXfgpc])(?=[\s,)\]:;]|$)")
_CONCRETE = re.compile(r"[\w)\]]=(?!\.\.\.|…|<|%)[^\s,)]|\b\d{2,}\b")


def is_format_template(text: str) -> bool:
    """Is this line a message's format (its values left out as placeholders), not a message a process printed?"""
    n = len(_PLACEHOLDER.findall(text))
    return n >= 3 and n > 2 * len(_CONCRETE.findall(text))


# What marks a text as a CHANGE (a pull request's description, a commit message) or a REQUEST for a feature, not a
# report of a job that failed: GitHub's closing keywords before an issue number ("Fixes #123": close, closes, closed,
# fix, fixes, fixed, resolve, resolves, resolved; GitHub docs "Linking a pull request to an issue"); the words "This
# PR ..." / "This pull request ..."; the headings of the pull-request and feature-request templates of the projects
# read here (huggingface/transformers .github/PULL_REQUEST_TEMPLATE.md "# What does this PR do?", pytorch/pytorch
# .github/ISSUE_TEMPLATE/feature-request.yml "The feature, motivation and pitch", huggingface's feature-request.yml
# "Feature request", NVIDIA/nccl's RFE template "What is the goal of this request?"); ghstack's and Phabricator's
# trailers ("Stack from [ghstack]", "Pull Request resolved: https://...", "Differential Revision:", "Test Plan:").
# Such a text quotes the error its change removes or its request is about; when nothing else in the log is a run's
# output (no rank, NCCL or host prefix, no launcher exit, no traceback's frames, no training progress), that quote is no job failing
# (api.triage_paths; round 18 wave 2, issue 24: the errors on healthy logs b123_16, b142_02, b151_04, b151_12, b161_03,
# b161_06). A failure log pasted in such a text with its run's prefixes stays a failure.
_CHANGE_WORDS = ("ix", "lose", "esolve", "PR", "pull request", "Pull Request", "ghstack", "Revision", "Test Plan",
                 "Test plan")
_CHANGE_DOC = re.compile(
    r"^\W{0,4}(?:[Cc]lose[sd]?|[Ff]ix(?:e[sd])?|[Rr]esolve[sd]?)\s*:?\s+(?:[\w.-]+/[\w.-]+)?#\d+\b|"
    r"\b[Tt]his (?:PR|pull request)\b(?!\s*#?\d)|What does this PR do\?|^Pull Request resolved: https?://|"
    r"^Differential Revision:|Stack from \[ghstack\]|^\W{0,4}Test [Pp]lan:")
# A change's own test run that FAILED, as its test-plan list reports it: a command in a code span, then its outcome
# ("- `pytest -q` *(fails: ModuleNotFoundError: No module named 'transformers')*", "- ❌ `python train.py` failed: ...",
# "`make test` errors with ..."): a run the author made and saw fail, whatever the change is; a failure, not a quote
# (round 19, issue 24: b165_04, read as "quoted" after round 18's df1ca98)
_TEST_RUN_FAILED = re.compile(
    r"`[^`]*\b(?:pytest|python\d?(?:\.\d+)?|make|tox|nox|torchrun|bash|sh|deepspeed|accelerate|npm|cargo|ctest|bazel|"
    r"go test|mpirun|srun)\b[^`]*`\W{0,6}(?:fails?|failed|FAILED|errors?|errored|crash(?:es|ed)?)\b")
# "This PR" that links a pull request ("This PR, merged yesterday, addresses it https://github.com/o/r/pull/131") names
# ANOTHER change, as a reply in an issue does; the text is not that change (round 19, issue 24: b166_08, an issue whose
# RuntimeError line was read as quoted)
_PR_LINK = re.compile(r"https?://\S+/pull/\d+")
# A HYPOTHETICAL example announced by the prose before it ("users may meet errors like:", "you might see an error such
# as:", "this could raise something like"): the block that follows shows what a failure would look like, not one a
# process printed (round 19, issue 24: b168_02, an error on a healthy design issue). A modal verb, a verb of meeting,
# then "like" / "such as" / "e.g." / "for example" ending the line.
_EXAMPLE_INTRO = re.compile(r"\b(?:may|might|could|would|will|can)\s+(?:\w+\s+){0,2}(?:meet|see|get|hit|encounter|run into|"
                            r"receive|face|observe|raise|throw|print|show)\s+(?:[\w`'-]+\s+){0,4}(?:like|such as|e\.g\.|"
                            r"for example|for instance)\s*[:,]?\s*$", re.I)


# A line that says something failed, in any tool's words (the catalogue's classes decide where they can). Searched
# only when the line carries one of its literal words (messages.Prefiltered): most lines carry none.
_FAILED_WORDS = _messages.Prefiltered(re.compile(
                           r"\b(?:[A-Za-z]*Error|ERROR|FAILED|FAIL|[Ff]ailed|Killed|Killing|Aborted|[Ff]atal|FATAL|"
                           r"Segmentation fault|Bus error|Floating point exception|Illegal instruction|core dumped|"
                           r"SIG(?:SEGV|ABRT|BUS|KILL|FPE|ILL)|OOM|[Ee]xception|[Tt]imed out|panic)\b|"
                           r"Traceback \(most recent call|terminate called (?:after throwing|recursively|without an active "
                           r"exception)|(?:^|: )error: |\bexit (?:code|status):? [1-9]\d*\b|non-zero exit|"
                           # Open MPI's fatal banner ("*** An error occurred in MPI_Init_thread ... MPI_ERRORS_ARE_FATAL")
                           r"\bAn error occurred in\b|ERRORS_ARE_FATAL|"
                           # a write that failed for room, in the C library's words for ENOSPC (28) and EDQUOT (122)
                           # ("mkdir: cannot create directory '/tmp/x': No space left on device", bash's here-document)
                           r"No space left on device|Disk quota exceeded|"
                           # a command that refused its own arguments, in glibc getopt's words (posix/getopt.c:
                           # "%s: unrecognized option '%s%s'", "%s: invalid option -- '%c'"): sbatch, srun, mpirun
                           r"\bunrecognized option\b|\binvalid option -- |"
                           # a command the shell could not find: bash's "%s: command not found" (execute_cmd.c
                           # @a59615a, internal_error, then exit status 127: "/bin/bash: enroot-aufs2ovlfs: command not
                           # found"), zsh's "command not found: %s"; words, so progress after it makes it survived (round
                           # 18, issue 24: b122_02 read as "cannot show health")
                           r": command not found\b|\bcommand not found: \S|"
                           # torch's device error message printed alone, without its exception's type (a framework that
                           # prints str(e)): "CUDA error: ...", on ROCm builds "HIP error: ..." (c10/cuda/CUDAException.cpp's
                           # "CUDA error: " + cudaGetErrorString, hipified); words, so progress after it makes it survived
                           r"^\s*(?:CUDA|HIP) error: \w|"
                           # an XLA/TensorFlow status printed alone, its code's name opening the line: absl::Status's
                           # "INTERNAL: ..." (the StatusCode names) and TensorFlow's older "Internal: ...", "Failed
                           # precondition: ..." (commit not pinned here); a TPU pod's runtime refusing its topology:
                           # "Internal: Invalid system configuration: 2x2 host topology with 0 missing hosts, but 1 hosts
                           # in total." (round 17 wave 2, issue 24: b116_19 read as "cannot show health")
                           r"^\s*(?:Internal|INTERNAL|Failed precondition|FAILED_PRECONDITION|UNAVAILABLE|Deadline exceeded|"
                           r"DEADLINE_EXCEEDED|RESOURCE_EXHAUSTED|Data loss|DATA_LOSS): \w"))
# A line no process goes on from, whatever its level or other words say: MPICH's abort report ("application called
# MPI_Abort(MPI_COMM_WORLD, 1) - process 3", pmodels/mpich src/mpi/init/init_impl.c @6a79bf6), dmlc-core's fatal log
# re-logged before it throws ("[08:41:20] .../dmlc/logging.h:300: [08:41:20] src/kvstore/kvstore.cc:37: <message>",
# dmlc/dmlc-core include/dmlc/logging.h @5295de9, LogMessageFatal::Entry::Init/Finalize), glog's failure-signal banner
# ("*** Check failure stack trace: ***" after an F-level line, as OneFlow and graph-learn logs show it) and a traceback
# a paste ran into one line with its exception ("... Traceback (most recent call last): File ... ModuleNotFoundError: ..."),
# Open MPI's launcher when it loses a node's daemon ("ORTE has lost communication with a remote daemon." and before
# 2017 "... with its daemon located on node:", the orte errmgr help text [node-died] as open-mpi/ompi#2991's diff and
# users' logs show it; the ompi repository is held out and was not used) -- it says it "will terminate the job" --
# and the TPU runtime's halt report ("*** Halt is unexpected, all pending programs will fail.", libtpu's
# real_program_continuator.cc as jax-ml/jax#19118 shows it; libtpu's source is not public), and Open MPI's BTL
# reachability abort ("... unable to reach each other for MPI communications ... Your MPI job is now going to abort;
# sorry.", as aws/sagemaker-training-toolkit#9 shows it; the ompi repository is held out and was not used)
_FATAL_LINE = _messages.Prefiltered(re.compile(
    r"application called MPI_Abort\(|dmlc[/\\](?:\./)?logging\.h:\d+: \[\d\d:\d\d:\d\d\] |"
    r"\*\*\* Check failure stack trace: \*\*\*|Traceback \(most recent call last\):.*\b[A-Z]\w*(?:Error|Exception): |"
    r"ORTE has lost communication with (?:a remote daemon|its daemon)|\*\*\* Halt is unexpected, all pending programs will fail|"
    r"Your MPI job is now going to abort; sorry\.|"
    # a training script stopping itself on a non-finite loss: DETR's and its descendants' "Loss is nan, stopping
    # training" (facebookresearch/detr engine.py @ee75d89: print(...) then sys.exit(1)), yolov3's "WARNING: non-finite
    # loss, ending training" (ultralytics/yolov3 train.py @316d99c; before it "nan loss detected", as ultralytics/yolov3#434
    # shows it): the run ends there, whatever level the line claims
    r"\bLoss is \S*(?:nan|inf)\S*, stopping training|\b(?:non-finite|nan) loss(?: detected)?, ending training|"
    # a frame of the backtrace Open MPI's (opal's) signal handler prints before the process dies, after its "[host:pid]
    # *** Process received signal ***" header, which an excerpt may cut off: "[host:pid] [ 1] /lib/.../libpmix.so.2(+0x13a8aa)
    # [0x78edcfd3a8aa]" (the format as users' logs show it, e.g. with PLUMED's and CMAQ's aborts; the ompi repository is
    # held out and was not used)
    r"^\[[\w.\-]+:\d+\] \[ ?\d+\] \S.*\[0x[0-9a-f]+\]\s*$|"
    # glog's failure-signal handler (google/glog src/signalhandler.cc, commit not pinned here): "*** Aborted at 1590748026
    # (unix time) try "date -d @1590748026" if you are using GNU date ***" and "*** SIGTERM (@0x1f4000075c3) received by PID
    # 40650 (TID 0x7f2cd11ed700) from PID 30147; stack trace: ***" -- the process dies of that signal after the stack,
    # whatever level a framework's logger gives the relayed lines (Paddle writes them under glog's W, "W0529 18:27:06.378338
    # 40642 init.cc:217] ..."; round 17 wave 2, issue 24: b117_18 read as "cannot show health")
    r"\*\*\* Aborted at \d+ \(unix time\)|\*\*\* SIG[A-Z]+ \(@0x[0-9a-f]+\) received by PID \d+"))
_MPICH_ABORT = re.compile(r"application called MPI_Abort\(MPI_COMM_WORLD, -?\d+\) - process (\d+)")
# glog's FATAL level opening a line ("F1207 10:43:16.922251 3493939 rpc_server.cpp:134] ...", "F20220801 07:29:34.701110
# 2256 fs_coordinator.cc:42] ..." with the year of newer glog): the process aborts after it
_GLOG_FATAL = re.compile(r"F(?:\d{4})?\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [\w.\-]+:\d+\] ")
# SkyPilot's logger (for _WARN_LEVEL and _INFO_LEVEL below): '%(levelname).1s %(asctime)s %(filename)s:%(lineno)d]
# %(message)s' with '%m-%d %H:%M:%S' (skypilot-org/skypilot sky/sky_logging.py, commit not pinned here): "I 11-14 22:18:35 controller.py:593] Killing controller
# process 635841." -- the managed job's controller cleaning up after it succeeded -- also under SkyPilot's own "(task, pid=N) "
# prefix; round 17 wave 2, issue 24: b116_14, an error on a healthy log
_SKY_LEVEL = r"^(?:\([^()]*\bpid=\d+[^()]*\) )?\[?%s \d\d-\d\d \d\d:\d\d:\d\d [\w.\-]+:\d+\] "
# A warning's own level: glog's W (`W0611 ...`, `[W socket.cpp:558]`) or logging's WARNING: what it says failed, it
# survived (a catalogued cause on such a line is still a cause: the catalogue decides first)
_WARN_LEVEL = re.compile(r"^(?:\[?W\d{4} |\[W [\w./]+:\d+\]|\[?W\d{4} \d)|" + _SKY_LEVEL % "W" + "|"
                         r"^\S*\s?\[?WARN(?:ING)?\]?[\s:\]]|"
                         r"^\[[^\]]*\] \[WARN(?:ING)?\]|\bWARNING:(?!torch\.distributed\.elastic)|"
                         r"^\s*[\w.]+ WARN(?:ING)? \d{4}-\d\d-\d\d "   # a logger's "NAME WARNING <date>" (Paddle's launcher)
                         # a log record's level field after its time, in logging's usual layouts: "%(asctime)s -
                         # %(name)s - %(levelname)s - %(message)s" (torchtitan's "... 16:07:12,517 - root - WARNING -
                         # Error running lspci: ..."), "<time> | WARNING | ...", "<time> WARNING ...", "[<time>] WARNING:"
                         r"|^.{0,80}?\d\d:\d\d:\d\d(?:[,.]\d+)?\]?\s*(?:-\s+[\w.<>\-]+\s+)?(?:[-|]\s*)?\[?WARN(?:ING)?\]?\s*[-|:\]]?\s")
# An INFO or DEBUG record's own level, in the same layouts (round 11): the library chose to say it at a level below
# WARNING, so what its words say failed is a notice ("Rendezvous attempt failed, will retry", "Failed to load kernel
# x: ..." logged at INFO); the catalogue still decides first (torchrun's "[default] Worker group FAILED" is logged at INFO
# and is a catalogued consequence). Stricter than _WARN_LEVEL: the level must open the line (glog's "I0301 ...",
# logging.basicConfig's "INFO:name:msg") or follow a bracketed time (DeepSpeed's "[<time>] [INFO]") or a time within the
# first 80 characters (logging's "%(asctime)s - %(name)s - %(levelname)s"), so an exception quoting "INFO" stays a failure
_INFO_LEVEL = re.compile(r"^\[?I\d{4} \d|^\[I [\w./]+:\d+\]|^(?:INFO|DEBUG):[\w.<>\-]+:|^\[[^\]]*\] \[(?:INFO|DEBUG)\]|"
                         + _SKY_LEVEL % "[ID]" + "|"
                         r"^.{0,80}?\d\d:\d\d:\d\d(?:[,.]\d+)?\]?\s*(?:-\s+[\w.<>\-]+\s+)?(?:[-|]\s*)?\[?(?:INFO|DEBUG)\]?\s*[-|:\]]\s")
# "[2024-09-09 19:22:16] [INFO] Traceback (most recent call last):", "INFO:root:Traceback (most recent call last):": the
# header of a traceback printed through another program's INFO-level logger, which prefixes every line it relays.
# The relaying logger's time may open the line unbracketed, in logging's default asctime layout ("%Y-%m-%d %H:%M:%S"
# then ",msecs"; CPython Lib/logging/__init__.py @v3.12.0, Formatter.default_time_format / default_msec_format) or with
# a '.' before the fraction: "2023-05-08 10:33:13.000 [INFO] [Driver] Traceback (most recent call last):" (a job
# driver relaying the child's stderr; round 19 wave 3, issue 24: b179_02, read as "cannot show health")
_RELOGGED_TRACEBACK = re.compile(r"^(?:\[[^\]]{0,40}\]\s*|\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[,.]\d+)?\s+)?"
                                 r"(?:\[INFO\]|INFO\b:?|\| INFO \|)[^\n]{0,80}?\bTraceback \(most recent call last\):\s*$")
# git's answer to a script that asks it for the commit it runs from (mmcv/mmengine's collect_env, a logger's
# "git rev-parse HEAD") outside a repository: "fatal: not a git repository (or any parent up to mount point /x)" and
# "Stopping at filesystem boundary (GIT_DISCOVERY_ACROSS_FILESYSTEM not set)." (git/git setup.c @e5cdb64,
# setup_git_directory_gently_1): git's own exit, which the script reads as "no commit"; the job goes on
_GIT_PROBE = re.compile(r"^\s*fatal: not a git repository\b|^\s*Stopping at filesystem boundary \(GIT_DISCOVERY_ACROSS")
# A line of a shell script shown in the log (a pasted sbatch script, `bash -x` tracing, a PR diff of one) is text, not
# an event: `echo "[ERROR] Failed to activate environment" >&2` under an `if` is the script's guard, and `#SBATCH
# --err=<path>` names its stderr file; if the echo ran, its own output line says so (round 17, issue 24: b113_06,
# b114_24, b115_25, errors on healthy logs)
_SHELL_TEXT = re.compile(r"^\s*(?:[+>]\s*)*(?:(?:echo|printf)\s+(?:-[a-zA-Z]+\s+)*[\"'$]|#SBATCH\s)")
# A raise statement without a call ("    raise ValueError", "raise RuntimeError from e": Python's raise_stmt, "raise"
# [expression ["from" expression]]) is source too (round 19, issue 24: b167_23, a repro's "raise ValueError" read as a
# failure); and "exception handling"/"exception handler", like "error handling", names a feature (b167_29).
# Python source shown in the log (a pasted script, a PR diff of one: "+                raise ValueError(", "    log(\"ERROR: CUDA
# not available\")") is code, not an event: a `raise` statement of an exception class, or a print/log call whose first
# argument is a string literal; what the code printed, when it ran, is its own line ("[12:00:01] ERROR: CUDA not
# available"), and a traceback's exception line follows its `raise` (round 17 wave 2, issue 24: b118_05, an error on a
# healthy log, and b118_13)
# The bare base classes count ("raise Exception(", "raise Error("), and so does the string argument of a raise or a call
# continued on its own line ("        raise Exception(" then '            "Must run ... on CUDA-capable devices."'): an
# indented line that is one string literal and at most a closing ',', ')' or '+' (Python's string-literal grammar) is a
# continued statement, not a process's output (round 19, issue 24: b165_18, a script's raise read as a failure)
_SOURCE_TEXT = re.compile(r"^\s*(?:[+\->]\s*)*(?:raise\s+[\w.]*(?:Error|Exception|Exit|Interrupt)\s*(?:\(|$|from\s)|"
                          r"(?:print|log|warnings\.warn|[\w.]*\.(?:error|warning|warn|critical|exception|fatal|info|debug))"
                          r"\s*\(\s*[rbfRBF]?[\"'])|"
                          r"^[ \t]+[rbfuRBFU]{0,2}(?:\"[^\"]*\"|'[^']*')\s*[,)+]*\s*\\?$")
# A configuration's setting printed or pasted without a fence: a YAML block mapping's entry (YAML 1.2.2, 8.2.2
# "key: value", indented under its parent, or a block sequence's "- key: value") or a JSON object member (RFC 8259,
# 4: '"key": value' then ',' between members), or an INI/TOML/.env assignment ("key = value"), whose key is an
# identifier and whose value is one scalar ("ERROR", "Killed", "Exception", "FATAL"): a framework's config dump
# (Hydra's, mmengine's, the Trainer's TrainingArguments, a DeepSpeed JSON) names failure words as settings (a log
# level, an exception class to raise, an on-failure policy), never as a failure. Only indented or quoted keys (a line
# at column 0 "KeyError: 'X'" is a message), never a key that is itself a failure word ("RuntimeError", "Error") or a
# status field a report fills in after a run ("status", "state", "phase", "result", "reason", "conclusion", "exit
# code": "  Status: Failed" is kubectl's account of a pod that failed) (round 19, issue 24: unfenced configs read as
# failure lines)
_CONFIG_LINE = re.compile(r"^(?:\s+(?:-\s+)?(?P<k1>[A-Za-z_][\w.\-]*)\s*[:=]|\s*(?:-\s+)?\"(?P<k2>[A-Za-z_][\w.\- ]*)\"\s*:)"
                          r"\s*(?:\"[^\"\s]*\"|'[^'\s]*'|[^\s\"',{}\[\]#]+)\s*,?\s*(?:#.*)?$")
_STATUS_KEYS = frozenset(("status", "state", "phase", "result", "reason", "conclusion", "exitcode", "exit_code",
                          "exit code", "returncode", "return_code", "outcome", "signal", "error", "errors", "message",
                          "msg", "last state", "laststate", "termination", "failure"))


def _config_setting(text: str) -> bool:
    m = _CONFIG_LINE.match(text)
    key = m.group("k1") or m.group("k2") or ""
    return key.lower() not in _STATUS_KEYS and not _FAILED_WORDS.search(key) and "OOM" not in key


# a Markdown code span (CommonMark 0.31.2, 6.1 "Code spans": a backtick string, the code, the same backtick string) that
# holds a bare name ("`AttributeError`", "`torch.distributed.DistBackendError`"): prose naming a class or function, not
# a message a process printed; a span that holds a message ("`RuntimeError: CUDA out of memory`") is left as it is
# (round 17 wave 3, issue 24: b120_22 "... raises `AttributeError` when the `nn.Linear` module is called" read as a
# failure line)
_NAME_SPAN = re.compile(r"(`+)\s*(?:raise\s+)?[A-Za-z_][\w.]*(?:\(\))?\s*\1")   # or a raise statement ("`raise ValueError`")
# prose that names a failure with a determiner ("I get an error when I start the training", "if 1 worker raises an
# Exception in the application code, this Exception is not raised in the driver", "The Error is given below:", "raises
# an AttributeError when"): a sentence about an error, not a message a process printed; the message itself, when the
# log holds it, is its own line ("RuntimeError: ..."), and words left after the named ones still count ("I got an error:
# CUDA error: out of memory"). Open MPI's fatal banner ("*** An error occurred in MPI_Init_thread", ompi's
# help-mpi-errors.txt) is a message that begins this way and stays a failure (round 18, issue 24: b124_01, b124_03)
# The same for a failure verb in a conditional or temporal clause ("requeued ... if timed out", "able to requeue
# correctly 3 times after being timed out"): a sentence about what happens when something fails, not a failure (round 18,
# issue 24: b126_17, b126_19, errors on healthy logs); and for one after a modal verb ("I can't batch the inputs together because the
# model will OOM", "this would crash"): what would happen, not what did (round 18, b134_09); and for an example in
# parentheses ("so a dead torchrun on one node (e.g. OOM) kills the whole step"): a kind of failure named, not one that
# happened (round 18, b135_02, an error on a healthy log); and "error handling" / "error handler", a feature's name ("Docs
# Changes for NCCL Async Error Handling", round 18 b143_08), and an error class in the plural or possessive ("all
# ncclSystemError's", "RuntimeErrors"): a writer's word for a kind of error (round 18 b143_05); and a failure in the plural after a
# causal verb ("many `nj` causes OOM errors without gpu allocation", "which leads to NCCL errors"): a writer's account of
# what brings failures about, not a message a process printed (round 18, b154_12, an error on a healthy log)
_NAMED_FAILURE = re.compile(r"\b(?:[Aa]n?|[Tt]he|[Tt]his|[Tt]hat|[Tt]hese|[Tt]hose|[Ss]ome|[Aa]ny|[Nn]o|[Ss]uch|[Aa]nother|"
                            r"[Mm]y|[Oo]ur|[Ii]ts|[Tt]heir|[Ss]ame|[Ss]imilar|[Ff]ollowing)\s+(?:(?:[a-z][a-z\-]*|\*{1,2}[a-z][a-z\-]*\*{1,2}|NCCL|CUDA|NCCL/CUDA)\s+){0,2}"
                            r"(?:[A-Z]\w*Error|[Ee]rrors?|[Ee]xceptions?)\b|"
                            r"\b(?:[Ii]f|[Ww]hen|[Ww]henever|[Uu]nless|[Oo]nce|[Aa]fter being|[Bb]efore being|[Ii]n case)\s+"
                            r"(?:[a-z]+\s+){0,2}(?:timed out|failed|fails|crashed|crashes)\b|"
                            r"\b(?:will|would|could|might|may|can|should)\s+(?:not\s+|also\s+|still\s+|probably\s+|"
                            r"likely\s+|eventually\s+)?(?:OOM|fail|crash|hang|time out)\b|"
                            r"\(\s*(?:e\.g\.|eg\.|i\.e\.|for example|for instance|such as)[,:]?\s+[^()]{0,60}\)|"
                            r"\b(?:[Ee]rror|[Ee]xception)[ -][Hh]andl(?:ing|ers?)\b|\b[A-Za-z]\w*Error'?s\b|"
                            r"\b(?:causes|caused|causing|cause|leads to|led to|results in|resulted in)\s+"
                            r"(?:[a-z]+\s+){0,2}(?:OOM|NCCL|CUDA)?\s*(?:[Ee]rrors|[Ee]xceptions|failures|crashes|hangs)\b|"
                            # an attributive failure word after a determiner ("so a slow or failed init cannot desync",
                            # "the failed rank", "any crashed node"): a writer describing a thing (round 19, b167_29)
                            r"\b(?:[Aa]n?|[Tt]he|[Aa]ny|[Ee]ach|[Ee]very|[Tt]his|[Tt]hat|[Tt]hese|[Tt]hose|[Ss]ome|[Ss]uch)\s+"
                            r"(?:[a-z\-]+\s+(?:or|and)\s+|[a-z\-]+\s+)?(?:failed|failing|crashed|hung|timed-out)\b|"
                            # AVOIDED: a failure word as the object of a verb of preventing or removing it ("I apply
                            # the signal length limit to 32000 to avoid OOM", "to prevent the crash", "this avoids
                            # timeouts", "in order to get rid of the errors"): the writer's aim, not a failure that
                            # happened (round 23, issue 24: b207_20, an unexplained failure on a healthy log)
                            r"\b(?:avoid(?:s|ed|ing)?|prevent(?:s|ed|ing)?|get rid of|work ?around|mitigat(?:e|es|ed|ing)|"
                            r"guard(?:s|ed|ing)? against)\s+(?:(?:the|an?|any|such|these|those|this|that|possible|"
                            r"potential|further|more|future)\s+)?(?:(?:[a-z\-]+|NCCL|CUDA|GPU|CPU)\s+){0,2}"
                            r"(?:OOMs?|[Ee]rrors?|[Ee]xceptions?|crash(?:es)?|hangs?|time ?outs?|failures?|deadlocks?)\b|"
                            # NEGATED: an error named as NOT raised, thrown or propagated ("remote exception is not
                            # rethrown", "the RuntimeError was never raised", "does not raise an exception", "didn't
                            # throw any error", "without any error"): a sentence about a failure that did not happen
                            # (round 19, issue 24: b163_11, an error on a healthy log)
                            r"\b(?:[A-Z]\w*(?:Error|Exception)|[Ee]rrors?|[Ee]xceptions?)\s+(?:is|are|was|were|gets?|got|"
                            r"has|have|had)\s+(?:been\s+)?(?:not|never|n[o']t)\s+(?:been\s+|being\s+)?(?:re-?)?"
                            r"(?:thrown|raised|rethrown|re-thrown|propagated|reported|caught|surfaced)\b|"
                            # and what SHOULD happen ("exception should be rethrown", an issue's "Expected behavior")
                            r"\b(?:[A-Z]\w*(?:Error|Exception)|[Ee]rrors?|[Ee]xceptions?)\s+(?:should|must|would|will|could|"
                            r"may|might|needs? to|ought to)\s+(?:not\s+)?be\s+(?:re-?)?(?:thrown|raised|rethrown|re-thrown|"
                            r"propagated|reported|caught|surfaced)\b|"
                            r"\b(?:(?:does|do|did|is|are|was|were|will|would|should|could|can)\s*(?:not|n't)|never|no longer|"
                            r"[Ww]ithout)\s+(?:re-?)?(?:rais(?:e|es|ed|ing)|throw(?:s|n|ing)?|rethrow(?:s|n)?|re-thrown|"
                            r"propagat(?:e|es|ed)|report(?:s|ed)?|getting|get|giving|give|hitting|hit|seeing|see|any|an?|"
                            r"emit(?:s|ted)?|produc(?:e|es|ed)|show(?:s|ed|ing)?)?\s*(?:any\s+|an?\s+|the\s+)?"
                            r"(?:[A-Z]\w*(?:Error|Exception)|[Ee]rrors?|[Ee]xceptions?)\b")
# a Markdown ATX heading (CommonMark 0.31.2, 4.2: one to six '#' then a space; an issue's title, an issue template's
# "### Error messages and logs") is the document's structure: its failure words name what the section or thread is about
# ("# Error while launching Deepspeed", "# DistNetworkError when using ...", "# how to process Ray OOM"); only a heading
# that quotes a message (a failure word followed by ': ' and its text: "# RuntimeError: 'weight' must be 2-D") is
# evidence of a failure (round 18, issue 24: b125_01, b125_15, b125_20)
_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+\S")
# a line that is one Markdown emphasis span and nothing else, at most a colon after it (CommonMark 0.31.2, 6.2
# "Emphasis and strong emphasis": '**' or '__' (or one '*' / '_'), not followed by whitespace, the text, the same
# delimiter not preceded by whitespace): "**Broken pipe error**:", "*Error log*" -- a writer's caption over what follows,
# the way GitHub's issue forms render a field's label, read as a heading is (round 23, issue 24: b208_16, a caption's
# "Broken pipe" read as the lost-peer error). glog's banner "*** Check failure stack trace: ***" is no span (whitespace
# after its delimiter).
_EMPH_CAPTION = re.compile(r"^ {0,3}(\*{1,2}|_{1,2})(?=[^\s*_])[^*_\n]{1,100}?(?<=[^\s*_])\1\s*[:\uff1a]?\s*$")


def caption_heading(text: str) -> bool:
    """Is TEXT a Markdown heading (ATX) or a line that is one emphasis span ("**Broken pipe error**:"): the document's
    structure, not a process's output, unless it quotes a message ("# RuntimeError: ...")?"""
    return bool((_HEADING.match(text) or ("*" in text or "_" in text) and _EMPH_CAPTION.match(text))
                and not _HEADING_QUOTE.search(text))


# an issue's title pasted as the first line of a thread, not as a Markdown heading: GitHub's issue forms prefix it with
# the form's label in brackets ("[BUG] RuntimeError: NCCL error ...", "[Bug]: ...", "[Question] ..."), a copied page or a
# mailing list with "Title: " (round 21, issue 24). Read only as a source's first non-blank line (Job.feed_line)
_PLAIN_TITLE = re.compile(r"^ {0,3}(?:Title:[ \t]+\S|(?:\W{1,2}\s?)?\[(?i:bug(?: report)?|question|help(?: wanted)?|issue|"
                          r"feature(?: request)?|usage|discussion|docs?|rfc|enhancement)\]\s*:?\s*\S)")
# torch's internal assert quotes the failed condition, the file and the line, with no ": " after its failure word: the
# TORCH_INTERNAL_ASSERT format "{cond} INTERNAL ASSERT FAILED at \"{file}\":{line}, please report a bug to PyTorch."
# (pytorch/pytorch c10/util/Exception.h @cf30153 (v2.13.0): #cond " INTERNAL ASSERT FAILED at " C10_STRINGIZE(__FILE__)
# ":" C10_STRINGIZE(__LINE__)); a title quoting it quotes a message (round 19, issue 24: b163_03 read as "stops after
# the set-up")
# the look-behind starts a match only where the run begins: a search that restarts inside a run its first quantifier
# consumed is O(n^2) on a long line (round 21: benchmarks/bench_regex.py)
_HEADING_QUOTE = re.compile(r"(?:(?<![A-Za-z])[A-Za-z]*Error|[Ee]xception|[Ee]rror|ERROR|FAILED|[Ff]ailed|Killed)\w*:\s+\S|"
                            r"INTERNAL ASSERT FAILED at \"?[^\s\"]+\"?:\d+")
# a heading that names a change ("# resolve KeyError: 'PDSH_SSH_ARGS_APPEND'", "# Fix RuntimeError: ... on 2 nodes",
# "## [Bugfix] Avoid ...": a commit's, a pull request's or a changelog's title) quotes the message it removes, not one a
# process printed (round 18, issue 24: b142_02, an error on a healthy log; b123_16 the same class in prose)
_HEADING_FIX = re.compile(r"^ {0,3}#{1,6}[ \t]+(?:\[[^\]]*\]\s*)?(?:[Ff]ix(?:es|ed)?|[Rr]esolve[sd]?|[Hh]andle[sd]?|"
                          r"[Aa]void(?:s|ed)?|[Pp]revent(?:s|ed)?|[Ss]uppress(?:es|ed)?|[Ww]ork ?around)\b")
# A question ("... whether the node fails/exits on a signal, exception, or exits successfully?") and a bare label that
# introduces what follows ("Error:", "Error log:", "Errors:") are a writer's words about failures, not a process's: only
# a question that quotes a message (as a heading above) counts (round 18, issue 24: b130_12, an error on a healthy log,
# and b130_03)
# (its words in any script, a bilingual template's pair joined by '/', and the full-width colon U+FF1A CJK text ends a
# label with: PaddleOCR's issue template "- 完整报错/Complete Error Message：", round 20 wave 2)
_LABEL = re.compile(r"^\W{0,3}(?:[^\W\d_]+(?:\s+|\s*/\s*)){0,3}(?:[Ee]rrors?|ERRORS?|[Ee]xceptions?|[Ff]ailures?)"
                    r"(?:\s+[A-Za-z]+){0,2}\s*[:\uff1a]\s*$")
# The same label with no colon, alone on its line, over a fenced block ("Error message" / "Error log" / "Stack trace"
# then "```"): an issue template's or a writer's caption of the quote below it (GitHub's issue forms render a textarea's
# label as a heading or a bold line, and a writer's plain-text copy keeps the words alone: huggingface/transformers
# .github/ISSUE_TEMPLATE/bug-report.yml, pytorch/pytorch .github/ISSUE_TEMPLATE/bug-report.yml "Error logs"). Only the
# fence that follows tells a caption from a message printed bare ("Fatal error" alone is both), so Job.feed_line undoes
# the failure line such a label opened when the next non-blank line opens a fence (round 20 wave 2, issue 24: b184_05)
_BARE_LABEL = re.compile(r"^\W{0,3}(?:[A-Za-z]+\s+){0,2}(?:[Ee]rrors?|ERRORS?|[Ee]xceptions?|[Ff]ailures?|[Tt]racebacks?)"
                         r"(?:\s+[A-Za-z]+){0,2}\W{0,3}$")


def bare_label(text: str) -> bool:
    """Is TEXT a caption with no colon ("Error message", "**Error log**"), to be confirmed by the fence after it?"""
    return len(text) < 48 and ":" not in text and bool(_BARE_LABEL.match(text.strip()))


# a source line that rich's traceback box quotes ("│   242 │   # if the error files for the failed children exist"):
# code, not a message, whatever words it holds (the frame's raising line, marked "❱", still counts)
_RICH_CODE = re.compile(r"^\s*[│┃|]\s*\d+\s*[│┃|]")
# A CI run's verdict as GitHub reports it: a workflow run's, job's or check run's `conclusion` is one of success, failure,
# neutral, cancelled, skipped, timed_out, action_required, stale (GitHub's REST docs for check runs, docs/checks/create.md
# as octokit/plugin-rest-endpoint-methods.js#78 quotes them); a test report lists it as "- **Conclusion**: failure" or as
# a job table's cell ("| 1 | full-8-npu-a3 | completed | failure | 7 | 5 | 2 | 0 |"). "failure" and "timed_out" there
# say that the run or that job failed (round 17 wave 2, issue 24: b114_18 read as "cannot show health"); "success",
# "skipped" or "cancelled" are no failure. Only as the value of a Conclusion field or as a whole cell of a table row
_CI_CONCLUSION = re.compile(r"\b[Cc]onclusion\W{0,4}[:=]\W{0,4}(?:failure|timed_out)\b|\|\s*(?:failure|timed_out)\s*\|")
# a log collector's severity and time columns opening a line (a level it assigned by stream, not the program's words)
_COLLECTOR_SEVERITY = re.compile(r"^(?:ERROR|CRITICAL)\s+\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|\s*[+-]\d{4})?\s+")


# A counter of failures whose value is zero is no failure (round 16 wave 3, batches 107/108): a benchmark summary's
# "| Failed requests                   |   0      |" (vLLM/evalscope tables), PaddleCloud's job row "Succeeded ... Failed
# trainer count beyond the threshold:  0", "errors: 0", "0 failed". The label (the failure word and up to 48 more
# characters of words, no parenthesis: "Process failed for slice (opcode: 0, ..." is a failure) is followed by ':', '='
# or a table bar and the number 0; or "0" is followed by the word (not a condition: "condition fds[i] > 0 failed").
_ZERO_COUNT = re.compile(r"\b(?:[Ff]ailed|FAILED|[Ff]ailures?|FAILURES?|[Ee]rrors?|ERRORS?)\b[\w /.-]{0,48}?\s*[:=|]\s*0"
                         r"(?:\.0+)?(?=\s*(?:[|,;)]|$))|(?<![<>=] )\b0 (?:failed|errors?|failures?)\b")


# A results table's header row names its columns: a failure word there is a column's name, not a failure (round 16
# wave 4, b110_02: a CI bot's "| Tests | Passed ✅ | Skipped ⚠️ | Failed |"). Told from a result row ("| test_x | FAILED
# |") by two or more other status columns beside it and no number anywhere in the row.
_STATUS_FAIL = frozenset(("failed", "failures", "failure", "fail", "errors", "error", "errored"))
_STATUS_OTHER = frozenset(("passed", "pass", "skipped", "skip", "tests", "test", "total", "succeeded", "success", "ok",
                           "xfailed", "xpassed", "warnings", "status", "result", "results", "ran", "deselected"))


def _status_header(text: str) -> bool:
    if any(c.isdigit() for c in text):
        return False
    cells = [re.sub(r"[^a-z ]", "", c.lower()).strip() for c in text.strip().strip("|").split("|")]
    cells = [c for c in cells if c]
    return (len(cells) >= 3 and any(c in _STATUS_FAIL for c in cells)
            and sum(c in _STATUS_OTHER for c in cells) >= 2)


def judge_text(text: str):
    """Is this line's TEXT a sign of failure, once the catalogue has no class for it? True (a line no process goes
    on from), "words" (only its words say so: failed if nothing follows), False (prose, source code, a config, a
    format, a heading, a label, a quote, a warning or notice, a counter that reads zero)."""
    if _GIT_PROBE.match(text):
        return False
    if _FATAL_LINE.search(text) or (text[:1] == "F" and _GLOG_FATAL.match(text)):
        return True
    if _RELOGGED_TRACEBACK.search(text):
        # a traceback's header under an INFO prefix: a wrapper (a GUI launcher, a job runner) re-logs the child's
        # stderr line by line at its own INFO level; logging's own exc_info traceback carries no prefix on this line.
        # Words, so progress after it makes it survived (round 14)
        return "words"
    if ("failure" in text or "timed_out" in text) and _CI_CONCLUSION.search(text):
        return "words"   # a CI run's or job's conclusion "failure" (a test report's field, a job table's cell)
    if not _FAILED_WORDS.search(text):
        return False   # (tested first: both give False, and _WARN_LEVEL's and _INFO_LEVEL's searches cost ~60 us a line)
    if "`" in text and not _FAILED_WORDS.search(_NAME_SPAN.sub(" ", text)):
        return False   # prose naming an exception class in a Markdown code span ("raises `AttributeError` when")
    if text[:1] in " #" and _HEADING.match(text) and (not _HEADING_QUOTE.search(text) or _HEADING_FIX.match(text)):
        return False   # a Markdown heading naming an error ("# Error while launching ..."), no message quoted, or a change
    if text[:1] in " *_" and _EMPH_CAPTION.match(text) and not _HEADING_QUOTE.search(text):
        return False   # a caption that is one emphasis span ("**Broken pipe error**:"), no message quoted
    if text.rstrip().endswith("?") and text.count(" ") >= 4 and not _HEADING_QUOTE.search(text):
        return False   # a question about failures ("... exits on a signal, exception, or ...?"), no message quoted
    if text.rstrip().endswith((":", "\uff1a")) and _LABEL.match(text):
        return False   # a label introducing a quote ("Error:", "Error log:")
    if (_NAMED_FAILURE.search(text) and not _FAILED_WORDS.search(_NAMED_FAILURE.sub(" ", text))
            and "error occurred in MPI_" not in text):
        return False   # prose naming an error with a determiner ("I get an error when ..."), no message quoted
    if _SHELL_TEXT.match(text):
        return False   # a script's own text: an echo command or an #SBATCH directive
    if ("raise" in text or "(" in text or text[:1] in " \t") and _SOURCE_TEXT.match(text):
        return False   # Python source: a raise statement or a print/log call with a literal
    if (":" in text or "=" in text) and _CONFIG_LINE.match(text) and _config_setting(text):
        return False   # a config's setting printed or pasted unfenced ("  log_level: ERROR", '"on_failure": "Killed",')
    if "|" in text and _status_header(text):
        return False   # a results table's header row: "Failed" names a column ("| Tests | Passed | Skipped | Failed |")
    if "0" in text and _ZERO_COUNT.search(text) and not _FAILED_WORDS.search(_ZERO_COUNT.sub(" ", text)):
        return False   # a counter of failures that reads zero ("| Failed requests | 0 |", "Failed ... count: 0")
    if ("Warning" in text or "warnings.warn" in text or text.lstrip().startswith(("File \"", "^"))
            or _WARN_LEVEL.search(text) or _INFO_LEVEL.search(text) or _RICH_CODE.match(text)):
        return False
    if "Traceback (most recent call" in text or "terminate called" in text:
        return True   # a traceback or a C++ abort is no line a process goes on from
    tag = _COLLECTOR_SEVERITY.match(text)
    if tag and not _FAILED_WORDS.search(text[tag.end():]):
        # a log collector's own level column on a line it took from stderr: Cloud Logging (Vertex AI, GKE) gives
        # every stderr line the severity ERROR whatever it says ("In Google Stackdriver if you pipe to stderr it will
        # automatically assume it's an error no matter what", honeycombio/honeycomb-kubernetes-agent#26;
        # rai200890/python_google_cloud_logger#17), and tqdm, Python's logging and warnings write to stderr ("ERROR
        # 2021-07-15T20:56:24.711670   26/99  2.57G ...  27%|▌ | 501/1860 [02:01<05:17,  4.29it/s]", ultralytics/
        # yolov5#4016). The line is judged by its own text, after the columns: a failure only when that text is one
        # (round 16: progress lines, b103_24; wave 2: any line, "Configuration saved in ..." tagged ERROR)
        return False
    return "words"


_ERRNO_RX: list = []


def errno_text(text: str) -> Optional[str]:
    """The first of glibc's strerror() texts (ddpdoctor/data/errno_texts.json: "Broken pipe", "Connection refused", ...)
    that TEXT names as whole words, or None. Asked of a Markdown heading that carries a failure event (job.feed_line),
    and of a lost peer's line that is not NCCL's (rules/catalogued.peer_lost: say the socket's own error)."""
    if not _ERRNO_RX:
        import json
        import pathlib

        try:
            with (pathlib.Path(__file__).resolve().parent.parent / "data" / "errno_texts.json").open(encoding="utf-8") as fh:
                texts = sorted({v["text"] for v in json.load(fh)["errno"].values()}, key=len, reverse=True)
        except (OSError, ValueError, KeyError, TypeError):
            texts = []
        _ERRNO_RX.append(re.compile(r"\b(?:%s)\b" % "|".join(re.escape(x) for x in texts), re.IGNORECASE) if texts else None)
    rx = _ERRNO_RX[0]
    m = rx.search(text) if rx else None
    return m.group(0) if m else None
