"""torch's default intra-op thread count ignores a cgroup CPU quota (ATen init_num_threads -> MKL's or cpuinfo's
physical-core count): gathered physical cores (gather/host.py physical_cores) and the reading in facts/ranks.py."""
from factory import findings_of, make_snapshot

from ddpdoctor.gather import Sources
from ddpdoctor.gather.host import physical_cores

QUOTA_4_OF_64 = {"cpu_count": 128, "affinity_count": 128, "usable_cpus": 4, "physical_cores": 64, "container": "docker",
                 "cgroup": {"version": 2, "quota_cpus": 4.0, "memory_max_bytes": None}}


def test_physical_cores_counts_package_core_pairs(tmp_path):
    base = tmp_path / "sys/devices/system/cpu"
    base.mkdir(parents=True)
    (base / "present").write_text("0-3\n")
    for cpu, (pkg, core) in enumerate([(0, 0), (0, 1), (0, 0), (0, 1)]):  # 2 cores with 2 SMT siblings each
        topo = base / f"cpu{cpu}/topology"
        topo.mkdir(parents=True)
        (topo / "physical_package_id").write_text(f"{pkg}\n")
        (topo / "core_id").write_text(f"{core}\n")
    assert physical_cores(Sources(root=str(tmp_path), environ={})) == 2


def test_physical_cores_unknown_without_sysfs(tmp_path):
    assert physical_cores(Sources(root=str(tmp_path), environ={})) is None


def test_env006_counts_torch_default_past_the_cgroup_quota():
    found = findings_of(make_snapshot(env={}, host=QUOTA_4_OF_64), "ENV006")
    assert found and found[0].severity == "warning"
    assert found[0].evidence["threads_per_rank"] == 64 and "physical cores" in found[0].evidence["threads_source"]


def test_env006_quiet_when_omp_set_or_cores_unknown():
    assert findings_of(make_snapshot(env={"OMP_NUM_THREADS": "4"}, host=QUOTA_4_OF_64), "ENV006") == []
    unknown = dict(QUOTA_4_OF_64, physical_cores=None)
    assert findings_of(make_snapshot(env={}, host=unknown), "ENV006") == []  # the quota-capped reading, as before


def test_mkl_num_threads_counts_when_omp_unset():
    # torch's intraop_default_num_threads reads MKL_NUM_THREADS after OMP_NUM_THREADS (ATen/ParallelCommon.cpp)
    host = {"cpu_count": 8, "affinity_count": 8, "usable_cpus": 8}
    found = findings_of(make_snapshot(env={"MKL_NUM_THREADS": "32"}, host=host), "ENV006")
    assert found and found[0].evidence["threads_per_rank"] == 32
    assert findings_of(make_snapshot(env={"MKL_NUM_THREADS": "32", "OMP_NUM_THREADS": "2"}, host=host), "ENV006") == []
