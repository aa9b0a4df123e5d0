"""The parent side of `ddpdoctor run`: launch the command, watch, localize a stall, name the first
death, stop the job cleanly when asked, report.

It runs the user's command unchanged, with two additions to its environment: this package's
`_site` folder first on PYTHONPATH (the attach) and DDPDOCTOR_RUN_DIR (a private directory for
the beacons). It becomes a child subreaper, so ranks orphaned by their launcher (mp.spawn ranks
blocked in the TCPStore connect outlive their parent) are re-parented to it and can still be
followed and ended. Every wait has a deadline. It reads only this node's files.
"""
from __future__ import annotations

import glob
import json
import os
import re
import signal
import socket
import statistics
import sys
import select
import tempfile
import time
from typing import Callable, List, Optional

from .. import proctree
from ..facts import aborts
from ..facts import steps as stepsplit
from . import beacon, hostfacts, kills, multinode, section
from . import recorder as agent  # the env names and the signal the attach side uses
from .text import render_findings

SITE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_site")
# The watch loop polls every POLL_S while something happens (the job starting, a stall open, a rank
# dead, the command gone); in a steady job every POLL_IDLE_S at most, waking earlier at the moment a
# stall would be due and before the fastest rank fills half its beacon ring (_poll_wait). A signal
# (SIGTERM, Ctrl-C, SIGUSR1: a byte on a pipe) wakes it at once. A process's end is seen at the next
# poll, up to POLL_IDLE_S later (its time is the poll's; torchrun's agent records give the real
# order). Each poll costs this process ~1 ms of CPU (each process's beacon and /proc stat read, the
# checks), a share of the cores the job runs on.
POLL_S = 0.2
POLL_IDLE_S = 1.0
RSS_S = 1.0          # how often each rank's RSS is sampled (the OOM finding's "last RSS")
TREE_S = (1.0, 5.0)  # how often the process tree is walked: during the first TREE_EARLY_S, then after
TREE_EARLY_S = 10.0
# After TREE_EARLY_S, a walk (every process's /proc/PID/stat: ~6 ms of this process's CPU on a node of ~150
# processes) only when a process started or ended on the node since the last one (proc_count), or every
# TREE_MAX_S at least: on a steady node the walk every 5 s found nothing new, and the walk before any ending
# (and this process as the job's child subreaper) is what finds the job's processes.
TREE_MAX_S = 60.0
EXIT_HANG_S = 30.0  # a rank alive this long past its exit handler (and past the stall window) hangs in its shutdown

# every rank in the same set-up wait (one collective, DDP's constructor) counts as a stall only after this long: a
# loaded host makes a tiny model's DDP constructor outlast a short --stall-after (seen: 5 s, 4 jobs on 2 cores)
SETUP_HANG_S = 60.0
STACK_WAIT_S = 1.5
ATTACH_NOTE_S = 30.0
MIN_AUTO_STALL_S = 60.0
GATHER_WAIT_S = 8.0  # multi-node: how long the node of rank 0 waits for the other nodes' records
RUNQ_KEEP = 600     # run-queue and steal samples kept per rank (one per straggler check, one more after a verdict's facts)
END = "at the end of the job"  # table_lines' `when` at the job's end
STRAGGLER_S = 1.0    # how often the step splits are compared for a straggler
DISCOVER_FRESH_S = 2.0  # the run directory is listed at every poll until its last change is this old
MAX_STEPS_KEPT = 100_000  # per process: the step records kept for the table and the trace
PID_REUSE_SLACK_S = 2.0  # psutil's create_time (boot time in whole seconds + start ticks) against time.time()


def proc_count() -> Optional[int]:
    """/proc's link count: its static entries plus nr_processes() (torvalds/linux fs/proc/root.c
    proc_root_getattr @ 04cf3996), the thread-group leaders kernel/fork.c counts in process_counts (@ b501d4dc):
    one stat() that changes when a process starts or ends on the node (threads do not move it). None if unreadable."""
    try:
        return os.stat("/proc").st_nlink
    except OSError:
        return None


def tree_walk_due(since_start: float, n: Optional[int], last_n: Optional[int], since_walk: Optional[float],
                  subreaper: bool) -> bool:
    """Whether the periodic walk of the process tree runs now (Supervisor._tree_tick). During the first
    TREE_EARLY_S always; then at least every TREE_MAX_S; in between, when /proc's process count `n` moved
    since the last walk (`last_n`) -- unless this process is the job's child subreaper: then every process of
    the job stays its descendant (an orphan is reparented here, not to init), the walk before any ending
    (Tree.live, from this process) finds them all, and the count, which any process of the node moves (a
    shared node's count moved at almost every 5 s tick: a walk of every /proc/PID/stat each time, ~half the
    supervisor's steady CPU), is not read for it."""
    if since_walk is None or since_start <= TREE_EARLY_S or since_walk >= TREE_MAX_S:
        return True
    if subreaper:
        return False
    return n is None or n != last_n


def listing_due(mtime: Optional[float], last_mtime: Optional[float], now: float,
                fresh_s: float = DISCOVER_FRESH_S) -> bool:
    """Whether a directory is listed again: its mtime moved since the last listing, is unknown, or is less
    than `fresh_s` old (an mtime's tick is coarse: a file made in the tick of the last listing would be
    missed). Adding a file (or renaming one in) moves a directory's mtime; writing into one does not."""
    return mtime is None or mtime != last_mtime or now - mtime <= fresh_s


def cgroup_oom_kills() -> Optional[int]:
    """The oom_kill counter of this process's cgroup (v2 memory.events, v1 memory.oom_control)."""
    try:
        with open("/proc/self/cgroup") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    paths = []
    for ln in lines:
        parts = ln.split(":", 2)
        if len(parts) == 3 and (parts[1] == "" or "memory" in parts[1].split(",")):
            paths.append(("/sys/fs/cgroup" + parts[2]).rstrip("/") if parts[1] == "" else
                         ("/sys/fs/cgroup/memory" + parts[2]).rstrip("/"))
    for base in paths + ["/sys/fs/cgroup", "/sys/fs/cgroup/memory"]:
        for name in ("memory.events", "memory.oom_control"):
            try:
                with open(os.path.join(base, name)) as fh:
                    for ln in fh:
                        k, _, v = ln.partition(" ")
                        if k == "oom_kill":
                            return int(v)
            except (OSError, ValueError):
                continue
    return None


def _keep(series: list, sample: tuple) -> None:
    """Append a sample, keeping the last RUNQ_KEEP."""
    series.append(sample)
    if len(series) > RUNQ_KEEP:
        del series[: len(series) - RUNQ_KEEP]


class Proc:
    """One process of the job that loaded the recorder."""

    def __init__(self, pid: int, info: dict, run_dir: str):
        self.pid = pid
        self.info = info
        self.dir = run_dir
        self.beacon: Optional[dict] = None  # the setter counts the beacons read (bver): _rank_procs keeps its answer until the next
        self.alive = True
        self.end_t: Optional[float] = None
        self.status: Optional[int] = None
        self.rss_mb: Optional[float] = None
        self.ps = None
        self.dump: Optional[str] = None
        self._bfd: Optional[int] = None  # the beacon, kept open while the process lives
        self.cpu: list = []  # (time, process CPU seconds) at each poll: is a rank that makes no progress busy?
        self.state_sample: Optional[dict] = None  # samples of its main thread's state, taken at a stall
        self.native: Optional[str] = None  # py-spy's dump with native frames, taken at a stall or before a kill
        self.steps: list = []  # the step split records read from the beacon's ring (facts.steps)
        self.ring_n = 0  # ring entries read so far
        self.ring_rate: Optional[float] = None  # ring entries written per second, between the last two polls
        self._ring_mark: Optional[tuple] = None  # (time, ring_n) at the last poll that read the beacon
        self.missed = 0  # steps whose records were overwritten in the ring before we read them
        self.dropped = 0  # the first steps' records dropped to keep MAX_STEPS_KEPT (a long job: bounded memory)
        self.cgroup: Optional[str] = None  # its /proc/PID/cgroup, read with the RSS
        self.start_ticks = proctree.stat_fields(pid)[1]
        try:
            import psutil

            self.ps = psutil.Process(pid)
            # The pid's process is the one that wrote the info only if it was started before the info was
            # written (a reused pid's process starts after). Not "within 30 s of it" (until round 12): on a
            # loaded host a process can spend longer than that between its start and the attach (another
            # sitecustomize importing torch first); it was then taken for dead at its first poll, its beacon
            # read once, before it had a rank, and never again: its rank was lost.
            if self.ps.create_time() > float(info.get("t0") or 0) + PID_REUSE_SLACK_S:
                self.ps = None
        except Exception:  # noqa: BLE001
            self.ps = None
            self.alive = False
            self.end_t = time.time()

    @property
    def beacon(self) -> Optional[dict]:
        return getattr(self, "_beacon", None)

    @beacon.setter
    def beacon(self, b: Optional[dict]) -> None:
        self._beacon = b
        self.bver = getattr(self, "bver", 0) + 1

    def path(self, kind: str) -> str:
        return os.path.join(self.dir, f"{kind}.{self.pid}" + {"beacon": ""}.get(kind, ".json" if kind in (
            "exc", "preflight", "error") else ".txt"))

    def poll(self, now: float, sample_rss: bool) -> None:
        """Every POLL_S: the beacon (one pread of an fd kept open) and whether the process still runs
        (one read of /proc/PID/stat); the RSS every RSS_S. No psutil call on the hot path."""
        if not self.alive:
            if self.beacon is None:
                self.beacon = beacon.read(self.path("beacon"), settled=True)
                if self.beacon is not None:
                    self._take_ring(self.beacon)
            return
        if self._bfd is None:
            try:
                self._bfd = os.open(self.path("beacon"), os.O_RDONLY)
            except OSError:
                pass
        b = beacon.read(self._bfd, ring_from=self.ring_n) if self._bfd is not None else None
        if b is not None:
            self._take_ring(b)
            self.beacon = b
            mark = self._ring_mark
            if mark is not None and now > mark[0]:
                self.ring_rate = (self.ring_n - mark[1]) / (now - mark[0])
            self._ring_mark = (now, self.ring_n)
        ok = False
        if self.ps is not None:
            ok, cpu = _running_cpu(self.pid, self.start_ticks)
            if ok and cpu is not None:
                self.cpu.append((now, cpu / hostfacts.CLK_TCK))
                if len(self.cpu) > 600:
                    del self.cpu[:100]
        if ok and sample_rss:
            try:
                rss = round(self.ps.memory_info().rss / 2 ** 20, 1)
                if rss > 0:  # a process being torn down reads 0: keep the last real sample
                    self.rss_mb = rss
            except Exception:  # noqa: BLE001
                ok = False
            # its cgroup, as last seen alive: the limit that binds it is read along it after a SIGKILL (kills.py)
            self.cgroup = kills.read_proc_cgroup(self.pid) or self.cgroup
        if ok:
            self.seen_t = now  # the last poll that found it running: a death seen later lies after this
        else:
            self.alive = False
            self.end_t = now
            self.close()

    def _take_ring(self, b: dict) -> None:
        """Keep the ring entries not seen yet (the beacon keeps the last beacon.RING records), one
        record per step (beacon.expand: a record of a run of unsampled steps becomes its steps).
        Steps missed: the step numbers skipped between what was kept and the first new record's steps
        (a record overwritten before this poll read it may have stood for several steps)."""
        ring = b.pop("ring", None)
        if not ring:
            return
        n, entries = ring["n"], ring["steps"]  # the entries after ring_n only (beacon.read's ring_from)
        new = n - self.ring_n
        if new <= 0:
            return
        new = min(new, len(entries))
        steps = beacon.expand(entries[len(entries) - new:])
        before = self.steps[-1][0] if self.steps else 0
        if steps and steps[0][0] > before + 1:
            self.missed += steps[0][0] - before - 1
        self.steps.extend(steps)
        self.ring_n = n
        if len(self.steps) > MAX_STEPS_KEPT:  # bounded memory: the latest MAX_STEPS_KEPT records, the count of the rest
            self.dropped = getattr(self, "dropped", 0) + len(self.steps) - MAX_STEPS_KEPT
            del self.steps[:len(self.steps) - MAX_STEPS_KEPT]

    def close(self) -> None:
        """Read the beacon a last time and close its fd (the file stays)."""
        if self._bfd is not None:
            b = beacon.read(self._bfd, ring_from=self.ring_n, settled=not self.alive)
            if b is not None:
                self._take_ring(b)
                self.beacon = b
            try:
                os.close(self._bfd)
            except OSError:
                pass
            self._bfd = None

    def dump_before_kill(self, agent_stacks: Optional[dict]) -> Optional[str]:
        """The stacks taken as the process was being ended: torchrun's agent signalled it (the dump
        from that offset of stack.PID.txt), or faulthandler wrote them on its SIGTERM (kill.PID.txt)."""
        if agent_stacks and agent_stacks.get("offset") is not None:
            try:
                with open(self.path("stack"), "rb") as fh:
                    fh.seek(int(agent_stacks["offset"]))
                    text = fh.read(256000).decode(errors="replace").replace("\x00", "")
                if text.strip():
                    return text
            except (OSError, ValueError):
                pass
        try:
            with open(os.path.join(self.dir, f"kill.{self.pid}.txt"), errors="replace") as fh:
                text = fh.read(256000)
            return text if text.strip() else None
        except OSError:
            return None

    def cpu_frac(self, window_s: float) -> Optional[float]:
        """The process's CPU use over the last `window_s` (1.0 = one core busy), from the polls."""
        if len(self.cpu) < 2:
            return None
        t1, c1 = self.cpu[-1]
        t0, c0 = next(((t, c) for t, c in self.cpu if t >= t1 - window_s), self.cpu[0])
        return round((c1 - c0) / (t1 - t0), 3) if t1 - t0 > 0.5 else None

    def facts_light(self) -> dict:
        return {"pid": self.pid, "info": self.info, "beacon": self.beacon}

    def split(self) -> Optional[dict]:
        """The step split summary of this process (facts.steps.summary), None before any step."""
        if not self.steps:
            return None
        bs = ((self.beacon or {}).get("dl") or {}).get("bs")
        out = stepsplit.summary(self.steps, bs, skip=min(5, len(self.steps) // 4))
        if self.missed:
            out["missed"] = self.missed
        if getattr(self, "dropped", 0):
            out["dropped"] = self.dropped  # the first steps' records, dropped to bound memory (MAX_STEPS_KEPT)
        return out

    def dying(self) -> bool:
        """Raised an uncaught exception more than 2 s ago and is still tearing down: dead for us."""
        b = self.beacon or {}
        return self.alive and b.get("phase") == "exception" and time.time() - (b.get("pt") or 0) > 2.0

    def facts(self, split: bool = False) -> dict:
        alive = self.alive and not self.dying()
        b = self.beacon or {}
        since = time.time() - (b.get("pt") or time.time())
        out = {"pid": self.pid, "info": self.info, "beacon": self.beacon, "alive": alive,
               "cpu_frac": self.cpu_frac(max(2.0, min(since, 30.0))) if alive else None,
               "main_state": hostfacts.thread_state(self.pid) if alive else None,
               "running_frac": (self.state_sample or {}).get("running_frac") if alive else None,
               "native": self.native,
               "end_t": self.end_t if self.end_t else (None if alive else (self.beacon or {}).get("pt")),
               "alive_t": getattr(self, "seen_t", None),
               "status": self.status, "rss_mb": self.rss_mb, "dump": self.dump, "split": self.split() if split else None}
        if alive and b.get("phase") == "exception":
            # it raised and still tears down: its exception (and its time) is its failure (section.end_of)
            out["exc"] = _read_json(self.path("exc"))
        if not alive:
            out["exc"] = _read_json(self.path("exc"))
            efile = self.info.get("efile")
            out["efile"] = _read_json(efile) if efile else None
            try:
                with open(self.path("fatal"), errors="replace") as fh:
                    out["fatal"] = fh.read(64000)
                out["fatal_mtime"] = os.stat(self.path("fatal")).st_mtime if out["fatal"] else None
            except OSError:
                out["fatal"] = None
        return out


CONFIG_KEYS = ("compute_environment", "distributed_type", "num_processes", "num_machines", "use_cpu", "mpirun_config")


def accelerate_launch_facts(argv: List[str], environ=None, root: str = "/") -> Optional[dict]:
    """For an `accelerate launch` command: the config file accelerate will read (its --config_file, else its default
    file: $HF_HOME/accelerate/default_config.yaml, accelerate/commands/config/config_args.py), the keys of it that
    decide the launcher (CONFIG_KEYS), and the GPUs the launcher sees (/dev/nvidiaN and CUDA_VISIBLE_DEVICES; on an
    AMD host, /dev/kfd, the KFD topology and ROCm's visibility variables: amd_visible_gpus). The judgement is
    facts.launch.accelerate_launch_mode's (RUN025). None for any other launch. `root`: where / is (tests)."""
    from ..facts import launch

    environ = os.environ if environ is None else environ
    cmd = launch.parse_command(argv)
    if not cmd or cmd.get("launcher") != "accelerate":
        return None
    path = cmd["options"].get("config_file")
    default = not path
    if default:
        home = os.path.expanduser(environ.get("HF_HOME", os.path.join(environ.get("XDG_CACHE_HOME", "~/.cache"),
                                                                       "huggingface")))
        path = os.path.join(home, "accelerate", "default_config.yaml")
    config = None
    if os.path.isfile(path):
        try:
            with open(path, encoding="utf-8") as fh:
                if path.endswith(".json"):
                    raw = json.load(fh)
                else:
                    import yaml  # accelerate's own dependency: its config files are YAML

                    raw = yaml.safe_load(fh)
            config = {k: raw.get(k) for k in CONFIG_KEYS if k in raw} if isinstance(raw, dict) else None
        except Exception:  # noqa: BLE001 - an unreadable config: nothing is said of the launch mode
            return None
    nvidia = [d for d in glob.glob(os.path.join(root, "dev", "nvidia*")) if re.fullmatch(r"nvidia\d+", os.path.basename(d))]
    devices: Optional[int] = len(nvidia)
    vendor = "nvidia" if nvidia else None
    vis = environ.get("CUDA_VISIBLE_DEVICES")
    if vis is not None:
        devices = min(devices, _listed(vis))
    if not nvidia and os.path.exists(os.path.join(root, "dev", "kfd")):
        devices, vendor = amd_visible_gpus(environ, root), "amd"  # None when the KFD topology cannot be read
    return {"config": config, "config_file": path if config is not None else None, "default_config": default,
            "devices": devices, "gpu_vendor": vendor}


def _listed(value: str) -> int:
    return len([x for x in value.split(",") if x.strip()])


KFD_NODES = "sys/class/kfd/kfd/topology/nodes"  # ROCT-Thunk-Interface src/topology.c, KFD_SYSFS_PATH_NODES


def amd_visible_gpus(environ, root: str = "/") -> Optional[int]:
    """The AMD GPUs a ROCm torch (and so `accelerate launch`, which counts torch.cuda.device_count()) sees on this host,
    or None when the KFD topology cannot be read. GPUs: the KFD topology's nodes whose gpu_id is not 0 (the CPU nodes'
    is 0: ROCm/ROCT-Thunk-Interface src/topology.c @ 13aad8e, topology_sysfs_get_gpu_id and the CPU-node branch of
    topology_sysfs_get_node_props). Visibility as torch reads it on ROCm (torch/cuda/__init__.py
    `_parse_visible_devices`, torch 2.13.0 cf30153): ROCR_VISIBLE_DEVICES first, HIP_VISIBLE_DEVICES preferred over it
    (never more than it), else CUDA_VISIBLE_DEVICES."""
    nodes = os.path.join(root, KFD_NODES)
    try:
        names = os.listdir(nodes)
    except OSError:
        return None
    gpus = 0
    for name in names:
        try:
            with open(os.path.join(nodes, name, "gpu_id")) as fh:
                gpus += int(fh.read().strip() or 0) != 0
        except (OSError, ValueError):
            continue
    rocr, hip, cuda = (environ.get(k) for k in ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"))
    if rocr is not None:
        gpus = min(gpus, _listed(rocr))
        if hip is not None:
            gpus = min(gpus, _listed(hip))
    elif hip is not None:
        gpus = min(gpus, _listed(hip))
    elif cuda is not None:
        gpus = min(gpus, _listed(cuda))
    return gpus


def _read_json(path: str) -> Optional[dict]:
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


# the two verdicts on a slow rank: the job's straggler, or a rank held back by its host (see _supersede_attribution)
_ATTRIBUTION = ("RUN020", "RUN023")


def _rank_subjects(finding) -> frozenset:
    return frozenset(s for s in finding.subjects if s.startswith("rank:"))


# mp.spawn's parent (torch/multiprocessing/spawn.py, ProcessContext.join, torch 2.13.0): after the first child fails
# it SIGTERMs the others, waits up to its grace period (30 s when join() is given none, as spawn() does) for them,
# SIGKILLs the ones left, and only then raises "ProcessExitedException: process N terminated with ...". Its last
# line can come 30 s after the death: it is read until the parent exits, within the grace period and a margin.
SPAWN_GRACE_S = 30.0
SPAWN_DEADLINE_S = SPAWN_GRACE_S + 5.0
SPAWN_SETTLE_S = 2.0  # the ranks all gone and the parent still runs (it caught the exception): its lines so far


class Supervisor:
    def __init__(self, argv: List[str], stall_after: Optional[float] = None, on_stall: str = "report",
                 grace_s: float = 10.0, preflight: bool = True, write: Callable[[str], None] = None,
                 attach_note_s: float = ATTACH_NOTE_S, store_endpoint: Optional[tuple] = None,
                 measure_steps: bool = False, split_every: int = 0, capture_stderr: bool = True):
        self.argv = list(argv)
        self.capture_stderr = capture_stderr
        self.stderr_tee = None  # capture.StderrTee: the job's stderr, copied on and kept for the verdict
        self.stall_after = stall_after
        self._start_probe_t = 0.0  # the last stack probe of ranks alike before the first step (_parted_at_start)
        self._parted_seen = None  # (last beacon t, when) the probe first found the ranks parted with no progress since
        self.on_stall = on_stall
        self.grace_s = grace_s
        self.preflight = preflight
        self.write = write or (lambda s: (sys.stderr.write(s + "\n"), sys.stderr.flush()))
        self.attach_note_s = attach_note_s
        self.store_endpoint = store_endpoint
        self.measure_steps = measure_steps
        self.split_every = split_every  # measure the split every N steps (0: sampled by step time; --trace: 1)
        self.link = None
        self.job_verdicts: list = []
        self.procs: dict = {}
        self.tree: Optional[proctree.Tree] = None  # every process of the job: walked, marked, stopped
        self.findings: list = []
        self.own_errors: list = []  # ddpdoctor's own failures while it watched or tore the job down (own_error)
        self.sections: list = []  # run sections of each event (stall, death)
        self.events: list = []
        self.root = None
        self.root_status: Optional[int] = None
        self.stopped = False
        self.interrupted = 0
        self.run_dir = ""
        self.t_start = 0.0
        self._tree_n: Optional[int] = None  # /proc's process count at the last walk of the tree (_tree_tick)
        self._tree_walk_t: Optional[float] = None  # when that walk was
        self._dir_mtime: Optional[float] = None  # the run directory's mtime when last listed (_discover)
        self._fr_dir_mtime: Optional[float] = None  # the Flight Recorder dumps' folder's, likewise (_check_flight_recorder)
        self.table_asked = False  # SIGUSR1: print the step split table at the next poll
        self.straggler_open: Optional[tuple] = None  # (the straggler ranks reported and not yet gone, held by the host)
        self.straggler_reports: list = []  # every straggler verdict (the report's run section)
        self._cpu_prev = None
        self.runq_series: dict = {}  # rank -> [(time.time(), run-queue delay on its step's path, s)], one per straggler check
        self._sched_prev: dict = {}  # rank -> (time, pid, per-thread schedstat) of its last sample (path_wait_s)
        self.steal_series: dict = {}  # rank -> [(time.time(), steal ticks, all ticks)] of its CPUs, the same checks
        self.last_host_sample: tuple = (0.0, {})  # (time, rank -> run-queue s) of the last _sample_host
        self.aligner = stepsplit.Aligner()  # the straggler window, kept up to date between checks (facts.steps)
        # a short job's straggler, seen live and held until the job ends (facts.steps.straggler's `ended`): (ranks, the
        # facts taken while it ran); published only if the job ends within the window's steps
        self.short_pending: Optional[tuple] = None
        self.winch = False  # the terminal was resized: SIGWINCH to pass on to the job (_on_winch)
        self.woken = False  # a signal handler asked the watch loop to wake (through the pipe, once run() made it)
        self._wake_fds: Optional[tuple] = None
        self._ranks_key = self._ranks = None  # _rank_procs for the beacons of this poll

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        import subprocess

        from .capture import sweep_stale, write_owner

        sweep_stale(tempfile.gettempdir())  # run directories of doctors killed (kill -9) after their relay ended
        self.run_dir = tempfile.mkdtemp(prefix="ddpdoctor-run-")
        self.link = None
        ep = self.store_endpoint or multinode.endpoint_from_argv(self.argv)
        if ep:
            self.link = multinode.Link(*ep)
        env = dict(os.environ)
        env["PYTHONPATH"] = SITE_DIR + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env[agent.ENV_DIR] = self.run_dir
        env[agent.ENV_SIGNAL] = str(agent.default_signal())
        if self.measure_steps:
            env[agent.ENV_MEASURE] = "1"
        if self.split_every and not env.get(agent.ENV_SPLIT_EVERY):
            env[agent.ENV_SPLIT_EVERY] = str(self.split_every)
        self.fr_prefix = flight_recorder_env(env, self.run_dir)
        self.fr_seen: set = set()
        if not self.preflight:
            env[agent.ENV_PREFLIGHT] = "0"
            env[agent.ENV_CALLBACK] = "0"
        # The run directory in every process's environment is the job's marker; as the child subreaper,
        # this process also stays the ancestor of ranks their launcher orphaned (proctree says why both).
        self.tree = proctree.Tree(var=agent.ENV_DIR, value=self.run_dir)
        if self.tree.adopt:  # the `ddpdoctor run` command itself, not a library call inside another program
            self.tree.adopt_orphans()
        self.oom0 = cgroup_oom_kills()
        self.kills = kills.KillEvidence()
        self.t_start = time.time()
        # The same process group as this one: the user's command keeps the terminal (a Ctrl-C reaches
        # it and this process both, and this process then ends whatever is left).
        err = None
        if self.capture_stderr:  # copied on to this process's stderr as it comes; the job's isatty() unchanged
            from .capture import StderrTee

            self.stderr_tee = StderrTee(keep_dir=self.run_dir)  # a relay process copies: it survives this one
            err = self.stderr_tee.child_stderr()
            if self.stderr_tee.relay is not None:
                self.tree.ignored.add(self.stderr_tee.relay.pid)
        if not os.environ.get("DDPDOCTOR_RUN_KEEP"):  # who still needs the run directory (capture.sweep_stale)
            relay = self.stderr_tee.relay if self.stderr_tee is not None else None
            write_owner(self.run_dir, relay.pid if relay is not None else None)
        try:
            self.root = subprocess.Popen(self.argv, env=env, stderr=err)
        finally:
            if self.stderr_tee is not None:
                self.stderr_tee.started()
        self.tree.add(self.root.pid)
        try:  # while the job starts: import the checks now, so a stall is judged without that delay
            from ..pipeline.runner import load_all

            load_all()
        except Exception:  # noqa: BLE001
            pass

    def run(self) -> int:
        # SIGTERM (scancel, kill, a CI timeout) and Ctrl-C end the job, every process of it; the doctor
        # exits with the job's own status, as always (128+N for a command ended by signal N). A SIGINT inherited as ignored (`ddpdoctor run ... &` from a script: POSIX has
        # background jobs ignore it) stays ignored, as it does for the command itself.
        caught = (signal.SIGTERM,) if proctree.sigint_ignored_at_start() else (signal.SIGINT, signal.SIGTERM)
        old = {s: signal.getsignal(s) for s in caught}

        def on_signal(signum, frame):
            self.interrupted = signum
            if signum == signal.SIGTERM and getattr(self, "kills", None) is not None:
                self.kills.sigterm_t = time.time()
            self._wake_up()

        for s in old:
            signal.signal(s, on_signal)
        old_usr1 = signal.signal(signal.SIGUSR1, self._on_usr1)
        old[signal.SIGUSR1] = old_usr1
        old[signal.SIGWINCH] = signal.signal(signal.SIGWINCH, self._on_winch)
        try:
            self.start()
            try:
                self._loop()
            except Exception as exc:  # noqa: BLE001 - ddpdoctor's own bug: said as ours, the job ended as it would be
                phase = self.phase()
                self.own_error(phase, exc)
                if phase == "watching the job":
                    self._wait_unwatched()  # the job runs on, unwatched: our bug never ends it
        finally:
            try:
                self._cleanup()
            except Exception as exc:  # noqa: BLE001
                self.own_error("tearing the job down", exc)
                self._cleanup_last_resort()
            if getattr(self, "kills", None) is not None:
                self.kills.close()
            for s, h in old.items():
                signal.signal(s, h)
        return self.exit_status()

    def phase(self) -> str:
        """What ddpdoctor run was doing, for its own error: tearing the job down (a stop signal, --on-stall stop,
        the command gone, a rank dead) or watching it."""
        if self.interrupted or self.stopped or self.root_status is not None or getattr(self, "death_done", False):
            return "tearing the job down"
        return "watching the job"

    def own_error(self, phase: str, exc: BaseException) -> None:
        """ddpdoctor run's OWN failure (a bug of this tool, never a rank's): kept for the report's DOC004 with its
        traceback, and said on stderr. No rank is named: the job's processes did nothing wrong by it."""
        import traceback

        tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
        where = next((f"{os.path.basename(fs.filename)}:{fs.lineno} in {fs.name}"
                      for fs in reversed(traceback.extract_tb(exc.__traceback__))), None)
        self.own_errors.append({"phase": phase, "type": type(exc).__name__, "message": str(exc)[:500],
                                "where": where, "traceback": "".join(tb[-6:])[-3000:], "t": time.time()})
        self.write(f"ddpdoctor run: ddpdoctor's own error while {phase} ({type(exc).__name__}: {exc}"
                   + (f", at {where}" if where else "") + "); not the job's: the report goes on")

    def _wait_unwatched(self) -> None:
        """After ddpdoctor's own failure while watching: wait for the command as a plain parent would (a stop signal
        still ends the job), so the job's own end and status stand."""
        while self.root is not None and self.root_status is None:
            if self.interrupted:
                self.terminate_tree()
                break
            self._reap()  # a child subreaper: every orphan of the job is reaped too
            if self.root_status is None:
                time.sleep(POLL_S)

    def _cleanup_last_resort(self) -> None:
        """After a failed _cleanup: no process of the job is left behind (design.md), whatever failed."""
        try:
            if self.tree is not None and self.tree.live():
                self.tree.stop(grace_s=min(self.grace_s, 5.0), reap=self._reap)
        except Exception:  # noqa: BLE001
            pass
        try:
            if self.root is not None and self.root_status is None:
                self.root.kill()
                self.root_status = self.root.wait(timeout=5)
        except Exception:  # noqa: BLE001
            pass

    def _on_winch(self, signum, frame) -> None:
        """The terminal was resized: its size to the job's pty (where its progress bars read their width), and
        SIGWINCH on to the job's processes outside this process group (torchrun's workers have their own
        sessions; the terminal signals only its foreground group, which this process shares with the command)."""
        tee = self.stderr_tee
        if tee is not None and tee.resize():
            self.winch = True  # the watch loop passes it on (a /proc walk: not in a signal handler)
            self._wake_up()

    def _on_usr1(self, signum, frame) -> None:
        """`kill -USR1` the ddpdoctor run process: the watch loop prints the step split table at its next poll."""
        self.table_asked = True
        self._wake_up()

    def exit_status(self) -> int:
        st = self.root_status
        if st is None:
            return 1
        return st if st >= 0 else 128 - st

    # ------------------------------------------------------------------ the watch loop
    def _loop(self) -> None:
        last_rss = last_tree = last_straggler = 0.0
        self.stall_open = False
        self.death_done = False
        self.death_seen_t: Optional[float] = None
        self.attach_noted = False
        root_gone_t = None
        while True:
            now = time.time()
            self._reap()
            self._discover()
            if self.winch:
                self.winch = False
                self.tree.refresh()
                winch_others(self.tree, os.getpgrp())
            sample = now - last_rss > RSS_S - POLL_S / 2  # the polls may be POLL_IDLE_S apart: not every other one
            if sample:
                last_rss = now
            if now - last_tree > TREE_S[now - self.t_start > TREE_EARLY_S]:
                # A safety net only: as a child subreaper this process stays the ancestor of every
                # process of the job, and the tree is walked (and the marker read) again before any ending.
                last_tree = now
                self._tree_tick(now)
            for p in list(self.procs.values()):
                p.poll(now, sample)
                if sample and getattr(p, "cgroup", None) is not None:
                    self.kills.note_cgroup(p.pid, p.cgroup)
            if self.interrupted:
                name = signal.Signals(self.interrupted).name
                self.write(f"ddpdoctor run: {name} received; stopping the job")
                self.stacks_before_kill(f"ddpdoctor run received {name}")
                self.terminate_tree()
                return
            self._check_attach(now)
            self._check_death(now)
            if not self.death_done:
                self._check_stall(now)
            if self.table_asked:
                self.table_asked = False
                self.write("\n".join(self.table_lines("on SIGUSR1")))
            due = now - last_straggler > STRAGGLER_S - POLL_S / 2
            if due:
                self._check_flight_recorder()
            if due and not self.death_done and not self.stall_open:
                last_straggler = now
                self._check_straggler(now)
                self._check_framework()
            if self.root_status is not None:
                root_gone_t = root_gone_t or now
                live = self.tree.live()
                if not live:
                    break
                if now - root_gone_t > self.grace_s:  # the launcher is gone, its ranks are not: orphans
                    self.write(f"ddpdoctor run: the command exited; ending {len(live)} process(es) it left behind")
                    self.terminate_tree()
                    break
            self._sleep(self._poll_wait(now))
        self._reap()
        self._discover(force=True)
        for p in self.procs.values():
            p.poll(time.time(), False)
        self._check_death(time.time(), final=True)
        self._check_framework(final=True)
        self._check_short_straggler()
        self._check_startup()
        if any(p.steps for p in self._rank_procs()):
            self.write("\n".join(self.table_lines(END)))

    def _wake_up(self) -> None:
        """From a signal handler: the watch loop's sleep ends at once."""
        self.woken = True
        if self._wake_fds is not None:
            try:
                os.write(self._wake_fds[1], b"x")
            except OSError:  # full: it is awake already
                pass

    def _sleep(self, timeout: float) -> None:
        """Until `timeout` or a signal (the pipe). Waking at a process's end too (a pidfd per process)
        was tried: the peer that torchrun then ends with SIGTERM was reported ended by SIGKILL
        (tests/test_run_faults.py ..._within_the_same_poll, 2 of 2); the cause is not found yet."""
        if self._wake_fds is None:
            try:
                r, w = os.pipe()
                os.set_blocking(r, False)
                os.set_blocking(w, False)
                self._wake_fds = (r, w)
            except OSError:
                time.sleep(timeout)
                return
        if self.woken:
            timeout = 0.0
        try:
            ready, _, _ = select.select([self._wake_fds[0]], [], [], timeout)
        except (OSError, ValueError):
            time.sleep(min(timeout, POLL_S))
            return
        if self._wake_fds[0] in ready:
            try:
                while os.read(self._wake_fds[0], 512):
                    pass
            except OSError:
                pass
        self.woken = False

    def _tree_tick(self, now: float) -> bool:
        """The periodic walk of the process tree (see TREE_MAX_S, tree_walk_due): during the first TREE_EARLY_S
        always, then only when /proc's process count moved since the last walk (not at all as the job's child
        subreaper), or TREE_MAX_S after it. The count
        is read before the walk, so a process that starts during it moves the next count. True if walked."""
        n = proc_count()
        last_n, last_t = self._tree_n, self._tree_walk_t
        if not tree_walk_due(now - self.t_start, n, last_n, None if last_t is None else now - last_t,
                             bool(getattr(self.tree, "_subreaper_on", False))):
            return False
        self._tree_n, self._tree_walk_t = n, now
        self.tree.refresh()
        return True

    def _poll_wait(self, now: float) -> float:
        """How long the watch loop sleeps before the next poll (see POLL_IDLE_S)."""
        if (self.stall_open or self.death_seen_t is not None or self.root_status is not None or self.interrupted
                or not self.procs or now - self.t_start < TREE_EARLY_S or self.table_asked):
            return POLL_S
        ranks = [p for p in self._rank_procs() if p.alive and p.beacon]
        if not ranks:
            return POLL_S
        wait = POLL_IDLE_S
        for p in ranks:
            # read the ring before it is half full again: from the rate it was written at between the
            # last two polls (one record per step only while every step is sampled; a run of unsampled
            # steps is one record: the tiny job's 2.5 ms steps write ~40 a second, not 400, and were
            # polled 5 times a second for it), or, before a rate is known, from the step time as if
            # every step wrote one
            rate = getattr(p, "ring_rate", None)
            if rate is not None:
                if rate > 0:
                    wait = min(wait, beacon.RING / 2 / rate)
                continue
            sd = p.beacon.get("sd") or []
            if sd and sd[-1] > 0:  # the ring holds beacon.RING steps: read it before it wraps
                wait = min(wait, beacon.RING * sd[-1] / 2)
        last = max(p.beacon.get("t") or 0 for p in ranks)
        wait = min(wait, last + self.threshold() - now)  # a stall is due then
        return max(POLL_S, wait)

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            code = os.waitstatus_to_exitcode(status)
            if self.root is not None and pid == self.root.pid:
                self.root_status = code
                self.root.returncode = code
            p = self.procs.get(pid)
            if p is not None:
                p.status = code
                if p.alive:
                    p.alive, p.end_t = False, time.time()

    def _discover(self, force: bool = False) -> None:
        """New processes of the job: their info.PID.json in the run directory. The directory is listed
        only when it changed (its mtime) or changed less than DISCOVER_FRESH_S ago (an mtime's tick is
        coarse: a file made in the tick of the last look would be missed): a steady job's poll no longer
        lists it (glob: ~0.6 ms of this process's CPU per poll on the shared 2-core machine). `force`: listed
        whatever the mtime says, before any judgement (a death, the end): a poll delayed past DISCOVER_FRESH_S
        on a loaded host must not leave a process out of the verdict."""
        try:
            mtime = os.stat(self.run_dir).st_mtime
        except OSError:
            mtime = None
        if not force and not listing_due(mtime, self._dir_mtime, time.time()):
            return
        self._dir_mtime = mtime
        for path in glob.glob(os.path.join(self.run_dir, "info.*.json")):
            try:
                pid = int(path.rsplit(".", 2)[-2])
            except ValueError:
                continue
            if pid in self.procs:
                continue
            info = _read_json(path)
            if info is None:
                continue
            self.procs[pid] = Proc(pid, info, self.run_dir)
            self.tree.add(pid)

    # ------------------------------------------------------------------ attach
    def _check_attach(self, now: float) -> None:
        if self.attach_noted or self.procs or now - self.t_start < self.attach_note_s:
            return
        self.attach_noted = True
        self.write("ddpdoctor run: no process of the job has loaded ddpdoctor after "
                   f"{self.attach_note_s:.0f} s (another interpreter or virtual environment?); it runs unchanged, "
                   "without the doctor")

    # ------------------------------------------------------------------ stall
    def threshold(self) -> float:
        if self.stall_after is not None:
            return self.stall_after
        med = section.step_median([p.facts_light() for p in self._rank_procs()])
        return max(MIN_AUTO_STALL_S, 10 * med) if med else MIN_AUTO_STALL_S

    def _rank_procs(self) -> list:
        """The processes that are ranks (section.roles), worked out once per set of beacons read."""
        key = tuple((pid, getattr(p, "bver", 0)) for pid, p in self.procs.items())
        if key != self._ranks_key:
            ranks, _, _ = section.roles([p.facts_light() for p in self.procs.values()])
            self._ranks, self._ranks_key = [self.procs[r["pid"]] for r in ranks], key
        return list(self._ranks)

    def _check_stall(self, now: float) -> None:
        ranks = [p for p in self._rank_procs() if p.alive and p.beacon]
        if not ranks:
            return
        if all(p.beacon.get("phase") == "exit" for p in ranks):
            # every rank has run its last line: a slow (Gloo) teardown is not a stall, but one that outlasts the stall
            # window and EXIT_HANG_S is a hang past the exit handlers (RUN026 says what is known: no stack is taken)
            if self.stall_open or now - max(p.beacon.get("t") or 0 for p in ranks) < max(self.threshold(), EXIT_HANG_S):
                return
            self.stall_open = True
            self._report_stall(ranks, now, now - max(p.beacon.get("t") or 0 for p in ranks), self.threshold())
            return
        if any(p.beacon.get("phase") == "exception" for p in ranks):
            return  # a rank is dying of an exception: the death report names it
        last = max(p.beacon.get("t") or 0 for p in ranks)
        idle = now - last
        if self.stall_open:
            if idle < self.threshold():
                self.stall_open = False
                self.write(f"ddpdoctor run: progress resumed after the stall")
            return
        limit = self.threshold()
        if idle < limit:
            return
        if not self._apart(ranks, now, limit, idle) and not self._parted_at_start(ranks, now, limit, idle):
            return
        self.stall_open = True
        self._report_stall(ranks, now, idle, limit)

    def _apart(self, ranks: list, now: float, limit: float, idle: Optional[float] = None) -> bool:
        """A stall counts once steps exist (or a backward pass has ended: a job with no torch.optim step); before
        the first step only when the ranks are visibly apart (different phases or collectives), or a rank waits for DataLoader workers."""
        bs = [p.beacon for p in ranks]
        if any((b.get("step") or 0) > 0 for b in bs):
            return True
        if any(b.get("st") for b in bs):
            return True  # a backward pass ended (recorder._bw_progress): the loop has begun, with no optimizer step
        if len({b.get("phase") for b in bs}) > 1 or len({b.get("seq") for b in bs}) > 1:
            return True
        if len({(b.get("coll") or {}).get("gname") for b in bs if b.get("phase") == "coll"}) > 1:
            return True  # in collectives of different process groups
        if any(b.get("phase") == "data" and ((b.get("dl") or {}).get("workers") or 0) > 0 for b in bs):
            return True
        if idle is not None and idle >= max(limit, SETUP_HANG_S) and len(bs) > 1 and \
                all(b.get("phase") == "coll" for b in bs):
            return True  # every rank inside the same collective and none completes it: a set-up hang (RUN028)
        return False

    def _parted_at_start(self, ranks: list, now: float, limit: float, idle: Optional[float] = None) -> bool:
        """Before the first step, ranks whose beacons look alike (_apart: the same phase and collective count) may
        still be apart: one asleep in its own code inside the first backward (a module's full backward hook, a tensor
        hook, a DDP comm hook's callback) while the others wait in DDP's gradient all-reduce, which is C++ and counts
        no collective (issue 27: an HF Trainer job with an optimizer stalled in its first backward went unreported; at
        step 5 the same job was named). Their stacks tell: taken once per `limit` seconds of no progress (a signal to
        each rank and a dump, no more often than the stall's own), judged by section.parted. A probe that finds them
        alike leaves no stack behind (the report of a later death reads its own)."""
        if len(ranks) < 2 or any(p.beacon.get("phase") not in ("run", "data") for p in ranks):
            return False
        if now - self._start_probe_t < limit:
            return False
        self._start_probe_t = now
        before = {p.pid: p.dump for p in ranks}
        self.take_stacks(ranks)
        facts = [p.facts() for p in ranks]
        parted = section.parted(facts, now)
        setup = idle is not None and idle >= max(limit, SETUP_HANG_S) and section.same_setup_wait(facts, now) is not None
        # The window counts from the probe that first saw them parted, not from the last progress: before the first
        # step that progress is the job's start, and on a loaded host the start alone can outlast the window, so one
        # look would name a rank a second into its first (slow but healthy) backward (flake22: rank 0 named after
        # <1 s of a 1 s hook). A real stall stays parted at the next probe, `limit` later, with no progress between.
        # (A set-up wait has waited SETUP_HANG_S already.)
        last = max(p.beacon.get("t") or 0 for p in ranks)
        if parted and (self._parted_seen is None or self._parted_seen[0] != last):
            self._parted_seen, parted = (last, now), False
        elif not parted:
            self._parted_seen = None
        apart = parted or setup
        if not apart:
            for p in ranks:
                p.dump = before[p.pid]
        return apart

    def _report_stall(self, ranks: list, now: float, idle: float, limit: float) -> None:
        # outside any collective (or in backward, where DDP waits too): working (runnable) or blocked (sleeping)?
        samples = hostfacts.sample_many([p.pid for p in ranks if p.beacon.get("phase") in ("run", "data")])
        for p in ranks:
            if p.pid in samples:
                p.state_sample = samples[p.pid]
        targets = []
        for p in ranks:
            if p.beacon.get("phase") in ("init", "exit"):
                # init: inside the TCPStore connect a signal makes torch print an alarming retry trace;
                # exit: Python has unregistered faulthandler, so the signal would kill the process
                continue
            targets.append(p)
            targets += [w for w in self.procs.values() if w.alive and w.info.get("kind") == "worker"
                        and w.info.get("parent_pid") == p.pid]
            targets += [w for w in self.procs.values() if w.alive and w.info.get("kind") != "worker"
                        and w.info.get("ppid") == p.pid]
        self.take_stacks(targets)
        # A stall has no kill to beat: give py-spy time to read the symbols on a busy host (its first
        # --native dump of a process can take several seconds under load; 5 s timed out in the suite).
        self.take_native([p for p in ranks if p.beacon.get("phase") not in ("init", "exit")], timeout_s=15.0)
        stall = {"idle_s": round(idle, 1), "stall_after_s": limit, "t": now,
                 "last_progress_t": max(p.beacon.get("t") or 0 for p in ranks)}
        sec = self.build(stall=stall)
        self._judge_and_print(sec, f"stall: no rank made progress for {idle:.0f} s")
        if self.on_stall == "stop":
            self.write("ddpdoctor run: --on-stall stop: ending the job")
            self.stopped = True
            self.terminate_tree()

    def stacks_before_kill(self, reason: str) -> None:
        """Before the job is ended: every live rank's (and worker's) Python stacks and last collectives
        into the report, with where each group of ranks was (RUN015). Bounded: STACK_WAIT_S for the
        dumps (faulthandler, from the signal handler: no GIL), then judging. Never raises."""
        try:
            t0 = time.time()
            ranks = [p for p in self._rank_procs() if p.alive]
            targets = list(ranks)
            for p in ranks:
                targets += [w for w in self.procs.values() if w.alive and w.info.get("kind") == "worker"
                            and w.info.get("parent_pid") == p.pid]
            self.take_stacks([p for p in targets if (p.beacon or {}).get("phase") not in ("init", "exit")])
            if time.time() - t0 < 2.0:  # within the 5 s before the kill: native frames only if there is time
                self.take_native([p for p in ranks if (p.beacon or {}).get("phase") not in ("init", "exit")],
                                 timeout_s=2.5)
            rdzv = self.rendezvous_wait()
            sec = self.build()
            sec["kill"] = {"reason": reason, "t": t0, "slurm_job": os.environ.get("SLURM_JOB_ID"),
                           "processes": len(self.procs)}
            if rdzv:
                sec["rendezvous"] = rdzv
            self._judge_and_print(sec, f"stacks before the stop ({time.time() - t0:.1f} s)", kind="kill")
        except Exception as exc:  # noqa: BLE001 - the stop goes on whatever happens here
            self.write(f"ddpdoctor run: no stacks before the stop ({type(exc).__name__}: {exc})")
            self.own_error("taking the stacks before the stop", exc)

    def rendezvous_wait(self) -> Optional[dict]:
        """At a stop, when no rank got past its rendezvous: what the launcher was waiting for. The nodes it
        was told to expect and where (its command line: --nnodes, --rdzv-endpoint or --master-addr/port), the
        ranks that started on this node and where they were, and the launcher's own stack (taken now: torchrun's
        agent in next_rendezvous). None once a rank joined its process group (the stacks then say the rest)."""
        ranks = self._rank_procs()
        if any((p.beacon or {}).get("phase") not in (None, "start", "init") for p in ranks):
            return None
        ep = multinode.endpoint_from_argv(self.argv)
        rank_pids = {p.pid for p in ranks}
        launchers = [p for p in self.procs.values() if p.alive and p.pid not in rank_pids
                     and p.info.get("kind") != "worker"]
        self.take_stacks(launchers)
        where = None
        for p in launchers:
            frames = []
            if p.dump:
                from . import stacks

                t = stacks.main_thread(stacks.parse_dump(p.dump), p.info.get("main_thread"))
                frames = (t or {}).get("frames") or []
            hit = [f for f in frames if "rendezvous" in f["file"] or "rendezvous" in f["func"]]
            if hit:  # torch elastic's next_rendezvous (the handler's wait) where it is on the stack
                f = next((f for f in hit if f["func"] == "next_rendezvous"), hit[0])
                where = {"pid": p.pid, "file": f["file"], "line": f["line"], "func": f["func"]}
                break
        t_end = time.time() + STACK_WAIT_S
        while where is None and launchers:  # a launcher the same signal reached (`timeout` signals the group)
            for p in launchers:  # records its SignalException on the way out: its traceback says where it was
                tb = (_read_json(p.path("exc")) or {}).get("traceback") or ""
                hit = re.findall(r'File "([^"]*rendezvous[^"]*)", line (\d+), in (\w+)', tb)
                if hit:
                    f = next((f for f in hit if f[2] == "next_rendezvous"), hit[-1])
                    where = {"pid": p.pid, "file": f[0], "line": int(f[1]), "func": f[2]}
                    break
            if where is not None or time.time() > t_end or not any(p.alive for p in launchers):
                break
            time.sleep(0.1)
            for p in launchers:
                p.poll(time.time(), False)
        if ep is None and where is None:
            return None
        return self._rendezvous_section(ep, ranks, where, round(time.time() - self.t_start, 1))

    def _rendezvous_section(self, ep, ranks: list, launcher_frame, waited_s) -> dict:
        """The fields of the rendezvous section a wait and an unfilled end share: the nodes and endpoint of the
        command line (endpoint_from_argv gives the doctor's own store, one port above the rendezvous's), the ranks
        started on this node and those in init_process_group, and the nodes here and seen (_nodes_here)."""
        out = {"nnodes": ep[2] if ep else None, "host": ep[0] if ep else None, "port": ep[1] - 1 if ep else None,
               "ranks_started": len(ranks), "ranks_in_init": sum(1 for p in ranks if (p.beacon or {}).get("phase") == "init"),
               "launcher_frame": launcher_frame, "waited_s": waited_s}
        out.update(self._nodes_here())
        return out

    def _nodes_here(self) -> dict:
        """This node (host, --node-rank) and every node whose `ddpdoctor run` reached the doctor's store beside
        the rendezvous (multinode.Link.nodes_seen, bounded), for RUN024's nodes joined and missing."""
        nr = multinode.launch_options(self.argv).get("node-rank")
        return {"this_node": {"host": socket.gethostname(), "node_rank": int(nr) if str(nr or "").isdigit() else None},
                "nodes_seen": [dict(n, this=n.get("node") == self.link.slot) for n in self.link.nodes_seen()]
                if self.link is not None else []}

    def rendezvous_ended(self, end: dict) -> dict:
        """The rendezvous section (as rendezvous_wait's) for a launch whose rendezvous ended unfilled
        (multinode.rendezvous_end: the store's "1/2 clients joined", a RendezvousTimeoutError): the nodes the
        command line expected and where, this node (host, --node-rank), the nodes whose `ddpdoctor run` reached
        the doctor's store beside the rendezvous, and how it ended. Read at the end: no stack is taken."""
        opts = multinode.launch_options(self.argv)
        out = self._rendezvous_section(multinode.endpoint_from_argv(self.argv), self._rank_procs(), None,
                                       end.get("timeout_s"))
        out.update(ended=end, endpoint_by="--rdzv-endpoint" if opts.get("rdzv-endpoint") else "--master-addr"
                   if opts.get("master-addr") else None)
        return out

    def take_native(self, procs: list, timeout_s: float = 5.0) -> None:
        """Native frames (py-spy dump --native, the `native` extra) of each rank, when py-spy is there."""
        try:
            got = hostfacts.native_stacks([p.pid for p in procs if p.alive], timeout_s)
        except Exception:  # noqa: BLE001
            return
        for p in procs:
            if p.pid in got:
                p.native = got[p.pid]

    def take_stacks(self, procs: list) -> None:
        sizes = {}
        for p in procs:
            sig = p.info.get("sig")
            if not sig or not p.alive or (p.beacon or {}).get("phase") == "exit":
                continue
            path = p.path("stack")
            try:
                sizes[p.pid] = os.path.getsize(path)
                os.kill(p.pid, int(sig))
            except OSError:
                continue
        deadline = time.time() + STACK_WAIT_S
        pending = dict(sizes)
        stable: dict = {}
        while pending and time.time() < deadline:
            time.sleep(0.05)
            for pid, size0 in list(pending.items()):
                path = self.procs[pid].path("stack")
                try:
                    size = os.path.getsize(path)
                except OSError:
                    continue
                if size > size0 and stable.get(pid) == size:
                    pending.pop(pid)
                stable[pid] = size
        for pid, size0 in sizes.items():
            try:
                with open(self.procs[pid].path("stack"), "rb") as fh:
                    fh.seek(size0)
                    self.procs[pid].dump = fh.read(256000).decode(errors="replace").replace("\x00", "")
            except OSError:
                pass

    # ------------------------------------------------------------------ the step split and the straggler
    def steps_by_rank(self) -> dict:
        out = {}
        for p in self._rank_procs():
            r = section._rank_of(p.facts_light())
            if r is not None and p.steps:
                out[r] = p.steps
        return out

    def summaries(self) -> dict:
        out = {}
        for p in self._rank_procs():
            r = section._rank_of(p.facts_light())
            sp = p.split()
            if r is not None and sp:
                out[r] = sp
        return out

    def table_lines(self, when: str) -> list:
        sums = self.summaries()
        strag = self.straggler_reports[-1]["ranks"] if self.straggler_reports else []
        held = bool(self.straggler_reports and (self.straggler_reports[-1].get("host_held") or {}).get("held"))
        lines = [f"ddpdoctor run: step split {when} ({len(sums)} rank(s) on this node)"]
        startup = bool(self.straggler_reports and self.straggler_reports[-1].get("startup"))
        lines += stepsplit.table_lines(sums, strag, "held back by the host" if held else
                                       "slow at the start only" if startup else "the straggler")
        missed = sum(v.get("missed", 0) for v in sums.values())
        if missed:
            lines.append(f"  ({missed} step(s) ended faster than the beacon was read and are not in the table)")
        dropped = {r: v for r, v in sums.items() if v.get("dropped")}
        if dropped:
            firsts = sorted({v.get("first") for v in dropped.values()})
            lines.append(f"  (a long job: {MAX_STEPS_KEPT:,} step records are kept per rank; the table and the straggler "
                         f"test are of steps {firsts[0]:,} on, the first {max(v['dropped'] for v in dropped.values()):,} "
                         "steps' records were dropped)")
        if self.straggler_reports:
            last = self.straggler_reports[-1]
            what = ("held by the host" if (last.get("host_held") or {}).get("held") else
                    "slow at the start only" if last.get("startup") else "straggler")
            lines.append(f"  {what}: {last.get('headline')}")
        nj = self.straggler_not_judged() if when == END else None  # mid-job (SIGUSR1) the window may yet form
        if nj:
            lines.append(f"  stragglers NOT judged: {stepsplit.not_judged_text(nj)}")
        seen = self.straggler_seen() if when == END else None
        if seen:
            lines.append(f"  stragglers judged, none named; seen: {stepsplit.seen_text(seen)}")
        return lines

    def straggler_seen(self) -> Optional[dict]:
        """A lead the straggler test judged and did not name (facts.steps.seen), so that silence is not read as "no
        straggler"; None when a verdict was reached or the test could not judge (straggler_not_judged says why)."""
        if self.straggler_reports:
            return None
        return stepsplit.seen(self.steps_by_rank())

    def straggler_not_judged(self) -> Optional[dict]:
        """Why no straggler verdict could be formed on this node (facts.steps.not_judged), so that silence is not read
        as "no straggler"; None when a verdict was reached, or the test's window formed, or fewer than 2 ranks here
        recorded steps (a one-process job; one rank per node: the job-wide verdict is the store's)."""
        if self.straggler_reports:
            return None
        nj = stepsplit.not_judged(self.steps_by_rank())
        return nj if nj and nj["reason"] != "ranks" else None

    def _check_straggler(self, now: float) -> None:
        by_rank = self.steps_by_rank()
        if len(by_rank) < 2:
            return
        self._sample_host(by_rank)
        verdict = stepsplit.straggler(by_rank, aligner=self.aligner, ended=False)  # live: the job may go on
        if verdict is None:
            if self.straggler_open is not None and self._straggler_gone(by_rank):
                self.write(f"ddpdoctor run: the straggler (rank(s) {stepsplit.ranks_text(list(self.straggler_open[0]))}) "
                           "has caught up")
                self.straggler_open = None
            self._hold_short(by_rank)
            return
        self._publish_straggler(verdict, by_rank, now)

    def _hold_short(self, by_rank: dict) -> None:
        """Fewer common steps than the window so far: what the short rule would say if the job ended now. Not said
        (the first steps of a long job are its warm-up); its facts (workers, threads, the line it spends its time at)
        are taken now, while its ranks run, for the job's end (_check_short_straggler), once per straggler ranks."""
        if self.straggler_reports:
            return
        v = stepsplit.straggler(by_rank, aligner=self.aligner, ended=True)
        if v is None or v["rule"] != "short":
            return
        if self.short_pending is not None and self.short_pending[0] == tuple(v["ranks"]):
            return
        self.short_pending = (tuple(v["ranks"]), self.straggler_facts(v))

    def _check_short_straggler(self) -> None:
        """At the job's end: a job that ended within the window's steps (no live verdict, no death or stall) is judged
        by the short rule over all its steps; the facts are those held while it ran (_hold_short), else none."""
        if self.straggler_reports or self.death_done or self.stall_open:
            return
        by_rank = self.steps_by_rank()
        if len(by_rank) < 2:
            return
        verdict = stepsplit.straggler(by_rank, ended=True)
        if verdict is None or verdict["rule"] != "short":
            return
        pend = self.short_pending
        facts = pend[1] if pend is not None and pend[0] == tuple(verdict["ranks"]) else {}
        self._publish_straggler(verdict, by_rank, time.time(), facts)

    def _check_startup(self) -> None:
        """At the job's end: a straggler named live whose lead began with the job and ended, followed by the window's
        steps without it (facts.steps.startup), was the job's start-up (a warm-up lasting the whole first window): its
        RUN020 is judged again with those statistics and replaces the one printed live (evidence["supersedes"])."""
        if not self.straggler_reports:
            return
        last = self.straggler_reports[-1]
        if last.get("startup") or (last.get("host_held") or {}).get("held"):
            return
        su = stepsplit.startup(self.steps_by_rank(), last)
        if su is None:
            return
        verdict = dict(last, startup=su)
        ranks = frozenset(f"rank:{r}" for r in verdict["ranks"])
        old = [f for f in self.findings if f.id == "RUN020" and _rank_subjects(f) == ranks]
        self.findings = [f for f in self.findings if not any(f is o for o in old)]
        sec = self.build()
        sec["straggler"] = verdict
        new = self._judge_and_print(sec, "the straggler judged again at the job's end", kind="straggler",
                                    only={"RUN020"})
        for f in new:
            f.evidence["supersedes"] = [{"id": g.id, "title": g.title} for g in old]
        verdict["headline"] = new[0].title if new else last.get("headline")
        self.straggler_reports.append(verdict)

    def _publish_straggler(self, verdict: dict, by_rank: dict, now: float, facts: Optional[dict] = None) -> None:
        # the straggler's run-queue delay over the window beside the other ranks': the host's share of its cost
        held = stepsplit.host_held(verdict, self.runq_rates(verdict, by_rank), self.steal_fracs(verdict, by_rank))
        key = (tuple(verdict["ranks"]), bool(held and held["held"]))
        if self.straggler_open == key:
            return
        self.straggler_open = key
        if facts is None:
            facts = self.straggler_facts(verdict)
        if held is not None:
            verdict["host_held"] = held
            if held["held"] and any(stepsplit.crowded(facts.get(str(r)) or {}) for r in verdict["ranks"]):
                held["held"] = False  # its own threads crowd its CPUs: the run-queue wait is the job's
                held["crowded"] = True
        verdict["cause"] = stepsplit.cause(verdict, facts)
        verdict["facts"] = facts
        verdict["t"] = now
        verdict["detected_at_step"] = max(s[0] for steps in by_rank.values() for s in steps[-1:])
        sec = self.build()
        sec["straggler"] = verdict
        new = self._judge_and_print(sec, "straggler", kind="straggler")
        self._supersede_attribution(new)
        same = [v for v in self.straggler_reports if (tuple(v["ranks"]), bool((v.get("host_held") or {}).get("held"))) == key]
        verdict["headline"] = new[0].title if new else (same[-1].get("headline") if same else None)
        self.straggler_reports.append(verdict)

    def _supersede_attribution(self, new: list) -> None:
        """One finding per fault: when a later straggler check on the same ranks changes who is to blame (the job's
        straggler, RUN020, or held back by the host, RUN023; the run-queue and steal windows fill a check or two
        after the straggler is first seen), the later, better-informed finding replaces the earlier one in the
        report, which keeps it in `evidence["supersedes"]` (the earlier one was printed live when it was made)."""
        for f in new:
            if f.id not in _ATTRIBUTION:
                continue
            ranks = _rank_subjects(f)
            old = [g for g in self.findings if g.id in _ATTRIBUTION and g.id != f.id and _rank_subjects(g) == ranks]
            if old:
                self.findings = [g for g in self.findings if not any(g is o for o in old)]
                f.evidence["supersedes"] = [{"id": g.id, "title": g.title} for g in old]

    def _check_flight_recorder(self) -> None:
        """torch's NCCL watchdog writes its Flight Recorder dump (TORCH_NCCL_DUMP_ON_TIMEOUT) before it
        aborts the process: the moment to take every rank's stacks, and to read the dumps (RUN016)."""
        prefix = getattr(self, "fr_prefix", None)
        if not prefix:
            return
        try:  # listed only when its directory changed, as the run directory is (_discover)
            mtime = os.stat(os.path.dirname(prefix) or ".").st_mtime
        except OSError:
            mtime = None
        if not listing_due(mtime, self._fr_dir_mtime, time.time()):
            return
        self._fr_dir_mtime = mtime
        new = [p for p in glob.glob(prefix + "*") if p not in self.fr_seen and not p.endswith(".tmp")]
        if not new:
            return
        t0 = time.time()
        self.fr_seen.update(new)
        live = [p for p in self._rank_procs() if p.alive]
        self.take_stacks([p for p in live if (p.beacon or {}).get("phase") not in ("init", "exit")])
        self.take_native(live, timeout_s=2.0)
        time.sleep(max(0.0, 1.0 - (time.time() - t0)))  # the other ranks' dumps land within a moment
        paths = sorted(set(glob.glob(prefix + "*")) - {p for p in glob.glob(prefix + "*") if p.endswith(".tmp")})
        self.fr_seen.update(paths)
        dumps, errors = [], {}
        from ..triage import flight

        for path in paths:
            try:
                with open(path, "rb") as fh:
                    data = fh.read(64 << 20)
                load = flight.load_json if data[:1] in (b"{", b"[") else flight.load_pickle
                dumps.append(load(data, path))
            except (OSError, flight.DumpError) as exc:
                errors[path] = str(exc)
        sec = self.build()
        sec["watchdog"] = {"dumps": [{"path": d["path"], "rank": d["rank"], "entries": len(d["entries"])} for d in dumps],
                           "analysis": flight.analyze(dumps) if dumps else [], "errors": errors,
                           "stacks_after_s": round(time.time() - t0, 2)}
        self.watchdog_t = t0
        self._judge_and_print(sec, "the NCCL watchdog timed out (Flight Recorder dump written)", kind="watchdog")

    def _check_framework(self, final: bool = False) -> None:
        """Once every rank reached its first optimizer step (or at the end): does the framework on each
        rank believe what the launch says (RUN021)? Judged once."""
        if getattr(self, "framework_done", False):
            return
        ranks = self._rank_procs()
        have = [p for p in ranks if (p.beacon or {}).get("fw")]
        if not have or (not final and len(have) < len([p for p in ranks if p.alive])):
            return
        self.framework_done = True
        from ..model.registry import REGISTRY  # noqa: F401 - load_all below registers the checks
        sec = self.build()
        self._judge_and_print(sec, "the job's set-up, at the first step", kind="setup", only={"RUN021"})

    def _sample_host(self, ranks) -> dict:
        """The one sampler of the host facts a straggler check reads, each local live rank of `ranks`
        once: the run-queue delay on its step's path (its threads' /proc/PID/task/*/schedstat; from one
        sample to the next, the main thread's wait and its most-delayed compute thread's, facts.steps.
        path_wait_s, added up into a counter from the rank's first sample) and the steal time of its CPUs
        (one read of /proc/stat for all, summed over the rank's affinity), kept over time (RUNQ_KEEP
        samples) so that a verdict's window can be read from them. Returns rank -> that counter at this
        sample (seconds); `last_host_sample` keeps (time, that)."""
        t = time.time()
        ticks = hostfacts.cpu_ticks()
        out = {}
        for p in self._rank_procs():
            r = section._rank_of(p.facts_light())
            if r is None or r not in ranks or not p.alive:
                continue
            v = self._path_wait(r, p.pid, t, hostfacts.thread_schedstat(p.pid))
            if v is not None:
                out[r] = v
                _keep(self.runq_series.setdefault(r, []), (t, v))
            st = hostfacts.ticks_over(ticks, hostfacts.affinity(p.pid)) if ticks else None
            if st is not None:
                _keep(self.steal_series.setdefault(r, []), (t, st[1], st[0]))
        self.last_host_sample = (t, out)
        return out

    def _path_wait(self, r: int, pid: int, t: float, sched: Optional[dict]) -> Optional[float]:
        """The rank's path-wait counter at time t, from its per-thread schedstat `sched`: the last value plus
        path_wait_s since its last sample (0.0 at its first sample, or when its process changed). None: unread."""
        if sched is None:
            return None
        prev = self._sched_prev.get(r)
        series = self.runq_series.get(r) or []
        last = series[-1][1] if series else 0.0
        self._sched_prev[r] = (t, pid, sched)
        if prev is None or prev[1] != pid:
            return last
        got = stepsplit.path_wait_s(prev[2], sched, pid, t - prev[0])
        return last + (got["path_s"] if got else 0.0)

    def runq_rates(self, verdict: dict, by_rank: dict) -> dict:
        """rank -> the run-queue delay on its step's path per second over the verdict's window (from the first
        window step's start to the last sample); a rank whose samples cover less than half of the
        window is left out."""
        start = self._window_start(verdict, by_rank)
        return {} if start is None else stepsplit.rates_over(self.runq_series, start)

    @staticmethod
    def _window_start(verdict: dict, by_rank: dict) -> Optional[float]:
        """When the verdict's first window step started (its end minus its length), None if no rank has it."""
        first = verdict["window"][0]
        for steps in by_rank.values():
            for rec in reversed(steps):  # the window is at the end of a long list (every step of the job)
                if rec[0] < first:
                    break
                if rec[0] == first:
                    return rec[2] - stepsplit.step_ms(rec) / 1000.0
        return None

    def steal_fracs(self, verdict: dict, by_rank: dict) -> dict:
        """rank -> the share of its CPUs' time stolen by the hypervisor over the verdict's window."""
        start = self._window_start(verdict, by_rank)
        return {} if start is None else stepsplit.fractions_over(self.steal_series, start)

    def _straggler_gone(self, by_rank: dict) -> bool:
        """The open straggler no longer waits least (or the cost fell under half the threshold)."""
        al = self.aligner.aligned(by_rank)
        if not al:
            return False
        med = {r: statistics.median(s[5] for s in v) for r, v in al.items()}
        slow = [r for r in (self.straggler_open or ((),))[0] if r in med]
        others = [r for r in med if r not in slow]
        if not slow or not others:
            return True
        step = statistics.median(stepsplit.step_ms(s) for v in al.values() for s in v)
        cost = statistics.median(med[r] for r in others) - max(med[r] for r in slow)
        return cost < 0.5 * max(stepsplit.MIN_COST_MS, stepsplit.MIN_COST_FRAC * step)

    def straggler_facts(self, verdict: dict) -> dict:
        """What the cause is read from, per rank (facts.steps.cause): DataLoader workers, /dev/shm,
        threads against CPUs and affinity, host load and steal, GPU throttling, and samples of the
        straggler's main thread (state, stack)."""
        ranks = {section._rank_of(p.facts_light()): p for p in self._rank_procs()}
        cpu_now = hostfacts.cpu_times()
        host = hostfacts.host_load(self._cpu_prev, cpu_now)
        self._cpu_prev = cpu_now
        affs = {r: hostfacts.affinity(p.pid) for r, p in ranks.items() if p.alive}
        total = os.cpu_count() or 1
        gpus = None
        out = {}
        # every rank's run-queue delay over the sampling below: the straggler's against the others'
        # (on a busy host every rank waits for a CPU; one held back by it waits more than the others)
        live = {r: p.pid for r, p in ranks.items() if p.alive and r is not None}
        # from this check's sample (_sample_host, just before the verdict) when it has these ranks: one
        # read per rank per check, not two at the same moment
        t0, rq0 = self.last_host_sample
        if time.time() - t0 > 2.0 or not set(live) <= set(rq0):
            rq0 = self._sample_host(set(live))
            t0 = self.last_host_sample[0]
        # the threads each rank really runs (the kernel's count, not OMP_NUM_THREADS or torch's), against
        # its affinity and quota, beside the other ranks' (facts.steps.cpu_crowding)
        demand = hostfacts.thread_demand(list(live.values()), n=10, every_s=0.03)
        usable = {r: hostfacts.usable_cpus(pid) for r, pid in live.items()}  # once per rank (cgroup files, affinity)
        per = {str(r): dict(demand.get(pid) or {}, affinity=affs.get(r), cpus=usable.get(r))
               for r, pid in live.items() if pid in demand}
        crowd = stepsplit.cpu_crowding(per)
        # the other ranks' loads, once: the same beside every straggler
        stragglers = {str(x) for x in verdict["ranks"]}
        rest = [v for q, v in crowd.items() if q not in stragglers]
        others_load = ({"own_load_others": round(statistics.median(v["own_load"] for v in rest), 3),
                        "crowd_load_others": round(statistics.median(v["crowd_load"] for v in rest), 3)} if rest else {})
        for r in verdict["ranks"]:
            p = ranks.get(r)
            if p is None or not p.alive:
                continue
            b = p.beacon or {}
            f = {"host": p.info.get("host"), "workers": (b.get("dl") or {}).get("workers"),
                 "shm_free_mb": hostfacts.shm_free_mb(), "threads": b.get("thr"),
                 "cpus": usable[r] if r in usable else hostfacts.usable_cpus(p.pid),
                 "ranks_on_host": len(ranks), "affinity": affs.get(r), "load_per_cpu": host.get("load_per_cpu"),
                 "steal_frac": host.get("steal_frac")}
            env = p.info.get("env") or {}
            omp = {k: env[k] for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS") if env.get(k)}
            if omp:
                f["omp_env"] = omp
            if str(r) in crowd:
                d = per[str(r)]
                f.update(threads_seen=d.get("threads"), runnable=d.get("runnable"), busy_threads=d.get("busy"),
                         cpu_used=d.get("cpu"),
                         **crowd[str(r)], **others_load)
            mine = set(affs.get(r) or ())
            if mine and len(mine) < total:
                f["affinity_shared"] = [o for o, a in affs.items() if o != r and a and mine & set(a) and len(a) < total]
            if True:  # samples of its main thread: asleep or running, and where (a data part too: the line that loads)
                f.update(hostfacts.sample_states(p.pid, n=25, every_s=0.02))
                from collections import Counter

                from . import stacks

                prefixes = tuple(p.info.get("lib") or ())
                seen: Counter = Counter()
                folded = {}
                for _ in range(3):  # three samples of its stacks: the line it spends its extra time at
                    self.take_stacks([p])
                    frames = section._frames({"dump": p.dump, "info": p.info})
                    uf = stacks.innermost_user(frames, prefixes, p.info.get("injected")) if frames else None
                    if uf:
                        key = f"{os.path.basename(uf['file'])}:{uf['line']}" + (f" `{uf['code']}`" if uf.get("code") else "")
                        seen[key] += 1
                        folded[key] = stacks.fold(frames, prefixes)
                    time.sleep(0.05)
                if seen:
                    f["line"], n = seen.most_common(1)[0]
                    f["line_samples"] = f"{n} of 3"
                    f["stack"] = folded[f["line"]]
                if gpus is None:
                    gpus = hostfacts.gpu_throttle()
                lr = (p.info.get("env") or {}).get("LOCAL_RANK")
                if gpus and lr is not None and lr.isdigit() and int(lr) in gpus:
                    f["gpu"] = gpus[int(lr)]
            out[str(r)] = f
        rq1 = self._sample_host(set(live))  # the end of the sampling: kept in the series too
        dt = self.last_host_sample[0] - t0
        rq = {}
        for r in live:
            a, b = rq0.get(r), rq1.get(r)
            if a is not None and b is not None and dt > 0:
                rq[r] = max(0.0, b - a) / dt
        others = [v for r, v in rq.items() if r not in verdict["ranks"]]
        for r in verdict["ranks"]:
            if str(r) in out and r in rq and others:
                out[str(r)].update(runq_frac=round(rq[r], 3), runq_frac_others=round(statistics.median(others), 3))
        return out

    # ------------------------------------------------------------------ deaths
    def launcher_records(self) -> list:
        out = []
        for path in sorted(glob.glob(os.path.join(self.run_dir, "agent.*.json"))):
            rec = _read_json(path)
            if rec:
                out.append(rec)
        return out

    def all_facts(self, split: bool = False) -> list:
        """Every process's facts, with what torchrun's agent said of it and the stacks taken before it
        was ended (by the agent's signal, or faulthandler on its SIGTERM)."""
        view = section.launcher_view(self.launcher_records())
        out = []
        for p in self.procs.values():
            f = p.facts(split=split)
            ag = view.get(p.pid)
            if ag is not None:
                f["launcher"] = ag
            if not f.get("alive", True) and not f.get("dump"):
                f["dump"] = p.dump_before_kill((ag or {}).get("stacks"))
                f["dump_before_kill"] = bool(f["dump"])
            out.append(f)
        return out

    def _check_death(self, now: float, final: bool = False) -> None:
        if self.death_done:
            return
        if not final and all(p.alive and not p.dying() for p in self.procs.values()):
            return  # every process runs: no rank is dead (all_facts reads files and /proc for each)
        facts = self.all_facts()
        ranks, _, _ = section.roles(facts)
        dead = [r for r in ranks if not r.get("alive", True) and section.end_of(r, self._oom_delta())]
        if not dead:
            return
        if self.stopped:
            self.death_done = True  # we ended the job: not a death to explain
            return
        if self.death_seen_t is None:
            self.death_seen_t = now
            self._discover(force=True)  # every process of the job in the verdict, whatever the dir's mtime said
        # let the other ranks' records land (peers fail a moment later) before judging, unless the job ended
        if not final and now - self.death_seen_t < 1.5 and any(r.get("alive", True) for r in ranks):
            return
        self.death_done = True
        sec = self.build(death=True)
        self._judge_and_print(sec, "a rank died")

    def _oom_delta(self) -> int:
        now = cgroup_oom_kills()
        return (now - self.oom0) if (now is not None and self.oom0 is not None) else 0

    # ------------------------------------------------------------------ judging
    def launcher(self) -> str:
        a = " ".join(os.path.basename(x) for x in self.argv[:3])
        for name in ("torchrun", "torch.distributed.run", "accelerate", "srun", "deepspeed", "mpirun"):
            if name in a:
                return name
        if any((p.info.get("mp_name") or "").startswith("SpawnProcess") or ("--multiprocessing-fork" in (p.info.get("argv") or [])
                                                                     and (p.beacon or {}).get("rank") is not None)
               for p in self.procs.values()):  # the recorder writes its info before spawn_main names the process
            return "mp.spawn"
        return os.path.basename(self.argv[0]) if self.argv else ""

    def build(self, stall: Optional[dict] = None, death: bool = False) -> dict:
        facts = self.all_facts(split=True)
        launcher = self.launcher()
        spawn = self.spawn_view(wait_s=SPAWN_DEADLINE_S if launcher == "mp.spawn" else 0.0) if death else None
        sec = section.build(facts, time.time(), stall=stall, death=death, oom_delta=self._oom_delta(),
                            stall_after=self.threshold(), launcher=launcher, spawn=spawn)
        if death:
            self._explain_kills(sec)
        return sec

    def spawn_view(self, wait_s: float = SPAWN_DEADLINE_S) -> Optional[dict]:
        """What the mp.spawn parent said of its children (section.spawn_view), from the job's stderr as the relay
        kept it. The parent warns before each SIGTERM, waits up to its grace period for the children, then raises once
        every child is joined: its lines are read until it exits (wait_spawn_view), within wait_s. Read at every
        death, whatever launcher() says: a script may start mp.spawn under torchrun or another launcher."""
        if self.stderr_tee is None:
            return None
        tee = self.stderr_tee
        return wait_spawn_view(lambda: (tee.text(wait_s=0),) + self._spawn_alive(), wait_s,
                               final=lambda: tee.text(wait_s=0.5), stop=lambda: bool(self.interrupted))

    def _spawn_alive(self) -> tuple:
        """(whether a process of the job that is not a rank, the script that called mp.spawn, still runs; whether a
        rank still runs)."""
        facts = [p.facts_light() for p in self.procs.values()]
        ranks, _, _ = section.roles(facts)
        rank_pids = {r.get("pid") for r in ranks}
        parent = ranks_alive = False
        for p in self.procs.values():
            if p.alive and _running_cpu(p.pid, p.start_ticks)[0]:
                if p.pid in rank_pids:
                    ranks_alive = True
                else:
                    parent = True
        return parent, ranks_alive

    def _explain_kills(self, sec: dict) -> None:
        """Every rank that got SIGKILL (or vanished) and was not ended by torchrun's teardown: what the
        node says about it (kills.KillEvidence), or what to read there. A rank that aborted itself (SIGABRT, no Python
        exception, no launcher teardown): the abort messages the job's stderr holds (facts.aborts: the C++ runtime's
        "terminate called after throwing", glibc's failed assert), which say why."""
        def self_aborted(end: dict) -> bool:
            return end.get("signal") == "SIGABRT" and not end.get("exception") and not end.get("terminated_by")

        if self.stderr_tee is not None and not getattr(self, "watchdog_t", None):
            ends = [r.get("end") or {} for r in sec.get("ranks") or []]
            mine = [e for e in ends if e and self_aborted(e)]
            if mine:  # the job's stderr read once, for every rank that aborted itself
                err = aborts.reasons(self.stderr_tee.text(wait_s=0.3))
                for end in mine if err else ():
                    end["abort"] = {"reasons": err, "aborted": len(mine)}
        for r in sec.get("ranks") or []:
            end = r.get("end") or {}
            if end and getattr(self, "watchdog_t", None) and end.get("signal") == "SIGABRT" and not end.get("exception"):
                end["kill"] = {"cause": "nccl-watchdog", "text": "the abort of torch's NCCL watchdog, after its "
                               "collective timed out (RUN016 above reads its Flight Recorder dumps)",
                               "fix": "See RUN016: the rank that never issued the collective, or the mismatched call"}
                continue
            if not end or end.get("terminated_by") or not (end.get("how") == "vanished" or end.get("signal") == "SIGKILL"):
                if end.get("terminated_by") and end.get("signal") == "SIGKILL" and not end.get("signal_guessed"):
                    by = end["terminated_by"]
                    after = ", ".join(f"rank {x}" for x in by.get("after_ranks") or [] if x is not None)
                    who = by.get("who") or "torchrun"
                    end["kill"] = {"cause": who, "text": f"{who}'s SIGKILL, after its SIGTERM was not obeyed "
                                   f"within its timeout" + (f" (teardown after {after} failed)" if after else ""),
                                   "evidence": by.get("line") or f"torchrun's agent ended it ({by.get('reason')})"}
                continue
            proc = self.procs.get(r.get("pid"))
            lr = ((proc.info if proc is not None else {}).get("env") or {}).get("LOCAL_RANK")
            kill = self.kills.explain(r.get("pid"), rss_mb=end.get("rss_mb"), gpu=int(lr) if lr and lr.isdigit() else None,
                                      t=end.get("t"))
            end["kill"] = kill
            if kill.get("cause") in ("oom-killer", "cgroup-limit"):
                end["why"] = "oom-killer"
                end.setdefault("oom_kill", 1)

    def _judge_and_print(self, sec: dict, headline: str, kind: Optional[str] = None, only: Optional[set] = None) -> list:
        from ..model.registry import REGISTRY
        from ..pipeline.judge import judge
        from ..pipeline.runner import load_all
        from ..pipeline.snapshot import Snapshot

        load_all()
        only = only or ({s.id for s in REGISTRY.values() if s.family == "run"} - {"RUN012", "RUN021"})
        report = judge(Snapshot(sections={"run": sec}), command="run", only=only, when="run")
        if kind == "setup" and not report.findings:
            return []
        self.sections.append(sec)
        seen = {(f.id, tuple(f.subjects)) for f in self.findings}
        new = [f for f in report.findings if f.family == "run" and (f.id, tuple(f.subjects)) not in seen]
        self.findings.extend(new)
        where = " on this node (its ranks only; the job-wide verdict follows)" if self.link is not None else ""
        if new or not report.findings:
            self.write(render_findings(new, f"ddpdoctor run: {headline}{where}", sec))
        else:
            self.write(f"ddpdoctor run: {headline}: {', '.join(sorted({f.id for f in report.findings}))} "
                       "already reported above")
        kind = kind or ("stall" if sec.get("stall") else "death")
        event = {"kind": kind, "t": time.time(), "findings": [f.id for f in new],
                 "title": "; ".join(f"{f.id} {f.title}" for f in new)[:300]}
        if sec.get("stall"):
            event["latency_s"] = round(event["t"] - sec["stall"]["last_progress_t"], 2)
        self.events.append(event)
        if self.link is not None and kind in ("stall", "death"):
            self._job_verdict(kind, sec)
        return new

    def _job_verdict(self, kind: str, sec: dict) -> None:
        """Multi-node: publish this node's ranks; the node of rank 0 judges the whole job, once."""
        from ..model.registry import REGISTRY
        from ..pipeline.judge import judge
        from ..pipeline.snapshot import Snapshot

        try:
            link = self.link
            if link.publish(kind, sec.get("ranks") or []) is None:
                self.write(f"ddpdoctor run: no job-wide verdict (store {link.host}:{link.port}: {link.error or 'not reachable'})")
                return
            if not any(r.get("rank") == 0 for r in sec.get("ranks") or []):
                text = link.get_verdict(kind)
                if text:
                    self.job_verdicts.append(text)
                    self.write(text)
                return
            records, missing = link.gather(kind, GATHER_WAIT_S)
            ranks = sorted(records, key=lambda r: (r.get("rank") is None, r.get("rank")))
            merged = dict(sec, ranks=ranks, mismatch=section.mismatch(ranks), nodes=len({r.get("host") for r in ranks}))
            if missing:
                merged["missing_nodes"] = missing
            if kind == "death":
                order = section.order_deaths(ranks)  # the same order as one node's: never by rank number
                if order:
                    merged["death"] = order
            only = {s.id for s in REGISTRY.values() if s.family == "run"} - {"RUN012"}
            report = judge(Snapshot(sections={"run": merged}), command="run", only=only, when="run")
            count = f"{len(ranks)} ranks" + (f"; {multinode.missing_text(missing, GATHER_WAIT_S)}" if missing else "")
            text = render_findings(report.findings, f"ddpdoctor run: job-wide verdict ({count})", merged)
            link.put_verdict(kind, text)
            self.job_verdicts.append(text)
            self.findings.extend(f for f in report.findings if f.id not in {x.id for x in self.findings})
            self.write(text)
        except Exception as exc:  # noqa: BLE001 - a missing peer node never breaks the local report
            self.write(f"ddpdoctor run: no job-wide verdict ({type(exc).__name__}: {exc})")

    # ------------------------------------------------------------------ ending
    def terminate_tree(self) -> None:
        """SIGTERM to every process of the job (by pid, not by group: torchrun puts its workers in
        their own sessions), SIGKILL after the grace period, until none is left (proctree.Tree.stop).
        Reaps what is ours, so the root's exit status is kept."""
        if self.tree is not None:
            self.tree.stop(grace_s=self.grace_s, reap=self._reap)
        self._reap()

    def remove_run_dir(self) -> None:
        import shutil

        for p in self.procs.values():
            p.close()

        if self.run_dir and not os.environ.get("DDPDOCTOR_RUN_KEEP"):
            shutil.rmtree(self.run_dir, ignore_errors=True)

    def _cleanup(self) -> None:
        if self.root is not None and self.root_status is None:
            self.terminate_tree()
            try:
                self.root.wait(timeout=5)
            except Exception:  # noqa: BLE001
                pass
            self._reap()
            if self.root_status is None and self.root.returncode is not None:
                self.root_status = self.root.returncode
        if self.tree is not None and self.tree.live():
            self.terminate_tree()
        if self.stderr_tee is not None:  # the job's last lines on their way before the verdict is printed
            self.stderr_tee.wait(1.0)
        fds, self._wake_fds = self._wake_fds, None
        for fd in fds or ():
            try:
                os.close(fd)
            except OSError:
                pass

    def run_section(self) -> dict:
        """The report's `run` section: per rank pid, host, last step, last collective, state, stack."""
        sec = self.sections[-1] if self.sections else self.build()
        ranks = []
        sums = self.summaries()
        for r in sec.get("ranks") or []:
            rec = {k: r.get(k) for k in ("rank", "pid", "host", "step", "last_collective", "state", "doing",
                                         "user_frame", "stack", "dataloader", "rss_mb", "end", "workers",
                                         "cpu_frac", "main_state", "running_frac", "framework", "coll_history", "native")}
            rec["split"] = sums.get(r.get("rank")) or r.get("split")
            ranks.append(rec)
        try:
            acc = accelerate_launch_facts(self.argv)
        except Exception:  # noqa: BLE001 - the launch's facts never break the report
            acc = None
        return {"command": list(self.argv), "launcher": sec.get("launcher"), "exit_status": self.exit_status(),
                "accelerate_launch": acc,
                "stall_after_s": self.threshold(), "stopped": self.stopped, "attached": bool(self.procs),
                "processes": len(self.procs), "events": self.events, "ranks": ranks,
                "preflight": self.preflight_findings(), "job_verdicts": self.job_verdicts,
                "split_table": self.table_lines(END)[1:] if sums else [],
                "stragglers": self.straggler_reports, "straggler_not_judged": self.straggler_not_judged(),
                "straggler_seen": self.straggler_seen()}

    def job_output(self) -> str:
        """What the job itself said about its end, for `triage`'s rules (commands/run.py reads it when no
        rank record explains a failure): the uncaught exception of every process that loaded ddpdoctor
        (exc.PID.json: the script's KeyError before any launcher variable, the launcher's own
        DistNetworkError on a port in use, torchrun's ChildFailedError with its root-cause table), oldest
        first, and the messages of torch elastic's error files. Read from the run directory at the end,
        so it holds whatever the polls missed (no rank record at all included). Then what the job wrote to
        its stderr (capture.StderrTee: its first 64 KiB and last 512 KiB, the relay's files): C++ lines (Gloo, the TCPStore) and
        the launcher's, which no exception record holds."""
        docs = []
        for path in glob.glob(os.path.join(self.run_dir, "exc.*.json")):
            d = _read_json(path) or {}
            text = d.get("traceback") or (f"{d.get('type')}: {d.get('message')}" if d.get("type") else "")
            if text:
                docs.append((d.get("t") or 0.0, text))
        efiles = {p.info.get("efile") for p in self.procs.values() if p.info.get("efile")}
        efiles.update(glob.glob(os.path.join(self.run_dir, "error.*.json")))
        for path in sorted(x for x in efiles if x):
            msg = ((_read_json(path) or {}).get("message") or {})
            if isinstance(msg, dict):
                text = msg.get("message") or ""
                t = (msg.get("extraInfo") or {}).get("timestamp")
            else:
                text, t = str(msg), None
            if text and not any(text.strip() in have for _, have in docs):
                docs.append((float(t) if str(t or "").isdigit() else 0.0, text))
        docs.sort(key=lambda d: d[0])
        if self.stderr_tee is not None:  # then what it printed (C++ and launcher lines no exception record holds)
            err = self.stderr_tee.text()
            if err.strip():
                docs.append((0.0, err))
        return "\n".join(text.rstrip("\n") for _, text in docs) + ("\n" if docs else "")

    def preflight_findings(self) -> list:
        seen, out = set(), []
        for path in sorted(glob.glob(os.path.join(self.run_dir, "preflight.*.json"))):
            data = _read_json(path) or {}
            for f in data.get("findings") or []:
                key = (f.get("id"), tuple(f.get("subjects") or ()))
                if key not in seen:
                    seen.add(key)
                    out.append(f)
        return out


def winch_others(tree, own_group: int) -> int:
    """SIGWINCH to the tree's members (identity checked) whose process group is not `own_group` (those the terminal
    already signalled). Returns how many got it."""
    sent = 0
    for pid, start in list(tree.members.items()):
        try:
            if os.getpgid(pid) == own_group or not proctree.running(pid, start):
                continue
            os.kill(pid, signal.SIGWINCH)
            sent += 1
        except OSError:
            continue
    return sent


FR_BUFFER_VARS = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")
FR_FILE_VARS = ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")


def flight_recorder_env(env: dict, run_dir: str) -> Optional[str]:
    """Turn on torch's NCCL Flight Recorder for the job unless the user chose its settings: 2000 entries
    per rank, a dump when the watchdog times out (TORCH_NCCL_DUMP_ON_TIMEOUT), written into the run
    directory. The current names (TORCH_FR_*; torch >= 2.9 deprecates TORCH_NCCL_TRACE_BUFFER_SIZE and
    TORCH_NCCL_DEBUG_INFO_TEMP_FILE, see NCCL002), from torch/csrc/distributed/c10d (FlightRecorder.hpp,
    ProcessGroupNCCL.hpp) and the settings catalogue; older names the user set win. Returns the prefix
    of the dump files."""
    if not any(env.get(k) for k in FR_BUFFER_VARS):
        env["TORCH_FR_BUFFER_SIZE"] = "2000"
    env.setdefault("TORCH_NCCL_DUMP_ON_TIMEOUT", "1")
    for k in FR_FILE_VARS:
        if env.get(k):
            return env[k]
    env["TORCH_FR_DUMP_TEMP_FILE"] = os.path.join(run_dir, "nccl_trace_rank_")
    return env["TORCH_FR_DUMP_TEMP_FILE"]


def wait_spawn_view(observe, deadline_s: float, final=None, settle_s: float = SPAWN_SETTLE_S,
                    clock=time.monotonic, sleep=time.sleep, stop=None) -> Optional[dict]:
    """The mp.spawn parent's view (section.spawn_view) once it has said which child failed, or once it has exited
    (then `final()`, the relay's last copy, is read once more), or settle_s after the last rank ended while the parent
    goes on (a script that caught the exception), or at deadline_s, or when stop() says so (`run` itself got a
    signal: its stacks come first). observe() -> (text so far, parent alive, a rank alive). Pure of processes: the
    caller gives the reads."""
    end = clock() + deadline_s
    gone_t = None
    while True:
        text, parent, ranks_alive = observe()
        view = section.spawn_view(text)
        if view and view.get("failed") or deadline_s <= 0:
            return view
        if not parent:  # it has ended: what it wrote is in the pipe
            return (section.spawn_view(final()) if final else None) or view
        now = clock()
        gone_t = None if ranks_alive else (now if gone_t is None else gone_t)
        if now >= end or (gone_t is not None and now - gone_t >= settle_s) or (stop is not None and stop()):
            return view
        sleep(0.1)


def _running_cpu(pid: int, start_ticks: Optional[int]) -> tuple:
    """(alive, not a zombie and the same process as proctree.running says; its utime + stime in clock
    ticks), from the one read of /proc/PID/stat that each poll makes."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
        rest = data[data.rindex(b")") + 2:].split()
        state, start, cpu = rest[0].decode(), int(rest[19]), int(rest[11]) + int(rest[12])
    except (OSError, ValueError, IndexError):
        return False, None
    return state not in ("Z", "X", "x") and (start_ticks is None or start == start_ticks), cpu
