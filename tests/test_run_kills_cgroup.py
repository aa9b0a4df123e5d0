"""Issue 27 item 5: a rank's SIGKILL by the OOM killer, and the memory limit that bound it, read along the
rank's OWN cgroup and every ancestor (kills.py; the walk is gather/host.py cgroup_memory_fact, shared with
`check`). Before, only the memory cgroup of `ddpdoctor run` itself was read, so a limit set on a Slurm job's
cgroup above the task's (or on a cgroup the rank moved into) was missed and the kill called a node OOM.
Recorded trees of cgroup files under a fake root; no process is started."""
import os

from ddpdoctor.run import kills

GiB = 1024 ** 3
V1_NONE = "9223372036854771712\n"  # v1's "no limit"
EVENTS0 = "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n"
EVENTS1 = "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n"
# a rank of Slurm on cgroup v1: task cgroup below the step's and the job's; the job's cgroup holds --mem
RANK_V1 = ("12:pids:/slurm/uid_1000/job_7/step_0/task_1\n"
           "4:memory:/slurm/uid_1000/job_7/step_0/task_1\n0::/\n")


def _tree(root, files: dict) -> None:
    for rel, text in files.items():
        path = root / rel.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _slurm_v1(tmp_path, job_limit: str) -> kills.KillEvidence:
    m = "/sys/fs/cgroup/memory"
    _tree(tmp_path, {
        f"{m}/memory.oom_control": EVENTS0, f"{m}/memory.limit_in_bytes": V1_NONE,
        f"{m}/slurm/memory.limit_in_bytes": V1_NONE,
        f"{m}/slurm/uid_1000/memory.limit_in_bytes": V1_NONE,
        f"{m}/slurm/uid_1000/job_7/memory.limit_in_bytes": job_limit,
        f"{m}/slurm/uid_1000/job_7/step_0/memory.limit_in_bytes": V1_NONE,
        f"{m}/slurm/uid_1000/job_7/step_0/task_1/memory.limit_in_bytes": V1_NONE,
        f"{m}/slurm/uid_1000/job_7/step_0/task_1/memory.oom_control": EVENTS0})
    # `ddpdoctor run`'s own counters: the memory root here (its cgroup shows no limit)
    return kills.KillEvidence(environ={}, cgroup_dir=str(tmp_path / m.lstrip("/")), kmsg_path=str(tmp_path / "none"),
                              xid=False, sys_root=str(tmp_path))


def test_the_limit_on_the_jobs_cgroup_above_the_ranks_binds(tmp_path):
    ev = _slurm_v1(tmp_path, f"{8 * GiB}\n")
    ev.note_cgroup(4242, RANK_V1)  # read while the rank lived (the supervisor's RSS sample)
    task = tmp_path / "sys/fs/cgroup/memory/slurm/uid_1000/job_7/step_0/task_1/memory.oom_control"
    task.write_text(EVENTS1)  # the kernel counted the kill in the rank's own memory cgroup
    got = ev.explain(4242, rss_mb=8000.0)
    assert got["cause"] == "cgroup-limit", got
    assert "limit 8.0 GiB" in got["evidence"] and "job_7/memory.limit_in_bytes" in got["evidence"], got["evidence"]
    assert "oom_kill 0 -> 1" in got["evidence"] and "task_1/memory.oom_control" in got["evidence"]


def test_no_limit_anywhere_along_the_path_is_the_nodes_oom_killer(tmp_path):
    ev = _slurm_v1(tmp_path, V1_NONE)
    ev.note_cgroup(4242, RANK_V1)
    (tmp_path / "sys/fs/cgroup/memory/slurm/uid_1000/job_7/step_0/task_1/memory.oom_control").write_text(EVENTS1)
    got = ev.explain(4242, rss_mb=8000.0)
    assert got["cause"] == "oom-killer" and "; limit" not in got["evidence"], got


def test_a_kill_counted_nowhere_is_not_explained_by_a_limit_alone(tmp_path):
    ev = _slurm_v1(tmp_path, f"{8 * GiB}\n")
    ev.note_cgroup(4242, RANK_V1)
    got = ev.explain(4242, rss_mb=100.0)  # no counter moved, no kernel line: a limit is not a cause
    assert got["cause"] is None and got["read"], got


def test_a_counter_moved_on_the_ancestor_only_still_takes_the_walked_limit(tmp_path):
    # cgroup v2's memory.events are hierarchical: the kill shows on `run`'s cgroup; the limit is the rank's job's
    _tree(tmp_path, {"/sys/fs/cgroup/memory.events": "max 0\noom 0\noom_kill 0\n",
                     "/sys/fs/cgroup/job_3/memory.max": f"{2 * GiB}\n",
                     "/sys/fs/cgroup/job_3/step/memory.max": "max\n",
                     "/sys/fs/cgroup/job_3/step/memory.events": "max 0\noom 0\noom_kill 0\n"})
    ev = kills.KillEvidence(environ={}, cgroup_dir=str(tmp_path / "sys/fs/cgroup"), kmsg_path=str(tmp_path / "x"),
                            xid=False, sys_root=str(tmp_path))
    ev.note_cgroup(77, "0::/job_3/step\n")
    (tmp_path / "sys/fs/cgroup/memory.events").write_text("max 3\noom 1\noom_kill 1\n")
    got = ev.explain(77)
    assert got["cause"] == "cgroup-limit" and "limit 2.0 GiB" in got["evidence"], got
    assert "job_3/memory.max" in got["evidence"]
    # another rank, whose cgroup was never read: the walk falls back to none here (a cgroup_dir was given)
    assert "limit 2.0 GiB" not in ev.explain(78)["evidence"]


def test_a_rank_that_moves_cgroup_is_followed_and_the_first_sight_is_the_baseline(tmp_path):
    _tree(tmp_path, {"/sys/fs/cgroup/memory.events": "oom_kill 0\n",
                     "/sys/fs/cgroup/small/memory.max": f"{700 * 2 ** 20}\n",
                     "/sys/fs/cgroup/small/memory.events": "oom_kill 5\n"})  # earlier kills there are not ours
    ev = kills.KillEvidence(environ={}, cgroup_dir=str(tmp_path / "sys/fs/cgroup"), kmsg_path=str(tmp_path / "x"),
                            xid=False, sys_root=str(tmp_path))
    ev.note_cgroup(9, "0::/\n")
    ev.note_cgroup(9, "0::/small\n")
    assert ev.explain(9)["cause"] is None  # 5 kills before it moved there: not its kill
    (tmp_path / "sys/fs/cgroup/small/memory.events").write_text("oom_kill 6\n")
    got = ev.explain(9)
    assert got["cause"] == "cgroup-limit" and "limit 0.7 GiB" in got["evidence"] and "small/memory.max" in got["evidence"]


def test_proc_cgroup_is_read_while_alive_and_none_when_gone():
    assert kills.read_proc_cgroup(os.getpid()) == open("/proc/self/cgroup").read()
    assert kills.read_proc_cgroup(2 ** 22 + 7) is None


def _v2_job(tmp_path, limit_events: str, step_events: str):
    """cgroup v2: `run` in the root, the rank in job_3/step, the limit (2 GiB) on job_3."""
    _tree(tmp_path, {"/sys/fs/cgroup/memory.events": "max 0\noom 0\noom_kill 0\n",
                     "/sys/fs/cgroup/job_3/memory.max": f"{2 * GiB}\n",
                     "/sys/fs/cgroup/job_3/memory.events": limit_events,
                     "/sys/fs/cgroup/job_3/step/memory.max": "max\n",
                     "/sys/fs/cgroup/job_3/step/memory.events": step_events})
    ev = kills.KillEvidence(environ={}, cgroup_dir=str(tmp_path / "sys/fs/cgroup"), kmsg_path=str(tmp_path / "x"),
                            xid=False, sys_root=str(tmp_path))
    ev.note_cgroup(77, "0::/job_3/step\n")  # the baselines: the rank's cgroup and the limit's
    return ev


def test_a_kill_under_a_limit_that_was_not_reached_is_the_nodes_oom_killer(tmp_path):
    """v2's oom_kill counts processes of the cgroup killed by ANY kind of OOM killer (cgroup-v2.rst): the node
    running out kills there too. The limit's cgroup counted no `max` or `oom` event and the rank's RSS was far
    below it: the node's OOM, not the limit. Before, any limit on the path was called the cause."""
    ev = _v2_job(tmp_path, "max 0\noom 0\noom_kill 0\n", "max 0\noom 0\noom_kill 0\n")
    for cg in ("job_3", "job_3/step"):
        (tmp_path / f"sys/fs/cgroup/{cg}/memory.events").write_text("max 0\noom 0\noom_kill 1\n")
    got = ev.explain(77, rss_mb=300.0)
    assert got["cause"] == "oom-killer" and "was not reached" in got["text"], got
    assert "limit 2.0 GiB" in got["evidence"] and "did not move (max 0, oom 0)" in got["evidence"], got


def test_a_limit_reached_on_the_jobs_cgroup_above_the_rank_is_the_limit(tmp_path):
    """Quiet: the job's cgroup (above the rank's) counted `max` and `oom` events: its limit bound the rank,
    though the rank's own cgroup (below it) shows no such event (events go up the tree, not down)."""
    ev = _v2_job(tmp_path, "max 2\noom 0\noom_kill 0\n", "max 0\noom 0\noom_kill 0\n")
    (tmp_path / "sys/fs/cgroup/job_3/memory.events").write_text("max 9\noom 1\noom_kill 1\n")
    (tmp_path / "sys/fs/cgroup/job_3/step/memory.events").write_text("max 0\noom 0\noom_kill 1\n")
    got = ev.explain(77, rss_mb=300.0)
    assert got["cause"] == "cgroup-limit" and "guess" not in got["text"], got
    assert "job_3 max 2 -> 9" in got["evidence"] and "job_3 oom 0 -> 1" in got["evidence"], got
    # the rank's RSS at the limit is evidence enough, with no counter to read
    ev2 = _v2_job(tmp_path / "b", "oom_kill 0\n", "oom_kill 0\n")
    (tmp_path / "b/sys/fs/cgroup/job_3/step/memory.events").write_text("oom_kill 1\n")
    got2 = ev2.explain(77, rss_mb=1900.0)
    assert got2["cause"] == "cgroup-limit" and "within 10% of the limit" in got2["evidence"], got2
    # nothing to tell by: the limit stays the cause, said to be a guess
    got3 = ev2.explain(77, rss_mb=300.0)
    assert got3["cause"] == "cgroup-limit" and "a guess" in got3["text"], got3
