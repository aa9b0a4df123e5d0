"""The `ddpdoctor` console script and `python -m ddpdoctor`: before anything else is imported, a
`ddpdoctor triage FILE...` command starts the keyword search of its big files (ddpdoctor.triage.reader.prefetch),
so that the search overlaps the start-up (click, the command table, the rules: ~0.1 s of imports). Every
other command, and any triage command line this does not fully recognise (help, an unknown option), is left
to the CLI unchanged; the triage command calls prefetch itself, which skips a file already being searched.
Nothing here decides anything: a path that is missing, not a file or small is simply not searched ahead, and
the CLI then reports it as before (one line, exit 2)."""
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


def search_ahead(argv: Optional[Sequence[str]] = None) -> None:
    """Start the triage search of the command line's big files now (nothing for any other command)."""
    paths = triage_paths_in(sys.argv[1:] if argv is None else argv)
    if not paths:
        return
    # as ddpdoctor/commands/triage.py does, before numpy is imported by the search: no OpenBLAS thread per core
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    try:
        from ddpdoctor.triage.reader import prefetch

        prefetch(paths)
    except Exception:  # noqa: BLE001 - only a head start: the command reads the files as usual
        pass


def entry() -> None:
    """The `ddpdoctor` console script (and `python -m ddpdoctor`): search ahead, then the CLI
    (ddpdoctor.cli.entry: this process owns the processes it starts, then main())."""
    if sys.argv[1:2] == ["triage"]:
        # the rules' and the parser's ~200 patterns: their compiled code comes from the user's cache (ddpdoctor.recache)
        from ddpdoctor import recache

        recache.install()
    search_ahead()
    from ddpdoctor.cli import entry as cli_entry

    cli_entry()
