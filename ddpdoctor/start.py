"""The `ddpdoctor` console script and `python -m ddpdoctor`: before anything else is imported, a
`ddpdoctor triage FILE...` command starts the keyword search of its big files (ddpdoctor.triage.reader.prefetch),
so that the search overlaps the start-up (click, the command table, the rules: ~0.1 s of imports). Every
other command, and any triage command line this does not fully recognise (help, an unknown option), is left
to the CLI unchanged; the triage command calls prefetch itself, which skips a file already being searched.
Nothing here decides anything: a path that is missing, not a file or small is simply not searched ahead, and
the CLI then reports it as before (one line, exit 2).

The search process of the first big file is forked before anything of the package is imported (`fork_search`): the
imports before the fork (the re cache, the reader and the catalogue's keywords, Hyperscan: ~105 M instructions of the
command's first ~190 M, callgrind, round 14) ran on one core while the other waited for the search to start; the
search process now imports the reader itself, beside the command's own start-up, and the command takes it over
once it has imported the reader (`ddpdoctor.triage.reader.adopt`), or stops it there when the reader would not
search that file ahead (then prefetch decides as before)."""
from __future__ import annotations

import os
import sys
from typing import List, Optional, Sequence

# `ddpdoctor triage`'s options (ddpdoctor/commands/triage.py; tests/test_start.py checks the two agree)
TRIAGE_VALUE_OPTIONS = frozenset({"--format", "--only", "--ignore", "--fail-on"})
TRIAGE_FLAG_OPTIONS = frozenset({"--json", "-v", "--verbose"})


def triage_paths_in(argv: Sequence[str]) -> List[str]:
    """The PATH arguments of a `ddpdoctor triage ...` command line (argv without the program name), or []
    when it is another command or carries anything this does not know (then the CLI alone parses it)."""
    if not argv or argv[0] != "triage":
        return []
    paths: List[str] = []
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            return paths + list(argv[i + 1:])
        if arg in TRIAGE_VALUE_OPTIONS:
            i += 2
            continue
        if arg in TRIAGE_FLAG_OPTIONS or (arg.startswith("--") and arg.split("=", 1)[0] in TRIAGE_VALUE_OPTIONS):
            i += 1
            continue
        if arg.startswith("-") and arg != "-":
            return []
        paths.append(arg)
        i += 1
    return paths


# the reader searches a file ahead from this size (ddpdoctor.triage.reader.THREADS_FROM; tests/test_start.py checks
# the two agree): only the size is known before the reader is imported, the reader decides the rest when it adopts
EARLY_FROM = 64 << 20


def fork_search(paths: Sequence[str]) -> Optional[tuple]:
    """Fork the search process of the first big regular file among `paths` (not .gz), before the package is imported:
    (path, fd, read end of its pipe, pid, os.stat) for `ddpdoctor.triage.reader.adopt`, or None (no such file; not
    Linux; DDPDOCTOR_TRIAGE_NO_AHEAD / DDPDOCTOR_TRIAGE_NO_FORK; another thread runs: a fork copies only this one).
    The forked copy imports the reader, searches the file and writes its records (`reader.search_process`), and
    ends with os._exit, never returning here."""
    if not paths or not sys.platform.startswith("linux") or not hasattr(os, "fork") or not hasattr(os, "preadv") \
            or os.environ.get("DDPDOCTOR_TRIAGE_NO_AHEAD") is not None \
            or os.environ.get("DDPDOCTOR_TRIAGE_NO_FORK") is not None:
        return None
    threading = sys.modules.get("threading")
    if threading is not None and threading.active_count() != 1:
        return None
    import stat

    for path in paths:
        try:
            st = os.stat(path)
            if not stat.S_ISREG(st.st_mode) or st.st_size < EARLY_FROM:
                continue
            fd = os.open(path, os.O_RDONLY)
        except (OSError, ValueError):
            continue
        try:
            if os.pread(fd, 2, 0) == b"\x1f\x8b":
                os.close(fd)
                continue
            rfd, wfd = os.pipe()
        except OSError:
            os.close(fd)
            return None
        try:
            pid = os.fork()
        except OSError:
            for end in (fd, rfd, wfd):
                os.close(end)
            return None
        if pid == 0:   # the search process: never returns
            code = 1
            try:
                os.close(rfd)
                from ddpdoctor.triage.reader import search_process

                search_process(fd, wfd, st.st_size)
                code = 0
            finally:
                os._exit(code)   # no atexit handler, no flush of the parent's buffers
        os.close(wfd)
        return path, fd, rfd, pid, st
    return None


def search_ahead(argv: Optional[Sequence[str]] = None, forked: Optional[tuple] = None) -> None:
    """Start the triage search of the command line's big files now (nothing for any other command). `forked`: what
    `fork_search` started, taken over here."""
    paths = triage_paths_in(sys.argv[1:] if argv is None else argv)
    if not paths:
        return
    # as ddpdoctor/commands/triage.py does, before numpy is imported by the search: no OpenBLAS thread per core
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    try:
        from ddpdoctor.triage.reader import adopt, prefetch

        if forked is not None:
            forked, taken = None, forked
            adopt(*taken)
        prefetch(paths)
    except Exception:  # noqa: BLE001 - only a head start: the command reads the files as usual
        pass
    finally:
        if forked is not None:   # the reader could not be imported: stop the search process
            _stop(forked)


def _stop(forked: tuple) -> None:
    import signal

    _path, fd, rfd, pid, _st = forked
    for end in (fd, rfd):
        try:
            os.close(end)
        except OSError:
            pass
    try:
        if pid > 0 and os.waitpid(pid, os.WNOHANG)[0] == 0:   # still running (and this process's child)
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    except (ChildProcessError, ProcessLookupError):
        pass


def entry() -> None:
    """The `ddpdoctor` console script (and `python -m ddpdoctor`): search ahead, then the CLI
    (ddpdoctor.cli.entry: this process owns the processes it starts, then main())."""
    forked = None
    if sys.argv[1:2] == ["triage"]:
        # as ddpdoctor/commands/triage.py does, before numpy is imported by the search: no OpenBLAS thread per core
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
        forked = fork_search(triage_paths_in(sys.argv[1:]))
        # the rules' and the parser's ~200 patterns: their compiled code comes from the user's cache (ddpdoctor.recache)
        from ddpdoctor import recache

        recache.install()
        recache.pause_gc()   # no collection until the input is read (api.read_inputs: recache.resume_gc)
    search_ahead(forked=forked)
    from ddpdoctor.cli import entry as cli_entry

    if sys.argv[1:2] != ["triage"] or os.environ.get("DDPDOCTOR_NO_FAST_EXIT") is not None:
        cli_entry()
        return
    try:
        cli_entry()
    except SystemExit as exc:
        fast_exit(exc.code)
    fast_exit(0)


def fast_exit(code, _exit=os._exit, _run_exitfuncs=None) -> None:
    """End a finished triage command without the interpreter's teardown: what of it has an effect runs (non-daemon
    threads are waited for, the atexit handlers run: the regex cache's save, the search process's end, logging's and
    weakref.finalize's), the standard streams are flushed, then os._exit(code). The teardown skipped (the modules'
    dictionaries and a last garbage collection of everything the rules imported) cost ~45 M instructions after the
    report was written (callgrind, Py_FinalizeEx, bench_triage's 96 MiB log, round 15): the last thing the 1 GiB
    benchmark waits for. A code that is not an int (a message, None is 0) or a stream that cannot be flushed (a
    closed pipe) ends as Python would (SystemExit): the same exit status and message. DDPDOCTOR_NO_FAST_EXIT=1: never.
    `_exit`, `_run_exitfuncs`: os._exit and atexit._run_exitfuncs (tests)."""
    if code is None:
        code = 0
    import atexit

    run = _run_exitfuncs or getattr(atexit, "_run_exitfuncs", None)
    if type(code) is not int or run is None:
        raise SystemExit(code)
    threading = sys.modules.get("threading")
    if threading is not None and hasattr(threading, "_shutdown"):
        threading._shutdown()   # as the teardown does first: non-daemon threads end
    run()   # each handler once (the registry is cleared), errors printed as at exit
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except Exception:  # noqa: BLE001 - Python's own teardown reports it and sets the status
            raise SystemExit(code)
    _exit(code)
