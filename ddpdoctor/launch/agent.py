"""The agent process: `python -m ddpdoctor.launch agent SPEC.json` runs torch's elastic agent and
writes what failed into agent.json for the parent."""
from __future__ import annotations

import os
import sys
import time

from ddpdoctor.launch.files import atomic_write_json, read_json


def agent_main(spec_path: str) -> None:
    """`python -m ddpdoctor.launch agent SPEC.json`: torch's elastic agent, results into agent.json."""
    spec = read_json(spec_path) or {}
    workdir = os.path.dirname(os.path.abspath(spec_path))
    out_path = os.path.join(workdir, "agent.json")
    status: dict = {"status": "starting", "pid": os.getpid(), "started": time.time()}
    atomic_write_json(out_path, status)
    try:
        from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, Std
        from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
        from torch.distributed.launcher.api import LaunchConfig, elastic_launch

        config = LaunchConfig(
            min_nodes=spec["nnodes"], max_nodes=spec["nnodes"], nproc_per_node=spec["nproc"],
            run_id=spec["run_id"], rdzv_backend="static",
            rdzv_endpoint=f"{spec['master_addr']}:{spec['master_port']}",
            rdzv_configs={"rank": spec["node_rank"], "timeout": int(max(1, spec["rdzv_timeout_s"]))},
            max_restarts=0, monitor_interval=0.1, start_method="spawn",
            logs_specs=DefaultLogsSpecs(log_dir=os.path.join(workdir, "logs"), redirects=Std.ALL),
            local_addr=spec["master_addr"] if spec["nnodes"] == 1 else None,
            shutdown_timeout=max(1, int(spec.get("teardown_s", 3))),
        )
        entry_args = ["-u", "-m", "ddpdoctor.launch", "rank", spec["module"], *spec["args"]]
        try:
            elastic_launch(config, spec["python"])(*entry_args)
            status.update(status="ok")
        except ChildFailedError as exc:
            fails = {}
            for grank, f in exc.failures.items():
                data = f.error_file_data if isinstance(f.error_file_data, dict) else {}
                msg = data.get("message") if isinstance(data.get("message"), dict) else {}
                extra = msg.get("extraInfo") or {}
                message = f.message.get("message") if isinstance(f.message, dict) else f.message
                fails[str(grank)] = {"local_rank": f.local_rank, "pid": f.pid, "exitcode": f.exitcode,
                                     "message": str(message), "timestamp": f.timestamp,
                                     "time": extra.get("time"), "traceback": extra.get("py_callstack"),
                                     "error_file": f.error_file if os.path.isfile(f.error_file) else None}
            status.update(status="failed", failures=fails)
    except BaseException as exc:  # noqa: BLE001 - the launcher itself failed (port in use, bad addr...)
        status.update(status="error", error=f"{type(exc).__name__}: {exc}")
    status["ended"] = time.time()
    atomic_write_json(out_path, status)
    sys.stdout.flush()
    sys.stderr.flush()
    # torch's TCPStore / Gloo threads may hang interpreter teardown; nothing left to do here.
    os._exit(0 if status["status"] == "ok" else 1)
