"""Why a rank got SIGKILL: what the node says, read by `ddpdoctor run`'s parent.

A SIGKILL leaves nothing in the process: no traceback, no faulthandler dump. The node still knows:
- the kernel's OOM killer: the memory cgroup's counters (v2 `memory.events`: `oom_kill`, `max`;
  v1 `memory.oom_control`: `oom_kill`, `memory.failcnt`), and `/dev/kmsg` where readable ("Out of
  memory: Killed process PID", "Memory cgroup out of memory: Killed process PID", "oom-kill:...
  pid=PID");
- a cgroup memory limit (v2 `memory.max`, v1 `memory.limit_in_bytes`), named only where the usage reached
  it: the limit's cgroup counted it (v2 `memory.events` `max`, "about to go over the max boundary", or
  `oom`, "reached the limit and allocation was about to fail"; v1 `memory.failcnt`, "the number of times
  that a usage counter hit its limit"), or the rank's last RSS was within 10% of it. v2's `oom_kill`
  counts "processes belonging to this cgroup killed by any kind of OOM killer" (torvalds/linux
  Documentation/admin-guide/cgroup-v2.rst @ c0002d11; cgroup-v1/memory.rst @ 6df4ad70): a kill counted
  under a limit that was not reached is the node's OOM killer;
- the scheduler: SLURM's time limit or `scancel` (SIGTERM to the step, SIGKILL after KillWait):
  `ddpdoctor run` itself got SIGTERM inside a SLURM job, `scontrol show job` says the state and
  the end time;
- a GPU Xid (NVML's critical Xid events, followed by a thread while the job runs; "NVRM: Xid" in
  /dev/kmsg);
- torchrun's own teardown after another rank failed (launcher_hook.py's records; see section.py).
Where none of them can be read, `explain` says what to read on that node. Every reader is bounded
and never raises.
"""
from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from typing import Dict, List, Optional

# The kernel's OOM report, as /dev/kmsg carries it (mm/oom_kill.c). The victim's line comes from the message catalogue
# (ddpdoctor/data/messages.json, linux.oom_kill.*, with their sources); its forms differ by kernel version:
#   5.x/6.x  "<msg>: Killed process PID (comm) total-vm:..."  (__oom_kill_process, pr_err("%s: Killed process %d ..."),
#            torvalds/linux mainline mirror AOSC-Tracking/ubuntu-linux-mainline-crack @ 72c0e479), <msg> one of "Out of
#            memory", "Memory cgroup out of memory" (out_of_memory: is_memcg_oom) and "Out of memory
#            (oom_kill_allocating_task)" (vm.oom_kill_allocating_task=1); a memory.oom.group kill prints one such line
#            per member, after "Tasks in CGROUP are going to be killed due to memory.oom.group set";
#   <= 4.x   "<msg>: Kill process CHOSEN (comm) score N or sacrifice child", then "Killed process VICTIM (comm)
#            total-vm:..." with no prefix (oom_kill_process, torvalds/linux @ c797bc88): the victim may be a child of
#            the chosen process (a DataLoader worker of a rank), and whether a memory cgroup's limit was hit is said
#            only by the lines before it: the "Kill process" line's <msg>, or mm/memcontrol.c's "Task in CGROUP killed
#            as a result of limit of CGROUP" (RHEL 7 and 8, Ubuntu 18.04 kernels: common on clusters);
#   4.19+    also "oom-kill:constraint=CONSTRAINT_MEMCG|CONSTRAINT_NONE,...,oom_memcg=CGROUP,...,pid=PID,uid=N"
#            (dump_oom_summary, same mainline mirror).
_OOMKILL = re.compile(r"oom-kill:.*?\bpid=(\d+)")
_LIMIT_OF = re.compile(r"Task in (\S+) killed as a result of limit of (\S+)")
_KILLED_FALLBACK = (r"(?:(?P<scope>Out of memory|Memory cgroup out of memory)(?: \([^)]*\))?: )?Kill(?:ed)? process "
                    r"(?P<pid>\d+) \((?P<comm>[^)]*)\)")  # linux.oom_kill.killed_process's pattern, if unreadable
_SCOPE_BACK = 80  # lines before a bare "Killed process" searched for its report's scope (dump_header's lines between)


def _killed_rx() -> "re.Pattern":
    try:
        from ..facts import messages

        entry = messages.by_id("linux.oom_kill.killed_process")
        return re.compile(entry["pattern"] if entry else _KILLED_FALLBACK)
    except Exception:  # noqa: BLE001 - a reader never raises
        return re.compile(_KILLED_FALLBACK)


def oom_victims(lines: List[str]) -> Dict[int, dict]:
    """pid -> {"line", "memcg": True (a memory cgroup's limit) | False (the node) | None (not said), "limit_of",
    "said_by" (the earlier line that said which, in the <= 4.x form)} for
    every process the kernel's OOM killer killed in these kmsg lines, in the forms above. A "Kill process CHOSEN ... or
    sacrifice child" line names the process chosen, not the one killed: it scopes the report, it is no victim."""
    rx = _killed_rx()
    out: Dict[int, dict] = {}
    for i, ln in enumerate(lines):
        m = rx.search(ln)
        if m and "Killed process" in m.group(0):
            scope = m.groupdict().get("scope")
            memcg, limit_of, said = (scope.startswith("Memory cgroup") if scope else None), None, None
            for prev in reversed(lines[max(0, i - _SCOPE_BACK):i]):
                lm = _LIMIT_OF.search(prev)
                if lm:
                    limit_of = limit_of or lm.group(2)
                    if memcg is None:
                        memcg, said = True, prev
                    break
                pm = rx.search(prev)
                if pm and "Killed process" in pm.group(0):
                    break  # the report before this one
                if pm and memcg is None and pm.groupdict().get("scope"):
                    memcg, said = pm.group("scope").startswith("Memory cgroup"), prev
                if "CONSTRAINT_MEMCG" in prev and memcg is None:
                    memcg, said = True, prev
            d = out.setdefault(int(m.group("pid")), {"line": ln, "memcg": None, "limit_of": None})
            d["line"] = ln  # the victim's own line is the evidence (an oom-kill: summary may have come first)
            if said and not scope:
                d["said_by"] = said  # the line of its report that said which OOM it was (the <= 4.x form)
            d["memcg"] = memcg if memcg is not None else d["memcg"]
            d["limit_of"] = limit_of or d["limit_of"]
            continue
        m = _OOMKILL.search(ln)
        if m:
            mc = re.search(r"oom_memcg=([^,\s]+)", ln)
            d = out.setdefault(int(m.group(1)), {"line": ln, "memcg": None, "limit_of": None})
            if d["memcg"] is None:
                d["memcg"] = "CONSTRAINT_MEMCG" in ln
            if mc and mc.group(1) != "/":
                d["limit_of"] = d["limit_of"] or mc.group(1)
    return out
_XID = re.compile(r"NVRM: Xid \(([^)]*)\): (\d+)")


def memory_cgroup_dir(proc_cgroup: str = "/proc/self/cgroup", root: str = "/sys/fs/cgroup") -> Optional[str]:
    """The directory of this process's memory cgroup (v2 unified, or v1 memory controller)."""
    try:
        with open(proc_cgroup) as fh:
            text = fh.read()
    except OSError:
        return None
    return memory_cgroup_dir_of(text, root)


def memory_cgroup_dir_of(text: str, root: str = "/sys/fs/cgroup") -> Optional[str]:
    """The memory cgroup directory named by a /proc/PID/cgroup text (v1's memory controller where it
    has its counters, else v2's unified path)."""
    from ..gather.host import cgroup_paths

    p2, p1 = cgroup_paths(text)
    v2 = os.path.join(root, p2.lstrip("/")) if p2 else None
    v1 = os.path.join(root, "memory", p1.lstrip("/")) if p1 else None
    for cand in (v1, v2):
        if cand and (os.path.exists(os.path.join(cand, "memory.events")) or
                     os.path.exists(os.path.join(cand, "memory.oom_control"))):
            return cand.rstrip("/")
    return (v1 or v2 or "").rstrip("/") or None


def memory_counters(directory: Optional[str]) -> dict:
    """{'oom_kill', 'oom', 'max' (v2), 'failcnt' (v1), 'limit_bytes', 'version'} that could be read."""
    out: dict = {}
    if not directory:
        return out
    for name in ("memory.events", "memory.oom_control"):
        try:
            with open(os.path.join(directory, name)) as fh:
                for ln in fh:
                    k, _, v = ln.strip().partition(" ")
                    if k in ("oom_kill", "oom", "max", "oom_group_kill") and v.strip().isdigit():
                        out[k] = int(v)
            out["version"] = 2 if name == "memory.events" else 1
            out["file"] = os.path.join(directory, name)
            break
        except OSError:
            continue
    for name in ("memory.max", "memory.limit_in_bytes"):
        try:
            with open(os.path.join(directory, name)) as fh:
                v = fh.read().strip()
            if v.isdigit() and int(v) < 1 << 60:
                out["limit_bytes"] = int(v)
            break
        except OSError:
            continue
    try:
        with open(os.path.join(directory, "memory.failcnt")) as fh:
            out["failcnt"] = int(fh.read().strip())
    except (OSError, ValueError):
        pass
    return out


def read_proc_cgroup(pid) -> Optional[str]:
    """The text of /proc/PID/cgroup (cgroups(7): "hierarchy-ID:controllers:path" lines), None if gone.
    Read while the rank lives: after a SIGKILL the file is gone with the process."""
    try:
        with open(f"/proc/{pid}/cgroup") as fh:
            return fh.read(8192)
    except OSError:
        return None


def limit_along(proc_cgroup: Optional[str], root: str = "/") -> dict:
    """The memory limit that binds a process whose /proc/PID/cgroup read `proc_cgroup` (None: this
    process's): the smallest memory.max (v2) or memory.limit_in_bytes (v1) of its cgroup and every
    ancestor, with the file it came from (gather/host.py cgroup_memory_fact, shared with `check`).
    Limits are hierarchical: a Slurm job's limit sits on the job's cgroup, above the step's and the
    task's, which show none (torvalds/linux Documentation/admin-guide/cgroup-v2.rst "Model of
    Delegation"; cgroup-v1/memory.rst "hierarchical accounting")."""
    from ..gather import Sources
    from ..gather.host import cgroup_memory_fact

    try:
        return cgroup_memory_fact(Sources(root=root, environ={}), proc_cgroup)
    except Exception:  # noqa: BLE001 - a reader never raises
        return {"memory_max_bytes": None, "memory_max_state": "unknown", "memory_max_from": None}


class Kmsg:
    """/dev/kmsg from now on (its old records skipped), read without blocking; None if unreadable
    (dmesg_restrict and no CAP_SYSLOG, or a container without it)."""

    def __init__(self, path: str = "/dev/kmsg"):
        self.fd = None
        self.lines: List[str] = []
        try:
            self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            os.lseek(self.fd, 0, os.SEEK_END)
        except OSError:
            self.close()

    @property
    def readable(self) -> bool:
        return self.fd is not None

    def read(self) -> List[str]:
        """New records since the last read (message text only), kept in `lines` too."""
        out = []
        if self.fd is None:
            return out
        for _ in range(10000):
            try:
                rec = os.read(self.fd, 8192)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == 32:  # EPIPE: records were overwritten; go on from the next one
                    continue
                break
            if not rec:
                break
            text = rec.decode(errors="replace")
            out.append(text.split(";", 1)[1].strip() if ";" in text else text.strip())
        self.lines.extend(out)
        del self.lines[:-2000]
        return out

    def close(self) -> None:
        if self.fd is not None:
            try:
                os.close(self.fd)
            except OSError:
                pass
        self.fd = None


class XidWatch:
    """NVML's critical Xid events on every GPU, followed by a daemon thread (1 s waits) while the job
    runs. Does nothing where NVML, a driver or a GPU is missing."""

    def __init__(self):
        self.events: List[dict] = []
        self.error: Optional[str] = None
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def start(self) -> "XidWatch":
        self._thread = threading.Thread(target=self._run, name="ddpdoctor-xid", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        try:
            import pynvml as nv

            nv.nvmlInit()
        except Exception as exc:  # noqa: BLE001 - no library, no driver: nothing to follow
            self.error = f"NVML: {exc}"
            return
        try:
            es = nv.nvmlEventSetCreate()
            for i in range(nv.nvmlDeviceGetCount()):
                try:
                    nv.nvmlDeviceRegisterEvents(nv.nvmlDeviceGetHandleByIndex(i), nv.nvmlEventTypeXidCriticalError, es)
                except Exception:  # noqa: BLE001 - not supported on this GPU
                    continue
            while not self._stop.is_set():
                try:
                    data = nv.nvmlEventSetWait(es, 1000)
                except Exception:  # noqa: BLE001 - the timeout
                    continue
                idx = None
                try:
                    idx = nv.nvmlDeviceGetIndex(data.device)
                except Exception:  # noqa: BLE001
                    pass
                self.events.append({"t": time.time(), "gpu": idx, "xid": int(data.eventData)})
        except Exception as exc:  # noqa: BLE001
            self.error = f"NVML: {exc}"
        finally:
            try:
                nv.nvmlShutdown()
            except Exception:  # noqa: BLE001
                pass


class KillEvidence:
    """Started with the job: baselines of the counters, /dev/kmsg from now, the Xid thread."""

    def __init__(self, environ=None, cgroup_dir: Optional[str] = None, kmsg_path: str = "/dev/kmsg",
                 xid: bool = True, slurm_reader=None, sys_root: str = "/"):
        self.env = dict(os.environ if environ is None else environ)
        self.cg = cgroup_dir if cgroup_dir is not None else memory_cgroup_dir()
        self.base = memory_counters(self.cg)
        # Each rank's own cgroup (its /proc/PID/cgroup, as last read while it lived) and the counters
        # of its memory cgroup when first seen there: a rank may sit below this process's cgroup (a
        # Slurm task cgroup, a container's), or move. Without a rank's own, the walk starts from this
        # process's cgroup (the ranks inherit it), unless a cgroup_dir was given (tests: that is the job's).
        self.sys_root = sys_root
        self.own_cgroup = read_proc_cgroup("self") if cgroup_dir is None else None
        self.rank_cgroup: Dict[int, str] = {}
        self.rank_base: Dict[str, dict] = {}
        # the counters of the cgroup whose limit binds a rank (an ancestor's: a Slurm job's), when first seen:
        # whether the usage reached that limit (its max/oom events, v1 failcnt) is read against them
        self.limit_base: Dict[str, dict] = {}
        self.kmsg = Kmsg(kmsg_path)
        self.xid = XidWatch().start() if xid else None
        self.sigterm_t: Optional[float] = None  # when `ddpdoctor run` itself got SIGTERM
        self.slurm_reader = slurm_reader or slurm_job

    def note_cgroup(self, pid: int, proc_cgroup: Optional[str]) -> None:
        """The rank's /proc/PID/cgroup as read now (the supervisor's RSS sample, once a second); a
        memory cgroup seen for the first time gets its baseline counters."""
        if not proc_cgroup or self.rank_cgroup.get(pid) == proc_cgroup:
            return
        self.rank_cgroup[pid] = proc_cgroup
        d = memory_cgroup_dir_of(proc_cgroup, os.path.join(self.sys_root, "sys/fs/cgroup"))
        if d and d != self.cg and d not in self.rank_base:
            self.rank_base[d] = memory_counters(d)
        ld = self._limit_dir(limit_along(proc_cgroup, self.sys_root))
        if ld and ld not in self.limit_base:
            self.limit_base[ld] = memory_counters(ld)

    def _limit_dir(self, walked: dict) -> Optional[str]:
        """The directory of the cgroup whose file set the walked limit (memory_max_from), under sys_root."""
        src = walked.get("memory_max_from")
        return os.path.join(self.sys_root, os.path.dirname(src).lstrip("/")).rstrip("/") if src else None

    def limit_reached(self, limit: Optional[int], limit_dir: Optional[str], counted: Optional[str],
                      now: dict, base: dict, rss_mb: Optional[float]) -> tuple:
        """Did the usage reach the memory limit? (True, evidence), (False, evidence) or (None, why not known).
        Evidence it did: the limit's own cgroup counted it since its baseline (v2 memory.events `max` or `oom`,
        v1 memory.failcnt), or the cgroup that counted the kill did (its events are hierarchical: an event of
        a cgroup below shows there too), or the rank's last RSS was within 10% of the limit. It did not: the
        limit's cgroup has those counters (read against a baseline) and none moved, and the RSS was below."""
        keys = ("max", "oom", "failcnt")
        rose = []
        lb = self.limit_base.get(limit_dir) if limit_dir else None
        lnow = memory_counters(limit_dir) if limit_dir and lb is not None else {}
        if limit_dir and limit_dir == counted:
            lnow, lb = now, base
        for cnt, b0, where in ((lnow, lb, limit_dir), (now, base, counted)):
            if b0 is None:
                continue
            for k in keys:
                if (cnt.get(k) or 0) > (b0.get(k) or 0):
                    rose.append(f"{os.path.basename(where or '') or 'its cgroup'} {k} {b0.get(k, 0)} -> {cnt.get(k)}")
        if rose:
            return True, "the limit was reached: " + ", ".join(dict.fromkeys(rose))
        if rss_mb and limit and rss_mb * 2 ** 20 >= 0.9 * limit:
            return True, f"its last RSS {rss_mb:.0f} MiB is within 10% of the limit"
        if lb is not None and any(k in lnow for k in keys):
            seen = ", ".join(f"{k} {lnow[k]}" for k in keys if k in lnow)
            return False, f"the limit was not reached: its cgroup's counters did not move ({seen})"
        return None, "whether the usage reached the limit could not be read (no max/oom/failcnt counter of its cgroup)"

    def limit_of(self, pid: Optional[int]) -> dict:
        """The limit that binds rank `pid` (limit_along), from its own cgroup if it was read, or this process's."""
        text = self.rank_cgroup.get(pid) if pid is not None else None
        if text is None and self.own_cgroup is None:
            return {"memory_max_bytes": None, "memory_max_state": "unknown", "memory_max_from": None}
        return limit_along(text if text is not None else self.own_cgroup, self.sys_root)

    def close(self) -> None:
        self.kmsg.close()
        if self.xid is not None:
            self.xid.stop()

    def _slurm_end(self, job: str, t: Optional[float]) -> Optional[dict]:
        """SLURM's end of the job (SIGTERM to its steps, SIGKILL after KillWait) as the cause of a SIGKILL, only on
        its evidence: `ddpdoctor run` itself got SIGTERM (the caller's test), the kill did not come before that
        SIGTERM (KillWait's SIGKILL follows it), and scontrol does not show the job still running (then the SIGTERM
        came from elsewhere: a step's cancel, kill, a CI timeout; data/slurm_states.json). scontrol unreadable: said
        as a guess. None when the evidence is against it."""
        if t is not None and t < self.sigterm_t - 0.5:
            return None  # killed before the SIGTERM: not the SIGKILL that follows it
        info = self.slurm_reader(job) or {}
        states = slurm_states()
        state = (info.get("JobState") or "").split("+")[0] or None
        if state in states["not_ended"] and not _past(info.get("EndTime")):
            return None  # the job runs on: SLURM did not end it
        at = time.strftime('%H:%M:%S', time.localtime(self.sigterm_t))
        evidence = (f"ddpdoctor run got SIGTERM inside SLURM job {job} at {at}"
                    + (f"; scontrol: JobState={state} TimeLimit={info.get('TimeLimit')} EndTime={info.get('EndTime')}"
                       if info else "; scontrol could not be read"))
        ended = states["ended_by_scheduler"]
        if state in ended or _past(info.get("EndTime")):
            reason = ended.get(state) or "its time limit"
            text = f"SLURM ended the job ({reason}): SIGTERM, then SIGKILL after KillWait"
        else:
            text = (f"SLURM's end of the job (SIGTERM, then SIGKILL after KillWait), a guess: the SIGTERM came inside "
                    f"SLURM job {job}, but " + (f"its state {state} does not say the scheduler ended it" if state else
                                                 "scontrol could not say whether the job was cancelled or timed out"))
        return {"cause": "slurm", "evidence": evidence, "text": text, "guess": not (state in ended or _past(info.get("EndTime"))),
                "fix": "sacct -j " + job + " -o JobID,State,ExitCode,Elapsed,Timelimit  # then raise --time, or "
                       "checkpoint and resubmit; catch SIGTERM (or --signal=USR1@120) to save before the kill"}

    def explain(self, pid: int, rss_mb: Optional[float] = None, gpu: Optional[int] = None,
                t: Optional[float] = None) -> dict:
        """Why process `pid` got SIGKILL: {'cause', 'text', 'evidence', 'fix'} or {'cause': None, 'read'}."""
        self.kmsg.read()
        lines = self.kmsg.lines
        victim = oom_victims(lines).get(pid)
        now, base = memory_counters(self.cg), self.base
        text = self.rank_cgroup.get(pid) if pid is not None else None
        own = memory_cgroup_dir_of(text, os.path.join(self.sys_root, "sys/fs/cgroup")) if text else None
        if own and own in self.rank_base:  # the rank's own memory cgroup counted it (an ancestor's may not: v1 local)
            got = memory_counters(own)
            if (got.get("oom_kill") or 0) > (self.rank_base[own].get("oom_kill") or 0):
                now, base = got, self.rank_base[own]
        d_oom = (now.get("oom_kill") or 0) - (base.get("oom_kill") or 0)
        d_max = (now.get("max") or 0) - (base.get("max") or 0)
        limit = now.get("limit_bytes")
        walked = self.limit_of(pid)
        if walked.get("memory_max_bytes") and (not limit or walked["memory_max_bytes"] < limit):
            limit = walked["memory_max_bytes"]  # an ancestor's (or the rank's own) limit binds
        if victim is not None:
            memcg = bool(victim["memcg"])
            ev = victim["line"] + (f" (its report: {victim['said_by']})" if victim.get("said_by") else "")
            if victim["limit_of"]:  # the cgroup whose limit was hit, as the kernel names it
                for root, name in (("/sys/fs/cgroup/memory", "memory.limit_in_bytes"), ("/sys/fs/cgroup", "memory.max")):
                    got = memory_counters(os.path.join(root, victim["limit_of"].lstrip("/"))).get("limit_bytes")
                    if got:
                        limit = got
                        break
            if memcg:
                return {"cause": "cgroup-limit", "evidence": f"/dev/kmsg: {ev}",
                        "text": "killed by the kernel's OOM killer: its memory cgroup reached its limit"
                                + (f" ({limit / 2 ** 30:.1f} GiB)" if limit else ""),
                        "fix": "Lower memory per rank or raise the job's memory limit (--mem in SLURM, the "
                               "container's --memory)"}
            return {"cause": "oom-killer", "evidence": f"/dev/kmsg: {ev}",
                    "text": "killed by the kernel's OOM killer: the node ran out of memory",
                    "fix": "Lower memory per rank (fewer DataLoader workers, a memory-mapped dataset, smaller "
                           "batches) or run fewer ranks per node"}
        if d_oom > 0:
            where = now.get("file") or "memory cgroup"
            lim = f"; limit {limit / 2 ** 30:.1f} GiB" if limit else ""
            walked_binds = bool(limit and limit == walked.get("memory_max_bytes"))
            if walked_binds:
                lim += f" ({walked.get('memory_max_from')})"
            rss = f", last RSS {rss_mb:.0f} MiB" if rss_mb else ""
            evidence = (f"{where}: oom_kill {base.get('oom_kill', 0)} -> {now.get('oom_kill')}"
                        + (f", max {base.get('max', 0)} -> {now.get('max')}" if d_max else "") + lim + rss)
            counted = os.path.dirname(now["file"]) if now.get("file") else None
            reached, why = (None, "")
            if limit:
                reached, why = self.limit_reached(limit, self._limit_dir(walked) if walked_binds else counted,
                                                  counted, now, base, rss_mb)
                evidence += f"; {why}"
            if not limit or reached is False:
                return {"cause": "oom-killer", "evidence": evidence,
                        "text": "killed by the kernel's OOM killer: the node ran out of memory (the job's memory "
                                "cgroup counted the kill" + (f"; its limit{lim} was not reached" if limit else "") + ")",
                        "fix": "Lower memory per rank (fewer DataLoader workers, a memory-mapped dataset, smaller "
                               "batches) or run fewer ranks per node; see what else on the node used memory"}
            return {"cause": "cgroup-limit", "evidence": evidence,
                    "text": "killed by the kernel's OOM killer (the job's memory cgroup counted an OOM kill"
                            + f"{lim}" + (")" if reached else "; a guess that the limit bound it: " + why + ")"),
                    "fix": "Lower memory per rank or raise the job's memory limit"}
        xid = [e for e in (self.xid.events if self.xid else []) if gpu is None or e.get("gpu") in (None, gpu)]
        xid_k = [ln for ln in lines if _XID.search(ln)]
        if xid or xid_k:
            e = xid[-1] if xid else None
            code = e["xid"] if e else int(_XID.search(xid_k[-1]).group(2))
            ev = (f"NVML: Xid {e['xid']} on GPU {e['gpu']} at {time.strftime('%H:%M:%S', time.localtime(e['t']))}"
                  if e else f"/dev/kmsg: {xid_k[-1]}")
            try:
                from ..facts import xid as xidcat

                meaning = (xidcat.entry(code) or {}).get("meaning")
            except Exception:  # noqa: BLE001
                meaning = None
            return {"cause": "gpu-xid", "evidence": ev,
                    "text": f"a GPU error (Xid {code}{': ' + meaning if meaning else ''}) came before it",
                    "fix": "nvidia-smi -q -d ERROR,PAGE_RETIREMENT,ROW_REMAPPER on that node; Xid 79/48/63/64/74/94/95 "
                           "mean the GPU needs a reset or service: drain the node"}
        job = self.env.get("SLURM_JOB_ID")
        slurm = self._slurm_end(job, t) if job and self.sigterm_t is not None else None
        if slurm is not None:
            return slurm
        read = ["dmesg -T | grep -iE 'killed process|out of memory|oom-kill|xid' | tail",
                "journalctl -k --since '-1h' | grep -iE 'oom|xid'"]
        if self.cg:
            read.append(f"cat {os.path.join(self.cg, 'memory.events' if os.path.exists(os.path.join(self.cg, 'memory.events')) else 'memory.oom_control')}")
        if job:
            read.append(f"sacct -j {job} -o JobID,State,ExitCode,MaxRSS,Elapsed,Timelimit")
        read.append("nvidia-smi -q -d ERROR  # GPU errors, on a GPU node")
        why_not = []
        if not self.kmsg.readable:
            why_not.append("/dev/kmsg is not readable here")
        if not now:
            why_not.append("no memory cgroup counters")
        return {"cause": None, "read": "; ".join(read), "unreadable": why_not,
                "text": "nothing on this node says who sent it (no OOM kill counted, no kernel message, no GPU Xid, "
                        "no scheduler signal)"}


def slurm_states() -> dict:
    """data/slurm_states.json: SLURM's job states that end a job by the scheduler, and those of a job not ended."""
    import json
    import pathlib

    global _SLURM_STATES
    if _SLURM_STATES is None:
        with (pathlib.Path(__file__).resolve().parent.parent / "data" / "slurm_states.json").open(encoding="utf-8") as fh:
            _SLURM_STATES = json.load(fh)
    return _SLURM_STATES


_SLURM_STATES: Optional[dict] = None


def _past(when: Optional[str]) -> bool:
    if not when:
        return False
    try:
        return time.mktime(time.strptime(when, "%Y-%m-%dT%H:%M:%S")) <= time.time() + 5
    except (ValueError, OverflowError):
        return False


def slurm_job(job: str, timeout_s: float = 3.0) -> Dict[str, str]:
    """`scontrol show job -o JOB` as key -> value; {} without scontrol or in time."""
    try:
        out = subprocess.run(["scontrol", "show", "job", "-o", str(job)], capture_output=True, text=True,
                             timeout=timeout_s).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    info = {}
    for word in out.split():
        k, sep, v = word.partition("=")
        if sep:
            info[k] = v
    return info
