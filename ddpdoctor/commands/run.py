"""`ddpdoctor run [OPTIONS] -- COMMAND [ARGS...]`: the click command. Validates, runs the
supervisor, renders, exits with the job's own status."""
from __future__ import annotations

import os
import shutil
import sys

import click

from .common import UsageError


@click.command("run", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--stall-after", type=float, default=None, metavar="SECONDS",
              help="Report a stall after this long without progress on any rank. "
                   "[default: max(60 s, 10 x the median step); before the first step only when ranks are apart]")
@click.option("--on-stall", type=click.Choice(["report", "stop"]), default="report", show_default=True,
              help="After reporting a stall: let the job run on, or end it (every process, no orphans).")
@click.option("--report", "report_path", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Also write the JSON report (with a `run` section) to FILE.")
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Write a Chrome/Perfetto trace of the job: every rank's steps and their split, its last "
                   "collectives, the stall, the straggler, the deaths and the kill. The split is then measured "
                   "on every step, not sampled.")
@click.option("--grace", type=float, default=10.0, show_default=True, metavar="SECONDS",
              help="Between SIGTERM and SIGKILL when ending the job.")
@click.option("--store", "store", default=None, metavar="HOST:PORT",
              help="Multi-node: where the nodes' runs meet for the job-wide verdict. "
                   "[default: the rendezvous endpoint's host, port + 1]")
@click.option("--measure-steps", is_flag=True,
              help="Let the added DoctorCallback also time the first 20 steps (it then keeps a DDP comm hook).")
@click.option("--no-preflight", is_flag=True, help="Do not run preflight in the ranks nor add DoctorCallback.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def command(stall_after, on_stall, report_path, trace_path, grace, store, measure_steps, no_preflight, command):
    """Run your own launch command with ddpdoctor attached to every rank: a stall is localized to
    the rank and the line, a death to its first cause. Exits with the job's status.

    \b
    ddpdoctor run -- torchrun --nproc-per-node 8 train.py
    ddpdoctor run --stall-after 120 --on-stall stop --report run.json -- python train.py
    """
    argv = list(command)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        raise UsageError("no command to run: ddpdoctor run [OPTIONS] -- COMMAND [ARGS...]")
    if argv[0].startswith("-"):
        raise UsageError(f"no such option for `ddpdoctor run`: {argv[0]} (its options go before `--`; the JSON "
                         "report: --report FILE; `ddpdoctor run --help` lists them)")
    if stall_after is not None and not stall_after > 0:
        raise UsageError(f"--stall-after must be > 0, not {stall_after:g}")
    if grace < 0:
        raise UsageError(f"--grace must be >= 0, not {grace:g}")
    if shutil.which(argv[0]) is None:
        raise UsageError(f"command not found: {argv[0]}")
    if report_path:
        _check_writable(report_path)
    if trace_path:
        _check_writable(trace_path, "the trace")
    endpoint = None
    if store:
        host, _, port = store.rpartition(":")
        if not host or not port.isdigit():
            raise UsageError(f"--store must be HOST:PORT, not {store!r}")
        from ..run.multinode import endpoint_from_argv

        nnodes = (endpoint_from_argv(argv) or (None, None, 2))[2]
        endpoint = (host, int(port), nnodes)
    from ..run.supervisor import Supervisor

    sup = Supervisor(argv, stall_after=stall_after, on_stall=on_stall, grace_s=grace, preflight=not no_preflight,
                     store_endpoint=endpoint, measure_steps=measure_steps, split_every=1 if trace_path else 0)
    status = sup.run()
    # After the job: ddpdoctor's own failure (a run section it cannot build from a garbled beacon, a trace, closing
    # the run directory, the summary) is said as ours (stderr + DOC004) and never replaces the job's exit status by
    # 3 (design.md: the doctor never changes the job's exit status; DOC004 says the status is the job's own)
    try:
        try:
            report = build_report(sup)
        except Exception as exc:  # noqa: BLE001 - ours, after the job ended
            report = _report_after_own_error(sup, "building the report", exc)
        if trace_path:
            _ours_after_the_job(sup, "writing the trace", _write_trace, sup, report, trace_path)
    finally:
        if not _ours_after_the_job(sup, "closing the run directory", sup.remove_run_dir):
            if getattr(sup, "run_dir", None) and not os.environ.get("DDPDOCTOR_RUN_KEEP"):
                shutil.rmtree(sup.run_dir, ignore_errors=True)   # what remove_run_dir did not get to
    _ours_after_the_job(sup, "writing the summary", _summary, sup, report)
    if report_path:
        from ..pipeline.render import render_json

        from ..model.inputs import open_output

        try:
            with open_output(report_path) as fh:   # a FIFO without a reader: an error after the idle bound, not a hang
                fh.write(render_json(report) + "\n")
        except OSError as exc:
            click.echo(f"ddpdoctor run: cannot write {report_path}: {exc.strerror or exc}", err=True)
    sys.exit(status)


def _ours_after_the_job(sup, phase: str, fn, *args) -> bool:
    """fn(*args); ddpdoctor's own exception in it (after the job ended) said on stderr and kept for DOC004
    (Supervisor.own_error), never raised: the job's exit status stands. False when it raised. DDPDOCTOR_DEBUG=1
    raises it (cli's rule for a traceback)."""
    try:
        fn(*args)
        return True
    except Exception as exc:  # noqa: BLE001
        if os.environ.get("DDPDOCTOR_DEBUG"):
            raise
        sup.own_error(phase, exc)
        return False


def _report_after_own_error(sup, phase: str, exc: BaseException):
    """The report when build_report itself failed (ddpdoctor's bug, after the job ended): what the supervisor
    found and DOC004 for each of its own errors, this one included, with the job's exit status; no run section
    (the part that raised)."""
    if os.environ.get("DDPDOCTOR_DEBUG"):
        raise exc
    sup.own_error(phase, exc)
    from ..run.report import RunReport

    report = RunReport(command="run")
    report.findings.extend(list(getattr(sup, "findings", None) or []))
    report.findings.extend(own_failures(sup, {"ranks": []}))
    report.checks_run = len({f.id for f in report.findings})
    report.extra["run"] = {"exit_status": sup.exit_status(),
                           "incomplete": f"ddpdoctor's own error while {phase}: {type(exc).__name__}: {str(exc)[:300]}"}
    return report


def _write_trace(sup, report, path: str) -> None:
    from ..run import trace

    try:
        trace.write_trace(path, sup.t_start, trace.job_ranks(sup), trace.event_list(sup),
                          host=os.uname().nodename)
        report.extra["run"]["trace"] = path
        click.echo(f"ddpdoctor run: trace written to {path} (open it in https://ui.perfetto.dev or chrome://tracing)",
                   err=True)
    except OSError as exc:
        click.echo(f"ddpdoctor run: cannot write the trace {path}: {exc.strerror or exc}", err=True)


def _check_writable(path: str, what: str = "the report") -> None:
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise UsageError(f"cannot write {what} to {path}: it is a directory")
    if not os.path.isdir(directory):
        raise UsageError(f"cannot write {what} to {path}: no such directory {directory}")
    if os.path.exists(path) and not os.access(path, os.W_OK) or not os.access(directory, os.W_OK):
        raise UsageError(f"cannot write {what} to {path}: permission denied")


def build_report(sup):
    from ..model import Finding

    from ..pipeline.judge import judge
    from ..pipeline.snapshot import Snapshot
    from ..run.report import RunReport

    report = RunReport(command="run")  # root cause first: what the job did before what its environment risks
    report.findings.extend(sup.findings)
    run_sec = sup.run_section()
    if not sup.procs:
        sec = {"attached": False, "argv0": sup.argv[0] if sup.argv else None, "events": sup.events,
               "exit_status": sup.exit_status()}
        report.findings.extend(judge(Snapshot(sections={"run": sec}), command="run", only={"RUN012"}, when="run").findings)
    # the launch itself: `accelerate launch --num_processes N` that starts one process (RUN025)
    report.findings.extend(judge(Snapshot(sections={"run": run_sec}), command="run", only={"RUN025"}, when="run").findings)
    # the job's pace: every rank waiting for its batches (RUN029), in collectives (RUN030) or in the loop's own code
    # (RUN031) most of the step, judged over the whole job's split (once: a verdict of the supervisor's is not repeated)
    seen = {(f.id, tuple(f.subjects)) for f in report.findings}
    report.findings.extend(f for f in judge(Snapshot(sections={"run": run_sec}), command="run", only=set(PACE_IDS),
                                            when="run").findings if (f.id, tuple(f.subjects)) not in seen)
    # a failed job that no stall or death finding explains is said to be unexplained (never "no stall, no death")
    unexplained = judge(Snapshot(sections={"run": run_sec}), command="run", only={"RUN022"}, when="run").findings
    own = own_failures(sup, run_sec)
    if any(f.evidence.get("phase") == "inside a rank" for f in own):
        unexplained = []  # ddpdoctor's own failure in a rank explains the job's failure (DOC004): ours, not the job's
    text = sup.job_output() if unexplained else ""
    told = rendezvous_unfilled(sup, run_sec, text) if unexplained else []
    told = told or (from_job_output(text) if unexplained else [])
    if told and told[0].id == "RUN024":  # the launch's rendezvous never filled: said with its nodes (RUN024)
        report.findings[:0] = told
    elif told:  # the job's own words explain it: their findings, root cause first, in RUN022's place
        run_sec["from_job_output"] = [f.id for f in told]
        report.findings[:0] = told
    else:
        report.findings.extend(unexplained)
    seen = {(f.id, tuple(f.subjects)) for f in report.findings}
    for f in sup.preflight_findings():
        key = (f.get("id"), tuple(f.get("subjects") or ()))
        if key in seen or not f.get("id"):
            continue
        seen.add(key)
        try:
            report.findings.append(Finding(f["severity"], f.get("title", ""), detail=f.get("detail", ""),
                                           fix=f.get("fix", ""), subjects=f.get("subjects") or (),
                                           evidence=f.get("evidence") or {}, id=f["id"], name=f.get("name", ""),
                                           family="preflight"))
        except (KeyError, ValueError):
            continue
    report.findings.extend(own)
    report.checks_run = len({f.id for f in report.findings})
    report.extra["run"] = run_sec
    return report


def own_failures(sup, run_sec: "dict | None" = None) -> list:
    """DOC004 for each failure of ddpdoctor run's own code (Supervisor.own_errors): ours, with the phase, the
    exception and the traceback; no rank subject (no rank did it), and never RUN022's "the job failed"."""
    from ..checks.doc import RUN_OWN_FAILED
    from ..model import Finding
    from ..run import stacks

    out = []
    for r in (run_sec if run_sec is not None else sup.run_section()).get("ranks") or []:
        end = r.get("end") or {}
        if not end.get("ours"):
            continue
        exc = end.get("exception") or {}
        frames = stacks.traceback_frames(exc.get("traceback") or "")
        where = f"{os.path.basename(frames[0]['file'])}:{frames[0]['line']} in {frames[0]['func']}" if frames else None
        out.append(Finding("warning", f"ddpdoctor's own code failed inside rank {r.get('rank')}: {exc.get('type')}: "
                                      f"{str(exc.get('message') or '')[:300]}",
                           detail=("ddpdoctor run's recorder, injected into the rank, raised it: a bug of ddpdoctor, not "
                                   "of your code or of this rank, though it ended the rank." +
                                   (f" Raised at {where}." if where else "") +
                                   " The job would have run without it: run it without ddpdoctor meanwhile."),
                           fix="Report it at the ddpdoctor issue tracker with the JSON report (--report FILE) attached: "
                               "its evidence holds the traceback; run the job without `ddpdoctor run` meanwhile",
                           subjects=[], evidence={"phase": "inside a rank", "rank": r.get("rank"), "pid": r.get("pid"),
                                                  "traceback": exc.get("traceback")}
                           ).stamped(RUN_OWN_FAILED.id, RUN_OWN_FAILED.slug, "internal"))
    for e in getattr(sup, "own_errors", None) or []:
        out.append(Finding("warning", f"ddpdoctor run's own code failed while {e['phase']}: {e['type']}: {e['message']}",
                           detail=("A bug of ddpdoctor, not of your job: no rank is blamed for it. The exit status is "
                                   f"the job's own ({sup.exit_status()}); what was recorded of the ranks before it "
                                   "stands, and a verdict this step would have given may be missing."
                                   + (f" Raised at {e['where']}." if e.get("where") else "")),
                           fix="Report it at the ddpdoctor issue tracker with the JSON report (--report FILE) "
                               "attached: its evidence holds the traceback",
                           subjects=[], evidence={"phase": e["phase"], "traceback": e.get("traceback")}
                           ).stamped(RUN_OWN_FAILED.id, RUN_OWN_FAILED.slug, "internal"))
    return out


def rendezvous_unfilled(sup, run_sec: dict, text: str) -> list:
    """RUN024 for a job whose rendezvous ended unfilled, read from its own output (the store's "1/2 clients
    joined", a RendezvousTimeoutError): the nodes expected, joined and missing. [] otherwise."""
    from ..pipeline.judge import judge
    from ..pipeline.snapshot import Snapshot
    from ..run import multinode

    end = multinode.rendezvous_end(text)
    if not end or any(r.get("step") for r in run_sec.get("ranks") or []):
        return []  # (a rank that trained: a later re-rendezvous of an elastic job, not a launch that never filled)
    run_sec["rendezvous"] = sup.rendezvous_ended(end)
    return judge(Snapshot(sections={"run": run_sec}), command="run", only={"RUN024"}, when="run").findings


def from_job_output(text: str) -> list:
    """`triage`'s findings on what the job itself said (Supervisor.job_output: its processes' uncaught
    exceptions, torch elastic's error files), when no rank record explains a failure: the errors and
    warnings its rules name, root cause first, each saying where it was read. [] when they name nothing
    (their "unexplained" and "healthy" verdicts are left out: RUN022 says that for `run`)."""
    if not text.strip():
        return []
    import dataclasses
    import re
    import tempfile

    from ..model import ERROR, WARNING
    from ..triage.api import HEALTH_RULE, UNEXPLAINED_RULE, triage_paths

    with tempfile.NamedTemporaryFile("w", suffix=".log", prefix="ddpdoctor-job-", delete=False) as fh:
        fh.write(text)
        path = fh.name
    try:
        report = triage_paths([path])
    except Exception:  # noqa: BLE001 - a reading that fails leaves RUN022 as it was
        return []
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
    out = []
    for f in report.sorted_findings():
        if f.severity not in (ERROR, WARNING) or f.id in (UNEXPLAINED_RULE, HEALTH_RULE):
            continue
        out.append(dataclasses.replace(
            f, subjects=tuple(s for s in f.subjects if not s.startswith(("path:", "line:"))),
            evidence=dict(f.evidence or {}, read_from="the job's own output (its uncaught exceptions and its stderr), by triage's rules"),
            detail=(re.sub(r" ?\(the evidence: lines? [\d, -]+\.\)", "", f.detail) + " " if f.detail else "") + "(Read from the job's own output: no rank record explained "
                                                          "the failure.)"))
    return out


# the job's pace when no rank is slower (facts.pace): told apart from stalls and deaths, each in the summary line
PACE_IDS = ("RUN029", "RUN030", "RUN031")
PACE_WORDS = {"RUN029": "the input pipeline sets the pace", "RUN030": "the collectives set the pace",
              "RUN031": "the loop's own code between steps sets the pace"}


def _summary(sup, report) -> None:
    from ..model.redact import redact_text

    slow = [f for f in report.findings if f.id == "RUN020"]
    unexplained = [f for f in report.findings if f.id == "RUN022"]
    held = [f for f in report.findings if f.id == "RUN023"]
    launch = [f for f in report.findings if f.id == "RUN025"]
    paced = [f for f in report.findings if f.id in PACE_IDS]
    # RUN021 (the ranks train alone) is a set-up finding, like RUN025: told apart, never counted as a stall or death
    # (round 21, runcol21: a healthy Trainer job that trained each rank alone read "1 stall/death finding(s)")
    alone = [f for f in report.findings if f.id == "RUN021"]
    run = [f for f in report.findings if f.id.startswith("RUN") and f.id not in ("RUN012", "RUN020", "RUN021", "RUN022",
                                                                                  "RUN023", "RUN025") + PACE_IDS]
    told = [f for f in report.findings if f.id in set((report.extra.get("run") or {}).get("from_job_output") or ())]
    ended = [f for f in report.findings if f.id == "RUN024" and ((f.evidence or {}).get("rendezvous") or {}).get("ended")]
    pre = [f for f in report.findings if not f.id.startswith("RUN") and f not in told]
    status = sup.exit_status()
    parts = [f"job exit status {status}"]
    if unexplained:
        from ..run.text import render_findings

        click.echo(render_findings(unexplained, "ddpdoctor run: the job failed", report.extra.get("run") or {}), err=True)
        parts.append("a failure no rule explains (RUN022)")
    elif ended:
        from ..run.text import render_findings

        click.echo(render_findings(ended, "ddpdoctor run: the job failed in its rendezvous", report.extra.get("run") or {}),
                   err=True)
        parts.append("the rendezvous never filled: " + ", ".join(f"{f.id} {f.title}" for f in ended[:1]))
    elif told:
        from ..run.text import render_findings

        click.echo(render_findings(told, "ddpdoctor run: the job failed; no rank record explains it, its own output does",
                                   report.extra.get("run") or {}), err=True)
        parts.append("the failure read from the job's own output: " + ", ".join(f"{f.id} {f.title}" for f in told[:2]))
    else:
        parts.append(f"{len(run)} stall/death finding(s)" if run else "no stall, no death")
    if launch:
        from ..run.text import render_findings

        click.echo(render_findings(launch, "ddpdoctor run: the launch", report.extra.get("run") or {}), err=True)
        parts.append("the launch starts fewer processes than asked (RUN025)")
    if alone:
        parts.append("the ranks train alone, not as one job (RUN021)")
    if paced:
        from ..run.text import render_findings

        click.echo(render_findings(paced, "ddpdoctor run: the job's pace", report.extra.get("run") or {}), err=True)
        parts.append("; ".join(PACE_WORDS[f.id] + f" ({f.id})" for f in paced))
    if slow:
        parts.append(f"{len(slow)} straggler finding(s)")
    # said where nothing else was found: beside a stall or a death the job's problem is told (and its stalled step
    # would skew the figures), and a straggler found or a rank held by the host is a verdict
    nj = None if slow or held or run else (report.extra.get("run") or {}).get("straggler_not_judged")
    if nj:
        from ..facts.steps import not_judged_text

        parts.append("stragglers NOT judged (" + not_judged_text(nj) + ")")
    if held:
        parts.append(f"{len(held)} rank(s) held back by the host (RUN023)")
    if pre:
        parts.append(f"{len(pre)} preflight finding(s) from the ranks")
    if sup.stopped:
        parts.append("stopped by --on-stall stop")
    from ..checks.run import stopped_from_outside

    stopped_outside = stopped_from_outside(sup.events)
    if stopped_outside:
        parts.append("stopped from outside (a signal to ddpdoctor run)")
    if not sup.procs and stopped_outside:
        click.echo("ddpdoctor run: the job was stopped before any of its processes loaded ddpdoctor: nothing of it "
                   "was recorded (RUN012)", err=True)
    elif not sup.procs:
        click.echo("ddpdoctor run: no process of the job loaded ddpdoctor (another interpreter or virtual "
                   "environment?); it ran unchanged, without the doctor", err=True)
    click.echo(redact_text("ddpdoctor run: " + "; ".join(parts)), err=True)
