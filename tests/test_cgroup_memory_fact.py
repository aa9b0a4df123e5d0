"""The cgroup memory limit read as a fact (gather/host.py cgroup_memory_fact): the smallest limit along the
process's cgroup and its ancestors, v2 then v1, with the file it came from; "unknown" when nothing is readable."""
from ddpdoctor.gather import Sources
from ddpdoctor.gather.host import cgroup_memory_fact

GiB = 1024 ** 3


def _root(tmp_path, proc_cgroup: str, files: dict) -> Sources:
    (tmp_path / "proc/self").mkdir(parents=True, exist_ok=True)
    (tmp_path / "proc/self/cgroup").write_text(proc_cgroup)
    for rel, text in files.items():
        path = tmp_path / rel.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return Sources(root=str(tmp_path), environ={})


def test_v2_limit_on_an_ancestor_binds(tmp_path):
    # a Slurm step's task cgroup has no limit of its own; the job cgroup above it has 32 GiB
    src = _root(tmp_path, "0::/system.slice/slurmstepd.scope/job_42/step_0/user/task_0\n", {
        "/sys/fs/cgroup/system.slice/slurmstepd.scope/job_42/step_0/user/task_0/memory.max": "max\n",
        "/sys/fs/cgroup/system.slice/slurmstepd.scope/job_42/step_0/memory.max": "max\n",
        "/sys/fs/cgroup/system.slice/slurmstepd.scope/job_42/memory.max": f"{32 * GiB}\n",
        "/sys/fs/cgroup/system.slice/memory.max": "max\n"})
    fact = cgroup_memory_fact(src)
    assert fact == {"memory_max_bytes": 32 * GiB, "memory_max_state": "limit",
                    "memory_max_from": "/sys/fs/cgroup/system.slice/slurmstepd.scope/job_42/memory.max"}


def test_v2_smallest_limit_wins_and_max_everywhere_is_none(tmp_path):
    src = _root(tmp_path, "0::/a/b\n", {"/sys/fs/cgroup/a/b/memory.max": f"{64 * GiB}\n",
                                        "/sys/fs/cgroup/a/memory.max": f"{16 * GiB}\n"})
    assert cgroup_memory_fact(src)["memory_max_bytes"] == 16 * GiB
    (tmp_path / "sys/fs/cgroup/a/memory.max").write_text("max\n")
    (tmp_path / "sys/fs/cgroup/a/b/memory.max").write_text("max\n")
    assert cgroup_memory_fact(src) == {"memory_max_bytes": None, "memory_max_state": "none", "memory_max_from": None}


def test_v1_memory_controller_path_from_proc_self_cgroup(tmp_path):
    # Slurm on cgroup v1: the mount's root shows v1's "no limit"; the job's cgroup below it holds the limit
    src = _root(tmp_path, "12:pids:/slurm/uid_1000/job_7\n5:memory:/slurm/uid_1000/job_7/step_0\n", {
        "/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
        "/sys/fs/cgroup/memory/slurm/uid_1000/job_7/memory.limit_in_bytes": f"{8 * GiB}\n",
        "/sys/fs/cgroup/memory/slurm/uid_1000/job_7/step_0/memory.limit_in_bytes": "9223372036854771712\n"})
    fact = cgroup_memory_fact(src)
    assert fact["memory_max_bytes"] == 8 * GiB
    assert fact["memory_max_from"] == "/sys/fs/cgroup/memory/slurm/uid_1000/job_7/memory.limit_in_bytes"


def test_nothing_readable_is_unknown_not_none(tmp_path):
    src = _root(tmp_path, "0::/\n", {})
    assert cgroup_memory_fact(src) == {"memory_max_bytes": None, "memory_max_state": "unknown", "memory_max_from": None}
