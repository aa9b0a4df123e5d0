"""The messages catalogue (ddpdoctor/data/messages.json) as questions: which known message is this line,
what class of failure is it, what does it mean and what fixes it.

The catalogue holds what torch (c10d, elastic, the DDP reducer, FSDP, the CUDA caching allocator), NCCL, the
CUDA runtime, transformers, accelerate, DeepSpeed, Ray, SLURM and the Linux kernel print when a distributed
job fails, ends or only warns, mined from their sources by tools/mine_messages.py: every entry records the
repo, path and commit it was read from, its `format` as the source writes it, the `pattern` derived from
it, its `class` (the table `classes` says what each class means, its role and the triage rule that reports
it), its meaning, its fix, and `examples` (the format with its holes filled as the line appears in a log,
or a real excerpt).

Matching is built for the triage reader's one streaming pass:
- `ANCHORS` are the reader's prefilter keywords (one Hyperscan pass over each chunk finds them all); past
  the head of a file only lines carrying one are decoded. Every entry's examples carry one
  (`entry_problems` checks it), and `match` ignores a line without one, so a message is recognised the
  same wherever it sits in a log.
- Each entry is indexed by its rarest literal word (a whole word of its pattern's required text); a line's
  words select the few entries worth trying, so a line costs one word scan and a handful of regexes, not
  750 of them. Entries without such a word are always tried (they are few).
"""
from __future__ import annotations

import functools
import os
import re
import sys
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from ..recache import own_patterns
from . import catalogue
from .literals import LiteralSet

try:  # the parser `re` itself uses: re._parser since CPython 3.11, sre_parse before
    from re import _constants as _sre, _parser as _sre_parse
except ImportError:  # pragma: no cover - Python < 3.11
    import sre_constants as _sre  # type: ignore[no-redef]
    import sre_parse as _sre_parse  # type: ignore[no-redef]
_REPEATS = tuple(getattr(_sre, n) for n in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT") if hasattr(_sre, n))
_ATOMIC = getattr(_sre, "ATOMIC_GROUP", object())

# The triage reader's prefilter keywords (ddpdoctor.triage.reader scans for these). Every message a rule
# must see carries one: "NCCL" (every NCCL line, ProcessGroupNCCL), "rror" (exceptions, "error:" lines),
# "xception", "exitcode" (torchrun), "Traceback", "c10d]" (torch's C++ warnings), "Killed" (the kernel, the
# shell), "signal" (torchrun's SIGTERM lines, SignalException, "killed by signal"), "oom-kill" / "oom_kill" /
# "oom_reaper" (the kernel's OOM killer: "invoked oom-killer", "oom-kill:", "oom_kill_process"; not "oom" alone,
# which matches "room", "zoom", "bloom" and costs a fifth of the Hyperscan pass), "emory" (memory monitors, "out of memory"), "return code" (the deepspeed launcher),
# "srun: " (srun's own lines), "ERROR" (logging's level name: "[ERROR] [launch.py:321]"), "Killing" (a launcher killing
# its workers: "Killing subprocess 6293"), "(local_rank: " (a torchrun failure table's rank row, which a
# truncated paste can show without its header), "open files" (EMFILE in libuv's lower case: "rv < 0: too many
# open files"), "NVRM" (the NVIDIA driver in the kernel log: Xid reports, a GPU fallen off the bus), "receive grad"
# (DDP's list of the parameters that got no gradient, the later lines of its "Expected to have finished reduction"
# error), "finished" / "raining complete" / "done
# training" (the ends of a healthy job: "Training completed!", "training complete", fairseq's "done training in"), "verflow" (fp16
# overflow notes), "libuv.h:" (Gloo's libuv transport aborting: "[.../libuv.h:596] uv_accept: invalid argument"),
# "missing ranks" / "remainder of ranks" (Horovod's stall report, its header and its rank lists), "CANCELLED AT"
# (slurmstepd's cancel line, which before September 2015 (SchedMD/slurm e6812a7) printed no "error:": "slurmstepd: *** JOB 830329 CANCELLED AT ... DUE
# TO TIME LIMIT on n447 ***"), "status.SUCCEEDED" (torchelastic's worker status events, one JSON line per worker in its
# events log: the end of a healthy worker), "memory pressure"
# is under "emory", and the older ones kept for the lines that carry nothing else. "exits successfully" (DeepSpeed's
# launcher: "Process 1234 exits successfully.", a worker's exit 0) and "Done waiting for other agents" (torchrun's
# agent past its exit barrier, after its workers SUCCEEDED) are ends printed last, past the head; "node has died" /
# "marked dead because" (Ray: "The actor died because its node has died", the GCS's "has been marked dead because
# the detector has missed too many heartbeats") are a lost node, printed without "error" on their own lines.
# "loopback address as fallback" (ProcessGroupGloo createDefaultDevice's warning: this host's own name did not resolve)
# is printed at set-up, which can be past the head on a long log; LOG025 needs it when a Gloo connect fails after it.
# "Assertion `" is a CUDA kernel's device-side assert ("IndexKernel.cu:92: ... Assertion `... index out of bounds` failed."),
# printed by the device with no error keyword, often the last line of a cut log.
# "noticed that process rank" (Open MPI's "mpirun noticed that process rank N ... exited on signal S", whose first half
# a wrapped paste leaves without "signal"; ompi orte/tools/orterun/help-orterun.txt), "exit with status code"
# (horovodrun's "Process N exit with status code C.", horovod/runner/gloo_run.py), "Aborted" (bash's report of a
# command dead on SIGABRT, "line 1: PID Aborted  CMD", jobs.c) and "talled ranks" (Horovod <= 0.20's "Stalled ranks:"
# header) are read by the triage rules of round 7 and carry no other keyword.
# "raining Completed" (axolotl's end line before 2025, "Training Completed!!! Saving pre-trained model to DIR": capital C,
# so "raining complete" misses it) and "after training is done" (Megatron's pretrain(): "[after training is done]
# datetime: ...", printed by rank 0 after the training loop) are ends of a healthy job printed last, past the head.
# "to shutdown process" (torchrun's "Unable to shutdown process N via SIGTERM, forcefully exiting via SIGKILL") and
# "uninterruptible sleep" (its agent's worker in D state, local_elastic_agent.py) are torch elastic's teardown lines
# (round 9), which carry no error word. "size mismatch for" is torch's load_state_dict listing a parameter whose shape
# differs from the checkpoint's (torch/nn/modules/module.py), printed before its "Error(s) in loading" (round 9, wave 2).
# "busy or unavailable" is cudaErrorDevicesUnavailable's text, which nccl-tests prints after "Test CUDA failure" (no
# error word on the line). "GPU is lost" is NVML's nvmlErrorString(NVML_ERROR_GPU_IS_LOST) (NVIDIA/go-nvml gen/nvml/nvml.h),
# as nvidia-smi prints it: "Unable to determine the device handle for GPU 0000:17:00.0: GPU is lost." (no error word).
# "Skipping step" is an fp16 loss scaler's skipped step ("[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss
# scale: ...", deepspeed/runtime/fp16/loss_scaler.py @68ee9f8): a step that ran, which LOG029 counts as progress.
# "retry count exceeded" is UCX's InfiniBand completion error ("ib_mlx5_log.c:139  Transport retry count exceeded on
# mlx5_0:1/IB", openucx/ucx src/uct/ib/mlx5/ib_mlx5_log.c): no error word on the line (round 11, wave 2). "and may be stuck" and
# "Termination timeout for" are XLA's rendezvous watchdog (openxla/xla xla/service/rendezvous.cc): glog E/F lines, no error word.
# "Assertion failure at" is PSM's psmi_assert_always (cornelisnetworks/opa-psm2 psm_help.h) and "distributed JAX
# controller" XLA's connect failure (openxla/xla xla/pjrt/distributed/client.cc): no error word on either (round 12).
# "ORTE has lost communication" (Open MPI's launcher losing a node's daemon), "Halt is unexpected" (the TPU runtime's
# halt report), "job is now going to abort" (Open MPI's BTL reachability abort) and "Training job completed" (a
# SageMaker job's Completed status line) carry no other keyword (round 13, wave 2). "Trainer to stop" (Lightning's Timer
# and EarlyStopping end lines, round 14) neither. "stopping training" / "ending training" are a training script's own
# stop on a non-finite loss (facebookresearch/detr engine.py "Loss is nan, stopping training" then sys.exit(1);
# ultralytics/yolov3 train.py "WARNING: non-finite loss, ending training"), printed by print() with no error word
# (round 14, wave 2). Open MPI's report of the first process that exited non-zero ("mpirun detected that one or more
# processes exited with non-zero status", "  Process name: [[35302,1],2]", "  Exit code:    3", after "1 process returned
# a non-zero exit code") carries no other keyword: past a large log's head it was not read (round 15, triage15b). The MPI
# standard's error classes ("*** MPI_ERR_ROOT: invalid root" in Open MPI's fatal banner) and Open MPI's "MPI_ABORT was
# invoked on rank N in communicator C" carry none either (round 16 wave 2, triage16b). An orchestrator's status line
# (DLRover's "[status_update][Running to Failed]", Kubeflow's "... replica(s) failed.", Ray's "Job 'raysubmit_..'
# failed" / "entrypoint command failed with exit code", "The actor is dead because its worker process has died") neither
# (round 16 wave 3, triage16c). Nor do PBS/Torque's "=>> PBS: job killed: walltime N exceeded limit M" and "Job exceeded
# its walltime limit. Job was aborted", and Taskcluster's "GCP Metadata Service says termination is imminent" (same wave).
# "EI00" and "EJ00" are the heads of Ascend's CANN error codes for HCCL and HCCP ("EJ0001: [PID: N] ... Failed to
# initialize the HCCP process", "Communication_Error_Bind_IP_Port(EI0019): ..."; the table in CANN hcomm's
# src/common/error_code/error_code.cc, tools/mine_hccl_codes.py), whose lines need not carry an error word (round 18).
# nccl-tests' and rccl-tests' checks ("%s: Test CUDA failure %s:%d '%s'", hipified "Test HIP failure", "Test NCCL
# failure"; src/common.h CUDACHECK/NCCLCHECK) quote the runtime's text, which need not hold one either (round 18).
# A runtime's status ("INTERNAL: Invalid system configuration: 2x2 host topology ...", "Internal: ...", "DEADLINE_EXCEEDED:
# Barrier timed out") is printed by XLA, PJRT, JAX, the TPU runtime and gRPC as absl's Status::ToString writes it (the
# code's name, ": ", the message; TensorFlow's older Status the name in words: "Deadline exceeded: "); logged rather than
# raised into Python it carries no error word, and past a large log's head it was not read (round 20: the catalogue's
# libtpu entry). Each code's two forms are keywords (data/status_codes.json, abseil-cpp absl/status/status.cc,
# tensorflow/core/lib/core/status.cc; tests/test_triage_round20_classes.py checks the two agree).
ANCHORS: Tuple[bytes, ...] = (
    b"NCCL", b"rror", b"exitcode", b"Traceback", b"c10d]", b"Killed", b"huggingface/tokenizers", b"terminated with",
    b"TOKENIZERS_PARALLELISM", b"Segmentation", b"ddpdoctor run:", b"terminate called", b"xception", b"signal",
    b"oom-kill", b"oom_kill", b"oom_reaper", b"emory", b"return code", b"srun: ", b"finished", b"raining complete", b"done training", b"verflow", b"ERROR", b"Killing",
    b"(local_rank: ", b"open files", b"NVRM", b"receive grad", b"libuv.h:", b"issing ranks", b"remainder of ranks",
    b"CANCELLED AT", b"status.SUCCEEDED", b"_per_second", b"metrics *****", b"` stopped: `",
    b"Out of bounds values", b"exits successfully", b"Done waiting for other agents", b"node has died",
    b"marked dead because", b"loopback address as fallback", b"Assertion `",
    b"noticed that process rank", b"exit with status code", b"Aborted", b"talled ranks",
    b"raining Completed", b"after training is done", b"to shutdown process", b"uninterruptible sleep",
    b"size mismatch for", b"busy or unavailable", b"GPU is lost",
    b"Skipping step", b"retry count exceeded", b"and may be stuck", b"Termination timeout for",
    b"Assertion failure at", b"distributed JAX controller",
    b"ORTE has lost communication", b"Halt is unexpected", b"job is now going to abort", b"Training job completed",
    b"Trainer to stop", b"stopping training", b"ending training",
    b"Process name: [[", b"Exit code:", b"with non-zero status", b"non-zero exit code",
    b"MPI_ERR_", b"MPI_ABORT was invoked",
    b"[status_update][", b"replica(s) failed", b"raysubmit_", b"command failed with exit code", b"worker process has died",
    b"PBS: job killed", b"Job was aborted", b"termination is imminent",
    b"EI00", b"EJ00", b"CUDA failure", b"HIP failure", b"NCCL failure",
    # absl's and TensorFlow's status codes as their Status::ToString prints them before the message (data/status_codes.json)
    b"CANCELLED: ", b"Cancelled: ", b"UNKNOWN: ", b"Unknown: ", b"INVALID_ARGUMENT: ", b"Invalid argument: ",
    b"DEADLINE_EXCEEDED: ", b"Deadline exceeded: ", b"NOT_FOUND: ", b"Not found: ", b"ALREADY_EXISTS: ",
    b"Already exists: ", b"PERMISSION_DENIED: ", b"Permission denied: ", b"UNAUTHENTICATED: ", b"Unauthenticated: ",
    b"RESOURCE_EXHAUSTED: ", b"Resource exhausted: ", b"FAILED_PRECONDITION: ", b"Failed precondition: ",
    b"ABORTED: ", b"Aborted: ", b"OUT_OF_RANGE: ", b"Out of range: ", b"UNIMPLEMENTED: ", b"Unimplemented: ",
    b"INTERNAL: ", b"Internal: ", b"UNAVAILABLE: ", b"Unavailable: ", b"DATA_LOSS: ", b"Data loss: ",
    # Weights & Biases' end of a run (wandb/sdk/wandb_run.py: Run._on_finish's exit status, the footer's grids), read past
    # a large log's head as an end, like the Trainer's "Training completed"
    b"Program ended successfully", b"Program failed with code", b"Run summary:", b"Run history:",
    # a launch that never started a rank: MPICH Hydra's own argument error (src/pm/hydra/lib/utils/args.c match_arg),
    # bash's and dash's "command not found" / "<line>: not found" for the launcher or python (execute_cmd.c, src/exec.c)
    b"unrecognized argument", b"command not found", b": not found",
    # PowerShell's CommandNotFoundException ("The term 'X' is not recognized as the name of a cmdlet, ...";
    # PowerShell/PowerShell src/System.Management.Automation/resources/DiscoveryExceptions.resx)
    b"name of a cmdlet",
    # fish's "fish: Unknown command: torchrun" (share/functions/fish_command_not_found.fish) and Open MPI's mapper
    # refusing -np above its slots (orte/mca/rmaps/base/help-orte-rmaps-base.txt [orte-rmaps-base:alloc-error]): a
    # launch that never started a rank (round 21, triage23)
    b"Unknown command", b"not enough slots", b"noticed that job rank",
    # glog's and absl's CHECK failure: LogMessageFatal writes "Check failed: <cond> (<a> vs. <b>) <msg>" on an F-level
    # line ("F1207 12:00:01.123456 4242 file.cc:42] Check failed: ..."), then "*** Check failure stack trace: ***" and
    # aborts (google/glog src/logging.cc, abseil-cpp absl/log/internal/check_op.h, log_message.cc): XLA, the TPU
    # runtime, gRPC, Paddle and NCCL plugins log with it; no error word on either line, so past a large log's head the
    # process's fatal line was not read and its "Aborted (core dumped)" stood first (round 21, triage23)
    b"Check failed: ", b"Check failure stack trace",
    # CPython's interpreter that cannot open the script it was given (Modules/main.c pymain_run_file_obj: "%S: can't
    # open file %R: [Errno %d] %s", exit 2): a launch that never ran the script, on every local rank (round 21)
    b"can't open file",
    # Open MPI's/PRRTE's "mpirun has exited due to process rank N with PID P on / node H exiting improperly" (a rank
    # that ended without MPI_Finalize: help-orterun.txt [orterun:proc-exit-no-sync] as logs print it; round 21)
    b"has exited due to process rank",
    # a C++ backtrace through the rendezvous store's constructor or its server's set-up, its message cut (c10::Error's
    # "frame #2: c10d::TCPStore::TCPStore(...)", "frame #1: c10d::detail::TCPStoreMasterDaemon::TCPStoreMasterDaemon(
    # ...)"; torch/csrc/distributed/c10d/TCPStore.cpp, TCPStoreBackend.cpp @cf30153): frames carry no error word, and a
    # backtrace pasted without its message was read only in a log's head (round 21, triage24)
    b"c10d::TCPStore::TCPStore(", b"TCPStoreMasterDaemon::TCPStoreMasterDaemon(", b"tcpstore_backend(",
    b"LibUVStoreDaemon::LibUVStoreDaemon(",
    # glog's and absl's C++ line head ("E1207 12:00:01.123456  4242 client.cc:88] Connect to 10.0.0.2:8470 failed":
    # google/glog src/logging.cc LogMessage::Init, "%c%02d%02d %02d:%02d:%02d.%06d %5d %s:%d] ", abseil-cpp
    # absl/log/internal/log_format.cc the same) names the C++ source file, by Google's style a .cc: a literal
    # prefilter cannot find the level and date, but every such line carries "<file>.cc:<line>] ". An E- or F-line whose
    # failure words are no keyword ("failed", "Timed out", "FAILED") in the middle of a large log, past the head and
    # before the last 16 KiB, was not read (round 21, triage24); NCCL's own lines ("init.cc:1079") already carry "NCCL"
    # a configuration refusal printed alone, no exception name, no traceback: Hydra's run_and_report writes a
    # CompactHydraException as str(ex) ("Could not override 'trainer.gpu'.", hydra/_internal/config_loader_impl.py
    # @2c03d1b) and its OmegaConf cause's str() ("Missing mandatory value: model.channels", omegaconf/base.py
    # @63b6304), then exits 1 (round 22, triage25)
    b"Could not override '", b"Missing mandatory value",
    # argparse's usage banner ("usage: PROG [-h] ...": HelpFormatter._format_usage, -h first when add_help; CPython
    # Lib/argparse.py @8ea6cc14), printed alone before "PROG: error: ..." (ArgumentParser.error, exit 2): a banner past a
    # large log's head was not read, and the reader's window after it (triage.reader.WINDOW_OPENERS) brings its wrapped
    # lines and the line that closes it (round 24, triage30)
    b"[-h]",
    # The glog-head keywords, last (GLOG_HEAD: the reader keeps a line they find only when it opens with glog's level
    # E, F or W and its date, "E1207 ", "[W1207 "; an I-line past the head is skipped as before). ".cc:" is C++ glog and
    # absl (above). ".py:" is absl-Python's head, the same format with the Python file: absl/logging/__init__.py
    # get_absl_log_prefix, '%c%02d%02d %02d:%02d:%02d.%06d %5d %s:%d] ' (abseil/abseil-py @3e45907), which JAX, t5x,
    # TensorFlow's Python side and MaxText log through: "E1207 12:00:02.123456 140 coordinator.py:88] Connection to the
    # coordination service ... failed" mid-log was not read (round 22, triage25)
    b".cc:", b".py:")
# the keywords that count only on a line that opens with glog's E/F/W level and date (the reader's own copy:
# ddpdoctor.triage.reader.GLOG_HEAD, which the search process reads without importing this module)
GLOG_HEAD: Tuple[bytes, ...] = (b".cc:", b".py:")


def _signal_texts() -> Dict[str, Tuple[str, ...]]:
    """What a shell prints for a job that died of SIGKILL, SIGSEGV, SIGABRT or SIGBUS in every language it is
    translated into (ddpdoctor/data/strsignal.json): glibc's strsignal() and bash's own siglist.c texts ("已杀死" for
    "Killed" under zh_CN, "Speicherzugriffsfehler" for "Segmentation fault" under de). A text two signals share in
    some language is left out of both (no guess which one it was)."""
    import json
    import pathlib

    try:
        with (pathlib.Path(__file__).resolve().parent.parent / "data" / "strsignal.json").open(encoding="utf-8") as fh:
            doc = json.load(fh)
        by_sig: Dict[str, set] = {}
        for table in (doc, doc.get("bash", {})):
            for sig in ("SIGKILL", "SIGSEGV", "SIGABRT", "SIGBUS"):
                by_sig.setdefault(sig, set()).update(str(v) for v in (table.get(sig) or {}).values())
        seen: Dict[str, int] = {}
        for texts in by_sig.values():
            for t in texts:
                seen[t] = seen.get(t, 0) + 1
        return {sig: tuple(sorted(t for t in texts if seen[t] == 1)) for sig, texts in by_sig.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def _bash_texts(key: str) -> Tuple[str, ...]:
    """bash's own translations of one of its job-report texts (strsignal.json "bash": "line", "core_dumped")."""
    import json
    import pathlib

    try:
        with (pathlib.Path(__file__).resolve().parent.parent / "data" / "strsignal.json").open(encoding="utf-8") as fh:
            return tuple(sorted(set(str(v) for v in json.load(fh)["bash"][key].values())))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return ()


def _zsh_sigmsg() -> Dict[str, str]:
    """zsh's own text of each deadly signal in its job reports -> the signal ("segmentation fault" -> "SIGSEGV";
    strsignal.json "zsh": Src/signames2.awk)."""
    import json
    import pathlib

    try:
        with (pathlib.Path(__file__).resolve().parent.parent / "data" / "strsignal.json").open(encoding="utf-8") as fh:
            return {str(t): sig for sig, t in json.load(fh)["zsh"]["sigmsg"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


SIGNAL_TEXTS: Dict[str, Tuple[str, ...]] = _signal_texts()
ZSH_SIGMSG: Dict[str, str] = _zsh_sigmsg()
KILLED_TEXTS: Tuple[str, ...] = SIGNAL_TEXTS.get("SIGKILL", ())
# bash's "line %d: " (a script's job report: "train.sh: line 3: 4242 Killed  python ...") and "(core dumped)" in the
# languages bash is translated into ("Zeile %d: ", "第 %d 行：")
BASH_LINE_FORMATS: Tuple[str, ...] = _bash_texts("line")
CORE_DUMPED_TEXTS: Tuple[str, ...] = _bash_texts("core_dumped")
# The translations are not prefilter keywords: 34 more would make the memmem fallback (one pass per keyword) about 1.6x
# slower (bench_triage, interleaved with c7c4f5a at load 8-12: 32.6-33.7 s against 19.6-21.7 s for 1 GiB). The shell
# prints its report as the job ends, and the reader always hands on a file's head and its last lines (reader.py
# TAIL_LINES), where it stands; a translated "Killed" in the middle of a long log, past both, is not read.
_ANCHOR_STR = tuple(a.decode() for a in ANCHORS)

NAME = "messages"
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")


@dataclass(frozen=True)
class MessageMatch:
    """One catalogue entry recognised in a line: the entry (id, class, meaning, fix, source...) and the
    values of its pattern's named groups."""
    entry: dict
    fields: Dict[str, str]
    start: int
    end: int

    @property
    def cls(self) -> str:
        return self.entry["class"]

    @property
    def role(self) -> str:
        return classes().get(self.entry["class"], {}).get("role", "cause")


_PLAIN_ANCHOR_STR = tuple(a.decode() for a in ANCHORS if a not in GLOG_HEAD)
_GLOG_HEAD_STR = tuple(a.decode() for a in GLOG_HEAD)
# glog's level E, F or W then its date, opening the line (bracketed as c10d writes it): what a GLOG_HEAD keyword needs
GLOG_LEVEL = re.compile(r"\[?[EFW]\d{4}")
# ... and the keyword followed by the line number and glog's ']' (triage.reader.GLOG_TAIL)
_GLOG_HEAD_RX = re.compile("(?:" + "|".join(re.escape(a) for a in _GLOG_HEAD_STR) + r")\d{1,9}\]")


# The plain keywords in one Hyperscan pass (facts.literals): Job.feed_line asks for every line past the head, and ~100
# `in` tests a line cost ~17 us of a traceback line's ~120 us (100,000 tracebacks: 400,000 lines; round 24, triage30)
_PLAIN_ANCHOR_SCAN = LiteralSet(_PLAIN_ANCHOR_STR, "anchor")


def has_anchor(text: str) -> bool:
    """The line carries a keyword the reader finds (a GLOG_HEAD keyword only on a glog E/F/W line and followed by its
    line number and ']', as the reader)."""
    hits = _PLAIN_ANCHOR_SCAN.found(text)
    if hits is None:
        plain = any(a in text for a in _PLAIN_ANCHOR_STR)
    else:
        plain = bool(hits)
    return plain or (GLOG_LEVEL.match(text) is not None and _GLOG_HEAD_RX.search(text) is not None)


# a run of characters that `_required_words` takes one at a time as literal text (outside a group) or ignores (inside)
_PLAIN_RUN = re.compile(r"[^\\\[()?*{+.^$|}]+")


def _required_words(pattern: str) -> List[str]:
    """Whole words the pattern requires in every match: literal text outside any group, with no top-level
    alternation. A word counts only when literal non-word characters (or the pattern's ends, for `^`/`\\b`)
    bound it on both sides, because a group, a class or a quantifier next to it could extend it in the line
    (`Kill(?:ed)?` matches the token "Killed", `oom[_-]kill` the token "oom_kill")."""
    if _top_level_alternation(pattern):
        return []
    MARK = "\x00"   # anything that is not a literal: the words it touches are not safe
    depth, lit, i = 0, [], 0
    while i < len(pattern):
        run = _PLAIN_RUN.match(pattern, i)
        if run is not None:   # characters with no meaning to this walk: taken in one step (the walk's cost was
            if depth == 0:    # one Python iteration per character, ~800 patterns on every load)
                lit.extend(run.group())
            i = run.end()
            continue
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            after = pattern[i + 2] if i + 2 < len(pattern) else ""
            if nxt == "s" and after == "+":   # one or more spaces: still a boundary
                if depth == 0:
                    lit.append(" ")
                i += 3
                continue
            if depth == 0:
                lit.append(MARK if nxt in "sSdDwWbBAZ" or nxt.isdigit() else nxt)
            i += 2
            continue
        if ch == "[":   # a character class: skip it whole, it is never literal text
            j = i + 1
            if j < len(pattern) and pattern[j] == "^":
                j += 1
            if j < len(pattern) and pattern[j] == "]":
                j += 1
            while j < len(pattern) and pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            i = j + 1
            if depth == 0:
                lit.append(MARK)
            continue
        if ch in "()":
            depth += 1 if ch == "(" else -1
            lit.append(MARK)
        elif depth == 0 and ch in "?*{+":
            if lit:
                lit[-1] = MARK   # the previous character may be absent or repeated
            lit.append(MARK)
        elif depth == 0 and ch in ".^$|}":
            lit.append(MARK)
        elif depth == 0:
            lit.append(ch)
        i += 1
    text = "".join(lit)
    out = []
    for m in _WORD.finditer(text):
        s, e = m.start(), m.end()
        before = text[s - 1] if s > 0 else None
        after = text[e] if e < len(text) else None
        if before is None and not pattern.startswith(("^", "\\b")):
            continue   # the line's text may continue the word to the left
        if before == MARK or after == MARK or after is None:
            continue
        out.append(m.group(0))
    return out


def needles(pattern: str) -> Tuple[str, ...]:
    """Literal strings one of which every match of `pattern` contains, read from the parse tree `re` itself
    builds: a run of literal characters in a sequence; for a group, a repeat of at least one, or an alternation
    whose every branch has some, theirs. The best (longest shortest string, then fewest) is kept. () when
    nothing can be said (case-insensitive parts, classes, a branch without one, a pattern that does not parse):
    the entry is then always searched. `match` only skips an entry whose needles are all absent from the line,
    so this changes no result (tests/test_messages_needles.py compares it with searching every candidate)."""
    try:
        tree = _sre_parse.parse(pattern)
    except Exception:  # noqa: BLE001 - re.error, or a parser change: search as before
        return ()
    found = _seq_needles(list(tree), bool(tree.state.flags & re.IGNORECASE))
    return tuple(sorted(found)) if found else ()


_SCAN_NEEDLES = 16   # needles from which Prefiltered scans once (Hyperscan, ~1 us) rather than testing each (~0.15 us)


_KEPT: list = []   # [path or None, {pattern: needles}], read on first use


def _kept_needles(pattern: str) -> Tuple[str, ...]:
    """`needles(pattern)` for a Prefiltered pattern (the package's own, built at import), kept in the user's cache
    folder (ddpdoctor.recache.cache_dir) in a file named by the interpreter and a checksum of this module's source:
    `re`'s parser ran on triage's six such patterns at every start, ~24 M instructions (round 16, callgrind). Any
    edit of this file, or another interpreter, names another file; a missing or damaged one is derived again and
    written; DDPDOCTOR_NO_RE_CACHE=1 (the regex cache off) derives every time."""
    if not _KEPT:
        path, memo = None, {}
        if not os.environ.get("DDPDOCTOR_NO_RE_CACHE"):
            try:
                import marshal
                import zlib

                from ..recache import cache_dir

                with open(__file__, "rb") as fh:
                    src = fh.read()
                path = os.path.join(cache_dir(), f"needles-{sys.hexversion:x}-{zlib.crc32(src):08x}"
                                                 f"{zlib.adler32(src):08x}.marshal")
                try:
                    with open(path, "rb") as fh:
                        got = marshal.loads(fh.read())
                    memo = got if isinstance(got, dict) else {}
                except Exception:  # noqa: BLE001 - none yet, or damaged: derived again below
                    memo = {}
            except Exception:  # noqa: BLE001 - no source to key it by (a zipped or compiled-only install)
                path = None
        _KEPT.extend((path, memo))
    path, memo = _KEPT
    hit = memo.get(pattern)
    if isinstance(hit, tuple) and all(isinstance(n, str) for n in hit):
        return hit
    found = needles(pattern)
    if path:
        import marshal

        from ..recache import write_cached

        memo[pattern] = found
        write_cached(path, marshal.dumps(memo))
    return found


class Prefiltered:
    """A compiled regex whose `search` first tests the line for its needles (`needles`: one of them is in every match):
    a line carrying none cannot match, so it costs a few substring tests instead of the regex's attempt at every
    position (a large alternation such as triage's set-up or failure words: ~10 us a line). Needles that contain
    another needle are dropped (the shorter one is in every line the longer one is). Same result as `rx.search`;
    a pattern compiled with IGNORECASE or VERBOSE (which change what its text means) is searched unfiltered."""

    __slots__ = ("rx", "needles", "_scan")

    def __init__(self, rx: "re.Pattern"):
        self.rx = rx
        found = _kept_needles(rx.pattern) if not rx.flags & (re.IGNORECASE | re.VERBOSE) else ()
        self.needles = tuple(n for n in found if not any(o != n and o in n for o in found))
        # many needles (triage's set-up words: 52): one Hyperscan pass instead of the `in` tests (None without it)
        self._scan = LiteralSet(self.needles, "pre") if len(self.needles) >= _SCAN_NEEDLES else None

    @property
    def pattern(self) -> str:
        return self.rx.pattern

    def search(self, text: str) -> Optional["re.Match"]:
        if not self.needles:
            return self.rx.search(text)
        if self._scan is not None:
            hits = self._scan.found(text)
            if hits is not None:
                return self.rx.search(text) if hits else None
        for n in self.needles:
            if n in text:
                return self.rx.search(text)
        return None


def _better(a: Optional[frozenset], b: Optional[frozenset]) -> Optional[frozenset]:
    if not b:
        return a
    if not a:
        return b
    return b if (min(map(len, b)), -len(b)) > (min(map(len, a)), -len(a)) else a


def _seq_needles(items: list, icase: bool) -> Optional[frozenset]:
    best: Optional[frozenset] = None
    run: List[str] = []
    for op, av in items + [(None, None)]:
        if op is _sre.LITERAL and not icase:
            run.append(chr(av))
            continue
        if run:
            best = _better(best, frozenset(["".join(run)]))
            run = []
        if op is _sre.SUBPATTERN:
            _group, add, drop, sub = av
            sub_icase = (icase or bool(add & re.IGNORECASE)) and not (drop & re.IGNORECASE)
            best = _better(best, _seq_needles(list(sub), sub_icase))
        elif op is _ATOMIC:
            best = _better(best, _seq_needles(list(av), icase))
        elif op in _REPEATS and av[0] >= 1:
            best = _better(best, _seq_needles(list(av[2]), icase))
        elif op is _sre.BRANCH:
            alts = [_seq_needles(list(b), icase) for b in av[1]]
            if alts and all(alts):
                best = _better(best, frozenset().union(*alts))
    return best


def _top_level_alternation(pattern: str) -> bool:
    if "|" not in pattern:   # most patterns: no alternation at all (the walk below cost ~5 ms a run over them)
        return False
    depth, i = 0, 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "[":
            j = pattern.find("]", i + 2)
            i = j + 1 if j > 0 else i + 1
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "|" and depth == 0:
            return True
        i += 1
    return False


class _Index:
    def __init__(self, entries: Sequence[dict], derived: bool = True):
        """`derived`: take each entry's required words and needles from DERIVED_FILE where it holds them for the
        entry's current pattern (False: derive every one here, as for a catalogue the file does not describe)."""
        self.entries = list(entries)
        # each entry's pattern is compiled the first time a line's words make it a candidate: most lines of a log
        # bring none, and compiling all of them costs every run a fixed ~0.2 s (the 1 GiB benchmark's budget)
        self.rx: List[Optional["re.Pattern"]] = [None] * len(self.entries)
        self._compiled = [False] * len(self.entries)
        self.errors: Dict[str, str] = {}
        # literal prefilter: each entry's needles (one of which every match contains), from DERIVED_FILE or derived
        # the first time the entry is a candidate; a line without any is not searched (nor the pattern compiled). ~44
        # entries have no required word and are candidates on every line: this spares most lines their regex searches.
        self._needles: List[Optional[Tuple[str, ...]]] = [None] * len(self.entries)
        known = _derived() if derived else {}
        freq: Dict[str, int] = {}
        words = []
        for i, e in enumerate(self.entries):
            pattern = e.get("pattern", "")
            got = known.get(e.get("id")) if isinstance(pattern, str) else None
            if got is not None and got[0] == pattern:
                ws = set(got[1])
                self._needles[i] = got[2]
            else:
                ws = set(_required_words(pattern))
            words.append(ws)
            for w in ws:
                freq[w] = freq.get(w, 0) + 1
        self.by_word: Dict[str, List[int]] = {}
        self.always: List[int] = []
        self.key: Dict[int, Optional[str]] = {}
        self._heads: Dict[int, str] = {}
        for i, ws in enumerate(words):
            if not isinstance(self.entries[i].get("pattern"), str):
                continue
            if not ws:
                self.always.append(i)
                self.key[i] = None
                continue
            best = min(ws, key=lambda w: (freq[w], -len(w), w))
            self.by_word.setdefault(best, []).append(i)
            self.key[i] = best
        self._plan: Optional[tuple] = None   # _always_plan(), made on the first line
        self._plan_scan: Optional[LiteralSet] = None

    def _rx(self, i: int) -> Optional["re.Pattern"]:
        if not self._compiled[i]:
            self._compiled[i] = True
            e = self.entries[i]
            try:
                with own_patterns():   # the catalogue's text: kept in the regex cache, though compiled late
                    self.rx[i] = re.compile(linear_pattern(e["pattern"]))
            except (re.error, KeyError, TypeError) as exc:
                self.errors[e.get("id", "?")] = str(exc)
        return self.rx[i]

    def needles(self, i: int) -> Tuple[str, ...]:
        found = self._needles[i]
        if found is None:
            found = self._needles[i] = needles(self.entries[i].get("pattern", ""))
        return found

    def candidates(self, text: str) -> List[int]:
        found = set(self.always)
        for w in set(_WORD.findall(text)):
            idx = self.by_word.get(w)
            if idx:
                found.update(idx)
        return sorted(found)

    def _always_plan(self) -> Tuple[Tuple[Tuple[str, Tuple[int, ...]], ...], Tuple[int, ...], Tuple[int, ...]]:
        """The entries with no required word are candidates on every line (~44 of them): their needles and cut-line
        heads, derived once. A line then costs one `in` per distinct needle, not one generator per entry (on the
        1 GiB benchmark's handed-on lines, ~45,000 generators a run). Returns (needle -> its entries, the entries
        with no needle (always searched), the entries with a cut-line head)."""
        if self._plan is None:
            by_needle: Dict[str, List[int]] = {}
            bare, heads = [], []
            for i in self.always:
                need = self.needles(i)
                if not need:
                    bare.append(i)
                for n in need:
                    by_needle.setdefault(n, []).append(i)
                if self._head(i):
                    heads.append(i)
            self._plan = (tuple((n, tuple(ix)) for n, ix in by_needle.items()), tuple(bare), tuple(heads))
            # the same needles in one Hyperscan pass (ddpdoctor.facts.literals; None without it: the `in` tests)
            self._plan_scan = LiteralSet(tuple(by_needle), "msg")
        return self._plan

    def match_all(self, text: str) -> List[MessageMatch]:
        """What `candidates` then a search of each candidate whose needles the line carries gives (in index order),
        or, when none matches, the cut-line matches of every candidate; computed without sorting the ~44
        always-candidates of each line."""
        by_needle, bare, always_heads = self._always_plan()
        live = set(bare)
        hits = self._plan_scan.found(text)
        if hits is None:
            for n, idx in by_needle:
                if n in text:
                    live.update(idx)
        else:
            for k in hits:
                live.update(by_needle[k][1])
        worded: List[int] = []
        for w in set(_WORD.findall(text)):
            idx = self.by_word.get(w)
            if idx:
                worded.extend(idx)
        for i in worded:
            need = self.needles(i)
            if not need or (need[0] in text if len(need) == 1 else any(n in text for n in need)):
                live.add(i)   # else no match can lack all of them: the search would fail
        out = []
        for i in sorted(live):
            lo, m = self.search(i, text)
            if m is not None:
                fields = {k: v for k, v in m.groupdict().items() if v is not None}
                out.append(MessageMatch(self.entries[i], fields, lo + m.start(), lo + m.end()))
        if not out and len(text) >= _CUT_MIN and (self.always or worded):
            with_head = set(always_heads)
            with_head.update(i for i in worded if self._head(i))
            if with_head:
                out = self._cut_matches(text, sorted(with_head))
        return out

    def search(self, i: int, text: str) -> Tuple[int, Optional["re.Match[str]"]]:
        """Entry i's pattern searched in a line (in its window when the line is long): (the window's offset, the
        match or None)."""
        rx = self._rx(i)
        if rx is None:
            return 0, None
        if len(text) <= _WINDOW_LINE:
            return 0, rx.search(text)
        lo, hi = self._window(i, text)
        return lo, rx.search(text[lo:hi])

    def _window(self, i: int, text: str) -> Tuple[int, int]:
        """The part of a long line entry i's pattern is searched in: _WINDOW characters either side of the first of
        its needles the line carries (the line's first 2 * _WINDOW when it has none). A catalogued message is far
        shorter; a placeholder's lazy `.*?` is not linear on a line of 64 KiB of blanks or brackets (round 21: one
        pattern with three placeholders took 0.4 s on 4 KiB of blanks, minutes on 64 KiB)."""
        at = [p for p in (text.find(n) for n in self.needles(i)) if p >= 0]
        if not at:
            return 0, 2 * _WINDOW
        p = min(at)
        return max(0, p - _WINDOW), p + _WINDOW

    def _head(self, i: int) -> str:
        """The literal head of entry i's pattern with its whitespace removed (up to its first group or regex
        construct), or "" when it is shorter than a cut line could be told by."""
        if i not in self._heads:
            self._heads[i] = _literal_head(self.entries[i].get("pattern", ""))
        return self._heads[i]

    def _cut_matches(self, text: str, cands: List[int]) -> List[MessageMatch]:
        """A message cut at the end of its line (the last line of a paste, a line a terminal or a web page broke,
        a table cell) still carries the head of its text: the line ends inside an entry's literal head, after at
        least _CUT_MIN of its characters. Its fields are unknown (the holes are past the cut)."""
        flat = _NON_SPACE.sub("", text)
        out = []
        for i in cands:
            head = self._head(i)
            if not head:
                continue
            p = flat.find(head[:_CUT_MIN])
            if p < 0:
                continue
            tail = flat[p:]
            if len(tail) < len(head) and head.startswith(tail):
                out.append(MessageMatch(self.entries[i], {"cut": "line ends inside the message"}, 0, len(text)))
        return out


# A format string's placeholder becomes a lazy `.*?` in the catalogue ("{} does not support overlapped DDP" ->
# `(?P<optim>.*?)\s+does\s+not...`). Followed by `\s+`, it is O(n^2) from one start on a long line of blanks (each
# length of the group, then `\s+` over the rest of the blanks: 9 s for one 60 KiB line after "nnodes="), and O(n^3)
# when it opens the pattern (every start: 55 s for 4 KiB of blanks). Round 21's audit; benchmarks/bench_regex.py.
_LAZY_BEFORE_BLANKS = re.compile(r"(\(\?P<\w+>)?(?<!\\)\.\*\?(?=\)?\\s[+*])")
_LEADING_LAZY = re.compile(r"(?:\(\?P<\w+>)?\(\?:\.\*\?\\S\)\?\?")


def linear_pattern(pattern: str) -> str:
    r"""The same matches, in linear time on a line: (1) a lazy `.*?` right before `\s+`/`\s*` may end only on a
    non-blank, `(?:.*?\S)??` (the shortest match never ends on a blank: one character shorter, the blank joins the
    `\s+`, so it is tried first and wins); (2) a pattern that opens with such a group starts only where the line does
    (a match at any later start extends to the line's start by the group, so the leftmost match starts there anyway)."""
    out = _LAZY_BEFORE_BLANKS.sub(lambda m: (m.group(1) or "") + "(?:.*?\\S)??", pattern)
    if out != pattern and _LEADING_LAZY.match(out):
        out = "(?<![^\\n])" + out
    return out


# A line longer than _WINDOW_LINE is searched per entry around its needle (_Index._window)
_WINDOW_LINE = 2048
_WINDOW = 1024
# A line cut inside a catalogued message is recognised by its first _CUT_MIN non-blank characters, if the entry's
# literal head is at least _CUT_HEAD long (shorter heads are too common to tell a cut message from prose).
_CUT_MIN = 32
_CUT_HEAD = 48
_NON_SPACE = re.compile(r"\s+")


def _literal_head(pattern: str) -> str:
    """The literal text a pattern opens with (escapes undone, whitespace dropped), up to its first group,
    class or quantifier; "" when shorter than _CUT_HEAD."""
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            if nxt == "s":
                i += 3 if i + 2 < len(pattern) and pattern[i + 2] in "+*?" else 2
                continue
            if nxt.isalnum():
                break   # \d, \w, \b...: a class, not literal text
            out.append(nxt)
            i += 2
            continue
        if ch in ".^$*+?{}[]|()":
            if ch in "*?+{" and out:
                out.pop()   # a quantifier makes the character before it optional
            break
        if not ch.isspace():
            out.append(ch)
        i += 1
    head = "".join(out)
    return head if len(head) >= _CUT_HEAD else ""


@functools.lru_cache(maxsize=1)
def _index() -> _Index:
    return _Index(catalogue.entries(NAME))


# What _Index derives from each entry's pattern (its required words: ~800 Python walks, ~9 ms; its needles: a parse by
# `re`'s own parser, ~70 us an entry, ~110 entries on the 1 GiB benchmark's lines), computed once by `write_derived`
# (`make catalogue-index`) and read on every run instead. Each record carries the pattern it was derived from and is
# used only while the catalogue's pattern is the same text: an entry added or edited since is derived at run time, as
# before (slower, never wrong). tests/test_messages_needles.py checks every record against a fresh derivation.
DERIVED_FILE = "messages_derived.json"
DERIVED_SCHEMA = "ddpdoctor/messages-derived/1"


def _derived() -> Dict[str, Tuple[str, List[str], Tuple[str, ...]]]:
    """entry id -> (pattern, required words, needles) from DERIVED_FILE; {} when it is missing or malformed."""
    from ..recache import load_json

    try:
        doc = load_json(str(catalogue.DATA_DIR / DERIVED_FILE))
        if doc.get("schema") != DERIVED_SCHEMA:
            return {}
        return {k: (v[0], v[1], tuple(v[2])) for k, v in doc["entries"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError):
        return {}


def write_derived() -> int:
    """Write DERIVED_FILE for the current catalogue (`make catalogue-index`). Returns the number of entries."""
    import json

    out = {}
    for e in entries():
        pattern = e.get("pattern")
        if isinstance(pattern, str) and e.get("id"):
            out[e["id"]] = [pattern, sorted(set(_required_words(pattern))), list(needles(pattern))]
    doc = {"schema": DERIVED_SCHEMA,
           "about": "Derived from messages.json by ddpdoctor.facts.messages.write_derived (make catalogue-index): per "
                    "entry id, [pattern, required words, needles]. A record is used only while its pattern is the "
                    "catalogue's; do not edit by hand.",
           "entries": out}
    with (catalogue.DATA_DIR / DERIVED_FILE).open("w", encoding="utf-8") as fh:   # one entry a line: readable diffs
        fh.write("{" + ",\n".join(f"{json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}" for k, v in doc.items()
                                  if k != "entries") + ',\n"entries": {\n')
        fh.write(",\n".join(f"{json.dumps(k)}: {json.dumps(out[k], ensure_ascii=False)}" for k in sorted(out)))
        fh.write("\n}}\n")
    return len(out)


def entries() -> Tuple[dict, ...]:
    return catalogue.entries(NAME)


@functools.lru_cache(maxsize=1)
def words() -> frozenset:
    """The catalogue's vocabulary: every word of six letters or more in an entry's `format` (the message as its source
    prints it: "unhandled cuda error", "Execution of replica"), lower-cased. A terminal that wraps a long line at its
    width cuts a word anywhere ("un" / "handled cuda error"); the reader joins the two lines only where the word they
    make is one of these (triage/api.py _word_cut)."""
    out = set()
    for e in entries():
        out.update(w.lower() for w in re.findall(r"[A-Za-z]{6,}", str(e.get("format") or "")))
    return frozenset(out)


@functools.lru_cache(maxsize=1)
def classes() -> Dict[str, dict]:
    """class name -> {role, rule, meaning, fix}: role is cause, consequence, context, benign or end."""
    return dict(catalogue.header(NAME).get("classes") or {})


def match_all(line: str) -> List[MessageMatch]:
    """Every catalogue entry that recognises this line (a line can carry two: NCCL's 'Cuda failure' and the
    CUDA runtime's text inside it), most specific first. A message quoted without its exception type (the
    first line of a pasted excerpt) is recognised too; past the head of a big log the reader hands on only
    lines with a keyword, which every entry's usual form carries (entry_problems checks its examples)."""
    if not line:
        return []
    found = _index().match_all(line)
    if not found and _TYPOGRAPHIC.search(line):
        # the program printed straight quotes (Python's repr and every '{name}' / {name!r} of a raised message:
        # CPython Objects/unicodeobject.c unicode_repr); a reporter's editor ("smart quotes") turned them into
        # typographic ones (U+2018/U+2019/U+201C/U+201D ... in Unicode's UnicodeData.txt): the same message, read
        # with them straightened (one character for one: the match's positions hold). Round 23, issue 24: the
        # held-out review's 'DistributedDataParallel' object has no attribute ..., read as a generic failure
        found = _index().match_all(line.translate(_STRAIGHT))
    if len(found) > 1 and any(mm.entry.get("fallback") for mm in found):
        # an entry marked "fallback" reads a whole family by its exception's name alone (Lightning's
        # MisconfigurationException, any message): where a more specific entry reads the same line, it has the say
        specific = [mm for mm in found if not mm.entry.get("fallback")]
        found = specific or found
    found.sort(key=lambda mm: (-(mm.end - mm.start), _ROLE_ORDER.get(mm.role, 9)))
    return found


_TYPOGRAPHIC = re.compile("[\u2018\u2019\u201a\u201b\u2032\u201c\u201d\u201e\u201f\u2033]")
_STRAIGHT = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u2032": "'",
                           "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"', "\u2033": '"'})
_ROLE_ORDER = {"cause": 0, "consequence": 1, "context": 2, "end": 3, "benign": 4}


def match(line: str) -> Optional[MessageMatch]:
    """The most specific catalogue entry recognising this line, or None."""
    found = match_all(line)
    return found[0] if found else None


@functools.lru_cache(maxsize=1)
def _by_id() -> Dict[str, dict]:
    return {e["id"]: e for e in entries()}


def by_id(entry_id: str) -> Optional[dict]:
    return _by_id().get(entry_id)


def role(cls: str) -> str:
    """The role of a class: cause, consequence, context, benign or end ("" for a kind the catalogue lacks)."""
    return classes().get(cls, {}).get("role", "")


def phase(cls: str) -> str:
    """The phase of a job a class's messages are printed in ("setup": only while the processes connect and set up;
    "" when the catalogue says nothing)."""
    return classes().get(cls, {}).get("phase", "")


def rule_of(cls: str) -> Optional[str]:
    """The triage rule that reports a class (None for benign and end classes)."""
    return classes().get(cls, {}).get("rule")


def entry_problems(entry: dict) -> List[str]:
    """What is wrong with one catalogue entry (tests/test_catalogues.py runs it on every entry): its class
    is known, its pattern compiles, and each of its examples carries a prefilter keyword and is recognised
    as this entry by `match_all`, the code triage uses."""
    out: List[str] = []
    cls = entry.get("class")
    if cls not in classes():
        out.append(f"class {cls!r} is not in the catalogue's classes")
    try:
        re.compile(entry.get("pattern", ""))
    except re.error as exc:
        return out + [f"pattern does not compile: {exc}"]
    if not entry.get("pattern"):
        out.append("no pattern")
    if not entry.get("fix"):
        out.append("no fix")
    # A benign notice needs no keyword: past the head the reader skips a line without one, and a skipped line is
    # no failure line either; where the line is read (the head, a window after a keyword line) the entry says it is
    # harmless ("Failed to destroy ... group during shrinking" carries no keyword and is no failure)
    needs_anchor = role(cls) != "benign"
    for ex in entry.get("examples") or []:
        if needs_anchor and not has_anchor(ex):
            out.append(f"example carries no prefilter keyword (the reader would skip it past the head): {ex[:80]!r}")
            continue
        ids = [m.entry["id"] for m in match_all(ex)]
        if entry.get("id") not in ids:
            out.append(f"example not recognised as this entry: {ex[:80]!r}")
    return out


def summary() -> Dict[str, int]:
    """Entries per project (the catalogue's `sources` table names the project of each repo)."""
    projects = {repo: meta.get("project", repo) for repo, meta in catalogue.header(NAME).get("sources", {}).items()}
    out: Dict[str, int] = {}
    for e in entries():
        p = projects.get(e["source"]["repo"], e["source"]["repo"])
        out[p] = out.get(p, 0) + 1
    return out
