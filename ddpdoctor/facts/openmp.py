"""How MKL's threading layer meets the OpenMP runtimes a process loads (ddpdoctor/data/mkl_threading.json, read from
Intel's mkl-service). Pure: the recorded packages, runtimes and environment in, the conflict out."""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Mapping, Optional

DATA = Path(__file__).resolve().parent.parent / "data" / "mkl_threading.json"


@functools.lru_cache(maxsize=1)
def mkl_threading() -> dict:
    with open(DATA, encoding="utf-8") as fh:
        return json.load(fh)


def mkl_layer_conflict(versions: Mapping[str, str], runtimes: list, env: Mapping[str, str],
                       processes: int) -> Optional[dict]:
    """{rule, service, version, runtime, layer} when mkl-service will refuse the OpenMP runtime torch loads: rule
    'set_intel' (MKL_THREADING_LAYER=INTEL given) or 'unset' (left to mkl-service, which exports INTEL to the
    processes started after it: judged only when the job starts several); None otherwise (no mkl-service recorded,
    no GNU OpenMP runtime recorded, another layer chosen, or MKL_SERVICE_FORCE_INTEL set)."""
    data = mkl_threading()
    service = next((d for d in data["distributions"] if (versions or {}).get(d)), None)
    if not service:
        return None
    refused = [r for r in runtimes or [] if isinstance(r, dict) and r.get("kind") in data["refused_runtime_kinds"]]
    if not refused or str(env.get(data["force_env"]) or "").strip():
        return None
    layer = str(env.get(data["layer_env"]) or "").strip()
    if layer.lower() in data["intel_values"]:
        rule = "set_intel"
    elif not layer and processes > 1:
        rule = "unset"
    else:
        return None
    name = str(refused[0].get("path") or "libgomp.so.1").replace("\\", "/").rsplit("/", 1)[-1]
    return {"rule": rule, "service": service, "version": versions[service], "runtime": name,
            "path": refused[0].get("path"), "layer": layer or None}
