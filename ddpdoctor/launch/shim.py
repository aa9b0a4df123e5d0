"""Worker side, before the user's module: `python -m ddpdoctor.launch rank MODULE ARGS...` applies the
per-rank extra env, records an uncaught exception in torch's error-file format, runs MODULE."""
from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from typing import List

from ddpdoctor.launch.files import ENV_EXIT, ENV_HOLD_S, ENV_RANK_ENV


def rank_shim(argv: List[str]) -> None:
    """`python -m ddpdoctor.launch rank MODULE ARGS...`: runs inside each worker process."""
    import runpy

    if not argv:
        sys.stderr.write("ddpdoctor.launch rank: missing module\n")
        sys.exit(2)
    module, args = argv[0], argv[1:]
    rank = os.environ.get("RANK", "0")
    try:
        extra = json.loads(os.environ.get(ENV_RANK_ENV) or "{}").get(str(rank)) or {}
    except ValueError:
        extra = {}
    os.environ.update({str(k): str(v) for k, v in extra.items()})
    hold = os.environ.get(ENV_HOLD_S)
    if hold:
        time.sleep(float(hold))
    code = os.environ.get(ENV_EXIT)
    if code:
        sys.stderr.write(f"ddpdoctor.launch: rank {rank} exits with {code} before starting ({ENV_EXIT})\n")
        sys.stderr.flush()
        os._exit(int(code))
    sys.argv = [module, *args]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit:
        raise
    except BaseException as exc:  # noqa: BLE001 - record it as torch's @record would, then re-raise
        record_exception(exc)
        raise


def record_exception(exc: BaseException) -> None:
    """Write TORCHELASTIC_ERROR_FILE in torch's ErrorHandler format (plus a float timestamp)."""
    import traceback

    path = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if not path:
        return
    data = {"message": {"message": f"{type(exc).__name__}: {exc}",
                        "extraInfo": {"py_callstack": traceback.format_exc(),
                                      "timestamp": str(int(time.time())), "time": time.time()}}}
    with contextlib.suppress(OSError):
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
