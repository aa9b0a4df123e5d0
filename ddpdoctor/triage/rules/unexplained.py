"""Never silent about a failure: when the logs show that something failed and no rule explains it, say so, with
each rank's first failure line, and what to collect next. "No issues found!" then means what it says: the
logs show the job ended well, or nothing in them says otherwise."""
from __future__ import annotations

import re
from typing import List, Optional

from ..job import Job
from ..lines import Line
from ...facts import messages as catalogue
from ..verdict import INF, pos, survived_by_end
from . import first_seen, hit, ranks_text, rule

# What api.triage_paths stores before it runs this rule last: whether another finding (a rule's, or a relayed
# `ddpdoctor run` finding) already reports an error.
EXPLAINED = "explained_by_other_findings"


# Lines whose own words say what failed though they name no rank (wave 4 of round 14):
# - Open MPI's mpirun banner "Primary job  terminated normally, but 1 process returned / a non-zero exit code. Per
#   user-direction, the job has been aborted." (its wording as logs print it; the mpirun(1) man page of openmpi-bin 4.1,
#   https://manpages.ubuntu.com/manpages/noble/man1/mpirun.openmpi.1.html, "Process Termination / Signal Handling":
#   when a process exits abnormally mpirun prints an error and kills the rest; --tag-output prefixes each output line
#   with [jobid,MCW_rank]). The ompi sources are held out of this project's reading, so only the banner's words are used.
# - Apple Metal's "<file>.mm:N: failed assertion `...'" from MetalPerformanceShaders (MPSNDArray.mm, MPSCore): the
#   framework checked an MPS kernel's arguments and aborted the process; PyTorch's MPS backend passed them
#   (pytorch/pytorch#96153, fixed in a later torch; #95883, absent on the CPU device).
_MPI_BANNER = re.compile(r"Primary job\s+terminated normally, but (\d+) process(?:es)? returned|"
                         r"^\s*a non-zero exit code\.* Per user-direction, the job has been aborted")
_METAL_ASSERT = re.compile(r"(?:MetalPerformanceShaders|\bMPS\w*|\bMTL\w*)\S*\.mm:\d+: failed assertion `([^']{1,200})")


def _known_banner(line: Line, job: Optional[Job] = None):
    """(title, meaning, fix) for a failure line whose own words say what happened, or None."""
    m = _METAL_ASSERT.search(line.text)
    if m:
        return ("Apple Metal (MPS) aborted the process on a failed assertion: " + m.group(1)[:120],
                "MetalPerformanceShaders checked the arguments of a GPU kernel PyTorch's MPS backend launched and "
                "aborted the process (SIGABRT, no Python traceback). It is a bug or limit of the MPS backend for that "
                "operation and shape, not of the training script's distributed set-up; newer torch releases fix "
                "several (pytorch/pytorch#96153), and the same code runs on the CPU device.",
                "pip install -U torch   # or a nightly: several MPS assertions are fixed there\n"
                "# find the op: run with device='cpu' to confirm, then bisect the model's ops on 'mps'\n"
                "# report it with a small repro at github.com/pytorch/pytorch (label: module: mps)")
    m = _MPI_BANNER.search(line.text)
    if m:
        n = m.group(1) or "a"
        return (f"mpirun aborted the job: {n} process{'es' if n not in ('1', 'a') else ''} exited with a non-zero "
                "code (not on a signal), and the banner names no rank",
                "Open MPI's mpirun says a process it launched exited with a non-zero status ('terminated normally': "
                "it was not killed by a signal), and that it then aborted the other processes. The process's own "
                "error (a Python traceback, sys.exit(1)) is in its output before this banner, or in a part of the "
                "log not shown; mpirun's next lines ('The first process to do so was: Process name: [[jobid,1],RANK] "
                "Exit code: N') name its rank when printed.",
                "mpirun --tag-output ...   # every output line prefixed with [jobid,rank]: the failed rank's error is named\n"
                "mpirun --output-filename logs/ ...   # one file per rank")
    return _reported_death(line, job)


# Who reports a lost worker, node or job in the catalogue's process_died entries (round 16 wave 3): the entry's id
# prefix names the reporter; the title says what it reported (an orchestrator's status transition, Ray's worker or
# actor death), not a cause it does not give.
_REPORTERS = (("dlrover.", "DLRover's job master reported a node failed"),
              ("kubeflow.", "the Kubeflow training operator marked the job failed (a replica failed)"),
              ("ray.job_cli.", "the Ray job ended with status FAILED (its entrypoint exited non-zero)"),
              ("ray.", "Ray reported a worker process died (killed or crashed)"))


def _reported_death(line: Line, job: Optional[Job] = None):
    """(title, meaning, fix) for a catalogued process_died line (a worker, node or job lost, as its reporter says), or
    for a work_unit_failed_caught line: a framework that caught an exception in one unit of its work (an AutoML model's
    fit, an optuna trial) and went on; its end line after it ("Training complete. Models trained: []") is no health
    (round 24, issue 24: b217_16)."""
    for m in catalogue.match_all(line.text):
        if m.cls == "work_unit_failed_caught":
            # the exception is the cause: its own "Type: message" in the line (a group of the entry's pattern), else
            # the line after it, where AutoGluon logs str(e) without its type (Job.caught_message)
            f = m.fields
            said = (f"{f['exc']}: {f['message']}" if f.get("exc") and f.get("message") else f.get("error") or
                    (job.caught_message.get((line.src, line.lineno)) if job is not None else None))
            cause = f": {said.strip()[:140]}" if said else " (its message is on the line after it)"
            return ("a framework caught an exception in one unit of its work and skipped it" + cause
                    + "; an end line after it does not show the work succeeded", m.entry["meaning"], m.entry["fix"])
        if m.cls != "process_died":
            continue
        for prefix, title in _REPORTERS:
            if m.entry["id"].startswith(prefix):
                return title, m.entry["meaning"], m.entry["fix"]
    return None


# (and Open MPI's launcher naming the rank that exited without MPI_Finalize: "mpirun has exited due to process rank 2
# with PID 0 on" / "node H exiting improperly", help-orterun.txt [orterun:proc-exit-no-sync] as logs print it; round 21)
# (and LAMMPS's error of one MPI process: Error::one prints "ERROR on proc {me}: {message} ({file}:{line})", me its
# MPI_Comm_rank in the world, then MPI_Abort; Error::universe_one the same with the universe's rank: lammps/lammps
# src/error.cpp @e80bfa4a. Round 24, issue 24: b215_07, a deepmd TorchScript error on proc 34 of a LAMMPS run)
_OWN_RANK = re.compile(r"(?:\bfrom (?P<host>[\w.\-]+) )?\b(?:(?:with|on) rank(?: id)?[:=]? ?|exited due to process rank |"
                       r"(?<![\w-])ERROR on proc )(?P<rank>\d{1,6})\b")


def _launched_again(job: Job, fails: list):
    """The shell-prompt line that runs the launch again after every one of `fails` (failure lines, failed exits' lines),
    in their file, with none of them after it; else None."""
    if not fails or not job.relaunch or any(f is None for f in fails):
        return None
    srcs = {f.src for f in fails}
    if len(srcs) != 1:
        return None
    again = job.relaunch.get(srcs.pop())
    if again is None or any(f.lineno >= again.lineno for f in fails):
        return None
    return again


def _env_rank(job: Job, line: Line) -> Optional[int]:
    """The rank a file's unranked failure line is, from the RANK variable its process printed before it ("RANK=1 --
    LOCAL_RANK=0": torchrun's agent sets RANK to the worker's global rank): only where the file's only such lines name
    one rank, the first of them before the failure line, and nothing says that more processes wrote the file (two
    workers printing would claim two ranks). Else None."""
    claims = job.env_ranks.get(line.src)
    if not claims or len(claims) != 1 or job.many_writers(line.src):
        return None
    (rank, claim), = claims.items()
    return rank if claim.lineno < line.lineno else None


def failure_lines(job: Job) -> List[tuple]:
    """(rank or None, host, line) of each stream's first failure line, earliest first (time, then log order)."""
    out = []
    fails = dict(job.first_fail)
    for key, (first, n) in job.headless_frames.items():
        if key in fails:
            continue
        if n >= 2 or _ends_inside_traceback(job, key):
            fails[key] = first   # a traceback cut above its header and below its last frame: still a traceback
    for (src, who), line in fails.items():
        rank = job.who(line)
        host = line.host or (job.rank_host.get(rank) if rank is not None else None)
        own = _OWN_RANK.search(line.text) if rank is None else None
        if own:
            # a failure line that names its own process ("Raise exception from node-7 with rank id: 2", "error on
            # rank 3"): that rank, and that host, said by the line itself
            rank, host = int(own.group("rank")), host or own.group("host")
        if rank is None:
            rank = _env_rank(job, line)
        if rank is None:
            said = job.prose_rank(line)
            if said is not None:
                rank = said[0]
                job.cache.setdefault("prose_rank", {})[(line.src, line.lineno)] = said[1]
        out.append((rank, host, line))
    # a traceback's header pasted without the prefix its frames carry ("Traceback (most recent call last):" then
    # "[rank2]:   File ..."): the header is that rank's, not a process of its own
    ranked_at = {(ln.src, ln.lineno): i for i, (r, _h, ln) in enumerate(out) if r is not None}
    for i, (rank, host, line) in enumerate(out):
        j = ranked_at.get((line.src, line.lineno + 1))
        if rank is None and j is not None and "Traceback (most recent call" in line.text:
            r, h, _ln = out[j]
            out[j] = (r, h or host, line)
            out[i] = None
    out = [t for t in out if t is not None]
    out.sort(key=lambda t: (t[2].ts if t[2].ts is not None else INF, pos(t[2])))
    return out


# What a traceback prints under a frame: its source line, indented, and the carets under it (python >= 3.11)
_TB_BODY_LINES = 3


def _ends_inside_traceback(job: Job, key: tuple) -> bool:
    """One frame without its header, and its stream ends within the frame's own lines (its source line, the
    carets, a message cut short): a traceback cut at both ends. A lone frame that output follows is not."""
    frame, last = job.last_headless_frame.get(key), job.last_line.get(key)
    return (frame is not None and last is not None and last.src == frame.src
            and 0 <= last.lineno - frame.lineno <= _TB_BODY_LINES)


def cut_in_traceback(job: Job, line: Line) -> Optional[Line]:
    """The last frame of the traceback the stream of `line` ends in, its exception line cut (the log's last lines are
    that frame's own: its source line, the carets; or the rest of rich's box under it), else None."""
    key = job._stream(line)
    last, frame = job.last_line.get(key), job.last_frame.get(key)
    if last is None or frame is None or last.src != frame.src or frame.lineno < line.lineno:
        return None
    box = job.last_headless_frame.get(key)
    if 0 <= last.lineno - frame.lineno <= _TB_BODY_LINES or (box is not None and box is last and box.text[:1] == "│"):
        return frame
    return None


def ended_well(job: Job) -> bool:
    occ = job.get("job_ended_well")
    return bool(occ and occ.count)


def stopped_mid_step(job: Job) -> bool:
    """The log's last lines are training progress and nothing says the job ended: it stopped mid-step."""
    if not job.progress_lines or ended_well(job):
        return False
    last = max(job.last_line.values(), key=lambda ln: (ln.src, ln.lineno), default=None)
    if last is None:
        return False
    from ..job import is_progress

    return is_progress(last.text)


def stopped_in_setup(job: Job):
    """The log's last line is distributed set-up (NCCL's INFO lines, a framework's "initializing" line) and nothing
    shows progress or an end: the last set-up line, else None."""
    if not job.setup_lines or job.progress_lines or ended_well(job):
        return None
    last = max(job.last_line.values(), key=lambda ln: (ln.src, ln.lineno), default=None)
    if last is None:
        return None
    # the last set-up line of the stream that ends the log, else of any stream: what follows it (warnings, a
    # framework's own preparation lines) shows no progress either
    setup_last = job.last_setup.get(max(job.last_line, key=lambda k: (job.last_line[k].src, job.last_line[k].lineno)))
    if setup_last is None:
        setup_last = max(job.last_setup.values(), key=lambda ln: (ln.src, ln.lineno), default=None)
    return setup_last


def setup_is_last(job: Job, setup: Line) -> bool:
    last = max(job.last_line.values(), key=lambda ln: (ln.src, ln.lineno), default=None)
    return last is not None and (last.src, last.lineno) == (setup.src, setup.lineno)


@rule("LOG028", "unexplained-failure")
def unexplained_failure(job: Job):
    """The logs show a failure that no rule explains: each rank's first failure line, in time or log order, with
    its rank and host, and what to collect next.

    What it checks
        Signs of failure: a traceback (also one a paste cut above its header), a non-zero exit or a signal in a
        launcher's summary, `Killed`, a C++ `terminate called`, an `NCCL WARN` line that NCCL then traces back as
        an error (`init.cc:1079 -> 3`), an error line in a rank's output, or a framework's caught exception in one
        unit of its work (AutoGluon's "Exception caused M to fail during training... Skipping this model.", optuna's
        "Trial N failed with parameters: ... because of the following error", Ray Tune's "Number of errored trials:
        N" with its table's first trial and error file: ray python/ray/tune/experimental/output.py), which an end line
        after it does not make healthy ("Training complete. Models trained: []"); such a report is its stream's
        failure line where the line before it failed by its words alone ("Trial status: 1 ERROR"). The rank is the line's prefix, else the rank the line
        names ("error on rank 3", LAMMPS's "ERROR on proc 34:"), else the RANK=N its process printed earlier in a
        file that claims no other rank. (A log that only stops, mid-training
        or in the set-up, with nothing after it, is LOG029's: an excerpt ends the same way.) When one is
        there and no other finding reports an error, this rule reports them as an unexplained failure (a
        warning), instead of "No issues found!". It runs after the other rules.

    Why it matters
        A doctor that calls a failed job healthy is worse than none: a failure no rule knows is still a
        failure, and its first line on each rank is where to start (pytorch/pytorch#118369 is about finding
        which rank failed first).

    Example
        [rank1]: RuntimeError: Something the rules do not know
        E0624 16:39:03.239000 140 torch/distributed/elastic/multiprocessing/api.py:833] failed (exitcode: 1)
        local_rank: 1 (pid: 4242) of binary: /usr/bin/python3

    Fix
        Read the first failure line named for each rank; collect what is missing: every rank's full output
        (`torchrun --tee 3 --log-dir logs/`), tracebacks in torchrun's table (`@record`), `dmesg -T` on the
        node of a rank killed by a signal, `NCCL_DEBUG=INFO` for NCCL warnings, `ddpdoctor run -- ...` for a hang.
    """
    if job.cache.get(EXPLAINED):
        return
    from .timeouts import horovod_stall
    stalled = {(e.line.src, e.line.lineno) for e in horovod_stall(job)}
    # Horovod's stall report is LOG001's (a warning: the job may get past it), not a failure of its own
    lines = [t for t in failure_lines(job) if (t[2].src, t[2].lineno) not in stalled]
    bad_exits = [e for e in job.exits if (e.code not in (None, 0)) or e.signal]
    # A log that only stops (on a progress line, or in the set-up) shows no failure: an excerpt pasted up to there
    # ends the same way as a job that hung there. That note is LOG029's ("the log cannot show that the job is
    # healthy"), not a failure of this rule's: evidence of a hang is a line after the stop (the launcher's signal,
    # a watchdog timeout, a scheduler's cancel, a KeyboardInterrupt), and such a line is a failure line here.
    if not lines and not bad_exits:
        return
    wheres = [t[2] for t in lines] + [e.where for e in bad_exits]
    first = wheres[0]

    def earlier_attempt(title_tail: str, detail_tail: str):
        # every failure line and failed exit comes before something that shows the job went on as another run: a note
        return hit(job, "info", f"failure lines of an earlier attempt (line {first.lineno}): {title_tail}", at=first,
                   stage=4, ranks=[t[0] for t in lines if t[0] is not None],
                   detail=f"The first failure line (line {first.lineno}: {first.text.strip()[:160]}) and every failed "
                          f"exit come before {detail_tail}",
                   fix=_collect(job, hang=False))

    ends = [survived_by_end(job, w) for w in wheres]
    if ends and all(ends):
        # a run that trained and ended in the same file (a failed first attempt, then a retry that ran to its end)
        yield earlier_attempt(
            f"a later run in this log trained and ended (line {ends[-1].lineno})",
            f"training progress and an end line (line {ends[-1].lineno}: {ends[-1].text.strip()[:100]}), with no "
            "process ending badly after that end: the job survived them (a failed attempt, then a retry that ran to "
            "its end).")
        return
    again = _launched_again(job, wheres)
    if again is not None:
        # a shell prompt that runs the launch again (a mistyped or failed attempt, then the command typed again):
        # that attempt is not the job that the rest of the log shows
        yield earlier_attempt(
            f"the launch was run again at line {again.lineno}",
            f"a shell prompt that runs the launch again (line {again.lineno}: {again.text.strip()[:120]}). The lines "
            "after it are the job's; what they show (or do not show) is the job's state, not this earlier attempt's "
            "error.")
        return
    went_on = [job.went_on_after(t[2]) for t in lines] if not bad_exits else []
    if went_on and all(went_on):
        # every process went on training after its error-looking line and nothing later says the job failed: lines a
        # library logs and recovers from (a PMIx unpack error, a CUDA probe on a machine that trains on the CPU), not
        # a process failing. Said as a warning of its own (no "unexplained failure": nothing shows one)
        rank, host, line = lines[0]
        yield hit(job, "warning", f"error lines the job went on from: {'rank ' + str(rank) if rank is not None else 'a process'}"
                  f" printed one (line {line.lineno}) and kept training (line {went_on[0].lineno})", at=line, stage=4,
                  ranks=[t[0] for t in lines if t[0] is not None], hosts=[t[1] for t in lines if t[1]],
                  detail=(f"No rule knows these lines, and the process that printed each went on training after it, "
                          f"with nothing later in the log saying the job failed. If the job did fail, the lines "
                          f"after this excerpt say how; else they are noise to read once: {line.text.strip()[:160]}"),
                  fix=_collect(job, hang=False))
        return
    kept = job_went_on(job, [t[2] for t in lines]) if lines and not bad_exits else None
    if kept is not None:
        # the job as a whole went on after every unexplained line (training progress after them, then an end that says
        # success, or progress running on to the end of the log well past them): reported as unexplained, with its
        # evidence, at warning (the principle "a failure no rule explains is reported as unexplained, with its
        # evidence"), and never as the failure of a job the log shows going on (round 16 wave 4)
        progress, end = kept
        rank, host, line = lines[0]
        who = f"rank {rank}" if rank is not None else "a process"
        how = (f"then ended well (line {end.lineno}: {end.text.strip()[:100]})" if end is not None else
               "and the log ends on that progress")
        rows = [{"rank": r, "host": h, **first_seen(job, ln)} for r, h, ln in lines[:16]]
        yield hit(job, "warning", f"unexplained error line the job went on after: {who} printed it (line {line.lineno}); "
                  f"training went on to line {progress.lineno}" + (f" and ended well (line {end.lineno})" if end else ""),
                  at=line, stage=4, ranks=[t[0] for t in lines if t[0] is not None], hosts=[t[1] for t in lines if t[1]],
                  detail=(f"No rule knows this line ({line.text.strip()[:160]}), and the job went on after it: training "
                          f"progress followed (up to line {progress.lineno}), {how}, with no process ending badly and "
                          "no failure line after that progress. It did not stop the job; if it cost something (a "
                          "skipped batch, a retried connection), the lines around it say what."),
                  fix=_collect(job, hang=False),
                  evidence={"first_failure_lines": rows, "went_on_at": progress.lineno,
                            "ended_at": end.lineno if end is not None else None})
        return
    rows = []
    for rank, host, line in lines[:16]:
        fs = first_seen(job, line)
        rows.append({"rank": rank, "host": host, **fs})
    if not rows:
        for e in bad_exits[:16]:
            fs = first_seen(job, e.where) if e.where is not None else {}
            rows.append({"rank": e.rank, "host": e.host, **fs})
    first = rows[0]
    who = (f"rank {first['rank']}" if first.get("rank") is not None else "a process") + \
          (f" on {first['host']}" if first.get("host") else "")
    ranks = sorted({r["rank"] for r in rows if r.get("rank") is not None})
    detail = (f"Something failed and no rule here knows the cause. The first failure line of each rank, in "
              f"{'time' if any('time' in r for r in rows) else 'log'} order: " + "; ".join(
                  f"{'rank ' + str(r['rank']) if r.get('rank') is not None else 'no rank'}"
                  f"{' on ' + r['host'] if r.get('host') else ''} at line {r.get('line', '?')}"
                  f"{' (' + r['time'] + ')' if r.get('time') else ''}: {str(r.get('text', ''))[:160]}"
                  for r in rows[:8]) + ".")
    cut = cut_in_traceback(job, lines[0][2]) if lines else None
    if cut is not None:
        detail += (f" The log ends inside that traceback, its exception line cut: the last frame shown (line "
                   f"{first_seen(job, cut)['line']}): {cut.text.strip()[:200]}. The exception it raised is in the "
                   "lines after it (the whole output of that process).")
    if bad_exits:
        detail += " Exits: " + ", ".join(
            f"{'rank ' + str(e.rank) if e.rank is not None else ('local rank ' + str(e.local_rank) if e.local_rank is not None else 'a process')} "
            f"{e.signal or 'exit ' + str(e.code)}" for e in bad_exits[:8]) + "."
    line = None
    if lines:
        line = lines[0][2]
    elif bad_exits and bad_exits[0].where is not None:
        line = bad_exits[0].where
    at_line = f" (line {first['line']})" if first.get("line") else ""
    guessed = job.cache.get("prose_rank", {}).get((line.src, line.lineno)) if line is not None else None
    guess = (f" (rank {first['rank']} is a guess: the reporter's words name it, line {guessed.lineno}, and the "
             "failure line names none)") if guessed is not None and first.get("rank") is not None else ""
    known = (_known_banner(line, job) if line is not None and (first.get("rank") is None or guess) else None)
    if known:
        title, meaning, fix = known
        yield hit(job, "warning", f"unexplained failure: {title}{at_line}{guess}", at=line, stage=4, ranks=ranks,
                  hosts=[r["host"] for r in rows if r.get("host")], detail=meaning + " " + detail,
                  fix=fix + "\n" + _collect(job, hang=bool(job.timeout_table())),
                  evidence={"first_failure_lines": rows, "failed_ranks": ranks_text(ranks) if ranks else None})
        return
    yield hit(job, "warning", f"unexplained failure: {who} failed first{at_line}, and no rule knows why{guess}", at=line, stage=4,
              ranks=ranks, hosts=[r["host"] for r in rows if r.get("host")], detail=detail,
              fix=_collect(job, hang=bool(job.timeout_table())),
              evidence={"first_failure_lines": rows, "failed_ranks": ranks_text(ranks) if ranks else None})


# How close to its file's end the last progress line must be for "the log ends on that progress", and how many
# progress lines must follow the failure line for the job to have gone on "well past" it (the last 3 progress lines
# of one stream, job.stream_progress_tail, all after it)
_END_TAIL_LINES = 3
_PROGRESS_AFTER = 3


def job_went_on(job: Job, fails: List[Line]):
    """(last progress line, end line or None) when the job visibly went on after every one of `fails`: in each one's
    file, training progress after it, no process ending badly, no stream's first failure line after that progress, and
    then either an end that says success (job_ended_well, a clean exit) after the progress, or the progress running on
    to the file's end, 3 progress lines or more past the failure line. Else None (the line stays an error)."""
    if not fails or any((e.code not in (None, 0)) or e.signal for e in job.exits):
        return None
    occ = job.get("job_ended_well")
    ended = [e.line for e in occ.first] if occ and occ.count else []
    ended += [e.where for e in job.exits if e.code == 0 and not e.signal and e.where is not None]
    out = None
    for f in fails:
        after = [p for p in job.stream_progress.values() if p.src == f.src and p.lineno > f.lineno]
        if not after:
            return None
        lp = max(after, key=lambda ln: ln.lineno)
        if any(pos(ff) > pos(lp) for ff in job.first_fail.values()):
            return None
        ends = [e for e in ended if e.src == f.src and e.lineno > lp.lineno]
        end = max(ends, key=lambda ln: ln.lineno) if ends else None
        if end is None:
            last = max((ln.lineno for k, ln in job.last_line.items() if k[0] == f.src), default=None)
            past = any(k[0] == f.src and len(t) >= _PROGRESS_AFTER and min(t) > f.lineno
                       for k, t in job.stream_progress_tail.items())
            if last is None or last - lp.lineno > _END_TAIL_LINES or not past:
                return None
        if out is None or pos(lp) > pos(out[0]):
            out = (lp, end)
    return out


def _collect(job: Job, hang: bool = False) -> str:
    """What to collect next, from what the logs lack."""
    out = []
    tb = job.get("exception")
    if not (tb and tb.count):
        out.append("torchrun --tee 3 --log-dir logs/ ...   # every rank's full output, tracebacks included")
        out.append("# and decorate main() with torch.distributed.elastic.multiprocessing.errors.record")
    if any(e.signal in ("SIGKILL", "SIGSEGV", "SIGBUS", "SIGABRT") for e in job.exits) or job.has("shell_killed"):
        hosts = sorted({e.host for e in job.exits if e.host}) or ["that node"]
        out.append(f"dmesg -T | grep -iE 'killed process|out of memory|xid|segfault'   # on {', '.join(hosts[:3])}")
    if job.has("nccl_warn") or job.has("nccl_version"):
        out.append("NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET torchrun ...   # NCCL's own account of the failure")
    if hang:
        out.append("ddpdoctor run -- torchrun ...   # names a stuck rank and its line while it hangs")
    out.append("ddpdoctor triage logs/   # again, with the logs of every node")
    return "\n".join(out)
