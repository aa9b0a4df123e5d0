"""A rank died: killed (OOM killer, -9), crashed (-11), CUDA out of memory, or an exception (exit 1).

The earliest death is the root cause; the watchdog timeouts it caused on the other ranks are folded
under its finding (`consequences`), never reported as faults of their own.
"""
from __future__ import annotations

import re
from typing import Optional

from ..job import Exit, Job, _LIB_FRAME
from ..signatures import entry_of
from ...facts import aborts as _aborts, bare_exceptions as _bare, fatal_signals as _cpu_traps, reraised as _reraised, wrappers
from ..verdict import INF, KIND_RULE, own_events, any_specific, escalated_kills, fold, pos as _pos, root_cause, specific_ranks, timed_out as _timed_out
from . import first_seen, hit, launcher_failure, ranks_text, rule, who_exited


_MEM_ROW = re.compile(r"^\s*(\d+)\s+([\d.]+)\s+(\S.*)$")


def _memory_table(job: Job, ev) -> list:
    """Ray's OOM report lists the top memory users (PID, MEM(GB), COMMAND) after its message: 'pid N: X GB (cmd)'."""
    out = []
    occ = job.get("memory_table_row")
    for row in (occ.first if occ else []):
        m = _MEM_ROW.match(row.line.text)
        if m and row.line.src == ev.line.src:
            out.append(f"pid {m.group(1)}: {m.group(2)} GB ({m.group(3).strip()[:60]})")
    return out


def _exit_evidence(e: Exit) -> dict:
    out = {"source": e.source}
    if e.code is not None:
        out["exitcode"] = e.code
    if e.signal:
        out["signal"] = e.signal
    if e.pid:
        out["pid"] = e.pid
    if e.local_rank is not None:
        out["local_rank"] = e.local_rank
    return out


@rule("LOG002", "rank-oom-killed", catalogue=("B7",))
def rank_oom_killed(job: Job):
    """A rank was killed with SIGKILL (exit code -9): almost always the host's out-of-memory killer.

    What it checks
        torchrun's `failed (exitcode: -9) local_rank: N`, the elastic table's `exitcode : -9` /
        `Signal 9 (SIGKILL) received by PID`, mp.spawn's `process N terminated with signal SIGKILL`,
        and the kernel's or SLURM's own words (`Out of memory: Killed process`, `oom-kill event`), and the
        shell's `Killed` (bash prints strsignal(SIGKILL)) also in glibc's translations (`已杀死` under zh_CN,
        `Getötet` under de: data/strsignal.json; read in a log's head and last lines, where the shell prints it)
        and glued to the end of a progress bar drawn with `\r`.

    Why it matters
        The killed rank prints nothing: it has no chance to. The other ranks then wait in their next
        collective until the watchdog fires 10 or 30 minutes later, and every one of them prints a
        timeout, so the log blames the wrong thing (pytorch/pytorch#118369 asks "which rank is
        stuck?"). Host RAM per rank grows with DataLoader workers, pinned memory and checkpoints
        loaded on every rank, so it often dies at the same point of every run (OpenBMB/MiniCPM-V#770).

    Example
        E0624 16:39:03.239000 140 torch/distributed/elastic/multiprocessing/api.py:833] failed
        (exitcode: -9) local_rank: 5 (pid: 4242) of binary: /usr/bin/python3

    Fix
        Confirm on that node with `dmesg -T | grep -iE 'killed process|out of memory'`, then cut host
        memory per rank (fewer DataLoader workers, `torch.load(..., mmap=True)`, load on rank 0 only)
        or ask the scheduler for more (`sbatch --mem=...`). `ddpdoctor check` on the node shows its
        memory per rank.
    """
    escalated = escalated_kills(job)   # torchrun's own SIGKILL after its SIGTERM wait: folded under the root cause
    killed = {r: e for r, e in job.dead_ranks(("SIGKILL",), unranked=True).items() if r not in escalated}
    kernel = job.get("oom_killer")
    alloc = own_events(job, "host_oom")
    if not killed and not (kernel and kernel.count) and not alloc:
        return
    if not killed and not (kernel and kernel.count):
        ev = alloc[0]
        rank = job.who(ev.line)
        host = ev.line.host or (job.rank_host.get(rank) if rank is not None else None)
        extra, sentence = fold(job, "LOG002", [rank])
        size = ev.data.get("bytes")
        entry = entry_of(ev)
        yield hit(job, "error", f"{'rank ' + str(rank) if rank is not None else 'a process'} ran out of host memory: an "
                  "allocation failed" + (f" ({int(size) / 2 ** 30:.1f} GiB asked)" if size and str(size).isdigit() else ""),
                  at=ev.line, stage=0, ranks=[rank] if rank is not None else [], hosts=[host] if host else [],
                  count=len(alloc),
                  detail=((entry or {}).get("meaning", "") + f" (the evidence: line {ev.line.lineno}.) " + sentence).strip(),
                  fix=("free -g; cat /sys/fs/cgroup/memory.max 2>/dev/null   # on that node: RAM and the job's limit\n"
                       "# then: ZeRO-3 without offload_optimizer (or offload to nvme), fewer ranks per node,\n"
                       "# torch.load(path, map_location='cpu', mmap=True), fewer DataLoader workers, or more RAM"),
                  evidence={"bytes": size, **extra})
        return
    if not killed:
        ev = kernel.first[0]
        entry = entry_of(ev)
        repo = (entry or {}).get("source", {}).get("repo", "")
        who_killed = {"ray-project/ray": "Ray's memory monitor", "SchedMD/slurm": "SLURM's memory cgroup"}.get(
            repo, "SLURM's memory cgroup" if re.search(r"slurmstepd|srun: error|oom[_-]kill event", ev.line.text)
            else "the kernel's OOM killer")
        victim = ev.data.get("comm")
        table = _memory_table(job, ev)
        rank = job.who(ev.line)
        extra, sentence = fold(job, "LOG002", [rank]) if rank is not None else ({}, "")
        yield hit(job, "error", f"{who_killed} killed a process of the job" + (f" ({victim}, pid {ev.data['pid']})"
                                                                               if victim and ev.data.get("pid") else ""),
                  at=ev.line, stage=0, ranks=kernel.ranks, hosts=kernel.hosts, count=kernel.count,
                  detail=(f"The log holds {who_killed}'s report (line {ev.line.lineno}): host RAM ran out and it killed "
                          "a process, most likely a rank or one of its DataLoader workers. It prints nothing itself; its "
                          "peers then fail or time out."
                          + (" The processes that held the most memory: " + "; ".join(table[:5]) + "." if table else "")
                          + (" " + sentence if sentence else "")),
                  fix="dmesg -T | grep -iE 'killed process|out of memory'   # on that node: which process, how big\n"
                      "# then: fewer DataLoader workers, torch.load(..., mmap=True), less CPU offload, or more memory "
                      "(sbatch --mem=...)",
                  evidence={"report": ev.line.text[:300], "top_memory": table[:10], **extra})
        return
    for rank in sorted(killed, key=lambda r: (killed[r].ts if killed[r].ts is not None else INF, _pos(killed[r].where))):
        e = killed[rank]
        confirmed = bool(kernel and kernel.count)
        ev, sentence = fold(job, "LOG002", [rank])
        host = e.host or job.rank_host.get(rank)
        how = "the host's OOM killer" if confirmed else "most likely the host's OOM killer"
        detail = (f"{who_exited(e, rank, cap=True)}{f' on {host}' if host else ''} ended on SIGKILL (exit code -9), {how}: nothing in a "
                  "Python program sends SIGKILL to itself, and the kernel does when host memory runs out. "
                  + ("The kernel's out-of-memory report is in the log. " if confirmed else
                     "Other senders: the scheduler (time or memory limit, scancel) or a manual kill -9. ")
                  + sentence)
        fix = (f"dmesg -T | grep -iE 'killed process|out of memory'   # on {host or 'that node'}: confirm\n"
               "# then lower host RAM per rank: DataLoader(num_workers=2, persistent_workers=False),\n"
               "# torch.load(path, map_location='cpu', mmap=True), or ask for more: sbatch --mem=...\n"
               f"ddpdoctor check   # on {host or 'that node'}: memory and /dev/shm per rank")
        title = f"{who_exited(e, rank)} was killed by SIGKILL (exit -9): {how}"
        if e.source == "shell":
            # bash's "Killed" (strsignal(SIGKILL)): no launcher summary, so no rank and no exit code printed
            what = e.where.text.strip()[:100] if e.where is not None else "Killed"
            title = f"the shell reported a process \"Killed\" (SIGKILL): {how}"
            detail = (f"The shell printed \"{what}\": bash's word for a job that died of SIGKILL (strsignal(9)). "
                      f"That is {how}: nothing in a Python program sends SIGKILL to itself, and the kernel does when "
                      "host memory (or the job's cgroup limit) runs out. Other senders: the scheduler (time or memory "
                      "limit, scancel) or a manual kill -9. The log does not say which rank it was "
                      f"(the evidence: line {e.where.lineno if e.where is not None else '?'}). " + sentence)
            fix = ("dmesg -T | grep -iE 'killed process|out of memory'   # on that node: which process, how big\n"
                   "cat /sys/fs/cgroup/memory.events   # oom_kill > 0: the job's memory limit (cgroup v2; "
                   "SLURM: sacct -j JOBID -o State,MaxRSS)\n" + fix.split("\n", 1)[1])
        evidence = dict(_exit_evidence(e))
        if confirmed:
            evidence["kernel_report"] = kernel.first[0].line.text[:200]
        evidence.update(ev)
        yield hit(job, "error", title, at=e.where, stage=0,
                  ranks=[rank], hosts=[host] if host else [], ts=e.ts, detail=detail.strip(), fix=fix,
                  evidence=evidence)


@rule("LOG003", "rank-segfault")
def rank_segfault(job: Job):
    """A rank crashed with a segmentation fault (exit code -11, SIGSEGV).

    What it checks
        torchrun's `failed (exitcode: -11)`, the elastic table's `Signal 11 (SIGSEGV)`, mp.spawn's
        `terminated with signal SIGSEGV`, and `Segmentation fault` / `Fatal Python error:
        Segmentation fault` lines. Where CPython's faulthandler printed the crashing thread's stack
        ("Current thread 0x... (most recent call first):", then `File "x.py", line N in f` frames:
        Modules/faulthandler.c, Python/traceback.c, data/python_faulthandler.json), the crash is named at
        that thread's innermost frame of the program's own code.

    Why it matters
        A native crash leaves no Python traceback, so the other ranks' timeouts are all the log shows.
        The usual causes are extensions built against another torch or CUDA (apex, flash-attn,
        custom ops), mixed library versions across nodes, or a process forked after CUDA or NCCL
        threads started (NVIDIA/Megatron-LM#1880 is one such report: exitcode -11 on one GPU type).

    Example
        [0]:
          rank      : 3 (local_rank: 3)
          exitcode  : -11 (pid: 5123)
          traceback : Signal 11 (SIGSEGV) received by PID 5123

    Fix
        Rerun with `PYTHONFAULTHANDLER=1` to get the Python stack of the crash, and rebuild native
        extensions against the installed torch. `ddpdoctor check` on each node compares versions.
    """
    crashed = job.dead_ranks(("SIGSEGV",), unranked=True)
    lines = job.get("segfault")
    if not crashed and not (lines and lines.count):
        return
    if not crashed:
        ev = lines.first[0]
        rank = ev.line.rank
        extra, sentence = fold(job, "LOG003", [rank])
        dump = fault_dump(job, rank, "SIGSEGV")
        who = 'rank ' + str(rank) if rank is not None else 'a process'
        if dump is not None and dump.get("frame"):
            yield _fault_hit(job, dump, who, "a segmentation fault (SIGSEGV)", extra, sentence,
                             ranks=lines.ranks, hosts=lines.hosts, count=lines.count)
            return
        yield hit(job, "error", f"{who} crashed with a "
                  "segmentation fault", at=ev.line, stage=0, ranks=lines.ranks, hosts=lines.hosts, count=lines.count,
                  detail=("A native crash (SIGSEGV) leaves no Python traceback. " + sentence).strip(),
                  fix=_SEGV_FIX, evidence=extra)
        return
    for rank, e in sorted(crashed.items(), key=lambda kv: (kv[1].ts if kv[1].ts is not None else INF, _pos(kv[1].where))):
        extra, sentence = fold(job, "LOG003", [rank])
        host = e.host or job.rank_host.get(rank)
        dump = fault_dump(job, rank, "SIGSEGV")
        if dump is not None and dump.get("frame"):
            yield _fault_hit(job, dump, who_exited(e, rank), "a segmentation fault (SIGSEGV, exit -11)", extra, sentence,
                             ranks=[rank] if rank is not None else [], hosts=[host] if host else [], ts=e.ts,
                             evidence=_exit_evidence(e))
            continue
        yield hit(job, "error", f"{who_exited(e, rank)} crashed with a segmentation fault (SIGSEGV, exit -11)", at=e.where,
                  stage=0, ranks=[rank], hosts=[host] if host else [], ts=e.ts,
                  detail=(f"{who_exited(e, rank, cap=True)} died in native code, with no Python traceback. Usual causes: an extension "
                          "(apex, flash-attn, custom CUDA ops) built against another torch or CUDA, different "
                          "library versions across nodes, or a process forked after CUDA/NCCL threads started. "
                          + sentence).strip(),
                  fix=_SEGV_FIX, evidence={**_exit_evidence(e), **extra})


def fault_dump(job: Job, rank, signal: str) -> Optional[dict]:
    """CPython faulthandler's dump of `signal` for this rank (Job.fault_dumps; facts.faulthandler), or of a process
    the log does not name when the rank is not known either; None when there is none."""
    for d in job.fault_dumps:
        if d["signal"] == signal and (d["rank"] == rank or d["rank"] is None or rank is None):
            return d
    return None


def _fault_hit(job: Job, dump: dict, who: str, what: str, extra: dict, sentence: str, ranks=None, hosts=None, count=None,
               ts=None, evidence=None):
    """The finding for a process that faulthandler saw die of a fatal signal, at the innermost frame of the program's
    own code in the crashing thread's stack (the native code it called crashed: no Python exception was raised)."""
    fr, top = dump["frame"], dump.get("top") or dump["frame"]
    at = f"{fr['file']}:{fr['line']} in {fr['func']}"
    inner = (f" The innermost frame is {top['file']}:{top['line']} in {top['func']}, library code the program called "
             "from there." if top is not fr and top != fr else "")
    return hit(job, "error", f"{who} crashed with {what} at {at} (faulthandler's stack of the crashing thread)",
               at=dump["line"], stage=0, ranks=ranks if ranks is not None else ([dump["rank"]] if dump["rank"] is not None
                                                                                else []),
               hosts=hosts or [], count=count, ts=ts,
               detail=(f"Python's faulthandler caught {dump['signal']} (\"Fatal Python error: {dump['what']}\", line "
                       f"{dump['line'].lineno}) and printed the crashing thread's stack: its innermost frame of the "
                       f"program's own code is {at}.{inner} The process died in native code called from that line (an "
                       "extension, a CUDA or C++ library), so no Python exception and no traceback follow. "
                       + sentence).strip(),
               fix=(f"# the native crash under {at}: its C stack\n"
                    "gdb -batch -ex run -ex bt --args python <script> <args>   # or: ulimit -c unlimited; gdb python core\n"
                    "pip install --force-reinstall --no-build-isolation <extension>   # rebuild against the installed torch\n"
                    "ddpdoctor check   # on each node: torch/CUDA/NCCL versions and packages"),
               evidence={"faulthandler": {"signal": dump["signal"], "frame": fr, "innermost": top}, **(evidence or {}),
                         **extra})


def _cpu_trap(finding, signal: str):
    """A death on a signal the CPU raises (SIGILL: an instruction it does not implement; SIGFPE: an integer division
    by zero; data/fatal_signals.json, arch/x86/kernel/traps.c) with what that signal means and its fix; any other
    finding as it is."""
    row = _cpu_traps.of(signal)
    if row is None:
        return finding
    import dataclasses
    ev = dict(finding.evidence or {})
    ev["cpu_trap"] = row["trap"]
    return dataclasses.replace(finding, detail=(finding.detail + " " + row["meaning"]).strip(),
                               fix=row["fix"] + "\n" + finding.fix, evidence=ev)


_SEGV_FIX = ("PYTHONFAULTHANDLER=1 torchrun ...   # prints the Python stack of the crashing thread\n"
             "pip install --force-reinstall --no-build-isolation <extension>   # rebuild against the installed torch\n"
             "ddpdoctor check   # on each node: torch/CUDA/NCCL versions and packages")


def _cuda_oom_gpu(text: str) -> Optional[str]:
    m = re.search(r"GPU (\d+) has a total capac", text)
    return m.group(1) if m else None


@rule("LOG005", "cuda-out-of-memory", catalogue=("A10",))
def cuda_out_of_memory(job: Job):
    """A rank ran out of GPU memory ("CUDA out of memory").

    What it checks
        `torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ...` (older torch:
        `RuntimeError: CUDA out of memory`) per rank, and which GPU each message names.

    Why it matters
        When only one rank runs out, the others block in the next collective and time out, so the
        OOM is buried under their timeouts. One rank alone running out means uneven memory: extra
        work on rank 0 (evaluation, logging, saving) or every rank on GPU 0 because
        `torch.cuda.set_device(local_rank)` was never called (pytorch/examples#969). When several
        ranks' messages name the same GPU, they share it.

    Example
        [rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a
        total capacity of 79.15 GiB of which 1.06 GiB is free.

    Fix
        Lower the per-device batch size (keep the global batch with gradient accumulation), enable
        gradient checkpointing, set `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`; call
        `torch.cuda.set_device(local_rank)` before any CUDA work.
    """
    occ = job.get("cuda_oom")
    if not occ or not occ.count:
        return
    ranks = sorted(occ.ranks)
    gpus = {}
    for ev in occ.first:
        g = _cuda_oom_gpu(ev.line.text)
        if g is not None and ev.line.rank is not None:
            gpus[ev.line.rank] = g
    first = min(occ.first, key=lambda ev: (ev.line.ts if ev.line.ts is not None else INF, _pos(ev.line)))
    rank = first.line.rank
    extra, sentence = fold(job, "LOG005", ranks)
    shared = len(set(gpus.values())) == 1 and len(gpus) > 1
    who = f"rank {rank}" if rank is not None else "a rank"
    attributed = None
    if not ranks:
        # No line says whose message it is, but the launcher reports exactly one process failing (deepspeed's
        # "['python', '-u', 'x.py', '--local_rank=0', ...] exits with return code = 1", torchrun's failed row): the
        # out-of-memory message is that process's. Said as an inference from the exit, not as a line's rank.
        bad = {(e.rank if e.rank is not None else e.local_rank) for e in job.exits
               if ((e.code not in (None, 0)) or e.signal) and (e.rank is not None or e.local_rank is not None)}
        if len(bad) == 1 and len(job.exits) >= 1:
            attributed = next(iter(bad))
            ranks, rank = [attributed], attributed
            who = (f"local rank {attributed} (the one process the launcher reports failing; the message itself "
                   f"names no rank)")
    # the runtime's own words: torch's ROCm build says "HIP out of memory" (round 14)
    words = "HIP out of memory" if "HIP out of memory" in first.line.text else "CUDA out of memory"
    title = f"{who} ran out of GPU memory ({words})"
    if len(ranks) > 1:
        title = f"ranks {ranks_text(ranks)} ran out of GPU memory ({words}), rank {rank} first"
    detail = []
    if shared:
        detail.append(f"Every message names GPU {next(iter(gpus.values()))}: the ranks share one GPU, which "
                      "happens when torch.cuda.set_device(local_rank) is never called.")
    elif len(ranks) == 1 and job.world and job.world > 1 and (not job.world_guessed or len([r for r in job.ranks if r is not None and r >= 0]) > 1):
        # with no line counting the ranks, "of N" is a lower bound, and the claim needs other ranks in sight
        of = f"at least {job.world} (a guess from the highest rank seen)" if job.world_guessed else str(job.world)
        detail.append(f"Only rank {rank} of {of} ran out: its memory use differs from the others "
                      "(extra work on that rank, such as evaluation or saving, or uneven batch shapes).")
    setup = _setup_phase(job)
    procs = re.findall(r"Process (\d+) has ([\d.]+ [KMGT]i?B) memory in use", first.line.text)
    fix = ("# per-device batch down, same global batch:\n"
           "--per_device_train_batch_size 4 --gradient_accumulation_steps 8\n"
           "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n"
           "torch.cuda.set_device(int(os.environ['LOCAL_RANK']))   # before any CUDA work")
    if first.line.nccl is not None or first.kind == "cuda_oom" and "NCCL" in first.line.text and "Cuda failure" in first.line.text:
        title = f"{who}: NCCL ran out of GPU memory while setting up its buffers (Cuda failure 'out of memory')"
        detail.insert(0, "NCCL allocates its buffers and connections on the GPU when it first connects the ranks, on top "
                         "of the model: the GPU had no room left for them. The network and remote errors that follow on "
                         "the other ranks are consequences.")
        fix = ("# leave room for NCCL on the GPU: a smaller model shard or batch, or smaller NCCL buffers\n"
               "export NCCL_BUFFSIZE=2097152   # 2 MiB instead of 4 MiB per channel\n"
               "nvidia-smi   # on that node: what else holds memory on the GPU")
    elif len(procs) >= 2:
        title = f"{who} ran out of GPU memory: {len(procs)} processes hold memory on that GPU"
        detail.insert(0, "The message lists more than one process on the GPU (" + ", ".join(
            f"pid {p} {m}" for p, m in procs[:4]) + "). Other ranks created CUDA contexts there: torch.load(...) "
            "without map_location puts the checkpoint's tensors on the GPU they were saved from (GPU 0) in every rank, "
            "or a rank never called torch.cuda.set_device(local_rank).")
        fix = ("state = torch.load(path, map_location='cpu')   # or map_location=f'cuda:{local_rank}'\n"
               "torch.cuda.set_device(int(os.environ['LOCAL_RANK']))   # before any CUDA work\n"
               "nvidia-smi   # one process per GPU while the job runs")
    elif setup:
        title = f"{who} ran out of GPU memory while setting the model up ({setup}): the model does not fit"
        detail.insert(0, f"The allocation failed in {setup}, before any training step: under plain DDP every GPU holds the "
                         "whole model, its gradients and the optimizer states (about 16 bytes per parameter with Adam in "
                         "mixed precision). A smaller batch does not change that; sharding them across the GPUs does.")
        fix = ("# shard parameters, gradients and optimizer states across the GPUs:\n"
               "--deepspeed ds_zero3.json            # ZeRO-3 ({\"zero_optimization\": {\"stage\": 3}})\n"
               "--fsdp 'full_shard auto_wrap'        # or FSDP\n"
               "# or train adapters only: peft LoraConfig(r=16, target_modules=[...]), get_peft_model(model, config)")
    detail.append(sentence)
    m = re.search(r"Tried to allocate ([\d.]+ [KMGT]i?B)", first.line.text)
    yield hit(job, "error", title, at=first.line, stage=0, ranks=ranks or [], hosts=occ.hosts, count=occ.count,
              detail=" ".join(d for d in detail if d), fix=fix,
              evidence={"tried_to_allocate": m.group(1) if m else None, "gpus": gpus, "setup_phase": setup,
                        "rank_from_launcher_exit": attributed,
                        "processes_on_gpu": [p for p, _m in procs], **extra})


# Where an allocation fails before training: wrapping the model (DDP/FSDP/DeepSpeed), loading it, moving it to
# the GPU, or creating optimizer states on the first step.
_SETUP_FUNCS = {"_sync_module_states", "_sync_params_and_buffers", "_verify_param_shape_across_processes",
                "from_pretrained", "_move_model_to_device", "_configure_distributed_model", "_broadcast_model",
                "_init_group", "_wrap_model", "prepare_model"}
_SETUP_FILES = re.compile(r"parallel/distributed\.py|wrappers/distributed\.py|fully_sharded_data_parallel\.py|"
                          r"deepspeed/runtime/engine\.py|deepspeed/__init__\.py")


def _setup_phase(job: Job) -> Optional[str]:
    """The model set-up step an OOM's traceback went through, if any ('DistributedDataParallel.__init__')."""
    for frames in job.oom_frames:
        for file, func in frames:
            if func in _SETUP_FUNCS:
                return func
            if func == "__init__" and _SETUP_FILES.search(file):
                return f"{file.rsplit('/', 1)[-1]} __init__ (wrapping the model)"
    return None


_GENERIC_FIX = """\
# The exception above is the first failure; fix it and rerun. To see every rank's traceback:
torchrun --tee 3 ...                       # or --redirects 3 --log-dir logs/
from torch.distributed.elastic.multiprocessing.errors import record
@record
def main(): ...                            # writes the traceback to the elastic error file"""


def _teardown_abort(job: Job, rank: int, e: Exit, extra: dict, sentence: str):
    """SIGABRT after libstdc++'s "terminate called without an active exception", no Python exception
    anywhere: a process-group worker thread ended by CPython while the interpreter shut down (torch's own
    teardown, facts.teardown: with or without destroy_process_group()). Its texts are RUN013's."""
    from ddpdoctor.facts import teardown

    gloo = teardown.entry("gloo")
    line = job.get("teardown_abort").first[0].line
    return hit(job, "error", f"{who_exited(e, rank)} died on SIGABRT (exit {e.code}) while shutting down: \"terminate called "
               "without an active exception\": torch's process-group teardown, after the rank's work", at=e.where,
               stage=0, ranks=[rank], hosts=[e.host] if e.host else [], ts=e.ts,
               detail=(gloo.get("abort_detail", "") + " " + sentence).strip(),
               fix=gloo.get("fix", ""),
               evidence={**_exit_evidence(e), "terminate_line": first_seen(job, line), **extra})


def _escalation_sentence(job: Job) -> str:
    """Says which SIGKILLs were torchrun's own (escalated_kills), so they are folded here, not lost."""
    ranks = sorted(escalated_kills(job))
    if not ranks:
        return ""
    who = ", ".join(str(r) for r in ranks)
    return (f" Rank{'s' if len(ranks) > 1 else ''} {who} ended on SIGKILL later: torchrun stops the other workers with "
            "SIGTERM, waits (30 s by default), then sends SIGKILL to those still alive; that is not the OOM killer.")


def _mpirun_named(job: Job, line) -> Optional[int]:
    """The rank Open MPI's report names for an exception no rank prefix names: the traceback has no prefix (mpirun
    without --tag-output), and below it, in the same file, mpirun's "The first process to do so was: Process name:
    [[jobid,1],R] Exit code: N" names one rank, with no other failed process and no ranked exception in the logs
    (round 16 wave 4, b111_20). Else None."""
    if any(r is not None and lst for r, lst in job.exceptions.items()):
        return None
    failed = [e for e in job.exits if (e.code not in (None, 0)) or e.signal]
    named = [e for e in failed if e.source == "mpirun" and e.rank is not None and e.where is not None
             and e.where.src == line.src and e.where.lineno > line.lineno]
    if len(named) != 1 or len(failed) != 1:
        return None
    return named[0].rank


def _cut_traceback_rank(job: Job, line) -> Optional[int]:
    """The rank whose traceback an unranked exception line ends, told by the traceback itself: the log names one rank
    only, that rank's frames carry its prefix (Open MPI's --tag-output "[1,7]<stderr>:", torchrun's "[rank7]:") and
    stop with no exception line of their own, and the exception was pasted apart from them, unprefixed, in the same
    file (a writer who quotes the message first, then the cut traceback: round 23, issue 24, b207_03). Else None."""
    if len(job.ranks) != 1 or any(r is not None and lst for r, lst in job.exceptions.items()):
        return None
    (r,) = tuple(job.ranks)
    frames = job.headless_frames.get((line.src, r))
    tb = job._tb.get((line.src, r))
    return r if (frames is not None and frames[1] >= 2) or tb else None




def _abort_reason(job: Job, e: Exit) -> Optional[dict]:
    """Why a process that died on SIGABRT aborted itself: the last abort message (facts.aborts over data/abort_texts.json)
    printed in the same file within 40 lines before the report of its death, with its line number; None where none."""
    w = e.where
    if w is None:
        return None
    near = [ln for ln in job.abort_lines.get(w.src, ()) if 0 <= w.lineno - ln.lineno <= 40]
    if not near:
        return None
    got = _aborts.reasons("\n".join(ln.text for ln in near))
    if not got:
        return None
    r = dict(got[-1])
    r["lineno"] = next((ln.lineno for ln in reversed(near) if ln.text.strip()[:60] in r["line"] or r["line"][:60] in ln.text),
                       near[-1].lineno)
    return r


def _reraised_by(job: Job, lst: list, ev, etype: str, msg: str):
    """(row, unit, original) where this exception is a re-raise whose message names where it was first raised
    (data/reraised_exceptions.json: "Caught KeyError in DataLoader worker process 3."), or whose message is cut after
    "Caught X" under torch/_utils.py's reraise frame; original is (event, frame) of the first exception line of the same
    class after it in the same file (the last line of the 'Original Traceback'), or None where the log cuts it."""
    got = _reraised.of(etype, msg)
    if got is None:
        inner = ev.data.get("tb_inner")
        if not (inner and inner[1] == "reraise" and str(inner[0]).replace("\\", "/").endswith("torch/_utils.py")
                and _reraised.cut(etype, msg)):
            return None
        got = (_reraised.rows()[0], "")
    row, unit = got
    for oev, oframe in lst:
        if (oev is not ev and oev.line.src == ev.line.src and 0 < oev.line.lineno - ev.line.lineno <= 400
                and str(oev.data.get("type", "")).rsplit(".", 1)[-1] in (etype, "RuntimeError")):
            return row, unit, (oev, oframe)
    return row, unit, None


@rule("LOG004", "rank-failed")
def rank_failed(job: Job):
    """A rank failed with an exception, a signal or an exit code that no more specific rule explains.

    What it checks
        The first exception per rank that is not itself a consequence of another rank's failure
        (watchdog timeouts, "Connection reset by peer", ChildFailedError), and exits on signals
        other than SIGKILL/SIGSEGV/SIGTERM (e.g. SIGABRT, SIGBUS), and CPython faulthandler's dump of
        such a signal ("Fatal Python error: Aborted", "Floating point exception", "Illegal instruction",
        then the crashing thread's frames; no Traceback header): a crash at that thread's innermost frame
        of the program's own code. Every format of such a death is read the same (torchrun's exitcode -4,
        srun's "task 3: Illegal instruction (core dumped)", bash's bare "Illegal instruction (core dumped)",
        faulthandler's dump); a death on a signal the CPU raises says what it refused (SIGILL: an
        instruction it does not implement, #UD; SIGFPE: an integer division by zero, #DE;
        data/fatal_signals.json from arch/x86/kernel/traps.c). The earliest one is the root cause. A wrapper that only carries a cause
        raised elsewhere (Ray's RayTaskError(X), ActorDiedError, TrainingFailedError, TuneError:
        data/wrapper_exceptions.json) is read by the cause's own exception line, the wrapper folded into it;
        a wrapper with no cause in the log, not even by its class's name, is left to LOG028. An exception with no
        message raised in a framework frame whose check is known (DistributedSampler's bare asserts in
        torch/utils/data/distributed.py: data/bare_exceptions.json) is named by that check.

    Why it matters
        torchrun's "Root Cause (first observed failure)" orders ranks by when their exit was noticed,
        not by when they failed; a peer that aborted while the real culprit was still exiting gets
        named instead (measured: 2 of 22 runs), and without `@record` the table says only "To enable
        traceback see ..." (pytorch/pytorch#91278). Timestamps and the exception itself tell the truth.

    Example
        [rank2]: Traceback (most recent call last):
        [rank2]:   File "train.py", line 57, in <module>
        [rank2]: ValueError: Expected input batch_size (16) to match target batch_size (8).

    Fix
        Fix the first exception; decorate the entry point with
        `torch.distributed.elastic.multiprocessing.errors.record` so every rank's traceback reaches
        torchrun's report.
    """
    root = root_cause(job)
    root = root[0] if root else None
    specific = specific_ranks(job)
    reported = 0
    for rank, lst in sorted(job.exceptions.items(), key=lambda kv: _first_ts(kv[1])):
        if rank in specific or not lst:
            continue
        ev, frame = lst[0]
        if _is_specific(job, ev.line) or _lost_with_ray_node(job, ev.line):
            continue
        wrapper = None
        if wrappers.is_wrapper(str(ev.data.get("type", ""))):
            # a wrapper (Ray's RayTaskError(X), ActorDiedError, TrainingFailedError, TuneError: data/
            # wrapper_exceptions.json) only carries the cause raised elsewhere: the cause's own exception line (inside the
            # wrapper's text, or above it) is the failure, the wrapper folded into it; a wrapper whose cause the log does
            # not show, not even by its class's name (RayTaskError(ValueError) names it), is no explanation at all:
            # LOG028 reports it as an unexplained failure
            cause = _cause_of(lst)
            if cause is not None and _is_specific(job, cause[0].line):
                continue
            if cause is not None:
                wrapper = ev
                ev, frame = cause
            elif wrappers.inner(str(ev.data.get("msg", ""))) is not None:
                wrapper = ev   # the cause quoted inside the wrapper's own text, on its line
            elif not wrappers.wrapped(str(ev.data.get("type", ""))):
                continue   # no cause in the log, not even its class's name
        if rank is None:
            rank = _mpirun_named(job, ev.line)
        cut_rank = None
        if rank is None:
            rank = cut_rank = _cut_traceback_rank(job, ev.line)
        local = None
        if rank is None and not any(r is not None for r in job.exceptions):
            # no line names the rank; the launcher reports one process failing ("failed (exitcode: 1) local_rank: 0"):
            # the exception is taken to be its, named by its local rank, and by its global rank only where the log
            # shows that too (a one-node launch, the launcher's table: rules/__init__.launcher_failure)
            got = launcher_failure(job)
            if got is not None:
                local, rank, how = got
        guess = ""
        if rank is None and local is None and not any(r is not None for r in job.exceptions):
            # the reporter's own words name the rank ("it dies on rank 3") and no line of the log does: a guess, said
            said = job.prose_rank(ev.line)
            if said is not None:
                rank = said[0]
                guess = (f" (rank {rank} is a guess: the reporter's words name it, line {said[1].lineno}, and the "
                         "exception names none)")
        extra, sentence = fold(job, "LOG004", [rank])
        where = ""
        if frame and not _LIB_FRAME.search(frame["file"]):
            where = f" at {frame['file']}:{frame['line']} in {frame['func']}"
        exits = job.exits_of(rank)
        code = next((e.code for e in exits if e.code is not None), None)
        who = (f"local rank {local}" + (f" (rank {rank})" if rank is not None else "") if local is not None else
               f"rank {rank}" if rank is not None else "a process")
        etype = ev.data.get("type", "exception").rsplit(".", 1)[-1]
        msg = str(ev.data.get("msg", "")).strip()
        if wrapper is ev:
            etype, msg = wrappers.inner(msg)
            etype = etype.rsplit(".", 1)[-1]
        if wrapper is not None:
            wtype = str(wrapper.data.get("type", "")).rsplit(".", 1)[-1]
            sentence = (f"It reached the caller as {wtype} (line {wrapper.line.lineno}), which only carries it. "
                        + sentence).strip()
            extra = {**extra, "wrapped_by": {"exception": wtype, "line": wrapper.line.lineno}}
        said = f": {msg[:160]}" if msg else " (no message: the class alone)"
        rer = _reraised_by(job, lst, ev, etype, msg) if wrapper is None else None
        if rer is not None:
            # raised again in this process after another process or thread caught it (torch's ExceptionWrapper.reraise
            # for a DataLoader worker, the pin-memory thread: data/reraised_exceptions.json): the original is the cause
            row, unit, orig = rer
            unit_s = f"{row['unit']} {unit}" if unit else "a DataLoader worker (or its pin-memory thread)"
            if orig is not None:
                oev, oframe = orig
                omsg = str(oev.data.get("msg", "")).strip()
                owhere = (f" at {oframe['file']}:{oframe['line']} in {oframe['func']}"
                          if oframe and not _LIB_FRAME.search(oframe["file"]) else "")
                where = ""
                said = (f" in {unit_s}{owhere}, re-raised in the training process: {omsg[:160]}" if omsg else
                        f" in {unit_s}{owhere}, re-raised in the training process (no message: the class alone)")
                sentence = (f"The original exception is at line {oev.line.lineno}. " + row["meaning"] + " "
                            + sentence).strip()
            else:
                said = f" in {unit_s}, re-raised in the training process (its original traceback is cut from this log)"
                sentence = ((f"The message is cut after 'Caught {etype}', and the frame that raised it is torch/_utils.py "
                             f"ExceptionWrapper.reraise (an inference from the frame). " if not unit else "")
                            + row["meaning"] + " " + sentence).strip()
            extra = {**extra, "reraised": {"from": row["name"], "unit": unit,
                                           "original_line": orig[0].line.lineno if orig is not None else None,
                                           "source": row["source"]["repo"] + "@" + row["source"]["commit"][:8]}}
        inner = ev.data.get("tb_inner") if not msg and wrapper is None else None
        bare = _bare.of(etype, inner[0], inner[1]) if inner else None
        if bare is not None:
            # a framework's own bare check, told by the frame that raised it (data/bare_exceptions.json)
            said = f" (raised in {bare['file']} {bare['func']}, no message): {bare['what']}"
            sentence = (bare["meaning"] + " " + sentence).strip()
            extra = {**extra, "bare_exception": {"file": bare["file"], "func": bare["func"],
                                                 "source": bare["source"]["repo"] + "@" + bare["source"]["commit"][:8]}}
        yield hit(job, "error", f"{who} failed with {etype}{where}{said}{guess}", at=ev.line, stage=0,
                  ranks=[rank] if rank is not None else [], hosts=[job.rank_host[rank]] if rank in job.rank_host else [],
                  detail=(f"{'This is the earliest failure in the logs. ' if rank == root else ''}"
                          f"{who.capitalize()} raised {etype}" + (f" and exited with code {code}" if code is not None else "")
                          + ". " + (f"No line names the rank; the launcher reports one process failing, local rank {local}"
                                    + (f" (rank {rank}: {how})" if rank is not None and how else
                                       " (its global rank is not in these logs)" if rank is None else "")
                                    + ": the exception is taken to be its (an inference from the exit). "
                                    if local is not None else "")
                          + (f"The exception line names no rank; rank {rank} is the only rank in the log, and its "
                             f"traceback's frames stop with no exception line of their own: the exception is taken to "
                             f"be its (an inference from the traceback). " if cut_rank is not None else "")
                          + sentence).strip(),
                  fix=((bare["fix"] + "\n" + _GENERIC_FIX) if bare is not None else
                       (rer[0]["fix"] + "\n" + _GENERIC_FIX) if rer is not None else _GENERIC_FIX),
                  evidence={"exception": etype, "message": msg[:500], "frame": frame, **extra,
                            **({"rank_from_launcher_exit": local} if local is not None else {}),
                            **({"rank_from_cut_traceback": cut_rank} if cut_rank is not None else {})})
        reported += 1
        if reported >= 3:
            break
    # Signals no specific rule reports (SIGABRT not caused by a watchdog, SIGBUS, SIGILL, SIGFPE).
    # (unranked: a shell's report of the command it ran, "run.sh: line 184: 2324239 Aborted (core dumped) litgpt
    # pretrain ...", bash jobs.c pretty_print_job, names the process and its signal but no rank; round 14, wave 3)
    other = job.dead_ranks(("SIGABRT", "SIGBUS", "SIGILL", "SIGFPE"), unranked=True)
    timed_out = _timed_out(job)
    reported_ranks = {r for r, lst in job.exceptions.items() if lst}
    for rank, e in sorted(other.items()):
        if rank in specific or rank in reported_ranks or (e.signal == "SIGABRT" and rank in timed_out):
            continue
        if root is not None and rank != root:
            continue  # a later abort is a consequence, folded under the root cause
        extra, sentence = fold(job, "LOG004", [rank])
        if e.signal == "SIGABRT" and job.has("teardown_abort") and not any(job.exceptions.values()):
            yield _teardown_abort(job, rank, e, extra, sentence)
            continue
        dump = fault_dump(job, rank, e.signal)
        if dump is not None and dump.get("frame"):
            yield _cpu_trap(_fault_hit(job, dump, who_exited(e, rank), f"{e.signal} (exit {e.code})", extra, sentence,
                                       ranks=[rank] if rank is not None else [], hosts=[e.host] if e.host else [],
                                       ts=e.ts, evidence=_exit_evidence(e)), e.signal)
            continue
        cmd = _SHELL_CMD.search(e.where.text) if (rank is None and e.source == "shell" and e.where is not None) else None
        ran = f" (the shell ran: {cmd.group(1)[:80]})" if cmd else ""
        why = _abort_reason(job, e) if e.signal == "SIGABRT" else None
        if why is not None:
            # SIGABRT is raised by the process itself (abort()): the line it printed just before says why
            # (data/abort_texts.json: libstdc++'s verbose terminate handler, glibc's assert/assert.c __assert_fail)
            ran = f": it aborted itself after {_aborts.text(why)[:160]}{ran}"
            sentence = (f"The line before the abort (line {why['lineno']}) is why: {why['meaning']} " + sentence).strip()
            extra = {**extra, "abort_reason": {"id": why["id"], "line": why["lineno"]}}
        yield _cpu_trap(hit(job, "error", f"{who_exited(e, rank)} died on {e.signal} (exit {e.code}){ran}", at=e.where, stage=0,
                  ranks=[rank] if rank is not None else [],
                  hosts=[e.host] if e.host else [], ts=e.ts,
                  detail=(f"{who_exited(e, rank, cap=True)} ended on a signal, without a Python exception in the logs. "
                          + ("SIGABRT usually comes from a C++ exception (`terminate called after throwing`) "
                             "or a failed assertion in a native library. " if e.signal == "SIGABRT" else "")
                          + sentence).strip(),
                  fix=_GENERIC_FIX.replace("The exception above", "The crash"), evidence={**_exit_evidence(e), **extra}),
                        e.signal)
    # CPython faulthandler's dump of a fatal signal other than SIGSEGV (LOG003's) that no exit line reports
    # (Modules/faulthandler.c: SIGABRT, SIGBUS, SIGILL, SIGFPE; data/python_faulthandler.json): the process crashed in
    # native code under the crashing thread's innermost frame of its own code
    seen_dump = False
    for dump in job.fault_dumps:
        rank = dump["rank"]
        if (seen_dump or dump["signal"] == "SIGSEGV" or dump["signal"] in ("SIGBUS",) and job.has("bus_error")
                or rank in specific or rank in reported_ranks or rank in other
                or (None in other and rank is None) or (root is not None and rank != root)):
            continue
        seen_dump = True
        extra, sentence = fold(job, "LOG004", [rank])
        who = f"rank {rank}" if rank is not None else "a process"
        if dump.get("frame"):
            yield _cpu_trap(_fault_hit(job, dump, who, f"{dump['signal']} ({dump['what']})", extra, sentence), dump["signal"])
        else:
            yield _cpu_trap(hit(job, "error", f"{who} crashed with {dump['signal']} ({dump['what']}): Python's faulthandler caught it",
                      at=dump["line"], stage=0, ranks=[rank] if rank is not None else [],
                      detail=(f"Python's faulthandler printed \"Fatal Python error: {dump['what']}\" (line "
                              f"{dump['line'].lineno}): the process died of {dump['signal']} in native code, with no Python "
                              "exception; its stack of the program's own code is not in these lines. " + sentence).strip(),
                      fix=_GENERIC_FIX.replace("The exception above", "The crash"),
                      evidence={"faulthandler": {"signal": dump["signal"], "innermost": dump.get("top")}, **extra}),
                            dump["signal"])
    # Exit code 1 with no traceback anywhere and no other death: say how to get the traceback.
    if not reported and not any_specific(job) and not set(job.dead_ranks()) - escalated_kills(job):
        # a rank whose own traceback is here (a consequence's, reported by another rule) is not "without traceback"
        # torchrun's table lists failed ranks only: a row whose exit code the paste cut is still a failure
        ones = [e for e in job.exits if (e.code not in (None, 0) or (e.code is None and (e.source.startswith("elastic table")
                                                                    or e.source == "paddle launch")))
                and e.signal is None and e.rank not in timed_out and e.rank not in job.traceback_ranks]
        if ones and not job.timeout_table():
            # at the same time, torchrun's own "Root Cause (first observed failure)" row comes first
            e = min(ones, key=lambda x: (x.ts if x.ts is not None else INF, 0 if "root cause" in x.source else 1,
                                         _pos(x.where)))
            how = (f"exited with code {e.code}, and its traceback is not in these logs" if e.code is not None else
                   "failed first and wrote no error file (torchrun's record() names it), and its exit code and "
                   "traceback are not in these logs" if e.source == "elastic table (no error file)" else
                   "was aborted (paddle's launch names it), and its exit code and traceback are not in these logs"
                   if e.source == "paddle launch" else
                   "failed (torchrun's table lists it), and its exit code and traceback are not in these logs")
            who = (who_exited(e, e.rank) if e.rank is not None or getattr(e, "guessed_local", None) is not None
                   else "a process")
            if e.rank is None and e.source == "deepspeed launcher":
                # the held-out review of round 23: the title says the rank is unknown, and why (_DS_EXIT_DETAIL)
                who = "a process (its rank unknown: DeepSpeed's launcher prints the last command it started)"
            yield hit(job, "error", f"{who} {how}", at=e.where, stage=0, ranks=[e.rank] if e.rank is not None else [],
                      hosts=[e.host] if e.host else [], ts=e.ts,
                      detail=((_DS_EXIT_DETAIL if e.local_rank is None else _DS_EXIT_DETAIL.split(" The command")[0]
                               + " Its command's --local_rank=0 is the node's only process, the one that failed.")
                              if e.source == "deepspeed launcher" else
                              ("torchrun reports the exit but not the exception: the rank's own output went elsewhere "
                               "(error_file: <N/A> means the entry point was not decorated with @record).")
                              if e.source == "torchrun" or e.source.startswith("elastic")
                              else f"{e.source} reports the exit but not the exception: the rank's own output is not in "
                                   "these lines (cut from the paste, or written to a per-rank file).")
                             + _escalation_sentence(job),
                      fix=_GENERIC_FIX.replace("The exception above is the first failure; fix it and rerun. ", ""),
                      evidence=_exit_evidence(e))


# DeepSpeed's per-node launcher (deepspeedai/DeepSpeed deepspeed/launcher/launch.py @32c6645, sigkill_handler) logs
# f"{cmd} exits with return code = {last_return_code}" with `cmd` left over from its spawn loop: the command of the last
# process it started (the highest --local_rank on the node), whichever process failed
_DS_EXIT_DETAIL = ("DeepSpeed's launcher reports the exit but not the exception: the process's own output is not in these "
                   "lines. The command it prints is the last one it started on the node (its --local_rank=N is the "
                   "node's highest local rank), not necessarily the failed process's (deepspeed/launcher/launch.py "
                   "prints the spawn loop's leftover command): the failed rank is the one whose traceback precedes "
                   "this report in its own output.")


# the command a shell's job report names after the signal's text (bash jobs.c pretty_print_job: "<script>: line N: PID
# Aborted (core dumped) <command>")
_SHELL_CMD = re.compile(r": line \d+: +\d+ +(?:Aborted|Bus error|Illegal instruction|Floating point exception)"
                        r"(?: +\(core dumped\))? +(\S.*)$")


def _cause_of(lst) -> Optional[tuple]:
    """The first (event, frame) of a rank's exceptions that is not a wrapper's (data/wrapper_exceptions.json), or None."""
    return next(((e, f) for e, f in lst if not wrappers.is_wrapper(str(e.data.get("type", "")))), None)


def _first_ts(lst) -> tuple:
    ev = lst[0][0]
    return (ev.line.ts if ev.line.ts is not None else INF, _pos(ev.line))


# Kinds a specific rule reports: the parsers' and every cause class of the messages catalogue (verdict.KIND_RULE).
_SPECIFIC = tuple(sorted(set(KIND_RULE) | {"worker_killed", "ready_twice"}))


def _lost_with_ray_node(job: Job, line: Line) -> bool:
    """A Ray actor error ("RayActorError: The actor died unexpectedly before finishing this task.") in a log where Ray
    says a node died (catalogue entries ray.node_*: the GCS marked it dead, or "The actor is dead because its node has
    died" a few lines below the exception): the actor died with its node, which LOG022 reports."""
    if not re.search(r"Ray(?:Actor|Task)Error|ActorDiedError|ActorUnavailableError", line.text):
        return False
    occ = job.get("nccl_remote_error")
    return bool(occ) and any(str(e.data.get("entry", "")).startswith("ray.node_") for e in occ.first)


def _is_specific(job: Job, line: Line) -> bool:
    """The exception line is one a specific rule reports (the safety net behind specific_ranks)."""
    for kind in _SPECIFIC:
        occ = job.get(kind)
        if occ and any(ev.line is line for ev in occ.first):
            return True
    # a connect failure raised after Gloo fell back to the loopback address for this host's own name
    # ("RuntimeError: Gloo connectFullMesh failed ..."): LOG025 reports the fallback as the cause and this line with it
    from .catalogued import _CONNECT_FAILED, _loopback_fallback_failed
    loop = _loopback_fallback_failed(job) if _CONNECT_FAILED.search(line.text) else None
    return loop is not None and _pos(line) > _pos(loop[0].line)
