"""`ddpdoctor.preflight()`: the doctor inside the user's training process.

One call at the top of a training script, or just before `trainer.train()`:

    import ddpdoctor
    ddpdoctor.preflight(trainer=trainer, fail_on="error")

It builds a snapshot from the usual live gatherers (host, env, packages, launcher, network),
reads the torch facts in-process (torch is already imported: no subprocess), adds the runtime
sections only the live process knows (see `ddpdoctor.inprocess.runtime`), judges everything with the same
registered checks as `ddpdoctor check`, logs the findings once, installs the fork guard, and
returns the Report. With `fail_on` reached it raises PreflightError listing the findings.
"""
from __future__ import annotations

import gc
import sys
import time
from typing import Any, Callable, Iterable, Optional, Union

from ddpdoctor.model import ERROR, INFO, WARNING, Report, severity_rank
from ddpdoctor.model.redact import redact_text

__all__ = ["preflight", "PreflightError", "emit_findings"]

_CACHED = ("host", "packages", "network")  # facts that do not change within one process
_cache: dict = {}
_logged: set = set()
MARK = {ERROR: "✗", WARNING: "!", INFO: "·"}


class PreflightError(RuntimeError):
    """Raised by preflight(fail_on=...) when findings reach the threshold. `.report` has them all."""

    def __init__(self, report: Report, fail_on: str):
        self.report = report
        self.fail_on = fail_on
        self.findings = [f for f in report.sorted_findings() if severity_rank(f.severity) >= severity_rank(fail_on)]
        lines = [f"ddpdoctor preflight found {len(self.findings)} problem(s) at or above '{fail_on}':"]
        for f in self.findings:
            lines.append(f"  {f.severity} {f.id} {f.name}: {f.title}")
            if f.fix:
                lines.append(f"      fix: {f.fix.splitlines()[0]}")
        super().__init__(redact_text("\n".join(lines)))


def static_sections(environ: dict, use_cache: bool = True) -> dict:
    """host/env/packages/launcher/network from the normal live gatherers, plus `torch` read
    in-process. Slow-to-read facts that cannot change within a process are cached."""
    from ddpdoctor.gather import GATHERERS, Sources, sections_for
    from ddpdoctor.inprocess.runtime import torch_section
    from ddpdoctor.pipeline.snapshot import call_gatherer

    src = Sources(environ=environ)
    out: dict = {}
    for name in sections_for("preflight"):  # the gatherers that declare when={"preflight", ...}
        if use_cache and name in _CACHED and name in _cache:
            out[name] = _cache[name]
            continue
        if name in GATHERERS:
            out[name] = call_gatherer(name, lambda fn=GATHERERS[name][0]: fn(src))
            if name in _CACHED and not out[name].get("error"):
                _cache[name] = out[name]
    out["torch"] = torch_section()
    _refresh_listeners(out, environ)
    return out


def _refresh_listeners(sections: dict, environ: dict) -> None:
    """Rank 0 of a hand-launched job binds MASTER_PORT itself at init_process_group, and a port
    this very process holds is not "in use by someone else". Once the process group exists (and
    no torchrun agent holds the port), re-read the listeners and set this process's own apart, so
    the static port check (A3) judges other processes only. (/proc/net/tcp costs a few ms, so
    only then.)"""
    net = sections.get("network")
    if not isinstance(net, dict) or net.get("error") or environ.get("TORCHELASTIC_RUN_ID"):
        return
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is None or not (dist.is_available() and dist.is_initialized()):
            return
        from ddpdoctor.inprocess.runtime.process import tcp_listeners

        every, own = tcp_listeners()
        net = dict(net)
        net["listening_tcp_ports"] = sorted(every - own)
        net["own_listening_tcp_ports"] = sorted(own)
        sections["network"] = net
    except Exception:  # noqa: BLE001
        pass


def fold_sharpened(report: Report, dropped: Optional[list] = None) -> dict:
    """Drop a runtime finding that only confirms a static one of the same catalogue fault.

    Runtime checks that sharpen a static check declare `sharpens=(catalogue IDs)`. When a static
    (snapshot) check already reported that fault in this report, the user gets it once, from the
    static check, and the runtime one is recorded in report.extra["preflight"]["folded"]. When the
    static check stays quiet (the runtime fact is what reveals the fault) the runtime one is kept;
    so is one whose evidence says what it adds beyond the static finding (`beyond_static`: RT003's
    warning, a DataLoader whose workers are spawned because of the start). `dropped`, where given,
    receives the folded findings (the run recorder reads RT003's again at the first DataLoader).
    """
    from ddpdoctor.model.registry import REGISTRY

    static: dict = {}
    for f in report.findings:
        spec = REGISTRY.get(f.id)
        if spec is not None and not spec.extra.get("sharpens") and spec.kind == "check":
            for cat in spec.catalogue:
                static.setdefault(cat, []).append(f.id)
    folded: dict = {}
    kept = []
    for f in report.findings:
        spec = REGISTRY.get(f.id)
        into = sorted({i for cat in (spec.extra.get("sharpens") or ()) for i in static.get(cat, [])}) if spec else []
        if into and not (f.evidence or {}).get("beyond_static"):
            folded[f.id] = into
            if dropped is not None:
                dropped.append(f)
        else:
            kept.append(f)
    report.findings = kept
    return folded


def _my_rank(sections: dict) -> Optional[int]:
    """This rank, by the one reading every check uses (process group, else launcher, else RANK)."""
    from ddpdoctor.facts.ranks import this_rank

    return this_rank(sections).value


def _stderr(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def emit_findings(findings: Iterable, rank: Optional[int] = None, header: Union[str, Callable] = "ddpdoctor",
                  log: Union[bool, Callable[[str], None], None] = True) -> list:
    """Log findings once per process: global ones on rank 0, those naming `rank:N` on rank N with a
    `[rank N]` prefix. Returns the findings that were logged now."""
    if log is False or log is None:
        return []
    write = log if callable(log) else _stderr
    me = rank or 0
    out = []
    for f in sorted(findings, key=lambda f: (-severity_rank(f.severity), f.id)):
        ranks = {s for s in f.subjects if s.startswith("rank:")}
        mine = f"rank:{me}" in ranks
        if me != 0 and not mine:
            continue
        key = (f.id, tuple(sorted(f.subjects)))  # the same fault seen again (later call, fork guard)
        if key in _logged:
            continue
        _logged.add(key)
        out.append(f)
    if not out:
        return out
    prefix = f"[rank {me}] " if me != 0 else ""
    lines = [f"{prefix}{header(out) if callable(header) else header}"]
    for f in out:
        lines.append(f"{prefix}  {MARK[f.severity]} {f.severity} {f.id} {f.name}: {f.title}")
        if f.fix:
            lines.append(f"{prefix}      fix: {f.fix.splitlines()[0]}")
    lines.append(f"{prefix}  (`ddpdoctor explain ID` tells why; every detail is in the returned report)")
    write(redact_text("\n".join(lines)))
    return out


def preflight(trainer: Any = None, *, args: Any = None, model: Any = None, dataloader: Any = None,
              dataset: Any = None, tokenizer: Any = None, fail_on: Optional[str] = None,
              log: Union[bool, Callable[[str], None]] = True, only: Optional[Iterable[str]] = None,
              ignore: Optional[Iterable[str]] = None, peers: bool = True, peer_timeout_s: float = 5.0,
              fork_guard: bool = True, snapshot_path: Optional[str] = None, when: str = "preflight",
              extra_sections: Optional[dict] = None) -> Report:
    """Judge this training process now. Returns the Report; raises PreflightError at `fail_on`.

    trainer/args/model/dataloader/dataset/tokenizer: whatever exists at the call site; each adds
        facts (a Trainer implies its args, model, train dataset and callbacks).
    fail_on: "error" or "warning" to raise PreflightError; None (default) never raises.
    log: True logs to stderr, a callable receives the text, False is silent.
    only/ignore: check IDs or slugs, as on the command line.
    peers: compare a few facts across ranks through the process group's store (rank 0 waits at
        most peer_timeout_s for the others; other ranks never wait).
    fork_guard: install the os.register_at_fork guard (once per process).
    snapshot_path: also write the (redacted) snapshot there, to attach to a bug report.
    """
    if fail_on not in (None, ERROR, WARNING, INFO):
        raise ValueError(f"fail_on must be 'error', 'warning', 'info' or None, not {fail_on!r}")
    from ddpdoctor.model.registry import resolve_many
    from ddpdoctor.pipeline.runner import load_all

    load_all()
    try:
        only_ids = resolve_many(only) if only else None
        ignore_ids = resolve_many(ignore) if ignore else None
    except KeyError as exc:  # a usage error: say it as one
        raise ValueError(exc.args[0]) from None
    # A full garbage collection in a process that imported torch takes ~80 ms, and any allocation
    # may trigger one; it is owed by the whole process, so let it run after us, not inside us.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _preflight(trainer, args, model, dataloader, dataset, tokenizer, fail_on, log, only_ids, ignore_ids,
                          peers, peer_timeout_s, fork_guard, snapshot_path, when, extra_sections)
    except PreflightError:
        raise
    except Exception as exc:  # noqa: BLE001 - the doctor must never break the training run
        return _internal_failure(exc, when, log)
    finally:
        if gc_was_enabled:
            gc.enable()


def _internal_failure(exc: Exception, when: str, log) -> Report:
    """A bug in ddpdoctor: report it as one internal finding, log one line, let training go on."""
    from ddpdoctor.checks.doc import GATHER_FAILED
    from ddpdoctor.pipeline.runner import crashed_finding

    finding = crashed_finding(f"ddpdoctor {when} failed internally: {type(exc).__name__}: {exc}", family="internal",
                              detail="This is a ddpdoctor bug, not a problem with your set-up; training is not "
                                     "affected.",
                              fix="Report it with the traceback in this finding's evidence.",
                              spec=GATHER_FAILED, limit=-4)
    if log is not False and log is not None:
        (log if callable(log) else _stderr)(redact_text(f"ddpdoctor {when}: {finding.title}"))
    return Report(command="preflight", findings=[finding], extra={"preflight": {"when": when, "failed": True}})


def _preflight(trainer, args, model, dataloader, dataset, tokenizer, fail_on, log, only_ids, ignore_ids, peers,
               peer_timeout_s, fork_guard, snapshot_path, when, extra_sections) -> Report:
    start = time.perf_counter()
    from ddpdoctor.pipeline.judge import judge
    from ddpdoctor.inprocess.runtime import gather_sections
    from ddpdoctor.inprocess.runtime.process import user_environ
    from ddpdoctor.pipeline.snapshot import Snapshot

    environ, written = user_environ()
    sections = static_sections(environ)
    sections.update(gather_sections(trainer=trainer, args=args, model=model, dataloader=dataloader,
                                    dataset=dataset, tokenizer=tokenizer, environ=environ, when=when,
                                    peers=peers, peer_timeout_s=peer_timeout_s))
    sections["runtime"]["env_written_by_accelerate"] = written
    if extra_sections:
        sections.update(extra_sections)
    snap = Snapshot(sections=sections, meta={"created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    report = judge(snap, command="preflight", only=only_ids, ignore=ignore_ids)
    dropped: list = []
    folded = fold_sharpened(report, dropped)
    rank = _my_rank(sections)
    elapsed_ms = round((time.perf_counter() - start) * 1000, 1)
    report.extra["preflight"] = {"rank": rank, "elapsed_ms": elapsed_ms, "when": when, "folded": folded}
    if any(f.id == "RT003" for f in dropped):  # its note, for the run recorder's second reading (rt003_at_loader)
        report.extra["preflight"]["folded_rt003"] = next(f.to_dict() for f in dropped if f.id == "RT003")
    if fork_guard:
        from ddpdoctor.inprocess import forkguard

        forkguard.install(emit=lambda fs, header: emit_findings(fs, rank=rank, header=header, log=log))
    if snapshot_path:
        try:
            with open(snapshot_path, "w") as fh:
                fh.write(snap.dumps())
        except OSError as exc:
            report.extra["preflight"]["snapshot_error"] = f"cannot write {snapshot_path}: {exc.strerror or exc}"

    def summary(shown: list) -> str:
        if (rank or 0) != 0:
            return (f"ddpdoctor {when}: {len(shown)} finding(s) about this rank "
                    f"({report.checks_run} checks in {elapsed_ms:.0f} ms; rank 0 logs the others)")
        return (f"ddpdoctor {when}: {report.count(ERROR)} error(s), {report.count(WARNING)} warning(s), "
                f"{report.count(INFO)} note(s); {report.checks_run} checks in {elapsed_ms:.0f} ms")

    logged = emit_findings(report.findings, rank=rank, header=summary, log=log)
    if not logged and not report.findings and (rank or 0) == 0 and log is not False and log is not None:
        key = ("ok", when)
        if key not in _logged:
            _logged.add(key)
            (log if callable(log) else _stderr)(f"ddpdoctor {when}: no issues found "
                                                f"({report.checks_run} checks in {elapsed_ms:.0f} ms)")
    if fail_on and report.exit_code(fail_on):
        raise PreflightError(report, fail_on)
    return report


def rt003_at_loader(findings: list, num_workers: int, loader_method: Optional[str],
                    folded: Optional[dict] = None) -> Optional[list]:
    """Round 15 (issue 27 C): RT003 read again when the rank's first DataLoader with workers exists. Under
    `ddpdoctor run` a plain loop's preflight runs at init_process_group, before its DataLoader, so RT003 could
    only be a note there; the recorder's DataLoader hook calls this with what the loader says: its workers and
    its own start method (its multiprocessing_context; None: the process's, which the note's evidence holds).
    `findings`: the saved preflight findings (dicts). Returns them with RT003's note replaced by the check's
    own result on those facts (a warning where the workers are spawned), or None where nothing changes (no
    RT003 note, no workers, or the same note). `folded`: RT003's note where preflight folded it into the static
    A5 finding (report.extra["preflight"]["folded_rt003"]; round 15 wave 2)."""
    at = next((i for i, f in enumerate(findings) if f.get("id") == "RT003" and f.get("severity") == INFO), None)
    if at is None and folded is not None and folded.get("severity") == INFO:
        # folded into the static A5 finding at preflight: the note comes back only as a warning that adds the
        # spawned workers (beyond_static), after the other findings
        got = rt003_at_loader([folded], num_workers, loader_method)
        return findings + got if got is not None else None
    if at is None or num_workers <= 0:
        return None
    old = findings[at]
    ev = old.get("evidence") or {}
    from ddpdoctor.checks.rt.launcher import rank_started_by_mp_spawn

    snap = {"runtime": {"started_by": ev.get("started_by"), "mp_process_name": ev.get("process_name"),
                        "start_method": ev.get("start_method"),
                        "distributed": {"initialized": True, "world_size": ev.get("world_size")}},
            "runtime_data": {"num_workers": num_workers, "start_method": loader_method or ev.get("start_method"),
                             "source": "dataloader"}}
    got = next(iter(rank_started_by_mp_spawn(snap)), None)
    if got is None or got.severity == INFO:
        return None
    new = dict(old, **{k: v for k, v in got.to_dict().items() if k not in ("id", "name", "family")})
    new["evidence"] = dict(new.get("evidence") or {}, seen_at="the rank's first DataLoader with workers")
    return findings[:at] + [new] + findings[at + 1:]


class _CallableModule(type(sys)):
    """`ddpdoctor.preflight` is both this module (once imported, the package attribute is the
    module) and the function: calling the module calls preflight()."""

    def __call__(self, *args, **kwargs):
        return preflight(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
