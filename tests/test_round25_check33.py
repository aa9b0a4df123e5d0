"""check33 (issue 26, round 25, first cycle): classes from primary sources, each with a trigger and a quiet fixture.
Pure: snapshots are built by the factory over recorded facts; no process is started."""
from __future__ import annotations

from factory import findings_of, make_snapshot

# -- ENV018 arm: the dynamic loader's variables (glibc elf/rtld.c process_envvars: LD_LIBRARY_PATH, LD_PRELOAD), which
# DeepSpeed's runner does not forward (runner.py EXPORT_ENVS @ edaa7221; data/launchers.json
# deepspeed_remote_loader_variables) --


def _carried(env, listed=()):
    host = {"deepspeed_hostfile": {"path": "/job/hostfile", "hosts": {"node-0": 8, "node-1": 8}, "errors": []},
            "deepspeed_env": {"paths": ["/home/u/.deepspeed_env"] if listed else [], "names": list(listed)},
            "ssh": {"client": "/usr/bin/ssh", "keys": ["id_ed25519"], "agent": False, "config": False}}
    snap = make_snapshot(env=env, host=host, packages={"deepspeed": "0.17.5"})
    return [f for f in findings_of(snap, "ENV018") if "carry" in f.title]


def test_library_path_set_here_is_counted_beside_a_catalogued_setting():
    [f] = _carried({"LD_LIBRARY_PATH": "/opt/nccl-2.21/lib:/usr/local/cuda/lib64", "OMP_NUM_THREADS": "8"})
    assert f.severity == "warning"
    assert "LD_LIBRARY_PATH" in f.title and "OMP_NUM_THREADS" in f.title
    assert "dynamic loader" in f.detail and "LD_LIBRARY_PATH" in f.evidence["not_forwarded"]
    assert '"LD_LIBRARY_PATH=$LD_LIBRARY_PATH"' in f.fix


def test_preload_alone_is_counted():
    [f] = _carried({"LD_PRELOAD": "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"})
    assert "LD_PRELOAD" in f.title and f.severity == "warning"


def test_loader_variables_listed_in_deepspeed_env_or_empty_are_quiet():
    assert _carried({"LD_LIBRARY_PATH": "/opt/nccl/lib"}, listed=["LD_LIBRARY_PATH"]) == []
    assert _carried({"LD_LIBRARY_PATH": ""}) == []
    assert _carried({"LD_LIBRARY_PATH": ":"}) == []
    # forwarded by name (PYTHON*), not a loader variable
    assert _carried({"PYTHONPATH": "/work/src"}) == []


def test_loader_variable_names_come_from_the_data_file_with_their_sources():
    import json
    import pathlib

    from ddpdoctor.facts.launchers import deepspeed_remote_loader_variables

    data = json.loads((pathlib.Path(__file__).resolve().parents[1] / "ddpdoctor" / "data" / "launchers.json")
                      .read_text())["deepspeed_remote_loader_variables"]
    assert set(deepspeed_remote_loader_variables()) == {"LD_LIBRARY_PATH", "LD_PRELOAD"}
    assert {s["repo"] for s in data["sources"]} == {"bminor/glibc", "deepspeedai/DeepSpeed"}
    assert all(len(s["commit"]) == 40 for s in data["sources"])
