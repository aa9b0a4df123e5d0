"""Launch N local ranks of a Python module through torch's own launcher, with hard bounds.

Why this exists: `torchrun` and `mp.spawn` wait for torch's defaults (a 900 s rendezvous, a
30 min collective timeout) and may leave orphans behind. The doctor must answer in seconds, name
the rank that failed, and leave nothing running. This module is generic (a module + its args);
`ddpdoctor comm` and `ddpdoctor probe` both use it.

Parent side (no torch import here)::

    from ddpdoctor.launch import LaunchSpec, launch
    res = launch(LaunchSpec(module="my.worker", args=["--x", "1"], nproc=2, deadline_s=30,
                            rank_env={1: {"MY_FAULT": "stall"}}))
    res.ok, res.timed_out, res.root_cause, [r.result for r in res.ranks]

How it runs:
  * A child `python -m ddpdoctor.launch agent SPEC.json` in its own session runs torch's
    `elastic_launch` (the engine of torchrun): static rendezvous on 127.0.0.1 at a free port we
    pick, no restarts, short shutdown timeout. The agent writes `agent.json` with every failed
    rank's exit code and its `@record` error file (TORCHELASTIC_ERROR_FILE), as torchrun's
    "Root Cause (first observed failure)" does.
  * Each worker is `python -m ddpdoctor.launch rank MODULE ARGS...`: a tiny shim that applies the
    per-rank extra env (fault injection), records an uncaught exception into the elastic error file
    in torch's format (plus a sub-second timestamp), then runs MODULE as `__main__`.
  * Workers report through files in `$DDPDOCTOR_LAUNCH_DIR`: `progress-R.json` (the phase they
    are in) and `result-R.json` (their final answer), both written atomically (see `Reporter`).
  * The parent polls, enforces the whole-run deadline, and tears down in bounded time: SIGTERM to
    the agent (it forwards to workers), then SIGKILL to every process it ever saw in the tree and
    to any process carrying this run's token in its environment (workers live in their own
    sessions, so a process-group kill alone would miss them).
  * A run where every rank already wrote its result is a success even if a rank then aborts or
    hangs at exit: Gloo does that (pytorch#190489, measured here: SIGABRT "terminate called
    without an active exception" in ~3 of 10 runs). `LaunchResult.teardown` says what happened.

Worker side (inside the launched module)::

    from ddpdoctor.launch import Reporter
    rep = Reporter.from_env()
    rep.phase("init_process_group")
    ...
    rep.result({"ok": True, ...})     # atomic; the parent counts this rank as reported
    rep.exit(0)                       # optional: skip interpreter teardown (Gloo exit hangs)

Modules, by the process they run in: `parent` (launch, the process tree, the root cause), `agent`
(torch's elastic agent), `shim` and `reporter` (inside each rank), `files` (the protocol they share).
"""
from __future__ import annotations

from ddpdoctor.launch.files import (ENV_DIR, ENV_EXIT, ENV_HOLD_S, ENV_RANK_ENV, ENV_TOKEN, STOP_FILE,
                                    atomic_write_json, read_json, tail_text)
from ddpdoctor.launch.parent import (Interrupted, LaunchResult, LaunchSpec, RankOutcome, free_port, is_ip_address,
                                     launch, port_is_free, root_cause)
from ddpdoctor.launch.reporter import Reporter, peer_phases

__all__ = ["LaunchSpec", "LaunchResult", "RankOutcome", "launch", "free_port", "port_is_free",
           "Reporter", "Interrupted", "ENV_DIR", "ENV_HOLD_S", "ENV_EXIT", "ENV_RANK_ENV", "ENV_TOKEN", "STOP_FILE",
           "atomic_write_json", "read_json", "tail_text", "is_ip_address", "peer_phases", "root_cause"]
