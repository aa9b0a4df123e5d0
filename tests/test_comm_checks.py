"""The comm verdicts over literal sections: each check fires on its fault and stays quiet when healthy."""
from __future__ import annotations

import copy

import pytest

from factory import findings_of, make_snapshot

SUMMARY = {"host": "node0", "world_size": 2, "versions": {"torch": "2.13.0", "transformers": "5.24.0"},
           "env": {"NCCL_DEBUG": "WARN"}}
HEALTHY = {
    "version": 1, "mode": "local", "backend": "gloo", "world_size": 2, "nproc": 2, "deadline_s": 60,
    "master_addr": "127.0.0.1", "master_port": 29555, "elapsed_s": 3.0, "ok": True, "timed_out": False,
    "interrupted": False, "teardown": "clean", "launcher_error": None, "root_cause": None,
    "ranks": [{"rank": 0, "host": "node0", "reported": True, "ok": True, "phase": "teardown", "exitcode": 0},
              {"rank": 1, "host": "node0", "reported": True, "ok": True, "phase": "teardown", "exitcode": 0}],
    "summaries": {"0": dict(SUMMARY, rank=0), "1": dict(SUMMARY, rank=1)},
    "phases": {"rendezvous": {"0": 0.1, "1": 0.1}}, "failure": None, "diagnosis": None,
    "all_reduce": {"ok": True, "bad_ranks": [], "per_rank": {}},
    "pairs": [{"src": 0, "dst": 1, "bytes": 1 << 20, "gbps": 2.0}],
    "bandwidth": [{"op": "all_reduce", "bytes": 1 << 20, "iters": 10, "time_us": 700.0, "algbw_gbps": 1.5,
                   "busbw_gbps": 1.5}],
}
COMM_IDS = ["COMM001", "COMM002", "COMM003", "COMM004", "COMM005", "COMM006", "COMM007", "COMM008", "COMM009",
            "COMM010", "COMM011", "COMM012", "COMM013", "COMM014"]


def sec(**over):
    s = copy.deepcopy(HEALTHY)
    s.update(over)
    return s


def failed(**over):
    return sec(ok=False, **over)


def peers(**states):
    return {"peers": {r: {"state": st, "phase": "all_reduce", "host": "node0", "ops": 0} for r, st in states.items()},
            "culprits": []}


@pytest.mark.parametrize("check_id", COMM_IDS)
def test_healthy_section_is_quiet(check_id):
    assert findings_of(make_snapshot(comm=sec()), check_id) == []


def test_healthy_summary_info():
    (f,) = findings_of(make_snapshot(comm=sec()), "COMM090")
    assert f.severity == "info" and "gloo" in f.title and "1.50 GB/s" in f.title


def test_never_joined_names_rank_and_phase():
    s = failed(root_cause={"kind": "never-started", "rank": 1, "ranks": [1], "phase": None},
               failure={"rank": 0, "phase": "rendezvous", "kind": "missing-ranks", "missing": [1]},
               diagnosis=peers(**{"0": "ok", "1": "never-joined"}))
    (f,) = findings_of(make_snapshot(comm=s), "COMM001")
    assert f.severity == "error" and "rank:1" in f.subjects and f.evidence["phase"] == "rendezvous"
    assert findings_of(make_snapshot(comm=s), "COMM002") == []
    assert findings_of(make_snapshot(comm=s), "COMM013") == []


def test_stuck_rank_named_with_host_and_phase():
    s = failed(failure={"rank": 0, "phase": "all_reduce", "kind": "timeout", "message": "Timed out"},
               diagnosis=peers(**{"0": "ok", "1": "behind"}))
    (f,) = findings_of(make_snapshot(comm=s), "COMM002")
    assert f.subjects == ("rank:1", "host:node0") and "all_reduce" in f.title
    assert findings_of(make_snapshot(comm=s), "COMM013") == []


def test_crash_root_cause():
    s = failed(root_cause={"kind": "crashed", "rank": 1, "exitcode": 17, "signal": None, "phase": "all_reduce",
                           "message": "exit code 17", "others": [0]})
    (f,) = findings_of(make_snapshot(comm=s), "COMM003")
    assert "rank 1" in f.title and "code 17" in f.title and "rank:1" in f.subjects
    assert findings_of(make_snapshot(comm=s), "COMM002") == []


def test_version_mismatch_names_package_and_odd_host():
    s = sec(summaries={"0": dict(SUMMARY, rank=0),
                       "1": dict(SUMMARY, rank=1, host="node1",
                                 versions={"torch": "2.13.0", "transformers": "5.20.0"})})
    (f,) = findings_of(make_snapshot(comm=s), "COMM004")
    assert "pkg:transformers" in f.subjects and f.severity == "warning"
    assert "transformers" in f.title and "node1" in f.title


def test_torch_mismatch_is_an_error():
    s = sec(summaries={"0": dict(SUMMARY, rank=0),
                       "1": dict(SUMMARY, rank=1, versions={"torch": "2.12.0", "transformers": "5.24.0"})})
    (f,) = findings_of(make_snapshot(comm=s), "COMM004")
    assert f.severity == "error" and "pkg:torch" in f.subjects


def test_env_mismatch():
    s = sec(summaries={"0": dict(SUMMARY, rank=0), "1": dict(SUMMARY, rank=1, env={"NCCL_DEBUG": "WARN",
                                                                                 "NCCL_IB_DISABLE": "1"})})
    (f,) = findings_of(make_snapshot(comm=s), "COMM005")
    assert "NCCL_IB_DISABLE" in f.subjects and "rank:1" in f.subjects


def test_interface_missing():
    s = failed(failure={"rank": 1, "phase": "init_process_group", "kind": "interface-missing", "iface": "eth9",
                        "message": "Unable to find address for: eth9"},
               summaries={"0": dict(SUMMARY, rank=0), "1": dict(SUMMARY, rank=1, env={"GLOO_SOCKET_IFNAME": "eth9"})})
    (f,) = findings_of(make_snapshot(comm=s), "COMM006")
    assert "iface:eth9" in f.subjects and "GLOO_SOCKET_IFNAME" in f.subjects
    assert findings_of(make_snapshot(comm=s), "COMM013") == []


@pytest.mark.parametrize("kind", ["master-unresolvable", "master-unreachable", "master-refused"])
def test_master_unreachable(kind):
    s = failed(failure={"rank": 1, "phase": "rendezvous", "kind": kind, "addr": "nohost.invalid", "port": 29500,
                        "message": "x"})
    (f,) = findings_of(make_snapshot(comm=s), "COMM007")
    assert "MASTER_ADDR" in f.subjects and "rank:1" in f.subjects


def test_port_in_use_from_preflight_and_from_launcher():
    s = failed(failure={"rank": None, "phase": "preflight", "kind": "port-in-use", "port": 29500,
                        "listeners": [{"pid": 4242, "cmdline": "python train.py"}], "message": "in use"})
    (f,) = findings_of(make_snapshot(comm=s), "COMM008")
    assert f.subjects == ("MASTER_PORT",) and "kill 4242" in f.fix
    s2 = failed(launcher_error="DistNetworkError: ... code: -98, name: EADDRINUSE, message: address already in use")
    assert len(findings_of(make_snapshot(comm=s2), "COMM008")) == 1
    assert findings_of(make_snapshot(comm=s2), "COMM013") == []


def test_world_size_mismatch_names_minority():
    s = failed(failure={"rank": 0, "phase": "rendezvous", "kind": "world-size-mismatch",
                        "claims": {"0": 2, "1": 3, "2": 2}})
    (f,) = findings_of(make_snapshot(comm=s), "COMM009")
    assert "rank:1" in f.subjects and "rank:0" not in f.subjects and "WORLD_SIZE" in f.subjects


def test_allreduce_wrong():
    s = sec(ok=False, all_reduce={"ok": False, "bad_ranks": [1], "per_rank": {
        "1": {"ok": False, "bad_elements": 1, "elements": 65536, "first_bad_index": 123, "got": 248.0,
              "expected": 247.0}}})
    (f,) = findings_of(make_snapshot(comm=s), "COMM010")
    assert "rank:1" in f.subjects and "248.0" in f.detail


def test_slow_pair():
    pairs = [{"src": a, "dst": b, "bytes": 1, "gbps": g} for a, b, g in
             [(0, 1, 10.0), (0, 2, 10.0), (1, 2, 9.0), (0, 3, 10.0), (1, 3, 1.0), (2, 3, 11.0)]]
    (f,) = findings_of(make_snapshot(comm=sec(world_size=4, pairs=pairs)), "COMM011")
    assert set(f.subjects) >= {"rank:1", "rank:3"}


def test_busbw_low_on_nvlink():
    gpus = {"devices": [{"index": 0}, {"index": 1}],
            "pairs": [{"a": 0, "b": 1, "p2p": {"nvlink": "OK", "read": "OK"}}]}
    s = sec(backend="nccl", bandwidth=[{"op": "all_reduce", "bytes": 1 << 28, "iters": 2, "time_us": 1.0,
                                         "algbw_gbps": 9.0, "busbw_gbps": 9.0}])
    (f,) = findings_of(make_snapshot(comm=s, gpus=gpus), "COMM012")
    assert "nvlink" in f.title and "gpu:0" in f.subjects
    s_ok = sec(backend="nccl", bandwidth=[dict(s["bandwidth"][0], busbw_gbps=150.0)])
    assert findings_of(make_snapshot(comm=s_ok, gpus=gpus), "COMM012") == []


def test_unexplained_failure_is_never_silent():
    s = failed(failure={"rank": 0, "phase": "pairs", "kind": "error", "message": "RuntimeError: boom"})
    (f,) = findings_of(make_snapshot(comm=s), "COMM013")
    assert "boom" in f.title and "rank:0" in f.subjects


def test_deadline_during_startup_is_never_silent():
    starting = [dict(r, phase="startup", ok=False) for r in HEALTHY["ranks"]]
    s = failed(ranks=starting, failure={"rank": 0, "phase": "startup", "kind": "deadline",
                                        "message": "rank 0 still in phase 'startup' when its 12 s deadline ran out"})
    (f,) = findings_of(make_snapshot(comm=s), "COMM013")
    assert "start-up" in f.title and f.subjects == ("rank:0", "rank:1") and "--deadline 120" in f.fix
    # a deadline with a rank to blame stays COMM002's
    s2 = failed(ranks=[dict(HEALTHY["ranks"][0], phase="all_reduce"), dict(HEALTHY["ranks"][1], phase="all_reduce")],
                failure={"rank": 0, "phase": "all_reduce", "kind": "deadline", "message": "deadline"},
                diagnosis=peers(**{"0": "ok", "1": "behind"}))
    assert findings_of(make_snapshot(comm=s2), "COMM013") == []
    assert len(findings_of(make_snapshot(comm=s2), "COMM002")) == 1


def test_teardown_abort_is_info_only():
    s = sec(teardown="aborted-after-report",
            ranks=[dict(HEALTHY["ranks"][0], signal="SIGABRT", exitcode=-6), HEALTHY["ranks"][1]])
    (f,) = findings_of(make_snapshot(comm=s), "COMM014")
    assert f.severity == "info" and "rank:0" in f.subjects
    assert len(findings_of(make_snapshot(comm=s), "COMM090")) == 1


def test_unavailable_section_skips_checks():
    from ddpdoctor.pipeline.runner import load_all, run_checks

    load_all(plugins=False)
    _, skipped, _ = run_checks(make_snapshot(comm={"unavailable": "no pair of ranks"}), only={"COMM001"})
    assert skipped and "no pair of ranks" in skipped[0].reason


def test_metrics_and_envmap():
    from ddpdoctor.comm import metrics
    from ddpdoctor.comm.envmap import first_slurm_host, torch_env

    assert metrics.parse_sizes("1K:16K") == [1024, 4096, 16384]
    assert metrics.parse_sizes("4M,1K") == [1024, 4 << 20]
    with pytest.raises(ValueError):
        metrics.parse_sizes("12Q")
    assert metrics.bandwidth("all_reduce", 10 ** 9, 1.0, 4)["busbw_gbps"] == 1.5
    assert first_slurm_host("gpu[07-09,12],cpu1") == "gpu07"
    env = torch_env({"SLURM_PROCID": "3", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1", "SLURM_NODEID": "1",
                     "SLURM_NTASKS_PER_NODE": "4", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_JOB_ID": "1234"})
    assert env["RANK"] == "3" and env["WORLD_SIZE"] == "8" and env["LOCAL_RANK"] == "1"
    assert env["MASTER_ADDR"] == "n1" and env["MASTER_PORT"] == "29734" and env["LOCAL_WORLD_SIZE"] == "4"
    assert torch_env({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "x", "SLURM_PROCID": "5"})["RANK"] == "0"


def test_pair_schedule_is_complete_small_and_bounded_large():
    from ddpdoctor.comm.worker import pair_schedule

    assert pair_schedule(3) == [(0, 1), (0, 2), (1, 2)]
    big = pair_schedule(64)
    assert len(big) < 64 * 2 + 1 and all(i < j for i, j in big)
    assert {r for p in big for r in p} == set(range(64))


def test_loopback_interface_in_a_multi_host_run():
    s = failed(failure={"rank": 0, "phase": "init_process_group", "kind": "timeout", "message": "Timed out"},
               summaries={"0": dict(SUMMARY, rank=0, host="a", env={"GLOO_SOCKET_IFNAME": "eth0"}),
                          "1": dict(SUMMARY, rank=1, host="b", env={"GLOO_SOCKET_IFNAME": "lo"})})
    (f,) = findings_of(make_snapshot(comm=s), "COMM006")
    assert "iface:lo" in f.subjects and "host:b" in f.subjects and "rank:1" in f.subjects
    assert findings_of(make_snapshot(comm=s), "COMM013") == []
    one_host = failed(failure=s["failure"], summaries={"0": dict(SUMMARY, rank=0, env={"GLOO_SOCKET_IFNAME": "lo"}),
                                                       "1": dict(SUMMARY, rank=1, env={"GLOO_SOCKET_IFNAME": "lo"})})
    assert findings_of(make_snapshot(comm=one_host), "COMM006") == []


def test_mpirun_variables_map_to_torch_names():
    from ddpdoctor.comm.envmap import torch_env

    env = torch_env({"OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_SIZE": "8", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
                     "OMPI_COMM_WORLD_LOCAL_SIZE": "4", "MASTER_ADDR": "head", "MASTER_PORT": "29500"})
    assert (env["RANK"], env["WORLD_SIZE"], env["LOCAL_RANK"], env["LOCAL_WORLD_SIZE"]) == ("5", "8", "1", "4")
    assert torch_env({"PMI_RANK": "2", "PMI_SIZE": "4"})["RANK"] == "2"
    assert "MASTER_ADDR" not in torch_env({"PMI_RANK": "2", "PMI_SIZE": "4"})


def test_check_under_mpirun_without_master_addr_does_not_run_a_private_test():
    from ddpdoctor.comm.api import comm_section_for_check
    from ddpdoctor.gather.launcher import launcher_from_env
    from ddpdoctor.pipeline.snapshot import Snapshot

    env = {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2"}
    snap = Snapshot(sections={"launcher": launcher_from_env(env), "gpus": {"unavailable": "no driver"}})
    import os
    saved = {k: os.environ.pop(k) for k in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE") if k in os.environ}
    try:
        os.environ.update(env)
        section = comm_section_for_check(snap)
    finally:
        for k in env:
            os.environ.pop(k, None)
        os.environ.update(saved)
    assert "mpirun" in section.get("unavailable", ""), section


def test_busbw_on_one_rank_is_zero_as_in_nccl_tests():
    from ddpdoctor.comm import metrics

    assert metrics.bandwidth("all_reduce", 10 ** 9, 1.0, 1)["busbw_gbps"] == 0.0
    assert metrics.bandwidth("all_reduce", 10 ** 9, 1.0, 2)["busbw_gbps"] == 1.0


def test_torch_cuda_build_mismatch_names_the_odd_host():
    # round 13 wave 2: torch.version.cuda was recorded by every rank but not compared
    s = sec(summaries={"0": dict(SUMMARY, rank=0, torch_cuda="12.1"), "1": dict(SUMMARY, rank=1, torch_cuda="12.1"),
                       "2": dict(SUMMARY, rank=2, host="node2", torch_cuda="11.8")})
    (f,) = findings_of(make_snapshot(comm=s), "COMM004")
    assert "CUDA build" in f.title and "rank:2" in f.subjects and "cu121" in f.fix and "node2" in f.fix
    same = sec(summaries={"0": dict(SUMMARY, rank=0, torch_cuda="12.1"), "1": dict(SUMMARY, rank=1, torch_cuda="12.1")})
    assert findings_of(make_snapshot(comm=same), "COMM004") == []
    # a summary without the field is unknown, not different
    old = sec(summaries={"0": dict(SUMMARY, rank=0, torch_cuda="12.1"), "1": {k: v for k, v in SUMMARY.items()
                                                                             if k != "torch_cuda"} | {"rank": 1}})
    assert findings_of(make_snapshot(comm=old), "COMM004") == []
