"""check29b (issue 26, round 23): ENV/launch classes, each with a trigger and a quiet fixture.
Pure: snapshots are built by the factory over recorded facts; no process is started."""
from __future__ import annotations

from factory import findings_of, make_snapshot

from ddpdoctor.facts.launchers import deepspeed_checks_included_slots, deepspeed_resource_filter

# -- ENV021: a `deepspeed` launch against the runner's resource pool (data/launchers.json deepspeed_resource_filter,
# deepspeed/launcher/runner.py parse_resource_filter @edaa7221; included slots as device indices from 0.15.2, #6530) --


def _ds(options, hostfile=("absent",), version="0.9.2", n=2, hostname="work1", env=None):
    host = {"hostname": hostname}
    if hostfile != ("absent",):
        host["deepspeed_hostfile"] = hostfile
    return make_snapshot(env=env or {}, host=host, packages={"deepspeed": version},
                         gpus={"devices": [{"index": i} for i in range(n)]},
                         launch={"commands": [{"launcher": "deepspeed", "options": options, "program": "train.py",
                                               "depth": 0}], "depth_read": 0})


HF = {"path": "/job/hostfile", "hosts": {"work1": 2, "work2": 2}, "errors": []}


def test_the_table_gives_the_release_that_took_included_slots_as_devices():
    table = deepspeed_resource_filter()
    assert table["slots_from_include_since"] == "0.15.2"
    assert all(src.get("commit") and len(src["commit"]) == 40 for src in table["sources"])
    assert deepspeed_checks_included_slots("0.15.1") is True
    assert deepspeed_checks_included_slots("0.16.4") is False
    assert deepspeed_checks_included_slots(None) is None


def test_a_slot_beyond_another_hosts_slots_in_the_hostfile_stops_an_old_runner():
    [f] = findings_of(_ds({"include": "work2:2,3"}, hostfile=HF), "ENV021")
    assert f.severity == "error" and "slot 2 on work2" in f.title and "slots=2" in f.title
    assert "No slot '2' specified on host 'work2'" in f.detail and "host:work2" in f.subjects
    # from 0.15.2 the runner takes the slots as device indices: a warning (slots= may understate the host)
    [g] = findings_of(_ds({"include": "work2:2,3"}, hostfile=HF, version="0.16.4"), "ENV021")
    assert g.severity == "warning" and "CUDA_VISIBLE_DEVICES" in g.title


def test_slots_within_the_hostfile_are_quiet():
    assert findings_of(_ds({"include": "work1:0,1@work2:1"}, hostfile=HF), "ENV021") == []
    assert findings_of(_ds({"hostfile": "/job/hostfile"}, hostfile=HF), "ENV021") == []


def test_a_host_the_pool_lacks_stops_the_launch():
    [f] = findings_of(_ds({"include": "work3:0"}, hostfile=HF), "ENV021")
    assert f.severity == "error" and "work3" in f.title and "Hostname 'work3' not found in hostfile" in f.detail
    # no hostfile gathered (None: the gatherer found none) and none named: the pool is localhost only
    [g] = findings_of(_ds({"include": "work1:0"}, hostfile=None), "ENV021")
    assert "localhost" in g.title and g.severity == "error"
    assert findings_of(_ds({"include": "localhost:0,1"}, hostfile=None), "ENV021") == []


def test_num_gpus_with_include_is_refused_and_num_gpus_above_slots_warns():
    [f] = findings_of(_ds({"include": "localhost:0", "num_gpus": "1"}, hostfile=None), "ENV021")
    assert f.severity == "error" and "Cannot specify num_nodes/gpus with include/exclude" in f.detail
    [g] = findings_of(_ds({"num_gpus": "4"}, hostfile=HF), "ENV021")
    assert g.severity == "warning" and "--num_gpus 4" in g.title and "slots=2" in g.title
    assert findings_of(_ds({"num_gpus": "2"}, hostfile=HF), "ENV021") == []
