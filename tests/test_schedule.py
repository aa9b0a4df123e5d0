"""The suite's order (tests/schedule.py): longest first, dealt evenly over the xdist workers."""
from __future__ import annotations

import json

import schedule


def shares(order: list, seconds: dict, workers: int) -> list:
    """What worksteal's first split hands each worker: contiguous shares, in seconds."""
    n = len(order)
    cuts = [n * j // workers for j in range(workers + 1)]
    return [sum(seconds[x] for x in order[cuts[j]:cuts[j + 1]]) for j in range(workers)]


def test_longest_first_dealt_round_robin_into_contiguous_shares():
    items = ["a", "b", "c", "d", "e", "f"]
    secs = [1, 60, 5, 30, 2, 40]
    assert schedule.lpt_order(items, secs, 1) == ["b", "f", "d", "c", "e", "a"]
    # share 0 holds the 1st, 3rd, 5th longest, share 1 the 2nd, 4th, 6th
    assert schedule.lpt_order(items, secs, 2) == ["b", "d", "e", "f", "c", "a"]


def test_the_slow_tests_of_the_last_files_no_longer_land_on_one_worker():
    """Trigger: in file order the long process tests sit together at the end, so the second worker's share holds
    nearly all the time. Dealt longest first, the two shares differ by at most the longest test."""
    seconds = {f"tests/test_a.py::t{i}": 0.1 for i in range(40)}
    seconds.update({f"tests/test_run_faults.py::t{i}": 30.0 + i for i in range(10)})
    file_order = list(seconds)
    before = shares(file_order, seconds, 2)
    assert max(before) - min(before) > 200  # the state the order is for
    lpt = schedule.lpt_order(file_order, [seconds[x] for x in file_order], 2)
    after = shares(lpt, seconds, 2)
    assert sorted(lpt) == sorted(file_order)
    assert max(after) - min(after) <= max(seconds.values())


def test_ties_keep_the_collection_order_so_every_worker_computes_the_same_order():
    items = [f"t{i}" for i in range(10)]
    assert schedule.lpt_order(items, [1.0] * 10, 1) == items
    assert schedule.lpt_order(items, [1.0] * 10, 2) == schedule.lpt_order(list(items), [1.0] * 10, 2)


def test_an_unknown_test_gets_the_median_of_its_kind():
    known = {"s1": 10.0, "s2": 30.0, "s3": 20.0, "f1": 0.5}
    est = schedule.estimates(["s1", "s2", "s3", "new_slow", "f1", "new_fast"], [True] * 4 + [False] * 2, known)
    assert est == [10.0, 30.0, 20.0, 20.0, 0.5, 0.5]
    # nothing recorded at all: slow tests before fast ones still
    assert schedule.estimates(["x", "y"], [True, False], {}) == [5.0, 0.01]


def test_workers_from_xdist_env_and_bad_values():
    assert schedule.workers_of({"PYTEST_XDIST_WORKER_COUNT": "2"}) == 2
    assert schedule.workers_of({}) == 1
    assert schedule.workers_of({"PYTEST_XDIST_WORKER_COUNT": "two"}) == 1
    assert schedule.workers_of({"PYTEST_XDIST_WORKER_COUNT": "0"}) == 1


def test_reorder_keeps_every_item_once():
    items = [("m::a", True), ("m::b", False), ("m::c", True), ("m::d", False)]
    out = schedule.reorder(items, lambda i: i[0], lambda i: i[1], {"PYTEST_XDIST_WORKER_COUNT": "2"},
                           {"m::a": 3.0, "m::c": 9.0, "m::b": 0.2})
    assert sorted(out) == sorted(items) and len(out) == len(items)
    assert out[0] == ("m::c", True)


def test_durations_file_missing_or_broken_means_collection_order(tmp_path):
    assert schedule.load_durations(str(tmp_path / "none.json")) == {}
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert schedule.load_durations(str(bad)) == {}
    bad.write_text(json.dumps(["a list"]))
    assert schedule.load_durations(str(bad)) == {}
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"seconds": {"t::a": 2}}))
    assert schedule.load_durations(str(good)) == {"t::a": 2.0}


def test_recorded_sums_the_phases_of_each_test():
    assert schedule.recorded([("t::a", 0.1), ("t::a", 2.0), ("t::a", 0.05), ("t::b", 1)]) == {"t::a": 2.15,
                                                                                               "t::b": 1.0}


def test_the_recorded_file_names_tests_that_exist():
    """The shipped durations are for this suite: most recorded ids are real test files."""
    known = schedule.load_durations()
    assert known, "tests/data/durations.json is missing or empty"
    import os

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    files = {k.split("::")[0] for k in known}
    present = [f for f in files if os.path.exists(os.path.join(root, f))]
    assert len(present) >= 0.9 * len(files), sorted(set(files) - set(present))
