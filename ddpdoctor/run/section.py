"""The `run` facts: what the parent saw of each process of the job, turned into per-rank records
that the checks in ddpdoctor/checks/run.py judge. Pure: takes plain dicts, returns a dict.

Input, one dict per process that loaded the recorder (see supervisor.Proc.facts):
    pid, info (static, info.PID.json), beacon (live state), alive, end_t, status (exit status
    when we reaped it), exc (exc.PID.json), efile (torch elastic error file), fatal (fatal
    signal dump), dump (the stack dump taken on request), rss_mb.
"""
from __future__ import annotations

import os
import signal as _signal
import statistics
from typing import Optional

from ..facts import spawn_lines
from ..facts.units import whole_number
from . import stacks

WAITING = ("collective", "backward", "rendezvous", "ddp-forward")
PEER_LOSS = ("connection closed by peer", "connection reset", "broken pipe", "doesn't match expected size",
             "timed out waiting", "socket timeout", "connection refused", "ncclremoteerror", "remote process exited",
             "is there a distributed collective mismatch")


# The exceptions a signal handler raises in a process being ended (Python's SIGINT handler, sys.exit from a SIGTERM
# handler): the signal's consequence, not a failure of the rank's own.
SIGNAL_EXCEPTIONS = ("SystemExit", "KeyboardInterrupt")


def _names_lost_peer(exc: Optional[dict]) -> bool:
    """An exception whose type or message says a peer went away (PEER_LOSS): a consequence of another rank's end."""
    exc = exc or {}
    low = f"{exc.get('type')} {exc.get('message')}".lower()
    return any(s in low for s in PEER_LOSS)


def _rank_of(p: dict) -> Optional[int]:
    """The process's rank: its beacon's, its environment's at start, then what outlives a beacon that
    could not be read (torchrun's agent's record of the worker, the rank its exception record carries):
    a rank started by elastic_launch or mp.spawn gets RANK only after its interpreter started."""
    b, env = p.get("beacon") or {}, (p.get("info") or {}).get("env") or {}
    for v in (b.get("rank"), env.get("RANK"), b.get("hint"), env.get("SLURM_PROCID"), env.get("OMPI_COMM_WORLD_RANK"),
              (p.get("launcher") or {}).get("rank"), (p.get("exc") or {}).get("rank")):
        if v is not None:
            try:
                return int(v)
            except (TypeError, ValueError):
                continue
    return None


def roles(procs: list) -> tuple:
    """(ranks, workers_by_rank_pid, others). A rank is a process that initialised (or is about to
    initialise) a process group; a process whose parent is a rank is one of its workers."""
    cands = {}
    for p in procs:
        info, b = p.get("info") or {}, p.get("beacon") or {}
        if info.get("kind") == "worker":
            continue
        # pgt: it entered init_process_group (a rank, even one that raised there before knowing its number)
        if _rank_of(p) is not None or b.get("phase") in ("init", "run", "coll", "data") or b.get("pgt") is not None:
            cands[p["pid"]] = p
    ranks, workers, others = [], {}, []
    for p in procs:
        info = p.get("info") or {}
        parent = info.get("parent_pid") if info.get("kind") == "worker" else info.get("ppid")
        if (info.get("kind") == "worker" or p["pid"] in cands) and parent in cands and parent != p["pid"]:
            workers.setdefault(parent, []).append(p)
        elif p["pid"] in cands:
            ranks.append(p)
        else:
            others.append(p)
    ranks.sort(key=lambda p: (_rank_of(p) if _rank_of(p) is not None else 1 << 30, p["pid"]))
    return ranks, workers, others


def _frames(p: dict, key: str = "dump") -> list:
    dump = p.get(key)
    if not dump:
        return []
    t = stacks.main_thread(stacks.parse_dump(dump), (p.get("info") or {}).get("main_thread"))
    return t["frames"] if t else []


def backward_thread(p: dict, prefixes, key: str = "dump") -> Optional[dict]:
    """The thread, other than the main one, where a rank whose main thread waits in autograd's engine runs its OWN
    code: a thread that C++ started and that entered Python (autograd's device threads running a hook, a process
    group's worker thread running a DDP comm hook's `fut.then(...)` callback; data/python_threads.json). Its main
    thread shows the engine alone, as DDP's all-reduce does; the stall is on that thread. None unless exactly one such
    thread runs the user's code (two would be a guess between them)."""
    dump = p.get(key)
    if not dump:
        return None
    parsed = stacks.parse_dump(dump)
    main = stacks.main_thread(parsed, (p.get("info") or {}).get("main_thread"))
    if main is None or not stacks.has_frame(main["frames"], *AUTOGRAD_ENGINE):
        return None
    found = stacks.native_user_threads(parsed, main, prefixes, (p.get("info") or {}).get("injected"))
    return found[0] if len(found) == 1 else None


BUSY_CPU = 0.5  # a rank outside any collective using half a core or more is working, not blocked
BUSY_RUNNING = 0.6  # ...or whose main thread was running or runnable in 60% of the samples (a loaded host)


def _busy(p: dict) -> bool:
    cpu, running = p.get("cpu_frac"), p.get("running_frac")
    return (cpu is not None and cpu >= BUSY_CPU) or (running is not None and running >= BUSY_RUNNING)


def classify(p: dict, frames: list, n_workers: int) -> str:
    b = p.get("beacon") or {}
    phase = b.get("phase")
    if not p.get("alive", True):
        return "exited"
    if phase == "exit":
        return "exiting"
    if phase == "start":
        return "before-init"
    if phase == "init":
        return "rendezvous"
    if phase == "coll":
        return "collective"
    if frames and stacks.has_frame(frames, "torch/autograd", ("backward", "_engine_run_backward")):
        running = p.get("running_frac")
        return "busy" if running is not None and running >= BUSY_RUNNING and (p.get("cpu_frac") or 0) > 0.2 else "backward"
    if phase == "data":
        dl = b.get("dl") or {}
        if dl.get("workers") or n_workers:
            return "data-workers"
        return "busy" if _busy(p) else "data"
    if frames and stacks.has_frame(frames, "torch/nn/parallel/distributed.py", ("forward", "_pre_forward")):
        return "ddp-forward"
    if frames and in_ddp_init(frames):
        return "ddp-init"  # its work is the collectives (C++): CPU there is the wait's (a loaded host's polling)
    if _busy(p):
        return "busy"
    return "outside"


def in_ddp_init(frames: list) -> bool:
    """The rank is inside DistributedDataParallel's constructor, which broadcasts rank 0's parameters and buffers and
    checks their shapes across the ranks (pytorch/pytorch torch/nn/parallel/distributed.py __init__ ->
    _verify_param_shape_across_processes, _sync_module_states; v2.13.0 cf30153c): a collective of every rank, in C++,
    that the recorder counts none of."""
    return stacks.has_frame(frames, "torch/nn/parallel/distributed.py", ("__init__",))


def _describe_wait(r: dict) -> str:
    st = r["state"]
    c = r.get("last_collective") or {}
    if st == "collective":
        shape = f" shape {c.get('shape')} {c.get('dtype')}" if c.get("shape") is not None else ""
        return f"{c.get('op')} #{c.get('seq')}{shape}"
    return {"backward": "the DDP gradient all-reduce (backward)", "rendezvous": "init_process_group (rendezvous)",
            "ddp-forward": "DDP's forward synchronisation", "exiting": "interpreter shutdown, past ddpdoctor's exit handler (no stack is taken there)",
            "outside": "outside any collective", "data": "loading a batch in the rank",
            "data-workers": "waiting for a batch from DataLoader workers",
            "busy": "computing outside any collective",
            "ddp-init": "DDP's constructor (the broadcast of rank 0's parameters and the shape check across ranks)",
            "teardown": "shutting down after its code returned",
            "before-init": "start-up, before init_process_group"}.get(st, st)


OPS = ("all_reduce", "broadcast", "reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter",
       "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "gather", "scatter", "barrier",
       "monitored_barrier", "send", "recv", "all_gather_object", "broadcast_object_list", "gather_object",
       "scatter_object_list")  # recorder.OPS: the op index of the beacon's collective ring
STATES = {1: "in", 2: "done", 3: "async"}


def collectives(b: dict) -> list:
    """The beacon's last collectives, oldest first: group (index, name, ranks), sequence number in the
    group, op, line, bytes, state ('in': waiting in it, 'done', 'async': issued, completion unknown)."""
    groups = b.get("groups") or [{"name": "default", "ranks": None}]
    sites, site0 = b.get("sites") or [], b.get("site0") or 0
    out = []
    for gseq, t, gid, op, state, site, nbytes in b.get("cring") or []:
        g = groups[gid] if gid < len(groups) else {"name": f"#{gid}"}
        k = site - site0
        out.append({"group": gid, "group_name": g.get("name"), "group_ranks": g.get("ranks"), "seq": gseq, "t": t,
                    "op": OPS[op] if op < len(OPS) else f"op{op}", "state": STATES.get(state, str(state)),
                    "line": sites[k] if 0 <= k < len(sites) else None, "bytes": nbytes})
    return out


def _since(b: dict, now: float):
    """How long the rank has been in its phase: from the phase's start (pt) or its last step's end
    (st), the later. An unsampled step (recorder's fast path) stores its end exactly but not the
    phase changes' times (the DataLoader's phase byte alone), so a pt older than the last step's end
    is not this phase's start: the phase began after that step ended."""
    t = max(b.get("pt") or 0.0, b.get("st") or 0.0)
    return round(now - t, 1) if t else None


AUTOGRAD_ENGINE = ("torch/autograd", ("backward", "_engine_run_backward"))


def user_code_in_backward(frames: list, prefixes, injected=()) -> bool:
    """The rank is in its OWN code that autograd's engine called (`frames` innermost first): a frame of the user's
    inside (innermost of) the engine's entry (torch/autograd/__init__.py backward -> graph.py _engine_run_backward,
    torch v2.13.0): a module's full backward hook (torch/utils/hooks.py BackwardHook), a tensor hook, a custom
    autograd Function's backward. On CPU the engine runs them on the thread that called backward
    (torch/csrc/autograd/engine.cpp, Engine::execute: a CPU graph task runs on the caller's thread). DDP's own
    gradient all-reduce waits in the engine with no user frame inside it (the Reducer is C++; its Python
    _DDPSink is torch's), so a rank whose innermost user frame is inside the engine waits in its own code, not
    in the all-reduce. False when there is no such frame, or the user's frames are all outside the engine."""
    file_part, funcs = AUTOGRAD_ENGINE
    engine = next((i for i, fr in enumerate(frames) if file_part in fr["file"] and fr["func"] in funcs), None)
    if not engine:
        return False
    user = stacks.innermost_user(frames[:engine], prefixes, injected)
    return user is not None and not stacks.is_library(user["file"], prefixes) and user["file"] not in set(injected or ())


_TORCH_OWN = ("/site-packages/torch/", "/dist-packages/torch/", "/ddpdoctor/")  # torch's own frames, and our recorder's


def hook_in_backward(frames: list) -> Optional[dict]:
    """The outermost frame inside autograd's engine entry (`frames` innermost first) that is NOT torch's own code: a
    backward hook or autograd Function of a library, of a profiler, or of code injected into the job (a sitecustomize),
    none of them the user's files, so user_code_in_backward misses it. DDP's gradient all-reduce waits in the engine with
    torch's frames alone (its Reducer is C++; _DDPSink and torch/utils/hooks.py are torch's), so such a frame means the
    rank runs that code, not DDP's wait. None when a torch.distributed frame is inside the engine too (a library's hook
    waiting in a collective, as DeepSpeed's gradient reduction does: a collective wait), or without such a frame."""
    file_part, funcs = AUTOGRAD_ENGINE
    engine = next((i for i, fr in enumerate(frames) if file_part in fr["file"] and fr["func"] in funcs), None)
    if not engine:
        return None
    inside = frames[:engine]
    if any("torch/distributed/" in fr["file"] for fr in inside):
        return None
    # the outermost such frame: the hook's own entry, which torch called (what it called in turn, a lock's or a
    # sleep's frames of the standard library, says less)
    return next((fr for fr in reversed(inside) if not any(t in fr["file"] for t in _TORCH_OWN)), None)


def teardown_of(frames: list, b: dict) -> Optional[dict]:
    """The rank's code has returned and it has not exited (`frames`: its main thread's, innermost first), or None:
    - 'returned': the script's module frame is still at the line that called the job's function (the recorder's `ml`,
      read at init_process_group) and no frame of that function is inside it: the function returned and the rank frees
      its objects (a Python function's frame is on the stack for as long as it runs). What runs then is their
      destructors: C code with no Python frame (the DDP model's Reducer releasing the process group, a buffered file's
      flush), or finalizers with their own frames (a `__del__`, a DataLoader iterator's worker shutdown).
    - 'finished': no module frame is left on the main thread: the script ran to its end and the interpreter shuts
      down (threading._shutdown joining non-daemon threads, the exit handlers, garbage collection).
    Only with a stack and a beacon before its exit handlers ran (phase run or data: the recorder's own exit handler
    sets 'exit')."""
    if not frames or b.get("phase") not in ("run", "data"):
        return None
    mods = [i for i, fr in enumerate(frames) if fr.get("func") == "<module>"]
    if not mods:  # faulthandler writes at most 100 frames (MAX_FRAME_DEPTH): a longer stack lost its outermost ones
        return None if len(frames) >= 100 else {"how": "finished", "inner": frames[0]}
    ml = b.get("ml")
    if not (isinstance(ml, list) and len(ml) == 3):
        return None
    file, line, func = ml
    i = next((i for i in mods if frames[i].get("file") == file), None)
    if i is None or frames[i].get("line") != line:
        return None
    if i > 0 and frames[i - 1].get("func") == func:
        return None  # the function still runs
    return {"how": "returned", "func": func, "file": file, "line": line, "inner": frames[0] if i > 0 else None}


def rank_record(p: dict, prefixes, now: float, workers: list) -> dict:
    b = p.get("beacon") or {}
    info = p.get("info") or {}
    frames = _frames(p)
    n_workers = len([w for w in workers if w.get("alive", True)])
    state = classify(p, frames, n_workers)
    if state == "exiting" and p.get("alive", True):
        # past the recorder's own exit handler (phase exit): no stack is taken there (Python may have unregistered
        # faulthandler: a signal would kill it), so any dump and the beacon's line are from BEFORE its exit, stale
        frames = []
        p = dict(p, dump=None, native=None)
        b = dict(b, pl=None)
    side = hook = None
    if state == "backward" and user_code_in_backward(frames, prefixes, info.get("injected")):
        state = "busy" if _busy(p) else "outside"  # its own hook / autograd Function, run by autograd: not DDP's wait
    elif state == "backward" and hook_in_backward(frames) is not None:
        hook = stacks.with_source(hook_in_backward(frames))  # a library's / injected hook, run by autograd
        state = "busy" if _busy(p) else "outside"
    elif state == "backward":
        side = backward_thread(p, prefixes)
        if side is not None:  # its own code on a thread torch started (a device thread's hook, a comm hook's callback)
            state = "busy" if _busy(p) else "outside"
    down = teardown_of(frames, b) if state in ("outside", "busy", "data") else None
    if down is not None:
        state = "teardown"  # its code returned: the rank shuts down and has not exited (RUN026)
    user = stacks.innermost_user(frames, prefixes, info.get("injected")) if frames else None
    if side is not None:
        user = side["user"]
    if user is None and b.get("pl"):  # no stack (not signalled): the line the recorder saw
        file, _, line = str(b["pl"]).rpartition(":")
        if file and whole_number(line) is not None:   # str.isdigit() takes '²', which int() refuses
            user = stacks.with_source({"file": file, "line": whole_number(line), "func": ""})
    coll = b.get("coll")
    rec = {"rank": _rank_of(p), "pid": p["pid"], "host": info.get("host"), "phase": b.get("phase"),
           "state": state, "since_s": _since(b, now),
           "step": b.get("step") or 0, "last_collective": coll, "collectives": b.get("seq") or 0,
           "dataloader": b.get("dl"), "train_loader": b.get("dlt"), "user_frame": user,
           "stack": stacks.fold(frames, prefixes) if frames else None,
           "pg_timeout_s": b.get("pgt"), "world": b.get("world"), "rss_mb": p.get("rss_mb"), "alive": p.get("alive", True),
           "argv0": (info.get("argv") or [None])[0], "split": p.get("split"), "cpu_frac": p.get("cpu_frac"),
           "main_state": p.get("main_state"), "running_frac": p.get("running_frac"),
           "framework": b.get("fw"), "coll_history": collectives(b)[-12:], "native": p.get("native"),
           # where a rank without a stack at its end was (RUN010): its last step's end and mean step time, and the
           # line that made its current loader's iterator (recorder._loader_origin: its batch loop), by its beacon
           "step_end_t": b.get("st"), "step_mean_s": (b.get("sd") or [None])[-1], "between": bool(b.get("between")),
           "loop_frame": _frame_of_line((b.get("dl") or {}).get("at") or (b.get("dlt") or {}).get("at"))}
    lf = rec.get("loop_frame")
    if user and lf and user.get("file") == lf.get("file") and user.get("line") != lf.get("line"):
        rec["after_loop"] = stacks.after_loop(user["file"], user["line"], lf["line"])
    if side is not None:
        rec["thread"] = {"ident": f"0x{side['ident']:016x}" if side.get("ident") is not None else None,
                         "started_by": "torch (C++), not Python: autograd's device thread or a Future's callback",
                         "stack": stacks.fold(side["frames"], prefixes)}
        rec["stack"] = (rec["stack"] or []) + [f"(thread {rec['thread']['ident']}, started by torch, not Python:)"] \
            + rec["thread"]["stack"]
    gate = stacks.gated_user(frames, prefixes, info.get("injected")) if frames else None
    if gate is not None:
        rec["gate_frame"] = gate  # a caller's `if rank == 0:` / `if ...is_main_process:` around what this rank does
    if down is not None:
        rec["teardown"] = down
    if state == "exiting" and rec["alive"]:
        # RUN026: what is known, not a stale stack; pgx: its process group was still alive at its exit handler
        rec["teardown"] = {"how": "after-exit", "inner": None, "pg_alive": b.get("pgx")}
    rec["doing"] = _describe_wait(rec)
    if hook is not None:
        rec["hook_frame"] = hook
        rec["doing"] += (f" (in a backward hook that is not in your files, run by autograd: "
                         f"{hook['file'].rsplit('/', 1)[-1]}:{hook['line']} in {hook['func']})")
    if side is not None:
        rec["doing"] += (" (its own code on a thread torch started: a DDP comm hook's callback or autograd's device "
                         "thread; its main thread waits in backward)")
    rec["workers"] = [worker_record(w, prefixes) for w in workers]
    return rec


def parted(procs: list, now: float) -> bool:
    """The ranks' stacks (each process's `dump`, taken just now) show them apart: at least one waits for the others
    (WAITING: DDP's gradient all-reduce, a collective, DDP's forward synchronisation) while at least one does not (its
    own code, its hook inside backward, a batch, a computation). The supervisor's test of a stall before the job's
    first step, where the beacons of ranks that have begun the loop look alike: a rank asleep in a module's full
    backward hook in the first backward (autograd runs a CPU graph task's hooks on the calling thread: pytorch/pytorch
    torch/csrc/autograd/engine.cpp Engine::execute, v2.13.0) and the other waiting in DDP's all-reduce are both in
    backward at step 0. Ranks alike (all loading, all compiling, all in the same wait) are not apart: a job's start is
    no stall. False without a stack of every rank."""
    ranks, workers, _ = roles(procs)
    if len(ranks) < 2 or any(not p.get("dump") for p in ranks):
        return False
    prefixes = set()
    for p in procs:
        prefixes.update((p.get("info") or {}).get("lib") or ())
    prefixes = tuple(sorted(prefixes))
    states = [rank_record(p, prefixes, now, workers.get(p["pid"], []))["state"] for p in ranks]
    return any(s in WAITING for s in states) and any(s not in WAITING for s in states)


def same_setup_wait(procs: list, now: float) -> Optional[str]:
    """Every rank, before the job's first step, in the same set-up wait: all inside DDP's constructor (their stacks,
    just taken) -> 'ddp-init'; all inside the same collective (beacon phase coll, one sequence number, op and group) ->
    'collective'. None otherwise, or without every rank's stack for the constructor. Every rank waiting and none
    working is no job's start (loading, compiling: someone works): the transport between them does not connect (a
    network interface, a firewall, a MASTER_ADDR another node cannot reach), or a rank this node does not see (another
    node's) has not come. The supervisor counts it as a stall before the first step; RUN028 says it."""
    ranks, workers, _ = roles(procs)
    if len(ranks) < 2:
        return None
    bs = [p.get("beacon") or {} for p in ranks]
    if any((b.get("step") or 0) > 0 or b.get("st") for b in bs):
        return None
    if all(b.get("phase") == "coll" for b in bs):
        keys = {(b.get("seq"), (b.get("coll") or {}).get("op"), (b.get("coll") or {}).get("group")) for b in bs}
        return "collective" if len(keys) == 1 else None
    if any(not p.get("dump") for p in ranks):
        return None
    prefixes = set()
    for p in procs:
        prefixes.update((p.get("info") or {}).get("lib") or ())
    prefixes = tuple(sorted(prefixes))
    states = {rank_record(p, prefixes, now, workers.get(p["pid"], []))["state"] for p in ranks}
    return "ddp-init" if states == {"ddp-init"} else None


def worker_record(p: dict, prefixes) -> dict:
    info = p.get("info") or {}
    frames = _frames(p)
    return {"pid": p["pid"], "alive": p.get("alive", True), "user_frame": stacks.innermost_user(frames, prefixes, info.get("injected")),
            "stack": stacks.fold(frames, prefixes) if frames else None, "tokenizers": info.get("tokenizers"),
            "in_tokenizers": any("tokenizers" in fr["file"] or "encode" in fr["func"] for fr in frames[:3]),
            "since_s": None}


def step_median(procs: list) -> Optional[float]:
    ds = [d for p in procs for d in ((p.get("beacon") or {}).get("sd") or [])]
    return statistics.median(ds) if ds else None


def mismatch(ranks: list) -> Optional[dict]:
    """Ranks whose collective of the same sequence number differs in op or shape."""
    by_seq: dict = {}
    for r in ranks:
        c = r.get("last_collective")
        if c:
            by_seq.setdefault(c.get("seq"), []).append((r, c))
    for seq, items in sorted(by_seq.items(), key=lambda kv: -(kv[0] or 0)):
        if len(items) < 2:
            continue
        sigs = {(c.get("op"), tuple(c.get("shape") or ()), c.get("dtype")) for _, c in items}
        if len(sigs) > 1:
            ops = {c.get("op") for _, c in items}
            guarded = any((r.get("user_frame") or {}).get("guard") for r, _ in items)
            return {"seq": seq, "ops_differ": len(ops) > 1, "guarded": guarded, "ranks": [{"rank": r["rank"], "op": c.get("op"), "shape": c.get("shape"),
                                           "dtype": c.get("dtype"), "line": c.get("line"),
                                           "user_frame": _frame_of_line(c.get("line"))} for r, c in items]}
    return None


def _frame_of_line(line: Optional[str]) -> Optional[dict]:
    if not line:
        return None
    file, _, n = str(line).rpartition(":")
    return stacks.with_source({"file": file, "line": whole_number(n), "func": ""}) if whole_number(n) is not None else None


# ------------------------------------------------------------------------------ deaths

def _signal_name(num: int) -> str:
    try:
        return _signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


TIE_S = 0.3  # two ends known only from polls (0.2 s apart; 1 s before the first end of a steady job) this close are a tie: no order is known


def launcher_view(records: list) -> dict:
    """pid -> what torchrun's agent said of that worker (ddpdoctor/run/launcher_hook.py records):
    {'role': 'failed', 'exitcode', 't'} or {'role': 'terminated', 'signal', 'exitcode', 't', 'after': [failed
    ranks], 'reason'}; a worker the agent saw fail is never also a target."""
    out: dict = {}
    for rec in sorted(records or [], key=lambda r: r.get("t") or 0):
        failed = [f for f in rec.get("failed") or [] if f.get("pid")]
        for f in failed:
            out.setdefault(f["pid"], {"role": "failed", "exitcode": f.get("exitcode"), "t": f.get("t"),
                                      "rank": f.get("rank")})
        after = [f.get("rank") for f in failed if f.get("exitcode") not in (None, 0)]
        for t in rec.get("targets") or []:
            if t.get("pid") and t["pid"] not in out:
                out[t["pid"]] = {"role": "terminated", "signal": rec.get("signal"), "exitcode": t.get("exitcode"),
                                 "t": rec.get("t"), "after": after, "reason": rec.get("reason"),
                                 "rank": t.get("rank"), "stacks": (rec.get("stacks") or {}).get(str(t["pid"]))}
    return out


# What an mp.spawn parent says of its children: the patterns live in facts.spawn_lines (triage reads the same lines)
SPAWN_FAILED, SPAWN_RAISED = spawn_lines.FAILED, spawn_lines.RAISED
SPAWN_TERMINATING, SPAWN_KILLING = spawn_lines.TERMINATING, spawn_lines.KILLING


def spawn_view(text: str) -> Optional[dict]:
    """The mp.spawn parent's account of its children's ends, read from the job's stderr: {"failed": {"index",
    "signal" | "exit_code" | "raised", "line"}, "terminated": {pid: "SIGTERM" | "SIGKILL"}}; None when it said
    nothing. The first failure only (a script that spawns twice: the first one that failed)."""
    if not text or "process" not in text.lower():
        return None
    out: dict = {"failed": None, "terminated": {}}
    hits = [(m.start(), m) for rx in (SPAWN_FAILED, SPAWN_RAISED) for m in rx.finditer(text)]
    if hits:
        m = min(hits, key=lambda h: h[0])[1]
        f = {"index": int(m.group(1)), "line": m.group(0)}
        if m.re is SPAWN_RAISED:
            f["raised"] = True
        elif m.group(2):
            f["signal"] = m.group(2)
        else:
            f["exit_code"] = int(m.group(3))
        out["failed"] = f
    for m in SPAWN_TERMINATING.finditer(text):
        out["terminated"].setdefault(int(m.group(1)), "SIGTERM")
    for m in SPAWN_KILLING.finditer(text):
        out["terminated"][int(m.group(1))] = "SIGKILL"
    return out if out["failed"] or out["terminated"] else None


def apply_spawn_view(procs: list, view: Optional[dict]) -> None:
    """Give each rank the mp.spawn parent's word on its end (p["spawn"]): "terminated" for a pid it ended, "failed"
    for the child it names first. The index maps to a rank among the dead spawned children it did not terminate: the
    only one, else the one whose rank (or multiprocessing name SpawnProcess-<index+1>) is the index. A pool's child
    that is no rank (a script under torchrun spawning workers) names no rank."""
    if not view:
        return
    ranks = [p for p in procs if _rank_of(p) is not None or (p.get("beacon") or {}).get("phase")]
    term = view.get("terminated") or {}
    failed = view.get("failed")
    def spawned(p: dict) -> bool:  # a child of multiprocessing's spawn (the recorder's info predates its process name)
        info = p.get("info") or {}
        return "--multiprocessing-fork" in (info.get("argv") or []) or str(info.get("mp_name") or "").startswith("SpawnProcess")

    cands = [p for p in ranks if not p.get("alive", True) and p.get("pid") not in term and spawned(p)]
    if failed:
        idx = failed["index"]
        named = [p for p in cands if _rank_of(p) == idx or (p.get("info") or {}).get("mp_name") == f"SpawnProcess-{idx + 1}"]
        pick = named[0] if len(named) == 1 else cands[0] if len(cands) == 1 else None
        if pick is not None:
            pick["spawn"] = dict(failed, role="failed")
    first = next((p for p in ranks if (p.get("spawn") or {}).get("role") == "failed"), None)
    for p in ranks:
        if p.get("pid") in term:
            p["spawn"] = {"role": "terminated", "signal": term[p["pid"]],
                          "after": [_rank_of(first)] if first is not None else [],
                          "line": f"Terminating process {p['pid']} via signal SIGTERM"}


def end_of(p: dict, oom_delta: int) -> Optional[dict]:
    """How this process ended, when it ended badly; None for a clean exit or a live process.

    Each rank's real end, from what is known of it: its exception (with its time), its fatal-signal
    dump, its exit status (ours when we reaped it; torchrun's agent's otherwise, p['launcher']), the
    code it gave os._exit, the elastic error file. A rank the launcher terminated after another
    failed is a consequence (`secondary`), whatever its signal. `t_src` says how precise `t` is.

    A live process whose uncaught exception is recorded (`exc`, with its time) has failed: it is still
    printing its traceback or running atexit (`exiting`). Its failure counts at the exception's time, not
    at its exit: under Gloo a rank whose barrier timed out exits after the peer that then lost its
    connection ("Connection closed by peer"), and the peer's exit must not make it the first failure."""
    exiting = False
    if p.get("alive", True):
        if not ((p.get("exc") or {}).get("t")):
            return None
        exiting = True
    b = p.get("beacon") or {}
    exc, fatal, status = p.get("exc"), p.get("fatal"), p.get("status")
    efile = p.get("efile") or {}
    ag = p.get("launcher") or {}
    if status is None and ag.get("exitcode") is not None:
        status = ag["exitcode"]
    times = [(t, "poll") for t in (p.get("end_t"),) if t]
    out: dict = {}
    if exc:
        out.update(how="exception", exception={k: exc.get(k) for k in ("type", "module", "message", "traceback", "user")})
        times.append((exc.get("t"), "exception"))
    elif efile.get("message"):
        msg = efile["message"]
        out.update(how="exception", exception={"type": None, "message": (msg.get("message") if isinstance(msg, dict) else str(msg))[:2000],
                                               "traceback": ((msg.get("extraInfo") or {}).get("py_callstack") if isinstance(msg, dict) else None),
                                               "user": None})
    if fatal and fatal.strip():
        dump = stacks.parse_dump(fatal)
        if dump.get("fatal"):
            t = stacks.main_thread(dump, (p.get("info") or {}).get("main_thread"))
            frames = t["frames"] if t else []
            sig = stacks.SIGNAL_OF_FATAL.get(dump["fatal"], dump["fatal"])
            if "how" not in out:
                out.update(how="signal", signal=sig, fatal=dump["fatal"])
            else:
                out["signal"] = sig
            out["fatal_frame"] = stacks.innermost_user(frames, (p.get("info") or {}).get("lib") or (),
                                                       (p.get("info") or {}).get("injected"))
            if p.get("fatal_mtime"):
                times.append((p["fatal_mtime"], "fatal"))
    if status is not None:
        if status < 0:
            out.setdefault("how", "signal")
            out.setdefault("signal", _signal_name(-status))
        else:
            out["exit_code"] = status
            out.setdefault("how", "exit-code")
    if b.get("phase") == "exit" and "how" not in out:
        if b.get("xc") not in (None, 0):
            out.update(how="exit-code", exit_code=b["xc"])
        else:
            return None  # interpreter shut down normally (atexit ran, or os._exit(0))
    if b.get("phase") == "exit" and out.get("how") == "exit-code" and out.get("exit_code") == 0:
        return None
    if b.get("phase") == "exit" and out.get("how") == "signal" and not exc and ag.get("role") != "terminated":
        # An abort while the interpreter shut down, after the rank's own work had ended (atexit ran):
        # Gloo's teardown race when the process group was never destroyed. Not the failure of a step,
        # but it turns a finished run into a failed one (exit 1): RUN013, not RUN010.
        out.update(at_exit=True, pg_at_exit=b.get("pgx"), secondary=True)
    if "how" not in out and ag.get("role") == "terminated" and ag.get("signal"):
        # no exit status of its own reached us (reaped by torchrun, its record without the code), but the
        # agent says which signal it sent: that is evidence; a guessed SIGKILL here named the busy peer that
        # torchrun had SIGTERMed "ended by SIGKILL" under load (tests/test_run_faults.py ..._same_poll)
        out.update(how="signal", signal=ag["signal"], signal_from="launcher")
    sp = p.get("spawn") or {}
    if sp.get("role") == "failed" and not exc and not out.get("fatal") and out.get("how") in (None, "signal"):
        # the mp.spawn parent reaped it and said how it ended: evidence, not a guess
        code = sp.get("exit_code")
        if sp.get("signal"):
            out.update(how="signal", signal=sp["signal"])
        elif code is not None and code < 0:
            out.update(how="signal", signal=_signal_name(-code))
        elif code is not None:
            out.update(how="exit-code", exit_code=code)
        out["spawn_line"] = sp.get("line")
    if sp.get("role") == "terminated" and not exc:
        out.update(how="signal", signal=sp.get("signal") or "SIGTERM", signal_from="mp.spawn")
        out.pop("signal_guessed", None)
    if "how" not in out:
        out.update(how="vanished", signal="SIGKILL", signal_guessed=True)
    if out.get("how") in ("vanished",) or out.get("signal") == "SIGKILL":
        if oom_delta > 0:
            out["oom_kill"] = oom_delta
    exc_d = out.get("exception") or {}
    # Its own failure before the teardown (round 19, issue 27): an exception this rank raised of itself (not a lost
    # peer's error, not the SystemExit/KeyboardInterrupt a signal handler raises) BEFORE the launcher decided to end
    # it (its record's time, taken when it had seen the other rank fail) cannot be a consequence of that failure:
    # the teardown only ended a process still finalising (Gloo's group keeps it alive until its peer leaves). Its
    # exception is its end. After that time it may be one (the peer's end reached it first): a consequence, as before.
    def own_before(t_end) -> bool:
        return bool(exc and exc.get("t") and t_end and exc["t"] < t_end and not _names_lost_peer(exc_d)
                    and exc_d.get("type") not in SIGNAL_EXCEPTIONS)

    if raised_in_ddpdoctor(exc_d.get("traceback")):
        out["ours"] = True  # ddpdoctor's own code raised it in this rank: a bug of the tool, not the rank's failure
    why = classify_failure(f"{exc_d.get('type')}: {exc_d.get('message')}\n{exc_d.get('message')}")
    if why:
        out["why"] = why
    elif out.get("oom_kill"):
        out["why"] = "oom-killer"
    own = False
    if ag.get("role") == "terminated":
        out["terminated_by"] = {"who": "torchrun", "signal": ag.get("signal"), "after_ranks": ag.get("after"),
                                "reason": ag.get("reason"), "t": ag.get("t")}
        own = own_before(ag.get("t"))
        if own:
            out["terminated_by"]["after_own_failure"] = True
        else:
            out["secondary"] = True
        if ag.get("t"):
            times.append((ag["t"], "launcher"))
    if sp.get("role") == "terminated":
        out["terminated_by"] = {"who": "mp.spawn", "signal": sp.get("signal"), "after_ranks": sp.get("after"),
                                "reason": "the parent's teardown after a child failed", "line": sp.get("line")}
        out["secondary"] = True
    out["secondary"] = bool(out.get("secondary") or _names_lost_peer(exc_d) or (out.get("signal") == "SIGTERM" and not own))
    if ag.get("role") == "failed" and ag.get("t"):
        times.append((ag["t"], "launcher-poll"))
    known = [(t, src) for t, src in times if t]
    # the most precise time known: the exception's or the fatal dump's own; then the poll's (0.2 s) or
    # the launcher's teardown record; torchrun's ProcessFailure time last (whole seconds, rounded down)
    for srcs in (("exception", "fatal"), ("poll", "launcher"), ("launcher-poll",)):
        pick = [(t, src) for t, src in known if src in srcs]
        if pick:
            out["t"], out["t_src"] = min(pick)
            break
    else:
        out["t"], out["t_src"] = None, None
    if out["t_src"] in ("poll", "launcher", "launcher-poll") and p.get("alive_t") and out["t"] and p["alive_t"] < out["t"]:
        out["t_lo"] = p["alive_t"]  # seen running then: its end lies in (t_lo, t]
    out["rss_mb"] = p.get("rss_mb")
    if exiting:
        out["exiting"] = True
    return out


MESSAGE_CLASSES = {"cuda_oom": "cuda-oom", "host_oom": "cpu-oom", "oom_killer": "oom-killer"}


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # this installed ddpdoctor package


def raised_in_ddpdoctor(traceback_text: Optional[str], package: str = _PACKAGE) -> bool:
    """The innermost frame of a formatted traceback (where the exception was raised) is in ddpdoctor's own package
    (the recorder injected into the rank): ddpdoctor's bug, not the user's code. The user's own files are never
    under the installed package's directory."""
    frames = stacks.traceback_frames(traceback_text or "")
    return bool(frames) and os.path.abspath(frames[0]["file"]).startswith(package)


def classify_failure(text: str) -> Optional[str]:
    """The class of a failure message: 'cuda-oom' / 'cpu-oom' (an allocation that failed), 'peer-lost' (the
    connection to a peer ended: NCCL's remote error, Gloo's "closed by peer", a consequence of the peer's end), 'nccl', or
    None. Through the message catalogue (ddpdoctor.facts.messages: torch's, NCCL's... messages with
    their sources), line by line; two plain rules where it knows no line of the text."""
    try:
        from ..facts import messages

        for line in (text or "").splitlines():
            m = messages.match(line)
            cls = (m.entry.get("class") if m is not None else None) or ""
            if cls in MESSAGE_CLASSES:
                return MESSAGE_CLASSES[cls]
            if cls == "nccl_remote_error":  # NCCL's ncclRemoteError and Gloo's "Connection closed/reset by peer"
                return "peer-lost"
            if cls.startswith("nccl_"):
                return "nccl"
    except Exception:  # noqa: BLE001 - a catalogue that cannot load never stops the death report
        pass
    low = (text or "").lower()
    if "out of memory" in low and ("cuda" in low or "outofmemoryerror" in low):
        return "cuda-oom"
    if "nccl" in low:
        return "nccl"
    return None


def build(procs: list, now: float, *, stall: Optional[dict] = None, death: bool = False, oom_delta: int = 0,
          stall_after: Optional[float] = None, launcher: str = "", spawn: Optional[dict] = None) -> dict:
    ranks, workers, others = roles(procs)
    apply_spawn_view(ranks, spawn)
    prefixes = set()
    for p in procs:
        prefixes.update((p.get("info") or {}).get("lib") or ())
    prefixes = tuple(sorted(prefixes))
    recs = []
    for p in ranks:
        rec = rank_record(p, prefixes, now, workers.get(p["pid"], []))
        end = end_of(p, oom_delta)
        if end:
            rec["end"] = end
            rec["state"] = "died"
            rec["before_end"] = _before_end(p, prefixes)
        recs.append(rec)
    section = {"ranks": recs, "launcher": launcher, "stall_after_s": stall_after, "step_median_s": step_median(ranks),
               "processes": len(procs), "stall": stall, "mismatch": mismatch(recs)}
    if death:
        fold_exit_codes(recs)
        bound_by_teardown(recs)
        death_order = order_deaths(recs)
        if death_order:
            late = never_arrived(recs, death_order)
            if late:
                death_order["never_arrived"] = late
            section["death"] = death_order
    if stall or death:
        extra = extra_collective(recs)
        if extra:
            section["extra_collective"] = extra
    return section


def _before_end(p: dict, prefixes=()) -> str:
    """Where an ended rank was just before its end: 'collective' (in a collective, the DDP gradient
    all-reduce of backward, or DDP's forward synchronisation), 'outside' (its own code), 'start' (before
    its process group), from its beacon and the stack taken before it was ended (torchrun's signal,
    faulthandler on SIGTERM). '' when neither says."""
    b = p.get("beacon") or {}
    if b.get("phase") == "coll" or (b.get("coll") or {}).get("in"):
        return "collective"
    if b.get("phase") in ("start", "init"):
        return "start"
    frames = _frames(p)
    if not frames:
        return ""
    if (not stacks.has_frame(frames, "torch/distributed/distributed_c10d.py")
            and (user_code_in_backward(frames, prefixes, (p.get("info") or {}).get("injected"))
                 or hook_in_backward(frames) is not None or backward_thread(p, prefixes) is not None)):
        return "outside"  # its own hook / autograd Function / comm hook callback, run by torch (rank_record says the same)
    if (stacks.has_frame(frames, "torch/autograd", ("backward", "_engine_run_backward"))
            or stacks.has_frame(frames, "torch/nn/parallel/distributed.py", ("forward", "_pre_forward"))
            or stacks.has_frame(frames, "torch/distributed/distributed_c10d.py")):
        return "collective"
    return "outside"


TIMEOUT_WORDS = ("timed out", "timeout", "deadline exceeded")
WAIT_WORDS = ("recv", "send", "wait", "collective", "watchdog", "operation", "gloo", "nccl", "barrier", "all_reduce",
              "allreduce", "work ")


def timed_out_in_collective(end: dict) -> bool:
    """The rank ended on its collective's timeout: Gloo's "Timed out waiting 1800000ms for recv operation",
    NCCL's watchdog "Watchdog caught collective operation timeout", a barrier's "timed out"."""
    exc = end.get("exception") or {}
    text = f"{exc.get('type') or ''} {exc.get('message') or ''}".lower()
    return any(w in text for w in TIMEOUT_WORDS) and any(w in text for w in WAIT_WORDS)


def never_arrived(recs: list, order: dict) -> Optional[dict]:
    """A rank held outside any collective (sleeping or working in its own code) while its peers waited in
    one until the process group's timeout ended them: the timed-out rank is not the root cause, the
    rank that never arrived is. Found by the collective sequence numbers (behind the waiter's) or, at the
    same count (DDP's gradient all-reduce in backward is not a counted call), by where it was: alive
    outside any collective, or ended afterwards (torchrun's teardown) with its stack outside one.
    None unless the first root cause in time timed out in a collective and such a rank exists."""
    dead = {r.get("pid"): r for r in recs if r.get("end")}
    first = next((dead[p] for p in dead if p == order.get("first_pid")), None) or \
        next((r for r in recs if r.get("end") and r.get("rank") == order.get("first_rank")), None)
    if first is None or not timed_out_in_collective(first["end"]):
        return None
    waiters = [r for r in recs if r.get("end") and timed_out_in_collective(r["end"])]
    seq = max((r.get("collectives") or 0) for r in waiters)
    late = []
    for r in recs:
        if r in waiters:
            continue
        e = r.get("end")
        if e is not None and not (e.get("secondary") or e.get("terminated_by")):
            continue  # a failure of its own: not a rank held back
        where = r.get("before_end") if e is not None else (
            "collective" if r.get("state") in ("collective", "backward", "ddp-forward") else
            "start" if r.get("state") in ("rendezvous", "before-init") else
            "outside" if r.get("state") in ("outside", "busy", "data", "data-workers", "teardown") else "")
        behind = (r.get("collectives") or 0) < seq
        if where == "outside" or (behind and where != "collective"):
            late.append({"rank": r.get("rank"), "pid": r.get("pid"), "where": where, "behind": behind,
                         "collectives": r.get("collectives") or 0, "user_frame": r.get("user_frame"),
                         "step": r.get("step")})
    if not late:
        return None
    w = waiters[0]
    return {"ranks": [x["rank"] for x in late], "late": late, "waiters": [r.get("rank") for r in waiters],
            "waiter_collectives": seq, "timeout_s": w.get("pg_timeout_s"), "waiter_step": w.get("step"),
            "waiter_coll": w.get("last_collective")}


HISTORY = 12  # rank_record keeps this many of the beacon's last collectives (coll_history)


def _count_in_group(r: dict, gid: int) -> Optional[int]:
    """How many collectives of group `gid` this rank had issued: the highest sequence number of that group in its
    recent history; 0 when its history is whole (shorter than the ring kept) and holds none; None when unknown."""
    hist = r.get("coll_history") or []
    seqs = [e.get("seq") or 0 for e in hist if (e.get("group") or 0) == gid]
    if seqs:
        return max(seqs)
    if not hist:  # no ring read: the rank's count of all its collectives stands for the default group's
        return (r.get("collectives") or 0) if not gid else None
    return 0 if len(hist) < HISTORY else None


def _elsewhere(r: dict) -> Optional[str]:
    """Where a rank that has NOT issued a given collective is, when that place is past the point or inside another
    collective (so it is not on its way to it): 'backward' (DDP's gradient all-reduce: not a counted call), 'forward'
    (DDP's forward synchronisation), 'collective' (another user collective), 'exited' (its process ended cleanly: it
    finished), 'peer-lost' (it ended when its peer's side closed). None when it is held outside any collective (its own
    code, data, start-up) or its place is unknown: that is a rank behind (never_arrived, RUN002), not a skipped call."""
    e = r.get("end")
    if e is None:
        st = r.get("state")
        if st in ("backward", "ddp-forward", "collective"):
            return {"ddp-forward": "forward"}.get(st, st)
        if st == "exited" or (not r.get("alive", True) and st not in ("outside", "busy", "data", "data-workers")):
            return "exited"
        return None
    lost = e.get("how") == "exception" and _names_lost_peer(e.get("exception"))
    if not (lost or timed_out_in_collective(e) or e.get("secondary") or e.get("terminated_by")):
        return None  # a failure of its own (an exception, a kill): RUN010's root cause, not a skipped call
    tb = f"{(e.get('exception') or {}).get('traceback') or ''}"
    if "torch/autograd" in tb or "_engine_run_backward" in tb:
        return "backward"
    if "nn/parallel/distributed.py" in tb:
        return "forward"
    if "distributed_c10d.py" in tb:
        return "collective"
    if lost:
        return "peer-lost"
    if r.get("before_end") == "collective":
        return "collective"  # its stack before the end: a collective or DDP's backward (not told apart there)
    return None


def extra_collective(recs: list) -> Optional[dict]:
    """A collective that some ranks issued and the others never will: a call under `if rank == 0:` /
    `if accelerator.is_main_process:` / `if is_local_main_process` (a barrier, `wait_for_everyone()`, a gather, a
    save's broadcast). By sequence number: the ranks `ahead` issued collective #s of a group, which the others have not
    issued, and the others are not on their way to it: they are inside another collective (DDP's gradient all-reduce
    of the next backward, another call), or finished and exited, or lost the connection when the ahead rank's side
    closed. It is called extra (not "the others are behind") when its line sits under an `if` that names the rank or
    the main process (its own or a caller's), or when every other rank has finished and exited (a rank still training
    at a later step may yet call it: uneven batches, RUN005's case). Collectives match by order, so every rank
    then waits in a different collective until a timeout, or the one whose peers left gets "Connection closed by
    peer". None when no such rank, or when the others are held outside any collective (a rank behind: never_arrived,
    RUN002)."""
    issued = []
    for r in recs:
        c = r.get("last_collective") or {}
        hist = r.get("coll_history") or []
        if not c or not hist:
            continue
        last = hist[-1]
        if last.get("state") == "async":
            continue  # issued with async_op: its completion is the caller's wait, not this call
        e = r.get("end")
        waiting = c.get("in") or r.get("state") == "collective" or (
            e is not None and (timed_out_in_collective(e) or (e.get("how") == "exception"
                                                              and _names_lost_peer(e.get("exception")))
                               and r.get("before_end") in ("collective", "", None)))
        if waiting:
            issued.append((r, last))
    if not issued:
        return None
    for r, last in sorted(issued, key=lambda x: -(x[1].get("seq") or 0)):
        gid, s = last.get("group") or 0, last.get("seq") or 0
        ranks = last.get("group_ranks")
        peers = [o for o in recs if o is not r and (ranks is None or o.get("rank") in ranks)]
        if not peers:
            continue
        ahead = [r] + [o for o, ol in issued if o is not r and (ol.get("group") or 0) == gid and (ol.get("seq") or 0) == s
                       and ol.get("op") == last.get("op")]
        others = [o for o in peers if o not in ahead]
        counts = {id(o): _count_in_group(o, gid) for o in others}
        if not others or any(v is None or v >= s for v in counts.values()):
            continue
        where = {id(o): _elsewhere(o) for o in others}
        if any(w is None for w in where.values()):
            continue  # someone is held outside any collective: behind, not past
        if any(where[id(o)] == "collective" and ((o.get("coll_history") or [{}])[-1].get("group") or 0) != gid
               and (o.get("last_collective") or {}).get("in") for o in others):
            continue  # waiting in another group's collective that this rank has not reached: a crossing (RUN008)
        frame = _frame_of_line(last.get("line")) or r.get("user_frame")
        gate = frame if (frame or {}).get("guard") else (  # the collective deeper down: a caller's gate (stack, traceback)
            r.get("gate_frame") or stacks.gated_user(stacks.traceback_frames(
                ((r.get("end") or {}).get("exception") or {}).get("traceback") or ""), ()))
        guard = (gate or {}).get("guard")
        step = r.get("step") or 0
        if not guard and not all(where[id(o)] == "exited" for o in others):
            continue  # no rank condition on the line: a rank still training may yet call it (uneven batches: RUN005)
        return {"ranks": [a.get("rank") for a in ahead], "op": last.get("op"), "seq": s, "group": gid,
                "group_name": last.get("group_name"), "line": last.get("line"), "user_frame": frame, "guard": guard,
                "gate_frame": gate if gate is not frame else None,
                "step": step, "timeout_s": r.get("pg_timeout_s"),
                "others": [{"rank": o.get("rank"), "issued": counts[id(o)], "where": where[id(o)], "step": o.get("step"),
                            "user_frame": o.get("user_frame"), "doing": o.get("doing")} for o in others]}
    return None


def fold_exit_codes(recs: list) -> None:
    """A rank that exited with a code of its own (no exception recorded, no signal) at or after the moment
    a peer died of a signal or an exception is a consequence of that peer: it caught the lost peer's error
    itself and exited (a last barrier that failed, a script's own error handling)."""
    dead = [r for r in recs if r.get("end")]
    firm = [r for r in dead if r["end"].get("how") in ("signal", "exception", "vanished") and r["end"].get("t") is not None]
    for r in dead:
        e = r["end"]
        if e.get("how") != "exit-code" or e.get("secondary") or e.get("t") is None:
            continue
        before = [x for x in firm if x is not r and x["end"]["t"] <= e["t"] + TIE_S]
        if before:
            e["secondary"] = True
            e["after_peer"] = min(before, key=lambda x: x["end"]["t"]).get("rank")


def bound_by_teardown(recs: list) -> None:
    """A rank whose end is known only from a poll (a SIGKILL, a vanished process: 0.2 s late, more under load) had
    failed by the time the launcher recorded tearing another rank down "after" it (launcher_hook's record, written when
    torchrun's agent had seen that failure): that record's time bounds its end (`t_src` "launcher"). Without it, a peer
    that raised its own error a few ms after the kill read as first (round 19: a SIGKILL at 559.013 seen by the poll at
    559.151, the peer's TypeError at 559.099, the teardown recorded at 559.047)."""
    by_rank = {r.get("rank"): r for r in recs if r.get("end") and r.get("rank") is not None}
    for r in recs:
        by = (r.get("end") or {}).get("terminated_by") or {}
        t = by.get("t")
        if by.get("who") != "torchrun" or not t:
            continue
        for q in by.get("after_ranks") or []:
            e = (by_rank.get(q) or {}).get("end") or {}
            if e and e.get("t_src") in ("poll", "launcher-poll") and (e.get("t") is None or t < e["t"]):
                e["t"], e["t_src"] = t, "launcher"
                if e.get("t_lo") is not None and e["t_lo"] >= t:
                    e.pop("t_lo")  # the two clocks' reads disagree: no interval known


PEER_SLACK_S = 5.0  # a poll-timed end this soon after a peer-loss error may be the peer it lost (polls lag under load)


def _peer_loss(end: dict) -> bool:
    return end.get("how") == "exception" and _names_lost_peer(end.get("exception"))


def _lost_peer(ordered: list) -> Optional[dict]:
    """The peer that the first error lost: when the earliest end is an exception saying a peer went away ("Connection
    reset by peer", a closed pair, ncclRemoteError), that peer was gone before it. A rank that ended silently (a
    signal nobody on record sent: not torchrun's teardown; or vanished) and was seen gone within PEER_SLACK_S is that
    peer, though its end is known only from a poll, later than the exception's own time (a SIGTERM to one worker: its
    peer's reset error carries the earlier time). None when no such rank exists."""
    if not ordered:
        return None
    first = ordered[0]["end"]
    if not _peer_loss(first) or first.get("t") is None:
        return None
    for r in ordered[1:]:
        e = r["end"]
        if e.get("how") in ("signal", "vanished") and not e.get("terminated_by") and not e.get("at_exit") and \
                e.get("signal_from") != "launcher" and e.get("t") is not None and e["t"] <= first["t"] + PEER_SLACK_S \
                and e.get("t_src") in ("poll", "launcher-poll", "launcher"):
            return r
    return None


CLOSED_BY_PEER = ("connection closed by peer", "connection reset by peer")  # Gloo's pair.cc, when the peer's end went
CLOSED_SLACK_S = 1.0  # a peer's recorded exception this much after a "closed by peer" can still be the one that closed it


def _closer(ordered: list) -> Optional[dict]:
    """The peer whose failure closed the connection of the first error: when the earliest end is Gloo's "Connection
    closed by peer" / "Connection reset by peer" (pair.cc: the peer closed its side), the peer failed before it, though
    its exception record may be stamped a few milliseconds later (each rank's excepthook stamps its own record: the
    timed-out barrier of a rank-0-only barrier, then its peer's closed pair, land within the same few ms). The first
    other rank whose own exception is not a closed pair, recorded within CLOSED_SLACK_S, is that peer. None else: a
    rank whose peer error has no such peer failure near it stays first (its peer vanished: _lost_peer)."""
    if not ordered:
        return None
    first = ordered[0]["end"]
    text = f"{(first.get('exception') or {}).get('message')}".lower()
    if first.get("how") != "exception" or first.get("t") is None or not any(w in text for w in CLOSED_BY_PEER):
        return None
    for r in ordered[1:]:
        e = r["end"]
        msg = f"{(e.get('exception') or {}).get('message')}".lower()
        if e.get("how") == "exception" and e.get("t_src") == "exception" and e.get("t") is not None \
                and e["t"] <= first["t"] + CLOSED_SLACK_S and not any(w in msg for w in CLOSED_BY_PEER):
            return r
    return None


def _overlaps(first: dict, later: dict) -> bool:
    """A precisely timed end (its exception's or fatal dump's own time) and a later one known only as an interval
    (last seen running, `t_lo`, to seen gone or the launcher's record, `t`) that contains it: which came first is not
    known (round 19, batch run-r19 re-read: a SIGKILL at 856.720, seen gone by the teardown record at 856.832, a peer's
    own TypeError at 856.790). Only where the last sight is recorded (`run`'s polls record it): without it the precise
    end stays first, as before."""
    if first.get("t_src") not in ("exception", "fatal") or later.get("t_src") not in ("poll", "launcher-poll", "launcher"):
        return False
    lo = later.get("t_lo")
    return lo is not None and lo < first["t"] <= later["t"]


def order_deaths(recs: list) -> Optional[dict]:
    """The first failure and the order of the others. Root causes (not `secondary`) before
    consequences, then by time; never by rank number. Two root-cause ends whose times are known only
    from polls and lie within TIE_S of each other are a tie: `tied` names them and `first_rank` is
    the one whose evidence is stronger, or None when nothing tells them apart."""
    dead = [r for r in recs if r.get("end")]
    if not dead:
        return None

    def key(r):
        return (r["end"].get("secondary", False), r["end"].get("t") if r["end"].get("t") is not None else float("inf"))

    ordered = sorted(dead, key=key)
    lost = _lost_peer(ordered) or _closer(ordered)
    if lost is not None:
        ordered.remove(lost)
        ordered.insert(0, lost)
    first = ordered[0]
    out = {"first_rank": first["rank"], "ranks": [r["rank"] for r in dead], "order": [r["rank"] for r in ordered],
           "first_pid": first.get("pid")}
    fe = first["end"]
    tied = [r for r in ordered[1:] if not r["end"].get("secondary") and not fe.get("secondary")
            and fe.get("t") is not None and r["end"].get("t") is not None
            and (abs(r["end"]["t"] - fe["t"]) <= TIE_S
                 and fe.get("t_src") in ("poll", "launcher-poll") and r["end"].get("t_src") in ("poll", "launcher-poll")
                 or _overlaps(fe, r["end"]))]
    if tied:
        out["tied"] = [first["rank"]] + [r["rank"] for r in tied]
        out["first_rank"] = None
    return out
