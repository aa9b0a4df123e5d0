"""check25 (issue 26, round 22): the classes batches 100-113 lacked, each with a trigger and a quiet fixture.
Pure: snapshots are built by the factory over recorded facts; no process is started."""
from __future__ import annotations

from factory import findings_of, make_snapshot

# the runtimes a conda torch with MKL numpy records (gather.packages.openmp_runtimes: kind from the file name)
GOMP_AND_IOMP = [{"path": "/opt/conda/lib/libgomp.so.1", "kind": "gnu", "owner": "env"},
                 {"path": "/opt/conda/lib/libiomp5.so", "kind": "intel", "owner": "env"}]
TORCHRUN_4 = {"TORCHELASTIC_RUN_ID": "x", "RANK": "0", "WORLD_SIZE": "4", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "4",
              "GROUP_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}


# -- PKG021 arm: mkl-service's threading layer against GNU OpenMP (IntelPython/mkl-service mkl/_mklinitmodule.c) --

def _mkl(env=None, runtimes=GOMP_AND_IOMP, **versions):
    return make_snapshot(env=env, packages={"torch": "1.5.0", "mkl-service": "2.3.0", "openmp_runtimes": runtimes,
                                            **versions})


def test_mkl_threading_layer_intel_set_with_libgomp_is_named():
    [f] = findings_of(_mkl(env={"MKL_THREADING_LAYER": "intel"}), "PKG021")
    assert f.severity == "warning"
    assert "MKL_THREADING_LAYER=INTEL is incompatible with libgomp.so.1" in f.title
    assert f.fix.startswith("export MKL_THREADING_LAYER=GNU")
    assert f.evidence["rule"] == "set_intel"


def test_mkl_threading_layer_unset_on_a_job_of_several_processes_is_named():
    [f] = findings_of(_mkl(env=TORCHRUN_4), "PKG021")
    assert f.evidence["rule"] == "unset" and f.evidence["processes"] == 4
    assert "exports it to the processes started after it" in f.detail


def test_mkl_threading_layer_quiet_when_chosen_forced_alone_or_without_its_parts():
    assert findings_of(_mkl(env=dict(TORCHRUN_4, MKL_THREADING_LAYER="GNU")), "PKG021") == []
    assert findings_of(_mkl(env=dict(TORCHRUN_4, MKL_SERVICE_FORCE_INTEL="1")), "PKG021") == []
    assert findings_of(_mkl(env={}), "PKG021") == []  # one process: mkl-service follows the runtime loaded first
    no_gomp = [r for r in GOMP_AND_IOMP if r["kind"] != "gnu"]
    assert findings_of(_mkl(env={"MKL_THREADING_LAYER": "INTEL"}, runtimes=no_gomp), "PKG021") == []
    plain = make_snapshot(env={"MKL_THREADING_LAYER": "INTEL"}, packages={"openmp_runtimes": GOMP_AND_IOMP})
    assert findings_of(plain, "PKG021") == []  # no mkl-service recorded
