""""No issues found!" is a claim of health, made only on evidence: when a log shows no failure, but also nothing
that says the job ended well (training progress alone does not), this rule says that the log cannot show health,
what it does show, and what to collect to find out. It runs after every other rule, LOG028 included, and only when none of them spoke."""
from __future__ import annotations

import re

from ..job import Job, _fmt_ts
from ..verdict import launcher_in, rendezvous_wait
from . import first_seen, hit, rule
from .unexplained import ended_well, setup_is_last, stopped_in_setup, stopped_mid_step

# What api.triage_paths stores before it runs this rule: whether any finding (a rule's, a relayed `ddpdoctor run`
# finding, or LOG028's) is an error or a warning, so that the report would not say "No issues found!" anyway.
REPORTED = "error_or_warning_reported"


def health_shown(job: Job) -> bool:
    """The evidence of health: a sign that the job ended well (a launcher's exit 0, a trainer's summary), or
    Flight Recorder dumps whose collectives completed (LOG019 speaks when they disagree). Training progress is
    not: it shows the job ran up to its last progress line, not that it ended (a job that died or hung after its
    last step shows the same lines). A log that stops on a progress line gets this rule's "stops mid-training"."""
    return (ended_well(job) and setup_after_end(job) is None) or any(
        e.get("state") == "completed" for d in job.flight for e in (d.get("entries") or ()) if isinstance(e, dict))


def setup_after_end(job: Job):
    """The stream that printed the log's last end line goes on to a new set-up and stops there: its last line is a
    set-up line (DeepSpeed's or a framework's start lines; NCCL's INFO lines are left out, its teardown prints them
    too) after that end. The end was the training loop's (the Trainer's "Training completed" comes before it loads
    the best model and re-initialises DeepSpeed), and nothing shows that this later phase ended: that set-up line,
    else None."""
    occ = job.get("job_ended_well")
    if not (occ and occ.count):
        return None
    end = max((e.line for e in occ.first), key=lambda ln: (ln.src, ln.lineno))
    last = max((ln for ln in job.last_line.values() if ln.src == end.src), key=lambda ln: ln.lineno, default=None)
    if last is None or last.lineno <= end.lineno or last.nccl is not None:
        return None
    return last if any((s.src, s.lineno) == (last.src, last.lineno) for s in job.last_setup.values()) else None


# "steady" progress: this many progress lines at least, the log's last line one of them
STEADY_PROGRESS = 5


def progress_excerpt(job: Job) -> bool:
    """An excerpt (all of it within the reader's head, 64 KiB) of a healthy-looking run: steady training progress (STEADY_PROGRESS lines or more, the log's last
    line one of them), and nothing around it, no launcher banner or exit, no distributed set-up line, no multi-node
    launch line, no failure line. Users paste such lines to ask about a loss curve or a speed; a job that died or
    hung after them shows the same lines, and nothing here tells the two apart: the job's fate is unknown, and the
    warning says so ("no failure in this excerpt, and no end either")."""
    if job.bytes_read > job.head_bytes:
        # a pasted excerpt is short; past the head of a big file only keyword lines are read, so set-up or launcher
        # lines there may go unseen: a big log is never judged an excerpt (the verdict must not depend on the path)
        return False
    if job.exits or job.setup_lines or job.nnodes is not None or job.rdzv_line is not None:
        return False
    if job.progress_lines < STEADY_PROGRESS or job.first_fail or job.headless_frames:
        return False
    last = job.last_progress
    return last is None or not _PREP_BAR.match(last.text)


# bars of the data preparation before training (datasets' Map/Filter/tokenizing bars, transformers' checkpoint shard
# loading, dataset download/generation): progress, but not training's; an excerpt that ends on them shows no training
# (round 15, b95_15: a job that failed after its datasets Map bars)
_PREP_BAR = re.compile(r"\s*(?:\[[^\]]*\]:?\s*)?(?:Map|Filter|Tokeniz\w*|Running tokenizer\b[^|]*|Grouping texts\b[^|]*|"
                       r"Loading checkpoint shards|Generating \w+ split|Downloading\b[^|]*|Extracting\b[^|]*|"
                       r"Resolving data files|Saving the dataset\b[^|]*|Casting\b[^|]*|Converting\b[^|]*)"
                       r"(?: \(num_proc=\d+\))?:\s+\d+%\|")


# where the last progress line stands: "epoch 1, iteration 50/2569", "step 800/2000", "epoch 0.08"; the words the
# _PROGRESS forms of job.py print (the Trainer's loss dict, mmcv's "Epoch [1][50/2569]", mmengine's "Iter(train)
# [1050/2046]", "step 800", tqdm's "50/100 [")
_AT_EPOCH = re.compile(r"\b[Ee]poch\b['\"]?\s*[:=]?\s*\[?\s*(\d+(?:\.\d+)?)(?:\s*/\s*(\d+))?")
_AT_STEP = re.compile(r"\b(?:global_)?[Ss]tep\b['\"]?\s*[:=]?\s*\[?\s*(\d+)(?![\d(.])(?:\s*/\s*(\d+))?")
_AT_ITER = re.compile(r"\b(?:[Ii]ter(?:ation)?|[Bb]atch)\b(?:\(\w+\))?['\"]?\s*[:=(]?\s*\[?\s*(\d(?:[\d,]*\d)?)(?:\s*[-/]\s*(\d+))?")
_AT_MMCV = re.compile(r"\]\s*\[\s*(\d+)/(\d+)\]")
_AT_BAR = re.compile(r"(?:\||^)\s*(\d+)/(\d+) \[")  # tqdm's "| 50/100 [", Keras's "250/250 [===="


def progress_at(text: str) -> str:
    """Where a progress line stands, in its own numbers ("epoch 1, iteration 50/2569", "step 800/2000"), or ""."""
    def of(m):
        n = m.group(1)
        if re.fullmatch(r"\d+\.\d{4,}", n):  # the Trainer's epoch 0.3448275862068966
            n = f"{float(n):.2f}"
        return n + (f"/{m.group(2)}" if m.group(2) else "")
    parts = []
    for name, rx in (("epoch", _AT_EPOCH), ("step", _AT_STEP), ("iteration", _AT_ITER)):
        m = rx.search(text)
        if m:
            parts.append(f"{name} {of(m)}")
    if not any(p.startswith(("step", "iteration")) for p in parts):
        m = _AT_MMCV.search(text) or _AT_BAR.search(text)
        if m:
            parts.append(("iteration " if parts else "bar at ") + of(m))
    return ", ".join(parts[:2])


_EXCERPT_FIX = ("# paste the log to its end: the launcher's exit lines, or the job's last 200 lines\n"
                "tail -n 200 train.log   # the end of the job's output, whatever it shows\n"
                "echo $?   # or: sacct -j JOBID --format=JobID,State,ExitCode   (the launcher's exit)\n"
                "ddpdoctor run -- torchrun ...   # or run the job under ddpdoctor: it records how the job ends\n"
                "ddpdoctor triage train.log   # again, on the whole log")

_RDZV_FIX = ("\n# a multi-node launch: the same torchrun line on every node, each able to reach the endpoint\n"
             "torchrun --nnodes N --nproc-per-node G --rdzv-backend c10d --rdzv-endpoint HOST:PORT --rdzv-id JOB train.py\n"
             "nc -zv HOST PORT   # from each other node: the endpoint is reachable\n"
             "LOGLEVEL=INFO torchrun ...   # the agent's rendezvous lines: which nodes joined")


@rule("LOG029", "health-not-shown")
def health_not_shown(job: Job):
    """The log shows no failure, and nothing that says the job ended well either: no end (training progress, if
    any, shows only that it ran up to its last progress line).

    What it checks
        Runs last. When no rule reports an error or a warning, and the log holds no sign that the job ended well
        (a trainer's "Training completed" or its final train metrics, Lightning's "`Trainer.fit` stopped:
        `max_epochs=N` reached.", torchelastic's "worker group successfully finished"), the report would say
        "No issues found!" on no evidence. An end line counts only when its stream does not go on to a new set-up
        and stop there (the Trainer's "Training completed", then DeepSpeed re-initialised to load the best model,
        and nothing after: the log stops in that later phase). This rule says instead what the log does show: its last line, how many
        lines it has, which ranks and launcher lines it shows, its latest time stamp (where the log stops in time),
        and, when it shows training progress, where that progress stops; and that no failure and no end were found. A log whose last line is progress "stops
        mid-training"; one whose last lines are distributed set-up (NCCL's INFO lines, a launcher's banner, a
        framework's start lines) "stops during the set-up"; a multi-node launch (`--nnodes 2`, `min_nodes : 2`) that
        shows nothing past torchrun's start is "likely waiting in the rendezvous" for the other nodes (a guess when no
        line shows the agent waiting there). Either is said as what the log shows, not as a
        failure: an excerpt pasted up to there ends the same way as a job that hung there, and a hang shows as a
        line after the stop (the launcher's signal, a watchdog timeout, a scheduler's cancel) that LOG028 or
        another rule reports. An excerpt of steady progress alone (a log of at most 64 KiB: five progress lines or
        more, the last ending the log, and no launcher line, exit, set-up line or failure line around them) is said as
        such: "no failure in this excerpt, and no end either: steady progress up to line N (epoch X), then the log
        stops", a warning (a failed job pasted up to its last progress line looks the same), whose fix is to paste
        the log to its end or run the job under `ddpdoctor run`.

    Why it matters
        "No issues found!" is a claim of health. A job that hung or was killed, pasted as the lines before the
        hang (a framework's start-up messages, library warnings, or its last progress bars), shows no failure
        because the failure is not in the excerpt (FedML-AI/FedML#121: a job stuck after its start-up lines;
        THUDM/slime#1497: a rollout bar at 100% and cache-flush lines, then a CUDA OOM the paste left out).
        Progress says the job ran up to a point, not that it ended. Calling it healthy sends the user away;
        saying what is missing sends them to the evidence.

    Example
        [FedML-Server @device-id-0] [INFO] [server_manager.py:40:run] running
        /usr/lib/python3/site-packages/tokenizers/__init__.py:12: UserWarning: ...
        (and nothing else: no progress, no error, no exit)

    Fix
        Collect the whole log of every rank (`torchrun --tee 3 --log-dir logs/`), the launcher's exit (its
        summary, or `echo $?`, `sacct -j JOBID`), and, if the job hangs, `ddpdoctor run -- torchrun ...`, which
        names the stuck rank and its line; then `ddpdoctor triage logs/` again.
    """
    if job.cache.get(REPORTED) or health_shown(job):
        return
    last = max(job.last_line.values(), key=lambda ln: (ln.src, ln.lineno), default=None)
    ranks = sorted(r for r in job.ranks if r is not None and r >= 0)
    exits = len(job.exits)
    shown = [f"{job.lines_read} line{'s' if job.lines_read != 1 else ''}"]
    shown.append(f"lines of rank{'s' if len(ranks) != 1 else ''} {', '.join(map(str, ranks[:16]))}" if ranks
                 else "no line that names a rank")
    shown.append(f"{exits} launcher exit record{'s' if exits != 1 else ''}" if exits
                 else "no launcher summary or exit code")
    if job.setup_lines:
        shown.append(f"{job.setup_lines} distributed set-up line{'s' if job.setup_lines != 1 else ''}")
    where = f"; the last (line {last.lineno}): {last.text.strip()[:160]}" if last is not None else ""
    stamp = job.last_stamped
    if stamp is not None and stamp.ts is not None:
        # where the log stops in time: its latest stamp a line printed itself (the cut, or the stop, is after it)
        shown.append(f"its latest time stamp {_fmt_ts(stamp.ts)} (line {stamp.lineno})")
    progress = job.last_progress
    setup = stopped_in_setup(job)
    again = setup_after_end(job) if ended_well(job) else None
    rdzv = rendezvous_wait(job) if progress is None else None
    severity = "warning"
    excerpt = False
    if again is not None:
        end = max((e.line for e in job.get("job_ended_well").first), key=lambda ln: (ln.src, ln.lineno))
        title = (f"the log stops in a set-up begun after its end line (line {end.lineno}): it cannot show that this "
                 "later phase ended")
        none = (f"its end line (line {end.lineno}: {end.text.strip()[:100]}) ends the training loop, and the lines "
                f"after it start something new (the last, line {again.lineno}, is a set-up line: loading the best "
                "model, re-initialising DeepSpeed or the framework), with nothing after that says it finished")
    elif progress is not None:
        # progress without an end: the job ran up to its last progress line; the log cannot say what came after
        shown.append(f"{job.progress_lines} progress line{'s' if job.progress_lines != 1 else ''} (steps, bars, loss "
                     f"lines), the last at line {progress.lineno}: {progress.text.strip()[:120]}")
        title = (f"the log shows progress up to line {progress.lineno}, but no end: it cannot show that the job "
                 "ended well")
        if stopped_mid_step(job):
            title = ("the log stops mid-training: no error, and no sign that the job ended (an excerpt that ends "
                     "here shows no failure either)")
            if _PREP_BAR.match(progress.text):
                title = ("the log stops in the data preparation (its last progress bar is a dataset or checkpoint-"
                         "loading bar, not training's): no error, and no sign that the job got further")
            elif progress_excerpt(job):
                # a warning (round 16, the lead's decision on issue 24): "never call a failed job healthy"; an excerpt
                # that stops mid-run shows neither a failure nor an end, so the job's fate is unknown (b80_09, b82_12,
                # b102_11 were failed jobs pasted this way, 43 others healthy: nothing in the excerpt tells them apart)
                excerpt = True
                at = progress_at(progress.text)
                title = (f"no failure in this excerpt, and no end either: steady progress up to line {progress.lineno}"
                         + (f" ({at})" if at else "") + ", then the log stops")
        none = ("nothing says the job ended (no 'Training completed', no final train metrics, no launcher exit 0): "
                "progress shows that it ran up to its last progress line, not what came after")
    elif rdzv is not None:
        n, asked, guess = rdzv
        launcher = launcher_in(asked)
        whose = f"{launcher}'s" if launcher != "the launcher" else "the launcher's"
        title = (f"the log stops after {whose} start on a {n}-node launch: likely waiting in the rendezvous for the "
                 f"other node{'s' if n > 2 else ''} to join{' (a guess: only the start banner shows it)' if guess else ''}")
        if launcher in ("torchrun", "torch.distributed.launch"):
            none = (f"line {asked.lineno} asks for {n} nodes ({asked.text.strip()[:100]}), and no line after the agent's "
                    "start says the rendezvous completed, a worker started, NCCL set up or training progressed. torchrun's "
                    "agent waits in the rendezvous, printing nothing, until every node has joined (then a "
                    "RendezvousTimeoutError after the join timeout, 600 s by default, or the static store's 'Timed out ... "
                    "waiting for clients'): a launch started on one node only, or nodes that cannot reach the "
                    "--rdzv-endpoint / MASTER_ADDR:PORT, shows exactly this")
        else:
            # another launcher (round 18, issue 24): its ranks wait in init_process_group's store (TCPStore waits for
            # world_size ranks) rather than in torchrun's elastic rendezvous; the log shows which program it was
            none = (f"line {asked.lineno} asks {launcher} for {n} nodes ({asked.text.strip()[:100]}), and no line after it "
                    "says the process group was set up, a worker started, NCCL set up or training progressed. The ranks "
                    "of a multi-node launch wait in init_process_group, printing nothing, until every node's ranks have "
                    "reached its store (then a timeout after init_process_group's timeout): a launch started on one "
                    "node only, or nodes that cannot reach the address it was given, shows exactly this")
        if setup is not None:
            shown.append(f"the last set-up line at line {setup.lineno}")
    elif setup is not None:
        title = ("the log stops during the distributed set-up: nothing after it says the job got further"
                 if setup_is_last(job, setup) else
                 "the log stops after the set-up: no line shows training progress, an error, or an end")
        none = (f"its last set-up line (line {setup.lineno}: setting up the process group, NCCL's communicators or "
                "the framework) has no training progress, error or end after it. If the job was stuck there, it "
                "hung in the set-up or the first collective (a rank that did not start or cannot connect, a "
                "peer-to-peer transport that stalls behind PCIe ACS, a firewall between nodes)")
        shown.append(f"the last set-up line at line {setup.lineno}")
    else:
        title = "the log cannot show that the job is healthy: no failure, but no end or progress either"
        none = ("nothing says the job ended well or trained either (no launcher exit 0, no 'Training completed', no "
                "step or progress line)")
    yield hit(job, severity, title,
              at=last, stage=4, ranks=ranks,
              detail=("Nothing in this log is a failure that ddpdoctor reads (a traceback, an error line, a non-zero "
                      "exit, a signal), but " + none + ". It shows " + ", ".join(shown) + where + ". "
                      "If the job failed or hung, its failure is not in these lines: an excerpt cut before it, or "
                      "a rank whose output is elsewhere. A log that simply ends is not evidence of a hang either: "
                      "a hang shows as a line after the stop (the launcher's signal, a watchdog timeout, a "
                      "scheduler's cancel), and none is here. This is not a finding of health."),
              fix=(_EXCERPT_FIX if excerpt else
                   "torchrun --tee 3 --log-dir logs/ ...   # the whole output of every rank\n"
                   "echo $?   # or: sacct -j JOBID --format=JobID,State,ExitCode   (the launcher's exit)\n"
                   "ddpdoctor run -- torchrun ...   # if it hangs: names the stuck rank and its line\n"
                   "ddpdoctor triage logs/   # again, with every rank's log and the launcher's"
                   + ("\nNCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL torchrun ...   # how far each rank's NCCL got"
                      if setup is not None and progress is None and rdzv is None else "")
                   + (_RDZV_FIX if rdzv is not None else "")),
              evidence={"last_line": first_seen(job, last), "lines_read": job.lines_read, "ranks_seen": ranks,
                        "last_stamp": (_fmt_ts(stamp.ts) if stamp is not None and stamp.ts is not None else None),
                        "launcher_exits": exits, "setup_lines": job.setup_lines, "progress_lines": job.progress_lines,
                        "last_progress": first_seen(job, progress) if progress is not None else None,
                        "last_setup_line": first_seen(job, setup) if setup is not None else None,
                        "ended_well": False, "rendezvous_nodes": rdzv[0] if rdzv is not None else None})
