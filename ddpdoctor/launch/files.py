"""The file protocol every process of a launch shares: the environment variables that carry it,
and atomic JSON files (progress-R.json, result-R.json, agent.json, spec.json)."""
from __future__ import annotations

import json
import os
import threading
from typing import Any, Optional

ENV_DIR = "DDPDOCTOR_LAUNCH_DIR"            # where workers write progress/result files
ENV_TOKEN = "DDPDOCTOR_LAUNCH_TOKEN"        # marks every process of one run, to find survivors
ENV_RANK_ENV = "DDPDOCTOR_LAUNCH_RANK_ENV"  # JSON {"rank": {"VAR": "value"}} applied by the shim
ENV_HOLD_S = "DDPDOCTOR_LAUNCH_HOLD_S"      # shim sleeps this long before running the module
ENV_EXIT = "DDPDOCTOR_LAUNCH_EXIT"          # shim exits with this code without running the module
STOP_FILE = "stop-run"                     # a rank writes it (Reporter.stop_run) to end the run early


def atomic_write_json(path: str, data: Any) -> None:
    """Write JSON so a reader never sees half a file (temp file + rename)."""
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, default=str)
    os.replace(tmp, path)


def read_json(path: str) -> Optional[dict]:
    """The JSON object in `path`, or None when it is missing, unreadable or not an object."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None


def tail_text(path: str, limit: int = 4000) -> str:
    """The last `limit` bytes of a file as text ("" when unreadable)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - limit))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
